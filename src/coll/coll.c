/* SPDX-License-Identifier: MIT */
/*
 * coll.c - dispatch of an operation to its algorithm, and the scratch area
 * the algorithms share. All-reduce, broadcast and reduce ask the tuner
 * (select.c) for the algorithm, protocol and chunk of each call (ring,
 * trees, recursive doubling, Rabenseifner; docs/algorithms.md); the other
 * collectives have one algorithm each.
 */
#include "config.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/util.h"
#include "coll/coll.h"
#include "coll/select.h"
#include "coll/tree/sched.h"
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

/**
 * ibc_coll_run_choice() - Run an all-reduce, broadcast or reduce with a
 * given algorithm, protocol and chunk (the tuner's choice, or the race's
 * candidate at init, select.c).
 * @comm: [in] communicator. @req: [in,out] the operation (host buffers).
 * @c:    [in] the choice; an algorithm that does not implement req->coll
 *        runs the ring (broadcast, reduce) as the tuner never picks it.
 * Return: IBC_OK, or the algorithm's error, with which @comm is failed and
 * logged: IBC_ERR_REMOTE or IBC_ERR_TIMEOUT (a peer died or is late past
 * IBC_TIMEOUT_MS), IBC_ERR_INVALID_USAGE (ranks made mismatched calls),
 * IBC_ERR_NO_MEMORY (scratch), IBC_ERR_SYSTEM (a transport's system call).
 * Blocking; the thread running @comm's operations.
 */
ibc_status_t ibc_coll_run_choice(struct ibc_comm *comm, struct ibc_request *req,
				 const struct ibc_algo_choice *c)
{
	ibc_sched_gen_fn gen = NULL;

	req->proto_flags = c->proto == IBC_PROTO_LL ? IBC_DESC_F_LL : 0;
	switch (req->coll) {
	case IBC_COLL_ALLREDUCE:
		if (c->algo == IBC_ALGO_TREE)
			gen = ibc_dtree_allreduce_prog;
		else if (c->algo == IBC_ALGO_RD)
			gen = ibc_rd_allreduce_prog;
		else if (c->algo == IBC_ALGO_RAB)
			gen = ibc_rab_allreduce_prog;
		else if (c->algo == IBC_ALGO_SHM)
			return ibc_shm_allreduce(comm, req);
		else
			return ibc_ring_allreduce(comm, req);
		break;
	case IBC_COLL_BROADCAST:
		if (c->algo != IBC_ALGO_TREE)
			return ibc_ring_broadcast(comm, req);
		gen = ibc_binomial_bcast_prog;
		break;
	default:
		if (c->algo != IBC_ALGO_TREE)
			return ibc_ring_reduce(comm, req);
		gen = ibc_binomial_reduce_prog;
		break;
	}
	return ibc_sched_run(comm, req, gen, c->chunk_bytes);
}

/* all-reduce, broadcast, reduce: the tuner's (or the forced) algorithm */
static ibc_status_t coll_run_tuned(struct ibc_comm *comm, struct ibc_request *req)
{
	struct ibc_algo_choice c;

	IBC_CHECK(ibc_tuner_select(comm, req, &c));
	return ibc_coll_run_choice(comm, req, &c);
}

ibc_status_t ibc_coll_run(struct ibc_comm *comm, struct ibc_request *req)
{
	/* device buffers or stream order: staged around this function (src/cuda) */
	if (req->cuda_flags)
		return ibc_cuda_coll_run(comm, req);
	if (req->count == 0 && req->coll != IBC_COLL_BARRIER)
		return IBC_OK;
	if (comm->shmar)
		ibc_shmar_announce(comm, req);
	switch (req->coll) {
	case IBC_COLL_ALLREDUCE:
	case IBC_COLL_BROADCAST:
	case IBC_COLL_REDUCE:         return coll_run_tuned(comm, req);
	case IBC_COLL_REDUCE_SCATTER: return ibc_ring_reduce_scatter(comm, req);
	case IBC_COLL_ALLGATHER:      return ibc_ring_allgather(comm, req);
	case IBC_COLL_ALLTOALL:       return ibc_coll_alltoall(comm, req);
	case IBC_COLL_SEND:
	case IBC_COLL_RECV:           return ibc_coll_p2p(comm, req);
	case IBC_COLL_BARRIER:        return ibc_coll_barrier(comm, req);
	default:
		IBC_LOG_ERROR(COLL, "unknown operation %d", req->coll);
		return IBC_ERR_INTERNAL;
	}
}
