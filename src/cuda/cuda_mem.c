/* SPDX-License-Identifier: MIT */
/*
 * cuda_mem.c - the CUDA runtime and driver calls of ibcoll (built with
 * CUDA only; cuda.h stubs them otherwise): pointer kinds, devices, pinned
 * host memory, streams, events, copies, host functions, and the GPUDirect
 * helpers (dma-buf export, write flush).
 *
 * The runtime is linked statically (libcudart_static, like NCCL); the
 * driver library is opened with dlopen("libcuda.so.1") on first need and
 * never linked, so libibcoll loads on machines without the NVIDIA driver
 * (every buffer is then host memory and the CUDA calls fail cleanly).
 * Pointer kinds use the driver's cuPointerGetAttributes() rather than the
 * runtime's cudaPointerGetAttributes(): the runtime call initializes the
 * runtime (and may create a context, hundreds of ms and MiB of GPU memory)
 * in a process that never touched the GPU, and the driver call does not;
 * before anything initialized the driver no device memory can exist, and
 * the driver says so (CUDA_ERROR_NOT_INITIALIZED) at the cost of a call.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "base/log.h"
#include "base/util.h"
#include "cuda/cuda.h"
#include "cuda/cuda_check.h"

/* ------------------------------------------------------------------------ */
/* the driver library, opened at run time                                   */
/* ------------------------------------------------------------------------ */

static struct {
	pthread_once_t once;
	int ok;                 /* libcuda.so.1 opened and the symbols found */
	void *handle;
	PFN_cuPointerGetAttributes_v7000 pointer_get_attributes;
	PFN_cuGetErrorString_v6000 get_error_string;
	PFN_cuDeviceGet_v2000 device_get;
	PFN_cuDeviceGetAttribute_v2000 device_get_attribute;
	/* optional: the current context's device, for the topology */
	PFN_cuCtxGetCurrent_v4000 ctx_get_current;
	PFN_cuCtxGetDevice_v2000 ctx_get_device;
	PFN_cuDeviceGetPCIBusId_v4010 device_get_pci_bus_id;
#if IBC_CUDA_HAVE_DMABUF_API
	PFN_cuMemGetHandleForAddressRange_v11070 mem_get_handle_for_address_range;
#endif
} drv = { .once = PTHREAD_ONCE_INIT };

static void drv_load(void)
{
	drv.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!drv.handle) {
		IBC_LOG_DEBUG(CUDA, "no CUDA driver: %s; every buffer is host memory", dlerror());
		return;
	}
	drv.pointer_get_attributes = (PFN_cuPointerGetAttributes_v7000)dlsym(drv.handle,
									    "cuPointerGetAttributes");
	drv.get_error_string = (PFN_cuGetErrorString_v6000)dlsym(drv.handle, "cuGetErrorString");
	drv.device_get = (PFN_cuDeviceGet_v2000)dlsym(drv.handle, "cuDeviceGet");
	drv.device_get_attribute = (PFN_cuDeviceGetAttribute_v2000)dlsym(drv.handle,
									 "cuDeviceGetAttribute");
	drv.ctx_get_current = (PFN_cuCtxGetCurrent_v4000)dlsym(drv.handle, "cuCtxGetCurrent");
	drv.ctx_get_device = (PFN_cuCtxGetDevice_v2000)dlsym(drv.handle, "cuCtxGetDevice");
	drv.device_get_pci_bus_id = (PFN_cuDeviceGetPCIBusId_v4010)dlsym(drv.handle,
									"cuDeviceGetPCIBusId");
#if IBC_CUDA_HAVE_DMABUF_API
	/* absent from drivers older than CUDA 11.7: dma-buf then stays off */
	drv.mem_get_handle_for_address_range = (PFN_cuMemGetHandleForAddressRange_v11070)dlsym(
		drv.handle, "cuMemGetHandleForAddressRange");
#endif
	drv.ok = drv.pointer_get_attributes && drv.get_error_string && drv.device_get &&
		 drv.device_get_attribute;
	if (!drv.ok)
		IBC_LOG_WARN(CUDA, "libcuda.so.1 lacks cuPointerGetAttributes/cuDeviceGetAttribute: device buffers are not recognized");
}

static int drv_ready(void)
{
	static int state;       /* atomic: 0 not loaded yet, 1 usable, -1 no driver */
	int v = __atomic_load_n(&state, __ATOMIC_ACQUIRE);

	if (IBC_LIKELY(v != 0))
		return v > 0;
	pthread_once(&drv.once, drv_load);
	__atomic_store_n(&state, drv.ok ? 1 : -1, __ATOMIC_RELEASE);
	return drv.ok;
}

static const char *drv_err(CUresult r)
{
	const char *s = NULL;

	if (drv.get_error_string && drv.get_error_string(r, &s) == CUDA_SUCCESS && s)
		return s;
	return "unknown CUDA driver error";
}

int ibc_cuda_ptr_kind(const void *ptr, int *dev_p)
{
	CUpointer_attribute attrs[3] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					 CU_POINTER_ATTRIBUTE_IS_MANAGED,
					 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
	unsigned int memtype = 0;
	unsigned int managed = 0;
	int ordinal = -1;
	void *data[3] = { &memtype, &managed, &ordinal };
	CUresult r;

	if (dev_p)
		*dev_p = -1;
	if (!ptr || !drv_ready())
		return IBC_MEMKIND_HOST;
	/* unknown host pointers: CUDA_SUCCESS with zeroed attributes */
	r = drv.pointer_get_attributes(3, attrs, data, (CUdeviceptr)(uintptr_t)ptr);
	if (r != CUDA_SUCCESS) {
		if (r != CUDA_ERROR_NOT_INITIALIZED && r != CUDA_ERROR_DEINITIALIZED)
			IBC_LOG_DEBUG(CUDA, "cuPointerGetAttributes(%p): %s; taken as host memory",
				      ptr, drv_err(r));
		return IBC_MEMKIND_HOST;
	}
	if (managed) {
		if (dev_p)
			*dev_p = ordinal;
		return IBC_MEMKIND_MANAGED;
	}
	if (memtype == CU_MEMORYTYPE_DEVICE) {
		if (dev_p)
			*dev_p = ordinal;
		return IBC_MEMKIND_DEVICE;
	}
	return IBC_MEMKIND_HOST;
}

/* ------------------------------------------------------------------------ */
/* devices                                                                  */
/* ------------------------------------------------------------------------ */

#define MAX_DEVS 64

static pthread_once_t avail_once = PTHREAD_ONCE_INIT;
static int avail_count;
static int sm_counts[MAX_DEVS];         /* atomic; 0 until read */

static void avail_probe(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess) {
		IBC_LOG_INFO(CUDA, "CUDA unavailable: %s (%s)", cudaGetErrorName(e),
			     cudaGetErrorString(e));
		(void)cudaGetLastError();
		n = 0;
	}
	avail_count = n;
}

int ibc_cuda_available(void)
{
	pthread_once(&avail_once, avail_probe);
	return avail_count > 0;
}

ibc_status_t ibc_cuda_device_count(int *n_p)
{
	pthread_once(&avail_once, avail_probe);
	*n_p = avail_count;
	return IBC_OK;
}

ibc_status_t ibc_cuda_device_busid(int dev, char *buf, size_t len)
{
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaDeviceGetPCIBusId(buf, (int)len, dev), st, out);
out:
	return st;
}

int ibc_cuda_sm_count(int dev)
{
	int n;

	if (dev < 0 || dev >= MAX_DEVS)
		return 0;
	n = __atomic_load_n(&sm_counts[dev], __ATOMIC_RELAXED);
	if (n)
		return n;
	if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	__atomic_store_n(&sm_counts[dev], n, __ATOMIC_RELAXED);
	return n;
}

ibc_status_t ibc_cuda_current_busid(char *buf, size_t len)
{
	CUcontext ctx = NULL;
	CUdevice dev;
	CUresult r;

	if (!buf || len < 13)
		return IBC_ERR_INVALID_ARG;
	if (!drv_ready() || !drv.ctx_get_current || !drv.ctx_get_device ||
	    !drv.device_get_pci_bus_id)
		return IBC_ERR_UNSUPPORTED;
	/* CUDA_ERROR_NOT_INITIALIZED when the process never used CUDA */
	r = drv.ctx_get_current(&ctx);
	if (r != CUDA_SUCCESS || !ctx)
		return IBC_ERR_UNSUPPORTED;
	r = drv.ctx_get_device(&dev);
	if (r == CUDA_SUCCESS)
		r = drv.device_get_pci_bus_id(buf, (int)len, dev);
	if (r != CUDA_SUCCESS) {
		IBC_LOG_DEBUG(CUDA, "current device's PCI bus id: %s", drv_err(r));
		return IBC_ERR_UNSUPPORTED;
	}
	return IBC_OK;
}

ibc_status_t ibc_cuda_get_device(int *dev_p)
{
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaGetDevice(dev_p), st, out);
out:
	return st;
}

ibc_status_t ibc_cuda_set_device(int dev)
{
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaSetDevice(dev), st, out);
out:
	return st;
}

/* ------------------------------------------------------------------------ */
/* memory                                                                   */
/* ------------------------------------------------------------------------ */

ibc_status_t ibc_cuda_host_alloc(size_t nbytes, void **p_p)
{
	ibc_status_t st = IBC_OK;
	void *p = NULL;

	IBC_CUDA_CHECK_GOTO(cudaHostAlloc(&p, nbytes, cudaHostAllocPortable), st, out);
	*p_p = p;
out:
	return st;
}

void ibc_cuda_host_free(void *p)
{
	ibc_status_t st = IBC_OK;

	if (!p)
		return;
	IBC_CUDA_CHECK_GOTO(cudaFreeHost(p), st, out);
out:
	(void)st;
}

ibc_status_t ibc_cuda_dev_alloc(size_t nbytes, void **p_p)
{
	ibc_status_t st = IBC_OK;
	void *p = NULL;

	IBC_CUDA_CHECK_GOTO(cudaMalloc(&p, nbytes), st, out);
	*p_p = p;
out:
	return st;
}

void ibc_cuda_dev_free(void *p)
{
	ibc_status_t st = IBC_OK;

	if (!p)
		return;
	IBC_CUDA_CHECK_GOTO(cudaFree(p), st, out);
out:
	(void)st;
}

/* ------------------------------------------------------------------------ */
/* streams, events, copies                                                  */
/* ------------------------------------------------------------------------ */

ibc_status_t ibc_cuda_stream_create(void **stream_p)
{
	ibc_status_t st = IBC_OK;
	cudaStream_t s;

	IBC_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), st, out);
	*stream_p = s;
out:
	return st;
}

void ibc_cuda_stream_destroy(void *stream)
{
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaStreamDestroy((cudaStream_t)stream), st, out);
out:
	(void)st;
}

/* poll @query until it stops answering cudaErrorNotReady; bounded */
static ibc_status_t poll_ready(cudaError_t (*query)(void *), void *obj, const char *what)
{
	uint64_t start = ibc_time_ms();
	unsigned spins = 0;

	for (;;) {
		cudaError_t e = query(obj);

		if (e == cudaSuccess)
			return IBC_OK;
		if (e != cudaErrorNotReady) {
			IBC_LOG_WARN(CUDA, "%s failed: %s (%s)", what, cudaGetErrorName(e),
				     cudaGetErrorString(e));
			(void)cudaGetLastError();
			return IBC_ERR_CUDA;
		}
		if (ibc_time_ms() - start > 600000u) {
			IBC_LOG_WARN(CUDA, "%s: still not done after 600 s", what);
			return IBC_ERR_TIMEOUT;
		}
		if (++spins > 1000)
			usleep(50);
	}
}

static cudaError_t stream_query(void *s)
{
	return cudaStreamQuery((cudaStream_t)s);
}

ibc_status_t ibc_cuda_stream_sync(void *stream)
{
	return poll_ready(stream_query, stream, "cudaStreamQuery");
}

ibc_status_t ibc_cuda_event_create(void **event_p)
{
	ibc_status_t st = IBC_OK;
	cudaEvent_t e;

	IBC_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), st, out);
	*event_p = e;
out:
	return st;
}

void ibc_cuda_event_destroy(void *event)
{
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaEventDestroy((cudaEvent_t)event), st, out);
out:
	(void)st;
}

ibc_status_t ibc_cuda_event_record(void *event, void *stream)
{
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream), st, out);
out:
	return st;
}

ibc_status_t ibc_cuda_event_query(void *event)
{
	cudaError_t e = cudaEventQuery((cudaEvent_t)event);

	if (e == cudaSuccess)
		return IBC_OK;
	if (e == cudaErrorNotReady)
		return IBC_INPROGRESS;
	IBC_LOG_WARN(CUDA, "cudaEventQuery failed: %s (%s)", cudaGetErrorName(e),
		     cudaGetErrorString(e));
	(void)cudaGetLastError();
	return IBC_ERR_CUDA;
}

/* the largest row pitch cudaMemcpy2DAsync takes (cudaDevAttrMaxPitch is 2^31 - 1 today) */
#define MAX_PITCH ((size_t)INT32_MAX)

ibc_status_t ibc_cuda_memcpy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	ibc_status_t st = IBC_OK;
	size_t i;

	if (height == 1) {
		/* contiguous: no pitch limit */
		IBC_CUDA_CHECK_GOTO(cudaMemcpyAsync(dst, src, width, cudaMemcpyDefault, s), st,
				    out);
	} else if (dpitch <= MAX_PITCH && spitch <= MAX_PITCH) {
		IBC_CUDA_CHECK_GOTO(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height,
						      cudaMemcpyDefault, s),
				    st, out);
	} else {
		/* blocks of more than 2 GiB: one copy per row */
		for (i = 0; i < height; i++)
			IBC_CUDA_CHECK_GOTO(cudaMemcpyAsync((char *)dst + i * dpitch,
							    (const char *)src + i * spitch, width,
							    cudaMemcpyDefault, s),
					    st, out);
	}
out:
	return st;
}

ibc_status_t ibc_cuda_memcpy(void *dst, const void *src, size_t nbytes)
{
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault), st, out);
out:
	return st;
}

ibc_status_t ibc_cuda_memset(void *dst, int value, size_t nbytes)
{
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaMemset(dst, value, nbytes), st, out);
out:
	return st;
}

ibc_status_t ibc_cuda_device_sync(void)
{
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaDeviceSynchronize(), st, out);
out:
	return st;
}

ibc_status_t ibc_cuda_launch_host_func(void *stream, void (*fn)(void *), void *arg)
{
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaLaunchHostFunc((cudaStream_t)stream, fn, arg), st, out);
out:
	return st;
}

/* ------------------------------------------------------------------------ */
/* GPUDirect RDMA helpers                                                   */
/* ------------------------------------------------------------------------ */

ibc_status_t ibc_cuda_ptr_alloc(const void *ptr, uintptr_t *base_p, size_t *nbytes_p,
				uint64_t *buffer_id_p)
{
	unsigned long long id = 0;
	CUdeviceptr base = 0;
	size_t size = 0;
	CUresult r;

	if (!ptr || !base_p || !nbytes_p || !buffer_id_p)
		return IBC_ERR_INVALID_ARG;
	if (!drv_ready())
		return IBC_ERR_UNSUPPORTED;
	/*
	 * One cuPointerGetAttributes() for the id and the range together: it
	 * needs no current context (cuMemGetAddressRange() does, and the
	 * executor's threads usually have none), and the three are read at one
	 * moment (not an id of one allocation and the range of the next).
	 */
	r = drv.pointer_get_attributes(3, (CUpointer_attribute[]){ CU_POINTER_ATTRIBUTE_BUFFER_ID,
								  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
								  CU_POINTER_ATTRIBUTE_RANGE_SIZE },
				       (void *[]){ &id, &base, &size }, (CUdeviceptr)(uintptr_t)ptr);
	if (r != CUDA_SUCCESS || !id || !size) {
		/* freed since, or never CUDA memory: not an allocation */
		IBC_LOG_DEBUG(CUDA, "allocation of %p (buffer id and range attributes): %s", ptr,
			      r != CUDA_SUCCESS ? drv_err(r) : "no CUDA allocation");
		return IBC_ERR_CUDA;
	}
	*base_p = (uintptr_t)base;
	*nbytes_p = size;
	*buffer_id_p = id;
	return IBC_OK;
}


ibc_status_t ibc_cuda_dmabuf_supported(int dev, int *yes_p)
{
	CUdevice cudev;
	CUresult r;
	int v = 0;

	*yes_p = 0;
	if (!drv_ready() || !ibc_cuda_available())
		return IBC_ERR_UNSUPPORTED;
	r = drv.device_get(&cudev, dev);
	if (r == CUDA_SUCCESS)
		r = drv.device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, cudev);
	if (r != CUDA_SUCCESS) {
		IBC_LOG_DEBUG(CUDA, "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED of device %d: %s", dev,
			      drv_err(r));
		return IBC_OK;
	}
	*yes_p = v != 0;
	return IBC_OK;
}

ibc_status_t ibc_cuda_dmabuf_fd(const void *ptr, size_t nbytes, int *fd_p, uint64_t *offset_p)
{
#if IBC_CUDA_HAVE_DMABUF_API
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)ptr & ~(uintptr_t)(page - 1);
	uintptr_t hi = IBC_ALIGN_UP((uintptr_t)ptr + nbytes, page);
	int fd = -1;
	CUresult r;

	if (!nbytes || !fd_p || !offset_p)
		return IBC_ERR_INVALID_ARG;
	if (!drv_ready() || !drv.mem_get_handle_for_address_range)
		return IBC_ERR_UNSUPPORTED;
	r = drv.mem_get_handle_for_address_range(&fd, (CUdeviceptr)lo, hi - lo,
						 CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	if (r != CUDA_SUCCESS) {
		IBC_LOG_WARN(CUDA, "cuMemGetHandleForAddressRange(%p, %zu bytes) failed: %s",
			     (void *)lo, (size_t)(hi - lo), drv_err(r));
		return IBC_ERR_CUDA;
	}
	*fd_p = fd;
	*offset_p = (uint64_t)((uintptr_t)ptr - lo);
	return IBC_OK;
#else
	(void)ptr;
	(void)nbytes;
	(void)fd_p;
	(void)offset_p;
	return IBC_ERR_UNSUPPORTED;
#endif
}

ibc_status_t ibc_cuda_gdr_flush(void)
{
#if IBC_CUDA_HAVE_GDR_FLUSH
	ibc_status_t st = IBC_OK;

	IBC_CUDA_CHECK_GOTO(cudaDeviceFlushGPUDirectRDMAWrites(
				    cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
				    cudaFlushGPUDirectRDMAWritesToOwner),
			    st, out);
out:
	return st;
#else
	return IBC_ERR_UNSUPPORTED;
#endif
}
