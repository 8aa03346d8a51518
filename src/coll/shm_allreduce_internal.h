/* SPDX-License-Identifier: MIT */
/*
 * shm_allreduce_internal.h - the shm all-reduce's segment layout and state,
 * shared by the segment path (shm_allreduce.c) and the single-copy path
 * (shm_allreduce_cma.c). Not installed; coll/ only.
 */
#ifndef IBC_COLL_SHM_ALLREDUCE_INTERNAL_H
#define IBC_COLL_SHM_ALLREDUCE_INTERNAL_H

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "coll/algo.h"

#define SHMAR_MAGIC 0x69626373686d6172ull /* "ibcshmar" */
#define SHMAR_TAG IBC_NET_TAG_SHMAR
#define SHMAR_FAST_POLLS 32  /* polls of a wait before its first clock read */

/* a buffer of a single-copy call, when it lies in ibc_mem_alloc() memory (a memfd) */
struct shmar_share {
	uint64_t id;            /* the allocation's id in its process (base/memreg.h); 0: none */
	uint64_t start;         /* its start, its owner's address space */
	uint64_t len;           /* its length, bytes */
	int32_t fd;             /* its memfd in the owner: /proc/<pid>/fd/<fd> */
	int32_t pad;
};

/* a peer's allocation mapped here (struct ibc_shmar.maps) */
struct shmar_map {
	int peer;
	int failed;             /* could not be mapped: cross-memory attach instead */
	uint64_t id;            /* 0: a free slot */
	char *base;
	size_t len;
	uint64_t used;          /* tick of the last call that used it (LRU) */
};

/*
 * One rank's arrival for buffer parity b: its descriptor and, when the
 * call's input is at most SHMAR_INLINE_BYTES, the input itself, in one
 * cache line with the sequence number that publishes them (written last,
 * release). A peer's wait for the arrival thus fetches the descriptor and a
 * small input with the same line, where a separate counter, descriptor and
 * slab cost three transfers between cores (a ping-pong of two processes
 * pinned to the two vCPUs: 0.20-0.30 us a round against 0.33-0.50 us,
 * bench/RESULTS.md).
 */
#define SHMAR_INLINE_BYTES 24
struct shmar_post {
	uint64_t seq;           /* the last sequence number published in this parity */
	struct ibc_msg_desc desc;       /* the call of that sequence number */
	char data[SHMAR_INLINE_BYTES];  /* its input, when it is this small */
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct shmar_post) == 64, "a post is one cache line");

/*
 * one rank's counters and descriptors: written by that rank only, read by
 * all. Each group that a peer waits on has its own cache line, so that a
 * rank's writes to one (its announcement of the next collective, its copy-out
 * counter) do not take from its peers the line they poll for another.
 */
struct shmar_line {
	/* the arrivals: arrive = the larger seq of the two (arrivals are consecutive) */
	struct shmar_post post[2];
	/* counters of the chunked and single-copy paths */
	uint64_t reduced __attribute__((aligned(64)));  /* last sequence whose slice is in result */
	uint64_t done;          /* last sequence copied out */
	uint64_t abort;         /* last single-copy call this rank gave up (its error) */
	int32_t pid;
	int32_t left;           /* 1 once this rank destroyed (or aborted) the communicator,
				 * after its last arrival (release): ibc_shmar_leave() */
	/* the collective this rank is in (any algorithm): a seqlock, odd while written */
	uint64_t cur_gen __attribute__((aligned(64)));
	struct ibc_msg_desc cur;
	/*
	 * per buffer parity, a single-copy call's buffers: written at its
	 * sequence number, read by peers until they are done with it, and not
	 * written again before every rank is done with seq - 2, or was seen to
	 * arrive at seq - 1 (a rank that left a call early, for the ring,
	 * cannot overwrite what a slower one still reads)
	 */
	struct {
		uint64_t src;           /* this rank's input, its own address space */
		uint64_t dst;           /* ... and its output */
		struct shmar_share share[2];    /* the input [0] and the output [1] */
	} call[2] __attribute__((aligned(64)));
	uint64_t cma_probe;     /* address of its probe word (set-up) */
	uint64_t mapped[2];     /* per buffer parity: 1 if its last call larger than
				 * IBC_SHM_ALLREDUCE_SMALL_BYTES had both buffers in
				 * ibc_mem_alloc() memory (what it expects of the next) */
} __attribute__((aligned(64)));

struct shmar_hdr {
	uint64_t magic;
	uint64_t size;
	uint64_t chunk;
	uint64_t small_max;     /* rank 0's IBC_SHM_ALLREDUCE_SMALL_BYTES, adopted by all */
	uint64_t cma_min;       /* rank 0's IBC_SHM_ALLREDUCE_CMA_MIN_BYTES, adopted by all */
	uint64_t single_cma_min; /* rank 0's IBC_SHM_SINGLE_CMA_MIN_BYTES, adopted by all */
	uint64_t onestep_max;   /* rank 0's one-step limit of the other collectives (shm_small.c) */
	uint32_t nranks;
	uint32_t pad;
} __attribute__((aligned(64)));

struct shmar_msg {
	char name[96];
	uint64_t size;
	int32_t ok;
	int32_t pad;
};

/* struct ibc_shmar - a communicator's segment (coll->shmar) */
struct ibc_shmar {
	int failed;             /* set-up failed somewhere: use the ring */
	void *base;
	size_t size;
	size_t chunk;           /* C, bytes (multiple of 64) */
	size_t small_max;       /* IBC_SHM_ALLREDUCE_SMALL_BYTES */
	size_t cma_min;         /* single-copy from this size; SIZE_MAX: not on this communicator */
	size_t onestep_max;     /* all-gather, all-to-all, reduce-scatter: one step up to this
				 * largest buffer, bytes (shm_small.c) */
	size_t single_cma_min;  /* other collectives: by cross-memory attach from this many bytes
				 * read per peer (shm_single.c) */
	int n;
	struct shmar_hdr *hdr;
	struct shmar_line *line;
	char *slab;             /* slab[r][b] at slab + (2 r + b) C */
	char *result;           /* result[b] at result + b C */
	uint64_t seq;           /* last chunk sequence used (same on every rank) */
	uint64_t arrived_all;   /* last sequence at which this rank saw every rank arrive */
	uint64_t lazy_seq;      /* this rank's last call, left before every rank arrived
				 * (an eager broadcast): checked before its next arrival
				 * (ibc_shmar_settle()); 0: none */
	struct ibc_op lazy_op;  /* that call (a copy: its descriptor, for the wait's texts) */
	float *acc;             /* fp32 accumulator (IBC_ACCUM_FP32) */
	size_t acc_n;           /* its size, floats */
	uint64_t probe_word;    /* SHMAR_MAGIC: what peers' CMA probe reads */
	char *cma_buf;          /* single-copy path: 2 C bytes (a piece and its sum) */
	const char **srcs;      /* n source pointers of one reduction */
	struct shmar_map *maps; /* peers' ibc_mem_alloc() memory mapped here */
	int nmaps;
	int map_logged;         /* the first mapping (or failure) was logged */
	uint64_t map_tick;
	uint64_t my_mapped;     /* this rank's mapped[] value (kept across small calls) */
	int cur_b;              /* the single-copy call in progress: its buffer parity */
	uint64_t n_small;       /* calls by path (logged at destruction) */
	uint64_t n_seg;
	uint64_t n_single;
	uint64_t n_peer_mapped; /* single-copy calls x peers whose buffers were both mapped */
	uint64_t n_peer_cma;    /* ... and those reached by cross-memory attach */
	uint64_t n_asked;       /* other collectives that asked and ran the ring */
	uint64_t n_small_other; /* other collectives by the small path (shm_small.c) */
	uint64_t n_mid;         /* their calls below SINGLE_ASK_BYTES that did not ask */
	char **pin;             /* single-copy call: peer q's input mapped here, or NULL */
	char **pout;            /* ... and its output */
};

enum { F_ARRIVE, F_REDUCED, F_DONE };

static inline uint64_t line_get(const struct shmar_line *l, int f)
{
	uint64_t a;
	uint64_t b;

	if (f == F_REDUCED)
		return __atomic_load_n(&l->reduced, __ATOMIC_ACQUIRE);
	if (f == F_DONE)
		return __atomic_load_n(&l->done, __ATOMIC_ACQUIRE);
	a = __atomic_load_n(&l->post[0].seq, __ATOMIC_ACQUIRE);
	b = __atomic_load_n(&l->post[1].seq, __ATOMIC_ACQUIRE);
	return a > b ? a : b;
}

/*
 * counter @f of @l has reached @want: for the arrival, the post of @want's
 * parity (one cache line; it holds @want or a later sequence number of that
 * parity once the rank has arrived at @want, as every rank arrives at every
 * sequence number in order)
 */
static inline int line_reached(const struct shmar_line *l, int f, uint64_t want)
{
	if (f == F_ARRIVE)
		return __atomic_load_n(&l->post[want & 1].seq, __ATOMIC_ACQUIRE) >= want;
	return line_get(l, f) >= want;
}

/*
 * rank @q will never bring counter @f to @want: SHMAR_GONE_LEFT when it
 * left the communicator (ibc_shmar_leave(), after its last write; read
 * before its counter), SHMAR_GONE_EXITED when its process *@pid_p is gone
 * (its counter read again after the look at its pid: a process that
 * finished its part and exited is no error); 0 while it may still come
 */
enum { SHMAR_GONE_LEFT = 1, SHMAR_GONE_EXITED = 2 };
static inline int shmar_peer_gone(const struct shmar_line *l, int f, uint64_t want,
				  pid_t *pid_p)
{
	int left = __atomic_load_n(&l->left, __ATOMIC_ACQUIRE);

	*pid_p = (pid_t)__atomic_load_n(&l->pid, __ATOMIC_RELAXED);
	if (line_reached(l, f, want))
		return 0;
	if (left)
		return SHMAR_GONE_LEFT;
	if (*pid_p > 0 && kill(*pid_p, 0) != 0 && errno == ESRCH && !line_reached(l, f, want))
		return SHMAR_GONE_EXITED;
	return 0;
}

static inline void line_set(struct shmar_line *l, int f, uint64_t v)
{
	uint64_t *p = f == F_ARRIVE ? &l->post[v & 1].seq : f == F_REDUCED ? &l->reduced : &l->done;

	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* rank @q's slab of buffer parity @b */
static inline char *shmar_slab(const struct ibc_shmar *s, int q, int b)
{
	return s->slab + ((size_t)q * 2 + (size_t)b) * s->chunk;
}

/*
 * where rank @q's input of parity @b lies, for a call in which @q put
 * @nbytes (ibc_shmar_put()): inline in its post when at most
 * SHMAR_INLINE_BYTES, else its slab. A reader passes the writer's size,
 * which it knows once the descriptors agree (a broadcast's root puts N,
 * the others nothing, and only the root's input is read).
 */
static inline char *shmar_in(const struct ibc_shmar *s, int q, int b, size_t nbytes)
{
	return nbytes <= SHMAR_INLINE_BYTES ? s->line[q].post[b].data : shmar_slab(s, q, b);
}

/* shm_allreduce.c */
ibc_status_t ibc_shmar_put(struct ibc_coll *coll, struct ibc_shmar *s, const struct ibc_op *op,
			   uint64_t seq, const char *src, size_t nbytes);
const char *const *ibc_shmar_slab_srcs(struct ibc_shmar *s, int b, size_t off, size_t put_bytes);
ibc_status_t ibc_shmar_wait(struct ibc_coll *coll, struct ibc_shmar *s, const struct ibc_op *op,
			    int f, uint64_t want);
ibc_status_t ibc_shmar_wait_rank(struct ibc_coll *coll, struct ibc_shmar *s,
				 const struct ibc_op *op, int f, uint64_t want, int only);
ibc_status_t ibc_shmar_post(struct ibc_coll *coll, struct ibc_shmar *s, const struct ibc_op *op,
			    uint64_t seq, const char *src, size_t nbytes);
ibc_status_t ibc_shmar_settle(struct ibc_coll *coll, struct ibc_shmar *s);
/* @op's descriptor as announced and compared (shm_allreduce.c) */
void ibc_shmar_op_desc(const struct ibc_op *op, struct ibc_msg_desc *d);
ibc_status_t ibc_shmar_peer_check(struct ibc_coll *coll, const struct ibc_shmar *s, int q,
				  const struct ibc_msg_desc *mine, int f, uint64_t want);
ibc_status_t ibc_shmar_check_desc_rank(struct ibc_coll *coll, struct ibc_shmar *s, int b, int only);

/*
 * shmar_parity_free() - wait until this rank may write buffer parity
 * @seq & 1 again (its post, slab and call buffers): every rank is past
 * @seq - 2 by its done counter, which this rank knows without looking when
 * it saw every rank arrive at @seq - 1 (a rank arrives at k only after its
 * last read of k - 1 and earlier; see ibc_shmar_put()). An eager call left
 * before that is settled first (ibc_shmar_settle()).
 * Return: IBC_OK, or as ibc_shmar_wait() and ibc_shmar_settle().
 */
static inline ibc_status_t shmar_parity_free(struct ibc_coll *coll, struct ibc_shmar *s,
					     const struct ibc_op *op, uint64_t seq)
{
	if (s->lazy_seq) {
		ibc_status_t st = ibc_shmar_settle(coll, s);

		if (st != IBC_OK)
			return st;
	}
	if (seq > 2 && s->arrived_all + 1 < seq)
		return ibc_shmar_wait(coll, s, op, F_DONE, seq - 2);
	return IBC_OK;
}
ibc_status_t ibc_shmar_acc(struct ibc_coll *coll, struct ibc_shmar *s, size_t cnt);
ibc_status_t ibc_shmar_check_desc(struct ibc_coll *coll, struct ibc_shmar *s, int b);
ibc_status_t ibc_shmar_reduce(struct ibc_coll *coll, struct ibc_shmar *s, const struct ibc_op *op,
			      char *dst, const char *const *src, size_t cnt, int accum);

/* shm_allreduce_cma.c */
void ibc_shmar_unmap_all(struct ibc_shmar *s);
int ibc_shmar_xfer(pid_t pid, void *local, uint64_t remote, size_t len, int write);
ibc_status_t ibc_shmar_xfer_fail(struct ibc_coll *coll, int q, int write, const void *local,
				 size_t len, const char *what);
ibc_status_t ibc_shmar_reduce_piece(struct ibc_coll *coll, struct ibc_shmar *s,
				    const struct ibc_op *op, const char *in, char *res, size_t boff,
				    size_t cnt, size_t esz, int accum);
ibc_status_t ibc_shmar_single_begin(struct ibc_coll *coll, struct ibc_shmar *s,
				    const struct ibc_op *op, const void *in, size_t in_bytes,
				    void *out, size_t out_bytes, uint64_t *seq_p);
void ibc_shmar_single_count(struct ibc_coll *coll, struct ibc_shmar *s);
ibc_status_t ibc_shmar_single_abort(struct ibc_coll *coll, struct ibc_shmar *s, uint64_t seq,
				    ibc_status_t st);
ibc_status_t ibc_shmar_single_end(struct ibc_coll *coll, struct ibc_shmar *s,
				  const struct ibc_op *op, uint64_t seq);
ibc_status_t ibc_shmar_cma_agree(struct ibc_coll *coll, struct ibc_shmar *s);
int ibc_shmar_cma_mapped(const void *in, const void *out, size_t nbytes);
int ibc_shmar_cma_expect(const struct ibc_shmar *s);
ibc_status_t ibc_shmar_cma_allreduce(struct ibc_coll *coll, struct ibc_shmar *s,
				     const struct ibc_op *op, const char *in, char *out,
				     size_t nbytes, int accum);

#endif
