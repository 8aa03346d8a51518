/* SPDX-License-Identifier: MIT */
/*
 * ib_ll.c - the LL path of a verbs connection (ib.h, after NCCL's LL
 * protocol): a small message is written straight into the peer's LL ring
 * as lines with flags, with no clear-to-send round trip; the receiver
 * polls the flags and copies out, and returns credits when a quarter of the
 * ring is consumed. The sender writes the k-th message's lines at once, the
 * receiver's k-th receive finds them by the message number in the first
 * line.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"
#include "base/wire.h"
#include "transport/ib/ib.h"
#include "transport/ib/ib_conn_internal.h"

/* ---------------------------------------------------------------------- */
/* LL path (ib.h): lines with flags written into the peer's ring          */
/* ---------------------------------------------------------------------- */

int ibc_ib_ll_eligible(const struct ibc_ib_conn *conn, const struct ibc_msg_desc *desc,
		       size_t nbytes)
{
	return conn->ll_max && (desc->flags & IBC_DESC_F_LL) && nbytes <= conn->ll_max;
}

/* the peer's count of lines it consumed from our writes (its credit write) */
static uint64_t ll_credit_read(const struct ibc_ib_conn *conn)
{
	const uint64_t *w = (const uint64_t *)(const void *)conn->ll_in[conn->ll_lines].data;

	return le64toh(__atomic_load_n(w, __ATOMIC_ACQUIRE));
}

/*
 * Write LL send @op into the peer's ring: build its lines in the staging
 * mirror (the same index as in the peer's ring, so a line is rebuilt only
 * after the peer consumed it, that is after the write that read it landed)
 * and post one RDMA WRITE per contiguous run (two when the message wraps),
 * inline when it fits. Returns 0 when written (the caller's buffer is free
 * again), 1 when the ring or the send queue lacks room, -1 when the
 * connection failed.
 */
int ibc_ib_ll_send(struct ibc_ib_conn *conn, struct ibc_ib_op *op)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	struct ibc_ib_qp *qp = &conn->qps[0];
	const uint8_t *buf = op->buf;
	uint32_t nl = ibc_ib_ll_nlines(op->nbytes);
	uint64_t first = conn->ll_head;
	uint32_t start = (uint32_t)(first % conn->ll_rlines);
	uint32_t run = IBC_MIN(nl, conn->ll_rlines - start);
	uint32_t done;
	size_t off = 0;
	uint32_t i;

	if (first + nl - conn->ll_tail_seen > conn->ll_rlines) {
		conn->ll_tail_seen = ll_credit_read(conn);
		if (first + nl - conn->ll_tail_seen > conn->ll_rlines)
			return 1;
	}
	if (ibc_ib_qp_sq_room(qp) < (run < nl ? 2 : 1))
		return 1;
	for (i = 0; i < nl; i++) {
		struct ib_ll_line *l = &conn->ll_stage[(first + i) % conn->ll_rlines];
		size_t len;

		if (i == 0) {
			ibc_msg_desc_pack(&op->desc, l->data);
			ibc_wire_put32(l->data + 32, (uint32_t)op->nbytes);
			ibc_wire_put32(l->data + 36, op->seq);
			len = IBC_MIN(op->nbytes, (size_t)IB_LL_FIRST_DATA);
			if (len)
				memcpy(l->data + 40, buf, len);
		} else {
			len = IBC_MIN(op->nbytes - off, (size_t)IB_LL_LINE_DATA);
			memcpy(l->data, buf + off, len);
		}
		off += len;
		l->flag = htole64(first + i + 1);
	}
	for (done = 0; done < nl; done += run, run = nl - done) {
		uint32_t idx = (uint32_t)((first + done) % conn->ll_rlines);
		size_t bytes = (size_t)run * sizeof(struct ib_ll_line);
		int inl = bytes <= (size_t)qp->max_inline && bytes <= (size_t)ctx->prm.inline_bytes;
		int ret;

		ret = ibc_ib_qp_post_write(qp, ibc_ib_wr_id(qp, IBC_IB_WR_QP), 0, inl,
					   &conn->ll_stage[idx], conn->ll_stage_mr->lkey, bytes,
					   conn->ll_raddr + (uint64_t)idx * sizeof(struct ib_ll_line),
					   conn->ll_rrkey, 0, 0);
		if (ret) {
			ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
					 "ibv_post_send of LL message #%u (%zu bytes) on qp 0x%x (%s:%d) failed: %s",
					 op->seq, op->nbytes, qp->qp->qp_num, ctx->dev_name, ctx->port,
					 strerror(ret));
			return -1;
		}
	}
	conn->ll_head = first + nl;
	conn->ll_sent_tag[op->seq % (unsigned)conn->D] = op->seq + 1;
	return 0;
}

/* post the LL sends queued behind a full ring, in order */
static void ll_try_sends(struct ibc_ib_conn *conn)
{
	struct ibc_ib_op *op;

	while ((op = conn->ll_sq_head) && conn->failed == IBC_OK) {
		if (ibc_ib_ll_send(conn, op) != 0)
			return;
		conn->ll_sq_head = op->next;
		if (!conn->ll_sq_head)
			conn->ll_sq_tail = NULL;
		ibc_ib_op_complete(op, IBC_OK);
		ibc_ib_op_free(op);
	}
}

/* write our consumed count to the peer when a quarter of the ring (or @force) */
static void ll_return_credits(struct ibc_ib_conn *conn, int force)
{
	struct ibc_ib_qp *qp = &conn->qps[0];
	uint64_t *w = (uint64_t *)(void *)conn->ll_stage[conn->ll_rlines].data;
	uint64_t pending = conn->ll_rtail - conn->ll_credit_sent;
	int ret;

	if (!pending || (!force && pending < IBC_MAX(conn->ll_lines / IB_LL_CREDIT_DIV, 1u)) ||
	    ibc_ib_qp_sq_room(qp) < 1)
		return;
	/* a non-inline write may read a later (larger) count: still a true one */
	__atomic_store_n(w, htole64(conn->ll_rtail), __ATOMIC_RELAXED);
	ret = ibc_ib_qp_post_write(qp, ibc_ib_wr_id(qp, IBC_IB_WR_QP), 0, qp->max_inline >= 8, w,
				   conn->ll_stage_mr->lkey, 8,
				   conn->ll_raddr + (uint64_t)conn->ll_rlines * sizeof(struct ib_ll_line),
				   conn->ll_rrkey, 0, 0);
	if (ret) {
		ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
				 "ibv_post_send of LL credits on qp 0x%x (%s:%d) failed: %s",
				 qp->qp->qp_num, conn->ctx->dev_name, conn->ctx->port, strerror(ret));
		return;
	}
	conn->ll_credit_sent = conn->ll_rtail;
}

/* LL line number @idx of our ring, or NULL if not written yet */
static const struct ib_ll_line *ll_ready(const struct ibc_ib_conn *conn, uint64_t idx)
{
	const struct ib_ll_line *l = &conn->ll_in[idx % conn->ll_lines];

	return le64toh(__atomic_load_n(&l->flag, __ATOMIC_ACQUIRE)) == idx + 1 ? l : NULL;
}

void ibc_ib_ll_path_mismatch(struct ibc_ib_conn *conn, uint32_t seq, int their_ll,
			     const struct ibc_ib_op *mine, const struct ibc_msg_desc *theirs,
			     size_t their_nbytes)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	ibc_status_t st = IBC_OK;

	if (mine && theirs) {
		struct ibc_msg_desc t = *theirs;

		/* the protocol flag differs by construction: compare the rest */
		t.flags = (uint8_t)((t.flags & ~IBC_DESC_F_LL) | (mine->desc.flags & IBC_DESC_F_LL));
		st = ctx->cb.desc_check(ctx->cb.arg, conn->peer, &mine->desc, mine->nbytes, &t,
					their_nbytes);
	}
	if (st != IBC_OK) {
		ibc_ib_conn_set_failed(conn, st);
		return;
	}
	ibc_ib_conn_fail(conn, IBC_ERR_INVALID_USAGE,
			 "mismatched protocols: message #%u came by the %s path, this rank expects the %s path (ranks chose different protocols: IBC_PROTO, or sizes on either side of IBC_LL_MAX_BYTES %zu)",
			 seq, their_ll ? "LL" : "rendezvous or eager",
			 their_ll ? "rendezvous or eager" : "LL",
			 conn->ll_max);
}

/* the posted receive numbered @seq that is not an LL one, or NULL */
static struct ibc_ib_op *find_recv(struct ibc_ib_conn *conn, uint32_t seq)
{
	struct ibc_ib_op *op;

	for (op = conn->live; op; op = op->live_next)
		if (!op->is_send && !op->ll && op->seq == seq && op->req)
			return op;
	return NULL;
}

struct ibc_ib_op *ibc_ib_ll_find_recv(struct ibc_ib_conn *conn, uint32_t seq, int low17)
{
	uint32_t mask = low17 ? IBC_IB_IMM_SEQ_MASK : 0xffffffffu;
	struct ibc_ib_op *op;

	for (op = conn->ll_rq_head; op; op = op->next)
		if ((op->seq & mask) == (seq & mask))
			return op;
	return NULL;
}

/* an LL message whose receive was posted for the rendezvous or eager path? */
static void ll_check_unexpected(struct ibc_ib_conn *conn)
{
	const struct ib_ll_line *l = ll_ready(conn, conn->ll_rtail);
	struct ibc_msg_desc theirs;
	uint32_t msgno;

	if (!l)
		return;
	msgno = ibc_wire_get32(l->data + 36);
	if ((int32_t)(msgno - conn->recv_seq) >= 0)
		return; /* the receive is not posted yet: legal, the sender is ahead */
	ibc_msg_desc_unpack(l->data, &theirs);
	ibc_ib_ll_path_mismatch(conn, msgno, 1, find_recv(conn, msgno), &theirs,
				ibc_wire_get32(l->data + 32));
}

/*
 * ibc_ib_conn_peek() - the next message in, when no receive is posted and it
 * came by the LL path (its first line holds the descriptor) or the eager
 * path (its header does). A rendezvous message announces nothing before its
 * receive is posted: its sender waits for a clear-to-send instead, and the
 * wait-for chain names it.
 */
int ibc_ib_conn_peek(struct ibc_ib_conn *conn, struct ibc_msg_desc *desc, size_t *nbytes)
{
	const struct ib_ll_line *l;
	struct ibc_ib_op *op;

	if (conn->failed != IBC_OK || conn->ll_rq_head || conn->rq_head)
		return 0;
	for (op = conn->live; op; op = op->live_next)
		if (!op->is_send && op->req)
			return 0;
	if (ibc_ib_eager_peek(conn, desc, nbytes))
		return 1;
	if (!conn->ll_max)
		return 0;
	l = ll_ready(conn, conn->ll_rtail);
	if (!l || ibc_wire_get32(l->data + 36) != conn->recv_seq)
		return 0;
	ibc_msg_desc_unpack(l->data, desc);
	*nbytes = ibc_wire_get32(l->data + 32);
	return 1;
}

/* copy out the LL messages that arrived for the posted LL receives, in order */
void ibc_ib_ll_progress_recvs(struct ibc_ib_conn *conn)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	const struct ib_ll_line *l;
	struct ibc_ib_op *op;

	if (!conn->ll_rq_head) {
		if (conn->ll_max)
			ll_check_unexpected(conn);
		return;
	}
	while ((op = conn->ll_rq_head) && conn->failed == IBC_OK) {
		size_t len;

		if (!op->started) {
			struct ibc_msg_desc theirs;
			uint32_t n32;
			uint32_t msgno;
			ibc_status_t st;

			l = ll_ready(conn, conn->ll_rtail);
			if (!l)
				return;
			n32 = ibc_wire_get32(l->data + 32);
			msgno = ibc_wire_get32(l->data + 36);
			ibc_msg_desc_unpack(l->data, &theirs);
			if (msgno != op->seq) {
				/* later: ours went by the other path; earlier: theirs did */
				if ((int32_t)(msgno - op->seq) > 0)
					ibc_ib_ll_path_mismatch(conn, op->seq, 0, NULL, NULL, 0);
				else
					ibc_ib_ll_path_mismatch(conn, msgno, 1, find_recv(conn, msgno),
							 &theirs, n32);
				return;
			}
			st = ctx->cb.desc_check(ctx->cb.arg, conn->peer, &op->desc, op->nbytes,
						&theirs, n32);
			if (st != IBC_OK) {
				ibc_ib_conn_set_failed(conn, st);
				return;
			}
			len = IBC_MIN(op->nbytes, (size_t)IB_LL_FIRST_DATA);
			if (len)
				memcpy(op->buf, l->data + 40, len);
			op->off = len;
			op->started = 1;
			conn->ll_rtail++;
		}
		while (op->off < op->nbytes && (l = ll_ready(conn, conn->ll_rtail))) {
			len = IBC_MIN(op->nbytes - op->off, (size_t)IB_LL_LINE_DATA);
			memcpy((uint8_t *)op->buf + op->off, l->data, len);
			op->off += len;
			conn->ll_rtail++;
		}
		if (op->off < op->nbytes)
			return;
		conn->ll_rq_head = op->next;
		if (!conn->ll_rq_head)
			conn->ll_rq_tail = NULL;
		conn->last_activity_ns = ibc_time_coarse_ns();
		ibc_ib_op_complete(op, IBC_OK);
		ibc_ib_op_free(op);
		ll_return_credits(conn, 0);
	}
}

void ibc_ib_ll_progress(struct ibc_ib_conn *conn)
{
	ibc_ib_ll_progress_recvs(conn);
	if (conn->ll_sq_head)
		ll_try_sends(conn);
	ll_return_credits(conn, 0);
}
