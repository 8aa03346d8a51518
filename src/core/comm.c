/* SPDX-License-Identifier: MIT */
/*
 * comm.c - communicator lifecycle (create from a unique id or the
 * environment, split, destroy, abort), transport choice per peer, the
 * registry of live handles, error poisoning, and the execution engine:
 * operations run one at a time in issue order, in the progress thread
 * (nonblocking calls) or in the caller's thread (blocking calls with an
 * empty queue, or IBC_PROGRESS_THREAD=0). Relies on bootstrap.c for the
 * out-of-band network, net.c for connections and coll/ for algorithms.
 */
#include "config.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/shmseg.h"
#include "base/socket.h"
#include "base/status.h"
#include "base/util.h"
#include "boot/boot_wire.h"
#include "coll/coll.h"
#include "comm.h"
#include "cuda/cuda.h"
#include "net.h"
#include "topo/topo.h"

static void comm_q_changed(struct ibc_comm *comm);

/* ------------------------------------------------------------------------ */
/* registry of live communicators: a destroyed handle is detected, not used */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibc_comm **reg_comms;
static int reg_n;
static int reg_cap;

static int registry_add(struct ibc_comm *comm)
{
	pthread_mutex_lock(&reg_lock);
	if (reg_n == reg_cap) {
		int ncap = reg_cap ? 2 * reg_cap : 16;
		struct ibc_comm **nc = realloc(reg_comms, sizeof(*nc) * (size_t)ncap);

		if (!nc) {
			pthread_mutex_unlock(&reg_lock);
			return -1;
		}
		reg_comms = nc;
		reg_cap = ncap;
	}
	reg_comms[reg_n++] = comm;
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

static void registry_remove(struct ibc_comm *comm)
{
	int i;

	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < reg_n; i++) {
		if (reg_comms[i] == comm) {
			reg_comms[i] = reg_comms[--reg_n];
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
}

/*
 * ibc_comm_enter() - validate a handle at an API entry and count the caller
 * (ibc_comm_abort waits for callers to leave). IBC_ERR_INVALID_ARG for NULL,
 * IBC_ERR_INVALID_USAGE for a destroyed or aborting communicator.
 */
ibc_status_t ibc_comm_enter(struct ibc_comm *comm, const char *fn)
{
	int i;
	int found = 0;

	if (!comm) {
		IBC_LOG_ERROR(COLL, "%s: communicator is NULL", fn);
		return IBC_ERR_INVALID_ARG;
	}
	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < reg_n; i++) {
		if (reg_comms[i] == comm) {
			found = 1;
			break;
		}
	}
	if (found && !__atomic_load_n(&comm->aborting, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&comm->ncallers, 1, __ATOMIC_ACQ_REL);
	else
		found = 0;
	pthread_mutex_unlock(&reg_lock);
	if (!found) {
		IBC_LOG_ERROR(COLL, "%s: communicator %p was destroyed or aborted (or never created)", fn,
			      (void *)comm);
		return IBC_ERR_INVALID_USAGE;
	}
	ibc_log_set_rank(comm->rank);
	return IBC_OK;
}

void ibc_comm_leave(struct ibc_comm *comm)
{
	__atomic_sub_fetch(&comm->ncallers, 1, __ATOMIC_ACQ_REL);
}

/* ------------------------------------------------------------------------ */
/* errors                                                                   */
/* ------------------------------------------------------------------------ */

const char *ibc_comm_peer_host(const struct ibc_comm *comm, int peer)
{
	if (!comm->bs || peer < 0 || peer >= comm->nranks)
		return "?";
	return ibc_bootstrap_peer(comm->bs, peer)->host;
}

/* poison @comm with @st and @msg unless already poisoned; 1 if this call did it */
static int comm_poison(struct ibc_comm *comm, ibc_status_t st, const char *msg)
{
	int first = 0;

	pthread_mutex_lock(&comm->lock);
	if (!comm->poisoned) {
		comm->poison_st = st;
		snprintf(comm->poison_msg, sizeof(comm->poison_msg), "%s", msg);
		__atomic_store_n(&comm->poisoned, 1, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&comm->cond);
		first = 1;
	}
	pthread_mutex_unlock(&comm->lock);
	return first;
}

const char *ibc_comm_strip_rank(const char *text)
{
	const char *p = text;

	if (strncmp(p, "rank ", 5))
		return text;
	p += 5;
	while (*p >= '0' && *p <= '9')
		p++;
	return p[0] == ':' && p[1] == ' ' ? p + 2 : text;
}

/*
 * The body of ibc_comm_fail(). FAIL_LOCAL in @flags: the error was detected
 * by this rank (then it is broadcast to the peers, and a lost connection or
 * a timeout first waits for the liveness verdict, unless FAIL_NO_GRACE: the
 * culprit is known); without: it came from the bootstrap (a peer's failure
 * reported by the hub), which every rank already hears.
 */
enum { FAIL_LOCAL = 1, FAIL_NO_GRACE = 2 };

static ibc_status_t comm_fail_v(struct ibc_comm *comm, ibc_status_t st, int peer, int flags,
				const char *fmt, va_list ap)
{
	char cause[768];
	char ctx[256] = "";
	char body[1000];
	char msg[1024];
	const struct ibc_request *cur;
	int local = flags & FAIL_LOCAL;
	uint64_t grace = 0;     /* ms to wait for a first error from elsewhere */
	uint64_t deadline;

	vsnprintf(cause, sizeof(cause), fmt, ap);
	if (local && __atomic_load_n(&comm->aborting, __ATOMIC_ACQUIRE)) {
		/*
		 * ibc_comm_abort() on this rank set @aborting, which makes blocked
		 * waits give up, and poisons the communicator a moment later. A
		 * wait that gives up in between must not become the first error:
		 * it would be broadcast as "error on rank R: remote peer failed"
		 * ahead of the abort notice (seen in 4 of 80 test_abort runs under
		 * load). Wait (bounded) for the abort's own poison.
		 */
		grace = 1000;
	} else if (local && !(flags & FAIL_NO_GRACE) &&
		   ((st == IBC_ERR_REMOTE && peer >= 0) || st == IBC_ERR_TIMEOUT) && comm->bs) {
		/*
		 * A connection to @peer broke, or a wait timed out. If another rank
		 * died or stalled first, @peer may just be a survivor that already
		 * gave up, or is itself waiting on the culprit (a ring stalls all
		 * around when one rank stops): give the liveness hub and the peer's
		 * own report a moment to name the rank that failed first (it usually
		 * takes < 10 ms).
		 */
		grace = (uint64_t)ibc_param_failure_grace_ms();
		/*
		 * A timeout: the rank this one waits on may itself be waiting on
		 * the culprit, and its own timeout fires as much later as its last
		 * progress was (seen with 4 ranks, one stopped: up to ~1 s). Wait
		 * up to half the timeout, at most 2 s, for its report.
		 */
		if (st == IBC_ERR_TIMEOUT)
			grace = IBC_MAX(grace, IBC_MIN((uint64_t)comm->timeout_ms / 2, 2000));
	}
	/* until the communicator is poisoned (by that report, or the abort), at most @grace ms */
	deadline = ibc_time_ms() + grace;
	while (grace && !__atomic_load_n(&comm->poisoned, __ATOMIC_ACQUIRE) && ibc_time_ms() < deadline)
		usleep(1000);
	pthread_mutex_lock(&comm->lock);
	cur = comm->cur;
	if (cur) {
		int reduces = cur->coll == IBC_COLL_ALLREDUCE || cur->coll == IBC_COLL_REDUCE ||
			      cur->coll == IBC_COLL_REDUCE_SCATTER;
		int has_root = cur->coll == IBC_COLL_BROADCAST || cur->coll == IBC_COLL_REDUCE;
		int has_peer = cur->coll == IBC_COLL_SEND || cur->coll == IBC_COLL_RECV;

		char who[32] = "";
		char moved[64];

		if (has_root || has_peer)
			snprintf(who, sizeof(who), " %s %d", has_root ? "root" : "peer", cur->root);
		/* the probe's and race's traffic is not the operation's (src/coll/select.c) */
		if (__atomic_load_n(&comm->cur_tuning, __ATOMIC_RELAXED))
			snprintf(moved, sizeof(moved), "in the tuner's start-up measurements");
		else
			snprintf(moved, sizeof(moved), "%llu bytes moved so far",
				 (unsigned long long)__atomic_load_n(&comm->cur_bytes_done,
								     __ATOMIC_RELAXED));
		snprintf(ctx, sizeof(ctx), "%s #%u (count %zu %s%s%s%s, %s) ",
			 ibc_coll_name(cur->coll), cur->seq, cur->count, ibc_dtype_name(cur->dtype),
			 reduces ? " " : "", reduces ? ibc_redop_name(cur->op) : "", who, moved);
	}
	pthread_mutex_unlock(&comm->lock);
	if (peer >= 0)
		snprintf(body, sizeof(body), "%son %s: peer rank %d (host %s): %s", ctx,
			 comm->transport_name, peer, ibc_comm_peer_host(comm, peer), cause);
	else
		snprintf(body, sizeof(body), "%son %s: %s", ctx, comm->transport_name, cause);
	snprintf(msg, sizeof(msg), "rank %d: %s", comm->rank, body);
	if (!comm_poison(comm, st, msg)) {
		IBC_LOG_DEBUG(COLL, "after the first error: %s", body);
		return comm->poison_st;
	}
	IBC_LOG_ERROR(COLL, "%s", body);
	ibc_log_set_last_error(msg);
	if (local && comm->bs)
		ibc_bootstrap_notify_error(comm->bs, st, msg);
	return st;
}

ibc_status_t ibc_comm_fail(struct ibc_comm *comm, ibc_status_t st, int peer, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	st = comm_fail_v(comm, st, peer, FAIL_LOCAL, fmt, ap);
	va_end(ap);
	return st;
}

/* ibc_comm_fail() for a timeout whose culprit @peer is known: no grace wait */
static ibc_status_t comm_fail_found(struct ibc_comm *comm, ibc_status_t st, int peer,
				    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static ibc_status_t comm_fail_found(struct ibc_comm *comm, ibc_status_t st, int peer,
				    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	st = comm_fail_v(comm, st, peer, FAIL_LOCAL | FAIL_NO_GRACE, fmt, ap);
	va_end(ap);
	return st;
}

/* poison without telling the peers (they learnt it from the bootstrap, or will) */
static ibc_status_t comm_fail_quiet(struct ibc_comm *comm, ibc_status_t st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static ibc_status_t comm_fail_quiet(struct ibc_comm *comm, ibc_status_t st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	st = comm_fail_v(comm, st, -1, 0, fmt, ap);
	va_end(ap);
	return st;
}

/* bootstrap service thread: a peer died, aborted, failed or stopped answering */
static void comm_on_boot_error(void *arg, ibc_status_t st, int peer, const char *why)
{
	struct ibc_comm *comm = arg;

	ibc_log_set_rank(comm->rank);
	comm_fail_quiet(comm, st, "%s", why);
	(void)peer;
}

/* ------------------------------------------------------------------------ */
/* wait-for chains                                                          */
/* ------------------------------------------------------------------------ */

/* bootstrap service thread: a peer asks what this rank is doing (never blocks) */
static void comm_wait_state(void *arg, struct ibc_boot_waitstate *ws)
{
	struct ibc_comm *comm = arg;
	int peer = __atomic_load_n(&comm->wait_peer, __ATOMIC_ACQUIRE);
	uint64_t since = __atomic_load_n(&comm->wait_since_ms, __ATOMIC_RELAXED);
	uint64_t now = ibc_time_ms();

	ws->peer = -1;
	ws->idle_ms = 0;
	ws->seq = __atomic_load_n(&comm->op_seq, __ATOMIC_RELAXED);
	if (__atomic_load_n(&comm->poisoned, __ATOMIC_ACQUIRE)) {
		ws->state = IBC_BOOT_WAIT_FAILED;
	} else if (peer >= 0 && peer < comm->nranks) {
		ws->state = IBC_BOOT_WAIT_PEER;
		ws->peer = peer;
		ws->idle_ms = now > since ? (uint32_t)IBC_MIN(now - since, UINT32_MAX) : 0;
	} else if (__atomic_load_n(&comm->in_op, __ATOMIC_ACQUIRE)) {
		ws->state = IBC_BOOT_WAIT_BUSY;
	} else {
		/* idle: @seq is the number of collectives issued so far */
		ws->state = IBC_BOOT_WAIT_IDLE;
		ws->seq = __atomic_load_n(&comm->coll_seq, __ATOMIC_RELAXED);
	}
}

int ibc_comm_chase(struct ibc_comm *comm, int peer, char *why, size_t len)
{
	int64_t max_ms = IBC_MIN(IBC_MAX(comm->timeout_ms / 4, 500), 2000);
	size_t off = 0;
	uint8_t *seen;
	int culprit = -1;
	int hops;
	int cur = peer;

#define CHASE_SAY(...)                                                                         \
	do {                                                                                   \
		if (off < len)                                                                 \
			off += (size_t)snprintf(why + off, len - off, __VA_ARGS__);            \
	} while (0)

	if (len)
		why[0] = '\0';
	if (!comm->bs || peer < 0 || peer >= comm->nranks || peer == comm->rank)
		return -1;
	seen = ibc_calloc((size_t)comm->nranks, 1, "wait-for chain");
	if (!seen)
		return -1;
	seen[comm->rank] = 1;
	for (hops = 0; hops < comm->nranks; hops++) {
		struct ibc_boot_waitstate ws;
		ibc_status_t st;

		int tries;

		/* aborted, or another rank's report arrived: that error stands */
		if (__atomic_load_n(&comm->aborting, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&comm->poisoned, __ATOMIC_ACQUIRE))
			break;
		seen[cur] = 1;
		st = ibc_bootstrap_query_wait(comm->bs, cur, max_ms, &ws);
		/*
		 * Not waiting: perhaps caught between two waits (reducing a chunk,
		 * entering the next step). Ask again a few times, 50 ms apart,
		 * before calling it the culprit.
		 */
		for (tries = 0; tries < 3 && st == IBC_OK &&
				(ws.state == IBC_BOOT_WAIT_BUSY || ws.state == IBC_BOOT_WAIT_IDLE);
		     tries++) {
			usleep(50000);
			st = ibc_bootstrap_query_wait(comm->bs, cur, max_ms, &ws);
		}
		if (st != IBC_OK) {
			CHASE_SAY("%srank %d %s", off ? "; " : "", cur,
				  st == IBC_ERR_TIMEOUT ? "does not answer: stopped, hung or starved of CPU"
							: "cannot be reached: its process is gone");
			culprit = cur;
			break;
		}
		if (ws.state == IBC_BOOT_WAIT_FAILED) {
			CHASE_SAY("%srank %d has failed already (its report names the cause)",
				  off ? "; " : "", cur);
			break;
		}
		if (ws.state == IBC_BOOT_WAIT_IDLE) {
			CHASE_SAY("%srank %d is in no ibcoll operation (it has not made the matching call; collectives it issued: %u)",
				  off ? "; " : "", cur, ws.seq);
			culprit = cur;
			break;
		}
		if (ws.state == IBC_BOOT_WAIT_BUSY) {
			CHASE_SAY("%srank %d is busy in collective #%u, waiting on nobody (slow)",
				  off ? "; " : "", cur, ws.seq);
			culprit = cur;
			break;
		}
		CHASE_SAY("%srank %d waits on rank %d (no progress for %u ms)", off ? "; " : "", cur,
			  ws.peer, ws.idle_ms);
		if (seen[ws.peer]) {
			CHASE_SAY(": a cycle of waits");
			break;
		}
		cur = ws.peer;
	}
#undef CHASE_SAY
	ibc_free(seen);
	return culprit;
}

ibc_status_t ibc_comm_fail_stalled(struct ibc_comm *comm, int waited, int peer,
				   const char *fmt, ...)
{
	char cause[768];
	char chain[512];
	va_list ap;
	int culprit;

	va_start(ap, fmt);
	vsnprintf(cause, sizeof(cause), fmt, ap);
	va_end(ap);
	culprit = ibc_comm_chase(comm, waited, chain, sizeof(chain));
	if (culprit >= 0)
		return comm_fail_found(comm, IBC_ERR_TIMEOUT, culprit, "%s; wait-for chain: %s",
				       cause, chain);
	return ibc_comm_fail(comm, IBC_ERR_TIMEOUT, peer, "%s%s%s", cause,
			     chain[0] ? "; wait-for chain: " : "", chain);
}

/* ------------------------------------------------------------------------ */
/* creation                                                                 */
/* ------------------------------------------------------------------------ */

static ibc_status_t comm_alloc(struct ibc_comm **comm_p)
{
	struct ibc_comm *comm = ibc_calloc(1, sizeof(*comm), "communicator");

	if (!comm)
		return IBC_ERR_NO_MEMORY;
	pthread_mutex_init(&comm->lock, NULL);
	pthread_cond_init(&comm->cond, NULL);
	pthread_cond_init(&comm->work_cond, NULL);
	comm->timeout_ms = ibc_param_timeout_ms();
	comm->use_thread = (int)ibc_param_progress_thread();
	comm->gpu = -1;
	comm->wait_peer = -1;
	snprintf(comm->transport_name, sizeof(comm->transport_name), "bootstrap");
	*comm_p = comm;
	return IBC_OK;
}

static void comm_free(struct ibc_comm *comm)
{
	pthread_mutex_destroy(&comm->lock);
	pthread_cond_destroy(&comm->cond);
	pthread_cond_destroy(&comm->work_cond);
	ibc_free(comm->peers);
	ibc_free(comm->scratch);
	ibc_tuner_destroy(comm->tuner);
	ibc_shmar_destroy(comm->shmar);
	ibc_cuda_comm_destroy(comm);
	ibc_free(comm);
}

static void *progress_thread(void *arg);

/* ------------------------------------------------------------------------ */
/* the transports' environment (struct ibc_tenv)                            */
/* ------------------------------------------------------------------------ */

/* a transport's out-of-band tag on the bootstrap: its own range, by transport id */
static uint32_t tenv_tag(const struct ibc_tinst *ti, uint32_t tag)
{
	return ((uint32_t)ti->ops->id << 12) | (tag & IBC_TENV_TAG_MAX);
}

static int tenv_same_host(void *arg, int peer)
{
	struct ibc_tinst *ti = arg;

	return ibc_bootstrap_same_host(ti->comm->bs, peer);
}

static const char *tenv_peer_host(void *arg, int peer)
{
	struct ibc_tinst *ti = arg;

	return ibc_comm_peer_host(ti->comm, peer);
}

static ibc_status_t tenv_oob_send(void *arg, int peer, uint32_t tag, const void *buf,
				  size_t nbytes)
{
	struct ibc_tinst *ti = arg;

	return ibc_bootstrap_send(ti->comm->bs, peer, tenv_tag(ti, tag), buf, nbytes);
}

static ibc_status_t tenv_oob_try_recv(void *arg, int peer, uint32_t tag, void *buf,
				      size_t nbytes, int *got_p)
{
	struct ibc_tinst *ti = arg;

	return ibc_bootstrap_try_recv(ti->comm->bs, peer, tenv_tag(ti, tag), buf, nbytes, got_p);
}

static ibc_status_t tenv_oob_connect_stream(void *arg, int peer, uint32_t tag, int *fd_p)
{
	struct ibc_tinst *ti = arg;

	return ibc_bootstrap_connect_stream(ti->comm->bs, peer, tenv_tag(ti, tag), fd_p);
}

static ibc_status_t tenv_oob_try_accept_stream(void *arg, int peer, uint32_t tag, int *fd_p)
{
	struct ibc_tinst *ti = arg;

	return ibc_bootstrap_try_accept_stream(ti->comm->bs, peer, tenv_tag(ti, tag), fd_p);
}

static ibc_status_t tenv_fail(void *arg, ibc_status_t st, int peer, const char *text)
{
	struct ibc_tinst *ti = arg;

	return ibc_comm_fail(ti->comm, st, peer, "%s", text);
}

static ibc_status_t tenv_status(void *arg)
{
	struct ibc_tinst *ti = arg;

	return ibc_comm_poison_status(ti->comm);
}

static const struct ibc_tenv_ops tenv_ops = {
	.same_host = tenv_same_host,
	.peer_host = tenv_peer_host,
	.oob_send = tenv_oob_send,
	.oob_try_recv = tenv_oob_try_recv,
	.oob_connect_stream = tenv_oob_connect_stream,
	.oob_try_accept_stream = tenv_oob_try_accept_stream,
	.fail = tenv_fail,
	.status = tenv_status,
};

/* add @ops to the communicator's transports (init its context) unless present */
static ibc_status_t comm_tinst_get(struct ibc_comm *comm, const struct ibc_transport_ops *ops,
				   int *ok_p)
{
	struct ibc_tinst *ti;
	ibc_status_t st;
	int i;

	for (i = 0; i < comm->ntinst; i++) {
		if (comm->tinst[i].ops == ops) {
			*ok_p = 1;
			return IBC_OK;
		}
	}
	*ok_p = 0;
	ti = &comm->tinst[comm->ntinst];
	memset(ti, 0, sizeof(*ti));
	ti->ops = ops;
	ti->comm = comm;
	ti->env.rank = comm->rank;
	ti->env.nranks = comm->nranks;
	ti->env.nlocal = comm->nlocal;
	ti->env.local_rank = comm->local_rank;
	ti->env.gpu = comm->gpu;
	ti->env.timeout_ms = comm->timeout_ms;
	ti->env.connect_timeout_ms = ibc_param_bootstrap_timeout_ms();
	memcpy(ti->env.comm_id, ibc_bootstrap_comm_id(comm->bs), IBC_TENV_COMM_ID_BYTES);
	ti->env.ops = &tenv_ops;
	ti->env.arg = ti;
	st = ops->init(&ti->env, &ti->ctx);
	if (st == IBC_ERR_UNSUPPORTED) {
		ti->ops = NULL;
		return IBC_OK;
	}
	if (st != IBC_OK) {
		ti->ops = NULL;
		return st;
	}
	comm->ntinst++;
	*ok_p = 1;
	return IBC_OK;
}

enum { CAN_IB = 1 };

int ibc_comm_transport_parse(const char *name, const struct ibc_transport_ops **ops_p)
{
	const struct ibc_transport_ops *ops = NULL;

	if (!strcmp(name, "tcp"))
		ops = &ibc_sock_ops;
	else if (!strcmp(name, "shm"))
		ops = &ibc_shm_ops;
	else if (!strcmp(name, "ib"))
		ops = &ibc_ib_ops;
	else if (strcmp(name, "auto"))
		return -1;
	if (ops_p)
		*ops_p = ops;
	return 0;
}

/*
 * Choose the transport of every peer. Forced (IBC_TRANSPORT): everyone uses
 * it. Auto: shm with ranks of this host, else ib when both ends have a
 * usable device (agreed through an allgather of capabilities), else tcp.
 */
static ibc_status_t comm_choose_transports(struct ibc_comm *comm)
{
	const char *want = ibc_param_transport();
	const struct ibc_transport_ops *forced = NULL;
	uint8_t *caps = NULL;
	int any_remote = 0;
	int have_shm = 0;
	int have_tcp = 0;
	int have_ib = 0;
	int ok;
	int i;
	ibc_status_t st = IBC_OK;

	if (ibc_comm_transport_parse(want, &forced) != 0)
		IBC_LOG_WARN(ENV, "IBC_TRANSPORT=%s is not auto, shm, tcp or ib; using auto", want);

	if (forced) {
		if (forced->caps & IBC_TCAP_LOCAL) {
			for (i = 0; i < comm->nranks; i++) {
				if (!ibc_bootstrap_same_host(comm->bs, i)) {
					IBC_LOG_ERROR(INIT, "IBC_TRANSPORT=shm but rank %d runs on host %s, not this host",
						      i, ibc_comm_peer_host(comm, i));
					return IBC_ERR_INVALID_USAGE;
				}
			}
		}
		IBC_CHECK(comm_tinst_get(comm, forced, &ok));
		if (!ok) {
			IBC_LOG_ERROR(INIT, "IBC_TRANSPORT=%s but that transport is %s", want,
				      forced == &ibc_ib_ops ? "not usable here (no active verbs device, or built without verbs)"
							    : "not usable");
			return IBC_ERR_UNSUPPORTED;
		}
		for (i = 0; i < comm->nranks; i++)
			comm->peers[i].ops = forced;
		snprintf(comm->transport_name, sizeof(comm->transport_name), "%s", forced->name);
		return IBC_OK;
	}

	for (i = 0; i < comm->nranks; i++)
		if (i != comm->rank && !ibc_bootstrap_same_host(comm->bs, i))
			any_remote = 1;
	if (any_remote) {
		/* agree on ib per pair: both ends must have a usable device */
		caps = ibc_calloc((size_t)comm->nranks, 1, "transport capabilities");
		if (!caps)
			return IBC_ERR_NO_MEMORY;
		IBC_CHECK_GOTO(comm_tinst_get(comm, &ibc_ib_ops, &ok), st, out);
		caps[comm->rank] = ok ? CAN_IB : 0;
		IBC_CHECK_GOTO(ibc_bootstrap_allgather(comm->bs, caps, 1), st, out);
	}
	for (i = 0; i < comm->nranks; i++) {
		const struct ibc_transport_ops *ops;

		if (ibc_bootstrap_same_host(comm->bs, i)) {
			ops = &ibc_shm_ops;
		} else if ((caps[i] & CAN_IB) && (caps[comm->rank] & CAN_IB)) {
			ops = &ibc_ib_ops;
		} else {
			ops = &ibc_sock_ops;
		}
		if (i == comm->rank)
			ops = NULL;
		if (ops) {
			IBC_CHECK_GOTO(comm_tinst_get(comm, ops, &ok), st, out);
			if (!ok) {
				IBC_LOG_ERROR(INIT, "transport %s needed for rank %d is not usable",
					      ops->name, i);
				st = IBC_ERR_UNSUPPORTED;
				goto out;
			}
		}
		comm->peers[i].ops = ops;
		have_shm |= ops == &ibc_shm_ops;
		have_tcp |= ops == &ibc_sock_ops;
		have_ib |= ops == &ibc_ib_ops;
	}
	snprintf(comm->transport_name, sizeof(comm->transport_name), "%s%s%s%s%s",
		 have_shm ? "shm" : "", have_shm && (have_ib || have_tcp) ? "+" : "",
		 have_ib ? "ib" : "", have_ib && have_tcp ? "+" : "", have_tcp ? "tcp" : "");
	if (!have_shm && !have_tcp && !have_ib)
		snprintf(comm->transport_name, sizeof(comm->transport_name), "self");
out:
	ibc_free(caps);
	return st;
}

/* this host's ranks (same host name and boot id) and this rank's index among them */
static void comm_count_local(struct ibc_comm *comm)
{
	int i;

	comm->nlocal = 0;
	comm->local_rank = 0;
	for (i = 0; i < comm->nranks; i++) {
		comm->nlocal += ibc_bootstrap_same_host(comm->bs, i);
		if (i < comm->rank && ibc_bootstrap_same_host(comm->bs, i))
			comm->local_rank++;
	}
	ibc_shm_note_nlocal(comm->nlocal);
}

/*
 * Busy-polling helps only when every rank has a core: with more ranks on
 * this host than cores available to the process, waiting ranks yield at
 * once so that the peer they wait for can run.
 */
static void comm_choose_spin(struct ibc_comm *comm)
{
	cpu_set_t set;
	int ncpu = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		ncpu = CPU_COUNT(&set);
	comm->spin_ns = (uint64_t)ibc_param_spin_us() * 1000;
	if (ncpu > 0 && comm->nlocal > ncpu && !ibc_param_from_env(IBC_PARAM_IDX_SPIN_US)) {
		comm->spin_ns = 0;
		if (comm->rank == 0)
			IBC_LOG_INFO(INIT, "%d ranks on this host share %d cores: waits yield instead of spinning",
				     comm->nlocal, ncpu);
	}
}

/*
 * The rank's GPU (ibc_topo_rank_gpu(): IBC_TOPO_GPU, else the current CUDA
 * device), before the transports start: the verbs transport picks the NIC
 * nearest it and the progress thread is bound near it. -1 when none.
 */
static void comm_find_gpu(struct ibc_comm *comm)
{
	char why[IBC_TOPO_WHY_LEN];
	struct ibc_topo *topo;

	comm->gpu = -1;
	if (ibc_topo_shared(&topo) != IBC_OK ||
	    ibc_topo_rank_gpu(topo, &comm->gpu, why, sizeof(why)) != IBC_OK)
		return;
	IBC_LOG_INFO(TOPO, "rank's GPU: %s", why);
}

/*
 * Decide where the progress thread runs (ibc_topo_progress_plan(): near the
 * NIC of the verbs transport when a peer uses it, else near the rank's GPU,
 * else on the local rank's share of the NUMA nodes) and log it at INFO.
 * Never fails: without a topology or a plan the thread stays unbound (WARN).
 * Return: 1 and @set filled when the thread is to be bound, else 0.
 */
static int comm_plan_progress(struct ibc_comm *comm, cpu_set_t *set)
{
	char cpus[IBC_TOPO_CPULIST_LEN];
	char why[IBC_TOPO_WHY_LEN];
	struct ibc_topo *topo;
	const char *nic = NULL;
	ibc_status_t st;
	int bind = 0;
	int i;

	/* the device of a transport that opened one and that some peer uses */
	for (i = 0; i < comm->ntinst && !nic; i++) {
		const struct ibc_tinst *ti = &comm->tinst[i];
		int p;

		for (p = 0; p < comm->nranks; p++)
			if (comm->peers[p].ops == ti->ops && *ti->ops->device(ti->ctx))
				nic = ti->ops->device(ti->ctx);
	}
	st = ibc_topo_shared(&topo);
	if (st == IBC_OK)
		st = ibc_topo_progress_plan(topo, nic, comm->gpu, comm->local_rank, comm->nlocal,
					    &bind, cpus, sizeof(cpus), why, sizeof(why));
	if (st != IBC_OK) {
		IBC_LOG_WARN(TOPO, "progress thread: not bound, the topology gave no plan (%s)",
			     ibc_status_str(st));
		return 0;
	}
	if (bind && ibc_topo_cpulist_parse(cpus, set) != 0) {
		IBC_LOG_WARN(TOPO, "progress thread: not bound, cannot use CPU list \"%s\"", cpus);
		return 0;
	}
	IBC_LOG_INFO(TOPO, "progress thread: %s", why);
	return bind;
}

/* start the progress thread, bound as comm_plan_progress() decides */
static ibc_status_t comm_start_progress(struct ibc_comm *comm)
{
	pthread_attr_t attr;
	cpu_set_t set;
	int bind = comm_plan_progress(comm, &set);
	int ret = -1;

	if (bind && pthread_attr_init(&attr) == 0) {
		ret = pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
		if (ret == 0)
			ret = pthread_create(&comm->thread, &attr, progress_thread, comm);
		pthread_attr_destroy(&attr);
		if (ret)
			IBC_LOG_WARN(TOPO, "progress thread: binding refused (%s); running unbound",
				     strerror(ret));
	}
	if (ret)
		ret = pthread_create(&comm->thread, NULL, progress_thread, comm);
	if (ret) {
		IBC_LOG_ERROR(INIT, "cannot start the progress thread: %s", strerror(ret));
		return IBC_ERR_SYSTEM;
	}
	comm->thread_started = 1;
	return IBC_OK;
}

ibc_status_t ibc_comm_progress_cpus(struct ibc_comm *comm, char *buf, size_t len)
{
	cpu_set_t set;
	size_t off = 0;
	int first = -1;
	int c;

	if (!comm || !buf || !len || !comm->thread_started)
		return IBC_ERR_INVALID_ARG;
	if (pthread_getaffinity_np(comm->thread, sizeof(set), &set) != 0)
		return IBC_ERR_SYSTEM;
	buf[0] = '\0';
	for (c = 0; c <= CPU_SETSIZE; c++) {
		int in = c < CPU_SETSIZE && CPU_ISSET(c, &set);

		if (in && first < 0)
			first = c;
		if (!in && first >= 0 && off < len) {
			if (c - 1 > first)
				off += (size_t)snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "",
							first, c - 1);
			else
				off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? "," : "",
							first);
			first = -1;
		}
	}
	return IBC_OK;
}

/* build the communicator around its ready bootstrap */
static ibc_status_t comm_setup(struct ibc_comm *comm)
{
	ibc_status_t st;

	comm->rank = ibc_bootstrap_rank(comm->bs);
	comm->nranks = ibc_bootstrap_nranks(comm->bs);
	ibc_bootstrap_set_wait_fn(comm->bs, comm_wait_state);
	ibc_log_set_rank(comm->rank);
	comm->peers = ibc_calloc((size_t)comm->nranks, sizeof(*comm->peers), "peer table");
	if (!comm->peers)
		return IBC_ERR_NO_MEMORY;
	comm_find_gpu(comm);
	comm_count_local(comm);
	IBC_CHECK(comm_choose_transports(comm));
	comm_choose_spin(comm);
	IBC_CHECK(ibc_shmar_init(comm));
	if (comm->use_thread)
		IBC_CHECK(comm_start_progress(comm));
	if (registry_add(comm) != 0) {
		IBC_LOG_ERROR(INIT, "out of memory registering the communicator");
		st = IBC_ERR_NO_MEMORY;
		return st;
	}
	if (comm->rank == 0)
		IBC_LOG_INFO(INIT, "communicator of %d ranks ready: transport %s, progress %s, timeout %lld ms",
			     comm->nranks, comm->transport_name,
			     comm->use_thread ? "thread" : "in ibc_test/ibc_wait",
			     (long long)comm->timeout_ms);
	return IBC_OK;
}

/*
 * Stop the progress thread, tell the peers that this rank leaves (the
 * reason first, so that they do not blame the connections that drop next),
 * close the connections and the bootstrap. Bounded: the progress thread
 * has nothing queued (destroy drained, abort completed the queue).
 */
static void comm_teardown(struct ibc_comm *comm, int abort)
{
	int i;

	if (comm->thread_started) {
		pthread_mutex_lock(&comm->lock);
		comm->stop = 1;
		pthread_cond_signal(&comm->work_cond);
		pthread_mutex_unlock(&comm->lock);
		pthread_join(comm->thread, NULL);
		comm->thread_started = 0;
	}
	if (comm->bs)
		ibc_bootstrap_announce_leave(comm->bs, abort, comm->poisoned ? comm->poison_msg : "");
	for (i = 0; comm->peers && i < comm->nranks; i++) {
		if (comm->peers[i].conn) {
			comm->peers[i].ops->disconnect(comm->peers[i].conn);
			comm->peers[i].conn = NULL;
		}
	}
	for (i = comm->ntinst - 1; i >= 0; i--)
		comm->tinst[i].ops->fini(comm->tinst[i].ctx);
	comm->ntinst = 0;
	ibc_bootstrap_destroy(comm->bs, abort);
	comm->bs = NULL;
}

ibc_status_t ibc_get_unique_id(ibc_unique_id_t *id)
{
	if (!id) {
		IBC_LOG_ERROR(INIT, "ibc_get_unique_id: id is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	ibc_fault_configure();
	return ibc_bootstrap_root_start(NULL, 0, NULL, id);
}

static ibc_status_t comm_init_uid(struct ibc_comm **comm_p, int nranks,
				  const struct ibc_boot_uid *uid, int rank)
{
	struct ibc_comm *comm;
	ibc_status_t st;

	ibc_log_set_rank(rank);
	st = comm_alloc(&comm);
	if (st != IBC_OK) {
		ibc_bootstrap_report_join_failure(uid, rank, nranks, st);
		return st;
	}
	IBC_CHECK_GOTO(ibc_bootstrap_create(uid, rank, nranks, comm_on_boot_error, comm, &comm->bs),
		       st, err_free);
	IBC_CHECK_GOTO(comm_setup(comm), st, err_teardown);
	*comm_p = comm;
	return IBC_OK;
err_teardown:
	comm_teardown(comm, 1);
err_free:
	comm_free(comm);
	return st;
}

ibc_status_t ibc_comm_init_rank(ibc_comm_h *comm_p, int nranks, const ibc_unique_id_t *id, int rank)
{
	struct ibc_boot_uid uid;

	ibc_fault_configure();
	if (!comm_p || !id) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_rank: %s is NULL", comm_p ? "id" : "comm_p");
		return IBC_ERR_INVALID_ARG;
	}
	if (nranks < 1 || nranks > IBC_BOOT_MAX_RANKS || rank < 0 || rank >= nranks) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_rank: rank %d of %d ranks is out of range", rank,
			      nranks);
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_boot_uid_unpack(id, &uid));
	return comm_init_uid(comm_p, nranks, &uid, rank);
}

static int env_int(const char *name, int *val_p)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return 0;
	v = strtol(s, &end, 10);
	if (*end || v < 0 || v > IBC_BOOT_MAX_RANKS)
		return -1;
	*val_p = (int)v;
	return 1;
}

/* rank and size from IBC_*, Open MPI, PMI, PMIx or Slurm, in that order */
static ibc_status_t env_rank_size(int *rank_p, int *nranks_p, const char **src_p)
{
	static const struct {
		const char *rank;
		const char *size;
	} srcs[] = {
		{ "IBC_RANK", "IBC_NRANKS" },
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMI_RANK", "PMI_SIZE" },
		{ "PMIX_RANK", "PMI_SIZE" },
		{ "PMIX_RANK", "IBC_NRANKS" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
	};
	size_t i;

	for (i = 0; i < IBC_ARRAY_SIZE(srcs); i++) {
		int r = -1;
		int n = -1;
		int hr = env_int(srcs[i].rank, &r);
		int hn = env_int(srcs[i].size, &n);

		if (hr < 0 || hn < 0) {
			IBC_LOG_ERROR(INIT, "ibc_comm_init_env: %s='%s' / %s='%s' are not numbers",
				      srcs[i].rank, getenv(srcs[i].rank) ? getenv(srcs[i].rank) : "",
				      srcs[i].size, getenv(srcs[i].size) ? getenv(srcs[i].size) : "");
			return IBC_ERR_INVALID_ARG;
		}
		if (hr > 0 && hn > 0) {
			*rank_p = r;
			*nranks_p = n;
			*src_p = srcs[i].rank;
			return IBC_OK;
		}
	}
	IBC_LOG_ERROR(INIT, "ibc_comm_init_env: no rank/size in the environment: set IBC_RANK and IBC_NRANKS, or launch with mpirun, srun or a PMI launcher");
	return IBC_ERR_INVALID_ARG;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* IBC_SECRET (32 hex digits), else derived from IBC_ROOT and the job id */
static ibc_status_t env_secret(const char *root, uint8_t secret[IBC_BOOT_SECRET_BYTES], int rank)
{
	const char *hex = ibc_param_secret();
	static const char *const jobvars[] = {
		"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE",
		"SLURM_JOB_ID", "SLURM_JOBID", "IBC_JOB_ID",
	};
	char buf[512];
	size_t i;

	if (hex && *hex) {
		if (strlen(hex) != 2 * IBC_BOOT_SECRET_BYTES) {
			IBC_LOG_ERROR(INIT, "IBC_SECRET must be %d hex digits (got %zu characters)",
				      2 * IBC_BOOT_SECRET_BYTES, strlen(hex));
			return IBC_ERR_INVALID_ARG;
		}
		for (i = 0; i < IBC_BOOT_SECRET_BYTES; i++) {
			int hi = hexval(hex[2 * i]);
			int lo = hexval(hex[2 * i + 1]);

			if (hi < 0 || lo < 0) {
				IBC_LOG_ERROR(INIT, "IBC_SECRET has a non-hex character");
				return IBC_ERR_INVALID_ARG;
			}
			secret[i] = (uint8_t)(hi << 4 | lo);
		}
		return IBC_OK;
	}
	snprintf(buf, sizeof(buf), "ibcoll-env-secret|%s", root);
	for (i = 0; i < IBC_ARRAY_SIZE(jobvars); i++) {
		const char *v = getenv(jobvars[i]);

		if (v && *v) {
			size_t n = strlen(buf);

			snprintf(buf + n, sizeof(buf) - n, "|%s=%s", jobvars[i], v);
			break;
		}
	}
	ibc_boot_derive_id(buf, strlen(buf), secret);
	if (rank == 0)
		IBC_LOG_INFO(INIT, "IBC_SECRET not set: bootstrap secret derived from IBC_ROOT and the job id; this guards against mistakes (other jobs, stray connections), not against local attackers");
	return IBC_OK;
}

ibc_status_t ibc_comm_init_env(ibc_comm_h *comm_p)
{
	struct ibc_boot_uid uid;
	union ibc_sockaddr root_addr;
	ibc_unique_id_t id;
	const char *root = ibc_param_root();
	const char *src = NULL;
	int family = strcmp(ibc_param_socket_family(), "AF_INET6") ? AF_INET : AF_INET6;
	int rank = -1;
	int nranks = -1;
	uint8_t secret[IBC_BOOT_SECRET_BYTES];

	ibc_fault_configure();
	if (!comm_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_env: comm_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(env_rank_size(&rank, &nranks, &src));
	if (nranks < 1 || rank >= nranks) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_env: rank %d of %d ranks (from %s) is out of range",
			      rank, nranks, src);
		return IBC_ERR_INVALID_ARG;
	}
	if (!root || !*root) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_env: IBC_ROOT is not set: give host:port of rank 0's host, e.g. mpirun -x IBC_ROOT=node0:29500");
		return IBC_ERR_INVALID_ARG;
	}
	ibc_log_set_rank(rank);
	IBC_CHECK(env_secret(root, secret, rank));
	IBC_CHECK(ibc_sock_parse_hostport(root, family, &root_addr));
	if (rank == 0) {
		char host[256];
		const char *colon = strrchr(root, ':');
		size_t hlen = (size_t)(colon - root);

		/* rank 0 runs the root on IBC_ROOT's port, bound to that address */
		if (root[0] == '[') {
			hlen -= 2;
			memcpy(host, root + 1, hlen);
		} else {
			memcpy(host, root, hlen);
		}
		host[hlen] = '\0';
		IBC_CHECK(ibc_bootstrap_root_start(host, ibc_sock_addr_port(&root_addr), secret, &id));
	}
	memset(&uid, 0, sizeof(uid));
	uid.family = root_addr.sa.sa_family;
	uid.port = ibc_sock_addr_port(&root_addr);
	if (uid.family == AF_INET6)
		memcpy(uid.addr, &root_addr.sin6.sin6_addr, 16);
	else
		memcpy(uid.addr, &root_addr.sin.sin_addr, 4);
	memcpy(uid.secret, secret, sizeof(secret));
	IBC_LOG_INFO(INIT, "joining as rank %d of %d (from %s) through root %s", rank, nranks, src,
		     root);
	return comm_init_uid(comm_p, nranks, &uid, rank);
}

ibc_status_t ibc_comm_split(ibc_comm_h comm, int color, int key, ibc_comm_h *newcomm_p)
{
	struct ibc_comm *nc = NULL;
	ibc_status_t st;

	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_split"));
	if (!newcomm_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_split: newcomm_p is NULL");
		st = IBC_ERR_INVALID_ARG;
		goto out;
	}
	st = ibc_comm_poison_status(comm);
	if (st != IBC_OK) {
		IBC_LOG_ERROR(INIT, "ibc_comm_split on a failed communicator: %s", comm->poison_msg);
		goto out;
	}
	/* no operation may be in flight: the bootstrap is used directly */
	IBC_CHECK_GOTO(ibc_comm_drain(comm), st, out);
	IBC_CHECK_GOTO(comm_alloc(&nc), st, out);
	IBC_CHECK_GOTO(ibc_bootstrap_split(comm->bs, color, key, comm->split_seq++,
					   comm_on_boot_error, nc, &nc->bs),
		       st, err_free);
	if (!nc->bs) {
		comm_free(nc);
		*newcomm_p = NULL;
		st = IBC_OK;
		goto out;
	}
	IBC_CHECK_GOTO(comm_setup(nc), st, err_teardown);
	*newcomm_p = nc;
	ibc_log_set_rank(comm->rank);
	goto out;
err_teardown:
	comm_teardown(nc, 1);
err_free:
	comm_free(nc);
out:
	ibc_comm_leave(comm);
	return st;
}

ibc_status_t ibc_comm_destroy(ibc_comm_h comm)
{
	ibc_status_t st;

	if (!comm)
		return IBC_OK;
	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_destroy"));
	st = ibc_comm_drain(comm);
	registry_remove(comm);
	ibc_comm_leave(comm);
	comm_teardown(comm, 0);
	comm_free(comm);
	ibc_log_set_rank(-1);
	return st;
}

/*
 * ibc_comm_abort() - see ibcoll.h. Order: refuse new callers (registry),
 * poison, cancel the bootstrap's blocking calls, tell the peers, complete
 * every queued request, wait (bounded) for threads inside the library to
 * leave, then free. Threads blocked in a wait notice the poison within one
 * wait slice (<= 100 ms; transports' waits are shorter).
 */
ibc_status_t ibc_comm_abort(ibc_comm_h comm)
{
	struct ibc_request *req;
	char reason[sizeof(comm->poison_msg)];
	uint64_t deadline = ibc_time_ms() + 900;
	int i;
	int found = 0;

	if (!comm)
		return IBC_OK;
	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < reg_n; i++)
		if (reg_comms[i] == comm)
			found = 1;
	if (found && __atomic_exchange_n(&comm->aborting, 1, __ATOMIC_ACQ_REL))
		found = 0; /* another thread is aborting it */
	pthread_mutex_unlock(&reg_lock);
	if (!found) {
		IBC_LOG_ERROR(INIT, "ibc_comm_abort: communicator %p was destroyed, is being aborted, or was never created",
			      (void *)comm);
		return IBC_ERR_INVALID_USAGE;
	}
	registry_remove(comm);
	ibc_log_set_rank(comm->rank);
	pthread_mutex_lock(&comm->lock);
	snprintf(reason, sizeof(reason), "%s", comm->poisoned ? comm->poison_msg : "");
	pthread_mutex_unlock(&comm->lock);
	comm_fail_quiet(comm, IBC_ERR_REMOTE, "communicator aborted by ibc_comm_abort() on rank %d",
			comm->rank);
	ibc_bootstrap_cancel(comm->bs);
	ibc_bootstrap_announce_leave(comm->bs, 1, reason);
	/* queued operations will never run: complete them with the poison status */
	pthread_mutex_lock(&comm->lock);
	while ((req = comm->q_head)) {
		comm->q_head = req->next;
		req->status = comm->poison_st;
		snprintf(req->errmsg, sizeof(req->errmsg), "%s", comm->poison_msg);
		__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
	}
	comm->q_tail = NULL;
	comm->nqueued = 0;
	comm_q_changed(comm);
	pthread_cond_broadcast(&comm->cond);
	pthread_mutex_unlock(&comm->lock);
	while (__atomic_load_n(&comm->ncallers, __ATOMIC_ACQUIRE) > 0 && ibc_time_ms() < deadline)
		usleep(1000);
	pthread_mutex_lock(&comm->lock);
	while (comm->running && ibc_time_ms() < deadline) {
		pthread_mutex_unlock(&comm->lock);
		usleep(1000);
		pthread_mutex_lock(&comm->lock);
	}
	i = comm->running;
	pthread_mutex_unlock(&comm->lock);
	if (i || __atomic_load_n(&comm->ncallers, __ATOMIC_ACQUIRE) > 0) {
		/* never free under a thread that is still inside: leak instead */
		IBC_LOG_WARN(INIT, "ibc_comm_abort: a thread is still inside the library after 900 ms; the communicator is left allocated");
		return IBC_OK;
	}
	comm_teardown(comm, 1);
	comm_free(comm);
	ibc_log_set_rank(-1);
	return IBC_OK;
}

ibc_status_t ibc_comm_rank(ibc_comm_h comm, int *rank_p)
{
	if (!comm || !rank_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_rank: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	/* a destroyed handle is an error, not a read of freed memory */
	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_rank"));
	*rank_p = comm->rank;
	ibc_comm_leave(comm);
	return IBC_OK;
}

ibc_status_t ibc_comm_size(ibc_comm_h comm, int *size_p)
{
	if (!comm || !size_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_size: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_size"));
	*size_p = comm->nranks;
	ibc_comm_leave(comm);
	return IBC_OK;
}

/*
 * ibc_comm_transport() - see ibcoll.h: the name is a static string, valid
 * after the communicator is destroyed (comm->transport_name is not), so it
 * is looked up among every name comm_choose_transports() can compose.
 */
ibc_status_t ibc_comm_transport(ibc_comm_h comm, const char **name_p)
{
	static const char *const names[] = {
		"shm", "tcp", "ib", "shm+ib", "shm+tcp", "ib+tcp", "shm+ib+tcp", "self", "bootstrap",
	};
	size_t i;

	if (!comm || !name_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_transport: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_transport"));
	*name_p = "unknown";
	for (i = 0; i < IBC_ARRAY_SIZE(names); i++) {
		if (!strcmp(comm->transport_name, names[i])) {
			*name_p = names[i];
			break;
		}
	}
	ibc_comm_leave(comm);
	return IBC_OK;
}

ibc_status_t ibc_comm_get_async_error(ibc_comm_h comm, ibc_status_t *st_p)
{
	if (!comm || !st_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_get_async_error: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_get_async_error"));
	*st_p = ibc_comm_poison_status(comm);
	if (*st_p != IBC_OK)
		ibc_log_set_last_error(comm->poison_msg);
	ibc_comm_leave(comm);
	return IBC_OK;
}

/* ------------------------------------------------------------------------ */
/* execution engine                                                         */
/* ------------------------------------------------------------------------ */

/* a host-memory send or receive: run concurrently with its queue neighbours */
static int req_is_host_p2p(const struct ibc_request *req)
{
	return req && (req->coll == IBC_COLL_SEND || req->coll == IBC_COLL_RECV) &&
	       !req->cuda_flags && req->count > 0;
}

/* the queue head changed; comm->lock held */
static void comm_q_changed(struct ibc_comm *comm)
{
	__atomic_store_n(&comm->head_p2p, req_is_host_p2p(comm->q_head), __ATOMIC_RELEASE);
}

/* an operation failed with @st: fail the communicator unless that happened already */
static void comm_op_failed(struct ibc_comm *comm, ibc_status_t st)
{
	/* an error not reported through ibc_comm_fail() (logged where seen) */
	if (!__atomic_load_n(&comm->poisoned, __ATOMIC_ACQUIRE))
		ibc_comm_fail(comm, st, -1, "%s",
			      *ibc_last_error() ? ibc_comm_strip_rank(ibc_last_error())
						: ibc_status_str(st));
}

/* publish @req's result (a failure reports the communicator's first error); comm->lock held */
static void comm_complete_locked(struct ibc_comm *comm, struct ibc_request *req, ibc_status_t st)
{
	if (st != IBC_OK) {
		st = comm->poison_st;
		snprintf(req->errmsg, sizeof(req->errmsg), "%s", comm->poison_msg);
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
 * of one pass. Found by the ASan run of test_p2p.sh under load: rank 1's
 * send #0 to rank 0 got IBC_INPROGRESS (handshake), its send #1 then found
 * the connection up and went first, and rank 0 reported mismatched calls.
 */
static int p2p_behind(struct ibc_request *const *reqs, struct ibc_treq *const *trp, int hi, int i)
{
	int j;

	for (j = 0; j < hi; j++)
		if (j != i && reqs[j] && !trp[j] && reqs[j]->coll == reqs[i]->coll &&
		    reqs[j]->root == reqs[i]->root && (int32_t)(reqs[j]->seq - reqs[i]->seq) < 0)
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
	ibc_status_t st = IBC_OK;
	int nact = 0;
	int hi = 0;
	int i;

	for (;;) {
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
				st = ibc_coll_p2p_post(comm, reqs[i], &tr[i], 1);
				if (st == IBC_INPROGRESS) {
					nconn++;
					conn_peer = reqs[i]->root;
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
		}
		if (nact < P2P_BATCH_MAX) {
			pthread_mutex_lock(&comm->lock);
			if (req_is_host_p2p(comm->q_head) && !comm->poisoned)
				next = comm_pop(comm);
			pthread_mutex_unlock(&comm->lock);
			if (next)
				continue;
		}
		if (!nact)
			return;
		if (nconn) {
			/* handshakes under way: poll the posted transfers, then step again */
			uint64_t now = ibc_time_ms();

			if (!conn_deadline) {
				conn_deadline = now + (uint64_t)ibc_param_bootstrap_timeout_ms();
			} else if (now > conn_deadline) {
				st = ibc_comm_fail(comm, IBC_ERR_TIMEOUT, conn_peer,
						   "connection set-up did not complete within %lld ms",
						   (long long)ibc_param_bootstrap_timeout_ms());
				goto fail;
			}
			if (__atomic_load_n(&comm->aborting, __ATOMIC_ACQUIRE)) {
				st = IBC_ERR_REMOTE;
				goto fail;
			}
			st = ibc_net_progress(comm);
			if (st != IBC_OK)
				goto fail;
			usleep(100);
		} else {
			conn_deadline = 0;
			st = nact < P2P_BATCH_MAX ? ibc_net_wait_p2p(comm, trp, hi)
						  : ibc_net_waitany(comm, trp, hi);
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
			/*
			 * Its caller may free it now: error texts (comm->cur)
			 * must name a request still in the batch.
			 */
			if (comm->cur == reqs[i])
				comm->cur = NULL;
			reqs[i] = NULL;
			trp[i] = NULL;
			nact--;
		}
		for (i = 0; i < hi && !comm->cur; i++)
			comm->cur = reqs[i];
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

/* run one operation in the calling thread; records status and text */
static void comm_execute(struct ibc_comm *comm, struct ibc_request *req)
{
	ibc_status_t st = ibc_comm_poison_status(comm);
	int batched = 0;

	ibc_log_set_rank(comm->rank);
	if (st == IBC_OK) {
		pthread_mutex_lock(&comm->lock);
		comm->cur = req;
		comm->cur_bytes_done = 0;
		comm->cur_bytes_total = 0;
		__atomic_store_n(&comm->op_seq, req->seq, __ATOMIC_RELAXED);
		__atomic_store_n(&comm->in_op, 1, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&comm->lock);
		ibc_log_set_last_error("");
		if (req_is_host_p2p(req)) {
			comm_p2p_batch(comm, req);
			batched = 1;
		} else {
			st = ibc_coll_run(comm, req);
			if (st != IBC_OK)
				comm_op_failed(comm, st);
		}
		pthread_mutex_lock(&comm->lock);
		comm->cur = NULL;
		ibc_comm_wait_clear(comm);
		__atomic_store_n(&comm->in_op, 0, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&comm->lock);
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

static void *progress_thread(void *arg)
{
	struct ibc_comm *comm = arg;

	ibc_log_set_rank(comm->rank);
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

ibc_status_t ibc_comm_submit(struct ibc_comm *comm, struct ibc_request *req, int blocking)
{
	pthread_mutex_lock(&comm->lock);
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
	if (!blocking && comm->nqueued >= ibc_param_max_requests()) {
		pthread_mutex_unlock(&comm->lock);
		IBC_LOG_ERROR(COLL, "more than IBC_MAX_REQUESTS=%lld nonblocking operations outstanding",
			      (long long)ibc_param_max_requests());
		return IBC_ERR_INVALID_USAGE;
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
 * ibc_comm_wait_req() - block until @req is done. With the progress thread
 * this sleeps on the condition variable; without it, the caller runs queued
 * operations up to @req itself. Each operation is bounded by IBC_TIMEOUT_MS,
 * and the wait wakes at least every 100 ms to notice an abort.
 */
ibc_status_t ibc_comm_wait_req(struct ibc_comm *comm, struct ibc_request *req)
{
	pthread_mutex_lock(&comm->lock);
	while (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) {
		if (!comm->use_thread && !comm->running && comm->q_head) {
			struct ibc_request *next = comm_pop(comm);

			pthread_mutex_unlock(&comm->lock);
			comm_execute(comm, next);
			pthread_mutex_lock(&comm->lock);
			continue;
		}
		{
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100 * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&comm->cond, &comm->lock, &ts);
		}
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

/* enter @comm for a request call: silent, 0 when entered */
static int comm_enter_quiet(struct ibc_comm *comm)
{
	int i;
	int found = 0;

	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < reg_n; i++)
		if (reg_comms[i] == comm)
			found = 1;
	if (found && !__atomic_load_n(&comm->aborting, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&comm->ncallers, 1, __ATOMIC_ACQ_REL);
	else
		found = 0;
	pthread_mutex_unlock(&reg_lock);
	return found ? 0 : -1;
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
		if (comm_enter_quiet(comm) != 0) {
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
	if (*done_p || comm_enter_quiet(comm) != 0)
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
		{
			/* operations are bounded by IBC_TIMEOUT_MS; wake up now and then anyway */
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100 * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&comm->cond, &comm->lock, &ts);
		}
	}
	pthread_mutex_unlock(&comm->lock);
	return st;
}
