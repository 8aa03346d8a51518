/* SPDX-License-Identifier: MIT */
/*
 * shm_eager.c - the deferred check of the shm segment's eager calls (the
 * small broadcast, shm_small.c): a call that returned before every rank
 * had arrived at it is compared with the others' calls before this rank's
 * next arrival (ibc_shmar_settle()), at an asynchronous-error poll without
 * waiting, and at destroy waiting until every rank has arrived or left
 * (ibc_shmar_idle_check()), so that ranks that disagree on a broadcast
 * still each get IBC_ERR_INVALID_USAGE.
 */
#include "config.h"

#include <stdint.h>
#include <time.h>

#include "base/check.h"
#include "base/util.h"
#include "coll/algo.h"
#include "coll/shm_allreduce_internal.h"

/*
 * ibc_shmar_settle() - finish the checks of this rank's last call that left
 * before every rank arrived (an eager broadcast, shm_small.c; s->lazy_seq):
 * wait for every rank's arrival at it and compare the descriptors of its
 * parity. Called before this rank arrives at a later call
 * (shmar_parity_free()); until then no rank can have published the call two
 * after it in the same parity (each publishes a call only after it has seen
 * every rank arrive at the one before, here or in that call itself).
 * Return: as ibc_shmar_wait() and ibc_shmar_check_desc(); the texts name
 * the call being checked (the descriptors) and the one running now.
 */
ibc_status_t ibc_shmar_settle(struct ibc_coll *coll, struct ibc_shmar *s)
{
	uint64_t seq = s->lazy_seq;

	s->lazy_seq = 0;
	IBC_CHECK(ibc_shmar_wait(coll, s, &s->lazy_op, F_ARRIVE, seq));
	s->arrived_all = seq;
	return ibc_shmar_check_desc(coll, s, (int)(seq & 1));
}

/*
 * One look at every rank's arrival at this rank's eager call @seq (its
 * descriptor @mine, in buffer parity @seq % 2): the ranks that arrived have their descriptors compared; one
 * that has not and has announced another collective is checked as a
 * waiting rank checks it. With @settle, a rank that has not arrived and
 * has left the communicator or whose process is gone (shmar_peer_gone(),
 * as the segment's waits ask it) never will; the call's text is formatted
 * only then.
 * Sets *@behind_p to a rank that has not arrived, or -1.
 */
static ibc_status_t shmar_lazy_look(struct ibc_coll *coll, struct ibc_shmar *s, uint64_t seq,
				    const struct ibc_msg_desc *mine, int settle, int *behind_p)
{
	int b = (int)(seq & 1);
	int q;

	*behind_p = -1;
	for (q = 0; q < s->n; q++) {
		char text[300];
		size_t esz = 0;
		pid_t pid;
		int gone;

		if (q == coll->net->rank)
			continue;
		if (line_reached(&s->line[q], F_ARRIVE, seq)) {
			IBC_CHECK(ibc_shmar_check_desc_rank(coll, s, b, q));
			continue;
		}
		*behind_p = q;
		IBC_CHECK(ibc_shmar_peer_check(coll, s, q, mine, F_ARRIVE, seq));
		if (!settle)
			continue;
		gone = shmar_peer_gone(&s->line[q], F_ARRIVE, seq, &pid);
		if (!gone)
			continue;
		(void)ibc_dtype_size(s->lazy_op.dtype, &esz);
		ibc_msg_desc_text(mine, s->lazy_op.count * esz, text, sizeof(text));
		if (gone == SHMAR_GONE_LEFT)
			return ibc_net_fail(coll->net, IBC_ERR_REMOTE, q,
					    "rank %d left the communicator (destroy or abort) without making %s, which this rank made before its destroy (the calls differ, or rank %d failed before it)",
					    q, text, q);
		return ibc_net_fail(coll->net, IBC_ERR_REMOTE, q,
				    "shm segment: process %d of rank %d is gone (exited or crashed) without making %s, which this rank made before its destroy",
				    (int)pid, q, text);
	}
	return IBC_OK;
}

/*
 * destroy's settle of an eager call: shmar_lazy_look() until every rank has
 * arrived, sleeping 20 us to 1 ms between looks. It reads the segment only:
 * no socket is polled (the communicator is going; a failure that another
 * thread raises is seen in its status), so its length does not change what
 * the transports do. Bounded by IBC_TIMEOUT_MS, as any wait for a rank.
 */
static ibc_status_t shmar_lazy_settle(struct ibc_coll *coll, struct ibc_shmar *s, uint64_t seq,
				      const struct ibc_msg_desc *mine)
{
	uint64_t start = ibc_time_ns();
	long sleep_ns = 20000;
	int behind;

	for (;;) {
		struct timespec ts;

		IBC_CHECK(shmar_lazy_look(coll, s, seq, mine, 1, &behind));
		if (behind < 0)
			return IBC_OK;
		IBC_CHECK(ibc_net_status(coll->net));
		if (__atomic_load_n(&coll->net->aborting, __ATOMIC_ACQUIRE))
			return IBC_ERR_REMOTE;
		if (ibc_time_ns() - start > (uint64_t)coll->net->timeout_ms * 1000000ull)
			return ibc_net_fail(coll->net, IBC_ERR_TIMEOUT, behind,
					    "shm segment: destroy waited %lld ms (IBC_TIMEOUT_MS) for rank %d to make the broadcast that this rank returned from before it",
					    (long long)coll->net->timeout_ms, behind);
		ts.tv_sec = 0;
		ts.tv_nsec = sleep_ns;
		nanosleep(&ts, NULL);
		sleep_ns = IBC_MIN(sleep_ns * 2, 1000000L);
	}
}

/**
 * ibc_shmar_idle_check() - Between calls (ibc_coll_idle_check(): an
 * asynchronous-error poll, destroy): settle this rank's last eager call.
 * Ranks that have arrived at it have their descriptors compared; a rank
 * that has not, and has announced another collective, is checked as a
 * waiting rank checks it; once every rank has arrived and matched, the
 * call is settled. A mismatch fails the communicator, so that ranks that
 * disagreed on a broadcast's root learn it without another call.
 * @coll: [in] communicator.
 * @settle: [in] 0 (a poll): look once, without waiting. 1 (destroy): wait
 *          until every rank has arrived, or has left the communicator or
 *          exited without arriving (it never will: IBC_ERR_REMOTE), reading
 *          the segment only (shmar_lazy_settle()); a rank that destroyed
 *          before a peer that disagreed had arrived would otherwise never
 *          compare that peer's call.
 * Blocking: with @settle, up to IBC_TIMEOUT_MS. The thread that runs the
 * communicator's operations (or holds its place).
 * Return: IBC_OK, or IBC_ERR_INVALID_USAGE (mismatched calls); with
 * @settle also IBC_ERR_REMOTE, IBC_ERR_TIMEOUT or the communicator's error.
 */
ibc_status_t ibc_shmar_idle_check(struct ibc_coll *coll, int settle)
{
	struct ibc_shmar *s = coll->shmar;
	struct ibc_msg_desc mine;
	uint64_t seq;
	int behind;

	if (!s || s->failed || !s->lazy_seq)
		return IBC_OK;
	seq = s->lazy_seq;
	ibc_shmar_op_desc(&s->lazy_op, &mine);
	if (settle)
		IBC_CHECK(shmar_lazy_settle(coll, s, seq, &mine));
	else
		IBC_CHECK(shmar_lazy_look(coll, s, seq, &mine, 0, &behind));
	if (settle || behind < 0) {
		s->lazy_seq = 0;
		s->arrived_all = seq;
	}
	return IBC_OK;
}

/* 1 while an eager call of this rank awaits its comparison (s->lazy_seq) */
int ibc_shmar_unsettled(const struct ibc_shmar *s)
{
	return !s->failed && s->lazy_seq != 0;
}

/**
 * ibc_shmar_leave() - Mark this rank gone from the communicator's segment
 * (coll destruction, after its last call): a peer's destroy that waits for
 * this rank's arrival at an eager call (ibc_shmar_idle_check()) stops
 * waiting. @coll: [in] communicator (no segment: nothing). Blocking: no.
 */
void ibc_shmar_leave(struct ibc_coll *coll)
{
	struct ibc_shmar *s = coll->shmar;

	if (s && s->base && !s->failed && coll->net)
		__atomic_store_n(&s->line[coll->net->rank].left, 1, __ATOMIC_RELEASE);
}
