#!/bin/sh
# SPDX-License-Identifier: MIT
# algo_campaign.sh - the measurements behind "Algorithms (this machine)" in
# bench/RESULTS.md: for shm and tcp and 2, 4, 8 ranks, a tuning run
# (bench/algo_timing --tune: every algorithm and protocol forced at 8 B .. 64
# MiB, the tuner's pick with the probe-only model, fitted rows appended to the
# tuning file), then PASSES evaluation runs with IBC_TUNING_FILE set.
# Summarise with bench/algo_summary.py OUTDIR.
#
# usage: bench/algo_campaign.sh OUTDIR [PASSES]     (run from the build tree)
set -eu
out=${1:?usage: algo_campaign.sh OUTDIR [PASSES]}
passes=${2:-1}
mkdir -p "$out"
tf="$out/tuning.txt"
: > "$tf"
for tp in shm tcp; do
	for n in 2 4 8; do
		echo "tune $tp $n $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
		./bench/algo_timing -n "$n" -t "$tp" -r 3 --tune "$tf" > "$out/tune-$tp-$n.txt"
	done
done
p=1
while [ "$p" -le "$passes" ]; do
	for tp in shm tcp; do
		for n in 2 4 8; do
			echo "eval$p $tp $n $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
			IBC_TUNING_FILE="$tf" ./bench/algo_timing -n "$n" -t "$tp" -r 5 \
				> "$out/eval$p-$tp-$n.txt"
		done
	done
	p=$((p + 1))
done
echo "done $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
