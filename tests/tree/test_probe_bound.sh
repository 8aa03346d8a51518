#!/bin/sh
# SPDX-License-Identifier: MIT
# test_probe_bound.sh - the tuner's init probe stays under its bound: on an
# idle 2-rank communicator (shm and tcp, two runs each) the probe time that
# IBC_DEBUG_SUBSYS=TUNING logs ("probe X ms": measurement and agreement,
# src/tune/tuner.c tuner_probe()) is below 50 ms. The bound holds only when
# a round trip is short, so the test SKIPs when the 1-minute load average
# exceeds the number of cores (docs/algorithms.md, "Where the coefficients
# come from"). Emits TAP.
set -u

top_builddir=${top_builddir:-.}
bench=$top_builddir/bench/ibc_bench
bound_ms=50
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$bench" ]; then
	echo "1..0 # SKIP $bench not built"
	exit 0
fi
cores=$(nproc 2>/dev/null || echo 1)
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
if awk -v l="$load" -v c="$cores" 'BEGIN { exit !(l > c) }'; then
	echo "1..0 # SKIP load average $load > $cores cores: the probe's time bound needs an idle machine"
	exit 0
fi

echo "1..4"
n=0
for tp in shm tcp; do
	for run in 1 2; do
		n=$((n + 1))
		IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=TUNING IBC_TUNING_PROBE=1 IBC_TUNING_FILE= \
			IBC_TIMEOUT_MS=30000 timeout -k 5 120 "$bench" --local 2 -t "$tp" allreduce \
			-b 8 -e 8 -n 1 -w 0 > "$tmp/log" 2>&1
		rc=$?
		ms=$(sed -n 's/.*TUNING model for 2 ranks .*(probe \([0-9.]*\) ms.*/\1/p' "$tmp/log" |
			head -n 1)
		if [ $rc = 0 ] && [ -n "$ms" ] &&
			awk -v t="$ms" -v b="$bound_ms" 'BEGIN { exit !(t < b) }'; then
			echo "ok $n - $tp run $run: probe $ms ms < $bound_ms ms (load $load)"
		else
			echo "not ok $n - $tp run $run: probe '${ms:-not logged}' ms, bound $bound_ms ms, rc $rc (load $load)"
			sed 's/^/# /' "$tmp/log" | tail -n 10
		fi
	done
done
