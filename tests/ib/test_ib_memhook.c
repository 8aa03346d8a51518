/* SPDX-License-Identifier: MIT */
/*
 * test_ib_memhook.c - the memory-release hooks (ib_memhook.c, UCX's
 * libucm) and the registration cache that relies on them, with a fake
 * registration backend, so it runs without a device:
 *   - what libucm reports: munmap, free of a large malloc, madvise
 *     MADV_DONTNEED and MADV_FREE, mremap, mmap MAP_FIXED over a mapping,
 *     heap trimming (malloc_trim); and what it must not report:
 *     MADV_DONTFORK/DOFORK (ibv_reg_mr issues them), mprotect;
 *   - loading libucs does not replace the process's signal handlers;
 *   - the cache keeps an idle registration across operations (100 lookups
 *     of one 64 MiB buffer: one registration), and when the buffer is
 *     freed and new memory is mapped at the same address (mmap/munmap and
 *     malloc/free), the next lookup registers again (the hazard);
 *   - IBC_IB_REG_CACHE_BYTES auto: kept with hooks, 0 without.
 * The same paths over ibv_reg_mr run in the Soft-RoCE VM (test_ib_comm
 * "regcache", tests/rxe/in_vm_suite.sh).
 */
#include "config.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/memreg.h"
#include "tap.h"
#include "transport/ib/ib.h"

struct fake {
	int nreg;
	int ndereg;
};

static int fake_reg(void *arg, void *addr, size_t nbytes, int writable, uint32_t *lkey_p,
		    uint32_t *rkey_p, void **handle_p)
{
	struct fake *f = arg;

	(void)addr;
	(void)nbytes;
	(void)writable;
	f->nreg++;
	*lkey_p = (uint32_t)f->nreg;
	*rkey_p = (uint32_t)f->nreg;
	*handle_p = (void *)(uintptr_t)f->nreg;
	return 0;
}

static int fake_dereg(void *arg, void *handle)
{
	struct fake *f = arg;

	(void)handle;
	f->ndereg++;
	return 0;
}

static void my_segv(int sig)
{
	(void)sig;
}

static void *map(size_t n, void *hint)
{
	void *p = mmap(hint, n, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (hint ? MAP_FIXED_NOREPLACE : 0), -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* a slot over [p, p + n): 1 when the release by @what marks it stale */
static int slot_over(const void *p, size_t n)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(pg - 1);

	return ibc_ib_memhook_slot_get(a, (uintptr_t)p + n);
}

static void guarantees(void)
{
	const size_t n = 1 << 20;
	char *p;
	char *q;
	int s;

	p = map(n, NULL);
	memset(p, 1, n);
	s = slot_over(p, n);
	madvise(p, n, MADV_DONTFORK);
	madvise(p, n, MADV_DOFORK);
	mprotect(p, n, PROT_READ);
	tap_ok(s >= 0 && !ibc_ib_memhook_slot_stale(s),
	       "MADV_DONTFORK, MADV_DOFORK and mprotect are not releases");
	mprotect(p, n, PROT_READ | PROT_WRITE);
	madvise(p, n, MADV_DONTNEED);
	tap_ok(ibc_ib_memhook_slot_stale(s), "madvise(MADV_DONTNEED) is seen");
	ibc_ib_memhook_slot_put(s);
	memset(p, 1, n);
	s = slot_over(p, n);
	madvise(p, n, MADV_FREE);
	tap_ok(ibc_ib_memhook_slot_stale(s), "madvise(MADV_FREE) is seen");
	ibc_ib_memhook_slot_put(s);
	s = slot_over(p, n);
	q = mremap(p, n, 2 * n, MREMAP_MAYMOVE);
	tap_ok(q != MAP_FAILED && ibc_ib_memhook_slot_stale(s), "mremap is seen");
	ibc_ib_memhook_slot_put(s);
	p = q;
	s = slot_over(p + n / 2, 4096);
	q = mmap(p, 2 * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	tap_ok(q == p && ibc_ib_memhook_slot_stale(s), "mmap MAP_FIXED over a registered page is seen");
	ibc_ib_memhook_slot_put(s);
	s = slot_over(p + n, 4096);
	munmap(p, 2 * n);
	tap_ok(ibc_ib_memhook_slot_stale(s), "munmap is seen");
	ibc_ib_memhook_slot_put(s);

	p = malloc(64 << 20);
	memset(p, 2, 64 << 20);
	s = slot_over(p, 64 << 20);
	free(p);
	tap_ok(ibc_ib_memhook_slot_stale(s), "free() of a 64 MiB malloc (glibc unmaps it inside free) is seen");
	ibc_ib_memhook_slot_put(s);
	{
		/* heap memory below the mmap threshold, released by malloc_trim */
		char *b[64];
		int i;
		int stale = 0;
		int k[64];

		for (i = 0; i < 64; i++) {
			b[i] = malloc(100000);
			memset(b[i], 3, 100000);
			k[i] = slot_over(b[i] + 8192, 8192);
		}
		for (i = 0; i < 64; i++)
			free(b[i]);
		malloc_trim(0);
		for (i = 0; i < 64; i++) {
			stale += ibc_ib_memhook_slot_stale(k[i]);
			ibc_ib_memhook_slot_put(k[i]);
		}
		tap_is_int(stale, 64, "malloc_trim: every freed 100 kB heap block returned to the system is seen");
	}
}

static void cache_steady_and_hazard(int hooks)
{
	const size_t n = 64 << 20;
	struct fake f = { 0, 0 };
	struct ibc_ib_mr_backend be = { .reg = fake_reg, .dereg = fake_dereg, .arg = &f,
					.name = "fake0" };
	struct ibc_ib_mr_cache c;
	struct ibc_ib_mr *mr;
	size_t keep;
	int i;
	int ok = 1;
	char *p;
	char *q;
	const char *tag = hooks ? "hooks on" : "hooks off";

	ibc_ib_mr_cache_init(&c, &be, 0);
	if (hooks)
		ibc_ib_mr_cache_hooks(&c);
	keep = ibc_ib_reg_cache_budget((size_t)-1, c.hooks);
	tap_ok(hooks ? keep > 0 : keep == 0, "%s: IBC_IB_REG_CACHE_BYTES auto keeps %s", tag,
	       hooks ? "idle registrations" : "none");
	p = map(n, NULL);
	memset(p, 1, n);
	for (i = 0; i < 100; i++) {
		ibc_ib_mr_trim(&c, keep); /* what the transport does when an operation starts */
		if (ibc_ib_mr_get(&c, p, n, 0, &mr) != IBC_OK || !mr)
			ok = 0;
		else
			ibc_ib_mr_put(&c, mr);
	}
	tap_ok(ok, "%s: 100 operations on one 64 MiB buffer", tag);
	tap_is_int(f.nreg, hooks ? 1 : 100, "%s: registrations: %s", tag,
		   hooks ? "1, then none" : "one per operation");
	/* the hazard: the buffer goes and new memory comes at the same address */
	ibc_ib_mr_trim(&c, keep);
	munmap(p, n);
	q = map(n, p);
	tap_ok(q == p, "%s: munmap then mmap at the same address", tag);
	if (q) {
		i = f.nreg;
		ibc_ib_mr_trim(&c, keep);
		tap_ok(ibc_ib_mr_get(&c, q, n, 0, &mr) == IBC_OK && f.nreg == i + 1,
		       "%s: the new memory is registered again, not served the old pages' registration", tag);
		if (hooks)
			tap_ok(c.stats.released >= 1, "%s: the release was counted (%llu)", tag,
			       (unsigned long long)c.stats.released);
		ibc_ib_mr_put(&c, mr);
		munmap(q, n);
	}
	/* the same through malloc/free */
	p = malloc(n);
	memset(p, 4, n);
	ibc_ib_mr_trim(&c, keep);
	ibc_ib_mr_get(&c, p, n, 0, &mr);
	ibc_ib_mr_put(&c, mr);
	free(p);
	q = malloc(n);
	i = f.nreg;
	ibc_ib_mr_trim(&c, keep);
	tap_ok(ibc_ib_mr_get(&c, q, n, 0, &mr) == IBC_OK && f.nreg == i + 1,
	       "%s: free then malloc of 64 MiB (%s address): registered again", tag,
	       q == p ? "the same" : "another");
	ibc_ib_mr_put(&c, mr);
	free(q);
	ibc_ib_mr_cache_fini(&c);
	tap_is_int(f.ndereg, f.nreg, "%s: every registration deregistered", tag);
}

static void *unmap_thread(void *arg)
{
	munmap(arg, 1 << 20);
	return NULL;
}

/* slots all taken, whole allocations (ibc_mem_alloc's table), a release
 * seen from another thread, and stale idle entries unpinned by the trim */
static void cache_slots_keep(void)
{
	const size_t n = 1 << 20;
	struct fake f = { 0, 0 };
	struct ibc_ib_mr_backend be = { .reg = fake_reg, .dereg = fake_dereg, .arg = &f,
					.name = "fake0" };
	struct ibc_ib_mr_cache c;
	struct ibc_ib_mr *mr;
	static int taken[IBC_IB_MEMHOOK_SLOTS];
	pthread_t th;
	int ntaken = 0;
	int i;
	int ok;
	char *p;

	ibc_ib_mr_cache_init(&c, &be, (size_t)1 << 40);
	ibc_ib_mr_cache_hooks(&c);
	/* a release seen from another thread */
	p = map(n, NULL);
	ibc_ib_mr_get(&c, p, n, 0, &mr);
	ibc_ib_mr_put(&c, mr);
	pthread_create(&th, NULL, unmap_thread, p);
	pthread_join(th, NULL);
	i = f.ndereg;
	ibc_ib_mr_trim(&c, (size_t)1 << 40);
	tap_ok(f.ndereg == i + 1 && c.stats.released >= 1,
	       "a munmap in another thread: the idle registration is unpinned at the next trim, whatever the budget");
	/* every slot of the process taken */
	for (;;) {
		int sl = ibc_ib_memhook_slot_get(0x1000, 0x2000);

		if (sl < 0)
			break;
		taken[ntaken++] = sl;
	}
	p = map(n, NULL);
	memset(p, 1, n);
	tap_ok(ibc_ib_mr_get(&c, p, n, IBC_IB_MR_NEED_SLOT, &mr) == IBC_ERR_NO_MEMORY,
	       "no slot free: a registration that must be protected (ibc_comm_register) is refused (%d slots)",
	       ntaken);
	i = f.nreg;
	ok = ibc_ib_mr_get(&c, p, n, 0, &mr) == IBC_OK && (mr->flags & IBC_IB_MR_NOKEEP);
	ibc_ib_mr_put(&c, mr);
	ok &= ibc_ib_mr_get(&c, p, n, 0, &mr) == IBC_OK && f.nreg == i + 2;
	ibc_ib_mr_put(&c, mr);
	tap_ok(ok, "no slot free: an operation's registration is made, used and released at its last put");
	for (i = 0; i < ntaken; i++)
		ibc_ib_memhook_slot_put(taken[i]);
	munmap(p, n);
	ibc_ib_mr_cache_fini(&c);

	/* ibc_mem_alloc memory, no hooks: registered whole, once, until removed */
	ibc_ib_mr_cache_init(&c, &be, 0);
	p = map(4 * n, NULL);
	ibc_memreg_add(p, 4 * n);
	i = f.nreg;
	ok = 1;
	for (int k = 0; k < 100; k++) {
		ibc_ib_mr_trim(&c, 0);
		ok &= ibc_ib_mr_get(&c, p + (k % 4) * n + 8, n - 16, 0, &mr) == IBC_OK;
		ok &= mr->start == (uintptr_t)p && mr->end == (uintptr_t)p + 4 * n;
		ibc_ib_mr_put(&c, mr);
	}
	tap_ok(ok && f.nreg == i + 1,
	       "no hooks: 100 operations on parts of a recorded allocation register it whole, once (%d)",
	       f.nreg - i);
	i = f.ndereg;
	ibc_memreg_remove(p, NULL);
	ibc_ib_mr_trim(&c, 0);
	tap_ok(f.ndereg == i + 1, "removing the allocation unpins it at the next trim");
	munmap(p, 4 * n);
	ibc_ib_mr_cache_fini(&c);
}

int main(void)
{
	struct sigaction sa;
	struct sigaction now;
	const char *why = NULL;
	int on;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = my_segv;
	sigaction(SIGSEGV, &sa, NULL);
	on = ibc_ib_memhook_start(&why);
	tap_diag("memory hooks: %s", why);
#if defined(HAVE_UCM) && defined(IBC_ASAN)
	if (!on)
		tap_skip_all("ASan keeps freed memory mapped, so the start-up check leaves hooks off: %s", why);
#endif
#ifdef HAVE_UCM
	tap_ok(on, "built with libucm: the hooks are in force (%s)", why);
#else
	if (!on) {
		tap_skip_all("built without libucm (configure: ucm/api/ucm.h not found; Debian: libucx-dev)");
	}
#endif
	sigaction(SIGSEGV, NULL, &now);
	tap_ok(now.sa_handler == my_segv, "the process's SIGSEGV handler survives loading libucs");
	sigaction(SIGBUS, NULL, &now);
	tap_ok(now.sa_handler == SIG_DFL, "SIGBUS stays at its default");
	if (!on)
		return tap_done();
	guarantees();
	/* glibc's dynamic mmap threshold would serve the second 64 MiB malloc from
	 * another place; fix it so that the free+malloc case reuses the address */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	cache_steady_and_hazard(1);
	cache_steady_and_hazard(0);
	cache_slots_keep();
	return tap_done();
}
