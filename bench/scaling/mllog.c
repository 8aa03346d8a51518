/* SPDX-License-Identifier: MIT */
/*
 * mllog.c - MLPerf result logs to per-run figures (mllog.h). A log line is
 * ":::MLLOG {json}", possibly after a launcher prefix ("  0: "); the JSON
 * object carries time_ms, key, value and metadata. This file holds a small
 * JSON reader for exactly those objects (values: numbers incl. NaN and
 * Infinity, strings, true/false/null, objects whose members are read one
 * level deep), the reduction of one run, and MLPerf's scoring of a set.
 *
 * What a log shows (v4.1 llama2_70b_lora, v3.1 gpt3): run_start, then
 * block_start/block_stop around each training block, eval_start/
 * eval_accuracy/eval_stop after each block, run_stop. LoRA logs count
 * samples (metadata samples_count); the v3.1 GPT-3 logs count tokens
 * (epoch_num, first_epoch_num + epoch_count, step) and log
 * max_sequence_length, by which the counts are divided.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/util.h"
#include "mllog.h"

#define ML_KEY_LEN 48
#define ML_MAX_DEPTH 16

/* one MLLOG line; absent numbers are NaN */
struct ml_event {
	double time_ms;
	char key[ML_KEY_LEN];
	double value_num;           /* a numeric (or boolean) value */
	char value_str[IBC_MLLOG_TEXT_LEN];
	double throughput;          /* value.throughput, samples/s */
	double step_timing_s;       /* value.train_step_timing */
	double samples_count;       /* metadata */
	double epoch_num;
	double first_epoch_num;
	double epoch_count;
	double step;
	char status[16];
};

struct ml_json {
	const char *p;
	const char *end;
};

static void js_ws(struct ml_json *j)
{
	while (j->p < j->end && isspace((unsigned char)*j->p))
		j->p++;
}

static int js_lit(struct ml_json *j, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(j->end - j->p) < n || strncmp(j->p, lit, n) != 0)
		return 0;
	j->p += n;
	return 1;
}

/* a JSON string into @out (truncated to @len - 1 bytes; NULL: skip) */
static int js_string(struct ml_json *j, char *out, size_t len)
{
	size_t n = 0;
	char c;
	int k;

	if (j->p >= j->end || *j->p != '"')
		return -1;
	j->p++;
	while (j->p < j->end && *j->p != '"') {
		c = *j->p++;
		if ((unsigned char)c < 0x20)
			return -1;
		if (c == '\\') {
			if (j->p >= j->end)
				return -1;
			c = *j->p++;
			switch (c) {
			case '"': case '\\': case '/': break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'u':
				for (k = 0; k < 4; k++)
					if (j->p >= j->end || !isxdigit((unsigned char)*j->p++))
						return -1;
				c = '?';
				break;
			default:
				return -1;
			}
		}
		if (out && n + 1 < len)
			out[n++] = c;
	}
	if (j->p >= j->end)
		return -1;
	j->p++;
	if (out && len)
		out[n] = '\0';
	return 0;
}

/* a number, or Python's NaN / Infinity / -Infinity */
static int js_number(struct ml_json *j, double *v_p)
{
	char buf[64];
	const char *s = j->p;
	char *e;
	size_t n;

	if (js_lit(j, "NaN")) {
		*v_p = NAN;
		return 0;
	}
	if (js_lit(j, "Infinity")) {
		*v_p = INFINITY;
		return 0;
	}
	if (js_lit(j, "-Infinity")) {
		*v_p = -INFINITY;
		return 0;
	}
	while (j->p < j->end && strchr("+-0123456789.eE", *j->p))
		j->p++;
	n = (size_t)(j->p - s);
	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	*v_p = strtod(buf, &e);
	if (errno == ERANGE || e != buf + n)
		return -1;
	return 0;
}

static int js_skip(struct ml_json *j, int depth);

/* the members of an object; @member is called with the reader on the value */
static int js_object(struct ml_json *j, int depth,
		     int (*member)(struct ml_json *j, const char *name, void *arg, int depth),
		     void *arg)
{
	char name[ML_KEY_LEN];

	if (depth > ML_MAX_DEPTH || j->p >= j->end || *j->p != '{')
		return -1;
	j->p++;
	js_ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return 0;
	}
	for (;;) {
		js_ws(j);
		if (js_string(j, name, sizeof(name)) != 0)
			return -1;
		js_ws(j);
		if (j->p >= j->end || *j->p != ':')
			return -1;
		j->p++;
		js_ws(j);
		if ((member ? member(j, name, arg, depth + 1) : js_skip(j, depth + 1)) != 0)
			return -1;
		js_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == '}') {
			j->p++;
			return 0;
		}
		return -1;
	}
}

static int js_skip(struct ml_json *j, int depth)
{
	double v;

	if (depth > ML_MAX_DEPTH || j->p >= j->end)
		return -1;
	switch (*j->p) {
	case '"':
		return js_string(j, NULL, 0);
	case '{':
		return js_object(j, depth, NULL, NULL);
	case '[':
		j->p++;
		js_ws(j);
		if (j->p < j->end && *j->p == ']') {
			j->p++;
			return 0;
		}
		for (;;) {
			js_ws(j);
			if (js_skip(j, depth + 1) != 0)
				return -1;
			js_ws(j);
			if (j->p < j->end && *j->p == ',') {
				j->p++;
				continue;
			}
			if (j->p < j->end && *j->p == ']') {
				j->p++;
				return 0;
			}
			return -1;
		}
	default:
		if (js_lit(j, "true") || js_lit(j, "false") || js_lit(j, "null"))
			return 0;
		return js_number(j, &v);
	}
}

/* a member that must be a number (or null, left NaN) */
static int js_num_member(struct ml_json *j, double *v_p)
{
	if (js_lit(j, "null"))
		return 0;
	return js_number(j, v_p);
}

static int ml_value_member(struct ml_json *j, const char *name, void *arg, int depth)
{
	struct ml_event *ev = arg;

	if (strcmp(name, "throughput") == 0)
		return js_num_member(j, &ev->throughput);
	if (strcmp(name, "train_step_timing") == 0)
		return js_num_member(j, &ev->step_timing_s);
	return js_skip(j, depth);
}

static int ml_meta_member(struct ml_json *j, const char *name, void *arg, int depth)
{
	struct ml_event *ev = arg;

	if (strcmp(name, "samples_count") == 0)
		return js_num_member(j, &ev->samples_count);
	if (strcmp(name, "epoch_num") == 0)
		return js_num_member(j, &ev->epoch_num);
	if (strcmp(name, "first_epoch_num") == 0)
		return js_num_member(j, &ev->first_epoch_num);
	if (strcmp(name, "epoch_count") == 0)
		return js_num_member(j, &ev->epoch_count);
	if (strcmp(name, "step") == 0)
		return js_num_member(j, &ev->step);
	if (strcmp(name, "status") == 0 && j->p < j->end && *j->p == '"')
		return js_string(j, ev->status, sizeof(ev->status));
	return js_skip(j, depth);
}

static int ml_top_member(struct ml_json *j, const char *name, void *arg, int depth)
{
	struct ml_event *ev = arg;

	if (strcmp(name, "time_ms") == 0)
		return js_number(j, &ev->time_ms);
	if (strcmp(name, "key") == 0)
		return js_string(j, ev->key, sizeof(ev->key));
	if (strcmp(name, "metadata") == 0)
		return j->p < j->end && *j->p == '{' ?
			       js_object(j, depth, ml_meta_member, ev) : js_skip(j, depth);
	if (strcmp(name, "value") != 0)
		return js_skip(j, depth);
	if (j->p >= j->end)
		return -1;
	if (*j->p == '{')
		return js_object(j, depth, ml_value_member, ev);
	if (*j->p == '"')
		return js_string(j, ev->value_str, sizeof(ev->value_str));
	if (js_lit(j, "true")) {
		ev->value_num = 1.0;
		return 0;
	}
	if (js_lit(j, "false")) {
		ev->value_num = 0.0;
		return 0;
	}
	if (js_lit(j, "null"))
		return 0;
	if (*j->p == '[')
		return js_skip(j, depth);
	return js_number(j, &ev->value_num);
}

/*
 * ml_parse_line() - Parse the JSON object after ":::MLLOG" in @line.
 * Return: 1 for an event in @ev_p, 0 for a line without ":::MLLOG", -1 for
 * an MLLOG line that is not a complete object with time_ms and key.
 */
static int ml_parse_line(const char *line, size_t len, struct ml_event *ev_p)
{
	static const char tag[] = ":::MLLOG";
	struct ml_json j;
	struct ml_event ev;
	const char *s = strstr(line, tag);

	if (!s)
		return 0;
	memset(&ev, 0, sizeof(ev));
	ev.time_ms = NAN;
	ev.value_num = NAN;
	ev.throughput = NAN;
	ev.step_timing_s = NAN;
	ev.samples_count = NAN;
	ev.epoch_num = NAN;
	ev.first_epoch_num = NAN;
	ev.epoch_count = NAN;
	ev.step = NAN;
	j.p = s + sizeof(tag) - 1;
	j.end = line + len;
	js_ws(&j);
	if (js_object(&j, 0, ml_top_member, &ev) != 0)
		return -1;
	js_ws(&j);
	if (j.p != j.end || isnan(ev.time_ms) || ev.key[0] == '\0')
		return -1;
	*ev_p = ev;
	return 1;
}

/**
 * ibc_mllog_default_target() - MLPerf quality target of a benchmark.
 * @benchmark: submission_benchmark value.
 *
 * llama2_70b_lora: evaluation loss 0.925; gpt3: log perplexity 2.69 (both
 * "at or below"; MLCommons training_policies, training_rules.adoc, quality
 * table of v3.1 and v4.1).
 * Return: the target; 0 when the benchmark is not known here.
 */
double ibc_mllog_default_target(const char *benchmark)
{
	if (strcmp(benchmark, "llama2_70b_lora") == 0)
		return 0.925;
	if (strcmp(benchmark, "gpt3") == 0)
		return 2.69;
	return 0.0;
}

/* an event's progress in the log's unit; NaN when it has none */
static double ml_count(const struct ml_event *e)
{
	if (!isnan(e->samples_count))
		return e->samples_count;
	if (strcmp(e->key, "block_stop") == 0 && !isnan(e->first_epoch_num) &&
	    !isnan(e->epoch_count))
		return e->first_epoch_num + e->epoch_count;
	if (strcmp(e->key, "block_start") == 0 && !isnan(e->first_epoch_num))
		return e->first_epoch_num;
	if (!isnan(e->epoch_num))
		return e->epoch_num;
	return e->step;
}

static int ml_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct ml_block {
	double t0_ms, t1_ms;   /* block_start, block_stop */
	double c0, c1;         /* samples at both */
};

/* header strings and numbers: the first occurrence wins */
static void ml_header(const struct ml_event *e, struct ibc_mllog_run *r, int *have_gbs)
{
	if (strcmp(e->key, "submission_benchmark") == 0 && !r->benchmark[0])
		snprintf(r->benchmark, sizeof(r->benchmark), "%s", e->value_str);
	else if (strcmp(e->key, "submission_org") == 0 && !r->org[0])
		snprintf(r->org, sizeof(r->org), "%s", e->value_str);
	else if (strcmp(e->key, "submission_platform") == 0 && !r->platform[0])
		snprintf(r->platform, sizeof(r->platform), "%s", e->value_str);
	else if (strcmp(e->key, "global_batch_size") == 0 && !*have_gbs && e->value_num > 0.0) {
		r->gbs = (long)e->value_num;
		*have_gbs = 1;
	} else if (strcmp(e->key, "max_sequence_length") == 0 && r->seq_len == 0.0 &&
		   e->value_num > 0.0) {
		r->seq_len = e->value_num;
	} else if (strcmp(e->key, "opt_base_learning_rate") == 0 && r->lr == 0.0 &&
		   !isnan(e->value_num)) {
		r->lr = e->value_num;
	}
}

/* reduce the events of one log (see struct ibc_mllog_run) */
static ibc_status_t ml_reduce(const struct ml_event *ev, long n, const char *name,
			      double target, struct ibc_mllog_run *r)
{
	struct ml_block *blk = NULL;
	double *tput = NULL;
	double unit = 1.0;
	double eval_t0 = NAN;
	double c, t_train, c_train;
	long i, i_start = -1, i_stop = -1;
	int nblk = 0, ntput = 0, open = 0, have_gbs = 0, counts_samples = 0, k;
	struct ml_block cur = { 0 };
	ibc_status_t st = IBC_OK;

	for (i = 0; i < n; i++) {
		ml_header(&ev[i], r, &have_gbs);
		if (!isnan(ev[i].samples_count))
			counts_samples = 1;
		if (strcmp(ev[i].key, "run_start") == 0 && i_start < 0)
			i_start = i;
		else if (strcmp(ev[i].key, "run_stop") == 0 && i_start >= 0 && i_stop < 0)
			i_stop = i;
	}
	if (i_start < 0 || i_stop < 0 || !have_gbs || r->gbs < 1) {
		IBC_LOG_WARN(BENCH, "%s: no %s line", name, i_start < 0 ? "run_start" :
			     i_stop < 0 ? "run_stop after run_start" : "global_batch_size");
		return IBC_ERR_INVALID_ARG;
	}
	if (target <= 0.0)
		target = ibc_mllog_default_target(r->benchmark);
	if (!(target > 0.0)) {
		IBC_LOG_WARN(BENCH, "%s: no quality target known for benchmark '%s'", name,
			     r->benchmark);
		return IBC_ERR_INVALID_ARG;
	}
	r->target = target;
	if (!counts_samples && r->seq_len > 0.0)
		unit = r->seq_len;      /* the log counts tokens */
	snprintf(r->status, sizeof(r->status), "%s", ev[i_stop].status);
	r->run_s = (ev[i_stop].time_ms - ev[i_start].time_ms) / 1e3;
	blk = ibc_calloc((size_t)n, sizeof(*blk), "mllog blocks");
	tput = ibc_calloc((size_t)n, sizeof(*tput), "mllog throughput");
	if (!blk || !tput) {
		st = IBC_ERR_NO_MEMORY;
		goto out;
	}
	for (i = i_start + 1; i < i_stop; i++) {
		c = ml_count(&ev[i]) / unit;
		if (strcmp(ev[i].key, "block_start") == 0 && !isnan(c)) {
			cur.t0_ms = ev[i].time_ms;
			cur.c0 = c;
			open = 1;
		} else if (strcmp(ev[i].key, "block_stop") == 0 && open && !isnan(c)) {
			cur.t1_ms = ev[i].time_ms;
			cur.c1 = c;
			blk[nblk++] = cur;
			open = 0;
		} else if (strcmp(ev[i].key, "eval_start") == 0) {
			eval_t0 = ev[i].time_ms;
		} else if (strcmp(ev[i].key, "eval_stop") == 0 && !isnan(eval_t0)) {
			r->eval_s += (ev[i].time_ms - eval_t0) / 1e3;
			eval_t0 = NAN;
		} else if (strcmp(ev[i].key, "eval_accuracy") == 0 && !isnan(c) &&
			   !r->converged) {
			r->evals++;
			if (r->evals == 1)
				r->first_eval_samples = c;
			else if (r->evals == 2)
				r->eval_interval_samples = c - r->first_eval_samples;
			if (ev[i].value_num <= target) {
				r->converged = 1;
				r->samples = c;
			}
		} else if (strcmp(ev[i].key, "tracked_stats") == 0) {
			if (ev[i].throughput > 0.0)
				tput[ntput++] = ev[i].throughput;
			else if (ev[i].step_timing_s > 0.0)
				tput[ntput++] = r->gbs / ev[i].step_timing_s;
		}
	}
	if (nblk == 0) {
		IBC_LOG_WARN(BENCH, "%s: no complete training block (block_start .. block_stop)",
			     name);
		st = IBC_ERR_INVALID_ARG;
		goto out;
	}
	t_train = 0.0;
	c_train = 0.0;
	for (k = nblk > 1 ? 1 : 0; k < nblk; k++) {
		t_train += (blk[k].t1_ms - blk[k].t0_ms) / 1e3;
		c_train += blk[k].c1 - blk[k].c0;
	}
	if (!(t_train > 0.0) || !(c_train > 0.0)) {
		IBC_LOG_WARN(BENCH, "%s: training blocks of %.3f s and %.0f samples", name,
			     t_train, c_train);
		st = IBC_ERR_INVALID_ARG;
		goto out;
	}
	r->steady_sps = c_train / t_train;
	r->step_s = r->gbs / r->steady_sps;
	r->trained_samples = blk[nblk - 1].c1;
	r->first_block_extra_s = (blk[0].t1_ms - blk[0].t0_ms) / 1e3 -
				 (blk[0].c1 - blk[0].c0) / r->steady_sps;
	r->fixed_s = r->run_s - r->trained_samples / r->steady_sps - r->eval_s;
	for (i = i_start + 1; i < i_stop; i++) {
		if (ev[i].time_ms <= blk[0].t0_ms || ev[i].time_ms > blk[0].t1_ms)
			continue;
		if (strcmp(ev[i].key, "train_loss") != 0 && strcmp(ev[i].key, "tracked_stats") != 0)
			continue;
		c = ml_count(&ev[i]) / unit;
		if (isnan(c) || c <= blk[0].c0)
			continue;
		r->first_step_s = (ev[i].time_ms - blk[0].t0_ms) / 1e3 -
				  (c - blk[0].c0) / r->steady_sps;
		r->have_first_step = 1;
		break;
	}
	if (ntput > 0) {
		qsort(tput, (size_t)ntput, sizeof(*tput), ml_cmp_double);
		r->logged_sps = ntput % 2 ? tput[ntput / 2] :
				0.5 * (tput[ntput / 2 - 1] + tput[ntput / 2]);
	}
out:
	ibc_free(tput);
	ibc_free(blk);
	return st;
}

/**
 * ibc_mllog_read_stream() - Reduce one MLPerf result log.
 * @f:      [in]  the log, read to its end.
 * @name:   [in]  name used in error messages (the path).
 * @target: quality target (eval_accuracy at or below it counts as
 *          converged); <= 0 picks ibc_mllog_default_target().
 * @run_p:  [out] the run's figures, written only on success.
 *
 * Lines without ":::MLLOG" are ignored; MLLOG lines that are not a complete
 * JSON object with time_ms and key are skipped and counted in @bad_lines.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (logged) when run_start, run_stop,
 *         global_batch_size, a training block or a known target is
 *         missing; IBC_ERR_SYSTEM on a read error; IBC_ERR_NO_MEMORY.
 */
ibc_status_t ibc_mllog_read_stream(FILE *f, const char *name, double target,
				   struct ibc_mllog_run *run_p)
{
	struct ibc_mllog_run r;
	struct ml_event *ev = NULL, *grown;
	struct ml_event e;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long n = 0, max = 0;
	int ret;
	ibc_status_t st = IBC_OK;

	memset(&r, 0, sizeof(r));
	errno = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		ret = ml_parse_line(line, (size_t)len, &e);
		if (ret == 0)
			continue;
		r.lines++;
		if (ret < 0) {
			r.bad_lines++;
			continue;
		}
		if (n == max) {
			max = max ? 2 * max : 256;
			grown = ibc_malloc((size_t)max * sizeof(*ev), "mllog events");
			if (!grown) {
				st = IBC_ERR_NO_MEMORY;
				goto out;
			}
			if (n)
				memcpy(grown, ev, (size_t)n * sizeof(*ev));
			ibc_free(ev);
			ev = grown;
		}
		ev[n++] = e;
	}
	if (ferror(f)) {
		IBC_LOG_WARN(BENCH, "%s: read error: %s", name, strerror(errno));
		st = IBC_ERR_SYSTEM;
		goto out;
	}
	IBC_CHECK_GOTO(ml_reduce(ev, n, name, target, &r), st, out);
	if (r.bad_lines)
		IBC_LOG_WARN(BENCH, "%s: %ld of %ld MLLOG lines did not parse and were skipped",
			     name, r.bad_lines, r.lines);
	*run_p = r;
out:
	free(line);
	ibc_free(ev);
	return st;
}

/**
 * ibc_mllog_read() - ibc_mllog_read_stream() on the file at @path.
 * @path:   [in]  result log.
 * @target: quality target, <= 0 for the benchmark's default.
 * @run_p:  [out] the run's figures, written only on success.
 * Return: as ibc_mllog_read_stream(); IBC_ERR_SYSTEM when @path cannot be opened.
 */
ibc_status_t ibc_mllog_read(const char *path, double target, struct ibc_mllog_run *run_p)
{
	FILE *f = fopen(path, "r");
	ibc_status_t st;

	if (!f) {
		IBC_LOG_WARN(BENCH, "cannot open %s: %s", path, strerror(errno));
		return IBC_ERR_SYSTEM;
	}
	st = ibc_mllog_read_stream(f, path, target, run_p);
	fclose(f);
	return st;
}

/* scored time for ranking: a run that did not converge ranks last */
static double ml_rank_s(const struct ibc_mllog_run *r)
{
	return r->converged ? r->run_s : INFINITY;
}

/**
 * ibc_mllog_score_runs() - Score the runs of one system as MLPerf does.
 * @runs:    [in]  @n reduced runs of one benchmark on one system.
 * @n:       1 .. IBC_MLLOG_MAX_RUNS.
 * @name:    [in]  the set's name for messages.
 * @score_p: [out] means over the scored runs, written only on success.
 *
 * With n >= 3 the fastest and the slowest run are dropped (a run that did
 * not converge ranks as the slowest) and the other n - 2 averaged
 * (MLCommons training_rules.adoc, "Benchmark results"; for 3 runs this is
 * the median). With fewer runs all are averaged.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (logged) for a bad @n, a scored run
 *         that did not converge, or runs whose GBS or first evaluation differ.
 */
ibc_status_t ibc_mllog_score_runs(const struct ibc_mllog_run *runs, int n, const char *name,
				  struct ibc_mllog_score *score_p)
{
	struct ibc_mllog_score s;
	int idx[IBC_MLLOG_MAX_RUNS];
	const struct ibc_mllog_run *r;
	double trained = 0.0;
	int i, j, t, lo, hi, nfs = 0;

	if (n < 1 || n > IBC_MLLOG_MAX_RUNS) {
		IBC_LOG_WARN(BENCH, "%s: %d runs, expected 1 .. %d", name, n, IBC_MLLOG_MAX_RUNS);
		return IBC_ERR_INVALID_ARG;
	}
	for (i = 0; i < n; i++) {
		idx[i] = i;
		if (runs[i].gbs != runs[0].gbs ||
		    runs[i].first_eval_samples != runs[0].first_eval_samples) {
			IBC_LOG_WARN(BENCH, "%s: run %d has gbs %ld and first evaluation at %.0f samples, run 0 %ld and %.0f",
				     name, i, runs[i].gbs, runs[i].first_eval_samples, runs[0].gbs,
				     runs[0].first_eval_samples);
			return IBC_ERR_INVALID_ARG;
		}
	}
	for (i = 1; i < n; i++)         /* insertion sort by scored time, stable */
		for (j = i; j > 0 && ml_rank_s(&runs[idx[j - 1]]) > ml_rank_s(&runs[idx[j]]); j--) {
			t = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
	lo = n >= 3 ? 1 : 0;
	hi = n >= 3 ? n - 1 : n;
	memset(&s, 0, sizeof(s));
	s.nruns = n;
	s.nscored = hi - lo;
	s.gbs = runs[0].gbs;
	s.first_eval_samples = runs[0].first_eval_samples;
	s.eval_interval_samples = runs[0].eval_interval_samples;
	for (i = lo; i < hi; i++) {
		r = &runs[idx[i]];
		if (!r->converged) {
			IBC_LOG_WARN(BENCH, "%s: a scored run did not reach the target %.4g", name,
				     r->target);
			return IBC_ERR_INVALID_ARG;
		}
		s.run_s += r->run_s;
		s.samples += r->samples;
		s.evals += r->evals;
		s.train_s += r->trained_samples / r->steady_sps;
		s.eval_s += r->eval_s;
		/* the residual again, so that the means add up exactly even when
		 * the run's figures were rounded in the extracted table */
		s.fixed_s += r->run_s - r->trained_samples / r->steady_sps - r->eval_s;
		s.first_block_extra_s += r->first_block_extra_s;
		trained += r->trained_samples;
		if (r->have_first_step) {
			s.first_step_s += r->first_step_s;
			nfs++;
		}
	}
	s.run_s /= s.nscored;
	s.samples /= s.nscored;
	s.evals /= s.nscored;
	s.train_s /= s.nscored;
	s.eval_s /= s.nscored;
	s.fixed_s /= s.nscored;
	s.first_block_extra_s /= s.nscored;
	trained /= s.nscored;
	s.first_step_s = nfs ? s.first_step_s / nfs : 0.0;
	s.sample_s = s.train_s / trained;
	s.step_s = s.sample_s * s.gbs;
	s.eval_each_s = s.evals > 0.0 ? s.eval_s / s.evals : 0.0;
	*score_p = s;
	return IBC_OK;
}

/**
 * ibc_mllog_group_of() - The group of a log: its source without the commit
 * and without the file name ("repo@abc:dir/result_0.txt" -> "repo:dir").
 * @source: [in]  source string.
 * @group:  [out] @len bytes.
 * @len:    size of @group.
 */
void ibc_mllog_group_of(const char *source, char *group, size_t len)
{
	const char *at = strchr(source, '@');
	const char *colon = strchr(source, ':');
	const char *slash = strrchr(source, '/');

	if (at && colon && at < colon)
		snprintf(group, len, "%.*s%.*s", (int)(at - source), source,
			 slash && slash > colon ? (int)(slash - colon) : (int)strlen(colon), colon);
	else
		snprintf(group, len, "%.*s", slash ? (int)(slash - source) : (int)strlen(source),
			 source);
}

static const char *const ml_columns[] = {
	"group", "source", "benchmark", "org", "platform", "status", "gbs", "seq_len", "lr",
	"target", "converged", "samples", "trained_samples", "evals", "first_eval_samples",
	"eval_interval_samples", "run_s", "steady_sps", "logged_sps", "step_s", "eval_s",
	"first_step_s", "first_block_extra_s", "fixed_s", "lines", "bad_lines",
};

#define ML_NCOLS ((int)IBC_ARRAY_SIZE(ml_columns))

/**
 * ibc_mllog_write_header() - The column line of the extracted table.
 * @f: [in] output.
 */
void ibc_mllog_write_header(FILE *f)
{
	int i;

	for (i = 0; i < ML_NCOLS; i++)
		fprintf(f, "%s%s", i ? "," : "", ml_columns[i]);
	fputc('\n', f);
}

/* a text field without commas or line breaks */
static void ml_put_text(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(*s == ',' ? ';' : *s == '\n' || *s == '\r' ? ' ' : *s, f);
	fputc(',', f);
}

/**
 * ibc_mllog_write_row() - One run as a line of the extracted table.
 * @f:      [in] output.
 * @group:  [in] its group (ibc_mllog_group_of()).
 * @source: [in] where the log comes from.
 * @r:      [in] the run.
 *
 * Times are printed to the millisecond (the logs' resolution), rates to
 * 1e-4 samples/s; first_step_s is empty when the log had no progress line
 * in its first block.
 */
void ibc_mllog_write_row(FILE *f, const char *group, const char *source,
			 const struct ibc_mllog_run *r)
{
	ml_put_text(f, group);
	ml_put_text(f, source);
	ml_put_text(f, r->benchmark);
	ml_put_text(f, r->org);
	ml_put_text(f, r->platform);
	ml_put_text(f, r->status);
	fprintf(f, "%ld,%.0f,%.6g,%.6g,%d,%.0f,%.0f,%d,%.0f,%.0f,%.3f,%.4f,%.4f,%.4f,%.3f,",
		r->gbs, r->seq_len, r->lr, r->target, r->converged, r->samples,
		r->trained_samples, r->evals, r->first_eval_samples, r->eval_interval_samples,
		r->run_s, r->steady_sps, r->logged_sps, r->step_s, r->eval_s);
	if (r->have_first_step)
		fprintf(f, "%.3f", r->first_step_s);
	fprintf(f, ",%.3f,%.3f,%ld,%ld\n", r->first_block_extra_s, r->fixed_s, r->lines,
		r->bad_lines);
}

static ibc_status_t ml_field_num(const char *path, int lineno, const char *col, const char *s,
				 double *v_p)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end != '\0') {
		IBC_LOG_WARN(BENCH, "%s:%d: column %s: '%s' is not a number", path, lineno, col, s);
		return IBC_ERR_INVALID_ARG;
	}
	*v_p = v;
	return IBC_OK;
}

/* parse the fields of one table line into @t's next row */
static ibc_status_t ml_table_row(struct ibc_mllog_table *t, char **fld, const char *path,
				 int lineno)
{
	struct ibc_mllog_run *r = &t->run[t->n];
	double v[ML_NCOLS];
	int i;

	memset(r, 0, sizeof(*r));
	for (i = 6; i < ML_NCOLS; i++) {
		if (i == 21 && fld[i][0] == '\0') {
			v[i] = 0.0;
			continue;
		}
		IBC_CHECK(ml_field_num(path, lineno, ml_columns[i], fld[i], &v[i]));
	}
	snprintf(t->group[t->n], IBC_MLLOG_PATH_LEN, "%s", fld[0]);
	snprintf(t->source[t->n], IBC_MLLOG_PATH_LEN, "%s", fld[1]);
	snprintf(r->benchmark, sizeof(r->benchmark), "%s", fld[2]);
	snprintf(r->org, sizeof(r->org), "%s", fld[3]);
	snprintf(r->platform, sizeof(r->platform), "%s", fld[4]);
	snprintf(r->status, sizeof(r->status), "%s", fld[5]);
	r->gbs = (long)v[6];
	r->seq_len = v[7];
	r->lr = v[8];
	r->target = v[9];
	r->converged = (int)v[10];
	r->samples = v[11];
	r->trained_samples = v[12];
	r->evals = (int)v[13];
	r->first_eval_samples = v[14];
	r->eval_interval_samples = v[15];
	r->run_s = v[16];
	r->steady_sps = v[17];
	r->logged_sps = v[18];
	r->step_s = v[19];
	r->eval_s = v[20];
	r->first_step_s = v[21];
	r->have_first_step = fld[21][0] != '\0';
	r->first_block_extra_s = v[22];
	r->fixed_s = v[23];
	r->lines = (long)v[24];
	r->bad_lines = (long)v[25];
	if (r->gbs < 1 || !(r->steady_sps > 0.0) || !(r->run_s > 0.0)) {
		IBC_LOG_WARN(BENCH, "%s:%d: a run needs gbs >= 1, steady_sps > 0, run_s > 0", path,
			     lineno);
		return IBC_ERR_INVALID_ARG;
	}
	t->n++;
	return IBC_OK;
}

/**
 * ibc_mllog_table_read() - Read the extracted table written by
 * "ibc_scaling mllog" (ibc_mllog_write_header() and _row()).
 * @t:    [out] the rows, zeroed first.
 * @path: [in]  mllog-runs.csv.
 *
 * "#" lines are comments; the first other line must be the column line.
 * Return: IBC_OK; IBC_ERR_SYSTEM when the file cannot be opened;
 *         IBC_ERR_INVALID_ARG (logged with the line) for malformed content
 *         or more than IBC_MLLOG_TABLE_MAX rows.
 */
ibc_status_t ibc_mllog_table_read(struct ibc_mllog_table *t, const char *path)
{
	char line[2048];
	char *fld[ML_NCOLS + 1];
	char *p, *e;
	FILE *f;
	int lineno = 0, header = 0, n, i;
	ibc_status_t st = IBC_OK;

	memset(t, 0, sizeof(*t));
	f = fopen(path, "r");
	if (!f) {
		IBC_LOG_WARN(BENCH, "cannot open %s: %s", path, strerror(errno));
		return IBC_ERR_SYSTEM;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		e = line + strlen(line);
		while (e > line && (e[-1] == '\n' || e[-1] == '\r'))
			*--e = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		for (n = 0, p = line; n <= ML_NCOLS; n++) {
			fld[n] = p;
			p = strchr(p, ',');
			if (!p)
				break;
			*p++ = '\0';
		}
		if (n + 1 != ML_NCOLS) {
			IBC_LOG_WARN(BENCH, "%s:%d: %d fields, expected %d", path, lineno,
				     n + 1 > ML_NCOLS ? ML_NCOLS + 1 : n + 1, ML_NCOLS);
			st = IBC_ERR_INVALID_ARG;
			goto out;
		}
		if (!header) {
			for (i = 0; i < ML_NCOLS; i++)
				if (strcmp(fld[i], ml_columns[i]) != 0) {
					IBC_LOG_WARN(BENCH, "%s:%d: column %d is '%s', expected '%s'",
						     path, lineno, i + 1, fld[i], ml_columns[i]);
					st = IBC_ERR_INVALID_ARG;
					goto out;
				}
			header = 1;
			continue;
		}
		if (t->n == IBC_MLLOG_TABLE_MAX) {
			IBC_LOG_WARN(BENCH, "%s: more than %d runs", path, IBC_MLLOG_TABLE_MAX);
			st = IBC_ERR_INVALID_ARG;
			goto out;
		}
		IBC_CHECK_GOTO(ml_table_row(t, fld, path, lineno), st, out);
	}
	if (!header) {
		IBC_LOG_WARN(BENCH, "%s: no column line", path);
		st = IBC_ERR_INVALID_ARG;
	}
out:
	fclose(f);
	return st;
}

/**
 * ibc_mllog_table_score() - Score the runs of one group of the table.
 * @t:       [in]  table.
 * @group:   [in]  group name (column "group").
 * @score_p: [out] as ibc_mllog_score_runs().
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (logged) when the group has no run or
 *         more than IBC_MLLOG_MAX_RUNS, or as ibc_mllog_score_runs().
 */
ibc_status_t ibc_mllog_table_score(const struct ibc_mllog_table *t, const char *group,
				   struct ibc_mllog_score *score_p)
{
	struct ibc_mllog_run runs[IBC_MLLOG_MAX_RUNS];
	int i, n = 0;

	for (i = 0; i < t->n; i++) {
		if (strcmp(t->group[i], group) != 0)
			continue;
		if (n == IBC_MLLOG_MAX_RUNS) {
			IBC_LOG_WARN(BENCH, "group %s: more than %d runs", group,
				     IBC_MLLOG_MAX_RUNS);
			return IBC_ERR_INVALID_ARG;
		}
		runs[n++] = t->run[i];
	}
	if (n == 0) {
		IBC_LOG_WARN(BENCH, "group %s: no run in the extracted table", group);
		return IBC_ERR_INVALID_ARG;
	}
	return ibc_mllog_score_runs(runs, n, group, score_p);
}
