/* SPDX-License-Identifier: MIT */
/*
 * ib_gid.c - RoCE GID selection as pure functions over a GID table, so that
 * it is unit-tested on synthetic tables (tests/ib/test_ib_gid.c). Each port
 * advertises its best GID of every class (RoCE v2 IPv4-mapped, global
 * IPv6, link-local, then the same for RoCE v1); both ends of a connection
 * pick the first class in that order that both have, so they always agree
 * on an address family that can reach the other side. Example (the test
 * VM): rxe0 has link-local and IPv4-mapped GIDs, rxe1 only link-local: a
 * connection between them uses link-local on both ends with no override.
 * Relies on ib.h only.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>

#include "base/log.h"
#include "transport/ib/ib.h"

static const char *const gid_class_names[IBC_IB_GID_CLASS_COUNT] = {
	[IBC_IB_GID_V2_IPV4] = "RoCE v2 IPv4-mapped",
	[IBC_IB_GID_V2_GLOBAL] = "RoCE v2 global IPv6",
	[IBC_IB_GID_V2_LINKLOCAL] = "RoCE v2 link-local",
	[IBC_IB_GID_V1_IPV4] = "RoCE v1 IPv4-mapped",
	[IBC_IB_GID_V1_GLOBAL] = "RoCE v1 global IPv6",
	[IBC_IB_GID_V1_LINKLOCAL] = "RoCE v1 link-local",
};

/* ibc_ib_gid_class_name() - "RoCE v2 link-local" etc.; "none" for -1 */
const char *ibc_ib_gid_class_name(int cls)
{
	return cls >= 0 && cls < IBC_IB_GID_CLASS_COUNT ? gid_class_names[cls] : "none";
}

/* ibc_ib_gid_type_name() - "IB", "RoCE v1", "RoCE v2" for an IBV_GID_TYPE_* */
const char *ibc_ib_gid_type_name(int type)
{
	switch (type) {
	case IBV_GID_TYPE_IB:      return "IB";
	case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
	case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
	default:                   return "?";
	}
}

/* ibc_ib_gid_str() - a GID as an IPv6 address ("fe80::1", "::ffff:192.0.2.1") */
void ibc_ib_gid_str(const uint8_t gid[16], char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, gid, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/**
 * ibc_ib_gid_classify() - Class of one GID table entry.
 * @gid:  [in] 16 bytes, network order.
 * @type: [in] IBV_GID_TYPE_ROCE_V1 or IBV_GID_TYPE_ROCE_V2 (IB GIDs have no
 *             class: InfiniBand uses LID routing).
 * Return: an enum ibc_ib_gid_class, or -1 for a zero GID, an IB GID or an
 *         unknown type.
 */
int ibc_ib_gid_classify(const uint8_t gid[16], int type)
{
	static const uint8_t zero[16];
	static const uint8_t v4pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	int base;

	if (type == IBV_GID_TYPE_ROCE_V2)
		base = IBC_IB_GID_V2_IPV4;
	else if (type == IBV_GID_TYPE_ROCE_V1)
		base = IBC_IB_GID_V1_IPV4;
	else
		return -1;
	if (!memcmp(gid, zero, 16))
		return -1;
	if (!memcmp(gid, v4pfx, 12))
		return base + 0;
	if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80)
		return base + 2;
	return base + 1;
}

/**
 * ibc_ib_gid_cands_build() - The GID a port offers for each class.
 * @tbl:            [in]  valid entries of the port's GID table.
 * @n:              [in]  number of entries.
 * @override_index: [in]  IBC_IB_GID_INDEX: >= 0 offers only that entry;
 *                        -1 offers the lowest index of every class.
 * @cands_p:        [out] the candidates, written only on success.
 *
 * Return: IBC_OK (possibly with no candidate at all: an IB port or a RoCE
 *         port without addresses); IBC_ERR_INVALID_ARG when the override
 *         names no entry or an entry without a RoCE class (logged).
 */
ibc_status_t ibc_ib_gid_cands_build(const struct ibc_ib_gid_entry *tbl, int n, int override_index,
				    struct ibc_ib_gid_cands *cands_p)
{
	struct ibc_ib_gid_cands c;
	int i;

	for (i = 0; i < IBC_IB_GID_CLASS_COUNT; i++)
		c.index[i] = -1;
	memset(c.gid, 0, sizeof(c.gid));
	for (i = 0; i < n; i++) {
		int cls = ibc_ib_gid_classify(tbl[i].gid, tbl[i].type);

		if (override_index >= 0) {
			if (tbl[i].index != override_index)
				continue;
			if (cls < 0) {
				IBC_LOG_WARN(IB, "IBC_IB_GID_INDEX=%d names a %s GID that RoCE cannot use",
					     override_index, ibc_ib_gid_type_name(tbl[i].type));
				return IBC_ERR_INVALID_ARG;
			}
			c.index[cls] = tbl[i].index;
			memcpy(c.gid[cls], tbl[i].gid, 16);
			*cands_p = c;
			return IBC_OK;
		}
		if (cls < 0 || (c.index[cls] >= 0 && c.index[cls] < tbl[i].index))
			continue;
		c.index[cls] = tbl[i].index;
		memcpy(c.gid[cls], tbl[i].gid, 16);
	}
	if (override_index >= 0) {
		IBC_LOG_WARN(IB, "IBC_IB_GID_INDEX=%d: the port has no valid GID at that index (%d valid entries)",
			     override_index, n);
		return IBC_ERR_INVALID_ARG;
	}
	*cands_p = c;
	return IBC_OK;
}

static int best_class(const struct ibc_ib_gid_cands *c)
{
	int i;

	for (i = 0; i < IBC_IB_GID_CLASS_COUNT; i++)
		if (c->index[i] >= 0)
			return i;
	return -1;
}

/**
 * ibc_ib_gid_agree() - Choose the GID class of one connection.
 * @local:        [in]  this end's candidates.
 * @remote:       [in]  the peer's candidates (from its connection info).
 * @local_cls_p:  [out] class whose GID this end uses as source GID.
 * @remote_cls_p: [out] class of the peer's GID to use as destination.
 * @why:          [out] one line saying why (for the INFO log).
 * @why_len:      [in]  size of @why.
 *
 * Symmetric: both ends compute the same class, the first in preference
 * order (RoCE v2 IPv4-mapped, v2 global IPv6, v2 link-local, then v1) that
 * both have. Without a common class, each end's best is returned (the
 * connection may then not work: the caller warns).
 * Return: 0 when a common class was found, -1 otherwise (the classes are
 *         then each end's best, or -1 when an end has no candidate).
 */
int ibc_ib_gid_agree(const struct ibc_ib_gid_cands *local, const struct ibc_ib_gid_cands *remote,
		     int *local_cls_p, int *remote_cls_p, char *why, size_t why_len)
{
	size_t o = 0;
	int cls;

	why[0] = '\0';
	for (cls = 0; cls < IBC_IB_GID_CLASS_COUNT; cls++) {
		int l = local->index[cls] >= 0;
		int r = remote->index[cls] >= 0;

		if (l && r) {
			o += (size_t)snprintf(why + o, why_len > o ? why_len - o : 0,
					      "%s%s: the first kind both ends have", o ? "; " : "",
					      ibc_ib_gid_class_name(cls));
			*local_cls_p = cls;
			*remote_cls_p = cls;
			return 0;
		}
		if (l != r && o < why_len)
			o += (size_t)snprintf(why + o, why_len - o, "%s%s has no %s", o ? "; " : "",
					      l ? "the peer" : "this port",
					      ibc_ib_gid_class_name(cls));
	}
	*local_cls_p = best_class(local);
	*remote_cls_p = best_class(remote);
	snprintf(why, why_len, "no GID kind in common (here best %s, peer best %s)",
		 ibc_ib_gid_class_name(*local_cls_p), ibc_ib_gid_class_name(*remote_cls_p));
	return -1;
}
