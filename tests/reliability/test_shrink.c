/* SPDX-License-Identifier: MIT */
/*
 * test_shrink.c - ibc_comm_revoke(), ibc_comm_agree() and ibc_comm_shrink()
 * over shm and tcp, 2 to 8 ranks as forked children: ranks die by SIGKILL
 * after a first exact all-reduce (one rank, rank 0, the last rank, two at
 * once, and the agreement's coordinator in the middle of sending its
 * decision: IBC_FAULT_INJECT=agree_crash); the survivors see their next
 * all-reduce fail, revoke (the call after it returns IBC_ERR_REVOKED),
 * agree on the AND of their flags and on exactly the dead ranks, shrink to
 * a communicator of the survivors in the old order, and all-reduce on it
 * exactly (integer sums of the survivors' values). A revoke with no rank
 * dead ends the other ranks' pending all-reduce at once. And 100 cycles of
 * agree + shrink + all-reduce + destroy on a healthy communicator leave the
 * number of open fds, the heap in use and the mappings where they were.
 * Grow: after rank 1 of 3 dies and the others shrink, a replacement process
 * joins with ibc_comm_grow_id() + ibc_comm_grow() as rank 2; then 100
 * cycles of grow (2 + the same joiner) + exact all-reduce + destroy.
 */
#include "config.h"

#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#ifdef IBC_ASAN
#include <sanitizer/lsan_interface.h>
#endif

#include "ibcoll.h"
#include "tap.h"
#include "tree/fork_ranks.h"

#define MAXR 8
#define COUNT 1031      /* not divisible by any rank count tested */

struct scen {
	const char *name;
	int n;
	int victims;            /* bit mask of ranks killed after the first all-reduce */
	int crash_rank;         /* -1, or the rank armed with agree_crash:<crash_nth> */
	int crash_nth;
	int revoke_only;        /* no rank dies: rank 0 revokes while the others wait */
	int pre_agrees;         /* agreements before the victims die (past the old 128 wrap) */
};

/* what each rank reports to the parent */
struct rep {
	int init;
	int first_exact;
	int second_failed;      /* the all-reduce after the deaths returned an error */
	int second_st;
	int revoked_next;       /* the call after ibc_comm_revoke(): IBC_ERR_REVOKED */
	int agree_ok;
	uint32_t agree_flag;
	int nfailed;
	int failed[MAXR];
	int shrink_ok;
	int new_rank;
	int new_size;
	int new_exact;
	int new_agree_clean;    /* agreement on the new communicator: nobody dead, flag AND */
	int revoke_ms;          /* revoke_only: how long the pending all-reduce waited after the revoke */
	int done;
};

static struct rep *reps;
static volatile uint64_t *revoke_at_us;       /* revoke_only: when rank 0 revoked */
static int *first_done;                       /* ranks past the first all-reduce */

static uint64_t now_us(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}

static int32_t val(int r, size_t i)
{
	return (int32_t)((r + 1) * 1000 + (int)(i % 97));
}

static int exact(const int32_t *a, int live_mask, int n)
{
	size_t i;

	for (i = 0; i < COUNT; i++) {
		int32_t want = 0;
		int r;

		for (r = 0; r < n; r++)
			if (live_mask & (1 << r))
				want += val(r, i);
		if (a[i] != want)
			return 0;
	}
	return 1;
}

static uint32_t flag_of(int r)
{
	return ~(1u << r);
}

static int rank_main(int rank, int nranks, void *arg)
{
	const struct scen *sc = arg;
	struct rep *me = &reps[rank];
	int live = ((1 << nranks) - 1) & ~sc->victims;
	ibc_comm_h comm;
	ibc_comm_h nc = NULL;
	int32_t *a = malloc(COUNT * sizeof(int32_t));
	ibc_status_t st;
	uint32_t flag;
	size_t i;
	int r;

	if (sc->crash_rank == rank) {
		char spec[32];

		snprintf(spec, sizeof(spec), "agree_crash:%d", sc->crash_nth);
		setenv("IBC_FAULT_INJECT", spec, 1);
	}
	if (!a || ibc_comm_init_env(&comm) != IBC_OK)
		return 1;
	me->init = 1;
	for (i = 0; i < COUNT; i++)
		a[i] = val(rank, i);
	me->first_exact = ibc_allreduce(a, a, COUNT, IBC_INT32, IBC_SUM, comm) == IBC_OK &&
			  exact(a, (1 << nranks) - 1, nranks);
	for (i = 0; i < (size_t)sc->pre_agrees; i++) {
		uint32_t f = 1;
		int nf = -1;

		me->first_exact &= ibc_comm_agree(comm, &f, NULL, &nf) == IBC_OK && f == 1 && nf == 0;
	}
	/* the victims die once every rank has its first result (a peer's death may fail an operation still in flight) */
	__atomic_add_fetch(first_done, 1, __ATOMIC_ACQ_REL);
	if (sc->victims & (1 << rank)) {
		for (i = 0; i < 10000 && __atomic_load_n(first_done, __ATOMIC_ACQUIRE) < nranks; i++)
			usleep(1000);
		raise(SIGKILL);
	}
	if (sc->revoke_only) {
		if (rank == 0) {
			usleep(300 * 1000);     /* the others are inside their all-reduce */
			*revoke_at_us = now_us();
			me->second_failed = ibc_comm_revoke(comm) == IBC_OK;
			me->second_st = IBC_ERR_REVOKED;
		} else {
			st = ibc_allreduce(a, a, COUNT, IBC_INT32, IBC_SUM, comm);
			me->revoke_ms = (int)((now_us() - *revoke_at_us) / 1000);
			me->second_st = st;
			me->second_failed = st == IBC_ERR_REVOKED;
		}
	} else {
		st = ibc_allreduce(a, a, COUNT, IBC_INT32, IBC_SUM, comm);
		me->second_st = st;
		me->second_failed = st == IBC_ERR_REMOTE || st == IBC_ERR_TIMEOUT ||
				    st == IBC_ERR_REVOKED;
		ibc_comm_revoke(comm);
	}
	me->revoked_next = ibc_allreduce(a, a, COUNT, IBC_INT32, IBC_SUM, comm) == IBC_ERR_REVOKED;

	flag = flag_of(rank);
	me->agree_ok = ibc_comm_agree(comm, &flag, me->failed, &me->nfailed) == IBC_OK;
	me->agree_flag = flag;
	me->shrink_ok = ibc_comm_shrink(comm, &nc) == IBC_OK && nc;
	if (me->shrink_ok) {
		int nf = -1;

		ibc_comm_rank(nc, &me->new_rank);
		ibc_comm_size(nc, &me->new_size);
		for (i = 0; i < COUNT; i++)
			a[i] = val(rank, i);
		me->new_exact = ibc_allreduce(a, a, COUNT, IBC_INT32, IBC_SUM, nc) == IBC_OK &&
				exact(a, live & ~(sc->crash_rank >= 0 ? 1 << sc->crash_rank : 0),
				      nranks);
		flag = flag_of(rank);
		me->new_agree_clean = ibc_comm_agree(nc, &flag, NULL, &nf) == IBC_OK && nf == 0;
		for (r = 0; r < nranks; r++)
			if ((live & (1 << r)) && r != sc->crash_rank)
				me->new_agree_clean &= !(flag & (1u << r));
		me->new_agree_clean &= (flag & 0x80000000u) != 0;
		ibc_comm_destroy(nc);
	}
	ibc_comm_destroy(comm);
	free(a);
	me->done = 1;
	return 0;
}

static void run(const char *transport, const struct scen *sc)
{
	int codes[MAXR];
	int n = sc->n;
	int dead = sc->victims | (sc->crash_rank >= 0 ? 1 << sc->crash_rank : 0);
	int nsurv = 0;
	int r;
	int ok;

	memset(reps, 0, sizeof(struct rep) * MAXR);
	*first_done = 0;
	fork_ranks(n, 60, rank_main, (void *)sc, codes);
	for (r = 0; r < n; r++)
		nsurv += !(dead & (1 << r));
	ok = 1;
	for (r = 0; r < n; r++)
		ok &= (dead & (1 << r)) ? codes[r] == 128 + SIGKILL : codes[r] == 0 && reps[r].done;
	tap_ok(ok, "%s, %s: the dead ranks died by SIGKILL, the others finished", transport, sc->name);
	for (r = 0; r < n; r++) {
		const struct rep *p = &reps[r];
		uint32_t want_flag = 0xffffffffu;
		int want_new = 0;
		int q;
		int k;

		if (dead & (1 << r))
			continue;
		for (q = 0; q < n; q++) {
			/* the crashing coordinator may or may not count: it died during the agreement */
			if (!(sc->victims & (1 << q)) && q != sc->crash_rank)
				want_flag &= flag_of(q);
			if (q < r && !(dead & (1 << q)))
				want_new++;
		}
		tap_ok(p->init && p->first_exact, "%s, %s, rank %d: first all-reduce exact", transport,
		       sc->name, r);
		tap_ok(p->second_failed, "%s, %s, rank %d: the all-reduce after the failure/revoke fails (%s)",
		       transport, sc->name, r, ibc_status_str((ibc_status_t)p->second_st));
		tap_ok(p->revoked_next, "%s, %s, rank %d: the next call returns IBC_ERR_REVOKED", transport,
		       sc->name, r);
		/* agreement: the flag AND and the failed set, the same on every survivor */
		k = p->agree_ok;
		if (sc->crash_rank >= 0) {
			uint32_t with = want_flag & flag_of(sc->crash_rank);

			k &= p->agree_flag == want_flag || p->agree_flag == with;
		} else {
			k &= p->agree_flag == want_flag;
		}
		if (sc->crash_rank < 0) {
			int j = 0;

			k &= p->nfailed == __builtin_popcount((unsigned)sc->victims);
			for (q = 0; q < n && k; q++)
				if (sc->victims & (1 << q))
					k &= p->failed[j++] == q;
		} else {
			/* the victims, and the coordinator if it died before deciding */
			k &= p->nfailed >= __builtin_popcount((unsigned)sc->victims);
		}
		tap_ok(k, "%s, %s, rank %d: agreement flag 0x%08x, %d failed (ok %d)", transport, sc->name,
		       r, p->agree_flag, p->nfailed, p->agree_ok);
		tap_ok(p->shrink_ok && p->new_size == nsurv && p->new_rank == want_new,
		       "%s, %s, rank %d: shrink to rank %d of %d (want %d of %d)", transport, sc->name, r,
		       p->new_rank, p->new_size, want_new, nsurv);
		tap_ok(p->new_exact, "%s, %s, rank %d: all-reduce on the shrunk communicator exact",
		       transport, sc->name, r);
		tap_ok(p->new_agree_clean, "%s, %s, rank %d: agreement on it: none failed, exact flag",
		       transport, sc->name, r);
		if (sc->revoke_only && r > 0)
			tap_ok(p->revoke_ms < 3000, "%s, %s, rank %d: the pending all-reduce ended %d ms after the revoke",
			       transport, sc->name, r, p->revoke_ms);
	}
	/* one answer: every survivor's agreement equals the first survivor's */
	{
		int first = -1;

		ok = 1;
		for (r = 0; r < n; r++) {
			if (dead & (1 << r))
				continue;
			if (first < 0) {
				first = r;
				continue;
			}
			ok &= reps[r].agree_flag == reps[first].agree_flag &&
			      reps[r].nfailed == reps[first].nfailed &&
			      !memcmp(reps[r].failed, reps[first].failed, sizeof(int) * (size_t)reps[r].nfailed);
		}
		tap_ok(ok, "%s, %s: every survivor got the same agreement", transport, sc->name);
	}
}

/* ------------------------------------------------------------------------ */
/* 100 cycles on a healthy communicator                                     */
/* ------------------------------------------------------------------------ */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;   /* the directory's own fd */
}

/* bytes malloc has handed out and not had back, all arenas (a leak grows it; caches do not) */
static long heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (long)(mi.uordblks + mi.hblkhd);
}

/* mappings of the process (a leaked shared-memory segment adds one per cycle) */
static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;
	int c;

	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

struct cyc {
	int fds_before, fds_after;
	long heap_before, heap_after;
	int maps_before, maps_after;
	int cycles_ok;
};
static struct cyc *cycs;

static int NCYCLES = 100;
enum { WARM = 5 };

static int cycle_main(int rank, int nranks, void *arg)
{
	struct cyc *me = &cycs[rank];
	int32_t *a = malloc(COUNT * sizeof(int32_t));
	ibc_comm_h comm;
	int k;

	(void)arg;
	if (!a || ibc_comm_init_env(&comm) != IBC_OK)
		return 1;
	for (k = 0; k < NCYCLES + WARM; k++) {
		ibc_comm_h nc = NULL;
		uint32_t flag = flag_of(rank);
		int nf = -1;
		int sz = 0;
		size_t i;
		int ok;

		if (k == WARM) {
			me->fds_before = count_fds();
			me->heap_before = heap_in_use();
			me->maps_before = count_maps();
		}
		ok = ibc_comm_agree(comm, &flag, NULL, &nf) == IBC_OK && nf == 0 &&
		     flag == (0xffffffffu & ~((1u << nranks) - 1));
		ok &= ibc_comm_shrink(comm, &nc) == IBC_OK && nc && ibc_comm_size(nc, &sz) == IBC_OK &&
		      sz == nranks;
		for (i = 0; ok && i < COUNT; i++)
			a[i] = val(rank, i);
		ok = ok && ibc_allreduce(a, a, COUNT, IBC_INT32, IBC_SUM, nc) == IBC_OK &&
		     exact(a, (1 << nranks) - 1, nranks);
		ok &= ibc_comm_destroy(nc) == IBC_OK;
		if (!ok)
			break;
		if (k >= WARM)
			me->cycles_ok++;
	}
	me->fds_after = count_fds();
	me->heap_after = heap_in_use();
	me->maps_after = count_maps();
	ibc_comm_destroy(comm);
	free(a);
#ifdef IBC_ASAN
	/* forked ranks end with _exit(): have LeakSanitizer look now (a leak fails the rank) */
	__lsan_do_leak_check();
#endif
	return 0;
}

/* ------------------------------------------------------------------------ */
/* a stopped rank is excluded, and told so when it runs again               */
/* ------------------------------------------------------------------------ */

struct stopbox {
	int pid2;
	int others_done;        /* ranks 0 and 1: agreed without rank 2, shrunk, destroyed */
	int others_ok[2];
	int st2;                /* rank 2's ibc_comm_agree() status after SIGCONT */
};
static struct stopbox *sb;

static int stop_main(int rank, int nranks, void *arg)
{
	ibc_comm_h comm;
	ibc_comm_h nc = NULL;
	int32_t one = 1;
	uint32_t flag = 1;
	int failed[4];
	int nf = -1;
	int k;

	(void)arg;
	(void)nranks;
	if (ibc_comm_init_env(&comm) != IBC_OK ||
	    ibc_allreduce(&one, &one, 1, IBC_INT32, IBC_SUM, comm) != IBC_OK)
		return 1;
	if (rank == 2) {
		sb->pid2 = (int)getpid();
		raise(SIGSTOP);         /* until the others are done with it */
		sb->st2 = ibc_comm_agree(comm, &flag, failed, &nf);
		ibc_comm_destroy(comm);
		return 0;
	}
	sb->others_ok[rank] = ibc_comm_agree(comm, &flag, failed, &nf) == IBC_OK && nf == 1 &&
			      failed[0] == 2 && ibc_comm_shrink(comm, &nc) == IBC_OK;
	if (nc) {
		int sz = 0;

		ibc_comm_size(nc, &sz);
		sb->others_ok[rank] &= sz == 2;
		ibc_comm_destroy(nc);
	}
	ibc_comm_destroy(comm);
	if (__atomic_add_fetch(&sb->others_done, 1, __ATOMIC_ACQ_REL) == 2)
		kill(sb->pid2, SIGCONT);
	for (k = 0; k < 100 && sb->others_done < 2; k++)
		usleep(10000);
	return 0;
}

static void run_stop(const char *transport)
{
	int codes[MAXR];

	memset(sb, 0, sizeof(*sb));
	sb->st2 = 1;
	fork_ranks(3, 120, stop_main, NULL, codes);
	tap_ok(codes[0] == 0 && codes[1] == 0 && codes[2] == 0 && sb->others_ok[0] && sb->others_ok[1],
	       "%s, rank 2 of 3 stopped (SIGSTOP): ranks 0 and 1 agree that it failed, shrink to 2 and leave",
	       transport);
	tap_ok(sb->st2 == IBC_ERR_REMOTE,
	       "%s, rank 2 continued after they left: its agreement returns IBC_ERR_REMOTE (excluded), not a decision of its own (got %s)",
	       transport, ibc_status_str((ibc_status_t)sb->st2));
}

/* ------------------------------------------------------------------------ */
/* grow: a replacement joins the survivors                                  */
/* ------------------------------------------------------------------------ */

struct growbox {
	ibc_unique_id_t id;
	int seq;                /* id of cycle seq is in @id */
	int ok[MAXR];
	int bad_args_ok;
	int cycles_ok[MAXR];
	int fds_before[MAXR], fds_after[MAXR];
	long heap_before[MAXR], heap_after[MAXR];
};
static struct growbox *gb;

static int wait_seq(int want)
{
	int i;

	for (i = 0; i < 20000 && __atomic_load_n(&gb->seq, __ATOMIC_ACQUIRE) < want; i++)
		usleep(1000);
	return __atomic_load_n(&gb->seq, __ATOMIC_ACQUIRE) >= want;
}

/* all-reduce on @c of size @n with rank @r: exact sum of val(0..n-1) */
static int grown_exact(ibc_comm_h c, int r, int n)
{
	int32_t *a = malloc(COUNT * sizeof(int32_t));
	size_t i;
	int ok;

	if (!a)
		return 0;
	for (i = 0; i < COUNT; i++)
		a[i] = val(r, i);
	ok = ibc_allreduce(a, a, COUNT, IBC_INT32, IBC_SUM, c) == IBC_OK && exact(a, (1 << n) - 1, n);
	free(a);
	return ok;
}

/*
 * Children 0-2 are a 3-rank job; rank 1 dies; ranks 0 and 2 shrink to 2,
 * grow to 3 with child 3 as the replacement (rank 2), all-reduce exactly.
 * Then GROW_CYCLES cycles of grow (2 members + the same joiner) + exact
 * all-reduce + destroy, with fds and heap compared.
 */
static int GROW_CYCLES = 100;

static int grow_main(int rank, int nranks, void *arg)
{
	ibc_comm_h comm = NULL;
	ibc_comm_h sc = NULL;
	ibc_comm_h gc = NULL;
	int r = -1;
	int n = 0;
	int k;

	(void)arg;
	(void)nranks;
	if (rank < 3) {
		int32_t one = 1;

		setenv("IBC_NRANKS", "3", 1);
		if (ibc_comm_init_env(&comm) != IBC_OK ||
		    ibc_allreduce(&one, &one, 1, IBC_INT32, IBC_SUM, comm) != IBC_OK || one != 3)
			return 1;
		__atomic_add_fetch(first_done, 1, __ATOMIC_ACQ_REL);
		if (rank == 1) {
			for (k = 0; k < 10000 && __atomic_load_n(first_done, __ATOMIC_ACQUIRE) < 3; k++)
				usleep(1000);
			raise(SIGKILL);
		}
		ibc_allreduce(&one, &one, 1, IBC_INT32, IBC_SUM, comm); /* fails: rank 1 is dead */
		ibc_comm_revoke(comm);
		if (ibc_comm_shrink(comm, &sc) != IBC_OK)
			return 2;
		ibc_comm_destroy(comm);
		if (ibc_comm_grow_id(sc, &gb->id) != IBC_OK)
			return 3;
		ibc_comm_rank(sc, &r);
		if (r == 0) {
			/* bad calls, refused before anything is sent */
			gb->bad_args_ok = ibc_comm_grow_id(sc, NULL) == IBC_ERR_INVALID_ARG &&
					  ibc_comm_grow(sc, 3, NULL, -1, &gc) == IBC_ERR_INVALID_ARG &&
					  ibc_comm_grow(sc, 3, &gb->id, 0, &gc) == IBC_ERR_INVALID_ARG &&
					  ibc_comm_grow(sc, 1, &gb->id, -1, &gc) == IBC_ERR_INVALID_ARG &&
					  ibc_comm_grow(NULL, 3, &gb->id, -1, &gc) == IBC_ERR_INVALID_ARG &&
					  ibc_comm_grow(NULL, 3, &gb->id, 3, &gc) == IBC_ERR_INVALID_ARG &&
					  ibc_comm_grow(sc, 3, &gb->id, -1, NULL) == IBC_ERR_INVALID_ARG &&
					  gc == NULL;
			__atomic_store_n(&gb->seq, 1, __ATOMIC_RELEASE);
		}
		if (ibc_comm_grow(sc, 3, &gb->id, -1, &gc) != IBC_OK)
			return 4;
	} else {
		if (!wait_seq(1) || ibc_comm_grow(NULL, 3, &gb->id, 2, &gc) != IBC_OK)
			return 5;
	}
	ibc_comm_rank(gc, &r);
	ibc_comm_size(gc, &n);
	gb->ok[rank] = n == 3 && r == (rank == 3 ? 2 : rank == 2 ? 1 : 0) && grown_exact(gc, r, 3);
	ibc_comm_destroy(gc);

	/* cycles: the 2-rank communicator grows to 3 and back, the same joiner each time */
	for (k = 0; k < GROW_CYCLES + WARM; k++) {
		int ok;

		if (k == WARM) {
			gb->fds_before[rank] = count_fds();
			gb->heap_before[rank] = heap_in_use();
		}
		gc = NULL;
		if (rank < 3) {
			ok = ibc_comm_grow_id(sc, &gb->id) == IBC_OK;
			if (ok && r == 0)
				__atomic_store_n(&gb->seq, k + 2, __ATOMIC_RELEASE);
			ok = ok && ibc_comm_grow(sc, 3, &gb->id, -1, &gc) == IBC_OK;
		} else {
			ok = wait_seq(k + 2) && ibc_comm_grow(NULL, 3, &gb->id, 2, &gc) == IBC_OK;
		}
		ibc_comm_rank(gc, &r);
		ok = ok && grown_exact(gc, r, 3);
		ok &= ibc_comm_destroy(gc) == IBC_OK;
		if (!ok)
			break;
		if (k >= WARM)
			gb->cycles_ok[rank]++;
		/* the next id may be published only once everyone has joined this one */
		if (rank < 3)
			ibc_barrier(sc);
	}
	gb->fds_after[rank] = count_fds();
	gb->heap_after[rank] = heap_in_use();
	ibc_comm_destroy(sc);
#ifdef IBC_ASAN
	__lsan_do_leak_check();
#endif
	return 0;
}

static void run_grow(const char *transport)
{
	int codes[MAXR];
	int r;

	memset(gb, 0, sizeof(*gb));
	*first_done = 0;
	fork_ranks(4, 300, grow_main, NULL, codes);
	tap_ok(codes[1] == 128 + SIGKILL && codes[0] == 0 && codes[2] == 0 && codes[3] == 0,
	       "%s, grow: rank 1 of 3 died, the others and the replacement exited 0 (%d %d %d %d)",
	       transport, codes[0], codes[1], codes[2], codes[3]);
	tap_ok(gb->bad_args_ok, "%s, grow: NULL id/newcomm, a member with a rank, nranks below the size, a joiner without one: IBC_ERR_INVALID_ARG",
	       transport);
	for (r = 0; r < 4; r++) {
		if (r == 1)
			continue;
		tap_ok(gb->ok[r], "%s, grow: process %d is rank %d of 3 after shrink + grow, all-reduce exact",
		       transport, r, r == 3 ? 2 : r == 2 ? 1 : 0);
		tap_ok(gb->cycles_ok[r] == GROW_CYCLES, "%s, grow: process %d: %d of %d grow + all-reduce + destroy cycles",
		       transport, r, gb->cycles_ok[r], GROW_CYCLES);
		tap_ok(gb->fds_after[r] <= gb->fds_before[r], "%s, grow: process %d: open fds %d -> %d",
		       transport, r, gb->fds_before[r], gb->fds_after[r]);
#ifdef IBC_ASAN
		tap_ok(1, "%s, grow: process %d: heap # SKIP ASan has its own allocator; LeakSanitizer checked",
		       transport, r);
#else
		tap_ok(gb->heap_after[r] - gb->heap_before[r] < 256 * 1024,
		       "%s, grow: process %d: heap in use %ld -> %ld bytes (< 256 KiB growth)",
		       transport, r, gb->heap_before[r], gb->heap_after[r]);
#endif
	}
}

int main(void)
{
	static const struct scen scens[] = {
		{ "2 ranks, rank 1 dies", 2, 1 << 1, -1, 0, 0, 0 },
		{ "3 ranks, rank 0 (the bootstrap root and hub) dies", 3, 1 << 0, -1, 0, 0, 0 },
		{ "5 ranks, ranks 1 and 3 die at once", 5, (1 << 1) | (1 << 3), -1, 0, 0, 0 },
		{ "8 ranks, rank 7 dies", 8, 1 << 7, -1, 0, 0, 0 },
		{ "4 ranks, rank 2 dies, then coordinator rank 0 dies after its first decision message",
		  4, 1 << 2, 0, 2, 0, 0 },
		{ "5 ranks, rank 0 dies, then coordinator rank 1 dies before deciding anything",
		  5, 1 << 0, 1, 1, 0, 0 },
		{ "3 ranks, no rank dies: rank 0 revokes a pending all-reduce", 3, 0, -1, 0, 1, 0 },
		{ "3 ranks, 200 agreements, then rank 2 dies", 3, 1 << 2, -1, 0, 0, 200 },
	};
	size_t t;
	size_t k;

	const char *tlist = getenv("TEST_SHRINK_TRANSPORTS");  /* e.g. "ib" in the Soft-RoCE VM */
	int quick = getenv("TEST_SHRINK_QUICK") != NULL;        /* a subset, cycles 3 */
	const char *use[2] = { "shm", "tcp" };
	size_t nt = 2;

	if (getenv("TEST_SHRINK_CYCLES"))
		NCYCLES = atoi(getenv("TEST_SHRINK_CYCLES"));
	if (quick) {
		NCYCLES = 3;
		GROW_CYCLES = 3;
	}
	if (tlist && *tlist) {
		use[0] = tlist;
		nt = 1;
	}
	reps = fork_ranks_shared(sizeof(struct rep) * MAXR);
	revoke_at_us = fork_ranks_shared(sizeof(uint64_t));
	first_done = fork_ranks_shared(sizeof(int));
	cycs = fork_ranks_shared(sizeof(struct cyc) * MAXR);
	gb = fork_ranks_shared(sizeof(*gb));
	sb = fork_ranks_shared(sizeof(*sb));
	if (!reps || !revoke_at_us || !first_done || !cycs || !gb || !sb)
		tap_bail_out("no shared memory for the results");
	/* fast detection: a dead peer is found within a few heartbeats */
	setenv("IBC_HEARTBEAT_MS", "200", 0);
	setenv("IBC_TIMEOUT_MS", "20000", 0);
	for (t = 0; t < nt; t++) {
		setenv("IBC_TRANSPORT", use[t], 1);
		for (k = 0; k < sizeof(scens) / sizeof(scens[0]); k++)
			if (!quick || k == 1 || k == 4 || k == 6 || k == 7)
				run(use[t], &scens[k]);
	}
	for (t = 0; t < nt; t++) {
		setenv("IBC_TRANSPORT", use[t], 1);
		run_grow(use[t]);
		if (!quick)
			run_stop(use[t]);
	}
	for (t = 0; t < nt; t++) {
		int codes[MAXR];
		int r;
		int ok = 1;

		setenv("IBC_TRANSPORT", use[t], 1);
		memset(cycs, 0, sizeof(struct cyc) * MAXR);
		ok = fork_ranks(3, 300, cycle_main, NULL, codes) == 0;
		for (r = 0; r < 3; r++) {
			ok &= cycs[r].cycles_ok == NCYCLES;
			/* fewer is fine: the first communicator's bootstrap root closes late */
			tap_ok(cycs[r].fds_after <= cycs[r].fds_before,
			       "%s, 3 ranks, rank %d: open fds %d before %d cycles, %d after", use[t],
			       r, cycs[r].fds_before, NCYCLES, cycs[r].fds_after);
#ifdef IBC_ASAN
			tap_ok(1, "%s, 3 ranks, rank %d: heap and mappings # SKIP ASan has its own allocator; LeakSanitizer checked each rank",
			       use[t], r);
#else
			tap_ok(cycs[r].heap_after - cycs[r].heap_before < 256 * 1024,
			       "%s, 3 ranks, rank %d: heap in use %ld -> %ld bytes (< 256 KiB growth)",
			       use[t], r, cycs[r].heap_before, cycs[r].heap_after);
			/* glibc keeps up to 40 MiB of freed thread stacks mapped: a few at most */
			tap_ok(cycs[r].maps_after - cycs[r].maps_before < 16,
			       "%s, 3 ranks, rank %d: mappings %d -> %d (< 16 more)", use[t], r,
			       cycs[r].maps_before, cycs[r].maps_after);
#endif
		}
		tap_ok(ok, "%s, 3 ranks: %d cycles of agree + shrink + exact all-reduce + destroy",
		       use[t], NCYCLES);
	}
	return tap_done();
}
