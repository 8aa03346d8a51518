#!/bin/sh
# SPDX-License-Identifier: MIT
# test_p2p.sh - tests/coll/p2p_check (sends and receives in flight together)
# over shm and tcp, with and without the progress thread, on 2, 3 and 5
# ranks; 16 MiB messages, beyond what any transport buffers, so a send run
# on its own before the matching receive is posted would hang (bounded here
# by IBC_TIMEOUT_MS=20000 and the launcher's 90 s).
b=$top_builddir
run=$top_srcdir/tests/scripts/run_local_ranks.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "1..8"
n=0
for cfg in "2 shm 1" "3 shm 1" "5 shm 1" "2 tcp 1" "3 tcp 1" "2 shm 0" "3 tcp 0" "2 shm 1 -n 1"; do
	set -- $cfg
	nr=$1 tp=$2 th=$3
	shift 3
	n=$((n + 1))
	start=$(date +%s)
	IBC_TRANSPORT=$tp IBC_PROGRESS_THREAD=$th IBC_TIMEOUT_MS=20000 \
		"$run" -n "$nr" -t 90 -- "$b/tests/coll/p2p_check" -r 2 "$@" >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	npass=$(grep -c ': PASS: ' "$log")
	desc="$nr ranks, $tp, progress thread $th${1:+, $*}: 4 patterns pass on every rank ($secs s)"
	if [ "$rc" -eq 0 ] && [ "$npass" -eq $((4 * nr)) ]; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc (rc $rc, $npass PASS lines)"
		sed 's/^/# /' "$log" | tail -20
	fi
done
