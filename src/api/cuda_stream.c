/* SPDX-License-Identifier: MIT */
/*
 * cuda_stream.c - the stream-ordered entry points of include/ibcoll_cuda.h
 * and their gate. Relies on api_coll.c (ibc_api_start_gated: argument
 * checks, issue order, queueing) and on cudaLaunchHostFunc through cuda.h.
 *
 * Protocol of one call, op on stream S of communicator C:
 *
 *   caller thread            CUDA host-function thread     C's progress thread
 *   gate = NEW
 *   launch host fn on S --->  (runs when S reaches it)
 *   queue op(gate) on C ------------------------------------> ... op is next:
 *   gate = SUBMITTED(req)     wait gate != NEW                wait gate OPEN
 *   return IBC_OK             OPEN; wait op done  <---------  run op (staged)
 *                             free gate; return               op done
 *                             (S continues)
 *
 * The host function is launched before the operation is queued, so a
 * failed launch leaves nothing behind; a failed queueing (argument error)
 * marks the gate CANCELLED and the host function returns at once. The
 * host function makes no CUDA call (CUDA forbids it there); it only waits,
 * and every CUDA call of the operation runs in the progress thread. Each
 * wait is bounded: the progress thread waits at most IBC_TIMEOUT_MS for
 * the stream and notices abort within 100 ms.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "api/api.h"
#include "api/cuda_stage.h"
#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/twait.h"
#include "base/util.h"
#include "cuda/cuda.h"
#include "ibcoll_cuda.h"

static ibc_cuda_launch_fn test_launcher;

void ibc_cuda_stream_set_launcher(ibc_cuda_launch_fn launch)
{
	__atomic_store_n(&test_launcher, launch, __ATOMIC_RELEASE);
}

static void gate_free(struct ibc_cuda_gate *g)
{
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->cond);
	ibc_free(g);
}

/* the host function: runs in CUDA's thread when the stream reaches it */
static void gate_host_fn(void *arg)
{
	struct ibc_cuda_gate *g = arg;
	ibc_request_h req;
	ibc_status_t st;

	pthread_mutex_lock(&g->lock);
	/* the caller queues the operation right after the launch: a short wait */
	while (g->state == IBC_GATE_NEW)
		pthread_cond_wait(&g->cond, &g->lock);
	if (g->state == IBC_GATE_CANCELLED) {
		pthread_mutex_unlock(&g->lock);
		gate_free(g);
		return;
	}
	g->open = 1;
	req = g->req;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	/* bounded: the progress thread finishes or fails the operation */
	st = ibc_wait(req);
	if (st != IBC_OK)
		IBC_LOG_DEBUG(CUDA, "stream-ordered operation failed: %s (%s)", ibc_status_str(st),
			      ibc_last_error());
	gate_free(g);
}

static ibc_status_t launch(void *stream, struct ibc_cuda_gate *g)
{
	ibc_cuda_launch_fn l = __atomic_load_n(&test_launcher, __ATOMIC_ACQUIRE);

	if (l)
		return l(stream, gate_host_fn, g);
	return ibc_cuda_launch_host_func(stream, gate_host_fn, g);
}

static ibc_status_t stream_op(ibc_comm_h comm, int coll, const void *sendbuf, void *recvbuf,
			      size_t count, ibc_dtype_t dtype, ibc_redop_t op, int root,
			      cudaStream_t stream, const char *fn)
{
	struct ibc_cuda_gate *g;
	ibc_request_h req = NULL;
	ibc_status_t st;
	struct ibc_comm *c;
	int use_thread;

	if (!comm) {
		IBC_LOG_ERROR(CUDA, "%s: comm is NULL", fn);
		return IBC_ERR_INVALID_ARG;
	}
	if (!IBC_CUDA_BUILT && !__atomic_load_n(&test_launcher, __ATOMIC_ACQUIRE)) {
		IBC_LOG_ERROR(CUDA, "%s: this libibcoll was built without CUDA", fn);
		return IBC_ERR_UNSUPPORTED;
	}
	IBC_CHECK(ibc_comm_enter(comm, fn, &c));
	use_thread = c->use_thread;
	ibc_comm_leave(c);
	if (!use_thread) {
		IBC_LOG_ERROR(CUDA, "%s: stream-ordered calls need the progress thread (IBC_PROGRESS_THREAD=1)",
			      fn);
		return IBC_ERR_UNSUPPORTED;
	}
	g = ibc_calloc(1, sizeof(*g), "stream gate");
	if (!g)
		return IBC_ERR_NO_MEMORY;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	st = launch((void *)stream, g);
	if (st != IBC_OK) {
		/* cuda_mem.c logged the CUDA error */
		IBC_LOG_DEBUG(CUDA, "%s: cannot enqueue on the CUDA stream: %s", fn,
			      ibc_status_str(st));
		gate_free(g);
		return st;
	}
	st = ibc_api_start_gated(comm, coll, sendbuf, recvbuf, count, dtype, op, root, g, &req, fn);
	pthread_mutex_lock(&g->lock);
	g->state = st == IBC_OK ? IBC_GATE_SUBMITTED : IBC_GATE_CANCELLED;
	g->req = req;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	/* from here on the host function owns the gate */
	return st;
}

ibc_status_t ibc_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count,
				  ibc_dtype_t dtype, ibc_redop_t op, ibc_comm_h comm,
				  cudaStream_t stream)
{
	return stream_op(comm, IBC_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, -1, stream,
			 "ibc_allreduce_stream");
}

ibc_status_t ibc_broadcast_stream(const void *sendbuf, void *recvbuf, size_t count,
				  ibc_dtype_t dtype, int root, ibc_comm_h comm,
				  cudaStream_t stream)
{
	return stream_op(comm, IBC_COLL_BROADCAST, sendbuf, recvbuf, count, dtype, IBC_SUM, root,
			 stream, "ibc_broadcast_stream");
}

ibc_status_t ibc_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
			       ibc_dtype_t dtype, ibc_redop_t op, int root, ibc_comm_h comm,
			       cudaStream_t stream)
{
	return stream_op(comm, IBC_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root, stream,
			 "ibc_reduce_stream");
}

ibc_status_t ibc_allgather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
				  ibc_dtype_t dtype, ibc_comm_h comm, cudaStream_t stream)
{
	return stream_op(comm, IBC_COLL_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, IBC_SUM,
			 -1, stream, "ibc_allgather_stream");
}

ibc_status_t ibc_reduce_scatter_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
				       ibc_dtype_t dtype, ibc_redop_t op, ibc_comm_h comm,
				       cudaStream_t stream)
{
	return stream_op(comm, IBC_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op,
			 -1, stream, "ibc_reduce_scatter_stream");
}

ibc_status_t ibc_alltoall_stream(const void *sendbuf, void *recvbuf, size_t count,
				 ibc_dtype_t dtype, ibc_comm_h comm, cudaStream_t stream)
{
	return stream_op(comm, IBC_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, IBC_SUM, -1,
			 stream, "ibc_alltoall_stream");
}

ibc_status_t ibc_send_stream(const void *buf, size_t count, ibc_dtype_t dtype, int peer,
			     ibc_comm_h comm, cudaStream_t stream)
{
	return stream_op(comm, IBC_COLL_SEND, buf, NULL, count, dtype, IBC_SUM, peer, stream,
			 "ibc_send_stream");
}

ibc_status_t ibc_recv_stream(void *buf, size_t count, ibc_dtype_t dtype, int peer,
			     ibc_comm_h comm, cudaStream_t stream)
{
	return stream_op(comm, IBC_COLL_RECV, NULL, buf, count, dtype, IBC_SUM, peer, stream,
			 "ibc_recv_stream");
}

ibc_status_t ibc_barrier_stream(ibc_comm_h comm, cudaStream_t stream)
{
	return stream_op(comm, IBC_COLL_BARRIER, NULL, NULL, 0, IBC_UINT8, IBC_SUM, -1, stream,
			 "ibc_barrier_stream");
}
