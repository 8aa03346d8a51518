/* SPDX-License-Identifier: MIT */
/*
 * test_valgrind.c - a small matrix under valgrind memcheck with zero errors:
 * every rank of every case runs under
 *   valgrind --error-exitcode=99 --leak-check=full
 *            --errors-for-leak-kinds=definite,indirect
 * so an invalid access, a use of uninitialised memory, or a definite or
 * indirect leak makes the process exit with 99 and the case fail.
 * Cases (2 ranks each):
 *   shm  every collective once (blocking and nonblocking), checked results
 *   tcp  the same
 *   shm  mismatched count: both ranks get IBC_ERR_INVALID_USAGE
 *   tcp  ibc_comm_abort() from another thread while ibc_wait() blocks
 *   shm  rank 1 killed between collectives: rank 0 reports it and exits clean
 * Timeouts are generous (valgrind runs code 20-50 times slower); the
 * heartbeat is 2 s so that a slowed rank is not taken for a stopped one.
 * SKIPs when valgrind is missing, and inside the nested ASan build.
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

#define NR 2
#define CASE_MS 120000

static const char *const vg =
	"valgrind --quiet --error-exitcode=99 --leak-check=full "
	"--errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect "
	"--num-callers=30";

/* start NR ranks with per-rank argv; rank @killed (>= 0) runs without valgrind */
static void spawn(struct rel_proc *ps, char **argv0, char **argv1, int plain_rank)
{
	char uid[2 * IBC_UNIQUE_ID_BYTES + 1];
	int i;

	memset(ps, 0, sizeof(*ps) * NR);
	if (rel_new_uid_hex(uid) != IBC_OK)
		tap_bail_out("cannot create a unique id");
	for (i = 0; i < NR; i++) {
		if (i == plain_rank)
			unsetenv("IBC_TEST_WRAPPER");
		else
			setenv("IBC_TEST_WRAPPER", vg, 1);
		if (rel_spawn(&ps[i], i, NR, uid, i == 0 ? argv0 : argv1, NULL) != 0)
			tap_bail_out("spawn failed");
	}
	unsetenv("IBC_TEST_WRAPPER");
}

static void finish(const char *what, struct rel_proc *ps, int skip_rank)
{
	int i;

	for (i = 0; i < NR; i++) {
		if (i == skip_rank)
			continue;
		rel_reap(&ps[i], rel_now_ms() + CASE_MS);
		tap_ok(rel_exited_ok(&ps[i]), "%s: rank %d exits 0 under valgrind, no errors (%s)",
		       what, i, rel_wstatus_str(ps[i].wstatus));
	}
	rel_kill_all(ps, NR);
}

static void case_all(const char *transport)
{
	struct rel_proc ps[NR];
	char what[64];
	char *argv[] = { "coll", "--coll", "all", "--count", "3000", "--iters", "2", NULL };
	int i;

	snprintf(what, sizeof(what), "%s, every collective", transport);
	setenv("IBC_TRANSPORT", transport, 1);
	spawn(ps, argv, argv, -1);
	for (i = 0; i < NR; i++) {
		struct rel_res r;
		int k;
		int good = rel_expect_res(&ps[i], "init", rel_now_ms() + CASE_MS, &r) == 1 &&
			   r.status == IBC_OK;

		for (k = 0; good && k < 2; k++)
			good = rel_expect_res(&ps[i], "coll", rel_now_ms() + CASE_MS, &r) == 1 &&
			       r.status == IBC_OK;
		good = good && rel_expect_res(&ps[i], "destroy", rel_now_ms() + CASE_MS, &r) == 1 &&
		       r.status == IBC_OK;
		tap_ok(good, "%s: rank %d, results exact", what, i);
		if (!good)
			tap_diag("rank %d: %s", i, r.text);
	}
	finish(what, ps, -1);
}

static void case_mismatch(void)
{
	struct rel_proc ps[NR];
	const char *what = "shm, mismatched count";
	char *argv0[] = { "coll", "--count", "1000", NULL };
	char *argv1[] = { "coll", "--count", "1001", NULL };
	int i;

	setenv("IBC_TRANSPORT", "shm", 1);
	spawn(ps, argv0, argv1, -1);
	for (i = 0; i < NR; i++) {
		struct rel_res r;
		int found = rel_expect_res(&ps[i], "coll", rel_now_ms() + CASE_MS, &r) == 1;

		tap_ok(found && r.status == IBC_ERR_INVALID_USAGE, "%s: rank %d gets invalid usage (%s)",
		       what, i, found ? ibc_status_str(r.status) : "none");
	}
	finish(what, ps, -1);
}

static void case_abort(void)
{
	struct rel_proc ps[NR];
	const char *what = "tcp, abort while ibc_wait blocks";
	char *argv0[] = { "abort", "--mode", "wait", "--warm", "--delay-ms", "1000", NULL };
	char *argv1[] = { "idle", "--warm", "--max-ms", "60000", NULL };
	struct rel_res r;
	int found;

	setenv("IBC_TRANSPORT", "tcp", 1);
	spawn(ps, argv0, argv1, -1);
	found = rel_expect_res(&ps[0], "abort", rel_now_ms() + CASE_MS, &r) == 1;
	tap_ok(found && r.status == IBC_OK, "%s: ibc_comm_abort() returns IBC_OK", what);
	found = rel_expect_res(&ps[0], "blocked", rel_now_ms() + CASE_MS, &r) == 1;
	tap_ok(found && r.status != IBC_OK, "%s: the blocked wait returns an error", what);
	found = rel_expect_res(&ps[1], "async", rel_now_ms() + CASE_MS, &r) == 1;
	tap_ok(found && r.status == IBC_ERR_REMOTE && rel_names_rank(r.text, 0),
	       "%s: rank 1 learns that rank 0 aborted", what);
	finish(what, ps, -1);
}

static void case_kill(void)
{
	struct rel_proc ps[NR];
	const char *what = "shm, rank 1 killed between collectives";
	char *argv[] = { "coll", "--count", "1000", "--iters", "2", "--gap-ms", "3000", NULL };
	struct rel_res r;
	int found;

	setenv("IBC_TRANSPORT", "shm", 1);
	spawn(ps, argv, argv, 1);
	found = rel_expect_res(&ps[1], "coll", rel_now_ms() + CASE_MS, &r) == 1 &&
		rel_expect_res(&ps[0], "coll", rel_now_ms() + CASE_MS, &r) == 1;
	if (!found) {
		tap_ok(0, "%s: first collective done", what);
		rel_kill_all(ps, NR);
		return;
	}
	rel_signal(&ps[1], SIGKILL);
	found = rel_expect_res(&ps[0], "coll", rel_now_ms() + CASE_MS, &r) == 1;
	tap_ok(found && r.status == IBC_ERR_REMOTE && rel_names_rank(r.text, 1),
	       "%s: rank 0's next collective fails naming rank 1", what);
	finish(what, ps, 1);
}

int main(void)
{
	if (getenv("IBC_ASAN_NESTED"))
		tap_skip_all("valgrind does not run sanitized binaries");
	if (system("valgrind --version >/dev/null 2>&1") != 0)
		tap_skip_all("valgrind not found");
	setenv("IBC_HEARTBEAT_MS", "2000", 1);
	setenv("IBC_TIMEOUT_MS", "120000", 1);
	setenv("IBC_BOOTSTRAP_TIMEOUT_MS", "120000", 1);
	case_all("shm");
	case_all("tcp");
	case_mismatch();
	case_abort();
	case_kill();
	return tap_done();
}
