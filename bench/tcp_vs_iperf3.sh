#!/bin/sh
# SPDX-License-Identifier: MIT
# tcp_vs_iperf3.sh - issue 22's tcp target: ibcoll over tcp on 2 local ranks
# against the loopback stream bandwidth that iperf3 measures the same minute.
# Each round runs iperf3 (one stream, 127.0.0.1, -t SECONDS) and then
# ibc_bench over IBC_TRANSPORT=tcp (sendrecv and all-reduce, SIZES, 10 timed
# calls after 5 warm-up calls, which cover the tuner's re-timing at the 4th
# call); the table gives per size the median over rounds of ibcoll's
# per-direction rate and its ratio to iperf3's median. Per-direction rate:
# sendrecv moves N bytes each way per call (N / time); a 2-rank ring
# all-reduce moves N/2 + N/2 bytes each way (N / time, = its algbw and
# busbw). Both directions share the 2 cores with the kernel's loopback, so
# iperf3 --bidir (printed too) is the stricter reference.
#
# usage: bench/tcp_vs_iperf3.sh [-R ROUNDS] [-t SECONDS] [-s "16M 64M"] [BUILD_DIR]
# Needs iperf3 (Debian iperf3; scripts/install-deps.sh). Exit 0 when every
# run gave a figure, 1 otherwise, 2 on bad usage or a missing tool.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=3
secs=4
sizes="16M 64M"
while getopts R:t:s: opt; do
	case $opt in
	R) rounds=$OPTARG ;;
	t) secs=$OPTARG ;;
	s) sizes=$OPTARG ;;
	*) sed -n '/^# usage/p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
case "$rounds$secs" in *[!0-9]*|'') echo "tcp_vs_iperf3.sh: -R and -t take positive integers" >&2; exit 2 ;; esac
[ "$rounds" -ge 1 ] && [ "$secs" -ge 1 ] || { echo "tcp_vs_iperf3.sh: -R and -t must be at least 1" >&2; exit 2; }
b=$(cd "${1:-$top/build}" 2>/dev/null && pwd) || { echo "tcp_vs_iperf3.sh: no build directory ${1:-$top/build}" >&2; exit 2; }
bench=$b/bench/ibc_bench
[ -x "$bench" ] || { echo "tcp_vs_iperf3.sh: $bench not built" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "tcp_vs_iperf3.sh: iperf3 not installed (apt-get install iperf3, or scripts/install-deps.sh)" >&2; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# iperf3 ARGS...: the receiver's rate in GB/s (1e9 B/s), summed over its streams
iperf() {
	timeout $((secs + 30)) iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
	sp=$!
	sleep 0.5
	timeout $((secs + 20)) iperf3 -c 127.0.0.1 -p "$port" -t "$secs" --json "$@" > "$tmp/ip.json" 2> "$tmp/ip.err"
	rc=$?
	wait $sp
	[ $rc -eq 0 ] || return 1
	/usr/bin/python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["end"]
print("%.3f" % (e["sum_received"]["bits_per_second"] / 8e9), "%.3f" % ((e["sum_received"]["bits_per_second"] + e.get("sum_received_bidir_reverse", {"bits_per_second": 0})["bits_per_second"]) / 8e9))' "$tmp/ip.json"
}

echo "# $(uptime)"
fail=0
r=1
while [ "$r" -le "$rounds" ]; do
	if v=$(iperf); then echo "$r iperf3 0 ${v% *}" >> "$tmp/all"; else echo "# round $r: iperf3 failed" >&2; fail=1; fi
	if v=$(iperf --bidir); then echo "$r bidir 0 ${v#* }" >> "$tmp/all"; else echo "# round $r: iperf3 --bidir failed" >&2; fail=1; fi
	for c in sendrecv allreduce; do
		for s in $sizes; do
			if IBC_TIMEOUT_MS=120000 timeout 300 "$bench" "$c" --local 2 -t tcp -b "$s" -e "$s" -n 10 -w 5 \
				> "$tmp/b.out" 2> "$tmp/b.err"; then
				# columns: bytes count type redop root time_us ...; N / time
				awk -v r="$r" -v c="$c" '/^ +[0-9]/ { printf "%s %s %s %.3f\n", r, c, $1, $1 / ($6 * 1e3) }' \
					"$tmp/b.out" >> "$tmp/all"
			else
				echo "# round $r: ibc_bench $c $s failed:" >&2
				tail -5 "$tmp/b.err" >&2
				fail=1
			fi
		done
	done
	r=$((r + 1))
done
echo "# $(uptime)"
echo "# loopback TCP, 2 ranks on this host; GB/s = 1e9 B/s per direction; median of $rounds round(s)"
/usr/bin/python3 - "$tmp/all" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, what, size, gbs = line.split()
    v[(what, int(size))].append(float(gbs))
ip = statistics.median(v[("iperf3", 0)]) if v[("iperf3", 0)] else float("nan")
bd = statistics.median(v[("bidir", 0)]) if v[("bidir", 0)] else float("nan")
print("iperf3 one stream: %.3f GB/s; iperf3 --bidir: %.3f GB/s both directions together" % (ip, bd))
print("%-10s %12s %10s %16s" % ("collective", "bytes", "GB/s", "x iperf3 stream"))
for (what, size) in sorted(k for k in v if k[0] not in ("iperf3", "bidir")):
    m = statistics.median(v[(what, size)])
    print("%-10s %12d %10.3f %16.2f" % (what, size, m, m / ip))
PY
exit $fail
