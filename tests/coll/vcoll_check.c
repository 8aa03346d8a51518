/* SPDX-License-Identifier: MIT */
/*
 * vcoll_check.c - the rooted, vector and tagged calls of ibcoll.h with
 * exact expected values, one process per rank, public API only:
 *   gather, scatter     every root, counts 0, 1, 7 and 1000 + 3, in place
 *                       and out of place, int32 and float64, blocking and
 *                       nonblocking;
 *   allgatherv          counts per rank r: (r * 7 + k) % 5 (zeros among
 *                       them), blocks in reverse rank order with gaps, in
 *                       place and out; untouched gaps keep their sentinel;
 *   alltoallv           counts from rank r to p: (r + 2 p + k) % 4, random
 *                       offsets, exact blocks;
 *   tagged              every rank sends two messages to every other with
 *                       tags 2 and 1 in that order, the receiver takes tag
 *                       1 first (so tag 2 waits as unexpected), then a
 *                       round of any-source receives whose sources must
 *                       each appear once and whose data name them;
 *   tagorder            two receives of one source and tag, the later one
 *                       in an earlier slot of the executor's batch, before
 *                       their sends, 20 rounds: they match in issue order
 *                       (the later one, polled first, once took the first
 *                       message: mismatched counts);
 *   tagring             on a new communicator (no connection set up yet), a
 *                       tagged send to the next rank and a tagged receive
 *                       from the previous one as its first operations
 *                       (before the fix, 3 ranks or more waited on each
 *                       other's connection set-up until IBC_TIMEOUT_MS);
 *   group               a ring exchange posted inside ibc_group_start/end,
 *                       receives first on odd ranks, sends first on even;
 *   misuse              a collective inside a group, a wait on a grouped
 *                       request, ibc_comm_set_timeout out of range, a
 *                       count mismatch of allgatherv: each refused with
 *                       its status.
 * Prints "rank R: PASS: <pattern>" or "rank R: FAIL: ..." and exits 1 on a
 * failure. Element i of rank r's block in round k is r * 1000003 + i + k.
 *
 * usage: vcoll_check [PATTERN...]   (IBC_RANK/IBC_NRANKS/IBC_ROOT or mpirun)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibcoll.h"

#define SENTINEL (-7)

static int rank;
static int nranks;
static int failed;

#define FAIL(...)                                                       \
	do {                                                            \
		printf("rank %d: FAIL: ", rank);                        \
		printf(__VA_ARGS__);                                    \
		printf(" (%s)\n", ibc_last_error());                    \
		failed = 1;                                             \
	} while (0)

#define CHECK(expr, ...)                                                \
	do {                                                            \
		ibc_status_t st_ = (expr);                              \
		if (st_ != IBC_OK) {                                    \
			FAIL("%s -> %s: ", #expr, ibc_status_str(st_)); \
			printf(__VA_ARGS__);                            \
			printf("\n");                                   \
			return -1;                                      \
		}                                                       \
	} while (0)

static int32_t val(int from, size_t i, int k)
{
	return (int32_t)((uint32_t)from * 1000003u + (uint32_t)i + (uint32_t)k);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		printf("rank %d: FAIL: out of memory\n", rank);
		exit(1);
	}
	return p;
}

/* gather and scatter, every root, int32 and float64 */
static int t_rooted(ibc_comm_h comm)
{
	static const size_t counts[] = { 0, 1, 7, 1003 };
	size_t ci;
	int root;
	int inplace;
	int k = 0;

	for (ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
		size_t c = counts[ci];

		for (root = 0; root < nranks; root++) {
			for (inplace = 0; inplace < 2; inplace++, k++) {
				int32_t *all = xmalloc((size_t)nranks * c * sizeof(int32_t));
				int32_t *mine = xmalloc(c * sizeof(int32_t));
				double *dall = xmalloc((size_t)nranks * c * sizeof(double));
				double *dmine = xmalloc(c * sizeof(double));
				ibc_request_h req;
				size_t i;
				int r;

				/* gather int32, blocking */
				for (i = 0; i < c; i++)
					mine[i] = val(rank, i, k);
				for (i = 0; i < (size_t)nranks * c; i++)
					all[i] = SENTINEL;
				if (inplace && rank == root)
					memcpy(all + (size_t)rank * c, mine, c * sizeof(int32_t));
				CHECK(ibc_gather(inplace && rank == root ? all + (size_t)rank * c : mine,
						 rank == root ? all : NULL, c, IBC_INT32, root, comm),
				      "gather count %zu root %d", c, root);
				if (rank == root)
					for (r = 0; r < nranks; r++)
						for (i = 0; i < c; i++)
							if (all[(size_t)r * c + i] != val(r, i, k)) {
								FAIL("gather count %zu root %d: element %zu of rank %d is %d",
								     c, root, i, r, all[(size_t)r * c + i]);
								return -1;
							}
				/* scatter float64, nonblocking */
				for (r = 0; r < nranks; r++)
					for (i = 0; i < c; i++)
						dall[(size_t)r * c + i] = rank == root ? (double)val(r, i, k) + 0.5
										      : -1.0;
				for (i = 0; i < c; i++)
					dmine[i] = -1.0;
				CHECK(ibc_iscatter(rank == root ? dall : NULL,
						   inplace && rank == root ? dall + (size_t)rank * c : dmine,
						   c, IBC_FLOAT64, root, comm, &req),
				      "iscatter count %zu root %d", c, root);
				CHECK(ibc_wait(req), "iscatter wait");
				{
					const double *got = inplace && rank == root ? dall + (size_t)rank * c
										     : dmine;

					for (i = 0; i < c; i++)
						if (got[i] != (double)val(rank, i, k) + 0.5) {
							FAIL("scatter count %zu root %d: element %zu is %g", c, root,
							     i, got[i]);
							return -1;
						}
				}
				free(all);
				free(mine);
				free(dall);
				free(dmine);
			}
		}
	}
	return 0;
}

/* allgatherv: uneven counts with zeros, blocks in reverse order with gaps */
static int t_allgatherv(ibc_comm_h comm)
{
	size_t *rc = xmalloc((size_t)nranks * sizeof(size_t));
	size_t *rd = xmalloc((size_t)nranks * sizeof(size_t));
	int k;

	for (k = 0; k < 4; k++) {
		size_t total = 0;
		int32_t *buf;
		int32_t *mine;
		int inplace = k & 1;
		ibc_request_h req;
		size_t i;
		int r;

		for (r = nranks - 1; r >= 0; r--) {
			rc[r] = (size_t)((r * 7 + k) % 5) * (k >= 2 ? 211 : 1);
			rd[r] = total + 1;              /* a gap of one before each block */
			total += rc[r] + 1;
		}
		buf = xmalloc(total * sizeof(int32_t));
		mine = xmalloc(rc[rank] * sizeof(int32_t));
		for (i = 0; i < total; i++)
			buf[i] = SENTINEL;
		for (i = 0; i < rc[rank]; i++)
			mine[i] = val(rank, i, k);
		if (inplace)
			memcpy(buf + rd[rank], mine, rc[rank] * sizeof(int32_t));
		CHECK(ibc_iallgatherv(inplace ? buf + rd[rank] : mine, buf, rc[rank], rc, rd,
				      IBC_INT32, comm, &req),
		      "iallgatherv round %d", k);
		/* the arrays were copied at issue: scribbling on them must not matter */
		memset(rc, 0xff, (size_t)nranks * sizeof(size_t));
		CHECK(ibc_wait(req), "iallgatherv wait round %d", k);
		total = 0;
		for (r = nranks - 1; r >= 0; r--) {
			rc[r] = (size_t)((r * 7 + k) % 5) * (k >= 2 ? 211 : 1);
			if (buf[total] != SENTINEL) {
				FAIL("allgatherv round %d: the gap before rank %d's block was written", k, r);
				return -1;
			}
			for (i = 0; i < rc[r]; i++)
				if (buf[total + 1 + i] != val(r, i, k)) {
					FAIL("allgatherv round %d: element %zu of rank %d is %d", k, i, r,
					     buf[total + 1 + i]);
					return -1;
				}
			total += rc[r] + 1;
		}
		free(buf);
		free(mine);
	}
	free(rc);
	free(rd);
	return 0;
}

/* count of elements rank @from sends to rank @to in round @k */
static size_t a2av_count(int from, int to, int k)
{
	return (size_t)((from + 2 * to + k) % 4) * (size_t)(k + 1) * 3;
}

static int t_alltoallv(ibc_comm_h comm)
{
	size_t *sc = xmalloc((size_t)nranks * sizeof(size_t));
	size_t *sd = xmalloc((size_t)nranks * sizeof(size_t));
	size_t *rcv = xmalloc((size_t)nranks * sizeof(size_t));
	size_t *rdv = xmalloc((size_t)nranks * sizeof(size_t));
	int k;

	for (k = 0; k < 3; k++) {
		size_t stot = 0;
		size_t rtot = 0;
		int32_t *sb;
		int32_t *rb;
		size_t i;
		int p;

		/* send blocks in rank order, receive blocks in reverse, gaps of 2 */
		for (p = 0; p < nranks; p++) {
			sc[p] = a2av_count(rank, p, k);
			sd[p] = stot;
			stot += sc[p];
		}
		for (p = nranks - 1; p >= 0; p--) {
			rcv[p] = a2av_count(p, rank, k);
			rdv[p] = rtot + 2;
			rtot += rcv[p] + 2;
		}
		sb = xmalloc(stot * sizeof(int32_t));
		rb = xmalloc(rtot * sizeof(int32_t));
		for (p = 0; p < nranks; p++)
			for (i = 0; i < sc[p]; i++)
				sb[sd[p] + i] = val(rank, i, k * 100 + p);
		for (i = 0; i < rtot; i++)
			rb[i] = SENTINEL;
		CHECK(ibc_alltoallv(sb, rb, sc, sd, rcv, rdv, IBC_INT32, comm), "alltoallv round %d",
		      k);
		for (p = 0; p < nranks; p++) {
			for (i = 0; i < rcv[p]; i++)
				if (rb[rdv[p] + i] != val(p, i, k * 100 + rank)) {
					FAIL("alltoallv round %d: element %zu from rank %d is %d", k, i, p,
					     rb[rdv[p] + i]);
					return -1;
				}
			if (rb[rdv[p] - 1] != SENTINEL || rb[rdv[p] - 2] != SENTINEL) {
				FAIL("alltoallv round %d: the gap before rank %d's block was written", k, p);
				return -1;
			}
		}
		free(sb);
		free(rb);
	}
	free(sc);
	free(sd);
	free(rcv);
	free(rdv);
	return 0;
}

/* tagged sends out of tag order, then any-source receives */
static int t_tagged(ibc_comm_h comm)
{
	enum { C = 513 };
	int32_t *sbuf[2];
	int32_t *rbuf = xmalloc(C * sizeof(int32_t));
	ibc_request_h *sreq = xmalloc(2 * (size_t)nranks * sizeof(ibc_request_h));
	int *seen = calloc((size_t)nranks, sizeof(int));
	int p;
	int t;
	int j;

	for (t = 0; t < 2; t++) {
		size_t i;

		sbuf[t] = xmalloc(C * sizeof(int32_t));
		for (i = 0; i < C; i++)
			sbuf[t][i] = val(rank, i, t + 1);
	}
	/* every peer gets tag 2 first, then tag 1 */
	for (p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		CHECK(ibc_isend_tag(sbuf[1], C, IBC_INT32, p, 2, comm, &sreq[2 * p]), "isend tag 2");
		CHECK(ibc_isend_tag(sbuf[0], C, IBC_INT32, p, 1, comm, &sreq[2 * p + 1]),
		      "isend tag 1");
	}
	/* take tag 1 first from each peer (tag 2 arrived first: unexpected) */
	for (t = 1; t <= 2; t++) {
		for (p = 0; p < nranks; p++) {
			ibc_request_h rq;
			int src = -1;
			size_t i;

			if (p == rank)
				continue;
			memset(rbuf, 0, C * sizeof(int32_t));
			CHECK(ibc_irecv_tag(rbuf, C, IBC_INT32, p, t, &src, comm, &rq), "irecv tag %d",
			      t);
			CHECK(ibc_wait(rq), "irecv tag %d from %d", t, p);
			for (i = 0; i < C; i++)
				if (rbuf[i] != val(p, i, t)) {
					FAIL("tag %d from rank %d: element %zu is %d", t, p, i, rbuf[i]);
					return -1;
				}
			if (src != p) {
				FAIL("tag %d from rank %d: the source reported is %d", t, p, src);
				return -1;
			}
		}
	}
	for (p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		CHECK(ibc_wait(sreq[2 * p]), "isend tag 2 wait");
		CHECK(ibc_wait(sreq[2 * p + 1]), "isend tag 1 wait");
	}
	/* any source: every peer sends one message with tag 7 */
	for (p = 0; p < nranks; p++)
		if (p != rank)
			CHECK(ibc_isend_tag(sbuf[0], 1, IBC_INT32, p, 7, comm, &sreq[p]), "isend tag 7");
	for (j = 0; j < nranks - 1; j++) {
		ibc_request_h rq;
		int src = -1;

		rbuf[0] = 0;
		CHECK(ibc_irecv_tag(rbuf, 1, IBC_INT32, IBC_ANY_SOURCE, 7, &src, comm, &rq),
		      "irecv any source");
		CHECK(ibc_wait(rq), "irecv any source wait");
		if (src < 0 || src >= nranks || src == rank || seen[src]++ ||
		    rbuf[0] != val(src, 0, 1)) {
			FAIL("any source: source %d, value %d", src, rbuf[0]);
			return -1;
		}
	}
	for (p = 0; p < nranks; p++)
		if (p != rank)
			CHECK(ibc_wait(sreq[p]), "isend tag 7 wait");
	for (t = 0; t < 2; t++)
		free(sbuf[t]);
	free(rbuf);
	free(sreq);
	free(seen);
	return 0;
}

/*
 * receives of one source and tag match in issue order, also where the later
 * one sits in an earlier slot of the executor's batch: each rank posts a
 * receive of tag 9 and one of 24 elements with tag 4 from the previous
 * rank, sends its tag-9 message to the next, waits for its own tag-9
 * receive (which frees that slot), posts a receive of 12 elements with tag
 * 4 (into the freed slot), and 1 ms later sends 24 then 12 elements with
 * tag 4. Before the fix the 12-element receive, polled first, took the
 * 24-element message: mismatched counts. 20 rounds.
 */
static int t_tagorder(ibc_comm_h comm)
{
	enum { A = 24, B = 12, ROUNDS = 20 };
	int32_t sa[A];
	int32_t sb[B];
	int32_t ra[A];
	int32_t rb[B];
	int32_t s9 = val(rank, 9, 0);
	int32_t r9 = SENTINEL;
	int next = (rank + 1) % nranks;
	int prev = (rank + nranks - 1) % nranks;
	int k;
	int i;

	if (nranks < 2)
		return 0;
	for (k = 0; k < ROUNDS; k++) {
		ibc_request_h q9;
		ibc_request_h s9q;
		ibc_request_h q[4];

		for (i = 0; i < A; i++) {
			sa[i] = val(rank, (size_t)i, k);
			ra[i] = SENTINEL;
		}
		for (i = 0; i < B; i++) {
			sb[i] = val(rank, (size_t)i + 100, k);
			rb[i] = SENTINEL;
		}
		CHECK(ibc_irecv_tag(&r9, 1, IBC_INT32, prev, 9, NULL, comm, &q9), "irecv tag 9");
		CHECK(ibc_irecv_tag(ra, A, IBC_INT32, prev, 4, NULL, comm, &q[0]), "irecv 24");
		CHECK(ibc_isend_tag(&s9, 1, IBC_INT32, next, 9, comm, &s9q), "isend tag 9");
		CHECK(ibc_wait(q9), "round %d: the tag-9 receive", k);
		CHECK(ibc_wait(s9q), "round %d: the tag-9 send", k);
		CHECK(ibc_irecv_tag(rb, B, IBC_INT32, prev, 4, NULL, comm, &q[1]), "irecv 12");
		usleep(1000);
		CHECK(ibc_isend_tag(sa, A, IBC_INT32, next, 4, comm, &q[2]), "isend 24");
		CHECK(ibc_isend_tag(sb, B, IBC_INT32, next, 4, comm, &q[3]), "isend 12");
		for (i = 0; i < 4; i++)
			CHECK(ibc_wait(q[i]), "round %d: wait %d", k, i);
		for (i = 0; i < A; i++)
			if (ra[i] != val(prev, (size_t)i, k)) {
				FAIL("tagorder round %d: the first receive's element %d is %d", k, i,
				     (int)ra[i]);
				return -1;
			}
		for (i = 0; i < B; i++)
			if (rb[i] != val(prev, (size_t)i + 100, k)) {
				FAIL("tagorder round %d: the second receive's element %d is %d", k, i,
				     (int)rb[i]);
				return -1;
			}
	}
	return 0;
}

/* a ring exchange inside a group: odd ranks post receives first */
static int t_tagring(ibc_comm_h comm)
{
	enum { C = 1000 };
	int32_t *sbuf = xmalloc(C * sizeof(int32_t));
	int32_t *rbuf = xmalloc(C * sizeof(int32_t));
	ibc_request_h q[2];
	ibc_comm_h fresh;
	int prev = (rank + nranks - 1) % nranks;
	size_t i;

	if (nranks == 1) {
		free(sbuf);
		free(rbuf);
		return 0;
	}
	CHECK(ibc_comm_split(comm, 0, rank, &fresh), "split");
	for (i = 0; i < C; i++) {
		sbuf[i] = val(rank, i, 5);
		rbuf[i] = SENTINEL;
	}
	CHECK(ibc_isend_tag(sbuf, C, IBC_INT32, (rank + 1) % nranks, 3, fresh, &q[0]),
	      "isend_tag to the next rank");
	CHECK(ibc_irecv_tag(rbuf, C, IBC_INT32, prev, 3, NULL, fresh, &q[1]),
	      "irecv_tag from the previous rank");
	CHECK(ibc_wait(q[0]), "wait on the send");
	CHECK(ibc_wait(q[1]), "wait on the receive");
	for (i = 0; i < C; i++) {
		if (rbuf[i] != val(prev, i, 5)) {
			FAIL("tagring: element %zu from rank %d is %d, want %d", i, prev,
			     (int)rbuf[i], (int)val(prev, i, 5));
			return -1;
		}
	}
	CHECK(ibc_comm_destroy(fresh), "destroy");
	free(sbuf);
	free(rbuf);
	return 0;
}

static int t_group(ibc_comm_h comm)
{
	enum { C = 1 << 20 };  /* 4 MiB: beyond what a transport buffers */
	int32_t *s = xmalloc(C * sizeof(int32_t));
	int32_t *r = xmalloc(C * sizeof(int32_t));
	int next = (rank + 1) % nranks;
	int prev = (rank + nranks - 1) % nranks;
	ibc_request_h q[2];
	size_t i;

	if (nranks < 2)
		return 0;
	for (i = 0; i < C; i++)
		s[i] = val(rank, i, 9);
	CHECK(ibc_group_start(comm), "group_start");
	if (rank & 1) {
		CHECK(ibc_irecv(r, C, IBC_INT32, prev, comm, &q[0]), "grouped irecv");
		CHECK(ibc_isend(s, C, IBC_INT32, next, comm, &q[1]), "grouped isend");
	} else {
		CHECK(ibc_isend(s, C, IBC_INT32, next, comm, &q[1]), "grouped isend");
		CHECK(ibc_irecv(r, C, IBC_INT32, prev, comm, &q[0]), "grouped irecv");
	}
	CHECK(ibc_group_end(comm), "group_end");
	CHECK(ibc_waitall(2, q), "group waitall");
	for (i = 0; i < C; i++)
		if (r[i] != val(prev, i, 9)) {
			FAIL("group: element %zu from rank %d is %d", i, prev, r[i]);
			return -1;
		}
	free(s);
	free(r);
	return 0;
}

/* refused calls, each with its status (local checks: no rank is left waiting) */
static int t_misuse(ibc_comm_h comm)
{
	int32_t x = 0;
	ibc_request_h q;
	ibc_status_t st;
	size_t *rc = calloc((size_t)nranks, sizeof(size_t));
	size_t *rd = calloc((size_t)nranks, sizeof(size_t));

	CHECK(ibc_group_start(comm), "group_start");
	st = ibc_allreduce(&x, &x, 1, IBC_INT32, IBC_SUM, comm);
	if (st != IBC_ERR_INVALID_USAGE || !strstr(ibc_last_error(), "ibc_group_start")) {
		FAIL("allreduce inside a group: %s", ibc_status_str(st));
		return -1;
	}
	st = ibc_group_start(comm);
	if (st != IBC_ERR_INVALID_USAGE) {
		FAIL("nested group_start: %s", ibc_status_str(st));
		return -1;
	}
	if (nranks > 1) {
		CHECK(ibc_isend(&x, 0, IBC_INT32, (rank + 1) % nranks, comm, &q), "grouped isend");
		st = ibc_wait(q);
		if (st != IBC_ERR_INVALID_USAGE || !strstr(ibc_last_error(), "ibc_group_end")) {
			FAIL("wait on a grouped request: %s", ibc_status_str(st));
			return -1;
		}
	}
	CHECK(ibc_group_end(comm), "group_end");
	if (nranks > 1) {
		int32_t y;

		CHECK(ibc_recv(&y, 0, IBC_INT32, (rank + nranks - 1) % nranks, comm), "recv");
		CHECK(ibc_wait(q), "grouped isend wait");
	}
	st = ibc_comm_set_timeout(comm, 99);
	if (st != IBC_ERR_INVALID_ARG) {
		FAIL("set_timeout 99 ms: %s", ibc_status_str(st));
		return -1;
	}
	CHECK(ibc_comm_set_timeout(comm, 60000), "set_timeout 60 s");
	rc[rank] = 2;
	st = ibc_allgatherv(&x, &x, 1, rc, rd, IBC_INT32, comm);
	if (st != IBC_ERR_INVALID_ARG || !strstr(ibc_last_error(), "differs from recvcounts")) {
		FAIL("allgatherv sendcount != recvcounts[rank]: %s", ibc_status_str(st));
		return -1;
	}
	st = ibc_irecv_tag(&x, 1, IBC_INT32, rank, 0, NULL, comm, &q);
	if (st != IBC_ERR_INVALID_ARG) {
		FAIL("irecv_tag from itself: %s", ibc_status_str(st));
		return -1;
	}
	st = ibc_isend_tag(&x, 1, IBC_INT32, (rank + 1) % nranks, -1, comm, &q);
	if (st != IBC_ERR_INVALID_ARG) {
		FAIL("isend_tag with tag -1: %s", ibc_status_str(st));
		return -1;
	}
	free(rc);
	free(rd);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(ibc_comm_h);
} patterns[] = {
	{ "rooted", t_rooted },
	{ "allgatherv", t_allgatherv },
	{ "alltoallv", t_alltoallv },
	{ "tagged", t_tagged },
	{ "tagring", t_tagring },
	{ "tagorder", t_tagorder },
	{ "group", t_group },
	{ "misuse", t_misuse },
};

int main(int argc, char **argv)
{
	ibc_comm_h comm;
	size_t p;
	int a;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (ibc_comm_init_env(&comm) != IBC_OK) {
		printf("rank ?: FAIL: init: %s\n", ibc_last_error());
		return 1;
	}
	ibc_comm_rank(comm, &rank);
	ibc_comm_size(comm, &nranks);
	for (p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
		int want = argc == 1;

		for (a = 1; a < argc; a++)
			want |= !strcmp(argv[a], patterns[p].name);
		if (!want)
			continue;
		if (patterns[p].fn(comm) == 0)
			printf("rank %d: PASS: %s\n", rank, patterns[p].name);
		else
			break;
		/* the patterns must not bleed into each other */
		if (ibc_barrier(comm) != IBC_OK) {
			FAIL("barrier after %s", patterns[p].name);
			break;
		}
	}
	if (ibc_comm_destroy(comm) != IBC_OK && !failed)
		FAIL("destroy");
	return failed ? 1 : 0;
}
