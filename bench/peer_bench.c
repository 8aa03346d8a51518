/* SPDX-License-Identifier: MIT */
/*
 * peer_bench.c - one timing method for ibcoll and for an MPI library, so
 * that bench/peers.sh can put them in one table (bench/peer_gloo.py does the
 * same for Gloo through PyTorch). Launched by the MPI library's own mpirun;
 * with -DPEER_WITH_IBC (the build's bench/peer_bench, Open MPI) it also
 * times ibcoll, whose communicator is created from a unique id broadcast by
 * MPI; bench/peers.sh compiles it without ibcoll for MPICH
 * (mpicc.mpich bench/peer_bench.c).
 *
 * The method (issue 22): float32, sum, out of place; per size, WARMUP
 * calls, then ITERS calls each after the library's own barrier, each timed
 * alone; per rank the median; the slowest rank's median is the figure.
 * Sizes follow nccl-tests: all-gather's is its output, reduce-scatter's its
 * input, all-to-all's the whole buffer. Results are checked exactly after
 * the timed calls (inputs are small integers: every sum is exact), and a
 * wrong element ends the run with status 1.
 *
 * usage: mpirun -n N peer_bench LIB COLL MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP
 *        (LIB: mpi, ibc, or ibcmem: ibcoll on ibc_mem_alloc() buffers)
 *   LIB: mpi or ibc; COLL: allreduce allgather reduce_scatter broadcast alltoall
 * output (rank 0): "LIB COLL BYTES MEDIAN_US" per size (BYTES: what moved, in
 * whole float32 elements per rank), then "# library ..."
 */
#include <mpi.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"

#ifdef PEER_WITH_IBC
#include "ibcoll.h"
static ibc_comm_h comm;
#endif

enum { C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_BROADCAST, C_ALLTOALL };

static const char *const coll_names[] = { "allreduce", "allgather", "reduce_scatter",
					  "broadcast", "alltoall" };
static int use_ibc;
static int rank;
static int nranks;



static void die(const char *what)
{
	fprintf(stderr, "peer_bench: rank %d: %s failed\n", rank, what);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

static void barrier(void)
{
#ifdef PEER_WITH_IBC
	if (use_ibc) {
		if (ibc_barrier(comm) != IBC_OK)
			die("ibc_barrier");
		return;
	}
#endif
	if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
		die("MPI_Barrier");
}

/* one call of @coll: @n elements per block (per rank), see the file comment */
static void run(int coll, const float *s, float *r, size_t n)
{
	int rc = 0;

#ifdef PEER_WITH_IBC
	if (use_ibc) {
		ibc_status_t st = IBC_OK;

		switch (coll) {
		case C_ALLREDUCE:
			st = ibc_allreduce(s, r, n, IBC_FLOAT32, IBC_SUM, comm);
			break;
		case C_ALLGATHER:
			st = ibc_allgather(s, r, n, IBC_FLOAT32, comm);
			break;
		case C_REDUCE_SCATTER:
			st = ibc_reduce_scatter(s, r, n, IBC_FLOAT32, IBC_SUM, comm);
			break;
		case C_BROADCAST:
			st = ibc_broadcast(s, r, n, IBC_FLOAT32, 0, comm);
			break;
		default:
			st = ibc_alltoall(s, r, n, IBC_FLOAT32, comm);
			break;
		}
		if (st != IBC_OK)
			die(coll_names[coll]);
		return;
	}
#endif
	switch (coll) {
	case C_ALLREDUCE:
		rc = MPI_Allreduce(s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case C_ALLGATHER:
		rc = MPI_Allgather(s, (int)n, MPI_FLOAT, r, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
		break;
	case C_REDUCE_SCATTER:
		rc = MPI_Reduce_scatter_block(s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case C_BROADCAST:
		if (rank == 0)
			memcpy(r, s, n * sizeof(float));
		rc = MPI_Bcast(r, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
		break;
	default:
		rc = MPI_Alltoall(s, (int)n, MPI_FLOAT, r, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
		break;
	}
	if (rc != MPI_SUCCESS)
		die(coll_names[coll]);
}

/* rank r's input element i: small integers, so that every sum is exact */
static float input(int r, size_t i)
{
	return (float)((r + 1) + (int)(i % 7));
}

/* wrong elements of this rank's result of @coll with @n elements per block */
static size_t check(int coll, const float *out, size_t n)
{
	size_t bad = 0;
	size_t i;
	int p;

	switch (coll) {
	case C_ALLREDUCE:
		for (i = 0; i < n; i++) {
			float want = 0;

			for (p = 0; p < nranks; p++)
				want += input(p, i);
			bad += out[i] != want;
		}
		break;
	case C_ALLGATHER:
		for (p = 0; p < nranks; p++)
			for (i = 0; i < n; i++)
				bad += out[(size_t)p * n + i] != input(p, i);
		break;
	case C_REDUCE_SCATTER:
		for (i = 0; i < n; i++) {
			float want = 0;

			for (p = 0; p < nranks; p++)
				want += input(p, (size_t)rank * n + i);
			bad += out[i] != want;
		}
		break;
	case C_BROADCAST:
		for (i = 0; i < n; i++)
			bad += out[i] != input(0, i);
		break;
	default:
		/* block p of rank q's input is element p n .. of input(q, .) */
		for (p = 0; p < nranks; p++)
			for (i = 0; i < n; i++)
				bad += out[(size_t)p * n + i] != input(p, (size_t)rank * n + i);
		break;
	}
	return bad;
}

/* ibcmem: ibcoll on ibc_mem_alloc() buffers (local peers map them) */
static int use_mem;

static void *buf_alloc(size_t nbytes)
{
#ifdef PEER_WITH_IBC
	void *p = NULL;

	if (use_mem)
		return ibc_mem_alloc(&p, nbytes) == IBC_OK ? p : NULL;
#endif
	return malloc(nbytes);
}

static void buf_free(void *p)
{
#ifdef PEER_WITH_IBC
	if (use_mem) {
		ibc_mem_free(p);
		return;
	}
#endif
	free(p);
}

int main(int argc, char **argv)
{
	uint64_t minb;
	uint64_t maxb;
	uint64_t factor;
	uint64_t bytes;
	int iters;
	int warmup;
	int coll = -1;
	int c;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (argc != 8) {
		if (rank == 0)
			fprintf(stderr, "usage: peer_bench mpi|ibc COLL MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP\n");
		MPI_Finalize();
		return 2;
	}
	for (c = 0; c < 5; c++)
		if (!strcmp(argv[2], coll_names[c]))
			coll = c;
	use_ibc = !strcmp(argv[1], "ibc") || !strcmp(argv[1], "ibcmem");
	use_mem = !strcmp(argv[1], "ibcmem");
	minb = strtoull(argv[3], NULL, 0);
	maxb = strtoull(argv[4], NULL, 0);
	factor = strtoull(argv[5], NULL, 0);
	iters = atoi(argv[6]);
	warmup = atoi(argv[7]);
	if (coll < 0 || (!use_ibc && strcmp(argv[1], "mpi")) || minb < 4 || maxb < minb ||
	    factor < 2 || iters < 1 || warmup < 0) {
		if (rank == 0)
			fprintf(stderr, "peer_bench: bad arguments (LIB mpi, ibc or ibcmem; COLL one of allreduce allgather reduce_scatter broadcast alltoall; 4 <= MIN <= MAX; FACTOR >= 2; ITERS >= 1)\n");
		MPI_Finalize();
		return 2;
	}
#ifdef PEER_WITH_IBC
	if (use_ibc) {
		ibc_unique_id_t id;

		memset(&id, 0, sizeof(id));
		if (rank == 0 && ibc_get_unique_id(&id) != IBC_OK)
			die("ibc_get_unique_id");
		MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
		if (ibc_comm_init_rank(&comm, nranks, &id, rank) != IBC_OK)
			die("ibc_comm_init_rank");
	}
#else
	if (use_ibc) {
		if (rank == 0)
			fprintf(stderr, "peer_bench: built without ibcoll (PEER_WITH_IBC)\n");
		MPI_Finalize();
		return 2;
	}
#endif
	for (bytes = minb; bytes <= maxb; bytes *= factor) {
		int whole = coll == C_ALLREDUCE || coll == C_BROADCAST;
		size_t n = whole ? bytes / 4 : bytes / 4 / (size_t)nranks;       /* per block */
		size_t sn = coll == C_ALLGATHER ? n : whole ? n : n * (size_t)nranks;
		size_t rn = coll == C_REDUCE_SCATTER ? n : whole ? n : n * (size_t)nranks;
		float *s = buf_alloc((sn ? sn : 1) * sizeof(float));
		float *r = buf_alloc((rn ? rn : 1) * sizeof(float));
		double *t = malloc((size_t)iters * sizeof(double));
		double med;
		double slow;
		long bad;
		long allbad;
		size_t i;
		int it;

		if (!s || !r || !t)
			die("malloc");
		if (n == 0) {
			/* fewer elements than ranks: no whole block to time at this size */
			buf_free(s);
			buf_free(r);
			free(t);
			continue;
		}
		if (sn > INT_MAX || rn > INT_MAX) {
			/* MPI counts are int: larger calls need derived datatypes */
			if (rank == 0)
				fprintf(stderr, "peer_bench: %llu bytes: over 2^31 - 1 elements per call; stopping\n",
					(unsigned long long)bytes);
			buf_free(s);
			buf_free(r);
			free(t);
			break;
		}
		for (i = 0; i < sn; i++)
			s[i] = input(rank, i);
		memset(r, 0, rn * sizeof(float));
		for (it = 0; it < warmup; it++)
			run(coll, s, r, n);
		for (it = 0; it < iters; it++) {
			double t0;

			barrier();
			t0 = bench_clock_us();
			run(coll, s, r, n);
			t[it] = bench_clock_us() - t0;
		}
		qsort(t, (size_t)iters, sizeof(double), bench_cmp_double);
		med = t[iters / 2];
		bad = (long)check(coll, r, n);
		MPI_Reduce(&med, &slow, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		MPI_Allreduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		/* the bytes that moved: whole elements per rank, as ibc_bench rounds */
		if (rank == 0)
			printf("%s %s %llu %.3f\n", argv[1], coll_names[coll],
			       (unsigned long long)(n * 4 * (whole ? 1 : (size_t)nranks)), slow);
		fflush(stdout);
		buf_free(s);
		buf_free(r);
		free(t);
		if (allbad) {
			if (rank == 0)
				fprintf(stderr, "peer_bench: %s %s of %llu bytes: %ld wrong elements\n",
					argv[1], coll_names[coll], (unsigned long long)bytes, allbad);
			MPI_Finalize();
			return 1;
		}
	}
	if (rank == 0) {
		char v[MPI_MAX_LIBRARY_VERSION_STRING];
		int len = 0;

		MPI_Get_library_version(v, &len);
		v[strcspn(v, "\n")] = '\0';
#ifdef PEER_WITH_IBC
		if (use_ibc) {
			int ver = 0;

			ibc_get_version(&ver);
			snprintf(v, sizeof(v), "ibcoll %d.%d.%d", ver / 10000, ver / 100 % 100,
				 ver % 100);
		}
#endif
		printf("# library %s: %s\n", argv[1], v);
	}
#ifdef PEER_WITH_IBC
	if (use_ibc)
		ibc_comm_destroy(comm);
#endif
	MPI_Finalize();
	return 0;
}
