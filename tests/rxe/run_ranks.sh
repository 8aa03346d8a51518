#!/bin/bash
# SPDX-License-Identifier: MIT
# run_ranks.sh - start N ranks of a program on this host for a test, with
# IBC_RANK, IBC_NRANKS, IBC_ROOT (127.0.0.1, a free port) and a fresh
# IBC_SECRET, each rank's output in LOGDIR/rank.I.out; wait for all, at most
# TIMEOUT seconds. RANK_WRAP_<I>="cmd args" prefixes rank I's command line
# (e.g. a ulimit/setpriv wrapper). Exit status: 0 when every rank exited 0,
# else the first non-zero status (124 on timeout); the logs stay in LOGDIR.
#
# usage: run_ranks.sh N TIMEOUT LOGDIR PROGRAM [ARGS...]
set -u
[ $# -ge 4 ] || { echo "usage: $0 N TIMEOUT LOGDIR PROGRAM [ARGS...]" >&2; exit 2; }
n=$1
tmo=$2
logdir=$3
shift 3
mkdir -p "$logdir"
rm -f "$logdir"/rank.*.out
port=$((20000 + RANDOM % 20000))
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export IBC_NRANKS=$n IBC_ROOT=127.0.0.1:$port IBC_SECRET=$secret
export IBC_SOCKET_IFNAME=${IBC_SOCKET_IFNAME:-lo}
pids=()
for ((i = 0; i < n; i++)); do
	wrap_var=RANK_WRAP_$i
	# shellcheck disable=SC2086
	IBC_RANK=$i timeout -k 5 "$tmo" ${!wrap_var:-} "$@" > "$logdir/rank.$i.out" 2>&1 &
	pids+=($!)
done
rc=0
for ((i = 0; i < n; i++)); do
	wait "${pids[$i]}"
	r=$?
	[ $r -ne 0 ] && [ $rc -eq 0 ] && rc=$r
done
exit $rc
