/* SPDX-License-Identifier: MIT */
/*
 * shm_allreduce_cma.c - the shm all-reduce's single-copy path: for messages
 * of at least IBC_SHM_ALLREDUCE_CMA_MIN_BYTES, when every rank of the
 * communicator may read and write every other rank's memory by cross-memory
 * attach (process_vm_readv/process_vm_writev, Linux 3.2).
 *
 * The segment path (shm_allreduce.c) copies the input into the segment,
 * reduces a slice there and copies the result out: about 5 N bytes of
 * memory traffic per rank for a message of N bytes. Here a call is a
 * reduce-scatter and an all-gather done straight between the ranks'
 * buffers, in pieces of C bytes (IBC_SHM_ALLREDUCE_CHUNK_BYTES) that stay
 * in this core's cache:
 *
 *   1. publish the input and output addresses; arrive[me] = s
 *   2. wait until every rank's arrive >= s; compare the descriptors
 *   3. for each piece of this rank's slice (n slices of whole 4 KiB pages of
 *      elements, so that ranks seldom write one cache line of a buffer; of
 *      64-byte lines below 16 pages per rank, so that no rank sits idle):
 *        out[piece] = in_0[piece] op in_1[piece] op ... op in_{n-1}[piece]
 *        (rank order), then out[piece] written into every peer's output.
 *      A peer's buffer in ibc_mem_alloc() memory (a memfd) is mapped here
 *      once (/proc/<pid>/fd/<fd>) and read and written with plain loads and
 *      stores; any other by process_vm_readv into a cached scratch piece and
 *      process_vm_writev. Outputs of SHMAR_STREAM_MIN_BYTES and more are
 *      reduced into the scratch piece and written with non-temporal stores.
 *   4. reduced[me] = done[me] = s; wait until every rank's done >= s (no
 *      peer reads this rank's input or writes its output any more)
 *
 * Per rank that is the floor's traffic: each byte of its slice read once
 * from each of the n inputs and written once into each of the n outputs,
 * 2 N bytes in all. In place is safe: a rank reads and writes only its own
 * slice of every buffer. Results are bitwise those of the segment path
 * (the same rank-order reduction by one rank per element).
 *
 * Mapped buffers make the path worth it from the small path's end (4 KiB):
 * a call below s->cma_min takes it when every rank's previous call had
 * mapped buffers (ibc_shmar_cma_expect()).
 *
 * Whether it is used is decided once per communicator
 * (ibc_shmar_cma_agree(), at set-up): every rank probes a word of every
 * peer's memory with a read and a write, and an all-gather makes the answer
 * the same everywhere. A kernel or container that forbids it (ptrace
 * checks: Yama ptrace_scope, seccomp, different users) or IBC_SHM_CMA=0 on
 * any rank means the segment path at every size, and the log says which
 * rank could not reach which and why.
 *
 * Source: the single-copy intra-node collectives of Open MPI's coll/xhc
 * and of MPICH's CMA/XPMEM work (e.g. J. Hashmi et al., "Designing
 * Efficient Shared Address Space Reduction Collectives for Multi-/Many-cores",
 * IPDPS 2018), here with CMA and a slice per rank.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/memreg.h"
#include "base/param.h"
#include "base/util.h"
#include "coll/algo.h"
#include "coll/reduce.h"
#include "coll/shm_allreduce_internal.h"

#define CMA_SLICE_ALIGN 4096 /* bytes: slices are whole pages of elements */
#define MAPS_PER_PEER 4      /* peers' allocations kept mapped, per peer (LRU) */
/*
 * From this size the outputs are written with non-temporal stores: the
 * result of a call this large is not in cache when the caller reads it
 * anyway (L2 1 MiB, L3 32 MiB here), and a store that need not read the line
 * first moves half the bytes.
 */
#define SHMAR_STREAM_MIN_BYTES (8u << 20)

/* describe @p..@p+@n for peers: its memfd allocation, if it lies in one */
static void share_publish(struct shmar_share *sh, const void *p, size_t n)
{
	uintptr_t start = 0;
	size_t len = 0;
	uint64_t id = 0;
	int fd = -1;

	if (!ibc_memreg_find_fd((uintptr_t)p, n, &start, &len, &fd, &id))
		id = 0;
	sh->start = start;
	sh->len = len;
	sh->fd = fd;
	__atomic_store_n(&sh->id, id, __ATOMIC_RELAXED); /* published by the arrive store */
}

/* 1 if @in and @out (@nbytes each) both lie in ibc_mem_alloc() memory that peers can map */
int ibc_shmar_cma_mapped(const void *in, const void *out, size_t nbytes)
{
	uintptr_t start;
	size_t len;
	uint64_t id;
	int fd;

	return ibc_memreg_find_fd((uintptr_t)in, nbytes, &start, &len, &fd, &id) &&
	       (in == out || ibc_memreg_find_fd((uintptr_t)out, nbytes, &start, &len, &fd, &id));
}

/*
 * Whether a call between IBC_SHM_ALLREDUCE_SMALL_BYTES and s->cma_min takes
 * the single-copy path: when every rank's previous such call had mapped
 * buffers (struct shmar_line.mapped of the last sequence number, which no
 * rank can overwrite before this rank arrives in the next: the same answer
 * on every rank). A wrong guess costs speed, not correctness: a rank whose
 * buffers are private is reached by cross-memory attach.
 */
int ibc_shmar_cma_expect(const struct ibc_shmar *s)
{
	int b = (int)(s->seq & 1);
	int q;

	if (s->cma_min == SIZE_MAX || s->seq == 0)
		return 0;
	for (q = 0; q < s->n; q++)
		if (!__atomic_load_n(&s->line[q].mapped[b], __ATOMIC_RELAXED))
			return 0;
	return 1;
}

/*
 * Unmap peers' allocations no call used in about the last 64 (a peer that
 * freed an allocation does not say so, and a mapping keeps its memory).
 */
static void unmap_unused(struct ibc_shmar *s)
{
	uint64_t idle = 64 * 2 * (uint64_t)s->n;
	int i;

	for (i = 0; s->maps && i < s->nmaps; i++) {
		struct shmar_map *e = &s->maps[i];

		if (e->id && s->map_tick - e->used > idle) {
			if (e->base)
				munmap(e->base, e->len);
			memset(e, 0, sizeof(*e));
		}
	}
}

/**
 * ibc_shmar_unmap_all() - Unmap every peer allocation this rank mapped
 * (communicator destruction). @s: [in,out] the state. Blocking: no.
 */
void ibc_shmar_unmap_all(struct ibc_shmar *s)
{
	int i;

	for (i = 0; s->maps && i < s->nmaps; i++)
		if (s->maps[i].base)
			munmap(s->maps[i].base, s->maps[i].len);
	ibc_free(s->maps);
	s->maps = NULL;
	s->nmaps = 0;
}

/* map peer @q's allocation @sh into slot @e; 0 on success, else errno */
static int share_map(struct ibc_shmar *s, int q, const struct shmar_share *sh,
		     struct shmar_map *e)
{
	char path[64];
	struct stat st;
	int fd;
	int err;

	memset(e, 0, sizeof(*e));
	e->peer = q;
	e->id = sh->id;
	e->len = (size_t)sh->len;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)s->line[q].pid, (int)sh->fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		e->failed = 1;
		return errno;
	}
	/* the peer is inside this call, so the fd is still its allocation's memfd */
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < sh->len) {
		err = (uint64_t)st.st_size < sh->len ? EINVAL : errno;
		close(fd);
		e->failed = 1;
		return err;
	}
	e->base = mmap(NULL, e->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = errno;
	close(fd);
	if (e->base == MAP_FAILED) {
		e->base = NULL;
		e->failed = 1;
		return err;
	}
	return 0;
}

/*
 * Peer @q's buffer at its address @addr, published in @sh, as a pointer
 * into this process's mapping of its allocation; NULL when it is not in
 * ibc_mem_alloc() memory or cannot be mapped (cross-memory attach then).
 * A peer's freed allocation stays mapped here until MAPS_PER_PEER x n newer
 * ones push it out, about 64 calls pass without it (unmap_unused()) or the
 * communicator is destroyed.
 */
static char *share_ptr(struct ibc_coll *coll, struct ibc_shmar *s, int q,
		       const struct shmar_share *sh, uint64_t addr)
{
	uint64_t id = __atomic_load_n(&sh->id, __ATOMIC_RELAXED);
	struct shmar_map *e = NULL;
	int i;
	int err;

	if (!id)
		return NULL;
	if (!s->maps) {
		s->maps = ibc_calloc((size_t)s->n * MAPS_PER_PEER, sizeof(*s->maps),
				     "shm all-reduce peer mappings");
		if (!s->maps)
			return NULL;
		s->nmaps = s->n * MAPS_PER_PEER;
	}
	for (i = 0; i < s->nmaps && !e; i++)
		if (s->maps[i].id == id && s->maps[i].peer == q)
			e = &s->maps[i];
	if (!e) {
		/* a free slot, else the least recently used (never one of this call's) */
		for (i = 0; i < s->nmaps; i++)
			if (!e || s->maps[i].id == 0 || s->maps[i].used < e->used) {
				e = &s->maps[i];
				if (e->id == 0)
					break;
			}
		if (e->base)
			munmap(e->base, e->len);
		err = share_map(s, q, sh, e);
		if (!s->map_logged || err) {
			s->map_logged = 1;
			if (err)
				IBC_LOG_INFO(COLL, "shm all-reduce: cannot map rank %d's ibc_mem_alloc() memory (%llu bytes): %s; cross-memory attach for it",
					     q, (unsigned long long)sh->len, strerror(err));
			else
				IBC_LOG_INFO(COLL, "shm all-reduce: mapped rank %d's ibc_mem_alloc() memory (%llu bytes): reducing straight between the ranks' buffers",
					     q, (unsigned long long)sh->len);
		}
	}
	e->used = ++s->map_tick;
	(void)coll;
	return e->base ? e->base + (addr - sh->start) : NULL;
}

/*
 * Move @len bytes between this process's @local and process @pid's address
 * @remote (@write: from local to remote). Returns 0, or -1 with errno set.
 */
int ibc_shmar_xfer(pid_t pid, void *local, uint64_t remote, size_t len, int write)
{
	size_t done = 0;

	while (done < len) {
		struct iovec l = { .iov_base = (char *)local + done, .iov_len = len - done };
		struct iovec r = { .iov_base = (void *)(uintptr_t)(remote + done),
				   .iov_len = len - done };
		ssize_t k;

		if (ibc_fault_hit(IBC_FAULT_CMA, write ? "process_vm_writev" : "process_vm_readv")) {
			errno = EPERM;
			return -1;
		}
		k = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) :
			    process_vm_readv(pid, &l, 1, &r, 1, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		if (k == 0) {
			errno = EFAULT;
			return -1;
		}
		done += (size_t)k;
	}
	return 0;
}

/* the all-gathered verdict of one rank on its peers */
struct cma_verdict {
	int32_t peer;   /* -1: reaches every peer; -2: IBC_SHM_CMA=0; else the first it cannot */
	int32_t err;    /* errno of that failure */
	int32_t write;  /* 1: the write failed, 0: the read */
	int32_t pad;
};

/* probe every peer's word with a read and a write (of the value it holds) */
static struct cma_verdict cma_probe_all(struct ibc_coll *coll, struct ibc_shmar *s)
{
	struct cma_verdict v = { .peer = -1 };
	int q;

	if (ibc_param_shm_cma() == 0) {
		v.peer = -2;
		return v;
	}
	for (q = 0; q < s->n; q++) {
		pid_t pid = (pid_t)s->line[q].pid;
		uint64_t addr = s->line[q].cma_probe;
		uint64_t w = 0;

		if (q == coll->net->rank)
			continue;
		if (ibc_shmar_xfer(pid, &w, addr, sizeof(w), 0) != 0) {
			v.peer = q;
			v.err = errno;
			return v;
		}
		if (w != SHMAR_MAGIC) {
			v.peer = q;
			v.err = EIO;    /* read something else: not the process we think */
			return v;
		}
		if (ibc_shmar_xfer(pid, &w, addr, sizeof(w), 1) != 0) {
			v.peer = q;
			v.err = errno;
			v.write = 1;
			return v;
		}
	}
	return v;
}

/**
 * ibc_shmar_cma_agree() - Decide, the same on every rank, whether the
 * communicator's all-reduces of at least s->cma_min bytes take the
 * single-copy path (file header); s->cma_min becomes SIZE_MAX when not.
 * Collective over the communicator's ranks, once at set-up, after every
 * rank mapped the segment and published its pid and probe address.
 * @coll: [in] communicator. @s: [in,out] its segment state.
 *
 * Blocking: one bootstrap all-gather, bounded by IBC_BOOTSTRAP_TIMEOUT_MS.
 * Return: IBC_OK (also when the path is declined: logged at INFO on rank 0
 * and on the rank that could not reach a peer); IBC_ERR_NO_MEMORY; the
 * bootstrap's IBC_ERR_REMOTE/IBC_ERR_TIMEOUT/IBC_ERR_SYSTEM.
 */
ibc_status_t ibc_shmar_cma_agree(struct ibc_coll *coll, struct ibc_shmar *s)
{
	struct cma_verdict *all = ibc_calloc((size_t)s->n, sizeof(*all), "shm all-reduce CMA probe");
	const int me = coll->net->rank;
	ibc_status_t st;
	int q;

	if (!all)
		return IBC_ERR_NO_MEMORY;
	all[me] = cma_probe_all(coll, s);
	if (all[me].peer >= 0)
		IBC_LOG_INFO(COLL, "shm all-reduce: cannot %s rank %d's memory by cross-memory attach (%s: %s); every all-reduce of this communicator copies through the segment",
			     all[me].write ? "write" : "read", all[me].peer,
			     all[me].write ? "process_vm_writev" : "process_vm_readv",
			     strerror(all[me].err));
	st = ibc_net_oob_allgather(coll->net, all, sizeof(*all));
	if (st != IBC_OK) {
		char why[1024];

		ibc_free(all);
		IBC_LOG_ERROR(INIT, "shm all-reduce set-up: bootstrap exchange failed: %s",
			      ibc_net_fail_text(coll->net, st, why, sizeof(why)));
		return st;
	}
	for (q = 0; q < s->n; q++) {
		if (all[q].peer == -1)
			continue;
		if (me == 0 && all[q].peer == -2)
			IBC_LOG_INFO(COLL, "shm all-reduce: rank %d has IBC_SHM_CMA=0: no single-copy path on this communicator",
				     q);
		else if (me == 0 && q != 0)
			IBC_LOG_INFO(COLL, "shm all-reduce: rank %d cannot %s rank %d's memory by cross-memory attach (%s): no single-copy path on this communicator",
				     q, all[q].write ? "write" : "read", all[q].peer,
				     strerror(all[q].err));
		s->cma_min = SIZE_MAX;
		break;
	}
	ibc_free(all);
	if (s->cma_min != SIZE_MAX) {
		s->cma_buf = ibc_aligned_alloc(64, 2 * s->chunk, "shm all-reduce CMA scratch pieces");
		s->pin = ibc_calloc((size_t)s->n, sizeof(*s->pin), "shm all-reduce peer inputs");
		s->pout = ibc_calloc((size_t)s->n, sizeof(*s->pout), "shm all-reduce peer outputs");
		if (!s->cma_buf || !s->pin || !s->pout)
			return IBC_ERR_NO_MEMORY;
		if (me == 0)
			IBC_LOG_INFO(COLL, "shm all-reduce: single-copy (cross-memory attach) from %zu bytes on %d ranks, pieces of %zu bytes",
				     s->cma_min, s->n, s->chunk);
	}
	return IBC_OK;
}

/*
 * 1 if this process can read (@write: read and write) @len bytes at @p:
 * ibc_shmar_xfer() with its own address space, so a bad range gives EFAULT
 * here instead of a signal (writing copies the bytes onto themselves, which
 * reads and writes them; reading goes a page at a time through @tmp)
 */
static int local_range_ok(const void *p, size_t len, int write)
{
	char tmp[4096];
	size_t off;

	if (write)
		return ibc_shmar_xfer(getpid(), (void *)p, (uint64_t)(uintptr_t)p, len, 1) == 0;
	for (off = 0; off < len; off += sizeof(tmp))
		if (ibc_shmar_xfer(getpid(), tmp, (uint64_t)(uintptr_t)p + off,
				   IBC_MIN(sizeof(tmp), len - off), 0) != 0)
			return 0;
	return 1;
}

/*
 * A failed ibc_shmar_xfer() between this rank's @local and rank @q's @what
 * (@write: this rank wrote into it): ESRCH, the peer is gone; EFAULT,
 * either side's buffer is not mapped (or not writable), and this rank's own
 * is named when it is the bad one, else rank @q's.
 */
ibc_status_t ibc_shmar_xfer_fail(struct ibc_coll *coll, int q, int write, const void *local,
				 size_t len, const char *what)
{
	int err = errno;

	if (err == EFAULT && !local_range_ok(local, len, !write))
		return ibc_net_fail(coll->net, IBC_ERR_INVALID_ARG, -1,
				    "shm single copy: this rank's buffer at %p (%zu bytes), which %s rank %d's %s, cannot be %s: %s",
				    local, len, write ? "was to be written into" : "was to receive",
				    q, what, write ? "read" : "written", strerror(err));
	return ibc_net_fail(coll->net, err == ESRCH ? IBC_ERR_REMOTE : IBC_ERR_SYSTEM, q,
			    "shm single copy: %s of %zu bytes %s rank %d's %s failed: %s",
			    write ? "process_vm_writev" : "process_vm_readv", len,
			    write ? "into" : "from", q, what, strerror(err));
}

/*
 * The result of this rank's piece @boff..@boff+@cnt elements into @res: its
 * own output (@out + @boff) or the scratch piece A (s->cma_buf), in rank
 * order. A mapped peer's input is read where it lies, another's copied first
 * by cross-memory attach into A (rank 0's: the first partial result) or B.
 * In place with @res the output, the partial result stays in A until this
 * rank's own input (in that output) has been used.
 */
ibc_status_t ibc_shmar_reduce_piece(struct ibc_coll *coll, struct ibc_shmar *s,
				    const struct ibc_op *op, const char *in, char *res, size_t boff,
				    size_t cnt, size_t esz, int accum)
{
	const int me = coll->net->rank;
	const size_t len = cnt * esz;
	char *A = s->cma_buf;
	char *B = s->cma_buf + s->chunk;
	const int hold = res != A && in + boff == res; /* in place into the output */
	const char *part = NULL;
	int q;

	if (accum)
		IBC_CHECK(ibc_shmar_acc(coll, s, cnt));
	for (q = 0; q < s->n; q++) {
		const char *src = in + boff;

		if (q != me && s->pin[q]) {
			src = s->pin[q] + boff;  /* mapped: read in place */
		} else if (q != me) {
			char *to = q == 0 && !accum ? (hold ? A : res) : B;

			if (ibc_shmar_xfer((pid_t)s->line[q].pid, to, s->line[q].call[s->cur_b].src + boff, len, 0) != 0)
				return ibc_shmar_xfer_fail(coll, q, 0, to, len, "input");
			src = to;
		}
		if (accum) {
			if (q == 0)
				ibc_cvt_to_f32(s->acc, src, cnt, op->dtype);
			else
				ibc_reduce_f32_acc(s->acc, src, cnt, op->dtype, op->redop);
		} else if (q == 0) {
			part = src;
		} else {
			char *to = hold && q < me ? A : res;

			ibc_reduce_local3(to, part, src, cnt, op->dtype, op->redop);
			part = to;
		}
	}
	if (accum) {
		if (op->redop == IBC_AVG)
			ibc_reduce_avg_finalize(s->acc, cnt, IBC_FLOAT32, s->n);
		ibc_cvt_from_f32(res, s->acc, cnt, op->dtype);
	} else if (op->redop == IBC_AVG) {
		ibc_reduce_avg_finalize(res, cnt, op->dtype, s->n);
	}
	return IBC_OK;
}

/**
 * ibc_shmar_single_begin() - Start a single-copy call (file header, steps 1
 * and 2): take its sequence number, publish this rank's buffers, arrive,
 * wait for every rank, compare the descriptors, and find each peer's
 * buffers (s->pin[q], s->pout[q]: mapped here, or NULL for cross-memory
 * attach at the addresses in s->line[q]).
 * @coll: [in] communicator. @s: [in,out] its state. @op: [in] the call.
 * @in, @in_bytes:   [in] this rank's input and its size, bytes.
 * @out, @out_bytes: [in] this rank's output and its size, bytes.
 * @seq_p: [out] the call's sequence number, for ibc_shmar_single_end().
 * Blocking: the arrival wait, bounded by IBC_TIMEOUT_MS. Return: as
 * ibc_shmar_cma_allreduce().
 */
ibc_status_t ibc_shmar_single_begin(struct ibc_coll *coll, struct ibc_shmar *s,
				    const struct ibc_op *op, const void *in, size_t in_bytes,
				    void *out, size_t out_bytes, uint64_t *seq_p)
{
	const int me = coll->net->rank;
	struct shmar_line *mine = &s->line[me];
	uint64_t seq = ++s->seq;
	int b = (int)(seq & 1);
	ibc_status_t st;
	int q;

	*seq_p = seq;
	IBC_CHECK(shmar_parity_free(coll, s, op, seq));
	s->cur_b = b;
	mine->call[b].src = (uint64_t)(uintptr_t)in;
	mine->call[b].dst = (uint64_t)(uintptr_t)out;
	share_publish(&mine->call[b].share[0], in, in_bytes);
	share_publish(&mine->call[b].share[1], out, out_bytes);
	s->my_mapped = mine->call[b].share[0].id && mine->call[b].share[1].id;
	__atomic_store_n(&mine->mapped[b], s->my_mapped, __ATOMIC_RELAXED);
	ibc_op_desc(op, &mine->post[b].desc);
	line_set(mine, F_ARRIVE, seq);
	/* arrived: peers that saw everyone arrive may be using this rank's buffers */
	st = ibc_shmar_wait(coll, s, op, F_ARRIVE, seq);
	if (st == IBC_OK) {
		s->arrived_all = seq;
		st = ibc_shmar_check_desc(coll, s, b);
	}
	for (q = 0; q < s->n && st == IBC_OK; q++)
		if (__atomic_load_n(&s->line[q].abort, __ATOMIC_ACQUIRE) == seq)
			st = ibc_net_fail(coll->net, IBC_ERR_REMOTE, q,
					  "shm single copy: rank %d gave up this call (its error is in its log)",
					  q);
	if (st != IBC_OK)
		return ibc_shmar_single_abort(coll, s, seq, st);
	for (q = 0; q < s->n; q++) {
		s->pin[q] = q == me ? NULL : share_ptr(coll, s, q, &s->line[q].call[s->cur_b].share[0],
						       s->line[q].call[s->cur_b].src);
		s->pout[q] = q == me ? NULL : share_ptr(coll, s, q, &s->line[q].call[s->cur_b].share[1],
							s->line[q].call[s->cur_b].dst);
	}
	if ((seq & 63) == 0)
		unmap_unused(s);
	return IBC_OK;
}

/* count a call that goes on by single copy after ibc_shmar_single_begin(), and its peers */
void ibc_shmar_single_count(struct ibc_coll *coll, struct ibc_shmar *s)
{
	int q;

	for (q = 0; q < s->n; q++) {
		if (q == coll->net->rank)
			continue;
		if (s->pin[q] && s->pout[q])
			s->n_peer_mapped++;
		else
			s->n_peer_cma++;
	}
	s->n_single++;
}

/**
 * ibc_shmar_single_end() - Finish a single-copy call (step 4): done, then
 * wait until every rank is (no peer reads or writes this rank's buffers any
 * more). @coll, @s, @op: as ibc_shmar_single_begin(); @seq: its number.
 * Blocking: bounded by IBC_TIMEOUT_MS.
 */
ibc_status_t ibc_shmar_single_end(struct ibc_coll *coll, struct ibc_shmar *s,
				  const struct ibc_op *op, uint64_t seq)
{
	struct shmar_line *mine = &s->line[coll->net->rank];
	int q;

	line_set(mine, F_REDUCED, seq);
	line_set(mine, F_DONE, seq);
	IBC_CHECK(ibc_shmar_wait(coll, s, op, F_DONE, seq));
	/* a rank that gave up this call set done too: its part is missing here */
	for (q = 0; q < s->n; q++)
		if (__atomic_load_n(&s->line[q].abort, __ATOMIC_ACQUIRE) == seq) {
			ibc_status_t st = ibc_net_status(coll->net);

			return st != IBC_OK ? st :
			       ibc_net_fail(coll->net, IBC_ERR_REMOTE, q,
					    "shm single copy: rank %d gave up this call (its error is in its log)",
					    q);
		}
	return IBC_OK;
}

/*
 * Process @pid has exited: gone, or a zombie its parent has not reaped yet
 * (kill() still finds those, and a killed rank's launcher may reap late).
 */
static int proc_gone(pid_t pid)
{
	char path[64];
	char buf[256];
	const char *p;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return 0;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');   /* "pid (comm) S ...": the state follows the name */
	return p && (p[2] == 'Z' || p[2] == 'X');
}

/**
 * ibc_shmar_single_abort() - Leave a single-copy call that failed on this
 * rank after it arrived (@st, already logged): mark the call given up and
 * done, so that no peer waits for this rank's part and each reports the
 * failure instead of a result without it (ibc_shmar_single_end()); then
 * wait, bounded by IBC_TIMEOUT_MS, until every live peer that arrived is
 * done too, so that none still reads or writes this rank's buffers when the
 * caller gets them back (a peer that has not arrived never will touch them:
 * it sees the mark once every rank has arrived, or fails before). @coll, @s: as ibc_shmar_single_begin(); @seq: the call.
 * Return: @st.
 */
ibc_status_t ibc_shmar_single_abort(struct ibc_coll *coll, struct ibc_shmar *s, uint64_t seq,
				    ibc_status_t st)
{
	struct shmar_line *mine = &s->line[coll->net->rank];
	uint64_t deadline = ibc_time_ns() + (uint64_t)coll->net->timeout_ms * 1000000ull;
	int q;

	__atomic_store_n(&mine->abort, seq, __ATOMIC_RELEASE);
	line_set(mine, F_REDUCED, seq);
	line_set(mine, F_DONE, seq);
	for (q = 0; q < s->n; q++) {
		pid_t pid = (pid_t)s->line[q].pid;
		int k = 0;

		/*
		 * only a peer that arrived can be using this rank's buffers; one
		 * that arrives later sees the mark after its arrival wait
		 */
		while (line_get(&s->line[q], F_ARRIVE) >= seq &&
		       line_get(&s->line[q], F_DONE) < seq && ibc_time_ns() < deadline &&
		       !(k++ % 20 == 0 && proc_gone(pid))) {
			struct timespec ts = { 0, 50000 };

			nanosleep(&ts, NULL);
		}
	}
	return st;
}

/**
 * ibc_shmar_cma_allreduce() - One all-reduce by the single-copy path (file
 * header). Called by ibc_shm_allreduce() on every rank for the same call
 * (the size threshold is rank 0's, the decision agreed at set-up).
 * @coll:   [in] communicator (every rank on this host, CMA agreed).
 * @s:      [in,out] its segment state (the call takes one sequence number).
 * @op:     [in] the all-reduce; host memory.
 * @in:     [in] input, @nbytes bytes; may equal @out (in place).
 * @out:    [out] output, @nbytes bytes; peers write their slices into it.
 * @nbytes: [in] message size, bytes (> 0).
 * @accum:  [in] sum float16/bfloat16 in fp32 (IBC_ACCUM_FP32).
 *
 * Blocking: until every rank has written its slice everywhere; waits as in
 * the segment path, bounded by IBC_TIMEOUT_MS.
 * Return: IBC_OK; IBC_ERR_TIMEOUT; IBC_ERR_REMOTE (a peer's process is
 * gone); IBC_ERR_INVALID_USAGE (mismatched calls); IBC_ERR_SYSTEM (a
 * transfer failed: a peer passed an unmapped buffer); IBC_ERR_NO_MEMORY.
 * Errors are logged and poison @coll.
 */
ibc_status_t ibc_shmar_cma_allreduce(struct ibc_coll *coll, struct ibc_shmar *s,
				     const struct ibc_op *op, const char *in, char *out,
				     size_t nbytes, int accum)
{
	const int me = coll->net->rank;
	uint64_t seq;
	size_t esz = nbytes / op->count;
	/* whole pages per slice, or cache lines where pages would leave ranks idle */
	size_t unit = IBC_MAX((nbytes >= (size_t)s->n * 16 * CMA_SLICE_ALIGN ? CMA_SLICE_ALIGN : 64) /
				      esz,
			      (size_t)1);
	size_t units = (op->count + unit - 1) / unit;
	size_t lo = IBC_MIN(op->count, ibc_block_offset(units, s->n, me) * unit);
	size_t hi = IBC_MIN(op->count, (ibc_block_offset(units, s->n, me) +
					ibc_block_count(units, s->n, me)) * unit);
	size_t piece = IBC_MAX(s->chunk / esz, (size_t)1);
	int stream = nbytes >= SHMAR_STREAM_MIN_BYTES;
	ibc_status_t st;
	size_t off;
	int q;

	IBC_CHECK(ibc_shmar_single_begin(coll, s, op, in, nbytes, out, nbytes, &seq));
	ibc_shmar_single_count(coll, s);
	for (off = lo; off < hi; off += piece) {
		size_t cnt = IBC_MIN(piece, hi - off);
		size_t boff = off * esz;
		size_t len = cnt * esz;
		/* streaming: the result in cache (A), then into every output */
		char *res = stream ? s->cma_buf : out + boff;

		st = ibc_shmar_reduce_piece(coll, s, op, in, res, boff, cnt, esz, accum);
		if (st != IBC_OK)
			return ibc_shmar_single_abort(coll, s, seq, st);
		for (q = stream ? 0 : 1; q < s->n; q++) {
			int r = (me + q) % s->n;
			char *to = r == me ? out + boff : s->pout[r] ? s->pout[r] + boff : NULL;

			if (to && stream)
				ibc_copy_stream(to, res, len);
			else if (to)
				memcpy(to, res, len);
			else if (ibc_shmar_xfer((pid_t)s->line[r].pid, (void *)res,
						s->line[r].call[s->cur_b].dst + boff, len, 1) != 0)
				return ibc_shmar_single_abort(coll, s, seq,
							      ibc_shmar_xfer_fail(coll, r, 1, res, len,
										  "output"));
		}
		__atomic_fetch_add(&coll->net->cur_bytes_done, 2 * len * (size_t)s->n,
				   __ATOMIC_RELAXED);
	}
	if (stream)
		ibc_copy_stream_fence();  /* before done: the stores are weakly ordered */
	return ibc_shmar_single_end(coll, s, op, seq);
}
