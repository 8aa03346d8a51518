/* SPDX-License-Identifier: MIT */
/*
 * cuda_test.h - helpers of the tests in tests/cuda: ranks as forked
 * processes (so that each rank has its own CUDA context, as in a real job,
 * and a parent that never touches CUDA), buffers that are device memory or
 * emulated device memory, and a fake CUDA stream for the stream-ordered API.
 */
#ifndef IBC_CUDA_TEST_H
#define IBC_CUDA_TEST_H

#include <stddef.h>

#include "api/cuda_stage.h"
#include "ibcoll.h"

/*
 * ct_run_ranks() - Fork @nranks processes; rank 0 creates the unique id and
 * passes it to the others through pipes, then each calls @fn(rank, nranks,
 * id, arg) and exits with its return value (0 = pass). The parent never
 * creates threads or touches CUDA before forking. Returns the number of
 * ranks that failed, exited abnormally or were still running after
 * @timeout_s seconds (those are killed); -1 if a fork failed.
 */
typedef int (*ct_rank_fn)(int rank, int nranks, const ibc_unique_id_t *id, void *arg);
int ct_run_ranks(int nranks, ct_rank_fn fn, void *arg, int timeout_s);
/* the same, handing back each rank's exit status in @codes (-1: killed); returns -1 or 0 */
int ct_run_ranks_codes(int nranks, ct_rank_fn fn, void *arg, int timeout_s, int *codes);

/*
 * ct_probe_devices() - Number of CUDA devices, asked in a forked child so
 * that the calling process does not initialize CUDA (forked ranks could not
 * use it then); 0 in builds without CUDA or without a driver.
 */
int ct_probe_devices(void);

/*
 * Buffers for the collective tests: device memory (cudaMalloc) or, with
 * @emulated, host memory registered as fake device memory (cuda.h).
 */
void *ct_dev_alloc(size_t nbytes, int emulated);
void ct_dev_free(void *p, int emulated);
int ct_to_dev(void *dev, const void *host, size_t nbytes, int emulated);
int ct_from_dev(void *host, const void *dev, size_t nbytes, int emulated);

/*
 * A fake CUDA stream: a thread that runs the host functions given to it in
 * order (installed with ibc_cuda_stream_set_launcher()), plus "work" items
 * of the test itself, so that tests can check the ordering rules of the
 * stream-ordered API without a GPU.
 */
struct ct_stream;
struct ct_stream *ct_stream_create(void);
/* queue @fn(@arg) after everything queued so far */
int ct_stream_push(struct ct_stream *s, void (*fn)(void *), void *arg);
/* wait until everything queued so far ran; 0, or -1 after @timeout_ms */
int ct_stream_sync(struct ct_stream *s, int timeout_ms);
void ct_stream_destroy(struct ct_stream *s);
/* the launcher to pass to ibc_cuda_stream_set_launcher(); streams are struct ct_stream * */
ibc_status_t ct_stream_launch(void *stream, void (*fn)(void *), void *arg);

#endif /* IBC_CUDA_TEST_H */
