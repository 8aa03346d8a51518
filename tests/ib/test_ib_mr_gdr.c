/* SPDX-License-Identifier: MIT */
/*
 * test_ib_mr_gdr.c - CUDA device memory in the registration cache
 * (ib_mr.c), with a fake backend whose "device memory" is a table of fake
 * CUDA allocations over a host buffer (the cache never touches the
 * memory): device ranges go to the device callback, as the whole
 * allocation, in the GPUDirect mode the backend gives, and host ranges do
 * not; a mode of OFF refuses a device range with IBC_ERR_UNSUPPORTED and a
 * text that names the cause; a changed buffer id (cudaFree and a new
 * allocation at the same address) drops the stale entry, idle or in use,
 * and registers again; trimming drops idle entries of freed memory; hits
 * and misses are counted; managed memory and unreadable allocations are
 * refused; IBC_GDR=0 gives OFF through the verbs backend's own gdr_mode
 * callback (ib_mr_dev.c). Needs no GPU and no NIC.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"
#include "tap.h"
#include "topo/topo_gdr.h"
#include "transport/ib/ib.h"

#define NALLOC 4

struct fake_alloc {
	uintptr_t lo;           /* [lo, hi): one fake CUDA allocation; lo 0: none */
	uintptr_t hi;
	uint64_t id;            /* its buffer id */
	int dev;
	int managed;
};

struct fake {
	struct fake_alloc a[NALLOC];
	int query_errno;        /* mem_query fails with this (allocation unreadable) */
	enum ibc_gdr_mode mode; /* what gdr_mode answers */
	int real_gdr;           /* gdr_mode: the verbs backend's ibc_ib_mr_dev_gdr_mode() */
	struct ibc_ib_ctx ctx;  /* its context: a device name, dma-buf not probed (-1) */
	int ngdr;               /* gdr_mode calls */
	int nquery;             /* mem_query calls */
	size_t dev_max;         /* reg_dev fails with ENOMEM above this (0: never) */
	int nreg;               /* host registrations */
	int ndevreg;            /* device registrations */
	int ndereg;
	int live;
	enum ibc_gdr_mode last_mode;
	uintptr_t last_addr;
	size_t last_nbytes;
	int last_writable;
};

static int fake_reg(void *arg, void *addr, size_t nbytes, int writable, uint32_t *lkey_p,
		    uint32_t *rkey_p, void **handle_p)
{
	struct fake *f = arg;

	f->nreg++;
	f->live++;
	f->last_addr = (uintptr_t)addr;
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

static int fake_query(void *arg, const void *addr, size_t nbytes, struct ibc_ib_mr_mem *mem_p)
{
	struct fake *f = arg;
	uintptr_t p = (uintptr_t)addr;
	int i;

	(void)nbytes;
	f->nquery++;
	memset(mem_p, 0, sizeof(*mem_p));
	mem_p->dev = -1;
	for (i = 0; i < NALLOC; i++) {
		if (!f->a[i].lo || p < f->a[i].lo || p >= f->a[i].hi)
			continue;
		if (f->query_errno)
			return f->query_errno;
		mem_p->kind = f->a[i].managed ? IBC_MEMKIND_MANAGED : IBC_MEMKIND_DEVICE;
		mem_p->dev = f->a[i].dev;
		mem_p->base = f->a[i].lo;
		mem_p->nbytes = f->a[i].hi - f->a[i].lo;
		mem_p->buffer_id = f->a[i].id;
		return 0;
	}
	mem_p->kind = IBC_MEMKIND_HOST;
	return 0;
}

static ibc_status_t fake_gdr_mode(void *arg, int dev, enum ibc_gdr_mode *mode_p, char *why,
				  size_t why_len)
{
	struct fake *f = arg;

	f->ngdr++;
	if (f->real_gdr)
		return ibc_ib_mr_dev_gdr_mode(&f->ctx, dev, mode_p, why, why_len);
	*mode_p = f->mode;
	snprintf(why, why_len, "fake decision for CUDA device %d", dev);
	return IBC_OK;
}

static int fake_reg_dev(void *arg, void *addr, size_t nbytes, int writable, enum ibc_gdr_mode mode,
			uint32_t *lkey_p, uint32_t *rkey_p, void **handle_p)
{
	struct fake *f = arg;

	if (f->dev_max && nbytes > f->dev_max)
		return ENOMEM;
	f->ndevreg++;
	f->live++;
	f->last_mode = mode;
	f->last_addr = (uintptr_t)addr;
	f->last_nbytes = nbytes;
	f->last_writable = writable;
	*lkey_p = 0x1000u + (uint32_t)f->ndevreg;
	*rkey_p = 0x2000u + (uint32_t)f->ndevreg;
	*handle_p = (void *)(uintptr_t)(0x1000 + f->ndevreg);
	return 0;
}

int main(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct ibc_ib_mr_backend be = {
		.reg = fake_reg,
		.dereg = fake_dereg,
		.name = "fake0",
		.mem_query = fake_query,
		.gdr_mode = fake_gdr_mode,
		.reg_dev = fake_reg_dev,
	};
	struct ibc_ib_mr_cache c;
	struct ibc_ib_mr *m1;
	struct ibc_ib_mr *m2;
	struct ibc_ib_mr *m3;
	struct ibc_gdr_facts facts;
	enum ibc_gdr_mode mode;
	char why[512];
	struct fake *f;
	uint8_t *buf;
	uintptr_t d0;
	uintptr_t d1;
	ibc_status_t st;

	setenv("IBC_DEBUG", "NONE", 1);
	unsetenv("IBC_GDR");
	ibc_param_reset_all();
	buf = aligned_alloc(pg, 64 * pg);
	f = calloc(1, sizeof(*f));
	if (!buf || !f)
		tap_bail_out("out of memory");
	be.arg = f;
	/* two fake allocations, the first one not page-aligned (cudaMalloc sub-allocations) */
	d0 = (uintptr_t)buf + 16 * pg + 256;
	d1 = (uintptr_t)buf + 32 * pg;
	f->a[0] = (struct fake_alloc){ d0, d0 + 4 * pg, 7, 0, 0 };
	f->a[1] = (struct fake_alloc){ d1, d1 + 8 * pg, 8, 1, 0 };
	f->mode = IBC_GDR_DMABUF;
	ibc_ib_mr_cache_init(&c, &be, 0);

	/* host memory: the host callback, page-rounded; no GPUDirect decision asked */
	tap_is_int(ibc_ib_mr_get(&c, buf + 100, 1000, 0, &m1), IBC_OK, "host range registers");
	tap_is_int(f->nreg, 1, "host range: the host callback");
	tap_is_int(f->ndevreg, 0, "host range: not the device callback");
	tap_is_int(f->ngdr, 0, "host range: no GPUDirect decision asked");
	tap_ok(!(m1->flags & IBC_IB_MR_DEVICE) && m1->start == (uintptr_t)buf &&
	       m1->end == (uintptr_t)buf + pg, "host entry: the covering page, not device");
	ibc_ib_mr_put(&c, m1);

	/* device memory, dma-buf: the whole allocation, exactly, through reg_dev */
	tap_is_int(ibc_ib_mr_get(&c, (void *)(d0 + 1000), 2000, 0, &m1), IBC_OK,
		   "device range registers (dma-buf)");
	tap_is_int(f->ndevreg, 1, "device range: the device callback");
	tap_is_int(f->nreg, 1, "device range: never the host callback");
	tap_is_int(f->last_mode, IBC_GDR_DMABUF, "in the mode the decision gave (dma-buf)");
	tap_ok(f->last_addr == d0 && f->last_nbytes == 4 * pg,
	       "the allocation's exact range (0x%lx, %zu bytes), not rounded host pages",
	       (unsigned long)f->last_addr, f->last_nbytes);
	tap_is_int(f->last_writable, 1, "registered writable");
	tap_ok((m1->flags & IBC_IB_MR_DEVICE) && m1->buffer_id == 7 && m1->gdr_mode == IBC_GDR_DMABUF,
	       "entry marked device, with buffer id 7 and its mode");
	tap_is_int(c.stats.misses, 2, "misses: host + device");
	tap_is_int(c.stats.regs, 2, "regs count both");
	tap_is_int(c.stats.dev_regs, 1, "dev_regs counts the device one");
	tap_is_int(f->ngdr, 1, "the decision asked once");

	/* hits: same allocation, in use and idle; a send lookup (READONLY) too */
	tap_is_int(ibc_ib_mr_get(&c, (void *)(d0 + 3 * pg), pg, IBC_IB_MR_READONLY, &m2), IBC_OK,
		   "lookup inside the allocation");
	tap_ok(m2 == m1, "hit on the device entry");
	tap_is_int(c.stats.hits, 1, "hits: 1");
	tap_is_int(f->ndevreg, 1, "no new registration");
	ibc_ib_mr_put(&c, m2);
	ibc_ib_mr_put(&c, m1);
	tap_is_int(c.idle_user_bytes, pg + 4 * pg, "idle device entry budgeted like host user memory");
	tap_is_int(ibc_ib_mr_get(&c, (void *)d0, 10, 0, &m1), IBC_OK, "idle device entry reused");
	tap_is_int(c.stats.hits, 2, "hits: 2");
	tap_is_int(c.stats.misses, 2, "misses still 2");
	tap_is_int(f->ngdr, 1, "a hit asks no decision");
	{
		struct ibc_ib_mr *mx = NULL;
		int nd = f->ndevreg;

		/* a range past its allocation's end: refused, nothing registered */
		tap_is_int(ibc_ib_mr_get(&c, (void *)(d0 + 3 * pg), 2 * pg, 0, &mx),
			   IBC_ERR_INVALID_ARG, "a range past its allocation's end is refused");
		tap_ok(strstr(c.errbuf, "runs past the end of its allocation") != NULL,
		       "the text says why: %s", c.errbuf);
		tap_is_int(f->ndevreg, nd, "and nothing is registered for it");
	}

	/* freed and reallocated at the same address, while in use: old marked stale */
	f->a[0].id = 70;
	tap_is_int(ibc_ib_mr_get(&c, (void *)(d0 + 8), 8, 0, &m2), IBC_OK,
		   "lookup after the buffer id changed (in use)");
	tap_ok(m2 != m1, "a new entry, not the stale one");
	tap_ok(m1->flags & IBC_IB_MR_STALE, "the old entry is stale");
	tap_is_int(f->ndevreg, 2, "registered again");
	tap_is_int(m2->buffer_id, 70, "with the new buffer id");
	tap_is_int(c.stats.dev_reused, 1, "dev_reused: 1");
	tap_is_int(c.stats.invalidations, 1, "counted as an invalidation");
	tap_is_int(c.stats.misses, 3, "and a miss");
	ibc_ib_mr_put(&c, m1);
	tap_is_int(f->ndereg, 1, "stale entry deregistered at its last put");
	ibc_ib_mr_put(&c, m2);

	/* freed and reallocated while idle: dropped at once on lookup */
	f->a[0].id = 71;
	tap_is_int(ibc_ib_mr_get(&c, (void *)(d0 + 8), 8, 0, &m1), IBC_OK,
		   "lookup after the buffer id changed (idle)");
	tap_is_int(f->ndereg, 2, "the idle stale entry was deregistered");
	tap_is_int(f->ndevreg, 3, "and the memory registered again");
	tap_is_int(m1->buffer_id, 71, "new id recorded");
	tap_is_int(c.stats.dev_reused, 2, "dev_reused: 2");
	ibc_ib_mr_put(&c, m1);

	/* trimming drops idle device entries of freed memory, whatever the budget */
	f->a[0].lo = 0;         /* cudaFree: the address is no CUDA memory now */
	ibc_ib_mr_trim(&c, SIZE_MAX / 2);
	tap_is_int(f->ndereg, 3, "trim deregisters the idle entry of freed device memory");
	tap_is_int(c.stats.dev_reused, 3, "dev_reused: 3");
	tap_is_int(c.nentries, 1, "the host entry stays");
	f->a[0] = (struct fake_alloc){ d0, d0 + 4 * pg, 72, 0, 0 };

	/*
	 * trimming runs at every operation: it asks the driver about idle
	 * device entries at most every 100 ms (a cudaFree'd one is unpinned
	 * then; a hit checks the buffer id every time)
	 */
	{
		int q0;
		int k;

		tap_is_int(ibc_ib_mr_get(&c, (void *)(d0 + 8), 8, 0, &m1), IBC_OK,
			   "device entry for the trim-rate checks");
		ibc_ib_mr_put(&c, m1);
		q0 = f->nquery;
		for (k = 0; k < 1000; k++)
			ibc_ib_mr_trim(&c, SIZE_MAX / 2);
		tap_ok(f->nquery - q0 <= 1, "1000 trims in a row: %d driver queries (at most 1)",
		       f->nquery - q0);
		f->a[0].lo = 0; /* cudaFree */
		ibc_ib_mr_trim(&c, SIZE_MAX / 2);
		tap_is_int(c.stats.dev_reused, 3, "freed within 100 ms of the last query: not seen yet");
		usleep(120000);
		ibc_ib_mr_trim(&c, SIZE_MAX / 2);
		tap_is_int(c.stats.dev_reused, 4, "120 ms later the trim unpins it (dev_reused: 4)");
		f->a[0] = (struct fake_alloc){ d0, d0 + 4 * pg, 73, 0, 0 };
	}

	/* peer memory: the mode is passed through */
	f->mode = IBC_GDR_PEERMEM;
	tap_is_int(ibc_ib_mr_get(&c, (void *)(d1 + 5), 100, 0, &m1), IBC_OK,
		   "device range registers (nvidia_peermem)");
	tap_is_int(f->last_mode, IBC_GDR_PEERMEM, "in peer-memory mode");
	tap_ok(f->last_addr == d1 && f->last_nbytes == 8 * pg, "whole allocation of device 1");
	ibc_ib_mr_put(&c, m1);
	ibc_ib_mr_invalidate(&c, (void *)(d1 + pg), 1);
	tap_is_int(c.nentries, 1, "invalidation of a device range drops its entry");

	/* OFF: refused, with the cause in the text, and nothing registered */
	f->mode = IBC_GDR_OFF;
	f->ndevreg = f->nreg = 0;
	st = ibc_ib_mr_get(&c, (void *)(d0 + 8), 8, 0, &m1);
	tap_is_int(st, IBC_ERR_UNSUPPORTED, "GPUDirect off: IBC_ERR_UNSUPPORTED");
	tap_ok(strstr(c.errbuf, "GPUDirect RDMA is off") && strstr(c.errbuf, "CUDA device 0") &&
	       strstr(c.errbuf, "fake0") && strstr(c.errbuf, "fake decision"),
	       "the text names device, NIC and cause: '%s'", c.errbuf);
	tap_is_int(f->ndevreg + f->nreg, 0, "nothing registered (no host-page fallback)");

	/* managed memory and unreadable allocations */
	f->mode = IBC_GDR_DMABUF;
	f->a[2] = (struct fake_alloc){ (uintptr_t)buf + 48 * pg, (uintptr_t)buf + 50 * pg, 9, 0, 1 };
	st = ibc_ib_mr_get(&c, buf + 48 * pg, 64, 0, &m1);
	tap_is_int(st, IBC_ERR_UNSUPPORTED, "managed memory refused");
	tap_ok(strstr(c.errbuf, "managed") != NULL, "and said so: '%s'", c.errbuf);
	f->query_errno = EFAULT;
	st = ibc_ib_mr_get(&c, (void *)d0, 64, 0, &m1);
	f->query_errno = 0;
	tap_is_int(st, IBC_ERR_CUDA, "unreadable allocation: IBC_ERR_CUDA");
	tap_is_int(f->ndevreg + f->nreg, 0, "still nothing registered");

	/* transport-owned memory is never queried */
	tap_is_int(ibc_ib_mr_get(&c, (void *)d0, 64, IBC_IB_MR_PERSIST, &m3), IBC_OK,
		   "persistent registration");
	tap_is_int(f->nreg, 1, "goes to the host callback without a query");
	ibc_ib_mr_put(&c, m3);
	ibc_ib_mr_invalidate(&c, (void *)d0, 64);

	/* IBC_GDR=0: the verbs backend's own decision is OFF, and the cache refuses */
	setenv("IBC_GDR", "0", 1);
	ibc_param_reset_all();
	tap_is_int(ibc_gdr_facts_probe(0, "fake0", -1, &facts), IBC_OK, "probe with IBC_GDR=0");
	tap_is_int(facts.force, 0, "IBC_GDR=0 read");
	snprintf(f->ctx.dev_name, sizeof(f->ctx.dev_name), "fake0");
	f->ctx.dmabuf_nic = -1;
	mode = IBC_GDR_MODE_COUNT;
	st = ibc_ib_mr_dev_gdr_mode(&f->ctx, 3, &mode, why, sizeof(why));
	tap_ok(st == IBC_OK && mode == IBC_GDR_OFF && strstr(why, "IBC_GDR=0"),
	       "ibc_ib_mr_dev_gdr_mode with IBC_GDR=0: off ('%s')", why);
	f->real_gdr = 1;
	f->a[3] = (struct fake_alloc){ (uintptr_t)buf + 56 * pg, (uintptr_t)buf + 60 * pg, 10, 3, 0 };
	st = ibc_ib_mr_get(&c, buf + 56 * pg, pg, 0, &m1);
	tap_is_int(st, IBC_ERR_UNSUPPORTED, "IBC_GDR=0: device memory refused by the cache");
	tap_ok(strstr(c.errbuf, "IBC_GDR=0") != NULL, "naming IBC_GDR=0: '%s'", c.errbuf);
	tap_is_int(f->ndevreg, 0, "and not registered");
	unsetenv("IBC_GDR");
	ibc_param_reset_all();

	/*
	 * a whole allocation that does not fit (ENOMEM): the GPU pages (64 KiB)
	 * of the range asked for are registered instead, and hits need them
	 * (the ENOMEM also drops every idle registration first: last test)
	 */
	{
		const uintptr_t K = 1024;
		char *big = aligned_alloc(1 << 20, 1 << 20);
		uintptr_t g = (uintptr_t)big;
		int r0;

		f->real_gdr = 0;
		f->mode = IBC_GDR_DMABUF;
		f->a[3] = (struct fake_alloc){ g, g + 1024 * K, 81, 0, 0 };
		f->dev_max = 256 * K;
		r0 = f->ndevreg;
		tap_is_int(ibc_ib_mr_get(&c, (void *)(g + 300 * K), 100, 0, &m1), IBC_OK,
			   "1 MiB allocation over the device limit: registered");
		tap_ok(f->last_addr == g + 256 * K && f->last_nbytes == 64 * K,
		       "as the 64 KiB GPU page of the range (0x%lx + %zu)",
		       (unsigned long)(f->last_addr - g), f->last_nbytes);
		tap_is_int(c.stats.dev_partial, 1, "dev_partial: 1");
		tap_is_int(ibc_ib_mr_get(&c, (void *)(g + 310 * K), 1000, 0, &m2), IBC_OK,
			   "another range in that page");
		tap_ok(m2 == m1 && f->ndevreg == r0 + 1, "is a hit on the partial entry");
		ibc_ib_mr_put(&c, m2);
		tap_is_int(ibc_ib_mr_get(&c, (void *)(g + 250 * K), 80 * K, 0, &m2), IBC_OK,
			   "a range across two GPU pages");
		tap_ok(m2 != m1 && f->last_addr == g + 192 * K && f->last_nbytes == 192 * K,
		       "registers its own pages (0x%lx + %zu)", (unsigned long)(f->last_addr - g),
		       f->last_nbytes);
		ibc_ib_mr_put(&c, m2);
		ibc_ib_mr_put(&c, m1);
		f->dev_max = 0;
		ibc_ib_mr_invalidate(&c, big, 1 << 20);
		f->a[3].lo = 0;
		free(big);
	}

	ibc_ib_mr_cache_fini(&c);
	tap_is_int(f->live, 0, "fini deregisters everything");
	free(f);
	free(buf);
	return tap_done();
}
