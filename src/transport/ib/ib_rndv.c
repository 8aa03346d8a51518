/* SPDX-License-Identifier: MIT */
/*
 * ib_rndv.c - the receiver-driven data path of a verbs connection (ib.h):
 * the receiver's clear-to-send entries into the sender's FIFO, the sends
 * that answer them (RDMA WRITE WITH IMM, striped over the connection's QPs,
 * inline and bounce sends, NACK on descriptor mismatch), the posting of
 * isend/irecv, and the handling of every work completion.
 *
 * Sequence numbers: the k-th isend and the k-th irecv of a connection
 * direction match; both use credit slot k % D (D = negotiated depth). The
 * receiver issues the clear-to-send of receive k only when slot k % D is
 * free (receive k - D completed), so at most D messages are in flight per
 * direction and no slot is overwritten while the sender may still read it.
 * Eager messages (ib_eager.c) use the same slots without a clear-to-send;
 * LL messages (ib_ll.c) take their sequence numbers from the same counters
 * but no credit slot.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/util.h"
#include "base/wire.h"
#include "transport/ib/ib.h"
#include "transport/ib/ib_conn_internal.h"

/* ---------------------------------------------------------------------- */
/* data path: receive side                                                */
/* ---------------------------------------------------------------------- */

int ibc_ib_rndv_post_cts(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot,
			 uint64_t addr, uint32_t rkey)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	struct ibc_ib_qp *qp = &conn->qps[slot % (unsigned)conn->nqps];
	uint8_t *e = (uint8_t *)&conn->out[slot].cts;
	int ret;

	ibc_wire_put64(e + offsetof(struct ib_cts, addr), addr);
	ibc_wire_put64(e + offsetof(struct ib_cts, nbytes), op->nbytes);
	ibc_wire_put32(e + offsetof(struct ib_cts, rkey), rkey);
	ibc_wire_put32(e + offsetof(struct ib_cts, seq), op->seq);
	ibc_msg_desc_pack(&op->desc, e + offsetof(struct ib_cts, desc));
	ibc_wire_put32(e + offsetof(struct ib_cts, credit), ibc_ib_eager_credit_take(conn));
	ret = ibc_ib_qp_post_write(qp, ibc_ib_wr_id(qp, IBC_IB_WR_QP), 0,
				   qp->max_inline >= (int)sizeof(struct ib_cts), e,
				   conn->out_mr->lkey, sizeof(struct ib_cts),
				   conn->rfifo_addr + (uint64_t)slot * sizeof(struct ib_fifo_slot),
				   conn->rfifo_rkey, 1,
				   ibc_ib_imm_make(IBC_IB_IMM_CTS, 1, slot, op->seq));
	if (ret)
		ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
				 "ibv_post_send of a clear-to-send on qp 0x%x (%s:%d) failed: %s",
				 qp->qp->qp_num, ctx->dev_name, ctx->port, strerror(ret));
	return ret;
}

/* take @op, the head of the receive queue, off it */
static void rq_pop(struct ibc_ib_conn *conn, struct ibc_ib_op *op)
{
	conn->rq_head = op->next;
	if (!conn->rq_head)
		conn->rq_tail = NULL;
}

/*
 * Give the queued receives their slots in order: an eager receive takes
 * its slot and the message if it is there; a rendezvous receive writes its
 * clear-to-send (bounce slot or zero-copy buffer).
 */
void ibc_ib_rndv_issue_cts(struct ibc_ib_conn *conn)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	struct ibc_ib_op *op;

	while ((op = conn->rq_head) && conn->failed == IBC_OK) {
		unsigned slot = op->seq % (unsigned)conn->D;
		struct ibc_ib_qp *qp = &conn->qps[slot % (unsigned)conn->nqps];
		uint64_t addr = 0;
		uint32_t rkey = 0;

		if (conn->rslot[slot])
			return;
		if (op->eager) {
			rq_pop(conn, op);
			conn->rslot[slot] = op;
			op->bounce = 1;
			ibc_ib_eager_recv_start(conn, op, slot);
			continue;
		}
		if (ibc_ib_qp_sq_room(qp) < 1)
			return;
		if (conn->eager_max && conn->eager_in[slot] == op->seq + 1) {
			rq_pop(conn, op);
			conn->rslot[slot] = op;
			ibc_ib_eager_recv_check(conn, op, slot);
			continue;
		}
		if (op->nbytes == 0) {
			op->bounce = 1;
		} else if (op->nbytes <= conn->bb) {
			op->bounce = 1;
			addr = (uint64_t)(uintptr_t)(ibc_ib_rslot(conn, slot) + IB_EAGER_HDR);
			rkey = conn->rbounce_mr->rkey;
		} else {
			if (!op->mr) {
				ibc_status_t st = ibc_ib_mr_get(&ctx->mrc, op->buf, op->nbytes, 0, &op->mr);

				if (st != IBC_OK) {
					ibc_ib_conn_fail(conn, st,
							 "cannot register the %zu-byte receive buffer of message #%u: %s",
							 op->nbytes, op->seq, ctx->mrc.errbuf);
					return;
				}
			}
			addr = (uint64_t)(uintptr_t)op->buf;
			rkey = op->mr->rkey;
		}
		if (ibc_ib_rndv_post_cts(conn, op, slot, addr, rkey))
			return;
		conn->rslot[slot] = op;
		rq_pop(conn, op);
	}
}

static void recv_finish(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot,
			ibc_status_t st)
{
	if (st == IBC_OK && op->bounce && op->nbytes)
		memcpy(op->buf, ibc_ib_rslot(conn, slot) + IB_EAGER_HDR, op->nbytes);
	conn->rslot[slot] = NULL;
	ibc_ib_op_complete(op, st);
	ibc_ib_op_free(op);
}

static void recv_imm(struct ibc_ib_conn *conn, struct ibc_ib_qp *qp, const struct ibv_wc *wc)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	uint32_t imm;
	unsigned type;
	unsigned slot;
	struct ibc_ib_op *op;

	if (++conn->rq_consumed[qp->idx] >= IB_RQ_REPOST) {
		int ret = ibc_ib_qp_post_recvs(qp, conn->rq_consumed[qp->idx]);

		if (ret) {
			ibc_ib_conn_fail(conn, IBC_ERR_VERBS, "ibv_post_recv on qp 0x%x (%s:%d) failed: %s",
					 qp->qp->qp_num, ctx->dev_name, ctx->port, strerror(ret));
			return;
		}
		conn->rq_consumed[qp->idx] = 0;
	}
	if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
		ibc_ib_conn_fail(conn, IBC_ERR_INTERNAL,
				 "receive completion without immediate data on qp 0x%x (protocol error)",
				 qp->qp->qp_num);
		return;
	}
	/* the payload of a WRITE WITH IMM is in memory before its completion */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	imm = ntohl(wc->imm_data);
	type = ibc_ib_imm_type(imm);
	if (type == IBC_IB_IMM_CREDIT) {
		ibc_ib_eager_credit_in(conn, imm);
		return;
	}
	slot = ibc_ib_imm_slot(imm);
	if (slot >= (unsigned)conn->D) {
		ibc_ib_conn_fail(conn, IBC_ERR_INTERNAL, "immediate 0x%08x names slot %u of %d (protocol error)",
				 imm, slot, conn->D);
		return;
	}
	if (type == IBC_IB_IMM_CTS) {
		const uint8_t *e = (const uint8_t *)&conn->fifo[slot].cts;
		uint32_t cts_seq = ibc_wire_get32(e + offsetof(struct ib_cts, seq));

		if (conn->ll_max && conn->ll_sent_tag[slot] == cts_seq + 1) {
			/* the receiver expects the rendezvous path for a message sent by LL */
			ibc_ib_conn_fail(conn, IBC_ERR_INVALID_USAGE,
					 "mismatched protocols: message #%u was sent by the LL path, the peer posted its %llu-byte receive for the rendezvous path (ranks chose different protocols: IBC_PROTO, or sizes on either side of IBC_LL_MAX_BYTES %zu)",
					 cts_seq, (unsigned long long)ibc_wire_get64(e + offsetof(struct ib_cts, nbytes)),
					 conn->ll_max);
			return;
		}
		ibc_ib_eager_credit_learn(conn, ibc_wire_get32(e + offsetof(struct ib_cts, credit)));
		/* the receiver expects the rendezvous path for a message sent eagerly:
		 * it refuses the eager message when it meets it, and both report */
		if (conn->eager_max && conn->eager_sent_tag[slot] == cts_seq + 1)
			return;
		conn->cts_ready[slot] = 1;
		return; /* sends start in ibc_ib_conn_kick() */
	}
	switch (type) {
	case IBC_IB_IMM_EAGER:
		ibc_ib_eager_in(conn, slot, imm);
		return;
	case IBC_IB_IMM_ENACK:
		ibc_ib_eager_enack_in(conn, slot);
		return;
	case IBC_IB_IMM_RTS:
		ibc_ib_eager_rts_in(conn, slot, imm);
		return;
	case IBC_IB_IMM_DATA:
	case IBC_IB_IMM_NACK:
		break;
	default:
		ibc_ib_conn_fail(conn, IBC_ERR_INTERNAL, "immediate 0x%08x of unknown type %u (protocol error)",
				 imm, type);
		return;
	}
	op = conn->rslot[slot];
	if (!op || (op->seq & IBC_IB_IMM_SEQ_MASK) != ibc_ib_imm_seq(imm)) {
		ibc_ib_conn_fail(conn, IBC_ERR_INTERNAL,
				 "%s for slot %u, message %u, which has no receive waiting (protocol error)",
				 type == IBC_IB_IMM_NACK ? "refusal" : "data", slot, ibc_ib_imm_seq(imm));
		return;
	}
	if (type == IBC_IB_IMM_NACK) {
		const uint8_t *n = (const uint8_t *)&conn->fifo[slot].nack;
		struct ibc_msg_desc theirs;
		uint64_t their_nbytes = ibc_wire_get64(n + offsetof(struct ib_nack, nbytes));
		ibc_status_t st;

		ibc_msg_desc_unpack(n + offsetof(struct ib_nack, desc), &theirs);
		st = ctx->cb.desc_check(ctx->cb.arg, conn->peer, &op->desc, op->nbytes, &theirs,
					(size_t)their_nbytes);
		if (st == IBC_OK) {
			IBC_LOG_WARN(IB, "peer rank %d refused receive #%u although the descriptors match",
				     conn->peer, op->seq);
			st = IBC_ERR_INVALID_USAGE;
		}
		recv_finish(conn, op, slot, st);
		return;
	}
	if (op->parts_left == 0)
		op->parts_left = (int)ibc_ib_imm_nparts(imm);
	if (--op->parts_left == 0)
		recv_finish(conn, op, slot, IBC_OK);
}

/* ---------------------------------------------------------------------- */
/* data path: send side                                                   */
/* ---------------------------------------------------------------------- */

/* post a NACK for send @op (descriptor mismatch); 1: no room yet, -1: failed */
static int send_post_nack(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot)
{
	struct ibc_ib_qp *qp = &conn->qps[slot % (unsigned)conn->nqps];
	uint8_t *e = (uint8_t *)&conn->out[slot].nack;
	int ret;

	if (ibc_ib_qp_sq_room(qp) < 1)
		return 1;
	ibc_wire_put64(e + offsetof(struct ib_nack, nbytes), op->nbytes);
	ibc_wire_put32(e + offsetof(struct ib_nack, seq), op->seq);
	ibc_msg_desc_pack(&op->desc, e + offsetof(struct ib_nack, desc));
	ret = ibc_ib_qp_post_write(qp, ibc_ib_wr_id(qp, IBC_IB_WR_QP), 0,
				   qp->max_inline >= (int)sizeof(struct ib_nack), e,
				   conn->out_mr->lkey, sizeof(struct ib_nack),
				   conn->rfifo_addr + (uint64_t)slot * sizeof(struct ib_fifo_slot) +
					   offsetof(struct ib_fifo_slot, nack),
				   conn->rfifo_rkey, 1, ibc_ib_imm_make(IBC_IB_IMM_NACK, 1, slot, op->seq));
	if (ret) {
		ibc_ib_conn_fail(conn, IBC_ERR_VERBS, "ibv_post_send of a refusal on qp 0x%x failed: %s",
				 qp->qp->qp_num, strerror(ret));
		return -1;
	}
	return 0;
}

/*
 * Post the payload of send @op to the receiver's buffer: inline, through the
 * send bounce slot, or zero-copy striped over the QPs. Returns 0 when
 * posted (op completed and freed unless zero-copy WRs are pending), 1 when
 * a send queue lacks room (retry later), -1 when the connection failed.
 */
static int send_post_data(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot,
			  uint64_t raddr, uint32_t rkey)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	size_t n = op->nbytes;
	int need[IBC_IB_MAX_QPS] = { 0 };
	size_t part_bytes;
	int nparts;
	int posted = 0;
	int i;

	struct ibc_ib_qp *qp0 = &conn->qps[op->seq % (unsigned)conn->nqps];
	int inl = n <= (size_t)qp0->max_inline && n <= (size_t)ctx->prm.inline_bytes;

	if (inl || n == 0 || n <= conn->bb) {
		struct ibc_ib_qp *qp = qp0;
		uint32_t imm = ibc_ib_imm_make(IBC_IB_IMM_DATA, 1, slot, op->seq);
		const void *src = op->buf;
		uint32_t lkey = 0;
		int ret;

		if (ibc_ib_qp_sq_room(qp) < 1)
			return 1;
		if (!inl && n) {
			src = ibc_ib_sslot(conn, slot) + IB_EAGER_HDR;
			memcpy((void *)src, op->buf, n);
			lkey = conn->sbounce_mr->lkey;
		}
		ret = ibc_ib_qp_post_write(qp, ibc_ib_wr_id(qp, IBC_IB_WR_QP), 0, inl, src, lkey, n,
					   raddr, rkey, 1, imm);
		if (ret) {
			ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
					 "ibv_post_send of message #%u (%zu bytes) on qp 0x%x failed: %s",
					 op->seq, n, qp->qp->qp_num, strerror(ret));
			return -1;
		}
		/* inline data is copied at post; a bounce slot is reused only after
		 * the receiver completed this message (credit flow) */
		ibc_ib_op_complete(op, IBC_OK);
		ibc_ib_op_free(op);
		return 0;
	}
	nparts = 1;
	if (n >= 2 * ctx->prm.stripe_min_bytes)
		nparts = (int)IBC_MIN((size_t)conn->nqps, n / ctx->prm.stripe_min_bytes);
	part_bytes = IBC_ALIGN_UP(IBC_DIV_UP(n, (size_t)nparts), 64);
	nparts = (int)IBC_DIV_UP(n, part_bytes);
	for (i = 0; i < nparts; i++) {
		size_t len = IBC_MIN(part_bytes, n - (size_t)i * part_bytes);

		need[(op->seq + (unsigned)i) % (unsigned)conn->nqps] +=
			(int)IBC_DIV_UP(len, (size_t)ctx->max_msg_bytes);
	}
	for (i = 0; i < conn->nqps; i++)
		if (need[i] && ibc_ib_qp_sq_room(&conn->qps[i]) < need[i])
			return 1;
	if (!op->mr) {
		ibc_status_t st = ibc_ib_mr_get(&ctx->mrc, op->buf, n, IBC_IB_MR_READONLY, &op->mr);

		if (st != IBC_OK) {
			ibc_ib_conn_fail(conn, st, "cannot register the %zu-byte send buffer of message #%u: %s",
					 n, op->seq, ctx->mrc.errbuf);
			return -1;
		}
	}
	op->parts_left = nparts;
	for (i = 0; i < nparts; i++) {
		struct ibc_ib_qp *qp = &conn->qps[(op->seq + (unsigned)i) % (unsigned)conn->nqps];
		size_t off = (size_t)i * part_bytes;
		size_t end = IBC_MIN(off + part_bytes, n);
		uint32_t imm = ibc_ib_imm_make(IBC_IB_IMM_DATA, (unsigned)nparts, slot, op->seq);

		while (off < end) {
			size_t len = IBC_MIN((size_t)ctx->max_msg_bytes, end - off);
			int last = off + len == end;
			int ret;

			ret = ibc_ib_qp_post_write(qp, last ? ibc_ib_wr_id(op, IBC_IB_WR_OP) :
							      ibc_ib_wr_id(qp, IBC_IB_WR_QP),
						   last, 0, (const uint8_t *)op->buf + off, op->mr->lkey,
						   len, raddr + off, rkey, last, imm);
			if (ret) {
				/* the op lives until its posted parts flush; with none, the failure frees it */
				op->parts_left = posted;
				ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
						 "ibv_post_send of part %d of message #%u (%zu bytes) on qp 0x%x failed: %s",
						 i, op->seq, n, qp->qp->qp_num, strerror(ret));
				return -1;
			}
			posted += last;
			off += len;
		}
	}
	return 0;
}

void ibc_ib_rndv_start_sends(struct ibc_ib_conn *conn)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	struct ibc_ib_op *op;

	while ((op = conn->sq_head) && conn->failed == IBC_OK) {
		unsigned slot = op->seq % (unsigned)conn->D;
		const uint8_t *e = (const uint8_t *)&conn->fifo[slot].cts;
		struct ibc_msg_desc theirs;
		uint64_t their_nbytes;
		uint32_t cts_seq;
		ibc_status_t st;
		int r;

		if (op->eager) {
			struct ibc_ib_op *next = op->next;

			if (ibc_ib_eager_send(conn, op) != 0)
				return;
			conn->sq_head = next;
			if (!next)
				conn->sq_tail = NULL;
			continue;
		}
		if (!conn->cts_ready[slot]) {
			if (conn->eager_max || conn->ll_max)
				ibc_ib_eager_maybe_rts(conn, op, slot);
			return;
		}
		cts_seq = ibc_wire_get32(e + offsetof(struct ib_cts, seq));
		if (cts_seq != op->seq) {
			ibc_ib_conn_fail(conn, IBC_ERR_INTERNAL,
					 "clear-to-send in slot %u is for message %u, expected %u (protocol error)",
					 slot, cts_seq, op->seq);
			return;
		}
		ibc_msg_desc_unpack(e + offsetof(struct ib_cts, desc), &theirs);
		their_nbytes = ibc_wire_get64(e + offsetof(struct ib_cts, nbytes));
		st = ctx->cb.desc_check(ctx->cb.arg, conn->peer, &op->desc, op->nbytes, &theirs,
					(size_t)their_nbytes);
		if (st != IBC_OK) {
			r = send_post_nack(conn, op, slot);
			if (r == 1)
				return;
			if (r == 0) {
				ibc_ib_op_complete(op, st);
				conn->sq_head = op->next;
				ibc_ib_op_free(op);
			}
		} else {
			struct ibc_ib_op *next = op->next;

			r = send_post_data(conn, op, slot, ibc_wire_get64(e + offsetof(struct ib_cts, addr)),
					   ibc_wire_get32(e + offsetof(struct ib_cts, rkey)));
			if (r == 1)
				return;
			if (r == 0)
				conn->sq_head = next;
		}
		if (r < 0)
			return;
		conn->cts_ready[slot] = 0;
		if (!conn->sq_head)
			conn->sq_tail = NULL;
	}
}

/*
 * A receiver-driven connection can wait without anything in flight (a send
 * waiting for a clear-to-send, a receive whose clear-to-send was delivered),
 * and then a dead or departed peer raises no work completion error. When
 * messages are pending and nothing completed for IBC_IB_PROBE_MS, post a
 * zero-byte RDMA WRITE to the peer's FIFO: a live peer's NIC acknowledges it
 * without its CPU, a gone one makes it fail with retry-exceeded.
 */
void ibc_ib_rndv_maybe_probe(struct ibc_ib_conn *conn)
{
	struct ibc_ib_qp *qp = &conn->qps[0];
	uint64_t now;
	int ret;

	if (conn->probe_outstanding || conn->nlive == 0 || conn->ctx->prm.probe_ms <= 0)
		return;
	now = ibc_time_coarse_ns();
	if (now - conn->last_activity_ns < (uint64_t)conn->ctx->prm.probe_ms * 1000000ull)
		return;
	if (ibc_ib_qp_sq_room(qp) < 1)
		return;
	ret = ibc_ib_qp_post_write(qp, ibc_ib_wr_id(qp, IBC_IB_WR_PROBE), 1, 0, NULL, 0, 0,
				   conn->rfifo_addr, conn->rfifo_rkey, 0, 0);
	if (ret) {
		ibc_ib_conn_fail(conn, IBC_ERR_VERBS, "ibv_post_send of a keep-alive probe on qp 0x%x failed: %s",
				 qp->qp->qp_num, strerror(ret));
		return;
	}
	conn->probe_outstanding = 1;
	conn->last_activity_ns = now;
}

/*
 * ibc_ib_conn_kick() - post what waits for credits or send-queue room, copy
 * out arrived LL messages and return LL credits, probe an idle peer.
 * Return: 1 while LL receives or sends wait (their progress needs polling
 * memory, not a completion), else 0.
 */
int ibc_ib_conn_kick(struct ibc_ib_conn *conn)
{
	if (!conn->established || conn->failed != IBC_OK || conn->dead)
		return 0;
	if (conn->ll_max)
		ibc_ib_ll_progress(conn);
	if (conn->rq_head)
		ibc_ib_rndv_issue_cts(conn);
	if (conn->sq_head)
		ibc_ib_rndv_start_sends(conn);
	if (conn->eager_max)
		ibc_ib_eager_progress(conn);
	ibc_ib_rndv_maybe_probe(conn);
	return conn->failed == IBC_OK && (conn->ll_rq_head || conn->ll_sq_head);
}

/* ---------------------------------------------------------------------- */
/* posting                                                                */
/* ---------------------------------------------------------------------- */

/* append @op to the op queue *@head_p .. *@tail_p (posting order) */
static void op_append(struct ibc_ib_op **head_p, struct ibc_ib_op **tail_p, struct ibc_ib_op *op)
{
	if (*tail_p)
		(*tail_p)->next = op;
	else
		*head_p = op;
	*tail_p = op;
}

static void ctx_note_op(struct ibc_ib_ctx *ctx, const struct ibc_msg_desc *desc)
{
	if (ctx->have_last && desc->seq == ctx->last_seq && desc->coll == ctx->last_coll)
		return;
	ctx->have_last = 1;
	ctx->last_seq = desc->seq;
	ctx->last_coll = desc->coll;
	ibc_ib_mr_trim(&ctx->mrc, ctx->prm.reg_cache_bytes);
}

static ibc_status_t conn_post(struct ibc_ib_conn *conn, void *buf, size_t nbytes,
			      const struct ibc_msg_desc *desc, struct ibc_treq *req, int is_send)
{
	static const struct ibc_msg_desc zero_desc;
	struct ibc_ib_op *op;

	req->done = 0;
	req->status = IBC_INPROGRESS;
	req->nbytes = nbytes;
	req->is_send = is_send;
	if (!conn->established || conn->dead) {
		IBC_LOG_WARN(IB, "%s posted on a connection to peer rank %d that is not established",
			     is_send ? "send" : "receive", conn->peer);
		ibc_treq_complete(req, IBC_ERR_INVALID_USAGE);
		return IBC_ERR_INVALID_USAGE;
	}
	if (conn->failed != IBC_OK) {
		ibc_treq_complete(req, conn->failed);
		return conn->failed;
	}
	if (nbytes && !buf) {
		IBC_LOG_WARN(IB, "%s of %zu bytes to peer rank %d with a NULL buffer",
			     is_send ? "send" : "receive", nbytes, conn->peer);
		ibc_treq_complete(req, IBC_ERR_INVALID_ARG);
		return IBC_ERR_INVALID_ARG;
	}
	if (!desc)
		desc = &zero_desc;
	ctx_note_op(conn->ctx, desc);
	op = ibc_ib_op_alloc(conn);
	if (!op) {
		ibc_treq_complete(req, IBC_ERR_NO_MEMORY);
		return IBC_ERR_NO_MEMORY;
	}
	op->req = req;
	op->buf = buf;
	op->nbytes = nbytes;
	op->desc = *desc;
	op->is_send = is_send;
	op->ll = ibc_ib_ll_eligible(conn, desc, nbytes);
	op->eager = !op->ll && ibc_ib_eager_eligible(conn, nbytes);
	if (!is_send) {
		/* receives in sequence order: the first one not finished is the consumed count */
		op->in_rord = 1;
		op->rord_prev = conn->rord_tail;
		if (conn->rord_tail)
			conn->rord_tail->rord_next = op;
		else
			conn->rord_head = op;
		conn->rord_tail = op;
	}
	if (is_send && op->ll) {
		op->seq = conn->send_seq++;
		/* nothing queued ahead: write it now, the request completes at once */
		if (!conn->ll_sq_head) {
			int r = ibc_ib_ll_send(conn, op);

			if (r == 0) {
				ibc_ib_op_complete(op, IBC_OK);
				ibc_ib_op_free(op);
			}
			if (r <= 0)
				return IBC_OK; /* on failure the request completed with the error */
		}
		op_append(&conn->ll_sq_head, &conn->ll_sq_tail, op);
	} else if (op->ll) {
		op->seq = conn->recv_seq++;
		op_append(&conn->ll_rq_head, &conn->ll_rq_tail, op);
		ibc_ib_ll_progress_recvs(conn);
	} else if (is_send) {
		op->seq = conn->send_seq++;
		op_append(&conn->sq_head, &conn->sq_tail, op);
		ibc_ib_rndv_start_sends(conn);
	} else {
		op->seq = conn->recv_seq++;
		op_append(&conn->rq_head, &conn->rq_tail, op);
		ibc_ib_rndv_issue_cts(conn);
	}
	return IBC_OK;
}

/**
 * ibc_ib_conn_isend() - Post a send of @nbytes from @buf tagged with @desc.
 * @conn:   [in] established connection.
 * @buf:    [in] host memory; must stay valid and unchanged until @req is
 *               done (for inline and bounce sizes it is copied at posting
 *               time once the receiver's clear-to-send arrived).
 * @nbytes: [in] bytes; the receiver must post exactly this size.
 * @desc:   [in] the operation's descriptor (copied), compared with the
 *               receiver's; NULL means all zero.
 * @req:    [out] completed (done, status) by ibc_ib_ctx_progress().
 *
 * Messages to one peer are matched with its receives in posting order.
 * Blocking: no. Threading: the context's thread.
 * Return: IBC_OK (posted; failures later complete @req with their status);
 *         IBC_ERR_INVALID_USAGE (not established); the connection's error
 *         when it already failed (@req is then completed with it too).
 */
ibc_status_t ibc_ib_conn_isend(struct ibc_ib_conn *conn, const void *buf, size_t nbytes,
			       const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	/* direct endpoint use (tests, ibc_p2p): no operation byte counter */
	req->moved_p = NULL;
	req->counted = 0;
	return conn_post(conn, (void *)buf, nbytes, desc, req, 1);
}

/**
 * ibc_ib_conn_irecv() - Post a receive of exactly @nbytes into @buf.
 * @conn:   [in] established connection.
 * @buf:    [out] host memory written by the peer's RDMA writes (or copied
 *                from a bounce slot) before @req completes.
 * @nbytes: [in] bytes, equal to the matching send's.
 * @desc:   [in] the descriptor the matching send must carry (copied).
 * @req:    [out] completed by ibc_ib_ctx_progress(): IBC_OK, or
 *                IBC_ERR_INVALID_USAGE when the sender reported a
 *                descriptor mismatch, or the connection's error.
 * Blocking: no. Threading: the context's thread.
 * Return: as ibc_ib_conn_isend().
 */
ibc_status_t ibc_ib_conn_irecv(struct ibc_ib_conn *conn, void *buf, size_t nbytes,
			       const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	req->moved_p = NULL;
	req->counted = 0;
	return conn_post(conn, buf, nbytes, desc, req, 0);
}

/*
 * ibc_ib_conn_post() - ibc_ib_conn_isend()/_irecv() for the transport ops
 * table: @req's peer, byte counter and flags were set by the net layer
 * (src/core/net.c) and are kept.
 */
ibc_status_t ibc_ib_conn_post(struct ibc_ib_conn *conn, void *buf, size_t nbytes,
			      const struct ibc_msg_desc *desc, struct ibc_treq *req, int is_send)
{
	return conn_post(conn, buf, nbytes, desc, req, is_send);
}

static struct ibc_ib_qp *conn_qp_by_num(struct ibc_ib_conn *conn, uint32_t qpn)
{
	int i;

	for (i = 0; i < conn->nqps; i++)
		if (conn->qps[i].qp && conn->qps[i].qp->qp_num == qpn)
			return &conn->qps[i];
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* completions                                                            */
/* ---------------------------------------------------------------------- */

static ibc_status_t wc_status_to_ibc(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_ABORT_ERR:
	case IBV_WC_RESP_TIMEOUT_ERR:
	case IBV_WC_REM_INV_RD_REQ_ERR:
		return IBC_ERR_REMOTE;
	default:
		return IBC_ERR_VERBS;
	}
}

static void wc_error(struct ibc_ib_conn *conn, struct ibc_ib_qp *qp, const struct ibv_wc *wc,
		     const struct ibc_ib_op *op, const char *what)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	const char *hint = "";
	char opdesc[128];

	if (conn->dead || conn->failed != IBC_OK)
		return;
	if (wc->status == IBV_WC_RETRY_EXC_ERR || wc->status == IBV_WC_RESP_TIMEOUT_ERR)
		hint = ": the peer process died, or its port or the path to it is down (detected after IBC_IB_RETRY_CNT retries of 4.096 us * 2^IBC_IB_TIMEOUT)";
	else if (wc->status == IBV_WC_WR_FLUSH_ERR)
		hint = ": the QP had entered the error state";
	if (op)
		snprintf(opdesc, sizeof(opdesc), "rdma write of message #%u (%zu bytes)", op->seq,
			 op->nbytes);
	else
		snprintf(opdesc, sizeof(opdesc), "%s", what);
	ibc_ib_conn_fail(conn, wc_status_to_ibc(wc->status),
			 "%s on qp 0x%x (%s:%d) to peer qp 0x%x (%s:%d) failed: %s (wc status %d, vendor error 0x%x)%s",
			 opdesc, wc->qp_num, ctx->dev_name, ctx->port,
			 qp ? qp->remote_qpn : 0, conn->peer_dev, conn->peer_port,
			 ibv_wc_status_str(wc->status), wc->status, wc->vendor_err, hint);
}

/**
 * ibc_ib_conn_handle_wc() - Dispatch one work completion (from the
 * context's CQ) by the kind encoded in its wr_id: a signaled data write
 * finishing a zero-copy send, a send-queue retirement, a receive carrying
 * an immediate (CTS, data part, NACK), or a teardown marker. Errors fail
 * the connection once, naming the QPs and ibv_wc_status_str().
 */
void ibc_ib_conn_handle_wc(struct ibc_ib_ctx *ctx, const struct ibv_wc *wc)
{
	unsigned kind = (unsigned)(wc->wr_id & IBC_IB_WR_KIND_MASK);
	void *ptr = (void *)(uintptr_t)(wc->wr_id & ~IBC_IB_WR_KIND_MASK);
	struct ibc_ib_conn *conn;
	struct ibc_ib_qp *qp;
	struct ibc_ib_op *op;

	(void)ctx;
	switch (kind) {
	case IBC_IB_WR_OP:
		op = ptr;
		conn = op->conn;
		conn->last_activity_ns = ibc_time_coarse_ns();
		qp = conn_qp_by_num(conn, wc->qp_num);
		if (wc->status == IBV_WC_SUCCESS) {
			if (qp)
				ibc_ib_qp_sq_retire(qp);
		} else {
			wc_error(conn, qp, wc, op, NULL);
		}
		if (--op->parts_left <= 0) {
			if (wc->status == IBV_WC_SUCCESS && conn->failed == IBC_OK)
				ibc_ib_op_complete(op, IBC_OK);
			ibc_ib_op_free(op);
		}
		break;
	case IBC_IB_WR_QP:
		qp = ptr;
		if (wc->status == IBV_WC_SUCCESS)
			ibc_ib_qp_sq_retire(qp);
		else
			wc_error(qp->conn, qp, wc, NULL,
				 "rdma write (clear-to-send, refusal, credit, or inline, bounce or eager data)");
		break;
	case IBC_IB_WR_RECV:
		qp = ptr;
		conn = qp->conn;
		conn->last_activity_ns = ibc_time_coarse_ns();
		qp->rq_posted--;
		if (wc->status != IBV_WC_SUCCESS) {
			wc_error(conn, qp, wc, NULL, "receive of an rdma write with immediate");
			break;
		}
		if (conn->dead || conn->failed != IBC_OK)
			break;
		recv_imm(conn, qp, wc);
		break;
	case IBC_IB_WR_PROBE:
		qp = ptr;
		qp->conn->probe_outstanding = 0;
		qp->conn->last_activity_ns = ibc_time_coarse_ns();
		if (wc->status == IBV_WC_SUCCESS)
			ibc_ib_qp_sq_retire(qp);
		else
			wc_error(qp->conn, qp, wc, NULL, "keep-alive probe (zero-byte rdma write)");
		break;
	case IBC_IB_WR_DRAIN_SQ:
		((struct ibc_ib_qp *)ptr)->drain_sq_done = 1;
		break;
	default:
		IBC_LOG_WARN(IB, "completion with unknown wr_id 0x%llx (internal error)",
			     (unsigned long long)wc->wr_id);
		break;
	}
}
