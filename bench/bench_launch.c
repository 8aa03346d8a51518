/* SPDX-License-Identifier: MIT */
/*
 * bench_launch.c - `ibc_bench --local N ...`: start N ranks of this very
 * program on this host with the plain-environment launch (IBC_RANK,
 * IBC_NRANKS, IBC_ROOT on a free loopback port), wait for all of them and
 * return the worst exit status. For quick runs without mpirun; --vs-mpi
 * still needs mpirun.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_launch.h"

/* a TCP port on 127.0.0.1 that was free a moment ago, or -1 */
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

int bench_local_ranks(int argc, char **argv, int *nranks_p)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *v = NULL;

		if (!strcmp(argv[i], "--local") && i + 1 < argc)
			v = argv[i + 1];
		else if (!strncmp(argv[i], "--local=", 8))
			v = argv[i] + 8;
		if (v) {
			char *end;
			long n = strtol(v, &end, 10);

			if (*end || n < 1 || n > 1024)
				return -1;
			*nranks_p = (int)n;
			return 1;
		}
	}
	return 0;
}

int bench_launch_local(int argc, char **argv, int nranks)
{
	char **args = calloc((size_t)argc + 1, sizeof(char *));
	pid_t *pids = calloc((size_t)nranks, sizeof(pid_t));
	char root[64];
	char nbuf[16];
	int nargs = 0;
	int worst = 0;
	int port = free_port();
	int i;

	if (!args || !pids || port < 0) {
		fprintf(stderr, "ibc_bench --local: %s\n",
			port < 0 ? "no free loopback port" : "out of memory");
		free(args);
		free(pids);
		return 3;
	}
	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--local")) {
			i++;
			continue;
		}
		if (!strncmp(argv[i], "--local=", 8))
			continue;
		args[nargs++] = argv[i];
	}
	snprintf(root, sizeof(root), "127.0.0.1:%d", port);
	snprintf(nbuf, sizeof(nbuf), "%d", nranks);
	for (i = 0; i < nranks; i++) {
		pid_t p = fork();

		if (p == 0) {
			char rbuf[16];

			snprintf(rbuf, sizeof(rbuf), "%d", i);
			setenv("IBC_RANK", rbuf, 1);
			setenv("IBC_NRANKS", nbuf, 1);
			setenv("IBC_ROOT", root, 1);
			/* /proc/self/exe: the real binary even behind libtool's wrapper */
			execv("/proc/self/exe", args);
			execvp(args[0], args);
			fprintf(stderr, "ibc_bench --local: cannot start rank %d: %s\n", i, strerror(errno));
			_exit(127);
		}
		if (p < 0) {
			fprintf(stderr, "ibc_bench --local: fork failed: %s\n", strerror(errno));
			worst = 3;
			break;
		}
		pids[i] = p;
	}
	for (i = 0; i < nranks; i++) {
		int status = 0;

		if (pids[i] <= 0)
			continue;
		while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
			;
		if (WIFEXITED(status)) {
			if (WEXITSTATUS(status) > worst)
				worst = WEXITSTATUS(status);
		} else {
			fprintf(stderr, "ibc_bench --local: rank %d died of signal %d\n", i,
				WIFSIGNALED(status) ? WTERMSIG(status) : 0);
			worst = worst > 3 ? worst : 3;
		}
	}
	free(args);
	free(pids);
	return worst;
}
