/* SPDX-License-Identifier: MIT */
/*
 * boot_ft.c - the fault-tolerant calls of the bootstrap, which run after a
 * rank died: revoke (a direct message to every peer, taken by its service
 * thread) and the agreement that ibc_comm_agree() and ibc_comm_shrink()
 * use. They send with ibc_bootstrap_send_ft(), which a failure does not
 * cancel, and find dead ranks themselves: a connection to a rank's
 * listener that is refused or dropped means its process is gone (the
 * kernel closed its sockets), which holds whether or not rank 0, the
 * liveness hub, is alive.
 *
 * The agreement (after ULFM's MPI_Comm_agree, with a rotating coordinator
 * as in the classic crash-tolerant consensus of Chandra and Toueg; the
 * exact rules are in docs/reliability.md):
 *  1. The coordinator is the lowest rank this rank does not know dead.
 *     Each rank sends its contribution (flag, payload, the ranks it knows
 *     dead) to the coordinator, again whenever the coordinator changes.
 *  2. The coordinator decides once it holds a contribution from every
 *     rank it does not know dead: the AND of the flags, the dead set (the
 *     ranks without a contribution) and the payloads.
 *  3. A rank that holds a decision, its own or received from any rank it
 *     does not know dead, sends it to every rank not in the decision's dead
 *     set, in ascending rank order, and only then returns. A coordinator
 *     that receives a decision adopts it instead of deciding.
 *  4. Messages from ranks known dead are ignored, except a decision that
 *     leaves this rank out: it was the slow one.
 *  5. A decision also goes, best effort, to the ranks it leaves out, and a
 *     coordinator that found ranks dead in this call looks once more after
 *     50 ms before deciding, and fails (IBC_ERR_REMOTE) if one of them left
 *     the communicator (BYE): a rank that was stopped while the others
 *     decided without it and left must not decide alone when it resumes.
 * Messages carry the agreement's sequence number; older ones are dropped
 * and later ones kept whatever their size (ibc_bootstrap_try_recv_seq()).
 * A coordinator that dies after sending its decision to some ranks: those
 * ranks pass it on (3) before returning, the lowest survivor first, and the
 * next coordinator cannot decide without a message from each of them, so
 * it adopts that decision (2, 3). Cost: O(n^2) small messages per
 * agreement (rule 3), fine for the tens to hundreds of ranks tested here.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/status.h"
#include "base/twait.h"
#include "base/util.h"
#include "boot/boot_internal.h"
#include "boot/bootstrap.h"

/* ------------------------------------------------------------------------ */
/* revoke                                                                   */
/* ------------------------------------------------------------------------ */

void ibc_bootstrap_revoke(struct ibc_bootstrap *bs)
{
	uint64_t end;
	int i;

	if (!bs || __atomic_exchange_n(&bs->revoked, 1, __ATOMIC_ACQ_REL))
		return;
	__atomic_store_n(&bs->stop_io, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&bs->qlock);
	pthread_cond_broadcast(&bs->qcond);
	pthread_mutex_unlock(&bs->qlock);
	end = ibc_time_ms() + 2000;
	for (i = 0; i < bs->nranks; i++) {
		uint64_t now = ibc_time_ms();

		if (i == bs->rank || now >= end)
			continue;
		/* a dead or unreachable peer is skipped: it cannot be revoked */
		ibc_bootstrap_send_ft(bs, i, IBC_BOOT_TAG_REVOKE, NULL, 0, IBC_MIN(now + 500, end));
	}
}

int ibc_bootstrap_revoked(const struct ibc_bootstrap *bs)
{
	return bs && __atomic_load_n(&bs->revoked, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------------ */
/* agreement                                                                */
/* ------------------------------------------------------------------------ */

/* message header: sequence, flag, and the addressee (contribution) or the deciding coordinator */
enum { FT_HDR = 16 };

struct ft_state {
	struct ibc_bootstrap *bs;
	uint64_t seq;
	size_t pb;              /* payload bytes per rank */
	size_t csize;           /* contribution message bytes */
	size_t dsize;           /* decision message bytes */
	size_t msgcap;          /* bytes of @msg */
	uint8_t *dead;          /* [n] known dead here */
	uint8_t *have;          /* [n] contribution held */
	uint8_t *probe_now;     /* [n] a peer said this rank is dead: probe it soon */
	uint32_t flag;          /* AND of the contributions held */
	uint8_t *payloads;      /* [n x pb] */
	uint8_t *msg;           /* one message, max(csize, dsize) */
	uint8_t *decision;      /* dsize: the decision, once there is one */
	int found_dead;         /* ranks this call found dead */
};

/* the sequence number is in the message (ibc_bootstrap_try_recv_seq()), the kind in the tag */
enum { FT_CONTRIB = 0, FT_DECISION = 1 };

static uint32_t ft_tag(int kind)
{
	return IBC_BOOT_TAG_AGREE + (uint32_t)kind;
}

/* a message of agreement @seq with the wrong size: the ranks' calls differ */
static ibc_status_t ft_bad_size(struct ft_state *s, int peer, size_t len, size_t want, int kind)
{
	IBC_LOG_ERROR(BOOT, "agreement #%llu on rank %d: rank %d sent a %zu-byte %s, this rank expects %zu: the ranks' calls differ (ibc_comm_agree() on some, ibc_comm_shrink() on others, at the same point)",
		      (unsigned long long)s->seq, s->bs->rank, peer, len,
		      kind ? "decision" : "contribution", want);
	return IBC_ERR_INVALID_USAGE;
}

/* @peer's next message of @kind for this agreement into s->msg, which must be @want bytes */
static ibc_status_t ft_recv(struct ft_state *s, int peer, int kind, size_t want, int *got_p)
{
	size_t len = 0;
	ibc_status_t st = ibc_bootstrap_try_recv_seq(s->bs, peer, ft_tag(kind), s->seq, s->msg,
						  s->msgcap, &len, got_p);

	if (st != IBC_OK || (*got_p && len != want))
		return ft_bad_size(s, peer, len, want, kind);
	return IBC_OK;
}

static void ft_put_hdr(uint8_t *m, uint64_t seq, uint32_t flag, uint32_t who)
{
	memcpy(m, &seq, 8);
	memcpy(m + 8, &flag, 4);
	memcpy(m + 12, &who, 4);
}

/* is @peer's process gone? A probe: its service thread answers unless it is */
static int ft_probe_dead(struct ft_state *s, int peer)
{
	struct ibc_boot_waitstate ws;
	ibc_status_t st = ibc_bootstrap_query_wait(s->bs, peer, 300, &ws);

	if (st == IBC_ERR_REMOTE)
		return 1;
	/* silent, and the liveness hub already declared it stopped or dead */
	return st == IBC_ERR_TIMEOUT &&
	       __atomic_load_n(&s->bs->peer_state[peer], __ATOMIC_ACQUIRE) == PEER_FAILED;
}

static void ft_mark_dead(struct ft_state *s, int peer, const char *how)
{
	if (s->dead[peer])
		return;
	s->dead[peer] = 1;
	s->found_dead++;
	IBC_LOG_INFO(BOOT, "agreement #%llu: rank %d (host %s) is dead (%s)",
		     (unsigned long long)s->seq, peer, s->bs->peers[peer].host, how);
}

/* take every contribution that arrived (any rank may hold them: rule 1) */
static ibc_status_t ft_collect(struct ft_state *s)
{
	struct ibc_bootstrap *bs = s->bs;
	int n = bs->nranks;
	int i;
	int j;

	for (i = 0; i < n; i++) {
		int got = 1;

		if (i == bs->rank)
			continue;
		while (got) {
			uint32_t flag;

			IBC_CHECK(ft_recv(s, i, FT_CONTRIB, s->csize, &got));
			if (!got)
				break;
			if (s->dead[i])
				continue;       /* a dead rank's */
			memcpy(&flag, s->msg + 8, 4);
			if (!s->have[i]) {
				s->have[i] = 1;
				s->flag &= flag;
				memcpy(s->payloads + (size_t)i * s->pb, s->msg + FT_HDR, s->pb);
			}
			for (j = 0; j < n; j++)
				if (s->msg[FT_HDR + s->pb + j] && !s->dead[j] && j != bs->rank)
					s->probe_now[j] = 1;
		}
	}
	return IBC_OK;
}

/* a decision from a rank not known dead: 1 when one was taken into s->decision */
static ibc_status_t ft_take_decision(struct ft_state *s, int *got_p)
{
	struct ibc_bootstrap *bs = s->bs;
	int i;

	*got_p = 0;
	for (i = 0; i < bs->nranks; i++) {
		int got = 1;

		if (i == bs->rank)
			continue;
		while (got) {
			IBC_CHECK(ft_recv(s, i, FT_DECISION, s->dsize, &got));
			if (!got)
				break;
			/* from a rank known dead only if it excludes this one (this rank was the slow one) */
			if (s->dead[i] && !s->msg[FT_HDR + bs->rank])
				continue;
			memcpy(s->decision, s->msg, s->dsize);
			*got_p = 1;
			return IBC_OK;
		}
	}
	return IBC_OK;
}

/* the coordinator's decision from the contributions it holds (rule 2) */
static void ft_decide(struct ft_state *s)
{
	int n = s->bs->nranks;
	int i;

	ft_put_hdr(s->decision, s->seq, s->flag, (uint32_t)s->bs->rank);
	for (i = 0; i < n; i++) {
		int in = s->have[i] || i == s->bs->rank;

		s->decision[FT_HDR + i] = (uint8_t)!in;
		if (in)
			memcpy(s->decision + FT_HDR + n + (size_t)i * s->pb,
			       s->payloads + (size_t)i * s->pb, s->pb);
		else
			memset(s->decision + FT_HDR + n + (size_t)i * s->pb, 0, s->pb);
	}
}

/* rule 3: pass the decision on, lowest rank first */
static void ft_spread(struct ft_state *s, uint64_t deadline)
{
	struct ibc_bootstrap *bs = s->bs;
	int i;

	for (i = 0; i < bs->nranks; i++) {
		uint64_t now = ibc_time_ms();

		if (i == bs->rank || s->decision[FT_HDR + i])
			continue;
		/* IBC_FAULT_INJECT=agree_crash:<n>: this process dies before its n-th decision message */
		if (ibc_fault_hit(IBC_FAULT_AGREE_CRASH, "agreement decision"))
			ibc_fault_crash();
		ibc_bootstrap_send_ft(bs, i, ft_tag(FT_DECISION), s->decision, s->dsize,
				      IBC_MAX(now + 500, deadline));
	}
	/*
	 * and, best effort, to the ranks it excludes: one that was only stopped
	 * or slow finds, when it runs again, that it is out (IBC_ERR_REMOTE)
	 * instead of deciding alone with the others found "dead" because they
	 * have left
	 */
	for (i = 0; i < bs->nranks; i++)
		if (i != bs->rank && s->decision[FT_HDR + i])
			ibc_bootstrap_send_ft(bs, i, ft_tag(FT_DECISION), s->decision, s->dsize,
					      ibc_time_ms() + 200);
}

ibc_status_t ibc_bootstrap_agree(struct ibc_bootstrap *bs, uint64_t seq, uint32_t *flag_p,
				 const void *payload, size_t payload_bytes, void *payloads_out,
				 uint8_t *dead_out, int64_t timeout_ms)
{
	struct ft_state s;
	int n = bs->nranks;
	int me = bs->rank;
	int coord = -1;
	uint64_t t0 = ibc_time_ms();
	uint64_t deadline = t0 + (uint64_t)IBC_MAX(timeout_ms, 1);
	uint64_t next_probe = t0 + 100;
	int settled = 0;
	ibc_status_t st = IBC_OK;
	int i;

	memset(&s, 0, sizeof(s));
	s.bs = bs;
	s.seq = seq;
	s.pb = payload_bytes;
	s.csize = FT_HDR + payload_bytes + (size_t)n;
	s.dsize = FT_HDR + (size_t)n + (size_t)n * payload_bytes;
	s.flag = *flag_p;
	s.dead = ibc_calloc((size_t)n, 3, "agreement state");
	s.payloads = ibc_calloc((size_t)n, IBC_MAX(payload_bytes, 1), "agreement payloads");
	s.msgcap = IBC_MAX(s.csize, s.dsize);
	s.msg = ibc_malloc(s.msgcap, "agreement message");
	s.decision = ibc_malloc(s.dsize, "agreement decision");
	if (!s.dead || !s.payloads || !s.msg || !s.decision) {
		st = IBC_ERR_NO_MEMORY;
		goto out;
	}
	s.have = s.dead + n;
	s.probe_now = s.dead + 2 * n;
	if (payload_bytes)
		memcpy(s.payloads + (size_t)me * payload_bytes, payload, payload_bytes);
	/* the ranks the liveness hub reported failed are probed first, not after 100 ms */
	for (i = 0; i < n; i++)
		if (i != me && __atomic_load_n(&bs->peer_state[i], __ATOMIC_ACQUIRE) == PEER_FAILED)
			s.probe_now[i] = 1;
	for (;;) {
		int got = 0;
		uint64_t now;

		for (i = 0; i < n && s.dead[i]; i++)
			;
		if (i != coord) {
			coord = i;
			IBC_LOG_DEBUG(BOOT, "agreement #%llu: coordinator rank %d", (unsigned long long)seq,
				      coord);
			if (coord != me) {
				/* rule 1: my contribution, with the ranks I know dead */
				ft_put_hdr(s.msg, seq, *flag_p, (uint32_t)coord);
				if (payload_bytes)
					memcpy(s.msg + FT_HDR, payload, payload_bytes);
				memcpy(s.msg + FT_HDR + payload_bytes, s.dead, (size_t)n);
				now = ibc_time_ms();
				if (ibc_bootstrap_send_ft(bs, coord, ft_tag(FT_CONTRIB), s.msg, s.csize,
							  IBC_MIN(now + 1000, deadline)) == IBC_ERR_REMOTE) {
					ft_mark_dead(&s, coord, "its listener refused the contribution");
					continue;
				}
			}
		}
		IBC_CHECK_GOTO(ft_take_decision(&s, &got), st, out);
		if (got)
			break;
		IBC_CHECK_GOTO(ft_collect(&s), st, out);
		if (coord == me) {
			for (i = 0; i < n; i++)
				if (i != me && !s.dead[i] && !s.have[i])
					break;
			if (i == n && s.found_dead && !settled) {
				/*
				 * Ranks found dead here may only have left, having decided
				 * without this rank (it was stopped or slow): their decision
				 * excluding it can still be on its way to the queue. Look
				 * once more after 50 ms before deciding.
				 */
				settled = 1;
				usleep(50 * 1000);
				continue;
			}
			if (i == n) {
				for (i = 0; i < n; i++)
					if (s.dead[i] &&
					    __atomic_load_n(&bs->peer_state[i], __ATOMIC_ACQUIRE) == PEER_LEFT) {
						IBC_LOG_ERROR(BOOT, "agreement #%llu on rank %d: rank %d left the communicator (ibc_comm_destroy) during the agreement: the others decided without this rank (it was stopped or too slow and is counted as failed)",
							      (unsigned long long)seq, me, i);
						st = IBC_ERR_REMOTE;
						goto out;
					}
				ft_decide(&s);
				break;
			}
		}
		now = ibc_time_ms();
		if (now >= deadline) {
			char who[256] = "";

			for (i = 0; i < n; i++)
				if (i != me && !s.dead[i] && (coord == me ? !s.have[i] : i == coord))
					snprintf(who + strlen(who), sizeof(who) - strlen(who), "%s%d", who[0] ? ", " : "", i);
			IBC_LOG_ERROR(BOOT, "agreement #%llu on rank %d: no %s from rank(s) %s within %lld ms, and they are not known dead%s",
				      (unsigned long long)seq, me,
				      coord == me ? "contribution" : "decision of the coordinator", who,
				      (long long)timeout_ms,
				      coord == me ? " (did they call it?)"
						  : " (it may itself wait for a rank that did not call it: see its error)");
			st = IBC_ERR_TIMEOUT;
			goto out;
		}
		/* find the dead among those this rank waits on (every 200 ms, or when told) */
		for (i = 0; i < n; i++) {
			int waits = coord == me ? !s.have[i] : i == coord;

			if (i == me || s.dead[i])
				continue;
			if (((waits && now >= next_probe) || s.probe_now[i]) && ft_probe_dead(&s, i))
				ft_mark_dead(&s, i, "its listener is gone");
			s.probe_now[i] = 0;
		}
		if (now >= next_probe)
			next_probe = ibc_time_ms() + 200;
		pthread_mutex_lock(&bs->qlock);
		ibc_cond_wait_ms(&bs->qcond, &bs->qlock, 10);
		pthread_mutex_unlock(&bs->qlock);
	}
	/* a decision: pass it on (rule 3), then return it */
	ft_spread(&s, deadline);
	{
		uint32_t coordinator;
		int ndead = 0;

		memcpy(flag_p, s.decision + 8, 4);
		memcpy(&coordinator, s.decision + 12, 4);
		for (i = 0; i < n; i++)
			ndead += s.decision[FT_HDR + i];
		if (dead_out)
			memcpy(dead_out, s.decision + FT_HDR, (size_t)n);
		if (payloads_out && payload_bytes)
			memcpy(payloads_out, s.decision + FT_HDR + n, (size_t)n * payload_bytes);
		IBC_LOG_DEBUG(BOOT, "agreement #%llu: flag 0x%x, %d dead, decided by rank %u, %llu ms",
			      (unsigned long long)seq, *flag_p, ndead, coordinator,
			      (unsigned long long)(ibc_time_ms() - t0));
		if (s.decision[FT_HDR + me]) {
			IBC_LOG_ERROR(BOOT, "agreement #%llu: rank %u decided that this rank (%d) is dead: it is left out",
				      (unsigned long long)seq, coordinator, me);
			st = IBC_ERR_REMOTE;
		}
	}
out:
	ibc_free(s.dead);
	ibc_free(s.payloads);
	ibc_free(s.msg);
	ibc_free(s.decision);
	return st;
}
