/* SPDX-License-Identifier: MIT */
/*
 * cuda_stage.c - operations on CUDA device buffers without GPUDirect RDMA:
 * which buffers are device memory (per call), and the staged pipeline that
 * runs the host algorithm on pinned host copies: a wrapper that the
 * executor chooses for such operations, calling back its host run for each
 * segment. Relies on the cuda_mem.c wrappers through cuda.h (stubs without
 * CUDA), on the net layer for errors and timeouts, and on a host "emulated"
 * copier for tests.
 *
 * Schedule. An operation on a block of B elements per rank block (count,
 * sendcount or recvcount; one block for allreduce/broadcast/reduce/send/recv,
 * nranks blocks for allgather/reduce-scatter/all-to-all) is cut into
 * segments of S = IBC_CUDA_STAGE_BYTES / (esize * blocks) elements of each
 * block. Segment k is one complete host operation on the elements
 * [kS, kS + len) of every block, with the same sequence number, so the
 * algorithms, their message descriptors and their reduction order are those
 * of host buffers. With slots 0..m-1 (IBC_CUDA_STAGE_NSLOTS) of pinned
 * memory and two CUDA streams (device->host "in", host->device "out"):
 *
 *   in(0)
 *   for k = 0 .. nseg-1:
 *       in(k+1):  wait out(k+1-m) (its slot is free), copy segment k+1 in
 *       wait in(k), run segment k on the host (network + CPU reduction)
 *       out(k):   copy segment k's result back, record its event
 *   wait out(nseg-m .. nseg-1)
 *
 * so the copy of segment k+1 to the host and of segment k-1 back to the
 * device overlap the network transfer of segment k. Blocked layouts move
 * with one 2D copy per segment (rows = blocks, pitch = the user's block).
 * Segments of different k touch disjoint bytes, which keeps every in-place
 * form of the collectives correct while copies of two segments overlap.
 * Mixing host and device buffers across ranks works up to one segment and
 * is otherwise caught as mismatched calls (the sub-operations' counts differ).
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/cuda_stage.h"
#include "base/alloc.h"
#include "base/check.h"
#include "base/coll_kind.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/twait.h"
#include "base/util.h"
#include "cuda/cuda.h"
#include "net/net.h"

#define STAGE_MAX_SLOTS 8
#define FAKE_MAX 64

enum { DIR_IN = 0, DIR_OUT = 1 };   /* device->host, host->device */

/* ------------------------------------------------------------------------ */
/* memory kinds                                                             */
/* ------------------------------------------------------------------------ */

/* test ranges of host memory that pretend to be device memory */
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uintptr_t lo;
	uintptr_t hi;
} fake[FAKE_MAX];
static int fake_n;      /* atomic: 0 on every real run (one load per buffer) */

static uint64_t stage_nops;       /* atomic counters for tests */
static uint64_t stage_nsegments;

ibc_status_t ibc_cuda_fake_device_add(const void *ptr, size_t nbytes)
{
	ibc_status_t st = IBC_OK;

	if (!ptr || !nbytes)
		return IBC_ERR_INVALID_ARG;
	pthread_mutex_lock(&fake_lock);
	if (fake_n == FAKE_MAX) {
		st = IBC_ERR_NO_MEMORY;
	} else {
		fake[fake_n].lo = (uintptr_t)ptr;
		fake[fake_n].hi = (uintptr_t)ptr + nbytes;
		__atomic_store_n(&fake_n, fake_n + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&fake_lock);
	return st;
}

void ibc_cuda_fake_device_remove(const void *ptr)
{
	int i;

	pthread_mutex_lock(&fake_lock);
	for (i = 0; i < fake_n; i++) {
		if (fake[i].lo == (uintptr_t)ptr) {
			fake[i] = fake[fake_n - 1];
			__atomic_store_n(&fake_n, fake_n - 1, __ATOMIC_RELEASE);
			break;
		}
	}
	pthread_mutex_unlock(&fake_lock);
}

static int fake_lookup(const void *ptr)
{
	uintptr_t p = (uintptr_t)ptr;
	int hit = 0;
	int i;

	pthread_mutex_lock(&fake_lock);
	for (i = 0; i < fake_n && !hit; i++)
		hit = p >= fake[i].lo && p < fake[i].hi;
	pthread_mutex_unlock(&fake_lock);
	return hit;
}

void ibc_cuda_stage_stats(uint64_t *nops_p, uint64_t *nsegments_p)
{
	if (nops_p)
		*nops_p = __atomic_load_n(&stage_nops, __ATOMIC_RELAXED);
	if (nsegments_p)
		*nsegments_p = __atomic_load_n(&stage_nsegments, __ATOMIC_RELAXED);
}

/* which buffers of the operation this rank reads and writes */
static void op_roles(const struct ibc_op *op, int rank, int *uses_send_p, int *uses_recv_p)
{
	int is_root = op->root == rank;
	int s = 1;
	int r = 1;

	switch (op->coll) {
	case IBC_COLL_BROADCAST:
		s = is_root;
		break;
	case IBC_COLL_REDUCE:
		r = is_root;
		break;
	case IBC_COLL_SEND:
		r = 0;
		break;
	case IBC_COLL_RECV:
		s = 0;
		break;
	case IBC_COLL_BARRIER:
		s = 0;
		r = 0;
		break;
	default:
		break;
	}
	*uses_send_p = s && op->count > 0;
	*uses_recv_p = r && op->count > 0;
}

/* kind of one buffer: fake ranges first (tests), then the driver */
static unsigned buf_flags(const void *p, unsigned dev_flag, int *dev_p)
{
	int dev = -1;

	if (!p)
		return 0;
	if (IBC_UNLIKELY(__atomic_load_n(&fake_n, __ATOMIC_ACQUIRE) > 0) && fake_lookup(p))
		return dev_flag | IBC_CUDA_REQ_EMULATED;
	if (ibc_cuda_ptr_kind(p, &dev) == IBC_MEMKIND_HOST)
		return 0;
	*dev_p = dev;
	return dev_flag;
}

void ibc_cuda_op_classify(struct ibc_op *op, int rank)
{
	int uses_send;
	int uses_recv;
	int dev = -1;
	unsigned f = 0;

	if (!IBC_CUDA_BUILT && IBC_LIKELY(__atomic_load_n(&fake_n, __ATOMIC_ACQUIRE) == 0))
		return;
	op_roles(op, rank, &uses_send, &uses_recv);
	if (uses_send)
		f |= buf_flags(op->sendbuf, IBC_CUDA_REQ_SEND_DEV, &dev);
	if (uses_recv)
		f |= buf_flags(op->recvbuf, IBC_CUDA_REQ_RECV_DEV, &dev);
	op->cuda_flags |= f;
	op->cuda_dev = dev;
}

/* ------------------------------------------------------------------------ */
/* per-communicator staging state                                           */
/* ------------------------------------------------------------------------ */

/* one queued copy of the emulated copier */
struct emu_copy {
	char *dst;
	size_t dpitch;
	const char *src;
	size_t spitch;
	size_t width;
	size_t height;
};

/* emulated stream: copies run only when an event covering them is waited for */
struct emu_stream {
	struct emu_copy *q;
	size_t n;               /* queued so far */
	size_t cap;
	size_t done;            /* executed so far */
};

struct stage_slot {
	char *send;             /* slot_bytes of pinned host memory */
	char *recv;             /* slot_bytes of pinned host memory */
	void *ev[2];            /* CUDA: completion event per direction */
	size_t mark[2];         /* emulation: queue position covering the slot's copies */
	int pending[2];         /* copies issued and not yet waited for */
};

/*
 * Pinned memory is never freed while the communicator lives: cudaFreeHost()
 * synchronizes the device, and a stream-ordered operation's own stream is
 * blocked in its host function until the operation ends, so a free inside
 * an operation would wait for itself. A state replaced by a larger one
 * keeps its buffers in @retired until ibc_cuda_stage_free() (as PyTorch's
 * pinned-memory cache does); stream and event destruction do not block.
 */
struct ibc_cuda_comm {
	int emulated;
	int dev;                /* device of streams and events (CUDA mode) */
	void *stream[2];        /* DIR_IN, DIR_OUT */
	struct emu_stream emu[2];
	int nslots;
	size_t slot_bytes;
	struct stage_slot slot[STAGE_MAX_SLOTS];
	void **retired;         /* pinned buffers of replaced states */
	int nretired;
};

static void stage_buf_free(int emulated, void *p)
{
	if (emulated)
		ibc_free(p);
	else
		ibc_cuda_host_free(p);
}

/*
 * free @cc; its staging buffers go to @heir's retired list when @heir is
 * given and of the same kind (emulated states follow the same path, so that
 * the tests exercise it)
 */
static ibc_status_t stage_state_free(struct ibc_cuda_comm *cc, struct ibc_cuda_comm *heir)
{
	ibc_status_t st = IBC_OK;
	int i;
	int d;

	if (!cc)
		return IBC_OK;
	if (heir && heir->emulated == cc->emulated) {
		void **nr = ibc_malloc((size_t)(heir->nretired + cc->nretired + 2 * cc->nslots) *
					       sizeof(*nr),
				       "retired staging buffers");

		if (!nr)
			return IBC_ERR_NO_MEMORY;
		if (heir->nretired)
			memcpy(nr, heir->retired, (size_t)heir->nretired * sizeof(*nr));
		if (cc->nretired)
			memcpy(nr + heir->nretired, cc->retired,
			       (size_t)cc->nretired * sizeof(*nr));
		heir->nretired += cc->nretired;
		for (i = 0; i < cc->nslots; i++) {
			nr[heir->nretired++] = cc->slot[i].send;
			nr[heir->nretired++] = cc->slot[i].recv;
			cc->slot[i].send = cc->slot[i].recv = NULL;
		}
		ibc_free(heir->retired);
		heir->retired = nr;
		ibc_free(cc->retired);
		cc->retired = NULL;
		cc->nretired = 0;
	}
	for (i = 0; i < cc->nslots; i++) {
		struct stage_slot *sl = &cc->slot[i];

		for (d = 0; d < 2; d++)
			if (sl->ev[d])
				ibc_cuda_event_destroy(sl->ev[d]);
		stage_buf_free(cc->emulated, sl->send);
		stage_buf_free(cc->emulated, sl->recv);
	}
	for (i = 0; i < cc->nretired; i++)
		stage_buf_free(cc->emulated, cc->retired[i]);
	ibc_free(cc->retired);
	for (d = 0; d < 2; d++) {
		if (cc->stream[d])
			ibc_cuda_stream_destroy(cc->stream[d]);
		ibc_free(cc->emu[d].q);
	}
	ibc_free(cc);
	return st;
}

void ibc_cuda_stage_free(struct ibc_cuda_comm *cc)
{
	stage_state_free(cc, NULL);
}

static ibc_status_t stage_state_create(int emulated, int dev, int nslots, size_t slot_bytes,
				       struct ibc_cuda_comm **cc_p)
{
	struct ibc_cuda_comm *cc = ibc_calloc(1, sizeof(*cc), "cuda staging state");
	ibc_status_t st = IBC_OK;
	int i;
	int d;

	if (!cc)
		return IBC_ERR_NO_MEMORY;
	cc->emulated = emulated;
	cc->dev = dev;
	cc->slot_bytes = slot_bytes;
	for (i = 0; i < nslots; i++) {
		struct stage_slot *sl = &cc->slot[i];

		cc->nslots = i + 1;
		if (emulated) {
			sl->send = ibc_aligned_alloc(4096, slot_bytes, "emulated staging");
			sl->recv = ibc_aligned_alloc(4096, slot_bytes, "emulated staging");
			if (!sl->send || !sl->recv) {
				st = IBC_ERR_NO_MEMORY;
				goto err_free;
			}
			continue;
		}
		IBC_CHECK_GOTO(ibc_cuda_host_alloc(slot_bytes, (void **)&sl->send), st, err_free);
		IBC_CHECK_GOTO(ibc_cuda_host_alloc(slot_bytes, (void **)&sl->recv), st, err_free);
		for (d = 0; d < 2; d++)
			IBC_CHECK_GOTO(ibc_cuda_event_create(&sl->ev[d]), st, err_free);
	}
	if (!emulated)
		for (d = 0; d < 2; d++)
			IBC_CHECK_GOTO(ibc_cuda_stream_create(&cc->stream[d]), st, err_free);
	IBC_LOG_DEBUG(CUDA, "staging state: %d slots of 2 x %zu bytes of %s host memory%s", nslots,
		      slot_bytes, emulated ? "plain (emulated device)" : "pinned",
		      emulated ? "" : ", 2 CUDA streams");
	*cc_p = cc;
	return IBC_OK;
err_free:
	/* nothing of this state was used yet: freeing its buffers cannot wait for anything */
	stage_state_free(cc, NULL);
	return st;
}

/* the communicator's staging state, (re)created to fit this operation */
static ibc_status_t stage_state_get(struct ibc_cuda_comm **state_p, int emulated, int dev,
				    size_t slot_bytes, struct ibc_cuda_comm **cc_p)
{
	struct ibc_cuda_comm *cc = *state_p;
	struct ibc_cuda_comm *ncc;
	int nslots = (int)ibc_param_cuda_stage_nslots();

	if (cc && cc->emulated == emulated && (emulated || cc->dev == dev) &&
	    cc->nslots == nslots && cc->slot_bytes >= slot_bytes) {
		*cc_p = cc;
		return IBC_OK;
	}
	/* at least double, so that growing sizes replace the state O(log) times */
	slot_bytes = IBC_MAX(slot_bytes, cc && cc->emulated == emulated ? 2 * cc->slot_bytes : 0);
	slot_bytes = IBC_ALIGN_UP(IBC_MAX(slot_bytes, (size_t)65536), 65536);
	IBC_CHECK(stage_state_create(emulated, dev, nslots, slot_bytes, &ncc));
	if (cc) {
		ibc_status_t st = stage_state_free(cc, ncc);

		if (st != IBC_OK) {
			stage_state_free(ncc, NULL);
			return st;
		}
	}
	*state_p = ncc;
	*cc_p = ncc;
	return IBC_OK;
}

/* ------------------------------------------------------------------------ */
/* copies                                                                   */
/* ------------------------------------------------------------------------ */

static void copy_rows(char *dst, size_t dpitch, const char *src, size_t spitch, size_t width,
		      size_t height)
{
	size_t i;

	for (i = 0; i < height; i++)
		memcpy(dst + i * dpitch, src + i * spitch, width);
}

static ibc_status_t emu_push(struct emu_stream *es, char *dst, size_t dpitch, const char *src,
			     size_t spitch, size_t width, size_t height)
{
	if (ibc_fault_hit(IBC_FAULT_CUDA, "emulated staging copy")) {
		IBC_LOG_WARN(CUDA, "emulated cudaMemcpy2DAsync failed (injected fault)");
		return IBC_ERR_CUDA;
	}
	if (es->n == es->cap) {
		size_t ncap = es->cap ? 2 * es->cap : 16;
		struct emu_copy *nq = ibc_malloc(ncap * sizeof(*nq), "emulated copy queue");

		if (!nq)
			return IBC_ERR_NO_MEMORY;
		if (es->n)
			memcpy(nq, es->q, es->n * sizeof(*nq));
		ibc_free(es->q);
		es->q = nq;
		es->cap = ncap;
	}
	es->q[es->n++] = (struct emu_copy){ dst, dpitch, src, spitch, width, height };
	return IBC_OK;
}

/* run the emulated copies queued before @mark */
static void emu_run(struct emu_stream *es, size_t mark)
{
	for (; es->done < mark; es->done++) {
		struct emu_copy *c = &es->q[es->done];

		copy_rows(c->dst, c->dpitch, c->src, c->spitch, c->width, c->height);
	}
}

/*
 * Copy @height rows of @width bytes in direction @dir for slot @s. A user
 * buffer in host memory (@user_dev 0) is copied at once with memcpy; device
 * memory goes through the direction's stream (or the emulated queue).
 */
static ibc_status_t stage_copy(struct ibc_cuda_comm *cc, int s, int dir, int user_dev, char *dst,
			       size_t dpitch, const char *src, size_t spitch, size_t width,
			       size_t height)
{
	if (!width || !height)
		return IBC_OK;
	if (!user_dev) {
		copy_rows(dst, dpitch, src, spitch, width, height);
		return IBC_OK;
	}
	cc->slot[s].pending[dir] = 1;
	if (cc->emulated) {
		IBC_CHECK(emu_push(&cc->emu[dir], dst, dpitch, src, spitch, width, height));
		cc->slot[s].mark[dir] = cc->emu[dir].n;
		return IBC_OK;
	}
	return ibc_cuda_memcpy2d_async(dst, dpitch, src, spitch, width, height, cc->stream[dir]);
}

/* after the copies of slot @s in direction @dir were issued: mark their end */
static ibc_status_t stage_record(struct ibc_cuda_comm *cc, int s, int dir)
{
	if (!cc->slot[s].pending[dir] || cc->emulated)
		return IBC_OK;
	return ibc_cuda_event_record(cc->slot[s].ev[dir], cc->stream[dir]);
}

/* wait until the copies of slot @s in direction @dir are complete (bounded) */
static ibc_status_t stage_wait(struct ibc_net *net, struct ibc_cuda_comm *cc, int s, int dir)
{
	struct stage_slot *sl = &cc->slot[s];
	uint64_t start_ns;
	unsigned spins = 0;

	if (!sl->pending[dir])
		return IBC_OK;
	if (cc->emulated) {
		emu_run(&cc->emu[dir], sl->mark[dir]);
		sl->pending[dir] = 0;
		return IBC_OK;
	}
	start_ns = ibc_time_ns();
	for (;;) {
		ibc_status_t st = ibc_cuda_event_query(sl->ev[dir]);

		if (st == IBC_OK) {
			sl->pending[dir] = 0;
			return IBC_OK;
		}
		if (st != IBC_INPROGRESS)
			return st;
		st = ibc_net_status(net);
		if (st != IBC_OK)
			return st;
		if ((ibc_time_ns() - start_ns) / 1000000u > (uint64_t)net->timeout_ms)
			return ibc_net_fail(net, IBC_ERR_TIMEOUT, -1,
					     "a staging copy %s the GPU did not complete within %lld ms",
					     dir == DIR_IN ? "from" : "to",
					     (long long)net->timeout_ms);
		if (++spins < 1000)
			ibc_cpu_relax();
		else
			sched_yield();
	}
}

/* ------------------------------------------------------------------------ */
/* the pipeline                                                             */
/* ------------------------------------------------------------------------ */

/* segmentation of one operation on this rank */
struct stage_plan {
	size_t esz;             /* element bytes */
	size_t total;           /* B: elements per block (the count argument) */
	size_t seg;             /* S: elements per block and segment */
	size_t nseg;
	int send_rows;          /* blocks copied in: 0 (no input), 1, or nranks */
	int recv_rows;          /* blocks copied out: 0 (no output), 1, or nranks */
	int send_dev;           /* sendbuf is device memory (async copies) */
	int recv_dev;
};

static void stage_plan_make(const struct ibc_net *net, const struct ibc_op *op,
			    struct stage_plan *p)
{
	int n = net->nranks;
	int blocks = 1;
	int uses_send;
	int uses_recv;
	size_t stage_bytes = (size_t)ibc_param_cuda_stage_bytes();

	memset(p, 0, sizeof(*p));
	ibc_dtype_size(op->dtype, &p->esz);
	op_roles(op, net->rank, &uses_send, &uses_recv);
	p->send_rows = uses_send;
	p->recv_rows = uses_recv;
	switch (op->coll) {
	case IBC_COLL_ALLGATHER:
		p->recv_rows *= n;
		blocks = n;
		break;
	case IBC_COLL_REDUCE_SCATTER:
		p->send_rows *= n;
		blocks = n;
		break;
	case IBC_COLL_ALLTOALL:
		p->send_rows *= n;
		p->recv_rows *= n;
		blocks = n;
		break;
	default:
		break;
	}
	p->send_dev = !!(op->cuda_flags & IBC_CUDA_REQ_SEND_DEV);
	p->recv_dev = !!(op->cuda_flags & IBC_CUDA_REQ_RECV_DEV);
	p->total = op->count;
	/* the same on every rank: depends on the operation, never on the rank's role */
	p->seg = IBC_MAX(stage_bytes / (p->esz * (size_t)blocks), (size_t)1);
	p->nseg = IBC_DIV_UP(p->total, p->seg);
}

struct stage_run {
	struct ibc_net *net;
	struct ibc_op *op;
	ibc_cuda_host_run_fn run;       /* the executor's host run of one operation */
	void *run_arg;
	struct ibc_cuda_comm *cc;
	struct stage_plan p;
};

static size_t seg_len(const struct stage_plan *p, size_t k)
{
	return IBC_MIN(p->seg, p->total - k * p->seg);
}

/* copy segment @k of the user's send buffer into its slot */
static ibc_status_t stage_in(struct stage_run *sr, size_t k)
{
	struct ibc_cuda_comm *cc = sr->cc;
	const struct stage_plan *p = &sr->p;
	int s = (int)(k % (size_t)cc->nslots);
	size_t len = seg_len(p, k);
	const char *src = (const char *)sr->op->sendbuf + k * p->seg * p->esz;

	/* the slot's previous segment must have left for the device */
	IBC_CHECK(stage_wait(sr->net, cc, s, DIR_OUT));
	if (!p->send_rows)
		return IBC_OK;
	IBC_CHECK(stage_copy(cc, s, DIR_IN, p->send_dev, cc->slot[s].send, len * p->esz, src,
			     p->total * p->esz, len * p->esz, (size_t)p->send_rows));
	return stage_record(cc, s, DIR_IN);
}

/* run segment @k on the host, then copy its result back */
static ibc_status_t stage_exec(struct stage_run *sr, size_t k)
{
	struct ibc_cuda_comm *cc = sr->cc;
	const struct stage_plan *p = &sr->p;
	int s = (int)(k % (size_t)cc->nslots);
	size_t len = seg_len(p, k);
	char *dst = (char *)sr->op->recvbuf + k * p->seg * p->esz;
	struct ibc_op sub;

	IBC_CHECK(stage_wait(sr->net, cc, s, DIR_IN));
	sub = *sr->op;
	sub.cuda_flags = 0;
	sub.staged = 1;
	sub.count = len;
	sub.sendbuf = p->send_rows ? cc->slot[s].send : NULL;
	sub.recvbuf = p->recv_rows ? cc->slot[s].recv : NULL;
	IBC_CHECK(sr->run(sr->run_arg, &sub));
	__atomic_add_fetch(&stage_nsegments, 1, __ATOMIC_RELAXED);
	if (!p->recv_rows)
		return IBC_OK;
	IBC_CHECK(stage_copy(cc, s, DIR_OUT, p->recv_dev, dst, p->total * p->esz, cc->slot[s].recv,
			     len * p->esz, len * p->esz, (size_t)p->recv_rows));
	return stage_record(cc, s, DIR_OUT);
}

static ibc_status_t stage_pipeline(struct stage_run *sr)
{
	const struct stage_plan *p = &sr->p;
	ibc_status_t st = IBC_OK;
	size_t k;
	int s;

	IBC_CHECK_GOTO(stage_in(sr, 0), st, out);
	for (k = 0; k < p->nseg; k++) {
		if (k + 1 < p->nseg)
			IBC_CHECK_GOTO(stage_in(sr, k + 1), st, out);
		IBC_CHECK_GOTO(stage_exec(sr, k), st, out);
	}
out:
	/* drain every slot, also after an error (no copy may outlive the op) */
	for (s = 0; s < sr->cc->nslots; s++) {
		IBC_CHECK_IGNORE(stage_wait(sr->net, sr->cc, s, DIR_IN), st);
		IBC_CHECK_IGNORE(stage_wait(sr->net, sr->cc, s, DIR_OUT), st);
	}
	/* every emulated copy ran (or the operation failed): restart the queues */
	sr->cc->emu[DIR_IN].n = sr->cc->emu[DIR_IN].done = 0;
	sr->cc->emu[DIR_OUT].n = sr->cc->emu[DIR_OUT].done = 0;
	if (sr->cc->emulated)
		for (s = 0; s < sr->cc->nslots; s++)
			sr->cc->slot[s].pending[DIR_IN] = sr->cc->slot[s].pending[DIR_OUT] = 0;
	return st;
}

ibc_status_t ibc_cuda_stage_run(struct ibc_cuda_comm **state_p, struct ibc_net *net, struct ibc_op *op,
				 void *gate, ibc_cuda_host_run_fn run, void *arg)
{
	struct stage_run sr;
	struct ibc_op plain;
	int emulated = !!(op->cuda_flags & IBC_CUDA_REQ_EMULATED);
	int saved_dev = -1;
	ibc_status_t st;

	if (op->cuda_flags & IBC_CUDA_REQ_GATED)
		IBC_CHECK(ibc_cuda_gate_wait(net, op, gate));
	if (!(op->cuda_flags & (IBC_CUDA_REQ_SEND_DEV | IBC_CUDA_REQ_RECV_DEV)) ||
	    op->count == 0) {
		/* host buffers (a stream-ordered call) or nothing to move */
		plain = *op;
		plain.cuda_flags = 0;
		return run(arg, &plain);
	}
	if (!emulated && !IBC_CUDA_BUILT) {
		IBC_LOG_ERROR(CUDA, "device buffer in a build without CUDA");
		return IBC_ERR_UNSUPPORTED;
	}
	memset(&sr, 0, sizeof(sr));
	sr.net = net;
	sr.op = op;
	sr.run = run;
	sr.run_arg = arg;
	stage_plan_make(net, op, &sr.p);
	if (!emulated) {
		/* work on the buffers' device, and give the caller's thread its device back */
		IBC_CHECK(ibc_cuda_get_device(&saved_dev));
		if (op->cuda_dev < 0)
			op->cuda_dev = saved_dev;      /* the driver gave no ordinal */
		if (saved_dev != op->cuda_dev)
			IBC_CHECK(ibc_cuda_set_device(op->cuda_dev));
	}
	st = stage_state_get(state_p, emulated, op->cuda_dev,
			     sr.p.seg * sr.p.esz * (size_t)IBC_MAX(sr.p.send_rows,
								   IBC_MAX(sr.p.recv_rows, 1)),
			     &sr.cc);
	if (st == IBC_OK) {
		IBC_LOG_TRACE(CUDA, "%s #%u staged: %zu segments of %zu elements per block",
			      ibc_coll_name(op->coll), op->seq, sr.p.nseg, sr.p.seg);
		__atomic_add_fetch(&stage_nops, 1, __ATOMIC_RELAXED);
		st = stage_pipeline(&sr);
	}
	/* a staging failure (the algorithm's own failures have poisoned comm already) */
	if (st != IBC_OK && ibc_net_status(net) == IBC_OK)
		st = ibc_net_fail(net, st, -1, "staging device buffers through %s host memory: %s",
				   emulated ? "emulated" : "pinned", ibc_last_error());
	if (!emulated && saved_dev != op->cuda_dev && saved_dev >= 0)
		IBC_CHECK_IGNORE(ibc_cuda_set_device(saved_dev), st);
	return st;
}

ibc_status_t ibc_cuda_gate_wait(struct ibc_net *net, const struct ibc_op *op, void *gate)
{
	struct ibc_cuda_gate *g = gate;
	uint64_t start = ibc_time_ms();
	ibc_status_t st = IBC_OK;

	pthread_mutex_lock(&g->lock);
	while (!g->open) {
		st = ibc_net_status(net);
		if (st != IBC_OK)
			break;
		if (ibc_time_ms() - start > (uint64_t)net->timeout_ms) {
			pthread_mutex_unlock(&g->lock);
			return ibc_net_fail(net, IBC_ERR_TIMEOUT, -1,
					     "stream-ordered %s: its CUDA stream did not reach the operation within %lld ms (is the stream blocked, or was it never synchronized before ibc_comm_destroy?)",
					    ibc_coll_name(op->coll), (long long)net->timeout_ms);
		}
		ibc_cond_wait_ms(&g->cond, &g->lock, 100);
	}
	pthread_mutex_unlock(&g->lock);
	return st;
}
