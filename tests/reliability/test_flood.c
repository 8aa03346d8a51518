/* SPDX-License-Identifier: MIT */
/*
 * test_flood.c - the bootstrap root is flooded while 4 real ranks join and
 * run: they must all succeed, and the root must have shed the attackers.
 *
 * Attackers (threads of this driver, against the root's port taken from the
 * unique id), for as long as the ranks run:
 *   silent     connect and say nothing, holding up to 200 connections
 *              (slowloris; the root keeps at most 128 unauthenticated ones,
 *              shedding silent and old ones first, and drops each one after
 *              IBC_BOOTSTRAP_HANDSHAKE_MS, set to 1000 here)
 *   garbage    connect, send 64 random bytes, wait for the close
 *   secret     connect, answer the challenge with a well-formed JOIN hello
 *              whose HMAC uses a wrong secret; expect REJECT
 *   huge       connect, send a HELLO header claiming 4 GiB; expect a close
 *              (the length is checked before anything is allocated)
 *   trickle    connect, send a valid header one byte per 100 ms
 * Rank 3 starts 2.5 s after the others, so the flood outlasts a handshake
 * deadline while ranks 0-2 wait in init.
 * Checks: every rank's init, 10 allreduces 100 ms apart (exact sums) and
 * destroy succeed within 60 s; each attacker made connections and the root
 * closed them (no wrong-secret hello was ever welcomed and at least 99% got
 * REJECT rather than a plain close, huge headers and garbage were closed,
 * silent and trickling ones were dropped).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/status.h"
#include "boot/boot_wire.h"
#include "boot/bootstrap.h"
#include "ibcoll.h"
#include "rel_harness.h"
#include "tap.h"

#define NR 4
#define SILENT_MAX 200

enum { A_SILENT, A_GARBAGE, A_SECRET, A_HUGE, A_TRICKLE, A_COUNT };
static const char *const a_names[A_COUNT] = { "silent", "garbage", "secret", "huge", "trickle" };

struct attack {
	int kind;
	struct sockaddr_storage ss;
	socklen_t sslen;
	volatile int *stop;
	long nconn;             /* connections made */
	long nclosed;           /* closed by the root */
	long nreject;           /* REJECT frames received */
	long nhello;            /* secret: hellos sent and answered (REJECT or close) */
	long nnoreject;         /* secret: closed after a hello without a REJECT */
	long nwelcome;          /* WELCOME frames received: must stay 0 */
};

static int dial(struct attack *a)
{
	int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { .tv_sec = 2 };

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a->ss, a->sslen) != 0) {
		close(fd);
		return -1;
	}
	a->nconn++;
	return fd;
}

/* read until the root closes (or 2 s); 1 if it closed; counts a REJECT frame */
static int wait_close(struct attack *a, int fd)
{
	uint8_t buf[2048];
	int64_t end = rel_now_ms() + 6000;

	while (rel_now_ms() < end && !*a->stop) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return 1;
		if (n >= IBC_BOOT_HDR_BYTES) {
			struct ibc_boot_hdr h;

			if (ibc_boot_parse_hdr(buf, 0, &h) == 0 && h.type == IBC_BOOT_REJECT)
				a->nreject++;
			if (ibc_boot_parse_hdr(buf, 0, &h) == 0 && h.type == IBC_BOOT_WELCOME)
				a->nwelcome++;
		}
	}
	return 0;
}

/* 1 when the wrong-secret hello was sent */
static int attack_secret(struct attack *a, int fd)
{
	uint8_t buf[512];
	uint8_t wrong[IBC_BOOT_SECRET_BYTES];
	uint8_t nonce_a[IBC_BOOT_NONCE_BYTES];
	struct ibc_boot_hello h;
	ssize_t n;
	size_t len;

	n = recv(fd, buf, IBC_BOOT_HDR_BYTES + 4 + IBC_BOOT_NONCE_BYTES, MSG_WAITALL);
	if (n != IBC_BOOT_HDR_BYTES + 4 + IBC_BOOT_NONCE_BYTES)
		return 0;
	memcpy(nonce_a, buf + IBC_BOOT_HDR_BYTES + 4, sizeof(nonce_a));
	memset(&h, 0, sizeof(h));
	h.kind = IBC_BOOT_KIND_JOIN;
	h.src = 0;
	h.dst = -1;
	h.nranks = NR;
	h.has_info = 1;
	snprintf(h.info.host, sizeof(h.info.host), "attacker");
	h.info.family = AF_INET;
	ibc_random_bytes(wrong, sizeof(wrong));
	ibc_random_bytes(h.nonce_c, sizeof(h.nonce_c));
	ibc_boot_mac_hello(wrong, nonce_a, &h, h.mac);
	len = ibc_boot_pack_hello(&h, buf + IBC_BOOT_HDR_BYTES, sizeof(buf) - IBC_BOOT_HDR_BYTES);
	ibc_boot_put_hdr(buf, IBC_BOOT_HELLO, (uint32_t)len);
	return send(fd, buf, IBC_BOOT_HDR_BYTES + len, MSG_NOSIGNAL) ==
	       (ssize_t)(IBC_BOOT_HDR_BYTES + len);
}

static void *attack_thread(void *arg)
{
	struct attack *a = arg;
	int held[SILENT_MAX];
	int nheld = 0;
	int i;

	while (!*a->stop) {
		int fd = dial(a);
		uint8_t hdr[IBC_BOOT_HDR_BYTES];

		if (fd < 0) {
			usleep(10000);
			continue;
		}
		switch (a->kind) {
		case A_SILENT:
			if (nheld == SILENT_MAX) {
				/* the oldest: did the root drop it? */
				a->nclosed += wait_close(a, held[0]);
				close(held[0]);
				memmove(held, held + 1, sizeof(int) * (SILENT_MAX - 1));
				nheld--;
			}
			held[nheld++] = fd;
			usleep(2000);
			continue;
		case A_GARBAGE: {
			uint8_t junk[64];

			ibc_random_bytes(junk, sizeof(junk));
			if (send(fd, junk, sizeof(junk), MSG_NOSIGNAL) < 0)
				break;
			break;
		}
		case A_SECRET:
			if (attack_secret(a, fd)) {
				long rej = a->nreject;

				if (wait_close(a, fd)) {
					a->nclosed++;
					a->nhello++;
					a->nnoreject += a->nreject == rej;
				}
				close(fd);
				continue;
			}
			break;
		case A_HUGE:
			/* skip the challenge; claim a 4 GiB hello */
			ibc_boot_put_hdr(hdr, IBC_BOOT_HELLO, 0xffffffffu);
			if (send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL) < 0)
				break;
			break;
		case A_TRICKLE:
			ibc_boot_put_hdr(hdr, IBC_BOOT_HELLO, IBC_BOOT_HELLO_BYTES);
			for (i = 0; i < IBC_BOOT_HDR_BYTES && !*a->stop; i++) {
				if (send(fd, hdr + i, 1, MSG_NOSIGNAL) < 0)
					break;
				usleep(100 * 1000);
			}
			break;
		default:
			break;
		}
		a->nclosed += wait_close(a, fd);
		close(fd);
	}
	for (i = 0; i < nheld; i++)
		close(held[i]);
	return NULL;
}

int main(void)
{
	struct attack att[A_COUNT];
	pthread_t tids[A_COUNT];
	struct rel_proc ps[NR];
	struct ibc_boot_uid u;
	ibc_unique_id_t id;
	char uid[2 * IBC_UNIQUE_ID_BYTES + 1];
	char *argv[] = { "coll", "--count", "4096", "--iters", "10", "--gap-ms", "100", NULL };
	volatile int stop = 0;
	int64_t t0;
	int ok_ranks = 0;
	int i;

	setenv("IBC_BOOTSTRAP_HANDSHAKE_MS", "1000", 1);
	if (ibc_get_unique_id(&id) != IBC_OK || ibc_boot_uid_unpack(&id, &u) != IBC_OK)
		tap_bail_out("cannot create a unique id");
	for (i = 0; i < IBC_UNIQUE_ID_BYTES; i++)
		snprintf(uid + 2 * i, 3, "%02x", (unsigned char)id.internal[i]);
	memset(att, 0, sizeof(att));
	for (i = 0; i < A_COUNT; i++) {
		att[i].kind = i;
		att[i].stop = &stop;
		if (u.family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&att[i].ss;

			s6->sin6_family = AF_INET6;
			s6->sin6_port = htons(u.port);
			memcpy(&s6->sin6_addr, u.addr, 16);
			att[i].sslen = sizeof(*s6);
		} else {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&att[i].ss;

			s4->sin_family = AF_INET;
			s4->sin_port = htons(u.port);
			memcpy(&s4->sin_addr, u.addr, 4);
			att[i].sslen = sizeof(*s4);
		}
		pthread_create(&tids[i], NULL, attack_thread, &att[i]);
	}
	usleep(500 * 1000); /* the flood is on before the first rank arrives */
	t0 = rel_now_ms();
	memset(ps, 0, sizeof(ps));
	for (i = 0; i < NR; i++) {
		/* the last rank is 2.5 s late: the root (and the flood) outlive a
		 * handshake deadline while the others wait in init */
		if (i == NR - 1)
			usleep(2500 * 1000);
		if (rel_spawn(&ps[i], i, NR, uid, argv, NULL) != 0)
			tap_bail_out("spawn failed");
	}
	for (i = 0; i < NR; i++) {
		struct rel_res r;
		int good = 1;
		int k;

		if (rel_expect_res(&ps[i], "init", t0 + 60000, &r) != 1 || r.status != IBC_OK) {
			tap_ok(0, "rank %d joins under the flood (%s)", i, r.text);
			continue;
		}
		tap_ok(1, "rank %d joins under the flood (%lld ms)", i, (long long)r.el_ms);
		for (k = 0; k < 10; k++)
			if (rel_expect_res(&ps[i], "coll", t0 + 60000, &r) != 1 || r.status != IBC_OK)
				good = 0;
		tap_ok(good, "rank %d: 10 allreduces with exact sums", i);
		good = rel_expect_res(&ps[i], "destroy", t0 + 60000, &r) == 1 && r.status == IBC_OK;
		tap_ok(good, "rank %d destroys its communicator", i);
		ok_ranks += good;
	}
	stop = 1;
	for (i = 0; i < A_COUNT; i++)
		pthread_join(tids[i], NULL);
	for (i = 0; i < NR; i++) {
		rel_reap(&ps[i], rel_now_ms() + 10000);
		tap_ok(rel_exited_ok(&ps[i]), "rank %d exits cleanly (%s)", i,
		       rel_wstatus_str(ps[i].wstatus));
	}
	tap_ok(ok_ranks == NR, "all %d ranks ran within 60 s (%lld ms)", NR,
	       (long long)(rel_now_ms() - t0));
	for (i = 0; i < A_COUNT; i++)
		tap_diag("%s attacker: %ld connections, %ld closed by the root, %ld rejected", a_names[i],
			 att[i].nconn, att[i].nclosed, att[i].nreject);
	tap_ok(att[A_SECRET].nhello > 0 && att[A_SECRET].nwelcome == 0,
	       "no wrong-secret hello was welcomed (%ld hellos, %ld welcomed)", att[A_SECRET].nhello,
	       att[A_SECRET].nwelcome);
	/* a hello can be shed unread when every pending connection has sent something */
	tap_ok(att[A_SECRET].nnoreject * 100 <= att[A_SECRET].nhello,
	       "wrong-secret hellos were answered with REJECT, not just closed (%ld of %ld closed without, <= 1%% allowed)",
	       att[A_SECRET].nnoreject, att[A_SECRET].nhello);
	tap_ok(att[A_HUGE].nconn > 0 && att[A_HUGE].nclosed == att[A_HUGE].nconn,
	       "every 4 GiB header was closed at once (%ld of %ld)", att[A_HUGE].nclosed,
	       att[A_HUGE].nconn);
	tap_ok(att[A_GARBAGE].nconn > 0 && att[A_GARBAGE].nclosed == att[A_GARBAGE].nconn,
	       "every garbage connection was closed (%ld of %ld)", att[A_GARBAGE].nclosed,
	       att[A_GARBAGE].nconn);
	tap_ok(att[A_SILENT].nconn > 128, "the silent attacker held more than 128 connections (%ld)",
	       att[A_SILENT].nconn);
	tap_ok(att[A_SILENT].nclosed > 0, "the root dropped silent connections (%ld)",
	       att[A_SILENT].nclosed);
	tap_ok(att[A_TRICKLE].nconn > 1 && att[A_TRICKLE].nclosed > 0,
	       "trickling connections were dropped at the handshake deadline (%ld of %ld)",
	       att[A_TRICKLE].nclosed, att[A_TRICKLE].nconn);
	rel_kill_all(ps, NR);
	return tap_done();
}
