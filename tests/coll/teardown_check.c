/* SPDX-License-Identifier: MIT */
/*
 * teardown_check.c - data sent just before a peer destroys its communicator
 * and exits must still arrive, and a receive may only return IBC_OK with the
 * data in place. One process per rank (ibc_comm_init_env(); public API
 * only): @iters rounds of a ring exchange (r -> r+1, blocking, even ranks
 * send first) and an allreduce, each checked, then ibc_comm_destroy() at
 * once and exit, so the fastest rank tears down while its neighbours may
 * still be receiving its last messages. Then the same once more on a
 * communicator from ibc_comm_split(), destroyed right after its collective
 * while the parent lives on.
 *
 * usage: teardown_check [-i iters] [-n count]
 * Prints one line per rank; exit status 0 only if every check passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ibcoll.h>

static int rank;
static int nranks;
static int nfail;

static void fail(const char *what, int iter, size_t idx, long got, long want, ibc_status_t st)
{
	if (nfail++ < 5)
		printf("FAIL rank %d/%d: %s, round %d: returned %s, element %zu got %ld want "
		       "%ld%s%s\n",
		       rank, nranks, what, iter, ibc_status_str(st), idx, got, want,
		       st == IBC_OK ? "" : ": ", st == IBC_OK ? "" : ibc_last_error());
}

/* ring exchange then allreduce on @comm, checked */
static void round_trip(ibc_comm_h comm, int me, int n, int iter, size_t count, const char *tag)
{
	int32_t *x = malloc(count * sizeof(*x));
	int32_t *y = malloc(count * sizeof(*y));
	int right = (me + 1) % n;
	int left = (me + n - 1) % n;
	char what[64];
	ibc_status_t st;
	size_t i;

	if (!x || !y) {
		printf("FAIL rank %d: out of memory\n", rank);
		exit(2);
	}
	for (i = 0; i < count; i++)
		x[i] = (int32_t)(me * 1000003 + iter * 7919 + (int)i);
	memset(y, 0xa5, count * sizeof(*y));
	if (me % 2 == 0) {
		st = ibc_send(x, count, IBC_INT32, right, comm);
		if (st == IBC_OK)
			st = ibc_recv(y, count, IBC_INT32, left, comm);
	} else {
		st = ibc_recv(y, count, IBC_INT32, left, comm);
		if (st == IBC_OK)
			st = ibc_send(x, count, IBC_INT32, right, comm);
	}
	snprintf(what, sizeof(what), "%s ring exchange", tag);
	for (i = 0; i < count; i++) {
		int32_t want = (int32_t)(left * 1000003 + iter * 7919 + (int)i);

		if (st != IBC_OK || y[i] != want) {
			fail(what, iter, i, y[i], want, st);
			break;
		}
	}
	memset(y, 0xa5, count * sizeof(*y));
	st = ibc_allreduce(x, y, count, IBC_INT32, IBC_SUM, comm);
	snprintf(what, sizeof(what), "%s allreduce", tag);
	for (i = 0; i < count; i++) {
		/* sum over ranks r of r*1000003 + iter*7919 + i */
		int64_t want =
		    (int64_t)1000003 * n * (n - 1) / 2 + (int64_t)n * (iter * 7919 + (int)i);

		if (st != IBC_OK || y[i] != (int32_t)want) {
			fail(what, iter, i, y[i], (int32_t)want, st);
			break;
		}
	}
	free(x);
	free(y);
}

int main(int argc, char **argv)
{
	ibc_comm_h comm;
	ibc_comm_h sub = NULL;
	int iters = 3;
	size_t count = 1000;
	int subrank = 0;
	int subn = 0;
	int opt;
	int it;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "i:n:")) != -1) {
		if (opt == 'i')
			iters = atoi(optarg);
		else if (opt == 'n')
			count = (size_t)strtoul(optarg, NULL, 0);
		else
			return 2;
	}
	if (ibc_comm_init_env(&comm) != IBC_OK || ibc_comm_rank(comm, &rank) != IBC_OK ||
	    ibc_comm_size(comm, &nranks) != IBC_OK) {
		printf("teardown_check: init failed: %s\n", ibc_last_error());
		return 2;
	}
	if (nranks < 2) {
		printf("teardown_check rank 0/1: PASS (nothing to check with one rank)\n");
		ibc_comm_destroy(comm);
		return 0;
	}
	/* a split communicator, destroyed right after its collective */
	if (ibc_comm_split(comm, 0, rank, &sub) != IBC_OK || !sub ||
	    ibc_comm_rank(sub, &subrank) != IBC_OK || ibc_comm_size(sub, &subn) != IBC_OK) {
		printf("FAIL rank %d: comm_split: %s\n", rank, ibc_last_error());
		return 1;
	}
	round_trip(sub, subrank, subn, 0, count, "split communicator");
	ibc_comm_destroy(sub);
	for (it = 0; it < iters; it++)
		round_trip(comm, rank, nranks, it, count, "parent communicator");
	ibc_comm_destroy(comm);
	printf("teardown_check rank %d/%d: %s\n", rank, nranks, nfail ? "FAIL" : "PASS");
	return nfail ? 1 : 0;
}
