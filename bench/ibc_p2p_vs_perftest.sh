#!/bin/bash
# SPDX-License-Identifier: MIT
# ibc_p2p_vs_perftest.sh - RDMA write bandwidth and latency of ibcoll's verbs
# transport (bench/ibc_p2p) next to perftest's ib_write_bw / ib_write_lat on
# the same devices in the same VM boot, with the ratio per size, as a
# Markdown table (for bench/RESULTS.md).
#
# usage: bench/ibc_p2p_vs_perftest.sh [-s SIZES] [-D DEPTH] [-B BYTES] [-L N] [-q QPS] [-R RUNS] [-t bw/lat/both]
#   run from the build directory (where bench/ibc_p2p is). Without verbs
#   devices it boots the Soft-RoCE VM (tests/rxe/rxe-vm.sh) and runs there:
#   server on rxe1, client on rxe0 (a real rxe0 -> veth -> rxe1 path).
#   -s  message sizes in bytes (default "2 64 1024 8192 65536 1048576 8388608")
#   -D  messages in flight: ib_write_bw --tx-depth and ibc_p2p credits (default 64)
#   -B  bytes per size for the bandwidth runs (default 32m: a few seconds per
#       size on rxe under TCG); iterations = B / size, between 8 and 2000
#   -L  most latency iterations (default 300); sizes above 16 KiB do fewer
#       (4 MiB / size, at least 10)
#   -q  ibc_p2p QPs per connection (default 1, as perftest)
#   -R  runs (default 3). Each run measures perftest and ibc_p2p back to back
#       on the same size, so both see about the same share of the host's CPUs
#       (the emulated VM competes with everything else running on the host);
#       the table gives medians and the median of the per-run ratios, with
#       their range, and stderr lists every run
#   -t  bw, lat or both (default both)
# ibc_p2p's bandwidth is measured in two modes: its receiver sleeping on the
# completion channel when idle (its default, like ib_write_bw's server, which
# does not poll at all: in a 2-vCPU VM the rxe kernel work needs the other
# vCPU; best for large messages) and both sides polling (-P, like perftest's
# client; best for small ones); each run's ratio uses the better of the two.
# Exit status 0 when every run produced a figure, 1 otherwise.
set -u
sizes="2 64 1024 8192 65536 1048576 8388608"
depth=64
total=$((32 * 1024 * 1024))
lat_iters=300
qps=1
runs=3
tests=both
in_vm=0
here=$(cd "$(dirname "$0")" && pwd)
srcdir=$(cd "$here/.." && pwd)
while [ $# -gt 0 ]; do
	case "$1" in
	-s) sizes=$2; shift 2 ;;
	-D) depth=$2; shift 2 ;;
	-B) total=$(numfmt --from=iec "${2^^}" 2>/dev/null || echo "$2"); shift 2 ;;
	-L) lat_iters=$2; shift 2 ;;
	-q) qps=$2; shift 2 ;;
	-R) runs=$2; shift 2 ;;
	-t) tests=$2; shift 2 ;;
	--in-vm) in_vm=1; shift ;;
	-h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
p2p=./bench/ibc_p2p
[ -x "$p2p" ] || { echo "run from the build directory: $p2p not found (make bench/ibc_p2p)" >&2; exit 2; }

if [ $in_vm = 0 ] && [ ! -d /sys/class/infiniband/rxe0 ]; then
	echo "# host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) (other jobs share them)"
	RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-3600} exec "$srcdir/tests/rxe/rxe-vm.sh" "$0" --in-vm -s "$sizes" -D "$depth" -B "$total" \
		-L "$lat_iters" -q "$qps" -R "$runs" -t "$tests"
fi
d0=${RXE_DEV0:-rxe0}
d1=${RXE_DEV1:-rxe1}
export IBC_DEBUG=WARN
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
fail=0

iters_for() { # size -> bandwidth iterations
	local n=$(($total / $1))
	[ $n -lt 8 ] && n=8
	[ $n -gt 2000 ] && n=2000
	echo $n
}
lat_iters_for() { # size -> latency iterations
	local n=$((4194304 / $1))
	[ $n -gt $lat_iters ] && n=$lat_iters
	[ $n -lt 10 ] && n=10
	echo $n
}

# run SERVER and CLIENT commands (server in the background), client output on stdout
pair() {
	local server=$1 client=$2
	timeout 300 $server > "$log/server" 2>&1 &
	local spid=$!
	sleep 0.5
	timeout 300 $client 2> "$log/client.err"
	local rc=$?
	wait $spid
	local src=$?
	if [ $rc -ne 0 ] || [ $src -ne 0 ]; then
		echo "# FAILED ($rc/$src): $client" >&2
		sed 's/^/#   client: /' "$log/client.err" >&2
		sed 's/^/#   server: /' "$log/server" >&2
		return 1
	fi
}

echo "# ibc_p2p vs perftest, $(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r), $(nproc) vCPUs"
echo "# server on $d1, client on $d0 (rxe0 -> veth pair -> rxe1), $depth messages in flight, ibc_p2p $qps QP(s), $runs paired runs per size"
echo "# perftest: $(dpkg-query -W -f='${Version}' perftest 2>/dev/null || echo unknown); bandwidth in MiB/s (2^20 B/s, perftest's unit) and GB/s (10^9 B/s)"
echo
echo "| bytes | bw iters | ib_write_bw MiB/s | ibc_p2p MiB/s | ibc_p2p GB/s | BW ratio median (range) | lat iters | ib_write_lat typ us | ibc_p2p typ us | lat ratio median (range) |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
median() { # median of the numbers on stdin (non-numbers skipped)
	awk '$1 ~ /^[0-9.]+$/ && $1 > 0 { v[n++] = $1 } END {
		if (!n) exit
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		printf "%g\n", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'
}
range() { # "min-max" of the numbers on stdin
	awk '$1 ~ /^[0-9.]+$/ && $1 > 0 { if (!n || $1 < lo) lo = $1; if (!n || $1 > hi) hi = $1; n++ }
		END { if (n) printf "%.2f-%.2f", lo, hi }'
}
for s in $sizes; do
	n=$(iters_for "$s")
	nl=$(lat_iters_for "$s")
	w=$(($n / 4))
	[ $w -gt 20 ] && w=20
	[ $w -lt 1 ] && w=1
	: > "$log/bw"; : > "$log/lat"
	for ((r = 0; r < runs; r++)); do
		if [ "$tests" != lat ]; then
			# message rates (Mpps) carry more digits than MiB/s for small sizes
			pb=$(pair "ib_write_bw -F -d $d1 -x 0 -s $s -n $n -t $depth" \
				"ib_write_bw -F -d $d0 -x 0 -s $s -n $n -t $depth 127.0.0.1" |
				awk -v s="$s" '$1 == s && NF >= 5 { print $4, $5 }')
			is=$(pair "$p2p -d $d1 -p 18600 -t bw -b $s -e $s -n $n -w $w -D $depth -q $qps" \
				"$p2p -d $d0 -p 18600 -t bw -b $s -e $s -n $n -w $w -D $depth -q $qps 127.0.0.1" |
				awk -v s="$s" '$1 == s { print $3, $5 }')
			ip=$(pair "$p2p -d $d1 -p 18602 -t bw -b $s -e $s -n $n -w $w -D $depth -q $qps -P" \
				"$p2p -d $d0 -p 18602 -t bw -b $s -e $s -n $n -w $w -D $depth -q $qps -P 127.0.0.1" |
				awk -v s="$s" '$1 == s { print $3, $5 }')
			# per run: perftest MiB/s and Mpps, ibc_p2p's better mode MiB/s and Mpps, ratio
			# ratio from MiB/s, or from the message rates below 1 KiB where MiB/s has few digits
			echo "${pb:-0 0} ${is:-0 0} ${ip:-0 0}" | awk -v s="$s" '{
				ib = $3 > $5 ? $3 : $5; ir = $4 > $6 ? $4 : $6
				if (s >= 1024) r = $1 > 0 ? ib / $1 : 0; else r = $2 > 0 ? ir / $2 : 0
				printf "%s %s %s %s %.3f %s %s\n", $1, $2, ib, ir, r, $3, $5 }' >> "$log/bw"
		fi
		if [ "$tests" != bw ]; then
			pl=$(pair "ib_write_lat -F -d $d1 -x 0 -s $s -n $nl" \
				"ib_write_lat -F -d $d0 -x 0 -s $s -n $nl 127.0.0.1" |
				awk -v s="$s" '$1 == s && NF >= 5 { print $5 }')
			il=$(pair "$p2p -d $d1 -p 18601 -t lat -b $s -e $s -n $nl -w 2" \
				"$p2p -d $d0 -p 18601 -t lat -b $s -e $s -n $nl -w 2 127.0.0.1" |
				awk -v s="$s" '$1 == s { print $4 }')
			echo "${pl:-0} ${il:-0}" | awk '{ printf "%s %s %s\n", $1, $2, ($1 > 0 ? $2 / $1 : 0) }' >> "$log/lat"
		fi
	done
	pbw=$(awk '{ print $1 }' "$log/bw" | median)
	ibw=$(awk '{ print $3 }' "$log/bw" | median)
	igb=$(awk -v a="$ibw" 'BEGIN { if (a != "") printf "%.4f", a * 1048576 / 1e9 }')
	bwr=$(awk '{ print $5 }' "$log/bw" | median)
	bwrr=$(awk '{ print $5 }' "$log/bw" | range)
	plat=$(awk '{ print $1 }' "$log/lat" | median)
	ilat=$(awk '{ print $2 }' "$log/lat" | median)
	latr=$(awk '{ print $3 }' "$log/lat" | median)
	latrr=$(awk '{ print $3 }' "$log/lat" | range)
	if [ "$tests" != lat ] && [ -z "$bwr" ]; then fail=1; fi
	if [ "$tests" != bw ] && [ -z "$latr" ]; then fail=1; fi
	fmt() { awk -v v="$1" 'BEGIN { if (v == "") print "-"; else printf "%.2f", v }'; }
	echo "| $s | $n | $(fmt "$pbw") | $(fmt "$ibw") | ${igb:--} | $(fmt "$bwr") ($bwrr) | $nl | $(fmt "$plat") | $(fmt "$ilat") | $(fmt "$latr") ($latrr) |"
	echo "#   $s bytes, per run (perftest MiB/s, Mpps, ibc_p2p better MiB/s, Mpps, ratio, recv-sleeps MiB/s, both-poll MiB/s):" >&2
	sed 's/^/#     bw  /' "$log/bw" >&2
	sed 's/^/#     lat (ib_write_lat, ibc_p2p, ratio) /' "$log/lat" >&2
done
exit $fail
