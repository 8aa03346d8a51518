/* SPDX-License-Identifier: MIT */
/*
 * nccl_check.c - libibcoll_nccl.so as an application sees it: a program
 * that includes bindings/nccl/nccl.h and links libnccl.so.2 (ours), run as
 * N forked ranks (one process per rank, as a trainer runs; the parent never
 * touches CUDA). Prints TAP: one line per (ranks, transport, case), ok when
 * every rank passed the case, with each failing rank's reason.
 *
 * Each case gets a fresh communicator (rank 0 makes the unique id and
 * pipes it to the others), so a failure stays in its case. Inputs are
 * small integers: every result is exact in every type, fp16/bf16 included.
 * Cases: allreduce of every datatype, every reduction, in place; broadcast,
 * ncclBcast, reduce, allgather and reduce-scatter (in place too),
 * ncclAlltoAll/ncclAllToAll; groups of sends and receives written in
 * deadlocking orders (ring with the receive first, all-to-all with self,
 * several messages per peer), mixed with collectives, nested, on two
 * communicators written in opposite orders; split; nonblocking and
 * in-group initialization; registration, finalize; PreMulSum operators;
 * argument errors and their texts; a peer that dies (ncclRemoteError,
 * bounded); on a device also stream order, a group on two streams and the
 * refusal of graph capture.
 *
 * Modes: host (no CUDA device: host buffers, NULL stream), device (device
 * buffers, a stream per rank); -d auto picks device when one exists.
 *
 * usage: nccl_check [-m "N:TRANSPORT ..."] [-d auto|host|device] [-t SECONDS] [-c CASE]
 *        default -m "1:shm 2:shm 3:shm 4:shm 2:tcp 3:tcp", -t 300 per run
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "nccl.h"

#define MAXRANKS 16

struct ctx {
	int rank;
	int nranks;
	int device;             /* device buffers and a stream */
	cudaStream_t stream;
	ncclComm_t comm;        /* made by the runner unless the case makes its own */
	ncclUniqueId id;        /* this case's id (ids[0]) */
	ncclUniqueId ids[2];    /* the case's ids, fetched before it runs */
	int idpipe;             /* ranks > 0: ids from rank 0 */
	int uppipe;             /* ranks > 0: barrier tokens to rank 0 */
	int downpipe;           /* ranks > 0: barrier tokens from rank 0 */
	int idout[MAXRANKS];    /* rank 0: the other ends */
	int upin[MAXRANKS];
	int downout[MAXRANKS];
	char why[1024];
};

static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->why[0])
		return -1;      /* keep the first reason */
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	return -1;
}

/* the case does not apply here: reported as a TAP skip with @why */
static int skip(struct ctx *c, const char *why)
{
	snprintf(c->why, sizeof(c->why), "%s", why);
	return 2;
}

#define CHECK(c, expr)                                                                     \
	do {                                                                               \
		ncclResult_t res_ = (expr);                                                \
		if (res_ != ncclSuccess)                                                   \
			return fail((c), "%s:%d: %s returned %d (%s): %s", __FILE__, __LINE__, \
				    #expr, (int)res_, ncclGetErrorString(res_),           \
				    ncclGetLastError((c)->comm));                          \
	} while (0)

/* expr must return want, and ncclGetLastError must then contain text */
#define EXPECT_ERR(c, expr, want, text)                                                    \
	do {                                                                               \
		ncclResult_t res_ = (expr);                                                \
		const char *e_ = ncclGetLastError((c)->comm);                              \
		if (res_ != (want))                                                        \
			return fail((c), "%s:%d: %s returned %d, expected %d (%s)", __FILE__,  \
				    __LINE__, #expr, (int)res_, (int)(want), e_);          \
		if (!strstr(e_, (text)))                                           \
			return fail((c), "%s:%d: %s: last error '%s' lacks '%s'", __FILE__,   \
				    __LINE__, #expr, e_, (text));                          \
	} while (0)

/* ---- values --------------------------------------------------------------- */

static uint16_t f2h(float f)
{
	uint32_t x;
	uint32_t sign;
	uint32_t m;
	uint32_t h;
	uint32_t rem;
	int e;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	m = x & 0x7fffff;
	e = (int)((x >> 23) & 0xff) - 127 + 15;
	if (((x >> 23) & 0xff) == 0 || e <= 0)
		return (uint16_t)sign;  /* zero (the tests use no tiny values) */
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00);
	h = sign | ((uint32_t)e << 10) | (m >> 13);
	rem = m & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++;
	return (uint16_t)h;
}

static float h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f;
	uint32_t m = h & 0x3ff;
	uint32_t x;
	float f;

	if (e == 0) {
		f = (float)m / 16777216.0f;
		return sign ? -f : f;
	}
	if (e == 31)
		x = sign | 0x7f800000 | (m << 13);
	else
		x = sign | ((e - 15 + 127) << 23) | (m << 13);
	memcpy(&f, &x, 4);
	return f;
}

static uint16_t f2bf(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static float bf2f(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static size_t dtsize(int dt)
{
	static const size_t sz[ncclNumTypes] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2 };

	return sz[dt];
}

static const char *dtname(int dt)
{
	static const char *const n[ncclNumTypes] = { "int8",    "uint8",   "int32",   "uint32",
						     "int64",   "uint64",  "float16", "float32",
						     "float64", "bfloat16" };

	return n[dt];
}

static void put(int dt, void *b, size_t i, double v)
{
	switch (dt) {
	case ncclInt8: ((int8_t *)b)[i] = (int8_t)v; break;
	case ncclUint8: ((uint8_t *)b)[i] = (uint8_t)v; break;
	case ncclInt32: ((int32_t *)b)[i] = (int32_t)v; break;
	case ncclUint32: ((uint32_t *)b)[i] = (uint32_t)v; break;
	case ncclInt64: ((int64_t *)b)[i] = (int64_t)v; break;
	case ncclUint64: ((uint64_t *)b)[i] = (uint64_t)v; break;
	case ncclFloat16: ((uint16_t *)b)[i] = f2h((float)v); break;
	case ncclFloat32: ((float *)b)[i] = (float)v; break;
	case ncclFloat64: ((double *)b)[i] = v; break;
	case ncclBfloat16: ((uint16_t *)b)[i] = f2bf((float)v); break;
	}
}

static double get(int dt, const void *b, size_t i)
{
	switch (dt) {
	case ncclInt8: return ((const int8_t *)b)[i];
	case ncclUint8: return ((const uint8_t *)b)[i];
	case ncclInt32: return ((const int32_t *)b)[i];
	case ncclUint32: return ((const uint32_t *)b)[i];
	case ncclInt64: return (double)((const int64_t *)b)[i];
	case ncclUint64: return (double)((const uint64_t *)b)[i];
	case ncclFloat16: return h2f(((const uint16_t *)b)[i]);
	case ncclFloat32: return ((const float *)b)[i];
	case ncclFloat64: return ((const double *)b)[i];
	case ncclBfloat16: return bf2f(((const uint16_t *)b)[i]);
	}
	return -1e300;
}

/* element i from rank r: 3..3n+6, exact in every type, sums too */
static double val(int r, size_t i)
{
	return (double)((r + 1) * 3 + (int)(i % 7));
}

/* ---- buffers: device memory or host memory ------------------------------- */

static void *balloc(struct ctx *c, size_t nbytes)
{
	void *p = NULL;

	if (!nbytes)
		nbytes = 1;
	if (c->device)
		return cudaMalloc(&p, nbytes) == cudaSuccess ? p : NULL;
	return calloc(1, nbytes);
}

static void bfree(struct ctx *c, void *p)
{
	if (c->device)
		cudaFree(p);
	else
		free(p);
}

/* host array -> buffer (before the operation) */
static int bput(struct ctx *c, void *d, const void *h, size_t nbytes)
{
	if (!nbytes)
		return 0;
	if (c->device)
		return cudaMemcpy(d, h, nbytes, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
	memcpy(d, h, nbytes);
	return 0;
}

/* buffer -> host array, after the stream finished */
static int bget(struct ctx *c, void *h, const void *d, size_t nbytes)
{
	if (c->device && cudaStreamSynchronize(c->stream) != cudaSuccess)
		return -1;
	if (!nbytes)
		return 0;
	if (c->device)
		return cudaMemcpy(h, d, nbytes, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
	memcpy(h, d, nbytes);
	return 0;
}

/* a buffer of @count elements of @dt filled with f(rank, i), and its host copy */
struct buf {
	void *d;
	void *h;
	size_t count;
	int dt;
};

static int buf_make(struct ctx *c, struct buf *b, int dt, size_t count, int fill_rank)
{
	size_t i;

	b->dt = dt;
	b->count = count;
	b->h = calloc(count ? count : 1, dtsize(dt));
	b->d = balloc(c, count * dtsize(dt));
	if (!b->h || !b->d)
		return fail(c, "out of memory (%zu elements)", count);
	if (fill_rank >= 0)
		for (i = 0; i < count; i++)
			put(dt, b->h, i, val(fill_rank, i));
	else
		memset(b->h, 0xa5, count * dtsize(dt)); /* a pattern no result has */
	return bput(c, b->d, b->h, count * dtsize(dt)) ? fail(c, "cannot fill buffer") : 0;
}

static void buf_free(struct ctx *c, struct buf *b)
{
	bfree(c, b->d);
	free(b->h);
	b->d = b->h = NULL;
}

static int buf_read(struct ctx *c, struct buf *b)
{
	return bget(c, b->h, b->d, b->count * dtsize(b->dt)) ? fail(c, "cannot read buffer") : 0;
}

/* compare element i (from @off) with want(i); report the first difference */
static int buf_expect(struct ctx *c, struct buf *b, size_t off, size_t n, const char *what,
		      double (*want)(struct ctx *, size_t, void *), void *arg)
{
	size_t i;

	if (buf_read(c, b))
		return -1;
	for (i = 0; i < n; i++) {
		double w = want(c, i, arg);
		double g = get(b->dt, b->h, off + i);

		if (g != w)
			return fail(c, "%s %s: element %zu is %g, expected %g", what, dtname(b->dt),
				    i, g, w);
	}
	return 0;
}

/* ---- cases ----------------------------------------------------------------- */

static const size_t counts[] = { 0, 1, 7, 1003 };
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static double want_sum(struct ctx *c, size_t i, void *arg)
{
	double s = 0;
	int r;

	(void)arg;
	for (r = 0; r < c->nranks; r++)
		s += val(r, i);
	return s;
}

static int allreduce_sum_all_types(struct ctx *c)
{
	size_t k;
	int dt;

	for (dt = 0; dt < ncclNumTypes; dt++) {
		for (k = 0; k < NCOUNTS; k++) {
			struct buf s;
			struct buf r;
			int rc;

			if (buf_make(c, &s, dt, counts[k], c->rank) ||
			    buf_make(c, &r, dt, counts[k], -1))
				return -1;
			CHECK(c, ncclAllReduce(s.d, r.d, counts[k], (ncclDataType_t)dt, ncclSum,
					       c->comm, c->stream));
			rc = buf_expect(c, &r, 0, counts[k], "allreduce sum", want_sum, NULL);
			buf_free(c, &s);
			buf_free(c, &r);
			if (rc)
				return -1;
		}
	}
	return 0;
}

/* max, min, prod in place: max and min differ, so a swapped mapping fails */
static double want_max(struct ctx *c, size_t i, void *arg)
{
	(void)arg;
	return val(c->nranks - 1, i);
}

static double want_min(struct ctx *c, size_t i, void *arg)
{
	(void)arg;
	(void)c;
	return val(0, i);
}

static double pval(int r, size_t i)
{
	return 1 + (double)((r + (int)i) % 2);
}

static double want_prod(struct ctx *c, size_t i, void *arg)
{
	double p = 1;
	int r;

	(void)arg;
	for (r = 0; r < c->nranks; r++)
		p *= pval(r, i);
	return p;
}

static int allreduce_ops_in_place(struct ctx *c)
{
	static const int dts[] = { ncclInt32, ncclFloat32, ncclBfloat16, ncclUint8 };
	size_t k;
	size_t i;
	int t;

	for (t = 0; t < 4; t++) {
		for (k = 0; k < NCOUNTS; k++) {
			int dt = dts[t];
			size_t n = counts[k];
			struct buf b;

			if (buf_make(c, &b, dt, n, c->rank))
				return -1;
			CHECK(c, ncclAllReduce(b.d, b.d, n, dt, ncclMax, c->comm, c->stream));
			if (buf_expect(c, &b, 0, n, "allreduce max in place", want_max, NULL))
				return -1;
			for (i = 0; i < n; i++)
				put(dt, b.h, i, val(c->rank, i));
			bput(c, b.d, b.h, n * dtsize(dt));
			CHECK(c, ncclAllReduce(b.d, b.d, n, dt, ncclMin, c->comm, c->stream));
			if (buf_expect(c, &b, 0, n, "allreduce min in place", want_min, NULL))
				return -1;
			for (i = 0; i < n; i++)
				put(dt, b.h, i, pval(c->rank, i));
			bput(c, b.d, b.h, n * dtsize(dt));
			CHECK(c, ncclAllReduce(b.d, b.d, n, dt, ncclProd, c->comm, c->stream));
			if (buf_expect(c, &b, 0, n, "allreduce prod in place", want_prod, NULL))
				return -1;
			buf_free(c, &b);
		}
	}
	return 0;
}

/* avg: inputs (i % 5) + 2r - (n-1) sum to n * (i % 5), so the average is exact */
static double want_avg(struct ctx *c, size_t i, void *arg)
{
	(void)c;
	(void)arg;
	return (double)(i % 5);
}

static int allreduce_avg(struct ctx *c)
{
	static const int dts[] = { ncclInt32, ncclFloat32, ncclFloat64 };
	size_t i;
	int t;

	for (t = 0; t < 3; t++) {
		struct buf s;
		struct buf r;

		if (buf_make(c, &s, dts[t], 1003, -1) || buf_make(c, &r, dts[t], 1003, -1))
			return -1;
		for (i = 0; i < 1003; i++)
			put(dts[t], s.h, i, (double)(i % 5) + 2 * c->rank - (c->nranks - 1));
		bput(c, s.d, s.h, 1003 * dtsize(dts[t]));
		CHECK(c, ncclAllReduce(s.d, r.d, 1003, dts[t], ncclAvg, c->comm, c->stream));
		if (buf_expect(c, &r, 0, 1003, "allreduce avg", want_avg, NULL))
			return -1;
		buf_free(c, &s);
		buf_free(c, &r);
	}
	return 0;
}

static double want_from(struct ctx *c, size_t i, void *arg)
{
	(void)c;
	return val(*(int *)arg, i);
}

static int broadcast_bcast(struct ctx *c)
{
	int root = c->nranks - 1;
	size_t k;

	for (k = 0; k < NCOUNTS; k++) {
		struct buf s;
		struct buf r;
		int zero = 0;

		if (buf_make(c, &s, ncclFloat16, counts[k], c->rank) ||
		    buf_make(c, &r, ncclFloat16, counts[k], -1))
			return -1;
		CHECK(c, ncclBroadcast(c->rank == root ? s.d : NULL, r.d, counts[k], ncclFloat16,
				       root, c->comm, c->stream));
		if (buf_expect(c, &r, 0, counts[k], "broadcast", want_from, &root))
			return -1;
		/* ncclBcast in place from rank 0 */
		CHECK(c, ncclBcast(s.d, counts[k], ncclFloat16, 0, c->comm, c->stream));
		if (buf_expect(c, &s, 0, counts[k], "ncclBcast", want_from, &zero))
			return -1;
		buf_free(c, &s);
		buf_free(c, &r);
	}
	return 0;
}

static int reduce_to_root(struct ctx *c)
{
	int root = c->nranks > 1 ? 1 : 0;
	size_t k;

	for (k = 0; k < NCOUNTS; k++) {
		struct buf s;
		struct buf r;

		if (buf_make(c, &s, ncclInt64, counts[k], c->rank) ||
		    buf_make(c, &r, ncclInt64, counts[k], -1))
			return -1;
		/* non-roots pass NULL for even k, a buffer that must stay untouched for odd k */
		CHECK(c, ncclReduce(s.d, c->rank == root || k % 2 ? r.d : NULL, counts[k],
				    ncclInt64, ncclSum, root, c->comm, c->stream));
		if (c->rank == root &&
		    buf_expect(c, &r, 0, counts[k], "reduce sum", want_sum, NULL))
			return -1;
		if (c->rank != root && buf_read(c, &r) == 0) {
			size_t i;

			for (i = 0; i < counts[k] * 8; i++)
				if (((unsigned char *)r.h)[i] != 0xa5)
					return fail(c, "reduce wrote byte %zu of non-root rank %d's recvbuff",
						    i, c->rank);
		}
		buf_free(c, &s);
		buf_free(c, &r);
	}
	return 0;
}

/* block j of an allgather of @count per rank: rank j's val(j, i) */
static double want_gather(struct ctx *c, size_t i, void *arg)
{
	size_t count = *(size_t *)arg;

	(void)c;
	return val((int)(i / count), i % count);
}

static int allgather(struct ctx *c)
{
	size_t k;
	size_t i;

	for (k = 0; k < NCOUNTS; k++) {
		size_t n = counts[k];
		size_t tot = n * (size_t)c->nranks;
		struct buf s;
		struct buf r;

		if (buf_make(c, &s, ncclBfloat16, n, c->rank) ||
		    buf_make(c, &r, ncclBfloat16, tot, -1))
			return -1;
		CHECK(c, ncclAllGather(s.d, r.d, n, ncclBfloat16, c->comm, c->stream));
		if (buf_expect(c, &r, 0, tot, "allgather", want_gather, &n))
			return -1;
		/* in place: my block already in place in the receive buffer */
		for (i = 0; i < tot; i++) {
			int mine = i / (n ? n : 1) == (size_t)c->rank;

			put(ncclBfloat16, r.h, i, mine ? val(c->rank, i % n) : 99);
		}
		bput(c, r.d, r.h, tot * 2);
		CHECK(c, ncclAllGather((char *)r.d + (size_t)c->rank * n * 2, r.d, n, ncclBfloat16,
				       c->comm, c->stream));
		if (buf_expect(c, &r, 0, tot, "allgather in place", want_gather, &n))
			return -1;
		buf_free(c, &s);
		buf_free(c, &r);
	}
	return 0;
}

/* reduce-scatter of nranks * n: rank r gets the sum of block r */
static double want_rs(struct ctx *c, size_t i, void *arg)
{
	size_t n = *(size_t *)arg;

	return want_sum(c, (size_t)c->rank * n + i, NULL);
}

static int reduce_scatter(struct ctx *c)
{
	size_t k;

	for (k = 0; k < NCOUNTS; k++) {
		size_t n = counts[k];
		size_t tot = n * (size_t)c->nranks;
		struct buf s;
		struct buf r;

		if (buf_make(c, &s, ncclUint8, tot, c->rank) || buf_make(c, &r, ncclUint8, n, -1))
			return -1;
		CHECK(c, ncclReduceScatter(s.d, r.d, n, ncclUint8, ncclSum, c->comm, c->stream));
		if (buf_expect(c, &r, 0, n, "reduce_scatter", want_rs, &n))
			return -1;
		/* in place: the result lands on block rank of the send buffer */
		CHECK(c, ncclReduceScatter(s.d, (char *)s.d + (size_t)c->rank * n, n, ncclUint8,
					   ncclSum, c->comm, c->stream));
		if (buf_expect(c, &s, (size_t)c->rank * n, n, "reduce_scatter in place", want_rs, &n))
			return -1;
		buf_free(c, &s);
		buf_free(c, &r);
	}
	return 0;
}

/* alltoall: rank r's block p is 100 * r + p + i; rank p receives it as block r */
static double a2a_val(int from, int to, size_t i)
{
	return (double)(100 * from + 10 * to + (int)(i % 10));
}

static int fill_a2a(struct ctx *c, struct buf *s, size_t n)
{
	size_t i;
	int p;

	for (p = 0; p < c->nranks; p++)
		for (i = 0; i < n; i++)
			put(s->dt, s->h, (size_t)p * n + i, a2a_val(c->rank, p, i));
	return bput(c, s->d, s->h, (size_t)c->nranks * n * dtsize(s->dt));
}

static int check_a2a(struct ctx *c, struct buf *r, size_t n, const char *what)
{
	size_t i;
	int p;

	if (buf_read(c, r))
		return -1;
	for (p = 0; p < c->nranks; p++)
		for (i = 0; i < n; i++)
			if (get(r->dt, r->h, (size_t)p * n + i) != a2a_val(p, c->rank, i))
				return fail(c, "%s: block %d element %zu is %g, expected %g", what, p,
					    i, get(r->dt, r->h, (size_t)p * n + i),
					    a2a_val(p, c->rank, i));
	return 0;
}

static int alltoall(struct ctx *c)
{
	size_t k;

	for (k = 0; k < NCOUNTS; k++) {
		size_t n = counts[k];
		size_t tot = n * (size_t)c->nranks;
		struct buf s;
		struct buf r;

		if (buf_make(c, &s, ncclInt32, tot, -1) || buf_make(c, &r, ncclInt32, tot, -1) ||
		    fill_a2a(c, &s, n))
			return -1;
		CHECK(c, ncclAlltoAll(s.d, r.d, n, ncclInt32, c->comm, c->stream));
		if (check_a2a(c, &r, n, "ncclAlltoAll"))
			return -1;
		memset(r.h, 0, tot * 4);
		bput(c, r.d, r.h, tot * 4);
		CHECK(c, ncclAllToAll(s.d, r.d, n, ncclInt32, c->comm, c->stream));
		if (check_a2a(c, &r, n, "ncclAllToAll"))
			return -1;
		buf_free(c, &s);
		buf_free(c, &r);
	}
	return 0;
}

/* ring shift of 1 MiB: receive from r-1 written before the send to r+1 */
static int group_ring(struct ctx *c)
{
	size_t n = 262144;
	int prev = (c->rank + c->nranks - 1) % c->nranks;
	int next = (c->rank + 1) % c->nranks;
	struct buf s;
	struct buf r;

	if (buf_make(c, &s, ncclFloat32, n, c->rank) || buf_make(c, &r, ncclFloat32, n, -1))
		return -1;
	CHECK(c, ncclGroupStart());
	CHECK(c, ncclRecv(r.d, n, ncclFloat32, prev, c->comm, c->stream));
	CHECK(c, ncclSend(s.d, n, ncclFloat32, next, c->comm, c->stream));
	CHECK(c, ncclGroupEnd());
	if (buf_expect(c, &r, 0, n, "ring shift (recv written first)", want_from, &prev))
		return -1;
	buf_free(c, &s);
	buf_free(c, &r);
	return 0;
}

/* nccl-tests' alltoall: for every r (self included) send block r, receive block r */
static int group_alltoall_sendrecv(struct ctx *c)
{
	size_t n = 5;
	size_t tot = n * (size_t)c->nranks;
	struct buf s;
	struct buf r;
	int p;

	if (buf_make(c, &s, ncclInt32, tot, -1) || buf_make(c, &r, ncclInt32, tot, -1) ||
	    fill_a2a(c, &s, n))
		return -1;
	CHECK(c, ncclGroupStart());
	for (p = 0; p < c->nranks; p++) {
		int32_t *sb = (int32_t *)s.d + (size_t)p * n;
		int32_t *rb = (int32_t *)r.d + (size_t)p * n;

		CHECK(c, ncclSend(sb, n, ncclInt32, p, c->comm, c->stream));
		CHECK(c, ncclRecv(rb, n, ncclInt32, p, c->comm, c->stream));
	}
	CHECK(c, ncclGroupEnd());
	if (check_a2a(c, &r, n, "send/recv all-to-all with self"))
		return -1;
	buf_free(c, &s);
	buf_free(c, &r);
	return 0;
}

/*
 * Two messages each way between ranks 2k and 2k+1 (a lone last rank talks
 * to itself), of 7 and 1003 elements, written in opposite orders on the
 * two sides: each must arrive in its own buffer (messages match in order).
 */
static int group_two_per_peer(struct ctx *c)
{
	int peer = c->rank ^ 1;
	struct buf s7, s1k, r7, r1k;
	int from;

	if (peer >= c->nranks)
		peer = c->rank;
	from = peer;
	if (buf_make(c, &s7, ncclInt32, 7, c->rank) ||
	    buf_make(c, &s1k, ncclInt32, 1003, c->rank) || buf_make(c, &r7, ncclInt32, 7, -1) ||
	    buf_make(c, &r1k, ncclInt32, 1003, -1))
		return -1;
	CHECK(c, ncclGroupStart());
	if (c->rank % 2) {
		CHECK(c, ncclRecv(r7.d, 7, ncclInt32, peer, c->comm, c->stream));
		CHECK(c, ncclRecv(r1k.d, 1003, ncclInt32, peer, c->comm, c->stream));
		CHECK(c, ncclSend(s7.d, 7, ncclInt32, peer, c->comm, c->stream));
		CHECK(c, ncclSend(s1k.d, 1003, ncclInt32, peer, c->comm, c->stream));
	} else {
		CHECK(c, ncclSend(s7.d, 7, ncclInt32, peer, c->comm, c->stream));
		CHECK(c, ncclRecv(r7.d, 7, ncclInt32, peer, c->comm, c->stream));
		CHECK(c, ncclSend(s1k.d, 1003, ncclInt32, peer, c->comm, c->stream));
		CHECK(c, ncclRecv(r1k.d, 1003, ncclInt32, peer, c->comm, c->stream));
	}
	CHECK(c, ncclGroupEnd());
	if (buf_expect(c, &r7, 0, 7, "first message", want_from, &from) ||
	    buf_expect(c, &r1k, 0, 1003, "second message", want_from, &from))
		return -1;
	buf_free(c, &s7);
	buf_free(c, &s1k);
	buf_free(c, &r7);
	buf_free(c, &r1k);
	return 0;
}

/* nested groups holding an allreduce, a ring shift and an allgather */
static int group_mixed_nested(struct ctx *c)
{
	size_t n = 7;
	int prev = (c->rank + c->nranks - 1) % c->nranks;
	int next = (c->rank + 1) % c->nranks;
	size_t tot = n * (size_t)c->nranks;
	struct buf as, ar, ps, pr, gs, gr;

	if (buf_make(c, &as, ncclFloat64, n, c->rank) || buf_make(c, &ar, ncclFloat64, n, -1) ||
	    buf_make(c, &ps, ncclInt8, n, c->rank) || buf_make(c, &pr, ncclInt8, n, -1) ||
	    buf_make(c, &gs, ncclUint64, n, c->rank) || buf_make(c, &gr, ncclUint64, tot, -1))
		return -1;
	CHECK(c, ncclGroupStart());
	if (c->rank % 2)
		CHECK(c, ncclRecv(pr.d, n, ncclInt8, prev, c->comm, c->stream));
	CHECK(c, ncclAllReduce(as.d, ar.d, n, ncclFloat64, ncclSum, c->comm, c->stream));
	CHECK(c, ncclGroupStart());
	CHECK(c, ncclSend(ps.d, n, ncclInt8, next, c->comm, c->stream));
	CHECK(c, ncclAllGather(gs.d, gr.d, n, ncclUint64, c->comm, c->stream));
	CHECK(c, ncclGroupEnd());
	if (!(c->rank % 2))
		CHECK(c, ncclRecv(pr.d, n, ncclInt8, prev, c->comm, c->stream));
	CHECK(c, ncclGroupEnd());
	if (buf_expect(c, &ar, 0, n, "allreduce in group", want_sum, NULL) ||
	    buf_expect(c, &pr, 0, n, "ring in group", want_from, &prev) ||
	    buf_expect(c, &gr, 0, tot, "allgather in group", want_gather, &n))
		return -1;
	buf_free(c, &as);
	buf_free(c, &ar);
	buf_free(c, &ps);
	buf_free(c, &pr);
	buf_free(c, &gs);
	buf_free(c, &gr);
	return 0;
}

/*
 * Two communicators (the world and a split of it with one color) in one
 * group, written in opposite orders: even ranks the allreduce on the split
 * first, odd ranks the ring receive on the world first. Issued as written
 * with blocking execution, the even ranks wait in the allreduce for the
 * odd ones, which wait in their receive for the even ones.
 */
static int group_two_comms(struct ctx *c)
{
	int prev = (c->rank + c->nranks - 1) % c->nranks;
	int next = (c->rank + 1) % c->nranks;
	ncclComm_t dup = NULL;
	struct buf as, ar, ps, pr;
	size_t n = 1003;

	CHECK(c, ncclCommSplit(c->comm, 0, c->rank, &dup, NULL));
	if (!dup)
		return fail(c, "split with color 0 gave no communicator");
	if (buf_make(c, &as, ncclInt32, n, c->rank) || buf_make(c, &ar, ncclInt32, n, -1) ||
	    buf_make(c, &ps, ncclInt32, n, c->rank) || buf_make(c, &pr, ncclInt32, n, -1))
		return -1;
	CHECK(c, ncclGroupStart());
	if (c->rank % 2 == 0) {
		CHECK(c, ncclAllReduce(as.d, ar.d, n, ncclInt32, ncclSum, dup, c->stream));
		CHECK(c, ncclSend(ps.d, n, ncclInt32, next, c->comm, c->stream));
		CHECK(c, ncclRecv(pr.d, n, ncclInt32, prev, c->comm, c->stream));
	} else {
		CHECK(c, ncclRecv(pr.d, n, ncclInt32, prev, c->comm, c->stream));
		CHECK(c, ncclSend(ps.d, n, ncclInt32, next, c->comm, c->stream));
		CHECK(c, ncclAllReduce(as.d, ar.d, n, ncclInt32, ncclSum, dup, c->stream));
	}
	CHECK(c, ncclGroupEnd());
	if (buf_expect(c, &ar, 0, n, "allreduce on the split", want_sum, NULL) ||
	    buf_expect(c, &pr, 0, n, "ring on the world", want_from, &prev))
		return -1;
	CHECK(c, ncclCommDestroy(dup));
	buf_free(c, &as);
	buf_free(c, &ar);
	buf_free(c, &ps);
	buf_free(c, &pr);
	return 0;
}

/* split by parity, keys reversed; with more than 2 ranks rank 0 opts out */
static double want_split_sum(struct ctx *c, size_t i, void *arg)
{
	int parity = *(int *)arg;
	double s = 0;
	int r;

	for (r = 0; r < c->nranks; r++)
		if (r % 2 == parity && !(c->nranks > 2 && r == 0))
			s += val(r, i);
	return s;
}

static int split(struct ctx *c)
{
	int out = c->nranks > 2 && c->rank == 0;
	int parity = c->rank % 2;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclComm_t sub = NULL;
	int members = 0;
	int below = 0;
	int count = -1;
	int rank = -1;
	int r;
	struct buf s;
	struct buf d;

	CHECK(c, ncclCommSplit(c->comm, out ? NCCL_SPLIT_NOCOLOR : parity, -c->rank, &sub,
			       c->rank == 1 ? &cfg : NULL));
	if (out)
		return sub ? fail(c, "NCCL_SPLIT_NOCOLOR gave a communicator") : 0;
	if (!sub)
		return fail(c, "split gave no communicator");
	for (r = 0; r < c->nranks; r++) {
		if (r % 2 != parity || (c->nranks > 2 && r == 0))
			continue;
		members++;
		below += r > c->rank;   /* keys reversed: higher parent ranks first */
	}
	CHECK(c, ncclCommCount(sub, &count));
	CHECK(c, ncclCommUserRank(sub, &rank));
	if (count != members || rank != below)
		return fail(c, "split: rank %d of %d, expected %d of %d", rank, count, below, members);
	if (buf_make(c, &s, ncclInt32, 7, c->rank) || buf_make(c, &d, ncclInt32, 7, -1))
		return -1;
	CHECK(c, ncclAllReduce(s.d, d.d, 7, ncclInt32, ncclSum, sub, c->stream));
	if (buf_expect(c, &d, 0, 7, "allreduce on the split", want_split_sum, &parity))
		return -1;
	CHECK(c, ncclCommDestroy(sub));
	buf_free(c, &s);
	buf_free(c, &d);
	return 0;
}

/* ---- PreMulSum -------------------------------------------------------------------- */

/* rank r's scalar: r + 1, or (r + 1) / 2 for the float types (exact) */
static double premul_scalar(int dt, int r)
{
	return dt == ncclFloat32 || dt == ncclFloat64 ? (r + 1) * 0.5 : r + 1;
}

static double want_premul(struct ctx *c, size_t i, void *arg)
{
	int dt = *(int *)arg;
	double s = 0;
	int r;

	for (r = 0; r < c->nranks; r++)
		s += premul_scalar(dt, r) * val(r, i);
	return s;
}

static double want_premul_rs(struct ctx *c, size_t i, void *arg)
{
	size_t n = ((size_t *)arg)[0];
	int dt = (int)((size_t *)arg)[1];

	return want_premul(c, (size_t)c->rank * n + i, &dt);
}

/* an operator for @dt with this rank's scalar, host-immediate */
static int make_premul(struct ctx *c, int dt, ncclRedOp_t *op)
{
	unsigned char sc[8];

	put(dt, sc, 0, premul_scalar(dt, c->rank));
	CHECK(c, ncclRedOpCreatePreMulSum(op, sc, (ncclDataType_t)dt, ncclScalarHostImmediate,
					  c->comm));
	return 0;
}

/*
 * sum over ranks of scalar_r * x_r for allreduce (5 types x 4 counts, the
 * operator destroyed right after the call returned, the input untouched),
 * reduce, reduce_scatter, in a group; misuse of operators; on a device also
 * a scalar in device memory.
 */
static int premul_sum(struct ctx *c)
{
	static const int dts[] = { ncclFloat32, ncclFloat16, ncclBfloat16, ncclInt32, ncclUint8 };
	ncclRedOp_t op;
	ncclRedOp_t op2;
	size_t k;
	int t;

	for (t = 0; t < 5; t++) {
		for (k = 0; k < NCOUNTS; k++) {
			int dt = dts[t];
			struct buf s;
			struct buf r;

			if (buf_make(c, &s, dt, counts[k], c->rank) ||
			    buf_make(c, &r, dt, counts[k], -1) || make_premul(c, dt, &op))
				return -1;
			CHECK(c, ncclAllReduce(s.d, r.d, counts[k], dt, op, c->comm, c->stream));
			CHECK(c, ncclRedOpDestroy(op, c->comm));
			if (buf_expect(c, &r, 0, counts[k], "PreMulSum allreduce", want_premul, &dt) ||
			    buf_expect(c, &s, 0, counts[k], "PreMulSum input, untouched", want_from, &c->rank))
				return -1;
			buf_free(c, &s);
			buf_free(c, &r);
		}
	}
	{
		int dt = ncclFloat64;
		int root = c->nranks - 1;
		struct buf s;
		struct buf r;

		if (buf_make(c, &s, dt, 1003, c->rank) || buf_make(c, &r, dt, 1003, -1) ||
		    make_premul(c, dt, &op))
			return -1;
		CHECK(c, ncclReduce(s.d, r.d, 1003, dt, op, root, c->comm, c->stream));
		if (c->rank == root && buf_expect(c, &r, 0, 1003, "PreMulSum reduce", want_premul, &dt))
			return -1;
		/* the operator is for float64 only */
		EXPECT_ERR(c, ncclAllReduce(s.d, r.d, 7, ncclFloat32, op, c->comm, c->stream),
			   ncclInvalidArgument, "was created for datatype 8, used with datatype 7");
		CHECK(c, ncclRedOpDestroy(op, c->comm));
		EXPECT_ERR(c, ncclRedOpDestroy(op, c->comm), ncclInvalidArgument,
			   "is not an operator of this communicator");
		EXPECT_ERR(c, ncclAllReduce(s.d, r.d, 7, dt, op, c->comm, c->stream),
			   ncclInvalidArgument, "neither a built-in reduction nor an operator");
		buf_free(c, &s);
		buf_free(c, &r);
	}
	{
		size_t n = 7;
		size_t arg[2] = { 7, ncclInt64 };
		struct buf s;
		struct buf r;

		if (buf_make(c, &s, ncclInt64, n * (size_t)c->nranks, c->rank) ||
		    buf_make(c, &r, ncclInt64, n, -1) || make_premul(c, ncclInt64, &op))
			return -1;
		CHECK(c, ncclReduceScatter(s.d, r.d, n, ncclInt64, op, c->comm, c->stream));
		if (buf_expect(c, &r, 0, n, "PreMulSum reduce_scatter", want_premul_rs, arg))
			return -1;
		/* in place, inside a group, next to a plain sum */
		if (make_premul(c, ncclInt64, &op2))
			return -1;
		CHECK(c, ncclGroupStart());
		CHECK(c, ncclReduceScatter(s.d, (int64_t *)s.d + (size_t)c->rank * n, n, ncclInt64,
					   op2, c->comm, c->stream));
		CHECK(c, ncclRedOpDestroy(op2, c->comm));
		CHECK(c, ncclAllReduce(r.d, r.d, n, ncclInt64, ncclSum, c->comm, c->stream));
		CHECK(c, ncclGroupEnd());
		if (buf_expect(c, &s, (size_t)c->rank * n, n, "PreMulSum reduce_scatter in place in a group",
			       want_premul_rs, arg))
			return -1;
		CHECK(c, ncclRedOpDestroy(op, c->comm));
		buf_free(c, &s);
		buf_free(c, &r);
	}
	if (c->device) {
		int dt = ncclFloat32;
		float sc = (float)premul_scalar(dt, c->rank);
		float *dsc = NULL;
		struct buf s;
		struct buf r;

		if (cudaMalloc((void **)&dsc, sizeof(sc)) != cudaSuccess ||
		    cudaMemcpy(dsc, &sc, sizeof(sc), cudaMemcpyHostToDevice) != cudaSuccess)
			return fail(c, "cannot put the scalar on the device");
		if (buf_make(c, &s, dt, 1003, c->rank) || buf_make(c, &r, dt, 1003, -1))
			return -1;
		CHECK(c, ncclRedOpCreatePreMulSum(&op, dsc, ncclFloat32, ncclScalarDevice,
						  c->comm));
		CHECK(c, ncclAllReduce(s.d, r.d, 1003, dt, op, c->comm, c->stream));
		CHECK(c, ncclRedOpDestroy(op, c->comm));
		if (buf_expect(c, &r, 0, 1003, "PreMulSum with a device scalar", want_premul, &dt))
			return -1;
		cudaFree(dsc);
		buf_free(c, &s);
		buf_free(c, &r);
	}
	return 0;
}

/* ---- stream semantics (device mode) ------------------------------------------------ */

struct delayed {
	int32_t *h;
	size_t n;
	int rank;
};

/* a host function on the stream: the input appears only 300 ms after the call */
static void delayed_fill(void *arg)
{
	struct delayed *d = arg;
	size_t i;

	usleep(300000);
	for (i = 0; i < d->n; i++)
		d->h[i] = (int32_t)val(d->rank, i);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* @n int32 received in @out (pinned host) must be the sum over ranks */
static int check_pinned(struct ctx *c, const int32_t *out, size_t n,
			double (*want)(struct ctx *, size_t, void *), void *arg, const char *what)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (out[i] != (int32_t)want(c, i, arg))
			return fail(c, "%s: element %zu is %d, expected %d", what, i, out[i],
				    (int32_t)want(c, i, arg));
	return 0;
}

/*
 * ncclAllReduce returns before the stream reaches it (its input is written
 * by a host function queued 300 ms ahead), runs after that work, and a copy
 * queued behind it on the stream sees the result.
 */
static int stream_ordering(struct ctx *c)
{
	size_t n = 1003;
	struct delayed d;
	int32_t *in = NULL;
	int32_t *out = NULL;
	double t;
	struct buf r;

	if (!c->device)
		return skip(c, "needs a CUDA device (stream mode)");
	if (cudaMallocHost((void **)&in, n * 4) != cudaSuccess ||
	    cudaMallocHost((void **)&out, n * 4) != cudaSuccess)
		return fail(c, "cudaMallocHost failed");
	memset(in, 0, n * 4);
	memset(out, 0, n * 4);
	if (buf_make(c, &r, ncclInt32, n, -1))
		return -1;
	d.h = in;
	d.n = n;
	d.rank = c->rank;
	if (cudaLaunchHostFunc(c->stream, delayed_fill, &d) != cudaSuccess)
		return fail(c, "cudaLaunchHostFunc failed");
	t = now_s();
	CHECK(c, ncclAllReduce(in, r.d, n, ncclInt32, ncclSum, c->comm, c->stream));
	t = now_s() - t;
	if (cudaMemcpyAsync(out, r.d, n * 4, cudaMemcpyDeviceToHost, c->stream) != cudaSuccess ||
	    cudaStreamSynchronize(c->stream) != cudaSuccess)
		return fail(c, "copy after the allreduce failed");
	if (t > 0.2)
		return fail(c, "ncclAllReduce took %.0f ms: it waited for the stream", t * 1e3);
	if (check_pinned(c, out, n, want_sum, NULL, "allreduce of input written by earlier stream work"))
		return -1;
	buf_free(c, &r);
	cudaFreeHost(in);
	cudaFreeHost(out);
	return 0;
}

/* a group whose receive is on a second stream: work queued there afterwards sees the data */
static int group_two_streams(struct ctx *c)
{
	size_t n = 1003;
	int prev = (c->rank + c->nranks - 1) % c->nranks;
	int next = (c->rank + 1) % c->nranks;
	cudaStream_t s2;
	int32_t *out = NULL;
	struct buf s;
	struct buf r;

	if (!c->device)
		return skip(c, "needs a CUDA device (stream mode)");
	if (cudaStreamCreate(&s2) != cudaSuccess ||
	    cudaMallocHost((void **)&out, n * 4) != cudaSuccess)
		return fail(c, "cudaStreamCreate/cudaMallocHost failed");
	if (buf_make(c, &s, ncclInt32, n, c->rank) || buf_make(c, &r, ncclInt32, n, -1))
		return -1;
	CHECK(c, ncclGroupStart());
	CHECK(c, ncclRecv(r.d, n, ncclInt32, prev, c->comm, s2));
	CHECK(c, ncclSend(s.d, n, ncclInt32, next, c->comm, c->stream));
	CHECK(c, ncclGroupEnd());
	if (cudaMemcpyAsync(out, r.d, n * 4, cudaMemcpyDeviceToHost, s2) != cudaSuccess ||
	    cudaStreamSynchronize(s2) != cudaSuccess ||
	    cudaStreamSynchronize(c->stream) != cudaSuccess)
		return fail(c, "copy on the second stream failed");
	if (check_pinned(c, out, n, want_from, &prev, "ring received on a second stream"))
		return -1;
	cudaStreamDestroy(s2);
	cudaFreeHost(out);
	buf_free(c, &s);
	buf_free(c, &r);
	return 0;
}

/* ---- cases that make their own communicator ---------------------------------- */

/*
 * A barrier outside the library, over pipes through rank 0: before an
 * abort or an exit, so that no peer is still finishing an operation that
 * the abort would fail. A dead rank ends the pipes (EOF), never a hang.
 */
static int barrier(struct ctx *c)
{
	char t = 'b';
	int r;

	if (c->rank == 0) {
		for (r = 1; r < c->nranks; r++)
			if (read(c->upin[r], &t, 1) != 1)
				return fail(c, "barrier: rank %d is gone", r);
		for (r = 1; r < c->nranks; r++)
			if (write(c->downout[r], &t, 1) != 1)
				return fail(c, "barrier: rank %d is gone", r);
		return 0;
	}
	if (write(c->uppipe, &t, 1) != 1 || read(c->downpipe, &t, 1) != 1)
		return fail(c, "barrier: rank 0 is gone");
	return 0;
}

static int allreduce_check(struct ctx *c, ncclComm_t comm, const char *what)
{
	struct buf s;
	struct buf r;
	ncclComm_t keep = c->comm;
	int rc;

	c->comm = comm;
	if (buf_make(c, &s, ncclInt32, 7, c->rank) || buf_make(c, &r, ncclInt32, 7, -1))
		return -1;
	CHECK(c, ncclAllReduce(s.d, r.d, 7, ncclInt32, ncclSum, comm, c->stream));
	rc = buf_expect(c, &r, 0, 7, what, want_sum, NULL);
	buf_free(c, &s);
	buf_free(c, &r);
	c->comm = keep;
	return rc;
}

static int init_nonblocking(struct ctx *c)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclResult_t res;
	ncclResult_t ast = ncclInProgress;
	ncclComm_t comm = NULL;
	int polls = 0;
	time_t end = time(NULL) + 60;

	cfg.blocking = 0;
	res = ncclCommInitRankConfig(&comm, c->nranks, c->id, c->rank, &cfg);
	if (res != ncclInProgress && res != ncclSuccess)
		return fail(c, "nonblocking init returned %d: %s", (int)res, ncclGetLastError(NULL));
	if (!comm)
		return fail(c, "nonblocking init gave no handle");
	while (ast == ncclInProgress && time(NULL) < end) {
		CHECK(c, ncclCommGetAsyncError(comm, &ast));
		polls++;
		if (ast == ncclInProgress)
			usleep(1000);
	}
	if (ast != ncclSuccess)
		return fail(c, "nonblocking init ended with %d after %d polls: %s", (int)ast, polls,
			    ncclGetLastError(comm));
	if (res == ncclInProgress && polls < 1)
		return fail(c, "no poll");
	if (allreduce_check(c, comm, "allreduce after nonblocking init"))
		return -1;
	CHECK(c, ncclCommDestroy(comm));
	return 0;
}

/* two communicators created inside one group (the init is asynchronous there) */
static int init_in_group(struct ctx *c)
{
	ncclUniqueId id2 = c->ids[1];
	ncclComm_t a = NULL;
	ncclComm_t b = NULL;

	CHECK(c, ncclGroupStart());
	CHECK(c, ncclCommInitRank(&a, c->nranks, c->id, c->rank));
	CHECK(c, ncclCommInitRank(&b, c->nranks, id2, c->nranks - 1 - c->rank));
	CHECK(c, ncclGroupEnd());
	if (allreduce_check(c, a, "allreduce on the first") ||
	    allreduce_check(c, b, "allreduce on the second"))
		return -1;
	CHECK(c, ncclCommDestroy(a));
	CHECK(c, ncclCommDestroy(b));
	return 0;
}

/*
 * Rank 0 alone: two ranks of one 2-rank communicator in this process (made
 * in one group), then one group holding both ranks' allreduce: refused
 * (one thread cannot drive two ranks here; docs/nccl.md). A zero unique id:
 * refused at once by a blocking init, and reported through
 * ncclCommGetAsyncError by a nonblocking one.
 */
static int one_thread_two_ranks(struct ctx *c)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId zero;
	ncclComm_t a = NULL;
	ncclComm_t b = NULL;
	ncclComm_t z = NULL;
	ncclResult_t ast = ncclInProgress;
	time_t end = time(NULL) + 60;
	struct buf x;
	struct buf y;

	if (c->rank != 0)
		return 0;       /* the id is rank 0's; the others have nothing to do */
	CHECK(c, ncclGroupStart());
	CHECK(c, ncclCommInitRank(&a, 2, c->id, 0));
	CHECK(c, ncclCommInitRank(&b, 2, c->id, 1));
	CHECK(c, ncclGroupEnd());
	if (buf_make(c, &x, ncclInt32, 7, 0) || buf_make(c, &y, ncclInt32, 7, 1))
		return -1;
	CHECK(c, ncclGroupStart());
	CHECK(c, ncclAllReduce(x.d, x.d, 7, ncclInt32, ncclSum, a, c->stream));
	CHECK(c, ncclAllReduce(y.d, y.d, 7, ncclInt32, ncclSum, b, c->stream));
	EXPECT_ERR(c, ncclGroupEnd(), ncclInvalidUsage,
		   "one thread cannot drive several ranks of a communicator");
	if (buf_expect(c, &x, 0, 7, "rank 0's buffer after the refused group", want_from,
		       &(int){ 0 }))
		return -1;
	CHECK(c, ncclCommDestroy(a));
	CHECK(c, ncclCommDestroy(b));
	buf_free(c, &x);
	buf_free(c, &y);
	memset(&zero, 0, sizeof(zero));
	if (ncclCommInitRank(&z, 2, zero, 0) == ncclSuccess || z)
		return fail(c, "a zero unique id was accepted");
	cfg.blocking = 0;
	if (ncclCommInitRankConfig(&z, 2, zero, 0, &cfg) != ncclInProgress || !z)
		return fail(c, "nonblocking init with a zero id did not start");
	while (ast == ncclInProgress && time(NULL) < end) {
		CHECK(c, ncclCommGetAsyncError(z, &ast));
		if (ast == ncclInProgress)
			usleep(1000);
	}
	if (ast == ncclSuccess || ast == ncclInProgress || !*ncclGetLastError(NULL))
		return fail(c, "nonblocking init with a zero id: async result %d, text '%s'", (int)ast,
			    ncclGetLastError(NULL));
	EXPECT_ERR(c, ncclCommCount(z, &(int){ 0 }), ast, "initialization failed");
	CHECK(c, ncclCommDestroy(z));
	return 0;
}

static int register_finalize(struct ctx *c)
{
	void *h1 = NULL;
	void *h2 = NULL;
	int x = 0;
	struct buf b;

	if (buf_make(c, &b, ncclInt32, 1003, c->rank))
		return -1;
	CHECK(c, ncclCommRegister(c->comm, b.d, 1003 * 4, &h1));
	CHECK(c, ncclCommRegister(c->comm, b.d, 16, &h2));
	if (!h1 || !h2 || h1 == h2)
		return fail(c, "register gave handles %p and %p", h1, h2);
	CHECK(c, ncclAllReduce(b.d, b.d, 1003, ncclInt32, ncclSum, c->comm, c->stream));
	if (buf_expect(c, &b, 0, 1003, "allreduce on a registered buffer", want_sum, NULL))
		return -1;
	CHECK(c, ncclCommDeregister(c->comm, h1));
	EXPECT_ERR(c, ncclCommDeregister(c->comm, h1), ncclInvalidArgument,
		   "is not a registration of this communicator");
	EXPECT_ERR(c, ncclCommRegister(c->comm, NULL, 8, &h1), ncclInvalidArgument,
		   "buff is NULL with size 8");
	/* h2 stays registered: destroy frees it */
	CHECK(c, ncclAllReduce(b.d, b.d, 1003, ncclInt32, ncclSum, c->comm, c->stream));
	CHECK(c, ncclCommFinalize(c->comm));
	if (buf_read(c, &b))
		return -1;
	EXPECT_ERR(c, ncclAllReduce(b.d, b.d, 1, ncclInt32, ncclSum, c->comm, c->stream),
		   ncclInvalidUsage, "ncclAllReduce: rank");
	EXPECT_ERR(c, ncclCommCount(c->comm, &x), ncclInvalidUsage, "was finalized");
	buf_free(c, &b);
	return 0;
}

static int errors(struct ctx *c)
{
	char rank_of[64];
	int n = c->nranks;
	int dev = -5;
	ncclRedOp_t op = ncclSum;
	float f = 2;
	void *p = NULL;
	struct buf b;

	snprintf(rank_of, sizeof(rank_of), "rank %d of %d", c->rank, n);
	if (buf_make(c, &b, ncclInt32, 8, c->rank))
		return -1;
	EXPECT_ERR(c, ncclAllReduce(b.d, b.d, 8, (ncclDataType_t)10, ncclSum, c->comm, c->stream),
		   ncclInvalidArgument, "datatype 10 is not supported");
	EXPECT_ERR(c, ncclAllReduce(b.d, b.d, 8, ncclInt32, (ncclRedOp_t)5, c->comm, c->stream),
		   ncclInvalidArgument, "op 5 is neither a built-in reduction");
	EXPECT_ERR(c, ncclBroadcast(b.d, b.d, 8, ncclInt32, n, c->comm, c->stream),
		   ncclInvalidArgument, "root");
	if (!strstr(ncclGetLastError(c->comm), rank_of))
		return fail(c, "the text does not name the rank ('%s' lacks '%s')",
			    ncclGetLastError(c->comm), rank_of);
	EXPECT_ERR(c, ncclSend(b.d, 8, ncclInt32, -1, c->comm, c->stream), ncclInvalidArgument,
		   "peer -1 is not a rank");
	EXPECT_ERR(c, ncclAllReduce(NULL, b.d, 8, ncclInt32, ncclSum, c->comm, c->stream),
		   ncclInvalidArgument, "sendbuff is NULL with count 8");
	EXPECT_ERR(c, ncclSend(b.d, 8, ncclInt32, c->rank, c->comm, c->stream), ncclInvalidUsage,
		   "send to self outside ncclGroupStart/End");
	EXPECT_ERR(c, ncclAllReduce(b.d, b.d, 8, ncclInt32, ncclSum, NULL, c->stream),
		   ncclInvalidArgument, "comm is NULL");
	EXPECT_ERR(c, ncclGroupEnd(), ncclInvalidUsage, "no matching ncclGroupStart");
	/* a group with a send to self and no receive: refused, nothing issued */
	CHECK(c, ncclGroupStart());
	CHECK(c, ncclSend(b.d, 8, ncclInt32, c->rank, c->comm, c->stream));
	CHECK(c, ncclAllReduce(b.d, b.d, 8, ncclInt32, ncclSum, c->comm, c->stream));
	EXPECT_ERR(c, ncclGroupEnd(), ncclInvalidUsage, "has no matching ncclRecv from self");
	/* a group with one bad call: the error again at ncclGroupEnd, nothing issued */
	CHECK(c, ncclGroupStart());
	CHECK(c, ncclAllReduce(b.d, b.d, 8, ncclInt32, ncclSum, c->comm, c->stream));
	if (ncclAllReduce(b.d, b.d, 8, (ncclDataType_t)11, ncclSum, c->comm, c->stream) !=
	    ncclInvalidArgument)
		return fail(c, "bad datatype accepted inside a group");
	EXPECT_ERR(c, ncclGroupEnd(), ncclInvalidArgument, "datatype 11 is not supported");
	/* the communicator still works, and nothing of the refused groups ran */
	if (buf_expect(c, &b, 0, 8, "untouched by refused groups, then", want_from, &c->rank))
		return -1;
	CHECK(c, ncclAllReduce(b.d, b.d, 8, ncclInt32, ncclSum, c->comm, c->stream));
	if (buf_expect(c, &b, 0, 8, "allreduce after the refused groups", want_sum, NULL))
		return -1;
	EXPECT_ERR(c, ncclRedOpCreatePreMulSum(&op, NULL, ncclFloat32, ncclScalarHostImmediate,
					       c->comm),
		   ncclInvalidArgument, "scalar is NULL");
	EXPECT_ERR(c, ncclRedOpCreatePreMulSum(&op, &f, (ncclDataType_t)10, ncclScalarHostImmediate,
					       c->comm),
		   ncclInvalidArgument, "datatype 10 is not supported");
	EXPECT_ERR(c, ncclRedOpDestroy(ncclSum, c->comm), ncclInvalidArgument, "built-in reduction");
	EXPECT_ERR(c, ncclAllReduce(b.d, b.d, 8, ncclInt32, (ncclRedOp_t)(ncclNumOps + 3), c->comm,
				    c->stream),
		   ncclInvalidArgument, "neither a built-in reduction nor an operator");
	if (!c->device) {
		EXPECT_ERR(c, ncclAllReduce(b.d, b.d, 8, ncclInt32, ncclSum, c->comm,
					    (cudaStream_t)(uintptr_t)0x1234),
			   ncclInvalidArgument, "the stream must be NULL");
		EXPECT_ERR(c, ncclCommCuDevice(c->comm, &dev), ncclInvalidUsage, "host mode");
		EXPECT_ERR(c, ncclMemAlloc(&p, 64), ncclInvalidUsage, "host mode");
		EXPECT_ERR(c, ncclRedOpCreatePreMulSum(&op, &f, ncclFloat32, ncclScalarDevice,
						       c->comm),
			   ncclInvalidArgument, "ncclScalarDevice, but this process has no CUDA device");
	} else {
		int cur = -1;
		cudaGraph_t graph = NULL;
		ncclResult_t res;

		CHECK(c, ncclCommCuDevice(c->comm, &dev));
		cudaGetDevice(&cur);
		if (dev != cur)
			return fail(c, "ncclCommCuDevice %d, current device %d", dev, cur);
		CHECK(c, ncclMemAlloc(&p, 1 << 20));
		CHECK(c, ncclMemFree(p));
		/* graph capture is refused, and the capture can still end cleanly */
		if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed) != cudaSuccess)
			return fail(c, "cudaStreamBeginCapture failed");
		res = ncclAllReduce(b.d, b.d, 8, ncclInt32, ncclSum, c->comm, c->stream);
		if (cudaStreamEndCapture(c->stream, &graph) != cudaSuccess)
			return fail(c, "cudaStreamEndCapture failed after ncclAllReduce returned %d", (int)res);
		if (graph)
			cudaGraphDestroy(graph);
		if (res != ncclInvalidUsage || !strstr(ncclGetLastError(NULL), "CUDA graph"))
			return fail(c, "ncclAllReduce during stream capture returned %d: %s", (int)res,
				    ncclGetLastError(NULL));
	}
	buf_free(c, &b);
	return 0;
}

static int abort_then_new(struct ctx *c)
{
	ncclComm_t comm = NULL;

	if (allreduce_check(c, c->comm, "allreduce before abort") || barrier(c))
		return -1;
	CHECK(c, ncclCommAbort(c->comm));
	c->comm = NULL;
	CHECK(c, ncclCommInitRank(&comm, c->nranks, c->ids[1], c->rank));
	if (allreduce_check(c, comm, "allreduce on a new communicator after abort"))
		return -1;
	CHECK(c, ncclCommDestroy(comm));
	return 0;
}

/*
 * The last rank exits without a word; the others' allreduce fails with
 * ncclRemoteError (returned by the call in host mode, reported by
 * ncclCommGetAsyncError in device mode, where the call only enqueues), and
 * ncclGetLastError says what happened. Bounded by IBC_TIMEOUT_MS.
 */
static int peer_dies(struct ctx *c)
{
	ncclResult_t res;
	ncclResult_t ast = ncclSuccess;
	time_t end = time(NULL) + 60;
	struct buf b;

	if (c->nranks < 2)
		return skip(c, "needs 2 ranks");
	if (allreduce_check(c, c->comm, "allreduce before the death") || barrier(c))
		return -1;
	if (c->rank == c->nranks - 1)
		return 1;       /* the runner exits this rank now, reporting success */
	if (buf_make(c, &b, ncclInt32, 1003, c->rank))
		return -1;
	res = ncclAllReduce(b.d, b.d, 1003, ncclInt32, ncclSum, c->comm, c->stream);
	if (res == ncclSuccess) {
		while (ast == ncclSuccess && time(NULL) < end) {
			CHECK(c, ncclCommGetAsyncError(c->comm, &ast));
			if (ast == ncclSuccess)
				usleep(10000);
		}
		res = ast;
	}
	if (res != ncclRemoteError)
		return fail(c, "allreduce with a dead peer: result %d (%s), expected ncclRemoteError: %s",
			    (int)res, ncclGetErrorString(res), ncclGetLastError(c->comm));
	if (!strstr(ncclGetLastError(c->comm), "rank"))
		return fail(c, "ncclGetLastError does not say what failed: '%s'",
			    ncclGetLastError(c->comm));
	if (c->device)
		cudaStreamSynchronize(c->stream);
	CHECK(c, ncclCommAbort(c->comm));
	c->comm = NULL;
	bfree(c, b.d);
	free(b.h);
	return 0;
}

struct tcase {
	const char *name;
	int (*fn)(struct ctx *c);
	int own_comm;           /* the case creates its communicators from c->id */
	int nids;               /* unique ids it uses (1 if 0) */
};

static const struct tcase cases[] = {
	{ "allreduce sum, every datatype, counts 0 1 7 1003", allreduce_sum_all_types, 0, 1 },
	{ "allreduce max, min, prod in place (int32 float32 bfloat16 uint8)", allreduce_ops_in_place, 0, 1 },
	{ "allreduce avg (int32 float32 float64), exact", allreduce_avg, 0, 1 },
	{ "broadcast from the last rank, ncclBcast in place from rank 0 (float16)", broadcast_bcast, 0, 1 },
	{ "reduce to rank 1 (int64), non-roots' recvbuff NULL or untouched", reduce_to_root, 0, 1 },
	{ "allgather out of place and in place (bfloat16)", allgather, 0, 1 },
	{ "reduce_scatter out of place and in place (uint8)", reduce_scatter, 0, 1 },
	{ "ncclAlltoAll and ncclAllToAll (int32)", alltoall, 0, 1 },
	{ "group: 1 MiB ring shift, receive written before send", group_ring, 0, 1 },
	{ "group: all-to-all of sends and receives, self included", group_alltoall_sendrecv, 0, 1 },
	{ "group: two messages each way per peer, opposite orders", group_two_per_peer, 0, 1 },
	{ "group: nested, allreduce + ring + allgather", group_mixed_nested, 0, 1 },
	{ "group: two communicators written in opposite orders", group_two_comms, 0, 1 },
	{ "split: parity colors, reversed keys, NCCL_SPLIT_NOCOLOR", split, 0, 1 },
	{ "stream order: returns at once, runs after earlier stream work", stream_ordering, 0, 1 },
	{ "group on two streams: the second stream sees its receive", group_two_streams, 0, 1 },
	{ "nonblocking init: ncclInProgress, polled to ncclSuccess", init_nonblocking, 1, 1 },
	{ "two communicators initialized inside one group", init_in_group, 1, 2 },
	{ "two ranks of one communicator in one group refused; a zero id", one_thread_two_ranks, 1, 1 },
	{ "register, deregister, finalize; calls after finalize refused", register_finalize, 0, 1 },
	{ "PreMulSum: allreduce (5 types), reduce, reduce_scatter, in a group, misuse", premul_sum, 0, 1 },
	{ "argument and usage errors name the call, the rank and the cause", errors, 0, 1 },
	{ "abort, then a new communicator", abort_then_new, 0, 2 },
	{ "a peer exits: ncclRemoteError, bounded, with a text", peer_dies, 0, 1 },
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

/* ---- ranks ---------------------------------------------------------------- */

/* an id, made by rank 0 and piped to the others */
static int next_id(struct ctx *c, ncclUniqueId *id)
{
	int r;

	if (c->rank == 0) {
		CHECK(c, ncclGetUniqueId(id));
		for (r = 1; r < c->nranks; r++)
			if (write(c->idout[r], id, sizeof(*id)) != (ssize_t)sizeof(*id))
				return fail(c, "cannot pipe the id to rank %d", r);
		return 0;
	}
	if (read(c->idpipe, id, sizeof(*id)) != (ssize_t)sizeof(*id))
		return fail(c, "no id from rank 0");
	return 0;
}

static int run_rank(struct ctx *c, FILE *out, int only)
{
	int i;
	int k;

	for (i = 0; i < NCASES; i++) {
		int rc;

		if (only >= 0 && i != only)
			continue;
		c->why[0] = '\0';
		c->comm = NULL;
		/* every id of the case first: a failing case cannot shift the next one's */
		for (k = 0; k < (cases[i].nids ? cases[i].nids : 1); k++) {
			if (next_id(c, &c->ids[k])) {
				fprintf(out, "%d fail %s\n", i, c->why);
				return 1;
			}
		}
		c->id = c->ids[0];
		if (!cases[i].own_comm) {
			ncclResult_t res = ncclCommInitRank(&c->comm, c->nranks, c->id, c->rank);

			if (res != ncclSuccess) {
				fprintf(out, "%d fail ncclCommInitRank: %s\n", i,
					ncclGetLastError(NULL));
				fflush(out);
				continue;
			}
		}
		rc = cases[i].fn(c);
		if (rc == 1) {                  /* this rank leaves (peer_dies) */
			fprintf(out, "%d ok\n", i);
			fflush(out);
			_exit(0);
		}
		if (c->comm) {
			ncclResult_t res;

			if (c->device)
				cudaStreamSynchronize(c->stream);
			res = rc == -1 ? ncclCommAbort(c->comm) : ncclCommDestroy(c->comm);
			if (rc != -1 && res != ncclSuccess)
				rc = fail(c, "ncclCommDestroy: %s", ncclGetLastError(NULL));
		}
		if (rc == 2)
			fprintf(out, "%d skip %s\n", i, c->why);
		else if (rc)
			fprintf(out, "%d fail %s\n", i, c->why);
		else
			fprintf(out, "%d ok\n", i);
		fflush(out);
	}
	return 0;
}

static int nfailed;
static int ntests;

static void tap(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tap(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", ok ? "" : "not ", ++ntests);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	nfailed += !ok;
}

/* one run: @n forked ranks over @transport; one TAP line per case */
static void run(int n, const char *transport, int device, int timeout_s, int only)
{
	FILE *outs[MAXRANKS];
	int pipes[MAXRANKS][3][2];      /* id 0->r, barrier r->0, barrier 0->r */
	pid_t pids[MAXRANKS];
	int codes[MAXRANKS];
	char *lines[MAXRANKS][64];
	time_t end = time(NULL) + timeout_s;
	int left = n;
	int r;
	int i;

	setenv("IBC_TRANSPORT", transport, 1);
	memset(lines, 0, sizeof(lines));
	for (r = 0; r < n; r++) {
		outs[r] = tmpfile();
		if (!outs[r] || (r > 0 && (pipe(pipes[r][0]) || pipe(pipes[r][1]) ||
					   pipe(pipes[r][2])))) {
			tap(0, "%d ranks, %s: cannot set up the ranks: %s", n, transport, strerror(errno));
			return;
		}
	}
	fflush(stdout);
	for (r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			struct ctx c;
			int q;

			memset(&c, 0, sizeof(c));
			c.rank = r;
			c.nranks = n;
			c.device = device;
			/* keep only this rank's ends: a dead peer then reads as EOF */
			for (q = 1; q < n; q++) {
				int j;

				if (r == 0) {
					c.idout[q] = pipes[q][0][1];
					c.upin[q] = pipes[q][1][0];
					c.downout[q] = pipes[q][2][1];
					close(pipes[q][0][0]);
					close(pipes[q][1][1]);
					close(pipes[q][2][0]);
				} else if (q == r) {
					c.idpipe = pipes[q][0][0];
					c.uppipe = pipes[q][1][1];
					c.downpipe = pipes[q][2][0];
					close(pipes[q][0][1]);
					close(pipes[q][1][0]);
					close(pipes[q][2][1]);
				} else {
					for (j = 0; j < 3; j++) {
						close(pipes[q][j][0]);
						close(pipes[q][j][1]);
					}
				}
			}
			if (device && cudaStreamCreate(&c.stream) != cudaSuccess) {
				fprintf(outs[r], "0 fail cudaStreamCreate failed\n");
				fflush(outs[r]);
				_exit(1);
			}
			run_rank(&c, outs[r], only);
			fflush(outs[r]);
			_exit(0);
		}
	}
	for (r = 1; r < n; r++) {
		for (i = 0; i < 3; i++) {
			close(pipes[r][i][0]);
			close(pipes[r][i][1]);
		}
	}
	for (r = 0; r < n; r++)
		codes[r] = INT_MIN;
	while (left > 0) {
		for (r = 0; r < n; r++) {
			int st;

			if (codes[r] != INT_MIN || waitpid(pids[r], &st, WNOHANG) != pids[r])
				continue;
			codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
			left--;
		}
		if (left > 0 && time(NULL) > end) {
			for (r = 0; r < n; r++) {
				if (codes[r] != INT_MIN)
					continue;
				kill(pids[r], SIGKILL);
				waitpid(pids[r], NULL, 0);
				codes[r] = -SIGKILL;
				left--;
				printf("# %d ranks, %s: rank %d still running after %d s, killed\n", n,
				       transport, r, timeout_s);
			}
		}
		if (left > 0)
			usleep(20000);
	}
	for (r = 0; r < n; r++) {
		char line[2048];

		rewind(outs[r]);
		while (fgets(line, sizeof(line), outs[r])) {
			int k = atoi(line);

			const char *sp = strchr(line, ' ');

			if (k >= 0 && k < NCASES && k < 64 && !lines[r][k])
				lines[r][k] = strdup(sp ? sp + 1 : line);
		}
		fclose(outs[r]);
	}
	for (i = 0; i < NCASES; i++) {
		int ok = 1;
		int skipped = 1;

		if (only >= 0 && i != only)
			continue;
		for (r = 0; r < n; r++) {
			ok &= lines[r][i] && !strncmp(lines[r][i], "ok", 2);
			skipped &= lines[r][i] && !strncmp(lines[r][i], "skip", 4);
		}
		if (skipped) {
			printf("ok %d - %d rank%s, %s, %s: %s # SKIP %s", ++ntests, n, n > 1 ? "s" : "",
			       transport, device ? "device" : "host", cases[i].name, lines[0][i] + 5);
			continue;
		}
		tap(ok, "%d rank%s, %s, %s: %s", n, n > 1 ? "s" : "", transport,
		    device ? "device" : "host", cases[i].name);
		for (r = 0; r < n && !ok; r++) {
			if (!lines[r][i])
				printf("#   rank %d: no result (exit %d)\n", r, codes[r]);
			else if (strncmp(lines[r][i], "ok", 2))
				printf("#   rank %d: %s", r, lines[r][i]);
		}
	}
	{
		int bad = 0;

		for (r = 0; r < n; r++)
			bad += codes[r] != 0;
		tap(!bad, "%d rank%s, %s, %s: every rank exited with status 0", n, n > 1 ? "s" : "",
		    transport, device ? "device" : "host");
		for (r = 0; r < n && bad; r++)
			if (codes[r] != 0)
				printf("#   rank %d: %s %d\n", r, codes[r] < 0 ? "signal" : "status",
				       codes[r] < 0 ? -codes[r] : codes[r]);
	}
	for (r = 0; r < n; r++)
		for (i = 0; i < 64; i++)
			free(lines[r][i]);
}

/* the loaded libnccl.so.2 must be ours (and claim the header's version) */
static void check_library(void)
{
	Dl_info info;
	char path[PATH_MAX] = "?";
	int v = 0;
	int ok;
	const char *base;

	memset(&info, 0, sizeof(info));
	if (dladdr((void *)ncclGetVersion, &info) && info.dli_fname)
		if (!realpath(info.dli_fname, path))
			snprintf(path, sizeof(path), "%s", info.dli_fname);
	base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	tap(!strcmp(base, "libibcoll_nccl.so"), "libnccl.so.2 resolves to ibcoll's library (%s)",
	    path);
	ok = ncclGetVersion(&v) == ncclSuccess && v == NCCL_VERSION_CODE;
	tap(ok, "the loaded library claims NCCL %d, the header %d", v, NCCL_VERSION_CODE);
}

static int probe_devices(void)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int n = 0;

		if (cudaGetDeviceCount(&n) != cudaSuccess)
			n = 0;
		_exit(n > 100 ? 100 : n);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 0;
	return WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
	const char *matrix = "1:shm 2:shm 3:shm 4:shm 2:tcp 3:tcp";
	const char *mode = "auto";
	int timeout_s = 300;
	int only = -1;
	int device;
	char *m;
	char *tok;
	char *save = NULL;
	int opt;

	while ((opt = getopt(argc, argv, "m:d:t:c:")) != -1) {
		switch (opt) {
		case 'm': matrix = optarg; break;
		case 'd': mode = optarg; break;
		case 't': timeout_s = atoi(optarg); break;
		case 'c': only = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-m \"N:TRANSPORT ...\"] [-d auto|host|device] [-t S] [-c CASE]\n",
				argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	device = probe_devices() > 0;
	if (!strcmp(mode, "device") && !device) {
		printf("1..0 # SKIP -d device: no CUDA device here\n");
		return 0;
	}
	if (!strcmp(mode, "host") && device) {
		printf("1..0 # SKIP -d host: this machine has a CUDA device, so the library runs in stream mode\n");
		return 0;
	}
	printf("# mode: %s (%s)\n", device ? "device buffers, one stream per rank" : "host buffers, NULL stream",
	       device ? "a CUDA device exists" : "no CUDA device: the library's host mode");
	check_library();
	m = strdup(matrix);
	for (tok = strtok_r(m, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		int n = atoi(tok);
		const char *tr = strchr(tok, ':') ? strchr(tok, ':') + 1 : "shm";

		if (n < 1 || n > MAXRANKS) {
			tap(0, "bad entry '%s' in -m", tok);
			continue;
		}
		run(n, tr, device, timeout_s, only);
	}
	free(m);
	printf("1..%d\n", ntests);
	return nfailed ? 1 : 0;
}
