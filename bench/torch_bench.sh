#!/bin/sh
# SPDX-License-Identifier: MIT
# torch_bench.sh - the torch backend's figures in bench/RESULTS.md: all_reduce
# through "ibcoll" and "gloo" in the same processes (2 and 4 ranks, 8 B to
# 64 MiB), the 8 B latency of the binding against the C API (timed in C++ on
# the same communicator, and bench/ibc_bench's blocking and nonblocking calls;
# three times), and the DDP step time. Prints uptime before and after: the
# figures are only comparable to a quiet machine's when the load stayed low.
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
		for z in 1 0; do
			"$b/bench/ibc_bench" allreduce --local "$n" -b 8 -e 8 -n 2000 -w 100 -R 7 \
				-c 0 -z $z | sed -n "/^ *8 /s/^/ibc_bench -z $z: /p"
		done
	done
done
# compute-bound (8 x 64 tokens per rank) and communication-bound (1 x 16) steps
for n in 2 4; do
	"$py" "$top/bench/torch_bench.py" ddp "$n" 7 8 64
	"$py" "$top/bench/torch_bench.py" ddp "$n" 7 1 16
done
echo "# $(uptime)"
