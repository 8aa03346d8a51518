/* SPDX-License-Identifier: MIT */
/*
 * shm_single.c - all-gather, reduce-scatter, broadcast and all-to-all by the shm
 * all-reduce's single-copy machinery (shm_allreduce_cma.c), for
 * communicators whose ranks all share this host over shm, where the ring
 * moves every byte n - 1 hops through per-pair slot rings or CMA:
 *
 *   all-gather:     every rank copies each peer's input straight into its
 *                   own output block (n - 1 copies of count elements);
 *   reduce-scatter: every rank reduces its own block of every rank's input
 *                   into its output, in rank order, piece by piece;
 *   broadcast:      every rank but the root copies the root's buffer;
 *   all-to-all:     every rank copies block r of each peer's input into
 *                   block q of its own output (n - 1 copies of count
 *                   elements).
 *
 * When every rank's buffers lie in ibc_mem_alloc() memory, each rank maps
 * its peers' and reads them where they lie; otherwise all-gather, broadcast
 * and all-to-all read a private buffer by cross-memory attach
 * (process_vm_readv) where each rank reads at least
 * IBC_SHM_SINGLE_CMA_MIN_BYTES from a peer, and run the ring (the pairwise
 * exchange for all-to-all) below it, where the kernel's page pinning costs
 * more than the ring's two copies through the pair segments
 * (single_path(); figures in bench/RESULTS.md, "Single copy of private
 * buffers"). Reduce-scatter runs the ring unless every rank is mapped.
 * Each call is one synchronisation to
 * publish the buffers (which also tells every rank whether all are mapped)
 * and one to finish (ibc_shmar_single_begin/_end()).
 * A call of at least SINGLE_ASK_BYTES always asks; a smaller one above the
 * small all-reduce size when every rank's previous call had mapped buffers,
 * and every 64th time anyway (ibc_shmar_single_ok(), the same decision on
 * every rank).
 *
 * Source: the direct (one-step, shared address space) algorithms of
 * single-copy intra-node MPI collectives, e.g. MPICH's and Open MPI's
 * XPMEM/CMA collectives (Hashmi et al., IPDPS 2018), here over CMA and
 * memfd mappings.
 */
#include "config.h"

#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "base/util.h"
#include "coll/algo.h"
#include "coll/reduce.h"
#include "coll/shm_allreduce_internal.h"

/*
 * From this size a call always meets its peers first to learn whether every
 * rank's buffers are mapped (one synchronisation, under 5 % of a ring
 * all-gather of 64 KiB here); below it only when every rank's previous call
 * had mapped buffers (ibc_shmar_cma_expect()).
 */
#define SINGLE_ASK_BYTES (64u << 10)

/**
 * ibc_shmar_single_ok() - Whether an all-gather, reduce-scatter or
 * broadcast of @nbytes (its largest buffer) on @coll tries the single-copy
 * path: the path agreed at set-up, @nbytes above the small all-reduce size,
 * and at least SINGLE_ASK_BYTES, or every rank's previous call on mapped
 * buffers, or the 64th such smaller call in a row. The same answer on every
 * rank for the same call (every rank makes the same calls). Not
 * thread-safe: the thread running @coll's operations.
 */
int ibc_shmar_single_ok(struct ibc_coll *coll, size_t nbytes)
{
	struct ibc_shmar *s = coll->shmar;

	if (!s || s->failed || s->cma_min == SIZE_MAX || nbytes <= s->small_max)
		return 0;
	if (nbytes >= SINGLE_ASK_BYTES || ibc_shmar_cma_expect(s))
		return 1;
	/* every 64th smaller call asks anyway: a job whose calls are all small learns it too */
	return (++s->n_mid & 63) == 0;
}

/*
 * After ibc_shmar_single_begin(): 1 when the call goes on by single copy,
 * the same answer on every rank: every rank published both buffers as
 * ibc_mem_alloc() memory, or each rank reads @cma_bytes >=
 * s->single_cma_min from a peer (cross-memory attach for the private
 * buffers; @cma_bytes 0: never). Otherwise the call is finished here
 * without waiting (nobody touches another rank's buffers) and the caller
 * runs the ring.
 */
static int single_path(struct ibc_coll *coll, struct ibc_shmar *s, uint64_t seq,
		       size_t cma_bytes)
{
	int q;

	for (q = 0; q < s->n; q++)
		if (!__atomic_load_n(&s->line[q].call[s->cur_b].share[0].id, __ATOMIC_RELAXED) ||
		    !__atomic_load_n(&s->line[q].call[s->cur_b].share[1].id, __ATOMIC_RELAXED))
			break;
	if (q == s->n || (cma_bytes > 0 && cma_bytes >= s->single_cma_min)) {
		ibc_shmar_single_count(coll, s);
		return 1;
	}
	line_set(&s->line[coll->net->rank], F_REDUCED, seq);
	line_set(&s->line[coll->net->rank], F_DONE, seq);
	s->n_asked++;
	return 0;
}

/* @len bytes of rank @q's buffer at offset @off (its input, or @output) into @dst */
static ibc_status_t pull(struct ibc_coll *coll, struct ibc_shmar *s, int q, int output,
			 size_t off, char *dst, size_t len)
{
	char *mapped = output ? s->pout[q] : s->pin[q];
	uint64_t addr = output ? s->line[q].call[s->cur_b].dst : s->line[q].call[s->cur_b].src;

	if (mapped) {
		memcpy(dst, mapped + off, len);
		return IBC_OK;
	}
	if (ibc_shmar_xfer((pid_t)s->line[q].pid, dst, addr + off, len, 0) != 0)
		return ibc_shmar_xfer_fail(coll, q, 0, dst, len, output ? "output" : "input");
	return IBC_OK;
}

/**
 * ibc_shm_allgather() - All-gather by single copy (file header).
 * @coll: [in] communicator (every rank on this host, ibc_shmar_single_ok()).
 * @op:   [in] count elements per rank; recvbuf holds n blocks in rank
 *        order; in place when sendbuf is this rank's block of recvbuf.
 * Blocking. Return: IBC_OK; IBC_ERR_TIMEOUT; IBC_ERR_REMOTE;
 * IBC_ERR_INVALID_USAGE (mismatched calls); IBC_ERR_SYSTEM (a transfer
 * failed). Errors are logged and poison @coll.
 */
ibc_status_t ibc_shm_allgather(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	const int me = coll->net->rank;
	size_t esz;
	size_t blk;
	uint64_t seq;
	char *out = op->recvbuf;
	char *own;
	const void *src;
	int i;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	blk = op->count * esz;
	own = out + (size_t)me * blk;
	/*
	 * Peers read this rank's input where the caller left it (in place: its
	 * block of the output), not a copy just made in the output: the lines
	 * of a fresh copy sit dirty in this core's cache, and a peer's
	 * cross-memory read of them took twice as long (2 ranks, 128 KiB each:
	 * 11 us against 5.5, bench/RESULTS.md). The own block is copied after
	 * the reads of the peers' blocks. Except where the output lies in
	 * ibc_mem_alloc() memory and the input does not: then the block is
	 * copied first and published, so that peers map it rather than reach
	 * the private input by cross-memory attach (or fall back to the ring).
	 */
	src = op->sendbuf;
	if (src != own && ibc_shmar_cma_mapped(out, out, blk * (size_t)s->n) &&
	    !ibc_shmar_cma_mapped(src, src, blk)) {
		memcpy(own, src, blk);
		src = own;
	}
	IBC_CHECK(ibc_shmar_single_begin(coll, s, op, src, blk, out, blk * (size_t)s->n, &seq));
	if (!single_path(coll, s, seq, blk))
		return ibc_ring_allgather(coll, op);
	coll->net->cur_bytes_total += blk * (size_t)s->n;
	for (i = 1; i < s->n; i++) {
		int q = (me + i) % s->n;

		ibc_status_t st = pull(coll, s, q, 0, 0, out + (size_t)q * blk, blk);

		if (st != IBC_OK)
			return ibc_shmar_single_abort(coll, s, seq, st);
		__atomic_fetch_add(&coll->net->cur_bytes_done, blk, __ATOMIC_RELAXED);
	}
	if (src != own)
		memcpy(own, src, blk);
	return ibc_shmar_single_end(coll, s, op, seq);
}

/**
 * ibc_shm_reduce_scatter() - Reduce-scatter by single copy (file header):
 * this rank's block of the sum of every rank's input, in rank order.
 * @coll: [in] communicator (as ibc_shm_allgather()).
 * @op:   [in] count elements per rank (recvbuf); sendbuf holds n blocks; in
 *        place when recvbuf is this rank's block of sendbuf.
 * Blocking. Return: as ibc_shm_allgather(), and IBC_ERR_NO_MEMORY.
 */
ibc_status_t ibc_shm_reduce_scatter(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	const int me = coll->net->rank;
	const char *in = op->sendbuf;
	char *out = op->recvbuf;
	int accum = ibc_param_accum_fp32() && (op->dtype == IBC_FLOAT16 || op->dtype == IBC_BFLOAT16);
	size_t esz;
	size_t blk;
	size_t piece;
	size_t off;
	uint64_t seq;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	blk = op->count * esz;
	piece = IBC_MAX(s->chunk / esz, (size_t)1);
	IBC_CHECK(ibc_shmar_single_begin(coll, s, op, in, blk * (size_t)s->n, out, blk, &seq));
	if (!single_path(coll, s, seq, 0))
		return ibc_ring_reduce_scatter(coll, op);
	coll->net->cur_bytes_total += blk * (size_t)s->n;
	for (off = 0; off < op->count; off += piece) {
		size_t cnt = IBC_MIN(piece, op->count - off);

		ibc_status_t st = ibc_shmar_reduce_piece(coll, s, op, in, out + off * esz,
							 (size_t)me * blk + off * esz, cnt, esz, accum);

		if (st != IBC_OK)
			return ibc_shmar_single_abort(coll, s, seq, st);
		__atomic_fetch_add(&coll->net->cur_bytes_done, cnt * esz * (size_t)s->n,
				   __ATOMIC_RELAXED);
	}
	return ibc_shmar_single_end(coll, s, op, seq);
}

/**
 * ibc_shm_broadcast() - Broadcast by single copy (file header): every rank
 * but the root copies the root's buffer into its recvbuf.
 * @coll: [in] communicator (as ibc_shm_allgather()).
 * @op:   [in] count elements; the root's sendbuf (copied to its recvbuf
 *        when they differ).
 * Blocking. Return: as ibc_shm_allgather().
 */
ibc_status_t ibc_shm_broadcast(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	const int me = coll->net->rank;
	size_t esz;
	size_t N;
	uint64_t seq;
	const void *src;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	N = op->count * esz;
	src = me == op->root ? op->sendbuf : op->recvbuf;
	IBC_CHECK(ibc_shmar_single_begin(coll, s, op, src, N, op->recvbuf, N, &seq));
	if (!single_path(coll, s, seq, N))
		return ibc_ring_broadcast(coll, op);
	coll->net->cur_bytes_total += N;
	/* the root's own copy while the others read its input, not before they may */
	if (me == op->root && op->sendbuf != op->recvbuf)
		memcpy(op->recvbuf, op->sendbuf, N);
	if (me != op->root) {
		ibc_status_t st = pull(coll, s, op->root, 0, 0, op->recvbuf, N);

		if (st != IBC_OK)
			return ibc_shmar_single_abort(coll, s, seq, st);
		__atomic_fetch_add(&coll->net->cur_bytes_done, N, __ATOMIC_RELAXED);
	}
	return ibc_shmar_single_end(coll, s, op, seq);
}

/**
 * ibc_shm_alltoall() - All-to-all by single copy (file header): block r of
 * every peer q's input into block q of this rank's output.
 * @coll: [in] communicator (as ibc_shm_allgather()).
 * @op:   [in] count elements per block; sendbuf and recvbuf hold n blocks
 *        each and do not overlap (ibc_alltoall()).
 * Blocking. Return: as ibc_shm_allgather().
 */
ibc_status_t ibc_shm_alltoall(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	const int me = coll->net->rank;
	const char *in = op->sendbuf;
	char *out = op->recvbuf;
	size_t esz;
	size_t blk;
	uint64_t seq;
	int i;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	blk = op->count * esz;
	IBC_CHECK(ibc_shmar_single_begin(coll, s, op, in, blk * (size_t)s->n, out,
					 blk * (size_t)s->n, &seq));
	if (!single_path(coll, s, seq, blk))
		return ibc_coll_alltoall(coll, op);
	coll->net->cur_bytes_total += blk * (size_t)s->n;
	memcpy(out + (size_t)me * blk, in + (size_t)me * blk, blk);
	for (i = 1; i < s->n; i++) {
		int q = (me + i) % s->n;

		ibc_status_t st = pull(coll, s, q, 0, (size_t)me * blk, out + (size_t)q * blk, blk);

		if (st != IBC_OK)
			return ibc_shmar_single_abort(coll, s, seq, st);
		__atomic_fetch_add(&coll->net->cur_bytes_done, blk, __ATOMIC_RELAXED);
	}
	return ibc_shmar_single_end(coll, s, op, seq);
}
