/* SPDX-License-Identifier: MIT */
/*
 * bench_data.c - inputs of ibc_bench `-c 1` and their exact results
 * (bench_common.h). Every rank fills its send buffer from a hash of (rank,
 * element index), so a block moved to the wrong place or taken from the
 * wrong rank is caught, and picks values small enough that every partial
 * result is exact in every dtype; the expected result of each element is
 * then computed independently of the library (wrap-around of integer
 * types, one rounding of AVG as the library's semantics in ibcoll.h and
 * src/coll/reduce.h define it) and compared bit for bit.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "bench_common.h"

/* splitmix64's finaliser (Steele, Lea & Flood 2014): a cheap, well-mixed hash */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static size_t dt_size(ibc_dtype_t dt)
{
	size_t n = 0;

	if (ibc_dtype_size(dt, &n) != IBC_OK)
		return 0;
	return n;
}

static int dt_is_float(ibc_dtype_t dt)
{
	return dt == IBC_FLOAT16 || dt == IBC_BFLOAT16 || dt == IBC_FLOAT32 || dt == IBC_FLOAT64;
}

static int dt_is_unsigned(ibc_dtype_t dt)
{
	return dt == IBC_UINT8 || dt == IBC_UINT32 || dt == IBC_UINT64;
}

uint16_t bench_f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);   /* quiet NaN */
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

uint16_t bench_f32_to_f16(float f)
{
	uint32_t x;
	uint16_t sign;
	double a = fabs((double)f);
	double q;
	int e;
	int ex;

	memcpy(&x, &f, sizeof(x));
	sign = (uint16_t)((x >> 16) & 0x8000u);
	if (isnan(f))
		return sign | 0x7e00u;
	if (isinf(f))
		return sign | 0x7c00u;
	if (a == 0.0)
		return sign;
	frexp(a, &e);                   /* a = m * 2^e, 0.5 <= m < 1 */
	if (e < -13)                    /* below 2^-14: subnormal, units of 2^-24 */
		return sign | (uint16_t)rint(a * 0x1p24);      /* 1024 encodes 2^-14: right */
	q = rint(ldexp(a, 11 - e));     /* 11 significant bits, nearest even */
	ex = e - 1;
	if (q == 2048.0) {
		q = 1024.0;
		ex++;
	}
	if (ex > 15)
		return sign | 0x7c00u;
	return sign | (uint16_t)((ex + 15) << 10) | (uint16_t)(q - 1024.0);
}

/* bits of @v in @dt (floating types: @v rounded to nearest even) */
static uint64_t enc_float(ibc_dtype_t dt, double v)
{
	float f = (float)v;
	uint32_t b32;
	uint64_t b64;

	switch (dt) {
	case IBC_FLOAT16:
		return bench_f32_to_f16(f);
	case IBC_BFLOAT16:
		return bench_f32_to_bf16(f);
	case IBC_FLOAT32:
		memcpy(&b32, &f, 4);
		return b32;
	default:
		memcpy(&b64, &v, 8);
		return b64;
	}
}

static uint64_t enc_int(ibc_dtype_t dt, uint64_t v)
{
	size_t sz = dt_size(dt);

	return sz >= 8 ? v : v & ((1ULL << (8 * sz)) - 1);
}

static uint64_t enc_value(ibc_dtype_t dt, int64_t v)
{
	return dt_is_float(dt) ? enc_float(dt, (double)v) : enc_int(dt, (uint64_t)v);
}

/* little-endian hosts only (configure checks): the low bytes of @bits */
static void put_elem(void *buf, uint64_t idx, size_t sz, uint64_t bits)
{
	memcpy((char *)buf + idx * sz, &bits, sz);
}

static uint64_t get_elem(const void *buf, uint64_t idx, size_t sz)
{
	uint64_t bits = 0;

	memcpy(&bits, (const char *)buf + idx * sz, sz);
	return bits;
}

int64_t bench_data_value(const struct bench_data *d, int r, uint64_t i)
{
	uint64_t h = mix64(i * 0x9e3779b97f4a7c15ULL + (uint64_t)r * 0xd1b54a32d192ed03ULL +
			   0x632be59bd9b4e019ULL);

	if (bench_coll_reduces(d->coll) && d->op == IBC_PROD)
		return 1 + (h % (uint64_t)(d->nranks + 1) == 0);
	if (dt_is_unsigned(d->dtype))
		return (int64_t)(h % 7);
	return (int64_t)(h % 7) - 3;
}

/* sign- or zero-extend the low bytes of @bits as the integer dtype @dt */
static int64_t int_extend(ibc_dtype_t dt, uint64_t bits)
{
	size_t sz = dt_size(dt);
	unsigned shift = (unsigned)(64 - 8 * sz);

	if (sz >= 8)
		return (int64_t)bits;
	if (dt_is_unsigned(dt))
		return (int64_t)(bits & ((1ULL << (8 * sz)) - 1));
	return (int64_t)(bits << shift) >> shift;
}

/* the exact reduction over all ranks of element @j of the send buffers */
static uint64_t expect_reduce(const struct bench_data *d, uint64_t j)
{
	ibc_dtype_t dt = d->dtype;
	int n = d->nranks;
	int r;

	if (!dt_is_float(dt)) {
		uint64_t acc = d->op == IBC_PROD ? 1 : 0;
		int64_t mn = INT64_MAX;
		int64_t mx = INT64_MIN;

		for (r = 0; r < n; r++) {
			int64_t v = bench_data_value(d, r, j);

			if (d->op == IBC_PROD)
				acc *= (uint64_t)v;
			else
				acc += (uint64_t)v;
			mn = v < mn ? v : mn;
			mx = v > mx ? v : mx;
		}
		switch (d->op) {
		case IBC_MIN:
			return enc_int(dt, (uint64_t)mn);
		case IBC_MAX:
			return enc_int(dt, (uint64_t)mx);
		case IBC_AVG: {
			int64_t s = int_extend(dt, acc); /* the sum wrapped in the dtype */

			if (dt_is_unsigned(dt))
				return enc_int(dt, (uint64_t)s / (uint64_t)n);
			return enc_int(dt, (uint64_t)(s / n));
		}
		default:
			return enc_int(dt, acc);
		}
	}
	{
		double s = 0.0;
		double p = 1.0;
		double mn = INFINITY;
		double mx = -INFINITY;

		for (r = 0; r < n; r++) {
			double v = (double)bench_data_value(d, r, j);

			s += v;
			p *= v;
			mn = v < mn ? v : mn;
			mx = v > mx ? v : mx;
		}
		switch (d->op) {
		case IBC_PROD:
			return enc_float(dt, p);
		case IBC_MIN:
			return enc_float(dt, mn);
		case IBC_MAX:
			return enc_float(dt, mx);
		case IBC_AVG:
			if (dt == IBC_FLOAT64)
				return enc_float(dt, s / n);
			/* fp32, and 16-bit types widened to fp32: one fp32 division */
			return enc_float(dt, (double)((float)s / (float)n));
		default:
			return enc_float(dt, s);
		}
	}
}

void bench_data_fill(const struct bench_data *d, void *sendbuf)
{
	size_t sz = dt_size(d->dtype);
	uint64_t len = d->count;
	uint64_t i;

	if (d->coll == BENCH_REDUCE_SCATTER || d->coll == BENCH_ALLTOALL)
		len = d->count * (uint64_t)d->nranks;
	if (d->coll == BENCH_BARRIER || !sendbuf)
		return;
	for (i = 0; i < len; i++)
		put_elem(sendbuf, i, sz, enc_value(d->dtype, bench_data_value(d, d->rank, i)));
}

void bench_data_poison(void *recvbuf, size_t nbytes)
{
	if (recvbuf && nbytes)
		memset(recvbuf, 0x7f, nbytes);
}

uint64_t bench_data_check(const struct bench_data *d, const void *recvbuf, int mpi_bcast_root_skip)
{
	size_t sz = dt_size(d->dtype);
	uint64_t c = d->count;
	uint64_t wrong = 0;
	uint64_t i;
	int n = d->nranks;
	int b;

	switch (d->coll) {
	case BENCH_REDUCE:
		if (d->rank != d->root)
			return 0;
		/* fall through */
	case BENCH_ALLREDUCE:
		for (i = 0; i < c; i++)
			wrong += get_elem(recvbuf, i, sz) != expect_reduce(d, i);
		break;
	case BENCH_REDUCE_SCATTER:
		for (i = 0; i < c; i++)
			wrong += get_elem(recvbuf, i, sz) !=
				 expect_reduce(d, (uint64_t)d->rank * c + i);
		break;
	case BENCH_BROADCAST:
		if (mpi_bcast_root_skip && d->rank == d->root)
			return 0;
		for (i = 0; i < c; i++)
			wrong += get_elem(recvbuf, i, sz) !=
				 enc_value(d->dtype, bench_data_value(d, d->root, i));
		break;
	case BENCH_ALLGATHER:
		for (b = 0; b < n; b++)
			for (i = 0; i < c; i++)
				wrong += get_elem(recvbuf, (uint64_t)b * c + i, sz) !=
					 enc_value(d->dtype, bench_data_value(d, b, i));
		break;
	case BENCH_ALLTOALL:
		for (b = 0; b < n; b++)
			for (i = 0; i < c; i++)
				wrong += get_elem(recvbuf, (uint64_t)b * c + i, sz) !=
					 enc_value(d->dtype,
						   bench_data_value(d, b, (uint64_t)d->rank * c + i));
		break;
	case BENCH_SENDRECV: {
		int prev = (d->rank + n - 1) % n;

		for (i = 0; i < c; i++)
			wrong += get_elem(recvbuf, i, sz) !=
				 enc_value(d->dtype, bench_data_value(d, prev, i));
		break;
	}
	default:
		break;
	}
	return wrong;
}
