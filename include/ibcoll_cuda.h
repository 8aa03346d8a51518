/* SPDX-License-Identifier: MIT */
/*
 * ibcoll_cuda.h - stream-ordered entry points of libibcoll for CUDA users:
 * each collective of ibcoll.h in a form that takes a cudaStream_t and is
 * ordered with the work on that stream, like NCCL's calls. Installed only
 * when the library was built with CUDA (ibc_info says "cuda: yes").
 *
 * Ordering: ibc_<name>_stream(..., comm, stream) returns at once. The
 * operation starts only after all work queued on @stream before the call
 * has finished, and work queued on @stream after the call starts only when
 * the operation has finished on this rank. Operations on one communicator
 * still run one at a time in issue order, mixed with the blocking and
 * nonblocking calls of ibcoll.h, and every rank must issue the same
 * sequence (as for every ibcoll call).
 *
 * How (docs/cuda.md): the call queues the operation on the communicator's
 * progress thread, gated, and enqueues a host function on @stream
 * (cudaLaunchHostFunc). When the stream reaches the host function, it opens
 * the gate and blocks until the progress thread has completed the
 * operation; the stream, and any work behind it, waits meanwhile. The host
 * function makes no CUDA call itself; all copies run in the progress thread.
 *
 * Cost: about 10-30 us of latency per operation (host function dispatch and
 * a thread hand-off), and @stream is idle while the operation runs (no
 * kernel of that stream overlaps the communication; use another stream for
 * computation that should overlap).
 *
 * Threading rules:
 *  - needs the progress thread (IBC_PROGRESS_THREAD=1, the default);
 *    otherwise IBC_ERR_UNSUPPORTED;
 *  - host functions of one process run one at a time (CUDA's rule): while
 *    an operation's host function waits, the host functions of other
 *    streams wait too, so issue operations of different communicators in
 *    the same order on every rank, as NCCL requires of its groups;
 *  - synchronize @stream (or the device) before ibc_comm_destroy(): destroy
 *    waits for queued operations, at most IBC_TIMEOUT_MS for a gate.
 *
 * Errors: argument errors are returned at once (nothing is enqueued). An
 * error during the operation poisons @comm: later calls return it, and
 * ibc_comm_get_async_error() reports it; the stream continues. The buffers
 * may be host or device memory, as in ibcoll.h.
 */
#ifndef IBCOLL_CUDA_H
#define IBCOLL_CUDA_H

#include <ibcoll.h>

#ifndef IBC_CUDA_NO_RUNTIME_HEADER
#include <cuda_runtime_api.h>   /* cudaStream_t */
#else
/* the library's own build without CUDA: CUDA's definition of the type */
typedef struct CUstream_st *cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Every function below takes the arguments of its ibcoll.h counterpart
 * plus @stream, and returns:
 *   IBC_OK                the operation is enqueued (not yet done);
 *   IBC_ERR_INVALID_ARG   as the blocking call (bad buffer, dtype, op, root,
 *                         peer; NULL comm);
 *   IBC_ERR_INVALID_USAGE destroyed or poisoned communicator, too many
 *                         operations outstanding (IBC_MAX_REQUESTS);
 *   IBC_ERR_CUDA          cudaLaunchHostFunc() failed (e.g. an invalid
 *                         stream); nothing was enqueued;
 *   IBC_ERR_UNSUPPORTED   library built without CUDA, or
 *                         IBC_PROGRESS_THREAD=0;
 *   IBC_ERR_NO_MEMORY.
 * @stream may be 0 (the legacy default stream) or cudaStreamPerThread.
 */

/** ibc_allreduce_stream() - ibc_allreduce() ordered on @stream. */
IBC_API ibc_status_t ibc_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count,
					  ibc_dtype_t dtype, ibc_redop_t op, ibc_comm_h comm,
					  cudaStream_t stream);

/** ibc_broadcast_stream() - ibc_broadcast() ordered on @stream. */
IBC_API ibc_status_t ibc_broadcast_stream(const void *sendbuf, void *recvbuf, size_t count,
					  ibc_dtype_t dtype, int root, ibc_comm_h comm,
					  cudaStream_t stream);

/** ibc_reduce_stream() - ibc_reduce() ordered on @stream. */
IBC_API ibc_status_t ibc_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
				       ibc_dtype_t dtype, ibc_redop_t op, int root,
				       ibc_comm_h comm, cudaStream_t stream);

/** ibc_allgather_stream() - ibc_allgather() ordered on @stream. */
IBC_API ibc_status_t ibc_allgather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
					  ibc_dtype_t dtype, ibc_comm_h comm, cudaStream_t stream);

/** ibc_reduce_scatter_stream() - ibc_reduce_scatter() ordered on @stream. */
IBC_API ibc_status_t ibc_reduce_scatter_stream(const void *sendbuf, void *recvbuf,
					       size_t recvcount, ibc_dtype_t dtype,
					       ibc_redop_t op, ibc_comm_h comm,
					       cudaStream_t stream);

/** ibc_alltoall_stream() - ibc_alltoall() ordered on @stream. */
IBC_API ibc_status_t ibc_alltoall_stream(const void *sendbuf, void *recvbuf, size_t count,
					 ibc_dtype_t dtype, ibc_comm_h comm, cudaStream_t stream);

/** ibc_send_stream() - ibc_send() ordered on @stream. */
IBC_API ibc_status_t ibc_send_stream(const void *buf, size_t count, ibc_dtype_t dtype, int peer,
				     ibc_comm_h comm, cudaStream_t stream);

/** ibc_recv_stream() - ibc_recv() ordered on @stream. */
IBC_API ibc_status_t ibc_recv_stream(void *buf, size_t count, ibc_dtype_t dtype, int peer,
				     ibc_comm_h comm, cudaStream_t stream);

/**
 * ibc_barrier_stream() - ibc_barrier() ordered on @stream: work queued on
 * @stream afterwards starts only when every rank's stream reached its barrier.
 */
IBC_API ibc_status_t ibc_barrier_stream(ibc_comm_h comm, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* IBCOLL_CUDA_H */
