/* SPDX-License-Identifier: MIT */
/*
 * tune_internal.h - what the tuner's files share (not for other layers):
 * the model's pieces that the per-communicator tuner (tuner.c), the tuning
 * file and fit (tune_file.c) and the printing (tune_print.c) reuse.
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

/* @algo implements @coll and can run on this communicator (shm: one host) */
int ibc_tune_algo_ok(const struct ibc_tune_model *m, int coll, int algo);

/* the raced anchor whose band holds @nbytes, or NULL */
const struct ibc_tune_race *ibc_tune_race_at(const struct ibc_tune_model *m, int coll,
						size_t nbytes);

typedef void (*ibc_tune_range_fn)(void *arg, size_t lo, size_t hi, const struct ibc_algo_choice *c);

void ibc_tune_ranges(const struct ibc_tune_model *m, int coll, ibc_tune_range_fn fn, void *arg);

void ibc_tune_range_text(size_t lo, size_t hi, const struct ibc_algo_choice *c, char *buf,
		       size_t len);

void ibc_tune_source_text(const struct ibc_tune_model *m, char *buf, size_t len);

/* the race at anchor @i: "256 KiB: ring 47.7 us (predicted 38.5), shm ..." */
void ibc_tune_race_text(const struct ibc_tune_model *m, int i, char *buf, size_t len);

#endif /* IBC_TUNE_INTERNAL_H */
