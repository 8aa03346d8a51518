/* SPDX-License-Identifier: MIT */
/*
 * api_coll.c - the public collective and point-to-point entry points
 * (blocking and nonblocking) and request handling: argument checks with one
 * clear log line per bad call, sequence numbers, submission to the
 * communicator's execution engine (comm.c).
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "api/api.h"
#include "api/cuda_stage.h"
#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/status.h"
#include "cuda/cuda.h"

struct op_args {
	int coll;
	const void *sendbuf;
	void *recvbuf;
	size_t count;
	ibc_dtype_t dtype;
	ibc_redop_t op;
	int root;
	void *gate;             /* stream-ordered operations only (cuda_stream.c) */
	/* vector collectives: allgatherv uses rc, rd; alltoallv all four (ELEMENTS) */
	const size_t *sc;
	const size_t *sd;
	const size_t *rc;
	const size_t *rd;
	/* tagged send/receive */
	int tagged;
	int tag;
	int *source_p;
};

/* 1 when the @n blocks (@counts[i] elements at @displs[i]) overlap */
static int blocks_overlap(const size_t *counts, const size_t *displs, int n)
{
	int i;
	int j;

	/* O(n^2) on the non-empty blocks; n is a rank count */
	for (i = 0; i < n; i++)
		for (j = i + 1; counts[i] && j < n; j++)
			if (counts[j] && displs[i] < displs[j] + counts[j] &&
			    displs[j] < displs[i] + counts[i])
				return 1;
	return 0;
}

/* the end of the furthest of @n blocks, elements; 0 when all are empty */
static size_t blocks_extent(const size_t *counts, const size_t *displs, int n)
{
	size_t end = 0;
	int i;

	for (i = 0; i < n; i++)
		if (counts[i])
			end = IBC_MAX(end, displs[i] + counts[i]);
	return end;
}

/* the arguments of allgatherv and alltoallv (the dtype is checked) */
static ibc_status_t check_vector(struct ibc_comm *comm, const struct op_args *a, size_t esz,
				 const char *fn)
{
	int n = comm->net.nranks;
	int r = comm->net.rank;
	size_t rext;
	size_t sext;
	int i;

	if (!a->rc || !a->rd || (a->coll == IBC_COLL_ALLTOALLV && (!a->sc || !a->sd))) {
		IBC_LOG_ERROR(COLL, "%s: a count or offset array is NULL", fn);
		return IBC_ERR_INVALID_ARG;
	}
	for (i = 0; i < n; i++) {
		if (a->rc[i] > SIZE_MAX / esz / 2 || a->rd[i] > SIZE_MAX / esz / 2 ||
		    (a->sc && (a->sc[i] > SIZE_MAX / esz / 2 || a->sd[i] > SIZE_MAX / esz / 2))) {
			IBC_LOG_ERROR(COLL, "%s: the count or offset of rank %d overflows the address space",
				      fn, i);
			return IBC_ERR_INVALID_ARG;
		}
	}
	if (blocks_overlap(a->rc, a->rd, n)) {
		IBC_LOG_ERROR(COLL, "%s: the blocks of recvbuf overlap (recvcounts/rdispls)", fn);
		return IBC_ERR_INVALID_ARG;
	}
	rext = blocks_extent(a->rc, a->rd, n);
	if (rext && !a->recvbuf) {
		IBC_LOG_ERROR(COLL, "%s: recvbuf is NULL with %zu elements to receive", fn, rext);
		return IBC_ERR_INVALID_ARG;
	}
	if (a->coll == IBC_COLL_ALLGATHERV) {
		if (a->count != a->rc[r]) {
			IBC_LOG_ERROR(COLL, "%s: sendcount %zu differs from recvcounts[%d] = %zu", fn,
				      a->count, r, a->rc[r]);
			return IBC_ERR_INVALID_ARG;
		}
		if (a->count && !a->sendbuf) {
			IBC_LOG_ERROR(COLL, "%s: sendbuf is NULL with sendcount %zu", fn, a->count);
			return IBC_ERR_INVALID_ARG;
		}
		if (a->count && rext) {
			const char *sb = a->sendbuf;
			const char *rb = a->recvbuf;

			if (sb < rb + rext * esz && rb < sb + a->count * esz &&
			    sb != rb + a->rd[r] * esz) {
				IBC_LOG_ERROR(COLL, "%s: sendbuf and recvbuf overlap partly; in place means sendbuf == recvbuf + rdispls[rank] elements, other overlaps are refused",
					      fn);
				return IBC_ERR_INVALID_ARG;
			}
		}
		return IBC_OK;
	}
	if (a->sc[r] != a->rc[r]) {
		IBC_LOG_ERROR(COLL, "%s: sendcounts[%d] = %zu differs from recvcounts[%d] = %zu (this rank's own block)",
			      fn, r, a->sc[r], r, a->rc[r]);
		return IBC_ERR_INVALID_ARG;
	}
	sext = blocks_extent(a->sc, a->sd, n);
	if (sext && !a->sendbuf) {
		IBC_LOG_ERROR(COLL, "%s: sendbuf is NULL with %zu elements to send", fn, sext);
		return IBC_ERR_INVALID_ARG;
	}
	if (sext && rext) {
		const char *sb = a->sendbuf;
		const char *rb = a->recvbuf;

		if (sb < rb + rext * esz && rb < sb + sext * esz) {
			IBC_LOG_ERROR(COLL, "%s: sendbuf and recvbuf overlap (in place is not supported)",
				      fn);
			return IBC_ERR_INVALID_ARG;
		}
	}
	return IBC_OK;
}

/*
 * The buffers of a collective may be the same (in place, at the offset its
 * docstring names) or disjoint; any other overlap is refused, as the
 * algorithms read input that earlier steps overwrote (issue 20, case 3:
 * recvbuf = sendbuf + 1 element gave 297k wrong elements and IBC_OK).
 * Only the buffers this rank uses count (a non-root's recvbuf of a reduce is
 * not). All-to-all has no in-place form.
 */
static ibc_status_t check_overlap(struct ibc_comm *comm, const struct op_args *a, size_t esz,
				  const char *fn)
{
	size_t n = (size_t)comm->net.nranks;
	size_t nb = a->count * esz;
	int is_root = a->root == comm->net.rank;
	uintptr_t sb = (uintptr_t)a->sendbuf;
	uintptr_t rb = (uintptr_t)a->recvbuf;
	size_t slen = nb;
	size_t rlen = nb;
	uintptr_t inplace_sb = rb;      /* sendbuf's in-place address; 0: none */
	int has_inplace = 1;
	const char *what = "sendbuf == recvbuf";

	switch (a->coll) {
	case IBC_COLL_ALLREDUCE:
		break;
	case IBC_COLL_BROADCAST:
	case IBC_COLL_REDUCE:
		if (!is_root)
			return IBC_OK;
		break;
	case IBC_COLL_ALLGATHER:
		rlen = nb * n;
		inplace_sb = rb + (size_t)comm->net.rank * nb;
		what = "sendbuf == recvbuf + rank * sendcount elements";
		break;
	case IBC_COLL_REDUCE_SCATTER:
		slen = nb * n;
		inplace_sb = rb - (size_t)comm->net.rank * nb;
		what = "recvbuf == sendbuf + rank * recvcount elements";
		break;
	case IBC_COLL_GATHER:
		if (!is_root)
			return IBC_OK;
		rlen = nb * n;
		inplace_sb = rb + (size_t)a->root * nb;
		what = "sendbuf == recvbuf + root * sendcount elements";
		break;
	case IBC_COLL_SCATTER:
		if (!is_root)
			return IBC_OK;
		slen = nb * n;
		inplace_sb = rb - (size_t)a->root * nb;
		what = "recvbuf == sendbuf + root * recvcount elements";
		break;
	case IBC_COLL_ALLTOALL:
		slen = rlen = nb * n;
		has_inplace = 0;
		break;
	default:
		return IBC_OK;
	}
	if (!sb || !rb || !(sb < rb + rlen && rb < sb + slen) || (has_inplace && sb == inplace_sb))
		return IBC_OK;
	if (!has_inplace)
		IBC_LOG_ERROR(COLL, "%s: sendbuf and recvbuf overlap (sendbuf %p + %zu bytes, recvbuf %p + %zu bytes); in place is not supported",
			      fn, a->sendbuf, slen, (const void *)a->recvbuf, rlen);
	else
		IBC_LOG_ERROR(COLL, "%s: sendbuf and recvbuf overlap partly (sendbuf %p + %zu bytes, recvbuf %p + %zu bytes); in place means %s, other overlaps are refused",
			      fn, a->sendbuf, slen, (const void *)a->recvbuf, rlen, what);
	return IBC_ERR_INVALID_ARG;
}

/* check the arguments of @a on @comm; logs the first problem found */
static ibc_status_t check_args(struct ibc_comm *comm, const struct op_args *a, const char *fn)
{
	int n = comm->net.nranks;
	int reduces = ibc_coll_reduces(a->coll);
	int is_root = a->root == comm->net.rank;
	int need_send;
	int need_recv;
	size_t esz = 0;
	size_t mult = 1;

	if (a->coll == IBC_COLL_BARRIER)
		return IBC_OK;
	/* one line for a bad dtype: the range first, so that ibc_dtype_size() does not warn too */
	if ((unsigned)a->dtype >= IBC_DTYPE_COUNT || ibc_dtype_size(a->dtype, &esz) != IBC_OK) {
		IBC_LOG_ERROR(COLL, "%s: invalid dtype %d (valid: 0 .. %d, enum ibc_dtype)", fn,
			      (int)a->dtype, IBC_DTYPE_COUNT - 1);
		return IBC_ERR_INVALID_ARG;
	}
	if (reduces && (unsigned)a->op >= IBC_REDOP_COUNT) {
		IBC_LOG_ERROR(COLL, "%s: invalid reduction op %d", fn, (int)a->op);
		return IBC_ERR_INVALID_ARG;
	}
	if (ibc_coll_has_root(a->coll)) {
		if (a->root < 0 || a->root >= n) {
			IBC_LOG_ERROR(COLL, "%s: root %d out of range [0, %d)", fn, a->root, n);
			return IBC_ERR_INVALID_ARG;
		}
	}
	if (a->tagged && (a->tag < 0 || a->tag > IBC_TAG_MAX)) {
		IBC_LOG_ERROR(COLL, "%s: tag %d out of range [0, IBC_TAG_MAX]", fn, a->tag);
		return IBC_ERR_INVALID_ARG;
	}
	if (ibc_coll_is_p2p(a->coll) &&
	    !(a->tagged && a->coll == IBC_COLL_RECV && a->root == IBC_ANY_SOURCE)) {
		if (a->root < 0 || a->root >= n || a->root == comm->net.rank) {
			IBC_LOG_ERROR(COLL, "%s: peer %d is %s (this is rank %d of %d)", fn, a->root,
				      a->root == comm->net.rank ? "this rank itself" : "out of range",
				      comm->net.rank, n);
			return IBC_ERR_INVALID_ARG;
		}
	}
	if (ibc_coll_flags(a->coll) & IBC_COLLF_VECTOR)
		return check_vector(comm, a, esz, fn);
	if (a->coll == IBC_COLL_ALLGATHER || a->coll == IBC_COLL_REDUCE_SCATTER ||
	    a->coll == IBC_COLL_ALLTOALL || a->coll == IBC_COLL_GATHER || a->coll == IBC_COLL_SCATTER)
		mult = (size_t)n;
	if (a->count && a->count > SIZE_MAX / esz / mult) {
		IBC_LOG_ERROR(COLL, "%s: count %zu overflows the address space", fn, a->count);
		return IBC_ERR_INVALID_ARG;
	}
	if (a->count == 0)
		return IBC_OK;
	switch (a->coll) {
	case IBC_COLL_BROADCAST:
		need_send = is_root;
		need_recv = 1;
		break;
	case IBC_COLL_REDUCE:
	case IBC_COLL_GATHER:
		need_send = 1;
		need_recv = is_root;
		break;
	case IBC_COLL_SCATTER:
		need_send = is_root;
		need_recv = 1;
		break;
	case IBC_COLL_SEND:
		need_send = 1;
		need_recv = 0;
		break;
	case IBC_COLL_RECV:
		need_send = 0;
		need_recv = 1;
		break;
	default:
		need_send = 1;
		need_recv = 1;
		break;
	}
	if ((need_send && !a->sendbuf) || (need_recv && !a->recvbuf)) {
		IBC_LOG_ERROR(COLL, "%s: %s is NULL with count %zu", fn,
			      need_send && !a->sendbuf ? (a->coll == IBC_COLL_SEND ? "buf" : "sendbuf")
						       : (a->coll == IBC_COLL_RECV ? "buf" : "recvbuf"),
			      a->count);
		return IBC_ERR_INVALID_ARG;
	}
	if (reduces && (((uintptr_t)a->sendbuf | (uintptr_t)(need_recv ? a->recvbuf : NULL)) % esz)) {
		/*
		 * The reduction loops read and write whole elements (as every
		 * vectorizing compiler assumes); a buffer that starts inside an
		 * element is refused rather than reduced by unaligned accesses
		 * (issue 20, case 8). Framework tensors are always aligned.
		 */
		IBC_LOG_ERROR(COLL, "%s: %s %p is not aligned to its %zu-byte elements (%s): reductions need element-aligned buffers",
			      fn, (uintptr_t)a->sendbuf % esz ? "sendbuf" : "recvbuf",
			      (uintptr_t)a->sendbuf % esz ? a->sendbuf : (const void *)a->recvbuf, esz,
			      ibc_dtype_name(a->dtype));
		return IBC_ERR_INVALID_ARG;
	}
	return check_overlap(comm, a, esz, fn);
}

/* the operations that take only host buffers, and why: IBC_OK or IBC_ERR_UNSUPPORTED */
static ibc_status_t check_host_only(const struct ibc_op *op, const char *fn)
{
	if (!(op->cuda_flags & (IBC_CUDA_REQ_SEND_DEV | IBC_CUDA_REQ_RECV_DEV | IBC_CUDA_REQ_GATED)))
		return IBC_OK;
	if (op->tagged || op->coll == IBC_COLL_GATHER || op->coll == IBC_COLL_SCATTER ||
	    (ibc_coll_flags(op->coll) & IBC_COLLF_VECTOR)) {
		IBC_LOG_ERROR(COLL, "%s: device buffers and streams are not supported for this call yet (host buffers only)",
			      fn);
		return IBC_ERR_UNSUPPORTED;
	}
	return IBC_OK;
}

static ibc_status_t fill_req(struct ibc_comm *comm, struct ibc_request *req,
			     const struct op_args *a, const char *fn)
{
	struct ibc_op *op = &req->op;
	int n = comm->net.nranks;

	/* all but the 1 KiB error text, which only needs its NUL (a blocking
	 * call fills one of these per call) */
	memset(req, 0, offsetof(struct ibc_request, errmsg));
	req->errmsg[0] = '\0';
	req->next = NULL;
	req->comm = comm;
	op->coll = a->coll;
	op->sendbuf = a->sendbuf;
	op->recvbuf = a->recvbuf;
	op->count = a->count;
	op->dtype = a->dtype;
	op->redop = a->op;
	op->root = a->root;
	op->tagged = a->tagged;
	op->tag = a->tag;
	op->source_p = a->source_p;
	if (ibc_coll_flags(a->coll) & IBC_COLLF_VECTOR) {
		/* the arrays are the caller's: copied, owned by the request */
		size_t *v = ibc_malloc((size_t)(a->coll == IBC_COLL_ALLTOALLV ? 4 : 2) * (size_t)n *
				       sizeof(size_t), "counts and offsets");

		if (!v)
			return IBC_ERR_NO_MEMORY;
		if (a->coll == IBC_COLL_ALLTOALLV) {
			memcpy(v, a->sc, (size_t)n * sizeof(size_t));
			memcpy(v + n, a->sd, (size_t)n * sizeof(size_t));
			memcpy(v + 2 * n, a->rc, (size_t)n * sizeof(size_t));
			memcpy(v + 3 * n, a->rd, (size_t)n * sizeof(size_t));
		} else {
			memcpy(v, a->rc, (size_t)n * sizeof(size_t));
			memcpy(v + n, a->rd, (size_t)n * sizeof(size_t));
		}
		op->v = v;
	}
	/* device buffers take the staged path (cuda_stage.c) */
	if (a->gate) {
		op->cuda_flags = IBC_CUDA_REQ_GATED;
		req->cuda_gate = a->gate;
	}
	ibc_cuda_op_classify(op, comm->net.rank);
	if (check_host_only(op, fn) != IBC_OK) {
		ibc_free((void *)op->v);
		op->v = NULL;
		return IBC_ERR_UNSUPPORTED;
	}
	/* sequence numbers last: nothing can fail after them */
	if (a->coll == IBC_COLL_SEND && a->tagged)
		op->seq = comm->net.peers[a->root].tag_send_seq++;
	else if (a->tagged) {
		op->seq = 0;    /* a tagged receive takes its sender's (p2p_tag.c) */
		op->recv_order = comm->net.tag_recvs++;
	}
	else if (a->coll == IBC_COLL_SEND)
		op->seq = comm->net.peers[a->root].p2p_send_seq++;
	else if (a->coll == IBC_COLL_RECV)
		op->seq = comm->net.peers[a->root].p2p_recv_seq++;
	else
		op->seq = comm->net.coll_seq++;
	return IBC_OK;
}

/* undo fill_req()'s sequence number of @a (the request was refused) */
static void unfill_seq(struct ibc_comm *comm, const struct op_args *a)
{
	if (a->coll == IBC_COLL_SEND && a->tagged)
		comm->net.peers[a->root].tag_send_seq--;
	else if (a->tagged)
		return;
	else if (a->coll == IBC_COLL_SEND)
		comm->net.peers[a->root].p2p_send_seq--;
	else if (a->coll == IBC_COLL_RECV)
		comm->net.peers[a->root].p2p_recv_seq--;
	else
		comm->net.coll_seq--;
}

static ibc_status_t op_start(ibc_comm_h h, const struct op_args *a, ibc_request_h *req_p,
			     const char *fn)
{
	struct ibc_comm *comm;
	struct ibc_request breq;
	struct ibc_request *req;
	ibc_status_t st;

	IBC_CHECK(ibc_comm_enter(h, fn, &comm));
	st = check_args(comm, a, fn);
	if (st != IBC_OK)
		goto out;
	st = ibc_net_status(&comm->net);
	if (st != IBC_OK) {
		/* a failed communicator answers at once, with the original error */
		IBC_LOG_DEBUG(COLL, "%s on a failed communicator: %s", fn, comm->net.poison_msg);
		ibc_log_set_last_error(comm->net.poison_msg);
		goto out;
	}
	if (!req_p) {
		if (ibc_exec_in_group(comm)) {
			IBC_LOG_ERROR(COLL, "%s: a blocking call between ibc_group_start() and ibc_group_end()",
				      fn);
			st = IBC_ERR_INVALID_USAGE;
			goto out;
		}
		st = fill_req(comm, &breq, a, fn);
		if (st != IBC_OK)
			goto out;
		st = ibc_comm_submit(comm, &breq, 1);
		ibc_free((void *)breq.op.v);
		goto out;
	}
	/*
	 * IBC_MAX_REQUESTS counts from issue until ibc_wait(): program order,
	 * the same on every rank, so every rank refuses the same call
	 */
	if (__atomic_add_fetch(&comm->noutstanding, 1, __ATOMIC_ACQ_REL) > ibc_param_max_requests()) {
		__atomic_sub_fetch(&comm->noutstanding, 1, __ATOMIC_ACQ_REL);
		IBC_LOG_ERROR(COLL, "%s: %lld nonblocking requests are outstanding on this communicator (IBC_MAX_REQUESTS; a request counts from its call until ibc_wait() returns it): nothing was issued and the communicator stays usable; wait on earlier requests, or raise IBC_MAX_REQUESTS on every rank",
			      fn, (long long)ibc_param_max_requests());
		st = IBC_ERR_LIMIT;
		goto out;
	}
	req = ibc_malloc(sizeof(*req), "request");
	if (!req) {
		st = IBC_ERR_NO_MEMORY;
		goto out_uncount;
	}
	st = fill_req(comm, req, a, fn);
	if (st != IBC_OK) {
		ibc_free(req);
		goto out_uncount;
	}
	req->counted = 1;
	req->comm_h = h;
	st = ibc_comm_submit(comm, req, 0);
	if (st != IBC_OK) {
		unfill_seq(comm, a);
		ibc_free((void *)req->op.v);
		ibc_free(req);
		goto out_uncount;
	}
	*req_p = req;
	goto out;
out_uncount:
	__atomic_sub_fetch(&comm->noutstanding, 1, __ATOMIC_ACQ_REL);
out:
	ibc_comm_leave(comm);
	return st;
}

#define ARGS(c, s, r, n, d, o, rt) \
	{ .coll = (c), .sendbuf = (s), .recvbuf = (r), .count = (n), .dtype = (d), .op = (o), .root = (rt) }

ibc_status_t ibc_api_start_gated(ibc_comm_h comm, int coll, const void *sendbuf, void *recvbuf,
				 size_t count, ibc_dtype_t dtype, ibc_redop_t op, int root,
				 void *gate, ibc_request_h *req_p, const char *fn)
{
	struct op_args a = ARGS(coll, sendbuf, recvbuf, count, dtype, op, root);

	a.gate = gate;
	return op_start(comm, &a, req_p, fn);
}

ibc_status_t ibc_allreduce(const void *sendbuf, void *recvbuf, size_t count, ibc_dtype_t dtype,
			   ibc_redop_t op, ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, -1);

	return op_start(comm, &a, NULL, "ibc_allreduce");
}

ibc_status_t ibc_iallreduce(const void *sendbuf, void *recvbuf, size_t count, ibc_dtype_t dtype,
			    ibc_redop_t op, ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, -1);

	if (!req_p) {
		IBC_LOG_ERROR(COLL, "ibc_iallreduce: req_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	return op_start(comm, &a, req_p, "ibc_iallreduce");
}

ibc_status_t ibc_broadcast(const void *sendbuf, void *recvbuf, size_t count, ibc_dtype_t dtype,
			   int root, ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_BROADCAST, sendbuf, recvbuf, count, dtype, IBC_SUM, root);

	return op_start(comm, &a, NULL, "ibc_broadcast");
}

ibc_status_t ibc_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, ibc_dtype_t dtype,
			    int root, ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_BROADCAST, sendbuf, recvbuf, count, dtype, IBC_SUM, root);

	if (!req_p) {
		IBC_LOG_ERROR(COLL, "ibc_ibroadcast: req_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	return op_start(comm, &a, req_p, "ibc_ibroadcast");
}

ibc_status_t ibc_reduce(const void *sendbuf, void *recvbuf, size_t count, ibc_dtype_t dtype,
			ibc_redop_t op, int root, ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root);

	return op_start(comm, &a, NULL, "ibc_reduce");
}

ibc_status_t ibc_ireduce(const void *sendbuf, void *recvbuf, size_t count, ibc_dtype_t dtype,
			 ibc_redop_t op, int root, ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root);

	if (!req_p) {
		IBC_LOG_ERROR(COLL, "ibc_ireduce: req_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	return op_start(comm, &a, req_p, "ibc_ireduce");
}

ibc_status_t ibc_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
			   ibc_dtype_t dtype, ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, IBC_SUM, -1);

	return op_start(comm, &a, NULL, "ibc_allgather");
}

ibc_status_t ibc_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
			    ibc_dtype_t dtype, ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, IBC_SUM, -1);

	if (!req_p) {
		IBC_LOG_ERROR(COLL, "ibc_iallgather: req_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	return op_start(comm, &a, req_p, "ibc_iallgather");
}

ibc_status_t ibc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
				ibc_dtype_t dtype, ibc_redop_t op, ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, -1);

	return op_start(comm, &a, NULL, "ibc_reduce_scatter");
}

ibc_status_t ibc_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
				 ibc_dtype_t dtype, ibc_redop_t op, ibc_comm_h comm,
				 ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, -1);

	if (!req_p) {
		IBC_LOG_ERROR(COLL, "ibc_ireduce_scatter: req_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	return op_start(comm, &a, req_p, "ibc_ireduce_scatter");
}

ibc_status_t ibc_alltoall(const void *sendbuf, void *recvbuf, size_t count, ibc_dtype_t dtype,
			  ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, IBC_SUM, -1);

	return op_start(comm, &a, NULL, "ibc_alltoall");
}

ibc_status_t ibc_ialltoall(const void *sendbuf, void *recvbuf, size_t count, ibc_dtype_t dtype,
			   ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, IBC_SUM, -1);

	if (!req_p) {
		IBC_LOG_ERROR(COLL, "ibc_ialltoall: req_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	return op_start(comm, &a, req_p, "ibc_ialltoall");
}

ibc_status_t ibc_send(const void *buf, size_t count, ibc_dtype_t dtype, int peer, ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_SEND, buf, NULL, count, dtype, IBC_SUM, peer);

	return op_start(comm, &a, NULL, "ibc_send");
}

ibc_status_t ibc_isend(const void *buf, size_t count, ibc_dtype_t dtype, int peer, ibc_comm_h comm,
		       ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_SEND, buf, NULL, count, dtype, IBC_SUM, peer);

	if (!req_p) {
		IBC_LOG_ERROR(COLL, "ibc_isend: req_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	return op_start(comm, &a, req_p, "ibc_isend");
}

ibc_status_t ibc_recv(void *buf, size_t count, ibc_dtype_t dtype, int peer, ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_RECV, NULL, buf, count, dtype, IBC_SUM, peer);

	return op_start(comm, &a, NULL, "ibc_recv");
}

ibc_status_t ibc_irecv(void *buf, size_t count, ibc_dtype_t dtype, int peer, ibc_comm_h comm,
		       ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_RECV, NULL, buf, count, dtype, IBC_SUM, peer);

	if (!req_p) {
		IBC_LOG_ERROR(COLL, "ibc_irecv: req_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	return op_start(comm, &a, req_p, "ibc_irecv");
}

ibc_status_t ibc_barrier(ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_BARRIER, NULL, NULL, 0, IBC_UINT8, IBC_SUM, -1);

	return op_start(comm, &a, NULL, "ibc_barrier");
}

ibc_status_t ibc_ibarrier(ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_BARRIER, NULL, NULL, 0, IBC_UINT8, IBC_SUM, -1);

	if (!req_p) {
		IBC_LOG_ERROR(COLL, "ibc_ibarrier: req_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	return op_start(comm, &a, req_p, "ibc_ibarrier");
}

/* nonblocking entry that insists on a request pointer */
static ibc_status_t op_start_nb(ibc_comm_h comm, const struct op_args *a, ibc_request_h *req_p,
				const char *fn)
{
	if (!req_p) {
		IBC_LOG_ERROR(COLL, "%s: req_p is NULL", fn);
		return IBC_ERR_INVALID_ARG;
	}
	return op_start(comm, a, req_p, fn);
}

ibc_status_t ibc_gather(const void *sendbuf, void *recvbuf, size_t sendcount, ibc_dtype_t dtype,
			int root, ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_GATHER, sendbuf, recvbuf, sendcount, dtype, IBC_SUM, root);

	return op_start(comm, &a, NULL, "ibc_gather");
}

ibc_status_t ibc_igather(const void *sendbuf, void *recvbuf, size_t sendcount, ibc_dtype_t dtype,
			 int root, ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_GATHER, sendbuf, recvbuf, sendcount, dtype, IBC_SUM, root);

	return op_start_nb(comm, &a, req_p, "ibc_igather");
}

ibc_status_t ibc_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, ibc_dtype_t dtype,
			 int root, ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_SCATTER, sendbuf, recvbuf, recvcount, dtype, IBC_SUM, root);

	return op_start(comm, &a, NULL, "ibc_scatter");
}

ibc_status_t ibc_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount,
			  ibc_dtype_t dtype, int root, ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_SCATTER, sendbuf, recvbuf, recvcount, dtype, IBC_SUM, root);

	return op_start_nb(comm, &a, req_p, "ibc_iscatter");
}

ibc_status_t ibc_allgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
			    const size_t *recvcounts, const size_t *rdispls, ibc_dtype_t dtype,
			    ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_ALLGATHERV, sendbuf, recvbuf, sendcount, dtype, IBC_SUM, -1);

	a.rc = recvcounts;
	a.rd = rdispls;
	return op_start(comm, &a, NULL, "ibc_allgatherv");
}

ibc_status_t ibc_iallgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
			     const size_t *recvcounts, const size_t *rdispls, ibc_dtype_t dtype,
			     ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_ALLGATHERV, sendbuf, recvbuf, sendcount, dtype, IBC_SUM, -1);

	a.rc = recvcounts;
	a.rd = rdispls;
	return op_start_nb(comm, &a, req_p, "ibc_iallgatherv");
}

ibc_status_t ibc_alltoallv(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
			   const size_t *sdispls, const size_t *recvcounts, const size_t *rdispls,
			   ibc_dtype_t dtype, ibc_comm_h comm)
{
	struct op_args a = ARGS(IBC_COLL_ALLTOALLV, sendbuf, recvbuf, 0, dtype, IBC_SUM, -1);

	a.sc = sendcounts;
	a.sd = sdispls;
	a.rc = recvcounts;
	a.rd = rdispls;
	return op_start(comm, &a, NULL, "ibc_alltoallv");
}

ibc_status_t ibc_ialltoallv(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
			    const size_t *sdispls, const size_t *recvcounts, const size_t *rdispls,
			    ibc_dtype_t dtype, ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_ALLTOALLV, sendbuf, recvbuf, 0, dtype, IBC_SUM, -1);

	a.sc = sendcounts;
	a.sd = sdispls;
	a.rc = recvcounts;
	a.rd = rdispls;
	return op_start_nb(comm, &a, req_p, "ibc_ialltoallv");
}

ibc_status_t ibc_isend_tag(const void *buf, size_t count, ibc_dtype_t dtype, int peer, int tag,
			   ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_SEND, buf, NULL, count, dtype, IBC_SUM, peer);

	a.tagged = 1;
	a.tag = tag;
	return op_start_nb(comm, &a, req_p, "ibc_isend_tag");
}

ibc_status_t ibc_irecv_tag(void *buf, size_t count, ibc_dtype_t dtype, int peer, int tag,
			   int *source_p, ibc_comm_h comm, ibc_request_h *req_p)
{
	struct op_args a = ARGS(IBC_COLL_RECV, NULL, buf, count, dtype, IBC_SUM, peer);

	a.tagged = 1;
	a.tag = tag;
	a.source_p = source_p;
	return op_start_nb(comm, &a, req_p, "ibc_irecv_tag");
}

ibc_status_t ibc_test(ibc_request_h req, int *done_p)
{
	if (!req || !done_p) {
		IBC_LOG_ERROR(COLL, "ibc_test: %s is NULL", req ? "done_p" : "req");
		return IBC_ERR_INVALID_ARG;
	}
	if (__atomic_load_n(&req->in_group, __ATOMIC_ACQUIRE)) {
		IBC_LOG_ERROR(COLL, "ibc_test: the request was collected by ibc_group_start() and is not issued until ibc_group_end()");
		return IBC_ERR_INVALID_USAGE;
	}
	return ibc_comm_request_test(req, done_p);
}

ibc_status_t ibc_wait(ibc_request_h req)
{
	ibc_status_t st;

	if (!req) {
		IBC_LOG_ERROR(COLL, "ibc_wait: req is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	if (__atomic_load_n(&req->in_group, __ATOMIC_ACQUIRE)) {
		IBC_LOG_ERROR(COLL, "ibc_wait: the request was collected by ibc_group_start() and is not issued until ibc_group_end()");
		return IBC_ERR_INVALID_USAGE;
	}
	st = ibc_comm_request_wait(req);
	if (req->counted) {
		/* its communicator may be gone: found through the handle, never the address */
		struct ibc_comm *c = NULL;

		if (ibc_comm_enter(req->comm_h, NULL, &c) == IBC_OK) {
			__atomic_sub_fetch(&c->noutstanding, 1, __ATOMIC_ACQ_REL);
			ibc_comm_leave(c);
		}
	}
	ibc_free((void *)req->op.v);
	ibc_free(req);
	return st;
}

ibc_status_t ibc_waitall(int n, ibc_request_h *reqs)
{
	ibc_status_t first = IBC_OK;
	int i;

	if (n < 0 || (n > 0 && !reqs)) {
		IBC_LOG_ERROR(COLL, "ibc_waitall: bad arguments (n %d, reqs %p)", n, (void *)reqs);
		return IBC_ERR_INVALID_ARG;
	}
	for (i = 0; i < n; i++) {
		ibc_status_t st;

		if (!reqs[i])
			continue;
		st = ibc_wait(reqs[i]);
		reqs[i] = NULL;
		if (st != IBC_OK && first == IBC_OK)
			first = st;
	}
	return first;
}
