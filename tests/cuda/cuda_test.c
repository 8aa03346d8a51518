/* SPDX-License-Identifier: MIT */
/* cuda_test.c - helpers of tests/cuda (cuda_test.h). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/cuda_stage.h"
#include "cuda/cuda.h"
#include "cuda_test.h"

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int ct_run_ranks(int nranks, ct_rank_fn fn, void *arg, int timeout_s)
{
	int codes[64];
	int nfail = 0;
	int r;

	if (ct_run_ranks_codes(nranks, fn, arg, timeout_s, codes) != 0)
		return -1;
	for (r = 0; r < nranks; r++)
		nfail += codes[r] != 0;
	return nfail;
}

int ct_probe_devices(void)
{
	pid_t pid;
	int status;

	if (!IBC_CUDA_BUILT)
		return 0;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		int n = 0;

		ibc_cuda_device_count(&n);
		_exit(n > 100 ? 100 : n);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 0;
	return WEXITSTATUS(status);
}

int ct_run_ranks_codes(int nranks, ct_rank_fn fn, void *arg, int timeout_s, int *codes)
{
	pid_t pids[64];
	int fds[64][2];
	int status[64];
	int done[64] = { 0 };
	int left = nranks;
	time_t deadline = time(NULL) + timeout_s;
	int r;

	if (nranks < 1 || nranks > 64)
		return -1;
	for (r = 1; r < nranks; r++)
		if (pipe(fds[r]) != 0)
			return -1;
	fflush(stdout);
	fflush(stderr);
	for (r = 0; r < nranks; r++) {
		pids[r] = fork();
		if (pids[r] < 0)
			return -1;
		if (pids[r] == 0) {
			ibc_unique_id_t id;
			int rc;
			int q;

			if (r == 0) {
				if (ibc_get_unique_id(&id) != IBC_OK) {
					fprintf(stderr, "rank 0: ibc_get_unique_id failed\n");
					_exit(2);
				}
				for (q = 1; q < nranks; q++)
					if (write_all(fds[q][1], &id, sizeof(id)) != 0)
						_exit(2);
			} else if (read_all(fds[r][0], &id, sizeof(id)) != 0) {
				fprintf(stderr, "rank %d: no unique id from rank 0\n", r);
				_exit(2);
			}
			rc = fn(r, nranks, &id, arg);
			fflush(stdout);
			fflush(stderr);
			_exit(rc < 0 || rc > 100 ? 1 : rc);
		}
	}
	for (r = 1; r < nranks; r++) {
		close(fds[r][0]);
		close(fds[r][1]);
	}
	while (left > 0) {
		for (r = 0; r < nranks; r++) {
			if (done[r])
				continue;
			if (waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
				done[r] = 1;
				left--;
				codes[r] = WIFEXITED(status[r]) ? WEXITSTATUS(status[r]) : -1;
				if (codes[r] != 0) {
					printf("# rank %d: %s %d\n", r,
					       WIFEXITED(status[r]) ? "exit status"
								    : "killed by signal",
					       WIFEXITED(status[r]) ? WEXITSTATUS(status[r])
								    : WTERMSIG(status[r]));
				}
			}
		}
		if (left > 0 && time(NULL) > deadline) {
			for (r = 0; r < nranks; r++) {
				if (done[r])
					continue;
				printf("# rank %d: still running after %d s, killed\n", r, timeout_s);
				kill(pids[r], SIGKILL);
				waitpid(pids[r], &status[r], 0);
				done[r] = 1;
				left--;
				codes[r] = -1;
			}
		}
		if (left > 0)
			usleep(10000);
	}
	return 0;
}

void *ct_dev_alloc(size_t nbytes, int emulated)
{
	void *p = NULL;

	if (!nbytes)
		nbytes = 1;
	if (emulated) {
		/* calloc: GCC takes the const pointer argument below for a read */
		p = calloc(1, nbytes);
		if (p && ibc_cuda_fake_device_add(p, nbytes) != IBC_OK) {
			free(p);
			p = NULL;
		}
		return p;
	}
	if (ibc_cuda_dev_alloc(nbytes, &p) != IBC_OK)
		return NULL;
	return p;
}

void ct_dev_free(void *p, int emulated)
{
	if (!p)
		return;
	if (emulated) {
		ibc_cuda_fake_device_remove(p);
		free(p);
		return;
	}
	ibc_cuda_dev_free(p);
}

int ct_to_dev(void *dev, const void *host, size_t nbytes, int emulated)
{
	if (!nbytes)
		return 0;
	if (emulated) {
		memcpy(dev, host, nbytes);
		return 0;
	}
	return ibc_cuda_memcpy(dev, host, nbytes) == IBC_OK ? 0 : -1;
}

int ct_from_dev(void *host, const void *dev, size_t nbytes, int emulated)
{
	if (!nbytes)
		return 0;
	if (emulated) {
		memcpy(host, dev, nbytes);
		return 0;
	}
	return ibc_cuda_memcpy(host, dev, nbytes) == IBC_OK ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* fake stream                                                              */
/* ------------------------------------------------------------------------ */

struct ct_item {
	void (*fn)(void *);
	void *arg;
};

struct ct_stream {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	struct ct_item q[256];
	unsigned head;          /* next to run */
	unsigned tail;          /* next free */
	unsigned ran;           /* items finished */
	int stop;
};

static void *ct_stream_main(void *arg)
{
	struct ct_stream *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct ct_item it;

		while (!s->stop && s->head == s->tail)
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->head == s->tail)
			break;
		it = s->q[s->head % 256];
		s->head++;
		pthread_mutex_unlock(&s->lock);
		it.fn(it.arg);
		pthread_mutex_lock(&s->lock);
		s->ran++;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

struct ct_stream *ct_stream_create(void)
{
	struct ct_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	if (pthread_create(&s->thread, NULL, ct_stream_main, s) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

int ct_stream_push(struct ct_stream *s, void (*fn)(void *), void *arg)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (s->tail - s->head >= 256) {
		rc = -1;
	} else {
		s->q[s->tail % 256] = (struct ct_item){ fn, arg };
		s->tail++;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int ct_stream_sync(struct ct_stream *s, int timeout_ms)
{
	struct timespec ts;
	unsigned want;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&s->lock);
	want = s->tail;
	while ((int)(s->ran - want) < 0 && rc == 0)
		if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
			rc = -1;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void ct_stream_destroy(struct ct_stream *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

ibc_status_t ct_stream_launch(void *stream, void (*fn)(void *), void *arg)
{
	if (!stream)
		return IBC_ERR_CUDA;   /* the tests use NULL as "an invalid stream" */
	return ct_stream_push(stream, fn, arg) == 0 ? IBC_OK : IBC_ERR_NO_MEMORY;
}
