/* SPDX-License-Identifier: MIT */
/*
 * shim_comm.c - NCCL communicators over ibcoll's: the unique id, creation
 * (blocking, nonblocking and inside a group, the last two on a detached
 * thread), split, finalize, destroy, abort, the asynchronous error, the
 * attribute queries and buffer registration. Relies on shim_err.c for the
 * texts, shim_group.c for init inside a group and shim_cuda.c for the
 * device and the events that finalize waits for.
 */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

_Static_assert(sizeof(ncclUniqueId) == sizeof(ibc_unique_id_t),
	       "ncclUniqueId and ibc_unique_id_t must have the same size");

static struct ncclComm *comm_alloc(int nranks, int rank)
{
	struct ncclComm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->magic = SHIM_COMM_MAGIC;
	c->nranks = nranks;
	c->rank = rank;
	c->cudev = -1;
	c->blocking = 1;
	c->init_res = ncclInProgress;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	return c;
}

static void comm_free(struct ncclComm *c)
{
	struct shim_reg *r;

	shim_cuda_forget(c);
	free(c->premul);
	while ((r = c->regs)) {
		c->regs = r->next;
		free(r);
	}
	c->magic = SHIM_DEAD_MAGIC;
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
	ibc_unique_id_t id;
	ibc_status_t st;

	if (!uniqueId)
		return shim_err(NULL, ncclInvalidArgument, "ncclGetUniqueId", "uniqueId is NULL");
	st = ibc_get_unique_id(&id);
	if (st != IBC_OK)
		return shim_ibc_err(NULL, st, "ncclGetUniqueId");
	memcpy(uniqueId, &id, sizeof(id));
	return ncclSuccess;
}

ncclResult_t shim_config_parse(const ncclConfig_t *config, int dflt_blocking, int *blocking_p,
			       const char *fn)
{
	int b;

	if (!config) {
		*blocking_p = dflt_blocking;
		return ncclSuccess;
	}
	if (config->magic != NCCL_CONFIG_MAGIC)
		return shim_err(NULL, ncclInvalidArgument, fn,
				"config was not set up by NCCL_CONFIG_INITIALIZER (magic 0x%x, expected 0x%x)",
				config->magic, NCCL_CONFIG_MAGIC);
	if (config->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
		return shim_err(NULL, ncclInvalidArgument, fn,
				"config size %zu bytes is too small for the blocking field",
				config->size);
	b = config->blocking;
	if (b == NCCL_CONFIG_UNDEF_INT)
		b = dflt_blocking;
	if (b != 0 && b != 1)
		return shim_err(NULL, ncclInvalidArgument, fn,
				"config blocking %d: must be 0 or 1", config->blocking);
	*blocking_p = b;
	return ncclSuccess;
}

/* join as @c->rank; runs in the caller or in the init thread */
static ncclResult_t comm_join(struct ncclComm *c, const char *fn)
{
	ibc_unique_id_t id;
	ibc_comm_h ibc = NULL;
	ibc_status_t st;
	ncclResult_t res = ncclSuccess;

	memcpy(&id, &c->id, sizeof(id));
	st = ibc_comm_init_rank(&ibc, c->nranks, &id, c->rank);
	if (st != IBC_OK)
		res = shim_ibc_err(c, st, fn);
	pthread_mutex_lock(&c->lock);
	c->ibc = ibc;
	c->init_res = res;
	pthread_mutex_unlock(&c->lock);
	return res;
}

static void *init_thread(void *arg)
{
	struct ncclComm *c = arg;

	/* ibcoll's init looks at the current device (topology, GPUDirect) */
	shim_cuda_set_device(c->cudev);
	comm_join(c, "ncclCommInitRank");
	pthread_mutex_lock(&c->lock);
	c->task_done = 1;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

ncclResult_t shim_comm_wait_init(struct ncclComm *c)
{
	ncclResult_t res;

	pthread_mutex_lock(&c->lock);
	while (c->task_live && !c->task_done)
		pthread_cond_wait(&c->cond, &c->lock);
	res = c->init_res;
	pthread_mutex_unlock(&c->lock);
	return res;
}

static ncclResult_t comm_valid(struct ncclComm *c, const char *fn)
{
	if (!c)
		return shim_err(NULL, ncclInvalidArgument, fn, "comm is NULL");
	if (c->magic != SHIM_COMM_MAGIC)
		return shim_err(NULL, ncclInvalidArgument, fn,
				"comm %p is not a communicator of this library (destroyed, or never created)",
				(void *)c);
	return ncclSuccess;
}

ncclResult_t shim_comm_ready(struct ncclComm *c, const char *fn)
{
	ncclResult_t res = comm_valid(c, fn);

	if (res != ncclSuccess)
		return res;
	res = shim_comm_wait_init(c);
	if (res != ncclSuccess) {
		char why[SHIM_ERR_BYTES];

		pthread_mutex_lock(&c->lock);
		snprintf(why, sizeof(why), "%s", c->err);
		pthread_mutex_unlock(&c->lock);
		return shim_err(c, res, fn, "the communicator's initialization failed (%s)", why);
	}
	if (c->finalized)
		return shim_err(c, ncclInvalidUsage, fn, "the communicator was finalized");
	return ncclSuccess;
}

static ncclResult_t comm_init(ncclComm_t *comm_p, int nranks, const ncclUniqueId *id, int rank,
			      const ncclConfig_t *config, const char *fn)
{
	struct ncclComm *c;
	pthread_attr_t attr;
	pthread_t thread;
	ncclResult_t res;
	int blocking;
	int ret;

	if (!comm_p)
		return shim_err(NULL, ncclInvalidArgument, fn, "comm is NULL");
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return shim_err(NULL, ncclInvalidArgument, fn,
				"rank %d of %d ranks: need nranks >= 1 and 0 <= rank < nranks", rank,
				nranks);
	res = shim_config_parse(config, 1, &blocking, fn);
	if (res != ncclSuccess)
		return res;
	c = comm_alloc(nranks, rank);
	if (!c)
		return shim_err(NULL, ncclSystemError, fn, "out of memory");
	c->id = *id;
	c->blocking = blocking;
	c->gid = shim_hash(SHIM_HASH_SEED, id, sizeof(*id));
	if (!shim_host_mode()) {
		c->cudev = shim_cuda_current_device();
		if (c->cudev < 0) {
			comm_free(c);
			return ncclUnhandledCudaError;
		}
	}
	if (!shim_in_group() && blocking) {
		res = comm_join(c, fn);
		if (res != ncclSuccess) {
			comm_free(c);   /* the text stays the process's last error */
			return res;
		}
		*comm_p = c;
		return ncclSuccess;
	}
	/* in a group (one thread may create several ranks) or nonblocking */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	c->task_live = 1;
	ret = pthread_create(&thread, &attr, init_thread, c);
	pthread_attr_destroy(&attr);
	if (ret != 0) {
		comm_free(c);
		return shim_err(NULL, ncclSystemError, fn, "cannot start the init thread: %s",
				strerror(ret));
	}
	*comm_p = c;
	if (shim_in_group())
		return shim_group_add_init(c);
	return ncclInProgress;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	return comm_init(comm, nranks, &commId, rank, NULL, "ncclCommInitRank");
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
				    ncclConfig_t *config)
{
	return comm_init(comm, nranks, &commId, rank, config, "ncclCommInitRankConfig");
}

/*
 * ncclCommSplit() runs ibc_comm_split() in the calling thread, also for a
 * nonblocking config (it then returns ncclSuccess, a legal completion). The
 * child's id mixes the parent's id, the number of splits made from it
 * before (equal on every rank: splits are collective) and the color.
 */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
			   ncclConfig_t *config)
{
	const char *fn = "ncclCommSplit";
	struct ncclComm *c;
	ibc_comm_h child = NULL;
	ibc_status_t st;
	ncclResult_t res;
	uint32_t seq;
	int blocking;

	if (!newcomm)
		return shim_err(NULL, ncclInvalidArgument, fn, "newcomm is NULL");
	res = shim_comm_ready(comm, fn);
	if (res != ncclSuccess)
		return res;
	if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
		return shim_err(comm, ncclInvalidArgument, fn,
				"color %d: must be >= 0 or NCCL_SPLIT_NOCOLOR", color);
	if (shim_in_group())
		return shim_err(comm, ncclInvalidUsage, fn,
				"not supported inside ncclGroupStart/End: this library splits in the calling thread");
	res = shim_config_parse(config, comm->blocking, &blocking, fn);
	if (res != ncclSuccess)
		return res;
	seq = comm->nsplits++;
	st = ibc_comm_split(comm->ibc, color < 0 ? -1 : color, key, &child);
	if (st != IBC_OK)
		return shim_ibc_err(comm, st, fn);
	if (!child) {
		*newcomm = NULL;
		return ncclSuccess;
	}
	c = comm_alloc(1, 0);
	if (!c) {
		ibc_comm_destroy(child);
		return shim_err(comm, ncclSystemError, fn, "out of memory");
	}
	if ((st = ibc_comm_rank(child, &c->rank)) != IBC_OK ||
	    (st = ibc_comm_size(child, &c->nranks)) != IBC_OK) {
		res = shim_ibc_err(comm, st, fn);
		ibc_comm_destroy(child);
		comm_free(c);
		return res;
	}
	c->ibc = child;
	c->init_res = ncclSuccess;
	c->cudev = comm->cudev;
	c->blocking = blocking;
	c->gid = shim_hash(comm->gid, &seq, sizeof(seq));
	c->gid = shim_hash(c->gid, &color, sizeof(color));
	*newcomm = c;
	return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	ncclResult_t res = shim_comm_ready(comm, "ncclCommFinalize");

	if (res != ncclSuccess)
		return res;
	if (!shim_host_mode())
		res = shim_cuda_drain(comm, "ncclCommFinalize");
	comm->finalized = 1;
	return res;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	const char *fn = "ncclCommDestroy";
	ncclResult_t res;
	ibc_status_t st;

	if (!comm)
		return ncclSuccess;
	res = comm_valid(comm, fn);
	if (res != ncclSuccess)
		return res;
	shim_comm_wait_init(comm);
	if (comm->ibc && !comm->finalized && !shim_host_mode())
		res = shim_cuda_drain(comm, fn);
	if (comm->ibc) {
		st = ibc_comm_destroy(comm->ibc);
		if (st != IBC_OK && res == ncclSuccess)
			res = shim_ibc_err(NULL, st, fn);
	}
	comm_free(comm);
	return res;
}

/*
 * ncclCommAbort() - ibc_comm_abort(): operations still queued fail, the
 * streams blocked in them continue. A background initialization cannot be
 * interrupted; it is waited for (bounded by IBC_BOOTSTRAP_TIMEOUT_MS).
 */
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	const char *fn = "ncclCommAbort";
	ncclResult_t res;
	ibc_status_t st;

	if (!comm)
		return ncclSuccess;
	res = comm_valid(comm, fn);
	if (res != ncclSuccess)
		return res;
	shim_comm_wait_init(comm);
	if (comm->ibc) {
		st = ibc_comm_abort(comm->ibc);
		if (st != IBC_OK)
			res = shim_ibc_err(NULL, st, fn);
	}
	comm_free(comm);
	return res;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
	const char *fn = "ncclCommGetAsyncError";
	ncclResult_t res = comm_valid(comm, fn);
	ibc_status_t ast = IBC_OK;
	ibc_status_t st;
	int pending;

	if (res != ncclSuccess)
		return res;
	if (!asyncError)
		return shim_err(comm, ncclInvalidArgument, fn, "asyncError is NULL");
	pthread_mutex_lock(&comm->lock);
	pending = comm->task_live && !comm->task_done;
	res = comm->init_res;
	pthread_mutex_unlock(&comm->lock);
	if (pending || res != ncclSuccess) {
		*asyncError = pending ? ncclInProgress : res;
		return ncclSuccess;
	}
	st = ibc_comm_get_async_error(comm->ibc, &ast);
	if (st != IBC_OK)
		return shim_ibc_err(comm, st, fn);
	if (ast != IBC_OK)
		shim_ibc_err(comm, ast, fn);
	*asyncError = shim_result(ast);
	return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	ncclResult_t res = shim_comm_ready(comm, "ncclCommCount");

	if (res != ncclSuccess)
		return res;
	if (!count)
		return shim_err(comm, ncclInvalidArgument, "ncclCommCount", "count is NULL");
	*count = comm->nranks;
	return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	ncclResult_t res = shim_comm_ready(comm, "ncclCommUserRank");

	if (res != ncclSuccess)
		return res;
	if (!rank)
		return shim_err(comm, ncclInvalidArgument, "ncclCommUserRank", "rank is NULL");
	*rank = comm->rank;
	return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	ncclResult_t res = shim_comm_ready(comm, "ncclCommCuDevice");

	if (res != ncclSuccess)
		return res;
	if (!device)
		return shim_err(comm, ncclInvalidArgument, "ncclCommCuDevice", "device is NULL");
	if (comm->cudev < 0)
		return shim_err(comm, ncclInvalidUsage, "ncclCommCuDevice",
				"this process has no CUDA device (host mode): the communicator has none");
	*device = comm->cudev;
	return ncclSuccess;
}

/*
 * ncclCommRegister() - ibcoll needs no registration (it registers and
 * caches buffers itself, ibcoll.h), so registering is correct as a record
 * only: the handle names the buffer, ncclCommDeregister() checks and frees
 * it, and ncclCommDestroy() frees those left.
 */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
	const char *fn = "ncclCommRegister";
	ncclResult_t res = shim_comm_ready(comm, fn);
	struct shim_reg *r;

	if (res != ncclSuccess)
		return res;
	if (!handle)
		return shim_err(comm, ncclInvalidArgument, fn, "handle is NULL");
	if (!buff && size)
		return shim_err(comm, ncclInvalidArgument, fn, "buff is NULL with size %zu", size);
	r = calloc(1, sizeof(*r));
	if (!r)
		return shim_err(comm, ncclSystemError, fn, "out of memory");
	r->buf = buff;
	r->nbytes = size;
	pthread_mutex_lock(&comm->lock);
	r->next = comm->regs;
	comm->regs = r;
	pthread_mutex_unlock(&comm->lock);
	*handle = r;
	return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
	const char *fn = "ncclCommDeregister";
	ncclResult_t res = shim_comm_ready(comm, fn);
	struct shim_reg **pp;
	struct shim_reg *r = NULL;

	if (res != ncclSuccess)
		return res;
	pthread_mutex_lock(&comm->lock);
	for (pp = &comm->regs; *pp; pp = &(*pp)->next) {
		if (*pp == handle) {
			r = *pp;
			*pp = r->next;
			break;
		}
	}
	pthread_mutex_unlock(&comm->lock);
	if (!r)
		return shim_err(comm, ncclInvalidArgument, fn,
				"handle %p is not a registration of this communicator (deregistered already?)",
				handle);
	free(r);
	return ncclSuccess;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
	if (shim_host_mode())
		return shim_err(NULL, ncclInvalidUsage, "ncclMemAlloc",
				"this process has no CUDA device (host mode): no device memory to allocate");
	return shim_cuda_alloc(ptr, size);
}

ncclResult_t ncclMemFree(void *ptr)
{
	if (!ptr)
		return ncclSuccess;
	if (shim_host_mode())
		return shim_err(NULL, ncclInvalidUsage, "ncclMemFree",
				"this process has no CUDA device (host mode): %p is not from ncclMemAlloc()",
				ptr);
	return shim_cuda_free(ptr);
}
