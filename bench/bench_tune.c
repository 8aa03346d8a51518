/* SPDX-License-Identifier: MIT */
/*
 * bench_tune.c - the tuning sweep of ibc_bench --tune and bench/algo_timing
 * (see bench_tune.h): every algorithm and protocol forced in turn through
 * the tuner's test hook (ibc_tuner_force()), then the tuner's own pick, and
 * a least-squares fit of the tuner's coefficients to the medians.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "bench_clock.h"
#include "bench_tune.h"
#include "api/api.h"

static ibc_status_t run_op(ibc_comm_h comm, int coll, void *s, void *r, size_t count)
{
	switch (coll) {
	case IBC_TUNE_BCAST:
		return ibc_broadcast(s, r, count, IBC_FLOAT32, 0, comm);
	case IBC_TUNE_REDUCE:
		return ibc_reduce(s, r, count, IBC_FLOAT32, IBC_SUM, 0, comm);
	default:
		return ibc_allreduce(s, r, count, IBC_FLOAT32, IBC_SUM, comm);
	}
}


/* time @iters operations; the slowest rank's time per operation, us, on every rank */
static ibc_status_t time_ops(ibc_comm_h comm, int coll, void *s, void *r, size_t count,
			     int iters, int algo, int proto, size_t chunk, double *us_p)
{
	ibc_status_t st;
	double us;
	uint64_t t0;
	int i;

	ibc_tuner_force(ibc_comm_tuner(comm), algo, proto, chunk);
	st = ibc_barrier(comm);
	if (st != IBC_OK)
		return st;
	t0 = ibc_time_ns();
	for (i = 0; i < iters; i++) {
		st = run_op(comm, coll, s, r, count);
		if (st != IBC_OK)
			return st;
	}
	us = (double)(ibc_time_ns() - t0) / 1000.0 / iters;
	/* forced ring: the reduction of the timings is the same for every configuration */
	ibc_tuner_force(ibc_comm_tuner(comm), IBC_ALGO_RING, IBC_PROTO_SIMPLE, 0);
	return ibc_allreduce(&us, us_p, 1, IBC_FLOAT64, IBC_MAX, comm);
}

/* the tuner's pick for @nbytes of @coll on @comm (local once the model is agreed) */
static void tuner_pick(ibc_comm_h comm, int coll, size_t nbytes, struct ibc_algo_choice *c)
{
	static const int colls[] = { IBC_COLL_ALLREDUCE, IBC_COLL_BROADCAST, IBC_COLL_REDUCE };

	/* not ibc_tuner_select(): its all-reduce calls are counted (the re-timing) */
	if (ibc_tuner_peek(ibc_comm_tuner(comm), colls[coll], nbytes / 4 * 4, 4, c) != IBC_OK)
		memset(c, 0, sizeof(*c));
}

/* the chunk the model would pick for @algo/@proto, so the fit knows what ran */
static size_t model_chunk(const struct ibc_tune_model *m, int coll, int algo, int proto,
			  size_t nbytes)
{
	struct ibc_tune_model f = *m;
	struct ibc_algo_choice c;

	f.force_algo = algo;
	f.force_proto = proto;
	ibc_tune_choose(&f, coll, nbytes, &c);
	return c.chunk_bytes;
}

/* the configurations that apply at @nb: every algorithm and protocol, then auto */
static void set_configs(ibc_comm_h comm, const struct ibc_tune_model *m, int coll, size_t nb,
			struct bench_tune_cell *loc)
{
	struct ibc_algo_choice ch;
	int k;

	memset(loc, 0, sizeof(*loc) * BENCH_TUNE_NCFG);
	for (k = 0; k < BENCH_TUNE_AUTO; k++) {
		loc[k].algo = k / IBC_PROTO_COUNT;
		loc[k].proto = k % IBC_PROTO_COUNT;
		if (!ibc_algo_applies(coll, loc[k].algo))
			continue;
		/* the shm all-reduce: only where its segment is mapped, one protocol */
		if (loc[k].algo == IBC_ALGO_SHM && (!m->shm_ok || loc[k].proto != IBC_PROTO_SIMPLE))
			continue;
		loc[k].chunk = model_chunk(m, coll, loc[k].algo, loc[k].proto, nb);
		/* LL where no message fits the LL path would time the simple path again */
		if (loc[k].proto == IBC_PROTO_LL &&
		    !ibc_tune_ll_applies(m, coll, loc[k].algo, nb, loc[k].chunk))
			continue;
		loc[k].valid = 1;
	}
	ibc_tuner_force(ibc_comm_tuner(comm), -1, -1, 0);
	tuner_pick(comm, coll, nb, &ch);
	loc[BENCH_TUNE_AUTO].algo = ch.algo;
	loc[BENCH_TUNE_AUTO].proto = ch.proto;
	loc[BENCH_TUNE_AUTO].chunk = ch.chunk_bytes;
	loc[BENCH_TUNE_AUTO].valid = 1;
}

ibc_status_t bench_tune_measure(ibc_comm_h comm, int coll, void *sendbuf, void *recvbuf,
				int reps, int warmup, struct bench_tune_result *res)
{
	static double t[BENCH_TUNE_NCFG][BENCH_TUNE_MAX_REPS];
	float one = 1;
	float tmp;
	ibc_status_t st;
	int si;

	if (!comm || !res || coll < 0 || coll >= IBC_TUNE_COLL_COUNT || reps < 1 ||
	    reps > BENCH_TUNE_MAX_REPS || warmup < 0 || res->nsizes < 1 ||
	    res->nsizes > BENCH_TUNE_MAX_SIZES)
		return IBC_ERR_INVALID_ARG;
	res->coll = coll;
	ibc_comm_size(comm, &res->nranks);
	/* the first tuned collective agrees on the model (probe or file) */
	st = ibc_allreduce(&one, &tmp, 1, IBC_FLOAT32, IBC_SUM, comm);
	if (st != IBC_OK)
		return st;
	st = ibc_tuner_model(ibc_comm_tuner(comm), &res->model);
	if (st != IBC_OK)
		return st;
	res->have_model = 1;
	for (si = 0; si < res->nsizes; si++) {
		size_t nb = res->sizes[si];
		int iters = (int)IBC_MAX(1, IBC_MIN(200, (4u << 20) / IBC_MAX(nb, 1)));
		struct bench_tune_cell *loc = res->cell[si];
		int rep;
		int k;

		set_configs(comm, &res->model, coll, nb, loc);
		for (rep = -warmup; rep < reps; rep++) {
			for (k = 0; k < BENCH_TUNE_NCFG; k++) {
				int auto_cfg = k == BENCH_TUNE_AUTO;
				double us;

				if (!loc[k].valid)
					continue;
				st = time_ops(comm, coll, sendbuf, recvbuf, nb / 4, iters,
					      auto_cfg ? -1 : loc[k].algo,
					      auto_cfg ? -1 : loc[k].proto,
					      auto_cfg ? 0 : loc[k].chunk, &us);
				if (st != IBC_OK) {
					ibc_tuner_force(ibc_comm_tuner(comm), -1, -1, 0);
					return st;
				}
				if (rep >= 0)
					t[k][rep] = us;
			}
		}
		for (k = 0; k < BENCH_TUNE_NCFG; k++) {
			if (!loc[k].valid)
				continue;
			qsort(t[k], (size_t)reps, sizeof(double), bench_cmp_double);
			loc[k].med_us = t[k][reps / 2];
			loc[k].min_us = t[k][0];
			loc[k].max_us = t[k][reps - 1];
		}
	}
	return ibc_tuner_force(ibc_comm_tuner(comm), -1, -1, 0);
}

ibc_status_t bench_tune_fit_append(const struct bench_tune_result *res, const char *tp_name,
				   const char *tool, const char *path)
{
	static struct ibc_tune_sample smp[IBC_ALGO_COUNT][IBC_PROTO_COUNT][BENCH_TUNE_MAX_SIZES];
	const struct ibc_tune_sample *sp[IBC_ALGO_COUNT][IBC_PROTO_COUNT];
	int ns[IBC_ALGO_COUNT][IBC_PROTO_COUNT];
	struct ibc_tune_model m;
	ibc_status_t st;
	FILE *f;
	int a;
	int p;

	if (!res || !res->have_model || !path)
		return IBC_ERR_INVALID_ARG;
	m = res->model;
	for (a = 0; a < IBC_ALGO_COUNT; a++) {
		for (p = 0; p < IBC_PROTO_COUNT; p++) {
			int si;

			ns[a][p] = 0;
			sp[a][p] = smp[a][p];
			for (si = 0; si < res->nsizes; si++) {
				const struct bench_tune_cell *c =
					&res->cell[si][a * IBC_PROTO_COUNT + p];

				if (!c->valid)
					continue;
				smp[a][p][ns[a][p]].nbytes = res->sizes[si];
				smp[a][p][ns[a][p]].chunk_bytes = c->chunk;
				smp[a][p][ns[a][p]].time_us = c->med_us;
				ns[a][p]++;
			}
		}
	}
	st = ibc_tune_fit_coll(&m, res->coll, sp, ns, m.coef[res->coll]);
	if (st != IBC_OK)
		return st;
	f = fopen(path, "a");
	if (!f)
		return IBC_ERR_SYSTEM;
	fprintf(f, "# %s --tune: %s, %d ranks over %s\n", tool, ibc_tune_coll_name(res->coll),
		res->nranks, tp_name);
	/* base rows for this transport and rank count, then the fitted ones */
	st = ibc_tune_file_write(&m, f);
	if (fclose(f) && st == IBC_OK)
		st = IBC_ERR_SYSTEM;
	return st;
}

static double busbw(const struct bench_tune_result *res, size_t nbytes, double us)
{
	double algbw = (double)nbytes / (us * 1e-6) / 1e9;

	return res->coll == IBC_TUNE_ALLREDUCE ? algbw * 2.0 * (res->nranks - 1) / res->nranks
					       : algbw;
}

void bench_tune_print(const struct bench_tune_result *res, FILE *f)
{
	int si;
	int i;

	if (res->have_model)
		fprintf(f, "# model: simple alpha %.2f us, ll alpha %.2f us, beta %.4f ns/B, gamma %.4f ns/B x share %d, lone pair %.3f of alpha, cache gamma %.4f L2 %lld (%s%s)\n",
			res->model.base[0].alpha_us, res->model.base[1].alpha_us,
			res->model.base[0].beta_ns, res->model.base[0].gamma_ns,
			(int)res->model.share, res->model.lone_frac, res->model.gamma_cache_ns,
			(long long)res->model.cache_bytes,
			(res->model.source & IBC_TUNE_SRC_FILE) ? "file" : "",
			(res->model.source & IBC_TUNE_SRC_PROBE) ? "probe" : "");
	/* the race's measured / predicted ratios (src/tune/tuner.c), for --pick-from */
	for (i = 0; res->have_model && i < IBC_TUNE_RACE_ANCHORS; i++) {
		const struct ibc_tune_race *r = &res->model.race[i];
		int a;

		if (r->nbytes <= 0)
			continue;
		fprintf(f, "# race: %lld", (long long)r->nbytes);
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			if (r->ratio[a] > 0)
				fprintf(f, " %s %.4f", ibc_algo_name(a), r->ratio[a]);
		fprintf(f, "\n");
	}
	fprintf(f, "%10s %-13s %-6s %9s %12s %10s %12s %12s\n", "bytes", "algo", "proto", "chunk",
		"time_us", "busbw_GBps", "min_us", "max_us");
	for (si = 0; si < res->nsizes; si++) {
		for (i = 0; i < BENCH_TUNE_NCFG; i++) {
			const struct bench_tune_cell *c = &res->cell[si][i];
			char name[40];

			if (!c->valid)
				continue;
			snprintf(name, sizeof(name), "%s%s", i == BENCH_TUNE_AUTO ? "auto:" : "",
				 ibc_algo_name(c->algo));
			fprintf(f, "%10zu %-13s %-6s %9zu %12.2f %10.3f %12.2f %12.2f\n",
				res->sizes[si], name, ibc_proto_name(c->proto), c->chunk, c->med_us,
				busbw(res, res->sizes[si], c->med_us), c->min_us, c->max_us);
		}
	}
	fprintf(f, "# summary: best measured configuration vs the tuner's pick; slowdown = time of the\n"
		   "# picked configuration in the forced runs / best - 1 (auto_us: the tuner's own run)\n");
	fprintf(f, "%10s %-22s %10s %-22s %10s %9s %10s\n", "bytes", "best", "best_us", "pick",
		"pick_us", "slowdown", "auto_us");
	for (si = 0; si < res->nsizes; si++) {
		const struct bench_tune_cell *best = NULL;
		const struct bench_tune_cell *pick = &res->cell[si][BENCH_TUNE_AUTO];
		const struct bench_tune_cell *pf;
		char b[40];
		char p[40];

		for (i = 0; i < BENCH_TUNE_AUTO; i++) {
			const struct bench_tune_cell *c = &res->cell[si][i];

			if (c->valid && (!best || c->med_us < best->med_us))
				best = c;
		}
		if (!best || !pick->valid || pick->algo < 0)
			continue;
		pf = &res->cell[si][pick->algo * IBC_PROTO_COUNT + pick->proto];
		if (!pf->valid) /* LL was not timed where it falls back to simple */
			pf = &res->cell[si][pick->algo * IBC_PROTO_COUNT];
		snprintf(b, sizeof(b), "%s/%s", ibc_algo_name(best->algo), ibc_proto_name(best->proto));
		snprintf(p, sizeof(p), "%s/%s", ibc_algo_name(pick->algo), ibc_proto_name(pick->proto));
		fprintf(f, "%10zu %-22s %10.2f %-22s %10.2f %8.1f%% %10.2f\n", res->sizes[si], b,
			best->med_us, p, pf->med_us, (pf->med_us / best->med_us - 1.0) * 100.0,
			pick->med_us);
	}
}
