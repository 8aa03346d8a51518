/* SPDX-License-Identifier: MIT */
/*
 * cuda_reduce.cu - the GPU reduction kernels and their thin launchers:
 * dst = a OP b (every dtype x op) and the AVG division, with the element
 * semantics of base/reduce_elem.h, which the CPU kernels share (integers wrap, MIN/MAX of floats give
 * NaN when either operand is NaN and order -0 below +0, float16/bfloat16
 * are widened to fp32, computed once and rounded to nearest even). Only
 * NaN payloads may differ from the CPU kernels (GPU arithmetic returns the
 * canonical NaN); tests compare NaN with NaN.
 *
 * Shape: each thread handles 16-byte packs (16 / sizeof(T) elements) with
 * 16-byte loads and stores, UNROLL packs per iteration of a grid-stride
 * loop so that several loads are in flight; the grid is sized from the
 * device's SM count and the kernel's occupancy (one wave of resident
 * blocks of 256 threads, fewer for small inputs). Buffers that share their
 * misalignment modulo 16 are peeled to a 16-byte boundary first; others
 * take the scalar loop.
 *
 * The element code is __host__ __device__: *_emulate() runs the very same
 * bodies on the CPU over virtual threads, so that tests on machines without
 * a GPU exercise packing, peeling and tails against the CPU kernels.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "base/reduce_elem.h"
#include "cuda/cuda.h"
extern "C" {
#include "base/log.h"
#include "base/util.h"
}

#define HD __host__ __device__ __forceinline__
/* unroll on the device; the host pass (emulation) leaves it to the compiler */
#ifdef __CUDA_ARCH__
#define UNROLL_LOOP _Pragma("unroll")
#else
#define UNROLL_LOOP
#endif

namespace {

constexpr int THREADS = 256;
constexpr int UNROLL = 4;
constexpr int DEFAULT_BLOCKS_PER_SM = 4;

enum { OP_SUM = 0, OP_PROD = 1, OP_MIN = 2, OP_MAX = 3 };

/* ---- element semantics (src/coll/reduce.c) ---------------------------- */

/* the shared element semantics (base/reduce_elem.h) */
HD float fmin32(float x, float y) { return ibc_elem_fmin32(x, y); }
HD float fmax32(float x, float y) { return ibc_elem_fmax32(x, y); }
HD double fmin64(double x, double y) { return ibc_elem_fmin64(x, y); }
HD double fmax64(double x, double y) { return ibc_elem_fmax64(x, y); }

HD float h2f(uint16_t h)
{
	__half_raw r;

	r.x = h;
	return __half2float(__half(r));
}

HD uint16_t f2h(float f)
{
	__half_raw r = static_cast<__half_raw>(__float2half_rn(f));

	return r.x;
}

HD float b2f(uint16_t b)
{
	return ibc_elem_b2f(b);
}

HD uint16_t f2b(float f)
{
	__nv_bfloat16_raw r = static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(f));

	return r.x;
}

template <int OP, typename T>
HD T op_float(T x, T y)
{
	if constexpr (OP == OP_SUM)
		return x + y;
	else if constexpr (OP == OP_PROD)
		return x * y;
	else if constexpr (OP == OP_MIN && std::is_same<T, float>::value)
		return fmin32(x, y);
	else if constexpr (OP == OP_MIN)
		return fmin64(x, y);
	else if constexpr (std::is_same<T, float>::value)
		return fmax32(x, y);
	else
		return fmax64(x, y);
}

/* integers: SUM/PROD in the unsigned twin (wrap-around), MIN/MAX in the type */
template <int OP>
struct FInt {
	template <typename T>
	HD T operator()(T x, T y) const
	{
		using U = typename std::make_unsigned<T>::type;

		if constexpr (OP == OP_SUM)
			return IBC_ELEM_ISUM(T, U, x, y);
		else if constexpr (OP == OP_PROD)
			return IBC_ELEM_IPROD(T, U, x, y);
		else if constexpr (OP == OP_MIN)
			return IBC_ELEM_IMIN(T, U, x, y);
		else
			return IBC_ELEM_IMAX(T, U, x, y);
	}
};

template <int OP>
struct FFloat {
	template <typename T>
	HD T operator()(T x, T y) const
	{
		return op_float<OP, T>(x, y);
	}
};

/* float16: widen both, one fp32 operation, round once */
template <int OP>
struct FHalf {
	HD uint16_t operator()(uint16_t x, uint16_t y) const
	{
		return f2h(op_float<OP, float>(h2f(x), h2f(y)));
	}
};

template <int OP>
struct FBf16 {
	HD uint16_t operator()(uint16_t x, uint16_t y) const
	{
		return f2b(op_float<OP, float>(b2f(x), b2f(y)));
	}
};

/* AVG's division: C division for integers, one IEEE division for floats */
struct DivInt {
	int n;
	template <typename T>
	HD T operator()(T x) const
	{
		return (T)(x / n);
	}
};

struct DivFloat {
	int n;
	template <typename T>
	HD T operator()(T x) const
	{
		return x / (T)n;
	}
};

struct DivHalf {
	int n;
	HD uint16_t operator()(uint16_t x) const
	{
		return f2h(h2f(x) / (float)n);
	}
};

struct DivBf16 {
	int n;
	HD uint16_t operator()(uint16_t x) const
	{
		return f2b(b2f(x) / (float)n);
	}
};

/* ---- the bodies: one thread @tid of @nthr ------------------------------ */

struct alignas(16) V16 {
	uint32_t w[4];
};

HD V16 ld16(const void *p)
{
#ifdef __CUDA_ARCH__
	return *reinterpret_cast<const V16 *>(p);
#else
	V16 v;

	memcpy(&v, p, sizeof(v));
	return v;
#endif
}

HD void st16(void *p, const V16 &v)
{
#ifdef __CUDA_ARCH__
	*reinterpret_cast<V16 *>(p) = v;
#else
	memcpy(p, &v, sizeof(v));
#endif
}

/* elements per 16-byte pack */
template <typename T>
constexpr size_t pack_n = 16 / sizeof(T);

template <typename T>
union Pack {
	V16 v;
	T e[pack_n<T>];
};

/* elements before the first 16-byte boundary when @p, @q, @r share it; else all (scalar) */
template <typename T>
HD size_t head_count(const void *p, const void *q, const void *r, size_t n, bool *vec)
{
	uintptr_t mis = (uintptr_t)p % 16;
	size_t head;

	*vec = mis == (uintptr_t)q % 16 && mis == (uintptr_t)r % 16 && mis % sizeof(T) == 0;
	if (!*vec)
		return n;
	head = mis ? (16 - mis) / sizeof(T) : 0;
	return head < n ? head : n;
}

template <typename T, typename F>
HD void r3_body(T *d, const T *a, const T *b, size_t n, size_t tid, size_t nthr, F f)
{
	constexpr size_t P = pack_n<T>;
	bool vec;
	size_t head = head_count<T>(d, a, b, n, &vec);
	size_t nv;
	size_t v;
	size_t i;

	for (i = tid; i < head; i += nthr)
		d[i] = f(a[i], b[i]);
	if (!vec)
		return;
	d += head;
	a += head;
	b += head;
	n -= head;
	nv = n / P;
	for (v = tid; v + (UNROLL - 1) * nthr < nv; v += UNROLL * nthr) {
		Pack<T> x[UNROLL];
		Pack<T> y[UNROLL];
		int u;

		UNROLL_LOOP
		for (u = 0; u < UNROLL; u++) {
			x[u].v = ld16(a + (v + u * nthr) * P);
			y[u].v = ld16(b + (v + u * nthr) * P);
		}
		UNROLL_LOOP
		for (u = 0; u < UNROLL; u++) {
			UNROLL_LOOP
			for (size_t j = 0; j < P; j++)
				x[u].e[j] = f(x[u].e[j], y[u].e[j]);
			st16(d + (v + u * nthr) * P, x[u].v);
		}
	}
	for (; v < nv; v += nthr) {
		Pack<T> x;
		Pack<T> y;

		x.v = ld16(a + v * P);
		y.v = ld16(b + v * P);
		UNROLL_LOOP
		for (size_t j = 0; j < P; j++)
			x.e[j] = f(x.e[j], y.e[j]);
		st16(d + v * P, x.v);
	}
	for (i = nv * P + tid; i < n; i += nthr)
		d[i] = f(a[i], b[i]);
}

template <typename T, typename F>
HD void map_body(T *d, size_t n, size_t tid, size_t nthr, F f)
{
	constexpr size_t P = pack_n<T>;
	bool vec;
	size_t head = head_count<T>(d, d, d, n, &vec);
	size_t nv;
	size_t v;
	size_t i;

	for (i = tid; i < head; i += nthr)
		d[i] = f(d[i]);
	if (!vec)
		return;
	d += head;
	n -= head;
	nv = n / P;
	for (v = tid; v < nv; v += nthr) {
		Pack<T> x;

		x.v = ld16(d + v * P);
		UNROLL_LOOP
		for (size_t j = 0; j < P; j++)
			x.e[j] = f(x.e[j]);
		st16(d + v * P, x.v);
	}
	for (i = nv * P + tid; i < n; i += nthr)
		d[i] = f(d[i]);
}

template <typename T, typename F>
__global__ void __launch_bounds__(THREADS) k_reduce3(T *d, const T *a, const T *b, size_t n, F f)
{
	r3_body(d, a, b, n, blockIdx.x * (size_t)blockDim.x + threadIdx.x,
		(size_t)gridDim.x * blockDim.x, f);
}

template <typename T, typename F>
__global__ void __launch_bounds__(THREADS) k_map(T *d, size_t n, F f)
{
	map_body(d, n, blockIdx.x * (size_t)blockDim.x + threadIdx.x,
		 (size_t)gridDim.x * blockDim.x, f);
}

/* ---- runners: the device, or the CPU over virtual threads -------------- */

/*
 * blocks for @n elements of @esz bytes: enough for UNROLL packs per thread,
 * at most what the device runs at once (SMs x resident blocks of @kernel,
 * from the occupancy calculator, cached per kernel), so that the
 * grid-stride loop has no second wave
 */
template <typename K>
unsigned grid_blocks(K kernel, int sms, size_t n, size_t esz)
{
	static int resident;    /* per kernel type (every kernel here has its own); benign race */
	size_t packs = (n * esz + 15) / 16;
	size_t want = (packs + (size_t)THREADS * UNROLL - 1) / ((size_t)THREADS * UNROLL);
	size_t cap;

	if (!resident) {
		int r = 0;

		if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r, kernel, THREADS, 0) !=
			    cudaSuccess ||
		    r <= 0) {
			(void)cudaGetLastError();
			r = DEFAULT_BLOCKS_PER_SM;
		}
		resident = r;
	}
	cap = (size_t)(sms > 0 ? sms : 16) * (size_t)resident;
	return (unsigned)(want < 1 ? 1 : want > cap ? cap : want);
}

struct DevRunner {
	cudaStream_t stream;
	int sms;

	template <typename T, typename F>
	void r3(T *d, const T *a, const T *b, size_t n, F f) const
	{
		unsigned g = grid_blocks(k_reduce3<T, F>, sms, n, sizeof(T));

		k_reduce3<T, F><<<g, THREADS, 0, stream>>>(d, a, b, n, f);
	}
	template <typename T, typename F>
	void map(T *d, size_t n, F f) const
	{
		unsigned g = grid_blocks(k_map<T, F>, sms, n, sizeof(T));

		k_map<T, F><<<g, THREADS, 0, stream>>>(d, n, f);
	}
};

struct HostRunner {
	size_t nthr;

	template <typename T, typename F>
	void r3(T *d, const T *a, const T *b, size_t n, F f) const
	{
		/* the sequential order is fine: threads never touch the same element */
		for (size_t t = 0; t < nthr; t++)
			r3_body(d, a, b, n, t, nthr, f);
	}
	template <typename T, typename F>
	void map(T *d, size_t n, F f) const
	{
		for (size_t t = 0; t < nthr; t++)
			map_body(d, n, t, nthr, f);
	}
};

template <typename R, typename T, template <int> class F>
bool r3_ops(const R &r, void *d, const void *a, const void *b, size_t n, int op)
{
	T *dd = (T *)d;
	const T *aa = (const T *)a;
	const T *bb = (const T *)b;

	switch (op) {
	case IBC_SUM:
	case IBC_AVG:
		r.r3(dd, aa, bb, n, F<OP_SUM>());
		return true;
	case IBC_PROD:
		r.r3(dd, aa, bb, n, F<OP_PROD>());
		return true;
	case IBC_MIN:
		r.r3(dd, aa, bb, n, F<OP_MIN>());
		return true;
	case IBC_MAX:
		r.r3(dd, aa, bb, n, F<OP_MAX>());
		return true;
	default:
		return false;
	}
}

template <typename R>
bool r3_dispatch(const R &r, void *d, const void *a, const void *b, size_t n, int dtype, int op)
{
	switch (dtype) {
	case IBC_INT8:     return r3_ops<R, int8_t, FInt>(r, d, a, b, n, op);
	case IBC_UINT8:    return r3_ops<R, uint8_t, FInt>(r, d, a, b, n, op);
	case IBC_INT32:    return r3_ops<R, int32_t, FInt>(r, d, a, b, n, op);
	case IBC_UINT32:   return r3_ops<R, uint32_t, FInt>(r, d, a, b, n, op);
	case IBC_INT64:    return r3_ops<R, int64_t, FInt>(r, d, a, b, n, op);
	case IBC_UINT64:   return r3_ops<R, uint64_t, FInt>(r, d, a, b, n, op);
	case IBC_FLOAT16:  return r3_ops<R, uint16_t, FHalf>(r, d, a, b, n, op);
	case IBC_BFLOAT16: return r3_ops<R, uint16_t, FBf16>(r, d, a, b, n, op);
	case IBC_FLOAT32:  return r3_ops<R, float, FFloat>(r, d, a, b, n, op);
	case IBC_FLOAT64:  return r3_ops<R, double, FFloat>(r, d, a, b, n, op);
	default:           return false;
	}
}

template <typename R>
bool avg_dispatch(const R &r, void *d, size_t n, int dtype, int nr)
{
	switch (dtype) {
	case IBC_INT8:     r.map((int8_t *)d, n, DivInt{ nr }); return true;
	case IBC_UINT8:    r.map((uint8_t *)d, n, DivInt{ nr }); return true;
	case IBC_INT32:    r.map((int32_t *)d, n, DivInt{ nr }); return true;
	case IBC_UINT32:   r.map((uint32_t *)d, n, DivInt{ nr }); return true;
	case IBC_INT64:    r.map((int64_t *)d, n, DivInt{ nr }); return true;
	case IBC_UINT64:   r.map((uint64_t *)d, n, DivInt{ nr }); return true;
	case IBC_FLOAT16:  r.map((uint16_t *)d, n, DivHalf{ nr }); return true;
	case IBC_BFLOAT16: r.map((uint16_t *)d, n, DivBf16{ nr }); return true;
	case IBC_FLOAT32:  r.map((float *)d, n, DivFloat{ nr }); return true;
	case IBC_FLOAT64:  r.map((double *)d, n, DivFloat{ nr }); return true;
	default:           return false;
	}
}

bool avg_is_identity(int dtype, int n)
{
	/* x / 1 == x exactly; 16-bit values are still rounded (NaNs quietened), like the CPU */
	return n == 1 && dtype != IBC_FLOAT16 && dtype != IBC_BFLOAT16;
}

ibc_status_t dev_runner(void *stream, DevRunner *r)
{
	int dev = 0;
	cudaError_t e = cudaGetDevice(&dev);

	if (e != cudaSuccess) {
		IBC_LOG_WARN(CUDA, "cudaGetDevice failed: %s", cudaGetErrorString(e));
		(void)cudaGetLastError();
		return IBC_ERR_CUDA;
	}
	r->stream = (cudaStream_t)stream;
	r->sms = ibc_cuda_sm_count(dev);
	return IBC_OK;
}

ibc_status_t launched(const char *what)
{
	cudaError_t e = cudaGetLastError();

	if (e == cudaSuccess)
		return IBC_OK;
	IBC_LOG_WARN(CUDA, "launch of the %s kernel failed: %s (%s)", what, cudaGetErrorName(e),
		     cudaGetErrorString(e));
	return IBC_ERR_CUDA;
}

} /* namespace */

/* ---- entry points (cuda.h) --------------------------------------------- */

extern "C" ibc_status_t ibc_cuda_reduce3(void *dst, const void *a, const void *b, size_t count,
					 ibc_dtype_t dtype, ibc_redop_t op, void *stream)
{
	DevRunner r;
	ibc_status_t st;

	if (count == 0)
		return IBC_OK;
	st = dev_runner(stream, &r);
	if (st != IBC_OK)
		return st;
	if (!r3_dispatch(r, dst, a, b, count, dtype, op)) {
		IBC_LOG_ERROR(CUDA, "ibc_cuda_reduce3: invalid dtype %d or op %d", (int)dtype, (int)op);
		return IBC_ERR_INVALID_ARG;
	}
	return launched("reduction");
}

extern "C" ibc_status_t ibc_cuda_avg_finalize(void *buf, size_t count, ibc_dtype_t dtype, int n,
					      void *stream)
{
	DevRunner r;
	ibc_status_t st;

	if (count == 0 || n <= 0 || avg_is_identity(dtype, n))
		return IBC_OK;
	st = dev_runner(stream, &r);
	if (st != IBC_OK)
		return st;
	if (!avg_dispatch(r, buf, count, dtype, n)) {
		IBC_LOG_ERROR(CUDA, "ibc_cuda_avg_finalize: invalid dtype %d", (int)dtype);
		return IBC_ERR_INVALID_ARG;
	}
	return launched("average");
}

extern "C" ibc_status_t ibc_cuda_reduce3_emulate(void *dst, const void *a, const void *b,
						 size_t count, ibc_dtype_t dtype, ibc_redop_t op,
						 size_t nthreads)
{
	HostRunner r = { nthreads ? nthreads : 1 };

	if (count == 0)
		return IBC_OK;
	return r3_dispatch(r, dst, a, b, count, dtype, op) ? IBC_OK : IBC_ERR_INVALID_ARG;
}

extern "C" ibc_status_t ibc_cuda_avg_finalize_emulate(void *buf, size_t count, ibc_dtype_t dtype,
						      int n, size_t nthreads)
{
	HostRunner r = { nthreads ? nthreads : 1 };

	if (count == 0 || n <= 0 || avg_is_identity(dtype, n))
		return IBC_OK;
	return avg_dispatch(r, buf, count, dtype, n) ? IBC_OK : IBC_ERR_INVALID_ARG;
}
