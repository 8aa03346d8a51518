#!/bin/sh
# SPDX-License-Identifier: MIT
# test_vcoll.sh - tests/coll/vcoll_check (gather, scatter, allgatherv,
# alltoallv, tagged and any-source receives, a tagged ring as a new
# communicator's first operations, tagged receives of one source and tag
# matched in issue order, groups, refused misuse) with
# exact values on 1, 2, 3, 5 and 8 ranks over shm and tcp, with and without
# the progress thread. Without it (IBC_PROGRESS_THREAD=0) the tagorder
# pattern is left out: a wait there runs every send and receive in flight to
# the end, and tagorder waits on one receive while the next one's message
# comes only after that wait (docs/design.md). Every wait is bounded
# (IBC_TIMEOUT_MS=20000, 120 s per launch).
b=$top_builddir
run=$top_srcdir/tests/scripts/run_local_ranks.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
all="rooted allgatherv alltoallv tagged tagring tagorder group misuse"
cfgs="1 shm 1|2 shm 1|3 shm 1|5 shm 1|8 shm 1|2 tcp 1|3 tcp 1|5 tcp 1|3 shm 0|2 tcp 0"
echo "1..$(echo "$cfgs" | tr '|' '\n' | wc -l)"
n=0
echo "$cfgs" | tr '|' '\n' | while read -r nr tp th; do
	n=$((n + 1))
	start=$(date +%s)
	pats=$all
	[ "$th" = 0 ] && pats=$(echo "$all" | sed 's/ tagorder//')
	npat=$(echo "$pats" | wc -w)
	# shellcheck disable=SC2086 # one argument per pattern
	IBC_TRANSPORT=$tp IBC_PROGRESS_THREAD=$th IBC_TIMEOUT_MS=20000 \
		"$run" -n "$nr" -t 120 -- "$b/tests/coll/vcoll_check" $pats >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	npass=$(grep -c ': PASS: ' "$log")
	desc="$nr ranks, $tp, progress thread $th: $npat patterns pass on every rank ($secs s)"
	if [ "$rc" -eq 0 ] && [ "$npass" -eq $((npat * nr)) ]; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc (rc $rc, $npass PASS lines)"
		grep -v ': PASS: ' "$log" | sed 's/^/# /' | tail -20
	fi
done
