/* SPDX-License-Identifier: MIT */
/*
 * test_cuda_stream.c - the stream-ordered entry points (include/ibcoll_cuda.h,
 * src/cuda/cuda_stream.c). The ordering rules are checked with fake CUDA
 * streams (a thread running host functions in order, installed as the
 * launcher), so they run on every machine: an operation starts only after
 * earlier stream work, later stream work sees its result, the call itself
 * returns at once, operations keep issue order with blocking calls, errors
 * leave nothing queued, and a stream that never arrives times out instead of
 * hanging. Also checked: what the real entry points answer on a machine
 * without a GPU (or a build without CUDA). Ranks are forked processes.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/cuda_stage.h"
#include "cuda/cuda.h"
#include "cuda_test.h"
#include "ibcoll_cuda.h"
#include "tap.h"

#define COUNT 4099

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- stream work items ------------------------------------------------- */

struct fill_item {
	float *buf;
	size_t count;
	float value;
	int delay_ms;
	volatile int done;
};

/* after @delay_ms, buf[i] = value + i */
static void fill_fn(void *arg)
{
	struct fill_item *it = arg;
	size_t i;

	usleep((useconds_t)it->delay_ms * 1000u);
	for (i = 0; i < it->count; i++)
		it->buf[i] = it->value + (float)i;
	__atomic_store_n(&it->done, 1, __ATOMIC_RELEASE);
}

struct check_item {
	const float *buf;
	size_t count;
	float base;             /* expect buf[i] = base + mult * i */
	float mult;
	volatile int ran;
	volatile int bad;       /* index + 1 of the first wrong element */
};

static void check_fn(void *arg)
{
	struct check_item *it = arg;
	size_t i;

	for (i = 0; i < it->count; i++) {
		if (it->buf[i] != it->base + it->mult * (float)i) {
			it->bad = (int)i + 1;
			break;
		}
	}
	__atomic_store_n(&it->ran, 1, __ATOMIC_RELEASE);
}

/* a stream item that blocks until released */
struct hold_item {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int released;
};

static void hold_fn(void *arg)
{
	struct hold_item *h = arg;

	pthread_mutex_lock(&h->lock);
	while (!h->released)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
}

static void release(struct hold_item *h)
{
	pthread_mutex_lock(&h->lock);
	h->released = 1;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			printf("# rank %d: %s:%d: ", r, __FILE__, __LINE__);          \
			printf(__VA_ARGS__);                                          \
			printf("\n");                                                 \
			fail = 1;                                                     \
			goto out;                                                     \
		}                                                                     \
	} while (0)

/* ---- 1. ordering with fake streams, 2 ranks ----------------------------- */

static int order_main(int r, int n, const ibc_unique_id_t *id, void *arg)
{
	struct ct_stream *s = ct_stream_create();
	float *in = calloc(COUNT, sizeof(float));
	float *out = calloc(COUNT, sizeof(float));
	float *all = calloc((size_t)n * COUNT, sizeof(float));
	float *hin = calloc(COUNT, sizeof(float));
	float *hout = calloc(COUNT, sizeof(float));
	float *din = NULL;
	struct fill_item fill = { in, COUNT, (float)(r + 1), 300, 0 };
	struct check_item chk = { out, COUNT, 0, 0, 0, 0 };
	struct check_item chk2 = { all, COUNT, 0, 1, 0, 0 };
	struct check_item chk3 = { all + (size_t)(n - 1) * COUNT, COUNT, 0, 1, 0, 0 };
	uint64_t ops0;
	uint64_t ops1;
	ibc_comm_h comm = NULL;
	ibc_status_t st;
	uint64_t t0;
	int fail = 0;
	int q;
	size_t i;

	(void)arg;
	ibc_cuda_stream_set_launcher(ct_stream_launch);
	CHECK(s && in && out && all && hin && hout, "out of memory");
	CHECK(ibc_comm_init_rank(&comm, n, id, r) == IBC_OK, "init");

	/* the op waits for the slow fill before it; the check after it sees the sum */
	for (q = 0; q < n; q++)
		chk.base += (float)(q + 1);
	chk.mult = (float)n;
	CHECK(ct_stream_push(s, fill_fn, &fill) == 0, "push");
	t0 = now_ms();
	st = ibc_allreduce_stream(in, out, COUNT, IBC_FLOAT32, IBC_SUM, comm, (cudaStream_t)s);
	CHECK(st == IBC_OK, "ibc_allreduce_stream: %s", ibc_status_str(st));
	CHECK(!__atomic_load_n(&fill.done, __ATOMIC_ACQUIRE) && now_ms() - t0 < 250,
	      "the call waited for the stream (%llu ms)", (unsigned long long)(now_ms() - t0));
	CHECK(ct_stream_push(s, check_fn, &chk) == 0, "push");
	CHECK(ct_stream_sync(s, 20000) == 0, "stream did not drain");
	CHECK(chk.ran && !chk.bad, "result after the op: element %d wrong", chk.bad - 1);

	/* a blocking call issued after a gated op runs after it (issue order) */
	fill.done = 0;
	fill.delay_ms = 200;
	chk.ran = chk.bad = 0;
	CHECK(ct_stream_push(s, fill_fn, &fill) == 0, "push");
	CHECK(ibc_allreduce_stream(in, out, COUNT, IBC_FLOAT32, IBC_SUM, comm, (cudaStream_t)s) ==
		      IBC_OK, "second stream op");
	for (i = 0; i < COUNT; i++)
		hin[i] = 1.0f;
	st = ibc_allreduce(hin, hout, COUNT, IBC_FLOAT32, IBC_SUM, comm);
	CHECK(st == IBC_OK, "blocking allreduce behind a stream op: %s", ibc_status_str(st));
	CHECK(__atomic_load_n(&fill.done, __ATOMIC_ACQUIRE),
	      "the blocking call finished before the stream reached the earlier op");
	CHECK(hout[0] == (float)n && hout[COUNT - 1] == (float)n, "blocking result %g", hout[0]);
	CHECK(ct_stream_push(s, check_fn, &chk) == 0, "push");
	CHECK(ct_stream_sync(s, 20000) == 0 && chk.ran && !chk.bad, "second stream op result");

	/* several collectives in a row on the stream */
	CHECK(ibc_broadcast_stream(out, out, COUNT, IBC_FLOAT32, n - 1, comm, (cudaStream_t)s) ==
		      IBC_OK, "broadcast_stream");
	for (i = 0; i < COUNT; i++)
		hin[i] = (float)i;
	CHECK(ibc_allgather_stream(hin, all, COUNT, IBC_FLOAT32, comm, (cudaStream_t)s) == IBC_OK,
	      "allgather_stream");
	CHECK(ibc_barrier_stream(comm, (cudaStream_t)s) == IBC_OK, "barrier_stream");
	chk.ran = chk.bad = 0;
	CHECK(ct_stream_push(s, check_fn, &chk) == 0 && ct_stream_push(s, check_fn, &chk2) == 0 &&
		      ct_stream_push(s, check_fn, &chk3) == 0,
	      "push");
	CHECK(ct_stream_sync(s, 20000) == 0 && chk.ran && !chk.bad && chk2.ran && !chk2.bad &&
		      chk3.ran && !chk3.bad,
	      "broadcast/allgather/barrier on the stream (%d %d %d)", chk.bad, chk2.bad, chk3.bad);

	/* argument errors are returned at once and leave nothing behind */
	st = ibc_allreduce_stream(NULL, out, COUNT, IBC_FLOAT32, IBC_SUM, comm, (cudaStream_t)s);
	CHECK(st == IBC_ERR_INVALID_ARG, "NULL sendbuf: %s", ibc_status_str(st));
	st = ibc_reduce_stream(in, out, COUNT, IBC_FLOAT32, IBC_SUM, n, comm, (cudaStream_t)s);
	CHECK(st == IBC_ERR_INVALID_ARG, "root out of range: %s", ibc_status_str(st));
	st = ibc_allreduce_stream(in, out, COUNT, IBC_FLOAT32, IBC_SUM, comm, (cudaStream_t)NULL);
	CHECK(st == IBC_ERR_CUDA, "a stream that cannot take the host function: %s",
	      ibc_status_str(st));
	CHECK(ct_stream_sync(s, 5000) == 0, "cancelled host functions returned");
	st = ibc_allreduce(hin, hout, COUNT, IBC_FLOAT32, IBC_SUM, comm);
	CHECK(st == IBC_OK && hout[5] == 5.0f * (float)n, "a call after the errors: %s",
	      ibc_status_str(st));

	/* device buffers (emulated) on the stream: staged, after the fill */
	din = ct_dev_alloc(COUNT * sizeof(float), 1);
	CHECK(din != NULL, "emulated device buffer");
	fill.buf = din;
	fill.done = 0;
	fill.delay_ms = 100;
	chk.buf = din;
	chk.ran = chk.bad = 0;
	ibc_cuda_stage_stats(&ops0, NULL);
	CHECK(ct_stream_push(s, fill_fn, &fill) == 0, "push");
	CHECK(ibc_allreduce_stream(din, din, COUNT, IBC_FLOAT32, IBC_SUM, comm, (cudaStream_t)s) ==
		      IBC_OK, "device allreduce_stream");
	CHECK(ct_stream_push(s, check_fn, &chk) == 0, "push");
	CHECK(ct_stream_sync(s, 20000) == 0 && chk.ran && !chk.bad,
	      "in-place device allreduce on the stream: element %d", chk.bad - 1);
	ibc_cuda_stage_stats(&ops1, NULL);
	CHECK(ops1 - ops0 == 1, "staged %llu operations, expected 1",
	      (unsigned long long)(ops1 - ops0));
out:
	if (comm)
		ibc_comm_destroy(comm);
	ct_stream_destroy(s);
	ct_dev_free(din, 1);
	free(in);
	free(out);
	free(all);
	free(hin);
	free(hout);
	return fail;
}

/* ---- 2. a stream that never arrives: bounded by IBC_TIMEOUT_MS ---------- */

static int timeout_main(int r, int n, const ibc_unique_id_t *id, void *arg)
{
	struct ct_stream *s = ct_stream_create();
	struct hold_item hold = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	float buf[16] = { 0 };
	ibc_comm_h comm = NULL;
	ibc_status_t st;
	ibc_status_t ast = IBC_OK;
	uint64_t t0;
	int fail = 0;

	(void)arg;
	ibc_cuda_stream_set_launcher(ct_stream_launch);
	CHECK(s && ibc_comm_init_rank(&comm, n, id, r) == IBC_OK, "init");
	CHECK(ct_stream_push(s, hold_fn, &hold) == 0, "push");
	CHECK(ibc_allreduce_stream(buf, buf, 16, IBC_FLOAT32, IBC_SUM, comm, (cudaStream_t)s) ==
		      IBC_OK, "enqueue");
	/* a blocking call waits behind the gated op, which times out (2 s) */
	t0 = now_ms();
	st = ibc_allreduce(buf, buf, 16, IBC_FLOAT32, IBC_SUM, comm);
	CHECK(st == IBC_ERR_TIMEOUT && now_ms() - t0 < 10000,
	      "the call behind a stuck stream: %s after %llu ms", ibc_status_str(st),
	      (unsigned long long)(now_ms() - t0));
	CHECK(ibc_comm_get_async_error(comm, &ast) == IBC_OK && ast == IBC_ERR_TIMEOUT,
	      "the communicator is poisoned with the timeout (%s)", ibc_status_str(ast));
	CHECK(strstr(ibc_last_error(), "did not reach the operation") != NULL,
	      "the error says the stream did not arrive: %s", ibc_last_error());
	/* the stream, released, runs the host function, which returns at once */
	release(&hold);
	CHECK(ct_stream_sync(s, 5000) == 0, "the stream continues after the failed op");
out:
	release(&hold);
	if (comm)
		ibc_comm_destroy(comm);
	ct_stream_destroy(s);
	return fail;
}

/* ---- 3. the real entry points without a GPU, and without a progress thread */

static int real_main(int r, int n, const ibc_unique_id_t *id, void *arg)
{
	float buf[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	float back[8] = { 0 };
	void *dbuf = NULL;
	ibc_comm_h comm = NULL;
	ibc_status_t st;
	int ndev = 0;
	int fail = 0;
	int i;

	(void)arg;
	ibc_cuda_device_count(&ndev);
	if (ndev > 0)
		CHECK(ibc_cuda_set_device(0) == IBC_OK, "cudaSetDevice(0)");
	CHECK(ibc_comm_init_rank(&comm, n, id, r) == IBC_OK, "init");
	st = ibc_allreduce_stream(buf, buf, 8, IBC_FLOAT32, IBC_SUM, NULL, 0);
	CHECK(st == IBC_ERR_INVALID_ARG || st == IBC_ERR_UNSUPPORTED, "NULL comm: %s",
	      ibc_status_str(st));
	st = ibc_allreduce_stream(buf, buf, 8, IBC_FLOAT32, IBC_SUM, comm, 0);
	if (ndev == 0) {
		CHECK(st == (IBC_CUDA_BUILT ? IBC_ERR_CUDA : IBC_ERR_UNSUPPORTED),
		      "no GPU: %s (%s)", ibc_status_str(st), ibc_last_error());
		/* nothing was left queued: a normal call works, destroy returns at once */
		st = ibc_allreduce(buf, buf, 8, IBC_FLOAT32, IBC_SUM, comm);
		CHECK(st == IBC_OK && buf[7] == 8.0f * (float)n, "a call afterwards: %s",
		      ibc_status_str(st));
		goto out;
	}
	/* a GPU: host buffers on the legacy default stream, then device buffers */
	CHECK(st == IBC_OK, "allreduce_stream on stream 0: %s", ibc_status_str(st));
	CHECK(ibc_cuda_device_sync() == IBC_OK, "cudaDeviceSynchronize");
	for (i = 0; i < 8; i++)
		CHECK(buf[i] == (float)((i + 1) * n), "host buffer on a CUDA stream: [%d] = %g", i,
		      buf[i]);
	CHECK(ibc_cuda_dev_alloc(sizeof(buf), &dbuf) == IBC_OK, "cudaMalloc");
	CHECK(ibc_cuda_memcpy(dbuf, buf, sizeof(buf)) == IBC_OK, "cudaMemcpy");
	st = ibc_allreduce_stream(dbuf, dbuf, 8, IBC_FLOAT32, IBC_AVG, comm, 0);
	CHECK(st == IBC_OK, "device allreduce_stream: %s", ibc_status_str(st));
	CHECK(ibc_cuda_memcpy(back, dbuf, sizeof(back)) == IBC_OK, "cudaMemcpy back");
	for (i = 0; i < 8; i++)
		CHECK(back[i] == buf[i], "device buffer on a CUDA stream: [%d] = %g, expected %g", i,
		      back[i], buf[i]);
out:
	if (comm)
		ibc_comm_destroy(comm);
	if (dbuf)
		ibc_cuda_dev_free(dbuf);
	return fail;
}

static int nothread_main(int r, int n, const ibc_unique_id_t *id, void *arg)
{
	struct ct_stream *s = ct_stream_create();
	float buf[8] = { 0 };
	ibc_comm_h comm = NULL;
	ibc_status_t st;
	int fail = 0;

	(void)arg;
	ibc_cuda_stream_set_launcher(ct_stream_launch);
	CHECK(s && ibc_comm_init_rank(&comm, n, id, r) == IBC_OK, "init");
	st = ibc_allreduce_stream(buf, buf, 8, IBC_FLOAT32, IBC_SUM, comm, (cudaStream_t)s);
	CHECK(st == IBC_ERR_UNSUPPORTED, "IBC_PROGRESS_THREAD=0: %s", ibc_status_str(st));
	CHECK(ct_stream_sync(s, 1000) == 0, "nothing was launched");
out:
	if (comm)
		ibc_comm_destroy(comm);
	ct_stream_destroy(s);
	return fail;
}

int main(void)
{
	int nfail;
	int ndev;

	setenv("IBC_TRANSPORT", "shm", 1);
	setenv("IBC_CUDA_STAGE_BYTES", "4096", 1);
	nfail = ct_run_ranks(2, order_main, NULL, 120);
	tap_ok(nfail == 0, "2 ranks, fake streams: ordering, issue order with blocking calls, errors, device buffers");
	nfail = ct_run_ranks(3, order_main, NULL, 120);
	tap_ok(nfail == 0, "3 ranks: the same");
	setenv("IBC_TIMEOUT_MS", "2000", 1);
	nfail = ct_run_ranks(1, timeout_main, NULL, 60);
	tap_ok(nfail == 0, "a stream that never reaches the operation: IBC_ERR_TIMEOUT in bounded time");
	unsetenv("IBC_TIMEOUT_MS");
	ndev = ct_probe_devices();
	nfail = ct_run_ranks(2, real_main, NULL, 60);
	if (ndev > 0)
		tap_ok(nfail == 0, "real CUDA streams (%d device(s)): host and device buffers", ndev);
	else
		tap_ok(nfail == 0, "real entry points without a GPU: %s, nothing left queued",
		       IBC_CUDA_BUILT ? "IBC_ERR_CUDA" : "IBC_ERR_UNSUPPORTED (built without CUDA)");
	setenv("IBC_PROGRESS_THREAD", "0", 1);
	nfail = ct_run_ranks(1, nothread_main, NULL, 60);
	tap_ok(nfail == 0, "IBC_PROGRESS_THREAD=0: IBC_ERR_UNSUPPORTED");
	return tap_done();
}
