/* SPDX-License-Identifier: MIT */
/*
 * ib_device.c - verbs devices and ports: IBC_IB_HCA parsing (NCCL's syntax),
 * discovery of the usable (ACTIVE) ports, the per-rank port choice (the hook
 * where the topology module plugs in), MTU helpers, and the device listing
 * of `ibc_info --devices`. Relies on ib.h and ib_gid.c.
 */
#include "config.h"

#include <ctype.h>
#include <endian.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/param.h"
#include "topo/topo.h"
#include "transport/ib/ib.h"

/**
 * ibc_ib_hca_parse() - Parse an IBC_IB_HCA value (NCCL_IB_HCA syntax).
 * @str:    [in]  "" (everything), or a comma list of name[:port] entries,
 *                optionally preceded by '^' (exclude the entries) and then
 *                '=' (names match exactly instead of by prefix), e.g.
 *                "mlx5_0:1,mlx5_1", "^=mlx5_2", "rxe".
 * @spec_p: [out] the parsed selection, written only on success.
 *
 * Source: NCCL's ncclIbHca / parseStringList semantics.
 * Blocking: no. Threading: pure, reentrant.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (empty name, bad port number, more
 *         than IBC_IB_HCA_MAX entries, name longer than IBC_IB_NAME_LEN - 1),
 *         logged as a WARN naming the offending entry.
 */
ibc_status_t ibc_ib_hca_parse(const char *str, struct ibc_ib_hca_spec *spec_p)
{
	struct ibc_ib_hca_spec spec;
	const char *p = str ? str : "";

	memset(&spec, 0, sizeof(spec));
	while (isspace((unsigned char)*p))
		p++;
	if (*p == '^') {
		spec.exclude = 1;
		p++;
	}
	if (*p == '=') {
		spec.exact = 1;
		p++;
	}
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *colon;
		size_t nlen;
		long port = 0;

		while (len && isspace((unsigned char)*p)) {
			p++;
			len--;
		}
		while (len && isspace((unsigned char)p[len - 1]))
			len--;
		if (len == 0) {
			if (!end)
				break;
			p = end + 1;
			continue;
		}
		colon = memchr(p, ':', len);
		nlen = colon ? (size_t)(colon - p) : len;
		if (colon) {
			char num[16];
			size_t plen = len - nlen - 1;
			char *e;

			if (plen == 0 || plen >= sizeof(num)) {
				IBC_LOG_WARN(IB, "IBC_IB_HCA=%s: entry '%.*s' has a bad port number", str,
					     (int)len, p);
				return IBC_ERR_INVALID_ARG;
			}
			memcpy(num, colon + 1, plen);
			num[plen] = '\0';
			port = strtol(num, &e, 10);
			if (*e || port < 1 || port > 255) {
				IBC_LOG_WARN(IB, "IBC_IB_HCA=%s: entry '%.*s' has a bad port number", str,
					     (int)len, p);
				return IBC_ERR_INVALID_ARG;
			}
		}
		if (nlen == 0 || nlen >= IBC_IB_NAME_LEN) {
			IBC_LOG_WARN(IB, "IBC_IB_HCA=%s: entry '%.*s' has %s device name", str, (int)len, p,
				     nlen ? "a too long" : "no");
			return IBC_ERR_INVALID_ARG;
		}
		if (spec.n == IBC_IB_HCA_MAX) {
			IBC_LOG_WARN(IB, "IBC_IB_HCA=%s: more than %d entries", str, IBC_IB_HCA_MAX);
			return IBC_ERR_INVALID_ARG;
		}
		memcpy(spec.e[spec.n].name, p, nlen);
		spec.e[spec.n].name[nlen] = '\0';
		spec.e[spec.n].port = (int)port;
		spec.n++;
		if (!end)
			break;
		p = end + 1;
	}
	*spec_p = spec;
	return IBC_OK;
}

/**
 * ibc_ib_hca_match() - Whether @spec selects port @port of device @dev_name.
 * @spec:     [in] from ibc_ib_hca_parse(); no entries selects everything.
 * @dev_name: [in] verbs device name, e.g. "mlx5_0".
 * @port:     [in] 1-based port number.
 *
 * An entry matches when its name equals @dev_name (exact mode) or is a
 * prefix of it, and its port is absent or equal to @port. The result is
 * negated when the spec excludes.
 * Return: 1 when selected, 0 otherwise.
 */
int ibc_ib_hca_match(const struct ibc_ib_hca_spec *spec, const char *dev_name, int port)
{
	int found = 0;
	int i;

	if (spec->n == 0)
		return 1;
	for (i = 0; i < spec->n && !found; i++) {
		const char *name = spec->e[i].name;
		int name_ok = spec->exact ? !strcmp(dev_name, name) :
					    !strncmp(dev_name, name, strlen(name));

		found = name_ok && (spec->e[i].port == 0 || spec->e[i].port == port);
	}
	return spec->exclude ? !found : found;
}

static int port_speed_mbps(const struct ibv_port_attr *pa)
{
	int lanes;
	int mbps;

	switch (pa->active_width) {
	case 1: lanes = 1; break;
	case 2: lanes = 4; break;
	case 4: lanes = 8; break;
	case 8: lanes = 12; break;
	case 16: lanes = 2; break;
	default: return 0;
	}
	switch (pa->active_speed) {
	case 1: mbps = 2500; break;
	case 2: mbps = 5000; break;
	case 4: case 8: mbps = 10000; break;
	case 16: mbps = 14000; break;
	case 32: mbps = 25000; break;
	case 64: mbps = 50000; break;
	case 128: mbps = 100000; break;
	default: return 0;
	}
	return lanes * mbps;
}

/* ibc_ib_mtu_str() - "256" .. "4096" for an enum ibv_mtu, "?" otherwise */
const char *ibc_ib_mtu_str(enum ibv_mtu mtu)
{
	switch (mtu) {
	case IBV_MTU_256:  return "256";
	case IBV_MTU_512:  return "512";
	case IBV_MTU_1024: return "1024";
	case IBV_MTU_2048: return "2048";
	case IBV_MTU_4096: return "4096";
	default:           return "?";
	}
}

/**
 * ibc_ib_mtu_negotiate() - Path MTU of a connection: the smaller of both
 * ends' active MTU, so that no packet exceeds what either link carries
 * (peers with different MTUs work; e.g. rxe on veth 1024 and on lo 4096).
 * @local:  [in] this port's active MTU.
 * @remote: [in] the peer's active MTU from its connection info.
 * Return: the MTU to program into the QP at RTR; IBV_MTU_1024 if either
 *         value is not a valid enum ibv_mtu.
 */
enum ibv_mtu ibc_ib_mtu_negotiate(enum ibv_mtu local, enum ibv_mtu remote)
{
	if (local < IBV_MTU_256 || local > IBV_MTU_4096 || remote < IBV_MTU_256 ||
	    remote > IBV_MTU_4096)
		return IBV_MTU_1024;
	return local < remote ? local : remote;
}

/**
 * ibc_ib_port_gids() - The valid entries of one port's GID table with their
 * types (IB, RoCE v1, RoCE v2).
 * @vctx: [in]  an opened device.
 * @port: [in]  1-based port number.
 * @tbl:  [out] up to @max entries, in index order.
 * @max:  [in]  capacity of @tbl.
 *
 * Uses ibv_query_gid_table() sized for the whole device (the kernel refuses
 * a larger buffer), falling back to ibv_query_gid_ex() per index.
 * Return: the number of entries, or -1 when the table cannot be read.
 */
int ibc_ib_port_gids(struct ibv_context *vctx, int port, struct ibc_ib_gid_entry *tbl, int max)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_gid_entry *ents;
	size_t cap;
	ssize_t n;
	int k = 0;
	int i;

	if (ibv_query_device(vctx, &da) || ibv_query_port(vctx, (uint8_t)port, &pa))
		return -1;
	cap = (size_t)pa.gid_tbl_len * (size_t)(da.phys_port_cnt ? da.phys_port_cnt : 1);
	ents = ibc_calloc(cap ? cap : 1, sizeof(*ents), "gid table");
	if (!ents)
		return -1;
	n = ibv_query_gid_table(vctx, ents, cap, 0);
	if (n >= 0) {
		for (i = 0; i < n && k < max; i++) {
			if ((int)ents[i].port_num != port)
				continue;
			memcpy(tbl[k].gid, ents[i].gid.raw, 16);
			tbl[k].index = (int)ents[i].gid_index;
			tbl[k].type = (int)ents[i].gid_type;
			k++;
		}
		ibc_free(ents);
		return k;
	}
	IBC_LOG_DEBUG(IB, "ibv_query_gid_table(%zu entries) failed: %s; reading entries one by one",
		      cap, strerror((int)-n));
	for (i = 0; i < pa.gid_tbl_len && k < max; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid_ex(vctx, (uint32_t)port, (uint32_t)i, &e, 0))
			continue; /* ENODATA: empty entry */
		memcpy(tbl[k].gid, e.gid.raw, 16);
		tbl[k].index = (int)e.gid_index;
		tbl[k].type = (int)e.gid_type;
		k++;
	}
	ibc_free(ents);
	return k;
}

static const char *port_state_str(enum ibv_port_state st)
{
	switch (st) {
	case IBV_PORT_NOP: return "NOP";
	case IBV_PORT_DOWN: return "DOWN";
	case IBV_PORT_INIT: return "INIT";
	case IBV_PORT_ARMED: return "ARMED";
	case IBV_PORT_ACTIVE: return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
	default: return "?";
	}
}

/**
 * ibc_ib_ports_list() - Find the ports this process may use.
 * @spec:      [in]  IBC_IB_HCA selection.
 * @ports:     [out] the usable ports in device-list order, then port order.
 * @max_ports: [in]  capacity of @ports.
 * @nports_p:  [out] how many were found (0 is not an error).
 *
 * Opens each device briefly. Ports excluded by @spec are skipped with a
 * DEBUG line; ports that are not ACTIVE, that have an unknown link layer,
 * or (RoCE) no GID are skipped with an INFO line giving the reason.
 * Blocking: a few ms per device. Threading: safe.
 * Return: IBC_OK; IBC_ERR_NO_MEMORY. A system without verbs support gives
 *         IBC_OK with zero ports.
 */
ibc_status_t ibc_ib_ports_list(const struct ibc_ib_hca_spec *spec, struct ibc_ib_port_desc *ports,
			       int max_ports, int *nports_p)
{
	struct ibv_device **list;
	int ndev = 0;
	int n = 0;
	int d;

	list = ibv_get_device_list(&ndev);
	if (!list) {
		IBC_LOG_INFO(IB, "no verbs devices: ibv_get_device_list failed: %s", strerror(errno));
		*nports_p = 0;
		return IBC_OK;
	}
	for (d = 0; d < ndev; d++) {
		const char *name = ibv_get_device_name(list[d]);
		struct ibv_context *vctx = ibv_open_device(list[d]);
		struct ibv_device_attr da;
		int p;

		if (!vctx) {
			IBC_LOG_INFO(IB, "device %s skipped: ibv_open_device failed: %s", name,
				     strerror(errno));
			continue;
		}
		if (ibv_query_device(vctx, &da)) {
			IBC_LOG_INFO(IB, "device %s skipped: ibv_query_device failed", name);
			ibv_close_device(vctx);
			continue;
		}
		for (p = 1; p <= da.phys_port_cnt && n < max_ports; p++) {
			struct ibv_port_attr pa;
			struct ibc_ib_gid_entry gids[8];

			if (!ibc_ib_hca_match(spec, name, p)) {
				IBC_LOG_DEBUG(IB, "port %s:%d excluded by IBC_IB_HCA", name, p);
				continue;
			}
			if (ibv_query_port(vctx, (uint8_t)p, &pa)) {
				IBC_LOG_INFO(IB, "port %s:%d skipped: ibv_query_port failed", name, p);
				continue;
			}
			if (pa.state != IBV_PORT_ACTIVE) {
				IBC_LOG_INFO(IB, "port %s:%d skipped: state %s, not ACTIVE", name, p,
					     port_state_str(pa.state));
				continue;
			}
			if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND &&
			    pa.link_layer != IBV_LINK_LAYER_ETHERNET &&
			    pa.link_layer != IBV_LINK_LAYER_UNSPECIFIED) {
				IBC_LOG_INFO(IB, "port %s:%d skipped: link layer %d is neither InfiniBand nor Ethernet",
					     name, p, pa.link_layer);
				continue;
			}
			if (pa.link_layer == IBV_LINK_LAYER_ETHERNET &&
			    ibc_ib_port_gids(vctx, p, gids, 8) <= 0) {
				IBC_LOG_INFO(IB, "port %s:%d skipped: RoCE port without a GID (no IP address on its interface?)",
					     name, p);
				continue;
			}
			memset(&ports[n], 0, sizeof(ports[n]));
			snprintf(ports[n].dev_name, sizeof(ports[n].dev_name), "%s", name);
			ports[n].port = p;
			ports[n].link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ?
						      IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
			ports[n].active_mtu = pa.active_mtu;
			ports[n].lid = pa.lid;
			ports[n].speed_mbps = port_speed_mbps(&pa);
			n++;
		}
		ibv_close_device(vctx);
	}
	ibv_free_device_list(list);
	*nports_p = n;
	return IBC_OK;
}

/**
 * ibc_ib_port_pick() - Choose the port of one rank among the usable ones.
 * @ports:      [in] usable ports from ibc_ib_ports_list(), @nports > 0.
 * @nports:     [in] number of ports.
 * @local_rank: [in] index of this rank among the communicator's ranks on
 *                   this host (0-based, in rank order).
 * @nlocal:     [in] number of ranks on this host.
 *
 * The fallback of ib_ops_pick_port() (ib_ops.c), which asks the topology
 * module (ibc_topo_pick_nic()) first: local ranks spread round-robin over
 * the ports in listed order, so two ranks on one host use two different
 * HCAs (rxe0 and rxe1 in the test VM).
 * Return: an index into @ports.
 */
int ibc_ib_port_pick(const struct ibc_ib_port_desc *ports, int nports, int local_rank, int nlocal)
{
	(void)ports;
	(void)nlocal;
	if (nports <= 0 || local_rank < 0)
		return 0;
	return local_rank % nports;
}

/**
 * ibc_ib_rails_pick() - The ports of one rank's rails (IBC_IB_RAILS).
 * @nports: [in]  usable ports from ibc_ib_ports_list(), >= 1.
 * @pick:   [in]  the rank's own port (ib_ops_pick_port()), 0 <= @pick < @nports.
 * @want:   [in]  IBC_IB_RAILS: 0 auto, else 1..IBC_IB_MAX_RAILS.
 * @dist:   [in]  per port its PCI class from the rank's GPU (enum
 *                ibc_topo_dist, smaller is nearer), or NULL when the rank
 *                has no GPU or the topology cannot say.
 * @idx:    [out] the rails' port indexes, rail 0 first.
 *
 * Explicit @want: every port in listed order when @want >= @nports (so two
 * hosts given matching IBC_IB_HCA lists pair rail k with rail k), else @want
 * ports from @pick on, round-robin. Auto: @pick, then every other port as
 * near the GPU as @pick in listed order, when that class is PIX or PXB (a
 * GPU with two NICs behind its PCIe switch, where NCCL drives both); one
 * rail otherwise (no GPU, or NICs only across a host bridge, which other
 * GPUs' ranks would share). At most IBC_IB_MAX_RAILS.
 * Pure function of its inputs.
 * Return: the rail count, >= 1.
 */
int ibc_ib_rails_pick(int nports, int pick, int want, const int *dist, int idx[IBC_IB_MAX_RAILS])
{
	int n = 0;
	int k;

	if (nports < 1 || pick < 0 || pick >= nports) {
		idx[0] = 0;
		return 1;
	}
	if (want >= 1) {
		want = want < IBC_IB_MAX_RAILS ? want : IBC_IB_MAX_RAILS;
		if (want == 1) {
			idx[0] = pick;
			return 1;
		}
		if (want >= nports) {
			for (k = 0; k < nports && k < want; k++)
				idx[k] = k;
			return k;
		}
		for (k = 0; k < want; k++)
			idx[k] = (pick + k) % nports;
		return want;
	}
	idx[n++] = pick;
	if (!dist || dist[pick] > IBC_TOPO_PXB)
		return 1;
	for (k = 0; k < nports && n < IBC_IB_MAX_RAILS; k++)
		if (k != pick && dist[k] == dist[pick])
			idx[n++] = k;
	return n;
}

/* rates above this (16.7 Tbit/s) count as this: keeps stripe_share()'s products below 2^64 */
#define IB_STRIPE_RATE_MAX (1u << 24)

/*
 * share of @nbytes for weight @w of @wsum, rounded down, exact and without
 * overflow for weights up to IB_STRIPE_RATE_MAX and four rails
 */
static size_t stripe_share(size_t nbytes, uint64_t w, uint64_t wsum)
{
	return (size_t)((uint64_t)nbytes / wsum * w + (uint64_t)nbytes % wsum * w / wsum);
}

/**
 * ibc_ib_stripe_plan() - How one message is cut over a connection's rails.
 * @nbytes: [in]  message size, bytes.
 * @min:    [in]  stripe minimum, bytes (0 counts as 1): the larger of both
 *                ends' IBC_IB_STRIPE_MIN_BYTES.
 * @lim:    [in]  bytes that rail 0 sends whole by its eager or LL path: a
 *                message up to @lim is not cut.
 * @nrails: [in]  the connection's rails, 1..IBC_IB_MAX_RAILS.
 * @mbps:   [in]  per rail its rate in Mbit/s (the slower of the two ends'
 *                ports), or NULL; when any is 0 (unknown) the rails count
 *                as equal; rates above 2^24 count as 2^24.
 * @len:    [out] per part its length in bytes; the parts are contiguous, in
 *                order, each a multiple of 4 KiB and at least @min but the
 *                last, none empty.
 * @rail:   [out] per part the rail that carries it, ascending; the first
 *                part is always on rail 0.
 *
 * A message larger than @lim and at least twice @min is split in
 * proportion to the rails' rates (NCCL's merged NICs also count a port by
 * its speed): a 200 Gbit/s rail beside a 100 Gbit/s one carries two thirds.
 * While a share would fall below @min, the slowest rail other than rail 0
 * leaves the plan (of equal rates the last one), so a message of n x @min
 * uses at most n rails. Rail 0 always carries the first part: it is the
 * rail whose eager and LL paths carry the smaller messages, and a message
 * posted on it at both ends keeps each end's calls matched there, so that
 * a size mismatch is still found (a whole message moved to another rail
 * would leave rail 0's order to the next message). Shares are rounded up to
 * 4 KiB in rail order and the last rail takes the rest, so with small
 * minimums the last rails may get nothing. Pure function of its inputs:
 * both ends of a connection compute the same plan from the same negotiated
 * values, so each rail matches its parts in posting order.
 * Return: the number of parts, 1..@nrails (1: len[0] = @nbytes on rail 0).
 */
int ibc_ib_stripe_plan(size_t nbytes, size_t min, size_t lim, int nrails, const uint32_t *mbps,
		       size_t len[IBC_IB_MAX_RAILS], int rail[IBC_IB_MAX_RAILS])
{
	uint64_t w[IBC_IB_MAX_RAILS];
	int on[IBC_IB_MAX_RAILS];
	uint64_t wsum = 0;
	size_t off;
	int equal = mbps == NULL;
	int non;
	int n;
	int k;

	len[0] = nbytes;
	rail[0] = 0;
	if (min == 0)
		min = 1;
	if (nrails < 2 || nbytes / 2 < min || nbytes <= lim)
		return 1;
	if (nrails > IBC_IB_MAX_RAILS)
		nrails = IBC_IB_MAX_RAILS;
	for (k = 0; k < nrails && !equal; k++)
		equal = mbps[k] == 0;
	for (k = 0; k < nrails; k++) {
		w[k] = equal ? 1 : (mbps[k] < IB_STRIPE_RATE_MAX ? mbps[k] : IB_STRIPE_RATE_MAX);
		on[k] = 1;
		wsum += w[k];
	}
	non = nrails;
	while (non > 1) {
		int slow = -1;
		int short_share = 0;

		for (k = 0; k < nrails; k++) {
			if (!on[k])
				continue;
			if (stripe_share(nbytes, w[k], wsum) < min)
				short_share = 1;
			if (k > 0 && (slow < 0 || w[k] <= w[slow]))
				slow = k;
		}
		if (!short_share)
			break;
		on[slow] = 0;
		wsum -= w[slow];
		non--;
	}
	if (non == 1)
		return 1;
	/* page-rounded shares in rail order; the last rail on takes the rest */
	n = 0;
	off = 0;
	for (k = 0; k < nrails && off < nbytes; k++) {
		size_t part;

		if (!on[k])
			continue;
		if (--non == 0) {
			part = nbytes - off;
		} else {
			part = stripe_share(nbytes, w[k], wsum);
			part = (part + 4095) & ~(size_t)4095;
			part = part < nbytes - off ? part : nbytes - off;
		}
		len[n] = part;
		rail[n] = k;
		n++;
		off += part;
	}
	return n;
}

static const char *link_layer_str(int ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_ETHERNET: return "Ethernet (RoCE)";
	case IBV_LINK_LAYER_INFINIBAND:
	case IBV_LINK_LAYER_UNSPECIFIED: return "InfiniBand";
	default: return "unknown";
	}
}

static void print_port(FILE *out, struct ibv_context *vctx, const char *name, int p,
		       const struct ibc_ib_hca_spec *spec)
{
	struct ibv_port_attr pa;
	struct ibc_ib_gid_entry *tbl;
	int ngid;
	int i;

	if (ibv_query_port(vctx, (uint8_t)p, &pa)) {
		fprintf(out, "  port %d: ibv_query_port failed: %s\n", p, strerror(errno));
		return;
	}
	fprintf(out, "  port %d: state %s (phys %s)  link layer %s  mtu %s active / %s max  lid %u",
		p, port_state_str(pa.state),
		pa.phys_state == 5 ? "LINK_UP" : pa.phys_state == 3 ? "DISABLED" :
		pa.phys_state == 2 ? "POLLING" : "other",
		link_layer_str(pa.link_layer), ibc_ib_mtu_str(pa.active_mtu),
		ibc_ib_mtu_str(pa.max_mtu), pa.lid);
	if (port_speed_mbps(&pa))
		fprintf(out, "  speed %d Mbit/s", port_speed_mbps(&pa));
	fprintf(out, "%s\n", ibc_ib_hca_match(spec, name, p) ? "" : "  [excluded by IBC_IB_HCA]");
	tbl = ibc_calloc(IBC_IB_GID_TBL_MAX, sizeof(*tbl), "gid table");
	if (!tbl)
		return;
	ngid = ibc_ib_port_gids(vctx, p, tbl, IBC_IB_GID_TBL_MAX);
	if (ngid < 0)
		fprintf(out, "    gid table: cannot be read\n");
	else if (ngid == 0)
		fprintf(out, "    gid table: empty\n");
	for (i = 0; i < ngid; i++) {
		char gs[64];
		int cls = ibc_ib_gid_classify(tbl[i].gid, tbl[i].type);

		ibc_ib_gid_str(tbl[i].gid, gs, sizeof(gs));
		fprintf(out, "    gid %-3d %-40s %-8s %s\n", tbl[i].index, gs,
			ibc_ib_gid_type_name(tbl[i].type),
			cls >= 0 ? ibc_ib_gid_class_name(cls) : "");
	}
	ibc_free(tbl);
}

/**
 * ibc_ib_print_devices() - Print every verbs device with its ports (state,
 * link layer, MTU, LID, speed) and GID tables (address and type), marking
 * what IBC_IB_HCA excludes. Used by `ibc_info --devices`.
 * @out: [in] stream to print to.
 * Blocking: opens each device briefly. Threading: safe.
 */
void ibc_ib_print_devices(FILE *out)
{
	struct ibc_ib_hca_spec spec;
	struct ibv_device **list;
	int ndev = 0;
	int d;

	if (ibc_ib_hca_parse(ibc_param_ib_hca(), &spec) != IBC_OK)
		memset(&spec, 0, sizeof(spec));
	list = ibv_get_device_list(&ndev);
	if (!list) {
		fprintf(out, "# verbs devices: none (ibv_get_device_list: %s)\n", strerror(errno));
		return;
	}
	fprintf(out, "# verbs devices: %d%s%s\n", ndev, *ibc_param_ib_hca() ? ", IBC_IB_HCA=" : "",
		ibc_param_ib_hca());
	for (d = 0; d < ndev; d++) {
		const char *name = ibv_get_device_name(list[d]);
		struct ibv_context *vctx = ibv_open_device(list[d]);
		struct ibv_device_attr da;
		uint64_t guid = be64toh(ibv_get_device_guid(list[d]));
		int p;

		fprintf(out, "%s  node guid %04x:%04x:%04x:%04x", name, (unsigned)(guid >> 48) & 0xffff,
			(unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
			(unsigned)guid & 0xffff);
		if (!vctx || ibv_query_device(vctx, &da)) {
			fprintf(out, "  (cannot be opened: %s)\n", strerror(errno));
			if (vctx)
				ibv_close_device(vctx);
			continue;
		}
		fprintf(out, "  fw %s  ports %d  max qp %d  max cqe %d  max mr %s\n",
			*da.fw_ver ? da.fw_ver : "-", da.phys_port_cnt, da.max_qp, da.max_cqe,
			da.max_mr_size >= (1ull << 40) ? ">= 1 TiB" : "limited");
		for (p = 1; p <= da.phys_port_cnt; p++)
			print_port(out, vctx, name, p, &spec);
		ibv_close_device(vctx);
	}
	ibv_free_device_list(list);
}
