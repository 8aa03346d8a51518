/* SPDX-License-Identifier: MIT */
/*
 * test_ib_hca.c - IBC_IB_HCA parsing and matching (NCCL_IB_HCA syntax:
 * prefixes, ":port", "^" to exclude, "=" for exact names) and the
 * round-robin port choice of local ranks, and the ports of a rank's rails
 * (IBC_IB_RAILS, explicit and auto from GPU-NIC classes), and how a message
 * is cut over the rails by their rates. Pure: no device needed.
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

/*
 * plan_is(): ibc_ib_stripe_plan() cuts @nbytes into exactly @n parts of
 * lengths @want_len on rails @want_rail
 */
static void plan_is(size_t nbytes, size_t min, size_t lim, int nrails, const uint32_t *mbps, int n,
		    const size_t *want_len, const int *want_rail, const char *what)
{
	size_t len[IBC_IB_MAX_RAILS] = { 0 };
	int rail[IBC_IB_MAX_RAILS] = { -1, -1, -1, -1 };
	int got = ibc_ib_stripe_plan(nbytes, min, lim, nrails, mbps, len, rail);
	int ok = got == n;
	int k;

	for (k = 0; ok && k < n; k++)
		ok = len[k] == want_len[k] && rail[k] == want_rail[k];
	tap_ok(ok, "%s (got %d parts: %zu@%d %zu@%d %zu@%d %zu@%d)", what, got, len[0], rail[0], len[1],
	       rail[1], len[2], rail[2], len[3], rail[3]);
}

/* the invariants of any plan: whole, contiguous, page multiples but the last, each part >= min
 * but the last, the first on rail 0, rails ascending, at most nbytes / min parts */
static int plan_sane(size_t nbytes, size_t min, size_t lim, int nrails, const uint32_t *mbps)
{
	size_t len[IBC_IB_MAX_RAILS];
	int rail[IBC_IB_MAX_RAILS];
	int n = ibc_ib_stripe_plan(nbytes, min, lim, nrails, mbps, len, rail);
	size_t sum = 0;
	int k;

	if (n < 1 || n > nrails || rail[0] != 0 || (n > 1 && (size_t)n > nbytes / min))
		return 0;
	for (k = 0; k < n; k++) {
		if (len[k] == 0 || rail[k] < 0 || rail[k] >= nrails || (k > 0 && rail[k] <= rail[k - 1]))
			return 0;
		if (k < n - 1 && (len[k] % 4096 != 0 || len[k] < min))
			return 0;
		sum += len[k];
	}
	if (n > 1 && (nbytes <= lim || nbytes < 2 * min))
		return 0;
	return sum == nbytes;
}

/* how a message is cut over the rails (ib_device.c) */
static void check_stripe_plan(void)
{
	static const uint32_t eq[] = { 100000, 100000, 100000, 100000 };
	static const uint32_t two_one[] = { 200000, 100000 };
	static const uint32_t one_two[] = { 100000, 200000 };
	static const uint32_t unknown[] = { 200000, 0 };
	static const uint32_t slow_last[] = { 100000, 100000, 100000, 25000 };
	static const uint32_t slow_first[] = { 25000, 100000 };
	static const uint32_t slow_0_fast[] = { 20000, 15000, 100000 };
	static const uint32_t big[] = { 1200000, 600000, 300000, 300000 };
	static const uint32_t huge[] = { 0xffffffffu, 25000, 0x80000000u };
	const size_t M = 1 << 20;
	const size_t K = 1 << 10;
	uint64_t x = 88172645463325252ull;
	int bad = 0;
	int i;

	plan_is(8 * M, 256 * K, 64 * K, 1, NULL, 1, (const size_t[]){ 8 * M }, (const int[]){ 0 },
		"one rail: the message whole");
	plan_is(511 * K, 256 * K, 64 * K, 2, eq, 1, (const size_t[]){ 511 * K }, (const int[]){ 0 },
		"below twice the minimum: whole on rail 0");
	plan_is(1 * M, 256 * K, 1 * M, 2, eq, 1, (const size_t[]){ 1 * M }, (const int[]){ 0 },
		"within rail 0's eager/LL limit: whole");
	plan_is(8 * M, 256 * K, 64 * K, 2, eq, 2, (const size_t[]){ 4 * M, 4 * M }, (const int[]){ 0, 1 },
		"equal rates: halves");
	plan_is(8 * M, 256 * K, 64 * K, 2, NULL, 2, (const size_t[]){ 4 * M, 4 * M },
		(const int[]){ 0, 1 }, "rates not given: halves");
	plan_is(12 * M, 256 * K, 64 * K, 2, two_one, 2, (const size_t[]){ 8 * M, 4 * M },
		(const int[]){ 0, 1 }, "200 and 100 Gbit/s: two thirds and one third");
	plan_is(12 * M, 256 * K, 64 * K, 2, one_two, 2, (const size_t[]){ 4 * M, 8 * M },
		(const int[]){ 0, 1 }, "100 and 200 Gbit/s: one third and two thirds");
	plan_is(12 * M, 256 * K, 64 * K, 2, unknown, 2, (const size_t[]){ 6 * M, 6 * M },
		(const int[]){ 0, 1 }, "a rate unknown: the rails count as equal");
	plan_is(3 * M, 1 * M, 64 * K, 4, eq, 3, (const size_t[]){ 1 * M, 1 * M, 1 * M },
		(const int[]){ 0, 1, 2 }, "3 x the minimum over 4 equal rails: 3 parts, the last rail left out");
	plan_is(4 * M, 1 * M, 64 * K, 4, slow_last, 3, (const size_t[]){ 1368 * K, 1368 * K, 1360 * K },
		(const int[]){ 0, 1, 2 }, "a 25 Gbit/s rail's share below the minimum: it leaves, the rest by rate");
	plan_is(4 * M, 1 * M, 64 * K, 2, slow_first, 1, (const size_t[]){ 4 * M }, (const int[]){ 0 },
		"rail 0's share below the minimum: rail 0 stays, the others leave, the message whole on it");
	plan_is(8 * M, 1 * M, 64 * K, 2, slow_first, 2, (const size_t[]){ 1640 * K, 8 * M - 1640 * K },
		(const int[]){ 0, 1 }, "25 and 100 Gbit/s with room for both: one fifth on rail 0");
	plan_is(12 * M, 2 * M, 64 * K, 3, slow_0_fast, 2, (const size_t[]){ 2 * M, 10 * M },
		(const int[]){ 0, 2 }, "a slow rail 1 leaves before a slower rail 0, which always carries a part");
	plan_is(8 * M + 1, 256 * K, 64 * K, 2, eq, 2, (const size_t[]){ 4 * M, 4 * M + 1 },
		(const int[]){ 0, 1 }, "an odd size: the last part takes the odd byte");
	plan_is(10 * M + 3, 256 * K, 64 * K, 3, eq, 3, (const size_t[]){ 3497984, 3497984, 3489795 },
		(const int[]){ 0, 1, 2 }, "thirds rounded up to 4 KiB, the last the rest");
	/* 16 TiB x 1.2e6 exceeds 2^64: a plain nbytes * rate / sum would be wrong here */
	plan_is((size_t)1 << 44, 256 * K, 64 * K, 4, big, 4,
		(const size_t[]){ (size_t)1 << 43, (size_t)1 << 42, (size_t)1 << 41, (size_t)1 << 41 },
		(const int[]){ 0, 1, 2, 3 }, "16 TiB over rates up to 1.2 Tbit/s: no overflow, exact shares");
	/* rates beyond any port (2^32 - 1 and 2^31 Mbit/s) count as 2^24 each: 3 TiB in shares of
	 * 2^24 : 25000 : 2^24, no overflow */
	plan_is((size_t)3 << 40, 1 * M, 64 * K, 3, huge, 3,
		(const size_t[]){ 1648039559168, 2455773184, 1648039550976 }, (const int[]){ 0, 1, 2 },
		"absurd rates are capped: exact shares, no overflow");
	plan_is(8 * M, 0, 64 * K, 2, eq, 2, (const size_t[]){ 4 * M, 4 * M }, (const int[]){ 0, 1 },
		"a zero minimum counts as 1 byte");
	plan_is(1, 0, 0, 2, eq, 1, (const size_t[]){ 1 }, (const int[]){ 0 },
		"a zero minimum: 1 byte is not cut (no empty part)");
	/* random sizes, minimums and rates: every plan whole and well formed */
	for (i = 0; i < 20000; i++) {
		uint32_t r[IBC_IB_MAX_RAILS];
		size_t nbytes;
		size_t min;
		int nrails;
		int k;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		nbytes = (size_t)(x % (64 * M)) + (i % 7);
		min = (size_t)1 << (12 + (x >> 40) % 10);
		nrails = 1 + (int)((x >> 50) % IBC_IB_MAX_RAILS);
		for (k = 0; k < IBC_IB_MAX_RAILS; k++)
			r[k] = (uint32_t)((x >> (8 * k)) % 5) * 50000;
		if (!plan_sane(nbytes, min, 8 * K * (i % 3), nrails, i % 5 ? r : NULL)) {
			if (bad++ < 3)
				tap_diag("bad plan: %zu bytes, min %zu, %d rails, rates %u %u %u %u", nbytes, min,
					 nrails, r[0], r[1], r[2], r[3]);
		}
	}
	tap_is_int(bad, 0, "20000 random plans: whole, contiguous, page-aligned, above the minimum, rail 0 first");
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
	check_stripe_plan();
	return tap_done();
}
