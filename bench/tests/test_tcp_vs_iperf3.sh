#!/bin/sh
# SPDX-License-Identifier: MIT
# test_tcp_vs_iperf3.sh - bench/tcp_vs_iperf3.sh: bad options are refused
# with exit 2 and a reason; one short round (iperf3 1 s, 1 MiB sendrecv and
# all-reduce over tcp) exits 0 and prints iperf3's rate and one row per
# collective with a positive rate and its ratio to iperf3's (the rate /
# iperf3's, to 2 decimals). SKIP without iperf3. Emits TAP.
set -u
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
if ! command -v iperf3 >/dev/null 2>&1; then
	echo "1..0 # SKIP iperf3 not installed (scripts/install-deps.sh installs it)"
	exit 0
fi
echo "1..4"
sh "$top_srcdir/bench/tcp_vs_iperf3.sh" -R 0 "$top_builddir" > "$tmp/out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q 'at least 1' "$tmp/out"; then echo "ok 1 - -R 0 refused (exit 2, says why)"
else echo "not ok 1 - -R 0: exit $rc"; sed 's/^/# /' "$tmp/out"; fi
sh "$top_srcdir/bench/tcp_vs_iperf3.sh" -t x "$top_builddir" > "$tmp/out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q 'positive integers' "$tmp/out"; then echo "ok 2 - -t x refused (exit 2, says why)"
else echo "not ok 2 - -t x: exit $rc"; sed 's/^/# /' "$tmp/out"; fi
timeout -k 5 300 sh "$top_srcdir/bench/tcp_vs_iperf3.sh" -R 1 -t 1 -s 1M "$top_builddir" > "$tmp/out" 2>&1
rc=$?
ip=$(awk '/^iperf3 one stream:/ { print $4 }' "$tmp/out")
if [ $rc = 0 ] && awk -v v="$ip" 'BEGIN { exit !(v + 0 > 0) }'; then echo "ok 3 - one round: exit 0, iperf3 measured $ip GB/s"
else echo "not ok 3 - one round: exit $rc, iperf3 '$ip'"; sed 's/^/# /' "$tmp/out" | tail -20; fi
# rows: collective bytes GB/s ratio, ratio = GB/s / iperf3's
nrow=$(awk -v ip="$ip" '($1 == "sendrecv" || $1 == "allreduce") && $2 == 1048576 && $3 + 0 > 0 {
	d = $3 / ip - $4; if (d < 0) d = -d; if (d <= 0.006) n++ } END { print n + 0 }' "$tmp/out")
if [ "$nrow" = 2 ]; then echo "ok 4 - a row each for sendrecv and all-reduce of 1 MiB, rate > 0 and ratio = rate / iperf3's"
else echo "not ok 4 - $nrow of 2 consistent rows"; sed 's/^/# /' "$tmp/out" | tail -10; fi
