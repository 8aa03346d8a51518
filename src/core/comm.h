/* SPDX-License-Identifier: MIT */
/*
 * comm.h - the communicator and its operations (requests), shared by the
 * API (comm.c, api_coll.c), the net layer (net.c), the algorithms and the
 * transports. Transports use only: rank/nranks/bs, ibc_comm_fail(),
 * ibc_comm_peer_host() and ibc_comm_timeout_ms().
 */
#ifndef IBC_COMM_H
#define IBC_COMM_H

#include <pthread.h>
#include <stdint.h>

#include "base/coll_kind.h"
#include "boot/bootstrap.h"
#include "ibcoll.h"
#include "transport/transport.h"

/* struct ibc_request - one operation, blocking or not (ibc_request_h) */
struct ibc_request {
	struct ibc_comm *comm;
	int coll;               /* enum ibc_coll_type */
	const void *sendbuf;
	void *recvbuf;
	size_t count;           /* ELEMENTS, as passed by the user */
	ibc_dtype_t dtype;
	ibc_redop_t op;
	int root;               /* root, or peer for send/recv; -1 */
	uint32_t seq;           /* collective seq, or per-pair p2p seq */
	uint8_t proto_flags;    /* IBC_DESC_F_LL when the tuner chose LL (coll.c) */
	/* device buffers and stream order (src/cuda/cuda.h), 0/NULL for host buffers */
	unsigned cuda_flags;    /* IBC_CUDA_REQ_*, set by ibc_cuda_req_classify() */
	int cuda_dev;           /* CUDA device of the device buffers */
	void *cuda_gate;        /* stream-ordered operation: its gate (cuda_stream.c) */
	int done;               /* atomic (release after status and errmsg) */
	int freed_by_wait;
	ibc_status_t status;
	char errmsg[1024];      /* ibc_last_error() text for the waiting thread */
	struct ibc_request *next;
};

/* struct ibc_peer - what the communicator keeps per peer rank */
struct ibc_peer {
	const struct ibc_transport_ops *ops;  /* chosen transport */
	struct ibc_tconn *conn;               /* NULL until connected */
	uint32_t p2p_send_seq;                /* ibc_send sequence to this peer */
	uint32_t p2p_recv_seq;
};

/* struct ibc_tinst - one transport in use by a communicator */
struct ibc_tinst {
	const struct ibc_transport_ops *ops;
	void *ctx;
	struct ibc_tenv env;                  /* what the transport knows of the communicator */
	struct ibc_comm *comm;                /* the env's callbacks' communicator */
};

#define IBC_MAX_TRANSPORTS 3

struct ibc_comm {
	int rank;
	int nranks;
	struct ibc_bootstrap *bs;
	struct ibc_peer *peers;               /* [nranks] */
	struct ibc_tinst tinst[IBC_MAX_TRANSPORTS];
	int ntinst;
	char transport_name[32];              /* "shm", "tcp", "shm+ib", ... */
	int64_t timeout_ms;                   /* IBC_TIMEOUT_MS */
	uint64_t spin_ns;                     /* IBC_SPIN_US, 0 when oversubscribed */
	int nlocal;                           /* ranks on this host, this one included */
	int local_rank;                       /* rank among this host's ranks */
	/* locality (src/topo): set before the progress thread starts */
	int gpu;                              /* topology index of this rank's GPU, -1: none */

	/* the operation being executed (for error messages) */
	const struct ibc_request *cur;
	uint64_t cur_bytes_total;             /* bytes this rank sends+receives in cur */
	uint64_t cur_bytes_done;
	int cur_tuning;                       /* cur runs the tuner's probe and race (atomic) */

	/*
	 * Wait-for state, read by the bootstrap service thread to answer
	 * peers' wait-for queries (ibc_comm_chase()): written by the thread
	 * executing operations, all atomic.
	 */
	int in_op;                            /* an operation is executing */
	uint32_t op_seq;                      /* its collective sequence number */
	int wait_peer;                        /* the rank it waits on now, -1: none */
	uint64_t wait_since_ms;               /* that wait's last progress (ibc_time_ms) */

	/* errors: the first fatal one poisons the communicator */
	int poisoned;                         /* atomic */
	ibc_status_t poison_st;
	char poison_msg[1024];
	int aborting;                         /* atomic: ibc_comm_abort() in progress */

	/* operations, executed in issue order */
	pthread_mutex_t lock;
	pthread_cond_t cond;       /* completion: waiters on requests, drain */
	pthread_cond_t work_cond;  /* the progress thread: work queued, or stop */
	struct ibc_request *q_head;
	struct ibc_request *q_tail;
	int nqueued;
	int head_p2p;                         /* atomic: q_head is a host send/recv */
	int running;                          /* an operation is executing */
	int stop;                             /* progress thread must exit */
	int use_thread;
	pthread_t thread;
	int thread_started;
	int ncallers;                         /* API calls inside the library (abort waits) */
	uint32_t coll_seq;                    /* next collective sequence number */
	uint64_t split_seq;                   /* number of ibc_comm_split() calls */

	/* scratch owned by the algorithms (coll/), reused across operations */
	void *scratch;
	size_t scratch_nbytes;
	struct ibc_tuner *tuner;              /* coll/select.c: cost model and decisions */
	struct ibc_shmar *shmar;              /* coll/shm_allreduce.c: the shared segment, NULL until used */
	/* staging state for device buffers (src/cuda/cuda_stage.c), NULL until used */
	struct ibc_cuda_comm *cuda;
};

/*
 * ibc_comm_fail() - record a fatal error on @comm: compose one ERROR line
 * naming the current operation and its sequence number, this rank, @peer and
 * its host (when >= 0), the transport and the bytes done so far, followed by
 * the cause in @fmt; poison the communicator (later calls return @st at
 * once). Only the first error is logged at ERROR; later ones at DEBUG.
 * Returns @st.
 */
ibc_status_t ibc_comm_fail(struct ibc_comm *comm, ibc_status_t st, int peer, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* the communicator's poison status, IBC_OK when healthy (cheap, atomic) */
static inline ibc_status_t ibc_comm_poison_status(const struct ibc_comm *comm)
{
	if (__builtin_expect(__atomic_load_n(&comm->poisoned, __ATOMIC_ACQUIRE), 0))
		return comm->poison_st;
	return IBC_OK;
}

const char *ibc_comm_peer_host(const struct ibc_comm *comm, int peer);

/**
 * ibc_comm_transport_parse() - Check an IBC_TRANSPORT value.
 * @name:  [in]  "auto", "shm", "tcp" or "ib".
 * @ops_p: [out] the forced transport, NULL for auto; may be NULL. Written
 *         only on success.
 * Return: 0, or -1 when @name is none of those (the caller uses auto).
 */
int ibc_comm_transport_parse(const char *name, const struct ibc_transport_ops **ops_p);

/*
 * ibc_comm_wait_publish() - this rank's executing operation now waits on
 * @peer, whose last progress was at @since_ms (ibc_time_ms()); peers'
 * wait-for queries see it. ibc_comm_wait_clear(): it waits on nobody.
 * Called by the waits of the executing thread (net.c, shm all-reduce).
 */
static inline void ibc_comm_wait_publish(struct ibc_comm *comm, int peer, uint64_t since_ms)
{
	__atomic_store_n(&comm->wait_since_ms, since_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&comm->wait_peer, peer, __ATOMIC_RELEASE);
}

static inline void ibc_comm_wait_clear(struct ibc_comm *comm)
{
	__atomic_store_n(&comm->wait_peer, -1, __ATOMIC_RELEASE);
}

/**
 * ibc_comm_chase() - Find the rank a timed-out wait ultimately waits on, by
 *                    following the wait-for chain through the peers'
 *                    bootstrap service threads.
 * @comm: [in]  communicator whose wait on @peer made no progress.
 * @peer: [in]  the rank this one waits on.
 * @why:  [out] the chain in words ("rank 0 waits on rank 1 (for 2950 ms);
 *              rank 1 (host h) does not answer ..."), NUL-terminated.
 * @len:  [in]  size of @why, bytes.
 *
 * Asks @peer what it is doing (ibc_bootstrap_query_wait()); while the answer
 * is "waiting on q" with q not yet seen, asks q, and so on. The chain ends at
 * the culprit: a rank that does not answer within min(max(IBC_TIMEOUT_MS/4,
 * 500), 2000) ms (stopped, hung, or gone), or one that is not waiting (no
 * operation in flight, or busy in a collective; asked 4 times 50 ms apart).
 * A rank that already failed, or a cycle of waits, gives no culprit. Without it, a rank that
 * times out can only name its direct peer, which, when one rank of a ring
 * or of a recursive-halving exchange stops, is often a survivor that waits
 * on the stopped rank (the idea of wait-for graphs in distributed deadlock
 * detection; Chandy, Misra, Haas, ACM TOCS 1983).
 * Blocking: one query per hop, the last one bounded as above. Any thread.
 * Return: the culprit's rank, or -1 (none found; @why says what was seen).
 */
int ibc_comm_chase(struct ibc_comm *comm, int peer, char *why, size_t len);

/*
 * ibc_comm_fail_stalled() - a wait on @waited made no progress in time: fail
 * @comm with IBC_ERR_TIMEOUT and the cause in @fmt, followed by the
 * wait-for chain from @waited (ibc_comm_chase()). When the chain ends at a
 * culprit, the error names it at once; otherwise it names @peer (-1: none)
 * after ibc_comm_fail()'s grace wait for another rank's report.
 * Return: IBC_ERR_TIMEOUT (or the communicator's earlier error).
 */
ibc_status_t ibc_comm_fail_stalled(struct ibc_comm *comm, int waited, int peer,
				   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* @text without the "rank R: " that ibc_last_error() puts in front of it */
const char *ibc_comm_strip_rank(const char *text);
static inline int64_t ibc_comm_timeout_ms(const struct ibc_comm *comm)
{
	return comm->timeout_ms;
}

/**
 * ibc_comm_progress_cpus() - The CPUs the progress thread of @comm may run
 * on, as a list "0-3,8" (debug query for tests and diagnostics).
 * @comm: [in]  communicator.
 * @buf:  [out] the list, NUL-terminated.
 * @len:  [in]  size of @buf, bytes.
 * Threading: safe while @comm lives.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL argument, or no progress
 *         thread: IBC_PROGRESS_THREAD=0); IBC_ERR_SYSTEM (the OS refused).
 */
ibc_status_t ibc_comm_progress_cpus(struct ibc_comm *comm, char *buf, size_t len);

/* API entry/exit: validate a live handle and count the caller (abort waits for callers) */
ibc_status_t ibc_comm_enter(struct ibc_comm *comm, const char *fn);
void ibc_comm_leave(struct ibc_comm *comm);

/*
 * ibc_comm_submit() - run @req in issue order: @blocking waits for it (and runs
 * it in this thread when nothing is queued ahead); otherwise it is queued for
 * the progress thread (or for ibc_test/ibc_wait with IBC_PROGRESS_THREAD=0).
 */
ibc_status_t ibc_comm_submit(struct ibc_comm *comm, struct ibc_request *req, int blocking);

/*
 * ibc_api_start_gated() - api_coll.c's nonblocking entry for the
 * stream-ordered calls (src/cuda/cuda_stream.c): check the arguments as the
 * public call @fn does, create the request with @gate (the operation then
 * waits for its CUDA stream, ibc_cuda_gate_wait()) and queue it; *@req_p is
 * written only on success. @coll is an enum ibc_coll_type; @root is the
 * root or peer, -1 when none.
 */
ibc_status_t ibc_api_start_gated(ibc_comm_h comm, int coll, const void *sendbuf, void *recvbuf,
				 size_t count, ibc_dtype_t dtype, ibc_redop_t op, int root,
				 void *gate, ibc_request_h *req_p, const char *fn);
ibc_status_t ibc_comm_wait_req(struct ibc_comm *comm, struct ibc_request *req);
ibc_status_t ibc_comm_test_req(struct ibc_comm *comm, struct ibc_request *req, int *done_p);

/*
 * ibc_comm_request_wait() / ibc_comm_request_test() - ibc_wait()/ibc_test()
 * on a request: a finished request answers without touching its
 * communicator, which may have been aborted since (abort completes every
 * outstanding request); otherwise the caller is counted in, so that abort
 * never frees the communicator under it.
 */
ibc_status_t ibc_comm_request_wait(struct ibc_request *req);
ibc_status_t ibc_comm_request_test(struct ibc_request *req, int *done_p);
/* wait until no operation is queued or running; first error of those it ran */
ibc_status_t ibc_comm_drain(struct ibc_comm *comm);

#endif /* IBC_COMM_H */
