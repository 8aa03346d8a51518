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
#include "transport/shm/shm.h"
#include "transport/shm/shm_internal.h"

static ibc_status_t shm_init(const struct ibc_tenv *env, void **ctx_p)
{
	struct shm_ctx *ctx = ibc_calloc(1, sizeof(*ctx), "shm transport");

	if (!ctx)
		return IBC_ERR_NO_MEMORY;
	ctx->env = env;
	ctx->probe_word = SHM_PROBE_MAGIC;
	ibc_shm_sweep_stale();
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
		char what[48];
		char why[160];
		uint32_t fitted;
		uint32_t want;

		IBC_CHECK(conn_alloc(ctx, peer, &c));
		pd->c = c;
		c->nslots = (uint32_t)ibc_param_shm_nslots();
		c->slot_bytes = (size_t)ibc_param_shm_slot_bytes();
		c->ll_max = (size_t)ibc_param_ll_max_bytes();
		c->ll_lines = c->ll_max ? LL_RING_MSGS * shm_ll_nlines(c->ll_max) : 0;
		snprintf(what, sizeof(what), "%02x%02x%02x%02x-%d-%d", id[0], id[1], id[2], id[3],
			 env->rank, peer);
		ibc_shm_seg_name(pd->name, sizeof(pd->name), what);
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
			    (c->ll_lines && c->ll_lines < shm_ll_nlines(c->ll_max))) {
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
	.isend = ibc_shm_isend,
	.irecv = ibc_shm_irecv,
	.progress = ibc_shm_progress,
	.wait = ibc_shm_wait,
	.peek = ibc_shm_peek,
};
