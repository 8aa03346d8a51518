/* SPDX-License-Identifier: MIT */
/*
 * hostile_check.c - the hostile inputs of issue 20 that one process per
 * rank can try on itself, with the status and the text checked:
 *   overlap   every collective with recvbuf = sendbuf +/- one element (and
 *             the other partial overlaps its in-place form is not) is
 *             refused with IBC_ERR_INVALID_ARG naming the overlap; the
 *             exact in-place forms give exact results (300k + 3 elements);
 *   stale     a destroyed communicator's handle, after a new one was made
 *             (the allocator may give it the same address), is refused
 *             with IBC_ERR_INVALID_USAGE; the new one works;
 *   limit     IBC_MAX_REQUESTS nonblocking all-reduces are taken, the
 *             next is refused with IBC_ERR_LIMIT at the same call on every
 *             rank (ranks issue at different speeds), the communicator
 *             stays usable (waits, then exact results, then more requests);
 *   align     a float64 reduction on a buffer at a byte offset of 1..7 is
 *             refused (IBC_ERR_INVALID_ARG, "aligned"); a broadcast of such
 *             a buffer moves exact bytes;
 *   fork      a forked child's all-reduce, split and destroy of the
 *             parent's communicator fail at once (IBC_ERR_INVALID_USAGE,
 *             "fork") and touch nothing: the parent's next calls are exact;
 *   scratch   an out-of-place reduce-scatter of 1 MiB per rank keeps its
 *             scratch under one block (none on 2 ranks), in place under two;
 *   badbuf    a broadcast into one rank's read-only buffer: that rank's
 *             error names its own buffer (shm), no hang;
 *   texts     an error on a split communicator names the world rank and
 *             the communicator; a bad dtype gives one line with its value;
 *             a unique id used twice fails saying an id serves one
 *             creation (run with a short IBC_BOOTSTRAP_TIMEOUT_MS), and
 *             that failed init leaves no stale rank for later errors.
 * Prints "rank R: PASS: <pattern>" or "rank R: FAIL: ..." and exits 1 on a
 * failure. Inputs are small integers, so sums are exact.
 *
 * usage: hostile_check [PATTERN...]   (IBC_RANK/IBC_NRANKS/IBC_ROOT or mpirun)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "ibcoll.h"

static int rank;
static int nranks;
static int failed;

#define CHECK(cond, ...)                                                                       \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			printf("rank %d: FAIL: %s:%d: ", rank, __FILE__, __LINE__);            \
			printf(__VA_ARGS__);                                                   \
			printf("\n");                                                          \
			fflush(stdout);                                                        \
			failed = 1;                                                            \
			return 1;                                                              \
		}                                                                              \
	} while (0)

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

/* a refused call: @st is @want and ibc_last_error() holds @text */
static int refused(ibc_status_t st, ibc_status_t want, const char *text, const char *what)
{
	if (st == want && strstr(ibc_last_error(), text))
		return 1;
	printf("rank %d: FAIL: %s: %s (want %s), text '%s' (want '%s')\n", rank, what,
	       ibc_status_str(st), ibc_status_str(want), ibc_last_error(), text);
	return 0;
}

/* ---- overlap ---------------------------------------------------------------- */

static int t_overlap(ibc_comm_h comm)
{
	size_t n = 300003;
	size_t nb = (size_t)nranks;
	int32_t *big = xmalloc((2 * n * nb + 4) * sizeof(int32_t));
	int32_t *b = big + 2;
	size_t i;
	int ok = 1;

	memset(big, 0, (2 * n * nb + 4) * sizeof(int32_t));
	/* partial overlaps: one element either way */
	ok &= refused(ibc_allreduce(b, b + 1, n, IBC_INT32, IBC_SUM, comm), IBC_ERR_INVALID_ARG,
		      "overlap", "allreduce recvbuf = sendbuf + 1");
	ok &= refused(ibc_allreduce(b + 1, b, n, IBC_INT32, IBC_SUM, comm), IBC_ERR_INVALID_ARG,
		      "overlap", "allreduce recvbuf = sendbuf - 1");
	ok &= refused(ibc_reduce(b, b + 1, n, IBC_INT32, IBC_SUM, rank, comm), IBC_ERR_INVALID_ARG,
		      "overlap", "reduce on its root");
	ok &= refused(ibc_broadcast(b, b + 1, n, IBC_INT32, rank, comm), IBC_ERR_INVALID_ARG,
		      "overlap", "broadcast on its root");
	if (nranks > 1) {
		/* one element off the in-place address, refused on every rank alike */
		ok &= refused(ibc_allgather(b + (size_t)rank * n + 1, b, n, IBC_INT32, comm),
			      IBC_ERR_INVALID_ARG, "overlap", "allgather sendbuf = in place + 1");
		ok &= refused(ibc_reduce_scatter(b, b + (size_t)rank * n + 1, n, IBC_INT32, IBC_SUM, comm),
			      IBC_ERR_INVALID_ARG, "overlap", "reduce_scatter recvbuf = in place + 1");
		ok &= refused(ibc_alltoall(b, b + 1, n, IBC_INT32, comm), IBC_ERR_INVALID_ARG, "overlap",
			      "alltoall");
		ok &= refused(ibc_gather(b + 1, b, n, IBC_INT32, rank, comm), IBC_ERR_INVALID_ARG,
			      "overlap", "gather on its root");
		ok &= refused(ibc_scatter(b, b + 1, n, IBC_INT32, rank, comm), IBC_ERR_INVALID_ARG,
			      "overlap", "scatter on its root");
	}
	if (!ok) {
		failed = 1;
		free(big);
		return 1;
	}
	/* the exact in-place forms: exact results */
	for (i = 0; i < n; i++)
		b[i] = (int32_t)(rank + 1) * (int32_t)(i % 1000);
	CHECK(ibc_allreduce(b, b, n, IBC_INT32, IBC_SUM, comm) == IBC_OK, "in-place allreduce: %s",
	      ibc_last_error());
	for (i = 0; i < n; i++)
		CHECK(b[i] == (int32_t)(nranks * (nranks + 1) / 2) * (int32_t)(i % 1000),
		      "in-place allreduce [%zu] = %d", i, (int)b[i]);
	for (i = 0; i < n; i++)
		b[(size_t)rank * n + i] = rank * 7 + (int32_t)(i % 13);
	CHECK(ibc_allgather(b + (size_t)rank * n, b, n, IBC_INT32, comm) == IBC_OK,
	      "in-place allgather: %s", ibc_last_error());
	for (i = 0; i < n * nb; i++)
		CHECK(b[i] == (int32_t)(i / n) * 7 + (int32_t)(i % n % 13), "in-place allgather [%zu] = %d",
		      i, (int)b[i]);
	for (i = 0; i < n * nb; i++)
		b[i] = (int32_t)(i % 101);
	CHECK(ibc_reduce_scatter(b, b + (size_t)rank * n, n, IBC_INT32, IBC_SUM, comm) == IBC_OK,
	      "in-place reduce_scatter: %s", ibc_last_error());
	for (i = 0; i < n; i++)
		CHECK(b[(size_t)rank * n + i] == nranks * (int32_t)(((size_t)rank * n + i) % 101),
		      "in-place reduce_scatter [%zu] = %d", i, (int)b[(size_t)rank * n + i]);
	free(big);
	return 0;
}

/* ---- stale handles ---------------------------------------------------------- */

static int t_stale(ibc_comm_h world)
{
	ibc_comm_h a = NULL;
	ibc_comm_h b = NULL;
	int32_t x = 1;
	int k;

	for (k = 0; k < 3; k++) {
		CHECK(ibc_comm_split(world, 0, rank, &a) == IBC_OK && a, "split: %s", ibc_last_error());
		CHECK(ibc_comm_destroy(a) == IBC_OK, "destroy: %s", ibc_last_error());
		CHECK(ibc_comm_split(world, 0, rank, &b) == IBC_OK && b, "split again: %s",
		      ibc_last_error());
		CHECK(a != b, "a new communicator got the destroyed one's handle");
		if (!refused(ibc_allreduce(&x, &x, 1, IBC_INT32, IBC_SUM, a), IBC_ERR_INVALID_USAGE,
			     "destroyed", "allreduce on a destroyed handle")) {
			failed = 1;
			return 1;
		}
		if (!refused(ibc_comm_destroy(a), IBC_ERR_INVALID_USAGE, "destroyed",
			     "destroy of a destroyed handle")) {
			failed = 1;
			return 1;
		}
		x = 1;
		CHECK(ibc_allreduce(&x, &x, 1, IBC_INT32, IBC_SUM, b) == IBC_OK && x == nranks,
		      "the new communicator: %s, %d", ibc_last_error(), (int)x);
		CHECK(ibc_comm_destroy(b) == IBC_OK, "destroy: %s", ibc_last_error());
	}
	return 0;
}

/* ---- the request limit ------------------------------------------------------ */

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

static int t_limit(ibc_comm_h comm)
{
	long max = atol(getenv("IBC_MAX_REQUESTS") ? getenv("IBC_MAX_REQUESTS") : "1024");
	int nreq = (int)max + 8;
	ibc_request_h *reqs = xmalloc(sizeof(*reqs) * (size_t)nreq);
	int32_t *v = xmalloc(sizeof(int32_t) * (size_t)nreq);
	int accepted = -1;
	int i;
	ibc_status_t st = IBC_OK;

	CHECK(max >= 2 && max <= 4096, "run with IBC_MAX_REQUESTS between 2 and 4096 (%ld)", max);
	for (i = 0; i < nreq; i++) {
		v[i] = i;
		/* ranks issue at different speeds: the count must not depend on it */
		if (rank % 2)
			sleep_us(200);
		st = ibc_iallreduce(&v[i], &v[i], 1, IBC_INT32, IBC_SUM, comm, &reqs[i]);
		if (st != IBC_OK) {
			accepted = i;
			break;
		}
	}
	CHECK(accepted == (int)max, "accepted %d requests, IBC_MAX_REQUESTS is %ld (%s)", accepted, max,
	      ibc_status_str(st));
	if (!refused(st, IBC_ERR_LIMIT, "stays usable", "the request past IBC_MAX_REQUESTS")) {
		failed = 1;
		return 1;
	}
	/* the communicator works: one more after one wait, then everything exact */
	CHECK(ibc_wait(reqs[0]) == IBC_OK, "wait 0: %s", ibc_last_error());
	CHECK(ibc_iallreduce(&v[accepted], &v[accepted], 1, IBC_INT32, IBC_SUM, comm,
			     &reqs[accepted]) == IBC_OK,
	      "a request after a wait: %s", ibc_last_error());
	for (i = 1; i <= accepted; i++)
		CHECK(ibc_wait(reqs[i]) == IBC_OK, "wait %d: %s", i, ibc_last_error());
	for (i = 0; i <= accepted; i++)
		CHECK(v[i] == i * nranks, "request %d: %d, want %d", i, (int)v[i], i * nranks);
	free(reqs);
	free(v);
	return 0;
}

/* ---- alignment ---------------------------------------------------------------- */

static int t_align(ibc_comm_h comm)
{
	size_t n = 1001;
	char *raw = xmalloc(n * 8 + 64);
	int off;

	for (off = 1; off < 8; off++) {
		char *p = raw + (64 - ((uintptr_t)raw % 64)) % 64 + off;
		float f;
		size_t i;

		/* float64: offsets 1..7 are all inside an element */
		if (!refused(ibc_allreduce(p, p, n / 2, IBC_FLOAT64, IBC_SUM, comm), IBC_ERR_INVALID_ARG,
			     "aligned", "allreduce of a misaligned float64 buffer") ||
		    !refused(ibc_reduce_scatter(p, raw, 1, IBC_FLOAT64, IBC_SUM, comm),
			     IBC_ERR_INVALID_ARG, "aligned", "reduce_scatter of a misaligned float64 buffer")) {
			failed = 1;
			free(raw);
			return 1;
		}
		for (i = 0; i < n; i++) {
			f = rank == 0 ? (float)(i + (size_t)off) : -1.0f;
			memcpy(p + i * 4, &f, 4);
		}
		CHECK(ibc_broadcast(p, p, n, IBC_FLOAT32, 0, comm) == IBC_OK, "broadcast at +%d: %s",
		      off, ibc_last_error());
		for (i = 0; i < n; i++) {
			memcpy(&f, p + i * 4, 4);
			CHECK(f == (float)(i + (size_t)off), "broadcast at +%d [%zu] = %g", off, i, f);
		}
	}
	free(raw);
	return 0;
}

/* ---- fork ----------------------------------------------------------------------- */

static int t_fork(ibc_comm_h comm)
{
	int32_t x = rank + 1;
	int status = 0;
	pid_t pid;

	pid = fork();
	CHECK(pid >= 0, "fork failed");
	if (pid == 0) {
		ibc_comm_h nc = NULL;
		int32_t y = 5;
		int bad = 0;

		bad |= ibc_allreduce(&y, &y, 1, IBC_INT32, IBC_SUM, comm) != IBC_ERR_INVALID_USAGE ||
		       !strstr(ibc_last_error(), "fork");
		bad |= (ibc_comm_split(comm, 0, 0, &nc) != IBC_ERR_INVALID_USAGE) << 1;
		bad |= (ibc_comm_destroy(comm) != IBC_ERR_INVALID_USAGE) << 2;
		bad |= (ibc_comm_abort(comm) != IBC_ERR_INVALID_USAGE) << 3;
		bad |= (y != 5) << 4;
		_exit(bad);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child's calls on the parent's communicator were not all refused (mask 0x%x)",
	      WIFEXITED(status) ? WEXITSTATUS(status) : 0xff);
	CHECK(ibc_allreduce(&x, &x, 1, IBC_INT32, IBC_SUM, comm) == IBC_OK &&
	      x == nranks * (nranks + 1) / 2,
	      "the parent after the child: %s, %d", ibc_last_error(), (int)x);
	CHECK(ibc_barrier(comm) == IBC_OK, "barrier after the child: %s", ibc_last_error());
	return 0;
}

/* ---- scratch of the ring reduce-scatter ----------------------------------------- */

static int t_scratch(ibc_comm_h comm)
{
	size_t rc = 262144; /* 1 MiB of float32 per rank */
	size_t block = rc * 4;
	float *s = xmalloc(block * (size_t)nranks);
	float *r = xmalloc(block);
	struct ibc_comm *c = ibc_comm_from_handle(comm);
	size_t before;
	size_t i;
	int pass;

	CHECK(c, "no communicator behind the handle");
	for (pass = 0; pass < 2; pass++) {
		float *out = pass ? s + (size_t)rank * rc : r;

		for (i = 0; i < rc * (size_t)nranks; i++)
			s[i] = (float)(i % 77);
		before = c->coll.scratch_nbytes;
		CHECK(ibc_reduce_scatter(s, out, rc, IBC_FLOAT32, IBC_SUM, comm) == IBC_OK,
		      "reduce_scatter: %s", ibc_last_error());
		for (i = 0; i < rc; i++)
			CHECK(out[i] == (float)(nranks * (int)(((size_t)rank * rc + i) % 77)),
			      "reduce_scatter%s [%zu] = %g", pass ? " in place" : "", i, out[i]);
		/* the chunk window is small; a full block more means the second copy */
		if (nranks > 1) {
			size_t limit = pass ? 2 * block + (1u << 20) : (nranks > 2 ? block : 0) + (1u << 20);

			CHECK(c->coll.scratch_nbytes <= IBC_MAX(limit, before),
			      "%s reduce-scatter of %zu bytes per rank: scratch %zu bytes (limit %zu)",
			      pass ? "in-place" : "out-of-place", block, c->coll.scratch_nbytes, limit);
		}
	}
	free(s);
	free(r);
	return 0;
}

/* ---- texts ---------------------------------------------------------------------- */

static int t_texts(ibc_comm_h world)
{
	ibc_comm_h sub = NULL;
	int32_t x = 0;
	char want[64];
	ibc_unique_id_t id;

	/* a split in reverse rank order: local rank != world rank */
	CHECK(ibc_comm_split(world, 0, nranks - rank, &sub) == IBC_OK && sub, "split: %s",
	      ibc_last_error());
	CHECK(ibc_broadcast(&x, &x, 1, IBC_INT32, nranks + 5, sub) == IBC_ERR_INVALID_ARG,
	      "bad root on the split communicator accepted");
	snprintf(want, sizeof(want), "world rank %d, communicator ", rank);
	CHECK(strstr(ibc_last_error(), want) && !strncmp(ibc_last_error(), "rank ", 5),
	      "the split communicator's error does not name the world rank: '%s'", ibc_last_error());
	CHECK(ibc_comm_destroy(sub) == IBC_OK, "destroy: %s", ibc_last_error());
	/* a bad dtype: one line, with the value (the log file is checked by the script) */
	CHECK(ibc_allreduce(&x, &x, 1, (ibc_dtype_t)99, IBC_SUM, world) == IBC_ERR_INVALID_ARG &&
	      strstr(ibc_last_error(), "invalid dtype 99"),
	      "bad dtype: '%s'", ibc_last_error());
	/*
	 * A unique id used twice: the second init fails (within
	 * IBC_BOOTSTRAP_TIMEOUT_MS) saying that an id serves one creation; an
	 * error after that failed init carries no stale rank
	 */
	{
		ibc_comm_h one = NULL;
		size_t sz;

		CHECK(ibc_get_unique_id(&id) == IBC_OK, "unique id: %s", ibc_last_error());
		CHECK(ibc_comm_init_rank(&one, 1, &id, 0) == IBC_OK, "1-rank init: %s", ibc_last_error());
		CHECK(ibc_comm_destroy(one) == IBC_OK, "destroy: %s", ibc_last_error());
		CHECK(ibc_comm_init_rank(&one, 1, &id, 0) != IBC_OK, "an id worked twice");
		CHECK(strstr(ibc_last_error(), "unique id serves one communicator creation"),
		      "the reused id's error gives no hint: '%s'", ibc_last_error());
		CHECK(ibc_dtype_size((ibc_dtype_t)77, &sz) == IBC_ERR_INVALID_ARG, "dtype 77 has a size");
		CHECK(strncmp(ibc_last_error(), "rank ", 5) != 0,
		      "an error after a failed init carries a rank: '%s'", ibc_last_error());
	}
	return 0;
}

/* ---- badbuf ---------------------------------------------------------------- */

/*
 * Rank 1 receives a broadcast of 256 KiB from rank 0 into a read-only
 * buffer, on a communicator split off for it (its error poisons that one
 * only). Over shm with private buffers the call goes by cross-memory attach
 * (IBC_SHM_SINGLE_CMA_MIN_BYTES): rank 1's process_vm_readv fails with
 * EFAULT, and the error must name rank 1's own buffer, not rank 0's input
 * (IBC_ERR_INVALID_ARG); every other rank fails (not a hang, not success).
 * Other transports fail on rank 1 in their own words, and a rank that
 * does not receive through rank 1 may succeed: only rank 1's failure is
 * checked there.
 */
static int t_badbuf(ibc_comm_h world)
{
	const size_t nb = 256 << 10;
	const char *tp = getenv("IBC_TRANSPORT");
	int shm = tp && !strcmp(tp, "shm");
	ibc_comm_h sub = NULL;
	unsigned char *in = xmalloc(nb);
	unsigned char *ro;
	ibc_status_t st;
	int bad = 0;

	if (nranks < 2) {
		free(in);
		return 0;
	}
	ro = mmap(NULL, nb, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED, "mmap: %s", strerror(errno));
	memset(in, 7, nb);
	CHECK(ibc_comm_split(world, 0, rank, &sub) == IBC_OK && sub, "split: %s", ibc_last_error());
	st = ibc_broadcast(in, rank == 1 ? (void *)ro : (void *)in, nb, IBC_UINT8, 0, sub);
	if (rank == 1) {
		if (shm && !refused(st, IBC_ERR_INVALID_ARG, "this rank's buffer", "read-only recvbuf"))
			bad = failed = 1;
		CHECK(st != IBC_OK, "a broadcast into a read-only buffer succeeded");
	} else if (shm && (rank != 0 || st != IBC_OK)) {
		/* the root may be done before rank 1 reads; every other rank waits for rank 1 */
		CHECK(st != IBC_OK, "rank %d: the broadcast succeeded though rank 1 failed", rank);
		CHECK(strstr(ibc_last_error(), "rank 1"),
		      "the error does not name rank 1: '%s'", ibc_last_error());
	}
	ibc_comm_destroy(sub);
	munmap(ro, nb);
	free(in);
	return bad;
}

static const struct {
	const char *name;
	int (*fn)(ibc_comm_h);
} patterns[] = {
	{ "overlap", t_overlap }, { "stale", t_stale },     { "limit", t_limit },
	{ "align", t_align },     { "fork", t_fork },       { "scratch", t_scratch },
	{ "texts", t_texts },     { "badbuf", t_badbuf },
};

int main(int argc, char **argv)
{
	ibc_comm_h comm = NULL;
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
		int want = argc < 2;

		for (a = 1; a < argc; a++)
			want |= !strcmp(argv[a], patterns[p].name);
		if (!want)
			continue;
		if (patterns[p].fn(comm) == 0)
			printf("rank %d: PASS: %s\n", rank, patterns[p].name);
		/* the next pattern starts together, and after a failure the rest still run */
		if (ibc_barrier(comm) != IBC_OK) {
			printf("rank %d: FAIL: barrier after %s: %s\n", rank, patterns[p].name,
			       ibc_last_error());
			failed = 1;
			break;
		}
	}
	if (ibc_comm_destroy(comm) != IBC_OK) {
		printf("rank %d: FAIL: destroy: %s\n", rank, ibc_last_error());
		failed = 1;
	}
	return failed;
}
