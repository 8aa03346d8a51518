/* SPDX-License-Identifier: MIT */
/*
 * test_kill.c - a rank dies or hangs; every survivor must return an error
 * that names it, within a bound, and then destroy its communicator cleanly.
 *
 * usage: test_kill kill shm|tcp     SIGKILL matrix, 2, 3 and 4 ranks x
 *                                   (a) before init completes (once the
 *                                   root has its join, which it logs at
 *                                   DEBUG), (b) in the
 *                                   middle of a 256 MiB allreduce, (c)
 *                                   between two collectives; bound 10 s.
 *        test_kill stop shm|tcp     SIGSTOP a rank in the middle of an
 *                                   allreduce: survivors get IBC_ERR_TIMEOUT
 *                                   naming it, (1) from the liveness
 *                                   heartbeat (defaults: 5 x 1000 ms), and
 *                                   (2) from IBC_TIMEOUT_MS=3000 with the
 *                                   heartbeat slowed to 60 s.
 *        test_kill chain shm|tcp|ib a wait-for chain of 4 ranks: rank r < 3
 *                                   receives from r+1; rank 3 is outside the
 *                                   library (sleeping), or stopped. Only rank
 *                                   0 times out (IBC_TIMEOUT_MS=2000, the
 *                                   others 30 s); it must follow the chain
 *                                   0 -> 1 -> 2 -> 3 through the peers'
 *                                   service threads and name rank 3, not its
 *                                   direct peer 1; so must ranks 1 and 2.
 *                                   Third case: ranks 0-2 call an all-reduce
 *                                   that rank 3 never calls. ib: only in the
 *                                   Soft-RoCE VM (tests/rxe/in_vm_suite.sh).
 * IBC_TEST_TIME_SCALE=S (an integer, 1 .. 20; default 1) multiplies the chain
 * cases' times (rank 0's timeout, the others', rank 3's hold, the bounds)
 * and the destroy bound of every case, for slow machines (the VM under TCG).
 * The victim differs between cases so that rank 0 (the liveness hub) and
 * other ranks are both killed. IBC_TIMEOUT_MS is set to 30 s for the kill
 * cases, so a detection within 10 s proves that liveness, not the
 * collective timeout, noticed the death. IBC_TEST_QUICK (set by the nested
 * ASan run) keeps 3 ranks for the kills and one case per stop variant.
 * Each case prints the worst
 * detection time over the survivors ("# detect ..."), which
 * docs/reliability.md records.
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

#define KILL_BOUND_MS 10000
#define BIG_COUNT (64u << 20) /* 256 MiB of float32 */
#define MID_TIMED 1           /* mid: the allreduce timed (0 .. MID_TIMED run undisturbed) */
#define MID_ATTEMPTS 3        /* mid: tries to signal the victim inside allreduce MID_TIMED + 1 */

static const char *g_transport;
static int64_t g_worst_ms;
static int g_scale = 1; /* IBC_TEST_TIME_SCALE */

static void set_common_env(const char *transport)
{
	setenv("IBC_TRANSPORT", transport, 1);
	setenv("IBC_BOOTSTRAP_TIMEOUT_MS", "30000", 1);
	setenv("IBC_DEBUG", "WARN", 1);
}

/* check one survivor's result: an error, naming @victim, within @bound_ms of @t_kill */
static void check_survivor(const char *what, int rank, int found, const struct rel_res *r,
			   int victim, int64_t t_kill, int64_t bound_ms, int want_st,
			   int64_t *worst)
{
	int64_t dt = r->t_ms - t_kill;

	if (!found) {
		tap_ok(0, "%s: rank %d reported no result in time", what, rank);
		return;
	}
	if (want_st)
		tap_ok(r->status == want_st, "%s: rank %d returns %s (got %s)", what, rank,
		       ibc_status_str(want_st), ibc_status_str(r->status));
	else
		tap_ok(r->status == IBC_ERR_REMOTE || r->status == IBC_ERR_TIMEOUT,
		       "%s: rank %d returns an error (got %s)", what, rank, ibc_status_str(r->status));
	tap_ok(rel_names_rank(r->text, victim), "%s: rank %d's error names rank %d", what, rank,
	       victim);
	if (!rel_names_rank(r->text, victim) || r->status == IBC_OK)
		tap_diag("rank %d said: %s", rank, r->text);
	tap_ok(dt >= 0 && dt <= bound_ms, "%s: rank %d noticed within %lld ms (%lld ms)", what, rank,
	       (long long)bound_ms, (long long)dt);
	if (dt > *worst)
		*worst = dt;
}

/*
 * survivors: destroy returns promptly and the process exits cleanly, over ib
 * too: 16-108 ms per rank in the Soft-RoCE VM for the chain's 4 ranks
 * (2026-11-30). It used to take IB_DRAIN_MS (2 s) per connection there,
 * waiting for a receive marker that Linux 6.1's rxe never flushes; the
 * teardown now counts the receives instead (src/transport/ib/ib_conn.c).
 */
static void finish(const char *what, struct rel_proc *ps, int n, int victim)
{
	int64_t bound = 3000LL * g_scale;
	int i;

	for (i = 0; i < n; i++) {
		struct rel_res r;
		int ret;

		if (i == victim || !ps[i].pid)
			continue;
		ret = rel_expect_res(&ps[i], "destroy", rel_now_ms() + bound + 12000LL * g_scale, &r);
		tap_ok(ret == 1 && r.el_ms < bound, "%s: rank %d destroy returns within %lld ms (%lld ms)",
		       what, i, (long long)bound, ret == 1 ? (long long)r.el_ms : -1LL);
		rel_reap(&ps[i], rel_now_ms() + 10000LL * g_scale);
		tap_ok(rel_exited_ok(&ps[i]), "%s: rank %d exits cleanly (%s)", what, i,
		       rel_wstatus_str(ps[i].wstatus));
	}
	rel_kill_all(ps, n);
}

/* 1 when file @path contains @needle */
static int file_has(const char *path, const char *needle)
{
	char buf[8192];
	FILE *f = fopen(path, "r");
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(buf, sizeof(buf), f))
		found = strstr(buf, needle) != NULL;
	fclose(f);
	return found;
}

/* (a) the victim joined the root and dies while the root waits for a late rank */
static void case_init(int n, int victim)
{
	struct rel_proc ps[REL_MAX_RANKS];
	char uid[2 * IBC_UNIQUE_ID_BYTES + 1];
	char what[128];
	char *argv[] = { "coll", NULL };
	char logf[512];
	char env_file[600];
	char *env_victim[] = { "IBC_DEBUG=DEBUG", "IBC_DEBUG_SUBSYS=BOOT", env_file, NULL };
	int late = (victim + 1) % n;
	int64_t t_kill;
	int64_t worst = 0;
	int i;

	snprintf(what, sizeof(what), "kill %s n=%d before init completes, victim %d", g_transport, n,
		 victim);
	memset(ps, 0, sizeof(ps));
	if (rel_new_uid_hex(uid) != IBC_OK)
		tap_bail_out("cannot create a unique id");
	/* the victim logs its join (DEBUG BOOT) to a file: it is killed once the root has it */
	snprintf(logf, sizeof(logf), "%s/ibc-killinit-%d-%d.log",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), n);
	snprintf(env_file, sizeof(env_file), "IBC_DEBUG_FILE=%s", logf);
	unlink(logf);
	for (i = 0; i < n; i++)
		if (i != late && rel_spawn(&ps[i], i, n, uid, argv, i == victim ? env_victim : NULL) != 0)
			tap_bail_out("spawn failed");
	for (i = 0; i < 3000 && !file_has(logf, "joined the bootstrap root"); i++)
		usleep(10 * 1000);
	unlink(logf);
	if (i == 3000) {
		tap_ok(0, "%s: the victim did not join the root within 30 s", what);
		rel_kill_all(ps, n);
		return;
	}
	t_kill = rel_now_ms();
	rel_signal(&ps[victim], SIGKILL);
	rel_reap(&ps[victim], t_kill + 5000);
	if (rel_spawn(&ps[late], late, n, uid, argv, NULL) != 0)
		tap_bail_out("spawn failed");
	for (i = 0; i < n; i++) {
		struct rel_res r;
		int found;

		if (i == victim)
			continue;
		found = rel_expect_res(&ps[i], "init", t_kill + KILL_BOUND_MS + 5000, &r) == 1;
		check_survivor(what, i, found, &r, victim, t_kill, KILL_BOUND_MS, 0, &worst);
	}
	for (i = 0; i < n; i++) {
		if (i == victim)
			continue;
		rel_reap(&ps[i], rel_now_ms() + 10000);
		tap_ok(rel_exited_ok(&ps[i]), "%s: rank %d exits cleanly (%s)", what, i,
		       rel_wstatus_str(ps[i].wstatus));
	}
	rel_kill_all(ps, n);
	tap_diag("detect %s: worst %lld ms", what, (long long)worst);
	if (worst > g_worst_ms)
		g_worst_ms = worst;
}

/* "N bytes moved so far" in an error text, -1 when absent */
static long long bytes_moved(const char *text)
{
	const char *p = strstr(text, " bytes moved so far");

	while (p && p > text && p[-1] >= '0' && p[-1] <= '9')
		p--;
	return p ? atoll(p) : -1;
}

/* the time (ms, CLOCK_MONOTONIC as the workers) of an "EV name idx T" line; -1 if none */
static int64_t ev_time(const char *line)
{
	const char *sp = strrchr(line, ' ');

	return sp ? atoll(sp + 1) : -1;
}

/*
 * wait for every rank's "EV coll-start @idx"; *@last_p: the latest start time.
 * Return: 0, or 1 + the first rank that did not report it within 60 s.
 */
static int wait_coll_start(struct rel_proc *ps, int n, int idx, int64_t *last_p)
{
	char prefix[32];
	char line[REL_LINE_MAX];
	int i;

	snprintf(prefix, sizeof(prefix), "EV coll-start %d ", idx);
	*last_p = 0;
	for (i = 0; i < n; i++) {
		if (rel_expect(&ps[i], prefix, rel_now_ms() + 60000, line, sizeof(line)) != 1)
			return i + 1;
		if (ev_time(line) > *last_p)
			*last_p = ev_time(line);
	}
	return 0;
}

/* did @p report a successful collective number @idx (within 200 ms)? */
static int finished_coll(struct rel_proc *p, int idx)
{
	struct rel_res r;
	int64_t deadline = rel_now_ms() + 200;

	while (rel_expect_res(p, "coll", deadline, &r) == 1)
		if (r.idx == idx && r.status == IBC_OK)
			return 1;
	return 0;
}

/*
 * (b) mid: four 256 MiB allreduces after a 1-element warm-up (which made
 * the connections). The first two run undisturbed; the second (the first
 * is slower: first touch of buffers and scratch) gives D, from the moment
 * the last rank entered it to the moment the first rank left it; @victim
 * is killed (or stopped) D/2 after the last rank entered the third, and
 * the survivors' errors must show that data was moving (bytes moved > 0).
 * If the victim had finished the third allreduce when the signal came, the
 * fourth was hit at an unknown point: the case starts again with new
 * processes (MID_ATTEMPTS tries, then it fails).
 * A fixed delay is not enough: before the ring moves anything, every rank
 * copies its 256 MiB input into its output (ring.c, copy_if_needed), which
 * takes 360-470 ms on 2 cores at load 9, so a kill 200 ms after the start
 * could land before any byte moved, and the survivors then rightly said
 * "0 bytes moved so far" (seen in CI). (c) between: every rank finished
 * its first collective and pauses 1.5 s, polling ibc_comm_get_async_error();
 * the victim dies in the pause: the survivors' async error names it, and
 * their second collective fails at once with the same error.
 */
static void case_coll(int n, int victim, int mid, int sig, int64_t bound_ms, int want_st)
{
	struct rel_proc ps[REL_MAX_RANKS];
	char uid[2 * IBC_UNIQUE_ID_BYTES + 1];
	char what[160];
	char count_s[32];
	char *argv_mid[] = { "coll", "--count", count_s, "--iters", "4", "--warm", NULL };
	char *argv_between[] = { "coll", "--count", "1024", "--iters", "2", "--gap-ms", "1500", NULL };
	char **argv = mid ? argv_mid : argv_between;
	long long moved = -1;
	int aimed_done = -1;    /* a survivor that completed the aimed allreduce */
	int64_t t_in0 = 0;
	int64_t t_out = INT64_MAX;
	int64_t t_kill;
	int64_t worst = 0;
	int attempt;
	int i;
	int k;

	snprintf(count_s, sizeof(count_s), "%u", BIG_COUNT);
	snprintf(what, sizeof(what), "%s %s n=%d %s, victim %d", sig == SIGKILL ? "kill" : "stop",
		 g_transport, n, mid ? "mid 256 MiB allreduce" : "between collectives", victim);
	for (attempt = 1;; attempt++) {
		memset(ps, 0, sizeof(ps));
		if (rel_new_uid_hex(uid) != IBC_OK)
			tap_bail_out("cannot create a unique id");
		for (i = 0; i < n; i++)
			if (rel_spawn(&ps[i], i, n, uid, argv, NULL) != 0)
				tap_bail_out("spawn failed");
		/* mid: the undisturbed allreduces 0 .. MID_TIMED; between: the first collective */
		for (k = 0; k <= (mid ? MID_TIMED : 0); k++) {
			if (mid && wait_coll_start(ps, n, k, &t_in0) != 0) {
				tap_ok(0, "%s: a rank did not start allreduce %d", what, k);
				rel_kill_all(ps, n);
				return;
			}
			t_out = INT64_MAX;
			for (i = 0; i < n; i++) {
				struct rel_res r;
				int64_t deadline = rel_now_ms() + (mid ? 120000 : 60000);

				if (rel_expect_res(&ps[i], "coll", deadline, &r) != 1 ||
				    r.idx != k || r.status != IBC_OK)
					break;
				if (r.t_ms < t_out)
					t_out = r.t_ms;
			}
			if (i < n) {
				tap_ok(0, "%s: rank %d did not complete %s %d", what, i,
				       mid ? "undisturbed allreduce" : "collective", k);
				rel_kill_all(ps, n);
				return;
			}
		}
		if (mid) {
			int64_t d = t_out - t_in0;
			int64_t t_in;

			if (wait_coll_start(ps, n, MID_TIMED + 1, &t_in) != 0) {
				tap_ok(0, "%s: a rank did not start the aimed allreduce", what);
				rel_kill_all(ps, n);
				return;
			}
			if (d < 2)
				d = 2;
			while (rel_now_ms() < t_in + d / 2)
				usleep(1000);
			tap_diag("%s: allreduce %d took %lld ms with every rank in; victim "
				 "signalled %lld ms after the last rank entered allreduce %d",
				 what, MID_TIMED, (long long)d, (long long)(rel_now_ms() - t_in),
				 MID_TIMED + 1);
		}
		t_kill = rel_now_ms();
		rel_signal(&ps[victim], sig);
		if (!mid || !finished_coll(&ps[victim], MID_TIMED + 1))
			break;
		/*
		 * The victim had already finished the aimed allreduce (durations
		 * vary a lot on a loaded machine): the signal hit the next one at
		 * an unknown point, maybe before any data moved. Start again.
		 */
		rel_kill_all(ps, n);
		if (attempt == MID_ATTEMPTS) {
			tap_ok(0, "%s: in %d attempts the victim was never signalled inside the "
			       "aimed allreduce (it always finished first)", what, attempt);
			return;
		}
		tap_diag("%s: attempt %d: the victim had finished the aimed allreduce when "
			 "signalled; again", what, attempt);
	}
	for (i = 0; i < n; i++) {
		struct rel_res r;
		int found;

		if (i == victim)
			continue;
		found = rel_expect_res(&ps[i], mid ? "coll" : "async", t_kill + bound_ms + 5000, &r) == 1;
		/* survivors may finish the aimed allreduce if the victim sent all they needed */
		while (mid && found && r.status == IBC_OK && r.idx < MID_TIMED + 2) {
			if (r.idx == MID_TIMED + 1 && aimed_done < 0)
				aimed_done = i;
			found = rel_expect_res(&ps[i], "coll", t_kill + bound_ms + 5000, &r) == 1;
		}
		if (found && r.status != IBC_OK && r.status != 100)
			tap_diag("rank %d said: %s", i, r.text);
		if (found && bytes_moved(r.text) > moved)
			moved = bytes_moved(r.text);
		check_survivor(what, i, found, &r, victim, t_kill, bound_ms, want_st, &worst);
		if (!mid && found) {
			struct rel_res r2;
			int st1 = r.status;

			found = rel_expect_res(&ps[i], "coll", rel_now_ms() + 5000, &r2) == 1;
			tap_ok(found && r2.status == st1 && r2.el_ms < 100 && rel_names_rank(r2.text, victim),
			       "%s: rank %d's next collective fails at once with the same error (%s, %lld ms)",
			       what, i, found ? ibc_status_str(r2.status) : "none",
			       found ? (long long)r2.el_ms : -1LL);
		}
	}
	/*
	 * A survivor that completed the aimed allreduce got all of it from the
	 * victim, which died at its very end: the survivor then fails in the
	 * next one, rightly with 0 bytes moved (seen once on 2 shm ranks in a
	 * clean-clone run). The 256 MiB it received are the data that was moving.
	 */
	if (mid)
		tap_ok(moved > 0 || aimed_done >= 0,
		       "%s: data was moving when the victim went (%lld bytes moved%s)", what, moved,
		       aimed_done >= 0 ? "; a survivor completed the aimed allreduce, then failed in the next" : "");
	finish(what, ps, n, victim);
	tap_diag("detect %s: worst %lld ms", what, (long long)worst);
	if (worst > g_worst_ms)
		g_worst_ms = worst;
}

/*
 * The wait-for chain (ibc_comm_chase()): 4 ranks, rank r < 3 receives from
 * r+1; rank 3 sleeps outside the library (@stop 0: it answers "in no
 * operation") or is stopped (@stop 1: it does not answer). Liveness is slowed
 * to 60 s so that only the chain can name rank 3. Times scale with g_scale:
 * rank 0's IBC_TIMEOUT_MS is 2000 x S, rank 3 holds 7000 x S ms, and each
 * survivor must fail within rank 0's timeout + 3000 x S ms of the moment all
 * ranks were ready (the others' timeout, 30000 x S, is set by main()).
 */
static void case_chain(int stop, int coll)
{
	enum { N = 4, LAST = N - 1 };
	struct rel_proc ps[REL_MAX_RANKS];
	char uid[2 * IBC_UNIQUE_ID_BYTES + 1];
	char what[128];
	char hold_s[32];
	char env_to[64];
	char blame[64];
	char *argv_p2p[] = { "chain", "--hold-ms", hold_s, "--coll", "recv", NULL };
	char *argv_coll[] = { "chain", "--hold-ms", hold_s, "--coll", "allreduce", NULL };
	char **argv = coll ? argv_coll : argv_p2p;
	char *env0[] = { env_to, NULL };
	const char *verdict = stop ? "rank 3 does not answer" : "rank 3 is in no ibcoll operation";
	int64_t timeout0 = 2000LL * g_scale;
	int64_t bound = timeout0 + 3000LL * g_scale;
	int64_t worst = 0;
	int64_t t_ready;
	int i;

	snprintf(hold_s, sizeof(hold_s), "%d", 7000 * g_scale);
	snprintf(env_to, sizeof(env_to), "IBC_TIMEOUT_MS=%lld", (long long)timeout0);
	/* the culprit comes first, on this transport: "... on tcp: peer rank 3 (host h): ..." */
	snprintf(blame, sizeof(blame), "on %s: peer rank %d (host ", g_transport, LAST);
	snprintf(what, sizeof(what), "chain %s n=%d%s, rank %d %s", g_transport, N,
		 coll ? " (all-reduce)" : "", LAST, stop ? "stopped" : "outside the library");
	memset(ps, 0, sizeof(ps));
	if (rel_new_uid_hex(uid) != IBC_OK)
		tap_bail_out("cannot create a unique id");
	for (i = 0; i < N; i++)
		if (rel_spawn(&ps[i], i, N, uid, argv, i == 0 ? env0 : NULL) != 0)
			tap_bail_out("spawn failed");
	for (i = 0; i < N; i++) {
		char line[256];
		struct rel_res r;

		if (rel_expect_res(&ps[i], "warm", rel_now_ms() + 60000LL * g_scale, &r) != 1 ||
		    r.status != IBC_OK ||
		    rel_expect(&ps[i], "EV ready", rel_now_ms() + 5000LL * g_scale, line,
			       sizeof(line)) != 1) {
			tap_ok(0, "%s: rank %d did not finish the ring shift", what, i);
			rel_kill_all(ps, N);
			return;
		}
	}
	t_ready = rel_now_ms();
	if (stop)
		rel_signal(&ps[LAST], SIGSTOP);
	for (i = 0; i < LAST; i++) {
		struct rel_res r;
		int found = rel_expect_res(&ps[i], "chain", t_ready + 2 * bound, &r) == 1;

		if (found && r.status != IBC_OK)
			tap_diag("rank %d said: %s", i, r.text);
		tap_ok(found && r.status == IBC_ERR_TIMEOUT, "%s: rank %d returns IBC_ERR_TIMEOUT (got %s)",
		       what, i, found ? ibc_status_str(r.status) : "nothing in time");
		tap_ok(found && strstr(r.text, blame) && !strstr(r.text, "peer rank 1 (host "),
		       "%s: rank %d's error blames rank %d ('%s'), not rank 0's direct peer 1", what,
		       i, LAST, blame);
		if (coll)
			/* the all-reduce's own schedule decides who waits on whom */
			tap_ok(found && strstr(r.text, verdict), "%s: rank %d's error says '%s'", what,
			       i, verdict);
		else
			tap_ok(found && strstr(r.text, "rank 1 waits on rank 2") &&
				       strstr(r.text, "rank 2 waits on rank 3") && strstr(r.text, verdict),
			       "%s: rank %d's error shows the chain (rank 1 waits on rank 2, rank 2 waits on rank 3, %s)",
			       what, i, verdict);
		tap_ok(found && r.t_ms - t_ready < bound,
		       "%s: rank %d fails within IBC_TIMEOUT_MS + %d s (%lld ms)", what, i,
		       3 * g_scale, found ? (long long)(r.t_ms - t_ready) : -1LL);
		if (found && r.t_ms - t_ready > worst)
			worst = r.t_ms - t_ready;
	}
	if (stop) {
		rel_signal(&ps[LAST], SIGKILL);
		rel_reap(&ps[LAST], rel_now_ms() + 5000LL * g_scale);
		ps[LAST].pid = 0;
	}
	finish(what, ps, N, stop ? LAST : -1);
	tap_diag("detect %s: rank 0's IBC_TIMEOUT_MS=%lld, worst %lld ms after all were ready",
		 what, (long long)timeout0, (long long)worst);
}

int main(int argc, char **argv)
{
	int quick = getenv("IBC_TEST_QUICK") != NULL;
	const char *scale = getenv("IBC_TEST_TIME_SCALE");
	int chain;
	int n;

	if (argc != 3 || (strcmp(argv[1], "kill") && strcmp(argv[1], "stop") && strcmp(argv[1], "chain")))
		goto usage;
	chain = !strcmp(argv[1], "chain");
	/* ib: the chain only (the kill and stop cases move 256 MiB, too much for the VM) */
	if (strcmp(argv[2], "shm") && strcmp(argv[2], "tcp") && (!chain || strcmp(argv[2], "ib")))
		goto usage;
	if (scale && *scale) {
		char *end = NULL;
		long v = strtol(scale, &end, 10);

		g_scale = *end || v < 1 || v > 20 ? 0 : (int)v;
		if (!g_scale) {
			fprintf(stderr, "test_kill: IBC_TEST_TIME_SCALE=%s: not an integer in 1 .. 20\n",
				scale);
			return 2;
		}
	}
	g_transport = argv[2];
	set_common_env(g_transport);
	if (chain) {
		char to[32];

		snprintf(to, sizeof(to), "%d", 30000 * g_scale);
		setenv("IBC_TIMEOUT_MS", to, 1);
		setenv("IBC_HEARTBEAT_MS", "60000", 1);
		case_chain(0, 0);
		case_chain(1, 0);
		case_chain(0, 1);
		return tap_done();
	}
	if (!strcmp(argv[1], "kill")) {
		setenv("IBC_TIMEOUT_MS", "30000", 1);
		for (n = quick ? 3 : 2; n <= (quick ? 3 : 4); n++) {
			case_init(n, (n + 0) % n);
			case_coll(n, (n + 1) % n, 1, SIGKILL, KILL_BOUND_MS, 0);
			case_coll(n, (n + 2) % n, 0, SIGKILL, KILL_BOUND_MS, 0);
		}
	} else {
		/* (1) liveness: 5 silent heartbeat intervals of 1000 ms */
		setenv("IBC_TIMEOUT_MS", "60000", 1);
		case_coll(3, 1, 1, SIGSTOP, 8000, IBC_ERR_TIMEOUT);
		if (!quick)
			case_coll(4, 0, 1, SIGSTOP, 8000, IBC_ERR_TIMEOUT);
		/* (2) the collective timeout, liveness too slow to matter */
		setenv("IBC_TIMEOUT_MS", "3000", 1);
		setenv("IBC_HEARTBEAT_MS", "60000", 1);
		if (!quick)
			case_coll(3, 2, 1, SIGSTOP, 6000, IBC_ERR_TIMEOUT);
		/*
		 * The survivors' 3000 ms start when they wait for the victim,
		 * after their own part of the 256 MiB call: under the nested
		 * ASan run (quick) that part is slower, detection took
		 * 6346-6538 ms once (2026-12-03; 4464 ms without ASan in the
		 * same CI run, 3756-4009 in docs/reliability.md)
		 */
		case_coll(4, 1, 1, SIGSTOP, quick ? 9000 : 6000, IBC_ERR_TIMEOUT);
	}
	tap_diag("worst detection time, %s %s: %lld ms", argv[1], g_transport,
		 (long long)g_worst_ms);
	return tap_done();
usage:
	fprintf(stderr, "usage: test_kill kill|stop shm|tcp, test_kill chain shm|tcp|ib\n");
	return 2;
}
