/* SPDX-License-Identifier: MIT */
/*
 * api_internal.h - what the API layer's files share: the communicator's
 * creation around a unique id (comm.c), the registry's quiet entry, and
 * the executor's thread and queue (exec.c).
 */
#ifndef IBC_API_INTERNAL_H
#define IBC_API_INTERNAL_H

#include "api/comm.h"
#include "boot/bootstrap.h"

/* join the job of @uid as @rank of @nranks and build the communicator (comm.c) */
ibc_status_t ibc_comm_init_uid(struct ibc_comm **comm_p, int nranks,
			       const struct ibc_boot_uid *uid, int rank);

/* enter @comm for a request call: silent, 0 when entered, -1 for a dead handle */
int ibc_comm_enter_quiet(struct ibc_comm *comm);

/* the progress thread's body (exec.c); its argument is the communicator */
void *ibc_exec_thread(void *arg);

/* complete every queued request with the communicator's error (ibc_comm_abort) */
void ibc_exec_cancel_queued(struct ibc_comm *comm);

#endif /* IBC_API_INTERNAL_H */
