/* SPDX-License-Identifier: MIT */
/*
 * nccl.h - the NCCL C API as provided by libibcoll_nccl.so (soname
 * libnccl.so.2), a client library that maps it onto libibcoll's public and
 * stream-ordered API (ibcoll.h, ibcoll_cuda.h).
 *
 * Written for ibcoll from NVIDIA's public documentation of the NCCL API
 * (docs.nvidia.com/deeplearning/nccl, "API" pages of the 2.18-2.21 user
 * guides); no NCCL source or header text is used. Types, enum values and
 * struct layouts follow NCCL's binary interface, since programs compiled
 * against NVIDIA's nccl.h must run against this library unchanged.
 *
 * Version claimed: the NCCL 2.21 API (NCCL_VERSION_CODE 22105, 2.21.5), i.e.
 * what PyTorch's NCCL backend calls from a 2.18-2.21 build. Functions added
 * by later NCCL versions are absent, except ncclAlltoAll (NCCL 2.28) and
 * RCCL's ncclAllToAll, which are provided as extensions. docs/nccl.md lists
 * what is mapped, what is refused (with ncclInvalidUsage and a reason in
 * ncclGetLastError) and why.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <stddef.h>
/*
 * As NVIDIA's header does: programs written against NCCL use the CUDA
 * runtime and the half/bfloat16 types (e.g. nccl-tests' half) through it.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 21
#define NCCL_PATCH 5
#define NCCL_SUFFIX ""

/* versions are major*10000 + minor*100 + patch from 2.9 on (1000 before) */
#define NCCL_VERSION(X, Y, Z) \
	(((X) == 2 && (Y) <= 8) || (X) < 2 ? (X) * 1000 + (Y) * 100 + (Z) \
					   : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

/* set by this header only: a program can tell it was built against ibcoll's */
#define NCCL_IBCOLL 1

#ifdef __cplusplus
extern "C" {
#endif

/** typedef ncclComm_t - opaque communicator handle. */
typedef struct ncclComm *ncclComm_t;

#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/** typedef ncclUniqueId - rendezvous token, copied to every rank by the user. */
typedef struct {
	char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/** enum ncclResult_t - result of every call (values are NCCL's ABI). */
typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclNumResults = 8
} ncclResult_t;

/* ncclConfig_t fields left at these values mean "library default" */
#define NCCL_CONFIG_UNDEF_INT (-2147483647 - 1)
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR (-1)

/**
 * typedef ncclConfig_t - communicator options (layout of NCCL 2.18-2.21;
 * later NCCL versions append fields, which this library reads past only
 * by the @size the caller set). Initialize with NCCL_CONFIG_INITIALIZER.
 * @size, @magic, @version: set by the initializer, checked by the library.
 * @blocking:  1 (default): calls return when done or enqueued; 0: init,
 *             split and finalize return ncclInProgress and complete in the
 *             background (poll ncclCommGetAsyncError()).
 * @cgaClusterSize, @minCTAs, @maxCTAs: kernel shape hints; ignored (ibcoll
 *             launches no communication kernels).
 * @netName:   network module name; ignored (ibcoll chooses its transport,
 *             IBC_TRANSPORT forces one).
 * @splitShare: share resources with the parent on split; ignored.
 */
typedef struct ncclConfig_ibc {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
	int cgaClusterSize;
	int minCTAs;
	int maxCTAs;
	const char *netName;
	int splitShare;
} ncclConfig_t;

#define NCCL_CONFIG_MAGIC 0xcafebeef
#define NCCL_CONFIG_INITIALIZER                                                              \
	{                                                                                    \
		sizeof(ncclConfig_t), NCCL_CONFIG_MAGIC,                                     \
			NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_CONFIG_UNDEF_INT, \
			NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,     \
			NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT                             \
	}

/** enum ncclRedOp_t - reductions (values are NCCL's ABI; note Max=2, Min=3). */
typedef enum {
	ncclSum = 0,
	ncclProd = 1,
	ncclMax = 2,
	ncclMin = 3,
	ncclAvg = 4,
	ncclNumOps = 5,              /* ops from ncclRedOpCreatePreMulSum() start here */
	ncclMaxRedOp = 0x7fffffff    /* keeps the enum int-sized */
} ncclRedOp_t;

/** enum ncclDataType_t - element types (values are NCCL's ABI). */
typedef enum {
	ncclInt8 = 0,
	ncclChar = 0,
	ncclUint8 = 1,
	ncclInt32 = 2,
	ncclInt = 2,
	ncclUint32 = 3,
	ncclInt64 = 4,
	ncclUint64 = 5,
	ncclFloat16 = 6,
	ncclHalf = 6,
	ncclFloat32 = 7,
	ncclFloat = 7,
	ncclFloat64 = 8,
	ncclDouble = 8,
	ncclBfloat16 = 9,
	ncclNumTypes = 10            /* NCCL 2.24+ adds fp8 types 10, 11: refused */
} ncclDataType_t;

/** enum ncclScalarResidence_t - where the scalar of a PreMulSum op lives. */
typedef enum {
	ncclScalarDevice = 0,
	ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* ---- errors and version ------------------------------------------------ */

/** ncclGetVersion() - NCCL_VERSION_CODE of the API this library provides. */
ncclResult_t ncclGetVersion(int *version);
/** ncclGetErrorString() - short text of a result code; never NULL. */
const char *ncclGetErrorString(ncclResult_t result);
/**
 * ncclGetLastError() - text of the process's last error (any thread, any
 * communicator: @comm is unused), "" when nothing failed; not cleared by
 * reading. Names the call, the rank and the cause.
 */
const char *ncclGetLastError(ncclComm_t comm);

/* ---- communicators -------------------------------------------------------- */

/** ncclGetUniqueId() - rendezvous token; starts ibcoll's bootstrap root here. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
/** ncclCommInitRank() - join communicator @commId of @nranks ranks as @rank. */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
/** ncclCommInitRankConfig() - ncclCommInitRank() with options (@config may be NULL). */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
				    int rank, ncclConfig_t *config);
/** ncclCommSplit() - MPI_Comm_split of @comm; NCCL_SPLIT_NOCOLOR gives NULL. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
			   ncclConfig_t *config);
/** ncclCommFinalize() - wait for the operations issued on @comm. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
/** ncclCommDestroy() - finalize (if not yet) and free @comm. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
/** ncclCommAbort() - free @comm now; its outstanding operations fail. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
/** ncclCommGetAsyncError() - ncclInProgress, ncclSuccess, or the error of @comm. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
/** ncclCommCount() - number of ranks of @comm. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
/** ncclCommCuDevice() - CUDA device that was current when @comm was created. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
/** ncclCommUserRank() - this process's rank in @comm. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);

/* ---- buffers ----------------------------------------------------------- */

/** ncclCommRegister() - register @buff; ibcoll needs no registration (a handle only). */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
/** ncclCommDeregister() - release a handle from ncclCommRegister(). */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);
/** ncclMemAlloc() - @size bytes of device memory (cudaMalloc). */
ncclResult_t ncclMemAlloc(void **ptr, size_t size);
/** ncclMemFree() - free memory from ncclMemAlloc(). */
ncclResult_t ncclMemFree(void *ptr);

/* ---- reduction operators --------------------------------------------------- */

/**
 * ncclRedOpCreatePreMulSum() - an operator for @comm and @datatype only:
 * sum over ranks of (each rank's @scalar * its input). The scalar is copied
 * now (ncclScalarHostImmediate) or read from device memory when the
 * operation runs (ncclScalarDevice; stream mode only).
 */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
				      ncclScalarResidence_t residence, ncclComm_t comm);
/** ncclRedOpDestroy() - destroy an op from ncclRedOpCreatePreMulSum() (once its calls returned). */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- collectives (stream-ordered; counts are ELEMENTS) --------------------- */

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			   cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
/* legacy in-place broadcast: ncclBroadcast(buff, buff, ...) */
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
		       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
			ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
			cudaStream_t stream);
/* @sendcount elements per rank; @recvbuff holds nranks * @sendcount */
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
/* @sendbuff holds nranks * @recvcount; rank r gets block r of the reduction */
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
			       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			       cudaStream_t stream);
/* extension (NCCL 2.28 name): block p of @sendbuff goes to rank p; @count per block */
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
			  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
/* extension (RCCL's name for the same call) */
ncclResult_t ncclAllToAll(const void *sendbuff, void *recvbuff, size_t count,
			  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* ---- point to point (inside ncclGroupStart/End for exchanges) -------------- */

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream);

/* ---- groups ------------------------------------------------------------- */

/** ncclGroupStart() - defer the calls of this thread until the matching ncclGroupEnd(). */
ncclResult_t ncclGroupStart(void);
/** ncclGroupEnd() - issue the deferred calls in an order that cannot deadlock. */
ncclResult_t ncclGroupEnd(void);

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
