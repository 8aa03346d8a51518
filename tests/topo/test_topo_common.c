/* SPDX-License-Identifier: MIT */
/*
 * test_topo_common.c - the backend-independent parts of src/topo: class
 * names, IBC_NET_GDR_LEVEL parsing, PCI bus id parsing, natural name order,
 * directory listing and the spread order; and, in a build without hwloc,
 * the flat backend's promises (listed order, PHB said in the reason, no
 * binding, IBC_TOPO_FILE ignored with a warning). Runs in every build.
 * "Listed order" is the order the OS lists verbs devices in
 * /sys/class/infiniband, i.e. natural name order, whatever the order of
 * the candidates passed in, so that every local rank agrees.
 */
#include "config.h"

#ifndef IBC_TEST_FLAT_BACKEND
#define IBC_TEST_FLAT_BACKEND 0
#endif

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/build_info.h"
#include "base/log.h"
#include "base/param.h"
#include "base/util.h"
#include "tap.h"
#include "topo/topo_internal.h"

static void test_names(void)
{
	tap_is_str(ibc_topo_dist_name(IBC_TOPO_PIX), "PIX", "PIX");
	tap_is_str(ibc_topo_dist_name(IBC_TOPO_PXB), "PXB", "PXB");
	tap_is_str(ibc_topo_dist_name(IBC_TOPO_PHB), "PHB", "PHB");
	tap_is_str(ibc_topo_dist_name(IBC_TOPO_NODE), "NODE", "NODE");
	tap_is_str(ibc_topo_dist_name(IBC_TOPO_SYS), "SYS", "SYS");
	tap_is_str(ibc_topo_dist_name(IBC_TOPO_DIST_COUNT), "none", "no GPU: none");
	tap_is_str(ibc_topo_dist_name((enum ibc_topo_dist)17), "?", "out of range");
	tap_ok(IBC_TOPO_PIX < IBC_TOPO_PXB && IBC_TOPO_PXB < IBC_TOPO_PHB &&
	       IBC_TOPO_PHB < IBC_TOPO_NODE && IBC_TOPO_NODE < IBC_TOPO_SYS, "classes best first");
}

static void test_gdr_level(void)
{
	static const struct {
		const char *str;
		int want;
	} ok[] = {
		{ "LOC", IBC_TOPO_GDR_NEVER }, { "PIX", IBC_TOPO_PIX }, { "pxb", IBC_TOPO_PXB },
		{ "PHB", IBC_TOPO_NODE }, { "NODE", IBC_TOPO_NODE }, { "SYS", IBC_TOPO_SYS },
		{ "0", IBC_TOPO_GDR_NEVER }, { "1", IBC_TOPO_PIX }, { "2", IBC_TOPO_PXB },
		{ "3", IBC_TOPO_NODE }, { "4", IBC_TOPO_SYS }, { "5", IBC_TOPO_SYS },
		{ "99", IBC_TOPO_SYS },
	};
	static const char *const bad[] = { "", "far", "-1", "2x", "PIXX", " PIX" };
	size_t i;
	int v;

	for (i = 0; i < IBC_ARRAY_SIZE(ok); i++) {
		v = -7;
		tap_is_int(ibc_topo_parse_gdr_level(ok[i].str, &v), 0, "'%s' parses", ok[i].str);
		tap_is_int(v, ok[i].want, "'%s' -> %d", ok[i].str, ok[i].want);
	}
	for (i = 0; i < IBC_ARRAY_SIZE(bad); i++) {
		v = -7;
		tap_is_int(ibc_topo_parse_gdr_level(bad[i], &v), -1, "'%s' rejected", bad[i]);
		tap_is_int(v, -7, "'%s' leaves the output alone", bad[i]);
	}
	tap_is_int(ibc_topo_parse_gdr_level(NULL, &v), -1, "NULL rejected");
}

static void test_busid(void)
{
	unsigned d = 1, b = 1, v = 1, f = 1;

	tap_is_int(ibc_topo_parse_busid("0000:1b:00.0", &d, &b, &v, &f), 0, "dddd:bb:dd.f");
	tap_ok(d == 0 && b == 0x1b && v == 0 && f == 0, "0000:1b:00.0 fields");
	tap_is_int(ibc_topo_parse_busid("00000001:DF:1f.7", &d, &b, &v, &f), 0, "NVML domain width");
	tap_ok(d == 1 && b == 0xdf && v == 0x1f && f == 7, "00000001:DF:1f.7 fields");
	tap_is_int(ibc_topo_parse_busid("c3:00.1", &d, &b, &v, &f), 0, "bb:dd.f");
	tap_ok(d == 0 && b == 0xc3 && v == 0 && f == 1, "c3:00.1 fields");
	tap_is_int(ibc_topo_parse_busid("0000:1b:00", &d, &b, &v, &f), -1, "no function");
	tap_is_int(ibc_topo_parse_busid("0000:1b:20.0", &d, &b, &v, &f), -1, "device > 1f");
	tap_is_int(ibc_topo_parse_busid("0000:1b:00.8", &d, &b, &v, &f), -1, "function > 7");
	tap_is_int(ibc_topo_parse_busid("0000:100:00.0", &d, &b, &v, &f), -1, "bus > ff");
	tap_is_int(ibc_topo_parse_busid("0000.1b:00:0", &d, &b, &v, &f), -1, "wrong separators");
	tap_is_int(ibc_topo_parse_busid("0000:1b:00.0 ", &d, &b, &v, &f), -1, "trailing space");
	tap_is_int(ibc_topo_parse_busid("gpu0", &d, &b, &v, &f), -1, "not hex");
}

static void test_natural(void)
{
	tap_ok(ibc_topo_natural_cmp("mlx5_2", "mlx5_10") < 0, "mlx5_2 < mlx5_10");
	tap_ok(ibc_topo_natural_cmp("mlx5_10", "mlx5_2") > 0, "mlx5_10 > mlx5_2");
	tap_ok(ibc_topo_natural_cmp("mlx5_0", "mlx5_0") == 0, "equal");
	tap_ok(ibc_topo_natural_cmp("mlx4_9", "mlx5_0") < 0, "mlx4 before mlx5");
	tap_ok(ibc_topo_natural_cmp("rxe0", "mlx5_0") > 0, "rxe after mlx5");
	tap_ok(ibc_topo_natural_cmp("rxe", "rxe0") < 0, "prefix first");
	tap_ok(ibc_topo_natural_cmp("rxe007", "rxe7") == 0, "leading zeros ignored");
}

static void test_list_dir(void)
{
	static const char *const files[] = { "mlx5_10", "mlx5_2", "rxe0", "mlx5_0", ".hidden" };
	char dir[] = "/tmp/ibc-topo-test-XXXXXX";
	char path[256];
	char **names = NULL;
	int n = -1;
	size_t i;

	tap_ok(mkdtemp(dir) != NULL, "temporary directory");
	for (i = 0; i < IBC_ARRAY_SIZE(files); i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		f = fopen(path, "w");
		if (f)
			fclose(f);
	}
	tap_is_int(ibc_topo_list_dir(dir, &names, &n), IBC_OK, "list a directory");
	tap_is_int(n, 4, "4 entries, dot files skipped");
	if (n == 4) {
		tap_is_str(names[0], "mlx5_0", "natural order 0");
		tap_is_str(names[1], "mlx5_2", "natural order 1");
		tap_is_str(names[2], "mlx5_10", "natural order 2");
		tap_is_str(names[3], "rxe0", "natural order 3");
	}
	ibc_topo_names_free(names, n);
	for (i = 0; i < IBC_ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		unlink(path);
	}
	rmdir(dir);
	tap_is_int(ibc_topo_list_dir("/nonexistent/ibc", &names, &n), IBC_OK, "missing directory");
	tap_is_int(n, 0, "missing directory has no entries");
	tap_ok(names == NULL, "and no array");
}

static void check_order(const long (*keys)[IBC_TOPO_KEY_LEVELS], const char *const *names, int n,
			const int *want, const char *what)
{
	int order[16];
	int i;
	int same = 1;

	tap_is_int(ibc_topo_spread_order(keys, names, n, order), IBC_OK, "%s: spread", what);
	for (i = 0; i < n; i++) {
		if (order[i] != want[i]) {
			tap_diag("%s: position %d is %d, want %d", what, i, order[i], want[i]);
			same = 0;
		}
	}
	tap_ok(same, "%s: spread order", what);
}

static void test_spread(void)
{
	/* 2 sockets x 2 host bridges x (1 card, 2 ports on the first) + one unknown */
	static const long k1[][IBC_TOPO_KEY_LEVELS] = {
		{ 1, 20, 300 },                 /* 0: socket 1, hb 20, card 300 */
		{ 0, 10, 100 },                 /* 1: socket 0, hb 10, card 100 port a */
		{ 0, 10, 100 },                 /* 2: socket 0, hb 10, card 100 port b */
		{ 0, 11, 200 },                 /* 3: socket 0, hb 11, card 200 */
		{ 1, 21, 400 },                 /* 4: socket 1, hb 21, card 400 */
		{ LONG_MAX, LONG_MAX, LONG_MAX },  /* 5: unknown (virtual) */
	};
	static const char *const n1[] = { "mlx5_4", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_5", "rxe0" };
	/*
	 * socket 0 spread: hb10 [card100: mlx5_0, mlx5_1], hb11 [mlx5_2] -> 1 3 2
	 * socket 1 spread: 0 4; unknown: 5; interleave: 1 0 5 3 4 2
	 */
	static const int w1[] = { 1, 0, 5, 3, 4, 2 };
	/* equal keys: natural name order, whatever the input order */
	static const long k2[][IBC_TOPO_KEY_LEVELS] = { { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 } };
	static const char *const n2[] = { "mlx5_10", "mlx5_9", "mlx5_1" };
	static const int w2[] = { 2, 1, 0 };
	/* 4 NUMA nodes with 2 NICs each on separate host bridges */
	static const long k3[][IBC_TOPO_KEY_LEVELS] = {
		{ 0, 1, 1 }, { 0, 2, 2 }, { 1, 3, 3 }, { 1, 4, 4 },
		{ 2, 5, 5 }, { 2, 6, 6 }, { 3, 7, 7 }, { 3, 8, 8 },
	};
	static const char *const n3[] = { "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7" };
	static const int w3[] = { 0, 2, 4, 6, 1, 3, 5, 7 };

	check_order(k1, n1, 6, w1, "mixed machine");
	check_order(k2, n2, 3, w2, "equal keys");
	check_order(k3, n3, 8, w3, "4 NUMA nodes");
	check_order(k3, n3, 1, w3, "one NIC");
}

/* the flat backend (only built without hwloc) */
static void test_flat(void)
{
	static const char *const cands[3] = { "nicB", "nicA", "nicC" };
	/* listed as the OS lists them (/sys/class/infiniband): name order */
	static const char *const listed[3] = { "nicA", "nicB", "nicC" };
	struct ibc_topo *t = NULL;
	char why[IBC_TOPO_WHY_LEN];
	char cpus[IBC_TOPO_CPULIST_LEN];
	enum ibc_topo_dist d;
	int idx = -1;
	int bind = -1;
	int r;

	setenv("IBC_TOPO_FILE", "/nonexistent.xml", 1);
	ibc_param_reset_all();
	ibc_log_set_last_error("");
	tap_is_int(ibc_topo_create(&t), IBC_OK, "flat: create with IBC_TOPO_FILE set");
	tap_ok(strstr(ibc_last_error(), "IBC_TOPO_FILE=/nonexistent.xml ignored") != NULL,
	       "flat: IBC_TOPO_FILE ignored with a warning: %s", ibc_last_error());
	unsetenv("IBC_TOPO_FILE");
	ibc_param_reset_all();
	if (!t)
		return;
	tap_is_str(ibc_topo_source(t), "flat (built without hwloc)", "flat: source");
	for (r = 0; r < 6; r++) {
		tap_is_int(ibc_topo_pick_nic(t, -1, r, 6, cands, 3, &idx, &d, why, sizeof(why)),
			   IBC_OK, "flat: pick rank %d", r);
		tap_is_str(cands[idx], listed[r % 3], "flat: rank %d takes NIC %d in name order", r,
			   r % 3);
	}
	tap_ok(strstr(why, "flat topology (built without hwloc): no PCI information, PHB assumed, NICs in name order") !=
		       NULL,
	       "flat: reason says PHB is assumed: %s", why);
	tap_is_int(ibc_topo_bind_plan(t, "nicA", &bind, cpus, sizeof(cpus), why, sizeof(why)),
		   IBC_OK, "flat: bind plan");
	tap_is_int(bind, 0, "flat: no binding (%s)", why);
	tap_is_int(ibc_topo_bind_thread_near_nic(t, "nicA"), IBC_OK, "flat: bind is a no-op");
	tap_is_int(ibc_topo_progress_plan(t, NULL, -1, 1, 2, &bind, cpus, sizeof(cpus), why,
					  sizeof(why)),
		   IBC_OK, "flat: progress plan without NIC or GPU");
	tap_is_int(bind, 0, "flat: progress thread not bound");
	tap_is_str(cpus, "", "flat: no CPU list");
	tap_is_str(why, "flat topology (built without hwloc): no binding", "flat: reason");
	tap_is_int(ibc_topo_progress_plan(t, NULL, -1, 2, 2, &bind, NULL, 0, NULL, 0),
		   IBC_ERR_INVALID_ARG, "flat: local rank out of range");
	{
		int gpu = -2;

		tap_is_int(ibc_topo_rank_gpu(t, &gpu, why, sizeof(why)), IBC_OK, "flat: rank's GPU");
		tap_is_int(gpu, -1, "flat: no CUDA context, no GPU (%s)", why);
	}
	setenv("IBC_BIND", "0", 1);
	ibc_param_reset_all();
	tap_is_int(ibc_topo_progress_plan(t, NULL, -1, 0, 1, &bind, NULL, 0, why, sizeof(why)),
		   IBC_OK, "flat: plan with IBC_BIND=0");
	tap_is_str(why, "IBC_BIND=0: thread affinity left alone", "flat: IBC_BIND=0 reason");
	unsetenv("IBC_BIND");
	ibc_param_reset_all();
	{
		FILE *f = tmpfile();
		char text[4096] = "";
		size_t got = 0;

		tap_ok(f != NULL, "flat: tmpfile");
		if (f) {
			tap_is_int(ibc_topo_print(t, f), IBC_OK, "flat: print");
			rewind(f);
			got = fread(text, 1, sizeof(text) - 1, f);
			text[got] = '\0';
			fclose(f);
		}
		tap_ok(strstr(text, "topology: flat (built without hwloc)\n") != NULL,
		       "flat: printed source line");
		tap_ok(strstr(text, "  NUMANode 0: CPUs ") != NULL, "flat: printed NUMA node 0");
	}
	if (ibc_topo_nic_count(t) > 0) {
		tap_is_int(ibc_topo_nic_locality(t, ibc_topo_nic_name(t, 0), &r, cpus, sizeof(cpus)),
			   IBC_OK, "flat: NIC locality");
		tap_is_int(r, 0, "flat: NUMA node 0");
	}
	if (ibc_topo_gpu_count(t) > 0) {
		tap_is_int(ibc_topo_gpu_nic_dist(t, 0, "anything", &d), IBC_OK, "flat: distance");
		tap_is_int(d, IBC_TOPO_PHB, "flat: PHB for every pair");
	}
	ibc_topo_destroy(t);
}

int main(void)
{
	setenv("IBC_DEBUG", "WARN", 1);
	test_names();
	test_gdr_level();
	test_busid();
	test_natural();
	test_list_dir();
	test_spread();
	/* test_topo_flat is this file linked with src/topo/topo_flat.c directly */
	if (!ibc_build_info()->have_hwloc || IBC_TEST_FLAT_BACKEND)
		test_flat();
	else
		tap_diag("built with hwloc: the flat backend is tested by test_topo_flat");
	return tap_done();
}
