/* SPDX-License-Identifier: MIT */
/*
 * ib_conn.c - one connection to a peer: its QPs, FIFO and bounce buffers,
 * the connection info exchanged out of band (wire format), the
 * RTR/RTS set-up (MTU and GID negotiation), and the receiver-driven data
 * path described in ib.h (clear-to-send FIFO, RDMA WRITE WITH IMM,
 * striping, inline and bounce sends, NACK on descriptor mismatch), plus
 * the handling of every work completion and the bounded drain at teardown.
 * Relies on ib.h, ib_qp.c, ib_mr.c, ib_gid.c and the context (ib_cq.c).
 *
 * Sequence numbers: the k-th isend and the k-th irecv of a connection
 * direction match; both use credit slot k % D (D = negotiated depth). The
 * receiver issues the clear-to-send of receive k only when slot k % D is
 * free (receive k - D completed), so at most D messages are in flight per
 * direction and no slot is overwritten while the sender may still read it.
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
#include "ib.h"

#define IB_PAGE           4096
#define IB_DRAIN_MS       2000  /* bound on the teardown drain of one connection */
#define IB_RQ_REPOST      8     /* receives reposted in batches of this many */
#define IB_LL_LINE_DATA   56    /* payload bytes of an LL line */
#define IB_LL_FIRST_DATA  16    /* payload bytes in a message's first line */
#define IB_LL_RING_MSGS   8     /* LL ring capacity, in messages of the largest size */
#define IB_LL_CREDIT_DIV  4     /* credits go back once a quarter of the ring is consumed */

/*
 * struct ib_ll_line - one line of an LL ring, as shm's: the first line of a
 * message holds its descriptor (32 bytes), size (4), sequence number (4)
 * and 16 payload bytes, later lines 56 payload bytes; the flag, the line's
 * absolute number + 1 (little-endian), is the last 8 bytes, so a line of
 * an earlier lap never looks new and nothing is cleared.
 */
struct ib_ll_line {
	uint8_t data[IB_LL_LINE_DATA];
	uint64_t flag;
};

/* struct ib_cts - a clear-to-send entry (little-endian), written by the peer's receiver */
struct ib_cts {
	uint64_t addr;          /* where to write the payload */
	uint64_t nbytes;        /* what the receiver posted */
	uint32_t rkey;
	uint32_t seq;           /* receive sequence number */
	uint8_t desc[IBC_MSG_DESC_WIRE_BYTES]; /* the receiver's descriptor */
	uint8_t pad[8];
};

/* struct ib_nack - the sender's refusal of a receive (little-endian) */
struct ib_nack {
	uint64_t nbytes;        /* what the sender posted */
	uint32_t seq;
	uint32_t pad0;
	uint8_t desc[IBC_MSG_DESC_WIRE_BYTES]; /* the sender's descriptor */
	uint8_t pad[16];
};

/* struct ib_fifo_slot - one credit slot of the FIFO the peer writes into */
struct ib_fifo_slot {
	struct ib_cts cts;      /* for my send #seq */
	struct ib_nack nack;    /* about my receive #seq */
};

_Static_assert(sizeof(struct ib_cts) == 64, "CTS entry is 64 bytes on the wire");
_Static_assert(sizeof(struct ib_nack) == 64, "NACK entry is 64 bytes on the wire");
_Static_assert(sizeof(struct ib_fifo_slot) == 128, "FIFO slot is 128 bytes");
_Static_assert(sizeof(struct ib_ll_line) == 64, "LL line is 64 bytes");

/* struct ibc_ib_op - one posted isend or irecv */
struct ibc_ib_op {
	struct ibc_ib_op *next;         /* send or receive queue */
	struct ibc_ib_op *live_next;    /* every op of the connection */
	struct ibc_ib_op *live_prev;
	struct ibc_ib_conn *conn;
	struct ibc_treq *req;           /* NULL once completed or abandoned */
	void *buf;
	size_t nbytes;
	struct ibc_msg_desc desc;
	uint32_t seq;
	int is_send;
	int parts_left;                 /* send: signaled WRs pending; recv: imm parts pending */
	int bounce;                     /* recv: payload lands in the bounce slot */
	struct ibc_ib_mr *mr;           /* zero-copy registration of buf */
	int ll;                         /* by the LL path */
	int started;                    /* LL recv: first line consumed */
	size_t off;                     /* LL recv: bytes copied out */
};

struct ibc_ib_conn {
	struct ibc_ib_ctx *ctx;
	struct ibc_ib_conn *next;       /* context's list */
	uint32_t id;
	int peer;
	char peer_host[64];
	char peer_dev[IBC_IB_NAME_LEN];
	int peer_port;
	int nqps;                       /* created */
	int nqps_used;                  /* negotiated (min of both ends) */
	struct ibc_ib_qp qps[IBC_IB_MAX_QPS];
	int depth;                      /* local credit slots (allocated) */
	int D;                          /* negotiated credit slots */
	int established;
	int dead;                       /* being destroyed: completions only drain */
	ibc_status_t failed;
	enum ibv_mtu mtu;
	int sgid_index;
	size_t bb;                      /* bounce slot bytes */

	struct ib_fifo_slot *fifo;      /* [depth], the peer writes here */
	struct ibc_ib_mr *fifo_mr;
	struct ib_fifo_slot *out;       /* [depth], sources of my CTS and NACK writes */
	struct ibc_ib_mr *out_mr;
	uint8_t *sbounce;               /* [depth][bb] send bounce slots */
	struct ibc_ib_mr *sbounce_mr;
	uint8_t *rbounce;               /* [depth][bb] receive bounce slots */
	struct ibc_ib_mr *rbounce_mr;
	uint64_t rfifo_addr;            /* the peer's FIFO */
	uint32_t rfifo_rkey;

	struct ibc_ib_op *sq_head;      /* sends not started, in sequence order */
	struct ibc_ib_op *sq_tail;
	uint32_t send_seq;
	uint8_t cts_ready[IBC_IB_MAX_DEPTH];
	struct ibc_ib_op *rq_head;      /* receives without clear-to-send */
	struct ibc_ib_op *rq_tail;
	uint32_t recv_seq;
	struct ibc_ib_op *rslot[IBC_IB_MAX_DEPTH];
	int rq_consumed[IBC_IB_MAX_QPS];
	struct ibc_ib_op *live;
	int nlive;                      /* ops posted and not freed */
	uint64_t last_activity_ns;      /* last completion of this connection */
	int probe_outstanding;          /* a keep-alive probe is in flight */

	/* LL path (ib.h) */
	size_t ll_max_local;            /* IBC_LL_MAX_BYTES here; 0: no ring */
	size_t ll_max;                  /* negotiated limit, bytes; 0: no LL path */
	uint32_t ll_lines;              /* data lines of ll_in */
	struct ib_ll_line *ll_in;       /* [ll_lines + 1]: the peer's lines, then its credit word */
	struct ibc_ib_mr *ll_in_mr;
	uint32_t ll_rlines;             /* data lines of the peer's ring */
	uint64_t ll_raddr;
	uint32_t ll_rrkey;
	struct ib_ll_line *ll_stage;    /* [ll_rlines + 1]: mirror of the peer's ring, my credit word */
	struct ibc_ib_mr *ll_stage_mr;
	uint64_t ll_head;               /* lines written to the peer's ring */
	uint64_t ll_tail_seen;          /* lines the peer reported consumed */
	uint64_t ll_rtail;              /* lines consumed from ll_in */
	uint64_t ll_credit_sent;        /* ll_rtail as last written back */
	struct ibc_ib_op *ll_sq_head;   /* LL sends waiting for ring or send-queue room */
	struct ibc_ib_op *ll_sq_tail;
	struct ibc_ib_op *ll_rq_head;   /* LL receives, in sequence order */
	struct ibc_ib_op *ll_rq_tail;
	uint32_t ll_sent_tag[IBC_IB_MAX_DEPTH]; /* seq + 1 of the LL send of slot seq % D */
};

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

/* lines an LL message of @nbytes takes */
static uint32_t ll_nlines(size_t nbytes)
{
	size_t rest = nbytes > IB_LL_FIRST_DATA ? nbytes - IB_LL_FIRST_DATA : 0;

	return 1 + (uint32_t)IBC_DIV_UP(rest, (size_t)IB_LL_LINE_DATA);
}

static struct ibc_ib_op *op_alloc(struct ibc_ib_conn *conn)
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

static void op_free(struct ibc_ib_op *op)
{
	struct ibc_ib_conn *conn = op->conn;
	struct ibc_ib_ctx *ctx = conn->ctx;

	if (op->mr) {
		ibc_ib_mr_put(&ctx->mrc, op->mr);
		op->mr = NULL;
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

static void op_complete(struct ibc_ib_op *op, ibc_status_t st)
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

static struct ibc_ib_qp *conn_qp_by_num(struct ibc_ib_conn *conn, uint32_t qpn)
{
	int i;

	for (i = 0; i < conn->nqps; i++)
		if (conn->qps[i].qp && conn->qps[i].qp->qp_num == qpn)
			return &conn->qps[i];
	return NULL;
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

		op_complete(op, st);
		if (!(op->is_send && op->parts_left > 0))
			op_free(op);
		op = next;
	}
	conn->sq_head = conn->sq_tail = NULL;
	conn->rq_head = conn->rq_tail = NULL;
	conn->ll_sq_head = conn->ll_sq_tail = NULL;
	conn->ll_rq_head = conn->ll_rq_tail = NULL;
	memset(conn->rslot, 0, sizeof(conn->rslot));
	memset(conn->cts_ready, 0, sizeof(conn->cts_ready));
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
static void conn_release_resources(struct ibc_ib_conn *conn)
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
	conn_region_free(conn, conn->sbounce, conn->bb * (size_t)conn->depth, conn->sbounce_mr);
	conn_region_free(conn, conn->rbounce, conn->bb * (size_t)conn->depth, conn->rbounce_mr);
	conn_region_free(conn, conn->ll_in, ((size_t)conn->ll_lines + 1) * sizeof(struct ib_ll_line),
			 conn->ll_in_mr);
	conn_region_free(conn, conn->ll_stage,
			 ((size_t)conn->ll_rlines + 1) * sizeof(struct ib_ll_line), conn->ll_stage_mr);
	conn->fifo = conn->out = NULL;
	conn->sbounce = conn->rbounce = NULL;
	conn->ll_in = conn->ll_stage = NULL;
}

/* free the operations and the struct (no completion may refer to them any more) */
static void conn_free(struct ibc_ib_conn *conn)
{
	while (conn->live)
		op_free(conn->live);
	ibc_free(conn);
}

/**
 * ibc_ib_conn_create() - Create the local half of a connection to @peer:
 * IBC_IB_QPS_PER_CONN RC QPs (in INIT), the FIFO the peer writes
 * clear-to-send and NACK entries into, the bounce slots, and (with
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
	conn->sgid_index = -1;
	fifo_bytes = (size_t)conn->depth * sizeof(struct ib_fifo_slot);
	IBC_CHECK_GOTO(conn_region(conn, fifo_bytes, (void **)&conn->fifo, &conn->fifo_mr,
				   "clear-to-send FIFO"), st, err);
	IBC_CHECK_GOTO(conn_region(conn, fifo_bytes, (void **)&conn->out, &conn->out_mr,
				   "clear-to-send staging"), st, err);
	if (conn->bb) {
		IBC_CHECK_GOTO(conn_region(conn, conn->bb * (size_t)conn->depth,
					   (void **)&conn->sbounce, &conn->sbounce_mr,
					   "send bounce buffer"), st, err);
		IBC_CHECK_GOTO(conn_region(conn, conn->bb * (size_t)conn->depth,
					   (void **)&conn->rbounce, &conn->rbounce_mr,
					   "receive bounce buffer"), st, err);
	}
	conn->ll_max_local = ctx->prm.ll_max_bytes;
	if (conn->ll_max_local) {
		conn->ll_lines = IB_LL_RING_MSGS * ll_nlines(conn->ll_max_local);
		IBC_CHECK_GOTO(conn_region(conn, ((size_t)conn->ll_lines + 1) * sizeof(struct ib_ll_line),
					   (void **)&conn->ll_in, &conn->ll_in_mr, "LL receive ring"),
			       st, err);
	}
	/* per QP: up to D CTS, D NACK and D data writes (plus parts) in each direction */
	sq_depth = 3 * conn->depth + 8;
	rq_depth = 3 * conn->depth + 2 * IB_RQ_REPOST;
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
	conn_release_resources(conn);
	conn_free(conn);
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
	if (info->ll_lines && (info->ll_max == 0 || info->ll_lines < ll_nlines(info->ll_max) ||
			       info->ll_lines > (1u << 24))) {
		IBC_LOG_WARN(IB, "peer sent malformed ib connection info (LL ring of %u lines for %u-byte messages)",
			     info->ll_lines, info->ll_max);
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
	IBC_LOG_INFO(IB, "peer rank %d (%s:%d) from %s:%d: path mtu %s (local %s, peer %s), %d qps, %d credits, LL up to %zu bytes",
		     conn->peer, remote->dev_name, remote->port, ctx->dev_name, ctx->port,
		     ibc_ib_mtu_str(conn->mtu), ibc_ib_mtu_str(ctx->port_attr.active_mtu),
		     ibc_ib_mtu_str((enum ibv_mtu)remote->active_mtu), conn->nqps_used, conn->D,
		     conn->ll_max);
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
	conn->last_activity_ns = ibc_time_ns();
	return IBC_OK;
}

/* ---------------------------------------------------------------------- */
/* data path: receive side                                                */
/* ---------------------------------------------------------------------- */

static void conn_try_issue_cts(struct ibc_ib_conn *conn)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	struct ibc_ib_op *op;

	while ((op = conn->rq_head) && conn->failed == IBC_OK) {
		unsigned slot = op->seq % (unsigned)conn->D;
		struct ibc_ib_qp *qp = &conn->qps[slot % (unsigned)conn->nqps];
		uint8_t *e = (uint8_t *)&conn->out[slot].cts;
		uint64_t addr = 0;
		uint32_t rkey = 0;
		int ret;

		if (conn->rslot[slot] || ibc_ib_qp_sq_room(qp) < 1)
			return;
		if (op->nbytes == 0) {
			op->bounce = 1;
		} else if (op->nbytes <= conn->bb) {
			op->bounce = 1;
			addr = (uint64_t)(uintptr_t)(conn->rbounce + (size_t)slot * conn->bb);
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
		ibc_wire_put64(e + offsetof(struct ib_cts, addr), addr);
		ibc_wire_put64(e + offsetof(struct ib_cts, nbytes), op->nbytes);
		ibc_wire_put32(e + offsetof(struct ib_cts, rkey), rkey);
		ibc_wire_put32(e + offsetof(struct ib_cts, seq), op->seq);
		ibc_msg_desc_pack(&op->desc, e + offsetof(struct ib_cts, desc));
		ret = ibc_ib_qp_post_write(qp, ibc_ib_wr_id(qp, IBC_IB_WR_QP), 0,
					   qp->max_inline >= (int)sizeof(struct ib_cts), e,
					   conn->out_mr->lkey, sizeof(struct ib_cts),
					   conn->rfifo_addr + (uint64_t)slot * sizeof(struct ib_fifo_slot),
					   conn->rfifo_rkey, 1,
					   ibc_ib_imm_make(IBC_IB_IMM_CTS, 1, slot, op->seq));
		if (ret) {
			ibc_ib_conn_fail(conn, IBC_ERR_VERBS,
					 "ibv_post_send of a clear-to-send on qp 0x%x (%s:%d) failed: %s",
					 qp->qp->qp_num, ctx->dev_name, ctx->port, strerror(ret));
			return;
		}
		conn->rslot[slot] = op;
		conn->rq_head = op->next;
		if (!conn->rq_head)
			conn->rq_tail = NULL;
	}
}

static void recv_finish(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot,
			ibc_status_t st)
{
	if (st == IBC_OK && op->bounce && op->nbytes)
		memcpy(op->buf, conn->rbounce + (size_t)slot * conn->bb, op->nbytes);
	conn->rslot[slot] = NULL;
	op_complete(op, st);
	op_free(op);
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
		conn->cts_ready[slot] = 1;
		return; /* sends start in ibc_ib_conn_kick() */
	}
	op = conn->rslot[slot];
	if (!op || (op->seq & 0x3ffffu) != ibc_ib_imm_seq(imm)) {
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
			src = conn->sbounce + (size_t)slot * conn->bb;
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
		op_complete(op, IBC_OK);
		op_free(op);
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

static void conn_try_start_sends(struct ibc_ib_conn *conn)
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

		if (!conn->cts_ready[slot])
			return;
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
				op_complete(op, st);
				conn->sq_head = op->next;
				op_free(op);
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
static void conn_maybe_probe(struct ibc_ib_conn *conn)
{
	struct ibc_ib_qp *qp = &conn->qps[0];
	uint64_t now;
	int ret;

	if (conn->probe_outstanding || conn->nlive == 0 || conn->ctx->prm.probe_ms <= 0)
		return;
	now = ibc_time_ns();
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

/* ---------------------------------------------------------------------- */
/* LL path (ib.h): lines with flags written into the peer's ring          */
/* ---------------------------------------------------------------------- */

static int ll_eligible(const struct ibc_ib_conn *conn, const struct ibc_msg_desc *desc,
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
static int ll_send(struct ibc_ib_conn *conn, struct ibc_ib_op *op)
{
	struct ibc_ib_ctx *ctx = conn->ctx;
	struct ibc_ib_qp *qp = &conn->qps[0];
	const uint8_t *buf = op->buf;
	uint32_t nl = ll_nlines(op->nbytes);
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
		if (ll_send(conn, op) != 0)
			return;
		conn->ll_sq_head = op->next;
		if (!conn->ll_sq_head)
			conn->ll_sq_tail = NULL;
		op_complete(op, IBC_OK);
		op_free(op);
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

/*
 * The message numbered @seq came by one path and this rank posted its
 * receive for the other (ranks chose different protocols, or sizes on
 * either side of the LL limit). With the sender's descriptor (@theirs,
 * @their_nbytes; NULL when unknown) and our receive (@mine, may be NULL),
 * a differing call is reported as such by the descriptor check; otherwise
 * as mismatched protocols. Fails the connection with IBC_ERR_INVALID_USAGE.
 */
static void ll_path_mismatch(struct ibc_ib_conn *conn, uint32_t seq, int their_ll,
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
			 seq, their_ll ? "LL" : "rendezvous", their_ll ? "rendezvous" : "LL",
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

/* an LL message whose receive was posted for the rendezvous path? */
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
	ll_path_mismatch(conn, msgno, 1, find_recv(conn, msgno), &theirs, ibc_wire_get32(l->data + 32));
}

/* copy out the LL messages that arrived for the posted LL receives, in order */
static void ll_progress_recvs(struct ibc_ib_conn *conn)
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
					ll_path_mismatch(conn, op->seq, 0, NULL, NULL, 0);
				else
					ll_path_mismatch(conn, msgno, 1, find_recv(conn, msgno),
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
		conn->last_activity_ns = ibc_time_ns();
		op_complete(op, IBC_OK);
		op_free(op);
		ll_return_credits(conn, 0);
	}
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
	if (conn->ll_max) {
		ll_progress_recvs(conn);
		if (conn->ll_sq_head)
			ll_try_sends(conn);
		ll_return_credits(conn, 0);
	}
	if (conn->rq_head)
		conn_try_issue_cts(conn);
	if (conn->sq_head)
		conn_try_start_sends(conn);
	conn_maybe_probe(conn);
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
	op = op_alloc(conn);
	if (!op) {
		ibc_treq_complete(req, IBC_ERR_NO_MEMORY);
		return IBC_ERR_NO_MEMORY;
	}
	op->req = req;
	op->buf = buf;
	op->nbytes = nbytes;
	op->desc = *desc;
	op->is_send = is_send;
	op->ll = ll_eligible(conn, desc, nbytes);
	if (is_send && op->ll) {
		op->seq = conn->send_seq++;
		/* nothing queued ahead: write it now, the request completes at once */
		if (!conn->ll_sq_head) {
			int r = ll_send(conn, op);

			if (r == 0) {
				op_complete(op, IBC_OK);
				op_free(op);
			}
			if (r <= 0)
				return IBC_OK; /* on failure the request completed with the error */
		}
		op_append(&conn->ll_sq_head, &conn->ll_sq_tail, op);
	} else if (op->ll) {
		op->seq = conn->recv_seq++;
		op_append(&conn->ll_rq_head, &conn->ll_rq_tail, op);
		ll_progress_recvs(conn);
	} else if (is_send) {
		op->seq = conn->send_seq++;
		op_append(&conn->sq_head, &conn->sq_tail, op);
		conn_try_start_sends(conn);
	} else {
		op->seq = conn->recv_seq++;
		op_append(&conn->rq_head, &conn->rq_tail, op);
		conn_try_issue_cts(conn);
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
		conn->last_activity_ns = ibc_time_ns();
		qp = conn_qp_by_num(conn, wc->qp_num);
		if (wc->status == IBV_WC_SUCCESS) {
			if (qp)
				ibc_ib_qp_sq_retire(qp);
		} else {
			wc_error(conn, qp, wc, op, NULL);
		}
		if (--op->parts_left <= 0) {
			if (wc->status == IBV_WC_SUCCESS && conn->failed == IBC_OK)
				op_complete(op, IBC_OK);
			op_free(op);
		}
		break;
	case IBC_IB_WR_QP:
		qp = ptr;
		if (wc->status == IBV_WC_SUCCESS)
			ibc_ib_qp_sq_retire(qp);
		else
			wc_error(qp->conn, qp, wc, NULL,
				 "rdma write (clear-to-send, refusal, or inline or bounce data)");
		break;
	case IBC_IB_WR_RECV:
		qp = ptr;
		conn = qp->conn;
		conn->last_activity_ns = ibc_time_ns();
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
		qp->conn->last_activity_ns = ibc_time_ns();
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

/* ---------------------------------------------------------------------- */
/* teardown                                                               */
/* ---------------------------------------------------------------------- */

static int conn_drained(const struct ibc_ib_conn *conn)
{
	int i;

	for (i = 0; i < conn->nqps; i++) {
		const struct ibc_ib_qp *qp = &conn->qps[i];

		if (!qp->qp)
			continue;
		if (!qp->drain_sq_done || qp->rq_posted > 0)
			return 0;
	}
	return 1;
}

/*
 * Move every QP to ERROR and post the send marker, which completes after
 * every earlier send WR (signalled or not) has been flushed. Receives need no
 * marker: each completes on its own (flushed), and rq_posted counts those
 * outstanding. A receive marker posted after the move to ERROR never
 * completes on Soft-RoCE under Linux 6.1 (the receives posted before it are
 * flushed, the marker is not), which held every connection for the whole
 * IB_DRAIN_MS (2 s) and left it a zombie.
 */
static void conn_start_drain(struct ibc_ib_conn *conn)
{
	int i;

	for (i = 0; i < conn->nqps; i++) {
		struct ibc_ib_qp *qp = &conn->qps[i];
		struct ibv_send_wr swr;
		struct ibv_send_wr *bad_s = NULL;

		if (!qp->qp)
			continue;
		ibc_ib_qp_to_err(qp);
		memset(&swr, 0, sizeof(swr));
		swr.wr_id = ibc_ib_wr_id(qp, IBC_IB_WR_DRAIN_SQ);
		swr.opcode = IBV_WR_RDMA_WRITE;
		swr.send_flags = IBV_SEND_SIGNALED;
		if (!conn->established || ibv_post_send(qp->qp, &swr, &bad_s))
			qp->drain_sq_done = 1; /* nothing was ever sent, or the marker is refused */
	}
}

/**
 * ibc_ib_conn_destroy() - Close a connection: abandon its requests (they
 * are not completed), move its QPs to ERROR, wait (at most 2 s, progressing
 * the context) until every posted WR has been flushed out of the CQ, then
 * destroy the QPs and free the buffers. A connection that does not drain in
 * time is kept as a zombie until the context is destroyed, so that a late
 * completion never touches freed memory.
 * @conn: [in] the connection; NULL is ignored.
 */
void ibc_ib_conn_destroy(struct ibc_ib_conn *conn)
{
	struct ibc_ib_ctx *ctx;
	struct ibc_ib_conn **pp;
	struct ibc_ib_op *op;
	uint64_t deadline;

	if (!conn)
		return;
	ctx = conn->ctx;
	for (pp = &ctx->conns; *pp; pp = &(*pp)->next) {
		if (*pp == conn) {
			*pp = conn->next;
			break;
		}
	}
	conn->next = NULL;
	for (op = conn->live; op; op = op->live_next)
		op->req = NULL;
	conn->dead = 1;
	conn_start_drain(conn);
	deadline = ibc_time_ms() + IB_DRAIN_MS;
	while (!conn_drained(conn) && ibc_time_ms() < deadline) {
		ibc_ib_ctx_wait(ctx, 1000);
		ibc_ib_ctx_poll(ctx);
	}
	if (!conn_drained(conn)) {
		int i;

		IBC_LOG_DEBUG(IB, "connection to peer rank %d did not drain in %d ms: kept until the context closes",
			      conn->peer, IB_DRAIN_MS);
		for (i = 0; i < conn->nqps; i++)
			IBC_LOG_DEBUG(IB, "  QP %d: send marker %s, %d receives not flushed", i,
				      conn->qps[i].drain_sq_done ? "flushed" : "missing",
				      conn->qps[i].rq_posted);
		conn_release_resources(conn);
		conn->next = ctx->zombies;
		ctx->zombies = conn;
		return;
	}
	conn_release_resources(conn);
	conn_free(conn);
}

/* ibc_ib_conn_free_zombies() - free undrained connections once the CQ is gone */
void ibc_ib_conn_free_zombies(struct ibc_ib_ctx *ctx)
{
	while (ctx->zombies) {
		struct ibc_ib_conn *conn = ctx->zombies;

		ctx->zombies = conn->next;
		conn_free(conn);
	}
}
