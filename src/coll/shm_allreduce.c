/* SPDX-License-Identifier: MIT */
/*
 * shm_allreduce.c - all-reduce through one shared segment per communicator
 * (IBC_ALGO=shm), for communicators whose ranks all share one host and talk
 * over the shm transport.
 *
 * The message-passing algorithms move every byte through a per-pair slot ring
 * (copy in, copy out) or CMA, and pay a lock-step hop per step: 2(n-1) for the
 * ring, log2(n) for recursive doubling. Here every local rank maps the same
 * segment, and one operation costs one or two flag synchronisations:
 *
 *   segment: header | line[n] (per rank: its counters, each group that
 *            peers poll in its own cache line; shm_allreduce_internal.h) |
 *            slab[n][2] (chunk C each) | result[2] (chunk C each)
 *
 *   small messages (N <= IBC_SHM_ALLREDUCE_SMALL_BYTES), call sequence s,
 *   buffer b = s % 2:
 *     1. wait until every rank's done >= s - 2 (nobody reads slab[*][b] any more;
 *        known without a look when this rank saw everyone arrive at s - 1)
 *     2. copy the input into slab[me][b] (up to 24 bytes: into its post line
 *        of parity b, beside the descriptor); arrive[me] = s (the post's
 *        sequence number, written last)
 *     3. wait until every rank's arrive >= s
 *     4. out = in[0][b] op in[1][b] op ... op in[n-1][b] (rank order; in:
 *        the slab or the post, shmar_in())
 *     5. done[me] = s                       -> one synchronisation per call
 *
 *   larger messages, per chunk of at most C bytes (chunk sequence s, b = s % 2):
 *     1. wait until every rank's done >= s - 2 (or saw all arrive at s - 1)
 *     2. copy the input chunk into slab[me][b] (a last chunk of up to 24
 *        bytes: into the post, as above); arrive[me] = s
 *     3. wait until every rank's arrive >= s
 *     4. reduce this rank's 1/n slice of the chunk over slab[0..n-1][b] (rank
 *        order) into result[b]; reduced[me] = s
 *     5. wait until every rank's reduced >= s
 *     6. copy result[b] to the output chunk; done[me] = s
 *   Double buffering lets a rank copy chunk s+1 in while others still copy
 *   chunk s out. Per rank and byte: one copy in, 1/n of the n-way reduction,
 *   one copy out (about 5 N bytes of memory traffic against 8.25 N for the
 *   slot ring on 4 ranks, bench/RESULTS.md).
 *
 * Every element is reduced by one rank in rank order 0..n-1 and everyone
 * copies that one result, so results are bitwise identical on all ranks and
 * deterministic run to run (they may differ in the last bits from the ring's
 * order, docs/algorithms.md). IBC_AVG divides once, at the end; with
 * IBC_ACCUM_FP32=1 float16/bfloat16 are summed in fp32 and rounded once.
 *
 * Mismatched calls: each rank publishes the descriptor of the all-reduce it
 * contributes each chunk to (sequence, count, dtype, op; checked by every
 * rank after the arrive wait), and, on entry to every collective whatever
 * its algorithm, the descriptor of that collective (ibc_shmar_announce()).
 * A rank left waiting for a peer that announced another collective of the
 * same sequence number (a broadcast where this rank runs an all-reduce, or
 * another dtype, op or root, or a count of 0 against one that is not; other
 * counts are not compared there, as an operation staged from device
 * buffers runs segments of different counts under one sequence number),
 * or a later collective (it returned from this one without its part),
 * reports mismatched calls instead of timing out; empty calls are announced
 * too. Either gives IBC_ERR_INVALID_USAGE. Waits spin, yield, then sleep, and are bounded by
 * IBC_TIMEOUT_MS; a peer whose process is gone gives IBC_ERR_REMOTE.
 *
 * Set-up (ibc_shmar_init(), at communicator creation when every rank runs
 * on this host): rank 0 creates the segment and sends its name over the
 * bootstrap; the others map it if they also reach every rank over shm; an
 * all-gather of everyone's result follows, after which rank 0 unlinks the
 * name (nothing is left in /dev/shm, even if a rank dies later). If any
 * rank failed or declined, all of them use the ring instead for the life of
 * the communicator. The segment is 2 (n + 1) C bytes of tmpfs, reserved
 * and mapped when it is created (ibc_shm_map(): a /dev/shm too full for it
 * means the ring, with a WARN, not a SIGBUS later).
 *
 * Source: the shared-buffer reduce-then-broadcast of R. L. Graham and G.
 * Shipman, "MPI Support for Multi-core Architectures: Optimized Shared
 * Memory Collectives", EuroPVM/MPI 2008 (Open MPI's coll/sm), here with the
 * reduction split in n slices (a reduce-scatter + all-gather through the
 * segment) and flag counters instead of fan-in/fan-out trees.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/shmseg.h"
#include "base/util.h"
#include "coll/algo.h"
#include "coll/reduce.h"
#include "coll/shm_allreduce_internal.h"

static size_t shmar_layout(int n, size_t chunk)
{
	return sizeof(struct shmar_hdr) + (size_t)n * sizeof(struct shmar_line) +
	       ((size_t)n * 2 + 2) * chunk;
}

static void shmar_wire(struct ibc_shmar *s)
{
	char *p = s->base;

	s->hdr = (struct shmar_hdr *)p;
	s->line = (struct shmar_line *)(p + sizeof(struct shmar_hdr));
	s->slab = p + sizeof(struct shmar_hdr) + (size_t)s->n * sizeof(struct shmar_line);
	s->result = s->slab + (size_t)s->n * 2 * s->chunk;
}

/**
 * ibc_shmar_destroy() - Unmap a communicator's segment (coll destruction).
 * @s: [in] the state, or NULL. Blocking: no.
 */
void ibc_shmar_destroy(struct ibc_shmar *s)
{
	if (!s)
		return;
	if (s->n_small + s->n_seg + s->n_single + s->n_asked + s->n_small_other)
		IBC_LOG_INFO(COLL, "shm all-reduce: %llu calls: %llu small, %llu through the segment, %llu single-copy (peers: %llu mapped, %llu by cross-memory attach), %llu others asked and ran the ring; %llu others in one step of the segment",
			     (unsigned long long)(s->n_small + s->n_seg + s->n_single + s->n_asked +
						  s->n_small_other),
			     (unsigned long long)s->n_small, (unsigned long long)s->n_seg,
			     (unsigned long long)s->n_single, (unsigned long long)s->n_peer_mapped,
			     (unsigned long long)s->n_peer_cma, (unsigned long long)s->n_asked,
			     (unsigned long long)s->n_small_other);
	if (s->base)
		munmap(s->base, s->size);
	ibc_free(s->acc);
	ibc_shmar_unmap_all(s);
	ibc_free(s->cma_buf);
	ibc_free(s->pin);
	ibc_free(s->pout);
	ibc_free(s->srcs);
	ibc_free(s);
}

/* map the segment open on @fd (closed here; @create: this rank made it); 1 on success */
static int shmar_map(struct ibc_shmar *s, int fd, int create)
{
	char err[256];

	s->base = ibc_shm_map(fd, s->size, create, err, sizeof(err));
	close(fd);
	if (!s->base) {
		IBC_LOG_WARN(COLL, "shm all-reduce: %s; using the ring", err);
		return 0;
	}
	shmar_wire(s);
	return 1;
}

/* rank 0: create and map; returns 1 on success (name in @m) */
static int shmar_create(struct ibc_coll *coll, struct ibc_shmar *s, struct shmar_msg *m)
{
	const uint8_t *id = ibc_net_comm_id(coll->net);
	char what[32];
	char why[160];
	int fd;

	/*
	 * The segment is optional: where /dev/shm is small it must not take
	 * the room the pair rings need (reserved whole, after it).
	 */
	if (!ibc_shm_optional_fits(s->size, coll->net->nlocal, why, sizeof(why))) {
		IBC_LOG_WARN(COLL, "shm all-reduce: its %zu-byte segment would leave too little room for the rings (%s); using the ring",
			     s->size, why);
		return 0;
	}
	snprintf(what, sizeof(what), "ar-%02x%02x%02x%02x%02x%02x", id[0], id[1], id[2], id[3], id[4],
		 id[5]);
	ibc_shm_seg_name(m->name, sizeof(m->name), what);
	fd = shm_open(m->name, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd < 0) {
		IBC_LOG_WARN(COLL, "shm all-reduce: shm_open(%s): %s; using the ring", m->name,
			     strerror(errno));
		return 0;
	}
	if (ftruncate(fd, (off_t)s->size) != 0) {
		IBC_LOG_WARN(COLL, "shm all-reduce: ftruncate(%s, %zu): %s; using the ring", m->name,
			     s->size, strerror(errno));
		close(fd);
		shm_unlink(m->name);
		return 0;
	}
	if (!shmar_map(s, fd, 1)) {
		shm_unlink(m->name);
		return 0;
	}
	s->hdr->size = s->size;
	s->hdr->chunk = s->chunk;
	s->hdr->small_max = s->small_max;
	s->hdr->cma_min = s->cma_min;
	s->hdr->single_cma_min = s->single_cma_min;
	s->hdr->onestep_max = s->onestep_max;
	s->hdr->nranks = (uint32_t)s->n;
	__atomic_store_n(&s->hdr->magic, SHMAR_MAGIC, __ATOMIC_RELEASE);
	m->size = s->size;
	return 1;
}

/* ranks > 0: map the segment rank 0 named */
static int shmar_attach(struct ibc_shmar *s, const struct shmar_msg *m)
{
	int fd;

	if (!m->ok || m->size != s->size)
		return 0;
	fd = shm_open(m->name, O_RDWR, 0600);
	if (fd < 0) {
		IBC_LOG_WARN(COLL, "shm all-reduce: shm_open(%s): %s; using the ring", m->name,
			     strerror(errno));
		return 0;
	}
	if (!shmar_map(s, fd, 0))
		return 0;
	if (__atomic_load_n(&s->hdr->magic, __ATOMIC_ACQUIRE) != SHMAR_MAGIC ||
	    s->hdr->nranks != (uint32_t)s->n || s->hdr->chunk != s->chunk) {
		IBC_LOG_WARN(COLL, "shm all-reduce: segment %s has another layout; using the ring",
			     m->name);
		return 0;
	}
	/*
	 * One small-message threshold for all: ranks that took different
	 * paths for one call would read each other's slab as the wrong thing
	 * (IBC_SHM_ALLREDUCE_SMALL_BYTES 64 on rank 0 and 65536 on rank 1 gave
	 * rank 0 garbage in half of a 4000-byte result, without an error).
	 */
	if (s->hdr->small_max != s->small_max)
		IBC_LOG_INFO(COLL, "shm all-reduce: IBC_SHM_ALLREDUCE_SMALL_BYTES is %zu here and %llu on rank 0; using rank 0's",
			     s->small_max, (unsigned long long)s->hdr->small_max);
	s->small_max = (size_t)s->hdr->small_max;
	s->cma_min = (size_t)s->hdr->cma_min;
	s->single_cma_min = (size_t)s->hdr->single_cma_min;
	s->onestep_max = (size_t)s->hdr->onestep_max;
	return 1;
}

/* every rank on this host (the same on all ranks: from the bootstrap's peer table) */
static int shmar_one_host(struct ibc_coll *coll)
{
	int i;

	for (i = 0; i < coll->net->nranks; i++)
		if (i != coll->net->rank && !ibc_net_same_host(coll->net, i))
			return 0;
	return 1;
}

/* this rank wants the segment: enabled, and every peer over shm */
static int shmar_wanted(struct ibc_coll *coll)
{
	int i;

	if (!ibc_param_shm_allreduce())
		return 0;
	for (i = 0; i < coll->net->nranks; i++)
		if (i != coll->net->rank && !(coll->net->peers[i].ops->caps & IBC_TCAP_LOCAL))
			return 0;
	return 1;
}

/**
 * ibc_shmar_init() - Set up the shm all-reduce segment of a new
 * communicator (file header), when all its ranks run on this host.
 * Collective over those ranks; called by communicator creation after the
 * transports are chosen.
 * @coll: [in,out] the communicator; coll->shmar is set when the exchange
 *        ran (its ->failed says whether the segment can be used).
 *
 * Blocking: bootstrap messages, bounded by IBC_BOOTSTRAP_TIMEOUT_MS.
 * Return: IBC_OK (also when the segment could not be created: the
 * communicator then uses the ring); IBC_ERR_NO_MEMORY; the bootstrap's
 * IBC_ERR_REMOTE/IBC_ERR_TIMEOUT/IBC_ERR_SYSTEM. Errors are logged.
 */
ibc_status_t ibc_shmar_init(struct ibc_coll *coll)
{
	struct ibc_shmar *s;
	struct shmar_msg m;
	int32_t *oks;
	ibc_status_t st = IBC_OK;
	int want;
	int ok;
	int i;

	if (coll->net->nranks < 2 || !shmar_one_host(coll))
		return IBC_OK;
	want = shmar_wanted(coll);
	s = ibc_calloc(1, sizeof(*s), "shm all-reduce state");
	oks = ibc_calloc((size_t)coll->net->nranks, sizeof(*oks), "shm all-reduce set-up");
	if (!s || !oks) {
		ibc_free(s);
		ibc_free(oks);
		IBC_LOG_ERROR(INIT, "cannot allocate the shm all-reduce state");
		return IBC_ERR_NO_MEMORY;
	}
	s->n = coll->net->nranks;
	s->chunk = IBC_ALIGN_UP((size_t)ibc_param_shm_allreduce_chunk_bytes(), 64);
	s->small_max = IBC_MIN((size_t)ibc_param_shm_allreduce_small_bytes(), s->chunk);
	s->cma_min = IBC_MAX((size_t)ibc_param_shm_allreduce_cma_min_bytes(), s->small_max + 1);
	s->single_cma_min = (size_t)ibc_param_shm_single_cma_min_bytes();
	s->onestep_max = IBC_MAX(s->small_max,
				 IBC_MIN((size_t)ibc_param_shm_onestep_rank_bytes() * (size_t)s->n, s->chunk));
	s->size = shmar_layout(s->n, s->chunk);
	s->srcs = ibc_calloc((size_t)s->n, sizeof(*s->srcs), "shm all-reduce sources");
	if (!s->srcs) {
		ibc_shmar_destroy(s);
		ibc_free(oks);
		IBC_LOG_ERROR(INIT, "cannot allocate the shm all-reduce state");
		return IBC_ERR_NO_MEMORY;
	}
	memset(&m, 0, sizeof(m));
	if (coll->net->rank == 0) {
		m.ok = want && shmar_create(coll, s, &m);
		for (i = 1; i < coll->net->nranks && st == IBC_OK; i++)
			st = ibc_net_oob_send(coll->net, i, SHMAR_TAG, &m, sizeof(m));
		ok = m.ok;
	} else {
		st = ibc_net_oob_recv(coll->net, 0, SHMAR_TAG, &m, sizeof(m));
		ok = st == IBC_OK && want && shmar_attach(s, &m);
	}
	if (ok) {
		s->line[coll->net->rank].pid = (int32_t)getpid();
		s->probe_word = SHMAR_MAGIC;
		s->line[coll->net->rank].cma_probe = (uint64_t)(uintptr_t)&s->probe_word;
	}
	oks[coll->net->rank] = ok;
	if (st == IBC_OK)
		st = ibc_net_oob_allgather(coll->net, oks, sizeof(*oks));
	if (coll->net->rank == 0 && m.ok)
		shm_unlink(m.name);
	for (i = 0; i < coll->net->nranks; i++)
		if (!oks[i])
			s->failed = 1;
	ibc_free(oks);
	if (st != IBC_OK) {
		char why[1024];

		ibc_shmar_destroy(s);
		IBC_LOG_ERROR(INIT, "shm all-reduce set-up: bootstrap exchange failed: %s",
			      ibc_net_fail_text(coll->net, st, why, sizeof(why)));
		return st;
	}
	if (s->failed && s->base) {
		munmap(s->base, s->size);
		s->base = NULL;
	}
	/* single-copy or not: the same answer on every rank (an all-gather) */
	if (s->failed) {
		s->cma_min = SIZE_MAX;
	} else {
		st = ibc_shmar_cma_agree(coll, s);
		if (st != IBC_OK) {
			ibc_shmar_destroy(s);
			return st;
		}
	}
	IBC_LOG_DEBUG(COLL, "shm all-reduce: %s, %d ranks, chunk %zu bytes, segment %zu bytes",
		      s->failed ? "not used (declined or failed on some rank)" : "segment mapped",
		      s->n, s->chunk, s->size);
	coll->shmar = s;
	return IBC_OK;
}

/**
 * ibc_shmar_usable() - Whether @coll has a segment mapped by every rank (the
 * same answer on all ranks: ibc_shmar_init() agreed on it). Pure.
 */
int ibc_shmar_usable(const struct ibc_coll *coll)
{
	return coll->shmar && !coll->shmar->failed;
}

/*
 * @op's call-level descriptor as announced: with IBC_DESC_F_STAGED for a
 * segment of a staged device operation and IBC_DESC_F_INTERNAL for the
 * tuner's internal operations on the user's sequence number, whose counts
 * are not the call's
 */
void ibc_shmar_op_desc(const struct ibc_op *op, struct ibc_msg_desc *d)
{
	ibc_op_desc(op, d);
	if (op->staged)
		d->flags |= IBC_DESC_F_STAGED;
	if (op->user)
		d->flags |= IBC_DESC_F_INTERNAL;
}

/**
 * ibc_shmar_announce() - Publish the collective this rank is entering, so
 * that a peer waiting in the shm all-reduce can tell mismatched calls from a
 * slow rank (file header). Called by ibc_coll_run() for every collective
 * (not send/recv) when the communicator has a segment.
 * @coll: [in] communicator. @op: [in] the collective.
 * Blocking: no. Threading: the thread running @coll's operations.
 */
void ibc_shmar_announce(struct ibc_coll *coll, const struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	struct shmar_line *me;

	if (!s || s->failed || op->coll == IBC_COLL_SEND || op->coll == IBC_COLL_RECV)
		return;
	me = &s->line[coll->net->rank];
	__atomic_store_n(&me->cur_gen, me->cur_gen + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	ibc_shmar_op_desc(op, &me->cur);
	__atomic_store_n(&me->cur_gen, me->cur_gen + 1, __ATOMIC_RELEASE);
}

/* rank @q's announced collective, if read consistently; 1 if *@d is valid */
static int shmar_peer_cur(const struct ibc_shmar *s, int q, struct ibc_msg_desc *d)
{
	const struct shmar_line *l = &s->line[q];
	uint64_t g1 = __atomic_load_n(&l->cur_gen, __ATOMIC_ACQUIRE);
	uint64_t g2;

	if (g1 & 1)
		return 0;
	memcpy(d, (const void *)&l->cur, sizeof(*d));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	g2 = __atomic_load_n(&l->cur_gen, __ATOMIC_RELAXED);
	return g1 == g2 && g1 != 0;
}

static size_t desc_nbytes(const struct ibc_msg_desc *d)
{
	size_t esz = 0;

	if (ibc_dtype_size((ibc_dtype_t)d->dtype, &esz) != IBC_OK)
		return 0;
	return (size_t)d->count * esz;
}

static const char *const phase_names[] = { "its input", "its reduced slice", "its copy-out" };

/*
 * Rank @q, whose counter @f this rank waits for in the all-reduce @mine,
 * announced @theirs: mismatched calls when it is another collective (or
 * dtype, op, root) of the same sequence number, the same collective with
 * another count (a count of 0 where this rank's is not, or the reverse,
 * always; other counts where neither is a staged segment or an internal
 * operation, whose counts are not the call's: ranks whose counts differ
 * may take different paths, one the segment and one the ring, and would
 * otherwise wait for each other until IBC_TIMEOUT_MS), or a later
 * collective: then @q completed #seq without writing its part, which only
 * a call that differs does (a count of 0 returns at once).
 */
static ibc_status_t shmar_peer_mismatch(struct ibc_coll *coll, const struct ibc_shmar *s, int q,
					const struct ibc_msg_desc *mine,
					const struct ibc_msg_desc *theirs, int f, uint64_t want)
{
	const unsigned loose = IBC_DESC_F_STAGED | IBC_DESC_F_INTERNAL;
	char a[300];
	char b[300];

	if (theirs->seq == mine->seq &&
	    (theirs->coll != mine->coll || theirs->dtype != mine->dtype || theirs->op != mine->op ||
	     theirs->root != mine->root || (theirs->count == 0) != (mine->count == 0) ||
	     (theirs->count != mine->count && !((theirs->flags | mine->flags) & loose))))
		return ibc_net_desc_check(coll->net, q, mine, desc_nbytes(mine), theirs,
					  desc_nbytes(theirs));
	if ((int32_t)(theirs->seq - mine->seq) <= 0)
		return IBC_OK;
	/*
	 * @q may have written its part and gone on since this rank last looked:
	 * it writes the counter before it announces the next collective, so a
	 * counter read after that announcement is current
	 */
	if (line_get(&s->line[q], f) >= want)
		return IBC_OK;
	ibc_msg_desc_text(mine, desc_nbytes(mine), a, sizeof(a));
	ibc_msg_desc_text(theirs, desc_nbytes(theirs), b, sizeof(b));
	return ibc_net_fail(coll->net, IBC_ERR_INVALID_USAGE, q,
			    "mismatched calls: rank %d has gone on to %s without writing %s for this rank's %s (a count of 0, or a call it skipped)",
			    q, b, phase_names[f], a);
}

/*
 * ibc_shmar_peer_check() - rank @q has not reached counter @f = @want of
 * this rank's call @mine: if it announced another collective, the check
 * of shmar_peer_mismatch(); IBC_OK while it is (or may be) in this call.
 */
ibc_status_t ibc_shmar_peer_check(struct ibc_coll *coll, const struct ibc_shmar *s, int q,
				  const struct ibc_msg_desc *mine, int f, uint64_t want)
{
	struct ibc_msg_desc theirs;

	if (!shmar_peer_cur(s, q, &theirs))
		return IBC_OK;
	return shmar_peer_mismatch(coll, s, q, mine, &theirs, f, want);
}

/* the first rank whose counter @f is below @want, or -1; @only >= 0: that rank alone */
static int first_behind(const struct ibc_shmar *s, int f, uint64_t want, int only)
{
	int q;

	if (only >= 0)
		return line_reached(&s->line[only], f, want) ? -1 : only;
	for (q = 0; q < s->n; q++)
		if (!line_reached(&s->line[q], f, want))
			return q;
	return -1;
}

/*
 * Wait until every rank's counter @f reaches @want, or rank @only's alone
 * when @only >= 0 (@q: the first rank behind): spin @sp->spin_ns (IBC_SPIN_US while the machine has cores to
 * spare and no peer was seen sharing this rank's core,
 * ibc_net_wait_spin_begin(); @sp->timed once past the first polls), yield
 * (IBC_YIELD_US, ibc_net_yield() into @sp), then sleep 20 us to 1 ms; every
 * millisecond check the communicator's health and the lagging rank's
 * process, and give up after IBC_TIMEOUT_MS without progress.
 */
static ibc_status_t shmar_wait_body(struct ibc_coll *coll, struct ibc_shmar *s,
				   const struct ibc_op *op, int f, uint64_t want, int q, int only,
				   struct ibc_net_spin *sp)
{
	struct ibc_msg_desc mine;
	uint64_t spin_ns = sp->spin_ns;
	uint64_t yield_ns = spin_ns + (uint64_t)ibc_param_yield_us() * 1000;
	uint64_t start = 0;
	uint64_t last = 0;
	uint64_t check = 0;
	long sleep_ns = 20000;
	int prev;
	int i;

	/*
	 * Where spinning is allowed, a first burst of polls without the clock:
	 * the wait of a small call mostly ends within it, and a clock read per
	 * poll (20-25 ns in a VM) is a tenth of a 2-rank 8-byte all-reduce.
	 */
	for (i = 0; spin_ns && q >= 0 && i < SHMAR_FAST_POLLS; i++) {
		ibc_cpu_relax();
		q = first_behind(s, f, want, only);
	}
	prev = q;
	while (q >= 0) {
		uint64_t now = ibc_time_ns();

		sp->timed = 1;
		if (!start) {
			start = last = check = now;
			ibc_net_wait_publish(coll->net, q, now / 1000000);
		} else if (q != prev) {
			last = now;
			prev = q;
			ibc_net_wait_publish(coll->net, q, now / 1000000);
			sleep_ns = 20000;
		}
		if (now - check >= 1000000ull) {
			ibc_status_t pst = ibc_net_status(coll->net);
			pid_t pid;
			int gone;

			check = now;
			if (pst != IBC_OK)
				return pst;
			/*
			 * @q was found behind before this rank last slept or was
			 * preempted: it may have written its part since, finished
			 * and exited (its last call before it destroyed its
			 * communicator), which is no error; a process that is gone
			 * writes nothing more, so its counter is read again after
			 * the look at its pid
			 */
			q = first_behind(s, f, want, only);
			if (q < 0)
				break;
			if (q != prev)
				continue;       /* another rank is behind now: its wait starts above */
			if (__atomic_load_n(&coll->net->aborting, __ATOMIC_ACQUIRE))
				return IBC_ERR_REMOTE;
			/* the call itself is named by ibc_net_fail() */
			gone = shmar_peer_gone(&s->line[q], f, want, &pid);
			if (gone == SHMAR_GONE_LEFT)
				return ibc_net_fail(coll->net, IBC_ERR_REMOTE, q,
						    "shm segment: rank %d left the communicator (destroy or abort) before it wrote %s (a call it did not make)",
						    q, phase_names[f]);
			if (gone == SHMAR_GONE_EXITED)
				return ibc_net_fail(coll->net, IBC_ERR_REMOTE, q,
						     "shm segment: process %d of rank %d is gone (exited or crashed) before it wrote %s",
						     (int)pid, q, phase_names[f]);
			/*
			 * The lagging rank is in another collective of this
			 * sequence number. Not the count: an operation staged
			 * from device buffers (src/cuda/cuda_stage.c) runs
			 * segments of different counts under one sequence
			 * number, and a peer still finishing the previous
			 * segment is slow, not mismatched; differing counts are
			 * caught by the per-chunk descriptors once both arrive.
			 */
			ibc_shmar_op_desc(op, &mine);
			pst = ibc_shmar_peer_check(coll, s, q, &mine, f, want);
			if (pst != IBC_OK)
				return pst;
			/* a peer's message for a call this rank does not make (tcp/ib peers) */
			pst = ibc_net_check_strays(coll->net, 0);
			if (pst != IBC_OK)
				return pst;
			/* keep the transports (and their failure reports) moving */
			pst = ibc_net_progress(coll->net);
			if (pst != IBC_OK)
				return pst;
			/* @q lags: ask it (and whom it waits on) why */
			if (now - last > (uint64_t)coll->net->timeout_ms * 1000000ull)
				return ibc_net_fail_stalled(coll->net, q, q,
							     "shm segment: no progress for %lld ms (IBC_TIMEOUT_MS) waiting for rank %d to write %s (step %llu)",
							     (long long)coll->net->timeout_ms, q, phase_names[f],
							     (unsigned long long)want);
		}
		if (now - last < spin_ns) {
			ibc_cpu_relax();
		} else if (now - last < yield_ns) {
			ibc_net_yield(sp);
		} else {
			struct timespec ts = { 0, sleep_ns };

			nanosleep(&ts, NULL);
			sleep_ns = IBC_MIN(sleep_ns * 2, 1000000L);
		}
		q = first_behind(s, f, want, only);
	}
	return IBC_OK;
}

/* shmar_wait_body(), the lagging rank published for peers' wait-for queries */
ibc_status_t ibc_shmar_wait_rank(struct ibc_coll *coll, struct ibc_shmar *s,
				 const struct ibc_op *op, int f, uint64_t want, int only)
{
	struct ibc_net_spin sp;
	int q = first_behind(s, f, want, only);
	ibc_status_t st;

	if (q < 0)
		return IBC_OK;  /* nothing to wait for */
	ibc_net_wait_spin_begin(coll->net, &sp);
	sp.polled = 1;
	st = shmar_wait_body(coll, s, op, f, want, q, only, &sp);
	ibc_net_wait_clear(coll->net);
	ibc_net_wait_spin_end(coll->net, &sp);
	return st;
}

ibc_status_t ibc_shmar_wait(struct ibc_coll *coll, struct ibc_shmar *s, const struct ibc_op *op,
			    int f, uint64_t want)
{
	return ibc_shmar_wait_rank(coll, s, op, f, want, -1);
}

/* after arrive: every rank must contribute to the same all-reduce */
ibc_status_t ibc_shmar_check_desc(struct ibc_coll *coll, struct ibc_shmar *s, int b)
{
	return ibc_shmar_check_desc_rank(coll, s, b, -1);
}

/* ibc_shmar_check_desc() against rank @only (>= 0) or every rank (-1) */
ibc_status_t ibc_shmar_check_desc_rank(struct ibc_coll *coll, struct ibc_shmar *s, int b, int only)
{
	const struct ibc_msg_desc *mine = &s->line[coll->net->rank].post[b].desc;
	int q;

	for (q = 0; q < s->n; q++) {
		const struct ibc_msg_desc *d = &s->line[q].post[b].desc;

		if ((only < 0 || q == only) && q != coll->net->rank && memcmp(d, mine, sizeof(*d)) != 0)
			return ibc_net_desc_check(coll->net, q, mine, desc_nbytes(mine), d,
						  desc_nbytes(d));
	}
	return IBC_OK;
}

/* s->acc holds at least @cnt floats afterwards */
ibc_status_t ibc_shmar_acc(struct ibc_coll *coll, struct ibc_shmar *s, size_t cnt)
{
	if (cnt <= s->acc_n)
		return IBC_OK;
	ibc_free(s->acc);
	s->acc = ibc_aligned_alloc(64, IBC_ALIGN_UP(cnt * sizeof(float), 64),
				   "shm all-reduce fp32 accumulator");
	s->acc_n = s->acc ? cnt : 0;
	if (!s->acc)
		return ibc_net_fail(coll->net, IBC_ERR_NO_MEMORY, -1, "cannot allocate %zu floats", cnt);
	return IBC_OK;
}

/*
 * dst[0..cnt) = src[0] op src[1] op ... op src[n-1], in rank order (IBC_AVG
 * divides once at the end; @accum: float16/bfloat16 summed in fp32).
 */
ibc_status_t ibc_shmar_reduce(struct ibc_coll *coll, struct ibc_shmar *s, const struct ibc_op *op,
			      char *dst, const char *const *src, size_t cnt, int accum)
{
	int q;

	if (cnt == 0)
		return IBC_OK;
	if (accum) {
		IBC_CHECK(ibc_shmar_acc(coll, s, cnt));
		ibc_cvt_to_f32(s->acc, src[0], cnt, op->dtype);
		for (q = 1; q < s->n; q++)
			ibc_reduce_f32_acc(s->acc, src[q], cnt, op->dtype, op->redop);
		if (op->redop == IBC_AVG)
			ibc_reduce_avg_finalize(s->acc, cnt, IBC_FLOAT32, s->n);
		ibc_cvt_from_f32(dst, s->acc, cnt, op->dtype);
		return IBC_OK;
	}
	ibc_reduce_local3(dst, src[0], src[1], cnt, op->dtype, op->redop);
	for (q = 2; q < s->n; q++)
		ibc_reduce_local(dst, src[q], cnt, op->dtype, op->redop);
	if (op->redop == IBC_AVG)
		ibc_reduce_avg_finalize(dst, cnt, op->dtype, s->n);
	return IBC_OK;
}

/*
 * the n inputs of buffer parity @b, from byte @off, of a call that put
 * @put_bytes each (ibc_shmar_put()): the sources of one reduction
 */
const char *const *ibc_shmar_slab_srcs(struct ibc_shmar *s, int b, size_t off, size_t put_bytes)
{
	int q;

	for (q = 0; q < s->n; q++)
		s->srcs[q] = shmar_in(s, q, b, put_bytes) + off;
	return s->srcs;
}

/**
 * ibc_shmar_put() - Publish this rank's part of segment call @seq: wait
 * until slab parity seq % 2 is free (every rank done with call @seq - 2),
 * copy @nbytes of @src into this rank's slab (or its arrival line, up to
 * SHMAR_INLINE_BYTES: read it back with shmar_in()), describe @op, arrive,
 * wait until every rank arrived and compare the descriptors.
 * @coll, @s: the communicator and its segment. @op: [in] the call.
 * @seq: [in] its sequence number (++s->seq). @src, @nbytes: [in] this
 * rank's input (@nbytes 0: none).
 *
 * The wait for seq - 2 is skipped when this rank saw every rank arrive at
 * seq - 1: a rank arrives at k only after it has finished every read of
 * call k - 1 and earlier (each path reads the segment only between its
 * arrival and its done, and arrives at the next call after that), so every
 * rank is past seq - 2. That saves a transfer of each peer's counter line
 * per call, which it has just written.
 * Blocking: bounded by IBC_TIMEOUT_MS. Return: as ibc_shmar_wait() and
 * ibc_shmar_check_desc().
 */
ibc_status_t ibc_shmar_put(struct ibc_coll *coll, struct ibc_shmar *s, const struct ibc_op *op,
			   uint64_t seq, const char *src, size_t nbytes)
{
	IBC_CHECK(ibc_shmar_post(coll, s, op, seq, src, nbytes));
	IBC_CHECK(ibc_shmar_wait(coll, s, op, F_ARRIVE, seq));
	s->arrived_all = seq;
	return ibc_shmar_check_desc(coll, s, (int)(seq & 1));
}

/* ibc_shmar_put() up to this rank's arrival, without the wait for the others */
ibc_status_t ibc_shmar_post(struct ibc_coll *coll, struct ibc_shmar *s, const struct ibc_op *op,
			    uint64_t seq, const char *src, size_t nbytes)
{
	struct shmar_line *me = &s->line[coll->net->rank];
	int b = (int)(seq & 1);

	IBC_CHECK(shmar_parity_free(coll, s, op, seq));
	if (nbytes)
		memcpy(shmar_in(s, coll->net->rank, b, nbytes), src, nbytes);
	__atomic_fetch_add(&coll->net->cur_bytes_done, nbytes, __ATOMIC_RELAXED);
	ibc_op_desc(op, &me->post[b].desc);
	/* peers read it in larger calls only: a store that changes nothing would take their copy */
	if (__atomic_load_n(&me->mapped[b], __ATOMIC_RELAXED) != s->my_mapped)
		__atomic_store_n(&me->mapped[b], s->my_mapped, __ATOMIC_RELAXED);
	line_set(me, F_ARRIVE, seq);
	return IBC_OK;
}

/**
 * ibc_shm_allreduce() - All-reduce through the communicator's shared segment
 * (file header). Runs in the calling thread (the progress thread or the
 * caller), host buffers only; every rank of @coll must be on this host.
 * @coll: [in] communicator.
 * @op:  [in] the all-reduce (count elements of dtype; in place when
 *             sendbuf == recvbuf).
 *
 * Falls back to the ring (ibc_ring_allreduce()) on every rank when the
 * communicator has no usable segment (ibc_shmar_init()).
 * Return: IBC_OK; IBC_ERR_TIMEOUT (a rank did not arrive within
 * IBC_TIMEOUT_MS); IBC_ERR_REMOTE (a rank's process is gone, or the
 * communicator is being aborted); IBC_ERR_INVALID_USAGE (ranks passed
 * different counts, dtypes or ops); IBC_ERR_NO_MEMORY; bootstrap errors of
 * the set-up. Errors are logged and poison @coll.
 */
ibc_status_t ibc_shm_allreduce(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ibc_shmar *s = coll->shmar;
	size_t esz;
	size_t N;
	size_t off;
	int accum;
	const char *in;
	char *out;

	/* no segment (not one host, IBC_SHM_ALLREDUCE=0 somewhere, set-up failed) */
	if (!s || s->failed)
		return ibc_ring_allreduce(coll, op);
	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	N = op->count * esz;
	in = op->sendbuf;
	out = op->recvbuf;
	accum = ibc_param_accum_fp32() && (op->dtype == IBC_FLOAT16 || op->dtype == IBC_BFLOAT16);
	/* error texts report "bytes moved so far": copies in and out of the segment */
	coll->net->cur_bytes_total += 2 * N;
	/*
	 * Single-copy: every size from s->cma_min; above the small path also
	 * when every rank's last call had mapped buffers (ibc_shmar_cma_expect()).
	 */
	if (N >= s->cma_min || (N > s->small_max && ibc_shmar_cma_expect(s)))
		return ibc_shmar_cma_allreduce(coll, s, op, in, out, N, accum);
	if (N > s->small_max && s->cma_min != SIZE_MAX)
		s->my_mapped = (uint64_t)ibc_shmar_cma_mapped(in, out, N);
	if (N <= s->small_max) {
		uint64_t seq = ++s->seq;

		s->n_small++;
		int b = (int)(seq & 1);

		IBC_CHECK(ibc_shmar_put(coll, s, op, seq, in, N));
		IBC_CHECK(ibc_shmar_reduce(coll, s, op, out, ibc_shmar_slab_srcs(s, b, 0, N), op->count,
					   accum));
		__atomic_fetch_add(&coll->net->cur_bytes_done, N, __ATOMIC_RELAXED);
		line_set(&s->line[coll->net->rank], F_REDUCED, seq);
		line_set(&s->line[coll->net->rank], F_DONE, seq);
		return IBC_OK;
	}
	s->n_seg++;
	/* chunks of whole elements */
	for (off = 0; off < N;) {
		size_t len = IBC_MIN(N - off, s->chunk / esz * esz);
		size_t cnt = len / esz;
		size_t so = ibc_block_offset(cnt, s->n, coll->net->rank) * esz;
		size_t sc = ibc_block_count(cnt, s->n, coll->net->rank);
		uint64_t seq = ++s->seq;
		int b = (int)(seq & 1);
		char *res = s->result + (size_t)b * s->chunk;

		IBC_CHECK(ibc_shmar_put(coll, s, op, seq, in + off, len));
		IBC_CHECK(ibc_shmar_reduce(coll, s, op, res + so, ibc_shmar_slab_srcs(s, b, so, len), sc,
					   accum));
		line_set(&s->line[coll->net->rank], F_REDUCED, seq);
		IBC_CHECK(ibc_shmar_wait(coll, s, op, F_REDUCED, seq));
		memcpy(out + off, res, len);
		__atomic_fetch_add(&coll->net->cur_bytes_done, len, __ATOMIC_RELAXED);
		line_set(&s->line[coll->net->rank], F_DONE, seq);
		off += len;
	}
	return IBC_OK;
}
