/* SPDX-License-Identifier: MIT */
/*
 * reduce_kern.h - the reduction loops of one instruction-set variant. Not a
 * normal header: reduce.c includes it once per variant after defining
 *   RK_NAME(x)  the variant's name for x (x##_portable, x##_avx2),
 *   RK_ATTR     the variant's function attribute (empty, or
 *               __attribute__((target("avx2,f16c")))),
 *   RK_F16C     1 to convert float16 with the F16C instructions,
 * and the element helpers and loop macros (RK_FOR, RK_LOOP*, RK_TYPES).
 * It defines static functions and the variant's table RK_NAME(table).
 *
 * Loops use the variables dv/av/bv/sv, n, dt and op by convention, so the
 * macros of reduce.c can be expanded inside these functions.
 */

/* dv = av OP bv; none of dv, av, bv overlap (av == bv is fine: both read only) */
static RK_ATTR void RK_NAME(r3)(void *restrict dv, const void *restrict av, const void *restrict bv,
				size_t n, ibc_dtype_t dt, ibc_redop_t op)
{
	RK_TYPES(RK_LOOP3);
}

/* dv = dv OP sv (accumulate); dv and sv do not overlap */
static RK_ATTR void RK_NAME(r2)(void *restrict dv, const void *restrict sv, size_t n,
				ibc_dtype_t dt, ibc_redop_t op)
{
	RK_TYPES(RK_LOOP2);
}

/* dv = sv OP dv (sv is the left operand); dv and sv do not overlap */
static RK_ATTR void RK_NAME(r2r)(void *restrict dv, const void *restrict sv, size_t n,
				 ibc_dtype_t dt, ibc_redop_t op)
{
	RK_TYPES(RK_LOOP2R);
}

/* float16 -> fp32, exact */
static RK_ATTR void RK_NAME(h2f)(float *restrict d, const uint16_t *restrict s, size_t n)
{
#if RK_F16C
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
	if (i < n) {
		uint16_t t[8] = {0};
		float f[8];

		memcpy(t, s + i, (n - i) * sizeof(*t));
		_mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t)));
		memcpy(d + i, f, (n - i) * sizeof(*f));
	}
#else
	RK_FOR(uint16_t, n, k, d[k] = rk_h2f(s[k]););
#endif
}

/* fp32 -> float16, round to nearest even */
static RK_ATTR void RK_NAME(f2h)(uint16_t *restrict d, const float *restrict s, size_t n)
{
#if RK_F16C
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i),
								     _MM_FROUND_TO_NEAREST_INT));
	if (i < n) {
		float f[8] = {0};
		uint16_t t[8];

		memcpy(f, s + i, (n - i) * sizeof(*f));
		_mm_storeu_si128((__m128i *)t,
				 _mm256_cvtps_ph(_mm256_loadu_ps(f), _MM_FROUND_TO_NEAREST_INT));
		memcpy(d + i, t, (n - i) * sizeof(*t));
	}
#else
	RK_FOR(uint16_t, n, k, d[k] = rk_f2h(s[k]););
#endif
}

/* bfloat16 -> fp32, exact (a shift; vectorized by the compiler) */
static RK_ATTR void RK_NAME(b2f)(float *restrict d, const uint16_t *restrict s, size_t n)
{
	RK_FOR(uint16_t, n, k, d[k] = rk_b2f(s[k]););
}

/* fp32 -> bfloat16, round to nearest even (integer arithmetic; vectorized) */
static RK_ATTR void RK_NAME(f2b)(uint16_t *restrict d, const float *restrict s, size_t n)
{
	RK_FOR(uint16_t, n, k, d[k] = rk_f2b(s[k]););
}

static RK_ATTR void RK_NAME(to_f32)(float *restrict d, const void *restrict s, size_t n,
				    ibc_dtype_t dt)
{
	if (dt == IBC_FLOAT16)
		RK_NAME(h2f)(d, s, n);
	else if (dt == IBC_BFLOAT16)
		RK_NAME(b2f)(d, s, n);
	else if (dt == IBC_FLOAT32)
		memcpy(d, s, n * sizeof(float));
	else
		IBC_ASSERT(0);
}

static RK_ATTR void RK_NAME(from_f32)(void *restrict d, const float *restrict s, size_t n,
				      ibc_dtype_t dt)
{
	if (dt == IBC_FLOAT16)
		RK_NAME(f2h)(d, s, n);
	else if (dt == IBC_BFLOAT16)
		RK_NAME(f2b)(d, s, n);
	else if (dt == IBC_FLOAT32)
		memcpy(d, s, n * sizeof(float));
	else
		IBC_ASSERT(0);
}

/*
 * dv = av OP bv for float16 with F16C (other variants use the fused loops
 * of r3/r2/r2r), staged through fp32 blocks on the stack: each block of av
 * and bv is read before the block of dv is written, so dv may alias av or
 * bv exactly.
 */
static RK_ATTR void RK_NAME(r16)(void *dv, const void *av, const void *bv, size_t n, ibc_dtype_t dt,
				 ibc_redop_t op)
{
	uint16_t *d = dv;
	const uint16_t *a = av;
	const uint16_t *b = bv;
	float fa[RK_STAGE];
	float fb[RK_STAGE];
	size_t i;

	for (i = 0; i < n; i += RK_STAGE) {
		size_t m = IBC_MIN((size_t)RK_STAGE, n - i);

		RK_NAME(to_f32)(fa, a + i, m, dt);
		RK_NAME(to_f32)(fb, b + i, m, dt);
		RK_NAME(r2)(fa, fb, m, IBC_FLOAT32, op);
		RK_NAME(from_f32)(d + i, fa, m, dt);
	}
}

/* acc = acc OP (float)src, src float16/bfloat16/float32 */
static RK_ATTR void RK_NAME(f32_acc)(float *restrict acc, const void *restrict src, size_t n,
				     ibc_dtype_t dt, ibc_redop_t op)
{
	const uint16_t *s = src;
	float fb[RK_STAGE];
	size_t i;

	if (dt == IBC_FLOAT32) {
		RK_NAME(r2)(acc, src, n, IBC_FLOAT32, op);
		return;
	}
	for (i = 0; i < n; i += RK_STAGE) {
		size_t m = IBC_MIN((size_t)RK_STAGE, n - i);

		RK_NAME(to_f32)(fb, s + i, m, dt);
		RK_NAME(r2)(acc + i, fb, m, IBC_FLOAT32, op);
	}
}

/* dst = round(acc OP (float)src); dst may alias src exactly, not acc */
static RK_ATTR void RK_NAME(f32_acc_cvt)(void *dst, const float *acc, const void *src, size_t n,
					 ibc_dtype_t dt, ibc_redop_t op)
{
	const uint16_t *s = src;
	uint16_t *d = dst;
	float fb[RK_STAGE];
	size_t i;

	if (dt == IBC_FLOAT32) {
		if (dst == src)
			RK_NAME(r2r)(dst, acc, n, IBC_FLOAT32, op);
		else
			RK_NAME(r3)(dst, acc, src, n, IBC_FLOAT32, op);
		return;
	}
	for (i = 0; i < n; i += RK_STAGE) {
		size_t m = IBC_MIN((size_t)RK_STAGE, n - i);

		RK_NAME(to_f32)(fb, s + i, m, dt);
		RK_NAME(r2r)(fb, acc + i, m, IBC_FLOAT32, op);
		RK_NAME(from_f32)(d + i, fb, m, dt);
	}
}

/* buf = buf / nr (AVG); integer division is not vectorized on x86 */
static RK_ATTR void RK_NAME(avg)(void *buf, size_t n, ibc_dtype_t dt, int nr)
{
	float fb[RK_STAGE];
	size_t i;

	switch (dt) {
	case IBC_INT8:
		RK_AVG_INT(int8_t, buf, n, nr);
		break;
	case IBC_UINT8:
		RK_AVG_INT(uint8_t, buf, n, nr);
		break;
	case IBC_INT32:
		RK_AVG_INT(int32_t, buf, n, nr);
		break;
	case IBC_UINT32:
		RK_AVG_INT(uint32_t, buf, n, nr);
		break;
	case IBC_INT64:
		RK_AVG_INT(int64_t, buf, n, nr);
		break;
	case IBC_UINT64:
		RK_AVG_INT(uint64_t, buf, n, nr);
		break;
	case IBC_FLOAT32: {
		float *restrict f = buf;
		const float div = (float)nr;

		RK_FOR(float, n, k, f[k] = f[k] / div;);
		break;
	}
	case IBC_FLOAT64: {
		double *restrict f = buf;
		const double div = (double)nr;

		RK_FOR(double, n, k, f[k] = f[k] / div;);
		break;
	}
	case IBC_FLOAT16:
	case IBC_BFLOAT16: {
		uint16_t *h = buf;
		const float div = (float)nr;

		for (i = 0; i < n; i += RK_STAGE) {
			size_t m = IBC_MIN((size_t)RK_STAGE, n - i);

			RK_NAME(to_f32)(fb, h + i, m, dt);
			RK_FOR(float, m, k, fb[k] = fb[k] / div;);
			RK_NAME(from_f32)(h + i, fb, m, dt);
		}
		break;
	}
	default:
		IBC_ASSERT(0);
		break;
	}
}

static const struct rk_table RK_NAME(table) = {
    .r3 = RK_NAME(r3),
    .r2 = RK_NAME(r2),
    .r2r = RK_NAME(r2r),
    .r16 = RK_NAME(r16),
    .avg = RK_NAME(avg),
    .to_f32 = RK_NAME(to_f32),
    .from_f32 = RK_NAME(from_f32),
    .f32_acc = RK_NAME(f32_acc),
    .f32_acc_cvt = RK_NAME(f32_acc_cvt),
    .f16_staged = RK_F16C,
};
