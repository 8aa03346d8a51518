/* SPDX-License-Identifier: MIT */
/*
 * shim_map.c - NCCL's element types and reductions onto ibcoll's (the two
 * enums number them differently: NCCL float32 is 7 and bfloat16 9, ibcoll's
 * 8 and 7; NCCL max is 2 and min 3, ibcoll's the reverse), the names of the
 * calls, and the id hash.
 */
#include "config.h"

#include "shim.h"

int shim_map_dtype(int nccl_dtype, ibc_dtype_t *dtype_p)
{
	static const ibc_dtype_t map[ncclNumTypes] = {
		[ncclInt8] = IBC_INT8,       [ncclUint8] = IBC_UINT8,
		[ncclInt32] = IBC_INT32,     [ncclUint32] = IBC_UINT32,
		[ncclInt64] = IBC_INT64,     [ncclUint64] = IBC_UINT64,
		[ncclFloat16] = IBC_FLOAT16, [ncclFloat32] = IBC_FLOAT32,
		[ncclFloat64] = IBC_FLOAT64, [ncclBfloat16] = IBC_BFLOAT16,
	};

	if (nccl_dtype < 0 || nccl_dtype >= ncclNumTypes)
		return -1;
	*dtype_p = map[nccl_dtype];
	return 0;
}

int shim_map_op(int nccl_op, ibc_redop_t *op_p)
{
	static const ibc_redop_t map[ncclNumOps] = {
		[ncclSum] = IBC_SUM, [ncclProd] = IBC_PROD, [ncclMax] = IBC_MAX,
		[ncclMin] = IBC_MIN, [ncclAvg] = IBC_AVG,
	};

	if (nccl_op < 0 || nccl_op >= ncclNumOps)
		return -1;
	*op_p = map[nccl_op];
	return 0;
}

const char *shim_kind_name(int kind)
{
	static const char *const names[SHIM_KIND_COUNT] = {
		[SHIM_ALLREDUCE] = "ncclAllReduce",	    [SHIM_BROADCAST] = "ncclBroadcast",
		[SHIM_REDUCE] = "ncclReduce",		    [SHIM_ALLGATHER] = "ncclAllGather",
		[SHIM_REDUCE_SCATTER] = "ncclReduceScatter", [SHIM_ALLTOALL] = "ncclAlltoAll",
		[SHIM_SEND] = "ncclSend",		    [SHIM_RECV] = "ncclRecv",
	};

	return kind >= 0 && kind < SHIM_KIND_COUNT ? names[kind] : "?";
}

uint64_t shim_hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}
