/* SPDX-License-Identifier: MIT */
/*
 * test_net_fail.c - ibc_net_fail_text(), what a set-up step that failed
 * says: the communicator's first error (without its "rank R: " prefix)
 * when it has one, the status's name otherwise, and for IBC_ERR_REMOTE a
 * wait of at most 200 ms for the failed peer's report, which in a 5-rank
 * run arrived after the bootstrap exchange had broken (the init error then
 * said only "remote peer failed").
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "net/net.h"
#include "tap.h"

static const char report[] =
	"rank 2: on shm: error on rank 4 (host h): rank 4: barrier #0: mismatched calls";

/* poison @net as a report of the bootstrap service thread would */
static void poison(struct ibc_net *net)
{
	pthread_mutex_lock(&net->lock);
	net->poison_st = IBC_ERR_INVALID_USAGE;
	snprintf(net->poison_msg, sizeof(net->poison_msg), "%s", report);
	__atomic_store_n(&net->poisoned, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&net->lock);
}

static void *late_report(void *arg)
{
	usleep(50000);
	poison(arg);
	return NULL;
}

int main(void)
{
	static struct ibc_net net;      /* zeroed, as ibc_net_init() wants */
	char buf[1024];
	const char *t;
	uint64_t t0;
	uint64_t el;
	pthread_t th;

	ibc_net_init(&net);
	t0 = ibc_time_ns();
	t = ibc_net_fail_text(&net, IBC_ERR_TIMEOUT, buf, sizeof(buf));
	el = (ibc_time_ns() - t0) / 1000000;
	tap_is_str(t, ibc_status_str(IBC_ERR_TIMEOUT), "healthy, a timeout: the status's name");
	tap_ok(el < 50, "at once (%llu ms)", (unsigned long long)el);

	t0 = ibc_time_ns();
	t = ibc_net_fail_text(&net, IBC_ERR_REMOTE, buf, sizeof(buf));
	el = (ibc_time_ns() - t0) / 1000000;
	tap_is_str(t, ibc_status_str(IBC_ERR_REMOTE), "healthy, a remote failure with no report: its name");
	tap_ok(el >= 190 && el < 2000, "after waiting for a report (%llu ms, 200 wanted)",
	       (unsigned long long)el);

	tap_ok(pthread_create(&th, NULL, late_report, &net) == 0, "a report arrives after 50 ms");
	t0 = ibc_time_ns();
	t = ibc_net_fail_text(&net, IBC_ERR_REMOTE, buf, sizeof(buf));
	el = (ibc_time_ns() - t0) / 1000000;
	pthread_join(th, NULL);
	tap_is_str(t, report + strlen("rank 2: "),
		   "a remote failure whose report comes late: the report, without this rank's prefix");
	tap_ok(el >= 40 && el < 190, "as soon as it came (%llu ms)", (unsigned long long)el);

	t = ibc_net_fail_text(&net, IBC_ERR_TIMEOUT, buf, sizeof(buf));
	tap_is_str(t, report + strlen("rank 2: "), "a failed communicator: its first error for any status");
	t = ibc_net_fail_text(&net, IBC_ERR_REMOTE, buf, 12);
	tap_is_str(t, "on shm: err", "cut to the buffer's size");
	return tap_done();
}
