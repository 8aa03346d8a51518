/* SPDX-License-Identifier: MIT */
/*
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

struct ibv_pd;
struct ibv_mr;

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
/* always built: cuda_stage.c (routing and the staged pipeline)            */
/* ---------------------------------------------------------------------- */

struct ibc_op;
struct ibc_net;
struct ibc_cuda_comm;

/**
 * ibc_cuda_op_classify() - Record in @op which of its buffers are device
 * memory (IBC_CUDA_REQ_SEND_DEV/RECV_DEV and op->cuda_dev). Called by
 * api_coll.c for every operation after its arguments were checked; looks
 * only at the buffers this rank uses (count > 0; broadcast's sendbuf on the
 * root, reduce's recvbuf on the root). Keeps IBC_CUDA_REQ_GATED.
 * @op:   [in,out] the operation; its coll, buffers, count and root are set.
 * @rank: [in] this rank (the root's buffers differ from the others').
 *
 * Cost: nothing in builds without CUDA; otherwise one cuPointerGetAttributes()
 * per buffer (a few hundred ns), and nothing at all until the process has
 * loaded the CUDA driver (no device memory can exist before).
 * Threading: thread-safe. Never fails: an unknown pointer is host memory.
 */
void ibc_cuda_op_classify(struct ibc_op *op, int rank);

/* the executor's run of one operation on host buffers (its algorithm) */
typedef ibc_status_t (*ibc_cuda_host_run_fn)(void *arg, struct ibc_op *op);

/**
 * ibc_cuda_stage_run() - Execute @op, whose cuda_flags are not 0: wait for
 * its stream (IBC_CUDA_REQ_GATED, @gate), then run it through @run on
 * pinned host copies of the device buffers, pipelined in segments of
 * IBC_CUDA_STAGE_BYTES (see cuda_stage.c for the schedule). The executor's
 * wrapper for such operations, in the thread that executes operations.
 * @state_p: [in,out] the communicator's staging state, created (or grown)
 *           here; NULL until the first such operation.
 * @net:     [in] the communicator's net layer (errors, timeout).
 * @op:      [in,out] the operation (cuda_dev filled in when unknown).
 * @gate:    [in] the stream gate of a stream-ordered operation, else NULL.
 * @run:     [in] the host run of one operation, called once per segment
 *           (with @arg), or once with host buffers.
 *
 * Blocking:  yes, like every algorithm; each wait is bounded by IBC_TIMEOUT_MS.
 * Return:    IBC_OK; @run's errors; IBC_ERR_CUDA (a copy failed);
 *            IBC_ERR_NO_MEMORY (pinned staging memory); IBC_ERR_TIMEOUT (a
 *            copy or the stream did not complete); IBC_ERR_UNSUPPORTED (built
 *            without CUDA).
 */
ibc_status_t ibc_cuda_stage_run(struct ibc_cuda_comm **state_p, struct ibc_net *net,
				struct ibc_op *op, void *gate, ibc_cuda_host_run_fn run, void *arg);

/**
 * ibc_cuda_stage_free() - Free a communicator's staging state (pinned
 * staging buffers, streams, events), when the communicator is freed after
 * its threads stopped. NULL is a no-op.
 */
void ibc_cuda_stage_free(struct ibc_cuda_comm *cc);

/* tests: staged-pipeline counters of this process (operations, segments) */
void ibc_cuda_stage_stats(uint64_t *nops_p, uint64_t *nsegments_p);

/*
 * tests: declare [@ptr, @ptr + @nbytes) of host memory to be "device memory"
 * (emulation). Operations on such buffers take the staged path with a host
 * copier that executes each copy lazily, when the event covering it is
 * waited for, so a missing wait in the pipeline gives wrong results
 * instead of passing by luck. Up to 64 ranges per process.
 * Return: IBC_OK; IBC_ERR_NO_MEMORY (table full); IBC_ERR_INVALID_ARG.
 */
ibc_status_t ibc_cuda_fake_device_add(const void *ptr, size_t nbytes);
void ibc_cuda_fake_device_remove(const void *ptr);

/* ---------------------------------------------------------------------- */
/* always built: cuda_stream.c (stream-ordered entry points)               */
/* ---------------------------------------------------------------------- */

/**
 * ibc_cuda_gate_wait() - In the executing thread, wait until the CUDA
 * stream of the stream-ordered operation @op reaches it (@gate: its host
 * function ran). Bounded by IBC_TIMEOUT_MS; returns early when the
 * communicator of @net fails or is aborted.
 * Return: IBC_OK; IBC_ERR_TIMEOUT (logged, communicator failed); its error.
 */
ibc_status_t ibc_cuda_gate_wait(struct ibc_net *net, const struct ibc_op *op, void *gate);

/* tests: run stream host functions through @launch instead of cudaLaunchHostFunc */
typedef ibc_status_t (*ibc_cuda_launch_fn)(void *stream, void (*fn)(void *), void *arg);
void ibc_cuda_stream_set_launcher(ibc_cuda_launch_fn launch);

/* ---------------------------------------------------------------------- */
/* always built: cuda_gdr.c (GPUDirect RDMA decision)                      */
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
 * @mode_p: [out] the mode.
 * Threading: thread-safe. Return: as ibc_gdr_decide() (the error is logged
 *            at WARN), IBC_ERR_NO_MEMORY.
 */
ibc_status_t ibc_gdr_mode_get(int dev, const char *nic, int dmabuf_nic,
			      enum ibc_gdr_mode *mode_p);

const char *ibc_gdr_mode_name(enum ibc_gdr_mode mode);

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

/* ---------------------------------------------------------------------- */
/* built with CUDA and verbs: cuda_ibreg.c (device memory for the NIC)     */
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

#ifdef __cplusplus
}
#endif

#endif /* IBC_CUDA_H */
