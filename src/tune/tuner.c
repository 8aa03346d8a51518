/* SPDX-License-Identifier: MIT */
/*
 * tuner.c - the tuner of one communicator: at the first tuned collective
 * the ranks agree on a model (rank 0's settings and tuning file), measure
 * it (the probe: latency, bandwidth and reduction speed) and time the
 * candidates the model cannot tell apart (the race); then each all-reduce,
 * broadcast and reduce gets the model's choice, cached per size and logged
 * once per size class (docs/tuning.md), and each all-reduce size class is
 * timed again once the job runs and whenever its calls drift from that
 * timing (the re-timing, tune_retime.c).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/status.h"
#include "base/util.h"
#include "coll/coll.h"
#include "coll/reduce.h"
#include "coll/sched.h"
#include "tune/tune.h"
#include "tune/tune_internal.h"
#include "transport/transport.h"

#define PROBE_SMALL 8                           /* bytes of a latency probe message */
#define PROBE_LARGE (512u << 10)                /* bytes of a bandwidth probe message */
#define PROBE_GAMMA (2u << 20)                  /* bytes reduced by the gamma probe (below) */
#define PROBE_GAMMA_CACHE (256u << 10)          /* bytes of its in-cache pass */
#define PROBE_SMALL_NS 6000000ull               /* time budget of a latency series */
#define PROBE_LARGE_NS 12000000ull              /* time budget of the bandwidth series */
#define PROBE_LONE_NS 4000000ull                /* time budget of the lone-pair series */

/* ------------------------------------------------------------------------ */
/* per communicator                                                         */
/* ------------------------------------------------------------------------ */

/* struct tune_cache_ent, struct tune_retime, struct ibc_tuner: tune_internal.h */

void ibc_tuner_destroy(struct ibc_tuner *t)
{
	if (t)
		ibc_free(t->agree);
	ibc_free(t);
}

ibc_status_t ibc_tuner_create(struct ibc_coll *coll, struct ibc_tuner **t_p)
{
	struct ibc_tuner *t = ibc_calloc(1, sizeof(*t), "tuner");

	if (!t)
		return IBC_ERR_NO_MEMORY;
	t->agree = ibc_aligned_alloc(4096, TUNE_AGREE_DOUBLES * sizeof(double), "tuner agreements");
	if (!t->agree) {
		ibc_free(t);
		return IBC_ERR_NO_MEMORY;
	}
	memset(t->agree, 0, TUNE_AGREE_DOUBLES * sizeof(double));
	t->coll = coll;
	t->force_algo = -1;
	t->force_proto = -1;
	*t_p = t;
	return IBC_OK;
}

static void tuner_apply_force(struct ibc_tuner *t)
{
	t->meff = t->m;
	if (t->force_algo >= 0)
		t->meff.force_algo = t->force_algo;
	if (t->force_proto >= 0)
		t->meff.force_proto = t->force_proto;
	/* LL forced where the transport has no LL path: the simple protocol runs */
	if (t->meff.force_proto == IBC_PROTO_LL && !t->meff.has_ll)
		t->meff.force_proto = IBC_PROTO_SIMPLE;
	if (t->force_chunk > 0)
		t->meff.force_chunk = (int64_t)t->force_chunk;
	memset(t->cache, 0, sizeof(t->cache));
}

ibc_status_t ibc_tuner_force(struct ibc_tuner *t, int algo, int proto, size_t chunk_bytes)
{
	if (algo >= IBC_ALGO_COUNT || proto >= IBC_PROTO_COUNT) {
		IBC_LOG_ERROR(TUNING, "ibc_tuner_force: algorithm %d or protocol %d out of range", algo,
			      proto);
		return IBC_ERR_INVALID_ARG;
	}
	t->force_algo = algo < 0 ? -1 : algo;
	t->force_proto = proto < 0 ? -1 : proto;
	t->force_chunk = chunk_bytes;
	if (t->ready)
		tuner_apply_force(t);
	return IBC_OK;
}

ibc_status_t ibc_tuner_model(const struct ibc_tuner *t, struct ibc_tune_model *m_p)
{
	if (!t || !t->ready) {
		IBC_LOG_ERROR(TUNING, "ibc_tuner_model: no tuned collective ran on this communicator yet");
		return IBC_ERR_INVALID_USAGE;
	}
	*m_p = t->m;
	return IBC_OK;
}

/* the tuner's transport index is the transport's class (enum ibc_tclass) */
static int tp_of_ops(const struct ibc_transport_ops *ops)
{
	return ops->tclass;
}

/* slowness order for "the slowest link": tcp, then ib, then shm */
static int tp_rank(int tp)
{
	return tp == IBC_TUNE_TP_TCP ? 2 : tp == IBC_TUNE_TP_IB ? 1 : 0;
}



/* the median of @n > 0 values (the upper one of an even count), sorting @x in place */
static double probe_median(double *x, int n)
{
	int i;
	int j;

	/* insertion sort: at most 64 values */
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && x[j - 1] > x[j]; j--) {
			double y = x[j];

			x[j] = x[j - 1];
			x[j - 1] = y;
		}
	return x[n / 2];
}

/*
 * One ping-pong series with @partner: the initiator times round trips of
 * @nbytes and tells the responder in the payload's first byte when to stop
 * (after @maxit round trips or @budget_ns), so both run the same number.
 * *@oneway_us_p (initiator): median round trip / 2, the first one excluded.
 */
static ibc_status_t probe_pingpong(struct ibc_coll *cl, const struct ibc_op *op,
				   int partner, int initiator, int kind, int ll, size_t nbytes,
				   int maxit, uint64_t budget_ns, char *sbuf, char *rbuf,
				   double *oneway_us_p)
{
	double rt[64];
	uint64_t start = ibc_time_ns();
	int nrt = 0;
	int it;

	for (it = 0;; it++) {
		struct ibc_treq tr[2];
		struct ibc_treq *w[2] = { &tr[0], &tr[1] };
		struct ibc_msg_desc d;
		uint64_t t0 = ibc_time_ns();
		char stop;

		ibc_coll_desc(op, IBC_COLL_STEP(IBC_SCHED_PHASE_PROBE, kind, it), 0, &d);
		ibc_msg_desc_set_internal(&d, op->coll, op->dtype, op->count);
		if (ll)
			d.flags |= IBC_DESC_F_LL;
		if (initiator) {
			stop = it + 1 >= maxit || t0 - start > budget_ns;
			sbuf[0] = stop;
			IBC_CHECK(ibc_net_irecv(cl->net, partner, rbuf, nbytes, &d, &tr[0]));
			IBC_CHECK(ibc_net_isend(cl->net, partner, sbuf, nbytes, &d, &tr[1]));
			IBC_CHECK(ibc_net_waitall(cl->net, w, 2));
			if (it > 0 && nrt < (int)IBC_ARRAY_SIZE(rt))
				rt[nrt++] = (double)(ibc_time_ns() - t0) / 1000.0;
		} else {
			IBC_CHECK(ibc_net_irecv(cl->net, partner, rbuf, nbytes, &d, &tr[0]));
			IBC_CHECK(ibc_net_wait1(cl->net, &tr[0]));
			stop = rbuf[0];
			sbuf[0] = stop;
			IBC_CHECK(ibc_net_isend(cl->net, partner, sbuf, nbytes, &d, &tr[1]));
			IBC_CHECK(ibc_net_wait1(cl->net, &tr[1]));
		}
		if (stop)
			break;
	}
	if (initiator)
		*oneway_us_p = nrt ? probe_median(rt, nrt) / 2.0 : 0.0;
	return IBC_OK;
}

/*
 * Reduction speed of this CPU, ns per byte of float32 SUM: the fastest of 4
 * passes over @nbytes (plus as many of source). Two sizes are measured.
 * PROBE_GAMMA (2 MiB, a 4 MiB working set, twice this machine's 2 MiB L2
 * per core) gives the from-memory gamma that messages of megabytes pay,
 * where G gamma decides between algorithms; PROBE_GAMMA_CACHE (256 KiB)
 * gives the in-cache speed that ibc_tune_gamma() blends in for smaller
 * working sets (either figure alone misprices Rabenseifner's extra pass:
 * docs/tuning.md, "The cache"). @buf: 2 @nbytes bytes.
 */
static double probe_gamma(char *buf, size_t nbytes)
{
	size_t cnt = nbytes / sizeof(float);
	float *a = (float *)buf;
	float *b = a + cnt;
	double best = HUGE_VAL;
	size_t i;
	int rep;

	for (i = 0; i < cnt; i++) {
		a[i] = (float)(i & 1023);
		b[i] = 1.0f;
	}
	for (rep = 0; rep < 4; rep++) {
		uint64_t t0 = ibc_time_ns();
		double t;

		ibc_reduce_local(a, b, cnt, IBC_FLOAT32, IBC_SUM);
		t = (double)(ibc_time_ns() - t0);
		if (t < best)
			best = t;
	}
	return best / (double)nbytes;
}

/*
 * The lone pair (hosts with more ranks than cores, n >= 4): ranks 0 and 1
 * time 8-byte round trips while every other rank waits in the broadcast
 * of the result, as the idle ranks of a step with few messages wait (spin,
 * yield, then sleep: net.c). *@lone_us_p: the one-way latency on every
 * rank, 0 where pair 0-1 does not use the slowest transport.
 */
static ibc_status_t probe_lone(struct ibc_coll *cl, struct ibc_op *op,
			       const struct ibc_tune_model *m, double *lone_us_p)
{
	struct ibc_op br;
	double lone = 0;
	void *p;

	if (cl->net->rank <= 1 && tp_of_ops(cl->net->peers[cl->net->rank ^ 1].ops) == m->tp) {
		char *sbuf;

		IBC_CHECK(ibc_coll_scratch(cl, 2 * PROBE_SMALL, &p));
		sbuf = p;
		memset(sbuf, 0, 2 * PROBE_SMALL);
		IBC_CHECK(probe_pingpong(cl, op, cl->net->rank ^ 1, cl->net->rank == 0, 3, 0,
					 PROBE_SMALL, 40, PROBE_LONE_NS, sbuf, sbuf + PROBE_SMALL,
					 &lone));
	}
	ibc_tune_internal_req(op, IBC_COLL_BROADCAST, &lone, 1, IBC_FLOAT64, &br);
	IBC_CHECK(ibc_ring_broadcast(cl, &br));
	IBC_LOG_DEBUG(TUNING, "probe lone pair 0-1: 8 B one-way %.2f us", lone);
	*lone_us_p = lone;
	return IBC_OK;
}

enum { PV_ALPHA, PV_ALPHA_LL, PV_BETA, PV_NPAIR, PV_NLL, PV_GAMMA, PV_GAMMA_CACHE, PV_NRANK,
       PV_COUNT };

/*
 * The probe: pairs (r, r^1) measure 8-byte latency (simple, and LL where
 * the pair's transport has it) and 512 KiB bandwidth, every rank measures
 * its reduction speed, the pairs measure latency again (the lower median
 * counts); a ring all-reduce sums the results (bitwise the same on all
 * ranks) and the averages become the model's base coefficients. Bounded:
 * each series stops after its time budget (6 + 6 ms latency, 12 ms
 * bandwidth, 6 + 6 ms latency, and 4 ms for the lone pair) plus one round
 * trip, so the measurement stays under 50 ms unless a single round trip
 * takes several ms. *@probe_ms_p: measurement and agreement time
 * (the connection set-up before it is not counted: the first collective
 * would pay it anyway).
 */
static ibc_status_t tuner_probe(struct ibc_tuner *t, struct ibc_coll *cl, struct ibc_op *op,
				struct ibc_tune_model *m, double *probe_ms_p)
{
	double v[PV_COUNT] = { 0 };
	const struct ibc_transport_ops *ops = NULL;
	double lone = 0;
	double a = 0;
	double all = 0;
	double big = 0;
	int partner = cl->net->rank ^ 1;
	int init = 0;
	int ll = 0;
	char *gbuf;
	char *sbuf;
	char *rbuf;
	uint64_t t0;
	void *p;

	/* connections first: their set-up is not part of the probe's budget */
	if (partner < cl->net->nranks)
		IBC_CHECK(ibc_net_connect(cl->net, &partner, 1));
	t0 = ibc_time_ns();
	IBC_CHECK(ibc_coll_scratch(cl, 2 * PROBE_LARGE, &p));
	sbuf = p;
	rbuf = sbuf + PROBE_LARGE;
	memset(sbuf, 0, 2 * PROBE_LARGE);
	if (partner < cl->net->nranks) {
		ops = cl->net->peers[partner].ops;
		init = cl->net->rank < partner;
		ll = (ops->caps & IBC_TCAP_LL) && m->ll_max >= PROBE_SMALL;
		IBC_CHECK(probe_pingpong(cl, op, partner, init, 0, 0, PROBE_SMALL, 40,
					 PROBE_SMALL_NS, sbuf, rbuf, &a));
		if (ll)
			IBC_CHECK(probe_pingpong(cl, op, partner, init, 1, 1, PROBE_SMALL, 40,
						 PROBE_SMALL_NS, sbuf, rbuf, &all));
		IBC_CHECK(probe_pingpong(cl, op, partner, init, 2, 0, PROBE_LARGE, 6,
					 PROBE_LARGE_NS, sbuf, rbuf, &big));
	}
	/*
	 * The reduction speed last: its passes (a few ms on every rank of an
	 * oversubscribed host) would otherwise hold the cores while the
	 * partners' round trips are timed. The gamma buffers are larger than
	 * the scratch needs to stay: freed here.
	 */
	gbuf = ibc_aligned_alloc(4096, 2 * PROBE_GAMMA, "tuner gamma probe");
	if (!gbuf)
		return ibc_net_fail(cl->net, IBC_ERR_NO_MEMORY, -1,
				     "cannot allocate %u bytes for the tuner's probe", 2 * PROBE_GAMMA);
	v[PV_GAMMA] = probe_gamma(gbuf, PROBE_GAMMA);
	v[PV_GAMMA_CACHE] = probe_gamma(gbuf, PROBE_GAMMA_CACHE);
	ibc_free(gbuf);
	/*
	 * The latency series again, 5-20 ms after the first, where every rank
	 * may have a core of its own (share 1): the lower median of the two
	 * counts. The first series runs a few ms after the ranks started, and
	 * the scheduler may not yet have spread a pair over two cores: the
	 * waiting rank then spins IBC_SPIN_US (50 us) before it yields to its
	 * partner, and every hop costs about that. Seen in 3 of 20 quiet 2-rank
	 * shm runs (alpha 51-52 us against 0.6; the same with both ranks bound
	 * to one core), and the model then picked rd from 8 B to 2 MiB (up to
	 * 48 % slower) while the operations themselves ran at full speed
	 * (bench/RESULTS.md, "The shm probe"). On a shared host (share > 1)
	 * ranks sharing cores is the normal state, which the first series
	 * measures with every pair active, and the lone pair caps its outliers;
	 * a second series there, with the pairs out of step after the gamma
	 * passes, measured fewer messages in flight (8 tcp ranks on 2 cores:
	 * alpha 5-12 us against 8-22, and the lone pair's term off in 3 of 5
	 * runs).
	 */
	if (partner < cl->net->nranks) {
		double a2 = 0;
		double all2 = 0;

		if (m->share <= 1) {
			IBC_CHECK(probe_pingpong(cl, op, partner, init, 4, 0, PROBE_SMALL, 40,
						 PROBE_SMALL_NS, sbuf, rbuf, &a2));
			if (ll)
				IBC_CHECK(probe_pingpong(cl, op, partner, init, 5, 1, PROBE_SMALL,
							 40, PROBE_SMALL_NS, sbuf, rbuf, &all2));
		}
		if (init)
			IBC_LOG_DEBUG(TUNING, "probe pair %d-%d: 8 B one-way %.2f then %.2f us (ll %.2f then %.2f), 512 KiB one-way %.1f us",
				      cl->net->rank, partner, a, a2, all, all2, big);
		if (a2 > 0 && a2 < a)
			a = a2;
		if (all2 > 0 && all2 < all)
			all = all2;
		if (init && tp_of_ops(ops) == m->tp && a > 0 && big > a) {
			v[PV_ALPHA] = a;
			v[PV_BETA] = (big - a) * 1000.0 / PROBE_LARGE;
			v[PV_NPAIR] = 1;
			if (ll && all > 0) {
				v[PV_ALPHA_LL] = all;
				v[PV_NLL] = 1;
			}
		}
	}
	v[PV_NRANK] = 1;
	IBC_CHECK(ibc_tune_agree(t, op, v, PV_COUNT, IBC_SUM));
	if (m->share > 1 && cl->net->nranks >= 4)
		IBC_CHECK(probe_lone(cl, op, m, &lone));
	*probe_ms_p = (double)(ibc_time_ns() - t0) / 1e6;
	if (v[PV_NPAIR] > 0) {
		m->base[IBC_PROTO_SIMPLE].alpha_us = IBC_MAX(v[PV_ALPHA] / v[PV_NPAIR], 0.05);
		m->base[IBC_PROTO_SIMPLE].beta_ns = IBC_MAX(v[PV_BETA] / v[PV_NPAIR], 0.001);
		m->base[IBC_PROTO_LL].beta_ns = m->base[IBC_PROTO_SIMPLE].beta_ns;
		m->base[IBC_PROTO_LL].alpha_us =
			v[PV_NLL] > 0 ? IBC_MAX(v[PV_ALPHA_LL] / v[PV_NLL], 0.05)
				      : m->base[IBC_PROTO_SIMPLE].alpha_us;
		/* as in the fit: LL never costs more per step than simple */
		m->base[IBC_PROTO_LL].alpha_us = IBC_MIN(m->base[IBC_PROTO_LL].alpha_us,
							 m->base[IBC_PROTO_SIMPLE].alpha_us);
		m->source |= IBC_TUNE_SRC_PROBE;
	}
	if (v[PV_NPAIR] > 0) {
		double pairs = m->base[IBC_PROTO_SIMPLE].alpha_us;

		ibc_tune_set_lone(m, lone);
		if (m->base[IBC_PROTO_SIMPLE].alpha_us < pairs && cl->net->rank == 0)
			IBC_LOG_INFO(TUNING, "probe: pairs' alpha %.2f us is over %d x the lone pair's %.2f us (another job's load during the probe); alpha %.2f us",
				     pairs, (int)m->share, lone, m->base[IBC_PROTO_SIMPLE].alpha_us);
	}
	if (v[PV_NRANK] > 0) {
		m->base[IBC_PROTO_SIMPLE].gamma_ns = v[PV_GAMMA] / v[PV_NRANK];
		m->gamma_cache_ns = v[PV_GAMMA_CACHE] / v[PV_NRANK];
		m->base[IBC_PROTO_LL].gamma_ns = m->base[IBC_PROTO_SIMPLE].gamma_ns;
	}
	return IBC_OK;
}

/*
 * The race (above, "The race"): time the plan's candidates at each anchor
 * that still fits IBC_TUNING_RACE_MS counted from @t0, the probe's start
 * (the slowest rank's time, a max all-reduce before each anchor), out of
 * place on float32 zeros (an exact sum), a warm-up and
 * IBC_TUNE_RACE_REPS repetitions of plan.iters operations each, the
 * candidates interleaved within a repetition so that a slow moment of the
 * machine costs all of them. Every rank keeps its fastest repetition per
 * candidate (another job's time slice only adds time: with the median of 3,
 * 2 of 15 tcp passes had a raced pick 20-27 % slower than the model's) and
 * the slowest rank's counts (a max all-reduce), so the ratios, and every
 * later choice, are the same bits on every rank. Collective; the operations
 * run on the sequence number of @op, as the probe's, and each announces
 * itself to the shm all-reduce's mismatch check (within an anchor every
 * operation has the same descriptor, and an anchor's first candidate is
 * never the shm all-reduce, last in enum order with at least two
 * candidates, so no rank waits in it while another still shows an earlier
 * descriptor); @op is announced again before the last agreement.
 */
static ibc_status_t tuner_race(struct ibc_coll *cl, struct ibc_op *op,
			       struct ibc_tune_model *m, uint64_t t0)
{
	struct ibc_tune_race_plan plan[IBC_TUNE_RACE_ANCHORS];
	double fast[IBC_TUNE_RACE_ANCHORS * IBC_ALGO_COUNT];
	struct ibc_op ar;
	ibc_status_t st;
	double took[2];                 /* us since @t0; slow, agreed */
	double slow = 0;                /* measured / predicted of the last raced anchor */
	size_t maxb = 0;
	char *buf;
	int np;
	int i;
	int k;

	memset(m->race, 0, sizeof(m->race));
	np = ibc_tune_race_plan(m, plan);
	if (np == 0)
		return IBC_OK;
	for (i = 0; i < np; i++)
		maxb = IBC_MAX(maxb, (size_t)plan[i].nbytes);
	buf = ibc_aligned_alloc(4096, 2 * maxb, "tuner race");
	if (!buf)
		return ibc_net_fail(cl->net, IBC_ERR_NO_MEMORY, -1,
				     "cannot allocate %zu bytes for the tuner's race", 2 * maxb);
	memset(buf, 0, 2 * maxb);
	memset(fast, 0, sizeof(fast));
	for (i = 0; i < np; i++) {
		const struct ibc_tune_race_plan *p = &plan[i];
		double t[IBC_ALGO_COUNT][IBC_TUNE_RACE_REPS];
		double pred = 0;
		double meas = 0;
		int rep;

		/*
		 * The slowest rank's time since @t0 and its measured / predicted
		 * time of the last raced anchor decide, the same on every rank:
		 * a loaded machine runs the operations slower than predicted,
		 * and the next anchor's cost is scaled up by as much (the last
		 * anchor, not all: below 4 KiB operations take 2-3x their
		 * prediction on an idle machine, and cost little).
		 */
		took[0] = (double)(ibc_time_ns() - t0) / 1000.0;
		took[1] = slow;
		ibc_tune_internal_req(op, IBC_COLL_ALLREDUCE, took, 2, IBC_FLOAT64, &ar);
		ar.redop = IBC_MAX;
		IBC_CHECK_GOTO(ibc_ring_allreduce(cl, &ar), st, out);
		if (took[0] + p->cost_us * IBC_MAX(1.0, took[1] / RACE_COST_FACTOR) >
		    m->race_ms * 1000.0) {
			plan[i].n = 0;  /* not raced */
			continue;
		}

		for (rep = -1; rep < IBC_TUNE_RACE_REPS; rep++)
			for (k = 0; k < p->n; k++) {
				uint64_t ts = ibc_time_ns();
				int it;

				for (it = 0; it < p->iters; it++) {
					ibc_tune_internal_req(op, IBC_COLL_ALLREDUCE, buf,
							      (size_t)p->nbytes / 4,
							      IBC_FLOAT32, &ar);
					ar.recvbuf = buf + maxb;
					ibc_shmar_announce(cl, &ar);
					IBC_CHECK_GOTO(ibc_coll_run_choice(cl, &ar, &p->c[k]), st,
						       out);
				}
				if (rep >= 0)
					t[k][rep] = (double)(ibc_time_ns() - ts) / 1000.0 / p->iters;
			}
		for (k = 0; k < p->n; k++) {
			double *f = &fast[i * IBC_ALGO_COUNT + k];

			/* the fastest repetition: another job's time slice only adds */
			*f = t[k][0];
			for (rep = 1; rep < IBC_TUNE_RACE_REPS; rep++)
				*f = IBC_MIN(*f, t[k][rep]);
			pred += p->c[k].predicted_us;
			meas += *f;
		}
		slow = meas / pred;
	}
	ibc_free(buf);
	/*
	 * @op again before the last agreement: a rank that leaves it may run
	 * @op with the shm all-reduce and check the others' announcements
	 * while a slower rank is still in this all-reduce, which no rank
	 * leaves before every rank has entered it (and so announced @op).
	 */
	ibc_shmar_announce(cl, op);
	ibc_tune_internal_req(op, IBC_COLL_ALLREDUCE, fast, (size_t)np * IBC_ALGO_COUNT,
			      IBC_FLOAT64, &ar);
	ar.redop = IBC_MAX;
	IBC_CHECK(ibc_ring_allreduce(cl, &ar));
	for (i = 0; i < np; i++) {
		struct ibc_tune_race *r = &m->race[i];

		if (plan[i].n == 0)
			continue;
		r->nbytes = plan[i].nbytes;
		for (k = 0; k < plan[i].n; k++) {
			const struct ibc_algo_choice *c = &plan[i].c[k];

			r->ratio[c->algo] = fast[i * IBC_ALGO_COUNT + k] / c->predicted_us;
		}
	}
	return IBC_OK;
out:
	ibc_free(buf);
	return st;
}

struct log_ranges {
	char buf[1024];
	size_t len;
};

static void log_range(void *arg, size_t lo, size_t hi, const struct ibc_algo_choice *c)
{
	struct log_ranges *lr = arg;
	char t[160];

	ibc_tune_range_text(lo, hi, c, t, sizeof(t));
	if (lr->len < sizeof(lr->buf))
		lr->len += (size_t)snprintf(lr->buf + lr->len, sizeof(lr->buf) - lr->len, "%s%s",
					    lr->len ? "; " : "", t);
}

static void tuner_log_model(const struct ibc_tune_model *m, double probe_ms, double race_took_ms,
			    double init_ms)
{
	char src[64];
	int c;

	if (!ibc_log_enabled(IBC_LEVEL_INFO, IBC_SUBSYS_TUNING) &&
	    !ibc_log_enabled(IBC_LEVEL_INFO, IBC_SUBSYS_INIT))
		return;
	ibc_tune_source_text(m, src, sizeof(src));
	IBC_LOG_INFO(TUNING, "model for %d ranks over %s from %s (probe %.1f ms, set-up in all %.1f ms): simple alpha %.2f us, ll alpha %.2f us, beta %.4f ns/B (%.2f GB/s), gamma %.4f ns/B x %d (time sharing), in-cache gamma %.4f ns/B (L2 %lld B), lone pair %.2f of alpha",
		     m->nranks, ibc_tune_tp_name(m->tp), src, probe_ms, init_ms,
		     m->base[IBC_PROTO_SIMPLE].alpha_us, m->base[IBC_PROTO_LL].alpha_us,
		     m->base[IBC_PROTO_SIMPLE].beta_ns,
		     m->base[IBC_PROTO_SIMPLE].beta_ns > 0 ?
		     1.0 / m->base[IBC_PROTO_SIMPLE].beta_ns : 0.0,
		     m->base[IBC_PROTO_SIMPLE].gamma_ns, (int)m->share, m->gamma_cache_ns,
		     (long long)m->cache_bytes, m->lone_frac);
	for (c = 0; c < IBC_TUNE_RACE_ANCHORS; c++) {
		char buf[512];

		if (m->race[c].nbytes <= 0)
			continue;
		ibc_tune_race_text(m, c, buf, sizeof(buf));
		IBC_LOG_INFO(TUNING, "race (%.1f ms of the probe's in all) at %s", race_took_ms, buf);
	}
	for (c = 0; c < IBC_TUNE_COLL_COUNT; c++) {
		struct log_ranges lr;

		lr.len = 0;
		lr.buf[0] = '\0';
		ibc_tune_ranges(m, c, log_range, &lr);
		IBC_LOG_INFO(TUNING, "%s thresholds: %s", ibc_tune_coll_name(c), lr.buf);
	}
}

/* collective: agree on the model (rank 0's settings and file, averaged probe) */
static ibc_status_t tuner_init(struct ibc_coll *cl, struct ibc_tuner *t, struct ibc_op *op)
{
	struct ibc_tune_model m;
	struct ibc_op br;
	cpu_set_t cpus;
	uint64_t t0 = ibc_time_ns();
	double probe_ms = 0;
	double race_took_ms = 0;
	int tp = IBC_TUNE_TP_SHM;
	int has_ll = 1;
	int i;

	for (i = 0; i < cl->net->nranks; i++) {
		const struct ibc_transport_ops *ops = cl->net->peers[i].ops;

		if (i == cl->net->rank || !ops)
			continue;
		if (tp_rank(tp_of_ops(ops)) > tp_rank(tp))
			tp = tp_of_ops(ops);
	}
	for (i = 0; i < cl->net->nranks; i++) {
		const struct ibc_transport_ops *ops = cl->net->peers[i].ops;

		if (i != cl->net->rank && ops && tp_of_ops(ops) == tp && !(ops->caps & IBC_TCAP_LL))
			has_ll = 0;
	}
	ibc_tune_model_init(&m, cl->net->nranks, tp, has_ll);
	/* time sharing of the host's cores (rank 0's host decides, by the broadcast) */
	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0)
		m.share = ibc_tune_share(cl->net->nlocal, CPU_COUNT(&cpus));
	/* the core's L2, for the cache term of gamma (rank 0's host decides) */
	m.cache_bytes = IBC_MAX(sysconf(_SC_LEVEL2_CACHE_SIZE), 0L);
	/* the shm all-reduce needs the segment (the same verdict on every rank) */
	if (!ibc_shmar_usable(cl))
		m.shm_ok = 0;
	if (cl->net->rank == 0) {
		const char *path = ibc_param_tuning_file();
		int nrows = 0;

		if (path && *path && ibc_tune_file_load(&m, path, &nrows) == IBC_OK)
			IBC_LOG_INFO(TUNING, "IBC_TUNING_FILE %s: %d rows for %s at about %d ranks",
				     path, nrows, ibc_tune_tp_name(tp), cl->net->nranks);
		if (m.retime)
			ibc_tune_cache_load(&m, cl->net->nlocal);
	}
	/* everyone adopts rank 0's settings and file rows */
	ibc_tune_internal_req(op, IBC_COLL_BROADCAST, &m, sizeof(m), IBC_UINT8, &br);
	IBC_CHECK(ibc_ring_broadcast(cl, &br));
	if (m.probe && !(m.source & IBC_TUNE_SRC_FILE)) {
		uint64_t tp0 = ibc_time_ns();
		uint64_t tr;

		IBC_CHECK(tuner_probe(t, cl, op, &m, &probe_ms));
		tr = ibc_time_ns();
		IBC_CHECK(tuner_race(cl, op, &m, tp0));
		race_took_ms = (double)(ibc_time_ns() - tr) / 1e6;
		probe_ms += race_took_ms;
	}
	t->m = m;
	t->ready = 1;
	tuner_apply_force(t);
	if (cl->net->rank == 0)
		tuner_log_model(&m, probe_ms, race_took_ms, (double)(ibc_time_ns() - t0) / 1e6);
	return IBC_OK;
}

static void tuner_log_decision(struct ibc_tuner *t, int coll, size_t nbytes,
			       const struct ibc_algo_choice *c)
{
	const struct ibc_tune_race *r;
	char alt[384];
	size_t len = 0;
	int bucket = ibc_tune_size_class(nbytes);
	int a;

	if (t->logged[coll] & (1ull << bucket))
		return;
	t->logged[coll] |= 1ull << bucket;
	if (!ibc_log_enabled(IBC_LEVEL_INFO, IBC_SUBSYS_TUNING))
		return;
	alt[0] = '\0';
	r = ibc_tune_race_at(&t->m, coll, nbytes);
	for (a = 0; a < IBC_ALGO_COUNT; a++) {
		struct ibc_algo_choice x;
		double v;

		if (!ibc_tune_algo_ok(&t->m, coll, a))
			continue;
		v = ibc_tune_best_for_algo(&t->m, coll, a, nbytes, &x);
		len += (size_t)snprintf(alt + len, sizeof(alt) - len, "%s%s %.1f", len ? ", " : "",
					ibc_algo_name(a), v);
		/* the race's price where it timed this algorithm near this size */
		if (len < sizeof(alt) && r && r->ratio[a] > 0)
			len += (size_t)snprintf(alt + len, sizeof(alt) - len, " (timed %.1f)",
						v * r->ratio[a]);
		if (len >= sizeof(alt))
			break;
	}
	IBC_LOG_INFO(TUNING, "%s of %zu bytes on %d ranks over %s: %s/%s chunk %zu bytes, predicted %.1f us (best per algorithm: %s us)%s",
		     ibc_tune_coll_name(coll), nbytes, t->m.nranks, ibc_tune_tp_name(t->m.tp),
		     ibc_algo_name(c->algo), ibc_proto_name(c->proto), c->chunk_bytes, c->predicted_us,
		     alt,
		     t->meff.force_algo >= 0 || t->meff.force_proto >= 0 ? " [forced]" : "");
}

/*
 * The tuner's own exchanges inside an operation (@kind 1: the start-up
 * probe and race, 2: a re-timing): errors during them say so instead of
 * counting their bytes as the operation's, and after them the operation's
 * "bytes moved" starts from 0 (net.h cur_tuning). tuning_end() returns @st.
 */
static void tuning_begin(struct ibc_net *net, int kind)
{
	__atomic_store_n(&net->cur_tuning, kind, __ATOMIC_RELAXED);
}

static ibc_status_t tuning_end(struct ibc_net *net, ibc_status_t st)
{
	__atomic_store_n(&net->cur_tuning, 0, __ATOMIC_RELAXED);
	if (st != IBC_OK)
		return st;
	__atomic_store_n(&net->cur_bytes_done, 0, __ATOMIC_RELAXED);
	net->cur_bytes_total = 0;
	return IBC_OK;
}

/* the model's choice, or the re-timed algorithm with its best protocol and chunk */
static void tuner_choose(struct ibc_tuner *t, int coll, size_t nbytes, struct ibc_algo_choice *c)
{
	ibc_tune_choose(&t->meff, coll, nbytes, c);
	if (coll == IBC_TUNE_ALLREDUCE && ibc_tune_retime_on(t, nbytes)) {
		const struct tune_retime *r = &t->rt[ibc_tune_size_class(nbytes)];

		if (r->valid && r->algo >= 0 && r->algo != c->algo)
			ibc_tune_best_for_algo(&t->meff, coll, r->algo, nbytes, c);
	}
}

ibc_status_t ibc_tuner_peek(struct ibc_tuner *t, int kind, size_t nbytes, size_t esz,
			    struct ibc_algo_choice *c)
{
	int coll = ibc_tune_coll_of(kind);

	if (!t || !t->ready || coll < 0 || esz == 0) {
		IBC_LOG_ERROR(TUNING, "ibc_tuner_peek: %s", !t || !t->ready ?
			      "no tuned collective ran on this communicator yet" :
			      "not an all-reduce, broadcast or reduce, or no element size");
		return IBC_ERR_INVALID_USAGE;
	}
	t->meff.elem_bytes = (int32_t)esz;
	tuner_choose(t, coll, nbytes, c);
	return IBC_OK;
}

ibc_status_t ibc_tuner_select(struct ibc_tuner *t, struct ibc_op *op, struct ibc_algo_choice *c)
{
	struct ibc_coll *cl = t->coll;
	int coll = ibc_tune_coll_of(op->coll);
	size_t esz;
	size_t nbytes;
	unsigned i;

	if (coll < 0 || cl->net->nranks == 1) {
		memset(c, 0, sizeof(*c));
		c->algo = IBC_ALGO_RING;
		c->chunk_bytes = (size_t)ibc_param_ring_chunk_bytes();
		return IBC_OK;
	}
	if (!t->ready) {
		tuning_begin(cl->net, 1);
		IBC_CHECK(tuning_end(cl->net, tuner_init(cl, t, op)));
	}
	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	nbytes = op->count * esz;
	t->meff.elem_bytes = (int32_t)esz;
	if (coll == IBC_TUNE_ALLREDUCE && ibc_tune_retime_count(t, nbytes)) {
		tuning_begin(cl->net, 2);
		IBC_CHECK(tuning_end(cl->net, ibc_tune_retime_tick(t, op, nbytes)));
	}
	for (i = 0; i < TUNE_CACHE; i++) {
		const struct tune_cache_ent *e = &t->cache[coll][i];

		if (e->valid && e->nbytes == nbytes && e->esz == esz) {
			*c = e->c;
			c->timed = coll == IBC_TUNE_ALLREDUCE && ibc_tune_retime_sampled(t, nbytes, c);
			return IBC_OK;
		}
	}
	tuner_choose(t, coll, nbytes, c);
	c->forced = (t->meff.force_algo >= 0 && ibc_tune_algo_ok(&t->meff, coll, t->meff.force_algo)) ||
		    t->meff.force_proto >= 0;
	if (t->meff.force_algo >= 0 && !ibc_tune_algo_ok(&t->meff, coll, t->meff.force_algo) &&
	    !t->told_na[coll]) {
		t->told_na[coll] = 1;
		if (ibc_algo_applies(coll, t->meff.force_algo))
			IBC_LOG_INFO(TUNING, "algorithm %s needs every rank on one host over shm (and IBC_SHM_ALLREDUCE=1); the tuner chooses among the others",
				     ibc_algo_name(t->meff.force_algo));
		else
			IBC_LOG_INFO(TUNING, "algorithm %s does not implement %s; the tuner chooses among the others",
				     ibc_algo_name(t->meff.force_algo), ibc_tune_coll_name(coll));
	}
	tuner_log_decision(t, coll, nbytes, c);
	i = t->cache_next[coll]++ % TUNE_CACHE;
	t->cache[coll][i].nbytes = nbytes;
	t->cache[coll][i].esz = esz;
	t->cache[coll][i].valid = 1;
	t->cache[coll][i].c = *c;
	c->timed = coll == IBC_TUNE_ALLREDUCE && ibc_tune_retime_sampled(t, nbytes, c);
	return IBC_OK;
}
