/* SPDX-License-Identifier: MIT */
/*
 * test_ib_comm.c - one rank of a multi-process job over the public API,
 * for the verbs transport (IBC_TRANSPORT=ib) inside the Soft-RoCE VM; the
 * processes are started by tests/rxe/run_ranks.sh (IBC_RANK, IBC_NRANKS,
 * IBC_ROOT, IBC_SECRET); the collective matrix itself is the core's
 * tests/coll/coll_check, which the VM suite runs over ib. Modes:
 *   loop     IBC_TEST_ITERS large all-reduces or until one fails (the kill
 *            test: a peer is SIGKILLed meanwhile); on failure
 *            prints "FAILED after N ms: <ibc_last_error()>" and exits 3.
 *   once     one all-reduce of IBC_TEST_COUNT floats (the memlock test).
 * Exit status: 0 exact, 1 wrong results, 2 usage, 3 an ibcoll call failed.
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

/* the sum over ranks of val(r, i): small integers, exact in float32 */
static float expect_sum(size_t i)
{
	int64_t s = 0;
	int r;

	for (r = 0; r < nranks; r++)
		s += val(r, i);
	return (float)s;
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
		if (a[i] != expect_sum(i)) {
			fprintf(stderr, "rank %d: allreduce of %zu floats: element %zu is %g, expected %g\n",
				rank, count, i, a[i], expect_sum(i));
			return 1;
		}
	printf("rank %d: allreduce of %zu floats exact\n", rank, count);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "once";
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
	if (!strcmp(mode, "loop")) {
		ret = mode_loop(comm);
	} else if (!strcmp(mode, "once")) {
		ret = mode_once(comm);
	} else {
		fprintf(stderr, "usage: test_ib_comm loop|once (one rank; see the file header)\n");
		return 2;
	}
	if (ret == 3)
		return 3;
	CALL(ibc_comm_destroy(comm));
	return ret;
}
