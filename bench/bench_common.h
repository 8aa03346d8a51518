/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - the pure parts of ibc_bench, kept apart from the
 * launcher so that unit tests can check them without a network: the
 * collectives and their nccl-tests size conventions and bus-bandwidth
 * factors, bandwidth and time arithmetic, statistics across ranks, option
 * parsing helpers (bench_common.c), and the input values with exactly
 * known results used by `-c 1` (bench_data.c).
 *
 * Size convention (nccl-tests, doc/PERFORMANCE.md): the "bytes" of a row is
 * the size of the largest buffer a rank touches:
 *   allreduce, broadcast, reduce, sendrecv: count * elemsize (the one buffer);
 *   allgather:      the OUTPUT, nranks * sendcount * elemsize;
 *   reduce_scatter: the INPUT,  nranks * recvcount * elemsize;
 *   alltoall:       the whole send (= receive) buffer, nranks * count * elemsize.
 * algbw = bytes / time and busbw = algbw * factor, with 1 GB = 1e9 bytes:
 *   allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n;
 *   broadcast, reduce, sendrecv 1; barrier moves no data (0).
 */
#ifndef IBC_BENCH_COMMON_H
#define IBC_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "ibcoll.h"

/* enum bench_coll - what ibc_bench can time; order = order of `all` */
enum bench_coll {
	BENCH_ALLREDUCE = 0,
	BENCH_BROADCAST = 1,
	BENCH_REDUCE = 2,
	BENCH_ALLGATHER = 3,
	BENCH_REDUCE_SCATTER = 4,
	BENCH_ALLTOALL = 5,
	BENCH_SENDRECV = 6,
	BENCH_BARRIER = 7,
	BENCH_COLL_COUNT
};

/**
 * struct bench_sizes - buffers and arguments of one row.
 * @bytes:      the row's size in bytes (nccl-tests convention, see above);
 *              the requested size rounded down to whole elements per rank.
 * @count:      @bytes / elemsize, the "count" column (nccl-tests prints it so).
 * @arg_count:  the count argument of the ibcoll/MPI call: elements per rank
 *              for allgather (sendcount) and reduce_scatter (recvcount),
 *              per peer for alltoall, else @count. 0 means the row is skipped
 *              (fewer bytes than nranks elements), except for the barrier.
 * @send_bytes: bytes of the send buffer each rank needs.
 * @recv_bytes: bytes of the receive buffer each rank needs.
 */
struct bench_sizes {
	uint64_t bytes;
	uint64_t count;
	uint64_t arg_count;
	uint64_t send_bytes;
	uint64_t recv_bytes;
};

/* struct bench_rank_stats - one number measured on every rank, summarised */
struct bench_rank_stats {
	double mean;            /* arithmetic mean over ranks */
	double min;
	double max;
};

/**
 * struct bench_call - one call of a timed collective, the same for ibcoll and MPI.
 * @coll:    enum bench_coll.
 * @sendbuf: [in]  struct bench_sizes.send_bytes bytes.
 * @recvbuf: [out] struct bench_sizes.recv_bytes bytes.
 * @count:   the call's count argument, ELEMENTS (struct bench_sizes.arg_count).
 * @dtype:   element type.
 * @op:      reduction, for reducing collectives.
 * @root:    root of broadcast and reduce.
 * @rank:    this rank.
 * @nranks:  ranks in the communicator.
 */
struct bench_call {
	int coll;
	const void *sendbuf;
	void *recvbuf;
	uint64_t count;
	ibc_dtype_t dtype;
	ibc_redop_t op;
	int root;
	int rank;
	int nranks;
};

/* collective names: "allreduce", ...; parse also accepts nccl-tests' "all_reduce" forms */
const char *bench_coll_name(int coll);
int bench_coll_parse(const char *name, int *coll_p);
int bench_coll_reduces(int coll);       /* takes an op */
int bench_coll_rooted(int coll);        /* takes a root */

/*
 * bench_busbw_factor() - nccl-tests' bus-bandwidth factor of @coll on
 * @nranks ranks (see the file comment); 0 for the barrier, and 0 for any
 * collective but broadcast/reduce/sendrecv on one rank (nothing crosses a bus).
 */
double bench_busbw_factor(int coll, int nranks);

/*
 * bench_floor_traffic() - the memory traffic, bytes read plus bytes
 * written, that one rank of @nranks on one host must cause at the least
 * for @coll of a row of @bytes (nccl-tests' size convention, above) when
 * every rank can read and write its peers' buffers (a mapping or a
 * single-copy kernel transfer): all-reduce 2 N (a rank reduces N / n of n
 * inputs, N read, and writes its reduced N / n into n outputs, N written),
 * all-gather and all-to-all 2 (n-1)/n N (a rank copies the n-1 blocks it
 * lacks), reduce-scatter and reduce N + N / n (n blocks of N / n read, N / n
 * written; reduce spread over the ranks), broadcast and sendrecv 2 N (the
 * receiver's copy; for broadcast the busiest rank is a non-root), barrier
 * and one rank 0 (nothing crosses). The floor of a row is this / (2 x the
 * measured memcpy rate: a copy of B bytes is 2 B of traffic) x the ranks
 * per core (bench_floor_us()).
 */
double bench_floor_traffic(int coll, int nranks, uint64_t bytes);

/*
 * bench_floor_us() - the floor time of a row, us: bench_floor_traffic() /
 * (2 @copy_GBps) x max(1, @nlocal / @ncores) (ranks sharing a core each get
 * a share of its copy rate). @copy_GBps: one core's memcpy rate, 1e9 B/s of
 * bytes copied. 0 when it or the traffic is 0.
 */
double bench_floor_us(int coll, int nranks, uint64_t bytes, double copy_GBps, int nlocal,
		      int ncores);

/*
 * bench_coll_sizes() - fill @sz for a requested size of @req_bytes bytes of
 * @esz-byte elements on @nranks ranks. Returns 0, or -1 for bad arguments
 * (@nranks < 1, @esz == 0, or sizes that overflow 64 bits).
 */
int bench_coll_sizes(int coll, uint64_t req_bytes, int nranks, size_t esz, struct bench_sizes *sz);

/* algbw in GB/s (1e9 bytes/s) of @bytes moved in @time_us microseconds; 0 if time <= 0 */
double bench_algbw_GBps(uint64_t bytes, double time_us);
/* busbw in GB/s: bench_algbw_GBps() * bench_busbw_factor() */
double bench_busbw_GBps(int coll, int nranks, uint64_t bytes, double time_us);

/*
 * bench_time_per_iter_us() - mean time of one iteration, us, of @iters
 * iterations that took @total_ns nanoseconds together. Computed in double:
 * exact to 1 part in 2^53 for any 64-bit inputs; 0 when @iters is 0.
 */
double bench_time_per_iter_us(uint64_t total_ns, uint64_t iters);

/*
 * bench_run_algbw_GBps() - algbw of a whole run: @iters iterations of
 * @bytes bytes in @total_ns ns. Never forms the integer product
 * @bytes * @iters (which overflows 64 bits for long runs of large sizes).
 */
double bench_run_algbw_GBps(uint64_t bytes, uint64_t iters, uint64_t total_ns);

/* mean, min and max of @n values (@n >= 1) */
void bench_stats_across(const double *vals, int n, struct bench_rank_stats *st);

/*
 * bench_parse_bytes() - "8", "64K", "1M", "2G" (K/M/G: powers of 1024, as
 * nccl-tests) into bytes; 0 on success, -1 if malformed or above 2^62.
 */
int bench_parse_bytes(const char *s, uint64_t *val_p);

/*
 * bench_next_size() - next size of the sweep from @cur: * @factor when
 * @factor > 1, else + @step (nccl-tests' -f / -i). Returns 0 when the sweep
 * is over (the next size would exceed @max or cannot grow).
 */
uint64_t bench_next_size(uint64_t cur, uint64_t max, uint64_t factor, uint64_t step);

int bench_dtype_parse(const char *name, ibc_dtype_t *dt_p);
const char *bench_dtype_name(ibc_dtype_t dt);
int bench_op_parse(const char *name, ibc_redop_t *op_p);
const char *bench_op_name(ibc_redop_t op);

/* ------------------------------------------------------------------------ */
/* inputs with exactly known results (bench_data.c)                         */
/* ------------------------------------------------------------------------ */

/**
 * struct bench_data - what fill and check need to know about one row.
 * @coll:   enum bench_coll.
 * @dtype:  element type.
 * @op:     reduction (ignored by non-reducing collectives).
 * @nranks: ranks in the communicator.
 * @rank:   this rank.
 * @root:   root of broadcast/reduce.
 * @count:  the call's count argument (struct bench_sizes.arg_count).
 */
struct bench_data {
	int coll;
	ibc_dtype_t dtype;
	ibc_redop_t op;
	int nranks;
	int rank;
	int root;
	uint64_t count;
};

/*
 * bench_data_value() - the input of rank @r at element @i of its send
 * buffer: a pseudo-random small integer (hash of r and i) in [-3, 3] for
 * signed and floating types, [0, 6] for unsigned ones, and 1 or 2 for PROD.
 * Partial results stay exact in every dtype (|sum| <= 6 n needs n <= 42 for
 * 8-bit types, n <= 85 for bfloat16); integer wrap-around is modelled anyway.
 */
int64_t bench_data_value(const struct bench_data *d, int r, uint64_t i);

/* write this rank's inputs into @sendbuf (struct bench_sizes.send_bytes bytes) */
void bench_data_fill(const struct bench_data *d, void *sendbuf);

/*
 * bench_data_poison() - fill @nbytes of @recvbuf with a pattern that no
 * correct result equals (0x7f bytes), so that a check sees stale output.
 */
void bench_data_poison(void *recvbuf, size_t nbytes);

/*
 * bench_data_check() - number of elements of this rank's @recvbuf that
 * differ (bitwise) from the exact expected result. Reduce: only the root's
 * buffer is checked. @mpi_bcast_root_skip: for MPI_Bcast, whose root does
 * not write a receive buffer, skip the check on the root.
 */
uint64_t bench_data_check(const struct bench_data *d, const void *recvbuf, int mpi_bcast_root_skip);

/* bits of an fp32 value rounded to nearest even as IEEE binary16 / bfloat16 */
uint16_t bench_f32_to_f16(float f);
uint16_t bench_f32_to_bf16(float f);

#endif /* IBC_BENCH_COMMON_H */
