/* SPDX-License-Identifier: MIT */
/*
 * test_ib_loop.c - the verbs transport end to end on a real device, two
 * endpoints in one process (one on RXE_DEV0, one on RXE_DEV1: rxe0 and
 * rxe1 in the Soft-RoCE VM), connected through the internal API with the
 * connection info exchanged in memory:
 *   - QP set-up (RESET -> INIT -> RTR -> RTS), negotiated MTU and GID;
 *   - data both ways with exact checks: zero, inline, bounce, zero-copy
 *     and striped sizes, more messages than credits (queued sends and
 *     receives), sends posted before receives and after;
 *   - many large messages in flight over 3 QPs;
 *   - the registration cache over ibv_reg_mr: hits within one operation,
 *     release at the next, retention with IBC_IB_REG_CACHE_BYTES;
 *   - descriptor and size mismatches failing both sides;
 *   - the eager path (IBC_IB_EAGER_BYTES): exact data at the bounce and
 *     eager limits, sends that complete before any receive is posted
 *     (unexpected messages), streams far beyond the credits (credit
 *     return), mismatches on eager messages and across the eager limit
 *     reported by both sides, a peer dying mid-stream (eager writes fail,
 *     sends blocked on credits fail by the keep-alive probe);
 *   - a dead peer QP: retry-exceeded error naming the QP and status text,
 *     within a bounded time; requests complete with IBC_ERR_REMOTE;
 *   - a departed peer while only a send waits for its clear-to-send: found
 *     by the keep-alive probe (IBC_IB_PROBE_MS);
 *   - (IBT_LINK_DOWN_NETDEV set, VM only) port down -> async event error.
 * IBT_EXPECT_MTU_DIFF=1 asserts the two ports' MTUs differ (the VM suite sets
 * veth0's MTU to 9000); IBT_QUICK=1 stops after one exchange of every size;
 * IBT_EXPECT_GID_CLASS names the GID kind auto-selection must choose.
 * Without a verbs device it SKIPs.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/param.h"
#include "base/util.h"
#include "ib_test_util.h"
#include "tap.h"

#define GUARD 64
#define NSIZES 14
#define EAGER_DEPTH 4           /* credits of the test pairs */

static const size_t sizes[NSIZES] = { 0, 1, 7, 64, 65, 128, 129, 1000, 4096, 8192, 8193,
				      65539, 1048581, 3145728 };

static uint8_t pat(int dir, int i, size_t j)
{
	return (uint8_t)(i * 131 + (int)(j * 7) + dir * 61 + 1 + (int)(j >> 12));
}

static void fill(uint8_t *b, size_t n, int dir, int i)
{
	size_t j;

	for (j = 0; j < n; j++)
		b[j] = pat(dir, i, j);
}

static int check(const uint8_t *b, size_t n, int dir, int i)
{
	size_t j;

	for (j = 0; j < n; j++)
		if (b[j] != pat(dir, i, j))
			return 0;
	for (j = n; j < n + GUARD; j++)
		if (b[j] != 0xee)
			return 0;
	return 1;
}

static struct ibc_msg_desc desc_of(uint32_t seq, uint64_t count)
{
	struct ibc_msg_desc d;

	memset(&d, 0, sizeof(d));
	d.seq = seq;
	d.coll = 1;
	d.dtype = 1;
	d.count = count;
	d.root = -1;
	return d;
}

/* send every size in both directions at once; recv_first: receives posted before sends */
static void exchange_sizes(struct ibt_pair *p, int recv_first, uint32_t seq)
{
	static struct ibc_treq rq[2][NSIZES];
	static struct ibc_treq sq[2][NSIZES];
	struct ibc_treq *all[4 * NSIZES];
	uint8_t *sbuf[2][NSIZES];
	uint8_t *rbuf[2][NSIZES];
	struct ibc_ib_conn *c[2] = { p->ca, p->cb };
	int ok_data = 1;
	int ok_st = 1;
	int d;
	int i;
	int k = 0;

	for (d = 0; d < 2; d++) {
		for (i = 0; i < NSIZES; i++) {
			sbuf[d][i] = malloc(sizes[i] + GUARD);
			rbuf[d][i] = malloc(sizes[i] + GUARD);
			fill(sbuf[d][i], sizes[i], d, i);
			memset(rbuf[d][i], 0xee, sizes[i] + GUARD);
		}
	}
	for (d = 0; d < 2; d++) {
		for (i = 0; i < NSIZES; i++) {
			struct ibc_msg_desc desc = desc_of(seq, sizes[i]);

			/* direction d: c[d] sends, c[1-d] receives */
			if (recv_first) {
				ibc_ib_conn_irecv(c[1 - d], rbuf[d][i], sizes[i], &desc, &rq[d][i]);
				ibc_ib_conn_isend(c[d], sbuf[d][i], sizes[i], &desc, &sq[d][i]);
			} else {
				ibc_ib_conn_isend(c[d], sbuf[d][i], sizes[i], &desc, &sq[d][i]);
			}
			all[k++] = &sq[d][i];
			all[k++] = &rq[d][i];
		}
	}
	if (!recv_first) {
		for (d = 0; d < 2; d++)
			for (i = 0; i < NSIZES; i++) {
				struct ibc_msg_desc desc = desc_of(seq, sizes[i]);

				ibc_ib_conn_irecv(c[1 - d], rbuf[d][i], sizes[i], &desc, &rq[d][i]);
			}
	}
	tap_is_int(ibt_wait(p, all, k, 120000), 0, "%s: %d messages of 0..3 MiB both ways complete",
		   recv_first ? "receives first" : "sends first", 2 * NSIZES);
	for (d = 0; d < 2; d++) {
		for (i = 0; i < NSIZES; i++) {
			if (!ibc_treq_is_done(&sq[d][i]) || !ibc_treq_is_done(&rq[d][i]) ||
			    sq[d][i].status != IBC_OK || rq[d][i].status != IBC_OK) {
				ok_st = 0;
				tap_diag("dir %d size %zu: send %d/%s recv %d/%s", d, sizes[i],
					 sq[d][i].done, ibc_status_str(sq[d][i].status), rq[d][i].done,
					 ibc_status_str(rq[d][i].status));
			} else if (!check(rbuf[d][i], sizes[i], d, i)) {
				ok_data = 0;
				tap_diag("dir %d size %zu: data differ", d, sizes[i]);
			}
		}
	}
	tap_ok(ok_st, "every request completed with IBC_OK");
	tap_ok(ok_data, "every byte arrived exactly, nothing written past the end");
	for (d = 0; d < 2; d++)
		for (i = 0; i < NSIZES; i++) {
			if (!ibc_treq_is_done(&sq[d][i]) || !ibc_treq_is_done(&rq[d][i]))
				continue; /* leaked on purpose: the transport may still write */
			free(sbuf[d][i]);
			free(rbuf[d][i]);
		}
}

static void many_in_flight(struct ibt_pair *p)
{
	enum { N = 48, SZ = 100000 };
	static struct ibc_treq sq[N];
	static struct ibc_treq rq[N];
	struct ibc_treq *all[2 * N];
	uint8_t *s = malloc((size_t)N * SZ);
	uint8_t *r = malloc((size_t)N * SZ + GUARD);
	int bad = 0;
	int i;

	for (i = 0; i < N; i++)
		fill(s + (size_t)i * SZ, SZ, 3, i);
	memset(r, 0xee, (size_t)N * SZ + GUARD);
	for (i = 0; i < N; i++) {
		struct ibc_msg_desc d = desc_of(500, SZ);

		ibc_ib_conn_isend(p->ca, s + (size_t)i * SZ, SZ, &d, &sq[i]);
		all[2 * i] = &sq[i];
	}
	for (i = 0; i < N; i++) {
		struct ibc_msg_desc d = desc_of(500, SZ);

		ibc_ib_conn_irecv(p->cb, r + (size_t)i * SZ, SZ, &d, &rq[i]);
		all[2 * i + 1] = &rq[i];
	}
	tap_is_int(ibt_wait(p, all, 2 * N, 120000), 0, "%d striped messages of %d bytes complete", N,
		   SZ);
	for (i = 0; i < N; i++) {
		size_t j;

		if (sq[i].status != IBC_OK || rq[i].status != IBC_OK) {
			bad++;
			continue;
		}
		for (j = 0; j < SZ; j++)
			if (r[(size_t)i * SZ + j] != pat(3, i, j)) {
				bad++;
				break;
			}
	}
	tap_is_int(bad, 0, "all %d messages exact", N);
	tap_ok(r[(size_t)N * SZ] == 0xee, "guard after the last message untouched");
	free(s);
	free(r);
}

/* one message A -> B, waited for */
static int one_msg(struct ibt_pair *p, void *sbuf, void *rbuf, size_t n, uint32_t seq,
		   ibc_status_t *sst, ibc_status_t *rst)
{
	struct ibc_msg_desc d = desc_of(seq, n);
	struct ibc_treq s;
	struct ibc_treq r;
	struct ibc_treq *all[2] = { &s, &r };
	int ret;

	ibc_ib_conn_irecv(p->cb, rbuf, n, &d, &r);
	ibc_ib_conn_isend(p->ca, sbuf, n, &d, &s);
	ret = ibt_wait(p, all, 2, 60000);
	*sst = s.status;
	*rst = r.status;
	return ret;
}

static void reg_cache(struct ibt_pair *p)
{
	const size_t n = 1 << 20;
	uint8_t *s = malloc(n);
	uint8_t *r = malloc(n);
	struct ibc_ib_mr_cache_stats a0;
	struct ibc_ib_mr_cache_stats b0;
	ibc_status_t ss;
	ibc_status_t rs;
	int i;
	int ok = 1;

	fill(s, n, 5, 0);
	one_msg(p, s, r, n, 900, &ss, &rs); /* a new operation: earlier ones are trimmed */
	a0 = p->a->mrc.stats;
	b0 = p->b->mrc.stats;
	for (i = 0; i < 3; i++) {
		if (one_msg(p, s, r, n, 900, &ss, &rs) || ss != IBC_OK || rs != IBC_OK)
			ok = 0;
	}
	tap_ok(ok, "three more 1 MiB messages of operation 900 complete");
	tap_is_int(p->a->mrc.stats.misses - a0.misses, 0, "sender: no new registration within one operation");
	tap_is_int(p->a->mrc.stats.hits - a0.hits, 3, "sender: 3 cache hits");
	tap_is_int(p->b->mrc.stats.hits - b0.hits, 3, "receiver: 3 cache hits");
	a0 = p->a->mrc.stats;
	one_msg(p, s, r, n, 901, &ss, &rs);
	tap_ok(ss == IBC_OK && rs == IBC_OK, "message of operation 901 completes");
	tap_is_int(p->a->mrc.stats.evictions - a0.evictions, 1,
		   "IBC_IB_REG_CACHE_BYTES=0: the next operation releases the idle registration");
	tap_is_int(p->a->mrc.stats.misses - a0.misses, 1, "and registers again");
	tap_ok(!memcmp(r, s, n), "data exact");
	p->a->prm.reg_cache_bytes = 64 << 20;
	a0 = p->a->mrc.stats;
	one_msg(p, s, r, n, 902, &ss, &rs);
	tap_is_int(p->a->mrc.stats.evictions - a0.evictions, 0,
		   "IBC_IB_REG_CACHE_BYTES=64m: idle registration kept across operations");
	tap_is_int(p->a->mrc.stats.hits - a0.hits, 1, "and reused (hit)");
	p->a->prm.reg_cache_bytes = 0;
	free(s);
	free(r);
}

/* progress both sides until the sender's check has run @n times (the refusal arrived) */
static void eager_wait_check(struct ibt_pair *p, int n)
{
	uint64_t t0 = ibc_time_ms();

	while (p->ra.ndesc_mismatch < n && ibc_time_ms() - t0 < 10000)
		ibt_spin(p, 20);
}

static void mismatch(struct ibt_pair *p)
{
	uint8_t s[256];
	uint8_t r[512];
	struct ibc_msg_desc ds = desc_of(7, 10);
	struct ibc_msg_desc dr = desc_of(7, 11);
	struct ibc_treq sq;
	struct ibc_treq rq;
	struct ibc_treq *all[2] = { &sq, &rq };
	int ma = p->ra.ndesc_mismatch;
	int mb = p->rb.ndesc_mismatch;
	ibc_status_t ss;
	ibc_status_t rs;

	memset(s, 1, sizeof(s));
	ibc_ib_conn_isend(p->ca, s, 100, &ds, &sq);
	ibc_ib_conn_irecv(p->cb, r, 100, &dr, &rq);
	tap_is_int(ibt_wait(p, all, 2, 30000), 0, "descriptor mismatch: both requests finish");
	/* an eager send is done once written; the sender's check runs on the refusal */
	tap_is_int(sq.status, IBC_OK, "eager sender's request completed when written");
	tap_is_int(rq.status, IBC_ERR_INVALID_USAGE, "receiver fails with IBC_ERR_INVALID_USAGE");
	eager_wait_check(p, ma + 1);
	tap_ok(p->ra.ndesc_mismatch == ma + 1 && p->rb.ndesc_mismatch == mb + 1,
	       "both sides compared and saw both values: '%s'", p->ra.last_desc);
	tap_ok(strstr(p->rb.last_desc, "count 11") && strstr(p->rb.last_desc, "count 10"),
	       "receiver's check has its count 11 and the sender's 10");
	tap_ok(strstr(p->ra.last_desc, "mine seq 7 coll 1 count 10") &&
	       strstr(p->ra.last_desc, "theirs seq 7 coll 1 count 11"),
	       "sender's check (from the eager refusal) has its count 10 and the receiver's 11");
	ds = desc_of(8, 50);
	ibc_ib_conn_isend(p->ca, s, 100, &ds, &sq);
	ibc_ib_conn_irecv(p->cb, r, 200, &ds, &rq);
	tap_is_int(ibt_wait(p, all, 2, 30000), 0, "size mismatch: both requests finish");
	eager_wait_check(p, ma + 2);
	tap_ok(rq.status == IBC_ERR_INVALID_USAGE && p->ra.ndesc_mismatch == ma + 2 &&
	       strstr(p->ra.last_desc, "nbytes 100") && strstr(p->ra.last_desc, "nbytes 200"),
	       "size mismatch fails the receive (%s) and the sender's check: '%s'",
	       ibc_status_str(rq.status), p->ra.last_desc);
	one_msg(p, s, r, 256, 9, &ss, &rs);
	tap_ok(ss == IBC_OK && rs == IBC_OK && !memcmp(r, s, 256),
	       "the connection still carries the next message");
	tap_is_int(p->ra.nfail + p->rb.nfail, 0, "no connection failure so far");
}

static void small_stream(struct ibt_pair *p)
{
	enum { N = 300 };
	static struct ibc_treq sq[N];
	static struct ibc_treq rq[N];
	static uint8_t s[N][16];
	static uint8_t r[N][16];
	struct ibc_treq *all[2 * N];
	int bad = 0;
	int i;

	for (i = 0; i < N; i++) {
		struct ibc_msg_desc d = desc_of(1000 + (uint32_t)i, 16);

		fill(s[i], 16, 4, i);
		ibc_ib_conn_irecv(p->cb, r[i], 16, &d, &rq[i]);
		ibc_ib_conn_isend(p->ca, s[i], 16, &d, &sq[i]);
		all[2 * i] = &sq[i];
		all[2 * i + 1] = &rq[i];
	}
	tap_is_int(ibt_wait(p, all, 2 * N, 60000), 0, "%d inline messages (selective signaling) complete", N);
	for (i = 0; i < N; i++)
		if (rq[i].status != IBC_OK || memcmp(r[i], s[i], 16))
			bad++;
	tap_is_int(bad, 0, "all exact");
}

static void dead_peer(const char *d0, int p0, const char *d1, int p1)
{
	enum { N = 128 * 1024 }; /* rendezvous: over the eager limit */
	struct ibc_ib_params prm;
	struct ibt_pair p;
	static uint8_t buf[N];
	struct ibc_msg_desc d = desc_of(1, N);
	struct ibc_treq sq;
	struct ibc_treq rq;
	ibc_status_t st = IBC_OK;
	uint64_t t0;
	uint64_t dt;
	char want[64];

	ibt_default_params(&prm);
	prm.timeout = 12;       /* 16.8 ms per try */
	prm.retry_cnt = 2;
	if (ibt_pair_open(&p, d0, p0, d1, p1, &prm) != IBC_OK) {
		tap_ok(0, "dead peer: pair opens");
		return;
	}
	snprintf(want, sizeof(want), "qp 0x%x", ibc_ib_conn_qpn(p.ca, 0));
	/* the peer's QPs go away, as when its process dies */
	ibc_ib_conn_destroy(p.cb);
	p.cb = NULL;
	t0 = ibc_time_ms();
	ibc_ib_conn_irecv(p.ca, buf, sizeof(buf), &d, &rq);
	ibc_ib_conn_isend(p.ca, buf, sizeof(buf), &d, &sq);
	while (!(ibc_treq_is_done(&sq) && ibc_treq_is_done(&rq)) && ibc_time_ms() - t0 < 20000) {
		ibc_status_t s = ibc_ib_ctx_progress(p.a);

		if (s != IBC_OK)
			st = s;
		ibc_ib_ctx_wait(p.a, 1000);
	}
	dt = ibc_time_ms() - t0;
	tap_ok(ibc_treq_is_done(&sq) && ibc_treq_is_done(&rq),
	       "dead peer: both requests finish (after %llu ms)", (unsigned long long)dt);
	tap_ok(dt < 10000, "within 10 s (timeout 16.8 ms x 3 tries)");
	tap_is_int(rq.status, IBC_ERR_REMOTE, "receive fails with IBC_ERR_REMOTE");
	tap_is_int(sq.status, IBC_ERR_REMOTE, "send fails with IBC_ERR_REMOTE");
	tap_is_int(st, IBC_ERR_REMOTE, "progress returned the error");
	tap_is_int(p.ra.nfail, 1, "reported exactly once");
	tap_is_int(p.ra.last_peer, 1, "naming the peer rank");
	tap_ok(strstr(p.ra.last_why, "transport retry counter exceeded") != NULL,
	       "with ibv_wc_status_str: '%s'", p.ra.last_why);
	tap_ok(strstr(p.ra.last_why, want) != NULL, "and the local QP number (%s)", want);
	tap_ok(strstr(p.ra.last_why, d1) != NULL, "and the peer's device (%s)", d1);
	ibt_pair_close(&p);
}

/*
 * a peer that goes away while this side only waits for its clear-to-send:
 * nothing is in flight, so only the keep-alive probe (IBC_IB_PROBE_MS) or
 * the rendezvous nudge (a write after IB_RTS_NS, 200 ms, of waiting) can
 * notice; the probe's 100 ms here makes it the first. (At 200 ms each, the
 * two fell due in the same tick of the coarse clock the timers read since
 * b897871, and the nudge, checked first, failed first: CI of ffed220.)
 */
static void departed_peer(const char *d0, int p0, const char *d1, int p1)
{
	struct ibc_ib_params prm;
	struct ibt_pair p;
	static uint8_t buf[128 * 1024]; /* rendezvous: waits for a clear-to-send */
	struct ibc_msg_desc d = desc_of(1, sizeof(buf));
	struct ibc_treq sq;
	uint64_t t0;

	ibt_default_params(&prm);
	prm.timeout = 12;
	prm.retry_cnt = 2;
	prm.probe_ms = 100;
	if (ibt_pair_open(&p, d0, p0, d1, p1, &prm) != IBC_OK) {
		tap_ok(0, "departed peer: pair opens");
		return;
	}
	ibc_ib_conn_destroy(p.cb);
	p.cb = NULL;
	t0 = ibc_time_ms();
	ibc_ib_conn_isend(p.ca, buf, sizeof(buf), &d, &sq);
	while (!ibc_treq_is_done(&sq) && ibc_time_ms() - t0 < 20000) {
		ibc_ib_ctx_progress(p.a);
		ibc_ib_ctx_wait(p.a, 1000);
	}
	tap_ok(ibc_treq_is_done(&sq), "departed peer: a send waiting for a clear-to-send fails (after %llu ms)",
	       (unsigned long long)(ibc_time_ms() - t0));
	tap_is_int(sq.status, IBC_ERR_REMOTE, "with IBC_ERR_REMOTE");
	/*
	 * the first failure: the probe's; the QPs' pending writes fail after it
	 * in any order, so the last text may be one of theirs (CI of fe6b73d)
	 */
	tap_ok(strstr(p.ra.first_why, "keep-alive probe") &&
	       strstr(p.ra.first_why, "transport retry counter exceeded"),
	       "found by the keep-alive probe: '%s'", p.ra.first_why);
	ibt_pair_close(&p);
}

static void link_down(const char *netdev, const char *d0, int p0, const char *d1, int p1)
{
	struct ibc_ib_params prm;
	struct ibt_pair p;
	char cmd[128];
	uint64_t t0;

	ibt_default_params(&prm);
	if (ibt_pair_open(&p, d0, p0, d1, p1, &prm) != IBC_OK) {
		tap_ok(0, "link down: pair opens");
		return;
	}
	snprintf(cmd, sizeof(cmd), "ip link set %s down", netdev);
	tap_is_int(system(cmd), 0, "%s", cmd);
	t0 = ibc_time_ms();
	while (p.rb.nfail == 0 && ibc_time_ms() - t0 < 10000) {
		ibc_ib_ctx_progress(p.b);
		ibc_ib_ctx_wait(p.b, 5000);
	}
	tap_is_int(p.rb.nfail, 1, "port down reported on %s after %llu ms", d1,
		   (unsigned long long)(ibc_time_ms() - t0));
	tap_is_int(p.rb.last_st, IBC_ERR_VERBS, "as IBC_ERR_VERBS");
	tap_ok(strstr(p.rb.last_why, "went down") && strstr(p.rb.last_why, "port error"),
	       "naming the async event and port: '%s'", p.rb.last_why);
	snprintf(cmd, sizeof(cmd), "ip link set %s up", netdev);
	tap_is_int(system(cmd), 0, "%s", cmd);
	ibt_pair_close(&p);
}

/* ---- eager path (ib.h): messages written into the receiver's slots ----- */

/* post @n receives on @c (from @bufs, sizes @ns) with descriptors of operation @seq */
static void post_recvs(struct ibc_ib_conn *c, uint8_t **bufs, const size_t *ns, int n, uint32_t seq,
		       struct ibc_treq *rq)
{
	int i;

	for (i = 0; i < n; i++) {
		struct ibc_msg_desc d = desc_of(seq, ns[i]);

		ibc_ib_conn_irecv(c, bufs[i], ns[i], &d, &rq[i]);
	}
}

/*
 * Exact data at 0, 1, 7, 4096, bounce-1, bounce, bounce+1, eager-1, eager
 * (and eager+1, by rendezvous): first in groups of D/2 sends that complete
 * while no receive is posted (they arrive unexpected and wait in the
 * slots), then with the receives posted first.
 */
static void eager_exact(struct ibt_pair *p)
{
	enum { NE = 10 };
	size_t bb = p->a->prm.bounce_bytes;
	size_t eb = ibc_ib_conn_eager_max(p->ca);
	size_t ns[NE] = { 0, 1, 7, 4096, bb - 1, bb, bb + 1, eb - 1, eb, eb + 1 };
	static struct ibc_treq sq[NE];
	static struct ibc_treq rq[NE];
	struct ibc_treq *all[2 * NE];
	uint8_t *sb[NE];
	uint8_t *rb[NE];
	int D = EAGER_DEPTH / 2; /* credits come back lazily: D/2 are always free */
	int early = 1;
	int bad = 0;
	int pass;
	int g;
	int i;

	for (i = 0; i < NE; i++) {
		sb[i] = malloc(ns[i] + GUARD);
		rb[i] = malloc(ns[i] + GUARD);
		fill(sb[i], ns[i], 6, i);
	}
	/* pass 0: unexpected (eager sizes only, D at a time); pass 1: receives first */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < NE; i++)
			memset(rb[i], 0xee, ns[i] + GUARD);
		if (pass == 0) {
			for (g = 0; g < NE - 1; g += D) {
				int k = IBC_MIN(D, NE - 1 - g);
				uint64_t t0 = ibc_time_ms();
				int done = 0;

				for (i = g; i < g + k; i++) {
					struct ibc_msg_desc d = desc_of(700, ns[i]);

					ibc_ib_conn_isend(p->ca, sb[i], ns[i], &d, &sq[i]);
				}
				/* only the sender progresses: no clear-to-send can come */
				while (!done && ibc_time_ms() - t0 < 10000) {
					ibc_ib_ctx_progress(p->a);
					for (done = 1, i = g; i < g + k; i++)
						done &= ibc_treq_is_done(&sq[i]) && sq[i].status == IBC_OK;
					if (!done)
						ibc_ib_ctx_wait(p->a, 1000);
				}
				early &= done;
				ibt_spin(p, 30); /* the receiver sees them arrive, no receive posted */
				post_recvs(p->cb, rb + g, ns + g, k, 700, rq + g);
				for (i = 0; i < k; i++)
					all[i] = &rq[g + i];
				if (ibt_wait(p, all, k, 30000))
					bad++;
			}
			tap_ok(early, "eager: sends of 0 .. %zu bytes complete while no receive is posted (%d at a time)",
			       eb, D);
		} else {
			post_recvs(p->cb, rb, ns, NE, 701, rq);
			for (i = 0; i < NE; i++) {
				struct ibc_msg_desc d = desc_of(701, ns[i]);

				ibc_ib_conn_isend(p->ca, sb[i], ns[i], &d, &sq[i]);
				all[2 * i] = &sq[i];
				all[2 * i + 1] = &rq[i];
			}
			if (ibt_wait(p, all, 2 * NE, 60000))
				bad++;
		}
		for (i = 0; i < (pass ? NE : NE - 1); i++) {
			if (rq[i].status != IBC_OK || sq[i].status != IBC_OK ||
			    !check(rb[i], ns[i], 6, i)) {
				tap_diag("pass %d size %zu: send %s, receive %s, data %s", pass, ns[i],
					 ibc_status_str(sq[i].status), ibc_status_str(rq[i].status),
					 check(rb[i], ns[i], 6, i) ? "ok" : "wrong");
				bad++;
			}
		}
		tap_is_int(bad, 0, "eager: sizes 0, 1, 7, 4096, %zu, %zu, %zu, %zu, %zu%s exact, guard untouched (%s)",
			   bb - 1, bb, bb + 1, eb - 1, eb, pass ? ", and eager+1 by rendezvous" : "",
			   pass ? "receives posted first" : "unexpected: sends first");
	}
	for (i = 0; i < NE; i++) {
		free(sb[i]);
		free(rb[i]);
	}
}

/*
 * Both directions at once, every send posted before any receive: many
 * times the D credits, sizes mixing inline, copied and zero-copy eager
 * messages with rendezvous ones; credits come back piggybacked on the other
 * direction's messages and clear-to-sends, or by their own write.
 */
static void eager_stream(struct ibt_pair *p)
{
	enum { N = 240 };
	static const size_t mix[] = { 8, 100, 1000, 8192, 8193, 30000, 100000, 64, 4096 };
	static struct ibc_treq sq[2][N];
	static struct ibc_treq rq[2][N];
	static struct ibc_treq *all[4 * N];
	static uint8_t *sb[2][N];
	static uint8_t *rb[2][N];
	struct ibc_ib_conn *c[2] = { p->ca, p->cb };
	int k = 0;
	int bad = 0;
	int d;
	int i;

	for (d = 0; d < 2; d++)
		for (i = 0; i < N; i++) {
			size_t n = mix[(i + d) % IBC_ARRAY_SIZE(mix)];
			struct ibc_msg_desc ds = desc_of(800 + (uint32_t)i, n);

			sb[d][i] = malloc(n + GUARD);
			rb[d][i] = malloc(n + GUARD);
			fill(sb[d][i], n, 7 + d, i);
			memset(rb[d][i], 0xee, n + GUARD);
			rq[d][i].nbytes = n;
			ibc_ib_conn_isend(c[d], sb[d][i], n, &ds, &sq[d][i]);
			all[k++] = &sq[d][i];
		}
	ibt_spin(p, 20);
	for (d = 0; d < 2; d++)
		for (i = 0; i < N; i++) {
			size_t n = rq[d][i].nbytes;
			struct ibc_msg_desc dr = desc_of(800 + (uint32_t)i, n);

			ibc_ib_conn_irecv(c[1 - d], rb[d][i], n, &dr, &rq[d][i]);
			all[k++] = &rq[d][i];
		}
	tap_is_int(ibt_wait(p, all, k, 120000), 0,
		   "eager: %d messages each way posted before their receives (%d credits) complete", N,
		   EAGER_DEPTH);
	for (d = 0; d < 2; d++)
		for (i = 0; i < N; i++) {
			size_t n = mix[(i + d) % IBC_ARRAY_SIZE(mix)];

			if (sq[d][i].status != IBC_OK || rq[d][i].status != IBC_OK ||
			    !check(rb[d][i], n, 7 + d, i)) {
				if (!bad)
					tap_diag("dir %d message %d (%zu bytes): send %s, receive %s", d, i, n,
						 ibc_status_str(sq[d][i].status),
						 ibc_status_str(rq[d][i].status));
				bad++;
			}
			free(sb[d][i]);
			free(rb[d][i]);
		}
	tap_is_int(bad, 0, "eager: every message exact both ways, guard bytes untouched");
}

/* sizes on either side of the eager limit: both sides report, the connection goes on */
static void eager_mismatch(struct ibt_pair *p)
{
	static uint8_t s[100000];
	static uint8_t r[100000];
	struct ibc_msg_desc d1 = desc_of(20, 1000);
	struct ibc_msg_desc d2 = desc_of(20, 100000);
	struct ibc_treq sq;
	struct ibc_treq rq;
	struct ibc_treq *all[2] = { &sq, &rq };
	int ma = p->ra.ndesc_mismatch;
	uint64_t t0;
	int wret;
	ibc_status_t ss;
	ibc_status_t rs;

	memset(s, 9, sizeof(s));
	/* eager message, rendezvous receive: its clear-to-send meets an eager message */
	ibc_ib_conn_irecv(p->cb, r, 100000, &d2, &rq);
	ibc_ib_conn_isend(p->ca, s, 1000, &d1, &sq);
	tap_is_int(ibt_wait(p, all, 2, 30000), 0, "eager 1000 B sent, 100000 B received: both finish");
	eager_wait_check(p, ma + 1);
	tap_ok(rq.status == IBC_ERR_INVALID_USAGE && p->ra.ndesc_mismatch == ma + 1 &&
	       strstr(p->ra.last_desc, "nbytes 1000,") && strstr(p->ra.last_desc, "nbytes 100000"),
	       "receive fails (%s), the sender's check names both sizes: '%s'",
	       ibc_status_str(rq.status), p->ra.last_desc);
	/* rendezvous message, eager receive: the sender's nudge brings a clear-to-send */
	t0 = ibc_time_ms();
	ibc_ib_conn_irecv(p->cb, r, 1000, &d1, &rq);
	ibc_ib_conn_isend(p->ca, s, 100000, &d2, &sq);
	wret = ibt_wait(p, all, 2, 30000);
	tap_is_int(wret, 0, "100000 B sent, eager 1000 B received: both finish (after %llu ms, nudge every 200 ms)",
		   (unsigned long long)(ibc_time_ms() - t0));
	tap_ok(sq.status == IBC_ERR_INVALID_USAGE && rq.status == IBC_ERR_INVALID_USAGE,
	       "both sides fail with IBC_ERR_INVALID_USAGE (%s, %s)", ibc_status_str(sq.status),
	       ibc_status_str(rq.status));
	one_msg(p, s, r, 5000, 21, &ss, &rs);
	tap_ok(ss == IBC_OK && rs == IBC_OK && !memcmp(r, s, 5000),
	       "the connection still carries the next (eager) message");
	tap_is_int(p->ra.nfail + p->rb.nfail, 0, "no connection failure from eager mismatches");
}

static ibc_status_t eager_open(struct ibt_pair *p, const char *d0, int p0, const char *d1, int p1)
{
	struct ibc_ib_params prm;

	ibt_default_params(&prm);
	prm.depth = EAGER_DEPTH;
	prm.timeout = 12;       /* 16.8 ms per try */
	prm.retry_cnt = 2;
	prm.probe_ms = 200;
	return ibt_pair_open(p, d0, p0, d1, p1, &prm);
}

/* the receiving side goes away in the middle of a stream of eager messages */
static void eager_dead_peer(const char *d0, int p0, const char *d1, int p1)
{
	enum { N = 3 * EAGER_DEPTH, SZ = 1000 };
	static uint8_t s[SZ];
	static uint8_t r[N][SZ];
	struct ibc_treq sq[N];
	struct ibc_treq rq[N];
	struct ibc_treq *all[2 * N];
	struct ibc_msg_desc d = desc_of(30, SZ);
	struct ibt_pair p;
	ibc_status_t st = IBC_OK;
	uint64_t t0;
	int nfailed = 0;
	int i;

	if (eager_open(&p, d0, p0, d1, p1) != IBC_OK) {
		tap_ok(0, "eager dead peer: pair opens");
		return;
	}
	for (i = 0; i < N; i++) {
		ibc_ib_conn_irecv(p.cb, r[i], SZ, &d, &rq[i]);
		ibc_ib_conn_isend(p.ca, s, SZ, &d, &sq[i]);
		all[2 * i] = &sq[i];
		all[2 * i + 1] = &rq[i];
	}
	tap_is_int(ibt_wait(&p, all, 2 * N, 30000), 0, "eager dead peer: a first stream of %d completes", N);
	ibc_ib_conn_destroy(p.cb);
	p.cb = NULL;
	t0 = ibc_time_ms();
	ibc_ib_conn_irecv(p.ca, r[0], SZ, &d, &rq[0]);
	for (i = 0; i < N; i++)
		ibc_ib_conn_isend(p.ca, s, SZ, &d, &sq[i]);
	while (!(ibc_treq_is_done(&sq[N - 1]) && ibc_treq_is_done(&rq[0])) &&
	       ibc_time_ms() - t0 < 20000) {
		ibc_status_t s1 = ibc_ib_ctx_progress(p.a);

		if (s1 != IBC_OK)
			st = s1;
		ibc_ib_ctx_wait(p.a, 1000);
	}
	for (i = 0; i < N; i++)
		nfailed += ibc_treq_is_done(&sq[i]) && sq[i].status == IBC_ERR_REMOTE;
	tap_ok(ibc_treq_is_done(&sq[N - 1]) && ibc_treq_is_done(&rq[0]),
	       "eager dead peer: every request finishes (after %llu ms)",
	       (unsigned long long)(ibc_time_ms() - t0));
	tap_ok(sq[N - 1].status == IBC_ERR_REMOTE && rq[0].status == IBC_ERR_REMOTE,
	       "sends waiting for credits (%d of %d) and the receive fail with IBC_ERR_REMOTE", nfailed,
	       N);
	tap_is_int(st, IBC_ERR_REMOTE, "progress returned the error");
	tap_ok(p.ra.nfail == 1 && p.ra.last_peer == 1 &&
	       strstr(p.ra.last_why, "transport retry counter exceeded"),
	       "reported once, naming peer rank 1: '%s'", p.ra.last_why);
	ibt_pair_close(&p);

	/* the peer goes away while sends only wait for credits: nothing in flight */
	if (eager_open(&p, d0, p0, d1, p1) != IBC_OK) {
		tap_ok(0, "eager departed peer: pair opens");
		return;
	}
	for (i = 0; i < EAGER_DEPTH + 2; i++)
		ibc_ib_conn_isend(p.ca, s, SZ, &d, &sq[i]);
	t0 = ibc_time_ms();
	while (!ibc_treq_is_done(&sq[EAGER_DEPTH - 1]) && ibc_time_ms() - t0 < 10000) {
		ibc_ib_ctx_progress(p.a);
		ibc_ib_ctx_wait(p.a, 1000);
	}
	tap_ok(ibc_treq_is_done(&sq[EAGER_DEPTH - 1]) && !ibc_treq_is_done(&sq[EAGER_DEPTH]),
	       "eager departed peer: %d sends written, the next waits for a credit", EAGER_DEPTH);
	ibc_ib_conn_destroy(p.cb);
	p.cb = NULL;
	t0 = ibc_time_ms();
	while (!ibc_treq_is_done(&sq[EAGER_DEPTH + 1]) && ibc_time_ms() - t0 < 20000) {
		ibc_ib_ctx_progress(p.a);
		ibc_ib_ctx_wait(p.a, 1000);
	}
	tap_ok(sq[EAGER_DEPTH].status == IBC_ERR_REMOTE && sq[EAGER_DEPTH + 1].status == IBC_ERR_REMOTE,
	       "sends waiting for credits fail with IBC_ERR_REMOTE (after %llu ms)",
	       (unsigned long long)(ibc_time_ms() - t0));
	tap_ok(p.ra.nfail == 1 && strstr(p.ra.last_why, "keep-alive probe"),
	       "found by the keep-alive probe: '%s'", p.ra.last_why);
	ibt_pair_close(&p);
}

/* ---- LL path (ib.h): lines written into the peer's ring, polled --------- */

#define LL_MAX 256              /* a ring of 8 * 6 = 48 lines */
#define LL_N 600                /* messages of the wrap-around stream */

static struct ibc_msg_desc ll_desc(uint32_t seq, uint64_t count)
{
	struct ibc_msg_desc d = desc_of(seq, count);

	d.flags = IBC_DESC_F_LL;
	return d;
}

static ibc_status_t ll_open(struct ibt_pair *p, const char *d0, int p0, const char *d1, int p1)
{
	struct ibc_ib_params prm;

	ibt_default_params(&prm);
	prm.depth = 4;
	prm.ll_max_bytes = LL_MAX;
	return ibt_pair_open(p, d0, p0, d1, p1, &prm);
}

/* every size up to the limit (and one over it) both ways, then a long stream */
static void ll_exact(struct ibt_pair *p)
{
	static const size_t llsz[] = { 0, 1, 8, 16, 17, 72, 73, 200, 255, 256, 257 };
	enum { NS = sizeof(llsz) / sizeof(llsz[0]) };
	static struct ibc_treq sq[LL_N];
	static struct ibc_treq rq[LL_N];
	static struct ibc_treq *all[2 * LL_N];
	static uint8_t *sb[LL_N];
	static uint8_t *rb[LL_N];
	int bad = 0;
	int i;

	for (i = 0; i < LL_N; i++) {
		/* sizes cycle, every 7th message 1000 bytes by the rendezvous path */
		size_t n = i < 2 * NS ? llsz[i % NS] : i % 7 == 0 ? 1000 : llsz[i % NS];
		struct ibc_msg_desc d = ll_desc(5000 + (uint32_t)i, n);

		sb[i] = malloc(n + GUARD);
		rb[i] = malloc(n + GUARD);
		fill(sb[i], n, 5, i);
		memset(rb[i], 0xee, n + GUARD);
		sq[i].nbytes = rq[i].nbytes = n;
		/* first pass: receive first; then send first; the stream posts everything at once */
		if (i < NS)
			ibc_ib_conn_irecv(p->cb, rb[i], n, &d, &rq[i]);
		ibc_ib_conn_isend(p->ca, sb[i], n, &d, &sq[i]);
		if (i >= NS)
			ibc_ib_conn_irecv(p->cb, rb[i], n, &d, &rq[i]);
		all[2 * i] = &sq[i];
		all[2 * i + 1] = &rq[i];
		if (i == 2 * NS - 1) {
			tap_is_int(ibt_wait(p, all, 4 * NS, 30000), 0,
				   "LL: sizes 0 .. %d B (and 257 B, over the limit) complete, receive or send first",
				   LL_MAX);
		}
	}
	tap_is_int(ibt_wait(p, all, 2 * LL_N, 120000), 0,
		   "LL: a stream of %d messages posted at once (ring of %d lines wraps many times, rendezvous messages mixed in) completes",
		   LL_N - 2 * NS, 8 * 6);
	for (i = 0; i < LL_N; i++) {
		size_t n = sq[i].nbytes;

		if (sq[i].status != IBC_OK || rq[i].status != IBC_OK || !check(rb[i], n, 5, i)) {
			if (!bad)
				tap_diag("message %d (%zu bytes): send %s, receive %s, data %s", i, n,
					 ibc_status_str(sq[i].status), ibc_status_str(rq[i].status),
					 check(rb[i], n, 5, i) ? "ok" : "wrong");
			bad++;
		}
		free(sb[i]);
		free(rb[i]);
	}
	tap_is_int(bad, 0, "LL: every message exact, guard bytes untouched");
	tap_is_int(p->ra.nfail + p->rb.nfail, 0, "LL: no failure reported");
}

/*
 * A mismatch on a fresh pair: @sn bytes sent with @sflags, @rn received with
 * @rflags; the receive must fail with IBC_ERR_INVALID_USAGE; @want (if not
 * NULL) must appear in what the receiver's side reported.
 */
static void ll_mismatch(const char *what, const char *d0, int p0, const char *d1, int p1,
			size_t sn, int sflags, size_t rn, int rflags, const char *want)
{
	struct ibc_msg_desc ds = desc_of(9, 64);
	struct ibc_msg_desc dr = desc_of(9, 64);
	struct ibc_treq sq;
	struct ibc_treq rq;
	struct ibc_treq *all[2] = { &sq, &rq };
	static uint8_t s[100000];
	static uint8_t r[100000];
	struct ibt_pair p;
	const char *seen;

	if (ll_open(&p, d0, p0, d1, p1) != IBC_OK) {
		tap_ok(0, "LL %s: pair opens", what);
		return;
	}
	memset(s, 3, sizeof(s));
	ds.flags = (uint8_t)sflags;
	dr.flags = (uint8_t)rflags;
	ibc_ib_conn_irecv(p.cb, r, rn, &dr, &rq);
	ibc_ib_conn_isend(p.ca, s, sn, &ds, &sq);
	/* both ends then keep progressing: the sender may learn of it too */
	tap_is_int(ibt_wait(&p, &all[1], 1, 30000), 0, "LL %s: the receive finishes", what);
	ibt_spin(&p, 200);
	seen = p.rb.ndesc_mismatch ? p.rb.last_desc : p.rb.last_why;
	tap_ok(rq.status == IBC_ERR_INVALID_USAGE && (!want || strstr(seen, want)),
	       "LL %s: receiver fails with %s: '%s'", what, ibc_status_str(rq.status), seen);
	tap_diag("sender: request %s, %d failure reports%s%s", ibc_treq_is_done(&sq) ?
		 ibc_status_str(sq.status) : "pending", p.ra.nfail, p.ra.nfail ? ": " : "",
		 p.ra.nfail ? p.ra.last_why : "");
	ibt_pair_close(&p);
}

static void ll_tests(const char *d0, int p0, const char *d1, int p1)
{
	struct ibt_pair p;
	ibc_status_t st = ll_open(&p, d0, p0, d1, p1);

	tap_is_int(st, IBC_OK, "LL pair (IBC_LL_MAX_BYTES %d) connects", LL_MAX);
	if (st != IBC_OK)
		return;
	tap_ok(ibc_ib_conn_ll_max(p.ca) == LL_MAX && ibc_ib_conn_ll_max(p.cb) == LL_MAX,
	       "both ends agree on the LL limit (%zu, %zu)", ibc_ib_conn_ll_max(p.ca),
	       ibc_ib_conn_ll_max(p.cb));
	ll_exact(&p);
	ibt_pair_close(&p);
	/* both LL, sizes differ: the descriptor check names both sizes */
	ll_mismatch("size mismatch (8 vs 16 B)", d0, p0, d1, p1, 8, IBC_DESC_F_LL, 16,
		    IBC_DESC_F_LL, "nbytes");
	/* sizes on either side of the limit: LL line meets a rendezvous receive */
	ll_mismatch("size across the limit (100 vs 300 B)", d0, p0, d1, p1, 100, IBC_DESC_F_LL,
		    300, IBC_DESC_F_LL, "nbytes");
	/* same size, only the protocol differs */
	ll_mismatch("protocol mismatch (LL sent, eager expected)", d0, p0, d1, p1, 64,
		    IBC_DESC_F_LL, 64, 0, "mismatched protocols");
	ll_mismatch("protocol mismatch (eager sent, LL expected)", d0, p0, d1, p1, 64, 0, 64,
		    IBC_DESC_F_LL, "mismatched protocols");
	ll_mismatch("protocol mismatch (rendezvous sent, LL expected: the nudge finds it)", d0, p0,
		    d1, p1, 100000, 0, 64, IBC_DESC_F_LL, "mismatched protocols");
}

int main(void)
{
	struct ibc_ib_params prm;
	struct ibt_pair p;
	char d0[IBC_IB_NAME_LEN];
	char d1[IBC_IB_NAME_LEN];
	int p0;
	int p1;
	ibc_status_t st;
	const char *netdev = getenv("IBT_LINK_DOWN_NETDEV");

	if (!getenv("IBC_DEBUG"))
		setenv("IBC_DEBUG", "WARN", 1);
	if (ibt_pick_ports(d0, &p0, d1, &p1) != 0)
		tap_skip_all("no ACTIVE verbs port (run inside the Soft-RoCE VM: make check-rxe)");
	tap_diag("endpoints %s:%d and %s:%d", d0, p0, d1, p1);

	ibt_default_params(&prm);
	prm.nqps = 3;
	prm.depth = 4;
	prm.stripe_min_bytes = 16384;
	prm.reg_cache_bytes = 0;
	st = ibt_pair_open(&p, d0, p0, d1, p1, &prm);
	tap_is_int(st, IBC_OK, "two endpoints connect (RESET -> INIT -> RTR -> RTS)");
	if (st != IBC_OK)
		return tap_done();
	tap_is_int(ibc_ib_conn_nqps(p.ca), 3, "3 QPs per connection");
	tap_is_int(ibc_ib_conn_mtu(p.ca), ibc_ib_mtu_negotiate(p.a->port_attr.active_mtu,
							       p.b->port_attr.active_mtu),
		   "path MTU %s = min(%s, %s)", ibc_ib_mtu_str(ibc_ib_conn_mtu(p.ca)),
		   ibc_ib_mtu_str(p.a->port_attr.active_mtu), ibc_ib_mtu_str(p.b->port_attr.active_mtu));
	tap_is_int(ibc_ib_conn_mtu(p.cb), ibc_ib_conn_mtu(p.ca), "both ends use the same MTU");
	if (getenv("IBT_EXPECT_MTU_DIFF"))
		tap_ok(p.a->port_attr.active_mtu != p.b->port_attr.active_mtu,
		       "the two ports have different active MTUs (test of negotiation)");
	if (p.a->link_layer == IBV_LINK_LAYER_ETHERNET) {
		int la = -1;
		int lb = -1;
		int c;

		for (c = 0; c < IBC_IB_GID_CLASS_COUNT; c++) {
			if (p.a->gids.index[c] == ibc_ib_conn_gid_index(p.ca) && la < 0)
				la = c;
			if (p.b->gids.index[c] == ibc_ib_conn_gid_index(p.cb) && lb < 0)
				lb = c;
		}
		tap_ok(la >= 0 && la == lb, "both ends use a GID of one kind: %s (idx %d and %d)",
		       ibc_ib_gid_class_name(la), ibc_ib_conn_gid_index(p.ca),
		       ibc_ib_conn_gid_index(p.cb));
		if (getenv("IBT_EXPECT_GID_CLASS"))
			tap_is_str(ibc_ib_gid_class_name(la), getenv("IBT_EXPECT_GID_CLASS"),
				   "auto-selection chose the expected kind");
	}

	if (getenv("IBT_QUICK")) { /* the MTU variant of the VM suite: set-up and one exchange */
		exchange_sizes(&p, 1, 100);
		tap_is_int(p.ra.nfail + p.rb.nfail, 0, "no failure reported");
		ibt_pair_close(&p);
		return tap_done();
	}
	exchange_sizes(&p, 0, 100);
	exchange_sizes(&p, 1, 101);
	many_in_flight(&p);
	reg_cache(&p);
	mismatch(&p);
	small_stream(&p);
	tap_is_int(ibc_ib_conn_eager_max(p.ca), ibc_param_ib_eager_bytes(),
		   "eager limit IBC_IB_EAGER_BYTES (%zu) on both ends", ibc_ib_conn_eager_max(p.cb));
	eager_exact(&p);
	eager_stream(&p);
	eager_mismatch(&p);
	tap_is_int(p.ra.nfail + p.rb.nfail, 0, "no failure reported on the healthy pair");
	ibt_pair_close(&p);

	ll_tests(d0, p0, d1, p1);
	eager_dead_peer(d0, p0, d1, p1);
	dead_peer(d0, p0, d1, p1);
	departed_peer(d0, p0, d1, p1);
	if (netdev)
		link_down(netdev, d0, p0, d1, p1);
	return tap_done();
}
