/* SPDX-License-Identifier: MIT */
/*
 * ib_eager.c - the eager path of a verbs connection (ib.h): a message of at
 * most the connection's eager limit is written at once, with one RDMA WRITE
 * WITH IMM, into the receiver's slot k % D (a 64-byte header with the
 * sender's descriptor, size, sequence number and piggybacked credit, then
 * the payload), without a clear-to-send; the receiver copies it out when
 * (or once) the matching receive is posted, after comparing descriptors.
 *
 * Credits: the sender may use slot k % D once the receiver's consumed count
 * (every message below it finished) is above k - D. The receiver tells its
 * count in every entry it writes anyway (clear-to-send entries, the header
 * of its own eager messages), and otherwise with a zero-byte WRITE WITH IMM
 * once D/2 are owed. A sender blocked on message k has told the receiver
 * everything before k, so the receiver's count reaches k and D are owed:
 * the credit always comes (as in UCX's and NCCL's lazy credit return).
 *
 * Mismatches: the receiver refuses an eager message whose descriptor or size
 * differs from its receive (or whose receive was posted for the rendezvous
 * path) with an ENACK entry holding both descriptors; the sender runs its
 * own descriptor check on it, so both sides report the mismatch as they do
 * for a rendezvous message. A rendezvous send still without its
 * clear-to-send after IB_RTS_NS nudges the receiver, which answers an eager
 * receive of that number with a clear-to-send (the sender's check then
 * refuses it) and an LL one with a protocol mismatch.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/util.h"
#include "base/wire.h"
#include "transport/ib/ib.h"
#include "transport/ib/ib_conn_internal.h"

/* ---------------------------------------------------------------------- */
/* credits                                                                */
/* ---------------------------------------------------------------------- */

uint32_t ibc_ib_eager_consumed(const struct ibc_ib_conn *conn)
{
	return conn->rord_head ? conn->rord_head->seq : conn->recv_seq;
}

uint32_t ibc_ib_eager_credit_take(struct ibc_ib_conn *conn)
{
	uint32_t c = ibc_ib_eager_consumed(conn);

	/* a refusal still staged in a slot keeps that slot from being reused */
	if (conn->nenack_due == 0 && (int32_t)(c - conn->credit_sent) > 0)
		conn->credit_sent = c;
	return conn->credit_sent;
}

void ibc_ib_eager_credit_learn(struct ibc_ib_conn *conn, uint32_t c)
{
	/* counts only grow; one beyond what was sent would be a peer's bug */
	if ((int32_t)(c - conn->peer_credit) > 0 && (int32_t)(c - conn->send_seq) <= 0)
		conn->peer_credit = c;
}

void ibc_ib_eager_credit_in(struct ibc_ib_conn *conn, uint32_t imm)
{
	uint32_t low = imm & IBC_IB_IMM_CREDIT_MASK;

	/* the count is at most 2^29 ahead of the last one known */
	ibc_ib_eager_credit_learn(conn, conn->peer_credit +
				  ((low - conn->peer_credit) & IBC_IB_IMM_CREDIT_MASK));
}

/* zero-byte WRITE WITH IMM of the consumed count; 0, or 1 without room */
static int credit_post(struct ibc_ib_conn *conn)
{
	struct ibc_ib_qp *qp = &conn->qps[0];
	uint32_t c = ibc_ib_eager_consumed(conn);
	int ret;

	if (ibc_ib_qp_sq_room(qp) < 1)
		return 1;
	ret = ibc_ib_qp_post_write(qp, ibc_ib_wr_id(qp, IBC_IB_WR_QP), 0, 0, NULL, 0, 0,
				   conn->rfifo_addr, conn->rfifo_rkey, 1, ibc_ib_imm_credit(c));
	if (ret) {
		ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
				 "ibv_post_send of eager credits on qp 0x%x (%s:%d) failed: %s",
				 qp->qp->qp_num, conn->ctx->dev_name, conn->ctx->port, strerror(ret));
		return -1;
	}
	conn->credit_sent = c;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* send side                                                              */
/* ---------------------------------------------------------------------- */

int ibc_ib_eager_send(struct ibc_ib_conn *conn, struct ibc_ib_op *op)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	unsigned slot = op->seq % (unsigned)conn->D;
	struct ibc_ib_qp *qp = &conn->qps[op->seq % (unsigned)conn->nqps];
	uint8_t *h = ibc_ib_sslot(conn, slot);
	size_t n = op->nbytes;
	int inl = n <= (size_t)ctx->prm.inline_bytes && IB_EAGER_HDR + n <= (size_t)qp->max_inline;
	int zcopy = !inl && n > conn->bb;
	struct ibv_sge sge[2];
	int nsge = 1;
	int ret;

	if ((int32_t)(op->seq - conn->peer_credit) >= conn->D)
		return 1;       /* message seq - D not consumed yet */
	if (ibc_ib_qp_sq_room(qp) < 1)
		return 1;
	if (zcopy && !op->mr) {
		ibc_status_t st = ibc_ib_mr_get(&ctx->mrc, op->buf, n, IBC_IB_MR_READONLY, &op->mr);

		if (st != IBC_OK) {
			ibc_ib_conn_fail(conn, st, "cannot register the %zu-byte send buffer of message #%u: %s",
					 n, op->seq, ctx->mrc.errbuf);
			return -1;
		}
	}
	/* the slot's previous message was consumed: its write has landed, the slot is ours */
	ibc_msg_desc_pack(&op->desc, h + offsetof(struct ib_eager_hdr, desc));
	ibc_wire_put32(h + offsetof(struct ib_eager_hdr, nbytes), (uint32_t)n);
	ibc_wire_put32(h + offsetof(struct ib_eager_hdr, seq), op->seq);
	ibc_wire_put32(h + offsetof(struct ib_eager_hdr, credit), ibc_ib_eager_credit_take(conn));
	sge[0].addr = (uint64_t)(uintptr_t)h;
	sge[0].length = IB_EAGER_HDR;
	sge[0].lkey = conn->sbounce_mr->lkey;
	if (inl || zcopy) {
		sge[1].addr = (uint64_t)(uintptr_t)op->buf;
		sge[1].length = (uint32_t)n;
		sge[1].lkey = zcopy ? op->mr->lkey : 0;
		nsge = 2;
	} else if (n) {
		memcpy(h + IB_EAGER_HDR, op->buf, n);
		sge[0].length += (uint32_t)n;
	}
	ret = ibc_ib_qp_post_write_sg(qp, zcopy ? ibc_ib_wr_id(op, IBC_IB_WR_OP) :
					  ibc_ib_wr_id(qp, IBC_IB_WR_QP),
				      zcopy, inl, sge, nsge,
				      conn->eager_raddr + (uint64_t)slot * conn->eager_rstride,
				      conn->eager_rkey, 1,
				      ibc_ib_imm_make(IBC_IB_IMM_EAGER, 1, slot, op->seq));
	if (ret) {
		ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
				 "ibv_post_send of eager message #%u (%zu bytes) on qp 0x%x (%s:%d) failed: %s",
				 op->seq, n, qp->qp->qp_num, ctx->dev_name, ctx->port, strerror(ret));
		return -1;
	}
	conn->eager_sent_tag[slot] = op->seq + 1;
	/* a clear-to-send that came for this number first: the receiver refuses the message */
	if (conn->cts_ready[slot] &&
	    ibc_wire_get32((const uint8_t *)&conn->fifo[slot].cts + offsetof(struct ib_cts, seq)) ==
		    op->seq)
		conn->cts_ready[slot] = 0;
	if (zcopy) {
		op->parts_left = 1;     /* completed by the signaled write's completion */
		return 0;
	}
	ibc_ib_op_complete(op, IBC_OK);
	ibc_ib_op_free(op);
	return 0;
}

void ibc_ib_eager_enack_in(struct ibc_ib_conn *conn, unsigned slot)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	const uint8_t *e = (const uint8_t *)&conn->fifo[slot].enack;
	struct ibc_msg_desc mine;
	struct ibc_msg_desc theirs;
	ibc_status_t st;

	ibc_msg_desc_unpack(e + offsetof(struct ib_enack, sdesc), &mine);
	ibc_msg_desc_unpack(e + offsetof(struct ib_enack, rdesc), &theirs);
	st = ctx->cb.desc_check(ctx->cb.arg, conn->peer, &mine,
				(size_t)ibc_wire_get64(e + offsetof(struct ib_enack, snbytes)), &theirs,
				(size_t)ibc_wire_get64(e + offsetof(struct ib_enack, rnbytes)));
	if (st == IBC_OK)
		IBC_LOG_WARN(IB, "peer rank %d refused eager message #%u although the descriptors match (its receive was posted for the rendezvous path)",
			     conn->peer, ibc_wire_get32(e + offsetof(struct ib_enack, seq)));
}

void ibc_ib_eager_maybe_rts(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot)
{
	struct ibc_ib_qp *qp = &conn->qps[slot % (unsigned)conn->nqps];
	uint64_t now = ibc_time_coarse_ns();
	int ret;

	if (conn->rts_tag != op->seq + 1) {
		conn->rts_tag = op->seq + 1;
		conn->rts_next_ns = now + IB_RTS_NS;
		return;
	}
	if (now < conn->rts_next_ns || ibc_ib_qp_sq_room(qp) < 1)
		return;
	ret = ibc_ib_qp_post_write(qp, ibc_ib_wr_id(qp, IBC_IB_WR_QP), 0, 0, NULL, 0, 0,
				   conn->rfifo_addr, conn->rfifo_rkey, 1,
				   ibc_ib_imm_make(IBC_IB_IMM_RTS, 1, slot, op->seq));
	if (ret) {
		ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
				 "ibv_post_send of a nudge for message #%u on qp 0x%x failed: %s",
				 op->seq, qp->qp->qp_num, strerror(ret));
		return;
	}
	conn->rts_next_ns = now + IB_RTS_NS;
}

/* ---------------------------------------------------------------------- */
/* receive side                                                           */
/* ---------------------------------------------------------------------- */

/* post the refusal staged in slot @slot; 0, 1 without room, -1 failed */
static int enack_post(struct ibc_ib_conn *conn, unsigned slot)
{
	struct ibc_ib_qp *qp = &conn->qps[slot % (unsigned)conn->nqps];
	const uint8_t *e = (const uint8_t *)&conn->out[slot].enack;
	int ret;

	if (ibc_ib_qp_sq_room(qp) < 1)
		return 1;
	ret = ibc_ib_qp_post_write(qp, ibc_ib_wr_id(qp, IBC_IB_WR_QP), 0,
				   qp->max_inline >= (int)sizeof(struct ib_enack), e,
				   conn->out_mr->lkey, sizeof(struct ib_enack),
				   conn->rfifo_addr + (uint64_t)slot * sizeof(struct ib_fifo_slot) +
					   offsetof(struct ib_fifo_slot, enack),
				   conn->rfifo_rkey, 1,
				   ibc_ib_imm_make(IBC_IB_IMM_ENACK, 1, slot,
						   ibc_wire_get32(e + offsetof(struct ib_enack, seq))));
	if (ret) {
		ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
				 "ibv_post_send of an eager refusal on qp 0x%x failed: %s",
				 qp->qp->qp_num, strerror(ret));
		return -1;
	}
	conn->enack_due[slot] = 0;
	conn->nenack_due--;
	return 0;
}

/* the message in slot @slot is consumed: free the slot, finish @op with @st */
static void slot_done(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot,
		      ibc_status_t st)
{
	conn->eager_in[slot] = 0;
	conn->rslot[slot] = NULL;
	conn->last_activity_ns = ibc_time_coarse_ns();
	ibc_ib_op_complete(op, st);
	ibc_ib_op_free(op);
}

/*
 * Receive @op (eager or rendezvous) meets eager message #seq in @slot with
 * another descriptor or size (@st from the check, which has reported it):
 * stage and post the refusal with both descriptors, fail @op.
 */
static void eager_refuse(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot,
			 ibc_status_t st)
{
	const uint8_t *h = ibc_ib_rslot(conn, slot);
	uint8_t *e = (uint8_t *)&conn->out[slot].enack;

	ibc_wire_put64(e + offsetof(struct ib_enack, rnbytes), op->nbytes);
	ibc_wire_put64(e + offsetof(struct ib_enack, snbytes),
		       ibc_wire_get32(h + offsetof(struct ib_eager_hdr, nbytes)));
	ibc_wire_put32(e + offsetof(struct ib_enack, seq), op->seq);
	ibc_msg_desc_pack(&op->desc, e + offsetof(struct ib_enack, rdesc));
	memcpy(e + offsetof(struct ib_enack, sdesc), h + offsetof(struct ib_eager_hdr, desc),
	       IBC_MSG_DESC_WIRE_BYTES);
	if (!conn->enack_due[slot]) {
		conn->enack_due[slot] = 1;
		conn->nenack_due++;
	}
	slot_done(conn, op, slot, st);
	if (conn->failed == IBC_OK)
		enack_post(conn, slot);
}

/* receive @op holds slot @slot, where its eager message arrived: check, copy out */
static void eager_take(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	const uint8_t *h = ibc_ib_rslot(conn, slot);
	size_t n = ibc_wire_get32(h + offsetof(struct ib_eager_hdr, nbytes));
	struct ibc_msg_desc theirs;
	ibc_status_t st;

	ibc_msg_desc_unpack(h + offsetof(struct ib_eager_hdr, desc), &theirs);
	st = ctx->cb.desc_check(ctx->cb.arg, conn->peer, &op->desc, op->nbytes, &theirs, n);
	if (st == IBC_OK && !op->eager) {
		/* equal calls take one path: a rendezvous receive here is a peer's bug */
		IBC_LOG_WARN(IB, "peer rank %d sent message #%u (%zu bytes) eagerly, this rank posted its receive for the rendezvous path",
			     conn->peer, op->seq, n);
		st = IBC_ERR_INVALID_USAGE;
	}
	if (st != IBC_OK) {
		eager_refuse(conn, op, slot, st);
		return;
	}
	if (n)
		memcpy(op->buf, h + IB_EAGER_HDR, n);
	slot_done(conn, op, slot, IBC_OK);
}

void ibc_ib_eager_recv_start(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot)
{
	if (conn->eager_in[slot] == op->seq + 1)
		eager_take(conn, op, slot);
}

int ibc_ib_eager_recv_check(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot)
{
	if (conn->eager_in[slot] != op->seq + 1)
		return 0;
	eager_take(conn, op, slot);
	return 1;
}

void ibc_ib_eager_in(struct ibc_ib_conn *conn, unsigned slot, uint32_t imm)
{
	const uint8_t *h = ibc_ib_rslot(conn, slot);
	uint32_t seq = ibc_wire_get32(h + offsetof(struct ib_eager_hdr, seq));
	uint32_t n = ibc_wire_get32(h + offsetof(struct ib_eager_hdr, nbytes));
	struct ibc_ib_op *op = conn->rslot[slot];
	struct ibc_ib_op *ll;

	if (!conn->eager_max || (seq & IBC_IB_IMM_SEQ_MASK) != ibc_ib_imm_seq(imm) ||
	    seq % (unsigned)conn->D != slot ||
	    n > conn->eager_max || conn->eager_in[slot] || (op && op->seq != seq)) {
		ibc_ib_conn_fail(conn, IBC_ERR_INTERNAL,
				 "eager message #%u (%u bytes, immediate 0x%08x) in slot %u, which %s (protocol error)",
				 seq, n, imm, slot,
				 conn->eager_in[slot] ? "still holds an unconsumed message" :
				 op && op->seq != seq ? "belongs to another receive" : "is not its slot");
		return;
	}
	ibc_ib_eager_credit_learn(conn, ibc_wire_get32(h + offsetof(struct ib_eager_hdr, credit)));
	conn->eager_in[slot] = seq + 1;
	conn->last_activity_ns = ibc_time_coarse_ns();
	if (op) {
		eager_take(conn, op, slot);
		return;
	}
	/* not posted yet (unexpected: kept until it is), or posted for the LL path */
	if ((int32_t)(seq - conn->recv_seq) < 0 && (ll = ibc_ib_ll_find_recv(conn, seq, 0))) {
		struct ibc_msg_desc theirs;

		ibc_msg_desc_unpack(h + offsetof(struct ib_eager_hdr, desc), &theirs);
		ibc_ib_ll_path_mismatch(conn, seq, 0, ll, &theirs, n);
	}
}

void ibc_ib_eager_rts_in(struct ibc_ib_conn *conn, unsigned slot, uint32_t imm)
{
	struct ibc_ib_op *op = conn->rslot[slot];
	uint32_t seq = ibc_ib_imm_seq(imm);
	struct ibc_ib_op *ll;

	if (op && op->eager && !op->cts_sent && (op->seq & IBC_IB_IMM_SEQ_MASK) == seq) {
		struct ibc_ib_qp *qp = &conn->qps[slot % (unsigned)conn->nqps];

		/* the sender's check of this clear-to-send refuses it: both report */
		if (ibc_ib_qp_sq_room(qp) < 1)
			return; /* the next nudge asks again */
		if (ibc_ib_rndv_post_cts(conn, op, slot,
					 (uint64_t)(uintptr_t)(ibc_ib_rslot(conn, slot) + IB_EAGER_HDR),
					 conn->rbounce_mr->rkey) == 0)
			op->cts_sent = 1;
		return;
	}
	if (!op && (ll = ibc_ib_ll_find_recv(conn, seq, 1)))
		ibc_ib_ll_path_mismatch(conn, ll->seq, 0, NULL, NULL, 0);
}

void ibc_ib_eager_progress(struct ibc_ib_conn *conn)
{
	uint32_t owed;
	unsigned s;

	for (s = 0; conn->nenack_due > 0 && s < (unsigned)conn->D; s++)
		if (conn->enack_due[s] && enack_post(conn, s) != 0)
			return;
	owed = ibc_ib_eager_consumed(conn) - conn->credit_sent;
	if (conn->failed == IBC_OK && owed >= (uint32_t)IBC_MAX(conn->D / 2, 1) &&
	    (int32_t)owed > 0)
		credit_post(conn);
}

int ibc_ib_eager_peek(struct ibc_ib_conn *conn, struct ibc_msg_desc *desc, size_t *nbytes)
{
	unsigned slot;
	const uint8_t *h;

	if (!conn->eager_max)
		return 0;
	slot = conn->recv_seq % (unsigned)conn->D;
	/* an eager message announces itself by a completion: handle those that
	 * came (a rank waiting to connect elsewhere may not have polled yet) */
	if (conn->eager_in[slot] != conn->recv_seq + 1)
		ibc_ib_ctx_poll(conn->ctx);
	if (conn->failed != IBC_OK || conn->rq_head || conn->eager_in[slot] != conn->recv_seq + 1)
		return 0;
	h = ibc_ib_rslot(conn, slot);
	ibc_msg_desc_unpack(h + offsetof(struct ib_eager_hdr, desc), desc);
	*nbytes = ibc_wire_get32(h + offsetof(struct ib_eager_hdr, nbytes));
	return 1;
}
