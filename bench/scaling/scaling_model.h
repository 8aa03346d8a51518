/* SPDX-License-Identifier: MIT */
/*
 * scaling_model.h - the analytic scaling model of bench/scaling: alpha-beta-
 * gamma collective costs (ring, double binary tree), a transformer training
 * step (compute, HBM-bound element-wise work, tensor/context/pipeline/data
 * parallel communication, pipeline bubble), time to train an MLPerf-style
 * benchmark, and the calibration of the few fitted parameters.
 * Implemented in scaling_model.c (pure arithmetic) and scaling_io.c (the
 * text files in bench/scaling/). docs/scaling.md explains every formula.
 *
 * Units: seconds (_s), bytes (_bytes, _B), FLOP, bytes per second (_Bps).
 */
#ifndef IBC_SCALING_MODEL_H
#define IBC_SCALING_MODEL_H

#include <stddef.h>

#include "ibcoll.h"
#include "mllog.h"

#define IBC_SCALING_NAME_LEN 48
#define IBC_SCALING_TEXT_LEN 512
#define IBC_SCALING_MAX_RCP  16
#define IBC_SCALING_MAX_ROWS 64
#define IBC_SCALING_MAX_STACKS 16
/* transports of the local model: 0 shm, 1 tcp, 2 ib (verbs) */
#define IBC_SCALING_NTRANSPORTS 3

/**
 * struct ibc_scaling_link - alpha-beta-gamma cost of one link level.
 * @alpha_s:        per-step (per-hop) latency of a collective, s.
 * @base_s:         fixed latency of one collective call, s.
 * @beta_s_per_B:   1 / achievable unidirectional bandwidth per GPU, s/byte.
 * @gamma_s_per_B:  reduction cost, s per byte reduced (0 when negligible).
 * @tree_bw_factor: bandwidth of the double binary tree relative to the ring
 *                  (NCCL applies 0.9 to tree bus bandwidth); 1 = ideal.
 */
struct ibc_scaling_link {
	double alpha_s;
	double base_s;
	double beta_s_per_B;
	double gamma_s_per_B;
	double tree_bw_factor;
};

enum ibc_scaling_algo {
	IBC_SCALING_ALGO_NONE = 0,  /* one rank: nothing to do */
	IBC_SCALING_ALGO_RING = 1,
	IBC_SCALING_ALGO_TREE = 2,  /* double binary tree */
	IBC_SCALING_ALGO_COUNT
};

double ibc_scaling_ring_allreduce_s(const struct ibc_scaling_link *l, int n, double nbytes);
double ibc_scaling_ring_reduce_scatter_s(const struct ibc_scaling_link *l, int n, double nbytes);
double ibc_scaling_ring_allgather_s(const struct ibc_scaling_link *l, int n, double nbytes);
double ibc_scaling_tree_allreduce_s(const struct ibc_scaling_link *l, int n, double nbytes);
double ibc_scaling_allreduce_s(const struct ibc_scaling_link *l, int n, double nbytes,
			       enum ibc_scaling_algo *algo_p);
double ibc_scaling_p2p_s(const struct ibc_scaling_link *l, double nbytes);
double ibc_scaling_busbw_factor(int n);

/**
 * struct ibc_scaling_system - one machine type: GPU and its two link levels.
 * @name:          system id used by mlperf.csv (e.g. "dgx-h100").
 * @gpu:           GPU name (for tables).
 * @peak_flops:    dense BF16 tensor-core peak per GPU, FLOP/s.
 * @peak_fp8_flops: dense FP8 tensor-core peak per GPU, FLOP/s.
 * @hbm_Bps:       HBM bandwidth per GPU, bytes/s.
 * @gpus_per_node: GPUs sharing one NVLink domain.
 * @nvlink:        link level inside a node.
 * @net:           link level across nodes (one NIC per GPU).
 */
struct ibc_scaling_system {
	char name[IBC_SCALING_NAME_LEN];
	char gpu[IBC_SCALING_NAME_LEN];
	double peak_flops;
	double peak_fp8_flops;
	double hbm_Bps;
	int gpus_per_node;
	struct ibc_scaling_link nvlink;
	struct ibc_scaling_link net;
};

/**
 * struct ibc_scaling_workload - model shape and benchmark rules.
 * @layers, @hidden, @ffn, @heads, @kv_heads, @vocab, @seq: transformer shape
 *                  (decoder only; @ffn is the MLP width, @kv_heads < @heads
 *                  means grouped-query attention).
 * @gated_mlp:      1 for SwiGLU (three MLP matrices), 0 for GELU (two).
 * @frozen_base:    1 for LoRA fine-tuning: base weights get no gradient, so
 *                  backward runs only the data-gradient GEMMs.
 * @lora_params:    trainable adapter parameters (LoRA), 0 otherwise.
 * @elem_bytes_per_h: HBM bytes moved by element-wise kernels per token per
 *                  layer for forward+backward, in units of @hidden.
 * @eval_seqs:      sequences in one evaluation pass (padded to the GBS).
 * @eval_interval_samples: training samples between evaluations (rounded up to
 *                  whole steps).
 * @first_eval_samples: samples before the first evaluation (0: one interval).
 * @rcp_gbs, @rcp_samples, @nrcp: reference convergence points: mean training
 *                  samples to reach the target at each global batch size.
 */
struct ibc_scaling_workload {
	char name[IBC_SCALING_NAME_LEN];
	int layers;
	double hidden;
	double ffn;
	int heads;
	int kv_heads;
	double vocab;
	double seq;
	int gated_mlp;
	int frozen_base;
	double lora_params;
	double elem_bytes_per_h;
	double eval_seqs;
	double eval_interval_samples;
	double first_eval_samples;
	double rcp_gbs[IBC_SCALING_MAX_RCP];
	double rcp_samples[IBC_SCALING_MAX_RCP];
	int nrcp;
};

/**
 * struct ibc_scaling_row - one published result and the configuration that
 * produced it (all inputs; nothing here is fitted).
 * @id:            short unique name.
 * @bench:         workload name (workloads.conf).
 * @round:         MLPerf round ("v3.1"...).
 * @submitter:     who ran it.
 * @system:        system id (hardware.conf).
 * @stack:         software stack whose achieved utilization u it shares.
 * @role:          "calib-u" (fixes u of its stack on the published time),
 *                 "calib-u-step" (fixes u of its stack on the step time of
 *                 its logs), "calib-eta" (fixes the overlap efficiency
 *                 together with its stack's calib-u row), or "predict".
 * @ngpus, @tp, @pp, @cp, @vp, @mbs, @gbs: parallel layout; @vp is the number
 *                 of interleaved pipeline chunks per GPU (1: none).
 * @dist_opt:      1: distributed optimizer (reduce-scatter gradients +
 *                 all-gather parameters); 0: all-reduce of the gradients.
 * @grad_bytes_per_elem, @param_bytes_per_elem: wire sizes (2 = bf16, 1 = fp8).
 * @gemm_fp8, @attn_fp8: 1 when the weight GEMMs / the attention run in FP8
 *                 (configs: FP8, FP8_DPA); their FLOPs then count against the
 *                 FP8 peak, otherwise against the BF16 peak.
 * @samples:       samples to converge if given (0: use the workload RCP).
 * @samples_from_log: 1 when @samples is the mean over the scored runs of
 *                 @runs; steps and evaluations are then means too (fractional).
 * @published_min: published time to train, minutes.
 * @logged_step_s: one training step from the submission's log, s (0: unknown).
 * @logged_evals:  evaluations in that log, or their mean over the scored runs
 *                 (0: unknown).
 * @runs:          group of the row's logs in mllog-runs.csv ("" if none).
 * @have_log, @log: the scored runs of @runs (ibc_mllog_table_score()).
 * @first_eval_samples, @eval_interval_samples: the evaluation schedule of the
 *                 row's runs (from @log); 0 uses the workload's.
 * @source:        where the numbers come from.
 */
struct ibc_scaling_row {
	char id[IBC_SCALING_NAME_LEN];
	char bench[IBC_SCALING_NAME_LEN];
	char round[16];
	char submitter[IBC_SCALING_NAME_LEN];
	char system[IBC_SCALING_NAME_LEN];
	char stack[IBC_SCALING_NAME_LEN];
	char role[16];
	int ngpus;
	int tp;
	int pp;
	int cp;
	int vp;
	int mbs;
	long gbs;
	int dist_opt;
	double grad_bytes_per_elem;
	double param_bytes_per_elem;
	int gemm_fp8;
	int attn_fp8;
	double samples;
	int samples_from_log;
	double published_min;
	double logged_step_s;
	double logged_evals;
	char runs[IBC_MLLOG_PATH_LEN];
	int have_log;
	struct ibc_mllog_score log;
	double first_eval_samples;
	double eval_interval_samples;
	char source[IBC_SCALING_TEXT_LEN];
};

/**
 * struct ibc_scaling_params - parameters shared by every row.
 * @eta:          fraction of overlappable communication (TP, CP, PP, DP) that
 *                is hidden behind compute; FITTED (one value for all rows).
 * @host_step_s:  host time per step outside the GPU step (data loader,
 *                callbacks), s; measured from a published log.
 * @eval_fixed_s: fixed time per evaluation (mode switch, first batch), s;
 *                measured from a published log.
 * @opt_bytes_per_param: HBM bytes per parameter touched by the optimizer step.
 */
struct ibc_scaling_params {
	double eta;
	double host_step_s;
	double eval_fixed_s;
	double opt_bytes_per_param;
};

/**
 * struct ibc_scaling_pred - the model's breakdown for one row.
 * Per microbatch per GPU: @t_flop_s (= @t_gemm_s + @t_attn_s), @t_mem_s,
 * @t_tp_s, @t_cp_s, @t_pp_s (communication before overlap) and @t_mb_s (with
 * the exposed part).
 * Per step: @m microbatches, @t_bubble_s, @t_dp_s (before overlap),
 * @t_dp_exposed_s, @t_opt_s, @t_step_s. Whole run: @samples, @steps, @evals
 * (means, so fractional, when the samples are a mean over logged runs),
 * @t_eval_s (one evaluation), @ttt_s. @mfu is model FLOPs / (step time x
 * BF16 peak).
 * @dp_algo: algorithm chosen for a data-parallel all-reduce.
 */
struct ibc_scaling_pred {
	double m;
	double t_flop_s;
	double t_gemm_s;
	double t_attn_s;
	double t_mem_s;
	double t_tp_s;
	double t_cp_s;
	double t_pp_s;
	double t_mb_s;
	double t_bubble_s;
	double t_dp_s;
	double t_dp_exposed_s;
	double t_opt_s;
	double t_step_s;
	double t_eval_s;
	double samples;
	double steps;
	double evals;
	double ttt_s;
	double mfu;
	enum ibc_scaling_algo dp_algo;
};

/**
 * struct ibc_scaling_db - everything loaded from bench/scaling/ plus the
 * fitted values: per-stack utilization @u (achieved fraction of the peak of
 * each operation's precision for the compute-bound work) and the shared
 * @params; @runs is the extracted table of result logs (mllog-runs.csv).
 */
struct ibc_scaling_db {
	struct ibc_scaling_system sys[8];
	int nsys;
	struct ibc_scaling_workload wl[4];
	int nwl;
	struct ibc_scaling_row row[IBC_SCALING_MAX_ROWS];
	int nrow;
	struct ibc_scaling_params params;
	char stack[IBC_SCALING_MAX_STACKS][IBC_SCALING_NAME_LEN];
	double u[IBC_SCALING_MAX_STACKS];
	int nstack;
	struct ibc_mllog_table runs;
};

/* ---- workload arithmetic (scaling_model.c) ---- */
double ibc_scaling_layer_params(const struct ibc_scaling_workload *w);
double ibc_scaling_total_params(const struct ibc_scaling_workload *w);
double ibc_scaling_train_flops_per_token(const struct ibc_scaling_workload *w);
double ibc_scaling_fwd_flops_per_token(const struct ibc_scaling_workload *w);
double ibc_scaling_attn_flops_per_token(const struct ibc_scaling_workload *w, int train);
ibc_status_t ibc_scaling_rcp_samples(const struct ibc_scaling_workload *w, double gbs,
				     double *samples_p);
double ibc_scaling_bubble_fraction(int pp, int vp, double m);

/* ---- the model ---- */
const struct ibc_scaling_system *ibc_scaling_find_system(const struct ibc_scaling_db *db,
							 const char *name);
const struct ibc_scaling_workload *ibc_scaling_find_workload(const struct ibc_scaling_db *db,
							     const char *name);
int ibc_scaling_stack_index(struct ibc_scaling_db *db, const char *stack, int create);
ibc_status_t ibc_scaling_check_row(const struct ibc_scaling_db *db,
				   const struct ibc_scaling_row *r);
ibc_status_t ibc_scaling_predict(const struct ibc_scaling_db *db, const struct ibc_scaling_row *r,
				 double u, const struct ibc_scaling_params *p,
				 struct ibc_scaling_pred *pred_p);
ibc_status_t ibc_scaling_solve_u(const struct ibc_scaling_db *db, const struct ibc_scaling_row *r,
				 const struct ibc_scaling_params *p, double *u_p);
ibc_status_t ibc_scaling_solve_u_step(const struct ibc_scaling_db *db,
				      const struct ibc_scaling_row *r,
				      const struct ibc_scaling_params *p, double *u_p);
double ibc_scaling_row_step_s(const struct ibc_scaling_row *r);
ibc_status_t ibc_scaling_calibrate(struct ibc_scaling_db *db);
ibc_status_t ibc_scaling_predict_row(const struct ibc_scaling_db *db, int i,
				     struct ibc_scaling_pred *pred_p);

/* ---- the result logs next to the model (scaling_logs.c) ---- */

/**
 * struct ibc_scaling_split - a ratio of two rows' scored times, split
 * (ibc_scaling_split_rows()).
 * @ratio:          T_a / T_b.
 * @samples_ratio:  S_a / S_b, samples to converge.
 * @step_ratio:     tau_a / tau_b, steady time per sample (the step-time
 *                  ratio at equal GBS).
 * @overhead_ratio: (1 + o_a) / (1 + o_b), o = (evaluation + rest) / training.
 * @d_total_s:      T_a - T_b, and its parts: @d_samples_s = (S_a - S_b)
 *                  tau_b, @d_step_s = S_a (tau_a - tau_b), @d_eval_s,
 *                  @d_fixed_s (the rest).
 * @evals_interval: the common evaluation interval, samples (0: none), and
 *                  the split of @d_eval_s = @d_eval_samples_s (evaluations
 *                  for more samples) + @d_eval_schedule_s (an earlier first
 *                  evaluation) + @d_eval_each_s (time per evaluation).
 */
struct ibc_scaling_split {
	double ratio;
	double samples_ratio;
	double step_ratio;
	double overhead_ratio;
	double d_total_s;
	double d_samples_s;
	double d_step_s;
	double d_eval_s;
	double d_fixed_s;
	double evals_interval;
	double d_eval_samples_s;
	double d_eval_schedule_s;
	double d_eval_each_s;
};

/**
 * struct ibc_scaling_log_targets - the targets of issue 26
 * (ibc_scaling_log_targets()): the steps of the 512-GPU H100 and H200 LoRA
 * rows, model and logs; their ratio H100 / H200, model and logs; the worst
 * relative difference between a row's scored time from its logs and its
 * published time, over @nscore rows.
 */
struct ibc_scaling_log_targets {
	double step_model_h100_s;
	double step_log_h100_s;
	double step_model_h200_s;
	double step_log_h200_s;
	double ratio_model;
	double ratio_log;
	double worst_score_err;
	const char *worst_score_id;
	int nscore;
};

int ibc_scaling_row_index(const struct ibc_scaling_db *db, const char *id);
ibc_status_t ibc_scaling_split_rows(const struct ibc_scaling_row *a,
				    const struct ibc_scaling_row *b,
				    struct ibc_scaling_split *split_p);
ibc_status_t ibc_scaling_log_targets(const struct ibc_scaling_db *db,
				     struct ibc_scaling_log_targets *t_p);
void ibc_scaling_report_logs(const struct ibc_scaling_db *db, int md);
ibc_status_t ibc_scaling_report_split(const struct ibc_scaling_db *db, const char *a,
				      const char *b, int md);
ibc_status_t ibc_scaling_report_steps(const struct ibc_scaling_db *db, int md);
ibc_status_t ibc_scaling_report_log_targets(const struct ibc_scaling_db *db, int md);
ibc_status_t ibc_scaling_report_gpt3_check(const struct ibc_scaling_db *db, int md);
ibc_status_t ibc_scaling_report_all_logs(const struct ibc_scaling_db *db, int md, int targets);

/* ---- local (this machine) model ---- */

/**
 * struct ibc_scaling_local - parameters measured on this machine by run.sh
 * (bench/scaling/local-params.txt).
 * @cores:             CPU cores available to the ranks.
 * @link[t]:           alpha-beta-gamma of transport t (0 shm, 1 tcp, 2 ib) fitted
 *                     from ibc_bench at @fit_ranks ranks; @have_link[t] says
 *                     whether it was measured.
 * @grad_bytes:        bytes all-reduced per trainer step (fp32 gradients).
 * @sample_compute_s:  single-rank, single-thread compute per sample, s
 *                     (forward and backward of one sequence).
 * @step_fixed_s:      single-rank, single-thread work per step that does not
 *                     depend on the batch, s (gradient zeroing, the
 *                     gradient norm, the AdamW update of all parameters:
 *                     every rank does it in full).
 * @corun_factor:      step time of one 1-rank job while as many independent
 *                     jobs as cores run beside it, over its time alone
 *                     (shared memory bandwidth and caches, the hypervisor's
 *                     placement of the vCPUs, other users' load); <= 0 is
 *                     taken as 1.
 * @batch:             samples per step: per rank (weak) or global (strong).
 * @threads_per_rank:  compute threads per rank.
 * @overlap:           fraction of the gradient all-reduce hidden by the
 *                     trainer (0 when it all-reduces after backward).
 * @have_trainer:      1 when the trainer terms were measured.
 */
struct ibc_scaling_local {
	int cores;
	struct ibc_scaling_link link[IBC_SCALING_NTRANSPORTS];
	int have_link[IBC_SCALING_NTRANSPORTS];
	int fit_ranks;
	double grad_bytes;
	double sample_compute_s;
	double step_fixed_s;
	double corun_factor;
	double batch;
	int threads_per_rank;
	double overlap;
	int have_trainer;
};

enum ibc_scaling_mode { IBC_SCALING_WEAK = 0, IBC_SCALING_STRONG = 1 };

double ibc_scaling_local_step_s(const struct ibc_scaling_local *lp, int transport, int ranks,
				enum ibc_scaling_mode mode);
double ibc_scaling_local_busbw_Bps(const struct ibc_scaling_local *lp, int transport, int ranks,
				   double nbytes);
double ibc_scaling_local_share(const struct ibc_scaling_local *lp, int ranks);
double ibc_scaling_local_lockstep(const struct ibc_scaling_local *lp, int ranks);
double ibc_scaling_local_allreduce_s(const struct ibc_scaling_local *lp, int transport, int ranks,
				     double nbytes);

/* ---- files (scaling_io.c) ---- */
ibc_status_t ibc_scaling_load(struct ibc_scaling_db *db, const char *dir);
ibc_status_t ibc_scaling_load_local(struct ibc_scaling_local *lp, const char *path);
int ibc_scaling_transport_index(const char *name);
const char *ibc_scaling_transport_name(int transport);

#endif /* IBC_SCALING_MODEL_H */
