/* SPDX-License-Identifier: MIT */
/*
 * shortio.c - LD_PRELOAD library for tests: every send(), sendmsg(),
 * recv() and recvmsg() on a TCP socket moves at most a few bytes, as a
 * congested or interrupted stream may, so that every partial-transfer
 * branch of the tcp transport runs (a header cut anywhere, a payload in
 * pieces, a header and payload read together only in part).
 *
 * SHORTIO_MAX=N    the most bytes one call moves (default 7); each call
 *                  moves 1..N, drawn from a per-process sequence
 * At exit, when any call was shortened, one line on stderr:
 *   shortio: pid P shortened S of C calls
 * (the tests count these lines, so a run that never reached the shim fails).
 * MSG_PEEK reads are left whole: a peek does not consume, and the transport
 * peeks for a whole header only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>
#include <netinet/in.h>

/* the build hides symbols by default (-fvisibility=hidden); these replace libc's */
#define SHORTIO_EXPORT __attribute__((visibility("default")))

static ssize_t (*real_send)(int, const void *, size_t, int);
static ssize_t (*real_recv)(int, void *, size_t, int);
static ssize_t (*real_sendmsg)(int, const struct msghdr *, int);
static ssize_t (*real_recvmsg)(int, struct msghdr *, int);
static unsigned long n_calls, n_short;
static unsigned int rng = 12345;
static size_t max_bytes;

static void report(void)
{
	if (n_short)
		fprintf(stderr, "shortio: pid %ld shortened %lu of %lu calls\n",
			(long)getpid(), n_short, n_calls);
}

__attribute__((constructor)) static void shortio_init(void)
{
	const char *e = getenv("SHORTIO_MAX");

	real_send = (ssize_t (*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
	real_recv = (ssize_t (*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
	real_sendmsg = (ssize_t (*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	real_recvmsg = (ssize_t (*)(int, struct msghdr *, int))dlsym(RTLD_NEXT, "recvmsg");
	max_bytes = e ? strtoul(e, NULL, 10) : 7;
	if (max_bytes < 1)
		max_bytes = 1;
	rng ^= (unsigned int)getpid();
	atexit(report);
}

static int is_tcp(int fd)
{
	int type = 0;
	socklen_t tl = sizeof(type);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM)
		return 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return 0;
	return ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
}

/* the cap for this call: 1..max_bytes, or len when that is smaller */
static size_t cap(int fd, size_t len, int flags)
{
	size_t c;

	if (len <= 1 || (flags & MSG_PEEK) || !is_tcp(fd))
		return len;
	rng = rng * 1103515245u + 12345u;
	c = 1 + (rng >> 16) % max_bytes;
	__atomic_add_fetch(&n_calls, 1, __ATOMIC_RELAXED);
	if (c >= len)
		return len;
	__atomic_add_fetch(&n_short, 1, __ATOMIC_RELAXED);
	return c;
}

SHORTIO_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	return real_send(fd, buf, cap(fd, len, flags), flags);
}

SHORTIO_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return real_recv(fd, buf, cap(fd, len, flags), flags);
}

/* an iovec list cut to its first c bytes (at most 64 entries are kept) */
static void cut(const struct msghdr *in, struct msghdr *out, struct iovec *iov, size_t c)
{
	size_t i, n = 0;

	*out = *in;
	for (i = 0; i < in->msg_iovlen && i < 64 && c > 0; i++) {
		iov[n] = in->msg_iov[i];
		if (iov[n].iov_len > c)
			iov[n].iov_len = c;
		c -= iov[n].iov_len;
		n++;
	}
	out->msg_iov = iov;
	out->msg_iovlen = n;
}

static size_t total(const struct msghdr *m)
{
	size_t i, t = 0;

	for (i = 0; i < m->msg_iovlen; i++)
		t += m->msg_iov[i].iov_len;
	return t;
}

SHORTIO_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct iovec iov[64];
	struct msghdr m;
	size_t t = total(msg);
	size_t c = cap(fd, t, flags);

	if (c == t)
		return real_sendmsg(fd, msg, flags);
	cut(msg, &m, iov, c);
	return real_sendmsg(fd, &m, flags);
}

SHORTIO_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct iovec iov[64];
	struct msghdr m;
	size_t t = total(msg);
	size_t c = cap(fd, t, flags);
	ssize_t n;

	if (c == t)
		return real_recvmsg(fd, msg, flags);
	cut(msg, &m, iov, c);
	n = real_recvmsg(fd, &m, flags);
	msg->msg_flags = m.msg_flags;
	msg->msg_controllen = m.msg_controllen;
	return n;
}
