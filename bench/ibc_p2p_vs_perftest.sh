#!/bin/bash
# SPDX-License-Identifier: MIT
# ibc_p2p_vs_perftest.sh - RDMA write bandwidth and latency of ibcoll's verbs
# transport (bench/ibc_p2p) next to perftest's ib_write_bw / ib_write_lat on
# the same devices in the same VM boot, with the ratio per size, as a
# Markdown table (for bench/RESULTS.md).
#
# usage: bench/ibc_p2p_vs_perftest.sh [-s "SIZES"] [-D DEPTH] [-B BYTES] [-q QPS]
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
#   -R  runs of each measurement, perftest and ibc_p2p alternating (default 3);
#       the table gives the best of them (highest bandwidth, lowest typical
#       latency): the emulated VM shares the host's CPUs, so single runs are noisy
# ibc_p2p's bandwidth is measured in two modes: its receiver sleeping on the
# completion channel when idle (its default, like ib_write_bw's server, which
# does not poll at all: in a 2-vCPU VM the rxe kernel work needs the other
# vCPU; best for large messages) and both sides polling (-P, like perftest's
# client; best for small ones); the ratio uses the better of the two.
# Exit status 0 when every run produced a figure, 1 otherwise.
set -u
sizes="2 64 1024 8192 65536 1048576 8388608"
depth=64
total=$((32 * 1024 * 1024))
lat_iters=300
qps=1
runs=3
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
		-L "$lat_iters" -q "$qps" -R "$runs"
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
echo "# server on $d1, client on $d0 (rxe0 -> veth pair -> rxe1), $depth messages in flight, ibc_p2p $qps QP(s), best of $runs runs"
echo "# perftest: $(dpkg-query -W -f='${Version}' perftest 2>/dev/null || echo unknown); bandwidth in MiB/s (2^20 B/s, perftest's unit) and GB/s (10^9 B/s)"
echo
echo "| bytes | bw iters | ib_write_bw MiB/s | ibc_p2p MiB/s (recv sleeps) | ibc_p2p MiB/s (both poll) | ibc_p2p GB/s (better) | BW ratio | lat iters | ib_write_lat typ us | ibc_p2p lat typ us | lat ratio |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
best() { # max|min over the values on stdin
	awk -v m="$1" 'NF && $1 ~ /^[0-9.]+$/ { if (!n || (m == "max" && $1 > v) || (m == "min" && $1 < v)) v = $1; n++ }
		END { if (n) print v }'
}
for s in $sizes; do
	n=$(iters_for "$s")
	nl=$(lat_iters_for "$s")
	w=$(($n / 4))
	[ $w -gt 20 ] && w=20
	[ $w -lt 1 ] && w=1
	: > "$log/pbw"; : > "$log/ibw"; : > "$log/ibwp"; : > "$log/plat"; : > "$log/ilat"
	for ((r = 0; r < runs; r++)); do
		pair "ib_write_bw -F -d $d1 -x 0 -s $s -n $n -t $depth" \
			"ib_write_bw -F -d $d0 -x 0 -s $s -n $n -t $depth 127.0.0.1" |
			awk -v s="$s" '$1 == s && NF >= 5 { print $4 }' >> "$log/pbw"
		pair "$p2p -d $d1 -p 18600 -t bw -b $s -e $s -n $n -w $w -D $depth -q $qps" \
			"$p2p -d $d0 -p 18600 -t bw -b $s -e $s -n $n -w $w -D $depth -q $qps 127.0.0.1" |
			awk -v s="$s" '$1 == s { print $3 }' >> "$log/ibw"
		pair "$p2p -d $d1 -p 18602 -t bw -b $s -e $s -n $n -w $w -D $depth -q $qps -P" \
			"$p2p -d $d0 -p 18602 -t bw -b $s -e $s -n $n -w $w -D $depth -q $qps -P 127.0.0.1" |
			awk -v s="$s" '$1 == s { print $3 }' >> "$log/ibwp"
		pair "ib_write_lat -F -d $d1 -x 0 -s $s -n $nl" \
			"ib_write_lat -F -d $d0 -x 0 -s $s -n $nl 127.0.0.1" |
			awk -v s="$s" '$1 == s && NF >= 5 { print $5 }' >> "$log/plat"
		pair "$p2p -d $d1 -p 18601 -t lat -b $s -e $s -n $nl -w 2" \
			"$p2p -d $d0 -p 18601 -t lat -b $s -e $s -n $nl -w 2 127.0.0.1" |
			awk -v s="$s" '$1 == s { print $4 }' >> "$log/ilat"
	done
	pbw=$(best max < "$log/pbw")
	isleep=$(best max < "$log/ibw")
	ipoll=$(best max < "$log/ibwp")
	imib=$(printf '%s\n%s\n' "$isleep" "$ipoll" | best max)
	plat=$(best min < "$log/plat")
	ilat=$(best min < "$log/ilat")
	igb=$(awk -v a="$imib" 'BEGIN { if (a != "") printf "%.4f", a * 1048576 / 1e9 }')
	for v in "$pbw" "$imib" "$plat" "$ilat"; do
		[ -n "$v" ] || fail=1
	done
	bwr=$(awk -v a="$imib" -v b="$pbw" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else print "-" }')
	latr=$(awk -v a="$ilat" -v b="$plat" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else print "-" }')
	echo "| $s | $n | ${pbw:--} | ${isleep:--} | ${ipoll:--} | ${igb:--} | $bwr | $nl | ${plat:--} | ${ilat:--} | $latr |"
	echo "#   runs: ib_write_bw $(tr '\n' ' ' < "$log/pbw")| ibc_p2p $(tr '\n' ' ' < "$log/ibw")| ibc_p2p -P $(tr '\n' ' ' < "$log/ibwp")| ib_write_lat $(tr '\n' ' ' < "$log/plat")| ibc_p2p lat $(tr '\n' ' ' < "$log/ilat")" >&2
done
exit $fail
