// SPDX-License-Identifier: MIT
/*
 * gpt2.c - GPT-2 in plain C: layers (forward and backward), the model built
 * from them, seeded initialisation, AdamW, and llm.c's model file format.
 * Written after the structure of Karpathy's llm.c train_gpt2.c (MIT), in
 * ibcoll's style; the interface is in gpt2.h, the trainer in train_gpt2.c.
 *
 * Every layer function starts with the shapes of its tensors (legend in
 * gpt2.h). Parallel loops give each output element to exactly one thread and
 * sum in a fixed order, so results are bitwise the same for any number of
 * OpenMP threads, which the trainer's resume and rank-agreement checks rely
 * on.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpt2.h"

#define LN_EPS 1e-5
#define GELU_SCALE 0.7978845608028654 /* sqrt(2 / pi) */

/* ------------------------------------------------------------------------ */
/* Matrix multiply                                                           */
/* ------------------------------------------------------------------------ */

/*
 * C (M, N) += A (M, K) @ B (K, N). The output is cut into GEMM_MR x GEMM_NR
 * tiles, each owned by one thread; K is walked in GEMM_KC chunks (the B
 * chunk stays in cache) and each tile keeps its accumulators in registers
 * across a chunk, adding the products in k order. A tile's sums therefore
 * see exactly the sequence c += a0*b0, c += a1*b1, ... whatever the chunking
 * and the thread count. With GCC on x86-64 the tile kernel is compiled three
 * times (AVX-512, AVX2+FMA, baseline) and picked at load time (ifunc), since
 * the build itself targets baseline x86-64.
 */
#define GEMM_MR 8
#define GEMM_NR 64
#define GEMM_KC 256

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define GEMM_TARGETS __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GEMM_TARGETS
#endif

GEMM_TARGETS
static void gemm_tile(int mr, int nr, int kc, const floatX *A, ptrdiff_t sa_i, ptrdiff_t sa_k,
		      const floatX *B, int ldb, floatX *Cm, int ldc)
{
	floatX acc[GEMM_MR][GEMM_NR];

	if (mr == GEMM_MR && nr == GEMM_NR) {
		/* full tile: fixed trip counts, vectorised and kept in registers */
		for (int i = 0; i < GEMM_MR; i++)
			for (int j = 0; j < GEMM_NR; j++)
				acc[i][j] = Cm[(size_t)i * ldc + j];
		for (int k = 0; k < kc; k++) {
			const floatX *b = B + (size_t)k * ldb;

			for (int i = 0; i < GEMM_MR; i++) {
				floatX a = A[i * sa_i + k * sa_k];

				for (int j = 0; j < GEMM_NR; j++)
					acc[i][j] += a * b[j];
			}
		}
		for (int i = 0; i < GEMM_MR; i++)
			for (int j = 0; j < GEMM_NR; j++)
				Cm[(size_t)i * ldc + j] = acc[i][j];
		return;
	}
	/* edge tile: same per-element order, variable bounds */
	for (int i = 0; i < mr; i++)
		for (int j = 0; j < nr; j++)
			acc[i][j] = Cm[(size_t)i * ldc + j];
	for (int k = 0; k < kc; k++) {
		const floatX *b = B + (size_t)k * ldb;

		for (int i = 0; i < mr; i++) {
			floatX a = A[i * sa_i + k * sa_k];

			for (int j = 0; j < nr; j++)
				acc[i][j] += a * b[j];
		}
	}
	for (int i = 0; i < mr; i++)
		for (int j = 0; j < nr; j++)
			Cm[(size_t)i * ldc + j] = acc[i][j];
}

void gpt2_gemm(int M, int N, int K, const floatX *A, int lda, int trans_a, const floatX *B, int ldb,
	       floatX *Cm, int ldc)
{
	ptrdiff_t sa_i = trans_a ? 1 : lda;
	ptrdiff_t sa_k = trans_a ? lda : 1;
	long mt = (M + GEMM_MR - 1) / GEMM_MR;
	long nt = (N + GEMM_NR - 1) / GEMM_NR;

	for (int k0 = 0; k0 < K; k0 += GEMM_KC) {
		int kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;

		/* tiles in column-panel order: a B panel is reused down all of M */
#pragma omp parallel for schedule(static)
		for (long t = 0; t < mt * nt; t++) {
			int n0 = (int)(t / mt) * GEMM_NR;
			int m0 = (int)(t % mt) * GEMM_MR;
			int mr = M - m0 < GEMM_MR ? M - m0 : GEMM_MR;
			int nr = N - n0 < GEMM_NR ? N - n0 : GEMM_NR;

			gemm_tile(mr, nr, kc, A + m0 * sa_i + k0 * sa_k, sa_i, sa_k,
				  B + (size_t)k0 * ldb + n0, ldb, Cm + (size_t)m0 * ldc + n0, ldc);
		}
	}
}

/* out (cols, rows) = in (rows, cols) transposed */
static void transpose(floatX *out, const floatX *in, int rows, int cols)
{
#pragma omp parallel for schedule(static)
	for (int c0 = 0; c0 < cols; c0 += 64) {
		int c1 = c0 + 64 < cols ? c0 + 64 : cols;

		for (int r = 0; r < rows; r++)
			for (int c = c0; c < c1; c++)
				out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
	}
}

/* ------------------------------------------------------------------------ */
/* Layers                                                                    */
/* ------------------------------------------------------------------------ */

static void encoder_forward(floatX *out, const int *inp, const floatX *wte, const floatX *wpe,
			    int B, int T, int C)
{
	/* out (B,T,C), inp (B,T), wte (Vp,C), wpe (maxT,C) */
#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		const floatX *e = wte + (size_t)inp[bt] * C;
		const floatX *p = wpe + (size_t)(bt % T) * C;
		floatX *o = out + (size_t)bt * C;

		for (int i = 0; i < C; i++)
			o[i] = e[i] + p[i];
	}
}

/*
 * The encoder's backward, dwte[tok] += scale * dout and dwpe[t] += scale *
 * dout, restricted to flat parameter indices [lo, hi) (wte starts at 0, wpe
 * at Vp*C). Channels are split across threads and rows are added in order.
 */
static void encoder_backward(floatX *dwte, floatX *dwpe, const floatX *dout, const int *inp,
			     size_t N, int T, int C, int Vp, floatX scale, size_t lo, size_t hi)
{
	/* dwte (Vp,C), dwpe (maxT,C), dout (N,C), inp (N); N = B*T (or R*B*T) */
	size_t wpe_off = (size_t)Vp * C;

#pragma omp parallel for schedule(static)
	for (int c0 = 0; c0 < C; c0 += 16) {
		int c1 = c0 + 16 < C ? c0 + 16 : C;

		for (size_t n = 0; n < N; n++) {
			const floatX *d = dout + n * C;
			size_t wrow = (size_t)inp[n] * C;
			size_t prow = (size_t)(n % T) * C;

			for (int c = c0; c < c1; c++) {
				if (wrow + c >= lo && wrow + c < hi)
					dwte[wrow + c] += scale * d[c];
				if (wpe_off + prow + c >= lo && wpe_off + prow + c < hi)
					dwpe[prow + c] += scale * d[c];
			}
		}
	}
}

static void layernorm_forward(floatX *out, floatX *mean, floatX *rstd, const floatX *inp,
			      const floatX *weight, const floatX *bias, int B, int T, int C)
{
	/* out (B,T,C), mean (B,T), rstd (B,T), inp (B,T,C), weight (C), bias (C) */
#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		const floatX *x = inp + (size_t)bt * C;
		floatX *o = out + (size_t)bt * C;
		floatX m = 0, v = 0, s;

		for (int i = 0; i < C; i++)
			m += x[i];
		m /= C;
		for (int i = 0; i < C; i++)
			v += (x[i] - m) * (x[i] - m);
		v /= C;
		s = (floatX)(1.0 / sqrt((double)v + LN_EPS));
		for (int i = 0; i < C; i++)
			o[i] = (x[i] - m) * s * weight[i] + bias[i];
		mean[bt] = m;
		rstd[bt] = s;
	}
}

static void layernorm_backward(floatX *dinp, floatX *dweight, floatX *dbias, const floatX *dout,
			       const floatX *inp, const floatX *weight, const floatX *mean,
			       const floatX *rstd, int B, int T, int C)
{
	/* dinp (B,T,C) +=, dweight (C) +=, dbias (C) +=, dout (B,T,C),
	 * inp (B,T,C), weight (C), mean (B,T), rstd (B,T) */
#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		const floatX *x = inp + (size_t)bt * C;
		const floatX *d = dout + (size_t)bt * C;
		floatX *di = dinp + (size_t)bt * C;
		floatX dnorm_mean = 0, dnorm_norm_mean = 0;

		for (int i = 0; i < C; i++) {
			floatX norm = (x[i] - mean[bt]) * rstd[bt];
			floatX dnorm = weight[i] * d[i];

			dnorm_mean += dnorm;
			dnorm_norm_mean += dnorm * norm;
		}
		dnorm_mean /= C;
		dnorm_norm_mean /= C;
		for (int i = 0; i < C; i++) {
			floatX norm = (x[i] - mean[bt]) * rstd[bt];
			floatX dnorm = weight[i] * d[i];

			di[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[bt];
		}
	}
	/* parameter gradients: each channel summed over (b, t) in order */
#pragma omp parallel for schedule(static)
	for (int c0 = 0; c0 < C; c0 += 16) {
		int c1 = c0 + 16 < C ? c0 + 16 : C;

		for (int bt = 0; bt < B * T; bt++) {
			const floatX *x = inp + (size_t)bt * C;
			const floatX *d = dout + (size_t)bt * C;

			for (int i = c0; i < c1; i++) {
				dbias[i] += d[i];
				dweight[i] += (x[i] - mean[bt]) * rstd[bt] * d[i];
			}
		}
	}
}

static void matmul_forward(floatX *out, const floatX *inp, const floatX *weight, const floatX *bias,
			   floatX *scratch, int BT, int C, int OC)
{
	/* out (B,T,OC), inp (B,T,C), weight (OC,C), bias (OC) or NULL,
	 * scratch (C,OC) for weight^T */
#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < BT; bt++)
		for (int o = 0; o < OC; o++)
			out[(size_t)bt * OC + o] = bias ? bias[o] : 0;
	transpose(scratch, weight, OC, C);
	gpt2_gemm(BT, OC, C, inp, C, 0, scratch, OC, out, OC);
}

static void matmul_backward(floatX *dinp, floatX *dweight, floatX *dbias, const floatX *dout,
			    const floatX *inp, const floatX *weight, int BT, int C, int OC)
{
	/* dinp (B,T,C) +=, dweight (OC,C) +=, dbias (OC) += or NULL,
	 * dout (B,T,OC), inp (B,T,C), weight (OC,C) */
	gpt2_gemm(BT, C, OC, dout, OC, 0, weight, C, dinp, C); /* dout @ W */
	gpt2_gemm(OC, C, BT, dout, OC, 1, inp, C, dweight, C); /* dout^T @ inp */
	if (!dbias)
		return;
#pragma omp parallel for schedule(static)
	for (int o0 = 0; o0 < OC; o0 += 64) {
		int o1 = o0 + 64 < OC ? o0 + 64 : OC;

		for (int bt = 0; bt < BT; bt++)
			for (int o = o0; o < o1; o++)
				dbias[o] += dout[(size_t)bt * OC + o];
	}
}

static void attention_forward(floatX *out, floatX *att, const floatX *qkv, int B, int T, int C,
			      int NH)
{
	/* out (B,T,C), att (B,NH,T,T), qkv (B,T,3C) holding q | k | v, each
	 * (NH, hs). Causal: position t attends to t2 <= t; att[.., t, t2 > t] = 0 */
	int hs = C / NH;
	floatX scale = (floatX)(1.0 / sqrt((double)hs));

#pragma omp parallel for collapse(3) schedule(static)
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int h = 0; h < NH; h++) {
				const floatX *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
				floatX *a = att + (((size_t)b * NH + h) * T + t) * T;
				floatX *o = out + ((size_t)b * T + t) * C + h * hs;
				floatX maxv = -INFINITY, sum = 0;

				for (int t2 = 0; t2 <= t; t2++) {
					const floatX *k =
					    qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
					floatX s = 0;

					for (int i = 0; i < hs; i++)
						s += q[i] * k[i];
					s *= scale;
					a[t2] = s;
					if (s > maxv)
						maxv = s;
				}
				for (int t2 = 0; t2 <= t; t2++) {
					a[t2] = (floatX)exp((double)(a[t2] - maxv));
					sum += a[t2];
				}
				for (int t2 = 0; t2 < T; t2++)
					a[t2] = t2 <= t ? a[t2] / sum : 0;
				for (int i = 0; i < hs; i++)
					o[i] = 0;
				for (int t2 = 0; t2 <= t; t2++) {
					const floatX *v =
					    qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;

					for (int i = 0; i < hs; i++)
						o[i] += a[t2] * v[i];
				}
			}
}

static void attention_backward(floatX *dqkv, floatX *datt, const floatX *dout, const floatX *qkv,
			       const floatX *att, int B, int T, int C, int NH)
{
	/* dqkv (B,T,3C) +=, datt (B,NH,T,T) scratch, dout (B,T,C),
	 * qkv (B,T,3C), att (B,NH,T,T). One thread per (b, h): the k and v
	 * gradients of a head collect from every later query position. */
	int hs = C / NH;
	floatX scale = (floatX)(1.0 / sqrt((double)hs));

#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				const floatX *a = att + (((size_t)b * NH + h) * T + t) * T;
				floatX *da = datt + (((size_t)b * NH + h) * T + t) * T;
				const floatX *d = dout + ((size_t)b * T + t) * C + h * hs;
				const floatX *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
				floatX *dq = dqkv + ((size_t)b * T + t) * 3 * C + h * hs;
				floatX dot = 0;

				/* out = att @ v */
				for (int t2 = 0; t2 <= t; t2++) {
					const floatX *v =
					    qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
					floatX *dv =
					    dqkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
					floatX s = 0;

					for (int i = 0; i < hs; i++) {
						s += d[i] * v[i];
						dv[i] += a[t2] * d[i];
					}
					da[t2] = s;
				}
				/* softmax: dpre = att * (datt - sum(att * datt)) */
				for (int t2 = 0; t2 <= t; t2++)
					dot += a[t2] * da[t2];
				for (int t2 = 0; t2 <= t; t2++)
					da[t2] = a[t2] * (da[t2] - dot);
				/* pre = scale * q . k */
				for (int t2 = 0; t2 <= t; t2++) {
					const floatX *k =
					    qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
					floatX *dk =
					    dqkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
					floatX g = da[t2] * scale;

					for (int i = 0; i < hs; i++) {
						dq[i] += g * k[i];
						dk[i] += g * q[i];
					}
				}
			}
}

static void gelu_forward(floatX *out, const floatX *inp, size_t N)
{
	/* out (N), inp (N); GPT-2's tanh approximation (Hendrycks & Gimpel 2016) */
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < N; i++) {
		double x = inp[i];

		out[i] = (floatX)(0.5 * x * (1.0 + tanh(GELU_SCALE * (x + 0.044715 * x * x * x))));
	}
}

static void gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, size_t N)
{
	/* dinp (N) +=, inp (N), dout (N) */
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < N; i++) {
		double x = inp[i];
		double u = GELU_SCALE * (x + 0.044715 * x * x * x);
		double th = tanh(u);
		double sech2 = 1.0 - th * th;
		double du = GELU_SCALE * (1.0 + 3.0 * 0.044715 * x * x);

		dinp[i] += (floatX)((0.5 * (1.0 + th) + 0.5 * x * sech2 * du) * dout[i]);
	}
}

static void residual_forward(floatX *out, const floatX *a, const floatX *b, size_t N)
{
	/* out (N) = a (N) + b (N) */
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < N; i++)
		out[i] = a[i] + b[i];
}

#define SM_LANES 16

#ifdef GPT2_DOUBLE
#define exp_nonpos(x) exp(x)
#else
/*
 * exp(x) for x <= 0 in float, branch-free so that it vectorises: x = n ln2 +
 * r with |r| <= ln2/2, exp(r) by its degree-7 Taylor polynomial (truncation
 * error r^8/8! < 7e-9 relative), times 2^n built in the exponent bits.
 * Arguments below -87 are clamped (exp(-87) ~ 1.6e-38, the smallest normal
 * scale). Within 2 ulp of expf over [-87, 0].
 */
static inline float exp_nonpos(float x)
{
	const float log2e = 1.44269504088896341f;
	const float ln2_hi = 0.693359375f; /* ln2 = ln2_hi + ln2_lo, ln2_hi exact */
	const float ln2_lo = -2.12194440e-4f;
	const float round = 12582912.0f; /* 1.5 * 2^23: adds round to nearest */
	float n;
	float r;
	float p;
	int32_t bits;
	float scale;

	x = x < -87.0f ? -87.0f : x;
	n = (x * log2e + round) - round;
	r = (x - n * ln2_hi) - n * ln2_lo;
	p = 1.0f +
	    r * (1.0f +
		 r * (0.5f + r * (1.0f / 6 +
				  r * (1.0f / 24 +
				       r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
	bits = ((int32_t)n + 127) << 23;
	memcpy(&scale, &bits, sizeof(scale));
	return p * scale;
}
#endif

/*
 * One row of the softmax: p (V) logits -> probabilities, in place. The max
 * and the sum run in SM_LANES independent lanes combined in a fixed order,
 * so the loops vectorise and the result does not depend on the machine's
 * vector width.
 */
GEMM_TARGETS
static void softmax_row(floatX *p, int V)
{
	floatX lmax[SM_LANES];
	floatX lsum[SM_LANES];
	floatX maxv;
	floatX sum = 0;
	floatX inv;
	int Vl = V / SM_LANES * SM_LANES;

	for (int j = 0; j < SM_LANES; j++) {
		lmax[j] = -INFINITY;
		lsum[j] = 0;
	}
	for (int i = 0; i < Vl; i += SM_LANES)
		for (int j = 0; j < SM_LANES; j++)
			lmax[j] = p[i + j] > lmax[j] ? p[i + j] : lmax[j];
	maxv = lmax[0];
	for (int j = 1; j < SM_LANES; j++)
		maxv = lmax[j] > maxv ? lmax[j] : maxv;
	for (int i = Vl; i < V; i++)
		maxv = p[i] > maxv ? p[i] : maxv;
	for (int i = 0; i < Vl; i += SM_LANES)
		for (int j = 0; j < SM_LANES; j++) {
			p[i + j] = exp_nonpos(p[i + j] - maxv);
			lsum[j] += p[i + j];
		}
	for (int j = 0; j < SM_LANES; j++)
		sum += lsum[j];
	for (int i = Vl; i < V; i++) {
		p[i] = exp_nonpos(p[i] - maxv);
		sum += p[i];
	}
	inv = 1 / sum;
	for (int i = 0; i < V; i++)
		p[i] *= inv;
}

/*
 * In place: probs (B,T,Vp) holds logits on entry, softmax over the first V
 * entries on exit (the Vp - V padding set to 0); losses (B,T) gets
 * -log p(target). Returns the mean loss.
 */
static double softmax_crossentropy_forward(floatX *probs, floatX *losses, const int *targets, int B,
					   int T, int V, int Vp)
{
	/* probs (B,T,Vp), losses (B,T), targets (B,T) */
	double mean = 0;

#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		floatX *p = probs + (size_t)bt * Vp;

		softmax_row(p, V);
		for (int i = V; i < Vp; i++)
			p[i] = 0;
		if (targets)
			losses[bt] = (floatX)-log((double)p[targets[bt]]);
	}
	if (!targets)
		return -1;
	for (int bt = 0; bt < B * T; bt++)
		mean += losses[bt];
	return mean / (B * T);
}

/* In place: probs (B,T,Vp) -> dlogits = dloss * (probs - onehot(target)). */
static void softmax_crossentropy_backward(floatX *probs, const int *targets, floatX dloss, int B,
					  int T, int Vp)
{
	/* probs (B,T,Vp), targets (B,T) */
#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		floatX *p = probs + (size_t)bt * Vp;

		p[targets[bt]] -= 1;
		for (int i = 0; i < Vp; i++)
			p[i] *= dloss;
	}
}

/* ------------------------------------------------------------------------ */
/* Layout                                                                    */
/* ------------------------------------------------------------------------ */

/* elements of one transformer block: 12 C^2 weights + 13 C vectors */
static size_t block_size(int C)
{
	return 12 * (size_t)C * C + 13 * (size_t)C;
}

static size_t embed_size(const struct gpt2_config *cfg)
{
	return ((size_t)cfg->padded_vocab_size + cfg->max_seq_len) * cfg->channels;
}

/* offset of tensor k (a per-layer tensor) inside one block, and its size */
static void block_member(int k, int C, size_t *off_p, size_t *count_p)
{
	static const int order[] = {GPT2_LN1W,	   GPT2_LN1B,	  GPT2_QKVW,	GPT2_QKVB,
				    GPT2_ATTPROJW, GPT2_ATTPROJB, GPT2_LN2W,	GPT2_LN2B,
				    GPT2_FCW,	   GPT2_FCB,	  GPT2_FCPROJW, GPT2_FCPROJB};
	size_t c = C;
	size_t sizes[GPT2_NUM_TENSORS] = {
	    [GPT2_LN1W] = c,
	    [GPT2_LN1B] = c,
	    [GPT2_QKVW] = 3 * c * c,
	    [GPT2_QKVB] = 3 * c,
	    [GPT2_ATTPROJW] = c * c,
	    [GPT2_ATTPROJB] = c,
	    [GPT2_LN2W] = c,
	    [GPT2_LN2B] = c,
	    [GPT2_FCW] = 4 * c * c,
	    [GPT2_FCB] = 4 * c,
	    [GPT2_FCPROJW] = 4 * c * c,
	    [GPT2_FCPROJB] = c,
	};
	size_t off = 0;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		if (order[i] == k)
			break;
		off += sizes[order[i]];
	}
	*off_p = off;
	*count_p = sizes[k];
}

static int tensor_is_layered(int k)
{
	return k >= GPT2_LN1W && k <= GPT2_FCPROJB;
}

void gpt2_tensor_slice(const struct gpt2 *m, int k, int l, size_t *off_p, size_t *count_p)
{
	const struct gpt2_config *c = &m->cfg;
	size_t C = c->channels;
	size_t E = embed_size(c);
	size_t off;
	size_t count;

	switch (k) {
	case GPT2_WTE:
		*off_p = 0;
		*count_p = (size_t)c->padded_vocab_size * C;
		return;
	case GPT2_WPE:
		*off_p = (size_t)c->padded_vocab_size * C;
		*count_p = (size_t)c->max_seq_len * C;
		return;
	case GPT2_LNFW:
		*off_p = E + c->num_layers * block_size(c->channels);
		*count_p = C;
		return;
	case GPT2_LNFB:
		*off_p = E + c->num_layers * block_size(c->channels) + C;
		*count_p = C;
		return;
	default:
		block_member(k, c->channels, &off, &count);
		*off_p = E + (size_t)l * block_size(c->channels) + off;
		*count_p = count;
	}
}

int gpt2_param_decays(const struct gpt2 *m, size_t i)
{
	size_t E = embed_size(&m->cfg);
	size_t bs = block_size(m->cfg.channels);
	size_t L = m->cfg.num_layers;
	static const int mats[] = {GPT2_QKVW, GPT2_ATTPROJW, GPT2_FCW, GPT2_FCPROJW};

	if (i < E)
		return 1; /* wte, wpe */
	if (i >= E + L * bs)
		return 0; /* lnf */
	i = (i - E) % bs;
	for (size_t j = 0; j < sizeof(mats) / sizeof(mats[0]); j++) {
		size_t off;
		size_t count;

		block_member(mats[j], m->cfg.channels, &off, &count);
		if (i >= off && i < off + count)
			return 1;
	}
	return 0;
}

/* end of the run of parameters starting at i that share i's decay flag */
static size_t decay_run_end(const struct gpt2 *m, size_t i)
{
	for (int k = 0; k < GPT2_NUM_TENSORS; k++)
		for (int l = 0; l < (tensor_is_layered(k) ? m->cfg.num_layers : 1); l++) {
			size_t off;
			size_t count;

			gpt2_tensor_slice(m, k, l, &off, &count);
			if (i >= off && i < off + count)
				return off + count;
		}
	return m->num_params;
}

static void params_point(struct gpt2_params *p, floatX *mem, const struct gpt2_config *c)
{
	size_t C = c->channels;
	floatX *b;

	p->mem = mem;
	p->wte = mem;
	p->wpe = mem + (size_t)c->padded_vocab_size * C;
	b = mem + embed_size(c);
	for (int l = 0; l < c->num_layers; l++) {
		struct gpt2_block *k = &p->block[l];

		k->ln1w = b;
		k->ln1b = k->ln1w + C;
		k->qkvw = k->ln1b + C;
		k->qkvb = k->qkvw + 3 * C * C;
		k->attprojw = k->qkvb + 3 * C;
		k->attprojb = k->attprojw + C * C;
		k->ln2w = k->attprojb + C;
		k->ln2b = k->ln2w + C;
		k->fcw = k->ln2b + C;
		k->fcb = k->fcw + 4 * C * C;
		k->fcprojw = k->fcb + 4 * C;
		k->fcprojb = k->fcprojw + 4 * C * C;
		b = k->fcprojb + C;
	}
	p->lnfw = b;
	p->lnfb = b + C;
}

/* ------------------------------------------------------------------------ */
/* Lifetime                                                                  */
/* ------------------------------------------------------------------------ */

int gpt2_config_preset(struct gpt2_config *cfg_p, int depth, int max_seq_len)
{
	if (depth < 1 || max_seq_len < 1)
		return -1;
	cfg_p->max_seq_len = max_seq_len;
	cfg_p->vocab_size = 50257;
	cfg_p->padded_vocab_size = 50304;
	cfg_p->num_layers = depth;
	cfg_p->num_heads = depth;
	cfg_p->channels = 64 * depth;
	return 0;
}

static void *(*buf_alloc)(size_t nbytes);
static void (*buf_release)(void *p);

void gpt2_set_buffer_alloc(void *(*alloc)(size_t nbytes), void (*release)(void *p))
{
	buf_alloc = alloc;
	buf_release = release;
}

/* @count x @elem bytes (at least 64, whole 64-byte lines), zeroed, from @alloc or posix_memalign */
static void *zeroed_from(void *(*alloc)(size_t nbytes), size_t count, size_t elem)
{
	size_t nbytes = count * elem;
	void *p = NULL;

	if (nbytes == 0)
		nbytes = 64;
	nbytes = (nbytes + 63) / 64 * 64;
	if (alloc)
		p = alloc(nbytes);
	else if (posix_memalign(&p, 64, nbytes) != 0)
		p = NULL;
	if (p)
		memset(p, 0, nbytes);
	return p;
}

static void *alloc_zeroed(size_t count, size_t elem)
{
	return zeroed_from(NULL, count, elem);
}

/* the parameter and gradient buffers: zeroed, from the allocator set */
static void *buf_zeroed(size_t count, size_t elem)
{
	return zeroed_from(buf_alloc, count, elem);
}

static void buf_free(void *p)
{
	if (buf_release)
		buf_release(p);
	else
		free(p);
}

struct gpt2 *gpt2_create(const struct gpt2_config *cfg)
{
	struct gpt2 *m;
	size_t P;
	size_t bs;

	if (cfg->num_layers < 1 || cfg->num_heads < 1 || cfg->channels < 1 ||
	    cfg->channels % cfg->num_heads != 0 || cfg->vocab_size < 1 ||
	    cfg->padded_vocab_size < cfg->vocab_size || cfg->max_seq_len < 1 ||
	    cfg->vocab_size > 65536) {
		fprintf(stderr, "gpt2: invalid config L %d NH %d C %d V %d Vp %d maxT %d\n",
			cfg->num_layers, cfg->num_heads, cfg->channels, cfg->vocab_size,
			cfg->padded_vocab_size, cfg->max_seq_len);
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		goto err_nomem;
	m->cfg = *cfg;
	bs = block_size(cfg->channels);
	P = embed_size(cfg) + cfg->num_layers * bs + 2 * (size_t)cfg->channels;
	m->num_params = P;
	for (int k = 0; k < GPT2_NUM_TENSORS; k++) {
		size_t off;
		size_t count;

		gpt2_tensor_slice(m, k, 0, &off, &count);
		m->tensor_count[k] = count * (tensor_is_layered(k) ? cfg->num_layers : 1);
	}
	m->params.block = calloc(cfg->num_layers, sizeof(struct gpt2_block));
	m->grads.block = calloc(cfg->num_layers, sizeof(struct gpt2_block));
	m->params.mem = buf_zeroed(P, sizeof(floatX));
	m->grads.mem = buf_zeroed(P, sizeof(floatX));
	m->nevents = cfg->num_layers + 1;
	m->events = calloc(m->nevents, sizeof(*m->events));
	if (!m->params.block || !m->grads.block || !m->params.mem || !m->grads.mem || !m->events)
		goto err_free;
	params_point(&m->params, m->params.mem, cfg);
	params_point(&m->grads, m->grads.mem, cfg);
	/* event 0: embeddings; event 1 + j: block L-1-j (the top one with lnf) */
	m->events[0].off = 0;
	m->events[0].count = embed_size(cfg);
	for (int j = 0; j < cfg->num_layers; j++) {
		int l = cfg->num_layers - 1 - j;

		m->events[1 + j].off = embed_size(cfg) + (size_t)l * bs;
		m->events[1 + j].count = bs + (j == 0 ? 2 * (size_t)cfg->channels : 0);
	}
	return m;

err_free:
	gpt2_destroy(m);
err_nomem:
	fprintf(stderr, "gpt2: out of memory for %zu parameters\n",
		embed_size(cfg) + cfg->num_layers * block_size(cfg->channels));
	return NULL;
}

static void acts_free(struct gpt2 *m)
{
	free(m->acts.mem);
	free(m->acts.block);
	memset(&m->acts, 0, sizeof(m->acts));
	m->B = 0;
	m->T = 0;
}

void gpt2_destroy(struct gpt2 *m)
{
	if (!m)
		return;
	acts_free(m);
	buf_free(m->params.mem);
	buf_free(m->grads.mem);
	free(m->params.block);
	free(m->grads.block);
	free(m->events);
	free(m);
}

/*
 * Point the activation buffers for (B, T) into @base, one after the other;
 * returns the number of elements used. Called with base NULL to measure.
 */
static size_t acts_carve(struct gpt2_acts *a, floatX *base, const struct gpt2_config *c, int B,
			 int T)
{
	size_t BT = (size_t)B * T;
	size_t C = c->channels;
	size_t att = (size_t)B * c->num_heads * T * T;
	size_t used = 0;
	struct gpt2_block_acts dummy;

#define TAKE(field, n)                                                                             \
	do {                                                                                       \
		field = base ? base + used : NULL;                                                 \
		used += (n);                                                                       \
	} while (0)
	TAKE(a->encoded, BT * C);
	for (int l = 0; l < c->num_layers; l++) {
		struct gpt2_block_acts *ba = base ? &a->block[l] : &dummy;

		TAKE(ba->ln1, BT * C);
		TAKE(ba->ln1_mean, BT);
		TAKE(ba->ln1_rstd, BT);
		TAKE(ba->qkv, 3 * BT * C);
		TAKE(ba->atty, BT * C);
		TAKE(ba->att, att);
		TAKE(ba->res2, BT * C);
		TAKE(ba->ln2, BT * C);
		TAKE(ba->ln2_mean, BT);
		TAKE(ba->ln2_rstd, BT);
		TAKE(ba->fch, 4 * BT * C);
		TAKE(ba->fch_gelu, 4 * BT * C);
		TAKE(ba->res3, BT * C);
	}
	TAKE(a->lnf, BT * C);
	TAKE(a->lnf_mean, BT);
	TAKE(a->lnf_rstd, BT);
	TAKE(a->probs, BT * c->padded_vocab_size);
	TAKE(a->losses, BT);
	TAKE(a->dres, BT * C);
	TAKE(a->dln, BT * C);
	TAKE(a->datty, BT * C);
	TAKE(a->dqkv, 3 * BT * C);
	TAKE(a->datt, att);
	TAKE(a->dfch, 4 * BT * C);
	TAKE(a->dfch_gelu, 4 * BT * C);
	/* the largest transposed weight: wte (Vp, C) or fcw (4C, C) */
	TAKE(a->scratch,
	     C * ((size_t)c->padded_vocab_size > 4 * C ? (size_t)c->padded_vocab_size : 4 * C));
#undef TAKE
	return used;
}

static int acts_alloc(struct gpt2 *m, int B, int T)
{
	struct gpt2_acts tmp;
	size_t total = acts_carve(&tmp, NULL, &m->cfg, B, T);

	acts_free(m);
	m->acts.mem = alloc_zeroed(total, sizeof(floatX));
	m->acts.block = calloc(m->cfg.num_layers, sizeof(struct gpt2_block_acts));
	if (!m->acts.mem || !m->acts.block) {
		fprintf(stderr, "gpt2: out of memory for activations (B %d T %d, %zu MiB)\n", B, T,
			total * sizeof(floatX) >> 20);
		acts_free(m);
		return -1;
	}
	acts_carve(&m->acts, m->acts.mem, &m->cfg, B, T);
	m->B = B;
	m->T = T;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Initialisation                                                            */
/* ------------------------------------------------------------------------ */

/* splitmix64 (Steele, Lea & Flood 2014): small, seedable, well mixed */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* standard normal by Box-Muller from two 53-bit uniforms */
static double randn(uint64_t *s)
{
	double u1 = ((splitmix64(s) >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
	double u2 = (splitmix64(s) >> 11) / 9007199254740992.0;

	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void gpt2_init_random(struct gpt2 *m, uint64_t seed)
{
	const struct gpt2_config *c = &m->cfg;
	double proj_std = 0.02 / sqrt(2.0 * c->num_layers);
	uint64_t s = seed;

	memset(m->params.mem, 0, m->num_params * sizeof(floatX));
	for (int k = 0; k < GPT2_NUM_TENSORS; k++) {
		int layers = tensor_is_layered(k) ? c->num_layers : 1;

		for (int l = 0; l < layers; l++) {
			size_t off;
			size_t count;
			floatX *p;
			double std = 0.02;

			gpt2_tensor_slice(m, k, l, &off, &count);
			p = m->params.mem + off;
			switch (k) {
			case GPT2_LN1W:
			case GPT2_LN2W:
			case GPT2_LNFW:
				for (size_t i = 0; i < count; i++)
					p[i] = 1;
				break;
			case GPT2_LN1B:
			case GPT2_LN2B:
			case GPT2_LNFB:
			case GPT2_QKVB:
			case GPT2_ATTPROJB:
			case GPT2_FCB:
			case GPT2_FCPROJB:
				break; /* zero */
			case GPT2_WTE:
				count = (size_t)c->vocab_size * c->channels; /* padding stays 0 */
									     /* fall through */
			default:
				if (k == GPT2_ATTPROJW || k == GPT2_FCPROJW)
					std = proj_std;
				for (size_t i = 0; i < count; i++)
					p[i] = (floatX)(std * randn(&s));
			}
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Forward and backward                                                      */
/* ------------------------------------------------------------------------ */

static int ensure_acts(struct gpt2 *m, int B, int T)
{
	if (T > m->cfg.max_seq_len || B < 1 || T < 1) {
		fprintf(stderr, "gpt2: bad batch B %d T %d (maxT %d)\n", B, T, m->cfg.max_seq_len);
		return -1;
	}
	if (B <= m->B && T <= m->T)
		return 0;
	return acts_alloc(m, B > m->B ? B : m->B, T > m->T ? T : m->T);
}

/* the transformer blocks and the final layernorm on inputs (B, T) */
static void forward_blocks(struct gpt2 *m, const int *inputs, int B, int T)
{
	const struct gpt2_config *c = &m->cfg;
	int C = c->channels;
	int NH = c->num_heads;
	int BT = B * T;
	struct gpt2_acts *a = &m->acts;
	const floatX *res;

	encoder_forward(a->encoded, inputs, m->params.wte, m->params.wpe, B, T, C);
	res = a->encoded;
	for (int l = 0; l < c->num_layers; l++) {
		const struct gpt2_block *p = &m->params.block[l];
		struct gpt2_block_acts *ba = &a->block[l];

		layernorm_forward(ba->ln1, ba->ln1_mean, ba->ln1_rstd, res, p->ln1w, p->ln1b, B, T,
				  C);
		matmul_forward(ba->qkv, ba->ln1, p->qkvw, p->qkvb, a->scratch, BT, C, 3 * C);
		attention_forward(ba->atty, ba->att, ba->qkv, B, T, C, NH);
		/* the projection goes through dln, free during forward */
		matmul_forward(a->dln, ba->atty, p->attprojw, p->attprojb, a->scratch, BT, C, C);
		residual_forward(ba->res2, res, a->dln, (size_t)BT * C);
		layernorm_forward(ba->ln2, ba->ln2_mean, ba->ln2_rstd, ba->res2, p->ln2w, p->ln2b,
				  B, T, C);
		matmul_forward(ba->fch, ba->ln2, p->fcw, p->fcb, a->scratch, BT, C, 4 * C);
		gelu_forward(ba->fch_gelu, ba->fch, (size_t)BT * 4 * C);
		matmul_forward(a->dln, ba->fch_gelu, p->fcprojw, p->fcprojb, a->scratch, BT, 4 * C,
			       C);
		residual_forward(ba->res3, ba->res2, a->dln, (size_t)BT * C);
		res = ba->res3;
	}
	layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, res, m->params.lnfw, m->params.lnfb, B,
			  T, C);
}

double gpt2_forward(struct gpt2 *m, const int *inputs, const int *targets, int B, int T)
{
	const struct gpt2_config *c = &m->cfg;
	struct gpt2_acts *a;
	double loss;

	if (ensure_acts(m, B, T) != 0)
		return -2;
	a = &m->acts;
	forward_blocks(m, inputs, B, T);
	/* LM head tied to wte: logits (B,T,Vp) = lnf @ wte^T */
	matmul_forward(a->probs, a->lnf, m->params.wte, NULL, a->scratch, B * T, c->channels,
		       c->padded_vocab_size);
	loss = softmax_crossentropy_forward(a->probs, a->losses, targets, B, T, c->vocab_size,
					    c->padded_vocab_size);
	m->inputs = inputs;
	m->targets = targets;
	m->fwd_B = B;
	m->fwd_T = T;
	m->mean_loss = loss;
	return loss;
}

const floatX *gpt2_logits_last(struct gpt2 *m, const int *tokens, int t)
{
	const struct gpt2_config *c = &m->cfg;
	const floatX *x;
	floatX *logits;
	int C = c->channels;

	if (ensure_acts(m, 1, t) != 0)
		return NULL;
	forward_blocks(m, tokens, 1, t);
	x = m->acts.lnf + (size_t)(t - 1) * C;
	logits = m->acts.probs;
#pragma omp parallel for schedule(static)
	for (int v = 0; v < c->padded_vocab_size; v++) {
		const floatX *w = m->params.wte + (size_t)v * C;
		floatX s = 0;

		for (int i = 0; i < C; i++)
			s += x[i] * w[i];
		logits[v] = s;
	}
	m->targets = NULL;
	return logits;
}

void gpt2_zero_grad(struct gpt2 *m)
{
	memset(m->grads.mem, 0, m->num_params * sizeof(floatX));
}

void gpt2_backward(struct gpt2 *m, floatX loss_scale, gpt2_ready_fn ready, void *ctx)
{
	const struct gpt2_config *c = &m->cfg;
	int B = m->fwd_B;
	int T = m->fwd_T;
	int BT = B * T;
	int C = c->channels;
	int NH = c->num_heads;
	int Vp = c->padded_vocab_size;
	struct gpt2_acts *a = &m->acts;
	struct gpt2_params *g = &m->grads;

	/* loss = mean over B*T tokens, times loss_scale */
	softmax_crossentropy_backward(a->probs, m->targets, loss_scale / BT, B, T,
				      c->padded_vocab_size);
	/* LM head (matmul_backward's two products, in the other order): dwte's
	 * head part first, so that its bucket is reduced while dlnf and the
	 * blocks are computed; the encoder's part of wte/wpe is deferred */
	gpt2_gemm(Vp, C, BT, a->probs, Vp, 1, a->lnf, C, g->wte, C); /* dlogits^T @ lnf */
	if (ready)
		ready(ctx, 0);
	memset(a->dln, 0, (size_t)BT * C * sizeof(floatX));
	gpt2_gemm(BT, C, Vp, a->probs, Vp, 0, m->params.wte, C, a->dln, C); /* dlogits @ wte */
	memset(a->dres, 0, (size_t)BT * C * sizeof(floatX));
	layernorm_backward(a->dres, g->lnfw, g->lnfb, a->dln, a->block[c->num_layers - 1].res3,
			   m->params.lnfw, a->lnf_mean, a->lnf_rstd, B, T, C);
	for (int l = c->num_layers - 1; l >= 0; l--) {
		const struct gpt2_block *p = &m->params.block[l];
		struct gpt2_block *gb = &g->block[l];
		struct gpt2_block_acts *ba = &a->block[l];
		const floatX *res = l == 0 ? a->encoded : a->block[l - 1].res3;

		/* dres holds d(res3); res3 = res2 + fcproj(gelu(fc(ln2(res2)))) */
		memset(a->dfch_gelu, 0, (size_t)BT * 4 * C * sizeof(floatX));
		matmul_backward(a->dfch_gelu, gb->fcprojw, gb->fcprojb, a->dres, ba->fch_gelu,
				p->fcprojw, BT, 4 * C, C);
		memset(a->dfch, 0, (size_t)BT * 4 * C * sizeof(floatX));
		gelu_backward(a->dfch, ba->fch, a->dfch_gelu, (size_t)BT * 4 * C);
		memset(a->dln, 0, (size_t)BT * C * sizeof(floatX));
		matmul_backward(a->dln, gb->fcw, gb->fcb, a->dfch, ba->ln2, p->fcw, BT, C, 4 * C);
		layernorm_backward(a->dres, gb->ln2w, gb->ln2b, a->dln, ba->res2, p->ln2w,
				   ba->ln2_mean, ba->ln2_rstd, B, T, C);
		/* dres holds d(res2); res2 = res + attproj(attention(qkv(ln1(res)))) */
		memset(a->datty, 0, (size_t)BT * C * sizeof(floatX));
		matmul_backward(a->datty, gb->attprojw, gb->attprojb, a->dres, ba->atty,
				p->attprojw, BT, C, C);
		memset(a->dqkv, 0, (size_t)BT * 3 * C * sizeof(floatX));
		attention_backward(a->dqkv, a->datt, a->datty, ba->qkv, ba->att, B, T, C, NH);
		memset(a->dln, 0, (size_t)BT * C * sizeof(floatX));
		matmul_backward(a->dln, gb->qkvw, gb->qkvb, a->dqkv, ba->ln1, p->qkvw, BT, C,
				3 * C);
		layernorm_backward(a->dres, gb->ln1w, gb->ln1b, a->dln, res, p->ln1w, ba->ln1_mean,
				   ba->ln1_rstd, B, T, C);
		if (ready)
			ready(ctx, c->num_layers - l);
	}
	/* dres holds d(encoded) */
	if (!ready)
		encoder_backward(g->wte, g->wpe, a->dres, m->inputs, (size_t)BT, T, C,
				 c->padded_vocab_size, 1, 0, m->num_params);
}

void gpt2_encoder_backward_apply(struct gpt2 *m, const int *tokens, const floatX *dres, size_t N,
				 int T, floatX scale, size_t lo, size_t hi)
{
	encoder_backward(m->grads.wte, m->grads.wpe, dres, tokens, N, T, m->cfg.channels,
			 m->cfg.padded_vocab_size, scale, lo, hi);
}

double gpt2_flops_per_token(const struct gpt2_config *cfg, int T)
{
	double C = cfg->channels;
	double L = cfg->num_layers;

	return 6.0 * (12.0 * L * C * C + (double)cfg->padded_vocab_size * C) +
	       6.0 * L * C * (T + 1);
}

/* ------------------------------------------------------------------------ */
/* Optimizer                                                                 */
/* ------------------------------------------------------------------------ */

#define SUMSQ_BLOCK 65536

double gpt2_sumsq(const floatX *x, size_t n)
{
	size_t nblocks = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
	double *part;
	double total = 0;

	if (n == 0)
		return 0;
	part = malloc(nblocks * sizeof(double));
	if (!part) {
		/* fall back to one sequential pass: same blocks, same order */
		for (size_t b = 0; b < nblocks; b++) {
			double s = 0;

			for (size_t i = b * SUMSQ_BLOCK; i < n && i < (b + 1) * SUMSQ_BLOCK; i++)
				s += (double)x[i] * x[i];
			total += s;
		}
		return total;
	}
#pragma omp parallel for schedule(static)
	for (size_t b = 0; b < nblocks; b++) {
		double s = 0;

		for (size_t i = b * SUMSQ_BLOCK; i < n && i < (b + 1) * SUMSQ_BLOCK; i++)
			s += (double)x[i] * x[i];
		part[b] = s;
	}
	for (size_t b = 0; b < nblocks; b++)
		total += part[b];
	free(part);
	return total;
}

void gpt2_adamw_update(struct gpt2 *m, const floatX *grads, float *m_mem, float *v_mem, size_t lo,
		       size_t hi, const struct gpt2_adamw *opt)
{
	float b1c = 1.0f - powf(opt->beta1, (float)opt->t);
	float b2c = 1.0f - powf(opt->beta2, (float)opt->t);
	size_t i = lo;

	while (i < hi) {
		size_t end = decay_run_end(m, i);
		float wd = gpt2_param_decays(m, i) ? opt->weight_decay : 0.0f;
		size_t j0 = i;

		if (end > hi)
			end = hi;
#pragma omp parallel for schedule(static)
		for (size_t j = j0; j < end; j++) {
			float gr = (float)grads[j] * opt->grad_scale;
			float mm = opt->beta1 * m_mem[j - lo] + (1.0f - opt->beta1) * gr;
			float vv = opt->beta2 * v_mem[j - lo] + (1.0f - opt->beta2) * gr * gr;
			float mhat = mm / b1c;
			float vhat = vv / b2c;
			float p = (float)m->params.mem[j];

			m_mem[j - lo] = mm;
			v_mem[j - lo] = vv;
			m->params.mem[j] =
			    (floatX)(p - opt->lr * (mhat / (sqrtf(vhat) + opt->eps) + wd * p));
		}
		i = end;
	}
}

/* ------------------------------------------------------------------------ */
/* llm.c model files                                                         */
/* ------------------------------------------------------------------------ */

int gpt2_read_header(const char *path, struct gpt2_config *cfg_p, int *version_p)
{
	int32_t h[GPT2_HEADER_INTS];
	FILE *f = fopen(path, "rb");

	if (!f) {
		fprintf(stderr, "gpt2: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fread(h, sizeof(h), 1, f) != 1) {
		fprintf(stderr, "gpt2: %s: short header\n", path);
		fclose(f);
		return -1;
	}
	fclose(f);
	if (h[0] != GPT2_MODEL_MAGIC) {
		fprintf(stderr, "gpt2: %s: bad magic %d (want %d: an llm.c model file)\n", path,
			h[0], GPT2_MODEL_MAGIC);
		return -1;
	}
	if (h[1] != GPT2_MODEL_V_FP32 && h[1] != GPT2_MODEL_V_BF16) {
		fprintf(stderr, "gpt2: %s: version %d not supported (3 fp32 or 5 bf16)\n", path,
			h[1]);
		return -1;
	}
	cfg_p->max_seq_len = h[2];
	cfg_p->vocab_size = h[3];
	cfg_p->num_layers = h[4];
	cfg_p->num_heads = h[5];
	cfg_p->channels = h[6];
	cfg_p->padded_vocab_size = h[7];
	*version_p = h[1];
	return 0;
}

/* visit every tensor slice in llm.c's file order */
#define FOR_EACH_FILE_SLICE(m, off, count, body)                                                   \
	for (int k_ = 0; k_ < GPT2_NUM_TENSORS; k_++)                                              \
		for (int l_ = 0; l_ < (tensor_is_layered(k_) ? (m)->cfg.num_layers : 1); l_++) {   \
			gpt2_tensor_slice((m), k_, l_, &(off), &(count));                          \
			body                                                                       \
		}

int gpt2_save(const struct gpt2 *m, const char *path)
{
	int32_t h[GPT2_HEADER_INTS] = {0};
	char tmp[4096];
	float buf[4096];
	size_t off;
	size_t count;
	FILE *f;
	int bad = 0;

	h[0] = GPT2_MODEL_MAGIC;
	h[1] = GPT2_MODEL_V_FP32;
	h[2] = m->cfg.max_seq_len;
	h[3] = m->cfg.vocab_size;
	h[4] = m->cfg.num_layers;
	h[5] = m->cfg.num_heads;
	h[6] = m->cfg.channels;
	h[7] = m->cfg.padded_vocab_size;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		fprintf(stderr, "gpt2: path too long: %s\n", path);
		return -1;
	}
	f = fopen(tmp, "wb");
	if (!f) {
		fprintf(stderr, "gpt2: cannot create %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	bad |= fwrite(h, sizeof(h), 1, f) != 1;
	FOR_EACH_FILE_SLICE(m, off, count, {
		for (size_t i = 0; i < count && !bad; i += 4096) {
			size_t n = count - i < 4096 ? count - i : 4096;

			for (size_t j = 0; j < n; j++)
				buf[j] = (float)m->params.mem[off + i + j];
			bad |= fwrite(buf, sizeof(float), n, f) != n;
		}
	})
	bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, path) != 0) {
		fprintf(stderr, "gpt2: writing %s failed: %s\n", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

struct gpt2 *gpt2_load(const char *path)
{
	struct gpt2_config cfg;
	struct gpt2 *m;
	int version;
	size_t elem;
	size_t off;
	size_t count;
	long want;
	FILE *f;
	int bad = 0;

	if (gpt2_read_header(path, &cfg, &version) != 0)
		return NULL;
	m = gpt2_create(&cfg);
	if (!m)
		return NULL;
	elem = version == GPT2_MODEL_V_FP32 ? 4 : 2;
	f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) != 0) {
		fprintf(stderr, "gpt2: cannot read %s: %s\n", path, strerror(errno));
		goto err;
	}
	want = (long)(GPT2_HEADER_INTS * 4 + m->num_params * elem);
	if (ftell(f) != want) {
		fprintf(stderr,
			"gpt2: %s is %ld bytes, header says %ld (L %d C %d Vp %d maxT %d)\n", path,
			ftell(f), want, cfg.num_layers, cfg.channels, cfg.padded_vocab_size,
			cfg.max_seq_len);
		goto err;
	}
	fseek(f, GPT2_HEADER_INTS * 4, SEEK_SET);
	FOR_EACH_FILE_SLICE(m, off, count, {
		for (size_t i = 0; i < count && !bad; i += 4096) {
			size_t n = count - i < 4096 ? count - i : 4096;
			float buf[4096];
			uint16_t hb[4096];

			if (elem == 4) {
				bad |= fread(buf, 4, n, f) != n;
			} else {
				bad |= fread(hb, 2, n, f) != n;
				for (size_t j = 0; j < n; j++) {
					uint32_t bits = (uint32_t)hb[j] << 16;

					memcpy(&buf[j], &bits, 4);
				}
			}
			for (size_t j = 0; j < n; j++)
				m->params.mem[off + i + j] = buf[j];
		}
	})
	if (bad) {
		fprintf(stderr, "gpt2: short read in %s\n", path);
		goto err;
	}
	fclose(f);
	return m;

err:
	if (f)
		fclose(f);
	gpt2_destroy(m);
	return NULL;
}
