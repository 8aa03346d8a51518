/* SPDX-License-Identifier: MIT */
/*
 * slow_start.c - the "no slow mode" measurement of issue 22: a job whose
 * first all-reduce (the tuner's probe and race run in it) may meet a busy
 * host, that then sleeps and times every size on a quiet one. Per size
 * (8 B to 16 MiB x 8), float32 sum in place, WARMUP calls, then ITERS calls
 * each after a barrier, timed alone; rank 0 prints the slowest rank's
 * median. bench/slow_start.sh runs it back to back with and without other
 * processes busy during the first second and compares the runs.
 *
 * usage: IBC_RANK=r IBC_NRANKS=n IBC_ROOT=host:port
 *        slow_start [SLEEP_MS [ITERS [WARMUP [MAX_BYTES]]]]   (1500 50 5 16777216)
 * output (rank 0): "BYTES MEDIAN_US" per size
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_clock.h"
#include "ibcoll.h"



int main(int argc, char **argv)
{
	int sleep_ms = argc > 1 ? atoi(argv[1]) : 1500;
	int iters = argc > 2 ? atoi(argv[2]) : 50;
	int warmup = argc > 3 ? atoi(argv[3]) : 5;
	size_t maxb = argc > 4 ? (size_t)strtoull(argv[4], NULL, 0) : 16u << 20;
	float *buf = calloc(maxb / 4, sizeof(float));
	double *t = calloc((size_t)(iters > 0 ? iters : 1), sizeof(double));
	ibc_comm_h comm;
	ibc_status_t st;
	float one = 1;
	size_t b;
	int rank;

	if (!buf || !t || iters < 1 || warmup < 0 || maxb < 8) {
		fprintf(stderr, "slow_start: bad arguments or no memory\n");
		return 2;
	}
	st = ibc_comm_init_env(&comm);
	if (st != IBC_OK) {
		fprintf(stderr, "slow_start: ibc_comm_init_env: %s\n", ibc_status_str(st));
		return 2;
	}
	ibc_comm_rank(comm, &rank);
	/* the first all-reduce: the tuner's start-up measurements run in it */
	st = ibc_allreduce(&one, &one, 1, IBC_FLOAT32, IBC_SUM, comm);
	usleep((useconds_t)sleep_ms * 1000);
	for (b = 8; st == IBC_OK && b <= maxb; b *= 8) {
		double med;
		double slow = 0;
		int it;

		for (it = 0; st == IBC_OK && it < warmup; it++)
			st = ibc_allreduce(buf, buf, b / 4, IBC_FLOAT32, IBC_SUM, comm);
		for (it = 0; st == IBC_OK && it < iters; it++) {
			double t0;

			st = ibc_barrier(comm);
			t0 = bench_clock_us();
			if (st == IBC_OK)
				st = ibc_allreduce(buf, buf, b / 4, IBC_FLOAT32, IBC_SUM, comm);
			t[it] = bench_clock_us() - t0;
		}
		if (st != IBC_OK)
			break;
		qsort(t, (size_t)iters, sizeof(double), bench_cmp_double);
		med = t[iters / 2];
		st = ibc_allreduce(&med, &slow, 1, IBC_FLOAT64, IBC_MAX, comm);
		if (st == IBC_OK && rank == 0)
			printf("%zu %.3f\n", b, slow);
	}
	if (st != IBC_OK)
		fprintf(stderr, "slow_start: rank %d: %s\n", rank, ibc_status_str(st));
	ibc_comm_destroy(comm);
	free(buf);
	free(t);
	return st == IBC_OK ? 0 : 1;
}
