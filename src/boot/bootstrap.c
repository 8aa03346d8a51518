/* SPDX-License-Identifier: MIT */
/*
 * bootstrap.c - the out-of-band network of a communicator (bootstrap.h):
 * creation (join through the root, or split from a parent), destruction,
 * the accessors, tagged messages, allgather, barrier and streams.
 *
 * Design (after NCCL's bootstrap.cc, with authentication and liveness):
 *  - A root thread (boot_root.c) accepts JOIN hellos that prove the secret,
 *    gathers every rank's struct ibc_peer_info and sends the full table to
 *    all, or a FAIL frame naming the missing ranks on timeout.
 *  - Each rank listens on one socket. Its service thread (boot_svc.c)
 *    accepts, runs the handshake of every incoming connection as a
 *    nonblocking state machine with a deadline (a flood or slowloris costs
 *    one pollfd each and ends at IBC_BOOTSTRAP_HANDSHAKE_MS), then queues
 *    tagged messages (MSG), hands streams to transports (STREAM), or
 *    watches liveness (HUB).
 *  - Liveness (IBC_LIVENESS=ring, the default): rank r keeps a HUB
 *    connection to rank r+1, so each rank is watched by both neighbours;
 *    both ends send a PING every IBC_HEARTBEAT_MS. A closed connection
 *    (process died) or 5 silent intervals (stopped) is reported through the
 *    error callback and flooded round the ring, each rank passing on what
 *    is news to it. IBC_LIVENESS=hub: rank r > 0 connects to rank 0, which
 *    watches all and forwards the news. BYE frames mark clean departures.
 * Outgoing connections (messages, streams, hub) are opened by the calling
 * thread with a blocking, deadline-bounded handshake (boot_frame.c).
 */
#include "config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/socket.h"
#include "base/twait.h"
#include "base/util.h"
#include "boot/boot_internal.h"
#include "boot/boot_wire.h"
#include "boot/bootstrap.h"

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
	bs->watch_pending = -1;
	bs->ring = strcmp(ibc_param_liveness(), "hub") != 0;
	if (bs->ring && strcmp(ibc_param_liveness(), "ring") != 0)
		IBC_LOG_WARN(ENV, "IBC_LIVENESS=%s is not ring or hub; using ring", ibc_param_liveness());
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
	ibc_boot_sockaddr_to_info(addr, info);
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
	ibc_boot_info_to_sockaddr(&bs->peers[0], &a);
	IBC_CHECK(ibc_boot_connect_log(bs->secret, &a, &h, ibc_time_ms() + (uint64_t)bs->timeout_ms,
				   "rank 0 (liveness hub)", 0, &bs->stop_io, &fd));
	ibc_sock_set_nonblock(fd, 1);
	if (ibc_boot_svc_add_conn(bs, fd, CS_HUB, 0) != 0) {
		close(fd);
		return IBC_ERR_NO_MEMORY;
	}
	bs->hub_fd = fd;
	return IBC_OK;
}

/*
 * Ring of watchers (IBC_LIVENESS=ring): this rank's watch connection to its
 * successor, opened once the service threads run (every rank connects to
 * the next, so connecting before our own thread answers would wait in a
 * circle); the service thread takes it from watch_pending.
 */
static ibc_status_t boot_connect_watch(struct ibc_bootstrap *bs)
{
	int succ = (bs->rank + 1) % bs->nranks;
	struct ibc_boot_hello h;
	union ibc_sockaddr a;
	char what[160];
	uint64_t one = 1;
	int fd;

	memset(&h, 0, sizeof(h));
	h.kind = IBC_BOOT_KIND_HUB;
	h.src = bs->rank;
	h.dst = succ;
	h.nranks = bs->nranks;
	memcpy(h.comm_id, bs->comm_id, sizeof(h.comm_id));
	ibc_boot_info_to_sockaddr(&bs->peers[succ], &a);
	snprintf(what, sizeof(what), "rank %d (host %s, its liveness watcher)", succ,
		 bs->peers[succ].host);
	IBC_CHECK(ibc_boot_connect_log(bs->secret, &a, &h, ibc_time_ms() + (uint64_t)bs->timeout_ms,
				   what, 0, &bs->stop_io, &fd));
	ibc_sock_set_nonblock(fd, 1);
	__atomic_store_n(&bs->watch_pending, fd, __ATOMIC_RELEASE);
	if (write(bs->wake_fd, &one, sizeof(one)) < 0) {
		/* the thread also looks at its next heartbeat */
	}
	return IBC_OK;
}

static ibc_status_t boot_start(struct ibc_bootstrap *bs)
{
	int ret;

	if (!bs->ring && bs->rank > 0)
		IBC_CHECK(boot_connect_hub(bs));
	bs->start_ms = ibc_time_ms();
	ret = pthread_create(&bs->thread, NULL, ibc_boot_svc_thread, bs);
	if (ret) {
		IBC_LOG_ERROR(BOOT, "cannot start the bootstrap service thread: %s", strerror(ret));
		return IBC_ERR_SYSTEM;
	}
	bs->thread_started = 1;
	if (bs->ring && bs->nranks > 1)
		IBC_CHECK(boot_connect_watch(bs));
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
	ibc_boot_uid_to_sockaddr(uid, &root);
	if (ibc_boot_connect_auth(uid->secret, &root, &h, ibc_time_ms() + 2000, "bootstrap root", 1, NULL,
			      &fd, why, sizeof(why), &final) == IBC_OK) {
		len = ibc_boot_pack_fail(st, saved[0] ? ibc_log_last_cause() : "local error", buf,
					 sizeof(buf));
		ibc_boot_frame_write(fd, IBC_BOOT_FAIL, buf, len, ibc_time_ms() + 500);
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
	ibc_boot_uid_to_sockaddr(uid, &root);
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
		st = ibc_boot_connect_auth(bs->secret, &root, &h, deadline, "bootstrap root",
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
			if (st == IBC_ERR_TIMEOUT && strstr(why, "cannot connect"))
				IBC_LOG_ERROR(BOOT, "%s: no root listens there (a unique id serves one communicator creation: its root stops once every rank joined, so an id used before, or one whose creating process exited, never answers; make a new one with ibc_get_unique_id())",
					      why);
			else
				IBC_LOG_ERROR(BOOT, "%s", why);
			goto err_close;
		}
		/* dropped on the way (a reset, or a flood made the root shed us): again */
		IBC_LOG_WARN(BOOT, "%s; trying again", why);
		usleep(50 * 1000);
	}
	/* the root answers when everyone joined, or fails at its own deadline */
	st = ibc_boot_frame_read(fd, nranks, deadline + 5000, NULL, &type, buf, cap, &len);
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

/*
 * A bootstrap made from a parent's (split, shrink) takes the listener its
 * rank opened for it (*@listen_fd becomes -1: the bootstrap owns it) and starts.
 */
static ibc_status_t boot_start_child(struct ibc_bootstrap *bs, int *listen_fd,
				     const union ibc_sockaddr *addr)
{
	bs->listen_fd = *listen_fd;
	bs->listen_addr = *addr;
	*listen_fd = -1;
	return boot_start(bs);
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

		ibc_boot_info_to_sockaddr(&parent->peers[parent->rank], &pa);
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
	IBC_CHECK_GOTO(boot_start_child(bs, &listen_fd, &addr), st, err_destroy);
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

ibc_status_t ibc_bootstrap_shrink(struct ibc_bootstrap *parent, uint64_t seq, int64_t timeout_ms,
				  ibc_bootstrap_error_fn on_error, void *arg,
				  struct ibc_bootstrap **bs_p, uint8_t *dead_out)
{
	struct ibc_peer_info self;
	union ibc_sockaddr addr;
	union ibc_sockaddr pa;
	struct ibc_bootstrap *bs = NULL;
	uint8_t mine[IBC_BOOT_INFO_BYTES];
	uint8_t *all = NULL;
	uint8_t *dead = NULL;
	uint8_t idsrc[IBC_BOOT_COMMID_BYTES + 16];
	uint32_t flag = 1;
	int listen_fd = -1;
	int n = parent->nranks;
	int nlive = 0;
	int newrank = -1;
	int i;
	ibc_status_t st;

	*bs_p = NULL;
	ibc_boot_info_to_sockaddr(&parent->peers[parent->rank], &pa);
	IBC_CHECK(boot_listen(pa.sa.sa_family, ibc_sock_addr_is_loopback(&pa), &listen_fd, &addr,
			      &self));
	ibc_boot_pack_info(&self, mine);
	all = ibc_calloc((size_t)n, IBC_BOOT_INFO_BYTES, "shrink table");
	dead = ibc_calloc((size_t)n, 1, "shrink dead set");
	if (!all || !dead) {
		st = IBC_ERR_NO_MEMORY;
		goto out;
	}
	/* the survivors and their new listeners, the same on every survivor */
	IBC_CHECK_GOTO(ibc_bootstrap_agree(parent, seq, &flag, mine, sizeof(mine), all, dead,
					   timeout_ms),
		       st, out);
	for (i = 0; i < n; i++) {
		if (dead[i])
			continue;
		if (i == parent->rank)
			newrank = nlive;
		nlive++;
	}
	IBC_CHECK_GOTO(boot_alloc(newrank, nlive, on_error, arg, &bs), st, out);
	memcpy(bs->secret, parent->secret, sizeof(bs->secret));
	/* a new communicator id from the parent's and the agreement's number */
	memcpy(idsrc, parent->comm_id, IBC_BOOT_COMMID_BYTES);
	memcpy(idsrc + IBC_BOOT_COMMID_BYTES, &seq, 8);
	memcpy(idsrc + IBC_BOOT_COMMID_BYTES + 8, "shrk", 4);
	memset(idsrc + IBC_BOOT_COMMID_BYTES + 12, 0, 4);
	ibc_boot_derive_id(idsrc, sizeof(idsrc), bs->comm_id);
	for (i = 0, nlive = 0; i < n; i++) {
		if (dead[i])
			continue;
		if (ibc_boot_unpack_info(all + (size_t)i * IBC_BOOT_INFO_BYTES, &bs->peers[nlive]) != 0) {
			IBC_LOG_ERROR(BOOT, "shrink: malformed address of parent rank %d", i);
			st = IBC_ERR_INTERNAL;
			goto err_destroy;
		}
		nlive++;
	}
	IBC_CHECK_GOTO(boot_start_child(bs, &listen_fd, &addr), st, err_destroy);
	*bs_p = bs;
	if (dead_out)
		memcpy(dead_out, dead, (size_t)n);
	st = IBC_OK;
	goto out;
err_destroy:
	ibc_bootstrap_destroy(bs, 0);
out:
	ibc_sock_close(listen_fd);
	ibc_free(all);
	ibc_free(dead);
	return st;
}

ibc_status_t ibc_bootstrap_grow_id(struct ibc_bootstrap *bs, ibc_unique_id_t *id)
{
	int i;

	if (bs->rank != 0)
		return ibc_bootstrap_recv(bs, 0, IBC_BOOT_TAG_GROW, id, sizeof(*id));
	IBC_CHECK(ibc_bootstrap_root_start(NULL, 0, bs->secret, id));
	for (i = 1; i < bs->nranks; i++)
		IBC_CHECK(ibc_bootstrap_send(bs, i, IBC_BOOT_TAG_GROW, id, sizeof(*id)));
	return IBC_OK;
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
		ibc_boot_svc_drop_conn(bs, bs->nconns - 1, 0);
	ibc_sock_close(__atomic_exchange_n(&bs->watch_pending, -1, __ATOMIC_ACQ_REL));
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
	ibc_boot_info_to_sockaddr(&bs->peers[peer], a);
	snprintf(what, 128, "rank %d (host %s)", peer, bs->peers[peer].host);
}

static ibc_status_t boot_open(struct ibc_bootstrap *bs, int peer, int kind, uint32_t tag, int *fd_p)
{
	struct ibc_boot_hello h;
	union ibc_sockaddr a;
	char what[128];

	boot_hello_to(bs, peer, kind, tag, &h, &a, what);
	return ibc_boot_connect_log(bs->secret, &a, &h, ibc_time_ms() + (uint64_t)bs->timeout_ms, what,
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
	st = ibc_boot_connect_auth(bs->secret, &a, &h, deadline, what, 0, NULL, &fd, why, sizeof(why),
			       &final);
	if (st != IBC_OK) {
		IBC_LOG_DEBUG(BOOT, "wait-for query: %s", why);
		/* this side could not ask (no socket: the open-file limit): nothing of @peer */
		if (st == IBC_ERR_SYSTEM || st == IBC_ERR_NO_MEMORY || st == IBC_ERR_INTERNAL)
			return st;
		return st == IBC_ERR_TIMEOUT ? IBC_ERR_TIMEOUT : IBC_ERR_REMOTE;
	}
	st = ibc_boot_frame_read(fd, bs->nranks, deadline, NULL, &type, buf, sizeof(buf), &len);
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

/*
 * One tagged message to @peer over the cached connection. @ft: a message
 * of the fault-tolerant calls (agreement, shrink), which run after a
 * failure: not cancelled by the communicator's failure (stop_io), quiet
 * when @peer is gone (the caller decides what a lost peer means), and
 * bounded by @deadline_ms.
 */
static ibc_status_t boot_send(struct ibc_bootstrap *bs, int peer, uint32_t tag, const void *buf,
			      size_t nbytes, uint64_t deadline, int ft)
{
	uint8_t hdr[IBC_BOOT_HDR_BYTES + 4];
	const int *cancel = ft ? NULL : &bs->stop_io;
	ibc_status_t st = IBC_OK;
	int err = 0;

	if (peer < 0 || peer >= bs->nranks || peer == bs->rank || nbytes > IBC_BOOT_MAX_MSG_BYTES) {
		IBC_LOG_ERROR(BOOT, "bootstrap send: bad peer %d or size %zu", peer, nbytes);
		return IBC_ERR_INVALID_ARG;
	}
	pthread_mutex_lock(&bs->out_lock[peer]);
	if (bs->out_fd[peer] < 0) {
		if (ft) {
			struct ibc_boot_hello h;
			union ibc_sockaddr a;
			char why[IBC_BOOT_TEXT_MAX + 256];
			char what[128];
			int final;

			boot_hello_to(bs, peer, IBC_BOOT_KIND_MSG, 0, &h, &a, what);
			st = ibc_boot_connect_auth(bs->secret, &a, &h, deadline, what, 0, NULL,
						   &bs->out_fd[peer], why, sizeof(why), &final);
			if (st != IBC_OK)
				IBC_LOG_DEBUG(BOOT, "fault-tolerant message to %s: %s", what, why);
		} else {
			st = boot_open(bs, peer, IBC_BOOT_KIND_MSG, 0, &bs->out_fd[peer]);
		}
	}
	if (st == IBC_OK) {
		ibc_boot_put_hdr(hdr, IBC_BOOT_MSG, (uint32_t)(nbytes + 4));
		memcpy(hdr + IBC_BOOT_HDR_BYTES, &tag, 4);
		st = ibc_sock_write_all_cancel(bs->out_fd[peer], hdr, sizeof(hdr), deadline, cancel,
					       &err);
		if (st == IBC_OK && nbytes)
			st = ibc_sock_write_all_cancel(bs->out_fd[peer], buf, nbytes, deadline, cancel,
						       &err);
		if (st != IBC_OK) {
			if (err == ECANCELED || ft)
				IBC_LOG_DEBUG(BOOT, "bootstrap message to rank %d %s: %s", peer,
					      ft ? "lost" : "abandoned: the communicator failed",
					      err ? strerror(err) : ibc_status_str(st));
			else if (err == EPIPE || err == ECONNRESET)
				/* its end is closed: the peer is gone from the communicator */
				IBC_LOG_ERROR(BOOT, "bootstrap message to rank %d (host %s) failed: %s: rank %d closed its bootstrap connections (it destroyed or aborted the communicator, or exited)",
					      peer, bs->peers[peer].host, strerror(err), peer);
			else
				IBC_LOG_ERROR(BOOT, "bootstrap message to rank %d (host %s) failed: %s",
					      peer, bs->peers[peer].host,
					      err ? strerror(err) : ibc_status_str(st));
			ibc_sock_close(bs->out_fd[peer]);
			bs->out_fd[peer] = -1;
		}
	}
	pthread_mutex_unlock(&bs->out_lock[peer]);
	if (ft && st != IBC_OK && st != IBC_ERR_TIMEOUT)
		st = IBC_ERR_REMOTE;
	return st;
}

ibc_status_t ibc_bootstrap_send(struct ibc_bootstrap *bs, int peer, uint32_t tag,
				const void *buf, size_t nbytes)
{
	return boot_send(bs, peer, tag, buf, nbytes, ibc_time_ms() + (uint64_t)bs->timeout_ms, 0);
}

ibc_status_t ibc_bootstrap_send_ft(struct ibc_bootstrap *bs, int peer, uint32_t tag,
				   const void *buf, size_t nbytes, uint64_t deadline_ms)
{
	return boot_send(bs, peer, tag, buf, nbytes, deadline_ms, 1);
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

ibc_status_t ibc_bootstrap_try_recv_seq(struct ibc_bootstrap *bs, int peer, uint32_t tag,
					uint64_t seq, void *buf, size_t cap, size_t *len_p, int *got_p)
{
	struct boot_msg **pp;
	struct boot_msg *m = NULL;
	struct boot_msg *stale = NULL;

	*got_p = 0;
	pthread_mutex_lock(&bs->qlock);
	for (pp = &bs->msgs; *pp;) {
		struct boot_msg *x = *pp;
		uint64_t xs = 0;

		if (x->src != peer || x->tag != tag) {
			pp = &x->next;
			continue;
		}
		if (x->len >= 8)
			memcpy(&xs, x->data, 8);
		if (x->len >= 8 && xs > seq) {
			pp = &x->next;  /* a later call's: it stays */
			continue;
		}
		*pp = x->next;          /* this call's, or an older one's (or malformed) */
		if (!*pp)
			bs->msgs_tail = pp;
		if (x->len >= 8 && xs == seq) {
			m = x;
			break;
		}
		x->next = stale;
		stale = x;
	}
	pthread_mutex_unlock(&bs->qlock);
	while (stale) {
		struct boot_msg *x = stale;

		stale = x->next;
		free(x);
	}
	if (!m)
		return IBC_OK;
	if (m->len > cap) {
		*len_p = m->len;
		free(m);
		return IBC_ERR_INVALID_USAGE;
	}
	memcpy(buf, m->data, m->len);
	*len_p = m->len;
	free(m);
	*got_p = 1;
	return IBC_OK;
}

/* blocking helpers wait on the queue condition, bounded, and stop early on failure */
static ibc_status_t boot_wait_queue(struct ibc_bootstrap *bs, uint64_t deadline_ms)
{
	uint64_t now = ibc_time_ms();

	if (now >= deadline_ms)
		return IBC_ERR_TIMEOUT;
	pthread_mutex_lock(&bs->qlock);
	ibc_cond_wait_ms(&bs->qcond, &bs->qlock, (long)IBC_MIN(deadline_ms - now, 100));
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
