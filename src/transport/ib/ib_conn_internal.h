/* SPDX-License-Identifier: MIT */
/*
 * ib_conn_internal.h - a verbs connection's state, shared by the files of
 * its data path: the connection's lifecycle and failure (ib_conn.c), the
 * rendezvous path with its clear-to-send FIFO, posting and completions
 * (ib_rndv.c), the eager path with its receive slots and credits
 * (ib_eager.c), and the LL path (ib_ll.c). Other files use the accessors of
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
#define IB_EAGER_HDR      64    /* header before the payload in a send or receive slot */
#define IB_RTS_NS         (200ull * 1000000) /* a rendezvous send nudges its receiver this often */

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
	uint32_t credit;        /* the receiver's consumed count (eager credits) */
	uint8_t pad[4];
};

/* struct ib_nack - the sender's refusal of a receive (little-endian) */
struct ib_nack {
	uint64_t nbytes;        /* what the sender posted */
	uint32_t seq;
	uint32_t pad0;
	uint8_t desc[IBC_MSG_DESC_WIRE_BYTES]; /* the sender's descriptor */
	uint8_t pad[16];
};

/*
 * struct ib_enack - the receiver's refusal of an eager message (little-endian):
 * both descriptors, so the sender's check names both even when its slot was
 * reused since
 */
struct ib_enack {
	uint64_t rnbytes;       /* what the receiver posted */
	uint64_t snbytes;       /* what the sender sent */
	uint32_t seq;
	uint32_t pad0;
	uint8_t rdesc[IBC_MSG_DESC_WIRE_BYTES]; /* the receiver's descriptor */
	uint8_t sdesc[IBC_MSG_DESC_WIRE_BYTES]; /* the sender's, from the eager header */
	uint8_t pad[40];
};

/*
 * struct ib_eager_hdr - the first IB_EAGER_HDR bytes of an eager message in
 * the receiver's slot (little-endian); the payload follows
 */
struct ib_eager_hdr {
	uint8_t desc[IBC_MSG_DESC_WIRE_BYTES]; /* the sender's descriptor */
	uint32_t nbytes;
	uint32_t seq;           /* full sequence number (the immediate has 17 bits) */
	uint32_t credit;        /* the sender's consumed count of the other direction */
	uint8_t pad[20];
};

/* struct ib_fifo_slot - one credit slot of the FIFO the peer writes into */
struct ib_fifo_slot {
	struct ib_cts cts;      /* for my send #seq */
	struct ib_nack nack;    /* about my receive #seq */
	struct ib_enack enack;  /* about my eager send #seq */
};

_Static_assert(sizeof(struct ib_cts) == 64, "CTS entry is 64 bytes on the wire");
_Static_assert(sizeof(struct ib_nack) == 64, "NACK entry is 64 bytes on the wire");
_Static_assert(sizeof(struct ib_enack) == 128, "eager refusal is 128 bytes on the wire");
_Static_assert(sizeof(struct ib_eager_hdr) == IB_EAGER_HDR, "eager header size");
_Static_assert(sizeof(struct ib_fifo_slot) == 256, "FIFO slot is 256 bytes");
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
	int eager;                      /* by the eager path (size <= the connection's eager limit) */
	int cts_sent;                   /* eager recv: answered a nudge with a clear-to-send */
	int in_rord;                    /* recv: on the connection's receive-order list */
	struct ibc_ib_op *rord_next;    /* receives in sequence order, until freed */
	struct ibc_ib_op *rord_prev;
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
	size_t sstride;                 /* send slot: IB_EAGER_HDR + bb */
	size_t rstride;                 /* receive slot: IB_EAGER_HDR + max(bb, eager_local) */

	struct ib_fifo_slot *fifo;      /* [depth], the peer writes here */
	struct ibc_ib_mr *fifo_mr;
	struct ib_fifo_slot *out;       /* [depth], sources of my CTS, NACK and ENACK writes */
	struct ibc_ib_mr *out_mr;
	uint8_t *sbounce;               /* [depth][sstride] send slots: eager header, payload */
	struct ibc_ib_mr *sbounce_mr;
	uint8_t *rbounce;               /* [depth][rstride] receive slots: eager header, payload */
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

	/* eager path (ib.h, ib_eager.c) */
	size_t eager_local;             /* IBC_IB_EAGER_BYTES here */
	size_t eager_max;               /* negotiated limit, bytes; 0: no eager path */
	uint64_t eager_raddr;           /* the peer's receive slots */
	uint32_t eager_rkey;
	uint32_t eager_rstride;
	uint32_t peer_credit;           /* the peer's consumed count of my messages, as last told */
	uint32_t credit_sent;           /* my consumed count as last told the peer */
	uint32_t eager_in[IBC_IB_MAX_DEPTH];       /* seq + 1 of the unconsumed eager message in slot */
	uint32_t eager_sent_tag[IBC_IB_MAX_DEPTH]; /* seq + 1 of my last eager send in slot */
	uint8_t enack_due[IBC_IB_MAX_DEPTH];       /* a staged refusal waits for send-queue room */
	int nenack_due;
	struct ibc_ib_op *rord_head;    /* receives not freed, in sequence order */
	struct ibc_ib_op *rord_tail;
	uint32_t rts_tag;               /* seq + 1 of the send whose nudge is timed */
	uint64_t rts_next_ns;           /* when that send nudges its receiver next */
};

/* lines an LL message of @nbytes takes */
uint32_t ibc_ib_ll_nlines(size_t nbytes);

struct ibc_ib_op *ibc_ib_op_alloc(struct ibc_ib_conn *conn);

void ibc_ib_op_free(struct ibc_ib_op *op);

void ibc_ib_op_complete(struct ibc_ib_op *op, ibc_status_t st);

void ibc_ib_rndv_issue_cts(struct ibc_ib_conn *conn);

void ibc_ib_rndv_start_sends(struct ibc_ib_conn *conn);

/*
 * Write the clear-to-send entry of receive @op into slot @slot of the
 * peer's FIFO (RDMA WRITE WITH IMM): the payload goes to @addr/@rkey. The
 * caller checked send-queue room. Returns 0 or the errno of the post (the
 * connection is then failed).
 */
int ibc_ib_rndv_post_cts(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot,
			 uint64_t addr, uint32_t rkey);

/* where the payload of slot @slot's bounce or eager message lands, and its header */
static inline uint8_t *ibc_ib_rslot(const struct ibc_ib_conn *conn, unsigned slot)
{
	return conn->rbounce + (size_t)slot * conn->rstride;
}
static inline uint8_t *ibc_ib_sslot(const struct ibc_ib_conn *conn, unsigned slot)
{
	return conn->sbounce + (size_t)slot * conn->sstride;
}

/* ---- eager path (ib_eager.c) ---- */

/* 1 when a message of @nbytes (not LL) goes by the eager path on @conn */
static inline int ibc_ib_eager_eligible(const struct ibc_ib_conn *conn, size_t nbytes)
{
	return conn->eager_max && nbytes <= conn->eager_max;
}

/*
 * ibc_ib_eager_consumed() - the receive side's consumed count: every
 * message numbered below it is finished (its receive completed or failed),
 * so its slot is free again.
 */
uint32_t ibc_ib_eager_consumed(const struct ibc_ib_conn *conn);

/* the consumed count to piggyback on an outgoing entry; notes it as told */
uint32_t ibc_ib_eager_credit_take(struct ibc_ib_conn *conn);

/* a consumed count @c of my messages from the peer (piggybacked or not) */
void ibc_ib_eager_credit_learn(struct ibc_ib_conn *conn, uint32_t c);

/*
 * Send eager @op (at the head of the send queue) into the peer's slot
 * seq % D with one RDMA WRITE WITH IMM: inline, copied into the send slot
 * behind its header, or zero-copy from the registered buffer (above the
 * bounce size). Returns 0 when posted (the op is completed and freed,
 * except zero-copy ones, completed by their work completion), 1 when
 * waiting for a credit or send-queue room, -1 when the connection failed.
 */
int ibc_ib_eager_send(struct ibc_ib_conn *conn, struct ibc_ib_op *op);

/* eager receive @op was given slot @slot: take the message if it arrived */
void ibc_ib_eager_recv_start(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot);

/*
 * Rendezvous receive @op was given slot @slot, where an eager message of
 * its number already waits: refuse it (both sides report the mismatch).
 * Returns 1 when that was the case (@op is then finished and freed), else 0.
 */
int ibc_ib_eager_recv_check(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot);

/* completions: an eager message, a refusal of mine, a nudge, a credit */
void ibc_ib_eager_in(struct ibc_ib_conn *conn, unsigned slot, uint32_t imm);
void ibc_ib_eager_enack_in(struct ibc_ib_conn *conn, unsigned slot);
void ibc_ib_eager_rts_in(struct ibc_ib_conn *conn, unsigned slot, uint32_t imm);
void ibc_ib_eager_credit_in(struct ibc_ib_conn *conn, uint32_t imm);

/*
 * A rendezvous send @op has no clear-to-send yet: every IB_RTS_NS, write
 * a zero-byte nudge (IBC_IB_IMM_RTS), so a receiver that posted its
 * receive for another path (eager or LL) answers with a refusal instead of
 * both sides waiting.
 */
void ibc_ib_eager_maybe_rts(struct ibc_ib_conn *conn, struct ibc_ib_op *op, unsigned slot);

/* post the refusals that waited for room; return credits when D/2 are owed */
void ibc_ib_eager_progress(struct ibc_ib_conn *conn);

/* the next message in is an eager one whose receive is not posted: its descriptor */
int ibc_ib_eager_peek(struct ibc_ib_conn *conn, struct ibc_msg_desc *desc, size_t *nbytes);

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
 * The message numbered @seq came by one path (@their_ll: LL, else
 * rendezvous or eager) and this rank posted its receive for the other: with
 * the sender's descriptor (@theirs, @their_nbytes; NULL when unknown) and
 * our receive (@mine, may be NULL) a differing call is reported by the
 * descriptor check, otherwise as mismatched protocols. Fails the connection.
 */
void ibc_ib_ll_path_mismatch(struct ibc_ib_conn *conn, uint32_t seq, int their_ll,
			     const struct ibc_ib_op *mine, const struct ibc_msg_desc *theirs,
			     size_t their_nbytes);

/* the posted LL receive numbered @seq (low 17 bits compared when @low17), or NULL */
struct ibc_ib_op *ibc_ib_ll_find_recv(struct ibc_ib_conn *conn, uint32_t seq, int low17);

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
