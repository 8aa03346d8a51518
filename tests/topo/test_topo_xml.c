/* SPDX-License-Identifier: MIT */
/*
 * test_topo_xml.c - the hwloc backend on machines described by the XML
 * files of tests/topo/ (see gen_topo_xml.py): the exact NIC, distance
 * class and locality for every GPU and local rank, the GDR distance rule,
 * the printed tree, bad files, and allocation failures at every step of
 * ibc_topo_create(). SKIPs when built without hwloc.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/build_info.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "tap.h"
#include "topo/topo.h"

static char xml_path[4096];

static struct ibc_topo *load(const char *xml)
{
	struct ibc_topo *t = NULL;
	const char *srcdir = getenv("top_srcdir");
	ibc_status_t st;

	snprintf(xml_path, sizeof(xml_path), "%s/tests/topo/%s", srcdir ? srcdir : ".", xml);
	setenv("IBC_TOPO_FILE", xml_path, 1);
	ibc_param_reset_all();
	st = ibc_topo_create(&t);
	tap_is_int(st, IBC_OK, "%s loads", xml);
	if (st != IBC_OK)
		tap_bail_out("cannot load %s: %s", xml_path, ibc_last_error());
	return t;
}

static void set_gdr_level(const char *level)
{
	if (level)
		setenv("IBC_NET_GDR_LEVEL", level, 1);
	else
		unsetenv("IBC_NET_GDR_LEVEL");
	ibc_param_reset_all();
}

/* ibc_topo_print() into a string; caller frees */
static char *print_to_string(struct ibc_topo *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		tap_bail_out("open_memstream failed");
	tap_is_int(ibc_topo_print(t, f), IBC_OK, "ibc_topo_print succeeds");
	fclose(f);
	return buf;
}

static int count_lines_with(const char *text, const char *needle)
{
	int n = 0;

	while ((text = strstr(text, needle)) != NULL) {
		n++;
		text += strlen(needle);
	}
	return n;
}

static void check_pick(struct ibc_topo *t, int gpu, int local_rank, int local_nranks,
		       const char *const *cands, int ncands, const char *want_nic,
		       enum ibc_topo_dist want_dist)
{
	enum ibc_topo_dist d = IBC_TOPO_SYS;
	char why[IBC_TOPO_WHY_LEN] = "";
	int idx = -1;

	tap_is_int(ibc_topo_pick_nic(t, gpu, local_rank, local_nranks, cands, ncands, &idx, &d, why,
				     sizeof(why)),
		   IBC_OK, "pick gpu %d rank %d/%d", gpu, local_rank, local_nranks);
	tap_is_str(idx >= 0 ? cands[idx] : "(none)", want_nic, "gpu %d rank %d/%d -> %s (%s)", gpu,
		   local_rank, local_nranks, want_nic, why);
	tap_is_str(ibc_topo_dist_name(d), ibc_topo_dist_name(want_dist),
		   "gpu %d rank %d/%d distance", gpu, local_rank, local_nranks);
}

static void test_dgx(void)
{
	static const char *const busids[8] = {
		"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
		"0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0",
	};
	static const char *const all[8] = { "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3",
					    "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7" };
	static const char *const rev[8] = { "mlx5_7", "mlx5_6", "mlx5_5", "mlx5_4",
					    "mlx5_3", "mlx5_2", "mlx5_1", "mlx5_0" };
	static const char *const two[2] = { "mlx5_1", "mlx5_2" };
	/* GPU g with candidates {mlx5_1, mlx5_2}: ties shared round-robin per class */
	static const int two_idx[8] = { 0, 0, 1, 1, 0, 1, 0, 1 };
	static const enum ibc_topo_dist two_dist[8] = {
		IBC_TOPO_NODE, IBC_TOPO_PIX, IBC_TOPO_PIX, IBC_TOPO_NODE,
		IBC_TOPO_SYS, IBC_TOPO_SYS, IBC_TOPO_SYS, IBC_TOPO_SYS,
	};
	/* no GPU: round-robin over sockets first */
	static const char *const spread[8] = { "mlx5_0", "mlx5_4", "mlx5_1", "mlx5_5",
					       "mlx5_2", "mlx5_6", "mlx5_3", "mlx5_7" };
	static const char *const unknown[2] = { "mlx5_0", "rxe0" };
	struct ibc_topo *t = load("dgx-h100.xml");
	char buf[IBC_TOPO_WHY_LEN];
	char cpus[IBC_TOPO_CPULIST_LEN];
	enum ibc_topo_dist d;
	int numa;
	int g;
	int n;
	int r;
	int i;
	int ok;
	char *text;

	tap_ok(strstr(ibc_topo_source(t), "hwloc xml") != NULL, "source: %s", ibc_topo_source(t));
	tap_is_int(ibc_topo_nic_count(t), 8, "DGX: 8 NICs (the Ethernet port is not one)");
	for (i = 0; i < 8; i++)
		tap_is_str(ibc_topo_nic_name(t, i), all[i], "NIC %d name", i);
	tap_ok(ibc_topo_nic_name(t, 8) == NULL, "NIC 8 out of range is NULL");
	tap_is_int(ibc_topo_gpu_count(t), 8, "DGX: 8 GPUs");
	for (g = 0; g < 8; g++) {
		tap_is_int(ibc_topo_gpu_busid(t, g, buf, sizeof(buf)), IBC_OK, "busid of GPU %d", g);
		tap_is_str(buf, busids[g], "GPU %d (cuda%d) is at %s", g, g, busids[g]);
	}
	tap_is_int(ibc_topo_gpu_busid(t, 8, buf, sizeof(buf)), IBC_ERR_INVALID_ARG, "GPU 8 invalid");

	/* CUDA and NVML spellings of bus ids */
	g = -1;
	tap_is_int(ibc_topo_gpu_by_busid(t, "0000:1B:00.0", &g), IBC_OK, "CUDA-style bus id");
	tap_is_int(g, 0, "0000:1B:00.0 is GPU 0");
	tap_is_int(ibc_topo_gpu_by_busid(t, "00000000:DF:00.0", &g), IBC_OK, "NVML-style bus id");
	tap_is_int(g, 7, "00000000:DF:00.0 is GPU 7");
	tap_is_int(ibc_topo_gpu_by_busid(t, "c3:00.0", &g), IBC_OK, "bus id without domain");
	tap_is_int(g, 5, "c3:00.0 is GPU 5");
	g = 42;
	tap_is_int(ibc_topo_gpu_by_busid(t, "0000:1c:00.0", &g), IBC_ERR_INVALID_ARG,
		   "a NIC's bus id is no GPU");
	tap_is_int(ibc_topo_gpu_by_busid(t, "1c:00", &g), IBC_ERR_INVALID_ARG, "malformed bus id");
	tap_is_int(g, 42, "output untouched on failure");

	/* the whole distance matrix */
	ok = 1;
	for (g = 0; g < 8; g++) {
		for (n = 0; n < 8; n++) {
			enum ibc_topo_dist want = g == n ? IBC_TOPO_PIX :
						  g / 4 == n / 4 ? IBC_TOPO_NODE : IBC_TOPO_SYS;

			if (ibc_topo_gpu_nic_dist(t, g, all[n], &d) != IBC_OK || d != want) {
				tap_diag("GPU %d - %s: got %s want %s", g, all[n],
					 ibc_topo_dist_name(d), ibc_topo_dist_name(want));
				ok = 0;
			}
		}
	}
	tap_ok(ok, "DGX distances: PIX with its own NIC, NODE on its socket, SYS across");
	tap_is_int(ibc_topo_gpu_nic_dist(t, 0, "rxe0", &d), IBC_OK, "unknown NIC is not an error");
	tap_is_int(d, IBC_TOPO_SYS, "unknown NIC is SYS");
	tap_is_int(ibc_topo_gpu_nic_dist(t, 8, "mlx5_0", &d), IBC_ERR_INVALID_ARG, "GPU 8 invalid");
	tap_is_int(ibc_topo_gpu_nic_dist(t, -1, "mlx5_0", &d), IBC_ERR_INVALID_ARG, "GPU -1 invalid");

	/* each GPU gets its own NIC, whatever the number of local ranks */
	for (n = 1; n <= 8; n++)
		for (r = 0; r < n; r++)
			check_pick(t, r, r, n, all, 8, all[r], IBC_TOPO_PIX);
	tap_is_int(ibc_topo_pick_nic(t, 3, 3, 8, all, 8, &i, &d, buf, sizeof(buf)), IBC_OK,
		   "pick for GPU 3");
	tap_is_str(buf, "GPU 3 -> mlx5_3: PIX (same PCIe switch), nearest of 8 candidates",
		   "reason for GPU 3");
	/* order of candidates does not matter */
	for (g = 0; g < 8; g++)
		check_pick(t, g, g, 8, rev, 8, all[g], IBC_TOPO_PIX);
	/* two candidates (IBC_IB_HCA=mlx5_1,mlx5_2): ties shared round-robin */
	for (g = 0; g < 8; g++)
		check_pick(t, g, g, 8, two, 2, two[two_idx[g]], two_dist[g]);
	tap_is_int(ibc_topo_pick_nic(t, 3, 3, 8, two, 2, &i, &d, buf, sizeof(buf)), IBC_OK,
		   "pick for GPU 3 among 2");
	tap_is_str(buf,
		   "GPU 3 -> mlx5_2: NODE (different host bridges of one NUMA node), 2 of 2 candidates tie, shared round-robin (GPU #1 of this set)",
		   "reason for a tie");
	/* a candidate the topology does not know */
	check_pick(t, 0, 0, 8, unknown, 2, "mlx5_0", IBC_TOPO_PIX);
	check_pick(t, 1, 1, 8, unknown, 2, "mlx5_0", IBC_TOPO_NODE);
	check_pick(t, 4, 4, 8, unknown, 2, "mlx5_0", IBC_TOPO_SYS);     /* SYS tie, 1st */
	check_pick(t, 5, 5, 8, unknown, 2, "rxe0", IBC_TOPO_SYS);       /* SYS tie, 2nd */
	check_pick(t, 0, 0, 8, unknown + 1, 1, "rxe0", IBC_TOPO_SYS);
	/* no GPU: spread over sockets, then host bridges */
	for (n = 1; n <= 8; n++)
		for (r = 0; r < n; r++)
			check_pick(t, -1, r, n, all, 8, spread[r], IBC_TOPO_DIST_COUNT);
	for (r = 0; r < 8; r++)
		check_pick(t, -1, r, 8, rev, 8, spread[r], IBC_TOPO_DIST_COUNT);
	check_pick(t, -1, 9, 12, all, 8, spread[1], IBC_TOPO_DIST_COUNT);
	tap_is_int(ibc_topo_pick_nic(t, -1, 1, 8, all, 8, &i, &d, buf, sizeof(buf)), IBC_OK,
		   "pick without GPU");
	tap_is_str(buf, "no GPU: local rank 1 of 8 -> mlx5_4, position 1 of the 8 NICs spread over NUMA nodes (NUMA 1)",
		   "reason without GPU");
	/* bad arguments */
	tap_is_int(ibc_topo_pick_nic(t, 8, 0, 1, all, 8, &i, &d, NULL, 0), IBC_ERR_INVALID_ARG,
		   "GPU 8 does not exist");
	tap_is_int(ibc_topo_pick_nic(t, 0, 0, 1, all, 0, &i, &d, NULL, 0), IBC_ERR_INVALID_ARG,
		   "no candidates");
	tap_is_int(ibc_topo_pick_nic(t, 0, 2, 2, all, 8, &i, &d, NULL, 0), IBC_ERR_INVALID_ARG,
		   "local rank out of range");
	tap_is_int(ibc_topo_pick_nic(t, 0, 0, 1, NULL, 8, &i, &d, NULL, 0), IBC_ERR_INVALID_ARG,
		   "NULL candidates");

	/* locality */
	tap_is_int(ibc_topo_nic_locality(t, "mlx5_0", &numa, cpus, sizeof(cpus)), IBC_OK,
		   "mlx5_0 locality");
	tap_is_int(numa, 0, "mlx5_0 on NUMA 0");
	tap_is_str(cpus, "0-7,16-23", "mlx5_0 CPUs");
	tap_is_int(ibc_topo_nic_locality(t, "mlx5_5", &numa, cpus, sizeof(cpus)), IBC_OK,
		   "mlx5_5 locality");
	tap_is_int(numa, 1, "mlx5_5 on NUMA 1");
	tap_is_str(cpus, "8-15,24-31", "mlx5_5 CPUs");
	tap_is_int(ibc_topo_gpu_locality(t, 6, &numa, cpus, sizeof(cpus)), IBC_OK, "GPU 6 locality");
	tap_is_int(numa, 1, "GPU 6 on NUMA 1");
	tap_is_str(cpus, "8-15,24-31", "GPU 6 CPUs");
	tap_is_int(ibc_topo_nic_locality(t, "mlx5_9", &numa, NULL, 0), IBC_ERR_INVALID_ARG,
		   "unknown NIC has no locality");

	/* GPUDirect RDMA distance rule */
	set_gdr_level(NULL);
	tap_is_int(ibc_topo_gdr_allowed(t, 0, "mlx5_0", &ok, buf, sizeof(buf)), IBC_OK, "gdr 0-0");
	tap_is_int(ok, 1, "default PXB: PIX allowed (%s)", buf);
	tap_is_str(buf, "GPU 0 - mlx5_0: PIX <= PXB: GPUDirect RDMA allowed by distance",
		   "gdr reason");
	tap_is_int(ibc_topo_gdr_allowed(t, 0, "mlx5_1", &ok, buf, sizeof(buf)), IBC_OK, "gdr 0-1");
	tap_is_int(ok, 0, "default PXB: NODE refused (%s)", buf);
	set_gdr_level("PHB");
	tap_is_int(ibc_topo_gdr_allowed(t, 0, "mlx5_1", &ok, buf, sizeof(buf)), IBC_OK, "gdr PHB");
	tap_is_int(ok, 1, "PHB (same NUMA node, NCCL's meaning): NODE allowed (%s)", buf);
	tap_is_int(ibc_topo_gdr_allowed(t, 0, "mlx5_4", &ok, buf, sizeof(buf)), IBC_OK, "gdr PHB");
	tap_is_int(ok, 0, "PHB: SYS refused (%s)", buf);
	set_gdr_level("SYS");
	tap_is_int(ibc_topo_gdr_allowed(t, 0, "mlx5_4", &ok, buf, sizeof(buf)), IBC_OK, "gdr SYS");
	tap_is_int(ok, 1, "SYS: across sockets allowed (%s)", buf);
	set_gdr_level("LOC");
	tap_is_int(ibc_topo_gdr_allowed(t, 0, "mlx5_0", &ok, buf, sizeof(buf)), IBC_OK, "gdr LOC");
	tap_is_int(ok, 0, "LOC: even PIX refused (%s)", buf);
	set_gdr_level("0");
	tap_is_int(ibc_topo_gdr_allowed(t, 0, "mlx5_0", &ok, buf, sizeof(buf)), IBC_OK, "gdr 0");
	tap_is_int(ok, 0, "legacy 0 = LOC (%s)", buf);
	set_gdr_level("far");
	ibc_log_set_last_error("");
	tap_is_int(ibc_topo_gdr_allowed(t, 0, "mlx5_1", &ok, buf, sizeof(buf)), IBC_OK, "gdr bad");
	tap_is_int(ok, 0, "invalid level falls back to PXB: NODE refused");
	tap_ok(strstr(ibc_last_error(), "IBC_NET_GDR_LEVEL=far") != NULL, "warning names the value: %s",
	       ibc_last_error());
	set_gdr_level(NULL);

	/* binding needs the topology of this machine */
	tap_is_int(ibc_topo_bind_plan(t, "mlx5_0", &ok, cpus, sizeof(cpus), buf, sizeof(buf)), IBC_OK,
		   "bind plan");
	tap_is_int(ok, 0, "no binding from an XML topology (%s)", buf);
	tap_is_int(ibc_topo_bind_thread_near_nic(t, "mlx5_0"), IBC_OK, "bind is a no-op here");

	text = print_to_string(t);
	tap_ok(strstr(text, "summary: 2 packages, 2 NUMA nodes, 16 cores, 32 PUs, 8 NICs, 8 GPUs (CUDA order)\n") != NULL,
	       "printed summary");
	tap_ok(strstr(text, "  Package 1: 8 cores, CPUs 8-15,24-31\n") != NULL, "printed package 1");
	tap_ok(strstr(text, "    NUMANode 0: CPUs 0-7,16-23, 65536 MiB\n") != NULL,
	       "printed NUMA node 0");
	tap_ok(strstr(text, "            GPU 0 0000:1b:00.0 cuda0 NVIDIA H100 80GB HBM3\n") != NULL,
	       "printed GPU 0 below its switch");
	tap_ok(strstr(text, "            NIC mlx5_7 0000:e0:00.0 (net ibp224s0)\n") != NULL,
	       "printed mlx5_7 below its switch");
	tap_is_int(count_lines_with(text, "HostBridge"), 8,
		   "8 host bridges printed (not the Ethernet one)");
	tap_is_int(count_lines_with(text, "PCIBridge"), 32, "32 PCI bridges printed");
	tap_ok(strstr(text, "eno1") == NULL, "the Ethernet port is left out");
	free(text);
	ibc_topo_destroy(t);
}

static void test_two_nic(void)
{
	static const char *const nics[2] = { "mlx5_0", "mlx5_1" };
	static const char *const busids[8] = {
		"0000:15:00.0", "0000:16:00.0", "0000:1a:00.0", "0000:1b:00.0",
		"0000:83:00.0", "0000:84:00.0", "0000:87:00.0", "0000:88:00.0",
	};
	static const enum ibc_topo_dist d0[8] = {
		IBC_TOPO_PIX, IBC_TOPO_PIX, IBC_TOPO_PXB, IBC_TOPO_PXB,
		IBC_TOPO_SYS, IBC_TOPO_SYS, IBC_TOPO_SYS, IBC_TOPO_SYS,
	};
	static const enum ibc_topo_dist d1[8] = {
		IBC_TOPO_SYS, IBC_TOPO_SYS, IBC_TOPO_SYS, IBC_TOPO_SYS,
		IBC_TOPO_PHB, IBC_TOPO_PHB, IBC_TOPO_PHB, IBC_TOPO_PHB,
	};
	struct ibc_topo *t = load("two-nic-8gpu.xml");
	char buf[IBC_TOPO_WHY_LEN];
	enum ibc_topo_dist d;
	int g;
	int n;
	int r;
	int ok;
	char *text;

	tap_is_int(ibc_topo_nic_count(t), 2, "2-NIC node: 2 NICs");
	tap_is_int(ibc_topo_gpu_count(t), 8, "2-NIC node: 8 GPUs");
	for (g = 0; g < 8; g++) {
		tap_is_int(ibc_topo_gpu_busid(t, g, buf, sizeof(buf)), IBC_OK, "busid of GPU %d", g);
		tap_is_str(buf, busids[g], "GPU %d by PCI bus order is %s", g, busids[g]);
		tap_is_int(ibc_topo_gpu_nic_dist(t, g, "mlx5_0", &d), IBC_OK, "dist");
		tap_is_str(ibc_topo_dist_name(d), ibc_topo_dist_name(d0[g]), "GPU %d - mlx5_0", g);
		tap_is_int(ibc_topo_gpu_nic_dist(t, g, "mlx5_1", &d), IBC_OK, "dist");
		tap_is_str(ibc_topo_dist_name(d), ibc_topo_dist_name(d1[g]), "GPU %d - mlx5_1", g);
	}
	for (n = 1; n <= 8; n++)
		for (r = 0; r < n; r++)
			check_pick(t, r, r, n, nics, 2, nics[r / 4], r < 4 ? d0[r] : d1[r]);
	for (n = 1; n <= 8; n++)
		for (r = 0; r < n; r++)
			check_pick(t, -1, r, n, nics, 2, nics[r % 2], IBC_TOPO_DIST_COUNT);
	/* GDR: GPU 2 is PXB from mlx5_0, GPU 4 PHB from mlx5_1 */
	set_gdr_level(NULL);
	tap_is_int(ibc_topo_gdr_allowed(t, 2, "mlx5_0", &ok, NULL, 0), IBC_OK, "gdr");
	tap_is_int(ok, 1, "default PXB: PXB allowed");
	tap_is_int(ibc_topo_gdr_allowed(t, 4, "mlx5_1", &ok, NULL, 0), IBC_OK, "gdr");
	tap_is_int(ok, 0, "default PXB: PHB refused");
	set_gdr_level("PIX");
	tap_is_int(ibc_topo_gdr_allowed(t, 2, "mlx5_0", &ok, NULL, 0), IBC_OK, "gdr");
	tap_is_int(ok, 0, "PIX: PXB refused");
	tap_is_int(ibc_topo_gdr_allowed(t, 1, "mlx5_0", &ok, NULL, 0), IBC_OK, "gdr");
	tap_is_int(ok, 1, "PIX: PIX allowed");
	set_gdr_level("3");
	tap_is_int(ibc_topo_gdr_allowed(t, 4, "mlx5_1", &ok, NULL, 0), IBC_OK, "gdr");
	tap_is_int(ok, 1, "legacy 3 = PHB: PHB allowed");
	set_gdr_level(NULL);

	text = print_to_string(t);
	tap_ok(strstr(text, "(PCI bus id order)") != NULL, "GPUs numbered by PCI bus id");
	tap_ok(strstr(text, "                GPU 2 0000:1a:00.0 NVIDIA A100-SXM4-80GB\n") != NULL,
	       "printed GPU 2 two switches down");
	tap_ok(strstr(text, "        NIC mlx5_1 0000:89:00.0 (net ibp137s0)\n") != NULL,
	       "printed mlx5_1 on its root port");
	free(text);
	ibc_topo_destroy(t);
}

static void test_no_gpu(void)
{
	static const char *const nics[3] = { "mlx5_0", "mlx5_1", "mlx5_2" };
	static const char *const shuffled[3] = { "mlx5_2", "mlx5_1", "mlx5_0" };
	/* two cards first, then the second port of the dual-port card */
	static const char *const spread[3] = { "mlx5_0", "mlx5_2", "mlx5_1" };
	struct ibc_topo *t = load("one-socket-nogpu.xml");
	char cpus[IBC_TOPO_CPULIST_LEN];
	enum ibc_topo_dist d;
	int numa = -1;
	int idx;
	int n;
	int r;

	tap_is_int(ibc_topo_gpu_count(t), 0, "single socket: no GPU");
	tap_is_int(ibc_topo_nic_count(t), 3, "single socket: 3 NICs");
	for (n = 1; n <= 8; n++)
		for (r = 0; r < n; r++)
			check_pick(t, -1, r, n, nics, 3, spread[r % 3], IBC_TOPO_DIST_COUNT);
	for (r = 0; r < 3; r++)
		check_pick(t, -1, r, 3, shuffled, 3, spread[r], IBC_TOPO_DIST_COUNT);
	tap_is_int(ibc_topo_pick_nic(t, 0, 0, 1, nics, 3, &idx, &d, NULL, 0), IBC_ERR_INVALID_ARG,
		   "GPU 0 does not exist here");
	tap_is_int(ibc_topo_nic_locality(t, "mlx5_2", &numa, cpus, sizeof(cpus)), IBC_OK,
		   "mlx5_2 locality");
	tap_is_int(numa, 0, "mlx5_2 on NUMA 0");
	tap_is_str(cpus, "0-15", "mlx5_2 CPUs");
	ibc_topo_destroy(t);
}

static void test_bad_files(void)
{
	struct ibc_topo *t = (struct ibc_topo *)&t;
	char path[4096];
	const char *srcdir = getenv("top_srcdir");

	setenv("IBC_TOPO_FILE", "/nonexistent/topo.xml", 1);
	ibc_param_reset_all();
	tap_is_int(ibc_topo_create(&t), IBC_ERR_SYSTEM, "missing file: IBC_ERR_SYSTEM");
	tap_ok(strstr(ibc_last_error(), "IBC_TOPO_FILE=/nonexistent/topo.xml") != NULL,
	       "error names the file: %s", ibc_last_error());
	tap_ok(t == (struct ibc_topo *)&t, "output untouched on failure");
	snprintf(path, sizeof(path), "%s/tests/topo/gen_topo_xml.py", srcdir ? srcdir : ".");
	setenv("IBC_TOPO_FILE", path, 1);
	ibc_param_reset_all();
	tap_is_int(ibc_topo_create(&t), IBC_ERR_INVALID_ARG, "not XML: IBC_ERR_INVALID_ARG");
	tap_is_int(ibc_topo_create(NULL), IBC_ERR_INVALID_ARG, "NULL output");
}

/* child mode: one create/destroy under IBC_FAULT_INJECT; exit 0 OK, 1 clean failure */
static int fault_child(void)
{
	struct ibc_topo *t = NULL;
	ibc_status_t st;

	ibc_fault_configure();
	st = ibc_topo_create(&t);
	if (st == IBC_OK) {
		ibc_topo_destroy(t);
		return ibc_fault_fired_count() ? 2 : 0;
	}
	return st == IBC_ERR_NO_MEMORY && ibc_fault_fired_count() == 1 && t == NULL ? 1 : 2;
}

static void test_alloc_faults(void)
{
	char spec[32];
	int k;
	int bad = 0;
	int done = 0;

	for (k = 1; k <= 200 && !done; k++) {
		pid_t pid;
		int status;

		snprintf(spec, sizeof(spec), "alloc:%d", k);
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			setenv("IBC_FAULT_INJECT", spec, 1);
			execl("/proc/self/exe", "test_topo_xml", "--fault-child", (char *)NULL);
			_exit(3);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
			bad++;
			break;
		}
		if (WEXITSTATUS(status) == 0) {
			done = k;
		} else if (WEXITSTATUS(status) != 1) {
			tap_diag("alloc:%d: child exit %d", k, WEXITSTATUS(status));
			bad++;
		}
	}
	tap_ok(done > 1, "create succeeds once the fault point passes its %d allocations", done - 1);
	tap_is_int(bad, 0, "every earlier allocation failure gives IBC_ERR_NO_MEMORY cleanly");
}

int main(int argc, char **argv)
{
	setenv("IBC_DEBUG", "WARN", 1);
	if (!ibc_build_info()->have_hwloc)
		tap_skip_all("built without hwloc: XML topologies need it");
	if (argc > 1 && !strcmp(argv[1], "--fault-child"))
		return fault_child();
	test_dgx();
	test_two_nic();
	test_no_gpu();
	/* the fault children load the DGX */
	snprintf(xml_path, sizeof(xml_path), "%s/tests/topo/dgx-h100.xml",
		 getenv("top_srcdir") ? getenv("top_srcdir") : ".");
	setenv("IBC_TOPO_FILE", xml_path, 1);
	test_alloc_faults();
	test_bad_files();
	return tap_done();
}
