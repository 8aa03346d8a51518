/* SPDX-License-Identifier: MIT */
/*
 * test_bench_math.c - unit tests of ibc_bench's pure parts (bench_common.c,
 * bench_data.c), no network: bus-bandwidth arithmetic with nccl-tests'
 * factors and size conventions, time and bandwidth of very long runs
 * (no 64-bit overflow of iterations x size), statistics across ranks,
 * option parsing, the size sweep, 16-bit rounding, and the `-c 1` data:
 * results computed with the library's own reduction kernels from the
 * inputs of n simulated ranks must check with 0 wrong elements, and each
 * planted error must be counted exactly once.
 *
 * Floating-point expectations: values such as 15.72864 have no exact binary
 * form, so they are compared to within 1e-12 relative (a few ulps); values
 * that are exact in binary are compared with ==.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "coll/reduce.h"
#include "tap.h"

static int near(double got, double want)
{
	return fabs(got - want) <= 1e-12 * fabs(want);
}

static void test_paper_values(void)
{
	struct bench_sizes sz;

	/* the figure: 4 ranks, 1 MiB, 100 us, allreduce busbw 15.72864 GB/s */
	tap_ok(near(bench_algbw_GBps(1 << 20, 100.0), 10.48576),
	       "allreduce algbw 1 MiB / 100 us = 10.48576 GB/s (got %.9f)",
	       bench_algbw_GBps(1 << 20, 100.0));
	tap_ok(near(bench_busbw_GBps(BENCH_ALLREDUCE, 4, 1 << 20, 100.0), 15.72864),
	       "allreduce busbw 4 ranks 1 MiB 100 us = 15.72864 GB/s (got %.9f)",
	       bench_busbw_GBps(BENCH_ALLREDUCE, 4, 1 << 20, 100.0));

	/*
	 * allgather, 4 ranks, 1 MiB contributed per rank: nccl-tests' size is the
	 * OUTPUT (4 MiB), algbw = 4 MiB / 100 us = 41.94304 GB/s, busbw = algbw *
	 * 3/4 = 31.45728 GB/s (= each rank receives 3 MiB in 100 us).
	 */
	tap_is_int(bench_coll_sizes(BENCH_ALLGATHER, 4 << 20, 4, 4, &sz), 0, "allgather sizes");
	tap_is_int(sz.arg_count, 262144, "allgather 4 MiB on 4 ranks: sendcount 262144 floats (1 MiB)");
	tap_is_int(sz.send_bytes, 1 << 20, "allgather send buffer 1 MiB per rank");
	tap_is_int(sz.recv_bytes, 4 << 20, "allgather receive buffer 4 MiB");
	tap_is_int(sz.bytes, 4 << 20, "allgather row size is the output, 4 MiB");
	tap_is_int(sz.count, 1 << 20, "allgather count column = output elements");
	tap_ok(near(bench_busbw_GBps(BENCH_ALLGATHER, 4, sz.bytes, 100.0), 31.45728),
	       "allgather 1 MiB per rank, 4 ranks, 100 us: busbw 31.45728 GB/s (got %.9f)",
	       bench_busbw_GBps(BENCH_ALLGATHER, 4, sz.bytes, 100.0));
	/* ... and with 1 MiB of OUTPUT (-b 1M): 256 KiB per rank, busbw 7.86432 */
	bench_coll_sizes(BENCH_ALLGATHER, 1 << 20, 4, 4, &sz);
	tap_is_int(sz.send_bytes, 256 << 10, "allgather -b 1M on 4 ranks: 256 KiB per rank");
	tap_ok(near(bench_busbw_GBps(BENCH_ALLGATHER, 4, sz.bytes, 100.0), 7.86432),
	       "allgather 1 MiB output, 4 ranks, 100 us: busbw 7.86432 GB/s");
}

static void test_factors(void)
{
	static const int ns[] = { 1, 2, 3, 4, 8, 13 };
	size_t k;

	for (k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
		int n = ns[k];
		double nm1 = n - 1;

		tap_ok(bench_busbw_factor(BENCH_ALLREDUCE, n) == 2.0 * nm1 / n, "allreduce factor n=%d", n);
		tap_ok(bench_busbw_factor(BENCH_ALLGATHER, n) == nm1 / n, "allgather factor n=%d", n);
		tap_ok(bench_busbw_factor(BENCH_REDUCE_SCATTER, n) == nm1 / n,
		       "reduce_scatter factor n=%d", n);
		tap_ok(bench_busbw_factor(BENCH_ALLTOALL, n) == nm1 / n, "alltoall factor n=%d", n);
		tap_ok(bench_busbw_factor(BENCH_BROADCAST, n) == 1.0, "broadcast factor n=%d", n);
		tap_ok(bench_busbw_factor(BENCH_REDUCE, n) == 1.0, "reduce factor n=%d", n);
		tap_ok(bench_busbw_factor(BENCH_SENDRECV, n) == 1.0, "sendrecv factor n=%d", n);
		tap_ok(bench_busbw_factor(BENCH_BARRIER, n) == 0.0, "barrier factor n=%d", n);
	}
	tap_ok(bench_busbw_factor(BENCH_ALLREDUCE, 0) == 0.0, "factor of 0 ranks is 0");
	tap_ok(bench_algbw_GBps(1000, 0.0) == 0.0, "zero time gives 0, not inf");
	tap_ok(bench_algbw_GBps(1000, -1.0) == 0.0, "negative time gives 0");
	tap_ok(bench_algbw_GBps(1000000, 1000.0) == 1.0, "1e6 bytes in 1000 us = 1 GB/s exactly");
}

static void test_sizes(void)
{
	struct bench_sizes sz;

	tap_is_int(bench_coll_sizes(BENCH_ALLREDUCE, 1001, 3, 4, &sz), 0, "allreduce sizes");
	tap_is_int(sz.count, 250, "allreduce 1001 bytes of float: 250 elements");
	tap_is_int(sz.bytes, 1000, "allreduce row size rounded down to whole elements");
	tap_is_int(sz.arg_count, 250, "allreduce call count");

	bench_coll_sizes(BENCH_REDUCE_SCATTER, 1000, 3, 4, &sz);
	tap_is_int(sz.arg_count, 83, "reduce_scatter 1000 bytes / 3 ranks: recvcount 83");
	tap_is_int(sz.bytes, 996, "reduce_scatter row size = input 3 * 83 * 4");
	tap_is_int(sz.send_bytes, 996, "reduce_scatter send = whole input");
	tap_is_int(sz.recv_bytes, 332, "reduce_scatter receive = one block");

	bench_coll_sizes(BENCH_ALLTOALL, 1 << 20, 4, 8, &sz);
	tap_is_int(sz.arg_count, 32768, "alltoall 1 MiB of double on 4 ranks: 32768 per peer");
	tap_is_int(sz.send_bytes, 1 << 20, "alltoall send = whole buffer");
	tap_is_int(sz.recv_bytes, 1 << 20, "alltoall receive = whole buffer");

	bench_coll_sizes(BENCH_ALLGATHER, 8, 4, 4, &sz);
	tap_is_int(sz.arg_count, 0, "allgather 8 bytes on 4 ranks: no whole float per rank");

	bench_coll_sizes(BENCH_BARRIER, 1 << 20, 4, 4, &sz);
	tap_is_int(sz.bytes, 0, "barrier moves no data");

	tap_is_int(bench_coll_sizes(BENCH_ALLREDUCE, 8, 0, 4, &sz), -1, "0 ranks rejected");
	tap_is_int(bench_coll_sizes(BENCH_ALLREDUCE, 8, 2, 0, &sz), -1, "0-byte element rejected");
	tap_is_int(bench_coll_sizes(BENCH_COLL_COUNT, 8, 2, 4, &sz), -1, "unknown collective rejected");
}

static void test_long_runs(void)
{
	/*
	 * 2^30 iterations of 1 TiB: bytes x iterations = 2^70 overflows 64 bits;
	 * in 2^57 ns the run moved 2^40 / 2^27 bytes per ns = 8192 GB/s, exactly.
	 */
	uint64_t tib = 1ULL << 40;
	uint64_t iters = 1ULL << 30;
	uint64_t ns = 1ULL << 57;
	uint64_t naive = tib * iters / ns;      /* what 64-bit integer arithmetic gives */

	tap_ok(bench_run_algbw_GBps(tib, iters, ns) == 8192.0,
	       "1 TiB x 2^30 iterations in 2^57 ns: 8192 GB/s (got %.3f)",
	       bench_run_algbw_GBps(tib, iters, ns));
	tap_ok(naive != 8192, "the naive 64-bit product would be wrong here (%llu)",
	       (unsigned long long)naive);
	tap_ok(bench_run_algbw_GBps(tib, iters, 0) == 0.0, "zero run time gives 0");
	/* per-iteration time of a run longer than 2^63 ns */
	tap_ok(bench_time_per_iter_us(1ULL << 63, 1ULL << 33) == 1073741.824,
	       "2^63 ns over 2^33 iterations = 1073741.824 us");
	tap_ok(bench_time_per_iter_us(UINT64_MAX, 1) > 1.8e13, "UINT64_MAX ns stays positive");
	tap_ok(bench_time_per_iter_us(12345, 0) == 0.0, "0 iterations gives 0");
	tap_ok(bench_time_per_iter_us(20000, 20) == 1.0, "20 iterations in 20000 ns = 1 us each");
}

static void test_stats(void)
{
	double v[5] = { 4.0, 1.0, 7.0, 2.0, 6.0 };
	struct bench_rank_stats st;

	bench_stats_across(v, 5, &st);
	tap_ok(st.mean == 4.0, "mean of 4 1 7 2 6 is 4");
	tap_ok(st.min == 1.0, "min 1");
	tap_ok(st.max == 7.0, "max 7");
	bench_stats_across(v, 1, &st);
	tap_ok(st.mean == 4.0 && st.min == 4.0 && st.max == 4.0, "one rank: all equal");
}

static void test_parse(void)
{
	uint64_t v = 0;
	ibc_dtype_t dt;
	ibc_redop_t op;
	int c;

	tap_ok(bench_parse_bytes("8", &v) == 0 && v == 8, "parse 8");
	tap_ok(bench_parse_bytes("64M", &v) == 0 && v == 64ULL << 20, "parse 64M");
	tap_ok(bench_parse_bytes("1G", &v) == 0 && v == 1ULL << 30, "parse 1G");
	tap_ok(bench_parse_bytes("4k", &v) == 0 && v == 4096, "parse 4k");
	tap_ok(bench_parse_bytes("2MB", &v) == 0 && v == 2ULL << 20, "parse 2MB");
	tap_ok(bench_parse_bytes("abc", &v) == -1, "reject abc");
	tap_ok(bench_parse_bytes("-1", &v) == -1, "reject -1");
	tap_ok(bench_parse_bytes("5T", &v) == -1, "reject unknown suffix");
	tap_ok(bench_parse_bytes("", &v) == -1, "reject empty");
	tap_ok(bench_parse_bytes("99999999999G", &v) == -1, "reject above 2^62");

	tap_ok(bench_dtype_parse("float", &dt) == 0 && dt == IBC_FLOAT32, "dtype float");
	tap_ok(bench_dtype_parse("bf16", &dt) == 0 && dt == IBC_BFLOAT16, "dtype bf16");
	tap_ok(bench_dtype_parse("half", &dt) == 0 && dt == IBC_FLOAT16, "dtype half");
	tap_ok(bench_dtype_parse("double", &dt) == 0 && dt == IBC_FLOAT64, "dtype double");
	tap_ok(bench_dtype_parse("int8", &dt) == 0 && dt == IBC_INT8, "dtype int8");
	tap_ok(bench_dtype_parse("quad", &dt) == -1, "reject quad");
	tap_ok(bench_op_parse("avg", &op) == 0 && op == IBC_AVG, "op avg");
	tap_ok(bench_op_parse("mean", &op) == -1, "reject op mean");
	tap_ok(bench_coll_parse("all_reduce", &c) == 0 && c == BENCH_ALLREDUCE,
	       "nccl-tests name all_reduce");
	tap_ok(bench_coll_parse("reduce_scatter", &c) == 0 && c == BENCH_REDUCE_SCATTER, "reduce_scatter");
	tap_ok(bench_coll_parse("sendrecv", &c) == 0 && c == BENCH_SENDRECV, "sendrecv");
	tap_ok(bench_coll_parse("gather", &c) == -1, "reject gather");
	tap_is_str(bench_coll_name(BENCH_ALLTOALL), "alltoall", "name of alltoall");
}

static void test_sweep(void)
{
	uint64_t b;
	int n = 0;
	uint64_t last = 0;

	/* the quick mode: -b 8 -e 64M -f 4 gives 8, 32, ..., 32M: 12 sizes */
	for (b = 8; b; b = bench_next_size(b, 64ULL << 20, 4, 0)) {
		n++;
		last = b;
	}
	tap_is_int(n, 12, "-b 8 -e 64M -f 4: 12 sizes");
	tap_is_int(last, 32ULL << 20, "last size 32M");
	n = 0;
	for (b = 1 << 20; b; b = bench_next_size(b, 4 << 20, 1, 1 << 20))
		n++;
	tap_is_int(n, 4, "-b 1M -e 4M -i 1M: 4 sizes");
	tap_is_int(bench_next_size(8, 8, 2, 0), 0, "min == max: one size");
	tap_is_int(bench_next_size(8, 100, 1, 0), 0, "no factor, no step: one size");
	tap_is_int(bench_next_size(1ULL << 62, UINT64_MAX, 4, 0), 0, "no overflow past 2^64");
	tap_is_int(bench_next_size(UINT64_MAX - 5, UINT64_MAX, 1, 10), 0, "no step overflow");
}

static void test_f16(void)
{
	tap_is_int(bench_f32_to_f16(1.0f), 0x3c00, "fp16(1)");
	tap_is_int(bench_f32_to_f16(-2.0f), 0xc000, "fp16(-2)");
	tap_is_int(bench_f32_to_f16(65504.0f), 0x7bff, "fp16(65504) largest finite");
	tap_is_int(bench_f32_to_f16(65520.0f), 0x7c00, "fp16(65520) rounds to inf (even)");
	tap_is_int(bench_f32_to_f16(65519.0f), 0x7bff, "fp16(65519) rounds down");
	tap_is_int(bench_f32_to_f16(0x1p-24f), 0x0001, "fp16 smallest subnormal");
	tap_is_int(bench_f32_to_f16(0x1p-25f), 0x0000, "fp16 half the smallest subnormal ties to 0");
	tap_is_int(bench_f32_to_f16(0x1p-14f), 0x0400, "fp16 smallest normal");
	tap_is_int(bench_f32_to_f16(1.0f / 3.0f), 0x3555, "fp16(1/3)");
	tap_is_int(bench_f32_to_f16(2049.0f), 0x6800, "fp16(2049) ties to even 2048");
	tap_is_int(bench_f32_to_f16(2051.0f), 0x6802, "fp16(2051) ties to even 2052");
	tap_is_int(bench_f32_to_bf16(1.0f), 0x3f80, "bf16(1)");
	tap_is_int(bench_f32_to_bf16(1.0f / 3.0f), 0x3eab, "bf16(1/3)");
	tap_is_int(bench_f32_to_bf16(257.0f), 0x4380, "bf16(257) ties to even 256");
	tap_is_int(bench_f32_to_bf16(259.0f), 0x4382, "bf16(259) ties to even 260");
}

/* ------------------------------------------------------------------------ */
/* -c 1 data: simulate n ranks, compute results with the library's kernels  */
/* ------------------------------------------------------------------------ */

static size_t esz_of(ibc_dtype_t dt)
{
	size_t s = 0;

	ibc_dtype_size(dt, &s);
	return s;
}

/* reducing collectives: every dtype x op x n; 0 wrong, then one planted error */
static void test_data_reduce(void)
{
	static const int ns[] = { 1, 2, 3, 5, 8 };
	const uint64_t count = 1003;
	size_t k;
	int dt;
	int op;
	int bad = 0;
	int checked = 0;

	for (k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
		int n = ns[k];

		for (dt = 0; dt < IBC_DTYPE_COUNT; dt++) {
			size_t esz = esz_of((ibc_dtype_t)dt);
			char *in = malloc(count * esz * (size_t)n);
			char *res = malloc(count * esz * (size_t)n);

			for (op = 0; op < IBC_REDOP_COUNT; op++) {
				struct bench_data d = {
					.coll = BENCH_ALLREDUCE, .dtype = (ibc_dtype_t)dt,
					.op = (ibc_redop_t)op, .nranks = n, .count = count,
				};
				int r;
				uint64_t w;

				/* allreduce: reduce rank 0 .. n-1 in order, as a chain would */
				for (r = 0; r < n; r++) {
					d.rank = r;
					bench_data_fill(&d, in + (size_t)r * count * esz);
				}
				memcpy(res, in, count * esz);
				for (r = 1; r < n; r++)
					ibc_reduce_local(res, in + (size_t)r * count * esz, count,
							 (ibc_dtype_t)dt, (ibc_redop_t)op);
				if (op == IBC_AVG)
					ibc_reduce_avg_finalize(res, count, (ibc_dtype_t)dt, n);
				d.rank = n - 1;
				w = bench_data_check(&d, res, 0);
				checked++;
				if (w != 0) {
					bad++;
					tap_diag("allreduce %s %s n=%d: %llu wrong", bench_dtype_name((ibc_dtype_t)dt),
						 bench_op_name((ibc_redop_t)op), n, (unsigned long long)w);
				}
				/* plant one error: flip the lowest bit of element 17 */
				res[17 * esz] ^= 1;
				if (bench_data_check(&d, res, 0) != 1) {
					bad++;
					tap_diag("planted error in %s %s n=%d not counted once",
						 bench_dtype_name((ibc_dtype_t)dt),
						 bench_op_name((ibc_redop_t)op), n);
				}
				/* reduce: only the root's buffer is checked */
				d.coll = BENCH_REDUCE;
				d.root = 0;
				d.rank = n > 1 ? 1 : 0;
				if (n > 1 && bench_data_check(&d, res, 0) != 0)
					bad++;
				d.rank = 0;
				if (bench_data_check(&d, res, 0) != 1)
					bad++;
			}
			free(in);
			free(res);
		}
	}
	tap_ok(bad == 0, "reduce data: %d dtype/op/n cases exact vs the library, planted errors counted",
	       checked);
}

static void test_data_reduce_scatter(void)
{
	const int n = 3;
	const uint64_t c = 257;
	size_t esz = 4;
	char *in = malloc(c * esz * n * n);
	char *blk = malloc(c * esz);
	int r;
	int b;
	uint64_t wrong = 0;

	for (r = 0; r < n; r++) {
		struct bench_data d = { .coll = BENCH_REDUCE_SCATTER, .dtype = IBC_INT32, .op = IBC_MAX,
					.nranks = n, .rank = r, .count = c };

		bench_data_fill(&d, in + (size_t)r * c * n * esz);
	}
	for (b = 0; b < n; b++) {
		struct bench_data d = { .coll = BENCH_REDUCE_SCATTER, .dtype = IBC_INT32, .op = IBC_MAX,
					.nranks = n, .rank = b, .count = c };

		memcpy(blk, in + (size_t)b * c * esz, c * esz);
		for (r = 1; r < n; r++)
			ibc_reduce_local(blk, in + ((size_t)r * c * n + (size_t)b * c) * esz, c, IBC_INT32,
					 IBC_MAX);
		wrong += bench_data_check(&d, blk, 0);
		/* the wrong block (another rank's) must not pass */
		d.rank = (b + 1) % n;
		tap_ok(bench_data_check(&d, blk, 0) > c / 2, "reduce_scatter: block %d fails as block %d",
		       b, d.rank);
	}
	tap_is_int(wrong, 0, "reduce_scatter int32 max, 3 ranks: 0 wrong");
	free(in);
	free(blk);
}

/* the data-moving collectives, done with memcpy from the n send buffers */
static void test_data_moves(void)
{
	const int n = 4;
	const uint64_t c = 100;
	const ibc_dtype_t dt = IBC_BFLOAT16;
	size_t esz = 2;
	char *send = calloc((size_t)n * n * c, esz);
	char *recv = calloc((size_t)n * n * c, esz);
	struct bench_data d = { .dtype = dt, .op = IBC_SUM, .nranks = n, .count = c, .root = 2 };
	int r;
	int p;
	int me = 1;

	/* allgather: rank me receives every rank's block in order */
	d.coll = BENCH_ALLGATHER;
	for (r = 0; r < n; r++) {
		d.rank = r;
		bench_data_fill(&d, send + (size_t)r * c * esz);
	}
	memcpy(recv, send, (size_t)n * c * esz);
	d.rank = me;
	tap_is_int(bench_data_check(&d, recv, 0), 0, "allgather: 0 wrong");
	memcpy(recv, send + c * esz, c * esz);  /* block 0 replaced by block 1 */
	tap_ok(bench_data_check(&d, recv, 0) > c / 2, "allgather: a misplaced block is caught");

	/* broadcast from root 2 */
	d.coll = BENCH_BROADCAST;
	memcpy(recv, send + 2 * c * esz, c * esz);
	tap_is_int(bench_data_check(&d, recv, 0), 0, "broadcast: 0 wrong");
	memcpy(recv, send + 1 * c * esz, c * esz);
	tap_ok(bench_data_check(&d, recv, 0) > c / 2, "broadcast: data from the wrong root is caught");
	d.rank = 2;
	tap_is_int(bench_data_check(&d, recv, 1), 0, "MPI_Bcast root is not checked");
	d.rank = me;

	/* sendrecv: from rank me-1 */
	d.coll = BENCH_SENDRECV;
	memcpy(recv, send + (size_t)(me - 1) * c * esz, c * esz);
	tap_is_int(bench_data_check(&d, recv, 0), 0, "sendrecv: 0 wrong");
	memcpy(recv, send + (size_t)(me + 1) * c * esz, c * esz);
	tap_ok(bench_data_check(&d, recv, 0) > c / 2, "sendrecv: data from the next rank is caught");

	/* alltoall: rank me's block p comes from block me of rank p */
	d.coll = BENCH_ALLTOALL;
	for (r = 0; r < n; r++) {
		d.rank = r;
		bench_data_fill(&d, send + (size_t)r * n * c * esz);
	}
	for (p = 0; p < n; p++)
		memcpy(recv + (size_t)p * c * esz, send + ((size_t)p * n * c + (size_t)me * c) * esz,
		       c * esz);
	d.rank = me;
	tap_is_int(bench_data_check(&d, recv, 0), 0, "alltoall: 0 wrong");
	bench_data_poison(recv, (size_t)n * c * esz);
	tap_is_int(bench_data_check(&d, recv, 0), (long long)(n * c),
		   "alltoall: a poisoned (stale) buffer is all wrong");
	free(send);
	free(recv);
}

static void test_values(void)
{
	struct bench_data d = { .coll = BENCH_ALLREDUCE, .dtype = IBC_INT8, .op = IBC_SUM,
				.nranks = 4 };
	int seen[7] = { 0 };
	int lo = 100;
	int hi = -100;
	uint64_t i;
	int all = 1;

	for (i = 0; i < 7000; i++) {
		int64_t v = bench_data_value(&d, (int)(i % 4), i);

		lo = v < lo ? (int)v : lo;
		hi = v > hi ? (int)v : hi;
		if (v >= -3 && v <= 3)
			seen[v + 3] = 1;
	}
	for (i = 0; i < 7; i++)
		all &= seen[i];
	tap_ok(lo == -3 && hi == 3 && all, "signed inputs cover -3..3 (got %d..%d)", lo, hi);
	d.dtype = IBC_UINT32;
	lo = 100;
	for (i = 0; i < 1000; i++)
		lo = bench_data_value(&d, 2, i) < lo ? (int)bench_data_value(&d, 2, i) : lo;
	tap_ok(lo == 0, "unsigned inputs start at 0");
	d.op = IBC_PROD;
	hi = 0;
	for (i = 0; i < 1000; i++) {
		int64_t v = bench_data_value(&d, 1, i);

		if (v != 1 && v != 2)
			hi = 99;
	}
	tap_ok(hi == 0, "PROD inputs are 1 or 2");
	d.op = IBC_SUM;
	tap_ok(bench_data_value(&d, 0, 5) != bench_data_value(&d, 7, 5) ||
	       bench_data_value(&d, 0, 6) != bench_data_value(&d, 7, 6) ||
	       bench_data_value(&d, 0, 9) != bench_data_value(&d, 7, 9),
	       "ranks 0 and 7 have different inputs");
}

/*
 * The floor (bench_floor_traffic(), bench_floor_us()): the figure,
 * 2 ranks, 64 MiB all-reduce, 4 x 32 MiB of traffic per rank, 21.6 GB/s
 * memcpy: 134217728 / 43.2e9 s = 3106.9 us; and the other collectives'
 * traffic on 4 ranks of 1 MiB, exact in binary.
 */
static void test_floor(void)
{
	const uint64_t M = 1u << 20;
	double want = 4.0 * 32 * M / (2 * 21.6e9) * 1e6;

	tap_ok(near(bench_floor_us(BENCH_ALLREDUCE, 2, 64 * M, 21.6, 2, 2), want),
	       "floor: 2 ranks 64 MiB all-reduce at 21.6 GB/s memcpy = %.1f us (got %.3f)", want,
	       bench_floor_us(BENCH_ALLREDUCE, 2, 64 * M, 21.6, 2, 2));
	tap_ok(near(bench_floor_us(BENCH_ALLREDUCE, 4, 64 * M, 21.6, 4, 2), 2 * want),
	       "floor: 4 ranks on 2 cores take twice as long per rank");
	tap_ok(bench_floor_traffic(BENCH_ALLGATHER, 4, M) == 1.5 * M &&
	       bench_floor_traffic(BENCH_ALLTOALL, 4, M) == 1.5 * M &&
	       bench_floor_traffic(BENCH_REDUCE_SCATTER, 4, M) == 1.25 * M &&
	       bench_floor_traffic(BENCH_REDUCE, 4, M) == 1.25 * M &&
	       bench_floor_traffic(BENCH_BROADCAST, 4, M) == 2.0 * M &&
	       bench_floor_traffic(BENCH_SENDRECV, 1, M) == 2.0 * M,
	       "floor traffic on 4 ranks of 1 MiB: all-gather/all-to-all 1.5 MiB, reduce-scatter/reduce 1.25 MiB, broadcast/sendrecv 2 MiB");
	tap_ok(bench_floor_traffic(BENCH_BARRIER, 4, M) == 0 &&
	       bench_floor_traffic(BENCH_ALLREDUCE, 1, M) == 0 &&
	       bench_floor_us(BENCH_ALLREDUCE, 2, M, 0.0, 2, 2) == 0,
	       "no floor: barrier, one rank, no memcpy figure");
}

int main(void)
{
	test_floor();
	test_paper_values();
	test_factors();
	test_sizes();
	test_long_runs();
	test_stats();
	test_parse();
	test_sweep();
	test_f16();
	test_values();
	test_data_reduce();
	test_data_reduce_scatter();
	test_data_moves();
	return tap_done();
}
