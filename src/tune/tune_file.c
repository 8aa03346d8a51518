/* SPDX-License-Identifier: MIT */
/*
 * tune_file.c - tuning files (IBC_TUNING_FILE: fitted coefficients per
 * collective, algorithm, protocol, transport class and rank count) and the
 * least-squares fits that produce them from measured times (ibc_bench
 * --tune, bench/algo_timing).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/status.h"
#include "base/util.h"
#include "coll/coll.h"
#include "coll/reduce.h"
#include "coll/sched.h"
#include "tune/tune.h"
#include "tune/tune_internal.h"

/* ------------------------------------------------------------------------ */
/* tuning file                                                              */
/* ------------------------------------------------------------------------ */

static double rank_distance(int a, int b)
{
	return fabs(log2((double)a) - log2((double)b));
}

/**
 * ibc_tune_file_load() - Read the rows of a tuning file that match the
 * model's transport, taking for every (collective, algorithm, protocol) and
 * for the base rows the row whose rank count is nearest to m->nranks (in
 * log scale; the first such row on ties).
 * @m:       [in,out] model; matching coefficients replace its own.
 * @path:    [in]  file (format: docs/algorithms.md).
 * @nrows_p: [out] rows used.
 *
 * Malformed lines log a WARN with their number and are skipped.
 * Return: IBC_OK; IBC_ERR_SYSTEM if the file cannot be opened (logged).
 */
ibc_status_t ibc_tune_file_load(struct ibc_tune_model *m, const char *path, int *nrows_p)
{
	double dist[IBC_TUNE_COLL_COUNT + 1][IBC_ALGO_COUNT][IBC_PROTO_COUNT];
	char line[512];
	FILE *f;
	int lineno = 0;
	int used = 0;
	int c;
	int a;
	int p;

	f = fopen(path, "r");
	if (!f) {
		IBC_LOG_WARN(TUNING, "cannot open IBC_TUNING_FILE %s: %s", path, strerror(errno));
		return IBC_ERR_SYSTEM;
	}
	for (c = 0; c <= IBC_TUNE_COLL_COUNT; c++)
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			for (p = 0; p < IBC_PROTO_COUNT; p++)
				dist[c][a][p] = HUGE_VAL;
	while (fgets(line, sizeof(line), f)) {
		char scoll[32];
		char salgo[32];
		char sproto[32];
		char stp[32];
		int nranks;
		struct ibc_tune_coef k;
		char *hash = strchr(line, '#');
		int coll;
		int algo;
		int proto;
		int tp;
		double d;

		lineno++;
		if (hash)
			*hash = '\0';
		if (sscanf(line, "%31s", scoll) != 1)
			continue;
		if (sscanf(line, "%31s %31s %31s %31s %d %lf %lf %lf", scoll, salgo, sproto, stp,
			   &nranks, &k.alpha_us, &k.beta_ns, &k.gamma_ns) != 8 || nranks < 1 ||
		    !(k.alpha_us >= 0) || !(k.beta_ns >= 0) || !(k.gamma_ns >= 0)) {
			IBC_LOG_WARN(TUNING, "%s:%d: expected 'collective algorithm protocol transport nranks alpha_us beta_ns gamma_ns' with numbers >= 0; line ignored",
				     path, lineno);
			continue;
		}
		coll = !strcmp(scoll, "base") ? IBC_TUNE_COLL_COUNT
					      : ibc_tune_coll_parse(scoll);
		algo = coll == IBC_TUNE_COLL_COUNT ? 0 : ibc_algo_parse(salgo);
		proto = ibc_proto_parse(sproto);
		tp = ibc_tune_tp_parse(stp);
		if (coll < 0 || algo < 0 || proto < 0 || tp < 0 ||
		    (coll < IBC_TUNE_COLL_COUNT && !ibc_algo_applies(coll, algo))) {
			IBC_LOG_WARN(TUNING, "%s:%d: unknown collective, algorithm, protocol or transport ('%s %s %s %s'); line ignored",
				     path, lineno, scoll, salgo, sproto, stp);
			continue;
		}
		if (tp != m->tp)
			continue;
		d = rank_distance(nranks, m->nranks);
		if (!(d < dist[coll][algo][proto]))
			continue;
		dist[coll][algo][proto] = d;
		if (coll == IBC_TUNE_COLL_COUNT)
			m->base[proto] = k;
		else
			m->coef[coll][algo][proto] = k;
	}
	fclose(f);
	for (c = 0; c <= IBC_TUNE_COLL_COUNT; c++)
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			for (p = 0; p < IBC_PROTO_COUNT; p++)
				used += dist[c][a][p] < HUGE_VAL;
	if (dist[IBC_TUNE_COLL_COUNT][0][IBC_PROTO_SIMPLE] < HUGE_VAL &&
	    dist[IBC_TUNE_COLL_COUNT][0][IBC_PROTO_LL] == HUGE_VAL)
		m->base[IBC_PROTO_LL] = m->base[IBC_PROTO_SIMPLE];
	if (used)
		m->source |= IBC_TUNE_SRC_FILE;
	*nrows_p = used;
	return IBC_OK;
}

/**
 * ibc_tune_file_write() - Write @m's coefficients as tuning-file rows for
 * its transport and rank count: the base rows, then every fitted row.
 * @m: [in] model.
 * @f: [in] open stream.
 * Return: IBC_OK; IBC_ERR_SYSTEM on a write error.
 */
ibc_status_t ibc_tune_file_write(const struct ibc_tune_model *m, FILE *f)
{
	const char *tp = ibc_tune_tp_name(m->tp);
	int c;
	int a;
	int p;

	fprintf(f, "# ibcoll tuning file v1: collective algorithm protocol transport nranks alpha_us beta_ns_per_byte gamma_ns_per_byte\n");
	for (p = 0; p < IBC_PROTO_COUNT; p++)
		fprintf(f, "base - %s %s %d %.4f %.5f %.5f\n", ibc_proto_name(p), tp, m->nranks,
			m->base[p].alpha_us, m->base[p].beta_ns, m->base[p].gamma_ns);
	for (c = 0; c < IBC_TUNE_COLL_COUNT; c++)
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			for (p = 0; p < IBC_PROTO_COUNT; p++) {
				const struct ibc_tune_coef *k = &m->coef[c][a][p];

				if (k->alpha_us < 0)
					continue;
				fprintf(f, "%s %s %s %s %d %.4f %.5f %.5f\n", ibc_tune_coll_name(c),
					ibc_algo_name(a), ibc_proto_name(p), tp, m->nranks, k->alpha_us,
					k->beta_ns, k->gamma_ns);
			}
	return ferror(f) ? IBC_ERR_SYSTEM : IBC_OK;
}

/**
 * ibc_tune_fit() - Fit alpha and beta of one (collective, algorithm,
 * protocol) to measured times, with gamma taken from m->base.
 * @m:     [in]  model (rank count, ring chunk, base gamma).
 * @coll:  [in]  enum ibc_tune_coll; @algo: [in] enum ibc_algo; @proto: [in].
 * @s:     [in]  @ns samples (size, chunk used, measured time).
 * @ns:    [in]  number of samples, >= 1.
 * @out_p: [out] the coefficients.
 *
 * Weighted least squares on relative error (weights 1/t^2), because the
 * tuner must be right to a few percent at every size, not in absolute
 * microseconds; alpha and beta are kept >= 0 (refit with one of them at 0
 * if the unconstrained optimum is negative). With samples of a single size
 * beta keeps the base value and alpha alone is fitted.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG for no samples or a non-positive time.
 */
ibc_status_t ibc_tune_fit(const struct ibc_tune_model *m, int coll, int algo, int proto,
			  const struct ibc_tune_sample *s, int ns, struct ibc_tune_coef *out_p)
{
	double a11 = 0;
	double a12 = 0;
	double a22 = 0;
	double b1 = 0;
	double b2 = 0;
	double gamma = m->base[proto].gamma_ns;
	double alpha;
	double beta;
	double det;
	int i;
	struct ibc_tune_model mf = *m;

	/* fitted rows are used without the lone-pair and cache terms (a file's model has none) */
	mf.lone_frac = 0;
	mf.gamma_cache_ns = 0;
	m = &mf;
	if (ns < 1)
		return IBC_ERR_INVALID_ARG;
	for (i = 0; i < ns; i++) {
		double S;
		double B;
		double G;
		double w;
		double y;

		if (!(s[i].time_us > 0))
			return IBC_ERR_INVALID_ARG;
		ibc_tune_shape(m, coll, algo, (double)s[i].nbytes, (double)IBC_MAX(s[i].chunk_bytes, 1),
			   &S, &B, &G);
		B /= 1000.0;
		w = 1.0 / (s[i].time_us * s[i].time_us);
		y = s[i].time_us - ibc_tune_gamma(m, gamma, (double)s[i].nbytes) * G / 1000.0;
		a11 += w * S * S;
		a12 += w * S * B;
		a22 += w * B * B;
		b1 += w * S * y;
		b2 += w * B * y;
	}
	det = a11 * a22 - a12 * a12;
	if (det > 1e-12 * a11 * a22 && a22 > 0) {
		alpha = (b1 * a22 - b2 * a12) / det;
		beta = (a11 * b2 - a12 * b1) / det;
	} else {
		beta = m->base[proto].beta_ns;
		alpha = a11 > 0 ? (b1 - beta * a12) / a11 : 0;
	}
	if (alpha < 0) {
		alpha = 0;
		beta = a22 > 0 ? b2 / a22 : 0;
	}
	if (beta < 0) {
		beta = 0;
		alpha = a11 > 0 ? b1 / a11 : 0;
	}
	out_p->alpha_us = IBC_MAX(alpha, 0.0);
	out_p->beta_ns = IBC_MAX(beta, 0.0);
	out_p->gamma_ns = gamma;
	return IBC_OK;
}

/* the sums of one algorithm's samples for the weighted least squares */
struct fit_sums {
	double ss;      /* sum w S^2 */
	double sb;      /* sum w S B */
	double bb;      /* sum w B^2 */
	double sy;      /* sum w S y */
	double by;      /* sum w B y */
	int n;
};

static int fit_accumulate(const struct ibc_tune_model *m, int coll, int algo, double gamma,
			  const struct ibc_tune_sample *s, int ns, struct fit_sums *f)
{
	int i;

	memset(f, 0, sizeof(*f));
	for (i = 0; i < ns; i++) {
		double S;
		double B;
		double G;
		double w;
		double y;

		if (!(s[i].time_us > 0))
			return -1;
		ibc_tune_shape(m, coll, algo, (double)s[i].nbytes, (double)IBC_MAX(s[i].chunk_bytes, 1),
			   &S, &B, &G);
		B /= 1000.0;
		w = 1.0 / (s[i].time_us * s[i].time_us);
		y = s[i].time_us - ibc_tune_gamma(m, gamma, (double)s[i].nbytes) * G / 1000.0;
		f->ss += w * S * S;
		f->sb += w * S * B;
		f->bb += w * B * B;
		f->sy += w * S * y;
		f->by += w * B * y;
		f->n++;
	}
	return 0;
}

/**
 * ibc_tune_fit_coll() - Fit one collective's coefficients for all its
 * algorithms at once: one alpha per protocol, shared by the algorithms (a
 * message step costs what it costs whatever the algorithm), and one beta
 * per algorithm (how well it uses bandwidth and memory). The LL protocol
 * only carries small messages, so its samples fit only its alpha (capped at
 * simple's: LL removes work from a step); its betas are the simple
 * protocol's.
 * @m:     [in]  model (rank count, ring chunk, base gamma and beta).
 * @coll:  [in]  enum ibc_tune_coll.
 * @s:     [in]  per algorithm and protocol, the samples (may be NULL).
 * @ns:    [in]  per algorithm and protocol, the number of samples.
 * @out:   [out] per algorithm and protocol, the coefficients; alpha_us is
 *               -1 where that algorithm and protocol had no sample.
 *
 * Weighted least squares on relative error (weights 1/t^2); the normal
 * equations form an arrowhead matrix solved by its Schur complement; alpha
 * and the betas are kept >= 0 (a negative one is set to 0 and the others
 * refitted). Per-algorithm alphas fitted to noisy small-message times
 * (ibc_tune_fit) can differ by an order of magnitude on a loaded machine;
 * sharing alpha keeps the small-message choice on the schedules' step
 * counts, which is where the algorithms really differ.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG for a non-positive time.
 */
ibc_status_t ibc_tune_fit_coll(const struct ibc_tune_model *m, int coll,
			       const struct ibc_tune_sample *const s[IBC_ALGO_COUNT][IBC_PROTO_COUNT],
			       const int ns[IBC_ALGO_COUNT][IBC_PROTO_COUNT],
			       struct ibc_tune_coef out[IBC_ALGO_COUNT][IBC_PROTO_COUNT])
{
	struct fit_sums f[IBC_ALGO_COUNT];
	double beta[IBC_ALGO_COUNT];
	double gamma = m->base[IBC_PROTO_SIMPLE].gamma_ns;
	double alpha = m->base[IBC_PROTO_SIMPLE].alpha_us;
	double a00 = 0;
	double r0 = 0;
	int have = 0;
	int a;
	int p;
	struct ibc_tune_model mf = *m;

	/* fitted rows are used without the lone-pair and cache terms (a file's model has none) */
	mf.lone_frac = 0;
	mf.gamma_cache_ns = 0;
	m = &mf;
	for (a = 0; a < IBC_ALGO_COUNT; a++)
		for (p = 0; p < IBC_PROTO_COUNT; p++)
			out[a][p] = (struct ibc_tune_coef){ -1.0, 0, gamma };
	/* simple: alpha shared, beta per algorithm (arrowhead system) */
	for (a = 0; a < IBC_ALGO_COUNT; a++) {
		beta[a] = m->base[IBC_PROTO_SIMPLE].beta_ns;
		if (fit_accumulate(m, coll, a, gamma, s[a][IBC_PROTO_SIMPLE],
				   s[a][IBC_PROTO_SIMPLE] ? ns[a][IBC_PROTO_SIMPLE] : 0, &f[a]))
			return IBC_ERR_INVALID_ARG;
		if (!f[a].n)
			continue;
		have = 1;
		a00 += f[a].ss;
		r0 += f[a].sy;
		if (f[a].bb > 0) {
			a00 -= f[a].sb * f[a].sb / f[a].bb;
			r0 -= f[a].sb * f[a].by / f[a].bb;
		}
	}
	if (have) {
		int a2;

		alpha = a00 > 1e-300 ? r0 / a00 : alpha;
		if (!(alpha >= 0))
			alpha = 0;
		for (a = 0; a < IBC_ALGO_COUNT; a++) {
			if (f[a].n && f[a].bb > 0)
				beta[a] = IBC_MAX((f[a].by - f[a].sb * alpha) / f[a].bb, 0.0);
		}
		/* refit alpha with the (clamped) betas */
		a00 = 0;
		r0 = 0;
		for (a2 = 0; a2 < IBC_ALGO_COUNT; a2++) {
			if (!f[a2].n)
				continue;
			a00 += f[a2].ss;
			r0 += f[a2].sy - beta[a2] * f[a2].sb;
		}
		if (a00 > 0)
			alpha = IBC_MAX(r0 / a00, 0.0);
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			if (f[a].n)
				out[a][IBC_PROTO_SIMPLE] = (struct ibc_tune_coef){ alpha, beta[a], gamma };
	}
	/* LL: one alpha, the betas of simple */
	{
		double ss = 0;
		double sy = 0;

		for (a = 0; a < IBC_ALGO_COUNT; a++) {
			struct fit_sums g;

			if (!s[a][IBC_PROTO_LL] || !ns[a][IBC_PROTO_LL])
				continue;
			if (fit_accumulate(m, coll, a, gamma, s[a][IBC_PROTO_LL], ns[a][IBC_PROTO_LL],
					   &g))
				return IBC_ERR_INVALID_ARG;
			ss += g.ss;
			sy += g.sy - beta[a] * g.sb;
		}
		if (ss > 0) {
			/* LL takes work away from a message step, never adds some: a fit
			 * above simple's alpha is noise (other jobs) and is capped */
			double all = IBC_MIN(IBC_MAX(sy / ss, 0.0),
					     have ? alpha : m->base[IBC_PROTO_SIMPLE].alpha_us);

			for (a = 0; a < IBC_ALGO_COUNT; a++)
				if (s[a][IBC_PROTO_LL] && ns[a][IBC_PROTO_LL])
					out[a][IBC_PROTO_LL] = (struct ibc_tune_coef){ all, beta[a], gamma };
		}
	}
	return IBC_OK;
}
