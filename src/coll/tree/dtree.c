/* SPDX-License-Identifier: MIT */
/*
 * dtree.c - double binary tree all-reduce: the two trees and the program
 * one rank runs (sched.h). Sources: P. Sanders, J. Speck, J. L. Traeff,
 * "Two-tree algorithms for full bandwidth broadcast, reduction and scan",
 * Parallel Computing 35(12), 2009; NCCL's "Tree" algorithm
 * (src/graph/trees.cc), whose construction of the two trees this follows.
 *
 * Tree 0 is an in-order binary tree over ranks 0..n-1. A rank r > 0 whose
 * lowest set bit is b sits at level log2(b); its children are r - b/2 and
 * r + b/2 (the right one moved down to r + b/4, r + b/8, ... while it is
 * >= n), its parent is whichever of r - b, r + b has lowest bit 2b (r - b
 * when r + b >= n). Rank 0 is the root and has one child, the largest
 * power of two below n. For n = 14:
 *
 *   0 ------------- 8
 *             _____/ \_____
 *            4             12
 *          /   \          /  \
 *        2       6      10    13
 *       / \     / \    /  \
 *      1   3   5   7  9    11
 *
 * Tree 1 is tree 0 mirrored (rank r -> n-1-r) when n is even, or shifted by
 * one (r -> r+1 mod n) when n is odd, so that the leaves of one tree (the
 * odd ranks, half of all ranks) are the inner nodes of the other:
 *
 *   n = 12, tree 0            tree 1 (mirror)
 *   0 -------- 8              11 -------- 3
 *        _____/ \                   _____/ \
 *       4        10                7        1
 *      / \      /  \              / \      / \
 *     2   6    9    11           9   5    2   0
 *    / \ / \                    / \ / \
 *   1  3 5  7                  10 8 6  4
 *
 * Schedule (rank r, n ranks): the vector is cut in two halves, half t
 * (elements [0, count/2) and [count/2, count)) travels in tree t. Each half
 * is cut into K chunks. For chunk c of tree t:
 *   up(t, c):   receive the chunk from child[0] and fold it in (W = W OP in),
 *               then the same from child[1]; send the partial to the parent
 *               (the root now holds the fully reduced chunk);
 *   down(t, c): receive the chunk from the parent (overwrite), send it to
 *               child[0] and child[1].
 * The program emits, for i = 0, 1, ..., up(0, i) up(1, i) down(0, i-L)
 * down(1, i-L) with a lag L = 2*height + 2, so the broadcast of early
 * chunks overlaps the reduction of later ones without a rank ever waiting
 * on a chunk that needs its own later work. The reduction order is fixed
 * (own data, then child[0], then child[1], at every rank), the root computes
 * each element once and everyone receives the root's bits: all ranks end
 * bitwise identical, and a run is deterministic for fixed (n, count, chunk).
 * Latency: 2 * height ~ 2 log2 n steps; each half crosses every link once
 * each way, so large messages run near link bandwidth with both directions
 * of every link busy.
 */
#include "config.h"

#include "coll/algo.h"
#include "coll/sched.h"

/* tree 0: the in-order binary tree described above */
static void btree(int n, int r, int *parent_p, int child[2])
{
	int b = 1;
	int h;

	while (b < n && !(r & b))
		b <<= 1;
	child[0] = -1;
	child[1] = -1;
	if (r == 0) {
		*parent_p = -1;
		if (n > 1)
			child[1] = b >> 1;
		return;
	}
	*parent_p = (r & (b << 1)) ? r - b : r + b;
	if (*parent_p >= n)
		*parent_p = r - b;
	h = b >> 1;
	if (!h)
		return;
	child[0] = r - h;
	while (h && r + h >= n)
		h >>= 1;
	if (h)
		child[1] = r + h;
}

static int tree_map(int n, int t, int x)
{
	if (x < 0 || t == 0)
		return x;
	return n % 2 == 0 ? n - 1 - x : (x + 1) % n;
}

static int tree_unmap(int n, int t, int x)
{
	if (t == 0)
		return x;
	return n % 2 == 0 ? n - 1 - x : (x - 1 + n) % n;
}

static void node_raw(int n, int t, int r, int *parent_p, int child[2])
{
	int c[2];
	int p;

	btree(n, tree_unmap(n, t, r), &p, c);
	*parent_p = tree_map(n, t, p);
	child[0] = tree_map(n, t, c[0]);
	child[1] = tree_map(n, t, c[1]);
}

/**
 * ibc_dtree_node() - Rank @r's parent, children and depth in tree @t.
 * @n:      [in]  number of ranks, >= 1.
 * @t:      [in]  0 or 1.
 * @r:      [in]  rank, 0 <= @r < @n.
 * @node_p: [out] parent (-1 at the root), children (-1 where absent), depth.
 *
 * Pure; O(log n). See the file header for the construction.
 */
void ibc_dtree_node(int n, int t, int r, struct ibc_dtree_node *node_p)
{
	int p;
	int c[2];
	int x = r;
	int depth = 0;

	node_raw(n, t, r, &p, c);
	node_p->parent = p;
	node_p->child[0] = c[0];
	node_p->child[1] = c[1];
	while (p >= 0 && depth <= 64) {
		int cc[2];

		depth++;
		x = p;
		node_raw(n, t, x, &p, cc);
	}
	node_p->depth = depth;
}

/**
 * ibc_dtree_height() - Height of the deeper of the two trees over @n ranks.
 * @n: [in] number of ranks, >= 1.
 * Return: the largest depth of any rank in either tree (0 for n = 1).
 */
int ibc_dtree_height(int n)
{
	int h = 0;
	int t;
	int r;

	/* the deepest ranks are the level-0 (odd) ones; scanning all is O(n log n) but
	 * n is small and this runs once per decision cache miss */
	for (t = 0; t < 2; t++) {
		for (r = 0; r < n; r++) {
			struct ibc_dtree_node nd;

			ibc_dtree_node(n, t, r, &nd);
			if (nd.depth > h)
				h = nd.depth;
		}
	}
	return h;
}

struct dtree_half {
	struct ibc_dtree_node nd;
	uint64_t off;           /* first element of the half */
	uint64_t len;           /* elements in the half */
	uint64_t ch;            /* chunk, elements */
	uint64_t k;             /* chunks */
};

static void emit_up(struct ibc_sched_out *o, const struct dtree_half *h, int t, uint64_t c)
{
	uint64_t off = h->off + c * h->ch;
	uint64_t cnt = IBC_MIN(h->ch, h->len - c * h->ch);
	uint32_t step = IBC_COLL_STEP(IBC_SCHED_PHASE_TREE_UP, t, c);
	int i;

	for (i = 0; i < 2; i++)
		if (h->nd.child[i] >= 0)
			ibc_sched_emit(o, IBC_SCHED_RECV_REDUCE, 0, h->nd.child[i], step, off, cnt);
	if (h->nd.parent >= 0)
		ibc_sched_emit(o, IBC_SCHED_SEND, 0, h->nd.parent, step, off, cnt);
}

static void emit_down(struct ibc_sched_out *o, const struct dtree_half *h, int t, uint64_t c)
{
	uint64_t off = h->off + c * h->ch;
	uint64_t cnt = IBC_MIN(h->ch, h->len - c * h->ch);
	uint32_t step = IBC_COLL_STEP(IBC_SCHED_PHASE_TREE_DOWN, t, c);
	int i;

	if (h->nd.parent >= 0)
		ibc_sched_emit(o, IBC_SCHED_RECV, 0, h->nd.parent, step, off, cnt);
	for (i = 0; i < 2; i++)
		if (h->nd.child[i] >= 0)
			ibc_sched_emit(o, IBC_SCHED_SEND, 0, h->nd.child[i], step, off, cnt);
}

/**
 * ibc_dtree_allreduce_prog() - The double binary tree all-reduce program of
 * rank @a->rank (schedule in the file header).
 * @a:   [in]  n, rank, count (elements), chunk (elements).
 * @ops: [out] up to @max ops; may be NULL when @max is 0.
 * @max: [in]  room in @ops.
 *
 * Return: the number of ops of the whole program (0 when n == 1).
 * Pure and thread-safe.
 */
size_t ibc_dtree_allreduce_prog(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
				size_t max)
{
	struct ibc_sched_out o = { .ops = ops, .max = max, .n = 0 };
	struct dtree_half h[2];
	uint64_t kmax;
	uint64_t lag;
	uint64_t i;
	int t;

	if (a->n <= 1 || a->count == 0)
		return 0;
	for (t = 0; t < 2; t++) {
		ibc_dtree_node(a->n, t, a->rank, &h[t].nd);
		h[t].off = t == 0 ? 0 : a->count / 2;
		h[t].len = t == 0 ? a->count / 2 : a->count - a->count / 2;
		h[t].ch = ibc_sched_chunk_for(h[t].len, a->chunk);
		h[t].k = h[t].len ? IBC_DIV_UP(h[t].len, h[t].ch) : 0;
	}
	kmax = IBC_MAX(h[0].k, h[1].k);
	lag = 2 * (uint64_t)ibc_dtree_height(a->n) + 2;
	for (i = 0; i < kmax + lag; i++) {
		for (t = 0; t < 2; t++)
			if (i < h[t].k)
				emit_up(&o, &h[t], t, i);
		for (t = 0; t < 2; t++)
			if (i >= lag && i - lag < h[t].k)
				emit_down(&o, &h[t], t, i - lag);
	}
	return o.n;
}
