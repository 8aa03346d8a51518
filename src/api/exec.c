/* SPDX-License-Identifier: MIT */
/*
 * exec.c - the executor of a communicator: operations run one at a time in
 * issue order, in the progress thread (nonblocking calls) or in the
 * caller's thread (blocking calls with an empty queue, or
 * IBC_PROGRESS_THREAD=0); consecutive host sends and receives run together
 * as one batch (MPI's semantics for isend/irecv). Each operation is
 * announced to the coll layer, given the tuner's choice and run; device
 * buffers go through the CUDA staging wrapper (cuda_stage.c).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/cuda_stage.h"
#include "base/check.h"
#include "base/coll_kind.h"
#include "base/log.h"
#include "base/param.h"
#include "base/status.h"
#include "base/twait.h"
#include "base/util.h"
#include "coll/coll.h"
#include "cuda/cuda.h"
#include "net/net.h"
#include "tune/tune.h"

/* ------------------------------------------------------------------------ */
/* execution engine                                                         */
/* ------------------------------------------------------------------------ */

/* a host-memory send or receive: run concurrently with its queue neighbours */
static int req_is_host_p2p(const struct ibc_request *req)
{
	return req && ibc_coll_is_p2p(req->op.coll) && !req->op.cuda_flags &&
	       (req->op.count > 0 || req->op.tagged);
}

/* the queue head changed; comm->lock held */
static void comm_q_changed(struct ibc_comm *comm)
{
	__atomic_store_n(&comm->net.yield_p2p, req_is_host_p2p(comm->q_head), __ATOMIC_RELEASE);
}

/* an operation failed with @st: fail the communicator unless that happened already */
static void comm_op_failed(struct ibc_comm *comm, ibc_status_t st)
{
	/* an error not reported through ibc_net_fail() (logged where seen) */
	if (!__atomic_load_n(&comm->net.poisoned, __ATOMIC_ACQUIRE))
		ibc_net_fail(&comm->net, st, -1, "%s",
			      *ibc_last_error() ? ibc_log_strip_rank(ibc_last_error())
						: ibc_status_str(st));
}

/* publish @req's result (a failure reports the communicator's first error); comm->lock held */
static void comm_complete_locked(struct ibc_comm *comm, struct ibc_request *req, ibc_status_t st)
{
	if (st != IBC_OK) {
		st = comm->net.poison_st;
		snprintf(req->errmsg, sizeof(req->errmsg), "%s", comm->net.poison_msg);
	}
	req->status = st;
	__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static struct ibc_request *comm_pop(struct ibc_comm *comm);

#define P2P_BATCH_MAX 64

/*
 * Whether reqs[@i] must wait for an earlier send (or receive) of the same
 * peer that is not posted yet: messages between two ranks match in posting
 * order, and the batch's slots are not in issue order (a freed slot is
 * reused), nor is a connection's set-up, which may finish between two posts
 * of one pass: without this check a send still in its handshake could be
 * overtaken by the next send to the same peer.
 */
static int p2p_behind(struct ibc_request *const *reqs, struct ibc_treq *const *trp, int hi, int i)
{
	const struct ibc_op *o = &reqs[i]->op;
	int j;

	if (o->tagged && o->coll == IBC_COLL_RECV) {
		/*
		 * Tagged receives take their sender's sequence number when they
		 * match: until then one waits for every earlier receive that
		 * could take the same message (same tag, same source or any), as
		 * MPI's non-overtaking rule asks. Without this, a receive that
		 * found no envelope yet was overtaken by the next one, polled
		 * just after the envelope came (a mismatch of their counts).
		 */
		for (j = 0; j < hi; j++) {
			const struct ibc_op *e = reqs[j] ? &reqs[j]->op : NULL;

			if (j != i && e && !trp[j] && e->tagged && e->coll == IBC_COLL_RECV &&
			    e->tag == o->tag &&
			    (e->root == o->root || e->root == IBC_ANY_SOURCE || o->root == IBC_ANY_SOURCE) &&
			    (int32_t)(e->recv_order - o->recv_order) < 0)
				return 1;
		}
		return 0;
	}
	for (j = 0; j < hi; j++)
		if (j != i && reqs[j] && !trp[j] && reqs[j]->op.coll == reqs[i]->op.coll &&
		    reqs[j]->op.root == reqs[i]->op.root &&
		    reqs[j]->op.tagged == reqs[i]->op.tagged &&
		    (int32_t)(reqs[j]->op.seq - reqs[i]->op.seq) < 0)
			return 1;
	return 0;
}

/*
 * comm_p2p_batch() - run host send/receive @first together with every host
 * send/receive queued right behind it (and those queued while it runs, up
 * to 64 in flight): all are posted at once and each completes on its own.
 * MPI semantics for ibc_isend()/ibc_irecv(): two ranks that both post a
 * send to each other before the matching receive do not deadlock. The
 * batch ends when nothing is in flight; an operation of another kind at the
 * queue head waits for that (issue order between p2p and collectives).
 * Completes every request it ran, @first included.
 */
static void comm_p2p_batch(struct ibc_comm *comm, struct ibc_request *first)
{
	struct ibc_request *reqs[P2P_BATCH_MAX] = { NULL };
	struct ibc_treq tr[P2P_BATCH_MAX];
	struct ibc_treq *trp[P2P_BATCH_MAX] = { NULL };
	struct ibc_request *next = first;
	uint64_t conn_deadline = 0;
	uint64_t conn_probe = 0;                /* last stall probe of a connection wait */
	uint64_t last_ms = ibc_time_ms();       /* last post or completion */
	ibc_status_t st = IBC_OK;
	int nact = 0;
	int hi = 0;
	int i;

	for (;;) {
		const struct ibc_op *match_op = NULL;   /* a tagged operation not posted yet */
		int nconn = 0;
		int conn_peer = -1;

		if (next) {
			/* a free slot: posted transport requests never move */
			for (i = 0; reqs[i]; i++)
				;
			reqs[i] = next;
			trp[i] = NULL;
			hi = IBC_MAX(hi, i + 1);
			nact++;
			next = NULL;
		}
		/*
		 * Post what can be posted. Connection set-up is stepped, not
		 * waited for: a 3-rank ring of isends blocks in a cycle when
		 * each rank waits for its first peer's handshake before
		 * starting the next one.
		 */
		for (;;) {
			int posted = 0;

			nconn = 0;
			for (i = 0; i < hi; i++) {
				if (!reqs[i] || trp[i] || p2p_behind(reqs, trp, hi, i))
					continue;
				st = ibc_coll_p2p_post(&comm->coll, &reqs[i]->op, &tr[i], 1);
				if (st == IBC_INPROGRESS && reqs[i]->op.tagged) {
					/* a handshake or a matching envelope still to come */
					match_op = &reqs[i]->op;
					continue;
				}
				if (st == IBC_INPROGRESS) {
					nconn++;
					conn_peer = reqs[i]->op.root;
					continue;
				}
				if (st != IBC_OK)
					goto fail;
				trp[i] = &tr[i];
				posted++;
			}
			/* what waited behind a request posted just now goes next */
			if (!posted)
				break;
			last_ms = ibc_time_ms();
		}
		if (nact < P2P_BATCH_MAX) {
			pthread_mutex_lock(&comm->lock);
			if (req_is_host_p2p(comm->q_head) && !comm->net.poisoned)
				next = comm_pop(comm);
			pthread_mutex_unlock(&comm->lock);
			if (next)
				continue;
		}
		if (!nact)
			return;
		if (match_op && ibc_time_ms() - last_ms > (uint64_t)comm->net.timeout_ms) {
			char who[32];

			if (match_op->root == IBC_ANY_SOURCE)
				snprintf(who, sizeof(who), "from any rank");
			else
				snprintf(who, sizeof(who), "%s rank %d",
					 match_op->coll == IBC_COLL_SEND ? "to" : "from", match_op->root);
			st = ibc_net_fail_stalled(&comm->net, match_op->root, match_op->root,
						  "tagged %s of %zu %s with tag %d %s not matched for %lld ms (IBC_TIMEOUT_MS)",
						  match_op->coll == IBC_COLL_SEND ? "send" : "receive",
						  match_op->count, ibc_dtype_name(match_op->dtype),
						  match_op->tag, who, (long long)comm->net.timeout_ms);
			goto fail;
		}
		if (nconn || match_op) {
			/* handshakes under way: poll the posted transfers, then step again */
			uint64_t now = ibc_time_ms();

			if (!nconn) {
				conn_deadline = 0;
			} else if (!conn_deadline) {
				conn_deadline = now + (uint64_t)ibc_param_bootstrap_timeout_ms();
				conn_probe = now;
			} else if (now > conn_deadline) {
				st = ibc_net_fail(&comm->net, IBC_ERR_TIMEOUT, conn_peer,
						   "connection set-up did not complete within %lld ms",
						   (long long)ibc_param_bootstrap_timeout_ms());
				goto fail;
			} else if ((int64_t)(now - conn_probe) >= 500) {
				/*
				 * a peer that left the communicator never connects:
				 * its refused query says so (ibc_net_stall_probe()),
				 * after 500 ms of waiting and then every 2 s
				 */
				conn_probe = now + 1500;        /* next: 2 s from now */
				st = ibc_net_stall_probe(&comm->net, conn_peer, 2);
				if (st != IBC_OK)
					goto fail;
			}
			if (__atomic_load_n(&comm->net.aborting, __ATOMIC_ACQUIRE)) {
				st = IBC_ERR_REMOTE;
				goto fail;
			}
			st = ibc_net_progress(&comm->net);
			if (st != IBC_OK)
				goto fail;
			usleep(100);
		} else {
			conn_deadline = 0;
			st = nact < P2P_BATCH_MAX ? ibc_net_wait_p2p(&comm->net, trp, hi)
						  : ibc_net_waitany(&comm->net, trp, hi);
			if (st == IBC_INPROGRESS)
				continue;
			if (st != IBC_OK)
				goto fail;
		}
		pthread_mutex_lock(&comm->lock);
		for (i = 0; i < hi; i++) {
			if (!trp[i] || !ibc_treq_is_done(&tr[i]))
				continue;
			if (tr[i].status != IBC_OK) {
				st = tr[i].status;
				pthread_mutex_unlock(&comm->lock);
				goto fail;
			}
			comm_complete_locked(comm, reqs[i], IBC_OK);
			last_ms = ibc_time_ms();
			/*
			 * Its caller may free it now: error texts (comm->net.cur)
			 * must name a request still in the batch.
			 */
			pthread_mutex_lock(&comm->net.lock);
			if (comm->net.cur == &reqs[i]->op)
				comm->net.cur = NULL;
			pthread_mutex_unlock(&comm->net.lock);
			reqs[i] = NULL;
			trp[i] = NULL;
			nact--;
		}
		pthread_mutex_lock(&comm->net.lock);
		for (i = 0; i < hi && !comm->net.cur; i++)
			if (reqs[i])
				comm->net.cur = &reqs[i]->op;
		pthread_mutex_unlock(&comm->net.lock);
		pthread_cond_broadcast(&comm->cond);
		pthread_mutex_unlock(&comm->lock);
	}
fail:
	comm_op_failed(comm, st);
	pthread_mutex_lock(&comm->lock);
	for (i = 0; i < hi; i++)
		if (reqs[i])
			comm_complete_locked(comm, reqs[i], st);
	pthread_cond_broadcast(&comm->cond);
	pthread_mutex_unlock(&comm->lock);
}

/*
 * exec_host() - run @op, on host buffers, with its algorithm: tell a
 * single-host communicator's ranks what this one runs, ask the tuner for
 * all-reduce, broadcast and reduce (its first call is collective), run.
 */
static ibc_status_t exec_host(void *arg, struct ibc_op *op)
{
	struct ibc_comm *comm = arg;
	struct ibc_algo_choice c;
	uint64_t t0;

	memset(&c, 0, sizeof(c));
	/*
	 * Announced and checked even when empty: a peer that runs this
	 * collective with a count must see that this rank's count is 0 (or that
	 * it moved on) instead of waiting for its part (issue 20, case 2).
	 */
	ibc_coll_announce(&comm->coll, op);
	/*
	 * The stray check's rate limit reads the coarse clock (8 ns against 28
	 * for CLOCK_MONOTONIC here; it then runs at most once per scheduler
	 * tick, 1-4 ms), and only the calls that the re-timing samples
	 * (c.timed) read the fine clock, after the tuner's lookup (and any
	 * tuning step it ran, collective, milliseconds) and again at the end.
	 */
	IBC_CHECK(ibc_net_check_strays_at(&comm->net, 1000, ibc_time_coarse_ns()));
	if (ibc_op_is_empty(op))
		return IBC_OK;
	if (ibc_coll_is_tuned(op->coll)) {
		ibc_status_t st;

		IBC_CHECK(ibc_tuner_select(comm->tuner, op, &c));
		t0 = c.timed ? ibc_time_ns() : 0;
		st = ibc_coll_run(&comm->coll, op, &c);
		/* the re-timing's checkpoints compare this with its timing (tune_retime.c) */
		if (st == IBC_OK && c.timed)
			ibc_tuner_observe(comm->tuner, op, &c, t0);
		return st;
	}
	return ibc_coll_run(&comm->coll, op, &c);
}

/*
 * exec_run() - run @op: device buffers or stream order go through the CUDA
 * staging wrapper, which waits for the stream (@gate) and runs exec_host()
 * on pinned host copies, segment by segment; host buffers run directly.
 */
static ibc_status_t exec_run(struct ibc_comm *comm, struct ibc_op *op, void *gate)
{
	if (op->cuda_flags)
		return ibc_cuda_stage_run(&comm->cuda, &comm->net, op, gate, exec_host, comm);
	return exec_host(comm, op);
}

/* run one operation in the calling thread; records status and text */
static void comm_execute(struct ibc_comm *comm, struct ibc_request *req)
{
	ibc_status_t st = ibc_net_status(&comm->net);
	int batched = 0;

	ibc_net_log_rank(&comm->net);
	if (st == IBC_OK) {
		/*
		 * Published without net.lock: another thread's error text
		 * (ibc_net_fail()) reads cur under the lock with an acquire load
		 * and sees NULL or this live request, with its progress zeroed
		 * before. Clearing cur below takes the lock, so that no reader
		 * still formats the request when its caller frees it.
		 */
		__atomic_store_n(&comm->net.cur_bytes_done, 0, __ATOMIC_RELAXED);
		comm->net.cur_bytes_total = 0;
		__atomic_store_n(&comm->net.op_seq, req->op.seq, __ATOMIC_RELAXED);
		__atomic_store_n(&comm->net.cur, &req->op, __ATOMIC_RELEASE);
		__atomic_store_n(&comm->net.in_op, 1, __ATOMIC_RELEASE);
		ibc_log_set_last_error("");
		if (req_is_host_p2p(req)) {
			comm_p2p_batch(comm, req);
			batched = 1;
		} else {
			st = exec_run(comm, &req->op, req->cuda_gate);
			if (st != IBC_OK)
				comm_op_failed(comm, st);
			else
				ibc_net_op_done(&comm->net, &req->op);
		}
		pthread_mutex_lock(&comm->net.lock);
		comm->net.cur = NULL;
		ibc_net_wait_clear(&comm->net);
		__atomic_store_n(&comm->net.in_op, 0, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&comm->net.lock);
	}
	pthread_mutex_lock(&comm->lock);
	if (!batched)
		comm_complete_locked(comm, req, st);
	comm->running = 0;
	/*
	 * Completion wakes the waiters; the progress thread only when work is
	 * queued behind this operation. A blocking call run inline thus no
	 * longer wakes an idle progress thread (which cost 8 us of CPU a call).
	 */
	pthread_cond_broadcast(&comm->cond);
	if (comm->q_head)
		pthread_cond_signal(&comm->work_cond);
	pthread_mutex_unlock(&comm->lock);
}

/* pop the next queued request; comm->lock held */
static struct ibc_request *comm_pop(struct ibc_comm *comm)
{
	struct ibc_request *req = comm->q_head;

	if (req) {
		comm->q_head = req->next;
		if (!comm->q_head)
			comm->q_tail = NULL;
		comm->nqueued--;
		comm->running = 1;
		comm_q_changed(comm);
	}
	return req;
}

void *ibc_exec_thread(void *arg)
{
	struct ibc_comm *comm = arg;

	ibc_net_log_rank(&comm->net);
	pthread_mutex_lock(&comm->lock);
	for (;;) {
		struct ibc_request *req;

		while (!comm->stop && (!comm->q_head || comm->running))
			pthread_cond_wait(&comm->work_cond, &comm->lock);
		if (comm->stop && !comm->q_head)
			break;
		req = comm_pop(comm);
		pthread_mutex_unlock(&comm->lock);
		comm_execute(comm, req);
		pthread_mutex_lock(&comm->lock);
	}
	pthread_mutex_unlock(&comm->lock);
	return NULL;
}

/*
 * ibc_exec_idle_check() - when no operation runs or waits, take the
 * executor's place and look for stray messages (ibc_net_check_strays()):
 * a peer that called a collective this rank never calls is found without
 * another call of this rank; and finish the checks an eager call left
 * (ibc_coll_idle_check(): ranks that disagreed on a broadcast's root;
 * @settle, destroy's: waiting until every rank made that call or left).
 * Returns the communicator's status.
 */
ibc_status_t ibc_exec_idle_check(struct ibc_comm *comm, int settle)
{
	pthread_mutex_lock(&comm->lock);
	if (comm->running || comm->q_head || ibc_net_status(&comm->net) != IBC_OK) {
		pthread_mutex_unlock(&comm->lock);
		return ibc_net_status(&comm->net);
	}
	comm->running = 1;
	pthread_mutex_unlock(&comm->lock);
	ibc_net_log_rank(&comm->net);
	(void)ibc_net_check_strays(&comm->net, 0);
	/* an eager call's checks left for later (its errors fail the communicator) */
	if (ibc_net_status(&comm->net) == IBC_OK)
		(void)ibc_coll_idle_check(&comm->coll, settle);
	pthread_mutex_lock(&comm->lock);
	comm->running = 0;
	pthread_cond_broadcast(&comm->cond);
	if (comm->q_head)
		pthread_cond_signal(&comm->work_cond);
	pthread_mutex_unlock(&comm->lock);
	return ibc_net_status(&comm->net);
}

int ibc_exec_in_group(struct ibc_comm *comm)
{
	return __atomic_load_n(&comm->group_active, __ATOMIC_ACQUIRE);
}

ibc_status_t ibc_comm_submit(struct ibc_comm *comm, struct ibc_request *req, int blocking)
{
	pthread_mutex_lock(&comm->lock);
	if (comm->group_active) {
		/* a group collects the nonblocking p2p calls of its thread, and only them */
		if (blocking || !ibc_coll_is_p2p(req->op.coll) ||
		    !pthread_equal(comm->group_thread, pthread_self())) {
			pthread_mutex_unlock(&comm->lock);
			IBC_LOG_ERROR(COLL, "%s between ibc_group_start() and ibc_group_end()%s: only nonblocking sends and receives of the group's thread may be collected",
				      ibc_coll_name(req->op.coll),
				      pthread_equal(comm->group_thread, pthread_self()) ? ""
											 : " (from another thread)");
			return IBC_ERR_INVALID_USAGE;
		}
		req->next = NULL;
		__atomic_store_n(&req->in_group, 1, __ATOMIC_RELEASE);
		if (comm->g_tail)
			comm->g_tail->next = req;
		else
			comm->g_head = req;
		comm->g_tail = req;
		comm->g_n++;
		pthread_mutex_unlock(&comm->lock);
		return IBC_OK;
	}
	if (blocking && !comm->q_head && !comm->running) {
		/* nothing ahead of us: run in this thread, no hand-off latency */
		comm->running = 1;
		pthread_mutex_unlock(&comm->lock);
		comm_execute(comm, req);
		/* the operation's own status (it was IBC_OK even when the op failed) */
		if (req->status != IBC_OK)
			ibc_log_set_last_error(req->errmsg);
		return req->status;
	}
	req->next = NULL;
	if (comm->q_tail)
		comm->q_tail->next = req;
	else
		comm->q_head = req;
	comm->q_tail = req;
	comm->nqueued++;
	comm_q_changed(comm);
	pthread_cond_signal(&comm->work_cond);
	pthread_mutex_unlock(&comm->lock);
	if (blocking)
		return ibc_comm_wait_req(comm, req);
	return IBC_OK;
}

/*
 * ibc_comm_wait_req() - block until @req is done. Without the progress
 * thread the caller runs queued operations up to @req itself. With it, the
 * caller runs @req when it is next and nothing runs (a request waited on
 * right after its call, as torch's Work.wait() does: the hand-off to the
 * progress thread and back cost 13.6 us of a 8-byte all-reduce's 15 us);
 * otherwise it sleeps on the condition variable. Not stream-ordered
 * requests: their gate opens in CUDA's host-function thread, which must
 * not run other operations. Not sends and receives either: their batch
 * (comm_p2p_batch()) takes in the sends and receives queued behind and
 * runs until all are done, so a caller that ran it would wait for those
 * too, which may depend on what it does after this wait (MPI allows a
 * receive waited on while a later one is pending: tests/coll/vcoll_check
 * tagorder). Without the progress thread that remains so: there, a wait
 * runs the batch of everything in flight (IBC_PROGRESS_THREAD=0,
 * docs/design.md). Each operation is bounded by IBC_TIMEOUT_MS,
 * and the wait wakes at least every 100 ms to notice an abort.
 */
ibc_status_t ibc_comm_wait_req(struct ibc_comm *comm, struct ibc_request *req)
{
	pthread_mutex_lock(&comm->lock);
	while (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) {
		if (!comm->running && comm->q_head &&
		    (!comm->use_thread ||
		     (comm->q_head == req && !req->cuda_gate && !req_is_host_p2p(req)))) {
			struct ibc_request *next = comm_pop(comm);

			pthread_mutex_unlock(&comm->lock);
			comm_execute(comm, next);
			pthread_mutex_lock(&comm->lock);
			continue;
		}
		ibc_cond_wait_ms(&comm->cond, &comm->lock, 100);
	}
	pthread_mutex_unlock(&comm->lock);
	if (req->status != IBC_OK)
		ibc_log_set_last_error(req->errmsg);
	return req->status;
}

ibc_status_t ibc_comm_test_req(struct ibc_comm *comm, struct ibc_request *req, int *done_p)
{
	int done = __atomic_load_n(&req->done, __ATOMIC_ACQUIRE);

	if (!done && !comm->use_thread) {
		ibc_comm_wait_req(comm, req);
		done = 1;
	}
	*done_p = done;
	return IBC_OK;
}

/*
 * A request whose communicator is being aborted (or is gone): abort
 * completes every request within 900 ms, so wait for that, bounded, without
 * touching the communicator.
 */
static ibc_status_t request_wait_orphan(struct ibc_request *req)
{
	uint64_t deadline = ibc_time_ms() + 2000;

	while (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE) && ibc_time_ms() < deadline)
		usleep(1000);
	if (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) {
		IBC_LOG_ERROR(COLL, "request %p belongs to a communicator that was destroyed or aborted",
			      (void *)req);
		return IBC_ERR_INVALID_USAGE;
	}
	return IBC_OK;
}

ibc_status_t ibc_comm_request_wait(struct ibc_request *req)
{
	struct ibc_comm *comm = req->comm;
	ibc_status_t st;

	if (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) {
		if (ibc_comm_enter_quiet(comm) != 0) {
			if (ibc_comm_forked(comm)) {
				IBC_LOG_ERROR(COLL, "ibc_wait: request %p belongs to the parent of this forked process",
					      (void *)req);
				return IBC_ERR_INVALID_USAGE;
			}
			IBC_CHECK(request_wait_orphan(req));
		} else {
			st = ibc_comm_wait_req(comm, req);
			ibc_comm_leave(comm);
			return st;
		}
	}
	if (req->status != IBC_OK)
		ibc_log_set_last_error(req->errmsg);
	return req->status;
}

ibc_status_t ibc_comm_request_test(struct ibc_request *req, int *done_p)
{
	struct ibc_comm *comm = req->comm;
	ibc_status_t st;

	*done_p = __atomic_load_n(&req->done, __ATOMIC_ACQUIRE);
	if (*done_p || ibc_comm_enter_quiet(comm) != 0)
		return IBC_OK;
	st = ibc_comm_test_req(comm, req, done_p);
	ibc_comm_leave(comm);
	return st;
}

/* wait until every queued operation has run (bounded by their own timeouts) */
ibc_status_t ibc_comm_drain(struct ibc_comm *comm)
{
	ibc_status_t st = IBC_OK;

	pthread_mutex_lock(&comm->lock);
	while (comm->q_head || comm->running) {
		if (!comm->use_thread && !comm->running) {
			struct ibc_request *next = comm_pop(comm);

			pthread_mutex_unlock(&comm->lock);
			comm_execute(comm, next);
			pthread_mutex_lock(&comm->lock);
			if (next->status != IBC_OK && st == IBC_OK)
				st = next->status;
			continue;
		}
		/* operations are bounded by IBC_TIMEOUT_MS; wake up now and then anyway */
		ibc_cond_wait_ms(&comm->cond, &comm->lock, 100);
	}
	pthread_mutex_unlock(&comm->lock);
	return st;
}

/* a group never ended: its requests will never be issued (comm->lock held) */
static void group_cancel_locked(struct ibc_comm *comm)
{
	struct ibc_request *req;

	while ((req = comm->g_head)) {
		comm->g_head = req->next;
		req->status = comm->net.poisoned ? comm->net.poison_st : IBC_ERR_INVALID_USAGE;
		snprintf(req->errmsg, sizeof(req->errmsg), "%s",
			 comm->net.poisoned ? comm->net.poison_msg
					    : "the communicator was destroyed inside ibc_group_start() .. ibc_group_end()");
		__atomic_store_n(&req->in_group, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
	}
	comm->g_tail = NULL;
	comm->g_n = 0;
	comm->group_active = 0;
}

void ibc_exec_cancel_group(struct ibc_comm *comm)
{
	pthread_mutex_lock(&comm->lock);
	group_cancel_locked(comm);
	pthread_cond_broadcast(&comm->cond);
	pthread_mutex_unlock(&comm->lock);
}

void ibc_exec_cancel_queued(struct ibc_comm *comm)
{
	struct ibc_request *req;

	pthread_mutex_lock(&comm->lock);
	while ((req = comm->q_head)) {
		comm->q_head = req->next;
		req->status = comm->net.poison_st;
		snprintf(req->errmsg, sizeof(req->errmsg), "%s", comm->net.poison_msg);
		__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
	}
	comm->q_tail = NULL;
	comm->nqueued = 0;
	group_cancel_locked(comm);
	comm_q_changed(comm);
	pthread_cond_broadcast(&comm->cond);
	pthread_mutex_unlock(&comm->lock);
}

ibc_status_t ibc_group_start(ibc_comm_h h)
{
	struct ibc_comm *comm;
	ibc_status_t st = IBC_OK;

	IBC_CHECK(ibc_comm_enter(h, "ibc_group_start", &comm));
	pthread_mutex_lock(&comm->lock);
	if (comm->group_active) {
		IBC_LOG_ERROR(COLL, "ibc_group_start: a group is already open on this communicator (groups do not nest)");
		st = IBC_ERR_INVALID_USAGE;
	} else {
		comm->group_thread = pthread_self();
		__atomic_store_n(&comm->group_active, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&comm->lock);
	ibc_comm_leave(comm);
	return st;
}

ibc_status_t ibc_group_end(ibc_comm_h h)
{
	struct ibc_comm *comm;
	struct ibc_request *req;
	ibc_status_t st = IBC_OK;

	IBC_CHECK(ibc_comm_enter(h, "ibc_group_end", &comm));
	pthread_mutex_lock(&comm->lock);
	if (!comm->group_active || !pthread_equal(comm->group_thread, pthread_self())) {
		pthread_mutex_unlock(&comm->lock);
		IBC_LOG_ERROR(COLL, "ibc_group_end: no group was started%s",
			      comm->group_active ? " by this thread" : "");
		ibc_comm_leave(comm);
		return IBC_ERR_INVALID_USAGE;
	}
	/* the group's operations go to the queue together, in their order */
	for (req = comm->g_head; req; req = req->next)
		__atomic_store_n(&req->in_group, 0, __ATOMIC_RELEASE);
	if (comm->g_head) {
		if (comm->q_tail)
			comm->q_tail->next = comm->g_head;
		else
			comm->q_head = comm->g_head;
		comm->q_tail = comm->g_tail;
		comm->nqueued += comm->g_n;
		comm_q_changed(comm);
		pthread_cond_signal(&comm->work_cond);
	}
	comm->g_head = comm->g_tail = NULL;
	comm->g_n = 0;
	__atomic_store_n(&comm->group_active, 0, __ATOMIC_RELEASE);
	if (ibc_net_status(&comm->net) != IBC_OK) {
		IBC_LOG_DEBUG(COLL, "ibc_group_end on a failed communicator: %s", comm->net.poison_msg);
		st = IBC_ERR_INVALID_USAGE;
	}
	pthread_mutex_unlock(&comm->lock);
	ibc_comm_leave(comm);
	return st;
}
