/* SPDX-License-Identifier: MIT */
/*
 * tune_retime.c - the tuner's re-timing: each all-reduce size class timed
 * for real once the job runs, and again when its calls drift from that
 * timing (below, "Re-timing"); the tuner (tuner.c) counts the calls and
 * asks here.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/status.h"
#include "base/util.h"
#include "coll/coll.h"
#include "coll/algo.h"
#include "tune/tune.h"
#include "tune/tune_internal.h"

/*
 * Re-timing (IBC_TUNING_RETIME). The probe and the race take 30-50 ms at
 * the first collective, when a host is busiest (other ranks starting, data
 * loading, an interpreter importing), and the model they leave can be off
 * by 2x for the whole job: 2 shm ranks started while three other processes
 * were busy kept 8-byte all-reduces at 102 us instead of 0.6 us for good,
 * and the model prices the shm all-reduce above the ring at 16-64 MiB,
 * where it runs in half the time (issue 22). So each all-reduce size class
 * (a power of two of bytes) is timed for real at its IBC_TUNING_RETIME-th
 * call, on the operation's own input, with every algorithm that applies
 * (tuner_retime(); not only those the model prices near its best: a probe
 * run under load prices message steps at hundreds of us, 375 us once in a
 * make check, and would leave the shm all-reduce the only candidate at
 * every size, untimed); the fastest,
 * the slowest rank's fastest repetition, runs the class from then on
 * (the current choice stands within RETIME_KEEP of it). Every rank counts
 * the same calls, so every rank times at the same operation, and the times
 * are agreed by a max all-reduce, so every rank decides alike.
 * Afterwards each rank keeps the fastest measured / predicted ratio of the
 * calls that ran the choice, of every RETIME_SAMPLE-th call
 * (ibc_tune_retime_sampled(), ibc_tuner_observe(): the fastest, because a
 * call also waits for the slowest rank to arrive); at checkpoints, the
 * first 256 calls after the first timing and each gap twice the last (after
 * a checkpoint and after a timing alike) up to 65536, the ranks agree
 * (min all-reduce) on the fastest rank's ratio; the first checkpoint after
 * a timing times the class again where it is over RETIME_DRIFT times the
 * timing's (the winner's fastest single call, the fastest rank's) or under
 * 1 / RETIME_FIRST_DOWN of it (the timing ran under load), and otherwise
 * keeps it as the baseline that later checkpoints compare with, RETIME_DRIFT
 * either way (the same statistic: a job's calls find their peers' data
 * waiting more often than back-to-back calls do). A checkpoint costs one
 * 16-byte all-reduce; a timing, an 8-byte all-reduce (every rank has the
 * buffers), about 16 operations of the size and the agreement on their
 * times. With one candidate, or where a rank has no memory for an in-place
 * call's copy of its input, the class keeps the model's choice, untimed.
 */
#define RETIME_KEEP 1.05                /* the current choice stands within this x the fastest */
#define RETIME_DRIFT 1.5                /* a checkpoint times again beyond this factor */
#define RETIME_FIRST_DOWN 3.0           /* the first checkpoint: calls this much faster than the
					 * timing mean a timing under load */
#define RETIME_FIRST_GAP 256            /* calls from a re-timing to the first checkpoint */
#define RETIME_MAX_GAP 65536            /* checkpoint gaps double up to this */
#define RETIME_REP_US 200.0             /* a timed repetition: this long, predicted (<= 64 calls) */
#define RETIME_SAMPLE 8                 /* ibc_tuner_observe() times 1 call in this many of a class */


/* an internal operation on the same sequence number as @op (agreement, probe) */
void ibc_tune_internal_req(const struct ibc_op *op, int coll, void *buf, size_t count,
			   ibc_dtype_t dtype, struct ibc_op *out)
{
	memset(out, 0, sizeof(*out));
	out->coll = coll;
	out->sendbuf = buf;
	out->recvbuf = buf;
	out->count = count;
	out->dtype = dtype;
	out->redop = IBC_SUM;
	out->root = coll == IBC_COLL_BROADCAST ? 0 : -1;
	out->seq = op->seq;
	out->user = op;
}


/* 1 where the re-timing runs: the same verdict on every rank (agreed model) */
int ibc_tune_retime_on(const struct ibc_tuner *t, size_t nbytes)
{
	const struct ibc_tune_model *m = &t->meff;

	return m->retime > 0 && m->probe && !(m->source & IBC_TUNE_SRC_FILE) &&
	       m->force_algo < 0 && m->force_proto < 0 && m->force_chunk <= 0 &&
	       nbytes > 0 && (int64_t)nbytes <= m->retime_max && m->nranks > 1;
}

/* the size class of @nbytes > 0: floor(log2) */
int ibc_tune_size_class(size_t nbytes)
{
	int b = 0;

	while (b < RETIME_CLASSES - 1 && ((size_t)2 << b) <= nbytes)
		b++;
	return b;
}

ibc_status_t ibc_tune_agree(struct ibc_tuner *t, const struct ibc_op *op, double *v, size_t n,
			    ibc_redop_t redop)
{
	struct ibc_op ar;

	if (n > TUNE_AGREE_DOUBLES)
		return ibc_net_fail(t->coll->net, IBC_ERR_INTERNAL, -1,
				     "tuner agreement of %zu values (at most %d)", n,
				     TUNE_AGREE_DOUBLES);
	memcpy(t->agree, v, n * sizeof(double));
	ibc_tune_internal_req(op, IBC_COLL_ALLREDUCE, t->agree, n, IBC_FLOAT64, &ar);
	ar.redop = redop;
	IBC_CHECK(ibc_ring_allreduce(t->coll, &ar));
	memcpy(v, t->agree, n * sizeof(double));
	return IBC_OK;
}

/*
 * Time every all-reduce algorithm that applies on @op's size, dtype and
 * operation, on @op's own buffers (in place where @op is, with its input
 * saved and put back); the results are thrown away and @op runs
 * afterwards. A warm-up and IBC_TUNE_RACE_REPS repetitions, the
 * candidates interleaved within a repetition, each rank's fastest
 * repetition, the slowest rank's (max all-reduce). The shm all-reduce is
 * last in enum order, never the first of two or more candidates, as in
 * the race (tuner_race(): the same announcement rule). Collective.
 */
static ibc_status_t tuner_retime(struct ibc_tuner *t, struct ibc_op *op, size_t nbytes,
				 struct tune_retime *r, const char *why)
{
	struct ibc_coll *cl = t->coll;
	struct ibc_algo_choice c[IBC_ALGO_COUNT];
	struct ibc_algo_choice own;
	double fast[IBC_ALGO_COUNT];
	double one[IBC_ALGO_COUNT];     /* each candidate's fastest single call */
	double both[2 * IBC_ALGO_COUNT];
	double v[IBC_ALGO_COUNT];
	double best = HUGE_VAL;
	struct ibc_op ar;
	ibc_status_t st = IBC_OK;
	void *tmp = NULL;
	void *out = op->recvbuf;
	int before;
	int iters;
	int win;
	int n = 0;
	int a;
	int k;
	int rep;

	ibc_tune_choose(&t->meff, IBC_TUNE_ALLREDUCE, nbytes, &own);
	before = r->valid && r->algo >= 0 ? r->algo : own.algo;
	a = ibc_tune_price_all(&t->meff, IBC_TUNE_ALLREDUCE, nbytes, v, c);
	best = a < 0 ? HUGE_VAL : v[a];
	for (a = 0; a < IBC_ALGO_COUNT; a++)
		if (v[a] < HUGE_VAL)
			c[n++] = c[a];
	/* until timed: the model's choice (algo -1), no checkpoints (ratio 0) */
	r->valid = 1;
	r->algo = -1;
	r->ratio = 0;
	r->seen = 0;
	r->base = 0;
	r->gap = r->gap ? IBC_MIN(2 * r->gap, (uint64_t)RETIME_MAX_GAP) : RETIME_FIRST_GAP;
	r->next = r->calls + r->gap;
	if (n < 2)
		return IBC_OK;  /* nothing to choose between (the same n on every rank) */
	/*
	 * An in-place call is timed in place, on the user's buffer, which the
	 * transports already know (a second buffer for the results would be
	 * one more verbs registration per timing, which the registration
	 * cache exists to avoid, tests/rxe "registration cache"): its input
	 * is kept in a copy and put back before @op runs. Every rank agrees
	 * that all have the copy (a min all-reduce, also where this rank's
	 * call is out of place, so that every rank runs the same operations);
	 * where one has not, the class keeps the model's choice.
	 */
	if (op->sendbuf == op->recvbuf) {
		tmp = ibc_aligned_alloc(4096, nbytes, "tuner re-timing");
		if (tmp)
			memcpy(tmp, op->recvbuf, nbytes);
		else
			out = NULL;
	}
	fast[0] = out ? 1 : 0;
	IBC_CHECK_GOTO(ibc_tune_agree(t, op, fast, 1, IBC_MIN), st, done);
	if (fast[0] == 0) {
		IBC_LOG_WARN(TUNING, "all-reduce of %zu bytes: a rank has no memory for a copy of its in-place input; the tuner keeps the model's choice (%s) for its size class instead of timing the algorithms",
			     nbytes, ibc_algo_name(own.algo));
		goto done;
	}
	iters = (int)IBC_MIN(64.0, IBC_MAX(1.0, ceil(RETIME_REP_US / IBC_MAX(best, 0.01))));
	for (k = 0; k < n; k++)
		fast[k] = one[k] = HUGE_VAL;
	for (rep = -1; rep < IBC_TUNE_RACE_REPS; rep++)
		for (k = 0; k < n; k++) {
			uint64_t ts = ibc_time_ns();
			uint64_t tc = ts;
			int it;

			for (it = 0; it < iters; it++) {
				uint64_t te;

				ibc_tune_internal_req(op, IBC_COLL_ALLREDUCE, op->recvbuf,
						      op->count, op->dtype, &ar);
				ar.sendbuf = op->sendbuf;
				ar.recvbuf = out;
				ar.redop = op->redop;
				ibc_shmar_announce(cl, &ar);
				IBC_CHECK_GOTO(ibc_coll_run_choice(cl, &ar, &c[k]), st, done);
				te = ibc_time_ns();
				if (rep >= 0)
					one[k] = IBC_MIN(one[k], (double)(te - tc) / 1000.0);
				tc = te;
			}
			if (rep >= 0)
				fast[k] = IBC_MIN(fast[k],
						  (double)(ibc_time_ns() - ts) / 1000.0 / iters);
		}
	if (tmp)
		memcpy(op->recvbuf, tmp, nbytes);       /* the in-place call's input again */
	/* tests: a timing taken under load (IBC_FAULT_INJECT=retime:<n>) */
	if (ibc_fault_hit(IBC_FAULT_RETIME, "the tuner's re-timing"))
		for (k = 0; k < n; k++) {
			fast[k] *= 4;
			one[k] *= 4;
		}
	/* @op again before the agreement (tuner_race(): a rank leaving it may run @op) */
	ibc_shmar_announce(cl, op);
	/* one max all-reduce: the slowest rank's fastest repetition, and (negated)
	 * the fastest rank's fastest single call */
	for (k = 0; k < n; k++) {
		both[k] = fast[k];
		both[n + k] = -one[k];
	}
	IBC_CHECK_GOTO(ibc_tune_agree(t, op, both, 2 * (size_t)n, IBC_MAX), st, done);
	for (k = 0; k < n; k++) {
		fast[k] = both[k];
		one[k] = -both[n + k];
	}
	win = 0;
	for (k = 1; k < n; k++)
		if (fast[k] < fast[win])
			win = k;
	for (k = 0; k < n; k++)
		if (c[k].algo == before && fast[k] <= RETIME_KEEP * fast[win])
			win = k;
	r->algo = c[win].algo;
	/*
	 * What the checkpoints compare with: the winner's fastest single call,
	 * the fastest rank's, the cost of a call that finds its peers' data
	 * waiting, which the timing's back-to-back calls and the job's own
	 * calls both see. (The slowest rank's fastest repetition against the
	 * slowest rank's fastest call read 0.4-0.6x at every checkpoint of a
	 * steady 2-rank 8-byte loop, and each timed the class again; so did the
	 * slowest rank's fastest single call: in back-to-back calls the rank
	 * that leads always waits, in a job's calls the lead changes.)
	 */
	r->ratio = c[win].predicted_us > 0 ? one[win] / c[win].predicted_us : 0;
	if (cl->net->rank == 0)
		ibc_tune_cache_store(&t->m, cl->net->nlocal, ibc_tune_size_class(nbytes), r->algo,
				     nbytes, fast[win]);
	memset(t->cache[IBC_TUNE_ALLREDUCE], 0, sizeof(t->cache[IBC_TUNE_ALLREDUCE]));
	if (cl->net->rank == 0 && ibc_log_enabled(IBC_LEVEL_INFO, IBC_SUBSYS_TUNING)) {
		char txt[512];
		char cls[32];
		size_t len = 0;

		txt[0] = '\0';
		for (k = 0; k < n && len < sizeof(txt); k++)
			len += (size_t)snprintf(txt + len, sizeof(txt) - len, "%s%s %.1f us (predicted %.1f)",
						k ? ", " : "", ibc_algo_name(c[k].algo), fast[k],
						c[k].predicted_us);
		ibc_tune_bytes_text((size_t)1 << ibc_tune_size_class(nbytes), cls, sizeof(cls));
		IBC_LOG_INFO(TUNING, "re-timed all-reduce of %zu bytes on %d ranks over %s (size class from %s, call %llu, %s): %s; %s -> %s",
			     nbytes, t->m.nranks, ibc_tune_tp_name(t->m.tp), cls,
			     (unsigned long long)r->calls, why, txt, ibc_algo_name(before),
			     ibc_algo_name(r->algo));
	}
done:
	ibc_free(tmp);
	return st;
}

/*
 * Count an all-reduce of @nbytes in its size class. Returns 1 where it is
 * the class's first timing call or a checkpoint (the same call on every
 * rank), 0 otherwise.
 */
int ibc_tune_retime_count(struct ibc_tuner *t, size_t nbytes)
{
	struct tune_retime *r;
	int cls;
	int a;

	if (!ibc_tune_retime_on(t, nbytes))
		return 0;
	cls = ibc_tune_size_class(nbytes);
	r = &t->rt[cls];
	r->calls++;
	a = t->meff.cached_algo[cls];
	if (!r->valid && r->calls == 1 && a >= 0 && ibc_tune_algo_ok(&t->meff, IBC_TUNE_ALLREDUCE, a)) {
		/* the decision cache's choice from the first call, timed at the first checkpoint */
		r->valid = 1;
		r->cached = 1;
		r->algo = a;
		r->ratio = 0;
		r->next = RETIME_FIRST_GAP;
		memset(t->cache[IBC_TUNE_ALLREDUCE], 0, sizeof(t->cache[IBC_TUNE_ALLREDUCE]));
		if (t->coll->net->rank == 0 && ibc_log_enabled(IBC_LEVEL_INFO, IBC_SUBSYS_TUNING)) {
			char cls_txt[32];

			ibc_tune_bytes_text((size_t)1 << cls, cls_txt, sizeof(cls_txt));
			IBC_LOG_INFO(TUNING, "all-reduce of %zu bytes on %d ranks over %s (size class from %s): %s, the decision cache's choice (IBC_TUNING_CACHE), until its timing at call %d",
				     nbytes, t->m.nranks, ibc_tune_tp_name(t->m.tp), cls_txt,
				     ibc_algo_name(a), RETIME_FIRST_GAP);
		}
	}
	if (!r->valid)
		return r->calls == (uint64_t)t->meff.retime;
	if (r->cached)
		return r->calls >= r->next;
	return r->ratio > 0 && r->calls >= r->next;
}

/*
 * At the first timing call, time (tuner_retime()); at a checkpoint, agree on
 * the slowest rank's fastest measured / predicted ratio since the last one,
 * and time again where it is over RETIME_DRIFT times the timing's or under
 * 1 / RETIME_DRIFT of it. Collective.
 */
ibc_status_t ibc_tune_retime_tick(struct ibc_tuner *t, struct ibc_op *op, size_t nbytes)
{
	struct tune_retime *r = &t->rt[ibc_tune_size_class(nbytes)];
	double d[2] = { 0, 0 };
	char why[96];

	if (!r->valid)
		return tuner_retime(t, op, nbytes, r, "first");
	if (r->cached) {
		r->cached = 0;
		return tuner_retime(t, op, nbytes, r, "refresh of the decision cache's choice");
	}
	/*
	 * The fastest rank's fastest call, the timing's statistic (tuner_retime());
	 * d[1] == 0: some rank ran no call of the choice, no verdict.
	 */
	d[0] = r->seen > 0 ? r->seen : HUGE_VAL;
	d[1] = r->seen > 0 ? 1 : 0;
	IBC_CHECK(ibc_tune_agree(t, op, d, 2, IBC_MIN));
	r->seen = 0;
	if (d[1] > 0 && r->base <= 0) {
		/*
		 * The first checkpoint after a timing: a job's calls, with the
		 * caller's own work between them, find their peers' data waiting
		 * more often than the timing's back-to-back calls (0.4-0.65x of
		 * the timing's fastest call at 8 B on 2 ranks): only a timing
		 * that ran under load (calls RETIME_FIRST_DOWN x faster) or a
		 * machine that got slower (RETIME_DRIFT x) times again; else
		 * these calls are what later checkpoints compare with.
		 */
		if (d[0] > RETIME_DRIFT * r->ratio || d[0] * RETIME_FIRST_DOWN < r->ratio) {
			snprintf(why, sizeof(why), "its calls ran at %.2fx the timing",
				 d[0] / r->ratio);
			return tuner_retime(t, op, nbytes, r, why);
		}
		r->base = d[0];
	} else if (d[1] > 0 && (d[0] > RETIME_DRIFT * r->base || d[0] * RETIME_DRIFT < r->base)) {
		snprintf(why, sizeof(why), "its calls ran at %.2fx those after the last timing",
			 d[0] / r->base);
		return tuner_retime(t, op, nbytes, r, why);
	}
	r->gap = IBC_MIN(2 * r->gap, (uint64_t)RETIME_MAX_GAP);
	r->next = r->calls + r->gap;
	return IBC_OK;
}

/*
 * A sample of the calls that run the class's choice: every RETIME_SAMPLE-th
 * call of the class (counted alike on every rank, ibc_tune_retime_count()),
 * so that the rest read no clock (two reads, 56 ns, were 8 % of a 2-rank
 * 8-byte all-reduce here). The fastest of 32 samples in the 256 calls to
 * the first checkpoint, and of more later, stands for the fastest call.
 */
int ibc_tune_retime_sampled(const struct ibc_tuner *t, size_t nbytes, const struct ibc_algo_choice *c)
{
	const struct tune_retime *r;

	if (!t->ready || !ibc_tune_retime_on(t, nbytes) || c->predicted_us <= 0)
		return 0;
	r = &t->rt[ibc_tune_size_class(nbytes)];
	return r->valid && r->algo == c->algo && r->calls % RETIME_SAMPLE == 0;
}

void ibc_tuner_observe(struct ibc_tuner *t, const struct ibc_op *op,
		       const struct ibc_algo_choice *c, uint64_t t0_ns)
{
	struct tune_retime *r;
	size_t esz = 0;
	double x;

	/* @c->timed: ibc_tune_retime_sampled() found the class watched and its choice this one */
	if (!c->timed || ibc_dtype_size(op->dtype, &esz) != IBC_OK)
		return;
	r = &t->rt[ibc_tune_size_class(op->count * esz)];
	x = (double)(ibc_time_ns() - t0_ns) / 1000.0 / c->predicted_us;
	if (r->seen == 0 || x < r->seen)
		r->seen = x;
}
