/* SPDX-License-Identifier: MIT */
/*
 * comm_check.c - communicator management across ranks, public API only, one
 * process per rank: ibc_comm_split() with several colors, keys that reverse
 * the order and a color that opts out; a split of a split; parent and child
 * used in alternation; the launcher variable the rank came from. With
 * --big: an in-place int8 all-reduce of 2^31 + 7 elements (more than 2 GiB
 * per rank), every element checked, so that no size arithmetic is done in
 * 32 bits. Prints "rank R: PASS: ..." per part, "rank R: FAIL: ..." and exits
 * 1 on a failed check.
 *
 * usage: comm_check [--big] [--expect-source VAR]
 *        (IBC_RANK/IBC_NRANKS, mpirun, PMI_RANK/PMI_SIZE, PMIX_RANK,
 *         SLURM_PROCID/SLURM_NTASKS; IBC_ROOT)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibcoll.h"

static int rank = -1;
static int failed;

#define CHECK(cond, ...)                                                \
	do {                                                            \
		if (!(cond)) {                                          \
			printf("rank %d: FAIL: ", rank);                \
			printf(__VA_ARGS__);                            \
			printf(" [%s]\n", ibc_last_error());            \
			failed = 1;                                     \
		}                                                       \
	} while (0)

/* sum over the parent ranks r < n with r % 2 == parity, r != opt_out */
static int64_t parity_sum(int n, int parity, int opt_out)
{
	int64_t s = 0;
	int r;

	for (r = 0; r < n; r++)
		if (r % 2 == parity && r != opt_out)
			s += r + 1;
	return s;
}

static void check_split(ibc_comm_h comm, int nranks)
{
	/* the last rank opts out when there are 3 or more */
	int opt_out = nranks >= 3 ? nranks - 1 : -1;
	int color = rank == opt_out ? -1 : rank % 2;
	ibc_comm_h sub = (ibc_comm_h)&sub; /* must be overwritten */
	int sub_rank = -1;
	int sub_size = -1;
	int want_size = 0;
	int want_rank = 0;
	int r;

	CHECK(ibc_comm_split(comm, color, -rank, &sub) == IBC_OK, "split(color %d, key %d)", color,
	      -rank);
	if (color < 0) {
		CHECK(sub == NULL, "color -1: the new communicator is NULL");
		sub = NULL;
	}
	if (failed)
		return;
	for (r = 0; r < nranks; r++) {
		if (r % 2 != color || r == opt_out)
			continue;
		want_size++;
		if (r > rank)
			want_rank++; /* key -r: higher parent ranks come first */
	}
	if (sub) {
		CHECK(ibc_comm_size(sub, &sub_size) == IBC_OK && sub_size == want_size,
		      "split size %d, want %d", sub_size, want_size);
		CHECK(ibc_comm_rank(sub, &sub_rank) == IBC_OK && sub_rank == want_rank,
		      "split rank %d, want %d (keys reverse the parent order)", sub_rank,
		      want_rank);
	}

	/* parent and child in alternation, exact sums */
	for (r = 0; r < 3 && !failed; r++) {
		int64_t x = rank + 1;
		int64_t y = 0;
		int64_t all = (int64_t)nranks * (nranks + 1) / 2;

		if (sub)
			CHECK(ibc_allreduce(&x, &y, 1, IBC_INT64, IBC_SUM, sub) == IBC_OK &&
				      y == parity_sum(nranks, color, opt_out),
			      "round %d: child all-reduce %lld, want %lld", r, (long long)y,
			      (long long)parity_sum(nranks, color, opt_out));
		CHECK(ibc_allreduce(&x, &y, 1, IBC_INT64, IBC_SUM, comm) == IBC_OK && y == all,
		      "round %d: parent all-reduce %lld, want %lld", r, (long long)y, (long long)all);
	}

	/* a split of the split: everyone in one color, key = sub rank (order kept) */
	if (sub && !failed) {
		ibc_comm_h sub2 = NULL;
		int s2r = -1;
		int32_t v = sub_rank;
		int32_t mx = -1;

		CHECK(ibc_comm_split(sub, 7, sub_rank, &sub2) == IBC_OK && sub2,
		      "split of the split");
		if (sub2) {
			CHECK(ibc_comm_rank(sub2, &s2r) == IBC_OK && s2r == sub_rank,
			      "nested split rank %d, want %d", s2r, sub_rank);
			CHECK(ibc_allreduce(&v, &mx, 1, IBC_INT32, IBC_MAX, sub2) == IBC_OK &&
				      mx == want_size - 1,
			      "nested max %d, want %d", mx, want_size - 1);
			CHECK(ibc_comm_destroy(sub2) == IBC_OK, "destroy nested");
		}
	}
	if (sub) {
		CHECK(ibc_barrier(sub) == IBC_OK, "child barrier");
		CHECK(ibc_comm_destroy(sub) == IBC_OK, "destroy child");
	}
	/* the opted-out rank too: nobody leaves while others still use the parent */
	CHECK(ibc_barrier(comm) == IBC_OK, "parent barrier");
	if (!failed)
		printf("rank %d: PASS: split (color %d of 2%s), keys, parent and child in turn%s\n",
		       rank, color, opt_out >= 0 ? ", last rank opts out" : "",
		       sub ? ", nested split" : "");
}

static void check_big(ibc_comm_h comm, int nranks)
{
	size_t count = ((size_t)1 << 31) + 7;
	int8_t *buf = malloc(count);
	size_t i;
	size_t bad = 0;
	size_t first_bad = 0;

	if (!buf) {
		printf("rank %d: FAIL: cannot allocate %zu bytes\n", rank, count);
		failed = 1;
		return;
	}
	/* rank r contributes (i + r) % 3 - 1 in {-1, 0, 1}: sums stay within int8 */
	for (i = 0; i < count; i++)
		buf[i] = (int8_t)((i + (size_t)rank) % 3) - 1;
	CHECK(ibc_allreduce(buf, buf, count, IBC_INT8, IBC_SUM, comm) == IBC_OK,
	      "in-place int8 all-reduce of %zu elements", count);
	for (i = 0; i < count && !failed; i++) {
		int want = 0;
		int r;

		for (r = 0; r < nranks; r++)
			want += (int)((i + (size_t)r) % 3) - 1;
		if (buf[i] != (int8_t)want && bad++ == 0)
			first_bad = i;
	}
	CHECK(bad == 0, "%zu wrong elements, first at %zu", bad, first_bad);
	if (!failed)
		printf("rank %d: PASS: in-place int8 all-reduce of 2^31 + 7 elements, all exact\n",
		       rank);
	free(buf);
}

int main(int argc, char **argv)
{
	const char *expect_src = NULL;
	int big = 0;
	int nranks = 0;
	int i;
	ibc_comm_h comm;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--big"))
			big = 1;
		else if (!strcmp(argv[i], "--expect-source") && i + 1 < argc)
			expect_src = argv[++i];
		else {
			fprintf(stderr, "usage: comm_check [--big] [--expect-source VAR]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (ibc_comm_init_env(&comm) != IBC_OK) {
		printf("rank ?: FAIL: ibc_comm_init_env: %s\n", ibc_last_error());
		return 1;
	}
	ibc_comm_rank(comm, &rank);
	ibc_comm_size(comm, &nranks);
	if (expect_src) {
		/* the launcher's rank variable must agree with the communicator */
		const char *v = getenv(expect_src);

		CHECK(v && atoi(v) == rank, "%s=%s but the communicator says rank %d", expect_src,
		      v ? v : "(unset)", rank);
		if (!failed)
			printf("rank %d: PASS: rank and size (%d) taken from %s\n", rank, nranks,
			       expect_src);
	}
	check_split(comm, nranks);
	if (big && !failed)
		check_big(comm, nranks);
	CHECK(ibc_comm_destroy(comm) == IBC_OK, "destroy");
	return failed;
}
