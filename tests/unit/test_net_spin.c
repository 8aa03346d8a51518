/* SPDX-License-Identifier: MIT */
/*
 * test_net_spin.c - the spinning heuristic of the waits (src/net/net.c,
 * ibc_net_wait_spin_begin() / ibc_net_wait_spin_end()): a peer that shares
 * the rank's core is found after 2 waits in a row that spun their whole
 * budget and gave the core away at their first yield; the next 64 waits
 * (128, 256 .. for findings in a row) yield at once; the skip ends early
 * when its finding is older than 20 ms or after 4 skipped waits in a row
 * that found the core to themselves. And ibc_net_spin_move(), which moves
 * the calling thread to its rank's own CPU at a finding, leaving its
 * affinity mask as it was. The waits are described, not run: each record
 * is filled as a wait of that kind would fill it.
 */
#include "config.h"

#include <sched.h>
#include <string.h>

#include "base/util.h"
#include "net/net.h"
#include "tap.h"

#define BUDGET 50000ull         /* IBC_SPIN_US=50 */
#define HANDED_OFF 5000ull      /* a first yield that ran another task (>= 2 us) */
#define ALONE 500ull            /* one that came back at once */

static struct ibc_net net;      /* zeroed, as ibc_net_init() wants */

/* the budget the next wait gets */
static uint64_t budget(void)
{
	struct ibc_net_spin sp;

	ibc_net_wait_spin_begin(&net, &sp);
	return sp.spin_ns;
}

/* a wait that had to wait, past its first polls, with @yields yields, the first taking @y1 */
static void wait_end(int yields, uint64_t y1)
{
	struct ibc_net_spin sp;

	ibc_net_wait_spin_begin(&net, &sp);
	sp.polled = 1;
	sp.timed = 1;
	sp.yields = yields;
	sp.yield1_ns = yields ? y1 : 0;
	ibc_net_wait_spin_end(&net, &sp);
}

/* two waits in a row that spun their budget and handed the core to another task */
static void finding(void)
{
	wait_end(1, HANDED_OFF);
	wait_end(1, HANDED_OFF);
}

static void check_states(void)
{
	int i;

	net.spin_ns = BUDGET;
	net.nlocal = 1;         /* ibc_net_spin_move() does nothing: this part is about counts */
	tap_is_int(budget(), BUDGET, "fresh: a wait spins its budget");
	wait_end(1, HANDED_OFF);
	tap_is_int(budget(), BUDGET, "one wait that handed the core off: still spinning");
	wait_end(1, HANDED_OFF);
	tap_is_int(budget(), 0, "the second in a row: a finding, the next waits yield at once");
	tap_is_int(net.spin_skip, 64, "64 waits skipped after a first finding");
	for (i = 0; i < 63; i++)
		wait_end(1, HANDED_OFF);
	tap_is_int(budget(), 0, "63 skipped waits later: still skipping");
	wait_end(1, HANDED_OFF);
	tap_is_int(budget(), BUDGET, "after the 64th: spinning again");
	finding();
	tap_is_int(net.spin_skip, 128, "a finding in a row with the last: the skip doubles to 128");
	wait_end(0, 0);
	tap_is_int(net.spin_skip, 127, "a wait that did not need to yield counts as skipped");

	/* the core to themselves: 4 skipped waits in a row whose yield came back at once */
	wait_end(1, ALONE);
	wait_end(1, ALONE);
	wait_end(1, ALONE);
	tap_is_int(budget(), 0, "3 skipped waits alone on the core: still skipping");
	wait_end(1, ALONE);
	tap_is_int(budget(), BUDGET, "the 4th in a row: spinning again");
	tap_is_int(net.spin_skip_len, 64, "and the next finding skips 64 again");
	finding();
	wait_end(1, ALONE);
	wait_end(1, ALONE);
	wait_end(1, ALONE);
	wait_end(1, HANDED_OFF);
	wait_end(1, ALONE);
	wait_end(1, ALONE);
	wait_end(1, ALONE);
	tap_is_int(budget(), 0, "3 alone, 1 handed off, 3 alone: no 4 in a row, still skipping");

	/* a stale finding */
	net.spin_skip_ns = ibc_time_coarse_ns() - 5000000ull;
	tap_is_int(budget(), 0, "a finding 5 ms old: still skipping");
	net.spin_skip_ns = ibc_time_coarse_ns() - 30000000ull;
	tap_is_int(budget(), BUDGET, "a finding 30 ms old (over 20 ms): spinning again");
	tap_is_int(net.spin_skip, 0, "the skip is cleared");
	tap_is_int(net.spin_skip_len, 64, "and the next finding skips 64");

	/* oversubscribed: never spinning, never a finding */
	net.spin_skip = 0;
	net.spin_ns = 0;
	finding();
	finding();
	tap_is_int(net.spin_skip, 0, "spinning off (oversubscribed): waits never count as findings");
	tap_is_int(budget(), 0, "and get no budget");
}

/* the @k-th CPU of @set, -1 if none */
static int nth_cpu(const cpu_set_t *set, int k)
{
	int c;

	for (c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, set) && k-- == 0)
			return c;
	return -1;
}

/* pin the calling thread to @cpu, then give it back @orig (it stays on @cpu until moved) */
static int put_on(int cpu, const cpu_set_t *orig)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0)
		return -1;
	return sched_setaffinity(0, sizeof(*orig), orig);
}

static void check_move(void)
{
	cpu_set_t orig;
	cpu_set_t now;
	cpu_set_t one;
	int a;
	int b;
	unsigned moves;

	if (sched_getaffinity(0, sizeof(orig), &orig) != 0 || CPU_COUNT(&orig) < 2) {
		tap_ok(1, "# SKIP fewer than 2 CPUs in this process's mask: no move to check");
		return;
	}
	a = nth_cpu(&orig, 0);
	b = nth_cpu(&orig, 1);
	net.nranks = 2;
	net.nlocal = 2;
	net.local_rank = 0;
	if (put_on(b, &orig) != 0) {
		tap_ok(0, "cannot place the test thread on CPU %d", b);
		return;
	}
	moves = net.spin_moves;
	ibc_net_spin_move(&net);
	tap_is_int(sched_getcpu(), a, "local rank 0 of 2 on CPU %d: moved to the mask's first CPU", b);
	tap_is_int(net.spin_moves, moves + 1, "counted");
	sched_getaffinity(0, sizeof(now), &now);
	tap_ok(CPU_EQUAL(&now, &orig), "the thread's mask is as it was (%d CPUs)", CPU_COUNT(&now));

	net.local_rank = 1;
	ibc_net_spin_move(&net);
	tap_is_int(sched_getcpu(), b, "local rank 1 of 2: moved to the mask's second CPU, %d", b);

	moves = net.spin_moves;
	if (sched_getcpu() == b)
		ibc_net_spin_move(&net);
	tap_is_int(net.spin_moves, moves, "on its CPU already: no move");

	net.local_rank = 0;
	net.nlocal = 1;
	ibc_net_spin_move(&net);
	tap_is_int(net.spin_moves, moves, "one local rank: no move");

	/* a mask narrower than the local ranks (a launcher bound the rank): left alone */
	net.nlocal = 2;
	CPU_ZERO(&one);
	CPU_SET(b, &one);
	sched_setaffinity(0, sizeof(one), &one);
	ibc_net_spin_move(&net);
	tap_is_int(net.spin_moves, moves, "a one-CPU mask with 2 local ranks: no move");
	tap_is_int(sched_getcpu(), b, "still on CPU %d", b);
	sched_setaffinity(0, sizeof(orig), &orig);
}

int main(void)
{
	ibc_net_init(&net);
	check_states();
	check_move();
	ibc_net_fini(&net);
	return tap_done();
}
