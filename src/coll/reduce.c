/* SPDX-License-Identifier: MIT */
/*
 * reduce.c - local reduction kernels (reduce.h): element semantics, the
 * portable float16/bfloat16 conversions, the loop macros, and the dispatch
 * between the instruction-set variants that reduce_kern.h instantiates.
 *
 * Speed: loops run over fixed-size blocks (RK_FOR) so that the compiler
 * vectorizes them even under GCC's "very cheap" cost model of -O2, with
 * restrict pointers (aliased calls are routed to the in-place variants).
 * bfloat16 (and float16 without F16C) are fused: widen, operate, narrow in
 * one vectorized pass, with branch-free integer conversions. With F16C,
 * float16 is staged through fp32 blocks on the stack and converted by the
 * hardware (r16 in reduce_kern.h). The portable conversions are
 * derived from the IEEE 754 binary16/binary32 encodings: normal numbers
 * rebias the exponent, subnormal float16 values are m * 2^-24, and fp32 ->
 * float16 subnormals are rounded by the FPU by adding 0.5f, whose ulp is
 * 2^-24 (the float16 subnormal spacing).
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RK_HAVE_X86 1
#else
#define RK_HAVE_X86 0
#endif

#include "base/check.h"
#include "base/reduce_elem.h"
#include "base/util.h"
#include "coll/reduce.h"

#define RK_INLINE static inline __attribute__((always_inline))

/* elements per RK_FOR block (256 bytes) and per fp32 staging block */
#define RK_BLK(T) (256 / sizeof(T))
#define RK_STAGE 256

/* ---------------------------------------------------------------------- */
/* element semantics                                                       */
/* ---------------------------------------------------------------------- */

/* the shared element semantics (base/reduce_elem.h), by their short names here */
#define rk_f2u ibc_elem_f2u
#define rk_u2f ibc_elem_u2f
#define rk_d2u ibc_elem_d2u
#define rk_u2d ibc_elem_u2d
#define rk_fmin32 ibc_elem_fmin32
#define rk_fmax32 ibc_elem_fmax32
#define rk_fmin64 ibc_elem_fmin64
#define rk_fmax64 ibc_elem_fmax64

/*
 * all-ones when @cond holds, else 0: selects written as masks, because
 * GCC's -O2 if-conversion leaves nested ?: as branches that block the
 * vectorizer
 */
#define RK_MASK(cond) (-(uint32_t)(cond))

/* float16 -> fp32, exact; a NaN is quietened (bit 22 set), as F16C does */
RK_INLINE float rk_h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t em = h & 0x7fffu;			   /* exponent and mantissa */
	uint32_t norm = (em << 13) + ((127u - 15u) << 23); /* rebias the exponent */
	uint32_t infnan = (em << 13) | 0x7f800000u | ((uint32_t)(em > 0x7c00u) << 22);
	uint32_t sub = rk_f2u((float)(int32_t)em * 0x1p-24f); /* m * 2^-24, exact */
	uint32_t m_sub = RK_MASK(em < 0x0400u);
	uint32_t m_inf = RK_MASK(em >= 0x7c00u);
	uint32_t r = (sub & m_sub) | (infnan & m_inf) | (norm & ~(m_sub | m_inf));

	return rk_u2f(r | sign);
}

/* fp32 -> float16, round to nearest even; NaN -> quiet NaN (sign, high payload) */
RK_INLINE uint16_t rk_f2h(float f)
{
	uint32_t u = rk_f2u(f);
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t a = u & 0x7fffffffu;
	/* normal: rebias, then add half an ulp minus one plus the lsb (ties to even) */
	uint32_t norm = (a - ((127u - 15u) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
	/* |f| < 2^-14: the FPU rounds |f| + 0.5 to a multiple of 2^-24 */
	uint32_t sub = rk_f2u(rk_u2f(a) + 0.5f) - 0x3f000000u;
	uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
	uint32_t m_sub = RK_MASK(a < 0x38800000u);
	uint32_t m_inf = RK_MASK(a >= 0x477ff000u); /* |f| >= 65520 rounds to infinity */
	uint32_t m_nan = RK_MASK(a > 0x7f800000u);
	uint32_t r = (sub & m_sub) | (norm & ~m_sub);

	r = (r & ~m_inf) | (0x7c00u & m_inf);
	r = (r & ~m_nan) | (nan & m_nan);
	return (uint16_t)(r | sign);
}

#define rk_b2f ibc_elem_b2f

/* fp32 -> bfloat16, round to nearest even; NaN -> quiet NaN (sign, high payload) */
RK_INLINE uint16_t rk_f2b(float f)
{
	uint32_t u = rk_f2u(f);
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	uint32_t nan = (u >> 16) | 0x40u;
	uint32_t m_nan = RK_MASK((u & 0x7fffffffu) > 0x7f800000u);

	return (uint16_t)((r & ~m_nan) | (nan & m_nan));
}

/* ---------------------------------------------------------------------- */
/* loop macros (used by reduce_kern.h)                                     */
/* ---------------------------------------------------------------------- */

/* run BODY for k in [0, n), in blocks of a constant trip count */
#define RK_FOR(T, n, k, BODY)                                                                      \
	do {                                                                                       \
		size_t rk_i_ = 0;                                                                  \
		for (; rk_i_ + RK_BLK(T) <= (n); rk_i_ += RK_BLK(T))                               \
			for (size_t k = rk_i_; k < rk_i_ + RK_BLK(T); k++) {                       \
				BODY                                                               \
			}                                                                          \
		for (size_t k = rk_i_; k < (n); k++) {                                             \
			BODY                                                                       \
		}                                                                                  \
	} while (0)

/* element operations: T the type, U its unsigned twin (wrap-around) */
#define RK_ISUM IBC_ELEM_ISUM
#define RK_IPROD IBC_ELEM_IPROD
#define RK_IMIN IBC_ELEM_IMIN
#define RK_IMAX IBC_ELEM_IMAX
#define RK_FSUM(T, U, x, y) ((x) + (y))
#define RK_FPROD(T, U, x, y) ((x) * (y))
#define RK_FMIN32(T, U, x, y) rk_fmin32((x), (y))
#define RK_FMAX32(T, U, x, y) rk_fmax32((x), (y))
#define RK_FMIN64(T, U, x, y) rk_fmin64((x), (y))
#define RK_FMAX64(T, U, x, y) rk_fmax64((x), (y))
/* float16 and bfloat16: widen both, one fp32 operation, round once */
#define RK_HSUM(T, U, x, y) rk_f2h(rk_h2f(x) + rk_h2f(y))
#define RK_HPROD(T, U, x, y) rk_f2h(rk_h2f(x) * rk_h2f(y))
#define RK_HMIN(T, U, x, y) rk_f2h(rk_fmin32(rk_h2f(x), rk_h2f(y)))
#define RK_HMAX(T, U, x, y) rk_f2h(rk_fmax32(rk_h2f(x), rk_h2f(y)))
#define RK_BSUM(T, U, x, y) rk_f2b(rk_b2f(x) + rk_b2f(y))
#define RK_BPROD(T, U, x, y) rk_f2b(rk_b2f(x) * rk_b2f(y))
#define RK_BMIN(T, U, x, y) rk_f2b(rk_fmin32(rk_b2f(x), rk_b2f(y)))
#define RK_BMAX(T, U, x, y) rk_f2b(rk_fmax32(rk_b2f(x), rk_b2f(y)))

/* the three shapes; typed restrict locals over the void parameters */
#define RK_LOOP3(T, U, OPM)                                                                        \
	do {                                                                                       \
		T *restrict d_ = dv;                                                               \
		const T *restrict a_ = av;                                                         \
		const T *restrict b_ = bv;                                                         \
		RK_FOR(T, n, k_, d_[k_] = OPM(T, U, a_[k_], b_[k_]););                             \
	} while (0)

#define RK_LOOP2(T, U, OPM)                                                                        \
	do {                                                                                       \
		T *restrict d_ = dv;                                                               \
		const T *restrict s_ = sv;                                                         \
		RK_FOR(T, n, k_, d_[k_] = OPM(T, U, d_[k_], s_[k_]););                             \
	} while (0)

#define RK_LOOP2R(T, U, OPM)                                                                       \
	do {                                                                                       \
		T *restrict d_ = dv;                                                               \
		const T *restrict s_ = sv;                                                         \
		RK_FOR(T, n, k_, d_[k_] = OPM(T, U, s_[k_], d_[k_]););                             \
	} while (0)

#define RK_OPS(LOOP, T, U, SUMM, PRODM, MINM, MAXM)                                                \
	do {                                                                                       \
		switch (op) {                                                                      \
		case IBC_SUM:                                                                      \
		case IBC_AVG:                                                                      \
			LOOP(T, U, SUMM);                                                          \
			break;                                                                     \
		case IBC_PROD:                                                                     \
			LOOP(T, U, PRODM);                                                         \
			break;                                                                     \
		case IBC_MIN:                                                                      \
			LOOP(T, U, MINM);                                                          \
			break;                                                                     \
		case IBC_MAX:                                                                      \
			LOOP(T, U, MAXM);                                                          \
			break;                                                                     \
		default:                                                                           \
			IBC_ASSERT(0);                                                             \
			break;                                                                     \
		}                                                                                  \
	} while (0)

/*
 * every dtype, fused: one pass, conversions inline. float16 is not expanded
 * in a variant with F16C (RK_F16C), which stages it through fp32 blocks
 * converted by the hardware instead (r16).
 */
#define RK_TYPES(LOOP)                                                                             \
	do {                                                                                       \
		switch (dt) {                                                                      \
		case IBC_FLOAT16:                                                                  \
			if (RK_F16C) {                                                             \
				IBC_ASSERT(0);                                                     \
				break;                                                             \
			}                                                                          \
			RK_OPS(LOOP, uint16_t, uint16_t, RK_HSUM, RK_HPROD, RK_HMIN, RK_HMAX);     \
			break;                                                                     \
		case IBC_BFLOAT16:                                                                 \
			RK_OPS(LOOP, uint16_t, uint16_t, RK_BSUM, RK_BPROD, RK_BMIN, RK_BMAX);     \
			break;                                                                     \
		case IBC_INT8:                                                                     \
			RK_OPS(LOOP, int8_t, uint8_t, RK_ISUM, RK_IPROD, RK_IMIN, RK_IMAX);        \
			break;                                                                     \
		case IBC_UINT8:                                                                    \
			RK_OPS(LOOP, uint8_t, uint8_t, RK_ISUM, RK_IPROD, RK_IMIN, RK_IMAX);       \
			break;                                                                     \
		case IBC_INT32:                                                                    \
			RK_OPS(LOOP, int32_t, uint32_t, RK_ISUM, RK_IPROD, RK_IMIN, RK_IMAX);      \
			break;                                                                     \
		case IBC_UINT32:                                                                   \
			RK_OPS(LOOP, uint32_t, uint32_t, RK_ISUM, RK_IPROD, RK_IMIN, RK_IMAX);     \
			break;                                                                     \
		case IBC_INT64:                                                                    \
			RK_OPS(LOOP, int64_t, uint64_t, RK_ISUM, RK_IPROD, RK_IMIN, RK_IMAX);      \
			break;                                                                     \
		case IBC_UINT64:                                                                   \
			RK_OPS(LOOP, uint64_t, uint64_t, RK_ISUM, RK_IPROD, RK_IMIN, RK_IMAX);     \
			break;                                                                     \
		case IBC_FLOAT32:                                                                  \
			RK_OPS(LOOP, float, uint32_t, RK_FSUM, RK_FPROD, RK_FMIN32, RK_FMAX32);    \
			break;                                                                     \
		case IBC_FLOAT64:                                                                  \
			RK_OPS(LOOP, double, uint64_t, RK_FSUM, RK_FPROD, RK_FMIN64, RK_FMAX64);   \
			break;                                                                     \
		default:                                                                           \
			IBC_ASSERT(0);                                                             \
			break;                                                                     \
		}                                                                                  \
	} while (0)

/* integer AVG: C division of the wrapped sum, truncating toward zero */
#define RK_AVG_INT(T, buf, n, nr)                                                                  \
	do {                                                                                       \
		T *restrict p_ = (buf);                                                            \
		for (size_t k_ = 0; k_ < (n); k_++)                                                \
			p_[k_] = (T)(p_[k_] / (nr)); /* nr > 0 */                                  \
	} while (0)

/* one variant's entry points; see reduce_kern.h */
struct rk_table {
	void (*r3)(void *restrict dv, const void *restrict av, const void *restrict bv, size_t n,
		   ibc_dtype_t dt, ibc_redop_t op);
	void (*r2)(void *restrict dv, const void *restrict sv, size_t n, ibc_dtype_t dt,
		   ibc_redop_t op);
	void (*r2r)(void *restrict dv, const void *restrict sv, size_t n, ibc_dtype_t dt,
		    ibc_redop_t op);
	void (*r16)(void *dv, const void *av, const void *bv, size_t n, ibc_dtype_t dt,
		    ibc_redop_t op);
	void (*avg)(void *buf, size_t n, ibc_dtype_t dt, int nr);
	void (*to_f32)(float *restrict d, const void *restrict s, size_t n, ibc_dtype_t dt);
	void (*from_f32)(void *restrict d, const float *restrict s, size_t n, ibc_dtype_t dt);
	void (*f32_acc)(float *restrict acc, const void *restrict src, size_t n, ibc_dtype_t dt,
			ibc_redop_t op);
	void (*f32_acc_cvt)(void *dst, const float *acc, const void *src, size_t n, ibc_dtype_t dt,
			    ibc_redop_t op);
	int f16_staged; /* float16 goes through r16 (F16C), not r3/r2/r2r */
};

/* the portable variant: the build's baseline ISA (SSE2 on x86-64) */
#define RK_NAME(x) rk_##x##_portable
#define RK_ATTR
#define RK_F16C 0
#include "coll/reduce_kern.h"
#undef RK_NAME
#undef RK_ATTR
#undef RK_F16C

#if RK_HAVE_X86
/* AVX2 + F16C (Haswell and later, Zen and later) */
#define RK_NAME(x) rk_##x##_avx2
#define RK_ATTR __attribute__((target("avx2,f16c")))
#define RK_F16C 1
#include "coll/reduce_kern.h"
#undef RK_NAME
#undef RK_ATTR
#undef RK_F16C
#endif

/* ---------------------------------------------------------------------- */
/* dispatch                                                                */
/* ---------------------------------------------------------------------- */

static const struct rk_table *rk_cur; /* atomic; NULL until first use */

int ibc_reduce_isa_supported(enum ibc_reduce_isa isa)
{
	switch (isa) {
	case IBC_REDUCE_ISA_PORTABLE:
		return 1;
	case IBC_REDUCE_ISA_AVX2:
#if RK_HAVE_X86
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
		return 0;
#endif
	default:
		return 0;
	}
}

static const struct rk_table *rk_table_of(enum ibc_reduce_isa isa)
{
#if RK_HAVE_X86
	if (isa == IBC_REDUCE_ISA_AVX2)
		return &rk_table_avx2;
#endif
	return &rk_table_portable;
}

static const struct rk_table *rk_select(void)
{
	enum ibc_reduce_isa isa = ibc_reduce_isa_supported(IBC_REDUCE_ISA_AVX2)
				      ? IBC_REDUCE_ISA_AVX2
				      : IBC_REDUCE_ISA_PORTABLE;
	const struct rk_table *t = rk_table_of(isa);
	const struct rk_table *expected = NULL;

	/* first caller wins; a racing caller computed the same answer */
	if (!__atomic_compare_exchange_n(&rk_cur, &expected, t, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return expected;
	return t;
}

static inline const struct rk_table *rk_get(void)
{
	const struct rk_table *t = __atomic_load_n(&rk_cur, __ATOMIC_ACQUIRE);

	return IBC_LIKELY(t != NULL) ? t : rk_select();
}

enum ibc_reduce_isa ibc_reduce_isa_get(void)
{
#if RK_HAVE_X86
	if (rk_get() == &rk_table_avx2)
		return IBC_REDUCE_ISA_AVX2;
#endif
	return IBC_REDUCE_ISA_PORTABLE;
}

ibc_status_t ibc_reduce_isa_set(enum ibc_reduce_isa isa)
{
	if ((unsigned)isa >= IBC_REDUCE_ISA_COUNT)
		return IBC_ERR_INVALID_ARG;
	if (!ibc_reduce_isa_supported(isa))
		return IBC_ERR_UNSUPPORTED;
	__atomic_store_n(&rk_cur, rk_table_of(isa), __ATOMIC_RELEASE);
	return IBC_OK;
}

const char *ibc_reduce_isa_name(enum ibc_reduce_isa isa)
{
	switch (isa) {
	case IBC_REDUCE_ISA_PORTABLE:
		return "portable";
	case IBC_REDUCE_ISA_AVX2:
		return "avx2+f16c";
	default:
		return "invalid-isa";
	}
}

/* ---------------------------------------------------------------------- */
/* entry points                                                            */
/* ---------------------------------------------------------------------- */

static inline int rk_is16(ibc_dtype_t dtype)
{
	return dtype == IBC_FLOAT16 || dtype == IBC_BFLOAT16;
}

static inline int rk_valid(ibc_dtype_t dtype, ibc_redop_t op)
{
	int ok = (unsigned)dtype < IBC_DTYPE_COUNT && (unsigned)op < IBC_REDOP_COUNT;

	IBC_ASSERT(ok);
	return ok;
}

void ibc_reduce_local(void *dst, const void *src, size_t count, ibc_dtype_t dtype, ibc_redop_t op)
{
	ibc_reduce_local3(dst, dst, src, count, dtype, op);
}

void ibc_reduce_local3(void *dst, const void *a, const void *b, size_t count, ibc_dtype_t dtype,
		       ibc_redop_t op)
{
	const struct rk_table *t;

	if (count == 0 || !rk_valid(dtype, op))
		return;
	t = rk_get();
	if (dtype == IBC_FLOAT16 && t->f16_staged) {
		t->r16(dst, a, b, count, dtype, op); /* aliasing is fine there */
	} else if (dst != a && dst != b) {
		t->r3(dst, a, b, count, dtype, op);
	} else if (dst == a && dst != b) {
		t->r2(dst, b, count, dtype, op);
	} else if (dst == b && dst != a) {
		t->r2r(dst, a, count, dtype, op);
	} else {
		/* dst == a == b: x OP x, through a copy of each block */
		unsigned char tmp[RK_STAGE * sizeof(double)];
		size_t esize = 0;
		size_t per;
		size_t i;

		ibc_dtype_size(dtype, &esize);
		per = sizeof(tmp) / esize;
		for (i = 0; i < count; i += per) {
			size_t m = IBC_MIN(per, count - i);
			unsigned char *d = (unsigned char *)dst + i * esize;

			memcpy(tmp, d, m * esize);
			t->r2(d, tmp, m, dtype, op);
		}
	}
}

void ibc_reduce_avg_finalize(void *buf, size_t count, ibc_dtype_t dtype, int n)
{
	if (count == 0 || n <= 0 || !rk_valid(dtype, IBC_AVG))
		return;
	if (n == 1 && !rk_is16(dtype))
		return; /* x / 1 == x exactly; 16-bit NaNs would still be quietened */
	rk_get()->avg(buf, count, dtype, n);
}

void ibc_cvt_to_f32(float *dst, const void *src, size_t count, ibc_dtype_t dtype)
{
	if (count == 0 || !(rk_is16(dtype) || dtype == IBC_FLOAT32))
		return;
	rk_get()->to_f32(dst, src, count, dtype);
}

void ibc_cvt_from_f32(void *dst, const float *src, size_t count, ibc_dtype_t dtype)
{
	if (count == 0 || !(rk_is16(dtype) || dtype == IBC_FLOAT32))
		return;
	rk_get()->from_f32(dst, src, count, dtype);
}

void ibc_reduce_f32_acc(float *acc, const void *src, size_t count, ibc_dtype_t src_dtype,
			ibc_redop_t op)
{
	if (count == 0 || !(rk_is16(src_dtype) || src_dtype == IBC_FLOAT32) ||
	    !rk_valid(src_dtype, op))
		return;
	rk_get()->f32_acc(acc, src, count, src_dtype, op);
}

void ibc_reduce_f32(float *dst, const float *a, const float *b, size_t count, ibc_redop_t op)
{
	ibc_reduce_local3(dst, a, b, count, IBC_FLOAT32, op);
}

void ibc_reduce_f32_acc_cvt(void *dst, const float *acc, const void *src, size_t count,
			    ibc_dtype_t src_dtype, ibc_redop_t op)
{
	if (count == 0 || !(rk_is16(src_dtype) || src_dtype == IBC_FLOAT32) ||
	    !rk_valid(src_dtype, op))
		return;
	rk_get()->f32_acc_cvt(dst, acc, src, count, src_dtype, op);
}

void ibc_copy_stream(void *dst, const void *src, size_t nbytes)
{
#if defined(__SSE2__)
	unsigned char *d = dst;
	const unsigned char *sp = src;
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;
	size_t i;

	if (nbytes < 256) {
		memcpy(dst, src, nbytes);
		return;
	}
	memcpy(d, sp, head);
	d += head;
	sp += head;
	nbytes -= head;
	for (i = 0; i + 64 <= nbytes; i += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(sp + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(sp + i + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(sp + i + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(const void *)(sp + i + 48));

		_mm_stream_si128((__m128i *)(void *)(d + i), a);
		_mm_stream_si128((__m128i *)(void *)(d + i + 16), b);
		_mm_stream_si128((__m128i *)(void *)(d + i + 32), c);
		_mm_stream_si128((__m128i *)(void *)(d + i + 48), e);
	}
	memcpy(d + i, sp + i, nbytes - i);
#else
	memcpy(dst, src, nbytes);
#endif
}

void ibc_copy_stream_fence(void)
{
#if defined(__SSE2__)
	_mm_sfence();
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}
