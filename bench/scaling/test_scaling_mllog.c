/* SPDX-License-Identifier: MIT */
/*
 * test_scaling_mllog.c - the MLPerf log reader (mllog.c) on three excerpts
 * of published logs in bench/scaling/testdata/ (testdata/README.md says
 * which lines were kept) and on small synthetic logs for the edge cases;
 * MLPerf's scoring of a set of runs; the extracted table's writer and
 * reader. Every expected figure below is written as arithmetic on the
 * time stamps and counts of the fixture lines, not copied from the
 * program's output.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "mllog.h"
#include "tap.h"

static int near(double got, double want)
{
	return fabs(got - want) <= 1e-9 * (fabs(want) > 1.0 ? fabs(want) : 1.0);
}

#define CHECK_NEAR(got, want, what)                                                   \
	tap_ok(near((got), (want)), "%s: %s = %.9g (expected %.9g)", name, what,      \
	       (double)(got), (double)(want))

static const char *srcdir;

static int read_fixture(const char *file, double target, struct ibc_mllog_run *r)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/bench/scaling/testdata/%s", srcdir, file);
	return ibc_mllog_read(path, target, r) == IBC_OK;
}

/* Azure ND H200 v5 x64, llama2_70b_lora result_0.txt: 3 of its 10 blocks */
static void test_azure(void)
{
	const char *name = "azure excerpt";
	struct ibc_mllog_run r;
	double sps;

	if (!tap_ok(read_fixture("mllog-lora-azure.txt", 0.0, &r), "%s: read", name))
		return;
	tap_is_str(r.benchmark, "llama2_70b_lora", "%s: benchmark", name);
	tap_is_str(r.org, "Azure", "%s: org", name);
	tap_is_str(r.platform, "64xND_H200_v5", "%s: platform", name);
	tap_is_str(r.status, "success", "%s: status", name);
	tap_is_int(r.gbs, 64, "%s: gbs", name);
	CHECK_NEAR(r.lr, 0.0005, "lr");
	CHECK_NEAR(r.target, 0.925, "default target");
	tap_is_int(r.converged, 1, "%s: converged", name);
	CHECK_NEAR(r.samples, 7296, "samples to converge");
	CHECK_NEAR(r.trained_samples, 7296, "trained samples");
	tap_is_int(r.evals, 3, "%s: evaluations", name);
	CHECK_NEAR(r.first_eval_samples, 4224, "first evaluation");
	CHECK_NEAR(r.eval_interval_samples, 4608 - 4224, "evaluation interval");
	CHECK_NEAR(r.run_s, (1727145620200.0 - 1727145525635.0) / 1e3, "run_s");
	/* blocks after the first: 4224 -> 4608 and 6912 -> 7296 */
	sps = 768.0 / ((582693.0 - 579253.0 + 618552.0 - 615114.0) / 1e3);
	CHECK_NEAR(r.steady_sps, sps, "steady samples/s");
	CHECK_NEAR(r.step_s, 64.0 / sps, "step_s");
	CHECK_NEAR(r.eval_s, (579253.0 - 576647.0 + 584386.0 - 582694.0 + 620200.0 - 618552.0) / 1e3,
		   "eval_s");
	tap_is_int(r.have_first_step, 1, "%s: first progress line found", name);
	CHECK_NEAR(r.first_step_s, (531375.0 - 525635.0) / 1e3 - 640.0 / sps, "first_step_s");
	CHECK_NEAR(r.first_block_extra_s, (576647.0 - 525635.0) / 1e3 - 4224.0 / sps,
		   "first_block_extra_s");
	CHECK_NEAR(r.fixed_s, r.run_s - 7296.0 / sps - r.eval_s, "fixed_s");
	CHECK_NEAR(r.logged_sps, 111.91880204329068, "logged samples/s (median of 3)");
	tap_is_int(r.lines, 29, "%s: MLLOG lines", name);
	tap_is_int(r.bad_lines, 0, "%s: no bad line", name);
}

/*
 * Oracle 512 x H100, result_0.txt: rank-prefixed lines ("  0: "), two
 * non-MLLOG lines, one MLLOG line cut short (added), evaluation at 9216
 * just above the target (0.92512 > 0.925).
 */
static void test_oracle(void)
{
	const char *name = "oracle excerpt";
	struct ibc_mllog_run r;
	double sps;

	if (!tap_ok(read_fixture("mllog-lora-oracle.txt", 0.0, &r), "%s: read", name))
		return;
	tap_is_int(r.lines, 36, "%s: MLLOG lines", name);
	tap_is_int(r.bad_lines, 1, "%s: the cut line is skipped and counted", name);
	tap_is_int(r.converged, 1, "%s: converged", name);
	CHECK_NEAR(r.samples, 9600, "samples to converge (not 9216: 0.92512 > 0.925)");
	tap_is_int(r.evals, 4, "%s: evaluations", name);
	CHECK_NEAR(r.first_eval_samples, 1920, "first evaluation");
	CHECK_NEAR(r.run_s, (1728624600438.0 - 1728624467836.0) / 1e3, "run_s");
	sps = 3 * 384.0 / ((500112.0 - 496772.0 + 593489.0 - 590133.0 + 598668.0 - 595282.0) / 1e3);
	CHECK_NEAR(r.steady_sps, sps, "steady samples/s");
	CHECK_NEAR(r.eval_s, (2513.0 + 1885.0 + 1792.0 + 1770.0) / 1e3, "eval_s");
	CHECK_NEAR(r.first_step_s, (473385.0 - 467837.0) / 1e3 - 640.0 / sps, "first_step_s");
	CHECK_NEAR(r.first_block_extra_s, (494259.0 - 467837.0) / 1e3 - 1920.0 / sps,
		   "first_block_extra_s");
	CHECK_NEAR(r.fixed_s, r.run_s - 9600.0 / sps - r.eval_s, "fixed_s");
	CHECK_NEAR(r.logged_sps, (114.70569639680537 + 115.1060737748772) / 2,
		   "logged samples/s (median of 4)");
	CHECK_NEAR(r.lr, 0.00035, "lr");
	/* a stricter target: never reached */
	if (!tap_ok(read_fixture("mllog-lora-oracle.txt", 0.9, &r), "%s: read at target 0.9",
		    name))
		return;
	tap_ok(r.converged == 0 && r.samples == 0.0 && r.evals == 4,
	       "%s: target 0.9 not reached: converged %d, samples %.0f, evals %d", name,
	       r.converged, r.samples, r.evals);
	/* the first evaluation exactly at the target counts ("at or below") */
	if (!tap_ok(read_fixture("mllog-lora-oracle.txt", 1.0171401500701904, &r),
		    "%s: read at target 1.01714", name))
		return;
	tap_ok(r.converged == 1 && r.samples == 1920.0 && r.evals == 1,
	       "%s: target equal to the first evaluation: samples %.0f, evals %d", name,
	       r.samples, r.evals);
}

/* NVIDIA v3.1 GPT-3, 512 GPUs, result_0.txt: counts in tokens */
static void test_gpt3(void)
{
	const char *name = "gpt3 excerpt";
	struct ibc_mllog_run r;
	double sps;

	if (!tap_ok(read_fixture("mllog-gpt3-eos512.txt", 0.0, &r), "%s: read", name))
		return;
	CHECK_NEAR(r.target, 2.69, "default target");
	CHECK_NEAR(r.seq_len, 2048, "max_sequence_length");
	tap_is_int(r.gbs, 2048, "%s: gbs", name);
	tap_is_int(r.converged, 1, "%s: converged", name);
	CHECK_NEAR(r.samples, 1207959552.0 / 2048, "samples = tokens / 2048 (2.69078 > 2.69)");
	CHECK_NEAR(r.first_eval_samples, 50331648.0 / 2048, "first evaluation");
	CHECK_NEAR(r.eval_interval_samples, 50331648.0 / 2048, "evaluation interval");
	tap_is_int(r.evals, 4, "%s: evaluations", name);
	CHECK_NEAR(r.run_s, (1696469852164.0 - 1696466357352.0) / 1e3, "run_s");
	sps = 3 * 24576.0 / ((6636376.0 - 6503655.0 + 9693778.0 - 9560986.0 + 9839337.0 -
			      9706598.0) / 1e3);
	CHECK_NEAR(r.steady_sps, sps, "steady samples/s");
	CHECK_NEAR(r.eval_s, (12985.0 + 12844.0 + 12820.0 + 12826.0) / 1e3, "eval_s");
	CHECK_NEAR(r.first_step_s, (6368958.0 - 6357371.0) / 1e3 - 2048.0 / sps,
		   "first_step_s (first tracked_stats after one step)");
	/* median train_step_timing 11.0395 s; the tokens/s line after run_stop is ignored */
	CHECK_NEAR(r.logged_sps, 2048.0 / 11.039475679397583, "logged samples/s");
	CHECK_NEAR(r.fixed_s, r.run_s - 589824.0 / sps - r.eval_s, "fixed_s");
}

/* ---- synthetic logs ---- */

#define L(t, key, val, meta)                                                          \
	":::MLLOG {\"namespace\": \"\", \"time_ms\": " #t ", \"event_type\": \"X\", "   \
	"\"key\": \"" key "\", \"value\": " val ", \"metadata\": {" meta "}}\n"

static const char syn_head[] =
	L(1000, "submission_benchmark", "\"llama2_70b_lora\"", "\"file\": \"a\\\"b\\u00e9\"")
	L(1000, "global_batch_size", "8", "");

static const char syn_body[] =
	L(2000, "run_start", "null", "")
	L(2000, "block_start", "null", "\"samples_count\": 0")
	L(2500, "train_loss", "NaN", "\"samples_count\": 8, \"lr\": [1, {\"x\": -Infinity}]")
	L(4000, "block_stop", "null", "\"samples_count\": 16")
	L(4000, "eval_start", "null", "\"samples_count\": 16")
	L(4500, "eval_accuracy", "0.95", "\"samples_count\": 16")
	L(4500, "eval_stop", "null", "\"samples_count\": 16")
	L(4500, "block_start", "null", "\"samples_count\": 16")
	L(5500, "block_stop", "null", "\"samples_count\": 24")
	L(5500, "eval_start", "null", "\"samples_count\": 24")
	L(6000, "eval_accuracy", "0.92", "\"samples_count\": 24")
	L(6000, "eval_stop", "null", "\"samples_count\": 24")
	":::MLLOG {\"time_ms\": 6000, \"key\": \"junk\"} trailing\n"
	"plain line without a tag\n";

static const char syn_stop[] = L(6100, "run_stop", "0.92", "\"status\": \"success\"");

static int read_text(const char *text, double target, struct ibc_mllog_run *r)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	ibc_status_t st;

	if (!f)
		return -1;
	st = ibc_mllog_read_stream(f, "synthetic", target, r);
	fclose(f);
	return st == IBC_OK;
}

static void test_synthetic(void)
{
	const char *name = "synthetic";
	char buf[8192];
	struct ibc_mllog_run r;

	snprintf(buf, sizeof(buf), "%s%s%s", syn_head, syn_body, syn_stop);
	if (!tap_ok(read_text(buf, 0.0, &r) == 1, "%s: NaN, -Infinity, arrays, escapes parse",
		    name))
		return;
	tap_is_int(r.bad_lines, 1, "%s: trailing text after the object is a bad line", name);
	CHECK_NEAR(r.samples, 24, "samples");
	CHECK_NEAR(r.steady_sps, 8.0 / 1.0, "steady (second block only)");
	CHECK_NEAR(r.run_s, 4.1, "run_s");
	CHECK_NEAR(r.eval_s, 1.0, "eval_s");
	CHECK_NEAR(r.fixed_s, 4.1 - 24.0 / 8.0 - 1.0, "fixed_s");
	CHECK_NEAR(r.first_step_s, 0.5 - 8.0 / 8.0, "first_step_s");
	CHECK_NEAR(r.logged_sps, 0.0, "no tracked_stats: logged 0");

	memset(&r, 0x5a, sizeof(r));
	snprintf(buf, sizeof(buf), "%s%s", syn_head, syn_body);
	tap_ok(read_text(buf, 0.0, &r) == 0 && r.gbs == (long)0x5a5a5a5a5a5a5a5aL,
	       "%s: no run_stop is an error and the output stays untouched", name);
	snprintf(buf, sizeof(buf), "%s%s%s",
		 L(1000, "submission_benchmark", "\"llama2_70b_lora\"", ""), syn_body, syn_stop);
	tap_ok(read_text(buf, 0.0, &r) == 0, "%s: no global_batch_size is an error", name);
	snprintf(buf, sizeof(buf), "%s%s%s", L(1000, "global_batch_size", "8", ""), syn_body,
		 syn_stop);
	tap_ok(read_text(buf, 0.0, &r) == 0,
	       "%s: no submission_benchmark and no target given is an error", name);
	tap_ok(read_text(buf, 0.93, &r) == 1 && r.samples == 24.0,
	       "%s: an unknown benchmark with an explicit target is read", name);
	snprintf(buf, sizeof(buf), "%s%s%s", syn_head,
		 L(2000, "run_start", "null", "") L(3000, "eval_accuracy", "0.5",
						    "\"samples_count\": 8"), syn_stop);
	tap_ok(read_text(buf, 0.0, &r) == 0, "%s: no training block is an error", name);
}

/* ---- scoring ---- */

static void fake_run(struct ibc_mllog_run *r, double run_s, int converged)
{
	memset(r, 0, sizeof(*r));
	r->gbs = 64;
	r->converged = converged;
	r->target = 0.925;
	r->samples = converged ? 100.0 * run_s : 0.0;
	r->trained_samples = 100.0 * run_s;
	r->evals = (int)run_s;
	r->first_eval_samples = 1920;
	r->eval_interval_samples = 384;
	r->run_s = run_s;
	r->steady_sps = 200.0;
	r->eval_s = 0.1 * run_s;
	r->fixed_s = run_s - r->trained_samples / r->steady_sps - r->eval_s;
	r->first_step_s = 0.01 * run_s;
	r->have_first_step = 1;
}

static void test_score(void)
{
	static const double order[10] = { 7, 3, 10, 1, 5, 9, 2, 8, 4, 6 };
	struct ibc_mllog_run runs[10];
	struct ibc_mllog_score s;
	ibc_status_t st;
	int i;

	memset(&s, 0, sizeof(s));
	for (i = 0; i < 10; i++)
		fake_run(&runs[i], order[i], 1);
	st = ibc_mllog_score_runs(runs, 10, "ten", &s);
	tap_ok(st == IBC_OK && s.nscored == 8 && near(s.run_s, 5.5),
	       "score: 10 runs keep 8, mean of 2..9 = %.4f", s.run_s);
	tap_ok(near(s.train_s + s.eval_s + s.fixed_s, s.run_s),
	       "score: train + eval + fixed = run (%.6f)", s.train_s + s.eval_s + s.fixed_s);
	tap_ok(near(s.samples, 550.0) && near(s.evals, 5.5) && near(s.step_s, 64.0 / 200.0),
	       "score: samples %.1f, evals %.2f, step %.4f s", s.samples, s.evals, s.step_s);
	tap_ok(near(s.first_step_s, 0.055) && near(s.eval_each_s, 0.1),
	       "score: first step %.4f s, %.3f s per evaluation", s.first_step_s,
	       s.eval_each_s);
	st = ibc_mllog_score_runs(runs, 3, "three", &s);
	tap_ok(st == IBC_OK && s.nscored == 1 && near(s.run_s, 7.0),
	       "score: 3 runs (7, 3, 10) give the median %.1f", s.run_s);
	st = ibc_mllog_score_runs(runs, 2, "two", &s);
	tap_ok(st == IBC_OK && s.nscored == 2 && near(s.run_s, 5.0),
	       "score: 2 runs are both averaged (%.1f)", s.run_s);
	fake_run(&runs[3], 0.5, 0);     /* the fastest did not converge: dropped as slowest */
	st = ibc_mllog_score_runs(runs, 10, "one failed", &s);
	tap_ok(st == IBC_OK && near(s.run_s, (3 + 4 + 5 + 6 + 7 + 8 + 9 + 10) / 8.0),
	       "score: a run that did not converge is dropped at the slow end, so the fastest "
	       "converged one (2) is dropped too: %.4f", s.run_s);
	fake_run(&runs[0], 0.5, 0);
	tap_ok(ibc_mllog_score_runs(runs, 10, "two failed", &s) == IBC_ERR_INVALID_ARG,
	       "score: two runs that did not converge are an error");
	fake_run(&runs[0], 7, 1);
	runs[0].gbs = 128;
	tap_ok(ibc_mllog_score_runs(runs, 10, "mixed gbs", &s) == IBC_ERR_INVALID_ARG,
	       "score: runs with different GBS are an error");
	tap_ok(ibc_mllog_score_runs(runs, 0, "none", &s) == IBC_ERR_INVALID_ARG,
	       "score: no run is an error");
}

/* ---- the extracted table ---- */

static void test_table(void)
{
	static struct ibc_mllog_table t;
	struct ibc_mllog_run r;
	struct ibc_mllog_score s;
	char path[] = "/tmp/test_scaling_mllog.XXXXXX";
	char group[IBC_MLLOG_PATH_LEN];
	FILE *f;
	int fd, ok;

	memset(&s, 0, sizeof(s));
	ibc_mllog_group_of("org/repo@0123abc:A/results/sys/bench/result_0.txt", group,
			   sizeof(group));
	tap_is_str(group, "org/repo:A/results/sys/bench", "table: group of a repo@commit source");
	ibc_mllog_group_of("dir/sub/result_1.txt", group, sizeof(group));
	tap_is_str(group, "dir/sub", "table: group of a plain path");
	if (!read_fixture("mllog-lora-oracle.txt", 0.0, &r)) {
		tap_ok(0, "table: fixture read");
		return;
	}
	fd = mkstemp(path);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!tap_ok(f != NULL, "table: temporary file"))
		return;
	fprintf(f, "# comment\n");
	ibc_mllog_write_header(f);
	snprintf(r.platform, sizeof(r.platform), "a,b");     /* commas are replaced */
	ibc_mllog_write_row(f, "g1", "repo@c:g1/result_0.txt", &r);
	r.run_s += 1.0;
	ibc_mllog_write_row(f, "g1", "repo@c:g1/result_1.txt", &r);
	r.run_s += 1.0;
	r.have_first_step = 0;
	ibc_mllog_write_row(f, "g1", "repo@c:g1/result_2.txt", &r);
	fclose(f);
	ok = ibc_mllog_table_read(&t, path) == IBC_OK;
	tap_ok(ok && t.n == 3, "table: 3 rows read back (%d)", t.n);
	if (ok && t.n == 3) {
		tap_is_str(t.run[0].platform, "a;b", "table: comma in a text field written as ';'");
		tap_ok(fabs(t.run[1].run_s - r.run_s + 1.0) < 5e-4 &&
		       fabs(t.run[1].steady_sps - r.steady_sps) < 5e-5 &&
		       t.run[1].samples == 9600.0 && t.run[1].evals == 4 &&
		       t.run[1].have_first_step == 1 && t.run[2].have_first_step == 0,
		       "table: values survive at the printed precision");
		ok = ibc_mllog_table_score(&t, "g1", &s) == IBC_OK;
		tap_ok(ok && s.nscored == 1 && fabs(s.run_s - (r.run_s - 1.0)) < 5e-4,
		       "table: group g1 scores to its median run (%.3f s)", s.run_s);
		tap_ok(ibc_mllog_table_score(&t, "g2", &s) == IBC_ERR_INVALID_ARG,
		       "table: an unknown group is an error");
	}
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "group,source\nx,y\n");
		fclose(f);
		tap_ok(ibc_mllog_table_read(&t, path) == IBC_ERR_INVALID_ARG,
		       "table: a wrong column line is an error");
	}
	unlink(path);
}

int main(void)
{
	const char *top = getenv("top_srcdir");

	srcdir = top ? top : IBC_SCALING_SRCDIR "/../..";
	test_azure();
	test_oracle();
	test_gpt3();
	test_synthetic();
	test_score();
	test_table();
	return tap_done();
}
