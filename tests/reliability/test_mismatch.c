/* SPDX-License-Identifier: MIT */
/*
 * test_mismatch.c - ranks that call mismatched collectives get an error, not
 * a hang: 3 ranks, one of which differs in count, dtype, root, collective,
 * or point-to-point count (also counts on either side of a shm path's
 * threshold: one rank on the ring, the others in the shm segment); over shm
 * and tcp. Checks on every rank:
 *   - the call fails within 5 s with IBC_ERR_INVALID_USAGE (ranks that see
 *     the mismatch detect it; the others are told through the liveness
 *     hub), or, for a rank whose part completed (a broadcast root's sends
 *     are buffered), ibc_comm_get_async_error() reports it within 5 s;
 *   - some rank's text names both sides' values ("count 1000" and
 *     "count 1001", "float32" and "int32", ...), and every rank's text says
 *     "mismatched calls";
 *   - the communicator is poisoned: the next call fails at once (< 50 ms)
 *     with the same status and the same ibc_last_error() text, and
 *     ibc_comm_get_async_error() reports it;
 *   - destroy returns and the process exits cleanly.
 * A rank still creating the communicator when another rank's report of the
 * mismatch arrives (creation is not a barrier; seen over tcp on 4 ranks)
 * must fail its creation with that report instead.
 * usage: test_mismatch [NRANKS [TRANSPORT]]; make check runs 3 ranks over
 * shm and tcp, and 5 over tcp.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibcoll.h"
#include "rel_harness.h"
#include "tap.h"

static int NR = 3;              /* ranks (argv[1]) */
#define BOUND_MS 5000

struct mcase {
	const char *name;
	const char *coll;               /* what the others call */
	int odd;                        /* the rank that differs */
	const char *odd_opt;            /* its differing option and value */
	const char *odd_val;
	const char *want_a;             /* both sides' values, in some rank's text */
	const char *want_b;
};

static const struct mcase cases[] = {
	{ "count", "allreduce", 1, "--count", "1001", "count 1000", "count 1001" },
	{ "dtype", "allreduce", 2, "--dtype", "i32", "float32", "int32" },
	{ "root", "broadcast", 2, "--root", "1", "root 0", "root 1" },
	{ "collective", "allreduce", 0, "--coll", "broadcast", "allreduce", "broadcast" },
	{ "p2p count", "sendrecv", 1, "--count", "1001", "count 1000", "count 1001" },
	/*
	 * counts that send the ranks down different paths on one host: the
	 * others' 4000-byte broadcast (12000-byte all-gather) goes through the
	 * shm segment in one step, the odd rank's 40000 bytes (60000) through
	 * the ring; the segment's waiters compare the announced counts
	 */
	{ "count across paths", "broadcast", 1, "--count", "10000", "count 1000", "count 10000" },
	{ "count across paths", "allgather", 2, "--count", "5000", "count 1000", "count 5000" },
};

static void run_case(const char *transport, const struct mcase *mc)
{
	struct rel_proc ps[REL_MAX_RANKS];
	char uid[2 * IBC_UNIQUE_ID_BYTES + 1];
	char what[128];
	int both = 0;
	int i;

	snprintf(what, sizeof(what), "%s: mismatched %s, rank %d differs", transport, mc->name,
		 mc->odd);
	memset(ps, 0, sizeof(ps));
	if (rel_new_uid_hex(uid) != IBC_OK)
		tap_bail_out("cannot create a unique id");
	for (i = 0; i < NR; i++) {
		char *argv[12] = { "coll", "--count", "1000", "--coll", (char *)mc->coll, "--again",
				   "--watch-ms", "5000" };
		int k = 8;

		if (i == mc->odd) {
			argv[k++] = (char *)mc->odd_opt;
			argv[k++] = (char *)mc->odd_val;
		}
		argv[k] = NULL;
		if (rel_spawn(&ps[i], i, NR, uid, argv, NULL) != 0)
			tap_bail_out("spawn failed");
	}
	for (i = 0; i < NR; i++) {
		struct rel_res r;
		struct rel_res again;
		struct rel_res async;
		char line[REL_LINE_MAX];
		int found = rel_expect_res(&ps[i], "init", rel_now_ms() + BOUND_MS + 10000, &r) == 1;

		/*
		 * Creation is not a barrier: a rank still in it (its shm set-up's
		 * exchange, over tcp) when another rank's report of the first
		 * call's mismatch arrives fails its creation with that report
		 * (IBC_ERR_REMOTE, the bootstrap's, or the report's own status)
		 */
		if (found && r.status != IBC_OK) {
			tap_ok((r.status == IBC_ERR_INVALID_USAGE || r.status == IBC_ERR_REMOTE) &&
				       r.el_ms <= BOUND_MS + 10000 &&
				       strstr(r.text, "mismatched calls") && strstr(r.text, "error on rank"),
			       "%s: rank %d, still creating the communicator, fails it with another rank's report of mismatched calls (%s after %lld ms)",
			       what, i, ibc_status_str(r.status), (long long)r.el_ms);
			tap_diag("rank %d's creation said: %s", i, r.text);
			continue;
		}
		found = found && rel_expect_res(&ps[i], "coll", rel_now_ms() + BOUND_MS + 10000, &r) == 1;
		if (!found) {
			tap_ok(0, "%s: rank %d returned within %d ms", what, i, BOUND_MS);
			continue;
		}
		if (r.status == IBC_OK) {
			/* this rank's part completed: the error arrives asynchronously */
			found = rel_expect_res(&ps[i], "async", rel_now_ms() + BOUND_MS + 5000, &r) == 1;
			tap_ok(found && r.status == IBC_ERR_INVALID_USAGE && r.el_ms <= BOUND_MS,
			       "%s: rank %d's call completed; ibc_comm_get_async_error() reports invalid usage within %d ms (%s after %lld ms)",
			       what, i, BOUND_MS, found ? ibc_status_str(r.status) : "none",
			       found ? (long long)r.el_ms : -1LL);
		} else {
			tap_ok(r.status == IBC_ERR_INVALID_USAGE && r.el_ms <= BOUND_MS,
			       "%s: rank %d returns invalid usage within %d ms (%s after %lld ms)", what,
			       i, BOUND_MS, ibc_status_str(r.status), (long long)r.el_ms);
		}
		tap_ok(strstr(r.text, "mismatched calls") != NULL, "%s: rank %d says mismatched calls",
		       what, i);
		if (strstr(r.text, mc->want_a) && strstr(r.text, mc->want_b))
			both = 1;
		if (!strstr(r.text, "mismatched calls") || r.status != IBC_ERR_INVALID_USAGE)
			tap_diag("rank %d said: %s", i, r.text);
		found = rel_expect_res(&ps[i], "again", rel_now_ms() + 5000, &again) == 1;
		tap_ok(found && again.status == r.status && again.el_ms < 50,
		       "%s: rank %d's next call fails at once with the same status (%lld ms)", what, i,
		       found ? (long long)again.el_ms : -1LL);
		found = rel_expect(&ps[i], "EV again-same-text", rel_now_ms() + 5000, line,
				   sizeof(line)) == 1;
		tap_ok(found && !strncmp(line, "EV again-same-text 1 ", 21),
		       "%s: rank %d's ibc_last_error() is the same after the second call", what, i);
		found = rel_expect_res(&ps[i], "async", rel_now_ms() + 5000, &async) == 1 &&
			async.idx == 1;
		tap_ok(found && async.status == r.status && !strcmp(async.text, r.text),
		       "%s: rank %d's ibc_comm_get_async_error() reports it", what, i);
		found = rel_expect_res(&ps[i], "destroy", rel_now_ms() + 10000, &r) == 1;
		tap_ok(found && r.el_ms < 3000, "%s: rank %d destroys within 3 s", what, i);
	}
	tap_ok(both, "%s: a rank's error names both sides' values (%s / %s)", what, mc->want_a,
	       mc->want_b);
	for (i = 0; i < NR; i++) {
		rel_reap(&ps[i], rel_now_ms() + 10000);
		tap_ok(rel_exited_ok(&ps[i]), "%s: rank %d exits cleanly (%s)", what, i,
		       rel_wstatus_str(ps[i].wstatus));
	}
	rel_kill_all(ps, NR);
}

/* usage: test_mismatch [NRANKS [TRANSPORT]]: 3 ranks, shm and tcp by default */
int main(int argc, char **argv)
{
	static const char *const transports[] = { "shm", "tcp" };
	const char *only_tp = argc > 2 ? argv[2] : NULL;
	size_t t;
	size_t c;

	if (argc > 1)
		NR = atoi(argv[1]);
	if (NR < 3 || NR > REL_MAX_RANKS)
		tap_bail_out("ranks: 3 to %d", REL_MAX_RANKS);
	setenv("IBC_TIMEOUT_MS", "60000", 1); /* detection must not come from the timeout */
	for (t = 0; t < (only_tp ? 1 : 2); t++) {
		const char *tp = only_tp ? only_tp : transports[t];

		setenv("IBC_TRANSPORT", tp, 1);
		for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
			run_case(tp, &cases[c]);
	}
	return tap_done();
}
