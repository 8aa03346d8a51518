/* SPDX-License-Identifier: MIT */
/*
 * test_ib_mr.c - the registration cache with a fake backend: hits on
 * covered ranges, misses, reference counts, invalidation (idle and in
 * use), trimming of idle user registrations (LRU order), persistent
 * entries, the read-only fallback for send buffers, and the error text
 * of an ENOMEM registration (RLIMIT_MEMLOCK and its value). The same cache
 * runs over ibv_reg_mr in tests/ib/test_ib_loop.c inside the VM.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/fault.h"
#include "tap.h"
#include "transport/ib/ib.h"

struct fake {
	int nreg;
	int ndereg;
	int live;
	int fail_errno;         /* next reg fails with this */
	int fail_sticky;        /* ... and every one after it, until cleared */
	uintptr_t ro_start;     /* writable registration of this range fails with EFAULT */
	uintptr_t ro_end;
	size_t last_nbytes;
	int last_writable;
};

static int fake_reg(void *arg, void *addr, size_t nbytes, int writable, uint32_t *lkey_p,
		    uint32_t *rkey_p, void **handle_p)
{
	struct fake *f = arg;
	uintptr_t a = (uintptr_t)addr;

	if (f->fail_errno) {
		int e = f->fail_errno;

		if (!f->fail_sticky)
			f->fail_errno = 0;
		return e;
	}
	if (writable && a < f->ro_end && f->ro_start < a + nbytes)
		return EFAULT;
	f->nreg++;
	f->live++;
	f->last_nbytes = nbytes;
	f->last_writable = writable;
	*lkey_p = 0x100u + (uint32_t)f->nreg;
	*rkey_p = 0x200u + (uint32_t)f->nreg;
	*handle_p = (void *)(uintptr_t)f->nreg;
	return 0;
}

static int fake_dereg(void *arg, void *handle)
{
	struct fake *f = arg;

	(void)handle;
	f->ndereg++;
	f->live--;
	return 0;
}

int main(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct ibc_ib_mr_backend be = { .reg = fake_reg, .dereg = fake_dereg, .name = "fake0" };
	struct ibc_ib_mr_cache c;
	struct ibc_ib_mr *m1;
	struct ibc_ib_mr *m2;
	struct ibc_ib_mr *m3;
	struct ibc_ib_mr *m4;
	struct fake f;
	struct rlimit rl;
	char want[128];
	uint8_t *buf;
	ibc_status_t st;

	setenv("IBC_DEBUG", "NONE", 1);
	setenv("IBC_FAULT_INJECT", "reg:2", 1);
	ibc_fault_configure();
	buf = aligned_alloc(pg, 64 * pg);
	memset(&f, 0, sizeof(f));
	be.arg = &f;
	ibc_ib_mr_cache_init(&c, &be, 0);

	/* fault injection: the second registration fails with ENOMEM */
	tap_is_int(ibc_ib_mr_get(&c, buf + 40 * pg, 10, 0, &m1), IBC_OK, "registration 1 succeeds");
	st = ibc_ib_mr_get(&c, buf + 50 * pg, 10, 0, &m2);
	tap_is_int(st, IBC_ERR_VERBS, "IBC_FAULT_INJECT=reg:2 fails registration 2");
	tap_ok(strstr(c.errbuf, "RLIMIT_MEMLOCK") != NULL, "injected ENOMEM names RLIMIT_MEMLOCK");
	tap_is_int(ibc_ib_mr_get(&c, buf + 50 * pg, 10, 0, &m2), IBC_OK, "registration 3 succeeds");
	ibc_ib_mr_put(&c, m1);
	ibc_ib_mr_put(&c, m2);
	ibc_ib_mr_trim(&c, 0);
	tap_is_int(c.nentries, 0, "trim(0) empties the cache");
	memset(&c.stats, 0, sizeof(c.stats));
	f.nreg = f.ndereg = 0;

	/* miss, then hits inside the covered pages */
	tap_is_int(ibc_ib_mr_get(&c, buf + 100, 1000, 0, &m1), IBC_OK, "first lookup registers");
	tap_is_int(c.stats.misses, 1, "one miss");
	tap_is_int(f.nreg, 1, "backend registered once");
	tap_ok(m1->start == (uintptr_t)buf && m1->end == (uintptr_t)buf + pg,
	       "registration covers the page");
	tap_is_int(f.last_writable, 1, "registered writable");
	tap_is_int(ibc_ib_mr_get(&c, buf + 8, 64, 0, &m2), IBC_OK, "lookup inside the page");
	tap_ok(m2 == m1, "same entry (hit)");
	tap_is_int(c.stats.hits, 1, "one hit");
	tap_is_int(m1->refcnt, 2, "two references");
	tap_is_int(ibc_ib_mr_get(&c, buf + pg + 8, pg, 0, &m3), IBC_OK, "lookup crossing a page end");
	tap_ok(m3 != m1, "range not covered: new registration");
	tap_is_int(c.stats.misses, 2, "two misses");
	tap_is_int((long long)(m3->end - m3->start), (long long)(2 * pg), "two pages registered");
	ibc_ib_mr_put(&c, m1);
	ibc_ib_mr_put(&c, m2);
	ibc_ib_mr_put(&c, m3);
	tap_is_int(c.idle_user_bytes, 3 * pg, "idle user bytes = 3 pages");
	tap_is_int(f.ndereg, 0, "idle entries stay registered");

	/* reuse of an idle entry (a repeated collective on the same buffer) */
	tap_is_int(ibc_ib_mr_get(&c, buf + 100, 1000, 0, &m1), IBC_OK, "idle entry reused");
	tap_is_int(c.stats.hits, 2, "hit on the idle entry");
	tap_is_int(f.nreg, 2, "no new registration");
	tap_is_int(c.idle_user_bytes, 2 * pg, "idle bytes drop while in use");

	/* invalidation: idle entry dropped now, in-use entry at its last put */
	ibc_ib_mr_invalidate(&c, buf + pg + 5, 1);
	tap_is_int(c.stats.invalidations, 1, "the idle 2-page entry overlapping page 1 is invalidated");
	tap_is_int(f.ndereg, 1, "and deregistered now");
	ibc_ib_mr_invalidate(&c, buf, 10);
	tap_is_int(c.stats.invalidations, 2, "in-use entry invalidated");
	tap_is_int(f.ndereg, 1, "but not deregistered while in use");
	tap_ok(m1->flags & IBC_IB_MR_STALE, "marked stale");
	tap_is_int(ibc_ib_mr_get(&c, buf + 100, 10, 0, &m2), IBC_OK, "lookup after invalidation");
	tap_ok(m2 != m1, "a stale entry is never a hit");
	tap_is_int(f.nreg, 3, "re-registered");
	ibc_ib_mr_put(&c, m1);
	tap_is_int(f.ndereg, 2, "stale entry deregistered at its last put");
	ibc_ib_mr_put(&c, m2);

	/* trim keeps the most recently used idle entries */
	ibc_ib_mr_trim(&c, 0);
	tap_is_int(c.nentries, 0, "all idle entries trimmed");
	tap_is_int(ibc_ib_mr_get(&c, buf + 10 * pg, pg, 0, &m1), IBC_OK, "entry of 1 page");
	tap_is_int(ibc_ib_mr_get(&c, buf + 20 * pg, 2 * pg, 0, &m2), IBC_OK, "entry of 2 pages");
	tap_is_int(ibc_ib_mr_get(&c, buf + 30 * pg, 4 * pg, 0, &m3), IBC_OK, "entry of 4 pages");
	ibc_ib_mr_put(&c, m1);
	ibc_ib_mr_put(&c, m2);
	ibc_ib_mr_put(&c, m3);
	c.stats.evictions = 0;
	ibc_ib_mr_trim(&c, 4 * pg);
	tap_is_int(c.stats.evictions, 2, "trim to 4 pages evicts the two older entries");
	tap_is_int(c.nentries, 1, "one entry left");
	tap_ok(c.head && c.head->start == (uintptr_t)buf + 30 * pg, "the most recent one");
	tap_is_int(c.idle_user_bytes, 4 * pg, "4 idle pages left");

	/* persistent entries: not idle user memory, not trimmed */
	tap_is_int(ibc_ib_mr_get(&c, buf + 40 * pg, pg, IBC_IB_MR_PERSIST, &m4), IBC_OK,
		   "persistent registration");
	ibc_ib_mr_put(&c, m4);
	tap_is_int(c.idle_user_bytes, 4 * pg, "persistent entry not counted as idle user memory");
	ibc_ib_mr_trim(&c, 0);
	tap_is_int(c.nentries, 1, "trim(0) keeps the persistent entry");
	ibc_ib_mr_invalidate(&c, buf + 40 * pg, pg);
	tap_is_int(c.nentries, 0, "invalidation drops it");

	/* read-only send buffer */
	f.ro_start = (uintptr_t)buf + 50 * pg;
	f.ro_end = f.ro_start + pg;
	tap_is_int(ibc_ib_mr_get(&c, buf + 50 * pg, 100, IBC_IB_MR_READONLY, &m1), IBC_OK,
		   "read-only memory registers for sending");
	tap_is_int(f.last_writable, 0, "without write access");
	tap_ok(m1->flags & IBC_IB_MR_READONLY, "entry marked read-only");
	st = ibc_ib_mr_get(&c, buf + 50 * pg, 100, 0, &m2);
	tap_is_int(st, IBC_ERR_VERBS, "read-only memory cannot be a receive buffer");
	tap_ok(strstr(c.errbuf, "Bad address") != NULL, "error text has strerror: '%s'", c.errbuf);
	ibc_ib_mr_put(&c, m1);

	/* ENOMEM once, with idle registrations cached: they go, and the retry succeeds */
	{
		int idle_before = c.nentries;

		f.fail_errno = ENOMEM;
		st = ibc_ib_mr_get(&c, buf + 60 * pg, pg, 0, &m1);
		tap_ok(st == IBC_OK && c.nentries <= idle_before,
		       "ENOMEM with idle registrations cached: they are dropped and the registration retried (%d -> %d entries)",
		       idle_before, c.nentries);
		if (st == IBC_OK)
			ibc_ib_mr_put(&c, m1);
	}
	/* ENOMEM that stays: the memlock limit and its value */
	f.fail_errno = ENOMEM;
	f.fail_sticky = 1;
	st = ibc_ib_mr_get(&c, buf + 62 * pg, pg, 0, &m1);
	f.fail_sticky = 0;
	f.fail_errno = 0;
	tap_is_int(st, IBC_ERR_VERBS, "ENOMEM registration fails");
	tap_ok(strstr(c.errbuf, "ulimit -l") && strstr(c.errbuf, "RLIMIT_MEMLOCK"),
	       "ENOMEM text names ulimit -l and RLIMIT_MEMLOCK");
	getrlimit(RLIMIT_MEMLOCK, &rl);
	if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(want, sizeof(want), "is unlimited");
	else
		snprintf(want, sizeof(want), "is %llu bytes", (unsigned long long)rl.rlim_cur);
	tap_ok(strstr(c.errbuf, want) != NULL, "ENOMEM text gives the current limit ('%s')", want);
	tap_ok(strstr(c.errbuf, "fake0") != NULL, "and the device name");
	f.fail_errno = EINVAL;
	ibc_ib_mr_get(&c, buf + 60 * pg, pg, 0, &m1);
	tap_ok(strstr(c.errbuf, "RLIMIT_MEMLOCK") == NULL, "other errors do not blame the limit");

	ibc_ib_mr_cache_fini(&c);
	tap_is_int(f.live, 0, "fini deregisters everything");
	free(buf);
	return tap_done();
}
