/* SPDX-License-Identifier: MIT */
/*
 * ibc_info - what this ibcoll build contains and how it is configured, in
 * the manner of ucx_info and fi_info:
 *   ibc_info              build configuration and parameters
 *   ibc_info --params     every parameter: value, default, source, help
 *   ibc_info --env-md     docs/env.md (Markdown table of the parameters)
 *   ibc_info --topo       topology tree, and the NIC and cores of each local
 *                         rank for 1 to 8 ranks per node (IBC_TOPO_FILE
 *                         describes another machine)
 *   ibc_info --tuning     the tuner's cost model (built-in or IBC_TUNING_FILE)
 *                         and its algorithm per size range, per transport
 *                         and rank count (IBC_TRANSPORT, IBC_NRANKS narrow it)
 *   ibc_info --devices    verbs devices: ports, state, link layer, MTU, LID,
 *                         GID table with types (src/transport/ib/)
 * Links the internal convenience library to read the parameter registry.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/build_info.h"
#include "base/log.h"
#include "base/param.h"
#include "base/util.h"
#include "tune/tune.h"
#include "net/net.h"
#include "topo/topo.h"
#include "transport/ib/ib_info.h"

static void print_build(void)
{
	const struct ibc_build_info *bi = ibc_build_info();

	printf("# ibcoll %s\n", bi->version);
	printf("#   configure args : %s\n", *bi->configure_args ? bi->configure_args : "(none)");
	printf("#   transports     : tcp shm%s\n", bi->have_verbs ? " ib" : "");
	printf("#   verbs          : %s%s%s%s\n", bi->have_verbs ? "yes" : "no",
	       bi->have_verbs && *bi->verbs_version ? " libibverbs " : "",
	       bi->have_verbs ? bi->verbs_version : "",
	       bi->have_verbs ? (bi->have_dmabuf ? " (ibv_reg_dmabuf_mr available)" : " (no dma-buf)") : "");
	if (bi->have_hwloc)
		printf("#   hwloc          : yes %s%s(API 0x%x)\n", bi->hwloc_version,
		       *bi->hwloc_version ? " " : "", bi->hwloc_api);
	else
		printf("#   hwloc          : no (flat topology)\n");
	if (bi->have_cuda)
		printf("#   cuda           : yes (runtime %d.%d)\n", bi->cuda_runtime / 1000,
		       bi->cuda_runtime % 1000 / 10);
	else
		printf("#   cuda           : no\n");
	printf("#   mpi            : %s%s%s\n", bi->have_mpi ? "yes (benchmarks and tests only)" : "no",
	       bi->have_mpi && *bi->mpi_version ? ", " : "", bi->have_mpi ? bi->mpi_version : "");
	printf("#   crypto         : %s\n", bi->openssl);
	printf("#   debug / asan   : %s / %s\n", bi->debug ? "yes" : "no", bi->asan ? "yes" : "no");
	ibc_ib_print_reg_policy(stdout);
}

static void format_value(int i, char *buf, size_t len, int current)
{
	const struct ibc_param_info *pi = ibc_param_info(i);

	if (pi->type == IBC_PARAM_TYPE_INT)
		snprintf(buf, len, "%" PRId64, current ? ibc_param_get_int(i) : pi->def_int);
	else
		snprintf(buf, len, "%s", current ? ibc_param_get_str(i) : pi->def_str);
}

/*
 * String parameters with a fixed set of values are checked by the modules
 * that read them, when they read them (a communicator's creation, the first
 * log line, ...), which ibc_info never reaches: ask the same parsers here.
 * Each falls back to the parameter's default, as their WARNs say.
 */
static int check_algo(const char *s)
{
	return !strcmp(s, "auto") || ibc_algo_parse(s) >= 0;
}

static int check_proto(const char *s)
{
	return !strcmp(s, "auto") || ibc_proto_parse(s) >= 0;
}

static int check_transport(const char *s)
{
	return ibc_net_transport_parse(s, NULL) == 0;
}

static int check_debug(const char *s)
{
	int level;

	return ibc_log_parse_level(s, &level) == 0;
}

static int check_debug_subsys(const char *s)
{
	uint64_t mask;

	return ibc_log_parse_subsys(s, &mask) == 0;
}

static int check_gdr_level(const char *s)
{
	int level;

	return ibc_topo_parse_gdr_level(s, &level) == 0;
}

static const struct {
	int idx;
	int (*valid)(const char *value);        /* 1 when the owner accepts @value */
} str_checks[] = {
	{ IBC_PARAM_IDX_ALGO, check_algo },
	{ IBC_PARAM_IDX_PROTO, check_proto },
	{ IBC_PARAM_IDX_TRANSPORT, check_transport },
	{ IBC_PARAM_IDX_DEBUG, check_debug },
	{ IBC_PARAM_IDX_DEBUG_SUBSYS, check_debug_subsys },
	{ IBC_PARAM_IDX_NET_GDR_LEVEL, check_gdr_level },
};

/*
 * param_invalid() - why the environment value of parameter @i is not used:
 * the registry's own check for integers, the owner's parser for the strings
 * of str_checks[]. Return: 1 with @why filled, else 0.
 */
static int param_invalid(int i, char *why, size_t len)
{
	const struct ibc_param_info *pi = ibc_param_info(i);
	const char *r = ibc_param_env_rejected(i);
	size_t k;

	if (r) {
		snprintf(why, len, "%s", r);
		return 1;
	}
	if (pi->type != IBC_PARAM_TYPE_STR || !ibc_param_from_env(i))
		return 0;
	for (k = 0; k < IBC_ARRAY_SIZE(str_checks); k++) {
		if (str_checks[k].idx != i || str_checks[k].valid(ibc_param_get_str(i)))
			continue;
		snprintf(why, len, "IBC_%s=%s is not one of the values listed below", pi->name,
			 ibc_param_get_str(i));
		return 1;
	}
	return 0;
}

static void print_params(void)
{
	int i;

	printf("# parameters (value, default, source, help)\n");
	for (i = 0; i < IBC_PARAM_COUNT; i++) {
		const struct ibc_param_info *pi = ibc_param_info(i);
		char val[256];
		char def[256];
		char why[320];

		format_value(i, val, sizeof(val), 1);
		format_value(i, def, sizeof(def), 0);
		if (param_invalid(i, why, sizeof(why))) {
			/* what the library uses instead: the default */
			printf("IBC_%s=%s\n", pi->name, def);
			printf("    default: %s   source: env, INVALID: %s; the default %s is used "
			       "instead\n",
			       *def ? def : "\"\"", why, *def ? def : "\"\"");
		} else {
			printf("IBC_%s=%s\n", pi->name, val);
			printf("    default: %s   source: %s\n", *def ? def : "\"\"",
			       ibc_param_from_env(i) ? "env" : "default");
		}
		printf("    %s\n", pi->help);
	}
}

static void print_env_md(void)
{
	int i;

	printf("<!-- generated by `ibc_info --env-md` from src/base/params.def; do not edit -->\n");
	printf("# Environment variables\n\n");
	printf("Every parameter of ibcoll, declared once in `src/base/params.def`. Integers are\n");
	printf("decimal (a leading zero is not octal) or hex with 0x, and take a k/m/g suffix (powers\n");
	printf("of 1024); invalid or out-of-range values log a warning and use the default.\n");
	printf("`ibc_info --params` prints the values in effect, `ibc_get_param_int()` (ibcoll.h)\n");
	printf("returns one to a program.\n\n");
	printf("Each variable is read once per process, when the library first needs it (most at\n");
	printf("the first communicator's creation), and kept: a later `setenv()` in the same process\n");
	printf("changes nothing. Set them before the process starts, or before its first ibcoll\n");
	printf("call; the one setting that can change later is a communicator's timeout\n");
	printf("(`ibc_comm_set_timeout()`).\n\n");
	printf("Five must be the same on every rank of a communicator: `IBC_TRANSPORT`,\n");
	printf("`IBC_RING_CHUNK_BYTES`, `IBC_ACCUM_FP32`, `IBC_HEARTBEAT_MS` and `IBC_MAX_REQUESTS`.\n");
	printf("Creation compares\n");
	printf("them with rank 0's and every rank refuses it (`IBC_ERR_INVALID_USAGE`) naming the\n");
	printf("variable and both values.\n\n");
	printf("| variable | type | default | range | meaning |\n");
	printf("| --- | --- | --- | --- | --- |\n");
	for (i = 0; i < IBC_PARAM_COUNT; i++) {
		const struct ibc_param_info *pi = ibc_param_info(i);

		if (pi->type == IBC_PARAM_TYPE_INT)
			printf("| `IBC_%s` | int | `%" PRId64 "` | %" PRId64 " .. %" PRId64 " | %s |\n",
			       pi->name, pi->def_int, pi->min, pi->max, pi->help);
		else
			printf("| `IBC_%s` | string | `%s` | | %s |\n", pi->name,
			       *pi->def_str ? pi->def_str : "\"\"", pi->help);
	}
}

/* one rank's decisions: its NIC (when there are NICs) and its progress thread's CPUs */
static int print_rank_plan(struct ibc_topo *t, const char *const *cands, int ncands, int gpu,
			   int r, int n)
{
	char why[IBC_TOPO_WHY_LEN];
	const char *nic = NULL;
	enum ibc_topo_dist d;
	int bind;
	int idx;

	if (ncands) {
		if (ibc_topo_pick_nic(t, gpu, r, n, cands, ncands, &idx, &d, NULL, 0) != IBC_OK) {
			printf("error: %s\n", ibc_last_error());
			return 1;
		}
		nic = cands[idx];
		printf("NIC %s%s%s; ", nic, gpu >= 0 ? " " : "", gpu >= 0 ? ibc_topo_dist_name(d) : "");
	}
	if (ibc_topo_progress_plan(t, nic, gpu, r, n, &bind, NULL, 0, why, sizeof(why)) != IBC_OK) {
		printf("error: %s\n", ibc_last_error());
		return 1;
	}
	printf("progress thread: %s\n", why);
	return 0;
}

/*
 * What the library decides, from the same functions it calls: this
 * process's GPU (ibc_topo_rank_gpu()), then for every local rank of
 * n = 1..8 its NIC (ibc_topo_pick_nic()) and progress-thread binding
 * (ibc_topo_progress_plan(), which reads this thread's affinity), and the
 * same for a rank driving each GPU of the topology.
 */
static int print_topo_plan(struct ibc_topo *t)
{
	int nnics = ibc_topo_nic_count(t);
	int ngpus = ibc_topo_gpu_count(t);
	const char *cands[64];
	char why[IBC_TOPO_WHY_LEN];
	int ncands = IBC_MIN(nnics, (int)IBC_ARRAY_SIZE(cands));
	int gpu = -1;
	int n;
	int r;
	int i;

	for (i = 0; i < ncands; i++)
		cands[i] = ibc_topo_nic_name(t, i);
	if (ibc_topo_rank_gpu(t, &gpu, why, sizeof(why)) != IBC_OK)
		return 1;
	printf("# decisions of the library for ranks of this process's kind\n");
	printf("this process's GPU: %s\n", why);
	if (ncands)
		printf("# NIC and progress thread of ranks whose peers on other hosts use verbs; NIC candidates: the topology's %d NICs (a rank chooses among the ACTIVE ports IBC_IB_HCA selects; a single-host job uses shm and places the progress thread by GPU or local rank)\n",
		       ncands);
	else
		printf("# no verbs NIC: ranks use shm/tcp\n");
	for (n = 1; n <= 8; n++) {
		printf("local ranks %d:\n", n);
		for (r = 0; r < n; r++) {
			printf("  rank %d: ", r);
			if (print_rank_plan(t, cands, ncands, gpu, r, n))
				return 1;
		}
	}
	if (ngpus)
		printf("# a rank whose GPU is g (its current CUDA device, or IBC_TOPO_GPU=g)\n");
	for (i = 0; i < ngpus; i++) {
		printf("  GPU %d: ", i);
		if (print_rank_plan(t, cands, ncands, i, 0, 1))
			return 1;
	}
	return 0;
}

static int print_topo(void)
{
	struct ibc_topo *t;
	int ret;

	if (ibc_topo_create(&t) != IBC_OK) {
		fprintf(stderr, "ibc_info: cannot load the topology: %s\n", ibc_last_error());
		return 1;
	}
	printf("# topology\n");
	ret = ibc_topo_print(t, stdout) == IBC_OK ? 0 : 1;
	if (!ret)
		ret = print_topo_plan(t);
	ibc_topo_destroy(t);
	return ret;
}

/* the tuner's model and choices without a communicator (no probe: defaults or the file) */
static int print_tuning(void)
{
	static const int sizes[] = { 2, 4, 8, 16 };
	const struct ibc_build_info *bi = ibc_build_info();
	const char *want_tp = ibc_param_transport();
	const char *file = ibc_param_tuning_file();
	int want_n = (int)ibc_param_nranks();
	int tp;
	size_t i;

	printf("# tuner (src/tune/). Without a communicator this shows the built-in\n"
	       "# coefficients%s; a communicator measures its own at its first collective\n"
	       "# (IBC_TUNING_PROBE) and logs them with IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=TUNING.\n",
	       file && *file ? " replaced by IBC_TUNING_FILE rows" : "");
	if (ibc_net_transport_parse(want_tp, NULL) != 0) {
		/* as the library does: an unknown transport means auto */
		fprintf(stderr, "ibc_info: IBC_TRANSPORT=%s is not auto, shm, tcp or ib; showing every transport (the library uses auto)\n",
			want_tp);
		want_tp = "auto";
	}
	for (tp = 0; tp < IBC_TUNE_TP_COUNT; tp++) {
		if (tp == IBC_TUNE_TP_IB && !bi->have_verbs)
			continue;
		if (strcmp(want_tp, "auto") && strcmp(want_tp, ibc_tune_tp_name(tp)))
			continue;
		for (i = 0; i < (want_n > 0 ? 1 : IBC_ARRAY_SIZE(sizes)); i++) {
			struct ibc_tune_model m;
			int n = want_n > 0 ? want_n : sizes[i];
			int nrows = 0;

			ibc_tune_model_init(&m, n, tp, tp != IBC_TUNE_TP_TCP); /* shm and ib have LL */
			if (file && *file && ibc_tune_file_load(&m, file, &nrows) != IBC_OK) {
				fprintf(stderr, "ibc_info: cannot read IBC_TUNING_FILE %s\n", file);
				return 1;
			}
			ibc_tune_print(&m, stdout);
		}
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ibc_info [--build] [--params] [--env-md] [--topo] [--tuning] [--devices]\n"
		   "  (no option)  build configuration and parameters\n"
		   "  --build      build configuration only\n"
		   "  --params     every parameter with value, default, source and help\n"
		   "  --env-md     the parameter table as Markdown (docs/env.md)\n"
		   "  --topo       topology tree, and each local rank's NIC and cores\n"
		   "               for 1 to 8 ranks per node (IBC_TOPO_FILE: another machine)\n"
		   "  --tuning     the tuner's cost model and algorithm per size range for\n"
		   "               2, 4, 8, 16 ranks (or IBC_NRANKS) per transport (or IBC_TRANSPORT)\n"
		   "  --devices    verbs devices: ports, state, link layer, MTU, GID table with types\n");
}

int main(int argc, char **argv)
{
	int i;

	if (argc == 1) {
		print_build();
		print_params();
		return 0;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--build")) {
			print_build();
		} else if (!strcmp(argv[i], "--params")) {
			print_params();
		} else if (!strcmp(argv[i], "--env-md")) {
			print_env_md();
		} else if (!strcmp(argv[i], "--tuning")) {
			if (print_tuning())
				return 1;
		} else if (!strcmp(argv[i], "--topo")) {
			if (print_topo())
				return 1;
		} else if (!strcmp(argv[i], "--devices")) {
			ibc_ib_print_devices(stdout);
			ibc_ib_print_reg_policy(stdout);
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "ibc_info: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	return 0;
}
