/* SPDX-License-Identifier: MIT */
/*
 * algo_timing.c - a small timing driver for the all-reduce, broadcast and
 * reduce algorithms: each algorithm and protocol forced in turn, then the
 * tuner's own pick, at a sweep of sizes, on N ranks started as child
 * processes (tests/tree/fork_ranks.c). With --tune it fits the tuner's
 * coefficients to the measurements and appends them to a tuning file
 * (IBC_TUNING_FILE format, docs/algorithms.md).
 *
 * It is the tool that writes tuning files (ibc_bench uses the public API
 * only and has no --tune); for general benchmarking use bench/ibc_bench. Output (rank 0): one line per measurement,
 *   bytes algo proto chunk_bytes time_us busbw_GBps min_us max_us
 * (busbw as nccl-tests: all-reduce algbw * 2(n-1)/n, broadcast and reduce
 * algbw), then a summary: the best measured algorithm per size, the tuner's
 * pick and its slowdown against the best.
 *
 * usage: algo_timing -n N [-t shm|tcp] [-c allreduce|broadcast|reduce]
 *                    [-s 8,64,...] [-r reps] [-w warmup] [--tune FILE]
 *        algo_timing --fit-from OUTPUT --tune FILE
 *                    (fit again from the output of an earlier run, no run)
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/select.h"
#include "core/comm.h"
#include "core/util.h"
#include "../tests/tree/fork_ranks.h"

#define MAX_SIZES 32
#define MAX_REPS 31
#define NCFG (IBC_ALGO_COUNT * IBC_PROTO_COUNT + 1)   /* forced ones, then auto */

struct opts {
	int n;
	const char *tp;
	int coll;               /* enum ibc_tune_coll */
	size_t sizes[MAX_SIZES];
	int nsizes;
	int reps;
	int warmup;
	const char *tune_file;
	const char *fit_from;   /* an earlier run's output to fit from */
};

/* results, written by rank 0, read by the parent */
struct cell {
	int valid;
	int algo;
	int proto;
	size_t chunk;
	double med_us;
	double min_us;
	double max_us;
};

struct shared {
	struct cell cell[MAX_SIZES][NCFG];
	struct ibc_tune_model model;    /* the communicator's model (rank 0) */
	int have_model;
	int done[64];
};

static struct opts o;
static struct shared *sh;

static const char *coll_name(int c)
{
	return ibc_tune_coll_name(c);
}

static ibc_status_t run_op(ibc_comm_h comm, void *s, void *r, size_t count)
{
	switch (o.coll) {
	case IBC_TUNE_BCAST:
		return ibc_broadcast(s, r, count, IBC_FLOAT32, 0, comm);
	case IBC_TUNE_REDUCE:
		return ibc_reduce(s, r, count, IBC_FLOAT32, IBC_SUM, 0, comm);
	default:
		return ibc_allreduce(s, r, count, IBC_FLOAT32, IBC_SUM, comm);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* time @iters operations; the slowest rank's time per operation, us, on every rank */
static int time_ops(ibc_comm_h comm, void *s, void *r, size_t count, int iters, int algo,
		    int proto, size_t chunk, double *us_p)
{
	double us;
	uint64_t t0;
	int i;

	ibc_tuner_force(comm, algo, proto, chunk);
	if (ibc_barrier(comm) != IBC_OK)
		return -1;
	t0 = ibc_time_ns();
	for (i = 0; i < iters; i++)
		if (run_op(comm, s, r, count) != IBC_OK)
			return -1;
	us = (double)(ibc_time_ns() - t0) / 1000.0 / iters;
	/* forced ring: the reduction of the timings is the same for every configuration */
	ibc_tuner_force(comm, IBC_ALGO_RING, IBC_PROTO_SIMPLE, 0);
	return ibc_allreduce(&us, us_p, 1, IBC_FLOAT64, IBC_MAX, comm) == IBC_OK ? 0 : -1;
}

/* the tuner's pick for @nbytes on @comm (its decision is local once the model is agreed) */
static void tuner_pick(ibc_comm_h comm, size_t nbytes, struct ibc_algo_choice *c)
{
	struct ibc_request req;
	static const int colls[] = { IBC_COLL_ALLREDUCE, IBC_COLL_BROADCAST, IBC_COLL_REDUCE };

	memset(&req, 0, sizeof(req));
	req.comm = comm;
	req.coll = colls[o.coll];
	req.count = nbytes / 4;
	req.dtype = IBC_FLOAT32;
	req.root = 0;
	ibc_tuner_select(comm, &req, c);
}

/* the chunk the model would pick for @algo/@proto, so the fit knows what ran */
static size_t model_chunk(const struct ibc_tune_model *m, int algo, int proto, size_t nbytes)
{
	struct ibc_tune_model f = *m;
	struct ibc_algo_choice c;

	f.force_algo = algo;
	f.force_proto = proto;
	ibc_tune_choose(&f, o.coll, nbytes, &c);
	return c.chunk_bytes;
}

static int rank_main(int rank, int n, void *arg)
{
	size_t maxb = 0;
	ibc_comm_h comm;
	struct ibc_tune_model m;
	void *s;
	void *r;
	float one = 1;
	float tmp;
	int si;
	int q;

	(void)arg;
	for (si = 0; si < o.nsizes; si++)
		maxb = IBC_MAX(maxb, o.sizes[si]);
	s = malloc(maxb + 64);
	r = malloc(maxb + 64);
	if (!s || !r || ibc_comm_init_env(&comm) != IBC_OK)
		return 10;
	memset(s, 0, maxb);
	memset(r, 0, maxb);
	/* the first tuned collective agrees on the model (probe or file) */
	if (ibc_allreduce(&one, &tmp, 1, IBC_FLOAT32, IBC_SUM, comm) != IBC_OK ||
	    ibc_tuner_model(comm, &m) != IBC_OK)
		return 11;
	if (rank == 0) {
		sh->model = m;
		sh->have_model = 1;
	}
	for (si = 0; si < o.nsizes; si++) {
		size_t nb = o.sizes[si];
		int iters = (int)IBC_MAX(1, IBC_MIN(200, (4u << 20) / IBC_MAX(nb, 1)));
		struct cell loc[NCFG];
		double t[NCFG][MAX_REPS];
		int rep;
		int k;

		/* the configurations: every algorithm and protocol that applies, then auto */
		memset(loc, 0, sizeof(loc));
		for (k = 0; k < NCFG - 1; k++) {
			loc[k].algo = k / IBC_PROTO_COUNT;
			loc[k].proto = k % IBC_PROTO_COUNT;
			if (!ibc_algo_applies(o.coll, loc[k].algo))
				continue;
			loc[k].chunk = model_chunk(&m, loc[k].algo, loc[k].proto, nb);
			/* LL where no message fits the LL path would time the simple path again */
			if (loc[k].proto == IBC_PROTO_LL &&
			    !ibc_tune_ll_applies(&m, o.coll, loc[k].algo, nb, loc[k].chunk))
				continue;
			loc[k].valid = 1;
		}
		{
			struct ibc_algo_choice ch;

			ibc_tuner_force(comm, -1, -1, 0);
			tuner_pick(comm, nb, &ch);
			loc[NCFG - 1].algo = ch.algo;
			loc[NCFG - 1].proto = ch.proto;
			loc[NCFG - 1].chunk = ch.chunk_bytes;
			loc[NCFG - 1].valid = 1;
		}
		/* interleaved: every repetition times every configuration, so a change of
		 * the machine's load during the sweep hits all of them alike */
		for (rep = -o.warmup; rep < o.reps; rep++) {
			for (k = 0; k < NCFG; k++) {
				double us;
				int auto_cfg = k == NCFG - 1;

				if (!loc[k].valid)
					continue;
				if (time_ops(comm, s, r, nb / 4, iters, auto_cfg ? -1 : loc[k].algo,
					     auto_cfg ? -1 : loc[k].proto, auto_cfg ? 0 : loc[k].chunk,
					     &us))
					return 12;
				if (rep >= 0)
					t[k][rep] = us;
			}
		}
		for (k = 0; k < NCFG && rank == 0; k++) {
			if (!loc[k].valid)
				continue;
			qsort(t[k], (size_t)o.reps, sizeof(double), cmp_double);
			loc[k].med_us = t[k][o.reps / 2];
			loc[k].min_us = t[k][0];
			loc[k].max_us = t[k][o.reps - 1];
			sh->cell[si][k] = loc[k];
		}
	}
	/* leave together (see tests/tree/test_tree_coll.c) */
	ibc_tuner_force(comm, -1, -1, 0);
	if (ibc_barrier(comm) != IBC_OK)
		return 13;
	__atomic_store_n(&sh->done[rank], 1, __ATOMIC_RELEASE);
	for (q = 0; q < n; q++)
		while (!__atomic_load_n(&sh->done[q], __ATOMIC_ACQUIRE))
			usleep(1000);
	ibc_comm_destroy(comm);
	free(s);
	free(r);
	return 0;
}

static double busbw(size_t nbytes, double us)
{
	double algbw = (double)nbytes / (us * 1e-6) / 1e9;

	return o.coll == IBC_TUNE_ALLREDUCE ? algbw * 2.0 * (o.n - 1) / o.n : algbw;
}

static int parse_sizes(const char *arg)
{
	char *dup = strdup(arg);
	char *save = NULL;
	char *tok;

	o.nsizes = 0;
	for (tok = strtok_r(dup, ",", &save); tok && o.nsizes < MAX_SIZES;
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
		o.sizes[o.nsizes++] = ((size_t)v) / 4 * 4;
	}
	free(dup);
	return o.nsizes ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: algo_timing -n N [-t shm|tcp] [-c allreduce|broadcast|reduce] [-s 8,64,4k,...]\n"
			"                   [-r reps] [-w warmup] [--tune FILE]\n"
			"       algo_timing --fit-from OUTPUT --tune FILE\n");
}

/* fill sh->model and sh->cell from an earlier run's output (its header, model line, rows) */
static int load_output(const char *path)
{
	char line[512];
	char coll[32];
	char tp[16];
	double a = 0;
	double all = 0;
	double b = 0;
	double g = 0;
	int got = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	o.nsizes = 0;
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
			o.coll = !strcmp(coll, "broadcast") ? IBC_TUNE_BCAST
				 : !strcmp(coll, "reduce")  ? IBC_TUNE_REDUCE
							    : IBC_TUNE_ALLREDUCE;
			o.tp = strdup(tp);
			got |= 1;
			continue;
		}
		if (sscanf(line, "# model: simple alpha %lf us, ll alpha %lf us, beta %lf ns/B, gamma %lf",
			   &a, &all, &b, &g) == 4) {
			got |= 2;
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
		for (si = 0; si < o.nsizes && o.sizes[si] != bytes; si++)
			;
		if (si == o.nsizes) {
			if (o.nsizes == MAX_SIZES)
				continue;
			o.sizes[o.nsizes++] = bytes;
		}
		sh->cell[si][ai * IBC_PROTO_COUNT + pi] = (struct cell){
			.valid = 1, .algo = ai, .proto = pi, .chunk = chunk, .med_us = t,
			.min_us = mn, .max_us = mx };
	}
	fclose(f);
	if (got != 3)
		return -1;
	ibc_tune_model_init(&sh->model, o.n, ibc_tune_tp_parse(o.tp),
			    !strcmp(o.tp, "shm"));
	sh->model.base[IBC_PROTO_SIMPLE] = (struct ibc_tune_coef){ a, b, g };
	sh->model.base[IBC_PROTO_LL] = (struct ibc_tune_coef){ all, b, g };
	sh->model.source = IBC_TUNE_SRC_PROBE;
	sh->have_model = 1;
	return 0;
}

static int fit_and_write(void)
{
	static struct ibc_tune_sample smp[IBC_ALGO_COUNT][IBC_PROTO_COUNT][MAX_SIZES];
	const struct ibc_tune_sample *sp[IBC_ALGO_COUNT][IBC_PROTO_COUNT];
	int ns[IBC_ALGO_COUNT][IBC_PROTO_COUNT];
	struct ibc_tune_model m = sh->model;
	FILE *f;
	int a;
	int p;

	for (a = 0; a < IBC_ALGO_COUNT; a++) {
		for (p = 0; p < IBC_PROTO_COUNT; p++) {
			int si;

			ns[a][p] = 0;
			sp[a][p] = smp[a][p];
			for (si = 0; si < o.nsizes; si++) {
				const struct cell *c = &sh->cell[si][a * IBC_PROTO_COUNT + p];

				if (!c->valid)
					continue;
				smp[a][p][ns[a][p]].nbytes = o.sizes[si];
				smp[a][p][ns[a][p]].chunk_bytes = c->chunk;
				smp[a][p][ns[a][p]].time_us = c->med_us;
				ns[a][p]++;
			}
		}
	}
	if (ibc_tune_fit_coll(&m, o.coll, sp, ns, m.coef[o.coll]) != IBC_OK)
		return -1;
	f = fopen(o.tune_file, "a");
	if (!f)
		return -1;
	fprintf(f, "# algo_timing --tune: %s, %d ranks over %s\n", coll_name(o.coll), o.n, o.tp);
	/* base rows for this transport and rank count, then the fitted ones */
	if (ibc_tune_file_write(&m, f) != IBC_OK) {
		fclose(f);
		return -1;
	}
	return fclose(f) ? -1 : 0;
}

int main(int argc, char **argv)
{
	int codes[64];
	double load = 0;
	FILE *la;
	int i;
	int si;

	o.n = 2;
	o.tp = "shm";
	o.coll = IBC_TUNE_ALLREDUCE;
	o.reps = 5;
	o.warmup = 1;
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
			o.reps = IBC_MIN(IBC_MAX(atoi(v), 1), MAX_REPS);
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
		} else {
			usage();
			return 2;
		}
	}
	if (o.n < 1 || o.n > 64) {
		usage();
		return 2;
	}
	sh = fork_ranks_shared(sizeof(*sh));
	if (!sh)
		return 1;
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
	       coll_name(o.coll), o.n, o.tp, load, o.reps, o.warmup);
	if (sh->have_model)
		printf("# model: simple alpha %.2f us, ll alpha %.2f us, beta %.4f ns/B, gamma %.4f ns/B (%s%s)\n",
		       sh->model.base[0].alpha_us, sh->model.base[1].alpha_us, sh->model.base[0].beta_ns,
		       sh->model.base[0].gamma_ns,
		       (sh->model.source & IBC_TUNE_SRC_FILE) ? "file" : "",
		       (sh->model.source & IBC_TUNE_SRC_PROBE) ? "probe" : "");
	printf("%10s %-13s %-6s %9s %12s %10s %12s %12s\n", "bytes", "algo", "proto", "chunk",
	       "time_us", "busbw_GBps", "min_us", "max_us");
	for (si = 0; si < o.nsizes; si++) {
		for (i = 0; i < NCFG; i++) {
			const struct cell *c = &sh->cell[si][i];
			char name[40];

			if (!c->valid)
				continue;
			if (i == NCFG - 1)
				snprintf(name, sizeof(name), "auto:%s", ibc_algo_name(c->algo));
			else
				snprintf(name, sizeof(name), "%s", ibc_algo_name(c->algo));
			printf("%10zu %-13s %-6s %9zu %12.2f %10.3f %12.2f %12.2f\n", o.sizes[si], name,
			       ibc_proto_name(c->proto), c->chunk, c->med_us, busbw(o.sizes[si], c->med_us),
			       c->min_us, c->max_us);
		}
	}
	printf("# summary: best measured configuration vs the tuner's pick; slowdown = time of the\n"
	       "# picked configuration in the forced runs / best - 1 (auto_us: the tuner's own run)\n");
	printf("%10s %-22s %10s %-22s %10s %9s %10s\n", "bytes", "best", "best_us", "pick", "pick_us",
	       "slowdown", "auto_us");
	for (si = 0; si < o.nsizes; si++) {
		const struct cell *best = NULL;
		const struct cell *pick = &sh->cell[si][NCFG - 1];
		const struct cell *pf;
		char b[40];
		char p[40];

		for (i = 0; i < NCFG - 1; i++) {
			const struct cell *c = &sh->cell[si][i];

			if (c->valid && (!best || c->med_us < best->med_us))
				best = c;
		}
		if (!best || !pick->valid || pick->algo < 0)
			continue;
		pf = &sh->cell[si][pick->algo * IBC_PROTO_COUNT + pick->proto];
		if (!pf->valid) /* LL was not timed where it falls back to simple */
			pf = &sh->cell[si][pick->algo * IBC_PROTO_COUNT];
		snprintf(b, sizeof(b), "%s/%s", ibc_algo_name(best->algo), ibc_proto_name(best->proto));
		snprintf(p, sizeof(p), "%s/%s", ibc_algo_name(pick->algo), ibc_proto_name(pick->proto));
		printf("%10zu %-22s %10.2f %-22s %10.2f %8.1f%% %10.2f\n", o.sizes[si], b, best->med_us,
		       p, pf->med_us, (pf->med_us / best->med_us - 1.0) * 100.0, pick->med_us);
	}
	if (o.tune_file) {
		if (fit_and_write()) {
			fprintf(stderr, "algo_timing: cannot fit or write %s\n", o.tune_file);
			return 1;
		}
		printf("# fitted coefficients appended to %s\n", o.tune_file);
	}
	return 0;
}
