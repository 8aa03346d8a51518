/* SPDX-License-Identifier: MIT */
/*
 * rel_harness.c - process helpers of the reliability drivers (rel_harness.h):
 * spawn rel_worker ranks, read their line protocol with deadlines, signal
 * and reap them. Children are started with fork + execve and an environment
 * built before the fork, so nothing unsafe runs between the two even though
 * the driver has threads (the bootstrap root).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "boot/bootstrap.h"
#include "rel_harness.h"

extern char **environ;

int64_t rel_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *rel_worker_path(void)
{
	static char path[PATH_MAX];
	const char *top = getenv("top_builddir");
	ssize_t n;
	char *slash;

	if (path[0])
		return path;
	if (top && *top) {
		snprintf(path, sizeof(path), "%s/tests/reliability/rel_worker", top);
		return path;
	}
	n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	if (n <= 0) {
		snprintf(path, sizeof(path), "./rel_worker");
		return path;
	}
	path[n] = '\0';
	slash = strrchr(path, '/');
	snprintf(slash ? slash + 1 : path, 32, "rel_worker");
	return path;
}

ibc_status_t rel_new_uid_hex(char hex[2 * IBC_UNIQUE_ID_BYTES + 1])
{
	ibc_unique_id_t id;
	ibc_status_t st;
	int i;

	st = ibc_get_unique_id(&id);
	if (st != IBC_OK)
		return st;
	for (i = 0; i < IBC_UNIQUE_ID_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id.internal[i]);
	return IBC_OK;
}

int rel_spawn(struct rel_proc *p, int rank, int nranks, const char *uid_hex, char *const argv[],
	      char *const env[])
{
	char rank_s[32];
	char nranks_s[32];
	char *uid_s = NULL;
	char **envp = NULL;
	char **av = NULL;
	int out[2] = { -1, -1 };
	int in[2] = { -1, -1 };
	char *wargv[32];
	char *wrap_copy = NULL;
	const char *wrap;
	size_t nw = 0;
	size_t ne = 0;
	size_t nx = 0;
	size_t na = 0;
	size_t i;
	size_t k = 0;
	pid_t pid;

	memset(p, 0, sizeof(*p));
	p->rank = rank;
	p->out_fd = -1;
	p->in_fd = -1;
	while (environ[ne])
		ne++;
	while (env && env[nx])
		nx++;
	while (argv[na])
		na++;
	/* IBC_TEST_WRAPPER="valgrind --quiet ...": run the worker under it */
	wrap = getenv("IBC_TEST_WRAPPER");
	if (wrap && *wrap) {
		char *w = strdup(wrap);
		char *save = NULL;
		char *tok;

		wrap_copy = w;
		for (tok = w ? strtok_r(w, " ", &save) : NULL; tok && nw < 31;
		     tok = strtok_r(NULL, " ", &save))
			wargv[nw++] = tok;
	}
	snprintf(rank_s, sizeof(rank_s), "IBC_RANK=%d", rank);
	snprintf(nranks_s, sizeof(nranks_s), "IBC_NRANKS=%d", nranks);
	uid_s = malloc(strlen(uid_hex) + 16);
	envp = calloc(ne + nx + 4, sizeof(char *));
	av = calloc(na + nw + 2, sizeof(char *));
	if (!uid_s || !envp || !av)
		goto err;
	sprintf(uid_s, "IBC_TEST_UID=%s", uid_hex);
	/* per-rank values first: getenv() returns the first match */
	for (i = 0; i < nx; i++)
		envp[k++] = env[i];
	envp[k++] = rank_s;
	envp[k++] = nranks_s;
	envp[k++] = uid_s;
	for (i = 0; i < ne; i++)
		envp[k++] = environ[i];
	envp[k] = NULL;
	for (i = 0; i < nw; i++)
		av[i] = wargv[i];
	av[nw] = (char *)rel_worker_path();
	for (i = 0; i < na; i++)
		av[nw + i + 1] = argv[i];
	if (pipe2(out, O_CLOEXEC) != 0 || pipe2(in, O_CLOEXEC) != 0)
		goto err;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		goto err;
	if (pid == 0) {
		/* child: only async-signal-safe calls until execve */
		dup2(out[1], 1);
		dup2(in[0], 0);
		if (nw)
			execvpe(av[0], av, envp);
		else
			execve(av[0], av, envp);
		_exit(127);
	}
	close(out[1]);
	close(in[0]);
	fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
	p->pid = pid;
	p->out_fd = out[0];
	p->in_fd = in[1];
	free(uid_s);
	free(envp);
	free(av);
	free(wrap_copy);
	return 0;
err:
	fprintf(stderr, "rel_spawn: %s\n", strerror(errno));
	for (i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (in[i] >= 0)
			close(in[i]);
	}
	free(uid_s);
	free(envp);
	free(av);
	free(wrap_copy);
	return -1;
}

/* move one complete line from p->buf to @line; 1 if there was one */
static int take_line(struct rel_proc *p, char *line, size_t len)
{
	char *nl = memchr(p->buf, '\n', p->len);
	size_t n;

	if (!nl)
		return 0;
	n = (size_t)(nl - p->buf);
	snprintf(line, len, "%.*s", (int)n, p->buf);
	memmove(p->buf, nl + 1, p->len - n - 1);
	p->len -= n + 1;
	return 1;
}

int rel_read_line(struct rel_proc *p, int64_t deadline_ms, char *line, size_t len)
{
	for (;;) {
		struct pollfd pfd = { .fd = p->out_fd, .events = POLLIN };
		int64_t left;
		ssize_t n;

		if (take_line(p, line, len))
			return 1;
		if (p->eof || p->out_fd < 0)
			return -1;
		if (p->len == sizeof(p->buf)) {
			/* an over-long line: return it cut */
			size_t k = p->len < len - 1 ? p->len : len - 1;

			memcpy(line, p->buf, k);
			line[k] = '\0';
			p->len = 0;
			return 1;
		}
		n = read(p->out_fd, p->buf + p->len, sizeof(p->buf) - p->len);
		if (n > 0) {
			p->len += (size_t)n;
			continue;
		}
		if (n == 0) {
			p->eof = 1;
			continue;
		}
		if (errno != EAGAIN && errno != EINTR) {
			p->eof = 1;
			continue;
		}
		left = deadline_ms - rel_now_ms();
		if (left <= 0)
			return 0;
		poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
	}
}

int rel_expect(struct rel_proc *p, const char *prefix, int64_t deadline_ms, char *line, size_t len)
{
	for (;;) {
		int ret = rel_read_line(p, deadline_ms, line, len);

		if (ret != 1)
			return ret;
		if (!strncmp(line, prefix, strlen(prefix)))
			return 1;
	}
}

int rel_parse_res(const char *line, struct rel_res *r)
{
	long long t;
	long long el;
	int off = 0;

	memset(r, 0, sizeof(*r));
	if (sscanf(line, "RES %31s %d %d %lld %lld %n", r->phase, &r->idx, &r->status, &t, &el,
		   &off) != 5)
		return -1;
	r->t_ms = t;
	r->el_ms = el;
	snprintf(r->text, sizeof(r->text), "%s", line + off);
	return 0;
}

int rel_expect_res(struct rel_proc *p, const char *phase, int64_t deadline_ms, struct rel_res *r)
{
	char line[REL_LINE_MAX];
	char prefix[64];
	int ret;

	snprintf(prefix, sizeof(prefix), "RES %s ", phase);
	ret = rel_expect(p, prefix, deadline_ms, line, sizeof(line));
	if (ret != 1)
		return ret;
	return rel_parse_res(line, r) == 0 ? 1 : -1;
}

int rel_send_line(struct rel_proc *p, const char *line)
{
	size_t n = strlen(line);
	char *buf = malloc(n + 2);
	ssize_t w;

	if (!buf || p->in_fd < 0) {
		free(buf);
		return -1;
	}
	memcpy(buf, line, n);
	buf[n] = '\n';
	w = write(p->in_fd, buf, n + 1);
	free(buf);
	return w == (ssize_t)(n + 1) ? 0 : -1;
}

void rel_signal(struct rel_proc *p, int sig)
{
	if (p->pid > 0 && !p->reaped)
		kill(p->pid, sig);
}

int rel_reap(struct rel_proc *p, int64_t deadline_ms)
{
	int killed = 0;

	if (p->pid <= 0 || p->reaped)
		return 1;
	for (;;) {
		pid_t r = waitpid(p->pid, &p->wstatus, WNOHANG);

		if (r == p->pid)
			break;
		if (r < 0 && errno != EINTR) {
			p->wstatus = -1;
			break;
		}
		if (rel_now_ms() >= deadline_ms && !killed) {
			kill(p->pid, SIGKILL);
			kill(p->pid, SIGCONT);
			killed = 1;
		}
		usleep(2000);
	}
	p->reaped = 1;
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->in_fd >= 0)
		close(p->in_fd);
	p->out_fd = -1;
	p->in_fd = -1;
	return !killed;
}

void rel_kill_all(struct rel_proc *ps, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		rel_signal(&ps[i], SIGKILL);
		rel_signal(&ps[i], SIGCONT);
	}
	for (i = 0; i < n; i++)
		rel_reap(&ps[i], rel_now_ms() + 5000);
}

int rel_exited_ok(const struct rel_proc *p)
{
	return p->reaped && p->wstatus >= 0 && WIFEXITED(p->wstatus) && WEXITSTATUS(p->wstatus) == 0;
}

const char *rel_wstatus_str(int wstatus)
{
	static char buf[64];

	if (wstatus < 0)
		snprintf(buf, sizeof(buf), "unknown");
	else if (WIFEXITED(wstatus))
		snprintf(buf, sizeof(buf), "exit %d", WEXITSTATUS(wstatus));
	else if (WIFSIGNALED(wstatus))
		snprintf(buf, sizeof(buf), "signal %d", WTERMSIG(wstatus));
	else
		snprintf(buf, sizeof(buf), "status 0x%x", wstatus);
	return buf;
}

int rel_names_rank(const char *text, int rank)
{
	char pat[48];

	snprintf(pat, sizeof(pat), "rank %d (host ", rank);
	return strstr(text, pat) != NULL;
}
