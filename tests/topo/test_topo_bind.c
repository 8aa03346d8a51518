/* SPDX-License-Identifier: MIT */
/*
 * test_topo_bind.c - ibc_topo_bind_thread_near_nic() really binds. The
 * machine fake-2numa-2pu.xml puts PU 0 and PU 1 in two NUMA nodes with
 * mlx5_0 near PU 0 and mlx5_1 near PU 1; HWLOC_THISSYSTEM=1 makes hwloc
 * treat it as this machine, so the binding goes to the kernel and is read
 * back with sched_getaffinity(). Needs hwloc and CPUs 0 and 1 (SKIP else).
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/build_info.h"
#include "base/param.h"
#include "tap.h"
#include "topo/topo.h"

static int affinity_is(int want0, int want1)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	return CPU_COUNT(&set) == want0 + want1 && !!CPU_ISSET(0, &set) == want0 &&
	       !!CPU_ISSET(1, &set) == want1;
}

static void set_affinity(int cpu0, int cpu1)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (cpu0)
		CPU_SET(0, &set);
	if (cpu1)
		CPU_SET(1, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		tap_bail_out("sched_setaffinity: %s", strerror(errno));
}

int main(void)
{
	struct ibc_topo *t = NULL;
	const char *srcdir = getenv("top_srcdir");
	char path[4096];
	char cpus[IBC_TOPO_CPULIST_LEN];
	char why[IBC_TOPO_WHY_LEN];
	cpu_set_t orig;
	int bind = -1;

	setenv("IBC_DEBUG", "WARN", 1);
	if (!ibc_build_info()->have_hwloc)
		tap_skip_all("built without hwloc: the flat topology never binds");
	if (sched_getaffinity(0, sizeof(orig), &orig) != 0 || !CPU_ISSET(0, &orig) ||
	    !CPU_ISSET(1, &orig))
		tap_skip_all("needs CPUs 0 and 1 in this process's affinity");
	/* start from exactly {0,1}, as the fake machine's allowed set */
	set_affinity(1, 1);
	snprintf(path, sizeof(path), "%s/tests/topo/fake-2numa-2pu.xml", srcdir ? srcdir : ".");
	setenv("IBC_TOPO_FILE", path, 1);
	setenv("HWLOC_THISSYSTEM", "1", 1);
	unsetenv("IBC_BIND");
	ibc_param_reset_all();
	tap_is_int(ibc_topo_create(&t), IBC_OK, "fake 2-NUMA machine loads as this system");
	if (!t)
		tap_bail_out("%s", ibc_last_error());

	tap_is_int(ibc_topo_bind_plan(t, "mlx5_1", &bind, cpus, sizeof(cpus), why, sizeof(why)),
		   IBC_OK, "plan for mlx5_1");
	tap_is_int(bind, 1, "mlx5_1: bind (%s)", why);
	tap_is_str(cpus, "1", "mlx5_1: to CPU 1");
	tap_is_str(why, "mlx5_1 is on NUMA node 1 (CPUs 1): binding to CPUs 1", "reason");
	tap_is_int(ibc_topo_bind_thread_near_nic(t, "mlx5_1"), IBC_OK, "bind near mlx5_1");
	tap_ok(affinity_is(0, 1), "the thread now runs on CPU 1 only");

	/* bound elsewhere by the launcher: leave it alone */
	tap_is_int(ibc_topo_bind_plan(t, "mlx5_0", &bind, cpus, sizeof(cpus), why, sizeof(why)),
		   IBC_OK, "plan for mlx5_0 from CPU 1");
	tap_is_int(bind, 0, "no common CPU: keep the binding (%s)", why);
	tap_is_str(cpus, "", "no CPU list");
	tap_ok(strstr(why, "keeping the launcher's binding") != NULL, "reason says so");
	tap_is_int(ibc_topo_bind_thread_near_nic(t, "mlx5_0"), IBC_OK, "bind near mlx5_0 from CPU 1");
	tap_ok(affinity_is(0, 1), "still on CPU 1 only");

	set_affinity(1, 1);
	tap_is_int(ibc_topo_bind_thread_near_nic(t, "mlx5_0"), IBC_OK, "bind near mlx5_0");
	tap_ok(affinity_is(1, 0), "the thread now runs on CPU 0 only");

	/* unknown NIC and IBC_BIND=0: no change */
	set_affinity(1, 1);
	tap_is_int(ibc_topo_bind_plan(t, "rxe9", &bind, NULL, 0, why, sizeof(why)), IBC_OK,
		   "plan for an unknown NIC");
	tap_is_int(bind, 0, "unknown NIC: no binding (%s)", why);
	setenv("IBC_BIND", "0", 1);
	ibc_param_reset_all();
	tap_is_int(ibc_topo_bind_plan(t, "mlx5_1", &bind, NULL, 0, why, sizeof(why)), IBC_OK,
		   "plan with IBC_BIND=0");
	tap_is_int(bind, 0, "IBC_BIND=0: no binding");
	tap_is_str(why, "IBC_BIND=0: thread affinity left alone", "IBC_BIND=0 reason");
	tap_is_int(ibc_topo_bind_thread_near_nic(t, "mlx5_1"), IBC_OK, "bind with IBC_BIND=0");
	tap_ok(affinity_is(1, 1), "IBC_BIND=0 leaves CPUs 0 and 1");
	tap_is_int(ibc_topo_bind_thread_near_nic(t, NULL), IBC_ERR_INVALID_ARG, "NULL NIC");
	ibc_topo_destroy(t);
	sched_setaffinity(0, sizeof(orig), &orig);
	return tap_done();
}
