/* SPDX-License-Identifier: MIT */
/*
 * reduce_elem.h - the element semantics of every reduction, in one header
 * that the CPU kernels (src/coll/reduce.c) and the GPU kernels
 * (src/cuda/cuda_reduce.cu) both compile, so that the two cannot drift:
 *  - integers: SUM and PROD wrap around (computed in the unsigned twin),
 *    MIN and MAX compare in the type (IBC_ELEM_ISUM .. IBC_ELEM_IMAX);
 *  - floats: MIN and MAX give NaN when either operand is NaN (x's when
 *    both), and order -0 below +0, so that the result does not depend on
 *    the order of the operands (written as selects, which vectorize);
 *  - bfloat16 widens to fp32 exactly (the high half of the fp32 bits).
 * float16 conversions and the rounding back to 16 bits are each side's own
 * (F16C or portable bit code on the CPU, the CUDA intrinsics on the GPU),
 * all round to nearest even; tests compare the two bit for bit.
 */
#ifndef IBC_REDUCE_ELEM_H
#define IBC_REDUCE_ELEM_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define IBC_ELEM_FN static __host__ __device__ __forceinline__
#else
#define IBC_ELEM_FN static inline __attribute__((always_inline))
#endif

IBC_ELEM_FN uint32_t ibc_elem_f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

IBC_ELEM_FN float ibc_elem_u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

IBC_ELEM_FN uint64_t ibc_elem_d2u(double f)
{
	uint64_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

IBC_ELEM_FN double ibc_elem_u2d(uint64_t u)
{
	double f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

IBC_ELEM_FN float ibc_elem_fmin32(float x, float y)
{
	float r = y < x ? y : x;

	r = x == y ? ibc_elem_u2f(ibc_elem_f2u(x) | ibc_elem_f2u(y)) : r;
	r = y != y ? y : r;
	return x != x ? x : r;
}

IBC_ELEM_FN float ibc_elem_fmax32(float x, float y)
{
	float r = x < y ? y : x;

	r = x == y ? ibc_elem_u2f(ibc_elem_f2u(x) & ibc_elem_f2u(y)) : r;
	r = y != y ? y : r;
	return x != x ? x : r;
}

IBC_ELEM_FN double ibc_elem_fmin64(double x, double y)
{
	double r = y < x ? y : x;

	r = x == y ? ibc_elem_u2d(ibc_elem_d2u(x) | ibc_elem_d2u(y)) : r;
	r = y != y ? y : r;
	return x != x ? x : r;
}

IBC_ELEM_FN double ibc_elem_fmax64(double x, double y)
{
	double r = x < y ? y : x;

	r = x == y ? ibc_elem_u2d(ibc_elem_d2u(x) & ibc_elem_d2u(y)) : r;
	r = y != y ? y : r;
	return x != x ? x : r;
}

/* bfloat16 -> fp32, exact */
IBC_ELEM_FN float ibc_elem_b2f(uint16_t b)
{
	return ibc_elem_u2f((uint32_t)b << 16);
}

/* integer reductions of T computed in its unsigned twin U (wrap-around) */
#define IBC_ELEM_ISUM(T, U, x, y) ((T)((U)(x) + (U)(y)))
#define IBC_ELEM_IPROD(T, U, x, y) ((T)((U)(x) * (U)(y)))
#define IBC_ELEM_IMIN(T, U, x, y) ((y) < (x) ? (y) : (x))
#define IBC_ELEM_IMAX(T, U, x, y) ((x) < (y) ? (y) : (x))

#endif /* IBC_REDUCE_ELEM_H */
