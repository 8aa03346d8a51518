/* SPDX-License-Identifier: MIT */
/*
 * missing_api.hpp - the C calls the torch binding needs that include/ibcoll.h
 * does not have yet, one wrapper each (ibct_<name> for ibc_<name>).
 *
 * Each wrapper calls the library function when configure found it declared
 * in include/ibcoll.h (IBCT_HAVE_<NAME>, from m4/ibc_check_torch.m4's
 * AC_CHECK_DECLS), else returns IBC_ERR_UNSUPPORTED, which the binding turns
 * into "ibcoll: <op> not supported yet (needs ibc_<name>)". So once the
 * library has a function with the signature proposed in docs/torch.md
 * ("Missing C API"), a reconfigure wires the op with no edit here. This is
 * the only file of the binding with #if on a feature (STYLE.md C11.5).
 */
#ifndef IBCOLL_TORCH_MISSING_API_HPP
#define IBCOLL_TORCH_MISSING_API_HPP

#include <stddef.h>

#include "ibcoll.h"

/* 1 where configure found the declaration in include/ibcoll.h */
#ifndef IBCT_HAVE_IGATHER
#define IBCT_HAVE_IGATHER 0
#endif
#ifndef IBCT_HAVE_ISCATTER
#define IBCT_HAVE_ISCATTER 0
#endif
#ifndef IBCT_HAVE_IALLGATHERV
#define IBCT_HAVE_IALLGATHERV 0
#endif
#ifndef IBCT_HAVE_IALLTOALLV
#define IBCT_HAVE_IALLTOALLV 0
#endif
#ifndef IBCT_HAVE_ISEND_TAG
#define IBCT_HAVE_ISEND_TAG 0
#endif
#ifndef IBCT_HAVE_IRECV_TAG
#define IBCT_HAVE_IRECV_TAG 0
#endif
#ifndef IBCT_HAVE_GROUP_START
#define IBCT_HAVE_GROUP_START 0
#endif
#ifndef IBCT_HAVE_COMM_SET_TIMEOUT
#define IBCT_HAVE_COMM_SET_TIMEOUT 0
#endif

namespace ibcoll_torch {

static inline ibc_status_t ibct_igather(const void *sendbuf, void *recvbuf, size_t sendcount,
					ibc_dtype_t dtype, int root, ibc_comm_h comm,
					ibc_request_h *req_p)
{
#if IBCT_HAVE_IGATHER
	return ibc_igather(sendbuf, recvbuf, sendcount, dtype, root, comm, req_p);
#else
	(void)sendbuf, (void)recvbuf, (void)sendcount, (void)dtype, (void)root, (void)comm;
	(void)req_p;
	return IBC_ERR_UNSUPPORTED;
#endif
}

static inline ibc_status_t ibct_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount,
					 ibc_dtype_t dtype, int root, ibc_comm_h comm,
					 ibc_request_h *req_p)
{
#if IBCT_HAVE_ISCATTER
	return ibc_iscatter(sendbuf, recvbuf, recvcount, dtype, root, comm, req_p);
#else
	(void)sendbuf, (void)recvbuf, (void)recvcount, (void)dtype, (void)root, (void)comm;
	(void)req_p;
	return IBC_ERR_UNSUPPORTED;
#endif
}

static inline ibc_status_t ibct_iallgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
					    const size_t *recvcounts, const size_t *rdispls,
					    ibc_dtype_t dtype, ibc_comm_h comm,
					    ibc_request_h *req_p)
{
#if IBCT_HAVE_IALLGATHERV
	return ibc_iallgatherv(sendbuf, recvbuf, sendcount, recvcounts, rdispls, dtype, comm,
			       req_p);
#else
	(void)sendbuf, (void)recvbuf, (void)sendcount, (void)recvcounts, (void)rdispls;
	(void)dtype, (void)comm, (void)req_p;
	return IBC_ERR_UNSUPPORTED;
#endif
}

static inline ibc_status_t ibct_ialltoallv(const void *sendbuf, void *recvbuf,
					   const size_t *sendcounts, const size_t *sdispls,
					   const size_t *recvcounts, const size_t *rdispls,
					   ibc_dtype_t dtype, ibc_comm_h comm, ibc_request_h *req_p)
{
#if IBCT_HAVE_IALLTOALLV
	return ibc_ialltoallv(sendbuf, recvbuf, sendcounts, sdispls, recvcounts, rdispls, dtype,
			      comm, req_p);
#else
	(void)sendbuf, (void)recvbuf, (void)sendcounts, (void)sdispls, (void)recvcounts;
	(void)rdispls, (void)dtype, (void)comm, (void)req_p;
	return IBC_ERR_UNSUPPORTED;
#endif
}

static inline ibc_status_t ibct_isend_tag(const void *buf, size_t count, ibc_dtype_t dtype,
					  int peer, int tag, ibc_comm_h comm, ibc_request_h *req_p)
{
#if IBCT_HAVE_ISEND_TAG
	return ibc_isend_tag(buf, count, dtype, peer, tag, comm, req_p);
#else
	(void)buf, (void)count, (void)dtype, (void)peer, (void)tag, (void)comm, (void)req_p;
	return IBC_ERR_UNSUPPORTED;
#endif
}

/* @peer may be IBCT_ANY_SOURCE; @source_p gets the sender's rank */
static inline ibc_status_t ibct_irecv_tag(void *buf, size_t count, ibc_dtype_t dtype, int peer,
					  int tag, int *source_p, ibc_comm_h comm,
					  ibc_request_h *req_p)
{
#if IBCT_HAVE_IRECV_TAG
	return ibc_irecv_tag(buf, count, dtype, peer, tag, source_p, comm, req_p);
#else
	(void)buf, (void)count, (void)dtype, (void)peer, (void)tag, (void)source_p, (void)comm;
	(void)req_p;
	return IBC_ERR_UNSUPPORTED;
#endif
}

#if IBCT_HAVE_IRECV_TAG
#define IBCT_ANY_SOURCE IBC_ANY_SOURCE
#else
#define IBCT_ANY_SOURCE (-1)
#endif

/*
 * Without ibc_group_start/end the binding relies on the executor keeping
 * consecutive isend/irecv calls of one communicator in flight together
 * (src/coll/p2p.c, tested by tests/coll/p2p_check "isend both ways before
 * irecv"), so a coalesced batch of sends and receives works already; these
 * then do nothing and say so through @grouped_p.
 */
static inline ibc_status_t ibct_group_start(ibc_comm_h comm, int *grouped_p)
{
#if IBCT_HAVE_GROUP_START
	*grouped_p = 1;
	return ibc_group_start(comm);
#else
	(void)comm;
	*grouped_p = 0;
	return IBC_OK;
#endif
}

static inline ibc_status_t ibct_group_end(ibc_comm_h comm)
{
#if IBCT_HAVE_GROUP_START
	return ibc_group_end(comm);
#else
	(void)comm;
	return IBC_OK;
#endif
}

/* per-communicator timeout; without it the process-wide IBC_TIMEOUT_MS applies */
static inline ibc_status_t ibct_comm_set_timeout(ibc_comm_h comm, int64_t timeout_ms)
{
#if IBCT_HAVE_COMM_SET_TIMEOUT
	return ibc_comm_set_timeout(comm, timeout_ms);
#else
	(void)comm, (void)timeout_ms;
	return IBC_ERR_UNSUPPORTED;
#endif
}

} // namespace ibcoll_torch

#endif /* IBCOLL_TORCH_MISSING_API_HPP */
