/* SPDX-License-Identifier: MIT */
/*
 * mem.c - buffers registered with a communicator for zero-copy use
 * (ibc_comm_register(), after ncclCommRegister) and memory that stays
 * registered for as long as it lives (ibc_mem_alloc(), after ncclMemAlloc).
 *
 * A handle holds one registration per transport of the communicator that
 * registers memory (the verbs transport today; tcp and shm move user
 * buffers without registering them, so a handle over them holds nothing
 * and costs nothing). Operations on a registered buffer find its
 * registration in the transport's cache and never call ibv_reg_mr.
 * Handles still held when the communicator is destroyed are released
 * with it.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "api/api.h"
#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/memreg.h"
#include "base/param.h"
#include "cuda/cuda.h"
#include "net/net.h"

/* struct ibc_reg_handle - what ibc_comm_register() returns */
struct ibc_reg_handle {
	struct ibc_reg_handle *next;           /* the communicator's list, under comm->lock */
	void *buf;
	size_t nbytes;
	int n;
	struct {
		const struct ibc_transport_ops *ops;
		void *ctx;
		void *reg;
	} e[IBC_MAX_TRANSPORTS];
};

static void reg_release(struct ibc_reg_handle *rh)
{
	int i;

	for (i = 0; i < rh->n; i++)
		rh->e[i].ops->mem_deregister(rh->e[i].ctx, rh->e[i].reg);
	ibc_free(rh);
}

ibc_status_t ibc_comm_register(ibc_comm_h h, void *buf, size_t nbytes, void **handle_p)
{
	struct ibc_reg_handle *rh;
	struct ibc_comm *comm;
	ibc_status_t st = IBC_OK;
	int i;

	if (handle_p)
		*handle_p = NULL;
	if (!h || !buf || !handle_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_register: NULL argument (comm %p, buf %p, handle_p %p)",
			      (void *)h, buf, (void *)handle_p);
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_register", &comm));
	if (nbytes == 0 || (uintptr_t)buf + nbytes < (uintptr_t)buf) {
		IBC_LOG_ERROR(INIT, "ibc_comm_register: rank %d: %zu bytes at %p %s", comm->net.rank,
			      nbytes, buf, nbytes ? "wrap past the end of the address space" : "(nbytes is 0)");
		ibc_comm_leave(comm);
		return IBC_ERR_INVALID_ARG;
	}
	if (ibc_cuda_ptr_kind(buf, NULL) != IBC_MEMKIND_HOST) {
		IBC_LOG_ERROR(INIT, "ibc_comm_register: rank %d: %p is CUDA device or managed memory; registering device memory (GPUDirect RDMA) is not supported yet",
			      comm->net.rank, buf);
		ibc_comm_leave(comm);
		return IBC_ERR_UNSUPPORTED;
	}
	rh = ibc_calloc(1, sizeof(*rh), "registration handle");
	if (!rh) {
		ibc_comm_leave(comm);
		return IBC_ERR_NO_MEMORY;
	}
	rh->buf = buf;
	rh->nbytes = nbytes;
	for (i = 0; i < comm->net.ntinst && st == IBC_OK; i++) {
		const struct ibc_tinst *ti = &comm->net.tinst[i];

		if (!ti->ops || !ti->ctx || !ti->ops->mem_register)
			continue;
		st = ti->ops->mem_register(ti->ctx, buf, nbytes, &rh->e[rh->n].reg);
		if (st == IBC_OK) {
			rh->e[rh->n].ops = ti->ops;
			rh->e[rh->n].ctx = ti->ctx;
			rh->n++;
		}
	}
	if (st != IBC_OK) {
		reg_release(rh); /* the transport logged the cause */
		ibc_comm_leave(comm);
		return st;
	}
	pthread_mutex_lock(&comm->lock);
	rh->next = comm->regs;
	comm->regs = rh;
	pthread_mutex_unlock(&comm->lock);
	IBC_LOG_DEBUG(INIT, "ibc_comm_register: rank %d: %zu bytes at %p, %d transport registrations",
		      comm->net.rank, nbytes, buf, rh->n);
	*handle_p = rh;
	ibc_comm_leave(comm);
	return IBC_OK;
}

ibc_status_t ibc_comm_deregister(ibc_comm_h h, void *handle)
{
	struct ibc_reg_handle **pp;
	struct ibc_reg_handle *rh = NULL;
	struct ibc_comm *comm;

	if (!h || !handle) {
		IBC_LOG_ERROR(INIT, "ibc_comm_deregister: NULL argument (comm %p, handle %p)", (void *)h,
			      handle);
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(ibc_comm_enter(h, "ibc_comm_deregister", &comm));
	pthread_mutex_lock(&comm->lock);
	for (pp = &comm->regs; *pp; pp = &(*pp)->next) {
		if (*pp == handle) {
			rh = *pp;
			*pp = rh->next;
			break;
		}
	}
	pthread_mutex_unlock(&comm->lock);
	if (!rh) {
		IBC_LOG_ERROR(INIT, "ibc_comm_deregister: rank %d: handle %p is not a registration of this communicator (deregistered already, or from another one)",
			      comm->net.rank, handle);
		ibc_comm_leave(comm);
		return IBC_ERR_INVALID_ARG;
	}
	reg_release(rh);
	ibc_comm_leave(comm);
	return IBC_OK;
}

/**
 * ibc_comm_release_registrations() - Release every handle of @comm that the
 * application did not deregister (called by the communicator's teardown,
 * before its transports close).
 * @comm: [in,out] the communicator.
 */
void ibc_comm_release_registrations(struct ibc_comm *comm)
{
	struct ibc_reg_handle *rh;
	int n = 0;

	pthread_mutex_lock(&comm->lock);
	rh = comm->regs;
	comm->regs = NULL;
	pthread_mutex_unlock(&comm->lock);
	while (rh) {
		struct ibc_reg_handle *next = rh->next;

		reg_release(rh);
		rh = next;
		n++;
	}
	if (n)
		IBC_LOG_INFO(INIT, "rank %d: %d buffer registrations still held at destroy, released",
			     comm->net.rank, n);
}

/*
 * A memfd of @len bytes for ibc_mem_alloc() (IBC_MEM_SHARE=1), so that the
 * shm all-reduce's peers on this host can map the same pages and reduce
 * straight between the ranks' buffers; -1 (private anonymous memory) when
 * turned off or refused (logged once).
 */
static int mem_memfd(size_t len)
{
	static int warned;
	static int warned_fds;
	struct rlimit rl;
	int max_fds = 1024;
	int fd;

	if (!ibc_param_mem_share())
		return -1;
	/*
	 * Each such allocation holds a descriptor for its life: at most a
	 * quarter of RLIMIT_NOFILE (and 1024), so that thousands of small
	 * allocations cannot take the process's descriptors; past that,
	 * private memory (logged once).
	 */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 4 < (rlim_t)max_fds)
		max_fds = (int)(rl.rlim_cur / 4);
	if (ibc_memreg_nfd() >= max_fds) {
		if (!__atomic_exchange_n(&warned_fds, 1, __ATOMIC_RELAXED))
			IBC_LOG_INFO(MEM, "ibc_mem_alloc: %d live allocations hold a memfd each (a quarter of RLIMIT_NOFILE, at most 1024): this one and later ones are private memory, which local peers cannot map",
				     max_fds);
		return -1;
	}
	fd = (int)memfd_create("ibc-mem", MFD_CLOEXEC);
	if (fd >= 0 && ftruncate(fd, (off_t)len) == 0)
		return fd;
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		IBC_LOG_INFO(MEM, "ibc_mem_alloc: memfd of %zu bytes refused (%s): private memory, which local peers cannot map",
			     len, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

ibc_status_t ibc_mem_alloc(void **ptr_p, size_t nbytes)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t len;
	void *p;
	int fd;

	if (!ptr_p) {
		IBC_LOG_ERROR(MEM, "ibc_mem_alloc: ptr_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	*ptr_p = NULL;
	if (nbytes == 0 || nbytes > ((size_t)1 << 46)) {
		IBC_LOG_ERROR(MEM, "ibc_mem_alloc: %zu bytes is outside [1, 2^46]", nbytes);
		return IBC_ERR_INVALID_ARG;
	}
	len = (nbytes + pg - 1) / pg * pg;
	fd = mem_memfd(len);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, fd, 0);
	if (p == MAP_FAILED) {
		IBC_LOG_ERROR(MEM, "ibc_mem_alloc: mmap of %zu bytes failed: %s", len, strerror(errno));
		if (fd >= 0)
			close(fd);
		return IBC_ERR_NO_MEMORY;
	}
	/* shmem pages get transparent huge pages only when asked (shmem_enabled=advise) */
	if (fd >= 0 && len >= ((size_t)2 << 20))
		(void)madvise(p, len, MADV_HUGEPAGE);
	if (ibc_memreg_add_fd(p, len, fd) != 0) {
		munmap(p, len);
		if (fd >= 0)
			close(fd);
		IBC_LOG_ERROR(MEM, "ibc_mem_alloc: all %d recorded allocations are in use; free some or use malloc and ibc_comm_register()",
			      IBC_MEMREG_MAX);
		return IBC_ERR_NO_MEMORY;
	}
	*ptr_p = p;
	return IBC_OK;
}

ibc_status_t ibc_mem_free(void *ptr)
{
	size_t len;

	if (!ptr)
		return IBC_OK;
	/* tells the verbs caches first, so no operation can use the old pages */
	if (ibc_memreg_remove(ptr, &len) != 0) {
		IBC_LOG_ERROR(MEM, "ibc_mem_free: %p was not returned by ibc_mem_alloc() (or is freed already)",
			      ptr);
		return IBC_ERR_INVALID_ARG;
	}
	munmap(ptr, len);
	return IBC_OK;
}
