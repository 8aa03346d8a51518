/* SPDX-License-Identifier: MIT */
/*
 * vcoll.c - the rooted and the vector collectives on point-to-point
 * messages:
 *  - gather: every rank sends its block to the root, which has all n-1
 *    receives in flight at once (MPI's linear gather); scatter: its mirror;
 *  - allgatherv: a ring, n-1 steps; in step s rank r sends block (r - s)
 *    to r + 1 and receives block (r - s - 1) from r - 1, each block whole,
 *    with its own count and offset;
 *  - alltoallv: pairwise exchange, n-1 steps (step s: send to r + s,
 *    receive from r - s), the pair's counts and offsets.
 * Every message's descriptor carries the block's count, so ranks that pass
 * different counts for one block fail with mismatched calls.
 */
#include "config.h"

#include <string.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/coll_kind.h"
#include "base/util.h"
#include "coll/algo.h"

enum { PHASE_GATHER = 8, PHASE_SCATTER = 9, PHASE_AGV = 10, PHASE_A2AV = 11 };

/* connect to every peer (vector collectives talk to all) */
static ibc_status_t connect_all(struct ibc_net *net)
{
	int *peers = ibc_malloc((size_t)net->nranks * sizeof(int), "peer list");
	ibc_status_t st;
	int i;

	if (!peers)
		return ibc_net_fail(net, IBC_ERR_NO_MEMORY, -1, "out of memory listing peers");
	for (i = 0; i < net->nranks; i++)
		peers[i] = i;
	st = ibc_net_connect(net, peers, net->nranks);
	ibc_free(peers);
	return st;
}

/*
 * the descriptor of one block of @op: @count elements of block @blk in step
 * @s; the block goes in the root field, except for the rooted collectives,
 * which keep their root there (ranks that disagree on it fail) and put the
 * block in the chunk bits of the step
 */
static void block_desc(const struct ibc_op *op, int phase, int s, int blk, size_t count,
		       struct ibc_msg_desc *d)
{
	int rooted = ibc_coll_has_root(op->coll);

	ibc_coll_desc(op, IBC_COLL_STEP(phase, s, rooted ? blk : 0), 0, d);
	d->count = count;
	if (!rooted)
		d->root = blk;
}

/* gather (@scatter 0) or scatter (1): the root's n-1 transfers in flight at once */
static ibc_status_t rooted(struct ibc_coll *coll, struct ibc_op *op, int scatter)
{
	struct ibc_net *net = coll->net;
	int n = net->nranks;
	int r = net->rank;
	int root = op->root;
	int phase = scatter ? PHASE_SCATTER : PHASE_GATHER;
	char *all = scatter ? (char *)op->sendbuf : (char *)op->recvbuf;   /* root's n blocks */
	struct ibc_treq **w;
	struct ibc_treq *tr;
	struct ibc_msg_desc d;
	ibc_status_t st = IBC_OK;
	size_t esz;
	size_t blk;
	int p;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	blk = op->count * esz;
	if (r != root) {
		struct ibc_treq one;

		IBC_CHECK(ibc_net_connect(net, &root, 1));
		block_desc(op, phase, 0, r, op->count, &d);
		if (scatter)
			IBC_CHECK(ibc_net_irecv(net, root, op->recvbuf, blk, &d, &one));
		else
			IBC_CHECK(ibc_net_isend(net, root, op->sendbuf, blk, &d, &one));
		return ibc_net_wait1(net, &one);
	}
	/* the root's own block: unless in place */
	if (scatter && op->recvbuf != all + (size_t)r * blk)
		memmove(op->recvbuf, all + (size_t)r * blk, blk);
	if (!scatter && op->sendbuf != all + (size_t)r * blk)
		memmove(all + (size_t)r * blk, op->sendbuf, blk);
	if (n == 1)
		return IBC_OK;
	IBC_CHECK(connect_all(net));
	tr = ibc_calloc((size_t)n, sizeof(*tr), "gather/scatter requests");
	w = ibc_calloc((size_t)n, sizeof(*w), "gather/scatter waits");
	if (!tr || !w) {
		st = ibc_net_fail(net, IBC_ERR_NO_MEMORY, -1, "out of memory for %d requests", n);
		goto out;
	}
	for (p = 0; p < n; p++) {
		if (p == r)
			continue;
		block_desc(op, phase, 0, p, op->count, &d);
		if (scatter)
			st = ibc_net_isend(net, p, all + (size_t)p * blk, blk, &d, &tr[p]);
		else
			st = ibc_net_irecv(net, p, all + (size_t)p * blk, blk, &d, &tr[p]);
		if (st != IBC_OK)
			goto out;
		w[p] = &tr[p];
	}
	st = ibc_net_waitall(net, w, n);
out:
	ibc_free(w);
	ibc_free(tr);
	return st;
}

ibc_status_t ibc_coll_gather(struct ibc_coll *coll, struct ibc_op *op)
{
	return rooted(coll, op, 0);
}

ibc_status_t ibc_coll_scatter(struct ibc_coll *coll, struct ibc_op *op)
{
	return rooted(coll, op, 1);
}

ibc_status_t ibc_coll_allgatherv(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_net *net = coll->net;
	int n = net->nranks;
	int r = net->rank;
	const size_t *counts = op->v;
	const size_t *displs = op->v + n;
	char *rbuf = op->recvbuf;
	int next = (r + 1) % n;
	int prev = (r + n - 1) % n;
	size_t esz;
	int s;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	if (op->sendbuf != rbuf + displs[r] * esz && counts[r])
		memmove(rbuf + displs[r] * esz, op->sendbuf, counts[r] * esz);
	if (n == 1)
		return IBC_OK;
	{
		int peers[2] = { next, prev };

		IBC_CHECK(ibc_net_connect(net, peers, 2));
	}
	for (s = 0; s < n - 1; s++) {
		int sb = (r - s + n) % n;               /* the block this rank forwards */
		int rb = (r - s - 1 + n) % n;           /* the block it receives */
		struct ibc_treq tr[2];
		struct ibc_treq *w[2] = { &tr[0], &tr[1] };
		struct ibc_msg_desc ds;
		struct ibc_msg_desc dr;

		block_desc(op, PHASE_AGV, s, sb, counts[sb], &ds);
		block_desc(op, PHASE_AGV, s, rb, counts[rb], &dr);
		IBC_CHECK(ibc_net_irecv(net, prev, rbuf + displs[rb] * esz, counts[rb] * esz, &dr,
					&tr[0]));
		IBC_CHECK(ibc_net_isend(net, next, rbuf + displs[sb] * esz, counts[sb] * esz, &ds,
					&tr[1]));
		IBC_CHECK(ibc_net_waitall(net, w, 2));
	}
	return IBC_OK;
}

ibc_status_t ibc_coll_alltoallv(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_net *net = coll->net;
	int n = net->nranks;
	int r = net->rank;
	const size_t *scounts = op->v;
	const size_t *sdispls = op->v + n;
	const size_t *rcounts = op->v + 2 * n;
	const size_t *rdispls = op->v + 3 * n;
	const char *sbuf = op->sendbuf;
	char *rbuf = op->recvbuf;
	size_t esz;
	int s;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	if (scounts[r])
		memcpy(rbuf + rdispls[r] * esz, sbuf + sdispls[r] * esz, scounts[r] * esz);
	if (n == 1)
		return IBC_OK;
	IBC_CHECK(connect_all(net));
	for (s = 1; s < n; s++) {
		int to = (r + s) % n;
		int from = (r - s + n) % n;
		struct ibc_treq tr[2];
		struct ibc_treq *w[2] = { &tr[0], &tr[1] };
		struct ibc_msg_desc ds;
		struct ibc_msg_desc dr;

		/* the block a pair exchanges is named by its sender (root field) */
		block_desc(op, PHASE_A2AV, s, r, scounts[to], &ds);
		block_desc(op, PHASE_A2AV, s, from, rcounts[from], &dr);
		IBC_CHECK(ibc_net_irecv(net, from, rbuf + rdispls[from] * esz, rcounts[from] * esz,
					&dr, &tr[0]));
		IBC_CHECK(ibc_net_isend(net, to, sbuf + sdispls[to] * esz, scounts[to] * esz, &ds,
					&tr[1]));
		IBC_CHECK(ibc_net_waitall(net, w, 2));
	}
	return IBC_OK;
}
