/* SPDX-License-Identifier: MIT */
/*
 * test_topo_comm.c - a communicator binds its progress thread where
 * ibc_topo_progress_plan() says. Part 1: the plan itself on the fake
 * 2-NUMA machine and on the DGX-like XML made "this system"
 * (HWLOC_THISSYSTEM=1), for a NIC, a GPU and local ranks without either.
 * Part 2: two ranks (shm, forked) on the fake 2-NUMA machine: local rank 0's
 * progress thread runs on CPU 0, local rank 1's on CPU 1, read back with
 * pthread_getaffinity_np() (ibc_comm_progress_cpus()); with IBC_BIND=0 both
 * keep CPUs 0-1; on the DGX XML with IBC_TOPO_GPU per rank, each
 * communicator records its GPU (comm->gpu, what the verbs transport passes
 * to ibc_topo_pick_nic()). Part 3: ibc_topo_rank_gpu() and the NIC each
 * forced GPU gets. Needs hwloc and CPUs 0 and 1 (SKIP else).
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/build_info.h"
#include "base/param.h"
#include "api/api.h"
#include "fork_ranks.h"
#include "tap.h"
#include "topo/topo.h"

#define CPUS_LEN 64

static char (*g_cpus)[CPUS_LEN];        /* shared: each rank's progress CPUs */
static int *g_gpu;                      /* shared: each rank's comm->gpu */
static const char *g_rank_gpu[2];       /* IBC_TOPO_GPU of each rank, NULL: unset */

static int rank_fn(int rank, int nranks, void *arg)
{
	ibc_comm_h comm = NULL;
	float x = 1.0f;

	(void)nranks;
	(void)arg;
	if (g_rank_gpu[rank])
		setenv("IBC_TOPO_GPU", g_rank_gpu[rank], 1);
	ibc_param_reset_all();
	if (ibc_comm_init_env(&comm) != IBC_OK)
		return 2;
	g_gpu[rank] = ibc_comm_from_handle(comm)->net.gpu;
	if (ibc_comm_progress_cpus(comm, g_cpus[rank], CPUS_LEN) != IBC_OK)
		snprintf(g_cpus[rank], CPUS_LEN, "query failed");
	/* the bound thread still runs collectives */
	if (ibc_allreduce(&x, &x, 1, IBC_FLOAT32, IBC_SUM, comm) != IBC_OK || x != 2.0f)
		return 3;
	return ibc_comm_destroy(comm) == IBC_OK ? 0 : 4;
}

static void set_affinity01(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	CPU_SET(1, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		tap_bail_out("sched_setaffinity: %s", strerror(errno));
}

static void plan_is(struct ibc_topo *t, const char *nic, int gpu, int lr, int nl, int want_bind,
		    const char *want_cpus, const char *want_why)
{
	char cpus[IBC_TOPO_CPULIST_LEN];
	char why[IBC_TOPO_WHY_LEN];
	int bind = -1;

	tap_is_int(ibc_topo_progress_plan(t, nic, gpu, lr, nl, &bind, cpus, sizeof(cpus), why,
					  sizeof(why)),
		   IBC_OK, "plan nic %s gpu %d local rank %d/%d", nic ? nic : "-", gpu, lr, nl);
	tap_is_int(bind, want_bind, "  bind");
	tap_is_str(cpus, want_cpus, "  cpus");
	tap_is_str(why, want_why, "  reason");
}

static void two_ranks(const char *bind, const char *want0, const char *want1)
{
	int codes[2] = { -1, -1 };

	memset(g_cpus, 0, 2 * CPUS_LEN);
	g_gpu[0] = g_gpu[1] = -2;
	setenv("IBC_BIND", bind, 1);
	tap_is_int(fork_ranks(2, 60, rank_fn, NULL, codes), 0,
		   "IBC_BIND=%s: 2 ranks init, all-reduce, destroy", bind);
	if (codes[0] || codes[1])
		tap_diag("exit codes %d %d", codes[0], codes[1]);
	tap_is_str(g_cpus[0], want0, "IBC_BIND=%s: local rank 0's progress thread CPUs", bind);
	tap_is_str(g_cpus[1], want1, "IBC_BIND=%s: local rank 1's progress thread CPUs", bind);
}

int main(void)
{
	const char *srcdir = getenv("top_srcdir");
	struct ibc_topo *t = NULL;
	char path[4096];
	cpu_set_t orig;
	cpu_set_t set;

	setenv("IBC_DEBUG", "WARN", 1);
	if (!ibc_build_info()->have_hwloc)
		tap_skip_all("built without hwloc: the flat topology never binds");
	if (sched_getaffinity(0, sizeof(orig), &orig) != 0 || !CPU_ISSET(0, &orig) ||
	    !CPU_ISSET(1, &orig))
		tap_skip_all("needs CPUs 0 and 1 in this process's affinity");
	/* ibc_topo_cpulist_parse(), used by the communicator to bind */
	tap_is_int(ibc_topo_cpulist_parse("0-2,5,7-8", &set), 0, "cpulist parses");
	tap_ok(CPU_COUNT(&set) == 6 && CPU_ISSET(0, &set) && CPU_ISSET(2, &set) &&
		       !CPU_ISSET(3, &set) && CPU_ISSET(5, &set) && CPU_ISSET(8, &set),
	       "cpulist 0-2,5,7-8 is 6 CPUs");
	tap_is_int(ibc_topo_cpulist_parse("", &set), 0, "empty list");
	tap_is_int(CPU_COUNT(&set), 0, "empty list: no CPU");
	tap_is_int(ibc_topo_cpulist_parse("3-1", &set), -1, "reversed range rejected");
	tap_is_int(ibc_topo_cpulist_parse("1,x", &set), -1, "garbage rejected");
	tap_is_int(ibc_topo_cpulist_parse("99999", &set), -1, "CPU >= CPU_SETSIZE rejected");

	set_affinity01();
	setenv("HWLOC_THISSYSTEM", "1", 1);
	unsetenv("IBC_BIND");

	/* the DGX-like machine as this system; this thread runs on CPUs 0-1 (NUMA 0) */
	snprintf(path, sizeof(path), "%s/tests/topo/dgx-h100.xml", srcdir ? srcdir : ".");
	setenv("IBC_TOPO_FILE", path, 1);
	ibc_param_reset_all();
	tap_is_int(ibc_topo_create(&t), IBC_OK, "DGX XML loads as this system");
	if (!t)
		tap_bail_out("%s", ibc_last_error());
	plan_is(t, "mlx5_1", 5, 1, 8, 1, "0-1",
		"mlx5_1 is on NUMA node 0 (CPUs 0-7,16-23): binding to CPUs 0-1");
	plan_is(t, NULL, 2, 2, 8, 1, "0-1",
		"GPU 2 is on NUMA node 0 (CPUs 0-7,16-23): binding to CPUs 0-1");
	plan_is(t, NULL, 6, 6, 8, 0, "",
		"the thread's CPUs 0-1 share none with GPU 6's NUMA node (CPUs 8-15,24-31): keeping the launcher's binding");
	plan_is(t, NULL, -1, 2, 4, 1, "0-1",
		"local rank 2 of 4 (no NIC, no GPU) takes NUMA node 0 (CPUs 0-7,16-23): binding to CPUs 0-1");
	plan_is(t, NULL, -1, 3, 4, 0, "",
		"the thread's CPUs 0-1 share none with local rank 3 of 4 (no NIC, no GPU)'s NUMA node (CPUs 8-15,24-31): keeping the launcher's binding");
	plan_is(t, "rxe0", -1, 0, 1, 0, "", "rxe0: locality unknown (not in the topology): no binding");
	{
		int bind;

		tap_is_int(ibc_topo_progress_plan(t, NULL, 8, 0, 1, &bind, NULL, 0, NULL, 0),
			   IBC_ERR_INVALID_ARG, "GPU out of range");
		tap_is_int(ibc_topo_progress_plan(t, NULL, -1, 2, 2, &bind, NULL, 0, NULL, 0),
			   IBC_ERR_INVALID_ARG, "local rank out of range");
	}

	/* the rank's GPU (IBC_TOPO_GPU here; no CUDA context on this machine) and the NIC it gets */
	{
		const char *nics[8];
		char why[IBC_TOPO_WHY_LEN];
		char want[64];
		enum ibc_topo_dist d;
		int gpu = -2;
		int idx = -1;
		int g;

		for (g = 0; g < 8; g++)
			nics[g] = ibc_topo_nic_name(t, 7 - g);  /* reversed: order must not matter */
		for (g = 0; g < 8; g++) {
			snprintf(want, sizeof(want), "%d", g);
			setenv("IBC_TOPO_GPU", want, 1);
			ibc_param_reset_all();
			tap_is_int(ibc_topo_rank_gpu(t, &gpu, why, sizeof(why)), IBC_OK,
				   "IBC_TOPO_GPU=%d", g);
			tap_is_int(gpu, g, "  rank's GPU is %d (%s)", g, why);
			tap_is_int(ibc_topo_pick_nic(t, gpu, g, 8, nics, 8, &idx, &d, NULL, 0), IBC_OK,
				   "  NIC for GPU %d", g);
			snprintf(want, sizeof(want), "mlx5_%d", g);
			tap_is_str(idx >= 0 && idx < 8 ? nics[idx] : "?", want, "  GPU %d -> %s", g,
				   want);
			tap_is_str(ibc_topo_dist_name(d), "PIX", "  GPU %d: PIX", g);
		}
		setenv("IBC_TOPO_GPU", "8", 1);
		ibc_param_reset_all();
		tap_is_int(ibc_topo_rank_gpu(t, &gpu, why, sizeof(why)), IBC_OK,
			   "IBC_TOPO_GPU=8 (WARNs)");
		tap_is_int(gpu, -1, "  beyond the 8 GPUs: none");
		tap_is_str(why, "IBC_TOPO_GPU=8 but the topology has 8 GPUs: no GPU", "  reason");
		unsetenv("IBC_TOPO_GPU");
		ibc_param_reset_all();
		tap_is_int(ibc_topo_rank_gpu(t, &gpu, why, sizeof(why)), IBC_OK, "IBC_TOPO_GPU unset");
		tap_is_int(gpu, -1, "  no CUDA context here: no GPU");
		tap_is_str(why, "no GPU (no current CUDA context)", "  reason");
	}
	ibc_topo_destroy(t);
	t = NULL;

	/* the fake 2-NUMA machine: CPU 0 on node 0, CPU 1 on node 1 */
	snprintf(path, sizeof(path), "%s/tests/topo/fake-2numa-2pu.xml", srcdir ? srcdir : ".");
	setenv("IBC_TOPO_FILE", path, 1);
	ibc_param_reset_all();
	tap_is_int(ibc_topo_create(&t), IBC_OK, "fake 2-NUMA XML loads as this system");
	if (!t)
		tap_bail_out("%s", ibc_last_error());
	plan_is(t, NULL, -1, 0, 2, 1, "0",
		"local rank 0 of 2 (no NIC, no GPU) takes NUMA node 0 (CPUs 0): binding to CPUs 0");
	plan_is(t, NULL, -1, 1, 2, 1, "1",
		"local rank 1 of 2 (no NIC, no GPU) takes NUMA node 1 (CPUs 1): binding to CPUs 1");
	plan_is(t, "mlx5_1", -1, 0, 2, 1, "1",
		"mlx5_1 is on NUMA node 1 (CPUs 1): binding to CPUs 1");
	setenv("IBC_BIND", "0", 1);
	ibc_param_reset_all();
	plan_is(t, NULL, -1, 1, 2, 0, "", "IBC_BIND=0: thread affinity left alone");
	unsetenv("IBC_BIND");
	ibc_param_reset_all();
	ibc_topo_destroy(t);

	/* real communicators: the progress thread of each rank, read back */
	g_cpus = fork_ranks_shared(2 * CPUS_LEN);
	if (!g_cpus)
		tap_bail_out("cannot map shared memory");
	g_gpu = fork_ranks_shared(2 * sizeof(int));
	if (!g_gpu)
		tap_bail_out("cannot map shared memory");
	setenv("IBC_TRANSPORT", "shm", 1);
	two_ranks("1", "0", "1");
	tap_ok(g_gpu[0] == -1 && g_gpu[1] == -1, "no GPU in the fake machine: comm->gpu -1 (%d %d)",
	       g_gpu[0], g_gpu[1]);
	two_ranks("0", "0-1", "0-1");

	/* the DGX machine: rank 0 drives GPU 1 (NUMA 0), rank 1 GPU 6 (NUMA 1) */
	snprintf(path, sizeof(path), "%s/tests/topo/dgx-h100.xml", srcdir ? srcdir : ".");
	setenv("IBC_TOPO_FILE", path, 1);
	g_rank_gpu[0] = "1";
	g_rank_gpu[1] = "6";
	two_ranks("1", "0-1", "0-1");
	tap_is_int(g_gpu[0], 1, "DGX: rank 0's communicator knows GPU 1");
	tap_is_int(g_gpu[1], 6, "DGX: rank 1's communicator knows GPU 6");
	sched_setaffinity(0, sizeof(orig), &orig);
	return tap_done();
}
