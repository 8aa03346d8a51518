/* SPDX-License-Identifier: MIT */
/*
 * net.c - the layer between algorithms and transports (net.h).
 */
#include "config.h"

#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/status.h"
#include "base/util.h"
#include "net.h"

static void *net_ctx(struct ibc_comm *comm, const struct ibc_transport_ops *ops)
{
	int i;

	for (i = 0; i < comm->ntinst; i++)
		if (comm->tinst[i].ops == ops)
			return comm->tinst[i].ctx;
	return NULL;
}

/* one nonblocking connect pass over @peers: counts those still pending */
static ibc_status_t net_connect_pass(struct ibc_comm *comm, const int *peers, int npeers,
				     int *npending_p, int *progressed_p)
{
	int i;

	*npending_p = 0;
	*progressed_p = 0;
	for (i = 0; i < npeers; i++) {
		int p = peers[i];
		struct ibc_peer *pe;
		ibc_status_t st;

		if (p < 0 || p >= comm->nranks || p == comm->rank)
			continue;
		pe = &comm->peers[p];
		if (pe->conn)
			continue;
		st = pe->ops->connect(net_ctx(comm, pe->ops), p, &pe->conn);
		if (st == IBC_OK) {
			*progressed_p = 1;
			IBC_LOG_DEBUG(NET, "connected to rank %d over %s", p, pe->ops->name);
			continue;
		}
		if (st != IBC_INPROGRESS) {
			char why[512];

			pe->conn = NULL;
			if (ibc_comm_poison_status(comm) != IBC_OK)
				return ibc_comm_poison_status(comm);
			snprintf(why, sizeof(why), "%s", ibc_comm_strip_rank(ibc_last_error()));
			return ibc_comm_fail(comm, st, p, "connection set-up over %s failed: %s",
					     pe->ops->name, *why ? why : ibc_status_str(st));
		}
		(*npending_p)++;
	}
	return IBC_OK;
}

ibc_status_t ibc_net_connect_try(struct ibc_comm *comm, int peer)
{
	int npending;
	int progressed;

	IBC_CHECK(net_connect_pass(comm, &peer, 1, &npending, &progressed));
	return npending ? IBC_INPROGRESS : IBC_OK;
}

/* the first of @peers still without a connection, or -1 */
static int net_unconnected(const struct ibc_comm *comm, const int *peers, int npeers)
{
	int i;

	for (i = 0; i < npeers; i++)
		if (peers[i] >= 0 && peers[i] != comm->rank && peers[i] < comm->nranks &&
		    !comm->peers[peers[i]].conn)
			return peers[i];
	return -1;
}

/*
 * ibc_net_connect() body. A connection set-up waits on its peer: the wait
 * is published for wait-for queries, and at the deadline the chain from
 * that peer names the culprit (a peer that never enters the library cannot
 * complete a handshake).
 */
static ibc_status_t net_connect_body(struct ibc_comm *comm, const int *peers, int npeers)
{
	uint64_t deadline = 0;
	int waiting = -1;
	int npending;

	for (;;) {
		int progressed;
		int peer;

		IBC_CHECK(net_connect_pass(comm, peers, npeers, &npending, &progressed));
		if (!npending)
			return IBC_OK;
		if (ibc_comm_poison_status(comm) != IBC_OK)
			return ibc_comm_poison_status(comm);
		peer = net_unconnected(comm, peers, npeers);
		if (peer != waiting) {
			ibc_comm_wait_publish(comm, peer, ibc_time_ms());
			waiting = peer;
		}
		if (!deadline)
			deadline = ibc_time_ms() + (uint64_t)ibc_param_bootstrap_timeout_ms();
		if (ibc_time_ms() <= deadline) {
			if (!progressed)
				usleep(200);
			continue;
		}
		return ibc_comm_fail_stalled(comm, peer, peer,
					     "connection set-up with rank %d did not complete within %lld ms (IBC_BOOTSTRAP_TIMEOUT_MS)",
					     peer, (long long)ibc_param_bootstrap_timeout_ms());
	}
}

ibc_status_t ibc_net_connect(struct ibc_comm *comm, const int *peers, int npeers)
{
	ibc_status_t st = net_connect_body(comm, peers, npeers);

	ibc_comm_wait_clear(comm);
	return st;
}

ibc_status_t ibc_net_isend(struct ibc_comm *comm, int peer, const void *buf, size_t nbytes,
			   const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	struct ibc_peer *pe = &comm->peers[peer];

	req->done = 0;
	req->status = IBC_OK;
	req->nbytes = nbytes;
	req->peer = peer;
	req->is_send = 1;
	req->counted = 0;
	req->moved_p = &comm->cur_bytes_done;
	comm->cur_bytes_total += nbytes;
	return pe->ops->isend(pe->conn, buf, nbytes, desc, req);
}

ibc_status_t ibc_net_irecv(struct ibc_comm *comm, int peer, void *buf, size_t nbytes,
			   const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	struct ibc_peer *pe = &comm->peers[peer];

	req->done = 0;
	req->status = IBC_OK;
	req->nbytes = nbytes;
	req->peer = peer;
	req->is_send = 0;
	req->counted = 0;
	req->moved_p = &comm->cur_bytes_done;
	comm->cur_bytes_total += nbytes;
	return pe->ops->irecv(pe->conn, buf, nbytes, desc, req);
}

ibc_status_t ibc_net_progress(struct ibc_comm *comm)
{
	int i;

	for (i = 0; i < comm->ntinst; i++) {
		ibc_status_t st = comm->tinst[i].ops->progress(comm->tinst[i].ctx);

		if (st != IBC_OK)
			return st;
	}
	return ibc_comm_poison_status(comm);
}

static void net_idle(struct ibc_comm *comm, int timeout_us)
{
	if (comm->ntinst == 1) {
		comm->tinst[0].ops->wait(comm->tinst[0].ctx, timeout_us);
	} else if (comm->ntinst > 1) {
		int i;

		for (i = 0; i < comm->ntinst; i++)
			comm->tinst[i].ops->wait(comm->tinst[i].ctx, IBC_MAX(timeout_us / comm->ntinst / 8, 20));
	} else {
		usleep((useconds_t)timeout_us);
	}
}

/* the peer a wait on @reqs waits on: the first pending receive, else the first pending send */
static int net_waited_peer(struct ibc_treq *const *reqs, int n)
{
	int send_peer = -1;
	int i;

	for (i = 0; i < n; i++) {
		if (!reqs[i] || ibc_treq_is_done(reqs[i]))
			continue;
		if (!reqs[i]->is_send)
			return reqs[i]->peer;
		if (send_peer < 0)
			send_peer = reqs[i]->peer;
	}
	return send_peer;
}

/*
 * No progress for IBC_TIMEOUT_MS: name the direct peers and follow the
 * wait-for chain from the one this rank waits on (ibc_comm_fail_stalled()).
 */
static ibc_status_t net_timeout(struct ibc_comm *comm, struct ibc_treq *const *reqs, int n)
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
					reqs[i]->peer, ibc_comm_peer_host(comm, reqs[i]->peer));
	}
	return ibc_comm_fail_stalled(comm, net_waited_peer(reqs, n), -1,
				     "no progress for %lld ms (IBC_TIMEOUT_MS) while%s",
				     (long long)comm->timeout_ms, who);
}

/* @any: 0 all, 1 any, 2 any or a p2p operation at the queue head (IBC_INPROGRESS) */
static ibc_status_t net_wait_body(struct ibc_comm *comm, struct ibc_treq *const *reqs, int n,
				  int any)
{
	uint64_t spin_ns = comm->spin_ns;
	uint64_t yield_ns = spin_ns + (uint64_t)ibc_param_yield_us() * 1000;
	uint64_t now = ibc_time_ns();
	uint64_t last_ns = now;
	int ndone_prev = -1;
	int idle_us = 20;

	for (;;) {
		ibc_status_t st = ibc_net_progress(comm);
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
		now = ibc_time_ns();
		if (ndone != ndone_prev) {
			last_ns = now;
			idle_us = 20;
			ndone_prev = ndone;
			ibc_comm_wait_publish(comm, net_waited_peer(reqs, n), now / 1000000);
		}
		if (any && ndone > 0)
			return IBC_OK;
		if (any == 2 && __atomic_load_n(&comm->head_p2p, __ATOMIC_ACQUIRE))
			return IBC_INPROGRESS;
		for (i = 0; i < n; i++)
			if (reqs[i] && !ibc_treq_is_done(reqs[i]))
				break;
		if (i == n)
			return IBC_OK;
		if (__atomic_load_n(&comm->aborting, __ATOMIC_ACQUIRE))
			return ibc_comm_poison_status(comm) != IBC_OK ? ibc_comm_poison_status(comm)
								       : IBC_ERR_REMOTE;
		if (now - last_ns > (uint64_t)comm->timeout_ms * 1000000ull)
			return net_timeout(comm, reqs, n);
		/* idle: spin (cores to spare), then yield (let a co-located peer
		 * run), then sleep in the transports' wait() */
		if (now - last_ns < spin_ns) {
			ibc_cpu_relax();
			continue;
		}
		if (now - last_ns < yield_ns) {
			sched_yield();
			continue;
		}
		net_idle(comm, idle_us);
		idle_us = IBC_MIN(idle_us * 2, 2000);
	}
}

/* net_wait_body() with this rank's wait published for peers' wait-for queries */
static ibc_status_t net_wait(struct ibc_comm *comm, struct ibc_treq *const *reqs, int n, int any)
{
	ibc_status_t st = net_wait_body(comm, reqs, n, any);

	ibc_comm_wait_clear(comm);
	return st;
}

ibc_status_t ibc_net_waitall(struct ibc_comm *comm, struct ibc_treq *const *reqs, int n)
{
	return net_wait(comm, reqs, n, 0);
}

ibc_status_t ibc_net_waitany(struct ibc_comm *comm, struct ibc_treq *const *reqs, int n)
{
	return net_wait(comm, reqs, n, 1);
}

ibc_status_t ibc_net_wait1(struct ibc_comm *comm, struct ibc_treq *req)
{
	struct ibc_treq *reqs[1] = { req };

	return net_wait(comm, reqs, 1, 0);
}

ibc_status_t ibc_net_wait_p2p(struct ibc_comm *comm, struct ibc_treq *const *reqs, int n)
{
	return net_wait(comm, reqs, n, 2);
}

ibc_status_t ibc_net_test(struct ibc_comm *comm, struct ibc_treq *req, int *done_p)
{
	IBC_CHECK(ibc_net_progress(comm));
	*done_p = ibc_treq_is_done(req);
	if (*done_p && req->status != IBC_OK)
		return req->status;
	return IBC_OK;
}

ibc_status_t ibc_net_desc_check(struct ibc_comm *comm, int peer, const struct ibc_msg_desc *mine,
				size_t my_nbytes, const struct ibc_msg_desc *theirs,
				size_t their_nbytes)
{
	char text[512];

	if (!ibc_msg_desc_mismatch(mine, my_nbytes, theirs, their_nbytes, text, sizeof(text)))
		return IBC_OK;
	return ibc_comm_fail(comm, IBC_ERR_INVALID_USAGE, peer, "%s", text);
}
