/* SPDX-License-Identifier: MIT */
/*
 * p2p.c - operations built directly on point-to-point messages: send/recv,
 * all-to-all (pairwise exchange: step s sends to r+s and receives from r-s,
 * n-1 steps) and the barrier (dissemination, Hensgen, Finkel & Manber 1988:
 * round k signals rank r+2^k and waits for rank r-2^k, ceil(log2 n) rounds).
 */
#include "config.h"

#include "base/alloc.h"
#include "base/check.h"
#include "coll/algo.h"

enum { PHASE_P2P = 5, PHASE_A2A = 6, PHASE_BARRIER = 7 };

/*
 * ibc_coll_p2p_post() - post the transfer of host send/receive @op (count
 * > 0) on its peer's connection into @tr; the caller waits for @tr. An
 * unconnected peer is connected first: blocking when @nowait is 0, else one
 * handshake step and IBC_INPROGRESS (nothing posted; call again) until the
 * connection is up. Used by ibc_coll_p2p() and by the
 * executor's p2p batch (coll.c), which keeps consecutive sends and receives
 * in flight together so that isend-then-irecv pairs between two ranks
 * cannot deadlock.
 */
ibc_status_t ibc_coll_p2p_post(struct ibc_coll *coll, struct ibc_op *op, struct ibc_treq *tr,
			       int nowait)
{
	struct ibc_msg_desc d;
	size_t esz;

	if (op->tagged)
		return ibc_coll_tag_post(coll, op, tr);
	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	if (nowait)
		IBC_CHECK(ibc_net_connect_try(coll->net, op->root));
	else
		IBC_CHECK(ibc_net_connect(coll->net, &op->root, 1));
	ibc_coll_desc(op, IBC_COLL_STEP(PHASE_P2P, 0, 0), 0, &d);
	d.root = -1;
	if (op->coll == IBC_COLL_SEND)
		return ibc_net_isend(coll->net, op->root, op->sendbuf, op->count * esz, &d, tr);
	return ibc_net_irecv(coll->net, op->root, op->recvbuf, op->count * esz, &d, tr);
}

/* one send or receive, posted and waited for (the executor's batch covers host p2p) */
ibc_status_t ibc_coll_p2p(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_treq tr;

	IBC_CHECK(ibc_coll_p2p_post(coll, op, &tr, 0));
	return ibc_net_wait1(coll->net, &tr);
}

ibc_status_t ibc_coll_alltoall(struct ibc_coll *coll, struct ibc_op *op)
{
	int n = coll->net->nranks;
	int r = coll->net->rank;
	size_t esz;
	size_t blk;
	int *peers;
	int s;
	ibc_status_t st = IBC_OK;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	blk = op->count * esz;
	memcpy((char *)op->recvbuf + (size_t)r * blk, (const char *)op->sendbuf + (size_t)r * blk,
	       blk);
	if (n == 1)
		return IBC_OK;
	peers = ibc_malloc((size_t)n * sizeof(int), "alltoall peers");
	if (!peers)
		return IBC_ERR_NO_MEMORY;
	for (s = 0; s < n; s++)
		peers[s] = s;
	st = ibc_net_connect(coll->net, peers, n);
	ibc_free(peers);
	IBC_CHECK(st);
	for (s = 1; s < n; s++) {
		int to = (r + s) % n;
		int from = (r - s + n) % n;
		struct ibc_treq tr[2];
		struct ibc_treq *w[2] = { &tr[0], &tr[1] };
		struct ibc_msg_desc d;

		ibc_coll_desc(op, IBC_COLL_STEP(PHASE_A2A, s, 0), 0, &d);
		IBC_CHECK(ibc_net_irecv(coll->net, from, (char *)op->recvbuf + (size_t)from * blk, blk, &d,
					&tr[0]));
		IBC_CHECK(ibc_net_isend(coll->net, to, (const char *)op->sendbuf + (size_t)to * blk, blk,
					&d, &tr[1]));
		IBC_CHECK(ibc_net_waitall(coll->net, w, 2));
	}
	return IBC_OK;
}

ibc_status_t ibc_coll_barrier(struct ibc_coll *coll, struct ibc_op *op)
{
	int n = coll->net->nranks;
	int r = coll->net->rank;
	int peers[64] = { 0 };
	int np = 0;
	int k;
	char dummy = 0;

	if (n == 1)
		return IBC_OK;
	for (k = 1; k < n; k <<= 1) {
		peers[np++] = (r + k) % n;
		peers[np++] = (r - k + n) % n;
	}
	IBC_CHECK(ibc_net_connect(coll->net, peers, np));
	for (k = 1; k < n; k <<= 1) {
		struct ibc_treq tr[2];
		struct ibc_treq *w[2] = { &tr[0], &tr[1] };
		struct ibc_msg_desc d;
		char in;

		ibc_coll_desc(op, IBC_COLL_STEP(PHASE_BARRIER, k, 0), 0, &d);
		IBC_CHECK(ibc_net_irecv(coll->net, (r - k + n) % n, &in, 0, &d, &tr[0]));
		IBC_CHECK(ibc_net_isend(coll->net, (r + k) % n, &dummy, 0, &d, &tr[1]));
		IBC_CHECK(ibc_net_waitall(coll->net, w, 2));
	}
	return IBC_OK;
}
