/* SPDX-License-Identifier: MIT */
/*
 * ib_ops.c - the verbs transport's ops table (transport.h): per
 * communicator, choose the ports (IBC_IB_HCA, local rank round-robin, the
 * topology hook; IBC_IB_RAILS of them), create one ib context per port (a
 * rail), and run the nonblocking connect state machine over the
 * out-of-band exchange of the transport's environment (struct ibc_tenv):
 *   state 0: create QPs and FIFO on every rail, send our infos (tag
 *            IB_TAG_INFO: the rail count, then one struct ibc_ib_conn_info
 *            per rail);
 *   state 1: try_recv the peer's infos -> rails = the smaller count,
 *            negotiate, RTR, RTS each, send READY (tag IB_TAG_READY);
 *   state 2: try_recv the peer's READY -> connected (the peer's QPs are in
 *            RTR, so nothing we send is dropped).
 * With several rails a connection is one ibc_ib_conn per rail, paired by
 * rail index; a message above the eager and LL limits is split into
 * contiguous parts, part k posted on rail k (both ends split the same
 * size the same way, so each rail's messages still match in posting
 * order), and the caller's request completes when every part has
 * (ib_stripe_reap()). Errors found by a context are reported through
 * ibc_tenv_fail(). The only ib file that knows the environment.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/util.h"
#include "base/wire.h"
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

#define IB_INFO_MAGIC 0x1bc0a112u
/* the connection info message: magic, rail count, IBC_IB_STRIPE_MIN_BYTES, 0, per rail
 * (IBC_IB_MAX_RAILS words) its port's rate in Mbit/s (0 unknown); then one struct
 * ibc_ib_conn_info per rail */
#define IB_INFO_HDR_BYTES (16 + 4 * IBC_IB_MAX_RAILS)
#define IB_INFO_BYTES (IB_INFO_HDR_BYTES + IBC_IB_MAX_RAILS * IBC_IB_CONN_INFO_WIRE_BYTES)

/*
 * struct ib_rconn - the connection to one peer that the net layer holds
 * (its struct ibc_tconn): one ibc_ib_conn per rail.
 */
struct ib_rconn {
	struct ibc_ib_conn *rail[IBC_IB_MAX_RAILS];
	int nrails;             /* rails created (before the exchange) or in use */
	int peer;
	size_t stripe_min;      /* the larger IBC_IB_STRIPE_MIN_BYTES of the two ends */
	uint32_t mbps[IBC_IB_MAX_RAILS];        /* per rail the slower end's rate, Mbit/s; 0 unknown */
	struct ib_tctx *t;
};

/*
 * struct ib_stripe - one message split over the rails: the caller's request
 * and one request per part; on the transport context's list until every
 * part is done.
 */
struct ib_stripe {
	struct ibc_treq *parent;
	struct ib_rconn *rc;
	int nparts;
	struct ibc_treq part[IBC_IB_MAX_RAILS];
	struct ib_stripe *next;
};

struct ib_peer_state {
	int state;              /* enum ib_conn_state */
	struct ib_rconn *rc;
	uint64_t t0_ms;         /* start of the connection set-up */
};

/* struct ib_rail_count - what one rail carried for this rank (the INFO line at fini) */
struct ib_rail_count {
	uint64_t msgs;          /* messages and parts posted on the rail, both directions */
	uint64_t sent;          /* bytes posted for sending */
	uint64_t recvd;         /* bytes posted for receiving */
};

struct ib_tctx {
	const struct ibc_tenv *env;
	struct ibc_ib_ctx *ib[IBC_IB_MAX_RAILS];
	int nrails;
	uint32_t mbps[IBC_IB_MAX_RAILS];        /* per rail its port's rate, Mbit/s; 0 unknown */
	struct ib_peer_state *peers;    /* [nranks] */
	struct ib_stripe *stripes;      /* split messages not yet complete */
	struct ib_rail_count count[IBC_IB_MAX_RAILS];
	uint64_t striped;               /* messages split over more than one rail */
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

/*
 * ib_ops_rail_dists() - per port its PCI class from the rank's GPU into
 * @dist (for IBC_IB_RAILS=0, auto); 0 when the rank has no GPU or the
 * topology cannot be loaded (then auto means one rail).
 */
static int ib_ops_rail_dists(const struct ibc_ib_port_desc *ports, int nports, int gpu, int *dist)
{
	struct ibc_topo *topo;
	int i;

	if (gpu < 0 || ibc_topo_shared(&topo) != IBC_OK)
		return 0;
	for (i = 0; i < nports; i++) {
		enum ibc_topo_dist d;

		dist[i] = ibc_topo_gpu_nic_dist(topo, gpu, ports[i].dev_name, &d) == IBC_OK ?
			  (int)d : (int)IBC_TOPO_DIST_COUNT;
	}
	return 1;
}

static void ib_ops_destroy_rails(struct ib_tctx *t)
{
	int k;

	for (k = 0; k < t->nrails; k++)
		ibc_ib_ctx_destroy(t->ib[k]);
	t->nrails = 0;
}

/**
 * ib_ops_init() - Open the ports this rank uses for the communicator of @env.
 * @env:   [in]  the transport's environment (rank, local rank, GPU).
 * @ctx_p: [out] transport context.
 *
 * Port choice: the ACTIVE ports selected by IBC_IB_HCA, in device order;
 * ib_ops_pick_port() spreads the ranks of one host over them through the
 * topology module (round-robin in listed order without it); with
 * IBC_IB_RAILS > 1, ib_ops_pick_rails() adds more (rail 0 carries the small
 * messages, and only it has the eager and LL paths).
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
	int idx[IBC_IB_MAX_RAILS];
	int dist[IBC_IB_MAX_PORTS];
	char names[IBC_IB_MAX_RAILS * (IBC_IB_NAME_LEN + 8)];
	ibc_status_t st;
	int nports = 0;
	int want = (int)ibc_param_ib_rails();
	int nrails;
	int pick;
	int k;

	IBC_CHECK(ibc_ib_hca_parse(ibc_param_ib_hca(), &spec));
	IBC_CHECK(ibc_ib_ports_list(&spec, ports, IBC_IB_MAX_PORTS, &nports));
	if (nports == 0) {
		IBC_LOG_INFO(IB, "ib: no ACTIVE verbs port%s%s", *ibc_param_ib_hca() ? " matches IBC_IB_HCA=" : "",
			     ibc_param_ib_hca());
		return IBC_ERR_UNSUPPORTED;
	}
	pick = ib_ops_pick_port(ports, nports, env->gpu, env->local_rank, env->nlocal);
	nrails = ibc_ib_rails_pick(nports, pick, want,
				   want == 0 && ib_ops_rail_dists(ports, nports, env->gpu, dist) ? dist : NULL,
				   idx);
	if (want > 0 && nrails < want)
		IBC_LOG_INFO(IB, "ib: rank %d: IBC_IB_RAILS=%d but %d port%s usable: %d rail%s",
			     env->rank, want, nports, nports == 1 ? "" : "s", nrails,
			     nrails == 1 ? "" : "s");
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
	memset(&cb, 0, sizeof(cb));
	cb.arg = t;
	cb.fail = ib_ops_fail;
	cb.desc_check = ib_ops_desc_check;
	names[0] = 0;
	for (k = 0; k < nrails; k++) {
		size_t len = strlen(names);

		ibc_ib_params_from_env(&prm);
		if (k > 0) {
			/* small messages take rail 0 only: no eager slots or LL ring on the others */
			prm.eager_bytes = 0;
			prm.ll_max_bytes = 0;
		}
		st = ibc_ib_ctx_create(ports[idx[k]].dev_name, ports[idx[k]].port, &prm, &cb, &t->ib[k]);
		if (st != IBC_OK && k > 0) {
			/* a rail that does not open leaves the others working */
			IBC_LOG_WARN(IB, "rank %d: rail %d on %s:%d did not open (%s): %d rail%s",
				     env->rank, k, ports[idx[k]].dev_name, ports[idx[k]].port,
				     ibc_status_str(st), k, k == 1 ? "" : "s");
			break;
		}
		if (st != IBC_OK)
			goto err_rails;
		t->nrails = k + 1;
		t->mbps[k] = ports[idx[k]].speed_mbps > 0 ? (uint32_t)ports[idx[k]].speed_mbps : 0;
		snprintf(names + len, sizeof(names) - len, "%s%s:%d (%u Gbit/s)", k ? ", " : "",
			 ports[idx[k]].dev_name, ports[idx[k]].port, t->mbps[k] / 1000);
	}
	IBC_LOG_INFO(IB, "ib: rank %d (local rank %d of %d on this host) uses %s, %d usable ports%s%s",
		     env->rank, env->local_rank, env->nlocal, names, nports,
		     nrails > 1 ? " (one rail each, messages striped over them)" : "",
		     want == 0 && nrails > 1 ? "; IBC_IB_RAILS=0: the ports as near the rank's GPU as its own" : "");
	*ctx_p = t;
	return IBC_OK;

err_rails:
	ib_ops_destroy_rails(t);
	ibc_free(t->peers);
err_free:
	ibc_free(t);
	return st;
}

static void ib_ops_reg_stats(void *ctx, struct ibc_reg_stats *acc)
{
	struct ib_tctx *t = ctx;
	int k;

	for (k = 0; k < t->nrails; k++) {
		const struct ibc_ib_mr_cache_stats *st = &t->ib[k]->mrc.stats;

		acc->registrations += __atomic_load_n(&st->regs, __ATOMIC_RELAXED);
		acc->deregistrations += __atomic_load_n(&st->deregs, __ATOMIC_RELAXED);
		acc->hits += __atomic_load_n(&st->hits, __ATOMIC_RELAXED);
		acc->invalidations += __atomic_load_n(&st->invalidations, __ATOMIC_RELAXED);
		acc->released += __atomic_load_n(&st->released, __ATOMIC_RELAXED);
		acc->evictions += __atomic_load_n(&st->evictions, __ATOMIC_RELAXED);
		acc->memory_hooks |= t->ib[k]->mrc.hooks;
	}
}

/* struct ib_reg - what ib_ops_mem_register() returns: one registration per rail */
struct ib_reg {
	int n;
	struct ibc_ib_mr *mr[IBC_IB_MAX_RAILS];
};

static void ib_reg_release(struct ib_tctx *t, struct ib_reg *r)
{
	int k;

	for (k = 0; k < r->n; k++) {
		struct ibc_ib_ctx *ib = t->ib[k];

		ibc_ib_mr_put(&ib->mrc, r->mr[k]);
		/* the application may free the buffer now: without hooks, forget it at once */
		if (!ib->mrc.hooks)
			ibc_ib_mr_trim(&ib->mrc, ib->prm.reg_cache_bytes);
	}
	ibc_free(r);
}

static ibc_status_t ib_ops_mem_register(void *ctx, void *buf, size_t nbytes, void **reg_p)
{
	struct ib_tctx *t = ctx;
	struct ib_reg *r;
	ibc_status_t st;
	int k;

	r = ibc_calloc(1, sizeof(*r), "ib registration handle");
	if (!r)
		return IBC_ERR_NO_MEMORY;
	for (k = 0; k < t->nrails; k++) {
		struct ibc_ib_ctx *ib = t->ib[k];

		/*
		 * without hooks an idle registration may be of memory freed since:
		 * drop idle ones first (the budget, 0 by default) so the handle never
		 * holds one of old pages
		 */
		if (!ib->mrc.hooks)
			ibc_ib_mr_trim(&ib->mrc, ib->prm.reg_cache_bytes);
		st = ibc_ib_mr_get(&ib->mrc, buf, nbytes, IBC_IB_MR_NEED_SLOT, &r->mr[k]);
		if (st != IBC_OK) {
			IBC_LOG_ERROR(IB, "ibc_comm_register: rank %d: %zu bytes at %p on %s: %s",
				      t->env->rank, nbytes, buf, ib->dev_name,
				      ib->mrc.errbuf[0] ? ib->mrc.errbuf : ibc_status_str(st));
			ib_reg_release(t, r);
			return st;
		}
		r->n = k + 1;
	}
	*reg_p = r;
	return IBC_OK;
}

static void ib_ops_mem_deregister(void *ctx, void *reg)
{
	ib_reg_release(ctx, reg);
}

static void rconn_destroy(struct ib_tctx *t, struct ib_rconn *rc);

static void ib_ops_fini(void *ctx)
{
	struct ib_tctx *t = ctx;
	struct ibc_reg_stats rs;
	int k;

	if (!t)
		return;
	memset(&rs, 0, sizeof(rs));
	ib_ops_reg_stats(t, &rs);
	IBC_LOG_INFO(IB, "ib: rank %d on %s%s: %llu registrations, %llu deregistrations, %llu cache hits, %llu invalidations (%llu memory released), %llu evictions; memory hooks %s",
		     t->env->rank, t->ib[0]->dev_name, t->nrails > 1 ? " and its other rails" : "",
		     (unsigned long long)rs.registrations,
		     (unsigned long long)rs.deregistrations, (unsigned long long)rs.hits,
		     (unsigned long long)rs.invalidations, (unsigned long long)rs.released,
		     (unsigned long long)rs.evictions, rs.memory_hooks ? "on" : "off");
	if (t->nrails > 1) {
		for (k = 0; k < t->nrails; k++)
			IBC_LOG_INFO(IB, "ib: rank %d rail %d %s:%d: %llu messages or parts, %llu bytes sent, %llu bytes received (posted)",
				     t->env->rank, k, t->ib[k]->dev_name, t->ib[k]->port,
				     (unsigned long long)t->count[k].msgs,
				     (unsigned long long)t->count[k].sent,
				     (unsigned long long)t->count[k].recvd);
		IBC_LOG_INFO(IB, "ib: rank %d: %llu messages striped over the rails", t->env->rank,
			     (unsigned long long)t->striped);
	}
	/* connections the net layer never got (set-up under way at teardown) */
	for (k = 0; k < t->env->nranks; k++) {
		rconn_destroy(t, t->peers[k].rc);
		t->peers[k].rc = NULL;
	}
	ib_ops_destroy_rails(t);
	while (t->stripes) {
		struct ib_stripe *sp = t->stripes;

		t->stripes = sp->next;
		ibc_free(sp);
	}
	ibc_free(t->peers);
	ibc_free(t);
}

/* destroy the rail connections of @rc and free it; NULL is ignored */
static void rconn_destroy(struct ib_tctx *t, struct ib_rconn *rc)
{
	struct ib_stripe **pp;
	struct ib_stripe *dead = NULL;
	int k;

	if (!rc)
		return;
	/* split messages of this connection are abandoned, as a connection's requests are */
	for (pp = &t->stripes; *pp;) {
		struct ib_stripe *sp = *pp;

		if (sp->rc == rc) {
			*pp = sp->next;
			sp->next = dead;
			dead = sp;
		} else {
			pp = &sp->next;
		}
	}
	for (k = 0; k < IBC_IB_MAX_RAILS; k++)
		ibc_ib_conn_destroy(rc->rail[k]);
	/* no operation of a destroyed connection points at a part any more */
	while (dead) {
		struct ib_stripe *sp = dead;

		dead = sp->next;
		ibc_free(sp);
	}
	ibc_free(rc);
}

static ibc_status_t connect_send_info(struct ib_tctx *t, int peer, struct ib_peer_state *ps)
{
	uint8_t buf[IB_INFO_BYTES];
	struct ibc_ib_conn_info info;
	struct ib_rconn *rc;
	int k;

	rc = ibc_calloc(1, sizeof(*rc), "ib rail connection");
	if (!rc)
		return IBC_ERR_NO_MEMORY;
	rc->peer = peer;
	rc->t = t;
	ps->rc = rc;
	memset(buf, 0, sizeof(buf));
	for (k = 0; k < t->nrails; k++) {
		ibc_status_t st = ibc_ib_conn_create(t->ib[k], peer, ibc_tenv_peer_host(t->env, peer),
						     &rc->rail[k]);

		if (st != IBC_OK && k > 0) {
			/* the rails that work carry it; the peer agrees on the smaller count */
			IBC_LOG_WARN(IB, "rank %d: rail %d (%s:%d) to peer rank %d could not be set up (%s): %d rail%s",
				     t->env->rank, k, t->ib[k]->dev_name, t->ib[k]->port, peer,
				     ibc_status_str(st), k, k == 1 ? "" : "s");
			break;
		}
		IBC_CHECK(st);
		rc->nrails = k + 1;
		ibc_ib_conn_local_info(rc->rail[k], &info);
		ibc_ib_conn_info_pack(&info, buf + IB_INFO_HDR_BYTES +
				      (size_t)k * IBC_IB_CONN_INFO_WIRE_BYTES);
	}
	ibc_wire_put32(buf, IB_INFO_MAGIC);
	ibc_wire_put32(buf + 4, (uint32_t)rc->nrails);
	ibc_wire_put32(buf + 8, (uint32_t)t->ib[0]->prm.stripe_min_bytes);
	for (k = 0; k < rc->nrails; k++)
		ibc_wire_put32(buf + 16 + 4 * k, t->mbps[k]);
	return ibc_tenv_oob_send(t->env, peer, IB_TAG_INFO, buf, sizeof(buf));
}

/* the peer's infos arrived in @buf: keep the rails both ends have, bring them up */
static ibc_status_t connect_establish(struct ib_tctx *t, int peer, struct ib_rconn *rc,
				      const uint8_t *buf)
{
	struct ibc_ib_conn_info info;
	uint32_t n = ibc_wire_get32(buf + 4);
	uint32_t their_min = ibc_wire_get32(buf + 8);
	char pairs[IBC_IB_MAX_RAILS * 2 * (IBC_IB_NAME_LEN + 8)];
	int k;

	if (ibc_wire_get32(buf) != IB_INFO_MAGIC || n < 1 || n > IBC_IB_MAX_RAILS || their_min == 0) {
		IBC_LOG_WARN(IB, "peer rank %d sent a malformed ib connection info (magic 0x%x, %u rails, stripe minimum %u)",
			     peer, ibc_wire_get32(buf), n, their_min);
		return IBC_ERR_INVALID_USAGE;
	}
	/* both ends must cut a message alike: the larger minimum of the two */
	rc->stripe_min = IBC_MAX(t->ib[0]->prm.stripe_min_bytes, (size_t)their_min);
	/* and weigh the rails alike: each by the slower of its two ports */
	for (k = 0; k < rc->nrails && k < (int)n; k++) {
		uint32_t theirs = ibc_wire_get32(buf + 16 + 4 * k);

		rc->mbps[k] = IBC_MIN(t->mbps[k], theirs);
	}
	for (k = (int)n; k < rc->nrails; k++) {
		ibc_ib_conn_destroy(rc->rail[k]);
		rc->rail[k] = NULL;
	}
	if ((int)n < rc->nrails)
		rc->nrails = (int)n;
	pairs[0] = 0;
	for (k = 0; k < rc->nrails; k++) {
		size_t len = strlen(pairs);

		IBC_CHECK(ibc_ib_conn_info_unpack(buf + IB_INFO_HDR_BYTES +
						  (size_t)k * IBC_IB_CONN_INFO_WIRE_BYTES, &info));
		IBC_CHECK(ibc_ib_conn_establish(rc->rail[k], &info));
		snprintf(pairs + len, sizeof(pairs) - len, "%s%s:%d -> %s:%u %u Gbit/s", k ? ", " : "",
			 t->ib[k]->dev_name, t->ib[k]->port, info.dev_name, info.port, rc->mbps[k] / 1000);
	}
	if (rc->nrails > 1 || t->nrails > 1)
		IBC_LOG_INFO(IB, "ib: rank %d to peer rank %d: %d rail%s (%s; the peer offered %u)",
			     t->env->rank, peer, rc->nrails, rc->nrails == 1 ? "" : "s", pairs, n);
	return IBC_OK;
}

static ibc_status_t connect_step(struct ib_tctx *t, int peer, struct ib_peer_state *ps)
{
	const struct ibc_tenv *env = t->env;
	uint8_t buf[IB_INFO_BYTES];
	uint32_t ready = IB_READY_MAGIC;
	int got = 0;

	switch (ps->state) {
	case IB_CS_IDLE:
		ps->t0_ms = ibc_time_ms();
		IBC_CHECK(connect_send_info(t, peer, ps));
		ps->state = IB_CS_SENT_INFO;
		/* fall through */
	case IB_CS_SENT_INFO:
		IBC_CHECK(ibc_tenv_oob_try_recv(env, peer, IB_TAG_INFO, buf, sizeof(buf), &got));
		if (!got)
			return IBC_INPROGRESS;
		IBC_CHECK(connect_establish(t, peer, ps->rc, buf));
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
		*conn_p = (struct ibc_tconn *)ps->rc;
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
		      t->ib[0]->dev_name, t->ib[0]->port, *why ? why : ibc_status_str(st));
	rconn_destroy(t, ps->rc);
	ps->rc = NULL;
	ps->state = IB_CS_IDLE;
	return st;
}

static void ib_ops_disconnect(struct ibc_tconn *tconn)
{
	struct ib_rconn *rc = (struct ib_rconn *)tconn;
	struct ib_tctx *t;
	int peer;

	if (!rc)
		return;
	t = rc->t;
	peer = rc->peer;
	rconn_destroy(t, rc);
	if (peer >= 0 && peer < t->env->nranks && t->peers[peer].rc == rc) {
		t->peers[peer].rc = NULL;
		t->peers[peer].state = IB_CS_IDLE;
	}
}

/* count a message or part of @nbytes on rail @k */
static void rail_count(struct ib_tctx *t, int k, size_t nbytes, int is_send)
{
	t->count[k].msgs++;
	if (is_send)
		t->count[k].sent += nbytes;
	else
		t->count[k].recvd += nbytes;
}

/*
 * stripe_plan() - how a message of @nbytes is cut on @rc
 * (ibc_ib_stripe_plan(): by the rails' rates, each part at least the stripe
 * minimum): parts' lengths into @len and rails into @rail, their count
 * returned; 1 unless there are several rails and it is larger than what the
 * first rail sends by its eager or LL path. Both ends compute it from the
 * same values (the negotiated limits, minimum and rates), so they cut a
 * message alike.
 */
static int stripe_plan(const struct ib_rconn *rc, const struct ibc_msg_desc *desc, size_t nbytes,
		       size_t len[IBC_IB_MAX_RAILS], int rail[IBC_IB_MAX_RAILS])
{
	size_t lim;

	len[0] = nbytes;
	rail[0] = 0;
	if (rc->nrails < 2)
		return 1;       /* one rail: no plan to make (the common case, every message) */
	lim = ibc_ib_conn_eager_max(rc->rail[0]);
	if (desc && (desc->flags & IBC_DESC_F_LL))
		lim = IBC_MAX(lim, ibc_ib_conn_ll_max(rc->rail[0]));
	return ibc_ib_stripe_plan(nbytes, rc->stripe_min, lim, rc->nrails, rc->mbps, len, rail);
}

static ibc_status_t ib_ops_post(struct ibc_tconn *conn, void *buf, size_t nbytes,
				const struct ibc_msg_desc *desc, struct ibc_treq *req, int is_send)
{
	struct ib_rconn *rc = (struct ib_rconn *)conn;
	struct ib_tctx *t = rc->t;
	struct ib_stripe *sp;
	size_t len[IBC_IB_MAX_RAILS];
	int rail[IBC_IB_MAX_RAILS];
	size_t off = 0;
	int nparts = stripe_plan(rc, desc, nbytes, len, rail);
	int k;

	if (nparts == 1) {
		if (t->nrails > 1)
			rail_count(t, rail[0], nbytes, is_send);
		return ibc_ib_conn_post(rc->rail[rail[0]], buf, nbytes, desc, req, is_send);
	}
	sp = ibc_calloc(1, sizeof(*sp), "ib striped message");
	if (!sp) {
		ibc_treq_complete(req, IBC_ERR_NO_MEMORY);
		return IBC_ERR_NO_MEMORY;
	}
	req->done = 0;
	req->status = IBC_INPROGRESS;
	req->nbytes = nbytes;
	req->is_send = is_send;
	sp->parent = req;
	sp->rc = rc;
	sp->nparts = nparts;
	for (k = 0; k < nparts; k++) {
		sp->part[k].peer = req->peer;
		/*
		 * a failed post completes its part with the error, and the caller's
		 * request gets it at the next progress call (IBC_OK is returned
		 * here: the request is in flight until every part is done)
		 */
		(void)ibc_ib_conn_post(rc->rail[rail[k]], (char *)buf + off, len[k], desc, &sp->part[k],
				       is_send);
		rail_count(t, rail[k], len[k], is_send);
		off += len[k];
	}
	t->striped++;
	sp->next = t->stripes;
	t->stripes = sp;
	return IBC_OK;
}

/* complete the requests of split messages whose parts are all done */
static void ib_stripe_reap(struct ib_tctx *t)
{
	struct ib_stripe **pp = &t->stripes;

	while (*pp) {
		struct ib_stripe *sp = *pp;
		ibc_status_t st = IBC_OK;
		int k;

		for (k = 0; k < sp->nparts; k++) {
			if (!ibc_treq_is_done(&sp->part[k]))
				break;
			if (st == IBC_OK && sp->part[k].status != IBC_OK)
				st = sp->part[k].status;
		}
		if (k < sp->nparts) {
			pp = &sp->next;
			continue;
		}
		*pp = sp->next;
		ibc_treq_complete(sp->parent, st);
		ibc_free(sp);
	}
}

static ibc_status_t ib_ops_isend(struct ibc_tconn *conn, const void *buf, size_t nbytes,
				 const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	return ib_ops_post(conn, (void *)buf, nbytes, desc, req, 1);
}

static ibc_status_t ib_ops_irecv(struct ibc_tconn *conn, void *buf, size_t nbytes,
				 const struct ibc_msg_desc *desc, struct ibc_treq *req)
{
	return ib_ops_post(conn, buf, nbytes, desc, req, 0);
}

static ibc_status_t ib_ops_progress(void *ctx)
{
	struct ib_tctx *t = ctx;
	ibc_status_t st = IBC_OK;
	int k;

	for (k = 0; k < t->nrails; k++) {
		ibc_status_t s = ibc_ib_ctx_progress(t->ib[k]);

		if (st == IBC_OK)
			st = s;
	}
	if (t->stripes)
		ib_stripe_reap(t);
	return st;
}

/* the next LL message: small messages take rail 0 only */
static int ib_ops_peek(struct ibc_tconn *conn, struct ibc_msg_desc *desc, size_t *nbytes)
{
	return ibc_ib_conn_peek(((struct ib_rconn *)conn)->rail[0], desc, nbytes);
}

/* the verbs device of rail 0: the communicator binds its progress thread near it */
static const char *ib_ops_device(void *ctx)
{
	struct ib_tctx *t = ctx;

	return t->ib[0]->dev_name;
}

/*
 * ib_ops_ctx_caps() - IBC_TCAP_CUDA when every rail's GPUDirect probe
 * registered device memory (ibc_ib_ctx_gdr_probe()); nothing else is
 * per context. The executor does not use it yet: device buffers are staged.
 */
static unsigned ib_ops_ctx_caps(void *ctx)
{
	struct ib_tctx *t = ctx;
	unsigned caps = t->ib[0]->caps;
	int k;

	for (k = 1; k < t->nrails; k++)
		caps &= t->ib[k]->caps;
	return caps;
}

static void ib_ops_wait(void *ctx, int timeout_us)
{
	struct ib_tctx *t = ctx;

	ibc_ib_ctx_wait_many(t->ib, t->nrails, timeout_us);
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
