/* SPDX-License-Identifier: MIT */
/*
 * test_ib_gid.c - RoCE GID selection on synthetic GID tables: link-local
 * only, RoCE v1 + v2 entries, IPv4-mapped present, the two devices of the
 * test VM (rxe0: link-local + IPv4-mapped, rxe1: link-local only, which
 * must agree on link-local with no override), IBC_IB_GID_INDEX overrides
 * and MTU negotiation. Pure: no device needed.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdlib.h>

#include "tap.h"
#include "transport/ib/ib.h"

static struct ibc_ib_gid_entry mk(int index, int type, const char *addr)
{
	struct ibc_ib_gid_entry e;

	memset(&e, 0, sizeof(e));
	e.index = index;
	e.type = type;
	if (inet_pton(AF_INET6, addr, e.gid) != 1)
		tap_bail_out("bad test address %s", addr);
	return e;
}

#define V1 IBV_GID_TYPE_ROCE_V1
#define V2 IBV_GID_TYPE_ROCE_V2

static int agree(const struct ibc_ib_gid_entry *a, int na, const struct ibc_ib_gid_entry *b, int nb,
		 int *ia, int *ib, char *why, size_t len)
{
	struct ibc_ib_gid_cands ca;
	struct ibc_ib_gid_cands cb;
	int la;
	int ra;
	int lb;
	int rb;
	int r1;
	int r2;
	char why2[256];

	if (ibc_ib_gid_cands_build(a, na, -1, &ca) || ibc_ib_gid_cands_build(b, nb, -1, &cb))
		return -99;
	r1 = ibc_ib_gid_agree(&ca, &cb, &la, &ra, why, len);
	r2 = ibc_ib_gid_agree(&cb, &ca, &lb, &rb, why2, sizeof(why2));
	if (r1 != r2 || la != rb || ra != lb)
		return -98; /* not symmetric */
	*ia = la >= 0 ? ca.index[la] : -1;
	*ib = lb >= 0 ? cb.index[lb] : -1;
	return r1 == 0 ? la : -1;
}

int main(void)
{
	/* the test VM: rxe0 on veth0 (192.0.2.1), rxe1 on veth1 (no IPv4) */
	struct ibc_ib_gid_entry rxe0[] = { mk(0, V2, "fe80::4cce:b6ff:fe01:c935"),
					    mk(1, V2, "::ffff:192.0.2.1") };
	struct ibc_ib_gid_entry rxe1[] = { mk(0, V2, "fe80::fc70:caff:fec2:bfd3") };
	/* a ConnectX port: v1 and v2 entries for link-local, IPv4 and global IPv6 */
	struct ibc_ib_gid_entry cx[] = { mk(0, V1, "fe80::1"), mk(1, V2, "fe80::1"),
					  mk(2, V1, "::ffff:10.0.0.5"), mk(3, V2, "::ffff:10.0.0.5"),
					  mk(4, V1, "2001:db8::5"), mk(5, V2, "2001:db8::5") };
	struct ibc_ib_gid_entry cx2[] = { mk(0, V1, "fe80::2"), mk(1, V2, "fe80::2"),
					   mk(2, V1, "2001:db8::6"), mk(3, V2, "2001:db8::6") };
	struct ibc_ib_gid_entry v1only[] = { mk(0, V1, "fe80::3"), mk(1, V1, "::ffff:10.0.0.7") };
	struct ibc_ib_gid_entry dup4[] = { mk(7, V2, "::ffff:10.0.0.9"), mk(3, V2, "::ffff:10.0.1.9"),
					    mk(0, V2, "fe80::9") };
	struct ibc_ib_gid_entry ibgid[] = { mk(0, IBV_GID_TYPE_IB, "fe80::2:c903:a:bcde") };
	struct ibc_ib_gid_entry zero[] = { mk(0, V2, "::"), mk(1, V2, "fe80::a") };
	struct ibc_ib_gid_cands c;
	char why[256];
	int ia;
	int ib;
	int cls;

	setenv("IBC_DEBUG", "NONE", 1);

	tap_is_int(ibc_ib_gid_classify(rxe0[0].gid, V2), IBC_IB_GID_V2_LINKLOCAL, "fe80:: v2 is link-local");
	tap_is_int(ibc_ib_gid_classify(rxe0[1].gid, V2), IBC_IB_GID_V2_IPV4, "::ffff:a.b.c.d v2 is IPv4-mapped");
	tap_is_int(ibc_ib_gid_classify(cx[4].gid, V1), IBC_IB_GID_V1_GLOBAL, "2001:db8:: v1 is global");
	tap_is_int(ibc_ib_gid_classify(zero[0].gid, V2), -1, "zero GID has no class");
	tap_is_int(ibc_ib_gid_classify(ibgid[0].gid, IBV_GID_TYPE_IB), -1, "IB GID has no RoCE class");

	/* link-local only on both ends */
	cls = agree(rxe1, 1, rxe1, 1, &ia, &ib, why, sizeof(why));
	tap_is_int(cls, IBC_IB_GID_V2_LINKLOCAL, "link-local only: agree on v2 link-local");
	tap_ok(ia == 0 && ib == 0, "link-local only: both use index 0");

	/* the VM pair: rxe0 prefers IPv4 but rxe1 has none -> link-local, no override */
	cls = agree(rxe0, 2, rxe1, 1, &ia, &ib, why, sizeof(why));
	tap_is_int(cls, IBC_IB_GID_V2_LINKLOCAL, "rxe0 <-> rxe1: agree on link-local (%s)", why);
	tap_is_int(ia, 0, "rxe0 uses its link-local GID 0, not its IPv4 GID 1");
	tap_is_int(ib, 0, "rxe1 uses GID 0");
	tap_ok(strstr(why, "the peer has no RoCE v2 IPv4-mapped") != NULL,
	       "the reason names the missing IPv4 GID: '%s'", why);

	/* rxe0 with itself (two ranks on one device): IPv4-mapped */
	cls = agree(rxe0, 2, rxe0, 2, &ia, &ib, why, sizeof(why));
	tap_is_int(cls, IBC_IB_GID_V2_IPV4, "rxe0 <-> rxe0: IPv4-mapped preferred");
	tap_is_int(ia, 1, "rxe0 loopback uses GID 1");

	/* v1 + v2 table: v2 IPv4 wins over v1 IPv4 and over IPv6 */
	cls = agree(cx, 6, cx, 6, &ia, &ib, why, sizeof(why));
	tap_is_int(cls, IBC_IB_GID_V2_IPV4, "v1+v2 table: RoCE v2 IPv4-mapped");
	tap_is_int(ia, 3, "v1+v2 table: index 3 (v2), not 2 (v1)");
	/* no IPv4 on the peer: global IPv6 before link-local */
	cls = agree(cx, 6, cx2, 4, &ia, &ib, why, sizeof(why));
	tap_is_int(cls, IBC_IB_GID_V2_GLOBAL, "IPv4 on one end only: v2 global IPv6");
	tap_ok(ia == 5 && ib == 3, "global IPv6 indices 5 and 3");
	/* a v1-only peer: v1 IPv4 */
	cls = agree(cx, 6, v1only, 2, &ia, &ib, why, sizeof(why));
	tap_is_int(cls, IBC_IB_GID_V1_IPV4, "v1-only peer: RoCE v1 IPv4-mapped");
	tap_ok(ia == 2 && ib == 1, "v1 IPv4 indices 2 and 1");
	/* several GIDs of one class: the lowest index */
	tap_is_int(ibc_ib_gid_cands_build(dup4, 3, -1, &c), IBC_OK, "duplicate-class table builds");
	tap_is_int(c.index[IBC_IB_GID_V2_IPV4], 3, "lowest index of a class wins");
	/* zero entries are ignored */
	tap_is_int(ibc_ib_gid_cands_build(zero, 2, -1, &c), IBC_OK, "table with a zero GID builds");
	tap_is_int(c.index[IBC_IB_GID_V2_LINKLOCAL], 1, "zero GID skipped");
	/* no common class: each end's best, and -1 */
	{
		struct ibc_ib_gid_entry only4[] = { mk(1, V2, "::ffff:192.0.2.1") };
		struct ibc_ib_gid_cands ca;
		struct ibc_ib_gid_cands cb;
		int la;
		int ra;

		ibc_ib_gid_cands_build(only4, 1, -1, &ca);
		ibc_ib_gid_cands_build(rxe1, 1, -1, &cb);
		tap_is_int(ibc_ib_gid_agree(&ca, &cb, &la, &ra, why, sizeof(why)), -1,
			   "no common class reported");
		tap_ok(la == IBC_IB_GID_V2_IPV4 && ra == IBC_IB_GID_V2_LINKLOCAL,
		       "fallback to each end's best: '%s'", why);
		ibc_ib_gid_cands_build(ibgid, 1, -1, &cb);
		tap_is_int(ibc_ib_gid_agree(&ca, &cb, &la, &ra, why, sizeof(why)), -1,
			   "peer without RoCE GID");
		tap_is_int(ra, -1, "no remote class");
	}
	/* IBC_IB_GID_INDEX override */
	tap_is_int(ibc_ib_gid_cands_build(rxe0, 2, 0, &c), IBC_OK, "override 0 builds");
	tap_ok(c.index[IBC_IB_GID_V2_LINKLOCAL] == 0 && c.index[IBC_IB_GID_V2_IPV4] == -1,
	       "override offers only that GID");
	tap_is_int(ibc_ib_gid_cands_build(rxe0, 2, 1, &c), IBC_OK, "override 1 builds");
	tap_ok(c.index[IBC_IB_GID_V2_IPV4] == 1 && c.index[IBC_IB_GID_V2_LINKLOCAL] == -1,
	       "override 1 offers only the IPv4 GID");
	tap_is_int(ibc_ib_gid_cands_build(rxe0, 2, 5, &c), IBC_ERR_INVALID_ARG,
		   "override of a missing index is an error");
	tap_is_int(ibc_ib_gid_cands_build(ibgid, 1, 0, &c), IBC_ERR_INVALID_ARG,
		   "override naming an IB GID on RoCE is an error");

	/* MTU negotiation: the smaller active MTU */
	tap_is_int(ibc_ib_mtu_negotiate(IBV_MTU_4096, IBV_MTU_1024), IBV_MTU_1024, "4096 vs 1024 -> 1024");
	tap_is_int(ibc_ib_mtu_negotiate(IBV_MTU_1024, IBV_MTU_4096), IBV_MTU_1024, "1024 vs 4096 -> 1024");
	tap_is_int(ibc_ib_mtu_negotiate(IBV_MTU_2048, IBV_MTU_2048), IBV_MTU_2048, "equal MTUs kept");
	tap_is_int(ibc_ib_mtu_negotiate(IBV_MTU_256, IBV_MTU_4096), IBV_MTU_256, "256 vs 4096 -> 256");
	tap_is_int(ibc_ib_mtu_negotiate((enum ibv_mtu)9, IBV_MTU_4096), IBV_MTU_1024,
		   "garbage from a peer -> 1024");
	tap_is_str(ibc_ib_mtu_str(IBV_MTU_4096), "4096", "mtu string");
	return tap_done();
}
