/* SPDX-License-Identifier: MIT */
/*
 * Layer tune (src/tune/, above coll): which algorithm, protocol and chunk
 * each all-reduce, broadcast and reduce runs with.
 *
 * tune.h - the tune layer: an alpha-beta-gamma cost model per
 * (collective, algorithm, protocol) and transport class (tune_model.c,
 * pure), tuning files and their fit (tune_file.c), its printing
 * (tune_print.c), and the tuner of one communicator (tuner.c: the model
 * agreed by all ranks at the first tuned collective, the probe, the race,
 * the choice per call). Used by the executor (src/core), tools/ibc_info.c
 * (--tuning) and the tuning sweeps of ibc_bench --tune and
 * bench/algo_timing (bench/bench_tune.c). docs/tuning.md has the model.
 *
 * Predicted time of one operation of N bytes on n ranks:
 *   T = alpha * S + (beta * B + share * gamma * G) / 1000        [us]
 * where S (message steps on the critical path), B (bytes moved on it) and
 * G (bytes reduced on it) come from each algorithm's schedule
 * (ibc_tune_shape()), alpha is in us per step and beta, gamma in ns per byte;
 * share is the time sharing of the host's cores (ibc_tune_share()): gamma
 * is a rank's reduction speed on a core of its own, and when more ranks
 * than cores reduce at once each pass takes share times longer.
 * The coefficients are the communicator's measured ones (or defaults) for
 * every algorithm, unless the tuning file has fitted ones for that
 * (collective, algorithm, protocol, transport, rank count).
 */
#ifndef IBC_TUNE_H
#define IBC_TUNE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "coll/coll.h"
#include "ibcoll.h"
#include "transport/transport.h"

struct ibc_tuner;

/* the collectives the tuner decides for */
enum ibc_tune_coll {
	IBC_TUNE_ALLREDUCE = 0,
	IBC_TUNE_BCAST = 1,
	IBC_TUNE_REDUCE = 2,
	IBC_TUNE_COLL_COUNT
};

/* transport classes with their own coefficients: enum ibc_tclass (transport.h) */
enum ibc_tune_tp {
	IBC_TUNE_TP_SHM = IBC_TCLASS_SHM,
	IBC_TUNE_TP_TCP = IBC_TCLASS_TCP,
	IBC_TUNE_TP_IB = IBC_TCLASS_IB,
	IBC_TUNE_TP_COUNT = IBC_TCLASS_COUNT
};

/* source bits of a model */
#define IBC_TUNE_SRC_DEFAULT 0x1
#define IBC_TUNE_SRC_PROBE   0x2
#define IBC_TUNE_SRC_FILE    0x4

/*
 * struct ibc_tune_coef - one set of coefficients.
 * @alpha_us: per message step, us (< 0: not set).
 * @beta_ns:  per byte moved, ns.
 * @gamma_ns: per byte reduced, ns.
 */
struct ibc_tune_coef {
	double alpha_us;
	double beta_ns;
	double gamma_ns;
};

/*
 * The race (tuner.c, "The race"): at the anchors 8 B, 64 B, 512 B, 4 KiB,
 * 32 KiB, 256 KiB and 2 MiB the all-reduce algorithms predicted within
 * IBC_TUNE_RACE_MARGIN of the best are timed once, at init, and from
 * 2^-1.5 to 2^1.5 times an anchor each of them is priced at its prediction
 * x its measured / predicted time; the model's own pick stands unless it
 * is priced over IBC_TUNE_RACE_KEEP x the fastest.
 */
#define IBC_TUNE_RACE_ANCHORS 7
#define IBC_TUNE_RACE_FIRST 8           /* bytes of the first anchor; x 8 per anchor */
#define IBC_TUNE_RACE_MARGIN 1.5        /* candidates: predicted <= margin x the best */
#define IBC_TUNE_RACE_KEEP 1.1          /* the model's pick stands within this x the fastest */

/*
 * struct ibc_tune_race - one raced anchor.
 * @nbytes: anchor, bytes; 0 where not raced.
 * @ratio:  per enum ibc_algo: measured / predicted time of its choice at the
 *          anchor (the slowest rank's fastest repetition); 0 where not timed.
 */
struct ibc_tune_race {
	int64_t nbytes;
	double ratio[IBC_ALGO_COUNT];
};

/*
 * struct ibc_tune_model - everything a decision depends on; plain data, the
 * same bits on every rank of a communicator (rank 0's settings, averaged
 * probe results), so every rank picks the same algorithm.
 */
#define IBC_TUNE_CLASSES 64     /* all-reduce size classes: floor(log2(bytes)) */

struct ibc_tune_model {
	int32_t nranks;
	int32_t tp;             /* enum ibc_tune_tp of the slowest link */
	int32_t has_ll;         /* the transport has an LL path (IBC_TCAP_LL) */
	int32_t source;         /* IBC_TUNE_SRC_* bits */
	int64_t ll_max;         /* IBC_LL_MAX_BYTES, bytes */
	int64_t ring_chunk;     /* IBC_RING_CHUNK_BYTES, bytes */
	int32_t force_algo;     /* -1 or enum ibc_algo (IBC_ALGO) */
	int32_t force_proto;    /* -1 or enum ibc_proto (IBC_PROTO) */
	int64_t force_chunk;    /* 0 or bytes (IBC_TREE_CHUNK_BYTES) */
	int32_t probe;          /* IBC_TUNING_PROBE */
	int32_t shm_ok;         /* every rank on this host over shm: IBC_ALGO_SHM may run */
	int64_t shm_chunk;      /* IBC_SHM_ALLREDUCE_CHUNK_BYTES, bytes */
	int64_t shm_small;      /* IBC_SHM_ALLREDUCE_SMALL_BYTES, bytes */
	int64_t shm_cma_min;    /* IBC_SHM_ALLREDUCE_CMA_MIN_BYTES: single copy from here;
				 * -1 when IBC_SHM_CMA=0 */
	int32_t share;          /* ibc_tune_share() of rank 0's host, >= 1 (1: a core per rank) */
	int32_t elem_bytes;     /* element size the empty-message count assumes (4; the tuner
				 * sets the operation's) */
	double lone_frac;       /* a lone pair's 8-byte latency / the probe's alpha, in (0, 1];
				 * 0: not measured, the message-count term is off (tune_model.c) */
	double gamma_cache_ns;  /* reduction speed from the core's cache, ns/B (probe on
				 * PROBE_GAMMA_CACHE bytes); 0: not measured, gamma everywhere */
	int64_t cache_bytes;    /* the core's L2 cache, bytes (0: unknown) */
	int32_t race_ms;        /* IBC_TUNING_RACE_MS: wall-time budget of the probe and race */
	int32_t retime;         /* IBC_TUNING_RETIME: call of a size class timed first; 0 off */
	int64_t retime_max;     /* IBC_TUNING_RETIME_MAX_BYTES */
	/*
	 * the per-host decision cache (tune_cache.c), as rank 0 read it: per
	 * all-reduce size class (floor log2 of the bytes) the algorithm an
	 * earlier job's timing chose, -1 where none
	 */
	int8_t cached_algo[IBC_TUNE_CLASSES];
	/* all-reduce candidates timed at init where the model cannot tell them apart */
	struct ibc_tune_race race[IBC_TUNE_RACE_ANCHORS];
	struct ibc_tune_coef base[IBC_PROTO_COUNT];     /* measured or default, per protocol */
	/* fitted (tuning file); alpha_us < 0 where absent */
	struct ibc_tune_coef coef[IBC_TUNE_COLL_COUNT][IBC_ALGO_COUNT][IBC_PROTO_COUNT];
};


/*
 * struct ibc_tune_race_plan - what the race times at one anchor.
 * @nbytes: anchor, bytes.
 * @n:      candidates in @c (>= 2).
 * @c:      each candidate algorithm's choice (protocol, chunk, predicted us).
 * @iters:  operations per timed repetition (a repetition is >= 50 us predicted).
 * @cost_us: its expected time: 1.5 x the predicted time of all its
 *          operations (tuner_race() scales it by the last anchor's
 *          measured / predicted where that is larger).
 */
struct ibc_tune_race_plan {
	int64_t nbytes;
	int n;
	struct ibc_algo_choice c[IBC_ALGO_COUNT];
	int iters;
	double cost_us;
};

#define IBC_TUNE_RACE_REPS 3            /* timed repetitions per candidate (+1 warm-up) */

/* one measured time, input of ibc_tune_fit() */
struct ibc_tune_sample {
	size_t nbytes;          /* message size, bytes */
	size_t chunk_bytes;     /* chunk the run used */
	double time_us;         /* measured time of one operation */
};

const char *ibc_tune_coll_name(int coll);
int ibc_tune_coll_parse(const char *s);
/* the enum ibc_tune_coll of operation kind @kind (enum ibc_coll_type), -1 when not tuned */
int ibc_tune_coll_of(int kind);
/* 1 if @algo implements @coll (enum ibc_tune_coll) */
int ibc_algo_applies(int coll, int algo);
const char *ibc_tune_tp_name(int tp);
int ibc_tune_tp_parse(const char *s);

/* ---- pure model functions (no communicator) ------------------------------ */

/* defaults for @nranks ranks over transport @tp, overrides from the environment */
void ibc_tune_model_init(struct ibc_tune_model *m, int nranks, int tp, int has_ll);
int ibc_tune_share(int nlocal, int ncores);
/* predicted time (us) of @coll with @algo/@proto on @nbytes with @chunk_bytes */
/* set the lone-pair latency (us, simple protocol) from which lone_frac follows */
void ibc_tune_set_lone(struct ibc_tune_model *m, double lone_us);
/* the per-step latency factor of a step with @msgs messages in flight (tune_model.c) */
double ibc_tune_step_factor(const struct ibc_tune_model *m, double msgs);
double ibc_tune_predict(const struct ibc_tune_model *m, int coll, int algo, int proto,
			size_t nbytes, size_t chunk_bytes);
/* the model's choice for @coll on @nbytes, honouring the model's overrides */
void ibc_tune_choose(const struct ibc_tune_model *m, int coll, size_t nbytes,
		     struct ibc_algo_choice *c);
/* the anchors and candidates the race may time on @m (kernel-doc in tune_model.c) */
int ibc_tune_race_plan(const struct ibc_tune_model *m,
		       struct ibc_tune_race_plan plan[IBC_TUNE_RACE_ANCHORS]);
/* 1 if the transport has an LL path and every message of @algo fits IBC_LL_MAX_BYTES */
int ibc_tune_ll_applies(const struct ibc_tune_model *m, int coll, int algo, size_t nbytes,
			size_t chunk_bytes);
/* load the rows of @path matching m->tp and m->nranks (nearest rank count) */
ibc_status_t ibc_tune_file_load(struct ibc_tune_model *m, const char *path, int *nrows_p);
/* write @m's base and fitted coefficients as tuning-file rows */
ibc_status_t ibc_tune_file_write(const struct ibc_tune_model *m, FILE *f);
/* fit alpha and beta of (@coll, @algo, @proto) to @ns samples (gamma from m->base) */
ibc_status_t ibc_tune_fit(const struct ibc_tune_model *m, int coll, int algo, int proto,
			  const struct ibc_tune_sample *s, int ns, struct ibc_tune_coef *out_p);
/*
 * fit all algorithms of @coll at once: one alpha per protocol shared by the
 * algorithms, one beta per algorithm (LL: alpha only); the preferred fit for
 * tuning files (kernel-doc in tune_model.c)
 */
ibc_status_t ibc_tune_fit_coll(const struct ibc_tune_model *m, int coll,
			       const struct ibc_tune_sample *const s[IBC_ALGO_COUNT][IBC_PROTO_COUNT],
			       const int ns[IBC_ALGO_COUNT][IBC_PROTO_COUNT],
			       struct ibc_tune_coef out[IBC_ALGO_COUNT][IBC_PROTO_COUNT]);
/* print the coefficients and the choice per size range (ibc_info --tuning) */
void ibc_tune_print(const struct ibc_tune_model *m, FILE *f);

/* ---- per communicator ------------------------------------------------------ */

/*
 * ibc_tuner_create() - the tuner of a communicator whose coll layer is
 * @coll; no communication: the model is agreed at the first tuned
 * collective. ibc_tuner_destroy() frees it (NULL: no-op).
 * Return: IBC_OK; IBC_ERR_NO_MEMORY.
 */
ibc_status_t ibc_tuner_create(struct ibc_coll *coll, struct ibc_tuner **t_p);
void ibc_tuner_destroy(struct ibc_tuner *t);

/*
 * ibc_tuner_select() - the algorithm for @op (all-reduce, broadcast or
 * reduce) on @t's communicator; the executor's call, once per operation,
 * in operation order. The first call on a communicator of more than one
 * rank is collective: rank 0's settings and tuning file are shared, then
 * (with IBC_TUNING_PROBE=1 and no file rows for this transport) every rank
 * measures latency and bandwidth with a partner and reduction speed
 * locally, and the averages become the model, so all ranks decide alike.
 * All-reduce calls are counted per size class, and the calls at which the
 * re-timing times or checks a class are collective too (tune_retime.c):
 * only real operations, which every rank runs, may come here. Logs each
 * new decision (per collective and power-of-two size) once at INFO TUNING.
 * Returns IBC_OK or the net layer's error.
 */
ibc_status_t ibc_tuner_select(struct ibc_tuner *t, struct ibc_op *op, struct ibc_algo_choice *c);

/*
 * ibc_tuner_peek() - the choice ibc_tuner_select() would make for a
 * collective of kind @kind (enum ibc_coll_type) on @nbytes of @esz-byte
 * elements, without counting a call or communicating (benchmarks label
 * their runs with it). Local. Returns IBC_OK, or IBC_ERR_INVALID_USAGE
 * before the first tuned collective or for a kind the tuner does not decide.
 */
ibc_status_t ibc_tuner_peek(struct ibc_tuner *t, int kind, size_t nbytes, size_t esz,
			    struct ibc_algo_choice *c);

/*
 * ibc_tuner_observe() - tell @t that @op ran with @c, started at @t0_ns
 * (ibc_time_ns(), ns) and completed on this rank now (the clock is read
 * here). The re-timing (IBC_TUNING_RETIME, tune_retime.c "Re-timing")
 * compares the fastest such call of a size class with the time it measured
 * there. Only for calls whose choice ibc_tuner_select() marked @c->timed (a
 * sample of an all-reduce size class the re-timing watches: a clock read
 * costs 20-28 ns in a VM, 4 % of a 2-rank 8-byte all-reduce). Local, no
 * communication; the executor calls it after such an operation.
 */
void ibc_tuner_observe(struct ibc_tuner *t, const struct ibc_op *op,
		       const struct ibc_algo_choice *c, uint64_t t0_ns);

/*
 * ibc_tuner_force() - tests and benchmarks: fix the algorithm (-1: tuner),
 * protocol (-1: tuner) and chunk (0: tuner) of @t's later operations.
 * Every rank must call it with the same values between the same operations.
 */
ibc_status_t ibc_tuner_force(struct ibc_tuner *t, int algo, int proto, size_t chunk_bytes);

/* a copy of @t's model (after its first tuned collective) */
ibc_status_t ibc_tuner_model(const struct ibc_tuner *t, struct ibc_tune_model *m_p);

#endif /* IBC_TUNE_H */
