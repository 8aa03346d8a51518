/* SPDX-License-Identifier: MIT */
/*
 * test_cuda_kernels.c - the GPU reduction kernels (src/cuda/cuda_reduce.cu)
 * against the CPU kernels (src/coll/reduce.h) on random bit patterns
 * (NaN, infinities, subnormals and signed zeros included), every dtype x op
 * and the AVG division, sizes around the 16-byte packs, misaligned and
 * aliased buffers. Results must be bit-identical, except that any NaN
 * matches any NaN (GPU arithmetic returns the canonical NaN).
 *
 * Without a GPU (CUDA builds): the kernels' code runs on the CPU through
 * ibc_cuda_*_emulate() over 1, 3 and 64 virtual threads. With a GPU: the
 * same on the device, with larger sizes. --bench (GPU only): time the
 * reduction of 256 MiB against a device-to-device copy of 256 MiB and print
 * the table tests/gpu/run.sh reports; the target is at least 80% of the
 * copy's memory bandwidth (bytes read + written per second).
 *
 * usage: test_cuda_kernels [--bench | --require-device]
 *        (--require-device: SKIP instead of emulating when there is no GPU)
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "base/util.h"
#include "coll/reduce.h"
#include "cuda/cuda.h"
#include "tap.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void rand_fill(void *buf, size_t nbytes)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i + 8 <= nbytes; i += 8) {
		uint64_t v = next_rand();

		memcpy(p + i, &v, 8);
	}
	for (; i < nbytes; i++)
		p[i] = (unsigned char)next_rand();
}

static int is_nan(const void *buf, size_t k, ibc_dtype_t dt)
{
	uint16_t h;

	switch (dt) {
	case IBC_FLOAT16:
		h = ((const uint16_t *)buf)[k];
		return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
	case IBC_BFLOAT16:
		h = ((const uint16_t *)buf)[k];
		return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
	case IBC_FLOAT32:
		return isnan(((const float *)buf)[k]);
	case IBC_FLOAT64:
		return isnan(((const double *)buf)[k]);
	default:
		return 0;
	}
}

/* first element that differs (NaN matches NaN), or -1 */
static long first_diff(const void *got, const void *want, size_t n, ibc_dtype_t dt, size_t esz)
{
	size_t k;

	for (k = 0; k < n; k++) {
		if (!memcmp((const char *)got + k * esz, (const char *)want + k * esz, esz))
			continue;
		if (is_nan(got, k, dt) && is_nan(want, k, dt))
			continue;
		return (long)k;
	}
	return -1;
}

static void dump(const char *what, const void *buf, long k, size_t esz)
{
	uint64_t v = 0;

	memcpy(&v, (const char *)buf + (size_t)k * esz, esz);
	tap_diag("  %s[%ld] = 0x%0*llx", what, k, (int)(2 * esz), (unsigned long long)v);
}

static const ibc_dtype_t dts[] = { IBC_INT8, IBC_UINT8, IBC_INT32, IBC_UINT32, IBC_INT64,
				   IBC_UINT64, IBC_FLOAT16, IBC_BFLOAT16, IBC_FLOAT32,
				   IBC_FLOAT64 };
static const ibc_redop_t ops[] = { IBC_SUM, IBC_PROD, IBC_MIN, IBC_MAX, IBC_AVG };

/* element offsets of (dst, a, b): aligned, equally misaligned, differently misaligned */
static const int offs[][3] = { { 0, 0, 0 }, { 1, 1, 1 }, { 3, 3, 3 }, { 0, 1, 2 }, { 1, 0, 0 } };

struct runner {
	int device;
	size_t nthreads;        /* emulation */
};

/* dst = a OP b on the runner: host buffers in, host buffer out */
static ibc_status_t run_r3(const struct runner *r, void *dst, const void *a, const void *b,
			   size_t n, ibc_dtype_t dt, ibc_redop_t op, int alias, size_t esz,
			   size_t od, size_t oa, size_t ob)
{
	char *base;
	char *dd;
	char *da;
	char *db;
	size_t span = IBC_ALIGN_UP((n + 8) * esz, 256);
	ibc_status_t st;

	if (!r->device) {
		if (alias) {
			memcpy(dst, a, n * esz);
			return ibc_cuda_reduce3_emulate(dst, dst, b, n, dt, op, r->nthreads);
		}
		return ibc_cuda_reduce3_emulate(dst, a, b, n, dt, op, r->nthreads);
	}
	st = ibc_cuda_dev_alloc(3 * span + 64, (void **)&base);
	if (st != IBC_OK)
		return st;
	dd = base + od * esz;
	da = alias ? dd : base + span + oa * esz;
	db = base + 2 * span + ob * esz;
	st = ibc_cuda_memcpy(da, a, n * esz);
	if (st == IBC_OK)
		st = ibc_cuda_memcpy(db, b, n * esz);
	if (st == IBC_OK)
		st = ibc_cuda_reduce3(dd, da, db, n, dt, op, NULL);
	if (st == IBC_OK)
		st = ibc_cuda_device_sync();
	if (st == IBC_OK)
		st = ibc_cuda_memcpy(dst, dd, n * esz);
	ibc_cuda_dev_free(base);
	return st;
}

static ibc_status_t run_avg(const struct runner *r, void *buf, size_t n, ibc_dtype_t dt, int nr,
			    size_t esz)
{
	void *d;
	ibc_status_t st;

	if (!r->device)
		return ibc_cuda_avg_finalize_emulate(buf, n, dt, nr, r->nthreads);
	st = ibc_cuda_dev_alloc(n * esz + 16, &d);
	if (st != IBC_OK)
		return st;
	st = ibc_cuda_memcpy(d, buf, n * esz);
	if (st == IBC_OK)
		st = ibc_cuda_avg_finalize(d, n, dt, nr, NULL);
	if (st == IBC_OK)
		st = ibc_cuda_device_sync();
	if (st == IBC_OK)
		st = ibc_cuda_memcpy(buf, d, n * esz);
	ibc_cuda_dev_free(d);
	return st;
}

/*
 * One dtype x op over @sizes and offsets; the emulated buffers get the
 * offsets too (host memory from malloc is 16-byte aligned).
 */
static int check_r3(const struct runner *r, ibc_dtype_t dt, ibc_redop_t op, const size_t *sizes,
		    int nsizes, int *nruns)
{
	size_t esz = 0;
	int s;
	unsigned o;
	int alias;

	ibc_dtype_size(dt, &esz);
	for (s = 0; s < nsizes; s++) {
		size_t n = sizes[s];

		for (o = 0; o < IBC_ARRAY_SIZE(offs); o++) {
			for (alias = 0; alias < 2; alias++) {
				char *a = malloc((n + 8) * esz);
				char *b = malloc((n + 8) * esz);
				char *got = malloc((n + 8) * esz);
				char *want = malloc((n + 8) * esz);
				char *ea = a + offs[o][1] * esz;
				char *eb = b + offs[o][2] * esz;
				char *eg = got + offs[o][alias ? 1 : 0] * esz;
				ibc_status_t st;
				long k;

				rand_fill(a, (n + 8) * esz);
				rand_fill(b, (n + 8) * esz);
				ibc_reduce_local3(want, ea, eb, n, dt, op);
				st = run_r3(r, eg, ea, eb, n, dt, op, alias, esz, offs[o][0],
					    offs[o][1], offs[o][2]);
				k = st == IBC_OK ? first_diff(eg, want, n, dt, esz) : 0;
				(*nruns)++;
				if (st != IBC_OK || k >= 0) {
					tap_diag("%s %s n %zu offsets %d/%d/%d%s: %s, element %ld",
						 ibc_dtype_name(dt), ibc_redop_name(op), n,
						 offs[o][0], offs[o][1], offs[o][2],
						 alias ? " in place" : "", ibc_status_str(st), k);
					if (st == IBC_OK) {
						dump("a", ea, k, esz);
						dump("b", eb, k, esz);
						dump("gpu", eg, k, esz);
						dump("cpu", want, k, esz);
					}
				}
				free(a);
				free(b);
				free(got);
				free(want);
				if (st != IBC_OK || k >= 0)
					return 0;
			}
		}
	}
	return 1;
}

static int check_avg(const struct runner *r, ibc_dtype_t dt, const size_t *sizes, int nsizes,
		     int *nruns)
{
	static const int nrs[] = { 1, 2, 3, 7, 64 };
	size_t esz = 0;
	int s;
	unsigned i;

	ibc_dtype_size(dt, &esz);
	for (s = 0; s < nsizes; s++) {
		for (i = 0; i < IBC_ARRAY_SIZE(nrs); i++) {
			size_t n = sizes[s];
			char *got = malloc(n * esz + 16);
			char *want = malloc(n * esz + 16);
			ibc_status_t st;
			long k;

			rand_fill(got, n * esz + 16);
			memcpy(want, got, n * esz);
			ibc_reduce_avg_finalize(want, n, dt, nrs[i]);
			st = run_avg(r, got, n, dt, nrs[i], esz);
			k = st == IBC_OK ? first_diff(got, want, n, dt, esz) : 0;
			(*nruns)++;
			if (st != IBC_OK || k >= 0)
				tap_diag("avg %s n %zu / %d: %s, element %ld", ibc_dtype_name(dt), n,
					 nrs[i], ibc_status_str(st), k);
			free(got);
			free(want);
			if (st != IBC_OK || k >= 0)
				return 0;
		}
	}
	return 1;
}

static void check_all(const struct runner *r, const size_t *sizes, int nsizes, const char *what)
{
	unsigned d;
	unsigned o;

	for (d = 0; d < IBC_ARRAY_SIZE(dts); d++) {
		int nruns = 0;
		int ok = 1;

		for (o = 0; o < IBC_ARRAY_SIZE(ops) && ok; o++)
			ok = check_r3(r, dts[d], ops[o], sizes, nsizes, &nruns);
		tap_ok(ok, "%s: %s, every op: %d runs match the CPU kernels", what,
		       ibc_dtype_name(dts[d]), nruns);
		nruns = 0;
		ok = check_avg(r, dts[d], sizes, nsizes, &nruns);
		tap_ok(ok, "%s: %s AVG division: %d runs", what, ibc_dtype_name(dts[d]), nruns);
	}
}

/* ---- bandwidth of the kernel against a device-to-device copy ------------ */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* mean seconds of one run over @iters after 3 warm-ups; -1 on error */
static double time_reduce(void *d, void *a, void *b, size_t n, ibc_dtype_t dt, int iters)
{
	double t0 = 0;
	int i;

	for (i = -3; i < iters; i++) {
		if (i == 0) {
			if (ibc_cuda_device_sync() != IBC_OK)
				return -1;
			t0 = now_s();
		}
		if (ibc_cuda_reduce3(d, a, b, n, dt, IBC_SUM, NULL) != IBC_OK)
			return -1;
	}
	if (ibc_cuda_device_sync() != IBC_OK)
		return -1;
	return (now_s() - t0) / iters;
}

static double time_copy(void *d, const void *a, size_t nbytes, int iters)
{
	double t0 = 0;
	int i;

	for (i = -3; i < iters; i++) {
		if (i == 0) {
			if (ibc_cuda_device_sync() != IBC_OK)
				return -1;
			t0 = now_s();
		}
		if (ibc_cuda_memcpy2d_async(d, nbytes, a, nbytes, nbytes, 1, NULL) != IBC_OK)
			return -1;
	}
	if (ibc_cuda_device_sync() != IBC_OK)
		return -1;
	return (now_s() - t0) / iters;
}

static int bench(void)
{
	static const ibc_dtype_t bdt[] = { IBC_FLOAT32, IBC_BFLOAT16, IBC_FLOAT16, IBC_FLOAT64,
					   IBC_INT32 };
	const size_t nbytes = (size_t)256 << 20;
	const int iters = 20;
	void *a = NULL;
	void *b = NULL;
	void *d = NULL;
	double tc;
	double copy_gbs;
	unsigned i;

	if (ibc_cuda_dev_alloc(nbytes, &a) != IBC_OK || ibc_cuda_dev_alloc(nbytes, &b) != IBC_OK ||
	    ibc_cuda_dev_alloc(nbytes, &d) != IBC_OK) {
		tap_ok(0, "allocate 3 x 256 MiB of device memory");
		return 0;
	}
	ibc_cuda_memset(a, 0x11, nbytes);
	ibc_cuda_memset(b, 0x22, nbytes);
	tc = time_copy(d, a, nbytes, iters);
	copy_gbs = 2.0 * (double)nbytes / tc / 1e9;
	tap_ok(tc > 0, "device-to-device copy of 256 MiB: %.3f ms, %.0f GB/s read+write", tc * 1e3,
	       copy_gbs);
	printf("# BENCH %-9s %10s %12s %14s %10s\n", "dtype", "reduce_ms", "reduce_GBps",
	       "copy_GBps", "ratio");
	for (i = 0; i < IBC_ARRAY_SIZE(bdt); i++) {
		size_t esz = 0;
		double tr;
		double gbs;

		ibc_dtype_size(bdt[i], &esz);
		tr = time_reduce(d, a, b, nbytes / esz, bdt[i], iters);
		gbs = 3.0 * (double)nbytes / tr / 1e9;
		printf("# BENCH %-9s %10.3f %12.0f %14.0f %9.0f%%\n", ibc_dtype_name(bdt[i]),
		       tr * 1e3, gbs, copy_gbs, 100.0 * gbs / copy_gbs);
		tap_ok(tr > 0 && gbs >= 0.8 * copy_gbs,
		       "%s sum of 256 MiB: %.3f ms, %.0f GB/s read+write = %.0f%% of the copy's (target >= 80%%)",
		       ibc_dtype_name(bdt[i]), tr * 1e3, gbs, 100.0 * gbs / copy_gbs);
	}
	ibc_cuda_dev_free(a);
	ibc_cuda_dev_free(b);
	ibc_cuda_dev_free(d);
	return 1;
}

int main(int argc, char **argv)
{
	static const size_t small[] = { 1, 7, 8, 9, 15, 16, 17, 31, 100, 1000, 4099 };
	static const size_t large[] = { 1, 17, 4099, (1u << 20) + 5 };
	int do_bench = argc > 1 && !strcmp(argv[1], "--bench");
	int need_dev = argc > 1 && !strcmp(argv[1], "--require-device");
	int ndev = 0;
	struct runner r;
	size_t nt[] = { 1, 3, 64 };
	unsigned i;

	if (!IBC_CUDA_BUILT)
		tap_skip_all("built without CUDA");
	ibc_cuda_device_count(&ndev);
	if (do_bench) {
		if (ndev < 1)
			tap_skip_all("--bench needs a CUDA device");
		ibc_cuda_set_device(0);
		bench();
		return tap_done();
	}
	if (ndev < 1 && need_dev)
		tap_skip_all("--require-device: no CUDA device");
	if (ndev < 1) {
		tap_diag("no CUDA device: the kernels' code runs on the CPU (emulation)");
		for (i = 0; i < IBC_ARRAY_SIZE(nt); i++) {
			char what[64];

			r.device = 0;
			r.nthreads = nt[i];
			snprintf(what, sizeof(what), "emulated, %zu thread(s)", nt[i]);
			check_all(&r, small, IBC_ARRAY_SIZE(small), what);
		}
		return tap_done();
	}
	ibc_cuda_set_device(0);
	r.device = 1;
	r.nthreads = 0;
	check_all(&r, small, IBC_ARRAY_SIZE(small), "device");
	check_all(&r, large, IBC_ARRAY_SIZE(large), "device, large");
	return tap_done();
}
