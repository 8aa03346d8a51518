/* SPDX-License-Identifier: MIT */
/*
 * shim_order.c - the order in which ncclGroupEnd() issues a group's
 * operations (shim.h: shim_order). A pure function, unit-tested with a
 * simulator of blocking one-at-a-time execution (tests/nccl/test_nccl_unit).
 *
 * Why an order is needed: ibcoll runs the operations of one communicator
 * one after another in issue order (ibcoll.h), and the stream-ordered calls
 * block the stream until each completes; NCCL programs put the sends and
 * receives of an exchange in one group in any order (rank 0 may write
 * recv-from-1 first, rank 1 recv-from-0 first). Issued as written, such a
 * group can wait forever; issued in one global order of messages, it cannot.
 *
 * Each operation gets a key; keys compare lexicographically:
 *   (gid, 0, seq)                       a collective: all ranks issue a
 *                                       communicator's collectives in the
 *                                       same program order (NCCL's rule);
 *   (gid, 1, lo, hi, src, k, seq)       a message between ranks lo < hi,
 *                                       sent by src, the k-th from src to
 *                                       its receiver in this group: the
 *                                       sender and the receiver compute the
 *                                       same key (messages match in order);
 *   (gid, 2, seq)                       a copy to self (local, any time).
 * Deadlock freedom: take the smallest key not yet executed anywhere. On each
 * rank taking part, every smaller operation is done (its keys are sorted),
 * so that operation is next on all of them, and completes. By induction all do.
 */
#include "config.h"

#include <stdlib.h>

#include "shim.h"

struct okey {
	uint64_t gid;
	int cls;
	int lo;
	int hi;
	int src;
	int k;
	int seq;
};

static int cmp_int(int a, int b)
{
	return (a > b) - (a < b);
}

static int okey_cmp(const void *pa, const void *pb)
{
	const struct okey *a = pa;
	const struct okey *b = pb;
	int c;

	if (a->gid != b->gid)
		return a->gid < b->gid ? -1 : 1;
	if ((c = cmp_int(a->cls, b->cls)))
		return c;
	if (a->cls == 1) {
		if ((c = cmp_int(a->lo, b->lo)) || (c = cmp_int(a->hi, b->hi)) ||
		    (c = cmp_int(a->src, b->src)) || (c = cmp_int(a->k, b->k)))
			return c;
	}
	return cmp_int(a->seq, b->seq);
}

int shim_order(const struct shim_order_in *in, int n, int *perm)
{
	struct okey *keys;
	int i;
	int j;

	if (n <= 0)
		return 0;
	keys = calloc((size_t)n, sizeof(*keys));
	if (!keys)
		return -1;
	for (i = 0; i < n; i++) {
		struct okey *k = &keys[i];

		k->gid = in[i].gid;
		k->seq = i;
		if (!in[i].p2p) {
			k->cls = 0;
			continue;
		}
		if (in[i].peer == in[i].rank) {
			k->cls = 2;
			continue;
		}
		k->cls = 1;
		k->lo = in[i].rank < in[i].peer ? in[i].rank : in[i].peer;
		k->hi = in[i].rank < in[i].peer ? in[i].peer : in[i].rank;
		k->src = in[i].p2p == 1 ? in[i].rank : in[i].peer;
		/* earlier messages of the same direction with the same peer */
		for (j = 0; j < i; j++)
			k->k += in[j].gid == in[i].gid && in[j].p2p == in[i].p2p &&
				in[j].peer == in[i].peer;
	}
	/* seq is unique, so the sort is stable in effect */
	qsort(keys, (size_t)n, sizeof(*keys), okey_cmp);
	for (i = 0; i < n; i++)
		perm[i] = keys[i].seq;
	free(keys);
	return 0;
}
