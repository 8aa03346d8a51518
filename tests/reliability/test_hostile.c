/* SPDX-License-Identifier: MIT */
/*
 * test_hostile.c - calls that differ between ranks where the messages alone
 * do not show it (issue 20, cases 1 and 2), over shm and tcp:
 *   - a broadcast and a reduce where one of 4 ranks names another root,
 *     after a first call of the same collective (the tuner then runs the
 *     tree, where the rank that thinks it is the root receives nothing);
 *   - an all-reduce that one rank calls with count 0 and then a barrier,
 *     while the others call it with 1024 elements (the shm all-reduce's
 *     segment path);
 *   - a small broadcast (eager over shm: the root returns at once) where
 *     one rank passes another count or names itself the root, followed at
 *     once by every rank's destroy (no poll): destroy's status counts, and
 *     must be the mismatch on every rank whose call returned IBC_OK
 *     (over shm only: the eager path);
 *   - a rank that destroys the communicator right after creating it while
 *     the others make a first all-reduce ("left before the first call", 3
 *     and 5 ranks) or a ring of sends and receives (2 and 3 ranks): the
 *     others wait to connect to it, which can never happen, and must get
 *     IBC_ERR_REMOTE naming it within 5 s (it took IBC_BOOTSTRAP_TIMEOUT_MS,
 *     60 s by default, before).
 * Checks on every rank: its first error, from the call itself, the one
 * after, or ibc_comm_get_async_error() while it polls (or from the first
 * call, the same on every rank, when a rank is still in it as another
 * rank's report arrives), is
 * IBC_ERR_INVALID_USAGE saying "mismatched calls" within 5 s (the timeout
 * is 60 s, so detection does not come from it), no rank blames a live peer
 * ("exited or crashed") or reports "a cycle of waits", some rank's text
 * names both sides' values, no call returned wrong data as a success, and
 * every rank destroys and exits cleanly.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibcoll.h"
#include "rel_harness.h"
#include "tap.h"

#define BOUND_MS 5000
#define REL_DATA_WRONG 100      /* rel_worker's status for a wrong result */

struct hcase {
	const char *name;
	int nranks;
	const char *coll;
	const char *dtype;
	const char *count;              /* every rank's, and the first call's */
	const char *then;               /* a second call after it, or NULL */
	int odd;                        /* the rank that differs */
	const char *odd_opt;
	const char *odd_val;
	const char *want_a;             /* both sides' values, in some rank's text */
	const char *want_b;
	int at_destroy;                 /* no poll: destroy's status is a verdict */
};

static const struct hcase cases[] = {
	{ "broadcast root", 4, "broadcast", "i32", "1000", NULL, 1, "--root", "1", "root 0",
	  "root 1", 0 },
	{ "reduce root", 4, "reduce", "i32", "1000", NULL, 1, "--root", "1", "root 0", "root 1",
	  0 },
	{ "zero count", 4, "allreduce", "f32", "1024", "barrier", 0, "--count", "0", "count 0",
	  "count 1024", 0 },
	{ "zero count, last rank", 3, "allreduce", "f32", "1024", "barrier", 2, "--count", "0",
	  "count 0", "count 1024", 0 },
	{ "broadcast count, then destroy", 5, "broadcast", "i32", "4", NULL, 3, "--count", "5",
	  "count 4", "count 5", 1 },
	{ "broadcast self-root, then destroy", 2, "broadcast", "i32", "4", NULL, 1, "--root", "1",
	  "root 0", "root 1", 1 },
};

/* phases whose status counts as a rank's verdict, in the order the worker reports them */
static int verdict_phase(const char *phase, int at_destroy)
{
	return !strcmp(phase, "warm") || !strcmp(phase, "coll") || !strcmp(phase, "then") ||
	       !strcmp(phase, "async") || (at_destroy && !strcmp(phase, "destroy"));
}

static void run_case(const char *transport, const struct hcase *hc)
{
	struct rel_proc ps[REL_MAX_RANKS];
	char uid[2 * IBC_UNIQUE_ID_BYTES + 1];
	char what[160];
	int both = 0;
	int i;

	snprintf(what, sizeof(what), "%s: %s, rank %d of %d differs", transport, hc->name, hc->odd,
		 hc->nranks);
	memset(ps, 0, sizeof(ps));
	if (rel_new_uid_hex(uid) != IBC_OK)
		tap_bail_out("cannot create a unique id");
	for (i = 0; i < hc->nranks; i++) {
		char *argv[20] = { "coll", "--count", (char *)hc->count, "--coll", (char *)hc->coll,
				   "--dtype", (char *)hc->dtype, "--warm-coll", (char *)hc->count,
				   "--watch-ms", "5000" };
		int k = hc->at_destroy ? 9 : 11;

		if (hc->then) {
			argv[k++] = "--then";
			argv[k++] = (char *)hc->then;
		}
		if (i == hc->odd) {
			argv[k++] = (char *)hc->odd_opt;
			argv[k++] = (char *)hc->odd_val;
		}
		argv[k] = NULL;
		if (rel_spawn(&ps[i], i, hc->nranks, uid, argv, NULL) != 0)
			tap_bail_out("spawn failed");
	}
	for (i = 0; i < hc->nranks; i++) {
		int64_t deadline = rel_now_ms() + 3 * BOUND_MS + 20000;
		struct rel_res first;
		struct rel_res r;
		int warm_ok = 0;
		int have = 0;
		int wrong = 0;
		int destroyed = 0;
		char line[REL_LINE_MAX];
		char seen[4096] = "";
		int got;

		memset(&first, 0, sizeof(first));
		while ((got = rel_expect(&ps[i], "RES ", deadline, line, sizeof(line))) == 1) {
			if (strlen(seen) + 80 < sizeof(seen))
				snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "[%.70s] ", line);
			if (rel_parse_res(line, &r) != 0)
				continue;
			/* a slow rank may still be in the first call when the report arrives */
			if (!strcmp(r.phase, "warm"))
				warm_ok = r.status == IBC_OK ||
					  (r.status == IBC_ERR_INVALID_USAGE &&
					   strstr(r.text, "mismatched calls") && strstr(r.text, "error on rank"));
			if (verdict_phase(r.phase, hc->at_destroy) && r.status == REL_DATA_WRONG)
				wrong = 1;
			if (verdict_phase(r.phase, hc->at_destroy) && r.status != IBC_OK && !have) {
				first = r;
				have = 1;
			}
			if (!strcmp(r.phase, "destroy")) {
				destroyed = r.el_ms < 3000;
				break;
			}
		}
		if (!tap_ok(warm_ok, "%s: rank %d's first call (the same on every rank) succeeds, or fails with another rank's report", what, i))
			tap_diag("rank %d's lines (%s): %s", i, got == 1 ? "read" : got ? "EOF" : "timeout", seen);
		tap_ok(!wrong, "%s: rank %d got no wrong result reported as a success", what, i);
		tap_ok(have && first.status == IBC_ERR_INVALID_USAGE && first.el_ms <= BOUND_MS,
		       "%s: rank %d's first error is invalid usage within %d ms (%s in %s after %lld ms)",
		       what, i, BOUND_MS, have ? ibc_status_str(first.status) : "none",
		       have ? first.phase : "-", have ? (long long)first.el_ms : -1LL);
		tap_ok(have && strstr(first.text, "mismatched calls") &&
		       !strstr(first.text, "exited or crashed") && !strstr(first.text, "cycle of waits"),
		       "%s: rank %d says mismatched calls, blames no live peer's exit, reports no cycle of waits",
		       what, i);
		if (have && (!strstr(first.text, "mismatched calls") ||
			     first.status != IBC_ERR_INVALID_USAGE))
			tap_diag("rank %d said (%s): %s", i, first.phase, first.text);
		if (have && strstr(first.text, hc->want_a) && strstr(first.text, hc->want_b))
			both = 1;
		tap_ok(destroyed, "%s: rank %d destroys within 3 s", what, i);
	}
	tap_ok(both, "%s: a rank's error names both sides' values (%s / %s)", what, hc->want_a,
	       hc->want_b);
	for (i = 0; i < hc->nranks; i++) {
		rel_reap(&ps[i], rel_now_ms() + 10000);
		tap_ok(rel_exited_ok(&ps[i]), "%s: rank %d exits cleanly (%s)", what, i,
		       rel_wstatus_str(ps[i].wstatus));
	}
	rel_kill_all(ps, hc->nranks);
}

/* rank @gone of @nranks creates the communicator and destroys it at once; the others run @coll */
static void run_left_case(const char *transport, int nranks, int gone, const char *coll)
{
	struct rel_proc ps[REL_MAX_RANKS];
	char uid[2 * IBC_UNIQUE_ID_BYTES + 1];
	char what[160];
	char who[32];
	int i;

	snprintf(what, sizeof(what), "%s: left before the first call (%s), rank %d of %d", transport,
		 coll, gone, nranks);
	snprintf(who, sizeof(who), "rank %d", gone);
	memset(ps, 0, sizeof(ps));
	if (rel_new_uid_hex(uid) != IBC_OK)
		tap_bail_out("cannot create a unique id");
	for (i = 0; i < nranks; i++) {
		char *coll_argv[] = { "coll", "--count", "1", "--coll", (char *)coll, NULL };
		char *idle_argv[] = { "idle", "--max-ms", "0", NULL };

		if (rel_spawn(&ps[i], i, nranks, uid, i == gone ? idle_argv : coll_argv, NULL) != 0)
			tap_bail_out("spawn failed");
	}
	for (i = 0; i < nranks; i++) {
		struct rel_res r;
		int found;

		if (i == gone) {
			found = rel_expect_res(&ps[i], "destroy", rel_now_ms() + 20000, &r) == 1;
			tap_ok(found && r.status == IBC_OK, "%s: rank %d destroys (%s)", what, i,
			       found ? ibc_status_str(r.status) : "no result");
			continue;
		}
		found = rel_expect_res(&ps[i], "coll", rel_now_ms() + BOUND_MS + 20000, &r) == 1;
		tap_ok(found && r.status == IBC_ERR_REMOTE && r.el_ms <= BOUND_MS,
		       "%s: rank %d's call returns remote peer failed within %d ms (%s after %lld ms)",
		       what, i, BOUND_MS, found ? ibc_status_str(r.status) : "none",
		       found ? (long long)r.el_ms : -1LL);
		tap_ok(found && strstr(r.text, who) &&
		       (strstr(r.text, "destroyed") || strstr(r.text, "exited")),
		       "%s: rank %d's text names %s as gone", what, i, who);
		if (found)
			tap_diag("rank %d said: %s", i, r.text);
	}
	for (i = 0; i < nranks; i++) {
		rel_reap(&ps[i], rel_now_ms() + 10000);
		tap_ok(rel_exited_ok(&ps[i]), "%s: rank %d exits cleanly (%s)", what, i,
		       rel_wstatus_str(ps[i].wstatus));
	}
	rel_kill_all(ps, nranks);
}

/*
 * usage: test_hostile [TRANSPORT [CASE-PREFIX]]: every case over shm and
 * tcp by default; the VM suite runs the root cases over ib ("ib root").
 */
int main(int argc, char **argv)
{
	static const char *const transports[] = { "shm", "tcp" };
	const char *only_tp = argc > 1 ? argv[1] : NULL;
	const char *only_case = argc > 2 ? argv[2] : NULL;
	size_t t;
	size_t c;

	setenv("IBC_TIMEOUT_MS", "60000", 1); /* detection must not come from the timeout */
	for (t = 0; t < (only_tp ? 1 : 2); t++) {
		const char *tp = only_tp ? only_tp : transports[t];

		setenv("IBC_TRANSPORT", tp, 1);
		for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			if (only_case && !strstr(cases[c].name, only_case))
				continue;
			/*
			 * the destroy cases are the shm segment's eager broadcast;
			 * over tcp and ib the broadcast is a tree of messages, where
			 * (as in MPI and NCCL) a rank that saw no disagreement
			 * itself learns of it as an asynchronous error only (the
			 * cases above, which poll)
			 */
			if (cases[c].at_destroy && strcmp(tp, "shm") != 0)
				continue;
			run_case(tp, &cases[c]);
		}
		if (!only_case || strstr("left before the first call", only_case)) {
			run_left_case(tp, 3, 0, "allreduce");
			run_left_case(tp, 5, 2, "allreduce");
			/* a ring of sends and receives: the batch's own connection wait */
			run_left_case(tp, 3, 0, "sendrecv");
			run_left_case(tp, 2, 1, "sendrecv");
		}
	}
	return tap_done();
}
