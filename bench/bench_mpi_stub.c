/* SPDX-License-Identifier: MIT */
/*
 * bench_mpi_stub.c - bench_mpi.h for builds without MPI (configure
 * --with-mpi=no or no mpicc found): --vs-mpi is refused with a clear
 * message and nothing else changes.
 */
#include "config.h"

#include <stdio.h>

#include "bench_mpi.h"

int bench_mpi_built(void)
{
	return 0;
}

int bench_mpi_init(int *argc, char ***argv, int *rank_p, int *size_p)
{
	(void)argc;
	(void)argv;
	(void)rank_p;
	(void)size_p;
	fprintf(stderr, "ibc_bench: --vs-mpi needs MPI; this build has none (no mpicc)\n");
	return -1;
}

int bench_mpi_finalize(void)
{
	return 0;
}

void bench_mpi_abort(int code)
{
	(void)code;
}

int bench_mpi_bcast(void *buf, size_t nbytes, int root)
{
	(void)buf;
	(void)nbytes;
	(void)root;
	return -1;
}

int bench_mpi_barrier(void)
{
	return -1;
}

const char *bench_mpi_version(void)
{
	return "none";
}

int bench_mpi_supports(const struct bench_call *call, const char **why_p)
{
	(void)call;
	*why_p = "not built with MPI";
	return 0;
}

int bench_mpi_run(const struct bench_call *call, uint64_t iters, int blocking)
{
	(void)call;
	(void)iters;
	(void)blocking;
	return -1;
}
