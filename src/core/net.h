/* SPDX-License-Identifier: MIT */
/*
 * net.h - what algorithms use to talk to peers: connection set-up for the
 * peers an operation needs, posted sends/receives dispatched to each peer's
 * transport, and bounded waits that progress every transport of the
 * communicator, notice poisoning and abort, and turn a stall longer than
 * IBC_TIMEOUT_MS into IBC_ERR_TIMEOUT naming the peers still owed data.
 */
#ifndef IBC_NET_H
#define IBC_NET_H

#include "comm.h"
#include "transport/transport.h"

/*
 * ibc_net_connect() - make sure @comm is connected to each of @peers (self
 * and duplicates ignored). Drives every transport's nonblocking connect
 * round-robin, so ranks that need several peers in different orders never
 * deadlock. Bounded by IBC_BOOTSTRAP_TIMEOUT_MS.
 */
ibc_status_t ibc_net_connect(struct ibc_comm *comm, const int *peers, int npeers);

/*
 * ibc_net_connect_try() - one nonblocking connect step towards @peer:
 * IBC_OK once connected, IBC_INPROGRESS while the handshake is under way
 * (call again), or the failure (communicator failed, peer named).
 */
ibc_status_t ibc_net_connect_try(struct ibc_comm *comm, int peer);

/* post a send/receive of @nbytes to/from @peer (connected), tagged with @desc */
ibc_status_t ibc_net_isend(struct ibc_comm *comm, int peer, const void *buf, size_t nbytes,
			   const struct ibc_msg_desc *desc, struct ibc_treq *req);
ibc_status_t ibc_net_irecv(struct ibc_comm *comm, int peer, void *buf, size_t nbytes,
			   const struct ibc_msg_desc *desc, struct ibc_treq *req);

/* progress every transport once; IBC_OK or the first fatal error */
ibc_status_t ibc_net_progress(struct ibc_comm *comm);

/*
 * ibc_net_waitall() / ibc_net_waitany() - wait until @reqs[i] is done for every i < @n (NULL entries
 * skipped), or, with @any, until at least one not-yet-consumed request is
 * done. Spins IBC_SPIN_US after progress, then sleeps in the transports'
 * wait(). Returns the first failed request's status, the poison status, or
 * IBC_ERR_TIMEOUT after IBC_TIMEOUT_MS without any completion.
 */
ibc_status_t ibc_net_waitall(struct ibc_comm *comm, struct ibc_treq *const *reqs, int n);
ibc_status_t ibc_net_waitany(struct ibc_comm *comm, struct ibc_treq *const *reqs, int n);
ibc_status_t ibc_net_wait1(struct ibc_comm *comm, struct ibc_treq *req);
/*
 * ibc_net_wait_p2p() - ibc_net_waitany(), but also returns IBC_INPROGRESS as
 * soon as a host send or receive reaches the head of @comm's queue (the
 * executor's p2p batch then posts it next to @reqs).
 */
ibc_status_t ibc_net_wait_p2p(struct ibc_comm *comm, struct ibc_treq *const *reqs, int n);

/*
 * ibc_net_desc_check() - ibc_msg_desc_check() for the layers above the
 * transports (the shm all-reduce compares descriptors itself): a mismatch
 * fails @comm naming @peer; IBC_ERR_INVALID_USAGE, or IBC_OK when equal.
 */
ibc_status_t ibc_net_desc_check(struct ibc_comm *comm, int peer, const struct ibc_msg_desc *mine,
				size_t my_nbytes, const struct ibc_msg_desc *theirs,
				size_t their_nbytes);

/* 1 if @req is done (after one progress pass) */
ibc_status_t ibc_net_test(struct ibc_comm *comm, struct ibc_treq *req, int *done_p);

#endif /* IBC_NET_H */
