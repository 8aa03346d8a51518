#!/bin/sh
# SPDX-License-Identifier: MIT
# test_signal_storm.sh - ibcoll under a signal every 200 us on a handler
# without SA_RESTART (tests/coll/libsigstorm.so, LD_PRELOAD), as under a
# sampling profiler: every blocking call of every thread (poll, futex,
# sleeps, socket reads and writes, the bootstrap's service thread) may
# return EINTR. Creation, every collective, point-to-point and
# communicator splits must stay exact and in time, over shm and tcp, and
# every rank must have handled signals (else the test proves nothing).
b=$top_builddir
run=$top_srcdir/tests/scripts/run_local_ranks.sh
shim=$b/tests/coll/.libs/libsigstorm.so
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "1..5"
n=0
if [ ! -f "$shim" ]; then
	for i in 1 2 3 4 5; do echo "not ok $i - $shim was not built"; done
	exit 0
fi
# ranks, transport, progress thread, program and arguments
for cfg in "3 tcp 0 coll_check -c all -d float32,int8 -o sum,max -n 0,1,7,1000,65537 --no-bf16-case" \
	   "3 shm 0 coll_check -c all -d float32,int8 -o sum,max -n 0,1,7,1000,65537 --no-bf16-case" \
	   "2 tcp 1 p2p_check -r 2" "3 shm 1 p2p_check -r 2" "4 tcp 0 comm_check"; do
	set -- $cfg
	nr=$1 tp=$2 th=$3 prog=$4
	shift 4
	n=$((n + 1))
	start=$(date +%s)
	IBC_TRANSPORT=$tp IBC_PROGRESS_THREAD=$th IBC_TIMEOUT_MS=30000 SIGSTORM_US=200 SIGSTORM_PROG=$prog \
		LD_PRELOAD=$shim "$run" -n "$nr" -t 240 -- "$b/tests/coll/$prog" "$@" >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	npass=$(grep -c ': PASS' "$log")
	nsig=$(grep -c '^sigstorm: pid [0-9]* handled [1-9]' "$log")
	desc="$nr ranks, $tp, progress thread $th, $prog: exact on every rank under a signal every 200 us ($secs s)"
	if [ "$rc" -eq 0 ] && [ "$npass" -ge "$nr" ] && [ "$nsig" -ge "$nr" ]; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc (rc $rc, $npass PASS lines, $nsig storm reports)"
		sed 's/^/# /' "$log" | grep -v '^# sigstorm:' | tail -20
	fi
done
