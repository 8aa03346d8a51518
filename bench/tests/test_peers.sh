#!/bin/sh
# SPDX-License-Identifier: MIT
# test_peers.sh - bench/peers.sh on a small sweep (2 and 3 ranks, 8 B and
# 4 KiB, every collective, one round): it exits 0 (every harness checked its
# results exactly), prints one row per collective and size with ibcoll's
# and Open MPI's times and a ratio, MPICH's where mpicc.mpich and
# mpiexec.mpich exist and ranks <= cores (3 ranks on 2 cores: its column is
# "-" and the notes say why), Gloo's where PyTorch has it (reduce_scatter
# "-"), and the ratio is ibcoll's time over the fastest peer's of the row.
# SKIP without Open MPI (no bench/peer_bench). Emits TAP.
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$top_builddir/bench/peer_bench" ] || ! command -v mpirun >/dev/null 2>&1; then
	echo "1..0 # SKIP no bench/peer_bench (configure found no Open MPI)"
	exit 0
fi
echo "1..11"
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; sed 's/^/# /' "$tmp/out" | tail -n 20; fi; }

# 8 B and 4 KiB: on 3 ranks all-gather, reduce-scatter and all-to-all have
# no whole float per rank at 8 B (no row), and move 4092 bytes at 4 KiB
for nr in 2 3; do
if [ $nr = 2 ]; then nrows=10; nrs=2; else nrows=7; nrs=1; fi
timeout -k 5 600 sh "$top_srcdir/bench/peers.sh" -n $nr -b 8 -e 4096 -f 512 -i 3 -w 1 -R 1 \
	"$top_builddir" > "$tmp/out" 2>&1
rc=$?
ok $rc "peers.sh -n $nr, 8 B and 4 KiB, 5 collectives: exit 0, every harness exact"

rows() { awk -v nr=$nr '$1 == nr && $3 ~ /^[0-9]+$/' "$tmp/out"; }
[ "$(rows | wc -l)" = $nrows ] && [ "$(rows | awk '$4 + 0 > 0 && $5 + 0 > 0' | wc -l)" = $nrows ] &&
	{ [ $nr = 2 ] || [ "$(rows | awk '$2 == "allgather" { print $3 }')" = 4092 ]; }
ok $? "$nr ranks: $nrows rows (5 collectives x 2 sizes, less those with no whole float per rank), each with ibcoll's and Open MPI's time, sized by what moved"

# the ratio column is ibcoll / the fastest numeric peer column (to 2 decimals)
rows | awk '{ b = ""; for (i = 5; i <= 7; i++) if ($i != "-" && (b == "" || $i + 0 < b)) b = $i + 0
	r = $4 / b; if ($8 == "-" || $8 - r > 0.006 || r - $8 > 0.006) bad = 1 } END { exit bad }'
ok $? "$nr ranks: ratio = ibcoll / the fastest peer, every row"

if command -v mpicc.mpich >/dev/null 2>&1 && command -v mpiexec.mpich >/dev/null 2>&1; then
	if [ "$nr" -le "$(nproc)" ]; then
		[ "$(rows | awk '$6 + 0 > 0' | wc -l)" = $nrows ]
		ok $? "$nr ranks: MPICH timed every row"
	else
		[ "$(rows | awk '$6 == "-"' | wc -l)" = $nrows ] &&
			grep -q "not run: mpich: not at $nr ranks on $(nproc) cores" "$tmp/out"
		ok $? "$nr ranks: MPICH not run on $(nproc) cores, and the notes say why"
	fi
else
	grep -q 'not run: mpich: not installed' "$tmp/out"
	ok $? "$nr ranks: MPICH missing: the notes say so"
fi

if /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
	[ "$(rows | awk '$2 != "reduce_scatter" && $7 + 0 > 0' | wc -l)" = $((nrows - nrs)) ] &&
		[ "$(rows | awk '$2 == "reduce_scatter" && $7 == "-"' | wc -l)" = $nrs ]
	ok $? "$nr ranks: Gloo timed every row but reduce_scatter's"
else
	grep -q 'not run: gloo:' "$tmp/out"
	ok $? "$nr ranks: Gloo missing: the notes say so"
fi
done

# bad options end at once with the reason (a factor of 1 once looped for ever)
bad=0
for a in "-f 1" "-e 4 -b 8" "-n 1" "-c foo" "-b x" "-t foo"; do
	timeout 20 sh "$top_srcdir/bench/peers.sh" $a "$top_builddir" > "$tmp/out" 2>&1
	rc=$?
	{ [ $rc = 2 ] && grep -q '^peers.sh: ' "$tmp/out"; } || { bad=1; echo "# $a: rc $rc"; }
done
[ $bad = 0 ]
ok $? "bad options (-f 1, -e below -b, -n 1, -c foo, -b x, -t foo): exit 2 with a one-line reason"
