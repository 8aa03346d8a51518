#!/bin/sh
# SPDX-License-Identifier: MIT
# slow_start.sh - issue 22's "no slow mode": RUNS back-to-back runs of
# bench/slow_start (2 ranks: one all-reduce, a 1.5 s sleep, then every size
# from 8 B to 16 MiB timed), alternately quiet and with three busy
# processes during the first second of the run (the tuner's start-up
# measurements meet a busy host); per size the median over all runs, and
# for each run its time / that median. Target: every size of every run
# within 1.5x of the median run.
#
# usage: bench/slow_start.sh [-r RUNS] [-n RANKS] [-k FILE] [BUILD_DIR]   (default 20 runs, 2 ranks)
#   -k FILE  keep every run's figures in FILE (run, quiet/busy, bytes, us)
# Exit status: 0 when every size-run is within 1.5x of its median run (the
# target), 1 when some are not, 2 on a usage or build error.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
runs=20
nr=2
keep=
while getopts r:n:k: opt; do
	case $opt in
	r) runs=$OPTARG ;;
	n) nr=$OPTARG ;;
	k) keep=$OPTARG ;;
	*) sed -n '/^# usage/p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
b=$(cd "${1:-$top/build}" && pwd) || exit 2
prog=$b/bench/slow_start
[ -x "$prog" ] || { echo "slow_start.sh: $prog not built" >&2; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

echo "# $(uptime)"
i=0
while [ $i -lt "$runs" ]; do
	load=quiet
	if [ $((i % 2)) = 1 ]; then
		load=busy
		for k in 1 2 3; do
			timeout 1 sh -c 'while :; do :; done' &
		done
	fi
	IBC_TIMEOUT_MS=60000 "$top/scripts/ibcrun" -n "$nr" --timeout 120 -- "$prog" 1500 50 5 \
		> "$tmp/run" 2> "$tmp/err" || { echo "slow_start.sh: run $i failed:" >&2; cat "$tmp/err" >&2; exit 1; }
	wait
	awk -v i=$i -v l=$load '{ print i, l, $1, $2 }' "$tmp/run" >> "$tmp/all"
	i=$((i + 1))
done
echo "# $(uptime)"
[ -n "$keep" ] && cp "$tmp/all" "$keep"
awk '
function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1]+0 > a[j]+0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }; return a[int((n+1)/2)] }
{ v[$3] = v[$3] " " $4; run[NR] = $0 }
END {
	for (s in v) m[s] = med(v[s])
	for (k = 1; k <= NR; k++) {
		split(run[k], f, " ")
		r = f[4] / m[f[3]]
		if (r > worst[f[2] " " f[3]]) worst[f[2] " " f[3]] = r
		if (r > 1.5) bad++
	}
	printf "%10s %12s %14s %14s\n", "bytes", "median_us", "worst_quiet", "worst_busy"
	n = 0; for (s in m) ss[++n] = s + 0
	for (i = 2; i <= n; i++) for (j = i; j > 1 && ss[j-1] > ss[j]; j--) { t = ss[j]; ss[j] = ss[j-1]; ss[j-1] = t }
	for (i = 1; i <= n; i++)
		printf "%10d %12.2f %13.2fx %13.2fx\n", ss[i], m[ss[i]], worst["quiet " ss[i]], worst["busy " ss[i]]
	printf "# %d of %d size-runs over 1.5x the median run\n", bad + 0, NR
	exit bad > 0
}' "$tmp/all"
