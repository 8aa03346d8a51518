/* SPDX-License-Identifier: MIT */
/*
 * bench_mpi.c - bench_mpi.h with MPI (compiled only when configure found
 * it): the MPI collective that matches each ibc_bench collective, on the
 * caller's buffers, blocking or nonblocking. MPI errors are returned
 * (MPI_ERRORS_RETURN on MPI_COMM_WORLD) and printed once here.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "bench_mpi.h"

/* nonblocking calls in flight before MPI_Waitall */
#define MPI_BATCH 256

static char mpi_version[256] = "none";

static int mpi_ok(int ret, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (ret == MPI_SUCCESS)
		return 0;
	MPI_Error_string(ret, msg, &len);
	fprintf(stderr, "ibc_bench: %s failed: %s\n", what, msg);
	return -1;
}

int bench_mpi_built(void)
{
	return 1;
}

int bench_mpi_init(int *argc, char ***argv, int *rank_p, int *size_p)
{
	int len = 0;
	char *nl;

	if (mpi_ok(MPI_Init(argc, argv), "MPI_Init"))
		return -1;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (mpi_ok(MPI_Comm_rank(MPI_COMM_WORLD, rank_p), "MPI_Comm_rank") ||
	    mpi_ok(MPI_Comm_size(MPI_COMM_WORLD, size_p), "MPI_Comm_size"))
		return -1;
	{
		char full[MPI_MAX_LIBRARY_VERSION_STRING];

		MPI_Get_library_version(full, &len);
		snprintf(mpi_version, sizeof(mpi_version), "%s", full);
	}
	nl = strpbrk(mpi_version, ",\n");
	if (nl)
		*nl = '\0';
	return 0;
}

int bench_mpi_finalize(void)
{
	return mpi_ok(MPI_Finalize(), "MPI_Finalize");
}

void bench_mpi_abort(int code)
{
	int init = 0;

	MPI_Initialized(&init);
	if (init)
		MPI_Abort(MPI_COMM_WORLD, code);
}

int bench_mpi_bcast(void *buf, size_t nbytes, int root)
{
	return mpi_ok(MPI_Bcast(buf, (int)nbytes, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

int bench_mpi_barrier(void)
{
	return mpi_ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

const char *bench_mpi_version(void)
{
	return mpi_version;
}

static MPI_Datatype mpi_dtype(ibc_dtype_t dt)
{
	switch (dt) {
	case IBC_INT8:     return MPI_INT8_T;
	case IBC_UINT8:    return MPI_UINT8_T;
	case IBC_INT32:    return MPI_INT32_T;
	case IBC_UINT32:   return MPI_UINT32_T;
	case IBC_INT64:    return MPI_INT64_T;
	case IBC_UINT64:   return MPI_UINT64_T;
	case IBC_FLOAT16:  return MPI_UINT16_T;    /* moved, never reduced */
	case IBC_BFLOAT16: return MPI_UINT16_T;
	case IBC_FLOAT32:  return MPI_FLOAT;
	case IBC_FLOAT64:  return MPI_DOUBLE;
	default:           return MPI_DATATYPE_NULL;
	}
}

static MPI_Op mpi_op(ibc_redop_t op)
{
	switch (op) {
	case IBC_SUM:  return MPI_SUM;
	case IBC_PROD: return MPI_PROD;
	case IBC_MIN:  return MPI_MIN;
	case IBC_MAX:  return MPI_MAX;
	default:       return MPI_OP_NULL;
	}
}

int bench_mpi_supports(const struct bench_call *call, const char **why_p)
{
	int reduces = bench_coll_reduces(call->coll);

	if (reduces && (call->dtype == IBC_FLOAT16 || call->dtype == IBC_BFLOAT16)) {
		*why_p = "MPI has no 16-bit floating-point reductions";
		return 0;
	}
	if (reduces && call->op == IBC_AVG) {
		*why_p = "MPI has no AVG reduction";
		return 0;
	}
	if (call->count > INT_MAX) {
		*why_p = "count above INT_MAX";
		return 0;
	}
	return 1;
}

/* issue one call; @req_p NULL: blocking. Returns the MPI error code. */
static int mpi_call(const struct bench_call *c, MPI_Request *req_p)
{
	MPI_Comm w = MPI_COMM_WORLD;
	MPI_Datatype dt = mpi_dtype(c->dtype);
	MPI_Op op = mpi_op(c->op);
	int cnt = (int)c->count;
	void *sbuf = (void *)c->sendbuf;
	void *rbuf = c->recvbuf;
	int next = (c->rank + 1) % c->nranks;
	int prev = (c->rank + c->nranks - 1) % c->nranks;
	void *bbuf = c->rank == c->root ? sbuf : rbuf;

	switch (c->coll) {
	case BENCH_ALLREDUCE:
		return req_p ? MPI_Iallreduce(sbuf, rbuf, cnt, dt, op, w, req_p)
			     : MPI_Allreduce(sbuf, rbuf, cnt, dt, op, w);
	case BENCH_BROADCAST:
		return req_p ? MPI_Ibcast(bbuf, cnt, dt, c->root, w, req_p)
			     : MPI_Bcast(bbuf, cnt, dt, c->root, w);
	case BENCH_REDUCE:
		return req_p ? MPI_Ireduce(sbuf, rbuf, cnt, dt, op, c->root, w, req_p)
			     : MPI_Reduce(sbuf, rbuf, cnt, dt, op, c->root, w);
	case BENCH_ALLGATHER:
		return req_p ? MPI_Iallgather(sbuf, cnt, dt, rbuf, cnt, dt, w, req_p)
			     : MPI_Allgather(sbuf, cnt, dt, rbuf, cnt, dt, w);
	case BENCH_REDUCE_SCATTER:
		return req_p ? MPI_Ireduce_scatter_block(sbuf, rbuf, cnt, dt, op, w, req_p)
			     : MPI_Reduce_scatter_block(sbuf, rbuf, cnt, dt, op, w);
	case BENCH_ALLTOALL:
		return req_p ? MPI_Ialltoall(sbuf, cnt, dt, rbuf, cnt, dt, w, req_p)
			     : MPI_Alltoall(sbuf, cnt, dt, rbuf, cnt, dt, w);
	case BENCH_SENDRECV:
		if (req_p) {
			int ret = MPI_Irecv(rbuf, cnt, dt, prev, 0, w, &req_p[0]);

			return ret != MPI_SUCCESS ? ret : MPI_Isend(sbuf, cnt, dt, next, 0, w, &req_p[1]);
		}
		return MPI_Sendrecv(sbuf, cnt, dt, next, 0, rbuf, cnt, dt, prev, 0, w,
				    MPI_STATUS_IGNORE);
	case BENCH_BARRIER:
		return req_p ? MPI_Ibarrier(w, req_p) : MPI_Barrier(w);
	default:
		return MPI_ERR_ARG;
	}
}

int bench_mpi_run(const struct bench_call *call, uint64_t iters, int blocking)
{
	MPI_Request reqs[2 * MPI_BATCH];
	int per = call->coll == BENCH_SENDRECV ? 2 : 1;
	uint64_t it = 0;

	if (blocking) {
		for (it = 0; it < iters; it++)
			if (mpi_ok(mpi_call(call, NULL), bench_coll_name(call->coll)))
				return -1;
		return 0;
	}
	while (it < iters) {
		int nreq = 0;

		while (it < iters && nreq < 2 * MPI_BATCH) {
			if (mpi_ok(mpi_call(call, &reqs[nreq]), bench_coll_name(call->coll)))
				return -1;
			nreq += per;
			it++;
		}
		if (mpi_ok(MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall"))
			return -1;
	}
	return 0;
}
