/* SPDX-License-Identifier: MIT */
/*
 * init_scale.c - how communicator creation scales with the number of ranks
 * on one host (issue 24's liveness and bootstrap part): for each N given,
 * N forked processes over tcp on loopback each create a communicator
 * (ibc_comm_init_env), all-reduce one integer (checked: the sum N), and
 * destroy it. Prints per N: the slowest rank's init, all-reduce and destroy
 * times, and the CPU time (user + system, all threads, getrusage) of rank 0,
 * which hosts the bootstrap root and the liveness hub, against the median
 * of the other ranks: the load that falls on one process.
 *
 * usage: bench/init_scale [N ...]          (default: 64 256 512 1024)
 * Environment as for any job (IBC_HEARTBEAT_MS, IBC_BOOTSTRAP_TIMEOUT_MS).
 * Needs about 10 MB of memory and 10 fds per rank (ulimit -n >= 16 N for
 * rank 0).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ibcoll.h"
#include "tree/fork_ranks.h"

struct rec {
	double init_ms;
	double allreduce_ms;
	double destroy_ms;
	double cpu_ms;
	int ok;
};

static struct rec *recs;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int rank_main(int rank, int nranks, void *arg)
{
	struct rec *me = &recs[rank];
	struct rusage ru;
	ibc_comm_h comm;
	int32_t x = 1;
	double t0 = now_ms();
	double t1;
	double t2;

	(void)arg;
	if (ibc_comm_init_env(&comm) != IBC_OK)
		return 1;
	t1 = now_ms();
	me->ok = ibc_allreduce(&x, &x, 1, IBC_INT32, IBC_SUM, comm) == IBC_OK && x == nranks;
	t2 = now_ms();
	me->ok &= ibc_comm_destroy(comm) == IBC_OK;
	me->init_ms = t1 - t0;
	me->allreduce_ms = t2 - t1;
	me->destroy_ms = now_ms() - t2;
	getrusage(RUSAGE_SELF, &ru);
	me->cpu_ms = ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec * 1e-3 +
		     ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec * 1e-3;
	return me->ok ? 0 : 2;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const int defaults[] = { 64, 256, 512, 1024 };
	int nn = argc > 1 ? argc - 1 : 4;
	int maxn = 0;
	int i;
	int bad = 0;

	for (i = 0; i < nn; i++) {
		int n = argc > 1 ? atoi(argv[i + 1]) : defaults[i];

		if (n < 2 || n > 8192) {
			fprintf(stderr, "init_scale: N must be 2..8192, got %s\n", argv[i + 1]);
			return 2;
		}
		if (n > maxn)
			maxn = n;
	}
	recs = fork_ranks_shared(sizeof(struct rec) * (size_t)maxn);
	if (!recs)
		return 1;
	setenv("IBC_TRANSPORT", "tcp", 0);
	printf("%6s %10s %10s %10s %10s %12s %12s %7s %s\n", "ranks", "init_ms", "allred_ms",
	       "destroy_ms", "total_s", "rank0_cpu_ms", "median_cpu", "ratio", "result");
	for (i = 0; i < nn; i++) {
		int n = argc > 1 ? atoi(argv[i + 1]) : defaults[i];
		int *codes = calloc((size_t)n, sizeof(int));
		double *cpu = calloc((size_t)n, sizeof(double));
		double t0 = now_ms();
		double init = 0, ar = 0, de = 0;
		int nok = 0;
		int r;

		if (!codes || !cpu)
			return 1;
		memset(recs, 0, sizeof(struct rec) * (size_t)n);
		fork_ranks(n, 600, rank_main, NULL, codes);
		for (r = 0; r < n; r++) {
			nok += codes[r] == 0 && recs[r].ok;
			init = recs[r].init_ms > init ? recs[r].init_ms : init;
			ar = recs[r].allreduce_ms > ar ? recs[r].allreduce_ms : ar;
			de = recs[r].destroy_ms > de ? recs[r].destroy_ms : de;
			if (r > 0)
				cpu[r - 1] = recs[r].cpu_ms;
		}
		qsort(cpu, (size_t)n - 1, sizeof(double), cmp_double);
		printf("%6d %10.0f %10.1f %10.0f %10.2f %12.0f %12.0f %7.1f %s\n", n, init, ar, de,
		       (now_ms() - t0) / 1e3, recs[0].cpu_ms, cpu[(n - 1) / 2],
		       cpu[(n - 1) / 2] > 0 ? recs[0].cpu_ms / cpu[(n - 1) / 2] : 0,
		       nok == n ? "all exact" : "FAILED");
		fflush(stdout);
		if (nok != n) {
			fprintf(stderr, "init_scale: %d of %d ranks failed at %d ranks\n", n - nok, n, n);
			bad = 1;
		}
		free(codes);
		free(cpu);
	}
	return bad;
}
