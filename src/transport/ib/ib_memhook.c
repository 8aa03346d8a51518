/* SPDX-License-Identifier: MIT */
/*
 * ib_memhook.c - memory-release events for the verbs registration cache.
 *
 * A registration pins the pages a buffer had when it was registered. When
 * the application frees the buffer (munmap, a glibc free that unmaps or
 * trims, madvise(MADV_DONTNEED/FREE), mremap, shmdt) and later gets new
 * memory at the same address, a cached registration would make the NIC
 * read and write the old pages. The cache may keep idle registrations only
 * if it learns of every such release: UCX's memory-hook library (libucm)
 * reports them (UCM_EVENT_VM_UNMAPPED, called before the memory goes).
 *
 * Loading. libucm is loaded at run time (dlopen), only when the verbs
 * transport opens a device, so libibcoll has no link-time dependency on
 * UCX. libucm needs two symbols of libucs, which is loaded first; libucs's
 * constructor installs signal handlers (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
 * SIGHUP: UCX_HANDLE_ERRORS) that would replace the application's (a
 * PyTorch trainer's crash handler, for one), so every signal disposition
 * that the load changed is put back. Where UCX is loaded already (Open MPI
 * over UCX) dlopen only takes another reference and nothing changes.
 *
 * What libucm guarantees (UCX 1.13, checked by tests/ib/test_ib_memhook):
 * in its default "bistro" mode it patches the entry of mmap, munmap,
 * mremap, madvise, shmat, shmdt, brk and sbrk in the loaded libc, so calls
 * from inside glibc (free of an mmapped chunk, heap trimming, malloc_trim)
 * are seen as well as the application's own; MADV_DONTFORK/DOFORK (which
 * rdma-core issues around registrations in its fork-safe mode) are not
 * releases. The transport checks at start-up that a free() inside glibc
 * is reported, and leaves hooks off when not. Not seen: a process that makes the
 * raw system call itself, and memory released by the kernel on its own.
 *
 * Bookkeeping. The callback runs in whatever thread releases memory, may
 * not allocate, and must not wait for a thread that might. Registrations
 * that hooks protect are entered into a fixed table of slots (no
 * allocation, one mutex held only to scan it); the callback marks every
 * slot that overlaps the released range stale, and the owning cache
 * checks the flag on each lookup and drops a stale registration instead
 * of using it. A release is seen by the cache before the memory can be
 * reused by the application, since the callback runs before the unmap.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_UCM
#include <ucm/api/ucm.h>
#endif

#include "base/log.h"
#include "base/param.h"
#include "transport/ib/ib.h"
#include "transport/ib/ib_info.h"

struct memhook_slot {
	uintptr_t start;
	uintptr_t end;
	int used;
	int stale;
};

static struct memhook_slot slots[IBC_IB_MEMHOOK_SLOTS];
static int slots_top;                  /* slots [0, slots_top) may be in use */
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t nevents;               /* releases reported (atomic) */
static uint64_t nstale;                /* slots marked stale (atomic) */

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static int hooks_on;
static char hooks_why[256] = "not started";

/**
 * ibc_ib_memhook_release() - Report that [@addr, @addr + @nbytes) is being
 * unmapped or returned to the system: every registration slot overlapping
 * it becomes stale. The libucm callback calls this; tests call it too.
 * @addr:   [in] start of the released range (any alignment).
 * @nbytes: [in] length in bytes.
 *
 * Threading: any thread. Never allocates.
 */
void ibc_ib_memhook_release(const void *addr, size_t nbytes)
{
	uintptr_t a = (uintptr_t)addr;
	uintptr_t b = a + (nbytes ? nbytes : 1);
	int i;

	__atomic_add_fetch(&nevents, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&slots_lock);
	for (i = 0; i < slots_top; i++) {
		struct memhook_slot *s = &slots[i];

		if (s->used && !s->stale && s->start < b && a < s->end) {
			__atomic_store_n(&s->stale, 1, __ATOMIC_RELEASE);
			__atomic_add_fetch(&nstale, 1, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&slots_lock);
}

/**
 * ibc_ib_memhook_slot_get() - Enter the page range [@start, @end) of a
 * registration about to be made, so that its release marks it stale.
 * @start: [in] page-aligned start.
 * @end:   [in] page-aligned end (exclusive).
 * Return: the slot (>= 0), or -1 when all IBC_IB_MEMHOOK_SLOTS are in use
 *         (the caller then keeps the registration only while in use).
 */
int ibc_ib_memhook_slot_get(uintptr_t start, uintptr_t end)
{
	int i;

	pthread_mutex_lock(&slots_lock);
	for (i = 0; i < IBC_IB_MEMHOOK_SLOTS; i++) {
		if (!slots[i].used)
			break;
	}
	if (i < IBC_IB_MEMHOOK_SLOTS) {
		slots[i].start = start;
		slots[i].end = end;
		slots[i].stale = 0;
		slots[i].used = 1;
		if (i >= slots_top)
			slots_top = i + 1;
	} else {
		i = -1;
	}
	pthread_mutex_unlock(&slots_lock);
	return i;
}

/* ibc_ib_memhook_slot_stale() - 1 when memory of @slot was released since it was entered */
int ibc_ib_memhook_slot_stale(int slot)
{
	if (slot < 0 || slot >= IBC_IB_MEMHOOK_SLOTS)
		return 0;
	return __atomic_load_n(&slots[slot].stale, __ATOMIC_ACQUIRE);
}

/* ibc_ib_memhook_slot_put() - Free @slot (the registration was dropped); -1 is ignored */
void ibc_ib_memhook_slot_put(int slot)
{
	if (slot < 0 || slot >= IBC_IB_MEMHOOK_SLOTS)
		return;
	pthread_mutex_lock(&slots_lock);
	slots[slot].used = 0;
	while (slots_top > 0 && !slots[slots_top - 1].used)
		slots_top--;
	pthread_mutex_unlock(&slots_lock);
}

/* ibc_ib_memhook_counts() - releases reported and slots made stale, so far */
void ibc_ib_memhook_counts(uint64_t *events_p, uint64_t *stale_p)
{
	if (events_p)
		*events_p = __atomic_load_n(&nevents, __ATOMIC_RELAXED);
	if (stale_p)
		*stale_p = __atomic_load_n(&nstale, __ATOMIC_RELAXED);
}

#ifdef HAVE_UCM
static void memhook_cb(ucm_event_type_t type, ucm_event_t *ev, void *arg)
{
	(void)arg;
	if (type == UCM_EVENT_VM_UNMAPPED)
		ibc_ib_memhook_release(ev->vm_unmapped.address, ev->vm_unmapped.size);
}

/* the signals blocked during a handler (sigset_t has room beyond the kernel's) */
static int same_mask(const sigset_t *a, const sigset_t *b)
{
	int sig;

	for (sig = 1; sig < NSIG; sig++) {
		if (sigismember(a, sig) != sigismember(b, sig))
			return 0;
	}
	return 1;
}

/* dlopen @name (@flags), putting back every signal disposition the load changed */
static void *memhook_dlopen(const char *name, int flags, char *restored, size_t len)
{
	static struct sigaction before[NSIG];
	struct sigaction now;
	size_t used = strlen(restored);
	void *h;
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		sigaction(sig, NULL, &before[sig]);
	h = dlopen(name, flags);
	for (sig = 1; sig < NSIG; sig++) {
		if (sigaction(sig, NULL, &now) != 0)
			continue;
		if (now.sa_handler == before[sig].sa_handler && now.sa_flags == before[sig].sa_flags &&
		    same_mask(&now.sa_mask, &before[sig].sa_mask))
			continue;
		sigaction(sig, &before[sig], NULL);
		if (used + 8 < len)
			used += (size_t)snprintf(restored + used, len - used, "%s%d", used ? "," : "",
						 sig);
	}
	return h;
}

static void memhook_start_once(void)
{
	ucs_status_t (*set_handler)(int, int, ucm_event_callback_t, void *);
	ucs_status_t (*test_events)(int);
	char restored[128] = "";
	void *ucs;
	void *ucm;
	ucs_status_t st;

	if (!ibc_param_ib_memhooks()) {
		snprintf(hooks_why, sizeof(hooks_why), "off (IBC_IB_MEMHOOKS=0)");
		return;
	}
	/* libucm resolves two libucs symbols from the global scope; libucm itself
	 * is used through dlsym only */
	ucs = memhook_dlopen("libucs.so.0", RTLD_NOW | RTLD_GLOBAL, restored, sizeof(restored));
	ucm = ucs ? memhook_dlopen("libucm.so.0", RTLD_NOW | RTLD_LOCAL, restored, sizeof(restored))
		  : NULL;
	if (!ucm) {
		snprintf(hooks_why, sizeof(hooks_why), "off (cannot load UCX's libucm: %s)", dlerror());
		return;
	}
	*(void **)&set_handler = dlsym(ucm, "ucm_set_event_handler");
	*(void **)&test_events = dlsym(ucm, "ucm_test_events");
	if (!set_handler || !test_events) {
		snprintf(hooks_why, sizeof(hooks_why), "off (libucm.so.0 lacks ucm_set_event_handler)");
		return;
	}
	st = set_handler(UCM_EVENT_VM_UNMAPPED, 0, memhook_cb, NULL);
	if (st == UCS_OK)
		st = test_events(UCM_EVENT_VM_UNMAPPED);
	if (st != UCS_OK) {
		snprintf(hooks_why, sizeof(hooks_why), "off (libucm could not install its hooks: status %d)",
			 (int)st);
		return;
	}
	/*
	 * the cache relies on seeing the releases glibc makes inside free():
	 * only libucm's "bistro" mode patches those (not UCX_MEM_MMAP_HOOK_MODE
	 * =reloc, nor an allocator that never unmaps on free, as under ASan or
	 * valgrind); check with a 64 MiB malloc, which glibc always maps
	 */
	{
		uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
		const size_t n = (size_t)64 << 20;
		char *p = malloc(n);
		int slot = -1;
		int seen;

		if (p)
			slot = ibc_ib_memhook_slot_get((uintptr_t)p & ~(pg - 1), (uintptr_t)p + n);
		free(p);
		seen = ibc_ib_memhook_slot_stale(slot);
		ibc_ib_memhook_slot_put(slot);
		if (!seen) {
			snprintf(hooks_why, sizeof(hooks_why),
				 "off (libucm does not report the munmap inside free() of a 64 MiB malloc: UCX_MEM_MMAP_HOOK_MODE=reloc, or an allocator that keeps freed memory, e.g. ASan or valgrind)");
			return;
		}
	}
	hooks_on = 1;
	snprintf(hooks_why, sizeof(hooks_why), "on (UCX libucm%s%s, header of UCX %s)",
		 restored[0] ? "; put back the signal handlers libucs replaced: " : "", restored,
		 IBC_UCM_VERSION[0] ? IBC_UCM_VERSION : "?");
}
#else
static void memhook_start_once(void)
{
	snprintf(hooks_why, sizeof(hooks_why),
		 "off (built without libucm: configure found no ucm/api/ucm.h; Debian: libucx-dev)");
}
#endif

/**
 * ibc_ib_memhook_start() - Install the memory-release hooks, once per
 * process (later calls return the first answer).
 * @why_p: [out] optional: "on (...)" or "off (the reason)", static text.
 *
 * Blocking: the first call loads libucs and libucm (a few ms).
 * Threading: any thread.
 * Return: 1 when releases are reported, 0 when not (IBC_IB_MEMHOOKS=0,
 *         built without libucm, libucm missing or failing its self-test).
 */
int ibc_ib_memhook_start(const char **why_p)
{
	pthread_once(&start_once, memhook_start_once);
	if (why_p)
		*why_p = hooks_why;
	return hooks_on;
}

void ibc_ib_print_reg_policy(FILE *out)
{
	const char *why;
	int on = ibc_ib_memhook_start(&why);
	size_t keep = ibc_ib_reg_cache_budget((size_t)ibc_param_ib_reg_cache_bytes(), on);
	char text[64];

	fprintf(out, "# verbs registration cache: memory hooks %s; idle user registrations kept: %s\n",
		why, ibc_ib_reg_cache_keep_text(keep, text, sizeof(text)));
}
