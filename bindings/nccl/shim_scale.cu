/* SPDX-License-Identifier: MIT */
/*
 * shim_scale.cu - the kernel of ncclRedOpCreatePreMulSum(): dst = src * s
 * on the stream, one kernel per element type over shim_scale.h's element
 * operations (the host path uses the same ones). The scalar is read from
 * device memory when the kernel runs (ncclScalarDevice) or passed by value
 * (ncclScalarHostImmediate). A grid-stride loop: 256 threads, at most 4096
 * blocks.
 */
#include <cuda_runtime.h>

#include <ibcoll.h>

#include "shim_scale.h"

#define SHIM_SCALE_KERNEL(name, T, mul)                                                         \
	__global__ void name(T *dst, const T *src, size_t n, const T *sdev, T shost)            \
	{                                                                                       \
		T s = sdev ? *sdev : shost;                                                     \
		size_t i;                                                                       \
                                                                                                \
		for (i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;                  \
		     i += (size_t)gridDim.x * blockDim.x)                                       \
			dst[i] = mul(src[i], s);                                                \
	}

SHIM_SCALE_KERNEL(scale_i8, int8_t, shim_mul_i8)
SHIM_SCALE_KERNEL(scale_u8, uint8_t, shim_mul_u8)
SHIM_SCALE_KERNEL(scale_i32, int32_t, shim_mul_i32)
SHIM_SCALE_KERNEL(scale_u32, uint32_t, shim_mul_u32)
SHIM_SCALE_KERNEL(scale_i64, int64_t, shim_mul_i64)
SHIM_SCALE_KERNEL(scale_u64, uint64_t, shim_mul_u64)
SHIM_SCALE_KERNEL(scale_f16, uint16_t, shim_mul_f16)
SHIM_SCALE_KERNEL(scale_bf16, uint16_t, shim_mul_bf16)
SHIM_SCALE_KERNEL(scale_f32, float, shim_mul_f32)
SHIM_SCALE_KERNEL(scale_f64, double, shim_mul_f64)

#define SHIM_SCALE_CASE(dt, name, T)                                                            \
	case dt:                                                                                \
		name<<<blocks, threads, 0, s>>>((T *)dst, (const T *)src, count,                \
						on_device ? (const T *)scalar : (const T *)0,   \
						on_device ? (T)0 : *(const T *)scalar);         \
		break

extern "C" int shim_scale_launch(void *dst, const void *src, size_t count, int dtype,
				 const void *scalar, int on_device, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	unsigned int threads = 256;
	size_t blocks = (count + threads - 1) / threads;

	if (!count)
		return 0;
	if (blocks > 4096)
		blocks = 4096;
	switch (dtype) {
	SHIM_SCALE_CASE(IBC_INT8, scale_i8, int8_t);
	SHIM_SCALE_CASE(IBC_UINT8, scale_u8, uint8_t);
	SHIM_SCALE_CASE(IBC_INT32, scale_i32, int32_t);
	SHIM_SCALE_CASE(IBC_UINT32, scale_u32, uint32_t);
	SHIM_SCALE_CASE(IBC_INT64, scale_i64, int64_t);
	SHIM_SCALE_CASE(IBC_UINT64, scale_u64, uint64_t);
	SHIM_SCALE_CASE(IBC_FLOAT16, scale_f16, uint16_t);
	SHIM_SCALE_CASE(IBC_BFLOAT16, scale_bf16, uint16_t);
	SHIM_SCALE_CASE(IBC_FLOAT32, scale_f32, float);
	SHIM_SCALE_CASE(IBC_FLOAT64, scale_f64, double);
	default:
		return (int)cudaErrorInvalidValue;
	}
	return (int)cudaGetLastError();
}
