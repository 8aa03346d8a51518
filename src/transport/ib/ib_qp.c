/* SPDX-License-Identifier: MIT */
/*
 * ib_qp.c - RC queue pairs: creation, the RESET -> INIT -> RTR -> RTS path
 * (timeout, retry count, path MTU, GRH for RoCE or LID for InfiniBand),
 * posting RDMA writes with selective signaling and the send-queue
 * accounting it needs, and posting receives for WRITE WITH IMM. Relies on
 * ib.h and the context's CQ (ib_cq.c).
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/status.h"
#include "base/util.h"
#include "transport/ib/ib.h"

/**
 * ibc_ib_qp_create() - Create one RC QP of a connection, in RESET state.
 * @ctx:      [in]  context: PD, CQ (grown to hold the QP's completions).
 * @conn:     [in]  owning connection (stored for completions and events).
 * @idx:      [in]  index of the QP in the connection.
 * @sq_depth: [in]  send work requests the QP must hold.
 * @rq_depth: [in]  receive work requests kept posted.
 * @qp:       [out] initialised in place on success.
 *
 * Asks for IBC_IB_INLINE_BYTES of inline data and falls back to less when
 * the device refuses (the accepted size is qp->max_inline). The initial PSN
 * is random (24 bits).
 * Blocking: a verbs call. Threading: the context's thread.
 * Return: IBC_OK; IBC_ERR_VERBS (logged, with errno text); IBC_ERR_NO_MEMORY;
 *         IBC_ERR_SYSTEM (no randomness).
 */
ibc_status_t ibc_ib_qp_create(struct ibc_ib_ctx *ctx, struct ibc_ib_conn *conn, int idx,
			      int sq_depth, int rq_depth, struct ibc_ib_qp *qp)
{
	struct ibv_qp_init_attr ia;
	int inline_try[3] = { ctx->prm.inline_bytes, 64, 0 };
	ibc_status_t st;
	uint32_t rnd;
	int i;

	memset(qp, 0, sizeof(*qp));
	qp->ctx = ctx;
	qp->conn = conn;
	qp->idx = idx;
	qp->sq_depth = sq_depth;
	qp->rq_depth = rq_depth;
	IBC_CHECK(ibc_random_bytes(&rnd, sizeof(rnd)));
	qp->psn = rnd & 0xffffff;
	qp->sig_batch = ibc_calloc((size_t)sq_depth + 1, sizeof(int), "qp signal ring");
	if (!qp->sig_batch)
		return IBC_ERR_NO_MEMORY;
	IBC_CHECK_GOTO(ibc_ib_ctx_cq_reserve(ctx, sq_depth + rq_depth + 2), st, err_free);
	for (i = 0; i < 3; i++) {
		if (i > 0 && inline_try[i] >= inline_try[i - 1])
			continue;
		memset(&ia, 0, sizeof(ia));
		ia.qp_context = qp;
		ia.send_cq = ctx->cq;
		ia.recv_cq = ctx->cq;
		ia.qp_type = IBV_QPT_RC;
		ia.sq_sig_all = 0;
		ia.cap.max_send_wr = (uint32_t)sq_depth;
		ia.cap.max_recv_wr = (uint32_t)rq_depth;
		ia.cap.max_send_sge = 2; /* eager: header + payload */
		ia.cap.max_recv_sge = 1;
		ia.cap.max_inline_data = (uint32_t)inline_try[i];
		if (ibc_fault_hit(IBC_FAULT_VERBS, "ibv_create_qp")) {
			errno = ENOMEM;
			qp->qp = NULL;
			break;
		}
		qp->qp = ibv_create_qp(ctx->pd, &ia);
		if (qp->qp || errno != EINVAL)
			break;
	}
	if (!qp->qp) {
		IBC_LOG_WARN(IB, "ibv_create_qp on %s:%d (send queue %d, receive queue %d) failed: %s",
			     ctx->dev_name, ctx->port, sq_depth, rq_depth, strerror(errno));
		st = IBC_ERR_VERBS;
		goto err_cq;
	}
	qp->max_inline = (int)ia.cap.max_inline_data;
	return IBC_OK;

err_cq:
	ibc_ib_ctx_cq_release(ctx, sq_depth + rq_depth + 2);
err_free:
	ibc_free(qp->sig_batch);
	qp->sig_batch = NULL;
	return st;
}

/**
 * ibc_ib_qp_destroy() - Destroy a QP created by ibc_ib_qp_create(). The
 * caller has drained it (no completion of it may still be in the CQ).
 * @qp: [in] the QP; a QP whose creation failed is ignored.
 */
void ibc_ib_qp_destroy(struct ibc_ib_qp *qp)
{
	uint32_t qpn;
	int ret;

	if (!qp->qp)
		return;
	qpn = qp->qp->qp_num;
	ret = ibv_destroy_qp(qp->qp);
	if (ret)
		IBC_LOG_WARN(IB, "ibv_destroy_qp of qp 0x%x failed: %s", qpn, strerror(ret));
	qp->qp = NULL;
	ibc_ib_ctx_cq_release(qp->ctx, qp->sq_depth + qp->rq_depth + 2);
	ibc_free(qp->sig_batch);
	qp->sig_batch = NULL;
	qp->sig_head = qp->sig_tail = 0;
	qp->sq_inflight = qp->unsignaled = 0;
}

static ibc_status_t qp_modify(struct ibc_ib_qp *qp, struct ibv_qp_attr *attr, int mask,
			      const char *to, const char *details)
{
	int ret;

	if (ibc_fault_hit(IBC_FAULT_VERBS, "ibv_modify_qp"))
		ret = EINVAL;
	else
		ret = ibv_modify_qp(qp->qp, attr, mask);
	if (ret) {
		IBC_LOG_WARN(IB, "qp 0x%x: ibv_modify_qp to %s failed: %s%s", qp->qp->qp_num, to,
			     strerror(ret), details);
		return IBC_ERR_VERBS;
	}
	return IBC_OK;
}

/**
 * ibc_ib_qp_to_init() - RESET -> INIT on the context's port, remote write
 * allowed (the peer writes CTS entries, NACKs and payloads into our MRs).
 * @ctx: [in] context (port). @qp: [in,out] QP in RESET.
 * Return: IBC_OK; IBC_ERR_VERBS (logged).
 */
ibc_status_t ibc_ib_qp_to_init(struct ibc_ib_ctx *ctx, struct ibc_ib_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = (uint8_t)ctx->port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	return qp_modify(qp, &a,
			 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
			 "INIT", "");
}

/**
 * ibc_ib_qp_to_rtr() - INIT -> RTR towards the peer's QP.
 * @ctx:  [in] context (port, IBC_IB_SL, IBC_IB_TC).
 * @qp:   [in,out] QP in INIT.
 * @dest: [in] peer QP number and PSN, LID (InfiniBand) or destination GID
 *             and our source GID index (RoCE: is_global), negotiated MTU.
 * Return: IBC_OK; IBC_ERR_VERBS (logged with the path attributes).
 */
ibc_status_t ibc_ib_qp_to_rtr(struct ibc_ib_ctx *ctx, struct ibc_ib_qp *qp,
			      const struct ibc_ib_qp_dest *dest)
{
	struct ibv_qp_attr a;
	char details[160];
	char gs[64];

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = dest->mtu;
	a.dest_qp_num = dest->qpn;
	a.rq_psn = dest->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12; /* 0.64 ms */
	a.ah_attr.dlid = dest->lid;
	a.ah_attr.sl = (uint8_t)ctx->prm.sl;
	a.ah_attr.src_path_bits = 0;
	a.ah_attr.port_num = (uint8_t)ctx->port;
	if (dest->is_global) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, dest->dgid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)dest->sgid_index;
		a.ah_attr.grh.hop_limit = 255;
		a.ah_attr.grh.traffic_class = (uint8_t)ctx->prm.tc;
	}
	qp->remote_qpn = dest->qpn;
	ibc_ib_gid_str(dest->dgid, gs, sizeof(gs));
	snprintf(details, sizeof(details), " (dest qp 0x%x, path mtu %s, %s %s, sgid idx %d)",
		 dest->qpn, ibc_ib_mtu_str(dest->mtu), dest->is_global ? "dgid" : "dlid",
		 dest->is_global ? gs : "", dest->sgid_index);
	if (!dest->is_global)
		snprintf(details, sizeof(details), " (dest qp 0x%x, path mtu %s, dlid %u)", dest->qpn,
			 ibc_ib_mtu_str(dest->mtu), dest->lid);
	return qp_modify(qp, &a,
			 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
			 "RTR", details);
}

/**
 * ibc_ib_qp_to_rts() - RTR -> RTS with IBC_IB_TIMEOUT, IBC_IB_RETRY_CNT and
 * infinite RNR retries (receives are always reposted).
 * @ctx: [in] context (parameters). @qp: [in,out] QP in RTR.
 * Return: IBC_OK; IBC_ERR_VERBS (logged).
 */
ibc_status_t ibc_ib_qp_to_rts(struct ibc_ib_ctx *ctx, struct ibc_ib_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)ctx->prm.timeout;
	a.retry_cnt = (uint8_t)ctx->prm.retry_cnt;
	a.rnr_retry = 7;
	a.sq_psn = qp->psn;
	a.max_rd_atomic = 1;
	return qp_modify(qp, &a,
			 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
			 "RTS", "");
}

/* ibc_ib_qp_to_err() - move to ERROR so that every posted WR is flushed */
ibc_status_t ibc_ib_qp_to_err(struct ibc_ib_qp *qp)
{
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ret = ibv_modify_qp(qp->qp, &a, IBV_QP_STATE);
	if (ret) {
		IBC_LOG_DEBUG(IB, "qp 0x%x: ibv_modify_qp to ERR failed: %s", qp->qp->qp_num,
			      strerror(ret));
		return IBC_ERR_VERBS;
	}
	return IBC_OK;
}

/**
 * ibc_ib_qp_post_recvs() - Post @n zero-length receives (WRITE WITH IMM
 * consumes one each; the payload goes to the RDMA address, not here).
 * Return: 0 or the errno of ibv_post_recv.
 */
int ibc_ib_qp_post_recvs(struct ibc_ib_qp *qp, int n)
{
	struct ibv_recv_wr wrs[32];
	struct ibv_recv_wr *bad = NULL;
	int done = 0;

	while (done < n) {
		int k = IBC_MIN(n - done, (int)IBC_ARRAY_SIZE(wrs));
		int i;
		int ret;

		for (i = 0; i < k; i++) {
			memset(&wrs[i], 0, sizeof(wrs[i]));
			wrs[i].wr_id = ibc_ib_wr_id(qp, IBC_IB_WR_RECV);
			wrs[i].next = i + 1 < k ? &wrs[i + 1] : NULL;
		}
		ret = ibv_post_recv(qp->qp, wrs, &bad);
		if (ret) {
			/* the WRs before @bad were posted: the teardown drain counts them */
			for (i = 0; i < k && &wrs[i] != bad; i++)
				qp->rq_posted++;
			return ret;
		}
		qp->rq_posted += k;
		done += k;
	}
	return 0;
}

/* ibc_ib_qp_sq_room() - send WRs that can be posted now (one kept for teardown) */
int ibc_ib_qp_sq_room(const struct ibc_ib_qp *qp)
{
	return qp->sq_depth - 1 - qp->sq_inflight;
}

/**
 * ibc_ib_qp_post_write() - Post one RDMA WRITE (WITH IMM) with selective
 * signaling.
 * @qp:       [in,out] QP in RTS with ibc_ib_qp_sq_room() >= 1.
 * @wr_id:    [in] completion cookie (ibc_ib_wr_id()); for an unsignaled WR
 *                 pass ibc_ib_wr_id(qp, IBC_IB_WR_QP): it is used if the WR
 *                 is signaled to retire the queue, or fails.
 * @signaled: [in] request a completion (the caller needs to know the data
 *                 left the buffer). Every sq_depth/2-th WR is signaled
 *                 anyway so that the send queue is retired.
 * @inl:      [in] send @nbytes inline from @laddr (then @lkey is unused).
 * @laddr, @lkey, @nbytes: [in] local source; @nbytes may be 0.
 * @raddr, @rkey: [in] remote destination.
 * @with_imm, @imm: [in] RDMA WRITE WITH IMM and its host-order immediate.
 * Return: 0 or the errno of ibv_post_send.
 */
int ibc_ib_qp_post_write(struct ibc_ib_qp *qp, uint64_t wr_id, int signaled, int inl,
			 const void *laddr, uint32_t lkey, size_t nbytes, uint64_t raddr,
			 uint32_t rkey, int with_imm, uint32_t imm)
{
	struct ibv_sge sge;

	sge.addr = (uint64_t)(uintptr_t)laddr;
	sge.length = (uint32_t)nbytes;
	sge.lkey = lkey;
	return ibc_ib_qp_post_write_sg(qp, wr_id, signaled, inl, &sge, 1, raddr, rkey, with_imm,
				       imm);
}

int ibc_ib_qp_post_write_sg(struct ibc_ib_qp *qp, uint64_t wr_id, int signaled, int inl,
			    const struct ibv_sge *sge, int nsge, uint64_t raddr, uint32_t rkey,
			    int with_imm, uint32_t imm)
{
	struct ibv_send_wr wr;
	struct ibv_send_wr *bad = NULL;
	struct ibv_sge sg[2];
	int n = 0;
	int i;
	int ret;

	if (!signaled && qp->unsignaled + 1 >= qp->sq_depth / 2)
		signaled = 1;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) | (inl ? IBV_SEND_INLINE : 0);
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	/* empty pieces are left out: a zero-byte write has no SGE at all */
	for (i = 0; i < nsge && i < 2; i++)
		if (sge[i].length)
			sg[n++] = sge[i];
	if (n) {
		wr.sg_list = sg;
		wr.num_sge = n;
	}
	if (ibc_fault_hit(IBC_FAULT_VERBS, "ibv_post_send"))
		ret = ENOMEM;
	else
		ret = ibv_post_send(qp->qp, &wr, &bad);
	if (ret)
		return ret;
	qp->sq_inflight++;
	if (signaled) {
		qp->sig_batch[qp->sig_tail] = qp->unsignaled + 1;
		qp->sig_tail = (qp->sig_tail + 1) % (qp->sq_depth + 1);
		qp->unsignaled = 0;
	} else {
		qp->unsignaled++;
	}
	return 0;
}

/*
 * ibc_ib_qp_sq_retire() - a signaled WR completed: retire it and the
 * unsignaled ones before it. A QP already destroyed (a zombie connection
 * whose drain timed out gets late successful completions) has no ring any
 * more: nothing to account, ignored.
 */
void ibc_ib_qp_sq_retire(struct ibc_ib_qp *qp)
{
	if (!qp->sig_batch || qp->sig_head == qp->sig_tail)
		return;
	qp->sq_inflight -= qp->sig_batch[qp->sig_head];
	if (qp->sq_inflight < 0)
		qp->sq_inflight = 0;
	qp->sig_head = (qp->sig_head + 1) % (qp->sq_depth + 1);
}

/**
 * ibc_ib_ctx_cq_reserve() - Make room in the shared CQ for @ncqe more
 * outstanding completions (a new QP's send + receive queues), growing it
 * with ibv_resize_cq when needed.
 * Return: IBC_OK; IBC_ERR_VERBS when the device cannot hold that many.
 */
ibc_status_t ibc_ib_ctx_cq_reserve(struct ibc_ib_ctx *ctx, int ncqe)
{
	int want;
	int ret;

	if (ctx->cq_needed + ncqe <= ctx->cq_size) {
		ctx->cq_needed += ncqe;
		return IBC_OK;
	}
	want = IBC_MAX(ctx->cq_needed + ncqe, 2 * ctx->cq_size);
	if (want > ctx->dev_attr.max_cqe)
		want = ctx->dev_attr.max_cqe;
	if (want < ctx->cq_needed + ncqe) {
		IBC_LOG_WARN(IB, "%s: the CQ would need %d entries, the device allows %d (too many connections or IBC_IB_DEPTH too large)",
			     ctx->dev_name, ctx->cq_needed + ncqe, ctx->dev_attr.max_cqe);
		return IBC_ERR_VERBS;
	}
	ret = ibv_resize_cq(ctx->cq, want);
	if (ret) {
		IBC_LOG_WARN(IB, "ibv_resize_cq of %s from %d to %d entries failed: %s", ctx->dev_name,
			     ctx->cq_size, want, strerror(ret));
		return IBC_ERR_VERBS;
	}
	ctx->cq_size = ctx->cq->cqe;
	ctx->cq_needed += ncqe;
	return IBC_OK;
}

/* ibc_ib_ctx_cq_release() - a QP is gone: its @ncqe CQEs are no longer needed */
void ibc_ib_ctx_cq_release(struct ibc_ib_ctx *ctx, int ncqe)
{
	ctx->cq_needed -= ncqe;
	if (ctx->cq_needed < 0)
		ctx->cq_needed = 0;
}
