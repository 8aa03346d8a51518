/* SPDX-License-Identifier: MIT */
/*
 * ib_mr.c - the memory registration cache of the verbs transport, keyed by
 * page range, for user buffers and the transport's own FIFO and bounce
 * buffers. Backend-agnostic (ibv_reg_mr in the transport, a fake in the
 * unit test), so the cache logic is tested without hardware.
 *
 * Policy. A lookup is served by any registration that covers the range
 * (a hit) and otherwise registers the covering pages (a miss). Entries are
 * reference counted by the operations that use them. Transport-owned
 * memory (IBC_IB_MR_PERSIST) stays registered until it is invalidated.
 * User memory stays registered while in use and, once idle, until the
 * owner trims the cache: the transport trims to IBC_IB_REG_CACHE_BYTES
 * whenever a new operation (message descriptor sequence) starts.
 *
 * A pinned registration keeps pointing at the pages a buffer had, so an
 * application that frees a buffer and gets new memory at the same address
 * must not be served the old registration. With memory hooks
 * (ibc_ib_mr_cache_hooks(), ib_memhook.c: UCX's libucm) every user entry
 * has a slot that a release of its memory marks stale; a lookup drops a
 * stale entry instead of using it, so idle registrations can be kept
 * (IBC_IB_REG_CACHE_BYTES auto: no limit, or half of RLIMIT_MEMLOCK).
 * Without hooks the default keeps none: a user buffer's registration is
 * reused by every message of one collective and released when the next
 * one starts. Invalidation (deregistration) drops idle entries at once
 * and in-use ones at their last release. Lists are linear: a context
 * holds few registrations.
 *
 * CUDA device memory (the backend's mem_query says device) is registered
 * through GPUDirect RDMA in the mode the backend's gdr_mode gives for
 * (GPU, this NIC) (ibc_gdr_mode_get(): dma-buf or nvidia_peermem; OFF is
 * refused with IBC_ERR_UNSUPPORTED), as the whole CUDA allocation
 * (its range attributes, as NCCL registers user buffers), never as
 * rounded host pages. The memory hooks do not see cudaFree(), so a device
 * entry records the allocation's CU_POINTER_ATTRIBUTE_BUFFER_ID (unique
 * over the process's life) and every hit compares it with the id of the
 * memory there now (UCX's cuda_ipc cache does the same): another id, or
 * none, means freed (and reallocated), and the entry is dropped and the
 * memory registered again. Idle device entries are budgeted and trimmed
 * like host user entries, and trimming drops those whose memory is gone
 * (asking the driver at most every 100 ms: trimming runs at every operation).
 * The executor still stages every device buffer through host memory
 * (src/api/cuda_stage.c); handing device buffers to the transport
 * directly is the next step and is not built.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/memreg.h"
#include "base/util.h"
#include "topo/topo_gdr.h"
#include "transport/ib/ib.h"

static uintptr_t mr_page_size(void)
{
	static uintptr_t pg;

	if (!pg) {
		long v = sysconf(_SC_PAGESIZE);

		pg = v > 0 ? (uintptr_t)v : 4096;
	}
	return pg;
}

static size_t mr_bytes(const struct ibc_ib_mr *mr)
{
	return (size_t)(mr->end - mr->start);
}

/**
 * ibc_ib_mr_cache_init() - Set up an empty cache.
 * @cache:          [out] the cache, initialised in place.
 * @be:             [in]  registration backend (copied).
 * @idle_max_bytes: [in]  IBC_IB_REG_CACHE_BYTES: idle user registrations
 *                        ibc_ib_mr_trim() callers usually keep.
 */
void ibc_ib_mr_cache_init(struct ibc_ib_mr_cache *cache, const struct ibc_ib_mr_backend *be,
			  size_t idle_max_bytes)
{
	memset(cache, 0, sizeof(*cache));
	cache->be = *be;
	cache->idle_max_bytes = idle_max_bytes;
	pthread_mutex_init(&cache->lock, NULL);
	/* ibc_mem_free() of an allocation marks its registrations' slots stale */
	ibc_memreg_on_release(ibc_ib_memhook_release);
}

static void mr_unlink(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr)
{
	if (mr->prev)
		mr->prev->next = mr->next;
	else
		cache->head = mr->next;
	if (mr->next)
		mr->next->prev = mr->prev;
	mr->next = NULL;
	mr->prev = NULL;
}

static void mr_push_front(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr)
{
	mr->prev = NULL;
	mr->next = cache->head;
	if (cache->head)
		cache->head->prev = mr;
	cache->head = mr;
}

/* deregister and free an entry that is unlinked and not counted as idle */
static void mr_drop(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr)
{
	int ret = cache->be.dereg(cache->be.arg, mr->handle);

	if (ret)
		IBC_LOG_WARN(IB, "deregistration of %zu bytes at 0x%lx on %s failed: %s", mr_bytes(mr),
			     (unsigned long)mr->start, cache->be.name, strerror(ret));
	ibc_ib_memhook_slot_put(mr->slot);
	__atomic_add_fetch(&cache->stats.deregs, 1, __ATOMIC_RELAXED);
	cache->nentries--;
	ibc_free(mr);
}

/* idle and subject to the IBC_IB_REG_CACHE_BYTES budget (counted in idle_user_bytes) */
static int mr_is_idle_user(const struct ibc_ib_mr *mr)
{
	return mr->refcnt == 0 &&
	       !(mr->flags & (IBC_IB_MR_PERSIST | IBC_IB_MR_STALE | IBC_IB_MR_KEEP));
}

static int mr_budgeted(unsigned flags)
{
	return !(flags & (IBC_IB_MR_PERSIST | IBC_IB_MR_KEEP));
}

/*
 * forget @mr (not yet stale): deregister it now if idle, else mark it stale
 * so that no lookup finds it and its last put deregisters it
 */
static void mr_invalidate_one(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr)
{
	__atomic_add_fetch(&cache->stats.invalidations, 1, __ATOMIC_RELAXED);
	if (mr->refcnt == 0) {
		if (mr_budgeted(mr->flags))
			cache->idle_user_bytes -= mr_bytes(mr);
		mr_unlink(cache, mr);
		mr_drop(cache, mr);
	} else {
		mr->flags |= IBC_IB_MR_STALE;
	}
}

/* the memory hooks (or ibc_mem_free) saw @mr's memory released */
static void mr_released(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr)
{
	__atomic_add_fetch(&cache->stats.released, 1, __ATOMIC_RELAXED);
	mr_invalidate_one(cache, mr);
}

/**
 * ibc_ib_reg_cache_keep_text() - "no limit", "up to N bytes" or "none (...)"
 * for a budget from ibc_ib_reg_cache_budget(), into @buf (@len); returns @buf.
 */
const char *ibc_ib_reg_cache_keep_text(size_t keep, char *buf, size_t len)
{
	if (keep >= SIZE_MAX / 2)
		snprintf(buf, len, "no limit");
	else if (keep)
		snprintf(buf, len, "up to %zu bytes", keep);
	else
		snprintf(buf, len, "none (each released when the next operation starts)");
	return buf;
}

/**
 * ibc_ib_mr_cache_hooks() - Protect @cache's user entries with the memory
 * hooks (ib_memhook.c), when the process has them.
 * @cache: [in,out] the cache, before its first lookup.
 * Return: 1 when hooks are in force for @cache, 0 when not.
 */
int ibc_ib_mr_cache_hooks(struct ibc_ib_mr_cache *cache)
{
	cache->hooks = ibc_ib_memhook_start(NULL);
	return cache->hooks;
}

/* 1 when the process may pin memory past RLIMIT_MEMLOCK (CAP_IPC_LOCK, bit 14) */
static int mr_has_ipc_lock(void)
{
	char line[128];
	unsigned long long caps = 0;
	int found = 0;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			found = 1;
			break;
		}
	}
	fclose(f);
	return found && (caps & (1ull << 14));
}

/**
 * ibc_ib_reg_cache_budget() - The idle user registrations to keep.
 * @param: [in] IBC_IB_REG_CACHE_BYTES as read ((size_t)-1: auto).
 * @hooks: [in] 1 when memory hooks are in force.
 * Return: @param unless auto; auto is 0 without hooks, and with hooks
 *         SIZE_MAX / 2 (no limit) when RLIMIT_MEMLOCK is unlimited or the
 *         process has CAP_IPC_LOCK, else half of RLIMIT_MEMLOCK (the rest
 *         is left to registrations in use).
 */
size_t ibc_ib_reg_cache_budget(size_t param, int hooks)
{
	struct rlimit rl;

	if (param != (size_t)-1)
		return param;
	if (!hooks)
		return 0;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    mr_has_ipc_lock())
		return SIZE_MAX / 2;
	return (size_t)(rl.rlim_cur / 2);
}

/* the registration failure, with the memlock limit when it is the likely cause */
static void mr_reg_error(struct ibc_ib_mr_cache *cache, int err, size_t nbytes)
{
	struct rlimit rl;
	char cur[64];
	char max[64];

	if (err != ENOMEM || getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
		snprintf(cache->errbuf, sizeof(cache->errbuf), "ibv_reg_mr of %zu bytes on %s failed: %s",
			 nbytes, cache->be.name, strerror(err));
		return;
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(cur, sizeof(cur), "unlimited");
	else
		snprintf(cur, sizeof(cur), "%llu bytes (%llu KiB)", (unsigned long long)rl.rlim_cur,
			 (unsigned long long)rl.rlim_cur / 1024);
	if (rl.rlim_max == RLIM_INFINITY)
		snprintf(max, sizeof(max), "unlimited");
	else
		snprintf(max, sizeof(max), "%llu bytes", (unsigned long long)rl.rlim_max);
	snprintf(cache->errbuf, sizeof(cache->errbuf),
		 "ibv_reg_mr of %zu bytes on %s failed: %s; the locked-memory limit RLIMIT_MEMLOCK (ulimit -l) is %s, hard limit %s: raise it (ulimit -l unlimited, memlock in /etc/security/limits.conf, LimitMEMLOCK= for systemd, --ulimit memlock=-1 for containers)",
		 nbytes, cache->be.name, strerror(err), cur, max);
}

/**
 * ibc_ib_mr_get() - Find or make a registration covering [@addr, @addr + @nbytes).
 * @cache:  [in,out] the cache.
 * @addr:   [in]  start of the buffer: host memory, or CUDA device memory
 *                when the backend has mem_query (see the file header).
 * @nbytes: [in]  length in bytes; 0 is treated as 1.
 * @flags:  [in]  IBC_IB_MR_PERSIST for transport-owned memory (always host:
 *                not queried); IBC_IB_MR_READONLY when the caller only reads
 *                (send side): a read-only host buffer (e.g. in .rodata) is
 *                then registered without write access instead of failing
 *                (device memory is always registered writable).
 * @mr_p:   [out] the entry, with one more reference, written on success.
 *
 * Blocking: a miss calls the backend (ibv_reg_mr pins pages: tens of us
 *           and more for large buffers); a lookup of user memory asks
 *           mem_query (a few CUDA driver calls, no context created).
 *           Threading: any thread (the cache's mutex, held across the
 *           backend calls).
 * Return: IBC_OK; IBC_ERR_NO_MEMORY; IBC_ERR_VERBS when registration fails
 *         (cache->errbuf then holds the text, naming RLIMIT_MEMLOCK and
 *         its value when the error is ENOMEM); IBC_ERR_UNSUPPORTED for
 *         device memory when GPUDirect RDMA is off for its GPU and this
 *         NIC (errbuf names the reason: "IBC_GDR=0", ...); IBC_ERR_CUDA
 *         when the device allocation cannot be read. IBC_FAULT_INJECT=reg:N
 *         makes the N-th registration fail with ENOMEM.
 */
/*
 * drop every idle user registration (budgeted and whole-allocation ones),
 * to free memory-hook slots or locked memory; returns how many went
 */
static int mr_drop_idle(struct ibc_ib_mr_cache *cache)
{
	struct ibc_ib_mr *mr = cache->head;
	int n = 0;

	while (mr) {
		struct ibc_ib_mr *next = mr->next;

		if (mr->refcnt == 0 && !(mr->flags & (IBC_IB_MR_PERSIST | IBC_IB_MR_STALE))) {
			if (mr_is_idle_user(mr))
				cache->idle_user_bytes -= mr_bytes(mr);
			__atomic_add_fetch(&cache->stats.evictions, 1, __ATOMIC_RELAXED);
			mr_unlink(cache, mr);
			mr_drop(cache, mr);
			n++;
		}
		mr = next;
	}
	return n;
}

/* a hit on @mr: one more reference, moved to the front, counted */
static void mr_take(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr)
{
	if (mr_is_idle_user(mr))
		cache->idle_user_bytes -= mr_bytes(mr);
	mr->refcnt++;
	mr_unlink(cache, mr);
	mr_push_front(cache, mr);
	__atomic_add_fetch(&cache->stats.hits, 1, __ATOMIC_RELAXED);
}

/* a new registration @mr (range and flags set): one reference, at the front, counted */
static void mr_add(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr)
{
	__atomic_add_fetch(&cache->stats.regs, 1, __ATOMIC_RELAXED);
	mr->refcnt = 1;
	mr_push_front(cache, mr);
	cache->nentries++;
}

/*
 * 1 when the memory of device entry @mr is no longer the allocation it was
 * registered for: the address is not CUDA memory any more, or holds an
 * allocation with another buffer id (cudaFree and a new cudaMalloc)
 */
#define IB_MR_DEV_CHECK_NS 100000000ull /* 100 ms between trimming's driver queries */
#define IB_MR_GPU_PAGE ((uintptr_t)65536) /* GPU page: a partial registration's unit */

static int mr_dev_gone(struct ibc_ib_mr_cache *cache, const struct ibc_ib_mr *mr)
{
	struct ibc_ib_mr_mem mem;

	memset(&mem, 0, sizeof(mem));
	if (cache->be.mem_query(cache->be.arg, (const void *)mr->start, 1, &mem) != 0)
		return 1;
	return mem.kind == IBC_MEMKIND_HOST || mem.buffer_id != mr->buffer_id;
}

/* forget device entry @mr, whose allocation was freed (its buffer id changed) */
static void mr_dev_reused(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr)
{
	__atomic_add_fetch(&cache->stats.dev_reused, 1, __ATOMIC_RELAXED);
	IBC_LOG_DEBUG(IB, "registration of CUDA memory 0x%lx-0x%lx (buffer id %llu) on %s: memory freed since, dropped",
		      (unsigned long)mr->start, (unsigned long)mr->end,
		      (unsigned long long)mr->buffer_id, cache->be.name);
	mr_invalidate_one(cache, mr);
}

/*
 * mr_get_dev_locked() - ibc_ib_mr_get() for CUDA device memory (@mem from
 * the backend's mem_query; managed memory is refused): a hit needs an
 * entry of the same allocation
 * (buffer id); a miss asks the backend for the GPUDirect mode of
 * (@mem->dev, this NIC) and registers the whole allocation through reg_dev;
 * when that gets ENOMEM even after dropping the idle registrations, the
 * 64 KiB GPU pages of the range asked for (counted in dev_partial).
 * Return: IBC_OK; IBC_ERR_UNSUPPORTED (GPUDirect off for this GPU and NIC,
 * or a backend without device callbacks); IBC_ERR_INVALID_ARG (the range
 * runs past its allocation's end); IBC_ERR_VERBS; IBC_ERR_NO_MEMORY.
 * cache->errbuf holds the text of an error.
 */
static ibc_status_t mr_get_dev_locked(struct ibc_ib_mr_cache *cache, const void *addr,
				      size_t nbytes, unsigned flags, const struct ibc_ib_mr_mem *mem,
				      struct ibc_ib_mr **mr_p)
{
	uintptr_t a = (uintptr_t)addr;
	uintptr_t b = a + (nbytes ? nbytes : 1);
	int need_write = !(flags & IBC_IB_MR_READONLY);
	enum ibc_gdr_mode mode = IBC_GDR_OFF;
	struct ibc_ib_mr *mr;
	uintptr_t start;
	uintptr_t end;
	char why[256];
	ibc_status_t st;
	int ret;

	if (mem->kind == IBC_MEMKIND_MANAGED) {
		/* neither dma-buf export nor nvidia_peermem covers cudaMallocManaged memory */
		snprintf(cache->errbuf, sizeof(cache->errbuf),
			 "CUDA managed memory (%zu bytes at %p) cannot be registered with %s: GPUDirect RDMA covers device memory only",
			 nbytes, addr, cache->be.name);
		IBC_LOG_DEBUG(IB, "%s", cache->errbuf);
		return IBC_ERR_UNSUPPORTED;
	}
	if (!mem->nbytes || mem->base > a || b > mem->base + mem->nbytes) {
		/*
		 * A range past its allocation's end: one registration of two
		 * allocations would be protected by the first one's buffer id
		 * only (a cudaFree of the second would go unseen).
		 */
		snprintf(cache->errbuf, sizeof(cache->errbuf),
			 "CUDA device memory (%zu bytes at %p) runs past the end of its allocation (%zu bytes at 0x%lx): one registration cannot cover two allocations",
			 nbytes, addr, mem->nbytes, (unsigned long)mem->base);
		IBC_LOG_DEBUG(IB, "%s", cache->errbuf);
		return IBC_ERR_INVALID_ARG;
	}
	for (mr = cache->head; mr; ) {
		struct ibc_ib_mr *next = mr->next;

		if (!(mr->flags & IBC_IB_MR_DEVICE) || (mr->flags & IBC_IB_MR_STALE) ||
		    mr->start > a || mr->end < b) {
			mr = next;
			continue;
		}
		if (mr->buffer_id != mem->buffer_id) {
			mr_dev_reused(cache, mr);
			mr = next;
			continue;
		}
		if (need_write && (mr->flags & IBC_IB_MR_READONLY)) {
			mr = next;
			continue;
		}
		mr_take(cache, mr);
		*mr_p = mr;
		return IBC_OK;
	}
	__atomic_add_fetch(&cache->stats.misses, 1, __ATOMIC_RELAXED);
	why[0] = '\0';
	if (!cache->be.gdr_mode || !cache->be.reg_dev)
		snprintf(why, sizeof(why), "the registration backend has no GPUDirect path");
	else if ((st = cache->be.gdr_mode(cache->be.arg, mem->dev, &mode, why, sizeof(why))) !=
		 IBC_OK && !why[0])
		snprintf(why, sizeof(why), "%s", ibc_status_str(st));
	if (mode != IBC_GDR_DMABUF && mode != IBC_GDR_PEERMEM) {
		snprintf(cache->errbuf, sizeof(cache->errbuf),
			 "CUDA device memory (%zu bytes at %p, CUDA device %d) cannot be registered with %s: GPUDirect RDMA is off for this GPU and NIC: %s",
			 nbytes, addr, mem->dev, cache->be.name, why);
		IBC_LOG_DEBUG(IB, "%s", cache->errbuf);
		return IBC_ERR_UNSUPPORTED;
	}
	start = mem->base;
	end = mem->base + mem->nbytes;
	mr = ibc_calloc(1, sizeof(*mr), "registration cache entry");
	if (!mr)
		return IBC_ERR_NO_MEMORY;
	mr->slot = -1;  /* the hooks cannot see cudaFree: the buffer id protects the entry */
	if (ibc_fault_hit(IBC_FAULT_REG, "GPUDirect registration")) {
		ret = ENOMEM;
	} else {
		ret = cache->be.reg_dev(cache->be.arg, (void *)start, end - start, 1, mode, &mr->lkey,
					&mr->rkey, &mr->handle);
		if (ret == ENOMEM && mr_drop_idle(cache) > 0)
			ret = cache->be.reg_dev(cache->be.arg, (void *)start, end - start, 1, mode,
						&mr->lkey, &mr->rkey, &mr->handle);
		if (ret == ENOMEM) {
			/*
			 * The whole allocation does not fit (pinned GPU memory
			 * and BAR space are finite): register the GPU pages
			 * (64 KiB) of the range asked for; the entry covers
			 * only those, under the allocation's buffer id.
			 */
			uintptr_t s2 = IBC_MAX(start, a & ~(IB_MR_GPU_PAGE - 1));
			uintptr_t e2 = IBC_MIN(end, IBC_ALIGN_UP(b, IB_MR_GPU_PAGE));

			if (s2 > start || e2 < end) {
				ret = cache->be.reg_dev(cache->be.arg, (void *)s2, e2 - s2, 1, mode,
							&mr->lkey, &mr->rkey, &mr->handle);
				if (ret == 0)
					IBC_LOG_DEBUG(IB, "CUDA allocation of %zu bytes at 0x%lx does not fit on %s (ENOMEM): registered 0x%lx-0x%lx of it",
						      (size_t)(end - start), (unsigned long)start,
						      cache->be.name, (unsigned long)s2, (unsigned long)e2);
				if (ret == 0) {
					start = s2;
					end = e2;
					__atomic_add_fetch(&cache->stats.dev_partial, 1, __ATOMIC_RELAXED);
				}
			}
		}
	}
	if (ret) {
		snprintf(cache->errbuf, sizeof(cache->errbuf),
			 "%s registration of CUDA device memory (%zu bytes at 0x%lx, CUDA device %d) on %s failed: %s",
			 ibc_gdr_mode_name(mode), (size_t)(end - start), (unsigned long)start,
			 mem->dev, cache->be.name, strerror(ret));
		IBC_LOG_DEBUG(IB, "%s", cache->errbuf);
		ibc_free(mr);
		return IBC_ERR_VERBS;
	}
	__atomic_add_fetch(&cache->stats.dev_regs, 1, __ATOMIC_RELAXED);
	mr->start = start;
	mr->end = end;
	mr->buffer_id = mem->buffer_id;
	mr->gdr_mode = mode;
	mr->flags = IBC_IB_MR_DEVICE;
	mr_add(cache, mr);
	*mr_p = mr;
	return IBC_OK;
}

static ibc_status_t mr_get_locked(struct ibc_ib_mr_cache *cache, const void *addr, size_t nbytes,
				  unsigned flags, struct ibc_ib_mr **mr_p)
{
	uintptr_t pg = mr_page_size();
	uintptr_t a = (uintptr_t)addr;
	uintptr_t start = a & ~(pg - 1);
	uintptr_t end = IBC_ALIGN_UP(a + (nbytes ? nbytes : 1), pg);
	int need_write = !(flags & IBC_IB_MR_READONLY);
	struct ibc_ib_mr *mr;
	uintptr_t mstart;
	uintptr_t mend;
	int ret;

	if (!(flags & IBC_IB_MR_PERSIST) && cache->be.mem_query) {
		struct ibc_ib_mr_mem mem;

		memset(&mem, 0, sizeof(mem));
		ret = cache->be.mem_query(cache->be.arg, addr, nbytes, &mem);
		if (ret) {
			snprintf(cache->errbuf, sizeof(cache->errbuf),
				 "the CUDA allocation holding %zu bytes at %p cannot be read (freed?): %s",
				 nbytes, addr, strerror(ret));
			IBC_LOG_DEBUG(IB, "%s", cache->errbuf);
			return IBC_ERR_CUDA;
		}
		if (mem.kind != IBC_MEMKIND_HOST)
			return mr_get_dev_locked(cache, addr, nbytes, flags, &mem, mr_p);
	}
	for (mr = cache->head; mr; ) {
		struct ibc_ib_mr *next = mr->next;

		if ((mr->flags & (IBC_IB_MR_STALE | IBC_IB_MR_DEVICE)) || mr->start > a ||
		    mr->end < a + (nbytes ? nbytes : 1)) {
			mr = next;
			continue;
		}
		if (ibc_ib_memhook_slot_stale(mr->slot)) {
			mr_released(cache, mr);
			mr = next;
			continue;
		}
		if ((need_write && (mr->flags & IBC_IB_MR_READONLY)) ||
		    ((flags & IBC_IB_MR_NEED_SLOT) && (mr->flags & IBC_IB_MR_NOKEEP))) {
			mr = next;
			continue;
		}
		mr_take(cache, mr);
		mr->flags |= flags & IBC_IB_MR_PERSIST;
		*mr_p = mr;
		return IBC_OK;
	}
	__atomic_add_fetch(&cache->stats.misses, 1, __ATOMIC_RELAXED);
	mr = ibc_calloc(1, sizeof(*mr), "registration cache entry");
	if (!mr)
		return IBC_ERR_NO_MEMORY;
	mr->slot = -1;
	if (!(flags & IBC_IB_MR_PERSIST) && ibc_memreg_find(a, nbytes, &mstart, &mend)) {
		/* memory from ibc_mem_alloc(): the whole allocation, kept until ibc_mem_free() */
		start = mstart & ~(pg - 1);
		end = IBC_ALIGN_UP(mend, pg);
		flags |= IBC_IB_MR_KEEP;
	}
	if ((cache->hooks || (flags & IBC_IB_MR_KEEP)) && !(flags & IBC_IB_MR_PERSIST)) {
		/* before registering: a release from now on marks the slot */
		mr->slot = ibc_ib_memhook_slot_get(start, end);
		if (mr->slot < 0 && mr_drop_idle(cache) > 0)
			mr->slot = ibc_ib_memhook_slot_get(start, end);
		if (mr->slot < 0 && (flags & IBC_IB_MR_NEED_SLOT)) {
			snprintf(cache->errbuf, sizeof(cache->errbuf),
				 "all %d registration slots of the process are in use (registrations held by ibc_comm_register() or in flight)",
				 IBC_IB_MEMHOOK_SLOTS);
			ibc_free(mr);
			return IBC_ERR_NO_MEMORY;
		}
		if (mr->slot < 0)
			flags |= IBC_IB_MR_NOKEEP; /* correct, unprotected: released at its last put */
	}
	if (ibc_fault_hit(IBC_FAULT_REG, "ibv_reg_mr")) {
		ret = ENOMEM;
	} else {
		ret = cache->be.reg(cache->be.arg, (void *)start, end - start, 1, &mr->lkey,
				    &mr->rkey, &mr->handle);
		/* over RLIMIT_MEMLOCK: unpin idle registrations (freed memory's too), try again */
		if (ret == ENOMEM && mr_drop_idle(cache) > 0)
			ret = cache->be.reg(cache->be.arg, (void *)start, end - start, 1, &mr->lkey,
					    &mr->rkey, &mr->handle);
	}
	if ((ret == EFAULT || ret == EACCES || ret == EPERM) && !need_write) {
		ret = cache->be.reg(cache->be.arg, (void *)start, end - start, 0, &mr->lkey,
				    &mr->rkey, &mr->handle);
		if (!ret)
			flags |= IBC_IB_MR_READONLY;
	}
	if (ret) {
		mr_reg_error(cache, ret, (size_t)(end - start));
		IBC_LOG_DEBUG(IB, "%s", cache->errbuf);
		ibc_ib_memhook_slot_put(mr->slot);
		ibc_free(mr);
		return IBC_ERR_VERBS;
	}
	mr->start = start;
	mr->end = end;
	mr->flags = flags & (IBC_IB_MR_PERSIST | IBC_IB_MR_READONLY | IBC_IB_MR_NOKEEP | IBC_IB_MR_KEEP);
	/* IBC_IB_MR_NEED_SLOT is a request of this call, not a state */
	if (mr->flags & IBC_IB_MR_NOKEEP)
		mr->flags &= ~(unsigned)IBC_IB_MR_KEEP;
	mr_add(cache, mr);
	*mr_p = mr;
	return IBC_OK;
}

/**
 * ibc_ib_mr_put() - Release one reference taken by ibc_ib_mr_get().
 * @cache: [in,out] the cache.
 * @mr:    [in] the entry; invalid after the call if it was stale.
 *
 * The last release of a stale entry deregisters it; an idle user entry
 * stays cached until ibc_ib_mr_trim() or ibc_ib_mr_invalidate().
 */
static void mr_put_locked(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr)
{
	if (mr->refcnt <= 0) {
		IBC_LOG_WARN(IB, "registration of 0x%lx put more often than got (internal error)",
			     (unsigned long)mr->start);
		return;
	}
	if (--mr->refcnt > 0)
		return;
	if (!(mr->flags & IBC_IB_MR_STALE) && ibc_ib_memhook_slot_stale(mr->slot)) {
		/* released while in use (never counted idle): dropped just below */
		__atomic_add_fetch(&cache->stats.invalidations, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&cache->stats.released, 1, __ATOMIC_RELAXED);
		mr->flags |= IBC_IB_MR_STALE;
	}
	if (mr->flags & (IBC_IB_MR_STALE | IBC_IB_MR_NOKEEP)) {
		mr_unlink(cache, mr);
		mr_drop(cache, mr);
		return;
	}
	if (mr_budgeted(mr->flags))
		cache->idle_user_bytes += mr_bytes(mr);
}

/**
 * ibc_ib_mr_invalidate() - Forget every registration overlapping a range,
 * e.g. because its memory is being freed (deregistration).
 * @cache:  [in,out] the cache.
 * @addr:   [in] start of the range.
 * @nbytes: [in] length in bytes.
 *
 * Idle entries are deregistered now; entries in use are marked stale: no
 * later lookup finds them, and the last ibc_ib_mr_put() deregisters them.
 */
static void mr_invalidate_locked(struct ibc_ib_mr_cache *cache, const void *addr, size_t nbytes)
{
	uintptr_t a = (uintptr_t)addr;
	uintptr_t b = a + (nbytes ? nbytes : 1);
	struct ibc_ib_mr *mr = cache->head;

	while (mr) {
		struct ibc_ib_mr *next = mr->next;

		if (mr->start < b && a < mr->end && !(mr->flags & IBC_IB_MR_STALE))
			mr_invalidate_one(cache, mr);
		mr = next;
	}
}

/**
 * ibc_ib_mr_trim() - Deregister idle user registrations, least recently
 * used first, until at most @keep_bytes of them remain.
 * @cache:      [in,out] the cache.
 * @keep_bytes: [in] idle user bytes to keep (0: all idle user entries go).
 */
static void mr_trim_locked(struct ibc_ib_mr_cache *cache, size_t keep_bytes)
{
	struct ibc_ib_mr *mr;
	struct ibc_ib_mr *tail = NULL;
	uint64_t now = ibc_time_coarse_ns();
	/*
	 * Whether a device allocation was freed is a driver query per entry
	 * (cuPointerGetAttributes), and trimming runs at every operation: ask
	 * at most every IB_MR_DEV_CHECK_NS. Only the unpinning of freed device
	 * memory waits for it; a hit compares the buffer id every time.
	 */
	int dev_check = cache->dev_checked_ns == 0 || now - cache->dev_checked_ns >= IB_MR_DEV_CHECK_NS;

	if (dev_check)
		cache->dev_checked_ns = now;
	/* idle registrations of released memory: unpin them now, whatever the budget */
	for (mr = cache->head; mr; ) {
		struct ibc_ib_mr *next = mr->next;

		if (mr->refcnt == 0 && !(mr->flags & IBC_IB_MR_STALE) &&
		    ibc_ib_memhook_slot_stale(mr->slot))
			mr_released(cache, mr);
		else if (dev_check && mr->refcnt == 0 && (mr->flags & IBC_IB_MR_DEVICE) &&
			 !(mr->flags & IBC_IB_MR_STALE) && mr_dev_gone(cache, mr))
			mr_dev_reused(cache, mr);  /* cudaFree'd: unpin (and unmap the dma-buf) now */
		mr = next;
	}
	if (cache->idle_user_bytes <= keep_bytes)
		return;
	for (mr = cache->head; mr; mr = mr->next)
		tail = mr;
	while (tail && cache->idle_user_bytes > keep_bytes) {
		struct ibc_ib_mr *prev = tail->prev;

		if (mr_is_idle_user(tail)) {
			cache->idle_user_bytes -= mr_bytes(tail);
			__atomic_add_fetch(&cache->stats.evictions, 1, __ATOMIC_RELAXED);
			mr_unlink(cache, tail);
			mr_drop(cache, tail);
		}
		tail = prev;
	}
}

/**
 * ibc_ib_mr_cache_fini() - Deregister everything and free the entries.
 * @cache: [in,out] the cache; entries still referenced are released too
 *         (logged at DEBUG: their operations were abandoned).
 */
static void mr_fini_locked(struct ibc_ib_mr_cache *cache)
{
	while (cache->head) {
		struct ibc_ib_mr *mr = cache->head;

		if (mr->refcnt)
			IBC_LOG_DEBUG(IB, "registration of %zu bytes at 0x%lx still used by %d operations at teardown",
				      mr_bytes(mr), (unsigned long)mr->start, mr->refcnt);
		mr_unlink(cache, mr);
		mr_drop(cache, mr);
	}
	cache->idle_user_bytes = 0;
}

/**
 * ibc_ib_mr_verbs_reg() - The ibv_reg_mr backend of the cache.
 * @arg:      [in]  struct ibc_ib_ctx * (its PD); the device callbacks of
 *                  ib_mr_dev.c get the same arg.
 * @addr:     [in]  page-aligned start.
 * @nbytes:   [in]  page-aligned length.
 * @writable: [in]  1: local write + remote write access; 0: read only.
 * @lkey_p, @rkey_p, @handle_p: [out] keys and the struct ibv_mr *.
 * Return: 0 or the errno of ibv_reg_mr (ENOMEM when over RLIMIT_MEMLOCK).
 */
int ibc_ib_mr_verbs_reg(void *arg, void *addr, size_t nbytes, int writable, uint32_t *lkey_p,
			uint32_t *rkey_p, void **handle_p)
{
	struct ibc_ib_ctx *ctx = arg;
	int access = writable ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : 0;
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(ctx->pd, addr, nbytes, access);
	if (!mr)
		return errno ? errno : EIO;
	*lkey_p = mr->lkey;
	*rkey_p = mr->rkey;
	*handle_p = mr;
	return 0;
}

/* ibc_ib_mr_verbs_dereg() - ibv_dereg_mr() of @handle (host or device memory); 0 or its errno */
int ibc_ib_mr_verbs_dereg(void *arg, void *handle)
{
	(void)arg;
	return ibv_dereg_mr(handle);
}

/* the public entry points: one mutex per cache, since ibc_comm_register()
 * adds registrations from the application's thread while the progress
 * thread looks buffers up (never held by the memory-hook callback) */
ibc_status_t ibc_ib_mr_get(struct ibc_ib_mr_cache *cache, const void *addr, size_t nbytes,
			   unsigned flags, struct ibc_ib_mr **mr_p)
{
	ibc_status_t st;

	pthread_mutex_lock(&cache->lock);
	st = mr_get_locked(cache, addr, nbytes, flags, mr_p);
	pthread_mutex_unlock(&cache->lock);
	return st;
}

void ibc_ib_mr_put(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr)
{
	if (!mr)
		return;
	pthread_mutex_lock(&cache->lock);
	mr_put_locked(cache, mr);
	pthread_mutex_unlock(&cache->lock);
}

void ibc_ib_mr_invalidate(struct ibc_ib_mr_cache *cache, const void *addr, size_t nbytes)
{
	pthread_mutex_lock(&cache->lock);
	mr_invalidate_locked(cache, addr, nbytes);
	pthread_mutex_unlock(&cache->lock);
}

void ibc_ib_mr_trim(struct ibc_ib_mr_cache *cache, size_t keep_bytes)
{
	pthread_mutex_lock(&cache->lock);
	mr_trim_locked(cache, keep_bytes);
	pthread_mutex_unlock(&cache->lock);
}

void ibc_ib_mr_cache_fini(struct ibc_ib_mr_cache *cache)
{
	pthread_mutex_lock(&cache->lock);
	mr_fini_locked(cache);
	pthread_mutex_unlock(&cache->lock);
	pthread_mutex_destroy(&cache->lock);
}
