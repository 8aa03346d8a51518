/* SPDX-License-Identifier: MIT */
/*
 * net.c - what the layers above use to talk to peers (net.h): connection
 * set-up, posted sends and receives dispatched to each peer's transport,
 * and the bounded waits.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/check.h"
#include "base/coll_kind.h"
#include "base/log.h"
#include "base/param.h"
#include "base/status.h"
#include "base/util.h"
#include "net/net.h"

/* polls of a wait before its first clock read, where spinning is allowed */
#define NET_FAST_POLLS 32
/* adaptive spinning (ibc_net_wait_spin_begin()) */
#define NET_SPIN_COLO 2         /* waits in a row that mark a co-located peer */
#define NET_SPIN_YIELD_AWAY_NS 2000 /* a first yield this long ran another task */
#define NET_SPIN_SKIP_MIN 64    /* waits that then do not spin: first this many, */
#define NET_SPIN_SKIP_MAX 1024  /* doubling at each finding in a row up to this */
#define NET_SPIN_NAP_NS 20000   /* the sleep at a finding (the scheduler may move us) */
#define NET_SPIN_ALONE 4        /* skipping waits in a row alone on the core that end the skip */
#define NET_SPIN_SKIP_NS 20000000ull /* and at most this long: a finding goes stale */

void ibc_net_yield(struct ibc_net_spin *sp)
{
	uint64_t t0;

	if (sp->yields++) {
		sched_yield();
		return;
	}
	/* the first yield of a wait is timed: did it run another task? */
	t0 = ibc_time_ns();
	sched_yield();
	sp->yield1_ns = ibc_time_ns() - t0;
}

/* ibc_net_cpu_assign(): net.h */
int ibc_net_cpu_assign(const cpu_set_t *masks, int n, int who)
{
	cpu_set_t taken;
	int i;

	CPU_ZERO(&taken);
	for (i = 0; i < n && i <= who; i++) {
		int c;

		for (c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &masks[i]) && !CPU_ISSET(c, &taken))
				break;
		if (c == CPU_SETSIZE) {
			if (i == who)
				return -1;
			continue;
		}
		if (i == who)
			return c;
		CPU_SET(c, &taken);
	}
	return -1;
}

/* ibc_net_spin_move(): net.h; why: the sched_vcpu_pack note in bench/RESULTS.md (issue 22) */
void ibc_net_spin_move(struct ibc_net *net)
{
	cpu_set_t orig;
	cpu_set_t one;
	int cpu = sched_getcpu();
	int want = net->spin_cpu;

	if (want < 0 || cpu < 0 || cpu == want || sched_getaffinity(0, sizeof(orig), &orig) != 0 ||
	    !CPU_ISSET(want, &orig))
		return;
	CPU_ZERO(&one);
	CPU_SET(want, &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0)
		return;
	if (sched_setaffinity(0, sizeof(orig), &orig) != 0)
		IBC_LOG_WARN(NET, "rank %d: moved to CPU %d, but restoring the thread's CPU mask failed: %s",
			     net->rank, want, strerror(errno));
	IBC_LOG_DEBUG(NET, "rank %d: a peer shared CPU %d: moved to CPU %d (local rank %d of %d)",
		      net->rank, cpu, want, net->local_rank, net->nlocal);
	__atomic_add_fetch(&net->spin_moves, 1, __ATOMIC_RELAXED);
}

void ibc_net_wait_spin_begin(struct ibc_net *net, struct ibc_net_spin *sp)
{
	unsigned skip = __atomic_load_n(&net->spin_skip, __ATOMIC_RELAXED);

	memset(sp, 0, sizeof(*sp));
	if (skip && ibc_time_coarse_ns() - __atomic_load_n(&net->spin_skip_ns, __ATOMIC_RELAXED) >
			    NET_SPIN_SKIP_NS) {
		/*
		 * The finding is older than NET_SPIN_SKIP_NS: what shared the core
		 * then (a busy start-up, another job) may be gone, and a job that
		 * paused (evaluation, a checkpoint) should not resume yielding for
		 * the rest of an old skip. Spin again; a sharing that persists is
		 * found again after NET_SPIN_COLO waits.
		 */
		__atomic_store_n(&net->spin_skip, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&net->spin_skip_len, NET_SPIN_SKIP_MIN, __ATOMIC_RELAXED);
		skip = 0;
	}
	sp->spin_ns = skip ? 0 : net->spin_ns;
}

void ibc_net_wait_spin_end(struct ibc_net *net, const struct ibc_net_spin *sp)
{
	unsigned skip = __atomic_load_n(&net->spin_skip, __ATOMIC_RELAXED);
	unsigned len = __atomic_load_n(&net->spin_skip_len, __ATOMIC_RELAXED);
	struct timespec nap = { 0, NET_SPIN_NAP_NS };
	unsigned colo;

	if (!sp->polled || !net->spin_ns)
		return;         /* nothing to wait for, or never spinning */
	if (skip) {             /* a wait that did not spin: one fewer to skip */
		if (sp->yields && sp->yield1_ns < NET_SPIN_YIELD_AWAY_NS) {
			/*
			 * Its first yield came back at once: nothing else to run on
			 * this core, the peer it waited for runs elsewhere.
			 * NET_SPIN_ALONE such waits in a row end the skip.
			 */
			unsigned alone = __atomic_load_n(&net->spin_alone, __ATOMIC_RELAXED) + 1;

			if (alone >= NET_SPIN_ALONE) {
				__atomic_store_n(&net->spin_alone, 0, __ATOMIC_RELAXED);
				__atomic_store_n(&net->spin_skip, 0, __ATOMIC_RELAXED);
				__atomic_store_n(&net->spin_skip_len, NET_SPIN_SKIP_MIN, __ATOMIC_RELAXED);
				IBC_LOG_DEBUG(NET, "%u waits in a row had this rank's core to themselves: spinning again (%u waits were left to skip)",
					      alone, skip);
				return;
			}
			__atomic_store_n(&net->spin_alone, alone, __ATOMIC_RELAXED);
		} else if (sp->yields) {
			__atomic_store_n(&net->spin_alone, 0, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&net->spin_skip, skip - 1, __ATOMIC_RELAXED);
		return;
	}
	if (sp->yields == 0) {
		/*
		 * It ended while this rank spun: where that took longer than the
		 * first polls, the peer made progress meanwhile, on another core.
		 * Within them, no verdict: a peer on this core may just have run.
		 */
		if (!sp->timed)
			return;
		__atomic_store_n(&net->spin_colo, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&net->spin_skip_len, NET_SPIN_SKIP_MIN, __ATOMIC_RELAXED);
		return;
	}
	if (sp->yield1_ns < NET_SPIN_YIELD_AWAY_NS) {
		/* its first yield came back at once: nothing else wanted this
		 * core (the peer is busy elsewhere), which breaks a run of findings */
		__atomic_store_n(&net->spin_colo, 0, __ATOMIC_RELAXED);
		return;
	}
	colo = __atomic_load_n(&net->spin_colo, __ATOMIC_RELAXED) + 1;
	if (colo < NET_SPIN_COLO) {
		__atomic_store_n(&net->spin_colo, colo, __ATOMIC_RELAXED);
		return;
	}
	len = IBC_MAX(len, NET_SPIN_SKIP_MIN);
	__atomic_store_n(&net->spin_colo, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&net->spin_alone, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&net->spin_skip_ns, ibc_time_coarse_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&net->spin_skip, len, __ATOMIC_RELAXED);
	__atomic_store_n(&net->spin_skip_len, IBC_MIN(2 * len, NET_SPIN_SKIP_MAX), __ATOMIC_RELAXED);
	/*
	 * A short sleep takes this rank off its core's run queue: where another
	 * core is idle, the scheduler wakes it there (its wake-up placement
	 * looks for an idle core), which ends the sharing; a yield never moves
	 * it. In 20 back-to-back 2-rank runs the median 8-byte all-reduce went
	 * from 1.02 to 0.55 us with it.
	 */
	ibc_net_spin_move(net);
	nanosleep(&nap, NULL);
	if (!__atomic_exchange_n(&net->spin_logged, 1, __ATOMIC_RELAXED))
		IBC_LOG_INFO(NET, "%d waits in a row spun %llu us and then gave the core away at their first yield: another rank, or another process, shares this rank's core; the next %u waits yield at once, then spin again (logged once)",
			     NET_SPIN_COLO, (unsigned long long)(net->spin_ns / 1000), len);
	else
		IBC_LOG_DEBUG(NET, "a peer shares this rank's core again: the next %u waits yield at once",
			      len);
}

static void *net_ctx(struct ibc_net *net, const struct ibc_transport_ops *ops)
{
	int i;

	for (i = 0; i < net->ntinst; i++)
		if (net->tinst[i].ops == ops)
			return net->tinst[i].ctx;
	return NULL;
}

/* no progress for this long inside a collective: ask the waited peer (ibc_net_stall_probe()) */
static uint64_t net_probe_after_ns(const struct ibc_net *net)
{
	return (uint64_t)IBC_MIN(500, IBC_MAX(net->timeout_ms / 4, 1)) * 1000000ull;
}

/* one nonblocking connect pass over @peers: counts those still pending */
static ibc_status_t net_connect_pass(struct ibc_net *net, const int *peers, int npeers,
				     int *npending_p, int *progressed_p)
{
	int i;

	*npending_p = 0;
	*progressed_p = 0;
	for (i = 0; i < npeers; i++) {
		int p = peers[i];
		struct ibc_peer *pe;
		ibc_status_t st;

		if (p < 0 || p >= net->nranks || p == net->rank)
			continue;
		pe = &net->peers[p];
		if (pe->conn)
			continue;
		st = pe->ops->connect(net_ctx(net, pe->ops), p, &pe->conn);
		if (st == IBC_OK) {
			*progressed_p = 1;
			IBC_LOG_DEBUG(NET, "connected to rank %d over %s", p, pe->ops->name);
			continue;
		}
		if (st != IBC_INPROGRESS) {
			char why[512];

			pe->conn = NULL;
			if (ibc_net_status(net) != IBC_OK)
				return ibc_net_status(net);
			snprintf(why, sizeof(why), "%s", ibc_log_strip_rank(ibc_last_error()));
			/* a peer that left or refused may have called something else: the better cause */
			if (ibc_net_check_strays(net, 0) != IBC_OK)
				return ibc_net_status(net);
			return ibc_net_fail(net, st, p, "connection set-up over %s failed: %s",
					     pe->ops->name, *why ? why : ibc_status_str(st));
		}
		(*npending_p)++;
	}
	return IBC_OK;
}

ibc_status_t ibc_net_connect_try(struct ibc_net *net, int peer)
{
	int npending;
	int progressed;

	IBC_CHECK(net_connect_pass(net, &peer, 1, &npending, &progressed));
	return npending ? IBC_INPROGRESS : IBC_OK;
}

/* the first of @peers still without a connection, or -1 */
static int net_unconnected(const struct ibc_net *net, const int *peers, int npeers)
{
	int i;

	for (i = 0; i < npeers; i++)
		if (peers[i] >= 0 && peers[i] != net->rank && peers[i] < net->nranks &&
		    !net->peers[peers[i]].conn)
			return peers[i];
	return -1;
}

/*
 * ibc_net_connect() body. A connection set-up waits on its peer: the wait
 * is published for wait-for queries, and at the deadline the chain from
 * that peer names the culprit (a peer that never enters the library cannot
 * complete a handshake).
 */
static ibc_status_t net_connect_body(struct ibc_net *net, const int *peers, int npeers)
{
	/* inside an operation, a lazy set-up is bounded by the operation's IBC_TIMEOUT_MS too */
	int64_t limit_ms = ibc_param_bootstrap_timeout_ms();
	const char *limit_name = "IBC_BOOTSTRAP_TIMEOUT_MS";
	uint64_t deadline = 0;
	uint64_t start_ns = ibc_time_ns();
	uint64_t probe_ns = 0;
	int waiting = -1;
	int npending;

	if (__atomic_load_n(&net->in_op, __ATOMIC_RELAXED) && net->timeout_ms < limit_ms) {
		limit_ms = net->timeout_ms;
		limit_name = "IBC_TIMEOUT_MS";
	}

	for (;;) {
		int progressed;
		int peer;

		IBC_CHECK(net_connect_pass(net, peers, npeers, &npending, &progressed));
		if (!npending)
			return IBC_OK;
		if (ibc_net_status(net) != IBC_OK)
			return ibc_net_status(net);
		peer = net_unconnected(net, peers, npeers);
		if (peer != waiting) {
			ibc_net_wait_publish(net, peer, ibc_time_ms());
			waiting = peer;
			start_ns = ibc_time_ns();
		}
		if (!deadline)
			deadline = ibc_time_ms() + (uint64_t)limit_ms;
		if (ibc_time_ms() <= deadline) {
			/* a peer that called something else may never connect */
			uint64_t now = ibc_time_ns();

			IBC_CHECK(ibc_net_check_strays(net, 1000));
			if (now - start_ns > net_probe_after_ns(net) && now - probe_ns > 2000000000ull) {
				probe_ns = now;
				IBC_CHECK(ibc_net_stall_probe(net, peer, 2));
			}
			if (!progressed)
				usleep(200);
			continue;
		}
		return ibc_net_fail_stalled(net, peer, peer,
					     "connection set-up with rank %d did not complete within %lld ms (%s)",
					     peer, (long long)limit_ms, limit_name);
	}
}

ibc_status_t ibc_net_connect(struct ibc_net *net, const int *peers, int npeers)
{
	ibc_status_t st = net_connect_body(net, peers, npeers);

	ibc_net_wait_clear(net);
	return st;
}

ibc_status_t ibc_net_isend(struct ibc_net *net, int peer, const void *buf, size_t nbytes,
			   const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	struct ibc_peer *pe = &net->peers[peer];

	req->done = 0;
	req->status = IBC_OK;
	req->nbytes = nbytes;
	req->peer = peer;
	req->is_send = 1;
	req->counted = 0;
	req->moved_p = &net->cur_bytes_done;
	net->cur_bytes_total += nbytes;
	if (desc->coll != IBC_COLL_SEND && desc->coll != IBC_COLL_RECV)
		__atomic_add_fetch(&pe->coll_sent, 1, __ATOMIC_RELAXED);
	return pe->ops->isend(pe->conn, buf, nbytes, desc, req);
}

ibc_status_t ibc_net_irecv(struct ibc_net *net, int peer, void *buf, size_t nbytes,
			   const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	struct ibc_peer *pe = &net->peers[peer];

	req->done = 0;
	req->status = IBC_OK;
	req->nbytes = nbytes;
	req->peer = peer;
	req->is_send = 0;
	req->counted = 0;
	req->moved_p = &net->cur_bytes_done;
	net->cur_bytes_total += nbytes;
	if (desc->coll != IBC_COLL_SEND && desc->coll != IBC_COLL_RECV)
		__atomic_add_fetch(&pe->coll_recvd, 1, __ATOMIC_RELAXED);
	return pe->ops->irecv(pe->conn, buf, nbytes, desc, req);
}

ibc_status_t ibc_net_progress(struct ibc_net *net)
{
	int i;

	for (i = 0; i < net->ntinst; i++) {
		ibc_status_t st = net->tinst[i].ops->progress(net->tinst[i].ctx);

		if (st != IBC_OK)
			return st;
	}
	return ibc_net_status(net);
}

void ibc_net_idle(struct ibc_net *net, int timeout_us)
{
	if (net->ntinst == 1) {
		net->tinst[0].ops->wait(net->tinst[0].ctx, timeout_us);
	} else if (net->ntinst > 1) {
		int i;

		for (i = 0; i < net->ntinst; i++)
			net->tinst[i].ops->wait(net->tinst[i].ctx, IBC_MAX(timeout_us / net->ntinst / 8, 20));
	} else {
		usleep((useconds_t)timeout_us);
	}
}

/*
 * the peer a wait on @reqs waits on: the first pending receive, else the
 * first pending send; *@is_send_p (may be NULL) says which
 */
static int net_waited_peer_kind(struct ibc_treq *const *reqs, int n, int *is_send_p)
{
	int send_peer = -1;
	int i;

	for (i = 0; i < n; i++) {
		if (!reqs[i] || ibc_treq_is_done(reqs[i]))
			continue;
		if (!reqs[i]->is_send) {
			if (is_send_p)
				*is_send_p = 0;
			return reqs[i]->peer;
		}
		if (send_peer < 0)
			send_peer = reqs[i]->peer;
	}
	if (is_send_p)
		*is_send_p = 1;
	return send_peer;
}

static int net_waited_peer(struct ibc_treq *const *reqs, int n)
{
	return net_waited_peer_kind(reqs, n, NULL);
}


/*
 * No progress for IBC_TIMEOUT_MS: name the direct peers and follow the
 * wait-for chain from the one this rank waits on (ibc_net_fail_stalled()).
 */
static ibc_status_t net_timeout(struct ibc_net *net, struct ibc_treq *const *reqs, int n)
{
	char who[256];
	size_t len = 0;
	int i;

	who[0] = '\0';
	for (i = 0; i < n && len < sizeof(who) - 48; i++) {
		if (!reqs[i] || ibc_treq_is_done(reqs[i]))
			continue;
		len += (size_t)snprintf(who + len, sizeof(who) - len, "%s%s rank %d (host %s)",
					len ? "," : "", reqs[i]->is_send ? " sending to" : " receiving from",
					reqs[i]->peer, ibc_net_peer_host(net, reqs[i]->peer));
	}
	return ibc_net_fail_stalled(net, net_waited_peer(reqs, n), -1,
				     "no progress for %lld ms (IBC_TIMEOUT_MS) while%s",
				     (long long)net->timeout_ms, who);
}

/* @any: 0 all, 1 any, 2 any or a p2p operation at the queue head (IBC_INPROGRESS) */
static ibc_status_t net_wait_body(struct ibc_net *net, struct ibc_treq *const *reqs, int n,
				  int any, struct ibc_net_spin *sp)
{
	uint64_t spin_ns = sp->spin_ns;
	uint64_t yield_ns = spin_ns + (uint64_t)ibc_param_yield_us() * 1000;
	uint64_t now;
	uint64_t last_ns = 0;
	uint64_t probe_ns = 0;
	int ndone_prev = -1;
	int idle_us = 20;
	int fast = spin_ns ? NET_FAST_POLLS : 0;

	for (;;) {
		ibc_status_t st = ibc_net_progress(net);
		int ndone = 0;
		int i;

		if (st != IBC_OK)
			return st;
		for (i = 0; i < n; i++) {
			if (!reqs[i])
				continue;
			if (!ibc_treq_is_done(reqs[i]))
				continue;
			if (reqs[i]->status != IBC_OK)
				return reqs[i]->status;
			ndone++;
		}
		if (any && ndone > 0)
			return IBC_OK;
		if (any == 2 && __atomic_load_n(&net->yield_p2p, __ATOMIC_ACQUIRE))
			return IBC_INPROGRESS;
		for (i = 0; i < n; i++)
			if (reqs[i] && !ibc_treq_is_done(reqs[i]))
				break;
		if (i == n)
			return IBC_OK;
		sp->polled = 1;  /* it had to wait */
		/* where spinning is allowed, the first polls go without the clock
		 * (the wait of a small message ends within a few of them) */
		if (fast > 0) {
			fast--;
			ibc_cpu_relax();
			continue;
		}
		sp->timed = 1;
		now = ibc_time_ns();
		if (ndone != ndone_prev) {
			last_ns = now;
			idle_us = 20;
			ndone_prev = ndone;
			ibc_net_wait_publish(net, net_waited_peer(reqs, n), now / 1000000);
		}
		if (__atomic_load_n(&net->aborting, __ATOMIC_ACQUIRE))
			return ibc_net_status(net) != IBC_OK ? ibc_net_status(net)
								       : IBC_ERR_REMOTE;
		if (now - last_ns > (uint64_t)net->timeout_ms * 1000000ull)
			return net_timeout(net, reqs, n);
		/* idle: spin (cores to spare), then yield (let a co-located peer
		 * run), then sleep in the transports' wait() */
		if (now - last_ns < spin_ns) {
			ibc_cpu_relax();
			continue;
		}
		if (now - last_ns < yield_ns) {
			ibc_net_yield(sp);
			continue;
		}
		/* a wait that lasts: is a peer's message for another call waiting? */
		IBC_CHECK(ibc_net_check_strays(net, 1000));
		/* longer: has the peer finished this collective without what we wait for? */
		if (now - last_ns > net_probe_after_ns(net) && now - probe_ns > 2000000000ull) {
			int is_send = 0;
			int peer = net_waited_peer_kind(reqs, n, &is_send);

			probe_ns = now;
			IBC_CHECK(ibc_net_stall_probe(net, peer, is_send));
		}
		ibc_net_idle(net, idle_us);
		idle_us = IBC_MIN(idle_us * 2, 2000);
	}
}

/* net_wait_body() with this rank's wait published for peers' wait-for queries */
static ibc_status_t net_wait(struct ibc_net *net, struct ibc_treq *const *reqs, int n, int any)
{
	struct ibc_net_spin sp;
	ibc_status_t st;

	ibc_net_wait_spin_begin(net, &sp);
	st = net_wait_body(net, reqs, n, any, &sp);
	ibc_net_wait_clear(net);
	ibc_net_wait_spin_end(net, &sp);
	return st;
}

ibc_status_t ibc_net_waitall(struct ibc_net *net, struct ibc_treq *const *reqs, int n)
{
	return net_wait(net, reqs, n, 0);
}

ibc_status_t ibc_net_waitany(struct ibc_net *net, struct ibc_treq *const *reqs, int n)
{
	return net_wait(net, reqs, n, 1);
}

ibc_status_t ibc_net_wait1(struct ibc_net *net, struct ibc_treq *req)
{
	struct ibc_treq *reqs[1] = { req };

	return net_wait(net, reqs, 1, 0);
}

ibc_status_t ibc_net_wait_p2p(struct ibc_net *net, struct ibc_treq *const *reqs, int n)
{
	return net_wait(net, reqs, n, 2);
}

ibc_status_t ibc_net_test(struct ibc_net *net, struct ibc_treq *req, int *done_p)
{
	IBC_CHECK(ibc_net_progress(net));
	*done_p = ibc_treq_is_done(req);
	if (*done_p && req->status != IBC_OK)
		return req->status;
	return IBC_OK;
}

void ibc_net_op_done(struct ibc_net *net, const struct ibc_op *op)
{
	if (ibc_coll_is_p2p(op->coll))
		return;
	ibc_op_desc(op, &net->done[op->seq % IBC_ARRAY_SIZE(net->done)]);
	__atomic_store_n(&net->done_seq, op->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&net->done_valid, 1, __ATOMIC_RELEASE);
}

/* @a is later than @b in sequence order (32-bit numbers that wrap) */
static int seq_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/* the message @d waiting from @peer: a stray? Then fail, naming both sides */
static ibc_status_t net_stray(struct ibc_net *net, int peer, const struct ibc_msg_desc *d,
			      size_t nbytes)
{
	const struct ibc_op *cur = net->cur;
	struct ibc_msg_desc mine;
	size_t my_nbytes = 0;
	size_t esz;
	char a[300];
	char b[300];

	if (d->coll == IBC_COLL_SEND || d->coll == IBC_COLL_RECV)
		return IBC_OK;  /* point-to-point: may arrive before its receive */
	if (cur && !ibc_coll_is_p2p(cur->coll) && d->seq == cur->seq) {
		/* the collective this rank runs: internal exchanges carry their own kind */
		if ((d->flags & IBC_DESC_F_INTERNAL) ||
		    __atomic_load_n(&net->cur_tuning, __ATOMIC_RELAXED) ||
		    (d->coll == cur->coll && (!ibc_coll_has_root(cur->coll) || d->root == cur->root)))
			return IBC_OK;  /* unrooted collectives carry a block number in root */
		ibc_op_desc(cur, &mine);
		if (ibc_dtype_size(cur->dtype, &esz) == IBC_OK)
			my_nbytes = cur->count * esz;
		ibc_msg_desc_text(d, nbytes, a, sizeof(a));
		ibc_msg_desc_text(&mine, my_nbytes, b, sizeof(b));
		return ibc_net_fail(net, IBC_ERR_INVALID_USAGE, peer,
				    "mismatched calls: rank %d sent %s, which no call of this rank receives: this rank runs %s",
				    peer, a, b);
	}
	if (!net->done_valid || seq_after(d->seq, net->done_seq))
		return IBC_OK;  /* for a collective this rank has not reached */
	ibc_msg_desc_text(d, nbytes, a, sizeof(a));
	mine = net->done[d->seq % IBC_ARRAY_SIZE(net->done)];
	if (mine.seq == d->seq && (mine.coll != 0 || mine.count != 0)) {
		ibc_msg_desc_text(&mine, 0, b, sizeof(b));
		b[strcspn(b, "(")] = '\0';
	} else {
		snprintf(b, sizeof(b), "collective #%u", d->seq);
	}
	return ibc_net_fail(net, IBC_ERR_INVALID_USAGE, peer,
			    "mismatched calls: rank %d sent %s, which no call of this rank receives: this rank completed %swithout it",
			    peer, a, b);
}

ibc_status_t ibc_net_check_strays(struct ibc_net *net, unsigned min_gap_us)
{
	return ibc_net_check_strays_at(net, min_gap_us, ibc_time_ns());
}

ibc_status_t ibc_net_check_strays_at(struct ibc_net *net, unsigned min_gap_us, uint64_t now)
{
	int p;

	/* signed: a coarse @now may lag the fine time of the last check */
	if (min_gap_us && (int64_t)(now - net->stray_check_ns) < (int64_t)min_gap_us * 1000)
		return ibc_net_status(net);
	net->stray_check_ns = now;
	for (p = 0; p < net->nranks && ibc_net_status(net) == IBC_OK; p++) {
		struct ibc_peer *pe = &net->peers[p];
		struct ibc_msg_desc d;
		size_t nbytes = 0;

		if (p == net->rank || !pe->conn || !pe->ops->peek || !pe->ops->peek(pe->conn, &d, &nbytes))
			continue;
		IBC_CHECK(net_stray(net, p, &d, nbytes));
	}
	return ibc_net_status(net);
}

ibc_status_t ibc_net_desc_check(struct ibc_net *net, int peer, const struct ibc_msg_desc *mine,
				size_t my_nbytes, const struct ibc_msg_desc *theirs,
				size_t their_nbytes)
{
	char text[768];

	if (!ibc_msg_desc_mismatch(mine, my_nbytes, theirs, their_nbytes, text, sizeof(text)))
		return IBC_OK;
	return ibc_net_fail(net, IBC_ERR_INVALID_USAGE, peer, "%s", text);
}
