/* SPDX-License-Identifier: MIT */
/*
 * shim_scale.h - the element operation of ncclRedOpCreatePreMulSum(): y =
 * x * s in the element type, shared by the host path (shim_premul.c) and
 * the CUDA kernel (shim_scale.cu), so that both compute the same bits.
 *   integers  the product wraps (two's complement, computed unsigned), as
 *             ibcoll's IBC_PROD does;
 *   float16,  computed in fp32 from exact conversions, rounded to nearest
 *   bfloat16  even (subnormals, infinities and NaN kept);
 *   float32,  one IEEE multiplication.
 *   float64
 */
#ifndef IBC_NCCL_SHIM_SCALE_H
#define IBC_NCCL_SHIM_SCALE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SHIM_HD __host__ __device__ static inline
#else
#define SHIM_HD static inline
#endif

union shim_fu {
	float f;
	uint32_t u;
};

SHIM_HD float shim_h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t e = (h >> 10) & 0x1fu;
	uint32_t m = h & 0x3ffu;
	union shim_fu v;

	if (e == 0) {
		if (!m) {
			v.u = sign;
			return v.f;
		}
		/* subnormal: m * 2^-24; normalize to 1.x * 2^(p-24), p the top bit */
		e = 113;
		while (!(m & 0x400u)) {
			m <<= 1;
			e--;
		}
		v.u = sign | (e << 23) | ((m & 0x3ffu) << 13);
		return v.f;
	}
	if (e == 31)
		v.u = sign | 0x7f800000u | (m << 13);
	else
		v.u = sign | ((e + 112) << 23) | (m << 13);
	return v.f;
}

SHIM_HD uint16_t shim_f2h(float f)
{
	union shim_fu v;
	uint32_t sign;
	uint32_t a;
	uint32_t h;
	uint32_t rem;

	v.f = f;
	sign = (v.u >> 16) & 0x8000u;
	a = v.u & 0x7fffffffu;
	if (a >= 0x7f800000u)                   /* inf, nan (kept quiet) */
		return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
	if (a >= 0x477ff000u)                   /* >= 65520: rounds to inf */
		return (uint16_t)(sign | 0x7c00u);
	if (a < 0x38800000u) {                  /* below 2^-14: subnormal or zero */
		uint32_t m = (a & 0x7fffffu) | 0x800000u;
		int shift = 126 - (int)(a >> 23);
		uint32_t halfway;

		if (a < 0x33000000u)            /* <= 2^-25: rounds to zero */
			return (uint16_t)sign;
		h = m >> shift;
		rem = m & ((1u << shift) - 1);
		halfway = 1u << (shift - 1);
		if (rem > halfway || (rem == halfway && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	h = (a - 0x38000000u) >> 13;            /* rebias 127 -> 15 */
	rem = a & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

SHIM_HD float shim_bf2f(uint16_t b)
{
	union shim_fu v;

	v.u = (uint32_t)b << 16;
	return v.f;
}

SHIM_HD uint16_t shim_f2bf(float f)
{
	union shim_fu v;

	v.f = f;
	if ((v.u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((v.u >> 16) | 0x40u);
	v.u += 0x7fffu + ((v.u >> 16) & 1u);
	return (uint16_t)(v.u >> 16);
}

SHIM_HD int8_t shim_mul_i8(int8_t a, int8_t s)
{
	return (int8_t)(uint8_t)((uint32_t)(uint8_t)a * (uint32_t)(uint8_t)s);
}

SHIM_HD uint8_t shim_mul_u8(uint8_t a, uint8_t s)
{
	return (uint8_t)((uint32_t)a * (uint32_t)s);
}

SHIM_HD int32_t shim_mul_i32(int32_t a, int32_t s)
{
	return (int32_t)((uint32_t)a * (uint32_t)s);
}

SHIM_HD uint32_t shim_mul_u32(uint32_t a, uint32_t s)
{
	return a * s;
}

SHIM_HD int64_t shim_mul_i64(int64_t a, int64_t s)
{
	return (int64_t)((uint64_t)a * (uint64_t)s);
}

SHIM_HD uint64_t shim_mul_u64(uint64_t a, uint64_t s)
{
	return a * s;
}

SHIM_HD uint16_t shim_mul_f16(uint16_t a, uint16_t s)
{
	return shim_f2h(shim_h2f(a) * shim_h2f(s));
}

SHIM_HD uint16_t shim_mul_bf16(uint16_t a, uint16_t s)
{
	return shim_f2bf(shim_bf2f(a) * shim_bf2f(s));
}

SHIM_HD float shim_mul_f32(float a, float s)
{
	return a * s;
}

SHIM_HD double shim_mul_f64(double a, double s)
{
	return a * s;
}

#ifdef __cplusplus
extern "C" {
#endif
/*
 * shim_scale_launch() - on @stream, @dst[i] = @src[i] * s for @count
 * elements of ibcoll dtype @dtype, s read from device memory at @scalar
 * when the kernel runs (@on_device) or taken from host memory now. Returns
 * a cudaError_t (0: launched).
 */
int shim_scale_launch(void *dst, const void *src, size_t count, int dtype, const void *scalar,
		      int on_device, void *stream);
#ifdef __cplusplus
}
#endif

#endif /* IBC_NCCL_SHIM_SCALE_H */
