/* SPDX-License-Identifier: MIT */
/*
 * net_setup.c - the net layer's lifecycle: the transport of every peer
 * (forced, or shm on this host, ib where both ends have a usable device,
 * tcp otherwise), the environment each transport is given (struct
 * ibc_tenv: the bootstrap seen through this layer, with each transport's
 * out-of-band tags in its own range), the spin policy, the teardown; and
 * the out-of-band exchange for the layers above.
 */
#include "config.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/shmseg.h"
#include "base/util.h"
#include "base/wire.h"
#include "net/net.h"
#include "net/net_internal.h"
#include "topo/topo.h"

/* ------------------------------------------------------------------------ */
/* the transports' environment (struct ibc_tenv)                            */
/* ------------------------------------------------------------------------ */

/* a transport's out-of-band tag on the bootstrap: its own range, by transport id */
static uint32_t tenv_tag(const struct ibc_tinst *ti, uint32_t tag)
{
	return ((uint32_t)ti->ops->id << 12) | (tag & IBC_TENV_TAG_MAX);
}

static int tenv_same_host(void *arg, int peer)
{
	struct ibc_tinst *ti = arg;

	return ibc_bootstrap_same_host(ti->net->bs, peer);
}

static const char *tenv_peer_host(void *arg, int peer)
{
	struct ibc_tinst *ti = arg;

	return ibc_net_peer_host(ti->net, peer);
}

static ibc_status_t tenv_oob_send(void *arg, int peer, uint32_t tag, const void *buf,
				  size_t nbytes)
{
	struct ibc_tinst *ti = arg;

	return ibc_bootstrap_send(ti->net->bs, peer, tenv_tag(ti, tag), buf, nbytes);
}

static ibc_status_t tenv_oob_try_recv(void *arg, int peer, uint32_t tag, void *buf,
				      size_t nbytes, int *got_p)
{
	struct ibc_tinst *ti = arg;

	return ibc_bootstrap_try_recv(ti->net->bs, peer, tenv_tag(ti, tag), buf, nbytes, got_p);
}

static ibc_status_t tenv_oob_connect_stream(void *arg, int peer, uint32_t tag, int *fd_p)
{
	struct ibc_tinst *ti = arg;

	return ibc_bootstrap_connect_stream(ti->net->bs, peer, tenv_tag(ti, tag), fd_p);
}

static ibc_status_t tenv_oob_try_accept_stream(void *arg, int peer, uint32_t tag, int *fd_p)
{
	struct ibc_tinst *ti = arg;

	return ibc_bootstrap_try_accept_stream(ti->net->bs, peer, tenv_tag(ti, tag), fd_p);
}

static ibc_status_t tenv_fail(void *arg, ibc_status_t st, int peer, const char *text)
{
	struct ibc_tinst *ti = arg;

	return ibc_net_fail(ti->net, st, peer, "%s", text);
}

static ibc_status_t tenv_status(void *arg)
{
	struct ibc_tinst *ti = arg;

	return ibc_net_status(ti->net);
}

static const struct ibc_tenv_ops tenv_ops = {
	.same_host = tenv_same_host,
	.peer_host = tenv_peer_host,
	.oob_send = tenv_oob_send,
	.oob_try_recv = tenv_oob_try_recv,
	.oob_connect_stream = tenv_oob_connect_stream,
	.oob_try_accept_stream = tenv_oob_try_accept_stream,
	.fail = tenv_fail,
	.status = tenv_status,
};

/* add @ops to the communicator's transports (init its context) unless present */
static ibc_status_t net_tinst_get(struct ibc_net *net, const struct ibc_transport_ops *ops,
				   int *ok_p)
{
	struct ibc_tinst *ti;
	ibc_status_t st;
	int i;

	for (i = 0; i < net->ntinst; i++) {
		if (net->tinst[i].ops == ops) {
			*ok_p = 1;
			return IBC_OK;
		}
	}
	*ok_p = 0;
	ti = &net->tinst[net->ntinst];
	memset(ti, 0, sizeof(*ti));
	ti->ops = ops;
	ti->net = net;
	ti->env.rank = net->rank;
	ti->env.nranks = net->nranks;
	ti->env.nlocal = net->nlocal;
	ti->env.local_rank = net->local_rank;
	ti->env.gpu = net->gpu;
	ti->env.timeout_ms = net->timeout_ms;
	ti->env.connect_timeout_ms = ibc_param_bootstrap_timeout_ms();
	memcpy(ti->env.comm_id, ibc_bootstrap_comm_id(net->bs), IBC_TENV_COMM_ID_BYTES);
	ti->env.ops = &tenv_ops;
	ti->env.arg = ti;
	st = ops->init(&ti->env, &ti->ctx);
	if (st == IBC_ERR_UNSUPPORTED) {
		ti->ops = NULL;
		return IBC_OK;
	}
	if (st != IBC_OK) {
		ti->ops = NULL;
		return st;
	}
	net->ntinst++;
	*ok_p = 1;
	return IBC_OK;
}

/*
 * flags of a rank's record: it has a usable verbs device; it has a peer on
 * its host (then every rank runs the second allgather, see net_exchange())
 */
enum { CAN_IB = 1, HAS_LOCAL = 2 };

int ibc_net_transport_parse(const char *name, const struct ibc_transport_ops **ops_p)
{
	const struct ibc_transport_ops *ops = NULL;

	if (!strcmp(name, "tcp"))
		ops = &ibc_sock_ops;
	else if (!strcmp(name, "shm"))
		ops = &ibc_shm_ops;
	else if (!strcmp(name, "ib"))
		ops = &ibc_ib_ops;
	else if (strcmp(name, "auto"))
		return -1;
	if (ops_p)
		*ops_p = ops;
	return 0;
}

/*
 * The allgathered record of each rank: its flags, its locality findings,
 * then the settings every rank must share (net_settings_check()).
 */
#define REC_SETTINGS (1 + IBC_LOCAL_PROBE_MAX / 8)
#define REC_BYTES (REC_SETTINGS + 14)

/*
 * Settings read per process that must be the same on every rank, and why:
 * a rank that differs is refused at creation, naming the variable, instead
 * of failing later with "mismatched calls" for calls that are the same
 * (IBC_RING_CHUNK_BYTES, IBC_ACCUM_FP32: ring messages of another size),
 * hanging in creation until IBC_BOOTSTRAP_TIMEOUT_MS (IBC_TRANSPORT: the
 * ranks that forced tcp skipped this exchange) or blaming a live peer as
 * "stopped or hung" (IBC_HEARTBEAT_MS: a rank judges a peer's silence by
 * its own interval), or refusing a call that the others issue
 * (IBC_MAX_REQUESTS: the same call must be refused on every rank).
 */
static void net_settings_put(uint8_t *p)
{
	const struct ibc_transport_ops *forced = NULL;

	(void)ibc_net_transport_parse(ibc_param_transport(), &forced);
	p[0] = forced ? (uint8_t)(forced->id + 1) : 0;
	p[1] = (uint8_t)ibc_param_accum_fp32();
	ibc_wire_put32(p + 2, (uint32_t)ibc_param_ring_chunk_bytes());
	ibc_wire_put32(p + 6, (uint32_t)ibc_param_heartbeat_ms());
	ibc_wire_put32(p + 10, (uint32_t)ibc_param_max_requests());
}

static const char *transport_code_name(unsigned code)
{
	static const struct ibc_transport_ops *const all[] = { &ibc_sock_ops, &ibc_shm_ops,
								&ibc_ib_ops };
	size_t i;

	for (i = 0; code && i < IBC_ARRAY_SIZE(all); i++)
		if ((unsigned)all[i]->id + 1 == code)
			return all[i]->name;
	return "auto";
}

/*
 * Every rank compares every record with rank 0's, so all refuse together;
 * a barrier first, so that no rank leaves (and tells the others it
 * aborted) while another is still in the allgather and would report that
 * instead of the cause.
 */
static ibc_status_t net_settings_check(struct ibc_net *net, const uint8_t *recs)
{
	const uint8_t *r0 = recs + REC_SETTINGS;
	int i;

	for (i = 1; i < net->nranks; i++) {
		const uint8_t *ri = recs + (size_t)i * REC_BYTES + REC_SETTINGS;
		const char *name;
		const char *why;
		char vi[32];
		char v0[32];

		if (!memcmp(ri, r0, REC_BYTES - REC_SETTINGS))
			continue;
		if (ri[0] != r0[0]) {
			name = "IBC_TRANSPORT";
			why = "every pair of ranks must use one transport";
			snprintf(vi, sizeof(vi), "%s", transport_code_name(ri[0]));
			snprintf(v0, sizeof(v0), "%s", transport_code_name(r0[0]));
		} else if (ri[1] != r0[1]) {
			name = "IBC_ACCUM_FP32";
			why = "it sets the wire format of bf16/fp16 reductions";
			snprintf(vi, sizeof(vi), "%u", ri[1]);
			snprintf(v0, sizeof(v0), "%u", r0[1]);
		} else if (ibc_wire_get32(ri + 2) != ibc_wire_get32(r0 + 2)) {
			name = "IBC_RING_CHUNK_BYTES";
			why = "it sets the size of the ring's messages";
			snprintf(vi, sizeof(vi), "%u", ibc_wire_get32(ri + 2));
			snprintf(v0, sizeof(v0), "%u", ibc_wire_get32(r0 + 2));
		} else if (ibc_wire_get32(ri + 6) != ibc_wire_get32(r0 + 6)) {
			name = "IBC_HEARTBEAT_MS";
			why = "each rank judges its peers' silence by its own interval";
			snprintf(vi, sizeof(vi), "%u", ibc_wire_get32(ri + 6));
			snprintf(v0, sizeof(v0), "%u", ibc_wire_get32(r0 + 6));
		} else {
			name = "IBC_MAX_REQUESTS";
			why = "a call over the limit must be refused on every rank";
			snprintf(vi, sizeof(vi), "%u", ibc_wire_get32(ri + 10));
			snprintf(v0, sizeof(v0), "%u", ibc_wire_get32(r0 + 10));
		}
		(void)ibc_bootstrap_barrier(net->bs);
		IBC_LOG_ERROR(INIT, "%s is %s on rank %d but %s on rank 0: it must be the same on every rank (%s)",
			      name, vi, i, v0, why);
		return IBC_ERR_INVALID_USAGE;
	}
	return IBC_OK;
}

/*
 * The capabilities, settings and /dev/shm findings of every rank
 * (net_local.c): two allgathers of REC_BYTES per rank, the first doubling
 * as the barrier after which every probe segment exists. Run on every rank
 * of a communicator of 2 or more, whatever its own settings (ib is agreed
 * per pair, shm is proven per pair, the settings are compared; a rank
 * with IBC_TRANSPORT=tcp that skipped it left the others waiting in it).
 * The second runs when any rank has a peer on its host, which
 * the first tells every rank: not when this rank has, since hosts may hold
 * different numbers of ranks (2 on one, 1 on another: the lone rank left
 * the others waiting in it until IBC_BOOTSTRAP_TIMEOUT_MS). Allocates
 * *@recs_p (nranks records).
 */
static ibc_status_t net_exchange(struct ibc_net *net, int any_remote, int *can_ib_p,
				 uint8_t **recs_p, struct ibc_local_probe *probe)
{
	uint8_t *recs;
	uint8_t *mine;
	int any_local = 0;
	int ok = 0;
	int i;
	ibc_status_t st = IBC_OK;

	*recs_p = NULL;
	recs = ibc_calloc((size_t)net->nranks, REC_BYTES, "transport capabilities");
	if (!recs)
		return IBC_ERR_NO_MEMORY;
	mine = recs + (size_t)net->rank * REC_BYTES;
	if (net->nlocal > 1)
		ibc_net_local_probe_create(net, probe);
	if (any_remote) {
		st = net_tinst_get(net, &ibc_ib_ops, &ok);
		if (st != IBC_OK)
			goto out;
	}
	*can_ib_p = ok;
	mine[0] = (ok ? CAN_IB : 0) | (net->nlocal > 1 ? HAS_LOCAL : 0);
	net_settings_put(mine + REC_SETTINGS);
	st = ibc_bootstrap_allgather(net->bs, recs, REC_BYTES);
	if (st != IBC_OK)
		goto out;
	st = net_settings_check(net, recs);
	if (st != IBC_OK)
		goto out;
	for (i = 0; i < net->nranks; i++)
		any_local |= recs[(size_t)i * REC_BYTES] & HAS_LOCAL;
	if (any_local) {
		mine = recs + (size_t)net->rank * REC_BYTES;
		if (net->nlocal > 1)
			ibc_net_local_probe_open(net, probe, mine + 1);
		st = ibc_bootstrap_allgather(net->bs, recs, REC_BYTES);
	}
out:
	ibc_net_local_probe_destroy(probe);
	if (st != IBC_OK) {
		ibc_free(recs);
		return st;
	}
	*recs_p = recs;
	return IBC_OK;
}

/* bit @idx of the findings of record @rec */
static int rec_bit(const uint8_t *rec, int idx)
{
	return (rec[1 + idx / 8] >> (idx % 8)) & 1;
}

/*
 * For each same-host peer, whether the two share /dev/shm: each opened the
 * other's probe segment. Fills @shm_ok[nranks]; logs the peers that do not
 * (once per rank, with the first failure's cause) and returns how many.
 */
static int net_local_verdicts(struct ibc_net *net, const uint8_t *recs,
			      const struct ibc_local_probe *probe, uint8_t *shm_ok)
{
	const uint8_t *mine = recs + (size_t)net->rank * REC_BYTES;
	char list[256];
	size_t off = 0;
	int nbad = 0;
	int li = 0;
	int i;

	list[0] = '\0';
	for (i = 0; i < net->nranks; i++) {
		int ok;

		if (!ibc_bootstrap_same_host(net->bs, i))
			continue;
		if (i == net->rank || net->nlocal > IBC_LOCAL_PROBE_MAX)
			ok = 1;
		else
			ok = rec_bit(mine, li) &&
			     rec_bit(recs + (size_t)i * REC_BYTES, net->local_rank);
		shm_ok[i] = (uint8_t)ok;
		if (!ok) {
			nbad++;
			if (off < sizeof(list) - 16)
				off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%d",
							off ? "," : "", i);
		}
		li++;
	}
	if (net->nlocal > IBC_LOCAL_PROBE_MAX && net->local_rank == 0)
		IBC_LOG_INFO(INIT, "%d ranks on this host: /dev/shm sharing is assumed beyond %d, not proven",
			     net->nlocal, IBC_LOCAL_PROBE_MAX);
	if (nbad)
		IBC_LOG_WARN(INIT, "ranks %s run on this host (%s, same boot id) but do not share /dev/shm with this rank (%s; separate containers or mount namespaces, or another user): not shm with them",
			     list, ibc_net_peer_host(net, net->rank),
			     probe->why[0] ? probe->why : "this rank's segment does not open there");
	return nbad;
}

/*
 * Choose the transport of every peer. Forced (IBC_TRANSPORT): everyone uses
 * it (shm only when every rank is on this host and proven to share its
 * /dev/shm). Auto: shm with ranks of this host that share /dev/shm, else ib
 * when both ends have a usable device (agreed through an allgather of
 * capabilities), else tcp.
 */
static ibc_status_t net_choose_transports(struct ibc_net *net)
{
	const char *want = ibc_param_transport();
	const struct ibc_transport_ops *forced = NULL;
	struct ibc_local_probe probe;
	uint8_t *recs = NULL;
	uint8_t *shm_ok = NULL;
	int any_remote = 0;
	int can_ib = 0;
	int have_shm = 0;
	int have_tcp = 0;
	int have_ib = 0;
	int ok;
	int i;
	ibc_status_t st = IBC_OK;

	memset(&probe, 0, sizeof(probe));
	if (ibc_net_transport_parse(want, &forced) != 0)
		IBC_LOG_WARN(ENV, "IBC_TRANSPORT=%s is not auto, shm, tcp or ib; using auto", want);

	for (i = 0; i < net->nranks; i++)
		if (i != net->rank && !ibc_bootstrap_same_host(net->bs, i))
			any_remote = 1;
	if (forced && (forced->caps & IBC_TCAP_LOCAL) && any_remote) {
		for (i = 0; i < net->nranks; i++) {
			if (!ibc_bootstrap_same_host(net->bs, i)) {
				IBC_LOG_ERROR(INIT, "IBC_TRANSPORT=shm but rank %d runs on host %s, not this host",
					      i, ibc_net_peer_host(net, i));
				return IBC_ERR_INVALID_USAGE;
			}
		}
	}
	/* on every rank of a communicator of 2 or more, whatever its settings */
	if (net->nranks > 1)
		IBC_CHECK_GOTO(net_exchange(net, any_remote && !forced, &can_ib, &recs, &probe), st,
			       out);
	if (recs && (!forced || (forced->caps & IBC_TCAP_LOCAL))) {
		shm_ok = ibc_calloc((size_t)net->nranks, 1, "shm verdicts");
		if (!shm_ok) {
			st = IBC_ERR_NO_MEMORY;
			goto out;
		}
		if (net_local_verdicts(net, recs, &probe, shm_ok) && forced) {
			IBC_LOG_ERROR(INIT, "IBC_TRANSPORT=shm, but ranks of this host do not share /dev/shm with this rank (see the warning above); use IBC_TRANSPORT=auto or tcp");
			st = IBC_ERR_UNSUPPORTED;
			goto out;
		}
	}

	if (forced) {
		IBC_CHECK_GOTO(net_tinst_get(net, forced, &ok), st, out);
		if (!ok) {
			IBC_LOG_ERROR(INIT, "IBC_TRANSPORT=%s but that transport is %s", want,
				      forced == &ibc_ib_ops ? "not usable here (no active verbs device, or built without verbs)"
							    : "not usable");
			st = IBC_ERR_UNSUPPORTED;
			goto out;
		}
		for (i = 0; i < net->nranks; i++)
			net->peers[i].ops = forced;
		snprintf(net->transport_name, sizeof(net->transport_name), "%s", forced->name);
		goto out;
	}

	for (i = 0; i < net->nranks; i++) {
		const struct ibc_transport_ops *ops;

		if (ibc_bootstrap_same_host(net->bs, i) && (!shm_ok || shm_ok[i])) {
			ops = &ibc_shm_ops;
		} else if (recs && can_ib && (recs[(size_t)i * REC_BYTES] & CAN_IB)) {
			ops = &ibc_ib_ops;
		} else {
			ops = &ibc_sock_ops;
		}
		if (i == net->rank)
			ops = NULL;
		if (ops) {
			IBC_CHECK_GOTO(net_tinst_get(net, ops, &ok), st, out);
			if (!ok) {
				IBC_LOG_ERROR(INIT, "transport %s needed for rank %d is not usable",
					      ops->name, i);
				st = IBC_ERR_UNSUPPORTED;
				goto out;
			}
		}
		net->peers[i].ops = ops;
		have_shm |= ops == &ibc_shm_ops;
		have_tcp |= ops == &ibc_sock_ops;
		have_ib |= ops == &ibc_ib_ops;
	}
	snprintf(net->transport_name, sizeof(net->transport_name), "%s%s%s%s%s",
		 have_shm ? "shm" : "", have_shm && (have_ib || have_tcp) ? "+" : "",
		 have_ib ? "ib" : "", have_ib && have_tcp ? "+" : "", have_tcp ? "tcp" : "");
	if (!have_shm && !have_tcp && !have_ib)
		snprintf(net->transport_name, sizeof(net->transport_name), "self");
out:
	ibc_free(recs);
	ibc_free(shm_ok);
	return st;
}

/* this host's ranks (same host name and boot id) and this rank's index among them */
static void net_count_local(struct ibc_net *net)
{
	int i;

	net->nlocal = 0;
	net->local_rank = 0;
	for (i = 0; i < net->nranks; i++) {
		net->nlocal += ibc_bootstrap_same_host(net->bs, i);
		if (i < net->rank && ibc_bootstrap_same_host(net->bs, i))
			net->local_rank++;
	}
	ibc_shm_note_nlocal(net->nlocal);
}

/*
 * Busy-polling helps only when every rank has a core: with more ranks on
 * this host than the CPUs they may run on together, waiting ranks yield at
 * once so that the peer they wait for can run. "Together": the union of
 * the local ranks' affinity masks, exchanged here (a launcher that binds
 * each rank to its own core, as Open MPI's mpirun does, gives each process
 * one CPU; counting only this process's, every wait of a 2-rank job under
 * mpirun yielded at once: 1.0-1.2 us per 8-byte all-reduce where spinning
 * takes 0.3-0.5).
 */
static ibc_status_t net_choose_spin(struct ibc_net *net)
{
	cpu_set_t set;
	cpu_set_t all;
	cpu_set_t *masks;
	ibc_status_t st = IBC_OK;
	int ncpu = 0;
	int me = 0;
	int n = 0;
	int i;

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		CPU_ZERO(&set);
	all = set;
	/* the local ranks' masks in rank order, this rank's included: for ibc_net_cpu_assign() */
	masks = ibc_calloc((size_t)IBC_MAX(net->nlocal, 1), sizeof(*masks), "local ranks' CPU masks");
	if (!masks)
		return IBC_ERR_NO_MEMORY;
	/* sends first (128 bytes: the bootstrap buffers them), then receives */
	for (i = 0; i < net->nranks && st == IBC_OK; i++)
		if (i != net->rank && ibc_bootstrap_same_host(net->bs, i))
			st = ibc_net_oob_send(net, i, IBC_NET_TAG_CPUSET, &set, sizeof(set));
	for (i = 0; i < net->nranks && st == IBC_OK; i++) {
		cpu_set_t theirs;

		if (i == net->rank) {
			me = n;
			theirs = set;
		} else if (!ibc_bootstrap_same_host(net->bs, i)) {
			continue;
		} else {
			st = ibc_net_oob_recv(net, i, IBC_NET_TAG_CPUSET, &theirs, sizeof(theirs));
			if (st != IBC_OK)
				break;
			CPU_OR(&all, &all, &theirs);
		}
		if (n < IBC_MAX(net->nlocal, 1))
			masks[n++] = theirs;
	}
	if (st != IBC_OK) {
		char why[1024];

		ibc_free(masks);
		IBC_LOG_ERROR(INIT, "exchanging CPU affinity with the ranks on this host failed: %s",
			      ibc_net_fail_text(net, st, why, sizeof(why)));
		return st;
	}
	net->spin_cpu = ibc_net_cpu_assign(masks, n, me);
	ibc_free(masks);
	ncpu = CPU_COUNT(&all);
	net->spin_ns = (uint64_t)ibc_param_spin_us() * 1000;
	if (ncpu > 0 && net->nlocal > ncpu && !ibc_param_from_env(IBC_PARAM_IDX_SPIN_US)) {
		net->spin_ns = 0;
		if (net->rank == 0)
			IBC_LOG_INFO(INIT, "%d ranks on this host share %d cores: waits yield instead of spinning",
				     net->nlocal, ncpu);
	}
	return IBC_OK;
}

/*
 * The rank's GPU (ibc_topo_rank_gpu(): IBC_TOPO_GPU, else the current CUDA
 * device), before the transports start: the verbs transport picks the NIC
 * nearest it and the progress thread is bound near it. -1 when none.
 */
static void net_find_gpu(struct ibc_net *net)
{
	char why[IBC_TOPO_WHY_LEN];
	struct ibc_topo *topo;

	net->gpu = -1;
	if (ibc_topo_shared(&topo) != IBC_OK ||
	    ibc_topo_rank_gpu(topo, &net->gpu, why, sizeof(why)) != IBC_OK)
		return;
	IBC_LOG_INFO(TOPO, "rank's GPU: %s", why);
}

void ibc_net_init(struct ibc_net *net)
{
	pthread_mutex_init(&net->lock, NULL);
	net->timeout_ms = ibc_param_timeout_ms();
	net->gpu = -1;
	net->world_rank = -1;
	net->wait_peer = -1;
	net->spin_cpu = -1;
	snprintf(net->transport_name, sizeof(net->transport_name), "bootstrap");
}

void ibc_net_log_rank(const struct ibc_net *net)
{
	ibc_log_set_rank_ctx(net->rank, net->log_ctx);
}

void ibc_net_fini(struct ibc_net *net)
{
	pthread_mutex_destroy(&net->lock);
	ibc_free(net->peers);
	net->peers = NULL;
}

ibc_status_t ibc_net_setup(struct ibc_net *net)
{
	net->rank = ibc_bootstrap_rank(net->bs);
	net->nranks = ibc_bootstrap_nranks(net->bs);
	ibc_bootstrap_set_wait_fn(net->bs, ibc_net_wait_state);
	if (net->world_rank >= 0) {
		const uint8_t *id = ibc_bootstrap_comm_id(net->bs);

		snprintf(net->log_ctx, sizeof(net->log_ctx), "world rank %d, communicator %02x%02x%02x%02x",
			 net->world_rank, id[0], id[1], id[2], id[3]);
	}
	ibc_net_log_rank(net);
	net->peers = ibc_calloc((size_t)net->nranks, sizeof(*net->peers), "peer table");
	if (!net->peers)
		return IBC_ERR_NO_MEMORY;
	net_find_gpu(net);
	net_count_local(net);
	IBC_CHECK(net_choose_transports(net));
	return net_choose_spin(net);
}

void ibc_net_teardown(struct ibc_net *net, int abort)
{
	int i;

	if (net->bs)
		ibc_bootstrap_announce_leave(net->bs, abort, net->poisoned ? net->poison_msg : "");
	for (i = 0; net->peers && i < net->nranks; i++) {
		if (net->peers[i].conn) {
			net->peers[i].ops->disconnect(net->peers[i].conn);
			net->peers[i].conn = NULL;
		}
	}
	for (i = net->ntinst - 1; i >= 0; i--)
		net->tinst[i].ops->fini(net->tinst[i].ctx);
	net->ntinst = 0;
	ibc_bootstrap_destroy(net->bs, abort);
	net->bs = NULL;
}

const char *ibc_net_device(const struct ibc_net *net)
{
	int i;

	/* the device of a transport that opened one and that some peer uses */
	for (i = 0; i < net->ntinst; i++) {
		const struct ibc_tinst *ti = &net->tinst[i];
		int p;

		for (p = 0; p < net->nranks; p++)
			if (net->peers[p].ops == ti->ops && *ti->ops->device(ti->ctx))
				return ti->ops->device(ti->ctx);
	}
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* the out-of-band exchange for the layers above                            */
/* ------------------------------------------------------------------------ */

static uint32_t upper_tag(uint32_t tag)
{
	return IBC_BOOT_TAG_UPPER | (tag & IBC_TENV_TAG_MAX);
}

ibc_status_t ibc_net_oob_send(struct ibc_net *net, int peer, uint32_t tag, const void *buf,
			      size_t nbytes)
{
	return ibc_bootstrap_send(net->bs, peer, upper_tag(tag), buf, nbytes);
}

ibc_status_t ibc_net_oob_try_recv(struct ibc_net *net, int peer, uint32_t tag, void *buf,
				  size_t nbytes, int *got_p)
{
	return ibc_bootstrap_try_recv(net->bs, peer, upper_tag(tag), buf, nbytes, got_p);
}

ibc_status_t ibc_net_oob_recv(struct ibc_net *net, int peer, uint32_t tag, void *buf,
			      size_t nbytes)
{
	return ibc_bootstrap_recv(net->bs, peer, upper_tag(tag), buf, nbytes);
}

ibc_status_t ibc_net_oob_allgather(struct ibc_net *net, void *buf, size_t nbytes)
{
	return ibc_bootstrap_allgather(net->bs, buf, nbytes);
}

const uint8_t *ibc_net_comm_id(const struct ibc_net *net)
{
	return ibc_bootstrap_comm_id(net->bs);
}

int ibc_net_same_host(const struct ibc_net *net, int rank)
{
	return ibc_bootstrap_same_host(net->bs, rank);
}
