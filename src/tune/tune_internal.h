/* SPDX-License-Identifier: MIT */
/*
 * tune_internal.h - what the tuner's files share (not for other layers):
 * the model's pieces that the per-communicator tuner (tuner.c, with its
 * re-timing in tune_retime.c), the tuning file and fit (tune_file.c) and
 * the printing (tune_print.c) reuse, and the tuner's own state.
 */
#ifndef IBC_TUNE_INTERNAL_H
#define IBC_TUNE_INTERNAL_H

#include <stddef.h>

#include "tune/tune.h"

#define TUNE_DEFAULT_CHUNK (256u << 10)         /* rd/rabenseifner chunk, bytes */
/*
 * The race's cost factor: a race anchor's expected time is its prediction
 * x this, scaled by the last anchor's measured / predicted (tuner.c).
 */
#define RACE_COST_FACTOR 1.5

/*
 * The reduction cost per byte the model prices for an operation on N bytes:
 * gamma times the time sharing, and, where the probe measured the cache's
 * speed, blended towards it by the fraction of the working set that fits
 * the core's L2: the share ranks of a core each touch about 2 N (input and
 * output), so that fraction is min(1, L2 / (share 2 N)) (file header,
 * "cache").
 */
double ibc_tune_gamma(const struct ibc_tune_model *m, double gamma_ns, double N);

/* the critical-path shape of one operation (file header) */
void ibc_tune_shape(const struct ibc_tune_model *m, int coll, int algo, double N, double C,
		       double *S, double *B, double *G);

/* best protocol and chunk for one algorithm; returns the predicted time */
double ibc_tune_best_for_algo(const struct ibc_tune_model *m, int coll, int algo, size_t nbytes,
				 struct ibc_algo_choice *c);

/*
 * every algorithm's best protocol and chunk for @coll on @nbytes: @v its
 * predicted time (HUGE_VAL where it does not apply), @t the choice; returns
 * the first algorithm with the lowest time (ties: enum order), or -1
 */
int ibc_tune_price_all(const struct ibc_tune_model *m, int coll, size_t nbytes,
		       double v[IBC_ALGO_COUNT], struct ibc_algo_choice t[IBC_ALGO_COUNT]);

/* @algo implements @coll and can run on this communicator (shm: one host) */
int ibc_tune_algo_ok(const struct ibc_tune_model *m, int coll, int algo);

/* the raced anchor whose band holds @nbytes, or NULL */
const struct ibc_tune_race *ibc_tune_race_at(const struct ibc_tune_model *m, int coll,
						size_t nbytes);

typedef void (*ibc_tune_range_fn)(void *arg, size_t lo, size_t hi, const struct ibc_algo_choice *c);

void ibc_tune_ranges(const struct ibc_tune_model *m, int coll, ibc_tune_range_fn fn, void *arg);

void ibc_tune_range_text(size_t lo, size_t hi, const struct ibc_algo_choice *c, char *buf,
		       size_t len);

/* "16 MiB", "3 KiB", "100 B": @v bytes in the largest unit that divides it */
void ibc_tune_bytes_text(size_t v, char *buf, size_t len);

void ibc_tune_source_text(const struct ibc_tune_model *m, char *buf, size_t len);

/* the race at anchor @i: "256 KiB: ring 47.7 us (predicted 38.5), shm ..." */
void ibc_tune_race_text(const struct ibc_tune_model *m, int i, char *buf, size_t len);

/* ---- the tuner of one communicator (tuner.c, tune_retime.c) ------------- */

#define TUNE_CACHE 8                    /* decisions cached per collective */
#define RETIME_CLASSES IBC_TUNE_CLASSES  /* all-reduce size classes: floor(log2(bytes)) */

/* one cached decision */
struct tune_cache_ent {
	size_t nbytes;
	size_t esz;             /* element bytes: the empty-message count depends on it */
	int valid;
	struct ibc_algo_choice c;
};

/* one all-reduce size class of the re-timing (tune_retime.c, "Re-timing") */
struct tune_retime {
	uint64_t calls;         /* all-reduce calls of this size class so far */
	uint64_t next;          /* call count of the next checkpoint (valid) */
	uint64_t gap;           /* calls between the last two checkpoints */
	int valid;              /* timed: @algo runs this class */
	int algo;               /* enum ibc_algo */
	double ratio;           /* its measured / predicted time at the last timing */
	double seen;            /* this rank's fastest measured / predicted since the last
				 * checkpoint; 0: none */
	double base;            /* the agreed seen of the first checkpoint after the
				 * timing, which later ones compare with; 0: none yet */
	int cached;             /* runs the decision cache's choice, untimed: timed at @next */
};

/* the tuner of one communicator (tune.h) */
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
	struct tune_retime rt[RETIME_CLASSES]; /* all-reduce, per size class (floor log2) */
	double *agree;                  /* TUNE_AGREE_DOUBLES: the buffer of the probe's and
					 * the re-timing's agreements, kept for the
					 * communicator's life so that a verbs transport
					 * registers it once, at the probe, and later
					 * agreements cost no registration */
};
#define TUNE_AGREE_DOUBLES 64

/*
 * an all-reduce (@redop) of @n <= TUNE_AGREE_DOUBLES doubles @v in place,
 * through t->agree, on @op's sequence number (tune_retime.c)
 */
ibc_status_t ibc_tune_agree(struct ibc_tuner *t, const struct ibc_op *op, double *v, size_t n,
			    ibc_redop_t redop);
/* an internal operation on the same sequence number as @op (agreement, probe, race) */
void ibc_tune_internal_req(const struct ibc_op *op, int coll, void *buf, size_t count,
			   ibc_dtype_t dtype, struct ibc_op *out);

/* 1 where the re-timing runs for @nbytes: the same verdict on every rank */
int ibc_tune_retime_on(const struct ibc_tuner *t, size_t nbytes);
/*
 * the size class of @nbytes > 0: floor(log2), at most RETIME_CLASSES - 1
 * (63); the re-timing's classes and the decision log's (tuner.c)
 */
int ibc_tune_size_class(size_t nbytes);
/*
 * count an all-reduce of @nbytes in its class; 1 where that call times or
 * checks (ibc_tune_retime_tick(), collective, due at the same call on every rank)
 */
int ibc_tune_retime_count(struct ibc_tuner *t, size_t nbytes);
/* 1 where this all-reduce of @nbytes with @c is one the re-timing times (ibc_tuner_observe()) */
int ibc_tune_retime_sampled(const struct ibc_tuner *t, size_t nbytes, const struct ibc_algo_choice *c);
ibc_status_t ibc_tune_retime_tick(struct ibc_tuner *t, struct ibc_op *op, size_t nbytes);

/* ---- the per-host decision cache (tune_cache.c) ------------------------- */

/*
 * ibc_tune_cache_path() - the cache file IBC_TUNING_CACHE names into @buf
 * (@len bytes): "auto" $XDG_CACHE_HOME/ibcoll/tuning-HOST.txt (else
 * $HOME/.cache/...), "off" or "" none, else the path itself.
 * Return: 1 with a path, 0 for none.
 */
int ibc_tune_cache_path(char *buf, size_t len);

/*
 * ibc_tune_cache_load() - fill @m->cached_algo from the cache file's lines
 * for @m's transport and rank count and @nlocal ranks on this host (rank 0,
 * before the model's broadcast), logged at INFO TUNING when it found any.
 * A missing file is no error; a line that does not parse is skipped with
 * one WARN naming the file and line.
 * Return: the number of classes found.
 */
int ibc_tune_cache_load(struct ibc_tune_model *m, int nlocal);

/*
 * ibc_tune_cache_store() - record that the timing of all-reduce size class
 * @cls chose @algo (measured @us per call at @nbytes) for @m's transport,
 * rank count and @nlocal: the file's line for that key is replaced (or
 * added) under flock(), through a temporary file renamed over it. Rank 0,
 * after each timing. Errors are logged at WARN and otherwise ignored (the
 * cache only saves time).
 */
void ibc_tune_cache_store(const struct ibc_tune_model *m, int nlocal, int cls, int algo,
			  size_t nbytes, double us);

#endif /* IBC_TUNE_INTERNAL_H */
