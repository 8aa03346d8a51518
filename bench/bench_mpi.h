/* SPDX-License-Identifier: MIT */
/*
 * bench_mpi.h - the Open MPI side of `ibc_bench --vs-mpi`: the matching MPI
 * collective on the same buffers, dtypes and iteration counts. Implemented
 * by bench_mpi.c when configure found MPI (HAVE_MPI), else by
 * bench_mpi_stub.c, whose functions report that MPI is not built in, so
 * ibc_bench.c needs no #ifdef.
 *
 * All functions are called from the main thread only, after
 * bench_mpi_init() succeeded (except bench_mpi_built()). They return 0 on
 * success and -1 on an MPI error, after printing MPI's error string to
 * stderr (the benchmark is an application: it then aborts the job).
 */
#ifndef IBC_BENCH_MPI_H
#define IBC_BENCH_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "bench_common.h"

/* 1 when ibc_bench was built with MPI (--vs-mpi available), else 0 */
int bench_mpi_built(void);

/*
 * bench_mpi_init() - MPI_Init (call before ibc_comm_init_*, as both read the
 * launcher's environment); errors on MPI_COMM_WORLD are returned, not fatal.
 * @rank_p, @size_p: [out] rank and size in MPI_COMM_WORLD.
 */
int bench_mpi_init(int *argc, char ***argv, int *rank_p, int *size_p);

/* MPI_Finalize */
int bench_mpi_finalize(void);

/* MPI_Abort(MPI_COMM_WORLD, @code); returns only when MPI is not built in */
void bench_mpi_abort(int code);

/* MPI_Bcast of @nbytes bytes from @root (used to hand out ibc_unique_id_t) */
int bench_mpi_bcast(void *buf, size_t nbytes, int root);

/* MPI_Barrier(MPI_COMM_WORLD) */
int bench_mpi_barrier(void);

/* "Open MPI v4.1.4, ..." (MPI_Get_library_version, first line), or "none" */
const char *bench_mpi_version(void);

/*
 * bench_mpi_supports() - whether MPI has the collective of @call with its
 * dtype and op. MPI has no 16-bit floating reductions and no AVG; the other
 * collectives move 16-bit floats as MPI_UINT16_T. Returns 1, or 0 with a
 * static reason in *@why_p.
 */
int bench_mpi_supports(const struct bench_call *call, const char **why_p);

/*
 * bench_mpi_run() - @iters calls of the MPI collective matching @call on
 * MPI_COMM_WORLD: MPI_Allreduce, MPI_Bcast (root sends from @sendbuf, the
 * others receive into @recvbuf), MPI_Reduce, MPI_Allgather,
 * MPI_Reduce_scatter_block, MPI_Alltoall, MPI_Sendrecv (ring exchange:
 * send to rank+1, receive from rank-1) or MPI_Barrier. @blocking 0 uses
 * the MPI_I* forms, issued in batches and completed with MPI_Waitall.
 */
int bench_mpi_run(const struct bench_call *call, uint64_t iters, int blocking);

#endif /* IBC_BENCH_MPI_H */
