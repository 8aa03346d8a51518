#!/bin/bash
# SPDX-License-Identifier: MIT
# verbs_vm.sh - the verbs ("ib") part of the local scaling calibration
# (issue 11): boot the project's Soft-RoCE VM once (tests/rxe/rxe-vm.sh) and
# run bench/scaling/run.sh in it with IBC_SCALING_TRANSPORTS=ib: ibc_bench
# all-reduce and all-gather at 2, 3 and 4 ranks over IBC_TRANSPORT=ib
# (ibc_bench --local N, ranks alternating between rxe0 and rxe1, which are
# joined by a veth pair), alpha, beta, gamma of "ib" fitted at 2 ranks
# (fit_link.awk), and the 3- and 4-rank all-reduce bus bandwidth predicted
# from that fit next to the measured one. The results are merged into
# local-params.txt and local-measured.tsv (the shm, tcp and trainer lines
# of earlier runs are kept), and results/local.{txt,md} and the
# "ibc_scaling local" block of docs/scaling.md are regenerated.
#
# The VM emulates its 2 vCPUs (TCG): its figures say how this model's 2-rank
# fit predicts 3 and 4 ranks on this verbs path, nothing about InfiniBand
# hardware (docs/scaling.md).
#
# usage: bench/scaling/verbs_vm.sh [--no-docs]      (from anywhere; needs
#        a build with verbs: IBC_BUILDDIR, default build/ of the source tree)
# Environment (all optional; passed into the VM):
#   IBC_BENCH_ARGS      size sweep (default "-b 8 -e 2M -f 4 -n 5 -w 1 -c 0",
#                       sized for TCG: one 2 MiB all-reduce takes ~0.35 s)
#   IBC_SCALING_REPEAT  rounds, medians over them (default 3)
#   RUN_TIMEOUT         seconds per ibc_bench job (default 150)
#   RXEVM_TIMEOUT       seconds for the whole VM (default 540)
# Exit status: run.sh's; 77 when the VM cannot run here (rxe-vm.sh --check).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

if [ "${1:-}" = --in-vm ]; then
	# inside the VM, in $top (read-write); the rest of the host is read-only
	shift
	hostname rxe-vm 2>/dev/null || true
	echo "verbs_vm: in the VM: $(nproc) vCPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	ibv_devinfo -l 2>&1 | sed 's/^/verbs_vm: /'
	# which device each local rank takes (one 8-byte all-reduce, checked)
	IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=IB timeout 60 "$IBC_BUILDDIR/bench/ibc_bench" allreduce --local 2 \
		-t ib -b 8 -e 8 -n 1 -w 0 -c 1 2>&1 | grep -o 'rank [0-9] (local rank .*) uses rxe[0-9]*:[0-9]*' |
		sed 's/^/verbs_vm: /'
	IBC_SCALING_TRANSPORTS=ib IBC_SCALING_LAUNCH=local exec sh "$here/run.sh" --local-only "$@"
fi

for a in "$@"; do
	case $a in
	--no-docs) ;;
	-h|--help) sed -n '3,27p' "$0"; exit 0 ;;
	*) echo "verbs_vm.sh: unknown option $a" >&2; exit 2 ;;
	esac
done
if [ -z "${IBC_BUILDDIR:-}" ]; then
	IBC_BUILDDIR=$top/build
fi
IBC_BUILDDIR=$(cd "$IBC_BUILDDIR" && pwd) || exit 1
case $IBC_BUILDDIR in
"$top"/*) ;;
*) echo "verbs_vm.sh: IBC_BUILDDIR must lie inside $top (the VM writes only there)" >&2; exit 2 ;;
esac
for f in bench/ibc_bench bench/scaling/ibc_scaling; do
	[ -x "$IBC_BUILDDIR/$f" ] || { echo "verbs_vm.sh: $IBC_BUILDDIR/$f not built (make)" >&2; exit 1; }
done
"$top/tests/rxe/rxe-vm.sh" --check || exit $?

export IBC_BUILDDIR
export IBC_BENCH_ARGS=${IBC_BENCH_ARGS:--b 8 -e 2M -f 4 -n 5 -w 1 -c 0}
export IBC_SCALING_REPEAT=${IBC_SCALING_REPEAT:-3}
export RUN_TIMEOUT=${RUN_TIMEOUT:-150}
export RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-540}
export RXEVM_PASSENV="${RXEVM_PASSENV:-} IBC_BUILDDIR IBC_BENCH_ARGS IBC_SCALING_REPEAT RUN_TIMEOUT IBC_SCALING_RESULTS IBC_SCALING_PARAMS IBC_SCALING_MEASURED"
echo "verbs_vm: $(date -u +%Y-%m-%dT%H:%M:%SZ) host load average $(cut -d' ' -f1-3 /proc/loadavg), $(getconf _NPROCESSORS_ONLN) host CPUs"
echo "verbs_vm: sweep: $IBC_BENCH_ARGS, $IBC_SCALING_REPEAT rounds"
t0=$(date +%s)
cd "$top" || exit 1
"$top/tests/rxe/rxe-vm.sh" "$here/verbs_vm.sh" --in-vm "$@"
rc=$?
echo "verbs_vm: $(date -u +%Y-%m-%dT%H:%M:%SZ) VM exit $rc after $(($(date +%s) - t0)) s, host load average $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
