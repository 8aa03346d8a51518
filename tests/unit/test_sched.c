/* SPDX-License-Identifier: MIT */
/*
 * test_sched.c - the programs of src/coll/tree/ (sched.h) without a network:
 * the shapes of the double binary tree, the binomial tree and the
 * recursive-doubling fold for n = 1..64, and a simulation of every rank's
 * program for all-reduce (double binary tree, recursive doubling,
 * Rabenseifner), broadcast and reduce (binomial).
 *
 * The simulator runs the n programs with the executor's semantics (ops in
 * order, sends take a snapshot of W, receives match in order per pair) and
 * tracks per element a bit mask of the ranks whose contribution it holds and
 * a hash of the expression that computed it. It checks: no receive meets a
 * message of another step or size; no fold combines two partials that share
 * a contribution (every element reduced exactly once); no rank is left
 * blocked and no message is left unreceived (every send has its receive,
 * no deadlock); every rank (the root for reduce) ends with every
 * contribution; all ranks end with the same expression, i.e. the same bits.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/sched.h"
#include "tap.h"

enum { C_ALLREDUCE, C_BCAST, C_REDUCE };

struct msg {
	uint32_t step;
	uint64_t cnt;
	uint64_t *mask;
	uint64_t *hash;
	struct msg *next;
};

struct chan {
	struct msg *head;
	struct msg *tail;
};

struct rank_state {
	struct ibc_sched_op *ops;
	size_t nops;
	size_t pc;
	uint64_t *mask;         /* [count]: contributions held */
	uint64_t *hash;         /* [count]: expression that produced the value */
};

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull + (a << 6) + (a >> 2));

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

static char why[512];

/* check the static form of a program: ranges, peers, kinds */
static int check_ops(const struct ibc_sched_op *ops, size_t nops, int n, int r, uint64_t count)
{
	size_t i;

	for (i = 0; i < nops; i++) {
		const struct ibc_sched_op *op = &ops[i];

		if (op->kind >= IBC_SCHED_KIND_COUNT || op->peer < 0 || op->peer >= n ||
		    op->peer == r || op->cnt == 0 || op->off + op->cnt > count) {
			snprintf(why, sizeof(why),
				 "rank %d op %zu: kind %d peer %d range [%llu, +%llu) of %llu", r, i,
				 op->kind, op->peer, (unsigned long long)op->off,
				 (unsigned long long)op->cnt, (unsigned long long)count);
			return -1;
		}
	}
	return 0;
}

/* fold or copy the message @m into rank @r's state as op @op says; -1 on a double count */
static int sim_deliver(struct rank_state *s, int r, const struct ibc_sched_op *op,
		       const struct msg *m)
{
	uint64_t i;

	for (i = 0; i < op->cnt; i++) {
		uint64_t *dm = &s->mask[op->off + i];
		uint64_t *dh = &s->hash[op->off + i];

		if (op->kind == IBC_SCHED_RECV) {
			*dm = m->mask[i];
			*dh = m->hash[i];
			continue;
		}
		if (*dm & m->mask[i]) {
			snprintf(why, sizeof(why),
				 "rank %d op %zu: element %llu would count ranks 0x%llx twice", r,
				 s->pc, (unsigned long long)(op->off + i),
				 (unsigned long long)(*dm & m->mask[i]));
			return -1;
		}
		*dm |= m->mask[i];
		if (op->flags & IBC_SCHED_F_IN_LEFT)
			*dh = mix(m->hash[i], *dh);
		else
			*dh = mix(*dh, m->hash[i]);
	}
	return 0;
}

/* run rank @r's next op: 1 done, 0 blocked (receive with no message), -1 error */
static int sim_op(struct rank_state *rs, struct chan *ch, int n, int r)
{
	struct rank_state *s = &rs[r];
	const struct ibc_sched_op *op;
	struct chan *c;
	struct msg *m;

	if (s->pc >= s->nops)
		return 0;
	op = &s->ops[s->pc];
	if (op->kind == IBC_SCHED_SEND) {
		c = &ch[r * n + op->peer];
		m = calloc(1, sizeof(*m));
		m->step = op->step;
		m->cnt = op->cnt;
		m->mask = malloc(op->cnt * sizeof(uint64_t));
		m->hash = malloc(op->cnt * sizeof(uint64_t));
		memcpy(m->mask, s->mask + op->off, op->cnt * sizeof(uint64_t));
		memcpy(m->hash, s->hash + op->off, op->cnt * sizeof(uint64_t));
		if (c->tail)
			c->tail->next = m;
		else
			c->head = m;
		c->tail = m;
		s->pc++;
		return 1;
	}
	c = &ch[op->peer * n + r];
	m = c->head;
	if (!m)
		return 0;
	if (m->step != op->step || m->cnt != op->cnt) {
		snprintf(why, sizeof(why),
			 "rank %d op %zu expects step 0x%x (%llu elements) from rank %d, which sent step 0x%x (%llu elements)",
			 r, s->pc, op->step, (unsigned long long)op->cnt, op->peer, m->step,
			 (unsigned long long)m->cnt);
		return -1;
	}
	if (sim_deliver(s, r, op, m))
		return -1;
	c->head = m->next;
	if (!c->head)
		c->tail = NULL;
	free(m->mask);
	free(m->hash);
	free(m);
	s->pc++;
	return 1;
}

/*
 * Simulate @n ranks running the programs of @gen; 0 when every property of
 * the file header holds, else -1 with the reason in why[].
 */
static int simulate(ibc_sched_gen_fn gen, int kind, int n, uint64_t count, uint64_t chunk,
		    int root, size_t *total_ops_p)
{
	struct rank_state *rs = calloc((size_t)n, sizeof(*rs));
	struct chan *ch = calloc((size_t)n * (size_t)n, sizeof(*ch));
	uint64_t full = n == 64 ? ~0ull : ((1ull << n) - 1);
	size_t total = 0;
	int ret = -1;
	int progress;
	int r;
	uint64_t e;

	why[0] = '\0';
	for (r = 0; r < n; r++) {
		struct ibc_sched_args a = { .n = n, .rank = r, .count = count, .chunk = chunk,
					    .root = root };
		size_t nops = gen(&a, NULL, 0);

		rs[r].ops = calloc(nops + 1, sizeof(*rs[r].ops));
		rs[r].nops = gen(&a, rs[r].ops, nops);
		if (rs[r].nops != nops) {
			snprintf(why, sizeof(why), "rank %d: sizing pass said %zu ops, filling pass %zu",
				 r, nops, rs[r].nops);
			goto out;
		}
		if (check_ops(rs[r].ops, nops, n, r, count))
			goto out;
		total += nops;
		rs[r].mask = calloc(count + 1, sizeof(uint64_t));
		rs[r].hash = calloc(count + 1, sizeof(uint64_t));
		for (e = 0; e < count; e++) {
			if (kind == C_BCAST) {
				rs[r].mask[e] = r == root ? 1 : 0;
				rs[r].hash[e] = r == root ? 77 : 0;
			} else {
				rs[r].mask[e] = 1ull << r;
				rs[r].hash[e] = mix(0x1234, (uint64_t)r);
			}
		}
	}
	do {
		progress = 0;
		for (r = 0; r < n; r++) {
			int st;

			while ((st = sim_op(rs, ch, n, r)) > 0)
				progress = 1;
			if (st < 0)
				goto out;
		}
	} while (progress);
	for (r = 0; r < n; r++) {
		int q;

		if (rs[r].pc != rs[r].nops) {
			const struct ibc_sched_op *op = &rs[r].ops[rs[r].pc];

			snprintf(why, sizeof(why),
				 "deadlock: rank %d blocked at op %zu of %zu (receive from rank %d step 0x%x)",
				 r, rs[r].pc, rs[r].nops, op->peer, op->step);
			goto out;
		}
		for (q = 0; q < n; q++) {
			if (ch[r * n + q].head) {
				snprintf(why, sizeof(why), "rank %d sent step 0x%x to rank %d, never received",
					 r, ch[r * n + q].head->step, q);
				goto out;
			}
		}
	}
	for (r = 0; r < n; r++) {
		uint64_t want = kind == C_BCAST ? 1 : full;

		if (kind == C_REDUCE && r != root)
			continue;
		for (e = 0; e < count; e++) {
			if (rs[r].mask[e] != want) {
				snprintf(why, sizeof(why), "rank %d element %llu holds ranks 0x%llx, not 0x%llx",
					 r, (unsigned long long)e,
					 (unsigned long long)rs[r].mask[e],
					 (unsigned long long)want);
				goto out;
			}
			if (rs[r].hash[e] != rs[root].hash[e]) {
				snprintf(why, sizeof(why),
					 "rank %d element %llu was computed by another expression than on rank %d",
					 r, (unsigned long long)e, root);
				goto out;
			}
		}
	}
	ret = 0;
out:
	for (r = 0; r < n * n; r++) {
		struct msg *m = ch[r].head;

		while (m) {
			struct msg *nx = m->next;

			free(m->mask);
			free(m->hash);
			free(m);
			m = nx;
		}
	}
	for (r = 0; r < n; r++) {
		free(rs[r].ops);
		free(rs[r].mask);
		free(rs[r].hash);
	}
	free(rs);
	free(ch);
	if (total_ops_p)
		*total_ops_p = total;
	return ret;
}

static int ceil_log2(int n)
{
	int h = 0;

	while ((1 << h) < n)
		h++;
	return h;
}

static void test_dtree_shape(void)
{
	int bad = 0;
	int n;

	for (n = 1; n <= 64 && !bad; n++) {
		int both = 0;
		int r;
		int t;

		for (t = 0; t < 2 && !bad; t++) {
			int roots = 0;

			for (r = 0; r < n && !bad; r++) {
				struct ibc_dtree_node nd;
				int i;

				ibc_dtree_node(n, t, r, &nd);
				if (nd.parent < 0) {
					roots++;
				} else {
					struct ibc_dtree_node pn;

					ibc_dtree_node(n, t, nd.parent, &pn);
					if (pn.child[0] != r && pn.child[1] != r) {
						tap_diag("n %d tree %d: rank %d's parent %d does not list it", n,
							 t, r, nd.parent);
						bad = 1;
					}
				}
				for (i = 0; i < 2; i++) {
					struct ibc_dtree_node cn;

					if (nd.child[i] < 0)
						continue;
					if (nd.child[i] >= n || nd.child[i] == r) {
						bad = 1;
						continue;
					}
					ibc_dtree_node(n, t, nd.child[i], &cn);
					if (cn.parent != r) {
						tap_diag("n %d tree %d: rank %d's child %d has parent %d", n,
							 t, r, nd.child[i], cn.parent);
						bad = 1;
					}
				}
				if (nd.depth > ceil_log2(n) + 1) {
					tap_diag("n %d tree %d: rank %d at depth %d > ceil(log2 n)+1", n, t,
						 r, nd.depth);
					bad = 1;
				}
			}
			if (roots != 1) {
				tap_diag("n %d tree %d: %d roots", n, t, roots);
				bad = 1;
			}
		}
		for (r = 0; r < n; r++) {
			struct ibc_dtree_node a;
			struct ibc_dtree_node b;

			ibc_dtree_node(n, 0, r, &a);
			ibc_dtree_node(n, 1, r, &b);
			both += (a.child[0] >= 0 || a.child[1] >= 0) &&
				(b.child[0] >= 0 || b.child[1] >= 0);
		}
		/* complementary trees: a rank forwards in one tree only (rank 0: in both, odd n) */
		if (both > (n % 2 ? 1 : 0)) {
			tap_diag("n %d: %d ranks are inner nodes of both trees", n, both);
			bad = 1;
		}
	}
	tap_ok(!bad, "double binary tree: one root, consistent parents/children, depth <= ceil(log2 n)+1, complementary inner nodes, n = 1..64");
	{
		struct ibc_dtree_node nd;

		/* the n = 14 picture of dtree.c */
		ibc_dtree_node(14, 0, 12, &nd);
		tap_ok(nd.parent == 8 && nd.child[0] == 10 && nd.child[1] == 13,
		       "n 14 tree 0: rank 12 has parent 8, children 10 and 13 (got %d, %d, %d)",
		       nd.parent, nd.child[0], nd.child[1]);
		ibc_dtree_node(14, 0, 0, &nd);
		tap_ok(nd.parent == -1 && nd.child[0] == -1 && nd.child[1] == 8,
		       "n 14 tree 0: rank 0 is the root with the one child 8");
		ibc_dtree_node(12, 1, 11, &nd);
		tap_ok(nd.parent == -1 && nd.child[1] == 3, "n 12 tree 1 (mirror): rank 11 is the root, child 3 (got %d)",
		       nd.child[1]);
		ibc_dtree_node(13, 1, 1, &nd);
		tap_ok(nd.parent == -1 && nd.child[1] == 9, "n 13 tree 1 (shift): rank 1 is the root, child 9 (got %d)",
		       nd.child[1]);
	}
	tap_is_int(ibc_dtree_height(1), 0, "dtree height of 1 rank");
	tap_is_int(ibc_dtree_height(8), 3, "dtree height of 8 ranks");
}

static void test_binomial_shape(void)
{
	int bad = 0;
	int n;
	int child[32];
	int parent;
	int nc;

	for (n = 1; n <= 64 && !bad; n++) {
		int root;

		for (root = 0; root < n && !bad; root += (n > 8 ? 5 : 1)) {
			int nedges = 0;
			int r;

			for (r = 0; r < n; r++) {
				int i;
				int depth = 0;
				int x = r;

				nc = ibc_binomial_children(n, root, r, &parent, child);
				nedges += nc;
				for (i = 0; i < nc; i++) {
					int pp;
					int cc[32];

					ibc_binomial_children(n, root, child[i], &pp, cc);
					if (pp != r)
						bad = 1;
				}
				while (x != root && depth <= 64) {
					int cc[32];

					ibc_binomial_children(n, root, x, &x, cc);
					depth++;
				}
				if (depth > ibc_binomial_height(n))
					bad = 1;
			}
			if (nedges != n - 1)
				bad = 1;
			if (bad)
				tap_diag("binomial tree n %d root %d is malformed", n, root);
		}
	}
	tap_ok(!bad, "binomial trees: n-1 edges, consistent parents, depth <= ceil(log2 n), n = 1..64, several roots");
	nc = ibc_binomial_children(8, 0, 0, &parent, child);
	tap_ok(nc == 3 && child[0] == 1 && child[1] == 2 && child[2] == 4 && parent == -1,
	       "binomial n 8 root 0: children 1 2 4, smallest subtree first");
	nc = ibc_binomial_children(8, 3, 7, &parent, child);
	tap_ok(nc == 2 && child[0] == 0 && child[1] == 1 && parent == 3,
	       "binomial n 8 root 3: rank 7 (v 4) has parent 3 and children 0 and 1");
}

static void test_fold(void)
{
	int bad = 0;
	int n;

	for (n = 1; n <= 64; n++) {
		int seen[64] = { 0 };
		int p = 0;
		int r;
		int nr;

		for (r = 0; r < n; r++) {
			p = ibc_rd_fold(n, r, &nr);
			if (nr < 0)
				continue;
			if (nr >= p || seen[nr]++ || ibc_rd_unfold_rank(n, nr) != r)
				bad = 1;
		}
		if (p > n || 2 * p <= n || (p & (p - 1)))
			bad = 1;
		for (r = 0; r < p; r++)
			if (!seen[r])
				bad = 1;
	}
	tap_ok(!bad, "recursive-doubling fold: p = 2^floor(log2 n), new ranks 0..p-1 once each, unfold inverts it, n = 1..64");
}

struct prog_case {
	const char *name;
	ibc_sched_gen_fn gen;
	int kind;
};

/* one program at every n = 1..64 over counts, chunks and roots; 0 if all hold */
static int check_program(const struct prog_case *pc, size_t *nsim_p, size_t *ops_p)
{
	int n;

	for (n = 1; n <= 64; n++) {
		uint64_t counts[] = { 1, 2, 7, (uint64_t)n - 1, 3 * (uint64_t)n + 1, 1000 };
		uint64_t chunks[] = { 1, 3, 64, 1u << 20 };
		int roots[3] = { 0, n - 1, n / 2 };
		int nroots = pc->kind == C_ALLREDUCE ? 1 : 3;
		size_t i;
		size_t j;
		int k;

		for (i = 0; i < IBC_ARRAY_SIZE(counts); i++) {
			for (j = 0; j < IBC_ARRAY_SIZE(chunks); j++) {
				/* the finest chunking of long vectors is slow; sample it */
				if (chunks[j] == 1 && counts[i] == 1000 && n % 7)
					continue;
				for (k = 0; k < nroots; k++) {
					size_t t = 0;
					int bad;

					bad = simulate(pc->gen, pc->kind, n, counts[i],
						       chunks[j], roots[k], &t);

					(*nsim_p)++;
					*ops_p += t;
					if (!bad)
						continue;
					tap_diag("%s: n %d count %llu chunk %llu root %d: %s", pc->name,
						 n, (unsigned long long)counts[i],
						 (unsigned long long)chunks[j], roots[k], why);
					return -1;
				}
			}
		}
	}
	return 0;
}

static void test_programs(void)
{
	static const struct prog_case cases[] = {
		{ "double binary tree all-reduce", ibc_dtree_allreduce_prog, C_ALLREDUCE },
		{ "recursive doubling all-reduce", ibc_rd_allreduce_prog, C_ALLREDUCE },
		{ "Rabenseifner all-reduce", ibc_rab_allreduce_prog, C_ALLREDUCE },
		{ "binomial broadcast", ibc_binomial_bcast_prog, C_BCAST },
		{ "binomial reduce", ibc_binomial_reduce_prog, C_REDUCE },
	};
	size_t ci;

	for (ci = 0; ci < IBC_ARRAY_SIZE(cases); ci++) {
		size_t nsim = 0;
		size_t ops = 0;
		int bad = check_program(&cases[ci], &nsim, &ops);

		tap_ok(!bad, "%s: %zu simulations of n = 1..64 ranks (%zu ops): each element reduced once, full result on every rank, same bits everywhere, every send received, no deadlock",
		       cases[ci].name, nsim, ops);
	}
}

/* the limits the programs promise: chunk bounds and empty vectors */
static void test_limits(void)
{
	struct ibc_sched_args a = { .n = 8, .rank = 3, .count = 1000000, .chunk = 1, .root = 0 };
	size_t nops = ibc_dtree_allreduce_prog(&a, NULL, 0);

	/* at most MAX_CHUNKS chunks per half and 6 ops per chunk of a tree */
	tap_ok(nops <= 2 * IBC_SCHED_MAX_CHUNKS * 6,
	       "dtree program of 10^6 elements at chunk 1 is capped (%zu ops)", nops);
	tap_is_int(ibc_sched_chunk_for(1000000, 1), 977, "chunk raised to keep 1024 chunks");
	tap_is_int(ibc_sched_chunk_for(10, 64), 10, "chunk capped at the range");
	a.count = 0;
	tap_is_int(ibc_rd_allreduce_prog(&a, NULL, 0), 0, "empty vector: empty program");
	a.count = 5;
	a.n = 1;
	a.rank = 0;
	tap_is_int(ibc_rab_allreduce_prog(&a, NULL, 0), 0, "one rank: empty program");
	/* recursive doubling on 8 ranks: 3 exchanges of one message each way */
	a.n = 8;
	a.rank = 5;
	a.chunk = 1 << 20;
	tap_is_int(ibc_rd_allreduce_prog(&a, NULL, 0), 6, "rd on 8 ranks, small vector: 6 ops");
	/* 6 ranks: rank 0 folds into 1, waits for the result: 2 ops */
	a.n = 6;
	a.rank = 0;
	tap_is_int(ibc_rd_allreduce_prog(&a, NULL, 0), 2, "rd on 6 ranks: a folded rank has 2 ops");
}

int main(void)
{
	test_dtree_shape();
	test_binomial_shape();
	test_fold();
	test_limits();
	test_programs();
	return tap_done();
}
