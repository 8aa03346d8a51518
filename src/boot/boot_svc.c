/* SPDX-License-Identifier: MIT */
/*
 * boot_svc.c - the per-rank service thread: accepts and authenticates
 * incoming connections as nonblocking state machines with deadlines, queues
 * tagged messages, hands streams to transports, keeps the liveness hub
 * (heartbeats, BYE, failure notices forwarded by rank 0) and answers
 * wait-for queries.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "base/socket.h"
#include "base/status.h"
#include "base/twait.h"
#include "base/util.h"
#include "boot/boot_internal.h"
#include "boot/boot_wire.h"
#include "boot/bootstrap.h"

/* ------------------------------------------------------------------------ */
/* service thread                                                           */
/* ------------------------------------------------------------------------ */

static void boot_report(struct ibc_bootstrap *bs, ibc_status_t st, int peer, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void boot_report(struct ibc_bootstrap *bs, ibc_status_t st, int peer, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	if (peer >= 0 && peer < bs->nranks) {
		if (bs->peer_state[peer] != PEER_ALIVE)
			return;
		bs->peer_state[peer] = PEER_FAILED;
	}
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	__atomic_store_n(&bs->failed, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&bs->stop_io, 1, __ATOMIC_RELEASE);
	if (bs->on_error)
		bs->on_error(bs->on_error_arg, st, peer, why);
	pthread_mutex_lock(&bs->qlock);
	pthread_cond_broadcast(&bs->qcond);
	pthread_mutex_unlock(&bs->qlock);
}

int ibc_boot_svc_add_conn(struct ibc_bootstrap *bs, int fd, int state, int peer)
{
	struct boot_conn *c;

	if (bs->nconns == bs->cap) {
		int ncap = bs->cap ? 2 * bs->cap : 16;
		struct boot_conn *nc = realloc(bs->conns, sizeof(*nc) * (size_t)ncap);

		if (!nc)
			return -1;
		bs->conns = nc;
		bs->cap = ncap;
	}
	c = &bs->conns[bs->nconns++];
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->state = state;
	c->peer = peer;
	c->last_rx_ms = ibc_time_ms();
	ibc_boot_peer_addr_text(fd, c->addr, sizeof(c->addr));
	return 0;
}

/* remove connection @i; @keep_fd: the fd was handed on, do not close it */
void ibc_boot_svc_drop_conn(struct ibc_bootstrap *bs, int i, int keep_fd)
{
	struct boot_conn *c = &bs->conns[i];

	if (!keep_fd)
		close(c->fd);
	ibc_boot_frame_rd_reset(&c->rd);
	bs->conns[i] = bs->conns[--bs->nconns];
}

static void svc_send_notice(int fd, const struct ibc_boot_notice_msg *n, uint64_t deadline_ms)
{
	uint8_t buf[IBC_BOOT_NOTICE_HDR_BYTES + IBC_BOOT_NOTICE_TEXT_MAX];
	size_t len = ibc_boot_pack_notice(n, buf, sizeof(buf));

	if (len)
		ibc_boot_frame_write(fd, IBC_BOOT_NOTICE, buf, len, deadline_ms);
}

/*
 * Pass @n on over every watch connection but those of @n->rank (its subject)
 * and of @from (where it came from; -1: none): rank 0 to every rank in hub
 * mode; to both neighbours in a ring, where each rank passes on what is new
 * to it, so a notice floods both ways round (a dead rank breaks the ring in
 * one place only). One shared deadline bounds a slow peer.
 */
static void svc_forward_msg(struct ibc_bootstrap *bs, const struct ibc_boot_notice_msg *n, int from)
{
	uint64_t deadline = ibc_time_ms() + BOOT_NOTICE_MS;
	int i;

	for (i = 0; i < bs->nconns; i++)
		if (bs->conns[i].state == CS_HUB && bs->conns[i].peer != n->rank &&
		    bs->conns[i].peer != from)
			svc_send_notice(bs->conns[i].fd, n, deadline);
}

static void svc_forward(struct ibc_bootstrap *bs, int kind, int rank, ibc_status_t st,
			const char *text)
{
	struct ibc_boot_notice_msg n = { .kind = (uint32_t)kind, .rank = rank, .status = st };

	snprintf(n.text, sizeof(n.text), "%s", text ? text : "");
	svc_forward_msg(bs, &n, -1);
}

/* service thread: send what other threads posted (hub: rank > 0 to rank 0, rank 0 to all; ring: both neighbours) */
static void svc_flush_outbox(struct ibc_bootstrap *bs)
{
	struct ibc_boot_notice_msg out[BOOT_OUTBOX];
	int nout;
	int i;

	pthread_mutex_lock(&bs->olock);
	nout = bs->nout;
	memcpy(out, bs->outbox, sizeof(out[0]) * (size_t)nout);
	bs->nout = 0;
	pthread_mutex_unlock(&bs->olock);
	for (i = 0; i < nout; i++) {
		if (bs->ring || bs->rank == 0)
			svc_forward_msg(bs, &out[i], -1);
		else if (bs->hub_fd >= 0)
			svc_send_notice(bs->hub_fd, &out[i], ibc_time_ms() + BOOT_NOTICE_MS);
	}
	pthread_mutex_lock(&bs->olock);
	bs->nsent += (uint64_t)nout;
	pthread_cond_broadcast(&bs->ocond);
	pthread_mutex_unlock(&bs->olock);
}

/* any thread: queue a notice about this rank; returns its sequence number (0: dropped) */
static uint64_t boot_post_notice(struct ibc_bootstrap *bs, int kind, ibc_status_t st,
				 const char *text)
{
	uint64_t one = 1;
	uint64_t seq = 0;

	pthread_mutex_lock(&bs->olock);
	if (bs->nout < BOOT_OUTBOX) {
		struct ibc_boot_notice_msg *n = &bs->outbox[bs->nout++];

		memset(n, 0, sizeof(*n));
		n->kind = (uint32_t)kind;
		n->rank = bs->rank;
		n->status = st;
		snprintf(n->text, sizeof(n->text), "%s", text ? text : "");
		seq = ++bs->nposted;
	}
	pthread_mutex_unlock(&bs->olock);
	if (bs->wake_fd >= 0 && write(bs->wake_fd, &one, sizeof(one)) < 0) {
		/* the thread also wakes at its next heartbeat */
	}
	return seq;
}

/* wait (bounded) until the service thread sent notice @seq */
static void boot_wait_sent(struct ibc_bootstrap *bs, uint64_t seq, int64_t max_ms)
{
	uint64_t deadline = ibc_time_ms() + (uint64_t)max_ms;

	pthread_mutex_lock(&bs->olock);
	while (bs->nsent < seq && ibc_time_ms() < deadline) {
		ibc_cond_wait_ms(&bs->ocond, &bs->olock, 10);
	}
	pthread_mutex_unlock(&bs->olock);
}

void ibc_bootstrap_notify_error(struct ibc_bootstrap *bs, ibc_status_t st, const char *text)
{
	if (!bs || !bs->thread_started || (!bs->ring && bs->rank > 0 && bs->hub_fd < 0))
		return;
	boot_post_notice(bs, IBC_BOOT_NOTICE_ERROR, st, text);
}

void ibc_bootstrap_announce_leave(struct ibc_bootstrap *bs, int abort, const char *text)
{
	uint64_t seq;

	if (!bs || !bs->thread_started || bs->said_goodbye)
		return;
	bs->said_goodbye = 1;
	seq = boot_post_notice(bs, abort ? IBC_BOOT_NOTICE_ABORT : IBC_BOOT_NOTICE_BYE,
			       abort ? IBC_ERR_REMOTE : IBC_OK, text);
	if (seq)
		boot_wait_sent(bs, seq, BOOT_NOTICE_MS + 100);
}

void ibc_bootstrap_cancel(struct ibc_bootstrap *bs)
{
	if (!bs)
		return;
	__atomic_store_n(&bs->stop_io, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&bs->qlock);
	pthread_cond_broadcast(&bs->qcond);
	pthread_mutex_unlock(&bs->qlock);
}

static const char *peer_host(const struct ibc_bootstrap *bs, int rank)
{
	return rank >= 0 && rank < bs->nranks ? bs->peers[rank].host : "?";
}

enum { HUB_CLOSED = 0, HUB_SILENT = 1, HUB_NEVER = 2 };

/* a hub peer is gone, silent, or never connected */
static void svc_hub_lost(struct ibc_bootstrap *bs, int peer, int how)
{
	char text[256];
	ibc_status_t st = how == HUB_CLOSED ? IBC_ERR_REMOTE : IBC_ERR_TIMEOUT;

	if (bs->peer_state[peer] != PEER_ALIVE)
		return;
	if (how == HUB_SILENT)
		snprintf(text, sizeof(text), "rank %d (host %s) sent no heartbeat for %lld ms: stopped or hung",
			 peer, peer_host(bs, peer), (long long)(BOOT_STOP_INTERVALS * bs->hb_ms));
	else if (how == HUB_NEVER)
		snprintf(text, sizeof(text), bs->ring
			 ? "rank %d (host %s) did not open its liveness connection to rank %d within %lld ms (IBC_BOOTSTRAP_TIMEOUT_MS): it died or hung while creating the communicator"
			 : "rank %d (host %s) did not open its liveness connection to rank %d within %lld ms of the last rank that did: it died or hung while creating the communicator",
			 peer, peer_host(bs, peer), bs->rank,
			 (long long)(bs->ring ? IBC_MAX(BOOT_STOP_INTERVALS * bs->hb_ms, bs->timeout_ms)
					      : BOOT_STOP_INTERVALS * bs->hb_ms));
	else
		snprintf(text, sizeof(text), "rank %d (host %s) closed its bootstrap connection: process exited or crashed",
			 peer, peer_host(bs, peer));
	if (bs->ring || bs->rank == 0)
		svc_forward(bs, how == HUB_CLOSED ? IBC_BOOT_NOTICE_DEAD : IBC_BOOT_NOTICE_STOPPED, peer,
			    st, text);
	boot_report(bs, st, peer, "%s", text);
}

static void svc_on_notice(struct ibc_bootstrap *bs, struct boot_conn *c)
{
	struct ibc_boot_notice_msg n;

	if (ibc_boot_parse_notice(c->rd.buf, c->rd.len, &n) != 0 || n.rank >= bs->nranks) {
		IBC_LOG_WARN(BOOT, "malformed notice from rank %d ignored", c->peer);
		return;
	}
	/*
	 * hub: rank 0 passes on what a rank says about itself; ring: every rank
	 * passes on a failure that is news to it (the flood stops where it is
	 * known); a BYE concerns the neighbours only
	 */
	if (!bs->ring && bs->rank == 0 && c->peer == n.rank &&
	    (n.kind == IBC_BOOT_NOTICE_ABORT || n.kind == IBC_BOOT_NOTICE_ERROR))
		svc_forward_msg(bs, &n, -1);
	if (bs->ring && n.kind != IBC_BOOT_NOTICE_BYE && n.rank != bs->rank &&
	    bs->peer_state[n.rank] == PEER_ALIVE)
		svc_forward_msg(bs, &n, c->peer);
	switch (n.kind) {
	case IBC_BOOT_NOTICE_BYE:
		if (bs->peer_state[n.rank] == PEER_ALIVE)
			bs->peer_state[n.rank] = PEER_LEFT;
		break;
	case IBC_BOOT_NOTICE_ABORT:
		boot_report(bs, IBC_ERR_REMOTE, n.rank, "rank %d (host %s) aborted the communicator%s%s",
			    n.rank, peer_host(bs, n.rank), n.text[0] ? " after: " : "", n.text);
		break;
	case IBC_BOOT_NOTICE_ERROR:
		/*
		 * Mismatched calls and hangs concern every rank: keep their status.
		 * Anything else (CUDA, memory, a lost connection) happened to that
		 * rank: here it is "a peer reported an error", IBC_ERR_REMOTE.
		 */
		boot_report(bs,
			    n.status == IBC_ERR_INVALID_USAGE || n.status == IBC_ERR_TIMEOUT
				    ? (ibc_status_t)n.status : IBC_ERR_REMOTE,
			    n.rank, "error on rank %d (host %s): %s", n.rank, peer_host(bs, n.rank),
			    n.text);
		break;
	case IBC_BOOT_NOTICE_DEAD:
		boot_report(bs, IBC_ERR_REMOTE, n.rank, "%s (reported by rank %d)", n.text, c->peer);
		break;
	case IBC_BOOT_NOTICE_STOPPED:
		boot_report(bs, IBC_ERR_TIMEOUT, n.rank, "%s (reported by rank %d)", n.text, c->peer);
		break;
	default:
		break;
	}
}

/* a HELLO arrived on pending connection @i; returns 1 to keep, 0 handed on, -1 to drop */
static int svc_on_hello(struct ibc_bootstrap *bs, int i)
{
	struct boot_conn *c = &bs->conns[i];
	struct ibc_boot_hello h;
	uint8_t mac[IBC_BOOT_MAC_BYTES];
	const char *why = NULL;

	if (c->rd.type != IBC_BOOT_HELLO || ibc_boot_parse_hello(c->rd.buf, c->rd.len, &h) != 0)
		why = "malformed hello";
	else if (ibc_boot_mac_hello(bs->secret, c->nonce_a, &h, mac) != 0 ||
		 !ibc_boot_mac_equal(mac, h.mac))
		why = "authentication failed: wrong secret";
	else if (h.nranks != bs->nranks || h.dst != bs->rank ||
		 memcmp(h.comm_id, bs->comm_id, IBC_BOOT_COMMID_BYTES) != 0)
		why = "hello for another communicator or rank";
	else if (h.src == bs->rank || h.kind == IBC_BOOT_KIND_JOIN ||
		 (h.kind == IBC_BOOT_KIND_HUB && !bs->ring && bs->rank != 0) ||
		 (h.kind == IBC_BOOT_KIND_HUB && bs->ring &&
		  (int)h.src != (bs->rank + bs->nranks - 1) % bs->nranks))
		why = "unexpected connection kind";
	if (why) {
		ibc_boot_stranger_warn(&bs->rl, "rejected connection from %s: %s", c->addr, why);
		ibc_boot_frame_write(c->fd, IBC_BOOT_REJECT, why, strlen(why), ibc_time_ms() + 200);
		return -1;
	}
	ibc_boot_mac_welcome(bs->secret, c->nonce_a, h.nonce_c, mac);
	if (ibc_boot_frame_write(c->fd, IBC_BOOT_WELCOME, mac, sizeof(mac), ibc_time_ms() + 1000) != IBC_OK)
		return -1;
	c->peer = h.src;
	c->last_rx_ms = ibc_time_ms();
	if (h.kind == IBC_BOOT_KIND_WAITQ) {
		/* a wait-for query: answer what this rank is doing, then close */
		struct ibc_boot_waitstate ws = { IBC_BOOT_WAIT_IDLE, -1, 0, 0, 0, 0, 0, 0 };
		ibc_bootstrap_wait_fn fn = __atomic_load_n(&bs->wait_fn, __ATOMIC_ACQUIRE);
		uint8_t out[IBC_BOOT_WAITSTATE_BYTES];

		if (fn)
			fn(bs->on_error_arg, h.src, &ws);
		ibc_boot_pack_waitstate(&ws, out);
		ibc_boot_frame_write(c->fd, IBC_BOOT_WAITSTATE, out, sizeof(out), ibc_time_ms() + 200);
		return -1;
	}
	if (h.kind == IBC_BOOT_KIND_MSG) {
		c->state = CS_MSG;
		return 1;
	}
	if (h.kind == IBC_BOOT_KIND_HUB) {
		c->state = CS_HUB;
		bs->hub_seen[h.src] = 1;
		bs->last_hub_ms = ibc_time_ms();
		return 1;
	}
	/* a stream: hand the fd to the transport's queue */
	{
		struct boot_stream *s = malloc(sizeof(*s));

		if (!s)
			return -1;
		ibc_sock_set_nonblock(c->fd, 0);
		s->src = h.src;
		s->tag = h.tag;
		s->fd = c->fd;
		pthread_mutex_lock(&bs->qlock);
		s->next = NULL;
		{
			struct boot_stream **pp = &bs->streams;

			while (*pp)
				pp = &(*pp)->next;
			*pp = s;
		}
		pthread_cond_broadcast(&bs->qcond);
		pthread_mutex_unlock(&bs->qlock);
	}
	return 0;
}

static void svc_on_msg(struct ibc_bootstrap *bs, struct boot_conn *c)
{
	struct boot_msg *m;
	uint32_t tag;

	if (c->rd.len < 4)
		return;
	memcpy(&tag, c->rd.buf, 4);
	if (tag == IBC_BOOT_TAG_REVOKE) {
		/*
		 * A peer revoked the communicator (ibc_comm_revoke()): it is alive,
		 * so it is not marked failed; every blocking call here gives up and
		 * the net layer turns its status into IBC_ERR_REVOKED. Sent to each
		 * rank directly, so a revoke does not need rank 0 (the hub).
		 */
		if (!__atomic_exchange_n(&bs->revoked, 1, __ATOMIC_ACQ_REL))
			boot_report(bs, IBC_ERR_REVOKED, -1, "rank %d (host %s) revoked the communicator",
				    c->peer, peer_host(bs, c->peer));
		return;
	}
	m = malloc(sizeof(*m) + c->rd.len - 4);
	if (!m) {
		IBC_LOG_ERROR(BOOT, "out of memory for a %zu-byte message from rank %d", c->rd.len, c->peer);
		return;
	}
	m->src = c->peer;
	m->tag = tag;
	m->len = c->rd.len - 4;
	m->next = NULL;
	memcpy(m->data, c->rd.buf + 4, m->len);
	pthread_mutex_lock(&bs->qlock);
	*bs->msgs_tail = m;
	bs->msgs_tail = &m->next;
	pthread_cond_broadcast(&bs->qcond);
	pthread_mutex_unlock(&bs->qlock);
}

static void svc_accept(struct ibc_bootstrap *bs, int64_t handshake_ms)
{
	int nacc;

	for (nacc = 0; nacc < BOOT_ACCEPT_BURST; nacc++) {
		uint8_t ch[4 + IBC_BOOT_NONCE_BYTES];
		uint32_t ver = IBC_BOOT_VERSION;
		struct boot_conn *c;
		int npending = 0;
		int fd = accept4(bs->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int i;

		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			char why[160];

			/*
			 * The connection stays in the listener's backlog and the
			 * listener readable: say why (once a second), and do not
			 * spin on it; a later accept takes it once descriptors
			 * are free, or the connecting rank's deadline names us.
			 */
			ibc_boot_stranger_warn(&bs->rl_accept, "cannot accept a bootstrap connection: %s",
					       ibc_sock_err_text(errno, why, sizeof(why)));
			usleep(10000);
			return;
		}
		if (fd < 0)
			return;
		ibc_sock_set_nodelay(fd);
		for (i = 0; i < bs->nconns; i++)
			npending += bs->conns[i].state == CS_WAIT_HELLO;
		if (npending >= BOOT_MAX_PENDING) {
			/* flood: shed the silent, then the oldest, unauthenticated connection */
			int victim = -1;
			int vidle = 0;

			for (i = 0; i < bs->nconns; i++) {
				const struct boot_conn *v = &bs->conns[i];
				int idle = ibc_boot_conn_idle(v->fd, &v->rd);

				if (v->state != CS_WAIT_HELLO)
					continue;
				if (victim < 0 || idle > vidle ||
				    (idle == vidle && v->deadline_ms < bs->conns[victim].deadline_ms)) {
					victim = i;
					vidle = idle;
				}
			}
			ibc_boot_stranger_warn(&bs->rl, "more than %d unauthenticated connections; dropping %s",
				      BOOT_MAX_PENDING, bs->conns[victim].addr);
			ibc_boot_svc_drop_conn(bs, victim, 0);
		}
		if (ibc_boot_svc_add_conn(bs, fd, CS_WAIT_HELLO, -1) != 0) {
			close(fd);
			return;
		}
		c = &bs->conns[bs->nconns - 1];
		c->deadline_ms = ibc_time_ms() + (uint64_t)handshake_ms;
		if (ibc_random_bytes(c->nonce_a, sizeof(c->nonce_a)) != IBC_OK) {
			ibc_boot_svc_drop_conn(bs, bs->nconns - 1, 0);
			continue;
		}
		memcpy(ch, &ver, 4);
		memcpy(ch + 4, c->nonce_a, IBC_BOOT_NONCE_BYTES);
		if (ibc_boot_frame_write(fd, IBC_BOOT_CHALLENGE, ch, sizeof(ch), ibc_time_ms() + 200) != IBC_OK)
			ibc_boot_svc_drop_conn(bs, bs->nconns - 1, 0);
	}
}

void *ibc_boot_svc_thread(void *arg)
{
	struct ibc_bootstrap *bs = arg;
	int64_t handshake_ms = ibc_param_bootstrap_handshake_ms();
	struct pollfd *pfds = NULL;
	int npfds = 0;

	ibc_log_set_rank(bs->rank);
	bs->next_ping_ms = ibc_time_ms() + (uint64_t)bs->hb_ms;
	while (!__atomic_load_n(&bs->stop, __ATOMIC_ACQUIRE)) {
		uint64_t now = ibc_time_ms();
		int64_t wait = (int64_t)(bs->next_ping_ms - now);
		int wfd = __atomic_exchange_n(&bs->watch_pending, -1, __ATOMIC_ACQ_REL);
		int i;
		int n;

		/* ring: the watch connection to our successor, opened by boot_start() */
		if (wfd >= 0 && ibc_boot_svc_add_conn(bs, wfd, CS_HUB, (bs->rank + 1) % bs->nranks) != 0)
			close(wfd);

		if (npfds < bs->nconns + 2) {
			struct pollfd *np = realloc(pfds, sizeof(*np) * (size_t)(bs->nconns + 2));

			if (!np) {
				usleep(10000);
				continue;
			}
			pfds = np;
			npfds = bs->nconns + 2;
		}
		pfds[0].fd = bs->wake_fd;
		pfds[0].events = POLLIN;
		pfds[1].fd = bs->listen_fd;
		pfds[1].events = POLLIN;
		for (i = 0; i < bs->nconns; i++) {
			pfds[i + 2].fd = bs->conns[i].fd;
			pfds[i + 2].events = POLLIN;
			pfds[i + 2].revents = 0;
			if (bs->conns[i].state == CS_WAIT_HELLO &&
			    (int64_t)(bs->conns[i].deadline_ms - now) < wait)
				wait = (int64_t)(bs->conns[i].deadline_ms - now);
		}
		n = poll(pfds, (nfds_t)bs->nconns + 2, (int)IBC_MAX(wait, 0) + 1);
		if (n < 0 && errno != EINTR)
			break;
		if (pfds[0].revents & POLLIN) {
			uint64_t v;

			if (read(bs->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				break;
		}
		now = ibc_time_ms();
		for (i = bs->nconns - 1; i >= 0; i--) {
			struct boot_conn *c = &bs->conns[i];
			int ret;

			if (!(pfds[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) {
				if (c->state == CS_WAIT_HELLO && now >= c->deadline_ms) {
					ibc_boot_stranger_warn(&bs->rl, "dropped connection from %s: no valid hello within %lld ms",
						      c->addr, (long long)handshake_ms);
					ibc_boot_svc_drop_conn(bs, i, 0);
				}
				continue;
			}
			for (;;) {
				ret = ibc_boot_frame_rd_step(c->fd, bs->nranks,
						    c->state == CS_WAIT_HELLO ? IBC_BOOT_HELLO : 0,
						    &c->rd);
				if (ret != 1)
					break;
				c->last_rx_ms = now;
				if (c->state == CS_WAIT_HELLO) {
					int keep = svc_on_hello(bs, i);

					if (keep <= 0) {
						ibc_boot_svc_drop_conn(bs, i, keep == 0);
						ret = 2;
						break;
					}
				} else if (c->rd.type == IBC_BOOT_MSG && c->state == CS_MSG) {
					svc_on_msg(bs, c);
				} else if (c->rd.type == IBC_BOOT_NOTICE && c->state == CS_HUB) {
					svc_on_notice(bs, c);
				} else if (c->rd.type != IBC_BOOT_PING || c->state != CS_HUB) {
					ret = -2;
					break;
				}
				ibc_boot_frame_rd_reset(&c->rd);
			}
			if (ret == 2 || ret == 0)
				continue;
			/* EOF or protocol error */
			if (c->state == CS_HUB) {
				int peer = c->peer;

				ibc_boot_svc_drop_conn(bs, i, 0);
				if (peer == 0)
					bs->hub_fd = -1;
				if (bs->peer_state[peer] == PEER_ALIVE)
					svc_hub_lost(bs, peer, HUB_CLOSED);
			} else {
				if (ret == -2 && c->state == CS_WAIT_HELLO)
					ibc_boot_stranger_warn(&bs->rl, "dropped connection from %s: malformed frame",
						      c->addr);
				else if (ret == -2)
					IBC_LOG_WARN(BOOT, "dropped connection from %s (rank %d): malformed frame",
						     c->addr, c->peer);
				ibc_boot_svc_drop_conn(bs, i, 0);
			}
		}
		if (pfds[1].revents & POLLIN)
			svc_accept(bs, handshake_ms);
		now = ibc_time_ms();
		if (now >= bs->next_ping_ms) {
			bs->next_ping_ms = now + (uint64_t)bs->hb_ms;
			for (i = bs->nconns - 1; i >= 0; i--) {
				struct boot_conn *c = &bs->conns[i];
				uint8_t hdr[IBC_BOOT_HDR_BYTES];
				ssize_t sent;

				if (c->state != CS_HUB)
					continue;
				ibc_boot_put_hdr(hdr, IBC_BOOT_PING, 0);
				/*
				 * Best effort: a full buffer means the peer is not
				 * reading (EOF is handled on the read side). But a ping
				 * begun is finished, or the peer reads the next frame's
				 * bytes as the rest of this header: its room ran out
				 * within a header, so it is not reading, and within the
				 * silence window it reads again or is called silent.
				 */
				sent = send(c->fd, hdr, sizeof(hdr), MSG_DONTWAIT | MSG_NOSIGNAL);
				if (sent > 0 && (size_t)sent < sizeof(hdr) &&
				    ibc_sock_write_all_cancel(c->fd, hdr + sent, sizeof(hdr) - (size_t)sent,
							      now + (uint64_t)(BOOT_STOP_INTERVALS * bs->hb_ms),
							      NULL, NULL) != IBC_OK &&
				    bs->peer_state[c->peer] == PEER_ALIVE) {
					svc_hub_lost(bs, c->peer, HUB_SILENT);
					continue;
				}
				if (bs->peer_state[c->peer] == PEER_ALIVE &&
				    now - c->last_rx_ms > (uint64_t)(BOOT_STOP_INTERVALS * bs->hb_ms))
					svc_hub_lost(bs, c->peer, HUB_SILENT);
			}
			/*
			 * rank 0: a rank that never connected its hub died during
			 * creation. The window counts from the last rank that did
			 * connect, not from the start: while ranks keep arriving the
			 * job is making progress (1024 ranks on 2 cores took longer
			 * than 5 intervals to connect, and the last ones were declared
			 * dead), and a rank that is really gone is found 5 intervals
			 * after the others stopped arriving.
			 */
			for (i = 1; !bs->ring && bs->rank == 0 && i < bs->nranks; i++)
				if (!bs->hub_seen[i] && bs->peer_state[i] == PEER_ALIVE &&
				    now - IBC_MAX(bs->start_ms, bs->last_hub_ms) >
					    (uint64_t)(BOOT_STOP_INTERVALS * bs->hb_ms))
					svc_hub_lost(bs, i, HUB_NEVER);
			/*
			 * ring: our predecessor connects its watch to us once it has
			 * the table, which the root sends to the ranks one after the
			 * other: the last one may get it many intervals after us (at
			 * 1024 ranks on 2 cores, more than 5 s), and nothing here
			 * shows the job's progress, so the window is the bootstrap
			 * timeout. A predecessor that died instead is found at once
			 * by its own predecessor, whose watch connection it refuses.
			 */
			if (bs->ring && bs->nranks > 1) {
				int pred = (bs->rank + bs->nranks - 1) % bs->nranks;

				if (!bs->hub_seen[pred] && bs->peer_state[pred] == PEER_ALIVE &&
				    now - bs->start_ms >
					    (uint64_t)IBC_MAX(BOOT_STOP_INTERVALS * bs->hb_ms, bs->timeout_ms))
					svc_hub_lost(bs, pred, HUB_NEVER);
			}
		}
		svc_flush_outbox(bs);
	}
	/* the goodbye posted by ibc_bootstrap_announce_leave() goes out before we exit */
	svc_flush_outbox(bs);
	free(pfds);
	return NULL;
}
