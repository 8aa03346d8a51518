/* SPDX-License-Identifier: MIT */
/*
 * shm_ops.c - the shm transport for ranks on one host.
 *
 * Each connected pair shares one /dev/shm segment holding two rings of
 * IBC_SHM_NSLOTS slots of IBC_SHM_SLOT_BYTES (one ring per direction). The
 * producer copies a message into consecutive slots and publishes each with
 * a release store of the ring's head; the consumer copies out and advances
 * the tail. Messages of at least IBC_SHM_CMA_MIN_BYTES go by rendezvous
 * instead when cross-memory attach works: one slot carries the sender's
 * buffer address and the receiver reads it with process_vm_readv straight
 * into its own buffer (one copy instead of two); the send completes when the
 * tail passes that slot.
 *
 * The segment is unlinked as soon as both ends mapped it, so a crash leaves
 * nothing in /dev/shm. Idle ranks sleep in poll() on an authenticated
 * loopback stream per pair (the doorbell): before sleeping a rank raises its
 * "sleeping" flag in the segment; a peer that moves a head or tail and sees
 * the flag clears it and writes one byte (a Dekker pair of seq_cst fences
 * makes the lost-wake-up impossible). The doorbell also reports a dead peer
 * at once (EOF).
 *
 * Low-latency (LL) path, after NCCL's LL protocol: a message whose
 * descriptor carries IBC_DESC_F_LL and whose size is at most the segment's
 * LL limit (IBC_LL_MAX_BYTES of the lower rank) skips the slot ring. The
 * sender writes it straight into a ring of 64-byte lines in the segment,
 * each line 56 bytes of data and an 8-byte flag stored last with release
 * semantics: the flag is the line's absolute number + 1, so a line from an
 * earlier lap never looks new and nothing has to be cleared. The first line
 * carries the descriptor, the size, the message number and 16 payload
 * bytes (an 8-byte all-reduce step is one line). The receiver polls the
 * flag of the next line and copies out; it publishes how many lines it
 * consumed, and the sender reads that only when the ring looks full. No
 * head/tail handshake per message: one cache line moves from writer to
 * reader. isend() writes the message at once when nothing is queued ahead
 * (the request completes before isend returns). Every message (slot or LL)
 * carries a per-direction message number, so a receiver that expects the
 * other path (ranks disagreeing on IBC_PROTO) reports mismatched calls
 * instead of hanging.
 *
 * Set-up (nonblocking, transport.h): the lower rank creates the segment,
 * sends INFO {name, size, pid, probe address} and opens the doorbell; the
 * higher rank maps it, probes process_vm_readv on the lower rank's probe
 * word and answers ACK {pid, probe address, can-read}; the lower rank
 * unlinks, probes back and sends FIN {can-read}.
 */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/shmseg.h"
#include "base/socket.h"
#include "base/util.h"
#include "shm.h"

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
	char name[64];
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
	char name[64];
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

static ibc_status_t shm_init(const struct ibc_tenv *env, void **ctx_p)
{
	struct shm_ctx *ctx = ibc_calloc(1, sizeof(*ctx), "shm transport");

	if (!ctx)
		return IBC_ERR_NO_MEMORY;
	ctx->env = env;
	ctx->probe_word = SHM_PROBE_MAGIC;
	ctx->cma_mode = (int)ibc_param_shm_cma();
	ctx->pend = ibc_calloc((size_t)env->nranks, sizeof(*ctx->pend), "shm set-up state");
	if (!ctx->pend) {
		ibc_free(ctx);
		return IBC_ERR_NO_MEMORY;
	}
	*ctx_p = ctx;
	return IBC_OK;
}

static void conn_free(struct ibc_tconn *c)
{
	struct shm_op *o;

	if (c->sh)
		munmap(c->sh, c->seg_size);
	ibc_sock_close(c->bell_fd);
	while ((o = c->sendq.head)) {
		c->sendq.head = o->next;
		free(o);
	}
	while ((o = c->recvq.head)) {
		c->recvq.head = o->next;
		free(o);
	}
	while ((o = c->free_ops)) {
		c->free_ops = o->next;
		free(o);
	}
	ibc_free(c);
}

static void shm_fini(void *vctx)
{
	struct shm_ctx *ctx = vctx;
	int i;

	if (!ctx)
		return;
	for (i = 0; i < ctx->env->nranks; i++) {
		if (ctx->pend[i].c) {
			if (ctx->pend[i].state == 1 && ctx->pend[i].c->side == 0)
				shm_unlink(ctx->pend[i].name);
			conn_free(ctx->pend[i].c);
		}
	}
	ibc_free(ctx->pend);
	free(ctx->pfds);
	ibc_free(ctx);
}

static size_t seg_layout(uint32_t nslots, size_t slot_bytes, uint32_t ll_lines, size_t *hdr_off,
			 size_t *data_off, size_t *ll_off)
{
	size_t off = IBC_ALIGN_UP(sizeof(struct shm_shared), 64);

	*hdr_off = off;
	off += 2 * (size_t)nslots * sizeof(struct shm_slot_hdr);
	off = IBC_ALIGN_UP(off, 4096);
	*data_off = off;
	off += 2 * (size_t)nslots * slot_bytes;
	off = IBC_ALIGN_UP(off, 64);    /* whole cache lines, aligned flags */
	*ll_off = off;
	return off + 2 * (size_t)ll_lines * sizeof(struct shm_ll_line);
}

/* lines an LL message of @nbytes takes */
static uint32_t ll_nlines(size_t nbytes)
{
	size_t rest = nbytes > LL_FIRST_DATA ? nbytes - LL_FIRST_DATA : 0;

	return 1 + (uint32_t)IBC_DIV_UP(rest, LL_LINE_DATA);
}

static void conn_wire(struct ibc_tconn *c)
{
	size_t hdr_off;
	size_t data_off;
	size_t ll_off;
	char *base = (char *)c->sh;
	struct shm_ll_line *ll = NULL;
	int d;

	seg_layout(c->nslots, c->slot_bytes, c->ll_lines, &hdr_off, &data_off, &ll_off);
	ll = (struct shm_ll_line *)(base + ll_off);
	c->ll_out = ll + (size_t)c->side * c->ll_lines;
	c->ll_in = ll + (size_t)(1 - c->side) * c->ll_lines;
	c->ll_out_ctl = &c->sh->ll[c->side];
	c->ll_in_ctl = &c->sh->ll[1 - c->side];
	for (d = 0; d < 2; d++) {
		c->slot_hdr[d] = (struct shm_slot_hdr *)(base + hdr_off) + (size_t)d * c->nslots;
		c->slot_data[d] = base + data_off + (size_t)d * c->nslots * c->slot_bytes;
	}
	/* the lower rank produces into ring 0, the higher into ring 1 */
	c->out = &c->sh->ring[c->side];
	c->in = &c->sh->ring[1 - c->side];
	c->out_hdr = c->slot_hdr[c->side];
	c->in_hdr = c->slot_hdr[1 - c->side];
	c->out_data = c->slot_data[c->side];
	c->in_data = c->slot_data[1 - c->side];
}

/* can this process read @len bytes at @addr in process @pid? */
static int cma_probe(pid_t pid, uint64_t addr)
{
	uint64_t v = 0;
	struct iovec l = { .iov_base = &v, .iov_len = sizeof(v) };
	struct iovec r = { .iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof(v) };

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof(v) && v == SHM_PROBE_MAGIC;
}

static ibc_status_t conn_alloc(struct shm_ctx *ctx, int peer, struct ibc_tconn **c_p)
{
	struct ibc_tconn *c = ibc_calloc(1, sizeof(*c), "shm connection");

	if (!c)
		return IBC_ERR_NO_MEMORY;
	c->ctx = ctx;
	c->peer = peer;
	c->side = ctx->env->rank < peer ? 0 : 1;
	c->bell_fd = -1;
	c->cma_min = (size_t)ibc_param_shm_cma_min_bytes();
	*c_p = c;
	return IBC_OK;
}

/*
 * Open (or, with @create, create) and map segment @name of @size bytes.
 * @nospc_p: when not NULL, a creator that finds /dev/shm too full (ENOSPC)
 * sets it to 1 and logs at DEBUG only: the caller tries a smaller ring.
 */
static ibc_status_t seg_map(struct ibc_tconn *c, const char *name, int create, size_t size,
			    int *nospc_p)
{
	char err[256];
	int fd;
	void *p;

	if (ibc_fault_hit(IBC_FAULT_SHM, "shm_open")) {
		errno = ENOSPC;
		fd = -1;
	} else {
		fd = shm_open(name, O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0600);
	}
	if (fd < 0) {
		IBC_LOG_ERROR(SHM, "shm_open(%s) failed: %s", name, strerror(errno));
		return IBC_ERR_SYSTEM;
	}
	if (create && ftruncate(fd, (off_t)size) != 0) {
		IBC_LOG_ERROR(SHM, "cannot size %s to %zu bytes: %s (is /dev/shm full?)", name, size,
			      strerror(errno));
		close(fd);
		shm_unlink(name);
		return IBC_ERR_SYSTEM;
	}
	p = ibc_shm_map(fd, size, create, err, sizeof(err));
	if (!p) {
		int nospc = create && errno == ENOSPC;

		close(fd);
		if (nospc && nospc_p) {
			*nospc_p = 1;
			IBC_LOG_DEBUG(SHM, "shm ring with rank %d (%s), %u slots: %s", c->peer, name,
				      c->nslots, err);
		} else {
			IBC_LOG_ERROR(SHM, "shm ring with rank %d (%s): %s%s", c->peer, name, err,
				      nospc ? " (even with 2 slots; or lower IBC_SHM_SLOT_BYTES, IBC_SHM_ALLREDUCE=0, IBC_TRANSPORT=tcp)"
					    : "");
		}
		if (create)
			shm_unlink(name);
		return IBC_ERR_SYSTEM;
	}
	close(fd);
	c->sh = p;
	c->seg_size = size;
	return IBC_OK;
}

static void conn_ready(struct shm_ctx *ctx, struct ibc_tconn *c, struct ibc_tconn **conn_p)
{
	ibc_sock_set_nonblock(c->bell_fd, 1);
	c->next = ctx->conns;
	ctx->conns = c;
	ctx->pend[c->peer].c = NULL;
	ctx->pend[c->peer].state = 0;
	IBC_LOG_DEBUG(SHM, "shm to rank %d: %u slots of %zu bytes, rendezvous %s", c->peer,
		      c->nslots, c->slot_bytes, c->peer_can_read_me ? "on" : "off");
	*conn_p = c;
}

static int want_cma(struct shm_ctx *ctx, int can)
{
	return ctx->cma_mode == 0 ? 0 : can;
}

/* the smaller-ring WARN is logged once per process, later rings at DEBUG */
static int ring_shrink_warned;

/*
 * The slots of a new ring where /dev/shm is small: the configured count
 * halved, down to 2, until the ring fits ibc_shm_budget() (rings are
 * reserved whole, and the first pairs must not take the room of the last).
 */
static uint32_t ring_slots_fit(const struct ibc_tconn *c, int nlocal, char *why, size_t why_len)
{
	size_t budget = ibc_shm_budget(nlocal, why, why_len);
	uint32_t ns = c->nslots;
	size_t h;
	size_t d;
	size_t l;

	while (ns > 2 && seg_layout(ns, c->slot_bytes, c->ll_lines, &h, &d, &l) > budget)
		ns = IBC_MAX(ns / 2, 2u);
	return ns;
}

/* lower rank: create, announce, open the doorbell; then unlink on ACK and answer FIN */
static ibc_status_t shm_connect_lower(struct shm_ctx *ctx, int peer, struct ibc_tconn **conn_p)
{
	const struct ibc_tenv *env = ctx->env;
	struct shm_pend *pd = &ctx->pend[peer];
	struct ibc_tconn *c = pd->c;
	ibc_status_t st;

	if (pd->state == 0) {
		struct shm_info_msg info;
		const uint8_t *id = env->comm_id;
		size_t hdr_off;
		size_t data_off;
		size_t ll_off;
		char why[160];
		uint32_t fitted;
		uint32_t want;

		IBC_CHECK(conn_alloc(ctx, peer, &c));
		pd->c = c;
		c->nslots = (uint32_t)ibc_param_shm_nslots();
		c->slot_bytes = (size_t)ibc_param_shm_slot_bytes();
		c->ll_max = (size_t)ibc_param_ll_max_bytes();
		c->ll_lines = c->ll_max ? LL_RING_MSGS * ll_nlines(c->ll_max) : 0;
		snprintf(pd->name, sizeof(pd->name), "/ibc-%02x%02x%02x%02x-%d-%d-%d", id[0], id[1],
			 id[2], id[3], env->rank, peer, (int)getpid());
		/*
		 * A /dev/shm too full for the ring: halve its slots, down to 2
		 * (the higher rank takes the count from the header), rather
		 * than fail a job whose rings would mostly carry small messages
		 * (docs/reliability.md, guarantee 7).
		 */
		want = c->nslots;
		c->nslots = ring_slots_fit(c, env->nlocal, why, sizeof(why));
		fitted = c->nslots;
		for (;;) {
			int nospc = 0;

			st = seg_map(c, pd->name, 1, seg_layout(c->nslots, c->slot_bytes, c->ll_lines,
							      &hdr_off, &data_off, &ll_off),
				     c->nslots > 2 ? &nospc : NULL);
			if (st == IBC_OK)
				break;
			if (!nospc)
				return st;
			c->nslots = IBC_MAX(c->nslots / 2, 2u);
		}
		if (c->nslots < want && !__atomic_exchange_n(&ring_shrink_warned, 1, __ATOMIC_RELAXED))
			IBC_LOG_WARN(SHM, "shm ring with rank %d: %u slots of %zu bytes per direction instead of %u (%s%s; less bandwidth; enlarge /dev/shm, e.g. docker run --shm-size=1g)",
				     peer, c->nslots, c->slot_bytes, want,
				     fitted < want ? why : "/dev/shm had no room",
				     fitted < want && c->nslots < fitted ? ", then /dev/shm had no room"
									 : "");
		else if (c->nslots < want)
			IBC_LOG_DEBUG(SHM, "shm ring with rank %d: %u slots instead of %u (/dev/shm)", peer,
				      c->nslots, want);
		c->sh->hdr.nslots = c->nslots;
		c->sh->hdr.slot_bytes = (uint32_t)c->slot_bytes;
		c->sh->hdr.ll_lines = c->ll_lines;
		c->sh->hdr.ll_max = (uint32_t)c->ll_max;
		c->sh->hdr.size = c->seg_size;
		__atomic_store_n(&c->sh->hdr.magic, SHM_MAGIC, __ATOMIC_RELEASE);
		conn_wire(c);
		memset(&info, 0, sizeof(info));
		snprintf(info.name, sizeof(info.name), "%s", pd->name);
		info.size = c->seg_size;
		info.pid = (uint64_t)getpid();
		info.probe_addr = (uint64_t)(uintptr_t)&ctx->probe_word;
		pd->state = 1;
		IBC_CHECK(ibc_tenv_oob_send(env, peer, TAG_INFO, &info, sizeof(info)));
		IBC_CHECK(ibc_tenv_oob_connect_stream(env, peer, TAG_BELL, &c->bell_fd));
	}
	if (pd->state == 1) {
		struct shm_ack_msg ack;
		uint64_t can_read;
		int got = 0;

		IBC_CHECK(ibc_tenv_oob_try_recv(env, peer, TAG_ACK, &ack, sizeof(ack), &got));
		if (!got)
			return IBC_INPROGRESS;
		shm_unlink(pd->name);
		pd->state = 2;
		c->peer_pid = (pid_t)ack.pid;
		c->peer_can_read_me = want_cma(ctx, (int)ack.can_read);
		can_read = ctx->cma_mode != 0 && cma_probe(c->peer_pid, ack.probe_addr);
		st = ibc_tenv_oob_send(env, peer, TAG_FIN, &can_read, sizeof(can_read));
		if (st != IBC_OK)
			return st;
		conn_ready(ctx, c, conn_p);
		return IBC_OK;
	}
	return IBC_INPROGRESS;
}

/* higher rank: map on INFO and ACK, take the doorbell, finish on FIN */
static ibc_status_t shm_connect_higher(struct shm_ctx *ctx, int peer, struct ibc_tconn **conn_p)
{
	const struct ibc_tenv *env = ctx->env;
	struct shm_pend *pd = &ctx->pend[peer];
	struct ibc_tconn *c = pd->c;
	int got = 0;

	if (pd->state == 0) {
		struct shm_info_msg info;
		struct shm_ack_msg ack;

		IBC_CHECK(ibc_tenv_oob_try_recv(env, peer, TAG_INFO, &info, sizeof(info), &got));
		if (!got)
			return IBC_INPROGRESS;
		info.name[sizeof(info.name) - 1] = '\0';
		IBC_CHECK(conn_alloc(ctx, peer, &c));
		pd->c = c;
		IBC_CHECK(seg_map(c, info.name, 0, (size_t)info.size, NULL));
		/*
		 * Unlink at once (the lower rank does too, on ACK; ENOENT then is
		 * fine): a lower rank that dies before our ACK arrives no longer
		 * leaves its segment in /dev/shm.
		 */
		shm_unlink(info.name);
		if (__atomic_load_n(&c->sh->hdr.magic, __ATOMIC_ACQUIRE) != SHM_MAGIC ||
		    c->sh->hdr.size != info.size || c->sh->hdr.nslots < 2) {
			IBC_LOG_ERROR(SHM, "segment %s from rank %d is not an ibcoll ring", info.name,
				      peer);
			return IBC_ERR_REMOTE;
		}
		c->nslots = c->sh->hdr.nslots;
		c->slot_bytes = c->sh->hdr.slot_bytes;
		c->ll_lines = c->sh->hdr.ll_lines;
		c->ll_max = c->sh->hdr.ll_max;
		{
			size_t h;
			size_t d;
			size_t l;

			if (seg_layout(c->nslots, c->slot_bytes, c->ll_lines, &h, &d, &l) != c->seg_size ||
			    (c->ll_lines && c->ll_lines < ll_nlines(c->ll_max))) {
				IBC_LOG_ERROR(SHM, "segment %s from rank %d has an inconsistent size",
					      info.name, peer);
				return IBC_ERR_REMOTE;
			}
		}
		conn_wire(c);
		c->peer_pid = (pid_t)info.pid;
		memset(&ack, 0, sizeof(ack));
		ack.pid = (uint64_t)getpid();
		ack.probe_addr = (uint64_t)(uintptr_t)&ctx->probe_word;
		ack.can_read = ctx->cma_mode != 0 && cma_probe(c->peer_pid, info.probe_addr);
		IBC_CHECK(ibc_tenv_oob_send(env, peer, TAG_ACK, &ack, sizeof(ack)));
		pd->state = 1;
	}
	if (pd->state == 1) {
		IBC_CHECK(ibc_tenv_oob_try_accept_stream(env, peer, TAG_BELL, &c->bell_fd));
		if (c->bell_fd < 0)
			return IBC_INPROGRESS;
		pd->state = 2;
	}
	if (pd->state == 2) {
		uint64_t can_read;

		IBC_CHECK(ibc_tenv_oob_try_recv(env, peer, TAG_FIN, &can_read, sizeof(can_read),
						 &got));
		if (!got)
			return IBC_INPROGRESS;
		c->peer_can_read_me = want_cma(ctx, (int)can_read);
		conn_ready(ctx, c, conn_p);
		return IBC_OK;
	}
	return IBC_INPROGRESS;
}

static ibc_status_t shm_connect(void *vctx, int peer, struct ibc_tconn **conn_p)
{
	struct shm_ctx *ctx = vctx;

	if (ctx->env->rank < peer)
		return shm_connect_lower(ctx, peer, conn_p);
	return shm_connect_higher(ctx, peer, conn_p);
}

static void shm_disconnect(struct ibc_tconn *c)
{
	struct shm_ctx *ctx = c->ctx;
	struct ibc_tconn **pp;

	for (pp = &ctx->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	conn_free(c);
}

static struct shm_op *op_get(struct ibc_tconn *c)
{
	struct shm_op *o = c->free_ops;

	if (o) {
		c->free_ops = o->next;
		memset(o, 0, sizeof(*o));
		return o;
	}
	return ibc_calloc(1, sizeof(*o), "shm operation");
}

static void q_push(struct shm_q *q, struct shm_op *o)
{
	o->next = NULL;
	if (q->tail)
		q->tail->next = o;
	else
		q->head = o;
	q->tail = o;
}

static void q_pop_free(struct ibc_tconn *c, struct shm_q *q)
{
	struct shm_op *o = q->head;

	q->head = o->next;
	if (!q->head)
		q->tail = NULL;
	o->next = c->free_ops;
	c->free_ops = o;
}

/* ------------------------------------------------------------------------ */
/* LL path (file header): lines of data + flag, no per-message handshake    */
/* ------------------------------------------------------------------------ */

static void ring_bell(struct ibc_tconn *c);
static ibc_status_t conn_fail(struct ibc_tconn *c, ibc_status_t st);

static int ll_eligible(const struct ibc_tconn *c, const struct ibc_msg_desc *desc, size_t nbytes)
{
	return c->ll_lines && (desc->flags & IBC_DESC_F_LL) && nbytes <= c->ll_max;
}

/* write one LL message when the ring has room for all its lines; 1 if written */
static int ll_write(struct ibc_tconn *c, const char *buf, size_t nbytes,
		    const uint8_t desc[IBC_MSG_DESC_WIRE_BYTES], uint32_t msgno)
{
	uint32_t nl = ll_nlines(nbytes);
	uint32_t n32 = (uint32_t)nbytes;
	struct shm_ll_line *l;
	size_t off;
	size_t len;

	if (c->ll_head + nl - c->ll_tail_seen > c->ll_lines) {
		c->ll_tail_seen = __atomic_load_n(&c->ll_out_ctl->tail, __ATOMIC_ACQUIRE);
		if (c->ll_head + nl - c->ll_tail_seen > c->ll_lines)
			return 0;
	}
	l = &c->ll_out[c->ll_head % c->ll_lines];
	memcpy(l->data, desc, IBC_MSG_DESC_WIRE_BYTES);
	memcpy(l->data + 32, &n32, 4);
	memcpy(l->data + 36, &msgno, 4);
	len = IBC_MIN(nbytes, (size_t)LL_FIRST_DATA);
	if (len)
		memcpy(l->data + 40, buf, len);
	__atomic_store_n(&l->flag, c->ll_head + 1, __ATOMIC_RELEASE);
	c->ll_head++;
	for (off = len; off < nbytes; off += len) {
		l = &c->ll_out[c->ll_head % c->ll_lines];
		len = IBC_MIN(nbytes - off, (size_t)LL_LINE_DATA);
		memcpy(l->data, buf + off, len);
		__atomic_store_n(&l->flag, c->ll_head + 1, __ATOMIC_RELEASE);
		c->ll_head++;
	}
	return 1;
}

/* LL line number @idx of the ring we read, or NULL if not written yet */
static const struct shm_ll_line *ll_ready(const struct ibc_tconn *c, uint64_t idx)
{
	const struct shm_ll_line *l = &c->ll_in[idx % c->ll_lines];

	return __atomic_load_n(&l->flag, __ATOMIC_ACQUIRE) == idx + 1 ? l : NULL;
}

/* the message expected on one path arrived on the other one: mismatched calls */
static ibc_status_t path_mismatch(struct ibc_tconn *c, struct shm_op *o, const uint8_t *desc,
				  size_t their_nbytes, int their_ll)
{
	struct ibc_msg_desc theirs;
	ibc_status_t st;

	ibc_msg_desc_unpack(desc, &theirs);
	theirs.flags = (uint8_t)(theirs.flags & ~IBC_DESC_F_LL);
	if (their_nbytes == o->nbytes && theirs.seq == o->want.seq && theirs.coll == o->want.coll &&
	    theirs.step == o->want.step && theirs.count == o->want.count &&
	    theirs.flags == (o->want.flags & ~IBC_DESC_F_LL)) {
		/* the same message: only the protocol differs */
		st = ibc_tenv_fail(c->ctx->env, IBC_ERR_INVALID_USAGE, c->peer,
				   "mismatched protocols: the peer sent message %u (%zu bytes) by the %s path, this rank expects the %s path (ranks chose different protocols)",
				   c->recv_msgno, their_nbytes, their_ll ? "LL" : "slot",
				   their_ll ? "slot" : "LL");
		return conn_fail(c, st);
	}
	ibc_msg_desc_unpack(desc, &theirs);
	st = ibc_msg_desc_check(c->ctx->env, c->peer, &o->want, o->nbytes, &theirs, their_nbytes);
	if (st == IBC_OK)
		st = ibc_tenv_fail(c->ctx->env, IBC_ERR_INTERNAL, c->peer,
				   "message %u arrived by the %s path, this rank expected the %s path",
				   c->recv_msgno, their_ll ? "LL" : "slot", their_ll ? "slot" : "LL");
	return conn_fail(c, st);
}

/* nothing for @o on its own path: is the message this rank expects on the other one? */
static ibc_status_t check_other_path(struct ibc_tconn *c, struct shm_op *o)
{
	if (o->ll) {
		uint64_t tail = c->in->tail;

		if (tail < __atomic_load_n(&c->in->head, __ATOMIC_ACQUIRE)) {
			const struct shm_slot_hdr *h = &c->in_hdr[tail % c->nslots];

			if ((h->flags & SLOT_FIRST) && h->msgno == c->recv_msgno)
				return path_mismatch(c, o, h->desc, (size_t)h->msg_nbytes, 0);
		}
	} else if (c->ll_lines) {
		const struct shm_ll_line *l = ll_ready(c, c->ll_rtail);
		uint32_t n32;
		uint32_t msgno;

		if (l) {
			memcpy(&n32, l->data + 32, 4);
			memcpy(&msgno, l->data + 36, 4);
			if (msgno == c->recv_msgno)
				return path_mismatch(c, o, l->data, n32, 1);
		}
	}
	return IBC_OK;
}

/* copy out what has arrived of the LL message @o (head of recvq) */
static ibc_status_t ll_progress_recv(struct ibc_tconn *c, struct shm_op *o, int *moved_p)
{
	const struct shm_ll_line *l;
	size_t len;

	if (!o->started) {
		struct ibc_msg_desc theirs;
		uint32_t n32;
		uint32_t msgno;
		ibc_status_t st;

		l = ll_ready(c, c->ll_rtail);
		if (!l)
			return check_other_path(c, o);
		memcpy(&n32, l->data + 32, 4);
		memcpy(&msgno, l->data + 36, 4);
		if (msgno != c->recv_msgno) /* a later message: ours went by the slot path */
			return check_other_path(c, o);
		ibc_msg_desc_unpack(l->data, &theirs);
		st = ibc_msg_desc_check(c->ctx->env, c->peer, &o->want, o->nbytes, &theirs, n32);
		if (st != IBC_OK)
			return conn_fail(c, st);
		len = IBC_MIN(o->nbytes, (size_t)LL_FIRST_DATA);
		if (len)
			memcpy(o->buf, l->data + 40, len);
		o->off = len;
		o->started = 1;
		c->ll_rtail++;
		*moved_p = 1;
	}
	while (o->off < o->nbytes && (l = ll_ready(c, c->ll_rtail))) {
		len = IBC_MIN(o->nbytes - o->off, (size_t)LL_LINE_DATA);
		memcpy(o->buf + o->off, l->data, len);
		o->off += len;
		c->ll_rtail++;
		*moved_p = 1;
	}
	if (o->off == o->nbytes)
		__atomic_store_n(&c->ll_in_ctl->tail, c->ll_rtail, __ATOMIC_RELEASE);
	return IBC_OK;
}

static ibc_status_t shm_isend(struct ibc_tconn *c, const void *buf, size_t nbytes,
			      const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	int ll = ll_eligible(c, desc, nbytes);
	struct shm_op *o;

	if (c->broken)
		return IBC_ERR_REMOTE;
	if (ll && !c->sendq.head) {
		uint8_t d[IBC_MSG_DESC_WIRE_BYTES];

		/* nothing queued ahead: write it now, the request completes at once */
		ibc_msg_desc_pack(desc, d);
		if (ll_write(c, buf, nbytes, d, c->send_msgno)) {
			c->send_msgno++;
			ring_bell(c);
			ibc_treq_complete(req, IBC_OK);
			return IBC_OK;
		}
	}
	o = op_get(c);
	if (!o)
		return ibc_tenv_fail(c->ctx->env, IBC_ERR_NO_MEMORY, c->peer, "out of memory");
	o->req = req;
	o->buf = (char *)buf;
	o->nbytes = nbytes;
	o->ll = ll;
	o->msgno = c->send_msgno++;
	o->rdv = !ll && c->peer_can_read_me && nbytes >= c->cma_min && nbytes > 0;
	ibc_msg_desc_pack(desc, o->desc);
	q_push(&c->sendq, o);
	return IBC_OK;
}

static ibc_status_t shm_irecv(struct ibc_tconn *c, void *buf, size_t nbytes,
			      const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	struct shm_op *o;

	if (c->broken)
		return IBC_ERR_REMOTE;
	o = op_get(c);
	if (!o)
		return ibc_tenv_fail(c->ctx->env, IBC_ERR_NO_MEMORY, c->peer, "out of memory");
	o->req = req;
	o->buf = buf;
	o->nbytes = nbytes;
	o->want = *desc;
	o->ll = ll_eligible(c, desc, nbytes);
	q_push(&c->recvq, o);
	return IBC_OK;
}

/* after moving a head or tail: wake the peer if it sleeps (Dekker with the waiter) */
static void ring_bell(struct ibc_tconn *c)
{
	uint32_t *flag = &c->sh->sleeping[1 - c->side];

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(flag, __ATOMIC_RELAXED) && __atomic_exchange_n(flag, 0, __ATOMIC_ACQ_REL)) {
		char b = 1;

		if (send(c->bell_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			/* a full doorbell already wakes the peer; EOF shows up on its side */
		}
	}
}

static ibc_status_t conn_fail(struct ibc_tconn *c, ibc_status_t st)
{
	while (c->sendq.head) {
		ibc_treq_complete(c->sendq.head->req, st);
		q_pop_free(c, &c->sendq);
	}
	while (c->recvq.head) {
		ibc_treq_complete(c->recvq.head->req, st);
		q_pop_free(c, &c->recvq);
	}
	c->broken = 1;
	return st;
}

static int progress_send(struct ibc_tconn *c)
{
	int moved = 0;

	while (c->sendq.head) {
		struct shm_op *o = c->sendq.head;
		uint64_t head = c->out->head; /* we are the only writer */
		uint64_t tail = __atomic_load_n(&c->out->tail, __ATOMIC_ACQUIRE);

		c->seen_out_tail = tail;

		if (o->ll) {
			if (!ll_write(c, o->buf, o->nbytes, o->desc, o->msgno))
				return moved;
			moved = 1;
			ring_bell(c);
			ibc_treq_complete(o->req, IBC_OK);
			q_pop_free(c, &c->sendq);
			continue;
		}
		if (o->rdv && o->started) {
			if (tail <= o->rdv_slot)
				return moved;
			ibc_treq_complete(o->req, IBC_OK);
			q_pop_free(c, &c->sendq);
			continue;
		}
		while (head - tail < c->nslots && (!o->started || o->off < o->nbytes)) {
			uint32_t s = (uint32_t)(head % c->nslots);
			struct shm_slot_hdr *h = &c->out_hdr[s];
			size_t len = o->rdv ? 0 : IBC_MIN(c->slot_bytes, o->nbytes - o->off);

			if (len)
				memcpy(c->out_data + (size_t)s * c->slot_bytes, o->buf + o->off, len);
			h->nbytes = len;
			h->msg_nbytes = o->nbytes;
			h->rdv_addr = o->rdv ? (uint64_t)(uintptr_t)o->buf : 0;
			h->flags = (o->started ? 0 : SLOT_FIRST) | (o->rdv ? SLOT_RDV : 0);
			if (!o->started) {
				memcpy(h->desc, o->desc, sizeof(h->desc));
				h->msgno = o->msgno;
			}
			o->started = 1;
			o->off += len;
			if (o->rdv)
				o->rdv_slot = head;
			head++;
			__atomic_store_n(&c->out->head, head, __ATOMIC_RELEASE);
			moved = 1;
			if (o->rdv)
				break;
		}
		if (moved)
			ring_bell(c);
		if (o->rdv || o->off < o->nbytes || !o->started)
			return moved;
		ibc_treq_complete(o->req, IBC_OK);
		q_pop_free(c, &c->sendq);
	}
	return moved;
}

static ibc_status_t cma_read(struct ibc_tconn *c, char *dst, uint64_t src, size_t nbytes)
{
	size_t done = 0;

	while (done < nbytes) {
		struct iovec l = { .iov_base = dst + done, .iov_len = nbytes - done };
		struct iovec r = { .iov_base = (void *)(uintptr_t)(src + done), .iov_len = nbytes - done };
		ssize_t n = process_vm_readv(c->peer_pid, &l, 1, &r, 1, 0);

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return ibc_tenv_fail(c->ctx->env, n < 0 && errno == ESRCH ? IBC_ERR_REMOTE : IBC_ERR_SYSTEM,
					     c->peer, "process_vm_readv of %zu bytes failed: %s",
					     nbytes - done, n < 0 ? strerror(errno) : "no progress");
		}
		done += (size_t)n;
	}
	return IBC_OK;
}

static ibc_status_t progress_recv(struct ibc_tconn *c, int *moved_p)
{
	while (c->recvq.head) {
		struct shm_op *o = c->recvq.head;
		uint64_t tail = c->in->tail; /* we are the only writer */
		uint64_t head;

		if (o->ll) {
			IBC_CHECK(ll_progress_recv(c, o, moved_p));
			if (*moved_p)
				ring_bell(c);
			if (!o->started || o->off < o->nbytes)
				return IBC_OK;
			c->recv_msgno++;
			ibc_treq_complete(o->req, IBC_OK);
			q_pop_free(c, &c->recvq);
			continue;
		}
		head = __atomic_load_n(&c->in->head, __ATOMIC_ACQUIRE);
		if (!o->started && tail == head)
			return check_other_path(c, o);
		while (tail < head && (!o->started || o->off < o->nbytes)) {
			uint32_t s = (uint32_t)(tail % c->nslots);
			struct shm_slot_hdr *h = &c->in_hdr[s];

			if (!o->started) {
				struct ibc_msg_desc theirs;
				ibc_status_t st;

				ibc_msg_desc_unpack(h->desc, &theirs);
				if (!(h->flags & SLOT_FIRST)) {
					st = ibc_tenv_fail(c->ctx->env, IBC_ERR_INTERNAL, c->peer,
							   "shm ring out of step (slot %u not a message start)", s);
					return conn_fail(c, st);
				}
				if (h->msgno != c->recv_msgno) /* ours went by the LL path */
					return check_other_path(c, o);
				st = ibc_msg_desc_check(c->ctx->env, c->peer, &o->want, o->nbytes,
							&theirs, (size_t)h->msg_nbytes);
				if (st != IBC_OK)
					return conn_fail(c, st);
				o->started = 1;
			}
			if (h->flags & SLOT_RDV) {
				ibc_status_t st = cma_read(c, o->buf, h->rdv_addr, o->nbytes);

				if (st != IBC_OK)
					return conn_fail(c, st);
				o->off = o->nbytes;
			} else {
				if (h->nbytes > o->nbytes - o->off) {
					ibc_status_t st = ibc_tenv_fail(c->ctx->env, IBC_ERR_INTERNAL, c->peer,
									"shm slot overflows the message");

					return conn_fail(c, st);
				}
				if (h->nbytes)
					memcpy(o->buf + o->off, c->in_data + (size_t)s * c->slot_bytes,
					       h->nbytes);
				o->off += h->nbytes;
			}
			tail++;
			__atomic_store_n(&c->in->tail, tail, __ATOMIC_RELEASE);
			*moved_p = 1;
		}
		if (*moved_p)
			ring_bell(c);
		if (!o->started || o->off < o->nbytes)
			return IBC_OK;
		c->recv_msgno++;
		ibc_treq_complete(o->req, IBC_OK);
		q_pop_free(c, &c->recvq);
	}
	return IBC_OK;
}

/*
 * The doorbell: drain wake-up bytes. EOF means the peer closed its end
 * (destroyed the communicator, exited or crashed). That is an error only
 * for what can no longer complete: the messages it published before leaving
 * are still in our mapping of the ring and are delivered first.
 */
static void bell_drain(struct ibc_tconn *c)
{
	char buf[64];

	while (!c->peer_gone) {
		ssize_t n = recv(c->bell_fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0)
			continue;
		/* EOF, or a reset (it died with our wake-up byte unread) */
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			c->peer_gone = 1;
		return;
	}
}

/* after progress: fail what a departed peer can no longer complete */
static ibc_status_t check_peer_gone(struct ibc_tconn *c)
{
	ibc_status_t st;

	if (!c->peer_gone || c->broken)
		return IBC_OK;
	if (!c->sendq.head &&
	    (!c->recvq.head || __atomic_load_n(&c->in->head, __ATOMIC_ACQUIRE) != c->in->tail))
		return IBC_OK;
	st = ibc_tenv_fail(c->ctx->env, IBC_ERR_REMOTE, c->peer,
			   "peer closed its shared-memory doorbell with %s pending: process exited, crashed or destroyed the communicator",
			   c->sendq.head ? "a send" : "a receive");
	return conn_fail(c, st);
}

static ibc_status_t shm_progress(void *vctx)
{
	struct shm_ctx *ctx = vctx;
	struct ibc_tconn *c;

	for (c = ctx->conns; c; c = c->next) {
		int moved = 0;

		if (c->broken || (!c->sendq.head && !c->recvq.head))
			continue;
		moved |= progress_send(c);
		IBC_CHECK(progress_recv(c, &moved));
		/* a receive may have freed credits for a blocked send */
		if (moved && c->sendq.head)
			progress_send(c);
		IBC_CHECK(check_peer_gone(c));
	}
	return IBC_OK;
}

static void shm_wait(void *vctx, int timeout_us)
{
	struct shm_ctx *ctx = vctx;
	struct ibc_tconn *c;
	struct timespec ts = { .tv_sec = timeout_us / 1000000,
			       .tv_nsec = (long)(timeout_us % 1000000) * 1000 };
	int n = 0;
	int ready = 0;

	for (c = ctx->conns; c; c = c->next)
		n++;
	if (n > ctx->npfds) {
		struct pollfd *np = realloc(ctx->pfds, sizeof(*np) * (size_t)n);

		if (!np) {
			nanosleep(&ts, NULL);
			return;
		}
		ctx->pfds = np;
		ctx->npfds = n;
	}
	n = 0;
	for (c = ctx->conns; c; c = c->next) {
		if (c->broken || (!c->sendq.head && !c->recvq.head))
			continue;
		if (c->peer_gone) {
			/* its doorbell stays readable (EOF): no poll, let progress decide */
			ready = 1;
			continue;
		}
		__atomic_store_n(&c->sh->sleeping[c->side], 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		/* re-check after raising the flag: progress() consumed every slot and
		 * credit it saw, so any change since means there is work: no sleep */
		if (c->recvq.head && __atomic_load_n(&c->in->head, __ATOMIC_ACQUIRE) != c->in->tail)
			ready = 1;
		if (c->recvq.head && c->ll_lines && ll_ready(c, c->ll_rtail))
			ready = 1;
		if (c->sendq.head &&
		    __atomic_load_n(&c->out->tail, __ATOMIC_ACQUIRE) != c->seen_out_tail)
			ready = 1;
		if (c->sendq.head && c->ll_lines &&
		    __atomic_load_n(&c->ll_out_ctl->tail, __ATOMIC_ACQUIRE) != c->ll_tail_seen)
			ready = 1;
		ctx->pfds[n].fd = c->bell_fd;
		ctx->pfds[n].events = POLLIN;
		n++;
	}
	if (n && !ready)
		ppoll(ctx->pfds, (nfds_t)n, &ts, NULL);
	else if (!n && !ready)
		nanosleep(&ts, NULL);
	for (c = ctx->conns; c; c = c->next) {
		if (c->broken || (!c->sendq.head && !c->recvq.head))
			continue;
		__atomic_store_n(&c->sh->sleeping[c->side], 0, __ATOMIC_RELAXED);
		bell_drain(c);
	}
}

const struct ibc_transport_ops ibc_shm_ops = {
	.name = "shm",
	.id = IBC_TRANSPORT_SHM,
	.tclass = IBC_TCLASS_SHM,
	.caps = IBC_TCAP_HOST | IBC_TCAP_LL | IBC_TCAP_LOCAL,
	.init = shm_init,
	.fini = shm_fini,
	.device = ibc_transport_no_device,
	.connect = shm_connect,
	.disconnect = shm_disconnect,
	.isend = shm_isend,
	.irecv = shm_irecv,
	.progress = shm_progress,
	.wait = shm_wait,
};
