#!/bin/sh
# SPDX-License-Identifier: MIT
# test_bench_tune.sh - `ibc_bench --tune FILE` on 2 local ranks over shm
# writes a tuning file that the library loads: the rows it must have, sane
# coefficients, ibc_info --tuning showing them as the fitted model with the
# same values, a second run (broadcast) appending to the file while its
# communicator starts from the file's model, and refusal of collectives the
# tuner does not decide for. Emits TAP.
set -u

top_builddir=${top_builddir:-.}
bench=$top_builddir/bench/ibc_bench
info=$top_builddir/tools/ibc_info
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$bench" ] || [ ! -x "$info" ]; then
	echo "1..0 # SKIP $bench or $info not built"
	exit 0
fi
export IBC_TIMEOUT_MS=60000 IBC_BOOTSTRAP_TIMEOUT_MS=30000
echo "1..9"
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
f=$tmp/tune.txt

timeout -k 5 240 "$bench" --local 2 -t shm --tune "$f" -b 8 -e 4K -f 8 -R 3 allreduce \
	> "$tmp/run1" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "^# fitted coefficients appended to $f" "$tmp/run1"
ok $? "ibc_bench --local 2 --tune FILE allreduce exits 0 (rc $rc)"
[ $rc = 0 ] || sed 's/^/# /' "$tmp/run1" | tail -20

grep -q '^# ibc_bench --tune: allreduce, 2 ranks over shm$' "$f" &&
	grep -q '^# ibcoll tuning file v1' "$f"
ok $? "file opens with the run's comment and the format line"

# rows: base simple and ll for shm at 2 ranks, all-reduce for the four algorithms
miss=
for row in "base - simple" "base - ll" "allreduce ring simple" "allreduce tree simple" \
	"allreduce rd simple" "allreduce rabenseifner simple" "allreduce rd ll"; do
	grep -q "^$row shm 2 " "$f" || miss="$miss [$row]"
done
[ -z "$miss" ]
ok $? "base and all-reduce rows for shm, 2 ranks${miss:+, missing:$miss}"

# every data row: 8 fields, 0 < alpha < 10 ms, 0 <= beta, gamma < 100 ns/B
bad=$(awk '!/^#/ && NF { if (NF != 8 || $6 + 0 <= 0 || $6 + 0 >= 10000 || $7 + 0 < 0 ||
	$7 + 0 >= 100 || $8 + 0 < 0 || $8 + 0 >= 100 || $6 !~ /^[0-9.]+$/) print }' "$f")
rows=$(grep -c '^[a-z]' "$f")
[ -z "$bad" ] && [ "$rows" -ge 7 ]
ok $? "$rows rows, every coefficient finite and in range${bad:+; bad: $bad}"

# the library loads it: ibc_info shows the file's values as the model
IBC_TUNING_FILE="$f" IBC_TRANSPORT=shm IBC_NRANKS=2 "$info" --tuning > "$tmp/info" 2>&1
grep -q '^# tuning model: 2 ranks over shm (coefficients from: file)' "$tmp/info"
ok $? "IBC_TUNING_FILE=FILE ibc_info --tuning: coefficients from the file"

want=$(awk '$1 == "allreduce" && $2 == "ring" && $3 == "simple" { printf "%.3f %.4f", $6, $7 }' "$f")
got=$(awk '$1 == "allreduce" && $2 == "ring" && $3 == "simple" && /fitted/ { printf "%.3f %.4f", $4, $5 }' \
	"$tmp/info")
[ -n "$want" ] && [ "$want" = "$got" ]
ok $? "ring/simple alpha and beta as written ($want) and shown ($got)"

# a second run starts from the file and appends broadcast rows
IBC_TUNING_FILE="$f" timeout -k 5 240 "$bench" --local 2 -t shm --tune "$f" -b 8 -e 512 -f 8 \
	-R 3 broadcast > "$tmp/run2" 2>&1
rc=$?
base=$(awk '$1 == "base" && $3 == "simple" { printf "%.2f", $6; exit }' "$f")
[ $rc = 0 ] && grep -q "^# model: simple alpha $base us, .*(file)" "$tmp/run2"
ok $? "IBC_TUNING_FILE=FILE ibc_bench --tune: the communicator's model is the file's (alpha $base us)"
[ "$(grep -c '^# ibc_bench --tune:' "$f")" = 2 ] && grep -q '^broadcast ring simple shm 2 ' "$f"
ok $? "second run appended broadcast rows"

"$bench" --tune "$tmp/x" alltoall > "$tmp/run3" 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'tuner decides for allreduce, broadcast and reduce only' "$tmp/run3" &&
	[ ! -e "$tmp/x" ]
ok $? "--tune with alltoall: usage error, no file (rc $rc)"
