/* SPDX-License-Identifier: MIT */
/*
 * cuda_stage.h - the API layer's handling of CUDA buffers: which buffers of
 * an operation are device memory, the staging wrapper the executor runs
 * such operations through (cuda_stage.c), and the gates of stream-ordered
 * operations (opened by the stream in cuda_stream.c, waited for by the
 * executor in cuda_stage.c). Built with or without CUDA: without it,
 * device buffers cannot exist and stream-ordered calls are refused.
 */
#ifndef IBC_API_CUDA_STAGE_H
#define IBC_API_CUDA_STAGE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda.h"
#include "ibcoll.h"

/* ---------------------------------------------------------------------- */
/* cuda_stage.c: routing and the staged pipeline                          */
/* ---------------------------------------------------------------------- */

struct ibc_op;
struct ibc_net;
struct ibc_cuda_comm;

/**
 * ibc_cuda_op_classify() - Record in @op which of its buffers are device
 * memory (IBC_CUDA_REQ_SEND_DEV/RECV_DEV and op->cuda_dev). Called by
 * api_coll.c for every operation after its arguments were checked; looks
 * only at the buffers this rank uses (count > 0; broadcast's sendbuf on the
 * root, reduce's recvbuf on the root). Keeps IBC_CUDA_REQ_GATED.
 * @op:   [in,out] the operation; its coll, buffers, count and root are set.
 * @rank: [in] this rank (the root's buffers differ from the others').
 *
 * Cost: nothing in builds without CUDA; otherwise one cuPointerGetAttributes()
 * per buffer (a few hundred ns), and nothing at all until the process has
 * loaded the CUDA driver (no device memory can exist before).
 * Threading: thread-safe. Never fails: an unknown pointer is host memory.
 */
void ibc_cuda_op_classify(struct ibc_op *op, int rank);

/* the executor's run of one operation on host buffers (its algorithm) */
typedef ibc_status_t (*ibc_cuda_host_run_fn)(void *arg, struct ibc_op *op);

/**
 * ibc_cuda_stage_run() - Execute @op, whose cuda_flags are not 0: wait for
 * its stream (IBC_CUDA_REQ_GATED, @gate), then run it through @run on
 * pinned host copies of the device buffers, pipelined in segments of
 * IBC_CUDA_STAGE_BYTES (see cuda_stage.c for the schedule). The executor's
 * wrapper for such operations, in the thread that executes operations.
 * @state_p: [in,out] the communicator's staging state, created (or grown)
 *           here; NULL until the first such operation.
 * @net:     [in] the communicator's net layer (errors, timeout).
 * @op:      [in,out] the operation (cuda_dev filled in when unknown).
 * @gate:    [in] the stream gate of a stream-ordered operation, else NULL.
 * @run:     [in] the host run of one operation, called once per segment
 *           (with @arg), or once with host buffers.
 *
 * Blocking:  yes, like every algorithm; each wait is bounded by IBC_TIMEOUT_MS.
 * Return:    IBC_OK; @run's errors; IBC_ERR_CUDA (a copy failed);
 *            IBC_ERR_NO_MEMORY (pinned staging memory); IBC_ERR_TIMEOUT (a
 *            copy or the stream did not complete); IBC_ERR_UNSUPPORTED (built
 *            without CUDA).
 */
ibc_status_t ibc_cuda_stage_run(struct ibc_cuda_comm **state_p, struct ibc_net *net,
				struct ibc_op *op, void *gate, ibc_cuda_host_run_fn run, void *arg);

/**
 * ibc_cuda_stage_free() - Free a communicator's staging state (pinned
 * staging buffers, streams, events), when the communicator is freed after
 * its threads stopped. NULL is a no-op.
 */
void ibc_cuda_stage_free(struct ibc_cuda_comm *cc);

/* tests: staged-pipeline counters of this process (operations, segments) */
void ibc_cuda_stage_stats(uint64_t *nops_p, uint64_t *nsegments_p);

/*
 * tests: declare [@ptr, @ptr + @nbytes) of host memory to be "device memory"
 * (emulation). Operations on such buffers take the staged path with a host
 * copier that executes each copy lazily, when the event covering it is
 * waited for, so a missing wait in the pipeline gives wrong results
 * instead of passing by luck. Up to 64 ranges per process.
 * Return: IBC_OK; IBC_ERR_NO_MEMORY (table full); IBC_ERR_INVALID_ARG.
 */
ibc_status_t ibc_cuda_fake_device_add(const void *ptr, size_t nbytes);
void ibc_cuda_fake_device_remove(const void *ptr);

/* ---------------------------------------------------------------------- */
/* cuda_stream.c: the stream-ordered entry points                          */
/* ---------------------------------------------------------------------- */

/* the gate of a stream-ordered operation (cuda_stream.c opens it, the executor waits) */
enum ibc_cuda_gate_state { IBC_GATE_NEW = 0, IBC_GATE_SUBMITTED, IBC_GATE_CANCELLED };

struct ibc_cuda_gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int state;              /* enum ibc_cuda_gate_state */
	int open;               /* the stream reached the operation */
	ibc_request_h req;      /* valid in GATE_SUBMITTED */
};

/**
 * ibc_cuda_gate_wait() - In the executing thread, wait until the CUDA
 * stream of the stream-ordered operation @op reaches it (@gate: its host
 * function ran). Bounded by IBC_TIMEOUT_MS; returns early when the
 * communicator of @net fails or is aborted.
 * Return: IBC_OK; IBC_ERR_TIMEOUT (logged, communicator failed); its error.
 */
ibc_status_t ibc_cuda_gate_wait(struct ibc_net *net, const struct ibc_op *op, void *gate);

/* tests: run stream host functions through @launch instead of cudaLaunchHostFunc */
typedef ibc_status_t (*ibc_cuda_launch_fn)(void *stream, void (*fn)(void *), void *arg);
void ibc_cuda_stream_set_launcher(ibc_cuda_launch_fn launch);

#endif /* IBC_API_CUDA_STAGE_H */
