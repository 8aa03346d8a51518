/* SPDX-License-Identifier: MIT */
/*
 * test_ib_hca.c - IBC_IB_HCA parsing and matching (NCCL_IB_HCA syntax:
 * prefixes, ":port", "^" to exclude, "=" for exact names) and the
 * round-robin port choice of local ranks, and the ports of a rank's rails
 * (IBC_IB_RAILS, explicit and auto from GPU-NIC classes). Pure: no device needed.
 */
#include "config.h"

#include <stdlib.h>

#include "tap.h"
#include "topo/topo.h"
#include "transport/ib/ib.h"

static void check_parse_errors(void)
{
	struct ibc_ib_hca_spec s;
	char big[200];
	char many[400];
	int i;
	int o = 0;

	tap_is_int(ibc_ib_hca_parse("mlx5_0:", &s), IBC_ERR_INVALID_ARG, "empty port is an error");
	tap_is_int(ibc_ib_hca_parse("mlx5_0:x", &s), IBC_ERR_INVALID_ARG, "non-numeric port");
	tap_is_int(ibc_ib_hca_parse("mlx5_0:0", &s), IBC_ERR_INVALID_ARG, "port 0 is invalid");
	tap_is_int(ibc_ib_hca_parse(":1", &s), IBC_ERR_INVALID_ARG, "port without a name");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tap_is_int(ibc_ib_hca_parse(big, &s), IBC_ERR_INVALID_ARG, "name longer than 63 bytes");
	for (i = 0; i < IBC_IB_HCA_MAX + 1; i++)
		o += snprintf(many + o, sizeof(many) - (size_t)o, "%sd%d", i ? "," : "", i);
	tap_is_int(ibc_ib_hca_parse(many, &s), IBC_ERR_INVALID_ARG, "33 entries is one too many");
}

/* rails_is(): ibc_ib_rails_pick() gives exactly the port indexes @want_idx (@n of them) */
static void rails_is(int nports, int pick, int want, const int *dist, int n, const int *want_idx,
		     const char *what)
{
	int idx[IBC_IB_MAX_RAILS] = { -1, -1, -1, -1 };
	int got = ibc_ib_rails_pick(nports, pick, want, dist, idx);
	int ok = got == n;
	int k;

	for (k = 0; ok && k < n; k++)
		ok = idx[k] == want_idx[k];
	tap_ok(ok, "%s (got %d rails: %d %d %d %d)", what, got, idx[0], idx[1], idx[2], idx[3]);
}

/* the rails of a rank (IBC_IB_RAILS, ib_device.c) */
static void check_rails(void)
{
	/* PIX PIX SYS PXB PIX PIX PIX: PCI classes of 7 ports from the rank's GPU */
	static const int d[] = { IBC_TOPO_PIX, IBC_TOPO_PIX, IBC_TOPO_SYS, IBC_TOPO_PXB,
				 IBC_TOPO_PIX, IBC_TOPO_PIX, IBC_TOPO_PIX };
	static const int phb[] = { IBC_TOPO_PHB, IBC_TOPO_PHB, IBC_TOPO_PHB };

	rails_is(2, 1, 1, NULL, 1, (const int[]){ 1 }, "IBC_IB_RAILS=1: the rank's own port");
	rails_is(2, 1, 2, NULL, 2, (const int[]){ 0, 1 },
		 "IBC_IB_RAILS=2 with 2 ports: both in listed order, whatever the pick");
	rails_is(2, 0, 4, NULL, 2, (const int[]){ 0, 1 }, "IBC_IB_RAILS=4 with 2 ports: 2 rails");
	rails_is(5, 3, 2, NULL, 2, (const int[]){ 3, 4 }, "IBC_IB_RAILS=2 of 5 ports: from the pick on");
	rails_is(5, 4, 3, NULL, 3, (const int[]){ 4, 0, 1 }, "IBC_IB_RAILS=3 of 5 ports: wraps round-robin");
	rails_is(7, 6, 9, NULL, 4, (const int[]){ 6, 0, 1, 2 }, "IBC_IB_RAILS above 4 is capped at 4, from the pick on");
	rails_is(3, 2, 0, NULL, 1, (const int[]){ 2 }, "auto without a GPU: one rail, the pick");
	rails_is(7, 1, 0, d, 4, (const int[]){ 1, 0, 4, 5 },
		 "auto: the pick, then the ports as near (PIX) in listed order, at most 4");
	rails_is(7, 3, 0, d, 1, (const int[]){ 3 }, "auto: the only PXB port alone");
	rails_is(7, 2, 0, d, 1, (const int[]){ 2 }, "auto: a pick across sockets (SYS) stays alone");
	rails_is(3, 0, 0, phb, 1, (const int[]){ 0 },
		 "auto: ports behind the host bridge (PHB, also the flat topology's answer) are not added");
	rails_is(0, 0, 2, NULL, 1, (const int[]){ 0 }, "no ports: one rail at index 0 (callers check first)");
}

int main(void)
{
	struct ibc_ib_hca_spec s;
	struct ibc_ib_port_desc ports[3];

	setenv("IBC_DEBUG", "NONE", 1);

	tap_is_int(ibc_ib_hca_parse("", &s), IBC_OK, "empty string parses");
	tap_is_int(s.n, 0, "empty: no entries");
	tap_ok(ibc_ib_hca_match(&s, "mlx5_0", 1) && ibc_ib_hca_match(&s, "rxe1", 2),
	       "empty selects every port");
	tap_is_int(ibc_ib_hca_parse(NULL, &s), IBC_OK, "NULL parses as empty");

	tap_is_int(ibc_ib_hca_parse("mlx5_0:1,mlx5_1", &s), IBC_OK, "mlx5_0:1,mlx5_1 parses");
	tap_is_int(s.n, 2, "two entries");
	tap_is_str(s.e[0].name, "mlx5_0", "first name");
	tap_is_int(s.e[0].port, 1, "first port 1");
	tap_is_str(s.e[1].name, "mlx5_1", "second name");
	tap_is_int(s.e[1].port, 0, "second: any port");
	tap_is_int(s.exclude, 0, "not excluding");
	tap_is_int(s.exact, 0, "prefix matching");
	tap_ok(ibc_ib_hca_match(&s, "mlx5_0", 1), "mlx5_0 port 1 selected");
	tap_ok(!ibc_ib_hca_match(&s, "mlx5_0", 2), "mlx5_0 port 2 not selected");
	tap_ok(ibc_ib_hca_match(&s, "mlx5_1", 2), "mlx5_1 any port selected");
	tap_ok(ibc_ib_hca_match(&s, "mlx5_10", 1), "prefix: mlx5_1 also matches mlx5_10 (NCCL)");
	tap_ok(!ibc_ib_hca_match(&s, "mlx5_2", 1), "mlx5_2 not selected");

	tap_is_int(ibc_ib_hca_parse("=mlx5_1", &s), IBC_OK, "=mlx5_1 parses");
	tap_is_int(s.exact, 1, "exact flag");
	tap_ok(ibc_ib_hca_match(&s, "mlx5_1", 1), "exact name matches");
	tap_ok(!ibc_ib_hca_match(&s, "mlx5_10", 1), "exact: mlx5_10 does not match mlx5_1");

	tap_is_int(ibc_ib_hca_parse("^rxe1", &s), IBC_OK, "^rxe1 parses");
	tap_is_int(s.exclude, 1, "exclude flag");
	tap_ok(ibc_ib_hca_match(&s, "rxe0", 1), "exclude: rxe0 kept");
	tap_ok(!ibc_ib_hca_match(&s, "rxe1", 1), "exclude: rxe1 dropped");
	tap_ok(!ibc_ib_hca_match(&s, "rxe10", 1), "exclude by prefix drops rxe10 too");

	tap_is_int(ibc_ib_hca_parse("^=rxe1:1", &s), IBC_OK, "^=rxe1:1 parses");
	tap_ok(s.exclude && s.exact, "both flags");
	tap_ok(!ibc_ib_hca_match(&s, "rxe1", 1), "rxe1 port 1 excluded");
	tap_ok(ibc_ib_hca_match(&s, "rxe1", 2), "rxe1 port 2 kept");
	tap_ok(ibc_ib_hca_match(&s, "rxe10", 1), "exact exclude keeps rxe10");

	tap_is_int(ibc_ib_hca_parse(" rxe0 , ,rxe_eth:1 ", &s), IBC_OK, "spaces and empty entries");
	tap_is_int(s.n, 2, "two entries after trimming");
	tap_is_str(s.e[1].name, "rxe_eth", "trimmed name");
	tap_is_int(s.e[1].port, 1, "trimmed port");

	tap_is_int(ibc_ib_hca_parse("rxe", &s), IBC_OK, "rxe parses");
	tap_ok(ibc_ib_hca_match(&s, "rxe0", 1) && ibc_ib_hca_match(&s, "rxe_eth", 1) &&
	       !ibc_ib_hca_match(&s, "mlx5_0", 1), "prefix rxe selects every rxe device only");

	check_parse_errors();

	memset(ports, 0, sizeof(ports));
	strcpy(ports[0].dev_name, "rxe0");
	strcpy(ports[1].dev_name, "rxe1");
	strcpy(ports[2].dev_name, "rxe2");
	tap_is_int(ibc_ib_port_pick(ports, 2, 0, 2), 0, "local rank 0 of 2 -> first port");
	tap_is_int(ibc_ib_port_pick(ports, 2, 1, 2), 1, "local rank 1 of 2 -> second port");
	tap_is_int(ibc_ib_port_pick(ports, 2, 2, 4), 0, "local rank 2 wraps to the first port");
	tap_is_int(ibc_ib_port_pick(ports, 3, 4, 5), 1, "local rank 4 of 3 ports -> port index 1");
	tap_is_int(ibc_ib_port_pick(ports, 1, 3, 4), 0, "one port: everyone uses it");
	check_rails();
	return tap_done();
}
