/* SPDX-License-Identifier: MIT */
/*
 * shim_premul.c - ncclRedOpCreatePreMulSum/ncclRedOpDestroy and the calls
 * that use such an operator. ibcoll has no pre-multiplied sum, so it is
 * built from two steps in stream order: scale this rank's input into a
 * temporary buffer (shim_scale.cu on the stream, from cudaMallocAsync;
 * shim_scale.h's element operation on the host in host mode), then an
 * ibcoll sum from that buffer, then free the buffer behind it on the stream.
 * The input buffer is never written. The result equals NCCL's definition,
 * sum over ranks of (scalar_r * x_r), up to the order of the sum (ibcoll's).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "shim_scale.h"

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
				      ncclScalarResidence_t residence, ncclComm_t comm)
{
	const char *fn = "ncclRedOpCreatePreMulSum";
	struct shim_premul *p;
	ncclResult_t res;
	ibc_dtype_t dt;
	size_t esz = 0;
	int i;

	if (!op)
		return shim_err(NULL, ncclInvalidArgument, fn, "op is NULL");
	res = shim_comm_ready(comm, fn);
	if (res != ncclSuccess)
		return res;
	if (!scalar)
		return shim_err(comm, ncclInvalidArgument, fn, "scalar is NULL");
	if (shim_map_dtype(datatype, &dt) != 0 || ibc_dtype_size(dt, &esz) != IBC_OK)
		return shim_err(comm, ncclInvalidArgument, fn, "datatype %d is not supported",
				(int)datatype);
	if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
		return shim_err(comm, ncclInvalidArgument, fn,
				"residence %d: must be ncclScalarDevice or ncclScalarHostImmediate",
				(int)residence);
	if (residence == ncclScalarDevice && shim_host_mode())
		return shim_err(comm, ncclInvalidArgument, fn,
				"ncclScalarDevice, but this process has no CUDA device (host mode)");
	for (i = 0; i < comm->npremul && comm->premul[i].used; i++)
		;
	if (i == comm->npremul) {
		p = realloc(comm->premul, (size_t)(comm->npremul + 1) * sizeof(*p));
		if (!p)
			return shim_err(comm, ncclSystemError, fn, "out of memory");
		comm->premul = p;
		comm->npremul++;
	}
	p = &comm->premul[i];
	memset(p, 0, sizeof(*p));
	p->used = 1;
	p->nccl_dtype = (int)datatype;
	p->dtype = dt;
	p->on_device = residence == ncclScalarDevice;
	if (p->on_device)
		p->dptr = scalar;
	else
		memcpy(p->value, scalar, esz);
	*op = (ncclRedOp_t)(ncclNumOps + i);
	return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
	const char *fn = "ncclRedOpDestroy";
	ncclResult_t res = shim_comm_ready(comm, fn);
	int i = (int)op - ncclNumOps;

	if (res != ncclSuccess)
		return res;
	if ((int)op >= 0 && (int)op < ncclNumOps)
		return shim_err(comm, ncclInvalidArgument, fn,
				"op %d is a built-in reduction, not one from ncclRedOpCreatePreMulSum()",
				(int)op);
	if (i < 0 || i >= comm->npremul || !comm->premul[i].used)
		return shim_err(comm, ncclInvalidArgument, fn,
				"op %d is not an operator of this communicator (destroyed already?)",
				(int)op);
	comm->premul[i].used = 0;
	return ncclSuccess;
}

ncclResult_t shim_premul_find(struct ncclComm *comm, int nccl_op, int nccl_dtype,
			      struct shim_premul *pm, const char *fn)
{
	int i = nccl_op - ncclNumOps;

	if (i < 0 || i >= comm->npremul || !comm->premul[i].used)
		return shim_err(comm, ncclInvalidArgument, fn,
				"op %d is neither a built-in reduction nor an operator of this communicator from ncclRedOpCreatePreMulSum()",
				nccl_op);
	if (comm->premul[i].nccl_dtype != nccl_dtype)
		return shim_err(comm, ncclInvalidArgument, fn,
				"op %d was created for datatype %d, used with datatype %d", nccl_op,
				comm->premul[i].nccl_dtype, nccl_dtype);
	*pm = comm->premul[i];
	return ncclSuccess;
}

#define SCALE_LOOP(T, mul)                                                      \
	do {                                                                    \
		T s_;                                                           \
                                                                                \
		memcpy(&s_, pm->value, sizeof(s_));                             \
		for (i = 0; i < count; i++)                                     \
			((T *)dst)[i] = mul(((const T *)src)[i], s_);           \
	} while (0)

void shim_premul_host(const struct shim_premul *pm, void *dst, const void *src, size_t count)
{
	size_t i;

	switch (pm->dtype) {
	case IBC_INT8: SCALE_LOOP(int8_t, shim_mul_i8); break;
	case IBC_UINT8: SCALE_LOOP(uint8_t, shim_mul_u8); break;
	case IBC_INT32: SCALE_LOOP(int32_t, shim_mul_i32); break;
	case IBC_UINT32: SCALE_LOOP(uint32_t, shim_mul_u32); break;
	case IBC_INT64: SCALE_LOOP(int64_t, shim_mul_i64); break;
	case IBC_UINT64: SCALE_LOOP(uint64_t, shim_mul_u64); break;
	case IBC_FLOAT16: SCALE_LOOP(uint16_t, shim_mul_f16); break;
	case IBC_BFLOAT16: SCALE_LOOP(uint16_t, shim_mul_bf16); break;
	case IBC_FLOAT32: SCALE_LOOP(float, shim_mul_f32); break;
	case IBC_FLOAT64: SCALE_LOOP(double, shim_mul_f64); break;
	default: break;
	}
}

ncclResult_t shim_premul_issue(const struct shim_op *op)
{
	struct shim_op sum = *op;
	size_t n = op->count;
	size_t esz = 0;
	void *tmp = NULL;
	ncclResult_t res;
	ncclResult_t res2;

	sum.has_premul = 0;
	sum.op = IBC_SUM;
	if (op->kind == SHIM_REDUCE_SCATTER)
		n *= (size_t)op->comm->nranks;
	if (!n)
		return shim_issue(&sum);
	ibc_dtype_size(op->dtype, &esz);
	if (shim_host_mode()) {
		tmp = malloc(n * esz);
		if (!tmp)
			return shim_err(op->comm, ncclSystemError, op->fn,
					"out of memory (PreMulSum temporary of %zu bytes)", n * esz);
		shim_premul_host(&op->premul, tmp, op->sendbuf, n);
		sum.sendbuf = tmp;
		res = shim_issue(&sum);
		free(tmp);
		return res;
	}
	res = shim_cuda_alloc_async(&tmp, n * esz, op->stream, op->comm, op->fn);
	if (res != ncclSuccess)
		return res;
	res = shim_cuda_scale(tmp, op->sendbuf, n, &op->premul, op->stream, op->comm, op->fn);
	if (res == ncclSuccess) {
		sum.sendbuf = tmp;
		res = shim_issue(&sum);
	}
	/* behind the sum on the stream (or at once if nothing was queued) */
	res2 = shim_cuda_free_async(tmp, op->stream, op->comm, op->fn);
	return res != ncclSuccess ? res : res2;
}
