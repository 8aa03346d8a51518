#!/bin/bash
# SPDX-License-Identifier: MIT
# in_vm_rails.sh - multi-rail over verbs (IBC_IB_RAILS, src/transport/ib/
# ib_ops.c), inside the Soft-RoCE VM: sourced by in_vm_suite.sh (its ok/
# notok/diag helpers and $logs), or run alone from the build directory:
# tests/rxe/rxe-vm.sh "$src"/tests/rxe/in_vm_rails.sh
# A second veth pair with rxe2 (veth2) and rxe3 (veth3) is created for the
# test and removed after it, so each of 2 ranks has two devices with a wire
# between the pairs: rank 0 rxe0 + rxe2, rank 1 rxe1 + rxe3 (IBC_IB_HCA per
# rank). Checks:
#   - tests/ib/test_ib_comm rails with IBC_IB_RAILS=2: all-reduces in place,
#     out of place and of an odd count exact, 8 MiB p2p messages checked;
#     each rank's INFO lines name 2 rails with each rail's rate, and each
#     rail moved bytes both ways (the per-rail counts at destroy), the two
#     rails' bytes within 2x of each other (rxe on veth: equal rates, parts
#     split evenly);
#   - rails of different rates (rxe4/rxe5 on bonds of two veth pairs each
#     report 20 Gbit/s, rxe2/rxe3 on one veth 10; in device order rxe2 is
#     rail 0, the slower): exact, and rank 0's rxe4 moved 1.8-2.2x the bytes of
#     its rxe2 (parts of two thirds and one third);
#   - one rank offering 2 rails, the other 1: the connection runs 1 rail,
#     results exact;
#   - the two ends with different IBC_IB_STRIPE_MIN_BYTES: exact (the larger
#     applies on both);
#   - rank 1 killed during striped all-reduces: rank 0 fails within 30 s
#     with an error that names rank 1;
#   - the p2p rate over 2 rails against 1 rail (IBC_IB_HCA=rxe0 / rxe1),
#     alternating, printed (measured, not asserted: under TCG the devices
#     share the VM's 2 vCPUs with the ranks, see tests/rxe/README.md).
rails_alone=0
if [ -z "${logs:-}" ]; then # run alone
	set -u
	src=$(cd "$(dirname "$0")/../.." && pwd)
	logs=tests/rxe/logs
	mkdir -p "$logs"
	# shellcheck source=tests/rxe/vm_lib.sh
	. "$src/tests/rxe/vm_lib.sh"
	vm_standalone_tap
	export IBC_TRANSPORT=ib IBC_TEST_EXPECT_TRANSPORT=ib IBC_DEBUG=WARN IBC_TUNING_CACHE=off
	rails_alone=1
fi

rails_up() {
	ip link add veth2 type veth peer name veth3 && ip link set veth2 up && ip link set veth3 up &&
		rdma link add rxe2 type rxe netdev veth2 && rdma link add rxe3 type rxe netdev veth3 &&
		rxe_pair_ready rxe2 veth2 rxe3 veth3 0.2
}

rails_down() {
	rdma link delete rxe2 2>/dev/null
	rdma link delete rxe3 2>/dev/null
	ip link del veth2 2>/dev/null
}

# bond_up: rxe4/rxe5 on bonds of two veth pairs each (balance-rr): the bond reports the sum
# of its slaves' speeds, so these ports run at 20 Gbit/s where rxe2/rxe3 on one veth run at 10
bond_up() {
	modprobe bonding 2>/dev/null
	ip link add veth4 type veth peer name veth5 && ip link add veth6 type veth peer name veth7 &&
		ip link add bnda type bond mode balance-rr && ip link add bndb type bond mode balance-rr &&
		ip link set veth4 master bnda && ip link set veth6 master bnda &&
		ip link set veth5 master bndb && ip link set veth7 master bndb || return 1
	local v
	for v in veth4 veth5 veth6 veth7 bnda bndb; do
		ip link set "$v" up || return 1
	done
	rdma link add rxe4 type rxe netdev bnda && rdma link add rxe5 type rxe netdev bndb &&
		rxe_pair_ready rxe4 bnda rxe5 bndb 0.2
}

bond_down() {
	rdma link delete rxe4 2>/dev/null
	rdma link delete rxe5 2>/dev/null
	ip link del bnda 2>/dev/null
	ip link del bndb 2>/dev/null
	ip link del veth4 2>/dev/null
	ip link del veth6 2>/dev/null
}

# rails_run NAME HCA0 HCA1 RAILS0 RAILS1 [ENV0 [ENV1]]: test_ib_comm rails on 2 ranks, logs in
# $logs/rails-NAME; ENV0/ENV1: more VAR=VALUE settings for rank 0 / rank 1
rails_run() {
	local d=$logs/rails-$1
	RANK_WRAP_0="env IBC_IB_HCA=$2 IBC_IB_RAILS=$4 ${6:-}" RANK_WRAP_1="env IBC_IB_HCA=$3 IBC_IB_RAILS=$5 ${7:-}" \
		IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=IB IBC_TIMEOUT_MS=120000 \
		"$src"/tests/rxe/run_ranks.sh 2 300 "$d" tests/ib/test_ib_comm rails
}

# dev_bytes DIR RANK DEV: "sent received" bytes of the rank's rail on device DEV (INFO at destroy)
dev_bytes() {
	sed -n "s/.*ib: rank $2 rail [0-9] $3:[0-9]*: [0-9]* messages or parts, \([0-9]*\) bytes sent, \([0-9]*\) bytes received.*/\1 \2/p" \
		"$1/rank.$2.out" | tail -n 1
}

# rails_bytes DIR RANK RAIL: "sent received" bytes of that rail from the rank's INFO line at destroy
rails_bytes() {
	sed -n "s/.*ib: rank $2 rail $3 [^ ]*: [0-9]* messages or parts, \([0-9]*\) bytes sent, \([0-9]*\) bytes received.*/\1 \2/p" \
		"$1/rank.$2.out" | tail -n 1
}

if ! rails_up; then
	notok "multi-rail: a second veth pair with rxe2/rxe3 could not be set up"
	ip link; rdma link show
	rails_down
else
	rails_run two "=rxe0,rxe2" "=rxe1,rxe3" 2 2
	rc=$?
	d=$logs/rails-two
	good=1
	why=""
	for r in 0 1; do
		grep -q "rank $r: rails: all exact" "$d/rank.$r.out" || { good=0; why="$why rank $r not exact;"; }
		grep -Eq "ib: rank $r to peer rank $((1 - r)): 2 rails \([^ ]+ -> [^ ]+ [1-9][0-9]* Gbit/s, [^ ]+ -> [^ ]+ [1-9][0-9]* Gbit/s;" "$d/rank.$r.out" ||
			{ good=0; why="$why rank $r: no 2-rail connection line with each rail's (known) rate;"; }
		b0=$(rails_bytes "$d" $r 0)
		b1=$(rails_bytes "$d" $r 1)
		read -r s0 r0 <<< "$b0"
		read -r s1 r1 <<< "$b1"
		if [ -z "${r0:-}" ] || [ -z "${r1:-}" ] || [ "$s0" -le 0 ] || [ "$r0" -le 0 ] ||
			[ "$s1" -le 0 ] || [ "$r1" -le 0 ]; then
			good=0
			why="$why rank $r: rail counts '$b0' / '$b1';"
		elif [ $((s0 + r0)) -gt $((2 * (s1 + r1))) ] || [ $((s1 + r1)) -gt $((2 * (s0 + r0))) ]; then
			good=0
			why="$why rank $r: rails uneven ($b0 / $b1);"
		fi
	done
	if [ $rc -eq 0 ] && [ $good -eq 1 ]; then
		ok "multi-rail: 2 ranks x 2 rails (rxe0+rxe2 <-> rxe1+rxe3): exact; rank 0 rails sent/received $(rails_bytes "$d" 0 0) and $(rails_bytes "$d" 0 1) bytes; $(grep -m1 -o 'ib: rank 0 to peer rank 1: 2 rails ([^;]*' "$d/rank.0.out")"
	else
		notok "multi-rail: 2 ranks x 2 rails (exit $rc;$why)"
		for f in "$d"/rank.*.out; do diag "$f"; done
	fi

	# rails of different rates: rail 0 on the 20 Gbit/s bonds, rail 1 on veth's 10: parts
	# of two thirds and one third (ibc_ib_stripe_plan()), so rail 0 carries about twice the bytes
	if ! bond_up; then
		notok "multi-rail: bonds of two veth pairs with rxe4/rxe5 could not be set up"
		ip link; rdma link show
	else
		rails_run rates "=rxe4,rxe2" "=rxe5,rxe3" 2 2
		rc=$?
		d=$logs/rails-rates
		# the rails in device order (rxe2 first here, so rail 0 is the slower): by device name
		read -r s0 r0 <<< "$(dev_bytes "$d" 0 rxe4)"
		read -r s1 r1 <<< "$(dev_bytes "$d" 0 rxe2)"
		# rxe4's bytes / rxe2's in hundredths: 200 for parts of 2/3 and 1/3 (rail 0 also
		# takes the small messages, a few KB)
		ratio=$(( (${s0:-0} + ${r0:-0}) * 100 / ( ${s1:-0} + ${r1:-0} > 0 ? ${s1:-0} + ${r1:-0} : 1 ) ))
		if [ $rc -eq 0 ] && grep -q "rank 0: rails: all exact" "$d/rank.0.out" &&
			grep -q "rank 1: rails: all exact" "$d/rank.1.out" &&
			grep "ib: rank 0 to peer rank 1: 2 rails (" "$d/rank.0.out" | grep -q "rxe4:1 -> rxe5:1 20 Gbit/s" &&
			grep "ib: rank 0 to peer rank 1: 2 rails (" "$d/rank.0.out" | grep -q "rxe2:1 -> rxe3:1 10 Gbit/s" &&
			[ "$ratio" -ge 180 ] && [ "$ratio" -le 220 ]; then
			ok "multi-rail: rails of 20 and 10 Gbit/s (rxe4 on a bond of two veths, rxe2 on one): exact; rank 0's rxe4 moved $ratio/100 of rxe2's bytes ($s0+$r0 and $s1+$r1)"
		else
			notok "multi-rail: rails of 20 and 10 Gbit/s (exit $rc, rxe4 / rxe2 bytes x100 = $ratio, want 180-220)"
			for f in "$d"/rank.*.out; do diag "$f"; done
		fi
	fi
	bond_down

	rails_run uneven "=rxe0,rxe2" "=rxe1" 2 1
	rc=$?
	d=$logs/rails-uneven
	if [ $rc -eq 0 ] && grep -q "rank 0: rails: all exact" "$d/rank.0.out" &&
		grep -q "rank 1: rails: all exact" "$d/rank.1.out" &&
		grep -q "ib: rank 0 to peer rank 1: 1 rail (.*the peer offered 1)" "$d/rank.0.out"; then
		ok "multi-rail: rank 0 offers 2 rails, rank 1 one: 1 rail, exact"
	else
		notok "multi-rail: 2 rails against 1 (exit $rc)"
		for f in "$d"/rank.*.out; do diag "$f"; done
	fi

	# the two ends with different IBC_IB_STRIPE_MIN_BYTES: they agree on the larger
	# (1 MiB), so the all-reduces' 2 MiB messages are cut alike, not reported as mismatched
	rails_run stripemin "=rxe0,rxe2" "=rxe1,rxe3" 2 2 IBC_IB_STRIPE_MIN_BYTES=65536 IBC_IB_STRIPE_MIN_BYTES=1048576
	rc=$?
	d=$logs/rails-stripemin
	if [ $rc -eq 0 ] && grep -q "rank 0: rails: all exact" "$d/rank.0.out" &&
		grep -q "rank 1: rails: all exact" "$d/rank.1.out" &&
		[ "$(sed -n 's/.*ib: rank 0: \([0-9]*\) messages striped over the rails.*/\1/p' "$d/rank.0.out")" -gt 0 ]; then
		ok "multi-rail: ranks with stripe minimums of 64 KiB and 1 MiB cut messages alike, exact ($(sed -n 's/.*ib: rank 0: \([0-9]*\) messages striped.*/\1/p' "$d/rank.0.out") striped)"
	else
		notok "multi-rail: different stripe minimums (exit $rc)"
		for f in "$d"/rank.*.out; do diag "$f"; done
	fi

	# rank 1 killed while striped all-reduces run: rank 0 fails in bounded time naming it
	d=$logs/rails-kill
	RANK_WRAP_0="env IBC_IB_HCA==rxe0,rxe2 IBC_IB_RAILS=2" RANK_WRAP_1="env IBC_IB_HCA==rxe1,rxe3 IBC_IB_RAILS=2" \
		IBC_IB_TIMEOUT=14 IBC_TEST_ITERS=1000000 IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=IB \
		kill_rank1_mid_loop 2 "$d"
	if [ -n "$victim" ] && grep -q "ib: rank 0 to peer rank 1: 2 rails" "$d/rank.0.out" &&
		grep 'FAILED' "$d/rank.0.out" | grep -q 'rank 1' && [ $dt -lt 30000 ]; then
		ok "multi-rail: rank 1 killed mid striped all-reduce: rank 0 fails in $dt ms naming it: $(grep -m1 -o 'FAILED.*' "$d/rank.0.out" | cut -c1-160)"
	else
		notok "multi-rail: rank 1 killed mid striped all-reduce (rank 0 done after $dt ms)"
		for f in "$d"/rank.*.out; do diag "$f"; done
	fi

	# the rate, alternating 1 and 2 rails, twice
	rates=""
	for round in 1 2; do
		for nr in 1 2; do
			if [ $nr -eq 1 ]; then
				rails_run rate$nr "=rxe0" "=rxe1" 1 1
			else
				rails_run rate$nr "=rxe0,rxe2" "=rxe1,rxe3" 2 2
			fi
			r=$(sed -n 's/.*p2p: .* ms, \([0-9.]*\) MB\/s.*/\1/p' "$logs/rails-rate$nr/rank.1.out")
			rates="$rates ${nr}rail:${r:-failed}"
		done
	done
	echo "# multi-rail p2p rate, 8 MiB messages, MB/s (1e6 B/s), alternating:$rates"
	case "$rates" in
	*failed*) notok "multi-rail: p2p rate runs ($rates)" ;;
	*) ok "multi-rail: p2p rate over 1 and 2 rails measured:$rates" ;;
	esac
	rails_down
fi

if [ "$rails_alone" = 1 ]; then
	echo "1..$n"
	[ "$nfail" -eq 0 ]
fi
