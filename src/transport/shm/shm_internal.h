/* SPDX-License-Identifier: MIT */
/*
 * shm_internal.h - the shm transport's shared state (not for other files):
 * the segment layout of a connected pair, a connection, its operations and
 * the transport context, used by the connection set-up (shm_ops.c) and the
 * data path (shm_data.c).
 */
#ifndef IBC_SHM_INTERNAL_H
#define IBC_SHM_INTERNAL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

#define SHM_MAGIC 0x31304d4853434249ull /* "IBCSHM01" */
#define SHM_PROBE_MAGIC 0x45424f5250434249ull
#define SLOT_FIRST 0x1u
#define SLOT_RDV 0x2u
#define LL_LINE_DATA 56         /* payload bytes of an LL line */
#define LL_FIRST_DATA 16        /* payload bytes in a message's first line */
#define LL_RING_MSGS 8          /* LL ring capacity, in messages of the largest size */

enum {
	TAG_INFO = 0,
	TAG_ACK = 1,
	TAG_FIN = 2,
	TAG_BELL = 3,
};

struct shm_seg_hdr {
	uint64_t magic;
	uint32_t nslots;
	uint32_t slot_bytes;
	uint64_t size;
	uint32_t ll_lines;      /* LL ring lines per direction (0: no LL path) */
	uint32_t ll_max;        /* largest LL message, bytes */
	uint8_t pad[32];
};

struct shm_ring_ctl {
	_Alignas(64) uint64_t head;     /* slots published (producer) */
	_Alignas(64) uint64_t tail;     /* slots consumed (consumer) */
};

struct shm_slot_hdr {
	uint64_t nbytes;        /* payload bytes in this slot */
	uint64_t msg_nbytes;    /* the message's total bytes */
	uint64_t rdv_addr;      /* SLOT_RDV: sender's buffer */
	uint32_t flags;
	uint32_t msgno;         /* SLOT_FIRST: the message's number in this direction */
	uint8_t desc[IBC_MSG_DESC_WIRE_BYTES];
};

/* one LL line: written data first, then the flag (release) */
struct shm_ll_line {
	uint8_t data[LL_LINE_DATA];
	uint64_t flag;          /* absolute line number + 1 once written */
};

struct shm_ll_ctl {
	_Alignas(64) uint64_t tail;     /* LL lines consumed (consumer) */
};

struct shm_shared {
	struct shm_seg_hdr hdr;
	struct shm_ring_ctl ring[2];            /* [0]: lower -> higher, [1]: higher -> lower */
	_Alignas(64) uint32_t sleeping[2];      /* [0]: lower rank sleeps, [1]: higher */
	struct shm_ll_ctl ll[2];                /* per direction, as ring[] */
};

struct shm_op {
	struct shm_op *next;
	struct ibc_treq *req;
	char *buf;
	size_t nbytes;
	size_t off;             /* bytes published (send) or consumed (recv) */
	int started;            /* first slot published / consumed */
	int rdv;                /* send: by rendezvous */
	int ll;                 /* by the LL path */
	uint32_t msgno;         /* send: message number in this direction */
	uint64_t rdv_slot;      /* send: ring index of the rendezvous slot */
	uint8_t desc[IBC_MSG_DESC_WIRE_BYTES];  /* send: packed; */
	struct ibc_msg_desc want;               /* recv: expected */
};

struct shm_q {
	struct shm_op *head;
	struct shm_op *tail;
};

struct ibc_tconn {
	struct shm_ctx *ctx;
	int peer;
	int side;                       /* 0: we are the lower rank, 1: the higher */
	struct shm_shared *sh;
	size_t seg_size;
	struct shm_slot_hdr *slot_hdr[2];
	char *slot_data[2];
	uint32_t nslots;
	size_t slot_bytes;
	struct shm_ring_ctl *out;       /* ring we produce into */
	struct shm_ring_ctl *in;        /* ring we consume from */
	struct shm_slot_hdr *out_hdr;
	struct shm_slot_hdr *in_hdr;
	char *out_data;
	char *in_data;
	int bell_fd;
	pid_t peer_pid;
	int peer_can_read_me;           /* rendezvous sends allowed */
	size_t cma_min;
	struct shm_q sendq;
	struct shm_q recvq;
	struct shm_op *free_ops;
	int broken;
	int peer_gone;                  /* doorbell EOF: the peer closed its end */
	uint64_t seen_in_head;          /* for the sleep decision */
	uint64_t seen_out_tail;
	/* LL path (see file header) */
	uint32_t ll_lines;              /* lines per direction; 0: no LL path */
	size_t ll_max;                  /* bytes */
	struct shm_ll_line *ll_out;     /* ring we write */
	struct shm_ll_line *ll_in;      /* ring we read */
	struct shm_ll_ctl *ll_out_ctl;  /* the peer's consumed count of ll_out */
	struct shm_ll_ctl *ll_in_ctl;   /* our consumed count of ll_in */
	uint64_t ll_head;               /* lines written to ll_out */
	uint64_t ll_tail_seen;          /* last value read from ll_out_ctl */
	uint64_t ll_rtail;              /* lines consumed from ll_in */
	uint32_t send_msgno;            /* next message number, out direction */
	uint32_t recv_msgno;            /* next message number, in direction */
	struct ibc_tconn *next;
};

/* set-up messages */
struct shm_info_msg {
	char name[96];
	uint64_t size;
	uint64_t pid;
	uint64_t probe_addr;
};

struct shm_ack_msg {
	uint64_t pid;
	uint64_t probe_addr;
	uint64_t can_read;
};

struct shm_pend {
	int state;
	struct ibc_tconn *c;            /* being set up */
	char name[96];
};

struct shm_ctx {
	const struct ibc_tenv *env;
	struct ibc_tconn *conns;
	struct shm_pend *pend;          /* [nranks] */
	uint64_t probe_word;            /* read by peers to test process_vm_readv */
	int cma_mode;                   /* IBC_SHM_CMA */
	struct pollfd *pfds;
	int npfds;
};

/* lines an LL message of @nbytes takes */
static inline uint32_t shm_ll_nlines(size_t nbytes)
{
	size_t rest = nbytes > LL_FIRST_DATA ? nbytes - LL_FIRST_DATA : 0;

	return 1 + (uint32_t)IBC_DIV_UP(rest, LL_LINE_DATA);
}

/* the data path (shm_data.c), the ops table's entries */
ibc_status_t ibc_shm_isend(struct ibc_tconn *c, const void *buf, size_t nbytes,
			   const struct ibc_msg_desc *desc, struct ibc_treq *req);
ibc_status_t ibc_shm_irecv(struct ibc_tconn *c, void *buf, size_t nbytes,
			   const struct ibc_msg_desc *desc, struct ibc_treq *req);
ibc_status_t ibc_shm_progress(void *vctx);
void ibc_shm_wait(void *vctx, int timeout_us);
int ibc_shm_peek(struct ibc_tconn *c, struct ibc_msg_desc *desc, size_t *nbytes);

#endif /* IBC_SHM_INTERNAL_H */
