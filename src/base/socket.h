/* SPDX-License-Identifier: MIT */
/*
 * socket.h - TCP helpers shared by the bootstrap and the tcp transport:
 * interface selection (IBC_SOCKET_IFNAME, NCCL's syntax), listen, connect
 * with a deadline and retries, full reads/writes bounded by a deadline.
 * Every call honours IBC_FAULT_INJECT=sock:N.
 */
#ifndef IBC_SOCKET_H
#define IBC_SOCKET_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ibcoll.h"

union ibc_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	struct sockaddr_storage ss;
};

/*
 * ibc_sock_match_ifname() - does interface @ifname match @spec? Spec is a
 * comma list of prefixes ("eth,ib"), "^" before the list excludes them, "="
 * before the list makes the names exact. An empty spec matches everything.
 * Pure function (unit-tested).
 */
int ibc_sock_match_ifname(const char *spec, const char *ifname);

/*
 * ibc_sock_pick_addr() - choose the local address to listen on and advertise.
 * @family:      AF_INET or AF_INET6.
 * @want_lo:     1: prefer loopback (all ranks on this host); 0: prefer the
 *               first UP non-loopback interface, falling back to loopback.
 * @addr_p:      [out] address with port 0.
 * @ifname:      [out] interface name, at least 32 bytes.
 * Interfaces are filtered by IBC_SOCKET_IFNAME. Return: IBC_OK; IBC_ERR_SYSTEM
 * (getifaddrs failed, or no interface matched: the log lists those seen).
 */
ibc_status_t ibc_sock_pick_addr(int family, int want_lo, union ibc_sockaddr *addr_p, char *ifname);

/* parse "host:port" or "[v6]:port" and resolve it (getaddrinfo) */
ibc_status_t ibc_sock_parse_hostport(const char *str, int family, union ibc_sockaddr *addr_p);

/* "1.2.3.4:5678" / "[::1]:5678" */
const char *ibc_sock_addr_str(const union ibc_sockaddr *addr, char *buf, size_t len);
int ibc_sock_addr_is_loopback(const union ibc_sockaddr *addr);
socklen_t ibc_sock_addr_len(const union ibc_sockaddr *addr);
uint16_t ibc_sock_addr_port(const union ibc_sockaddr *addr);
void ibc_sock_addr_set_port(union ibc_sockaddr *addr, uint16_t port);

/**
 * ibc_sock_listen() - Listening socket on @addr, nonblocking.
 * @addr:        [in,out] address to bind (port 0: ephemeral); the bound port
 *               is written back.
 * @backlog:     listen() backlog.
 * @inuse_quiet: 1: a bind() that fails with EADDRINUSE is not logged, for a
 *               caller that knows why the address matters and explains it;
 *               0: logged at ERROR like any other failure.
 * @fd_p:        [out] the socket, on success.
 * Return: IBC_OK; IBC_ERR_SYSTEM with errno set by the failed call (so
 *         EADDRINUSE when the address is taken).
 */
ibc_status_t ibc_sock_listen(union ibc_sockaddr *addr, int backlog, int inuse_quiet, int *fd_p);

/*
 * ibc_sock_connect() - connect to @addr before @deadline_ms (monotonic ms),
 * retrying refused/unreachable attempts every 50-200 ms (the listener may
 * not be up yet). Returns a blocking-mode fd with TCP_NODELAY. Errors:
 * IBC_ERR_TIMEOUT (deadline passed; the last errno is logged), IBC_ERR_SYSTEM.
 */
ibc_status_t ibc_sock_connect(const union ibc_sockaddr *addr, uint64_t deadline_ms, int *fd_p);

/*
 * ibc_sock_connect_opts() - ibc_sock_connect() with two choices:
 * @retry_refused: 1: retry ECONNREFUSED until the deadline (a listener that
 *                 may not be up yet, like the bootstrap root); 0: fail at
 *                 once with IBC_ERR_REMOTE (a listener that must exist: a
 *                 refusal means its process is gone). Not logged.
 * @cancel_p:      NULL, or a flag read at least every 100 ms; once nonzero
 *                 the call gives up with IBC_ERR_REMOTE (not logged).
 */
ibc_status_t ibc_sock_connect_opts(const union ibc_sockaddr *addr, uint64_t deadline_ms,
				   int retry_refused, const int *cancel_p, int *fd_p);

/*
 * ibc_sock_write_all() / ibc_sock_read_all() - transfer exactly @nbytes
 * before @deadline_ms, on blocking or nonblocking fds (poll between tries).
 * Errors: IBC_ERR_REMOTE (EOF or reset: the peer went away), IBC_ERR_TIMEOUT,
 * IBC_ERR_SYSTEM. Nothing is logged: the caller knows whom it talks to.
 * @errno_p (may be NULL) receives the errno of the failure, 0 for EOF.
 */
ibc_status_t ibc_sock_write_all(int fd, const void *buf, size_t nbytes, uint64_t deadline_ms,
				int *errno_p);
ibc_status_t ibc_sock_read_all(int fd, void *buf, size_t nbytes, uint64_t deadline_ms,
			       int *errno_p);

/*
 * ibc_sock_write_all_cancel() / ibc_sock_read_all_cancel() - the same, and
 * they also give up with IBC_ERR_REMOTE (*@errno_p = ECANCELED) once
 * *@cancel_p becomes nonzero (checked at least every 100 ms); @cancel_p may
 * be NULL. Used by the bootstrap so that ibc_comm_abort() and a peer's
 * failure end its blocking calls at once.
 */
ibc_status_t ibc_sock_write_all_cancel(int fd, const void *buf, size_t nbytes,
				       uint64_t deadline_ms, const int *cancel_p, int *errno_p);
ibc_status_t ibc_sock_read_all_cancel(int fd, void *buf, size_t nbytes, uint64_t deadline_ms,
				      const int *cancel_p, int *errno_p);

/*
 * ibc_sock_err_text() - The text of a failed socket() or accept(): strerror(@err),
 * and for EMFILE the limit that was hit, since raising it is the fix (tcp
 * opens IBC_SOCKET_NSOCKS sockets per peer, the bootstrap more).
 * @err: [in] the errno. @buf: [out] @len bytes for the text.
 * Return: @buf. Threading: any thread.
 */
const char *ibc_sock_err_text(int err, char *buf, size_t len);

int ibc_sock_set_nonblock(int fd, int on);
void ibc_sock_set_nodelay(int fd);
void ibc_sock_set_bufs(int fd, int nbytes);
void ibc_sock_close(int fd);

#endif /* IBC_SOCKET_H */
