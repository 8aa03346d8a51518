/* SPDX-License-Identifier: MIT */
/*
 * coll.c - dispatch of an operation to its algorithm, and the scratch area
 * the algorithms share. Algorithm choice: ring for the reducing and
 * gathering collectives (docs/algorithms.md); the tree/tuner work adds
 * other algorithms behind ibc_coll_run().
 */
#include "config.h"

#include <stdlib.h>

#include "coll/coll.h"
#include "core/util.h"
#include "cuda/cuda.h"

ibc_status_t ibc_coll_scratch(struct ibc_comm *comm, size_t nbytes, void **p)
{
	if (nbytes > comm->scratch_nbytes) {
		void *np = ibc_aligned_alloc(4096, IBC_ALIGN_UP(nbytes, 4096), "algorithm scratch");

		if (!np)
			return ibc_comm_fail(comm, IBC_ERR_NO_MEMORY, -1,
					     "cannot allocate %zu bytes of scratch", nbytes);
		ibc_free(comm->scratch);
		comm->scratch = np;
		comm->scratch_nbytes = IBC_ALIGN_UP(nbytes, 4096);
	}
	*p = comm->scratch;
	return IBC_OK;
}

ibc_status_t ibc_coll_run(struct ibc_comm *comm, struct ibc_request *req)
{
	/* device buffers or stream order: staged around this function (src/cuda) */
	if (req->cuda_flags)
		return ibc_cuda_coll_run(comm, req);
	if (req->count == 0 && req->coll != IBC_COLL_BARRIER)
		return IBC_OK;
	switch (req->coll) {
	case IBC_COLL_ALLREDUCE:      return ibc_ring_allreduce(comm, req);
	case IBC_COLL_REDUCE_SCATTER: return ibc_ring_reduce_scatter(comm, req);
	case IBC_COLL_ALLGATHER:      return ibc_ring_allgather(comm, req);
	case IBC_COLL_BROADCAST:      return ibc_ring_broadcast(comm, req);
	case IBC_COLL_REDUCE:         return ibc_ring_reduce(comm, req);
	case IBC_COLL_ALLTOALL:       return ibc_coll_alltoall(comm, req);
	case IBC_COLL_SEND:           return ibc_coll_send(comm, req);
	case IBC_COLL_RECV:           return ibc_coll_recv(comm, req);
	case IBC_COLL_BARRIER:        return ibc_coll_barrier(comm, req);
	default:
		IBC_LOG_ERROR(COLL, "unknown operation %d", req->coll);
		return IBC_ERR_INTERNAL;
	}
}
