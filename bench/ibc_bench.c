/* SPDX-License-Identifier: MIT */
/*
 * ibc_bench - bus bandwidth of ibcoll's collectives against message size,
 * in the manner of nccl-tests, optionally side by side with Open MPI in the
 * same processes (--vs-mpi). This file uses the public API only
 * (<ibcoll.h>); pure helpers live in bench_common.c and bench_data.c, the MPI
 * side in bench_mpi.c (or its stub), and --tune FILE (time every algorithm
 * and protocol, fit the tuner's coefficients, append them to an
 * IBC_TUNING_FILE) in bench_tune.c, the one part that uses the library's
 * internal tuner API. Run `ibc_bench -h` for the options; bench/RESULTS.md
 * has measured tables and the exact commands.
 *
 * Launch like any ibcoll job: IBC_RANK/IBC_NRANKS/IBC_ROOT per process, or
 * mpirun -x IBC_ROOT=host:port (with --vs-mpi, IBC_ROOT may be omitted: rank
 * 0 then makes a unique id and MPI_Bcast hands it out). Rank 0 prints.
 *
 * Method per row: fill the inputs, -w warm-up calls, then for each of the
 * -R rounds a barrier and -n timed calls of ibcoll and (with --vs-mpi) a
 * barrier and -n timed calls of MPI, alternating which goes first. A rank's
 * time is its mean over all timed calls; the row shows the mean over ranks
 * (nccl-tests' default) and the fastest and slowest ranks. With -c 1 the
 * receive buffer is then poisoned, one more call runs, and every element is
 * compared with its exact expected value.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ibcoll.h"
#include "bench_common.h"
#include "bench_launch.h"
#include "bench_mpi.h"
#include "bench_tune.h"

#define BENCH_HOST_BYTES 64

/* enum bench_stat - per-rank numbers gathered after each row */
enum bench_stat {
	STAT_TIME = 0,          /* mean us per ibcoll call */
	STAT_MTIME,             /* mean us per MPI call */
	STAT_CPU,               /* process CPU us per ibcoll call */
	STAT_MCPU,              /* process CPU us per MPI call */
	STAT_WRONG,             /* wrong elements, ibcoll */
	STAT_MWRONG,            /* wrong elements, MPI */
	BENCH_NSTAT
};
#define BENCH_BATCH 256         /* nonblocking calls in flight before ibc_waitall */

struct bench_opts {
	int colls[BENCH_COLL_COUNT];
	int ncolls;
	uint64_t min_bytes;
	uint64_t max_bytes;
	uint64_t factor;        /* -f: multiply when > 1 */
	uint64_t step;          /* -i: else add */
	uint64_t iters;
	uint64_t warmup;
	uint64_t rounds;
	int check;
	ibc_dtype_t dtype;
	ibc_redop_t op;
	int root;
	int blocking;           /* -z 1: blocking calls; 0: nonblocking, waited per batch */
	const char *algo;
	const char *transport;
	const char *csv;
	const char *json;
	int vs_mpi;
	int mem_alloc;  /* --mem-alloc: buffers from ibc_mem_alloc() */
	int local;              /* --local N given */
	const char *tune;       /* --tune FILE */
	int sizes_set;          /* -b, -e, -f or -i given */
	int rounds_set;         /* -R given */
};

/* struct bench_row - one line of output, already summarised over ranks */
struct bench_row {
	int coll;
	struct bench_sizes sz;
	struct bench_rank_stats t;      /* ibcoll time per call, us */
	double algbw;                   /* GB/s, from t.mean */
	double busbw;
	double cpu_us;                  /* process CPU time per call, mean over ranks */
	uint64_t wrong;                 /* summed over ranks; 0 when not checked */
	int mpi;                        /* the MPI columns are valid */
	const char *mpi_why;            /* else why not (NULL: --vs-mpi not given) */
	struct bench_rank_stats mt;
	double malgbw;
	double mbusbw;
	double mcpu_us;
	uint64_t mwrong;
	double floor_us;                /* bench_floor_us(); 0: none */
};

struct bench_ctx {
	struct bench_opts o;
	ibc_comm_h comm;
	int rank;
	int nranks;
	int mpi;                        /* MPI initialised */
	char *sendbuf;
	char *recvbuf;
	size_t send_cap;
	size_t recv_cap;
	char *hosts;                    /* [nranks][BENCH_HOST_BYTES] */
	int nhosts;
	const char *transport;
	double *gather;                 /* [nranks][BENCH_NSTAT], enum bench_stat */
	double *tvals;                  /* [nranks] scratch for the statistics */
	ibc_request_h reqs[2 * BENCH_BATCH];
	FILE *csv;
	FILE *json;
	int json_rows;
	uint64_t wrong_total;
	double copy_GBps;               /* rank 0's one-core memcpy rate (measure_floor()) */
	int nlocal;                     /* ranks on rank 0's host */
	int ncores;                     /* CPUs rank 0 may run on */
};

static struct bench_ctx *g_ctx;         /* for bench_die() */

static void usage(FILE *f)
{
	fprintf(f,
"usage: ibc_bench [COLLECTIVE|all] [options]    (or --coll NAME)\n"
"collectives: allreduce broadcast reduce allgather reduce_scatter alltoall sendrecv barrier\n"
"  -b BYTES   smallest size (K/M/G suffix, powers of 1024)     [32M]\n"
"  -e BYTES   largest size                                       [32M]\n"
"  -f N       multiply the size by N each step (when N > 1)      [1]\n"
"  -i BYTES   else add BYTES each step                           [1M]\n"
"  -n N       timed iterations per size and round                [20]\n"
"  -w N       warm-up iterations per size                        [5]\n"
"  -R N       rounds per size (ibcoll and MPI alternate)         [1]\n"
"  -c 0|1     check results: exact expected values               [1]\n"
"  -o OP      sum prod min max avg                               [sum]\n"
"  -d TYPE    int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double [float]\n"
"  -r ROOT    root of broadcast and reduce                       [0]\n"
"  -z 0|1     1: blocking calls; 0: nonblocking calls, waited in batches of %d [1]\n"
"  -a ALGO    auto ring tree rd rabenseifner shm (sets IBC_ALGO)  [auto: the tuner]\n"
"  -t TRANS   transport: auto shm tcp ib (sets IBC_TRANSPORT)     [auto]\n"
"  --csv FILE, --json FILE   machine-readable results (rank 0 writes)\n"
"  --vs-mpi   time the matching MPI collective on the same buffers (launch with mpirun)%s\n"
"  --local N  start N ranks on this host by itself (no mpirun; IBC_ROOT on a free port)\n"
"  --mem-alloc  buffers from ibc_mem_alloc() (a trainer's registered memory; on one host the\n"
"             shm all-reduce maps the peers' buffers and reduces straight between them)\n"
"  --tune FILE  time every algorithm and protocol of allreduce, broadcast, reduce\n"
"             (float sum; sizes -b..-e, default 8 B to 64 MiB x 8; -R repetitions, median,\n"
"             default 5), fit the tuner's coefficients and append them to FILE, the\n"
"             format IBC_TUNING_FILE loads (docs/algorithms.md); no result check\n"
"  -h         this help\n"
"Sizes follow nccl-tests: allgather's size is its output, reduce_scatter's its input,\n"
"alltoall's the whole buffer; busbw = algbw * 2(n-1)/n (allreduce), (n-1)/n (allgather,\n"
"reduce_scatter, alltoall), 1 (broadcast, reduce, sendrecv); 1 GB = 1e9 bytes.\n",
		BENCH_BATCH,
		bench_mpi_built() ? "" : "\n             (not available: built without MPI)");
}

/* the launcher's rank before the communicator exists, -1 if unknown */
static int env_rank(void)
{
	const char *r = getenv("IBC_RANK");

	if (!r)
		r = getenv("OMPI_COMM_WORLD_RANK");
	return r ? atoi(r) : -1;
}

static int env_rank0(void)
{
	return env_rank() <= 0;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	if (env_rank0()) {
		fprintf(stderr, "ibc_bench: ");
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fprintf(stderr, "\n");
		usage(stderr);
	}
	return -1;
}

static int parse_u64(const char *s, uint64_t *v_p)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*v_p = v;
	return 0;
}

static int add_coll(struct bench_opts *o, const char *name)
{
	int c;

	if (!strcmp(name, "all")) {
		for (c = 0; c < BENCH_COLL_COUNT; c++)
			o->colls[c] = c;
		o->ncolls = BENCH_COLL_COUNT;
		return 0;
	}
	if (bench_coll_parse(name, &c) != 0)
		return usage_error("unknown collective '%s'", name);
	if (o->ncolls < BENCH_COLL_COUNT)
		o->colls[o->ncolls++] = c;
	return 0;
}

/* --tune: check and complete the options (float sum, tunable collectives) */
static int tune_opts(struct bench_opts *o)
{
	uint64_t b;
	int n = 0;
	int k;

	for (k = 0; k < o->ncolls; k++)
		if (o->colls[k] != BENCH_ALLREDUCE && o->colls[k] != BENCH_BROADCAST &&
		    o->colls[k] != BENCH_REDUCE)
			return usage_error("--tune: the tuner decides for allreduce, broadcast and "
					   "reduce only, not %s",
					   bench_coll_name(o->colls[k]));
	if (o->algo || o->vs_mpi || o->csv || o->json)
		return usage_error("--tune times every algorithm itself: no -a, --vs-mpi, --csv or "
				   "--json");
	if (!o->sizes_set) {
		o->min_bytes = 8;
		o->max_bytes = 64ULL << 20;
		o->factor = 8;
	}
	if (o->min_bytes < 4 || o->min_bytes > o->max_bytes)
		return usage_error("--tune: sizes from -b >= 4 to -e >= -b");
	for (b = o->min_bytes; b; b = bench_next_size(b, o->max_bytes, o->factor, o->step))
		n++;
	if (n > BENCH_TUNE_MAX_SIZES)
		return usage_error("--tune: %d sizes, at most %d", n, BENCH_TUNE_MAX_SIZES);
	if (!o->rounds_set)
		o->rounds = 5;
	if (o->rounds > BENCH_TUNE_MAX_REPS)
		return usage_error("--tune: -R at most %d", BENCH_TUNE_MAX_REPS);
	o->dtype = IBC_FLOAT32;
	o->op = IBC_SUM;
	o->root = 0;
	return 0;
}

/*
 * Sizes are measured in whole elements (bench_coll_sizes() rounds down): say
 * so once on stderr when the sweep holds a size that is not a multiple of
 * the element size, so that a 6-byte float request measuring 4 bytes is not
 * a surprise. Only the first few thousand sizes are looked at (a longer
 * sweep is not practical to run anyway). Rank 0 (or a lone process) only.
 */
static void note_rounding(const struct bench_opts *o)
{
	uint64_t first = 0;
	uint64_t b;
	size_t esz = 0;
	int nsizes = 0;
	int noff = 0;
	int sized = 0;
	int k;

	for (k = 0; k < o->ncolls; k++)
		if (o->colls[k] != BENCH_BARRIER)
			sized = 1;
	if (!sized || o->local || !env_rank0())
		return;         /* barrier only: no size; --local: the ranks say it */
	if (ibc_dtype_size(o->dtype, &esz) != IBC_OK || esz <= 1)
		return;
	for (b = o->min_bytes; b && nsizes < 4096;
	     b = bench_next_size(b, o->max_bytes, o->factor, o->step), nsizes++) {
		if (b % esz == 0)
			continue;
		if (!noff++)
			first = b;
	}
	if (!noff)
		return;
	if (noff == 1 && first == o->min_bytes)
		fprintf(stderr, "ibc_bench: -b %" PRIu64 " is not a multiple of the %zu-byte %s; "
			"measuring %" PRIu64 " bytes\n",
			first, esz, bench_dtype_name(o->dtype), first / esz * esz);
	else
		fprintf(stderr, "ibc_bench: %d sizes are not a multiple of the %zu-byte %s and are "
			"rounded down to whole elements (%" PRIu64 " bytes measures %" PRIu64 ")\n",
			noff, esz, bench_dtype_name(o->dtype), first, first / esz * esz);
}

static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
	enum { OPT_CSV = 256, OPT_JSON, OPT_VS_MPI, OPT_COLL, OPT_LOCAL, OPT_TUNE, OPT_MEM_ALLOC };
	static const struct option longopts[] = {
		{ "csv", required_argument, NULL, OPT_CSV },
		{ "json", required_argument, NULL, OPT_JSON },
		{ "vs-mpi", no_argument, NULL, OPT_VS_MPI },
		{ "mem-alloc", no_argument, NULL, OPT_MEM_ALLOC },
		{ "coll", required_argument, NULL, OPT_COLL },
		{ "local", required_argument, NULL, OPT_LOCAL },
		{ "tune", required_argument, NULL, OPT_TUNE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int ch;

	memset(o, 0, sizeof(*o));
	o->min_bytes = o->max_bytes = 32ULL << 20;
	o->factor = 1;
	o->step = 1ULL << 20;
	o->iters = 20;
	o->warmup = 5;
	o->rounds = 1;
	o->check = 1;
	o->dtype = IBC_FLOAT32;
	o->op = IBC_SUM;
	o->blocking = 1;
	while ((ch = getopt_long(argc, argv, "b:e:f:i:n:w:R:c:o:d:r:z:a:t:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'b':
			if (bench_parse_bytes(optarg, &o->min_bytes))
				return usage_error("bad size '%s' for -b", optarg);
			o->sizes_set = 1;
			break;
		case 'e':
			if (bench_parse_bytes(optarg, &o->max_bytes))
				return usage_error("bad size '%s' for -e", optarg);
			o->sizes_set = 1;
			break;
		case 'f':
			if (parse_u64(optarg, &o->factor) || o->factor == 0)
				return usage_error("bad factor '%s' for -f", optarg);
			o->sizes_set = 1;
			break;
		case 'i':
			if (bench_parse_bytes(optarg, &o->step))
				return usage_error("bad step '%s' for -i", optarg);
			o->sizes_set = 1;
			break;
		case 'n':
			if (parse_u64(optarg, &o->iters) || o->iters == 0)
				return usage_error("bad iteration count '%s' for -n", optarg);
			break;
		case 'w':
			if (parse_u64(optarg, &o->warmup))
				return usage_error("bad warm-up count '%s' for -w", optarg);
			break;
		case 'R':
			if (parse_u64(optarg, &o->rounds) || o->rounds == 0)
				return usage_error("bad round count '%s' for -R", optarg);
			o->rounds_set = 1;
			break;
		case 'c':
			if (parse_u64(optarg, &v) || v > 1)
				return usage_error("-c takes 0 or 1, not '%s'", optarg);
			o->check = (int)v;
			break;
		case 'o':
			if (bench_op_parse(optarg, &o->op))
				return usage_error("unknown op '%s'", optarg);
			break;
		case 'd':
			if (bench_dtype_parse(optarg, &o->dtype))
				return usage_error("unknown dtype '%s'", optarg);
			break;
		case 'r':
			if (parse_u64(optarg, &v) || v > 1000000)
				return usage_error("bad root '%s'", optarg);
			o->root = (int)v;
			break;
		case 'z':
			if (parse_u64(optarg, &v) || v > 1)
				return usage_error("-z takes 0 or 1, not '%s'", optarg);
			o->blocking = (int)v;
			break;
		case 'a':
			/* the library would WARN and use the tuner: refuse instead */
			if (strcmp(optarg, "auto") && strcmp(optarg, "ring") && strcmp(optarg, "tree") &&
			    strcmp(optarg, "rd") && strcmp(optarg, "rabenseifner") &&
			    strcmp(optarg, "shm"))
				return usage_error("unknown algorithm '%s' (auto, ring, tree, rd, "
						   "rabenseifner or shm)",
						   optarg);
			o->algo = optarg;
			break;
		case 't':
			if (strcmp(optarg, "auto") && strcmp(optarg, "shm") && strcmp(optarg, "tcp") &&
			    strcmp(optarg, "ib"))
				return usage_error("unknown transport '%s' (auto, shm, tcp or ib)", optarg);
			o->transport = optarg;
			break;
		case OPT_CSV:
			o->csv = optarg;
			break;
		case OPT_JSON:
			o->json = optarg;
			break;
		case OPT_VS_MPI:
			o->vs_mpi = 1;
			break;
		case OPT_MEM_ALLOC:
			o->mem_alloc = 1;
			break;
		case OPT_COLL:
			if (add_coll(o, optarg))
				return -1;
			break;
		case OPT_LOCAL:
			o->local = 1;  /* handled in main(), before anything else */
			break;
		case OPT_TUNE:
			o->tune = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			if (env_rank0())
				usage(stderr);
			return -1;
		}
	}
	for (; optind < argc; optind++)
		if (add_coll(o, argv[optind]))
			return -1;
	if (!o->ncolls)
		o->colls[o->ncolls++] = BENCH_ALLREDUCE;
	if (o->tune) {
		if (tune_opts(o) != 0)
			return -1;
		note_rounding(o);
		return 0;
	}
	/*
	 * nccl-tests times a 0-byte row (and with -f > 1 never leaves it); a
	 * 0-element ibcoll call returns at once without communicating, so the
	 * row would time only the argument check.
	 */
	if (o->min_bytes == 0)
		return usage_error("-b 0: a 0-byte call moves nothing to time; "
				   "sizes start at 1 byte");
	if (o->min_bytes > o->max_bytes)
		return usage_error("-b is larger than -e");
	note_rounding(o);
	return 0;
}

static void bench_die(const char *what, ibc_status_t st) __attribute__((noreturn));

static void bench_die(const char *what, ibc_status_t st)
{
	struct bench_ctx *ctx = g_ctx;

	fprintf(stderr, "ibc_bench: rank %d: %s failed: %s%s%s\n", ctx ? ctx->rank : -1, what,
		ibc_status_str(st), *ibc_last_error() ? ": " : "", ibc_last_error());
	if (ctx && ctx->comm)
		ibc_comm_abort(ctx->comm);
	if (ctx && ctx->mpi)
		bench_mpi_abort(3);
	exit(3);
}

static void mpi_die(const char *what)
{
	fprintf(stderr, "ibc_bench: rank %d: %s failed (MPI)\n", g_ctx->rank, what);
	if (g_ctx->comm)
		ibc_comm_abort(g_ctx->comm);
	bench_mpi_abort(3);
	exit(3);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Issue one ibcoll call of @c: blocking when @reqs is NULL, else the
 * nonblocking form, storing its request(s) (two for sendrecv) in @reqs.
 * The ring exchange posts in rank-parity order (even ranks send first, odd
 * ranks receive first) because the library runs the operations of a
 * communicator one after another: all-send-first deadlocks once messages
 * outgrow the transport's buffering.
 */
static ibc_status_t ibc_issue(struct bench_ctx *ctx, const struct bench_call *c,
			      ibc_request_h *reqs)
{
	ibc_comm_h comm = ctx->comm;
	size_t cnt = (size_t)c->count;
	int next = (c->rank + 1) % c->nranks;
	int prev = (c->rank + c->nranks - 1) % c->nranks;

	switch (c->coll) {
	case BENCH_ALLREDUCE:
		return reqs ? ibc_iallreduce(c->sendbuf, c->recvbuf, cnt, c->dtype, c->op, comm, reqs)
			    : ibc_allreduce(c->sendbuf, c->recvbuf, cnt, c->dtype, c->op, comm);
	case BENCH_BROADCAST:
		return reqs ? ibc_ibroadcast(c->sendbuf, c->recvbuf, cnt, c->dtype, c->root, comm, reqs)
			    : ibc_broadcast(c->sendbuf, c->recvbuf, cnt, c->dtype, c->root, comm);
	case BENCH_REDUCE:
		return reqs ? ibc_ireduce(c->sendbuf, c->recvbuf, cnt, c->dtype, c->op, c->root, comm,
					  reqs)
			    : ibc_reduce(c->sendbuf, c->recvbuf, cnt, c->dtype, c->op, c->root, comm);
	case BENCH_ALLGATHER:
		return reqs ? ibc_iallgather(c->sendbuf, c->recvbuf, cnt, c->dtype, comm, reqs)
			    : ibc_allgather(c->sendbuf, c->recvbuf, cnt, c->dtype, comm);
	case BENCH_REDUCE_SCATTER:
		return reqs ? ibc_ireduce_scatter(c->sendbuf, c->recvbuf, cnt, c->dtype, c->op, comm,
						  reqs)
			    : ibc_reduce_scatter(c->sendbuf, c->recvbuf, cnt, c->dtype, c->op, comm);
	case BENCH_ALLTOALL:
		return reqs ? ibc_ialltoall(c->sendbuf, c->recvbuf, cnt, c->dtype, comm, reqs)
			    : ibc_alltoall(c->sendbuf, c->recvbuf, cnt, c->dtype, comm);
	case BENCH_SENDRECV: {
		ibc_status_t st;

		if (c->rank % 2 == 0) {
			st = reqs ? ibc_isend(c->sendbuf, cnt, c->dtype, next, comm, &reqs[0])
				  : ibc_send(c->sendbuf, cnt, c->dtype, next, comm);
			if (st != IBC_OK)
				return st;
			return reqs ? ibc_irecv(c->recvbuf, cnt, c->dtype, prev, comm, &reqs[1])
				    : ibc_recv(c->recvbuf, cnt, c->dtype, prev, comm);
		}
		st = reqs ? ibc_irecv(c->recvbuf, cnt, c->dtype, prev, comm, &reqs[0])
			  : ibc_recv(c->recvbuf, cnt, c->dtype, prev, comm);
		if (st != IBC_OK)
			return st;
		return reqs ? ibc_isend(c->sendbuf, cnt, c->dtype, next, comm, &reqs[1])
			    : ibc_send(c->sendbuf, cnt, c->dtype, next, comm);
	}
	case BENCH_BARRIER:
		return reqs ? ibc_ibarrier(comm, reqs) : ibc_barrier(comm);
	default:
		return IBC_ERR_INVALID_ARG;
	}
}

/*
 * Die if the communicator failed. Belt and braces: calls return their own
 * status, but an error raised outside them (a peer that died after its last
 * message, an earlier library that returned IBC_OK from a failed inline
 * blocking call) only poisons the communicator.
 */
static void check_async(struct bench_ctx *ctx, const char *what)
{
	ibc_status_t ast = IBC_OK;

	if (ibc_comm_get_async_error(ctx->comm, &ast) == IBC_OK && ast != IBC_OK)
		bench_die(what, ast);
}

/* @iters calls of @c, blocking or nonblocking in batches; dies on error */
static void ibc_loop(struct bench_ctx *ctx, const struct bench_call *c, uint64_t iters)
{
	int per = c->coll == BENCH_SENDRECV ? 2 : 1;
	uint64_t it = 0;
	ibc_status_t st;

	if (ctx->o.blocking) {
		for (it = 0; it < iters; it++) {
			st = ibc_issue(ctx, c, NULL);
			if (st != IBC_OK)
				bench_die(bench_coll_name(c->coll), st);
		}
		check_async(ctx, bench_coll_name(c->coll));
		return;
	}
	while (it < iters) {
		int nreq = 0;

		while (it < iters && nreq + per <= 2 * BENCH_BATCH) {
			st = ibc_issue(ctx, c, &ctx->reqs[nreq]);
			if (st != IBC_OK)
				bench_die(bench_coll_name(c->coll), st);
			nreq += per;
			it++;
		}
		st = ibc_waitall(nreq, ctx->reqs);
		if (st != IBC_OK)
			bench_die("ibc_waitall", st);
	}
	check_async(ctx, bench_coll_name(c->coll));
}

/* CPU time of the whole process (every thread: caller, progress, service), ns */
static uint64_t cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ULL +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ULL;
}

/* struct bench_clock - elapsed and process CPU time of the timed calls, ns */
struct bench_clock {
	uint64_t wall_ns;
	uint64_t cpu_ns;
};

static void time_ibc(struct bench_ctx *ctx, const struct bench_call *c, struct bench_clock *clk)
{
	uint64_t t0;
	uint64_t c0;
	ibc_status_t st = ibc_barrier(ctx->comm);

	if (st != IBC_OK)
		bench_die("ibc_barrier", st);
	c0 = cpu_ns();
	t0 = now_ns();
	ibc_loop(ctx, c, ctx->o.iters);
	clk->wall_ns += now_ns() - t0;
	clk->cpu_ns += cpu_ns() - c0;
}

static void time_mpi(struct bench_ctx *ctx, const struct bench_call *c, struct bench_clock *clk)
{
	uint64_t t0;
	uint64_t c0;

	if (bench_mpi_barrier())
		mpi_die("MPI_Barrier");
	c0 = cpu_ns();
	t0 = now_ns();
	if (bench_mpi_run(c, ctx->o.iters, ctx->o.blocking))
		mpi_die(bench_coll_name(c->coll));
	clk->wall_ns += now_ns() - t0;
	clk->cpu_ns += cpu_ns() - c0;
}

/* grow the buffers to the largest row of every collective to run */
static void alloc_buffers(struct bench_ctx *ctx)
{
	size_t esz = 0;
	int k;

	ibc_dtype_size(ctx->o.dtype, &esz);
	for (k = 0; k < ctx->o.ncolls; k++) {
		struct bench_sizes sz;
		uint64_t b;

		for (b = ctx->o.min_bytes; b; b = bench_next_size(b, ctx->o.max_bytes, ctx->o.factor,
								    ctx->o.step)) {
			if (bench_coll_sizes(ctx->o.colls[k], b, ctx->nranks, esz, &sz) != 0)
				continue;
			if (sz.send_bytes > ctx->send_cap)
				ctx->send_cap = sz.send_bytes;
			if (sz.recv_bytes > ctx->recv_cap)
				ctx->recv_cap = sz.recv_bytes;
		}
	}
	/* page-aligned, and never NULL so that every rank may pass a buffer */
	if (ctx->o.mem_alloc ?
		    ibc_mem_alloc((void **)&ctx->sendbuf, ctx->send_cap + 64) != IBC_OK ||
			    ibc_mem_alloc((void **)&ctx->recvbuf, ctx->recv_cap + 64) != IBC_OK :
		    posix_memalign((void **)&ctx->sendbuf, 4096, ctx->send_cap + 64) ||
			    posix_memalign((void **)&ctx->recvbuf, 4096, ctx->recv_cap + 64)) {
		fprintf(stderr, "ibc_bench: rank %d: cannot allocate %zu + %zu bytes of buffers\n",
			ctx->rank, ctx->send_cap, ctx->recv_cap);
		bench_die("buffer allocation", IBC_ERR_NO_MEMORY);
	}
	memset(ctx->sendbuf, 0, ctx->send_cap + 64);
	memset(ctx->recvbuf, 0, ctx->recv_cap + 64);
}

static double stat_sum(const struct bench_ctx *ctx, int k)
{
	double s = 0;
	int i;

	for (i = 0; i < ctx->nranks; i++)
		s += ctx->gather[BENCH_NSTAT * i + k];
	return s;
}

/* copy statistic @k of every rank into ctx->tvals */
static void stat_column(struct bench_ctx *ctx, int k)
{
	int i;

	for (i = 0; i < ctx->nranks; i++)
		ctx->tvals[i] = ctx->gather[BENCH_NSTAT * i + k];
}

/* measure one row: warm-up, interleaved timed rounds, check, summary over ranks */
static void run_row(struct bench_ctx *ctx, const struct bench_call *c, const struct bench_sizes *sz,
		    struct bench_row *row)
{
	const struct bench_opts *o = &ctx->o;
	struct bench_data d = {
		.coll = c->coll, .dtype = c->dtype, .op = c->op, .nranks = ctx->nranks,
		.rank = ctx->rank, .root = c->root, .count = c->count,
	};
	struct bench_clock ibc_clk = { 0, 0 };
	struct bench_clock mpi_clk = { 0, 0 };
	uint64_t ncalls = o->iters * o->rounds;
	double local[BENCH_NSTAT] = { 0 };
	uint64_t r;
	ibc_status_t st;

	memset(row, 0, sizeof(*row));
	row->coll = c->coll;
	row->sz = *sz;
	row->mpi = ctx->mpi && bench_mpi_supports(c, &row->mpi_why);
	if (!ctx->mpi)
		row->mpi_why = NULL;
	bench_data_fill(&d, ctx->sendbuf);
	ibc_loop(ctx, c, o->warmup);
	if (row->mpi && o->warmup && bench_mpi_run(c, o->warmup, o->blocking))
		mpi_die(bench_coll_name(c->coll));
	for (r = 0; r < o->rounds; r++) {
		if (row->mpi && (r & 1))
			time_mpi(ctx, c, &mpi_clk);
		time_ibc(ctx, c, &ibc_clk);
		if (row->mpi && !(r & 1))
			time_mpi(ctx, c, &mpi_clk);
	}
	local[STAT_TIME] = bench_time_per_iter_us(ibc_clk.wall_ns, ncalls);
	local[STAT_MTIME] = bench_time_per_iter_us(mpi_clk.wall_ns, ncalls);
	local[STAT_CPU] = bench_time_per_iter_us(ibc_clk.cpu_ns, ncalls);
	local[STAT_MCPU] = bench_time_per_iter_us(mpi_clk.cpu_ns, ncalls);
	if (o->check && c->coll != BENCH_BARRIER) {
		bench_data_poison(ctx->recvbuf, sz->recv_bytes);
		ibc_loop(ctx, c, 1);
		local[STAT_WRONG] = (double)bench_data_check(&d, ctx->recvbuf, 0);
		if (row->mpi) {
			bench_data_poison(ctx->recvbuf, sz->recv_bytes);
			if (bench_mpi_run(c, 1, 1))
				mpi_die(bench_coll_name(c->coll));
			local[STAT_MWRONG] = (double)bench_data_check(&d, ctx->recvbuf, 1);
		}
	}
	st = ibc_allgather(local, ctx->gather, BENCH_NSTAT, IBC_FLOAT64, ctx->comm);
	if (st != IBC_OK)
		bench_die("ibc_allgather of the statistics", st);
	check_async(ctx, "ibc_allgather of the statistics");
	row->wrong = (uint64_t)stat_sum(ctx, STAT_WRONG);
	row->mwrong = (uint64_t)stat_sum(ctx, STAT_MWRONG);
	row->cpu_us = stat_sum(ctx, STAT_CPU) / ctx->nranks;
	row->mcpu_us = stat_sum(ctx, STAT_MCPU) / ctx->nranks;
	stat_column(ctx, STAT_TIME);
	bench_stats_across(ctx->tvals, ctx->nranks, &row->t);
	row->algbw = bench_algbw_GBps(sz->bytes, row->t.mean);
	row->busbw = bench_busbw_GBps(c->coll, ctx->nranks, sz->bytes, row->t.mean);
	row->floor_us = ctx->nhosts == 1 ? bench_floor_us(c->coll, ctx->nranks, sz->bytes,
							  ctx->copy_GBps, ctx->nlocal, ctx->ncores)
					 : 0.0;
	if (row->mpi) {
		stat_column(ctx, STAT_MTIME);
		bench_stats_across(ctx->tvals, ctx->nranks, &row->mt);
		row->malgbw = bench_algbw_GBps(sz->bytes, row->mt.mean);
		row->mbusbw = bench_busbw_GBps(c->coll, ctx->nranks, sz->bytes, row->mt.mean);
	}
}

/* ------------------------------------------------------------------------ */
/* output                                                                   */
/* ------------------------------------------------------------------------ */

static void read_loadavg(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double a = 0;
	double b = 0;
	double c = 0;

	if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
		snprintf(buf, len, "%.2f %.2f %.2f", a, b, c);
	else
		snprintf(buf, len, "unknown");
	if (f)
		fclose(f);
}

static void print_header(struct bench_ctx *ctx, int argc, char **argv)
{
	const struct bench_opts *o = &ctx->o;
	const char *algo = getenv("IBC_ALGO");
	char load[64];
	char date[64];
	time_t now = time(NULL);
	int ver = 0;
	int i;

	read_loadavg(load, sizeof(load));
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %z", localtime(&now));
	ibc_get_version(&ver);
	printf("# ibc_bench: ibcoll collective benchmark (nccl-tests conventions)\n");
	printf("# command   : %s", strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0]);
	for (i = 1; i < argc; i++)
		printf(" %s", argv[i]);
	printf("\n# ranks     : %d on %d host%s:", ctx->nranks, ctx->nhosts, ctx->nhosts == 1 ? "" : "s");
	for (i = 0; i < ctx->nranks; i++) {
		const char *h = ctx->hosts + (size_t)i * BENCH_HOST_BYTES;
		int j;

		for (j = 0; j < i; j++)
			if (!strcmp(h, ctx->hosts + (size_t)j * BENCH_HOST_BYTES))
				break;
		if (j == i)
			printf(" %s", h);
	}
	printf("\n# transport : %s (IBC_TRANSPORT=%s)\n", ctx->transport,
	       getenv("IBC_TRANSPORT") ? getenv("IBC_TRANSPORT") : "auto");
	printf("# algorithm : IBC_ALGO=%s (no library call reports which algorithm ran)\n",
	       algo && *algo ? algo : "(unset: library default)");
	printf("# build     : ibc_bench %s, library %d.%d.%d, compiler %s, configure '%s'\n",
	       PACKAGE_VERSION, ver / 10000, ver / 100 % 100, ver % 100, __VERSION__,
	       IBC_CONFIGURE_ARGS);
	printf("# mpi       : %s\n", ctx->mpi ? bench_mpi_version() : "off (no --vs-mpi)");
	printf("# run       : %" PRIu64 " iterations x %" PRIu64 " round%s, %" PRIu64
	       " warm-up, %s calls (-z %d), check %s\n",
	       o->iters, o->rounds, o->rounds == 1 ? "" : "s", o->warmup,
	       o->blocking ? "blocking" : "nonblocking", o->blocking, o->check ? "on" : "off");
	printf("# data      : dtype %s, op %s, root %d\n", bench_dtype_name(o->dtype),
	       bench_op_name(o->op), o->root);
	printf("# conditions: load average %s at start, %ld CPUs online, %s\n", load,
	       sysconf(_SC_NPROCESSORS_ONLN), date);
	printf("# columns   : time = mean us per call (mean over ranks of each rank's mean),\n");
	printf("#             min/max = fastest/slowest rank; GB/s = 1e9 B/s;\n");
	printf("#             wrong = elements differing from the exact result, all ranks;\n");
	printf("#             cpu_us = process CPU time (all threads) per call, mean over ranks;\n");
	printf("#             floor = %% of the memory floor reached: floor time / time%s\n",
	       ctx->mpi ? ";\n#             ratio = ibcoll time / MPI time" : "");
	if (ctx->nhosts == 1 && ctx->copy_GBps > 0)
		printf("# floor     : memcpy %.2f GB/s on one core (rank 0, 64 MiB, fastest of 5); floor time = the memory traffic a rank must cause (bench_common.h) / (2 x %.2f GB/s) x max(1, %d ranks / %d cores)\n",
		       ctx->copy_GBps, ctx->copy_GBps, ctx->nlocal, ctx->ncores);
	else
		printf("# floor     : none (%s)\n", ctx->nhosts == 1 ? "memcpy not measured" :
		       "ranks on several hosts: the network, not memory, is the limit");
}

static void print_table_head(struct bench_ctx *ctx, int coll)
{
	printf("#\n# %s\n", bench_coll_name(coll));
	printf("# %10s %12s %8s %6s %5s %10s %10s %10s %8s %8s %7s %9s %6s", "bytes", "count", "type",
	       "redop", "root", "time_us", "min_us", "max_us", "algbw", "busbw", "wrong", "cpu_us",
	       "floor");
	if (ctx->mpi)
		printf(" | %10s %8s %7s %9s %6s", "mpi_us", "mpi_bus", "wrong", "mpi_cpu", "ratio");
	printf("\n");
}

static void fmt_wrong(char *buf, size_t len, int checked, uint64_t wrong)
{
	if (checked)
		snprintf(buf, len, "%" PRIu64, wrong);
	else
		snprintf(buf, len, "N/A");
}

static void print_row(struct bench_ctx *ctx, const struct bench_row *row)
{
	const struct bench_opts *o = &ctx->o;
	int checked = o->check && row->coll != BENCH_BARRIER;
	char w[32];

	fmt_wrong(w, sizeof(w), checked, row->wrong);
	printf("  %10" PRIu64 " %12" PRIu64 " %8s %6s %5d %10.2f %10.2f %10.2f %8.3f %8.3f %7s %9.2f",
	       row->sz.bytes, row->sz.count, bench_dtype_name(o->dtype),
	       bench_coll_reduces(row->coll) ? bench_op_name(o->op) : "none",
	       bench_coll_rooted(row->coll) ? o->root : -1, row->t.mean, row->t.min, row->t.max,
	       row->algbw, row->busbw, w, row->cpu_us);
	if (row->floor_us > 0 && row->t.mean > 0)
		printf(" %5.0f%%", 100.0 * row->floor_us / row->t.mean);
	else
		printf(" %6s", "-");
	if (ctx->mpi && row->mpi) {
		fmt_wrong(w, sizeof(w), checked, row->mwrong);
		printf(" | %10.2f %8.3f %7s %9.2f %6.2f", row->mt.mean, row->mbusbw, w, row->mcpu_us,
		       row->mt.mean > 0 ? row->t.mean / row->mt.mean : 0.0);
	} else if (ctx->mpi) {
		printf(" | %10s %8s %7s %9s %6s", "n/a", "n/a", "n/a", "n/a", "n/a");
	}
	printf("\n");
	fflush(stdout);
}

static void csv_open(struct bench_ctx *ctx)
{
	if (!ctx->o.csv)
		return;
	ctx->csv = fopen(ctx->o.csv, "w");
	if (!ctx->csv) {
		fprintf(stderr, "ibc_bench: cannot write %s: %s\n", ctx->o.csv, strerror(errno));
		bench_die("--csv", IBC_ERR_SYSTEM);
	}
	fprintf(ctx->csv, "coll,nranks,nhosts,transport,algo,blocking,bytes,count,dtype,op,root,"
		"time_us,min_us,max_us,algbw_GBps,busbw_GBps,wrong,"
		"mpi_time_us,mpi_min_us,mpi_max_us,mpi_algbw_GBps,mpi_busbw_GBps,mpi_wrong,ratio,"
		"cpu_us,mpi_cpu_us,floor_us,floor_frac\n");
}

static void csv_row(struct bench_ctx *ctx, const struct bench_row *row)
{
	const struct bench_opts *o = &ctx->o;
	const char *algo = getenv("IBC_ALGO");
	int checked = o->check && row->coll != BENCH_BARRIER;

	if (!ctx->csv)
		return;
	fprintf(ctx->csv, "%s,%d,%d,%s,%s,%d,%" PRIu64 ",%" PRIu64 ",%s,%s,%d,%.3f,%.3f,%.3f,%.6f,%.6f,",
		bench_coll_name(row->coll), ctx->nranks, ctx->nhosts, ctx->transport,
		algo && *algo ? algo : "default", o->blocking, row->sz.bytes, row->sz.count,
		bench_dtype_name(o->dtype), bench_coll_reduces(row->coll) ? bench_op_name(o->op) : "none",
		bench_coll_rooted(row->coll) ? o->root : -1, row->t.mean, row->t.min, row->t.max,
		row->algbw, row->busbw);
	if (checked)
		fprintf(ctx->csv, "%" PRIu64 ",", row->wrong);
	else
		fprintf(ctx->csv, ",");
	if (row->mpi) {
		fprintf(ctx->csv, "%.3f,%.3f,%.3f,%.6f,%.6f,", row->mt.mean, row->mt.min, row->mt.max,
			row->malgbw, row->mbusbw);
		if (checked)
			fprintf(ctx->csv, "%" PRIu64, row->mwrong);
		fprintf(ctx->csv, ",%.4f,%.3f,%.3f,", row->mt.mean > 0 ? row->t.mean / row->mt.mean : 0.0,
			row->cpu_us, row->mcpu_us);
	} else {
		fprintf(ctx->csv, ",,,,,,,%.3f,,", row->cpu_us);
	}
	if (row->floor_us > 0 && row->t.mean > 0)
		fprintf(ctx->csv, "%.3f,%.4f\n", row->floor_us, row->floor_us / row->t.mean);
	else
		fprintf(ctx->csv, ",\n");
}

/* a JSON string: the values we print are names without quotes or controls */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
	fputc('"', f);
}

static void json_open(struct bench_ctx *ctx)
{
	const struct bench_opts *o = &ctx->o;
	const char *algo = getenv("IBC_ALGO");
	FILE *f;
	char load[64];
	int i;

	if (!o->json)
		return;
	f = ctx->json = fopen(o->json, "w");
	if (!f) {
		fprintf(stderr, "ibc_bench: cannot write %s: %s\n", o->json, strerror(errno));
		bench_die("--json", IBC_ERR_SYSTEM);
	}
	read_loadavg(load, sizeof(load));
	fprintf(f, "{\n  \"tool\": \"ibc_bench\",\n  \"version\": ");
	json_str(f, PACKAGE_VERSION);
	fprintf(f, ",\n  \"nranks\": %d,\n  \"nhosts\": %d,\n  \"hosts\": [", ctx->nranks, ctx->nhosts);
	for (i = 0; i < ctx->nranks; i++) {
		fprintf(f, "%s", i ? ", " : "");
		json_str(f, ctx->hosts + (size_t)i * BENCH_HOST_BYTES);
	}
	fprintf(f, "],\n  \"transport\": ");
	json_str(f, ctx->transport);
	fprintf(f, ",\n  \"algorithm\": ");
	json_str(f, algo && *algo ? algo : "default");
	fprintf(f, ",\n  \"mpi\": ");
	if (ctx->mpi)
		json_str(f, bench_mpi_version());
	else
		fprintf(f, "null");
	fprintf(f, ",\n  \"iters\": %" PRIu64 ",\n  \"rounds\": %" PRIu64 ",\n  \"warmup\": %" PRIu64
		",\n  \"blocking\": %d,\n  \"check\": %d,\n  \"memcpy_GBps\": %.3f,\n  \"loadavg\": ",
		o->iters, o->rounds, o->warmup, o->blocking, o->check, ctx->copy_GBps);
	json_str(f, load);
	fprintf(f, ",\n  \"rows\": [");
}

static void json_row(struct bench_ctx *ctx, const struct bench_row *row)
{
	const struct bench_opts *o = &ctx->o;
	FILE *f = ctx->json;
	int checked = o->check && row->coll != BENCH_BARRIER;

	if (!f)
		return;
	fprintf(f, "%s\n    {\"coll\": \"%s\", \"bytes\": %" PRIu64 ", \"count\": %" PRIu64
		", \"dtype\": \"%s\", \"op\": \"%s\", \"root\": %d, \"time_us\": %.3f, \"min_us\": %.3f"
		", \"max_us\": %.3f, \"algbw_GBps\": %.6f, \"busbw_GBps\": %.6f, \"cpu_us\": %.3f"
		", \"wrong\": ",
		ctx->json_rows++ ? "," : "", bench_coll_name(row->coll), row->sz.bytes, row->sz.count,
		bench_dtype_name(o->dtype), bench_coll_reduces(row->coll) ? bench_op_name(o->op) : "none",
		bench_coll_rooted(row->coll) ? o->root : -1, row->t.mean, row->t.min, row->t.max,
		row->algbw, row->busbw, row->cpu_us);
	if (checked)
		fprintf(f, "%" PRIu64, row->wrong);
	else
		fprintf(f, "null");
	if (row->floor_us > 0)
		fprintf(f, ", \"floor_us\": %.3f", row->floor_us);
	if (row->mpi) {
		fprintf(f, ", \"mpi\": {\"time_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f"
			", \"algbw_GBps\": %.6f, \"busbw_GBps\": %.6f, \"cpu_us\": %.3f, \"wrong\": ",
			row->mt.mean, row->mt.min, row->mt.max, row->malgbw, row->mbusbw, row->mcpu_us);
		if (checked)
			fprintf(f, "%" PRIu64, row->mwrong);
		else
			fprintf(f, "null");
		fprintf(f, ", \"ratio\": %.4f}", row->mt.mean > 0 ? row->t.mean / row->mt.mean : 0.0);
	} else if (row->mpi_why) {
		fprintf(f, ", \"mpi\": null, \"mpi_why\": ");
		json_str(f, row->mpi_why);
	}
	fprintf(f, "}");
}

static void json_close(struct bench_ctx *ctx)
{
	if (!ctx->json)
		return;
	fprintf(ctx->json, "\n  ],\n  \"wrong_total\": %" PRIu64 "\n}\n", ctx->wrong_total);
	fclose(ctx->json);
	ctx->json = NULL;
}

/* ------------------------------------------------------------------------ */
/* set-up and the sweep                                                     */
/* ------------------------------------------------------------------------ */

static void comm_create(struct bench_ctx *ctx)
{
	const char *root = getenv("IBC_ROOT");
	ibc_status_t st;

	if ((root && *root) || !ctx->mpi) {
		st = ibc_comm_init_env(&ctx->comm);
		if (st != IBC_OK)
			bench_die("ibc_comm_init_env", st);
	} else {
		/* under mpirun without IBC_ROOT: NCCL's pattern, the id travels by MPI */
		ibc_unique_id_t id;
		int mrank = 0;
		int msize = 0;

		memset(&id, 0, sizeof(id));
		mrank = ctx->rank;
		msize = ctx->nranks;
		if (mrank == 0) {
			st = ibc_get_unique_id(&id);
			if (st != IBC_OK)
				bench_die("ibc_get_unique_id", st);
		}
		if (bench_mpi_bcast(&id, sizeof(id), 0))
			mpi_die("MPI_Bcast of the unique id");
		st = ibc_comm_init_rank(&ctx->comm, msize, &id, mrank);
		if (st != IBC_OK)
			bench_die("ibc_comm_init_rank", st);
	}
	ibc_comm_rank(ctx->comm, &ctx->rank);
	ibc_comm_size(ctx->comm, &ctx->nranks);
	ibc_comm_transport(ctx->comm, &ctx->transport);
}

/*
 * The memory floor's rate: rank 0 copies 64 MiB (beyond any cache) 5 times
 * and keeps the fastest, while the other ranks wait in the broadcast of the
 * result (they spin briefly, then sleep: the copy has the core); with the
 * ranks on rank 0's host and the CPUs it may use.
 */
#define FLOOR_BYTES (64u << 20)
#define IBC_BENCH_MIN(a, b) ((a) < (b) ? (a) : (b))
static void measure_floor(struct bench_ctx *ctx)
{
	double v[3] = { 0, 0, 0 };
	ibc_status_t st;
	int i;

	if (ctx->rank == 0) {
		char *a = malloc(FLOOR_BYTES);
		char *b = malloc(FLOOR_BYTES);
		cpu_set_t cpus;
		double best = 0;
		volatile char sink;

		if (a && b) {
			memset(a, 1, FLOOR_BYTES);
			memset(b, 2, FLOOR_BYTES);
			for (i = 0; i < 5; i++) {
				uint64_t t0 = now_ns();
				double dt;

				memcpy(i & 1 ? a : b, i & 1 ? b : a, FLOOR_BYTES);
				dt = (double)(now_ns() - t0) / 1000.0;
				sink = a[(size_t)i * 4096] + b[(size_t)i * 8192];
				if (dt > 0 && FLOOR_BYTES / dt / 1e3 > best)
					best = FLOOR_BYTES / dt / 1e3;
			}
			(void)sink;
		}
		free(a);
		free(b);
		v[0] = best;
		v[1] = 0;
		for (i = 0; i < ctx->nranks; i++)
			v[1] += !strcmp(ctx->hosts + (size_t)i * BENCH_HOST_BYTES, ctx->hosts);
		/*
		 * cores: rank 0's CPUs, or, where a launcher bound each rank to
		 * fewer CPUs than there are local ranks (Open MPI binds to a core
		 * by default), as many as ranks up to the CPUs online
		 */
		v[2] = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
		if (v[2] < v[1])
			v[2] = IBC_BENCH_MIN(v[1], (double)sysconf(_SC_NPROCESSORS_ONLN));
	}
	st = ibc_broadcast(v, v, 3, IBC_FLOAT64, 0, ctx->comm);
	if (st != IBC_OK)
		bench_die("ibc_broadcast of the memcpy rate", st);
	check_async(ctx, "ibc_broadcast of the memcpy rate");
	ctx->copy_GBps = v[0];
	ctx->nlocal = (int)v[1];
	ctx->ncores = (int)v[2];
}

static void gather_hosts(struct bench_ctx *ctx)
{
	char mine[BENCH_HOST_BYTES];
	ibc_status_t st;
	int i;
	int j;

	memset(mine, 0, sizeof(mine));
	if (gethostname(mine, sizeof(mine) - 1) != 0)
		snprintf(mine, sizeof(mine), "unknown");
	ctx->hosts = calloc((size_t)ctx->nranks, BENCH_HOST_BYTES);
	ctx->gather = calloc((size_t)ctx->nranks * BENCH_NSTAT, sizeof(double));
	ctx->tvals = calloc((size_t)ctx->nranks, sizeof(double));
	if (!ctx->hosts || !ctx->gather || !ctx->tvals)
		bench_die("allocation", IBC_ERR_NO_MEMORY);
	st = ibc_allgather(mine, ctx->hosts, BENCH_HOST_BYTES, IBC_UINT8, ctx->comm);
	if (st != IBC_OK)
		bench_die("ibc_allgather of the host names", st);
	ctx->nhosts = 0;
	for (i = 0; i < ctx->nranks; i++) {
		ctx->hosts[(size_t)i * BENCH_HOST_BYTES + BENCH_HOST_BYTES - 1] = '\0';
		for (j = 0; j < i; j++)
			if (!strcmp(ctx->hosts + (size_t)i * BENCH_HOST_BYTES,
				    ctx->hosts + (size_t)j * BENCH_HOST_BYTES))
				break;
		ctx->nhosts += j == i;
	}
}

/* one collective over every size; returns the number of rows printed */
static void run_coll(struct bench_ctx *ctx, int coll)
{
	const struct bench_opts *o = &ctx->o;
	size_t esz = 0;
	uint64_t b;
	double sum_bus = 0;
	double sum_mbus = 0;
	double sum_logratio = 0;
	int nrows = 0;
	int nmrows = 0;

	ibc_dtype_size(o->dtype, &esz);
	if (ctx->rank == 0)
		print_table_head(ctx, coll);
	if (coll == BENCH_SENDRECV && ctx->nranks < 2) {
		if (ctx->rank == 0)
			printf("# sendrecv needs at least 2 ranks: skipped\n");
		return;
	}
	for (b = o->min_bytes; b; b = bench_next_size(b, o->max_bytes, o->factor, o->step)) {
		struct bench_sizes sz;
		struct bench_call c;
		struct bench_row row;

		if (bench_coll_sizes(coll, b, ctx->nranks, esz, &sz) != 0)
			continue;
		if (coll != BENCH_BARRIER && sz.arg_count == 0) {
			if (ctx->rank == 0)
				printf("# %" PRIu64 " bytes: less than one %s element per rank: skipped\n", b,
				       bench_dtype_name(o->dtype));
			continue;
		}
		memset(&c, 0, sizeof(c));
		c.coll = coll;
		c.sendbuf = ctx->sendbuf;
		c.recvbuf = ctx->recvbuf;
		c.count = sz.arg_count;
		c.dtype = o->dtype;
		c.op = o->op;
		c.root = o->root;
		c.rank = ctx->rank;
		c.nranks = ctx->nranks;
		run_row(ctx, &c, &sz, &row);
		ctx->wrong_total += row.wrong + row.mwrong;
		sum_bus += row.busbw;
		nrows++;
		if (row.mpi) {
			sum_mbus += row.mbusbw;
			if (row.t.mean > 0 && row.mt.mean > 0) {
				sum_logratio += log(row.t.mean / row.mt.mean);
				nmrows++;
			}
		}
		if (ctx->rank == 0) {
			print_row(ctx, &row);
			csv_row(ctx, &row);
			json_row(ctx, &row);
		}
		if (coll == BENCH_BARRIER)
			break;  /* one row: the barrier has no size */
	}
	if (ctx->rank == 0 && nrows) {
		printf("# Avg bus bandwidth    : %.4f GB/s (%s, %d sizes)\n", sum_bus / nrows,
		       bench_coll_name(coll), nrows);
		if (nmrows)
			printf("# Avg bus bandwidth MPI: %.4f GB/s; geometric mean of ibcoll/MPI time: %.3f\n",
			       sum_mbus / nmrows, exp(sum_logratio / nmrows));
	}
}

/*
 * --tune: every tunable collective of the command line timed with every
 * algorithm and protocol (bench_tune.c), rank 0 prints the measurements and
 * appends the fitted coefficients to the file. Returns the exit status.
 */
static int run_tune(struct bench_ctx *ctx)
{
	static const int tune_coll[BENCH_COLL_COUNT] = {
		[BENCH_ALLREDUCE] = IBC_TUNE_ALLREDUCE,
		[BENCH_BROADCAST] = IBC_TUNE_BCAST,
		[BENCH_REDUCE] = IBC_TUNE_REDUCE,
	};
	struct bench_tune_result *res = calloc(1, sizeof(*res));
	const struct bench_opts *o = &ctx->o;
	ibc_status_t st;
	uint64_t b;
	int k;

	if (!res)
		bench_die("allocation", IBC_ERR_NO_MEMORY);
	for (b = o->min_bytes; b; b = bench_next_size(b, o->max_bytes, o->factor, o->step))
		res->sizes[res->nsizes++] = (size_t)(b / 4 * 4);
	for (k = 0; k < o->ncolls; k++) {
		int coll = tune_coll[o->colls[k]];

		st = bench_tune_measure(ctx->comm, coll, ctx->sendbuf, ctx->recvbuf,
					(int)o->rounds, 1, res);
		if (st != IBC_OK)
			bench_die("the tuning sweep", st);
		if (ctx->rank != 0)
			continue;
		printf("# --tune: %s, %d ranks over %s, float32 sum, median of %" PRIu64
		       " repetitions (+1 warm-up)\n",
		       ibc_tune_coll_name(coll), ctx->nranks, ctx->transport, o->rounds);
		bench_tune_print(res, stdout);
		st = bench_tune_fit_append(res, ctx->transport, "ibc_bench", o->tune);
		if (st != IBC_OK) {
			fprintf(stderr, "ibc_bench: cannot fit or append to %s: %s\n", o->tune,
				ibc_status_str(st));
			free(res);
			return 1;
		}
		printf("# fitted coefficients appended to %s\n", o->tune);
	}
	free(res);
	return 0;
}

int main(int argc, char **argv)
{
	struct bench_ctx ctx;
	ibc_status_t st;
	int tune_rc = 0;
	int k;

	memset(&ctx, 0, sizeof(ctx));
	g_ctx = &ctx;
	ctx.rank = env_rank();
	if (parse_opts(argc, argv, &ctx.o) != 0)
		return 2;
	if (ctx.o.local) {
		int nlocal = 0;

		if (bench_local_ranks(argc, argv, &nlocal) != 1) {
			usage_error("--local takes a number of ranks from 1 to 1024");
			return 2;
		}
		if (ctx.o.vs_mpi) {
			usage_error("--vs-mpi needs mpirun, not --local");
			return 2;
		}
		return bench_launch_local(argc, argv, nlocal);
	}
	if (ctx.o.transport && setenv("IBC_TRANSPORT", ctx.o.transport, 1) != 0)
		return 2;
	if (ctx.o.algo && setenv("IBC_ALGO", ctx.o.algo, 1) != 0)
		return 2;
	if (ctx.o.vs_mpi) {
		if (!bench_mpi_built()) {
			if (env_rank0())
				fprintf(stderr, "ibc_bench: --vs-mpi: built without MPI\n");
			return 2;
		}
		if (bench_mpi_init(&argc, &argv, &ctx.rank, &ctx.nranks) != 0)
			return 3;
		ctx.mpi = 1;
	}
	comm_create(&ctx);
	if (ctx.o.root >= ctx.nranks) {
		if (ctx.rank == 0)
			fprintf(stderr, "ibc_bench: root %d is not a rank of %d\n", ctx.o.root, ctx.nranks);
		ibc_comm_destroy(ctx.comm);
		if (ctx.mpi)
			bench_mpi_finalize();
		return 2;
	}
	gather_hosts(&ctx);
	measure_floor(&ctx);
	alloc_buffers(&ctx);
	if (ctx.rank == 0) {
		print_header(&ctx, argc, argv);
		csv_open(&ctx);
		json_open(&ctx);
	}
	if (ctx.o.tune) {
		/* a failure to write is rank 0's alone: the others still meet below */
		tune_rc = run_tune(&ctx);
	} else {
		for (k = 0; k < ctx.o.ncolls; k++)
			run_coll(&ctx, ctx.o.colls[k]);
	}
	if (ctx.rank == 0 && !ctx.o.tune) {
		printf("#\n# Wrong elements: %" PRIu64 " %s\n", ctx.wrong_total,
		       !ctx.o.check ? "(not checked)" : ctx.wrong_total ? "FAILED" : "OK");
		if (ctx.csv)
			fclose(ctx.csv);
		json_close(&ctx);
	}
	/*
	 * ibc_comm_destroy() is not collective: a rank that leaves while a peer
	 * still waits for its last message makes that peer fail. Meet first.
	 */
	st = ibc_barrier(ctx.comm);
	if (st != IBC_OK)
		bench_die("final ibc_barrier", st);
	check_async(&ctx, "final ibc_barrier");
	st = ibc_comm_destroy(ctx.comm);
	ctx.comm = NULL;
	if (st != IBC_OK)
		bench_die("ibc_comm_destroy", st);
	if (ctx.mpi)
		bench_mpi_finalize();
	if (ctx.o.mem_alloc) {
		ibc_mem_free(ctx.sendbuf);
		ibc_mem_free(ctx.recvbuf);
	} else {
		free(ctx.sendbuf);
		free(ctx.recvbuf);
	}
	free(ctx.hosts);
	free(ctx.gather);
	free(ctx.tvals);
	return ctx.wrong_total || tune_rc ? 1 : 0;
}
