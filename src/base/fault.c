/* SPDX-License-Identifier: MIT */
/*
 * fault.c - fault injection for tests: IBC_FAULT_INJECT=<site>:<n> makes the
 * n-th call (counting from 1, per process) at <site> fail as if the system
 * had refused it. Sites: alloc, sock, shm, verbs, reg, cuda, cma (a
 * cross-memory attach transfer of the shm all-reduce, as EPERM); agree_crash
 * kills the process in an agreement (ibc_fault_crash()); retime makes the
 * tuner's re-timing report 4x its times (tune_retime.c). Unarmed, the
 * cost is one predictable branch per call site (util.h).
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"

int ibc_fault_armed;
static int fault_site = -1;
static long fault_nth;
static long fault_count[IBC_FAULT_SITE_COUNT];
static long fault_fired;
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;

static const char *const site_names[IBC_FAULT_SITE_COUNT] = {
	"alloc", "sock", "shm", "verbs", "reg", "cuda", "agree_crash", "retime", "cma",
};

const char *ibc_fault_site_name(int site)
{
	return site >= 0 && site < IBC_FAULT_SITE_COUNT ? site_names[site] : "?";
}

int ibc_fault_parse(const char *spec, int *site_p, long *nth_p)
{
	const char *colon = strchr(spec, ':');
	char *end;
	long nth;
	int i;

	if (!colon)
		return -1;
	nth = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end || nth < 1)
		return -1;
	for (i = 0; i < IBC_FAULT_SITE_COUNT; i++) {
		if (strlen(site_names[i]) == (size_t)(colon - spec) &&
		    !strncasecmp(spec, site_names[i], (size_t)(colon - spec))) {
			*site_p = i;
			*nth_p = nth;
			return 0;
		}
	}
	return -1;
}

static void fault_configure_once(void)
{
	const char *spec = ibc_param_fault_inject();

	if (!spec || !*spec)
		return;
	if (ibc_fault_parse(spec, &fault_site, &fault_nth) != 0) {
		IBC_LOG_WARN(FAULT, "IBC_FAULT_INJECT=%s is not <site>:<n> with site alloc, sock, shm, verbs, reg, cuda, cma, agree_crash or retime and n >= 1; ignored",
			     spec);
		return;
	}
	IBC_LOG_INFO(FAULT, "fault injection armed: call %ld at site %s fails", fault_nth,
		     site_names[fault_site]);
	__atomic_store_n(&ibc_fault_armed, 1, __ATOMIC_RELEASE);
}

void ibc_fault_configure(void)
{
	pthread_once(&fault_once, fault_configure_once);
}

int ibc_fault_hit_slow(enum ibc_fault_site site, const char *what)
{
	long n;

	if ((int)site != fault_site)
		return 0;
	n = __atomic_add_fetch(&fault_count[site], 1, __ATOMIC_RELAXED);
	if (n != fault_nth)
		return 0;
	__atomic_add_fetch(&fault_fired, 1, __ATOMIC_RELAXED);
	IBC_LOG_WARN(FAULT, "injected fault: call %ld at site %s (%s) fails", n, site_names[site],
		     what ? what : "-");
	return 1;
}

long ibc_fault_fired_count(void)
{
	return __atomic_load_n(&fault_fired, __ATOMIC_RELAXED);
}

void ibc_fault_crash(void)
{
	IBC_LOG_WARN(FAULT, "injected crash: SIGKILL to this process");
	raise(SIGKILL);
}
