/* SPDX-License-Identifier: MIT */
/*
 * test_hygiene.c - 500 cycles of init, 1-element allreduce, destroy on 4
 * ranks (processes, shm by default) leave nothing behind.
 *
 * Each rank runs `rel_worker hygiene`: per cycle it joins with the id that
 * rank 0 made in the previous cycle (ibc_get_unique_id(), broadcast on the
 * previous communicator, so every cycle also starts and ends a bootstrap
 * root thread in rank 0), checks the allreduce, and destroys. It measures
 * open fds, threads, its own /dev/shm segments and RSS before the first
 * init, at cycle WARM (after warm-up), at the last cycle, and after the last
 * destroy. Bounds, per rank:
 *   fds, threads, /dev/shm entries (each the minimum over 200 ms, so that
 *   connections still opening or closing do not count): no growth at all
 *   between cycle WARM and the last cycle, and exactly the pre-init count
 *   after the last destroy;
 *   RSS: growth between cycle WARM and the last cycle <= REL_RSS_BOUND_KB.
 * usage: test_hygiene [CYCLES [TRANSPORT]]   (default 500 shm; 200 with IBC_TEST_QUICK)
 * Under --enable-asan the RSS bound is skipped (ASan keeps freed memory in
 * quarantine) and LeakSanitizer checks every rank for leaks at exit.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibcoll.h"
#include "rel_harness.h"
#include "tap.h"

#define NR 4
#define WARM 20
#define REL_RSS_BOUND_KB 2048

struct use {
	long fds;
	long threads;
	long shm;
	long rss_kb;
};

/* parse "USE <what> fds F threads T shm S rss_kb R" into the matching slot */
static void parse_use(const char *line, struct use *before, struct use *warm, struct use *end,
		      struct use *after)
{
	char what[16];
	struct use u;
	struct use *dst = NULL;

	if (sscanf(line, "USE %15s fds %ld threads %ld shm %ld rss_kb %ld", what, &u.fds, &u.threads,
		   &u.shm, &u.rss_kb) != 5)
		return;
	if (!strcmp(what, "before"))
		dst = before;
	else if (!strcmp(what, "warm"))
		dst = warm;
	else if (!strcmp(what, "end"))
		dst = end;
	else if (!strcmp(what, "after"))
		dst = after;
	if (dst)
		*dst = u;
}

int main(int argc, char **argv)
{
	struct rel_proc ps[NR];
	char uid[2 * IBC_UNIQUE_ID_BYTES + 1];
	char cycles_s[16];
	char warm_s[16];
	char *wargv[] = { "hygiene", "--cycles", cycles_s, "--warmup", warm_s, NULL };
	int cycles = argc > 1 ? atoi(argv[1]) : getenv("IBC_TEST_QUICK") ? 200 : 500;
	int64_t t0 = rel_now_ms();
	int64_t deadline;
	int i;

	setenv("IBC_TRANSPORT", argc > 2 ? argv[2] : "shm", 1);
	snprintf(cycles_s, sizeof(cycles_s), "%d", cycles);
	snprintf(warm_s, sizeof(warm_s), "%d", WARM);
	deadline = t0 + 60000 + (int64_t)cycles * 500;
	memset(ps, 0, sizeof(ps));
	if (rel_new_uid_hex(uid) != IBC_OK)
		tap_bail_out("cannot create a unique id");
	for (i = 0; i < NR; i++)
		if (rel_spawn(&ps[i], i, NR, uid, wargv, NULL) != 0)
			tap_bail_out("spawn failed");
	for (i = 0; i < NR; i++) {
		struct use before = { -1, -1, -1, -1 };
		struct use warm = { -1, -1, -1, -1 };
		struct use end = { -1, -1, -1, -1 };
		struct use after = { -1, -1, -1, -1 };
		char line[REL_LINE_MAX];
		struct rel_res r;
		int done = 0;

		memset(&r, 0, sizeof(r));
		r.status = IBC_ERR_INTERNAL;
		while (!done && rel_read_line(&ps[i], deadline, line, sizeof(line)) == 1) {
			if (!strncmp(line, "USE ", 4))
				parse_use(line, &before, &warm, &end, &after);
			else if (!strncmp(line, "RES hyg ", 8) && rel_parse_res(line, &r) == 0)
				done = 1;
		}
		if (!done || r.status != IBC_OK || r.idx != cycles) {
			tap_ok(0, "rank %d: %d cycles of init, 1-element allreduce, destroy (%s at cycle %d: %s)",
			       i, cycles, done ? ibc_status_str(r.status) : "no answer", r.idx, r.text);
			continue;
		}
		tap_ok(1, "rank %d: %d cycles of init, 1-element allreduce, destroy (%lld ms)", i,
		       cycles, (long long)r.el_ms);
		tap_diag("rank %d: before fds %ld threads %ld shm %ld rss %ld kB; cycle %d: %ld %ld %ld %ld kB; cycle %d: %ld %ld %ld %ld kB; after: %ld %ld %ld %ld kB",
			 i, before.fds, before.threads, before.shm, before.rss_kb, WARM, warm.fds,
			 warm.threads, warm.shm, warm.rss_kb, cycles - 1, end.fds, end.threads, end.shm,
			 end.rss_kb, after.fds, after.threads, after.shm, after.rss_kb);
		tap_ok(warm.fds >= 0 && end.fds <= warm.fds,
		       "rank %d: open fds do not grow over %d cycles (%ld at cycle %d, %ld at cycle %d)",
		       i, cycles - WARM - 1, warm.fds, WARM, end.fds, cycles - 1);
		tap_ok(warm.threads > 0 && end.threads <= warm.threads,
		       "rank %d: threads do not grow (%ld, %ld)", i, warm.threads, end.threads);
		tap_ok(end.shm <= warm.shm && end.shm >= 0,
		       "rank %d: /dev/shm entries do not grow (%ld, %ld)", i, warm.shm, end.shm);
#ifdef IBC_ASAN
		/* freed memory sits in ASan's quarantine: LeakSanitizer checks at exit instead */
		tap_ok(1, "rank %d: RSS bound # SKIP meaningless under ASan (quarantine); LeakSanitizer checks leaks at exit",
		       i);
#else
		tap_ok(warm.rss_kb > 0 && end.rss_kb - warm.rss_kb <= REL_RSS_BOUND_KB,
		       "rank %d: RSS grows by at most %d kB (%ld kB)", i, REL_RSS_BOUND_KB,
		       end.rss_kb - warm.rss_kb);
#endif
		tap_ok(after.fds == before.fds && after.threads == before.threads &&
		       after.shm == before.shm && before.fds >= 0,
		       "rank %d: after the last destroy, fds/threads/shm are back to their count before the first init (%ld/%ld/%ld, %ld/%ld/%ld)",
		       i, before.fds, before.threads, before.shm, after.fds, after.threads, after.shm);
		rel_reap(&ps[i], rel_now_ms() + 10000);
		tap_ok(rel_exited_ok(&ps[i]), "rank %d exits cleanly (%s)", i,
		       rel_wstatus_str(ps[i].wstatus));
	}
	rel_kill_all(ps, NR);
	return tap_done();
}
