/* SPDX-License-Identifier: MIT */
/*
 * tune_model.c - the tuner's cost model (tune.h), pure: no communicator.
 * An alpha-beta-gamma model per (collective, algorithm, protocol) and
 * transport class prices each algorithm's critical path (steps S, bytes
 * moved B, bytes reduced G), with the host's time sharing, messages in
 * flight and the cache folded in; the choice of algorithm, protocol and
 * chunk per message size, and the race's plan. The shapes, the terms and
 * the measurements behind them are in docs/tuning.md. Sources: Hockney,
 * Parallel Computing 20(3), 1994 (alpha-beta); Thakur, Rabenseifner and
 * Gropp, IJHPCA 19(1), 2005 (ring, recursive doubling, Rabenseifner and
 * binomial costs with gamma); NCCL's src/graph/tuning.cc (trees priced
 * per pipeline step).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/coll_kind.h"
#include "base/log.h"
#include "base/param.h"
#include "base/status.h"
#include "base/util.h"
#include "coll/coll.h"
#include "coll/reduce.h"
#include "coll/sched.h"
#include "tune/tune.h"
#include "tune/tune_internal.h"

/* ------------------------------------------------------------------------ */
/* names                                                                    */
/* ------------------------------------------------------------------------ */

/* the operation kind (base/coll_kinds.def) of each collective the tuner decides for */
static const int tune_kind[IBC_TUNE_COLL_COUNT] = {
	[IBC_TUNE_ALLREDUCE] = IBC_COLL_ALLREDUCE,
	[IBC_TUNE_BCAST] = IBC_COLL_BROADCAST,
	[IBC_TUNE_REDUCE] = IBC_COLL_REDUCE,
};
static const char *const tp_names[IBC_TUNE_TP_COUNT] = { "shm", "tcp", "ib" };

static const size_t tune_chunks[] = { 4u << 10, 16u << 10, 64u << 10, 256u << 10, 1u << 20,
				      4u << 20 };

const char *ibc_tune_coll_name(int coll)
{
	return coll >= 0 && coll < IBC_TUNE_COLL_COUNT ? ibc_coll_name(tune_kind[coll]) : "?";
}

int ibc_tune_coll_of(int kind)
{
	int c;

	for (c = 0; c < IBC_TUNE_COLL_COUNT; c++)
		if (tune_kind[c] == kind)
			return c;
	return -1;
}

int ibc_tune_coll_parse(const char *s)
{
	int kind = ibc_coll_parse(s);

	return kind > 0 && !strcmp(s, ibc_coll_name(kind)) ? ibc_tune_coll_of(kind) : -1;
}

const char *ibc_tune_tp_name(int tp)
{
	return tp >= 0 && tp < IBC_TUNE_TP_COUNT ? tp_names[tp] : "?";
}

int ibc_tune_tp_parse(const char *s)
{
	return ibc_name_lookup(s, tp_names, IBC_TUNE_TP_COUNT);
}

int ibc_algo_applies(int coll, int algo)
{
	if (algo < 0 || algo >= IBC_ALGO_COUNT)
		return 0;
	return coll == IBC_TUNE_ALLREDUCE || algo == IBC_ALGO_RING || algo == IBC_ALGO_TREE;
}

/* ------------------------------------------------------------------------ */
/* the model                                                                */
/* ------------------------------------------------------------------------ */

/* built-in coefficients per transport: what the probe replaces */
static const struct ibc_tune_coef tune_defaults[IBC_TUNE_TP_COUNT][IBC_PROTO_COUNT] = {
	[IBC_TUNE_TP_SHM] = { { 2.0, 0.20, 0.15 }, { 1.0, 0.20, 0.15 } },
	[IBC_TUNE_TP_TCP] = { { 15.0, 0.40, 0.15 }, { 15.0, 0.40, 0.15 } },
	[IBC_TUNE_TP_IB] = { { 3.0, 0.08, 0.15 }, { 2.0, 0.08, 0.15 } },
};

/**
 * ibc_tune_model_init() - A model with the built-in coefficients and this
 * process's settings (IBC_ALGO, IBC_PROTO, IBC_TREE_CHUNK_BYTES,
 * IBC_LL_MAX_BYTES, IBC_RING_CHUNK_BYTES, IBC_TUNING_PROBE).
 * @m:      [out] the model.
 * @nranks: [in]  communicator size.
 * @tp:     [in]  enum ibc_tune_tp of the slowest link.
 * @has_ll: [in]  1 if that transport has an LL path.
 *
 * Unknown IBC_ALGO/IBC_PROTO values log a WARN and mean auto; IBC_PROTO=ll
 * where @has_ll is 0 logs a WARN and means simple. The shm
 * all-reduce (IBC_ALGO_SHM) is allowed when @tp is shm, @nranks > 1 and
 * IBC_SHM_ALLREDUCE=1.
 */
void ibc_tune_model_init(struct ibc_tune_model *m, int nranks, int tp, int has_ll)
{
	const char *s;
	int a;
	int c;
	int p;

	memset(m, 0, sizeof(*m));
	if (tp < 0 || tp >= IBC_TUNE_TP_COUNT)
		tp = IBC_TUNE_TP_TCP;
	m->nranks = nranks;
	m->tp = tp;
	m->has_ll = has_ll;
	m->source = IBC_TUNE_SRC_DEFAULT;
	m->ll_max = ibc_param_ll_max_bytes();
	m->ring_chunk = ibc_param_ring_chunk_bytes();
	m->force_chunk = ibc_param_tree_chunk_bytes();
	m->probe = (int32_t)ibc_param_tuning_probe();
	m->race_ms = (int32_t)ibc_param_tuning_race_ms();
	m->retime = (int32_t)ibc_param_tuning_retime();
	m->retime_max = (int64_t)ibc_param_tuning_retime_max_bytes();
	m->shm_chunk = IBC_ALIGN_UP(ibc_param_shm_allreduce_chunk_bytes(), 64);
	m->shm_small = IBC_MIN(ibc_param_shm_allreduce_small_bytes(), m->shm_chunk);
	m->shm_cma_min = ibc_param_shm_cma() == 0 ?
				 -1 :
				 IBC_MAX(ibc_param_shm_allreduce_cma_min_bytes(), m->shm_small + 1);
	/* the slowest link is shm: every rank shares this host (a communicator
	 * broadcasts rank 0's model, so rank 0's view decides) */
	m->shm_ok = tp == IBC_TUNE_TP_SHM && nranks > 1 && ibc_param_shm_allreduce();
	m->share = 1;   /* a core per rank; tuner_init() sets the host's value */
	m->elem_bytes = 4;
	memset(m->cached_algo, -1, sizeof(m->cached_algo));  /* tune_cache.c fills it */
	m->lone_frac = 0;       /* tuner_init()'s probe measures it on a shared host */
	m->base[IBC_PROTO_SIMPLE] = tune_defaults[tp][IBC_PROTO_SIMPLE];
	m->base[IBC_PROTO_LL] = tune_defaults[tp][has_ll ? IBC_PROTO_LL : IBC_PROTO_SIMPLE];
	for (c = 0; c < IBC_TUNE_COLL_COUNT; c++)
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			for (p = 0; p < IBC_PROTO_COUNT; p++)
				m->coef[c][a][p].alpha_us = -1.0;
	m->force_algo = -1;
	s = ibc_param_algo();
	if (strcmp(s, "auto")) {
		m->force_algo = ibc_algo_parse(s);
		if (m->force_algo < 0)
			IBC_LOG_WARN(ENV, "IBC_ALGO=%s is not auto, ring, tree, rd, rabenseifner or shm; using auto",
				     s);
	}
	m->force_proto = -1;
	s = ibc_param_proto();
	if (strcmp(s, "auto")) {
		m->force_proto = ibc_proto_parse(s);
		if (m->force_proto < 0)
			IBC_LOG_WARN(ENV, "IBC_PROTO=%s is not auto, simple or ll; using auto", s);
		if (m->force_proto == IBC_PROTO_LL && !has_ll) {
			IBC_LOG_WARN(ENV, "IBC_PROTO=ll: the %s transport has no LL path; using the simple protocol",
				     tp_names[tp]);
			m->force_proto = IBC_PROTO_SIMPLE;
		}
	}
}

/**
 * ibc_tune_share() - The time-sharing factor of the model (file header):
 * how many of the host's ranks share the busiest core.
 * @nlocal: [in] ranks of the communicator on this host (this one included).
 * @ncores: [in] cores this process may run on (sched_getaffinity); <= 0 if
 *               unknown.
 *
 * Return: max(1, ceil(@nlocal / @ncores)); 1 when either is unknown (<= 0).
 * Pure.
 */
int ibc_tune_share(int nlocal, int ncores)
{
	if (nlocal <= 0 || ncores <= 0 || nlocal <= ncores)
		return 1;
	return (nlocal + ncores - 1) / ncores;
}

/*
 * The reduction cost per byte the model prices for an operation on N bytes:
 * gamma times the time sharing, and, where the probe measured the cache's
 * speed, blended towards it by the fraction of the working set that fits
 * the core's L2: the share ranks of a core each touch about 2 N (input and
 * output), so that fraction is min(1, L2 / (share 2 N)) (file header,
 * "cache").
 */
double ibc_tune_gamma(const struct ibc_tune_model *m, double gamma_ns, double N)
{
	double share = (double)IBC_MAX(m->share, 1);
	double gm = m->base[IBC_PROTO_SIMPLE].gamma_ns;

	if (m->gamma_cache_ns > 0 && m->cache_bytes > 0 && gm > m->gamma_cache_ns && N > 0) {
		double in = IBC_MIN(1.0, (double)m->cache_bytes / (share * 2.0 * N));

		gamma_ns *= 1.0 - (1.0 - m->gamma_cache_ns / gm) * in;
	}
	return gamma_ns * share;
}

static int ilog2_floor(int n)
{
	int l = 0;

	while ((2 << l) <= n)
		l++;
	return l;
}

/**
 * ibc_tune_set_lone() - Set the model's lone-pair term from a lone pair's
 * one-way 8-byte latency (simple protocol), measured after alpha.
 * @m:       [in,out] model (base alpha and share already set).
 * @lone_us: [in] us; <= 0 turns the term off.
 *
 * On a shared host (share > 1) the probe's alpha, n/2 pairs' round trips
 * at once, is first capped at share x @lone_us (both protocols): n/2 pairs
 * time-sharing the cores are at most share times slower than one pair with
 * the cores to itself, and a higher alpha is another job's load during the
 * probe's few ms, which the lone pair, timed tens of ms later, did not
 * meet (bench/RESULTS.md, "Messages in flight and the cache": alpha 82 and
 * 120 us against lone pairs of 7-8 us, and the ring lost at 256 KiB and
 * 2 MiB). Then lone_frac = @lone_us / alpha, kept in [0.02, 1]. Pure.
 */
void ibc_tune_set_lone(struct ibc_tune_model *m, double lone_us)
{
	double a = m->base[IBC_PROTO_SIMPLE].alpha_us;
	int p;

	if (lone_us <= 0 || a <= 0) {
		m->lone_frac = 0;
		return;
	}
	if (m->share > 1 && a > m->share * lone_us) {
		a = m->share * lone_us;
		for (p = 0; p < IBC_PROTO_COUNT; p++)
			m->base[p].alpha_us = IBC_MIN(m->base[p].alpha_us, a);
	}
	m->lone_frac = IBC_MIN(IBC_MAX(lone_us / a, 0.02), 1.0);
}

/* a step's latency with @msgs of the n ranks' messages in flight, in units of alpha */
static double step_latency(const struct ibc_tune_model *m, double msgs)
{
	double half = (double)(m->nranks / 2);
	double f = m->lone_frac;

	return f + (1.0 - f) * (IBC_MAX(msgs, 1.0) - 1.0) / (half - 1.0);
}

/**
 * ibc_tune_step_factor() - The cost of a step with @msgs messages in flight
 * among the n ranks relative to a step in which every rank sends (file
 * header, "messages in flight"): step_latency(@msgs) / step_latency(n), at
 * most 1. 1 where the term is off: lone_frac 0 (not measured, or a tuning
 * file's fitted rows, which the fit made without the term), or share <= 2
 * (the probe's n/2 pairs then have a core each: their alpha and the lone
 * pair's latency differ by noise only, and the slope between them says
 * nothing). Pure.
 */
double ibc_tune_step_factor(const struct ibc_tune_model *m, double msgs)
{
	if (m->lone_frac <= 0 || m->lone_frac >= 1 || m->nranks < 4 || m->share <= 2)
		return 1.0;
	return IBC_MIN(step_latency(m, msgs) / step_latency(m, m->nranks), 1.0);
}

/*
 * Rabenseifner on fewer elements than the power of two it works on: some
 * blocks are empty and the program sends nothing for them (sched.h), so
 * some steps have fewer messages in flight. Counted on the real program of
 * every rank (n <= RAB_SIM_MAX; a few ops each at these sizes): the sum over
 * steps of the step factor, or -1 where not counted.
 */
#define RAB_SIM_MAX 256
#define RAB_SIM_OPS 256
#define RAB_SIM_STEPS 64

static double rab_small_steps(const struct ibc_tune_model *m, uint64_t count)
{
	uint32_t step[RAB_SIM_STEPS];
	int sends[RAB_SIM_STEPS];
	struct ibc_sched_op ops[RAB_SIM_OPS];
	int nstep = 0;
	double S = 0;
	int r;
	int i;

	if (m->nranks > RAB_SIM_MAX || count == 0)
		return -1;
	for (r = 0; r < m->nranks; r++) {
		struct ibc_sched_args a = { .n = m->nranks, .rank = r, .count = count,
					    .chunk = count, .root = 0 };
		size_t k = ibc_rab_allreduce_prog(&a, ops, RAB_SIM_OPS);
		size_t j;

		if (k > RAB_SIM_OPS)
			return -1;
		for (j = 0; j < k; j++) {
			if (ops[j].kind != IBC_SCHED_SEND)
				continue;
			for (i = 0; i < nstep && step[i] != ops[j].step; i++)
				;
			if (i == nstep) {
				if (nstep == RAB_SIM_STEPS)
					return -1;
				step[nstep] = ops[j].step;
				sends[nstep++] = 0;
			}
			sends[i]++;
		}
	}
	for (i = 0; i < nstep; i++)
		S += ibc_tune_step_factor(m, sends[i]);
	return S;
}

/* the critical-path shape of one operation (file header) */
void ibc_tune_shape(const struct ibc_tune_model *m, int coll, int algo, double N, double C,
		       double *S, double *B, double *G)
{
	int n = m->nranks;
	double rc = (double)IBC_MAX(m->ring_chunk, 1);
	double lg = ilog2_floor(n);
	double p = (double)(1 << ilog2_floor(n));
	double f = (double)n != p ? 1.0 : 0.0;
	double c;
	double k;
	double h;

	*S = 0;
	*B = 0;
	*G = 0;
	if (n <= 1)
		return;
	if (coll == IBC_TUNE_ALLREDUCE) {
		/*
		 * The schedule executor (tree, rd, rabenseifner) first copies the
		 * input into the output buffer (src/coll/sched_exec.c): one
		 * local pass over N bytes, priced like a reduction pass (gamma);
		 * without it the model ranked Rabenseifner ahead of the ring on
		 * shm at 1-4 MiB, where it is slower (bench/RESULTS.md).
		 */
		double cnt = floor(N / IBC_MAX(m->elem_bytes, 1));

		switch (algo) {
		case IBC_ALGO_RING:
			/* fewer elements than ranks: the empty blocks are not sent */
			k = IBC_MAX(1.0, ceil(ceil(N / n) / rc));
			*S = 2.0 * (n - 1) * k * ibc_tune_step_factor(m, IBC_MIN(cnt, (double)n));
			*B = 2.0 * (n - 1) / n * N;
			*G = (double)(n - 1) / n * N;
			return;
		case IBC_ALGO_TREE: {
			double half = ceil(N / 2);

			h = ibc_dtree_height(n);
			c = IBC_MIN(IBC_MAX(C, ceil(half / IBC_SCHED_MAX_CHUNKS)), half);
			k = IBC_MAX(1.0, ceil(half / IBC_MAX(c, 1.0)));
			*S = 2.0 * (h + k - 1);       /* every rank sends: factor 1 */
			*B = 4.0 * c * (h + k - 1);
			*G = 2.0 * c * (h + k - 1) + N;
			return;
		}
		case IBC_ALGO_RD:
			/* the folded-out ranks sit out the lg exchanges */
			*S = lg * ibc_tune_step_factor(m, p) + 2 * f * ibc_tune_step_factor(m, n - p);
			*B = N * (lg + 2 * f);
			*G = N * (lg + f) + N;
			return;
		case IBC_ALGO_RAB:
			*S = -1;
			if (cnt < p && ibc_tune_step_factor(m, 1) < 1)
				*S = rab_small_steps(m, (uint64_t)cnt);
			if (*S < 0)
				*S = 2 * lg * ibc_tune_step_factor(m, p) +
				     2 * f * ibc_tune_step_factor(m, n - p);
			*B = 2 * (p - 1) / p * N + 2 * f * N;
			*G = (p - 1) / p * N + f * N + N;
			return;
		case IBC_ALGO_SHM:
			/*
			 * src/coll/shm_allreduce.c. beta prices a byte moved
			 * between two ranks (a copy in and a copy out of a shm
			 * slot), so one copy of N costs N / 2 of B. Small: one
			 * synchronisation, a copy in, an n-way reduction of the
			 * whole message. Chunked: two synchronisations per chunk,
			 * a copy in and a copy out, 1/n of the n-way reduction.
			 * From IBC_SHM_ALLREDUCE_CMA_MIN_BYTES, single copy.
			 */
			if (N <= (double)m->shm_small) {
				*S = 1;
				*B = N / 2;
				*G = (n - 1) * N;
			} else if (m->shm_cma_min >= 0 && N >= (double)m->shm_cma_min) {
				/*
				 * single copy (shm_allreduce_cma.c): two
				 * synchronisations; each rank reads its slice
				 * of every input and writes it into every
				 * output, one copy of N in all
				 */
				*S = 2;
				*B = N / 2;
				*G = (double)(n - 1) / n * N;
			} else {
				k = IBC_MAX(1.0, ceil(N / (double)IBC_MAX(m->shm_chunk, 64)));
				*S = 2 * k;
				*B = N;
				*G = (double)(n - 1) / n * N;
			}
			return;
		default:
			return;
		}
	}
	if (algo == IBC_ALGO_RING) {
		c = IBC_MIN(N, rc);
		k = IBC_MAX(1.0, ceil(N / rc));
		*S = (n - 1) + (k - 1);
	} else {
		h = ibc_binomial_height(n);
		c = IBC_MIN(IBC_MAX(C, ceil(N / IBC_SCHED_MAX_CHUNKS)), N);
		k = IBC_MAX(1.0, ceil(N / IBC_MAX(c, 1.0)));
		*S = h * k;
	}
	*B = *S * c;
	*G = coll == IBC_TUNE_REDUCE ? *B : 0;
}

/* the largest message the algorithm sends, bytes (decides whether LL applies) */
static double tune_max_msg(const struct ibc_tune_model *m, int coll, int algo, double N, double C)
{
	double rc = (double)IBC_MAX(m->ring_chunk, 1);

	if (coll == IBC_TUNE_ALLREDUCE) {
		/*
		 * The schedule executor (tree, rd, rabenseifner) first copies the
		 * input into the output buffer (src/coll/sched_exec.c): one
		 * local pass over N bytes, priced like a reduction pass (gamma);
		 * without it the model ranked Rabenseifner ahead of the ring on
		 * shm at 1-4 MiB, where it is slower (bench/RESULTS.md).
		 */
		switch (algo) {
		case IBC_ALGO_RING:
			return IBC_MIN(ceil(N / m->nranks), rc);
		case IBC_ALGO_TREE:
			return IBC_MIN(C, ceil(N / 2));
		case IBC_ALGO_RD:
			return IBC_MIN(C, N);
		case IBC_ALGO_SHM:
			return N;       /* no messages: LL does not apply */
		default:
			return IBC_MIN(C, ceil(N / 2));
		}
	}
	return algo == IBC_ALGO_RING ? IBC_MIN(N, rc) : IBC_MIN(C, N);
}

static const struct ibc_tune_coef *tune_coef(const struct ibc_tune_model *m, int coll, int algo,
					     int proto)
{
	const struct ibc_tune_coef *c = &m->coef[coll][algo][proto];

	if (c->alpha_us >= 0)
		return c;
	/*
	 * The shm all-reduce synchronises through counters in shared memory,
	 * which costs what an LL line costs (a store and a poll), not a slot
	 * message with its descriptor and credits: without fitted rows it is
	 * priced with the LL base (the probe measures it on shm).
	 */
	if (algo == IBC_ALGO_SHM && m->has_ll)
		return &m->base[IBC_PROTO_LL];
	return &m->base[proto];
}

/**
 * ibc_tune_predict() - The model's time for one operation.
 * @m:           [in] model.
 * @coll:        [in] enum ibc_tune_coll.
 * @algo:        [in] enum ibc_algo (must apply to @coll).
 * @proto:       [in] enum ibc_proto.
 * @nbytes:      [in] message size, bytes.
 * @chunk_bytes: [in] pipeline chunk of tree/rd/rabenseifner, bytes.
 *
 * Return: predicted time in us (0 for one rank). Pure.
 */
double ibc_tune_predict(const struct ibc_tune_model *m, int coll, int algo, int proto,
			size_t nbytes, size_t chunk_bytes)
{
	const struct ibc_tune_coef *k = tune_coef(m, coll, algo, proto);
	double S;
	double B;
	double G;

	ibc_tune_shape(m, coll, algo, (double)nbytes, (double)IBC_MAX(chunk_bytes, 1), &S, &B, &G);
	return k->alpha_us * S + (k->beta_ns * B + ibc_tune_gamma(m, k->gamma_ns, (double)nbytes) * G) / 1000.0;
}

static int tune_ll_ok(const struct ibc_tune_model *m, int coll, int algo, size_t nbytes,
		      size_t chunk)
{
	return m->has_ll && m->ll_max > 0 &&
	       tune_max_msg(m, coll, algo, (double)nbytes, (double)chunk) <= (double)m->ll_max;
}

/**
 * ibc_tune_ll_applies() - Whether LL changes anything for one operation:
 * the transport has an LL path and every message of @algo on @nbytes with
 * @chunk_bytes fits IBC_LL_MAX_BYTES. Pure.
 */
int ibc_tune_ll_applies(const struct ibc_tune_model *m, int coll, int algo, size_t nbytes,
			size_t chunk_bytes)
{
	return tune_ll_ok(m, coll, algo, nbytes, chunk_bytes);
}

/* best protocol and chunk for one algorithm; returns the predicted time */
double ibc_tune_best_for_algo(const struct ibc_tune_model *m, int coll, int algo, size_t nbytes,
				 struct ibc_algo_choice *c)
{
	size_t fixed = 0;
	double best = HUGE_VAL;
	size_t i;
	int pi;

	if (algo == IBC_ALGO_RING)
		fixed = (size_t)m->ring_chunk;
	else if (algo == IBC_ALGO_SHM)
		fixed = (size_t)m->shm_chunk;
	else if (m->force_chunk > 0)
		fixed = (size_t)m->force_chunk;
	else if (algo == IBC_ALGO_RD || algo == IBC_ALGO_RAB)
		fixed = TUNE_DEFAULT_CHUNK;
	/* LL first: on a tie (its latency capped at simple's) it is the better bet */
	for (pi = 0; pi < IBC_PROTO_COUNT; pi++) {
		int proto = IBC_PROTO_COUNT - 1 - pi;

		/* the shm all-reduce sends no messages: one protocol */
		if (algo == IBC_ALGO_SHM && proto != IBC_PROTO_SIMPLE)
			continue;
		if (algo != IBC_ALGO_SHM && m->force_proto >= 0 && proto != m->force_proto)
			continue;
		for (i = 0; i < (fixed ? 1 : IBC_ARRAY_SIZE(tune_chunks)); i++) {
			size_t chunk = fixed ? fixed : tune_chunks[i];
			double t;

			/* LL needs small messages; with IBC_PROTO=ll it is used where it fits */
			if (proto == IBC_PROTO_LL && m->force_proto != IBC_PROTO_LL &&
			    !tune_ll_ok(m, coll, algo, nbytes, chunk))
				continue;
			t = ibc_tune_predict(m, coll, algo, proto, nbytes, chunk);
			if (t < best) {
				best = t;
				c->algo = algo;
				c->proto = proto;
				c->chunk_bytes = chunk;
				c->predicted_us = t;
			}
		}
	}
	return best;
}

/* @algo implements @coll and can run on this communicator (shm: one host) */
int ibc_tune_algo_ok(const struct ibc_tune_model *m, int coll, int algo)
{
	return ibc_algo_applies(coll, algo) && (algo != IBC_ALGO_SHM || m->shm_ok);
}

/*
 * The race. The model prices ring, shm, rd and Rabenseifner alike where they
 * move and reduce the same bytes (on 2 ranks from 32 KiB to 2 MiB, B = N
 * for all four, and they differ in a few alphas and half a gamma pass),
 * while their measured times differ by 10-30 % in ways no term of the
 * model follows. On 2 shm ranks over 40 passes, rd was within 10 % of the
 * best at 32 KiB in 37, the ring at 256 KiB in 36 and the shm all-reduce
 * at 2 MiB in 38, and the probe-only model in 61 of those 120 cells; on
 * inputs that were written (those runs read the zero page) its picks were
 * 17, 29 and 20 % slower than the best at 32 KiB, 256 KiB and 2 MiB
 * (bench/RESULTS.md, "The race"). So where every rank has a core (share 1;
 * on a time-shared host a few ms of timing measure the scheduler more than
 * the algorithm) and the probe ran, the all-reduce algorithms the model
 * prices within IBC_TUNE_RACE_MARGIN of the best at an anchor (8 B to
 * 2 MiB, every 8x) are timed there once, at init (tuner_race():
 * a warm-up and IBC_TUNE_RACE_REPS repetitions each, interleaved, the
 * slowest rank's fastest repetition), and from 2^-1.5 to 2^1.5 times the
 * anchor each
 * timed algorithm is priced at its prediction x its measured / predicted
 * ratio. The race only re-orders the algorithms it timed: where the model's
 * own choice at a size was not timed (it was more than the margin behind
 * at the anchor), that choice stands; where it was, only timed algorithms
 * compete, even if an untimed one is predicted cheaper than their scaled
 * prices, and the model's choice is kept unless it is priced more than
 * IBC_TUNE_RACE_KEEP x the fastest: within 10 % the race, a few ms of
 * timing, does not overrule the model, so that it does no harm where the
 * model is right. Replayed on the same 20 passes of 2 ranks
 * (bench/RESULTS.md, "The race"), the rule kept 3 tcp cells at 256 KiB
 * within 10 % of the best and lost 7 shm cells: 336 against 340 of 360,
 * within the noise; without the race, 309. Not with IBC_ALGO, a tuning file (fitted rows), or
 * IBC_TUNING_RACE_MS=0. IBC_TUNING_RACE_MS
 * bounds the wall time of the probe and the race together: anchors are
 * raced smallest first, each only if the time taken since the probe
 * started (the slowest rank's, agreed by a max all-reduce) plus its
 * expected cost (predicted x the larger of RACE_COST_FACTOR and the last
 * raced anchor's measured / predicted) fits; the rest are skipped,
 * so the budget is overrun only by an anchor's misprediction, and a probe
 * slowed by a loaded machine leaves the race less time.
 * A ratio measured with the protocol and chunk an algorithm had at the
 * anchor is applied to whatever protocol and chunk it has at the size.
 * This is FFTW's "measure" planning in miniature (M. Frigo and S. G.
 * Johnson, "The Design and Implementation of FFTW3", Proc. IEEE 93(2),
 * 2005), with the model choosing what is worth measuring.
 */
#define RACE_REP_US 50.0        /* a timed repetition: at least this long, predicted */
/*
 * An anchor's expected cost: its operations' predicted time x this. On 2
 * ranks here the raced operations took 1.1-2.3x their prediction, 1.3x
 * summed over an anchor's candidates at 2 MiB.
 */

/*
 * Every algorithm's best protocol and chunk for @coll on @nbytes: @v its
 * predicted time (HUGE_VAL where it does not apply), @t the choice. Returns
 * the first algorithm with the lowest finite time (ties: enum order), or -1.
 */
int ibc_tune_price_all(const struct ibc_tune_model *m, int coll, size_t nbytes,
		       double v[IBC_ALGO_COUNT], struct ibc_algo_choice t[IBC_ALGO_COUNT])
{
	int best = -1;
	int a;

	for (a = 0; a < IBC_ALGO_COUNT; a++) {
		v[a] = HUGE_VAL;
		if (!ibc_tune_algo_ok(m, coll, a))
			continue;
		v[a] = ibc_tune_best_for_algo(m, coll, a, nbytes, &t[a]);
		if (v[a] < (best < 0 ? HUGE_VAL : v[best]))
			best = a;
	}
	return best;
}

/* the raced anchor whose band holds @nbytes, or NULL */
const struct ibc_tune_race *ibc_tune_race_at(const struct ibc_tune_model *m, int coll,
						size_t nbytes)
{
	int i;

	if (coll != IBC_TUNE_ALLREDUCE || nbytes == 0)
		return NULL;
	for (i = 0; i < IBC_TUNE_RACE_ANCHORS; i++) {
		const struct ibc_tune_race *r = &m->race[i];

		if (r->nbytes > 0 && fabs(log2((double)nbytes) - log2((double)r->nbytes)) < 1.5)
			return r;
	}
	return NULL;
}

/**
 * ibc_tune_race_plan() - What the race (above) times on a model: the
 * anchors, smallest first, where at least two all-reduce algorithms are
 * predicted within IBC_TUNE_RACE_MARGIN of the best and whose expected
 * cost (RACE_COST_FACTOR x the predicted time of its operations) fits
 * m->race_ms on its own. Which of them run is decided as the race goes,
 * on the time it has taken (tuner_race()).
 * @m:    [in]  the agreed model (the same on every rank, so is the plan).
 * @plan: [out] up to IBC_TUNE_RACE_ANCHORS anchors.
 *
 * Return: the number of anchors planned; 0 where the race does not apply
 * (m->race_ms 0, no probe, tuning-file rows, IBC_ALGO, share > 1, 1 rank).
 * Pure.
 */
int ibc_tune_race_plan(const struct ibc_tune_model *m,
		       struct ibc_tune_race_plan plan[IBC_TUNE_RACE_ANCHORS])
{
	int np = 0;
	int i;

	if (m->race_ms <= 0 || !m->probe || (m->source & IBC_TUNE_SRC_FILE) ||
	    m->force_algo >= 0 || m->share > 1 || m->nranks < 2)
		return 0;
	for (i = 0; i < IBC_TUNE_RACE_ANCHORS; i++) {
		size_t nb = (size_t)IBC_TUNE_RACE_FIRST << (3 * i);
		struct ibc_tune_race_plan *p = &plan[np];
		struct ibc_algo_choice t[IBC_ALGO_COUNT];
		double v[IBC_ALGO_COUNT];
		double best;
		double sum = 0;
		int a = ibc_tune_price_all(m, IBC_TUNE_ALLREDUCE, nb, v, t);

		best = a < 0 ? HUGE_VAL : v[a];
		if (!(best > 0) || best == HUGE_VAL)
			continue;
		memset(p, 0, sizeof(*p));
		p->nbytes = (int64_t)nb;
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			if (v[a] <= IBC_TUNE_RACE_MARGIN * best) {
				p->c[p->n++] = t[a];
				sum += v[a];
			}
		if (p->n < 2)
			continue;
		p->iters = (int)IBC_MAX(1.0, ceil(RACE_REP_US / best));
		p->cost_us = RACE_COST_FACTOR * (IBC_TUNE_RACE_REPS + 1) * p->iters * sum;
		if (p->cost_us > m->race_ms * 1000.0)
			continue;
		np++;
	}
	return np;
}

/**
 * ibc_tune_choose() - The predicted-fastest algorithm, protocol and chunk.
 * @m:      [in]  model (its force_* fields are honoured where they apply).
 * @coll:   [in]  enum ibc_tune_coll.
 * @nbytes: [in]  message size, bytes.
 * @c:      [out] the choice.
 *
 * Ties go to the earlier algorithm and chunk in enum order and to LL over
 * simple, so the result is a pure function of the arguments (the same on
 * every rank). Near an anchor of m->race (all-reduce), the algorithms the
 * race timed are priced at prediction x measured / predicted ratio, if the
 * model's own choice is one of them, and the fastest replaces the model's
 * choice where that is priced over IBC_TUNE_RACE_KEEP x the fastest (above,
 * "The race"); predicted_us is then that product.
 */
void ibc_tune_choose(const struct ibc_tune_model *m, int coll, size_t nbytes,
		     struct ibc_algo_choice *c)
{
	struct ibc_algo_choice t[IBC_ALGO_COUNT];
	double v[IBC_ALGO_COUNT];
	const struct ibc_tune_race *r;
	double best;
	int algo;
	int own;
	int win = 0;

	memset(c, 0, sizeof(*c));
	c->algo = IBC_ALGO_RING;
	c->chunk_bytes = (size_t)m->ring_chunk;
	if (m->force_algo >= 0 && ibc_tune_algo_ok(m, coll, m->force_algo)) {
		ibc_tune_best_for_algo(m, coll, m->force_algo, nbytes, c);
		return;
	}
	own = ibc_tune_price_all(m, coll, nbytes, v, t);
	if (own < 0)
		return;
	*c = t[own];
	/*
	 * Near a raced anchor the timed algorithms are re-ordered by their
	 * times, but the model's choice is overturned only where it was timed
	 * more than IBC_TUNE_RACE_KEEP slower than the best.
	 */
	r = ibc_tune_race_at(m, coll, nbytes);
	if (!r || r->ratio[own] <= 0)
		return;
	best = HUGE_VAL;
	for (algo = 0; algo < IBC_ALGO_COUNT; algo++) {
		if (r->ratio[algo] <= 0 || v[algo] == HUGE_VAL || v[algo] * r->ratio[algo] >= best)
			continue;
		best = v[algo] * r->ratio[algo];
		win = algo;
	}
	if (v[own] * r->ratio[own] <= IBC_TUNE_RACE_KEEP * best)
		win = own;
	*c = t[win];
	c->predicted_us = v[win] * r->ratio[win];
}
