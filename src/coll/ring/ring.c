/* SPDX-License-Identifier: MIT */
/*
 * ring.c - ring algorithms over the net layer: all-reduce (reduce-scatter
 * then all-gather), reduce-scatter, all-gather, and pipelined chains for
 * broadcast and reduce. Sources: Patarasuk & Yuan, "Bandwidth optimal
 * all-reduce algorithms for clusters of workstations", JPDC 2009; NCCL's
 * ring (docs/algorithms.md).
 *
 * Schedule of the all-reduce on n ranks, rank r, next = r+1, prev = r-1,
 * data cut into n blocks (block b: count/n elements, +1 for b < count%n):
 *
 *   reduce-scatter, step s = 0 .. n-2:
 *       send block (r - s) to next, receive block (r - s - 1) from prev and
 *       reduce it with this rank's contribution:  partial = incoming OP mine
 *   -> rank r holds block (r + 1) fully reduced; block b was reduced in the
 *      fixed order ((x_b OP x_b+1) OP x_b+2) ... OP x_b-1 on every run.
 *   (AVG: the owner divides its block by n here, once.)
 *   all-gather, step s = 0 .. n-2:
 *       send block (r + 1 - s) to next, receive block (r - s) from prev
 *   2(n-1) steps; each rank sends and receives 2(n-1)/n of the data.
 *
 * The reduce-scatter collective uses the same loop shifted by one block
 * (step s sends block r - s - 1) so that rank r ends owning block r.
 * Every step moves its block in chunks of IBC_RING_CHUNK_BYTES with a
 * window of RING_WINDOW receives and sends in flight, so a block streams
 * while earlier chunks are being reduced.
 *
 * IBC_ACCUM_FP32=1 with float16/bfloat16: partial sums travel as fp32 and
 * are rounded to the 16-bit type once, by the block's owner.
 */
#include "config.h"

#include "base/check.h"
#include "base/param.h"
#include "base/util.h"
#include "coll/algo.h"
#include "coll/reduce.h"

#define RING_WINDOW 4

enum { PHASE_RS = 1, PHASE_AG = 2, PHASE_BCAST = 3, PHASE_REDUCE = 4 };

struct ring {
	struct ibc_coll *coll;
	struct ibc_op *op;
	int n;
	int r;
	int next;
	int prev;
	size_t esz;             /* user element bytes */
	size_t wsz;             /* wire element bytes: 4 when accumulating in fp32 */
	int accum;
	size_t chunk;           /* elements per chunk (wire) */
	char *tmp;              /* RING_WINDOW chunks, wire size */
};

/* called for every received chunk: @data holds @cnt wire elements at element offset @off */
typedef void (*ring_chunk_fn)(struct ring *rg, void *arg, size_t off, size_t cnt, char *data);

static ibc_status_t ring_init(struct ring *rg, struct ibc_coll *coll, struct ibc_op *op,
			      int accum_ok)
{
	size_t chunk_bytes = (size_t)ibc_param_ring_chunk_bytes();

	memset(rg, 0, sizeof(*rg));
	rg->coll = coll;
	rg->op = op;
	rg->n = coll->net->nranks;
	rg->r = coll->net->rank;
	rg->next = (rg->r + 1) % rg->n;
	rg->prev = (rg->r + rg->n - 1) % rg->n;
	IBC_CHECK(ibc_dtype_size(op->dtype, &rg->esz));
	rg->accum = accum_ok && ibc_param_accum_fp32() &&
		    (op->dtype == IBC_FLOAT16 || op->dtype == IBC_BFLOAT16);
	rg->wsz = rg->accum ? 4 : rg->esz;
	rg->chunk = IBC_MAX(chunk_bytes / rg->wsz, 1);
	if (rg->n > 1) {
		int peers[2] = { rg->next, rg->prev };

		IBC_CHECK(ibc_net_connect(coll->net, peers, 2));
	}
	return IBC_OK;
}

/* scratch: the chunk window first, then @extra bytes returned in @extra_p */
static ibc_status_t ring_scratch(struct ring *rg, size_t extra, char **extra_p)
{
	size_t win = IBC_ALIGN_UP(RING_WINDOW * rg->chunk * rg->wsz, 64);
	void *p;

	IBC_CHECK(ibc_coll_scratch(rg->coll, win + extra, &p));
	rg->tmp = p;
	if (extra_p)
		*extra_p = (char *)p + win;
	return IBC_OK;
}

/*
 * One ring step: send @scount wire elements from @sbuf to next and receive
 * @rcount from prev, both cut into chunks. Received chunks land in @rdirect
 * (when not NULL) or in the window buffer, and @fn is called on each in
 * order. Returns when every send and receive of the step is done.
 */
static ibc_status_t ring_step(struct ring *rg, int phase, int s, const char *sbuf, size_t scount,
			      char *rdirect, size_t rcount, ring_chunk_fn fn, void *arg)
{
	struct ibc_coll *coll = rg->coll;
	struct ibc_treq sreq[RING_WINDOW];
	struct ibc_treq rreq[RING_WINDOW];
	size_t nsc = IBC_DIV_UP(scount, rg->chunk);
	size_t nrc = IBC_DIV_UP(rcount, rg->chunk);
	size_t si = 0;
	size_t ri = 0;
	size_t i;

	for (i = 0; i < IBC_MIN((size_t)RING_WINDOW, nrc); i++) {
		struct ibc_msg_desc d;
		size_t cnt = IBC_MIN(rg->chunk, rcount - i * rg->chunk);
		char *dst = rdirect ? rdirect + i * rg->chunk * rg->wsz
				    : rg->tmp + i * rg->chunk * rg->wsz;

		ibc_coll_desc(rg->op, IBC_COLL_STEP(phase, s, i), rg->accum, &d);
		IBC_CHECK(ibc_net_irecv(coll->net, rg->prev, dst, cnt * rg->wsz, &d, &rreq[i]));
	}
	while (si < nsc || ri < nrc) {
		struct ibc_treq *wait[2];
		int nwait = 0;
		int progressed = 0;

		IBC_CHECK(ibc_net_progress(coll->net));
		while (si < nsc) {
			struct ibc_treq *sr = &sreq[si % RING_WINDOW];
			struct ibc_msg_desc d;
			size_t cnt = IBC_MIN(rg->chunk, scount - si * rg->chunk);

			if (si >= RING_WINDOW) {
				if (!ibc_treq_is_done(sr))
					break;
				if (sr->status != IBC_OK)
					return sr->status;
			}
			ibc_coll_desc(rg->op, IBC_COLL_STEP(phase, s, si), rg->accum, &d);
			IBC_CHECK(ibc_net_isend(coll->net, rg->next, sbuf + si * rg->chunk * rg->wsz,
						cnt * rg->wsz, &d, sr));
			si++;
			progressed = 1;
		}
		while (ri < nrc && ibc_treq_is_done(&rreq[ri % RING_WINDOW])) {
			struct ibc_treq *rr = &rreq[ri % RING_WINDOW];
			size_t off = ri * rg->chunk;
			size_t cnt = IBC_MIN(rg->chunk, rcount - off);
			char *data = rdirect ? rdirect + off * rg->wsz
					     : rg->tmp + (ri % RING_WINDOW) * rg->chunk * rg->wsz;

			if (rr->status != IBC_OK)
				return rr->status;
			if (fn)
				fn(rg, arg, off, cnt, data);
			if (ri + RING_WINDOW < nrc) {
				size_t noff = (ri + RING_WINDOW) * rg->chunk;
				size_t ncnt = IBC_MIN(rg->chunk, rcount - noff);
				char *ndst = rdirect ? rdirect + noff * rg->wsz : data;
				struct ibc_msg_desc d;

				ibc_coll_desc(rg->op, IBC_COLL_STEP(phase, s, ri + RING_WINDOW),
					      rg->accum, &d);
				IBC_CHECK(ibc_net_irecv(coll->net, rg->prev, ndst, ncnt * rg->wsz, &d, rr));
			}
			ri++;
			progressed = 1;
		}
		if (progressed)
			continue;
		if (si < nsc)
			wait[nwait++] = &sreq[si % RING_WINDOW];
		if (ri < nrc)
			wait[nwait++] = &rreq[ri % RING_WINDOW];
		IBC_CHECK(ibc_net_waitany(coll->net, wait, nwait));
	}
	{
		struct ibc_treq *wait[RING_WINDOW];
		int nwait = 0;

		for (i = nsc > RING_WINDOW ? nsc - RING_WINDOW : 0; i < nsc; i++)
			wait[nwait++] = &sreq[i % RING_WINDOW];
		IBC_CHECK(ibc_net_waitall(coll->net, wait, nwait));
	}
	return IBC_OK;
}

/* ------------------------------------------------------------------------ */
/* reduce-scatter loop shared by all-reduce and reduce-scatter              */
/* ------------------------------------------------------------------------ */

struct rs_args {
	size_t total;           /* elements partitioned into n blocks */
	int shift;              /* 0: all-reduce, -1: reduce-scatter */
	const char *src;        /* user contributions, block b at offset(b) */
	char *part[2];          /* wire partials by step parity, or NULL: in recvbuf */
	char *ubuf;             /* recvbuf of the all-reduce (partials live there) */
	char *final;            /* where the owned block ends (user dtype) */
	int last;               /* current step is the last */
	int rblk;
	int direct;             /* partial received straight into its place */
};

static size_t blk_off(const struct rs_args *a, int n, int b)
{
	return ibc_block_offset(a->total, n, b);
}

/* fold the received partial @data (wire) with this rank's block contribution */
static void rs_chunk(struct ring *rg, void *varg, size_t off, size_t cnt, char *data)
{
	struct rs_args *a = varg;
	const struct ibc_op *op = rg->op;
	size_t boff = blk_off(a, rg->n, a->rblk) + off;
	const char *mine = a->src + boff * rg->esz;

	if (rg->accum) {
		/* data is an fp32 partial, in place in part[] (direct receive) */
		if (!a->last) {
			ibc_reduce_f32_acc((float *)data, mine, cnt, op->dtype, op->redop);
		} else if (op->redop == IBC_AVG) {
			ibc_reduce_f32_acc((float *)data, mine, cnt, op->dtype, op->redop);
			ibc_reduce_avg_finalize(data, cnt, IBC_FLOAT32, rg->n);
			ibc_cvt_from_f32(a->final + off * rg->esz, (float *)data, cnt, op->dtype);
		} else {
			ibc_reduce_f32_acc_cvt(a->final + off * rg->esz, (float *)data, mine, cnt,
					       op->dtype, op->redop);
		}
		return;
	}
	if (a->part[0] && !a->last) {
		/* reduce-scatter: partial in scratch, received in place */
		ibc_reduce_local(data, mine, cnt, op->dtype, op->redop);
		return;
	}
	{
		char *dst = a->last && a->part[0] ? a->final + off * rg->esz
						 : a->ubuf + boff * rg->esz;

		if (dst == data)
			ibc_reduce_local(dst, mine, cnt, op->dtype, op->redop);
		else
			ibc_reduce_local3(dst, data, mine, cnt, op->dtype, op->redop);
		if (a->last && op->redop == IBC_AVG)
			ibc_reduce_avg_finalize(dst, cnt, op->dtype, rg->n);
	}
}

/*
 * Run the n-1 reduce-scatter steps. Partials live in the all-reduce's
 * recvbuf (a->part[0] == NULL, non-accumulating all-reduce) or in two
 * scratch buffers of one block each (reduce-scatter, or fp32 accumulation).
 */
static ibc_status_t ring_rs(struct ring *rg, struct rs_args *a)
{
	int n = rg->n;
	int r = rg->r;
	int s;

	for (s = 0; s < n - 1; s++) {
		int sblk = ibc_mod(r + a->shift - s, n);
		int rblk = ibc_mod(r + a->shift - s - 1, n);
		size_t scount = ibc_block_count(a->total, n, sblk);
		size_t rcount = ibc_block_count(a->total, n, rblk);
		const char *sbuf;
		char *rdirect = NULL;

		a->rblk = rblk;
		a->last = s == n - 2;
		/* what to send: this rank's own block at step 0, else last step's partial */
		if (s == 0) {
			const char *own = a->src + blk_off(a, n, sblk) * rg->esz;

			if (rg->accum) {
				ibc_cvt_to_f32((float *)a->part[1], own, scount, rg->op->dtype);
				sbuf = a->part[1];
			} else {
				sbuf = own;
			}
		} else if (a->part[0]) {
			sbuf = a->part[(s - 1) & 1];
		} else {
			sbuf = a->ubuf + blk_off(a, n, sblk) * rg->esz;
		}
		/* where to receive */
		if (a->part[0]) {
			rdirect = a->part[s & 1];
		} else if (a->direct) {
			rdirect = a->ubuf + blk_off(a, n, rblk) * rg->esz;
		}
		IBC_CHECK(ring_step(rg, PHASE_RS, s, sbuf, scount, rdirect, rcount, rs_chunk, a));
	}
	return IBC_OK;
}

/* all-gather steps over the n blocks of @buf, this rank starting with block @own */
static ibc_status_t ring_ag(struct ring *rg, char *buf, size_t total, int own)
{
	int n = rg->n;
	int s;

	for (s = 0; s < n - 1; s++) {
		int sblk = ibc_mod(own - s, n);
		int rblk = ibc_mod(own - s - 1, n);

		IBC_CHECK(ring_step(rg, PHASE_AG, s, buf + ibc_block_offset(total, n, sblk) * rg->esz,
				    ibc_block_count(total, n, sblk),
				    buf + ibc_block_offset(total, n, rblk) * rg->esz,
				    ibc_block_count(total, n, rblk), NULL, NULL));
	}
	return IBC_OK;
}

static void copy_if_needed(void *dst, const void *src, size_t nbytes)
{
	if (dst != src && nbytes)
		memmove(dst, src, nbytes);
}

ibc_status_t ibc_ring_allreduce(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ring rg;
	struct rs_args a;
	size_t count = op->count;
	char *extra = NULL;

	IBC_CHECK(ring_init(&rg, coll, op, 1));
	if (rg.n == 1) {
		copy_if_needed(op->recvbuf, op->sendbuf, count * rg.esz);
		if (op->redop == IBC_AVG)
			ibc_reduce_avg_finalize(op->recvbuf, count, op->dtype, 1);
		return IBC_OK;
	}
	memset(&a, 0, sizeof(a));
	a.total = count;
	a.shift = 0;
	a.src = op->sendbuf;
	a.ubuf = op->recvbuf;
	a.direct = op->sendbuf != op->recvbuf;
	if (rg.accum) {
		size_t bmax = ibc_block_count(count, rg.n, 0) * 4;

		IBC_CHECK(ring_scratch(&rg, 2 * IBC_ALIGN_UP(bmax, 64), &extra));
		a.part[0] = extra;
		a.part[1] = extra + IBC_ALIGN_UP(bmax, 64);
		a.final = a.ubuf + ibc_block_offset(count, rg.n, (rg.r + 1) % rg.n) * rg.esz;
	} else {
		IBC_CHECK(ring_scratch(&rg, 0, NULL));
	}
	IBC_CHECK(ring_rs(&rg, &a));
	/* the all-gather moves user-type elements */
	rg.wsz = rg.esz;
	rg.accum = 0;
	rg.chunk = IBC_MAX((size_t)ibc_param_ring_chunk_bytes() / rg.esz, 1);
	return ring_ag(&rg, op->recvbuf, count, (rg.r + 1) % rg.n);
}

ibc_status_t ibc_ring_reduce_scatter(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ring rg;
	struct rs_args a;
	size_t rc = op->count;
	char *extra = NULL;
	size_t pbytes;

	IBC_CHECK(ring_init(&rg, coll, op, 1));
	if (rg.n == 1) {
		copy_if_needed(op->recvbuf, op->sendbuf, rc * rg.esz);
		if (op->redop == IBC_AVG)
			ibc_reduce_avg_finalize(op->recvbuf, rc, op->dtype, 1);
		return IBC_OK;
	}
	/*
	 * Partials alternate between two buffers of one block by step parity.
	 * Out of place and in the user's dtype, recvbuf is the one the last
	 * step receives into (the result is then reduced in place there), so
	 * the scratch holds one block, none on 2 ranks (the 2 GiB second copy
	 * of issue 20, case 8); in place recvbuf is this rank's own input
	 * block, needed until the last step, and fp32 partials do not fit it.
	 */
	pbytes = IBC_ALIGN_UP(rc * rg.wsz, 64);
	{
		const char *sb = op->sendbuf;
		const char *ub = op->recvbuf;
		int nparts = rg.n > 2 || rg.accum ? 2 : 1;
		int use_final = !rg.accum && (ub + rc * rg.esz <= sb || ub >= sb + rc * rg.esz * (size_t)rg.n);
		int fin = (rg.n - 2) & 1;

		memset(&a, 0, sizeof(a));
		if (use_final) {
			if (nparts == 2)
				IBC_CHECK(ring_scratch(&rg, pbytes, &extra));
			else
				IBC_CHECK(ring_scratch(&rg, 0, NULL));
			a.part[fin] = op->recvbuf;
			a.part[1 - fin] = extra;
		} else {
			IBC_CHECK(ring_scratch(&rg, (size_t)nparts * pbytes, &extra));
			a.part[0] = extra;
			a.part[1] = nparts == 2 ? extra + pbytes : NULL;
		}
	}
	a.total = rc * (size_t)rg.n;
	a.shift = -1;
	a.src = op->sendbuf;
	a.final = op->recvbuf;
	return ring_rs(&rg, &a);
}

ibc_status_t ibc_ring_allgather(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ring rg;
	size_t sc = op->count;
	char *own;

	IBC_CHECK(ring_init(&rg, coll, op, 0));
	own = (char *)op->recvbuf + (size_t)rg.r * sc * rg.esz;
	copy_if_needed(own, op->sendbuf, sc * rg.esz);
	if (rg.n == 1)
		return IBC_OK;
	IBC_CHECK(ring_scratch(&rg, 0, NULL));
	return ring_ag(&rg, op->recvbuf, sc * (size_t)rg.n, rg.r);
}

/* ------------------------------------------------------------------------ */
/* chains: broadcast from root, reduce to root                              */
/* ------------------------------------------------------------------------ */

/*
 * Broadcast: a pipelined chain root -> root+1 -> ... -> root-1. Every rank
 * but the root receives each chunk into its recvbuf and forwards it to the
 * next rank (except the last one), so the data streams down the chain.
 */
struct bcast_args {
	int forward;
	size_t nfwd;            /* chunks forwarded so far */
	struct ibc_treq sreq[RING_WINDOW];
	ibc_status_t st;
};

static void bcast_chunk(struct ring *rg, void *varg, size_t off, size_t cnt, char *data)
{
	struct bcast_args *a = varg;
	struct ibc_treq *sr = &a->sreq[a->nfwd % RING_WINDOW];
	struct ibc_msg_desc d;

	if (!a->forward || a->st != IBC_OK)
		return;
	if (a->nfwd >= RING_WINDOW) {
		a->st = ibc_net_wait1(rg->coll->net, sr);
		if (a->st != IBC_OK)
			return;
	}
	ibc_coll_desc(rg->op, IBC_COLL_STEP(PHASE_BCAST, 0, a->nfwd), 0, &d);
	a->st = ibc_net_isend(rg->coll->net, rg->next, data, cnt * rg->esz, &d, sr);
	a->nfwd++;
	(void)off;
}

ibc_status_t ibc_ring_broadcast(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ring rg;
	struct bcast_args a;
	size_t count = op->count;
	int pos;
	size_t i;

	IBC_CHECK(ring_init(&rg, coll, op, 0));
	pos = ibc_mod(rg.r - op->root, rg.n); /* position in the chain, root = 0 */
	if (pos == 0)
		copy_if_needed(op->recvbuf, op->sendbuf, count * rg.esz);
	if (rg.n == 1)
		return IBC_OK;
	if (pos == 0)
		return ring_step(&rg, PHASE_BCAST, 0, op->recvbuf, count, NULL, 0, NULL, NULL);
	memset(&a, 0, sizeof(a));
	a.forward = pos < rg.n - 1;
	IBC_CHECK(ring_step(&rg, PHASE_BCAST, 0, NULL, 0, op->recvbuf, count, bcast_chunk, &a));
	IBC_CHECK(a.st);
	for (i = a.nfwd > RING_WINDOW ? a.nfwd - RING_WINDOW : 0; i < a.nfwd; i++)
		IBC_CHECK(ibc_net_wait1(coll->net, &a.sreq[i % RING_WINDOW]));
	return IBC_OK;
}

/*
 * Reduce: a pipelined chain root+1 -> root+2 -> ... -> root. The first rank
 * sends its data; each next rank folds the incoming partial with its own
 * contribution (partial OP mine) and forwards it; the root writes the result.
 * The order of the reduction is fixed: x_root+1 first, x_root last.
 */
struct reduce_args {
	int is_root;
	char *out;              /* root: recvbuf; others: partial buffer (wire) */
	const char *mine;
	size_t nfwd;
	struct ibc_treq sreq[RING_WINDOW];
	ibc_status_t st;
};

static void reduce_chunk(struct ring *rg, void *varg, size_t off, size_t cnt, char *data)
{
	struct reduce_args *a = varg;
	const struct ibc_op *op = rg->op;
	const char *mine = a->mine + off * rg->esz;
	char *dst;
	struct ibc_treq *sr;
	struct ibc_msg_desc d;

	if (a->st != IBC_OK)
		return;
	if (a->is_root) {
		dst = a->out + off * rg->esz;
		if (rg->accum) {
			if (op->redop == IBC_AVG) {
				ibc_reduce_f32_acc((float *)data, mine, cnt, op->dtype, op->redop);
				ibc_reduce_avg_finalize(data, cnt, IBC_FLOAT32, rg->n);
				ibc_cvt_from_f32(dst, (float *)data, cnt, op->dtype);
			} else {
				ibc_reduce_f32_acc_cvt(dst, (float *)data, mine, cnt, op->dtype,
						       op->redop);
			}
		} else {
			ibc_reduce_local3(dst, data, mine, cnt, op->dtype, op->redop);
			if (op->redop == IBC_AVG)
				ibc_reduce_avg_finalize(dst, cnt, op->dtype, rg->n);
		}
		return;
	}
	/* middle of the chain: fold in place in the partial buffer, forward */
	sr = &a->sreq[a->nfwd % RING_WINDOW];
	if (a->nfwd >= RING_WINDOW) {
		a->st = ibc_net_wait1(rg->coll->net, sr);
		if (a->st != IBC_OK)
			return;
	}
	if (rg->accum)
		ibc_reduce_f32_acc((float *)data, mine, cnt, op->dtype, op->redop);
	else
		ibc_reduce_local(data, mine, cnt, op->dtype, op->redop);
	ibc_coll_desc(op, IBC_COLL_STEP(PHASE_REDUCE, 0, a->nfwd), rg->accum, &d);
	a->st = ibc_net_isend(rg->coll->net, rg->next, data, cnt * rg->wsz, &d, sr);
	a->nfwd++;
}

ibc_status_t ibc_ring_reduce(struct ibc_coll *coll, struct ibc_op *op)
{
	struct ring rg;
	struct reduce_args a;
	size_t count = op->count;
	char *extra = NULL;
	int pos;
	size_t i;

	IBC_CHECK(ring_init(&rg, coll, op, 1));
	if (rg.n == 1) {
		copy_if_needed(op->recvbuf, op->sendbuf, count * rg.esz);
		if (op->redop == IBC_AVG)
			ibc_reduce_avg_finalize(op->recvbuf, count, op->dtype, 1);
		return IBC_OK;
	}
	/* chain position: root+1 is first (1), root is last (n) */
	pos = ibc_mod(rg.r - op->root, rg.n);
	if (pos == 0)
		pos = rg.n;
	memset(&a, 0, sizeof(a));
	a.mine = op->sendbuf;
	a.is_root = pos == rg.n;
	if (pos == 1) {
		const char *src = op->sendbuf;

		if (rg.accum) {
			IBC_CHECK(ring_scratch(&rg, count * 4, &extra));
			ibc_cvt_to_f32((float *)extra, op->sendbuf, count, op->dtype);
			src = extra;
		} else {
			IBC_CHECK(ring_scratch(&rg, 0, NULL));
		}
		return ring_step(&rg, PHASE_REDUCE, 0, src, count, NULL, 0, NULL, NULL);
	}
	if (a.is_root) {
		IBC_CHECK(ring_scratch(&rg, 0, NULL));
		a.out = op->recvbuf;
		return ring_step(&rg, PHASE_REDUCE, 0, NULL, 0, NULL, count, reduce_chunk, &a);
	}
	/* middle ranks receive into a full-size partial buffer and forward from it */
	IBC_CHECK(ring_scratch(&rg, count * rg.wsz, &extra));
	a.out = extra;
	IBC_CHECK(ring_step(&rg, PHASE_REDUCE, 0, NULL, 0, extra, count, reduce_chunk, &a));
	IBC_CHECK(a.st);
	for (i = a.nfwd > RING_WINDOW ? a.nfwd - RING_WINDOW : 0; i < a.nfwd; i++)
		IBC_CHECK(ibc_net_wait1(coll->net, &a.sreq[i % RING_WINDOW]));
	return IBC_OK;
}
