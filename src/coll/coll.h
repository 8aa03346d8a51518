/* SPDX-License-Identifier: MIT */
/*
 * coll.h - the algorithms' entry point and shared helpers. Algorithms see
 * only this header, core/net.h and transport/transport.h (never a
 * transport's private header). Each algorithm runs one operation to
 * completion in the calling thread (the progress thread or the caller),
 * posting nonblocking sends/receives through the net layer.
 */
#ifndef IBC_COLL_H
#define IBC_COLL_H

#include "base/util.h"
#include "core/comm.h"
#include "core/net.h"

/* run @req on @comm: pick the algorithm, execute it; IBC_OK or an error (logged) */
ibc_status_t ibc_coll_run(struct ibc_comm *comm, struct ibc_request *req);
/* run all-reduce/broadcast/reduce @req with the algorithm, protocol and chunk of @c (coll.c) */
struct ibc_algo_choice;
ibc_status_t ibc_coll_run_choice(struct ibc_comm *comm, struct ibc_request *req,
				 const struct ibc_algo_choice *c);

/* descriptor of message @step of @req (step encodes phase, ring step and chunk) */
static inline void ibc_coll_desc(const struct ibc_request *req, uint32_t step, int accum,
				 struct ibc_msg_desc *d)
{
	d->seq = req->seq;
	d->coll = (uint8_t)(req->coll == IBC_COLL_RECV ? IBC_COLL_SEND : req->coll);
	d->dtype = (uint8_t)req->dtype;
	d->op = (uint8_t)req->op;
	d->flags = (uint8_t)((accum ? IBC_DESC_F_ACCUM_FP32 : 0) | req->proto_flags);
	d->count = req->count;
	d->root = req->root;
	d->step = step;
	d->reserved = 0;
}

/* step numbering for descriptors: phase (4 bits) | ring step (12 bits) | chunk (16 bits) */
#define IBC_COLL_STEP(phase, s, ci) \
	(((uint32_t)(phase) << 28) | (((uint32_t)(s) & 0xfffu) << 16) | ((uint32_t)(ci) & 0xffffu))

/* free a communicator's tuner state (select.c; comm.c calls it at destruction) */
struct ibc_tuner;
void ibc_tuner_destroy(struct ibc_tuner *t);

/* the shm all-reduce (shm_allreduce.c): set up at communicator creation,
 * announce each collective, run one, free the segment */
struct ibc_shmar;
ibc_status_t ibc_shmar_init(struct ibc_comm *comm);
void ibc_shmar_announce(struct ibc_comm *comm, const struct ibc_request *req);
int ibc_shmar_usable(const struct ibc_comm *comm);      /* 1 if the segment is mapped everywhere */
ibc_status_t ibc_shm_allreduce(struct ibc_comm *comm, struct ibc_request *req);
void ibc_shmar_destroy(struct ibc_shmar *s);

/* grow the communicator's scratch area to @nbytes (kept across operations) */
ibc_status_t ibc_coll_scratch(struct ibc_comm *comm, size_t nbytes, void **p);

/* ring algorithms (ring/ring.c) */
ibc_status_t ibc_ring_allreduce(struct ibc_comm *comm, struct ibc_request *req);
ibc_status_t ibc_ring_reduce_scatter(struct ibc_comm *comm, struct ibc_request *req);
ibc_status_t ibc_ring_allgather(struct ibc_comm *comm, struct ibc_request *req);
ibc_status_t ibc_ring_broadcast(struct ibc_comm *comm, struct ibc_request *req);
ibc_status_t ibc_ring_reduce(struct ibc_comm *comm, struct ibc_request *req);

/* point-to-point based (p2p.c) */
ibc_status_t ibc_coll_p2p(struct ibc_comm *comm, struct ibc_request *req);
ibc_status_t ibc_coll_p2p_post(struct ibc_comm *comm, struct ibc_request *req, struct ibc_treq *tr,
			       int nowait);
ibc_status_t ibc_coll_alltoall(struct ibc_comm *comm, struct ibc_request *req);
ibc_status_t ibc_coll_barrier(struct ibc_comm *comm, struct ibc_request *req);

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

#endif /* IBC_COLL_H */
