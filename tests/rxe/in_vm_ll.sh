#!/bin/bash
# SPDX-License-Identifier: MIT
# in_vm_ll.sh - the LL protocol over verbs (src/transport/ib, ib.h "LL
# path"), inside the Soft-RoCE VM: sourced by in_vm_suite.sh (its ok/notok/
# tap/diag helpers and $logs), or run alone from the build directory to
# try only these cases: tests/rxe/rxe-vm.sh "$src"/tests/rxe/in_vm_ll.sh
#   - tests/ib/test_ib_loop's LL section runs in the suite's test_ib_loop;
#   - coll_check all-reduce with IBC_PROTO=ll on 2 and 3 ranks over ib,
#     counts below, at and across IBC_LL_MAX_BYTES (1024 B), ring and rd;
#   - the same with IBC_LL_MAX_BYTES=64 (a 16-line ring: wrap-around every
#     few messages) and a 1000-iteration 8-byte all-reduce stream, checked;
#   - test_tree_coll on 2 ranks over ib: every algorithm with both
#     protocols forced, and a protocol mismatch (rank 0 LL, rank 1
#     rendezvous) that must give IBC_ERR_INVALID_USAGE on both ranks.
if [ -z "${logs:-}" ]; then # run alone
	set -u
	src=$(cd "$(dirname "$0")/../.." && pwd)
	logs=tests/rxe/logs/ll
	mkdir -p "$logs"
	# shellcheck source=tests/rxe/vm_lib.sh
	. "$src/tests/rxe/vm_lib.sh"
	vm_standalone_tap
	export IBC_TRANSPORT=ib IBC_TEST_EXPECT_TRANSPORT=ib IBC_DEBUG=WARN
	ll_alone=1
	if [ "${LL_WITH_LOOP:-1}" = 1 ]; then
		tap "verbs endpoint tests incl. the LL path (tests/ib/test_ib_loop)" "$logs/loop.log" \
			tests/ib/test_ib_loop
	fi
fi

# ll_matrix NAME NRANKS ENV... : coll_check all-reduce with LL forced, every rank passes
ll_matrix() {
	local name=$1 nr=$2 log
	shift 2
	log="$logs/ll_$name.log"
	# counts of float32/int32 elements: 4 B .. 4 KiB, across the 1024-byte limit
	env IBC_PROTO=ll IBC_TIMEOUT_MS=120000 "$@" \
		"$src"/tests/scripts/run_local_ranks.sh -n "$nr" -l env -t 300 -- \
		tests/coll/coll_check -c allreduce -n 1,2,7,16,64,255,256,257,300,1000 \
		-d float32,bfloat16 -o sum,max -p out -m blocking,nonblocking \
		--no-errors --no-bf16-case > "$log" 2>&1
	local rc=$?
	local npass
	npass=$(grep -c '^coll_check rank .*: PASS:' "$log")
	if [ $rc -eq 0 ] && [ "$npass" -eq "$nr" ]; then
		ok "LL all-reduce (coll_check, IBC_PROTO=ll) on $nr ranks over ib, $name ($*): $(grep -m1 -o 'coll_check rank 0/.*' "$log" | cut -c1-100)"
	else
		notok "LL all-reduce on $nr ranks over ib, $name (status $rc, $npass of $nr ranks passed)"
		grep -E '^FAIL|timeout|^coll_check rank|ERROR' "$log" | head -20 | sed 's/^/#   /'
		tail -n 8 "$log" | sed 's/^/#   /'
	fi
}
# sized for the suite's budget (TCG): about 1/3 of the checks of a full
# dtype x place sweep; all four ran at 6241 checks each when this was written
ll_matrix ring2 2 IBC_ALGO=ring
ll_matrix rd3 3 IBC_ALGO=rd
ll_matrix ring3-max64 3 IBC_ALGO=ring IBC_LL_MAX_BYTES=64

# a long stream of 8-byte all-reduces by LL (16-line rings wrap every 16
# messages), the last one checked exactly by ibc_bench -c 1
log="$logs/ll_stream.log"
if IBC_PROTO=ll IBC_ALGO=rd IBC_LL_MAX_BYTES=64 IBC_TIMEOUT_MS=120000 \
	timeout -k 5 300 bench/ibc_bench --local 3 -t ib allreduce -b 8 -e 8 -n 1000 -w 10 -c 1 \
	> "$log" 2>&1 && grep -q '^# Wrong elements: 0 OK' "$log"; then
	ok "LL stream: 1010 8-byte all-reduces on 3 ranks over ib (IBC_LL_MAX_BYTES=64), result exact"
else
	notok "LL stream of 8-byte all-reduces on 3 ranks over ib"
	diag "$log"
fi

# every algorithm x protocol forced, and the protocol mismatch, over ib
tap "test_tree_coll on 2 ranks over ib (all algorithms, simple and LL, protocol mismatch)" \
	"$logs/ll_tree2.log" timeout -k 5 400 tests/tree/test_tree_coll 2 ib
if ! grep -q '^ok .*protocol mismatch' "$logs/ll_tree2.log"; then
	notok "test_tree_coll over ib ran the protocol-mismatch case"
fi

if [ -n "${ll_alone:-}" ]; then
	echo "1..$n"
	echo "# LL cases: $n tests, $nfail failed"
	[ $nfail -eq 0 ]
fi
