/* SPDX-License-Identifier: MIT */
/*
 * transport.h - the interface every transport (tcp, shm, ib) implements and
 * the only transport header that src/coll/ and src/core/ see (STYLE C1, C8).
 * Modelled on NCCL's ncclNet and UCX's uct: a per-communicator context,
 * nonblocking connection set-up, and posted sends/receives matched in order
 * per direction of a connection.
 *
 * Contract for implementers:
 *  - connect(ctx, peer, &conn) is a nonblocking state machine: it returns
 *    IBC_INPROGRESS until the connection is ready, then IBC_OK with *conn
 *    set. The net layer calls it round-robin for every peer an operation
 *    needs, so a transport may exchange several rounds of messages with
 *    ibc_bootstrap_send()/ibc_bootstrap_try_recv() (which never block on the
 *    peer) without deadlock. It must never block for more than a few ms.
 *  - isend/irecv post one message; messages on one connection are matched
 *    in posting order per direction, and the receiver posts exactly the
 *    sender's nbytes. Every message carries the sender's struct
 *    ibc_msg_desc; the receiving side compares it with its own through
 *    ibc_msg_desc_check() (core/net.c) and fails the request on mismatch,
 *    so that ranks that called different collectives get an error, not a
 *    hang. Buffers stay owned by the caller until the request is done.
 *  - progress(ctx) advances everything posted and never blocks; it sets
 *    req->status then req->done (release store) on completion. A fatal
 *    connection error is reported once through ibc_comm_fail() (which logs
 *    one line naming the operation, peer rank and host, transport and bytes
 *    done) and returned.
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

struct ibc_comm;
struct ibc_tconn;               /* a transport's connection to one peer (private) */

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

/* struct ibc_treq - one posted send or receive; memory owned by the caller. */
struct ibc_treq {
	int done;               /* set to 1 (release) by the transport on completion */
	ibc_status_t status;    /* valid once done */
	size_t nbytes;          /* posted size, bytes */
	int peer;               /* peer rank, set by the net layer */
	int is_send;
	int counted;            /* net layer: bytes added to the operation's progress */
	uint64_t priv[8];       /* transport scratch (e.g. parts left, slot index) */
};

/* transport capabilities */
#define IBC_TCAP_HOST    0x1    /* host memory */
#define IBC_TCAP_CUDA    0x2    /* CUDA device memory directly (GPUDirect) */
#define IBC_TCAP_DMABUF  0x4

/*
 * struct ibc_transport_ops - the table one transport provides.
 * @name:       "tcp", "shm", "ib".
 * @caps:       IBC_TCAP_* flags.
 * @init:       create the per-communicator context (called once per comm that
 *              uses this transport for at least one peer). May use the
 *              bootstrap. Return IBC_OK, IBC_ERR_UNSUPPORTED (no usable
 *              device: the comm then falls back to tcp when not forced), or
 *              an error.
 * @fini:       free the context; called after every connection was closed.
 * @connect:    nonblocking set-up of the connection to @peer (see contract).
 * @disconnect: close one connection; pending requests are abandoned.
 * @isend:      post a send of @nbytes from @buf, tagged with @desc.
 * @irecv:      post a receive of exactly @nbytes into @buf, expecting @desc.
 * @progress:   advance everything posted on this context; never blocks.
 * @wait:       sleep until activity is likely, at most @timeout_us.
 */
struct ibc_transport_ops {
	const char *name;
	unsigned caps;
	ibc_status_t (*init)(struct ibc_comm *comm, void **ctx_p);
	void (*fini)(void *ctx);
	ibc_status_t (*connect)(void *ctx, int peer, struct ibc_tconn **conn_p);
	void (*disconnect)(struct ibc_tconn *conn);
	ibc_status_t (*isend)(struct ibc_tconn *conn, const void *buf, size_t nbytes,
			      const struct ibc_msg_desc *desc, struct ibc_treq *req);
	ibc_status_t (*irecv)(struct ibc_tconn *conn, void *buf, size_t nbytes,
			      const struct ibc_msg_desc *desc, struct ibc_treq *req);
	ibc_status_t (*progress)(void *ctx);
	void (*wait)(void *ctx, int timeout_us);
};

extern const struct ibc_transport_ops ibc_sock_ops;
extern const struct ibc_transport_ops ibc_shm_ops;
/* ibc_ib_ops is defined by src/transport/ib/ when built with verbs, and by
 * transport_stubs.c (init returns IBC_ERR_UNSUPPORTED) otherwise */
extern const struct ibc_transport_ops ibc_ib_ops;

/* wire encoding of a descriptor (net.c) */
void ibc_msg_desc_pack(const struct ibc_msg_desc *d, uint8_t out[IBC_MSG_DESC_WIRE_BYTES]);
void ibc_msg_desc_unpack(const uint8_t in[IBC_MSG_DESC_WIRE_BYTES], struct ibc_msg_desc *d);

/*
 * ibc_msg_desc_check() - compare the descriptor a receiver posted with the
 * one that arrived from @peer. On mismatch, logs one ERROR naming both
 * sides' values (collective, seq, count, dtype, op, root, nbytes), poisons
 * the communicator and returns IBC_ERR_INVALID_USAGE; IBC_OK when equal.
 */
ibc_status_t ibc_msg_desc_check(struct ibc_comm *comm, int peer, const struct ibc_msg_desc *mine,
				size_t my_nbytes, const struct ibc_msg_desc *theirs,
				size_t their_nbytes);

/* set req done with @st (release store) */
static inline void ibc_treq_complete(struct ibc_treq *req, ibc_status_t st)
{
	req->status = st;
	__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static inline int ibc_treq_is_done(const struct ibc_treq *req)
{
	return __atomic_load_n(&req->done, __ATOMIC_ACQUIRE);
}

#endif /* IBC_TRANSPORT_H */
