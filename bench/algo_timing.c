/* SPDX-License-Identifier: MIT */
/*
 * algo_timing.c - a small timing driver for the all-reduce, broadcast and
 * reduce algorithms: each algorithm and protocol forced in turn, then the
 * tuner's own pick, at a sweep of sizes, on N ranks started as child
 * processes (tests/tree/fork_ranks.c). With --tune it fits the tuner's
 * coefficients to the measurements and appends them to a tuning file
 * (IBC_TUNING_FILE format, docs/algorithms.md).
 *
 * The sweep, fit and output are bench/bench_tune.c, shared with
 * `ibc_bench --tune FILE` (the installed way to write a tuning file); this
 * driver adds --fit-from and needs no launcher. Output: one line per measurement,
 *   bytes algo proto chunk_bytes time_us busbw_GBps min_us max_us
 * (busbw as nccl-tests: all-reduce algbw * 2(n-1)/n, broadcast and reduce
 * algbw), then a summary: the best measured algorithm per size, the tuner's
 * pick and its slowdown against the best.
 *
 * usage: algo_timing -n N [-t shm|tcp] [-c allreduce|broadcast|reduce]
 *                    [-s 8,64,...] [-r reps] [-w warmup] [--tune FILE]
 *        algo_timing --fit-from OUTPUT --tune FILE
 *                    (fit again from the output of an earlier run, no run)
 *        algo_timing --pick-from OUTPUT [--lone-us A] [--gamma-cache G --l2 BYTES]
 *                    [--no-race]
 *                    (replay: the tuner of this build picks again from the
 *                    probe model in an earlier run's header, and the summary
 *                    prices its picks with that run's forced measurements;
 *                    --lone-us gives a lone pair's latency, which outputs
 *                    from before the lone-pair probe lack; --gamma-cache
 *                    and --l2 likewise for the cache term; the output's
 *                    "# race:" lines are the race's ratios, used unless
 *                    --no-race)
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tests/tree/fork_ranks.h"
#include "base/util.h"
#include "bench_tune.h"

struct opts {
	int n;
	const char *tp;
	int coll;               /* enum ibc_tune_coll */
	int reps;
	int warmup;
	const char *tune_file;
	const char *fit_from;   /* an earlier run's output to fit from */
	const char *pick_from;  /* an earlier run's output to pick again from */
	double lone_us;         /* --lone-us: lone-pair latency for --pick-from */
	double load;            /* load average in --pick-from's output */
	double file_lone_us;    /* lone-pair latency in --pick-from's output (0: none) */
	double gamma_cache;     /* --gamma-cache: in-cache gamma for --pick-from, ns/B */
	long long l2;           /* --l2: the core's L2 for --pick-from, bytes */
	int no_race;            /* --no-race: --pick-from without the output's race */
};

/* written by rank 0, read by the parent */
struct shared {
	struct bench_tune_result res;
	int done[64];
};

static struct opts o;
static struct shared *sh;

static int rank_main(int rank, int n, void *arg)
{
	struct bench_tune_result *res;
	size_t maxb = 0;
	ibc_comm_h comm;
	void *s;
	void *r;
	int si;
	int q;

	(void)arg;
	for (si = 0; si < sh->res.nsizes; si++)
		maxb = IBC_MAX(maxb, sh->res.sizes[si]);
	res = malloc(sizeof(*res));
	s = calloc(1, maxb + 64);
	r = calloc(1, maxb + 64);
	if (!res || !s || !r || ibc_comm_init_env(&comm) != IBC_OK)
		return 10;
	/*
	 * Written pages: calloc's large blocks are fresh mappings that read as
	 * the kernel's one zero page until written, and an input that is never
	 * written stays 4 KiB of cache however large it is. Measured on 2 shm
	 * ranks at 2 MiB: the ring took 508 us on such an input, and 618 us here
	 * and 670 us in ibc_bench on written pages, as applications have
	 * (bench/RESULTS.md, "The race"). 1.0f: sums stay exact.
	 */
	for (si = 0; si < (int)((maxb + 64) / sizeof(float)); si++)
		((float *)s)[si] = 1.0f;
	memset(r, 0, maxb + 64);
	*res = sh->res;
	if (bench_tune_measure(comm, o.coll, s, r, o.reps, o.warmup, res) != IBC_OK)
		return 12;
	if (rank == 0)
		sh->res = *res;
	/* leave together (see tests/tree/test_tree_coll.c) */
	if (ibc_barrier(comm) != IBC_OK)
		return 13;
	__atomic_store_n(&sh->done[rank], 1, __ATOMIC_RELEASE);
	for (q = 0; q < n; q++)
		while (!__atomic_load_n(&sh->done[q], __ATOMIC_ACQUIRE))
			usleep(1000);
	ibc_comm_destroy(comm);
	free(res);
	free(s);
	free(r);
	return 0;
}

static int parse_sizes(const char *arg)
{
	char *dup = strdup(arg);
	char *save = NULL;
	char *tok;

	sh->res.nsizes = 0;
	for (tok = strtok_r(dup, ",", &save); tok && sh->res.nsizes < BENCH_TUNE_MAX_SIZES;
	     tok = strtok_r(NULL, ",", &save)) {
		char *end;
		double v = strtod(tok, &end);

		if (*end == 'k' || *end == 'K')
			v *= 1024;
		else if (*end == 'm' || *end == 'M')
			v *= 1024 * 1024;
		if (v < 4) {
			free(dup);
			return -1;
		}
		sh->res.sizes[sh->res.nsizes++] = ((size_t)v) / 4 * 4;
	}
	free(dup);
	return sh->res.nsizes ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: algo_timing -n N [-t shm|tcp] [-c allreduce|broadcast|reduce] [-s 8,64,4k,...]\n"
			"                   [-r reps] [-w warmup] [--tune FILE]\n"
			"       algo_timing --fit-from OUTPUT --tune FILE\n"
			"       algo_timing --pick-from OUTPUT [--lone-us A] [--gamma-cache G --l2 BYTES] [--no-race]\n");
}

/* fill sh->res from an earlier run's output (its header, model line, rows) */
static int load_output(const char *path)
{
	char line[512];
	char coll[32];
	char tp[16];
	double a = 0;
	double all = 0;
	double b = 0;
	double g = 0;
	int share = 1;
	double lone = 0;
	double gc = 0;
	long long l2 = 0;
	struct ibc_tune_race race[IBC_TUNE_RACE_ANCHORS];
	int nrace = 0;
	int got = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	sh->res.nsizes = 0;
	while (fgets(line, sizeof(line), f)) {
		char algo[40];
		char proto[16];
		size_t bytes;
		size_t chunk;
		double t;
		double bw;
		double mn;
		double mx;
		int si;
		int ai;
		int pi;

		if (sscanf(line, "# algo_timing: %31[^,], %d ranks over %15[^,],", coll, &o.n, tp) == 3) {
			const char *lp = strstr(line, "load average ");

			o.load = lp ? atof(lp + 13) : 0;
			o.coll = !strcmp(coll, "broadcast") ? IBC_TUNE_BCAST
				 : !strcmp(coll, "reduce")  ? IBC_TUNE_REDUCE
							    : IBC_TUNE_ALLREDUCE;
			o.tp = strdup(tp);
			got |= 1;
			continue;
		}
		if (sscanf(line, "# model: simple alpha %lf us, ll alpha %lf us, beta %lf ns/B, gamma %lf",
			   &a, &all, &b, &g) == 4) {
			/* the time sharing the run had (outputs before it have none: 1) */
			const char *sp = strstr(line, " x share ");

			share = sp ? atoi(sp + 9) : 1;
			sp = strstr(line, ", lone pair ");
			lone = sp ? atof(sp + 12) : 0;
			sp = strstr(line, ", cache gamma ");
			if (sp && sscanf(sp, ", cache gamma %lf L2 %lld", &gc, &l2) != 2)
				gc = 0;
			got |= 2;
			continue;
		}
		if (!strncmp(line, "# race: ", 8) && nrace < IBC_TUNE_RACE_ANCHORS) {
			struct ibc_tune_race *r = &race[nrace++];
			char name[40];
			double v;
			int used = 0;
			const char *q;

			memset(r, 0, sizeof(*r));
			r->nbytes = atoll(line + 8);
			q = strchr(line + 8, ' ');
			while (q && sscanf(q, " %39s %lf%n", name, &v, &used) == 2) {
				if (ibc_algo_parse(name) >= 0)
					r->ratio[ibc_algo_parse(name)] = v;
				q += used;
			}
			continue;
		}
		if (!strncmp(line, "# summary", 9))
			break;
		if (sscanf(line, "%zu %39s %15s %zu %lf %lf %lf %lf", &bytes, algo, proto, &chunk, &t,
			   &bw, &mn, &mx) != 8 || !strncmp(algo, "auto:", 5))
			continue;
		ai = ibc_algo_parse(algo);
		pi = ibc_proto_parse(proto);
		if (ai < 0 || pi < 0)
			continue;
		for (si = 0; si < sh->res.nsizes && sh->res.sizes[si] != bytes; si++)
			;
		if (si == sh->res.nsizes) {
			if (sh->res.nsizes == BENCH_TUNE_MAX_SIZES)
				continue;
			sh->res.sizes[sh->res.nsizes++] = bytes;
		}
		sh->res.cell[si][ai * IBC_PROTO_COUNT + pi] = (struct bench_tune_cell){
			.valid = 1, .algo = ai, .proto = pi, .chunk = chunk, .med_us = t,
			.min_us = mn, .max_us = mx };
	}
	fclose(f);
	if (got != 3)
		return -1;
	ibc_tune_model_init(&sh->res.model, o.n, ibc_tune_tp_parse(o.tp),
			    strcmp(o.tp, "tcp") != 0); /* shm and ib have an LL path */
	sh->res.model.base[IBC_PROTO_SIMPLE] = (struct ibc_tune_coef){ a, b, g };
	sh->res.model.base[IBC_PROTO_LL] = (struct ibc_tune_coef){ all, b, g };
	sh->res.model.source = IBC_TUNE_SRC_PROBE;
	sh->res.model.share = IBC_MAX(share, 1);
	/* the output's lone_frac was taken after the cap, so it gives the lone pair */
	o.file_lone_us = lone * a;
	/* --gamma-cache < 0: the term off */
	sh->res.model.gamma_cache_ns = o.gamma_cache > 0 ? o.gamma_cache : o.gamma_cache < 0 ? 0 : gc;
	sh->res.model.cache_bytes = o.l2 > 0 ? o.l2 : l2;
	/* the race's ratios (outputs before the race have none; --no-race drops them) */
	if (!o.no_race)
		memcpy(sh->res.model.race, race, sizeof(race[0]) * (size_t)nrace);
	sh->res.coll = o.coll;
	sh->res.nranks = o.n;
	sh->res.have_model = 1;
	return 0;
}

/* --pick-from: this build's tuner picks from the earlier run's probe model */
static int pick_again(void)
{
	struct bench_tune_result *res = &sh->res;
	int si;

	if (load_output(o.pick_from)) {
		fprintf(stderr, "algo_timing: --pick-from needs a complete output of algo_timing\n");
		return 2;
	}
	/* the lone pair of the output, or --lone-us (< 0: the term and the cap off) */
	ibc_tune_set_lone(&res->model, o.lone_us != 0 ? o.lone_us : o.file_lone_us);
	for (si = 0; si < res->nsizes; si++) {
		struct bench_tune_cell *a = &res->cell[si][BENCH_TUNE_AUTO];
		const struct bench_tune_cell *f;
		struct ibc_algo_choice c;

		ibc_tune_choose(&res->model, res->coll, res->sizes[si], &c);
		f = &res->cell[si][c.algo * IBC_PROTO_COUNT + c.proto];
		if (!f->valid)
			f = &res->cell[si][c.algo * IBC_PROTO_COUNT];
		*a = (struct bench_tune_cell){ .valid = f->valid, .algo = c.algo, .proto = c.proto,
					       .chunk = c.chunk_bytes, .med_us = f->med_us,
					       .min_us = f->min_us, .max_us = f->max_us };
	}
	printf("# algo_timing: %s, %d ranks over %s, float32 sum, load average %.1f at start (replayed from %s by this build's tuner)\n",
	       ibc_tune_coll_name(o.coll), o.n, o.tp, o.load, o.pick_from);
	bench_tune_print(res, stdout);
	return 0;
}

static int fit_and_write(void)
{
	return bench_tune_fit_append(&sh->res, o.tp, "algo_timing", o.tune_file) == IBC_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
	int codes[64];
	double load = 0;
	FILE *la;
	int i;

	o.n = 2;
	o.tp = "shm";
	o.coll = IBC_TUNE_ALLREDUCE;
	o.reps = 5;
	o.warmup = 1;
	sh = fork_ranks_shared(sizeof(*sh));
	if (!sh)
		return 1;
	parse_sizes("8,64,512,4k,32k,256k,2m,16m,64m");
	for (i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "-n") && v) {
			o.n = atoi(v);
			i++;
		} else if (!strcmp(argv[i], "-t") && v) {
			o.tp = v;
			i++;
		} else if (!strcmp(argv[i], "-c") && v) {
			o.coll = !strcmp(v, "broadcast") ? IBC_TUNE_BCAST
				 : !strcmp(v, "reduce")  ? IBC_TUNE_REDUCE
							 : IBC_TUNE_ALLREDUCE;
			i++;
		} else if (!strcmp(argv[i], "-s") && v) {
			if (parse_sizes(v)) {
				usage();
				return 2;
			}
			i++;
		} else if (!strcmp(argv[i], "-r") && v) {
			o.reps = IBC_MIN(IBC_MAX(atoi(v), 1), BENCH_TUNE_MAX_REPS);
			i++;
		} else if (!strcmp(argv[i], "-w") && v) {
			o.warmup = IBC_MAX(atoi(v), 0);
			i++;
		} else if (!strcmp(argv[i], "--tune") && v) {
			o.tune_file = v;
			i++;
		} else if (!strcmp(argv[i], "--fit-from") && v) {
			o.fit_from = v;
			i++;
		} else if (!strcmp(argv[i], "--pick-from") && v) {
			o.pick_from = v;
			i++;
		} else if (!strcmp(argv[i], "--gamma-cache") && v) {
			o.gamma_cache = atof(v);
			i++;
		} else if (!strcmp(argv[i], "--l2") && v) {
			o.l2 = atoll(v);
			i++;
		} else if (!strcmp(argv[i], "--no-race")) {
			o.no_race = 1;
		} else if (!strcmp(argv[i], "--lone-us") && v) {
			o.lone_us = atof(v);
			i++;
		} else {
			usage();
			return 2;
		}
	}
	if (o.n < 1 || o.n > 64) {
		usage();
		return 2;
	}
	if (o.pick_from)
		return pick_again();
	if (o.fit_from) {
		if (!o.tune_file || load_output(o.fit_from)) {
			fprintf(stderr, "algo_timing: --fit-from needs --tune FILE and a complete output of algo_timing\n");
			return 2;
		}
		if (fit_and_write()) {
			fprintf(stderr, "algo_timing: cannot fit or write %s\n", o.tune_file);
			return 1;
		}
		printf("# %s: fitted coefficients appended to %s\n", o.fit_from, o.tune_file);
		return 0;
	}
	la = fopen("/proc/loadavg", "r");
	if (la) {
		if (fscanf(la, "%lf", &load) != 1)
			load = 0;
		fclose(la);
	}
	setenv("IBC_TRANSPORT", o.tp, 1);
	if (fork_ranks(o.n, 3600, rank_main, NULL, codes)) {
		for (i = 0; i < o.n; i++)
			if (codes[i])
				fprintf(stderr, "algo_timing: rank %d exited with %d\n", i, codes[i]);
		return 1;
	}
	printf("# algo_timing: %s, %d ranks over %s, float32 sum, load average %.1f at start, median of %d reps (+%d warm-up)\n",
	       ibc_tune_coll_name(o.coll), o.n, o.tp, load, o.reps, o.warmup);
	bench_tune_print(&sh->res, stdout);
	if (o.tune_file) {
		if (fit_and_write()) {
			fprintf(stderr, "algo_timing: cannot fit or write %s\n", o.tune_file);
			return 1;
		}
		printf("# fitted coefficients appended to %s\n", o.tune_file);
	}
	return 0;
}
