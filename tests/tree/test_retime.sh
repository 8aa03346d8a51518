#!/bin/sh
# SPDX-License-Identifier: MIT
# test_retime.sh - the tuner's re-timing (src/tune/tune_retime.c, "Re-timing"):
# at the IBC_TUNING_RETIME-th all-reduce of each size class every rank times
# the candidates at the same call, logs them on rank 0, and runs the class
# with the fastest (the choice it had stands within 5 %); a timing that
# reported 4x its times (IBC_FAULT_INJECT=retime:1, a timing under load) is
# caught at the first checkpoint, 256 calls later, and the class is timed
# again; results stay exact in place and out of place on 2 and 3 ranks over
# shm and tcp with every size class timed at its first call; no re-timing
# with IBC_TUNING_RETIME=0, IBC_ALGO or IBC_TUNING_PROBE=0. Emits TAP.
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
bench=$top_builddir/bench/ibc_bench
check=$top_builddir/tests/coll/coll_check
run=$top_srcdir/tests/scripts/run_local_ranks.sh
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$bench" ] || [ ! -x "$check" ]; then
	echo "1..0 # SKIP $bench or $check not built"
	exit 0
fi

echo "1..14"
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; grep -v '^ *[0-9]' "$tmp/log" | sed 's/^/# /' | tail -n 12; fi; }

# ibc_bench with the tuner's INFO lines; $1 ranks, $2 transport, the rest ibc_bench's
bench() {
	nr=$1
	tp=$2
	shift 2
	IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=TUNING IBC_TUNING_FILE= IBC_TIMEOUT_MS=30000 \
		timeout -k 5 200 "$bench" --local "$nr" -t "$tp" "$@" > "$tmp/log" 2>&1
}

# every data row of ibc_bench's table has 0 wrong elements
exact() {
	awk '!/^ *#/ && NF >= 12 && $1 ~ /^[0-9]+$/ { rows++; if ($11 != 0) bad++ }
	     END { exit !(rows > 0 && bad == 0) }' "$tmp/log"
}

# the re-timing lines: "<bytes> <call> <chosen> <chosen's us> <fastest us>"
retimed() {
	grep '\[rank 0\] .*TUNING re-timed all-reduce of' "$tmp/log" | awk '{
		sub(/.*re-timed all-reduce of /, "")
		bytes = $1
		call = $0; sub(/.*, call /, "", call); sub(/,.*/, "", call)
		chose = $NF
		body = $0; sub(/^[^)]*\): /, "", body); sub(/; [a-z]+ -> [a-z]+$/, "", body)
		k = split(body, c, ", ")
		fast = -1; mine = -1
		for (i = 1; i <= k; i++) {
			split(c[i], f, " ")
			if (fast < 0 || f[2] + 0 < fast) fast = f[2] + 0
			if (f[1] == chose) mine = f[2] + 0
		}
		print bytes, call, chose, mine, fast
	}'
}

# at each re-timed size the choice is within 5 % (+ the log's rounding) of the fastest
judge() {
	retimed > "$tmp/rt"
	awk '{ rows++; if (!($4 >= 0 && $4 <= 1.05 * $5 + 0.1)) { bad++; print "# " $0 } }
	     END { exit !(rows > 0 && bad == 0) }' "$tmp/rt"
}

for tp in shm tcp; do
	bench 2 "$tp" allreduce -b 8 -e 4M -f 8 -n 3 -w 5
	rc=$?
	[ $rc = 0 ] && exact
	ok $? "$tp, 2 ranks, 8 B to 4 MiB: every size exact (rc $rc)"
	judge
	r=$?
	cnt=$(wc -l < "$tmp/rt")
	calls=$(awk '$2 != 4' "$tmp/rt" | wc -l)
	[ $r = 0 ] && [ "$cnt" = 7 ] && [ "$calls" = 0 ]
	ok $? "$tp, 2 ranks: the 7 size classes each re-timed once, at their 4th call, the choice within 5 % of the fastest ($cnt lines)"
done

bench 3 shm allreduce -b 7 -e 1M -f 8 -n 3 -w 5 -d int32 -o max
rc=$?
[ $rc = 0 ] && exact && judge
ok $? "shm, 3 ranks, int32 max from 7 elements: exact, re-timed, the choice within 5 % of the fastest (rc $rc)"

# a timing under load is caught at the first checkpoint (call 4 + 256) and
# redone. The checkpoint compares the fastest of the calls since with the
# timing: under a make check's other tests those calls can be slowed as much
# as the injected 4x (twice in two loaded runs on 2026-12-03, never in 14
# quiet or busy-loop runs, 7 of them before the shm line change), so a run
# without the second timing is run again, up to 3 runs; without the
# injection there is no second timing at all.
try=0
while :; do
	try=$((try + 1))
	IBC_FAULT_INJECT=retime:1 bench 2 shm allreduce -b 64K -e 64K -n 300 -w 5
	rc=$?
	retimed > "$tmp/rt"
	{ [ $rc = 0 ] && exact && [ "$(wc -l < "$tmp/rt")" -ge 2 ] &&
		awk 'NR == 2 { exit !($2 == 260) }' "$tmp/rt" &&
		grep -q 're-timed all-reduce of 65536 bytes.*call 260, its calls ran at 0\.[0-9]*x the timing' "$tmp/log"; } && break
	echo "# run $try: rc $rc, re-timings (bytes, call, choice, its us, fastest us):"
	sed 's/^/# /' "$tmp/rt"
	[ $try -ge 3 ] && break
done
[ $rc = 0 ] && exact && [ "$(wc -l < "$tmp/rt")" -ge 2 ] &&
	awk 'NR == 2 { exit !($2 == 260) }' "$tmp/rt" &&
	grep -q 're-timed all-reduce of 65536 bytes.*call 260, its calls ran at 0\.[0-9]*x the timing' "$tmp/log"
ok $? "a re-timing that reported 4x its times: the checkpoint at call 260 finds the calls faster and times again (rc $rc; run $try of at most 3)"

# exact in place and out of place with every size class timed at its first call
for case in "2 shm" "3 shm" "2 tcp" "3 tcp"; do
	set -- $case
	IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=TUNING IBC_TUNING_FILE= IBC_TRANSPORT=$2 \
		IBC_TUNING_RETIME=1 IBC_TIMEOUT_MS=60000 "$run" -n "$1" -t 200 -- "$check" -c allreduce \
		-n 1,7,8192,65537,524287 -d int32,float32,float64 -o sum,max --large-from 1000000 \
		--no-errors --no-bf16-case > "$tmp/log" 2>&1
	rc=$?
	[ $rc = 0 ] && grep -q 'TUNING re-timed all-reduce' "$tmp/log"
	ok $? "$2, $1 ranks, IBC_TUNING_RETIME=1: coll_check all-reduce in and out of place exact (rc $rc)"
done

# off
for setting in IBC_TUNING_RETIME=0 IBC_ALGO=ring IBC_TUNING_PROBE=0; do
	(export "$setting"; bench 2 shm allreduce -b 8 -e 8 -n 20 -w 5)
	rc=$?
	[ $rc = 0 ] && exact && ! grep -q 'TUNING re-timed' "$tmp/log"
	ok $? "$setting: no re-timing (rc $rc)"
done

# a steady loop is not re-timed at every checkpoint: 5000 8-byte calls pass
# the checkpoints at 260, 772, 1796 and 3844; each of them compared the
# slowest rank's fastest call with the timing's fastest repetition before
# (0.4-0.65x, the job's calls find data waiting more often than back-to-back
# ones) and timed again at all 4, in every run. Now the first checkpoint sets
# the baseline and the others compare calls with calls: at most 2. Load that
# comes and goes does move the calls for real (a make check's other tests,
# or 3 busy loops on for 3 ms and off for 3 ms: 1 run in 6 timed again at
# all 4, at 2.1-3.3x), so a run that timed again more than twice is run
# again, up to 5 runs: the old bias timed again at all 4 in every one.
try=0
while :; do
	try=$((try + 1))
	bench 2 shm allreduce -b 8 -e 8 -n 5000 -w 5
	rc=$?
	ndrift=$(grep -c '\[rank 0\] .*TUNING re-timed all-reduce of 8 bytes.*its calls ran at' "$tmp/log")
	{ [ $rc = 0 ] && exact && [ "$ndrift" -le 2 ]; } && break
	echo "# run $try: rc $rc, $ndrift of 4 checkpoints timed again:"
	grep '\[rank 0\] .*TUNING re-timed all-reduce of 8 bytes.*its calls ran at' "$tmp/log" |
		sed 's/.*(size class/# (size class/; s/): .*//'
	[ $try -ge 5 ] && break
done
[ $rc = 0 ] && exact && [ "$ndrift" -le 2 ]
ok $? "5000 steady 8-byte calls: $ndrift of 4 checkpoints timed again (at most 2; run $try of at most 5; rc $rc)"
