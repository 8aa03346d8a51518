/* SPDX-License-Identifier: MIT */
/*
 * dp_ibc.h - the trainer's data-parallel collectives (struct dp_ops of
 * train.h) over ibcoll. The only file of the trainer that calls ibcoll.
 */
#ifndef IBC_TRAINER_DP_IBC_H
#define IBC_TRAINER_DP_IBC_H

#include "train.h"

/**
 * dp_ibc_init() - Join the job described by the environment.
 * @dp: [out] rank, size and ops.
 *
 * With a launcher environment (IBC_NRANKS, or mpirun's OMPI_COMM_WORLD_SIZE,
 * PMI_SIZE, SLURM_NTASKS) of more than one rank, creates an ibcoll
 * communicator with ibc_comm_init_env() (IBC_ROOT gives the rendezvous);
 * otherwise runs as a single process (R = 1, no communicator).
 * Return: 0, or -1 with the ibcoll error on stderr.
 */
int dp_ibc_init(struct dp *dp);

/* Barrier (so no rank leaves while others still talk), then destroy. */
void dp_ibc_fini(struct dp *dp);

/*
 * dp_ibc_mem_alloc(), dp_ibc_mem_free() - ibc_mem_alloc()/ibc_mem_free()
 * in gpt2_set_buffer_alloc()'s shape: the model's parameters and
 * gradients in memory that verbs registers once and local peers map.
 */
void *dp_ibc_mem_alloc(size_t nbytes);
void dp_ibc_mem_free(void *p);
/*
 * dp_ibc_abort() - after a local error: abort the communicator (no barrier),
 * so that the other ranks fail at once with "rank R aborted" instead of a
 * mismatch between this rank's exit path and their next collective.
 */
void dp_ibc_abort(struct dp *dp);

/* a barrier; 0 or -1 */
int dp_ibc_barrier(struct dp *dp);

/**
 * dp_ibc_agree_step() - ibc_comm_agree() on whether the step succeeded on
 * every rank (--elastic, once per step, between its collectives and the
 * optimizer update).
 * @ok:        [in]  1 when this rank's trainer_step_grads() succeeded.
 * @all_ok_p:  [out] 1 when it succeeded on every rank and no rank is dead.
 * @failed:    [out] room for dp->nranks ranks: those agreed dead.
 * @nfailed_p: [out] how many.
 * Return: 0, or -1 (the agreement itself failed: message on stderr).
 */
int dp_ibc_agree_step(struct dp *dp, int ok, int *all_ok_p, int *failed, int *nfailed_p);

/**
 * dp_ibc_shrink() - Revoke the communicator, ibc_comm_shrink() it to the
 * live ranks and destroy the old one; dp->ctx, rank and nranks describe
 * the new one on return.
 * Return: 0, or -1 (message on stderr; dp unchanged).
 */
int dp_ibc_shrink(struct dp *dp);

/**
 * dp_ibc_join() - Join a running elastic job as a replacement (ibc_gpt2
 * --join DIR): create DIR/join.request, wait up to @timeout_ms for the
 * job's DIR/join.id (ibc_comm_grow_id() of its communicator, the new size,
 * this process's rank and the job's V), then ibc_comm_grow() into it.
 * @vranks_p: [out] the job's cfg.vranks.
 * Return: 0, or -1 (message on stderr).
 */
int dp_ibc_join(struct dp *dp, const char *dir, int timeout_ms, int *vranks_p);

/**
 * dp_ibc_offer_join() - On the ranks of an elastic job after a shrink: if a
 * replacement asks within @wait_ms (rank 0 looks for DIR/join.request; its
 * answer is shared by an all-reduce), grow the communicator by one rank
 * for it (rank 0 writes DIR/join.id) and destroy the old one.
 * @grown_p: [out] 1 when it grew (dp describes the new communicator); 0
 *           also when a replacement asked but did not join within
 *           IBC_BOOTSTRAP_TIMEOUT_MS (its request is removed, the job goes on).
 * Return: 0, or -1 (message on stderr).
 */
int dp_ibc_offer_join(struct dp *dp, const char *dir, int wait_ms, int vranks, int *grown_p);

#endif /* IBC_TRAINER_DP_IBC_H */
