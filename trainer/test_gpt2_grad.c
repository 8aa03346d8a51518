// SPDX-License-Identifier: MIT
/*
 * test_gpt2_grad.c - gradient check of every layer's backward, and of the
 * whole model, against central finite differences, all in double precision
 * (gpt2.c is compiled into this test with floatX = double; it is included so
 * that its static layer functions can be called one by one).
 *
 * For a layer y = f(x, w) and a random upstream gradient dy, the objective
 * is L = sum(dy * y); backward(dy) must give dL/dx and dL/dw. Each input
 * element is moved by +-h (h = 1e-6) and the numerical derivative
 * (L(+h) - L(-h)) / 2h is compared with the analytical one. Passing means
 * |analytic - numeric| <= 1e-7 + 1e-6 * |numeric| for every element
 * checked; the truncation error of the central difference is O(h^2) and the
 * rounding error ~1e-16/h, both far below that bound.
 */
#define GPT2_DOUBLE 1
#include "gpt2.c"

#include "tap.h"

#define FD_H 1e-6
#define ABS_TOL 1e-7
#define REL_TOL 1e-6

static uint64_t rng_state = 42;

static double urand(void)
{
	return (splitmix64(&rng_state) >> 11) / 9007199254740992.0 * 2.0 - 1.0; /* [-1, 1) */
}

static double *rand_vec(size_t n, double scale)
{
	double *p = malloc(n * sizeof(double));

	for (size_t i = 0; i < n; i++)
		p[i] = scale * urand();
	return p;
}

static double *zeros(size_t n)
{
	return calloc(n, sizeof(double));
}

static double dot(const double *a, const double *b, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* compare an analytical gradient with finite differences of obj() over x */
struct fd_result {
	double max_abs;	  /* max |analytic - numeric| */
	double max_ratio; /* max |a - n| / (ABS_TOL + REL_TOL * |n|) : pass when <= 1 */
	size_t checked;
};

typedef double (*obj_fn)(void *ctx);

static struct fd_result fd_check(obj_fn obj, void *ctx, double *x, const double *grad, size_t n,
				 size_t stride)
{
	struct fd_result r = {0, 0, 0};

	for (size_t i = 0; i < n; i += stride) {
		double keep = x[i];
		double lp;
		double lm;
		double num;
		double err;

		x[i] = keep + FD_H;
		lp = obj(ctx);
		x[i] = keep - FD_H;
		lm = obj(ctx);
		x[i] = keep;
		num = (lp - lm) / (2 * FD_H);
		err = fabs(grad[i] - num);
		if (err > r.max_abs)
			r.max_abs = err;
		if (err / (ABS_TOL + REL_TOL * fabs(num)) > r.max_ratio)
			r.max_ratio = err / (ABS_TOL + REL_TOL * fabs(num));
		r.checked++;
	}
	return r;
}

static void report(const char *what, struct fd_result r)
{
	tap_ok(r.max_ratio <= 1.0 && r.checked > 0,
	       "%s: %zu elements, max |analytic - numeric| %.2e (%.3f of tolerance)", what,
	       r.checked, r.max_abs, r.max_ratio);
}

/* ---- layernorm ---- */
enum { B_ = 2, T_ = 5, C_ = 8, NH_ = 2, V_ = 11, VP_ = 16 };

struct ln_ctx {
	double *inp, *w, *b, *dy, *out, *mean, *rstd;
};

static double ln_obj(void *p)
{
	struct ln_ctx *c = p;

	layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, B_, T_, C_);
	return dot(c->out, c->dy, B_ * T_ * C_);
}

static void check_layernorm(void)
{
	size_t n = B_ * T_ * C_;
	struct ln_ctx c = {rand_vec(n, 1), rand_vec(C_, 1), rand_vec(C_, 1), rand_vec(n, 1),
			   zeros(n),	   zeros(B_ * T_),  zeros(B_ * T_)};
	double *dinp = zeros(n), *dw = zeros(C_), *db = zeros(C_);

	ln_obj(&c);
	layernorm_backward(dinp, dw, db, c.dy, c.inp, c.w, c.mean, c.rstd, B_, T_, C_);
	report("layernorm dinp", fd_check(ln_obj, &c, c.inp, dinp, n, 1));
	report("layernorm dweight", fd_check(ln_obj, &c, c.w, dw, C_, 1));
	report("layernorm dbias", fd_check(ln_obj, &c, c.b, db, C_, 1));
	free(c.inp);
	free(c.w);
	free(c.b);
	free(c.dy);
	free(c.out);
	free(c.mean);
	free(c.rstd);
	free(dinp);
	free(dw);
	free(db);
}

/* ---- matmul ---- */
struct mm_ctx {
	double *inp, *w, *b, *dy, *out, *scratch;
	int BT, IC, OC;
};

static double mm_obj(void *p)
{
	struct mm_ctx *c = p;

	matmul_forward(c->out, c->inp, c->w, c->b, c->scratch, c->BT, c->IC, c->OC);
	return dot(c->out, c->dy, (size_t)c->BT * c->OC);
}

static void check_matmul(int BT, int IC, int OC)
{
	struct mm_ctx c = {rand_vec((size_t)BT * IC, 1),
			   rand_vec((size_t)OC * IC, 1),
			   rand_vec(OC, 1),
			   rand_vec((size_t)BT * OC, 1),
			   zeros((size_t)BT * OC),
			   zeros((size_t)OC * IC),
			   BT,
			   IC,
			   OC};
	double *dinp = zeros((size_t)BT * IC), *dw = zeros((size_t)OC * IC), *db = zeros(OC);
	char what[64];

	mm_obj(&c);
	matmul_backward(dinp, dw, db, c.dy, c.inp, c.w, BT, IC, OC);
	snprintf(what, sizeof(what), "matmul %dx%d->%d dinp", BT, IC, OC);
	report(what, fd_check(mm_obj, &c, c.inp, dinp, (size_t)BT * IC, 1));
	snprintf(what, sizeof(what), "matmul %dx%d->%d dweight", BT, IC, OC);
	report(what, fd_check(mm_obj, &c, c.w, dw, (size_t)OC * IC, 1));
	snprintf(what, sizeof(what), "matmul %dx%d->%d dbias", BT, IC, OC);
	report(what, fd_check(mm_obj, &c, c.b, db, OC, 1));
	free(c.inp);
	free(c.w);
	free(c.b);
	free(c.dy);
	free(c.out);
	free(c.scratch);
	free(dinp);
	free(dw);
	free(db);
}

/* ---- attention ---- */
struct att_ctx {
	double *qkv, *dy, *out, *att;
};

static double att_obj(void *p)
{
	struct att_ctx *c = p;

	attention_forward(c->out, c->att, c->qkv, B_, T_, C_, NH_);
	return dot(c->out, c->dy, B_ * T_ * C_);
}

static void check_attention(void)
{
	size_t n = B_ * T_ * 3 * C_;
	struct att_ctx c = {rand_vec(n, 1), rand_vec(B_ * T_ * C_, 1), zeros(B_ * T_ * C_),
			    zeros(B_ * NH_ * T_ * T_)};
	double *dqkv = zeros(n), *datt = zeros(B_ * NH_ * T_ * T_);
	int causal_ok = 1;

	att_obj(&c);
	attention_backward(dqkv, datt, c.dy, c.qkv, c.att, B_, T_, C_, NH_);
	report("attention dqkv", fd_check(att_obj, &c, c.qkv, dqkv, n, 1));
	/* causality: attention weights above the diagonal are exactly 0 */
	for (int bh = 0; bh < B_ * NH_; bh++)
		for (int t = 0; t < T_; t++)
			for (int t2 = t + 1; t2 < T_; t2++)
				causal_ok &= c.att[((size_t)bh * T_ + t) * T_ + t2] == 0;
	tap_ok(causal_ok, "attention is causal (weights above the diagonal are 0)");
	free(c.qkv);
	free(c.dy);
	free(c.out);
	free(c.att);
	free(dqkv);
	free(datt);
}

/* ---- gelu ---- */
struct gelu_ctx {
	double *x, *dy, *out;
	size_t n;
};

static double gelu_obj(void *p)
{
	struct gelu_ctx *c = p;

	gelu_forward(c->out, c->x, c->n);
	return dot(c->out, c->dy, c->n);
}

static void check_gelu(void)
{
	size_t n = 64;
	struct gelu_ctx c = {rand_vec(n, 4), rand_vec(n, 1), zeros(n), n};
	double *dx = zeros(n);

	gelu_backward(dx, c.x, c.dy, n);
	report("gelu dinp", fd_check(gelu_obj, &c, c.x, dx, n, 1));
	free(c.x);
	free(c.dy);
	free(c.out);
	free(dx);
}

/* ---- softmax + cross-entropy (objective: the mean loss itself) ---- */
struct ce_ctx {
	double *logits, *probs, *losses;
	int *targets;
};

static double ce_obj(void *p)
{
	struct ce_ctx *c = p;

	memcpy(c->probs, c->logits, B_ * T_ * VP_ * sizeof(double));
	return softmax_crossentropy_forward(c->probs, c->losses, c->targets, B_, T_, V_, VP_);
}

static void check_crossentropy(void)
{
	size_t n = B_ * T_ * VP_;
	struct ce_ctx c = {rand_vec(n, 3), zeros(n), zeros(B_ * T_), malloc(B_ * T_ * sizeof(int))};
	double *dlogits;
	int pad_ok = 1;

	for (int i = 0; i < B_ * T_; i++)
		c.targets[i] = (int)(splitmix64(&rng_state) % V_);
	ce_obj(&c);
	softmax_crossentropy_backward(c.probs, c.targets, 1.0 / (B_ * T_), B_, T_, VP_);
	dlogits = c.probs;
	c.probs = zeros(n);
	report("softmax+crossentropy dlogits", fd_check(ce_obj, &c, c.logits, dlogits, n, 1));
	for (int bt = 0; bt < B_ * T_; bt++)
		for (int i = V_; i < VP_; i++)
			pad_ok &= dlogits[(size_t)bt * VP_ + i] == 0;
	tap_ok(pad_ok, "padded vocabulary entries get exactly 0 gradient");
	free(c.logits);
	free(c.probs);
	free(c.losses);
	free(c.targets);
	free(dlogits);
}

/* ---- encoder ---- */
struct enc_ctx {
	double *wte, *wpe, *dy, *out;
	int *inp;
};

static double enc_obj(void *p)
{
	struct enc_ctx *c = p;

	encoder_forward(c->out, c->inp, c->wte, c->wpe, B_, T_, C_);
	return dot(c->out, c->dy, B_ * T_ * C_);
}

static void check_encoder(void)
{
	struct enc_ctx c = {rand_vec(VP_ * C_, 1), rand_vec(T_ * C_, 1), rand_vec(B_ * T_ * C_, 1),
			    zeros(B_ * T_ * C_), malloc(B_ * T_ * sizeof(int))};
	double *dwte = zeros(VP_ * C_);
	double *dwpe = dwte ? zeros(T_ * C_) : NULL;

	for (int i = 0; i < B_ * T_; i++)
		c.inp[i] = i % 3 == 0 ? 4 : (int)(splitmix64(&rng_state) % V_); /* repeats */
	encoder_backward(dwte, dwpe, c.dy, c.inp, B_ * T_, T_, C_, VP_, 1, 0, (size_t)-1);
	report("encoder dwte", fd_check(enc_obj, &c, c.wte, dwte, VP_ * C_, 1));
	report("encoder dwpe", fd_check(enc_obj, &c, c.wpe, dwpe, T_ * C_, 1));
	free(c.wte);
	free(c.wpe);
	free(c.dy);
	free(c.out);
	free(c.inp);
	free(dwte);
	free(dwpe);
}

/* ---- the whole model ---- */
struct model_ctx {
	struct gpt2 *m;
	int *inp, *tgt;
};

static double model_obj(void *p)
{
	struct model_ctx *c = p;

	return gpt2_forward(c->m, c->inp, c->tgt, B_, T_);
}

struct ready_log {
	int n;
	int order[16];
};

static void on_ready(void *ctx, int e)
{
	struct ready_log *r = ctx;

	if (r->n < 16)
		r->order[r->n] = e;
	r->n++;
}

static void check_model(void)
{
	struct gpt2_config cfg = {.max_seq_len = 8,
				  .vocab_size = V_,
				  .padded_vocab_size = VP_,
				  .num_layers = 2,
				  .num_heads = NH_,
				  .channels = C_};
	struct gpt2 *m = gpt2_create(&cfg);
	struct model_ctx c = {m, malloc(B_ * T_ * sizeof(int)), malloc(B_ * T_ * sizeof(int))};
	double *grad;
	double *grad2;
	struct ready_log log = {0, {0}};
	int order_ok;

	if (!m)
		tap_bail_out("gpt2_create failed");
	gpt2_init_random(m, 7);
	/* larger than GPT-2's 0.02 so every path carries signal */
	for (size_t i = 0; i < m->num_params; i++)
		m->params.mem[i] *= 10;
	for (int i = 0; i < B_ * T_; i++) {
		c.inp[i] = (int)(splitmix64(&rng_state) % V_);
		c.tgt[i] = (int)(splitmix64(&rng_state) % V_);
	}
	model_obj(&c);
	gpt2_zero_grad(m);
	gpt2_backward(m, 1, NULL, NULL);
	grad = malloc(m->num_params * sizeof(double));
	memcpy(grad, m->grads.mem, m->num_params * sizeof(double));
	for (int k = 0; k < GPT2_NUM_TENSORS; k++) {
		struct fd_result all = {0, 0, 0};
		static const char *names[] = {
		    "wte",  "wpe",  "ln1w", "ln1b", "qkvw",    "qkvb",	  "attprojw", "attprojb",
		    "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw",     "lnfb"};
		char what[64];

		for (int l = 0; l < (tensor_is_layered(k) ? cfg.num_layers : 1); l++) {
			size_t off;
			size_t count;
			struct fd_result r;

			gpt2_tensor_slice(m, k, l, &off, &count);
			r = fd_check(model_obj, &c, m->params.mem + off, grad + off, count, 1);
			all.checked += r.checked;
			all.max_abs = fmax(all.max_abs, r.max_abs);
			all.max_ratio = fmax(all.max_ratio, r.max_ratio);
		}
		snprintf(what, sizeof(what), "model d%s (all layers)", names[k]);
		report(what, all);
	}
	/* deferred encoder path: same gradients, events in backward order */
	model_obj(&c);
	gpt2_zero_grad(m);
	gpt2_backward(m, 1, on_ready, &log);
	gpt2_encoder_backward_apply(m, c.inp, m->acts.dres, B_ * T_, T_, 1, 0, m->num_params);
	grad2 = m->grads.mem;
	tap_ok(memcmp(grad, grad2, m->num_params * sizeof(double)) == 0,
	       "deferred encoder backward + apply == direct backward, bitwise");
	order_ok = log.n == m->nevents;
	for (int i = 0; i < log.n && i < 16; i++)
		order_ok &= log.order[i] == i;
	tap_ok(order_ok, "ready events 0..L fire once each, in order (%d events)", log.n);
	free(grad);
	free(c.inp);
	free(c.tgt);
	gpt2_destroy(m);
}

/* ---- gemm against a plain triple loop, odd sizes for edge tiles ---- */
static void check_gemm(int M, int N, int K, int trans_a)
{
	double *A = rand_vec((size_t)M * K, 1), *Bm = rand_vec((size_t)K * N, 1);
	double *C1 = rand_vec((size_t)M * N, 1);
	double *C2 = malloc((size_t)M * N * sizeof(double));
	double maxerr = 0;

	memcpy(C2, C1, (size_t)M * N * sizeof(double));
	gpt2_gemm(M, N, K, A, trans_a ? M : K, trans_a, Bm, N, C1, N);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double s = C2[(size_t)i * N + j];

			for (int k = 0; k < K; k++)
				s += (trans_a ? A[(size_t)k * M + i] : A[(size_t)i * K + k]) *
				     Bm[(size_t)k * N + j];
			maxerr = fmax(maxerr, fabs(s - C1[(size_t)i * N + j]));
		}
	tap_ok(maxerr < 1e-12 * K, "gemm M %d N %d K %d%s matches the triple loop (max err %.1e)",
	       M, N, K, trans_a ? " A^T" : "", maxerr);
	free(A);
	free(Bm);
	free(C1);
	free(C2);
}

int main(void)
{
	check_gemm(1, 1, 1, 0);
	check_gemm(13, 67, 300, 0);
	check_gemm(17, 129, 513, 1);
	check_layernorm();
	check_matmul(B_ * T_, C_, 3 * C_);
	check_matmul(7, 5, 3);
	check_attention();
	check_gelu();
	check_crossentropy();
	check_encoder();
	check_model();
	return tap_done();
}
