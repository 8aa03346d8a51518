/* SPDX-License-Identifier: MIT */
/*
 * boot_frame.c - the bootstrap's wire: length-prefixed frames read and
 * written with deadlines, the authenticated connection handshake (HMAC of
 * both nonces with the job's secret), the unique id codec and address
 * conversions, and the rate-limited warning about strangers.
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
#include "base/util.h"
#include "boot/boot_internal.h"
#include "boot/boot_wire.h"
#include "boot/bootstrap.h"

void ibc_boot_stranger_warn(struct boot_ratelog *rl, const char *fmt, ...)
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

ibc_status_t ibc_boot_frame_write(int fd, int type, const void *payload, size_t len,
				uint64_t deadline_ms)
{
	return frame_write_c(fd, type, payload, len, deadline_ms, NULL);
}

/*
 * Read one whole frame before @deadline_ms into a buffer of @cap bytes.
 * Errors: IBC_ERR_REMOTE (EOF, or *@cancel_p set), IBC_ERR_TIMEOUT,
 * IBC_ERR_INVALID_USAGE (malformed header or a frame larger than @cap).
 */
ibc_status_t ibc_boot_frame_read(int fd, int nranks, uint64_t deadline_ms,
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
 * (rd->type, rd->buf, rd->len; the caller consumes it and calls ibc_boot_frame_rd_reset),
 * 0 when more bytes are needed, -1 on EOF or reset, -2 on error or malformed input.
 */
int ibc_boot_frame_rd_step(int fd, int nranks, int only_type, struct frame_rd *rd)
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
int ibc_boot_conn_idle(int fd, const struct frame_rd *rd)
{
	int avail = 0;

	if (rd->hdr_got)
		return 0;
	return ioctl(fd, FIONREAD, &avail) != 0 || avail == 0;
}

void ibc_boot_frame_rd_reset(struct frame_rd *rd)
{
	free(rd->buf);
	memset(rd, 0, sizeof(*rd));
}

void ibc_boot_peer_addr_text(int fd, char *buf, size_t len)
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
ibc_status_t ibc_boot_connect_auth(const uint8_t *secret, const union ibc_sockaddr *addr,
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
		snprintf(why, why_len, "%s at %s refused the connection: its process exited or crashed, or it destroyed or aborted the communicator",
			 what, astr);
		*final_p = 1;
		return st;
	}
	if (st != IBC_OK) {
		snprintf(why, why_len, "cannot connect to %s at %s: %s", what, astr,
			 ibc_log_last_cause());
		return st;
	}
	st = ibc_boot_frame_read(fd, h->nranks, deadline_ms, cancel_p, &type, buf, sizeof(buf),
				 &len);
	if (st == IBC_ERR_REMOTE && !(cancel_p && __atomic_load_n(cancel_p, __ATOMIC_ACQUIRE))) {
		/* accepted, then closed: the listener was closing as this rank connected */
		snprintf(why, why_len, "%s at %s closed the connection before the handshake: it is leaving the communicator (destroy, abort) or its process exited or crashed",
			 what, astr);
		goto err_close;
	}
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
		st = ibc_boot_frame_read(fd, h->nranks, deadline_ms, cancel_p, &type, buf,
					 sizeof(buf), &len);
	if (st == IBC_ERR_REMOTE && !(cancel_p && __atomic_load_n(cancel_p, __ATOMIC_ACQUIRE))) {
		snprintf(why, why_len, "%s at %s closed the connection during the handshake: it is leaving the communicator (destroy, abort) or its process exited or crashed",
			 what, astr);
		goto err_close;
	}
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

/* ibc_boot_connect_auth() that logs its failure (at DEBUG when cancelled) */
ibc_status_t ibc_boot_connect_log(const uint8_t *secret, const union ibc_sockaddr *addr,
				     struct ibc_boot_hello *h, uint64_t deadline_ms,
				     const char *what, int retry_refused, const int *cancel_p,
				     int *fd_p)
{
	char why[IBC_BOOT_TEXT_MAX + 256];
	int final;
	ibc_status_t st = ibc_boot_connect_auth(secret, addr, h, deadline_ms, what, retry_refused,
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

void ibc_boot_uid_to_sockaddr(const struct ibc_boot_uid *u, union ibc_sockaddr *a)
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

void ibc_boot_info_to_sockaddr(const struct ibc_peer_info *pi, union ibc_sockaddr *a)
{
	struct ibc_boot_uid u = { .family = pi->family, .port = pi->port };

	memcpy(u.addr, pi->addr, 16);
	ibc_boot_uid_to_sockaddr(&u, a);
}

void ibc_boot_sockaddr_to_info(const union ibc_sockaddr *a, struct ibc_peer_info *pi)
{
	pi->family = a->sa.sa_family;
	pi->port = ibc_sock_addr_port(a);
	memset(pi->addr, 0, 16);
	if (a->sa.sa_family == AF_INET6)
		memcpy(pi->addr, &a->sin6.sin6_addr, 16);
	else
		memcpy(pi->addr, &a->sin.sin_addr, 4);
}
