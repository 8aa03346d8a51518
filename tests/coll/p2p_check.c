/* SPDX-License-Identifier: MIT */
/*
 * p2p_check.c - point-to-point patterns that need sends and receives in
 * flight together (MPI semantics of ibc_isend()/ibc_irecv()), one process
 * per rank, public API only. Prints "rank R: PASS: ..." per pattern or
 * "rank R: FAIL: ..." and exits 1.
 *
 * Patterns, each with exact expected values (element i from rank r is
 * r * 1000003 + i + round, as int32):
 *   exchange  every rank posts ibc_isend() to both ring neighbours BEFORE
 *             the ibc_irecv()s, then waits for all four (a deadlock when
 *             sends are run one at a time and are larger than what the
 *             transport buffers);
 *   mixed     isend, irecv, then an all-reduce queued behind them, then the
 *             waits (the all-reduce runs after the p2p in issue order);
 *   blocking  ibc_send/ibc_recv ordered by rank parity (even ranks send
 *             first) around the ring;
 *   burst     first of all, before any connection exists: each odd rank
 *             queues BURST one-element isends to rank - 1, which starts its
 *             irecvs 50 ms later; they must arrive in order (the batch
 *             once posted a later send first when the connection's set-up
 *             finished between two posts of one pass: mismatched calls).
 *
 * usage: p2p_check [-n COUNT] [-r ROUNDS]   (IBC_RANK/IBC_NRANKS/IBC_ROOT or mpirun)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibcoll.h"

#define BURST 64

static int rank;
static int failed;

#define FAIL(...)                                                       \
	do {                                                            \
		printf("rank %d: FAIL: ", rank);                        \
		printf(__VA_ARGS__);                                    \
		printf("\n");                                           \
		failed = 1;                                             \
	} while (0)

static int32_t val(int from, size_t i, int round)
{
	return (int32_t)((uint32_t)from * 1000003u + (uint32_t)i + (uint32_t)round);
}

static void fill(int32_t *b, size_t n, int from, int round)
{
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = val(from, i, round);
}

/* number of elements of @b not equal to what rank @from sent in @round */
static size_t wrong(const int32_t *b, size_t n, int from, int round)
{
	size_t i;
	size_t bad = 0;

	for (i = 0; i < n; i++)
		bad += b[i] != val(from, i, round);
	return bad;
}

static int check_st(ibc_status_t st, const char *what)
{
	if (st == IBC_OK)
		return 1;
	FAIL("%s returned %s: %s", what, ibc_status_str(st), ibc_last_error());
	return 0;
}

int main(int argc, char **argv)
{
	size_t count = 1 << 22; /* 16 MiB of int32: beyond any transport's buffering */
	int rounds = 3;
	int nranks;
	int opt;
	int round;
	ibc_comm_h comm;
	int32_t *s_next, *s_prev, *r_next, *r_prev;
	int next, prev;

	while ((opt = getopt(argc, argv, "n:r:")) != -1) {
		if (opt == 'n')
			count = strtoull(optarg, NULL, 10);
		else if (opt == 'r')
			rounds = atoi(optarg);
		else
			return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (ibc_comm_init_env(&comm) != IBC_OK) {
		printf("rank ?: FAIL: ibc_comm_init_env: %s\n", ibc_last_error());
		return 1;
	}
	ibc_comm_rank(comm, &rank);
	ibc_comm_size(comm, &nranks);
	if (nranks < 2) {
		printf("rank %d: PASS: nothing to check with 1 rank\n", rank);
		ibc_comm_destroy(comm);
		return 0;
	}
	next = (rank + 1) % nranks;
	prev = (rank + nranks - 1) % nranks;
	s_next = malloc(count * 4);
	s_prev = malloc(count * 4);
	r_next = malloc(count * 4);
	r_prev = malloc(count * 4);
	if (!s_next || !s_prev || !r_next || !r_prev) {
		FAIL("out of memory");
		return 1;
	}

	/* burst: many sends queued while the connection is being set up */
	if (rank / 2 * 2 + 1 < nranks) {
		ibc_request_h rq[BURST];
		int32_t bs[BURST];
		int32_t br[BURST];
		int peer = rank ^ 1;
		int k;
		int nq = 0;

		if (rank % 2 == 0)
			usleep(50000);
		for (k = 0; k < BURST; k++) {
			bs[k] = val(rank, (size_t)k, 300);
			br[k] = -1;
			if (!check_st(rank % 2 ? ibc_isend(&bs[k], 1, IBC_INT32, peer, comm, &rq[k])
					      : ibc_irecv(&br[k], 1, IBC_INT32, peer, comm, &rq[k]),
				      rank % 2 ? "isend (burst)" : "irecv (burst)"))
				break;
			nq++;
		}
		for (k = 0; k < nq; k++)
			check_st(ibc_wait(rq[k]), "wait (burst)");
		for (k = 0; k < BURST && !failed && rank % 2 == 0; k++)
			if (br[k] != val(peer, (size_t)k, 300))
				FAIL("burst: message %d from rank %d holds %d, want %d", k, peer, br[k],
				     val(peer, (size_t)k, 300));
	}
	if (!failed)
		printf("rank %d: PASS: burst (%d sends queued before the connection is up, in order)\n",
		       rank, BURST);

	/* exchange: sends first, then receives, then wait */
	for (round = 0; round < rounds && !failed; round++) {
		ibc_request_h rq[4];
		int k;
		size_t b1, b2;

		fill(s_next, count, rank, round);
		fill(s_prev, count, rank, round + 7);
		memset(r_next, 0xee, count * 4);
		memset(r_prev, 0xee, count * 4);
		if (!check_st(ibc_isend(s_next, count, IBC_INT32, next, comm, &rq[0]), "isend next") ||
		    !check_st(ibc_isend(s_prev, count, IBC_INT32, prev, comm, &rq[1]), "isend prev") ||
		    !check_st(ibc_irecv(r_prev, count, IBC_INT32, prev, comm, &rq[2]), "irecv prev") ||
		    !check_st(ibc_irecv(r_next, count, IBC_INT32, next, comm, &rq[3]), "irecv next"))
			break;
		for (k = 0; k < 4; k++)
			check_st(ibc_wait(rq[k]), "wait");
		if (failed)
			break;
		/* prev sent us its "next" buffer (round), next sent its "prev" buffer (round + 7) */
		b1 = wrong(r_prev, count, prev, round);
		b2 = wrong(r_next, count, next, round + 7);
		if (b1 || b2)
			FAIL("exchange round %d: %zu wrong from rank %d, %zu wrong from rank %d", round,
			     b1, prev, b2, next);
	}
	if (!failed)
		printf("rank %d: PASS: exchange (isend both ways before irecv), %d rounds of %zu int32\n",
		       rank, rounds, count);

	/* mixed: p2p then a collective queued behind it, waits at the end */
	if (!failed) {
		ibc_request_h rq[3];
		int32_t x = rank + 1;
		int32_t sum = 0;
		int k;

		fill(s_next, count, rank, 100);
		memset(r_prev, 0xee, count * 4);
		if (check_st(ibc_isend(s_next, count, IBC_INT32, next, comm, &rq[0]), "isend") &&
		    check_st(ibc_irecv(r_prev, count, IBC_INT32, prev, comm, &rq[1]), "irecv") &&
		    check_st(ibc_iallreduce(&x, &sum, 1, IBC_INT32, IBC_SUM, comm, &rq[2]),
			     "iallreduce")) {
			for (k = 0; k < 3; k++)
				check_st(ibc_wait(rq[k]), "wait");
			if (!failed && wrong(r_prev, count, prev, 100))
				FAIL("mixed: wrong data from rank %d", prev);
			if (!failed && sum != nranks * (nranks + 1) / 2)
				FAIL("mixed: all-reduce gave %d, want %d", sum, nranks * (nranks + 1) / 2);
		}
		if (!failed)
			printf("rank %d: PASS: mixed (isend, irecv, iallreduce queued behind)\n", rank);
	}

	/* blocking: parity-ordered ring shift (odd ring: rank n-1 and 0 both even -> 0 receives first) */
	if (!failed) {
		int send_first = rank % 2 == 0 && !(nranks % 2 == 1 && rank == 0);

		fill(s_next, count, rank, 200);
		memset(r_prev, 0xee, count * 4);
		if (send_first) {
			if (check_st(ibc_send(s_next, count, IBC_INT32, next, comm), "send"))
				check_st(ibc_recv(r_prev, count, IBC_INT32, prev, comm), "recv");
		} else {
			if (check_st(ibc_recv(r_prev, count, IBC_INT32, prev, comm), "recv"))
				check_st(ibc_send(s_next, count, IBC_INT32, next, comm), "send");
		}
		if (!failed && wrong(r_prev, count, prev, 200))
			FAIL("blocking: wrong data from rank %d", prev);
		if (!failed)
			printf("rank %d: PASS: blocking ring shift\n", rank);
	}
	if (!check_st(ibc_comm_destroy(comm), "destroy"))
		return 1;
	free(s_next);
	free(s_prev);
	free(r_next);
	free(r_prev);
	return failed;
}
