/* SPDX-License-Identifier: MIT */
/*
 * test_topo_real.c - the topology of the machine the test runs on (this
 * box, the Soft-RoCE VM, a GPU node) loads, prints and agrees with what the
 * kernel lists independently of hwloc: NUMA nodes in /sys/devices/system/
 * node, verbs devices in /sys/class/infiniband, NVIDIA GPUs in /proc/driver/
 * nvidia/gpus. Every NIC found has a locality and a binding decision, and
 * a pick for each local rank count 1..8 returns one of the NICs.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/build_info.h"
#include "base/param.h"
#include "tap.h"
#include "topo/topo_internal.h"

/* entries of @dir whose name starts with @prefix; -1 when @dir is missing */
static int count_entries(const char *dir, const char *prefix)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.' && !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

static void test_shared(int nnics)
{
	struct ibc_topo *s1 = NULL;
	struct ibc_topo *s2 = NULL;

	tap_is_int(ibc_topo_shared(&s1), IBC_OK, "shared topology");
	tap_is_int(ibc_topo_shared(&s2), IBC_OK, "shared topology again");
	tap_ok(s1 && s1 == s2, "one shared topology per process");
	tap_is_int(ibc_topo_nic_count(s1), nnics, "same NICs as a private one");
}

int main(void)
{
	struct ibc_topo *t = NULL;
	const char **cands;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int nnics;
	int ngpus;
	int nsys;
	int n;
	int r;
	int i;

	setenv("IBC_DEBUG", "WARN", 1);
	unsetenv("IBC_TOPO_FILE");
	ibc_param_reset_all();
	tap_is_int(ibc_topo_create(&t), IBC_OK, "this machine's topology loads");
	if (!t)
		tap_bail_out("no topology: %s", ibc_last_error());
	tap_diag("source: %s", ibc_topo_source(t));
	nnics = ibc_topo_nic_count(t);
	ngpus = ibc_topo_gpu_count(t);

	nsys = count_entries("/sys/class/infiniband", "");
	tap_is_int(nnics, nsys < 0 ? 0 : nsys, "NICs = entries of /sys/class/infiniband");
	nsys = count_entries("/proc/driver/nvidia/gpus", "");
	if (nsys >= 0)
		tap_is_int(ngpus, nsys, "GPUs = entries of /proc/driver/nvidia/gpus");
	else
		tap_diag("no NVIDIA driver: %d GPUs seen on PCI", ngpus);

	f = open_memstream(&text, &len);
	tap_ok(f != NULL, "memory stream");
	if (!f)
		return tap_done();
	tap_is_int(ibc_topo_print(t, f), IBC_OK, "the topology prints");
	fclose(f);
	tap_ok(strstr(text, "NUMANode 0") != NULL, "the tree shows NUMA node 0");
	if (ibc_build_info()->have_hwloc) {
		char line[64];

		nsys = count_entries("/sys/devices/system/node", "node");
		if (nsys > 0) {
			snprintf(line, sizeof(line), ", %d NUMA nodes,", nsys);
			tap_ok(strstr(text, line) != NULL, "NUMA nodes = /sys/devices/system/node (%d)",
			       nsys);
		}
		tap_ok(strstr(text, "Machine: CPUs ") != NULL, "the tree starts at the machine");
	}
	/* the tree goes to the test log */
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		tap_diag("%s", line);
	free(text);
	nsys = count_entries("/sys/devices/system/node", "node");

	cands = ibc_calloc((size_t)(nnics ? nnics : 1), sizeof(*cands), "test candidates");
	for (i = 0; i < nnics; i++) {
		char cpus[IBC_TOPO_CPULIST_LEN];
		char why[IBC_TOPO_WHY_LEN];
		int numa = -2;
		int bind = -1;

		cands[i] = ibc_topo_nic_name(t, i);
		tap_ok(cands[i] != NULL, "NIC %d has a name", i);
		tap_is_int(ibc_topo_nic_locality(t, cands[i], &numa, cpus, sizeof(cpus)), IBC_OK,
			   "%s has a locality", cands[i]);
		snprintf(why, sizeof(why), "/sys/devices/system/node/node%d", numa);
		tap_ok(numa == -1 || (numa >= 0 && (nsys <= 0 || access(why, F_OK) == 0)),
		       "%s is on NUMA node %d (-1: unknown, else listed by the kernel), CPUs %s",
		       cands[i], numa, cpus);
		tap_ok(cpus[0] != '\0', "%s has local CPUs", cands[i]);
		tap_is_int(ibc_topo_bind_plan(t, cands[i], &bind, cpus, sizeof(cpus), why, sizeof(why)),
			   IBC_OK, "%s binding decision: %s", cands[i], why);
		tap_ok(bind == 0 || bind == 1, "decision is a yes or a no");
	}
	for (n = 1; n <= 8 && nnics; n++) {
		for (r = 0; r < n; r++) {
			int idx = -1;

			tap_is_int(ibc_topo_pick_nic(t, ngpus ? r % ngpus : -1, r, n, cands, nnics, &idx,
						     NULL, NULL, 0),
				   IBC_OK, "pick for local rank %d of %d", r, n);
			tap_ok(idx >= 0 && idx < nnics, "rank %d of %d gets NIC %s", r, n,
			       idx >= 0 && idx < nnics ? cands[idx] : "(none)");
		}
	}
	ibc_free(cands);
	ibc_topo_destroy(t);
	test_shared(nnics);
	return tap_done();
}
