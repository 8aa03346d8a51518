#!/bin/sh
# SPDX-License-Identifier: MIT
# collect.sh - the measurement behind bench/RESULTS.md: ibc_bench --vs-mpi
# under mpirun for each rank count and transport, repeated, with Open MPI
# restricted to the matching transport (shm: pml ob1 + btl self,vader; tcp:
# pml ob1 + btl self,tcp on lo). Writes one CSV and one text log per run
# into DIR, the load average before each run into DIR/conditions.txt, and
# prints a Markdown table per configuration with the MEDIAN over the
# repetitions of each column (ratio: median of the per-run ratios); the
# medians also go to DIR/median-COLL-TRANSPORT-nN.csv (ibc_bench's CSV
# columns, for bench/plot.sh).
#
#   bench/collect.sh [-o DIR] [-r REPS] [-n "2 4"] [-t "shm tcp"] [-c COLL]
#                    [-s "SWEEP ARGS"] [-m]
#   -o  output directory                          [bench-results]
#   -r  repetitions of every configuration        [3]
#   -n  rank counts                               ["2 4"]
#   -t  transports                                ["shm tcp"]
#   -c  collective (or "all")                     [allreduce]
#   -s  ibc_bench sweep and timing arguments      ["-b 8 -e 64M -f 4 -n 20 -w 5 -R 2 -c 1"]
#   -m  only print the tables of an existing DIR (no runs)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
bench=${IBC_BENCH:-$here/ibc_bench}
out=bench-results
reps=3
ranks="2 4"
transports="shm tcp"
coll=allreduce
sweep="-b 8 -e 64M -f 4 -n 20 -w 5 -R 2 -c 1"
measure=1
while getopts o:r:n:t:c:s:mh opt; do
	case $opt in
	o) out=$OPTARG ;;
	r) reps=$OPTARG ;;
	n) ranks=$OPTARG ;;
	t) transports=$OPTARG ;;
	c) coll=$OPTARG ;;
	s) sweep=$OPTARG ;;
	m) measure=0 ;;
	*) sed -n '3,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
done
mkdir -p "$out"

mpirun_for() {
	m="mpirun --oversubscribe -np $1 --mca pml ob1"
	[ "$(id -u)" = 0 ] && m="$m --allow-run-as-root"
	case $2 in
	shm) m="$m --mca btl self,vader" ;;
	tcp) m="$m --mca btl self,tcp --mca btl_tcp_if_include lo" ;;
	*) m="$m" ;;
	esac
	echo "$m"
}

if [ $measure -eq 1 ]; then
	r=1
	while [ "$r" -le "$reps" ]; do
		for n in $ranks; do
			for t in $transports; do
				tag=$coll-$t-n$n-r$r
				cmd="$(mpirun_for "$n" "$t") $bench $coll --vs-mpi -t $t $sweep --csv $out/$tag.csv"
				echo "$(date '+%F %T') $tag load $(cut -d' ' -f1-3 /proc/loadavg): $cmd" >>"$out/conditions.txt"
				echo "== $tag (load $(cut -d' ' -f1 /proc/loadavg))" >&2
				# shellcheck disable=SC2086
				if ! $cmd >"$out/$tag.txt" 2>&1; then
					echo "collect.sh: $tag failed, see $out/$tag.txt" >&2
				fi
			done
		done
		r=$((r + 1))
	done
fi

# one line per (config, collective, size, run), then medians per group
rm -f "$out"/median-*.csv
for f in "$out"/*.csv; do
	[ -e "$f" ] || continue
	awk -F, 'NR > 1 && $18 != "" { print $4, $2, $1, $7, $12, $18, $24, $16, $22, $25, $26 }' "$f"
done | sort -k1,1 -k2,2n -k3,3 -k4,4n | awk -v dir="$out" '
function median(a, k,    i, j, t) {
	for (i = 2; i <= k; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
function flush(    m) {
	if (!k)
		return
	if (cfg != pcfg) {
		printf "\n%s, %d ranks, %s (median of %d runs)\n\n", coll, n, t, k
		print "| bytes | ibcoll us | Open MPI us | ibcoll/MPI | ibcoll busbw GB/s | MPI busbw GB/s | ibcoll CPU us | MPI CPU us |"
		print "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
		pcfg = cfg
	}
	mti = median(ti, k); mtm = median(tm, k); mra = median(ra, k); mbi = median(bi, k)
	mbm = median(bm, k); mci = median(ci, k); mcm = median(cm, k)
	printf "| %s | %.1f | %.1f | %.2f | %.3f | %.3f | %.1f | %.1f |\n", bytes,
		mti, mtm, mra, mbi, mbm, mci, mcm
	f = dir "/median-" coll "-" t "-n" n ".csv"
	if (!(f in started)) {
		started[f] = 1
		print "coll,nranks,nhosts,transport,algo,blocking,bytes,count,dtype,op,root,time_us,min_us,max_us,algbw_GBps,busbw_GBps,wrong,mpi_time_us,mpi_min_us,mpi_max_us,mpi_algbw_GBps,mpi_busbw_GBps,mpi_wrong,ratio,cpu_us,mpi_cpu_us" > f
	}
	printf "%s,%d,1,%s,median,,%s,,,,,%.3f,,,,%.6f,,%.3f,,,,%.6f,,%.4f,%.3f,%.3f\n", coll, n, t,
		bytes, mti, mbi, mtm, mbm, mra, mci, mcm > f
	k = 0
}
{
	key = $1 " " $2 " " $3 " " $4
	if (key != pkey) {
		flush()
		pkey = key
		t = $1; n = $2; coll = $3; bytes = $4; cfg = t " " n " " coll
	}
	k++
	ti[k] = $5; tm[k] = $6; ra[k] = $7; bi[k] = $8; bm[k] = $9; ci[k] = $10; cm[k] = $11
}
END { flush() }'
