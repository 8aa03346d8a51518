/* SPDX-License-Identifier: MIT */
/*
 * sock_ops.c - the tcp transport: IBC_SOCKET_NSOCKS TCP connections per peer
 * pair, nonblocking I/O from and into the user's buffers (no copies), large
 * messages striped over all sockets of the pair.
 *
 * Wire format, per socket: a sequence of parts, each a 48-byte header
 * { struct ibc_msg_desc (32 B), message nbytes (u64), part nbytes (u64) }
 * followed by the part's bytes. A message of nbytes >= SOCK_STRIPE_MIN is
 * cut into nsocks contiguous parts, part k on socket k; smaller messages
 * travel whole on socket 0. Both ends derive the same cut from nbytes, and
 * every header is checked against what the receiver posted, so mismatched
 * calls fail with IBC_ERR_INVALID_USAGE (socket 0 always carries part 0).
 *
 * Connection set-up (nonblocking state machine, see transport.h): the lower
 * rank sends { nsocks } out of band and opens nsocks authenticated
 * streams to the higher rank's listener (ibc_tenv_oob_connect_stream); the
 * higher rank reads nsocks, then collects the streams as they arrive.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/socket.h"
#include "base/util.h"
#include "transport/sock/sock.h"

#define SOCK_HDR_BYTES 48
#define SOCK_STRIPE_MIN (256u << 10)
#define SOCK_STAGE_BYTES 4096  /* parts read with their header by one recv() */
#define SOCK_MAX_NSOCKS 16
#define SOCK_MIN_BUF (128 << 10)
#define SOCK_TAG_NSOCKS 0       /* out-of-band tags: the socket count, then stream k at 1 + k */
#define SOCK_TAG_STREAM 1

struct sock_part {
	struct sock_part *next;
	struct ibc_treq *req;
	char *buf;                      /* part payload in the user's buffer */
	size_t len;                     /* payload bytes */
	size_t done;                    /* payload bytes moved */
	size_t hdr_done;                /* header bytes moved */
	uint8_t hdr[SOCK_HDR_BYTES];    /* send: to write; recv: read here */
	struct ibc_msg_desc desc;       /* recv: what we expect */
	size_t msg_nbytes;              /* recv: the message's total size */
};

struct sock_queue {
	struct sock_part *head;
	struct sock_part *tail;
};

struct ibc_tconn {
	struct sock_ctx *ctx;
	int peer;
	int nsocks;
	int fds[SOCK_MAX_NSOCKS];
	struct sock_queue sq[SOCK_MAX_NSOCKS];  /* parts to send, per socket */
	struct sock_queue rq[SOCK_MAX_NSOCKS];  /* parts to receive, per socket */
	int npending;                           /* parts queued in sq + rq */
	int broken;
	struct sock_part *free_parts;
	struct ibc_tconn *next_active;          /* ctx->conns list */
};

struct sock_pend {                              /* connection set-up of one peer */
	int state;
	int nsocks;
	int nfds;
	int fds[SOCK_MAX_NSOCKS];
};

struct sock_ctx {
	const struct ibc_tenv *env;
	struct ibc_tconn *conns;                /* every connection */
	struct sock_pend *pend;                 /* [nranks] */
	int bufsz;
	struct pollfd *pfds;
	int npfds;
};

static ibc_status_t sock_init(const struct ibc_tenv *env, void **ctx_p)
{
	struct sock_ctx *ctx = ibc_calloc(1, sizeof(*ctx), "tcp transport");

	if (!ctx)
		return IBC_ERR_NO_MEMORY;
	ctx->env = env;
	ctx->bufsz = (int)ibc_param_socket_buf_bytes();
	if (ctx->bufsz > 0 && ctx->bufsz < SOCK_MIN_BUF) {
		/*
		 * A window smaller than a segment or two makes every refill wait for
		 * a delayed ACK (tens of ms): a 1 MiB all-reduce then takes minutes.
		 */
		if (env->rank == 0)
			IBC_LOG_WARN(SOCK, "IBC_SOCKET_BUF_BYTES=%d is below %d bytes, where TCP stalls on delayed acknowledgements; using %d",
				     ctx->bufsz, SOCK_MIN_BUF, SOCK_MIN_BUF);
		ctx->bufsz = SOCK_MIN_BUF;
	}
	ctx->pend = ibc_calloc((size_t)env->nranks, sizeof(*ctx->pend), "tcp set-up state");
	if (!ctx->pend) {
		ibc_free(ctx);
		return IBC_ERR_NO_MEMORY;
	}
	*ctx_p = ctx;
	return IBC_OK;
}

static void sock_fini(void *vctx)
{
	struct sock_ctx *ctx = vctx;
	int i;
	int k;

	if (!ctx)
		return;
	for (i = 0; i < ctx->env->nranks; i++)
		for (k = 0; k < ctx->pend[i].nfds; k++)
			ibc_sock_close(ctx->pend[i].fds[k]);
	ibc_free(ctx->pend);
	free(ctx->pfds);
	ibc_free(ctx);
}

static void sock_tune(struct sock_ctx *ctx, int fd)
{
	ibc_sock_set_nonblock(fd, 1);
	ibc_sock_set_nodelay(fd);
	ibc_sock_set_bufs(fd, ctx->bufsz);
}

static ibc_status_t sock_conn_create(struct sock_ctx *ctx, int peer, struct sock_pend *pd,
				     struct ibc_tconn **conn_p)
{
	struct ibc_tconn *c = ibc_calloc(1, sizeof(*c), "tcp connection");
	int k;

	if (!c)
		return IBC_ERR_NO_MEMORY;
	c->ctx = ctx;
	c->peer = peer;
	c->nsocks = pd->nsocks;
	for (k = 0; k < pd->nsocks; k++) {
		c->fds[k] = pd->fds[k];
		sock_tune(ctx, c->fds[k]);
	}
	pd->nfds = 0;
	c->next_active = ctx->conns;
	ctx->conns = c;
	*conn_p = c;
	return IBC_OK;
}

static ibc_status_t sock_connect(void *vctx, int peer, struct ibc_tconn **conn_p)
{
	struct sock_ctx *ctx = vctx;
	const struct ibc_tenv *env = ctx->env;
	struct sock_pend *pd = &ctx->pend[peer];
	uint32_t n32;
	int got = 0;

	if (env->rank < peer) {
		/* active side: announce the socket count, then open the streams */
		pd->nsocks = (int)ibc_param_socket_nsocks();
		n32 = (uint32_t)pd->nsocks;
		IBC_CHECK(ibc_tenv_oob_send(env, peer, SOCK_TAG_NSOCKS, &n32, sizeof(n32)));
		while (pd->nfds < pd->nsocks) {
			IBC_CHECK(ibc_tenv_oob_connect_stream(env, peer,
							      SOCK_TAG_STREAM + (uint32_t)pd->nfds,
							       &pd->fds[pd->nfds]));
			pd->nfds++;
		}
		return sock_conn_create(ctx, peer, pd, conn_p);
	}
	/* passive side */
	if (pd->state == 0) {
		IBC_CHECK(ibc_tenv_oob_try_recv(env, peer, SOCK_TAG_NSOCKS, &n32, sizeof(n32),
						 &got));
		if (!got)
			return IBC_INPROGRESS;
		if (n32 < 1 || n32 > SOCK_MAX_NSOCKS) {
			IBC_LOG_ERROR(SOCK, "rank %d announced %u sockets (1..%d allowed)", peer, n32,
				      SOCK_MAX_NSOCKS);
			return IBC_ERR_REMOTE;
		}
		pd->nsocks = (int)n32;
		pd->state = 1;
	}
	while (pd->nfds < pd->nsocks) {
		int fd = -1;

		IBC_CHECK(ibc_tenv_oob_try_accept_stream(env, peer,
							 SOCK_TAG_STREAM + (uint32_t)pd->nfds,
							  &fd));
		if (fd < 0)
			return IBC_INPROGRESS;
		pd->fds[pd->nfds++] = fd;
	}
	pd->state = 0;
	return sock_conn_create(ctx, peer, pd, conn_p);
}

static void sock_disconnect(struct ibc_tconn *c)
{
	struct sock_ctx *ctx = c->ctx;
	struct ibc_tconn **pp;
	struct sock_part *p;
	int k;

	for (pp = &ctx->conns; *pp; pp = &(*pp)->next_active) {
		if (*pp == c) {
			*pp = c->next_active;
			break;
		}
	}
	for (k = 0; k < c->nsocks; k++) {
		ibc_sock_close(c->fds[k]);
		while ((p = c->sq[k].head)) {
			c->sq[k].head = p->next;
			free(p);
		}
		while ((p = c->rq[k].head)) {
			c->rq[k].head = p->next;
			free(p);
		}
	}
	while ((p = c->free_parts)) {
		c->free_parts = p->next;
		free(p);
	}
	ibc_free(c);
}

static struct sock_part *part_get(struct ibc_tconn *c)
{
	struct sock_part *p = c->free_parts;

	if (p) {
		c->free_parts = p->next;
		memset(p, 0, sizeof(*p));
		return p;
	}
	return ibc_calloc(1, sizeof(*p), "tcp message part");
}

static void part_put(struct ibc_tconn *c, struct sock_part *p)
{
	p->next = c->free_parts;
	c->free_parts = p;
}

static void queue_push(struct sock_queue *q, struct sock_part *p)
{
	p->next = NULL;
	if (q->tail)
		q->tail->next = p;
	else
		q->head = p;
	q->tail = p;
}

static struct sock_part *queue_pop(struct sock_queue *q)
{
	struct sock_part *p = q->head;

	q->head = p->next;
	if (!q->head)
		q->tail = NULL;
	return p;
}

static int nparts_of(const struct ibc_tconn *c, size_t nbytes)
{
	return nbytes >= SOCK_STRIPE_MIN ? c->nsocks : 1;
}

static void part_range(size_t nbytes, int np, int k, size_t *off_p, size_t *len_p)
{
	size_t base = nbytes / (size_t)np;
	size_t rem = nbytes % (size_t)np;
	size_t k_ = (size_t)k;

	*off_p = k_ * base + IBC_MIN(k_, rem);
	*len_p = base + (k_ < rem ? 1 : 0);
}

static ibc_status_t sock_post(struct ibc_tconn *c, char *buf, size_t nbytes,
			      const struct ibc_msg_desc *desc, struct ibc_treq *req, int is_send)
{
	int np = nparts_of(c, nbytes);
	int k;

	if (c->broken)
		return ibc_tenv_status(c->ctx->env) != IBC_OK ? ibc_tenv_status(c->ctx->env)
							      : IBC_ERR_REMOTE;
	req->priv[0] = (uint64_t)np;    /* parts left */
	for (k = 0; k < np; k++) {
		struct sock_part *p = part_get(c);
		size_t off;
		size_t len;

		if (!p)
			return ibc_tenv_fail(c->ctx->env, IBC_ERR_NO_MEMORY, c->peer,
					     "out of memory posting a tcp message");
		part_range(nbytes, np, k, &off, &len);
		p->req = req;
		p->buf = buf + off;
		p->len = len;
		if (is_send) {
			uint64_t n64 = nbytes;
			uint64_t l64 = len;

			ibc_msg_desc_pack(desc, p->hdr);
			memcpy(p->hdr + 32, &n64, 8);
			memcpy(p->hdr + 40, &l64, 8);
			queue_push(&c->sq[k], p);
		} else {
			p->desc = *desc;
			p->msg_nbytes = nbytes;
			queue_push(&c->rq[k], p);
		}
		c->npending++;
	}
	return IBC_OK;
}

static ibc_status_t sock_isend(struct ibc_tconn *c, const void *buf, size_t nbytes,
			       const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	return sock_post(c, (char *)buf, nbytes, desc, req, 1);
}

static ibc_status_t sock_irecv(struct ibc_tconn *c, void *buf, size_t nbytes,
			       const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	return sock_post(c, buf, nbytes, desc, req, 0);
}

static void part_done(struct ibc_tconn *c, struct sock_queue *q)
{
	struct sock_part *p = queue_pop(q);

	c->npending--;
	if (--p->req->priv[0] == 0)
		ibc_treq_complete(p->req, IBC_OK);
	part_put(c, p);
}

/* the connection failed: fail everything queued, report once */
static ibc_status_t conn_broken(struct ibc_tconn *c, int k, int err, const char *what)
{
	const struct ibc_tenv *env = c->ctx->env;
	ibc_status_t st;
	int i;

	c->broken = 1;
	if (err == ECONNRESET || err == EPIPE)
		st = ibc_tenv_fail(env, IBC_ERR_REMOTE, c->peer,
				   "%s on socket %d: %s: rank %d closed the connection (its process exited or crashed, or it destroyed or aborted the communicator)",
				   what, k, strerror(err), c->peer);
	else if (err)
		st = ibc_tenv_fail(env, IBC_ERR_REMOTE, c->peer, "%s on socket %d: %s", what, k,
				   strerror(err));
	else
		st = ibc_tenv_fail(env, IBC_ERR_REMOTE, c->peer,
				   "connection closed by the peer (socket %d): process exited or crashed, or it destroyed or aborted the communicator",
				   k);
	for (i = 0; i < c->nsocks; i++) {
		while (c->sq[i].head) {
			ibc_treq_complete(c->sq[i].head->req, st);
			part_put(c, queue_pop(&c->sq[i]));
		}
		while (c->rq[i].head) {
			ibc_treq_complete(c->rq[i].head->req, st);
			part_put(c, queue_pop(&c->rq[i]));
		}
	}
	c->npending = 0;
	return st;
}

static ibc_status_t sock_progress_send(struct ibc_tconn *c, int k)
{
	struct sock_queue *q = &c->sq[k];

	while (q->head) {
		struct sock_part *p = q->head;
		struct iovec iov[2];
		int niov = 0;
		ssize_t n;

		if (p->hdr_done < SOCK_HDR_BYTES) {
			iov[niov].iov_base = p->hdr + p->hdr_done;
			iov[niov++].iov_len = SOCK_HDR_BYTES - p->hdr_done;
		}
		if (p->done < p->len) {
			iov[niov].iov_base = p->buf + p->done;
			iov[niov++].iov_len = p->len - p->done;
		}
		if (niov == 0) {
			part_done(c, q);
			continue;
		}
		if (ibc_fault_hit(IBC_FAULT_SOCK, "tcp send")) {
			n = -1;
			errno = ECONNRESET;
		} else {
			struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)niov };

			n = sendmsg(c->fds[k], &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return IBC_OK;
			return conn_broken(c, k, errno, "send failed");
		}
		if (p->hdr_done < SOCK_HDR_BYTES) {
			size_t h = IBC_MIN((size_t)n, SOCK_HDR_BYTES - p->hdr_done);

			p->hdr_done += h;
			n -= (ssize_t)h;
		}
		p->done += (size_t)n;
		if (p->hdr_done == SOCK_HDR_BYTES && p->done == p->len)
			part_done(c, q);
		else
			return IBC_OK;
	}
	return IBC_OK;
}

static ibc_status_t sock_progress_recv(struct ibc_tconn *c, int k)
{
	struct sock_queue *q = &c->rq[k];

	while (q->head) {
		struct sock_part *p = q->head;
		ssize_t n;

		if (p->hdr_done < SOCK_HDR_BYTES) {
			/*
			 * The header and the payload in one call, so a small message
			 * costs the receiver one system call as it costs the sender:
			 * a part of up to SOCK_STAGE_BYTES into a staging buffer by
			 * recv() (a waiting rank calls it in a loop, and an empty
			 * recvmsg() costs 0.45 us here against recv()'s 0.33), a
			 * larger one by recvmsg() straight into the user's buffer.
			 * A staged payload reaches the user's buffer only after its
			 * header matched; by recvmsg() a mismatched message's bytes
			 * may land there, and the connection is broken then anyway.
			 */
			uint8_t stage[SOCK_HDR_BYTES + SOCK_STAGE_BYTES];
			int staged = p->hdr_done == 0 && p->len <= SOCK_STAGE_BYTES;
			struct iovec iov[2] = {
				{ p->hdr + p->hdr_done, SOCK_HDR_BYTES - p->hdr_done },
				{ p->buf + p->done, p->len - p->done },
			};
			struct msghdr mh = { .msg_iov = iov, .msg_iovlen = p->len > p->done ? 2 : 1 };
			size_t h;

			if (ibc_fault_hit(IBC_FAULT_SOCK, "tcp recv")) {
				n = -1;
				errno = ECONNRESET;
			} else if (staged) {
				n = recv(c->fds[k], stage, SOCK_HDR_BYTES + p->len, MSG_DONTWAIT);
			} else {
				n = recvmsg(c->fds[k], &mh, MSG_DONTWAIT);
			}
			if (n == 0)
				return conn_broken(c, k, 0, NULL);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
					return IBC_OK;
				return conn_broken(c, k, errno, "recv failed");
			}
			if (staged)
				memcpy(p->hdr, stage, IBC_MIN((size_t)n, SOCK_HDR_BYTES));
			h = IBC_MIN((size_t)n, SOCK_HDR_BYTES - p->hdr_done);
			p->hdr_done += h;
			p->done += (size_t)n - h;
			if (p->hdr_done < SOCK_HDR_BYTES)
				return IBC_OK;
			{
				struct ibc_msg_desc theirs;
				uint64_t msg_nbytes;
				uint64_t part_nbytes;
				ibc_status_t st;

				ibc_msg_desc_unpack(p->hdr, &theirs);
				memcpy(&msg_nbytes, p->hdr + 32, 8);
				memcpy(&part_nbytes, p->hdr + 40, 8);
				st = ibc_msg_desc_check(c->ctx->env, c->peer, &p->desc, p->msg_nbytes,
							&theirs, msg_nbytes);
				if (st == IBC_OK && part_nbytes != p->len)
					st = ibc_tenv_fail(c->ctx->env, IBC_ERR_INVALID_USAGE, c->peer,
							   "part of %llu bytes where %zu were expected on socket %d",
							   (unsigned long long)part_nbytes, p->len, k);
				if (st != IBC_OK) {
					c->broken = 1;
					ibc_treq_complete(p->req, st);
					return st;
				}
			}
			if (staged && p->done)
				memcpy(p->buf, stage + SOCK_HDR_BYTES, p->done);
		}
		if (p->done < p->len) {
			if (ibc_fault_hit(IBC_FAULT_SOCK, "tcp recv")) {
				n = -1;
				errno = ECONNRESET;
			} else {
				n = recv(c->fds[k], p->buf + p->done, p->len - p->done, MSG_DONTWAIT);
			}
			if (n == 0)
				return conn_broken(c, k, 0, NULL);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
					return IBC_OK;
				return conn_broken(c, k, errno, "recv failed");
			}
			p->done += (size_t)n;
			if (p->done < p->len)
				return IBC_OK;
		}
		part_done(c, q);
	}
	return IBC_OK;
}

static ibc_status_t sock_progress(void *vctx)
{
	struct sock_ctx *ctx = vctx;
	struct ibc_tconn *c;

	for (c = ctx->conns; c; c = c->next_active) {
		int k;

		if (!c->npending || c->broken)
			continue;
		for (k = 0; k < c->nsocks; k++) {
			IBC_CHECK(sock_progress_send(c, k));
			IBC_CHECK(sock_progress_recv(c, k));
		}
	}
	return IBC_OK;
}

static void sock_wait(void *vctx, int timeout_us)
{
	struct sock_ctx *ctx = vctx;
	struct ibc_tconn *c;
	struct timespec ts = { .tv_sec = timeout_us / 1000000,
			       .tv_nsec = (long)(timeout_us % 1000000) * 1000 };
	int n = 0;

	for (c = ctx->conns; c; c = c->next_active)
		if (c->npending && !c->broken)
			n += c->nsocks;
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
	for (c = ctx->conns; c; c = c->next_active) {
		int k;

		if (!c->npending || c->broken)
			continue;
		for (k = 0; k < c->nsocks; k++) {
			short ev = 0;

			if (c->sq[k].head)
				ev |= POLLOUT;
			if (c->rq[k].head)
				ev |= POLLIN;
			if (!ev)
				continue;
			ctx->pfds[n].fd = c->fds[k];
			ctx->pfds[n].events = ev;
			n++;
		}
	}
	if (n)
		ppoll(ctx->pfds, (nfds_t)n, &ts, NULL);
	else
		nanosleep(&ts, NULL);
}

/*
 * An arrived message that no posted receive will take: its header waits in
 * socket 0 (part 0 of every message travels there); read with MSG_PEEK, so
 * the receive that takes it later reads it again.
 */
static int sock_peek(struct ibc_tconn *c, struct ibc_msg_desc *desc, size_t *nbytes)
{
	uint8_t hdr[SOCK_HDR_BYTES];
	uint64_t msg_nbytes;
	ssize_t n;

	if (c->broken || c->nsocks < 1 || c->rq[0].head)
		return 0;
	n = recv(c->fds[0], hdr, sizeof(hdr), MSG_PEEK | MSG_DONTWAIT);
	if (n != (ssize_t)sizeof(hdr))
		return 0;
	ibc_msg_desc_unpack(hdr, desc);
	memcpy(&msg_nbytes, hdr + 32, 8);
	*nbytes = (size_t)msg_nbytes;
	return 1;
}

const struct ibc_transport_ops ibc_sock_ops = {
	.name = "tcp",
	.id = IBC_TRANSPORT_SOCK,
	.tclass = IBC_TCLASS_TCP,
	.caps = IBC_TCAP_HOST,
	.init = sock_init,
	.fini = sock_fini,
	.device = ibc_transport_no_device,
	.connect = sock_connect,
	.disconnect = sock_disconnect,
	.isend = sock_isend,
	.irecv = sock_irecv,
	.progress = sock_progress,
	.wait = sock_wait,
	.peek = sock_peek,
};
