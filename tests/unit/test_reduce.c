/* SPDX-License-Identifier: MIT */
/*
 * test_reduce.c - the local reduction kernels (src/coll/reduce.c): edge
 * values of every dtype x op, exhaustive float16/bfloat16 <-> fp32
 * conversions against an independent reference (double arithmetic and
 * nearbyint), round-to-nearest-even on ties in both directions, every call
 * shape and aliasing case against a scalar reference on random data, the
 * AVX2+F16C variant bit-identical to the portable one, and a timing line
 * (diagnostic only).
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "base/util.h"
#include "coll/reduce.h"
#include "tap.h"

static const char *const isa_names[IBC_REDUCE_ISA_COUNT] = {"portable", "avx2"};
static int isa_list[IBC_REDUCE_ISA_COUNT];
static int n_isa;

/* ---------------------------------------------------------------------- */
/* independent reference: double arithmetic, ldexp/frexp, nearbyint (RNE)   */
/* ---------------------------------------------------------------------- */

static uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint64_t d2u(double f)
{
	uint64_t u;

	memcpy(&u, &f, 8);
	return u;
}

static double u2d(uint64_t u)
{
	double f;

	memcpy(&f, &u, 8);
	return f;
}

/* float16 bits -> value; NaN: quiet NaN with the payload shifted up */
static float ref_h2f(uint16_t h)
{
	int e = (h >> 10) & 0x1f;
	int m = h & 0x3ff;
	double v;

	if (e == 31) {
		if (m == 0)
			return (h & 0x8000) ? -INFINITY : INFINITY;
		return u2f(((uint32_t)(h & 0x8000) << 16) | 0x7fc00000u | ((uint32_t)m << 13));
	}
	v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
	return (float)((h & 0x8000) ? -v : v);
}

/*
 * Round |x| (a finite double) to a float format with @p significant bits,
 * minimum normal exponent @emin and maximum exponent @emax; returns the
 * encoding (exponent field << (p-1) | mantissa), or the infinity encoding.
 */
static uint32_t ref_round(double a, int p, int emin, int emax)
{
	int e;
	double m;
	int bias = emax;

	if (a == 0)
		return 0;
	frexp(a, &e);
	e -= 1; /* a = 1.f * 2^e */
	if (e < emin)
		e = emin; /* subnormal: fixed quantum 2^(emin - p + 1) */
	m = nearbyint(ldexp(a, p - 1 - e));
	if (m >= ldexp(1, p)) { /* rounding carried into the next binade */
		m /= 2;
		e += 1;
	}
	if (e > emax)
		return (uint32_t)(2 * emax + 1) << (p - 1); /* infinity */
	if (m < ldexp(1, p - 1))
		return (uint32_t)m; /* subnormal (or zero) */
	return ((uint32_t)(e + bias) << (p - 1)) | ((uint32_t)m - (1u << (p - 1)));
}

static uint16_t ref_f2h(float x)
{
	uint32_t u = f2u(x);
	uint16_t sign = (u >> 16) & 0x8000;

	if (isnan(x))
		return sign | 0x7e00 | ((u >> 13) & 0x3ff);
	if (isinf(x))
		return sign | 0x7c00;
	return sign | (uint16_t)ref_round(fabs((double)x), 11, -14, 15);
}

static float ref_b2f(uint16_t b)
{
	return u2f((uint32_t)b << 16);
}

static uint16_t ref_f2b(float x)
{
	uint32_t u = f2u(x);
	uint16_t sign = (u >> 16) & 0x8000;

	if (isnan(x))
		return (uint16_t)((u >> 16) | 0x40);
	if (isinf(x))
		return sign | 0x7f80;
	return sign | (uint16_t)ref_round(fabs((double)x), 8, -126, 127);
}

static double ref_fmin(double x, double y)
{
	if (isnan(x))
		return x;
	if (isnan(y))
		return y;
	if (x == y)
		return signbit(x) ? x : y;
	return x < y ? x : y;
}

static double ref_fmax(double x, double y)
{
	if (isnan(x))
		return x;
	if (isnan(y))
		return y;
	if (x == y)
		return signbit(x) ? y : x;
	return x > y ? x : y;
}

/* one float op in float (x, y are exactly representable floats) */
static float ref_op_f32(float x, float y, ibc_redop_t op)
{
	switch (op) {
	case IBC_SUM:
	case IBC_AVG:
		return x + y;
	case IBC_PROD:
		return x * y;
	case IBC_MIN:
		return (float)ref_fmin(x, y);
	default:
		return (float)ref_fmax(x, y);
	}
}

static double ref_op_f64(double x, double y, ibc_redop_t op)
{
	switch (op) {
	case IBC_SUM:
	case IBC_AVG:
		return x + y;
	case IBC_PROD:
		return x * y;
	case IBC_MIN:
		return ref_fmin(x, y);
	default:
		return ref_fmax(x, y);
	}
}

/* integer op on the sign-extended / zero-extended value; wrap to @bits */
static uint64_t ref_op_int(uint64_t x, uint64_t y, ibc_dtype_t dt, ibc_redop_t op)
{
	int is_signed = dt == IBC_INT8 || dt == IBC_INT32 || dt == IBC_INT64;
	int64_t sx = (int64_t)x;
	int64_t sy = (int64_t)y;

	switch (op) {
	case IBC_SUM:
	case IBC_AVG:
		return x + y;
	case IBC_PROD:
		return x * y;
	case IBC_MIN:
		return is_signed ? (uint64_t)(sx < sy ? sx : sy) : (x < y ? x : y);
	default:
		return is_signed ? (uint64_t)(sx > sy ? sx : sy) : (x > y ? x : y);
	}
}

static size_t esize_of(ibc_dtype_t dt)
{
	size_t n = 0;

	ibc_dtype_size(dt, &n);
	return n;
}

/* element k of a buffer as a sign- or zero-extended integer */
static uint64_t get_int(const void *buf, size_t k, ibc_dtype_t dt)
{
	switch (dt) {
	case IBC_INT8:
		return (uint64_t)(int64_t)((const int8_t *)buf)[k];
	case IBC_UINT8:
		return ((const uint8_t *)buf)[k];
	case IBC_INT32:
		return (uint64_t)(int64_t)((const int32_t *)buf)[k];
	case IBC_UINT32:
		return ((const uint32_t *)buf)[k];
	case IBC_INT64:
	case IBC_UINT64:
		return ((const uint64_t *)buf)[k];
	default:
		return 0;
	}
}

static void put_int(void *buf, size_t k, ibc_dtype_t dt, uint64_t v)
{
	switch (esize_of(dt)) {
	case 1:
		((uint8_t *)buf)[k] = (uint8_t)v;
		break;
	case 4:
		((uint32_t *)buf)[k] = (uint32_t)v;
		break;
	default:
		((uint64_t *)buf)[k] = v;
		break;
	}
}

/* reference a OP b for element k into out (bits) */
static void ref_elem(void *out, const void *a, const void *b, size_t k, ibc_dtype_t dt,
		     ibc_redop_t op)
{
	const uint16_t *ha = a;
	const uint16_t *hb = b;

	switch (dt) {
	case IBC_FLOAT16:
		((uint16_t *)out)[k] = ref_f2h(ref_op_f32(ref_h2f(ha[k]), ref_h2f(hb[k]), op));
		break;
	case IBC_BFLOAT16:
		((uint16_t *)out)[k] = ref_f2b(ref_op_f32(ref_b2f(ha[k]), ref_b2f(hb[k]), op));
		break;
	case IBC_FLOAT32:
		((float *)out)[k] = ref_op_f32(((const float *)a)[k], ((const float *)b)[k], op);
		break;
	case IBC_FLOAT64:
		((double *)out)[k] = ref_op_f64(((const double *)a)[k], ((const double *)b)[k], op);
		break;
	default:
		put_int(out, k, dt, ref_op_int(get_int(a, k, dt), get_int(b, k, dt), dt, op));
		break;
	}
}

static int is_nan_elem(const void *buf, size_t k, ibc_dtype_t dt)
{
	uint16_t h;

	switch (dt) {
	case IBC_FLOAT16:
		h = ((const uint16_t *)buf)[k];
		return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
	case IBC_BFLOAT16:
		h = ((const uint16_t *)buf)[k];
		return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
	case IBC_FLOAT32:
		return isnan(((const float *)buf)[k]);
	case IBC_FLOAT64:
		return isnan(((const double *)buf)[k]);
	default:
		return 0;
	}
}

/* first index where got != want (bitwise; NaN == NaN when nan_any), or -1 */
static long first_diff(const void *got, const void *want, size_t count, ibc_dtype_t dt, int nan_any)
{
	size_t es = esize_of(dt);
	size_t k;

	for (k = 0; k < count; k++) {
		if (memcmp((const char *)got + k * es, (const char *)want + k * es, es) == 0)
			continue;
		if (nan_any && is_nan_elem(got, k, dt) && is_nan_elem(want, k, dt))
			continue;
		return (long)k;
	}
	return -1;
}

static void hex_elem(char *s, size_t len, const void *buf, size_t k, ibc_dtype_t dt)
{
	size_t es = esize_of(dt);
	uint64_t v = 0;

	memcpy(&v, (const char *)buf + k * es, es);
	snprintf(s, len, "0x%0*llx", (int)(2 * es), (unsigned long long)v);
}

/* ---------------------------------------------------------------------- */
/* random data                                                              */
/* ---------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

/*
 * Fill with a mix of random bit patterns, small integers and special values
 * (+-0, +-inf, one canonical NaN, subnormals, the largest finite values), so
 * that the data exercise every path but the ISA comparison stays bitwise
 * (two different NaN payloads in one addition may legitimately pick either).
 */
static void fill_random(void *buf, size_t count, ibc_dtype_t dt)
{
	static const uint16_t h_special[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0001,
					     0x83ff, 0x7bff, 0xfbff, 0x0400, 0x3c00, 0xbc00};
	static const uint16_t b_special[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0001,
					     0x807f, 0x7f7f, 0xff7f, 0x0080, 0x3f80, 0xbf80};
	static const uint32_t f_special[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000,
					     0x7fc00000, 0x00000001, 0x807fffff, 0x7f7fffff,
					     0xff7fffff, 0x00800000, 0x3f800000, 0xbf800000};
	size_t es = esize_of(dt);
	size_t k;

	for (k = 0; k < count; k++) {
		uint64_t r = rnd();
		int kind = (int)(r >> 60); /* 0..15 */
		int sp = (int)((r >> 40) % 12);
		uint64_t v = r;

		switch (dt) {
		case IBC_FLOAT16:
			if (kind < 3)
				v = h_special[sp];
			else if (kind < 8)
				v = ref_f2h((float)((int)(r % 64) - 32));
			else if ((v & 0x7c00) == 0x7c00 && (v & 0x3ff))
				v = 0x7e00; /* one canonical NaN */
			break;
		case IBC_BFLOAT16:
			if (kind < 3)
				v = b_special[sp];
			else if (kind < 8)
				v = ref_f2b((float)((int)(r % 512) - 256));
			else if ((v & 0x7f80) == 0x7f80 && (v & 0x7f))
				v = 0x7fc0;
			break;
		case IBC_FLOAT32:
			if (kind < 3)
				v = f_special[sp];
			else if (kind < 8)
				v = f2u((float)((int64_t)(r % 2048) - 1024));
			else if (isnan(u2f((uint32_t)v)))
				v = 0x7fc00000;
			break;
		case IBC_FLOAT64:
			if (kind < 3)
				v = d2u((double)u2f(f_special[sp]));
			else if (kind < 8)
				v = d2u((double)((int64_t)(r % 2048) - 1024));
			else if (isnan(u2d(v)))
				v = 0x7ff8000000000000ull;
			break;
		default:
			if (kind < 4)
				v = (uint64_t)((int64_t)(r % 7) - 3); /* small, incl. negative */
			break;
		}
		memcpy((char *)buf + k * es, &v, es);
	}
}

/* ---------------------------------------------------------------------- */
/* edge values: exact expected results                                      */
/* ---------------------------------------------------------------------- */

struct edge {
	ibc_dtype_t dt;
	ibc_redop_t op;
	uint64_t a; /* bit patterns in the dtype */
	uint64_t b;
	uint64_t want;
	int want_nan; /* any NaN is right (payload not specified) */
	const char *what;
};

#define F32(x) ((uint64_t)f2u_c(x))
static uint32_t f2u_c(float f)
{
	return f2u(f);
}

static uint64_t f64b(double x)
{
	return d2u(x);
}

static const struct edge *edges_table(size_t *n_p)
{
	static struct edge e[160];
	size_t n = 0;

#define E(DT, OP, A, B, W, NAN, WHAT)                                                              \
	e[n++] = (struct edge){DT, OP, (uint64_t)(A), (uint64_t)(B), (uint64_t)(W), NAN, WHAT}
	/* integers: wrap-around and signed/unsigned compare */
	E(IBC_INT8, IBC_SUM, 0x7f, 0x01, 0x80, 0, "int8 127 + 1 wraps to -128");
	E(IBC_INT8, IBC_SUM, 0x80, 0xff, 0x7f, 0, "int8 -128 + -1 wraps to 127");
	E(IBC_INT8, IBC_PROD, 0x10, 0x10, 0x00, 0, "int8 16 * 16 wraps to 0");
	E(IBC_INT8, IBC_PROD, 0x80, 0xff, 0x80, 0, "int8 -128 * -1 wraps to -128");
	E(IBC_INT8, IBC_PROD, 0xfd, 0x05, 0xf1, 0, "int8 -3 * 5 = -15");
	E(IBC_INT8, IBC_MIN, 0x80, 0x7f, 0x80, 0, "int8 min(-128, 127) signed");
	E(IBC_INT8, IBC_MAX, 0x80, 0x7f, 0x7f, 0, "int8 max(-128, 127) signed");
	E(IBC_INT8, IBC_AVG, 0xff, 0x01, 0x00, 0, "int8 avg sums (-1 + 1)");
	E(IBC_UINT8, IBC_SUM, 0xff, 0x01, 0x00, 0, "uint8 255 + 1 wraps to 0");
	E(IBC_UINT8, IBC_PROD, 0xc8, 0x02, 0x90, 0, "uint8 200 * 2 wraps to 144");
	E(IBC_UINT8, IBC_MIN, 0x80, 0x7f, 0x7f, 0, "uint8 min(128, 127) unsigned");
	E(IBC_UINT8, IBC_MAX, 0x80, 0x7f, 0x80, 0, "uint8 max(128, 127) unsigned");
	E(IBC_INT32, IBC_SUM, 0x7fffffff, 1, 0x80000000, 0, "int32 INT_MAX + 1 wraps");
	E(IBC_INT32, IBC_PROD, 0x10000, 0x10000, 0, 0, "int32 65536^2 wraps to 0");
	E(IBC_INT32, IBC_PROD, 0x80000000, 0xffffffff, 0x80000000, 0, "int32 INT_MIN * -1");
	E(IBC_INT32, IBC_MIN, 0x80000000, 0x7fffffff, 0x80000000, 0, "int32 min signed");
	E(IBC_INT32, IBC_MAX, 0xffffffff, 0x00000000, 0x00000000, 0, "int32 max(-1, 0)");
	E(IBC_UINT32, IBC_SUM, 0xffffffff, 2, 1, 0, "uint32 wraps");
	E(IBC_UINT32, IBC_PROD, 0x80000001, 2, 2, 0, "uint32 product wraps");
	E(IBC_UINT32, IBC_MIN, 0x80000000, 0x7fffffff, 0x7fffffff, 0, "uint32 min unsigned");
	E(IBC_UINT32, IBC_MAX, 0xffffffff, 0, 0xffffffff, 0, "uint32 max unsigned");
	E(IBC_INT64, IBC_SUM, INT64_MAX, 1, (uint64_t)INT64_MIN, 0, "int64 INT64_MAX + 1 wraps");
	E(IBC_INT64, IBC_PROD, 1ull << 32, 1ull << 32, 0, 0, "int64 2^32 * 2^32 wraps to 0");
	E(IBC_INT64, IBC_PROD, (uint64_t)INT64_MIN, (uint64_t)-1, (uint64_t)INT64_MIN, 0,
	  "int64 INT64_MIN * -1");
	E(IBC_INT64, IBC_MIN, (uint64_t)INT64_MIN, INT64_MAX, (uint64_t)INT64_MIN, 0,
	  "int64 min signed");
	E(IBC_INT64, IBC_MAX, (uint64_t)-5, (uint64_t)-7, (uint64_t)-5, 0, "int64 max(-5, -7)");
	E(IBC_UINT64, IBC_SUM, UINT64_MAX, UINT64_MAX, UINT64_MAX - 1, 0, "uint64 wraps");
	E(IBC_UINT64, IBC_MIN, 1ull << 63, 1, 1, 0, "uint64 min unsigned");
	E(IBC_UINT64, IBC_MAX, 1ull << 63, 1, 1ull << 63, 0, "uint64 max unsigned");
	/* float32 */
	E(IBC_FLOAT32, IBC_SUM, F32(INFINITY), F32(-INFINITY), 0, 1, "f32 inf + -inf = NaN");
	E(IBC_FLOAT32, IBC_SUM, F32(1.0f), 0x7fc00000, 0, 1, "f32 1 + NaN = NaN");
	E(IBC_FLOAT32, IBC_SUM, 0x80000000, 0x80000000, 0x80000000, 0, "f32 -0 + -0 = -0");
	E(IBC_FLOAT32, IBC_SUM, 0x80000000, 0x00000000, 0x00000000, 0, "f32 -0 + +0 = +0");
	E(IBC_FLOAT32, IBC_SUM, 0x00000001, 0x00000001, 0x00000002, 0, "f32 subnormal sum");
	E(IBC_FLOAT32, IBC_SUM, F32(16777216.0f), F32(1.0f), F32(16777216.0f), 0,
	  "f32 2^24 + 1 ties to even (down)");
	E(IBC_FLOAT32, IBC_SUM, F32(16777218.0f), F32(1.0f), F32(16777220.0f), 0,
	  "f32 (2^24 + 2) + 1 ties to even (up)");
	E(IBC_FLOAT32, IBC_PROD, F32(1e38f), F32(10.0f), F32(INFINITY), 0, "f32 overflow to inf");
	E(IBC_FLOAT32, IBC_PROD, F32(0.0f), F32(INFINITY), 0, 1, "f32 0 * inf = NaN");
	E(IBC_FLOAT32, IBC_PROD, F32(-2.0f), F32(0.0f), 0x80000000, 0, "f32 -2 * 0 = -0");
	E(IBC_FLOAT32, IBC_MIN, 0x7fc00000, F32(1.0f), 0, 1, "f32 min(NaN, 1) = NaN");
	E(IBC_FLOAT32, IBC_MIN, F32(1.0f), 0x7fc00000, 0, 1, "f32 min(1, NaN) = NaN");
	E(IBC_FLOAT32, IBC_MAX, 0x7fc00000, F32(1.0f), 0, 1, "f32 max(NaN, 1) = NaN");
	E(IBC_FLOAT32, IBC_MAX, F32(-INFINITY), 0x7fc00000, 0, 1, "f32 max(-inf, NaN) = NaN");
	E(IBC_FLOAT32, IBC_MIN, 0x80000000, 0x00000000, 0x80000000, 0, "f32 min(-0, +0) = -0");
	E(IBC_FLOAT32, IBC_MIN, 0x00000000, 0x80000000, 0x80000000, 0, "f32 min(+0, -0) = -0");
	E(IBC_FLOAT32, IBC_MAX, 0x80000000, 0x00000000, 0x00000000, 0, "f32 max(-0, +0) = +0");
	E(IBC_FLOAT32, IBC_MAX, 0x00000000, 0x80000000, 0x00000000, 0, "f32 max(+0, -0) = +0");
	E(IBC_FLOAT32, IBC_MIN, F32(-INFINITY), F32(-3.0f), F32(-INFINITY), 0, "f32 min with -inf");
	/* float64 */
	E(IBC_FLOAT64, IBC_SUM, f64b(INFINITY), f64b(-INFINITY), 0, 1, "f64 inf + -inf = NaN");
	E(IBC_FLOAT64, IBC_SUM, f64b(9007199254740992.0), f64b(1.0), f64b(9007199254740992.0), 0,
	  "f64 2^53 + 1 ties to even");
	E(IBC_FLOAT64, IBC_SUM, 1, 1, 2, 0, "f64 subnormal sum");
	E(IBC_FLOAT64, IBC_SUM, 1ull << 63, 1ull << 63, 1ull << 63, 0, "f64 -0 + -0 = -0");
	E(IBC_FLOAT64, IBC_PROD, f64b(1e308), f64b(10.0), f64b(INFINITY), 0, "f64 overflow");
	E(IBC_FLOAT64, IBC_MIN, f64b(2.0), 0x7ff8000000000000ull, 0, 1, "f64 min(2, NaN) = NaN");
	E(IBC_FLOAT64, IBC_MAX, 0x7ff8000000000000ull, f64b(2.0), 0, 1, "f64 max(NaN, 2) = NaN");
	E(IBC_FLOAT64, IBC_MIN, 0, 1ull << 63, 1ull << 63, 0, "f64 min(+0, -0) = -0");
	E(IBC_FLOAT64, IBC_MAX, 1ull << 63, 0, 0, 0, "f64 max(-0, +0) = +0");
	/* float16: ties, overflow, subnormals, NaN, signed zeros */
	E(IBC_FLOAT16, IBC_SUM, 0x6800, 0x3c00, 0x6800, 0, "f16 2048 + 1 = 2048 (tie, even down)");
	E(IBC_FLOAT16, IBC_SUM, 0x6801, 0x3c00, 0x6802, 0, "f16 2050 + 1 = 2052 (tie, even up)");
	E(IBC_FLOAT16, IBC_SUM, 0x6800, 0x4000, 0x6801, 0, "f16 2048 + 2 = 2050 exact");
	E(IBC_FLOAT16, IBC_SUM, 0x7bff, 0x4c00, 0x7c00, 0, "f16 65504 + 16 = inf (tie to even)");
	E(IBC_FLOAT16, IBC_SUM, 0x7bff, 0x4b80, 0x7bff, 0, "f16 65504 + 15 = 65504");
	E(IBC_FLOAT16, IBC_SUM, 0x0001, 0x0001, 0x0002, 0, "f16 subnormal 2^-24 + 2^-24");
	E(IBC_FLOAT16, IBC_SUM, 0x03ff, 0x0001, 0x0400, 0,
	  "f16 largest subnormal + min = min normal");
	E(IBC_FLOAT16, IBC_SUM, 0x8000, 0x8000, 0x8000, 0, "f16 -0 + -0 = -0");
	E(IBC_FLOAT16, IBC_SUM, 0x8000, 0x0000, 0x0000, 0, "f16 -0 + +0 = +0");
	E(IBC_FLOAT16, IBC_SUM, 0x7c00, 0xfc00, 0, 1, "f16 inf + -inf = NaN");
	E(IBC_FLOAT16, IBC_SUM, 0x7c00, 0x3c00, 0x7c00, 0, "f16 inf + 1 = inf");
	E(IBC_FLOAT16, IBC_SUM, 0x7e00, 0x3c00, 0, 1, "f16 NaN + 1 = NaN");
	E(IBC_FLOAT16, IBC_SUM, 0x7d00, 0x3c00, 0, 1, "f16 signalling NaN + 1 = NaN");
	E(IBC_FLOAT16, IBC_PROD, 0x0400, 0x1400, 0x0001, 0, "f16 2^-14 * 2^-10 = 2^-24");
	E(IBC_FLOAT16, IBC_PROD, 0x0001, 0x3800, 0x0000, 0, "f16 2^-24 * 0.5 = 0 (tie, even)");
	E(IBC_FLOAT16, IBC_PROD, 0x0001, 0x3e00, 0x0002, 0, "f16 2^-24 * 1.5 = 2^-23 (tie, even)");
	E(IBC_FLOAT16, IBC_PROD, 0x5c00, 0x5c00, 0x7c00, 0, "f16 256 * 256 = inf");
	E(IBC_FLOAT16, IBC_PROD, 0xbc00, 0x0000, 0x8000, 0, "f16 -1 * 0 = -0");
	E(IBC_FLOAT16, IBC_MIN, 0x7e00, 0x3c00, 0, 1, "f16 min(NaN, 1) = NaN");
	E(IBC_FLOAT16, IBC_MAX, 0x3c00, 0x7e00, 0, 1, "f16 max(1, NaN) = NaN");
	E(IBC_FLOAT16, IBC_MIN, 0x0000, 0x8000, 0x8000, 0, "f16 min(+0, -0) = -0");
	E(IBC_FLOAT16, IBC_MAX, 0x8000, 0x0000, 0x0000, 0, "f16 max(-0, +0) = +0");
	E(IBC_FLOAT16, IBC_MIN, 0x0001, 0x8001, 0x8001, 0, "f16 min of subnormals");
	E(IBC_FLOAT16, IBC_MAX, 0xfc00, 0xfbff, 0xfbff, 0, "f16 max(-inf, -65504)");
	/* bfloat16: both tie directions, overflow, subnormals, NaN */
	E(IBC_BFLOAT16, IBC_SUM, 0x3f80, 0x3b80, 0x3f80, 0, "bf16 1 + 2^-8 = 1 (tie, even down)");
	E(IBC_BFLOAT16, IBC_SUM, 0x3f81, 0x3b80, 0x3f82, 0,
	  "bf16 (1 + 2^-7) + 2^-8 = 1 + 2^-6 (tie, even up)");
	E(IBC_BFLOAT16, IBC_SUM, 0x4380, 0x3f80, 0x4380, 0, "bf16 256 + 1 = 256 (tie, even)");
	E(IBC_BFLOAT16, IBC_SUM, 0x4381, 0x3f80, 0x4382, 0, "bf16 258 + 1 = 260 (tie, even)");
	E(IBC_BFLOAT16, IBC_SUM, 0x4380, 0x3fc0, 0x4381, 0, "bf16 256 + 1.5 = 258 (above tie)");
	E(IBC_BFLOAT16, IBC_SUM, 0x7f7f, 0x7f7f, 0x7f80, 0, "bf16 max + max = inf");
	E(IBC_BFLOAT16, IBC_SUM, 0x0001, 0x0001, 0x0002, 0, "bf16 subnormal sum");
	E(IBC_BFLOAT16, IBC_SUM, 0x8000, 0x8000, 0x8000, 0, "bf16 -0 + -0 = -0");
	E(IBC_BFLOAT16, IBC_SUM, 0x7f80, 0xff80, 0, 1, "bf16 inf + -inf = NaN");
	E(IBC_BFLOAT16, IBC_SUM, 0x7f81, 0x3f80, 0, 1, "bf16 signalling NaN + 1 = NaN");
	E(IBC_BFLOAT16, IBC_PROD, 0x3f81, 0x3f81, 0x3f82, 0,
	  "bf16 (1+2^-7)^2 = 1+2^-6+2^-14 rounds to 1+2^-6");
	E(IBC_BFLOAT16, IBC_MIN, 0x7fc0, 0x3f80, 0, 1, "bf16 min(NaN, 1) = NaN");
	E(IBC_BFLOAT16, IBC_MAX, 0x3f80, 0x7fc0, 0, 1, "bf16 max(1, NaN) = NaN");
	E(IBC_BFLOAT16, IBC_MIN, 0x0000, 0x8000, 0x8000, 0, "bf16 min(+0, -0) = -0");
	E(IBC_BFLOAT16, IBC_MAX, 0x8000, 0x0000, 0x0000, 0, "bf16 max(-0, +0) = +0");
#undef E
	*n_p = n;
	return e;
}

/*
 * Run one edge case through every call shape (local, local3 out of place,
 * local3 with dst == a, dst == b) on a vector of 37 copies (so that the
 * vector body and the scalar tail both see it).
 */
static void test_edges(const char *isa)
{
	size_t n_edges;
	const struct edge *e = edges_table(&n_edges);
	size_t i;
	int shape;

	for (i = 0; i < n_edges; i++) {
		size_t es = esize_of(e[i].dt);
		enum { N = 37 };
		uint64_t a_[N];
		uint64_t b_[N];
		uint64_t d_[N];
		unsigned char *a = (unsigned char *)a_;
		unsigned char *b = (unsigned char *)b_;
		unsigned char *d = (unsigned char *)d_;
		int bad = 0;
		char msg[160] = "";

		for (shape = 0; shape < 4 && !bad; shape++) {
			size_t k;
			void *out;

			for (k = 0; k < N; k++) {
				memcpy(a + k * es, &e[i].a, es);
				memcpy(b + k * es, &e[i].b, es);
			}
			memset(d, 0xa5, sizeof(d_));
			switch (shape) {
			case 0:
				ibc_reduce_local(a, b, N, e[i].dt, e[i].op);
				out = a;
				break;
			case 1:
				ibc_reduce_local3(d, a, b, N, e[i].dt, e[i].op);
				out = d;
				break;
			case 2:
				ibc_reduce_local3(a, a, b, N, e[i].dt, e[i].op);
				out = a;
				break;
			default:
				ibc_reduce_local3(b, a, b, N, e[i].dt, e[i].op);
				out = b;
				break;
			}
			for (k = 0; k < N && !bad; k++) {
				uint64_t got = 0;

				memcpy(&got, (unsigned char *)out + k * es, es);
				if (e[i].want_nan ? !is_nan_elem(out, k, e[i].dt)
						  : got != e[i].want) {
					bad = 1;
					snprintf(msg, sizeof(msg),
						 "shape %d index %zu got 0x%llx want %s0x%llx",
						 shape, k, (unsigned long long)got,
						 e[i].want_nan ? "NaN, e.g. " : "",
						 (unsigned long long)e[i].want);
				}
			}
		}
		tap_ok(!bad, "[%s] %s %s: %s%s%s", isa, ibc_dtype_name(e[i].dt),
		       ibc_redop_name(e[i].op), e[i].what, bad ? " -- " : "", msg);
	}
}

/* AVG finalisation on exact cases */
static void test_avg(const char *isa)
{
	int8_t i8[3] = {-7, 7, -128};
	uint8_t u8[2] = {255, 3};
	int32_t i32[2] = {-7, INT32_MIN};
	uint32_t u32[1] = {0xffffffffu};
	int64_t i64[2] = {-9, INT64_MIN};
	uint64_t u64[1] = {UINT64_MAX};
	float f32[3] = {1.0f, -7.0f, 0x1p-149f};
	double f64[2] = {1.0, 5.0};
	uint16_t h[4] = {0x3c00, 0x4200, 0x0001, 0x7bff};
	uint16_t bf[3] = {0x3f80, 0x4040, 0x3f84};
	float one_third = 1.0f / 3.0f;
	float f;

	ibc_reduce_avg_finalize(i8, 3, IBC_INT8, 2);
	tap_ok(i8[0] == -3 && i8[1] == 3 && i8[2] == -64,
	       "[%s] int8 avg truncates toward zero: %d %d %d", isa, i8[0], i8[1], i8[2]);
	i8[0] = -128;
	ibc_reduce_avg_finalize(i8, 1, IBC_INT8, 200);
	tap_is_int(i8[0], 0, "[%s] int8 avg with n = 200 (> INT8_MAX)", isa);
	ibc_reduce_avg_finalize(u8, 2, IBC_UINT8, 2);
	tap_ok(u8[0] == 127 && u8[1] == 1, "[%s] uint8 avg: %u %u", isa, u8[0], u8[1]);
	ibc_reduce_avg_finalize(i32, 2, IBC_INT32, 2);
	tap_ok(i32[0] == -3 && i32[1] == INT32_MIN / 2, "[%s] int32 avg: %d %d", isa, i32[0],
	       i32[1]);
	ibc_reduce_avg_finalize(u32, 1, IBC_UINT32, 3);
	tap_ok(u32[0] == 0x55555555u, "[%s] uint32 avg unsigned: 0x%x", isa, u32[0]);
	ibc_reduce_avg_finalize(i64, 2, IBC_INT64, 4);
	tap_ok(i64[0] == -2 && i64[1] == INT64_MIN / 4, "[%s] int64 avg: %lld", isa,
	       (long long)i64[0]);
	ibc_reduce_avg_finalize(u64, 1, IBC_UINT64, 3);
	tap_ok(u64[0] == 0x5555555555555555ull, "[%s] uint64 avg unsigned", isa);
	ibc_reduce_avg_finalize(f32, 3, IBC_FLOAT32, 3);
	tap_ok(f2u(f32[0]) == f2u(one_third) && f32[1] == -7.0f / 3.0f && f2u(f32[2]) == 0,
	       "[%s] float32 avg: one IEEE division (1/3, -7/3, 2^-149/3 = 0)", isa);
	ibc_reduce_avg_finalize(f64, 2, IBC_FLOAT64, 3);
	tap_ok(f64[0] == 1.0 / 3.0 && f64[1] == 5.0 / 3.0, "[%s] float64 avg", isa);
	ibc_reduce_avg_finalize(h, 4, IBC_FLOAT16, 3);
	/* 1/3 -> fp32 0x3eaaaaab -> f16 0x3555; 3/3 = 1; 2^-24/3 -> 0; 65504/3 = 21834.67 -> 21840
	 */
	tap_ok(h[0] == 0x3555 && h[1] == 0x3c00 && h[2] == 0x0000 &&
		   h[3] == ref_f2h(65504.0f / 3.0f),
	       "[%s] float16 avg in fp32, rounded once: 0x%04x 0x%04x 0x%04x 0x%04x", isa, h[0],
	       h[1], h[2], h[3]);
	ibc_reduce_avg_finalize(bf, 3, IBC_BFLOAT16, 3);
	f = 1.03125f / 3.0f;
	tap_ok(bf[0] == ref_f2b(one_third) && bf[1] == 0x3f80 && bf[2] == ref_f2b(f),
	       "[%s] bfloat16 avg in fp32, rounded once: 0x%04x 0x%04x 0x%04x", isa, bf[0], bf[1],
	       bf[2]);
	h[0] = 0x7d00; /* signalling NaN stays NaN */
	ibc_reduce_avg_finalize(h, 1, IBC_FLOAT16, 1);
	tap_ok(is_nan_elem(h, 0, IBC_FLOAT16), "[%s] float16 avg keeps NaN", isa);
}

/* ---------------------------------------------------------------------- */
/* conversions                                                              */
/* ---------------------------------------------------------------------- */

static void test_conversions_exhaustive(const char *isa)
{
	static uint16_t pat[65536];
	static uint16_t back[65536];
	static float f[65536];
	long bad_h2f = -1;
	long bad_rt = -1;
	long bad_b2f = -1;
	long bad_brt = -1;
	uint32_t i;

	for (i = 0; i < 65536; i++)
		pat[i] = (uint16_t)i;

	ibc_cvt_to_f32(f, pat, 65536, IBC_FLOAT16);
	for (i = 0; i < 65536 && bad_h2f < 0; i++)
		if (f2u(f[i]) != f2u(ref_h2f(pat[i])))
			bad_h2f = i;
	tap_ok(bad_h2f < 0, "[%s] float16 -> fp32 exact for all 65536 patterns%s", isa,
	       bad_h2f < 0 ? "" : " (first failure below)");
	if (bad_h2f >= 0)
		tap_diag("0x%04lx -> 0x%08x, want 0x%08x", bad_h2f, f2u(f[bad_h2f]),
			 f2u(ref_h2f(pat[bad_h2f])));
	ibc_cvt_from_f32(back, f, 65536, IBC_FLOAT16);
	for (i = 0; i < 65536 && bad_rt < 0; i++) {
		int nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
		uint16_t want = nan ? (uint16_t)(i | 0x0200) : (uint16_t)i;

		if (back[i] != want)
			bad_rt = i;
	}
	tap_ok(bad_rt < 0,
	       "[%s] float16 -> fp32 -> float16 round trip for all 65536 patterns "
	       "(NaN quietened)",
	       isa);
	if (bad_rt >= 0)
		tap_diag("0x%04lx -> 0x%04x", bad_rt, back[bad_rt]);

	ibc_cvt_to_f32(f, pat, 65536, IBC_BFLOAT16);
	for (i = 0; i < 65536 && bad_b2f < 0; i++)
		if (f2u(f[i]) != (i << 16))
			bad_b2f = i;
	tap_ok(bad_b2f < 0, "[%s] bfloat16 -> fp32 exact for all 65536 patterns", isa);
	ibc_cvt_from_f32(back, f, 65536, IBC_BFLOAT16);
	for (i = 0; i < 65536 && bad_brt < 0; i++) {
		int nan = (i & 0x7f80) == 0x7f80 && (i & 0x7f);
		uint16_t want = nan ? (uint16_t)(i | 0x40) : (uint16_t)i;

		if (back[i] != want)
			bad_brt = i;
	}
	tap_ok(bad_brt < 0,
	       "[%s] bfloat16 -> fp32 -> bfloat16 round trip for all 65536 patterns "
	       "(NaN quietened)",
	       isa);
	if (bad_brt >= 0)
		tap_diag("0x%04lx -> 0x%04x", bad_brt, back[bad_brt]);
}

/*
 * fp32 -> 16-bit rounding: for every 16-bit pattern the fp32 values exactly
 * halfway to the next one (a tie) and one fp32 ulp either side, plus a
 * strided sample of all 2^32 fp32 patterns, against the reference.
 */
static void test_rounding(const char *isa, ibc_dtype_t dt)
{
	enum { CHUNK = 1 << 17 };
	static float in[CHUNK];
	static uint16_t out[CHUNK];
	int is_h = dt == IBC_FLOAT16;
	long nties_up = 0;
	long nties_down = 0;
	long nbad = 0;
	uint64_t first_bad = 0;
	uint32_t pass;
	uint32_t i;

	/* pass 0: ties and neighbours; pass 1..: strided sample of all fp32 patterns */
	for (pass = 0; pass < 1 + 256; pass++) {
		uint32_t n = 0;

		if (pass == 0) {
			for (i = 0; i < 65536 / 2 && n + 3 <= CHUNK; i++) {
				/* positive patterns below infinity: lo and lo + 1 (next up) */
				float lo = is_h ? ref_h2f((uint16_t)i) : ref_b2f((uint16_t)i);
				float hi =
				    is_h ? ref_h2f((uint16_t)(i + 1)) : ref_b2f((uint16_t)(i + 1));
				double mid = ((double)lo + (double)hi) / 2;
				float t;

				if (isnan(lo) || isinf(lo))
					continue;
				if (isinf(hi) && is_h)
					mid = 65520.0; /* halfway from 65504 to 2^16 */
				else if (isinf(hi) || isnan(hi))
					continue;
				t = (float)mid;
				if ((double)t != mid)
					continue; /* not representable (never for these formats) */
				in[n++] = (i & 1) ? -t : t;
				in[n++] = nextafterf(t, 0);
				in[n++] = nextafterf(t, INFINITY);
				if (i & 1)
					nties_up++;
				else
					nties_down++;
			}
		} else {
			uint64_t base = (uint64_t)(pass - 1) * 16777216u;

			for (i = 0; i < 65536; i++)
				in[n++] = u2f(
				    (uint32_t)(base + (uint64_t)i * 256 + (pass * 97 + i) % 256));
		}
		ibc_cvt_from_f32(out, in, n, dt);
		for (i = 0; i < n; i++) {
			uint16_t want = is_h ? ref_f2h(in[i]) : ref_f2b(in[i]);

			if (out[i] != want) {
				if (!nbad)
					first_bad = f2u(in[i]) | ((uint64_t)out[i] << 32) |
						    ((uint64_t)want << 48);
				nbad++;
			}
		}
	}
	tap_ok(nbad == 0 && nties_up > 1000 && nties_down > 1000,
	       "[%s] fp32 -> %s rounds to nearest even: %ld ties toward odd neighbours (round up), "
	       "%ld toward even (round down), their fp32 neighbours, 16.7M sampled patterns",
	       isa, ibc_dtype_name(dt), nties_up, nties_down);
	if (nbad)
		tap_diag("%ld wrong, first: fp32 0x%08x -> 0x%04x, want 0x%04x", nbad,
			 (uint32_t)first_bad, (unsigned)(first_bad >> 32) & 0xffff,
			 (unsigned)(first_bad >> 48));
}

/* ---------------------------------------------------------------------- */
/* random data against the reference, every shape and length                */
/* ---------------------------------------------------------------------- */

static const size_t lengths[] = {0,  1,	  7,   8,   9,	 31,  32,  33,	63,   64,
				 65, 127, 128, 129, 255, 256, 257, 300, 1000, 4099};
#define MAXLEN 4099

static void test_random_vs_ref(const char *isa)
{
	static uint64_t a_[MAXLEN], b_[MAXLEN], a0_[MAXLEN], b0_[MAXLEN];
	static uint64_t d_[MAXLEN + 4], want_[MAXLEN];
	unsigned char *a = (unsigned char *)a_, *b = (unsigned char *)b_;
	unsigned char *a0 = (unsigned char *)a0_, *b0 = (unsigned char *)b0_;
	unsigned char *d = (unsigned char *)d_, *want = (unsigned char *)want_;
	int dt;
	int op;

	for (dt = 0; dt < IBC_DTYPE_COUNT; dt++) {
		for (op = 0; op < IBC_REDOP_COUNT; op++) {
			size_t es = esize_of(dt);
			int bad = 0;
			char msg[200] = "";
			size_t li;

			for (li = 0; li < IBC_ARRAY_SIZE(lengths) && !bad; li++) {
				size_t n = lengths[li];
				int shape;
				size_t k;

				fill_random(a0, n, dt);
				fill_random(b0, n, dt);
				for (k = 0; k < n; k++)
					ref_elem(want, a0, b0, k, dt, op);
				for (shape = 0; shape < 5 && !bad; shape++) {
					void *out = NULL;
					long at;

					memcpy(a, a0, n * es);
					memcpy(b, b0, n * es);
					memset(d, 0x5a, sizeof(d_));
					switch (shape) {
					case 0:
						ibc_reduce_local(a, b, n, dt, op);
						out = a;
						break;
					case 1:
						ibc_reduce_local3(d + es, a, b, n, dt, op);
						out = d + es;
						break;
					case 2:
						ibc_reduce_local3(a, a, b, n, dt, op);
						out = a;
						break;
					case 3:
						ibc_reduce_local3(b, a, b, n, dt, op);
						out = b;
						break;
					default:
						/* a OP a, all three the same */
						memcpy(b, a0, n * es);
						for (k = 0; k < n; k++)
							ref_elem(d, a0, b, k, dt, op);
						ibc_reduce_local3(a, a, a, n, dt, op);
						at = first_diff(a, d, n, dt, 1);
						if (at >= 0) {
							bad = 1;
							snprintf(msg, sizeof(msg),
								 "x OP x, n %zu, index %ld", n, at);
						}
						continue;
					}
					at = first_diff(out, want, n, dt, 1);
					if (at >= 0) {
						char g[24], w[24], x[24], y[24];

						hex_elem(g, sizeof(g), out, at, dt);
						hex_elem(w, sizeof(w), want, at, dt);
						hex_elem(x, sizeof(x), a0, at, dt);
						hex_elem(y, sizeof(y), b0, at, dt);
						bad = 1;
						snprintf(msg, sizeof(msg),
							 "shape %d n %zu index %ld: %s OP %s got "
							 "%s want %s",
							 shape, n, at, x, y, g, w);
					}
					if (shape == 1 && !bad) {
						/* nothing written outside [0, n) */
						size_t z;

						for (z = 0; z < es; z++)
							if (d[z] != 0x5a ||
							    d[es + n * es + z] != 0x5a)
								bad = 1;
						if (bad)
							snprintf(msg, sizeof(msg),
								 "wrote outside the output, n %zu",
								 n);
					}
				}
			}
			tap_ok(!bad,
			       "[%s] %s %s: random data, %zu lengths x 5 call shapes match the "
			       "scalar reference%s%s",
			       isa, ibc_dtype_name(dt), ibc_redop_name(op), IBC_ARRAY_SIZE(lengths),
			       bad ? " -- " : "", msg);
		}
	}
}

/* fp32 accumulation helpers (IBC_ACCUM_FP32) */
static void test_f32_acc(const char *isa)
{
	static const ibc_dtype_t dts[] = {IBC_FLOAT16, IBC_BFLOAT16, IBC_FLOAT32};
	float acc[8];
	float acc2[8];
	uint16_t small[8];
	uint16_t res[8];
	uint16_t one = 0x3f80;
	size_t t;
	int r;
	int k;

	/* the case: 8 ranks, rank 0 gives 1.0, the others 2^-8, bf16 */
	ibc_cvt_to_f32(acc, &one, 1, IBC_BFLOAT16);
	for (k = 0; k < 8; k++)
		small[k] = 0x3b80; /* 2^-8 */
	for (r = 1; r < 7; r++)
		ibc_reduce_f32_acc(acc, small, 1, IBC_BFLOAT16, IBC_SUM);
	tap_ok(acc[0] == 1.0f + 6 * 0x1p-8f, "[%s] fp32 accumulation keeps 1 + 6 * 2^-8 exactly",
	       isa);
	ibc_reduce_f32_acc_cvt(res, acc, small, 1, IBC_BFLOAT16, IBC_SUM);
	tap_is_int(res[0], 0x3f84,
		   "[%s] last hop rounds once: 1 + 7 * 2^-8 -> bf16 1.03125 (tie, even)", isa);
	memcpy(acc2, acc, sizeof(float));
	ibc_reduce_f32_acc(acc2, small, 1, IBC_BFLOAT16, IBC_SUM);
	ibc_cvt_from_f32(res, acc2, 1, IBC_BFLOAT16);
	tap_is_int(res[0], 0x3f84, "[%s] f32_acc + cvt_from_f32 gives the same 1.03125", isa);

	/* random data: f32_acc, f32_acc_cvt (also in place on src), reduce_f32 vs reference */
	for (t = 0; t < IBC_ARRAY_SIZE(dts); t++) {
		static float fa[MAXLEN], fw[MAXLEN], f3[MAXLEN];
		static float s16_[MAXLEN], o16_[MAXLEN];
		static uint16_t w16[MAXLEN];
		uint16_t *s16 = (uint16_t *)s16_, *o16 = (uint16_t *)o16_;
		int op;
		int bad = 0;
		char msg[160] = "";

		for (op = 0; op < IBC_REDOP_COUNT && !bad; op++) {
			size_t li;

			for (li = 0; li < IBC_ARRAY_SIZE(lengths) && !bad; li++) {
				size_t n = lengths[li];
				size_t i;
				long at;

				fill_random(fa, n, IBC_FLOAT32);
				fill_random(s16, n, dts[t]);
				for (i = 0; i < n; i++) {
					float x = dts[t] == IBC_FLOAT16	   ? ref_h2f(s16[i])
						  : dts[t] == IBC_BFLOAT16 ? ref_b2f(s16[i])
									   : ((float *)s16)[i];

					fw[i] = ref_op_f32(fa[i], x, op);
					if (dts[t] == IBC_FLOAT16)
						w16[i] = ref_f2h(fw[i]);
					else if (dts[t] == IBC_BFLOAT16)
						w16[i] = ref_f2b(fw[i]);
				}
				memcpy(f3, fa, n * sizeof(float));
				ibc_reduce_f32_acc(f3, s16, n, dts[t], op);
				at = first_diff(f3, fw, n, IBC_FLOAT32, 1);
				if (at >= 0) {
					bad = 1;
					snprintf(msg, sizeof(msg), "f32_acc %s n %zu index %ld",
						 ibc_redop_name(op), n, at);
					break;
				}
				if (dts[t] == IBC_FLOAT32) {
					ibc_reduce_f32(f3, fa, (float *)s16, n, op);
					at = first_diff(f3, fw, n, IBC_FLOAT32, 1);
					if (at < 0) {
						ibc_reduce_f32_acc_cvt(o16, fa, s16, n, dts[t], op);
						at = first_diff(o16, fw, n, IBC_FLOAT32, 1);
					}
					if (at >= 0) {
						bad = 1;
						snprintf(msg, sizeof(msg),
							 "reduce_f32/acc_cvt %s n %zu index %ld",
							 ibc_redop_name(op), n, at);
					}
					continue;
				}
				ibc_reduce_f32_acc_cvt(o16, fa, s16, n, dts[t], op);
				at = first_diff(o16, w16, n, dts[t], 1);
				if (at < 0) {
					ibc_reduce_f32_acc_cvt(s16, fa, s16, n, dts[t], op);
					at = first_diff(s16, w16, n, dts[t], 1);
				}
				if (at >= 0) {
					bad = 1;
					snprintf(msg, sizeof(msg), "f32_acc_cvt %s n %zu index %ld",
						 ibc_redop_name(op), n, at);
				}
			}
		}
		tap_ok(
		    !bad,
		    "[%s] %s: ibc_reduce_f32_acc/_acc_cvt/ibc_reduce_f32 match the reference%s%s",
		    isa, ibc_dtype_name(dts[t]), bad ? " -- " : "", msg);
	}
}

/* ---------------------------------------------------------------------- */
/* the ISA variants agree bit for bit                                       */
/* ---------------------------------------------------------------------- */

static void test_isa_agree(void)
{
	enum { N = 100003 };
	unsigned char *a = malloc(N * 8);
	unsigned char *b = malloc(N * 8);
	unsigned char *out[IBC_REDUCE_ISA_COUNT];
	float *f = malloc(N * sizeof(float));
	uint16_t *h[IBC_REDUCE_ISA_COUNT];
	int dt;
	int op;
	int i;
	long bad;
	uint32_t pass;

	for (i = 0; i < IBC_REDUCE_ISA_COUNT; i++) {
		out[i] = malloc(N * 8);
		h[i] = malloc(N * sizeof(uint16_t));
	}
	if (n_isa < 2) {
		tap_diag("only the portable kernels run on this CPU/build: no ISA comparison");
		goto out;
	}
	for (dt = 0; dt < IBC_DTYPE_COUNT; dt++) {
		for (op = 0; op < IBC_REDOP_COUNT; op++) {
			fill_random(a, N, dt);
			fill_random(b, N, dt);
			for (i = 0; i < n_isa; i++) {
				ibc_reduce_isa_set(isa_list[i]);
				ibc_reduce_local3(out[i], a, b, N, dt, op);
				if (op == IBC_AVG)
					ibc_reduce_avg_finalize(out[i], N, dt, 7);
			}
			bad = first_diff(out[0], out[1], N, dt, 0);
			tap_ok(bad < 0,
			       "avx2 and portable bit-identical: %s %s on %d random elements%s",
			       ibc_dtype_name(dt), ibc_redop_name(op), N,
			       bad < 0 ? "" : " (differ)");
			if (bad >= 0)
				tap_diag("first difference at %ld", bad);
		}
	}
	/* conversions on random fp32 bit patterns (all NaN payloads, subnormals, ties) */
	for (dt = IBC_FLOAT16; dt <= IBC_BFLOAT16; dt++) {
		long nbad = 0;

		for (pass = 0; pass < 64; pass++) {
			uint32_t k;

			for (k = 0; k < N; k++) {
				uint32_t r = (uint32_t)rnd();

				/* every 4th value lands on a 16-bit tie or next to one */
				if ((k & 3) == 0)
					r = (r & (dt == IBC_FLOAT16 ? ~0x1fffu : ~0xffffu)) |
					    (dt == IBC_FLOAT16 ? 0x1000u : 0x8000u);
				f[k] = u2f(r + (k & 4 ? 0 : (k & 8 ? 1 : -1)));
			}
			for (i = 0; i < n_isa; i++) {
				ibc_reduce_isa_set(isa_list[i]);
				ibc_cvt_from_f32(h[i], f, N, dt);
			}
			nbad += memcmp(h[0], h[1], N * sizeof(uint16_t)) != 0;
		}
		tap_ok(nbad == 0,
		       "avx2 and portable fp32 -> %s agree on 6.4M random patterns "
		       "(incl. every NaN payload class and ties)",
		       ibc_dtype_name(dt));
	}
	/* all 65536 float16 patterns both ways */
	for (i = 0; i < 65536; i++)
		h[0][i] = (uint16_t)i;
	for (i = 0; i < n_isa; i++) {
		ibc_reduce_isa_set(isa_list[i]);
		ibc_cvt_to_f32((float *)out[i], h[0], 65536, IBC_FLOAT16);
	}
	tap_ok(memcmp(out[0], out[1], 65536 * sizeof(float)) == 0,
	       "avx2 (F16C) and portable float16 -> fp32 agree on all 65536 patterns");
out:
	ibc_reduce_isa_set(isa_list[n_isa - 1]);
	for (i = 0; i < IBC_REDUCE_ISA_COUNT; i++) {
		free(out[i]);
		free(h[i]);
	}
	free(a);
	free(b);
	free(f);
}

/* ---------------------------------------------------------------------- */
/* timing (diagnostic only, nothing asserted on speed)                      */
/* ---------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void timing(void)
{
	const size_t nbytes = 64u << 20;
	static const ibc_dtype_t dts[] = {IBC_FLOAT32, IBC_BFLOAT16, IBC_FLOAT16};
	char *d = malloc(nbytes);
	char *s = malloc(nbytes);
	size_t t;
	int i;

	if (!d || !s) {
		tap_diag("timing skipped: cannot allocate 2 x 64 MiB");
		goto out;
	}
	memset(d, 0, nbytes);
	memset(s, 0, nbytes);
	for (i = 0; i < n_isa; i++) {
		ibc_reduce_isa_set(isa_list[i]);
		for (t = 0; t < IBC_ARRAY_SIZE(dts); t++) {
			size_t count = nbytes / esize_of(dts[t]);
			double best = 1e9;
			int rep;

			for (rep = 0; rep < 4; rep++) {
				double t0 = now_s();

				ibc_reduce_local(d, s, count, dts[t], IBC_SUM);
				if (rep > 0 && now_s() - t0 < best)
					best = now_s() - t0;
			}
			tap_diag(
			    "timing [%s] %s sum, 64 MiB in place: %.2f ms, %.2f GB/s of output "
			    "(%.2f GB/s memory traffic: 2 reads + 1 write)",
			    isa_names[isa_list[i]], ibc_dtype_name(dts[t]), best * 1e3,
			    nbytes / best / 1e9, 3.0 * nbytes / best / 1e9);
		}
	}
	ibc_reduce_isa_set(isa_list[n_isa - 1]);
out:
	free(d);
	free(s);
}

int main(void)
{
	int i;

	for (i = 0; i < IBC_REDUCE_ISA_COUNT; i++)
		if (ibc_reduce_isa_supported(i))
			isa_list[n_isa++] = i;
	tap_ok(ibc_reduce_isa_supported(IBC_REDUCE_ISA_PORTABLE),
	       "portable kernels always available");
	tap_is_int(ibc_reduce_isa_set((enum ibc_reduce_isa)7), IBC_ERR_INVALID_ARG, "unknown isa");
	tap_is_str(ibc_reduce_isa_name(IBC_REDUCE_ISA_AVX2), "avx2+f16c", "isa name");
	tap_diag("default kernels: %s; variants on this CPU: %d",
		 ibc_reduce_isa_name(ibc_reduce_isa_get()), n_isa);
	tap_is_int(ibc_reduce_isa_get(), isa_list[n_isa - 1],
		   "the best supported variant is the default");

	/* reference self-check on known encodings */
	tap_ok(ref_f2h(1.0f) == 0x3c00 && ref_f2h(65504.0f) == 0x7bff &&
		   ref_f2h(0x1p-24f) == 0x0001 && ref_f2b(1.0f) == 0x3f80 &&
		   ref_f2b(-2.0f) == 0xc000 && f2u(ref_h2f(0x3555)) == 0x3eaaa000,
	       "the test's reference encoder agrees with known encodings");

	for (i = 0; i < n_isa; i++) {
		const char *isa = isa_names[isa_list[i]];

		tap_is_int(ibc_reduce_isa_set(isa_list[i]), IBC_OK, "select %s", isa);
		test_edges(isa);
		test_avg(isa);
		test_conversions_exhaustive(isa);
		test_rounding(isa, IBC_FLOAT16);
		test_rounding(isa, IBC_BFLOAT16);
		test_random_vs_ref(isa);
		test_f32_acc(isa);
	}
	test_isa_agree();
	timing();
	return tap_done();
}
