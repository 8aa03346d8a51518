/* SPDX-License-Identifier: MIT */
/*
 * algo.h - what the algorithms of the coll layer share: the layer's part of
 * a communicator (struct ibc_coll), the algorithm and protocol names, the
 * scratch area, message descriptors and step numbers, the block partition,
 * and every algorithm's entry point. Algorithms include this header, never
 * coll.h (the dispatch above them). Implemented in algo.c (names, scratch)
 * and by each algorithm's file.
 */
#ifndef IBC_COLL_ALGO_H
#define IBC_COLL_ALGO_H

#include "base/coll_kind.h"
#include "base/util.h"
#include "net/net.h"

/*
 * struct ibc_coll - the coll layer's part of a communicator: the net layer
 * it talks through, and what the algorithms keep across operations.
 */
struct ibc_shmar;
struct ibc_tag_ux;
struct ibc_coll {
	struct ibc_net *net;
	void *scratch;                        /* ibc_coll_scratch(), page-aligned */
	size_t scratch_nbytes;
	struct ibc_shmar *shmar;              /* the shm all-reduce's segment, NULL when none */
	struct ibc_tag_ux *ux_head;           /* tagged envelopes taken before their receive */
	int ux_any_next;                      /* where the next any-source receive starts */
};

/* enum ibc_algo - algorithms of all-reduce, broadcast and reduce (names: ibc_algo_name) */
enum ibc_algo {
	IBC_ALGO_RING = 0,      /* ring (all-reduce) or pipelined chain (bcast/reduce) */
	IBC_ALGO_TREE = 1,      /* double binary tree (all-reduce) or binomial tree */
	IBC_ALGO_RD = 2,        /* recursive doubling (all-reduce) */
	IBC_ALGO_RAB = 3,       /* Rabenseifner (all-reduce) */
	IBC_ALGO_SHM = 4,       /* one shared segment per communicator (all-reduce, one host) */
	IBC_ALGO_COUNT
};

enum ibc_proto {
	IBC_PROTO_SIMPLE = 0,
	IBC_PROTO_LL = 1,
	IBC_PROTO_COUNT
};

/*
 * struct ibc_algo_choice - how to run an all-reduce, broadcast or reduce.
 * @algo, @proto:  enum ibc_algo, enum ibc_proto.
 * @chunk_bytes:   pipeline chunk for the tree/rd/rabenseifner programs.
 * @predicted_us:  the tuner's time for it (src/tune).
 */
struct ibc_algo_choice {
	int algo;
	int proto;
	size_t chunk_bytes;
	double predicted_us;
	int forced;             /* IBC_ALGO or IBC_PROTO named it: run as is (no shortcut
				 * such as shm_small.c's broadcast) */
	int timed;              /* ibc_tuner_select(): time this call for the re-timing
				 * (ibc_tuner_observe(); a sample of a watched size class's
				 * calls) */
};

const char *ibc_algo_name(int algo);
const char *ibc_proto_name(int proto);
/* parse names ("ring", "tree", "rd", "rabenseifner", "shm"; "simple", "ll"); -1 if unknown */
int ibc_algo_parse(const char *s);
int ibc_proto_parse(const char *s);

/* descriptor of message @step of @op (step encodes phase, ring step and chunk) */
static inline void ibc_coll_desc(const struct ibc_op *op, uint32_t step, int accum,
				 struct ibc_msg_desc *d)
{
	d->seq = op->seq;
	d->coll = (uint8_t)(op->coll == IBC_COLL_RECV ? IBC_COLL_SEND : op->coll);
	d->dtype = (uint8_t)op->dtype;
	d->op = (uint8_t)op->redop;
	d->flags = (uint8_t)((accum ? IBC_DESC_F_ACCUM_FP32 : 0) | op->proto_flags);
	d->count = op->count;
	d->root = op->root;
	d->step = step;
	d->reserved = 0;
	if (op->user)
		ibc_msg_desc_set_internal(d, op->user->coll, op->user->dtype, op->user->count);
}

/* step numbering for descriptors: phase (4 bits) | ring step (12 bits) | chunk (16 bits) */
#define IBC_COLL_STEP(phase, s, ci) \
	(((uint32_t)(phase) << 28) | (((uint32_t)(s) & 0xfffu) << 16) | ((uint32_t)(ci) & 0xffffu))

/* the shm all-reduce (shm_allreduce.c): set up at communicator creation,
 * announce each collective, run one, free the segment */
ibc_status_t ibc_shmar_init(struct ibc_coll *coll);
void ibc_shmar_announce(struct ibc_coll *coll, const struct ibc_op *op);
ibc_status_t ibc_shmar_idle_check(struct ibc_coll *coll, int settle);
int ibc_shmar_usable(const struct ibc_coll *coll);      /* 1 if the segment is mapped everywhere */
ibc_status_t ibc_shm_allreduce(struct ibc_coll *coll, struct ibc_op *op);
/* single copy for the others (shm_single.c), where ibc_shmar_single_ok() */
int ibc_shmar_single_ok(struct ibc_coll *coll, size_t nbytes);
ibc_status_t ibc_shm_allgather(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_shm_reduce_scatter(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_shm_broadcast(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_shm_alltoall(struct ibc_coll *coll, struct ibc_op *op);
/* small calls in one step of the segment (shm_small.c), where ibc_shmar_small_ok() */
int ibc_shmar_small_ok(const struct ibc_coll *coll, size_t nbytes);
int ibc_shmar_onestep_ok(const struct ibc_coll *coll, size_t nbytes);
ibc_status_t ibc_shm_small_allgather(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_shm_small_alltoall(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_shm_small_reduce_scatter(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_shm_small_broadcast(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_shm_small_barrier(struct ibc_coll *coll, struct ibc_op *op);
void ibc_shmar_leave(struct ibc_coll *coll);   /* mark this rank gone from the segment */
int ibc_shmar_unsettled(const struct ibc_shmar *s); /* an eager call not yet compared */
void ibc_shmar_destroy(struct ibc_shmar *s);

/* grow the communicator's scratch area to @nbytes (kept across operations) */
ibc_status_t ibc_coll_scratch(struct ibc_coll *coll, size_t nbytes, void **p);

/* ring algorithms (ring/ring.c) */
ibc_status_t ibc_ring_allreduce(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_ring_reduce_scatter(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_ring_allgather(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_ring_broadcast(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_ring_reduce(struct ibc_coll *coll, struct ibc_op *op);

/* point-to-point based (p2p.c) */
ibc_status_t ibc_coll_p2p(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_coll_p2p_post(struct ibc_coll *coll, struct ibc_op *op, struct ibc_treq *tr,
			       int nowait);
ibc_status_t ibc_coll_alltoall(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_coll_barrier(struct ibc_coll *coll, struct ibc_op *op);

/*
 * ibc_coll_tag_post() - post tagged send or receive @op (op->tagged) into
 * @tr (p2p_tag.c): IBC_OK once its transfer is posted (a receive whose
 * data had already arrived completes @tr at once), IBC_INPROGRESS while a
 * connection is set up or no envelope matched a receive yet (call again),
 * or the failure. ibc_coll_tag_fini() frees the envelopes taken.
 */
ibc_status_t ibc_coll_tag_post(struct ibc_coll *coll, struct ibc_op *op, struct ibc_treq *tr);
void ibc_coll_tag_fini(struct ibc_coll *coll);

/* rooted and vector collectives on point-to-point messages (vcoll.c) */
ibc_status_t ibc_coll_gather(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_coll_scatter(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_coll_allgatherv(struct ibc_coll *coll, struct ibc_op *op);
ibc_status_t ibc_coll_alltoallv(struct ibc_coll *coll, struct ibc_op *op);

/*
 * Block partition of @count elements over @n ranks: block b has
 * count / n elements, plus one for the first count % n blocks.
 */
static inline size_t ibc_block_count(size_t count, int n, int b)
{
	return count / (size_t)n + ((size_t)b < count % (size_t)n ? 1 : 0);
}

static inline size_t ibc_block_offset(size_t count, int n, int b)
{
	size_t base = count / (size_t)n;
	size_t rem = count % (size_t)n;

	return (size_t)b * base + IBC_MIN((size_t)b, rem);
}

static inline int ibc_mod(int a, int n)
{
	return ((a % n) + n) % n;
}

#endif /* IBC_COLL_ALGO_H */
