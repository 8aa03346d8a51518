/* SPDX-License-Identifier: MIT */
/*
 * Layer net (src/net/, above boot and transport): peers, their transports,
 * the communicator's errors; the only user of the bootstrap below the API.
 *
 * net.h - the net layer: a communicator's peers and the transport each is
 * reached by, and what the layers above use to talk to them (connection
 * set-up, posted sends and receives, bounded waits that progress every
 * transport, notice failures and abort, and turn a stall into an error
 * naming the culprit through the wait-for chain). It also owns the
 * communicator's error state: the first fatal error, logged once with the
 * operation in flight, poisons it and is told to the peers.
 *
 * Below it: the transports (transport.h, given a struct ibc_tenv each) and
 * the bootstrap (boot/bootstrap.h), which no layer above this one sees.
 */
#ifndef IBC_NET_H
#define IBC_NET_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/coll_kind.h"
#include "boot/bootstrap.h"
#include "ibcoll.h"
#include "transport/transport.h"

/*
 * struct ibc_op - one operation as the layers below the public API see it
 * (the arguments of the call that issued it, and its sequence number).
 */
struct ibc_op {
	int coll;               /* enum ibc_coll_type */
	const void *sendbuf;
	void *recvbuf;
	size_t count;           /* ELEMENTS, as passed by the user */
	ibc_dtype_t dtype;
	ibc_redop_t redop;
	int root;               /* root, or peer for send/recv; -1 */
	uint32_t seq;           /* collective seq, or per-pair p2p seq */
	uint8_t proto_flags;    /* IBC_DESC_F_LL when the tuner chose LL */
	/*
	 * an internal operation on the user's seq (the tuner's exchanges): the
	 * user's operation, named in its descriptors (IBC_DESC_F_INTERNAL)
	 */
	const struct ibc_op *user;
	/*
	 * allgatherv: recvcounts[n], rdispls[n]; alltoallv: sendcounts[n],
	 * sdispls[n], recvcounts[n], rdispls[n] (ELEMENTS), owned by the request
	 */
	const size_t *v;
	/* tagged send/receive (ibc_isend_tag/ibc_irecv_tag); 0 for every other operation */
	int tagged;
	int tag;
	int *source_p;          /* tagged receive: where the matched source goes */
	uint32_t recv_order;    /* tagged receive: its place among the communicator's
				 * tagged receives (issue order; exec.c p2p_behind()) */
	int tag_state;          /* tagged operations: matching progress (p2p_tag.c) */
	/* device buffers (src/cuda/cuda.h), 0 for host buffers */
	unsigned cuda_flags;    /* IBC_CUDA_REQ_*, set by ibc_cuda_op_classify() */
	int cuda_dev;           /* CUDA device of the device buffers */
	int staged;             /* one segment of a staged device operation (cuda_stage.c) */
};

/*
 * ibc_op_desc() - the call-level descriptor of @op (sequence, collective,
 * count, dtype, op, root; no step, no flags): what a rank shows of the call
 * it runs, to compare with a peer's messages (mismatch texts, the stray
 * check, the shm all-reduce's announcements).
 */
static inline void ibc_op_desc(const struct ibc_op *op, struct ibc_msg_desc *d)
{
	memset(d, 0, sizeof(*d));
	d->seq = op->seq;
	d->coll = (uint8_t)op->coll;
	d->dtype = (uint8_t)op->dtype;
	d->op = (uint8_t)op->redop;
	d->count = op->count;
	d->root = op->root;
}

/*
 * 1 when @op moves nothing on any rank: a count of 0 (the same on every
 * rank) of a collective that is not a barrier nor has counts per rank
 */
static inline int ibc_op_is_empty(const struct ibc_op *op)
{
	return op->count == 0 && op->coll != IBC_COLL_BARRIER &&
	       !(ibc_coll_flags(op->coll) & IBC_COLLF_VECTOR);
}

/* struct ibc_peer - what the net layer keeps per peer rank */
struct ibc_peer {
	const struct ibc_transport_ops *ops;  /* chosen transport, NULL for this rank */
	struct ibc_tconn *conn;               /* NULL until connected */
	uint32_t p2p_send_seq;                /* sends issued to this peer */
	uint32_t p2p_recv_seq;                /* receives issued from it */
	uint32_t tag_send_seq;                /* tagged sends issued to this peer */
	/* collective messages posted to and from this peer (atomic: wait-for answers) */
	uint64_t coll_sent;
	uint64_t coll_recvd;
};

struct ibc_net;

/* struct ibc_tinst - one transport in use by a communicator */
struct ibc_tinst {
	const struct ibc_transport_ops *ops;
	void *ctx;
	struct ibc_tenv env;                  /* what the transport knows of the communicator */
	struct ibc_net *net;                  /* the env's callbacks' net layer */
};

#define IBC_MAX_TRANSPORTS 3

/*
 * struct ibc_net - the net layer's part of a communicator. Identity and
 * transports are set by ibc_net_init() and then read-only; the operation
 * context and the wait-for state are written by the thread executing
 * operations and read (atomically) by the bootstrap's service thread.
 */
struct ibc_net {
	int rank;
	int nranks;
	/*
	 * a communicator made by ibc_comm_split(): this rank in the job's
	 * first communicator (set by the caller before ibc_net_setup()), and
	 * "world rank 7, communicator 3fa2b1c0" for log lines; -1 and "" else
	 */
	int world_rank;
	char log_ctx[64];
	int nlocal;                           /* ranks on this host, this one included */
	int local_rank;                       /* rank among this host's ranks */
	int gpu;                              /* topology index of this rank's GPU, -1: none */
	struct ibc_bootstrap *bs;
	struct ibc_peer *peers;               /* [nranks] */
	struct ibc_tinst tinst[IBC_MAX_TRANSPORTS];
	int ntinst;
	char transport_name[32];              /* "shm", "tcp", "shm+ib", ... */
	int64_t timeout_ms;                   /* IBC_TIMEOUT_MS */
	uint64_t spin_ns;                     /* IBC_SPIN_US, 0 when oversubscribed */
	/* adaptive spinning (ibc_net_wait_spin_begin()); atomic, relaxed */
	unsigned spin_skip;                   /* waits left that do not spin */
	unsigned spin_skip_len;               /* the next finding's skip (64 .. 1024) */
	unsigned spin_colo;                   /* findings in a row (ibc_net_wait_spin_end()) */
	unsigned spin_alone;                  /* skipping waits in a row whose yield came back at once */
	uint64_t spin_skip_ns;                /* when the skip was set (coarse clock, ns) */
	unsigned spin_moves;                  /* ibc_net_spin_move()s done */
	int spin_cpu;                         /* this rank's own CPU (ibc_net_cpu_assign()), -1 none */
	int spin_logged;                      /* the INFO line was written */

	/*
	 * the operation being executed, named in error texts: set by the
	 * executor with a release store, cleared under @lock; other threads
	 * read it under @lock (acquire)
	 */
	pthread_mutex_t lock;
	const struct ibc_op *cur;
	uint64_t cur_bytes_total;             /* bytes this rank sends+receives in cur */
	uint64_t cur_bytes_done;              /* atomic */
	int cur_tuning;                       /* cur runs the tuner's probe and race (1) or its
						 * re-timing (2) (atomic) */

	/* wait-for state, answered to peers' queries (ibc_net_chase()); atomic */
	int in_op;                            /* an operation is executing */
	uint32_t op_seq;                      /* its collective sequence number */
	int wait_peer;                        /* the rank it waits on now, -1: none */
	uint64_t wait_since_ms;               /* that wait's last progress (ibc_time_ms) */
	uint32_t coll_seq;                    /* collectives issued (the next one's seq) */
	uint32_t tag_recvs;                   /* tagged receives issued (ibc_op.recv_order) */

	/*
	 * the stray-message check (ibc_net_check_strays()), by the executing
	 * thread: the last collectives this rank completed, by seq % 16
	 */
	struct ibc_msg_desc done[16];
	int done_valid;                       /* some collective completed */
	uint32_t done_seq;                    /* the last one's sequence number */
	uint64_t stray_check_ns;              /* time of the last check (fine or coarse clock) */

	/* errors: the first fatal one poisons the communicator (under @lock) */
	int poisoned;                         /* atomic */
	ibc_status_t poison_st;
	char poison_msg[1024];
	int aborting;                         /* atomic: ibc_comm_abort() in progress */
	/* called once when the communicator is poisoned (the executor wakes its waiters) */
	void (*on_poison)(void *arg);
	void *on_poison_arg;

	/*
	 * atomic: the layer above has a host send or receive waiting; waits
	 * posted through ibc_net_wait_p2p() return IBC_INPROGRESS for it
	 */
	int yield_p2p;
};

/*
 * ibc_net_init() - prepare @net (zeroed by the caller) in place: its lock,
 * IBC_TIMEOUT_MS, no GPU, no wait. Cannot fail. ibc_net_fini() undoes it
 * (and frees what ibc_net_setup() allocated), after ibc_net_teardown().
 */
void ibc_net_init(struct ibc_net *net);
void ibc_net_fini(struct ibc_net *net);

/**
 * ibc_net_setup() - Build the net layer of a communicator around its ready
 * bootstrap: identity, this host's ranks, the rank's GPU, the transport of
 * every peer (forced by IBC_TRANSPORT, or shm on this host, ib where both
 * ends have a usable device, tcp otherwise) and the spin policy.
 * @net: [in,out] after ibc_net_init(); net->bs set to the communicator's
 *       bootstrap, which ibc_net_teardown() destroys.
 * Blocking: an allgather of capabilities when a peer is on another host.
 * Return: IBC_OK; IBC_ERR_NO_MEMORY; IBC_ERR_INVALID_USAGE (IBC_TRANSPORT=shm
 *         with a rank on another host); IBC_ERR_UNSUPPORTED (a needed
 *         transport is not usable); the bootstrap's errors.
 */
ibc_status_t ibc_net_setup(struct ibc_net *net);

/*
 * ibc_net_teardown() - tell the peers that this rank leaves (or aborts, with
 * the communicator's error as the reason) first, so that they do not blame
 * the connections that drop next; then close every connection, the
 * transports and the bootstrap. Bounded.
 */
void ibc_net_teardown(struct ibc_net *net, int abort);

/**
 * ibc_net_transport_parse() - Check an IBC_TRANSPORT value.
 * @name:  [in]  "auto", "shm", "tcp" or "ib".
 * @ops_p: [out] the forced transport, NULL for auto; may be NULL. Written
 *         only on success.
 * Return: 0, or -1 when @name is none of those (the caller uses auto).
 */
int ibc_net_transport_parse(const char *name, const struct ibc_transport_ops **ops_p);

/* the device a transport that some peer uses opened ("mlx5_0"), NULL when none */
const char *ibc_net_device(const struct ibc_net *net);

/* ---- errors (net_fail.c) --------------------------------------------------- */

/*
 * ibc_net_fail() - record a fatal error on the communicator of @net:
 * compose one ERROR line naming the current operation and its sequence
 * number, this rank, @peer and its host (when >= 0), the transport and the
 * bytes done so far, followed by the cause in @fmt; poison the communicator
 * (later calls return @st at once) and tell the peers. Only the first error
 * is logged at ERROR; later ones at DEBUG. A lost connection or a timeout
 * first waits (briefly) for another rank's report naming the culprit.
 * Returns the communicator's first error (@st when this is it).
 */
ibc_status_t ibc_net_fail(struct ibc_net *net, ibc_status_t st, int peer, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ibc_net_fail() without telling the peers (they learnt it from the bootstrap, or will) */
ibc_status_t ibc_net_fail_quiet(struct ibc_net *net, ibc_status_t st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * ibc_net_on_boot_error() - the bootstrap's error callback (its argument is
 * the net layer): a peer died, aborted, failed or stopped answering; fails
 * the communicator with that text without telling the peers again.
 */
void ibc_net_on_boot_error(void *arg, ibc_status_t st, int peer, const char *why);

/*
 * ibc_net_revoke() - revoke the communicator of @net (ibc_comm_revoke()):
 * poison it with IBC_ERR_REVOKED (a status it had from an earlier error is
 * replaced, its text kept) and tell every peer directly through the
 * bootstrap (ibc_bootstrap_revoke(), bounded by 2 s), whose service
 * threads poison theirs. Idempotent. Threading: any thread.
 */
ibc_status_t ibc_net_revoke(struct ibc_net *net);

/* the communicator's first error, IBC_OK while healthy (cheap, atomic) */
static inline ibc_status_t ibc_net_status(const struct ibc_net *net)
{
	if (__builtin_expect(__atomic_load_n(&net->poisoned, __ATOMIC_ACQUIRE), 0))
		return __atomic_load_n(&net->poison_st, __ATOMIC_ACQUIRE);
	return IBC_OK;
}

/*
 * ibc_net_fail_text() - what to say of a step that failed with @st: the
 * communicator's first error (which names the rank and the cause, e.g.
 * another rank's mismatched call reported while this one was still setting
 * up), copied into @buf of @n bytes, when it has one; otherwise
 * ibc_status_str(@st) (a bootstrap exchange says no more than "remote peer
 * failed"). For IBC_ERR_REMOTE it waits up to 200 ms for the failed peer's
 * report. Any thread; blocking (error paths only). Returns @buf or a static
 * string.
 */
const char *ibc_net_fail_text(struct ibc_net *net, ibc_status_t st, char *buf, size_t n);

/* @peer's host name ("?" when unknown) */
const char *ibc_net_peer_host(const struct ibc_net *net, int peer);

/*
 * struct ibc_net_spin - one wait's record for the spinning heuristic
 * (ibc_net_wait_spin_begin() .. ibc_net_wait_spin_end()).
 * @spin_ns:   how long this wait may busy-poll, ns.
 * @yield1_ns: how long its first sched_yield() took, ns.
 * @polled:    1 when there was something to wait for at its first check.
 * @timed:     1 when it went on past its first polls (NET_FAST_POLLS, no clock).
 * @yields:    its sched_yield() calls (ibc_net_yield()).
 */
struct ibc_net_spin {
	uint64_t spin_ns;
	uint64_t yield1_ns;
	int polled;
	int timed;
	int yields;
};

/*
 * ibc_net_wait_spin_begin() - Start a wait's record: its budget is
 * IBC_SPIN_US (0 when oversubscribed), or 0 for the next 64 waits after 2
 * waits in a row spun their whole budget and then gave the core away at
 * their first yield (it took 2 us or more: net.c NET_SPIN_COLO,
 * NET_SPIN_YIELD_AWAY_NS; 128, 256 .. 1024 waits for findings in a row, 64
 * again once a wait ends while spinning; each finding sleeps 20 us, so that
 * the scheduler may wake the rank on an idle core). That is the mark of a
 * peer that shares this rank's core: it cannot run while this rank spins,
 * so every wait would cost the whole budget (a 2-rank 8-byte all-reduce
 * took 41-55 us instead of 0.5 us while a compiler at nice 19 ran on the
 * host's other core and the scheduler kept both ranks on one). At a
 * finding the thread also moves itself once to its own CPU
 * (ibc_net_spin_move()). The skip ends early when the finding is older
 * than 20 ms (NET_SPIN_SKIP_NS: a job that paused resumes spinning) or
 * when 4 skipped waits in a row found the core to themselves (their first
 * yield came back under 2 us, NET_SPIN_ALONE); otherwise spinning is tried
 * again after the skipped waits.
 * Threading: the thread executing @net's operations (one at a time: the
 * executor's running flag; the fields are atomics all the same).
 */
void ibc_net_wait_spin_begin(struct ibc_net *net, struct ibc_net_spin *sp);

/*
 * ibc_net_wait_spin_end() - Tell the spinning heuristic how the wait of
 * @sp ended. Verdicts: not @polled, or ended within its first polls (not
 * @timed, no yield): none; no yield and @timed: the peer progressed while
 * this rank spun (another core); a first yield under 2 us: nothing else
 * wanted this core (ends a run of findings); 2 us or more: it ran another
 * task on this core (a finding).
 */
void ibc_net_wait_spin_end(struct ibc_net *net, const struct ibc_net_spin *sp);

/*
 * ibc_net_cpu_assign() - This host's ranks' own CPUs, one each where their
 * masks allow: in rank order, each takes the first CPU of its mask that no
 * earlier rank took (mpirun's --bind-to core spread where the masks are
 * equal; a rank whose mask is one CPU keeps it, and later ranks avoid it).
 * @masks: [in] the local ranks' CPU masks, in rank order (exchanged at set-up).
 * @n:     [in] number of masks.
 * @who:   [in] index of the rank asked about, 0 <= @who < @n.
 * Pure; every local rank computes the same assignment from the same masks.
 * Return: the CPU of rank @who, or -1 when its mask has no CPU left (more
 *         ranks than CPUs) or @who is out of range.
 */
int ibc_net_cpu_assign(const cpu_set_t *masks, int n, int who);

/*
 * ibc_net_spin_move() - Move the calling thread to its rank's own CPU
 * (@net->spin_cpu, from ibc_net_cpu_assign() at set-up), by narrowing its
 * mask to that CPU and restoring the mask at once: the kernel migrates a
 * thread whose CPU leaves its mask, and the application's mask is left as
 * it was. Called at each finding of ibc_net_wait_spin_end(): on a host
 * whose scheduler packs tasks onto few CPUs (this project's VM), two ranks
 * that started while another process held a core stayed together on the
 * other one for the whole job, naps included. Nothing happens without an
 * own CPU (more ranks than CPUs), when that CPU has left the thread's mask
 * since set-up, or when the thread is on it already. Counted in
 * @net->spin_moves; a DEBUG NET line per move. Caveat: another thread
 * that sets this thread's mask between the narrowing and the restore has
 * its change overwritten (two system calls apart; applications that move
 * the library's threads while they wait are not expected).
 * Threading: the thread to move (it acts on itself).
 */
void ibc_net_spin_move(struct ibc_net *net);

/*
 * ibc_net_yield() - sched_yield() for a wait loop: counted in @sp, its
 * first one timed.
 */
void ibc_net_yield(struct ibc_net_spin *sp);

/*
 * ibc_net_wait_publish() - this rank's executing operation now waits on
 * @peer, whose last progress was at @since_ms (ibc_time_ms()); peers'
 * wait-for queries see it. ibc_net_wait_clear(): it waits on nobody.
 */
static inline void ibc_net_wait_publish(struct ibc_net *net, int peer, uint64_t since_ms)
{
	__atomic_store_n(&net->wait_since_ms, since_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&net->wait_peer, peer, __ATOMIC_RELEASE);
}

static inline void ibc_net_wait_clear(struct ibc_net *net)
{
	__atomic_store_n(&net->wait_peer, -1, __ATOMIC_RELEASE);
}

/**
 * ibc_net_chase() - Find the rank a timed-out wait ultimately waits on, by
 *                   following the wait-for chain through the peers'
 *                   bootstrap service threads.
 * @net:  [in]  net layer whose wait on @peer made no progress.
 * @peer: [in]  the rank this one waits on.
 * @why:  [out] the chain in words ("rank 0 waits on rank 1 (for 2950 ms);
 *              rank 1 (host h) does not answer ..."), NUL-terminated.
 * @len:  [in]  size of @why, bytes.
 *
 * Asks @peer what it is doing (ibc_bootstrap_query_wait()); while the answer
 * is "waiting on q" with q not yet seen, asks q, and so on. The chain ends at
 * the culprit: a rank that does not answer within min(max(IBC_TIMEOUT_MS/4,
 * 500), 2000) ms (stopped, hung, or gone), or one that is not waiting (no
 * operation in flight, or busy in a collective; asked 4 times 50 ms apart).
 * A rank that already failed, or a cycle of waits, gives no culprit. Without
 * it, a rank that times out can only name its direct peer, which, when one
 * rank of a ring or of a recursive-halving exchange stops, is often a
 * survivor that waits on the stopped rank (the idea of wait-for graphs in
 * distributed deadlock detection; Chandy, Misra, Haas, ACM TOCS 1983).
 * Blocking: one query per hop, the last one bounded as above. Any thread.
 * Return: the culprit's rank, or -1 (none found; @why says what was seen).
 */
int ibc_net_chase(struct ibc_net *net, int peer, char *why, size_t len);

/*
 * ibc_net_fail_stalled() - a wait on @waited made no progress in time: fail
 * with IBC_ERR_TIMEOUT and the cause in @fmt, followed by the wait-for
 * chain from @waited (ibc_net_chase()). When the chain ends at a culprit,
 * the error names it at once; otherwise it names @peer (-1: none) after
 * ibc_net_fail()'s grace wait for another rank's report.
 * Return: IBC_ERR_TIMEOUT (or the communicator's earlier error).
 */
ibc_status_t ibc_net_fail_stalled(struct ibc_net *net, int waited, int peer, const char *fmt,
				  ...) __attribute__((format(printf, 4, 5)));

/* ---- talking to peers (net.c) ----------------------------------------------- */

/*
 * ibc_net_connect() - make sure @net is connected to each of @peers (self
 * and duplicates ignored). Drives every transport's nonblocking connect
 * round-robin, so ranks that need several peers in different orders never
 * deadlock. Bounded by IBC_BOOTSTRAP_TIMEOUT_MS.
 */
ibc_status_t ibc_net_connect(struct ibc_net *net, const int *peers, int npeers);

/*
 * ibc_net_connect_try() - one nonblocking connect step towards @peer:
 * IBC_OK once connected, IBC_INPROGRESS while the handshake is under way
 * (call again), or the failure (communicator failed, peer named).
 */
ibc_status_t ibc_net_connect_try(struct ibc_net *net, int peer);

/*
 * ibc_net_op_done() - record that this rank completed collective @op (not
 * send or receive): a message for it that arrives later is a stray.
 * Threading: the thread executing @net's operations.
 */
void ibc_net_op_done(struct ibc_net *net, const struct ibc_op *op);

/*
 * ibc_net_check_strays() - find a message that no call of this rank will
 * receive, which only calls that differ between ranks produce: a message
 * waiting from a peer (asked of each connection's transport, see struct
 * ibc_transport_ops peek) for a collective this rank has completed, or for
 * the collective it runs but with another collective or root (a broadcast
 * whose ranks disagree on the root, an all-reduce one rank called with
 * count 0). Sends and receives are not checked (they may arrive before
 * their receive is posted). Finding one fails the communicator with
 * IBC_ERR_INVALID_USAGE, "mismatched calls: rank P sent ..., which no call
 * of this rank receives: this rank ...", told to every rank.
 * @min_gap_us: [in] skip the check when the last one was less than this
 *              long ago (0: always check).
 * Return: IBC_OK, IBC_ERR_INVALID_USAGE, or the communicator's earlier error.
 * Threading: the thread executing @net's operations (it reads the
 * transports' receive state).
 */
ibc_status_t ibc_net_check_strays(struct ibc_net *net, unsigned min_gap_us);

/*
 * ibc_net_check_strays_at() - ibc_net_check_strays() with the time read by
 * the caller (@now_ns, ns): the executor passes the coarse clock
 * (ibc_time_coarse_ns(), a third of a fine read's cost), which may lag the
 * fine one that other callers pass by a tick; a time before the last check
 * counts as within @min_gap_us.
 */
ibc_status_t ibc_net_check_strays_at(struct ibc_net *net, unsigned min_gap_us, uint64_t now_ns);

/*
 * ibc_net_stall_probe() - a wait inside the user's collective has made no
 * progress for a while: ask @peer, the rank it waits on (@kind: 0 for a
 * receive from it, 1 a send to it, 2 the connection set-up with it), what
 * it is doing. When @peer has completed this collective (or a later one)
 * and has posted fewer messages to this rank than this rank receives from
 * it (fewer receives than this rank sends; no connection to this rank),
 * what this rank waits for can never come: the ranks' calls differ (a root,
 * a count of 0, a skipped call), and the communicator fails with
 * IBC_ERR_INVALID_USAGE naming both. When @peer's bootstrap service
 * refuses the query, @peer has destroyed or aborted the communicator or
 * exited: IBC_ERR_REMOTE naming it (the only check for a send or receive).
 * Otherwise IBC_OK: keep waiting.
 * Blocking: up to 500 ms (one wait-for query). Threading: the executing
 * thread.
 */
ibc_status_t ibc_net_stall_probe(struct ibc_net *net, int peer, int kind);

/* name this rank (and its world rank, for a split communicator) in the calling thread's log lines */
void ibc_net_log_rank(const struct ibc_net *net);

/* post a send/receive of @nbytes to/from @peer (connected), tagged with @desc */
ibc_status_t ibc_net_isend(struct ibc_net *net, int peer, const void *buf, size_t nbytes,
			   const struct ibc_msg_desc *desc, struct ibc_treq *req);
ibc_status_t ibc_net_irecv(struct ibc_net *net, int peer, void *buf, size_t nbytes,
			   const struct ibc_msg_desc *desc, struct ibc_treq *req);

/* progress every transport once; IBC_OK or the first fatal error */
ibc_status_t ibc_net_progress(struct ibc_net *net);

/*
 * ibc_net_waitall() / ibc_net_waitany() - wait until @reqs[i] is done for
 * every i < @n (NULL entries skipped), or, with @any, until at least one
 * not-yet-consumed request is done. Spins IBC_SPIN_US after progress, then
 * sleeps in the transports' wait(). Returns the first failed request's
 * status, the poison status, or IBC_ERR_TIMEOUT after IBC_TIMEOUT_MS
 * without any completion.
 */
ibc_status_t ibc_net_waitall(struct ibc_net *net, struct ibc_treq *const *reqs, int n);
ibc_status_t ibc_net_waitany(struct ibc_net *net, struct ibc_treq *const *reqs, int n);
ibc_status_t ibc_net_wait1(struct ibc_net *net, struct ibc_treq *req);
/*
 * ibc_net_wait_p2p() - ibc_net_waitany(), but also returns IBC_INPROGRESS as
 * soon as net->yield_p2p is set (the executor's p2p batch then posts the
 * waiting send or receive next to @reqs).
 */
ibc_status_t ibc_net_wait_p2p(struct ibc_net *net, struct ibc_treq *const *reqs, int n);

/* 1 if @req is done (after one progress pass) */
ibc_status_t ibc_net_test(struct ibc_net *net, struct ibc_treq *req, int *done_p);

/*
 * ibc_net_idle() - sleep in the transports' wait() for about @timeout_us
 * (a wait loop with nothing to do: the shm all-reduce's).
 */
void ibc_net_idle(struct ibc_net *net, int timeout_us);

/*
 * ibc_net_desc_check() - ibc_msg_desc_check() for the layers above the
 * transports (the shm all-reduce compares descriptors itself): a mismatch
 * fails the communicator naming @peer; IBC_ERR_INVALID_USAGE, or IBC_OK.
 */
ibc_status_t ibc_net_desc_check(struct ibc_net *net, int peer, const struct ibc_msg_desc *mine,
				size_t my_nbytes, const struct ibc_msg_desc *theirs,
				size_t their_nbytes);

/* ---- the out-of-band exchange for the layers above (net_setup.c) ------------ */

/* tags of the layers above, 0..IBC_TENV_TAG_MAX (kept apart from the transports') */
#define IBC_NET_TAG_SHMAR 0x000u      /* coll: the shm all-reduce's set-up */
#define IBC_NET_TAG_P2P_ENV 0x001u    /* coll: envelopes of tagged sends (p2p_tag.c) */
#define IBC_NET_TAG_CPUSET 0x002u     /* net: local ranks' CPU affinity at set-up */

ibc_status_t ibc_net_oob_send(struct ibc_net *net, int peer, uint32_t tag, const void *buf,
			      size_t nbytes);
/* the oldest message from @peer with @tag if one arrived (*@got_p); never blocks */
ibc_status_t ibc_net_oob_try_recv(struct ibc_net *net, int peer, uint32_t tag, void *buf,
				  size_t nbytes, int *got_p);
/* blocking receive, bounded by IBC_BOOTSTRAP_TIMEOUT_MS */
ibc_status_t ibc_net_oob_recv(struct ibc_net *net, int peer, uint32_t tag, void *buf,
			      size_t nbytes);
/* every rank contributes @nbytes at buf + rank * nbytes */
ibc_status_t ibc_net_oob_allgather(struct ibc_net *net, void *buf, size_t nbytes);
/* 16 random bytes naming the communicator (same on all ranks) */
const uint8_t *ibc_net_comm_id(const struct ibc_net *net);
/* 1 when @rank runs on this host */
int ibc_net_same_host(const struct ibc_net *net, int rank);
/* 1 when @peer is reached through a transport that shares this host's memory */
static inline int ibc_net_peer_local(const struct ibc_net *net, int peer)
{
	return peer != net->rank && net->peers[peer].ops &&
	       (net->peers[peer].ops->caps & IBC_TCAP_LOCAL);
}

#endif /* IBC_NET_H */
