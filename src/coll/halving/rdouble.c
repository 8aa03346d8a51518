/* SPDX-License-Identifier: MIT */
/*
 * rdouble.c - recursive doubling all-reduce for small messages, with the
 * fold for a number of ranks that is not a power of two: the program one
 * rank runs (sched.h). Sources: MPICH MPIR_Allreduce_intra_recursive_doubling;
 * R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of collective
 * communication operations in MPICH", IJHPCA 19(1), 2005, section 4.5.
 *
 * Schedule, n ranks, p = largest power of two <= n, rem = n - p:
 *   fold:   ranks r < 2*rem pair up (r even, r+1 odd); the even rank sends
 *           its vector to r+1, which folds it in with the even rank's data
 *           as the left operand, and sits out; the others are renumbered
 *           0..p-1 (odd r < 2*rem -> r/2, r >= 2*rem -> r - rem).
 *   step s = 0 .. log2(p)-1: exchange the whole vector with the rank whose
 *           new number differs in bit s, and fold: W = lower OP higher (the
 *           lower rank's partial is the left operand on both sides, so both
 *           partners compute the same bits).
 *   unfold: the odd rank r < 2*rem sends the result to r-1.
 *
 *   n = 6 (p = 4, rem = 2), new numbers in brackets:
 *     fold      0 -> 1[0]   2 -> 3[1]   4[2]   5[3]
 *     s = 0     [0] <-> [1]             [2] <-> [3]
 *     s = 1     [0] <-> [2]   [1] <-> [3]
 *     unfold    1 -> 0      3 -> 2
 *
 * log2(p) (+2 when n is not a power of two) message steps, each carrying
 * the whole vector: latency-optimal, bandwidth log2(p) * count. After step
 * s every group of 2^(s+1) new ranks holds bitwise-identical partials, so
 * every rank ends with the same bits. Long vectors are cut into chunks so
 * that reduction overlaps reception (and tests can force pipelining).
 */
#include "config.h"

#include "coll/algo.h"
#include "coll/sched.h"

/**
 * ibc_rd_fold() - Fold @n ranks onto a power of two (see file header).
 * @n:          [in]  number of ranks, >= 1.
 * @r:          [in]  this rank.
 * @newrank_p:  [out] new rank in 0..p-1, or -1 for a rank that sits out.
 *
 * Return: p, the largest power of two <= @n. Pure.
 */
int ibc_rd_fold(int n, int r, int *newrank_p)
{
	int p = 1;
	int rem;

	while (p * 2 <= n)
		p *= 2;
	rem = n - p;
	if (r < 2 * rem)
		*newrank_p = (r & 1) ? r / 2 : -1;
	else
		*newrank_p = r - rem;
	return p;
}

/**
 * ibc_rd_unfold_rank() - The rank whose new rank is @nr.
 * @n:  [in] number of ranks.
 * @nr: [in] new rank, 0 <= @nr < p.
 * Return: the original rank. Pure.
 */
int ibc_rd_unfold_rank(int n, int nr)
{
	int p = 1;
	int rem;

	while (p * 2 <= n)
		p *= 2;
	rem = n - p;
	return nr < rem ? 2 * nr + 1 : nr + rem;
}

/**
 * ibc_rd_allreduce_prog() - The recursive doubling all-reduce program.
 * @a:   [in]  n, rank, count (elements), chunk (elements).
 * @ops: [out] up to @max ops (NULL when @max is 0).
 * @max: [in]  room in @ops.
 *
 * Return: number of ops of the whole program. Pure and thread-safe.
 */
size_t ibc_rd_allreduce_prog(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
			     size_t max)
{
	struct ibc_sched_out o = { .ops = ops, .max = max, .n = 0 };
	int r = a->rank;
	int nr;
	int p;
	int rem;
	int mask;
	int s;

	if (a->n <= 1 || a->count == 0)
		return 0;
	p = ibc_rd_fold(a->n, r, &nr);
	rem = a->n - p;
	if (r < 2 * rem) {
		if (nr < 0) {
			ibc_sched_emit_chunked(&o, IBC_SCHED_SEND, 0, r + 1,
					       IBC_SCHED_PHASE_FOLD, 0, 0, a->count, a->chunk);
			ibc_sched_emit_chunked(&o, IBC_SCHED_RECV, 0, r + 1,
					       IBC_SCHED_PHASE_FOLD, 1, 0, a->count, a->chunk);
			return o.n;
		}
		ibc_sched_emit_chunked(&o, IBC_SCHED_RECV_REDUCE, IBC_SCHED_F_IN_LEFT, r - 1,
				       IBC_SCHED_PHASE_FOLD, 0, 0, a->count, a->chunk);
	}
	for (mask = 1, s = 0; mask < p; mask <<= 1, s++) {
		int peer = ibc_rd_unfold_rank(a->n, nr ^ mask);

		ibc_sched_emit_chunked(&o, IBC_SCHED_SEND, 0, peer, IBC_SCHED_PHASE_RD, s, 0,
				       a->count, a->chunk);
		ibc_sched_emit_chunked(&o, IBC_SCHED_RECV_REDUCE,
				       peer < r ? IBC_SCHED_F_IN_LEFT : 0,
				       peer, IBC_SCHED_PHASE_RD, s, 0, a->count, a->chunk);
	}
	if (r < 2 * rem)
		ibc_sched_emit_chunked(&o, IBC_SCHED_SEND, 0, r - 1, IBC_SCHED_PHASE_FOLD, 1, 0,
				       a->count, a->chunk);
	return o.n;
}
