/* SPDX-License-Identifier: MIT */
/*
 * ib_stub.c - ibc_ib_ops for builds without libibverbs: every operation
 * reports IBC_ERR_UNSUPPORTED, so the communicator falls back to tcp (or
 * fails clearly when IBC_TRANSPORT=ib forces verbs).
 */
#include "config.h"

#include "core/util.h"
#include "transport/transport.h"

static ibc_status_t ib_stub_init(struct ibc_comm *comm, void **ctx_p)
{
	IBC_LOG_INFO(NET, "verbs transport not built (configure found no libibverbs)");
	return IBC_ERR_UNSUPPORTED;
}

static void ib_stub_fini(void *ctx)
{
}

static ibc_status_t ib_stub_connect(void *ctx, int peer, struct ibc_tconn **conn_p)
{
	return IBC_ERR_UNSUPPORTED;
}

static void ib_stub_disconnect(struct ibc_tconn *conn)
{
}

static ibc_status_t ib_stub_post(struct ibc_tconn *conn, const void *buf, size_t nbytes,
				 const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	return IBC_ERR_UNSUPPORTED;
}

static ibc_status_t ib_stub_post_recv(struct ibc_tconn *conn, void *buf, size_t nbytes,
				      const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	return IBC_ERR_UNSUPPORTED;
}

static ibc_status_t ib_stub_progress(void *ctx)
{
	return IBC_ERR_UNSUPPORTED;
}

static void ib_stub_wait(void *ctx, int timeout_us)
{
}

const struct ibc_transport_ops ibc_ib_ops = {
	.name = "ib",
	.caps = 0,
	.init = ib_stub_init,
	.fini = ib_stub_fini,
	.connect = ib_stub_connect,
	.disconnect = ib_stub_disconnect,
	.isend = ib_stub_post,
	.irecv = ib_stub_post_recv,
	.progress = ib_stub_progress,
	.wait = ib_stub_wait,
};
