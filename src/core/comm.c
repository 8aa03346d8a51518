/* SPDX-License-Identifier: MIT */
/*
 * comm.c - communicator lifecycle (create from a unique id or the
 * environment, split, destroy, abort), the registry of live handles, the
 * progress thread's placement, and the execution engine: operations run
 * one at a time in issue order, in the progress thread (nonblocking calls)
 * or in the caller's thread (blocking calls with an empty queue, or
 * IBC_PROGRESS_THREAD=0). Each layer sets up its own part of the
 * communicator: the bootstrap (src/boot), the net layer (src/net), the
 * algorithms (src/coll), the tuner (src/tune) and the CUDA staging state.
 */
#include "config.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
#include "tune/tune.h"
#include "core/comm.h"
#include "cuda/cuda.h"
#include "net/net.h"
#include "topo/topo.h"

static void comm_q_changed(struct ibc_comm *comm);

/* ------------------------------------------------------------------------ */
/* registry of live communicators: a destroyed handle is detected, not used */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibc_comm **reg_comms;
static int reg_n;
static int reg_cap;

static int registry_add(struct ibc_comm *comm)
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

static void registry_remove(struct ibc_comm *comm)
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

void ibc_comm_leave(struct ibc_comm *comm)
{
	__atomic_sub_fetch(&comm->ncallers, 1, __ATOMIC_ACQ_REL);
}

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

static void *progress_thread(void *arg);

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
			ret = pthread_create(&comm->thread, &attr, progress_thread, comm);
		pthread_attr_destroy(&attr);
		if (ret)
			IBC_LOG_WARN(TOPO, "progress thread: binding refused (%s); running unbound",
				     strerror(ret));
	}
	if (ret)
		ret = pthread_create(&comm->thread, NULL, progress_thread, comm);
	if (ret) {
		IBC_LOG_ERROR(INIT, "cannot start the progress thread: %s", strerror(ret));
		return IBC_ERR_SYSTEM;
	}
	comm->thread_started = 1;
	return IBC_OK;
}

struct ibc_tuner *ibc_comm_tuner(struct ibc_comm *comm)
{
	return comm->tuner;
}

ibc_status_t ibc_comm_progress_cpus(struct ibc_comm *comm, char *buf, size_t len)
{
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
	if (registry_add(comm) != 0) {
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

static ibc_status_t comm_init_uid(struct ibc_comm **comm_p, int nranks,
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
	*comm_p = comm;
	return IBC_OK;
err_teardown:
	comm_teardown(comm, 1);
err_free:
	comm_free(comm);
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
	return comm_init_uid(comm_p, nranks, &uid, rank);
}

static int env_int(const char *name, int *val_p)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return 0;
	v = strtol(s, &end, 10);
	if (*end || v < 0 || v > IBC_BOOT_MAX_RANKS)
		return -1;
	*val_p = (int)v;
	return 1;
}

/* rank and size from IBC_*, Open MPI, PMI, PMIx or Slurm, in that order */
static ibc_status_t env_rank_size(int *rank_p, int *nranks_p, const char **src_p)
{
	static const struct {
		const char *rank;
		const char *size;
	} srcs[] = {
		{ "IBC_RANK", "IBC_NRANKS" },
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMI_RANK", "PMI_SIZE" },
		{ "PMIX_RANK", "PMI_SIZE" },
		{ "PMIX_RANK", "IBC_NRANKS" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
	};
	size_t i;

	for (i = 0; i < IBC_ARRAY_SIZE(srcs); i++) {
		int r = -1;
		int n = -1;
		int hr = env_int(srcs[i].rank, &r);
		int hn = env_int(srcs[i].size, &n);

		if (hr < 0 || hn < 0) {
			IBC_LOG_ERROR(INIT, "ibc_comm_init_env: %s='%s' / %s='%s' are not numbers",
				      srcs[i].rank, getenv(srcs[i].rank) ? getenv(srcs[i].rank) : "",
				      srcs[i].size, getenv(srcs[i].size) ? getenv(srcs[i].size) : "");
			return IBC_ERR_INVALID_ARG;
		}
		if (hr > 0 && hn > 0) {
			*rank_p = r;
			*nranks_p = n;
			*src_p = srcs[i].rank;
			return IBC_OK;
		}
	}
	IBC_LOG_ERROR(INIT, "ibc_comm_init_env: no rank/size in the environment: set IBC_RANK and IBC_NRANKS, or launch with mpirun, srun or a PMI launcher");
	return IBC_ERR_INVALID_ARG;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* IBC_SECRET (32 hex digits), else derived from IBC_ROOT and the job id */
static ibc_status_t env_secret(const char *root, uint8_t secret[IBC_BOOT_SECRET_BYTES], int rank)
{
	const char *hex = ibc_param_secret();
	static const char *const jobvars[] = {
		"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE",
		"SLURM_JOB_ID", "SLURM_JOBID", "IBC_JOB_ID",
	};
	char buf[512];
	size_t i;

	if (hex && *hex) {
		if (strlen(hex) != 2 * IBC_BOOT_SECRET_BYTES) {
			IBC_LOG_ERROR(INIT, "IBC_SECRET must be %d hex digits (got %zu characters)",
				      2 * IBC_BOOT_SECRET_BYTES, strlen(hex));
			return IBC_ERR_INVALID_ARG;
		}
		for (i = 0; i < IBC_BOOT_SECRET_BYTES; i++) {
			int hi = hexval(hex[2 * i]);
			int lo = hexval(hex[2 * i + 1]);

			if (hi < 0 || lo < 0) {
				IBC_LOG_ERROR(INIT, "IBC_SECRET has a non-hex character");
				return IBC_ERR_INVALID_ARG;
			}
			secret[i] = (uint8_t)(hi << 4 | lo);
		}
		return IBC_OK;
	}
	snprintf(buf, sizeof(buf), "ibcoll-env-secret|%s", root);
	for (i = 0; i < IBC_ARRAY_SIZE(jobvars); i++) {
		const char *v = getenv(jobvars[i]);

		if (v && *v) {
			size_t n = strlen(buf);

			snprintf(buf + n, sizeof(buf) - n, "|%s=%s", jobvars[i], v);
			break;
		}
	}
	ibc_boot_derive_id(buf, strlen(buf), secret);
	if (rank == 0)
		IBC_LOG_INFO(INIT, "IBC_SECRET not set: bootstrap secret derived from IBC_ROOT and the job id; this guards against mistakes (other jobs, stray connections), not against local attackers");
	return IBC_OK;
}

ibc_status_t ibc_comm_init_env(ibc_comm_h *comm_p)
{
	struct ibc_boot_uid uid;
	union ibc_sockaddr root_addr;
	ibc_unique_id_t id;
	const char *root = ibc_param_root();
	const char *src = NULL;
	int family = strcmp(ibc_param_socket_family(), "AF_INET6") ? AF_INET : AF_INET6;
	int rank = -1;
	int nranks = -1;
	uint8_t secret[IBC_BOOT_SECRET_BYTES];

	ibc_fault_configure();
	if (!comm_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_env: comm_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(env_rank_size(&rank, &nranks, &src));
	if (nranks < 1 || rank >= nranks) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_env: rank %d of %d ranks (from %s) is out of range",
			      rank, nranks, src);
		return IBC_ERR_INVALID_ARG;
	}
	if (!root || !*root) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_env: IBC_ROOT is not set: give host:port of rank 0's host, e.g. mpirun -x IBC_ROOT=node0:29500");
		return IBC_ERR_INVALID_ARG;
	}
	ibc_log_set_rank(rank);
	IBC_CHECK(env_secret(root, secret, rank));
	IBC_CHECK(ibc_sock_parse_hostport(root, family, &root_addr));
	if (rank == 0) {
		char host[256];
		const char *colon = strrchr(root, ':');
		size_t hlen = (size_t)(colon - root);

		/* rank 0 runs the root on IBC_ROOT's port, bound to that address */
		if (root[0] == '[') {
			hlen -= 2;
			memcpy(host, root + 1, hlen);
		} else {
			memcpy(host, root, hlen);
		}
		host[hlen] = '\0';
		IBC_CHECK(ibc_bootstrap_root_start(host, ibc_sock_addr_port(&root_addr), secret, &id));
	}
	memset(&uid, 0, sizeof(uid));
	uid.family = root_addr.sa.sa_family;
	uid.port = ibc_sock_addr_port(&root_addr);
	if (uid.family == AF_INET6)
		memcpy(uid.addr, &root_addr.sin6.sin6_addr, 16);
	else
		memcpy(uid.addr, &root_addr.sin.sin_addr, 4);
	memcpy(uid.secret, secret, sizeof(secret));
	IBC_LOG_INFO(INIT, "joining as rank %d of %d (from %s) through root %s", rank, nranks, src,
		     root);
	return comm_init_uid(comm_p, nranks, &uid, rank);
}

ibc_status_t ibc_comm_split(ibc_comm_h comm, int color, int key, ibc_comm_h *newcomm_p)
{
	struct ibc_comm *nc = NULL;
	ibc_status_t st;

	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_split"));
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
	IBC_CHECK_GOTO(comm_setup(nc), st, err_teardown);
	*newcomm_p = nc;
	ibc_log_set_rank(comm->net.rank);
	goto out;
err_teardown:
	comm_teardown(nc, 1);
err_free:
	comm_free(nc);
out:
	ibc_comm_leave(comm);
	return st;
}

ibc_status_t ibc_comm_destroy(ibc_comm_h comm)
{
	ibc_status_t st;

	if (!comm)
		return IBC_OK;
	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_destroy"));
	st = ibc_comm_drain(comm);
	registry_remove(comm);
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
ibc_status_t ibc_comm_abort(ibc_comm_h comm)
{
	struct ibc_request *req;
	char reason[sizeof(comm->net.poison_msg)];
	uint64_t deadline = ibc_time_ms() + 900;
	int i;
	int found = 0;

	if (!comm)
		return IBC_OK;
	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < reg_n; i++)
		if (reg_comms[i] == comm)
			found = 1;
	if (found && __atomic_exchange_n(&comm->net.aborting, 1, __ATOMIC_ACQ_REL))
		found = 0; /* another thread is aborting it */
	pthread_mutex_unlock(&reg_lock);
	if (!found) {
		IBC_LOG_ERROR(INIT, "ibc_comm_abort: communicator %p was destroyed, is being aborted, or was never created",
			      (void *)comm);
		return IBC_ERR_INVALID_USAGE;
	}
	registry_remove(comm);
	ibc_log_set_rank(comm->net.rank);
	pthread_mutex_lock(&comm->net.lock);
	snprintf(reason, sizeof(reason), "%s", comm->net.poisoned ? comm->net.poison_msg : "");
	pthread_mutex_unlock(&comm->net.lock);
	ibc_net_fail_quiet(&comm->net, IBC_ERR_REMOTE, "communicator aborted by ibc_comm_abort() on rank %d",
			comm->net.rank);
	ibc_bootstrap_cancel(comm->net.bs);
	ibc_bootstrap_announce_leave(comm->net.bs, 1, reason);
	/* queued operations will never run: complete them with the poison status */
	pthread_mutex_lock(&comm->lock);
	while ((req = comm->q_head)) {
		comm->q_head = req->next;
		req->status = comm->net.poison_st;
		snprintf(req->errmsg, sizeof(req->errmsg), "%s", comm->net.poison_msg);
		__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
	}
	comm->q_tail = NULL;
	comm->nqueued = 0;
	comm_q_changed(comm);
	pthread_cond_broadcast(&comm->cond);
	pthread_mutex_unlock(&comm->lock);
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

ibc_status_t ibc_comm_rank(ibc_comm_h comm, int *rank_p)
{
	if (!comm || !rank_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_rank: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	/* a destroyed handle is an error, not a read of freed memory */
	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_rank"));
	*rank_p = comm->net.rank;
	ibc_comm_leave(comm);
	return IBC_OK;
}

ibc_status_t ibc_comm_size(ibc_comm_h comm, int *size_p)
{
	if (!comm || !size_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_size: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_size"));
	*size_p = comm->net.nranks;
	ibc_comm_leave(comm);
	return IBC_OK;
}

/*
 * ibc_comm_transport() - see ibcoll.h: the name is a static string, valid
 * after the communicator is destroyed (comm->net.transport_name is not), so it
 * is looked up among every name comm_choose_transports() can compose.
 */
ibc_status_t ibc_comm_transport(ibc_comm_h comm, const char **name_p)
{
	static const char *const names[] = {
		"shm", "tcp", "ib", "shm+ib", "shm+tcp", "ib+tcp", "shm+ib+tcp", "self", "bootstrap",
	};
	size_t i;

	if (!comm || !name_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_transport: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_transport"));
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

ibc_status_t ibc_comm_get_async_error(ibc_comm_h comm, ibc_status_t *st_p)
{
	if (!comm || !st_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_get_async_error: NULL argument");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(comm, "ibc_comm_get_async_error"));
	*st_p = ibc_net_status(&comm->net);
	if (*st_p != IBC_OK)
		ibc_log_set_last_error(comm->net.poison_msg);
	ibc_comm_leave(comm);
	return IBC_OK;
}

/* ------------------------------------------------------------------------ */
/* execution engine                                                         */
/* ------------------------------------------------------------------------ */

/* a host-memory send or receive: run concurrently with its queue neighbours */
static int req_is_host_p2p(const struct ibc_request *req)
{
	return req && ibc_coll_is_p2p(req->op.coll) && !req->op.cuda_flags && req->op.count > 0;
}

/* the queue head changed; comm->lock held */
static void comm_q_changed(struct ibc_comm *comm)
{
	__atomic_store_n(&comm->net.yield_p2p, req_is_host_p2p(comm->q_head), __ATOMIC_RELEASE);
}

/* an operation failed with @st: fail the communicator unless that happened already */
static void comm_op_failed(struct ibc_comm *comm, ibc_status_t st)
{
	/* an error not reported through ibc_net_fail() (logged where seen) */
	if (!__atomic_load_n(&comm->net.poisoned, __ATOMIC_ACQUIRE))
		ibc_net_fail(&comm->net, st, -1, "%s",
			      *ibc_last_error() ? ibc_log_strip_rank(ibc_last_error())
						: ibc_status_str(st));
}

/* publish @req's result (a failure reports the communicator's first error); comm->lock held */
static void comm_complete_locked(struct ibc_comm *comm, struct ibc_request *req, ibc_status_t st)
{
	if (st != IBC_OK) {
		st = comm->net.poison_st;
		snprintf(req->errmsg, sizeof(req->errmsg), "%s", comm->net.poison_msg);
	}
	req->status = st;
	__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static struct ibc_request *comm_pop(struct ibc_comm *comm);

#define P2P_BATCH_MAX 64

/*
 * Whether reqs[@i] must wait for an earlier send (or receive) of the same
 * peer that is not posted yet: messages between two ranks match in posting
 * order, and the batch's slots are not in issue order (a freed slot is
 * reused), nor is a connection's set-up, which may finish between two posts
 * of one pass. Found by the ASan run of test_p2p.sh under load: rank 1's
 * send #0 to rank 0 got IBC_INPROGRESS (handshake), its send #1 then found
 * the connection up and went first, and rank 0 reported mismatched calls.
 */
static int p2p_behind(struct ibc_request *const *reqs, struct ibc_treq *const *trp, int hi, int i)
{
	int j;

	for (j = 0; j < hi; j++)
		if (j != i && reqs[j] && !trp[j] && reqs[j]->op.coll == reqs[i]->op.coll &&
		    reqs[j]->op.root == reqs[i]->op.root &&
		    (int32_t)(reqs[j]->op.seq - reqs[i]->op.seq) < 0)
			return 1;
	return 0;
}

/*
 * comm_p2p_batch() - run host send/receive @first together with every host
 * send/receive queued right behind it (and those queued while it runs, up
 * to 64 in flight): all are posted at once and each completes on its own.
 * MPI semantics for ibc_isend()/ibc_irecv(): two ranks that both post a
 * send to each other before the matching receive do not deadlock. The
 * batch ends when nothing is in flight; an operation of another kind at the
 * queue head waits for that (issue order between p2p and collectives).
 * Completes every request it ran, @first included.
 */
static void comm_p2p_batch(struct ibc_comm *comm, struct ibc_request *first)
{
	struct ibc_request *reqs[P2P_BATCH_MAX] = { NULL };
	struct ibc_treq tr[P2P_BATCH_MAX];
	struct ibc_treq *trp[P2P_BATCH_MAX] = { NULL };
	struct ibc_request *next = first;
	uint64_t conn_deadline = 0;
	ibc_status_t st = IBC_OK;
	int nact = 0;
	int hi = 0;
	int i;

	for (;;) {
		int nconn = 0;
		int conn_peer = -1;

		if (next) {
			/* a free slot: posted transport requests never move */
			for (i = 0; reqs[i]; i++)
				;
			reqs[i] = next;
			trp[i] = NULL;
			hi = IBC_MAX(hi, i + 1);
			nact++;
			next = NULL;
		}
		/*
		 * Post what can be posted. Connection set-up is stepped, not
		 * waited for: a 3-rank ring of isends blocks in a cycle when
		 * each rank waits for its first peer's handshake before
		 * starting the next one.
		 */
		for (;;) {
			int posted = 0;

			nconn = 0;
			for (i = 0; i < hi; i++) {
				if (!reqs[i] || trp[i] || p2p_behind(reqs, trp, hi, i))
					continue;
				st = ibc_coll_p2p_post(&comm->coll, &reqs[i]->op, &tr[i], 1);
				if (st == IBC_INPROGRESS) {
					nconn++;
					conn_peer = reqs[i]->op.root;
					continue;
				}
				if (st != IBC_OK)
					goto fail;
				trp[i] = &tr[i];
				posted++;
			}
			/* what waited behind a request posted just now goes next */
			if (!posted)
				break;
		}
		if (nact < P2P_BATCH_MAX) {
			pthread_mutex_lock(&comm->lock);
			if (req_is_host_p2p(comm->q_head) && !comm->net.poisoned)
				next = comm_pop(comm);
			pthread_mutex_unlock(&comm->lock);
			if (next)
				continue;
		}
		if (!nact)
			return;
		if (nconn) {
			/* handshakes under way: poll the posted transfers, then step again */
			uint64_t now = ibc_time_ms();

			if (!conn_deadline) {
				conn_deadline = now + (uint64_t)ibc_param_bootstrap_timeout_ms();
			} else if (now > conn_deadline) {
				st = ibc_net_fail(&comm->net, IBC_ERR_TIMEOUT, conn_peer,
						   "connection set-up did not complete within %lld ms",
						   (long long)ibc_param_bootstrap_timeout_ms());
				goto fail;
			}
			if (__atomic_load_n(&comm->net.aborting, __ATOMIC_ACQUIRE)) {
				st = IBC_ERR_REMOTE;
				goto fail;
			}
			st = ibc_net_progress(&comm->net);
			if (st != IBC_OK)
				goto fail;
			usleep(100);
		} else {
			conn_deadline = 0;
			st = nact < P2P_BATCH_MAX ? ibc_net_wait_p2p(&comm->net, trp, hi)
						  : ibc_net_waitany(&comm->net, trp, hi);
			if (st == IBC_INPROGRESS)
				continue;
			if (st != IBC_OK)
				goto fail;
		}
		pthread_mutex_lock(&comm->lock);
		for (i = 0; i < hi; i++) {
			if (!trp[i] || !ibc_treq_is_done(&tr[i]))
				continue;
			if (tr[i].status != IBC_OK) {
				st = tr[i].status;
				pthread_mutex_unlock(&comm->lock);
				goto fail;
			}
			comm_complete_locked(comm, reqs[i], IBC_OK);
			/*
			 * Its caller may free it now: error texts (comm->net.cur)
			 * must name a request still in the batch.
			 */
			pthread_mutex_lock(&comm->net.lock);
			if (comm->net.cur == &reqs[i]->op)
				comm->net.cur = NULL;
			pthread_mutex_unlock(&comm->net.lock);
			reqs[i] = NULL;
			trp[i] = NULL;
			nact--;
		}
		pthread_mutex_lock(&comm->net.lock);
		for (i = 0; i < hi && !comm->net.cur; i++)
			if (reqs[i])
				comm->net.cur = &reqs[i]->op;
		pthread_mutex_unlock(&comm->net.lock);
		pthread_cond_broadcast(&comm->cond);
		pthread_mutex_unlock(&comm->lock);
	}
fail:
	comm_op_failed(comm, st);
	pthread_mutex_lock(&comm->lock);
	for (i = 0; i < hi; i++)
		if (reqs[i])
			comm_complete_locked(comm, reqs[i], st);
	pthread_cond_broadcast(&comm->cond);
	pthread_mutex_unlock(&comm->lock);
}

/*
 * exec_host() - run @op, on host buffers, with its algorithm: tell a
 * single-host communicator's ranks what this one runs, ask the tuner for
 * all-reduce, broadcast and reduce (its first call is collective), run.
 */
static ibc_status_t exec_host(void *arg, struct ibc_op *op)
{
	struct ibc_comm *comm = arg;
	struct ibc_algo_choice c;

	memset(&c, 0, sizeof(c));
	if (op->count == 0 && op->coll != IBC_COLL_BARRIER)
		return IBC_OK;
	ibc_coll_announce(&comm->coll, op);
	if (op->coll == IBC_COLL_ALLREDUCE || op->coll == IBC_COLL_BROADCAST ||
	    op->coll == IBC_COLL_REDUCE)
		IBC_CHECK(ibc_tuner_select(comm->tuner, op, &c));
	return ibc_coll_run(&comm->coll, op, &c);
}

/*
 * exec_run() - run @op: device buffers or stream order go through the CUDA
 * staging wrapper, which waits for the stream (@gate) and runs exec_host()
 * on pinned host copies, segment by segment; host buffers run directly.
 */
static ibc_status_t exec_run(struct ibc_comm *comm, struct ibc_op *op, void *gate)
{
	if (op->cuda_flags)
		return ibc_cuda_stage_run(&comm->cuda, &comm->net, op, gate, exec_host, comm);
	return exec_host(comm, op);
}

/* run one operation in the calling thread; records status and text */
static void comm_execute(struct ibc_comm *comm, struct ibc_request *req)
{
	ibc_status_t st = ibc_net_status(&comm->net);
	int batched = 0;

	ibc_log_set_rank(comm->net.rank);
	if (st == IBC_OK) {
		pthread_mutex_lock(&comm->net.lock);
		comm->net.cur = &req->op;
		comm->net.cur_bytes_done = 0;
		comm->net.cur_bytes_total = 0;
		__atomic_store_n(&comm->net.op_seq, req->op.seq, __ATOMIC_RELAXED);
		__atomic_store_n(&comm->net.in_op, 1, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&comm->net.lock);
		ibc_log_set_last_error("");
		if (req_is_host_p2p(req)) {
			comm_p2p_batch(comm, req);
			batched = 1;
		} else {
			st = exec_run(comm, &req->op, req->cuda_gate);
			if (st != IBC_OK)
				comm_op_failed(comm, st);
		}
		pthread_mutex_lock(&comm->net.lock);
		comm->net.cur = NULL;
		ibc_net_wait_clear(&comm->net);
		__atomic_store_n(&comm->net.in_op, 0, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&comm->net.lock);
	}
	pthread_mutex_lock(&comm->lock);
	if (!batched)
		comm_complete_locked(comm, req, st);
	comm->running = 0;
	/*
	 * Completion wakes the waiters; the progress thread only when work is
	 * queued behind this operation. A blocking call run inline thus no
	 * longer wakes an idle progress thread (which cost 8 us of CPU a call).
	 */
	pthread_cond_broadcast(&comm->cond);
	if (comm->q_head)
		pthread_cond_signal(&comm->work_cond);
	pthread_mutex_unlock(&comm->lock);
}

/* pop the next queued request; comm->lock held */
static struct ibc_request *comm_pop(struct ibc_comm *comm)
{
	struct ibc_request *req = comm->q_head;

	if (req) {
		comm->q_head = req->next;
		if (!comm->q_head)
			comm->q_tail = NULL;
		comm->nqueued--;
		comm->running = 1;
		comm_q_changed(comm);
	}
	return req;
}

static void *progress_thread(void *arg)
{
	struct ibc_comm *comm = arg;

	ibc_log_set_rank(comm->net.rank);
	pthread_mutex_lock(&comm->lock);
	for (;;) {
		struct ibc_request *req;

		while (!comm->stop && (!comm->q_head || comm->running))
			pthread_cond_wait(&comm->work_cond, &comm->lock);
		if (comm->stop && !comm->q_head)
			break;
		req = comm_pop(comm);
		pthread_mutex_unlock(&comm->lock);
		comm_execute(comm, req);
		pthread_mutex_lock(&comm->lock);
	}
	pthread_mutex_unlock(&comm->lock);
	return NULL;
}

ibc_status_t ibc_comm_submit(struct ibc_comm *comm, struct ibc_request *req, int blocking)
{
	pthread_mutex_lock(&comm->lock);
	if (blocking && !comm->q_head && !comm->running) {
		/* nothing ahead of us: run in this thread, no hand-off latency */
		comm->running = 1;
		pthread_mutex_unlock(&comm->lock);
		comm_execute(comm, req);
		/* the operation's own status (it was IBC_OK even when the op failed) */
		if (req->status != IBC_OK)
			ibc_log_set_last_error(req->errmsg);
		return req->status;
	}
	if (!blocking && comm->nqueued >= ibc_param_max_requests()) {
		pthread_mutex_unlock(&comm->lock);
		IBC_LOG_ERROR(COLL, "more than IBC_MAX_REQUESTS=%lld nonblocking operations outstanding",
			      (long long)ibc_param_max_requests());
		return IBC_ERR_INVALID_USAGE;
	}
	req->next = NULL;
	if (comm->q_tail)
		comm->q_tail->next = req;
	else
		comm->q_head = req;
	comm->q_tail = req;
	comm->nqueued++;
	comm_q_changed(comm);
	pthread_cond_signal(&comm->work_cond);
	pthread_mutex_unlock(&comm->lock);
	if (blocking)
		return ibc_comm_wait_req(comm, req);
	return IBC_OK;
}

/*
 * ibc_comm_wait_req() - block until @req is done. With the progress thread
 * this sleeps on the condition variable; without it, the caller runs queued
 * operations up to @req itself. Each operation is bounded by IBC_TIMEOUT_MS,
 * and the wait wakes at least every 100 ms to notice an abort.
 */
ibc_status_t ibc_comm_wait_req(struct ibc_comm *comm, struct ibc_request *req)
{
	pthread_mutex_lock(&comm->lock);
	while (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) {
		if (!comm->use_thread && !comm->running && comm->q_head) {
			struct ibc_request *next = comm_pop(comm);

			pthread_mutex_unlock(&comm->lock);
			comm_execute(comm, next);
			pthread_mutex_lock(&comm->lock);
			continue;
		}
		{
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100 * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&comm->cond, &comm->lock, &ts);
		}
	}
	pthread_mutex_unlock(&comm->lock);
	if (req->status != IBC_OK)
		ibc_log_set_last_error(req->errmsg);
	return req->status;
}

ibc_status_t ibc_comm_test_req(struct ibc_comm *comm, struct ibc_request *req, int *done_p)
{
	int done = __atomic_load_n(&req->done, __ATOMIC_ACQUIRE);

	if (!done && !comm->use_thread) {
		ibc_comm_wait_req(comm, req);
		done = 1;
	}
	*done_p = done;
	return IBC_OK;
}

/* enter @comm for a request call: silent, 0 when entered */
static int comm_enter_quiet(struct ibc_comm *comm)
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

/*
 * A request whose communicator is being aborted (or is gone): abort
 * completes every request within 900 ms, so wait for that, bounded, without
 * touching the communicator.
 */
static ibc_status_t request_wait_orphan(struct ibc_request *req)
{
	uint64_t deadline = ibc_time_ms() + 2000;

	while (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE) && ibc_time_ms() < deadline)
		usleep(1000);
	if (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) {
		IBC_LOG_ERROR(COLL, "request %p belongs to a communicator that was destroyed or aborted",
			      (void *)req);
		return IBC_ERR_INVALID_USAGE;
	}
	return IBC_OK;
}

ibc_status_t ibc_comm_request_wait(struct ibc_request *req)
{
	struct ibc_comm *comm = req->comm;
	ibc_status_t st;

	if (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) {
		if (comm_enter_quiet(comm) != 0) {
			IBC_CHECK(request_wait_orphan(req));
		} else {
			st = ibc_comm_wait_req(comm, req);
			ibc_comm_leave(comm);
			return st;
		}
	}
	if (req->status != IBC_OK)
		ibc_log_set_last_error(req->errmsg);
	return req->status;
}

ibc_status_t ibc_comm_request_test(struct ibc_request *req, int *done_p)
{
	struct ibc_comm *comm = req->comm;
	ibc_status_t st;

	*done_p = __atomic_load_n(&req->done, __ATOMIC_ACQUIRE);
	if (*done_p || comm_enter_quiet(comm) != 0)
		return IBC_OK;
	st = ibc_comm_test_req(comm, req, done_p);
	ibc_comm_leave(comm);
	return st;
}

/* wait until every queued operation has run (bounded by their own timeouts) */
ibc_status_t ibc_comm_drain(struct ibc_comm *comm)
{
	ibc_status_t st = IBC_OK;

	pthread_mutex_lock(&comm->lock);
	while (comm->q_head || comm->running) {
		if (!comm->use_thread && !comm->running) {
			struct ibc_request *next = comm_pop(comm);

			pthread_mutex_unlock(&comm->lock);
			comm_execute(comm, next);
			pthread_mutex_lock(&comm->lock);
			if (next->status != IBC_OK && st == IBC_OK)
				st = next->status;
			continue;
		}
		{
			/* operations are bounded by IBC_TIMEOUT_MS; wake up now and then anyway */
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100 * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&comm->cond, &comm->lock, &ts);
		}
	}
	pthread_mutex_unlock(&comm->lock);
	return st;
}
