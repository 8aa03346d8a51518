/* SPDX-License-Identifier: MIT */
/*
 * Layer transport (src/transport/, above base, cuda, topo): the transports
 * (sock/, shm/, ib/) behind one ops table; none sees a communicator.
 *
 * transport.h - the transport layer: what every transport (tcp, shm, ib)
 * implements, and the narrow environment it is given. The only transport
 * header that the net layer and the algorithms see (STYLE C1, C8).
 * Modelled on NCCL's ncclNet and UCX's uct: a per-communicator context,
 * nonblocking connection set-up, and posted sends/receives matched in order
 * per direction of a connection. A transport never sees the communicator or
 * the bootstrap: it gets a struct ibc_tenv (rank, ranks, timeouts, an
 * out-of-band exchange, a failure callback) from the net layer.
 *
 * Contract for implementers:
 *  - connect(ctx, peer, &conn) is a nonblocking state machine: it returns
 *    IBC_INPROGRESS until the connection is ready, then IBC_OK with *conn
 *    set. The net layer calls it round-robin for every peer an operation
 *    needs, so a transport may exchange several rounds of messages with
 *    ibc_tenv_oob_send()/ibc_tenv_oob_try_recv() (which never block on the
 *    peer) without deadlock. It must never block for more than a few ms.
 *  - isend/irecv post one message; messages on one connection are matched
 *    in posting order per direction, and the receiver posts exactly the
 *    sender's nbytes. Every message carries the sender's struct
 *    ibc_msg_desc; the receiving side compares it with its own through
 *    ibc_msg_desc_check() (msg_desc.c) and fails the request on mismatch,
 *    so that ranks that called different collectives get an error, not a
 *    hang. Buffers stay owned by the caller until the request is done.
 *  - progress(ctx) advances everything posted and never blocks; it sets
 *    req->status then req->done (release store) on completion. A fatal
 *    connection error is reported once through ibc_tenv_fail() (the net
 *    layer logs one line naming the operation, peer rank and host, transport
 *    and bytes done, and fails the communicator) and returned.
 *  - wait(ctx, timeout_us) sleeps until activity is likely (poll on fds,
 *    futex on a doorbell, CQ event channel) or the timeout passes; it may
 *    return early. Never longer than timeout_us.
 *  - Operations a transport lacks point at ibc_transport_unsupported_*()
 *    stubs, so callers never test for NULL (libfabric's ENOSYS stubs).
 */
#ifndef IBC_TRANSPORT_H
#define IBC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "ibcoll.h"

struct ibc_tconn;               /* a transport's connection to one peer (private) */

#define IBC_TENV_COMM_ID_BYTES 16
#define IBC_TENV_TAG_MAX 0xfffu /* a transport's out-of-band tags: 0 .. this */

struct ibc_tenv_ops;

/**
 * struct ibc_tenv - What a transport knows of the communicator it serves,
 * filled by the net layer before init() and valid until fini().
 * @rank, @nranks:      this rank and the communicator's size.
 * @nlocal:             ranks on this host, this one included.
 * @local_rank:         this rank's index among them (in rank order).
 * @gpu:                topology index of this rank's GPU (src/topo), -1: none.
 * @timeout_ms:         IBC_TIMEOUT_MS of the communicator, ms.
 * @connect_timeout_ms: IBC_BOOTSTRAP_TIMEOUT_MS: bound of a connection set-up, ms.
 * @comm_id:            16 random bytes, the same on every rank of the
 *                      communicator (names shared segments).
 * @ops, @arg:          the out-of-band exchange and the failure report
 *                      (call them through the ibc_tenv_* helpers below).
 */
struct ibc_tenv {
	int rank;
	int nranks;
	int nlocal;
	int local_rank;
	int gpu;
	int64_t timeout_ms;
	int64_t connect_timeout_ms;
	uint8_t comm_id[IBC_TENV_COMM_ID_BYTES];
	const struct ibc_tenv_ops *ops;
	void *arg;
};

/*
 * struct ibc_tenv_ops - the services behind a struct ibc_tenv (net layer).
 * Out-of-band tags are the transport's own, 0..IBC_TENV_TAG_MAX; the net
 * layer keeps each transport's apart. Sends and stream connects block for
 * at most IBC_BOOTSTRAP_TIMEOUT_MS and never wait for the peer to receive;
 * try_recv and try_accept never block.
 * @same_host:    1 when @peer runs on this host (same host name and boot id).
 * @peer_host:    @peer's host name, for messages ("?" when unknown).
 * @oob_send:     deliver @nbytes to @peer's queue under @tag.
 * @oob_try_recv: take the oldest message from @peer with @tag: *@got_p = 1 and
 *                the payload copied (it must be @nbytes long), or *@got_p = 0.
 * @oob_connect_stream:    open an authenticated TCP stream to @peer, labelled
 *                         @tag; *@fd_p is a blocking-mode fd the caller owns.
 * @oob_try_accept_stream: the stream @peer opened with @tag: *@fd_p >= 0, or
 *                         -1 when none yet.
 * @fail:         a fatal error on the connection to @peer (-1: none) with
 *                cause @text: the communicator logs it once (naming the
 *                operation, peer and host), fails, and returns its first
 *                error's status.
 * @status:       the communicator's first error, IBC_OK while healthy.
 */
struct ibc_tenv_ops {
	int (*same_host)(void *arg, int peer);
	const char *(*peer_host)(void *arg, int peer);
	ibc_status_t (*oob_send)(void *arg, int peer, uint32_t tag, const void *buf,
				 size_t nbytes);
	ibc_status_t (*oob_try_recv)(void *arg, int peer, uint32_t tag, void *buf, size_t nbytes,
				     int *got_p);
	ibc_status_t (*oob_connect_stream)(void *arg, int peer, uint32_t tag, int *fd_p);
	ibc_status_t (*oob_try_accept_stream)(void *arg, int peer, uint32_t tag, int *fd_p);
	ibc_status_t (*fail)(void *arg, ibc_status_t st, int peer, const char *text);
	ibc_status_t (*status)(void *arg);
};

static inline int ibc_tenv_same_host(const struct ibc_tenv *env, int peer)
{
	return env->ops->same_host(env->arg, peer);
}

static inline const char *ibc_tenv_peer_host(const struct ibc_tenv *env, int peer)
{
	return env->ops->peer_host(env->arg, peer);
}

static inline ibc_status_t ibc_tenv_oob_send(const struct ibc_tenv *env, int peer, uint32_t tag,
					     const void *buf, size_t nbytes)
{
	return env->ops->oob_send(env->arg, peer, tag, buf, nbytes);
}

static inline ibc_status_t ibc_tenv_oob_try_recv(const struct ibc_tenv *env, int peer,
						 uint32_t tag, void *buf, size_t nbytes, int *got_p)
{
	return env->ops->oob_try_recv(env->arg, peer, tag, buf, nbytes, got_p);
}

static inline ibc_status_t ibc_tenv_oob_connect_stream(const struct ibc_tenv *env, int peer,
						       uint32_t tag, int *fd_p)
{
	return env->ops->oob_connect_stream(env->arg, peer, tag, fd_p);
}

static inline ibc_status_t ibc_tenv_oob_try_accept_stream(const struct ibc_tenv *env, int peer,
							  uint32_t tag, int *fd_p)
{
	return env->ops->oob_try_accept_stream(env->arg, peer, tag, fd_p);
}

/* the communicator's first error, IBC_OK while healthy */
static inline ibc_status_t ibc_tenv_status(const struct ibc_tenv *env)
{
	return env->ops->status(env->arg);
}

/*
 * ibc_tenv_fail() - report a fatal error on the connection to @peer (-1:
 * none), the cause as printf(@fmt, ...), through @env's fail callback.
 * Return: the communicator's first error status (@st when this is it).
 */
ibc_status_t ibc_tenv_fail(const struct ibc_tenv *env, ibc_status_t st, int peer,
			   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * struct ibc_msg_desc - the operation a message belongs to; crosses the
 * wire (little-endian, 32 bytes) and is checked by the receiver.
 */
struct ibc_msg_desc {
	uint32_t seq;           /* collective sequence number, or per-pair p2p number */
	uint8_t coll;           /* enum ibc_coll_type */
	uint8_t dtype;          /* ibc_dtype_t */
	uint8_t op;             /* ibc_redop_t */
	uint8_t flags;          /* IBC_DESC_F_* */
	uint64_t count;         /* the operation's count argument, ELEMENTS */
	int32_t root;           /* root or peer rank, -1 when none */
	uint32_t step;          /* algorithm step, for diagnostics */
	uint64_t reserved;
};

#define IBC_MSG_DESC_WIRE_BYTES 32
#define IBC_DESC_F_ACCUM_FP32 0x1 /* payload is fp32 partial sums of a 16-bit dtype */
/*
 * IBC_DESC_F_LL: send by the transport's low-latency path when it has one
 * (IBC_TCAP_LL) and the message is small enough (IBC_LL_MAX_BYTES): data
 * with a flag or sequence word per line written straight into a
 * pre-registered peer buffer that the receiver polls, no rendezvous or
 * credit round trip per message (NCCL's LL). Both ends of a message set the
 * same flags (the descriptor check compares them); a transport without the
 * path ignores the flag. docs/algorithms.md describes the verbs version.
 */
#define IBC_DESC_F_LL 0x2
/*
 * IBC_DESC_F_INTERNAL: a message of an internal operation that runs on the
 * user operation's sequence number (the tuner's agreement, probe and race):
 * its collective, dtype and root are the internal operation's, so the
 * stray-message check (ibc_net_check_strays()) does not compare them with
 * the user's call.
 */
#define IBC_DESC_F_INTERNAL 0x4
/*
 * IBC_DESC_F_STAGED: an announcement (src/coll/shm_allreduce.c) of one
 * segment of an operation staged from device buffers (src/api/cuda_stage.c),
 * whose count is the segment's: a peer's count may differ from this rank's
 * while it finishes the previous segment of the same sequence number.
 */
#define IBC_DESC_F_STAGED 0x8

/*
 * ibc_msg_desc_set_internal() - mark @d as an internal exchange of the
 * user's collective @coll (@dtype, @count elements, count < 2^48): the
 * flag, and the user's call in @reserved for error texts.
 */
static inline void ibc_msg_desc_set_internal(struct ibc_msg_desc *d, int coll, int dtype,
					     uint64_t count)
{
	d->flags |= IBC_DESC_F_INTERNAL;
	d->reserved = ((uint64_t)(uint8_t)coll << 56) | ((uint64_t)(uint8_t)dtype << 48) |
		      (count & 0xffffffffffffull);
}

/* struct ibc_treq - one posted send or receive; memory owned by the caller. */
struct ibc_treq {
	int done;               /* set to 1 (release) by the transport on completion */
	ibc_status_t status;    /* valid once done */
	size_t nbytes;          /* posted size, bytes */
	int peer;               /* peer rank, set by the net layer */
	int is_send;
	int counted;            /* net layer: bytes added to the operation's progress */
	uint64_t *moved_p;      /* net layer: the operation's byte count, bumped on success */
	uint64_t priv[8];       /* transport scratch (e.g. parts left, slot index) */
};

/* transport capabilities and properties */
#define IBC_TCAP_HOST    0x1    /* host memory */
#define IBC_TCAP_CUDA    0x2    /* CUDA device memory directly (GPUDirect); per context */
#define IBC_TCAP_DMABUF  0x4
#define IBC_TCAP_LL      0x8    /* has a low-latency path for IBC_DESC_F_LL messages */
#define IBC_TCAP_LOCAL   0x10   /* peers share this host's memory (/dev/shm) */

/*
 * enum ibc_transport_id - which transport; fixed values: they name each
 * transport's range of out-of-band tags on the bootstrap wire.
 */
enum ibc_transport_id {
	IBC_TRANSPORT_SOCK = 1,
	IBC_TRANSPORT_SHM = 2,
	IBC_TRANSPORT_IB = 3,
	IBC_TRANSPORT_ID_COUNT
};

/*
 * enum ibc_tclass - latency and bandwidth class of a transport: the tuner
 * keeps one set of cost coefficients per class (values are the tuning
 * file's and the tuner's transport index).
 */
enum ibc_tclass {
	IBC_TCLASS_SHM = 0,     /* memory copies between processes of one host */
	IBC_TCLASS_TCP = 1,     /* kernel sockets */
	IBC_TCLASS_IB = 2,      /* RDMA NIC */
	IBC_TCLASS_COUNT
};

/*
 * struct ibc_transport_ops - the table one transport provides.
 * @name:       "tcp", "shm", "ib".
 * @id:         enum ibc_transport_id.
 * @tclass:     enum ibc_tclass.
 * @caps:       IBC_TCAP_* flags.
 * @init:       create the per-communicator context for @env (called once per
 *              communicator that uses this transport for at least one peer;
 *              @env stays valid until fini). Return IBC_OK,
 *              IBC_ERR_UNSUPPORTED (no usable device: the communicator then
 *              falls back to tcp when not forced), or an error.
 * @fini:       free the context; called after every connection was closed.
 * @device:     the device the context opened ("mlx5_0"), "" when none: the
 *              communicator binds its progress thread near it.
 * @connect:    nonblocking set-up of the connection to @peer (see contract).
 * @disconnect: close one connection; pending requests are abandoned.
 * @isend:      post a send of @nbytes from @buf, tagged with @desc.
 * @irecv:      post a receive of exactly @nbytes into @buf, expecting @desc.
 * @progress:   advance everything posted on this context; never blocks.
 * @wait:       sleep until activity is likely, at most @timeout_us.
 * @peek:       the next incoming message on @conn that no posted receive
 *              will take (none is posted), if its descriptor has arrived:
 *              1 with *@desc and *@nbytes (the message's size) filled in,
 *              else 0. Never blocks, consumes nothing, changes no state.
 *              NULL when the transport cannot tell (the net layer then
 *              finds such messages only when a receive takes them).
 * @reg_stats:  add this context's memory-registration counters to *@acc
 *              (read atomically; any thread); NULL for transports that
 *              register no memory.
 * @mem_register:   register [@buf, @buf + @nbytes) with the device now and
 *              keep it registered (*@reg_p) until @mem_deregister; any
 *              thread. NULL for transports that register no memory.
 * @mem_deregister: release what @mem_register returned.
 * @ctx_caps:   IBC_TCAP_* flags this context has beyond @caps, found at
 *              init (the verbs transport: IBC_TCAP_CUDA when a probe
 *              registration of device memory succeeded); NULL: none. Read
 *              them through ibc_transport_caps().
 */
struct ibc_transport_ops {
	const char *name;
	int id;
	int tclass;
	unsigned caps;
	ibc_status_t (*init)(const struct ibc_tenv *env, void **ctx_p);
	void (*fini)(void *ctx);
	const char *(*device)(void *ctx);
	ibc_status_t (*connect)(void *ctx, int peer, struct ibc_tconn **conn_p);
	void (*disconnect)(struct ibc_tconn *conn);
	ibc_status_t (*isend)(struct ibc_tconn *conn, const void *buf, size_t nbytes,
			      const struct ibc_msg_desc *desc, struct ibc_treq *req);
	ibc_status_t (*irecv)(struct ibc_tconn *conn, void *buf, size_t nbytes,
			      const struct ibc_msg_desc *desc, struct ibc_treq *req);
	ibc_status_t (*progress)(void *ctx);
	void (*wait)(void *ctx, int timeout_us);
	int (*peek)(struct ibc_tconn *conn, struct ibc_msg_desc *desc, size_t *nbytes);
	void (*reg_stats)(void *ctx, struct ibc_reg_stats *acc);
	ibc_status_t (*mem_register)(void *ctx, void *buf, size_t nbytes, void **reg_p);
	void (*mem_deregister)(void *ctx, void *reg);
	unsigned (*ctx_caps)(void *ctx);
};

/**
 * ibc_transport_caps() - The capabilities of one transport context.
 * @ops: [in] the transport's table.
 * @ctx: [in] a context from @ops->init; NULL: the table's static caps only.
 * Return: @ops->caps, plus @ops->ctx_caps(@ctx) when the transport has it.
 * Threading: any thread once init returned (the answer does not change).
 */
static inline unsigned ibc_transport_caps(const struct ibc_transport_ops *ops, void *ctx)
{
	return ops->caps | (ctx && ops->ctx_caps ? ops->ctx_caps(ctx) : 0u);
}

extern const struct ibc_transport_ops ibc_sock_ops;
extern const struct ibc_transport_ops ibc_shm_ops;
/* ibc_ib_ops is defined by src/transport/ib/ when built with verbs, and by
 * ib_stub.c (init returns IBC_ERR_UNSUPPORTED) otherwise */
extern const struct ibc_transport_ops ibc_ib_ops;

/* "" for transports that open no device */
const char *ibc_transport_no_device(void *ctx);

/* wire encoding of a descriptor (msg_desc.c) */
void ibc_msg_desc_pack(const struct ibc_msg_desc *d, uint8_t out[IBC_MSG_DESC_WIRE_BYTES]);
void ibc_msg_desc_unpack(const uint8_t in[IBC_MSG_DESC_WIRE_BYTES], struct ibc_msg_desc *d);

/*
 * ibc_msg_desc_mismatch() - 0 when the descriptor a receiver posted (@mine,
 * @my_nbytes) equals the one that arrived (@theirs, @their_nbytes); else 1,
 * with "mismatched calls: this rank expects ..., the peer sent ..." (both
 * sides' collective, seq, count, dtype, op, root, nbytes) in @text (@len).
 */
int ibc_msg_desc_mismatch(const struct ibc_msg_desc *mine, size_t my_nbytes,
			  const struct ibc_msg_desc *theirs, size_t their_nbytes, char *text,
			  size_t len);

/*
 * ibc_msg_desc_text() - @d as "broadcast #5 count 1000 int32 root 1 step 0x0
 * flags 0x0 (4000 bytes)" into @buf (@len): the text of mismatch reports.
 */
void ibc_msg_desc_text(const struct ibc_msg_desc *d, size_t nbytes, char *buf, size_t len);

/*
 * ibc_msg_desc_check() - compare the descriptor a receiver posted with the
 * one that arrived from @peer. On mismatch, reports through @env one error
 * naming both sides' values (collective, seq, count, dtype, op, root,
 * nbytes), which fails the communicator, and returns IBC_ERR_INVALID_USAGE
 * (or the communicator's earlier error); IBC_OK when equal.
 */
ibc_status_t ibc_msg_desc_check(const struct ibc_tenv *env, int peer, const struct ibc_msg_desc *mine,
				size_t my_nbytes, const struct ibc_msg_desc *theirs,
				size_t their_nbytes);

/* set req done with @st (release store) */
static inline void ibc_treq_complete(struct ibc_treq *req, ibc_status_t st)
{
	if (st == IBC_OK && req->moved_p && !req->counted) {
		/* "bytes moved so far" in error messages */
		req->counted = 1;
		__atomic_add_fetch(req->moved_p, req->nbytes, __ATOMIC_RELAXED);
	}
	req->status = st;
	__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static inline int ibc_treq_is_done(const struct ibc_treq *req)
{
	return __atomic_load_n(&req->done, __ATOMIC_ACQUIRE);
}

#endif /* IBC_TRANSPORT_H */
