/* SPDX-License-Identifier: MIT */
/*
 * ib_stub.c - the verbs transport in a build without libibverbs
 * (--with-verbs=no or not found): an ops table whose init returns
 * IBC_ERR_UNSUPPORTED, so that communicators fall back to tcp (or fail
 * clearly when IBC_TRANSPORT=ib forces it), and the ibc_info device
 * listing. The only ib file compiled without HAVE_VERBS.
 */
#include "config.h"

#include "base/log.h"
#include "transport/ib/ib_info.h"
#include "transport/transport.h"

static ibc_status_t ib_stub_init(const struct ibc_tenv *env, void **ctx_p)
{
	(void)env;
	(void)ctx_p;
	IBC_LOG_INFO(IB, "ib: this ibcoll was built without libibverbs (configure --with-verbs)");
	return IBC_ERR_UNSUPPORTED;
}

static void ib_stub_fini(void *ctx)
{
	(void)ctx;
}

static ibc_status_t ib_stub_connect(void *ctx, int peer, struct ibc_tconn **conn_p)
{
	(void)ctx;
	(void)peer;
	(void)conn_p;
	return IBC_ERR_UNSUPPORTED;
}

static void ib_stub_disconnect(struct ibc_tconn *conn)
{
	(void)conn;
}

static ibc_status_t ib_stub_isend(struct ibc_tconn *conn, const void *buf, size_t nbytes,
				  const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	(void)conn;
	(void)buf;
	(void)nbytes;
	(void)desc;
	(void)req;
	return IBC_ERR_UNSUPPORTED;
}

static ibc_status_t ib_stub_irecv(struct ibc_tconn *conn, void *buf, size_t nbytes,
				  const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	(void)conn;
	(void)buf;
	(void)nbytes;
	(void)desc;
	(void)req;
	return IBC_ERR_UNSUPPORTED;
}

static ibc_status_t ib_stub_progress(void *ctx)
{
	(void)ctx;
	return IBC_ERR_UNSUPPORTED;
}

static void ib_stub_wait(void *ctx, int timeout_us)
{
	(void)ctx;
	(void)timeout_us;
}

const struct ibc_transport_ops ibc_ib_ops = {
	.name = "ib",
	.id = IBC_TRANSPORT_IB,
	.tclass = IBC_TCLASS_IB,
	.caps = 0,
	.init = ib_stub_init,
	.fini = ib_stub_fini,
	.device = ibc_transport_no_device,
	.connect = ib_stub_connect,
	.disconnect = ib_stub_disconnect,
	.isend = ib_stub_isend,
	.irecv = ib_stub_irecv,
	.progress = ib_stub_progress,
	.wait = ib_stub_wait,
};

void ibc_ib_print_devices(FILE *out)
{
	fprintf(out, "# verbs devices: not available (ibcoll built without libibverbs)\n");
}

void ibc_ib_print_reg_policy(FILE *out)
{
	fprintf(out, "# verbs registration cache: not built (no libibverbs)\n");
}
