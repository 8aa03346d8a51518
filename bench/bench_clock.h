/* SPDX-License-Identifier: MIT */
/*
 * bench_clock.h - the clock and the sort order of the standalone timing
 * programs (peer_bench.c, which peers.sh also compiles alone with
 * mpicc.mpich, slow_start.c, bench_tune.c): header-only, no ibcoll.
 */
#ifndef IBC_BENCH_CLOCK_H
#define IBC_BENCH_CLOCK_H

#include <time.h>

/* CLOCK_MONOTONIC, microseconds */
static inline double bench_clock_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* qsort() order of doubles, ascending */
static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#endif /* IBC_BENCH_CLOCK_H */
