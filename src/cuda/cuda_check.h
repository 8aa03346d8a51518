/* SPDX-License-Identifier: MIT */
/*
 * cuda_check.h - the CUDA members of the check-macro family (STYLE C4),
 * for the files of src/cuda that call the runtime (built with CUDA only).
 * Each logs the failed call with the CUDA error name and text at WARN,
 * clears the runtime's last-error state (cudaGetLastError) so that the
 * next call does not report a stale error, and honours fault injection
 * (IBC_FAULT_INJECT=cuda:N makes the N-th checked call fail without being
 * made).
 */
#ifndef IBC_CUDA_CHECK_H
#define IBC_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "base/fault.h"
#include "base/log.h"
#include "base/util.h"

/* IBC_CUDA_CHECK_GOTO(call, st, label): a runtime call; IBC_ERR_CUDA on failure */
#define IBC_CUDA_CHECK_GOTO(call, st, label)                                           \
	do {                                                                           \
		cudaError_t ibc_cuda_err_;                                             \
		if (IBC_UNLIKELY(ibc_fault_hit(IBC_FAULT_CUDA, #call)))                \
			ibc_cuda_err_ = cudaErrorUnknown;                              \
		else                                                                   \
			ibc_cuda_err_ = (call);                                        \
		if (IBC_UNLIKELY(ibc_cuda_err_ != cudaSuccess)) {                      \
			IBC_LOG_WARN(CUDA, "%s failed: %s (%s)", #call,                \
				     cudaGetErrorName(ibc_cuda_err_),                  \
				     cudaGetErrorString(ibc_cuda_err_));               \
			(void)cudaGetLastError();                                      \
			(st) = IBC_ERR_CUDA;                                           \
			goto label;                                                    \
		}                                                                      \
	} while (0)

#endif /* IBC_CUDA_CHECK_H */
