#!/bin/sh
# SPDX-License-Identifier: MIT
# torch_bench.sh - the torch backend's figures in bench/RESULTS.md: all_reduce
# through "ibcoll" and "gloo" in the same processes (2 and 4 ranks, 8 B to
# 64 MiB), the 8 B latency of the binding against the C API (bench/ibc_bench,
# same ranks, run alternately with it, three times), and the DDP step time.
# Prints uptime before and after: figures are only worth keeping when the
# load stayed below 1.
#
# usage: bench/torch_bench.sh [BUILD_DIR]     (default: build)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
b=$(cd "${1:-$top/build}" && pwd)
pkg=$b/bindings/torch/pkg
[ -f "$pkg/PYTHON" ] || { echo "torch_bench: no torch binding in $b (configure --with-torch)" >&2; exit 1; }
py=$(cat "$pkg/PYTHON")
PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH}
OMP_NUM_THREADS=1
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH OMP_NUM_THREADS PYTHONDONTWRITEBYTECODE
echo "# $(uptime)"
for n in 2 4; do
	"$py" "$top/bench/torch_bench.py" allreduce "$n"
done
for rep in 1 2 3; do
	for n in 1 2 4; do
		echo "## latency round $rep, $n ranks"
		"$py" "$top/bench/torch_bench.py" latency "$n"
		"$b/bench/ibc_bench" allreduce --local "$n" -b 8 -e 8 -n 2000 -w 100 -R 7 -c 0 |
			sed -n '/^ *8 /s/^/C API ibc_bench: /p'
	done
done
for n in 2 4; do
	"$py" "$top/bench/torch_bench.py" ddp "$n"
done
echo "# $(uptime)"
