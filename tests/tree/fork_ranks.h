/* SPDX-License-Identifier: MIT */
/*
 * fork_ranks.h - run N ranks of a communicator as child processes of one
 * program on this host (IBC_RANK/IBC_NRANKS/IBC_ROOT on loopback), for the
 * multi-rank tests of tests/tree/ and the timing driver bench/algo_timing.c.
 * (scripts/ibcrun starts separate programs; this keeps a test one binary.)
 */
#ifndef IBC_TESTS_FORK_RANKS_H
#define IBC_TESTS_FORK_RANKS_H

/* work of one rank: its exit status (0 = success) */
typedef int (*fork_rank_fn)(int rank, int nranks, void *arg);

/*
 * fork_ranks() - start @n children, child r running @fn(r, @n, @arg) with
 * IBC_RANK=r, IBC_NRANKS=@n, IBC_ROOT=127.0.0.1:<free port> and
 * IBC_SOCKET_IFNAME=lo (unless already set), and wait for all of them.
 * @timeout_s: children still running after this are killed (SIGKILL, by pid).
 * @codes:     [out] @n exit statuses (128+signal when killed, 124 on timeout).
 * Return: 0 when every child exited 0, else -1. Call before any ibcoll call
 * in the parent (children start from the parent's state).
 */
int fork_ranks(int n, int timeout_s, fork_rank_fn fn, void *arg, int *codes);

/* anonymous shared memory visible to the parent and all children (zeroed) */
void *fork_ranks_shared(size_t nbytes);

#endif /* IBC_TESTS_FORK_RANKS_H */
