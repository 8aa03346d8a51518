#!/bin/sh
# SPDX-License-Identifier: MIT
# bench_scaling.sh - step time of trainer/ibc_gpt2 for 1, 2 and 4 ranks on
# this host (weak scaling: the same micro-batch per rank), with the
# all-reduce overlapped with backward and not, plain and ZeRO-1. Prints a
# Markdown table (the one in trainer/README.md).
#
# usage: trainer/bench_scaling.sh [STEPS]     (default 30; needs data/corpus)
# Settings (environment): RANKS="1 2 4" ARGS="-d 2 -T 64 -b 4" THREADS=1
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
STEPS=${1:-30}
RANKS=${RANKS:-1 2 4}
ARGS=${ARGS:--d 2 -T 64 -b 4}
THREADS=${THREADS:-1}
# the binary: IBC_BUILD_DIR (scripts/build.sh's build/), else an in-tree build
bin=
for d in "${IBC_BUILD_DIR:-}" "$root/build" "$root"; do
	if [ -n "$d" ] && [ -x "$d/trainer/ibc_gpt2" ]; then
		bin=$d/trainer/ibc_gpt2
		break
	fi
done
[ -n "$bin" ] || { echo "bench_scaling: trainer/ibc_gpt2 is not built; run: scripts/build.sh" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibc_bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
trainer/prepro/prepare.sh data/corpus >/dev/null

run() { # R overlap zero
	R=$1
	port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000)) # 20000-31999: below the ephemeral ports (32768-), which outgoing connections take
	pids=
	r=1
	while [ "$r" -lt "$R" ]; do
		IBC_RANK=$r IBC_NRANKS=$R IBC_ROOT=127.0.0.1:$port OMP_NUM_THREADS=$THREADS \
			"$bin" $ARGS -n "$STEPS" -m 0 --gen 0 --quiet --overlap "$2" --zero "$3" \
			--log "$tmp/r$r.csv" >/dev/null 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
	IBC_RANK=0 IBC_NRANKS=$R IBC_ROOT=127.0.0.1:$port OMP_NUM_THREADS=$THREADS \
		"$bin" $ARGS -n "$STEPS" -m 0 --gen 0 --quiet --overlap "$2" --zero "$3" \
		--log "$tmp/r0.csv" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
	for p in $pids; do wait "$p"; done
	# steps 2..STEPS: median and minimum step time (the machine is shared:
	# the minimum is the least disturbed step), mean all-reduce/exposed/gather
	ms=$(awk -F, 'NR > 2 && $2 != "" { print $6 }' "$tmp/r0.csv" | sort -n)
	med=$(echo "$ms" | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
	min=$(echo "$ms" | head -n 1)
	tok=$(awk -F, 'NR == 2 { print $7 * $6 / 1000 }' "$tmp/r0.csv")
	awk -F, -v R="$R" -v ov="$2" -v z="$3" -v med="$med" -v min="$min" -v tok="$tok" \
		'NR > 2 && $2 != "" { n++; ar += $10; ex += $11; ga += $13 }
		END { hid = ar > 0 ? 100 * (1 - ex / ar) : 0; if (hid < 0) hid = 0
		multi = R + 0 > 1
		mode = z + 0 ? "ZeRO-1" : "all-reduce"
		over = !multi ? "-" : (ov + 0 ? "yes" : "no")
		arm = multi ? sprintf("%.0f", ar / n) : "-"
		hidp = multi ? sprintf("%.0f%%", hid) : "-"
		gam = (multi && z + 0) ? sprintf("%.0f", ga / n) : "-"
		printf("| %d | %s | %s | %.0f (%.0f) | %.0f | %s | %s | %s |\n", R, mode, over,
			med, min, tok / (med / 1000), arm, hidp, gam) }' "$tmp/r0.csv"
}

echo "ibc_gpt2 $ARGS, $THREADS OpenMP thread(s) per rank, steps 2..$STEPS (all-reduce columns: mean)," \
	"$(nproc) cores, 1-min load average $(uptime | sed 's/.*load average: //;s/,.*//') at start"
echo
echo "| ranks | mode | overlap | step ms, median (min) | tokens/s at the median | all-reduce ms | hidden | ZeRO gather ms |"
echo "|---|---|---|---|---|---|---|---|"
for R in $RANKS; do
	run "$R" 1 0
	if [ "$R" -gt 1 ]; then
		run "$R" 0 0
		run "$R" 1 1
	fi
done
