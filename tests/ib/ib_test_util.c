/* SPDX-License-Identifier: MIT */
/* ib_test_util.c - see ib_test_util.h. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/check.h"
#include "base/util.h"
#include "ib_test_util.h"
#include "tap.h"

static int parse_dev(const char *s, char *dev, int *port)
{
	const char *colon = strchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);

	if (!n || n >= IBC_IB_NAME_LEN)
		return -1;
	memcpy(dev, s, n);
	dev[n] = '\0';
	*port = colon ? atoi(colon + 1) : 1;
	return 0;
}

int ibt_pick_ports(char *dev0, int *port0, char *dev1, int *port1)
{
	struct ibc_ib_port_desc ports[IBC_IB_MAX_PORTS];
	struct ibc_ib_hca_spec all;
	const char *e0 = getenv("RXE_DEV0");
	const char *e1 = getenv("RXE_DEV1");
	int n = 0;

	if (e0 && e1 && !parse_dev(e0, dev0, port0) && !parse_dev(e1, dev1, port1))
		return 0;
	memset(&all, 0, sizeof(all));
	if (ibc_ib_ports_list(&all, ports, IBC_IB_MAX_PORTS, &n) != IBC_OK || n == 0)
		return -1;
	strcpy(dev0, ports[0].dev_name);
	*port0 = ports[0].port;
	strcpy(dev1, ports[n > 1 ? 1 : 0].dev_name);
	*port1 = ports[n > 1 ? 1 : 0].port;
	return 0;
}

void ibt_default_params(struct ibc_ib_params *prm)
{
	ibc_ib_params_from_env(prm);
}

static void rec_fail(void *arg, ibc_status_t st, int peer, const char *why)
{
	struct ibt_rec *r = arg;

	if (!r->nfail)
		snprintf(r->first_why, sizeof(r->first_why), "%s", why);
	r->nfail++;
	r->last_st = st;
	r->last_peer = peer;
	snprintf(r->last_why, sizeof(r->last_why), "%s", why);
	tap_diag("%s: fail callback: peer %d: %s: %s", r->name, peer, ibc_status_str(st), why);
}

static ibc_status_t rec_desc_check(void *arg, int peer, const struct ibc_msg_desc *mine,
				   size_t my_nbytes, const struct ibc_msg_desc *theirs,
				   size_t their_nbytes)
{
	struct ibt_rec *r = arg;

	if (!memcmp(mine, theirs, sizeof(*mine)) && my_nbytes == their_nbytes)
		return IBC_OK;
	r->ndesc_mismatch++;
	snprintf(r->last_desc, sizeof(r->last_desc),
		 "peer %d: mine seq %u coll %u count %llu nbytes %zu, theirs seq %u coll %u count %llu nbytes %zu",
		 peer, mine->seq, mine->coll, (unsigned long long)mine->count, my_nbytes, theirs->seq,
		 theirs->coll, (unsigned long long)theirs->count, their_nbytes);
	return IBC_ERR_INVALID_USAGE;
}

ibc_status_t ibt_pair_open(struct ibt_pair *p, const char *dev0, int port0, const char *dev1,
			   int port1, const struct ibc_ib_params *prm)
{
	struct ibc_ib_ctx_cb cba = { &p->ra, rec_fail, rec_desc_check };
	struct ibc_ib_ctx_cb cbb = { &p->rb, rec_fail, rec_desc_check };
	uint8_t wa[IBC_IB_CONN_INFO_WIRE_BYTES];
	uint8_t wb[IBC_IB_CONN_INFO_WIRE_BYTES];
	struct ibc_ib_conn_info ia;
	struct ibc_ib_conn_info ib;
	ibc_status_t st;

	memset(p, 0, sizeof(*p));
	p->ra.name = "A";
	p->rb.name = "B";
	cba.arg = &p->ra;
	cbb.arg = &p->rb;
	IBC_CHECK(ibc_ib_ctx_create(dev0, port0, prm, &cba, &p->a));
	IBC_CHECK(ibc_ib_ctx_create(dev1, port1, prm, &cbb, &p->b));
	IBC_CHECK(ibc_ib_conn_create(p->a, 1, "hostB", &p->ca));
	IBC_CHECK(ibc_ib_conn_create(p->b, 0, "hostA", &p->cb));
	ibc_ib_conn_local_info(p->ca, &ia);
	ibc_ib_conn_local_info(p->cb, &ib);
	ibc_ib_conn_info_pack(&ia, wa);
	ibc_ib_conn_info_pack(&ib, wb);
	IBC_CHECK(ibc_ib_conn_info_unpack(wa, &ia));
	IBC_CHECK(ibc_ib_conn_info_unpack(wb, &ib));
	st = ibc_ib_conn_establish(p->ca, &ib);
	if (st == IBC_OK)
		st = ibc_ib_conn_establish(p->cb, &ia);
	return st;
}

void ibt_pair_close(struct ibt_pair *p)
{
	ibc_ib_ctx_destroy(p->a);
	ibc_ib_ctx_destroy(p->b);
	p->a = p->b = NULL;
}

static int all_done(struct ibc_treq *const *reqs, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!ibc_treq_is_done(reqs[i]))
			return 0;
	return 1;
}

int ibt_wait(struct ibt_pair *p, struct ibc_treq *const *reqs, int n, int timeout_ms)
{
	uint64_t deadline = ibc_time_ms() + (uint64_t)timeout_ms;

	while (!all_done(reqs, n)) {
		if (ibc_time_ms() > deadline)
			return -1;
		if (p->a)
			ibc_ib_ctx_progress(p->a);
		if (p->b)
			ibc_ib_ctx_progress(p->b);
		if (all_done(reqs, n))
			break;
		if (p->a)
			ibc_ib_ctx_wait(p->a, 200);
		if (p->b)
			ibc_ib_ctx_wait(p->b, 200);
	}
	return 0;
}

void ibt_spin(struct ibt_pair *p, int ms)
{
	uint64_t deadline = ibc_time_ms() + (uint64_t)ms;

	while (ibc_time_ms() < deadline) {
		if (p->a)
			ibc_ib_ctx_progress(p->a);
		if (p->b)
			ibc_ib_ctx_progress(p->b);
		if (p->a)
			ibc_ib_ctx_wait(p->a, 500);
		if (p->b)
			ibc_ib_ctx_wait(p->b, 500);
	}
}
