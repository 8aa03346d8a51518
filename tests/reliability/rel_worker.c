/* SPDX-License-Identifier: MIT */
/*
 * rel_worker.c - one rank of a reliability scenario, started by the drivers
 * through rel_harness.c. It joins the communicator named by IBC_TEST_UID
 * (hex unique id; rank and size from IBC_RANK/IBC_NRANKS) or, with
 * --init-env, through ibc_comm_init_env(), runs the scenario and reports
 * each step on stdout in the line protocol of rel_harness.h. It uses the
 * public API only, except ibc_fault_fired_count() for the fault scenario.
 *
 * usage: rel_worker coll    [--count N] [--dtype f32|f64|i32|u8] [--coll NAME|all]
 *                           [--iters K] [--gap-ms G] [--nb] [--again]
 *                           [--hold-ms H] [--abort-on-error] [--init-env] [--warm]
 *          --gap-ms: pause between iterations, polling ibc_comm_get_async_error();
 *          --warm: one 1-element allreduce first (connections are made lazily)
 *          --watch-ms: when every call succeeded, poll ibc_comm_get_async_error()
 *          this long; --again: after an error, call once more (poisoned comm)
 *          --warm-coll N: first the collective itself, N elements, root 0, on
 *          every rank alike (the tuner's first call, connections), RES warm
 *          --then COLL: after the collectives succeeded, one COLL (RES then)
 *        rel_worker abort   --mode blocking|wait|split|queued [--delay-ms D]
 *        rel_worker idle    [--max-ms M]      (poll ibc_comm_get_async_error)
 *        rel_worker chain   [--hold-ms H] --coll recv|allreduce  a wait-for chain:
 *          after a ring shift (which connects r -> r+1), rank r < n-1 receives
 *          from r+1, which never sends (--coll allreduce: ranks < n-1 call a
 *          1024-element all-reduce that every rank calls once first); the last
 *          rank sleeps H ms outside the library, then destroys
 *        rel_worker hygiene --cycles C --warmup W
 * Result checks: allreduce/reduce inputs are small integers, so every sum is
 * exact; a wrong element is reported as status REL_DATA_WRONG.
 */
#include "config.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/util.h"
#include "ibcoll.h"

#define REL_DATA_WRONG 100

static int g_rank = -1;
static int g_nranks = -1;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static void ev(const char *name, int idx)
{
	printf("EV %s %d %lld\n", name, idx, (long long)now_ms());
	fflush(stdout);
}

/* RES line; newlines in @text are flattened so that one result is one line */
static void res(const char *phase, int idx, int st, int64_t t0, const char *text)
{
	char buf[1400];
	int64_t t = now_ms();
	size_t i;

	snprintf(buf, sizeof(buf), "%s", text && *text ? text : "-");
	for (i = 0; buf[i]; i++)
		if (buf[i] == '\n' || buf[i] == '\r')
			buf[i] = ' ';
	printf("RES %s %d %d %lld %lld %s\n", phase, idx, st, (long long)t, (long long)(t - t0), buf);
	fflush(stdout);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int parse_uid(const char *hex, ibc_unique_id_t *id)
{
	int i;

	if (!hex || strlen(hex) != 2 * IBC_UNIQUE_ID_BYTES)
		return -1;
	for (i = 0; i < IBC_UNIQUE_ID_BYTES; i++) {
		int hi = hexval(hex[2 * i]);
		int lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		id->internal[i] = (char)(hi << 4 | lo);
	}
	return 0;
}

struct opts {
	const char *scenario;
	size_t count;
	ibc_dtype_t dtype;
	const char *coll;
	int iters;
	int gap_ms;
	int nb;
	int again;
	int hold_ms;
	int abort_on_error;
	int init_env;
	int warm;
	size_t warm_count;              /* --warm-coll N; 0: none */
	const char *then;               /* --then COLL; NULL: none */
	int watch_ms;
	int root;
	const char *mode;
	int delay_ms;
	int max_ms;
	int cycles;
	int warmup;
};

static ibc_status_t do_init(const struct opts *o, ibc_comm_h *comm_p)
{
	ibc_unique_id_t id;

	if (o->init_env)
		return ibc_comm_init_env(comm_p);
	if (parse_uid(getenv("IBC_TEST_UID"), &id) != 0) {
		fprintf(stderr, "rel_worker: IBC_TEST_UID is missing or malformed\n");
		return IBC_ERR_INVALID_ARG;
	}
	return ibc_comm_init_rank(comm_p, g_nranks, &id, g_rank);
}

/* ---------------------------------------------------------------------- */
/* collectives with exact expected results                                */
/* ---------------------------------------------------------------------- */

struct bufs {
	void *send;
	void *recv;
	size_t esz;
};

/* element i of rank r's input: small integers, exact in every dtype */
static double input_val(int r, size_t i)
{
	return (double)(r + 1) + (double)(i % 7);
}

static void put_val(void *buf, ibc_dtype_t dt, size_t i, double v)
{
	switch (dt) {
	case IBC_FLOAT64: ((double *)buf)[i] = v; break;
	case IBC_INT32:   ((int32_t *)buf)[i] = (int32_t)v; break;
	case IBC_UINT8:   ((uint8_t *)buf)[i] = (uint8_t)v; break;
	default:          ((float *)buf)[i] = (float)v; break;
	}
}

static double get_val(const void *buf, ibc_dtype_t dt, size_t i)
{
	switch (dt) {
	case IBC_FLOAT64: return ((const double *)buf)[i];
	case IBC_INT32:   return ((const int32_t *)buf)[i];
	case IBC_UINT8:   return ((const uint8_t *)buf)[i];
	default:          return ((const float *)buf)[i];
	}
}

static size_t nblocks_of(const char *coll)
{
	if (!strcmp(coll, "allgather") || !strcmp(coll, "reduce_scatter") ||
	    !strcmp(coll, "alltoall"))
		return (size_t)g_nranks;
	return 1;
}

#define IBC_MAX_SZ(a, b) ((a) > (b) ? (a) : (b))

static int bufs_alloc(const struct opts *o, struct bufs *b)
{
	size_t nb = strcmp(o->coll, "all") ? nblocks_of(o->coll) : (size_t)g_nranks;
	size_t n = IBC_MAX_SZ(o->count, o->warm_count) * nb;
	size_t i;

	ibc_dtype_size(o->dtype, &b->esz);
	b->send = malloc(n * b->esz + 64);
	b->recv = malloc(n * b->esz + 64);
	if (!b->send || !b->recv)
		return -1;
	for (i = 0; i < n; i++)
		put_val(b->send, o->dtype, i, input_val(g_rank, i));
	memset(b->recv, 0, n * b->esz);
	return 0;
}

/* the inputs again, after a warm-up wrote the buffers */
static void bufs_refill(const struct opts *o, struct bufs *b)
{
	size_t nb = strcmp(o->coll, "all") ? nblocks_of(o->coll) : (size_t)g_nranks;
	size_t n = IBC_MAX_SZ(o->count, o->warm_count) * nb;
	size_t i;

	for (i = 0; i < n; i++)
		put_val(b->send, o->dtype, i, input_val(g_rank, i));
	memset(b->recv, 0, n * b->esz);
}

static ibc_status_t run_coll(const struct opts *o, ibc_comm_h comm, struct bufs *b)
{
	ibc_request_h req = NULL;
	ibc_request_h *rp = o->nb ? &req : NULL;
	ibc_status_t st;
	const char *c = o->coll;

	if (!strcmp(c, "allreduce"))
		st = rp ? ibc_iallreduce(b->send, b->recv, o->count, o->dtype, IBC_SUM, comm, rp)
			: ibc_allreduce(b->send, b->recv, o->count, o->dtype, IBC_SUM, comm);
	else if (!strcmp(c, "broadcast"))
		st = rp ? ibc_ibroadcast(b->send, b->recv, o->count, o->dtype, o->root, comm, rp)
			: ibc_broadcast(b->send, b->recv, o->count, o->dtype, o->root, comm);
	else if (!strcmp(c, "reduce"))
		st = rp ? ibc_ireduce(b->send, b->recv, o->count, o->dtype, IBC_SUM, o->root, comm, rp)
			: ibc_reduce(b->send, b->recv, o->count, o->dtype, IBC_SUM, o->root, comm);
	else if (!strcmp(c, "allgather"))
		st = rp ? ibc_iallgather(b->send, b->recv, o->count, o->dtype, comm, rp)
			: ibc_allgather(b->send, b->recv, o->count, o->dtype, comm);
	else if (!strcmp(c, "reduce_scatter"))
		st = rp ? ibc_ireduce_scatter(b->send, b->recv, o->count, o->dtype, IBC_SUM, comm, rp)
			: ibc_reduce_scatter(b->send, b->recv, o->count, o->dtype, IBC_SUM, comm);
	else if (!strcmp(c, "alltoall"))
		st = rp ? ibc_ialltoall(b->send, b->recv, o->count, o->dtype, comm, rp)
			: ibc_alltoall(b->send, b->recv, o->count, o->dtype, comm);
	else if (!strcmp(c, "barrier"))
		st = rp ? ibc_ibarrier(comm, rp) : ibc_barrier(comm);
	else if (!strcmp(c, "sendrecv")) {
		/* ring shift: even ranks send first, odd ranks receive first */
		int next = (g_rank + 1) % g_nranks;
		int prev = (g_rank + g_nranks - 1) % g_nranks;

		if (g_rank % 2 == 0) {
			st = ibc_send(b->send, o->count, o->dtype, next, comm);
			if (st == IBC_OK)
				st = ibc_recv(b->recv, o->count, o->dtype, prev, comm);
		} else {
			st = ibc_recv(b->recv, o->count, o->dtype, prev, comm);
			if (st == IBC_OK)
				st = ibc_send(b->send, o->count, o->dtype, next, comm);
		}
	} else {
		fprintf(stderr, "rel_worker: unknown collective %s\n", c);
		return IBC_ERR_INVALID_ARG;
	}
	if (st == IBC_OK && req)
		st = ibc_wait(req);
	return st;
}

/* check the result of @o->coll; returns -1 and the first wrong element in @why */
static int check_coll(const struct opts *o, const struct bufs *b, char *why, size_t len)
{
	int n = g_nranks;
	size_t nb = nblocks_of(o->coll);
	size_t total = o->count * nb;
	size_t stride = total > (1u << 20) ? 4099 : 1;
	size_t i;

	if (!strcmp(o->coll, "barrier"))
		return 0;
	for (i = 0; i < total; i += stride) {
		double want;
		double got;

		if (!strcmp(o->coll, "allreduce") || (!strcmp(o->coll, "reduce") && g_rank == o->root)) {
			want = (double)n * (n + 1) / 2 + (double)n * (double)(i % 7);
		} else if (!strcmp(o->coll, "reduce")) {
			return 0;
		} else if (!strcmp(o->coll, "broadcast")) {
			want = input_val(o->root, i);
		} else if (!strcmp(o->coll, "allgather")) {
			want = input_val((int)(i / o->count), i % o->count);
		} else if (!strcmp(o->coll, "reduce_scatter")) {
			if (i >= o->count)
				break;
			want = (double)n * (n + 1) / 2 +
			       (double)n * (double)((i + (size_t)g_rank * o->count) % 7);
		} else if (!strcmp(o->coll, "alltoall")) {
			/* block p came from rank p, which sent its block g_rank */
			size_t p = i / o->count;

			want = input_val((int)p, (size_t)g_rank * o->count + i % o->count);
		} else { /* sendrecv: from prev */
			if (i >= o->count)
				break;
			want = input_val((g_rank + n - 1) % n, i);
		}
		if (o->dtype == IBC_UINT8)
			want = (double)(uint8_t)want;
		got = get_val(b->recv, o->dtype, i);
		if (got != want) {
			snprintf(why, len, "wrong %s result at element %zu: got %g, want %g", o->coll, i,
				 got, want);
			return -1;
		}
	}
	return 0;
}

/*
 * --coll all: every collective once, blocking and nonblocking alternately,
 * each checked; returns the first error, or REL_DATA_WRONG with @why.
 */
static int run_all(const struct opts *o, ibc_comm_h comm, char *why, size_t len)
{
	static const char *const colls[] = {
		"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall",
		"barrier", "sendrecv",
	};
	size_t k;

	for (k = 0; k < sizeof(colls) / sizeof(colls[0]); k++) {
		struct opts oc = *o;
		struct bufs b = { 0 };
		ibc_status_t st;

		oc.coll = colls[k];
		oc.nb = k % 2 && strcmp(oc.coll, "sendrecv");
		if (bufs_alloc(&oc, &b) != 0) {
			snprintf(why, len, "out of memory");
			return REL_DATA_WRONG;
		}
		st = run_coll(&oc, comm, &b);
		if (st == IBC_OK && check_coll(&oc, &b, why, len) != 0)
			st = REL_DATA_WRONG;
		free(b.send);
		free(b.recv);
		if (st != IBC_OK)
			return st;
	}
	return IBC_OK;
}

/* connections are made on first use: a 1-element allreduce makes them */
static ibc_status_t warm_allreduce(ibc_comm_h comm)
{
	float x = 1.0f;
	float y = 0;
	ibc_status_t st = ibc_allreduce(&x, &y, 1, IBC_FLOAT32, IBC_SUM, comm);

	if (st == IBC_OK && y != (float)g_nranks) {
		fprintf(stderr, "rel_worker: warm-up allreduce gave %g, want %d\n", y, g_nranks);
		return IBC_ERR_INTERNAL;
	}
	return st;
}

static int scenario_coll(const struct opts *o)
{
	ibc_comm_h comm = NULL;
	struct bufs b = { 0 };
	ibc_status_t st;
	int64_t t0;
	int failed = 0;
	int async_seen = 0;
	int i;

	if (bufs_alloc(o, &b) != 0) {
		fprintf(stderr, "rel_worker: out of memory for %zu elements\n", o->count);
		return 2;
	}
	ev("init-start", 0);
	t0 = now_ms();
	st = do_init(o, &comm);
	res("init", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	if (st != IBC_OK)
		goto out;
	if (o->warm) {
		t0 = now_ms();
		st = warm_allreduce(comm);
		res("warm", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
		failed = st != IBC_OK;
	}
	if (o->warm_count && !failed) {
		struct opts w = *o;

		w.count = o->warm_count;
		w.root = 0;
		t0 = now_ms();
		st = run_coll(&w, comm, &b);
		res("warm", 1, st, t0, st == IBC_OK ? "" : ibc_last_error());
		failed = st != IBC_OK;
		bufs_refill(o, &b);
	}
	for (i = 0; i < o->iters && !failed; i++) {
		char why[256];

		ev("coll-start", i);
		t0 = now_ms();
		if (!strcmp(o->coll, "all"))
			st = run_all(o, comm, why, sizeof(why));
		else
			st = run_coll(o, comm, &b);
		if (st == REL_DATA_WRONG) {
			res("coll", i, REL_DATA_WRONG, t0, why);
			failed = 1;
			break;
		}
		if (st == IBC_OK && strcmp(o->coll, "all") && check_coll(o, &b, why, sizeof(why)) != 0) {
			res("coll", i, REL_DATA_WRONG, t0, why);
			failed = 1;
			break;
		}
		res("coll", i, st, t0, st == IBC_OK ? "" : ibc_last_error());
		if (st != IBC_OK) {
			failed = 1;
			break;
		}
		if (o->gap_ms && i + 1 < o->iters) {
			/* between collectives: watch for an error raised outside any call */
			int64_t tg = now_ms();
			ibc_status_t ast = IBC_OK;

			ev("gap", i);
			while (now_ms() - tg < o->gap_ms) {
				if (!async_seen && ibc_comm_get_async_error(comm, &ast) == IBC_OK &&
				    ast != IBC_OK) {
					res("async", i, ast, tg, ibc_last_error());
					async_seen = 1;
				}
				sleep_ms(2);
			}
		}
	}
	if (!failed && o->then) {
		struct opts w = *o;

		w.coll = o->then;
		t0 = now_ms();
		st = run_coll(&w, comm, &b);
		res("then", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
		failed = st != IBC_OK;
	}
	if (!failed && o->watch_ms) {
		/* our calls succeeded (e.g. a broadcast root's sends were buffered):
		 * a peer's error must still reach us, outside any call */
		ibc_status_t ast = IBC_OK;

		t0 = now_ms();
		while (now_ms() - t0 < o->watch_ms) {
			if (ibc_comm_get_async_error(comm, &ast) == IBC_OK && ast != IBC_OK)
				break;
			sleep_ms(2);
		}
		res("async", 0, ast, t0, ast == IBC_OK ? "" : ibc_last_error());
		failed = ast != IBC_OK;
	}
	if (failed && o->again) {
		/* a poisoned communicator answers at once with the same error */
		char first[1024];
		ibc_status_t st2;
		ibc_status_t ast = IBC_OK;

		snprintf(first, sizeof(first), "%s", ibc_last_error());
		t0 = now_ms();
		st2 = run_coll(o, comm, &b);
		res("again", 0, st2, t0, ibc_last_error());
		printf("EV again-same-text %d %lld\n", !strcmp(first, ibc_last_error()),
		       (long long)now_ms());
		ibc_comm_get_async_error(comm, &ast);
		res("async", 1, ast, t0, ibc_last_error());
	}
	if (o->hold_ms)
		sleep_ms(o->hold_ms);
	t0 = now_ms();
	if (failed && o->abort_on_error) {
		st = ibc_comm_abort(comm);
		res("abort", 0, st, t0, ibc_last_error());
	} else {
		st = ibc_comm_destroy(comm);
		res("destroy", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	}
out:
	/* fault scenario: how many injected faults fired in this process */
	t0 = now_ms();
	res("fired", 0, (int)ibc_fault_fired_count(), t0, "");
	free(b.send);
	free(b.recv);
	ev("exit", 0);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* abort from another thread                                              */
/* ---------------------------------------------------------------------- */

struct usage {
	long fds;
	long threads;
	long shm;
	long rss_kb;
};

static void measure(struct usage *u, long want_threads);
static void print_usage(const char *what, const struct usage *u);
static ibc_status_t warm_allreduce(ibc_comm_h comm);

struct blocked_arg {
	const struct opts *o;
	ibc_comm_h comm;
	struct bufs *b;
	ibc_status_t st;
	int64_t t_ret;
	char text[1024];
	ibc_comm_h newcomm;
	ibc_request_h req;
};

static void *blocked_thread(void *arg)
{
	struct blocked_arg *a = arg;
	const char *m = a->o->mode;

	if (!strcmp(m, "blocking"))
		a->st = ibc_allreduce(a->b->send, a->b->recv, a->o->count, a->o->dtype, IBC_SUM, a->comm);
	else if (!strcmp(m, "wait") || !strcmp(m, "queued"))
		a->st = ibc_wait(a->req);
	else
		a->st = ibc_comm_split(a->comm, 0, g_rank, &a->newcomm);
	a->t_ret = now_ms();
	snprintf(a->text, sizeof(a->text), "%s", ibc_last_error());
	return NULL;
}

static int scenario_abort(const struct opts *o)
{
	struct blocked_arg a = { .o = o };
	struct bufs b = { 0 };
	ibc_request_h extra[3] = { NULL, NULL, NULL };
	pthread_t tid;
	ibc_status_t st;
	int64_t t0;
	int64_t t_abort;
	int i;

	struct usage before;
	struct usage after;

	if (bufs_alloc(o, &b) != 0)
		return 2;
	a.b = &b;
	measure(&before, -1);
	t0 = now_ms();
	st = do_init(o, &a.comm);
	res("init", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	if (st != IBC_OK)
		return 0;
	if (o->warm) {
		t0 = now_ms();
		st = warm_allreduce(a.comm);
		res("warm", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	}
	if (!strcmp(o->mode, "wait") || !strcmp(o->mode, "queued")) {
		st = ibc_iallreduce(b.send, b.recv, o->count, o->dtype, IBC_SUM, a.comm, &a.req);
		if (st != IBC_OK) {
			res("blocked", 0, st, t0, ibc_last_error());
			return 0;
		}
	}
	if (!strcmp(o->mode, "queued")) {
		/* more requests queued behind the blocked one: abort completes them */
		for (i = 0; i < 3; i++)
			ibc_iallreduce(b.send, b.recv, o->count, o->dtype, IBC_SUM, a.comm, &extra[i]);
	}
	pthread_create(&tid, NULL, blocked_thread, &a);
	ev("blocked", 0);
	sleep_ms(o->delay_ms);
	t_abort = now_ms();
	st = ibc_comm_abort(a.comm);
	res("abort", 0, st, t_abort, ibc_last_error());
	pthread_join(tid, NULL);
	printf("RES blocked 0 %d %lld %lld %s\n", a.st, (long long)a.t_ret,
	       (long long)(a.t_ret - t_abort), *a.text ? a.text : "-");
	fflush(stdout);
	for (i = 0; i < 3; i++) {
		if (!extra[i])
			continue;
		t0 = now_ms();
		st = ibc_wait(extra[i]);
		res("queued", i, st, t0, ibc_last_error());
	}
	/* abort freed everything: the process is back where it was before init */
	measure(&after, before.threads);
	print_usage("before", &before);
	print_usage("after", &after);
	free(b.send);
	free(b.recv);
	ev("exit", 0);
	return 0;
}

static int scenario_idle(const struct opts *o)
{
	ibc_comm_h comm = NULL;
	ibc_status_t st;
	ibc_status_t ast = IBC_OK;
	int64_t t0 = now_ms();
	int64_t t_ready;

	st = do_init(o, &comm);
	res("init", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	if (st != IBC_OK)
		return 0;
	if (o->warm) {
		t0 = now_ms();
		st = warm_allreduce(comm);
		res("warm", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	}
	ev("ready", 0);
	t_ready = now_ms();
	while (now_ms() - t_ready < o->max_ms) {
		if (ibc_comm_get_async_error(comm, &ast) != IBC_OK || ast != IBC_OK)
			break;
		sleep_ms(5);
	}
	res("async", 0, ast, t_ready, ast == IBC_OK ? "" : ibc_last_error());
	t0 = now_ms();
	st = ibc_comm_destroy(comm);
	res("destroy", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	ev("exit", 0);
	return 0;
}

static int scenario_chain(const struct opts *o)
{
	ibc_request_h reqs[2] = { NULL, NULL };
	ibc_comm_h comm = NULL;
	ibc_status_t st;
	float out = (float)g_rank;
	float in = -1.0f;
	int64_t t0 = now_ms();
	int n = g_nranks;
	int nreq = 0;

	st = do_init(o, &comm);
	res("init", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	if (st != IBC_OK)
		return 0;
	/* the ring shift: rank r sends to r+1 and receives from r-1 (connects r -> r+1) */
	t0 = now_ms();
	if (g_rank + 1 < n)
		st = ibc_isend(&out, 1, IBC_FLOAT32, g_rank + 1, comm, &reqs[nreq++]);
	if (st == IBC_OK && g_rank > 0)
		st = ibc_irecv(&in, 1, IBC_FLOAT32, g_rank - 1, comm, &reqs[nreq++]);
	if (st == IBC_OK)
		st = ibc_waitall(nreq, reqs);
	if (st == IBC_OK && g_rank > 0 && in != (float)(g_rank - 1))
		st = REL_DATA_WRONG;
	res("warm", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	ev("ready", 0);
	t0 = now_ms();
	if (st == IBC_OK && strcmp(o->coll, "recv")) {
		/* every rank once (connections, tuner), then all but the last */
		static float buf[1024];

		st = ibc_allreduce(buf, buf, 1024, IBC_FLOAT32, IBC_SUM, comm);
		if (st == IBC_OK && g_rank + 1 < n)
			st = ibc_allreduce(buf, buf, 1024, IBC_FLOAT32, IBC_SUM, comm);
		else if (st == IBC_OK)
			sleep_ms(o->hold_ms);
		res("chain", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	} else if (st == IBC_OK && g_rank + 1 < n) {
		st = ibc_recv(&in, 1, IBC_FLOAT32, g_rank + 1, comm);
		res("chain", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	} else if (st == IBC_OK) {
		sleep_ms(o->hold_ms);
		res("chain", 0, IBC_OK, t0, "");
	}
	t0 = now_ms();
	st = ibc_comm_destroy(comm);
	res("destroy", 0, st, t0, st == IBC_OK ? "" : ibc_last_error());
	ev("exit", 0);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* resource hygiene                                                       */
/* ---------------------------------------------------------------------- */

static long count_dir(const char *path, const char *prefix, const char *suffix)
{
	DIR *d = opendir(path);
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);

		if (e->d_name[0] == '.')
			continue;
		if (prefix && strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		if (suffix && (l < strlen(suffix) || strcmp(e->d_name + l - strlen(suffix), suffix)))
			continue;
		n++;
	}
	closedir(d);
	return n;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/*
 * Measure, as the smallest counts seen over 200 ms (connections to and from
 * peers open and close asynchronously, a finished bootstrap root thread may
 * still be exiting: a leak shows in the minimum, a transient does not);
 * with @want_threads >= 0, wait up to 2 s for the threads to settle to it.
 */
static void measure(struct usage *u, long want_threads)
{
	char sfx[32];
	int64_t t0 = now_ms();

	snprintf(sfx, sizeof(sfx), "-%d", (int)getpid());
	do {
		u->threads = count_dir("/proc/self/task", NULL, NULL);
		if (want_threads < 0 || u->threads <= want_threads)
			break;
		sleep_ms(5);
	} while (now_ms() - t0 < 2000);
	u->fds = count_dir("/proc/self/fd", NULL, NULL) - 1; /* minus opendir's own fd */
	u->shm = count_dir("/dev/shm", "ibc-", sfx);
	t0 = now_ms();
	while (now_ms() - t0 < 200) {
		long f = count_dir("/proc/self/fd", NULL, NULL) - 1;
		long t = count_dir("/proc/self/task", NULL, NULL);
		long m = count_dir("/dev/shm", "ibc-", sfx);

		u->fds = IBC_MIN(u->fds, f);
		u->threads = IBC_MIN(u->threads, t);
		u->shm = IBC_MIN(u->shm, m);
		sleep_ms(10);
	}
	u->rss_kb = rss_kb();
}

static void print_usage(const char *what, const struct usage *u)
{
	printf("USE %s fds %ld threads %ld shm %ld rss_kb %ld\n", what, u->fds, u->threads, u->shm,
	       u->rss_kb);
	fflush(stdout);
}

static int scenario_hygiene(const struct opts *o)
{
	struct usage before = { -1, -1, -1, -1 };
	struct usage warm = { -1, -1, -1, -1 };
	struct usage end = { -1, -1, -1, -1 };
	struct usage after = { -1, -1, -1, -1 };
	ibc_unique_id_t id;
	ibc_comm_h comm = NULL;
	ibc_status_t st = IBC_OK;
	float one = 1.0f;
	float sum = 0;
	int64_t t0 = now_ms();
	int c;

	measure(&before, -1);
	print_usage("before", &before);
	if (parse_uid(getenv("IBC_TEST_UID"), &id) != 0)
		return 2;
	for (c = 0; c < o->cycles; c++) {
		ibc_unique_id_t next;

		st = ibc_comm_init_rank(&comm, g_nranks, &id, g_rank);
		if (st != IBC_OK)
			break;
		st = ibc_allreduce(&one, &sum, 1, IBC_FLOAT32, IBC_SUM, comm);
		if (st == IBC_OK && sum != (float)g_nranks) {
			char why[128];

			snprintf(why, sizeof(why), "cycle %d: 1-element allreduce gave %g, want %d", c,
				 sum, g_nranks);
			res("hyg", c, REL_DATA_WRONG, t0, why);
			ibc_comm_destroy(comm);
			return 0;
		}
		if (st != IBC_OK)
			break;
		if (c == o->warmup)
			measure(&warm, -1);
		if (c == o->cycles - 1)
			measure(&end, warm.threads);
		if (c + 1 < o->cycles) {
			/* the next cycle's id: made by rank 0, broadcast on this communicator */
			if (g_rank == 0)
				st = ibc_get_unique_id(&next);
			if (st == IBC_OK)
				st = ibc_broadcast(&next, &next, sizeof(next), IBC_UINT8, 0, comm);
			if (st != IBC_OK)
				break;
			id = next;
		}
		st = ibc_comm_destroy(comm);
		comm = NULL;
		if (st != IBC_OK)
			break;
	}
	if (st != IBC_OK) {
		res("hyg", c, st, t0, ibc_last_error());
		if (comm)
			ibc_comm_destroy(comm);
		return 0;
	}
	measure(&after, before.threads);
	print_usage("warm", &warm);
	print_usage("end", &end);
	print_usage("after", &after);
	res("hyg", o->cycles, IBC_OK, t0, "");
	ev("exit", 0);
	return 0;
}

/* ---------------------------------------------------------------------- */

static int parse_dtype(const char *s, ibc_dtype_t *dt)
{
	if (!strcmp(s, "f32"))
		*dt = IBC_FLOAT32;
	else if (!strcmp(s, "f64"))
		*dt = IBC_FLOAT64;
	else if (!strcmp(s, "i32"))
		*dt = IBC_INT32;
	else if (!strcmp(s, "u8"))
		*dt = IBC_UINT8;
	else
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {
		.count = 1024, .dtype = IBC_FLOAT32, .coll = "allreduce", .iters = 1,
		.mode = "blocking", .delay_ms = 300, .max_ms = 20000, .cycles = 10, .warmup = 2,
	};
	const char *s;
	int i;

	if (argc < 2) {
		fprintf(stderr, "usage: rel_worker coll|abort|idle|hygiene|chain [options]\n");
		return 2;
	}
	o.scenario = argv[1];
	for (i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : "";

		if (!strcmp(a, "--count")) {
			o.count = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--dtype")) {
			if (parse_dtype(v, &o.dtype) != 0)
				return 2;
			i++;
		} else if (!strcmp(a, "--coll")) {
			o.coll = v;
			i++;
		} else if (!strcmp(a, "--iters")) {
			o.iters = atoi(v);
			i++;
		} else if (!strcmp(a, "--gap-ms")) {
			o.gap_ms = atoi(v);
			i++;
		} else if (!strcmp(a, "--hold-ms")) {
			o.hold_ms = atoi(v);
			i++;
		} else if (!strcmp(a, "--mode")) {
			o.mode = v;
			i++;
		} else if (!strcmp(a, "--delay-ms")) {
			o.delay_ms = atoi(v);
			i++;
		} else if (!strcmp(a, "--max-ms")) {
			o.max_ms = atoi(v);
			i++;
		} else if (!strcmp(a, "--cycles")) {
			o.cycles = atoi(v);
			i++;
		} else if (!strcmp(a, "--warmup")) {
			o.warmup = atoi(v);
			i++;
		} else if (!strcmp(a, "--watch-ms")) {
			o.watch_ms = atoi(v);
			i++;
		} else if (!strcmp(a, "--root")) {
			o.root = atoi(v);
			i++;
		} else if (!strcmp(a, "--warm-coll")) {
			o.warm_count = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--then")) {
			o.then = v;
			i++;
		} else if (!strcmp(a, "--warm")) {
			o.warm = 1;
		} else if (!strcmp(a, "--nb")) {
			o.nb = 1;
		} else if (!strcmp(a, "--again")) {
			o.again = 1;
		} else if (!strcmp(a, "--abort-on-error")) {
			o.abort_on_error = 1;
		} else if (!strcmp(a, "--init-env")) {
			o.init_env = 1;
		} else {
			fprintf(stderr, "rel_worker: unknown option %s\n", a);
			return 2;
		}
	}
	s = getenv("IBC_RANK");
	g_rank = s ? atoi(s) : -1;
	s = getenv("IBC_NRANKS");
	g_nranks = s ? atoi(s) : -1;
	if (!strcmp(o.scenario, "coll"))
		return scenario_coll(&o);
	if (!strcmp(o.scenario, "abort"))
		return scenario_abort(&o);
	if (!strcmp(o.scenario, "idle"))
		return scenario_idle(&o);
	if (!strcmp(o.scenario, "hygiene"))
		return scenario_hygiene(&o);
	if (!strcmp(o.scenario, "chain"))
		return scenario_chain(&o);
	fprintf(stderr, "rel_worker: unknown scenario %s\n", o.scenario);
	return 2;
}
