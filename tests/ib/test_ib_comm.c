/* SPDX-License-Identifier: MIT */
/*
 * test_ib_comm.c - one rank of a multi-process job over the public API,
 * for the verbs transport (IBC_TRANSPORT=ib) inside the Soft-RoCE VM; the
 * processes are started by tests/rxe/run_ranks.sh (IBC_RANK, IBC_NRANKS,
 * IBC_ROOT, IBC_SECRET). Modes:
 *   matrix   every collective (allreduce, broadcast, reduce, allgather,
 *            reduce_scatter, alltoall, send/recv, barrier, nonblocking)
 *            over counts 0..2^16+3, several dtypes and ops, with
 *            integer-valued rank-dependent inputs and exact expected
 *            results (wrapping for int8); prints one line per failure.
 *   loop     IBC_TEST_ITERS large all-reduces or until one fails (the kill
 *            test: a peer is SIGKILLed meanwhile); on failure
 *            prints "FAILED after N ms: <ibc_last_error()>" and exits 3.
 *   once     one all-reduce of IBC_TEST_COUNT floats (the memlock test).
 * Exit status: 0 all exact, 1 wrong results, 3 an ibcoll call failed.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ibcoll.h"

static int rank;
static int nranks;
static int nbad;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void fail_call(const char *what, ibc_status_t st)
{
	fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, what, ibc_status_str(st),
		ibc_last_error());
	exit(3);
}

#define CALL(x)                                   \
	do {                                      \
		ibc_status_t st_ = (x);           \
		if (st_ != IBC_OK)                \
			fail_call(#x, st_);       \
	} while (0)

/* value of element i on rank r: small integers, exact in every dtype */
static int64_t val(int r, size_t i)
{
	return (int64_t)(r + 1) * (int64_t)((i % 13) + 1);
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16); /* exact for the small integers used here */
}

static double bf16_to_f64(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static size_t dsize(ibc_dtype_t dt)
{
	size_t n = 0;

	ibc_dtype_size(dt, &n);
	return n;
}

static void put(void *buf, ibc_dtype_t dt, size_t i, double v)
{
	switch (dt) {
	case IBC_INT8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)(int64_t)v; break;
	case IBC_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case IBC_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case IBC_FLOAT64: ((double *)buf)[i] = v; break;
	case IBC_BFLOAT16: ((uint16_t *)buf)[i] = f32_to_bf16((float)v); break;
	default: break;
	}
}

static double get(const void *buf, ibc_dtype_t dt, size_t i)
{
	switch (dt) {
	case IBC_INT8: return ((const int8_t *)buf)[i];
	case IBC_INT32: return ((const int32_t *)buf)[i];
	case IBC_FLOAT32: return ((const float *)buf)[i];
	case IBC_FLOAT64: return ((const double *)buf)[i];
	case IBC_BFLOAT16: return bf16_to_f64(((const uint16_t *)buf)[i]);
	default: return 0;
	}
}

/* the exact result of reducing val(0..n-1, i) with @op, in @dt's arithmetic */
static double expect_red(ibc_dtype_t dt, ibc_redop_t op, size_t i)
{
	int64_t s = 0;
	int64_t m = 0;
	int r;

	for (r = 0; r < nranks; r++) {
		s += val(r, i);
		if (val(r, i) > m)
			m = val(r, i);
	}
	if (op == IBC_MAX)
		s = m;
	if (dt == IBC_INT8)
		s = (int8_t)(uint8_t)s; /* two's complement wrap */
	if (op == IBC_AVG) {
		if (dt == IBC_INT8 || dt == IBC_INT32)
			return (double)(s / nranks);
		return (double)s / nranks;
	}
	return (double)s;
}

static void bad(const char *coll, ibc_dtype_t dt, size_t count, size_t i, double got, double want)
{
	if (nbad++ < 20)
		fprintf(stderr, "rank %d: %s dtype %d count %zu: element %zu is %g, expected %g\n", rank,
			coll, (int)dt, count, i, got, want);
}

static void run_allreduce(ibc_comm_h comm, ibc_dtype_t dt, ibc_redop_t op, size_t count)
{
	size_t es = dsize(dt);
	void *s = malloc(count * es + 1);
	void *d = malloc(count * es + 1);
	size_t i;

	for (i = 0; i < count; i++)
		put(s, dt, i, (double)val(rank, i));
	CALL(ibc_allreduce(s, d, count, dt, op, comm));
	for (i = 0; i < count; i++)
		if (get(d, dt, i) != expect_red(dt, op, i)) {
			bad(op == IBC_SUM ? "allreduce sum" : op == IBC_MAX ? "allreduce max" : "allreduce avg",
			    dt, count, i, get(d, dt, i), expect_red(dt, op, i));
			break;
		}
	/* in place */
	CALL(ibc_allreduce(s, s, count, dt, op, comm));
	if (memcmp(s, d, count * es)) {
		bad("allreduce in place", dt, count, 0, 0, 0);
	}
	free(s);
	free(d);
}

static void run_others(ibc_comm_h comm, size_t count)
{
	const ibc_dtype_t dt = IBC_INT32;
	int32_t *s = malloc((count * (size_t)nranks + 1) * 4);
	int32_t *d = malloc((count * (size_t)nranks + 1) * 4);
	int root = (int)(count % (size_t)nranks);
	size_t i;
	int r;

	/* broadcast from root: root's values */
	for (i = 0; i < count; i++)
		s[i] = rank == root ? (int32_t)(1000 + i) : -1;
	CALL(ibc_broadcast(s, d, count, dt, root, comm));
	for (i = 0; i < count; i++)
		if (d[i] != (int32_t)(1000 + i)) {
			bad("broadcast", dt, count, i, d[i], (double)(1000 + i));
			break;
		}
	/* reduce to root */
	for (i = 0; i < count; i++)
		s[i] = (int32_t)val(rank, i);
	memset(d, 0x7f, count * 4 + 4);
	CALL(ibc_reduce(s, d, count, dt, IBC_SUM, root, comm));
	if (rank == root)
		for (i = 0; i < count; i++)
			if (d[i] != (int32_t)expect_red(dt, IBC_SUM, i)) {
				bad("reduce", dt, count, i, d[i], expect_red(dt, IBC_SUM, i));
				break;
			}
	/* allgather: block r holds rank r's values */
	CALL(ibc_allgather(s, d, count, dt, comm));
	for (r = 0; r < nranks; r++)
		for (i = 0; i < count; i++)
			if (d[(size_t)r * count + i] != (int32_t)val(r, i)) {
				bad("allgather", dt, count, i, d[(size_t)r * count + i], (double)val(r, i));
				r = nranks;
				break;
			}
	/* reduce_scatter: rank r gets block r of the sum of every rank's (val(rank, j)) */
	for (i = 0; i < count * (size_t)nranks; i++)
		s[i] = (int32_t)val(rank, i);
	CALL(ibc_reduce_scatter(s, d, count, dt, IBC_SUM, comm));
	for (i = 0; i < count; i++)
		if (d[i] != (int32_t)expect_red(dt, IBC_SUM, (size_t)rank * count + i)) {
			bad("reduce_scatter", dt, count, i, d[i],
			    expect_red(dt, IBC_SUM, (size_t)rank * count + i));
			break;
		}
	/* alltoall: block j of rank r goes to rank j's block r */
	for (r = 0; r < nranks; r++)
		for (i = 0; i < count; i++)
			s[(size_t)r * count + i] = rank * 100000 + r * 1000 + (int32_t)(i % 1000);
	CALL(ibc_alltoall(s, d, count, dt, comm));
	for (r = 0; r < nranks; r++)
		for (i = 0; i < count; i++)
			if (d[(size_t)r * count + i] != r * 100000 + rank * 1000 + (int32_t)(i % 1000)) {
				bad("alltoall", dt, count, i, d[(size_t)r * count + i], 0);
				r = nranks;
				break;
			}
	/* send/recv around the ring, even ranks send first */
	if (nranks > 1) {
		int to = (rank + 1) % nranks;
		int from = (rank + nranks - 1) % nranks;

		for (i = 0; i < count; i++)
			s[i] = rank * 7 + (int32_t)i;
		if (rank % 2 == 0) {
			CALL(ibc_send(s, count, dt, to, comm));
			CALL(ibc_recv(d, count, dt, from, comm));
		} else {
			CALL(ibc_recv(d, count, dt, from, comm));
			CALL(ibc_send(s, count, dt, to, comm));
		}
		for (i = 0; i < count; i++)
			if (d[i] != from * 7 + (int32_t)i) {
				bad("send/recv", dt, count, i, d[i], from * 7 + (double)i);
				break;
			}
	}
	CALL(ibc_barrier(comm));
	free(s);
	free(d);
}

static void run_nonblocking(ibc_comm_h comm, size_t count)
{
	float *a = malloc(count * 4 + 4);
	float *b = malloc(count * 4 + 4);
	ibc_request_h req[3];
	size_t i;

	for (i = 0; i < count; i++) {
		a[i] = (float)val(rank, i);
		b[i] = (float)val(rank, i + 5);
	}
	CALL(ibc_iallreduce(a, a, count, IBC_FLOAT32, IBC_SUM, comm, &req[0]));
	CALL(ibc_iallreduce(b, b, count, IBC_FLOAT32, IBC_MAX, comm, &req[1]));
	CALL(ibc_ibarrier(comm, &req[2]));
	CALL(ibc_waitall(3, req));
	for (i = 0; i < count; i++)
		if (a[i] != (float)expect_red(IBC_FLOAT32, IBC_SUM, i) ||
		    b[i] != (float)expect_red(IBC_FLOAT32, IBC_MAX, i + 5)) {
			bad("iallreduce", IBC_FLOAT32, count, i, a[i], expect_red(IBC_FLOAT32, IBC_SUM, i));
			break;
		}
	free(a);
	free(b);
}

static int mode_matrix(ibc_comm_h comm)
{
	static const size_t counts[] = { 0, 1, 7, 1000, 65539 };
	static const ibc_dtype_t dts[] = { IBC_INT8, IBC_INT32, IBC_BFLOAT16, IBC_FLOAT32,
					   IBC_FLOAT64 };
	static const ibc_redop_t ops[] = { IBC_SUM, IBC_MAX, IBC_AVG };
	size_t c;
	size_t d;
	size_t o;
	int nrun = 0;
	uint64_t t0 = now_ms();

	for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		for (d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
			if (counts[c] > 2000 && dts[d] != IBC_FLOAT32 && dts[d] != IBC_INT32)
				continue;
			for (o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
				if (ops[o] == IBC_AVG && dts[d] == IBC_INT8)
					continue;
				run_allreduce(comm, dts[d], ops[o], counts[c]);
				nrun++;
			}
		}
		run_others(comm, counts[c]);
		run_nonblocking(comm, counts[c]);
		nrun += 8;
	}
	if (rank == 0)
		printf("rank 0: %d collective runs over %d ranks in %llu ms, %d wrong\n", nrun, nranks,
		       (unsigned long long)(now_ms() - t0), nbad);
	return nbad ? 1 : 0;
}

static int mode_loop(ibc_comm_h comm)
{
	long iters = getenv("IBC_TEST_ITERS") ? atol(getenv("IBC_TEST_ITERS")) : 100;
	size_t count = 1 << 19;
	float *a = malloc(count * 4);
	uint64_t t0 = now_ms();
	long iter = 0;

	while (iter < iters) { /* every rank runs the same number of all-reduces */
		ibc_status_t st;
		size_t i;

		for (i = 0; i < count; i++)
			a[i] = (float)val(rank, i);
		st = ibc_allreduce(a, a, count, IBC_FLOAT32, IBC_SUM, comm);
		if (st != IBC_OK) {
			printf("rank %d: FAILED after %llu ms in iteration %ld: %s: %s\n", rank,
			       (unsigned long long)(now_ms() - t0), iter, ibc_status_str(st),
			       ibc_last_error());
			fflush(stdout);
			exit(3);
		}
		if (iter == 0) {
			printf("rank %d: READY\n", rank);
			fflush(stdout);
		}
		iter++;
	}
	printf("rank %d: %ld iterations without error\n", rank, iter);
	free(a);
	return 0;
}

static int mode_once(ibc_comm_h comm)
{
	size_t count = getenv("IBC_TEST_COUNT") ? (size_t)atol(getenv("IBC_TEST_COUNT")) : 1 << 18;
	float *a = malloc(count * 4 + 4);
	ibc_status_t st;
	size_t i;

	for (i = 0; i < count; i++)
		a[i] = (float)val(rank, i);
	st = ibc_allreduce(a, a, count, IBC_FLOAT32, IBC_SUM, comm);
	if (st != IBC_OK) {
		printf("rank %d: FAILED: %s: %s\n", rank, ibc_status_str(st), ibc_last_error());
		return 3;
	}
	for (i = 0; i < count; i++)
		if (a[i] != (float)expect_red(IBC_FLOAT32, IBC_SUM, i)) {
			bad("allreduce", IBC_FLOAT32, count, i, a[i], expect_red(IBC_FLOAT32, IBC_SUM, i));
			return 1;
		}
	printf("rank %d: allreduce of %zu floats exact\n", rank, count);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "matrix";
	const char *name = "?";
	ibc_comm_h comm;
	int ret;

	CALL(ibc_comm_init_env(&comm));
	CALL(ibc_comm_rank(comm, &rank));
	CALL(ibc_comm_size(comm, &nranks));
	CALL(ibc_comm_transport(comm, &name));
	if (rank == 0)
		printf("rank 0: %d ranks, transport %s, mode %s\n", nranks, name, mode);
	if (getenv("IBC_TEST_EXPECT_TRANSPORT") && strcmp(name, getenv("IBC_TEST_EXPECT_TRANSPORT"))) {
		fprintf(stderr, "rank %d: transport is %s, expected %s\n", rank, name,
			getenv("IBC_TEST_EXPECT_TRANSPORT"));
		return 1;
	}
	if (!strcmp(mode, "loop"))
		ret = mode_loop(comm);
	else if (!strcmp(mode, "once"))
		ret = mode_once(comm);
	else
		ret = mode_matrix(comm);
	if (ret == 3)
		return 3;
	CALL(ibc_comm_destroy(comm));
	return ret;
}
