/* SPDX-License-Identifier: MIT */
/*
 * rabenseifner.c - Rabenseifner's all-reduce for medium messages: a
 * reduce-scatter by recursive halving, then an all-gather by recursive
 * doubling, with the fold of rdouble.c for a number of ranks that is not a
 * power of two. Sources: R. Rabenseifner, "Optimization of collective
 * reduction operations", ICCS 2004; MPICH
 * MPIR_Allreduce_intra_reduce_scatter_allgather; Thakur, Rabenseifner,
 * Gropp, IJHPCA 19(1), 2005, section 4.5.
 *
 * Schedule, n ranks, p = largest power of two <= n, rem = n - p, new
 * number nr (fold as in rdouble.c), the vector cut into p blocks (block b:
 * count/p elements, one more for b < count%p; block b ends on new rank b):
 *   fold:  as rdouble.c (even r < 2*rem sends everything to r+1).
 *   reduce-scatter, s = 0 .. log2(p)-1, mask = p/2, p/4, ..., 1:
 *          this rank holds the block range [lo, hi); partner nr ^ mask;
 *          the rank whose bit is 0 keeps the lower half, the other the
 *          upper half; send the half given away, receive the partner's
 *          partial of the kept half and fold it in (lower rank's partial
 *          as the left operand). After log2(p) steps new rank nr holds
 *          block nr, fully reduced (each element was reduced by exactly
 *          one rank).
 *   all-gather, mask = 1, 2, ..., p/2: send the range held, receive the
 *          partner's range of the same size, next to it.
 *   unfold: odd r < 2*rem sends the whole result to r-1.
 *
 *   p = 4, blocks B0..B3:
 *     RS mask 2:  [0]<->[2], [1]<->[3]: [0],[1] keep B0 B1; [2],[3] keep B2 B3
 *     RS mask 1:  [0]<->[1]: [0] keeps B0, [1] keeps B1; [2]<->[3] likewise
 *     AG mask 1:  [0]<->[1] swap B0/B1; [2]<->[3] swap B2/B3
 *     AG mask 2:  [0]<->[2] swap B0B1/B2B3; [1]<->[3] likewise
 *
 * 2 log2(p) message steps (+2 without a power of two); each rank sends and
 * receives 2 (p-1)/p of the vector and reduces (p-1)/p of it: near the
 * ring's bandwidth with a logarithmic number of steps. Every element is
 * reduced on one rank and copied to the others, so all ranks end bitwise
 * identical, and a run is deterministic for fixed (n, count, chunk).
 */
#include "config.h"

#include "coll/algo.h"
#include "coll/sched.h"

/**
 * ibc_rab_allreduce_prog() - Rabenseifner's all-reduce program.
 * @a:   [in]  n, rank, count (elements), chunk (elements).
 * @ops: [out] up to @max ops (NULL when @max is 0).
 * @max: [in]  room in @ops.
 *
 * Return: number of ops of the whole program. Pure and thread-safe.
 */
size_t ibc_rab_allreduce_prog(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
			      size_t max)
{
	struct ibc_sched_out o = { .ops = ops, .max = max, .n = 0 };
	uint64_t count = a->count;
	int r = a->rank;
	int nr;
	int p;
	int rem;
	int mask;
	int s = 0;
	int lo;
	int hi;

	if (a->n <= 1 || count == 0)
		return 0;
	p = ibc_rd_fold(a->n, r, &nr);
	rem = a->n - p;
	if (r < 2 * rem) {
		if (nr < 0) {
			ibc_sched_emit_chunked(&o, IBC_SCHED_SEND, 0, r + 1,
					       IBC_SCHED_PHASE_FOLD, 0, 0, count, a->chunk);
			ibc_sched_emit_chunked(&o, IBC_SCHED_RECV, 0, r + 1,
					       IBC_SCHED_PHASE_FOLD, 1, 0, count, a->chunk);
			return o.n;
		}
		ibc_sched_emit_chunked(&o, IBC_SCHED_RECV_REDUCE, IBC_SCHED_F_IN_LEFT, r - 1,
				       IBC_SCHED_PHASE_FOLD, 0, 0, count, a->chunk);
	}
	lo = 0;
	hi = p;
	for (mask = p / 2; mask >= 1; mask >>= 1, s++) {
		int peer = ibc_rd_unfold_rank(a->n, nr ^ mask);
		int mid = lo + (hi - lo) / 2;
		int klo = (nr & mask) ? mid : lo;
		int khi = (nr & mask) ? hi : mid;
		int slo = (nr & mask) ? lo : mid;
		int shi = (nr & mask) ? mid : hi;
		uint64_t soff = ibc_block_offset(count, p, slo);
		uint64_t koff = ibc_block_offset(count, p, klo);

		ibc_sched_emit_chunked(&o, IBC_SCHED_SEND, 0, peer, IBC_SCHED_PHASE_RAB_RS, s,
				       soff, ibc_block_offset(count, p, shi) - soff, a->chunk);
		ibc_sched_emit_chunked(&o, IBC_SCHED_RECV_REDUCE,
				       peer < r ? IBC_SCHED_F_IN_LEFT : 0,
				       peer, IBC_SCHED_PHASE_RAB_RS, s, koff,
				       ibc_block_offset(count, p, khi) - koff, a->chunk);
		lo = klo;
		hi = khi;
	}
	for (mask = 1; mask < p; mask <<= 1, s++) {
		int peer = ibc_rd_unfold_rank(a->n, nr ^ mask);
		int size = hi - lo;
		int plo = (nr & mask) ? lo - size : hi;
		uint64_t off = ibc_block_offset(count, p, lo);
		uint64_t poff = ibc_block_offset(count, p, plo);

		ibc_sched_emit_chunked(&o, IBC_SCHED_SEND, 0, peer, IBC_SCHED_PHASE_RAB_AG, s, off,
				       ibc_block_offset(count, p, hi) - off, a->chunk);
		ibc_sched_emit_chunked(&o, IBC_SCHED_RECV, 0, peer, IBC_SCHED_PHASE_RAB_AG, s, poff,
				       ibc_block_offset(count, p, plo + size) - poff, a->chunk);
		if (nr & mask)
			lo = plo;
		else
			hi = plo + size;
	}
	if (r < 2 * rem)
		ibc_sched_emit_chunked(&o, IBC_SCHED_SEND, 0, r - 1, IBC_SCHED_PHASE_FOLD, 1, 0,
				       count, a->chunk);
	return o.n;
}
