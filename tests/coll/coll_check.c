/* SPDX-License-Identifier: MIT */
/*
 * coll_check.c - the collective correctness matrix. One process per rank,
 * started by tests/scripts/run_local_ranks.sh, scripts/ibcrun or mpirun; it
 * uses only the public API (<ibcoll.h>) and joins with ibc_comm_init_env().
 *
 * It sweeps collectives x counts x dtypes x ops x {in place, out of place}
 * x roots x {blocking, nonblocking} with inputs whose every expected value is
 * exact and computed in closed form on each rank (small integers in float
 * types, wrap-around for integers, AVG as SUM then one division), checks
 * guard bytes around every output, that inputs are not modified, and
 * prints each mismatch (rank, collective, count, dtype, op, root, place,
 * mode, first bad index, got vs want). Nonblocking mode issues 16 requests
 * on distinct buffers with distinct data (4, or fewer to stay under 16 MiB,
 * for counts above 1000), polls them with ibc_test() in reverse order,
 * checks that they complete in issue order, and waits for them in reverse
 * order. It also checks the bf16 rounding case
 * of the issue, the documented error codes for bad input, and barrier
 * semantics (through a counter in a shared file, ranks on one host).
 * Each rank prints a one-line summary; exit status 0 only if every check of
 * this rank passed (1: a check failed, 2: could not start).
 *
 * Run `coll_check --help` for the flags.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ibcoll.h>

/* ---------------------------------------------------------------------- */
/* configuration                                                            */
/* ---------------------------------------------------------------------- */

enum coll {
	C_ALLREDUCE = 0,
	C_BROADCAST,
	C_REDUCE,
	C_ALLGATHER,
	C_REDUCE_SCATTER,
	C_ALLTOALL,
	C_SENDRECV,
	C_BARRIER,
	C_COUNT
};

static const char *const coll_names[C_COUNT] = {
    "allreduce",      "broadcast", "reduce",   "allgather",
    "reduce_scatter", "alltoall",  "sendrecv", "barrier",
};

static const char *const dtype_names[IBC_DTYPE_COUNT] = {
    "int8",   "uint8",	 "int32",    "uint32",	"int64",
    "uint64", "float16", "bfloat16", "float32", "float64",
};

static const char *const op_names[IBC_REDOP_COUNT] = {"sum", "prod", "min", "max", "avg"};

#define MAX_COUNTS 32
#define NB_DEPTH 16    /* nonblocking requests in flight */
#define GUARD_BYTES 64 /* guard before and after every buffer */
#define SENTINEL_BYTE 0xa5
#define LARGE_COUNT 262144	     /* default --large-from (see case_enabled) */
#define NB_FULL_DEPTH_MAX_COUNT 1000 /* larger counts run NB_LARGE_DEPTH requests */
#define NB_LARGE_DEPTH 4
#define NB_MEM_CAP (16u << 20) /* and fewer still above this many bytes */

static struct cfg {
	int colls[C_COUNT]; /* selected */
	size_t counts[MAX_COUNTS];
	int ncounts;
	int dtypes[IBC_DTYPE_COUNT];
	int ops[IBC_REDOP_COUNT];
	int modes[2];	   /* [0] blocking, [1] nonblocking */
	int places[2];	   /* [0] out of place, [1] in place */
	int full;	   /* no subsetting at large counts */
	size_t large_from; /* counts from here on run a subset (case_enabled) */
	int errors;	   /* run the bad-input checks */
	int bf16_case;	   /* run the bf16 rounding case */
	int verbose;
	int max_report;
	double timeout_s; /* bound on polling nonblocking requests */
	unsigned seed;
	int mem_alloc;	  /* buffers from ibc_mem_alloc(): 1 all (--mem-alloc), 2 receive buffers
			   * only (--mem-alloc-recv) */
} cfg;

static ibc_comm_h comm;
static int rank;
static int nranks;
static const char *transport = "?";

static long n_checks;
static long n_failed;
static long n_reported;
static double t_setup; /* seconds spent filling and checking buffers (-v prints them) */
static double t_verify;
static double t_coll;

/* ---------------------------------------------------------------------- */
/* reporting                                                                */
/* ---------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* record one check; on failure print the message (up to --max-report per rank) */
static int check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int check(int ok, const char *fmt, ...)
{
	va_list ap;

	n_checks++;
	if (ok)
		return 1;
	n_failed++;
	if (n_reported++ < cfg.max_report) {
		printf("FAIL rank %d/%d: ", rank, nranks);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
		fflush(stdout);
	} else if (n_reported == cfg.max_report + 1) {
		printf("FAIL rank %d/%d: further failures not printed (--max-report %d)\n", rank,
		       nranks, cfg.max_report);
		fflush(stdout);
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* element encodings (independent of the library's kernels)                 */
/* ---------------------------------------------------------------------- */

static inline size_t esize(ibc_dtype_t dt)
{
	static const size_t sz[IBC_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};

	return sz[dt];
}

static int is_float(ibc_dtype_t dt)
{
	return dt >= IBC_FLOAT16;
}

static int is_signed_int(ibc_dtype_t dt)
{
	return dt == IBC_INT8 || dt == IBC_INT32 || dt == IBC_INT64;
}

static uint64_t trunc_bits(uint64_t v, ibc_dtype_t dt)
{
	size_t b = esize(dt) * 8;

	return b == 64 ? v : v & ((1ull << b) - 1);
}

/* sign-extend an integer element's bits */
static int64_t sext(uint64_t v, ibc_dtype_t dt)
{
	size_t b = esize(dt) * 8;

	if (b == 64)
		return (int64_t)v;
	v = trunc_bits(v, dt);
	if (v >> (b - 1))
		v |= ~0ull << b;
	return (int64_t)v;
}

static inline uint64_t get_elem(const void *buf, size_t i, ibc_dtype_t dt)
{
	switch (esize(dt)) {
	case 1:
		return ((const uint8_t *)buf)[i];
	case 2:
		return ((const uint16_t *)buf)[i];
	case 4:
		return ((const uint32_t *)buf)[i];
	default:
		return ((const uint64_t *)buf)[i];
	}
}

static inline void put_elem(void *buf, size_t i, ibc_dtype_t dt, uint64_t v)
{
	switch (esize(dt)) {
	case 1:
		((uint8_t *)buf)[i] = (uint8_t)v;
		break;
	case 2:
		((uint16_t *)buf)[i] = (uint16_t)v;
		break;
	case 4:
		((uint32_t *)buf)[i] = (uint32_t)v;
		break;
	default:
		((uint64_t *)buf)[i] = v;
		break;
	}
}

/* round a finite |a| to @p significant bits, exponent range [emin, emax]; encoding */
static uint64_t round_fmt(double a, int p, int emin, int emax)
{
	int e;
	double m;

	if (a == 0)
		return 0;
	frexp(a, &e);
	e -= 1;
	if (e < emin)
		e = emin;
	m = nearbyint(ldexp(a, p - 1 - e)); /* round to nearest, ties to even */
	if (m >= ldexp(1, p)) {
		m /= 2;
		e += 1;
	}
	if (e > emax)
		return (uint64_t)(2 * emax + 1) << (p - 1); /* infinity */
	if (m < ldexp(1, p - 1))
		return (uint64_t)m;
	return ((uint64_t)(e + emax) << (p - 1)) | ((uint64_t)m - (1ull << (p - 1)));
}

/* a double (exactly representable in float, or to be rounded) -> bits of dt */
static uint64_t enc_float(double x, ibc_dtype_t dt)
{
	float f;
	uint32_t u;

	switch (dt) {
	case IBC_FLOAT64: {
		uint64_t b;

		memcpy(&b, &x, 8);
		return b;
	}
	case IBC_FLOAT32:
		f = (float)x;
		memcpy(&u, &f, 4);
		return u;
	default: {
		int p = dt == IBC_FLOAT16 ? 11 : 8;
		int emax = dt == IBC_FLOAT16 ? 15 : 127;
		uint64_t sign = signbit(x) ? 0x8000 : 0;
		uint64_t inf = dt == IBC_FLOAT16 ? 0x7c00 : 0x7f80;

		if (isnan(x))
			return inf | (dt == IBC_FLOAT16 ? 0x200 : 0x40);
		if (isinf(x))
			return sign | inf;
		/* fast paths for values the format holds exactly (most inputs) */
		f = (float)x;
		memcpy(&u, &f, 4);
		if ((double)f == x) {
			uint32_t e = (u >> 23) & 0xff;

			if (dt == IBC_BFLOAT16 && (u & 0xffff) == 0)
				return u >> 16;
			if (dt == IBC_FLOAT16 && (u & 0x1fff) == 0 && e >= 113 && e <= 142)
				return sign | ((e - 112) << 10) | ((u >> 13) & 0x3ff);
		}
		return sign | round_fmt(fabs(x), p, 1 - emax, emax);
	}
	}
}

static double dec_float(uint64_t b, ibc_dtype_t dt)
{
	float f;
	double d;
	uint32_t u;

	switch (dt) {
	case IBC_FLOAT64:
		memcpy(&d, &b, 8);
		return d;
	case IBC_FLOAT32:
		u = (uint32_t)b;
		memcpy(&f, &u, 4);
		return f;
	case IBC_BFLOAT16:
		u = (uint32_t)(b & 0xffff) << 16;
		memcpy(&f, &u, 4);
		return f;
	default: {
		int e = (b >> 10) & 0x1f;
		int m = b & 0x3ff;
		double v;

		if (e == 31)
			v = m ? NAN : INFINITY;
		else
			v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
		return (b & 0x8000) ? -v : v;
	}
	}
}

static int is_nan_bits(uint64_t b, ibc_dtype_t dt)
{
	return is_float(dt) && isnan(dec_float(b, dt));
}

static void fmt_elem(char *s, size_t len, uint64_t b, ibc_dtype_t dt)
{
	if (is_float(dt))
		snprintf(s, len, "%.9g (0x%0*" PRIx64 ")", dec_float(b, dt), (int)esize(dt) * 2, b);
	else if (is_signed_int(dt))
		snprintf(s, len, "%" PRId64, sext(b, dt));
	else
		snprintf(s, len, "%" PRIu64, trunc_bits(b, dt));
}

/* ---------------------------------------------------------------------- */
/* inputs and their closed-form reductions                                  */
/*                                                                          */
/* Every input is a function of (seed, rank r, index i) and every reduced   */
/* value a closed form in (seed, i, n), O(1) per element, so each rank      */
/* checks its output without knowing the other ranks' buffers. Per element  */
/* i, a, b, c, d below come from a hash of (seed, i):                       */
/*   SUM, AVG   v = a + r*b (+ e on rank c)  sum = n*a + b*n(n-1)/2 + e    */
/*              (e makes the sum no multiple of n, so AVG has to round)     */
/*   PROD int   v = +-a (a odd), - where (r + c) % 3 == 0                   */
/*                                       prod = a^n * (-1)^#neg             */
/*   PROD float v = +-1 or +-2: 2 where (i + r) % 4 == 0, - as above       */
/*                                       prod = (-1)^#neg * 2^#two          */
/*   MIN, MAX   v = a + ((r + c) % n)*d  min = a, max = a + (n-1)*d         */
/*   float MIN/MAX also: at i % 97 == 13 rank (i/97) % n gives NaN (result  */
/*   NaN); at i % 89 == 7 odd ranks give -0, even ranks +0 (min -0 when     */
/*   n > 1, max +0).                                                        */
/* Float ranges keep every partial sum an exactly representable integer     */
/* whatever the order (bfloat16 <= 256, float16 <= 2048), so results are    */
/* exact; integers wrap modulo 2^bits as the library defines. AVG divides   */
/* the closed-form sum once, the way the library documents it.              */
/* Data movement (broadcast, allgather, alltoall, sendrecv): any bit        */
/* pattern, v = hash(seed, r, i).                                           */
/* ---------------------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t hash3(uint64_t seed, uint64_t r, uint64_t i)
{
	return mix(seed + r * 0x9e3779b97f4a7c15ull + i * 0xd1b54a32d192ed03ull);
}

/* number of r in [0, n) with r % m == r0 */
static int count_mod(int n, int m, int r0)
{
	return r0 < n ? (n - 1 - r0) / m + 1 : 0;
}

static int nan_index(size_t i)
{
	return i % 97 == 13;
}

static int zero_index(size_t i)
{
	return i % 89 == 7;
}

/* per-case constants of the generators (computed once, not per element) */
struct genctx {
	int op; /* -1: data movement */
	ibc_dtype_t dt;
	uint64_t seed;
	int64_t amax; /* float SUM: a in [-amax, amax], b in [-bmax, bmax], */
	int64_t bmax; /* e in [1, emax] */
	int64_t emax;
	uint64_t lo;   /* integer MIN/MAX: bits of the dtype's minimum */
	uint64_t span; /* its range is [lo, lo + span] */
	uint64_t dmax; /* d in [1, dmax] */
};

/* per-element parameters */
struct elem_par {
	uint64_t a; /* integers: any bits, or the MIN/MAX offset */
	uint64_t b;
	int c;	    /* 0..2 (PROD) or 0..n-1 (SUM, MIN/MAX) */
	uint64_t d; /* MIN/MAX step; SUM: the extra e of rank c */
	double fa;
	double fb;
};

/* h mapped onto [0, m) without a division (m >= 1) */
static inline uint64_t below(uint64_t h, uint64_t m)
{
	return (uint64_t)(((unsigned __int128)h * m) >> 64);
}

static void genctx_init(struct genctx *g, int op, ibc_dtype_t dt, uint64_t seed)
{
	int n1 = nranks > 1 ? nranks - 1 : 1;

	memset(g, 0, sizeof(*g));
	g->op = op;
	g->dt = dt;
	g->seed = seed;
	if (op < 0)
		return;
	if (is_float(dt)) {
		/* largest |input| so that n of them add exactly, in any order */
		int64_t lim = dt == IBC_BFLOAT16  ? 256
			      : dt == IBC_FLOAT16 ? 2048
			      : dt == IBC_FLOAT32 ? (1 << 24)
						  : (1ll << 53);
		int64_t per = lim / nranks;

		if (per > 1000000)
			per = 1000000;
		g->emax = per / 8 > 3 ? 3 : 1;
		g->bmax = (per - g->emax) / (2 * n1);
		g->amax = per - g->emax - (int64_t)(nranks - 1) * g->bmax;
	} else {
		size_t w = esize(dt) * 8;

		g->span = w == 64 ? ~0ull : (1ull << w) - 1;
		g->lo = is_signed_int(dt) ? (uint64_t)1 << (w - 1) : 0;
		g->dmax = g->span / 4 / (uint64_t)n1;
	}
}

static inline void params(const struct genctx *g, size_t i, struct elem_par *p)
{
	uint64_t h1 = hash3(g->seed, 0x51ed, i);
	uint64_t h2 = (h1 ^ (h1 >> 29)) * 0xbf58476d1ce4e5b9ull; /* cheap second draw */

	switch (g->op) {
	case IBC_SUM:
	case IBC_AVG:
		p->c = (int)below(h2 << 16, (uint64_t)nranks);
		if (is_float(g->dt)) {
			p->fa = (double)((int64_t)below(h1, (uint64_t)(2 * g->amax + 1)) - g->amax);
			p->fb = (double)((int64_t)below(h2, (uint64_t)(2 * g->bmax + 1)) - g->bmax);
			p->d = 1 + below(h2 << 32, (uint64_t)g->emax);
		} else {
			p->a = h1;
			p->b = h2;
			p->d = 1 + ((h1 >> 3) & 7);
		}
		break;
	case IBC_PROD:
		p->a = h1 | 1;
		p->c = (int)below(h2, 3);
		break;
	default:
		p->c = (int)below(h2, (uint64_t)nranks);
		if (is_float(g->dt)) {
			p->fa = (double)((int64_t)below(h1, 201) - 100);
			p->fb = (double)(1 + below(h2 << 8, 5));
		} else {
			/* offset a in [0, span - (n-1) d]: a + (n-1) d stays in range */
			uint64_t room;

			p->d = 1 + (g->dmax ? below(h2 << 8, g->dmax) : 0);
			room = g->span - (uint64_t)(nranks - 1) * p->d;
			p->a = room == ~0ull ? h1 : below(h1, room + 1);
		}
		break;
	}
}

/* float value of input element i of rank r */
static inline double gen_fval(const struct genctx *g, const struct elem_par *p, int r, size_t i)
{
	switch (g->op) {
	case IBC_SUM:
	case IBC_AVG:
		return p->fa + r * p->fb + (r == p->c ? (double)p->d : 0.0);
	case IBC_PROD: {
		double v = (i + (size_t)r) % 4 == 0 ? 2.0 : 1.0;

		return (r + p->c) % 3 == 0 ? -v : v;
	}
	default:
		if (nan_index(i) && (int)((i / 97) % (size_t)nranks) == r)
			return NAN;
		if (zero_index(i))
			return (r & 1) ? -0.0 : 0.0;
		return p->fa + ((r + p->c) % nranks) * p->fb;
	}
}

/* input element @i of rank @r, as bits of the dtype */
static uint64_t gen(const struct genctx *g, int r, size_t i)
{
	struct elem_par p;
	ibc_dtype_t dt = g->dt;

	if (g->op < 0)
		return trunc_bits(hash3(g->seed, (uint64_t)r, i), dt);
	params(g, i, &p);
	if (is_float(dt))
		return enc_float(gen_fval(g, &p, r, i), dt);
	switch (g->op) {
	case IBC_SUM:
	case IBC_AVG:
		return trunc_bits(p.a + (uint64_t)r * p.b + (r == p.c ? p.d : 0), dt);
	case IBC_PROD:
		return trunc_bits((r + p.c) % 3 == 0 ? 0 - p.a : p.a, dt);
	default:
		return trunc_bits(g->lo + p.a + (uint64_t)((r + p.c) % nranks) * p.d, dt);
	}
}

/* the closed-form result of reducing element @i over all ranks */
static uint64_t want_red(const struct genctx *g, size_t i)
{
	struct elem_par p = { 0 };
	ibc_dtype_t dt = g->dt;
	int op = g->op;
	uint64_t n = (uint64_t)nranks;
	int neg;

	params(g, i, &p);
	neg = count_mod(nranks, 3, (3 - p.c) % 3);
	if (is_float(dt)) {
		double v;

		switch (op) {
		case IBC_SUM:
		case IBC_AVG:
			v = n * p.fa + p.fb * (double)(n * (n - 1) / 2) + (double)p.d; /* exact */
			if (op == IBC_AVG)
				v = dt == IBC_FLOAT64 ? v / nranks
						      : (double)((float)v / (float)nranks);
			break;
		case IBC_PROD:
			v = ldexp(neg % 2 ? -1.0 : 1.0,
				  count_mod(nranks, 4, (int)((4 - i % 4) % 4)));
			break;
		default:
			if (nan_index(i))
				v = NAN;
			else if (zero_index(i))
				v = op == IBC_MIN && nranks > 1 ? -0.0 : 0.0;
			else
				v = op == IBC_MIN ? p.fa : p.fa + (nranks - 1) * p.fb;
			break;
		}
		return enc_float(v, dt);
	}
	switch (op) {
	case IBC_SUM:
	case IBC_AVG: {
		uint64_t sum = trunc_bits(n * p.a + p.b * (n * (n - 1) / 2) + p.d, dt);

		if (op == IBC_SUM)
			return sum;
		/* C division of the wrapped sum, truncating toward zero */
		return trunc_bits(is_signed_int(dt) ? (uint64_t)(sext(sum, dt) / nranks) : sum / n,
				  dt);
	}
	case IBC_PROD: {
		uint64_t pw = 1;
		uint64_t base = p.a;
		uint64_t e = n;

		for (; e; e >>= 1, base *= base)
			if (e & 1)
				pw *= base;
		return trunc_bits(neg % 2 ? 0 - pw : pw, dt);
	}
	default:
		return trunc_bits(g->lo + p.a + (op == IBC_MIN ? 0 : (n - 1) * p.d), dt);
	}
}

/* ---------------------------------------------------------------------- */
/* guarded buffers                                                          */
/* ---------------------------------------------------------------------- */

struct gbuf {
	unsigned char *base;
	unsigned char *data; /* base + GUARD_BYTES */
	size_t nbytes;	     /* in use by the current case */
	size_t cap;	     /* allocated (buffers are reused across cases) */
	int active;	     /* part of the current case */
	unsigned char tag;   /* guard byte k is tag + 37 k: differs per buffer */
	int shared;	     /* base is from ibc_mem_alloc() */
};

static inline unsigned char guard_byte(const struct gbuf *b, long k)
{
	return (unsigned char)(b->tag + 37 * k);
}

static void guard_fill(struct gbuf *b)
{
	long k;

	for (k = 0; k < GUARD_BYTES; k++) {
		b->base[k] = guard_byte(b, k);
		b->data[b->nbytes + k] = guard_byte(b, GUARD_BYTES + k);
	}
}

static void gbuf_release(struct gbuf *b)
{
	if (b->shared)
		ibc_mem_free(b->base);
	else
		free(b->base);
	b->base = NULL;
}

/*
 * (Re)use @b for @nbytes: allocations are kept and reused, so that page
 * faults of fresh memory are paid once, not per case.
 */
static int gbuf_alloc(struct gbuf *b, size_t nbytes, unsigned char tag)
{
	if (!b->base || b->cap < nbytes) {
		/* 0x77: a receive buffer (the only ones shared with --mem-alloc-recv) */
		int shared = cfg.mem_alloc == 1 || (cfg.mem_alloc == 2 && tag == 0x77);
		void *p = NULL;

		gbuf_release(b);
		if (shared ? ibc_mem_alloc(&p, nbytes + 2 * GUARD_BYTES) != IBC_OK :
			     posix_memalign(&p, 64, nbytes + 2 * GUARD_BYTES) != 0) {
			printf("FAIL rank %d/%d: cannot allocate %zu bytes\n", rank, nranks,
			       nbytes);
			b->cap = 0;
			return -1;
		}
		b->base = p;
		b->cap = nbytes;
		b->shared = shared;
	}
	b->data = b->base + GUARD_BYTES;
	b->nbytes = nbytes;
	b->active = 1;
	b->tag = tag;
	guard_fill(b);
	return 0;
}

static void gbuf_free(struct gbuf *b)
{
	gbuf_release(b);
	memset(b, 0, sizeof(*b));
}

/* offset of the first damaged guard byte (negative: before), or 0 if intact */
static long gbuf_guard_damage(const struct gbuf *b)
{
	long k;

	if (!b->active)
		return 0;
	for (k = 0; k < GUARD_BYTES; k++)
		if (b->base[k] != guard_byte(b, k))
			return k - GUARD_BYTES; /* negative offset from data */
	for (k = 0; k < GUARD_BYTES; k++)
		if (b->data[b->nbytes + k] != guard_byte(b, GUARD_BYTES + k))
			return (long)b->nbytes + k + 1; /* 1-based past the end */
	return 0;
}

/* ---------------------------------------------------------------------- */
/* one case                                                                 */
/* ---------------------------------------------------------------------- */

struct ccase {
	int coll;
	ibc_dtype_t dt;
	int op;	  /* -1 for data movement */
	int root; /* -1 where not rooted */
	int inplace;
	int nonblocking;
	size_t count;
	uint64_t seed;
	long idx; /* case number (same on every rank) */
};

static void case_desc(char *s, size_t len, const struct ccase *c)
{
	char root[16] = "-";

	if (c->root >= 0)
		snprintf(root, sizeof(root), "%d", c->root);
	snprintf(s, len, "%s count %zu dtype %s op %s root %s %s %s", coll_names[c->coll], c->count,
		 dtype_names[c->dt], c->op >= 0 ? op_names[c->op] : "-", root,
		 c->inplace ? "in-place" : "out-of-place",
		 c->nonblocking ? "nonblocking" : "blocking");
}

/* buffers of one request */
struct rbufs {
	struct gbuf sb; /* send (or the single in-place buffer) */
	struct gbuf rb; /* receive (unused in place) */
	const void *sendptr;
	void *recvptr;
	uint64_t seed;
	struct genctx g;     /* the generators of this request's inputs */
	unsigned char *orig; /* copy of sb.data after setup: fast "unchanged" checks */
	size_t orig_cap;
};

static struct rbufs pool[NB_DEPTH]; /* request slots, reused across cases */

static int left_of(int r)
{
	return (r - 1 + nranks) % nranks;
}

static int right_of(int r)
{
	return (r + 1) % nranks;
}

/* element counts of the send and receive sides on this rank */
static void case_sizes(const struct ccase *c, size_t *ns, size_t *nr)
{
	size_t n = (size_t)nranks;

	switch (c->coll) {
	case C_ALLGATHER:
		*ns = c->count;
		*nr = n * c->count;
		break;
	case C_REDUCE_SCATTER:
		*ns = n * c->count;
		*nr = c->count;
		break;
	case C_ALLTOALL:
		*ns = n * c->count;
		*nr = n * c->count;
		break;
	default:
		*ns = c->count;
		*nr = c->count;
		break;
	}
}

static void fill_sentinel(void *p, size_t nbytes)
{
	memset(p, SENTINEL_BYTE, nbytes);
}

static void fill_input(void *p, const struct ccase *c, const struct genctx *g, size_t n,
		       size_t from)
{
	size_t i;

	for (i = 0; i < n; i++)
		put_elem(p, i, c->dt, gen(g, rank, from + i));
}

/* set up buffers and the pointers passed to the library */
static int setup(const struct ccase *c, struct rbufs *b)
{
	size_t es = esize(c->dt);
	size_t ns;
	size_t nr;
	int is_root = c->root == rank;

	case_sizes(c, &ns, &nr);
	b->sb.active = 0;
	b->rb.active = 0;
	if (!c->inplace) {
		if (gbuf_alloc(&b->sb, ns * es, 0x11) || gbuf_alloc(&b->rb, nr * es, 0x77))
			return -1;
		fill_input(b->sb.data, c, &b->g, ns, 0);
		fill_sentinel(b->rb.data, nr * es);
		b->sendptr = b->sb.data;
		b->recvptr = b->rb.data;
		/* rooted: the unused side may be NULL off the root (every other case) */
		if (c->coll == C_BROADCAST && !is_root) {
			fill_sentinel(b->sb.data, ns * es);
			if (c->idx % 2)
				b->sendptr = NULL;
		}
		if (c->coll == C_REDUCE && !is_root && c->idx % 2)
			b->recvptr = NULL;
		return 0;
	}
	switch (c->coll) {
	case C_ALLREDUCE:
	case C_REDUCE:
		if (gbuf_alloc(&b->sb, ns * es, 0x11))
			return -1;
		fill_input(b->sb.data, c, &b->g, ns, 0);
		b->sendptr = b->recvptr = b->sb.data;
		break;
	case C_BROADCAST:
		if (gbuf_alloc(&b->sb, ns * es, 0x11))
			return -1;
		if (is_root)
			fill_input(b->sb.data, c, &b->g, ns, 0);
		else
			fill_sentinel(b->sb.data, ns * es);
		b->sendptr = b->recvptr = b->sb.data;
		break;
	case C_ALLGATHER:
		if (gbuf_alloc(&b->sb, nr * es, 0x11))
			return -1;
		fill_sentinel(b->sb.data, nr * es);
		fill_input(b->sb.data + (size_t)rank * c->count * es, c, &b->g, c->count, 0);
		b->recvptr = b->sb.data;
		b->sendptr = b->sb.data + (size_t)rank * c->count * es;
		break;
	case C_REDUCE_SCATTER:
		if (gbuf_alloc(&b->sb, ns * es, 0x11))
			return -1;
		fill_input(b->sb.data, c, &b->g, ns, 0);
		b->sendptr = b->sb.data;
		b->recvptr = b->sb.data + (size_t)rank * c->count * es;
		break;
	default:
		return -1;
	}
	return 0;
}

static void pool_free(void)
{
	int k;

	for (k = 0; k < NB_DEPTH; k++) {
		gbuf_free(&pool[k].sb);
		gbuf_free(&pool[k].rb);
		free(pool[k].orig);
		pool[k].orig = NULL;
		pool[k].orig_cap = 0;
	}
}

/* keep a copy of the send side as set up */
static int save_orig(struct rbufs *b)
{
	if (!b->orig || b->orig_cap < b->sb.nbytes) {
		free(b->orig);
		b->orig = malloc(b->sb.nbytes ? b->sb.nbytes : 1);
		b->orig_cap = b->orig ? b->sb.nbytes : 0;
		if (!b->orig)
			return -1;
	}
	memcpy(b->orig, b->sb.data, b->sb.nbytes);
	return 0;
}

/* issue the collective, blocking (req_p NULL) or not */
static ibc_status_t issue(const struct ccase *c, struct rbufs *b, ibc_request_h *req_p,
			  ibc_request_h *req2_p)
{
	const void *s = b->sendptr;
	void *r = b->recvptr;
	size_t n = c->count;
	ibc_dtype_t dt = c->dt;
	ibc_redop_t op = (ibc_redop_t)c->op;

	switch (c->coll) {
	case C_ALLREDUCE:
		return req_p ? ibc_iallreduce(s, r, n, dt, op, comm, req_p)
			     : ibc_allreduce(s, r, n, dt, op, comm);
	case C_BROADCAST:
		return req_p ? ibc_ibroadcast(s, r, n, dt, c->root, comm, req_p)
			     : ibc_broadcast(s, r, n, dt, c->root, comm);
	case C_REDUCE:
		return req_p ? ibc_ireduce(s, r, n, dt, op, c->root, comm, req_p)
			     : ibc_reduce(s, r, n, dt, op, c->root, comm);
	case C_ALLGATHER:
		return req_p ? ibc_iallgather(s, r, n, dt, comm, req_p)
			     : ibc_allgather(s, r, n, dt, comm);
	case C_REDUCE_SCATTER:
		return req_p ? ibc_ireduce_scatter(s, r, n, dt, op, comm, req_p)
			     : ibc_reduce_scatter(s, r, n, dt, op, comm);
	case C_ALLTOALL:
		return req_p ? ibc_ialltoall(s, r, n, dt, comm, req_p)
			     : ibc_alltoall(s, r, n, dt, comm);
	case C_SENDRECV: {
		ibc_status_t st;

		/*
		 * Even ranks send first, odd ranks receive first: no cycle of
		 * waits even if the library ran point-to-point operations one
		 * at a time in issue order (rank 0 and an odd last rank both
		 * send first, but rank 0's send completes through rank 1).
		 */
		if (req_p) {
			if (rank % 2 == 0) {
				st = ibc_isend(s, n, dt, right_of(rank), comm, req_p);
				return st != IBC_OK
					   ? st
					   : ibc_irecv(r, n, dt, left_of(rank), comm, req2_p);
			}
			st = ibc_irecv(r, n, dt, left_of(rank), comm, req2_p);
			return st != IBC_OK ? st : ibc_isend(s, n, dt, right_of(rank), comm, req_p);
		}
		if (rank % 2 == 0) {
			st = ibc_send(s, n, dt, right_of(rank), comm);
			return st != IBC_OK ? st : ibc_recv(r, n, dt, left_of(rank), comm);
		}
		st = ibc_recv(r, n, dt, left_of(rank), comm);
		return st != IBC_OK ? st : ibc_send(s, n, dt, right_of(rank), comm);
	}
	default:
		return IBC_ERR_INTERNAL;
	}
}

/* expected element @j of this rank's output region (flat index in the recv layout) */
static uint64_t want_out(const struct ccase *c, const struct genctx *g, size_t j)
{
	size_t n = c->count;

	switch (c->coll) {
	case C_ALLREDUCE:
	case C_REDUCE:
		return want_red(g, j);
	case C_BROADCAST:
		return gen(g, c->root, j);
	case C_ALLGATHER:
		return gen(g, (int)(j / n), j % n);
	case C_REDUCE_SCATTER:
		return want_red(g, (size_t)rank * n + j);
	case C_ALLTOALL:
		return gen(g, (int)(j / n), (size_t)rank * n + j % n);
	case C_SENDRECV:
		return gen(g, left_of(rank), j);
	default:
		return 0;
	}
}

/*
 * Compare @nelem elements of @p (flat offset @from in the case's layout)
 * with: kind 0 the expected result, 1 this rank's input, 2 the untouched
 * sentinel. Report the first bad element.
 */
static int verify_region(const struct ccase *c, int k, const char *what, const void *p,
			 size_t nelem, size_t from, int kind, const struct genctx *g)
{
	size_t j;
	char desc[200];
	char gs[64];
	char ws[64];

	if (kind == 2) {
		const unsigned char *q = p;
		size_t nb = nelem * esize(c->dt);
		int all = 1;

		for (j = 0; j < nb; j++)
			all &= q[j] == SENTINEL_BYTE;
		if (all)
			return 1;
	}
	for (j = 0; j < nelem; j++) {
		uint64_t got = get_elem(p, j, c->dt);
		uint64_t want;

		switch (kind) {
		case 0: /* the result */
			want = want_out(c, g, from + j);
			break;
		case 1: /* this rank's input, unchanged */
			want = gen(g, rank, from + j);
			break;
		default: /* never written: sentinel */
			want = 0;
			memset(&want, SENTINEL_BYTE, esize(c->dt));
			break;
		}
		want = trunc_bits(want, c->dt);
		if (got == want ||
		    (kind == 0 && is_nan_bits(want, c->dt) && is_nan_bits(got, c->dt)))
			continue;
		case_desc(desc, sizeof(desc), c);
		fmt_elem(gs, sizeof(gs), got, c->dt);
		fmt_elem(ws, sizeof(ws), want, c->dt);
		if (c->nonblocking)
			snprintf(desc + strlen(desc), sizeof(desc) - strlen(desc), " request %d",
				 k);
		return check(0, "%s: %s: first bad index %zu got %s want %s", desc, what, from + j,
			     gs, ws);
	}
	return 1;
}

/* elements [off, off + nelem) of the send side still hold this rank's input */
static int unchanged(const struct ccase *c, int k, const char *what, const struct rbufs *b,
		     size_t off, size_t nelem)
{
	size_t es = esize(c->dt);

	if (!memcmp(b->sb.data + off * es, b->orig + off * es, nelem * es))
		return 1;
	return verify_region(c, k, what, b->sb.data + off * es, nelem, off, 1, &b->g);
}

/* verify everything of one request after it completed */
static void verify(const struct ccase *c, int k, struct rbufs *b)
{
	size_t es = esize(c->dt);
	size_t ns;
	size_t nr;
	int ok = 1;
	int is_root = c->root == rank;
	long dmg;
	char desc[200];

	case_sizes(c, &ns, &nr);
	if (!c->inplace) {
		if (c->coll == C_REDUCE && !is_root) {
			if (b->recvptr)
				ok &= verify_region(c, k, "recvbuf written off the root",
						    b->rb.data, nr, 0, 2, &b->g);
		} else {
			ok &= verify_region(c, k, "result", b->rb.data, nr, 0, 0, &b->g);
		}
		if (c->coll == C_BROADCAST && !is_root)
			ok &= verify_region(c, k, "sendbuf written off the root", b->sb.data, ns, 0,
					    2, &b->g);
		else
			ok &= unchanged(c, k, "sendbuf modified", b, 0, ns);
	} else {
		switch (c->coll) {
		case C_ALLREDUCE:
		case C_BROADCAST:
		case C_ALLGATHER:
			ok &= verify_region(c, k, "result", b->sb.data, nr, 0, 0, &b->g);
			break;
		case C_REDUCE:
			if (is_root)
				ok &= verify_region(c, k, "result", b->sb.data, nr, 0, 0, &b->g);
			else
				ok &= unchanged(c, k, "buffer modified off the root", b, 0, ns);
			break;
		case C_REDUCE_SCATTER: {
			size_t off = (size_t)rank * c->count;

			ok &= verify_region(c, k, "result", b->sb.data + off * es, c->count, 0, 0,
					    &b->g);
			ok &=
			    unchanged(c, k, "sendbuf modified before this rank's block", b, 0, off);
			ok &= unchanged(c, k, "sendbuf modified after this rank's block", b,
					off + c->count, ns - off - c->count);
			break;
		}
		default:
			break;
		}
	}
	dmg = gbuf_guard_damage(&b->sb);
	if (!dmg)
		dmg = gbuf_guard_damage(&b->rb);
	if (dmg) {
		case_desc(desc, sizeof(desc), c);
		ok &= check(0, "%s: wrote outside its buffer (guard byte %s%ld)", desc,
			    dmg < 0 ? "" : "+", dmg);
	}
	if (ok)
		check(1, "ok");
}

/* Run one case: blocking, or NB_DEPTH (or fewer, memory-capped) requests in flight. */
static void run_case(const struct ccase *c)
{
	struct rbufs *b = pool;
	ibc_request_h req[NB_DEPTH];
	ibc_request_h req2[NB_DEPTH]; /* sendrecv: the receives */
	ibc_status_t st;
	char desc[200];
	size_t ns;
	size_t nr;
	int depth = 1;
	double t;
	int k;

	case_desc(desc, sizeof(desc), c);
	if (cfg.verbose && rank == 0)
		printf("case %ld: %s\n", c->idx, desc);
	case_sizes(c, &ns, &nr);
	if (c->nonblocking) {
		size_t per = (ns + nr) * esize(c->dt) + 1;

		/* 16 in flight; fewer for large cases (memory, and checking time) */
		depth = c->count <= NB_FULL_DEPTH_MAX_COUNT ? NB_DEPTH : NB_LARGE_DEPTH;
		while (depth > 2 && depth * per > NB_MEM_CAP)
			depth /= 2;
	}
	t = now_s();
	for (k = 0; k < depth; k++) {
		b[k].seed = c->seed + 0x1000193ull * (uint64_t)k;
		genctx_init(&b[k].g, c->op, c->dt, b[k].seed);
		if (setup(c, &b[k]) || save_orig(&b[k])) {
			check(0, "%s: buffer setup failed", desc);
			goto out;
		}
		req[k] = NULL;
		req2[k] = NULL;
	}
	t_setup += now_s() - t;
	t = now_s();
	if (!c->nonblocking) {
		st = issue(c, &b[0], NULL, NULL);
		t_coll += now_s() - t;
		t = now_s();
		if (check(st == IBC_OK, "%s: returned %s (%d): %s", desc, ibc_status_str(st), st,
			  ibc_last_error()))
			verify(c, 0, &b[0]);
		t_verify += now_s() - t;
		goto out;
	}

	/* issue all, then poll in reverse order; completion follows issue order */
	for (k = 0; k < depth; k++) {
		st = issue(c, &b[k], &req[k], &req2[k]);
		if (!check(st == IBC_OK, "%s request %d: issue returned %s (%d): %s", desc, k,
			   ibc_status_str(st), st, ibc_last_error())) {
			depth = k; /* wait for the ones already issued, then stop */
			break;
		}
	}
	{
		double t0 = now_s();
		int done[NB_DEPTH] = {0};
		int ndone = 0;
		int order_bad = -1;

		int idle = 0;

		while (ndone < depth && now_s() - t0 < cfg.timeout_s) {
			int ndone0 = ndone;

			for (k = depth - 1; k >= 0; k--) {
				int d = 0;
				int d2 = 1;
				int j;

				if (done[k])
					continue;
				st = ibc_test(req[k], &d);
				if (st == IBC_OK && req2[k])
					st = ibc_test(req2[k], &d2);
				if (st != IBC_OK) {
					check(0, "%s request %d: ibc_test returned %s", desc, k,
					      ibc_status_str(st));
					d = d2 = 1;
				}
				if (!(d && d2))
					continue;
				done[k] = 1;
				ndone++;
				/* operations run in issue order: all earlier ones must be done */
				for (j = 0; j < k && order_bad < 0 && !req2[k]; j++) {
					int dj = 0;

					if (!done[j] && ibc_test(req[j], &dj) == IBC_OK && !dj)
						order_bad = k * 100 + j;
				}
			}
			/* leave the CPU to the progress threads when nothing moves */
			idle = ndone == ndone0 ? idle + 1 : 0;
			if (ndone < depth && idle > 100)
				usleep(100);
			else if (ndone < depth)
				sched_yield();
		}
		check(ndone == depth,
		      "%s: %d of %d requests not done after %.0f s of ibc_test polling", desc,
		      depth - ndone, depth, cfg.timeout_s);
		check(order_bad < 0,
		      "%s: request %d reported done before earlier request %d "
		      "(operations must complete in issue order)",
		      desc, order_bad / 100, order_bad % 100);
	}
	/* wait in reverse issue order; each returns the operation's status */
	for (k = depth - 1; k >= 0; k--) {
		ibc_status_t st2 = IBC_OK;
		double tv;

		st = ibc_wait(req[k]);
		if (req2[k])
			st2 = ibc_wait(req2[k]);
		tv = now_s();
		if (check(st == IBC_OK && st2 == IBC_OK,
			  "%s request %d: ibc_wait returned %s / %s: %s", desc, k,
			  ibc_status_str(st), ibc_status_str(st2), ibc_last_error()))
			verify(c, k, &b[k]);
		tv = now_s() - tv;
		t_verify += tv;
		t += tv; /* t_coll excludes verification */
	}
	t_coll += now_s() - t;
out:
	for (k = 0; k < NB_DEPTH; k++)
		b[k].sb.active = b[k].rb.active = 0;
}

/* ---------------------------------------------------------------------- */
/* barrier semantics through a counter shared by the ranks of one host      */
/* ---------------------------------------------------------------------- */

struct shared_counters {
	int counter[2][64]; /* [0] blocking rounds, [1] nonblocking requests */
};

static struct shared_counters *shared_map(char *path, size_t len)
{
	ibc_status_t st;
	void *p;
	int fd;
	int ok = 1;
	int all_ok = 0;

	/* rank 0 names the file; everyone learns the name by broadcast */
	if (rank == 0) {
		snprintf(path, len, "/dev/shm/ibc_coll_check_%d_%ld", (int)getpid(),
			 (long)time(NULL));
		fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd < 0 || ftruncate(fd, sizeof(struct shared_counters)) != 0)
			path[0] = '\0';
		if (fd >= 0)
			close(fd);
	}
	st = ibc_broadcast(path, path, len, IBC_UINT8, 0, comm);
	if (!check(st == IBC_OK, "barrier setup: broadcast of the counter file name returned %s",
		   ibc_status_str(st)))
		return NULL;
	fd = path[0] ? open(path, O_RDWR) : -1;
	p = fd >= 0 ? mmap(NULL, sizeof(struct shared_counters), PROT_READ | PROT_WRITE, MAP_SHARED,
			   fd, 0)
		    : MAP_FAILED;
	if (fd >= 0)
		close(fd);
	ok = p != MAP_FAILED;
	/* every rank must see the file (one host); else skip the semantic check */
	st = ibc_allreduce(&ok, &all_ok, 1, IBC_INT32, IBC_MIN, comm);
	if (!check(st == IBC_OK, "barrier setup: allreduce returned %s", ibc_status_str(st)) ||
	    !all_ok) {
		if (rank == 0)
			printf("note: barrier semantics not checked (ranks do not share %s)\n",
			       path[0] ? path : "/dev/shm");
		if (p != MAP_FAILED)
			munmap(p, sizeof(struct shared_counters));
		return NULL;
	}
	return p;
}

static void run_barrier(int nonblocking)
{
	enum { ROUNDS = 8 };
	char path[128] = "";
	struct shared_counters *sc;
	ibc_status_t st;
	int k;

	sc = shared_map(path, sizeof(path));
	if (!nonblocking) {
		for (k = 0; k < ROUNDS; k++) {
			/* the last to arrive changes each round and is late by 30 ms */
			if (rank == k % nranks)
				sleep_ms(30);
			if (sc)
				__atomic_add_fetch(&sc->counter[0][k], 1, __ATOMIC_SEQ_CST);
			st = ibc_barrier(comm);
			check(st == IBC_OK, "barrier round %d returned %s: %s", k,
			      ibc_status_str(st), ibc_last_error());
			if (sc) {
				int v = __atomic_load_n(&sc->counter[0][k], __ATOMIC_SEQ_CST);

				check(v == nranks,
				      "barrier round %d returned before every rank "
				      "entered: %d of %d had arrived",
				      k, v, nranks);
			}
		}
	} else {
		ibc_request_h req[NB_DEPTH];
		int n = 0;

		for (k = 0; k < NB_DEPTH; k++) {
			if (rank == k % nranks)
				sleep_ms(5);
			if (sc)
				__atomic_add_fetch(&sc->counter[1][k], 1, __ATOMIC_SEQ_CST);
			st = ibc_ibarrier(comm, &req[k]);
			if (!check(st == IBC_OK, "ibarrier %d: issue returned %s", k,
				   ibc_status_str(st)))
				break;
			n++;
		}
		for (k = n - 1; k >= 0; k--) {
			int d = 0;
			double t0 = now_s();

			while (!d && now_s() - t0 < cfg.timeout_s) {
				st = ibc_test(req[k], &d);
				if (st != IBC_OK)
					break;
				if (!d)
					sched_yield();
			}
			check(d, "ibarrier %d: not done after %.0f s", k, cfg.timeout_s);
			st = ibc_wait(req[k]);
			check(st == IBC_OK, "ibarrier %d: wait returned %s: %s", k,
			      ibc_status_str(st), ibc_last_error());
			if (sc && st == IBC_OK) {
				int v = __atomic_load_n(&sc->counter[1][k], __ATOMIC_SEQ_CST);

				check(v == nranks,
				      "ibarrier %d completed before every rank entered: "
				      "%d of %d",
				      k, v, nranks);
			}
		}
	}
	if (sc) {
		/* everyone is done with the file before rank 0 removes it */
		st = ibc_barrier(comm);
		check(st == IBC_OK, "barrier (cleanup) returned %s", ibc_status_str(st));
		munmap(sc, sizeof(*sc));
		if (rank == 0)
			unlink(path);
	}
}

/* ---------------------------------------------------------------------- */
/* the bf16 case of the issue                                               */
/* ---------------------------------------------------------------------- */

/*
 * Rank 0 contributes 1.0, every other rank 2^-8 (bf16 0x3b80), SUM.
 * With IBC_ACCUM_FP32=1 partial sums stay in fp32 and the result is
 * rounded once: 1 + (n-1) * 2^-8, for n = 8 the tie 1.02734375 -> 1.03125.
 * With per-hop rounding the result depends on the order in which the
 * contributions are added; in ibcoll's ring (see the report/README) the
 * chain of element 0 starts at rank 0, so every later addition of 2^-8 to
 * 1.0 is a tie that rounds back to even 1.0: the result is exactly 1.0.
 * That exact value is asserted with IBC_ALGO=ring; other algorithms (and
 * the tuner, which picks recursive doubling for small messages) add in
 * their own fixed order, checked by bounds and agreement across ranks.
 */
static void run_bf16_case(void)
{
	enum { N = 8 };
	uint16_t in[N];
	uint16_t out[N];
	const char *acc_env = getenv("IBC_ACCUM_FP32");
	const char *algo_env = getenv("IBC_ALGO");
	int accum = acc_env && strcmp(acc_env, "1") == 0;
	int algo_ring = algo_env && strcmp(algo_env, "ring") == 0;
	uint16_t want;
	ibc_status_t st;
	int k;

	if (nranks < 2)
		return;
	for (k = 0; k < N; k++)
		in[k] = rank == 0 ? 0x3f80 : 0x3b80;
	memset(out, SENTINEL_BYTE, sizeof(out));
	st = ibc_allreduce(in, out, 1, IBC_BFLOAT16, IBC_SUM, comm);
	if (!check(st == IBC_OK, "bf16 case: allreduce returned %s: %s", ibc_status_str(st),
		   ibc_last_error()))
		return;
	if (!accum && !algo_ring) {
		/*
		 * Another algorithm (IBC_ALGO=tree|rd|rabenseifner, or the tuner's
		 * choice when IBC_ALGO is unset) adds in another fixed order, so the
		 * per-hop result may differ in the last bit (docs/algorithms.md,
		 * "Determinism"): e.g. recursive doubling on 4 ranks computes
		 * (1 + 2^-8) + (2^-8 + 2^-8) = 1.0078125. Check what holds for every
		 * order: between 1.0 and the exact sum plus one ulp per hop, and the
		 * same bits on every rank.
		 */
		uint16_t all[64];
		double v = dec_float(out[0], IBC_BFLOAT16);
		int q;

		check(v >= 1.0 && v <= 1.0 + 2.0 * (nranks - 1) / 256.0,
		      "bf16 case (%d ranks, IBC_ALGO=%s): sum = 0x%04x (%.9g), not within [1, %.9g]",
		      nranks, algo_env ? algo_env : "auto", out[0], v,
		      1.0 + 2.0 * (nranks - 1) / 256.0);
		if (nranks <= 64 &&
		    check(ibc_allgather(out, all, 1, IBC_BFLOAT16, comm) == IBC_OK,
			  "bf16 case: allgather of the results failed"))
			for (q = 0; q < nranks; q++)
				check(all[q] == out[0], "bf16 case: rank %d got 0x%04x, this rank 0x%04x",
				      q, all[q], out[0]);
		check(out[1] == (uint16_t)(SENTINEL_BYTE * 0x101), "bf16 case: count 1 wrote element 1");
		return;
	}
	if (accum)
		want = (uint16_t)enc_float(1.0 + (nranks - 1) / 256.0, IBC_BFLOAT16);
	else
		want = 0x3f80;
	check(out[0] == want,
	      "bf16 case (%d ranks, IBC_ACCUM_FP32=%d): rank 0 gives 1.0, others "
	      "2^-8, sum = 0x%04x (%.9g), want 0x%04x (%.9g) (%s)",
	      nranks, accum, out[0], dec_float(out[0], IBC_BFLOAT16), want,
	      dec_float(want, IBC_BFLOAT16),
	      accum ? "fp32 accumulation, rounded once" : "per-hop rounding, chain from rank 0");
	check(out[1] == (uint16_t)(SENTINEL_BYTE * 0x101), "bf16 case: count 1 wrote element 1");
	if (rank == 0 && nranks == 8)
		printf("bf16 case: 8 ranks, IBC_ACCUM_FP32=%d: 1.0 + 7 x 2^-8 = %.9g (0x%04x)\n",
		       accum, dec_float(out[0], IBC_BFLOAT16), out[0]);
}

/* ---------------------------------------------------------------------- */
/* bad input: exact error codes and a helpful ibc_last_error()              */
/* ---------------------------------------------------------------------- */

/* does @text mention one of the |-separated @words (case-insensitive)? */
static int mentions(const char *text, const char *words)
{
	char buf[256];
	char low[1024];
	char *tok;
	char *save = NULL;
	size_t i;

	for (i = 0; text[i] && i < sizeof(low) - 1; i++)
		low[i] = (char)tolower((unsigned char)text[i]);
	low[i] = '\0';
	snprintf(buf, sizeof(buf), "%s", words);
	for (tok = strtok_r(buf, "|", &save); tok; tok = strtok_r(NULL, "|", &save))
		if (strstr(low, tok))
			return 1;
	return 0;
}

static void expect_err(ibc_status_t st, ibc_status_t want, const char *words, const char *what)
{
	const char *text = ibc_last_error();

	if (!check(st == want, "bad input: %s returned %s (%d), want %s (%d)", what,
		   ibc_status_str(st), st, ibc_status_str(want), want))
		return;
	check(text && text[0], "bad input: %s: ibc_last_error() is empty", what);
	check(text && mentions(text, words),
	      "bad input: %s: ibc_last_error() \"%s\" does not "
	      "mention the cause (any of: %s)",
	      what, text ? text : "(null)", words);
}

static void run_error_checks(void)
{
	float a[4] = {1, 2, 3, 4};
	float b[4 * 64];
	ibc_request_h req = (ibc_request_h)&a; /* must stay untouched on error */
	ibc_comm_h sub = NULL;
	ibc_status_t st;
	const ibc_dtype_t bad_dt = (ibc_dtype_t)99;
	const ibc_redop_t bad_op = (ibc_redop_t)99;
	const char *nullbuf = "null|buffer|sendbuf|recvbuf|buf";
	int d = 0;
	float want;

	memset(b, 0, sizeof(b));
	/* NULL buffers with count > 0 */
	expect_err(ibc_allreduce(NULL, b, 4, IBC_FLOAT32, IBC_SUM, comm), IBC_ERR_INVALID_ARG,
		   nullbuf, "allreduce(sendbuf NULL, count 4)");
	expect_err(ibc_allreduce(a, NULL, 4, IBC_FLOAT32, IBC_SUM, comm), IBC_ERR_INVALID_ARG,
		   nullbuf, "allreduce(recvbuf NULL, count 4)");
	expect_err(ibc_broadcast(a, NULL, 4, IBC_FLOAT32, 0, comm), IBC_ERR_INVALID_ARG, nullbuf,
		   "broadcast(recvbuf NULL)");
	if (rank == 0)
		expect_err(ibc_broadcast(NULL, b, 4, IBC_FLOAT32, 0, comm), IBC_ERR_INVALID_ARG,
			   nullbuf, "broadcast(sendbuf NULL on the root)");
	expect_err(ibc_allgather(NULL, b, 4, IBC_FLOAT32, comm), IBC_ERR_INVALID_ARG, nullbuf,
		   "allgather(sendbuf NULL)");
	expect_err(ibc_reduce_scatter(b, NULL, 4, IBC_FLOAT32, IBC_SUM, comm), IBC_ERR_INVALID_ARG,
		   nullbuf, "reduce_scatter(recvbuf NULL)");
	expect_err(ibc_alltoall(NULL, b, 1, IBC_FLOAT32, comm), IBC_ERR_INVALID_ARG, nullbuf,
		   "alltoall(sendbuf NULL)");
	expect_err(ibc_iallreduce(NULL, b, 4, IBC_FLOAT32, IBC_SUM, comm, &req),
		   IBC_ERR_INVALID_ARG, nullbuf, "iallreduce(sendbuf NULL)");
	check(req == (ibc_request_h)&a, "bad input: iallreduce wrote *req_p although it failed");
	/* bad dtype and op */
	expect_err(ibc_allreduce(a, b, 4, bad_dt, IBC_SUM, comm), IBC_ERR_INVALID_ARG,
		   "dtype|data type|datatype", "allreduce(dtype 99)");
	expect_err(ibc_allreduce(a, b, 4, (ibc_dtype_t)-1, IBC_SUM, comm), IBC_ERR_INVALID_ARG,
		   "dtype|data type|datatype", "allreduce(dtype -1)");
	expect_err(ibc_broadcast(a, b, 4, bad_dt, 0, comm), IBC_ERR_INVALID_ARG,
		   "dtype|data type|datatype", "broadcast(dtype 99)");
	expect_err(ibc_allreduce(a, b, 4, IBC_FLOAT32, bad_op, comm), IBC_ERR_INVALID_ARG,
		   "op|reduction", "allreduce(op 99)");
	expect_err(ibc_reduce(a, b, 4, IBC_FLOAT32, bad_op, 0, comm), IBC_ERR_INVALID_ARG,
		   "op|reduction", "reduce(op 99)");
	expect_err(ibc_reduce_scatter(b, a, 1, IBC_FLOAT32, (ibc_redop_t)-1, comm),
		   IBC_ERR_INVALID_ARG, "op|reduction", "reduce_scatter(op -1)");
	/* root out of range */
	expect_err(ibc_broadcast(a, b, 4, IBC_FLOAT32, nranks, comm), IBC_ERR_INVALID_ARG, "root",
		   "broadcast(root = nranks)");
	expect_err(ibc_broadcast(a, b, 4, IBC_FLOAT32, -1, comm), IBC_ERR_INVALID_ARG, "root",
		   "broadcast(root -1)");
	expect_err(ibc_reduce(a, b, 4, IBC_FLOAT32, IBC_SUM, nranks, comm), IBC_ERR_INVALID_ARG,
		   "root", "reduce(root = nranks)");
	expect_err(ibc_ireduce(a, b, 4, IBC_FLOAT32, IBC_SUM, -5, comm, &req), IBC_ERR_INVALID_ARG,
		   "root", "ireduce(root -5)");
	/* point to point: self and out of range */
	expect_err(ibc_send(a, 4, IBC_FLOAT32, rank, comm), IBC_ERR_INVALID_ARG,
		   "self|itself|own rank|this rank", "send(peer = own rank)");
	expect_err(ibc_recv(b, 4, IBC_FLOAT32, rank, comm), IBC_ERR_INVALID_ARG,
		   "self|itself|own rank|this rank", "recv(peer = own rank)");
	expect_err(ibc_send(a, 4, IBC_FLOAT32, nranks, comm), IBC_ERR_INVALID_ARG, "peer|range",
		   "send(peer = nranks)");
	expect_err(ibc_irecv(b, 4, IBC_FLOAT32, -1, comm, &req), IBC_ERR_INVALID_ARG, "peer|range",
		   "irecv(peer -1)");
	if (nranks > 1)
		expect_err(ibc_send(NULL, 4, IBC_FLOAT32, right_of(rank), comm),
			   IBC_ERR_INVALID_ARG, nullbuf, "send(buf NULL)");
	check(req == (ibc_request_h)&a, "bad input: a failed ibc_i*() call wrote *req_p");
	/* NULL communicator and request */
	expect_err(ibc_allreduce(a, b, 4, IBC_FLOAT32, IBC_SUM, NULL), IBC_ERR_INVALID_ARG, "comm",
		   "allreduce(comm NULL)");
	expect_err(ibc_barrier(NULL), IBC_ERR_INVALID_ARG, "comm", "barrier(comm NULL)");
	expect_err(ibc_send(a, 4, IBC_FLOAT32, 0, NULL), IBC_ERR_INVALID_ARG, "comm",
		   "send(comm NULL)");
	expect_err(ibc_wait(NULL), IBC_ERR_INVALID_ARG, "req|null", "wait(NULL)");
	expect_err(ibc_test(NULL, &d), IBC_ERR_INVALID_ARG, "req|null", "test(NULL)");

	/* count 0 is legal with NULL buffers */
	st = ibc_allreduce(NULL, NULL, 0, IBC_FLOAT32, IBC_SUM, comm);
	check(st == IBC_OK, "allreduce(count 0, NULL buffers) returned %s, want success",
	      ibc_status_str(st));
	st = ibc_allgather(NULL, NULL, 0, IBC_INT8, comm);
	check(st == IBC_OK, "allgather(count 0, NULL buffers) returned %s, want success",
	      ibc_status_str(st));

	/* the communicator still works after all that */
	b[0] = -1;
	st = ibc_allreduce(a, b, 4, IBC_FLOAT32, IBC_SUM, comm);
	check(st == IBC_OK && b[0] == nranks && b[3] == 4.0f * nranks,
	      "allreduce after the bad calls: %s, got %g want %d", ibc_status_str(st), b[0],
	      nranks);

	/* a destroyed communicator: registry lookup gives IBC_ERR_INVALID_USAGE */
	st = ibc_comm_split(comm, 0, rank, &sub);
	if (!check(st == IBC_OK && sub, "comm_split(color 0) returned %s: %s", ibc_status_str(st),
		   ibc_last_error()))
		return;
	st = ibc_allreduce(a, b, 4, IBC_FLOAT32, IBC_MAX, sub);
	want = 4.0f;
	check(st == IBC_OK && b[3] == want, "allreduce on the split communicator: %s, got %g",
	      ibc_status_str(st), b[3]);
	/*
	 * Everyone is done with @sub before it goes: destroying right after a
	 * collective while a peer still receives is tests/coll/teardown_check's
	 * subject, not this one's.
	 */
	st = ibc_barrier(sub);
	check(st == IBC_OK, "barrier on the split communicator returned %s", ibc_status_str(st));
	st = ibc_comm_destroy(sub);
	check(st == IBC_OK, "comm_destroy(split) returned %s", ibc_status_str(st));
	expect_err(ibc_allreduce(a, b, 4, IBC_FLOAT32, IBC_SUM, sub), IBC_ERR_INVALID_USAGE,
		   "destroy|invalid comm|unknown comm|freed|not a live|stale",
		   "allreduce on a destroyed communicator");
	expect_err(ibc_barrier(sub), IBC_ERR_INVALID_USAGE,
		   "destroy|invalid comm|unknown comm|freed|not a live|stale",
		   "barrier on a destroyed communicator");
	expect_err(ibc_isend(a, 4, IBC_FLOAT32, right_of(rank), sub, &req), IBC_ERR_INVALID_USAGE,
		   "destroy|invalid comm|unknown comm|freed|not a live|stale",
		   "isend on a destroyed communicator");
}

/* ---------------------------------------------------------------------- */
/* the sweep                                                                */
/* ---------------------------------------------------------------------- */

static int is_reducing(int coll)
{
	return coll == C_ALLREDUCE || coll == C_REDUCE || coll == C_REDUCE_SCATTER;
}

static int has_inplace(int coll)
{
	return coll == C_ALLREDUCE || coll == C_BROADCAST || coll == C_REDUCE ||
	       coll == C_ALLGATHER || coll == C_REDUCE_SCATTER;
}

/*
 * Without --full, counts >= --large-from (default LARGE_COUNT) run a
 * subset: data movement with int8, float16, float32 and float64 (1, 2, 4
 * and 8 byte elements); reductions with SUM for every selected dtype, AVG
 * for int32, float32 and bfloat16, MIN/MAX/PROD for float32 and bfloat16;
 * nonblocking only out of place. Smaller counts run everything selected
 * (the per-dtype arithmetic is covered there and by tests/unit/test_reduce;
 * large counts exercise chunking, pipelining and block partitioning).
 */
static int case_enabled(const struct ccase *c)
{
	if (cfg.full || c->count < cfg.large_from)
		return 1;
	if (c->nonblocking && c->inplace)
		return 0;
	if (c->op < 0)
		return c->dt == IBC_INT8 || c->dt == IBC_FLOAT16 || c->dt == IBC_FLOAT32 ||
		       c->dt == IBC_FLOAT64;
	if (c->op == IBC_SUM)
		return 1;
	if (c->op == IBC_AVG)
		return c->dt == IBC_INT32 || c->dt == IBC_FLOAT32 || c->dt == IBC_BFLOAT16;
	return c->dt == IBC_FLOAT32 || c->dt == IBC_BFLOAT16;
}

static void run_sweep(void)
{
	int roots[3];
	int nroots = 0;
	long idx = 0;
	int coll;
	int mode;
	int ci;
	int dt;
	int op;
	int place;
	int ri;

	roots[nroots++] = 0;
	if (nranks > 1)
		roots[nroots++] = 1;
	if (nranks > 2)
		roots[nroots++] = nranks - 1;

	for (coll = 0; coll < C_COUNT; coll++) {
		double t0 = now_s();
		long checks0 = n_checks;
		long failed0 = n_failed;

		if (!cfg.colls[coll])
			continue;
		if (coll == C_SENDRECV && nranks < 2)
			continue;
		for (mode = 0; mode < 2; mode++) {
			if (!cfg.modes[mode])
				continue;
			if (coll == C_BARRIER) {
				run_barrier(mode);
				continue;
			}
			for (ci = 0; ci < cfg.ncounts; ci++) {
				for (dt = 0; dt < IBC_DTYPE_COUNT; dt++) {
					if (!cfg.dtypes[dt])
						continue;
					for (op = is_reducing(coll) ? 0 : -1;
					     op < (is_reducing(coll) ? IBC_REDOP_COUNT : 0); op++) {
						if (op >= 0 && !cfg.ops[op])
							continue;
						for (place = 0; place < 2; place++) {
							if (!cfg.places[place] ||
							    (place && !has_inplace(coll)))
								continue;
							for (ri = 0; ri < (coll == C_BROADCAST ||
										   coll == C_REDUCE
									       ? nroots
									       : 1);
							     ri++) {
								struct ccase c = {
								    .coll = coll,
								    .dt = (ibc_dtype_t)dt,
								    .op = op,
								    .root = (coll == C_BROADCAST ||
									     coll == C_REDUCE)
										? roots[ri]
										: -1,
								    .inplace = place,
								    .nonblocking = mode,
								    .count = cfg.counts[ci],
								    .seed = mix(cfg.seed +
										(uint64_t)idx),
								    .idx = idx,
								};

								idx++;
								if (case_enabled(&c))
									run_case(&c);
							}
						}
					}
				}
			}
		}
		if (rank == 0)
			printf("rank 0: %-14s %6ld checks %4ld failed %7.2f s\n", coll_names[coll],
			       n_checks - checks0, n_failed - failed0, now_s() - t0);
		fflush(stdout);
	}
}

/* ---------------------------------------------------------------------- */
/* command line                                                             */
/* ---------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: coll_check [options]   (one process per rank; joins with ibc_comm_init_env)\n"
	    "  -c, --colls LIST    allreduce,broadcast,reduce,allgather,reduce_scatter,alltoall,\n"
	    "                      sendrecv,barrier or all (default all)\n"
	    "  -n, --counts LIST   element counts (default 0,1,2,7,1000,65537,1048579)\n"
	    "  -d, --dtypes LIST   int8,uint8,int32,uint32,int64,uint64,float16,bfloat16,\n"
	    "                      float32,float64 or all (default all)\n"
	    "  -o, --ops LIST      sum,prod,min,max,avg or all (default all)\n"
	    "  -m, --modes LIST    blocking,nonblocking (default both)\n"
	    "  -p, --places LIST   out,in (default both)\n"
	    "      --quick         counts 0,1,7,1000,65537\n"
	    "      --large-from N  counts >= N run a subset of dtype x op (default %d)\n"
	    "      --full          no subsetting at large counts (see case_enabled)\n"
	    "      --no-errors     skip the bad-input checks\n"
	    "      --no-bf16-case  skip the bf16 rounding case\n"
	    "      --mem-alloc     buffers from ibc_mem_alloc() (shared with local peers)\n"
	    "      --mem-alloc-recv  only the receive buffers of out-of-place cases from it\n"
	    "      --max-report N  failures printed per rank (default 20)\n"
	    "      --timeout S     bound on polling nonblocking requests (default 120 s)\n"
	    "      --seed N        input seed (default 1)\n"
	    "  -v, --verbose       print each case (rank 0)\n"
	    "exit status: 0 all checks of this rank passed, 1 a check failed, 2 could not start\n",
	    LARGE_COUNT);
}

/* parse a comma list of names into flags; "all" sets every one */
static int parse_names(const char *arg, const char *const *names, int n, int *flags)
{
	char buf[512];
	char *tok;
	char *save = NULL;
	int i;

	memset(flags, 0, sizeof(int) * (size_t)n);
	snprintf(buf, sizeof(buf), "%s", arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int found = 0;

		if (strcmp(tok, "all") == 0) {
			for (i = 0; i < n; i++)
				flags[i] = 1;
			continue;
		}
		for (i = 0; i < n; i++) {
			if (strcmp(tok, names[i]) == 0) {
				flags[i] = 1;
				found = 1;
			}
		}
		if (!found) {
			fprintf(stderr, "coll_check: unknown name '%s'\n", tok);
			return -1;
		}
	}
	return 0;
}

static int parse_counts(const char *arg)
{
	char buf[512];
	char *tok;
	char *save = NULL;

	cfg.ncounts = 0;
	snprintf(buf, sizeof(buf), "%s", arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long long v = strtoull(tok, &end, 0);

		if (*end || cfg.ncounts == MAX_COUNTS || v > (1ull << 34)) {
			fprintf(stderr, "coll_check: bad count '%s'\n", tok);
			return -1;
		}
		cfg.counts[cfg.ncounts++] = (size_t)v;
	}
	return cfg.ncounts ? 0 : -1;
}

static int parse_args(int argc, char **argv)
{
	static const char *const mode_names[2] = {"blocking", "nonblocking"};
	static const char *const place_names[2] = {"out", "in"};
	static const struct option longopts[] = {
	    {"colls", required_argument, NULL, 'c'},
	    {"counts", required_argument, NULL, 'n'},
	    {"dtypes", required_argument, NULL, 'd'},
	    {"ops", required_argument, NULL, 'o'},
	    {"modes", required_argument, NULL, 'm'},
	    {"places", required_argument, NULL, 'p'},
	    {"quick", no_argument, NULL, 'Q'},
	    {"full", no_argument, NULL, 'F'},
	    {"large-from", required_argument, NULL, 'L'},
	    {"no-errors", no_argument, NULL, 'E'},
	    {"no-bf16-case", no_argument, NULL, 'B'},
	    {"mem-alloc", no_argument, NULL, 'A'},
	    {"mem-alloc-recv", no_argument, NULL, 'V'},
	    {"max-report", required_argument, NULL, 'R'},
	    {"timeout", required_argument, NULL, 'T'},
	    {"seed", required_argument, NULL, 'S'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	int i;

	for (i = 0; i < C_COUNT; i++)
		cfg.colls[i] = 1;
	for (i = 0; i < IBC_DTYPE_COUNT; i++)
		cfg.dtypes[i] = 1;
	for (i = 0; i < IBC_REDOP_COUNT; i++)
		cfg.ops[i] = 1;
	cfg.modes[0] = cfg.modes[1] = 1;
	cfg.places[0] = cfg.places[1] = 1;
	cfg.errors = 1;
	cfg.bf16_case = 1;
	cfg.max_report = 20;
	cfg.timeout_s = 120;
	cfg.seed = 1;
	cfg.large_from = LARGE_COUNT;
	parse_counts("0,1,2,7,1000,65537,1048579");

	while ((ch = getopt_long(argc, argv, "c:n:d:o:m:p:vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			if (parse_names(optarg, coll_names, C_COUNT, cfg.colls))
				return -1;
			break;
		case 'n':
			if (parse_counts(optarg))
				return -1;
			break;
		case 'd':
			if (parse_names(optarg, dtype_names, IBC_DTYPE_COUNT, cfg.dtypes))
				return -1;
			break;
		case 'o':
			if (parse_names(optarg, op_names, IBC_REDOP_COUNT, cfg.ops))
				return -1;
			break;
		case 'm':
			if (parse_names(optarg, mode_names, 2, cfg.modes))
				return -1;
			break;
		case 'p':
			if (parse_names(optarg, place_names, 2, cfg.places))
				return -1;
			break;
		case 'Q':
			parse_counts("0,1,7,1000,65537");
			break;
		case 'F':
			cfg.full = 1;
			break;
		case 'L':
			cfg.large_from = (size_t)strtoull(optarg, NULL, 0);
			break;
		case 'E':
			cfg.errors = 0;
			break;
		case 'B':
			cfg.bf16_case = 0;
			break;
		case 'A':
			cfg.mem_alloc = 1;
			break;
		case 'V':
			cfg.mem_alloc = 2;
			break;
		case 'R':
			cfg.max_report = atoi(optarg);
			break;
		case 'T':
			cfg.timeout_s = atof(optarg);
			break;
		case 'S':
			cfg.seed = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'v':
			cfg.verbose = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "coll_check: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	ibc_status_t st;
	double t0 = now_s();

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse_args(argc, argv))
		return 2;
	st = ibc_comm_init_env(&comm);
	if (st != IBC_OK) {
		printf("coll_check rank %s: ibc_comm_init_env failed: %s: %s\n",
		       getenv("IBC_RANK") ? getenv("IBC_RANK") : "?", ibc_status_str(st),
		       ibc_last_error());
		return 2;
	}
	if (ibc_comm_rank(comm, &rank) != IBC_OK || ibc_comm_size(comm, &nranks) != IBC_OK ||
	    ibc_comm_transport(comm, &transport) != IBC_OK) {
		printf("coll_check: ibc_comm_rank/size/transport failed: %s\n", ibc_last_error());
		return 2;
	}
	if (rank == 0) {
		char counts[256] = "";
		int i;

		for (i = 0; i < cfg.ncounts; i++)
			snprintf(counts + strlen(counts), sizeof(counts) - strlen(counts), "%s%zu",
				 i ? "," : "", cfg.counts[i]);
		printf("coll_check: %d ranks, transport %s, counts %s%s\n", nranks, transport,
		       counts, cfg.full ? ", full" : "");
	}
	if (cfg.errors)
		run_error_checks();
	if (cfg.bf16_case)
		run_bf16_case();
	run_sweep();
	pool_free();

	st = ibc_comm_destroy(comm);
	check(st == IBC_OK, "comm_destroy returned %s: %s", ibc_status_str(st), ibc_last_error());
	if (cfg.verbose)
		printf(
		    "rank %d: %.1f s setting up buffers, %.1f s in collectives, %.1f s verifying\n",
		    rank, t_setup, t_coll, t_verify);
	printf("coll_check rank %d/%d (%s): %s: %ld checks, %ld failed, %.1f s\n", rank, nranks,
	       transport, n_failed ? "FAIL" : "PASS", n_checks, n_failed, now_s() - t0);
	return n_failed ? 1 : 0;
}
