/* SPDX-License-Identifier: MIT */
/*
 * shim_coll.c - the NCCL collectives and point-to-point calls: argument
 * checks, the mapping of types and reductions (shim_map.c), then either a
 * record in the thread's group (shim_group.c) or an immediate issue: in
 * stream mode to ibc_<name>_stream() (ibcoll_cuda.h, ordered on the
 * caller's stream), in host mode to the blocking ibc_<name>() (shim.h).
 */
#include "config.h"

#include <string.h>

#include "shim.h"

static pthread_once_t mode_once = PTHREAD_ONCE_INIT;
static int host_mode;

static void mode_probe(void)
{
	host_mode = shim_cuda_device_count() == 0;
}

int shim_host_mode(void)
{
	pthread_once(&mode_once, mode_probe);
	return host_mode;
}

static int needs_send(const struct shim_op *op, int rank)
{
	switch (op->kind) {
	case SHIM_BROADCAST:
		return op->root == rank;
	case SHIM_RECV:
		return 0;
	default:
		return 1;
	}
}

static int needs_recv(const struct shim_op *op, int rank)
{
	switch (op->kind) {
	case SHIM_REDUCE:
		return op->root == rank;
	case SHIM_SEND:
		return 0;
	default:
		return 1;
	}
}

ncclResult_t shim_op_check(const struct shim_op *op)
{
	struct ncclComm *c = op->comm;
	ncclResult_t res = shim_comm_ready(c, op->fn);

	if (res != ncclSuccess)
		return res;
	if (shim_host_mode() && op->stream)
		return shim_err(c, ncclInvalidArgument, op->fn,
				"stream %p given, but this process has no CUDA device (host mode): operations run in the calling thread and the stream must be NULL",
				(void *)op->stream);
	if (!shim_host_mode() && (res = shim_cuda_no_capture(op->stream, c, op->fn)) != ncclSuccess)
		return res;
	if ((op->kind == SHIM_BROADCAST || op->kind == SHIM_REDUCE) &&
	    (op->root < 0 || op->root >= c->nranks))
		return shim_err(c, ncclInvalidArgument, op->fn, "root %d is not a rank of [0, %d)",
				op->root, c->nranks);
	if ((op->kind == SHIM_SEND || op->kind == SHIM_RECV) &&
	    (op->root < 0 || op->root >= c->nranks))
		return shim_err(c, ncclInvalidArgument, op->fn, "peer %d is not a rank of [0, %d)",
				op->root, c->nranks);
	if (op->count && needs_send(op, c->rank) && !op->sendbuf)
		return shim_err(c, ncclInvalidArgument, op->fn, "sendbuff is NULL with count %zu",
				op->count);
	if (op->count && needs_recv(op, c->rank) && !op->recvbuf)
		return shim_err(c, ncclInvalidArgument, op->fn, "recvbuff is NULL with count %zu",
				op->count);
	return ncclSuccess;
}

static ibc_status_t issue_stream(const struct shim_op *op, ibc_comm_h ibc)
{
	switch (op->kind) {
	case SHIM_ALLREDUCE:
		return ibc_allreduce_stream(op->sendbuf, op->recvbuf, op->count, op->dtype, op->op,
					    ibc, op->stream);
	case SHIM_BROADCAST:
		return ibc_broadcast_stream(op->sendbuf, op->recvbuf, op->count, op->dtype,
					    op->root, ibc, op->stream);
	case SHIM_REDUCE:
		return ibc_reduce_stream(op->sendbuf, op->recvbuf, op->count, op->dtype, op->op,
					 op->root, ibc, op->stream);
	case SHIM_ALLGATHER:
		return ibc_allgather_stream(op->sendbuf, op->recvbuf, op->count, op->dtype, ibc,
					    op->stream);
	case SHIM_REDUCE_SCATTER:
		return ibc_reduce_scatter_stream(op->sendbuf, op->recvbuf, op->count, op->dtype,
						 op->op, ibc, op->stream);
	case SHIM_ALLTOALL:
		return ibc_alltoall_stream(op->sendbuf, op->recvbuf, op->count, op->dtype, ibc,
					   op->stream);
	case SHIM_SEND:
		return ibc_send_stream(op->sendbuf, op->count, op->dtype, op->root, ibc,
				       op->stream);
	case SHIM_RECV:
		return ibc_recv_stream(op->recvbuf, op->count, op->dtype, op->root, ibc,
				       op->stream);
	default:
		return IBC_ERR_INTERNAL;
	}
}

static ibc_status_t issue_host(const struct shim_op *op, ibc_comm_h ibc)
{
	switch (op->kind) {
	case SHIM_ALLREDUCE:
		return ibc_allreduce(op->sendbuf, op->recvbuf, op->count, op->dtype, op->op, ibc);
	case SHIM_BROADCAST:
		return ibc_broadcast(op->sendbuf, op->recvbuf, op->count, op->dtype, op->root, ibc);
	case SHIM_REDUCE:
		return ibc_reduce(op->sendbuf, op->recvbuf, op->count, op->dtype, op->op, op->root,
				  ibc);
	case SHIM_ALLGATHER:
		return ibc_allgather(op->sendbuf, op->recvbuf, op->count, op->dtype, ibc);
	case SHIM_REDUCE_SCATTER:
		return ibc_reduce_scatter(op->sendbuf, op->recvbuf, op->count, op->dtype, op->op,
					  ibc);
	case SHIM_ALLTOALL:
		return ibc_alltoall(op->sendbuf, op->recvbuf, op->count, op->dtype, ibc);
	case SHIM_SEND:
		return ibc_send(op->sendbuf, op->count, op->dtype, op->root, ibc);
	case SHIM_RECV:
		return ibc_recv(op->recvbuf, op->count, op->dtype, op->root, ibc);
	default:
		return IBC_ERR_INTERNAL;
	}
}

ncclResult_t shim_issue(const struct shim_op *op)
{
	ibc_status_t st;

	if (op->has_premul)
		return shim_premul_issue(op);
	st = shim_host_mode() ? issue_host(op, op->comm->ibc) : issue_stream(op, op->comm->ibc);
	if (st != IBC_OK)
		return shim_ibc_err(op->comm, st, op->fn);
	return ncclSuccess;
}

ncclResult_t shim_issue_self(const struct shim_op *send, const struct shim_op *recv)
{
	size_t esz = 0;
	size_t nbytes;

	if (ibc_dtype_size(send->dtype, &esz) != IBC_OK)
		return shim_err(send->comm, ncclInternalError, send->fn, "dtype %d has no size",
				(int)send->dtype);
	nbytes = send->count * esz;
	if (shim_host_mode()) {
		if (nbytes && recv->recvbuf != send->sendbuf)
			memmove(recv->recvbuf, send->sendbuf, nbytes);
		return ncclSuccess;
	}
	return shim_cuda_copy(recv->recvbuf, send->sendbuf, nbytes, send->stream, send->comm,
			      send->fn);
}

/* @op uses operator @nccl_op of @c (ncclRedOpCreatePreMulSum) */
static ncclResult_t premul_op(struct ncclComm *c, int nccl_op, ncclDataType_t datatype,
			      struct shim_op *op)
{
	ncclResult_t res = shim_comm_ready(c, op->fn);

	if (res == ncclSuccess)
		res = shim_premul_find(c, nccl_op, (int)datatype, &op->premul, op->fn);
	if (res != ncclSuccess)
		return res;
	op->has_premul = 1;
	return shim_op_check(op);
}

static ncclResult_t submit(int kind, const char *fn, const void *sendbuf, void *recvbuf,
			   size_t count, ncclDataType_t datatype, int nccl_op, int root,
			   ncclComm_t comm, cudaStream_t stream)
{
	struct shim_op op = {
		.kind = kind, .fn = fn, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
		.op = IBC_SUM, .root = root, .comm = comm, .stream = stream,
	};
	struct ncclComm *c = comm && comm->magic == SHIM_COMM_MAGIC ? comm : NULL;
	int reducing = kind == SHIM_ALLREDUCE || kind == SHIM_REDUCE || kind == SHIM_REDUCE_SCATTER;
	ncclResult_t res;

	if (shim_map_dtype(datatype, &op.dtype) != 0)
		res = shim_err(c, ncclInvalidArgument, fn,
			       "datatype %d is not supported (ibcoll has the 10 types of NCCL 2.21, int8 to bfloat16; not NCCL 2.24's fp8 types)",
			       (int)datatype);
	else if (reducing && (int)nccl_op >= ncclNumOps)
		res = c ? premul_op(c, nccl_op, datatype, &op) : shim_op_check(&op);
	else if (reducing && shim_map_op(nccl_op, &op.op) != 0)
		res = shim_err(c, ncclInvalidArgument, fn, "op %d is not a reduction", nccl_op);
	else
		res = shim_op_check(&op);
	if (res != ncclSuccess) {
		if (shim_in_group())
			shim_group_fail(res);
		return res;
	}
	if (shim_in_group())
		return shim_group_add(&op);
	if ((kind == SHIM_SEND || kind == SHIM_RECV) && root == comm->rank)
		return shim_err(comm, ncclInvalidUsage, fn,
				"%s self outside ncclGroupStart/End: its matching %s can only come later, so it would never complete",
				kind == SHIM_SEND ? "send to" : "receive from",
				kind == SHIM_SEND ? "ncclRecv" : "ncclSend");
	res = shim_issue(&op);
	if (res == ncclSuccess && !shim_host_mode())
		res = shim_cuda_mark(comm, stream, fn);
	return res;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			   cudaStream_t stream)
{
	return submit(SHIM_ALLREDUCE, "ncclAllReduce", sendbuff, recvbuff, count, datatype, op, -1,
		      comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
	return submit(SHIM_BROADCAST, "ncclBroadcast", sendbuff, recvbuff, count, datatype,
		      ncclSum, root, comm, stream);
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
		       ncclComm_t comm, cudaStream_t stream)
{
	return submit(SHIM_BROADCAST, "ncclBcast", buff, buff, count, datatype, ncclSum, root, comm,
		      stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
			ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
			cudaStream_t stream)
{
	return submit(SHIM_REDUCE, "ncclReduce", sendbuff, recvbuff, count, datatype, op, root,
		      comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	return submit(SHIM_ALLGATHER, "ncclAllGather", sendbuff, recvbuff, sendcount, datatype,
		      ncclSum, -1, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
			       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			       cudaStream_t stream)
{
	return submit(SHIM_REDUCE_SCATTER, "ncclReduceScatter", sendbuff, recvbuff, recvcount,
		      datatype, op, -1, comm, stream);
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
			  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	return submit(SHIM_ALLTOALL, "ncclAlltoAll", sendbuff, recvbuff, count, datatype, ncclSum,
		      -1, comm, stream);
}

ncclResult_t ncclAllToAll(const void *sendbuff, void *recvbuff, size_t count,
			  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	return submit(SHIM_ALLTOALL, "ncclAllToAll", sendbuff, recvbuff, count, datatype, ncclSum,
		      -1, comm, stream);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream)
{
	return submit(SHIM_SEND, "ncclSend", sendbuff, NULL, count, datatype, ncclSum, peer, comm,
		      stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream)
{
	return submit(SHIM_RECV, "ncclRecv", NULL, recvbuff, count, datatype, ncclSum, peer, comm,
		      stream);
}
