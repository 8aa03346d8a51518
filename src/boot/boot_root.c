/* SPDX-License-Identifier: MIT */
/*
 * boot_root.c - the bootstrap root (ibc_bootstrap_root_start): a detached
 * thread that authenticates the ranks' JOIN hellos, gathers every rank's
 * address, host and boot id, and sends the table to all, or a FAIL frame
 * naming the missing ranks at the deadline.
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
#include "boot/boot_internal.h"
#include "boot/boot_wire.h"
#include "boot/bootstrap.h"

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
	/* a rank gave another job size than the first (root_on_hello) */
	int size_conflict;
	int conflict_rank;
	int conflict_n;
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
		ibc_boot_stranger_warn(&r->rl, "bootstrap root: rejected connection from %s: %s", c->addr,
			      text);
	else
		IBC_LOG_WARN(BOOT, "bootstrap root: rejected connection from %s: %s", c->addr, text);
	ibc_boot_frame_write(c->fd, IBC_BOOT_REJECT, text, strlen(text), ibc_time_ms() + 200);
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
	ibc_boot_frame_rd_reset(&c->rd);
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
		/*
		 * The job cannot start: this rank will never join. Say so to
		 * every rank now, not later as "ranks that never connected" or
		 * "no valid table": the ranks that joined first (root_fail()),
		 * then this one (the caller), since this one may host the root
		 * and end it as soon as it reads its reply.
		 */
		if (r->failed) {
			root_reject(r, c, 0, "rank %d says the job has %d ranks, the first rank to join said %d: every rank must be given the same size (IBC_NRANKS or the launcher's)",
				    h.src, h.nranks, r->nranks);
			return -1;
		}
		r->size_conflict = 1;
		r->conflict_rank = h.src;
		r->conflict_n = h.nranks;
		return -1;
	}
	if (h.tag == IBC_BOOT_JOIN_TAG_FAILED) {
		/* a rank that cannot join: welcome it, its FAIL frame comes next */
		ibc_boot_mac_welcome(r->secret, c->nonce_a, h.nonce_c, mac);
		if (ibc_boot_frame_write(c->fd, IBC_BOOT_WELCOME, mac, sizeof(mac), ibc_time_ms() + 1000) !=
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
	if (ibc_boot_frame_write(c->fd, IBC_BOOT_WELCOME, mac, sizeof(mac), ibc_time_ms() + 1000) != IBC_OK)
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
		if (ibc_boot_frame_write(c->fd, IBC_BOOT_TABLE, table, len, deadline) != IBC_OK)
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
					ibc_boot_frame_write(r->conns[i].fd, IBC_BOOT_FAIL, buf, len, deadline);
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
			ibc_boot_frame_write(r->conns[i].fd, IBC_BOOT_FAIL, buf, len, deadline);
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
					ibc_boot_stranger_warn(&r->rl, "bootstrap root: dropped connection from %s: no valid hello within %lld ms",
						      c->addr, (long long)r->handshake_ms);
					root_close(r, i);
				}
				continue;
			}
			ret = ibc_boot_frame_rd_step(c->fd, 0,
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
					ibc_boot_stranger_warn(&r->rl, "bootstrap root: dropped connection from %s: malformed frame",
						      c->addr);
				root_close(r, i);
				continue;
			}
			if (root_on_hello(r, i) != 0) {
				if (r->size_conflict && !r->failed) {
					char text[IBC_BOOT_TEXT_MAX - 64];
					int fd = c->fd;
					int k;

					snprintf(text, sizeof(text),
						 "rank %d says the job has %d ranks, the first rank to join said %d: every rank must be given the same size (IBC_NRANKS or the launcher's)",
						 r->conflict_rank, r->conflict_n, r->nranks);
					/*
					 * Rank 0 hosts the root and may end it (and its process)
					 * as soon as it is told: it goes last. So the rank with
					 * the other size is told first, unless it is rank 0
					 * (then the joined ranks first). Until 2026-12-02 the
					 * joined ranks always went first, and under load rank 0
					 * exited before rank 1 had its reason.
					 */
					if (r->conflict_rank != 0) {
						root_reject(r, c, 0, "%s", text);
						root_close(r, i);
						root_fail(r, IBC_ERR_INVALID_USAGE, "%s", text);
						break;
					}
					root_fail(r, IBC_ERR_INVALID_USAGE, "%s", text);
					for (k = 0; k < r->nconns && r->conns[k].fd != fd; k++)
						;
					if (k < r->nconns) {
						root_reject(r, &r->conns[k], 0, "%s", r->fail_text);
						root_close(r, k);
					}
					break; /* indexes changed: poll again */
				}
				root_close(r, i);
				continue;
			}
			ibc_boot_frame_rd_reset(&c->rd);
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
						int idle = ibc_boot_conn_idle(v->fd, &v->rd);

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
						ibc_boot_stranger_warn(&r->rl, "bootstrap root: more than %d unauthenticated connections; dropping %s",
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
				ibc_boot_peer_addr_text(fd, c->addr, sizeof(c->addr));
				if (ibc_random_bytes(c->nonce_a, sizeof(c->nonce_a)) != IBC_OK) {
					close(fd);
					continue;
				}
				memcpy(ch, &ver, 4);
				memcpy(ch + 4, c->nonce_a, IBC_BOOT_NONCE_BYTES);
				if (ibc_boot_frame_write(fd, IBC_BOOT_CHALLENGE, ch, sizeof(ch),
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
