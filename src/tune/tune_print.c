/* SPDX-License-Identifier: MIT */
/*
 * tune_print.c - the model in words: coefficients, sources, the race's
 * timings and the choice per size range (ibc_info --tuning), and the pieces
 * of text the tuner's INFO TUNING lines reuse.
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
/* printing                                                                 */
/* ------------------------------------------------------------------------ */

void ibc_tune_bytes_text(size_t v, char *buf, size_t len)
{
	if (v >= (1u << 30) && v % (1u << 30) == 0)
		snprintf(buf, len, "%zu GiB", v >> 30);
	else if (v >= (1u << 20) && v % (1u << 20) == 0)
		snprintf(buf, len, "%zu MiB", v >> 20);
	else if (v >= 1024 && v % 1024 == 0)
		snprintf(buf, len, "%zu KiB", v >> 10);
	else
		snprintf(buf, len, "%zu B", v);
}

static int choice_eq(const struct ibc_algo_choice *a, const struct ibc_algo_choice *b)
{
	if (a->algo != b->algo || a->proto != b->proto)
		return 0;
	return a->algo == IBC_ALGO_RING || a->chunk_bytes == b->chunk_bytes;
}

/* call @fn for every size range (powers of two, 1 B .. 1 GiB) with one choice */

void ibc_tune_ranges(const struct ibc_tune_model *m, int coll, ibc_tune_range_fn fn, void *arg)
{
	struct ibc_algo_choice cur;
	size_t lo = 1;
	size_t v;

	ibc_tune_choose(m, coll, 1, &cur);
	for (v = 2; v <= (1u << 30); v <<= 1) {
		struct ibc_algo_choice c;

		ibc_tune_choose(m, coll, v, &c);
		if (!choice_eq(&c, &cur)) {
			fn(arg, lo, v >> 1, &cur);
			lo = v;
			cur = c;
		}
	}
	fn(arg, lo, (size_t)1 << 30, &cur);
}

void ibc_tune_range_text(size_t lo, size_t hi, const struct ibc_algo_choice *c, char *buf,
		       size_t len)
{
	char a[32];
	char b[32];
	char ch[32];

	ibc_tune_bytes_text(lo, a, sizeof(a));
	ibc_tune_bytes_text(hi, b, sizeof(b));
	ibc_tune_bytes_text(c->chunk_bytes, ch, sizeof(ch));
	if (c->algo == IBC_ALGO_RING)
		snprintf(buf, len, "%9s .. %-9s %s %s", a, b, ibc_algo_name(c->algo),
			 ibc_proto_name(c->proto));
	else
		snprintf(buf, len, "%9s .. %-9s %s %s, chunk %s", a, b, ibc_algo_name(c->algo),
			 ibc_proto_name(c->proto), ch);
}

static void print_range(void *arg, size_t lo, size_t hi, const struct ibc_algo_choice *c)
{
	char buf[160];

	ibc_tune_range_text(lo, hi, c, buf, sizeof(buf));
	fprintf(arg, "  %s\n", buf);
}

void ibc_tune_source_text(const struct ibc_tune_model *m, char *buf, size_t len)
{
	int probe = !!(m->source & IBC_TUNE_SRC_PROBE);
	int file = !!(m->source & IBC_TUNE_SRC_FILE);

	snprintf(buf, len, "%s", probe && file ? "probe+file" : probe ? "probe" : file ? "file"
											  : "defaults");
}

/* the race at anchor @i: "256 KiB: ring 47.7 us (predicted 38.5), shm ..." */
void ibc_tune_race_text(const struct ibc_tune_model *m, int i, char *buf, size_t len)
{
	const struct ibc_tune_race *r = &m->race[i];
	size_t n;
	int a;

	ibc_tune_bytes_text((size_t)r->nbytes, buf, len);
	n = strlen(buf);
	for (a = 0; a < IBC_ALGO_COUNT && n < len; a++) {
		struct ibc_algo_choice c;
		double v;

		if (r->ratio[a] <= 0)
			continue;
		v = ibc_tune_best_for_algo(m, IBC_TUNE_ALLREDUCE, a, (size_t)r->nbytes, &c);
		/* two decimals below 10 us, where the LL and latency terms differ */
		n += (size_t)snprintf(buf + n, len - n, "%s %s %.*f us (predicted %.*f)",
				      n > 0 && buf[n - 1] == ')' ? "," : ":", ibc_algo_name(a),
				      v * r->ratio[a] < 10 ? 2 : 1, v * r->ratio[a], v < 10 ? 2 : 1,
				      v);
	}
}

/**
 * ibc_tune_print() - The model's coefficients and its choice per size
 * range of every collective (evaluated at powers of two), for ibc_info.
 * @m: [in] model.
 * @f: [in] output stream.
 */
void ibc_tune_print(const struct ibc_tune_model *m, FILE *f)
{
	char src[64];
	int c;
	int a;
	int p;

	ibc_tune_source_text(m, src, sizeof(src));
	fprintf(f, "# tuning model: %d ranks over %s (coefficients from: %s), LL up to %lld bytes%s\n",
		m->nranks, ibc_tune_tp_name(m->tp), src, (long long)m->ll_max,
		m->has_ll ? "" : " (this transport has no LL path)");
	fprintf(f, "# time sharing: %d rank(s) per core, gamma priced x%d\n", (int)m->share,
		(int)m->share);
	if (m->gamma_cache_ns > 0 && m->cache_bytes > 0)
		fprintf(f, "# cache: gamma %.4f ns/B while the working set (ranks per core x 2 N) fits the %lld-byte L2\n",
			m->gamma_cache_ns, (long long)m->cache_bytes);
	if (ibc_tune_step_factor(m, 1) < 1)
		fprintf(f, "# messages in flight: a lone pair's latency is %.2f of alpha; a step with m of %d messages costs alpha x %.2f..1\n",
			m->lone_frac, m->nranks, ibc_tune_step_factor(m, 1));
	for (c = 0; c < IBC_TUNE_RACE_ANCHORS; c++) {
		char buf[512];

		if (m->race[c].nbytes <= 0)
			continue;
		ibc_tune_race_text(m, c, buf, sizeof(buf));
		fprintf(f, "# race, all-reduce timed at init (used from 0.35x to 2.8x the size): %s\n", buf);
	}
	if (m->force_algo >= 0 || m->force_proto >= 0 || m->force_chunk > 0)
		fprintf(f, "# overrides: algorithm %s, protocol %s, chunk %lld bytes\n",
			m->force_algo >= 0 ? ibc_algo_name(m->force_algo) : "auto",
			m->force_proto >= 0 ? ibc_proto_name(m->force_proto) : "auto",
			(long long)m->force_chunk);
	fprintf(f, "#   %-10s %-13s %-7s %10s %10s %10s\n", "collective", "algorithm", "proto",
		"alpha_us", "beta_ns/B", "gamma_ns/B");
	for (p = 0; p < IBC_PROTO_COUNT; p++)
		fprintf(f, "    %-10s %-13s %-7s %10.3f %10.4f %10.4f\n", "(base)", "-", ibc_proto_name(p),
			m->base[p].alpha_us, m->base[p].beta_ns, m->base[p].gamma_ns);
	for (c = 0; c < IBC_TUNE_COLL_COUNT; c++)
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			for (p = 0; p < IBC_PROTO_COUNT; p++) {
				const struct ibc_tune_coef *k = &m->coef[c][a][p];

				if (k->alpha_us < 0)
					continue;
				fprintf(f, "    %-10s %-13s %-7s %10.3f %10.4f %10.4f  (fitted)\n",
					ibc_tune_coll_name(c), ibc_algo_name(a), ibc_proto_name(p), k->alpha_us,
					k->beta_ns, k->gamma_ns);
			}
	for (c = 0; c < IBC_TUNE_COLL_COUNT; c++) {
		fprintf(f, "# %s, %d ranks over %s: chosen algorithm per size\n", ibc_tune_coll_name(c),
			m->nranks, ibc_tune_tp_name(m->tp));
		ibc_tune_ranges(m, c, print_range, f);
	}
}
