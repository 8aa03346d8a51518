/* SPDX-License-Identifier: MIT */
/*
 * registry.c - the live communicators of the process and their handles,
 * so that a destroyed or aborted handle, or one a forked child inherited,
 * is refused at an API entry instead of being used; and the count of the
 * callers inside the library, which ibc_comm_abort() waits for before it
 * frees a communicator.
 *
 * A handle is not the communicator's address: the allocator gives a new
 * communicator the address of a destroyed one, and a stale handle would
 * then work on it (issue 20, case 4). It is a 64-bit number drawn from a
 * counter that never repeats in the process, tagged so that it is never a
 * valid address (a dereference faults at once), and looked up here.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "api/api.h"
#include "base/log.h"

_Static_assert(sizeof(uintptr_t) == 8, "handles are 64-bit numbers");

/* bits 52..63 of every handle: a non-canonical x86-64 / aarch64 address */
#define HANDLE_TAG ((uintptr_t)0x1bcull << 52)

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibc_comm **reg_comms;
static int reg_n;
static int reg_cap;
static uint64_t reg_next_id;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static unsigned reg_fork_gen;           /* bumped in a child after fork() */

static void reg_on_fork_child(void)
{
	__atomic_add_fetch(&reg_fork_gen, 1, __ATOMIC_RELAXED);
	/* the child's copy of the lock may be held by a parent thread */
	pthread_mutex_init(&reg_lock, NULL);
}

static void reg_init(void)
{
	pthread_atfork(NULL, NULL, reg_on_fork_child);
}

unsigned ibc_registry_fork_gen(void)
{
	pthread_once(&reg_once, reg_init);
	return __atomic_load_n(&reg_fork_gen, __ATOMIC_RELAXED);
}

int ibc_registry_add(struct ibc_comm *comm)
{
	pthread_once(&reg_once, reg_init);
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
	comm->handle = (ibc_comm_h)(HANDLE_TAG | (uintptr_t)++reg_next_id);
	comm->fork_gen = __atomic_load_n(&reg_fork_gen, __ATOMIC_RELAXED);
	comm->creator_pid = (int)getpid();
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

/* the live communicator of @h, or NULL; reg_lock held */
static struct ibc_comm *reg_find(ibc_comm_h h)
{
	int i;

	for (i = 0; i < reg_n; i++)
		if (reg_comms[i]->handle == h)
			return reg_comms[i];
	return NULL;
}

ibc_comm_h ibc_comm_handle(const struct ibc_comm *comm)
{
	return comm ? comm->handle : NULL;
}

struct ibc_comm *ibc_comm_from_handle(ibc_comm_h h)
{
	struct ibc_comm *comm;

	pthread_mutex_lock(&reg_lock);
	comm = reg_find(h);
	pthread_mutex_unlock(&reg_lock);
	return comm;
}

/* @comm was created before this process forked (we are the child) */
static int reg_forked(const struct ibc_comm *comm)
{
	return comm->fork_gen != __atomic_load_n(&reg_fork_gen, __ATOMIC_RELAXED);
}

/*
 * ibc_comm_enter() - validate a handle at an API entry and count the caller
 * (ibc_comm_abort waits for callers to leave). IBC_ERR_INVALID_ARG for NULL,
 * IBC_ERR_INVALID_USAGE for a destroyed or aborting communicator and for one
 * created by the parent of this (forked) process: its rings, sockets and
 * locks are the parent's, so nothing of it may be touched here.
 */
ibc_status_t ibc_comm_enter(ibc_comm_h h, const char *fn, struct ibc_comm **comm_p)
{
	struct ibc_comm *comm;
	int forked = 0;

	*comm_p = NULL;
	if (!h) {
		if (fn)
			IBC_LOG_ERROR(COLL, "%s: communicator is NULL", fn);
		return IBC_ERR_INVALID_ARG;
	}
	pthread_mutex_lock(&reg_lock);
	comm = reg_find(h);
	if (comm && reg_forked(comm)) {
		forked = comm->creator_pid;
		comm = NULL;
	} else if (comm && !__atomic_load_n(&comm->net.aborting, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&comm->ncallers, 1, __ATOMIC_ACQ_REL);
	} else {
		comm = NULL;
	}
	pthread_mutex_unlock(&reg_lock);
	if ((forked || !comm) && !fn)
		return IBC_ERR_INVALID_USAGE;   /* quiet: the caller copes */
	if (forked) {
		IBC_LOG_ERROR(COLL, "%s: communicator %p belongs to process %d, the parent of this process %d (fork): a child may not use, split or destroy its parent's communicators; it may create its own",
			      fn, (void *)h, forked, (int)getpid());
		return IBC_ERR_INVALID_USAGE;
	}
	if (!comm) {
		IBC_LOG_ERROR(COLL, "%s: communicator %p was destroyed or aborted (or never created)", fn,
			      (void *)h);
		return IBC_ERR_INVALID_USAGE;
	}
	ibc_net_log_rank(&comm->net);
	*comm_p = comm;
	return IBC_OK;
}

int ibc_comm_enter_quiet(struct ibc_comm *comm)
{
	int i;
	int found = 0;

	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < reg_n; i++)
		if (reg_comms[i] == comm)
			found = 1;
	if (found && !reg_forked(comm) && !__atomic_load_n(&comm->net.aborting, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&comm->ncallers, 1, __ATOMIC_ACQ_REL);
	else
		found = 0;
	pthread_mutex_unlock(&reg_lock);
	return found ? 0 : -1;
}

int ibc_comm_forked(const struct ibc_comm *comm)
{
	int forked;

	pthread_mutex_lock(&reg_lock);
	forked = reg_forked(comm);
	pthread_mutex_unlock(&reg_lock);
	return forked;
}

void ibc_comm_leave(struct ibc_comm *comm)
{
	__atomic_sub_fetch(&comm->ncallers, 1, __ATOMIC_ACQ_REL);
}

int ibc_registry_take_for_abort(ibc_comm_h h, struct ibc_comm **comm_p)
{
	struct ibc_comm *comm;
	int i;

	pthread_mutex_lock(&reg_lock);
	comm = reg_find(h);
	if (comm && (reg_forked(comm) || __atomic_exchange_n(&comm->net.aborting, 1, __ATOMIC_ACQ_REL)))
		comm = NULL; /* the parent's, or another thread is aborting it */
	if (comm) {
		for (i = 0; i < reg_n; i++) {
			if (reg_comms[i] == comm) {
				reg_comms[i] = reg_comms[--reg_n];
				break;
			}
		}
	}
	pthread_mutex_unlock(&reg_lock);
	*comm_p = comm;
	return comm ? 0 : -1;
}
