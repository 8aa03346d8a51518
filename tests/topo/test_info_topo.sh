#!/bin/sh
# SPDX-License-Identifier: MIT
# test_info_topo.sh - `ibc_info --topo` on this machine (loads and prints)
# and on the DGX-like XML machine (exact tree lines and per-rank choices).
info="$top_builddir/tools/ibc_info"
xml="$top_srcdir/tests/topo/dgx-h100.xml"
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
has() { # has TEXT LINE DESCRIPTION: TEXT contains LINE as a whole line
	if printf '%s\n' "$1" | grep -qxF -- "$2"; then ok "$3"; else nok "$3: no line '$2'"; fi
}

out=$(IBC_TOPO_FILE= "$info" --topo 2>&1) && ok "ibc_info --topo runs on this machine" ||
	nok "ibc_info --topo runs on this machine: $out"
printf '%s\n' "$out" | sed 's/^/# /'
printf '%s\n' "$out" | grep -q '^topology: ' && ok "prints the topology source" ||
	nok "prints the topology source"
printf '%s\n' "$out" | grep -q 'NUMANode 0: CPUs ' && ok "prints NUMA node 0" ||
	nok "prints NUMA node 0"

if ! "$info" --build | grep -q 'hwloc          : yes'; then
	out=$(IBC_TOPO_FILE="$xml" "$info" --topo 2>&1) && ok "flat build: runs with IBC_TOPO_FILE" ||
		nok "flat build: runs with IBC_TOPO_FILE"
	has "$out" "topology: flat (built without hwloc)" "flat build: says it is flat"
	echo "1..$n"
	exit $fail
fi

out=$(IBC_TOPO_FILE="$xml" "$info" --topo 2>&1) && ok "ibc_info --topo runs on the DGX XML" ||
	nok "ibc_info --topo runs on the DGX XML: $out"
has "$out" "topology: hwloc xml $xml (not this machine)" "source line"
has "$out" "summary: 2 packages, 2 NUMA nodes, 16 cores, 32 PUs, 8 NICs, 8 GPUs (CUDA order)" "summary line"
has "$out" "  Package 0: 8 cores, CPUs 0-7,16-23" "package 0"
has "$out" "    NUMANode 1: CPUs 8-15,24-31, 65536 MiB" "NUMA node 1"
has "$out" "    HostBridge 0000:[9a-a1]" "host bridge of GPU 4"
has "$out" "        PCIBridge 0000:9b:00.0 -> [9c-a1]" "switch upstream port of GPU 4"
has "$out" "            GPU 4 0000:9d:00.0 cuda4 NVIDIA H100 80GB HBM3" "GPU 4"
has "$out" "            NIC mlx5_4 0000:9e:00.0 (net ibp158s0)" "NIC mlx5_4"
has "$out" "this process's GPU: no GPU (no current CUDA context)" "no CUDA context: no GPU"
# local ranks without GPU: the spread order test_topo_xml asserts (sockets first, then cards);
# the XML is not this machine, so no progress thread is bound
nobind="progress thread: topology is not this machine (IBC_TOPO_FILE): no binding"
block=$(printf '%s\n' "$out" | sed -n '/^local ranks 8:$/,/^# a rank whose GPU/p')
r=0
for nic in 0 4 1 5 2 6 3 7; do
	has "$block" "  rank $r: NIC mlx5_$nic; $nobind" "8 local ranks, no GPU: rank $r on mlx5_$nic"
	r=$((r + 1))
done
[ "$(printf '%s\n' "$out" | grep -c '^local ranks ')" = 8 ] && ok "local rank counts 1 to 8" ||
	nok "local rank counts 1 to 8"
[ "$(printf '%s\n' "$out" | grep -c '^  rank ')" = 36 ] && ok "36 rank lines (1+2+...+8)" ||
	nok "36 rank lines"
g=0
while [ $g -lt 8 ]; do
	has "$out" "  GPU $g: NIC mlx5_$g PIX; $nobind" "a rank driving GPU $g uses mlx5_$g (PIX)"
	g=$((g + 1))
done
out=$(IBC_TOPO_GPU=6 IBC_TOPO_FILE="$xml" "$info" --topo 2>&1)
has "$out" "this process's GPU: GPU 6 from IBC_TOPO_GPU" "IBC_TOPO_GPU=6 is this process's GPU"
block=$(printf '%s\n' "$out" | sed -n '/^local ranks 2:$/,/^local ranks 3:$/p')
has "$block" "  rank 1: NIC mlx5_6 PIX; $nobind" "with GPU 6, every local rank takes mlx5_6"

out=$(IBC_TOPO_FILE="$top_srcdir/tests/topo/one-socket-nogpu.xml" "$info" --topo 2>&1)
has "$out" "summary: 1 packages, 1 NUMA nodes, 8 cores, 16 PUs, 3 NICs, 0 GPUs" "no GPU: summary without an order"
block=$(printf '%s\n' "$out" | sed -n '/^local ranks 3:$/,/^local ranks 4:$/p')
has "$block" "  rank 0: NIC mlx5_0; $nobind" "no GPU, 3 ranks: rank 0"
has "$block" "  rank 1: NIC mlx5_2; $nobind" "no GPU, 3 ranks: rank 1 on the other card"
has "$block" "  rank 2: NIC mlx5_1; $nobind" "no GPU, 3 ranks: rank 2"

# the fake 2-NUMA machine as this system: the plan binds (needs CPUs 0 and 1)
if [ "$(nproc)" -ge 2 ] && taskset -c 0,1 true 2>/dev/null; then
	out=$(taskset -c 0,1 env HWLOC_THISSYSTEM=1 IBC_TOPO_FILE="$top_srcdir/tests/topo/fake-2numa-2pu.xml" "$info" --topo 2>&1)
	block=$(printf '%s\n' "$out" | sed -n '/^local ranks 2:$/,/^local ranks 3:$/p')
	has "$block" "  rank 0: NIC mlx5_0; progress thread: mlx5_0 is on NUMA node 0 (CPUs 0): binding to CPUs 0" "fake 2-NUMA: rank 0 bound to CPU 0"
	has "$block" "  rank 1: NIC mlx5_1; progress thread: mlx5_1 is on NUMA node 1 (CPUs 1): binding to CPUs 1" "fake 2-NUMA: rank 1 bound to CPU 1"
	out=$(taskset -c 0,1 env IBC_BIND=0 HWLOC_THISSYSTEM=1 IBC_TOPO_FILE="$top_srcdir/tests/topo/fake-2numa-2pu.xml" "$info" --topo 2>&1)
	has "$out" "  rank 0: NIC mlx5_0; progress thread: IBC_BIND=0: thread affinity left alone" "IBC_BIND=0 shown"
else
	echo "# fewer than 2 CPUs usable: binding lines not checked"
fi

out=$(IBC_TOPO_FILE=/nonexistent.xml "$info" --topo 2>&1) && nok "a missing IBC_TOPO_FILE fails" ||
	ok "a missing IBC_TOPO_FILE fails"
printf '%s\n' "$out" | grep -q "cannot load the topology: IBC_TOPO_FILE=/nonexistent.xml" &&
	ok "and says why" || nok "and says why: $out"
echo "1..$n"
exit $fail
