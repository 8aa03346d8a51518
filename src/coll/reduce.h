/* SPDX-License-Identifier: MIT */
/*
 * reduce.h - local (in-memory) reduction kernels: the hot loop of every
 * reducing collective. Pure functions on host memory; the algorithms in
 * coll/ call them on chunks they have received. Implemented in reduce.c,
 * whose per-ISA loops live in reduce_kern.h (compiled twice: portable and
 * AVX2+F16C, chosen once at first use by CPU feature detection).
 *
 * Semantics shared by every function below (they are the library's
 * reduction semantics, see enum ibc_redop in ibcoll.h):
 *
 *  - Operand order: "a OP b" where a is the EARLIER partial result (left
 *    operand) and b the newly arrived contribution. Every operation below is
 *    commutative on values; the order only matters for which NaN payload is
 *    kept when both operands are NaN (MIN/MAX keep the left one).
 *  - Integers (int8..uint64): SUM and PROD wrap modulo 2^bits (computed in
 *    the unsigned type, so two's complement, no undefined behaviour); MIN and
 *    MAX compare as signed or unsigned according to the dtype.
 *  - float32/float64: one IEEE operation in the type, round to nearest even
 *    (the caller must not run with FTZ/DAZ set in MXCSR, e.g. by linking with
 *    -ffast-math, or subnormal results flush to zero).
 *    MIN/MAX: NaN if either operand is NaN (the left one if both are);
 *    MIN(-0, +0) = -0 and MAX(-0, +0) = +0 in either order (IEEE 754-2019
 *    minimum/maximum), so the result never depends on operand order.
 *  - float16 (IEEE binary16) and bfloat16: each operation widens both
 *    operands to fp32 (exact), computes in fp32 and rounds to the 16-bit type
 *    once, to nearest even. Infinities and subnormals are handled exactly;
 *    a NaN stays NaN (it is quietened; the sign and the high payload bits are
 *    kept). Because fp32 has at least 2p+2 bits for both 16-bit formats,
 *    the fp32 intermediate causes no double-rounding error for SUM, PROD and
 *    AVG: the result is the correctly rounded 16-bit value.
 *  - AVG: the reduction kernels compute SUM; ibc_reduce_avg_finalize()
 *    performs the one division at the end.
 *  - Every ISA variant gives bit-identical results (tests/unit/test_reduce.c
 *    checks the AVX2+F16C path against the portable one).
 *
 * Arguments are not validated (the API layer validates dtype and op before
 * any collective starts): an unknown dtype or op is a no-op, and trips
 * IBC_ASSERT in --enable-debug builds. All functions are thread-safe and
 * never block, allocate or log.
 */
#ifndef IBC_COLL_REDUCE_H
#define IBC_COLL_REDUCE_H

#include <stddef.h>

#include "ibcoll.h"

/**
 * ibc_reduce_local() - In-place accumulation: dst[i] = dst[i] OP src[i].
 * @dst:   [in,out] @count elements of @dtype: the earlier partial result (left
 *                  operand) on entry, the reduced result on return.
 * @src:   [in]     @count elements of @dtype: the newly arrived contribution.
 *                  Must not overlap @dst.
 * @count: number of ELEMENTS; 0 is a no-op.
 * @dtype: element type (IBC_INT8 ... IBC_FLOAT64).
 * @op:    IBC_SUM, IBC_PROD, IBC_MIN, IBC_MAX; IBC_AVG computes the SUM (the
 *         division comes once at the end, ibc_reduce_avg_finalize()).
 *
 * Blocking:  no (pure computation). Threading: thread-safe.
 * Algorithm: element-wise; vectorized (see file header for the semantics).
 */
void ibc_reduce_local(void *dst, const void *src, size_t count, ibc_dtype_t dtype, ibc_redop_t op);

/**
 * ibc_reduce_local3() - Out-of-place reduction: dst[i] = a[i] OP b[i].
 * @dst:   [out] @count elements of @dtype; may alias @a or @b exactly (same
 *               pointer), but must not overlap either partially.
 * @a:     [in]  @count elements: the earlier partial result (left operand).
 * @b:     [in]  @count elements: the newly arrived contribution (right
 *               operand); may equal @a.
 * @count: number of ELEMENTS; 0 is a no-op.
 * @dtype: element type.
 * @op:    reduction; IBC_AVG computes the SUM.
 *
 * Blocking: no. Threading: thread-safe.
 */
void ibc_reduce_local3(void *dst, const void *a, const void *b, size_t count, ibc_dtype_t dtype,
		       ibc_redop_t op);

/**
 * ibc_reduce_avg_finalize() - The division step of IBC_AVG: buf[i] = buf[i] / n.
 * @buf:   [in,out] @count elements of @dtype holding the SUM over @n ranks.
 * @count: number of ELEMENTS.
 * @dtype: element type. Integers: C division (truncates toward zero) of the
 *         wrapped sum in the dtype; float32/float64: one IEEE division in the
 *         type; float16/bfloat16: widen to fp32, divide by (float)@n, round
 *         to nearest even once.
 * @n:     divisor (number of ranks), >= 1; @n <= 0 is a no-op.
 *
 * Blocking: no. Threading: thread-safe.
 */
void ibc_reduce_avg_finalize(void *buf, size_t count, ibc_dtype_t dtype, int n);

/**
 * ibc_cvt_to_f32() - Widen 16-bit floats (or copy fp32) to fp32, exactly.
 * @dst:   [out] @count floats; must not overlap @src.
 * @src:   [in]  @count elements of @dtype.
 * @count: number of ELEMENTS.
 * @dtype: IBC_FLOAT16, IBC_BFLOAT16 or IBC_FLOAT32 (a copy); others: no-op.
 *
 * Every finite value, infinity and subnormal converts exactly; a float16 NaN
 * becomes a quiet fp32 NaN with the same sign and payload (bits shifted up),
 * a bfloat16 NaN keeps its bits (a bfloat16 is the high half of an fp32).
 * Used by IBC_ACCUM_FP32=1 to keep partial sums in fp32 on the wire.
 * Blocking: no. Threading: thread-safe.
 */
void ibc_cvt_to_f32(float *dst, const void *src, size_t count, ibc_dtype_t dtype);

/**
 * ibc_cvt_from_f32() - Narrow fp32 to 16-bit floats (or copy fp32), rounding
 * to nearest, ties to even.
 * @dst:   [out] @count elements of @dtype; must not overlap @src.
 * @src:   [in]  @count floats.
 * @count: number of ELEMENTS.
 * @dtype: IBC_FLOAT16, IBC_BFLOAT16 or IBC_FLOAT32 (a copy); others: no-op.
 *
 * Overflow gives +-inf (float16: |x| >= 65520; bfloat16: when rounding
 * carries past the largest finite value), underflow gives float16
 * subnormals or +-0, a NaN gives a quiet NaN with its sign and the high
 * payload bits (as the x86 F16C instruction VCVTPS2PH does).
 * Blocking: no. Threading: thread-safe.
 */
void ibc_cvt_from_f32(void *dst, const float *src, size_t count, ibc_dtype_t dtype);

/**
 * ibc_reduce_f32_acc() - Accumulate a 16-bit (or fp32) contribution into
 * fp32 partial results: acc[i] = acc[i] OP (float)src[i].
 * @acc:       [in,out] @count floats: the earlier partial result (left operand).
 * @src:       [in]     @count elements of @src_dtype; must not overlap @acc.
 * @count:     number of ELEMENTS.
 * @src_dtype: IBC_FLOAT16, IBC_BFLOAT16 or IBC_FLOAT32; others: no-op.
 * @op:        reduction; IBC_AVG computes the SUM.
 *
 * The fp32 operation follows the float32 rules of the file header (no
 * rounding to 16 bits: that happens once, in ibc_cvt_from_f32()).
 * Blocking: no. Threading: thread-safe.
 */
void ibc_reduce_f32_acc(float *acc, const void *src, size_t count, ibc_dtype_t src_dtype,
			ibc_redop_t op);

/**
 * ibc_reduce_f32() - All-fp32 reduction for the fp32-on-the-wire ring:
 * dst[i] = a[i] OP b[i].
 * @dst:   [out] @count floats; may alias @a or @b exactly.
 * @a:     [in]  @count floats: the earlier partial result (left operand).
 * @b:     [in]  @count floats: the newly arrived contribution.
 * @count: number of ELEMENTS.
 * @op:    reduction; IBC_AVG computes the SUM.
 *
 * Same as ibc_reduce_local3(dst, a, b, count, IBC_FLOAT32, op).
 * Blocking: no. Threading: thread-safe.
 */
void ibc_reduce_f32(float *dst, const float *a, const float *b, size_t count, ibc_redop_t op);

/**
 * ibc_reduce_f32_acc_cvt() - Last hop of an fp32-accumulating ring:
 * dst[i] = round16(acc[i] OP (float)src[i]), one rounding.
 * @dst:       [out] @count elements of @src_dtype; may alias @src exactly,
 *                   must not overlap @acc.
 * @acc:       [in]  @count floats: the earlier partial result (left operand).
 * @src:       [in]  @count elements of @src_dtype: this rank's contribution.
 * @count:     number of ELEMENTS.
 * @src_dtype: IBC_FLOAT16, IBC_BFLOAT16 or IBC_FLOAT32; others: no-op.
 * @op:        reduction; IBC_AVG computes the SUM.
 *
 * Equivalent to ibc_reduce_f32_acc() into a copy of @acc followed by
 * ibc_cvt_from_f32(), without the temporary.
 * Blocking: no. Threading: thread-safe.
 */
void ibc_reduce_f32_acc_cvt(void *dst, const float *acc, const void *src, size_t count,
			    ibc_dtype_t src_dtype, ibc_redop_t op);

/**
 * enum ibc_reduce_isa - the instruction-set variants of the kernels.
 * @IBC_REDUCE_ISA_PORTABLE: plain C, vectorized for the build's baseline ISA.
 * @IBC_REDUCE_ISA_AVX2:     x86-64 AVX2 + F16C (float16 conversions in hardware).
 * @IBC_REDUCE_ISA_COUNT:    number of variants.
 */
enum ibc_reduce_isa { IBC_REDUCE_ISA_PORTABLE = 0, IBC_REDUCE_ISA_AVX2 = 1, IBC_REDUCE_ISA_COUNT };

/**
 * ibc_reduce_isa_supported() - Whether this build and CPU can run @isa.
 * @isa: [in] a variant.
 * Return: 1 if supported, else 0 (always 1 for IBC_REDUCE_ISA_PORTABLE).
 */
int ibc_reduce_isa_supported(enum ibc_reduce_isa isa);

/**
 * ibc_reduce_isa_get() - The variant in use (selected at first use: the best
 * supported one).
 * Return: the variant.
 */
enum ibc_reduce_isa ibc_reduce_isa_get(void);

/**
 * ibc_reduce_isa_set() - Tests and benchmarks: force a variant for the whole
 * process. Must not run concurrently with any reduction.
 * @isa: [in] the variant.
 * Return: IBC_OK; IBC_ERR_UNSUPPORTED if the build or CPU lacks it (the
 *         selection is then unchanged); IBC_ERR_INVALID_ARG for an unknown @isa.
 */
ibc_status_t ibc_reduce_isa_set(enum ibc_reduce_isa isa);

/**
 * ibc_reduce_isa_name() - "portable" or "avx2+f16c".
 * @isa: [in] the variant.
 * Return: a static string, "invalid-isa" for unknown values.
 */
const char *ibc_reduce_isa_name(enum ibc_reduce_isa isa);

/**
 * ibc_copy_stream() - Copy @nbytes from @src to @dst with non-temporal
 * stores (x86 SSE2 movntdq; memcpy elsewhere): the destination's lines
 * are not read first and do not fill the cache, which halves the memory
 * traffic of writing a large result that is not read again soon.
 * @dst: [out] destination. @src: [in] source (must not overlap @dst).
 * @nbytes: [in] bytes.
 *
 * The stores are weakly ordered: call ibc_copy_stream_fence() before
 * publishing the data to another thread or process.
 * Blocking: no. Threading: thread-safe.
 */
void ibc_copy_stream(void *dst, const void *src, size_t nbytes);

/* ibc_copy_stream_fence() - order earlier ibc_copy_stream() stores before later stores */
void ibc_copy_stream_fence(void);

#endif /* IBC_COLL_REDUCE_H */
