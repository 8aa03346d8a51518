#!/bin/sh
# SPDX-License-Identifier: MIT
# test_bench_output.sh - ibc_bench's machine-readable output and plot.sh: a
# short 2-rank allreduce sweep (4 sizes) with --csv and --json, checked for
# the column header, one row per size with 0 wrong elements and a busbw
# equal to algbw * 2(n-1)/n; the JSON must parse (python3) and hold the
# same 4 rows; plot.sh must then write a PNG (SKIPped without gnuplot);
# -a with an unknown algorithm is a usage error (exit 2), a known one runs;
# -b 0 is a usage error; sizes that are not whole elements are said once.
# Emits TAP.
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
bench=$top_builddir/bench/ibc_bench
tmp=${TMPDIR:-/tmp}/ibc_bench_out.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$bench" ]; then
	echo "1..0 # SKIP $bench not built"
	exit 0
fi
echo "1..18"
n=0
fail=0
ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi
}

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo $((30000 + $$ % 20000)))
IBC_RANK=1 IBC_NRANKS=2 IBC_ROOT=127.0.0.1:$port IBC_TIMEOUT_MS=60000 \
	timeout -k 5 120 "$bench" allreduce -b 1K -e 64K -f 4 -n 3 -w 1 -c 1 >"$tmp/r1" 2>&1 &
pid=$!
IBC_RANK=0 IBC_NRANKS=2 IBC_ROOT=127.0.0.1:$port IBC_TIMEOUT_MS=60000 \
	timeout -k 5 120 "$bench" allreduce -b 1K -e 64K -f 4 -n 3 -w 1 -c 1 \
	--csv "$tmp/out.csv" --json "$tmp/out.json" >"$tmp/r0" 2>&1
rc=$?
wait $pid || rc=1
ok $rc "2 ranks with --csv and --json exit 0"
[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/r0" "$tmp/r1"

head -1 "$tmp/out.csv" | grep -q '^coll,nranks,nhosts,transport,algo,blocking,bytes,count,dtype,op,root,time_us,min_us,max_us,algbw_GBps,busbw_GBps,wrong,mpi_time_us'
ok $? "CSV header"
awk -F, 'NR == 1 { n = NF } NF != n { bad = 1 } END { exit bad || n != 28 }' "$tmp/out.csv"
ok $? "CSV: every row has the 28 columns of the header"
rows=$(awk -F, 'NR > 1 && $1 == "allreduce" && $2 == 2 && $17 == "0"' "$tmp/out.csv" | wc -l)
[ "$rows" -eq 4 ]
ok $? "CSV: 4 allreduce rows (1K 4K 16K 64K) with 0 wrong (got $rows)"
awk -F, 'NR > 1 { s = 1024 * 4 ^ (NR - 2); if ($7 != s || $8 != s / 4) bad = 1 }
	END { exit bad }' "$tmp/out.csv"
ok $? "CSV: bytes and count columns"
awk -F, 'NR > 1 { d = $16 - $15 * 2 * (2 - 1) / 2; if (d > 1e-5 || d < -1e-5 || $12 <= 0) bad = 1 }
	END { exit bad }' "$tmp/out.csv"
ok $? "CSV: busbw = algbw * 2(n-1)/n, time > 0"
# the floor: header's memcpy rate m GB/s; a 2-rank all-reduce of N bytes on
# one host must move 2 N per rank: floor_us = 2 N / (2 m) / 1e3 (x 1: 2 cores
# or more) and floor_frac = floor_us / time_us, in the text's floor column too
m=$(sed -n 's/^# floor     : memcpy \([0-9.]*\) GB\/s on one core.*/\1/p' "$tmp/r0")
[ -n "$m" ] && awk -F, -v m="$m" -v c="$(nproc)" 'NR > 1 { s = c >= 2 ? 1 : 2 / c; f = $7 / m / 1e3 * s
	if ($27 <= 0 || ($27 - f) > 0.002 * f + 0.002 || (f - $27) > 0.002 * f + 0.002 || ($28 - $27 / $12) > 0.001 || ($27 / $12 - $28) > 0.001) bad = 1 }
	END { exit bad || NR != 5 }' "$tmp/out.csv" &&
	[ "$(awk '$1 ~ /^[0-9]+$/ && $13 ~ /%$/' "$tmp/r0" | wc -l)" = 4 ]
ok $? "floor: memcpy ${m:-?} GB/s in the header; floor_us = 2 N / (2 memcpy) per row, floor_frac = floor_us / time_us, a floor % per text row"

if command -v python3 >/dev/null 2>&1; then
	python3 - "$tmp/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "ibc_bench" and d["nranks"] == 2, d
rows = d["rows"]
assert [r["bytes"] for r in rows] == [1024, 4096, 16384, 65536], rows
assert all(r["wrong"] == 0 and r["coll"] == "allreduce" and r["busbw_GBps"] > 0 for r in rows), rows
assert d["wrong_total"] == 0
PY
	ok $? "JSON parses and holds the 4 rows"
else
	echo "ok $((n = n + 1)) # SKIP python3 not found"
fi
grep -q '^# Avg bus bandwidth    : ' "$tmp/r0"
ok $? "text output has the average busbw line"

IBC_TIMEOUT_MS=60000 timeout -k 5 120 "$bench" --local 3 allreduce barrier -b 4K -e 4K -n 2 -w 1 \
	>"$tmp/local" 2>&1
ok $? "--local 3 starts its own ranks and exits 0"
grep -q '^# ranks     : 3 on 1 host' "$tmp/local" && grep -q '^# Wrong elements: 0 OK' "$tmp/local"
ok $? "--local 3: header shows 3 ranks, 0 wrong elements"

"$bench" allreduce -a foo -b 4K -e 4K >"$tmp/bad_a" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "^ibc_bench: unknown algorithm 'foo' (auto, ring, tree, rd, rabenseifner or shm)" "$tmp/bad_a"
ok $? "-a foo: exit 2 (got $rc) and names the valid algorithms"
"$bench" allreduce -b 0 -e 0 >"$tmp/b0" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -qx "ibc_bench: -b 0: a 0-byte call moves nothing to time; sizes start at 1 byte" "$tmp/b0"
ok $? "-b 0 -e 0: exit 2 (got $rc) with one line saying why"
IBC_TIMEOUT_MS=60000 timeout -k 5 120 "$bench" --local 1 allreduce -b 6 -e 6 -n 2 -w 1 \
	>"$tmp/b6" 2>"$tmp/b6.err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c . "$tmp/b6.err")" = 1 ] &&
	grep -qx "ibc_bench: -b 6 is not a multiple of the 4-byte float; measuring 4 bytes" "$tmp/b6.err" &&
	[ "$(awk '$1 ~ /^[0-9]+$/ { print $1, $2 }' "$tmp/b6")" = "4 1" ]
ok $? "-b 6 float: exit 0 (got $rc), one stderr line says 4 bytes are measured, one row of 4 bytes"
[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/b6.err"
IBC_TIMEOUT_MS=60000 timeout -k 5 120 "$bench" --local 1 allreduce -b 6 -e 24 -i 6 -n 2 -w 1 \
	>"$tmp/b6i" 2>"$tmp/b6i.err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c . "$tmp/b6i.err")" = 1 ] &&
	grep -qx "ibc_bench: 2 sizes are not a multiple of the 4-byte float and are rounded down to whole elements (6 bytes measures 4)" "$tmp/b6i.err" &&
	[ "$(awk '$1 ~ /^[0-9]+$/ { printf "%s ", $1 }' "$tmp/b6i")" = "4 12 16 24 " ]
ok $? "-b 6 -e 24 -i 6: exit 0 (got $rc), one line for the 2 rounded sizes, rows 4 12 16 24"
IBC_TIMEOUT_MS=60000 timeout -k 5 120 "$bench" --local 3 allreduce -a rabenseifner -b 4K -e 64K -f 16 \
	-n 2 -w 1 >"$tmp/algo" 2>&1 &&
	grep -q '^# algorithm : IBC_ALGO=rabenseifner' "$tmp/algo" && grep -q '^# Wrong elements: 0 OK' "$tmp/algo"
ok $? "-a rabenseifner --local 3: exit 0, header names it, 0 wrong elements"

if command -v gnuplot >/dev/null 2>&1; then
	sh "$top_srcdir/bench/plot.sh" -o "$tmp/p.png" "$tmp/out.csv=test" >"$tmp/plot.log" 2>&1
	ok $? "plot.sh exits 0"
	[ "$(head -c 4 "$tmp/p.png" | od -An -c | tr -d ' ')" = "211PNG" ]
	ok $? "plot.sh wrote a PNG"
else
	echo "ok $((n = n + 1)) # SKIP gnuplot not found"
	echo "ok $((n = n + 1)) # SKIP gnuplot not found"
fi
exit $fail
