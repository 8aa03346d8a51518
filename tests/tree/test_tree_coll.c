/* SPDX-License-Identifier: MIT */
/*
 * test_tree_coll.c - every all-reduce, broadcast and reduce algorithm
 * (ring, double binary / binomial tree, recursive doubling, Rabenseifner),
 * each protocol (simple, LL) and two chunk sizes (the tuner's and 64 bytes,
 * which forces deep pipelining), forced through ibc_tuner_force(), on real
 * communicators of 1, 2, 3, 4, 5, 7 and 8 ranks (child processes) over shm
 * and over tcp. Inputs are integer-valued and rank-dependent, so every
 * result has an exact closed form; the test also checks that all ranks end
 * with the same bits and that a second run gives the same bits (inexact
 * float sums), and that ranks disagreeing on the protocol get
 * IBC_ERR_INVALID_USAGE instead of a hang.
 *
 * usage: test_tree_coll shm|tcp         1..8 ranks over that transport (TAP;
 *                                       shm adds the IBC_ALGO-from-rank-0 run)
 *        test_tree_coll N TRANSPORT     one communicator
 * The full dtype x op matrix with each algorithm forced is
 * tests/coll/test_coll_algos.sh (coll_check); this test adds the executor's
 * edge cases (ranks 1..8, determinism, protocol disagreement).
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "tune/tune.h"
#include "api/api.h"
#include "fork_ranks.h"
#include "tap.h"

#define MAXR 8

enum { G_AR, G_BC, G_RD, G_DET, G_MISMATCH, G_ENV, G_KIND_COUNT };

/* result slots: [kind][algo][proto] (DET and MISMATCH use [kind][0][0]) */
#define NGROUPS (G_KIND_COUNT * IBC_ALGO_COUNT * IBC_PROTO_COUNT)

struct group_res {
	int checks;
	int fails;
	char first[240];
};

struct shared {
	struct group_res res[MAXR][NGROUPS];
	int mismatch;   /* run the protocol-mismatch check at the end */
	int has_ll;     /* the transport has an LL path (tcp has none: LL groups would repeat simple) */
	int env_mode;   /* IBC_ALGO/IBC_PROTO from the environment, different per rank */
	int done[MAXR]; /* rank r passed its final barrier */
};

static struct shared *sh;
static int g_rank;

static int gidx(int kind, int algo, int proto)
{
	return (kind * IBC_ALGO_COUNT + algo) * IBC_PROTO_COUNT + proto;
}

static void check(int g, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void check(int g, int ok, const char *fmt, ...)
{
	struct group_res *gr = &sh->res[g_rank][g];
	va_list ap;

	gr->checks++;
	if (ok)
		return;
	if (!gr->fails++) {
		va_start(ap, fmt);
		vsnprintf(gr->first, sizeof(gr->first), fmt, ap);
		va_end(ap);
	}
}

static uint16_t f2bf(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16); /* exact for the small integers used here */
}

static float bf2f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static const size_t big_counts[] = { 1, 7, 1000, 65539 };
static const size_t small_counts[] = { 7, 1000 };

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		abort();
	return p;
}

/* all-reduce checks of one (algorithm, protocol, chunk) */
static void allreduce_checks(ibc_comm_h comm, int n, int g, const char *cfg)
{
	int r = g_rank;
	size_t ci;
	size_t i;

	for (ci = 0; ci < IBC_ARRAY_SIZE(big_counts); ci++) {
		size_t cnt = big_counts[ci];
		int32_t *si = xmalloc(cnt * 4);
		int32_t *ri = xmalloc(cnt * 4);
		float *sf = xmalloc(cnt * 4);
		float *rf = xmalloc(cnt * 4);
		int bad = 0;
		ibc_status_t st;

		for (i = 0; i < cnt; i++) {
			si[i] = (r + 1) * (int32_t)((i % 7) + 1) - (int32_t)(i % 3);
			sf[i] = (float)((r + 1) * (int)((i % 7) + 1));
		}
		st = ibc_allreduce(si, ri, cnt, IBC_INT32, IBC_SUM, comm);
		for (i = 0; i < cnt && st == IBC_OK; i++)
			if (ri[i] != (int32_t)((i % 7) + 1) * n * (n + 1) / 2 - n * (int32_t)(i % 3))
				bad++;
		check(g, st == IBC_OK && !bad, "%s int32 sum count %zu: %s, %d wrong", cfg, cnt,
		      ibc_status_str(st), bad);
		bad = 0;
		st = ibc_allreduce(sf, rf, cnt, IBC_FLOAT32, IBC_SUM, comm);
		for (i = 0; i < cnt && st == IBC_OK; i++)
			if (rf[i] != (float)((i % 7) + 1) * (float)(n * (n + 1) / 2))
				bad++;
		check(g, st == IBC_OK && !bad, "%s float32 sum count %zu: %s, %d wrong", cfg, cnt,
		      ibc_status_str(st), bad);
		/* in place */
		bad = 0;
		memcpy(ri, si, cnt * 4);
		st = ibc_allreduce(ri, ri, cnt, IBC_INT32, IBC_MAX, comm);
		for (i = 0; i < cnt && st == IBC_OK; i++)
			if (ri[i] != n * (int32_t)((i % 7) + 1) - (int32_t)(i % 3))
				bad++;
		check(g, st == IBC_OK && !bad, "%s int32 max in place count %zu: %s, %d wrong", cfg,
		      cnt, ibc_status_str(st), bad);
		free(si);
		free(ri);
		free(sf);
		free(rf);
	}
	for (ci = 0; ci < IBC_ARRAY_SIZE(small_counts); ci++) {
		size_t cnt = small_counts[ci];
		double *sd = xmalloc(cnt * 8);
		double *rd = xmalloc(cnt * 8);
		uint16_t *sb = xmalloc(cnt * 2);
		uint16_t *rb = xmalloc(cnt * 2);
		int8_t *s8 = xmalloc(cnt);
		int8_t *r8 = xmalloc(cnt);
		uint64_t *su = xmalloc(cnt * 8);
		uint64_t *ru = xmalloc(cnt * 8);
		int bad = 0;
		ibc_status_t st;
		int q;

		for (i = 0; i < cnt; i++) {
			sd[i] = (double)((r + 1) * (int)((i % 7) + 1));
			sb[i] = f2bf((float)((r + 1) * (int)((i % 7) + 1)));
			s8[i] = (int8_t)((r + (int)i) % 5 + 1);
			su[i] = (i * 2654435761u + (uint64_t)r * 40503u) % 1000003u;
		}
		st = ibc_allreduce(sd, rd, cnt, IBC_FLOAT64, IBC_AVG, comm);
		for (i = 0; i < cnt && st == IBC_OK; i++)
			if (rd[i] != (double)((i % 7) + 1) * (n + 1) / 2.0)
				bad++;
		check(g, st == IBC_OK && !bad, "%s float64 avg count %zu: %s, %d wrong", cfg, cnt,
		      ibc_status_str(st), bad);
		bad = 0;
		st = ibc_allreduce(sb, rb, cnt, IBC_BFLOAT16, IBC_SUM, comm);
		for (i = 0; i < cnt && st == IBC_OK; i++)
			if (bf2f(rb[i]) != (float)((i % 7) + 1) * (float)(n * (n + 1) / 2))
				bad++;
		check(g, st == IBC_OK && !bad, "%s bfloat16 sum count %zu: %s, %d wrong", cfg, cnt,
		      ibc_status_str(st), bad);
		bad = 0;
		st = ibc_allreduce(s8, r8, cnt, IBC_INT8, IBC_PROD, comm);
		for (i = 0; i < cnt && st == IBC_OK; i++) {
			uint8_t want = 1;

			for (q = 0; q < n; q++)
				want = (uint8_t)(want * (uint8_t)((q + (int)i) % 5 + 1));
			if ((uint8_t)r8[i] != want)
				bad++;
		}
		check(g, st == IBC_OK && !bad, "%s int8 prod count %zu: %s, %d wrong", cfg, cnt,
		      ibc_status_str(st), bad);
		bad = 0;
		st = ibc_allreduce(su, ru, cnt, IBC_UINT64, IBC_MIN, comm);
		for (i = 0; i < cnt && st == IBC_OK; i++) {
			uint64_t want = UINT64_MAX;

			for (q = 0; q < n; q++)
				want = IBC_MIN(want, (i * 2654435761u + (uint64_t)q * 40503u) % 1000003u);
			if (ru[i] != want)
				bad++;
		}
		check(g, st == IBC_OK && !bad, "%s uint64 min count %zu: %s, %d wrong", cfg, cnt,
		      ibc_status_str(st), bad);
		free(sd);
		free(rd);
		free(sb);
		free(rb);
		free(s8);
		free(r8);
		free(su);
		free(ru);
	}
}

static void rooted_checks(ibc_comm_h comm, int n, int gb, int gr, const char *cfg)
{
	int r = g_rank;
	size_t ci;
	size_t i;

	for (ci = 0; ci < IBC_ARRAY_SIZE(big_counts); ci++) {
		size_t cnt = big_counts[ci];
		int roots[2] = { 0, n - 1 };
		int k;

		for (k = 0; k < (n > 1 ? 2 : 1); k++) {
			int root = roots[k];
			int32_t *b = xmalloc(cnt * 4);
			double *sd = xmalloc(cnt * 8);
			double *rd = xmalloc(cnt * 8);
			uint16_t *sb = xmalloc(cnt * 2);
			uint16_t *rb = xmalloc(cnt * 2);
			int bad = 0;
			ibc_status_t st;

			for (i = 0; i < cnt; i++) {
				b[i] = r == root ? root * 100000 + (int32_t)i : -1;
				sd[i] = (double)((r + 3) * (int)((i % 11) + 1));
				sb[i] = f2bf((float)((r + 1) * (int)((i % 5) + 1)));
			}
			st = ibc_broadcast(r == root ? b : NULL, b, cnt, IBC_INT32, root, comm);
			for (i = 0; i < cnt && st == IBC_OK; i++)
				if (b[i] != root * 100000 + (int32_t)i)
					bad++;
			check(gb, st == IBC_OK && !bad, "%s broadcast root %d count %zu: %s, %d wrong",
			      cfg, root, cnt, ibc_status_str(st), bad);
			bad = 0;
			st = ibc_reduce(sd, r == root ? rd : NULL, cnt, IBC_FLOAT64, IBC_SUM, root, comm);
			for (i = 0; i < cnt && st == IBC_OK && r == root; i++)
				if (rd[i] != (double)((i % 11) + 1) * (n * (n + 1) / 2 + 2 * n))
					bad++;
			check(gr, st == IBC_OK && !bad, "%s reduce root %d count %zu: %s, %d wrong",
			      cfg, root, cnt, ibc_status_str(st), bad);
			bad = 0;
			st = ibc_reduce(sb, r == root ? rb : NULL, cnt, IBC_BFLOAT16, IBC_SUM, root, comm);
			for (i = 0; i < cnt && st == IBC_OK && r == root; i++)
				if (bf2f(rb[i]) != (float)((i % 5) + 1) * (float)(n * (n + 1) / 2))
					bad++;
			check(gr, st == IBC_OK && !bad, "%s bfloat16 reduce root %d count %zu: %s, %d wrong",
			      cfg, root, cnt, ibc_status_str(st), bad);
			free(sb);
			free(rb);
			free(b);
			free(sd);
			free(rd);
		}
	}
}

static uint64_t fnv(const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211ull;
	return h;
}

/* inexact float sums: the same bits on every rank, and again on a second run */
static void determinism_checks(ibc_comm_h comm, int n)
{
	size_t cnt = 10007;
	float *s = xmalloc(cnt * 4);
	float *o = xmalloc(cnt * 4);
	uint64_t sums[MAXR];
	int g = gidx(G_DET, 0, 0);
	int algo;
	size_t i;

	for (i = 0; i < cnt; i++)
		s[i] = (float)((i * 7919 + (size_t)g_rank * 104729) % 1000003) / 997.0f *
		       (1.0f + 1e-3f * (float)g_rank);
	for (algo = 0; algo < IBC_ALGO_COUNT; algo++) {
		uint64_t h[2] = { 0, 0 };
		int rep;
		int q;

		ibc_tuner_force(ibc_comm_tuner(comm), algo, -1, 256);
		for (rep = 0; rep < 2; rep++) {
			ibc_status_t st = ibc_allreduce(s, o, cnt, IBC_FLOAT32, IBC_SUM, comm);

			check(g, st == IBC_OK, "determinism %s: %s", ibc_algo_name(algo),
			      ibc_status_str(st));
			h[rep] = fnv(o, cnt * 4);
		}
		check(g, h[0] == h[1], "%s: two runs gave different bits", ibc_algo_name(algo));
		check(g, ibc_allgather(&h[0], sums, 1, IBC_UINT64, comm) == IBC_OK, "allgather");
		for (q = 0; q < n; q++)
			check(g, sums[q] == h[0], "%s: rank %d ended with other bits than rank %d",
			      ibc_algo_name(algo), q, g_rank);
	}
	free(s);
	free(o);
}

/*
 * Leave together: a rank that destroys its communicator while a slower
 * peer still reads the last message from it can fail that peer (shm
 * reports the closed doorbell before the data left in the ring is read;
 * rank 0's exit takes the liveness hub away). So every rank passes a
 * barrier, then waits (bounded) until all ranks passed it, then destroys.
 */
static ibc_status_t leave_together(ibc_comm_h comm, int n)
{
	ibc_status_t st = ibc_barrier(comm);
	uint64_t deadline = ibc_time_ms() + 60000;
	int q;

	__atomic_store_n(&sh->done[g_rank], 1, __ATOMIC_RELEASE);
	for (q = 0; q < n; q++)
		while (!__atomic_load_n(&sh->done[q], __ATOMIC_ACQUIRE) && ibc_time_ms() < deadline)
			usleep(1000);
	return st;
}

static int rank_main(int rank, int n, void *arg)
{
	ibc_comm_h comm;
	int algo;
	int proto;
	int ck;

	(void)arg;
	g_rank = rank;
	if (sh->env_mode) {
		/* rank 0's settings must win everywhere */
		setenv("IBC_ALGO", rank == 0 ? "rabenseifner" : "ring", 1);
		setenv("IBC_PROTO", rank == 0 ? "simple" : "ll", 1);
	}
	if (ibc_comm_init_env(&comm) != IBC_OK)
		return 10;
	if (sh->env_mode) {
		struct ibc_tune_model m;
		int g = gidx(G_ENV, 0, 0);

		allreduce_checks(comm, n, g, "IBC_ALGO from rank 0");
		check(g, ibc_tuner_model(ibc_comm_tuner(comm), &m) == IBC_OK && (n == 1 ||
		      (m.force_algo == IBC_ALGO_RAB && m.force_proto == IBC_PROTO_SIMPLE)),
		      "rank %d does not use rank 0's IBC_ALGO/IBC_PROTO", rank);
		rooted_checks(comm, n, g, g, "IBC_ALGO=rabenseifner (not for broadcast/reduce)");
		if (leave_together(comm, n) != IBC_OK)
			return 13;
		return ibc_comm_destroy(comm) == IBC_OK ? 0 : 12;
	}
	for (algo = 0; algo < IBC_ALGO_COUNT; algo++) {
		for (proto = 0; proto < IBC_PROTO_COUNT; proto++) {
			if (proto == IBC_PROTO_LL && !sh->has_ll)
				continue;
			for (ck = 0; ck < 2; ck++) {
				char cfg[80];
				size_t chunk = ck ? 64 : 0;

				snprintf(cfg, sizeof(cfg), "%s/%s chunk %zu", ibc_algo_name(algo),
					 ibc_proto_name(proto), chunk);
				if (ibc_tuner_force(ibc_comm_tuner(comm), algo, proto, chunk) != IBC_OK)
					return 11;
				allreduce_checks(comm, n, gidx(G_AR, algo, proto), cfg);
				if (ibc_algo_applies(IBC_TUNE_BCAST, algo))
					rooted_checks(comm, n, gidx(G_BC, algo, proto),
						      gidx(G_RD, algo, proto), cfg);
			}
		}
	}
	determinism_checks(comm, n);
	if (sh->mismatch && n == 2) {
		int32_t x = 1;
		int32_t y = 0;
		ibc_status_t st;

		/* rank 0 sends by the LL path, rank 1 expects the slot path, and back */
		ibc_tuner_force(ibc_comm_tuner(comm), IBC_ALGO_RD, rank == 0 ? IBC_PROTO_LL : IBC_PROTO_SIMPLE, 0);
		st = ibc_allreduce(&x, &y, 1, IBC_INT32, IBC_SUM, comm);
		check(gidx(G_MISMATCH, 0, 0), st == IBC_ERR_INVALID_USAGE,
		      "protocol mismatch gave %s, not IBC_ERR_INVALID_USAGE", ibc_status_str(st));
		ibc_comm_abort(comm);
		return 0;
	}
	if (leave_together(comm, n) != IBC_OK)
		return 13;
	return ibc_comm_destroy(comm) == IBC_OK ? 0 : 12;
}

static const char *kind_name(int kind)
{
	static const char *const names[] = { "allreduce", "broadcast", "reduce", "determinism",
					     "protocol mismatch",
					     "IBC_ALGO/IBC_PROTO of rank 0 used by all ranks" };

	return names[kind];
}

static void run_one(int n, const char *transport, int env_mode, int accum)
{
	int codes[MAXR];
	int kind;
	int algo;
	int proto;
	int r;
	int ok;

	memset(sh, 0, sizeof(*sh));
	/* the transports with an LL path (shm; ib in the Soft-RoCE VM, tests/rxe) */
	sh->mismatch = n == 2 && (!strcmp(transport, "shm") || !strcmp(transport, "ib")) &&
		       !env_mode;
	sh->env_mode = env_mode;
	sh->has_ll = strcmp(transport, "tcp") != 0;
	setenv("IBC_TRANSPORT", transport, 1);
	if (accum)
		setenv("IBC_ACCUM_FP32", "1", 1);
	ok = fork_ranks(n, 400, rank_main, NULL, codes) == 0;
	unsetenv("IBC_ACCUM_FP32");
	for (r = 0; r < n; r++)
		if (codes[r])
			tap_diag("rank %d exited with %d", r, codes[r]);
	tap_ok(ok, "%d ranks over %s%s: every rank finished", n, transport,
	       accum ? " with IBC_ACCUM_FP32=1" : "");
	for (kind = 0; kind < G_KIND_COUNT; kind++) {
		for (algo = 0; algo < IBC_ALGO_COUNT; algo++) {
			for (proto = 0; proto < IBC_PROTO_COUNT; proto++) {
				int g = gidx(kind, algo, proto);
				int checks = 0;
				int fails = 0;
				const char *first = NULL;

				for (r = 0; r < n; r++) {
					checks += sh->res[r][g].checks;
					fails += sh->res[r][g].fails;
					if (!first && sh->res[r][g].fails)
						first = sh->res[r][g].first;
				}
				if (kind >= G_DET && (algo || proto))
					continue;
				if (kind < G_DET && proto == IBC_PROTO_LL && !sh->has_ll)
					continue;
				if ((kind == G_ENV) != !!env_mode)
					continue;
				if (kind == G_MISMATCH && !sh->mismatch)
					continue;
				if ((kind == G_BC || kind == G_RD) && !ibc_algo_applies(IBC_TUNE_BCAST, algo))
					continue;
				if (first)
					tap_diag("%s", first);
				if (kind >= G_DET)
					tap_ok(checks > 0 && !fails, "%d ranks over %s: %s (%d checks)", n,
					       transport, kind_name(kind), checks);
				else
					tap_ok(checks > 0 && !fails,
					       "%d ranks over %s: %s %s/%s, exact results (%d checks)", n,
					       transport, kind_name(kind), ibc_algo_name(algo),
					       ibc_proto_name(proto), checks);
			}
		}
	}
}

int main(int argc, char **argv)
{
	static const int sizes[] = { 1, 2, 3, 4, 5, 7, 8 };
	static const char *const tps[] = { "shm", "tcp" };
	size_t i;
	size_t j;

	sh = fork_ranks_shared(sizeof(*sh));
	if (!sh)
		tap_bail_out("cannot map shared memory");
	setenv("IBC_TIMEOUT_MS", "30000", 0);
	if (argc == 3) {
		int n = atoi(argv[1]);

		if (n < 1 || n > MAXR)
			tap_bail_out("N must be 1..%d", MAXR);
		run_one(n, argv[2], 0, 0);
		return tap_done();
	}
	for (i = 0; i < IBC_ARRAY_SIZE(tps); i++) {
		if (argc == 2 && strcmp(argv[1], tps[i]))
			continue;
		for (j = 0; j < IBC_ARRAY_SIZE(sizes); j++)
			run_one(sizes[j], tps[i], 0, 0);
		if (!strcmp(tps[i], "shm")) {
			run_one(3, "shm", 1, 0);
			/* fp32 partials for bfloat16 in every algorithm */
			run_one(5, "shm", 0, 1);
		}
	}
	return tap_done();
}
