/* SPDX-License-Identifier: MIT */
/*
 * fork_ranks.c - see fork_ranks.h.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/param.h"
#include "fork_ranks.h"

void *fork_ranks_shared(size_t nbytes)
{
	void *p = mmap(NULL, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* a TCP port free on loopback now (the root binds it a moment later) */
static int free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int port = -1;

	if (fd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

int fork_ranks(int n, int timeout_s, fork_rank_fn fn, void *arg, int *codes)
{
	pid_t *pids = calloc((size_t)n, sizeof(*pids));
	char buf[64];
	time_t deadline = time(NULL) + timeout_s;
	int left = 0;
	int ret = 0;
	int port = free_port();
	int r;

	if (!pids || port < 0) {
		free(pids);
		return -1;
	}
	snprintf(buf, sizeof(buf), "127.0.0.1:%d", port);
	setenv("IBC_ROOT", buf, 1);
	snprintf(buf, sizeof(buf), "%d", n);
	setenv("IBC_NRANKS", buf, 1);
	setenv("IBC_SOCKET_IFNAME", "lo", 0);
	fflush(stdout);
	fflush(stderr);
	for (r = 0; r < n; r++) {
		pid_t pid = fork();

		if (pid == 0) {
			snprintf(buf, sizeof(buf), "%d", r);
			setenv("IBC_RANK", buf, 1);
			ibc_param_reset_all();
			_exit(fn(r, n, arg));
		}
		pids[r] = pid;
		codes[r] = pid < 0 ? 127 : -1;
		left += pid > 0;
	}
	while (left > 0) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);

		if (pid > 0) {
			for (r = 0; r < n; r++) {
				if (pids[r] == pid) {
					codes[r] = WIFEXITED(status) ? WEXITSTATUS(status)
								     : 128 + WTERMSIG(status);
					pids[r] = 0;
					left--;
				}
			}
			continue;
		}
		if (time(NULL) > deadline) {
			for (r = 0; r < n; r++) {
				if (pids[r] > 0) {
					kill(pids[r], SIGKILL);
					waitpid(pids[r], NULL, 0);
					pids[r] = 0;
					codes[r] = 124;
					left--;
				}
			}
			break;
		}
		usleep(20000);
	}
	for (r = 0; r < n; r++)
		if (codes[r] != 0)
			ret = -1;
	free(pids);
	return ret;
}
