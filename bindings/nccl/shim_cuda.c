/* SPDX-License-Identifier: MIT */
/*
 * shim_cuda.c - every CUDA runtime call of libibcoll_nccl: device queries,
 * copies to self on the stream, joining the streams of a group, the events
 * that ncclCommFinalize() waits for, and ncclMemAlloc/ncclMemFree. The
 * runtime is linked statically (as libibcoll's); it loads the driver at run
 * time, so without one every call here fails cleanly and the shim runs in
 * host mode (shim.h).
 */
#include "config.h"

#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "shim.h"
#include "shim_scale.h"

static ncclResult_t cuda_err(struct ncclComm *comm, cudaError_t e, const char *fn,
			     const char *what)
{
	(void)cudaGetLastError();       /* a non-sticky error: clear it for the next call */
	return shim_err(comm, ncclUnhandledCudaError, fn, "%s failed: %s (%s)", what,
			cudaGetErrorString(e), cudaGetErrorName(e));
}

int shim_cuda_device_count(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return n;
}

int shim_cuda_current_device(void)
{
	int dev = -1;
	cudaError_t e = cudaGetDevice(&dev);

	if (e != cudaSuccess) {
		cuda_err(NULL, e, "ncclCommInitRank", "cudaGetDevice");
		return -1;
	}
	return dev;
}

void shim_cuda_set_device(int dev)
{
	if (dev >= 0 && cudaSetDevice(dev) != cudaSuccess)
		(void)cudaGetLastError();       /* the init then reports what fails */
}

ncclResult_t shim_cuda_no_capture(cudaStream_t stream, struct ncclComm *comm, const char *fn)
{
	enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
	cudaError_t e = cudaStreamIsCapturing(stream, &cs);

	if (e != cudaSuccess)
		return cuda_err(comm, e, fn, "cudaStreamIsCapturing");
	if (cs != cudaStreamCaptureStatusNone)
		return shim_err(comm, ncclInvalidUsage, fn,
				"stream %p is being captured into a CUDA graph: not supported (ibcoll's stream-ordered operations cannot be replayed)",
				(void *)stream);
	return ncclSuccess;
}

ncclResult_t shim_cuda_copy(void *dst, const void *src, size_t nbytes, cudaStream_t stream,
			    struct ncclComm *comm, const char *fn)
{
	cudaError_t e;

	if (!nbytes || dst == src)
		return ncclSuccess;
	e = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream);
	if (e != cudaSuccess)
		return cuda_err(comm, e, fn, "cudaMemcpyAsync (send to self)");
	return ncclSuccess;
}

/* @to waits for the work queued on @from so far */
static ncclResult_t stream_wait(cudaStream_t to, cudaStream_t from, const char *fn)
{
	cudaEvent_t ev;
	cudaError_t e;

	e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	if (e != cudaSuccess)
		return cuda_err(NULL, e, fn, "cudaEventCreateWithFlags");
	e = cudaEventRecord(ev, from);
	if (e == cudaSuccess)
		e = cudaStreamWaitEvent(to, ev, 0);
	/* destroying a recorded event is legal: it is released once reached */
	cudaEventDestroy(ev);
	if (e != cudaSuccess)
		return cuda_err(NULL, e, fn, "cudaEventRecord/cudaStreamWaitEvent (group on several streams)");
	return ncclSuccess;
}

ncclResult_t shim_cuda_join(cudaStream_t *streams, int n, const char *fn)
{
	ncclResult_t res;
	int i;

	for (i = 1; i < n; i++)
		if ((res = stream_wait(streams[0], streams[i], fn)) != ncclSuccess)
			return res;
	return ncclSuccess;
}

ncclResult_t shim_cuda_fork(cudaStream_t *streams, int n, const char *fn)
{
	ncclResult_t res;
	int i;

	for (i = 1; i < n; i++)
		if ((res = stream_wait(streams[i], streams[0], fn)) != ncclSuccess)
			return res;
	return ncclSuccess;
}

ncclResult_t shim_cuda_mark(struct ncclComm *comm, cudaStream_t stream, const char *fn)
{
	struct shim_ev *evs;
	cudaEvent_t ev;
	cudaError_t e;
	int i;

	for (i = 0; i < comm->nevs; i++)
		if (comm->evs[i].stream == stream)
			break;
	if (i == comm->nevs) {
		evs = realloc(comm->evs, (size_t)(comm->nevs + 1) * sizeof(*evs));
		if (!evs)
			return shim_err(comm, ncclSystemError, fn, "out of memory (stream events)");
		comm->evs = evs;
		e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
		if (e != cudaSuccess)
			return cuda_err(comm, e, fn, "cudaEventCreateWithFlags");
		evs[i].stream = stream;
		evs[i].ev = ev;
		comm->nevs++;
	}
	e = cudaEventRecord((cudaEvent_t)comm->evs[i].ev, stream);
	if (e != cudaSuccess)
		return cuda_err(comm, e, fn, "cudaEventRecord");
	return ncclSuccess;
}

ncclResult_t shim_cuda_drain(struct ncclComm *comm, const char *fn)
{
	ncclResult_t res = ncclSuccess;
	cudaError_t e;
	int i;

	for (i = 0; i < comm->nevs; i++) {
		e = cudaEventSynchronize((cudaEvent_t)comm->evs[i].ev);
		if (e != cudaSuccess && res == ncclSuccess)
			res = cuda_err(comm, e, fn, "cudaEventSynchronize (operations on a stream)");
	}
	return res;
}

void shim_cuda_forget(struct ncclComm *comm)
{
	int i;

	for (i = 0; i < comm->nevs; i++)
		cudaEventDestroy((cudaEvent_t)comm->evs[i].ev);
	free(comm->evs);
	comm->evs = NULL;
	comm->nevs = 0;
}

ncclResult_t shim_cuda_alloc(void **ptr, size_t nbytes)
{
	cudaError_t e;

	if (!ptr)
		return shim_err(NULL, ncclInvalidArgument, "ncclMemAlloc", "ptr is NULL");
	e = cudaMalloc(ptr, nbytes);
	if (e != cudaSuccess)
		return cuda_err(NULL, e, "ncclMemAlloc", "cudaMalloc");
	return ncclSuccess;
}

ncclResult_t shim_cuda_alloc_async(void **ptr, size_t nbytes, cudaStream_t stream,
				   struct ncclComm *comm, const char *fn)
{
	cudaError_t e = cudaMallocAsync(ptr, nbytes ? nbytes : 1, stream);

	if (e != cudaSuccess)
		return cuda_err(comm, e, fn, "cudaMallocAsync (PreMulSum temporary)");
	return ncclSuccess;
}

ncclResult_t shim_cuda_free_async(void *ptr, cudaStream_t stream, struct ncclComm *comm,
				  const char *fn)
{
	cudaError_t e = cudaFreeAsync(ptr, stream);

	if (e != cudaSuccess)
		return cuda_err(comm, e, fn, "cudaFreeAsync (PreMulSum temporary)");
	return ncclSuccess;
}

ncclResult_t shim_cuda_scale(void *dst, const void *src, size_t count, const struct shim_premul *pm,
			     cudaStream_t stream, struct ncclComm *comm, const char *fn)
{
	cudaError_t e = (cudaError_t)shim_scale_launch(dst, src, count, (int)pm->dtype,
						       pm->on_device ? pm->dptr : pm->value,
						       pm->on_device, (void *)stream);

	if (e != cudaSuccess)
		return cuda_err(comm, e, fn, "the PreMulSum scaling kernel");
	return ncclSuccess;
}

ncclResult_t shim_cuda_free(void *ptr)
{
	cudaError_t e = cudaFree(ptr);

	if (e != cudaSuccess)
		return cuda_err(NULL, e, "ncclMemFree", "cudaFree");
	return ncclSuccess;
}
