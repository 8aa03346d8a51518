/* SPDX-License-Identifier: MIT */
/*
 * test_mem_reg.c - ibc_comm_register(), ibc_comm_deregister(),
 * ibc_mem_alloc(), ibc_mem_free() and ibc_comm_reg_stats() over shm and
 * tcp with 1, 2 and 3 ranks (forked children of this program): bad
 * arguments get IBC_ERR_INVALID_ARG, registered and ibc_mem_alloc buffers
 * all-reduce exactly, a handle deregisters once, handles left at destroy
 * are released, and transports that register no memory count nothing.
 * The same calls over verbs, with their registration counts, run in the
 * Soft-RoCE VM (tests/ib/test_ib_comm regapi).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibcoll.h"
#include "tap.h"
#include "tree/fork_ranks.h"

enum {
	C_INIT,
	C_BAD_ARGS,
	C_REGISTER,
	C_REG_EXACT,
	C_DEREG_ONCE,
	C_ALLOC_BAD,
	C_ALLOC,
	C_ALLOC_EXACT,
	C_FREE_ONCE,
	C_STATS,
	C_LEFT_AT_DESTROY,
	C_NCHECKS
};

static const char *const check_name[C_NCHECKS] = {
	"communicator created",
	"NULL comm/buf/handle, 0 bytes and a wrapping range: IBC_ERR_INVALID_ARG; a bogus handle: IBC_ERR_INVALID_ARG",
	"ibc_comm_register of a 1 MiB + 12 B malloc buffer",
	"all-reduce (sum, float32) of the registered buffer, in place, exact",
	"deregistered once: OK, then IBC_ERR_INVALID_ARG",
	"ibc_mem_alloc: NULL ptr_p and 0 bytes: IBC_ERR_INVALID_ARG; ibc_mem_free of a malloc pointer: IBC_ERR_INVALID_ARG",
	"ibc_mem_alloc of 3 MiB + 5 B: page-aligned and zero",
	"all-reduce at an odd offset of ibc_mem_alloc memory, out of place, exact",
	"ibc_mem_free once: OK, then IBC_ERR_INVALID_ARG",
	"ibc_comm_reg_stats: nothing registered, no hooks (transports that register no memory)",
	"a handle left registered: ibc_comm_destroy releases it and returns IBC_OK",
};

static int (*results)[C_NCHECKS];

static float val(int r, size_t i)
{
	return (float)((r + 1) * (int)((i % 11) + 1));
}

static int exact(const float *a, size_t count, int nranks)
{
	size_t i;

	for (i = 0; i < count; i++) {
		float want = 0;
		int r;

		for (r = 0; r < nranks; r++)
			want += val(r, i);
		if (a[i] != want)
			return 0;
	}
	return 1;
}

static int rank_main(int rank, int nranks, void *arg)
{
	int *res = results[rank];
	const size_t count = (1 << 18) + 3;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct ibc_reg_stats rs;
	ibc_comm_h comm;
	void *handle = NULL;
	void *h2 = NULL;
	void *m = NULL;
	float *a;
	float *out;
	float *in;
	size_t i;
	int ok;

	(void)arg;
	if (ibc_comm_init_env(&comm) != IBC_OK)
		return 1;
	res[C_INIT] = 1;
	a = malloc(count * sizeof(float));
	ok = ibc_comm_register(NULL, a, 16, &handle) == IBC_ERR_INVALID_ARG &&
	     ibc_comm_register(comm, NULL, 16, &handle) == IBC_ERR_INVALID_ARG &&
	     ibc_comm_register(comm, a, 16, NULL) == IBC_ERR_INVALID_ARG &&
	     ibc_comm_register(comm, a, 0, &handle) == IBC_ERR_INVALID_ARG && handle == NULL &&
	     ibc_comm_register(comm, a + 100, SIZE_MAX, &handle) == IBC_ERR_INVALID_ARG &&
	     ibc_comm_deregister(comm, &ok) == IBC_ERR_INVALID_ARG &&
	     ibc_comm_deregister(comm, NULL) == IBC_ERR_INVALID_ARG;
	res[C_BAD_ARGS] = ok;
	res[C_REGISTER] = ibc_comm_register(comm, a, count * sizeof(float), &handle) == IBC_OK &&
			  handle != NULL;
	for (i = 0; i < count; i++)
		a[i] = val(rank, i);
	res[C_REG_EXACT] = ibc_allreduce(a, a, count, IBC_FLOAT32, IBC_SUM, comm) == IBC_OK &&
			   exact(a, count, nranks);
	res[C_DEREG_ONCE] = ibc_comm_deregister(comm, handle) == IBC_OK &&
			    ibc_comm_deregister(comm, handle) == IBC_ERR_INVALID_ARG;

	res[C_ALLOC_BAD] = ibc_mem_alloc(NULL, 64) == IBC_ERR_INVALID_ARG &&
			   ibc_mem_alloc(&m, 0) == IBC_ERR_INVALID_ARG && m == NULL &&
			   ibc_mem_free(a) == IBC_ERR_INVALID_ARG && ibc_mem_free(NULL) == IBC_OK;
	ok = ibc_mem_alloc(&m, (3 << 20) + 5) == IBC_OK && m && (uintptr_t)m % pg == 0;
	for (i = 0; ok && i < (3u << 20) + 5; i++)
		ok = ((unsigned char *)m)[i] == 0;
	res[C_ALLOC] = ok;
	if (ok) {
		in = (float *)((char *)m + 4);
		out = in + count;
		for (i = 0; i < count; i++)
			in[i] = val(rank, i);
		res[C_ALLOC_EXACT] = ibc_allreduce(in, out, count, IBC_FLOAT32, IBC_SUM, comm) == IBC_OK &&
				     exact(out, count, nranks);
		res[C_FREE_ONCE] = ibc_mem_free(m) == IBC_OK && ibc_mem_free(m) == IBC_ERR_INVALID_ARG;
	}
	memset(&rs, 0xff, sizeof(rs));
	res[C_STATS] = ibc_comm_reg_stats(comm, &rs) == IBC_OK && rs.registrations == 0 &&
		       rs.hits == 0 && rs.memory_hooks == 0 &&
		       ibc_comm_reg_stats(comm, NULL) == IBC_ERR_INVALID_ARG;
	res[C_LEFT_AT_DESTROY] = ibc_comm_register(comm, a, 4096, &h2) == IBC_OK &&
				 ibc_comm_destroy(comm) == IBC_OK;
	free(a);
	return 0;
}

int main(void)
{
	static const char *const transports[] = { "shm", "tcp" };
	static const int sizes[] = { 1, 2, 3 };
	size_t t;
	size_t k;

	results = fork_ranks_shared(sizeof(int[8][C_NCHECKS]));
	if (!results)
		tap_bail_out("no shared memory for the results");
	for (t = 0; t < 2; t++) {
		setenv("IBC_TRANSPORT", transports[t], 1);
		for (k = 0; k < 3; k++) {
			int n = sizes[k];
			int codes[8];
			int c;
			int r;
			int ran;

			memset(results, 0, sizeof(int[8][C_NCHECKS]));
			ran = fork_ranks(n, 120, rank_main, NULL, codes) == 0;
			tap_ok(ran, "%s, %d ranks: every rank exits 0", transports[t], n);
			for (c = 0; c < C_NCHECKS; c++) {
				int all = 1;

				for (r = 0; r < n; r++)
					all &= results[r][c];
				tap_ok(all, "%s, %d ranks: %s", transports[t], n, check_name[c]);
			}
		}
	}
	return tap_done();
}
