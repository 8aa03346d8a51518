/* SPDX-License-Identifier: MIT */
/*
 * topo_gdr.h - whether a NIC may reach a GPU's memory directly (GPUDirect
 * RDMA) and by which mechanism: a pure decision from facts (the build, the
 * GPU's dma-buf support, the peer-memory module, the GPU-NIC distance of
 * the topology, IBC_GDR and IBC_NET_GDR_LEVEL), and the probe of those
 * facts on this machine (topo_gdr.c). Always built.
 */
#ifndef IBC_TOPO_GDR_H
#define IBC_TOPO_GDR_H

#include <stddef.h>

#include "cuda/cuda.h"
#include "ibcoll.h"

/* ---------------------------------------------------------------------- */
/* topo_gdr.c: the GPUDirect RDMA decision                               */
/* ---------------------------------------------------------------------- */

/**
 * struct ibc_gdr_facts - what decides whether a NIC may use GPUDirect RDMA
 * on a GPU's memory. Gathered by ibc_gdr_facts_probe(), or written by tests.
 * @force:        IBC_GDR: -1 auto, 0 off, 1 on (no distance check; an
 *                impossible "on" is an error).
 * @cuda:         1 when built with CUDA and the GPU is usable.
 * @dmabuf_build: 1 when ibv_reg_dmabuf_mr() and
 *                cuMemGetHandleForAddressRange() were found at configure time.
 * @dmabuf_gpu:   1 when the GPU supports dma-buf export
 *                (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED).
 * @dmabuf_nic:   1 the NIC's driver accepts dma-buf registrations, 0 it
 *                refused (EOPNOTSUPP), -1 not probed (treated as yes).
 * @peermem:      1 when nvidia_peermem (or nv_peer_mem) is loaded.
 * @dist:         enum ibc_topo_dist of the GPU-NIC path; -1 unknown (as SYS).
 * @max_dist:     the largest class IBC_NET_GDR_LEVEL allows, or
 *                IBC_TOPO_GDR_NEVER (-1) for LOC.
 */
struct ibc_gdr_facts {
	int force;
	int cuda;
	int dmabuf_build;
	int dmabuf_gpu;
	int dmabuf_nic;
	int peermem;
	int dist;
	int max_dist;
};

/**
 * ibc_gdr_decide() - The GPUDirect RDMA decision, a pure function of @f.
 * @f:       [in]  the facts.
 * @mode_p:  [out] the mode; IBC_GDR_OFF when staging.
 * @why:     [out] one line saying why (the reason for staging names the
 *                 missing piece: "nvidia_peermem not loaded", "dma-buf
 *                 unsupported by the GPU", "GPU-NIC path SYS above
 *                 IBC_NET_GDR_LEVEL PXB", "IBC_GDR=0"); may be NULL.
 * @why_len: [in]  size of @why in bytes.
 *
 * Order (NCCL's, with dma-buf preferred as in NCCL >= 2.13): IBC_GDR=0 ->
 * off; no CUDA -> off; distance above the level (unless IBC_GDR=1) -> off;
 * dma-buf usable -> DMABUF; peer memory loaded -> PEERMEM; else off.
 * Return: IBC_OK; IBC_ERR_UNSUPPORTED when IBC_GDR=1 but no mechanism
 *         exists (*@mode_p = IBC_GDR_OFF, @why says what is missing);
 *         IBC_ERR_INVALID_ARG (NULL @f or @mode_p).
 */
ibc_status_t ibc_gdr_decide(const struct ibc_gdr_facts *f, enum ibc_gdr_mode *mode_p, char *why,
			    size_t why_len);

/**
 * ibc_gdr_peermem_loaded() - Whether a peer-memory module is loaded:
 * <@sysroot>/sys/module/nvidia_peermem, <@sysroot>/sys/module/nv_peer_mem or
 * <@sysroot>/sys/kernel/mm/memory_peers/nv_mem/version exists.
 * @sysroot: [in] "" for this machine; a directory tree in tests.
 * Return: 1 loaded, 0 not.
 */
int ibc_gdr_peermem_loaded(const char *sysroot);

/**
 * ibc_gdr_facts_probe() - Gather the facts for CUDA device @dev and verbs
 * NIC @nic on this machine: IBC_GDR, the build, the GPU's dma-buf
 * attribute, the peer-memory module, the GPU-NIC distance from the shared
 * topology (src/topo, matched by the GPU's PCI bus id) and
 * IBC_NET_GDR_LEVEL.
 * @dev:        [in]  CUDA device ordinal.
 * @nic:        [in]  verbs device name ("mlx5_0").
 * @dmabuf_nic: [in]  the verbs transport's probe result (1, 0, -1).
 * @f:          [out] the facts.
 * Return: IBC_OK (a fact that cannot be read is set to its "no" value).
 */
ibc_status_t ibc_gdr_facts_probe(int dev, const char *nic, int dmabuf_nic,
				 struct ibc_gdr_facts *f);

/**
 * ibc_gdr_mode_get() - The GPUDirect RDMA mode for (@dev, @nic): probe,
 * decide, and log the decision and its reason once per pair at INFO
 * (subsystem CUDA); later calls return the cached result.
 * @dev, @nic, @dmabuf_nic: as for ibc_gdr_facts_probe().
 * @mode_p:  [out] the mode.
 * @why:     [out] the reason logged with the decision (as ibc_gdr_decide()
 *                 writes it, at most 511 characters), for the
 *                 caller's own messages; may be NULL.
 * @why_len: [in]  size of @why in bytes.
 * Threading: thread-safe. Return: as ibc_gdr_decide() (the error is logged
 *            at WARN; @why is written then too), IBC_ERR_INVALID_ARG (NULL
 *            @nic or @mode_p).
 */
ibc_status_t ibc_gdr_mode_get(int dev, const char *nic, int dmabuf_nic,
			      enum ibc_gdr_mode *mode_p, char *why, size_t why_len);

const char *ibc_gdr_mode_name(enum ibc_gdr_mode mode);

#endif /* IBC_TOPO_GDR_H */
