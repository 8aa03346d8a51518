/* SPDX-License-Identifier: MIT */
/*
 * bench_common.c - collectives, size conventions, bandwidth arithmetic,
 * statistics and option parsing of ibc_bench (declared in bench_common.h).
 * Bus-bandwidth factors and size conventions follow nccl-tests'
 * doc/PERFORMANCE.md. Pure functions: no I/O, no library calls.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/coll_kind.h"
#include "bench_common.h"

/*
 * The library's operation kind of each benchmarked collective: names,
 * nccl-tests aliases and properties come from the one list of kinds
 * (src/base/coll_kinds.def). sendrecv, a send and a receive per rank, is
 * the benchmark's own.
 */
static const int bench_kind[BENCH_COLL_COUNT] = {
	[BENCH_ALLREDUCE] = IBC_COLL_ALLREDUCE,
	[BENCH_BROADCAST] = IBC_COLL_BROADCAST,
	[BENCH_REDUCE] = IBC_COLL_REDUCE,
	[BENCH_ALLGATHER] = IBC_COLL_ALLGATHER,
	[BENCH_REDUCE_SCATTER] = IBC_COLL_REDUCE_SCATTER,
	[BENCH_ALLTOALL] = IBC_COLL_ALLTOALL,
	[BENCH_SENDRECV] = IBC_COLL_SEND,
	[BENCH_BARRIER] = IBC_COLL_BARRIER,
};

const char *bench_coll_name(int coll)
{
	if (coll == BENCH_SENDRECV)
		return "sendrecv";
	return coll >= 0 && coll < BENCH_COLL_COUNT ? ibc_coll_name(bench_kind[coll]) : "?";
}

int bench_coll_parse(const char *name, int *coll_p)
{
	int kind;
	int i;

	if (!strcasecmp(name, "sendrecv") || !strcasecmp(name, "send_recv")) {
		*coll_p = BENCH_SENDRECV;
		return 0;
	}
	kind = ibc_coll_parse(name);
	for (i = 0; i < BENCH_COLL_COUNT; i++) {
		if (i != BENCH_SENDRECV && bench_kind[i] == kind) {
			*coll_p = i;
			return 0;
		}
	}
	return -1;
}

int bench_coll_reduces(int coll)
{
	return coll >= 0 && coll < BENCH_COLL_COUNT && ibc_coll_reduces(bench_kind[coll]);
}

int bench_coll_rooted(int coll)
{
	return coll >= 0 && coll < BENCH_COLL_COUNT && ibc_coll_has_root(bench_kind[coll]);
}

double bench_busbw_factor(int coll, int nranks)
{
	double n = nranks;

	if (nranks < 1)
		return 0.0;
	switch (coll) {
	case BENCH_ALLREDUCE:
		return 2.0 * (n - 1.0) / n;
	case BENCH_ALLGATHER:
	case BENCH_REDUCE_SCATTER:
	case BENCH_ALLTOALL:
		return (n - 1.0) / n;
	case BENCH_BROADCAST:
	case BENCH_REDUCE:
	case BENCH_SENDRECV:
		return 1.0;
	default:
		return 0.0;
	}
}

double bench_floor_traffic(int coll, int nranks, uint64_t bytes)
{
	double n = nranks;
	double N = (double)bytes;

	if (nranks < 2 && coll != BENCH_SENDRECV)
		return 0.0;
	switch (coll) {
	case BENCH_ALLREDUCE:
	case BENCH_BROADCAST:
	case BENCH_SENDRECV:
		return 2.0 * N;
	case BENCH_ALLGATHER:
	case BENCH_ALLTOALL:
		return 2.0 * (n - 1.0) / n * N;
	case BENCH_REDUCE_SCATTER:
	case BENCH_REDUCE:
		return N + N / n;
	default:
		return 0.0;
	}
}

double bench_floor_us(int coll, int nranks, uint64_t bytes, double copy_GBps, int nlocal,
		      int ncores)
{
	double share = ncores > 0 && nlocal > ncores ? (double)nlocal / ncores : 1.0;

	if (!(copy_GBps > 0.0))
		return 0.0;
	/* traffic / (2 x GB/s x 1e9 B/s) s = traffic / (2 x GB/s) / 1e3 us */
	return bench_floor_traffic(coll, nranks, bytes) / (2.0 * copy_GBps) / 1e3 * share;
}

int bench_coll_sizes(int coll, uint64_t req_bytes, int nranks, size_t esz, struct bench_sizes *sz)
{
	uint64_t n = (uint64_t)nranks;
	uint64_t per;

	if (nranks < 1 || esz == 0 || coll < 0 || coll >= BENCH_COLL_COUNT)
		return -1;
	memset(sz, 0, sizeof(*sz));
	switch (coll) {
	case BENCH_BARRIER:
		return 0;
	case BENCH_ALLGATHER:
	case BENCH_REDUCE_SCATTER:
	case BENCH_ALLTOALL:
		per = req_bytes / esz / n;      /* elements per rank (per peer) */
		if (per > UINT64_MAX / n / esz)
			return -1;
		sz->arg_count = per;
		sz->count = per * n;
		sz->bytes = sz->count * esz;
		if (coll == BENCH_ALLGATHER) {
			sz->send_bytes = per * esz;
			sz->recv_bytes = sz->bytes;
		} else if (coll == BENCH_REDUCE_SCATTER) {
			sz->send_bytes = sz->bytes;
			sz->recv_bytes = per * esz;
		} else {
			sz->send_bytes = sz->bytes;
			sz->recv_bytes = sz->bytes;
		}
		return 0;
	default:
		sz->count = req_bytes / esz;
		sz->arg_count = sz->count;
		sz->bytes = sz->count * esz;
		sz->send_bytes = sz->bytes;
		sz->recv_bytes = sz->bytes;
		return 0;
	}
}

double bench_algbw_GBps(uint64_t bytes, double time_us)
{
	if (!(time_us > 0.0))
		return 0.0;
	/* bytes / (time_us * 1e-6 s) / 1e9 = bytes / time_us / 1e3 */
	return (double)bytes / time_us / 1e3;
}

double bench_busbw_GBps(int coll, int nranks, uint64_t bytes, double time_us)
{
	return bench_algbw_GBps(bytes, time_us) * bench_busbw_factor(coll, nranks);
}

double bench_time_per_iter_us(uint64_t total_ns, uint64_t iters)
{
	if (!iters)
		return 0.0;
	return (double)total_ns / (double)iters / 1e3;
}

double bench_run_algbw_GBps(uint64_t bytes, uint64_t iters, uint64_t total_ns)
{
	if (!total_ns)
		return 0.0;
	/* bytes/ns == GB/s; the division comes first, in double, to stay in range */
	return (double)bytes * ((double)iters / (double)total_ns);
}

void bench_stats_across(const double *vals, int n, struct bench_rank_stats *st)
{
	double sum = 0.0;
	int i;

	st->min = st->max = n > 0 ? vals[0] : 0.0;
	for (i = 0; i < n; i++) {
		sum += vals[i];
		if (vals[i] < st->min)
			st->min = vals[i];
		if (vals[i] > st->max)
			st->max = vals[i];
	}
	st->mean = n > 0 ? sum / n : 0.0;
}

int bench_parse_bytes(const char *s, uint64_t *val_p)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		return -1;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v > (1ULL << 62) >> shift)
		return -1;
	*val_p = (uint64_t)v << shift;
	return 0;
}

uint64_t bench_next_size(uint64_t cur, uint64_t max, uint64_t factor, uint64_t step)
{
	uint64_t next;

	if (factor > 1) {
		if (cur == 0 || cur > max / factor)
			return 0;
		next = cur * factor;
	} else {
		if (step == 0 || cur > max - step)
			return 0;
		next = cur + step;
	}
	return next <= max ? next : 0;
}

static const struct {
	const char *name;
	const char *alias1;
	const char *alias2;
} dtype_names[IBC_DTYPE_COUNT] = {
	[IBC_INT8] = { "int8", "char", "i8" },
	[IBC_UINT8] = { "uint8", "u8", "uint8_t" },
	[IBC_INT32] = { "int32", "int", "i32" },
	[IBC_UINT32] = { "uint32", "u32", "uint" },
	[IBC_INT64] = { "int64", "i64", "long" },
	[IBC_UINT64] = { "uint64", "u64", "ulong" },
	[IBC_FLOAT16] = { "half", "float16", "fp16" },
	[IBC_BFLOAT16] = { "bfloat16", "bf16", "bfloat" },
	[IBC_FLOAT32] = { "float", "float32", "fp32" },
	[IBC_FLOAT64] = { "double", "float64", "fp64" },
};

int bench_dtype_parse(const char *name, ibc_dtype_t *dt_p)
{
	int i;

	for (i = 0; i < IBC_DTYPE_COUNT; i++) {
		if (!strcasecmp(name, dtype_names[i].name) || !strcasecmp(name, dtype_names[i].alias1) ||
		    !strcasecmp(name, dtype_names[i].alias2)) {
			*dt_p = (ibc_dtype_t)i;
			return 0;
		}
	}
	return -1;
}

const char *bench_dtype_name(ibc_dtype_t dt)
{
	return (unsigned)dt < IBC_DTYPE_COUNT ? dtype_names[dt].name : "?";
}

static const char *const op_names[IBC_REDOP_COUNT] = { "sum", "prod", "min", "max", "avg" };

int bench_op_parse(const char *name, ibc_redop_t *op_p)
{
	int i;

	for (i = 0; i < IBC_REDOP_COUNT; i++) {
		if (!strcasecmp(name, op_names[i])) {
			*op_p = (ibc_redop_t)i;
			return 0;
		}
	}
	return -1;
}

const char *bench_op_name(ibc_redop_t op)
{
	return (unsigned)op < IBC_REDOP_COUNT ? op_names[op] : "?";
}
