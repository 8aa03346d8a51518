/* SPDX-License-Identifier: MIT */
/*
 * shim.h - internals of libibcoll_nccl (bindings/nccl), the NCCL API over
 * ibcoll: the record behind ncclComm_t, the deferred operation of a group,
 * and the helpers its files share. A client of the installed headers only
 * (ibcoll.h, ibcoll_cuda.h); every CUDA runtime call is in shim_cuda.c.
 *
 * Two execution modes, chosen once per process:
 *   stream mode  a CUDA device exists: operations go to ibc_*_stream() and
 *                are ordered on the caller's stream (the NCCL contract);
 *   host mode    no usable CUDA device (no driver, no GPU): operations run
 *                to completion in the calling thread through ibcoll's
 *                blocking calls, on host memory, and the stream must be
 *                NULL. This is what lets every rank of the shim run in CI.
 */
#ifndef IBC_NCCL_SHIM_H
#define IBC_NCCL_SHIM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <ibcoll.h>
#include <ibcoll_cuda.h>

#include "nccl.h"

#define SHIM_ERR_BYTES 1024
#define SHIM_COMM_MAGIC 0x1bc0cc15u
#define SHIM_DEAD_MAGIC 0xdeadcc15u

/* the kinds of deferred operation, in the order of NCCL's API pages */
enum shim_kind {
	SHIM_ALLREDUCE = 0,
	SHIM_BROADCAST,
	SHIM_REDUCE,
	SHIM_ALLGATHER,
	SHIM_REDUCE_SCATTER,
	SHIM_ALLTOALL,
	SHIM_SEND,
	SHIM_RECV,
	SHIM_KIND_COUNT
};

/* a CUDA event recorded on a stream after this communicator's last operation there */
struct shim_ev {
	cudaStream_t stream;
	void *ev;                       /* cudaEvent_t */
};

/*
 * struct shim_premul - an operator of ncclRedOpCreatePreMulSum(): a sum of
 * each rank's input multiplied by this rank's scalar. Its ncclRedOp_t value
 * is ncclNumOps + its index in the communicator's table. A recorded
 * operation keeps a copy, so the operator may be destroyed once the call
 * that used it has returned (NCCL's rule).
 */
struct shim_premul {
	int used;
	int nccl_dtype;                 /* the only type it may be used with */
	ibc_dtype_t dtype;
	int on_device;                  /* ncclScalarDevice: *@dptr read when it runs */
	const void *dptr;
	unsigned char value[8];         /* ncclScalarHostImmediate: copied at creation */
};

/* a buffer passed to ncclCommRegister(): ibcoll needs no registration */
struct shim_reg {
	struct shim_reg *next;
	void *buf;
	size_t nbytes;
};

/*
 * struct ncclComm - what an ncclComm_t points to. @gid is equal on every
 * rank of one communicator and differs between communicators (a hash of the
 * unique id, or of the parent's gid, split number and color): groups order
 * their operations by it, so every rank issues them in the same order.
 */
struct ncclComm {
	uint32_t magic;                 /* SHIM_COMM_MAGIC while the handle is valid */
	ibc_comm_h ibc;                 /* NULL until initialization succeeded */
	int rank;
	int nranks;
	int cudev;                      /* CUDA device at creation; -1 in host mode */
	int blocking;                   /* ncclConfig_t.blocking (default 1) */
	uint64_t gid;
	uint32_t nsplits;               /* ncclCommSplit() calls made on this comm */
	int finalized;
	pthread_mutex_t lock;           /* @err, the task fields */
	pthread_cond_t cond;            /* signals @task_done */
	/* background initialization (nonblocking config, or inside a group) */
	int task_live;                  /* a detached init thread was started */
	int task_done;                  /* ... and has finished */
	ncclResult_t init_res;          /* ncclSuccess once usable */
	ncclUniqueId id;
	char err[SHIM_ERR_BYTES];       /* last error on it (quoted if its init failed) */
	struct shim_ev *evs;            /* streams used, for ncclCommFinalize() */
	int nevs;
	struct shim_reg *regs;          /* ncclCommRegister() handles */
	struct shim_premul *premul;     /* ncclRedOpCreatePreMulSum() operators */
	int npremul;
};

/*
 * struct shim_op - one collective or point-to-point call, as recorded by
 * the entry points and issued at once (outside a group) or by ncclGroupEnd().
 * @root is the root of a rooted collective or the peer of a send/receive.
 */
struct shim_op {
	int kind;                       /* enum shim_kind */
	const char *fn;                 /* NCCL name of the call, for messages */
	const void *sendbuf;
	void *recvbuf;
	size_t count;                   /* ELEMENTS, as in the NCCL call */
	ibc_dtype_t dtype;
	ibc_redop_t op;
	int root;
	struct ncclComm *comm;
	cudaStream_t stream;
	int has_premul;                 /* @op is IBC_SUM of inputs scaled by @premul */
	struct shim_premul premul;
};

/* ---- shim_err.c: results, error texts ------------------------------------ */

ncclResult_t shim_result(ibc_status_t st);
/* record "@fn: rank r of n: text" for @comm (may be NULL) and the process; returns @res */
ncclResult_t shim_err(struct ncclComm *comm, ncclResult_t res, const char *fn, const char *fmt,
		      ...) __attribute__((format(printf, 4, 5)));
/* @st from an ibcoll call: translate it, and record ibc_last_error() as the text */
ncclResult_t shim_ibc_err(struct ncclComm *comm, ibc_status_t st, const char *fn);

/* ---- shim_map.c: NCCL types onto ibcoll's --------------------------------- */

/* 0 and *@dtype_p, or -1 for a type ibcoll has no equivalent of */
int shim_map_dtype(int nccl_dtype, ibc_dtype_t *dtype_p);
/* 0 and *@op_p, or -1 for anything but the five built-in reductions */
int shim_map_op(int nccl_op, ibc_redop_t *op_p);
const char *shim_kind_name(int kind);
/* the 64-bit FNV-1a hash, for communicator ids */
uint64_t shim_hash(uint64_t h, const void *p, size_t n);
#define SHIM_HASH_SEED 0xcbf29ce484222325ull

/* ---- shim_premul.c: ncclRedOpCreatePreMulSum -------------------------------- */

/* the operator @nccl_op of @comm for a call on @nccl_dtype, copied to *@pm; or the error */
ncclResult_t shim_premul_find(struct ncclComm *comm, int nccl_op, int nccl_dtype,
			      struct shim_premul *pm, const char *fn);
/* host mode: @dst = @src * the scalar, for @count elements */
void shim_premul_host(const struct shim_premul *pm, void *dst, const void *src, size_t count);
/* issue @op (has_premul): scale into a temporary buffer, then the sum from it */
ncclResult_t shim_premul_issue(const struct shim_op *op);

/* ---- shim_order.c: the issue order of a group (pure) ---------------------- */

/* what the order of one deferred operation depends on */
struct shim_order_in {
	uint64_t gid;                   /* communicator id */
	int rank;                       /* this process's rank in it */
	int p2p;                        /* 0: collective, 1: send, 2: receive */
	int peer;                       /* send/receive peer */
};

/*
 * shim_order() - Fill @perm with the indexes of @n operations in the order
 * ncclGroupEnd() issues them: by communicator id; within one communicator
 * the collectives first in program order, then every message between
 * distinct ranks by (lower rank, higher rank, sender, index among the
 * group's messages from that sender to that receiver), then copies to
 * self. Every rank sorts its own operations by this one global order of
 * messages, so the smallest message not yet done is always next on both
 * of its ranks: executed one at a time, blocking, they cannot deadlock.
 * Returns 0, or -1 when out of memory.
 */
int shim_order(const struct shim_order_in *in, int n, int *perm);

/* ---- shim_group.c: groups ---------------------------------------------- */

int shim_in_group(void);
/* defer @op until the outermost ncclGroupEnd() */
ncclResult_t shim_group_add(const struct shim_op *op);
/* remember an error of a call inside the group: ncclGroupEnd() returns it */
void shim_group_fail(ncclResult_t res);
/* a communicator whose initialization ncclGroupEnd() must wait for */
ncclResult_t shim_group_add_init(struct ncclComm *comm);

/* ---- shim_coll.c: issuing ------------------------------------------------ */

/* 1 in host mode (no usable CUDA device), 0 in stream mode */
int shim_host_mode(void);
/* check @op's arguments; ncclSuccess or the error, recorded */
ncclResult_t shim_op_check(const struct shim_op *op);
/* issue @op now, in the process's mode */
ncclResult_t shim_issue(const struct shim_op *op);
/* a matched send to self and receive from self: copy on the stream (or now) */
ncclResult_t shim_issue_self(const struct shim_op *send, const struct shim_op *recv);

/* ---- shim_comm.c: communicator checks --------------------------------------- */

/*
 * shim_comm_ready() - @comm is a valid handle whose initialization has
 * finished successfully (waits for a background one) and that is not
 * finalized; else the error, recorded with @fn.
 */
ncclResult_t shim_comm_ready(struct ncclComm *comm, const char *fn);
/* wait for a background initialization of @comm; its result */
ncclResult_t shim_comm_wait_init(struct ncclComm *comm);
/*
 * shim_config_parse() - The fields of @config (may be NULL) that this
 * library acts on: *@blocking_p (default @dflt_blocking). ncclSuccess, or
 * ncclInvalidArgument (not made by NCCL_CONFIG_INITIALIZER, too small,
 * blocking neither 0 nor 1), recorded with @fn.
 */
ncclResult_t shim_config_parse(const ncclConfig_t *config, int dflt_blocking, int *blocking_p,
			       const char *fn);

/* ---- shim_cuda.c: the CUDA runtime calls ------------------------------------- */

int shim_cuda_device_count(void);
/* the current device, or -1 with the error recorded */
int shim_cuda_current_device(void);
/* make @dev current in this thread (a background init runs on the creator's device) */
void shim_cuda_set_device(int dev);
/*
 * ncclInvalidUsage while @stream is being captured into a CUDA graph:
 * ibcoll's stream operations are one-shot (a gate per call), so a replayed
 * graph would run a finished operation's host function again.
 */
ncclResult_t shim_cuda_no_capture(cudaStream_t stream, struct ncclComm *comm, const char *fn);
ncclResult_t shim_cuda_copy(void *dst, const void *src, size_t nbytes, cudaStream_t stream,
			    struct ncclComm *comm, const char *fn);
/*
 * Make @streams[0] wait for the work queued so far on @streams[1..n-1]
 * (shim_cuda_join), and those wait for what is then queued on @streams[0]
 * (shim_cuda_fork): a group on several streams runs as one sequence.
 */
ncclResult_t shim_cuda_join(cudaStream_t *streams, int n, const char *fn);
ncclResult_t shim_cuda_fork(cudaStream_t *streams, int n, const char *fn);
/* record that @comm's latest operation on @stream is queued there now */
ncclResult_t shim_cuda_mark(struct ncclComm *comm, cudaStream_t stream, const char *fn);
/* wait until every operation marked on @comm has run (ncclCommFinalize) */
ncclResult_t shim_cuda_drain(struct ncclComm *comm, const char *fn);
void shim_cuda_forget(struct ncclComm *comm);
ncclResult_t shim_cuda_alloc(void **ptr, size_t nbytes);
/* stream-ordered temporary buffer and the scaling kernel of a PreMulSum */
ncclResult_t shim_cuda_alloc_async(void **ptr, size_t nbytes, cudaStream_t stream,
				   struct ncclComm *comm, const char *fn);
ncclResult_t shim_cuda_free_async(void *ptr, cudaStream_t stream, struct ncclComm *comm,
				  const char *fn);
ncclResult_t shim_cuda_scale(void *dst, const void *src, size_t count, const struct shim_premul *pm,
			     cudaStream_t stream, struct ncclComm *comm, const char *fn);
ncclResult_t shim_cuda_free(void *ptr);

#endif /* IBC_NCCL_SHIM_H */
