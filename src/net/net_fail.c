/* SPDX-License-Identifier: MIT */
/*
 * net_fail.c - the communicator's error state: the first fatal error is
 * composed into one line naming the operation in flight, this rank, the
 * peer and its host, the transport and the bytes moved, poisons the
 * communicator and is told to the peers through the bootstrap; peers'
 * failures reported by the bootstrap arrive here too. And the wait-for
 * chain: the answers this rank gives to its peers' wait-for queries, and
 * the chase that finds the rank a stalled wait ultimately waits on.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/coll_kind.h"
#include "base/log.h"
#include "base/param.h"
#include "base/status.h"
#include "base/util.h"
#include "net/net.h"
#include "net/net_internal.h"

const char *ibc_net_peer_host(const struct ibc_net *net, int peer)
{
	if (!net->bs || peer < 0 || peer >= net->nranks)
		return "?";
	return ibc_bootstrap_peer(net->bs, peer)->host;
}

const char *ibc_net_fail_text(struct ibc_net *net, ibc_status_t st, char *buf, size_t n)
{
	int have = 0;
	int i;

	/*
	 * A peer that failed: its report (the bootstrap service thread's
	 * ibc_net_on_boot_error()) may arrive a moment after the exchange
	 * broke; wait for it up to 200 ms (an error path only)
	 */
	for (i = 0; i < 200 && st == IBC_ERR_REMOTE && ibc_net_status(net) == IBC_OK; i++)
		usleep(1000);
	if (n == 0 || ibc_net_status(net) == IBC_OK)
		return ibc_status_str(st);
	pthread_mutex_lock(&net->lock);
	if (net->poison_msg[0]) {
		snprintf(buf, n, "%s", ibc_log_strip_rank(net->poison_msg));
		have = 1;
	}
	pthread_mutex_unlock(&net->lock);
	return have ? buf : ibc_status_str(st);
}

/* poison @net with @st and @msg unless already poisoned; 1 if this call did it */
static int net_poison(struct ibc_net *net, ibc_status_t st, const char *msg)
{
	int first = 0;

	pthread_mutex_lock(&net->lock);
	if (!net->poisoned) {
		net->poison_st = st;
		snprintf(net->poison_msg, sizeof(net->poison_msg), "%.*s", (int)sizeof(net->poison_msg) - 1, msg);
		__atomic_store_n(&net->poisoned, 1, __ATOMIC_RELEASE);
		first = 1;
	} else if (st == IBC_ERR_REVOKED && net->poison_st != IBC_ERR_REVOKED) {
		/*
		 * A revoke after the first error: the message keeps the cause (a
		 * rank died), the status becomes IBC_ERR_REVOKED, which every
		 * later call returns, the same on every rank.
		 */
		__atomic_store_n(&net->poison_st, IBC_ERR_REVOKED, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&net->lock);
	if (first && net->on_poison)
		net->on_poison(net->on_poison_arg);
	return first;
}

/*
 * The body of ibc_net_fail(). FAIL_LOCAL in @flags: the error was detected
 * by this rank (then it is broadcast to the peers, and a lost connection or
 * a timeout first waits for the liveness verdict, unless FAIL_NO_GRACE: the
 * culprit is known); without: it came from the bootstrap (a peer's failure
 * reported by the hub), which every rank already hears.
 */
enum { FAIL_LOCAL = 1, FAIL_NO_GRACE = 2 };

static ibc_status_t net_fail_v(struct ibc_net *net, ibc_status_t st, int peer, int flags,
				const char *fmt, va_list ap)
{
	char cause[768];
	char ctx[256] = "";
	char body[1000];
	char msg[1100];
	const struct ibc_op *cur;
	int local = flags & FAIL_LOCAL;
	uint64_t grace = 0;     /* ms to wait for a first error from elsewhere */
	uint64_t deadline;

	vsnprintf(cause, sizeof(cause), fmt, ap);
	if (local && __atomic_load_n(&net->aborting, __ATOMIC_ACQUIRE)) {
		/*
		 * ibc_comm_abort() on this rank set @aborting, which makes blocked
		 * waits give up, and poisons the communicator a moment later. A
		 * wait that gives up in between must not become the first error:
		 * it would be broadcast as "error on rank R: remote peer failed"
		 * ahead of the abort notice. Wait (bounded) for the abort's own
		 * poison.
		 */
		grace = 1000;
	} else if (local && !(flags & FAIL_NO_GRACE) &&
		   ((st == IBC_ERR_REMOTE && peer >= 0) || st == IBC_ERR_TIMEOUT) && net->bs) {
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
		 * progress was. Wait up to half the timeout, at most 2 s, for its
		 * report.
		 */
		if (st == IBC_ERR_TIMEOUT)
			grace = IBC_MAX(grace, IBC_MIN((uint64_t)net->timeout_ms / 2, 2000));
	}
	/* until the communicator is poisoned (by that report, or the abort), at most @grace ms */
	deadline = ibc_time_ms() + grace;
	while (grace && !__atomic_load_n(&net->poisoned, __ATOMIC_ACQUIRE) && ibc_time_ms() < deadline)
		usleep(1000);
	pthread_mutex_lock(&net->lock);
	cur = __atomic_load_n(&net->cur, __ATOMIC_ACQUIRE);     /* set without the lock (exec.c) */
	if (cur) {
		int reduces = ibc_coll_reduces(cur->coll);
		int has_root = ibc_coll_has_root(cur->coll);
		int has_peer = ibc_coll_is_p2p(cur->coll);

		char who[32] = "";
		char moved[64];

		if (has_root || has_peer)
			snprintf(who, sizeof(who), " %s %d", has_root ? "root" : "peer", cur->root);
		/* the probe's and race's traffic is not the operation's (src/tune/) */
		if (__atomic_load_n(&net->cur_tuning, __ATOMIC_RELAXED) == 1)
			snprintf(moved, sizeof(moved), "in the tuner's start-up measurements");
		else if (__atomic_load_n(&net->cur_tuning, __ATOMIC_RELAXED))
			snprintf(moved, sizeof(moved), "in the tuner's re-timing of its algorithms");
		else
			snprintf(moved, sizeof(moved), "%llu bytes moved so far",
				 (unsigned long long)__atomic_load_n(&net->cur_bytes_done,
								     __ATOMIC_RELAXED));
		snprintf(ctx, sizeof(ctx), "%s #%u (count %zu %s%s%s%s, %s) ",
			 ibc_coll_name(cur->coll), cur->seq, cur->count, ibc_dtype_name(cur->dtype),
			 reduces ? " " : "", reduces ? ibc_redop_name(cur->redop) : "", who, moved);
	}
	pthread_mutex_unlock(&net->lock);
	if (peer >= 0)
		snprintf(body, sizeof(body), "%son %s: peer rank %d (host %s): %s", ctx,
			 net->transport_name, peer, ibc_net_peer_host(net, peer), cause);
	else
		snprintf(body, sizeof(body), "%son %s: %s", ctx, net->transport_name, cause);
	if (net->log_ctx[0])
		snprintf(msg, sizeof(msg), "rank %d (%s): %s", net->rank, net->log_ctx, body);
	else
		snprintf(msg, sizeof(msg), "rank %d: %s", net->rank, body);
	if (!net_poison(net, st, msg)) {
		IBC_LOG_DEBUG(COLL, "after the first error: %s", body);
		return net->poison_st;
	}
	IBC_LOG_ERROR(COLL, "%s", body);
	ibc_log_set_last_error(msg);
	if (local && net->bs)
		ibc_bootstrap_notify_error(net->bs, st, msg);
	return st;
}

ibc_status_t ibc_net_fail(struct ibc_net *net, ibc_status_t st, int peer, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	st = net_fail_v(net, st, peer, FAIL_LOCAL, fmt, ap);
	va_end(ap);
	return st;
}

/* ibc_net_fail() for a timeout whose culprit @peer is known: no grace wait */
static ibc_status_t net_fail_found(struct ibc_net *net, ibc_status_t st, int peer,
				    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static ibc_status_t net_fail_found(struct ibc_net *net, ibc_status_t st, int peer,
				    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	st = net_fail_v(net, st, peer, FAIL_LOCAL | FAIL_NO_GRACE, fmt, ap);
	va_end(ap);
	return st;
}

/* poison without telling the peers (they learnt it from the bootstrap, or will) */
ibc_status_t ibc_net_fail_quiet(struct ibc_net *net, ibc_status_t st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	st = net_fail_v(net, st, -1, 0, fmt, ap);
	va_end(ap);
	return st;
}

/* bootstrap service thread: a peer died, aborted, failed or stopped answering */
void ibc_net_on_boot_error(void *arg, ibc_status_t st, int peer, const char *why)
{
	struct ibc_net *net = arg;

	ibc_net_log_rank(net);
	ibc_net_fail_quiet(net, st, "%s", why);
	(void)peer;
}

ibc_status_t ibc_net_revoke(struct ibc_net *net)
{
	if (!net->bs || ibc_bootstrap_revoked(net->bs)) {
		if (net->bs)
			net_poison(net, IBC_ERR_REVOKED, "communicator revoked");
		return IBC_OK;
	}
	ibc_net_log_rank(net);
	ibc_net_fail_quiet(net, IBC_ERR_REVOKED, "communicator revoked by ibc_comm_revoke() on rank %d",
			   net->rank);
	/* in case it was poisoned before: the status is now IBC_ERR_REVOKED */
	net_poison(net, IBC_ERR_REVOKED, "communicator revoked");
	ibc_bootstrap_revoke(net->bs);
	return IBC_OK;
}

/* ------------------------------------------------------------------------ */
/* wait-for chains                                                          */
/* ------------------------------------------------------------------------ */

/* bootstrap service thread: a peer asks what this rank is doing (never blocks) */
void ibc_net_wait_state(void *arg, int asker, struct ibc_boot_waitstate *ws)
{
	struct ibc_net *net = arg;
	int peer = __atomic_load_n(&net->wait_peer, __ATOMIC_ACQUIRE);
	uint64_t since = __atomic_load_n(&net->wait_since_ms, __ATOMIC_RELAXED);
	uint64_t now = ibc_time_ms();

	ws->peer = -1;
	ws->idle_ms = 0;
	ws->flags = 0;
	ws->sent = 0;
	ws->recvd = 0;
	if (__atomic_load_n(&net->done_valid, __ATOMIC_ACQUIRE)) {
		ws->flags |= IBC_BOOT_WS_DONE;
		ws->done_seq = __atomic_load_n(&net->done_seq, __ATOMIC_RELAXED);
	}
	if (asker >= 0 && asker < net->nranks && net->peers) {
		struct ibc_peer *pe = &net->peers[asker];

		ws->sent = __atomic_load_n(&pe->coll_sent, __ATOMIC_RELAXED);
		ws->recvd = __atomic_load_n(&pe->coll_recvd, __ATOMIC_RELAXED);
		if (__atomic_load_n(&pe->conn, __ATOMIC_RELAXED))
			ws->flags |= IBC_BOOT_WS_CONNECTED;
	}
	ws->seq = __atomic_load_n(&net->op_seq, __ATOMIC_RELAXED);
	if (__atomic_load_n(&net->poisoned, __ATOMIC_ACQUIRE)) {
		ws->state = IBC_BOOT_WAIT_FAILED;
	} else if (peer >= 0 && peer < net->nranks) {
		ws->state = IBC_BOOT_WAIT_PEER;
		ws->peer = peer;
		ws->idle_ms = now > since ? (uint32_t)IBC_MIN(now - since, UINT32_MAX) : 0;
	} else if (__atomic_load_n(&net->in_op, __ATOMIC_ACQUIRE)) {
		ws->state = IBC_BOOT_WAIT_BUSY;
	} else {
		/* idle: @seq is the number of collectives issued so far */
		ws->state = IBC_BOOT_WAIT_IDLE;
		ws->seq = __atomic_load_n(&net->coll_seq, __ATOMIC_RELAXED);
	}
}

int ibc_net_chase(struct ibc_net *net, int peer, char *why, size_t len)
{
	int64_t max_ms = IBC_MIN(IBC_MAX(net->timeout_ms / 4, 500), 2000);
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
	if (!net->bs || peer < 0 || peer >= net->nranks || peer == net->rank)
		return -1;
	seen = ibc_calloc((size_t)net->nranks, 1, "wait-for chain");
	if (!seen)
		return -1;
	seen[net->rank] = 1;
	for (hops = 0; hops < net->nranks; hops++) {
		struct ibc_boot_waitstate ws;
		ibc_status_t st;

		int tries;

		/* aborted, or another rank's report arrived: that error stands */
		if (__atomic_load_n(&net->aborting, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&net->poisoned, __ATOMIC_ACQUIRE))
			break;
		seen[cur] = 1;
		st = ibc_bootstrap_query_wait(net->bs, cur, max_ms, &ws);
		/*
		 * Not waiting: perhaps caught between two waits (reducing a chunk,
		 * entering the next step). Ask again a few times, 50 ms apart,
		 * before calling it the culprit.
		 */
		for (tries = 0; tries < 3 && st == IBC_OK &&
				(ws.state == IBC_BOOT_WAIT_BUSY || ws.state == IBC_BOOT_WAIT_IDLE);
		     tries++) {
			usleep(50000);
			st = ibc_bootstrap_query_wait(net->bs, cur, max_ms, &ws);
		}
		if (st != IBC_OK && st != IBC_ERR_TIMEOUT && st != IBC_ERR_REMOTE) {
			/* this rank could not ask: no culprit from here */
			CHASE_SAY("%sthis rank could not ask rank %d: %s", off ? "; " : "", cur,
				  ibc_log_last_cause());
			break;
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

ibc_status_t ibc_net_stall_probe(struct ibc_net *net, int peer, int kind)
{
	const struct ibc_op *cur = net->cur;
	struct ibc_boot_waitstate ws;
	struct ibc_peer *pe;
	uint64_t mine;
	uint64_t theirs;
	ibc_status_t st;

	if (!cur || !net->bs || peer < 0 || peer >= net->nranks || peer == net->rank)
		return IBC_OK;
	st = ibc_bootstrap_query_wait(net->bs, peer, 500, &ws);
	/*
	 * This rank could not even ask (socket() at the open-file limit): the
	 * connection it waits for cannot be made here either, and the cause is
	 * this rank's, not @peer's.
	 */
	if (st != IBC_OK && st != IBC_ERR_TIMEOUT && st != IBC_ERR_REMOTE)
		return net_fail_found(net, st, -1,
				      "cannot ask rank %d what it waits for, while this rank waits %s it in %s #%u: %s",
				      peer, kind == 2 ? "to connect to" : kind ? "to send to" : "to receive from",
				      ibc_coll_name(cur->coll), cur->seq, ibc_log_last_cause());
	/*
	 * Refused: a rank's listener lives from before its address is known
	 * until its destroy, abort or exit, so @peer is gone for good and
	 * what this rank waits for can never come. Without this, a rank whose
	 * peer destroyed the communicator before they connected waited for
	 * the whole IBC_BOOTSTRAP_TIMEOUT_MS / IBC_TIMEOUT_MS.
	 */
	if (st == IBC_ERR_REMOTE) {
		uint64_t until = ibc_time_ms() + 200;

		/*
		 * @peer may have left after failing itself, for a reason its
		 * report names (another rank): give the report 200 ms to arrive,
		 * so that this rank does not blame a rank that only followed the
		 * failure (seen in 5 of 119 three-rank runs)
		 */
		while (ibc_net_status(net) == IBC_OK && ibc_time_ms() < until)
			usleep(5000);
		if (ibc_net_status(net) != IBC_OK)
			return ibc_net_status(net);
	}
	if (st == IBC_ERR_REMOTE)
		return net_fail_found(net, IBC_ERR_REMOTE, peer,
				      "rank %d refused a connection to its bootstrap service while this rank waits %s it in %s #%u: rank %d has destroyed or aborted the communicator, or exited",
				      peer, kind == 2 ? "to connect to" : kind ? "to send to" : "to receive from",
				      ibc_coll_name(cur->coll), cur->seq, peer);
	/*
	 * no answer: the timeout's chase names it. A send or receive has no
	 * "completed this collective" to compare: only a refusal tells.
	 */
	if (st != IBC_OK || ibc_coll_is_p2p(cur->coll))
		return IBC_OK;
	/* the peer has not completed this collective yet: slow, not mismatched */
	if (!(ws.flags & IBC_BOOT_WS_DONE) || (int32_t)(ws.done_seq - cur->seq) < 0)
		return IBC_OK;
	pe = &net->peers[peer];
	if (kind == 2) {
		if (ws.flags & IBC_BOOT_WS_CONNECTED)
			return IBC_OK;
		return net_fail_found(net, IBC_ERR_INVALID_USAGE, peer,
				      "mismatched calls: this rank waits to connect to rank %d in collective #%u, but rank %d completed collective #%u without a connection to this rank: the ranks' calls differ (a root, a count of 0, a skipped call)",
				      peer, cur->seq, peer, ws.done_seq);
	}
	mine = __atomic_load_n(kind ? &pe->coll_sent : &pe->coll_recvd, __ATOMIC_RELAXED);
	theirs = kind ? ws.recvd : ws.sent;
	if (theirs >= mine)
		return IBC_OK;  /* what we wait for was posted: in flight */
	return net_fail_found(net, IBC_ERR_INVALID_USAGE, peer,
			      "mismatched calls: this rank waits in collective #%u to %s rank %d, but rank %d completed collective #%u having posted %llu %s this rank where this rank's calls %s %llu: the ranks' calls differ (a root, a count of 0, a skipped call)",
			      cur->seq, kind ? "send to" : "receive from", peer, peer, ws.done_seq,
			      (unsigned long long)theirs, kind ? "receives from" : "messages to",
			      kind ? "send" : "receive", (unsigned long long)mine);
}

ibc_status_t ibc_net_fail_stalled(struct ibc_net *net, int waited, int peer,
				   const char *fmt, ...)
{
	char cause[768];
	char chain[512];
	va_list ap;
	int culprit;

	va_start(ap, fmt);
	vsnprintf(cause, sizeof(cause), fmt, ap);
	va_end(ap);
	culprit = ibc_net_chase(net, waited, chain, sizeof(chain));
	if (culprit >= 0)
		return net_fail_found(net, IBC_ERR_TIMEOUT, culprit, "%s; wait-for chain: %s",
				       cause, chain);
	return ibc_net_fail(net, IBC_ERR_TIMEOUT, peer, "%s%s%s", cause,
			     chain[0] ? "; wait-for chain: " : "", chain);
}
