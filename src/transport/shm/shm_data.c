/* SPDX-License-Identifier: MIT */
/*
 * shm_data.c - the shm transport's data path (shm_ops.c has the design):
 * the slot rings and the cross-memory-attach rendezvous of large
 * messages, the LL rings of small ones, the doorbell that wakes a sleeping
 * peer, and the detection of a peer that left.
 */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/util.h"
#include "transport/shm/shm.h"
#include "transport/shm/shm_internal.h"

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
	uint32_t nl = shm_ll_nlines(nbytes);
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

/* the first slot of message recv_msgno at the slot ring's tail, or NULL */
static const struct shm_slot_hdr *slot_next_msg(const struct ibc_tconn *c)
{
	uint64_t tail = c->in->tail;
	const struct shm_slot_hdr *h;

	if (tail >= __atomic_load_n(&c->in->head, __ATOMIC_ACQUIRE))
		return NULL;
	h = &c->in_hdr[tail % c->nslots];
	return (h->flags & SLOT_FIRST) && h->msgno == c->recv_msgno ? h : NULL;
}

/* the first line of message recv_msgno at the LL ring's tail, or NULL; @n32_p its bytes */
static const struct shm_ll_line *ll_next_msg(const struct ibc_tconn *c, uint32_t *n32_p)
{
	const struct shm_ll_line *l = c->ll_lines ? ll_ready(c, c->ll_rtail) : NULL;
	uint32_t msgno;

	if (!l)
		return NULL;
	memcpy(n32_p, l->data + 32, 4);
	memcpy(&msgno, l->data + 36, 4);
	return msgno == c->recv_msgno ? l : NULL;
}

/* nothing for @o on its own path: is the message this rank expects on the other one? */
static ibc_status_t check_other_path(struct ibc_tconn *c, struct shm_op *o)
{
	const struct shm_slot_hdr *h;
	const struct shm_ll_line *l;
	uint32_t n32;

	if (o->ll && (h = slot_next_msg(c)))
		return path_mismatch(c, o, h->desc, (size_t)h->msg_nbytes, 0);
	if (!o->ll && (l = ll_next_msg(c, &n32)))
		return path_mismatch(c, o, l->data, n32, 1);
	return IBC_OK;
}

/*
 * ibc_shm_peek() - the next message in (slot ring or LL ring, whichever
 * holds message number recv_msgno) when no receive is posted; see
 * struct ibc_transport_ops.
 */
int ibc_shm_peek(struct ibc_tconn *c, struct ibc_msg_desc *desc, size_t *nbytes)
{
	const struct shm_slot_hdr *h;
	const struct shm_ll_line *l;
	uint32_t n32;

	if (c->broken || c->recvq.head)
		return 0;
	if ((h = slot_next_msg(c))) {
		ibc_msg_desc_unpack(h->desc, desc);
		*nbytes = (size_t)h->msg_nbytes;
		return 1;
	}
	if ((l = ll_next_msg(c, &n32))) {
		ibc_msg_desc_unpack(l->data, desc);
		*nbytes = n32;
		return 1;
	}
	return 0;
}

/* copy out what has arrived of the LL message @o (head of recvq) */
static ibc_status_t ll_progress_recv(struct ibc_tconn *c, struct shm_op *o, int *moved_p)
{
	const struct shm_ll_line *l;
	size_t len;

	if (!o->started) {
		struct ibc_msg_desc theirs;
		uint32_t n32;
		ibc_status_t st;

		/* none yet, or a later message: ours may have gone by the slot path */
		l = ll_next_msg(c, &n32);
		if (!l)
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

ibc_status_t ibc_shm_isend(struct ibc_tconn *c, const void *buf, size_t nbytes,
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

ibc_status_t ibc_shm_irecv(struct ibc_tconn *c, void *buf, size_t nbytes,
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

ibc_status_t ibc_shm_progress(void *vctx)
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

void ibc_shm_wait(void *vctx, int timeout_us)
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
