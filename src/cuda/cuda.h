/* SPDX-License-Identifier: MIT */
/*
 * Layer cuda (src/cuda/, above base): device memory and the CUDA runtime,
 * the GPU reduction kernels; stubs without CUDA.
 *
 * cuda.h - ibcoll's internal CUDA interface: memory kinds of user buffers,
 * pinned staging memory, streams and events, the GPU reduction kernels, the
 * GPUDirect RDMA decision and device-memory registration for the verbs
 * transport, and the staged execution of operations on device buffers.
 *
 * This is the ONE place that tests HAVE_CUDA (STYLE C8): without CUDA every
 * function of cuda_mem.c and cuda_reduce.cu below is a static inline stub
 * that answers "host memory" or returns IBC_ERR_UNSUPPORTED, so .c files
 * call this API without #ifdef. The parts that need no CUDA toolkit (the
 * staged pipeline, the GPUDirect decision, the stream-ordered entry points)
 * always build. See docs/cuda.md for the design.
 *
 * Handles of CUDA objects (streams, events) cross this header as void *
 * (cudaStream_t and cudaEvent_t are pointers), so that C files never need
 * the CUDA headers. Plain C and C++ (nvcc) both include it.
 */
#ifndef IBC_CUDA_H
#define IBC_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "ibcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * enum ibc_cuda_memkind - where a user buffer lives.
 * @IBC_MEMKIND_HOST:    host memory (pageable, pinned or registered): the
 *                       CPU reads it directly; the zero-overhead path.
 * @IBC_MEMKIND_DEVICE:  CUDA device memory (cudaMalloc, cuMemCreate maps).
 * @IBC_MEMKIND_MANAGED: CUDA managed memory; treated as device memory (the
 *                       staged copies never fault pages back to the host).
 */
enum ibc_cuda_memkind {
	IBC_MEMKIND_HOST = 0,
	IBC_MEMKIND_DEVICE = 1,
	IBC_MEMKIND_MANAGED = 2,
	IBC_MEMKIND_COUNT
};

/* operation flags (struct ibc_op.cuda_flags), set by ibc_cuda_op_classify() */
#define IBC_CUDA_REQ_SEND_DEV 0x1u  /* sendbuf is device/managed memory */
#define IBC_CUDA_REQ_RECV_DEV 0x2u  /* recvbuf is device/managed memory */
#define IBC_CUDA_REQ_EMULATED 0x4u  /* device buffers are test fakes (host copier) */
#define IBC_CUDA_REQ_GATED    0x8u  /* stream-ordered: waits for its stream (cuda_gate) */

/**
 * enum ibc_gdr_mode - how a NIC reaches device memory.
 * @IBC_GDR_OFF:     no GPUDirect RDMA: device buffers are staged through
 *                   pinned host memory.
 * @IBC_GDR_PEERMEM: ibv_reg_mr() on device pointers, which the
 *                   nvidia_peermem kernel module (or the legacy nv_peer_mem)
 *                   makes work.
 * @IBC_GDR_DMABUF:  ibv_reg_dmabuf_mr() on a dma-buf file descriptor from
 *                   cuMemGetHandleForAddressRange() (Linux >= 5.12, CUDA >=
 *                   11.7, a NIC driver with dma-buf support).
 */
enum ibc_gdr_mode {
	IBC_GDR_OFF = 0,
	IBC_GDR_PEERMEM = 1,
	IBC_GDR_DMABUF = 2,
	IBC_GDR_MODE_COUNT
};

/* ---------------------------------------------------------------------- */
/* built with CUDA: cuda_mem.c (runtime and driver) and cuda_reduce.cu     */
/* ---------------------------------------------------------------------- */

#ifdef HAVE_CUDA

#define IBC_CUDA_BUILT 1

/**
 * ibc_cuda_available() - Whether the CUDA runtime works and sees at least
 * one device (checked once; initializes the runtime). Return: 1 or 0.
 */
int ibc_cuda_available(void);

/**
 * ibc_cuda_ptr_kind() - Memory kind of @ptr (enum ibc_cuda_memkind).
 * @ptr:   [in]  any address; NULL is host.
 * @dev_p: [out] device ordinal of device/managed memory (-1 for host); may be NULL.
 *
 * Uses the driver's cuPointerGetAttributes(), which neither initializes
 * CUDA nor creates a context: before the process has initialized the
 * driver every pointer is host memory (none other can exist).
 * Threading: thread-safe. Never fails (errors mean host, logged at DEBUG).
 */
int ibc_cuda_ptr_kind(const void *ptr, int *dev_p);

/* device count (0 without a driver) and the PCI bus id "0000:1b:00.0" of @dev */
ibc_status_t ibc_cuda_device_count(int *n_p);
ibc_status_t ibc_cuda_device_busid(int dev, char *buf, size_t len);
/* number of SMs of @dev (cached); 0 when unknown */
int ibc_cuda_sm_count(int dev);
/**
 * ibc_cuda_current_busid() - PCI bus id ("0000:1B:00.0") of the device of the
 * calling thread's current CUDA context, through the driver (cuCtxGetCurrent,
 * cuCtxGetDevice, cuDeviceGetPCIBusId): creates no context and does not
 * initialize CUDA, so a process that has not picked a GPU has none.
 * @buf: [out] the bus id, NUL-terminated.
 * @len: [in]  size of @buf, >= 13 bytes (16 suffices).
 * Return: IBC_OK; IBC_ERR_UNSUPPORTED (no driver, no current context, or
 *         the driver refused; nothing logged above DEBUG);
 *         IBC_ERR_INVALID_ARG.
 */
ibc_status_t ibc_cuda_current_busid(char *buf, size_t len);
/* the calling thread's current device (cudaGetDevice), and make @dev current (cudaSetDevice) */
ibc_status_t ibc_cuda_get_device(int *dev_p);
ibc_status_t ibc_cuda_set_device(int dev);

/* pinned host memory (cudaHostAlloc, portable), device memory (tests) */
ibc_status_t ibc_cuda_host_alloc(size_t nbytes, void **p_p);
void ibc_cuda_host_free(void *p);
ibc_status_t ibc_cuda_dev_alloc(size_t nbytes, void **p_p);
void ibc_cuda_dev_free(void *p);

/* streams (non-blocking w.r.t. the legacy default stream) and events (timing off) */
ibc_status_t ibc_cuda_stream_create(void **stream_p);
void ibc_cuda_stream_destroy(void *stream);
ibc_status_t ibc_cuda_stream_sync(void *stream);
ibc_status_t ibc_cuda_event_create(void **event_p);
void ibc_cuda_event_destroy(void *event);
ibc_status_t ibc_cuda_event_record(void *event, void *stream);
/* IBC_OK when everything before the event finished, IBC_INPROGRESS if not, or IBC_ERR_CUDA */
ibc_status_t ibc_cuda_event_query(void *event);

/*
 * ibc_cuda_memcpy2d_async() - copy @height rows of @width bytes, rows
 * @dpitch/@spitch bytes apart, on @stream, any direction (cudaMemcpyDefault):
 * one cudaMemcpyAsync for one row, else cudaMemcpy2DAsync, else (pitches
 * above 2 GiB) one cudaMemcpyAsync per row.
 */
ibc_status_t ibc_cuda_memcpy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, void *stream);
/* synchronous cudaMemcpy(cudaMemcpyDefault) and cudaMemset, for tests */
ibc_status_t ibc_cuda_memcpy(void *dst, const void *src, size_t nbytes);
ibc_status_t ibc_cuda_memset(void *dst, int value, size_t nbytes);
/* cudaDeviceSynchronize on the current device (tests, benchmarks) */
ibc_status_t ibc_cuda_device_sync(void);

/* cudaLaunchHostFunc: @fn(@arg) runs after the work queued on @stream so far */
ibc_status_t ibc_cuda_launch_host_func(void *stream, void (*fn)(void *), void *arg);

/**
 * ibc_cuda_ptr_alloc() - The CUDA allocation that holds device pointer
 * @ptr: its range (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR/_SIZE) and its buffer id
 * (CU_POINTER_ATTRIBUTE_BUFFER_ID, unique over the process's lifetime: an
 * allocation made after a cudaFree() at the same address has another id).
 * @ptr:         [in]  device or managed memory.
 * @base_p:      [out] start of the allocation (<= @ptr).
 * @nbytes_p:    [out] its size, bytes.
 * @buffer_id_p: [out] its buffer id, never 0.
 *
 * One cuPointerGetAttributes() (needs no current context, reads the three
 * at one moment); creates no context.
 * Threading: thread-safe. Outputs are written only on success.
 * Return: IBC_OK; IBC_ERR_CUDA when @ptr is no (longer a) CUDA allocation
 *         (logged at DEBUG only: callers use this to see memory freed);
 *         IBC_ERR_UNSUPPORTED (no driver);
 *         IBC_ERR_INVALID_ARG.
 */
ibc_status_t ibc_cuda_ptr_alloc(const void *ptr, uintptr_t *base_p, size_t *nbytes_p,
				uint64_t *buffer_id_p);

/* GPUDirect helpers: dma-buf export support of @dev, and a dma-buf fd for a range */
ibc_status_t ibc_cuda_dmabuf_supported(int dev, int *yes_p);
/**
 * ibc_cuda_dmabuf_fd() - A dma-buf file descriptor covering the device
 * range [@ptr, @ptr + @nbytes), from cuMemGetHandleForAddressRange() on the
 * enclosing host-page-aligned range (the call requires page alignment).
 * @ptr:      [in]  device memory of one allocation.
 * @nbytes:   [in]  bytes, > 0.
 * @fd_p:     [out] the fd; the caller closes it (after ibv_reg_dmabuf_mr()).
 * @offset_p: [out] offset of @ptr inside the dma-buf, bytes.
 * Return: IBC_OK; IBC_ERR_UNSUPPORTED (driver or build lacks the call);
 *         IBC_ERR_CUDA (logged).
 */
ibc_status_t ibc_cuda_dmabuf_fd(const void *ptr, size_t nbytes, int *fd_p, uint64_t *offset_p);
/*
 * ibc_cuda_gdr_flush() - make NIC writes into the current device's memory
 * visible to later work of this device (cudaDeviceFlushGPUDirectRDMAWrites,
 * to owner); IBC_ERR_UNSUPPORTED when the runtime lacks it, in which case
 * the verbs transport flushes with an RDMA read (see docs/cuda.md).
 */
ibc_status_t ibc_cuda_gdr_flush(void);

/*
 * GPU reduction kernels (cuda_reduce.cu): the semantics of src/coll/reduce.h
 * on device memory, enqueued on @stream (NULL = legacy default stream) of
 * the current device; every dtype and op; 16-bit floats are computed in
 * fp32 and rounded once, to nearest even. Return IBC_OK once launched;
 * IBC_ERR_CUDA (launch error, logged); IBC_ERR_INVALID_ARG (dtype/op).
 */
ibc_status_t ibc_cuda_reduce3(void *dst, const void *a, const void *b, size_t count,
			      ibc_dtype_t dtype, ibc_redop_t op, void *stream);
ibc_status_t ibc_cuda_avg_finalize(void *buf, size_t count, ibc_dtype_t dtype, int n,
				   void *stream);
/*
 * tests: run the kernels' code on the CPU over @nthreads virtual threads
 * (the same element functions, packing, alignment peeling and grid-stride
 * loops as on the device) on host buffers.
 */
ibc_status_t ibc_cuda_reduce3_emulate(void *dst, const void *a, const void *b, size_t count,
				      ibc_dtype_t dtype, ibc_redop_t op, size_t nthreads);
ibc_status_t ibc_cuda_avg_finalize_emulate(void *buf, size_t count, ibc_dtype_t dtype, int n,
					   size_t nthreads);

#else /* !HAVE_CUDA: stubs */

#define IBC_CUDA_BUILT 0
/* include/ibcoll_cuda.h then declares cudaStream_t itself (no CUDA headers) */
#define IBC_CUDA_NO_RUNTIME_HEADER 1

static inline int ibc_cuda_available(void)
{
	return 0;
}

static inline int ibc_cuda_ptr_kind(const void *ptr, int *dev_p)
{
	(void)ptr;
	if (dev_p)
		*dev_p = -1;
	return IBC_MEMKIND_HOST;
}

static inline ibc_status_t ibc_cuda_device_count(int *n_p)
{
	*n_p = 0;
	return IBC_OK;
}

static inline ibc_status_t ibc_cuda_device_busid(int dev, char *buf, size_t len)
{
	(void)dev;
	(void)buf;
	(void)len;
	return IBC_ERR_UNSUPPORTED;
}

static inline int ibc_cuda_sm_count(int dev)
{
	(void)dev;
	return 0;
}

static inline ibc_status_t ibc_cuda_current_busid(char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_get_device(int *dev_p)
{
	*dev_p = -1;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_set_device(int dev)
{
	(void)dev;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_host_alloc(size_t nbytes, void **p_p)
{
	(void)nbytes;
	(void)p_p;
	return IBC_ERR_UNSUPPORTED;
}

static inline void ibc_cuda_host_free(void *p)
{
	(void)p;
}

static inline ibc_status_t ibc_cuda_dev_alloc(size_t nbytes, void **p_p)
{
	(void)nbytes;
	(void)p_p;
	return IBC_ERR_UNSUPPORTED;
}

static inline void ibc_cuda_dev_free(void *p)
{
	(void)p;
}

static inline ibc_status_t ibc_cuda_stream_create(void **stream_p)
{
	(void)stream_p;
	return IBC_ERR_UNSUPPORTED;
}

static inline void ibc_cuda_stream_destroy(void *stream)
{
	(void)stream;
}

static inline ibc_status_t ibc_cuda_stream_sync(void *stream)
{
	(void)stream;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_event_create(void **event_p)
{
	(void)event_p;
	return IBC_ERR_UNSUPPORTED;
}

static inline void ibc_cuda_event_destroy(void *event)
{
	(void)event;
}

static inline ibc_status_t ibc_cuda_event_record(void *event, void *stream)
{
	(void)event;
	(void)stream;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_event_query(void *event)
{
	(void)event;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_memcpy2d_async(void *dst, size_t dpitch, const void *src,
						   size_t spitch, size_t width, size_t height,
						   void *stream)
{
	(void)dst;
	(void)dpitch;
	(void)src;
	(void)spitch;
	(void)width;
	(void)height;
	(void)stream;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_memcpy(void *dst, const void *src, size_t nbytes)
{
	(void)dst;
	(void)src;
	(void)nbytes;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_memset(void *dst, int value, size_t nbytes)
{
	(void)dst;
	(void)value;
	(void)nbytes;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_device_sync(void)
{
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_launch_host_func(void *stream, void (*fn)(void *), void *arg)
{
	(void)stream;
	(void)fn;
	(void)arg;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_ptr_alloc(const void *ptr, uintptr_t *base_p,
					      size_t *nbytes_p, uint64_t *buffer_id_p)
{
	(void)ptr;
	(void)base_p;
	(void)nbytes_p;
	(void)buffer_id_p;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_dmabuf_supported(int dev, int *yes_p)
{
	(void)dev;
	*yes_p = 0;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_dmabuf_fd(const void *ptr, size_t nbytes, int *fd_p,
					      uint64_t *offset_p)
{
	(void)ptr;
	(void)nbytes;
	(void)fd_p;
	(void)offset_p;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_gdr_flush(void)
{
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_reduce3(void *dst, const void *a, const void *b, size_t count,
					    ibc_dtype_t dtype, ibc_redop_t op, void *stream)
{
	(void)dst;
	(void)a;
	(void)b;
	(void)count;
	(void)dtype;
	(void)op;
	(void)stream;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_avg_finalize(void *buf, size_t count, ibc_dtype_t dtype,
						 int n, void *stream)
{
	(void)buf;
	(void)count;
	(void)dtype;
	(void)n;
	(void)stream;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_reduce3_emulate(void *dst, const void *a, const void *b,
						    size_t count, ibc_dtype_t dtype,
						    ibc_redop_t op, size_t nthreads)
{
	(void)dst;
	(void)a;
	(void)b;
	(void)count;
	(void)dtype;
	(void)op;
	(void)nthreads;
	return IBC_ERR_UNSUPPORTED;
}

static inline ibc_status_t ibc_cuda_avg_finalize_emulate(void *buf, size_t count,
							 ibc_dtype_t dtype, int n, size_t nthreads)
{
	(void)buf;
	(void)count;
	(void)dtype;
	(void)n;
	(void)nthreads;
	return IBC_ERR_UNSUPPORTED;
}

#endif /* HAVE_CUDA */

/* dma-buf registration API of the CUDA driver present at build time */
#if defined(HAVE_CUDA) && defined(HAVE_DECL_CUMEMGETHANDLEFORADDRESSRANGE) && \
	HAVE_DECL_CUMEMGETHANDLEFORADDRESSRANGE
#define IBC_CUDA_HAVE_DMABUF_API 1
#else
#define IBC_CUDA_HAVE_DMABUF_API 0
#endif
/* cudaDeviceFlushGPUDirectRDMAWrites() present at build time (CUDA >= 11.3) */
#if defined(HAVE_CUDA) && defined(HAVE_DECL_CUDADEVICEFLUSHGPUDIRECTRDMAWRITES) && \
	HAVE_DECL_CUDADEVICEFLUSHGPUDIRECTRDMAWRITES
#define IBC_CUDA_HAVE_GDR_FLUSH 1
#else
#define IBC_CUDA_HAVE_GDR_FLUSH 0
#endif

#ifdef __cplusplus
}
#endif

#endif /* IBC_CUDA_H */
