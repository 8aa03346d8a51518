/* SPDX-License-Identifier: MIT */
/*
 * sigstorm.c - LD_PRELOAD library for tests: the process gets a signal
 * every SIGSTORM_US microseconds of wall time (default 200) on a handler
 * installed without SA_RESTART, as under a sampling profiler (gperftools'
 * SIGPROF) or an application's own interval timer. Every blocking system
 * call of every thread may then return EINTR, and a library that takes that
 * for an error, or sleeps its whole interval again, shows it here.
 *
 * The signal is SIGALRM from a POSIX timer (CLOCK_MONOTONIC), delivered to
 * any thread of the process that does not block it. Only in a program
 * named SIGSTORM_PROG (required): the launcher's shells and tools, and the
 * libtool wrapper scripts, are not what is tested, and their sed and awk
 * stop at the first EINTR. At exit, one line on
 * stderr: "sigstorm: pid P handled H signals" (the tests count these lines,
 * so a run the storm did not reach fails).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <unistd.h>

static volatile unsigned long n_handled;

static void on_signal(int sig)
{
	(void)sig;
	n_handled++;
}

static void report(void)
{
	fprintf(stderr, "sigstorm: pid %ld handled %lu signals\n", (long)getpid(), n_handled);
}

__attribute__((constructor)) static void sigstorm_init(void)
{
	const char *e = getenv("SIGSTORM_US");
	const char *prog = getenv("SIGSTORM_PROG");
	long us = e ? strtol(e, NULL, 10) : 200;
	struct sigaction sa;
	struct sigevent sev;
	struct itimerspec its;
	timer_t t;

	if (us <= 0 || !prog || strcmp(prog, program_invocation_short_name) != 0)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;      /* no SA_RESTART: interrupted calls fail with EINTR */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) != 0)
		return;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = SIGALRM;
	if (timer_create(CLOCK_MONOTONIC, &sev, &t) != 0)
		return;
	its.it_value.tv_sec = us / 1000000;
	its.it_value.tv_nsec = (us % 1000000) * 1000;
	its.it_interval = its.it_value;
	timer_settime(t, 0, &its, NULL);
	atexit(report);
}
