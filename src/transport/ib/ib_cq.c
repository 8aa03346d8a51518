/* SPDX-License-Identifier: MIT */
/*
 * ib_cq.c - the transport context of one port: device, PD, the completion
 * queue shared by all its connections with its completion channel, the
 * progress engine (poll CQ, dispatch to ib_conn.c), the idle wait that
 * sleeps on the completion channel instead of burning a core, and async
 * events (port down, QP fatal) turned into connection errors. Relies on
 * ib.h, ib_device.c (GID table), ib_mr.c, ib_conn.c.
 */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/util.h"
#include "transport/ib/ib.h"
#include "transport/ib/ib_conn_internal.h"

#define IB_CQ_INITIAL_CQES  1024
#define IB_POLL_BATCH       32
#define IB_ASYNC_CHECK_NS   (10ull * 1000 * 1000)
#define IB_LL_WAIT_US       20  /* longest sleep while LL memory is polled */

/**
 * ibc_ib_params_from_env() - Read the ib section of params.def.
 * @p: [out] the values (cached getters: read once per process).
 */
void ibc_ib_params_from_env(struct ibc_ib_params *p)
{
	p->gid_index = (int)ibc_param_ib_gid_index();
	p->timeout = (int)ibc_param_ib_timeout();
	p->retry_cnt = (int)ibc_param_ib_retry_cnt();
	p->nqps = (int)ibc_param_ib_qps_per_conn();
	p->depth = (int)ibc_param_ib_depth();
	p->inline_bytes = (int)ibc_param_ib_inline_bytes();
	p->bounce_bytes = (size_t)ibc_param_ib_bounce_bytes();
	p->stripe_min_bytes = (size_t)ibc_param_ib_stripe_min_bytes();
	p->reg_cache_bytes = (size_t)ibc_param_ib_reg_cache_bytes();
	p->probe_ms = (int)ibc_param_ib_probe_ms();
	p->sl = (int)ibc_param_ib_sl();
	p->tc = (int)ibc_param_ib_tc();
	p->ll_max_bytes = (size_t)ibc_param_ll_max_bytes();
	p->eager_bytes = (size_t)ibc_param_ib_eager_bytes();
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* open @dev_name by name; NULL (errno set) when absent */
static struct ibv_context *ctx_open_device(const char *dev_name)
{
	struct ibv_device **list;
	struct ibv_context *vctx = NULL;
	int n = 0;
	int i;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	errno = ENODEV;
	for (i = 0; i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), dev_name))
			continue;
		if (ibc_fault_hit(IBC_FAULT_VERBS, "ibv_open_device"))
			errno = ENOMEM;
		else
			vctx = ibv_open_device(list[i]);
		break;
	}
	ibv_free_device_list(list);
	return vctx;
}

static ibc_status_t ctx_read_gids(struct ibc_ib_ctx *ctx)
{
	struct ibc_ib_gid_entry *tbl;
	ibc_status_t st;
	int k;
	int i;

	tbl = ibc_calloc(IBC_IB_GID_TBL_MAX, sizeof(*tbl), "gid table");
	if (!tbl)
		return IBC_ERR_NO_MEMORY;
	k = ibc_ib_port_gids(ctx->vctx, ctx->port, tbl, IBC_IB_GID_TBL_MAX);
	if (k < 0) {
		IBC_LOG_WARN(IB, "cannot read the GID table of %s:%d", ctx->dev_name, ctx->port);
		ibc_free(tbl);
		return IBC_ERR_VERBS;
	}
	st = ibc_ib_gid_cands_build(tbl, k, ctx->prm.gid_index, &ctx->gids);
	for (i = 0; st == IBC_OK && i < IBC_IB_GID_CLASS_COUNT; i++)
		if (ctx->gids.index[i] >= 0)
			break;
	if (st == IBC_OK && i == IBC_IB_GID_CLASS_COUNT) {
		IBC_LOG_WARN(IB, "%s:%d is a RoCE port without a usable GID (%d valid entries)",
			     ctx->dev_name, ctx->port, k);
		st = IBC_ERR_UNSUPPORTED;
	}
	ibc_free(tbl);
	return st;
}

/**
 * ibc_ib_ctx_create() - Open a port and create the objects its connections
 * share: PD, completion channel, CQ, registration cache.
 * @dev_name: [in]  verbs device, e.g. "rxe0".
 * @port:     [in]  1-based port number; it must be ACTIVE.
 * @prm:      [in]  parameters (ibc_ib_params_from_env(), or a test's own).
 * @cb:       [in]  error and descriptor-check callbacks (copied).
 * @ctx_p:    [out] the context, written on success.
 *
 * Blocking: verbs set-up calls (ms). Threading: the context is then used
 * by one thread at a time (the communicator's progress thread).
 * Return: IBC_OK; IBC_ERR_UNSUPPORTED (no such device, port not ACTIVE,
 *         RoCE port without GID); IBC_ERR_INVALID_ARG (IBC_IB_GID_INDEX
 *         names no GID); IBC_ERR_VERBS; IBC_ERR_NO_MEMORY; IBC_ERR_SYSTEM.
 */
ibc_status_t ibc_ib_ctx_create(const char *dev_name, int port, const struct ibc_ib_params *prm,
			       const struct ibc_ib_ctx_cb *cb, struct ibc_ib_ctx **ctx_p)
{
	struct ibc_ib_mr_backend be;
	struct ibc_ib_ctx *ctx;
	ibc_status_t st;

	ctx = ibc_calloc(1, sizeof(*ctx), "ib context");
	if (!ctx)
		return IBC_ERR_NO_MEMORY;
	snprintf(ctx->dev_name, sizeof(ctx->dev_name), "%s", dev_name);
	ctx->port = port;
	ctx->prm = *prm;
	ctx->cb = *cb;
	ctx->vctx = ctx_open_device(dev_name);
	if (!ctx->vctx) {
		IBC_LOG_WARN(IB, "cannot open verbs device %s: %s", dev_name, strerror(errno));
		st = errno == ENODEV ? IBC_ERR_UNSUPPORTED : IBC_ERR_VERBS;
		goto err_free;
	}
	IBC_VERBS_CHECK_GOTO(ibv_query_device(ctx->vctx, &ctx->dev_attr), st, err_close);
	IBC_VERBS_CHECK_GOTO(ibv_query_port(ctx->vctx, (uint8_t)port, &ctx->port_attr), st, err_close);
	if (ctx->port_attr.state != IBV_PORT_ACTIVE) {
		IBC_LOG_WARN(IB, "port %s:%d is %s, not ACTIVE", dev_name, port,
			     ibv_port_state_str(ctx->port_attr.state));
		st = IBC_ERR_UNSUPPORTED;
		goto err_close;
	}
	ctx->link_layer = ctx->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET ?
				  IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
	if (ctx->link_layer == IBV_LINK_LAYER_ETHERNET)
		IBC_CHECK_GOTO(ctx_read_gids(ctx), st, err_close);
	ctx->max_msg_bytes = ctx->port_attr.max_msg_sz ? ctx->port_attr.max_msg_sz : (1u << 30);
	if (ctx->max_msg_bytes > (1u << 30))
		ctx->max_msg_bytes = 1u << 30;
	if (ibc_fault_hit(IBC_FAULT_VERBS, "ibv_alloc_pd"))
		ctx->pd = NULL;
	else
		ctx->pd = ibv_alloc_pd(ctx->vctx);
	if (!ctx->pd) {
		IBC_LOG_WARN(IB, "ibv_alloc_pd on %s failed: %s", dev_name, strerror(errno));
		st = IBC_ERR_VERBS;
		goto err_close;
	}
	ctx->channel = ibv_create_comp_channel(ctx->vctx);
	if (!ctx->channel) {
		IBC_LOG_WARN(IB, "ibv_create_comp_channel on %s failed: %s", dev_name, strerror(errno));
		st = IBC_ERR_VERBS;
		goto err_pd;
	}
	if (set_nonblock(ctx->channel->fd) || set_nonblock(ctx->vctx->async_fd)) {
		IBC_LOG_WARN(IB, "cannot make the verbs event fds of %s non-blocking: %s", dev_name,
			     strerror(errno));
		st = IBC_ERR_SYSTEM;
		goto err_channel;
	}
	ctx->cq_size = IBC_MIN(IB_CQ_INITIAL_CQES, ctx->dev_attr.max_cqe);
	if (ibc_fault_hit(IBC_FAULT_VERBS, "ibv_create_cq"))
		ctx->cq = NULL;
	else
		ctx->cq = ibv_create_cq(ctx->vctx, ctx->cq_size, ctx, ctx->channel, 0);
	if (!ctx->cq) {
		IBC_LOG_WARN(IB, "ibv_create_cq of %d entries on %s failed: %s", ctx->cq_size, dev_name,
			     strerror(errno));
		st = IBC_ERR_VERBS;
		goto err_channel;
	}
	ctx->cq_size = ctx->cq->cqe;
	memset(&be, 0, sizeof(be));
	be.reg = ibc_ib_mr_verbs_reg;
	be.dereg = ibc_ib_mr_verbs_dereg;
	be.arg = ctx;
	be.name = ctx->dev_name;
	ibc_ib_mr_dev_backend(ctx, &be);
	ibc_ib_mr_cache_init(&ctx->mrc, &be, prm->reg_cache_bytes);
	{
		const char *why;
		char keep[64];
		int hooks = ibc_ib_mr_cache_hooks(&ctx->mrc);

		ibc_ib_memhook_start(&why);
		ctx->prm.reg_cache_bytes = ibc_ib_reg_cache_budget(prm->reg_cache_bytes, hooks);
		ctx->mrc.idle_max_bytes = ctx->prm.reg_cache_bytes;
		IBC_LOG_INFO(IB, "ib: %s: idle user registrations kept: %s; memory hooks %s", dev_name,
			     ibc_ib_reg_cache_keep_text(ctx->prm.reg_cache_bytes, keep, sizeof(keep)),
			     why);
	}
	ibc_ib_ctx_gdr_probe(ctx);      /* IBC_TCAP_CUDA only when device memory registered */
	ctx->next_async_check_ns = ibc_time_coarse_ns() + IB_ASYNC_CHECK_NS;
	IBC_LOG_INFO(IB, "ib: port %s:%d open: %s, active mtu %s, lid %u, %d QPs per connection, %d credits, inline %d bytes, bounce %zu bytes",
		     dev_name, port,
		     ctx->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
		     ibc_ib_mtu_str(ctx->port_attr.active_mtu), ctx->port_attr.lid, prm->nqps,
		     prm->depth, prm->inline_bytes, prm->bounce_bytes);
	*ctx_p = ctx;
	return IBC_OK;

err_channel:
	ibv_destroy_comp_channel(ctx->channel);
err_pd:
	ibv_dealloc_pd(ctx->pd);
err_close:
	ibv_close_device(ctx->vctx);
err_free:
	ibc_free(ctx);
	return st;
}

/**
 * ibc_ib_ctx_destroy() - Destroy every connection (draining their QPs),
 * then the registration cache, CQ, channel, PD and device context.
 * @ctx: [in] the context; NULL is ignored.
 */
void ibc_ib_ctx_destroy(struct ibc_ib_ctx *ctx)
{
	int ret;

	if (!ctx)
		return;
	while (ctx->conns)
		ibc_ib_conn_destroy(ctx->conns);
	ibc_ib_mr_cache_fini(&ctx->mrc);
	if (ctx->cq_events_unacked)
		ibv_ack_cq_events(ctx->cq, ctx->cq_events_unacked);
	ret = ibv_destroy_cq(ctx->cq);
	if (ret)
		IBC_LOG_WARN(IB, "ibv_destroy_cq on %s failed: %s", ctx->dev_name, strerror(ret));
	ibc_ib_conn_free_zombies(ctx);
	ibc_ib_op_pool_fini(ctx);
	ret = ibv_destroy_comp_channel(ctx->channel);
	if (ret)
		IBC_LOG_WARN(IB, "ibv_destroy_comp_channel on %s failed: %s", ctx->dev_name,
			     strerror(ret));
	ret = ibv_dealloc_pd(ctx->pd);
	if (ret)
		IBC_LOG_WARN(IB, "ibv_dealloc_pd on %s failed: %s", ctx->dev_name, strerror(ret));
	ibv_close_device(ctx->vctx);
	ibc_free(ctx);
}

/**
 * ibc_ib_ctx_fail_all() - A device-wide failure (port down, CQ overrun,
 * device fatal): report it once (peer -1), then fail every connection
 * without reporting each, and refuse new ones.
 */
void ibc_ib_ctx_fail_all(struct ibc_ib_ctx *ctx, ibc_status_t st, const char *why)
{
	struct ibc_ib_conn *c;

	if (ctx->fatal_st != IBC_OK)
		return;
	ctx->fatal_st = st;
	if (ctx->report_st == IBC_OK)
		ctx->report_st = st;
	ctx->cb.fail(ctx->cb.arg, st, -1, why);
	for (c = ctx->conns; c; c = ibc_ib_conn_next(c))
		ibc_ib_conn_set_failed(c, st);
}

/**
 * ibc_ib_ctx_handle_async() - Read and handle every pending async event
 * (non-blocking): QP errors fail their connection (IBC_ERR_VERBS naming
 * the QP and peer), port or device loss fails the context, the rest is
 * logged at INFO.
 */
void ibc_ib_ctx_handle_async(struct ibc_ib_ctx *ctx)
{
	struct ibv_async_event ev;
	char why[256];

	while (ibv_get_async_event(ctx->vctx, &ev) == 0) {
		switch (ev.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_PATH_MIG_ERR:
			ibc_ib_conn_qp_event(ev.element.qp->qp_context, ev.event_type);
			break;
		case IBV_EVENT_CQ_ERR:
			snprintf(why, sizeof(why), "async event %s on %s:%d: completion queue overrun or error",
				 ibv_event_type_str(ev.event_type), ctx->dev_name, ctx->port);
			ibc_ib_ctx_fail_all(ctx, IBC_ERR_VERBS, why);
			break;
		case IBV_EVENT_PORT_ERR:
			if (ev.element.port_num != ctx->port)
				break;
			snprintf(why, sizeof(why), "async event %s: port %s:%d went down",
				 ibv_event_type_str(ev.event_type), ctx->dev_name, ctx->port);
			ibc_ib_ctx_fail_all(ctx, IBC_ERR_VERBS, why);
			break;
		case IBV_EVENT_DEVICE_FATAL:
			snprintf(why, sizeof(why), "async event %s: device %s failed",
				 ibv_event_type_str(ev.event_type), ctx->dev_name);
			ibc_ib_ctx_fail_all(ctx, IBC_ERR_VERBS, why);
			break;
		case IBV_EVENT_COMM_EST:
		case IBV_EVENT_SQ_DRAINED:
		case IBV_EVENT_QP_LAST_WQE_REACHED:
			IBC_LOG_DEBUG(IB, "%s: async event %s", ctx->dev_name,
				      ibv_event_type_str(ev.event_type));
			break;
		default:
			IBC_LOG_INFO(IB, "%s:%d: async event %s", ctx->dev_name, ctx->port,
				     ibv_event_type_str(ev.event_type));
			break;
		}
		ibv_ack_async_event(&ev);
	}
}

/* ibc_ib_ctx_poll() - handle stashed and newly polled completions (bounded batch) */
void ibc_ib_ctx_poll(struct ibc_ib_ctx *ctx)
{
	struct ibv_wc wc[IB_POLL_BATCH];
	int rounds;
	int i;
	int n;

	for (i = 0; i < ctx->nstash; i++)
		ibc_ib_conn_handle_wc(ctx, &ctx->wc_stash[i]);
	ctx->nstash = 0;
	for (rounds = 0; rounds < 8; rounds++) {
		n = ibv_poll_cq(ctx->cq, IB_POLL_BATCH, wc);
		if (n < 0) {
			ibc_ib_ctx_fail_all(ctx, IBC_ERR_VERBS, "ibv_poll_cq failed (completion queue error)");
			return;
		}
		for (i = 0; i < n; i++)
			ibc_ib_conn_handle_wc(ctx, &wc[i]);
		if (n < IB_POLL_BATCH)
			break;
	}
}

/**
 * ibc_ib_ctx_progress() - Advance every connection of the context: handle
 * completions (receives complete, clear-to-send entries start sends), post
 * what waited for credits or send-queue room, and check async events every
 * 10 ms. Never blocks.
 * @ctx: [in,out] the context.
 * Threading: the context's thread only.
 * Return: IBC_OK, or the error of a connection or device that failed since
 *         the last call (reported once through the fail callback; the
 *         requests on it complete with that status).
 */
ibc_status_t ibc_ib_ctx_progress(struct ibc_ib_ctx *ctx)
{
	struct ibc_ib_conn *c;
	ibc_status_t st;
	uint64_t now;
	int ll_busy = 0;

	ibc_ib_ctx_poll(ctx);
	for (c = ctx->conns; c; c = ibc_ib_conn_next(c))
		ll_busy |= ibc_ib_conn_kick(c);
	ctx->ll_busy = ll_busy;
	now = ibc_time_coarse_ns();
	if (now >= ctx->next_async_check_ns) {
		ibc_ib_ctx_handle_async(ctx);
		ctx->next_async_check_ns = now + IB_ASYNC_CHECK_NS;
	}
	st = ctx->report_st;
	ctx->report_st = IBC_OK;
	return st;
}

/* arm @ctx's CQ and poll it once: 1 when something is there to handle (no sleep) */
static int ctx_wait_arm(struct ibc_ib_ctx *ctx)
{
	int n;

	if (ctx->nstash > 0 || ctx->report_st != IBC_OK)
		return 1;
	if (!ctx->cq_armed) {
		if (ibv_req_notify_cq(ctx->cq, 0))
			return 1;
		ctx->cq_armed = 1;
	}
	n = ibv_poll_cq(ctx->cq, (int)IBC_ARRAY_SIZE(ctx->wc_stash), ctx->wc_stash);
	if (n != 0) {
		ctx->nstash = n > 0 ? n : 0;
		return 1;
	}
	return 0;
}

/* after the sleep: take @ctx's CQ event and its async events (@pfd: its two fds) */
static void ctx_wait_events(struct ibc_ib_ctx *ctx, const struct pollfd *pfd)
{
	if (pfd[0].revents & POLLIN) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;

		if (ibv_get_cq_event(ctx->channel, &ev_cq, &ev_ctx) == 0) {
			ctx->cq_armed = 0;
			if (++ctx->cq_events_unacked >= 64) {
				ibv_ack_cq_events(ctx->cq, ctx->cq_events_unacked);
				ctx->cq_events_unacked = 0;
			}
		}
	}
	if (pfd[1].revents & POLLIN)
		ibc_ib_ctx_handle_async(ctx);
}

/**
 * ibc_ib_ctx_wait_many() - Sleep until a completion or async event arrives
 * on any of @n contexts (the rails of one communicator), at most
 * @timeout_us: arms each CQ, re-polls it once (a completion may have come
 * before arming; it is kept for the next progress call) and sleeps in
 * ppoll() on every completion channel and async event fd, so an idle rank
 * uses no CPU (2-8 ranks share 2 cores in the test VM). While a connection
 * waits for LL lines or LL credits, which arrive without a completion, the
 * sleep is at most IB_LL_WAIT_US.
 * @ctxs:       [in,out] the contexts, @n of them (1..IBC_IB_MAX_RAILS).
 * @n:          [in] how many.
 * @timeout_us: [in] upper bound of the sleep, microseconds; 0 only polls.
 * Threading: the contexts' thread only.
 */
void ibc_ib_ctx_wait_many(struct ibc_ib_ctx *const *ctxs, int n, int timeout_us)
{
	struct pollfd pfd[2 * IBC_IB_MAX_RAILS];
	struct timespec ts;
	int i;

	n = IBC_MIN(n, IBC_IB_MAX_RAILS);
	for (i = 0; i < n; i++) {
		if (ctx_wait_arm(ctxs[i]))
			return;
		/* LL messages and credits land without a completion: poll memory again soon */
		if (ctxs[i]->ll_busy)
			timeout_us = IBC_MIN(timeout_us, IB_LL_WAIT_US);
	}
	if (timeout_us <= 0)
		return;
	for (i = 0; i < n; i++) {
		pfd[2 * i].fd = ctxs[i]->channel->fd;
		pfd[2 * i].events = POLLIN;
		pfd[2 * i].revents = 0;
		pfd[2 * i + 1].fd = ctxs[i]->vctx->async_fd;
		pfd[2 * i + 1].events = POLLIN;
		pfd[2 * i + 1].revents = 0;
	}
	ts.tv_sec = timeout_us / 1000000;
	ts.tv_nsec = (long)(timeout_us % 1000000) * 1000;
	if (ppoll(pfd, (nfds_t)(2 * n), &ts, NULL) <= 0)
		return;
	for (i = 0; i < n; i++)
		ctx_wait_events(ctxs[i], &pfd[2 * i]);
}

/**
 * ibc_ib_ctx_wait() - ibc_ib_ctx_wait_many() of one context.
 * @ctx:        [in,out] the context.
 * @timeout_us: [in] upper bound of the sleep, microseconds; 0 only polls.
 * Threading: the context's thread only.
 */
void ibc_ib_ctx_wait(struct ibc_ib_ctx *ctx, int timeout_us)
{
	ibc_ib_ctx_wait_many(&ctx, 1, timeout_us);
}

/* ---------------------------------------------------------------------- */
/* teardown of a connection: drained through the context's CQ          */
/* ---------------------------------------------------------------------- */

static int conn_drained(const struct ibc_ib_conn *conn)
{
	int i;

	for (i = 0; i < conn->nqps; i++) {
		const struct ibc_ib_qp *qp = &conn->qps[i];

		if (!qp->qp)
			continue;
		if (!qp->drain_sq_done || qp->rq_posted > 0)
			return 0;
	}
	return 1;
}

/*
 * Move every QP to ERROR and post the send marker, which completes after
 * every earlier send WR (signalled or not) has been flushed. Receives need no
 * marker: each completes on its own (flushed), and rq_posted counts those
 * outstanding. A receive marker posted after the move to ERROR never
 * completes on Soft-RoCE under Linux 6.1 (the receives posted before it are
 * flushed, the marker is not), which held every connection for the whole
 * IB_DRAIN_MS (2 s) and left it a zombie.
 */
static void conn_start_drain(struct ibc_ib_conn *conn)
{
	int i;

	for (i = 0; i < conn->nqps; i++) {
		struct ibc_ib_qp *qp = &conn->qps[i];
		struct ibv_send_wr swr;
		struct ibv_send_wr *bad_s = NULL;

		if (!qp->qp)
			continue;
		ibc_ib_qp_to_err(qp);
		memset(&swr, 0, sizeof(swr));
		swr.wr_id = ibc_ib_wr_id(qp, IBC_IB_WR_DRAIN_SQ);
		swr.opcode = IBV_WR_RDMA_WRITE;
		swr.send_flags = IBV_SEND_SIGNALED;
		if (!conn->established || ibv_post_send(qp->qp, &swr, &bad_s))
			qp->drain_sq_done = 1; /* nothing was ever sent, or the marker is refused */
	}
}

/**
 * ibc_ib_conn_destroy() - Close a connection: abandon its requests (they
 * are not completed), move its QPs to ERROR, wait (at most 2 s, progressing
 * the context) until every posted WR has been flushed out of the CQ, then
 * destroy the QPs and free the buffers. A connection that does not drain in
 * time is kept as a zombie until the context is destroyed, so that a late
 * completion never touches freed memory.
 * @conn: [in] the connection; NULL is ignored.
 */
void ibc_ib_conn_destroy(struct ibc_ib_conn *conn)
{
	struct ibc_ib_ctx *ctx;
	struct ibc_ib_conn **pp;
	struct ibc_ib_op *op;
	uint64_t deadline;

	if (!conn)
		return;
	ctx = conn->ctx;
	for (pp = &ctx->conns; *pp; pp = &(*pp)->next) {
		if (*pp == conn) {
			*pp = conn->next;
			break;
		}
	}
	conn->next = NULL;
	for (op = conn->live; op; op = op->live_next)
		op->req = NULL;
	conn->dead = 1;
	conn_start_drain(conn);
	deadline = ibc_time_ms() + IB_DRAIN_MS;
	while (!conn_drained(conn) && ibc_time_ms() < deadline) {
		ibc_ib_ctx_wait(ctx, 1000);
		ibc_ib_ctx_poll(ctx);
	}
	if (!conn_drained(conn)) {
		int i;

		IBC_LOG_DEBUG(IB, "connection to peer rank %d did not drain in %d ms: kept until the context closes",
			      conn->peer, IB_DRAIN_MS);
		for (i = 0; i < conn->nqps; i++)
			IBC_LOG_DEBUG(IB, "  QP %d: send marker %s, %d receives not flushed", i,
				      conn->qps[i].drain_sq_done ? "flushed" : "missing",
				      conn->qps[i].rq_posted);
		ibc_ib_conn_release(conn);
		conn->next = ctx->zombies;
		ctx->zombies = conn;
		return;
	}
	ibc_ib_conn_release(conn);
	ibc_ib_conn_free(conn);
}

/* ibc_ib_conn_free_zombies() - free undrained connections once the CQ is gone */
void ibc_ib_conn_free_zombies(struct ibc_ib_ctx *ctx)
{
	while (ctx->zombies) {
		struct ibc_ib_conn *conn = ctx->zombies;

		ctx->zombies = conn->next;
		ibc_ib_conn_free(conn);
	}
}
