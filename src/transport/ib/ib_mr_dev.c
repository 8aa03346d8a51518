/* SPDX-License-Identifier: MIT */
/*
 * ib_mr_dev.c - CUDA device memory for the verbs registration cache
 * (ib_mr.c): the backend's device callbacks over cuda.h (memory kind,
 * allocation range, buffer id), topo_gdr.h (the GPUDirect mode of a GPU
 * and this context's NIC: IBC_GDR, IBC_NET_GDR_LEVEL) and ib_gdr.h (dma-buf
 * or peer-memory registration), and the probe at context creation that
 * decides whether the context advertises IBC_TCAP_CUDA. Built with verbs;
 * without CUDA the stubs of cuda.h and ib_gdr.h make every buffer host
 * memory and the probe report "built without CUDA". The executor keeps
 * staging every device buffer (src/api/cuda_stage.c): moving device
 * buffers NIC-to-GPU without staging is the next step and is not built.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "cuda/cuda.h"
#include "topo/topo_gdr.h"
#include "transport/ib/ib.h"
#include "transport/ib/ib_gdr.h"

#define IB_GDR_PROBE_BYTES (2u << 20)  /* one GPU page: what peer memory pins at least */
#define IB_DMABUF_UNPROBED (-2)        /* ctx->dmabuf_nic before the first need */

/**
 * ibc_ib_mr_dev_backend() - Add the device callbacks to the verbs backend
 * of @ctx's registration cache.
 * @ctx: [in,out] the context: its PD, device name and dma-buf probe state
 *       (set to "not probed yet"); the callbacks get it as their arg.
 * @be:  [in,out] the backend; be->arg must be @ctx.
 * Threading: before the cache is used.
 */
void ibc_ib_mr_dev_backend(struct ibc_ib_ctx *ctx, struct ibc_ib_mr_backend *be)
{
	ctx->dmabuf_nic = IB_DMABUF_UNPROBED;
	be->mem_query = ibc_ib_mr_dev_query;
	be->gdr_mode = ibc_ib_mr_dev_gdr_mode;
	be->reg_dev = ibc_ib_mr_dev_reg;
}

/**
 * ibc_ib_mr_dev_query() - The mem_query callback: the kind of a range and,
 * for device or managed memory, its CUDA allocation.
 * @arg:    [in]  the context (unused).
 * @addr:   [in]  start of the range.
 * @nbytes: [in]  bytes (unused: a range lies in one allocation).
 * @mem_p:  [out] kind, device ordinal, allocation start and size, buffer id
 *                (cleared first).
 * Cost: one cuPointerGetAttributes() for host memory (none without a
 * driver), two more driver calls for device memory; creates no context.
 * Threading: any thread. Return: 0; EFAULT when @addr is device memory
 * whose allocation cannot be read.
 */
int ibc_ib_mr_dev_query(void *arg, const void *addr, size_t nbytes, struct ibc_ib_mr_mem *mem_p)
{
	uint64_t id = 0;
	uintptr_t base = 0;
	size_t size = 0;

	(void)arg;
	(void)nbytes;
	memset(mem_p, 0, sizeof(*mem_p));
	mem_p->kind = ibc_cuda_ptr_kind(addr, &mem_p->dev);
	if (mem_p->kind == IBC_MEMKIND_HOST)
		return 0;
	if (ibc_cuda_ptr_alloc(addr, &base, &size, &id) != IBC_OK)
		return EFAULT;
	mem_p->base = base;
	mem_p->nbytes = size;
	mem_p->buffer_id = id;
	return 0;
}

/**
 * ibc_ib_mr_dev_gdr_mode() - The gdr_mode callback: ibc_gdr_mode_get() for
 * CUDA device @dev and the context's NIC, probing the NIC's dma-buf support
 * (ibc_cuda_ib_dmabuf_probe()) on first use.
 * @arg:     [in]  struct ibc_ib_ctx *.
 * @dev:     [in]  CUDA device ordinal.
 * @mode_p:  [out] enum ibc_gdr_mode; IBC_GDR_OFF when staging.
 * @why:     [out] the reason of the decision; may be NULL.
 * @why_len: [in]  size of @why, bytes.
 * Threading: under the cache's mutex (or before the context is shared);
 * the decision is logged once per (GPU, NIC) at INFO by ibc_gdr_mode_get().
 * Return: as ibc_gdr_mode_get(): IBC_OK; IBC_ERR_UNSUPPORTED when IBC_GDR=1
 *         cannot be honoured (*@mode_p IBC_GDR_OFF).
 */
ibc_status_t ibc_ib_mr_dev_gdr_mode(void *arg, int dev, enum ibc_gdr_mode *mode_p, char *why,
				   size_t why_len)
{
	struct ibc_ib_ctx *ctx = arg;

	if (ctx->dmabuf_nic == IB_DMABUF_UNPROBED)
		ctx->dmabuf_nic = ctx->pd ? ibc_cuda_ib_dmabuf_probe(ctx->pd) : -1;
	return ibc_gdr_mode_get(dev, ctx->dev_name, ctx->dmabuf_nic, mode_p, why, why_len);
}

/**
 * ibc_ib_mr_dev_reg() - The reg_dev callback: ibc_cuda_ib_reg_mr() of
 * device memory on the context's PD.
 * @arg:      [in]  struct ibc_ib_ctx *.
 * @addr:     [in]  device memory (the start of a CUDA allocation).
 * @nbytes:   [in]  bytes (the allocation's size).
 * @writable: [in]  1: local write + remote write access; 0: read only.
 * @mode:     [in]  IBC_GDR_DMABUF or IBC_GDR_PEERMEM.
 * @lkey_p, @rkey_p, @handle_p: [out] keys and the struct ibv_mr * (freed by
 *            ibc_ib_mr_verbs_dereg()), on success.
 * Blocking: pins GPU memory (tens of us and more). Threading: any thread.
 * Return: 0; EOPNOTSUPP (mode off or not built); EFAULT (CUDA refused the
 *         dma-buf export); the errno of the verbs call, else EIO.
 */
int ibc_ib_mr_dev_reg(void *arg, void *addr, size_t nbytes, int writable, enum ibc_gdr_mode mode,
		      uint32_t *lkey_p, uint32_t *rkey_p, void **handle_p)
{
	struct ibc_ib_ctx *ctx = arg;
	int access = writable ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : 0;
	struct ibv_mr *mr = NULL;
	ibc_status_t st;

	errno = 0;
	st = ibc_cuda_ib_reg_mr(ctx->pd, addr, nbytes, access, mode, &mr);
	if (st == IBC_ERR_UNSUPPORTED || st == IBC_ERR_INVALID_ARG)
		return EOPNOTSUPP;
	if (st == IBC_ERR_CUDA)
		return EFAULT;
	if (st != IBC_OK)
		return errno ? errno : EIO;
	*lkey_p = mr->lkey;
	*rkey_p = mr->rkey;
	*handle_p = mr;
	return 0;
}

/*
 * the probe registration itself: 2 MiB of device memory on @dev through the
 * backend's callbacks, in @mode, then released; IBC_OK when it worked
 */
static ibc_status_t gdr_probe_reg(struct ibc_ib_ctx *ctx, enum ibc_gdr_mode mode, char *why,
				  size_t why_len)
{
	struct ibc_ib_mr_mem mem;
	uint32_t lkey;
	uint32_t rkey;
	void *handle = NULL;
	void *p = NULL;
	ibc_status_t st;
	int ret;

	st = ibc_cuda_dev_alloc(IB_GDR_PROBE_BYTES, &p);
	if (st != IBC_OK) {
		snprintf(why, why_len, "cannot allocate %u bytes of device memory: %s",
			 IB_GDR_PROBE_BYTES, ibc_status_str(st));
		return st;
	}
	ret = ibc_ib_mr_dev_query(ctx, p, IB_GDR_PROBE_BYTES, &mem);
	if (!ret && mem.kind == IBC_MEMKIND_HOST)
		ret = EINVAL;
	if (!ret)
		ret = ibc_ib_mr_dev_reg(ctx, (void *)mem.base, mem.nbytes, 1, mode, &lkey, &rkey,
					&handle);
	if (ret) {
		snprintf(why, why_len, "%s registration of %u bytes of device memory failed: %s",
			 ibc_gdr_mode_name(mode), IB_GDR_PROBE_BYTES, strerror(ret));
		st = IBC_ERR_VERBS;
	} else {
		ret = ibc_ib_mr_verbs_dereg(ctx, handle);
		if (ret)
			IBC_LOG_WARN(IB, "ib: %s: deregistration of the GPUDirect probe failed: %s",
				     ctx->dev_name, strerror(ret));
	}
	ibc_cuda_dev_free(p);
	return st;
}

/**
 * ibc_ib_ctx_gdr_probe() - Decide whether @ctx advertises IBC_TCAP_CUDA: a
 * real registration of device memory (2 MiB on the calling thread's current
 * CUDA device, in the mode ibc_gdr_mode_get() gives for it and this NIC)
 * must succeed. Logs the decision once at INFO (subsystem IB) with the mode
 * and the reason.
 * @ctx: [in,out] the context, with its PD and cache set up; IBC_TCAP_CUDA
 *       is added to ctx->caps on success.
 *
 * Only a process that already has a current CUDA context is probed
 * (ibc_cuda_current_busid()): a host-only process never initializes CUDA
 * because of the verbs transport. Without CUDA (the build or the machine)
 * the answer is always no. Blocking: a cudaMalloc, a registration and a
 * cudaFree when probed. Threading: at context creation, before the
 * context is shared. Never fails: every failure means "no IBC_TCAP_CUDA".
 */
void ibc_ib_ctx_gdr_probe(struct ibc_ib_ctx *ctx)
{
	enum ibc_gdr_mode mode = IBC_GDR_OFF;
	char why[256] = "";
	char busid[32];
	int dev = -1;

	/* a host-only process (the usual case on a CPU cluster): DEBUG, not INFO */
	if (!IBC_CUDA_BUILT) {
		IBC_LOG_DEBUG(IB, "ib: %s: device memory not advertised (GPUDirect RDMA off): built without CUDA",
			      ctx->dev_name);
		return;
	}
	if (ibc_cuda_current_busid(busid, sizeof(busid)) != IBC_OK ||
	    ibc_cuda_get_device(&dev) != IBC_OK) {
		IBC_LOG_DEBUG(IB, "ib: %s: device memory not advertised (GPUDirect RDMA not probed): no current CUDA context on this thread",
			      ctx->dev_name);
		return;
	}
	ibc_ib_mr_dev_gdr_mode(ctx, dev, &mode, why, sizeof(why));
	if (mode != IBC_GDR_DMABUF && mode != IBC_GDR_PEERMEM) {
		IBC_LOG_INFO(IB, "ib: %s: device memory not advertised (GPUDirect RDMA off for CUDA device %d, %s): %s",
			     ctx->dev_name, dev, busid, why);
		return;
	}
	if (gdr_probe_reg(ctx, mode, why, sizeof(why)) != IBC_OK) {
		IBC_LOG_INFO(IB, "ib: %s: device memory not advertised (GPUDirect RDMA %s for CUDA device %d, %s, but the probe failed): %s",
			     ctx->dev_name, ibc_gdr_mode_name(mode), dev, busid, why);
		return;
	}
	ctx->caps |= IBC_TCAP_CUDA;
	IBC_LOG_INFO(IB, "ib: %s: device memory advertised (GPUDirect RDMA %s, probe of %u bytes on CUDA device %d, %s registered): %s; device buffers are still staged through host memory",
		     ctx->dev_name, ibc_gdr_mode_name(mode), IB_GDR_PROBE_BYTES, dev, busid, why);
}
