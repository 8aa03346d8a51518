#!/bin/sh
# SPDX-License-Identifier: MIT
# test_signal_storm.sh - ibcoll under a signal every 200 us on a handler
# without SA_RESTART (tests/coll/libsigstorm.so, LD_PRELOAD), as under a
# sampling profiler: every blocking call of every thread (poll, futex,
# sleeps, socket reads and writes, the bootstrap's service thread) may
# return EINTR. Creation, every collective, point-to-point and
# communicator splits must stay exact and in time, over shm and tcp, and
# every rank must have handled signals (else the test proves nothing).
. "$top_srcdir/tests/coll/shim_case.sh"
echo "1..5"
cc="$b/tests/coll/coll_check -c all -d float32,int8 -o sum,max -n 0,1,7,1000,65537 --no-bf16-case"
storm="IBC_TIMEOUT_MS=30000 SIGSTORM_US=200"
for tp in tcp shm; do
	shim_case sigstorm 3 "3 ranks, $tp, coll_check: exact on every rank under a signal every 200 us" \
		$storm IBC_TRANSPORT=$tp SIGSTORM_PROG=coll_check -- $cc
done
shim_case sigstorm 2 "2 ranks, tcp, progress thread, p2p_check: exact under a signal every 200 us" \
	$storm IBC_TRANSPORT=tcp IBC_PROGRESS_THREAD=1 SIGSTORM_PROG=p2p_check -- \
	"$b/tests/coll/p2p_check" -r 2
shim_case sigstorm 3 "3 ranks, shm, progress thread, p2p_check: exact under a signal every 200 us" \
	$storm IBC_TRANSPORT=shm IBC_PROGRESS_THREAD=1 SIGSTORM_PROG=p2p_check -- \
	"$b/tests/coll/p2p_check" -r 2
shim_case sigstorm 4 "4 ranks, tcp, comm_check (splits): exact under a signal every 200 us" \
	$storm IBC_TRANSPORT=tcp SIGSTORM_PROG=comm_check -- "$b/tests/coll/comm_check"
