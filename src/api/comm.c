/* SPDX-License-Identifier: MIT */
/*
 * comm.c - communicator lifecycle (create from a unique id, split,
 * destroy, abort; from the environment: comm_env.c), the registry of live
 * handles, the progress thread's placement, and the accessors. Each layer
 * sets up its own part of the communicator: the bootstrap (src/boot), the
 * net layer (src/net), the algorithms (src/coll), the tuner (src/tune) and
 * the CUDA staging state (cuda_stage.c); the executor is exec.c.
 */
#include "config.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/cuda_stage.h"
#include "base/alloc.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/socket.h"
#include "base/status.h"
#include "base/util.h"
#include "boot/boot_wire.h"
#include "coll/coll.h"
#include "cuda/cuda.h"
#include "net/net.h"
#include "topo/topo.h"
#include "tune/tune.h"

/* ------------------------------------------------------------------------ */
/* creation                                                                 */
/* ------------------------------------------------------------------------ */

/* the net layer failed the communicator: wake the threads waiting in the executor */
static void comm_on_poison(void *arg)
{
	struct ibc_comm *comm = arg;

	pthread_mutex_lock(&comm->lock);
	pthread_cond_broadcast(&comm->cond);
	pthread_mutex_unlock(&comm->lock);
}

static ibc_status_t comm_alloc(struct ibc_comm **comm_p)
{
	struct ibc_comm *comm = ibc_calloc(1, sizeof(*comm), "communicator");

	if (!comm)
		return IBC_ERR_NO_MEMORY;
	pthread_mutex_init(&comm->lock, NULL);
	pthread_cond_init(&comm->cond, NULL);
	pthread_cond_init(&comm->work_cond, NULL);
	comm->use_thread = (int)ibc_param_progress_thread();
	ibc_net_init(&comm->net);
	comm->net.on_poison = comm_on_poison;
	comm->net.on_poison_arg = comm;
	*comm_p = comm;
	return IBC_OK;
}

static void comm_free(struct ibc_comm *comm)
{
	ibc_tuner_destroy(comm->tuner);
	ibc_coll_fini(&comm->coll);
	ibc_cuda_stage_free(comm->cuda);
	ibc_net_fini(&comm->net);
	pthread_mutex_destroy(&comm->lock);
	pthread_cond_destroy(&comm->cond);
	pthread_cond_destroy(&comm->work_cond);
	ibc_free(comm);
}

/*
 * Decide where the progress thread runs (ibc_topo_progress_plan(): near the
 * NIC of the verbs transport when a peer uses it, else near the rank's GPU,
 * else on the local rank's share of the NUMA nodes) and log it at INFO.
 * Never fails: without a topology or a plan the thread stays unbound (WARN).
 * Return: 1 and @set filled when the thread is to be bound, else 0.
 */
static int comm_plan_progress(struct ibc_comm *comm, cpu_set_t *set)
{
	char cpus[IBC_TOPO_CPULIST_LEN];
	char why[IBC_TOPO_WHY_LEN];
	struct ibc_topo *topo;
	const char *nic = ibc_net_device(&comm->net);
	ibc_status_t st;
	int bind = 0;

	st = ibc_topo_shared(&topo);
	if (st == IBC_OK)
		st = ibc_topo_progress_plan(topo, nic, comm->net.gpu, comm->net.local_rank,
					    comm->net.nlocal, &bind, cpus, sizeof(cpus), why,
					    sizeof(why));
	if (st != IBC_OK) {
		IBC_LOG_WARN(TOPO, "progress thread: not bound, the topology gave no plan (%s)",
			     ibc_status_str(st));
		return 0;
	}
	if (bind && ibc_topo_cpulist_parse(cpus, set) != 0) {
		IBC_LOG_WARN(TOPO, "progress thread: not bound, cannot use CPU list \"%s\"", cpus);
		return 0;
	}
	IBC_LOG_INFO(TOPO, "progress thread: %s", why);
	return bind;
}

/* start the progress thread, bound as comm_plan_progress() decides */
static ibc_status_t comm_start_progress(struct ibc_comm *comm)
{
	pthread_attr_t attr;
	cpu_set_t set;
	int bind = comm_plan_progress(comm, &set);
	int ret = -1;

	if (bind && pthread_attr_init(&attr) == 0) {
		ret = pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
		if (ret == 0)
			ret = pthread_create(&comm->thread, &attr, ibc_exec_thread, comm);
		pthread_attr_destroy(&attr);
		if (ret)
			IBC_LOG_WARN(TOPO, "progress thread: binding refused (%s); running unbound",
				     strerror(ret));
	}
	if (ret)
		ret = pthread_create(&comm->thread, NULL, ibc_exec_thread, comm);
	if (ret) {
		IBC_LOG_ERROR(INIT, "cannot start the progress thread: %s", strerror(ret));
		return IBC_ERR_SYSTEM;
	}
	comm->thread_started = 1;
	return IBC_OK;
}

struct ibc_tuner *ibc_comm_tuner(ibc_comm_h h)
{
	struct ibc_comm *comm = ibc_comm_from_handle(h);

	return comm ? comm->tuner : NULL;
}

ibc_status_t ibc_comm_progress_cpus(ibc_comm_h h, char *buf, size_t len)
{
	struct ibc_comm *comm = ibc_comm_from_handle(h);
	cpu_set_t set;
	size_t off = 0;
	int first = -1;
	int c;

	if (!comm || !buf || !len || !comm->thread_started)
		return IBC_ERR_INVALID_ARG;
	if (pthread_getaffinity_np(comm->thread, sizeof(set), &set) != 0)
		return IBC_ERR_SYSTEM;
	buf[0] = '\0';
	for (c = 0; c <= CPU_SETSIZE; c++) {
		int in = c < CPU_SETSIZE && CPU_ISSET(c, &set);

		if (in && first < 0)
			first = c;
		if (!in && first >= 0 && off < len) {
			if (c - 1 > first)
				off += (size_t)snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "",
							first, c - 1);
			else
				off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? "," : "",
							first);
			first = -1;
		}
	}
	return IBC_OK;
}

/* build the communicator around its ready bootstrap */
static ibc_status_t comm_setup(struct ibc_comm *comm)
{
	ibc_status_t st;

	IBC_CHECK(ibc_net_setup(&comm->net));
	IBC_CHECK(ibc_coll_init(&comm->coll, &comm->net));
	IBC_CHECK(ibc_tuner_create(&comm->coll, &comm->tuner));
	if (comm->use_thread)
		IBC_CHECK(comm_start_progress(comm));
	if (ibc_registry_add(comm) != 0) {
		IBC_LOG_ERROR(INIT, "out of memory registering the communicator");
		st = IBC_ERR_NO_MEMORY;
		return st;
	}
	if (comm->net.rank == 0)
		IBC_LOG_INFO(INIT, "communicator of %d ranks ready: transport %s, progress %s, timeout %lld ms",
			     comm->net.nranks, comm->net.transport_name,
			     comm->use_thread ? "thread" : "in ibc_test/ibc_wait",
			     (long long)comm->net.timeout_ms);
	return IBC_OK;
}

/*
 * Stop the progress thread, tell the peers that this rank leaves (the
 * reason first, so that they do not blame the connections that drop next),
 * close the connections and the bootstrap. Bounded: the progress thread
 * has nothing queued (destroy drained, abort completed the queue).
 */
static void comm_teardown(struct ibc_comm *comm, int abort)
{
	if (comm->thread_started) {
		pthread_mutex_lock(&comm->lock);
		comm->stop = 1;
		pthread_cond_signal(&comm->work_cond);
		pthread_mutex_unlock(&comm->lock);
		pthread_join(comm->thread, NULL);
		comm->thread_started = 0;
	}
	ibc_comm_release_registrations(comm);
	ibc_net_teardown(&comm->net, abort);
}

ibc_status_t ibc_get_unique_id(ibc_unique_id_t *id)
{
	if (!id) {
		IBC_LOG_ERROR(INIT, "ibc_get_unique_id: id is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	ibc_fault_configure();
	return ibc_bootstrap_root_start(NULL, 0, NULL, id);
}

ibc_status_t ibc_comm_init_uid(ibc_comm_h *comm_p, int nranks,
			      const struct ibc_boot_uid *uid, int rank)
{
	struct ibc_comm *comm;
	ibc_status_t st;

	ibc_log_set_rank(rank);
	st = comm_alloc(&comm);
	if (st != IBC_OK) {
		ibc_bootstrap_report_join_failure(uid, rank, nranks, st);
		return st;
	}
	IBC_CHECK_GOTO(ibc_bootstrap_create(uid, rank, nranks, ibc_net_on_boot_error, &comm->net,
					    &comm->net.bs),
		       st, err_free);
	IBC_CHECK_GOTO(comm_setup(comm), st, err_teardown);
	*comm_p = comm->handle;
	return IBC_OK;
err_teardown:
	comm_teardown(comm, 1);
err_free:
	comm_free(comm);
	/* the error text keeps the rank; later lines of this thread must not */
	ibc_log_set_rank(-1);
	return st;
}

ibc_status_t ibc_comm_init_rank(ibc_comm_h *comm_p, int nranks, const ibc_unique_id_t *id, int rank)
{
	struct ibc_boot_uid uid;

	ibc_fault_configure();
	if (!comm_p || !id) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_rank: %s is NULL", comm_p ? "id" : "comm_p");
		return IBC_ERR_INVALID_ARG;
	}
	if (nranks < 1 || nranks > IBC_BOOT_MAX_RANKS || rank < 0 || rank >= nranks) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_rank: rank %d of %d ranks is out of range", rank,
			      nranks);
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_boot_uid_unpack(id, &uid));
	return ibc_comm_init_uid(comm_p, nranks, &uid, rank);
}

ibc_status_t ibc_comm_split(ibc_comm_h h, int color, int key, ibc_comm_h *newcomm_p)
{
	struct ibc_comm *comm;
	struct ibc_comm *nc = NULL;
	ibc_status_t st;

	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_split", &comm));
	if (!newcomm_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_split: newcomm_p is NULL");
		st = IBC_ERR_INVALID_ARG;
		goto out;
	}
	st = ibc_net_status(&comm->net);
	if (st != IBC_OK) {
		IBC_LOG_ERROR(INIT, "ibc_comm_split on a failed communicator: %s", comm->net.poison_msg);
		goto out;
	}
	/* no operation may be in flight: the bootstrap is used directly */
	IBC_CHECK_GOTO(ibc_comm_drain(comm), st, out);
	IBC_CHECK_GOTO(comm_alloc(&nc), st, out);
	IBC_CHECK_GOTO(ibc_bootstrap_split(comm->net.bs, color, key, comm->split_seq++,
					   ibc_net_on_boot_error, &nc->net, &nc->net.bs),
		       st, err_free);
	if (!nc->net.bs) {
		comm_free(nc);
		*newcomm_p = NULL;
		st = IBC_OK;
		goto out;
	}
	/* its errors name the rank in the job too (issue 20: world rank 7 read as "rank 1") */
	nc->net.world_rank = comm->net.world_rank >= 0 ? comm->net.world_rank : comm->net.rank;
	IBC_CHECK_GOTO(comm_setup(nc), st, err_teardown);
	*newcomm_p = nc->handle;
	ibc_net_log_rank(&comm->net);
	goto out;
err_teardown:
	comm_teardown(nc, 1);
err_free:
	comm_free(nc);
	ibc_net_log_rank(&comm->net);
out:
	ibc_comm_leave(comm);
	return st;
}

/* ------------------------------------------------------------------------ */
/* revoke, agree, shrink (docs/reliability.md)                              */
/* ------------------------------------------------------------------------ */

ibc_status_t ibc_comm_revoke(ibc_comm_h h)
{
	struct ibc_comm *comm;

	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_revoke", &comm));
	ibc_net_revoke(&comm->net);
	ibc_comm_leave(comm);
	return IBC_OK;
}

/* the agreement's bound: the operations' timeout, or the bootstrap's when that is off */
static int64_t comm_ft_timeout_ms(const struct ibc_comm *comm)
{
	return comm->net.timeout_ms > 0 ? comm->net.timeout_ms
					: (int64_t)ibc_param_bootstrap_timeout_ms();
}

ibc_status_t ibc_comm_agree(ibc_comm_h h, uint32_t *flag_p, int *failed_ranks, int *nfailed_p)
{
	struct ibc_comm *comm;
	uint8_t *dead = NULL;
	ibc_status_t st;
	int n;
	int i;
	int k = 0;

	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_agree", &comm));
	if (!flag_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_agree: flag_p is NULL");
		st = IBC_ERR_INVALID_ARG;
		goto out;
	}
	n = comm->net.nranks;
	dead = ibc_calloc((size_t)n, 1, "agreement result");
	if (!dead) {
		st = IBC_ERR_NO_MEMORY;
		goto out;
	}
	st = ibc_bootstrap_agree(comm->net.bs, comm->agree_seq++, flag_p, NULL, 0, NULL, dead,
				 comm_ft_timeout_ms(comm));
	if (st != IBC_OK)
		goto out;
	for (i = 0; i < n; i++) {
		if (!dead[i])
			continue;
		if (failed_ranks)
			failed_ranks[k] = i;
		k++;
	}
	if (nfailed_p)
		*nfailed_p = k;
out:
	ibc_free(dead);
	ibc_comm_leave(comm);
	return st;
}

ibc_status_t ibc_comm_shrink(ibc_comm_h h, ibc_comm_h *newcomm_p)
{
	struct ibc_comm *comm;
	struct ibc_comm *nc = NULL;
	uint8_t *dead = NULL;
	uint64_t t0 = ibc_time_ms();
	uint64_t t1;
	ibc_status_t st;
	int n;

	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_shrink", &comm));
	if (!newcomm_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_shrink: newcomm_p is NULL");
		st = IBC_ERR_INVALID_ARG;
		goto out;
	}
	n = comm->net.nranks;
	dead = ibc_calloc((size_t)n, 1, "shrink result");
	if (!dead) {
		st = IBC_ERR_NO_MEMORY;
		goto out;
	}
	IBC_CHECK_GOTO(comm_alloc(&nc), st, out);
	st = ibc_bootstrap_shrink(comm->net.bs, comm->agree_seq++, comm_ft_timeout_ms(comm),
				  ibc_net_on_boot_error, &nc->net, &nc->net.bs, dead);
	if (st != IBC_OK) {
		IBC_LOG_ERROR(INIT, "ibc_comm_shrink: the agreement on the survivors failed (%s; the line above says why)",
			      ibc_status_str(st));
		goto err_free;
	}
	t1 = ibc_time_ms();
	nc->net.world_rank = comm->net.world_rank >= 0 ? comm->net.world_rank : comm->net.rank;
	st = comm_setup(nc);
	if (st != IBC_OK) {
		IBC_LOG_ERROR(INIT, "ibc_comm_shrink: the survivors agreed, but setting up their communicator failed (%s): a survivor died or failed during it; shrink the old communicator again",
			      ibc_status_str(st));
		goto err_teardown;
	}
	{
		char left[256] = "";
		int i;

		for (i = 0; i < n; i++)
			if (dead[i])
				snprintf(left + strlen(left), sizeof(left) - strlen(left), "%s%d",
					 left[0] ? "," : "", i);
		if (nc->net.rank == 0)
			IBC_LOG_INFO(INIT, "shrink: %d -> %d ranks, left out: %s; agreement %llu ms, set-up %llu ms",
				     n, nc->net.nranks, left[0] ? left : "none",
				     (unsigned long long)(t1 - t0),
				     (unsigned long long)(ibc_time_ms() - t1));
	}
	*newcomm_p = nc->handle;
	ibc_net_log_rank(&comm->net);
	goto out;
err_teardown:
	comm_teardown(nc, 1);
err_free:
	comm_free(nc);
	ibc_net_log_rank(&comm->net);
out:
	ibc_free(dead);
	ibc_comm_leave(comm);
	return st;
}

ibc_status_t ibc_comm_grow_id(ibc_comm_h h, ibc_unique_id_t *id)
{
	struct ibc_comm *comm;
	ibc_status_t st;

	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_grow_id", &comm));
	if (!id) {
		IBC_LOG_ERROR(INIT, "ibc_comm_grow_id: id is NULL");
		st = IBC_ERR_INVALID_ARG;
		goto out;
	}
	st = ibc_net_status(&comm->net);
	if (st != IBC_OK) {
		IBC_LOG_ERROR(INIT, "ibc_comm_grow_id on a failed communicator (shrink it first): %s",
			      comm->net.poison_msg);
		st = IBC_ERR_INVALID_USAGE;
		goto out;
	}
	st = ibc_bootstrap_grow_id(comm->net.bs, id);
out:
	ibc_comm_leave(comm);
	return st;
}

ibc_status_t ibc_comm_grow(ibc_comm_h h, int nranks, const ibc_unique_id_t *id, int rank,
			   ibc_comm_h *newcomm_p)
{
	struct ibc_comm *comm = NULL;
	struct ibc_boot_uid uid;
	int size = 0;
	ibc_status_t st;

	ibc_fault_configure();
	if (!id || !newcomm_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_grow: %s is NULL", id ? "newcomm_p" : "id");
		return IBC_ERR_INVALID_ARG;
	}
	if (h) {
		IBC_CHECK(ibc_comm_enter(h, "ibc_comm_grow", &comm));
		size = comm->net.nranks;
		st = ibc_net_status(&comm->net);
		if (st != IBC_OK) {
			IBC_LOG_ERROR(INIT, "ibc_comm_grow on a failed communicator (shrink it first): %s",
				      comm->net.poison_msg);
			ibc_comm_leave(comm);
			return IBC_ERR_INVALID_USAGE;
		}
		if (rank != -1 || nranks < size) {
			IBC_LOG_ERROR(INIT, "ibc_comm_grow: a member of the communicator passes rank -1 (got %d) and nranks >= %d (got %d)",
				      rank, size, nranks);
			ibc_comm_leave(comm);
			return IBC_ERR_INVALID_ARG;
		}
		rank = comm->net.rank;
		ibc_comm_leave(comm);
	}
	if (nranks < 1 || nranks > IBC_BOOT_MAX_RANKS) {
		IBC_LOG_ERROR(INIT, "ibc_comm_grow: %d ranks is out of range (1 .. %d)", nranks,
			      IBC_BOOT_MAX_RANKS);
		return IBC_ERR_INVALID_ARG;
	}
	if (!h && (rank < 0 || rank >= nranks)) {
		IBC_LOG_ERROR(INIT, "ibc_comm_grow: a joining process needs its rank, at least the size of the communicator that grows and below %d; got %d",
			      nranks, rank);
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_boot_uid_unpack(id, &uid));
	/* members keep their rank, so the new communicator's rank is the one to log */
	st = ibc_comm_init_uid(newcomm_p, nranks, &uid, rank);
	if (st == IBC_OK && rank == 0)
		IBC_LOG_INFO(INIT, "grow: %d -> %d ranks", size, nranks);
	return st;
}

ibc_status_t ibc_comm_destroy(ibc_comm_h h)
{
	struct ibc_comm *comm;
	ibc_status_t st;

	if (!h)
		return IBC_OK;
	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_destroy", &comm));
	if (ibc_exec_in_group(comm)) {
		IBC_LOG_ERROR(INIT, "ibc_comm_destroy: inside ibc_group_start() .. ibc_group_end(); the collected requests fail");
		ibc_exec_cancel_group(comm);
	}
	st = ibc_comm_drain(comm);
	/*
	 * A peer's message that no call of this rank received: the ranks'
	 * calls differed (issue 20, case 1), say so before the connections go;
	 * and compare this rank's last call, when it was an eager broadcast,
	 * with every rank's (waiting until each made it or left)
	 */
	if (st == IBC_OK && ibc_net_status(&comm->net) == IBC_OK)
		st = ibc_exec_idle_check(comm, 1);
	/*
	 * The communicator failed (a peer's report, in another thread) before
	 * this rank's eager broadcast could be compared with the others' calls:
	 * its success was provisional, and this is the last call to say so
	 */
	else if (st == IBC_OK && ibc_coll_unsettled(&comm->coll))
		st = ibc_net_status(&comm->net);
	if (st != IBC_OK && __atomic_load_n(&comm->net.poisoned, __ATOMIC_ACQUIRE))
		ibc_log_set_last_error(comm->net.poison_msg);
	ibc_registry_remove(comm);
	ibc_comm_leave(comm);
	comm_teardown(comm, 0);
	comm_free(comm);
	ibc_log_set_rank(-1);
	return st;
}

/*
 * ibc_comm_abort() - see ibcoll.h. Order: refuse new callers (registry),
 * poison, cancel the bootstrap's blocking calls, tell the peers, complete
 * every queued request, wait (bounded) for threads inside the library to
 * leave, then free. Threads blocked in a wait notice the poison within one
 * wait slice (<= 100 ms; transports' waits are shorter).
 */
ibc_status_t ibc_comm_abort(ibc_comm_h h)
{
	struct ibc_comm *comm;
	char reason[sizeof(comm->net.poison_msg)];
	uint64_t deadline = ibc_time_ms() + 900;
	int i;

	if (!h)
		return IBC_OK;
	if (ibc_registry_take_for_abort(h, &comm) != 0) {
		IBC_LOG_ERROR(INIT, "ibc_comm_abort: communicator %p was destroyed, is being aborted, was never created, or belongs to the parent of this forked process",
			      (void *)h);
		return IBC_ERR_INVALID_USAGE;
	}
	ibc_net_log_rank(&comm->net);
	pthread_mutex_lock(&comm->net.lock);
	snprintf(reason, sizeof(reason), "%s", comm->net.poisoned ? comm->net.poison_msg : "");
	pthread_mutex_unlock(&comm->net.lock);
	ibc_net_fail_quiet(&comm->net, IBC_ERR_REMOTE, "communicator aborted by ibc_comm_abort() on rank %d",
			comm->net.rank);
	ibc_bootstrap_cancel(comm->net.bs);
	ibc_bootstrap_announce_leave(comm->net.bs, 1, reason);
	/* queued operations will never run: complete them with the poison status */
	ibc_exec_cancel_queued(comm);
	while (__atomic_load_n(&comm->ncallers, __ATOMIC_ACQUIRE) > 0 && ibc_time_ms() < deadline)
		usleep(1000);
	pthread_mutex_lock(&comm->lock);
	while (comm->running && ibc_time_ms() < deadline) {
		pthread_mutex_unlock(&comm->lock);
		usleep(1000);
		pthread_mutex_lock(&comm->lock);
	}
	i = comm->running;
	pthread_mutex_unlock(&comm->lock);
	if (i || __atomic_load_n(&comm->ncallers, __ATOMIC_ACQUIRE) > 0) {
		/* never free under a thread that is still inside: leak instead */
		IBC_LOG_WARN(INIT, "ibc_comm_abort: a thread is still inside the library after 900 ms; the communicator is left allocated");
		return IBC_OK;
	}
	comm_teardown(comm, 1);
	comm_free(comm);
	ibc_log_set_rank(-1);
	return IBC_OK;
}

ibc_status_t ibc_comm_rank(ibc_comm_h h, int *rank_p)
{
	struct ibc_comm *comm;

	if (!h || !rank_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_rank: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	/* a destroyed handle is an error, not a read of freed memory */
	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_rank", &comm));
	*rank_p = comm->net.rank;
	ibc_comm_leave(comm);
	return IBC_OK;
}

ibc_status_t ibc_comm_size(ibc_comm_h h, int *size_p)
{
	struct ibc_comm *comm;

	if (!h || !size_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_size: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_size", &comm));
	*size_p = comm->net.nranks;
	ibc_comm_leave(comm);
	return IBC_OK;
}

/*
 * ibc_comm_transport() - see ibcoll.h: the name is a static string, valid
 * after the communicator is destroyed (comm->net.transport_name is not), so it
 * is looked up among every name comm_choose_transports() can compose.
 */
ibc_status_t ibc_comm_transport(ibc_comm_h h, const char **name_p)
{
	static const char *const names[] = {
		"shm", "tcp", "ib", "shm+ib", "shm+tcp", "ib+tcp", "shm+ib+tcp", "self", "bootstrap",
	};
	struct ibc_comm *comm;
	size_t i;

	if (!h || !name_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_transport: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_transport", &comm));
	*name_p = "unknown";
	for (i = 0; i < IBC_ARRAY_SIZE(names); i++) {
		if (!strcmp(comm->net.transport_name, names[i])) {
			*name_p = names[i];
			break;
		}
	}
	ibc_comm_leave(comm);
	return IBC_OK;
}

ibc_status_t ibc_comm_reg_stats(ibc_comm_h h, struct ibc_reg_stats *stats_p)
{
	struct ibc_comm *comm;
	int i;

	if (!h || !stats_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_reg_stats: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_reg_stats", &comm));
	memset(stats_p, 0, sizeof(*stats_p));
	for (i = 0; i < comm->net.ntinst; i++) {
		const struct ibc_tinst *ti = &comm->net.tinst[i];

		if (ti->ops && ti->ctx && ti->ops->reg_stats)
			ti->ops->reg_stats(ti->ctx, stats_p);
	}
	ibc_comm_leave(comm);
	return IBC_OK;
}

ibc_status_t ibc_comm_set_timeout(ibc_comm_h h, int64_t timeout_ms)
{
	struct ibc_comm *comm;
	int i;

	if (!h) {
		IBC_LOG_ERROR(INIT, "ibc_comm_set_timeout: comm is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	if (timeout_ms < 100 || timeout_ms > 86400000) {
		IBC_LOG_ERROR(INIT, "ibc_comm_set_timeout: %lld ms is outside [100, 86400000]",
			      (long long)timeout_ms);
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_set_timeout", &comm));
	__atomic_store_n(&comm->net.timeout_ms, timeout_ms, __ATOMIC_RELAXED);
	for (i = 0; i < comm->net.ntinst; i++)
		__atomic_store_n(&comm->net.tinst[i].env.timeout_ms, timeout_ms, __ATOMIC_RELAXED);
	ibc_comm_leave(comm);
	return IBC_OK;
}

ibc_status_t ibc_comm_get_async_error(ibc_comm_h h, ibc_status_t *st_p)
{
	struct ibc_comm *comm;

	if (!h || !st_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_get_async_error: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_get_async_error", &comm));
	/* an idle communicator looks for peers' messages that no call of this rank will take */
	*st_p = ibc_exec_idle_check(comm, 0);
	if (*st_p != IBC_OK)
		ibc_log_set_last_error(comm->net.poison_msg);
	ibc_comm_leave(comm);
	return IBC_OK;
}

