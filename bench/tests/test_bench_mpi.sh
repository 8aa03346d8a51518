#!/bin/sh
# SPDX-License-Identifier: MIT
# test_bench_mpi.sh - ibc_bench --vs-mpi under Open MPI's mpirun: every
# collective on 3 ranks (shared memory, pml ob1 + btl self,vader), with
# -c 1: both the ibcoll and the MPI columns must show 0 wrong elements and a
# ratio; AVG reductions, which MPI lacks, must show n/a. SKIPs when the
# benchmark was built without MPI or mpirun is missing. Emits TAP.
set -u

top_builddir=${top_builddir:-.}
bench=$top_builddir/bench/ibc_bench
tmp=${TMPDIR:-/tmp}/ibc_bench_mpi.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$bench" ]; then
	echo "1..0 # SKIP $bench not built"
	exit 0
fi
if ! command -v mpirun >/dev/null 2>&1; then
	echo "1..0 # SKIP mpirun not found"
	exit 0
fi
if "$bench" --vs-mpi -h 2>&1 | grep -q "built without MPI"; then
	echo "1..0 # SKIP ibc_bench built without MPI"
	exit 0
fi
mpirun="mpirun --oversubscribe --mca pml ob1 --mca btl self,vader"
[ "$(id -u)" = 0 ] && mpirun="$mpirun --allow-run-as-root"

echo "1..6"
n=0
fail=0
ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi
}

IBC_TIMEOUT_MS=60000 timeout -k 5 240 $mpirun -np 3 -x IBC_TIMEOUT_MS "$bench" all --vs-mpi \
	-b 4 -e 600K -f 7 -n 2 -w 1 -c 1 --csv "$tmp/all.csv" >"$tmp/all.log" 2>&1
rc=$?
ok $rc "mpirun -np 3 ibc_bench all --vs-mpi exits 0"
[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/all.log"
grep -q '^# mpi       : Open MPI' "$tmp/all.log"
ok $? "header names the MPI library"
# every data row: ibcoll wrong ($17) and MPI wrong ($23) are 0, ratio ($24) > 0
awk -F, 'NR > 1 && $1 != "barrier" { rows++; if ($17 != "0" || $23 != "0" || !($24 > 0)) bad++ }
	NR > 1 { seen[$1] = 1 }
	END { for (c in seen) k++; exit !(rows >= 35 && !bad && k == 8) }' "$tmp/all.csv"
ok $? "every collective: ibcoll and MPI both 0 wrong, ratio present"

IBC_TIMEOUT_MS=60000 timeout -k 5 120 $mpirun -np 3 -x IBC_TIMEOUT_MS "$bench" allreduce \
	--vs-mpi -o avg -b 1K -e 4K -f 4 -n 1 -w 0 -c 1 --csv "$tmp/avg.csv" >"$tmp/avg.log" 2>&1
ok $? "AVG under --vs-mpi exits 0"
grep -q '| *n/a' "$tmp/avg.log"
ok $? "AVG rows show n/a in the MPI columns"
cat "$tmp/all.csv" "$tmp/avg.csv" | awk -F, '/^coll,/ { next } NF != 28 { bad = 1 } END { exit bad }'
ok $? "CSV rows with and without MPI columns all have 28 fields"
exit $fail
