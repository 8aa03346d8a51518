/* SPDX-License-Identifier: MIT */
/*
 * test_net_spin.c - the spinning heuristic of the waits (src/net/net.c,
 * ibc_net_wait_spin_begin() / ibc_net_wait_spin_end()): a peer that shares
 * the rank's core is found after 2 waits in a row that spun their whole
 * budget and gave the core away at their first yield; the next 64 waits
 * (128, 256 .. for findings in a row) yield at once; the skip ends early
 * when its finding is older than 20 ms or after 4 skipped waits in a row
 * that found the core to themselves. And the ranks' own CPUs
 * (ibc_net_cpu_assign()) and ibc_net_spin_move(), which moves the calling
 * thread to its rank's own CPU at a finding, leaving its affinity mask as
 * it was. The waits are described, not run: each record
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
	net.nlocal = 1;         /* no own CPU (spin_cpu -1 from ibc_net_init()): no moves here */
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

/* a mask of the CPUs in @list (ending with -1) */
static cpu_set_t mask_of(const int *list)
{
	cpu_set_t m;

	CPU_ZERO(&m);
	for (; *list >= 0; list++)
		CPU_SET(*list, &m);
	return m;
}

static void check_assign(void)
{
	cpu_set_t m[4];

	m[0] = mask_of((const int[]){ 0, 1, -1 });
	m[1] = mask_of((const int[]){ 0, 1, -1 });
	tap_ok(ibc_net_cpu_assign(m, 2, 0) == 0 && ibc_net_cpu_assign(m, 2, 1) == 1,
	       "equal masks {0,1}: rank 0 on CPU 0, rank 1 on CPU 1");
	m[0] = mask_of((const int[]){ 1, -1 });
	tap_ok(ibc_net_cpu_assign(m, 2, 0) == 1 && ibc_net_cpu_assign(m, 2, 1) == 0,
	       "rank 0 pinned to CPU 1: it keeps it, rank 1 gets CPU 0");
	m[0] = mask_of((const int[]){ 0, 1, -1 });
	m[1] = mask_of((const int[]){ 0, 1, -1 });
	m[2] = mask_of((const int[]){ 0, 1, -1 });
	m[3] = mask_of((const int[]){ 0, 1, -1 });
	tap_ok(ibc_net_cpu_assign(m, 4, 2) == -1 && ibc_net_cpu_assign(m, 4, 3) == -1,
	       "4 ranks on {0,1}: ranks 2 and 3 get no CPU of their own");
	m[0] = mask_of((const int[]){ 4, -1 });
	m[1] = mask_of((const int[]){ 5, -1 });
	m[2] = mask_of((const int[]){ 4, 5, 6, 7, -1 });
	tap_ok(ibc_net_cpu_assign(m, 3, 0) == 4 && ibc_net_cpu_assign(m, 3, 1) == 5 &&
	       ibc_net_cpu_assign(m, 3, 2) == 6, "mpirun-bound ranks keep their CPUs, a wider one takes the next free");
	tap_is_int(ibc_net_cpu_assign(m, 3, 3), -1, "an index beyond the masks: -1");
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
	net.nlocal = 2;
	net.spin_cpu = a;
	if (put_on(b, &orig) != 0) {
		tap_ok(0, "cannot place the test thread on CPU %d", b);
		return;
	}
	moves = net.spin_moves;
	ibc_net_spin_move(&net);
	tap_is_int(sched_getcpu(), a, "own CPU %d, on CPU %d: moved to it", a, b);
	tap_is_int(net.spin_moves, moves + 1, "counted");
	sched_getaffinity(0, sizeof(now), &now);
	tap_ok(CPU_EQUAL(&now, &orig), "the thread's mask is as it was (%d CPUs)", CPU_COUNT(&now));

	net.spin_cpu = b;
	ibc_net_spin_move(&net);
	tap_is_int(sched_getcpu(), b, "own CPU %d: moved to it", b);

	moves = net.spin_moves;
	if (sched_getcpu() == b)
		ibc_net_spin_move(&net);
	tap_is_int(net.spin_moves, moves, "on its CPU already: no move");

	net.spin_cpu = -1;
	put_on(a, &orig);
	ibc_net_spin_move(&net);
	tap_is_int(net.spin_moves, moves, "no own CPU (more ranks than CPUs): no move");

	/* the own CPU left the thread's mask since set-up: left alone */
	net.spin_cpu = a;
	CPU_ZERO(&one);
	CPU_SET(b, &one);
	sched_setaffinity(0, sizeof(one), &one);
	ibc_net_spin_move(&net);
	tap_is_int(net.spin_moves, moves, "own CPU %d outside the thread's mask {%d}: no move", a, b);
	tap_is_int(sched_getcpu(), b, "still on CPU %d", b);
	sched_setaffinity(0, sizeof(orig), &orig);
}

int main(void)
{
	ibc_net_init(&net);
	check_states();
	check_assign();
	check_move();
	ibc_net_fini(&net);
	return tap_done();
}
