#!/bin/sh
# SPDX-License-Identifier: MIT
# test_bench_check.sh - every collective of bench/ibc_bench with -c 1 on 3
# local ranks (plain-environment launch: IBC_RANK/IBC_NRANKS/IBC_ROOT),
# over shm and tcp, blocking and nonblocking, several dtypes and ops. Each
# run must exit 0, print a row for every collective, and every row and the
# total must show 0 wrong elements. Sizes 4 B .. 3.3 MB by factor 7 give
# uneven blocks, single- and multi-chunk rings and shm's CMA rendezvous.
# Emits TAP.
set -u

top_builddir=${top_builddir:-.}
bench=$top_builddir/bench/ibc_bench
nranks=3
tmp=${TMPDIR:-/tmp}/ibc_bench_check.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$bench" ]; then
	echo "1..0 # SKIP $bench not built"
	exit 0
fi

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + $$ % 20000 + $1))
}

# run_ranks LOG ARGS...: start nranks processes, wait for all; 0 when all exit 0
run_ranks() {
	log=$1
	shift
	try=0
	while [ $try -lt 3 ]; do
		port=$(free_port $try)
		pids=
		r=0
		while [ $r -lt $nranks ]; do
			IBC_RANK=$r IBC_NRANKS=$nranks IBC_ROOT=127.0.0.1:$port IBC_TIMEOUT_MS=60000 \
				IBC_BOOTSTRAP_TIMEOUT_MS=30000 \
				timeout -k 5 240 "$bench" "$@" >"$log.$r" 2>&1 &
			pids="$pids $!"
			r=$((r + 1))
		done
		rc=0
		for p in $pids; do
			wait $p || rc=1
		done
		# a port taken between choosing and binding: try another one
		if [ $rc -ne 0 ] && grep -q "Address already in use" "$log".* 2>/dev/null; then
			try=$((try + 1))
			continue
		fi
		return $rc
	done
	return 1
}

n=0
fail=0
ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fail=1
	fi
}

# check_log LOG COLLS...: each collective has >= 1 data row, all with 0 wrong
check_log() {
	log=$1
	shift
	for c in "$@"; do
		rows=$(awk -v c="$c" '
			/^# [a-z_]+$/ { cur = $2; next }
			/^#/ { next }
			cur == c && NF >= 11 { n++; if ($11 != "0") bad++ }
			END { if (bad) print -1; else print n + 0 }' "$log")
		if [ "$rows" -gt 0 ] 2>/dev/null; then
			ok 0 "$(basename "$log"): $c: $rows rows, 0 wrong elements"
		else
			ok 1 "$(basename "$log"): $c: rows with wrong elements or no rows ($rows)"
		fi
	done
	grep -q '^# Wrong elements: 0 OK' "$log"
	ok $? "$(basename "$log"): total 0 wrong elements"
}

all="allreduce broadcast reduce allgather reduce_scatter alltoall sendrecv"
sweep="-b 4 -e 4M -f 7 -n 2 -w 1 -c 1"

echo "1..24"

run_ranks "$tmp/shm_float" all $sweep -t shm -r 1
rc=$?
ok $rc "shm float sum, blocking, 3 ranks: all ranks exit 0"
[ $rc -eq 0 ] || cat "$tmp/shm_float".* | sed 's/^/# /'
check_log "$tmp/shm_float.0" $all

run_ranks "$tmp/tcp_nb" all $sweep -t tcp -z 0 -d int32 -o max -r 2
rc=$?
ok $rc "tcp int32 max, nonblocking, 3 ranks: all ranks exit 0"
[ $rc -eq 0 ] || cat "$tmp/tcp_nb".* | sed 's/^/# /'
check_log "$tmp/tcp_nb.0" $all

run_ranks "$tmp/shm_bf16" allreduce reduce reduce_scatter -b 4 -e 600K -f 7 -n 1 -w 0 \
	-d bfloat16 -o avg -t shm -z 0
rc=$?
ok $rc "shm bfloat16 avg, nonblocking: all ranks exit 0"
[ $rc -eq 0 ] || cat "$tmp/shm_bf16".* | sed 's/^/# /'
grep -q '^# Wrong elements: 0 OK' "$tmp/shm_bf16.0"
ok $? "shm bfloat16 avg: 0 wrong elements"

run_ranks "$tmp/shm_i8" allreduce reduce_scatter -b 4 -e 600K -f 7 -n 1 -w 0 -d int8 -o prod -t shm
rc=$?
ok $rc "shm int8 prod: all ranks exit 0"
[ $rc -eq 0 ] || cat "$tmp/shm_i8".* | sed 's/^/# /'
grep -q '^# Wrong elements: 0 OK' "$tmp/shm_i8.0"
ok $? "shm int8 prod: 0 wrong elements"

run_ranks "$tmp/barrier" barrier -n 5 -t shm
rc=$?
ok $rc "barrier: all ranks exit 0"
grep -q '^ *0 *0 ' "$tmp/barrier.0"
ok $? "barrier: one row of 0 bytes"

exit $fail
