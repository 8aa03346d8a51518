/* SPDX-License-Identifier: MIT */
/*
 * ib_conn.c - one connection to a peer: its QPs, FIFO and bounce buffers,
 * the connection info exchanged out of band (wire format), the RTR/RTS
 * set-up (MTU and GID negotiation), its failure, and the bounded drain at
 * teardown. The data path is ib_rndv.c (receiver-driven rendezvous),
 * ib_eager.c (eager messages into the receiver's slots) and ib_ll.c (LL).
 * Relies on ib.h, ib_qp.c, ib_mr.c, ib_gid.c and the context (ib_cq.c).
 *
 * Sequence numbers: the k-th isend and the k-th irecv of a connection
 * direction match; both use credit slot k % D (D = negotiated depth). The
 * receiver issues the clear-to-send of receive k only when slot k % D is
 * free (receive k - D completed), so at most D messages are in flight per
 * direction and no slot is overwritten while the sender may still read it.
 * Eager messages (ib.h) use slot k % D too, but the sender writes message k
 * into the receiver's slot without a clear-to-send once the receiver's
 * consumed count (credits) says that message k - D is finished.
 * LL messages (ib.h) take their sequence numbers from the same counters but
 * no credit slot: the sender writes the k-th message's lines into the
 * peer's LL ring at once, the receiver's k-th receive finds them by the
 * message number in the first line.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/util.h"
#include "base/wire.h"
#include "transport/ib/ib.h"
#include "transport/ib/ib_conn_internal.h"

/* ---------------------------------------------------------------------- */
/* small helpers                                                          */
/* ---------------------------------------------------------------------- */

struct ibc_ib_conn *ibc_ib_conn_next(const struct ibc_ib_conn *conn)
{
	return conn->next;
}

int ibc_ib_conn_peer(const struct ibc_ib_conn *conn)
{
	return conn->peer;
}

struct ibc_ib_ctx *ibc_ib_conn_ctx(const struct ibc_ib_conn *conn)
{
	return conn->ctx;
}

uint32_t ibc_ib_conn_qpn(const struct ibc_ib_conn *conn, int idx)
{
	return idx < conn->nqps && conn->qps[idx].qp ? conn->qps[idx].qp->qp_num : 0;
}

enum ibv_mtu ibc_ib_conn_mtu(const struct ibc_ib_conn *conn)
{
	return conn->mtu;
}

int ibc_ib_conn_gid_index(const struct ibc_ib_conn *conn)
{
	return conn->sgid_index;
}

int ibc_ib_conn_nqps(const struct ibc_ib_conn *conn)
{
	return conn->nqps_used;
}

size_t ibc_ib_conn_ll_max(const struct ibc_ib_conn *conn)
{
	return conn->ll_max;
}

size_t ibc_ib_conn_eager_max(const struct ibc_ib_conn *conn)
{
	return conn->eager_max;
}

/* lines an LL message of @nbytes takes */
uint32_t ibc_ib_ll_nlines(size_t nbytes)
{
	size_t rest = nbytes > IB_LL_FIRST_DATA ? nbytes - IB_LL_FIRST_DATA : 0;

	return 1 + (uint32_t)IBC_DIV_UP(rest, (size_t)IB_LL_LINE_DATA);
}

struct ibc_ib_op *ibc_ib_op_alloc(struct ibc_ib_conn *conn)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	struct ibc_ib_op *op = ctx->free_ops;

	if (op)
		ctx->free_ops = op->next;
	else
		op = ibc_malloc(sizeof(*op), "ib operation");
	if (!op)
		return NULL;
	memset(op, 0, sizeof(*op));
	op->conn = conn;
	op->live_next = conn->live;
	if (conn->live)
		conn->live->live_prev = op;
	conn->live = op;
	conn->nlive++;
	return op;
}

void ibc_ib_op_free(struct ibc_ib_op *op)
{
	struct ibc_ib_conn *conn = op->conn;
	struct ibc_ib_ctx *ctx = conn->ctx;

	if (op->mr) {
		ibc_ib_mr_put(&ctx->mrc, op->mr);
		op->mr = NULL;
	}
	if (op->in_rord) {
		if (op->rord_prev)
			op->rord_prev->rord_next = op->rord_next;
		else
			conn->rord_head = op->rord_next;
		if (op->rord_next)
			op->rord_next->rord_prev = op->rord_prev;
		else
			conn->rord_tail = op->rord_prev;
		op->in_rord = 0;
	}
	if (op->live_prev)
		op->live_prev->live_next = op->live_next;
	else
		conn->live = op->live_next;
	if (op->live_next)
		op->live_next->live_prev = op->live_prev;
	conn->nlive--;
	op->next = ctx->free_ops;
	ctx->free_ops = op;
}

void ibc_ib_op_complete(struct ibc_ib_op *op, ibc_status_t st)
{
	if (op->req) {
		ibc_treq_complete(op->req, st);
		op->req = NULL;
	}
}

/* ibc_ib_op_pool_fini() - free the context's pool of unused operations */
void ibc_ib_op_pool_fini(struct ibc_ib_ctx *ctx)
{
	while (ctx->free_ops) {
		struct ibc_ib_op *op = ctx->free_ops;

		ctx->free_ops = op->next;
		ibc_free(op);
	}
}

/* ---------------------------------------------------------------------- */
/* failure                                                                */
/* ---------------------------------------------------------------------- */

/**
 * ibc_ib_conn_set_failed() - Mark a connection failed without reporting:
 * move its QPs to ERROR (no remote write lands after this), complete every
 * request on it with @st, free the operations no WR refers to (the others
 * are freed when their flushed completions arrive).
 */
void ibc_ib_conn_set_failed(struct ibc_ib_conn *conn, ibc_status_t st)
{
	struct ibc_ib_op *op;
	int i;

	if (conn->failed != IBC_OK)
		return;
	conn->failed = st;
	for (i = 0; i < conn->nqps; i++)
		if (conn->qps[i].qp)
			ibc_ib_qp_to_err(&conn->qps[i]);
	op = conn->live;
	while (op) {
		struct ibc_ib_op *next = op->live_next;

		ibc_ib_op_complete(op, st);
		if (!(op->is_send && op->parts_left > 0))
			ibc_ib_op_free(op);
		op = next;
	}
	conn->sq_head = conn->sq_tail = NULL;
	conn->rq_head = conn->rq_tail = NULL;
	conn->ll_sq_head = conn->ll_sq_tail = NULL;
	conn->ll_rq_head = conn->ll_rq_tail = NULL;
	memset(conn->rslot, 0, sizeof(conn->rslot));
	memset(conn->cts_ready, 0, sizeof(conn->cts_ready));
	memset(conn->eager_in, 0, sizeof(conn->eager_in));
	memset(conn->enack_due, 0, sizeof(conn->enack_due));
	conn->nenack_due = 0;
}

/**
 * ibc_ib_conn_fail() - A fatal error on this connection: report it once
 * through the context's fail callback (which names the peer rank and host)
 * with @fmt as the cause, then fail every request on it.
 */
void ibc_ib_conn_fail(struct ibc_ib_conn *conn, ibc_status_t st, const char *fmt, ...)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	char why[768];
	va_list ap;

	if (conn->failed != IBC_OK || conn->dead)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (ctx->report_st == IBC_OK)
		ctx->report_st = st;
	ibc_ib_conn_set_failed(conn, st);
	ctx->cb.fail(ctx->cb.arg, st, conn->peer, why);
}

/* ibc_ib_conn_qp_event() - an async QP error event (ib_cq.c) */
void ibc_ib_conn_qp_event(struct ibc_ib_qp *qp, enum ibv_event_type ev)
{
	struct ibc_ib_conn *conn = qp->conn;

	ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
			 "async event %s on qp 0x%x (%s:%d) to peer qp on %s:%d: the QP entered the error state",
			 ibv_event_type_str(ev), qp->qp->qp_num, conn->ctx->dev_name, conn->ctx->port,
			 conn->peer_dev, conn->peer_port);
}

/* ---------------------------------------------------------------------- */
/* creation, info exchange, establishment                                 */
/* ---------------------------------------------------------------------- */

static ibc_status_t conn_region(struct ibc_ib_conn *conn, size_t nbytes, void **p_p,
				struct ibc_ib_mr **mr_p, const char *what)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	size_t alloc = IBC_ALIGN_UP(nbytes, IB_PAGE);
	ibc_status_t st;
	void *p;

	p = ibc_aligned_alloc(IB_PAGE, alloc, what);
	if (!p)
		return IBC_ERR_NO_MEMORY;
	memset(p, 0, alloc);
	st = ibc_ib_mr_get(&ctx->mrc, p, alloc, IBC_IB_MR_PERSIST, mr_p);
	if (st != IBC_OK) {
		IBC_LOG_WARN(IB, "cannot register the %s of the connection to peer rank %d: %s", what,
			     conn->peer, ctx->mrc.errbuf);
		ibc_free(p);
		return st;
	}
	*p_p = p;
	return IBC_OK;
}

static void conn_region_free(struct ibc_ib_conn *conn, void *p, size_t nbytes,
			     struct ibc_ib_mr *mr)
{
	if (!p)
		return;
	if (mr)
		ibc_ib_mr_put(&conn->ctx->mrc, mr);
	ibc_ib_mr_invalidate(&conn->ctx->mrc, p, IBC_ALIGN_UP(nbytes, IB_PAGE));
	ibc_free(p);
}

/* destroy the QPs, release the buffers and registrations; the struct and its ops stay */
void ibc_ib_conn_release(struct ibc_ib_conn *conn)
{
	size_t fifo_bytes = (size_t)conn->depth * sizeof(struct ib_fifo_slot);
	struct ibc_ib_op *op;
	int i;

	for (i = 0; i < conn->nqps; i++)
		ibc_ib_qp_destroy(&conn->qps[i]);
	for (op = conn->live; op; op = op->live_next) {
		op->req = NULL;
		if (op->mr) {
			ibc_ib_mr_put(&conn->ctx->mrc, op->mr);
			op->mr = NULL;
		}
	}
	conn_region_free(conn, conn->fifo, fifo_bytes, conn->fifo_mr);
	conn_region_free(conn, conn->out, fifo_bytes, conn->out_mr);
	conn_region_free(conn, conn->sbounce, conn->sstride * (size_t)conn->depth, conn->sbounce_mr);
	conn_region_free(conn, conn->rbounce, conn->rstride * (size_t)conn->depth, conn->rbounce_mr);
	conn_region_free(conn, conn->ll_in, ((size_t)conn->ll_lines + 1) * sizeof(struct ib_ll_line),
			 conn->ll_in_mr);
	conn_region_free(conn, conn->ll_stage,
			 ((size_t)conn->ll_rlines + 1) * sizeof(struct ib_ll_line), conn->ll_stage_mr);
	conn->fifo = conn->out = NULL;
	conn->sbounce = conn->rbounce = NULL;
	conn->ll_in = conn->ll_stage = NULL;
}

/* free the operations and the struct (no completion may refer to them any more) */
void ibc_ib_conn_free(struct ibc_ib_conn *conn)
{
	while (conn->live)
		ibc_ib_op_free(conn->live);
	ibc_free(conn);
}

/**
 * ibc_ib_conn_create() - Create the local half of a connection to @peer:
 * IBC_IB_QPS_PER_CONN RC QPs (in INIT), the FIFO the peer writes
 * clear-to-send, NACK and eager refusal entries into, the send and receive
 * slots (bounce payloads, and eager messages behind their header), and (with
 * IBC_LL_MAX_BYTES > 0) the LL receive ring of IB_LL_RING_MSGS messages of
 * that size plus the word the peer writes LL credits into.
 * @ctx:       [in]  the context (port) to use.
 * @peer:      [in]  peer rank (for messages and the fail callback).
 * @peer_host: [in]  peer host name for messages, or NULL.
 * @conn_p:    [out] the connection, written on success.
 *
 * Next: send ibc_ib_conn_local_info() to the peer, then call
 * ibc_ib_conn_establish() with the peer's info.
 * Blocking: verbs set-up calls. Threading: the context's thread.
 * Return: IBC_OK; IBC_ERR_VERBS (QP creation or registration failed: the
 *         text names RLIMIT_MEMLOCK when that is the cause); IBC_ERR_NO_MEMORY;
 *         the context's error when its device failed.
 */
ibc_status_t ibc_ib_conn_create(struct ibc_ib_ctx *ctx, int peer, const char *peer_host,
				struct ibc_ib_conn **conn_p)
{
	struct ibc_ib_conn *conn;
	size_t fifo_bytes;
	ibc_status_t st;
	int sq_depth;
	int rq_depth;
	int i;

	if (ctx->fatal_st != IBC_OK)
		return ctx->fatal_st;
	conn = ibc_calloc(1, sizeof(*conn), "ib connection");
	if (!conn)
		return IBC_ERR_NO_MEMORY;
	conn->ctx = ctx;
	conn->id = ++ctx->next_conn_id;
	conn->peer = peer;
	snprintf(conn->peer_host, sizeof(conn->peer_host), "%s", peer_host ? peer_host : "?");
	snprintf(conn->peer_dev, sizeof(conn->peer_dev), "?");
	conn->depth = IBC_MIN(IBC_MAX(ctx->prm.depth, 1), IBC_IB_MAX_DEPTH);
	conn->nqps = IBC_MIN(IBC_MAX(ctx->prm.nqps, 1), IBC_IB_MAX_QPS);
	conn->bb = ctx->prm.bounce_bytes;
	conn->eager_local = ctx->prm.eager_bytes;
	conn->sgid_index = -1;
	/* payloads start 64-byte aligned behind the eager header */
	conn->sstride = IB_EAGER_HDR + IBC_ALIGN_UP(conn->bb, (size_t)64);
	conn->rstride = IB_EAGER_HDR + IBC_ALIGN_UP(IBC_MAX(conn->bb, conn->eager_local), (size_t)64);
	fifo_bytes = (size_t)conn->depth * sizeof(struct ib_fifo_slot);
	IBC_CHECK_GOTO(conn_region(conn, fifo_bytes, (void **)&conn->fifo, &conn->fifo_mr,
				   "clear-to-send FIFO"), st, err);
	IBC_CHECK_GOTO(conn_region(conn, fifo_bytes, (void **)&conn->out, &conn->out_mr,
				   "clear-to-send staging"), st, err);
	IBC_CHECK_GOTO(conn_region(conn, conn->sstride * (size_t)conn->depth, (void **)&conn->sbounce,
				   &conn->sbounce_mr, "send bounce buffer"), st, err);
	IBC_CHECK_GOTO(conn_region(conn, conn->rstride * (size_t)conn->depth, (void **)&conn->rbounce,
				   &conn->rbounce_mr, "receive slots"), st, err);
	conn->ll_max_local = ctx->prm.ll_max_bytes;
	if (conn->ll_max_local) {
		conn->ll_lines = IB_LL_RING_MSGS * ibc_ib_ll_nlines(conn->ll_max_local);
		IBC_CHECK_GOTO(conn_region(conn, ((size_t)conn->ll_lines + 1) * sizeof(struct ib_ll_line),
					   (void **)&conn->ll_in, &conn->ll_in_mr, "LL receive ring"),
			       st, err);
	}
	/*
	 * per QP: up to D CTS, D NACK, D eager refusals and D data or eager
	 * writes in each direction, plus credit returns and nudges
	 */
	sq_depth = 4 * conn->depth + 16;
	rq_depth = 5 * conn->depth + 2 * IB_RQ_REPOST + 8;
	for (i = 0; i < conn->nqps; i++) {
		IBC_CHECK_GOTO(ibc_ib_qp_create(ctx, conn, i, sq_depth, rq_depth, &conn->qps[i]), st,
			       err);
		IBC_CHECK_GOTO(ibc_ib_qp_to_init(ctx, &conn->qps[i]), st, err);
	}
	conn->next = ctx->conns;
	ctx->conns = conn;
	*conn_p = conn;
	return IBC_OK;

err:
	ibc_ib_conn_release(conn);
	ibc_ib_conn_free(conn);
	return st;
}

/**
 * ibc_ib_conn_local_info() - What the peer needs to connect to us.
 * @conn: [in]  a connection from ibc_ib_conn_create().
 * @info: [out] QP numbers and PSNs, LID, GID candidates, active MTU, FIFO
 *              address and rkey, depth; pack it with ibc_ib_conn_info_pack().
 */
void ibc_ib_conn_local_info(const struct ibc_ib_conn *conn, struct ibc_ib_conn_info *info)
{
	const struct ibc_ib_ctx *ctx = conn->ctx;
	int i;

	memset(info, 0, sizeof(*info));
	info->version = IBC_IB_CONN_INFO_VERSION;
	info->nqps = (uint32_t)conn->nqps;
	info->depth = (uint32_t)conn->depth;
	info->link_layer = (uint32_t)ctx->link_layer;
	info->active_mtu = (uint32_t)ctx->port_attr.active_mtu;
	info->lid = ctx->port_attr.lid;
	info->port = (uint32_t)ctx->port;
	info->fifo_addr = (uint64_t)(uintptr_t)conn->fifo;
	info->fifo_rkey = conn->fifo_mr->rkey;
	info->conn_id = conn->id;
	snprintf(info->dev_name, sizeof(info->dev_name), "%s", ctx->dev_name);
	for (i = 0; i < conn->nqps; i++) {
		info->qpn[i] = conn->qps[i].qp->qp_num;
		info->psn[i] = conn->qps[i].psn;
	}
	info->gids = ctx->gids;
	if (conn->ll_in) {
		info->ll_addr = (uint64_t)(uintptr_t)conn->ll_in;
		info->ll_rkey = conn->ll_in_mr->rkey;
		info->ll_lines = conn->ll_lines;
		info->ll_max = (uint32_t)conn->ll_max_local;
	}
	info->eager_addr = (uint64_t)(uintptr_t)conn->rbounce;
	info->eager_rkey = conn->rbounce_mr->rkey;
	info->eager_stride = (uint32_t)conn->rstride;
	info->eager_max = (uint32_t)conn->eager_local;
}

/**
 * ibc_ib_conn_info_pack() - Serialise connection info for the out-of-band
 * exchange (little-endian, IBC_IB_CONN_INFO_WIRE_BYTES bytes).
 */
void ibc_ib_conn_info_pack(const struct ibc_ib_conn_info *info,
			   uint8_t out[IBC_IB_CONN_INFO_WIRE_BYTES])
{
	uint8_t *p = out;
	int i;

	memset(out, 0, IBC_IB_CONN_INFO_WIRE_BYTES);
	ibc_wire_put32(p, info->version);
	ibc_wire_put32(p + 4, info->nqps);
	ibc_wire_put32(p + 8, info->depth);
	ibc_wire_put32(p + 12, info->link_layer);
	ibc_wire_put32(p + 16, info->active_mtu);
	ibc_wire_put32(p + 20, info->lid);
	ibc_wire_put32(p + 24, info->port);
	ibc_wire_put32(p + 28, info->fifo_rkey);
	ibc_wire_put64(p + 32, info->fifo_addr);
	ibc_wire_put64(p + 40, info->conn_id);
	p += 48;
	memcpy(p, info->dev_name, IBC_IB_NAME_LEN);
	p[IBC_IB_NAME_LEN - 1] = '\0';
	p += IBC_IB_NAME_LEN;
	for (i = 0; i < IBC_IB_MAX_QPS; i++) {
		ibc_wire_put32(p, info->qpn[i]);
		ibc_wire_put32(p + 4, info->psn[i]);
		p += 8;
	}
	for (i = 0; i < IBC_IB_GID_CLASS_COUNT; i++) {
		ibc_wire_put32(p, (uint32_t)info->gids.index[i]);
		memcpy(p + 4, info->gids.gid[i], 16);
		p += 20;
	}
	ibc_wire_put64(p, info->ll_addr);
	ibc_wire_put32(p + 8, info->ll_rkey);
	ibc_wire_put32(p + 12, info->ll_lines);
	ibc_wire_put32(p + 16, info->ll_max);
	ibc_wire_put32(p + 20, info->ll_pad);
	p += 24;
	ibc_wire_put64(p, info->eager_addr);
	ibc_wire_put32(p + 8, info->eager_rkey);
	ibc_wire_put32(p + 12, info->eager_stride);
	ibc_wire_put32(p + 16, info->eager_max);
	ibc_wire_put32(p + 20, info->eager_pad);
}

/**
 * ibc_ib_conn_info_unpack() - Parse and validate connection info.
 * Return: IBC_OK; IBC_ERR_INVALID_USAGE for another wire version or values
 *         out of range (a peer running an incompatible ibcoll).
 */
ibc_status_t ibc_ib_conn_info_unpack(const uint8_t in[IBC_IB_CONN_INFO_WIRE_BYTES],
				     struct ibc_ib_conn_info *info)
{
	const uint8_t *p = in;
	int i;

	memset(info, 0, sizeof(*info));
	info->version = ibc_wire_get32(p);
	info->nqps = ibc_wire_get32(p + 4);
	info->depth = ibc_wire_get32(p + 8);
	info->link_layer = ibc_wire_get32(p + 12);
	info->active_mtu = ibc_wire_get32(p + 16);
	info->lid = ibc_wire_get32(p + 20);
	info->port = ibc_wire_get32(p + 24);
	info->fifo_rkey = ibc_wire_get32(p + 28);
	info->fifo_addr = ibc_wire_get64(p + 32);
	info->conn_id = ibc_wire_get64(p + 40);
	p += 48;
	memcpy(info->dev_name, p, IBC_IB_NAME_LEN);
	info->dev_name[IBC_IB_NAME_LEN - 1] = '\0';
	p += IBC_IB_NAME_LEN;
	for (i = 0; i < IBC_IB_MAX_QPS; i++) {
		info->qpn[i] = ibc_wire_get32(p);
		info->psn[i] = ibc_wire_get32(p + 4);
		p += 8;
	}
	for (i = 0; i < IBC_IB_GID_CLASS_COUNT; i++) {
		int32_t idx = (int32_t)ibc_wire_get32(p);

		info->gids.index[i] = idx < 0 ? -1 : idx;
		memcpy(info->gids.gid[i], p + 4, 16);
		p += 20;
	}
	info->ll_addr = ibc_wire_get64(p);
	info->ll_rkey = ibc_wire_get32(p + 8);
	info->ll_lines = ibc_wire_get32(p + 12);
	info->ll_max = ibc_wire_get32(p + 16);
	info->ll_pad = ibc_wire_get32(p + 20);
	p += 24;
	info->eager_addr = ibc_wire_get64(p);
	info->eager_rkey = ibc_wire_get32(p + 8);
	info->eager_stride = ibc_wire_get32(p + 12);
	info->eager_max = ibc_wire_get32(p + 16);
	info->eager_pad = ibc_wire_get32(p + 20);
	if (info->version != IBC_IB_CONN_INFO_VERSION) {
		IBC_LOG_WARN(IB, "peer sent ib connection info version %u, this ibcoll speaks %u: mixed ibcoll versions",
			     info->version, IBC_IB_CONN_INFO_VERSION);
		return IBC_ERR_INVALID_USAGE;
	}
	if (info->nqps < 1 || info->nqps > IBC_IB_MAX_QPS || info->depth < 1 ||
	    info->depth > IBC_IB_MAX_DEPTH || info->active_mtu < IBV_MTU_256 ||
	    info->active_mtu > IBV_MTU_4096) {
		IBC_LOG_WARN(IB, "peer sent malformed ib connection info (%u qps, depth %u, mtu enum %u)",
			     info->nqps, info->depth, info->active_mtu);
		return IBC_ERR_INVALID_USAGE;
	}
	if (info->ll_lines && (info->ll_max == 0 || info->ll_lines < ibc_ib_ll_nlines(info->ll_max) ||
			       info->ll_lines > (1u << 24))) {
		IBC_LOG_WARN(IB, "peer sent malformed ib connection info (LL ring of %u lines for %u-byte messages)",
			     info->ll_lines, info->ll_max);
		return IBC_ERR_INVALID_USAGE;
	}
	if (info->eager_max && (info->eager_max > (1u << 20) ||
				info->eager_stride < IB_EAGER_HDR + info->eager_max)) {
		IBC_LOG_WARN(IB, "peer sent malformed ib connection info (eager slots of %u bytes for %u-byte messages)",
			     info->eager_stride, info->eager_max);
		return IBC_ERR_INVALID_USAGE;
	}
	return IBC_OK;
}

/**
 * ibc_ib_conn_establish() - Connect our QPs to the peer's: negotiate QP
 * count and depth (min of both), path MTU (min of both active MTUs) and,
 * on RoCE, the GID class (ibc_ib_gid_agree(), or IBC_IB_GID_INDEX), then
 * INIT -> RTR, post receives, RTR -> RTS. Logs the choices at INFO.
 * @conn:   [in,out] a connection from ibc_ib_conn_create().
 * @remote: [in] the peer's info.
 *
 * The peer may send as soon as its own establish returned, so it must not
 * do so before ours did: the bootstrap glue exchanges a READY message
 * after this call (ib_ops.c).
 * Blocking: verbs calls. Threading: the context's thread.
 * Return: IBC_OK; IBC_ERR_UNSUPPORTED (link layers differ, no GID on one
 *         end); IBC_ERR_VERBS (QP transition refused, logged).
 */
ibc_status_t ibc_ib_conn_establish(struct ibc_ib_conn *conn, const struct ibc_ib_conn_info *remote)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	struct ibc_ib_qp_dest dest;
	char why[384];
	char gs[64];
	int lcls = -1;
	int rcls = -1;
	int i;

	if (conn->established)
		return IBC_ERR_INVALID_USAGE;
	snprintf(conn->peer_dev, sizeof(conn->peer_dev), "%s", remote->dev_name);
	conn->peer_port = (int)remote->port;
	if ((int)remote->link_layer != ctx->link_layer) {
		IBC_LOG_WARN(IB, "peer rank %d uses %s:%d with a %s link layer, this rank %s:%d with %s: they cannot connect",
			     conn->peer, remote->dev_name, remote->port,
			     remote->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
			     ctx->dev_name, ctx->port,
			     ctx->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand");
		return IBC_ERR_UNSUPPORTED;
	}
	conn->nqps_used = IBC_MIN(conn->nqps, (int)remote->nqps);
	conn->D = IBC_MIN(conn->depth, (int)remote->depth);
	conn->mtu = ibc_ib_mtu_negotiate(ctx->port_attr.active_mtu, (enum ibv_mtu)remote->active_mtu);
	conn->rfifo_addr = remote->fifo_addr;
	conn->rfifo_rkey = remote->fifo_rkey;
	if (conn->ll_in && remote->ll_lines) {
		/* the smaller limit: it fits both rings, and both ends agree on it */
		conn->ll_rlines = remote->ll_lines;
		conn->ll_raddr = remote->ll_addr;
		conn->ll_rrkey = remote->ll_rkey;
		IBC_CHECK(conn_region(conn, ((size_t)conn->ll_rlines + 1) * sizeof(struct ib_ll_line),
				      (void **)&conn->ll_stage, &conn->ll_stage_mr, "LL send staging"));
		conn->ll_max = IBC_MIN(conn->ll_max_local, (size_t)remote->ll_max);
	}
	/* the smaller limit: both ends' slots hold it, and both agree on the path */
	conn->eager_max = IBC_MIN(conn->eager_local, (size_t)remote->eager_max);
	conn->eager_raddr = remote->eager_addr;
	conn->eager_rkey = remote->eager_rkey;
	conn->eager_rstride = remote->eager_stride;
	memset(&dest, 0, sizeof(dest));
	dest.mtu = conn->mtu;
	dest.lid = (uint16_t)remote->lid;
	if (ctx->link_layer == IBV_LINK_LAYER_ETHERNET) {
		int agreed = ibc_ib_gid_agree(&ctx->gids, &remote->gids, &lcls, &rcls, why, sizeof(why));

		if (lcls < 0 || rcls < 0) {
			IBC_LOG_WARN(IB, "no GID to connect to peer rank %d (%s:%d): %s", conn->peer,
				     remote->dev_name, remote->port, why);
			return IBC_ERR_UNSUPPORTED;
		}
		if (agreed != 0)
			IBC_LOG_WARN(IB, "peer rank %d (%s:%d): %s; the connection may not work (set IBC_IB_GID_INDEX on both ends)",
				     conn->peer, remote->dev_name, remote->port, why);
		dest.is_global = 1;
		dest.sgid_index = ctx->gids.index[lcls];
		memcpy(dest.dgid, remote->gids.gid[rcls], 16);
		conn->sgid_index = dest.sgid_index;
		ibc_ib_gid_str(dest.dgid, gs, sizeof(gs));
		IBC_LOG_INFO(IB, "peer rank %d (%s:%d) from %s:%d: gid idx %d (%s), peer gid %s, because %s%s",
			     conn->peer, remote->dev_name, remote->port, ctx->dev_name, ctx->port,
			     dest.sgid_index, ibc_ib_gid_class_name(lcls), gs, why,
			     ctx->prm.gid_index >= 0 ? " (IBC_IB_GID_INDEX)" : "");
	}
	IBC_LOG_INFO(IB, "peer rank %d (%s:%d) from %s:%d: path mtu %s (local %s, peer %s), %d qps, %d credits, LL up to %zu bytes, eager up to %zu bytes",
		     conn->peer, remote->dev_name, remote->port, ctx->dev_name, ctx->port,
		     ibc_ib_mtu_str(conn->mtu), ibc_ib_mtu_str(ctx->port_attr.active_mtu),
		     ibc_ib_mtu_str((enum ibv_mtu)remote->active_mtu), conn->nqps_used, conn->D,
		     conn->ll_max, conn->eager_max);
	for (i = conn->nqps_used; i < conn->nqps; i++)
		ibc_ib_qp_destroy(&conn->qps[i]);
	conn->nqps = conn->nqps_used;
	for (i = 0; i < conn->nqps; i++) {
		struct ibc_ib_qp *qp = &conn->qps[i];
		int ret;

		dest.qpn = remote->qpn[i];
		dest.psn = remote->psn[i];
		IBC_CHECK(ibc_ib_qp_to_rtr(ctx, qp, &dest));
		ret = ibc_ib_qp_post_recvs(qp, qp->rq_depth);
		if (ret) {
			IBC_LOG_WARN(IB, "qp 0x%x: ibv_post_recv of %d receives failed: %s",
				     qp->qp->qp_num, qp->rq_depth, strerror(ret));
			return IBC_ERR_VERBS;
		}
		IBC_CHECK(ibc_ib_qp_to_rts(ctx, qp));
	}
	conn->established = 1;
	conn->last_activity_ns = ibc_time_coarse_ns();
	return IBC_OK;
}
