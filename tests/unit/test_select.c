/* SPDX-License-Identifier: MIT */
/*
 * test_select.c - the tuner's pure parts (src/tune/): names, the
 * cost model's predictions against hand-computed values, the choice per
 * size (latency-bound sizes pick a logarithmic algorithm, large ones the
 * ring), overrides, the least-squares fit (recovers known coefficients),
 * the tuning file (round trip, nearest rank count, malformed lines), the
 * race's plan and how its ratios re-order the choice, and the printed
 * table of ibc_info --tuning.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"
#include "base/util.h"
#include "tune/tune.h"
#include "tap.h"

static int near(double a, double b, double rel)
{
	return fabs(a - b) <= rel * fabs(b) + 1e-12;
}

static void test_names(void)
{
	int a;
	int ok = 1;

	for (a = 0; a < IBC_ALGO_COUNT; a++)
		ok &= ibc_algo_parse(ibc_algo_name(a)) == a;
	tap_ok(ok && ibc_algo_parse("nope") == -1, "algorithm names parse back");
	tap_ok(ibc_proto_parse("ll") == IBC_PROTO_LL && ibc_proto_parse("simple") == IBC_PROTO_SIMPLE &&
	       ibc_proto_parse("LL") == -1, "protocol names");
	tap_ok(ibc_algo_applies(IBC_TUNE_ALLREDUCE, IBC_ALGO_RAB) &&
	       !ibc_algo_applies(IBC_TUNE_BCAST, IBC_ALGO_RD) &&
	       ibc_algo_applies(IBC_TUNE_REDUCE, IBC_ALGO_TREE),
	       "rd and rabenseifner implement all-reduce only");
}

/* a model with round coefficients: alpha 10 us, beta 1 ns/B, gamma 0.5 ns/B */
static void round_model(struct ibc_tune_model *m, int n)
{
	ibc_tune_model_init(m, n, IBC_TUNE_TP_SHM, 1);
	m->ring_chunk = 1 << 20;
	m->force_algo = -1;
	m->force_proto = -1;
	m->force_chunk = 0;
	m->base[IBC_PROTO_SIMPLE].alpha_us = 10;
	m->base[IBC_PROTO_SIMPLE].beta_ns = 1;
	m->base[IBC_PROTO_SIMPLE].gamma_ns = 0.5;
	m->base[IBC_PROTO_LL] = m->base[IBC_PROTO_SIMPLE];
	m->base[IBC_PROTO_LL].alpha_us = 4;
	/* the message-passing algorithms' choices: the shm all-reduce has its own test */
	m->shm_ok = 0;
	m->shm_chunk = 1 << 18;
	m->shm_small = 4096;
	m->shm_cma_min = 1 << 20;
}

/* the shm all-reduce (IBC_ALGO_SHM): its shape, when it may run, overrides */
static void test_shm(void)
{
	struct ibc_tune_model m;
	struct ibc_algo_choice c;
	double t;

	round_model(&m, 8);
	/* priced with the LL base (alpha 4: a flag in shared memory) */
	/* small (<= 4096 B): one synchronisation, a copy of N (N/2 of B), 7 N reduced */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_SHM, IBC_PROTO_SIMPLE, 4000, 0);
	tap_ok(near(t, 4 + (2000 * 1 + 7 * 4000 * 0.5) / 1000, 1e-9), "shm 8 ranks 4000 B: %.3f us", t);
	/* chunked: 1 MiB = 4 chunks of 256 KiB: 8 synchronisations, N moved, 7/8 N reduced */
	m.shm_cma_min = -1; /* IBC_SHM_CMA=0 */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_SHM, IBC_PROTO_SIMPLE, 1 << 20, 0);
	tap_ok(near(t, 8 * 4 + (1048576.0 + 7.0 / 8 * 1048576 * 0.5) / 1000, 1e-9),
	       "shm 8 ranks 1 MiB, no single copy: %.3f us", t);
	/* single copy from 1 MiB: 2 synchronisations, one copy of N (N/2 moved), 7/8 N reduced */
	m.shm_cma_min = 1 << 20;
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_SHM, IBC_PROTO_SIMPLE, 1 << 20, 0);
	tap_ok(near(t, 2 * 4 + (1048576.0 / 2 + 7.0 / 8 * 1048576 * 0.5) / 1000, 1e-9),
	       "shm 8 ranks 1 MiB, single copy: %.3f us", t);
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_SHM, IBC_PROTO_SIMPLE, (1 << 20) - 64, 0);
	tap_ok(near(t, 8 * 4 + ((1048576.0 - 64) + 7.0 / 8 * (1048576 - 64) * 0.5) / 1000, 1e-9),
	       "shm 8 ranks 1 MiB - 64 B, below the single copy: chunked (%.3f us)", t);
	m.has_ll = 0;
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_SHM, IBC_PROTO_SIMPLE, 4000, 0);
	tap_ok(near(t, 10 + (2000 * 1 + 7 * 4000 * 0.5) / 1000, 1e-9),
	       "shm without an LL base: the simple one (%.3f us)", t);
	m.has_ll = 1;
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo != IBC_ALGO_SHM, "not on one host: never shm (got %s)", ibc_algo_name(c.algo));
	m.force_algo = IBC_ALGO_SHM;
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo != IBC_ALGO_SHM, "IBC_ALGO=shm off one host: the tuner picks (got %s)",
	       ibc_algo_name(c.algo));
	m.force_algo = -1;
	m.shm_ok = 1;
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo == IBC_ALGO_SHM && c.proto == IBC_PROTO_SIMPLE,
	       "one host, 8 B on 8 ranks: shm, simple (got %s/%s)", ibc_algo_name(c.algo),
	       ibc_proto_name(c.proto));
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 64u << 20, &c);
	tap_ok(c.algo == IBC_ALGO_SHM && c.chunk_bytes == (1u << 18),
	       "one host, 64 MiB on 8 ranks: shm, chunk 256 KiB (got %s, %zu)", ibc_algo_name(c.algo),
	       c.chunk_bytes);
	ibc_tune_choose(&m, IBC_TUNE_BCAST, 8, &c);
	tap_ok(c.algo != IBC_ALGO_SHM, "shm does not implement broadcast (got %s)",
	       ibc_algo_name(c.algo));
	m.force_algo = IBC_ALGO_RING;
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo == IBC_ALGO_RING, "IBC_ALGO=ring overrides shm on one host");
	m.force_algo = -1;
	m.force_proto = IBC_PROTO_LL;
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo == IBC_ALGO_SHM && c.proto == IBC_PROTO_SIMPLE,
	       "IBC_PROTO=ll: shm still runs (it sends no messages), simple (got %s/%s)",
	       ibc_algo_name(c.algo), ibc_proto_name(c.proto));
	tap_ok(ibc_algo_parse("shm") == IBC_ALGO_SHM && !strcmp(ibc_algo_name(IBC_ALGO_SHM), "shm"),
	       "\"shm\" parses back");
	tap_ok(ibc_algo_applies(IBC_TUNE_ALLREDUCE, IBC_ALGO_SHM) &&
	       !ibc_algo_applies(IBC_TUNE_REDUCE, IBC_ALGO_SHM), "shm implements all-reduce only");
	setenv("IBC_SHM_ALLREDUCE", "0", 1);
	ibc_param_reset_all();
	ibc_tune_model_init(&m, 4, IBC_TUNE_TP_SHM, 1);
	tap_ok(!m.shm_ok, "IBC_SHM_ALLREDUCE=0 turns it off");
	unsetenv("IBC_SHM_ALLREDUCE");
	ibc_param_reset_all();
	ibc_tune_model_init(&m, 4, IBC_TUNE_TP_SHM, 1);
	tap_ok(m.shm_ok, "4 ranks over shm: allowed by default");
	ibc_tune_model_init(&m, 4, IBC_TUNE_TP_TCP, 1);
	tap_ok(!m.shm_ok, "4 ranks over tcp: not allowed");
	ibc_tune_model_init(&m, 1, IBC_TUNE_TP_SHM, 1);
	tap_ok(!m.shm_ok, "1 rank: not needed");
}

static void test_predict(void)
{
	struct ibc_tune_model m;
	double t;

	round_model(&m, 8);
	/* ring all-reduce, 8 ranks, 8000 bytes: 14 steps, 2*7/8*8000 = 14000 B, 7000 B reduced */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, 8000, 0);
	tap_ok(near(t, 14 * 10 + (14000 * 1 + 7000 * 0.5) / 1000, 1e-9), "ring 8 ranks 8000 B: %.3f us", t);
	/* rd, 8 ranks: 3 steps of the whole vector; plus the executor's input copy (N, gamma) */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RD, IBC_PROTO_SIMPLE, 8000, 1 << 20);
	tap_ok(near(t, 3 * 10 + (3 * 8000 + 4 * 8000 * 0.5) / 1000, 1e-9), "rd 8 ranks 8000 B: %.3f us", t);
	/* rd, 6 ranks: p 4, fold: 2 + 2 steps, 4 N moved, 3 N reduced */
	round_model(&m, 6);
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RD, IBC_PROTO_SIMPLE, 1000, 1 << 20);
	tap_ok(near(t, 4 * 10 + (4000 + 4000 * 0.5) / 1000, 1e-9), "rd 6 ranks (folded) 1000 B: %.3f us", t);
	/* rabenseifner, 8 ranks: 6 steps, 2*7/8 N moved, 7/8 N reduced */
	round_model(&m, 8);
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RAB, IBC_PROTO_SIMPLE, 8000, 1 << 20);
	tap_ok(near(t, 6 * 10 + (14000 + (7000 + 8000) * 0.5) / 1000, 1e-9), "rabenseifner 8 ranks: %.3f us", t);
	/* dtree, 8 ranks (height 3), 8000 B with 1000 B chunks: k 4, 2(3+3) steps */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_TREE, IBC_PROTO_SIMPLE, 8000, 1000);
	tap_ok(near(t, 12 * 10 + (4 * 1000 * 6 + (2 * 1000 * 6 + 8000) * 0.5) / 1000, 1e-9), "tree 8 ranks: %.3f us", t);
	/* binomial broadcast, 8 ranks, 3 chunks: 9 steps */
	t = ibc_tune_predict(&m, IBC_TUNE_BCAST, IBC_ALGO_TREE, IBC_PROTO_SIMPLE, 3000, 1000);
	tap_ok(near(t, 9 * 10 + 9 * 1000 / 1000.0, 1e-9), "binomial broadcast: %.3f us", t);
	/* chain reduce, 8 ranks, one chunk: 7 steps, reduced too */
	t = ibc_tune_predict(&m, IBC_TUNE_REDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, 1000, 0);
	tap_ok(near(t, 7 * 10 + (7000 + 7000 * 0.5) / 1000, 1e-9), "chain reduce: %.3f us", t);
	round_model(&m, 1);
	tap_ok(ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, 0, 1 << 20, 0) == 0,
	       "one rank costs nothing");
}

static void test_choose(void)
{
	struct ibc_tune_model m;
	struct ibc_algo_choice c;
	size_t v;
	int mono = 1;
	double prev = 0;

	round_model(&m, 8);
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo == IBC_ALGO_RD && c.proto == IBC_PROTO_LL,
	       "8 B on 8 ranks: recursive doubling with LL (got %s/%s)", ibc_algo_name(c.algo),
	       ibc_proto_name(c.proto));
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 64u << 20, &c);
	/* ring and Rabenseifner move the same bytes; the ring's 1 MiB chunks and
	 * 2(n-1) steps beat Rabenseifner's per-step cost in this model */
	tap_ok(c.algo == IBC_ALGO_RING, "64 MiB on 8 ranks: ring (got %s)", ibc_algo_name(c.algo));
	tap_ok(ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, 64u << 20,
				1 << 20) <
		       ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RAB, IBC_PROTO_SIMPLE,
					64u << 20, 1 << 20),
	       "and the model predicts ring faster than Rabenseifner there");
	tap_ok(c.proto == IBC_PROTO_SIMPLE, "64 MiB: simple protocol (LL does not fit)");
	/* the chosen time never exceeds any algorithm's */
	for (v = 1; v <= (1u << 28); v <<= 2) {
		int a;

		ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, v, &c);
		for (a = 0; a < IBC_ALGO_COUNT; a++) {
			double t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, a, IBC_PROTO_SIMPLE, v, 1 << 20);

			if (a == IBC_ALGO_SHM && !m.shm_ok)
				continue;       /* not on one host */
			if (t < c.predicted_us - 1e-9)
				mono = 0;
		}
		if (c.predicted_us < prev)
			mono = 0;
		prev = c.predicted_us;
	}
	tap_ok(mono, "the pick is never predicted slower than another algorithm, and grows with size");
	/* overrides */
	m.force_algo = IBC_ALGO_TREE;
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo == IBC_ALGO_TREE, "IBC_ALGO=tree is honoured");
	{
		struct ibc_algo_choice free_c;

		m.force_algo = -1;
		ibc_tune_choose(&m, IBC_TUNE_BCAST, 8, &free_c);
		m.force_algo = IBC_ALGO_RD;
		ibc_tune_choose(&m, IBC_TUNE_BCAST, 8, &c);
		tap_ok(c.algo == free_c.algo && c.proto == free_c.proto &&
			       c.predicted_us == free_c.predicted_us && c.algo == IBC_ALGO_TREE,
		       "IBC_ALGO=rd does not apply to broadcast: the tuner's own pick, tree (got %s)",
		       ibc_algo_name(c.algo));
	}
	m.force_algo = -1;
	m.force_proto = IBC_PROTO_SIMPLE;
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.proto == IBC_PROTO_SIMPLE, "IBC_PROTO=simple is honoured");
	m.force_proto = -1;
	m.force_chunk = 12345;
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 1u << 20, &c);
	tap_ok(c.algo == IBC_ALGO_RING || c.chunk_bytes == 12345, "IBC_TREE_CHUNK_BYTES is honoured");
	m.force_chunk = 0;
	m.has_ll = 0;
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.proto == IBC_PROTO_SIMPLE, "no LL path on the transport: simple");
	/* 2 ranks, tiny message, bcast: chain and binomial are the same one step */
	round_model(&m, 2);
	ibc_tune_choose(&m, IBC_TUNE_BCAST, 8, &c);
	tap_ok(c.algo == IBC_ALGO_RING, "2-rank broadcast tie goes to the first algorithm (ring)");
}

/* a tcp model with no overrides, a 1 MiB ring chunk and one set of coefficients */
static void plain_model(struct ibc_tune_model *m, double alpha, double beta, double gamma)
{
	m->ring_chunk = 1 << 20;
	m->force_algo = -1;
	m->force_proto = -1;
	m->force_chunk = 0;
	m->shm_ok = 0;
	m->base[IBC_PROTO_SIMPLE] = (struct ibc_tune_coef){ alpha, beta, gamma };
	m->base[IBC_PROTO_LL] = m->base[IBC_PROTO_SIMPLE];
}

/* samples of Rabenseifner at 6 sizes from @g with alpha 7 us and beta 0.4 ns/B */
static void rab_samples(const struct ibc_tune_model *g0, struct ibc_tune_sample s[6])
{
	static const size_t sizes[6] = { 8, 4096, 65536, 1 << 20, 8 << 20, 64 << 20 };
	struct ibc_tune_model g = *g0;
	int i;

	g.base[IBC_PROTO_SIMPLE].alpha_us = 7.0;
	g.base[IBC_PROTO_SIMPLE].beta_ns = 0.4;
	for (i = 0; i < 6; i++) {
		s[i].nbytes = sizes[i];
		s[i].chunk_bytes = 256u << 10;
		s[i].time_us = ibc_tune_predict(&g, IBC_TUNE_ALLREDUCE, IBC_ALGO_RAB, IBC_PROTO_SIMPLE,
						sizes[i], 256u << 10);
	}
}

/*
 * Time sharing (ibc_tune_share, docs/tuning.md): with more ranks on a host
 * than cores, the reduction passes are priced share times gamma. The case
 * is the one measured (bench/RESULTS.md, "time sharing"): 8 tcp ranks on 2
 * cores, 2 MiB, where Rabenseifner's 6 steps beat the ring's 14 in a model
 * with a core per rank, and its extra pass over N loses to them when 4
 * ranks share a core.
 */
static void test_share(void)
{
	struct ibc_tune_model m;
	struct ibc_tune_model g;
	struct ibc_algo_choice c;
	struct ibc_tune_sample s[6];
	struct ibc_tune_coef k;
	const size_t n2m = 2u << 20;
	ibc_status_t st;
	double t;

	tap_ok(ibc_tune_share(8, 2) == 4 && ibc_tune_share(3, 2) == 2 && ibc_tune_share(9, 4) == 3,
	       "share = ceil(ranks on the host / cores): 8/2 -> 4, 3/2 -> 2, 9/4 -> 3");
	tap_ok(ibc_tune_share(2, 2) == 1 && ibc_tune_share(1, 8) == 1 && ibc_tune_share(8, 0) == 1 &&
	       ibc_tune_share(0, 2) == 1 && ibc_tune_share(-1, -1) == 1,
	       "share = 1 with a core per rank or an unknown count");
	ibc_tune_model_init(&m, 8, IBC_TUNE_TP_TCP, 0);
	tap_ok(m.share == 1, "a new model assumes a core per rank (share %d)", (int)m.share);
	plain_model(&m, 25.0, 0.3, 0.075);
	/*
	 * 8 ranks, N = 2 MiB. ring: S = 14, B = 1.75 N = 3670016,
	 * G = 0.875 N = 1835008; Rabenseifner: S = 6, same B,
	 * G = 0.875 N + N (the executor's copy) = 3932160.
	 *   share 1: ring 350 + 1101.0048 + 137.6256 = 1588.6304 us
	 *            rab  150 + 1101.0048 + 294.912  = 1545.9168 us
	 *   share 4: ring 350 + 1101.0048 + 550.5024 = 2001.5072 us
	 *            rab  150 + 1101.0048 + 1179.648 = 2430.6528 us
	 */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, n2m, 0);
	tap_ok(near(t, 1588.6304, 1e-9), "share 1: ring 8 ranks 2 MiB %.4f us", t);
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RAB, IBC_PROTO_SIMPLE, n2m, 256u << 10);
	tap_ok(near(t, 1545.9168, 1e-9), "share 1: rabenseifner 8 ranks 2 MiB %.4f us", t);
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, n2m, &c);
	tap_ok(c.algo == IBC_ALGO_RAB && c.chunk_bytes == (256u << 10) &&
		       near(c.predicted_us, 1545.9168, 1e-9),
	       "share 1: the pick at 2 MiB is rabenseifner, chunk 256 KiB (got %s, %zu)",
	       ibc_algo_name(c.algo), c.chunk_bytes);
	m.share = 4;
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, n2m, 0);
	tap_ok(near(t, 2001.5072, 1e-9), "share 4: ring 8 ranks 2 MiB %.4f us", t);
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RAB, IBC_PROTO_SIMPLE, n2m, 256u << 10);
	tap_ok(near(t, 2430.6528, 1e-9), "share 4: rabenseifner 8 ranks 2 MiB %.4f us", t);
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, n2m, &c);
	tap_ok(c.algo == IBC_ALGO_RING && near(c.predicted_us, 2001.5072, 1e-9),
	       "share 4: the pick at 2 MiB is the ring (got %s)", ibc_algo_name(c.algo));
	/* latency-bound sizes keep their pick: G is too small to matter there */
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo == IBC_ALGO_RD, "share 4: 8 B is still recursive doubling (got %s)",
	       ibc_algo_name(c.algo));
	/* nothing is reduced in a broadcast: share changes nothing */
	g = m;
	g.share = 1;
	tap_ok(ibc_tune_predict(&m, IBC_TUNE_BCAST, IBC_ALGO_TREE, IBC_PROTO_SIMPLE, n2m, 65536) ==
		       ibc_tune_predict(&g, IBC_TUNE_BCAST, IBC_ALGO_TREE, IBC_PROTO_SIMPLE, n2m,
					65536),
	       "share does not change a broadcast");
	/* the fit prices gamma with the model's share: times generated with
	 * share 4 give back alpha and beta exactly */
	rab_samples(&m, s);
	/* the call first: the message's arguments are read in no given order */
	st = ibc_tune_fit(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RAB, IBC_PROTO_SIMPLE, s, 6, &k);
	tap_ok(st == IBC_OK && near(k.alpha_us, 7.0, 1e-6) && near(k.beta_ns, 0.4, 1e-6) &&
		       k.gamma_ns == 0.075,
	       "share 4: the fit recovers alpha 7 us and beta 0.4 ns/B (got %.6f, %.6f), gamma unscaled",
	       k.alpha_us, k.beta_ns);
	g = m;
	g.share = 1;
	st = ibc_tune_fit(&g, IBC_TUNE_ALLREDUCE, IBC_ALGO_RAB, IBC_PROTO_SIMPLE, s, 6, &k);
	tap_ok(st == IBC_OK && !near(k.beta_ns, 0.4, 1e-3),
	       "and a fit that ignores the sharing does not (beta %.4f)", k.beta_ns);
}

/*
 * Messages in flight (docs/tuning.md): on a shared host a step's latency
 * grows with the messages in flight in it, L(m), from a lone pair's (the
 * probe's lone_frac of alpha) to alpha at the probe's n/2 pairs and beyond;
 * a step is priced alpha L(m) / L(n), a full step alpha as before. The
 * case is the one measured (bench/RESULTS.md, "messages in flight"): 8 tcp
 * ranks on 2 cores, 8 bytes, where Rabenseifner's empty blocks leave
 * steps with 2 and 4 messages and it beats recursive doubling's 3 full
 * exchanges.
 */
static double L(double msgs)
{
	return 0.25 + 0.75 * (msgs - 1) / 3;
}

static void test_lone(void)
{
	struct ibc_tune_model m;
	struct ibc_tune_model g;
	struct ibc_algo_choice c;
	struct ibc_tune_sample s[6];
	struct ibc_tune_coef k;
	ibc_status_t st;
	double t;

	ibc_tune_model_init(&m, 8, IBC_TUNE_TP_TCP, 0);
	tap_ok(m.lone_frac == 0 && m.elem_bytes == 4,
	       "a new model has no lone-pair term and counts 4-byte elements");
	plain_model(&m, 25.0, 0.3, 0.075);
	m.share = 4;
	tap_ok(ibc_tune_step_factor(&m, 1) == 1.0 && ibc_tune_step_factor(&m, 8) == 1.0,
	       "not measured: every step costs alpha");
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo == IBC_ALGO_RD, "and 8 B is recursive doubling (got %s)", ibc_algo_name(c.algo));
	g = m;
	ibc_tune_set_lone(&g, 100.0);
	tap_ok(g.lone_frac == 1.0 && g.base[IBC_PROTO_SIMPLE].alpha_us == 25.0,
	       "a lone pair slower than alpha is kept at alpha (%.3f)", g.lone_frac);
	g = m;
	ibc_tune_set_lone(&g, 0);
	tap_ok(g.lone_frac == 0 && g.base[IBC_PROTO_SIMPLE].alpha_us == 25.0,
	       "no measurement turns the term off");
	/* alpha over share x lone is another job's load during the probe: capped */
	g = m;
	g.base[IBC_PROTO_SIMPLE].alpha_us = 120.0;
	g.base[IBC_PROTO_LL].alpha_us = 110.0;
	ibc_tune_set_lone(&g, 7.5);
	tap_ok(g.base[IBC_PROTO_SIMPLE].alpha_us == 30.0 && g.base[IBC_PROTO_LL].alpha_us == 30.0 &&
		       g.lone_frac == 0.25,
	       "alpha 120 us, lone pair 7.5 us, share 4: alpha capped at 30 us, lone 0.25 (%.2f, %.3f)",
	       g.base[IBC_PROTO_SIMPLE].alpha_us, g.lone_frac);
	g.share = 1;
	g.base[IBC_PROTO_SIMPLE].alpha_us = 120.0;
	ibc_tune_set_lone(&g, 7.5);
	tap_ok(g.base[IBC_PROTO_SIMPLE].alpha_us == 120.0,
	       "a core per rank: no cap (alpha %.2f)", g.base[IBC_PROTO_SIMPLE].alpha_us);
	g = m;
	ibc_tune_set_lone(&g, 0.001);
	tap_ok(g.lone_frac == 0.25 && near(g.base[IBC_PROTO_SIMPLE].alpha_us, 0.004, 1e-12),
	       "the cap keeps lone_frac at 1/share or more (%.3f)", g.lone_frac);
	ibc_tune_set_lone(&m, 6.25);
	tap_ok(m.lone_frac == 0.25 && m.base[IBC_PROTO_SIMPLE].alpha_us == 25.0,
	       "lone pair 6.25 us of alpha 25 us: 0.25, no cap (%.3f)", m.lone_frac);
	/* L(m) = 0.25 + 0.75 (m - 1) / (8/2 - 1); a step costs L(m) / L(8) */
	tap_ok(near(ibc_tune_step_factor(&m, 1), L(1) / L(8), 1e-12) &&
		       near(ibc_tune_step_factor(&m, 2), L(2) / L(8), 1e-12) &&
		       near(ibc_tune_step_factor(&m, 4), 1.0 / L(8), 1e-12) &&
		       ibc_tune_step_factor(&m, 8) == 1.0 && ibc_tune_step_factor(&m, 9) == 1.0,
	       "step factor 0.125, 0.25, 0.5, 1 for 1, 2, 4 (the probe's pairs), 8 messages");
	g = m;
	g.share = 1;
	tap_ok(ibc_tune_step_factor(&g, 1) == 1.0, "a core per rank: no term");
	g = m;
	g.share = 2;
	tap_ok(ibc_tune_step_factor(&g, 1) == 1.0,
	       "share 2: the probe's pairs have a core each, no slope, no term");
	g = m;
	g.nranks = 2;
	tap_ok(ibc_tune_step_factor(&g, 1) == 1.0, "2 ranks (one pair is the probe): no term");
	/*
	 * 8 B = 2 floats. rd: 3 exchanges of 8 messages, S = 3, B = 24,
	 * G = 24 + 8: 75 + (7.2 + 4 x 0.075 x 32) / 1000 = 75.0168 us.
	 * Rabenseifner: the programs send 4, 2, 2, 2, 2, 4 messages,
	 * S = (2 L(4) + 4 L(2)) / L(8) = 2, B = 14, G = 7 + 8:
	 * 50 + (4.2 + 4.5) / 1000 = 50.0087 us.
	 */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RD, IBC_PROTO_SIMPLE, 8, 256u << 10);
	tap_ok(near(t, 75.0168, 1e-9), "rd 8 ranks 8 B, full steps as before: %.4f us", t);
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RAB, IBC_PROTO_SIMPLE, 8, 256u << 10);
	tap_ok(near(t, 25.0 * (2 * L(4) + 4 * L(2)) / L(8) + 0.0087, 1e-9),
	       "rabenseifner 8 ranks 8 B, empty blocks not sent: %.4f us", t);
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo == IBC_ALGO_RAB, "the pick at 8 B is rabenseifner (got %s)",
	       ibc_algo_name(c.algo));
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 64, &c);
	tap_ok(c.algo == IBC_ALGO_RD, "at 64 B (16 floats, no empty block) recursive doubling (got %s)",
	       ibc_algo_name(c.algo));
	g = m;
	g.elem_bytes = 1;
	ibc_tune_choose(&g, IBC_TUNE_ALLREDUCE, 8, &c);
	tap_ok(c.algo == IBC_ALGO_RD, "8 B of 1-byte elements fill the 8 blocks: rd (got %s)",
	       ibc_algo_name(c.algo));
	/* the ring: 2 floats over 8 ranks, 2 messages a step */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, 8, 0);
	tap_ok(near(t, 14 * 25.0 * L(2) / L(8) + (0.3 * 14 + 0.3 * 7) / 1000, 1e-9),
	       "ring 8 ranks 8 B: 14 steps of 2 messages, %.4f us", t);
	/* the fit works without the term: times from a model without it give
	 * back its alpha and beta from a model with it */
	g = m;
	g.lone_frac = 0;
	rab_samples(&g, s);
	st = ibc_tune_fit(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RAB, IBC_PROTO_SIMPLE, s, 6, &k);
	tap_ok(st == IBC_OK && near(k.alpha_us, 7.0, 1e-6) && near(k.beta_ns, 0.4, 1e-6),
	       "the fit ignores the lone-pair term (alpha %.6f, beta %.6f)", k.alpha_us, k.beta_ns);
}

/*
 * The cache term (tune_model.c, ibc_tune_gamma): gamma blends towards the probe's
 * in-cache speed by the fraction of the working set (ranks per core x 2 N)
 * that fits the core's L2.
 */
static void test_cache(void)
{
	struct ibc_tune_model m;
	struct ibc_tune_model g;
	const size_t n256k = 256u << 10;
	const size_t n2m = 2u << 20;
	double t;

	ibc_tune_model_init(&m, 4, IBC_TUNE_TP_TCP, 0);
	tap_ok(m.gamma_cache_ns == 0 && m.cache_bytes == 0, "a new model has no cache term");
	plain_model(&m, 8.0, 0.3, 0.075);
	m.share = 2;
	/* ring 4 ranks: S = 6, B = 1.5 N, G = 0.75 N; gamma x share 2 */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, n256k, 0);
	tap_ok(near(t, 48 + (0.3 * 393216 + 0.15 * 196608) / 1000, 1e-9),
	       "no cache term: 256 KiB priced at gamma (%.4f us)", t);
	m.gamma_cache_ns = 0.03;
	m.cache_bytes = 2 << 20;
	/* working set 2 x 2 x 256 KiB = 1 MiB fits 2 MiB: gamma 0.03 */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, n256k, 0);
	tap_ok(near(t, 48 + (0.3 * 393216 + 0.06 * 196608) / 1000, 1e-9),
	       "256 KiB, working set in L2: in-cache gamma (%.4f us)", t);
	/* 2 MiB: working set 8 MiB, a quarter fits: 0.075 (1 - 0.6 x 0.25) */
	t = ibc_tune_predict(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, n2m, 0);
	tap_ok(near(t, 48 + (0.3 * 3145728 + 2 * 0.06375 * 1572864) / 1000, 1e-9),
	       "2 MiB, a quarter of the working set in L2: gamma 0.06375 (%.4f us)", t);
	g = m;
	g.cache_bytes = 0;
	t = ibc_tune_predict(&g, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, n256k, 0);
	tap_ok(near(t, 48 + (0.3 * 393216 + 0.15 * 196608) / 1000, 1e-9),
	       "an unknown L2 turns the term off");
	g = m;
	g.gamma_cache_ns = 0.1;
	t = ibc_tune_predict(&g, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, n256k, 0);
	tap_ok(near(t, 48 + (0.3 * 393216 + 0.15 * 196608) / 1000, 1e-9),
	       "an in-cache gamma above gamma is not used");
	/* nothing is reduced in a broadcast */
	g = m;
	g.gamma_cache_ns = 0;
	tap_ok(ibc_tune_predict(&m, IBC_TUNE_BCAST, IBC_ALGO_RING, IBC_PROTO_SIMPLE, n256k, 0) ==
		       ibc_tune_predict(&g, IBC_TUNE_BCAST, IBC_ALGO_RING, IBC_PROTO_SIMPLE, n256k,
					0),
	       "the cache term does not change a broadcast");
}

/* the race (tuner.c, "The race"): its plan, and how its ratios re-order the choice */
static void test_race(void)
{
	struct ibc_tune_race_plan plan[IBC_TUNE_RACE_ANCHORS];
	struct ibc_tune_race_plan p2[IBC_TUNE_RACE_ANCHORS];
	struct ibc_tune_model m;
	struct ibc_tune_model g;
	struct ibc_algo_choice c;
	struct ibc_algo_choice c0;
	double spent = 0;
	int np;
	int ok = 1;
	int i;
	int k;

	/* 2 shm ranks with the coefficients the probe measures on this machine */
	ibc_tune_model_init(&m, 2, IBC_TUNE_TP_SHM, 1);
	m.ring_chunk = 1 << 20;
	m.force_algo = -1;
	m.force_proto = -1;
	m.force_chunk = 0;
	m.shm_ok = 1;
	m.shm_chunk = 1 << 18;
	m.shm_small = 4096;
	m.probe = 1;
	m.race_ms = 30;
	m.source = IBC_TUNE_SRC_PROBE;
	m.base[IBC_PROTO_SIMPLE] = (struct ibc_tune_coef){ 0.6, 0.13, 0.074 };
	m.base[IBC_PROTO_LL] = (struct ibc_tune_coef){ 0.25, 0.13, 0.074 };
	m.gamma_cache_ns = 0.025;
	m.cache_bytes = 2 << 20;
	np = ibc_tune_race_plan(&m, plan);
	tap_ok(np >= 2, "2 shm ranks: the race plans %d anchors", np);
	for (i = 0; i < np; i++) {
		double best = HUGE_VAL;
		int a;
		int n = 0;

		ok &= plan[i].n >= 2 && plan[i].iters >= 1 && plan[i].cost_us > 0;
		ok &= i == 0 || plan[i].nbytes > plan[i - 1].nbytes;
		for (k = 0; k < IBC_TUNE_RACE_ANCHORS; k++)
			n += plan[i].nbytes == (int64_t)IBC_TUNE_RACE_FIRST << (3 * k);
		ok &= n == 1;
		for (a = 0; a < IBC_ALGO_COUNT; a++) {
			struct ibc_algo_choice x;
			struct ibc_tune_model f = m;

			/* every algorithm runs here (shm_ok): forcing it prices it */
			f.force_algo = a;
			ibc_tune_choose(&f, IBC_TUNE_ALLREDUCE, (size_t)plan[i].nbytes, &x);
			best = IBC_MIN(best, x.predicted_us);
		}
		for (a = 0; a < IBC_ALGO_COUNT; a++) {
			struct ibc_algo_choice x;
			struct ibc_tune_model f = m;
			int in = 0;

			f.force_algo = a;
			ibc_tune_choose(&f, IBC_TUNE_ALLREDUCE, (size_t)plan[i].nbytes, &x);
			for (k = 0; k < plan[i].n; k++)
				in |= plan[i].c[k].algo == a;
			/* candidates: predicted within the margin of the best, and only those */
			ok &= in == (x.predicted_us <= IBC_TUNE_RACE_MARGIN * best);
		}
		/* each fits the budget on its own; the race decides on time taken */
		ok &= plan[i].cost_us <= m.race_ms * 1000.0;
		spent += plan[i].cost_us;
	}
	tap_ok(ok, "each anchor times every algorithm within %.1fx of the best, >= 2 of them, and fits the %d ms budget (%.1f ms expected in all)",
	       IBC_TUNE_RACE_MARGIN, (int)m.race_ms, spent / 1000);
	g = m;
	g.race_ms = (int32_t)ceil(plan[0].cost_us / 1000.0);
	k = ibc_tune_race_plan(&g, p2);
	ok = k >= 1 && k < np && p2[0].nbytes == plan[0].nbytes;
	for (i = 0; i < k; i++)
		ok &= p2[i].cost_us <= g.race_ms * 1000.0;
	tap_ok(ok, "a budget of %d ms keeps the first anchor and drops those that cannot fit it (%d of %d)",
	       (int)g.race_ms, k, np);
	g = m;
	g.race_ms = 0;
	ok = ibc_tune_race_plan(&g, p2) == 0;
	g = m;
	g.share = 2;
	ok &= ibc_tune_race_plan(&g, p2) == 0;
	g = m;
	g.source |= IBC_TUNE_SRC_FILE;
	ok &= ibc_tune_race_plan(&g, p2) == 0;
	g = m;
	g.force_algo = IBC_ALGO_RING;
	ok &= ibc_tune_race_plan(&g, p2) == 0;
	g = m;
	g.probe = 0;
	ok &= ibc_tune_race_plan(&g, p2) == 0;
	g = m;
	g.nranks = 1;
	ok &= ibc_tune_race_plan(&g, p2) == 0;
	tap_ok(ok, "no race with IBC_TUNING_RACE_MS=0, a shared core, a tuning file, IBC_ALGO, no probe or 1 rank");

	/* at 256 KiB the model prices shm ahead of the ring (alpha LL vs simple) */
	ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, 256u << 10, &c0);
	tap_ok(c0.algo == IBC_ALGO_SHM, "without a race, 256 KiB on 2 shm ranks: %s",
	       ibc_algo_name(c0.algo));
	g = m;
	g.race[1].nbytes = 256 << 10;
	g.race[1].ratio[IBC_ALGO_SHM] = 1.6;
	g.race[1].ratio[IBC_ALGO_RING] = 1.2;
	g.race[1].ratio[IBC_ALGO_RD] = 1.5;
	ibc_tune_choose(&g, IBC_TUNE_ALLREDUCE, 256u << 10, &c);
	{
		struct ibc_tune_model f = m;
		struct ibc_algo_choice r;

		f.force_algo = IBC_ALGO_RING;
		ibc_tune_choose(&f, IBC_TUNE_ALLREDUCE, 256u << 10, &r);
		tap_ok(c.algo == IBC_ALGO_RING && near(c.predicted_us, 1.2 * r.predicted_us, 1e-12),
		       "raced at 256 KiB (shm 1.6, ring 1.2, rd 1.5 x predicted): the ring, priced %.1f us",
		       c.predicted_us);
	}
	ok = 1;
	for (i = 0; i < 2; i++) {
		/* the band: 2^-1.5 .. 2^1.5 x the anchor, exclusive */
		size_t in = i ? (size_t)(262144 * 2.82) : (size_t)(262144 / 2.82);
		size_t out = i ? (size_t)(262144 * 2.83) : (size_t)(262144 / 2.83);
		struct ibc_algo_choice a;
		struct ibc_algo_choice b;
		double best = HUGE_VAL;
		int want = -1;
		int x;

		/* inside: the lowest of prediction x ratio among the timed three */
		for (x = 0; x < IBC_ALGO_COUNT; x++) {
			struct ibc_tune_model f = m;
			struct ibc_algo_choice r;

			if (g.race[1].ratio[x] <= 0)
				continue;
			f.force_algo = x;
			ibc_tune_choose(&f, IBC_TUNE_ALLREDUCE, in, &r);
			if (r.predicted_us * g.race[1].ratio[x] < best) {
				best = r.predicted_us * g.race[1].ratio[x];
				want = x;
			}
		}
		ibc_tune_choose(&g, IBC_TUNE_ALLREDUCE, in, &a);
		ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, in, &b);
		ok &= a.algo == want && near(a.predicted_us, best, 1e-12) &&
		      (b.algo == IBC_ALGO_SHM || b.algo == IBC_ALGO_RING);
		ibc_tune_choose(&g, IBC_TUNE_ALLREDUCE, out, &a);
		ibc_tune_choose(&m, IBC_TUNE_ALLREDUCE, out, &b);
		ok &= a.algo == b.algo && a.predicted_us == b.predicted_us;
	}
	tap_ok(ok, "the ratios hold from 1/2.82 to 2.82 x the anchor, not at 1/2.83 or 2.83 x");
	{
		/* the model's pick (shm) stands within IBC_TUNE_RACE_KEEP of the fastest */
		struct ibc_tune_model f = m;
		struct ibc_algo_choice pr;
		struct ibc_tune_model h = g;
		struct ibc_algo_choice a;
		struct ibc_algo_choice b;

		f.force_algo = IBC_ALGO_RING;
		ibc_tune_choose(&f, IBC_TUNE_ALLREDUCE, 256u << 10, &pr);
		h.race[1].ratio[IBC_ALGO_RING] = 1.0;
		h.race[1].ratio[IBC_ALGO_RD] = 0;
		h.race[1].ratio[IBC_ALGO_SHM] = 1.09 * pr.predicted_us / c0.predicted_us;
		ibc_tune_choose(&h, IBC_TUNE_ALLREDUCE, 256u << 10, &a);
		h.race[1].ratio[IBC_ALGO_SHM] = 1.11 * pr.predicted_us / c0.predicted_us;
		ibc_tune_choose(&h, IBC_TUNE_ALLREDUCE, 256u << 10, &b);
		tap_ok(a.algo == IBC_ALGO_SHM && near(a.predicted_us, 1.09 * pr.predicted_us, 1e-9) &&
		       b.algo == IBC_ALGO_RING && near(b.predicted_us, pr.predicted_us, 1e-9),
		       "the model's pick timed 9 %% slower than the fastest stands, 11 %% slower does not (%s, %s)",
		       ibc_algo_name(a.algo), ibc_algo_name(b.algo));
	}
	g.race[1].ratio[IBC_ALGO_SHM] = 0;
	g.race[1].ratio[IBC_ALGO_RING] = 0.1;
	ibc_tune_choose(&g, IBC_TUNE_ALLREDUCE, 256u << 10, &c);
	tap_ok(c.algo == c0.algo && c.predicted_us == c0.predicted_us,
	       "the model's own choice was not timed: it stands (the race only re-orders what it timed)");
	g.race[1].ratio[IBC_ALGO_SHM] = 1.6;
	g.force_algo = IBC_ALGO_SHM;
	ibc_tune_choose(&g, IBC_TUNE_ALLREDUCE, 256u << 10, &c);
	tap_ok(c.algo == IBC_ALGO_SHM && c.predicted_us == c0.predicted_us,
	       "a forced algorithm ignores the race");
	g.force_algo = -1;
	ibc_tune_choose(&g, IBC_TUNE_BCAST, 256u << 10, &c);
	ibc_tune_choose(&m, IBC_TUNE_BCAST, 256u << 10, &c0);
	tap_ok(c.algo == c0.algo && c.predicted_us == c0.predicted_us,
	       "the race is all-reduce's: a broadcast is not re-ordered");
}

static void test_fit(void)
{
	struct ibc_tune_model m;
	struct ibc_tune_sample s[8];
	struct ibc_tune_coef k;
	size_t sizes[8] = { 8, 64, 1024, 8192, 65536, 1 << 20, 8 << 20, 64 << 20 };
	ibc_status_t st;
	int i;

	round_model(&m, 8);
	/* times generated by alpha 3.5, beta 0.25, gamma 0.5 (the base gamma) */
	for (i = 0; i < 8; i++) {
		struct ibc_tune_model g = m;

		g.base[IBC_PROTO_SIMPLE].alpha_us = 3.5;
		g.base[IBC_PROTO_SIMPLE].beta_ns = 0.25;
		s[i].nbytes = sizes[i];
		s[i].chunk_bytes = 65536;
		s[i].time_us = ibc_tune_predict(&g, IBC_TUNE_ALLREDUCE, IBC_ALGO_TREE, IBC_PROTO_SIMPLE,
						sizes[i], 65536);
	}
	st = ibc_tune_fit(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_TREE, IBC_PROTO_SIMPLE, s, 8, &k);
	tap_ok(st == IBC_OK && near(k.alpha_us, 3.5, 1e-6) && near(k.beta_ns, 0.25, 1e-6) && k.gamma_ns == 0.5,
	       "fit recovers alpha 3.5 us and beta 0.25 ns/B (got %.6f, %.6f)", k.alpha_us, k.beta_ns);
	/* one size only: beta stays the base value */
	tap_ok(ibc_tune_fit(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RD, IBC_PROTO_SIMPLE, s, 1, &k) == IBC_OK &&
	       near(k.beta_ns, 1.0, 1e-9) && k.alpha_us >= 0, "fit on one size keeps beta (alpha %.3f)",
	       k.alpha_us);
	s[0].time_us = 0;
	tap_ok(ibc_tune_fit(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RD, IBC_PROTO_SIMPLE, s, 1, &k) ==
	       IBC_ERR_INVALID_ARG, "a zero time is refused");
	/* noise: coefficients stay non-negative */
	for (i = 0; i < 8; i++)
		s[i].time_us = 5.0 + (i % 2);
	tap_ok(ibc_tune_fit(&m, IBC_TUNE_ALLREDUCE, IBC_ALGO_RING, IBC_PROTO_SIMPLE, s, 8, &k) == IBC_OK &&
	       k.alpha_us >= 0 && k.beta_ns >= 0, "fit of flat noisy times stays non-negative");
}

/* the joint fit: one alpha per protocol, one beta per algorithm */
static void test_fit_coll(void)
{
	static const double beta[IBC_ALGO_COUNT] = { 0.2, 0.5, 1.0, 0.3 };
	size_t sizes[6] = { 8, 512, 4096, 65536, 1 << 20, 16 << 20 };
	struct ibc_tune_sample smp[IBC_ALGO_COUNT][IBC_PROTO_COUNT][6];
	const struct ibc_tune_sample *sp[IBC_ALGO_COUNT][IBC_PROTO_COUNT];
	int ns[IBC_ALGO_COUNT][IBC_PROTO_COUNT];
	struct ibc_tune_coef out[IBC_ALGO_COUNT][IBC_PROTO_COUNT];
	struct ibc_tune_model m;
	int ok = 1;
	int a;
	int p;
	int i;

	round_model(&m, 8);
	for (a = 0; a < IBC_ALGO_COUNT; a++) {
		for (p = 0; p < IBC_PROTO_COUNT; p++) {
			struct ibc_tune_model g = m;

			g.coef[IBC_TUNE_ALLREDUCE][a][p] =
				(struct ibc_tune_coef){ p ? 1.5 : 3.0, beta[a], 0.5 };
			sp[a][p] = smp[a][p];
			ns[a][p] = p ? 3 : 6; /* LL only up to 4 KiB */
			for (i = 0; i < ns[a][p]; i++) {
				smp[a][p][i].nbytes = sizes[i];
				smp[a][p][i].chunk_bytes = 65536;
				smp[a][p][i].time_us = ibc_tune_predict(&g, IBC_TUNE_ALLREDUCE, a, p,
									sizes[i], 65536);
			}
		}
	}
	ns[IBC_ALGO_RD][IBC_PROTO_LL] = 0;
	tap_ok(ibc_tune_fit_coll(&m, IBC_TUNE_ALLREDUCE, sp, ns, out) == IBC_OK, "joint fit runs");
	for (a = 0; a < IBC_ALGO_COUNT; a++) {
		ok &= near(out[a][IBC_PROTO_SIMPLE].alpha_us, 3.0, 1e-6) &&
		      near(out[a][IBC_PROTO_SIMPLE].beta_ns, beta[a], 1e-6);
		if (a != IBC_ALGO_RD)
			ok &= near(out[a][IBC_PROTO_LL].alpha_us, 1.5, 1e-6) &&
			      out[a][IBC_PROTO_LL].beta_ns == out[a][IBC_PROTO_SIMPLE].beta_ns;
	}
	tap_ok(ok, "joint fit recovers the shared alphas (3, 1.5 us) and each algorithm's beta");
	tap_ok(out[IBC_ALGO_RD][IBC_PROTO_LL].alpha_us < 0, "no samples: no row");
	/* LL samples slower than simple (a loaded machine): LL alpha capped at simple's */
	for (a = 0; a < IBC_ALGO_COUNT; a++)
		for (i = 0; i < ns[a][IBC_PROTO_LL]; i++)
			smp[a][IBC_PROTO_LL][i].time_us *= 50;
	ibc_tune_fit_coll(&m, IBC_TUNE_ALLREDUCE, sp, ns, out);
	tap_ok(out[IBC_ALGO_RING][IBC_PROTO_LL].alpha_us == out[IBC_ALGO_RING][IBC_PROTO_SIMPLE].alpha_us,
	       "LL alpha never above simple's (got %.3f vs %.3f)",
	       out[IBC_ALGO_RING][IBC_PROTO_LL].alpha_us, out[IBC_ALGO_RING][IBC_PROTO_SIMPLE].alpha_us);
	/* one noisy small sample cannot give one algorithm its own latency */
	smp[IBC_ALGO_RING][IBC_PROTO_SIMPLE][0].time_us /= 10;
	ibc_tune_fit_coll(&m, IBC_TUNE_ALLREDUCE, sp, ns, out);
	tap_ok(out[IBC_ALGO_RING][IBC_PROTO_SIMPLE].alpha_us == out[IBC_ALGO_RD][IBC_PROTO_SIMPLE].alpha_us,
	       "alpha stays shared with an outlier");
}

static void test_file(void)
{
	char path[] = "/tmp/ibc-tune-XXXXXX";
	struct ibc_tune_model m;
	struct ibc_tune_model l;
	int fd = mkstemp(path);
	FILE *f;
	int nrows = -1;

	if (fd < 0)
		tap_bail_out("mkstemp failed");
	f = fdopen(fd, "w");
	round_model(&m, 8);
	m.coef[IBC_TUNE_ALLREDUCE][IBC_ALGO_TREE][IBC_PROTO_LL] = (struct ibc_tune_coef){ 1.25, 0.5, 0.5 };
	m.coef[IBC_TUNE_BCAST][IBC_ALGO_RING][IBC_PROTO_SIMPLE] = (struct ibc_tune_coef){ 7, 0.125, 0.5 };
	tap_ok(ibc_tune_file_write(&m, f) == IBC_OK, "tuning file written");
	/* the same table for 4 and 32 ranks with other values, a bad line, another transport */
	fprintf(f, "allreduce tree ll shm 4 99 9 9\n");
	fprintf(f, "allreduce tree ll shm 32 77 7 7  # comment\n");
	fprintf(f, "allreduce tree ll tcp 8 55 5 5\n");
	fprintf(f, "broadcast rd simple shm 8 1 1 1\n");
	fprintf(f, "allreduce ring simple shm eight 1 1 1\n\n# only a comment\n");
	fclose(f);

	ibc_tune_model_init(&l, 8, IBC_TUNE_TP_SHM, 1);
	tap_ok(ibc_tune_file_load(&l, path, &nrows) == IBC_OK, "tuning file loaded");
	tap_is_int(nrows, 4, "4 rows used (2 base, 2 fitted) for shm at 8 ranks");
	tap_ok(l.source & IBC_TUNE_SRC_FILE, "model marked as from the file");
	tap_ok(l.base[IBC_PROTO_SIMPLE].alpha_us == 10 && l.base[IBC_PROTO_LL].alpha_us == 4 &&
	       l.base[IBC_PROTO_SIMPLE].gamma_ns == 0.5, "base rows round-trip");
	tap_ok(l.coef[IBC_TUNE_ALLREDUCE][IBC_ALGO_TREE][IBC_PROTO_LL].alpha_us == 1.25 &&
	       l.coef[IBC_TUNE_BCAST][IBC_ALGO_RING][IBC_PROTO_SIMPLE].beta_ns == 0.125,
	       "fitted rows round-trip; the exact rank count wins over 4 and 32");
	tap_ok(l.coef[IBC_TUNE_REDUCE][IBC_ALGO_RING][IBC_PROTO_SIMPLE].alpha_us < 0,
	       "absent rows stay unset");
	ibc_tune_model_init(&l, 24, IBC_TUNE_TP_SHM, 1);
	ibc_tune_file_load(&l, path, &nrows);
	tap_ok(l.coef[IBC_TUNE_ALLREDUCE][IBC_ALGO_TREE][IBC_PROTO_LL].alpha_us == 77,
	       "24 ranks take the 32-rank row (nearest in log scale)");
	ibc_tune_model_init(&l, 8, IBC_TUNE_TP_TCP, 0);
	ibc_tune_file_load(&l, path, &nrows);
	tap_ok(nrows == 1 && l.coef[IBC_TUNE_ALLREDUCE][IBC_ALGO_TREE][IBC_PROTO_LL].alpha_us == 55,
	       "tcp model takes only the tcp row");
	unlink(path);
	tap_ok(ibc_tune_file_load(&l, path, &nrows) == IBC_ERR_SYSTEM, "missing file: IBC_ERR_SYSTEM");
}

static void test_print(void)
{
	struct ibc_tune_model m;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	round_model(&m, 8);
	ibc_tune_print(&m, f);
	fclose(f);
	tap_ok(buf && strstr(buf, "8 ranks over shm") && strstr(buf, "# allreduce, 8 ranks") &&
	       strstr(buf, "# broadcast") && strstr(buf, "# reduce"),
	       "ibc_tune_print has a header and a table per collective");
	tap_ok(buf && strstr(buf, "1 B .. ") && strstr(buf, "rd ll"),
	       "ranges start at 1 B and show the small-message pick");
	tap_ok(buf && strstr(buf, ".. 1 GiB"), "ranges end at 1 GiB");
	free(buf);
}

static void test_env(void)
{
	struct ibc_tune_model m;

	setenv("IBC_ALGO", "rabenseifner", 1);
	setenv("IBC_PROTO", "ll", 1);
	setenv("IBC_TREE_CHUNK_BYTES", "64k", 1);
	ibc_param_reset_all();
	ibc_tune_model_init(&m, 4, IBC_TUNE_TP_SHM, 1);
	tap_ok(m.force_algo == IBC_ALGO_RAB && m.force_proto == IBC_PROTO_LL &&
	       m.force_chunk == 65536, "IBC_ALGO, IBC_PROTO, IBC_TREE_CHUNK_BYTES read");
	ibc_tune_model_init(&m, 4, IBC_TUNE_TP_TCP, 0);
	tap_ok(m.force_proto == IBC_PROTO_SIMPLE,
	       "IBC_PROTO=ll over tcp (no LL path) means simple (with a warning)");
	tap_ok(m.base[IBC_PROTO_LL].alpha_us == m.base[IBC_PROTO_SIMPLE].alpha_us,
	       "transport without LL: LL costs what simple costs");
	setenv("IBC_ALGO", "bogus", 1);
	ibc_param_reset_all();
	ibc_tune_model_init(&m, 4, IBC_TUNE_TP_TCP, 0);
	tap_ok(m.force_algo == -1, "unknown IBC_ALGO means auto (with a warning)");
	unsetenv("IBC_ALGO");
	unsetenv("IBC_PROTO");
	unsetenv("IBC_TREE_CHUNK_BYTES");
	ibc_param_reset_all();
}

int main(void)
{
	setenv("IBC_DEBUG", "ERROR", 1);
	test_names();
	test_predict();
	test_choose();
	test_shm();
	test_share();
	test_lone();
	test_cache();
	test_race();
	test_fit();
	test_fit_coll();
	test_file();
	test_print();
	test_env();
	return tap_done();
}
