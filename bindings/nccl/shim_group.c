/* SPDX-License-Identifier: MIT */
/*
 * shim_group.c - ncclGroupStart/ncclGroupEnd. ibcoll has no group call
 * (yet), so a group is kept here, per thread: the calls inside it are only
 * checked and recorded, and the outermost ncclGroupEnd() issues them in the
 * deadlock-free order of shim_order() (shim_order.c), all on one stream.
 *
 * At ncclGroupEnd():
 *   1. wait for the communicators created inside the group (blocking ones;
 *      nonblocking ones make it return ncclInProgress while not done);
 *   2. return the first error of a call inside the group, issuing nothing;
 *   3. refuse two ranks of one communicator in one group (one thread
 *      cannot drive them: each rank's operation blocks until the others
 *      join, and they would only be issued after it);
 *   4. pair each send to self with the receive from self of the same rank
 *      and communicator, in order (same count and type), else refuse;
 *   5. stream mode: make the first operation's stream wait for the other
 *      streams of the group, issue everything on it in shim_order(), then
 *      make the other streams wait for it (NCCL: a group's operations may
 *      use different streams; all of them see the whole group done);
 *      host mode: run each operation to completion in that order.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "shim.h"

struct group_state {
	int depth;
	struct shim_op *ops;
	int nops;
	int cap;
	struct ncclComm **inits;        /* created inside the group */
	int ninits;
	int icap;
	ncclResult_t err;               /* first error of a call inside the group */
};

static __thread struct group_state grp;

int shim_in_group(void)
{
	return grp.depth > 0;
}

void shim_group_fail(ncclResult_t res)
{
	if (grp.err == ncclSuccess)
		grp.err = res;
}

ncclResult_t shim_group_add(const struct shim_op *op)
{
	if (grp.nops == grp.cap) {
		int cap = grp.cap ? 2 * grp.cap : 16;
		struct shim_op *ops = realloc(grp.ops, (size_t)cap * sizeof(*ops));

		if (!ops) {
			shim_group_fail(ncclSystemError);
			return shim_err(op->comm, ncclSystemError, op->fn,
					"out of memory (group of %d operations)", grp.nops);
		}
		grp.ops = ops;
		grp.cap = cap;
	}
	grp.ops[grp.nops++] = *op;
	return ncclSuccess;
}

ncclResult_t shim_group_add_init(struct ncclComm *comm)
{
	if (grp.ninits == grp.icap) {
		int cap = grp.icap ? 2 * grp.icap : 8;
		struct ncclComm **v = realloc(grp.inits, (size_t)cap * sizeof(*v));

		if (!v) {
			/* the communicator still initializes; ncclGroupEnd() cannot wait for it */
			shim_group_fail(ncclSystemError);
			return shim_err(comm, ncclSystemError, "ncclCommInitRank", "out of memory (group)");
		}
		grp.inits = v;
		grp.icap = cap;
	}
	grp.inits[grp.ninits++] = comm;
	return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
	grp.depth++;
	return ncclSuccess;
}

/* step 3: the first pair of operations on two ranks of one communicator */
static ncclResult_t check_one_rank_each(void)
{
	int i;
	int j;

	for (i = 0; i < grp.nops; i++) {
		for (j = 0; j < i; j++) {
			struct ncclComm *a = grp.ops[i].comm;
			struct ncclComm *b = grp.ops[j].comm;

			if (a != b && a->gid == b->gid)
				return shim_err(a, ncclInvalidUsage, "ncclGroupEnd",
						"%s on rank %d and %s on rank %d of one communicator in one group: one thread cannot drive several ranks of a communicator here (ibcoll runs each rank's operation until all ranks have joined it; it needs a library group call for this)",
						grp.ops[j].fn, b->rank, grp.ops[i].fn, a->rank);
		}
	}
	return ncclSuccess;
}

static int is_self(const struct shim_op *op, int kind)
{
	return op->kind == kind && op->root == op->comm->rank;
}

/* step 4: @match[i] = index of the receive from self paired with send i */
static ncclResult_t pair_self(int *match)
{
	int i;
	int j;

	for (i = 0; i < grp.nops; i++)
		match[i] = -1;
	for (i = 0; i < grp.nops; i++) {
		const struct shim_op *s = &grp.ops[i];

		if (!is_self(s, SHIM_SEND))
			continue;
		for (j = 0; j < grp.nops; j++) {
			const struct shim_op *r = &grp.ops[j];
			int k;
			int taken = 0;

			if (!is_self(r, SHIM_RECV) || r->comm != s->comm)
				continue;
			for (k = 0; k < grp.nops; k++)
				taken |= match[k] == j;
			if (taken)
				continue;
			if (r->count != s->count || r->dtype != s->dtype)
				return shim_err(s->comm, ncclInvalidUsage, "ncclGroupEnd",
						"ncclSend to self of %zu elements of type %d is matched by an ncclRecv from self of %zu elements of type %d (sizes and types must agree)",
						s->count, (int)s->dtype, r->count, (int)r->dtype);
			match[i] = j;
			break;
		}
		if (match[i] < 0)
			return shim_err(s->comm, ncclInvalidUsage, "ncclGroupEnd",
					"ncclSend to self (%zu elements) has no matching ncclRecv from self in the group",
					s->count);
	}
	for (j = 0; j < grp.nops; j++) {
		int k;
		int taken = 0;

		if (!is_self(&grp.ops[j], SHIM_RECV))
			continue;
		for (k = 0; k < grp.nops; k++)
			taken |= match[k] == j;
		if (!taken)
			return shim_err(grp.ops[j].comm, ncclInvalidUsage, "ncclGroupEnd",
					"ncclRecv from self (%zu elements) has no matching ncclSend to self in the group",
					grp.ops[j].count);
	}
	return ncclSuccess;
}

/* the distinct streams of the group, the first operation's first */
static int distinct_streams(cudaStream_t *v)
{
	int n = 0;
	int i;
	int j;

	for (i = 0; i < grp.nops; i++) {
		for (j = 0; j < n && v[j] != grp.ops[i].stream; j++)
			;
		if (j == n)
			v[n++] = grp.ops[i].stream;
	}
	return n;
}

static ncclResult_t group_issue(void)
{
	struct shim_order_in *in = NULL;
	cudaStream_t *streams = NULL;
	int *perm = NULL;
	int *match = NULL;
	int host = shim_host_mode();
	ncclResult_t res;
	ncclResult_t res2;
	int nstreams = 0;
	int i;

	res = check_one_rank_each();
	if (res != ncclSuccess)
		return res;
	in = calloc((size_t)grp.nops, sizeof(*in));
	perm = calloc((size_t)grp.nops, sizeof(*perm));
	match = calloc((size_t)grp.nops, sizeof(*match));
	streams = calloc((size_t)grp.nops, sizeof(*streams));
	if (!in || !perm || !match || !streams) {
		res = shim_err(NULL, ncclSystemError, "ncclGroupEnd", "out of memory (%d operations)",
			       grp.nops);
		goto out;
	}
	res = pair_self(match);
	if (res != ncclSuccess)
		goto out;
	for (i = 0; i < grp.nops; i++) {
		const struct shim_op *op = &grp.ops[i];

		in[i].gid = op->comm->gid;
		in[i].rank = op->comm->rank;
		in[i].p2p = op->kind == SHIM_SEND ? 1 : op->kind == SHIM_RECV ? 2 : 0;
		in[i].peer = op->root;
	}
	if (shim_order(in, grp.nops, perm) != 0) {
		res = shim_err(NULL, ncclSystemError, "ncclGroupEnd", "out of memory (ordering)");
		goto out;
	}
	if (!host) {
		nstreams = distinct_streams(streams);
		res = shim_cuda_join(streams, nstreams, "ncclGroupEnd");
		if (res != ncclSuccess)
			goto out;
	}
	for (i = 0; i < grp.nops && res == ncclSuccess; i++) {
		struct shim_op op = grp.ops[perm[i]];

		op.stream = host ? NULL : streams[0];
		if (is_self(&op, SHIM_RECV))
			continue;       /* done with its send */
		if (is_self(&op, SHIM_SEND)) {
			struct shim_op r = grp.ops[match[perm[i]]];

			res = shim_issue_self(&op, &r);
		} else {
			res = shim_issue(&op);
		}
	}
	if (!host) {
		/* every communicator of the group (once): finalize waits for this point */
		for (i = 0; i < grp.nops; i++) {
			int j;

			for (j = 0; j < i && grp.ops[j].comm != grp.ops[i].comm; j++)
				;
			if (j < i)
				continue;
			res2 = shim_cuda_mark(grp.ops[i].comm, streams[0], "ncclGroupEnd");
			if (res == ncclSuccess)
				res = res2;
		}
		res2 = shim_cuda_fork(streams, nstreams, "ncclGroupEnd");
		if (res == ncclSuccess)
			res = res2;
	}
out:
	free(in);
	free(perm);
	free(match);
	free(streams);
	return res;
}

ncclResult_t ncclGroupEnd(void)
{
	ncclResult_t res = ncclSuccess;
	int inprogress = 0;
	int i;

	if (grp.depth <= 0)
		return shim_err(NULL, ncclInvalidUsage, "ncclGroupEnd", "no matching ncclGroupStart()");
	if (--grp.depth > 0)
		return ncclSuccess;
	for (i = 0; i < grp.ninits; i++) {
		struct ncclComm *c = grp.inits[i];
		ncclResult_t r;

		if (!c->blocking) {
			ncclResult_t st;

			if (ncclCommGetAsyncError(c, &st) == ncclSuccess && st == ncclInProgress) {
				inprogress = 1;
				continue;
			}
		}
		r = shim_comm_wait_init(c);
		if (res == ncclSuccess)
			res = r;
	}
	if (res == ncclSuccess)
		res = grp.err;
	if (res == ncclSuccess && grp.nops > 0)
		res = group_issue();
	grp.nops = 0;
	grp.ninits = 0;
	grp.err = ncclSuccess;
	if (res == ncclSuccess && inprogress)
		return ncclInProgress;
	return res;
}
