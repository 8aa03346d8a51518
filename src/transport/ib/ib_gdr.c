/* SPDX-License-Identifier: MIT */
/*
 * cuda_ibreg.c - registration of CUDA device memory with a verbs NIC for
 * GPUDirect RDMA, for the verbs transport (built with CUDA and verbs; the
 * stubs are in cuda.h). dma-buf: ibv_reg_dmabuf_mr() on the fd of
 * cuMemGetHandleForAddressRange() (cuda_mem.c); peer memory: plain
 * ibv_reg_mr() on the device pointer, which nvidia_peermem resolves.
 * Source: NCCL transport/net_ib.cc (ncclIbRegMrDmaBufInternal,
 * ncclIbDmaBufSupport).
 */
#include "config.h"

#include <errno.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "base/check.h"
#include "base/log.h"
#include "cuda/cuda.h"
#include "transport/ib/ib_gdr.h"

/* ibv_reg_dmabuf_mr() declared by this rdma-core (configure, by feature) */
#if defined(HAVE_DECL_IBV_REG_DMABUF_MR) && HAVE_DECL_IBV_REG_DMABUF_MR
#define IBREG_HAVE_DMABUF 1
#else
#define IBREG_HAVE_DMABUF 0
#endif

int ibc_cuda_ib_dmabuf_probe(struct ibv_pd *pd)
{
#if IBREG_HAVE_DMABUF
	struct ibv_mr *mr;
	int err;

	/* fd -1: a provider with dma-buf support checks the fd (EBADF) */
	errno = 0;
	mr = ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
	err = errno;
	if (mr) {
		ibv_dereg_mr(mr);
		return 1;
	}
	IBC_LOG_DEBUG(CUDA, "dma-buf probe on the NIC: %s", strerror(err));
	return err == EOPNOTSUPP || err == EPROTONOSUPPORT ? 0 : 1;
#else
	(void)pd;
	return -1;
#endif
}

ibc_status_t ibc_cuda_ib_reg_mr(struct ibv_pd *pd, void *ptr, size_t nbytes, int access,
				enum ibc_gdr_mode mode, struct ibv_mr **mr_p)
{
	struct ibv_mr *mr = NULL;

	if (!pd || !ptr || !nbytes || !mr_p)
		return IBC_ERR_INVALID_ARG;
	switch (mode) {
	case IBC_GDR_DMABUF: {
#if IBREG_HAVE_DMABUF
		uint64_t offset = 0;
		int fd = -1;
		int err;

		IBC_CHECK(ibc_cuda_dmabuf_fd(ptr, nbytes, &fd, &offset));
		mr = ibv_reg_dmabuf_mr(pd, offset, nbytes, (uint64_t)(uintptr_t)ptr, fd, access);
		err = errno;
		close(fd);      /* the MR keeps its own reference to the dma-buf */
		if (!mr) {
			IBC_LOG_WARN(CUDA, "ibv_reg_dmabuf_mr(%p, %zu bytes) failed: %s", ptr, nbytes,
				     strerror(err));
			return IBC_ERR_VERBS;
		}
		break;
#else
		IBC_LOG_WARN(CUDA, "dma-buf registration requested, but rdma-core lacks ibv_reg_dmabuf_mr");
		return IBC_ERR_UNSUPPORTED;
#endif
	}
	case IBC_GDR_PEERMEM:
		mr = ibv_reg_mr(pd, ptr, nbytes, access);
		if (!mr) {
			IBC_LOG_WARN(CUDA, "ibv_reg_mr on device memory (%p, %zu bytes) failed: %s (is nvidia_peermem loaded?)",
				     ptr, nbytes, strerror(errno));
			return IBC_ERR_VERBS;
		}
		break;
	default:
		IBC_LOG_ERROR(CUDA, "ibc_cuda_ib_reg_mr: GPUDirect RDMA is off for this GPU and NIC");
		return IBC_ERR_UNSUPPORTED;
	}
	*mr_p = mr;
	return IBC_OK;
}
