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
 *   regcache the registration cache (issue 23): 100 in-place all-reduces of
 *            one buffer of IBC_TEST_COUNT floats (default 1 MiB), exact;
 *            with memory hooks (IBC_TEST_EXPECT_HOOKS=1) no registration
 *            after the first; then the buffer is unmapped and new memory
 *            mapped at the same address (and a malloc freed and
 *            malloc'ed again), filled with new values and all-reduced:
 *            exact, and with hooks the release is counted.
 *   regapi   explicit registration, with or without memory hooks: a malloc
 *            buffer registered by ibc_comm_register() and a buffer from
 *            ibc_mem_alloc(), 100 all-reduces each: no registration after
 *            ibc_comm_register() resp. after the first all-reduce, exact;
 *            then ibc_mem_free() and a new ibc_mem_alloc(): exact again.
 *   rails    for multi-rail runs (IBC_IB_RAILS, 2 ranks): in-place and
 *            out-of-place all-reduces of IBC_TEST_COUNT floats (default 4
 *            Mi) and of an odd count (not a page multiple per rail), exact;
 *            then rank 0 sends IBC_TEST_ITERS (default 4) messages of 8 MiB
 *            to rank 1, timed after one warm-up message, payload checked;
 *            rank 1 prints "p2p: N x 8388608 bytes in T ms, R MB/s". The
 *            per-rail byte counts are the ib INFO lines at destroy, which
 *            tests/rxe/in_vm_rails.sh reads.
 * Exit status: 0 exact, 1 wrong results, 2 usage, 3 an ibcoll call failed.
 */
#include "config.h"

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ibcoll.h"

static int rank;
static int nranks;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ms(void)
{
	return now_ns() / 1000000;
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

/* fill @a with val(rank, i) * @k, all-reduce in place, 0 when exact */
static int allreduce_exact(ibc_comm_h comm, float *a, size_t count, int k, const char *what)
{
	size_t i;

	for (i = 0; i < count; i++)
		a[i] = (float)(val(rank, i) * k);
	CALL(ibc_allreduce(a, a, count, IBC_FLOAT32, IBC_SUM, comm));
	for (i = 0; i < count; i++) {
		if (a[i] != expect_sum(i) * (float)k) {
			fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank, what, i,
				a[i], expect_sum(i) * (float)k);
			return 1;
		}
	}
	return 0;
}

/*
 * the steady state: one all-reduce of @buf (inputs x @k_first: it may
 * connect and register), counters in *@s0_p, 99 more, counters in *@s1_p;
 * 0 when all 100 were exact
 */
static int steady_allreduces(ibc_comm_h comm, float *buf, size_t count, int k_first,
			     const char *what, struct ibc_reg_stats *s0_p, struct ibc_reg_stats *s1_p)
{
	int bad = allreduce_exact(comm, buf, count, k_first, what);
	int i;

	CALL(ibc_comm_reg_stats(comm, s0_p));
	for (i = 0; i < 99; i++)
		bad |= allreduce_exact(comm, buf, count, 1 + i % 3, what);
	CALL(ibc_comm_reg_stats(comm, s1_p));
	return bad;
}

/* 1 (after saying so) when IBC_TEST_EXPECT_HOOKS is set and differs from @hooks */
static int hooks_unexpected(int hooks)
{
	const char *eh = getenv("IBC_TEST_EXPECT_HOOKS");

	if (!eh || atoi(eh) == hooks)
		return 0;
	fprintf(stderr, "rank %d: memory hooks %d, expected %s\n", rank, hooks, eh);
	return 1;
}

static int mode_regcache(ibc_comm_h comm)
{
	size_t count = getenv("IBC_TEST_COUNT") ? (size_t)atol(getenv("IBC_TEST_COUNT")) : 1 << 18;
	size_t nbytes = count * sizeof(float);
	struct ibc_reg_stats s0;
	struct ibc_reg_stats s1;
	struct ibc_reg_stats s2;
	float *a;
	float *b;
	int bad = 0;

	/* a fixed mmap threshold: the 1 MiB mallocs below are mapped, and the
	 * second one usually reuses the first one's address (glibc's dynamic
	 * threshold would move it onto the heap) */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	a = mmap(NULL, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return 3;
	bad |= steady_allreduces(comm, a, count, 1, "steady all-reduce", &s0, &s1);
	printf("rank %d: regcache: memory hooks %s; registrations %llu after the first of 100 all-reduces of %zu bytes, %llu after all, %llu cache hits\n",
	       rank, s1.memory_hooks ? "on" : "off", (unsigned long long)s0.registrations, nbytes,
	       (unsigned long long)s1.registrations, (unsigned long long)s1.hits);
	bad |= hooks_unexpected(s1.memory_hooks);
	if (s1.memory_hooks && s1.registrations != s0.registrations) {
		fprintf(stderr, "rank %d: %llu registrations in steady state, expected 0\n", rank,
			(unsigned long long)(s1.registrations - s0.registrations));
		bad = 1;
	}
	if (!s1.memory_hooks && s1.registrations < s0.registrations + 99) {
		fprintf(stderr, "rank %d: without hooks every operation should register again (%llu -> %llu)\n",
			rank, (unsigned long long)s0.registrations, (unsigned long long)s1.registrations);
		bad = 1;
	}
	/* the hazard: new memory at the same address, with new contents */
	munmap(a, nbytes);
	b = mmap(a, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		 -1, 0);
	if (b != a) {
		fprintf(stderr, "rank %d: could not map new memory at %p\n", rank, (void *)a);
		return 3;
	}
	bad |= allreduce_exact(comm, b, count, 5, "all-reduce on new memory at the old address (mmap)");
	munmap(b, nbytes);
	a = malloc(nbytes);
	bad |= allreduce_exact(comm, a, count, 7, "all-reduce of a malloc buffer");
	free(a);
	b = malloc(nbytes);
	bad |= allreduce_exact(comm, b, count, 11, "all-reduce of the next malloc buffer");
	printf("rank %d: regcache: malloc after free gave %s address\n", rank,
	       a == b ? "the same" : "another");
	free(b);
	CALL(ibc_comm_reg_stats(comm, &s2));
	printf("rank %d: regcache: %llu registrations, %llu released by the application and dropped, %llu invalidations, %llu evictions\n",
	       rank, (unsigned long long)s2.registrations, (unsigned long long)s2.released,
	       (unsigned long long)s2.invalidations, (unsigned long long)s2.evictions);
	if (s2.memory_hooks && s2.released < 1) {
		fprintf(stderr, "rank %d: the unmapped buffer's registrations were not dropped\n", rank);
		bad = 1;
	}
	if (!bad)
		printf("rank %d: regcache: all exact\n", rank);
	return bad;
}

static int mode_regapi(ibc_comm_h comm)
{
	size_t count = getenv("IBC_TEST_COUNT") ? (size_t)atol(getenv("IBC_TEST_COUNT")) : 1 << 18;
	size_t nbytes = count * sizeof(float);
	struct ibc_reg_stats s0;
	struct ibc_reg_stats s1;
	void *handle;
	float *a = malloc(nbytes);
	void *m = NULL;
	float *b;
	int bad = 0;

	CALL(ibc_comm_register(comm, a, nbytes, &handle));
	CALL(ibc_comm_reg_stats(comm, &s0));
	bad |= hooks_unexpected(s0.memory_hooks);
	/* the first operation connects (the transport's own buffers) */
	bad |= steady_allreduces(comm, a, count, 1, "all-reduce of a registered buffer", &s0, &s1);
	printf("rank %d: regapi: memory hooks %s; ibc_comm_register: %llu registrations during the 99 all-reduces of %zu bytes after the first\n",
	       rank, s1.memory_hooks ? "on" : "off",
	       (unsigned long long)(s1.registrations - s0.registrations), nbytes);
	if (s1.registrations != s0.registrations)
		bad = 1;
	CALL(ibc_comm_deregister(comm, handle));
	free(a);

	CALL(ibc_mem_alloc(&m, nbytes));
	b = m;
	bad |= steady_allreduces(comm, b, count, 2, "all-reduce of ibc_mem_alloc memory", &s0, &s1);
	printf("rank %d: regapi: ibc_mem_alloc: %llu registrations during the 99 all-reduces after the first\n",
	       rank, (unsigned long long)(s1.registrations - s0.registrations));
	if (s1.registrations != s0.registrations)
		bad = 1;
	CALL(ibc_mem_free(m));
	CALL(ibc_mem_alloc(&m, nbytes));
	printf("rank %d: regapi: the next ibc_mem_alloc gave %s address\n", rank,
	       m == (void *)b ? "the same" : "another");
	bad |= allreduce_exact(comm, m, count, 13, "all-reduce of new ibc_mem_alloc memory");
	CALL(ibc_mem_free(m));
	{
		/* what a registration costs: three fresh 32 MiB buffers, pages
		 * touched first, ibc_comm_register timed (ibv_reg_mr pins them) */
		const size_t rb = (size_t)32 << 20;
		double ms[3];
		double best = 0;
		int k;

		for (k = 0; k < 3; k++) {
			char *p = mmap(NULL, rb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			uint64_t t0;

			if (p == MAP_FAILED)
				return 3;
			memset(p, 1, rb);
			t0 = now_ns();
			CALL(ibc_comm_register(comm, p, rb, &handle));
			ms[k] = (double)(now_ns() - t0) / 1e6;
			if (k == 0 || ms[k] < best)
				best = ms[k];
			/* usually at the address of the buffer before: its registration must not serve */
			bad |= allreduce_exact(comm, (float *)p, count, 17 + k,
					       "all-reduce of a buffer registered where another was");
			CALL(ibc_comm_deregister(comm, handle));
			munmap(p, rb);
		}
		printf("rank %d: regapi: registering 32 MiB took %.2f / %.2f / %.2f ms (%.3f ms per MiB, best)\n",
		       rank, ms[0], ms[1], ms[2], best / 32);
	}
	if (!bad)
		printf("rank %d: regapi: all exact\n", rank);
	return bad;
}

static int mode_rails(ibc_comm_h comm)
{
	size_t count = getenv("IBC_TEST_COUNT") ? (size_t)atol(getenv("IBC_TEST_COUNT")) : (size_t)4 << 20;
	long iters = getenv("IBC_TEST_ITERS") ? atol(getenv("IBC_TEST_ITERS")) : 4;
	const size_t odd = 1000003; /* 4000012 bytes: parts that are not page multiples */
	const size_t msg = (size_t)8 << 20;
	size_t big = count > odd ? count : odd;
	float *a = malloc(big * 4);
	float *b = malloc(big * 4);
	unsigned char *m = malloc(msg);
	int bad = 0;
	uint64_t t0 = 0;
	size_t i;
	long it;

	if (!a || !b || !m)
		return 3;
	bad |= allreduce_exact(comm, a, count, 1, "in-place all-reduce");
	bad |= allreduce_exact(comm, a, odd, 2, "in-place all-reduce of an odd count");
	for (i = 0; i < count; i++)
		a[i] = (float)val(rank, i);
	CALL(ibc_allreduce(a, b, count, IBC_FLOAT32, IBC_SUM, comm));
	for (i = 0; i < count && !bad; i++)
		if (b[i] != expect_sum(i)) {
			fprintf(stderr, "rank %d: out-of-place all-reduce: element %zu is %g, expected %g\n",
				rank, i, b[i], expect_sum(i));
			bad = 1;
		}
	if (nranks == 2) {
		for (it = 0; it <= iters; it++) {
			if (it == 1)
				t0 = now_ns();
			if (rank == 0) {
				for (i = 0; i < msg; i++)
					m[i] = (unsigned char)(i * 7 + (size_t)it);
				CALL(ibc_send(m, msg, IBC_UINT8, 1, comm));
			} else {
				memset(m, 0, msg);
				CALL(ibc_recv(m, msg, IBC_UINT8, 0, comm));
				for (i = 0; i < msg && !bad; i++)
					if (m[i] != (unsigned char)(i * 7 + (size_t)it)) {
						fprintf(stderr, "rank 1: p2p message %ld: byte %zu is %u, expected %u\n",
							it, i, m[i], (unsigned char)(i * 7 + (size_t)it));
						bad = 1;
					}
			}
		}
		if (rank == 1) {
			double ms = (double)(now_ns() - t0) / 1e6;

			printf("rank 1: p2p: %ld x %zu bytes in %.1f ms, %.2f MB/s\n", iters, msg, ms,
			       (double)iters * (double)msg / ms / 1e3);
		}
		CALL(ibc_barrier(comm));
	}
	if (!bad)
		printf("rank %d: rails: all exact\n", rank);
	free(a);
	free(b);
	free(m);
	return bad;
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
	} else if (!strcmp(mode, "regcache")) {
		ret = mode_regcache(comm);
	} else if (!strcmp(mode, "regapi")) {
		ret = mode_regapi(comm);
	} else if (!strcmp(mode, "rails")) {
		ret = mode_rails(comm);
	} else {
		fprintf(stderr, "usage: test_ib_comm loop|once|regcache|regapi|rails (one rank; see the file header)\n");
		return 2;
	}
	if (ret == 3)
		return 3;
	CALL(ibc_comm_destroy(comm));
	return ret;
}
