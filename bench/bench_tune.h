/* SPDX-License-Identifier: MIT */
/*
 * bench_tune.h - the timing sweep that fits the tuner's coefficients and
 * writes them to a tuning file (IBC_TUNING_FILE format, docs/algorithms.md).
 * Shared by `ibc_bench --tune FILE` and the build-tree driver
 * bench/algo_timing. Uses the library's internal tuner API (src/coll/
 * tune/tune.h), so its programs link src/libibcoll_core.la.
 */
#ifndef IBC_BENCH_TUNE_H
#define IBC_BENCH_TUNE_H

#include <stddef.h>
#include <stdio.h>

#include "ibcoll.h"
#include "tune/tune.h"

#define BENCH_TUNE_MAX_SIZES 32
#define BENCH_TUNE_MAX_REPS 31
/* configurations: every algorithm x protocol forced, then the tuner's pick */
#define BENCH_TUNE_NCFG (IBC_ALGO_COUNT * IBC_PROTO_COUNT + 1)
#define BENCH_TUNE_AUTO (BENCH_TUNE_NCFG - 1)

/*
 * struct bench_tune_cell - one configuration at one size.
 * @valid:  it was timed (algorithms that do not apply, and LL where no
 *          message of the run would take the LL path, are not).
 * @chunk:  pipeline chunk the run used, bytes.
 * @med_us, @min_us, @max_us: over the repetitions, of the slowest rank's
 *          time per operation, us.
 */
struct bench_tune_cell {
	int valid;
	int algo;
	int proto;
	size_t chunk;
	double med_us;
	double min_us;
	double max_us;
};

/*
 * struct bench_tune_result - a sweep of one collective; plain data, so it
 * can live in memory shared between processes.
 * @coll:   enum ibc_tune_coll.
 * @model:  the communicator's model the run started from (probe or file).
 */
struct bench_tune_result {
	int coll;
	int nranks;
	int nsizes;
	int have_model;
	size_t sizes[BENCH_TUNE_MAX_SIZES];
	struct ibc_tune_model model;
	struct bench_tune_cell cell[BENCH_TUNE_MAX_SIZES][BENCH_TUNE_NCFG];
};

/*
 * bench_tune_measure() - time every algorithm and protocol that applies to
 * @coll (enum ibc_tune_coll), then the tuner's own pick, at each of
 * @res->sizes[0 .. @res->nsizes) (bytes of float32 sum data), @reps timed
 * repetitions after @warmup, interleaved so that a change of load hits
 * every configuration alike. Collective over @comm: every rank calls it with
 * the same arguments. @sendbuf, @recvbuf: [in] at least the largest size.
 * @res: [in] sizes, nsizes; [out] on every rank the model and the cells
 * (times are the slowest rank's, agreed by an all-reduce). Leaves the
 * communicator's tuner unforced. Returns IBC_OK, IBC_ERR_INVALID_ARG for a
 * bad argument, or the error of a collective.
 */
ibc_status_t bench_tune_measure(ibc_comm_h comm, int coll, void *sendbuf, void *recvbuf,
				int reps, int warmup, struct bench_tune_result *res);

/*
 * bench_tune_fit_append() - fit the coefficients of @res->coll for every
 * algorithm and protocol measured in @res (ibc_tune_fit_coll(), least
 * squares on the medians) and append them, with the model's base rows, to
 * the tuning file @path, after a comment line naming @tool. Not collective
 * (call on one rank). Returns IBC_OK, IBC_ERR_INVALID_ARG when nothing was
 * measured, IBC_ERR_SYSTEM when the file cannot be written.
 */
ibc_status_t bench_tune_fit_append(const struct bench_tune_result *res, const char *tp_name,
				   const char *tool, const char *path);

/* print @res: one line per measurement, then the best configuration per size
 * against the tuner's pick (the format bench/algo_summary.py reads) */
void bench_tune_print(const struct bench_tune_result *res, FILE *f);

#endif /* IBC_BENCH_TUNE_H */
