/* SPDX-License-Identifier: MIT */
/*
 * p2p_tag.c - tagged sends and receives, and receives from any source
 * (ibc_isend_tag, ibc_irecv_tag), over transports that match messages in
 * posting order per direction.
 *
 * A tagged send posts an envelope { tag, sequence number, dtype, count }
 * through the net layer's out-of-band exchange (a queue per peer that a
 * receiver polls without posting anything), then its data on the pair's
 * connection. A tagged receive looks for a matching envelope: first among
 * those it already took (the unexpected list), then in the queues of its
 * source, or of every peer for IBC_ANY_SOURCE. The data of a peer must be
 * received in the order its envelopes came, so an envelope taken ahead of
 * its receive (another tag, or no receive yet) gets its data received into
 * a buffer of its own, copied out when its receive comes (MPI's eager
 * protocol with unexpected messages). Envelopes of one peer are taken in
 * order, so sends of one source and tag match receives in issue order.
 * Everything here runs in the executor's thread, in its batch of
 * point-to-point operations (src/api/exec.c).
 */
#include "config.h"

#include <string.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/status.h"
#include "base/util.h"
#include "base/wire.h"
#include "coll/algo.h"

enum { PHASE_TAG = 12 };

#define ENV_MAGIC 0x47415445u   /* "ETAG" */
#define ENV_BYTES 24

/* tag_state: a send's envelope went out; a receive's data receive is posted */
#define TAG_ENV_SENT 1
#define TAG_POSTED 2

/*
 * struct ibc_tag_ux - an envelope taken from @src before a receive took it.
 * @owner, @owner_tr: the receive bound to it while its data cannot be
 *                    posted yet (an earlier envelope of @src waits for its
 *                    connection); NULL otherwise.
 * @posted:           its data receive is posted (into @buf, or into the
 *                    owner's buffer, when the entry leaves the list).
 */
struct ibc_tag_ux {
	struct ibc_tag_ux *next;
	int src;
	int32_t tag;
	uint32_t seq;
	ibc_dtype_t dtype;
	size_t count;
	struct ibc_op *owner;
	struct ibc_treq *owner_tr;
	int posted;
	void *buf;
	struct ibc_treq tr;
};

static void env_pack(const struct ibc_op *op, uint8_t out[ENV_BYTES])
{
	ibc_wire_put32(out, ENV_MAGIC);
	ibc_wire_put32(out + 4, (uint32_t)op->tag);
	ibc_wire_put32(out + 8, op->seq);
	ibc_wire_put32(out + 12, (uint32_t)op->dtype);
	ibc_wire_put64(out + 16, op->count);
}

/* the descriptor of the data of a tagged message: the same on both ends */
static void data_desc(uint32_t seq, int32_t tag, ibc_dtype_t dtype, size_t count,
		      struct ibc_msg_desc *d)
{
	memset(d, 0, sizeof(*d));
	d->seq = seq;
	d->coll = IBC_COLL_SEND;
	d->dtype = (uint8_t)dtype;
	d->count = count;
	d->root = tag;
	d->step = IBC_COLL_STEP(PHASE_TAG, 0, 0);
}

static ibc_status_t tag_send(struct ibc_coll *coll, struct ibc_op *op, struct ibc_treq *tr)
{
	struct ibc_net *net = coll->net;
	uint8_t env[ENV_BYTES];
	struct ibc_msg_desc d;
	size_t esz;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	/*
	 * The envelope first: it needs no data connection, and the receiver
	 * steps its side of the connection's set-up only once it has taken an
	 * envelope from this rank (ux_advance()). Connecting first left a ring
	 * of first sends at 3 ranks waiting on each other's handshakes.
	 */
	if (!(op->tag_state & TAG_ENV_SENT)) {
		env_pack(op, env);
		IBC_CHECK(ibc_net_oob_send(net, op->root, IBC_NET_TAG_P2P_ENV, env, sizeof(env)));
		op->tag_state |= TAG_ENV_SENT;
	}
	IBC_CHECK(ibc_net_connect_try(net, op->root));
	data_desc(op->seq, op->tag, op->dtype, op->count, &d);
	return ibc_net_isend(net, op->root, op->sendbuf, op->count * esz, &d, tr);
}

/* post the data receive of @u into @buf (@tr) */
static ibc_status_t ux_post(struct ibc_coll *coll, struct ibc_tag_ux *u, void *buf,
			    struct ibc_treq *tr)
{
	struct ibc_msg_desc d;
	size_t esz;

	IBC_CHECK(ibc_dtype_size(u->dtype, &esz));
	data_desc(u->seq, u->tag, u->dtype, u->count, &d);
	return ibc_net_irecv(coll->net, u->src, buf, u->count * esz, &d, tr);
}

/* a receive's count and dtype against the send it matched: equal, or the communicator fails */
static ibc_status_t ux_check(struct ibc_coll *coll, const struct ibc_tag_ux *u,
			     const struct ibc_op *op)
{
	if (u->count == op->count && u->dtype == op->dtype)
		return IBC_OK;
	return ibc_net_fail(coll->net, IBC_ERR_INVALID_USAGE, u->src,
			    "mismatched tagged messages: this rank receives %zu %s with tag %d, the peer sent %zu %s",
			    op->count, ibc_dtype_name(op->dtype), op->tag, u->count,
			    ibc_dtype_name(u->dtype));
}

static void ux_unlink(struct ibc_coll *coll, struct ibc_tag_ux *u)
{
	struct ibc_tag_ux **pp;

	for (pp = &coll->ux_head; *pp; pp = &(*pp)->next) {
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	}
	ibc_free(u->buf);
	ibc_free(u);
}

/*
 * Post, in each source's order, the data receives of the envelopes taken:
 * into the bound receive's buffer, or into a buffer of the entry's own. A
 * source whose connection is still being set up holds its later entries.
 */
static ibc_status_t ux_advance(struct ibc_coll *coll)
{
	struct ibc_net *net = coll->net;
	struct ibc_tag_ux *u = coll->ux_head;

	while (u) {
		struct ibc_tag_ux *next = u->next;
		const struct ibc_tag_ux *e;
		ibc_status_t st;
		int blocked = 0;
		size_t esz;

		if (u->posted) {
			u = next;
			continue;
		}
		for (e = coll->ux_head; e != u; e = e->next)
			if (e->src == u->src && !e->posted)
				blocked = 1;
		if (blocked) {
			u = next;
			continue;
		}
		st = ibc_net_connect_try(net, u->src);
		if (st == IBC_INPROGRESS) {
			u = next;
			continue;
		}
		IBC_CHECK(st);
		if (u->owner) {
			struct ibc_op *op = u->owner;

			IBC_CHECK(ux_check(coll, u, op));
			IBC_CHECK(ux_post(coll, u, op->recvbuf, u->owner_tr));
			op->tag_state |= TAG_POSTED;
			if (op->source_p)
				*op->source_p = u->src;
			ux_unlink(coll, u);
			u = next;
			continue;
		}
		IBC_CHECK(ibc_dtype_size(u->dtype, &esz));
		u->buf = ibc_malloc(IBC_MAX(u->count * esz, (size_t)1), "unexpected tagged message");
		if (!u->buf)
			return ibc_net_fail(net, IBC_ERR_NO_MEMORY, u->src,
					    "out of memory for an unexpected tagged message of %zu bytes",
					    u->count * esz);
		IBC_CHECK(ux_post(coll, u, u->buf, &u->tr));
		u->posted = 1;
		u = next;
	}
	return IBC_OK;
}

/* take the next envelope of @src into the unexpected list: 1 taken, 0 none */
static ibc_status_t ux_take(struct ibc_coll *coll, int src, int *took_p)
{
	uint8_t env[ENV_BYTES];
	struct ibc_tag_ux *u;
	struct ibc_tag_ux **pp;
	int got = 0;

	*took_p = 0;
	IBC_CHECK(ibc_net_oob_try_recv(coll->net, src, IBC_NET_TAG_P2P_ENV, env, sizeof(env),
				       &got));
	if (!got)
		return IBC_OK;
	if (ibc_wire_get32(env) != ENV_MAGIC || ibc_wire_get32(env + 12) >= IBC_DTYPE_COUNT)
		return ibc_net_fail(coll->net, IBC_ERR_REMOTE, src,
				    "malformed envelope of a tagged message");
	u = ibc_calloc(1, sizeof(*u), "tagged message envelope");
	if (!u)
		return ibc_net_fail(coll->net, IBC_ERR_NO_MEMORY, src, "out of memory for an envelope");
	u->src = src;
	u->tag = (int32_t)ibc_wire_get32(env + 4);
	u->seq = ibc_wire_get32(env + 8);
	u->dtype = (ibc_dtype_t)ibc_wire_get32(env + 12);
	u->count = (size_t)ibc_wire_get64(env + 16);
	for (pp = &coll->ux_head; *pp; pp = &(*pp)->next)
		;
	*pp = u;
	*took_p = 1;
	return IBC_OK;
}

/* the oldest entry @op may take (its source, or any; its tag; not bound to another) */
static struct ibc_tag_ux *ux_find(struct ibc_coll *coll, const struct ibc_op *op)
{
	struct ibc_tag_ux *u;

	for (u = coll->ux_head; u; u = u->next)
		if (u->owner == op)
			return u;
	for (u = coll->ux_head; u; u = u->next)
		if (!u->owner && u->tag == op->tag &&
		    (op->root == IBC_ANY_SOURCE || u->src == op->root))
			return u;
	return NULL;
}

/* @op takes entry @u: bind it, or copy its data out once it has arrived */
static ibc_status_t ux_match(struct ibc_coll *coll, struct ibc_op *op, struct ibc_tag_ux *u,
			     struct ibc_treq *tr)
{
	size_t esz;

	if (!u->posted) {
		/* posted straight into the receive's buffer when its turn comes */
		u->owner = op;
		u->owner_tr = tr;
		IBC_CHECK(ux_advance(coll));
		/* posted into @tr (the entry left the list), or still waiting its turn */
		return (op->tag_state & TAG_POSTED) ? IBC_OK : IBC_INPROGRESS;
	}
	if (!ibc_treq_is_done(&u->tr))
		return IBC_INPROGRESS;
	IBC_CHECK(u->tr.status);
	IBC_CHECK(ux_check(coll, u, op));
	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	if (op->count)
		memcpy(op->recvbuf, u->buf, op->count * esz);
	if (op->source_p)
		*op->source_p = u->src;
	ux_unlink(coll, u);
	tr->nbytes = op->count * esz;
	tr->peer = -1;
	tr->moved_p = NULL;
	ibc_treq_complete(tr, IBC_OK);
	return IBC_OK;
}

static ibc_status_t tag_recv(struct ibc_coll *coll, struct ibc_op *op, struct ibc_treq *tr)
{
	struct ibc_net *net = coll->net;
	struct ibc_tag_ux *u;
	int n = net->nranks;
	int i;

	IBC_CHECK(ux_advance(coll));
	/* bound earlier, and posted by ux_advance() on behalf of this receive */
	if (op->tag_state & TAG_POSTED)
		return IBC_OK;
	u = ux_find(coll, op);
	if (u)
		return ux_match(coll, op, u, tr);
	/* take envelopes, in each source's order, until one matches */
	for (i = 0; i < n; i++) {
		int src = op->root;
		int took = 1;

		if (op->root == IBC_ANY_SOURCE) {
			/* every peer once per call, from a rotating start (fairness) */
			src = (coll->ux_any_next + i) % n;
			if (src == net->rank)
				continue;
		} else if (i > 0) {
			break;
		}
		while (took) {
			IBC_CHECK(ux_take(coll, src, &took));
			if (!took)
				break;
			IBC_CHECK(ux_advance(coll));
			u = ux_find(coll, op);
			if (u) {
				if (op->root == IBC_ANY_SOURCE)
					coll->ux_any_next = (src + 1) % n;
				return ux_match(coll, op, u, tr);
			}
		}
	}
	return IBC_INPROGRESS;
}

ibc_status_t ibc_coll_tag_post(struct ibc_coll *coll, struct ibc_op *op, struct ibc_treq *tr)
{
	if (op->coll == IBC_COLL_SEND)
		return tag_send(coll, op, tr);
	return tag_recv(coll, op, tr);
}

void ibc_coll_tag_fini(struct ibc_coll *coll)
{
	while (coll->ux_head)
		ux_unlink(coll, coll->ux_head);
}
