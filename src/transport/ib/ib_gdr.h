/* SPDX-License-Identifier: MIT */
/*
 * ib_gdr.h - registration of CUDA device memory with a verbs NIC for
 * GPUDirect RDMA (ib_gdr.c: dma-buf or peer memory), and the probe of the
 * provider's dma-buf support. Stubs without CUDA or verbs.
 */
#ifndef IBC_IB_GDR_H
#define IBC_IB_GDR_H

#include <stddef.h>

#include "cuda/cuda.h"
#include "ibcoll.h"

struct ibv_pd;
struct ibv_mr;

/* ---------------------------------------------------------------------- */
/* ib_gdr.c: device memory for the NIC (built with CUDA and verbs)        */
/* ---------------------------------------------------------------------- */

#if defined(HAVE_CUDA) && defined(HAVE_VERBS)

/**
 * ibc_cuda_ib_dmabuf_probe() - Whether the verbs provider of @pd accepts
 * dma-buf registrations: ibv_reg_dmabuf_mr() with fd -1 fails with EBADF
 * when it does and EOPNOTSUPP/EPROTONOSUPPORT when not (NCCL's probe; no
 * GPU memory needed).
 * @pd: [in] protection domain of the NIC.
 * Return: 1, 0, or -1 when the build lacks ibv_reg_dmabuf_mr.
 */
int ibc_cuda_ib_dmabuf_probe(struct ibv_pd *pd);

/**
 * ibc_cuda_ib_reg_mr() - Register device memory with the NIC for
 * GPUDirect RDMA in @mode.
 * @pd:     [in]  protection domain.
 * @ptr:    [in]  device memory, @nbytes long.
 * @nbytes: [in]  bytes.
 * @access: [in]  IBV_ACCESS_* flags.
 * @mode:   [in]  IBC_GDR_DMABUF: ibv_reg_dmabuf_mr(pd, offset, nbytes,
 *                iova = @ptr, fd) on the fd of ibc_cuda_dmabuf_fd(), which
 *                is closed again; IBC_GDR_PEERMEM: ibv_reg_mr(pd, @ptr, ...).
 * @mr_p:   [out] the memory region (ibv_dereg_mr() frees it), on success.
 * Return: IBC_OK; IBC_ERR_VERBS (registration refused, errno logged);
 *         IBC_ERR_CUDA; IBC_ERR_UNSUPPORTED (@mode off or not built).
 */
ibc_status_t ibc_cuda_ib_reg_mr(struct ibv_pd *pd, void *ptr, size_t nbytes, int access,
				enum ibc_gdr_mode mode, struct ibv_mr **mr_p);

#else

static inline int ibc_cuda_ib_dmabuf_probe(struct ibv_pd *pd)
{
	(void)pd;
	return -1;
}

static inline ibc_status_t ibc_cuda_ib_reg_mr(struct ibv_pd *pd, void *ptr, size_t nbytes,
					      int access, enum ibc_gdr_mode mode,
					      struct ibv_mr **mr_p)
{
	(void)pd;
	(void)ptr;
	(void)nbytes;
	(void)access;
	(void)mode;
	(void)mr_p;
	return IBC_ERR_UNSUPPORTED;
}

#endif

#endif /* IBC_IB_GDR_H */
