/* SPDX-License-Identifier: MIT */
/*
 * mllog.h - reads MLPerf Training result logs (the ":::MLLOG {json}" lines of
 * mlcommons/training_results_* result_N.txt) and reduces each run to the
 * figures a time-to-train decomposition needs; scores a set of runs the way
 * MLPerf does (drop the fastest and the slowest, mean of the rest).
 * Implemented in mllog.c (no dependency on the scaling model).
 *
 * Units: seconds (_s), samples (sequences; GPT-3 logs count tokens, which
 * are divided by the logged max_sequence_length), samples per second (_sps).
 */
#ifndef IBC_MLLOG_H
#define IBC_MLLOG_H

#include <stdio.h>

#include "ibcoll.h"

#define IBC_MLLOG_TEXT_LEN 64
#define IBC_MLLOG_MAX_RUNS 32
#define IBC_MLLOG_TABLE_MAX 128
#define IBC_MLLOG_PATH_LEN 256

/**
 * struct ibc_mllog_run - one result log, reduced.
 * @benchmark, @org, @platform: submission_benchmark, _org, _platform.
 * @status:        run_stop's metadata status ("success", "aborted"; "" if none).
 * @gbs:           global_batch_size, samples per step.
 * @seq_len:       max_sequence_length (0 when not logged).
 * @lr:            opt_base_learning_rate (0 when not logged).
 * @target:        quality target applied: converged at eval_accuracy <= @target.
 * @converged:     1 when an evaluation reached @target.
 * @samples:       samples_count of the first evaluation at or below @target
 *                 (0 when @converged is 0).
 * @trained_samples: samples at the end of the last training block.
 * @evals:         evaluations up to and including the converging one (all of
 *                 them when the run did not converge).
 * @first_eval_samples:    samples at the first evaluation.
 * @eval_interval_samples: samples between the first two evaluations (0: one).
 * @run_s:         run_start to run_stop, the scored time.
 * @steady_sps:    samples / time over the training blocks after the first
 *                 (the first one when it is the only one).
 * @logged_sps:    median of the log's own throughput figures (tracked_stats
 *                 "throughput" in samples/s, or gbs / "train_step_timing").
 * @step_s:        @gbs / @steady_sps.
 * @eval_s:        sum of eval_start .. eval_stop intervals.
 * @first_step_s:  time before the first step: time from the first block's
 *                 start to its first progress line (train_loss or a
 *                 tracked_stats line) minus the samples trained by then at
 *                 @steady_sps; @have_first_step says whether it was found.
 * @first_block_extra_s: the first block's duration minus its samples at
 *                 @steady_sps (one-off costs inside the first block).
 * @fixed_s:       @run_s - @trained_samples / @steady_sps - @eval_s: all the
 *                 scored time that is neither steady training nor evaluation.
 * @lines:         MLLOG lines read; @bad_lines: those that did not parse
 *                 (skipped and counted, never guessed).
 */
struct ibc_mllog_run {
	char benchmark[IBC_MLLOG_TEXT_LEN];
	char org[IBC_MLLOG_TEXT_LEN];
	char platform[IBC_MLLOG_TEXT_LEN];
	char status[16];
	long gbs;
	double seq_len;
	double lr;
	double target;
	int converged;
	double samples;
	double trained_samples;
	int evals;
	double first_eval_samples;
	double eval_interval_samples;
	double run_s;
	double steady_sps;
	double logged_sps;
	double step_s;
	double eval_s;
	double first_step_s;
	int have_first_step;
	double first_block_extra_s;
	double fixed_s;
	long lines;
	long bad_lines;
};

/**
 * struct ibc_mllog_score - a set of runs of one system, scored as MLPerf
 * does: with n >= 3 runs the fastest and the slowest are dropped (a run that
 * did not converge counts as the slowest) and the rest are averaged.
 * Every mean is over the same scored runs, so @train_s + @eval_s + @fixed_s
 * equals @run_s exactly.
 * @nruns, @nscored:  runs given, runs kept.
 * @run_s:            mean scored time (the published score, in seconds).
 * @samples:          mean samples to converge.
 * @evals:            mean evaluations.
 * @train_s:          mean of trained_samples / steady_sps.
 * @eval_s, @fixed_s: means.
 * @sample_s:         @train_s / mean trained samples: steady time per sample.
 * @step_s:           @sample_s x gbs (gbs of the first run; all must agree).
 * @eval_each_s:      @eval_s / @evals.
 * @first_eval_samples, @eval_interval_samples: of the first run (all must agree).
 * @first_step_s, @first_block_extra_s: means (of the runs that have them).
 * @gbs:              the runs' global batch size.
 */
struct ibc_mllog_score {
	int nruns;
	int nscored;
	double run_s;
	double samples;
	double evals;
	double train_s;
	double eval_s;
	double fixed_s;
	double sample_s;
	double step_s;
	double eval_each_s;
	double first_eval_samples;
	double eval_interval_samples;
	double first_step_s;
	double first_block_extra_s;
	long gbs;
};

/**
 * struct ibc_mllog_table - the extracted table (mllog-runs.csv): one row per
 * log with @group (the log's directory, "repo:path/to/benchmark") and
 * @source ("repo@commit:path/to/result_N.txt").
 */
struct ibc_mllog_table {
	char group[IBC_MLLOG_TABLE_MAX][IBC_MLLOG_PATH_LEN];
	char source[IBC_MLLOG_TABLE_MAX][IBC_MLLOG_PATH_LEN];
	struct ibc_mllog_run run[IBC_MLLOG_TABLE_MAX];
	int n;
};

double ibc_mllog_default_target(const char *benchmark);
ibc_status_t ibc_mllog_read_stream(FILE *f, const char *name, double target,
				   struct ibc_mllog_run *run_p);
ibc_status_t ibc_mllog_read(const char *path, double target, struct ibc_mllog_run *run_p);
ibc_status_t ibc_mllog_score_runs(const struct ibc_mllog_run *runs, int n, const char *name,
				  struct ibc_mllog_score *score_p);
void ibc_mllog_group_of(const char *source, char *group, size_t len);
void ibc_mllog_write_header(FILE *f);
void ibc_mllog_write_row(FILE *f, const char *group, const char *source,
			 const struct ibc_mllog_run *r);
ibc_status_t ibc_mllog_table_read(struct ibc_mllog_table *t, const char *path);
ibc_status_t ibc_mllog_table_score(const struct ibc_mllog_table *t, const char *group,
				   struct ibc_mllog_score *score_p);

#endif /* IBC_MLLOG_H */
