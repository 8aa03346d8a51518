/* SPDX-License-Identifier: MIT */
/*
 * scaling_model.c - the arithmetic of the scaling model: collective costs,
 * transformer FLOPs, one training step, time to train, and the calibration
 * of the fitted parameters. No I/O (see scaling_io.c); every formula is
 * derived in docs/scaling.md.
 *
 * Sources: Thakur, Rabenseifner, Gropp, "Optimization of Collective
 * Communication Operations in MPICH" (IJHPCA 2005) for the ring costs;
 * Sanders, Speck, Traeff, "Two-tree algorithms for full bandwidth broadcast,
 * reduction and scan" (Parallel Computing 2009) for the double binary tree
 * used by NCCL; Narayanan et al., "Efficient Large-Scale Language Model
 * Training on GPU Clusters Using Megatron-LM" (SC'21) for the FLOP count and
 * the interleaved 1F1B pipeline bubble.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "base/log.h"
#include "scaling_model.h"

/* round up, forgiving the last bits of a floating-point quotient */
static double model_ceil(double x)
{
	return ceil(x - 1e-9);
}

/**
 * ibc_scaling_ring_allreduce_s() - Time of a ring all-reduce.
 * @l:      [in] link level.
 * @n:      ranks in the ring.
 * @nbytes: bytes of the vector on each rank.
 *
 * Reduce-scatter then all-gather, 2(n-1) steps of nbytes/n each:
 * base + 2(n-1) alpha + 2(n-1)/n nbytes beta + (n-1)/n nbytes gamma
 * (Thakur et al. 2005, section 4.5; Patarasuk and Yuan 2009).
 * Return: seconds; 0 for n <= 1.
 */
double ibc_scaling_ring_allreduce_s(const struct ibc_scaling_link *l, int n, double nbytes)
{
	double f;

	if (n <= 1)
		return 0.0;
	f = (double)(n - 1) / n;
	return l->base_s + 2.0 * (n - 1) * l->alpha_s + 2.0 * f * nbytes * l->beta_s_per_B +
	       f * nbytes * l->gamma_s_per_B;
}

/**
 * ibc_scaling_ring_reduce_scatter_s() - Time of a ring reduce-scatter.
 * @l:      [in] link level.
 * @n:      ranks.
 * @nbytes: bytes of the full input vector on each rank (each rank keeps
 *          nbytes/n of the result).
 *
 * base + (n-1) alpha + (n-1)/n nbytes (beta + gamma).
 * Return: seconds; 0 for n <= 1.
 */
double ibc_scaling_ring_reduce_scatter_s(const struct ibc_scaling_link *l, int n, double nbytes)
{
	double f;

	if (n <= 1)
		return 0.0;
	f = (double)(n - 1) / n;
	return l->base_s + (n - 1) * l->alpha_s + f * nbytes * (l->beta_s_per_B + l->gamma_s_per_B);
}

/**
 * ibc_scaling_ring_allgather_s() - Time of a ring all-gather.
 * @l:      [in] link level.
 * @n:      ranks.
 * @nbytes: bytes of the full output vector (each rank contributes nbytes/n).
 *
 * base + (n-1) alpha + (n-1)/n nbytes beta.
 * Return: seconds; 0 for n <= 1.
 */
double ibc_scaling_ring_allgather_s(const struct ibc_scaling_link *l, int n, double nbytes)
{
	if (n <= 1)
		return 0.0;
	return l->base_s + (n - 1) * l->alpha_s + (double)(n - 1) / n * nbytes * l->beta_s_per_B;
}

/**
 * ibc_scaling_tree_allreduce_s() - Time of a pipelined double-binary-tree
 * all-reduce (NCCL's "tree").
 * @l:      [in] link level; @l->tree_bw_factor scales the achievable bandwidth.
 * @n:      ranks.
 * @nbytes: bytes of the vector.
 *
 * Two complementary binary trees each reduce then broadcast half of the
 * vector; every rank sends nbytes in the reduction and nbytes in the
 * broadcast, and the pipeline depth is ceil(log2 n) per phase
 * (Sanders, Speck, Traeff 2009):
 * base + 2 ceil(log2 n) alpha + 2 nbytes beta / tree_bw_factor + nbytes gamma.
 * Return: seconds; 0 for n <= 1.
 */
double ibc_scaling_tree_allreduce_s(const struct ibc_scaling_link *l, int n, double nbytes)
{
	double depth;
	double bwf = l->tree_bw_factor > 0.0 ? l->tree_bw_factor : 1.0;

	if (n <= 1)
		return 0.0;
	depth = model_ceil(log2((double)n));
	return l->base_s + 2.0 * depth * l->alpha_s + 2.0 * nbytes * l->beta_s_per_B / bwf +
	       nbytes * l->gamma_s_per_B;
}

/**
 * ibc_scaling_allreduce_s() - The faster of ring and tree, as a tuner would pick.
 * @l:      [in]  link level.
 * @n:      ranks.
 * @nbytes: bytes of the vector.
 * @algo_p: [out] chosen algorithm (may be NULL).
 *
 * Return: seconds.
 */
double ibc_scaling_allreduce_s(const struct ibc_scaling_link *l, int n, double nbytes,
			       enum ibc_scaling_algo *algo_p)
{
	double ring;
	double tree;

	if (n <= 1) {
		if (algo_p)
			*algo_p = IBC_SCALING_ALGO_NONE;
		return 0.0;
	}
	ring = ibc_scaling_ring_allreduce_s(l, n, nbytes);
	tree = ibc_scaling_tree_allreduce_s(l, n, nbytes);
	if (algo_p)
		*algo_p = tree < ring ? IBC_SCALING_ALGO_TREE : IBC_SCALING_ALGO_RING;
	return tree < ring ? tree : ring;
}

/**
 * ibc_scaling_p2p_s() - Time of one point-to-point message: alpha + nbytes beta.
 * @l:      [in] link level.
 * @nbytes: message size.
 * Return: seconds.
 */
double ibc_scaling_p2p_s(const struct ibc_scaling_link *l, double nbytes)
{
	return l->alpha_s + nbytes * l->beta_s_per_B;
}

/**
 * ibc_scaling_busbw_factor() - nccl-tests bus-bandwidth factor of all-reduce,
 * 2(n-1)/n (nccl-tests doc/PERFORMANCE.md).
 * @n: ranks.
 * Return: the factor; 0 for n <= 1.
 */
double ibc_scaling_busbw_factor(int n)
{
	return n <= 1 ? 0.0 : 2.0 * (n - 1) / n;
}

/**
 * ibc_scaling_layer_params() - Weights of one decoder layer.
 * @w: [in] workload.
 *
 * Attention: Q and output projections h x h each, K and V h x (h kv/heads)
 * each; MLP: two (GELU) or three (SwiGLU) h x ffn matrices. Biases and norms
 * (O(h)) are left out.
 * Return: parameter count.
 */
double ibc_scaling_layer_params(const struct ibc_scaling_workload *w)
{
	double h = w->hidden;
	double kv = h * w->kv_heads / w->heads;

	return 2.0 * h * h + 2.0 * h * kv + (w->gated_mlp ? 3.0 : 2.0) * h * w->ffn;
}

/**
 * ibc_scaling_total_params() - All weights: layers plus one embedding matrix.
 * @w: [in] workload.
 * Return: parameter count (GPT-3 175B gives 174.6e9 + 0.6e9).
 */
double ibc_scaling_total_params(const struct ibc_scaling_workload *w)
{
	return w->layers * ibc_scaling_layer_params(w) + w->hidden * w->vocab;
}

/**
 * ibc_scaling_train_flops_per_token() - Model FLOPs of one training token.
 * @w: [in] workload.
 *
 * A matrix of P weights costs 2P FLOP per token forward, 2P for the data
 * gradient and 2P for the weight gradient. Attention scores and the weighted
 * sum cost 4 s h per layer forward and twice that backward (12 s h in all);
 * the logit layer is h x vocab. Full training:
 * 6 L P_layer + 12 L s h + 6 h V, which for GPT-3 equals Narayanan et al.'s
 * 72 L h^2 (1 + s/(6h) + V/(12 L h)) per token (no recomputation counted).
 * LoRA (frozen base) drops the weight gradients: 4 L P_layer + 12 L s h +
 * 4 h V (adapter FLOPs are below 0.1% and left out).
 * Return: FLOP per token.
 */
double ibc_scaling_train_flops_per_token(const struct ibc_scaling_workload *w)
{
	double k = w->frozen_base ? 4.0 : 6.0;

	return k * w->layers * ibc_scaling_layer_params(w) +
	       12.0 * w->layers * w->seq * w->hidden + k * w->hidden * w->vocab;
}

/**
 * ibc_scaling_attn_flops_per_token() - The attention part of the model FLOPs
 * of one token: scores and weighted sum, 4 L s h forward and 8 L s h
 * backward (full, non-causal count as in ibc_scaling_train_flops_per_token()).
 * @w:     [in] workload.
 * @train: 1 for a training token (12 L s h), 0 for an evaluation token (4 L s h).
 * Return: FLOP per token.
 */
double ibc_scaling_attn_flops_per_token(const struct ibc_scaling_workload *w, int train)
{
	return (train ? 12.0 : 4.0) * w->layers * w->seq * w->hidden;
}

/**
 * ibc_scaling_fwd_flops_per_token() - Model FLOPs of one evaluation token:
 * 2 L P_layer + 4 L s h + 2 h V.
 * @w: [in] workload.
 * Return: FLOP per token.
 */
double ibc_scaling_fwd_flops_per_token(const struct ibc_scaling_workload *w)
{
	return 2.0 * w->layers * ibc_scaling_layer_params(w) +
	       4.0 * w->layers * w->seq * w->hidden + 2.0 * w->hidden * w->vocab;
}

/**
 * ibc_scaling_rcp_samples() - Mean samples to converge at a global batch
 * size, linearly interpolated between the reference convergence points.
 * @w:         [in]  workload with @nrcp points sorted by GBS.
 * @gbs:       global batch size, sequences.
 * @samples_p: [out] samples (sequences).
 *
 * Return: IBC_OK; IBC_ERR_INVALID_ARG outside the published range (no
 *         extrapolation: convergence beyond it is not known).
 */
ibc_status_t ibc_scaling_rcp_samples(const struct ibc_scaling_workload *w, double gbs,
				     double *samples_p)
{
	int i;

	if (w->nrcp <= 0 || gbs < w->rcp_gbs[0] || gbs > w->rcp_gbs[w->nrcp - 1]) {
		IBC_LOG_WARN(BENCH, "%s: no reference convergence point covers gbs %.0f",
			     w->name, gbs);
		return IBC_ERR_INVALID_ARG;
	}
	for (i = 0; i < w->nrcp - 1; i++)
		if (gbs <= w->rcp_gbs[i + 1])
			break;
	if (i == w->nrcp - 1 || w->rcp_gbs[i + 1] == w->rcp_gbs[i]) {
		*samples_p = w->rcp_samples[i];
		return IBC_OK;
	}
	*samples_p = w->rcp_samples[i] + (gbs - w->rcp_gbs[i]) /
		     (w->rcp_gbs[i + 1] - w->rcp_gbs[i]) * (w->rcp_samples[i + 1] - w->rcp_samples[i]);
	return IBC_OK;
}

/**
 * ibc_scaling_bubble_fraction() - Idle fraction of a 1F1B pipeline relative to
 * the useful work, (pp - 1) / (vp m) (Narayanan et al. 2021, section 2.2).
 * @pp: pipeline stages.
 * @vp: model chunks per GPU (interleaved schedule; 1 = plain 1F1B).
 * @m:  microbatches per step.
 * Return: the fraction; 0 for pp <= 1.
 */
double ibc_scaling_bubble_fraction(int pp, int vp, double m)
{
	if (pp <= 1 || m <= 0.0)
		return 0.0;
	return (double)(pp - 1) / ((vp > 0 ? vp : 1) * m);
}

/**
 * ibc_scaling_find_system() - Look up a system by its hardware.conf id.
 * @db:   [in] database.
 * @name: system id.
 * Return: the system, or NULL when unknown.
 */
const struct ibc_scaling_system *ibc_scaling_find_system(const struct ibc_scaling_db *db,
							 const char *name)
{
	int i;

	for (i = 0; i < db->nsys; i++)
		if (strcmp(db->sys[i].name, name) == 0)
			return &db->sys[i];
	return NULL;
}

/**
 * ibc_scaling_find_workload() - Look up a workload by its workloads.conf name.
 * @db:   [in] database.
 * @name: workload name.
 * Return: the workload, or NULL when unknown.
 */
const struct ibc_scaling_workload *ibc_scaling_find_workload(const struct ibc_scaling_db *db,
							     const char *name)
{
	int i;

	for (i = 0; i < db->nwl; i++)
		if (strcmp(db->wl[i].name, name) == 0)
			return &db->wl[i];
	return NULL;
}

/**
 * ibc_scaling_stack_index() - Slot of a software stack's fitted utilization.
 * @db:     [in,out] database.
 * @stack:  stack name.
 * @create: 1 to add it when missing.
 * Return: index into @db->u, or -1 when missing (or the table is full).
 */
int ibc_scaling_stack_index(struct ibc_scaling_db *db, const char *stack, int create)
{
	int i;

	for (i = 0; i < db->nstack; i++)
		if (strcmp(db->stack[i], stack) == 0)
			return i;
	if (!create || db->nstack >= IBC_SCALING_MAX_STACKS)
		return -1;
	snprintf(db->stack[db->nstack], sizeof(db->stack[0]), "%s", stack);
	db->u[db->nstack] = 0.0;
	return db->nstack++;
}

/**
 * ibc_scaling_check_row() - Validate a row's layout against its system.
 * @db: [in] database.
 * @r:  [in] row.
 *
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (logged) when the system or workload is
 *         unknown, the GPU count is not a multiple of tp x pp x cp, the GBS
 *         is not a whole number of microbatches per replica, or the layers do
 *         not split evenly over pp x vp.
 */
ibc_status_t ibc_scaling_check_row(const struct ibc_scaling_db *db,
				   const struct ibc_scaling_row *r)
{
	const struct ibc_scaling_workload *w = ibc_scaling_find_workload(db, r->bench);
	long mp = (long)r->tp * r->pp * r->cp;
	long dp;

	if (!ibc_scaling_find_system(db, r->system) || !w) {
		IBC_LOG_WARN(BENCH, "row %s: unknown system '%s' or workload '%s'", r->id,
			     r->system, r->bench);
		return IBC_ERR_INVALID_ARG;
	}
	if (r->tp < 1 || r->pp < 1 || r->cp < 1 || r->vp < 1 || r->mbs < 1 || r->gbs < 1 ||
	    r->ngpus < 1 || r->ngpus % mp != 0) {
		IBC_LOG_WARN(BENCH, "row %s: %d gpus do not split into tp %d x pp %d x cp %d",
			     r->id, r->ngpus, r->tp, r->pp, r->cp);
		return IBC_ERR_INVALID_ARG;
	}
	dp = r->ngpus / mp;
	if (r->gbs % (dp * r->mbs) != 0) {
		IBC_LOG_WARN(BENCH, "row %s: gbs %ld is not a multiple of dp %ld x mbs %d", r->id,
			     r->gbs, dp, r->mbs);
		return IBC_ERR_INVALID_ARG;
	}
	if (w->layers % (r->pp * r->vp) != 0) {
		IBC_LOG_WARN(BENCH, "row %s: %d layers do not split into pp %d x vp %d chunks",
			     r->id, w->layers, r->pp, r->vp);
		return IBC_ERR_INVALID_ARG;
	}
	return IBC_OK;
}

/*
 * Convergence and evaluation schedule: the run evaluates every
 * ceil(interval / gbs) steps (after an optional first block), and stops at
 * the first evaluation at or past the samples needed. The row's own
 * schedule (from its logs) replaces the workload's. When the samples are a
 * mean over logged runs, each of which stopped at an evaluation, the steps
 * and evaluations are the same means: samples / gbs and
 * 1 + (samples - first) / interval.
 */
static void model_schedule(const struct ibc_scaling_workload *w, const struct ibc_scaling_row *r,
			   double samples, double *steps_p, double *evals_p)
{
	double gbs = (double)r->gbs;
	double first = r->first_eval_samples > 0.0 ? r->first_eval_samples : w->first_eval_samples;
	double interval = r->eval_interval_samples > 0.0 ? r->eval_interval_samples :
			  w->eval_interval_samples;
	double interval_steps = model_ceil(interval / gbs);
	double first_steps;
	double evals;

	if (r->samples_from_log) {
		*steps_p = samples / gbs;
		if (first > 0.0)
			*evals_p = 1.0 + (samples > first ? (samples - first) / interval : 0.0);
		else
			*evals_p = samples / interval;
		return;
	}
	if (first > 0.0) {
		first_steps = model_ceil(first / gbs);
		if (samples <= first_steps * gbs)
			evals = 1.0;
		else
			evals = 1.0 + model_ceil((samples - first_steps * gbs) /
						 (interval_steps * gbs));
		*steps_p = first_steps + (evals - 1.0) * interval_steps;
	} else {
		evals = model_ceil(samples / (interval_steps * gbs));
		*steps_p = evals * interval_steps;
	}
	*evals_p = evals;
}

/**
 * ibc_scaling_predict() - Model one row at a given utilization.
 * @db:     [in]  database (systems, workloads).
 * @r:      [in]  the configuration.
 * @u:      achieved fraction of the BF16 peak for the FLOP-bound work.
 * @p:      [in]  shared parameters (eta, host and eval overheads).
 * @pred_p: [out] breakdown and time to train.
 *
 * Per microbatch on one GPU (tokens mbs s / cp, sharded tp ways):
 *   t_flop = mbs s / (tp pp cp) x (F_gemm / P_gemm + F_attn / P_attn) / u,
 *            P = the FP8 or the BF16 peak, as the row's configuration runs
 *            the weight GEMMs and the attention
 *   t_mem  = mbs s / (tp pp cp) x L elem_bytes_per_h h / HBM
 *   t_tp   = L/pp x 4 x [RS + AG](tp, mbs s/cp h 2 B)   (sequence parallel)
 *   t_cp   = L/pp x 3 x AG(cp, mbs s 2 h_kv/tp 2 B)    (ring attention K,V of
 *            the KV heads a GPU holds)
 *   t_pp   = 2 vp x p2p(mbs s/cp h 2 B / tp)
 *   t_mb   = t_flop + t_mem + (1 - eta)(t_tp + t_cp + t_pp)
 * Per step: (m + (pp-1)/vp) t_mb (interleaved 1F1B) + exposed data-parallel
 * time max((1 - eta) t_dp, t_dp - m t_mb) + optimizer + host, where t_dp is
 * ring reduce-scatter(grads) + all-gather(params) for the distributed
 * optimizer or the faster all-reduce otherwise. Links: NVLink inside a node,
 * the per-GPU NIC across nodes (ranks ordered tp, cp, dp, pp).
 * Evaluation: ceil(eval_seqs / gbs) forward-only batches + a fixed overhead.
 *
 * Return: IBC_OK; IBC_ERR_INVALID_ARG for an invalid row or u <= 0, or when
 *         no convergence point covers the row's GBS.
 */
ibc_status_t ibc_scaling_predict(const struct ibc_scaling_db *db, const struct ibc_scaling_row *r,
				 double u, const struct ibc_scaling_params *p,
				 struct ibc_scaling_pred *pred_p)
{
	const struct ibc_scaling_system *s;
	const struct ibc_scaling_workload *w;
	const struct ibc_scaling_link *tp_l, *cp_l, *dp_l, *pp_l;
	struct ibc_scaling_pred pr;
	double dp, shard, layers_gpu, h_kv, m_tp, m_cp, m_pp, keep;
	double p_gpu, trainable_gpu, n_grad, mb_tokens_gpu, t_mb_fwd, m_eval, batches;
	double peak_g, peak_a, f_attn, f_attn_fwd, kv_gpu;
	int gpn;
	ibc_status_t st;

	IBC_CHECK(ibc_scaling_check_row(db, r));
	if (!(u > 0.0)) {
		IBC_LOG_WARN(BENCH, "row %s: utilization %g must be positive", r->id, u);
		return IBC_ERR_INVALID_ARG;
	}
	s = ibc_scaling_find_system(db, r->system);
	w = ibc_scaling_find_workload(db, r->bench);
	peak_g = r->gemm_fp8 ? s->peak_fp8_flops : s->peak_flops;
	peak_a = r->attn_fp8 ? s->peak_fp8_flops : s->peak_flops;
	if (!(peak_g > 0.0) || !(peak_a > 0.0)) {
		IBC_LOG_WARN(BENCH, "row %s: FP8 requested but system %s has no FP8 peak", r->id,
			     s->name);
		return IBC_ERR_INVALID_ARG;
	}
	memset(&pr, 0, sizeof(pr));
	gpn = s->gpus_per_node;
	dp = (double)r->ngpus / ((double)r->tp * r->pp * r->cp);
	shard = (double)r->tp * r->pp * r->cp;
	layers_gpu = (double)w->layers / r->pp;
	h_kv = w->hidden * w->kv_heads / w->heads;
	keep = 1.0 - p->eta;

	tp_l = r->tp <= gpn ? &s->nvlink : &s->net;
	cp_l = r->tp * r->cp <= gpn ? &s->nvlink : &s->net;
	dp_l = (double)r->tp * r->cp * dp <= gpn ? &s->nvlink : &s->net;
	pp_l = (double)r->tp * r->cp * dp >= gpn ? &s->net : &s->nvlink;

	pr.m = (double)r->gbs / (dp * r->mbs);
	mb_tokens_gpu = r->mbs * w->seq / shard;
	f_attn = ibc_scaling_attn_flops_per_token(w, 1);
	pr.t_gemm_s = mb_tokens_gpu * (ibc_scaling_train_flops_per_token(w) - f_attn) / (peak_g * u);
	pr.t_attn_s = mb_tokens_gpu * f_attn / (peak_a * u);
	pr.t_flop_s = pr.t_gemm_s + pr.t_attn_s;
	pr.t_mem_s = mb_tokens_gpu * w->layers * w->elem_bytes_per_h * w->hidden / s->hbm_Bps;

	m_tp = r->mbs * w->seq / r->cp * w->hidden * 2.0;
	pr.t_tp_s = layers_gpu * 4.0 * (ibc_scaling_ring_reduce_scatter_s(tp_l, r->tp, m_tp) +
					ibc_scaling_ring_allgather_s(tp_l, r->tp, m_tp));
	/* Megatron splits the KV heads over tp (one each when there are fewer) */
	kv_gpu = w->kv_heads >= r->tp ? h_kv / r->tp : h_kv / w->kv_heads;
	m_cp = r->mbs * w->seq * 2.0 * kv_gpu * 2.0;
	pr.t_cp_s = layers_gpu * 3.0 * ibc_scaling_ring_allgather_s(cp_l, r->cp, m_cp);
	m_pp = r->mbs * w->seq / r->cp * w->hidden * 2.0 / r->tp;
	pr.t_pp_s = r->pp > 1 ? 2.0 * r->vp * ibc_scaling_p2p_s(pp_l, m_pp) : 0.0;
	pr.t_mb_s = pr.t_flop_s + pr.t_mem_s + keep * (pr.t_tp_s + pr.t_cp_s + pr.t_pp_s);
	pr.t_bubble_s = r->pp > 1 ? (double)(r->pp - 1) / r->vp * pr.t_mb_s : 0.0;

	/* data parallel: gradients are reduced over dp x cp ranks */
	p_gpu = w->layers * ibc_scaling_layer_params(w) / (r->tp * r->pp) +
		w->hidden * w->vocab / r->tp;
	trainable_gpu = w->frozen_base ? w->lora_params / (r->tp * r->pp) : p_gpu;
	n_grad = dp * r->cp;
	if (r->dist_opt) {
		pr.t_dp_s = ibc_scaling_ring_reduce_scatter_s(dp_l, (int)n_grad,
							      trainable_gpu * r->grad_bytes_per_elem) +
			    ibc_scaling_ring_allgather_s(dp_l, (int)n_grad,
							 trainable_gpu * r->param_bytes_per_elem);
		pr.dp_algo = n_grad > 1 ? IBC_SCALING_ALGO_RING : IBC_SCALING_ALGO_NONE;
		pr.t_opt_s = trainable_gpu / n_grad * p->opt_bytes_per_param / s->hbm_Bps;
	} else {
		pr.t_dp_s = ibc_scaling_allreduce_s(dp_l, (int)n_grad,
						    trainable_gpu * r->grad_bytes_per_elem, &pr.dp_algo);
		pr.t_opt_s = trainable_gpu * p->opt_bytes_per_param / s->hbm_Bps;
	}
	pr.t_dp_exposed_s = keep * pr.t_dp_s;
	if (pr.t_dp_s - pr.m * pr.t_mb_s > pr.t_dp_exposed_s)
		pr.t_dp_exposed_s = pr.t_dp_s - pr.m * pr.t_mb_s;
	pr.t_step_s = pr.m * pr.t_mb_s + pr.t_bubble_s + pr.t_dp_exposed_s + pr.t_opt_s +
		      p->host_step_s;

	/* evaluation: forward only, one third of the element-wise traffic */
	f_attn_fwd = ibc_scaling_attn_flops_per_token(w, 0);
	t_mb_fwd = mb_tokens_gpu * ((ibc_scaling_fwd_flops_per_token(w) - f_attn_fwd) / peak_g +
				    f_attn_fwd / peak_a) / u +
		   pr.t_mem_s / 3.0 + keep * (pr.t_tp_s / 2.0 + pr.t_cp_s / 3.0 + pr.t_pp_s / 2.0);
	m_eval = pr.m;
	batches = model_ceil(w->eval_seqs / (double)r->gbs);
	pr.t_eval_s = batches * (m_eval + (r->pp > 1 ? (double)(r->pp - 1) / r->vp : 0.0)) *
		      t_mb_fwd + p->eval_fixed_s;

	if (r->samples > 0.0) {
		pr.samples = r->samples;
	} else {
		st = ibc_scaling_rcp_samples(w, (double)r->gbs, &pr.samples);
		if (st != IBC_OK) {
			IBC_LOG_WARN(BENCH, "row %s: samples to converge unknown", r->id);
			return st;
		}
	}
	model_schedule(w, r, pr.samples, &pr.steps, &pr.evals);
	pr.ttt_s = pr.steps * pr.t_step_s + pr.evals * pr.t_eval_s;
	pr.mfu = r->gbs * w->seq * ibc_scaling_train_flops_per_token(w) / r->ngpus /
		 (pr.t_step_s * s->peak_flops);
	*pred_p = pr;
	return IBC_OK;
}

/**
 * ibc_scaling_solve_u() - The utilization that reproduces a row's published
 * time to train, by bisection on log(u) in [0.01, 4].
 * @db:  [in]  database.
 * @r:   [in]  calibration row.
 * @p:   [in]  shared parameters.
 * @u_p: [out] utilization.
 *
 * Return: IBC_OK; IBC_ERR_INVALID_ARG when the row is invalid or no u in the
 *         interval reproduces it (logged).
 */
ibc_status_t ibc_scaling_solve_u(const struct ibc_scaling_db *db, const struct ibc_scaling_row *r,
				 const struct ibc_scaling_params *p, double *u_p)
{
	struct ibc_scaling_pred pr;
	double lo = log(0.01);
	double hi = log(4.0);
	double target = r->published_min * 60.0;
	double mid;
	int it;

	IBC_CHECK(ibc_scaling_predict(db, r, exp(lo), p, &pr));
	if (pr.ttt_s < target) {
		IBC_LOG_WARN(BENCH, "row %s: even u = 0.01 is faster than published", r->id);
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_scaling_predict(db, r, exp(hi), p, &pr));
	if (pr.ttt_s > target) {
		IBC_LOG_WARN(BENCH, "row %s: even u = 4 is slower than published (%.1f > %.1f s)",
			     r->id, pr.ttt_s, target);
		return IBC_ERR_INVALID_ARG;
	}
	for (it = 0; it < 200; it++) {
		mid = 0.5 * (lo + hi);
		IBC_CHECK(ibc_scaling_predict(db, r, exp(mid), p, &pr));
		if (pr.ttt_s > target)
			lo = mid;
		else
			hi = mid;
	}
	*u_p = exp(0.5 * (lo + hi));
	return IBC_OK;
}

/**
 * ibc_scaling_row_step_s() - The step time a row's logs show.
 * @r: [in] row.
 * Return: the scored runs' mean steady step (@r->log) when the row has logs,
 *         else @r->logged_step_s (0 when unknown).
 */
double ibc_scaling_row_step_s(const struct ibc_scaling_row *r)
{
	return r->have_log ? r->log.step_s : r->logged_step_s;
}

/**
 * ibc_scaling_solve_u_step() - The utilization that reproduces the step time
 * of a row's logs, by bisection on log(u) in [0.01, 4].
 * @db:  [in]  database.
 * @r:   [in]  calibration row with a logged step (ibc_scaling_row_step_s()).
 * @p:   [in]  shared parameters.
 * @u_p: [out] utilization.
 *
 * Return: IBC_OK; IBC_ERR_INVALID_ARG when the row is invalid, has no logged
 *         step, or no u in the interval reproduces it (logged).
 */
ibc_status_t ibc_scaling_solve_u_step(const struct ibc_scaling_db *db,
				      const struct ibc_scaling_row *r,
				      const struct ibc_scaling_params *p, double *u_p)
{
	struct ibc_scaling_pred pr;
	double lo = log(0.01);
	double hi = log(4.0);
	double target = ibc_scaling_row_step_s(r);
	double mid;
	int it;

	if (!(target > 0.0)) {
		IBC_LOG_WARN(BENCH, "row %s: no logged step time to calibrate on", r->id);
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_scaling_predict(db, r, exp(lo), p, &pr));
	if (pr.t_step_s < target) {
		IBC_LOG_WARN(BENCH, "row %s: even u = 0.01 gives a shorter step than logged", r->id);
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_scaling_predict(db, r, exp(hi), p, &pr));
	if (pr.t_step_s > target) {
		IBC_LOG_WARN(BENCH, "row %s: even u = 4 gives a longer step than logged (%.3f > %.3f s)",
			     r->id, pr.t_step_s, target);
		return IBC_ERR_INVALID_ARG;
	}
	for (it = 0; it < 200; it++) {
		mid = 0.5 * (lo + hi);
		IBC_CHECK(ibc_scaling_predict(db, r, exp(mid), p, &pr));
		if (pr.t_step_s > target)
			lo = mid;
		else
			hi = mid;
	}
	*u_p = exp(0.5 * (lo + hi));
	return IBC_OK;
}

static int model_find_role(const struct ibc_scaling_db *db, const char *role, const char *stack)
{
	int i;
	int found = -1;

	for (i = 0; i < db->nrow; i++) {
		if (strcmp(db->row[i].role, role) != 0)
			continue;
		if (stack && strcmp(db->row[i].stack, stack) != 0)
			continue;
		if (found >= 0)
			return -2;
		found = i;
	}
	return found;
}

/* residual of the eta-calibration row when u is re-fitted to its stack row */
static ibc_status_t model_eta_residual(struct ibc_scaling_db *db, int iu, int ie, double eta,
				       double *res_p, double *u_p)
{
	struct ibc_scaling_params p = db->params;
	struct ibc_scaling_pred pr;
	double u;

	p.eta = eta;
	IBC_CHECK(ibc_scaling_solve_u(db, &db->row[iu], &p, &u));
	IBC_CHECK(ibc_scaling_predict(db, &db->row[ie], u, &p, &pr));
	*res_p = pr.ttt_s - db->row[ie].published_min * 60.0;
	*u_p = u;
	return IBC_OK;
}

/**
 * ibc_scaling_calibrate() - Fit the model's free parameters.
 * @db: [in,out] database; fills @db->params.eta and @db->u[].
 *
 * Exactly one row has role "calib-eta"; together with the "calib-u" row of
 * its stack it fixes eta and that stack's u (two equations, two unknowns:
 * bisection on eta with u re-solved at every step). Every other stack's u
 * comes from its own "calib-u" row (published time) or "calib-u-step" row
 * (step time of its logs) at that eta. All other rows are predictions. When no eta in [0, 0.999] matches, eta is clamped to the
 * nearer end and a warning is logged.
 *
 * Return: IBC_OK; IBC_ERR_INVALID_ARG when a stack lacks exactly one
 *         calib-u or calib-u-step row, several calib-eta rows exist, or a
 *         solve fails.
 */
ibc_status_t ibc_scaling_calibrate(struct ibc_scaling_db *db)
{
	double lo = 0.0;
	double hi = 0.999;
	double rlo, rhi, rmid, u, mid;
	int ie, iu, is, i, k, it;

	db->nstack = 0;
	for (i = 0; i < db->nrow; i++)
		if (ibc_scaling_stack_index(db, db->row[i].stack, 1) < 0) {
			IBC_LOG_WARN(BENCH, "too many software stacks");
			return IBC_ERR_INVALID_ARG;
		}
	ie = model_find_role(db, "calib-eta", NULL);
	if (ie == -2) {
		IBC_LOG_WARN(BENCH, "more than one calib-eta row");
		return IBC_ERR_INVALID_ARG;
	}
	if (ie >= 0) {
		iu = model_find_role(db, "calib-u", db->row[ie].stack);
		if (iu < 0) {
			IBC_LOG_WARN(BENCH, "stack %s needs exactly one calib-u row",
				     db->row[ie].stack);
			return IBC_ERR_INVALID_ARG;
		}
		IBC_CHECK(model_eta_residual(db, iu, ie, lo, &rlo, &u));
		IBC_CHECK(model_eta_residual(db, iu, ie, hi, &rhi, &u));
		if (rlo <= 0.0) {
			IBC_LOG_WARN(BENCH, "eta: the model is fast enough without overlap; eta = 0");
			hi = lo;
		} else if (rhi >= 0.0) {
			IBC_LOG_WARN(BENCH, "eta: full overlap is still too slow; eta = %.3f", hi);
			lo = hi;
		}
		for (it = 0; it < 100 && hi > lo; it++) {
			mid = 0.5 * (lo + hi);
			IBC_CHECK(model_eta_residual(db, iu, ie, mid, &rmid, &u));
			if (rmid > 0.0)
				lo = mid;
			else
				hi = mid;
		}
		db->params.eta = 0.5 * (lo + hi);
	}
	for (k = 0; k < db->nstack; k++) {
		iu = model_find_role(db, "calib-u", db->stack[k]);
		is = model_find_role(db, "calib-u-step", db->stack[k]);
		if ((iu < 0) == (is < 0) || iu == -2 || is == -2) {
			IBC_LOG_WARN(BENCH, "stack %s needs exactly one calib-u or calib-u-step row",
				     db->stack[k]);
			return IBC_ERR_INVALID_ARG;
		}
		if (iu >= 0)
			IBC_CHECK(ibc_scaling_solve_u(db, &db->row[iu], &db->params, &db->u[k]));
		else
			IBC_CHECK(ibc_scaling_solve_u_step(db, &db->row[is], &db->params,
							   &db->u[k]));
	}
	return IBC_OK;
}

/**
 * ibc_scaling_predict_row() - Predict row @i with its stack's fitted u.
 * @db:     [in]  calibrated database.
 * @i:      row index.
 * @pred_p: [out] prediction.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG for a bad index or an uncalibrated stack.
 */
ibc_status_t ibc_scaling_predict_row(const struct ibc_scaling_db *db, int i,
				     struct ibc_scaling_pred *pred_p)
{
	int k;

	if (i < 0 || i >= db->nrow)
		return IBC_ERR_INVALID_ARG;
	for (k = 0; k < db->nstack; k++)
		if (strcmp(db->stack[k], db->row[i].stack) == 0)
			break;
	if (k == db->nstack || !(db->u[k] > 0.0)) {
		IBC_LOG_WARN(BENCH, "row %s: stack %s is not calibrated", db->row[i].id,
			     db->row[i].stack);
		return IBC_ERR_INVALID_ARG;
	}
	return ibc_scaling_predict(db, &db->row[i], db->u[k], &db->params, pred_p);
}

/**
 * ibc_scaling_local_share() - Stretch of a rank's compute on this host.
 * @lp:    [in] local parameters (cores, threads per rank, co-run factor).
 * @ranks: processes on this host.
 *
 * Two effects, both measured or counted, none fitted to a predicted row:
 * (1) busy neighbours: with k = min(ranks x threads, cores) cores busy, a
 * rank runs slower by 1 + (corun_factor - 1)(k - 1)/(cores - 1), linear
 * between 1 (alone) and the measured co-run factor (all cores busy);
 * (2) time sharing: beyond the cores, the scheduler shares them fairly, so
 * compute takes max(1, ranks x threads / cores) times longer (fluid fair
 * share; the kernel's load balancer migrates ranks during a long
 * computation).
 * Return: the product of (1) and (2), >= 1 when corun_factor >= 1.
 */
double ibc_scaling_local_share(const struct ibc_scaling_local *lp, int ranks)
{
	int cores = lp->cores > 0 ? lp->cores : 1;
	double busy = (double)ranks * (lp->threads_per_rank > 0 ? lp->threads_per_rank : 1);
	double corun = lp->corun_factor > 0.0 ? lp->corun_factor : 1.0;
	double k = busy < cores ? busy : cores;
	double occ = cores > 1 ? 1.0 + (corun - 1.0) * (k - 1.0) / (cores - 1) : 1.0;

	return occ * (busy > cores ? busy / cores : 1.0);
}

/**
 * ibc_scaling_local_lockstep() - Stretch of a collective on a time-shared host.
 * @lp:    [in] local parameters (cores, threads per rank).
 * @ranks: processes on this host.
 *
 * A ring step needs every rank's piece before the next step starts, so the
 * collective advances at the pace of the busiest core, which runs
 * ceil(ranks x threads / cores) of the ranks one after another: 3 ranks on
 * 2 cores take 2x, not 1.5x, per step (the collective waits for the
 * slowest rank). The co-run factor is not applied: the link parameters are
 * fitted at fit_ranks <= cores ranks, with those cores already busy.
 * Return: max(1, ceil(ranks x threads / cores)).
 */
double ibc_scaling_local_lockstep(const struct ibc_scaling_local *lp, int ranks)
{
	double busy = (double)ranks * (lp->threads_per_rank > 0 ? lp->threads_per_rank : 1);
	double s = busy / (lp->cores > 0 ? lp->cores : 1);

	return s < 1.0 ? 1.0 : model_ceil(s);
}

/**
 * ibc_scaling_local_allreduce_s() - Predicted all-reduce time on this host.
 * @lp:        [in] measured local parameters.
 * @transport: 0 shm, 1 tcp, 2 ib.
 * @ranks:     processes.
 * @nbytes:    message size, bytes.
 *
 * The faster of ring and tree with the alpha, beta, gamma fitted at
 * @lp->fit_ranks ranks (at most the cores, so unstretched), times
 * ibc_scaling_local_lockstep().
 * Return: seconds (0 for one rank, measured link or not); negative when
 * the transport was not measured.
 */
double ibc_scaling_local_allreduce_s(const struct ibc_scaling_local *lp, int transport, int ranks,
				     double nbytes)
{
	if (transport < 0 || transport >= IBC_SCALING_NTRANSPORTS || ranks < 1)
		return -1.0;
	if (ranks == 1)
		return 0.0;
	if (!lp->have_link[transport])
		return -1.0;
	return ibc_scaling_local_lockstep(lp, ranks) *
	       ibc_scaling_allreduce_s(&lp->link[transport], ranks, nbytes, NULL);
}

/**
 * ibc_scaling_local_step_s() - Predicted trainer step on this machine.
 * @lp:        [in] measured local parameters.
 * @transport: 0 shm, 1 tcp, 2 ib.
 * @ranks:     processes.
 * @mode:      weak (batch per rank fixed) or strong (global batch fixed).
 *
 * step = share x (step_fixed_s + sample_compute_s x samples per rank)
 *        + (1 - overlap) x lockstep x all-reduce(grad_bytes)
 * with share (co-run slowdown x time sharing) and lockstep from
 * ibc_scaling_local_share() and ibc_scaling_local_lockstep(). step_fixed_s
 * does not shrink with the per-rank batch (every rank zeroes, norms and
 * updates all parameters), so it bounds strong scaling.
 * Return: seconds; a negative value when the needed terms were not measured.
 */
double ibc_scaling_local_step_s(const struct ibc_scaling_local *lp, int transport, int ranks,
				enum ibc_scaling_mode mode)
{
	double per_rank;
	double comm;

	if (!lp->have_trainer || transport < 0 || transport >= IBC_SCALING_NTRANSPORTS || ranks < 1)
		return -1.0;
	comm = ibc_scaling_local_allreduce_s(lp, transport, ranks, lp->grad_bytes);
	if (comm < 0.0)
		return -1.0;
	per_rank = mode == IBC_SCALING_WEAK ? lp->batch : lp->batch / ranks;
	return ibc_scaling_local_share(lp, ranks) *
		       (lp->step_fixed_s + lp->sample_compute_s * per_rank) +
	       (1.0 - lp->overlap) * comm;
}

/**
 * ibc_scaling_local_busbw_Bps() - Predicted all-reduce bus bandwidth on this
 * machine, nbytes / t x 2(n-1)/n, t from ibc_scaling_local_allreduce_s().
 * @lp:        [in] measured local parameters.
 * @transport: 0 shm, 1 tcp, 2 ib.
 * @ranks:     processes.
 * @nbytes:    message size.
 * Return: bytes/s; a negative value when the transport was not measured.
 */
double ibc_scaling_local_busbw_Bps(const struct ibc_scaling_local *lp, int transport, int ranks,
				   double nbytes)
{
	double t;

	if (ranks < 2)
		return -1.0;
	t = ibc_scaling_local_allreduce_s(lp, transport, ranks, nbytes);
	if (!(t > 0.0))
		return -1.0;
	return nbytes / t * ibc_scaling_busbw_factor(ranks);
}
