/* SPDX-License-Identifier: MIT */
/*
 * bootstrap.c - the out-of-band network of a communicator (bootstrap.h).
 *
 * Design (after NCCL's bootstrap.cc, with authentication and liveness):
 *  - A root thread (ibc_bootstrap_root_start) accepts JOIN hellos that prove
 *    the secret, gathers every rank's struct ibc_peer_info and sends the
 *    full table to all, or a FAIL frame naming the missing ranks on timeout.
 *  - Each rank listens on one socket. Its service thread accepts, runs the
 *    handshake of every incoming connection as a nonblocking state machine
 *    with a deadline (a flood or slowloris costs one pollfd each and ends at
 *    IBC_BOOTSTRAP_HANDSHAKE_MS), then queues tagged messages (MSG), hands
 *    streams to transports (STREAM), or watches liveness (HUB).
 *  - Liveness: rank r > 0 keeps a HUB connection to rank 0; both ends send
 *    a PING every IBC_HEARTBEAT_MS. A closed hub (process died) or 5 silent
 *    intervals (stopped) is reported through the error callback, and rank 0
 *    forwards the news to every other rank, so all survivors learn who
 *    failed within seconds. BYE frames mark clean departures.
 * Outgoing connections (messages, streams, hub) are opened by the calling
 * thread with a blocking, deadline-bounded handshake.
 */
#include "config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/socket.h"
#include "base/status.h"
#include "base/util.h"
#include "boot_wire.h"
#include "bootstrap.h"

#define BOOT_MAX_PENDING 128    /* unauthenticated connections held at once */
#define BOOT_ACCEPT_BURST 32    /* accepts per poll round, so pending hellos are read between */
#define BOOT_STOP_INTERVALS 5   /* silent heartbeat intervals before "stopped" */
#define BOOT_OUTBOX 8           /* notices waiting for the service thread */
#define BOOT_NOTICE_MS 300      /* bound on sending one round of notices */

/*
 * Warnings about strangers (bad secret, garbage, slowloris) are limited to
 * one line per second with a count, so that a flood cannot flood the log.
 */
struct boot_ratelog {
	uint64_t last_ms;
	long nsup;              /* lines suppressed since the last one */
};

static void stranger_warn(struct boot_ratelog *rl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void stranger_warn(struct boot_ratelog *rl, const char *fmt, ...)
{
	uint64_t now = ibc_time_ms();
	char text[512];
	va_list ap;

	if (rl->last_ms && now - rl->last_ms < 1000) {
		rl->nsup++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (rl->nsup)
		IBC_LOG_WARN(BOOT, "%s (and %ld more such connections in the last second)", text,
			     rl->nsup);
	else
		IBC_LOG_WARN(BOOT, "%s", text);
	rl->last_ms = now;
	rl->nsup = 0;
}

enum peer_state {
	PEER_ALIVE = 0,
	PEER_LEFT = 1,          /* said BYE */
	PEER_FAILED = 2,        /* died, stopped or aborted: reported once */
};

/* reader of one frame at a time on a nonblocking fd */
struct frame_rd {
	uint8_t hdr[IBC_BOOT_HDR_BYTES];
	size_t hdr_got;
	int type;
	uint8_t *buf;
	size_t len;
	size_t got;
};

enum conn_state {
	CS_WAIT_HELLO = 0,
	CS_MSG = 1,
	CS_HUB = 2,
};

struct boot_conn {
	int fd;
	int state;
	int peer;               /* rank, once authenticated */
	uint64_t deadline_ms;   /* end of the handshake */
	uint64_t last_rx_ms;    /* hub liveness */
	uint8_t nonce_a[IBC_BOOT_NONCE_BYTES];
	char addr[80];          /* remote address text for log lines */
	struct frame_rd rd;
};

struct boot_msg {
	struct boot_msg *next;
	int src;
	uint32_t tag;
	size_t len;
	uint8_t data[];
};

struct boot_stream {
	struct boot_stream *next;
	int src;
	uint32_t tag;
	int fd;
};

struct ibc_bootstrap {
	int rank;
	int nranks;
	uint8_t secret[IBC_BOOT_SECRET_BYTES];
	uint8_t comm_id[IBC_BOOT_COMMID_BYTES];
	struct ibc_peer_info *peers;            /* [nranks] */
	int listen_fd;
	union ibc_sockaddr listen_addr;
	int64_t timeout_ms;                     /* IBC_BOOTSTRAP_TIMEOUT_MS */
	int64_t hb_ms;                          /* IBC_HEARTBEAT_MS */

	/* outgoing message connections, opened on first send */
	int *out_fd;                            /* [nranks], -1 */
	pthread_mutex_t *out_lock;              /* [nranks] */

	/* what arrived */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct boot_msg *msgs;
	struct boot_msg **msgs_tail;
	struct boot_stream *streams;

	/* service thread and its connections */
	pthread_t thread;
	int thread_started;
	int wake_fd;
	int stop;                               /* atomic */
	struct boot_conn *conns;
	int nconns;
	int cap;
	int hub_fd;                             /* rank > 0: our connection to rank 0 */
	uint64_t next_ping_ms;

	/* liveness */
	int *peer_state;                        /* [nranks], enum peer_state (svc thread) */
	uint8_t *hub_seen;                      /* [nranks] rank 0: hub connected (svc thread) */
	uint64_t start_ms;                      /* service thread start */
	ibc_bootstrap_error_fn on_error;
	void *on_error_arg;
	ibc_bootstrap_wait_fn wait_fn;          /* atomic: answers wait-for queries */
	int failed;                             /* atomic: an error was reported */
	struct boot_ratelog rl;                 /* strangers at our listener (svc thread) */
	int stop_io;                            /* atomic: failed or cancelled: blocking calls give up */

	/* notices for the service thread to send: every hub write stays in one thread */
	pthread_mutex_t olock;
	pthread_cond_t ocond;
	struct ibc_boot_notice_msg outbox[BOOT_OUTBOX];
	int nout;
	uint64_t nposted;                       /* notices posted / sent, under olock */
	uint64_t nsent;
	int said_goodbye;                       /* the final BYE/ABORT was posted */
};

/* the calling thread's last error, without the "rank R: " in front */
static const char *boot_local_reason(void)
{
	const char *t = ibc_last_error();
	const char *p = t;

	if (!strncmp(p, "rank ", 5)) {
		p += 5;
		while (*p >= '0' && *p <= '9')
			p++;
		if (p[0] == ':' && p[1] == ' ')
			return p + 2;
	}
	return *t ? t : "local error";
}

/* ------------------------------------------------------------------------ */
/* frames                                                                   */
/* ------------------------------------------------------------------------ */

/* write one frame before @deadline_ms; gives up when *@cancel_p (may be NULL) is set */
static ibc_status_t frame_write_c(int fd, int type, const void *payload, size_t len,
				  uint64_t deadline_ms, const int *cancel_p)
{
	uint8_t buf[IBC_BOOT_HDR_BYTES + 2048];
	ibc_status_t st;

	ibc_boot_put_hdr(buf, type, (uint32_t)len);
	if (len <= sizeof(buf) - IBC_BOOT_HDR_BYTES) {
		/* one write: a split small frame meets Nagle and delayed ACKs (40 ms) */
		if (len)
			memcpy(buf + IBC_BOOT_HDR_BYTES, payload, len);
		return ibc_sock_write_all_cancel(fd, buf, IBC_BOOT_HDR_BYTES + len, deadline_ms,
						 cancel_p, NULL);
	}
	st = ibc_sock_write_all_cancel(fd, buf, IBC_BOOT_HDR_BYTES, deadline_ms, cancel_p, NULL);
	if (st == IBC_OK)
		st = ibc_sock_write_all_cancel(fd, payload, len, deadline_ms, cancel_p, NULL);
	return st;
}

static ibc_status_t frame_write(int fd, int type, const void *payload, size_t len,
				uint64_t deadline_ms)
{
	return frame_write_c(fd, type, payload, len, deadline_ms, NULL);
}

/*
 * Read one whole frame before @deadline_ms into a buffer of @cap bytes.
 * Errors: IBC_ERR_REMOTE (EOF, or *@cancel_p set), IBC_ERR_TIMEOUT,
 * IBC_ERR_INVALID_USAGE (malformed header or a frame larger than @cap).
 */
static ibc_status_t frame_read_blocking(int fd, int nranks, uint64_t deadline_ms,
					const int *cancel_p, int *type_p, uint8_t *buf, size_t cap,
					size_t *len_p)
{
	uint8_t hdr[IBC_BOOT_HDR_BYTES];
	struct ibc_boot_hdr h;
	ibc_status_t st;

	st = ibc_sock_read_all_cancel(fd, hdr, sizeof(hdr), deadline_ms, cancel_p, NULL);
	if (st != IBC_OK)
		return st;
	if (ibc_boot_parse_hdr(hdr, nranks, &h) != 0 || h.len > cap)
		return IBC_ERR_INVALID_USAGE;
	st = ibc_sock_read_all_cancel(fd, buf, h.len, deadline_ms, cancel_p, NULL);
	if (st != IBC_OK)
		return st;
	*type_p = h.type;
	*len_p = h.len;
	return IBC_OK;
}

/*
 * Advance a nonblocking frame reader; @only_type != 0 rejects other frame
 * types before their payload is allocated. Returns 1 when a frame is complete
 * (rd->type, rd->buf, rd->len; the caller consumes it and calls frame_rd_reset),
 * 0 when more bytes are needed, -1 on EOF or reset, -2 on error or malformed input.
 */
static int frame_rd_step(int fd, int nranks, int only_type, struct frame_rd *rd)
{
	for (;;) {
		ssize_t n;

		if (rd->hdr_got < IBC_BOOT_HDR_BYTES) {
			n = recv(fd, rd->hdr + rd->hdr_got, IBC_BOOT_HDR_BYTES - rd->hdr_got,
				 MSG_DONTWAIT);
			if (n == 0)
				return -1;
			if (n < 0)
				return (errno == EAGAIN || errno == EINTR) ? 0
				       : errno == ECONNRESET ? -1 : -2;
			rd->hdr_got += (size_t)n;
			if (rd->hdr_got < IBC_BOOT_HDR_BYTES)
				continue;
			{
				struct ibc_boot_hdr h;

				/* before authentication only a HELLO (<= 220 bytes) may
				 * arrive: nothing larger is allocated for a stranger */
				if (ibc_boot_parse_hdr(rd->hdr, nranks, &h) != 0 ||
				    (only_type && h.type != only_type))
					return -2;
				rd->type = h.type;
				rd->len = h.len;
				rd->got = 0;
				rd->buf = h.len ? malloc(h.len) : NULL;
				if (h.len && !rd->buf)
					return -2;
			}
		}
		if (rd->got == rd->len)
			return 1;
		n = recv(fd, rd->buf + rd->got, rd->len - rd->got, MSG_DONTWAIT);
		if (n == 0)
			return -1;
		if (n < 0)
			return (errno == EAGAIN || errno == EINTR) ? 0
			       : errno == ECONNRESET ? -1 : -2;
		rd->got += (size_t)n;
		if (rd->got == rd->len)
			return 1;
	}
}

/* 1 when nothing was received on @fd yet, read or waiting (flood shedding) */
static int conn_idle(int fd, const struct frame_rd *rd)
{
	int avail = 0;

	if (rd->hdr_got)
		return 0;
	return ioctl(fd, FIONREAD, &avail) != 0 || avail == 0;
}

static void frame_rd_reset(struct frame_rd *rd)
{
	free(rd->buf);
	memset(rd, 0, sizeof(*rd));
}

static void peer_addr_text(int fd, char *buf, size_t len)
{
	union ibc_sockaddr a;
	socklen_t alen = sizeof(a);

	if (getpeername(fd, &a.sa, &alen) == 0)
		ibc_sock_addr_str(&a, buf, len);
	else
		snprintf(buf, len, "unknown address");
}

/*
 * Connector side of the handshake: connect to @addr, answer the challenge
 * with @h (nonce and mac filled in here), check the acceptor's proof.
 * @what names the target in @why ("bootstrap root", "rank 3 (host b07)").
 * @retry_refused: 1 for the root (it may not listen yet), 0 for ranks (their
 * listener exists before anyone learns its address: a refusal means the
 * process is gone). @cancel_p: NULL, or a flag that ends the wait early.
 * Nothing is logged: on failure @why (@why_len bytes) says what happened and
 * *@final_p is 1 when the peer answered for good (it refused us, or could
 * not prove the secret), 0 for trouble on the way (reset, timeout, a local
 * error), which a caller may retry.
 */
static ibc_status_t boot_connect_auth(const uint8_t *secret, const union ibc_sockaddr *addr,
				      struct ibc_boot_hello *h, uint64_t deadline_ms,
				      const char *what, int retry_refused, const int *cancel_p,
				      int *fd_p, char *why, size_t why_len, int *final_p)
{
	uint8_t buf[IBC_BOOT_TEXT_MAX];
	uint8_t mac[IBC_BOOT_MAC_BYTES];
	uint8_t nonce_a[IBC_BOOT_NONCE_BYTES];
	char astr[80];
	char text[IBC_BOOT_TEXT_MAX];
	size_t len;
	int type;
	int fd = -1;
	ibc_status_t st;

	*final_p = 0;
	ibc_sock_addr_str(addr, astr, sizeof(astr));
	st = ibc_sock_connect_opts(addr, deadline_ms, retry_refused, cancel_p, &fd);
	if (st != IBC_OK && cancel_p && __atomic_load_n(cancel_p, __ATOMIC_ACQUIRE)) {
		snprintf(why, why_len, "connection to %s abandoned: the communicator failed", what);
		return IBC_ERR_REMOTE;
	}
	if (st == IBC_ERR_TIMEOUT) {
		snprintf(why, why_len, "cannot connect to %s at %s within %lld ms", what, astr,
			 (long long)ibc_param_bootstrap_timeout_ms());
		return st;
	}
	if (st == IBC_ERR_REMOTE) {
		snprintf(why, why_len, "%s at %s refused the connection: its process exited or crashed",
			 what, astr);
		*final_p = 1;
		return st;
	}
	if (st != IBC_OK) {
		snprintf(why, why_len, "cannot connect to %s at %s: %s", what, astr,
			 boot_local_reason());
		return st;
	}
	st = frame_read_blocking(fd, h->nranks, deadline_ms, cancel_p, &type, buf, sizeof(buf),
				 &len);
	if (st != IBC_OK || type != IBC_BOOT_CHALLENGE || len != 4 + IBC_BOOT_NONCE_BYTES) {
		snprintf(why, why_len, "%s at %s sent no valid challenge (%s)", what, astr,
			 st != IBC_OK ? ibc_status_str(st) : "unexpected frame");
		st = st == IBC_ERR_TIMEOUT ? IBC_ERR_TIMEOUT : IBC_ERR_REMOTE;
		goto err_close;
	}
	memcpy(nonce_a, buf + 4, IBC_BOOT_NONCE_BYTES);
	st = ibc_random_bytes(h->nonce_c, sizeof(h->nonce_c));
	if (st != IBC_OK) {
		snprintf(why, why_len, "no randomness for the handshake with %s", what);
		goto err_close;
	}
	if (ibc_boot_mac_hello(secret, nonce_a, h, h->mac) != 0) {
		snprintf(why, why_len, "HMAC computation failed");
		st = IBC_ERR_INTERNAL;
		goto err_close;
	}
	len = ibc_boot_pack_hello(h, buf, sizeof(buf));
	st = frame_write_c(fd, IBC_BOOT_HELLO, buf, len, deadline_ms, cancel_p);
	if (st == IBC_OK)
		st = frame_read_blocking(fd, h->nranks, deadline_ms, cancel_p, &type, buf,
					 sizeof(buf), &len);
	if (st != IBC_OK) {
		snprintf(why, why_len, "handshake with %s at %s failed: %s", what, astr,
			 ibc_status_str(st));
		goto err_close;
	}
	if (type == IBC_BOOT_REJECT) {
		ibc_boot_parse_text(buf, len, text, sizeof(text));
		snprintf(why, why_len, "%s at %s refused us: %s", what, astr, text);
		*final_p = 1;
		st = IBC_ERR_REMOTE;
		goto err_close;
	}
	if (type != IBC_BOOT_WELCOME || len != IBC_BOOT_MAC_BYTES ||
	    ibc_boot_mac_welcome(secret, nonce_a, h->nonce_c, mac) != 0 ||
	    !ibc_boot_mac_equal(mac, buf)) {
		snprintf(why, why_len, "%s at %s did not prove knowledge of the secret: wrong unique id or not an ibcoll peer",
			 what, astr);
		*final_p = 1;
		st = IBC_ERR_REMOTE;
		goto err_close;
	}
	*fd_p = fd;
	return IBC_OK;
err_close:
	close(fd);
	return st;
}

/* boot_connect_auth() that logs its failure (at DEBUG when cancelled) */
static ibc_status_t boot_connect_log(const uint8_t *secret, const union ibc_sockaddr *addr,
				     struct ibc_boot_hello *h, uint64_t deadline_ms,
				     const char *what, int retry_refused, const int *cancel_p,
				     int *fd_p)
{
	char why[IBC_BOOT_TEXT_MAX + 256];
	int final;
	ibc_status_t st = boot_connect_auth(secret, addr, h, deadline_ms, what, retry_refused,
					    cancel_p, fd_p, why, sizeof(why), &final);

	if (st == IBC_OK)
		return st;
	if (cancel_p && __atomic_load_n(cancel_p, __ATOMIC_ACQUIRE))
		IBC_LOG_DEBUG(BOOT, "%s (the communicator failed)", why);
	else
		IBC_LOG_ERROR(BOOT, "%s", why);
	return st;
}

/* ------------------------------------------------------------------------ */
/* unique id                                                                */
/* ------------------------------------------------------------------------ */

void ibc_boot_uid_pack(const struct ibc_boot_uid *u, ibc_unique_id_t *id)
{
	ibc_boot_uid_encode(u, (uint8_t *)id->internal);
}

ibc_status_t ibc_boot_uid_unpack(const ibc_unique_id_t *id, struct ibc_boot_uid *u)
{
	if (ibc_boot_uid_decode((const uint8_t *)id->internal, u) != 0) {
		IBC_LOG_ERROR(BOOT, "malformed unique id: not made by ibc_get_unique_id() or corrupted in transfer");
		return IBC_ERR_INVALID_ARG;
	}
	return IBC_OK;
}

static void uid_to_sockaddr(const struct ibc_boot_uid *u, union ibc_sockaddr *a)
{
	memset(a, 0, sizeof(*a));
	if (u->family == AF_INET6) {
		a->sin6.sin6_family = AF_INET6;
		memcpy(&a->sin6.sin6_addr, u->addr, 16);
	} else {
		a->sin.sin_family = AF_INET;
		memcpy(&a->sin.sin_addr, u->addr, 4);
	}
	ibc_sock_addr_set_port(a, u->port);
}

static void info_to_sockaddr(const struct ibc_peer_info *pi, union ibc_sockaddr *a)
{
	struct ibc_boot_uid u = { .family = pi->family, .port = pi->port };

	memcpy(u.addr, pi->addr, 16);
	uid_to_sockaddr(&u, a);
}

static void sockaddr_to_info(const union ibc_sockaddr *a, struct ibc_peer_info *pi)
{
	pi->family = a->sa.sa_family;
	pi->port = ibc_sock_addr_port(a);
	memset(pi->addr, 0, 16);
	if (a->sa.sa_family == AF_INET6)
		memcpy(pi->addr, &a->sin6.sin6_addr, 16);
	else
		memcpy(pi->addr, &a->sin.sin_addr, 4);
}

/* ------------------------------------------------------------------------ */
/* root                                                                     */
/* ------------------------------------------------------------------------ */

struct root_conn {
	int fd;
	int rank;               /* -1 until joined */
	int reporter;           /* >= 0: this rank reports that it cannot join (FAIL follows) */
	uint64_t deadline_ms;
	uint8_t nonce_a[IBC_BOOT_NONCE_BYTES];
	char addr[80];
	struct frame_rd rd;
};

struct boot_root {
	int listen_fd;
	char addr[80];
	uint8_t secret[IBC_BOOT_SECRET_BYTES];
	int nranks;             /* 0 until the first join */
	int njoined;
	struct ibc_peer_info *infos;
	int *rank_conn;         /* [nranks] index into conns, -1 */
	struct root_conn *conns;
	int nconns;
	int cap;
	uint64_t deadline_ms;
	int64_t handshake_ms;
	/* failure: a joined rank left or reported an error before the table */
	int failed;
	ibc_status_t fail_st;
	char fail_text[IBC_BOOT_TEXT_MAX - 64];
	uint8_t *told;          /* [nranks] knows of the failure (or is the one that failed) */
	int ntold;
	struct boot_ratelog rl;
};

/* send REJECT; @stranger: the peer did not prove the secret (rate-limited warning) */
static void root_reject(struct boot_root *r, struct root_conn *c, int stranger, const char *fmt,
			...) __attribute__((format(printf, 4, 5)));
static void root_reject(struct boot_root *r, struct root_conn *c, int stranger, const char *fmt,
			...)
{
	char text[IBC_BOOT_TEXT_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (stranger)
		stranger_warn(&r->rl, "bootstrap root: rejected connection from %s: %s", c->addr,
			      text);
	else
		IBC_LOG_WARN(BOOT, "bootstrap root: rejected connection from %s: %s", c->addr, text);
	frame_write(c->fd, IBC_BOOT_REJECT, text, strlen(text), ibc_time_ms() + 200);
}

static void root_tell(struct boot_root *r, int rank)
{
	if (r->told && rank >= 0 && rank < r->nranks && !r->told[rank]) {
		r->told[rank] = 1;
		r->ntold++;
	}
}

static void root_close(struct boot_root *r, int i)
{
	struct root_conn *c = &r->conns[i];

	if (c->rank >= 0 && r->rank_conn)
		r->rank_conn[c->rank] = -1;
	if (c->rank >= 0)
		r->njoined--;
	close(c->fd);
	frame_rd_reset(&c->rd);
	r->conns[i] = r->conns[--r->nconns];
	if (i < r->nconns && r->conns[i].rank >= 0)
		r->rank_conn[r->conns[i].rank] = i;
}

/* a HELLO arrived on root connection @i; returns 0 to keep it, -1 to close */
static int root_on_hello(struct boot_root *r, int i)
{
	struct root_conn *c = &r->conns[i];
	struct ibc_boot_hello h;
	uint8_t mac[IBC_BOOT_MAC_BYTES];

	if (c->rd.type != IBC_BOOT_HELLO || ibc_boot_parse_hello(c->rd.buf, c->rd.len, &h) != 0) {
		root_reject(r, c, 1, "malformed hello");
		return -1;
	}
	if (ibc_boot_mac_hello(r->secret, c->nonce_a, &h, mac) != 0 || !ibc_boot_mac_equal(mac, h.mac)) {
		root_reject(r, c, 1, "authentication failed: wrong secret (unique id or IBC_SECRET differs)");
		return -1;
	}
	if (h.kind != IBC_BOOT_KIND_JOIN) {
		root_reject(r, c, 0, "not a join request");
		return -1;
	}
	if (r->nranks == 0) {
		r->nranks = h.nranks;
		r->infos = calloc((size_t)h.nranks, sizeof(*r->infos));
		r->rank_conn = malloc((size_t)h.nranks * sizeof(int));
		r->told = calloc((size_t)h.nranks, 1);
		if (!r->infos || !r->rank_conn || !r->told) {
			root_reject(r, c, 0, "root out of memory for %d ranks", h.nranks);
			free(r->infos);
			free(r->rank_conn);
			free(r->told);
			r->infos = NULL;
			r->rank_conn = NULL;
			r->told = NULL;
			r->nranks = 0;
			return -1;
		}
		memset(r->rank_conn, 0xff, (size_t)h.nranks * sizeof(int));
	}
	if (r->failed) {
		/* the job cannot start any more: say why, at once */
		root_reject(r, c, 0, "bootstrap failed before rank %d joined: %s", h.src, r->fail_text);
		if (h.nranks == r->nranks)
			root_tell(r, h.src);
		return -1;
	}
	if (h.nranks != r->nranks) {
		root_reject(r, c, 0, "rank %d says the job has %d ranks, others said %d", h.src, h.nranks,
			    r->nranks);
		return -1;
	}
	if (h.tag == IBC_BOOT_JOIN_TAG_FAILED) {
		/* a rank that cannot join: welcome it, its FAIL frame comes next */
		ibc_boot_mac_welcome(r->secret, c->nonce_a, h.nonce_c, mac);
		if (frame_write(c->fd, IBC_BOOT_WELCOME, mac, sizeof(mac), ibc_time_ms() + 1000) !=
		    IBC_OK)
			return -1;
		c->reporter = h.src;
		snprintf(r->infos[h.src].host, sizeof(r->infos[h.src].host), "%s", h.info.host);
		return 0;
	}
	if (r->rank_conn[h.src] >= 0) {
		root_reject(r, c, 0, "rank %d already joined from host %s", h.src, r->infos[h.src].host);
		return -1;
	}
	ibc_boot_mac_welcome(r->secret, c->nonce_a, h.nonce_c, mac);
	if (frame_write(c->fd, IBC_BOOT_WELCOME, mac, sizeof(mac), ibc_time_ms() + 1000) != IBC_OK)
		return -1;
	c->rank = h.src;
	r->rank_conn[h.src] = i;
	r->infos[h.src] = h.info;
	r->njoined++;
	IBC_LOG_DEBUG(BOOT, "bootstrap root: rank %d of %d joined from %s (%s)", h.src, r->nranks,
		      c->addr, h.info.host);
	return 0;
}

static void root_finish(struct boot_root *r)
{
	uint8_t comm_id[IBC_BOOT_COMMID_BYTES];
	uint8_t *table;
	size_t len = ibc_boot_table_len(r->nranks);
	uint64_t deadline = ibc_time_ms() + 10000;
	int i;

	table = malloc(len);
	if (!table || ibc_random_bytes(comm_id, sizeof(comm_id)) != IBC_OK) {
		IBC_LOG_ERROR(BOOT, "bootstrap root: cannot build the table of %d ranks", r->nranks);
		free(table);
		return;
	}
	ibc_boot_pack_table(comm_id, r->nranks, r->infos, table);
	for (i = 0; i < r->nranks; i++) {
		struct root_conn *c = &r->conns[r->rank_conn[i]];

		ibc_sock_set_nonblock(c->fd, 1);
		if (frame_write(c->fd, IBC_BOOT_TABLE, table, len, deadline) != IBC_OK)
			IBC_LOG_WARN(BOOT, "bootstrap root: cannot send the table to rank %d (%s)", i,
				     c->addr);
	}
	free(table);
	IBC_LOG_INFO(BOOT, "bootstrap root on %s: all %d ranks joined", r->addr, r->nranks);
}

static void root_timeout(struct boot_root *r)
{
	char text[IBC_BOOT_TEXT_MAX];
	size_t n = 0;
	int i;
	int nmissing = 0;

	if (r->nranks == 0) {
		snprintf(text, sizeof(text), "no rank joined the bootstrap root within %lld ms "
			 "(IBC_BOOTSTRAP_TIMEOUT_MS)", (long long)ibc_param_bootstrap_timeout_ms());
	} else {
		n = (size_t)snprintf(text, sizeof(text),
				     "%d of %d ranks did not join within %lld ms "
				     "(IBC_BOOTSTRAP_TIMEOUT_MS); ranks that never connected:",
				     r->nranks - r->njoined, r->nranks,
				     (long long)ibc_param_bootstrap_timeout_ms());
		for (i = 0; i < r->nranks && n < sizeof(text) - 16; i++) {
			if (r->rank_conn[i] >= 0)
				continue;
			if (nmissing++ == 32) {
				n += (size_t)snprintf(text + n, sizeof(text) - n, " ...");
				break;
			}
			n += (size_t)snprintf(text + n, sizeof(text) - n, " %d", i);
		}
	}
	IBC_LOG_WARN(BOOT, "bootstrap root on %s: %s", r->addr, text);
	{
		uint8_t buf[IBC_BOOT_TEXT_MAX + 4];
		size_t len = ibc_boot_pack_fail(IBC_ERR_TIMEOUT, text, buf, sizeof(buf));
		uint64_t deadline = ibc_time_ms() + 500;
		int pass;

		/*
		 * Rank 0 last: it runs in this process, and once told it fails
		 * and may exit, ending this (detached) thread before the others
		 * hear why (test_comm saw rank 1 get "sent no valid table").
		 */
		for (pass = 0; pass < 2; pass++)
			for (i = 0; i < r->nconns; i++)
				if (r->conns[i].rank >= 0 && (r->conns[i].rank == 0) == pass)
					frame_write(r->conns[i].fd, IBC_BOOT_FAIL, buf, len, deadline);
	}
}

/*
 * A joined rank left (or reported a failure) before every rank arrived: the
 * job cannot start. Tell every joined rank now, with @st and the reason,
 * instead of letting them wait for the bootstrap timeout, and refuse the
 * ranks that arrive later with the same reason (root_on_hello).
 */
static void root_fail(struct boot_root *r, ibc_status_t st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void root_fail(struct boot_root *r, ibc_status_t st, const char *fmt, ...)
{
	uint8_t buf[IBC_BOOT_TEXT_MAX + 4];
	uint64_t deadline = ibc_time_ms() + 500;
	va_list ap;
	size_t len;
	int pass;
	int i;

	va_start(ap, fmt);
	vsnprintf(r->fail_text, sizeof(r->fail_text), fmt, ap);
	va_end(ap);
	r->failed = 1;
	r->fail_st = st;
	IBC_LOG_WARN(BOOT, "bootstrap root on %s: %s; telling the %d ranks that joined", r->addr,
		     r->fail_text, r->njoined);
	len = ibc_boot_pack_fail(st, r->fail_text, buf, sizeof(buf));
	/* rank 0 last, as in root_timeout(): it may exit once told */
	for (pass = 0; pass < 2; pass++) {
		for (i = r->nconns - 1; i >= 0; i--) {
			if (r->conns[i].rank < 0 || (r->conns[i].rank == 0) != pass)
				continue;
			frame_write(r->conns[i].fd, IBC_BOOT_FAIL, buf, len, deadline);
			root_tell(r, r->conns[i].rank);
			root_close(r, i);
		}
	}
}

static void *root_thread(void *arg)
{
	struct boot_root *r = arg;
	struct pollfd *pfds = NULL;
	int done = 0;

	while (!done) {
		uint64_t now = ibc_time_ms();
		int64_t wait = (int64_t)(r->deadline_ms - now);
		int i;
		int n;

		if (wait <= 0) {
			if (!r->failed)
				root_timeout(r);
			break;
		}
		if (r->failed && r->ntold == r->nranks)
			break; /* everyone knows: nothing left to say */
		pfds = realloc(pfds, sizeof(*pfds) * (size_t)(r->nconns + 1));
		if (!pfds)
			break;
		pfds[0].fd = r->listen_fd;
		pfds[0].events = POLLIN;
		for (i = 0; i < r->nconns; i++) {
			pfds[i + 1].fd = r->conns[i].fd;
			pfds[i + 1].events = POLLIN;
			if (r->conns[i].rank < 0 && (int64_t)(r->conns[i].deadline_ms - now) < wait)
				wait = (int64_t)(r->conns[i].deadline_ms - now);
		}
		n = poll(pfds, (nfds_t)r->nconns + 1, (int)IBC_MAX(IBC_MIN(wait, 1000), 1));
		if (n < 0 && errno != EINTR)
			break;
		now = ibc_time_ms();
		/* existing connections first (indexes shift when one closes) */
		for (i = r->nconns - 1; i >= 0; i--) {
			struct root_conn *c = &r->conns[i];
			int ret;

			if (!(pfds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) {
				if (c->rank < 0 && now >= c->deadline_ms) {
					stranger_warn(&r->rl, "bootstrap root: dropped connection from %s: no valid hello within %lld ms",
						      c->addr, (long long)r->handshake_ms);
					root_close(r, i);
				}
				continue;
			}
			ret = frame_rd_step(c->fd, 0,
					    c->reporter >= 0 ? IBC_BOOT_FAIL
					    : c->rank < 0 ? IBC_BOOT_HELLO : 0, &c->rd);
			if (ret == 0)
				continue;
			if (c->reporter >= 0) {
				int rank = c->reporter;
				ibc_status_t fst = IBC_ERR_REMOTE;
				char why[IBC_BOOT_TEXT_MAX];

				if (ret != 1 || ibc_boot_parse_fail(c->rd.buf, c->rd.len, &fst, why,
								    sizeof(why)) != 0) {
					root_close(r, i);
					continue;
				}
				root_close(r, i);
				root_tell(r, rank);
				if (!r->failed)
					root_fail(r, IBC_ERR_REMOTE, "rank %d (host %s) failed during initialisation: %s",
						  rank, r->infos[rank].host, why);
				break; /* indexes changed: poll again */
			}
			if (c->rank >= 0) {
				/* a joined rank has nothing more to say: it died or failed */
				int rank = c->rank;
				const char *host = r->infos[rank].host;

				root_tell(r, rank);
				if (ret == 1 && c->rd.type == IBC_BOOT_FAIL) {
					ibc_status_t fst = IBC_ERR_REMOTE;
					char why[IBC_BOOT_TEXT_MAX];

					if (ibc_boot_parse_fail(c->rd.buf, c->rd.len, &fst, why,
								sizeof(why)) != 0)
						snprintf(why, sizeof(why), "malformed report");
					root_close(r, i);
					root_fail(r, IBC_ERR_REMOTE, "rank %d (host %s) failed during initialisation: %s",
						  rank, host, why);
				} else {
					root_close(r, i);
					root_fail(r, IBC_ERR_REMOTE, "rank %d (host %s) joined, then closed its connection before all %d ranks arrived: process exited or crashed",
						  rank, host, r->nranks);
				}
				break; /* indexes changed: poll again */
			}
			if (ret < 0) {
				if (ret == -2)
					stranger_warn(&r->rl, "bootstrap root: dropped connection from %s: malformed frame",
						      c->addr);
				root_close(r, i);
				continue;
			}
			if (root_on_hello(r, i) != 0) {
				root_close(r, i);
				continue;
			}
			frame_rd_reset(&c->rd);
		}
		if (!r->failed && r->nranks > 0 && r->njoined == r->nranks) {
			root_finish(r);
			done = 1;
			break;
		}
		if (pfds[0].revents & POLLIN) {
			int nacc;

			for (nacc = 0; nacc < BOOT_ACCEPT_BURST; nacc++) {
				struct root_conn *c;
				uint8_t ch[4 + IBC_BOOT_NONCE_BYTES];
				uint32_t ver = IBC_BOOT_VERSION;
				int fd = accept4(r->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

				if (fd < 0)
					break;
				ibc_sock_set_nodelay(fd);
				if (r->nconns - r->njoined >= BOOT_MAX_PENDING) {
					/* flood: shed the unauthenticated connection least likely
					 * to be a rank: nothing sent (not even unread), then oldest */
					int victim = -1;
					int vidle = 0;

					for (i = 0; i < r->nconns; i++) {
						const struct root_conn *v = &r->conns[i];
						int idle = conn_idle(v->fd, &v->rd);

						if (v->rank >= 0 || v->reporter >= 0)
							continue;
						if (victim < 0 || idle > vidle ||
						    (idle == vidle &&
						     v->deadline_ms < r->conns[victim].deadline_ms)) {
							victim = i;
							vidle = idle;
						}
					}
					if (victim >= 0) {
						stranger_warn(&r->rl, "bootstrap root: more than %d unauthenticated connections; dropping %s",
							      BOOT_MAX_PENDING, r->conns[victim].addr);
						root_close(r, victim);
					}
				}
				if (r->nconns == r->cap) {
					int ncap = r->cap ? 2 * r->cap : 16;
					struct root_conn *nc = realloc(r->conns, sizeof(*nc) * (size_t)ncap);

					if (!nc) {
						close(fd);
						break;
					}
					r->conns = nc;
					r->cap = ncap;
				}
				c = &r->conns[r->nconns];
				memset(c, 0, sizeof(*c));
				c->fd = fd;
				c->rank = -1;
				c->reporter = -1;
				c->deadline_ms = ibc_time_ms() + (uint64_t)r->handshake_ms;
				peer_addr_text(fd, c->addr, sizeof(c->addr));
				if (ibc_random_bytes(c->nonce_a, sizeof(c->nonce_a)) != IBC_OK) {
					close(fd);
					continue;
				}
				memcpy(ch, &ver, 4);
				memcpy(ch + 4, c->nonce_a, IBC_BOOT_NONCE_BYTES);
				if (frame_write(fd, IBC_BOOT_CHALLENGE, ch, sizeof(ch),
						ibc_time_ms() + 200) != IBC_OK) {
					close(fd);
					continue;
				}
				r->nconns++;
			}
		}
	}
	free(pfds);
	while (r->nconns)
		root_close(r, r->nconns - 1);
	close(r->listen_fd);
	free(r->conns);
	free(r->infos);
	free(r->rank_conn);
	free(r->told);
	free(r);
	return NULL;
}

ibc_status_t ibc_bootstrap_root_start(const char *bind_host, uint16_t port,
				      const uint8_t *secret, ibc_unique_id_t *id_out)
{
	struct boot_root *r;
	struct ibc_boot_uid uid;
	union ibc_sockaddr addr;
	char ifname[32];
	pthread_attr_t attr;
	pthread_t tid;
	int family = strcmp(ibc_param_socket_family(), "AF_INET6") ? AF_INET : AF_INET6;
	ibc_status_t st;
	int ret;

	r = ibc_calloc(1, sizeof(*r), "bootstrap root");
	if (!r)
		return IBC_ERR_NO_MEMORY;
	if (bind_host) {
		char hp[300];

		snprintf(hp, sizeof(hp), "%s:%u", bind_host, port);
		IBC_CHECK_GOTO(ibc_sock_parse_hostport(hp, family, &addr), st, err_free);
	} else {
		IBC_CHECK_GOTO(ibc_sock_pick_addr(family, 0, &addr, ifname), st, err_free);
		ibc_sock_addr_set_port(&addr, port);
	}
	st = ibc_sock_listen(&addr, 1024, port != 0, &r->listen_fd);
	if (st != IBC_OK) {
		/* a fixed port (IBC_ROOT's) that is taken: say what that usually means */
		if (port != 0 && errno == EADDRINUSE) {
			const char *h = bind_host ? bind_host : "host";
			int v6 = strchr(h, ':') != NULL;

			IBC_LOG_ERROR(BOOT, "bootstrap root: cannot listen on %s: %s: another "
				      "job, or another rank 0 of this job, is already listening "
				      "there (IBC_ROOT=%s%s%s:%u); give this job a different port "
				      "in IBC_ROOT",
				      ibc_sock_addr_str(&addr, r->addr, sizeof(r->addr)),
				      strerror(EADDRINUSE), v6 ? "[" : "", h, v6 ? "]" : "", port);
		}
		goto err_free;
	}
	ibc_sock_addr_str(&addr, r->addr, sizeof(r->addr));
	if (secret)
		memcpy(r->secret, secret, IBC_BOOT_SECRET_BYTES);
	else
		IBC_CHECK_GOTO(ibc_random_bytes(r->secret, sizeof(r->secret)), st, err_close);
	r->deadline_ms = ibc_time_ms() + (uint64_t)ibc_param_bootstrap_timeout_ms();
	r->handshake_ms = ibc_param_bootstrap_handshake_ms();

	memset(&uid, 0, sizeof(uid));
	uid.family = addr.sa.sa_family;
	uid.port = ibc_sock_addr_port(&addr);
	if (uid.family == AF_INET6)
		memcpy(uid.addr, &addr.sin6.sin6_addr, 16);
	else
		memcpy(uid.addr, &addr.sin.sin_addr, 4);
	memcpy(uid.secret, r->secret, sizeof(uid.secret));

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&tid, &attr, root_thread, r);
	pthread_attr_destroy(&attr);
	if (ret) {
		IBC_LOG_ERROR(BOOT, "cannot start the bootstrap root thread: %s", strerror(ret));
		st = IBC_ERR_SYSTEM;
		goto err_close;
	}
	ibc_boot_uid_pack(&uid, id_out);
	IBC_LOG_INFO(BOOT, "bootstrap root listening on %s", r->addr);
	return IBC_OK;
err_close:
	close(r->listen_fd);
err_free:
	ibc_free(r);
	return st;
}

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

static int svc_add_conn(struct ibc_bootstrap *bs, int fd, int state, int peer)
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
	peer_addr_text(fd, c->addr, sizeof(c->addr));
	return 0;
}

/* remove connection @i; @keep_fd: the fd was handed on, do not close it */
static void svc_drop_conn(struct ibc_bootstrap *bs, int i, int keep_fd)
{
	struct boot_conn *c = &bs->conns[i];

	if (!keep_fd)
		close(c->fd);
	frame_rd_reset(&c->rd);
	bs->conns[i] = bs->conns[--bs->nconns];
}

static void svc_send_notice(int fd, const struct ibc_boot_notice_msg *n, uint64_t deadline_ms)
{
	uint8_t buf[IBC_BOOT_NOTICE_HDR_BYTES + IBC_BOOT_NOTICE_TEXT_MAX];
	size_t len = ibc_boot_pack_notice(n, buf, sizeof(buf));

	if (len)
		frame_write(fd, IBC_BOOT_NOTICE, buf, len, deadline_ms);
}

/* rank 0: tell every hub but @n->rank's own; one shared deadline bounds a slow peer */
static void svc_forward_msg(struct ibc_bootstrap *bs, const struct ibc_boot_notice_msg *n)
{
	uint64_t deadline = ibc_time_ms() + BOOT_NOTICE_MS;
	int i;

	for (i = 0; i < bs->nconns; i++)
		if (bs->conns[i].state == CS_HUB && bs->conns[i].peer != n->rank)
			svc_send_notice(bs->conns[i].fd, n, deadline);
}

static void svc_forward(struct ibc_bootstrap *bs, int kind, int rank, ibc_status_t st,
			const char *text)
{
	struct ibc_boot_notice_msg n = { .kind = (uint32_t)kind, .rank = rank, .status = st };

	snprintf(n.text, sizeof(n.text), "%s", text ? text : "");
	svc_forward_msg(bs, &n);
}

/* service thread: send what other threads posted (rank > 0: to rank 0; rank 0: to all) */
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
		if (bs->rank == 0)
			svc_forward_msg(bs, &out[i]);
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
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&bs->ocond, &bs->olock, &ts);
	}
	pthread_mutex_unlock(&bs->olock);
}

void ibc_bootstrap_notify_error(struct ibc_bootstrap *bs, ibc_status_t st, const char *text)
{
	if (!bs || !bs->thread_started || (bs->rank > 0 && bs->hub_fd < 0))
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
		snprintf(text, sizeof(text), "rank %d (host %s) did not open its liveness connection to rank 0 within %lld ms: it died or hung while creating the communicator",
			 peer, peer_host(bs, peer), (long long)(BOOT_STOP_INTERVALS * bs->hb_ms));
	else
		snprintf(text, sizeof(text), "rank %d (host %s) closed its bootstrap connection: process exited or crashed",
			 peer, peer_host(bs, peer));
	if (bs->rank == 0)
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
	/* rank 0 passes on what a rank says about itself */
	if (bs->rank == 0 && c->peer == n.rank &&
	    (n.kind == IBC_BOOT_NOTICE_ABORT || n.kind == IBC_BOOT_NOTICE_ERROR))
		svc_forward_msg(bs, &n);
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
		boot_report(bs, IBC_ERR_REMOTE, n.rank, "%s (reported by rank 0)", n.text);
		break;
	case IBC_BOOT_NOTICE_STOPPED:
		boot_report(bs, IBC_ERR_TIMEOUT, n.rank, "%s (reported by rank 0)", n.text);
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
		 (h.kind == IBC_BOOT_KIND_HUB && bs->rank != 0))
		why = "unexpected connection kind";
	if (why) {
		stranger_warn(&bs->rl, "rejected connection from %s: %s", c->addr, why);
		frame_write(c->fd, IBC_BOOT_REJECT, why, strlen(why), ibc_time_ms() + 200);
		return -1;
	}
	ibc_boot_mac_welcome(bs->secret, c->nonce_a, h.nonce_c, mac);
	if (frame_write(c->fd, IBC_BOOT_WELCOME, mac, sizeof(mac), ibc_time_ms() + 1000) != IBC_OK)
		return -1;
	c->peer = h.src;
	c->last_rx_ms = ibc_time_ms();
	if (h.kind == IBC_BOOT_KIND_WAITQ) {
		/* a wait-for query: answer what this rank is doing, then close */
		struct ibc_boot_waitstate ws = { IBC_BOOT_WAIT_IDLE, -1, 0, 0 };
		ibc_bootstrap_wait_fn fn = __atomic_load_n(&bs->wait_fn, __ATOMIC_ACQUIRE);
		uint8_t out[IBC_BOOT_WAITSTATE_BYTES];

		if (fn)
			fn(bs->on_error_arg, &ws);
		ibc_boot_pack_waitstate(&ws, out);
		frame_write(c->fd, IBC_BOOT_WAITSTATE, out, sizeof(out), ibc_time_ms() + 200);
		return -1;
	}
	if (h.kind == IBC_BOOT_KIND_MSG) {
		c->state = CS_MSG;
		return 1;
	}
	if (h.kind == IBC_BOOT_KIND_HUB) {
		c->state = CS_HUB;
		bs->hub_seen[h.src] = 1;
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
				int idle = conn_idle(v->fd, &v->rd);

				if (v->state != CS_WAIT_HELLO)
					continue;
				if (victim < 0 || idle > vidle ||
				    (idle == vidle && v->deadline_ms < bs->conns[victim].deadline_ms)) {
					victim = i;
					vidle = idle;
				}
			}
			stranger_warn(&bs->rl, "more than %d unauthenticated connections; dropping %s",
				      BOOT_MAX_PENDING, bs->conns[victim].addr);
			svc_drop_conn(bs, victim, 0);
		}
		if (svc_add_conn(bs, fd, CS_WAIT_HELLO, -1) != 0) {
			close(fd);
			return;
		}
		c = &bs->conns[bs->nconns - 1];
		c->deadline_ms = ibc_time_ms() + (uint64_t)handshake_ms;
		if (ibc_random_bytes(c->nonce_a, sizeof(c->nonce_a)) != IBC_OK) {
			svc_drop_conn(bs, bs->nconns - 1, 0);
			continue;
		}
		memcpy(ch, &ver, 4);
		memcpy(ch + 4, c->nonce_a, IBC_BOOT_NONCE_BYTES);
		if (frame_write(fd, IBC_BOOT_CHALLENGE, ch, sizeof(ch), ibc_time_ms() + 200) != IBC_OK)
			svc_drop_conn(bs, bs->nconns - 1, 0);
	}
}

static void *svc_thread(void *arg)
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
		int i;
		int n;

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
					stranger_warn(&bs->rl, "dropped connection from %s: no valid hello within %lld ms",
						      c->addr, (long long)handshake_ms);
					svc_drop_conn(bs, i, 0);
				}
				continue;
			}
			for (;;) {
				ret = frame_rd_step(c->fd, bs->nranks,
						    c->state == CS_WAIT_HELLO ? IBC_BOOT_HELLO : 0,
						    &c->rd);
				if (ret != 1)
					break;
				c->last_rx_ms = now;
				if (c->state == CS_WAIT_HELLO) {
					int keep = svc_on_hello(bs, i);

					if (keep <= 0) {
						svc_drop_conn(bs, i, keep == 0);
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
				frame_rd_reset(&c->rd);
			}
			if (ret == 2 || ret == 0)
				continue;
			/* EOF or protocol error */
			if (c->state == CS_HUB) {
				int peer = c->peer;

				svc_drop_conn(bs, i, 0);
				if (peer == 0)
					bs->hub_fd = -1;
				if (bs->peer_state[peer] == PEER_ALIVE)
					svc_hub_lost(bs, peer, HUB_CLOSED);
			} else {
				if (ret == -2 && c->state == CS_WAIT_HELLO)
					stranger_warn(&bs->rl, "dropped connection from %s: malformed frame",
						      c->addr);
				else if (ret == -2)
					IBC_LOG_WARN(BOOT, "dropped connection from %s (rank %d): malformed frame",
						     c->addr, c->peer);
				svc_drop_conn(bs, i, 0);
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

				if (c->state != CS_HUB)
					continue;
				ibc_boot_put_hdr(hdr, IBC_BOOT_PING, 0);
				/* best effort: a full buffer means the peer is not reading */
				if (send(c->fd, hdr, sizeof(hdr), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
				    errno != EAGAIN) {
					/* EOF handling happens on the read side */
				}
				if (bs->peer_state[c->peer] == PEER_ALIVE &&
				    now - c->last_rx_ms > (uint64_t)(BOOT_STOP_INTERVALS * bs->hb_ms))
					svc_hub_lost(bs, c->peer, HUB_SILENT);
			}
			/* rank 0: a rank that never connected its hub died during creation */
			for (i = 1; bs->rank == 0 && i < bs->nranks; i++)
				if (!bs->hub_seen[i] && bs->peer_state[i] == PEER_ALIVE &&
				    now - bs->start_ms > (uint64_t)(BOOT_STOP_INTERVALS * bs->hb_ms))
					svc_hub_lost(bs, i, HUB_NEVER);
		}
		svc_flush_outbox(bs);
	}
	/* the goodbye posted by ibc_bootstrap_announce_leave() goes out before we exit */
	svc_flush_outbox(bs);
	free(pfds);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* creation                                                                 */
/* ------------------------------------------------------------------------ */

static void read_boot_id(char *out, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	out[0] = '\0';
	if (f) {
		if (fgets(out, (int)len, f))
			out[strcspn(out, "\n")] = '\0';
		fclose(f);
	}
}

static ibc_status_t boot_alloc(int rank, int nranks, ibc_bootstrap_error_fn on_error, void *arg,
			       struct ibc_bootstrap **bs_p)
{
	struct ibc_bootstrap *bs;
	int i;

	bs = ibc_calloc(1, sizeof(*bs), "bootstrap");
	if (!bs)
		return IBC_ERR_NO_MEMORY;
	bs->rank = rank;
	bs->nranks = nranks;
	bs->listen_fd = -1;
	bs->wake_fd = -1;
	bs->hub_fd = -1;
	bs->on_error = on_error;
	bs->on_error_arg = arg;
	bs->timeout_ms = ibc_param_bootstrap_timeout_ms();
	bs->hb_ms = ibc_param_heartbeat_ms();
	bs->msgs_tail = &bs->msgs;
	pthread_mutex_init(&bs->qlock, NULL);
	pthread_cond_init(&bs->qcond, NULL);
	pthread_mutex_init(&bs->olock, NULL);
	pthread_cond_init(&bs->ocond, NULL);
	bs->peers = ibc_calloc((size_t)nranks, sizeof(*bs->peers), "bootstrap peer table");
	bs->out_fd = ibc_malloc((size_t)nranks * sizeof(int), "bootstrap connections");
	bs->out_lock = ibc_malloc((size_t)nranks * sizeof(pthread_mutex_t), "bootstrap locks");
	bs->peer_state = ibc_calloc((size_t)nranks, sizeof(int), "bootstrap peer states");
	bs->hub_seen = ibc_calloc((size_t)nranks, 1, "bootstrap hub table");
	if (!bs->peers || !bs->out_fd || !bs->out_lock || !bs->peer_state || !bs->hub_seen) {
		ibc_free(bs->peers);
		ibc_free(bs->out_fd);
		ibc_free(bs->out_lock);
		ibc_free(bs->peer_state);
		ibc_free(bs->hub_seen);
		pthread_mutex_destroy(&bs->qlock);
		pthread_cond_destroy(&bs->qcond);
		pthread_mutex_destroy(&bs->olock);
		pthread_cond_destroy(&bs->ocond);
		ibc_free(bs);
		return IBC_ERR_NO_MEMORY;
	}
	for (i = 0; i < nranks; i++) {
		bs->out_fd[i] = -1;
		pthread_mutex_init(&bs->out_lock[i], NULL);
	}
	bs->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (bs->wake_fd < 0) {
		IBC_LOG_ERROR(BOOT, "eventfd failed: %s", strerror(errno));
		ibc_bootstrap_destroy(bs, 0);
		return IBC_ERR_SYSTEM;
	}
	*bs_p = bs;
	return IBC_OK;
}

/* listen on the interface chosen for this job; fill @info with our address */
static ibc_status_t boot_listen(int family, int want_lo, int *fd_p, union ibc_sockaddr *addr,
				struct ibc_peer_info *info)
{
	char ifname[32];

	IBC_CHECK(ibc_sock_pick_addr(family, want_lo, addr, ifname));
	IBC_CHECK(ibc_sock_listen(addr, 256, 0, fd_p));
	memset(info, 0, sizeof(*info));
	if (gethostname(info->host, sizeof(info->host)) != 0)
		snprintf(info->host, sizeof(info->host), "unknown");
	info->host[sizeof(info->host) - 1] = '\0';
	read_boot_id(info->boot_id, sizeof(info->boot_id));
	info->pid = (uint32_t)getpid();
	sockaddr_to_info(addr, info);
	IBC_LOG_DEBUG(BOOT, "listening on interface %s", ifname);
	return IBC_OK;
}

/* rank > 0: connect the liveness hub to rank 0 */
static ibc_status_t boot_connect_hub(struct ibc_bootstrap *bs)
{
	struct ibc_boot_hello h;
	union ibc_sockaddr a;
	int fd;

	memset(&h, 0, sizeof(h));
	h.kind = IBC_BOOT_KIND_HUB;
	h.src = bs->rank;
	h.dst = 0;
	h.nranks = bs->nranks;
	memcpy(h.comm_id, bs->comm_id, sizeof(h.comm_id));
	info_to_sockaddr(&bs->peers[0], &a);
	IBC_CHECK(boot_connect_log(bs->secret, &a, &h, ibc_time_ms() + (uint64_t)bs->timeout_ms,
				   "rank 0 (liveness hub)", 0, &bs->stop_io, &fd));
	ibc_sock_set_nonblock(fd, 1);
	if (svc_add_conn(bs, fd, CS_HUB, 0) != 0) {
		close(fd);
		return IBC_ERR_NO_MEMORY;
	}
	bs->hub_fd = fd;
	return IBC_OK;
}

static ibc_status_t boot_start(struct ibc_bootstrap *bs)
{
	int ret;

	if (bs->rank > 0)
		IBC_CHECK(boot_connect_hub(bs));
	bs->start_ms = ibc_time_ms();
	ret = pthread_create(&bs->thread, NULL, svc_thread, bs);
	if (ret) {
		IBC_LOG_ERROR(BOOT, "cannot start the bootstrap service thread: %s", strerror(ret));
		return IBC_ERR_SYSTEM;
	}
	bs->thread_started = 1;
	return IBC_OK;
}

/*
 * Best effort, bounded by 2 s: this rank cannot join (a local failure before
 * it reached the root). Join anyway and send FAIL with @st and the reason,
 * so that the root fails the ranks that joined at once, naming this one,
 * instead of letting them wait for IBC_BOOTSTRAP_TIMEOUT_MS. The caller's
 * ibc_last_error() text is kept.
 */
void ibc_bootstrap_report_join_failure(const struct ibc_boot_uid *uid, int rank, int nranks,
				       ibc_status_t st)
{
	struct ibc_boot_hello h;
	union ibc_sockaddr root;
	uint8_t buf[4 + IBC_BOOT_TEXT_MAX];
	char saved[IBC_BOOT_TEXT_MAX];
	char why[IBC_BOOT_TEXT_MAX + 256];
	size_t len;
	int final;
	int fd = -1;

	snprintf(saved, sizeof(saved), "%s", ibc_last_error());
	memset(&h, 0, sizeof(h));
	h.kind = IBC_BOOT_KIND_JOIN;
	h.tag = IBC_BOOT_JOIN_TAG_FAILED;
	h.src = rank;
	h.dst = -1;
	h.nranks = nranks;
	h.has_info = 1;
	if (gethostname(h.info.host, sizeof(h.info.host)) != 0)
		snprintf(h.info.host, sizeof(h.info.host), "unknown");
	h.info.host[sizeof(h.info.host) - 1] = '\0';
	h.info.pid = (uint32_t)getpid();
	h.info.family = uid->family;
	uid_to_sockaddr(uid, &root);
	if (boot_connect_auth(uid->secret, &root, &h, ibc_time_ms() + 2000, "bootstrap root", 1, NULL,
			      &fd, why, sizeof(why), &final) == IBC_OK) {
		len = ibc_boot_pack_fail(st, saved[0] ? boot_local_reason() : "local error", buf,
					 sizeof(buf));
		frame_write(fd, IBC_BOOT_FAIL, buf, len, ibc_time_ms() + 500);
		close(fd);
	}
	ibc_log_set_last_error(saved);
}

ibc_status_t ibc_bootstrap_create(const struct ibc_boot_uid *uid, int rank, int nranks,
				  ibc_bootstrap_error_fn on_error, void *arg,
				  struct ibc_bootstrap **bs_p)
{
	struct ibc_bootstrap *bs;
	struct ibc_boot_hello h;
	union ibc_sockaddr root;
	uint8_t *buf = NULL;
	size_t cap = IBC_MAX(ibc_boot_table_len(nranks), (size_t)IBC_BOOT_TEXT_MAX);
	size_t len;
	char text[IBC_BOOT_TEXT_MAX];
	uint64_t deadline;
	int attempt;
	int type;
	int fd = -1;
	ibc_status_t st;

	st = boot_alloc(rank, nranks, on_error, arg, &bs);
	if (st != IBC_OK) {
		ibc_bootstrap_report_join_failure(uid, rank, nranks, st);
		return st;
	}
	memcpy(bs->secret, uid->secret, sizeof(bs->secret));
	uid_to_sockaddr(uid, &root);
	IBC_CHECK_GOTO(boot_listen(uid->family, ibc_sock_addr_is_loopback(&root), &bs->listen_fd,
				   &bs->listen_addr, &bs->peers[rank]),
		       st, err_report);
	buf = ibc_malloc(cap, "bootstrap table");
	if (!buf) {
		st = IBC_ERR_NO_MEMORY;
		goto err_report;
	}

	deadline = ibc_time_ms() + (uint64_t)bs->timeout_ms;
	memset(&h, 0, sizeof(h));
	h.kind = IBC_BOOT_KIND_JOIN;
	h.src = rank;
	h.dst = -1;
	h.nranks = nranks;
	h.has_info = 1;
	h.info = bs->peers[rank];
	for (attempt = 0;; attempt++) {
		char why[IBC_BOOT_TEXT_MAX + 256];
		int final;

		/* after a first contact, a refusal means the root finished or died: no retry */
		st = boot_connect_auth(bs->secret, &root, &h, deadline, "bootstrap root",
				       attempt == 0, NULL, &fd, why, sizeof(why), &final);
		if (st == IBC_OK) {
			IBC_LOG_DEBUG(BOOT, "joined the bootstrap root as rank %d of %d; waiting for the others",
				      rank, nranks);
			break;
		}
		if (attempt > 0 && final && st == IBC_ERR_REMOTE && strstr(why, "refused the connection"))
			snprintf(why, sizeof(why), "the bootstrap root stopped accepting connections after a failed handshake: it finished without this rank, or died");
		if (st != IBC_ERR_REMOTE && st != IBC_ERR_TIMEOUT) {
			/* a local failure: tell the root, so that the others need not wait */
			IBC_LOG_ERROR(BOOT, "%s", why);
			goto err_report;
		}
		if (final || st == IBC_ERR_TIMEOUT || ibc_time_ms() + 100 >= deadline) {
			/* refused for good, or no time left: the root knows or cannot be told */
			IBC_LOG_ERROR(BOOT, "%s", why);
			goto err_close;
		}
		/* dropped on the way (a reset, or a flood made the root shed us): again */
		IBC_LOG_WARN(BOOT, "%s; trying again", why);
		usleep(50 * 1000);
	}
	/* the root answers when everyone joined, or fails at its own deadline */
	st = frame_read_blocking(fd, nranks, deadline + 5000, NULL, &type, buf, cap, &len);
	if (st == IBC_OK && type == IBC_BOOT_FAIL) {
		if (ibc_boot_parse_fail(buf, len, &st, text, sizeof(text)) != 0) {
			snprintf(text, sizeof(text), "malformed failure report");
			st = IBC_ERR_REMOTE;
		}
		IBC_LOG_ERROR(BOOT, "bootstrap failed at the root: %s", text);
		goto err_close;
	}
	if (st != IBC_OK || type != IBC_BOOT_TABLE ||
	    ibc_boot_parse_table(buf, len, nranks, bs->comm_id, bs->peers) != 0) {
		if (st == IBC_ERR_TIMEOUT)
			IBC_LOG_ERROR(BOOT, "no answer from the bootstrap root within %lld ms: other ranks did not join",
				      (long long)bs->timeout_ms);
		else
			IBC_LOG_ERROR(BOOT, "bootstrap root sent no valid table (%s)",
				      st != IBC_OK ? ibc_status_str(st) : "malformed frame");
		st = st == IBC_ERR_TIMEOUT ? IBC_ERR_TIMEOUT : IBC_ERR_REMOTE;
		goto err_close;
	}
	close(fd);
	fd = -1;
	ibc_free(buf);
	buf = NULL;
	IBC_CHECK_GOTO(boot_start(bs), st, err_destroy);
	*bs_p = bs;
	return IBC_OK;
err_report:
	ibc_bootstrap_report_join_failure(uid, rank, nranks, st);
err_close:
	ibc_sock_close(fd);
	ibc_free(buf);
err_destroy:
	ibc_bootstrap_destroy(bs, 0);
	return st;
}

ibc_status_t ibc_bootstrap_split(struct ibc_bootstrap *parent, int color, int key,
				 uint64_t split_seq, ibc_bootstrap_error_fn on_error, void *arg,
				 struct ibc_bootstrap **bs_p)
{
	enum { ENTRY = 8 + IBC_BOOT_INFO_BYTES };
	struct ibc_peer_info self;
	union ibc_sockaddr addr;
	uint8_t *all = NULL;
	int *members = NULL;
	struct ibc_bootstrap *bs = NULL;
	uint8_t idsrc[IBC_BOOT_COMMID_BYTES + 16];
	int listen_fd = -1;
	int n = parent->nranks;
	int nmembers = 0;
	int newrank = -1;
	int i;
	int j;
	ibc_status_t st;

	*bs_p = NULL;
	if (color >= 0) {
		union ibc_sockaddr pa;

		info_to_sockaddr(&parent->peers[parent->rank], &pa);
		IBC_CHECK(boot_listen(pa.sa.sa_family, ibc_sock_addr_is_loopback(&pa), &listen_fd,
				      &addr, &self));
	}
	all = ibc_calloc((size_t)n, ENTRY, "split table");
	members = ibc_malloc((size_t)n * sizeof(int), "split members");
	if (!all || !members) {
		st = IBC_ERR_NO_MEMORY;
		goto out;
	}
	{
		uint8_t *me = all + (size_t)parent->rank * ENTRY;
		int32_t c32 = color;
		int32_t k32 = key;

		memcpy(me, &c32, 4);
		memcpy(me + 4, &k32, 4);
		if (color >= 0)
			ibc_boot_pack_info(&self, me + 8);
	}
	IBC_CHECK_GOTO(ibc_bootstrap_allgather(parent, all, ENTRY), st, out);
	if (color < 0) {
		st = IBC_OK;
		goto out;
	}
	/* members of my color, sorted by (key, parent rank): insertion sort */
	for (i = 0; i < n; i++) {
		int32_t c;
		int32_t k;

		memcpy(&c, all + (size_t)i * ENTRY, 4);
		memcpy(&k, all + (size_t)i * ENTRY + 4, 4);
		if (c != color)
			continue;
		for (j = nmembers; j > 0; j--) {
			int32_t kj;

			memcpy(&kj, all + (size_t)members[j - 1] * ENTRY + 4, 4);
			if (kj < k || (kj == k && members[j - 1] < i))
				break;
			members[j] = members[j - 1];
		}
		members[j] = i;
		nmembers++;
	}
	for (i = 0; i < nmembers; i++)
		if (members[i] == parent->rank)
			newrank = i;
	IBC_CHECK_GOTO(boot_alloc(newrank, nmembers, on_error, arg, &bs), st, out);
	memcpy(bs->secret, parent->secret, sizeof(bs->secret));
	memcpy(idsrc, parent->comm_id, IBC_BOOT_COMMID_BYTES);
	memcpy(idsrc + IBC_BOOT_COMMID_BYTES, &split_seq, 8);
	memcpy(idsrc + IBC_BOOT_COMMID_BYTES + 8, &color, 4);
	memset(idsrc + IBC_BOOT_COMMID_BYTES + 12, 0, 4);
	ibc_boot_derive_id(idsrc, sizeof(idsrc), bs->comm_id);
	for (i = 0; i < nmembers; i++) {
		if (ibc_boot_unpack_info(all + (size_t)members[i] * ENTRY + 8, &bs->peers[i]) != 0) {
			IBC_LOG_ERROR(BOOT, "split: malformed address of parent rank %d", members[i]);
			st = IBC_ERR_INTERNAL;
			goto err_destroy;
		}
	}
	bs->listen_fd = listen_fd;
	bs->listen_addr = addr;
	listen_fd = -1;
	IBC_CHECK_GOTO(boot_start(bs), st, err_destroy);
	*bs_p = bs;
	st = IBC_OK;
	goto out;
err_destroy:
	ibc_bootstrap_destroy(bs, 0);
out:
	ibc_sock_close(listen_fd);
	ibc_free(all);
	ibc_free(members);
	return st;
}

void ibc_bootstrap_destroy(struct ibc_bootstrap *bs, int abort)
{
	struct boot_msg *m;
	struct boot_stream *s;
	int i;

	if (!bs)
		return;
	if (bs->thread_started) {
		uint64_t one = 1;

		/* say goodbye (or abort) on the hub before the connections close */
		ibc_bootstrap_announce_leave(bs, abort, "");
		/* the service thread sends what is posted, then exits */
		__atomic_store_n(&bs->stop, 1, __ATOMIC_RELEASE);
		if (write(bs->wake_fd, &one, sizeof(one)) < 0) {
			/* the thread also wakes at its next heartbeat */
		}
		pthread_join(bs->thread, NULL);
	}
	while (bs->nconns)
		svc_drop_conn(bs, bs->nconns - 1, 0);
	free(bs->conns);
	for (i = 0; bs->out_fd && i < bs->nranks; i++) {
		ibc_sock_close(bs->out_fd[i]);
		pthread_mutex_destroy(&bs->out_lock[i]);
	}
	while ((m = bs->msgs)) {
		bs->msgs = m->next;
		free(m);
	}
	while ((s = bs->streams)) {
		bs->streams = s->next;
		close(s->fd);
		free(s);
	}
	ibc_sock_close(bs->listen_fd);
	ibc_sock_close(bs->wake_fd);
	pthread_mutex_destroy(&bs->qlock);
	pthread_cond_destroy(&bs->qcond);
	pthread_mutex_destroy(&bs->olock);
	pthread_cond_destroy(&bs->ocond);
	ibc_free(bs->peers);
	ibc_free(bs->out_fd);
	ibc_free(bs->out_lock);
	ibc_free(bs->peer_state);
	ibc_free(bs->hub_seen);
	ibc_free(bs);
}

/* ------------------------------------------------------------------------ */
/* accessors and messaging                                                  */
/* ------------------------------------------------------------------------ */

int ibc_bootstrap_rank(const struct ibc_bootstrap *bs)
{
	return bs->rank;
}

int ibc_bootstrap_nranks(const struct ibc_bootstrap *bs)
{
	return bs->nranks;
}

const struct ibc_peer_info *ibc_bootstrap_peer(const struct ibc_bootstrap *bs, int rank)
{
	return &bs->peers[rank];
}

const struct ibc_peer_info *ibc_bootstrap_self(const struct ibc_bootstrap *bs)
{
	return &bs->peers[bs->rank];
}

const uint8_t *ibc_bootstrap_comm_id(const struct ibc_bootstrap *bs)
{
	return bs->comm_id;
}

int ibc_bootstrap_same_host(const struct ibc_bootstrap *bs, int rank)
{
	const struct ibc_peer_info *a = &bs->peers[bs->rank];
	const struct ibc_peer_info *b = &bs->peers[rank];

	return !strcmp(a->host, b->host) && !strcmp(a->boot_id, b->boot_id);
}

/* the HELLO of a @kind connection to @peer, its address, and its name for log lines */
static void boot_hello_to(const struct ibc_bootstrap *bs, int peer, int kind, uint32_t tag,
			  struct ibc_boot_hello *h, union ibc_sockaddr *a, char what[128])
{
	memset(h, 0, sizeof(*h));
	h->kind = (uint16_t)kind;
	h->tag = tag;
	h->src = bs->rank;
	h->dst = peer;
	h->nranks = bs->nranks;
	memcpy(h->comm_id, bs->comm_id, sizeof(h->comm_id));
	info_to_sockaddr(&bs->peers[peer], a);
	snprintf(what, 128, "rank %d (host %s)", peer, bs->peers[peer].host);
}

static ibc_status_t boot_open(struct ibc_bootstrap *bs, int peer, int kind, uint32_t tag, int *fd_p)
{
	struct ibc_boot_hello h;
	union ibc_sockaddr a;
	char what[128];

	boot_hello_to(bs, peer, kind, tag, &h, &a, what);
	return boot_connect_log(bs->secret, &a, &h, ibc_time_ms() + (uint64_t)bs->timeout_ms, what,
				0, &bs->stop_io, fd_p);
}

void ibc_bootstrap_set_wait_fn(struct ibc_bootstrap *bs, ibc_bootstrap_wait_fn fn)
{
	__atomic_store_n(&bs->wait_fn, fn, __ATOMIC_RELEASE);
}

ibc_status_t ibc_bootstrap_query_wait(struct ibc_bootstrap *bs, int peer, int64_t max_ms,
				      struct ibc_boot_waitstate *ws)
{
	struct ibc_boot_hello h;
	union ibc_sockaddr a;
	uint8_t buf[IBC_BOOT_WAITSTATE_BYTES];
	uint64_t deadline = ibc_time_ms() + (uint64_t)IBC_MAX(max_ms, 1);
	char why[IBC_BOOT_TEXT_MAX + 256];
	char what[128];
	size_t len;
	int final;
	int type;
	int fd = -1;
	ibc_status_t st;

	if (peer < 0 || peer >= bs->nranks || peer == bs->rank)
		return IBC_ERR_INVALID_ARG;
	boot_hello_to(bs, peer, IBC_BOOT_KIND_WAITQ, 0, &h, &a, what);
	st = boot_connect_auth(bs->secret, &a, &h, deadline, what, 0, NULL, &fd, why, sizeof(why),
			       &final);
	if (st != IBC_OK) {
		IBC_LOG_DEBUG(BOOT, "wait-for query: %s", why);
		return st == IBC_ERR_TIMEOUT ? IBC_ERR_TIMEOUT : IBC_ERR_REMOTE;
	}
	st = frame_read_blocking(fd, bs->nranks, deadline, NULL, &type, buf, sizeof(buf), &len);
	close(fd);
	if (st == IBC_ERR_TIMEOUT)
		return st;
	if (st != IBC_OK || type != IBC_BOOT_WAITSTATE || ibc_boot_parse_waitstate(buf, len, ws) != 0 ||
	    ws->peer >= bs->nranks) {
		IBC_LOG_DEBUG(BOOT, "wait-for query: %s sent no valid answer (%s)", what,
			      ibc_status_str(st));
		return IBC_ERR_REMOTE;
	}
	return IBC_OK;
}

ibc_status_t ibc_bootstrap_send(struct ibc_bootstrap *bs, int peer, uint32_t tag,
				const void *buf, size_t nbytes)
{
	uint8_t hdr[IBC_BOOT_HDR_BYTES + 4];
	uint64_t deadline = ibc_time_ms() + (uint64_t)bs->timeout_ms;
	ibc_status_t st = IBC_OK;
	int err = 0;

	if (peer < 0 || peer >= bs->nranks || peer == bs->rank || nbytes > IBC_BOOT_MAX_MSG_BYTES) {
		IBC_LOG_ERROR(BOOT, "bootstrap send: bad peer %d or size %zu", peer, nbytes);
		return IBC_ERR_INVALID_ARG;
	}
	pthread_mutex_lock(&bs->out_lock[peer]);
	if (bs->out_fd[peer] < 0)
		st = boot_open(bs, peer, IBC_BOOT_KIND_MSG, 0, &bs->out_fd[peer]);
	if (st == IBC_OK) {
		ibc_boot_put_hdr(hdr, IBC_BOOT_MSG, (uint32_t)(nbytes + 4));
		memcpy(hdr + IBC_BOOT_HDR_BYTES, &tag, 4);
		st = ibc_sock_write_all_cancel(bs->out_fd[peer], hdr, sizeof(hdr), deadline,
					       &bs->stop_io, &err);
		if (st == IBC_OK && nbytes)
			st = ibc_sock_write_all_cancel(bs->out_fd[peer], buf, nbytes, deadline,
						       &bs->stop_io, &err);
		if (st != IBC_OK) {
			if (err == ECANCELED)
				IBC_LOG_DEBUG(BOOT, "bootstrap message to rank %d abandoned: the communicator failed",
					      peer);
			else
				IBC_LOG_ERROR(BOOT, "bootstrap message to rank %d (host %s) failed: %s",
					      peer, bs->peers[peer].host,
					      err ? strerror(err) : ibc_status_str(st));
			ibc_sock_close(bs->out_fd[peer]);
			bs->out_fd[peer] = -1;
		}
	}
	pthread_mutex_unlock(&bs->out_lock[peer]);
	return st;
}

ibc_status_t ibc_bootstrap_try_recv(struct ibc_bootstrap *bs, int peer, uint32_t tag,
				    void *buf, size_t nbytes, int *got_p)
{
	struct boot_msg **pp;
	struct boot_msg *m = NULL;

	*got_p = 0;
	pthread_mutex_lock(&bs->qlock);
	for (pp = &bs->msgs; *pp; pp = &(*pp)->next) {
		if ((*pp)->src == peer && (*pp)->tag == tag) {
			m = *pp;
			*pp = m->next;
			if (!*pp)
				bs->msgs_tail = pp;
			break;
		}
	}
	pthread_mutex_unlock(&bs->qlock);
	if (!m)
		return IBC_OK;
	if (m->len != nbytes) {
		IBC_LOG_ERROR(BOOT, "bootstrap message from rank %d tag 0x%x has %zu bytes, expected %zu",
			      peer, tag, m->len, nbytes);
		free(m);
		return IBC_ERR_INVALID_USAGE;
	}
	memcpy(buf, m->data, nbytes);
	free(m);
	*got_p = 1;
	return IBC_OK;
}

/* blocking helpers wait on the queue condition, bounded, and stop early on failure */
static ibc_status_t boot_wait_queue(struct ibc_bootstrap *bs, uint64_t deadline_ms)
{
	struct timespec ts;
	uint64_t now = ibc_time_ms();

	if (now >= deadline_ms)
		return IBC_ERR_TIMEOUT;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)IBC_MIN(deadline_ms - now, 100) * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&bs->qlock);
	pthread_cond_timedwait(&bs->qcond, &bs->qlock, &ts);
	pthread_mutex_unlock(&bs->qlock);
	return IBC_OK;
}

ibc_status_t ibc_bootstrap_recv(struct ibc_bootstrap *bs, int peer, uint32_t tag, void *buf,
				size_t nbytes)
{
	uint64_t deadline = ibc_time_ms() + (uint64_t)bs->timeout_ms;

	for (;;) {
		int got = 0;

		IBC_CHECK(ibc_bootstrap_try_recv(bs, peer, tag, buf, nbytes, &got));
		if (got)
			return IBC_OK;
		if (__atomic_load_n(&bs->stop_io, __ATOMIC_ACQUIRE)) {
			IBC_LOG_DEBUG(BOOT, "bootstrap recv from rank %d abandoned: the communicator failed",
				      peer);
			return IBC_ERR_REMOTE;
		}
		if (boot_wait_queue(bs, deadline) != IBC_OK) {
			IBC_LOG_ERROR(BOOT, "no bootstrap message from rank %d (host %s) within %lld ms",
				      peer, bs->peers[peer].host, (long long)bs->timeout_ms);
			return IBC_ERR_TIMEOUT;
		}
	}
}

ibc_status_t ibc_bootstrap_allgather(struct ibc_bootstrap *bs, void *buf, size_t nbytes)
{
	int n = bs->nranks;
	int next = (bs->rank + 1) % n;
	int prev = (bs->rank + n - 1) % n;
	uint8_t *p = buf;
	int s;

	for (s = 0; s < n - 1; s++) {
		int sblk = (bs->rank - s + n) % n;
		int rblk = (bs->rank - s - 1 + n) % n;

		IBC_CHECK(ibc_bootstrap_send(bs, next, IBC_BOOT_TAG_INTERNAL + 1,
					     p + (size_t)sblk * nbytes, nbytes));
		IBC_CHECK(ibc_bootstrap_recv(bs, prev, IBC_BOOT_TAG_INTERNAL + 1,
					     p + (size_t)rblk * nbytes, nbytes));
	}
	return IBC_OK;
}

ibc_status_t ibc_bootstrap_barrier(struct ibc_bootstrap *bs)
{
	uint8_t *tmp;
	ibc_status_t st;

	tmp = ibc_calloc((size_t)bs->nranks, 1, "bootstrap barrier");
	if (!tmp)
		return IBC_ERR_NO_MEMORY;
	st = ibc_bootstrap_allgather(bs, tmp, 1);
	ibc_free(tmp);
	return st;
}

ibc_status_t ibc_bootstrap_connect_stream(struct ibc_bootstrap *bs, int peer, uint32_t tag,
					  int *fd_p)
{
	return boot_open(bs, peer, IBC_BOOT_KIND_STREAM, tag, fd_p);
}

ibc_status_t ibc_bootstrap_try_accept_stream(struct ibc_bootstrap *bs, int peer, uint32_t tag,
					     int *fd_p)
{
	struct boot_stream **pp;
	struct boot_stream *s = NULL;

	*fd_p = -1;
	pthread_mutex_lock(&bs->qlock);
	for (pp = &bs->streams; *pp; pp = &(*pp)->next) {
		if ((*pp)->src == peer && (*pp)->tag == tag) {
			s = *pp;
			*pp = s->next;
			break;
		}
	}
	pthread_mutex_unlock(&bs->qlock);
	if (s) {
		*fd_p = s->fd;
		free(s);
	}
	return IBC_OK;
}
