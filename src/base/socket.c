/* SPDX-License-Identifier: MIT */
/*
 * socket.c - TCP helpers (socket.h): interface choice, listen, connect with
 * retries, deadline-bounded full reads and writes.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/socket.h"
#include "base/util.h"

int ibc_sock_match_ifname(const char *spec, const char *ifname)
{
	int exclude = 0;
	int exact = 0;
	const char *p;

	if (!spec || !*spec)
		return 1;
	if (*spec == '^') {
		exclude = 1;
		spec++;
	}
	if (*spec == '=') {
		exact = 1;
		spec++;
	}
	for (p = spec; *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		int hit;

		if (exact)
			hit = strlen(ifname) == len && !strncmp(ifname, p, len);
		else
			hit = len > 0 && !strncmp(ifname, p, len);
		if (hit)
			return !exclude;
		p += len;
		if (*p == ',')
			p++;
	}
	return exclude;
}

socklen_t ibc_sock_addr_len(const union ibc_sockaddr *addr)
{
	return addr->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					      : sizeof(struct sockaddr_in);
}

uint16_t ibc_sock_addr_port(const union ibc_sockaddr *addr)
{
	return ntohs(addr->sa.sa_family == AF_INET6 ? addr->sin6.sin6_port : addr->sin.sin_port);
}

void ibc_sock_addr_set_port(union ibc_sockaddr *addr, uint16_t port)
{
	if (addr->sa.sa_family == AF_INET6)
		addr->sin6.sin6_port = htons(port);
	else
		addr->sin.sin_port = htons(port);
}

int ibc_sock_addr_is_loopback(const union ibc_sockaddr *addr)
{
	if (addr->sa.sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&addr->sin6.sin6_addr);
	return (ntohl(addr->sin.sin_addr.s_addr) >> 24) == 127;
}

const char *ibc_sock_addr_str(const union ibc_sockaddr *addr, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (addr->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &addr->sin6.sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ibc_sock_addr_port(addr));
	} else {
		inet_ntop(AF_INET, &addr->sin.sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ibc_sock_addr_port(addr));
	}
	return buf;
}

ibc_status_t ibc_sock_pick_addr(int family, int want_lo, union ibc_sockaddr *addr_p, char *ifname)
{
	const char *spec = ibc_param_socket_ifname();
	struct ifaddrs *ifa_list;
	struct ifaddrs *ifa;
	struct ifaddrs *best = NULL;
	struct ifaddrs *lo = NULL;
	char seen[512] = "";
	size_t seen_len = 0;

	if (getifaddrs(&ifa_list) != 0) {
		IBC_LOG_ERROR(BOOT, "getifaddrs failed: %s", strerror(errno));
		return IBC_ERR_SYSTEM;
	}
	for (ifa = ifa_list; ifa; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != family)
			continue;
		if (!(ifa->ifa_flags & IFF_UP))
			continue;
		if (family == AF_INET6 &&
		    IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
			continue; /* scoped addresses cannot be advertised portably */
		if (seen_len < sizeof(seen) - 40)
			seen_len += (size_t)snprintf(seen + seen_len, sizeof(seen) - seen_len, "%s%s",
						     seen_len ? " " : "", ifa->ifa_name);
		if (!ibc_sock_match_ifname(spec, ifa->ifa_name))
			continue;
		if (ifa->ifa_flags & IFF_LOOPBACK) {
			if (!lo)
				lo = ifa;
		} else if (!best) {
			best = ifa;
		}
	}
	if (want_lo && lo)
		best = lo;
	if (!best)
		best = lo;
	if (!best) {
		IBC_LOG_ERROR(BOOT, "no usable %s interface matches IBC_SOCKET_IFNAME='%s' (up: %s)",
			      family == AF_INET6 ? "IPv6" : "IPv4", spec, *seen ? seen : "none");
		freeifaddrs(ifa_list);
		return IBC_ERR_SYSTEM;
	}
	memset(addr_p, 0, sizeof(*addr_p));
	memcpy(addr_p, best->ifa_addr,
	       family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	ibc_sock_addr_set_port(addr_p, 0);
	snprintf(ifname, 32, "%s", best->ifa_name);
	freeifaddrs(ifa_list);
	return IBC_OK;
}

ibc_status_t ibc_sock_parse_hostport(const char *str, int family, union ibc_sockaddr *addr_p)
{
	char host[256];
	const char *port;
	const char *colon;
	struct addrinfo hints;
	struct addrinfo *res = NULL;
	size_t hlen;
	int ret;

	if (str[0] == '[') {
		const char *close = strchr(str, ']');

		if (!close || close[1] != ':')
			goto bad;
		hlen = (size_t)(close - str - 1);
		if (hlen >= sizeof(host))
			goto bad;
		memcpy(host, str + 1, hlen);
		port = close + 2;
		family = AF_INET6;
	} else {
		colon = strrchr(str, ':');
		if (!colon)
			goto bad;
		hlen = (size_t)(colon - str);
		if (hlen == 0 || hlen >= sizeof(host))
			goto bad;
		memcpy(host, str, hlen);
		port = colon + 1;
	}
	host[hlen] = '\0';
	if (!*port || strspn(port, "0123456789") != strlen(port) || atoi(port) > 65535)
		goto bad;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = family;
	hints.ai_socktype = SOCK_STREAM;
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret != 0 || !res) {
		IBC_LOG_ERROR(BOOT, "cannot resolve '%s'%s: %s", host,
			      family == AF_INET6 ? " to an IPv6 address (IBC_SOCKET_FAMILY=AF_INET6)"
			      : family == AF_INET ? " to an IPv4 address" : "",
			      gai_strerror(ret));
		return IBC_ERR_INVALID_ARG;
	}
	memset(addr_p, 0, sizeof(*addr_p));
	memcpy(addr_p, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return IBC_OK;
bad:
	IBC_LOG_ERROR(BOOT, "'%s' is not host:port (or [ipv6]:port)", str);
	return IBC_ERR_INVALID_ARG;
}

int ibc_sock_set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}

void ibc_sock_set_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void ibc_sock_set_bufs(int fd, int nbytes)
{
	if (nbytes <= 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &nbytes, sizeof(nbytes));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &nbytes, sizeof(nbytes));
}

void ibc_sock_close(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* ibc_sock_err_text(): socket.h */
const char *ibc_sock_err_text(int err, char *buf, size_t len)
{
	struct rlimit rl;

	if (err == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		snprintf(buf, len, "%s (the open-file limit is %llu: raise it with ulimit -n)",
			 strerror(err), (unsigned long long)rl.rlim_cur);
	else
		snprintf(buf, len, "%s", strerror(err));
	return buf;
}

ibc_status_t ibc_sock_listen(union ibc_sockaddr *addr, int backlog, int inuse_quiet, int *fd_p)
{
	union ibc_sockaddr bound;
	socklen_t len = sizeof(bound);
	char str[80];
	char why[160];
	int one = 1;
	int fd;

	if (ibc_fault_hit(IBC_FAULT_SOCK, "socket(listen)")) {
		errno = EMFILE;
		fd = -1;
	} else {
		fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	}
	if (fd < 0) {
		int err = errno;

		IBC_LOG_ERROR(BOOT, "socket() failed: %s", ibc_sock_err_text(err, why, sizeof(why)));
		errno = err;
		return IBC_ERR_SYSTEM;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, &addr->sa, ibc_sock_addr_len(addr)) != 0) {
		int err = errno;

		if (err != EADDRINUSE || !inuse_quiet)
			IBC_LOG_ERROR(BOOT, "bind to %s failed: %s",
				      ibc_sock_addr_str(addr, str, sizeof(str)), strerror(err));
		close(fd);
		errno = err;
		return IBC_ERR_SYSTEM;
	}
	if (listen(fd, backlog) != 0 || getsockname(fd, &bound.sa, &len) != 0) {
		int err = errno;

		IBC_LOG_ERROR(BOOT, "listen on %s failed: %s", ibc_sock_addr_str(addr, str, sizeof(str)),
			      strerror(err));
		close(fd);
		errno = err;
		return IBC_ERR_SYSTEM;
	}
	ibc_sock_set_nonblock(fd, 1);
	ibc_sock_addr_set_port(addr, ibc_sock_addr_port(&bound));
	*fd_p = fd;
	return IBC_OK;
}

static int sock_cancelled(const int *cancel_p)
{
	return cancel_p && __atomic_load_n(cancel_p, __ATOMIC_ACQUIRE);
}

ibc_status_t ibc_sock_connect_opts(const union ibc_sockaddr *addr, uint64_t deadline_ms,
				   int retry_refused, const int *cancel_p, int *fd_p)
{
	char str[80];
	char why[160];
	int last_err = 0;
	int delay_ms = 50;

	for (;;) {
		socklen_t elen = sizeof(int);
		int err = 0;
		int fd;
		int ret;
		int64_t left = (int64_t)(deadline_ms - ibc_time_ms());

		if (left <= 0)
			break;
		if (sock_cancelled(cancel_p))
			return IBC_ERR_REMOTE;
		if (ibc_fault_hit(IBC_FAULT_SOCK, "socket(connect)")) {
			IBC_LOG_ERROR(BOOT, "socket() failed: %s", ibc_sock_err_text(EMFILE, why, sizeof(why)));
			return IBC_ERR_SYSTEM;
		}
		fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			err = errno;
			IBC_LOG_ERROR(BOOT, "socket() failed: %s", ibc_sock_err_text(err, why, sizeof(why)));
			errno = err;
			return IBC_ERR_SYSTEM;
		}
		ret = connect(fd, &addr->sa, ibc_sock_addr_len(addr));
		if (ret != 0 && errno == EINPROGRESS) {
			/* wait in slices of <= 100 ms so that a cancel is seen */
			for (;;) {
				struct pollfd pfd = { .fd = fd, .events = POLLOUT };

				left = (int64_t)(deadline_ms - ibc_time_ms());
				if (left <= 0 || sock_cancelled(cancel_p)) {
					ret = 0;
					break;
				}
				ret = poll(&pfd, 1, (int)IBC_MIN(left, 100));
				if (ret != 0 && !(ret < 0 && errno == EINTR))
					break;
			}
			if (ret == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && !err) {
				ret = 0;
			} else {
				errno = ret == 0 ? ETIMEDOUT : (err ? err : errno);
				ret = -1;
			}
		}
		if (ret == 0) {
			ibc_sock_set_nonblock(fd, 0);
			ibc_sock_set_nodelay(fd);
			*fd_p = fd;
			return IBC_OK;
		}
		last_err = errno;
		close(fd);
		if (sock_cancelled(cancel_p))
			return IBC_ERR_REMOTE;
		if (last_err == ECONNREFUSED && !retry_refused)
			return IBC_ERR_REMOTE;
		if (last_err != ECONNREFUSED && last_err != ETIMEDOUT && last_err != EHOSTUNREACH &&
		    last_err != ENETUNREACH && last_err != ECONNRESET && last_err != EAGAIN) {
			IBC_LOG_ERROR(BOOT, "connect to %s failed: %s",
				      ibc_sock_addr_str(addr, str, sizeof(str)), strerror(last_err));
			return IBC_ERR_SYSTEM;
		}
		left = (int64_t)(deadline_ms - ibc_time_ms());
		if (left <= 0)
			break;
		usleep((useconds_t)IBC_MIN(left, delay_ms) * 1000);
		delay_ms = IBC_MIN(delay_ms * 2, 200);
	}
	IBC_LOG_DEBUG(BOOT, "connect to %s: deadline passed, last error %s",
		      ibc_sock_addr_str(addr, str, sizeof(str)),
		      last_err ? strerror(last_err) : "none");
	return IBC_ERR_TIMEOUT;
}

ibc_status_t ibc_sock_connect(const union ibc_sockaddr *addr, uint64_t deadline_ms, int *fd_p)
{
	return ibc_sock_connect_opts(addr, deadline_ms, 1, NULL, fd_p);
}

static ibc_status_t sock_wait(int fd, short events, uint64_t deadline_ms, const int *cancel_p,
			      int *errno_p)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int64_t left = (int64_t)(deadline_ms - ibc_time_ms());
	int ret;

	if (sock_cancelled(cancel_p)) {
		if (errno_p)
			*errno_p = ECANCELED;
		return IBC_ERR_REMOTE;
	}
	if (left <= 0) {
		if (errno_p)
			*errno_p = ETIMEDOUT;
		return IBC_ERR_TIMEOUT;
	}
	ret = poll(&pfd, 1, (int)IBC_MIN(left, 100));
	if (ret < 0 && errno != EINTR) {
		if (errno_p)
			*errno_p = errno;
		return IBC_ERR_SYSTEM;
	}
	return IBC_OK;
}

ibc_status_t ibc_sock_write_all_cancel(int fd, const void *buf, size_t nbytes,
				       uint64_t deadline_ms, const int *cancel_p, int *errno_p)
{
	const char *p = buf;

	while (nbytes) {
		ssize_t n;

		if (ibc_fault_hit(IBC_FAULT_SOCK, "send")) {
			n = -1;
			errno = ECONNRESET;
		} else {
			n = send(fd, p, nbytes, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		if (n > 0) {
			p += n;
			nbytes -= (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			ibc_status_t st = sock_wait(fd, POLLOUT, deadline_ms, cancel_p, errno_p);

			if (st != IBC_OK)
				return st;
			continue;
		}
		if (errno_p)
			*errno_p = errno;
		return (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) ? IBC_ERR_REMOTE
										    : IBC_ERR_SYSTEM;
	}
	return IBC_OK;
}

ibc_status_t ibc_sock_read_all_cancel(int fd, void *buf, size_t nbytes, uint64_t deadline_ms,
				      const int *cancel_p, int *errno_p)
{
	char *p = buf;

	while (nbytes) {
		ssize_t n;

		if (ibc_fault_hit(IBC_FAULT_SOCK, "recv")) {
			n = -1;
			errno = ECONNRESET;
		} else {
			n = recv(fd, p, nbytes, MSG_DONTWAIT);
		}
		if (n > 0) {
			p += n;
			nbytes -= (size_t)n;
			continue;
		}
		if (n == 0) {
			if (errno_p)
				*errno_p = 0;
			return IBC_ERR_REMOTE;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
			ibc_status_t st = sock_wait(fd, POLLIN, deadline_ms, cancel_p, errno_p);

			if (st != IBC_OK)
				return st;
			continue;
		}
		if (errno_p)
			*errno_p = errno;
		return errno == ECONNRESET ? IBC_ERR_REMOTE : IBC_ERR_SYSTEM;
	}
	return IBC_OK;
}

ibc_status_t ibc_sock_write_all(int fd, const void *buf, size_t nbytes, uint64_t deadline_ms,
				int *errno_p)
{
	return ibc_sock_write_all_cancel(fd, buf, nbytes, deadline_ms, NULL, errno_p);
}

ibc_status_t ibc_sock_read_all(int fd, void *buf, size_t nbytes, uint64_t deadline_ms,
			       int *errno_p)
{
	return ibc_sock_read_all_cancel(fd, buf, nbytes, deadline_ms, NULL, errno_p);
}
