/* SPDX-License-Identifier: MIT */
/*
 * Layer boot (src/boot/, above base): the out-of-band network, which only
 * the net layer and the API use.
 *
 * bootstrap.h - the out-of-band TCP network of a communicator: rendezvous
 * through an authenticated root, the table of every rank's address, host
 * and boot id, small tagged messages between ranks, authenticated TCP
 * streams for the tcp transport, and liveness (a ring of watch connections
 * with heartbeats, or hub connections to rank 0). One service thread per communicator accepts and
 * authenticates incoming connections and queues what arrives, so that a
 * send never waits for the receiver to call recv (no deadlock when ranks
 * exchange with several peers in different orders).
 */
#ifndef IBC_BOOTSTRAP_H
#define IBC_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "ibcoll.h"

#define IBC_BOOT_SECRET_BYTES 16
#define IBC_BOOT_HOST_LEN 64
#define IBC_BOOT_BOOTID_LEN 40
#define IBC_BOOT_MAX_MSG_BYTES (16u << 20) /* hard cap on one tagged message */

/*
 * message tags: each user owns a range of 0x1000. The net layer places
 * each transport's tags at 0x1000 x its id (tcp 1, shm 2, ib 3: enum
 * ibc_transport_id) and those of the layers above it at IBC_BOOT_TAG_UPPER.
 */
#define IBC_BOOT_TAG_INTERNAL 0x0000u /* allgather, barrier, split */
#define IBC_BOOT_TAG_UPPER    0x4000u /* above the net layer: the shm all-reduce's set-up */
#define IBC_BOOT_TAG_USER_MAX 0xffffu
/* in the internal range: the fault-tolerant calls (boot_ft.c) */
#define IBC_BOOT_TAG_AGREE    0x0e00u /* + 0 contribution / 1 decision; the sequence is in the message */
#define IBC_BOOT_TAG_REVOKE   0x0f00u /* taken by the service thread, never queued */
#define IBC_BOOT_TAG_GROW     0x0d00u /* ibc_bootstrap_grow_id(): the new job's id */

/* struct ibc_peer_info - what every rank learns about every other at init */
struct ibc_peer_info {
	char host[IBC_BOOT_HOST_LEN];          /* gethostname() */
	char boot_id[IBC_BOOT_BOOTID_LEN];     /* /proc/sys/kernel/random/boot_id */
	uint32_t pid;
	uint16_t family;                       /* AF_INET or AF_INET6 */
	uint16_t port;                         /* service listener port, host order */
	uint8_t addr[16];                      /* IPv4 in the first 4 bytes, or IPv6 */
};

struct ibc_bootstrap;

/*
 * struct ibc_boot_waitstate - what a rank is doing, as its service thread
 * answers a wait-for query (ibc_bootstrap_query_wait()).
 * @state:   enum ibc_boot_wait.
 * @peer:    IBC_BOOT_WAIT_PEER: the rank it waits on; otherwise -1.
 * @seq:     the sequence number of the collective it is in (p2p: 0); when
 *           idle, the number of collectives it has issued.
 * @idle_ms: IBC_BOOT_WAIT_PEER: ms since its last progress.
 * @done_seq: with IBC_BOOT_WS_DONE in @flags, the sequence number of the
 *           last collective it completed.
 * @flags:   IBC_BOOT_WS_*.
 * @sent:    collective messages it has posted to the asking rank (sends
 *           and receives of point-to-point calls not counted).
 * @recvd:   collective receives it has posted from the asking rank.
 * The counts let a rank that waits in collective #s for a peer that has
 * completed #s tell a slow message from one that will never come: the
 * calls of the two differ when the peer sent fewer messages than this rank
 * receives (or posted fewer receives than this rank sends).
 */
struct ibc_boot_waitstate {
	uint32_t state;
	int32_t peer;
	uint32_t seq;
	uint32_t idle_ms;
	uint32_t done_seq;
	uint32_t flags;
	uint64_t sent;
	uint64_t recvd;
};

#define IBC_BOOT_WS_DONE      0x1       /* @done_seq is valid */
#define IBC_BOOT_WS_CONNECTED 0x2       /* it has a data connection to the asking rank */

enum ibc_boot_wait {
	IBC_BOOT_WAIT_IDLE = 0,         /* no operation in flight on the communicator */
	IBC_BOOT_WAIT_BUSY = 1,         /* in an operation, not waiting on a peer now */
	IBC_BOOT_WAIT_PEER = 2,         /* in an operation, waiting on @peer */
	IBC_BOOT_WAIT_FAILED = 3,       /* the communicator has failed (its report is sent) */
	IBC_BOOT_WAIT_STATE_COUNT
};

/* wait-state callback: the service thread asks it when a peer queries this rank */
typedef void (*ibc_bootstrap_wait_fn)(void *arg, int asker, struct ibc_boot_waitstate *ws);

/* error callback: called by the service thread when a peer dies, aborts or stops answering */
typedef void (*ibc_bootstrap_error_fn)(void *arg, ibc_status_t st, int peer, const char *why);

/*
 * ibc_bootstrap_root_start() - start an authenticated root that gathers
 * @nranks ranks (nranks unknown: 0, learnt from the first join) and sends
 * them the table, in a detached thread that ends when done or after the
 * bootstrap timeout.
 * @bind_addr/@port: where to listen (port 0: ephemeral); the actual address
 * and port are written to @id_out, a packed unique id with a fresh secret
 * unless @secret is given.
 */
ibc_status_t ibc_bootstrap_root_start(const char *bind_host, uint16_t port,
				      const uint8_t *secret, ibc_unique_id_t *id_out);

/* unique id codec (pure; fuzzed) */
struct ibc_boot_uid {
	uint16_t family;
	uint16_t port;
	uint8_t addr[16];
	uint8_t secret[IBC_BOOT_SECRET_BYTES];
};
void ibc_boot_uid_pack(const struct ibc_boot_uid *u, ibc_unique_id_t *id);
ibc_status_t ibc_boot_uid_unpack(const ibc_unique_id_t *id, struct ibc_boot_uid *u);

/*
 * ibc_bootstrap_create() - join the job described by @uid as @rank of
 * @nranks: listen, authenticate to the root, receive the table, connect
 * the liveness hub. Blocking, bounded by IBC_BOOTSTRAP_TIMEOUT_MS.
 */
ibc_status_t ibc_bootstrap_create(const struct ibc_boot_uid *uid, int rank, int nranks,
				  ibc_bootstrap_error_fn on_error, void *arg,
				  struct ibc_bootstrap **bs_p);

/*
 * ibc_bootstrap_report_join_failure() - this rank cannot join the job of
 * @uid (a local failure before it reached the root, status @st, reason in
 * ibc_last_error()): tell the root, best effort and bounded by 2 s, so that
 * the ranks that joined fail at once naming this one instead of waiting for
 * IBC_BOOTSTRAP_TIMEOUT_MS. ibc_bootstrap_create() calls it itself; callers
 * that fail before calling it (allocating the communicator) call it too.
 */
void ibc_bootstrap_report_join_failure(const struct ibc_boot_uid *uid, int rank, int nranks,
				       ibc_status_t st);

/*
 * ibc_bootstrap_split() - bootstrap of a sub-communicator (MPI_Comm_split):
 * every rank of @parent calls it; ranks with equal @color >= 0 form a new
 * bootstrap ordered by (@key, parent rank), built without a root from an
 * allgather over @parent; a negative @color gets *@bs_p = NULL.
 * @split_seq numbers the splits of @parent (same on all ranks).
 */
ibc_status_t ibc_bootstrap_split(struct ibc_bootstrap *parent, int color, int key,
				 uint64_t split_seq, ibc_bootstrap_error_fn on_error, void *arg,
				 struct ibc_bootstrap **bs_p);

/*
 * ibc_bootstrap_destroy() - stop the service thread and close everything;
 * first tells the peers that this rank leaves (BYE) or aborts (@abort),
 * unless ibc_bootstrap_announce_leave() already did. Bounded: < 1 s.
 */
void ibc_bootstrap_destroy(struct ibc_bootstrap *bs, int abort);

/*
 * ibc_bootstrap_announce_leave() - tell the peers, through the liveness
 * hub, that this rank leaves cleanly (BYE) or aborts (@abort, with @text
 * as the reason); returns once the notice is on the wire or after 400 ms.
 * Called before transports close their connections, so that peers learn
 * the reason before they see the connections drop. Once per bootstrap.
 */
void ibc_bootstrap_announce_leave(struct ibc_bootstrap *bs, int abort, const char *text);

/*
 * ibc_bootstrap_notify_error() - tell every peer, through the liveness hub
 * (rank 0 forwards), that this rank's communicator failed with @st and
 * @text, so that ranks waiting for this one fail at once with the original
 * cause instead of timing out. The peers report IBC_ERR_INVALID_USAGE and
 * IBC_ERR_TIMEOUT as such, any other status as IBC_ERR_REMOTE (a peer
 * reported an error), with the text. Never blocks (the service thread
 * sends it).
 */
void ibc_bootstrap_notify_error(struct ibc_bootstrap *bs, ibc_status_t st, const char *text);

/*
 * ibc_bootstrap_set_wait_fn() - have the service thread answer wait-for
 * queries with @fn(arg given to ibc_bootstrap_create(), ...). Until it is
 * set, queries are answered IBC_BOOT_WAIT_IDLE. @fn runs in the service
 * thread: it must not block.
 */
void ibc_bootstrap_set_wait_fn(struct ibc_bootstrap *bs, ibc_bootstrap_wait_fn fn);

/**
 * ibc_bootstrap_query_wait() - Ask rank @peer's service thread what @peer is
 *                              doing (a wait-for query).
 * @bs:     [in]  bootstrap.
 * @peer:   [in]  rank to ask, not this one.
 * @max_ms: [in]  how long to wait for the answer, ms (connection and
 *                handshake included).
 * @ws:     [out] its answer.
 *
 * The service thread answers even while the rank's own threads are blocked
 * in a wait, so a rank that does not answer is stopped (SIGSTOP, a debugger),
 * starved of CPU for @max_ms, or gone. Used to find the rank a timed-out
 * wait ultimately waits on (ibc_comm_chase()). Blocking, bounded by @max_ms;
 * safe from any thread. Logs nothing.
 * Return: IBC_OK; IBC_ERR_TIMEOUT (no answer within @max_ms);
 *         IBC_ERR_REMOTE (the connection was refused or closed: its process
 *         is gone, or the answer was malformed); IBC_ERR_INVALID_ARG (bad @peer);
 *         IBC_ERR_SYSTEM, IBC_ERR_NO_MEMORY, IBC_ERR_INTERNAL: this rank could
 *         not ask (socket() at the open-file limit, ...), which says nothing
 *         of @peer; the calling thread's ibc_last_error() names the cause.
 */
ibc_status_t ibc_bootstrap_query_wait(struct ibc_bootstrap *bs, int peer, int64_t max_ms,
				      struct ibc_boot_waitstate *ws);

/*
 * ibc_bootstrap_cancel() - make every blocking call on @bs (connect, send,
 * recv, allgather, barrier) give up with IBC_ERR_REMOTE within 100 ms;
 * used by ibc_comm_abort(). A reported peer failure has the same effect.
 * Threading: any thread.
 */
void ibc_bootstrap_cancel(struct ibc_bootstrap *bs);

int ibc_bootstrap_rank(const struct ibc_bootstrap *bs);
int ibc_bootstrap_nranks(const struct ibc_bootstrap *bs);
const struct ibc_peer_info *ibc_bootstrap_peer(const struct ibc_bootstrap *bs, int rank);
/* 16 random bytes naming this communicator (same on all ranks) */
const uint8_t *ibc_bootstrap_comm_id(const struct ibc_bootstrap *bs);
/* 1 when @rank runs on this host (same host name and boot id) */
int ibc_bootstrap_same_host(const struct ibc_bootstrap *bs, int rank);

/*
 * ibc_bootstrap_send() - deliver @nbytes to @peer's queue under @tag. Returns
 * once written to the socket; never waits for the peer to receive.
 * Blocking: bounded by IBC_BOOTSTRAP_TIMEOUT_MS. Errors: IBC_ERR_REMOTE,
 * IBC_ERR_TIMEOUT, IBC_ERR_SYSTEM, IBC_ERR_INVALID_ARG (too large).
 */
ibc_status_t ibc_bootstrap_send(struct ibc_bootstrap *bs, int peer, uint32_t tag,
				const void *buf, size_t nbytes);

/*
 * ibc_bootstrap_try_recv() - take the oldest message from @peer with @tag if
 * one arrived: *got_p = 1 and the payload copied (its size must be @nbytes:
 * else IBC_ERR_INVALID_USAGE); *got_p = 0 otherwise. Never blocks.
 */
ibc_status_t ibc_bootstrap_try_recv(struct ibc_bootstrap *bs, int peer, uint32_t tag,
				    void *buf, size_t nbytes, int *got_p);

/*
 * ibc_bootstrap_try_recv_seq() - for messages that start with a 64-bit
 * sequence number (the fault-tolerant calls): take @peer's message with
 * @tag and sequence @seq (*got_p = 1, its length in *len_p), dropping older
 * ones of that tag and leaving later ones queued, whatever their sizes.
 * Never blocks. IBC_ERR_INVALID_USAGE when the message exceeds @cap
 * (*len_p = its length).
 */
ibc_status_t ibc_bootstrap_try_recv_seq(struct ibc_bootstrap *bs, int peer, uint32_t tag,
					uint64_t seq, void *buf, size_t cap, size_t *len_p, int *got_p);
/* blocking ibc_bootstrap_try_recv(), bounded by IBC_BOOTSTRAP_TIMEOUT_MS */
ibc_status_t ibc_bootstrap_recv(struct ibc_bootstrap *bs, int peer, uint32_t tag, void *buf,
				size_t nbytes);

/* every rank contributes @nbytes at buf + rank * nbytes; ring, n-1 steps */
ibc_status_t ibc_bootstrap_allgather(struct ibc_bootstrap *bs, void *buf, size_t nbytes);
ibc_status_t ibc_bootstrap_barrier(struct ibc_bootstrap *bs);

/*
 * ibc_bootstrap_connect_stream() - open an authenticated TCP stream to
 * @peer's listener, labelled @tag; the peer takes it with
 * ibc_bootstrap_try_accept_stream(). Returns a blocking-mode fd the caller
 * owns. Blocking, bounded.
 */
ibc_status_t ibc_bootstrap_connect_stream(struct ibc_bootstrap *bs, int peer, uint32_t tag,
					  int *fd_p);
/* take a stream opened by @peer with @tag: *fd_p >= 0, or -1 when none yet. Never blocks. */
ibc_status_t ibc_bootstrap_try_accept_stream(struct ibc_bootstrap *bs, int peer, uint32_t tag,
					     int *fd_p);

/*
 * ibc_bootstrap_send_ft() - ibc_bootstrap_send() for the fault-tolerant
 * calls, which run after a failure: not cancelled by it, quiet when @peer
 * is gone (IBC_ERR_REMOTE: refused or lost; IBC_ERR_TIMEOUT), bounded by
 * @deadline_ms (ibc_time_ms() clock).
 */
ibc_status_t ibc_bootstrap_send_ft(struct ibc_bootstrap *bs, int peer, uint32_t tag,
				   const void *buf, size_t nbytes, uint64_t deadline_ms);

/*
 * ibc_bootstrap_revoke() - revoke: tell every peer directly (no hub), so
 * that their service threads fail the communicator with IBC_ERR_REVOKED,
 * and make this rank's blocking calls give up. Bounded: 500 ms per peer,
 * 2 s in all; peers that cannot be reached are skipped (they are gone).
 * Idempotent. Threading: any thread.
 */
void ibc_bootstrap_revoke(struct ibc_bootstrap *bs);

/* 1 once the bootstrap was revoked, by this rank or a peer */
int ibc_bootstrap_revoked(const struct ibc_bootstrap *bs);

/*
 * ibc_bootstrap_agree() - fault-tolerant agreement among the live ranks of
 * @bs (boot_ft.c; docs/reliability.md): the AND of every live rank's
 * *@flag_p, the set of ranks found dead, and every live rank's @payload.
 * Every rank of @bs calls it with the same @seq (a count of the agreements
 * on @bs) and @payload_bytes; it works on a failed or revoked bootstrap.
 * A rank is dead when its listener refuses or drops a connection, or when
 * the liveness hub declared it failed and it does not answer a probe.
 * @flag_p:       [in,out] this rank's flag; the agreed AND.
 * @payload:      [in] @payload_bytes of this rank's data (may be NULL if 0).
 * @payloads_out: [out] nranks x @payload_bytes, rank order; dead ranks' zero.
 * @dead_out:     [out] nranks bytes, 1 for each rank agreed dead.
 * @timeout_ms:   bound on the whole call.
 * Return: IBC_OK (every live rank got the same answer); IBC_ERR_TIMEOUT (a
 * rank neither answered nor was found dead within @timeout_ms; logged);
 * IBC_ERR_INVALID_USAGE (ranks disagree on @payload_bytes); IBC_ERR_NO_MEMORY.
 */
ibc_status_t ibc_bootstrap_agree(struct ibc_bootstrap *bs, uint64_t seq, uint32_t *flag_p,
				 const void *payload, size_t payload_bytes, void *payloads_out,
				 uint8_t *dead_out, int64_t timeout_ms);

/*
 * ibc_bootstrap_shrink() - the bootstrap of the survivors of @parent: an
 * agreement (sequence @seq, see ibc_bootstrap_agree()) that also carries
 * every live rank's new listener address; the ranks agreed dead are left
 * out and the others keep their order. No root and no new unique id.
 * @dead_out: [out] parent->nranks bytes, 1 per rank left out (may be NULL).
 * Return: as ibc_bootstrap_agree(); IBC_ERR_SYSTEM (no listener).
 */
ibc_status_t ibc_bootstrap_shrink(struct ibc_bootstrap *parent, uint64_t seq, int64_t timeout_ms,
				  ibc_bootstrap_error_fn on_error, void *arg,
				  struct ibc_bootstrap **bs_p, uint8_t *dead_out);

/*
 * ibc_bootstrap_grow_id() - the unique id of a larger job that the ranks of
 * @bs and processes started later join (ibc_comm_grow()): rank 0 starts a
 * root with @bs's secret (the rank count is learnt from the first join)
 * and sends the id to every rank of @bs. Collective over @bs, which must
 * be healthy. Blocking, bounded by IBC_BOOTSTRAP_TIMEOUT_MS; the root
 * waits as long for the ranks to join.
 */
ibc_status_t ibc_bootstrap_grow_id(struct ibc_bootstrap *bs, ibc_unique_id_t *id);

/* the listener's local address, for transports that listen themselves */
const struct ibc_peer_info *ibc_bootstrap_self(const struct ibc_bootstrap *bs);

#endif /* IBC_BOOTSTRAP_H */
