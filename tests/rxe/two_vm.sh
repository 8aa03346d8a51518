#!/bin/bash
# SPDX-License-Identifier: MIT
# two_vm.sh - a true two-host run over RoCE v2: two Soft-RoCE VMs joined by a
# qemu socket network on 127.0.0.1 (eth0 198.51.100.11 and .12, each with
# its own rxe_eth), one rank in each, a 2-rank all-reduce of a small buffer
# with exact results, over verbs chosen automatically (IBC_TRANSPORT=auto). TAP out; SKIP when the VM's
# prerequisites are missing. Robust start: the listening VM's socket must be
# open before the connecting VM starts (qemu exits at once otherwise), and a
# connecting VM that fails to attach is restarted, at most 3 times; every
# wait is bounded (RXEVM_TIMEOUT 420 s per VM).
set -u
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${top_builddir:-.}
reason=$("$srcdir/tests/rxe/rxe-vm.sh" --check 2>&1)
rc=$?
if [ $rc -eq 77 ]; then
	echo "1..0 # SKIP ${reason#rxe-vm: SKIP: }"
	exit 0
fi
cd "$builddir" || exit 1
logs=tests/rxe/logs/two_vm
mkdir -p "$logs"
rm -f "$logs"/*
export TWO_VM_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export RXEVM_PASSENV="TWO_VM_SECRET TWO_VM_COUNT" RXEVM_SMP=1 RXEVM_MEM=1024
export RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-420}
t0=$(date +%s)

listening() { # is 127.0.0.1:$1 in LISTEN state on the host?
	local hex
	hex=$(printf '%04X' "$1")
	grep -q ":$hex 00000000:0000 0A" /proc/net/tcp 2>/dev/null
}
port=
for try in 1 2 3 4 5 6 7 8; do
	p=$((30000 + RANDOM % 20000))
	listening $p || { port=$p; break; }
done
echo "1..3"
RXEVM_SOCKET=listen:$port RXEVM_ETH_ADDR=198.51.100.11/24 \
	"$srcdir/tests/rxe/rxe-vm.sh" "$srcdir/tests/rxe/two_vm_rank.sh" 0 > "$logs/rank0.out" 2>&1 &
pa=$!
for i in $(seq 300); do
	listening "$port" && break
	kill -0 $pa 2>/dev/null || break
	sleep 0.1
done
rcb=125
for attempt in 1 2 3; do
	if ! listening "$port"; then
		echo "# the listening VM's socket 127.0.0.1:$port is not open"
		break
	fi
	RXEVM_SOCKET=connect:$port RXEVM_ETH_ADDR=198.51.100.12/24 \
		"$srcdir/tests/rxe/rxe-vm.sh" "$srcdir/tests/rxe/two_vm_rank.sh" 1 > "$logs/rank1.out" 2>&1
	rcb=$?
	# qemu exits at once when it cannot attach to the socket: retry that, nothing else
	if [ $rcb -eq 125 ] && grep -qiE 'connection refused|could not connect|socket' "$logs/rank1.out" &&
		! grep -q '^# rank 1' "$logs/rank1.out"; then
		echo "# attempt $attempt: the connecting VM could not attach to 127.0.0.1:$port; retrying"
		sleep 2
		continue
	fi
	break
done
wait $pa
rca=$?
if [ $rca -eq 0 ] && grep -q 'exact' "$logs/rank0.out"; then
	echo "ok 1 - VM A (rank 0, 198.51.100.11): $(grep -m1 -o 'allreduce of .*' "$logs/rank0.out")"
else
	echo "not ok 1 - VM A (rank 0) exit $rca"
	sed 's/^/#   /' "$logs/rank0.out" | tail -n 40
fi
if [ $rcb -eq 0 ] && grep -q 'exact' "$logs/rank1.out"; then
	echo "ok 2 - VM B (rank 1, 198.51.100.12): $(grep -m1 -o 'allreduce of .*' "$logs/rank1.out")"
else
	echo "not ok 2 - VM B (rank 1) exit $rcb"
	sed 's/^/#   /' "$logs/rank1.out" | tail -n 40
fi
if grep -q 'transport ib' "$logs/rank0.out" &&
	grep -q 'gid idx [0-9]* (RoCE v2 IPv4-mapped)' "$logs/rank0.out" &&
	grep -q 'gid idx [0-9]* (RoCE v2 IPv4-mapped)' "$logs/rank1.out"; then
	echo "ok 3 - IBC_TRANSPORT=auto chose ib between the VMs, with RoCE v2 IPv4-mapped GIDs chosen automatically on rxe_eth"
else
	echo "not ok 3 - transport/GID lines missing"
	grep -h -E 'transport|gid idx' "$logs"/rank*.out | sed 's/^/#   /'
fi
echo "# two VMs: $(($(date +%s) - t0)) s wall"
[ $rca -eq 0 ] && [ $rcb -eq 0 ]
