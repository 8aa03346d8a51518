/* SPDX-License-Identifier: MIT */
/*
 * test_cuda_coll.c - the device-buffer collective matrix: every collective
 * (blocking, in place, nonblocking, host send buffer with device receive
 * buffer) x dtypes x ops x counts, with 1-4 ranks as processes over shm
 * and tcp, checked against exact closed-form results computed with the CPU
 * reference kernels. Every rank also checks that the operation took the
 * staged path with the expected number of segments.
 *
 * Built twice: test_cuda_coll uses real device memory (cudaMalloc; SKIP
 * without a GPU; tests/gpu/run.sh runs it on one), and test_cuda_stage
 * (CT_EMULATE=1) uses host memory declared as emulated device memory, whose
 * copier runs each copy only when the pipeline waits for it, so that the
 * staging logic (segments, 2D layouts, in-place forms, slot reuse, waits)
 * is tested on every machine. Inputs are small integers, so that every sum,
 * product, average, minimum and maximum is exact in every dtype.
 *
 * usage: test_cuda_coll [--large]   (--large: one group with default
 *        segments and 16 MiB buffers; tests/gpu/run.sh adds it)
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/cuda_stage.h"
#include "base/fault.h"
#include "base/param.h"
#include "base/status.h"
#include "base/util.h"
#include "coll/reduce.h"
#include "cuda/cuda.h"
#include "cuda_test.h"
#include "ibcoll.h"
#include "tap.h"

#ifndef CT_EMULATE
#define CT_EMULATE 0
#endif

enum kind {
	K_ALLREDUCE,
	K_IALLREDUCE,
	K_REDUCE,
	K_BCAST,
	K_ALLGATHER,
	K_RS,
	K_A2A,
	K_P2P,
	K_BARRIER,
};

static const char *kind_name[] = { "allreduce", "iallreduce", "reduce", "broadcast", "allgather",
				   "reduce_scatter", "alltoall", "send/recv", "barrier" };

struct tcase {
	int kind;
	ibc_dtype_t dt;
	ibc_redop_t op;
	size_t count;           /* the count argument: elements per block */
	int inplace;
	int root;
	int host_send;          /* sendbuf in host memory, recvbuf on the device */
};

struct group {
	const char *transport;
	int nranks;
	size_t stage_bytes;
	int large;
	int grow;               /* also rerun with larger segments (the state is replaced) */
};

#define MAX_CASES 512

static const ibc_dtype_t all_dt[] = { IBC_INT8, IBC_UINT8, IBC_INT32, IBC_UINT32, IBC_INT64,
				      IBC_UINT64, IBC_FLOAT16, IBC_BFLOAT16, IBC_FLOAT32,
				      IBC_FLOAT64 };
static const ibc_dtype_t some_dt[] = { IBC_INT8, IBC_FLOAT16, IBC_BFLOAT16, IBC_FLOAT32,
				       IBC_FLOAT64 };
static const ibc_redop_t all_op[] = { IBC_SUM, IBC_PROD, IBC_MIN, IBC_MAX, IBC_AVG };

static int add(struct tcase *c, int n, int kind, ibc_dtype_t dt, ibc_redop_t op, size_t count,
	       int inplace, int root)
{
	if (n >= MAX_CASES)
		return n;
	c[n] = (struct tcase){ kind, dt, op, count, inplace, root, 0 };
	return n + 1;
}

/* the same list on every rank */
static int build_cases(struct tcase *c, int nranks, int large)
{
	int n = 0;
	size_t i;
	size_t j;
	int ip;

	if (large) {
		n = add(c, n, K_ALLREDUCE, IBC_FLOAT32, IBC_SUM, (4u << 20) + 3, 0, 0);
		n = add(c, n, K_ALLREDUCE, IBC_BFLOAT16, IBC_AVG, (8u << 20) + 1, 1, 0);
		n = add(c, n, K_ALLGATHER, IBC_FLOAT32, IBC_SUM, (1u << 20) + 5, 0, 0);
		n = add(c, n, K_RS, IBC_FLOAT16, IBC_SUM, (1u << 20) + 7, 0, 0);
		n = add(c, n, K_BCAST, IBC_FLOAT64, IBC_SUM, (1u << 21) + 1, 0, nranks - 1);
		return n;
	}
	for (i = 0; i < IBC_ARRAY_SIZE(all_dt); i++) {
		for (j = 0; j < IBC_ARRAY_SIZE(all_op); j++) {
			n = add(c, n, K_ALLREDUCE, all_dt[i], all_op[j], 1000, 0, 0);
			n = add(c, n, K_REDUCE, all_dt[i], all_op[j], 333, 0, nranks - 1);
			n = add(c, n, K_RS, all_dt[i], all_op[j], 77, 0, 0);
		}
	}
	for (i = 0; i < IBC_ARRAY_SIZE(some_dt); i++) {
		ibc_dtype_t dt = some_dt[i];

		for (ip = 0; ip < 2; ip++) {
			n = add(c, n, K_ALLREDUCE, dt, IBC_SUM, 0, ip, 0);
			n = add(c, n, K_ALLREDUCE, dt, IBC_SUM, 1, ip, 0);
			n = add(c, n, K_ALLREDUCE, dt, IBC_MAX, 7, ip, 0);
			n = add(c, n, K_ALLREDUCE, dt, IBC_AVG, 4099, ip, 0);
			n = add(c, n, K_ALLGATHER, dt, IBC_SUM, 1, ip, 0);
			n = add(c, n, K_ALLGATHER, dt, IBC_SUM, 1000, ip, 0);
			n = add(c, n, K_BCAST, dt, IBC_SUM, 7, ip, 0);
			n = add(c, n, K_BCAST, dt, IBC_SUM, 3001, ip, nranks - 1);
			n = add(c, n, K_REDUCE, dt, IBC_SUM, 2001, ip, 0);
			n = add(c, n, K_RS, dt, IBC_MIN, 500, ip, 0);
		}
		n = add(c, n, K_A2A, dt, IBC_SUM, 1, 0, 0);
		n = add(c, n, K_A2A, dt, IBC_SUM, 333, 0, 0);
		n = add(c, n, K_P2P, dt, IBC_SUM, 1, 0, 0);
		n = add(c, n, K_P2P, dt, IBC_SUM, 5000, 0, 0);
		n = add(c, n, K_IALLREDUCE, dt, IBC_SUM, 2000, 0, 0);
		n = add(c, n, K_ALLREDUCE, dt, IBC_PROD, 3000, 0, 0);
		c[n - 1].host_send = 1;
	}
	n = add(c, n, K_BARRIER, IBC_UINT8, IBC_SUM, 0, 0, 0);
	return n;
}

/* ---- values ------------------------------------------------------------ */

static void put(void *buf, size_t i, ibc_dtype_t dt, long v)
{
	float f = (float)v;

	switch (dt) {
	case IBC_INT8:     ((int8_t *)buf)[i] = (int8_t)v; break;
	case IBC_UINT8:    ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case IBC_INT32:    ((int32_t *)buf)[i] = (int32_t)v; break;
	case IBC_UINT32:   ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case IBC_INT64:    ((int64_t *)buf)[i] = v; break;
	case IBC_UINT64:   ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case IBC_FLOAT32:  ((float *)buf)[i] = f; break;
	case IBC_FLOAT64:  ((double *)buf)[i] = (double)v; break;
	case IBC_FLOAT16:
	case IBC_BFLOAT16: ibc_cvt_from_f32((uint16_t *)buf + i, &f, 1, dt); break;
	default:           break;
	}
}

static int reduces(int kind)
{
	return kind == K_ALLREDUCE || kind == K_IALLREDUCE || kind == K_REDUCE || kind == K_RS;
}

/* element @i of rank @r's send buffer: small integers, exact in every dtype */
static long value(const struct tcase *c, int r, size_t i)
{
	if (!reduces(c->kind))
		return (long)((r * 31 + i * 7) % 101);
	switch (c->op) {
	case IBC_PROD:
		return 1 + (long)((r + i) % 2);
	case IBC_MIN:
	case IBC_MAX:
		return (long)((i * 7 + (size_t)r * 5) % 13);
	default:
		return (r + 1) * 3 + (long)(i % 5) + 1;
	}
}

static void fill(void *buf, const struct tcase *c, int r, size_t nelem)
{
	size_t i;

	for (i = 0; i < nelem; i++)
		put(buf, i, c->dt, value(c, r, i));
}

/* send and receive sizes in elements of this rank's buffers */
static void sizes(const struct tcase *c, int n, size_t *send_p, size_t *recv_p)
{
	size_t b = c->count;

	switch (c->kind) {
	case K_ALLGATHER:
		*send_p = b;
		*recv_p = (size_t)n * b;
		break;
	case K_RS:
		*send_p = (size_t)n * b;
		*recv_p = b;
		break;
	case K_A2A:
		*send_p = (size_t)n * b;
		*recv_p = (size_t)n * b;
		break;
	case K_BARRIER:
		*send_p = *recv_p = 0;
		break;
	default:
		*send_p = *recv_p = b;
		break;
	}
}

/* p2p pairs: (0,1), (2,3), ...; -1 for the odd one out */
static int p2p_peer(int r, int n)
{
	int p = r ^ 1;

	return p < n ? p : -1;
}

/* the expected receive buffer of rank @r (host memory, @recv elements) */
static void expected(const struct tcase *c, int r, int n, void *exp, size_t esz)
{
	size_t b = c->count;
	size_t send;
	size_t recv;
	char *tmp;
	int q;

	sizes(c, n, &send, &recv);
	tmp = malloc(send * esz + 1);
	switch (c->kind) {
	case K_ALLREDUCE:
	case K_IALLREDUCE:
	case K_REDUCE:
	case K_RS: {
		char *acc = malloc(send * esz + 1);

		fill(acc, c, 0, send);
		for (q = 1; q < n; q++) {
			fill(tmp, c, q, send);
			ibc_reduce_local3(acc, acc, tmp, send, c->dt, c->op);
		}
		if (c->op == IBC_AVG)
			ibc_reduce_avg_finalize(acc, send, c->dt, n);
		memcpy(exp, acc + (c->kind == K_RS ? (size_t)r * b * esz : 0), recv * esz);
		free(acc);
		break;
	}
	case K_BCAST:
		fill(exp, c, c->root, b);
		break;
	case K_ALLGATHER:
		for (q = 0; q < n; q++) {
			fill(tmp, c, q, b);
			memcpy((char *)exp + (size_t)q * b * esz, tmp, b * esz);
		}
		break;
	case K_A2A:
		for (q = 0; q < n; q++) {
			fill(tmp, c, q, send);
			memcpy((char *)exp + (size_t)q * b * esz, tmp + (size_t)r * b * esz,
			       b * esz);
		}
		break;
	case K_P2P:
		fill(exp, c, p2p_peer(r, n), b);
		break;
	default:
		break;
	}
	free(tmp);
}

/* segments the staged path cuts this case into, on this rank */
static uint64_t expected_segments(const struct tcase *c, int r, int n, size_t esz,
				  size_t stage_bytes, uint64_t *ops_p)
{
	int blocked = c->kind == K_ALLGATHER || c->kind == K_RS || c->kind == K_A2A;
	size_t blocks = blocked ? (size_t)n : 1;
	size_t seg = stage_bytes / (esz * blocks);
	int nops = 1;

	if (!seg)
		seg = 1;
	*ops_p = 0;
	if (c->count == 0 || c->kind == K_BARRIER)
		return 0;
	if (c->kind == K_P2P) {
		if (p2p_peer(r, n) < 0)
			return 0;
		nops = 2;
	}
	*ops_p = (uint64_t)nops;
	return (uint64_t)nops * ((c->count + seg - 1) / seg);
}

/* ---- one case on one rank ---------------------------------------------- */

struct rank_ctx {
	const struct group *g;
	int emu;
	size_t stage_bytes;     /* IBC_CUDA_STAGE_BYTES in force */
	char msg[512];
};

static ibc_status_t call(ibc_comm_h comm, const struct tcase *c, int r, int n, const void *s,
			 void *d)
{
	ibc_request_h req;
	ibc_status_t st;
	int peer;

	switch (c->kind) {
	case K_ALLREDUCE:
		return ibc_allreduce(s, d, c->count, c->dt, c->op, comm);
	case K_IALLREDUCE:
		st = ibc_iallreduce(s, d, c->count, c->dt, c->op, comm, &req);
		return st == IBC_OK ? ibc_wait(req) : st;
	case K_REDUCE:
		return ibc_reduce(s, d, c->count, c->dt, c->op, c->root, comm);
	case K_BCAST:
		return ibc_broadcast(s, d, c->count, c->dt, c->root, comm);
	case K_ALLGATHER:
		return ibc_allgather(s, d, c->count, c->dt, comm);
	case K_RS:
		return ibc_reduce_scatter(s, d, c->count, c->dt, c->op, comm);
	case K_A2A:
		return ibc_alltoall(s, d, c->count, c->dt, comm);
	case K_P2P:
		peer = p2p_peer(r, n);
		if (peer < 0)
			return IBC_OK;
		if (r % 2 == 0) {
			st = ibc_send(s, c->count, c->dt, peer, comm);
			return st == IBC_OK ? ibc_recv(d, c->count, c->dt, peer, comm) : st;
		}
		st = ibc_recv(d, c->count, c->dt, peer, comm);
		return st == IBC_OK ? ibc_send(s, c->count, c->dt, peer, comm) : st;
	case K_BARRIER:
		return ibc_barrier(comm);
	default:
		return IBC_ERR_INTERNAL;
	}
}

/* 0 pass, 1 fail (reason in ctx->msg) */
static int run_case(ibc_comm_h comm, int r, int n, const struct tcase *c, struct rank_ctx *ctx)
{
	size_t esz = 0;
	size_t send;
	size_t recv;
	size_t nbytes;
	int emu = ctx->emu;
	char *hin = NULL;
	char *hout = NULL;
	char *hexp = NULL;
	char *dbuf = NULL;      /* device: the send buffer, or the in-place buffer */
	char *drecv = NULL;     /* device: the receive buffer when not in place */
	char *hsend = NULL;     /* host send buffer (host_send cases) */
	const char *sp;
	char *rp;
	int is_root = c->root == r;
	uint64_t ops0;
	uint64_t seg0;
	uint64_t ops1;
	uint64_t seg1;
	uint64_t want_ops;
	uint64_t want_seg;
	ibc_status_t st;
	int fail = 1;
	size_t k;

	ibc_dtype_size(c->dt, &esz);
	sizes(c, n, &send, &recv);
	nbytes = (send > recv ? send : recv) * esz;
	hin = calloc(1, send * esz + 1);
	hout = calloc(1, nbytes + 1);
	hexp = calloc(1, recv * esz + 1);
	if (!hin || !hout || !hexp) {
		snprintf(ctx->msg, sizeof(ctx->msg), "out of host memory");
		goto out;
	}
	fill(hin, c, r, send);
	expected(c, r, n, hexp, esz);
	dbuf = ct_dev_alloc(nbytes, emu);
	if (!c->inplace)
		drecv = ct_dev_alloc(recv * esz, emu);
	if (!dbuf || (!c->inplace && !drecv)) {
		snprintf(ctx->msg, sizeof(ctx->msg), "cannot allocate %zu bytes of %s memory",
			 nbytes, emu ? "emulated device" : "device");
		goto out;
	}
	/* a pattern in every output byte, so that untouched output is noticed */
	memset(hout, 0x5a, nbytes);
	if (ct_to_dev(dbuf, hout, nbytes, emu) ||
	    (drecv && ct_to_dev(drecv, hout, recv * esz, emu)))
		goto out_copy;
	sp = dbuf;
	rp = c->inplace ? dbuf : drecv;
	if (c->inplace && c->kind == K_ALLGATHER) {
		sp = dbuf + (size_t)r * c->count * esz;         /* own block of recvbuf */
	} else if (c->inplace && c->kind == K_RS) {
		rp = dbuf + (size_t)r * c->count * esz;         /* own block of sendbuf */
	}
	if (ct_to_dev((void *)sp, hin, send * esz, emu))
		goto out_copy;
	if (c->host_send) {
		hsend = malloc(send * esz + 1);
		memcpy(hsend, hin, send * esz);
		sp = hsend;
	}
	ibc_cuda_stage_stats(&ops0, &seg0);
	st = call(comm, c, r, n, sp, rp);
	ibc_cuda_stage_stats(&ops1, &seg1);
	if (st != IBC_OK) {
		snprintf(ctx->msg, sizeof(ctx->msg), "returned %s: %s", ibc_status_str(st),
			 ibc_last_error());
		goto out;
	}
	want_seg = expected_segments(c, r, n, esz, ctx->stage_bytes, &want_ops);
	if (ops1 - ops0 != want_ops || seg1 - seg0 != want_seg) {
		snprintf(ctx->msg, sizeof(ctx->msg),
			 "staged %llu operations in %llu segments, expected %llu in %llu",
			 (unsigned long long)(ops1 - ops0), (unsigned long long)(seg1 - seg0),
			 (unsigned long long)want_ops, (unsigned long long)want_seg);
		goto out;
	}
	if (c->kind == K_BARRIER || (c->kind == K_REDUCE && !is_root) ||
	    (c->kind == K_P2P && p2p_peer(r, n) < 0)) {
		fail = 0;
		goto out;
	}
	if (ct_from_dev(hout, rp, recv * esz, emu))
		goto out_copy;
	for (k = 0; k < recv * esz; k++) {
		if (hout[k] != hexp[k]) {
			snprintf(ctx->msg, sizeof(ctx->msg),
				 "byte %zu (element %zu) is 0x%02x, expected 0x%02x", k, k / esz,
				 (unsigned char)hout[k], (unsigned char)hexp[k]);
			goto out;
		}
	}
	fail = 0;
	goto out;
out_copy:
	snprintf(ctx->msg, sizeof(ctx->msg), "a test copy to or from the device failed");
out:
	ct_dev_free(dbuf, emu);
	ct_dev_free(drecv, emu);
	free(hsend);
	free(hin);
	free(hout);
	free(hexp);
	return fail;
}

static int rank_main(int r, int n, const ibc_unique_id_t *id, void *arg)
{
	struct rank_ctx ctx = { .g = arg, .emu = CT_EMULATE };
	struct tcase *cases = calloc(MAX_CASES, sizeof(*cases));
	static const size_t grow[] = { 262144, 65536, 1048576 };
	ibc_comm_h comm;
	ibc_status_t st;
	int ncases;
	int nfail = 0;
	unsigned k;
	int i;

	ctx.stage_bytes = ctx.g->stage_bytes;

	if (!cases)
		return 1;
	if (!ctx.emu && ibc_cuda_set_device(0) != IBC_OK) {
		printf("# rank %d: cannot use CUDA device 0\n", r);
		return 1;
	}
	st = ibc_comm_init_rank(&comm, n, id, r);
	if (st != IBC_OK) {
		printf("# rank %d: ibc_comm_init_rank: %s\n", r, ibc_status_str(st));
		return 1;
	}
	ncases = build_cases(cases, n, ctx.g->large);
	for (i = 0; i < ncases; i++) {
		const struct tcase *c = &cases[i];

		if (run_case(comm, r, n, c, &ctx)) {
			if (++nfail <= 8)
				printf("# rank %d: case %d %s %s %s count %zu%s%s root %d: %s\n", r, i,
				       kind_name[c->kind], ibc_dtype_name(c->dt),
				       ibc_redop_name(c->op), c->count, c->inplace ? " in place" : "",
				       c->host_send ? " host sendbuf" : "", c->root, ctx.msg);
			if (ibc_comm_get_async_error(comm, &st) == IBC_OK && st != IBC_OK)
				break;  /* poisoned: the rest would fail the same way */
		}
	}
	/* larger segments on the same communicator: its staging state is replaced */
	for (k = 0; ctx.g->grow && k < IBC_ARRAY_SIZE(grow) && !nfail; k++) {
		char buf[32];

		snprintf(buf, sizeof(buf), "%zu", grow[k]);
		setenv("IBC_CUDA_STAGE_BYTES", buf, 1);
		ibc_param_reset_all();
		ctx.stage_bytes = grow[k];
		for (i = 0; i < ncases && i < 60; i++) {
			if (run_case(comm, r, n, &cases[i], &ctx)) {
				printf("# rank %d: %zu-byte segments, case %d: %s\n", r, grow[k], i,
				       ctx.msg);
				nfail++;
				break;
			}
		}
	}
	ibc_comm_destroy(comm);
	free(cases);
	return nfail ? 1 : 0;
}

/* ---- failure injection: a staging copy fails on every rank ------------- */

static int fault_main(int r, int n, const ibc_unique_id_t *id, void *arg)
{
	struct rank_ctx ctx = { .g = arg, .emu = CT_EMULATE };
	size_t count = 100000;
	float *h = malloc(count * sizeof(float));
	void *d;
	ibc_comm_h comm;
	ibc_status_t st;
	ibc_status_t st2;
	time_t t0;
	size_t i;

	if (!ctx.emu && ibc_cuda_set_device(0) != IBC_OK)
		return 1;
	if (ibc_comm_init_rank(&comm, n, id, r) != IBC_OK || !h)
		return 1;
	d = ct_dev_alloc(count * sizeof(float), ctx.emu);
	for (i = 0; i < count; i++)
		h[i] = (float)r;
	if (!d || ct_to_dev(d, h, count * sizeof(float), ctx.emu))
		return 1;
	t0 = time(NULL);
	st = ibc_allreduce(d, d, count, IBC_FLOAT32, IBC_SUM, comm);
	/* a failed communicator answers at once, with its error */
	st2 = ibc_allreduce(d, d, count, IBC_FLOAT32, IBC_SUM, comm);
	ibc_comm_destroy(comm);
	ct_dev_free(d, ctx.emu);
	free(h);
	printf("# rank %d: %s after %ld s (%ld faults injected), then %s\n", r,
	       ibc_status_str(st), (long)(time(NULL) - t0), ibc_fault_fired_count(),
	       ibc_status_str(st2));
	if (st2 == IBC_OK || time(NULL) - t0 > 30)
		return 1;
	if (st == IBC_ERR_CUDA && ibc_fault_fired_count() > 0)
		return 0;
	return st == IBC_ERR_REMOTE || st == IBC_ERR_TIMEOUT ? 3 : 1;
}

static void set_env(const struct group *g)
{
	char buf[32];

	setenv("IBC_TRANSPORT", g->transport, 1);
	snprintf(buf, sizeof(buf), "%zu", g->stage_bytes);
	setenv("IBC_CUDA_STAGE_BYTES", buf, 1);
	/* small ring chunks: several chunks per segment */
	setenv("IBC_RING_CHUNK_BYTES", g->large ? "524288" : "256", 1);
	setenv("IBC_TIMEOUT_MS", "20000", 1);
	unsetenv("IBC_FAULT_INJECT");
}

int main(int argc, char **argv)
{
	static const struct group small[] = {
		{ "shm", 1, 1024, 0, 0 }, { "shm", 2, 1024, 0, 1 }, { "shm", 3, 1024, 0, 0 },
		{ "shm", 4, 1024, 0, 0 }, { "tcp", 2, 1024, 0, 0 }, { "tcp", 3, 1024, 0, 1 },
		{ "tcp", 4, 1024, 0, 0 },
	};
	static const struct group large[] = {
		{ "shm", 4, 4194304, 1, 0 }, { "tcp", 2, 4194304, 1, 0 },
	};
	struct tcase *cases = calloc(MAX_CASES, sizeof(*cases));
	int do_large = argc > 1 && !strcmp(argv[1], "--large");
	struct group fg = { "shm", 2, 4096, 0, 0 };
	int codes[2];
	size_t i;

	if (!CT_EMULATE) {
		int ndev = ct_probe_devices();

		if (!IBC_CUDA_BUILT)
			tap_skip_all("built without CUDA");
		if (ndev < 1)
			tap_skip_all("no CUDA device (tests/gpu/run.sh runs this on a GPU machine)");
		tap_diag("%d CUDA device(s); every rank uses device 0", ndev);
	}
	setenv("IBC_DEBUG", "WARN", 0);
	for (i = 0; i < IBC_ARRAY_SIZE(small); i++) {
		const struct group *g = &small[i];
		int ncases = build_cases(cases, g->nranks, 0);
		int nfail;

		set_env(g);
		nfail = ct_run_ranks(g->nranks, rank_main, (void *)g, 240);
		tap_ok(nfail == 0, "%s, %d rank(s), %zu-byte segments: %d cases on %s buffers%s",
		       g->transport, g->nranks, g->stage_bytes, ncases,
		       CT_EMULATE ? "emulated device" : "device",
		       g->grow ? ", then 60 with 64 KiB to 1 MiB segments" : "");
	}
	for (i = 0; do_large && i < IBC_ARRAY_SIZE(large); i++) {
		const struct group *g = &large[i];
		int nfail;

		set_env(g);
		nfail = ct_run_ranks(g->nranks, rank_main, (void *)g, 240);
		tap_ok(nfail == 0, "%s, %d ranks, default 4 MiB segments: %d large cases",
		       g->transport, g->nranks, build_cases(cases, g->nranks, 1));
	}
	/* the 3rd checked CUDA call (emulated: the 3rd staging copy) fails on both ranks */
	set_env(&fg);
	setenv("IBC_FAULT_INJECT", CT_EMULATE ? "cuda:3" : "cuda:40", 1);
	setenv("IBC_TIMEOUT_MS", "5000", 1);
	if (ct_run_ranks_codes(2, fault_main, &fg, 60, codes) != 0) {
		tap_ok(0, "fault injection group ran");
	} else {
		tap_ok((codes[0] == 0 || codes[0] == 3) && (codes[1] == 0 || codes[1] == 3) &&
			       (codes[0] == 0 || codes[1] == 0),
		       "an injected CUDA failure fails the collective on every rank with IBC_ERR_CUDA (or the peer's loss), bounded, then poisons (exit codes %d %d)",
		       codes[0], codes[1]);
	}
	free(cases);
	return tap_done();
}
