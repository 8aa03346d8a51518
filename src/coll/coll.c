/* SPDX-License-Identifier: MIT */
/*
 * coll.c - dispatch of an operation to its algorithm, the scratch area the
 * algorithms share, and the coll layer's part of a communicator. All-reduce,
 * broadcast and reduce run the algorithm, protocol and chunk they are given
 * (the tuner's choice, src/tune; ring, trees, recursive doubling,
 * Rabenseifner, shm: docs/algorithms.md); the other collectives have one
 * algorithm each, and on one host all-gather, reduce-scatter, broadcast
 * and all-to-all go through the shm segment in one step where small
 * (ibc_shmar_small_ok(), ibc_shmar_onestep_ok(), shm_small.c; broadcast
 * unless IBC_ALGO or IBC_PROTO force its algorithm) and by single copy where
 * ibc_shmar_single_ok() (shm_single.c).
 */
#include "config.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/memreg.h"
#include "base/check.h"
#include "base/log.h"
#include "base/status.h"
#include "base/util.h"
#include "coll/coll.h"
#include "coll/sched.h"

/* @mult x the operation's count, in bytes (0 for an unknown dtype) */
static size_t op_bytes(const struct ibc_op *op, int mult)
{
	size_t esz = 0;

	if (ibc_dtype_size(op->dtype, &esz) != IBC_OK)
		return 0;
	return op->count * esz * (size_t)mult;
}

/**
 * ibc_coll_run_choice() - Run an all-reduce, broadcast or reduce with a
 * given algorithm, protocol and chunk (the tuner's choice, or the race's
 * candidate at init, src/tune).
 * @coll: [in] communicator. @op: [in,out] the operation (host buffers).
 * @c:    [in] the choice; an algorithm that does not implement op->coll
 *        runs the ring (broadcast, reduce) as the tuner never picks it.
 * Return: IBC_OK, or the algorithm's error, with which @coll is failed and
 * logged: IBC_ERR_REMOTE or IBC_ERR_TIMEOUT (a peer died or is late past
 * IBC_TIMEOUT_MS), IBC_ERR_INVALID_USAGE (ranks made mismatched calls),
 * IBC_ERR_NO_MEMORY (scratch), IBC_ERR_SYSTEM (a transport's system call).
 * Blocking; the thread running @coll's operations.
 */
ibc_status_t ibc_coll_run_choice(struct ibc_coll *coll, struct ibc_op *op,
				 const struct ibc_algo_choice *c)
{
	ibc_sched_gen_fn gen = NULL;

	op->proto_flags = c->proto == IBC_PROTO_LL ? IBC_DESC_F_LL : 0;
	switch (op->coll) {
	case IBC_COLL_ALLREDUCE:
		if (c->algo == IBC_ALGO_TREE)
			gen = ibc_dtree_allreduce_prog;
		else if (c->algo == IBC_ALGO_RD)
			gen = ibc_rd_allreduce_prog;
		else if (c->algo == IBC_ALGO_RAB)
			gen = ibc_rab_allreduce_prog;
		else if (c->algo == IBC_ALGO_SHM)
			return ibc_shm_allreduce(coll, op);
		else
			return ibc_ring_allreduce(coll, op);
		break;
	case IBC_COLL_BROADCAST:
		if (!c->forced && ibc_shmar_small_ok(coll, op_bytes(op, 1)))
			return ibc_shm_small_broadcast(coll, op);
		if (ibc_shmar_single_ok(coll, op_bytes(op, 1)))
			return ibc_shm_broadcast(coll, op);
		if (c->algo != IBC_ALGO_TREE)
			return ibc_ring_broadcast(coll, op);
		gen = ibc_binomial_bcast_prog;
		break;
	default:
		if (c->algo != IBC_ALGO_TREE)
			return ibc_ring_reduce(coll, op);
		gen = ibc_binomial_reduce_prog;
		break;
	}
	return ibc_sched_run(coll, op, gen, c->chunk_bytes);
}

void ibc_coll_announce(struct ibc_coll *coll, const struct ibc_op *op)
{
	if (coll->shmar)
		ibc_shmar_announce(coll, op);
}

ibc_status_t ibc_coll_idle_check(struct ibc_coll *coll, int settle)
{
	return coll->shmar ? ibc_shmar_idle_check(coll, settle) : IBC_OK;
}

int ibc_coll_unsettled(const struct ibc_coll *coll)
{
	return coll->shmar && ibc_shmar_unsettled(coll->shmar);
}

ibc_status_t ibc_coll_run(struct ibc_coll *coll, struct ibc_op *op,
			  const struct ibc_algo_choice *choice)
{
	if (ibc_op_is_empty(op))
		return IBC_OK;
	switch (op->coll) {
	case IBC_COLL_ALLREDUCE:
	case IBC_COLL_BROADCAST:
	case IBC_COLL_REDUCE:         return ibc_coll_run_choice(coll, op, choice);
	case IBC_COLL_REDUCE_SCATTER:
		if (ibc_shmar_onestep_ok(coll, op_bytes(op, coll->net->nranks)))
			return ibc_shm_small_reduce_scatter(coll, op);
		if (ibc_shmar_single_ok(coll, op_bytes(op, coll->net->nranks)))
			return ibc_shm_reduce_scatter(coll, op);
		return ibc_ring_reduce_scatter(coll, op);
	case IBC_COLL_ALLGATHER:
		if (ibc_shmar_onestep_ok(coll, op_bytes(op, coll->net->nranks)))
			return ibc_shm_small_allgather(coll, op);
		if (ibc_shmar_single_ok(coll, op_bytes(op, coll->net->nranks)))
			return ibc_shm_allgather(coll, op);
		return ibc_ring_allgather(coll, op);
	case IBC_COLL_ALLTOALL:
		if (ibc_shmar_onestep_ok(coll, op_bytes(op, coll->net->nranks)))
			return ibc_shm_small_alltoall(coll, op);
		if (ibc_shmar_single_ok(coll, op_bytes(op, coll->net->nranks)))
			return ibc_shm_alltoall(coll, op);
		return ibc_coll_alltoall(coll, op);
	case IBC_COLL_SEND:
	case IBC_COLL_RECV:           return ibc_coll_p2p(coll, op);
	case IBC_COLL_BARRIER:
		if (ibc_shmar_small_ok(coll, 1))
			return ibc_shm_small_barrier(coll, op);
		return ibc_coll_barrier(coll, op);
	case IBC_COLL_GATHER:         return ibc_coll_gather(coll, op);
	case IBC_COLL_SCATTER:        return ibc_coll_scatter(coll, op);
	case IBC_COLL_ALLGATHERV:     return ibc_coll_allgatherv(coll, op);
	case IBC_COLL_ALLTOALLV:      return ibc_coll_alltoallv(coll, op);
	default:
		IBC_LOG_ERROR(COLL, "unknown operation %d", op->coll);
		return IBC_ERR_INTERNAL;
	}
}

ibc_status_t ibc_coll_init(struct ibc_coll *coll, struct ibc_net *net)
{
	coll->net = net;
	return ibc_shmar_init(coll);
}

void ibc_coll_fini(struct ibc_coll *coll)
{
	ibc_coll_tag_fini(coll);
	if (coll->scratch)
		ibc_memreg_remove(coll->scratch, NULL);
	ibc_free(coll->scratch);
	coll->scratch = NULL;
	coll->scratch_nbytes = 0;
	ibc_shmar_leave(coll);
	ibc_shmar_destroy(coll->shmar);
	coll->shmar = NULL;
}
