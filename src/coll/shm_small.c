/* SPDX-License-Identifier: MIT */
/*
 * shm_small.c - small all-gather, reduce-scatter, all-to-all and broadcast,
 * and the barrier, through the shm all-reduce's segment (shm_allreduce.c), in one
 * synchronisation, as its small all-reduce: for communicators whose ranks
 * all share this host over shm, and calls whose largest buffer is at most
 * IBC_SHM_ALLREDUCE_SMALL_BYTES (broadcast), or IBC_SHM_ONESTEP_RANK_BYTES
 * x the ranks (all-gather, all-to-all, reduce-scatter; rank 0's values).
 * Call sequence s, buffer parity b = s % 2:
 *
 *   1. wait until every rank's done >= s - 2 (nobody reads slab[*][b]);
 *      skipped when this rank saw every rank arrive at s - 1
 *   2. copy this rank's input into in[me][b] (broadcast: the root's
 *      buffer; the others copy nothing); describe the call; arrive[me] = s
 *      (ibc_shmar_put(); in[q][b] is rank q's slab, or for up to 24 bytes
 *      its post line, shmar_in(), read with the writer's size)
 *   3. wait until every rank's arrive >= s; compare the descriptors
 *      (broadcast, eager: the root skips the wait and a non-root waits for
 *      the root alone; both compare the others' descriptors later, before
 *      step 1 of their next call or at an error poll, ibc_shmar_settle())
 *   4. all-gather:     out[q] = in[q][b] for every q
 *      all-to-all:     out[q] = block me of in[q][b]
 *      reduce-scatter: out = block me of in[0][b] op ... op in[n-1][b]
 *                      (rank order, as the small all-reduce)
 *      broadcast:      out = in[root][b]
 *      barrier:        nothing (the arrival wait was the barrier)
 *   5. done[me] = s
 *
 * The ring and the pairwise exchange take n - 1 message steps through the
 * per-pair slot rings, each a wake-up of the receiver; here a call costs
 * one wait for the slowest rank, like Open MPI's and MPICH's shared-memory
 * collectives for short messages (e.g. Open MPI's coll/sm, MPICH's
 * release/gather shm collectives). Not where IBC_ALGO or IBC_PROTO force a
 * broadcast algorithm (ibc_algo_choice.forced): those run what they name.
 */
#include "config.h"

#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "base/util.h"
#include "coll/algo.h"
#include "coll/reduce.h"
#include "coll/shm_allreduce_internal.h"

/**
 * ibc_shmar_small_ok() - Whether a broadcast (or barrier) whose buffer is
 * @nbytes on @coll goes through the segment in one step (file header): the
 * segment is usable and 0 < @nbytes <= the small all-reduce size. The same
 * answer on every rank for the same call. Pure.
 */
int ibc_shmar_small_ok(const struct ibc_coll *coll, size_t nbytes)
{
	const struct ibc_shmar *s = coll->shmar;

	return s && !s->failed && nbytes > 0 && nbytes <= s->small_max;
}

/**
 * ibc_shmar_onestep_ok() - The same for an all-gather, all-to-all or
 * reduce-scatter whose largest buffer is @nbytes: up to
 * IBC_SHM_ONESTEP_RANK_BYTES x the ranks (at least the small all-reduce
 * size, at most a slab). These need the whole input of every rank in the
 * segment, where the ring pays n - 1 steps; on 4 ranks of this 2-core host
 * 8-128 KiB took 0.5-0.8x the ring's time in one step, on 2 ranks 8 KiB
 * 0.7-0.8x and 32 KiB the same, and a 128 KiB all-to-all twice the single
 * copy's (bench/RESULTS.md). Pure.
 */
int ibc_shmar_onestep_ok(const struct ibc_coll *coll, size_t nbytes)
{
	const struct ibc_shmar *s = coll->shmar;

	return s && !s->failed && nbytes > 0 && nbytes <= s->onestep_max;
}

/* steps 1-3 (file header) with @nbytes of @src; the call's sequence number in *@seq_p */
static ibc_status_t small_put(struct ibc_coll *coll, struct ibc_shmar *s, struct ibc_op *op,
			      const void *src, size_t nbytes, uint64_t *seq_p)
{
	*seq_p = ++s->seq;
	s->n_small_other++;
	return ibc_shmar_put(coll, s, op, *seq_p, src, nbytes);
}

/* step 5 */
static ibc_status_t small_done(struct ibc_coll *coll, struct ibc_shmar *s, uint64_t seq,
			       size_t nbytes)
{
	__atomic_fetch_add(&coll->net->cur_bytes_done, nbytes, __ATOMIC_RELAXED);
	line_set(&s->line[coll->net->rank], F_REDUCED, seq);
	line_set(&s->line[coll->net->rank], F_DONE, seq);
	return IBC_OK;
}

/**
 * ibc_shm_small_allgather() - All-gather in one step of the segment (file
 * header). @coll: [in] communicator (ibc_shmar_onestep_ok() for the output's
 * size). @op: [in] count elements per rank; recvbuf holds n blocks in rank
 * order; in place when sendbuf is this rank's block of recvbuf.
 * Blocking: bounded by IBC_TIMEOUT_MS. Return: IBC_OK; IBC_ERR_TIMEOUT;
 * IBC_ERR_REMOTE (a rank's process is gone); IBC_ERR_INVALID_USAGE
 * (mismatched calls). Errors are logged and poison @coll.
 */
ibc_status_t ibc_shm_small_allgather(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	const int me = coll->net->rank;
	char *out = op->recvbuf;
	uint64_t seq;
	size_t esz;
	size_t blk;
	int q;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	blk = op->count * esz;
	coll->net->cur_bytes_total += blk * (size_t)(s->n + 1);
	IBC_CHECK(small_put(coll, s, op, op->sendbuf, blk, &seq));
	for (q = 0; q < s->n; q++)
		if (q != me)
			memcpy(out + (size_t)q * blk, shmar_in(s, q, (int)(seq & 1), blk), blk);
		else if (op->sendbuf != out + (size_t)me * blk)
			memcpy(out + (size_t)me * blk, op->sendbuf, blk);
	return small_done(coll, s, seq, blk * (size_t)s->n);
}

/**
 * ibc_shm_small_alltoall() - All-to-all in one step of the segment (file
 * header). @coll: as ibc_shm_small_allgather(). @op: [in] count elements
 * per block; sendbuf and recvbuf hold n blocks each and do not overlap.
 * Blocking; return: as ibc_shm_small_allgather().
 */
ibc_status_t ibc_shm_small_alltoall(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	const int me = coll->net->rank;
	char *out = op->recvbuf;
	uint64_t seq;
	size_t esz;
	size_t blk;
	int q;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	blk = op->count * esz;
	coll->net->cur_bytes_total += 2 * blk * (size_t)s->n;
	IBC_CHECK(small_put(coll, s, op, op->sendbuf, blk * (size_t)s->n, &seq));
	for (q = 0; q < s->n; q++)
		memcpy(out + (size_t)q * blk,
		       shmar_in(s, q, (int)(seq & 1), blk * (size_t)s->n) + (size_t)me * blk, blk);
	return small_done(coll, s, seq, blk * (size_t)s->n);
}

/**
 * ibc_shm_small_reduce_scatter() - Reduce-scatter in one step of the
 * segment (file header): block me of the rank-order reduction of every
 * rank's input. @coll: as ibc_shm_small_allgather() (for the input's
 * size). @op: [in] count elements per rank (recvbuf); sendbuf holds n
 * blocks; in place when recvbuf is this rank's block of sendbuf.
 * Blocking; return: as ibc_shm_small_allgather(), and IBC_ERR_NO_MEMORY
 * (the fp32 accumulator of IBC_ACCUM_FP32).
 */
ibc_status_t ibc_shm_small_reduce_scatter(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	const int accum = ibc_param_accum_fp32() &&
			  (op->dtype == IBC_FLOAT16 || op->dtype == IBC_BFLOAT16);
	uint64_t seq;
	size_t esz;
	size_t blk;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	blk = op->count * esz;
	coll->net->cur_bytes_total += blk * (size_t)(s->n + 1);
	IBC_CHECK(small_put(coll, s, op, op->sendbuf, blk * (size_t)s->n, &seq));
	IBC_CHECK(ibc_shmar_reduce(coll, s, op, op->recvbuf,
				   ibc_shmar_slab_srcs(s, (int)(seq & 1),
						       (size_t)coll->net->rank * blk,
						       blk * (size_t)s->n),
				   op->count, accum));
	return small_done(coll, s, seq, blk);
}

/**
 * ibc_shm_small_broadcast() - Broadcast in one step of the segment (file
 * header), eager: the root arrives with its input and returns; every other
 * rank waits for the root alone, compares its descriptor with the root's
 * and copies the input out. Neither waits for the other ranks: each checks
 * their descriptors of this call before it arrives at its next call in the
 * segment (ibc_shmar_settle()), so that ranks that disagree on the root
 * (two that each take themselves for it, on 2 ranks) or on the call still
 * get IBC_ERR_INVALID_USAGE, from that later call; a rank whose own
 * comparison fails here fails this call, and the others learn of it as an
 * asynchronous error. A root's input stays readable in its slab until every
 * rank has arrived at the next call (step 1 of the file header).
 * @coll: as ibc_shm_small_allgather(). @op: [in] count elements; the
 * root's sendbuf (its recvbuf too when they differ).
 * Blocking (a non-root until the root has arrived); return: as
 * ibc_shm_small_allgather().
 */
ibc_status_t ibc_shm_small_broadcast(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	const int root = coll->net->rank == op->root;
	uint64_t seq = ++s->seq;
	int b = (int)(seq & 1);
	size_t esz;
	size_t N;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	N = op->count * esz;
	coll->net->cur_bytes_total += 2 * N;
	s->n_small_other++;
	IBC_CHECK(ibc_shmar_post(coll, s, op, seq, op->sendbuf, root ? N : 0));
	if (!root) {
		IBC_CHECK(ibc_shmar_wait_rank(coll, s, op, F_ARRIVE, seq, op->root));
		IBC_CHECK(ibc_shmar_check_desc_rank(coll, s, b, op->root));
		memcpy(op->recvbuf, shmar_in(s, op->root, b, N), N);
	} else if (op->sendbuf != op->recvbuf) {
		memcpy(op->recvbuf, op->sendbuf, N);
	}
	s->lazy_seq = seq;
	s->lazy_op = *op;
	return small_done(coll, s, seq, 2 * N);
}

/**
 * ibc_shm_small_barrier() - Barrier in one step of the segment (file
 * header): arrive, wait for every rank. Every rank leaves once the last
 * has arrived, where the dissemination barrier's log2(n) message rounds
 * let the ranks leave one round apart.
 * @coll: [in] communicator with a usable segment (ibc_shmar_small_ok(coll, 1)).
 * @op:   [in] the barrier.
 * Blocking; return: as ibc_shm_small_allgather().
 */
ibc_status_t ibc_shm_small_barrier(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	uint64_t seq;

	IBC_CHECK(small_put(coll, s, op, NULL, 0, &seq));
	return small_done(coll, s, seq, 0);
}
