/* SPDX-License-Identifier: MIT */
/*
 * ib_ops.c - the verbs transport's ops table (transport.h): per
 * communicator, choose a port (IBC_IB_HCA, local rank round-robin, the
 * topology hook), create the ib context, and run the nonblocking connect
 * state machine over the out-of-band exchange of the transport's
 * environment (struct ibc_tenv):
 *   state 0: create QPs and FIFO, send our info (tag IB_TAG_INFO);
 *   state 1: try_recv the peer's info -> negotiate, RTR, RTS, send READY
 *            (tag IB_TAG_READY);
 *   state 2: try_recv the peer's READY -> connected (the peer's QPs are in
 *            RTR, so nothing we send is dropped).
 * Errors found by the context are reported through ibc_tenv_fail(). The
 * only ib file that knows the environment.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/util.h"
#include "topo/topo.h"
#include "transport/ib/ib.h"

#define IB_TAG_INFO  0        /* out-of-band tags */
#define IB_TAG_READY 1
#define IB_READY_MAGIC 0x1bc0ead1u

enum ib_conn_state {
	IB_CS_IDLE = 0,         /* nothing done yet */
	IB_CS_SENT_INFO,        /* waiting for the peer's info */
	IB_CS_SENT_READY,       /* waiting for the peer's READY */
	IB_CS_CONNECTED,
};

struct ib_peer_state {
	int state;              /* enum ib_conn_state */
	struct ibc_ib_conn *conn;
	uint64_t t0_ms;         /* start of the connection set-up */
};

struct ib_tctx {
	const struct ibc_tenv *env;
	struct ibc_ib_ctx *ib;
	struct ib_peer_state *peers;    /* [nranks] */
	int64_t connect_timeout_ms;
};

/*
 * ib_ops_pick_port() - this rank's port: the topology module's choice
 * (ibc_topo_pick_nic(): the NIC nearest the rank's GPU, env->gpu from
 * ibc_topo_rank_gpu(); without a GPU, spread over NUMA nodes and cards by
 * local rank), else
 * ibc_ib_port_pick()'s round-robin when the topology cannot be loaded.
 */
static int ib_ops_pick_port(const struct ibc_ib_port_desc *ports, int nports, int gpu,
			    int local_rank, int nlocal)
{
	const char *cands[IBC_IB_MAX_PORTS];
	struct ibc_topo *topo;
	char why[IBC_TOPO_WHY_LEN];
	int idx = 0;
	int i;

	for (i = 0; i < nports; i++)
		cands[i] = ports[i].dev_name;
	if (ibc_topo_shared(&topo) == IBC_OK &&
	    ibc_topo_pick_nic(topo, gpu, local_rank, nlocal, cands, nports, &idx, NULL, why,
			      sizeof(why)) == IBC_OK && idx >= 0 && idx < nports) {
		IBC_LOG_INFO(IB, "ib: topology picks %s:%d for local rank %d of %d: %s",
			     ports[idx].dev_name, ports[idx].port, local_rank, nlocal, why);
		return idx;
	}
	return ibc_ib_port_pick(ports, nports, local_rank, nlocal);
}

static void ib_ops_fail(void *arg, ibc_status_t st, int peer, const char *why)
{
	struct ib_tctx *t = arg;

	ibc_tenv_fail(t->env, st, peer, "%s", why);
}

static ibc_status_t ib_ops_desc_check(void *arg, int peer, const struct ibc_msg_desc *mine,
				      size_t my_nbytes, const struct ibc_msg_desc *theirs,
				      size_t their_nbytes)
{
	struct ib_tctx *t = arg;

	return ibc_msg_desc_check(t->env, peer, mine, my_nbytes, theirs, their_nbytes);
}

/**
 * ib_ops_init() - Open the port this rank uses for the communicator of @env.
 * @env:   [in]  the transport's environment (rank, local rank, GPU).
 * @ctx_p: [out] transport context.
 *
 * Port choice: the ACTIVE ports selected by IBC_IB_HCA, in device order;
 * ib_ops_pick_port() spreads the ranks of one host over them through the
 * topology module (round-robin in listed order without it).
 * Return: IBC_OK; IBC_ERR_UNSUPPORTED (no usable port: the communicator
 *         falls back to tcp unless IBC_TRANSPORT=ib); IBC_ERR_INVALID_ARG
 *         (malformed IBC_IB_HCA or IBC_IB_GID_INDEX); IBC_ERR_VERBS;
 *         IBC_ERR_NO_MEMORY.
 */
static ibc_status_t ib_ops_init(const struct ibc_tenv *env, void **ctx_p)
{
	struct ibc_ib_port_desc ports[IBC_IB_MAX_PORTS];
	struct ibc_ib_hca_spec spec;
	struct ibc_ib_params prm;
	struct ibc_ib_ctx_cb cb;
	struct ib_tctx *t;
	ibc_status_t st;
	int nports = 0;
	int pick;

	IBC_CHECK(ibc_ib_hca_parse(ibc_param_ib_hca(), &spec));
	IBC_CHECK(ibc_ib_ports_list(&spec, ports, IBC_IB_MAX_PORTS, &nports));
	if (nports == 0) {
		IBC_LOG_INFO(IB, "ib: no ACTIVE verbs port%s%s", *ibc_param_ib_hca() ? " matches IBC_IB_HCA=" : "",
			     ibc_param_ib_hca());
		return IBC_ERR_UNSUPPORTED;
	}
	pick = ib_ops_pick_port(ports, nports, env->gpu, env->local_rank, env->nlocal);
	t = ibc_calloc(1, sizeof(*t), "ib transport context");
	if (!t)
		return IBC_ERR_NO_MEMORY;
	t->env = env;
	t->connect_timeout_ms = env->connect_timeout_ms;
	t->peers = ibc_calloc((size_t)env->nranks, sizeof(*t->peers), "ib peer states");
	if (!t->peers) {
		st = IBC_ERR_NO_MEMORY;
		goto err_free;
	}
	ibc_ib_params_from_env(&prm);
	memset(&cb, 0, sizeof(cb));
	cb.arg = t;
	cb.fail = ib_ops_fail;
	cb.desc_check = ib_ops_desc_check;
	IBC_CHECK_GOTO(ibc_ib_ctx_create(ports[pick].dev_name, ports[pick].port, &prm, &cb, &t->ib),
		       st, err_peers);
	IBC_LOG_INFO(IB, "ib: rank %d (local rank %d of %d on this host) uses %s:%d, %d usable ports",
		     env->rank, env->local_rank, env->nlocal, ports[pick].dev_name, ports[pick].port,
		     nports);
	*ctx_p = t;
	return IBC_OK;

err_peers:
	ibc_free(t->peers);
err_free:
	ibc_free(t);
	return st;
}

static void ib_ops_reg_stats(void *ctx, struct ibc_reg_stats *acc)
{
	struct ib_tctx *t = ctx;
	const struct ibc_ib_mr_cache_stats *st = &t->ib->mrc.stats;

	acc->registrations += __atomic_load_n(&st->regs, __ATOMIC_RELAXED);
	acc->deregistrations += __atomic_load_n(&st->deregs, __ATOMIC_RELAXED);
	acc->hits += __atomic_load_n(&st->hits, __ATOMIC_RELAXED);
	acc->invalidations += __atomic_load_n(&st->invalidations, __ATOMIC_RELAXED);
	acc->released += __atomic_load_n(&st->released, __ATOMIC_RELAXED);
	acc->evictions += __atomic_load_n(&st->evictions, __ATOMIC_RELAXED);
	acc->memory_hooks |= t->ib->mrc.hooks;
}

static ibc_status_t ib_ops_mem_register(void *ctx, void *buf, size_t nbytes, void **reg_p)
{
	struct ib_tctx *t = ctx;
	struct ibc_ib_mr *mr;
	ibc_status_t st;

	/*
	 * without hooks an idle registration may be of memory freed since:
	 * drop idle ones first (the budget, 0 by default) so the handle never
	 * holds one of old pages
	 */
	if (!t->ib->mrc.hooks)
		ibc_ib_mr_trim(&t->ib->mrc, t->ib->prm.reg_cache_bytes);
	st = ibc_ib_mr_get(&t->ib->mrc, buf, nbytes, IBC_IB_MR_NEED_SLOT, &mr);
	if (st != IBC_OK) {
		IBC_LOG_ERROR(IB, "ibc_comm_register: rank %d: %zu bytes at %p on %s: %s", t->env->rank,
			      nbytes, buf, t->ib->dev_name, t->ib->mrc.errbuf[0] ? t->ib->mrc.errbuf :
			      ibc_status_str(st));
		return st;
	}
	*reg_p = mr;
	return IBC_OK;
}

static void ib_ops_mem_deregister(void *ctx, void *reg)
{
	struct ib_tctx *t = ctx;

	ibc_ib_mr_put(&t->ib->mrc, reg);
	/* the application may free the buffer now: without hooks, forget it at once */
	if (!t->ib->mrc.hooks)
		ibc_ib_mr_trim(&t->ib->mrc, t->ib->prm.reg_cache_bytes);
}

static void ib_ops_fini(void *ctx)
{
	struct ib_tctx *t = ctx;
	struct ibc_reg_stats rs;

	if (!t)
		return;
	memset(&rs, 0, sizeof(rs));
	ib_ops_reg_stats(t, &rs);
	IBC_LOG_INFO(IB, "ib: rank %d on %s: %llu registrations, %llu deregistrations, %llu cache hits, %llu invalidations (%llu memory released), %llu evictions; memory hooks %s",
		     t->env->rank, t->ib->dev_name, (unsigned long long)rs.registrations,
		     (unsigned long long)rs.deregistrations, (unsigned long long)rs.hits,
		     (unsigned long long)rs.invalidations, (unsigned long long)rs.released,
		     (unsigned long long)rs.evictions, rs.memory_hooks ? "on" : "off");
	ibc_ib_ctx_destroy(t->ib);
	ibc_free(t->peers);
	ibc_free(t);
}

static ibc_status_t connect_step(struct ib_tctx *t, int peer, struct ib_peer_state *ps)
{
	const struct ibc_tenv *env = t->env;
	uint8_t buf[IBC_IB_CONN_INFO_WIRE_BYTES];
	struct ibc_ib_conn_info info;
	uint32_t ready = IB_READY_MAGIC;
	int got = 0;

	switch (ps->state) {
	case IB_CS_IDLE:
		ps->t0_ms = ibc_time_ms();
		IBC_CHECK(ibc_ib_conn_create(t->ib, peer, ibc_tenv_peer_host(env, peer), &ps->conn));
		ibc_ib_conn_local_info(ps->conn, &info);
		ibc_ib_conn_info_pack(&info, buf);
		IBC_CHECK(ibc_tenv_oob_send(env, peer, IB_TAG_INFO, buf, sizeof(buf)));
		ps->state = IB_CS_SENT_INFO;
		/* fall through */
	case IB_CS_SENT_INFO:
		IBC_CHECK(ibc_tenv_oob_try_recv(env, peer, IB_TAG_INFO, buf, sizeof(buf), &got));
		if (!got)
			return IBC_INPROGRESS;
		IBC_CHECK(ibc_ib_conn_info_unpack(buf, &info));
		IBC_CHECK(ibc_ib_conn_establish(ps->conn, &info));
		IBC_CHECK(ibc_tenv_oob_send(env, peer, IB_TAG_READY, &ready, sizeof(ready)));
		ps->state = IB_CS_SENT_READY;
		/* fall through */
	case IB_CS_SENT_READY:
		IBC_CHECK(ibc_tenv_oob_try_recv(env, peer, IB_TAG_READY, &ready, sizeof(ready), &got));
		if (!got)
			return IBC_INPROGRESS;
		if (ready != IB_READY_MAGIC) {
			IBC_LOG_WARN(IB, "peer rank %d sent a malformed ib READY message", peer);
			return IBC_ERR_INVALID_USAGE;
		}
		ps->state = IB_CS_CONNECTED;
		return IBC_OK;
	default:
		return IBC_OK;
	}
}

/**
 * ib_ops_connect() - Nonblocking connection set-up to @peer (see the file
 * header); call again while it returns IBC_INPROGRESS.
 * @ctx:    [in]  transport context.
 * @peer:   [in]  peer rank.
 * @conn_p: [out] the connection once IBC_OK is returned.
 * Blocking: a few verbs calls and out-of-band sends, never a wait for the
 *           peer. Bounded: fails with IBC_ERR_TIMEOUT after
 *           IBC_BOOTSTRAP_TIMEOUT_MS without the peer's answer.
 * Return: IBC_OK; IBC_INPROGRESS; IBC_ERR_TIMEOUT; IBC_ERR_REMOTE;
 *         IBC_ERR_VERBS; IBC_ERR_UNSUPPORTED (no common GID kind or link
 *         layer); IBC_ERR_INVALID_USAGE (incompatible peer).
 */
static ibc_status_t ib_ops_connect(void *ctx, int peer, struct ibc_tconn **conn_p)
{
	struct ib_tctx *t = ctx;
	struct ib_peer_state *ps;
	char why[768];
	ibc_status_t st;

	if (peer < 0 || peer >= t->env->nranks)
		return IBC_ERR_INVALID_ARG;
	ps = &t->peers[peer];
	ibc_log_set_last_error("");
	st = connect_step(t, peer, ps);
	if (st == IBC_OK) {
		*conn_p = (struct ibc_tconn *)ps->conn;
		return IBC_OK;
	}
	if (st == IBC_INPROGRESS) {
		if ((int64_t)(ibc_time_ms() - ps->t0_ms) <= t->connect_timeout_ms)
			return IBC_INPROGRESS;
		IBC_LOG_WARN(IB, "peer rank %d (host %s) did not complete the ib connection set-up within %lld ms (state %d)",
			     peer, ibc_tenv_peer_host(t->env, peer), (long long)t->connect_timeout_ms,
			     ps->state);
		st = IBC_ERR_TIMEOUT;
	}
	/* the cause was logged (WARN) where it was detected; make it the communicator's error */
	snprintf(why, sizeof(why), "%s", ibc_last_error());
	ibc_tenv_fail(t->env, st, peer, "ib connection set-up from %s:%d failed: %s",
		      t->ib->dev_name, t->ib->port, *why ? why : ibc_status_str(st));
	ibc_ib_conn_destroy(ps->conn);
	ps->conn = NULL;
	ps->state = IB_CS_IDLE;
	return st;
}

static void ib_ops_disconnect(struct ibc_tconn *tconn)
{
	struct ibc_ib_conn *conn = (struct ibc_ib_conn *)tconn;
	struct ib_tctx *t;
	int peer;

	if (!conn)
		return;
	t = ibc_ib_conn_ctx(conn)->cb.arg;
	peer = ibc_ib_conn_peer(conn);
	ibc_ib_conn_destroy(conn);
	if (peer >= 0 && peer < t->env->nranks && t->peers[peer].conn == conn) {
		t->peers[peer].conn = NULL;
		t->peers[peer].state = IB_CS_IDLE;
	}
}

static ibc_status_t ib_ops_isend(struct ibc_tconn *conn, const void *buf, size_t nbytes,
				 const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	return ibc_ib_conn_post((struct ibc_ib_conn *)conn, (void *)buf, nbytes, desc, req, 1);
}

static ibc_status_t ib_ops_irecv(struct ibc_tconn *conn, void *buf, size_t nbytes,
				 const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	return ibc_ib_conn_post((struct ibc_ib_conn *)conn, buf, nbytes, desc, req, 0);
}

static ibc_status_t ib_ops_progress(void *ctx)
{
	struct ib_tctx *t = ctx;

	return ibc_ib_ctx_progress(t->ib);
}

/* the verbs device this rank opened: the communicator binds its progress thread near it */
static int ib_ops_peek(struct ibc_tconn *conn, struct ibc_msg_desc *desc, size_t *nbytes)
{
	return ibc_ib_conn_peek((struct ibc_ib_conn *)conn, desc, nbytes);
}

static const char *ib_ops_device(void *ctx)
{
	struct ib_tctx *t = ctx;

	return t->ib->dev_name;
}

/*
 * ib_ops_ctx_caps() - IBC_TCAP_CUDA when the context's GPUDirect probe
 * registered device memory (ibc_ib_ctx_gdr_probe()); nothing else is
 * per context. The executor does not use it yet: device buffers are staged.
 */
static unsigned ib_ops_ctx_caps(void *ctx)
{
	struct ib_tctx *t = ctx;

	return t->ib->caps;
}

static void ib_ops_wait(void *ctx, int timeout_us)
{
	struct ib_tctx *t = ctx;

	ibc_ib_ctx_wait(t->ib, timeout_us);
}

const struct ibc_transport_ops ibc_ib_ops = {
	.name = "ib",
	.id = IBC_TRANSPORT_IB,
	.tclass = IBC_TCLASS_IB,
	.caps = IBC_TCAP_HOST | IBC_TCAP_LL,
	.init = ib_ops_init,
	.fini = ib_ops_fini,
	.device = ib_ops_device,
	.connect = ib_ops_connect,
	.disconnect = ib_ops_disconnect,
	.isend = ib_ops_isend,
	.irecv = ib_ops_irecv,
	.progress = ib_ops_progress,
	.wait = ib_ops_wait,
	.peek = ib_ops_peek,
	.reg_stats = ib_ops_reg_stats,
	.mem_register = ib_ops_mem_register,
	.mem_deregister = ib_ops_mem_deregister,
	.ctx_caps = ib_ops_ctx_caps,
};
