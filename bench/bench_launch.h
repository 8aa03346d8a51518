/* SPDX-License-Identifier: MIT */
/* bench_launch.h - `ibc_bench --local N`: N local ranks without mpirun (bench_launch.c). */
#ifndef IBC_BENCH_LAUNCH_H
#define IBC_BENCH_LAUNCH_H

/*
 * bench_local_ranks() - look for "--local N" or "--local=N" in @argv.
 * Returns 1 with *@nranks_p set, 0 when absent, -1 when N is not 1..1024.
 */
int bench_local_ranks(int argc, char **argv, int *nranks_p);

/*
 * bench_launch_local() - run @nranks copies of this program (arguments
 * @argv without --local) as ranks 0..@nranks-1 of one job on this host,
 * rendezvous at 127.0.0.1 on a free port; blocks until all exit.
 * Returns the largest exit status (3 when one died of a signal or could not
 * be started).
 */
int bench_launch_local(int argc, char **argv, int nranks);

#endif /* IBC_BENCH_LAUNCH_H */
