/* SPDX-License-Identifier: MIT */
/*
 * scaling_io.c - reads the text inputs of the scaling model:
 *   hardware.conf   GPU and link constants   (key value  # source)
 *   workloads.conf  model shapes, benchmark rules, reference convergence
 *                   points, overheads read from published logs
 *   mlperf.csv      published results with their configurations
 *   mllog-runs.csv  the published result logs, reduced (read by mllog.c)
 *   local-params.txt  parameters measured on this machine by run.sh
 * Relies on scaling_model.h for the structures.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/util.h"
#include "scaling_model.h"

#define KV_MAX 512
#define KV_KEY 96
#define KV_VAL 512

/* a flat key -> value table read from one "key value # comment" file */
struct io_kv {
	char key[KV_MAX][KV_KEY];
	char val[KV_MAX][KV_VAL];
	int n;
};

static char *io_trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* read @path into @kv; later duplicates override earlier ones */
static ibc_status_t io_kv_read(struct io_kv *kv, const char *path)
{
	char line[1024];
	FILE *f;
	char *p, *key, *val, *hash;
	int lineno = 0;
	int i;

	f = fopen(path, "r");
	if (!f) {
		IBC_LOG_WARN(BENCH, "cannot open %s: %s", path, strerror(errno));
		return IBC_ERR_SYSTEM;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		p = io_trim(line);
		if (*p == '\0')
			continue;
		key = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		if (*p)
			*p++ = '\0';
		val = io_trim(p);
		if (*val == '\0' || strlen(key) >= KV_KEY || strlen(val) >= KV_VAL) {
			IBC_LOG_WARN(BENCH, "%s:%d: expected 'key value'", path, lineno);
			fclose(f);
			return IBC_ERR_INVALID_ARG;
		}
		for (i = 0; i < kv->n; i++)
			if (strcmp(kv->key[i], key) == 0)
				break;
		if (i == kv->n) {
			if (kv->n == KV_MAX) {
				IBC_LOG_WARN(BENCH, "%s: more than %d keys", path, KV_MAX);
				fclose(f);
				return IBC_ERR_INVALID_ARG;
			}
			kv->n++;
		}
		snprintf(kv->key[i], KV_KEY, "%s", key);
		snprintf(kv->val[i], KV_VAL, "%s", val);
	}
	fclose(f);
	return IBC_OK;
}

static const char *io_kv_get(const struct io_kv *kv, const char *key)
{
	int i;

	for (i = 0; i < kv->n; i++)
		if (strcmp(kv->key[i], key) == 0)
			return kv->val[i];
	return NULL;
}

static ibc_status_t io_parse_double(const char *what, const char *s, double *v_p)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *io_trim(end) != '\0') {
		IBC_LOG_WARN(BENCH, "%s: '%s' is not a number", what, s);
		return IBC_ERR_INVALID_ARG;
	}
	*v_p = v;
	return IBC_OK;
}

/* numeric value of "<prefix>.<name>.<field>"; IBC_ERR_INVALID_ARG if absent */
static ibc_status_t io_num(const struct io_kv *kv, const char *prefix, const char *name,
			   const char *field, double *v_p)
{
	char key[KV_KEY * 2];
	const char *s;

	snprintf(key, sizeof(key), "%s.%s.%s", prefix, name, field);
	s = io_kv_get(kv, key);
	if (!s) {
		IBC_LOG_WARN(BENCH, "missing key %s", key);
		return IBC_ERR_INVALID_ARG;
	}
	return io_parse_double(key, s, v_p);
}

static ibc_status_t io_str(const struct io_kv *kv, const char *prefix, const char *name,
			   const char *field, char *out, size_t len)
{
	char key[KV_KEY * 2];
	const char *s;

	snprintf(key, sizeof(key), "%s.%s.%s", prefix, name, field);
	s = io_kv_get(kv, key);
	if (!s || strlen(s) >= len) {
		IBC_LOG_WARN(BENCH, "missing or too long key %s", key);
		return IBC_ERR_INVALID_ARG;
	}
	snprintf(out, len, "%s", s);
	return IBC_OK;
}

/* link.<name>.{GBps,hop_us,base_us,reduce_GBps,tree_bw_factor} */
static ibc_status_t io_link(const struct io_kv *kv, const char *name, struct ibc_scaling_link *l)
{
	double gbps, hop_us, base_us, tree;

	IBC_CHECK(io_num(kv, "link", name, "GBps", &gbps));
	IBC_CHECK(io_num(kv, "link", name, "hop_us", &hop_us));
	IBC_CHECK(io_num(kv, "link", name, "base_us", &base_us));
	IBC_CHECK(io_num(kv, "link", name, "tree_bw_factor", &tree));
	if (!(gbps > 0.0) || hop_us < 0.0 || base_us < 0.0 || !(tree > 0.0)) {
		IBC_LOG_WARN(BENCH, "link %s: bad constants", name);
		return IBC_ERR_INVALID_ARG;
	}
	memset(l, 0, sizeof(*l));
	l->beta_s_per_B = 1.0 / (gbps * 1e9);
	l->alpha_s = hop_us * 1e-6;
	l->base_s = base_us * 1e-6;
	l->tree_bw_factor = tree;
	return IBC_OK;
}

static ibc_status_t io_load_hardware(struct ibc_scaling_db *db, const struct io_kv *kv)
{
	char names[KV_VAL];
	char link[IBC_SCALING_NAME_LEN];
	char *save = NULL;
	char *tok;
	const char *list = io_kv_get(kv, "systems");
	struct ibc_scaling_system *s;
	double v;

	if (!list) {
		IBC_LOG_WARN(BENCH, "hardware.conf: missing 'systems' list");
		return IBC_ERR_INVALID_ARG;
	}
	snprintf(names, sizeof(names), "%s", list);
	for (tok = strtok_r(names, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (db->nsys == (int)IBC_ARRAY_SIZE(db->sys)) {
			IBC_LOG_WARN(BENCH, "too many systems");
			return IBC_ERR_INVALID_ARG;
		}
		s = &db->sys[db->nsys];
		memset(s, 0, sizeof(*s));
		snprintf(s->name, sizeof(s->name), "%s", tok);
		IBC_CHECK(io_str(kv, "system", tok, "gpu", s->gpu, sizeof(s->gpu)));
		IBC_CHECK(io_num(kv, "gpu", s->gpu, "peak_bf16_tflops", &v));
		s->peak_flops = v * 1e12;
		IBC_CHECK(io_num(kv, "gpu", s->gpu, "peak_fp8_tflops", &v));
		s->peak_fp8_flops = v * 1e12;
		IBC_CHECK(io_num(kv, "gpu", s->gpu, "hbm_TBps", &v));
		s->hbm_Bps = v * 1e12;
		IBC_CHECK(io_num(kv, "system", tok, "gpus_per_node", &v));
		s->gpus_per_node = (int)v;
		IBC_CHECK(io_str(kv, "system", tok, "nvlink", link, sizeof(link)));
		IBC_CHECK(io_link(kv, link, &s->nvlink));
		IBC_CHECK(io_str(kv, "system", tok, "net", link, sizeof(link)));
		IBC_CHECK(io_link(kv, link, &s->net));
		if (!(s->peak_flops > 0.0) || !(s->peak_fp8_flops > 0.0) || !(s->hbm_Bps > 0.0) ||
		    s->gpus_per_node < 1) {
			IBC_LOG_WARN(BENCH, "system %s: bad constants", tok);
			return IBC_ERR_INVALID_ARG;
		}
		db->nsys++;
	}
	return IBC_OK;
}

/* workload.<w>.rcp_<unit>.<gbs>  v1 v2 ...  (unit: tokens or samples) */
static ibc_status_t io_load_rcp(struct ibc_scaling_workload *w, const struct io_kv *kv)
{
	char prefix[KV_KEY];
	char vals[KV_VAL];
	char *save, *tok;
	size_t plen;
	double gbs, sum, v, tmp;
	int i, j, n, tokens;

	for (i = 0; i < kv->n; i++) {
		snprintf(prefix, sizeof(prefix), "workload.%s.rcp_", w->name);
		plen = strlen(prefix);
		if (strncmp(kv->key[i], prefix, plen) != 0)
			continue;
		if (strncmp(kv->key[i] + plen, "tokens.", 7) == 0)
			tokens = 1;
		else if (strncmp(kv->key[i] + plen, "samples.", 8) == 0)
			tokens = 0;
		else
			continue;
		IBC_CHECK(io_parse_double(kv->key[i], strchr(kv->key[i] + plen, '.') + 1, &gbs));
		snprintf(vals, sizeof(vals), "%s", kv->val[i]);
		sum = 0.0;
		n = 0;
		save = NULL;
		for (tok = strtok_r(vals, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
			IBC_CHECK(io_parse_double(kv->key[i], tok, &v));
			sum += tokens ? v / w->seq : v;
			n++;
		}
		if (n == 0 || w->nrcp == IBC_SCALING_MAX_RCP) {
			IBC_LOG_WARN(BENCH, "%s: empty or too many reference points", kv->key[i]);
			return IBC_ERR_INVALID_ARG;
		}
		w->rcp_gbs[w->nrcp] = gbs;
		w->rcp_samples[w->nrcp] = sum / n;
		w->nrcp++;
	}
	/* insertion sort by gbs */
	for (i = 1; i < w->nrcp; i++)
		for (j = i; j > 0 && w->rcp_gbs[j - 1] > w->rcp_gbs[j]; j--) {
			tmp = w->rcp_gbs[j];
			w->rcp_gbs[j] = w->rcp_gbs[j - 1];
			w->rcp_gbs[j - 1] = tmp;
			tmp = w->rcp_samples[j];
			w->rcp_samples[j] = w->rcp_samples[j - 1];
			w->rcp_samples[j - 1] = tmp;
		}
	return IBC_OK;
}

static ibc_status_t io_load_workloads(struct ibc_scaling_db *db, const struct io_kv *kv)
{
	char names[KV_VAL];
	char *save = NULL;
	char *tok;
	const char *list = io_kv_get(kv, "workloads");
	struct ibc_scaling_workload *w;
	double v;

	if (!list) {
		IBC_LOG_WARN(BENCH, "workloads.conf: missing 'workloads' list");
		return IBC_ERR_INVALID_ARG;
	}
	snprintf(names, sizeof(names), "%s", list);
	for (tok = strtok_r(names, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (db->nwl == (int)IBC_ARRAY_SIZE(db->wl)) {
			IBC_LOG_WARN(BENCH, "too many workloads");
			return IBC_ERR_INVALID_ARG;
		}
		w = &db->wl[db->nwl];
		memset(w, 0, sizeof(*w));
		snprintf(w->name, sizeof(w->name), "%s", tok);
		IBC_CHECK(io_num(kv, "workload", tok, "layers", &v));
		w->layers = (int)v;
		IBC_CHECK(io_num(kv, "workload", tok, "hidden", &w->hidden));
		IBC_CHECK(io_num(kv, "workload", tok, "ffn", &w->ffn));
		IBC_CHECK(io_num(kv, "workload", tok, "heads", &v));
		w->heads = (int)v;
		IBC_CHECK(io_num(kv, "workload", tok, "kv_heads", &v));
		w->kv_heads = (int)v;
		IBC_CHECK(io_num(kv, "workload", tok, "vocab", &w->vocab));
		IBC_CHECK(io_num(kv, "workload", tok, "seq", &w->seq));
		IBC_CHECK(io_num(kv, "workload", tok, "gated_mlp", &v));
		w->gated_mlp = (int)v;
		IBC_CHECK(io_num(kv, "workload", tok, "frozen_base", &v));
		w->frozen_base = (int)v;
		IBC_CHECK(io_num(kv, "workload", tok, "lora_params", &w->lora_params));
		IBC_CHECK(io_num(kv, "workload", tok, "elem_bytes_per_h", &w->elem_bytes_per_h));
		IBC_CHECK(io_num(kv, "workload", tok, "eval_seqs", &w->eval_seqs));
		IBC_CHECK(io_num(kv, "workload", tok, "eval_interval_samples",
				 &w->eval_interval_samples));
		IBC_CHECK(io_num(kv, "workload", tok, "first_eval_samples",
				 &w->first_eval_samples));
		if (w->layers < 1 || !(w->hidden > 0.0) || w->heads < 1 || w->kv_heads < 1 ||
		    !(w->seq > 0.0) || !(w->eval_interval_samples > 0.0)) {
			IBC_LOG_WARN(BENCH, "workload %s: bad shape", tok);
			return IBC_ERR_INVALID_ARG;
		}
		IBC_CHECK(io_load_rcp(w, kv));
		db->nwl++;
	}
	IBC_CHECK(io_num(kv, "model", "nemo", "host_step_s", &db->params.host_step_s));
	IBC_CHECK(io_num(kv, "model", "nemo", "eval_fixed_s", &db->params.eval_fixed_s));
	IBC_CHECK(io_num(kv, "model", "nemo", "opt_bytes_per_param",
			 &db->params.opt_bytes_per_param));
	return IBC_OK;
}

/* split a CSV line in place (no quoting: fields never contain commas) */
static int io_csv_split(char *line, char **field, int max)
{
	int n = 0;
	char *p = line;

	while (n < max) {
		field[n++] = p;
		p = strchr(p, ',');
		if (!p)
			break;
		*p++ = '\0';
	}
	return n;
}

enum {
	CSV_ID, CSV_BENCH, CSV_ROUND, CSV_SUBMITTER, CSV_SYSTEM, CSV_STACK, CSV_ROLE, CSV_NGPUS,
	CSV_TP, CSV_PP, CSV_CP, CSV_VP, CSV_MBS, CSV_GBS, CSV_DIST_OPT, CSV_GEMM_FP8,
	CSV_ATTN_FP8, CSV_GRAD_BYTES, CSV_PARAM_BYTES, CSV_SAMPLES, CSV_PUBLISHED, CSV_LOG_STEP,
	CSV_LOG_EVALS, CSV_RUNS, CSV_SOURCE, CSV_NCOLS
};

static const char *const io_csv_header[CSV_NCOLS] = {
	"id", "bench", "round", "submitter", "system", "stack", "role", "ngpus", "tp", "pp",
	"cp", "vp", "mbs", "gbs", "dist_opt", "gemm_fp8", "attn_fp8", "grad_bytes",
	"param_bytes", "samples", "published_min", "logged_step_s", "logged_evals", "runs",
	"source",
};

static ibc_status_t io_csv_int(const char *path, int lineno, const char *s, long *v_p)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0') {
		IBC_LOG_WARN(BENCH, "%s:%d: '%s' is not an integer", path, lineno, s);
		return IBC_ERR_INVALID_ARG;
	}
	*v_p = v;
	return IBC_OK;
}

static ibc_status_t io_csv_num(const char *path, int lineno, const char *s, double *v_p)
{
	char what[64];

	if (*s == '\0') {
		*v_p = 0.0;
		return IBC_OK;
	}
	snprintf(what, sizeof(what), "%.40s:%d", path, lineno);
	return io_parse_double(what, s, v_p);
}

/*
 * A row that names its runs takes from their scored mean the evaluation
 * schedule, the logged step and evaluations and, with samples "log", the
 * samples to converge; it must not give those figures itself.
 */
static ibc_status_t io_row_log(struct ibc_scaling_db *db, struct ibc_scaling_row *r,
			       const char *path, int lineno)
{
	if (r->runs[0] == '\0') {
		if (r->samples_from_log) {
			IBC_LOG_WARN(BENCH, "%s:%d: row %s: samples 'log' needs a runs group", path,
				     lineno, r->id);
			return IBC_ERR_INVALID_ARG;
		}
		return IBC_OK;
	}
	if (r->logged_step_s > 0.0 || r->logged_evals > 0.0) {
		IBC_LOG_WARN(BENCH, "%s:%d: row %s: logged_step_s and logged_evals come from its runs; leave them empty",
			     path, lineno, r->id);
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_mllog_table_score(&db->runs, r->runs, &r->log));
	if (r->log.gbs != r->gbs) {
		IBC_LOG_WARN(BENCH, "%s:%d: row %s has gbs %ld, its runs %ld", path, lineno, r->id,
			     r->gbs, r->log.gbs);
		return IBC_ERR_INVALID_ARG;
	}
	r->have_log = 1;
	r->logged_step_s = r->log.step_s;
	r->logged_evals = r->log.evals;
	r->first_eval_samples = r->log.first_eval_samples;
	r->eval_interval_samples = r->log.eval_interval_samples;
	if (r->samples_from_log)
		r->samples = r->log.samples;
	return IBC_OK;
}

static ibc_status_t io_load_rows(struct ibc_scaling_db *db, const char *path)
{
	char line[2048];
	char *field[CSV_NCOLS + 1];
	struct ibc_scaling_row *r;
	FILE *f;
	long v[CSV_NCOLS];
	double d;
	int lineno = 0;
	int header = 0;
	int n, i;
	ibc_status_t st = IBC_OK;

	f = fopen(path, "r");
	if (!f) {
		IBC_LOG_WARN(BENCH, "cannot open %s: %s", path, strerror(errno));
		return IBC_ERR_SYSTEM;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (line[0] == '#' || *io_trim(line) == '\0')
			continue;
		n = io_csv_split(io_trim(line), field, CSV_NCOLS + 1);
		if (n != CSV_NCOLS) {
			IBC_LOG_WARN(BENCH, "%s:%d: %d fields, expected %d", path, lineno, n,
				     CSV_NCOLS);
			st = IBC_ERR_INVALID_ARG;
			goto out;
		}
		if (!header) {
			for (i = 0; i < CSV_NCOLS; i++)
				if (strcmp(io_trim(field[i]), io_csv_header[i]) != 0) {
					IBC_LOG_WARN(BENCH, "%s:%d: column %d is '%s', expected '%s'",
						     path, lineno, i + 1, field[i], io_csv_header[i]);
					st = IBC_ERR_INVALID_ARG;
					goto out;
				}
			header = 1;
			continue;
		}
		if (db->nrow == IBC_SCALING_MAX_ROWS) {
			IBC_LOG_WARN(BENCH, "%s: more than %d rows", path, IBC_SCALING_MAX_ROWS);
			st = IBC_ERR_INVALID_ARG;
			goto out;
		}
		for (i = 0; i < CSV_NCOLS; i++)
			field[i] = io_trim(field[i]);
		r = &db->row[db->nrow];
		memset(r, 0, sizeof(*r));
		snprintf(r->id, sizeof(r->id), "%s", field[CSV_ID]);
		snprintf(r->bench, sizeof(r->bench), "%s", field[CSV_BENCH]);
		snprintf(r->round, sizeof(r->round), "%s", field[CSV_ROUND]);
		snprintf(r->submitter, sizeof(r->submitter), "%s", field[CSV_SUBMITTER]);
		snprintf(r->system, sizeof(r->system), "%s", field[CSV_SYSTEM]);
		snprintf(r->stack, sizeof(r->stack), "%s", field[CSV_STACK]);
		snprintf(r->role, sizeof(r->role), "%s", field[CSV_ROLE]);
		snprintf(r->source, sizeof(r->source), "%s", field[CSV_SOURCE]);
		if (strcmp(r->role, "calib-u") != 0 && strcmp(r->role, "calib-u-step") != 0 &&
		    strcmp(r->role, "calib-eta") != 0 && strcmp(r->role, "predict") != 0) {
			IBC_LOG_WARN(BENCH, "%s:%d: unknown role '%s'", path, lineno, r->role);
			st = IBC_ERR_INVALID_ARG;
			goto out;
		}
		for (i = CSV_NGPUS; i <= CSV_ATTN_FP8; i++)
			IBC_CHECK_GOTO(io_csv_int(path, lineno, field[i], &v[i]), st, out);
		r->ngpus = (int)v[CSV_NGPUS];
		r->tp = (int)v[CSV_TP];
		r->pp = (int)v[CSV_PP];
		r->cp = (int)v[CSV_CP];
		r->vp = (int)v[CSV_VP];
		r->mbs = (int)v[CSV_MBS];
		r->gbs = v[CSV_GBS];
		r->dist_opt = (int)v[CSV_DIST_OPT];
		r->gemm_fp8 = v[CSV_GEMM_FP8] != 0;
		r->attn_fp8 = v[CSV_ATTN_FP8] != 0;
		IBC_CHECK_GOTO(io_csv_num(path, lineno, field[CSV_LOG_EVALS], &r->logged_evals),
			       st, out);
		IBC_CHECK_GOTO(io_csv_num(path, lineno, field[CSV_GRAD_BYTES], &d), st, out);
		r->grad_bytes_per_elem = d;
		IBC_CHECK_GOTO(io_csv_num(path, lineno, field[CSV_PARAM_BYTES], &d), st, out);
		r->param_bytes_per_elem = d;
		if (strcmp(field[CSV_SAMPLES], "log") == 0)
			r->samples_from_log = 1;
		else
			IBC_CHECK_GOTO(io_csv_num(path, lineno, field[CSV_SAMPLES], &r->samples),
				       st, out);
		IBC_CHECK_GOTO(io_csv_num(path, lineno, field[CSV_PUBLISHED], &r->published_min),
			       st, out);
		IBC_CHECK_GOTO(io_csv_num(path, lineno, field[CSV_LOG_STEP], &r->logged_step_s),
			       st, out);
		snprintf(r->runs, sizeof(r->runs), "%s", field[CSV_RUNS]);
		IBC_CHECK_GOTO(io_row_log(db, r, path, lineno), st, out);
		if (!(r->published_min > 0.0)) {
			IBC_LOG_WARN(BENCH, "%s:%d: row %s has no published time", path, lineno,
				     r->id);
			st = IBC_ERR_INVALID_ARG;
			goto out;
		}
		IBC_CHECK_GOTO(ibc_scaling_check_row(db, r), st, out);
		db->nrow++;
	}
	if (!header) {
		IBC_LOG_WARN(BENCH, "%s: no header line", path);
		st = IBC_ERR_INVALID_ARG;
	}
out:
	fclose(f);
	return st;
}

/**
 * ibc_scaling_load() - Read hardware.conf, workloads.conf, mllog-runs.csv
 * and mlperf.csv.
 * @db:  [out] database, zeroed first; nothing is fitted yet.
 * @dir: directory holding the four files (bench/scaling in the source tree).
 *
 * Return: IBC_OK; IBC_ERR_SYSTEM when a file cannot be opened;
 *         IBC_ERR_INVALID_ARG for malformed content (the line is logged);
 *         IBC_ERR_NO_MEMORY.
 */
ibc_status_t ibc_scaling_load(struct ibc_scaling_db *db, const char *dir)
{
	struct io_kv *kv;
	char path[4096];
	ibc_status_t st;

	memset(db, 0, sizeof(*db));
	kv = ibc_calloc(1, sizeof(*kv), "scaling kv");
	if (!kv)
		return IBC_ERR_NO_MEMORY;
	snprintf(path, sizeof(path), "%s/hardware.conf", dir);
	IBC_CHECK_GOTO(io_kv_read(kv, path), st, out);
	IBC_CHECK_GOTO(io_load_hardware(db, kv), st, out);
	memset(kv, 0, sizeof(*kv));
	snprintf(path, sizeof(path), "%s/workloads.conf", dir);
	IBC_CHECK_GOTO(io_kv_read(kv, path), st, out);
	IBC_CHECK_GOTO(io_load_workloads(db, kv), st, out);
	snprintf(path, sizeof(path), "%s/mllog-runs.csv", dir);
	IBC_CHECK_GOTO(ibc_mllog_table_read(&db->runs, path), st, out);
	snprintf(path, sizeof(path), "%s/mlperf.csv", dir);
	IBC_CHECK_GOTO(io_load_rows(db, path), st, out);
out:
	ibc_free(kv);
	return st;
}

static const char *const io_transport_names[IBC_SCALING_NTRANSPORTS] = { "shm", "tcp", "ib" };

/**
 * ibc_scaling_transport_index() - Index of a local-model transport.
 * @name: [in] transport name as run.sh and IBC_TRANSPORT spell it.
 * Return: 0 for "shm", 1 for "tcp", 2 for "ib" (verbs), -1 otherwise.
 */
int ibc_scaling_transport_index(const char *name)
{
	int t;

	for (t = 0; t < IBC_SCALING_NTRANSPORTS; t++)
		if (strcmp(name, io_transport_names[t]) == 0)
			return t;
	return -1;
}

/**
 * ibc_scaling_transport_name() - Name of a local-model transport.
 * @transport: index, 0 .. IBC_SCALING_NTRANSPORTS - 1.
 * Return: "shm", "tcp" or "ib"; "?" for an index out of range.
 */
const char *ibc_scaling_transport_name(int transport)
{
	if (transport < 0 || transport >= IBC_SCALING_NTRANSPORTS)
		return "?";
	return io_transport_names[transport];
}

/**
 * ibc_scaling_load_local() - Read local-params.txt written by run.sh.
 * @lp:   [out] parameters; fields not in the file stay unmeasured.
 * @path: file path.
 *
 * Keys: cores; <shm|tcp|ib>.alpha_us, .beta_ns_per_B, .gamma_ns_per_B (all three
 * or none per transport); fit_ranks; trainer.grad_bytes,
 * trainer.sample_compute_s, trainer.step_fixed_s, trainer.corun_factor,
 * trainer.batch, trainer.threads_per_rank, trainer.overlap (the trainer
 * terms all seven or none).
 * Return: IBC_OK; IBC_ERR_SYSTEM when the file cannot be opened;
 *         IBC_ERR_INVALID_ARG for malformed or partial content.
 */
ibc_status_t ibc_scaling_load_local(struct ibc_scaling_local *lp, const char *path)
{
	static const char *const lkey[3] = { "alpha_us", "beta_ns_per_B", "gamma_ns_per_B" };
	static const char *const tkey[7] = { "grad_bytes",   "sample_compute_s", "step_fixed_s",
					     "corun_factor", "batch",		 "threads_per_rank",
					     "overlap" };
	struct io_kv *kv;
	char key[KV_KEY];
	const char *s;
	double v[7];
	int t, k, have;
	ibc_status_t st = IBC_OK;

	memset(lp, 0, sizeof(*lp));
	kv = ibc_calloc(1, sizeof(*kv), "scaling local kv");
	if (!kv)
		return IBC_ERR_NO_MEMORY;
	IBC_CHECK_GOTO(io_kv_read(kv, path), st, out);
	s = io_kv_get(kv, "cores");
	if (!s) {
		IBC_LOG_WARN(BENCH, "%s: missing 'cores'", path);
		st = IBC_ERR_INVALID_ARG;
		goto out;
	}
	IBC_CHECK_GOTO(io_parse_double("cores", s, &v[0]), st, out);
	lp->cores = (int)v[0];
	s = io_kv_get(kv, "fit_ranks");
	if (s) {
		IBC_CHECK_GOTO(io_parse_double("fit_ranks", s, &v[0]), st, out);
		lp->fit_ranks = (int)v[0];
	}
	for (t = 0; t < IBC_SCALING_NTRANSPORTS; t++) {
		have = 0;
		for (k = 0; k < 3; k++) {
			snprintf(key, sizeof(key), "%s.%s", io_transport_names[t], lkey[k]);
			s = io_kv_get(kv, key);
			if (!s)
				continue;
			IBC_CHECK_GOTO(io_parse_double(key, s, &v[k]), st, out);
			have++;
		}
		if (have == 0)
			continue;
		if (have != 3 || v[0] < 0.0 || !(v[1] > 0.0) || v[2] < 0.0) {
			IBC_LOG_WARN(BENCH, "%s: %s needs alpha_us >= 0, beta_ns_per_B > 0, gamma_ns_per_B >= 0",
				     path, io_transport_names[t]);
			st = IBC_ERR_INVALID_ARG;
			goto out;
		}
		lp->link[t].alpha_s = v[0] * 1e-6;
		lp->link[t].beta_s_per_B = v[1] * 1e-9;
		lp->link[t].gamma_s_per_B = v[2] * 1e-9;
		lp->link[t].tree_bw_factor = 1.0;
		lp->have_link[t] = 1;
	}
	have = 0;
	for (k = 0; k < 7; k++) {
		snprintf(key, sizeof(key), "trainer.%s", tkey[k]);
		s = io_kv_get(kv, key);
		if (!s)
			continue;
		IBC_CHECK_GOTO(io_parse_double(key, s, &v[k]), st, out);
		have++;
	}
	if (have == 7 && v[1] > 0.0 && v[2] >= 0.0 && v[3] > 0.0) {
		lp->grad_bytes = v[0];
		lp->sample_compute_s = v[1];
		lp->step_fixed_s = v[2];
		lp->corun_factor = v[3];
		lp->batch = v[4];
		lp->threads_per_rank = (int)v[5];
		lp->overlap = v[6];
		lp->have_trainer = 1;
	} else if (have != 0) {
		IBC_LOG_WARN(BENCH,
			     "%s: the trainer.* keys come all seven or none, with sample_compute_s > 0, step_fixed_s >= 0, corun_factor > 0",
			     path);
		st = IBC_ERR_INVALID_ARG;
	}
out:
	ibc_free(kv);
	return st;
}
