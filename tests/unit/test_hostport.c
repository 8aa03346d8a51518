/* SPDX-License-Identifier: MIT */
/*
 * test_hostport.c - ibc_sock_parse_hostport(), the parser of IBC_ROOT and
 * the unique id's address: host:port, [ipv6]:port, numeric addresses, the
 * errors for malformed strings, and an error that names the address family
 * when a name does not resolve in it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/socket.h"
#include "ibcoll.h"
#include "tap.h"

int main(void)
{
	union ibc_sockaddr a;
	char buf[INET6_ADDRSTRLEN];
	static const char *const bad[] = { "127.0.0.1", "127.0.0.1:", ":80", "[::1]80", "[::1",
					   "h:12x", "h:70000" };
	size_t i;

	setenv("IBC_DEBUG", "ERROR", 1);
	tap_is_int(ibc_sock_parse_hostport("127.0.0.1:29500", AF_INET, &a), IBC_OK, "IPv4 host:port");
	tap_ok(a.sa.sa_family == AF_INET && ntohs(a.sin.sin_port) == 29500 &&
		       inet_ntop(AF_INET, &a.sin.sin_addr, buf, sizeof(buf)) && !strcmp(buf, "127.0.0.1"),
	       "gives 127.0.0.1 port 29500");
	tap_is_int(ibc_sock_parse_hostport("[::1]:29501", AF_INET, &a), IBC_OK,
		   "[ipv6]:port, whatever the family asked for");
	tap_ok(a.sa.sa_family == AF_INET6 && ntohs(a.sin6.sin6_port) == 29501 &&
		       inet_ntop(AF_INET6, &a.sin6.sin6_addr, buf, sizeof(buf)) && !strcmp(buf, "::1"),
	       "gives ::1 port 29501");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ibc_log_set_last_error("");
		tap_is_int(ibc_sock_parse_hostport(bad[i], AF_INET, &a), IBC_ERR_INVALID_ARG,
			   "'%s' is refused", bad[i]);
		tap_ok(strstr(ibc_last_error(), "is not host:port (or [ipv6]:port)") != NULL,
		       "and the error says what is expected: '%s'", ibc_last_error());
	}
	/* an IPv4 literal has no IPv6 address: the error names the family */
	ibc_log_set_last_error("");
	tap_is_int(ibc_sock_parse_hostport("127.0.0.1:29502", AF_INET6, &a), IBC_ERR_INVALID_ARG,
		   "an IPv4 address with IBC_SOCKET_FAMILY=AF_INET6 is refused");
	tap_ok(strstr(ibc_last_error(), "cannot resolve '127.0.0.1' to an IPv6 address (IBC_SOCKET_FAMILY=AF_INET6)") != NULL,
	       "and the error names the family: '%s'", ibc_last_error());
	return tap_done();
}
