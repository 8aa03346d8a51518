#!/bin/bash
# SPDX-License-Identifier: MIT
# vm_lib.sh - shell helpers of the Soft-RoCE VM scripts, sourced by
# in_vm_suite.sh, in_vm_ll.sh and in_vm_rails.sh (inside the VM, from the
# build directory; $src is the source tree).

# vm_standalone_tap: ok/notok/diag for a script run alone (in_vm_ll.sh,
# in_vm_rails.sh), counting in $n and $nfail; the suite has its own, timed.
vm_standalone_tap() {
	n=0
	nfail=0
	ok() { n=$((n + 1)); echo "ok $n - $*"; }
	notok() { n=$((n + 1)); nfail=$((nfail + 1)); echo "not ok $n - $*"; }
	diag() { sed -e 's/^/#   /' "$@" | tail -n 40; }
}

# tap NAME LOG CMD...: a TAP test program, reported through the caller's
# ok/notok; a failing check, a SKIP or no check at all fails here
tap() {
	local name=$1 log=$2
	shift 2
	"$@" > "$log" 2>&1
	local rc=$?
	local nok
	nok=$(grep -c '^ok ' "$log")
	if [ $rc -eq 0 ] && ! grep -q '^not ok' "$log" && ! grep -q '^1\.\.0' "$log" && [ "$nok" -gt 0 ]; then
		ok "$name: $nok checks"
	else
		notok "$name (exit $rc)"
		grep -E '^(not ok|#|1\.\.0)' "$log" | head -n 40 | sed 's/^/#   /'
	fi
}

# rxe_pair_ready RXE_A NETDEV_A RXE_B NETDEV_B STEP: wait (100 tries, STEP
# seconds apart) until both rxe ports are ACTIVE with their link-local GIDs
# and no IPv6 address of either netdev is still tentative (DAD): a QP's move
# to RTR resolves the peer's address, and with a tentative source it failed
# with "Connection timed out" (once, test_ib_loop right after
# `ip link set veth0 mtu 9000`, 2026-11-30). Status 0 when ready.
rxe_pair_ready() {
	local i
	for i in $(seq 100); do
		grep -q '^fe80' "/sys/class/infiniband/$1/ports/1/gids/0" 2>/dev/null &&
			grep -q '^fe80' "/sys/class/infiniband/$3/ports/1/gids/0" 2>/dev/null &&
			grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null &&
			grep -q ACTIVE "/sys/class/infiniband/$3/ports/1/state" 2>/dev/null &&
			[ -z "$(ip -6 addr show dev "$2" tentative 2>/dev/null)" ] &&
			[ -z "$(ip -6 addr show dev "$4" tentative 2>/dev/null)" ] && return 0
		sleep "$5"
	done
	return 1
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
