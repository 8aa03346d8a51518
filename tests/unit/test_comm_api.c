/* SPDX-License-Identifier: MIT */
/*
 * test_comm_api.c - the public API's argument and handle checks on a
 * one-rank communicator (no peers needed): bad arguments return
 * IBC_ERR_INVALID_ARG, and every call on a destroyed handle returns
 * IBC_ERR_INVALID_USAGE instead of reading freed memory (run under ASan by
 * tests/reliability/test_asan_build.sh); a one-rank all-reduce, send-less
 * collectives and the queries return exact values.
 */
#include "config.h"

#include <string.h>

#include "ibcoll.h"
#include "tap.h"

int main(void)
{
	ibc_unique_id_t id;
	ibc_comm_h comm = NULL;
	ibc_comm_h dead;
	ibc_request_h req = NULL;
	const char *name = NULL;
	ibc_status_t async = IBC_ERR_INTERNAL;
	int32_t in[7] = { 1, 2, 3, 4, 5, 6, 7 };
	int32_t out[7] = { 0 };
	int rank = -1;
	int size = -1;
	int i;
	int same = 1;

	tap_is_int(ibc_get_unique_id(&id), IBC_OK, "ibc_get_unique_id");
	tap_is_int(ibc_comm_init_rank(&comm, 1, &id, 0), IBC_OK, "1-rank ibc_comm_init_rank");
	tap_is_int(ibc_comm_init_rank(&dead, 1, &id, 1), IBC_ERR_INVALID_ARG, "rank 1 of 1 is invalid");
	tap_is_int(ibc_comm_init_rank(&dead, 0, &id, 0), IBC_ERR_INVALID_ARG, "0 ranks is invalid");
	tap_is_int(ibc_comm_rank(comm, &rank), IBC_OK, "ibc_comm_rank");
	tap_is_int(rank, 0, "rank is 0");
	tap_is_int(ibc_comm_size(comm, &size), IBC_OK, "ibc_comm_size");
	tap_is_int(size, 1, "size is 1");
	tap_is_int(ibc_comm_rank(comm, NULL), IBC_ERR_INVALID_ARG, "ibc_comm_rank(NULL out)");
	tap_is_int(ibc_comm_transport(comm, &name), IBC_OK, "ibc_comm_transport");
	tap_ok(name && *name, "transport name '%s'", name ? name : "(null)");
	tap_is_int(ibc_comm_get_async_error(comm, &async), IBC_OK, "ibc_comm_get_async_error");
	tap_is_int(async, IBC_OK, "no async error on a healthy communicator");

	tap_is_int(ibc_allreduce(in, out, 7, IBC_INT32, IBC_SUM, comm), IBC_OK, "1-rank all-reduce");
	for (i = 0; i < 7; i++)
		same &= out[i] == in[i];
	tap_ok(same, "1-rank all-reduce copies the input");
	tap_is_int(ibc_allreduce(in, out, 7, (ibc_dtype_t)99, IBC_SUM, comm), IBC_ERR_INVALID_ARG,
		   "unknown dtype");
	tap_is_int(ibc_allreduce(in, out, 7, IBC_INT32, (ibc_redop_t)99, comm), IBC_ERR_INVALID_ARG,
		   "unknown op");
	tap_is_int(ibc_allreduce(NULL, out, 7, IBC_INT32, IBC_SUM, comm), IBC_ERR_INVALID_ARG,
		   "NULL sendbuf with count 7");
	tap_is_int(ibc_send(in, 7, IBC_INT32, 0, comm), IBC_ERR_INVALID_ARG, "send to self");
	tap_is_int(ibc_recv(out, 7, IBC_INT32, 3, comm), IBC_ERR_INVALID_ARG, "recv from rank 3 of 1");
	tap_is_int(ibc_broadcast(in, out, 7, IBC_INT32, 1, comm), IBC_ERR_INVALID_ARG, "root 1 of 1");
	tap_is_int(ibc_allreduce(NULL, NULL, 0, IBC_INT32, IBC_SUM, comm), IBC_OK,
		   "count 0 with NULL buffers");
	tap_is_int(ibc_barrier(comm), IBC_OK, "1-rank barrier");

	dead = comm;
	tap_is_int(ibc_comm_destroy(comm), IBC_OK, "ibc_comm_destroy");
	tap_is_int(ibc_comm_rank(dead, &rank), IBC_ERR_INVALID_USAGE, "ibc_comm_rank on a destroyed handle");
	tap_is_int(ibc_comm_size(dead, &size), IBC_ERR_INVALID_USAGE, "ibc_comm_size on a destroyed handle");
	tap_is_int(ibc_comm_transport(dead, &name), IBC_ERR_INVALID_USAGE,
		   "ibc_comm_transport on a destroyed handle");
	tap_is_int(ibc_comm_get_async_error(dead, &async), IBC_ERR_INVALID_USAGE,
		   "ibc_comm_get_async_error on a destroyed handle");
	tap_is_int(ibc_allreduce(in, out, 7, IBC_INT32, IBC_SUM, dead), IBC_ERR_INVALID_USAGE,
		   "ibc_allreduce on a destroyed handle");
	tap_is_int(ibc_iallreduce(in, out, 7, IBC_INT32, IBC_SUM, dead, &req), IBC_ERR_INVALID_USAGE,
		   "ibc_iallreduce on a destroyed handle");
	tap_ok(req == NULL, "no request written on failure");
	tap_is_int(ibc_comm_destroy(dead), IBC_ERR_INVALID_USAGE, "second ibc_comm_destroy");
	tap_is_int(ibc_comm_abort(dead), IBC_ERR_INVALID_USAGE, "ibc_comm_abort after destroy");
	tap_ok(strlen(ibc_last_error()) > 0, "ibc_last_error() explains: %s", ibc_last_error());
	return tap_done();
}
