/* SPDX-License-Identifier: MIT */
/*
 * test_nccl_unit.c - the host logic of libibcoll_nccl (bindings/nccl),
 * linked with its objects: the version claimed and the ABI of nccl.h (enum
 * values and ncclConfig_t layout as NCCL documents and builds them), the
 * type and reduction mapping, ibcoll status to ncclResult_t, the error
 * strings, ncclConfig_t parsing, the unique id, and the issue order of a
 * group: exact orders for written cases, and a simulator of blocking
 * one-at-a-time execution that must finish every random group without a
 * deadlock and match every send with its own receive (and that does find
 * the deadlock of the same groups issued in program order); and the
 * element operation of PreMulSum (the conversions of float16 against the
 * compiler's _Float16, bfloat16 against a second rounding, every type's
 * product on the host path).
 */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "shim_scale.h"
#include "tap.h"

static void test_version(void)
{
	int v = -1;

	tap_is_int(ncclGetVersion(&v), ncclSuccess, "ncclGetVersion succeeds");
	tap_is_int(v, 22105, "ncclGetVersion claims NCCL 2.21.5 (22105)");
	tap_is_int(NCCL_VERSION_CODE, 22105, "NCCL_VERSION_CODE is 22105");
	tap_is_int(NCCL_VERSION(2, 21, 5), v, "NCCL_VERSION(2,21,5) equals ncclGetVersion");
	tap_ok(NCCL_MAJOR == 2 && NCCL_MINOR == 21 && NCCL_PATCH == 5, "NCCL_MAJOR/MINOR/PATCH 2.21.5");
	tap_is_int(NCCL_VERSION(2, 8, 4), 2804, "NCCL_VERSION before 2.9 is x*1000+y*100+z");
	tap_is_int(NCCL_VERSION(2, 18, 1), 21801, "NCCL_VERSION from 2.9 is x*10000+y*100+z");
	tap_ok(NCCL_VERSION_CODE >= NCCL_VERSION(2, 19, 0) &&
	       NCCL_VERSION_CODE < NCCL_VERSION(2, 22, 0),
	       "a program's 2.19 feature checks pass and 2.22 ones fail");
	tap_is_int(ncclGetVersion(NULL), ncclInvalidArgument, "ncclGetVersion(NULL) is refused");
	tap_ok(strstr(ncclGetLastError(NULL), "ncclGetVersion: version is NULL") != NULL,
	       "... and ncclGetLastError says so: '%s'", ncclGetLastError(NULL));
}

/* values of NCCL's binary interface (its documentation's numbers) */
static void test_abi(void)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	static const int results[] = { ncclSuccess, ncclUnhandledCudaError, ncclSystemError,
				       ncclInternalError, ncclInvalidArgument, ncclInvalidUsage,
				       ncclRemoteError, ncclInProgress, ncclNumResults };
	static const int dtypes[][2] = {
		{ ncclInt8, 0 },     { ncclChar, 0 },	  { ncclUint8, 1 },    { ncclInt32, 2 },
		{ ncclInt, 2 },	     { ncclUint32, 3 },	  { ncclInt64, 4 },    { ncclUint64, 5 },
		{ ncclFloat16, 6 },  { ncclHalf, 6 },	  { ncclFloat32, 7 },  { ncclFloat, 7 },
		{ ncclFloat64, 8 },  { ncclDouble, 8 },	  { ncclBfloat16, 9 }, { ncclNumTypes, 10 },
	};
	static const int ops[][2] = { { ncclSum, 0 }, { ncclProd, 1 }, { ncclMax, 2 },
				      { ncclMin, 3 }, { ncclAvg, 4 }, { ncclNumOps, 5 } };
	int bad = 0;
	int i;

	for (i = 0; i < (int)(sizeof(results) / sizeof(results[0])); i++)
		bad += results[i] != i;
	tap_is_int(bad, 0, "ncclResult_t values 0..8 in NCCL's order");
	bad = 0;
	for (i = 0; i < (int)(sizeof(dtypes) / sizeof(dtypes[0])); i++)
		bad += dtypes[i][0] != dtypes[i][1];
	tap_is_int(bad, 0, "ncclDataType_t values (float16 6, float32 7, float64 8, bfloat16 9)");
	bad = 0;
	for (i = 0; i < (int)(sizeof(ops) / sizeof(ops[0])); i++)
		bad += ops[i][0] != ops[i][1];
	tap_is_int(bad, 0, "ncclRedOp_t values (max 2, min 3, avg 4)");
	tap_is_int(sizeof(ncclRedOp_t), 4, "ncclRedOp_t is int-sized");
	tap_ok(ncclScalarDevice == 0 && ncclScalarHostImmediate == 1, "ncclScalarResidence_t");
	tap_is_int(sizeof(ncclUniqueId), 128, "ncclUniqueId is 128 bytes");
	tap_is_int(sizeof(ncclUniqueId), sizeof(ibc_unique_id_t), "... like ibc_unique_id_t");
	tap_ok(offsetof(ncclConfig_t, magic) == 8 && offsetof(ncclConfig_t, version) == 12 &&
	       offsetof(ncclConfig_t, blocking) == 16 &&
	       offsetof(ncclConfig_t, cgaClusterSize) == 20 &&
	       offsetof(ncclConfig_t, minCTAs) == 24 && offsetof(ncclConfig_t, maxCTAs) == 28 &&
	       offsetof(ncclConfig_t, netName) == 32 && offsetof(ncclConfig_t, splitShare) == 40 &&
	       sizeof(ncclConfig_t) == 48,
	       "ncclConfig_t layout of NCCL 2.18-2.21 (48 bytes on LP64)");
	tap_ok(cfg.size == sizeof(cfg) && cfg.magic == 0xcafebeef && cfg.version == 22105 &&
	       cfg.blocking == NCCL_CONFIG_UNDEF_INT &&
	       cfg.cgaClusterSize == NCCL_CONFIG_UNDEF_INT &&
	       cfg.minCTAs == NCCL_CONFIG_UNDEF_INT && cfg.maxCTAs == NCCL_CONFIG_UNDEF_INT &&
	       cfg.netName == NULL && cfg.splitShare == NCCL_CONFIG_UNDEF_INT,
	       "NCCL_CONFIG_INITIALIZER: size, magic 0xcafebeef, version, every option undefined");
	tap_is_int(NCCL_CONFIG_UNDEF_INT, -2147483647 - 1, "NCCL_CONFIG_UNDEF_INT is INT_MIN");
	tap_is_int(NCCL_SPLIT_NOCOLOR, -1, "NCCL_SPLIT_NOCOLOR is -1");
}

static void test_mapping(void)
{
	static const struct {
		int nccl;
		ibc_dtype_t ibc;
		size_t nbytes;
	} dt[] = {
		{ ncclInt8, IBC_INT8, 1 },	   { ncclUint8, IBC_UINT8, 1 },
		{ ncclInt32, IBC_INT32, 4 },	   { ncclUint32, IBC_UINT32, 4 },
		{ ncclInt64, IBC_INT64, 8 },	   { ncclUint64, IBC_UINT64, 8 },
		{ ncclFloat16, IBC_FLOAT16, 2 },   { ncclFloat32, IBC_FLOAT32, 4 },
		{ ncclFloat64, IBC_FLOAT64, 8 },   { ncclBfloat16, IBC_BFLOAT16, 2 },
	};
	static const struct {
		int nccl;
		ibc_redop_t ibc;
	} op[] = { { ncclSum, IBC_SUM }, { ncclProd, IBC_PROD }, { ncclMax, IBC_MAX },
		   { ncclMin, IBC_MIN }, { ncclAvg, IBC_AVG } };
	static const int bad_dt[] = { -1, 10, 11, 12, 255 };
	static const int bad_op[] = { -1, 5, 6, 0x7fffffff };
	int i;

	for (i = 0; i < (int)(sizeof(dt) / sizeof(dt[0])); i++) {
		ibc_dtype_t d = IBC_DTYPE_COUNT;
		size_t nb = 0;
		int ok = shim_map_dtype(dt[i].nccl, &d) == 0 && d == dt[i].ibc &&
			 ibc_dtype_size(d, &nb) == IBC_OK && nb == dt[i].nbytes;

		tap_ok(ok, "nccl datatype %d -> ibc dtype %d (got %d), %zu bytes (got %zu)",
		       dt[i].nccl, (int)dt[i].ibc, (int)d, dt[i].nbytes, nb);
	}
	for (i = 0; i < (int)(sizeof(bad_dt) / sizeof(bad_dt[0])); i++) {
		ibc_dtype_t d = IBC_DTYPE_COUNT;

		tap_ok(shim_map_dtype(bad_dt[i], &d) == -1 && d == IBC_DTYPE_COUNT,
		       "nccl datatype %d is refused, output untouched", bad_dt[i]);
	}
	for (i = 0; i < (int)(sizeof(op) / sizeof(op[0])); i++) {
		ibc_redop_t o = IBC_REDOP_COUNT;
		int ok = shim_map_op(op[i].nccl, &o) == 0 && o == op[i].ibc;

		tap_ok(ok, "nccl op %d -> ibc op %d (got %d)", op[i].nccl, (int)op[i].ibc, (int)o);
	}
	for (i = 0; i < (int)(sizeof(bad_op) / sizeof(bad_op[0])); i++) {
		ibc_redop_t o = IBC_REDOP_COUNT;

		tap_ok(shim_map_op(bad_op[i], &o) == -1 && o == IBC_REDOP_COUNT,
		       "nccl op %d is refused", bad_op[i]);
	}
}

static void test_results(void)
{
	static const struct {
		ibc_status_t st;
		ncclResult_t res;
	} map[] = {
		{ IBC_OK, ncclSuccess },
		{ IBC_INPROGRESS, ncclInProgress },
		{ IBC_ERR_INVALID_ARG, ncclInvalidArgument },
		{ IBC_ERR_INVALID_USAGE, ncclInvalidUsage },
		{ IBC_ERR_NO_MEMORY, ncclSystemError },
		{ IBC_ERR_SYSTEM, ncclSystemError },
		{ IBC_ERR_VERBS, ncclSystemError },
		{ IBC_ERR_CUDA, ncclUnhandledCudaError },
		{ IBC_ERR_REMOTE, ncclRemoteError },
		{ IBC_ERR_TIMEOUT, ncclRemoteError },
		{ IBC_ERR_REVOKED, ncclRemoteError },
		{ IBC_ERR_UNSUPPORTED, ncclInvalidUsage },
		{ IBC_ERR_INTERNAL, ncclInternalError },
		{ (ibc_status_t)-99, ncclInternalError },
	};
	const char *s[ncclNumResults];
	int distinct = 1;
	int i;
	int j;

	for (i = 0; i < (int)(sizeof(map) / sizeof(map[0])); i++)
		tap_is_int(shim_result(map[i].st), map[i].res, "ibc status %d (%s) -> nccl result %d",
			   (int)map[i].st, ibc_status_str(map[i].st), (int)map[i].res);
	for (i = 0; i < ncclNumResults; i++) {
		s[i] = ncclGetErrorString((ncclResult_t)i);
		for (j = 0; j < i; j++)
			distinct &= strcmp(s[i], s[j]) != 0;
	}
	tap_ok(distinct && !strcmp(s[0], "no error"),
	       "ncclGetErrorString: 8 distinct texts, 'no error' for ncclSuccess");
	tap_is_str(ncclGetErrorString(ncclNumResults), "unknown result code",
		   "ncclGetErrorString of an unknown code");
	tap_is_str(ncclGetErrorString((ncclResult_t)-1), "unknown result code",
		   "ncclGetErrorString of a negative code");
	shim_err(NULL, ncclInvalidUsage, "ncclTest", "cause %d", 42);
	tap_is_str(ncclGetLastError(NULL), "ncclTest: cause 42",
		   "shim_err records 'fn: cause' as the process's last error");
}

static void test_config(void)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	int b = -5;

	tap_ok(shim_config_parse(NULL, 1, &b, "f") == ncclSuccess && b == 1,
	       "config NULL: default blocking 1");
	b = -5;
	tap_ok(shim_config_parse(NULL, 0, &b, "f") == ncclSuccess && b == 0,
	       "config NULL: the default given (a split inherits its parent's)");
	b = -5;
	tap_ok(shim_config_parse(&cfg, 1, &b, "f") == ncclSuccess && b == 1,
	       "NCCL_CONFIG_INITIALIZER: blocking undefined -> 1");
	cfg.blocking = 0;
	tap_ok(shim_config_parse(&cfg, 1, &b, "f") == ncclSuccess && b == 0, "blocking 0");
	cfg.blocking = 1;
	tap_ok(shim_config_parse(&cfg, 0, &b, "f") == ncclSuccess && b == 1,
	       "blocking 1 overrides a nonblocking default");
	cfg.blocking = 2;
	b = -5;
	tap_ok(shim_config_parse(&cfg, 1, &b, "ncclCommInitRankConfig") == ncclInvalidArgument &&
	       b == -5 && strstr(ncclGetLastError(NULL), "blocking 2: must be 0 or 1"),
	       "blocking 2 refused: '%s'", ncclGetLastError(NULL));
	cfg.blocking = 0;
	cfg.magic = 0;
	tap_ok(shim_config_parse(&cfg, 1, &b, "ncclCommInitRankConfig") == ncclInvalidArgument &&
	       strstr(ncclGetLastError(NULL), "NCCL_CONFIG_INITIALIZER"),
	       "a config without the magic is refused: '%s'", ncclGetLastError(NULL));
	cfg.magic = NCCL_CONFIG_MAGIC;
	cfg.size = 8;
	tap_ok(shim_config_parse(&cfg, 1, &b, "f") == ncclInvalidArgument &&
	       strstr(ncclGetLastError(NULL), "size 8 bytes is too small"),
	       "a config too small for blocking is refused: '%s'", ncclGetLastError(NULL));
	cfg.size = offsetof(ncclConfig_t, blocking) + sizeof(int);
	tap_ok(shim_config_parse(&cfg, 1, &b, "f") == ncclSuccess && b == 0,
	       "an older, shorter config that holds blocking is read");
	cfg.size = sizeof(cfg) + 64;
	tap_ok(shim_config_parse(&cfg, 1, &b, "f") == ncclSuccess && b == 0,
	       "a newer NCCL's larger config is read by its prefix");
}

static void test_unique_id(void)
{
	ncclUniqueId a;
	ncclUniqueId b;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	tap_ok(ncclGetUniqueId(&a) == ncclSuccess && ncclGetUniqueId(&b) == ncclSuccess,
	       "ncclGetUniqueId twice");
	tap_ok(memcmp(&a, &b, sizeof(a)) != 0, "two unique ids differ");
	tap_ok(shim_hash(SHIM_HASH_SEED, &a, sizeof(a)) != shim_hash(SHIM_HASH_SEED, &b, sizeof(b)),
	       "... and so do their communicator ids");
	tap_is_int(ncclGetUniqueId(NULL), ncclInvalidArgument, "ncclGetUniqueId(NULL) is refused");
}

/* ---- the order of a group ------------------------------------------------ */

#define MAXR 8
#define MAXOPS 96

/* one operation of one rank in the simulation */
struct sop {
	uint64_t gid;
	int p2p;                /* 0 collective, 1 send, 2 recv */
	int peer;
	int msg;                /* collective: its index on gid; p2p: global message id */
};

struct sim {
	int n;
	struct sop ops[MAXR][MAXOPS];
	int nops[MAXR];
};

static unsigned rnd_state = 12345;

static unsigned rnd(unsigned m)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 8) % m;
}

/*
 * Execute every rank's sequence one operation at a time, each blocking
 * until all its participants are at it (a rendezvous: the worst case of
 * ibcoll's gated, one-at-a-time execution). Returns 0 when all finish,
 * 1 on a deadlock, 2 when a send meets a receive of another message
 * (a wrong result in reality).
 */
static int simulate(const struct sim *s, int *const *order)
{
	int pos[MAXR] = { 0 };
	int left = 0;
	int r;

	for (r = 0; r < s->n; r++)
		left += s->nops[r];
	while (left > 0) {
		int progress = 0;

		for (r = 0; r < s->n; r++) {
			const struct sop *o;
			const struct sop *q;

			if (pos[r] >= s->nops[r])
				continue;
			o = &s->ops[r][order[r][pos[r]]];
			if (o->p2p && o->peer == r) {           /* copy to self */
				pos[r]++, left--, progress = 1;
				continue;
			}
			if (o->p2p == 1) {
				if (pos[o->peer] >= s->nops[o->peer])
					continue;
				q = &s->ops[o->peer][order[o->peer][pos[o->peer]]];
				if (q->p2p != 2 || q->peer != r || q->gid != o->gid)
					continue;
				if (q->msg != o->msg)
					return 2;
				pos[r]++, pos[o->peer]++, left -= 2, progress = 1;
			} else if (o->p2p == 0) {
				int all = 1;
				int p;

				for (p = 0; p < s->n && all; p++) {
					if (pos[p] >= s->nops[p])
						all = 0;
					else if ((q = &s->ops[p][order[p][pos[p]]]))
						all = !q->p2p && q->gid == o->gid &&
						      q->msg == o->msg;
				}
				if (all) {
					for (p = 0; p < s->n; p++)
						pos[p]++, left--;
					progress = 1;
				}
			}
		}
		if (!progress)
			return 1;
	}
	return 0;
}

static int order_rank(const struct sim *s, int r, int *perm)
{
	struct shim_order_in in[MAXOPS];
	int i;

	for (i = 0; i < s->nops[r]; i++) {
		in[i].gid = s->ops[r][i].gid;
		in[i].rank = r;
		in[i].p2p = s->ops[r][i].p2p;
		in[i].peer = s->ops[r][i].peer;
	}
	return shim_order(in, s->nops[r], perm);
}

/* append to rank @r's program; p2p ops are placed at a random later spot by shuffle() */
static void add(struct sim *s, int r, uint64_t gid, int p2p, int peer, int msg)
{
	struct sop *o = &s->ops[r][s->nops[r]++];

	o->gid = gid;
	o->p2p = p2p;
	o->peer = peer;
	o->msg = msg;
}

/*
 * Shuffle each rank's program, keeping what NCCL programs must keep: the
 * order of a communicator's collectives, and the order of the messages
 * between one sender and one receiver on one communicator (they match in
 * that order). Everything else may come in any order on any rank.
 */
static void shuffle(struct sim *s)
{
	int r;
	int i;

	for (r = 0; r < s->n; r++) {
		for (i = 0; i < 4 * s->nops[r]; i++) {
			int a = (int)rnd((unsigned)s->nops[r]);
			int b = (int)rnd((unsigned)s->nops[r]);
			struct sop *x;
			struct sop *y;
			int lo = a < b ? a : b;
			int hi = a < b ? b : a;
			int k;
			int ok = 1;
			struct sop t;

			x = &s->ops[r][lo];
			y = &s->ops[r][hi];
			/* swapping x and y must not reorder either against a kept partner */
			for (k = lo; k <= hi && ok; k++) {
				const struct sop *z = &s->ops[r][k];

				if (k != lo && z->gid == x->gid &&
				    ((!x->p2p && !z->p2p) ||
				     (x->p2p && z->p2p == x->p2p && z->peer == x->peer)))
					ok = 0;
				if (k != hi && z->gid == y->gid &&
				    ((!y->p2p && !z->p2p) ||
				     (y->p2p && z->p2p == y->p2p && z->peer == y->peer)))
					ok = 0;
			}
			if (!ok)
				continue;
			t = *x;
			*x = *y;
			*y = t;
		}
	}
}

static void random_group(struct sim *s, int n)
{
	static const uint64_t gids[2] = { 0x9e3779b97f4a7c15ull, 0x2545f4914f6cdd1dull };
	int ncoll[2] = { 0, 0 };
	int nmsg = 0;
	int i;
	int r;

	memset(s, 0, sizeof(*s));
	s->n = n;
	for (i = 0; i < 2 + (int)rnd(12); i++) {
		int g = (int)rnd(2);

		if (rnd(5) == 0) {
			for (r = 0; r < n; r++)
				add(s, r, gids[g], 0, -1, ncoll[g]);
			ncoll[g]++;
		} else {
			int src = (int)rnd((unsigned)n);
			int dst = (int)rnd((unsigned)n);

			add(s, src, gids[g], 1, dst, nmsg);
			add(s, dst, gids[g], 2, src, nmsg);
			nmsg++;
		}
	}
	shuffle(s);
}

static void test_order_exact(void)
{
	/*
	 * rank 1 of 3 (gid 7) writes: recv<-0, send->0, allreduce, send->2,
	 * recv<-2, send->1, recv<-1
	 */
	struct shim_order_in in[] = {
		{ 7, 1, 2, 0 }, { 7, 1, 1, 0 }, { 7, 1, 0, -1 }, { 7, 1, 1, 2 },
		{ 7, 1, 2, 2 }, { 7, 1, 1, 1 }, { 7, 1, 2, 1 },
	};
	/* collective; pair (0,1): 0->1 (recv) then 1->0 (send); pair (1,2): 1->2 then 2->1; self */
	static const int want[] = { 2, 0, 1, 3, 4, 5, 6 };
	/* two communicators: the lower gid goes first whatever the program order */
	struct shim_order_in two[] = {
		{ 9, 0, 0, -1 }, { 3, 0, 1, 1 }, { 9, 0, 2, 1 }, { 3, 0, 0, -1 },
	};
	static const int want2[] = { 3, 1, 0, 2 };
	/* the k-th of several messages to one peer keeps its place */
	struct shim_order_in many[] = {
		{ 5, 2, 1, 0 }, { 5, 2, 2, 0 }, { 5, 2, 1, 0 }, { 5, 2, 2, 0 },
	};
	static const int want3[] = { 1, 3, 0, 2 };
	int perm[8];
	int ok;
	int i;

	ok = shim_order(in, 7, perm) == 0;
	for (i = 0; i < 7; i++)
		ok &= perm[i] == want[i];
	tap_ok(ok, "order of one rank's group: collective, then pair (0,1) lower sender first, pair (1,2), self");
	ok = shim_order(two, 4, perm) == 0;
	for (i = 0; i < 4; i++)
		ok &= perm[i] == want2[i];
	tap_ok(ok, "order across two communicators: by communicator id first");
	ok = shim_order(many, 4, perm) == 0;
	for (i = 0; i < 4; i++)
		ok &= perm[i] == want3[i];
	tap_ok(ok, "several messages to one peer: receives from 0 (lower sender) first, each in program order");
	tap_is_int(shim_order(in, 0, perm), 0, "an empty group orders");
}

static void test_order_sim(void)
{
	struct sim *s = calloc(1, sizeof(*s));
	static int perm[MAXR][MAXOPS];
	static int prog[MAXR][MAXOPS];
	int *order[MAXR];
	int *program[MAXR];
	int nsorted[3] = { 0, 0, 0 };
	int nprog[3] = { 0, 0, 0 };
	int ncases = 0;
	int n;
	int t;
	int r;
	int i;

	for (r = 0; r < MAXR; r++) {
		order[r] = perm[r];
		program[r] = prog[r];
		for (i = 0; i < MAXOPS; i++)
			prog[r][i] = i;
	}
	for (n = 2; n <= MAXR; n++) {
		for (t = 0; t < 300; t++) {
			random_group(s, n);
			for (r = 0; r < n; r++)
				if (order_rank(s, r, order[r]) != 0)
					tap_bail_out("shim_order: out of memory");
			nsorted[simulate(s, order)]++;
			nprog[simulate(s, program)]++;
			ncases++;
		}
	}
	tap_ok(nsorted[0] == ncases,
	       "%d random groups on 2-8 ranks, two communicators, issued in shim_order: all finish (%d deadlocks, %d mismatched messages)",
	       ncases, nsorted[1], nsorted[2]);
	tap_ok(nprog[1] > 0 && nprog[2] == 0,
	       "the same groups issued in program order: the simulator finds deadlocks (%d of %d), and the shuffle kept every pair's order (%d mismatches)",
	       nprog[1], ncases, nprog[2]);
	/* the classic: every rank receives from r-1 before it sends to r+1 */
	memset(s, 0, sizeof(*s));
	s->n = 5;
	for (r = 0; r < 5; r++) {
		add(s, r, 1, 2, (r + 4) % 5, (r + 4) % 5);
		add(s, r, 1, 1, (r + 1) % 5, r);
	}
	for (r = 0; r < 5; r++)
		order_rank(s, r, order[r]);
	tap_is_int(simulate(s, program), 1, "ring of 5, receive before send: deadlocks as written");
	tap_is_int(simulate(s, order), 0, "... and finishes in shim_order");
	free(s);
}

/* ---- PreMulSum's element operation ------------------------------------------ */

static uint32_t fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float bitsf(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* bfloat16 of @f by choosing the nearer of its two neighbours in double (ties to even) */
static uint16_t ref_f2bf(float f)
{
	uint32_t u = fbits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint16_t lo = (uint16_t)((u & 0x7fffffffu) >> 16);      /* magnitude, truncated */
	uint16_t hi = (uint16_t)(lo + 1);
	double a = fabs((double)f);
	double dl = (double)shim_bf2f(lo);
	double dh = hi == 0x7f80u ? ldexp(1.0, 128) : (double)shim_bf2f(hi);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	if (a - dl < dh - a)
		return (uint16_t)(sign | lo);
	if (a - dl > dh - a)
		return (uint16_t)(sign | hi);
	return (uint16_t)(sign | ((lo & 1) ? hi : lo));
}

static void test_scale_conversions(void)
{
	uint32_t bad = 0;
	uint32_t h;
	uint32_t i;
	uint32_t x = 1;
	static const float edges[] = {
		65504.0f,      65519.99f,     65520.0f,	     65536.0f,	    5.9604645e-8f,
		2.9802322e-8f, 2.9802326e-8f, 6.1035156e-5f, 6.1035152e-5f, 1.0f,
		-1.0f,	       0.0f,	      -0.0f,	     1.0009766f,    1.0004883f,
		1.0014648f,
	};

	for (h = 0; h < 65536; h++) {
		uint16_t back = shim_f2h(shim_h2f((uint16_t)h));
		int nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);

		bad += nan ? !((back & 0x7c00u) == 0x7c00u && (back & 0x3ffu)) : back != h;
	}
	tap_is_int(bad, 0, "float16: all 65536 values survive half -> float -> half (NaN stays NaN)");
#ifdef __FLT16_MANT_DIG__
	bad = 0;
	for (h = 0; h < 65536; h++) {
		_Float16 r;
		uint16_t hb = (uint16_t)h;
		float f;

		memcpy(&r, &hb, 2);
		f = (float)r;
		bad += !(h & 0x3ffu && (h & 0x7c00u) == 0x7c00u) && fbits(f) != fbits(shim_h2f(hb));
	}
	tap_is_int(bad, 0, "float16 -> float equals the compiler's _Float16 for every value");
	bad = 0;
	for (i = 0; i < 400000 + sizeof(edges) / sizeof(edges[0]); i++) {
		float f;
		_Float16 r;
		uint16_t rb;

		if (i < sizeof(edges) / sizeof(edges[0])) {
			f = edges[i];
		} else {
			x = x * 1664525u + 1013904223u;
			/* exponents near half's range, so that rounding and subnormals are hit */
			f = bitsf((x & 0x807fffffu) | ((100u + (x >> 24) % 45u) << 23));
		}
		r = (_Float16)f;
		memcpy(&rb, &r, 2);
		bad += rb != shim_f2h(f);
	}
	tap_is_int(bad, 0, "float -> float16 (round to nearest even, subnormals, overflow) equals _Float16 on 400016 values");
#else
	tap_ok(1, "float16 -> float vs _Float16 # SKIP the compiler has no _Float16");
	tap_ok(1, "float -> float16 vs _Float16 # SKIP the compiler has no _Float16");
#endif
	bad = 0;
	for (i = 0; i < 400000; i++) {
		float f;

		x = x * 1664525u + 1013904223u;
		f = bitsf(x);
		if ((x & 0x7f800000u) == 0x7f800000u)
			continue;
		bad += shim_f2bf(f) != ref_f2bf(f);
	}
	tap_is_int(bad, 0, "float -> bfloat16 equals a second rounding (nearer neighbour, ties to even) on 400000 values");
	tap_ok(shim_f2bf(bitsf(0x7fc00001u)) == 0x7fc0u && shim_bf2f(0x3f80u) == 1.0f,
	       "bfloat16: NaN stays quiet NaN, 0x3f80 is 1.0");
}

static void test_scale_products(void)
{
	struct shim_premul pm;
	int8_t i8[3] = { 100, -7, 1 };
	uint8_t u8[3] = { 200, 3, 0 };
	int32_t i32[2] = { 0x40000000, -5 };
	uint64_t u64[2] = { 0xffffffffffffffffull, 7 };
	uint16_t f16[3] = { shim_f2h(1.5f), shim_f2h(-2.0f), shim_f2h(65504.0f) };
	uint16_t b16[2] = { shim_f2bf(3.0f), shim_f2bf(-0.5f) };
	float f32[2] = { 1.5f, -3.0f };
	double f64[2] = { 0.1, 3.0 };
	int8_t s8 = 3;
	uint8_t su8 = 2;
	int32_t s32 = 4;
	uint64_t s64 = 3;
	uint16_t sf16 = shim_f2h(2.0f);
	uint16_t sb16 = shim_f2bf(0.25f);
	float sf32 = 0.5f;
	double sf64 = 10.0;

	memset(&pm, 0, sizeof(pm));
#define SCALE(dt, arr, sc)                                                           \
	do {                                                                         \
		pm.dtype = (dt);                                                     \
		memcpy(pm.value, &(sc), sizeof(sc));                                 \
		shim_premul_host(&pm, (arr), (arr), sizeof(arr) / sizeof((arr)[0])); \
	} while (0)
	SCALE(IBC_INT8, i8, s8);
	tap_ok(i8[0] == 44 && i8[1] == -21 && i8[2] == 3, "int8 products wrap: 100*3 = 44, -7*3 = -21");
	SCALE(IBC_UINT8, u8, su8);
	tap_ok(u8[0] == 144 && u8[1] == 6 && u8[2] == 0, "uint8: 200*2 = 144 (wraps)");
	SCALE(IBC_INT32, i32, s32);
	tap_ok(i32[0] == 0 && i32[1] == -20, "int32: 2^30*4 wraps to 0, -5*4 = -20");
	SCALE(IBC_UINT64, u64, s64);
	tap_ok(u64[0] == 0xfffffffffffffffdull && u64[1] == 21, "uint64: (2^64-1)*3 wraps");
	SCALE(IBC_FLOAT16, f16, sf16);
	tap_ok(shim_h2f(f16[0]) == 3.0f && shim_h2f(f16[1]) == -4.0f && f16[2] == 0x7c00u,
	       "float16: 1.5*2 = 3, -2*2 = -4, 65504*2 = inf");
	SCALE(IBC_BFLOAT16, b16, sb16);
	tap_ok(shim_bf2f(b16[0]) == 0.75f && shim_bf2f(b16[1]) == -0.125f, "bfloat16: 3*0.25, -0.5*0.25");
	SCALE(IBC_FLOAT32, f32, sf32);
	tap_ok(f32[0] == 0.75f && f32[1] == -1.5f, "float32: x*0.5");
	SCALE(IBC_FLOAT64, f64, sf64);
	tap_ok(f64[0] == 0.1 * 10.0 && f64[1] == 30.0, "float64: one IEEE product (0.1*10)");
#undef SCALE
}

int main(void)
{
	test_version();
	test_abi();
	test_mapping();
	test_results();
	test_config();
	test_unique_id();
	test_order_exact();
	test_order_sim();
	test_scale_conversions();
	test_scale_products();
	return tap_done();
}
