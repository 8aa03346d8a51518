/* SPDX-License-Identifier: MIT */
/*
 * binomial.c - binomial-tree broadcast and reduce, pipelined in chunks for
 * large messages: the programs one rank runs (sched.h). Sources: MPICH
 * MPIR_Bcast_intra_binomial / MPIR_Reduce_intra_binomial; R. Thakur,
 * R. Rabenseifner, W. Gropp, "Optimization of collective communication
 * operations in MPICH", IJHPCA 19(1), 2005.
 *
 * Ranks are renumbered relative to the root, v = (r - root) mod n. The
 * parent of v > 0 is v with its lowest set bit cleared; the children of v
 * are v + 1, v + 2, v + 4, ... below v's lowest set bit (every power of two
 * below n for the root), those < n. For n = 8 (v numbering):
 *
 *                0
 *          /     |    \
 *         4      2     1
 *        / \     |
 *       6   5    3
 *       |
 *       7
 *
 * Height ceil(log2 n); the subtree of child v + 2^k holds 2^k ranks
 * (fewer at the edge), so the root's largest child is served first.
 *
 * Broadcast, for each chunk c in order:
 *   v > 0: receive chunk c from the parent into W (the user's recvbuf);
 *   send chunk c to the children, largest subtree first (v + 2^k for
 *   descending k).
 * Reduce, for each chunk c in order:
 *   receive chunk c from each child, smallest subtree first (ascending k),
 *   and fold it in: W = W OP in (own data is the left operand of the first
 *   fold); v > 0: send the partial to the parent. The root ends with the
 *   result; the order of the folds is a fixed function of (n, root, rank).
 * Latency ceil(log2 n) message steps; the root sends (broadcast) or
 * receives (reduce) every chunk ceil(log2 n) times, so for large messages
 * the pipelined chain (ring/ring.c) has the better bandwidth and the tuner
 * (src/tune) picks between them.
 */
#include "config.h"

#include "coll/algo.h"
#include "coll/sched.h"

/**
 * ibc_binomial_children() - Rank @r's parent and children in the binomial
 * tree over @n ranks rooted at @root.
 * @n:        [in]  number of ranks, >= 1.
 * @root:     [in]  root rank.
 * @r:        [in]  this rank.
 * @parent_p: [out] parent rank, -1 for the root.
 * @child:    [out] children ranks, smallest subtree first (room for 32).
 *
 * Return: number of children. Pure; O(log n).
 */
int ibc_binomial_children(int n, int root, int r, int *parent_p, int child[32])
{
	int v = ibc_mod(r - root, n);
	int nc = 0;
	int mask;

	*parent_p = v == 0 ? -1 : ibc_mod((v & (v - 1)) + root, n);
	for (mask = 1; mask < n; mask <<= 1) {
		if (v & mask)
			break;
		if (v + mask < n && nc < 32)
			child[nc++] = ibc_mod(v + mask + root, n);
	}
	return nc;
}

/* ceil(log2 n): the height of the binomial tree */
int ibc_binomial_height(int n)
{
	int h = 0;

	while ((1 << h) < n && h < 31)
		h++;
	return h;
}

/**
 * ibc_binomial_bcast_prog() - The pipelined binomial broadcast program.
 * @a:   [in]  n, rank, count (elements), chunk (elements), root.
 * @ops: [out] up to @max ops (NULL when @max is 0).
 * @max: [in]  room in @ops.
 *
 * Return: number of ops of the whole program. Pure and thread-safe.
 */
size_t ibc_binomial_bcast_prog(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
			       size_t max)
{
	struct ibc_sched_out o = { .ops = ops, .max = max, .n = 0 };
	int child[32];
	int parent;
	int nc;
	uint64_t ch;
	uint64_t c;
	uint64_t k;
	int i;

	if (a->n <= 1 || a->count == 0)
		return 0;
	nc = ibc_binomial_children(a->n, a->root, a->rank, &parent, child);
	ch = ibc_sched_chunk_for(a->count, a->chunk);
	k = IBC_DIV_UP(a->count, ch);
	for (c = 0; c < k; c++) {
		uint64_t off = c * ch;
		uint64_t cnt = IBC_MIN(ch, a->count - off);
		uint32_t step = IBC_COLL_STEP(IBC_SCHED_PHASE_BINOMIAL, 0, c);

		if (parent >= 0)
			ibc_sched_emit(&o, IBC_SCHED_RECV, 0, parent, step, off, cnt);
		for (i = nc - 1; i >= 0; i--)
			ibc_sched_emit(&o, IBC_SCHED_SEND, 0, child[i], step, off, cnt);
	}
	return o.n;
}

/**
 * ibc_binomial_reduce_prog() - The pipelined binomial reduce program.
 * @a:   [in]  n, rank, count (elements), chunk (elements), root.
 * @ops: [out] up to @max ops (NULL when @max is 0).
 * @max: [in]  room in @ops.
 *
 * Return: number of ops of the whole program. Pure and thread-safe.
 */
size_t ibc_binomial_reduce_prog(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
				size_t max)
{
	struct ibc_sched_out o = { .ops = ops, .max = max, .n = 0 };
	int child[32];
	int parent;
	int nc;
	uint64_t ch;
	uint64_t c;
	uint64_t k;
	int i;

	if (a->n <= 1 || a->count == 0)
		return 0;
	nc = ibc_binomial_children(a->n, a->root, a->rank, &parent, child);
	ch = ibc_sched_chunk_for(a->count, a->chunk);
	k = IBC_DIV_UP(a->count, ch);
	for (c = 0; c < k; c++) {
		uint64_t off = c * ch;
		uint64_t cnt = IBC_MIN(ch, a->count - off);
		uint32_t step = IBC_COLL_STEP(IBC_SCHED_PHASE_BINOMIAL, 1, c);

		for (i = 0; i < nc; i++)
			ibc_sched_emit(&o, IBC_SCHED_RECV_REDUCE, 0, child[i], step, off, cnt);
		if (parent >= 0)
			ibc_sched_emit(&o, IBC_SCHED_SEND, 0, parent, step, off, cnt);
	}
	return o.n;
}
