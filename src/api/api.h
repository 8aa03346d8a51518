/* SPDX-License-Identifier: MIT */
/*
 * Layer api (src/api/, the top): the public entry points of
 * include/ibcoll.h and ibcoll_cuda.h, the communicator, the executor.
 *
 * api.h - the API layer's objects and its files' shared functions: the
 * communicator behind the public handle (ibc_comm_h), composed of one part
 * per layer (net, coll, tune, the CUDA staging state), each set up and torn
 * down by its layer's hooks, and its operations (ibc_request_h). The
 * lifecycle is comm.c and comm_env.c, the registry of live handles
 * registry.c, the executor exec.c, the public entry points api_coll.c.
 */
#ifndef IBC_API_H
#define IBC_API_H

#include <pthread.h>
#include <stdint.h>

#include "coll/coll.h"
#include "ibcoll.h"
#include "boot/bootstrap.h"
#include "net/net.h"

/* struct ibc_request - one operation, blocking or not (ibc_request_h) */
struct ibc_request {
	struct ibc_op op;       /* what it does, as the layers below see it */
	struct ibc_comm *comm;
	void *cuda_gate;        /* stream-ordered operation: its gate (cuda_stream.c) */
	int done;               /* atomic (release after status and errmsg) */
	int freed_by_wait;
	int counted;            /* counts toward IBC_MAX_REQUESTS until ibc_wait() */
	ibc_comm_h comm_h;      /* its communicator's handle (that one may be gone) */
	int in_group;           /* atomic: collected by ibc_group_start(), not issued yet */
	ibc_status_t status;
	char errmsg[1024];      /* ibc_last_error() text for the waiting thread (fill_req()
				 * clears what precedes it, and its first byte) */
	struct ibc_request *next;
};

struct ibc_tuner;
struct ibc_cuda_comm;

struct ibc_comm {
	/* the layers' parts */
	struct ibc_net net;                   /* peers, transports, errors (src/net) */
	struct ibc_coll coll;                 /* algorithms' state (src/coll) */
	struct ibc_tuner *tuner;              /* cost model and decisions (src/tune) */
	struct ibc_cuda_comm *cuda;           /* staging of device buffers, NULL until used */

	/* the executor: operations run in issue order */
	pthread_mutex_t lock;
	pthread_cond_t cond;       /* completion: waiters on requests, drain */
	pthread_cond_t work_cond;  /* the progress thread: work queued, or stop */
	struct ibc_request *q_head;
	struct ibc_request *q_tail;
	int nqueued;
	int noutstanding;                     /* atomic: nonblocking requests not yet waited */
	int running;                          /* an operation is executing */
	int stop;                             /* progress thread must exit */
	int use_thread;
	pthread_t thread;
	int thread_started;
	int ncallers;                         /* API calls inside the library (abort waits) */
	uint64_t split_seq;                   /* number of ibc_comm_split() calls */
	uint64_t agree_seq;                   /* number of ibc_comm_agree() and ibc_comm_shrink() calls */
	ibc_comm_h handle;                    /* what the user holds (registry.c) */
	unsigned fork_gen;                    /* the process's fork generation at creation */
	int creator_pid;

	/* ibc_group_start() .. ibc_group_end(): the p2p operations collected */
	int group_active;                     /* under lock */
	pthread_t group_thread;
	struct ibc_request *g_head;
	struct ibc_request *g_tail;
	int g_n;

	/* ibc_comm_register() handles not yet deregistered (mem.c), under lock */
	struct ibc_reg_handle *regs;
};

void ibc_comm_release_registrations(struct ibc_comm *comm);

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
ibc_status_t ibc_comm_progress_cpus(ibc_comm_h comm, char *buf, size_t len);

/* the tuner of @comm (tests and benchmarks: ibc_tuner_force(), ibc_tuner_model()) */
struct ibc_tuner *ibc_comm_tuner(ibc_comm_h comm);

/*
 * API entry/exit: the live communicator of handle @h in *@comm_p, the caller
 * counted (abort waits for callers); IBC_ERR_INVALID_ARG for NULL,
 * IBC_ERR_INVALID_USAGE (logged, naming @fn) for a destroyed, aborting or
 * inherited (fork) handle (registry.c); @fn NULL: nothing logged
 */
ibc_status_t ibc_comm_enter(ibc_comm_h h, const char *fn, struct ibc_comm **comm_p);
void ibc_comm_leave(struct ibc_comm *comm);

/* the handle of @comm (NULL for NULL), and the live communicator of @h or
 * NULL, uncounted (tests and benchmarks that reach inside) */
ibc_comm_h ibc_comm_handle(const struct ibc_comm *comm);
struct ibc_comm *ibc_comm_from_handle(ibc_comm_h h);

/* 1 when @comm belongs to the parent of this forked process */
int ibc_comm_forked(const struct ibc_comm *comm);

/* the number of fork() children this process descends through (0 in the original) */
unsigned ibc_registry_fork_gen(void);

/*
 * ibc_comm_submit() - run @req in issue order: @blocking waits for it (and runs
 * it in this thread when nothing is queued ahead); otherwise it is queued for
 * the progress thread (or for ibc_test/ibc_wait with IBC_PROGRESS_THREAD=0).
 */
ibc_status_t ibc_comm_submit(struct ibc_comm *comm, struct ibc_request *req, int blocking);

/*
 * ibc_api_start_gated() - api_coll.c's nonblocking entry for the
 * stream-ordered calls (cuda_stream.c): check the arguments as the public
 * call @fn does, create the request with @gate (the operation then waits
 * for its CUDA stream, ibc_cuda_gate_wait()) and queue it; *@req_p is
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

/* ---- registry.c ------------------------------------------------------------ */

/* add a communicator that is ready, giving it its handle; 0, or -1 when out of memory */
int ibc_registry_add(struct ibc_comm *comm);
void ibc_registry_remove(struct ibc_comm *comm);
/*
 * ibc_registry_take_for_abort() - for ibc_comm_abort(): 0 when @h was
 * live (in this process) and not being aborted by another thread; then its
 * communicator (*@comm_p) is marked aborting and removed, so that no new
 * caller enters. -1 otherwise.
 */
int ibc_registry_take_for_abort(ibc_comm_h h, struct ibc_comm **comm_p);

/* ---- comm.c, exec.c ---------------------------------------------------------- */

/* join the job of @uid as @rank of @nranks and build the communicator (comm.c) */
ibc_status_t ibc_comm_init_uid(ibc_comm_h *comm_p, int nranks,
			       const struct ibc_boot_uid *uid, int rank);

/* enter @comm for a request call: silent, 0 when entered, -1 for a dead handle */
int ibc_comm_enter_quiet(struct ibc_comm *comm);

/* the progress thread's body (exec.c); its argument is the communicator */
void *ibc_exec_thread(void *arg);

/* 1 while ibc_group_start() collects the operations of @comm (exec.c) */
int ibc_exec_in_group(struct ibc_comm *comm);

/*
 * look for stray messages when the communicator is idle, and check an eager
 * call's peers (@settle, destroy's: wait until each made it or left); its
 * status (exec.c)
 */
ibc_status_t ibc_exec_idle_check(struct ibc_comm *comm, int settle);

/* complete the requests of a group never ended with an error (ibc_comm_destroy) */
void ibc_exec_cancel_group(struct ibc_comm *comm);

/* complete every queued request with the communicator's error (ibc_comm_abort) */
void ibc_exec_cancel_queued(struct ibc_comm *comm);

#endif /* IBC_API_H */
