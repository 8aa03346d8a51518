#!/bin/sh
# SPDX-License-Identifier: MIT
# plot.sh - plot ibc_bench --csv results with gnuplot (PNG): bus bandwidth
# (or time per call) against message size on a log2 x axis, one line per
# CSV file (a transport/algorithm/rank-count run), plus the Open MPI line of
# each file that has --vs-mpi columns.
#
#   bench/plot.sh [-o OUT.png] [-c COLL] [-m busbw|time] [-t TITLE] FILE.csv[=LABEL] ...
#
#   -o  output file                                   [ibc_bench.png]
#   -c  collective to plot (rows of other ones are ignored) [first one in the first file]
#   -m  busbw: GB/s, linear y; time: us per call, log y  [busbw]
#   -t  title                                          [COLL, ranks, host]
# LABEL defaults to "ibcoll TRANSPORT ALGO, N ranks" read from the file; the
# MPI line of a file is labelled "Open MPI (LABEL)". Example:
#   bench/plot.sh -o ar.png shm4.csv=shm tcp4.csv=tcp
set -eu

out=ibc_bench.png
coll=
mode=busbw
title=
usage() {
	sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'
	exit "$1"
}
while getopts o:c:m:t:h opt; do
	case $opt in
	o) out=$OPTARG ;;
	c) coll=$OPTARG ;;
	m) mode=$OPTARG ;;
	t) title=$OPTARG ;;
	h) usage 0 ;;
	*) usage 2 >&2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage 2 >&2
case $mode in busbw | time) ;; *) echo "plot.sh: -m takes busbw or time" >&2; exit 2 ;; esac
command -v gnuplot >/dev/null 2>&1 || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 3; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibc_plot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# CSV columns written by ibc_bench (csv_open() in ibc_bench.c)
first=${1%%=*}
[ -r "$first" ] || { echo "plot.sh: cannot read $first" >&2; exit 2; }
if [ -z "$coll" ]; then
	coll=$(awk -F, 'NR == 2 { print $1; exit }' "$first")
fi
[ -n "$coll" ] || { echo "plot.sh: $first has no rows" >&2; exit 2; }
if [ -z "$title" ]; then
	title=$(awk -F, -v c="$coll" 'NR > 1 && $1 == c { printf "%s, %s ranks on %s host(s)%s", c, $2, $3, $9 != "" ? ", " $9 : ""; exit }' "$first")
fi
if [ "$mode" = busbw ]; then
	ycol=16 mycol=22 ylabel="bus bandwidth (GB/s, 1 GB = 1e9 B)"
else
	ycol=12 mycol=18 ylabel="time per call (us)"
fi

plots=
i=0
for arg in "$@"; do
	f=${arg%%=*}
	label=
	[ "$f" != "$arg" ] && label=${arg#*=}
	[ -r "$f" ] || { echo "plot.sh: cannot read $f" >&2; exit 2; }
	if [ -z "$label" ]; then
		label=$(awk -F, -v c="$coll" 'NR > 1 && $1 == c { printf "ibcoll %s %s, %s ranks", $4, $5, $2; exit }' "$f")
	fi
	awk -F, -v c="$coll" -v y="$ycol" 'NR > 1 && $1 == c && $7 > 0 { print $7, $y }' "$f" >"$tmp/ibc$i.dat"
	awk -F, -v c="$coll" -v y="$mycol" 'NR > 1 && $1 == c && $7 > 0 && $y != "" { print $7, $y }' "$f" >"$tmp/mpi$i.dat"
	if [ -s "$tmp/ibc$i.dat" ]; then
		plots="$plots${plots:+, }'$tmp/ibc$i.dat' using 1:2 with linespoints lw 2 pt 7 title '$(printf %s "$label" | tr -d "'")'"
	else
		echo "plot.sh: $f has no $coll rows" >&2
	fi
	if [ -s "$tmp/mpi$i.dat" ]; then
		plots="$plots, '$tmp/mpi$i.dat' using 1:2 with linespoints lw 2 dt 2 pt 6 title 'Open MPI ($(printf %s "$label" | tr -d "'"))'"
	fi
	i=$((i + 1))
done
[ -n "$plots" ] || { echo "plot.sh: nothing to plot for $coll" >&2; exit 2; }

{
	echo "set terminal pngcairo size 1000,620 noenhanced"
	echo "set output '$out'"
	echo "set title '$(printf %s "$title" | tr -d "'")'"
	echo "set logscale x 2"
	echo "set format x '%.0b%B'"
	echo "set xlabel 'message size (bytes, nccl-tests convention)'"
	echo "set ylabel '$ylabel'"
	[ "$mode" = time ] && echo "set logscale y 10"
	echo "set grid"
	echo "set key top left"
	echo "plot $plots"
} >"$tmp/plot.gp"
if ! gnuplot "$tmp/plot.gp" 2>"$tmp/err"; then
	# pngcairo may be missing (gnuplot-nox builds have it; minimal ones not)
	sed -i 's/^set terminal pngcairo /set terminal png /' "$tmp/plot.gp"
	gnuplot "$tmp/plot.gp" || { cat "$tmp/err" >&2; exit 1; }
fi
echo "plot.sh: wrote $out"
