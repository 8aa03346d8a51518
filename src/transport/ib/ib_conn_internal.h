/* SPDX-License-Identifier: MIT */
/*
 * ib_conn_internal.h - a verbs connection's state, shared by the files of
 * its data path: the connection's lifecycle and failure (ib_conn.c), the
 * rendezvous path with its clear-to-send FIFO, posting and completions
 * (ib_rndv.c), and the LL path (ib_ll.c). Other files use the accessors of
 * ib.h.
 */
#ifndef IBC_IB_CONN_INTERNAL_H
#define IBC_IB_CONN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "transport/ib/ib.h"

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

/* lines an LL message of @nbytes takes */
uint32_t ibc_ib_ll_nlines(size_t nbytes);

struct ibc_ib_op *ibc_ib_op_alloc(struct ibc_ib_conn *conn);

void ibc_ib_op_free(struct ibc_ib_op *op);

void ibc_ib_op_complete(struct ibc_ib_op *op, ibc_status_t st);

void ibc_ib_rndv_issue_cts(struct ibc_ib_conn *conn);

void ibc_ib_rndv_start_sends(struct ibc_ib_conn *conn);

/*
 * A receiver-driven connection can wait without anything in flight (a send
 * waiting for a clear-to-send, a receive whose clear-to-send was delivered),
 * and then a dead or departed peer raises no work completion error. When
 * messages are pending and nothing completed for IBC_IB_PROBE_MS, post a
 * zero-byte RDMA WRITE to the peer's FIFO: a live peer's NIC acknowledges it
 * without its CPU, a gone one makes it fail with retry-exceeded.
 */
void ibc_ib_rndv_maybe_probe(struct ibc_ib_conn *conn);

int ibc_ib_ll_eligible(const struct ibc_ib_conn *conn, const struct ibc_msg_desc *desc,
		       size_t nbytes);

/*
 * Write LL send @op into the peer's ring: build its lines in the staging
 * mirror (the same index as in the peer's ring, so a line is rebuilt only
 * after the peer consumed it, that is after the write that read it landed)
 * and post one RDMA WRITE per contiguous run (two when the message wraps),
 * inline when it fits. Returns 0 when written (the caller's buffer is free
 * again), 1 when the ring or the send queue lacks room, -1 when the
 * connection failed.
 */
int ibc_ib_ll_send(struct ibc_ib_conn *conn, struct ibc_ib_op *op);

/* copy out the LL messages that arrived for the posted LL receives, in order */
void ibc_ib_ll_progress_recvs(struct ibc_ib_conn *conn);

/*
 * ibc_ib_ll_progress() - one LL step of @conn (ll_max > 0): copy out the LL
 * messages that arrived, write the LL sends that waited for room, return
 * credits when a quarter of the ring is consumed.
 */
void ibc_ib_ll_progress(struct ibc_ib_conn *conn);

/* destroy the QPs, release the buffers and registrations; the struct and its ops stay */
void ibc_ib_conn_release(struct ibc_ib_conn *conn);

/* free the operations and the struct (no completion may refer to them any more) */
void ibc_ib_conn_free(struct ibc_ib_conn *conn);

#endif /* IBC_IB_CONN_INTERNAL_H */
