/* SPDX-License-Identifier: MIT */
/*
 * registry.c - the live communicators of the process, so that a destroyed
 * or aborted handle is detected at an API entry instead of being used, and
 * the count of the callers inside the library, which ibc_comm_abort()
 * waits for before it frees a communicator.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "api/api.h"
#include "base/log.h"

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibc_comm **reg_comms;
static int reg_n;
static int reg_cap;

int ibc_registry_add(struct ibc_comm *comm)
{
	pthread_mutex_lock(&reg_lock);
	if (reg_n == reg_cap) {
		int ncap = reg_cap ? 2 * reg_cap : 16;
		struct ibc_comm **nc = realloc(reg_comms, sizeof(*nc) * (size_t)ncap);

		if (!nc) {
			pthread_mutex_unlock(&reg_lock);
			return -1;
		}
		reg_comms = nc;
		reg_cap = ncap;
	}
	reg_comms[reg_n++] = comm;
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

void ibc_registry_remove(struct ibc_comm *comm)
{
	int i;

	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < reg_n; i++) {
		if (reg_comms[i] == comm) {
			reg_comms[i] = reg_comms[--reg_n];
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
}

/*
 * ibc_comm_enter() - validate a handle at an API entry and count the caller
 * (ibc_comm_abort waits for callers to leave). IBC_ERR_INVALID_ARG for NULL,
 * IBC_ERR_INVALID_USAGE for a destroyed or aborting communicator.
 */
ibc_status_t ibc_comm_enter(struct ibc_comm *comm, const char *fn)
{
	int i;
	int found = 0;

	if (!comm) {
		IBC_LOG_ERROR(COLL, "%s: communicator is NULL", fn);
		return IBC_ERR_INVALID_ARG;
	}
	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < reg_n; i++) {
		if (reg_comms[i] == comm) {
			found = 1;
			break;
		}
	}
	if (found && !__atomic_load_n(&comm->net.aborting, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&comm->ncallers, 1, __ATOMIC_ACQ_REL);
	else
		found = 0;
	pthread_mutex_unlock(&reg_lock);
	if (!found) {
		IBC_LOG_ERROR(COLL, "%s: communicator %p was destroyed or aborted (or never created)", fn,
			      (void *)comm);
		return IBC_ERR_INVALID_USAGE;
	}
	ibc_log_set_rank(comm->net.rank);
	return IBC_OK;
}

/* enter @comm for a request call: silent, 0 when entered */
int ibc_comm_enter_quiet(struct ibc_comm *comm)
{
	int i;
	int found = 0;

	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < reg_n; i++)
		if (reg_comms[i] == comm)
			found = 1;
	if (found && !__atomic_load_n(&comm->net.aborting, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&comm->ncallers, 1, __ATOMIC_ACQ_REL);
	else
		found = 0;
	pthread_mutex_unlock(&reg_lock);
	return found ? 0 : -1;
}

void ibc_comm_leave(struct ibc_comm *comm)
{
	__atomic_sub_fetch(&comm->ncallers, 1, __ATOMIC_ACQ_REL);
}

int ibc_registry_take_for_abort(struct ibc_comm *comm)
{
	int i;
	int found = 0;

	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < reg_n; i++)
		if (reg_comms[i] == comm)
			found = 1;
	if (found && __atomic_exchange_n(&comm->net.aborting, 1, __ATOMIC_ACQ_REL))
		found = 0; /* another thread is aborting it */
	if (found) {
		for (i = 0; i < reg_n; i++) {
			if (reg_comms[i] == comm) {
				reg_comms[i] = reg_comms[--reg_n];
				break;
			}
		}
	}
	pthread_mutex_unlock(&reg_lock);
	return found ? 0 : -1;
}
