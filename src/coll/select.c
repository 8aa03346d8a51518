/* SPDX-License-Identifier: MIT */
/*
 * select.c - the tuner (select.h): alpha-beta-gamma cost model per
 * (collective, algorithm, protocol) and transport, the choice of algorithm,
 * protocol and chunk per message size, the tuning file, the fit that
 * produces it, and the per-communicator state with its start-up probe.
 * Sources: R. Hockney, "The communication challenge for MPP", Parallel
 * Computing 20(3), 1994 (alpha-beta model); Thakur, Rabenseifner, Gropp,
 * IJHPCA 19(1), 2005 (costs of ring, recursive doubling, Rabenseifner,
 * binomial trees, with gamma); NCCL's tuning model (src/graph/tuning.cc),
 * which also prices trees per pipeline step.
 *
 * The shapes (S steps, B bytes moved, G bytes reduced on the critical path;
 * n ranks, N bytes, p = 2^floor(log2 n), f = 1 if n != p, h = tree height,
 * c = chunk, k = chunks, rc = IBC_RING_CHUNK_BYTES):
 *   all-reduce ring:  S = 2(n-1) ceil(N/n/rc)   B = 2(n-1)/n N    G = (n-1)/n N
 *   all-reduce tree:  S = 2(h+k-1)  B = 4c(h+k-1)  G = 2c(h+k-1)  (k = N/2/c)
 *   all-reduce rd:    S = log2 p + 2f   B = N(log2 p + 2f)   G = N(log2 p + f)
 *   all-reduce rab.:  S = 2 log2 p + 2f  B = 2(p-1)/p N + 2fN  G = (p-1)/p N + fN
 *   bcast/reduce chain:    S = n-1+k-1 (c = rc)   B = S c   G = B (reduce)
 *   bcast/reduce binomial: S = h k   B = h k c   G = B (reduce)
 * T = alpha S + (beta B + share gamma G) / 1000 us. The tree shapes count
 * both directions of every link a rank drives; the fit (ibc_tune_fit)
 * absorbs what the shapes miss into per-algorithm coefficients.
 *
 * share = max(1, ceil(ranks on the host / cores it may use)) (ibc_tune_share)
 * is the time sharing of an oversubscribed host. gamma is a rank's
 * reduction speed with a core to itself (the probe keeps the fastest of 4
 * passes); in an all-reduce every rank makes its local passes (the
 * reductions and the executor's copy) at about the same time, so with more
 * ranks than cores each pass takes share times longer, and the exchange
 * that needs its result waits for it. alpha and beta need no such factor:
 * the probe measures them with every rank of the host communicating at
 * once. The same lock-step argument, and ceil rather than the fluid R / C,
 * as docs/scaling.md's lock(R): the collective runs at the pace of the
 * busiest core. Measured on 8 tcp ranks on 2 cores (bench/RESULTS.md,
 * "time sharing"): without it the model ranked Rabenseifner (6 steps, one
 * extra pass over N) ahead of the ring (14 steps) at 2 MiB, where the ring
 * is 20-110 % faster.
 *
 * Messages in flight (a host with more than twice as many ranks as cores,
 * share > 2, n >= 4): recursive doubling, Rabenseifner and the ring send
 * from every rank in every step, but on fewer elements than ranks
 * Rabenseifner and the ring have steps with fewer messages (the programs
 * send no empty message, sched.h), and on cores that the ranks time-share
 * such a step is cheaper. The probe times n/2 pairs' round trips at once
 * (n/2 messages in flight: alpha) and a lone pair (ranks 0 and 1, the
 * others asleep in a broadcast): lone_frac = f = lone / alpha. A step's
 * latency is taken linear in its messages m, L(m) = f + (1 - f)(m - 1) /
 * (n/2 - 1), and a step with m messages is priced alpha L(m) / L(n): a full
 * step keeps alpha, as calibrated against beta (both measured by the
 * pairs), and raising it to L(n) moved the large-message crossovers (6
 * cells in 3 of 30 runs then picked rd or Rabenseifner from 256 KiB to
 * 64 MiB, 29-307 % slower). Rabenseifner's messages are counted on every rank's real
 * program where its elements (of the operation's size) are fewer than the
 * power of two it works on; the ring's are min(count, n). Measured on 8
 * tcp ranks on 2 cores (bench/RESULTS.md, "Messages in flight and the
 * cache"): a full exchange takes about 2 alpha, and Rabenseifner at 8 B,
 * 2 floats in 8 blocks (steps of 4, 2, 2, 2, 2, 4 messages), is 18 %
 * faster than rd's 3 full exchanges, which the model without the term
 * ranked first. With share <= 2 the pairs have a core each and the slope
 * is noise: on 4 tcp ranks on 2 cores the term ranked Rabenseifner first at
 * 8 B, where rd was faster in 9 of 10 runs (up to 76 %), and so did a
 * time-sharing form of it, ceil(m share / n) / share. Broadcast and reduce
 * keep alpha per step, and so do a tuning file's fitted rows.
 *
 * The lone pair: on a shared host with n >= 4, ranks 0 and 1 time 8-byte
 * round trips alone while the others sleep in a broadcast, and alpha is
 * capped at share x lone (ibc_tune_set_lone): the probe's pairs are at
 * most share times slower than one pair with the cores to itself, and a
 * higher alpha is another job's load during their few ms.
 *
 * Cache: gamma is measured twice, from memory (2 MiB, a 4 MiB working set)
 * and from a core's L2 (256 KiB); an operation on N bytes is priced with
 * gamma blended towards the in-cache speed by min(1, L2 / (share 2 N)), the
 * fraction of its ranks' working sets that fit the core's L2 (tune_gamma).
 */
#include "config.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/util.h"
#include "coll/coll.h"
#include "coll/reduce.h"
#include "coll/select.h"
#include "coll/tree/sched.h"

#define TUNE_DEFAULT_CHUNK (256u << 10)         /* rd/rabenseifner chunk, bytes */
#define TUNE_CACHE 8                            /* decisions cached per collective */
#define PROBE_SMALL 8                           /* bytes of a latency probe message */
#define PROBE_LARGE (512u << 10)                /* bytes of a bandwidth probe message */
#define PROBE_GAMMA (2u << 20)                  /* bytes reduced by the gamma probe (below) */
#define PROBE_GAMMA_CACHE (256u << 10)          /* bytes of its in-cache pass */
#define PROBE_SMALL_NS 6000000ull               /* time budget of a latency series */
#define PROBE_LARGE_NS 12000000ull              /* time budget of the bandwidth series */
#define PROBE_LONE_NS 4000000ull                /* time budget of the lone-pair series */

static const size_t tune_chunks[] = { 4u << 10, 16u << 10, 64u << 10, 256u << 10, 1u << 20,
				      4u << 20 };

/* ------------------------------------------------------------------------ */
/* names                                                                    */
/* ------------------------------------------------------------------------ */

static const char *const algo_names[IBC_ALGO_COUNT] = { "ring", "tree", "rd", "rabenseifner", "shm" };
static const char *const proto_names[IBC_PROTO_COUNT] = { "simple", "ll" };
static const char *const coll_names[IBC_TUNE_COLL_COUNT] = { "allreduce", "broadcast", "reduce" };
static const char *const tp_names[IBC_TUNE_TP_COUNT] = { "shm", "tcp", "ib" };

const char *ibc_algo_name(int algo)
{
	return algo >= 0 && algo < IBC_ALGO_COUNT ? algo_names[algo] : "?";
}

const char *ibc_proto_name(int proto)
{
	return proto >= 0 && proto < IBC_PROTO_COUNT ? proto_names[proto] : "?";
}

const char *ibc_tune_coll_name(int coll)
{
	return coll >= 0 && coll < IBC_TUNE_COLL_COUNT ? coll_names[coll] : "?";
}

const char *ibc_tune_tp_name(int tp)
{
	return tp >= 0 && tp < IBC_TUNE_TP_COUNT ? tp_names[tp] : "?";
}

static int parse_name(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

int ibc_algo_parse(const char *s)
{
	return parse_name(s, algo_names, IBC_ALGO_COUNT);
}

int ibc_proto_parse(const char *s)
{
	return parse_name(s, proto_names, IBC_PROTO_COUNT);
}

int ibc_tune_tp_parse(const char *s)
{
	return parse_name(s, tp_names, IBC_TUNE_TP_COUNT);
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
	m->shm_chunk = IBC_ALIGN_UP(ibc_param_shm_allreduce_chunk_bytes(), 64);
	m->shm_small = IBC_MIN(ibc_param_shm_allreduce_small_bytes(), m->shm_chunk);
	/* the slowest link is shm: every rank shares this host (a communicator
	 * broadcasts rank 0's model, so rank 0's view decides) */
	m->shm_ok = tp == IBC_TUNE_TP_SHM && nranks > 1 && ibc_param_shm_allreduce();
	m->share = 1;   /* a core per rank; tuner_init() sets the host's value */
	m->elem_bytes = 4;
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
static double tune_gamma(const struct ibc_tune_model *m, double gamma_ns, double N)
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
static void tune_shape(const struct ibc_tune_model *m, int coll, int algo, double N, double C,
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
		 * input into the output buffer (src/coll/tree/sched_exec.c): one
		 * local pass over N bytes, priced like a reduction pass (gamma).
		 * Measured on 4 shm ranks, 1 and 4 MiB: Rabenseifner 1007 and
		 * 3704 us, ring 698 and 2930 us, while the model without this
		 * term ranked Rabenseifner first (bench/RESULTS.md).
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
			 */
			if (N <= (double)m->shm_small) {
				*S = 1;
				*B = N / 2;
				*G = (n - 1) * N;
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
		 * input into the output buffer (src/coll/tree/sched_exec.c): one
		 * local pass over N bytes, priced like a reduction pass (gamma).
		 * Measured on 4 shm ranks, 1 and 4 MiB: Rabenseifner 1007 and
		 * 3704 us, ring 698 and 2930 us, while the model without this
		 * term ranked Rabenseifner first (bench/RESULTS.md).
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

	tune_shape(m, coll, algo, (double)nbytes, (double)IBC_MAX(chunk_bytes, 1), &S, &B, &G);
	return k->alpha_us * S + (k->beta_ns * B + tune_gamma(m, k->gamma_ns, (double)nbytes) * G) / 1000.0;
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
static double tune_best_for_algo(const struct ibc_tune_model *m, int coll, int algo, size_t nbytes,
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
static int tune_algo_ok(const struct ibc_tune_model *m, int coll, int algo)
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
#define RACE_COST_FACTOR 1.5

/*
 * Every algorithm's best protocol and chunk for @coll on @nbytes: @v its
 * predicted time (HUGE_VAL where it does not apply), @t the choice. Returns
 * the first algorithm with the lowest finite time (ties: enum order), or -1.
 */
static int tune_price_all(const struct ibc_tune_model *m, int coll, size_t nbytes,
			  double v[IBC_ALGO_COUNT], struct ibc_algo_choice t[IBC_ALGO_COUNT])
{
	int best = -1;
	int a;

	for (a = 0; a < IBC_ALGO_COUNT; a++) {
		v[a] = HUGE_VAL;
		if (!tune_algo_ok(m, coll, a))
			continue;
		v[a] = tune_best_for_algo(m, coll, a, nbytes, &t[a]);
		if (v[a] < (best < 0 ? HUGE_VAL : v[best]))
			best = a;
	}
	return best;
}

/* the raced anchor whose band holds @nbytes, or NULL */
static const struct ibc_tune_race *tune_race_at(const struct ibc_tune_model *m, int coll,
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
		int a = tune_price_all(m, IBC_TUNE_ALLREDUCE, nb, v, t);

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
	if (m->force_algo >= 0 && tune_algo_ok(m, coll, m->force_algo)) {
		tune_best_for_algo(m, coll, m->force_algo, nbytes, c);
		return;
	}
	own = tune_price_all(m, coll, nbytes, v, t);
	if (own < 0)
		return;
	*c = t[own];
	/*
	 * Near a raced anchor the timed algorithms are re-ordered by their
	 * times, but the model's choice is overturned only where it was timed
	 * more than IBC_TUNE_RACE_KEEP slower than the best.
	 */
	r = tune_race_at(m, coll, nbytes);
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

/* ------------------------------------------------------------------------ */
/* tuning file                                                              */
/* ------------------------------------------------------------------------ */

static double rank_distance(int a, int b)
{
	return fabs(log2((double)a) - log2((double)b));
}

/**
 * ibc_tune_file_load() - Read the rows of a tuning file that match the
 * model's transport, taking for every (collective, algorithm, protocol) and
 * for the base rows the row whose rank count is nearest to m->nranks (in
 * log scale; the first such row on ties).
 * @m:       [in,out] model; matching coefficients replace its own.
 * @path:    [in]  file (format: docs/algorithms.md).
 * @nrows_p: [out] rows used.
 *
 * Malformed lines log a WARN with their number and are skipped.
 * Return: IBC_OK; IBC_ERR_SYSTEM if the file cannot be opened (logged).
 */
ibc_status_t ibc_tune_file_load(struct ibc_tune_model *m, const char *path, int *nrows_p)
{
	double dist[IBC_TUNE_COLL_COUNT + 1][IBC_ALGO_COUNT][IBC_PROTO_COUNT];
	char line[512];
	FILE *f;
	int lineno = 0;
	int used = 0;
	int c;
	int a;
	int p;

	f = fopen(path, "r");
	if (!f) {
		IBC_LOG_WARN(TUNING, "cannot open IBC_TUNING_FILE %s: %s", path, strerror(errno));
		return IBC_ERR_SYSTEM;
	}
	for (c = 0; c <= IBC_TUNE_COLL_COUNT; c++)
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			for (p = 0; p < IBC_PROTO_COUNT; p++)
				dist[c][a][p] = HUGE_VAL;
	while (fgets(line, sizeof(line), f)) {
		char scoll[32];
		char salgo[32];
		char sproto[32];
		char stp[32];
		int nranks;
		struct ibc_tune_coef k;
		char *hash = strchr(line, '#');
		int coll;
		int algo;
		int proto;
		int tp;
		double d;

		lineno++;
		if (hash)
			*hash = '\0';
		if (sscanf(line, "%31s", scoll) != 1)
			continue;
		if (sscanf(line, "%31s %31s %31s %31s %d %lf %lf %lf", scoll, salgo, sproto, stp,
			   &nranks, &k.alpha_us, &k.beta_ns, &k.gamma_ns) != 8 || nranks < 1 ||
		    !(k.alpha_us >= 0) || !(k.beta_ns >= 0) || !(k.gamma_ns >= 0)) {
			IBC_LOG_WARN(TUNING, "%s:%d: expected 'collective algorithm protocol transport nranks alpha_us beta_ns gamma_ns' with numbers >= 0; line ignored",
				     path, lineno);
			continue;
		}
		coll = !strcmp(scoll, "base") ? IBC_TUNE_COLL_COUNT
					      : parse_name(scoll, coll_names, IBC_TUNE_COLL_COUNT);
		algo = coll == IBC_TUNE_COLL_COUNT ? 0 : ibc_algo_parse(salgo);
		proto = ibc_proto_parse(sproto);
		tp = ibc_tune_tp_parse(stp);
		if (coll < 0 || algo < 0 || proto < 0 || tp < 0 ||
		    (coll < IBC_TUNE_COLL_COUNT && !ibc_algo_applies(coll, algo))) {
			IBC_LOG_WARN(TUNING, "%s:%d: unknown collective, algorithm, protocol or transport ('%s %s %s %s'); line ignored",
				     path, lineno, scoll, salgo, sproto, stp);
			continue;
		}
		if (tp != m->tp)
			continue;
		d = rank_distance(nranks, m->nranks);
		if (!(d < dist[coll][algo][proto]))
			continue;
		dist[coll][algo][proto] = d;
		if (coll == IBC_TUNE_COLL_COUNT)
			m->base[proto] = k;
		else
			m->coef[coll][algo][proto] = k;
	}
	fclose(f);
	for (c = 0; c <= IBC_TUNE_COLL_COUNT; c++)
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			for (p = 0; p < IBC_PROTO_COUNT; p++)
				used += dist[c][a][p] < HUGE_VAL;
	if (dist[IBC_TUNE_COLL_COUNT][0][IBC_PROTO_SIMPLE] < HUGE_VAL &&
	    dist[IBC_TUNE_COLL_COUNT][0][IBC_PROTO_LL] == HUGE_VAL)
		m->base[IBC_PROTO_LL] = m->base[IBC_PROTO_SIMPLE];
	if (used)
		m->source |= IBC_TUNE_SRC_FILE;
	*nrows_p = used;
	return IBC_OK;
}

/**
 * ibc_tune_file_write() - Write @m's coefficients as tuning-file rows for
 * its transport and rank count: the base rows, then every fitted row.
 * @m: [in] model.
 * @f: [in] open stream.
 * Return: IBC_OK; IBC_ERR_SYSTEM on a write error.
 */
ibc_status_t ibc_tune_file_write(const struct ibc_tune_model *m, FILE *f)
{
	const char *tp = ibc_tune_tp_name(m->tp);
	int c;
	int a;
	int p;

	fprintf(f, "# ibcoll tuning file v1: collective algorithm protocol transport nranks alpha_us beta_ns_per_byte gamma_ns_per_byte\n");
	for (p = 0; p < IBC_PROTO_COUNT; p++)
		fprintf(f, "base - %s %s %d %.4f %.5f %.5f\n", proto_names[p], tp, m->nranks,
			m->base[p].alpha_us, m->base[p].beta_ns, m->base[p].gamma_ns);
	for (c = 0; c < IBC_TUNE_COLL_COUNT; c++)
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			for (p = 0; p < IBC_PROTO_COUNT; p++) {
				const struct ibc_tune_coef *k = &m->coef[c][a][p];

				if (k->alpha_us < 0)
					continue;
				fprintf(f, "%s %s %s %s %d %.4f %.5f %.5f\n", coll_names[c],
					algo_names[a], proto_names[p], tp, m->nranks, k->alpha_us,
					k->beta_ns, k->gamma_ns);
			}
	return ferror(f) ? IBC_ERR_SYSTEM : IBC_OK;
}

/**
 * ibc_tune_fit() - Fit alpha and beta of one (collective, algorithm,
 * protocol) to measured times, with gamma taken from m->base.
 * @m:     [in]  model (rank count, ring chunk, base gamma).
 * @coll:  [in]  enum ibc_tune_coll; @algo: [in] enum ibc_algo; @proto: [in].
 * @s:     [in]  @ns samples (size, chunk used, measured time).
 * @ns:    [in]  number of samples, >= 1.
 * @out_p: [out] the coefficients.
 *
 * Weighted least squares on relative error (weights 1/t^2), because the
 * tuner must be right to a few percent at every size, not in absolute
 * microseconds; alpha and beta are kept >= 0 (refit with one of them at 0
 * if the unconstrained optimum is negative). With samples of a single size
 * beta keeps the base value and alpha alone is fitted.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG for no samples or a non-positive time.
 */
ibc_status_t ibc_tune_fit(const struct ibc_tune_model *m, int coll, int algo, int proto,
			  const struct ibc_tune_sample *s, int ns, struct ibc_tune_coef *out_p)
{
	double a11 = 0;
	double a12 = 0;
	double a22 = 0;
	double b1 = 0;
	double b2 = 0;
	double gamma = m->base[proto].gamma_ns;
	double alpha;
	double beta;
	double det;
	int i;
	struct ibc_tune_model mf = *m;

	/* fitted rows are used without the lone-pair and cache terms (a file's model has none) */
	mf.lone_frac = 0;
	mf.gamma_cache_ns = 0;
	m = &mf;
	if (ns < 1)
		return IBC_ERR_INVALID_ARG;
	for (i = 0; i < ns; i++) {
		double S;
		double B;
		double G;
		double w;
		double y;

		if (!(s[i].time_us > 0))
			return IBC_ERR_INVALID_ARG;
		tune_shape(m, coll, algo, (double)s[i].nbytes, (double)IBC_MAX(s[i].chunk_bytes, 1),
			   &S, &B, &G);
		B /= 1000.0;
		w = 1.0 / (s[i].time_us * s[i].time_us);
		y = s[i].time_us - tune_gamma(m, gamma, (double)s[i].nbytes) * G / 1000.0;
		a11 += w * S * S;
		a12 += w * S * B;
		a22 += w * B * B;
		b1 += w * S * y;
		b2 += w * B * y;
	}
	det = a11 * a22 - a12 * a12;
	if (det > 1e-12 * a11 * a22 && a22 > 0) {
		alpha = (b1 * a22 - b2 * a12) / det;
		beta = (a11 * b2 - a12 * b1) / det;
	} else {
		beta = m->base[proto].beta_ns;
		alpha = a11 > 0 ? (b1 - beta * a12) / a11 : 0;
	}
	if (alpha < 0) {
		alpha = 0;
		beta = a22 > 0 ? b2 / a22 : 0;
	}
	if (beta < 0) {
		beta = 0;
		alpha = a11 > 0 ? b1 / a11 : 0;
	}
	out_p->alpha_us = IBC_MAX(alpha, 0.0);
	out_p->beta_ns = IBC_MAX(beta, 0.0);
	out_p->gamma_ns = gamma;
	return IBC_OK;
}

/* the sums of one algorithm's samples for the weighted least squares */
struct fit_sums {
	double ss;      /* sum w S^2 */
	double sb;      /* sum w S B */
	double bb;      /* sum w B^2 */
	double sy;      /* sum w S y */
	double by;      /* sum w B y */
	int n;
};

static int fit_accumulate(const struct ibc_tune_model *m, int coll, int algo, double gamma,
			  const struct ibc_tune_sample *s, int ns, struct fit_sums *f)
{
	int i;

	memset(f, 0, sizeof(*f));
	for (i = 0; i < ns; i++) {
		double S;
		double B;
		double G;
		double w;
		double y;

		if (!(s[i].time_us > 0))
			return -1;
		tune_shape(m, coll, algo, (double)s[i].nbytes, (double)IBC_MAX(s[i].chunk_bytes, 1),
			   &S, &B, &G);
		B /= 1000.0;
		w = 1.0 / (s[i].time_us * s[i].time_us);
		y = s[i].time_us - tune_gamma(m, gamma, (double)s[i].nbytes) * G / 1000.0;
		f->ss += w * S * S;
		f->sb += w * S * B;
		f->bb += w * B * B;
		f->sy += w * S * y;
		f->by += w * B * y;
		f->n++;
	}
	return 0;
}

/**
 * ibc_tune_fit_coll() - Fit one collective's coefficients for all its
 * algorithms at once: one alpha per protocol, shared by the algorithms (a
 * message step costs what it costs whatever the algorithm), and one beta
 * per algorithm (how well it uses bandwidth and memory). The LL protocol
 * only carries small messages, so its samples fit only its alpha (capped at
 * simple's: LL removes work from a step); its betas are the simple
 * protocol's.
 * @m:     [in]  model (rank count, ring chunk, base gamma and beta).
 * @coll:  [in]  enum ibc_tune_coll.
 * @s:     [in]  per algorithm and protocol, the samples (may be NULL).
 * @ns:    [in]  per algorithm and protocol, the number of samples.
 * @out:   [out] per algorithm and protocol, the coefficients; alpha_us is
 *               -1 where that algorithm and protocol had no sample.
 *
 * Weighted least squares on relative error (weights 1/t^2); the normal
 * equations form an arrowhead matrix solved by its Schur complement; alpha
 * and the betas are kept >= 0 (a negative one is set to 0 and the others
 * refitted). Per-algorithm alphas fitted to noisy small-message times
 * (ibc_tune_fit) can differ by an order of magnitude on a loaded machine;
 * sharing alpha keeps the small-message choice on the schedules' step
 * counts, which is where the algorithms really differ.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG for a non-positive time.
 */
ibc_status_t ibc_tune_fit_coll(const struct ibc_tune_model *m, int coll,
			       const struct ibc_tune_sample *const s[IBC_ALGO_COUNT][IBC_PROTO_COUNT],
			       const int ns[IBC_ALGO_COUNT][IBC_PROTO_COUNT],
			       struct ibc_tune_coef out[IBC_ALGO_COUNT][IBC_PROTO_COUNT])
{
	struct fit_sums f[IBC_ALGO_COUNT];
	double beta[IBC_ALGO_COUNT];
	double gamma = m->base[IBC_PROTO_SIMPLE].gamma_ns;
	double alpha = m->base[IBC_PROTO_SIMPLE].alpha_us;
	double a00 = 0;
	double r0 = 0;
	int have = 0;
	int a;
	int p;
	struct ibc_tune_model mf = *m;

	/* fitted rows are used without the lone-pair and cache terms (a file's model has none) */
	mf.lone_frac = 0;
	mf.gamma_cache_ns = 0;
	m = &mf;
	for (a = 0; a < IBC_ALGO_COUNT; a++)
		for (p = 0; p < IBC_PROTO_COUNT; p++)
			out[a][p] = (struct ibc_tune_coef){ -1.0, 0, gamma };
	/* simple: alpha shared, beta per algorithm (arrowhead system) */
	for (a = 0; a < IBC_ALGO_COUNT; a++) {
		beta[a] = m->base[IBC_PROTO_SIMPLE].beta_ns;
		if (fit_accumulate(m, coll, a, gamma, s[a][IBC_PROTO_SIMPLE],
				   s[a][IBC_PROTO_SIMPLE] ? ns[a][IBC_PROTO_SIMPLE] : 0, &f[a]))
			return IBC_ERR_INVALID_ARG;
		if (!f[a].n)
			continue;
		have = 1;
		a00 += f[a].ss;
		r0 += f[a].sy;
		if (f[a].bb > 0) {
			a00 -= f[a].sb * f[a].sb / f[a].bb;
			r0 -= f[a].sb * f[a].by / f[a].bb;
		}
	}
	if (have) {
		int a2;

		alpha = a00 > 1e-300 ? r0 / a00 : alpha;
		if (!(alpha >= 0))
			alpha = 0;
		for (a = 0; a < IBC_ALGO_COUNT; a++) {
			if (f[a].n && f[a].bb > 0)
				beta[a] = IBC_MAX((f[a].by - f[a].sb * alpha) / f[a].bb, 0.0);
		}
		/* refit alpha with the (clamped) betas */
		a00 = 0;
		r0 = 0;
		for (a2 = 0; a2 < IBC_ALGO_COUNT; a2++) {
			if (!f[a2].n)
				continue;
			a00 += f[a2].ss;
			r0 += f[a2].sy - beta[a2] * f[a2].sb;
		}
		if (a00 > 0)
			alpha = IBC_MAX(r0 / a00, 0.0);
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			if (f[a].n)
				out[a][IBC_PROTO_SIMPLE] = (struct ibc_tune_coef){ alpha, beta[a], gamma };
	}
	/* LL: one alpha, the betas of simple */
	{
		double ss = 0;
		double sy = 0;

		for (a = 0; a < IBC_ALGO_COUNT; a++) {
			struct fit_sums g;

			if (!s[a][IBC_PROTO_LL] || !ns[a][IBC_PROTO_LL])
				continue;
			if (fit_accumulate(m, coll, a, gamma, s[a][IBC_PROTO_LL], ns[a][IBC_PROTO_LL],
					   &g))
				return IBC_ERR_INVALID_ARG;
			ss += g.ss;
			sy += g.sy - beta[a] * g.sb;
		}
		if (ss > 0) {
			/* LL takes work away from a message step, never adds some: a fit
			 * above simple's alpha is noise (other jobs) and is capped */
			double all = IBC_MIN(IBC_MAX(sy / ss, 0.0),
					     have ? alpha : m->base[IBC_PROTO_SIMPLE].alpha_us);

			for (a = 0; a < IBC_ALGO_COUNT; a++)
				if (s[a][IBC_PROTO_LL] && ns[a][IBC_PROTO_LL])
					out[a][IBC_PROTO_LL] = (struct ibc_tune_coef){ all, beta[a], gamma };
		}
	}
	return IBC_OK;
}

/* ------------------------------------------------------------------------ */
/* printing                                                                 */
/* ------------------------------------------------------------------------ */

static void fmt_bytes(size_t v, char *buf, size_t len)
{
	if (v >= (1u << 30) && v % (1u << 30) == 0)
		snprintf(buf, len, "%zu GiB", v >> 30);
	else if (v >= (1u << 20) && v % (1u << 20) == 0)
		snprintf(buf, len, "%zu MiB", v >> 20);
	else if (v >= 1024 && v % 1024 == 0)
		snprintf(buf, len, "%zu KiB", v >> 10);
	else
		snprintf(buf, len, "%zu B", v);
}

static int choice_eq(const struct ibc_algo_choice *a, const struct ibc_algo_choice *b)
{
	if (a->algo != b->algo || a->proto != b->proto)
		return 0;
	return a->algo == IBC_ALGO_RING || a->chunk_bytes == b->chunk_bytes;
}

/* call @fn for every size range (powers of two, 1 B .. 1 GiB) with one choice */
typedef void (*tune_range_fn)(void *arg, size_t lo, size_t hi, const struct ibc_algo_choice *c);

static void tune_ranges(const struct ibc_tune_model *m, int coll, tune_range_fn fn, void *arg)
{
	struct ibc_algo_choice cur;
	size_t lo = 1;
	size_t v;

	ibc_tune_choose(m, coll, 1, &cur);
	for (v = 2; v <= (1u << 30); v <<= 1) {
		struct ibc_algo_choice c;

		ibc_tune_choose(m, coll, v, &c);
		if (!choice_eq(&c, &cur)) {
			fn(arg, lo, v >> 1, &cur);
			lo = v;
			cur = c;
		}
	}
	fn(arg, lo, (size_t)1 << 30, &cur);
}

static void range_text(size_t lo, size_t hi, const struct ibc_algo_choice *c, char *buf,
		       size_t len)
{
	char a[32];
	char b[32];
	char ch[32];

	fmt_bytes(lo, a, sizeof(a));
	fmt_bytes(hi, b, sizeof(b));
	fmt_bytes(c->chunk_bytes, ch, sizeof(ch));
	if (c->algo == IBC_ALGO_RING)
		snprintf(buf, len, "%9s .. %-9s %s %s", a, b, algo_names[c->algo],
			 proto_names[c->proto]);
	else
		snprintf(buf, len, "%9s .. %-9s %s %s, chunk %s", a, b, algo_names[c->algo],
			 proto_names[c->proto], ch);
}

static void print_range(void *arg, size_t lo, size_t hi, const struct ibc_algo_choice *c)
{
	char buf[160];

	range_text(lo, hi, c, buf, sizeof(buf));
	fprintf(arg, "  %s\n", buf);
}

static void source_text(const struct ibc_tune_model *m, char *buf, size_t len)
{
	int probe = !!(m->source & IBC_TUNE_SRC_PROBE);
	int file = !!(m->source & IBC_TUNE_SRC_FILE);

	snprintf(buf, len, "%s", probe && file ? "probe+file" : probe ? "probe" : file ? "file"
											  : "defaults");
}

/* the race at anchor @i: "256 KiB: ring 47.7 us (predicted 38.5), shm ..." */
static void race_text(const struct ibc_tune_model *m, int i, char *buf, size_t len)
{
	const struct ibc_tune_race *r = &m->race[i];
	size_t n;
	int a;

	fmt_bytes((size_t)r->nbytes, buf, len);
	n = strlen(buf);
	for (a = 0; a < IBC_ALGO_COUNT && n < len; a++) {
		struct ibc_algo_choice c;
		double v;

		if (r->ratio[a] <= 0)
			continue;
		v = tune_best_for_algo(m, IBC_TUNE_ALLREDUCE, a, (size_t)r->nbytes, &c);
		/* two decimals below 10 us, where the LL and latency terms differ */
		n += (size_t)snprintf(buf + n, len - n, "%s %s %.*f us (predicted %.*f)",
				      n > 0 && buf[n - 1] == ')' ? "," : ":", algo_names[a],
				      v * r->ratio[a] < 10 ? 2 : 1, v * r->ratio[a], v < 10 ? 2 : 1,
				      v);
	}
}

/**
 * ibc_tune_print() - The model's coefficients and its choice per size
 * range of every collective (evaluated at powers of two), for ibc_info.
 * @m: [in] model.
 * @f: [in] output stream.
 */
void ibc_tune_print(const struct ibc_tune_model *m, FILE *f)
{
	char src[64];
	int c;
	int a;
	int p;

	source_text(m, src, sizeof(src));
	fprintf(f, "# tuning model: %d ranks over %s (coefficients from: %s), LL up to %lld bytes%s\n",
		m->nranks, ibc_tune_tp_name(m->tp), src, (long long)m->ll_max,
		m->has_ll ? "" : " (this transport has no LL path)");
	fprintf(f, "# time sharing: %d rank(s) per core, gamma priced x%d\n", (int)m->share,
		(int)m->share);
	if (m->gamma_cache_ns > 0 && m->cache_bytes > 0)
		fprintf(f, "# cache: gamma %.4f ns/B while the working set (ranks per core x 2 N) fits the %lld-byte L2\n",
			m->gamma_cache_ns, (long long)m->cache_bytes);
	if (ibc_tune_step_factor(m, 1) < 1)
		fprintf(f, "# messages in flight: a lone pair's latency is %.2f of alpha; a step with m of %d messages costs alpha x %.2f..1\n",
			m->lone_frac, m->nranks, ibc_tune_step_factor(m, 1));
	for (c = 0; c < IBC_TUNE_RACE_ANCHORS; c++) {
		char buf[512];

		if (m->race[c].nbytes <= 0)
			continue;
		race_text(m, c, buf, sizeof(buf));
		fprintf(f, "# race, all-reduce timed at init (used from 0.35x to 2.8x the size): %s\n", buf);
	}
	if (m->force_algo >= 0 || m->force_proto >= 0 || m->force_chunk > 0)
		fprintf(f, "# overrides: algorithm %s, protocol %s, chunk %lld bytes\n",
			m->force_algo >= 0 ? algo_names[m->force_algo] : "auto",
			m->force_proto >= 0 ? proto_names[m->force_proto] : "auto",
			(long long)m->force_chunk);
	fprintf(f, "#   %-10s %-13s %-7s %10s %10s %10s\n", "collective", "algorithm", "proto",
		"alpha_us", "beta_ns/B", "gamma_ns/B");
	for (p = 0; p < IBC_PROTO_COUNT; p++)
		fprintf(f, "    %-10s %-13s %-7s %10.3f %10.4f %10.4f\n", "(base)", "-", proto_names[p],
			m->base[p].alpha_us, m->base[p].beta_ns, m->base[p].gamma_ns);
	for (c = 0; c < IBC_TUNE_COLL_COUNT; c++)
		for (a = 0; a < IBC_ALGO_COUNT; a++)
			for (p = 0; p < IBC_PROTO_COUNT; p++) {
				const struct ibc_tune_coef *k = &m->coef[c][a][p];

				if (k->alpha_us < 0)
					continue;
				fprintf(f, "    %-10s %-13s %-7s %10.3f %10.4f %10.4f  (fitted)\n",
					coll_names[c], algo_names[a], proto_names[p], k->alpha_us,
					k->beta_ns, k->gamma_ns);
			}
	for (c = 0; c < IBC_TUNE_COLL_COUNT; c++) {
		fprintf(f, "# %s, %d ranks over %s: chosen algorithm per size\n", coll_names[c],
			m->nranks, ibc_tune_tp_name(m->tp));
		tune_ranges(m, c, print_range, f);
	}
}

/* ------------------------------------------------------------------------ */
/* per communicator                                                         */
/* ------------------------------------------------------------------------ */

struct tune_cache_ent {
	size_t nbytes;
	size_t esz;             /* element bytes: the empty-message count depends on it */
	int valid;
	struct ibc_algo_choice c;
};

struct ibc_tuner {
	struct ibc_coll *coll;          /* the communicator's coll layer */
	int ready;                      /* model agreed */
	struct ibc_tune_model m;        /* the agreed model */
	struct ibc_tune_model meff;     /* m with this process's forced choices */
	int force_algo;                 /* ibc_tuner_force(): -1 = none */
	int force_proto;
	size_t force_chunk;
	struct tune_cache_ent cache[IBC_TUNE_COLL_COUNT][TUNE_CACHE];
	unsigned cache_next[IBC_TUNE_COLL_COUNT];
	uint64_t logged[IBC_TUNE_COLL_COUNT]; /* log2(size) buckets already logged */
	int told_na[IBC_TUNE_COLL_COUNT];     /* "forced algorithm does not apply" logged */
};

void ibc_tuner_destroy(struct ibc_tuner *t)
{
	ibc_free(t);
}

ibc_status_t ibc_tuner_create(struct ibc_coll *coll, struct ibc_tuner **t_p)
{
	struct ibc_tuner *t = ibc_calloc(1, sizeof(*t), "tuner");

	if (!t)
		return IBC_ERR_NO_MEMORY;
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

/* an internal operation on the same sequence number as @op (agreement, probe) */
static void internal_req(const struct ibc_op *op, int coll, void *buf, size_t count,
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
 * gives the in-cache speed that tune_gamma() blends in for smaller
 * working sets. Measured here with the library's kernel: 0.034 ns/B for
 * 256 KiB, 0.070 for 2 MiB, 0.08-0.09 for 16 MiB. The cache figure alone
 * made the model price Rabenseifner's extra pass over 2 MiB at a third of
 * its cost (bench/RESULTS.md, "time sharing"); the memory figure alone
 * priced it at 256 KiB at twice its cost ("cache"). @buf: 2 @nbytes bytes.
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
	internal_req(op, IBC_COLL_BROADCAST, &lone, 1, IBC_FLOAT64, &br);
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
static ibc_status_t tuner_probe(struct ibc_coll *cl, struct ibc_op *op,
				struct ibc_tune_model *m, double *probe_ms_p)
{
	double v[PV_COUNT] = { 0 };
	const struct ibc_transport_ops *ops = NULL;
	struct ibc_op ar;
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
	internal_req(op, IBC_COLL_ALLREDUCE, v, PV_COUNT, IBC_FLOAT64, &ar);
	IBC_CHECK(ibc_ring_allreduce(cl, &ar));
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
		internal_req(op, IBC_COLL_ALLREDUCE, took, 2, IBC_FLOAT64, &ar);
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
					internal_req(op, IBC_COLL_ALLREDUCE, buf,
						     (size_t)p->nbytes / 4, IBC_FLOAT32, &ar);
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
	internal_req(op, IBC_COLL_ALLREDUCE, fast, (size_t)np * IBC_ALGO_COUNT, IBC_FLOAT64,
		     &ar);
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

	range_text(lo, hi, c, t, sizeof(t));
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
	source_text(m, src, sizeof(src));
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
		race_text(m, c, buf, sizeof(buf));
		IBC_LOG_INFO(TUNING, "race (%.1f ms of the probe's in all) at %s", race_took_ms, buf);
	}
	for (c = 0; c < IBC_TUNE_COLL_COUNT; c++) {
		struct log_ranges lr;

		lr.len = 0;
		lr.buf[0] = '\0';
		tune_ranges(m, c, log_range, &lr);
		IBC_LOG_INFO(TUNING, "%s thresholds: %s", coll_names[c], lr.buf);
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
	}
	/* everyone adopts rank 0's settings and file rows */
	internal_req(op, IBC_COLL_BROADCAST, &m, sizeof(m), IBC_UINT8, &br);
	IBC_CHECK(ibc_ring_broadcast(cl, &br));
	if (m.probe && !(m.source & IBC_TUNE_SRC_FILE)) {
		uint64_t tp0 = ibc_time_ns();
		uint64_t tr;

		IBC_CHECK(tuner_probe(cl, op, &m, &probe_ms));
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

static int tune_coll_of(int coll)
{
	switch (coll) {
	case IBC_COLL_ALLREDUCE:
		return IBC_TUNE_ALLREDUCE;
	case IBC_COLL_BROADCAST:
		return IBC_TUNE_BCAST;
	case IBC_COLL_REDUCE:
		return IBC_TUNE_REDUCE;
	default:
		return -1;
	}
}

static void tuner_log_decision(struct ibc_tuner *t, int coll, size_t nbytes,
			       const struct ibc_algo_choice *c)
{
	const struct ibc_tune_race *r;
	char alt[384];
	size_t len = 0;
	int bucket = 0;
	int a;

	while (bucket < 63 && ((size_t)2 << bucket) <= nbytes)
		bucket++;
	if (t->logged[coll] & (1ull << bucket))
		return;
	t->logged[coll] |= 1ull << bucket;
	if (!ibc_log_enabled(IBC_LEVEL_INFO, IBC_SUBSYS_TUNING))
		return;
	alt[0] = '\0';
	r = tune_race_at(&t->m, coll, nbytes);
	for (a = 0; a < IBC_ALGO_COUNT; a++) {
		struct ibc_algo_choice x;
		double v;

		if (!tune_algo_ok(&t->m, coll, a))
			continue;
		v = tune_best_for_algo(&t->m, coll, a, nbytes, &x);
		len += (size_t)snprintf(alt + len, sizeof(alt) - len, "%s%s %.1f", len ? ", " : "",
					algo_names[a], v);
		/* the race's price where it timed this algorithm near this size */
		if (len < sizeof(alt) && r && r->ratio[a] > 0)
			len += (size_t)snprintf(alt + len, sizeof(alt) - len, " (timed %.1f)",
						v * r->ratio[a]);
		if (len >= sizeof(alt))
			break;
	}
	IBC_LOG_INFO(TUNING, "%s of %zu bytes on %d ranks over %s: %s/%s chunk %zu bytes, predicted %.1f us (best per algorithm: %s us)%s",
		     coll_names[coll], nbytes, t->m.nranks, ibc_tune_tp_name(t->m.tp),
		     algo_names[c->algo], proto_names[c->proto], c->chunk_bytes, c->predicted_us,
		     alt,
		     t->meff.force_algo >= 0 || t->meff.force_proto >= 0 ? " [forced]" : "");
}

ibc_status_t ibc_tuner_select(struct ibc_tuner *t, struct ibc_op *op, struct ibc_algo_choice *c)
{
	struct ibc_coll *cl = t->coll;
	int coll = tune_coll_of(op->coll);
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
		ibc_status_t st;

		/* errors during it say so instead of counting its bytes as the operation's */
		__atomic_store_n(&cl->net->cur_tuning, 1, __ATOMIC_RELAXED);
		st = tuner_init(cl, t, op);
		__atomic_store_n(&cl->net->cur_tuning, 0, __ATOMIC_RELAXED);
		IBC_CHECK(st);
		/* the probe's traffic is not the operation's: "bytes moved" in errors */
		__atomic_store_n(&cl->net->cur_bytes_done, 0, __ATOMIC_RELAXED);
		cl->net->cur_bytes_total = 0;
	}
	IBC_CHECK(ibc_dtype_size(op->dtype, &esz));
	nbytes = op->count * esz;
	for (i = 0; i < TUNE_CACHE; i++) {
		const struct tune_cache_ent *e = &t->cache[coll][i];

		if (e->valid && e->nbytes == nbytes && e->esz == esz) {
			*c = e->c;
			return IBC_OK;
		}
	}
	t->meff.elem_bytes = (int32_t)esz;
	ibc_tune_choose(&t->meff, coll, nbytes, c);
	if (t->meff.force_algo >= 0 && !tune_algo_ok(&t->meff, coll, t->meff.force_algo) &&
	    !t->told_na[coll]) {
		t->told_na[coll] = 1;
		if (ibc_algo_applies(coll, t->meff.force_algo))
			IBC_LOG_INFO(TUNING, "algorithm %s needs every rank on one host over shm (and IBC_SHM_ALLREDUCE=1); the tuner chooses among the others",
				     algo_names[t->meff.force_algo]);
		else
			IBC_LOG_INFO(TUNING, "algorithm %s does not implement %s; the tuner chooses among the others",
				     algo_names[t->meff.force_algo], coll_names[coll]);
	}
	tuner_log_decision(t, coll, nbytes, c);
	i = t->cache_next[coll]++ % TUNE_CACHE;
	t->cache[coll][i].nbytes = nbytes;
	t->cache[coll][i].esz = esz;
	t->cache[coll][i].valid = 1;
	t->cache[coll][i].c = *c;
	return IBC_OK;
}
