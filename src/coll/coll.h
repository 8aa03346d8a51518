/* SPDX-License-Identifier: MIT */
/*
 * Layer coll (src/coll/, above net): the algorithms (ring/, tree/,
 * halving/, the program executor, the shm all-reduce) and reductions.
 *
 * coll.h - the coll layer's interface to the layers above: its part of a
 * communicator (init/fini), and the dispatch of an operation to the
 * algorithm it is given (coll.c). The algorithms themselves and what they
 * share are in algo.h; each runs one operation to completion in the calling
 * thread (the progress thread or the caller), posting nonblocking
 * sends/receives through the net layer, and sees only algo.h, net/net.h and
 * transport/transport.h (never a transport's private header).
 */
#ifndef IBC_COLL_H
#define IBC_COLL_H

#include "coll/algo.h"
#include "net/net.h"

/*
 * ibc_coll_init() / ibc_coll_fini() - the coll layer of a communicator
 * whose net layer @net is set up: maps the shm all-reduce segment where
 * every rank is on this host (collective: every rank calls it); fini frees
 * the scratch and the segment.
 */
ibc_status_t ibc_coll_init(struct ibc_coll *coll, struct ibc_net *net);
void ibc_coll_fini(struct ibc_coll *coll);

/**
 * ibc_coll_run() - Run one operation on host buffers to completion.
 * @coll:   [in] the communicator's coll layer.
 * @op:     [in,out] the operation (count > 0 unless a barrier).
 * @choice: [in] for all-reduce, broadcast and reduce: the algorithm,
 *          protocol and chunk (the tuner's); ignored by the others, which
 *          have one algorithm each.
 * Return: IBC_OK, or the algorithm's error, with which the communicator is
 * failed and logged: IBC_ERR_REMOTE or IBC_ERR_TIMEOUT (a peer died or is
 * late past IBC_TIMEOUT_MS), IBC_ERR_INVALID_USAGE (ranks made mismatched
 * calls), IBC_ERR_NO_MEMORY (scratch), IBC_ERR_SYSTEM (a transport's
 * system call). Blocking; the thread running the communicator's operations.
 */
ibc_status_t ibc_coll_run(struct ibc_coll *coll, struct ibc_op *op,
			  const struct ibc_algo_choice *choice);

/*
 * ibc_coll_announce() - tell the ranks of a single-host communicator which
 * operation this rank runs next (the shm all-reduce compares them, so that
 * mismatched calls fail instead of waiting); before the tuner's choice,
 * whose first call is itself collective.
 */
void ibc_coll_announce(struct ibc_coll *coll, const struct ibc_op *op);

/*
 * ibc_coll_idle_check() - between calls: finish the checks that an eager
 * call left for later (the shm segment's broadcast, ibc_shmar_idle_check()):
 * without waiting (@settle 0: an asynchronous-error poll), or, at destroy
 * (@settle 1), waiting until every rank has made that call or left the
 * communicator, reading the segment only. Returns IBC_OK, or
 * IBC_ERR_INVALID_USAGE (mismatched calls; the communicator is failed), or
 * with @settle IBC_ERR_REMOTE (a rank left or exited without making the
 * call) and IBC_ERR_TIMEOUT. The thread running the communicator's
 * operations, or one holding its place (ibc_exec_idle_check()).
 */
ibc_status_t ibc_coll_idle_check(struct ibc_coll *coll, int settle);

/*
 * ibc_coll_unsettled() - 1 while this rank's last call returned before the
 * other ranks' calls were compared with it (an eager broadcast, not yet
 * settled by a later call or ibc_coll_idle_check()): its success is
 * provisional. No locking; the thread running the communicator's operations.
 */
int ibc_coll_unsettled(const struct ibc_coll *coll);

/* ibc_coll_run() of an all-reduce, broadcast or reduce @op with @c */
ibc_status_t ibc_coll_run_choice(struct ibc_coll *coll, struct ibc_op *op,
				 const struct ibc_algo_choice *c);

#endif /* IBC_COLL_H */
