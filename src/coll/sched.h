/* SPDX-License-Identifier: MIT */
/*
 * sched.h - schedules ("programs") of the tree and latency-optimal
 * algorithms, and the executor that runs them.
 *
 * Every algorithm in src/coll/tree/ is written as a PURE function that, from
 * (n, rank, count, chunk, root), lists the operations one rank performs on
 * its working buffer W, in order: send a range of W to a peer, receive a
 * range of W from a peer, or receive and reduce into a range of W. The same
 * list drives the real run (sched_exec.c posts the receives ahead, overlaps
 * chunks and reduces) and the network-free unit test (tests/unit/
 * test_sched.c simulates every rank of n = 1..64 and checks that every
 * element is reduced exactly once, that every rank ends with the full
 * result, and that every send meets a receive of the same size).
 *
 * Semantics of a program, which the executor preserves: ops run in list
 * order; a send reads W at the moment it is issued (the executor never lets
 * a later write reach W before that send completed); a receive waits for
 * the matching message (messages between two ranks match in order); a
 * RECV_REDUCE computes W = W OP in, or W = in OP W with IBC_SCHED_F_IN_LEFT,
 * so the operand order is a fixed function of (n, rank, algorithm), never of
 * arrival order.
 */
#ifndef IBC_COLL_TREE_SCHED_H
#define IBC_COLL_TREE_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "ibcoll.h"

/* enum ibc_sched_kind - what one op does */
enum ibc_sched_kind {
	IBC_SCHED_SEND = 0,             /* send W[off, off+cnt) to peer */
	IBC_SCHED_RECV = 1,             /* receive W[off, off+cnt) from peer (overwrite) */
	IBC_SCHED_RECV_REDUCE = 2,      /* receive cnt elements, fold them into W[off..] */
	IBC_SCHED_KIND_COUNT
};

#define IBC_SCHED_F_IN_LEFT 0x1         /* RECV_REDUCE: the incoming data is the left operand */

/*
 * struct ibc_sched_op - one operation of a rank's program (32 bytes).
 * @kind:  enum ibc_sched_kind.
 * @flags: IBC_SCHED_F_*.
 * @peer:  the other rank.
 * @step:  descriptor step, IBC_COLL_STEP(phase, s, chunk); sender and
 *         receiver of one message compute the same value (checked on arrival).
 * @off:   first element of the range in W (ELEMENTS).
 * @cnt:   number of elements (>= 1; programs never contain empty messages).
 */
struct ibc_sched_op {
	uint8_t kind;
	uint8_t flags;
	uint16_t reserved;
	int32_t peer;
	uint32_t step;
	uint32_t reserved2;
	uint64_t off;
	uint64_t cnt;
};

/* descriptor phases of the programs (4 bits; ring uses 1-4, p2p.c 5-7) */
enum {
	IBC_SCHED_PHASE_TREE_UP = 8,
	IBC_SCHED_PHASE_TREE_DOWN = 9,
	IBC_SCHED_PHASE_RD = 10,
	IBC_SCHED_PHASE_RAB_RS = 11,
	IBC_SCHED_PHASE_RAB_AG = 12,
	IBC_SCHED_PHASE_FOLD = 13,
	IBC_SCHED_PHASE_BINOMIAL = 14,
	IBC_SCHED_PHASE_PROBE = 15,
};

/* the programs never cut one range into more chunks than this (bounds the op list) */
#define IBC_SCHED_MAX_CHUNKS 1024

/*
 * struct ibc_sched_args - the inputs of a program generator.
 * @n:     number of ranks (>= 1).
 * @rank:  this rank, 0 <= rank < n.
 * @count: elements of the operation (the whole vector).
 * @chunk: pipeline unit, ELEMENTS (>= 1); ranges longer than that are cut,
 *         but never into more than IBC_SCHED_MAX_CHUNKS pieces.
 * @root:  broadcast/reduce root; ignored by all-reduce programs.
 */
struct ibc_sched_args {
	int n;
	int rank;
	uint64_t count;
	uint64_t chunk;
	int root;
};

/*
 * A generator writes at most @max ops to @ops (which may be NULL when @max
 * is 0) and returns how many ops the whole program has, so a caller sizes
 * the list with a first call of max 0. Pure: no I/O, no allocation, no
 * global state; thread-safe.
 */
typedef size_t (*ibc_sched_gen_fn)(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
				   size_t max);

struct ibc_comm;
struct ibc_request;

/*
 * ibc_sched_run() - run the program of @gen for @op (all-reduce,
 * broadcast or reduce) on this rank, pipelined in chunks of @chunk_bytes
 * (sched_exec.c; kernel-doc there).
 */
ibc_status_t ibc_sched_run(struct ibc_coll *coll, struct ibc_op *op, ibc_sched_gen_fn gen,
			   size_t chunk_bytes);

/* the chunk actually used for a range of @len elements (>= 1, at most MAX_CHUNKS pieces) */
uint64_t ibc_sched_chunk_for(uint64_t len, uint64_t chunk);

/* ---- double binary tree (dtree.c) ---------------------------------------- */

/*
 * struct ibc_dtree_node - one rank's place in one of the two trees.
 * @parent: parent rank, -1 for the root.
 * @child:  up to two children, -1 where absent (the root has one, in
 *          child[1]); folds take child[0] first.
 * @depth:  edges between this rank and the root.
 */
struct ibc_dtree_node {
	int parent;
	int child[2];
	int depth;
};

/* rank @r's node in tree @t (0 or 1) of the double binary tree over @n ranks */
void ibc_dtree_node(int n, int t, int r, struct ibc_dtree_node *node_p);
/* the larger of the two trees' heights (0 for n = 1) */
int ibc_dtree_height(int n);
size_t ibc_dtree_allreduce_prog(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
				size_t max);

/* ---- binomial trees (binomial.c) ------------------------------------------ */

/*
 * ibc_binomial_children() - children of rank @r in the binomial tree rooted
 * at @root over @n ranks, in ascending subtree size (smallest first), into
 * @child (room for 32). Returns the number of children and stores the
 * parent (-1 for the root) in *@parent_p.
 */
int ibc_binomial_children(int n, int root, int r, int *parent_p, int child[32]);
int ibc_binomial_height(int n);
size_t ibc_binomial_bcast_prog(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
			       size_t max);
size_t ibc_binomial_reduce_prog(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
				size_t max);

/* ---- recursive doubling and Rabenseifner (rdouble.c, rabenseifner.c) ------ */

/*
 * ibc_rd_fold() - the fold of n ranks onto the largest power of two p <= n
 * (MPICH's non-power-of-two step): with rem = n - p, the even ranks below
 * 2*rem hand their data to the next odd rank and sit out (new rank -1);
 * the odd ones below 2*rem become r/2, the others r - rem. Returns p.
 */
int ibc_rd_fold(int n, int r, int *newrank_p);
/* the rank whose new rank is @nr (inverse of the fold for participants) */
int ibc_rd_unfold_rank(int n, int nr);
size_t ibc_rd_allreduce_prog(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
			     size_t max);
size_t ibc_rab_allreduce_prog(const struct ibc_sched_args *a, struct ibc_sched_op *ops,
			      size_t max);

/* ---- shared helper for generators ----------------------------------------- */

/*
 * struct ibc_sched_out - append cursor: ops beyond @max are counted, not
 * written, so one pass sizes and the next fills.
 */
struct ibc_sched_out {
	struct ibc_sched_op *ops;
	size_t max;
	size_t n;
};

static inline void ibc_sched_emit(struct ibc_sched_out *o, int kind, int flags, int peer,
				  uint32_t step, uint64_t off, uint64_t cnt)
{
	if (cnt == 0)
		return;
	if (o->n < o->max) {
		struct ibc_sched_op *op = &o->ops[o->n];

		op->kind = (uint8_t)kind;
		op->flags = (uint8_t)flags;
		op->reserved = 0;
		op->peer = peer;
		op->step = step;
		op->reserved2 = 0;
		op->off = off;
		op->cnt = cnt;
	}
	o->n++;
}

/* emit the op for a range cut into chunks (chunk index in the step's low 16 bits) */
void ibc_sched_emit_chunked(struct ibc_sched_out *o, int kind, int flags, int peer, int phase,
			    int s, uint64_t off, uint64_t len, uint64_t chunk);

#endif /* IBC_COLL_TREE_SCHED_H */
