/* SPDX-License-Identifier: MIT */
/*
 * ibc_scaling.c - command-line front end of the scaling model.
 *
 *   ibc_scaling mlperf [-d DIR] [-f text|md] [-P POINTS] [-C CURVE]
 *       fit the model on its calibration rows, predict every row of
 *       DIR/mlperf.csv, print the table, the fitted parameters and the
 *       targets of issue 11; optionally write gnuplot data files.
 *   ibc_scaling logs [-d DIR] [-f text|md]
 *       the rows' published result logs (mllog-runs.csv) next to the model:
 *       scored runs, the split of the 512-GPU H100/H200 ratio and of the
 *       GPT-3 512/10,752 ratio, the model's step against the logs' step
 *       (ibc_scaling mlperf prints these too, and the targets of issue 26).
 *   ibc_scaling robust [-d DIR] [-f text|md]
 *       the same fit with other calibration rows, and with one u for all
 *       GPT-3 rounds: how much the predictions depend on the choice.
 *   ibc_scaling local -p local-params.txt [-m measured.tsv] [-f text|md]
 *       predict the local scaling experiments from parameters measured on
 *       this machine and compare with the measurements.
 *   ibc_scaling mllog [-T TARGET] [-R REPO@COMMIT] LOG...
 *       reduce MLPerf result logs to the rows of the extracted table
 *       (mllog-runs.csv; see mllog.h), one per log, on stdout.
 *
 * Relies on scaling_model.c and scaling_io.c; docs/scaling.md shows the output.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/log.h"
#include "base/util.h"
#include "mllog.h"
#include "scaling_model.h"

enum cli_format { CLI_TEXT = 0, CLI_MD = 1 };

static void cli_usage(FILE *f)
{
	fprintf(f,
		"usage: ibc_scaling mlperf [-d DIR] [-f text|md] [-P POINTS] [-C CURVE] [-E ROW] [-1]\n"
		"       ibc_scaling logs [-d DIR] [-f text|md]\n"
		"       ibc_scaling robust [-d DIR] [-f text|md]\n"
		"       ibc_scaling local -p LOCAL_PARAMS [-m MEASURED] [-f text|md]\n"
		"       ibc_scaling mllog [-T TARGET] [-R REPO@COMMIT] LOG...\n"
		"  -d DIR     directory with hardware.conf, workloads.conf, mlperf.csv\n"
		"             (default: the source directory of this program)\n"
		"  -f FORMAT  text (default) or md (the tables of docs/scaling.md)\n"
		"  -P FILE    write published and predicted points for gnuplot\n"
		"  -C FILE    write the model curve of the v3.1 recipe for gnuplot\n"
		"  -E ROW     sensitivity: fit eta on ROW (a v3.1 GPT-3 row) instead\n"
		"  -1         sensitivity: one u for all GPT-3 rounds (v4.0 and v4.1\n"
		"             512-GPU rows become predictions)\n"
		"  -p FILE    local parameters measured by bench/scaling/run.sh\n"
		"  -m FILE    local measurements (run.sh writes local-measured.tsv)\n"
		"  -T TARGET  quality target (default: the benchmark's MLPerf target)\n"
		"  -R SOURCE  repository and commit the LOG paths are relative to; the\n"
		"             source column then reads SOURCE:LOG\n");
}

static double cli_err_pct(double pred, double pub)
{
	return (pred - pub) / pub * 100.0;
}

static const char *cli_algo(enum ibc_scaling_algo a)
{
	switch (a) {
	case IBC_SCALING_ALGO_RING: return "ring";
	case IBC_SCALING_ALGO_TREE: return "tree";
	default:                    return "-";
	}
}

static int cli_row_index(const struct ibc_scaling_db *db, const char *id)
{
	int i;

	for (i = 0; i < db->nrow; i++)
		if (strcmp(db->row[i].id, id) == 0)
			return i;
	return -1;
}

/* ratio of published and predicted times of two rows (a slower / b faster) */
static ibc_status_t cli_ratio(const struct ibc_scaling_db *db, const char *a, const char *b,
			      double *pub_p, double *pred_p)
{
	struct ibc_scaling_pred pa, pb;
	int ia = cli_row_index(db, a);
	int ib = cli_row_index(db, b);

	if (ia < 0 || ib < 0)
		return IBC_ERR_INVALID_ARG;
	IBC_CHECK(ibc_scaling_predict_row(db, ia, &pa));
	IBC_CHECK(ibc_scaling_predict_row(db, ib, &pb));
	*pub_p = db->row[ia].published_min / db->row[ib].published_min;
	*pred_p = pa.ttt_s / pb.ttt_s;
	return IBC_OK;
}

static void cli_print_params(const struct ibc_scaling_db *db, enum cli_format fmt)
{
	int k, i;
	const char *row;
	const char *erow = "-";

	for (i = 0; i < db->nrow; i++)
		if (strcmp(db->row[i].role, "calib-eta") == 0)
			erow = db->row[i].id;
	if (fmt == CLI_MD) {
		printf("| parameter | value | fitted on |\n|---|---|---|\n");
		printf("| eta (overlap efficiency, all rows) | %.3f | %s, with u of its stack |\n",
		       db->params.eta, erow);
	} else {
		printf("# fitted parameters (%d in all)\n", db->nstack + 1);
		printf("eta = %.3f  (fraction of TP/CP/PP/DP communication hidden behind compute; fitted on %s)\n",
		       db->params.eta, erow);
	}
	for (k = 0; k < db->nstack; k++) {
		row = "?";
		for (i = 0; i < db->nrow; i++)
			if (strcmp(db->row[i].stack, db->stack[k]) == 0 &&
			    (strcmp(db->row[i].role, "calib-u") == 0 ||
			     strcmp(db->row[i].role, "calib-u-step") == 0))
				row = db->row[i].id;
		if (fmt == CLI_MD)
			printf("| u[%s] (achieved fraction of the peak of each op's precision) | %.3f | %s |\n",
			       db->stack[k], db->u[k], row);
		else
			printf("u[%s] = %.3f  (fraction of the FP8 or BF16 peak; calibrated on %s)\n",
			       db->stack[k], db->u[k], row);
	}
	if (fmt == CLI_TEXT)
		printf("# measured from a published log, not fitted: host_step_s %.3f, eval_fixed_s %.3f\n\n",
		       db->params.host_step_s, db->params.eval_fixed_s);
	else
		printf("\n");
}

/* a count that is a mean over runs: whole numbers without decimals */
static void cli_count(char *buf, size_t len, double v)
{
	if (fabs(v - floor(v + 0.5)) < 1e-9)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.1f", v);
}

static ibc_status_t cli_print_rows(const struct ibc_scaling_db *db, enum cli_format fmt)
{
	struct ibc_scaling_pred pr;
	const struct ibc_scaling_row *r;
	char step_log[32], evals_log[16], steps[16], evals[16];
	int i;

	if (fmt == CLI_MD)
		printf("| row | GPUs | tp/pp/cp/vp | mbs | GBS | steps (evals, log) | step s model / log | "
		       "MFU of BF16 peak | exposed DP s | predicted min | published min | error | role |\n"
		       "|---|---:|---|---:|---:|---|---|---:|---:|---:|---:|---:|---|\n");
	else
		printf("%-26s %6s %-11s %3s %5s %12s %15s %5s %7s %9s %9s %7s %s\n", "row", "GPUs",
		       "tp/pp/cp/vp", "mbs", "GBS", "steps(ev,log)", "step_s mdl/log", "MFU",
		       "dp_exp", "pred_min", "pub_min", "err%", "role");
	for (i = 0; i < db->nrow; i++) {
		r = &db->row[i];
		IBC_CHECK(ibc_scaling_predict_row(db, i, &pr));
		if (r->logged_step_s > 0.0)
			snprintf(step_log, sizeof(step_log), "%.3f", r->logged_step_s);
		else
			snprintf(step_log, sizeof(step_log), "-");
		if (r->logged_evals > 0)
			cli_count(evals_log, sizeof(evals_log), r->logged_evals);
		else
			snprintf(evals_log, sizeof(evals_log), "-");
		cli_count(steps, sizeof(steps), pr.steps);
		cli_count(evals, sizeof(evals), pr.evals);
		if (fmt == CLI_MD)
			printf("| %s | %d | %d/%d/%d/%d | %d | %ld | %s (%s, %s) | %.3f / %s | %.0f%% | %.3f | %.3f | %.3f | %+.1f%% | %s |\n",
			       r->id, r->ngpus, r->tp, r->pp, r->cp, r->vp, r->mbs, r->gbs,
			       steps, evals, evals_log, pr.t_step_s, step_log,
			       pr.mfu * 100.0, pr.t_dp_exposed_s, pr.ttt_s / 60.0, r->published_min,
			       cli_err_pct(pr.ttt_s / 60.0, r->published_min), r->role);
		else
			printf("%-26s %6d %2d/%d/%d/%-2d %3d %5ld %5s(%4s,%4s) %7.3f/%-7s %4.0f%% %7.3f %9.3f %9.3f %+7.1f %s\n",
			       r->id, r->ngpus, r->tp, r->pp, r->cp, r->vp, r->mbs, r->gbs,
			       steps, evals, evals_log, pr.t_step_s, step_log,
			       pr.mfu * 100.0, pr.t_dp_exposed_s, pr.ttt_s / 60.0, r->published_min,
			       cli_err_pct(pr.ttt_s / 60.0, r->published_min), r->role);
	}
	printf("\n");
	return IBC_OK;
}

static ibc_status_t cli_print_breakdown(const struct ibc_scaling_db *db, enum cli_format fmt)
{
	struct ibc_scaling_pred pr;
	double ovh;
	int i;

	if (fmt == CLI_MD)
		printf("| row | m | t_flop ms | t_mem ms | t_tp ms | t_cp ms | t_pp ms | t_mb ms | "
		       "m t_mb s | bubble s | DP s (exposed) | opt+host s | step s | overhead | eval s |\n"
		       "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	else
		printf("# per-microbatch (ms) and per-step (s) breakdown\n"
		       "%-26s %5s %8s %7s %7s %7s %7s %8s %7s %6s %6s %6s %7s\n", "row", "m",
		       "flop_ms", "mem_ms", "tp_ms", "cp_ms", "pp_ms", "mb_ms", "bubble", "dp_s",
		       "dpexp", "opt_s", "eval_s");
	for (i = 0; i < db->nrow; i++) {
		IBC_CHECK(ibc_scaling_predict_row(db, i, &pr));
		/* share of the step that is not the microbatches' own work */
		ovh = 1.0 - pr.m * pr.t_mb_s / pr.t_step_s;
		if (fmt == CLI_MD)
			printf("| %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | %.3f (%.3f) | %.3f | %.3f | %.1f%% | %.3f |\n",
			       db->row[i].id, pr.m, pr.t_flop_s * 1e3, pr.t_mem_s * 1e3,
			       pr.t_tp_s * 1e3, pr.t_cp_s * 1e3, pr.t_pp_s * 1e3, pr.t_mb_s * 1e3,
			       pr.m * pr.t_mb_s, pr.t_bubble_s, pr.t_dp_s, pr.t_dp_exposed_s,
			       pr.t_opt_s + db->params.host_step_s, pr.t_step_s, ovh * 100.0,
			       pr.t_eval_s);
		else
			printf("%-26s %5.0f %8.2f %7.2f %7.2f %7.2f %7.2f %8.2f %7.3f %6.3f %6.3f %6.4f %7.3f %s\n",
			       db->row[i].id, pr.m, pr.t_flop_s * 1e3, pr.t_mem_s * 1e3,
			       pr.t_tp_s * 1e3, pr.t_cp_s * 1e3, pr.t_pp_s * 1e3, pr.t_mb_s * 1e3,
			       pr.t_bubble_s, pr.t_dp_s, pr.t_dp_exposed_s, pr.t_opt_s, pr.t_eval_s,
			       cli_algo(pr.dp_algo));
	}
	printf("\n");
	return IBC_OK;
}

/*
 * The targets of issue 11. GPT-3: every predicted (non-calibration) row
 * within 10%; H200/H100: the predicted ratio within 5 percentage points.
 */
static ibc_status_t cli_print_targets(const struct ibc_scaling_db *db, enum cli_format fmt)
{
	struct ibc_scaling_pred pr;
	double worst = 0.0;
	double e, pub, pred;
	const char *worst_id = "-";
	int i, n = 0;

	for (i = 0; i < db->nrow; i++) {
		if (strcmp(db->row[i].bench, "gpt3") != 0 || strcmp(db->row[i].role, "predict") != 0)
			continue;
		IBC_CHECK(ibc_scaling_predict_row(db, i, &pr));
		e = fabs(cli_err_pct(pr.ttt_s / 60.0, db->row[i].published_min));
		n++;
		if (e > worst) {
			worst = e;
			worst_id = db->row[i].id;
		}
	}
	if (fmt == CLI_MD)
		printf("| target | model | published | met |\n|---|---|---|---|\n");
	else
		printf("# targets of issue 11\n");
	if (fmt == CLI_MD)
		printf("| GPT-3 rows within 10%% (%d predicted rows) | worst %.1f%% (%s) | - | %s |\n",
		       n, worst, worst_id, worst < 10.0 ? "yes" : "NO");
	else
		printf("gpt3 within 10%%: %d predicted rows, worst |error| %.1f%% (%s): %s\n", n,
		       worst, worst_id, worst < 10.0 ? "met" : "NOT MET");
	if (cli_ratio(db, "lora-v4.1-512xh100-oci", "lora-v4.1-512xh200-azure", &pub, &pred) ==
	    IBC_OK) {
		if (fmt == CLI_MD)
			printf("| H200/H100 ratio, 512 GPUs, within 5 pp | %.3f | %.3f | %s (%+.1f pp) |\n",
			       pred, pub, fabs(pred - pub) * 100.0 < 5.0 ? "yes" : "NO",
			       (pred - pub) * 100.0);
		else
			printf("h200/h100 ratio at 512 GPUs: model %.3f, published %.3f (%+.1f pp): %s\n",
			       pred, pub, (pred - pub) * 100.0,
			       fabs(pred - pub) * 100.0 < 5.0 ? "met" : "NOT MET");
	}
	if (cli_ratio(db, "lora-v4.1-8xh100", "lora-v4.1-8xh200", &pub, &pred) == IBC_OK) {
		if (fmt == CLI_MD)
			printf("| H200/H100 ratio, 8 GPUs, within 5 pp | %.3f | %.3f | %s (%+.1f pp) |\n",
			       pred, pub, fabs(pred - pub) * 100.0 < 5.0 ? "yes" : "NO",
			       (pred - pub) * 100.0);
		else
			printf("h200/h100 ratio at 8 GPUs:   model %.3f, published %.3f (%+.1f pp): %s\n",
			       pred, pub, (pred - pub) * 100.0,
			       fabs(pred - pub) * 100.0 < 5.0 ? "met" : "NOT MET");
	}
	printf("\n");
	return IBC_OK;
}

static int cli_round_index(const char *round)
{
	if (strcmp(round, "v3.1") == 0)
		return 0;
	if (strcmp(round, "v4.0") == 0)
		return 1;
	return 2;
}

/* published vs predicted points and scaling efficiency vs the 512-GPU row
 * of the same round: eff = (512 T_512) / (N T_N) */
static ibc_status_t cli_write_points(const struct ibc_scaling_db *db, const char *path)
{
	struct ibc_scaling_pred pr, pb;
	const struct ibc_scaling_row *r, *b;
	FILE *f;
	int i, j;
	ibc_status_t st = IBC_OK;

	f = fopen(path, "w");
	if (!f) {
		IBC_LOG_WARN(BENCH, "cannot write %s: %s", path, strerror(errno));
		return IBC_ERR_SYSTEM;
	}
	fprintf(f, "# ngpus published_min predicted_min round(0=v3.1,1=v4.0,2=v4.1) "
		   "eff_published eff_predicted id\n");
	for (i = 0; i < db->nrow; i++) {
		r = &db->row[i];
		if (strcmp(r->bench, "gpt3") != 0)
			continue;
		IBC_CHECK_GOTO(ibc_scaling_predict_row(db, i, &pr), st, out);
		for (j = 0; j < db->nrow; j++)
			if (strcmp(db->row[j].bench, "gpt3") == 0 &&
			    strcmp(db->row[j].round, r->round) == 0 && db->row[j].ngpus == 512)
				break;
		if (j == db->nrow)
			continue;
		b = &db->row[j];
		IBC_CHECK_GOTO(ibc_scaling_predict_row(db, j, &pb), st, out);
		fprintf(f, "%d %.4f %.4f %d %.4f %.4f %s\n", r->ngpus, r->published_min,
			pr.ttt_s / 60.0, cli_round_index(r->round),
			b->published_min * b->ngpus / (r->published_min * r->ngpus),
			pb.ttt_s * b->ngpus / (pr.ttt_s * r->ngpus), r->id);
	}
out:
	fclose(f);
	return st;
}

/*
 * Model curve for the v3.1 recipe: TP 4, PP 8, 12 chunks, mbs 1, 8 GPUs per
 * node, GBS = max(2048, 8 dp) (at least 8 microbatches per replica, the
 * smallest NVIDIA used), from 512 to 16384 GPUs.
 */
static ibc_status_t cli_write_curve(const struct ibc_scaling_db *db, const char *path)
{
	struct ibc_scaling_row r;
	struct ibc_scaling_pred pr;
	static const int dps[] = { 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 288, 320,
				   352, 384, 416, 448, 480, 512 };
	double t512 = 0.0;
	size_t j;
	int base, k, dp;
	FILE *f;
	ibc_status_t st = IBC_OK;

	base = cli_row_index(db, "gpt3-v3.1-512");
	k = ibc_scaling_stack_index((struct ibc_scaling_db *)db, "nemo-v3.1", 0);
	if (base < 0 || k < 0)
		return IBC_ERR_INVALID_ARG;
	f = fopen(path, "w");
	if (!f) {
		IBC_LOG_WARN(BENCH, "cannot write %s: %s", path, strerror(errno));
		return IBC_ERR_SYSTEM;
	}
	fprintf(f, "# ngpus gbs predicted_min efficiency_vs_512 (v3.1 recipe, u = %.3f, eta = %.3f)\n",
		db->u[k], db->params.eta);
	for (j = 0; j < IBC_ARRAY_SIZE(dps); j++) {
		dp = dps[j];
		r = db->row[base];
		r.ngpus = 32 * dp;
		r.gbs = 8L * dp > 2048 ? 8L * dp : 2048;
		if (r.gbs % dp != 0)
			continue;
		IBC_CHECK_GOTO(ibc_scaling_predict(db, &r, db->u[k], &db->params, &pr), st, out);
		if (dp == 16)
			t512 = pr.ttt_s;
		fprintf(f, "%d %ld %.4f %.4f\n", r.ngpus, r.gbs, pr.ttt_s / 60.0,
			t512 * 512.0 / (pr.ttt_s * r.ngpus));
	}
out:
	fclose(f);
	return st;
}

/* sensitivity variants of the calibration (docs/scaling.md, "robustness") */
static int cli_override(struct ibc_scaling_db *db, const char *eta_row, int one_u)
{
	int i, k;

	if (eta_row) {
		k = cli_row_index(db, eta_row);
		if (k < 0 || strcmp(db->row[k].stack, "nemo-v3.1") != 0 ||
		    strcmp(db->row[k].role, "calib-u") == 0) {
			fprintf(stderr, "ibc_scaling: -E needs a non-calib-u nemo-v3.1 row\n");
			return -1;
		}
		for (i = 0; i < db->nrow; i++)
			if (strcmp(db->row[i].role, "calib-eta") == 0)
				snprintf(db->row[i].role, sizeof(db->row[i].role), "predict");
		snprintf(db->row[k].role, sizeof(db->row[k].role), "calib-eta");
	}
	if (one_u)
		for (i = 0; i < db->nrow; i++) {
			if (strcmp(db->row[i].bench, "gpt3") != 0 ||
			    strcmp(db->row[i].stack, "nemo-v3.1") == 0)
				continue;
			snprintf(db->row[i].stack, sizeof(db->row[i].stack), "nemo-v3.1");
			snprintf(db->row[i].role, sizeof(db->row[i].role), "predict");
		}
	return 0;
}

static int cli_mlperf_or_logs(int argc, char **argv, int logs)
{
	static struct ibc_scaling_db db;
	enum cli_format fmt = CLI_TEXT;
	const char *dir = IBC_SCALING_SRCDIR;
	const char *points = NULL;
	const char *curve = NULL;
	const char *eta_row = NULL;
	int one_u = 0;
	int opt;

	while ((opt = getopt(argc, argv, "d:f:P:C:E:1h")) != -1) {
		switch (opt) {
		case 'E': eta_row = optarg; break;
		case '1': one_u = 1; break;
		case 'd': dir = optarg; break;
		case 'f': fmt = strcmp(optarg, "md") == 0 ? CLI_MD : CLI_TEXT; break;
		case 'P': points = optarg; break;
		case 'C': curve = optarg; break;
		case 'h': cli_usage(stdout); return 0;
		default:  cli_usage(stderr); return 2;
		}
	}
	if (ibc_scaling_load(&db, dir) != IBC_OK) {
		fprintf(stderr, "ibc_scaling: %s\n", ibc_last_error());
		return 1;
	}
	if (cli_override(&db, eta_row, one_u) != 0)
		return 2;
	if (ibc_scaling_calibrate(&db) != IBC_OK) {
		fprintf(stderr, "ibc_scaling: %s\n", ibc_last_error());
		return 1;
	}
	if (logs) {
		if (ibc_scaling_report_all_logs(&db, fmt == CLI_MD, 0) != IBC_OK) {
			fprintf(stderr, "ibc_scaling: %s\n", ibc_last_error());
			return 1;
		}
		return 0;
	}
	cli_print_params(&db, fmt);
	if (cli_print_rows(&db, fmt) != IBC_OK || cli_print_targets(&db, fmt) != IBC_OK ||
	    cli_print_breakdown(&db, fmt) != IBC_OK ||
	    (fmt == CLI_MD ? ibc_scaling_report_log_targets(&db, 1) :
			     ibc_scaling_report_all_logs(&db, 0, 1)) != IBC_OK ||
	    (points && cli_write_points(&db, points) != IBC_OK) ||
	    (curve && cli_write_curve(&db, curve) != IBC_OK)) {
		fprintf(stderr, "ibc_scaling: %s\n", ibc_last_error());
		return 1;
	}
	return 0;
}

/*
 * Measured file (tab or space separated, "#" comments), written by run.sh:
 *   trainer   <shm|tcp|ib> <weak|strong> <ranks> <step_s>
 *   allreduce <shm|tcp|ib> <ranks> <bytes> <busbw_GBps>
 */
static int cli_local(int argc, char **argv)
{
	struct ibc_scaling_local lp;
	enum cli_format fmt = CLI_TEXT;
	const char *params = NULL;
	const char *measured = NULL;
	char line[512], kind[32], tname[16], mode[16];
	double a, b, c, pred;
	int t, opt, n = 0;
	FILE *f;

	while ((opt = getopt(argc, argv, "p:m:f:h")) != -1) {
		switch (opt) {
		case 'p': params = optarg; break;
		case 'm': measured = optarg; break;
		case 'f': fmt = strcmp(optarg, "md") == 0 ? CLI_MD : CLI_TEXT; break;
		case 'h': cli_usage(stdout); return 0;
		default:  cli_usage(stderr); return 2;
		}
	}
	if (!params) {
		cli_usage(stderr);
		return 2;
	}
	if (ibc_scaling_load_local(&lp, params) != IBC_OK) {
		fprintf(stderr, "ibc_scaling: %s\n", ibc_last_error());
		return 1;
	}
	if (fmt == CLI_MD)
		printf("| transport | alpha us | beta ns/B (GB/s) | gamma ns/B |\n|---|---:|---:|---:|\n");
	else
		printf("# measured link parameters (fitted at %d ranks)\n", lp.fit_ranks);
	for (t = 0; t < IBC_SCALING_NTRANSPORTS; t++) {
		if (!lp.have_link[t])
			continue;
		printf(fmt == CLI_MD ? "| %s | %.2f | %.4f (%.2f) | %.4f |\n" :
				       "%s alpha %.2f us beta %.4f ns/B (%.2f GB/s) gamma %.4f ns/B\n",
		       ibc_scaling_transport_name(t), lp.link[t].alpha_s * 1e6, lp.link[t].beta_s_per_B * 1e9,
		       1.0 / lp.link[t].beta_s_per_B / 1e9, lp.link[t].gamma_s_per_B * 1e9);
	}
	printf("\n");
	if (lp.have_trainer) {
		if (fmt == CLI_MD)
			printf("| trainer term | value | from |\n|---|---:|---|\n"
			       "| cores | %d | this host (getconf) |\n"
			       "| compute per sample | %.4f s | two 1-rank calibration runs (slope) |\n"
			       "| fixed work per step | %.4f s | two 1-rank calibration runs (intercept) |\n"
			       "| co-run factor (all cores busy) | %.3f | 1-rank job beside cores - 1 others, over alone |\n"
			       "| gradient bytes all-reduced | %.0f | 4 x parameters (model line) |\n\n",
			       lp.cores, lp.sample_compute_s, lp.step_fixed_s, lp.corun_factor,
			       lp.grad_bytes);
		else
			printf("# trainer: cores %d, compute %.4f s per sample, fixed %.4f s per step, "
			       "co-run factor %.3f, %.0f gradient bytes\n\n",
			       lp.cores, lp.sample_compute_s, lp.step_fixed_s, lp.corun_factor,
			       lp.grad_bytes);
	}
	if (!measured)
		return 0;
	f = fopen(measured, "r");
	if (!f) {
		fprintf(stderr, "ibc_scaling: cannot open %s: %s\n", measured, strerror(errno));
		return 1;
	}
	printf(fmt == CLI_MD ? "| experiment | transport | ranks | measured | model | error |\n|---|---|---:|---:|---:|---:|\n" :
			       "%-22s %-4s %5s %12s %12s %7s\n", "experiment", "tr", "ranks", "measured",
	       "model", "err%");
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%31s", kind) != 1)
			continue;
		if (strcmp(kind, "trainer") == 0 &&
		    sscanf(line, "%*s %15s %15s %lf %lf", tname, mode, &a, &b) == 4) {
			t = ibc_scaling_transport_index(tname);
			pred = ibc_scaling_local_step_s(&lp, t, (int)a, strcmp(mode, "strong") == 0 ?
							IBC_SCALING_STRONG : IBC_SCALING_WEAK);
			if (pred < 0.0)
				continue;
			printf(fmt == CLI_MD ? "| trainer step, %s scaling | %s | %.0f | %.4f s | %.4f s | %+.1f%% |\n" :
					       "trainer-%-14s %-4s %5.0f %10.4f s %10.4f s %+6.1f\n",
			       mode, tname, a, b, pred, cli_err_pct(pred, b));
			n++;
		} else if (strcmp(kind, "trainer_allreduce") == 0 &&
			   sscanf(line, "%*s %15s %15s %lf %lf", tname, mode, &a, &b) == 4) {
			/* the trainer's own all-reduce time per step against the
			 * model's gradient all-reduce (the communication term) */
			t = ibc_scaling_transport_index(tname);
			if (!lp.have_trainer || t < 0 || !lp.have_link[t] || a < 2)
				continue;
			pred = ibc_scaling_local_allreduce_s(&lp, t, (int)a, lp.grad_bytes);
			printf(fmt == CLI_MD ? "| trainer all-reduce, %s scaling | %s | %.0f | %.4f s | %.4f s | %+.1f%% |\n" :
					       "trainer-ar-%-11s %-4s %5.0f %10.4f s %10.4f s %+6.1f\n",
			       mode, tname, a, b, pred, cli_err_pct(pred, b));
			n++;
		} else if (strcmp(kind, "allreduce") == 0 &&
			   sscanf(line, "%*s %15s %lf %lf %lf", tname, &a, &b, &c) == 4) {
			t = ibc_scaling_transport_index(tname);
			pred = ibc_scaling_local_busbw_Bps(&lp, t, (int)a, b);
			if (pred < 0.0)
				continue;
			printf(fmt == CLI_MD ? "| all-reduce busbw, %.0f bytes | %s | %.0f | %.4g GB/s | %.4g GB/s | %+.1f%% |\n" :
					       "allreduce-%-12.0f %-4s %5.0f %7.4g GB/s %7.4g GB/s %+6.1f\n",
			       b, tname, a, c, pred / 1e9, cli_err_pct(pred / 1e9, c));
			n++;
		}
	}
	fclose(f);
	printf("\n");
	if (n == 0)
		printf("# no comparable measurements in %s\n", measured);
	return 0;
}

/* worst |error| over the predicted GPT-3 rows of a calibrated database */
static ibc_status_t cli_worst_gpt3(const struct ibc_scaling_db *db, double *worst_p,
				   const char **id_p)
{
	struct ibc_scaling_pred pr;
	double e;
	int i;

	*worst_p = 0.0;
	*id_p = "-";
	for (i = 0; i < db->nrow; i++) {
		if (strcmp(db->row[i].bench, "gpt3") != 0 || strcmp(db->row[i].role, "predict") != 0)
			continue;
		IBC_CHECK(ibc_scaling_predict_row(db, i, &pr));
		e = fabs(cli_err_pct(pr.ttt_s / 60.0, db->row[i].published_min));
		if (e > *worst_p) {
			*worst_p = e;
			*id_p = db->row[i].id;
		}
	}
	return IBC_OK;
}

/*
 * LoRA calibration variants: @calib (with @role calib-u-step or calib-u)
 * fixes u of the LoRA stack; @split 0 counts every FLOP against the BF16
 * peak (the model before issue 26).
 */
static void cli_lora_variant(struct ibc_scaling_db *db, const char *calib, const char *role,
			     int split)
{
	struct ibc_scaling_row *r;
	int i;

	for (i = 0; i < db->nrow; i++) {
		r = &db->row[i];
		if (strcmp(r->bench, "llama2_70b_lora") != 0)
			continue;
		if (strcmp(r->id, calib) == 0)
			snprintf(r->role, sizeof(r->role), "%s", role);
		else if (strncmp(r->role, "calib-u", 7) == 0)
			snprintf(r->role, sizeof(r->role), "predict");
		if (!split)
			r->gemm_fp8 = r->attn_fp8 = 0;
	}
}

/* step error of row @id against its logs, percent; NAN when unknown */
static double cli_step_err(const struct ibc_scaling_db *db, const char *id, double *step_p)
{
	struct ibc_scaling_pred pr;
	int i = cli_row_index(db, id);

	if (i < 0 || !db->row[i].have_log || ibc_scaling_predict_row(db, i, &pr) != IBC_OK)
		return NAN;
	*step_p = pr.t_step_s;
	return (pr.t_step_s / db->row[i].log.step_s - 1.0) * 100.0;
}

static int cli_robust_lora(const struct ibc_scaling_db *base, enum cli_format fmt)
{
	static const struct {
		const char *calib, *role, *what;
		int split;
	} v[] = {
		{ "lora-v4.1-8xh100", "calib-u-step", "u on lora-v4.1-8xh100's logged step; FLOPs at the peak of their precision (default)", 1 },
		{ "lora-v4.1-8xh100", "calib-u-step", "u on lora-v4.1-8xh100's logged step; every FLOP at the BF16 peak", 0 },
		{ "lora-v4.1-64xh100", "calib-u-step", "u on lora-v4.1-64xh100's logged step (the 512-GPU rows' recipe); FLOPs at their precision's peak", 1 },
		{ "lora-v4.1-8xh100", "calib-u", "u on lora-v4.1-8xh100's published time (as in issue 11); FLOPs at their precision's peak", 1 },
	};
	static struct ibc_scaling_db db;
	double e8, e64, eh, ea, th = 0.0, ta = 0.0, t8 = 0.0, t64 = 0.0, ratio_log;
	size_t j;
	int k, ih, ia;

	ih = cli_row_index(base, "lora-v4.1-512xh100-oci");
	ia = cli_row_index(base, "lora-v4.1-512xh200-azure");
	if (ih < 0 || ia < 0 || !base->row[ih].have_log || !base->row[ia].have_log)
		return 0;
	ratio_log = base->row[ih].log.step_s / base->row[ia].log.step_s;
	if (fmt == CLI_MD)
		printf("| LoRA calibration variant | u | step error 8xH200 | 64xH100 | 512xH100 (OCI) | 512xH200 (Azure) | step ratio H100/H200 (logs %.3f) |\n"
		       "|---|---:|---:|---:|---:|---:|---:|\n", ratio_log);
	else
		printf("%-60s %6s %8s %8s %8s %8s %s\n", "lora variant", "u", "8xh200", "64xh100",
		       "512h100", "512h200", "ratio");
	for (j = 0; j < IBC_ARRAY_SIZE(v); j++) {
		db = *base;
		cli_lora_variant(&db, v[j].calib, v[j].role, v[j].split);
		if (ibc_scaling_calibrate(&db) != IBC_OK) {
			fprintf(stderr, "ibc_scaling: %s\n", ibc_last_error());
			return 1;
		}
		k = ibc_scaling_stack_index(&db, "nemo-lora-v4.1", 0);
		e8 = cli_step_err(&db, "lora-v4.1-8xh200", &t8);
		e64 = cli_step_err(&db, "lora-v4.1-64xh100", &t64);
		eh = cli_step_err(&db, "lora-v4.1-512xh100-oci", &th);
		ea = cli_step_err(&db, "lora-v4.1-512xh200-azure", &ta);
		if (fmt == CLI_MD)
			printf("| %s | %.3f | %+.1f%% | %+.1f%% | %+.1f%% | %+.1f%% | %.3f (%+.1f pp) |\n",
			       v[j].what, k >= 0 ? db.u[k] : 0.0, e8, e64, eh, ea, th / ta,
			       (th / ta - ratio_log) * 100.0);
		else
			printf("%-60.60s %6.3f %+7.1f%% %+7.1f%% %+7.1f%% %+7.1f%% %.3f (%+.1f pp)\n",
			       v[j].what, k >= 0 ? db.u[k] : 0.0, e8, e64, eh, ea, th / ta,
			       (th / ta - ratio_log) * 100.0);
	}
	printf("\n");
	return 0;
}

/*
 * Robustness of the fit: re-calibrate with eta fixed on each v3.1 GPT-3 row
 * in turn, and with one u for every GPT-3 round; print the worst error.
 * Then the LoRA stack's calibration variants (cli_robust_lora()).
 */
static int cli_robust(int argc, char **argv)
{
	static struct ibc_scaling_db base, db;
	enum cli_format fmt = CLI_TEXT;
	const char *dir = IBC_SCALING_SRCDIR;
	const char *eta_row, *id;
	double worst;
	int v, i, opt, one_u;

	while ((opt = getopt(argc, argv, "d:f:h")) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'f': fmt = strcmp(optarg, "md") == 0 ? CLI_MD : CLI_TEXT; break;
		case 'h': cli_usage(stdout); return 0;
		default:  cli_usage(stderr); return 2;
		}
	}
	if (ibc_scaling_load(&base, dir) != IBC_OK) {
		fprintf(stderr, "ibc_scaling: %s\n", ibc_last_error());
		return 1;
	}
	if (fmt == CLI_MD)
		printf("| calibration variant | eta | u[nemo-v3.1] | worst GPT-3 error (predicted rows) |\n"
		       "|---|---:|---:|---|\n");
	else
		printf("%-40s %6s %6s %s\n", "variant", "eta", "u_v31", "worst gpt3 error");
	for (v = -1; v <= base.nrow; v++) {
		eta_row = NULL;
		one_u = 0;
		if (v >= 0 && v < base.nrow) {
			if (strcmp(base.row[v].stack, "nemo-v3.1") != 0 ||
			    strcmp(base.row[v].role, "predict") != 0 ||
			    strcmp(base.row[v].submitter, "NVIDIA Eos") != 0)
				continue;
			eta_row = base.row[v].id;
		} else if (v == base.nrow) {
			one_u = 1;
		}
		db = base;
		if (cli_override(&db, eta_row, one_u) != 0 || ibc_scaling_calibrate(&db) != IBC_OK ||
		    cli_worst_gpt3(&db, &worst, &id) != IBC_OK) {
			fprintf(stderr, "ibc_scaling: %s\n", ibc_last_error());
			return 1;
		}
		i = ibc_scaling_stack_index(&db, "nemo-v3.1", 0);
		if (fmt == CLI_MD)
			printf("| %s%s | %.3f | %.3f | %.1f%% (%s) |\n",
			       one_u ? "one u for all GPT-3 rounds (-1)" : "eta fitted on ",
			       one_u ? "" : (eta_row ? eta_row : "gpt3-v3.1-10752-eos (default)"),
			       db.params.eta, db.u[i], worst, id);
		else
			printf("%-40s %6.3f %6.3f %.1f%% (%s)\n",
			       one_u ? "one u (-1)" : (eta_row ? eta_row : "default"), db.params.eta,
			       db.u[i], worst, id);
	}
	printf("\n");
	return cli_robust_lora(&base, fmt);
}

/*
 * Reduce result logs to rows of the extracted table. Every log is read; a
 * log that cannot be reduced is named on stderr and makes the exit status 1
 * (its row is left out).
 */
static int cli_mllog(int argc, char **argv)
{
	struct ibc_mllog_run r;
	char source[IBC_MLLOG_PATH_LEN];
	char group[IBC_MLLOG_PATH_LEN];
	const char *repo = NULL;
	double target = 0.0;
	char *end;
	int opt, i, rc = 0;

	while ((opt = getopt(argc, argv, "T:R:h")) != -1) {
		switch (opt) {
		case 'T':
			target = strtod(optarg, &end);
			if (*end != '\0' || !(target > 0.0)) {
				fprintf(stderr, "ibc_scaling mllog: -T needs a positive number, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'R': repo = optarg; break;
		case 'h': cli_usage(stdout); return 0;
		default:  cli_usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		cli_usage(stderr);
		return 2;
	}
	ibc_mllog_write_header(stdout);
	for (i = optind; i < argc; i++) {
		if (ibc_mllog_read(argv[i], target, &r) != IBC_OK) {
			fprintf(stderr, "ibc_scaling mllog: %s\n", ibc_last_error());
			rc = 1;
			continue;
		}
		if (repo)
			snprintf(source, sizeof(source), "%s:%s", repo, argv[i]);
		else
			snprintf(source, sizeof(source), "%s", argv[i]);
		ibc_mllog_group_of(source, group, sizeof(group));
		ibc_mllog_write_row(stdout, group, source, &r);
	}
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		cli_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "mlperf") == 0)
		return cli_mlperf_or_logs(argc - 1, argv + 1, 0);
	if (strcmp(argv[1], "logs") == 0)
		return cli_mlperf_or_logs(argc - 1, argv + 1, 1);
	if (strcmp(argv[1], "local") == 0)
		return cli_local(argc - 1, argv + 1);
	if (strcmp(argv[1], "robust") == 0)
		return cli_robust(argc - 1, argv + 1);
	if (strcmp(argv[1], "mllog") == 0)
		return cli_mllog(argc - 1, argv + 1);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		cli_usage(stdout);
		return 0;
	}
	cli_usage(stderr);
	return 2;
}
