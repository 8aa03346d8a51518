/* SPDX-License-Identifier: MIT */
/*
 * train.h - one data-parallel training step of the GPT-2 trainer: gradient
 * accumulation, gradient buckets reduced while backward runs, ZeRO-1,
 * global-norm clipping, the cosine schedule, AdamW, validation, and the
 * optimizer-state file. Communication goes through struct dp_ops, so this
 * file links without a communication library: R = 1 needs no ops at all,
 * and dp_ibc.c provides them over ibcoll for R > 1.
 */
#ifndef IBC_TRAINER_TRAIN_H
#define IBC_TRAINER_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "dataloader.h"
#include "gpt2.h"

/*
 * Collectives over the R ranks. Nonblocking calls return a request in
 * *req_p that test/wait take; buffers stay untouched until it completes.
 * Operations complete in issue order. Every call returns 0 or -1 (after
 * printing why); the trainer treats -1 as fatal.
 */
struct dp_ops {
	/* buf (count) <- average over ranks of buf, in place */
	int (*iallreduce_avg)(void *ctx, floatX *buf, size_t count, void **req_p);
	/* buf (R * count): block r <- average over ranks of block r, in place on
	 * rank r (other blocks undefined afterwards) */
	int (*ireduce_scatter_avg)(void *ctx, floatX *buf, size_t count, void **req_p);
	/* buf (R * count): every rank's block r <- rank r's block r, in place */
	int (*iallgather)(void *ctx, floatX *buf, size_t count, void **req_p);
	/* recv (R * nbytes) <- every rank's send (nbytes), rank order */
	int (*iallgather_bytes)(void *ctx, const void *send, void *recv, size_t nbytes,
				void **req_p);
	int (*test)(void *ctx, void *req, int *done_p);
	int (*wait)(void *ctx, void *req);
	/* blocking: buf (count) <- sum over ranks, in place */
	int (*allreduce_sum_f64)(void *ctx, double *buf, size_t count);
	/* optional (NULL: nothing to do): keep buf (nbytes) registered with the
	 * network devices until deregister_buffer(*handle_p), so that steps
	 * never pin memory (ibc_comm_register) */
	int (*register_buffer)(void *ctx, void *buf, size_t nbytes, void **handle_p);
	int (*deregister_buffer)(void *ctx, void *handle);
	/* blocking: buf (nbytes) <- rank 0's buf (an elastic grow's state transfer) */
	int (*broadcast_bytes)(void *ctx, void *buf, size_t nbytes);
};

struct dp {
	const struct dp_ops *ops; /* NULL when nranks == 1 */
	void *ctx;
	int rank;   /* r */
	int nranks; /* R */
};

struct train_config {
	int B;		     /* micro-batch per rank */
	int T;		     /* sequence length */
	int G;		     /* gradient accumulation steps */
	int max_steps;	     /* length of the learning-rate schedule */
	float lr;	     /* peak learning rate */
	float final_lr_frac; /* lr at max_steps = lr * final_lr_frac */
	int warmup_steps;    /* linear warm-up from lr / warmup to lr */
	float weight_decay;
	float beta1;
	float beta2;
	float eps;
	float grad_clip;     /* clip the global gradient norm to this; 0 = off */
	int zero;	     /* 0: all-reduce + full update; 1: ZeRO-1 */
	size_t bucket_elems; /* gradient bucket size cap, elements */
	int overlap;	     /* 1: reduce buckets during backward; 0: after it */
	uint64_t data_seed;  /* training data order */
	int val_batches;     /* validation micro-batches per rank */
	int vranks;	     /* V: the global batch is V * B * G sequences, split among
			      * the R ranks of the moment (0: R at trainer_init). V > R
			      * after an elastic shrink, or on a resume with fewer ranks */
};

/* A contiguous group of parameters reduced as one unit. */
struct bucket {
	size_t off;	/* first parameter (layer-major flat index) */
	size_t count;	/* elements */
	int event;	/* issued when this gradient event has fired */
	size_t shard;	/* ZeRO-1: elements per rank, floor(count / R) */
	void *req;	/* outstanding reduction (all-reduce or reduce-scatter) */
	void *req_tail; /* ZeRO-1: all-reduce of the count - R * shard tail */
	double t_issue; /* s, monotonic */
	double t_done;	/* s, first time seen complete */
	int done;
};

/* A range of parameters this rank updates, with its optimizer state. */
struct owned_range {
	size_t lo; /* [lo, hi) layer-major flat indices */
	size_t hi;
	size_t state_off; /* its moments start at m[state_off], v[state_off] */
};

struct step_stats {
	double loss;	  /* mean over the R*G*B*T tokens of the step */
	double grad_norm; /* global L2 norm before clipping */
	float lr;
	double step_ms;	    /* wall time of trainer_step */
	double compute_ms;  /* forward + backward, all micro-steps */
	double comm_ms;	    /* communicator busy with the gradient reduction */
	double exposed_ms;  /* time blocked waiting for it after backward */
	double hidden_frac; /* 1 - exposed / comm (0 without communication) */
	double gather_ms;   /* ZeRO-1 parameter all-gather after the update */
	double opt_ms;	    /* clip + AdamW */
};

struct trainer {
	struct train_config cfg;
	struct gpt2 *model; /* owned */
	struct dp dp;
	void *reg[2];       /* registrations of the parameters and gradients (dp_ops) */
	struct dataloader train;
	struct dataloader val;
	int have_val;
	int nbuckets;
	struct bucket *buckets; /* in issue order */
	int nowned;
	struct owned_range *owned;
	size_t state_count;	 /* elements of m and v */
	float *m;		 /* (state_count) AdamW first moment */
	float *v;		 /* (state_count) second moment */
	void *req_tok;		 /* outstanding all-gathers of the deferred encoder */
	void *req_dres;
	int *gather_tokens;	 /* (R*B*T) deferred encoder: all ranks' inputs */
	floatX *gather_dres;	 /* (R*B*T, C) and their gradients */
	int step;		 /* optimizer steps done */
	struct step_stats stats; /* of the last step */
};

/**
 * trainer_init() - Set up a trainer around @model (ownership passes to it).
 * @train_pattern, @val_pattern: shard globs; @val_pattern may be NULL.
 * Return: 0, or -1 with a message on stderr (the model is then destroyed).
 */
int trainer_init(struct trainer *tr, struct gpt2 *model, const struct train_config *cfg,
		 const struct dp *dp, const char *train_pattern, const char *val_pattern);
void trainer_free(struct trainer *tr);

/**
 * trainer_step() - One optimizer step: G micro-batches per rank forward and
 * backward, gradient averaging over the R ranks (buckets issued as
 * backward produces them when cfg.overlap), clipping, AdamW, and with ZeRO-1
 * the parameter all-gather. Fills tr->stats and increments tr->step.
 * Return: 0, or -1 on a communication or allocation failure.
 */
int trainer_step(struct trainer *tr);

/*
 * The two halves of trainer_step(), for an elastic run that agrees on the
 * step's success in between: trainer_step_grads() does the forward and
 * backward passes and every collective of the step (gradients, loss, norm)
 * and changes nothing but the gradients and tr->stats, so that after a
 * failure the step can be redone from the same parameters and moments;
 * trainer_step_apply() clips, runs AdamW (and the ZeRO-1 all-gather) and
 * increments tr->step. Both return 0 or -1. After a failed
 * trainer_step_grads(), trainer_abandon() completes the requests it left.
 *
 * Work split: step s is V * G units (v, g), unit u = v * G + g reading rank
 * v's rows of global micro-batch s * G + g (dataloader.h, as rank v of V);
 * rank r of R does units [r * V * G / R, (r + 1) * V * G / R), each scaled
 * by R / (V * G) so that the all-reduce's average over R ranks is the mean
 * over all units. With R = V that is rank r's G micro-batches scaled 1 / G,
 * bit for bit the non-elastic step.
 */
int trainer_step_grads(struct trainer *tr);
int trainer_step_apply(struct trainer *tr);
void trainer_abandon(struct trainer *tr);

/**
 * trainer_resize() - Continue on the ranks of @dp (an elastic shrink or
 * grow): new rank and size, the same global batch (cfg.vranks), buckets and
 * gather buffers re-planned, parameters and gradients registered with the
 * new communicator (call it once the old one is destroyed: that released
 * the old registrations). Plain data parallelism: every rank holds the full
 * parameters and AdamW moments, so nothing moves. ZeRO-1: the shards change
 * and the moments are zeroed; load them again with trainer_load_state().
 * Return: 0, or -1 (V * G < R, or no memory; message on stderr).
 */
int trainer_resize(struct trainer *tr, const struct dp *dp);

/**
 * trainer_bcast_state() - Give every rank rank 0's parameters, AdamW
 * moments and step (after an elastic grow: the joining ranks start from
 * the job's state). Plain data parallelism only. Return: 0 or -1.
 */
int trainer_bcast_state(struct trainer *tr);

/**
 * trainer_val_loss() - Mean loss over cfg.val_batches validation
 * micro-batches per rank (the same R*B*T*val_batches tokens for any R with
 * the same R*B), averaged over ranks. Return: the loss, or -1 on failure.
 */
double trainer_val_loss(struct trainer *tr);

/* learning rate of step @step: linear warm-up, then cosine to lr*final_lr_frac */
float trainer_lr(const struct train_config *cfg, int step);

/**
 * trainer_save_state() - Write the optimizer state (rank 0 writes; with
 * ZeRO-1 the shards are gathered first, so every rank must call this).
 * File: 256 x int32 header {GPT2_STATE_MAGIC, GPT2_STATE_VERSION, step, V (R unless elastic),
 * zero, B, T, G, P mod 2^31, P >> 31, L, C, Vp, maxT, seed lo, seed hi},
 * then m (P floats) and v (P floats) in llm.c's tensor order.
 * Return: 0, or -1 (message on stderr).
 */
int trainer_save_state(struct trainer *tr, const char *path);

/**
 * trainer_load_state() - Read an optimizer state written by
 * trainer_save_state() (every rank reads the file). The step and the data
 * seed come from the file; V * B * G (cfg.vranks) must equal the saved run's, so that
 * the data order continues. Return: 0, or -1 (message on stderr).
 */
int trainer_load_state(struct trainer *tr, const char *path);

/* FNV-1a 64 of the parameter bytes: equal on every rank after each step */
uint64_t trainer_param_hash(const struct trainer *tr);

double trainer_now_s(void);

#endif /* IBC_TRAINER_TRAIN_H */
