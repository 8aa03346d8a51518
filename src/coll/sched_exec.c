/* SPDX-License-Identifier: MIT */
/*
 * sched_exec.c - runs the programs of src/coll/tree/ (sched.h) over the net
 * layer, and the small helpers the program generators share.
 *
 * The executor walks a rank's program in order. Sends are handed to the
 * transport in program order per peer, at most SX_WIN_OPS (and
 * SX_WIN_BYTES) in flight per peer, and never waited for until their data
 * is about to be overwritten. Receives are posted ahead (up to
 * SX_LOOKAHEAD ops), in program order: a RECV_REDUCE lands in one of SX_NSLOTS chunk buffers of
 * the communicator's scratch area, a RECV lands in W directly when no
 * earlier op still pending touches its range. So chunk c+1 streams in
 * while chunk c is reduced and forwarded, which is what pipelines the
 * trees. Folds happen strictly in program order, so the result never
 * depends on arrival order (docs/algorithms.md, determinism).
 *
 * ibc_sched_run() wraps the executor for one operation: the working buffer
 * W (the user's recvbuf, or scratch for fp32 accumulation and for inner
 * ranks of a reduce), the IBC_AVG division, and the fp32 -> 16-bit
 * rounding with IBC_ACCUM_FP32=1.
 */
#include "config.h"

#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/util.h"
#include "coll/algo.h"
#include "coll/reduce.h"
#include "coll/sched.h"

#define SX_LOOKAHEAD 64         /* ops ahead of the current one whose receives may be posted */
#define SX_NSLOTS 16            /* chunk buffers for RECV_REDUCE */

/**
 * ibc_sched_chunk_for() - The chunk used for a range of @len elements.
 * @len:   [in] elements in the range.
 * @chunk: [in] requested chunk, elements (0 is taken as 1).
 *
 * Return: @chunk, raised so that the range has at most
 * IBC_SCHED_MAX_CHUNKS pieces and capped at @len (never below 1).
 */
uint64_t ibc_sched_chunk_for(uint64_t len, uint64_t chunk)
{
	uint64_t c = chunk ? chunk : 1;
	uint64_t min = IBC_DIV_UP(len, (uint64_t)IBC_SCHED_MAX_CHUNKS);

	if (c < min)
		c = min;
	if (len && c > len)
		c = len;
	return c ? c : 1;
}

/**
 * ibc_sched_emit_chunked() - Append the ops of one range cut into chunks.
 * @o:     [in,out] output cursor.
 * @kind:  [in] enum ibc_sched_kind.
 * @flags: [in] IBC_SCHED_F_*.
 * @peer:  [in] the other rank.
 * @phase: [in] descriptor phase; @s: [in] descriptor step within it.
 * @off:   [in] first element; @len: [in] elements (0: nothing emitted).
 * @chunk: [in] requested chunk, elements (see ibc_sched_chunk_for()).
 *
 * Chunk i of the range gets step IBC_COLL_STEP(@phase, @s, i).
 */
void ibc_sched_emit_chunked(struct ibc_sched_out *o, int kind, int flags, int peer, int phase,
			    int s, uint64_t off, uint64_t len, uint64_t chunk)
{
	uint64_t ch = ibc_sched_chunk_for(len, chunk);
	uint64_t c;

	for (c = 0; c * ch < len; c++)
		ibc_sched_emit(o, kind, flags, peer, IBC_COLL_STEP(phase, s, c), off + c * ch,
			       IBC_MIN(ch, len - c * ch));
}

/* ------------------------------------------------------------------------ */
/* executor                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Sends are deferred: a SEND op is issued to the transport only while its
 * peer has fewer than SX_WIN_OPS sends and SX_WIN_BYTES bytes in flight,
 * in program order per peer. Without the window a step of recursive
 * doubling would hand the transport the whole vector at once; over TCP the
 * kernel then holds megabytes the receiver has not asked for yet, prunes
 * receive queues under that load and the connection stalls in
 * retransmission back-off. The
 * ring bounds its sends the same way (RING_WINDOW). Every wait issues
 * deferred sends as windows free, so no peer waits on a send held back
 * behind sends to another peer.
 */
#define SX_WIN_OPS 8
#define SX_WIN_BYTES (4u << 20)
#define SX_MAX_PEERS 64

struct sx_peer {
	int rank;
	size_t next;                    /* ops below it hold no unissued send to this peer */
	size_t inflight[SX_WIN_OPS];    /* op indices of issued, not yet complete sends */
	int ninflight;
	size_t inflight_bytes;
};

struct sx {
	struct ibc_coll *coll;
	const struct ibc_op *op;
	const struct ibc_sched_op *ops;
	size_t nops;
	struct ibc_treq *tr;    /* [nops]: one request per op (zeroed: not done) */
	uint8_t *issued;        /* [nops]: 1 once a send was handed to the transport */
	char *w;                /* working buffer, wire elements */
	size_t wsz;             /* wire element bytes */
	ibc_dtype_t wdt;        /* wire dtype (float32 when accumulating) */
	int accum;
	char *tmp;              /* SX_NSLOTS buffers of slot_bytes */
	size_t slot_bytes;
	size_t rr_posted;       /* RECV_REDUCE receives posted (slot ring head) */
	size_t rr_done;         /* RECV_REDUCE ops folded (slot ring tail) */
	size_t pc;              /* next op to execute */
	size_t post;            /* next op whose receive may be posted (>= pc) */
	size_t send_lo;         /* every send below it has completed */
	struct sx_peer peer[SX_MAX_PEERS];
	int npeers;
};

static int sx_overlap(const struct ibc_sched_op *op, uint64_t off, uint64_t cnt)
{
	return op->off < off + cnt && off < op->off + op->cnt;
}

/* drop completed sends from @p's window; a failed send is returned */
static ibc_status_t sx_reap(struct sx *x, struct sx_peer *p)
{
	int i = 0;

	while (i < p->ninflight) {
		struct ibc_treq *t = &x->tr[p->inflight[i]];

		if (!ibc_treq_is_done(t)) {
			i++;
			continue;
		}
		if (t->status != IBC_OK)
			return t->status;
		p->inflight_bytes -= t->nbytes;
		p->inflight[i] = p->inflight[--p->ninflight];
	}
	return IBC_OK;
}

/* issue the deferred sends (ops below pc) that the peers' windows admit */
static ibc_status_t sx_issue(struct sx *x)
{
	int k;

	for (k = 0; k < x->npeers; k++) {
		struct sx_peer *p = &x->peer[k];

		IBC_CHECK(sx_reap(x, p));
		while (p->next < x->pc) {
			const struct ibc_sched_op *op = &x->ops[p->next];
			size_t nbytes = op->cnt * x->wsz;
			struct ibc_msg_desc d;

			if (op->kind != IBC_SCHED_SEND || op->peer != p->rank) {
				p->next++;
				continue;
			}
			if (p->ninflight == SX_WIN_OPS ||
			    (p->ninflight && p->inflight_bytes + nbytes > SX_WIN_BYTES)) {
				/* sends may complete inside isend (shm LL): look again */
				int before = p->ninflight;

				IBC_CHECK(sx_reap(x, p));
				if (p->ninflight == before)
					break;
				continue;
			}
			ibc_coll_desc(x->op, op->step, x->accum, &d);
			IBC_CHECK(ibc_net_isend(x->coll->net, op->peer, x->w + op->off * x->wsz, nbytes, &d,
						&x->tr[p->next]));
			x->issued[p->next] = 1;
			p->inflight[p->ninflight++] = p->next;
			p->inflight_bytes += nbytes;
			p->next++;
		}
	}
	return IBC_OK;
}

/*
 * Wait until @target is done (NULL: until any send in flight completes),
 * issuing deferred sends whenever a window frees up.
 */
static ibc_status_t sx_wait(struct sx *x, struct ibc_treq *target)
{
	struct ibc_treq *w[1 + SX_MAX_PEERS * SX_WIN_OPS];

	for (;;) {
		int n = 0;
		int k;
		int i;

		IBC_CHECK(sx_issue(x));
		if (target && ibc_treq_is_done(target))
			return target->status;
		if (target)
			w[n++] = target;
		for (k = 0; k < x->npeers; k++)
			for (i = 0; i < x->peer[k].ninflight; i++)
				if (!ibc_treq_is_done(&x->tr[x->peer[k].inflight[i]]))
					w[n++] = &x->tr[x->peer[k].inflight[i]];
		if (!n)
			return IBC_OK;
		IBC_CHECK(ibc_net_waitany(x->coll->net, w, n));
		if (!target)
			return sx_issue(x);
	}
}

/* move send_lo past completed sends and non-sends */
static void sx_advance(struct sx *x)
{
	while (x->send_lo < x->pc) {
		const struct ibc_sched_op *op = &x->ops[x->send_lo];

		if (op->kind == IBC_SCHED_SEND && !ibc_treq_is_done(&x->tr[x->send_lo]))
			break;
		x->send_lo++;
	}
}

/* wait until no send below pc still reads W[off, off+cnt) (issuing deferred ones) */
static ibc_status_t sx_wait_sends(struct sx *x, uint64_t off, uint64_t cnt)
{
	size_t i;

	sx_advance(x);
	for (i = x->send_lo; i < x->pc; i++) {
		const struct ibc_sched_op *op = &x->ops[i];

		if (op->kind != IBC_SCHED_SEND || !sx_overlap(op, off, cnt) ||
		    ibc_treq_is_done(&x->tr[i]))
			continue;
		while (!x->issued[i])
			IBC_CHECK(sx_wait(x, NULL));
		IBC_CHECK(sx_wait(x, &x->tr[i]));
	}
	return IBC_OK;
}

/* may the RECV at @i be posted now, before the ops in [pc, i) ran? */
static int sx_recv_safe(struct sx *x, size_t i)
{
	const struct ibc_sched_op *op = &x->ops[i];
	size_t j;

	for (j = x->pc; j < i; j++)
		if (sx_overlap(&x->ops[j], op->off, op->cnt))
			return 0;
	/* sends below pc not complete, issued or not */
	for (j = x->send_lo; j < x->pc; j++)
		if (x->ops[j].kind == IBC_SCHED_SEND && !ibc_treq_is_done(&x->tr[j]) &&
		    sx_overlap(&x->ops[j], op->off, op->cnt))
			return 0;
	return 1;
}

static ibc_status_t sx_post_recv(struct sx *x, size_t i)
{
	const struct ibc_sched_op *op = &x->ops[i];
	struct ibc_msg_desc d;
	char *dst;

	if (op->kind == IBC_SCHED_RECV_REDUCE) {
		dst = x->tmp + (x->rr_posted % SX_NSLOTS) * x->slot_bytes;
		x->rr_posted++;
	} else {
		dst = x->w + op->off * x->wsz;
	}
	ibc_coll_desc(x->op, op->step, x->accum, &d);
	return ibc_net_irecv(x->coll->net, op->peer, dst, op->cnt * x->wsz, &d, &x->tr[i]);
}

/* post the receives of the next ops, in program order, while it is safe */
static ibc_status_t sx_post_ahead(struct sx *x)
{
	if (x->post < x->pc)
		x->post = x->pc;
	while (x->post < x->nops && x->post < x->pc + SX_LOOKAHEAD) {
		const struct ibc_sched_op *op = &x->ops[x->post];

		if (op->kind == IBC_SCHED_RECV_REDUCE) {
			if (x->rr_posted - x->rr_done >= SX_NSLOTS)
				break;
		} else if (op->kind == IBC_SCHED_RECV) {
			if (x->post > x->pc && !sx_recv_safe(x, x->post))
				break;
		} else {
			/* sends are issued through the windows; the receives behind them may go */
			x->post++;
			continue;
		}
		if (x->post == x->pc && op->kind == IBC_SCHED_RECV)
			IBC_CHECK(sx_wait_sends(x, op->off, op->cnt));
		IBC_CHECK(sx_post_recv(x, x->post));
		x->post++;
	}
	return IBC_OK;
}

static void sx_fold(struct sx *x, const struct ibc_sched_op *op)
{
	char *dst = x->w + op->off * x->wsz;
	const char *in = x->tmp + (x->rr_done % SX_NSLOTS) * x->slot_bytes;

	if (op->flags & IBC_SCHED_F_IN_LEFT)
		ibc_reduce_local3(dst, in, dst, op->cnt, x->wdt, x->op->redop);
	else
		ibc_reduce_local(dst, in, op->cnt, x->wdt, x->op->redop);
	x->rr_done++;
}

static ibc_status_t sx_run(struct sx *x)
{
	int k;

	while (x->pc < x->nops) {
		const struct ibc_sched_op *op = &x->ops[x->pc];

		IBC_CHECK(sx_post_ahead(x));
		if (op->kind == IBC_SCHED_SEND) {
			/* deferred: sx_issue() hands it over when its peer's window admits it */
			x->pc++;
			IBC_CHECK(sx_issue(x));
			continue;
		}
		/* sx_post_ahead() always posts the receive of op pc */
		IBC_CHECK(sx_wait(x, &x->tr[x->pc]));
		if (op->kind == IBC_SCHED_RECV_REDUCE) {
			IBC_CHECK(sx_wait_sends(x, op->off, op->cnt));
			sx_fold(x, op);
		}
		x->pc++;
	}
	/* the remaining sends */
	for (;;) {
		int busy = 0;

		IBC_CHECK(sx_issue(x));
		for (k = 0; k < x->npeers; k++)
			busy |= x->peer[k].ninflight > 0 || x->peer[k].next < x->nops;
		if (!busy)
			return IBC_OK;
		IBC_CHECK(sx_wait(x, NULL));
	}
}

/* the distinct peers of the program (connected, each with a send window) */
static ibc_status_t sx_peers(struct sx *x)
{
	int ranks[SX_MAX_PEERS];
	size_t i;
	int j;

	x->npeers = 0;
	for (i = 0; i < x->nops; i++) {
		for (j = 0; j < x->npeers; j++)
			if (x->peer[j].rank == x->ops[i].peer)
				break;
		if (j < x->npeers)
			continue;
		if (x->npeers == SX_MAX_PEERS) {
			IBC_LOG_ERROR(TREE, "a program talks to more than %d peers", SX_MAX_PEERS);
			return IBC_ERR_INTERNAL;
		}
		memset(&x->peer[x->npeers], 0, sizeof(x->peer[0]));
		x->peer[x->npeers].rank = x->ops[i].peer;
		ranks[x->npeers] = x->ops[i].peer;
		x->npeers++;
	}
	return x->npeers ? ibc_net_connect(x->coll->net, ranks, x->npeers) : IBC_OK;
}

static void copy_if_needed(void *dst, const void *src, size_t nbytes)
{
	if (dst != src && nbytes)
		memmove(dst, src, nbytes);
}

/**
 * ibc_sched_run() - Run one all-reduce, broadcast or reduce with the
 * program of @gen on this rank.
 * @coll:        [in] communicator (connections are made as needed).
 * @op:         [in] the operation (count in ELEMENTS, dtype, op, root,
 *               buffers); op->proto_flags is carried in every descriptor.
 * @gen:         [in] program generator (sched.h), e.g. ibc_dtree_allreduce_prog.
 * @chunk_bytes: [in] pipeline chunk, bytes of the wire type (>= 1).
 *
 * Memory:    the program, one request per op, SX_NSLOTS chunk buffers and,
 *            when needed, a working copy live in the communicator's scratch
 *            area (grown once, kept across operations).
 * Blocking:  returns when this rank's part is done (recvbuf final).
 * Threading: runs in the thread that executes the communicator's operations.
 * Return:    IBC_OK; IBC_ERR_NO_MEMORY; the net layer's errors
 *            (IBC_ERR_REMOTE, IBC_ERR_TIMEOUT, IBC_ERR_INVALID_USAGE for
 *            ranks that called different operations), already logged.
 */
ibc_status_t ibc_sched_run(struct ibc_coll *coll, struct ibc_op *op, ibc_sched_gen_fn gen,
			   size_t chunk_bytes)
{
	struct ibc_sched_args a;
	struct sx x;
	size_t esz;
	size_t nops;
	size_t slot_elems;
	size_t sz_ops;
	size_t sz_tr;
	size_t sz_tmp;
	size_t sz_w;
	size_t count = op->count;
	int kind = op->coll;
	int is_root = coll->net->rank == op->root;
	int has_recv = 0;
	char *base;
	void *p;
	size_t i;

	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	memset(&x, 0, sizeof(x));
	x.coll = coll;
	x.op = op;
	x.accum = kind != IBC_COLL_BROADCAST && ibc_param_accum_fp32() &&
		  (op->dtype == IBC_FLOAT16 || op->dtype == IBC_BFLOAT16);
	x.wdt = x.accum ? IBC_FLOAT32 : op->dtype;
	x.wsz = x.accum ? 4 : esz;
	a.n = coll->net->nranks;
	a.rank = coll->net->rank;
	a.count = count;
	a.chunk = IBC_MAX(chunk_bytes / x.wsz, 1);
	a.root = op->root;
	nops = gen(&a, NULL, 0);
	slot_elems = IBC_MIN(count, (size_t)ibc_sched_chunk_for(count, a.chunk));
	sz_ops = IBC_ALIGN_UP(nops * sizeof(struct ibc_sched_op), 64);
	sz_tr = IBC_ALIGN_UP(nops * (sizeof(struct ibc_treq) + 1), 64);
	x.slot_bytes = IBC_ALIGN_UP(slot_elems * x.wsz, 64);
	sz_tmp = kind == IBC_COLL_BROADCAST ? 0 : SX_NSLOTS * x.slot_bytes;
	sz_w = (x.accum || (kind == IBC_COLL_REDUCE && !is_root)) ? IBC_ALIGN_UP(count * x.wsz, 64)
								    : 0;
	IBC_CHECK(ibc_coll_scratch(coll, sz_ops + sz_tr + sz_tmp + sz_w, &p));
	base = p;
	x.ops = (const struct ibc_sched_op *)base;
	x.tr = (struct ibc_treq *)(base + sz_ops);
	x.tmp = base + sz_ops + sz_tr;
	x.issued = (uint8_t *)(x.tr + nops);
	memset(x.tr, 0, nops * (sizeof(struct ibc_treq) + 1));
	x.nops = gen(&a, (struct ibc_sched_op *)base, nops);
	for (i = 0; i < x.nops; i++)
		has_recv |= x.ops[i].kind != IBC_SCHED_SEND;

	/* the working buffer W */
	if (kind == IBC_COLL_BROADCAST) {
		x.w = op->recvbuf;
		if (is_root)
			copy_if_needed(op->recvbuf, op->sendbuf, count * esz);
	} else if (x.accum) {
		x.w = base + sz_ops + sz_tr + sz_tmp;
		ibc_cvt_to_f32((float *)x.w, op->sendbuf, count, op->dtype);
	} else if (kind == IBC_COLL_ALLREDUCE || is_root) {
		x.w = op->recvbuf;
		copy_if_needed(op->recvbuf, op->sendbuf, count * esz);
	} else if (has_recv) {
		x.w = base + sz_ops + sz_tr + sz_tmp;
		memcpy(x.w, op->sendbuf, count * esz);
	} else {
		x.w = (char *)op->sendbuf; /* a leaf only sends: W is never written */
	}

	IBC_CHECK(sx_peers(&x));
	IBC_CHECK(sx_run(&x));

	if (kind == IBC_COLL_ALLREDUCE || (kind == IBC_COLL_REDUCE && is_root)) {
		if (op->redop == IBC_AVG)
			ibc_reduce_avg_finalize(x.w, count, x.wdt, coll->net->nranks);
		if (x.accum)
			ibc_cvt_from_f32(op->recvbuf, (const float *)x.w, count, op->dtype);
	}
	return IBC_OK;
}
