#!/bin/bash
# SPDX-License-Identifier: MIT
# vm_lib.sh - shell helpers of the Soft-RoCE VM scripts, sourced by
# in_vm_suite.sh, in_vm_ll.sh and in_vm_rails.sh (inside the VM, from the
# build directory; $src is the source tree).

# vm_standalone_tap: ok/notok/diag/tap for a script run alone (in_vm_ll.sh,
# in_vm_rails.sh), counting in $n and $nfail; the suite has its own, timed.
vm_standalone_tap() {
	n=0
	nfail=0
	ok() { n=$((n + 1)); echo "ok $n - $*"; }
	notok() { n=$((n + 1)); nfail=$((nfail + 1)); echo "not ok $n - $*"; }
	diag() { sed -e 's/^/#   /' "$@" | tail -n 40; }
	# tap NAME LOG CMD...: a TAP test program; a failing check or a SKIP fails here
	tap() {
		local name=$1 log=$2
		shift 2
		"$@" > "$log" 2>&1
		local rc=$?
		if [ $rc -eq 0 ] && ! grep -q '^not ok' "$log" && ! grep -q '^1\.\.0' "$log"; then
			ok "$name: $(grep -c '^ok ' "$log") checks"
		else
			notok "$name (exit $rc)"
			grep -E '^(not ok|#|1\.\.0)' "$log" | head -n 40 | sed 's/^/#   /'
		fi
	}
}

# kill_rank1_mid_loop N DIR: run N ranks of `tests/ib/test_ib_comm loop` with
# run_ranks.sh (logs in DIR, the environment and RANK_WRAP_* from the
# caller), wait until every rank printed READY (at most 60 s), then SIGKILL
# rank 1's own process (its comm name and IBC_RANK=1, not the timeout(1)
# around it) and wait for the job. Sets $victim (its pid, empty when none
# was found) and $dt (ms from the kill until every rank had exited).
kill_rank1_mid_loop() {
	local nr=$1 dir=$2 i rpid t_kill
	"$src"/tests/rxe/run_ranks.sh "$nr" 120 "$dir" tests/ib/test_ib_comm loop &
	rpid=$!
	for i in $(seq 600); do
		[ "$(cat "$dir"/rank.*.out 2>/dev/null | grep -c READY)" -ge "$nr" ] && break
		sleep 0.1
	done
	sleep 1
	victim=$(pgrep -x test_ib_comm | while read -r p; do
		tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx 'IBC_RANK=1' && echo "$p"; done | head -1)
	t_kill=$(date +%s%N)
	[ -n "$victim" ] && kill -9 "$victim"
	wait $rpid
	dt=$((($(date +%s%N) - t_kill) / 1000000))
}
