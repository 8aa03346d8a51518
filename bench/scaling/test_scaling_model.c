/* SPDX-License-Identifier: MIT */
/*
 * test_scaling_model.c - unit tests of the scaling model's arithmetic
 * (scaling_model.c): collective costs, FLOP and parameter counts, reference
 * convergence interpolation, pipeline bubble, one full prediction of a
 * synthetic row worked out by hand, and the local (this machine) model.
 * Every expected value is a closed form computed here, independently of
 * the code under test.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "scaling_model.h"
#include "tap.h"

static int close_to(double got, double want, double rel)
{
	if (want == 0.0)
		return fabs(got) < 1e-300;
	return fabs(got - want) <= rel * fabs(want);
}

#define IS_CLOSE(got, want, rel, ...)                                                  \
	do {                                                                           \
		double got_ = (got), want_ = (want);                                   \
		if (!tap_ok(close_to(got_, want_, (rel)), __VA_ARGS__))                \
			tap_diag("got %.17g want %.17g", got_, want_);                 \
	} while (0)

static void test_collectives(void)
{
	struct ibc_scaling_link l = {
		.alpha_s = 1e-6, .base_s = 5e-6, .beta_s_per_B = 1e-9, .gamma_s_per_B = 0.5e-9,
		.tree_bw_factor = 0.9,
	};
	enum ibc_scaling_algo algo = IBC_SCALING_ALGO_COUNT;
	double m = 1e6;

	/* ring all-reduce, n = 4: base + 6 alpha + 1.5 M beta + 0.75 M gamma */
	IS_CLOSE(ibc_scaling_ring_allreduce_s(&l, 4, m), 5e-6 + 6e-6 + 1.5e-3 + 0.375e-3, 1e-12,
		 "ring all-reduce n=4 M=1e6");
	tap_ok(ibc_scaling_ring_allreduce_s(&l, 1, m) == 0.0, "ring all-reduce with one rank is free");
	/* reduce-scatter n = 8: base + 7 alpha + 7/8 M (beta + gamma) */
	IS_CLOSE(ibc_scaling_ring_reduce_scatter_s(&l, 8, m), 5e-6 + 7e-6 + 0.875e6 * 1.5e-9, 1e-12,
		 "ring reduce-scatter n=8");
	IS_CLOSE(ibc_scaling_ring_allgather_s(&l, 8, m), 5e-6 + 7e-6 + 0.875e6 * 1e-9, 1e-12,
		 "ring all-gather n=8 (no reduction term)");
	/* tree n = 5: depth ceil(log2 5) = 3 */
	IS_CLOSE(ibc_scaling_tree_allreduce_s(&l, 5, m), 5e-6 + 6e-6 + 2e6 * 1e-9 / 0.9 + 1e6 * 0.5e-9,
		 1e-12, "double binary tree n=5");
	/* tree n = 8: depth exactly 3 (no off-by-one at powers of two) */
	IS_CLOSE(ibc_scaling_tree_allreduce_s(&l, 8, m), 5e-6 + 6e-6 + 2e6 * 1e-9 / 0.9 + 1e6 * 0.5e-9,
		 1e-12, "double binary tree n=8");
	tap_ok(ibc_scaling_tree_allreduce_s(&l, 1, m) == 0.0, "tree with one rank is free");
	/* small messages at scale: latency decides, the tree wins */
	ibc_scaling_allreduce_s(&l, 64, 8.0, &algo);
	tap_is_int(algo, IBC_SCALING_ALGO_TREE, "8 bytes on 64 ranks: tree");
	ibc_scaling_allreduce_s(&l, 64, 1e9, &algo);
	tap_is_int(algo, IBC_SCALING_ALGO_RING, "1 GB on 64 ranks: ring (2 x 63/64 < 2 / 0.9)");
	IS_CLOSE(ibc_scaling_allreduce_s(&l, 64, 1e9, NULL), ibc_scaling_ring_allreduce_s(&l, 64, 1e9),
		 1e-15, "all-reduce returns the ring time when ring wins");
	ibc_scaling_allreduce_s(&l, 1, 1e9, &algo);
	tap_is_int(algo, IBC_SCALING_ALGO_NONE, "one rank: no algorithm");
	IS_CLOSE(ibc_scaling_p2p_s(&l, 1e6), 1e-6 + 1e-3, 1e-12, "p2p = alpha + M beta");
	IS_CLOSE(ibc_scaling_busbw_factor(4), 1.5, 1e-15, "busbw factor 2(n-1)/n at n=4");
	tap_ok(ibc_scaling_busbw_factor(1) == 0.0, "busbw factor at n=1 is 0");
}

static void test_workloads(void)
{
	struct ibc_scaling_workload g, l;
	double L, h, s, V, want, smp;

	memset(&g, 0, sizeof(g));
	snprintf(g.name, sizeof(g.name), "gpt3");
	g.layers = 96;
	g.hidden = 12288;
	g.ffn = 4 * 12288;
	g.heads = 96;
	g.kv_heads = 96;
	g.vocab = 50257;
	g.seq = 2048;
	L = g.layers;
	h = g.hidden;
	s = g.seq;
	V = g.vocab;
	/* Narayanan et al. 2021, eq. (3) without recomputation (72 instead of 96) */
	want = 72.0 * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * L * h));
	IS_CLOSE(ibc_scaling_train_flops_per_token(&g), want, 1e-12,
		 "GPT-3 training FLOP/token = 72 L h^2 (1 + s/6h + V/12Lh)");
	IS_CLOSE(ibc_scaling_fwd_flops_per_token(&g), want / 3.0, 1e-12,
		 "forward is one third of training");
	IS_CLOSE(ibc_scaling_layer_params(&g), 12.0 * h * h, 1e-15, "GPT-3 layer = 12 h^2 weights");
	tap_ok(fabs(ibc_scaling_total_params(&g) / 175e9 - 1.0) < 0.005,
	       "GPT-3 weights %.4g within 0.5%% of 175e9", ibc_scaling_total_params(&g));

	memset(&l, 0, sizeof(l));
	snprintf(l.name, sizeof(l.name), "llama2_70b");
	l.layers = 80;
	l.hidden = 8192;
	l.ffn = 28672;
	l.heads = 64;
	l.kv_heads = 8;
	l.vocab = 32000;
	l.seq = 8192;
	l.gated_mlp = 1;
	l.frozen_base = 1;
	/* q, o: h^2 each; k, v: h x 1024 each; SwiGLU: 3 h x 28672 */
	IS_CLOSE(ibc_scaling_layer_params(&l), 2.0 * 8192 * 8192 + 2.0 * 8192 * 1024 +
		 3.0 * 8192 * 28672, 1e-15, "Llama 2 70B layer weights (GQA, SwiGLU)");
	tap_ok(fabs(ibc_scaling_total_params(&l) / 69e9 - 1.0) < 0.01,
	       "Llama 2 70B weights %.4g within 1%% of 69e9 (one embedding counted)",
	       ibc_scaling_total_params(&l));
	IS_CLOSE(ibc_scaling_train_flops_per_token(&l),
		 4.0 * 80 * ibc_scaling_layer_params(&l) + 12.0 * 80 * 8192 * 8192 + 4.0 * 8192 * 32000,
		 1e-12, "LoRA: no weight-gradient GEMMs (4 instead of 6 per weight)");

	g.nrcp = 3;
	g.rcp_gbs[0] = 1536;
	g.rcp_gbs[1] = 2048;
	g.rcp_gbs[2] = 3072;
	g.rcp_samples[0] = 500000;
	g.rcp_samples[1] = 577536;
	g.rcp_samples[2] = 590000;
	tap_ok(ibc_scaling_rcp_samples(&g, 2048, &smp) == IBC_OK && smp == 577536,
	       "RCP at a published GBS is that point");
	tap_ok(ibc_scaling_rcp_samples(&g, 2560, &smp) == IBC_OK &&
	       close_to(smp, 0.5 * (577536 + 590000), 1e-15), "RCP midway is linear");
	tap_ok(ibc_scaling_rcp_samples(&g, 3072, &smp) == IBC_OK && smp == 590000,
	       "RCP at the last point");
	tap_is_int(ibc_scaling_rcp_samples(&g, 1024, &smp), IBC_ERR_INVALID_ARG,
		   "no extrapolation below the smallest GBS");
	tap_is_int(ibc_scaling_rcp_samples(&g, 4096, &smp), IBC_ERR_INVALID_ARG,
		   "no extrapolation above the largest GBS");

	IS_CLOSE(ibc_scaling_bubble_fraction(8, 12, 8), 7.0 / 96.0, 1e-15,
		 "interleaved bubble (p-1)/(v m), p=8 v=12 m=8");
	IS_CLOSE(ibc_scaling_bubble_fraction(8, 1, 128), 7.0 / 128.0, 1e-15, "plain 1F1B bubble");
	tap_ok(ibc_scaling_bubble_fraction(1, 1, 8) == 0.0, "no pipeline, no bubble");
}

/* a toy database whose prediction is worked out by hand below */
static void toy_db(struct ibc_scaling_db *db)
{
	struct ibc_scaling_system *s = &db->sys[0];
	struct ibc_scaling_workload *w = &db->wl[0];
	struct ibc_scaling_row *r = &db->row[0];

	memset(db, 0, sizeof(*db));
	snprintf(s->name, sizeof(s->name), "toy");
	snprintf(s->gpu, sizeof(s->gpu), "toy");
	s->peak_flops = 1e12;
	s->hbm_Bps = 1e12;
	s->gpus_per_node = 8;
	s->nvlink.beta_s_per_B = 1e-9;
	s->nvlink.tree_bw_factor = 1.0;
	s->net.beta_s_per_B = 1e-8;
	s->net.tree_bw_factor = 1.0;
	db->nsys = 1;
	snprintf(w->name, sizeof(w->name), "toy");
	w->layers = 2;
	w->hidden = 4;
	w->ffn = 16;
	w->heads = 1;
	w->kv_heads = 1;
	w->vocab = 8;
	w->seq = 4;
	w->eval_seqs = 1;
	w->eval_interval_samples = 8;
	w->nrcp = 1;
	w->rcp_gbs[0] = 8;
	w->rcp_samples[0] = 16;
	db->nwl = 1;
	snprintf(r->id, sizeof(r->id), "toy1");
	snprintf(r->bench, sizeof(r->bench), "toy");
	snprintf(r->system, sizeof(r->system), "toy");
	snprintf(r->stack, sizeof(r->stack), "s");
	snprintf(r->role, sizeof(r->role), "calib-u");
	r->ngpus = 1;
	r->tp = r->pp = r->cp = r->vp = r->mbs = 1;
	r->gbs = 8;
	r->dist_opt = 1;
	r->grad_bytes_per_elem = 2;
	r->param_bytes_per_elem = 2;
	r->published_min = 1.0;
	db->nrow = 1;
	db->params.host_step_s = 0.001;
	db->params.eval_fixed_s = 0.01;
}

static void test_predict(void)
{
	static struct ibc_scaling_db db;
	struct ibc_scaling_pred pr;
	struct ibc_scaling_row r2;
	double t_mb, t_fwd, t_dp, p_gpu, want;
	double u;

	toy_db(&db);
	/*
	 * layer weights 2*16 + 2*4*4 + 2*4*16 = 192; training FLOP/token
	 * 6*2*192 + 12*2*4*4 + 6*4*8 = 2880; forward 2*2*192 + 4*2*4*4 + 2*4*8 = 960.
	 * One GPU, 4 tokens per microbatch, u = 0.5: 11520 FLOP / 0.5e12 FLOP/s.
	 */
	t_mb = 4 * 2880.0 / 0.5e12;
	t_fwd = 4 * 960.0 / 0.5e12;
	tap_is_int(ibc_scaling_predict(&db, &db.row[0], 0.5, &db.params, &pr), IBC_OK,
		   "predict the toy row");
	IS_CLOSE(pr.t_mb_s, t_mb, 1e-12, "toy microbatch time");
	IS_CLOSE(pr.m, 8.0, 1e-15, "8 microbatches per step");
	/* 16 samples, an evaluation every 8: 2 evaluations, 2 steps */
	tap_is_int(pr.steps, 2, "toy steps");
	tap_is_int(pr.evals, 2, "toy evaluations");
	/* one GPU: no communication; optimizer touches 0 bytes per param here */
	IS_CLOSE(pr.t_step_s, 8 * t_mb + 0.001, 1e-12, "toy step = m t_mb + host");
	IS_CLOSE(pr.t_eval_s, 1 * 8 * t_fwd + 0.01, 1e-12, "toy evaluation = 1 batch of 8 fwd + fixed");
	want = 2 * (8 * t_mb + 0.001) + 2 * (8 * t_fwd + 0.01);
	IS_CLOSE(pr.ttt_s, want, 1e-12, "toy time to train");

	/* two GPUs, data parallel on NVLink, eta = 0.25: exposed 0.75 t_dp */
	r2 = db.row[0];
	r2.ngpus = 2;
	db.params.eta = 0.25;
	tap_is_int(ibc_scaling_predict(&db, &r2, 0.5, &db.params, &pr), IBC_OK, "predict dp=2");
	IS_CLOSE(pr.m, 4.0, 1e-15, "dp=2: 4 microbatches per replica");
	p_gpu = 2 * 192.0 + 4 * 8.0;  /* layers + one embedding, bf16 */
	t_dp = 0.5 * p_gpu * 2 * 1e-9 * 2;  /* RS + AG, (n-1)/n = 1/2, alpha = base = 0 */
	IS_CLOSE(pr.t_dp_s, t_dp, 1e-12, "dp=2: reduce-scatter + all-gather on NVLink");
	/* exposure is max(0.75 t_dp, t_dp - m t_mb) = t_dp - 4 t_mb: compute too short to hide */
	IS_CLOSE(pr.t_dp_exposed_s, t_dp - 4 * t_mb, 1e-12,
		 "dp=2: cannot hide more than the step's compute");

	/* calibration recovers u from a published time generated with u = 0.5 */
	db.params.eta = 0.0;
	tap_is_int(ibc_scaling_predict(&db, &db.row[0], 0.5, &db.params, &pr), IBC_OK, "reference");
	db.row[0].published_min = pr.ttt_s / 60.0;
	tap_is_int(ibc_scaling_solve_u(&db, &db.row[0], &db.params, &u), IBC_OK, "solve u");
	IS_CLOSE(u, 0.5, 1e-9, "solve_u recovers the utilization");
	tap_is_int(ibc_scaling_calibrate(&db), IBC_OK, "calibrate the toy database");
	IS_CLOSE(db.u[0], 0.5, 1e-9, "calibrate sets u of the stack");

	/* invalid layouts are rejected */
	r2 = db.row[0];
	r2.ngpus = 3;
	r2.tp = 2;
	tap_is_int(ibc_scaling_check_row(&db, &r2), IBC_ERR_INVALID_ARG, "3 GPUs with tp 2");
	r2 = db.row[0];
	r2.ngpus = 2;
	r2.gbs = 3;
	tap_is_int(ibc_scaling_check_row(&db, &r2), IBC_ERR_INVALID_ARG, "gbs 3 over dp 2");
	r2 = db.row[0];
	r2.pp = 2;
	r2.ngpus = 2;
	r2.vp = 2;
	tap_is_int(ibc_scaling_check_row(&db, &r2), IBC_ERR_INVALID_ARG,
		   "2 layers do not split into 2 stages x 2 chunks");
	r2 = db.row[0];
	tap_is_int(ibc_scaling_predict(&db, &r2, 0.0, &db.params, &pr), IBC_ERR_INVALID_ARG,
		   "u = 0 rejected");
	r2.gbs = 16;
	tap_is_int(ibc_scaling_predict(&db, &r2, 0.5, &db.params, &pr), IBC_ERR_INVALID_ARG,
		   "GBS outside the convergence points and no samples given");
	r2.samples = 32;
	tap_is_int(ibc_scaling_predict(&db, &r2, 0.5, &db.params, &pr), IBC_OK,
		   "explicit samples override the RCP");
	tap_is_int(pr.evals, 2, "32 samples at GBS 16 with an evaluation every step: 2");
}

static void test_lora_schedule(void)
{
	static struct ibc_scaling_db db;
	struct ibc_scaling_pred pr;

	toy_db(&db);
	/* first evaluation after 44 samples, then every 8, GBS 8 */
	db.wl[0].first_eval_samples = 44;
	db.row[0].samples = 61;
	tap_is_int(ibc_scaling_predict(&db, &db.row[0], 0.5, &db.params, &pr), IBC_OK,
		   "predict with a first-evaluation offset");
	/* first eval at ceil(44/8) = 6 steps (48 samples); 61 needs 2 more intervals */
	tap_is_int(pr.steps, 8, "6 + 2 steps");
	tap_is_int(pr.evals, 3, "3 evaluations");
	db.row[0].samples = 40;
	ibc_scaling_predict(&db, &db.row[0], 0.5, &db.params, &pr);
	tap_is_int(pr.evals, 1, "converged before the first evaluation: stops there");
	tap_is_int(pr.steps, 6, "... after 6 steps");
}

static void test_local(void)
{
	struct ibc_scaling_local lp;
	double comm;

	memset(&lp, 0, sizeof(lp));
	lp.cores = 2;
	lp.threads_per_rank = 1;
	lp.link[0].alpha_s = 2e-6;
	lp.link[0].beta_s_per_B = 1e-10;
	lp.link[0].gamma_s_per_B = 2e-10;
	lp.link[0].tree_bw_factor = 1.0;
	lp.have_link[0] = 1;
	lp.grad_bytes = 4e8;
	lp.sample_compute_s = 0.01;
	lp.step_fixed_s = 0.02;
	lp.batch = 8;
	lp.have_trainer = 1;
	IS_CLOSE(ibc_scaling_local_step_s(&lp, 0, 1, IBC_SCALING_WEAK), 0.10, 1e-12,
		 "1 rank: fixed work + 8 samples, no communication");
	IS_CLOSE(ibc_scaling_local_share(&lp, 3), 1.5, 1e-12, "3 ranks on 2 cores: compute x 1.5");
	IS_CLOSE(ibc_scaling_local_lockstep(&lp, 3), 2.0, 1e-12,
		 "3 ranks on 2 cores: a ring step waits for the core running two ranks (x 2)");
	IS_CLOSE(ibc_scaling_local_lockstep(&lp, 2), 1.0, 1e-12, "2 ranks on 2 cores: no stretch");
	comm = ibc_scaling_ring_allreduce_s(&lp.link[0], 4, 4e8);
	/* weak, 4 ranks on 2 cores: each rank's work and the ring take twice as long */
	IS_CLOSE(ibc_scaling_local_step_s(&lp, 0, 4, IBC_SCALING_WEAK), 0.10 * 2 + 2 * comm, 1e-12,
		 "weak 4 ranks on 2 cores: 2x time sharing of compute and all-reduce");
	IS_CLOSE(ibc_scaling_local_step_s(&lp, 0, 4, IBC_SCALING_STRONG),
		 (0.02 + 0.01 * 2) * 2 + 2 * comm, 1e-12,
		 "strong 4 ranks: the fixed work does not shrink with the batch");
	IS_CLOSE(ibc_scaling_local_step_s(&lp, 0, 2, IBC_SCALING_STRONG),
		 0.02 + 0.01 * 4 + ibc_scaling_ring_allreduce_s(&lp.link[0], 2, 4e8), 1e-12,
		 "strong 2 ranks: half the batch each");
	tap_ok(ibc_scaling_local_step_s(&lp, 1, 2, IBC_SCALING_WEAK) < 0.0,
	       "unmeasured transport: no prediction");
	IS_CLOSE(ibc_scaling_local_step_s(&lp, 1, 1, IBC_SCALING_WEAK), 0.10, 1e-12,
		 "1 rank needs no link: predicted on an unmeasured transport");
	lp.corun_factor = 1.25;
	IS_CLOSE(ibc_scaling_local_share(&lp, 1), 1.0, 1e-12, "co-run factor: 1 rank runs alone");
	IS_CLOSE(ibc_scaling_local_share(&lp, 2), 1.25, 1e-12,
		 "co-run factor: 2 ranks on 2 cores, both busy");
	IS_CLOSE(ibc_scaling_local_step_s(&lp, 0, 4, IBC_SCALING_STRONG),
		 (0.02 + 0.01 * 2) * 2 * 1.25 + 2 * comm, 1e-12,
		 "strong 4 ranks, co-run factor 1.25: compute x 2.5, all-reduce x 2");
	lp.cores = 4;
	IS_CLOSE(ibc_scaling_local_share(&lp, 2), 1.0 + 0.25 / 3, 1e-12,
		 "co-run factor on 4 cores, 2 busy: a third of the way to 1.25");
	lp.cores = 2;
	lp.corun_factor = 0.0;
	IS_CLOSE(ibc_scaling_local_busbw_Bps(&lp, 0, 4, 4e8), 4e8 / (2 * comm) * 1.5, 1e-12,
		 "predicted bus bandwidth, 4 ranks on 2 cores");
	IS_CLOSE(ibc_scaling_local_busbw_Bps(&lp, 0, 3, 4e8),
		 4e8 / (2 * ibc_scaling_ring_allreduce_s(&lp.link[0], 3, 4e8)) * 4.0 / 3.0, 1e-12,
		 "predicted bus bandwidth, 3 ranks on 2 cores (x 2 lockstep)");
	lp.have_trainer = 0;
	tap_ok(ibc_scaling_local_step_s(&lp, 0, 2, IBC_SCALING_WEAK) < 0.0,
	       "unmeasured trainer: no prediction");
}

int main(void)
{
	test_collectives();
	test_workloads();
	test_predict();
	test_lora_schedule();
	test_local();
	return tap_done();
}
