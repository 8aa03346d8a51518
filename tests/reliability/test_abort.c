/* SPDX-License-Identifier: MIT */
/*
 * test_abort.c - ibc_comm_abort() from another thread returns within 1 s
 * whatever the peers do, wakes the blocked thread, frees everything, and
 * the peers learn of it through ibc_comm_get_async_error().
 *
 * 3 ranks: rank 0 runs `rel_worker abort --mode M`: a second thread blocks
 * in an operation on the communicator, the main thread aborts it 300 ms
 * later; ranks 1 and 2 run `rel_worker idle` (poll the async error). Modes:
 *   blocking   ibc_allreduce() stuck in connection set-up (peers never call)
 *   blocking   the same after a warm-up, stuck waiting for data
 *   wait       ibc_wait() on an ibc_iallreduce() run by the progress thread
 *   queued     the same with three more requests queued behind it; their
 *              ibc_wait() after the abort returns the abort's error at once
 *   split      ibc_comm_split() waiting for peers that never call it
 *   and blocking with peer 1 stopped (SIGSTOP) or killed before the abort.
 * Checks: abort <= 1000 ms; the blocked call returns an error <= 1000 ms
 * after the abort started; the process's fds and threads are back to their
 * count before init (everything freed; ASan builds also check leaks); idle
 * peers report IBC_ERR_REMOTE naming rank 0 within 2 s, then destroy.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibcoll.h"
#include "rel_harness.h"
#include "tap.h"

#define NR 3

enum peer_fate { PEER_IDLE = 0, PEER_STOPPED, PEER_KILLED };

/* "USE <what> fds F threads T ..." */
static int parse_use(struct rel_proc *p, const char *what, long *fds, long *threads)
{
	char line[REL_LINE_MAX];
	char prefix[64];

	snprintf(prefix, sizeof(prefix), "USE %s ", what);
	if (rel_expect(p, prefix, rel_now_ms() + 5000, line, sizeof(line)) != 1)
		return -1;
	return sscanf(line + strlen(prefix), "fds %ld threads %ld", fds, threads) == 2 ? 0 : -1;
}

static void run_case(const char *transport, const char *mode, int warm, enum peer_fate fate)
{
	struct rel_proc ps[NR];
	char uid[2 * IBC_UNIQUE_ID_BYTES + 1];
	char what[160];
	char line[REL_LINE_MAX];
	char *argv0[8] = { "abort", "--mode", (char *)mode, "--delay-ms", "300", NULL };
	char *argvi[6] = { "idle", "--max-ms", "15000", NULL };
	struct rel_res ab;
	struct rel_res bl;
	long fds0 = -1;
	long fds1 = -2;
	long thr0 = -1;
	long thr1 = -2;
	int64_t t_abort = 0;
	int i;

	snprintf(what, sizeof(what), "%s: abort while %s%s%s", transport,
		 !strcmp(mode, "blocking") ? (warm ? "blocked in an allreduce"
						   : "blocked in connection set-up")
		 : !strcmp(mode, "wait") ? "blocked in ibc_wait"
		 : !strcmp(mode, "queued") ? "blocked in ibc_wait with 3 requests queued"
		 : "blocked in ibc_comm_split",
		 fate == PEER_STOPPED ? ", rank 1 stopped" : fate == PEER_KILLED ? ", rank 1 killed" : "",
		 "");
	if (warm) {
		argv0[5] = "--warm";
		argvi[3] = "--warm";
	}
	memset(ps, 0, sizeof(ps));
	if (rel_new_uid_hex(uid) != IBC_OK)
		tap_bail_out("cannot create a unique id");
	if (rel_spawn(&ps[0], 0, NR, uid, argv0, NULL) != 0)
		tap_bail_out("spawn failed");
	for (i = 1; i < NR; i++)
		if (rel_spawn(&ps[i], i, NR, uid, argvi, NULL) != 0)
			tap_bail_out("spawn failed");
	for (i = 1; i < NR; i++)
		if (rel_expect(&ps[i], "EV ready", rel_now_ms() + 30000, line, sizeof(line)) != 1)
			break;
	if (i < NR || rel_expect(&ps[0], "EV blocked", rel_now_ms() + 30000, line,
				 sizeof(line)) != 1) {
		tap_ok(0, "%s: ranks did not get ready", what);
		rel_kill_all(ps, NR);
		return;
	}
	if (fate == PEER_STOPPED)
		rel_signal(&ps[1], SIGSTOP);
	else if (fate == PEER_KILLED)
		rel_signal(&ps[1], SIGKILL);
	if (rel_expect_res(&ps[0], "abort", rel_now_ms() + 10000, &ab) != 1) {
		tap_ok(0, "%s: ibc_comm_abort() did not return within 10 s", what);
		rel_kill_all(ps, NR);
		return;
	}
	t_abort = ab.t_ms - ab.el_ms;
	tap_ok(ab.status == IBC_OK && ab.el_ms <= 1000, "%s: ibc_comm_abort() returns IBC_OK within 1 s (%lld ms)",
	       what, (long long)ab.el_ms);
	if (rel_expect_res(&ps[0], "blocked", rel_now_ms() + 5000, &bl) == 1) {
		tap_ok(bl.status != IBC_OK && bl.el_ms <= 1000,
		       "%s: the blocked call returns an error within 1 s of the abort (%s, %lld ms)",
		       what, ibc_status_str(bl.status), (long long)bl.el_ms);
		if (fate == PEER_IDLE && !strcmp(mode, "blocking"))
			tap_ok(strstr(bl.text, "aborted by ibc_comm_abort()") != NULL,
			       "%s: its error says the communicator was aborted", what);
	} else {
		tap_ok(0, "%s: the blocked call never returned", what);
	}
	if (!strcmp(mode, "queued")) {
		for (i = 0; i < 3; i++) {
			struct rel_res q;
			int found = rel_expect_res(&ps[0], "queued", rel_now_ms() + 5000, &q) == 1;

			tap_ok(found && q.status != IBC_OK && q.el_ms < 50,
			       "%s: queued request %d completes with an error at once (%s, %lld ms)",
			       what, i, found ? ibc_status_str(q.status) : "none",
			       found ? (long long)q.el_ms : -1LL);
		}
	}
	parse_use(&ps[0], "before", &fds0, &thr0);
	parse_use(&ps[0], "after", &fds1, &thr1);
	tap_ok(fds0 >= 0 && fds1 == fds0, "%s: every fd closed (%ld before init, %ld after abort)",
	       what, fds0, fds1);
	tap_ok(thr0 >= 0 && thr1 == thr0, "%s: every library thread ended (%ld before, %ld after)",
	       what, thr0, thr1);
	rel_reap(&ps[0], rel_now_ms() + 10000);
	tap_ok(rel_exited_ok(&ps[0]), "%s: rank 0 exits cleanly (%s)", what,
	       rel_wstatus_str(ps[0].wstatus));
	for (i = 1; i < NR; i++) {
		struct rel_res r;
		int found;
		int good;

		if ((fate == PEER_STOPPED || fate == PEER_KILLED) && i == 1)
			continue;
		found = rel_expect_res(&ps[i], "async", rel_now_ms() + 10000, &r) == 1;
		if (fate == PEER_IDLE) {
			good = found && r.status == IBC_ERR_REMOTE && rel_names_rank(r.text, 0) &&
			       strstr(r.text, "aborted") && r.t_ms - t_abort <= 2000;
			tap_ok(good, "%s: rank %d learns that rank 0 aborted within 2 s (%lld ms)", what,
			       i, found ? (long long)(r.t_ms - t_abort) : -1LL);
		} else {
			good = found && r.status != IBC_OK;
			tap_ok(good, "%s: rank %d reports an error (%s)", what, i,
			       found ? ibc_status_str(r.status) : "none");
		}
		/* what it said, whenever the check failed */
		if (found && (!good || !rel_names_rank(r.text, 0)))
			tap_diag("rank %d said (%s): %s", i, ibc_status_str(r.status), r.text);
		found = rel_expect_res(&ps[i], "destroy", rel_now_ms() + 10000, &r) == 1;
		tap_ok(found && r.el_ms < 3000, "%s: rank %d destroys within 3 s", what, i);
		rel_reap(&ps[i], rel_now_ms() + 10000);
		tap_ok(rel_exited_ok(&ps[i]), "%s: rank %d exits cleanly (%s)", what, i,
		       rel_wstatus_str(ps[i].wstatus));
	}
	rel_kill_all(ps, NR);
}

int main(void)
{
	static const char *const transports[] = { "shm", "tcp" };
	size_t t;

	setenv("IBC_TIMEOUT_MS", "60000", 1);
	for (t = 0; t < 2; t++) {
		setenv("IBC_TRANSPORT", transports[t], 1);
		run_case(transports[t], "blocking", 0, PEER_IDLE);
		run_case(transports[t], "blocking", 1, PEER_IDLE);
		run_case(transports[t], "wait", 1, PEER_IDLE);
		run_case(transports[t], "queued", 1, PEER_IDLE);
		run_case(transports[t], "split", 1, PEER_IDLE);
		run_case(transports[t], "blocking", 1, PEER_STOPPED);
		run_case(transports[t], "blocking", 1, PEER_KILLED);
	}
	return tap_done();
}
