/* SPDX-License-Identifier: MIT */
/*
 * gpt2.h - the GPT-2 model of the bundled trainer: configuration, parameter
 * layout, forward/backward passes, initialisation, llm.c checkpoint I/O and
 * the AdamW update. Pure math and file I/O, no communication: train_gpt2.c
 * adds data parallelism through ibcoll, tests link this file alone.
 *
 * Legend for tensor shapes (as in llm.c): B batch, T sequence length,
 * C channels, V vocabulary, Vp padded vocabulary, L layers, NH heads,
 * hs = C / NH head size, maxT the longest sequence (wpe rows); R is the
 * world size and r the rank in the data-parallel trainer.
 *
 * floatX is float; building gpt2.c with -DGPT2_DOUBLE makes it double, which
 * the gradient check (test_gpt2_grad.c) uses for finite differences. Files
 * are always fp32 on disk.
 */
#ifndef IBC_TRAINER_GPT2_H
#define IBC_TRAINER_GPT2_H

#include <stddef.h>
#include <stdint.h>

#ifdef GPT2_DOUBLE
typedef double floatX;
#else
typedef float floatX;
#endif

/* llm.c file formats */
#define GPT2_MODEL_MAGIC 20240326 /* model header[0] */
#define GPT2_MODEL_V_FP32 3	  /* header[1]: fp32 parameters */
#define GPT2_MODEL_V_BF16 5	  /* header[1]: bf16 parameters (read only) */
#define GPT2_STATE_MAGIC 20250611 /* optimizer state, ibcoll's own format */
#define GPT2_STATE_VERSION 1
#define GPT2_HEADER_INTS 256

/* Number of parameter tensors and their order in llm.c's model file. */
enum gpt2_tensor {
	GPT2_WTE,      /* (Vp, C) token embedding, tied with the LM head */
	GPT2_WPE,      /* (maxT, C) position embedding */
	GPT2_LN1W,     /* (L, C) */
	GPT2_LN1B,     /* (L, C) */
	GPT2_QKVW,     /* (L, 3C, C) */
	GPT2_QKVB,     /* (L, 3C) */
	GPT2_ATTPROJW, /* (L, C, C) */
	GPT2_ATTPROJB, /* (L, C) */
	GPT2_LN2W,     /* (L, C) */
	GPT2_LN2B,     /* (L, C) */
	GPT2_FCW,      /* (L, 4C, C) */
	GPT2_FCB,      /* (L, 4C) */
	GPT2_FCPROJW,  /* (L, C, 4C) */
	GPT2_FCPROJB,  /* (L, C) */
	GPT2_LNFW,     /* (C) */
	GPT2_LNFB,     /* (C) */
	GPT2_NUM_TENSORS
};

struct gpt2_config {
	int max_seq_len;       /* maxT: rows of wpe, longest usable T */
	int vocab_size;	       /* V: 50257 for GPT-2 */
	int padded_vocab_size; /* Vp: V rounded up (50304), rows of wte */
	int num_layers;	       /* L */
	int num_heads;	       /* NH */
	int channels;	       /* C; C % NH == 0 */
};

/*
 * One transformer block's parameters (or gradients). In memory the trainer
 * keeps every block contiguous ("layer-major": wte, wpe, block 0 .. block
 * L-1, lnf), so that a block's gradients can be all-reduced as one bucket as
 * soon as its backward is done; the checkpoint files use llm.c's
 * tensor-major order and gpt2_save/gpt2_load permute.
 */
struct gpt2_block {
	floatX *ln1w;	  /* (C) */
	floatX *ln1b;	  /* (C) */
	floatX *qkvw;	  /* (3C, C) */
	floatX *qkvb;	  /* (3C) */
	floatX *attprojw; /* (C, C) */
	floatX *attprojb; /* (C) */
	floatX *ln2w;	  /* (C) */
	floatX *ln2b;	  /* (C) */
	floatX *fcw;	  /* (4C, C) */
	floatX *fcb;	  /* (4C) */
	floatX *fcprojw;  /* (C, 4C) */
	floatX *fcprojb;  /* (C) */
};

struct gpt2_params {
	floatX *mem;		  /* all P parameters, layer-major, 64-byte aligned */
	floatX *wte;		  /* (Vp, C) */
	floatX *wpe;		  /* (maxT, C) */
	struct gpt2_block *block; /* [L] views into mem */
	floatX *lnfw;		  /* (C) */
	floatX *lnfb;		  /* (C) */
};

/* Activations kept from forward for backward, for one (B, T) micro-batch. */
struct gpt2_block_acts {
	floatX *ln1;	  /* (B, T, C) */
	floatX *ln1_mean; /* (B, T) */
	floatX *ln1_rstd; /* (B, T) */
	floatX *qkv;	  /* (B, T, 3C) */
	floatX *atty;	  /* (B, T, C) attention output before the projection */
	floatX *att;	  /* (B, NH, T, T) softmax weights, causal (upper part 0) */
	floatX *res2;	  /* (B, T, C) residual after attention */
	floatX *ln2;	  /* (B, T, C) */
	floatX *ln2_mean; /* (B, T) */
	floatX *ln2_rstd; /* (B, T) */
	floatX *fch;	  /* (B, T, 4C) MLP hidden, pre-GELU */
	floatX *fch_gelu; /* (B, T, 4C) */
	floatX *res3;	  /* (B, T, C) block output */
};

struct gpt2_acts {
	floatX *mem;
	floatX *encoded;	       /* (B, T, C) wte[tok] + wpe[t] */
	struct gpt2_block_acts *block; /* [L] */
	floatX *lnf;		       /* (B, T, C) */
	floatX *lnf_mean;	       /* (B, T) */
	floatX *lnf_rstd;	       /* (B, T) */
	floatX *probs;		       /* (B, T, Vp) logits, then softmax, then dlogits */
	floatX *losses;		       /* (B, T) -log p(target) */
	/* backward scratch, reused by every block */
	floatX *dres;	   /* (B, T, C) gradient of the residual stream */
	floatX *dln;	   /* (B, T, C) */
	floatX *datty;	   /* (B, T, C) */
	floatX *dqkv;	   /* (B, T, 3C) */
	floatX *datt;	   /* (B, NH, T, T) */
	floatX *dfch;	   /* (B, T, 4C) */
	floatX *dfch_gelu; /* (B, T, 4C) */
	floatX *scratch;   /* C * max(Vp, 4C): a transposed weight */
};

/*
 * Gradient-ready events of backward, in the order they happen. Event 0
 * (wte+wpe) fires after the LM head's backward when the encoder's part is
 * deferred (see gpt2_backward); event 1 + (L-1-l) fires when block l's
 * gradients are final (the top block's event also covers lnf).
 */
struct gpt2_grad_event {
	size_t off;   /* first parameter, layer-major flat index */
	size_t count; /* number of parameters */
};

typedef void (*gpt2_ready_fn)(void *ctx, int event);

struct gpt2 {
	struct gpt2_config cfg;
	size_t num_params;		       /* P */
	size_t tensor_count[GPT2_NUM_TENSORS]; /* elements per tensor (all L layers) */
	struct gpt2_params params;
	struct gpt2_params grads;	/* same layout as params */
	int nevents;			/* L + 1 */
	struct gpt2_grad_event *events; /* [nevents] */
	/* activations, allocated for B x T on first forward */
	int B; /* allocated batch */
	int T; /* allocated sequence length */
	struct gpt2_acts acts;
	const int *inputs;  /* (B, T) last forward's tokens (caller-owned) */
	const int *targets; /* (B, T) or NULL */
	int fwd_B;	    /* dimensions of the last forward */
	int fwd_T;
	double mean_loss; /* of the last forward with targets */
};

/* ---- configuration and lifetime ---- */

/**
 * gpt2_config_preset() - The GPT-2 shape family of depth @depth.
 * @cfg_p:  [out] L = depth, C = 64 * depth, NH = depth (head size 64),
 *          V = 50257, Vp = 50304, maxT = @max_seq_len.
 * Return: 0, or -1 when depth < 1 or max_seq_len < 1.
 * d2 is the tiny test model, d6 small, d12 is GPT-2 124M.
 */
int gpt2_config_preset(struct gpt2_config *cfg_p, int depth, int max_seq_len);

/**
 * gpt2_create() - Allocate a model of @cfg, parameters and gradients zeroed.
 * Return: the model, or NULL (message on stderr) on a bad config or no memory.
 */
/*
 * gpt2_set_buffer_alloc() - Where gpt2_create() takes the parameter and
 * gradient buffers from (process-wide; call before gpt2_create()). The
 * default is posix_memalign. The data-parallel trainer passes ibcoll's
 * ibc_mem_alloc(), whose memory the verbs transport registers once and the
 * shm all-reduce of ranks on one host maps and reduces between directly.
 * @alloc:   [in] returns @nbytes of 64-byte-aligned memory, or NULL.
 * @release: [in] frees what @alloc returned.
 */
void gpt2_set_buffer_alloc(void *(*alloc)(size_t nbytes), void (*release)(void *p));

struct gpt2 *gpt2_create(const struct gpt2_config *cfg);
void gpt2_destroy(struct gpt2 *m);

/**
 * gpt2_init_random() - GPT-2 initialisation, seeded.
 * @seed: the same seed gives the same parameters on every rank and machine.
 * Matrices and embeddings ~ N(0, 0.02); the residual projections (attprojw,
 * fcprojw) ~ N(0, 0.02 / sqrt(2L)) (GPT-2 paper, sec. 2.3); biases 0;
 * layernorm weights 1; padded vocabulary rows of wte 0. Drawn tensor by
 * tensor in llm.c's file order, so the result does not depend on the
 * in-memory layout.
 */
void gpt2_init_random(struct gpt2 *m, uint64_t seed);

/* ---- passes ---- */

/**
 * gpt2_forward() - Forward pass of a (B, T) micro-batch.
 * @inputs:  [in] (B, T) token ids < V; must stay valid until gpt2_backward().
 * @targets: [in] (B, T) next tokens, or NULL (no loss).
 * @B, @T:   T <= maxT. Activations are (re)allocated when B*T grows.
 * Return: mean cross-entropy loss over B*T (nats), or -1 without targets;
 *         -2 on allocation failure (message on stderr).
 * Threading: OpenMP inside; results do not depend on the thread count.
 */
double gpt2_forward(struct gpt2 *m, const int *inputs, const int *targets, int B, int T);

/**
 * gpt2_backward() - Accumulate d(loss * @loss_scale)/d(params) into m->grads.
 * @loss_scale: 1/G for gradient accumulation over G micro-batches.
 * @ready, @ctx: if @ready is not NULL, call ready(ctx, e) when gradient
 *         event e is final (struct gpt2_grad_event), and DEFER the
 *         encoder's contribution to wte/wpe: it is left in
 *         m->acts.dres (B, T, C) for gpt2_encoder_backward_apply(), so that
 *         event 0 can fire right after the LM head. With @ready NULL the
 *         encoder writes into the gradients directly.
 * Requires a gpt2_forward() with targets. Gradients are added to (not
 * overwritten), call gpt2_zero_grad() per optimizer step.
 */
void gpt2_backward(struct gpt2 *m, floatX loss_scale, gpt2_ready_fn ready, void *ctx);

/**
 * gpt2_encoder_backward_apply() - Add the deferred encoder gradients.
 * @tokens: [in] (N) token ids (N = R*B*T when gathered from R ranks), row
 *          i at position i % @T.
 * @dres:   [in] (N, C) residual-stream gradients at the encoder output.
 * @T:      sequence length of the rows.
 * @scale:  multiplier (1/R to average ranks).
 * @lo, @hi: only parameters with flat index in [lo, hi) are updated (ZeRO-1
 *         shards); 0, P for all.
 * Rows are added in order 0..N-1, so every rank gets the same bits.
 */
void gpt2_encoder_backward_apply(struct gpt2 *m, const int *tokens, const floatX *dres, size_t N,
				 int T, floatX scale, size_t lo, size_t hi);

void gpt2_zero_grad(struct gpt2 *m);

/**
 * gpt2_logits_last() - Logits for the next token after @tokens[0..t-1].
 * @tokens: [in] (t) token ids, 1 <= t <= allocated T (B = 1).
 * Return: (Vp) logits inside the activations (valid until the next pass),
 *         or NULL on allocation failure. Only position t-1 pays the LM head.
 */
const floatX *gpt2_logits_last(struct gpt2 *m, const int *tokens, int t);

/* ---- optimizer ---- */

struct gpt2_adamw {
	float lr;
	float beta1;
	float beta2;
	float eps;
	float weight_decay; /* applied to matrices and embeddings only */
	float grad_scale;   /* gradients are multiplied by this first (clipping) */
	int t;		    /* step, 1-based, for bias correction */
};

/**
 * gpt2_adamw_update() - AdamW (Loshchilov & Hutter 2019) on params[lo, hi).
 * @m_mem, @v_mem: [in,out] first and second moments of params[lo, hi):
 *         element i of the range is m_mem[i - lo].
 * @grads: [in] the full gradient vector (layer-major); elements [lo, hi) read.
 * Weight decay only where gpt2_param_decays().
 */
void gpt2_adamw_update(struct gpt2 *m, const floatX *grads, float *m_mem, float *v_mem, size_t lo,
		       size_t hi, const struct gpt2_adamw *opt);

/**
 * gpt2_sumsq() - Sum of squares of x[0..n-1] in double, in a fixed order
 * (fixed 64 Ki blocks, blocks summed in index order): the same bits for any
 * thread count.
 */
double gpt2_sumsq(const floatX *x, size_t n);

/* 1 when flat parameter @i (layer-major) is in a matrix or embedding. */
int gpt2_param_decays(const struct gpt2 *m, size_t i);

/* ---- layout and files ---- */

/**
 * gpt2_tensor_slice() - Where tensor @k of layer @l lives in the layer-major
 * flat vector: *off_p, *count_p. For the non-layered tensors @l is ignored.
 */
void gpt2_tensor_slice(const struct gpt2 *m, int k, int l, size_t *off_p, size_t *count_p);

/**
 * gpt2_save() - Write an llm.c model file (magic 20240326, version 3, fp32).
 * Header ints: [0] magic, [1] 3, [2] maxT, [3] V, [4] L, [5] NH, [6] C,
 * [7] Vp; then the tensors in enum gpt2_tensor order.
 * Return: 0, or -1 with a message on stderr. Written to path.tmp, renamed.
 */
int gpt2_save(const struct gpt2 *m, const char *path);

/**
 * gpt2_load() - Read an llm.c model file (version 3 fp32 or 5 bf16).
 * Return: a new model, or NULL with a message on stderr.
 */
struct gpt2 *gpt2_load(const char *path);

/**
 * gpt2_read_header() - Read and check an llm.c model header.
 * @cfg_p:     [out] configuration; @version_p: [out] 3 or 5.
 * Return: 0, or -1 with a message on stderr.
 */
int gpt2_read_header(const char *path, struct gpt2_config *cfg_p, int *version_p);

/**
 * gpt2_flops_per_token() - FLOPs of one token's forward + backward as our
 * kernels compute them: 6 * (matmul parameters incl. the Vp x C LM head)
 * plus causal attention 6 * L * C * (T + 1) (QK^T and AV, forward 2x,
 * backward 4x, half of the T x T scores).
 */
double gpt2_flops_per_token(const struct gpt2_config *cfg, int T);

/**
 * gpt2_gemm() - C (M, N) += A (M, K) @ B (K, N), all row-major, or with
 * @trans_a, A stored as (K, M). Each C element is summed in k order, one
 * thread per output tile: bitwise the same for any OpenMP thread count.
 * Exposed for the peak-FLOP/s probe and the tests.
 */
void gpt2_gemm(int M, int N, int K, const floatX *A, int lda, int trans_a, const floatX *B, int ldb,
	       floatX *Cm, int ldc);

#endif /* IBC_TRAINER_GPT2_H */
