#!/bin/sh
# SPDX-License-Identifier: MIT
# test_shm_allreduce.sh - the shm all-reduce's set-up and fallback
# (src/coll/shm_allreduce.c), with coll_check's exact all-reduce checks:
#   1. 3 ranks over shm: the segment is mapped on every rank (DEBUG line)
#      and the tuner offers shm in every decision and picks it (TUNING);
#   2. 3 ranks, rank 1 with IBC_SHM_ALLREDUCE=0: every rank declines the
#      segment and the all-reduces run on the ring, with IBC_ALGO=shm forced
#      (no hang, no wrong result);
#   3. 3 ranks over tcp: no segment at all (IBC_ALGO=shm is not honoured);
#   4. ranks with different IBC_SHM_ALLREDUCE_SMALL_BYTES adopt rank 0's
#      (they took different paths for one call before: a wrong result);
#   5. nothing named /dev/shm/ibc-ar-* is left behind by these runs.
# Every wait is bounded: IBC_TIMEOUT_MS=20000 and the launcher's 120 s.
b=$top_builddir
run=$top_srcdir/tests/scripts/run_local_ranks.sh
log=$(mktemp)
wrap=$(mktemp)
trap 'rm -f "$log" "$wrap"' EXIT
# rank 1 opts out (IBC_RANK is set by the env launcher)
cat >"$wrap" <<EOW
#!/bin/sh
[ "\$IBC_RANK" = 1 ] && export IBC_SHM_ALLREDUCE=0
exec "$b/tests/coll/coll_check" --quick -c allreduce -d int32,float32,bfloat16 -o sum,max,avg
EOW
chmod +x "$wrap"
before=$(ls /dev/shm 2>/dev/null | grep -c '^ibc-ar-')
echo "1..8"
dbg="IBC_DEBUG=DEBUG IBC_DEBUG_SUBSYS=COLL,TUNING IBC_TIMEOUT_MS=20000"

# shellcheck disable=SC2086 # word splitting of $dbg is intended
env $dbg IBC_TRANSPORT=shm "$run" -n 3 -t 120 -- "$b/tests/coll/coll_check" --quick \
	-c allreduce -d int32,float32,bfloat16 -o sum,max,avg >"$log" 2>&1
rc=$?
npass=$(grep -c '^coll_check rank .*: PASS:' "$log")
# coll_check creates more than one communicator: count ranks, not lines
nmap=$(grep 'shm all-reduce: segment mapped, 3 ranks' "$log" | grep -o '\[rank [0-9]*\]' | sort -u | wc -l)
nnot=$(grep -c 'shm all-reduce: not used' "$log")
nshm=$(grep -c ' over shm: shm/simple' "$log")
# The tuner must offer the shm all-reduce in every decision (a predicted
# time for it in "best per algorithm") and pick it in some. Which
# algorithm wins a given size depends on the probe: under load its alpha
# reaches a millisecond, and then recursive doubling's 3 steps beat the
# shm all-reduce's 2 synchronisations per 256 KiB chunk at 2 chunks.
nother=$(grep ' IBC INFO TUNING allreduce of [0-9]* bytes on ' "$log" | grep -vc ' over shm: shm/simple')
noffer=$(grep ' IBC INFO TUNING allreduce of [0-9]* bytes on ' "$log" | grep -vc ', shm [0-9.]*\( (timed [0-9.]*)\)\{0,1\} us)')
if [ "$rc" -eq 0 ] && [ "$npass" -eq 3 ]; then echo "ok 1 - shm, 3 ranks: exact results on every rank"
else echo "not ok 1 - shm, 3 ranks: rc $rc, $npass of 3 ranks passed"; tail -20 "$log" | sed 's/^/# /'; fi
if [ "$nmap" -eq 3 ] && [ "$nnot" -eq 0 ]; then echo "ok 2 - the segment is mapped on every rank"
else echo "not ok 2 - segment mapped on $nmap of 3 ranks, $nnot not used"; grep 'shm all-reduce' "$log" | head | sed 's/^/# /'; fi
if [ "$nshm" -gt 0 ] && [ "$noffer" -eq 0 ]; then echo "ok 3 - the tuner offers shm in every all-reduce decision and picks it in $nshm (others: $nother)"
else echo "not ok 3 - $nshm shm picks, $noffer decisions without a shm prediction"; grep ' TUNING allreduce of' "$log" | head -5 | sed 's/^/# /'; fi

# shellcheck disable=SC2086
env $dbg IBC_TRANSPORT=shm IBC_ALGO=shm "$run" -n 3 -t 120 -- "$wrap" >"$log" 2>&1
rc=$?
npass=$(grep -c '^coll_check rank .*: PASS:' "$log")
ndecl=$(grep 'shm all-reduce: not used (declined or failed on some rank)' "$log" | grep -o '\[rank [0-9]*\]' | sort -u | wc -l)
nmap=$(grep -c 'shm all-reduce: segment mapped' "$log")
nshm=$(grep -c ' over shm: shm/' "$log")
if [ "$rc" -eq 0 ] && [ "$npass" -eq 3 ] && [ "$ndecl" -eq 3 ] && [ "$nmap" -eq 0 ] && [ "$nshm" -eq 0 ]; then
	echo "ok 4 - one rank with IBC_SHM_ALLREDUCE=0: all three decline, the tuner does not pick shm, exact results"
else
	echo "not ok 4 - opt-out: rc $rc, $npass of 3 passed, $ndecl of 3 declined, $nmap mapped, $nshm shm decisions"; tail -20 "$log" | sed 's/^/# /'
fi

# shellcheck disable=SC2086
env $dbg IBC_TRANSPORT=tcp IBC_ALGO=shm "$run" -n 3 -t 120 -- "$b/tests/coll/coll_check" --quick \
	-c allreduce -d int32,float32 -o sum >"$log" 2>&1
rc=$?
npass=$(grep -c '^coll_check rank .*: PASS:' "$log")
nseg=$(grep -c 'shm all-reduce: segment mapped' "$log")
nshm=$(grep -c ' over tcp: shm/' "$log")
if [ "$rc" -eq 0 ] && [ "$npass" -eq 3 ] && [ "$nseg" -eq 0 ]; then echo "ok 5 - tcp on one host: no segment mapped, exact results"
else echo "not ok 5 - tcp: rc $rc, $npass of 3 passed, $nseg segment lines"; tail -20 "$log" | sed 's/^/# /'; fi
if [ "$nshm" -eq 0 ] && grep -q 'algorithm shm needs every rank on one host over shm' "$log"; then
	echo "ok 6 - IBC_ALGO=shm over tcp: not used, and the log says why"
else
	echo "not ok 6 - IBC_ALGO=shm over tcp: $nshm shm decisions"; grep 'TUNING' "$log" | head -5 | sed 's/^/# /'
fi

# ranks with different small-message thresholds: rank 0's is used by all
cat >"$wrap" <<EOW
#!/bin/sh
[ "\$IBC_RANK" = 0 ] && export IBC_SHM_ALLREDUCE_SMALL_BYTES=64
[ "\$IBC_RANK" = 1 ] && export IBC_SHM_ALLREDUCE_SMALL_BYTES=65536
exec "$b/tests/coll/coll_check" -c allreduce -n 1,7,16,17,1000,16384,65537 -d int32,float32 \
	-o sum,max -p out,in --no-errors --no-bf16-case
EOW
# shellcheck disable=SC2086
env $dbg IBC_TRANSPORT=shm IBC_ALGO=shm "$run" -n 3 -t 120 -- "$wrap" >"$log" 2>&1
rc=$?
npass=$(grep -c '^coll_check rank .*: PASS:' "$log")
nadopt=$(grep -c 'IBC_SHM_ALLREDUCE_SMALL_BYTES is 65536 here and 64 on rank 0' "$log")
if [ "$rc" -eq 0 ] && [ "$npass" -eq 3 ] && [ "$nadopt" -ge 1 ]; then
	echo "ok 7 - IBC_SHM_ALLREDUCE_SMALL_BYTES 64 on rank 0, 65536 on rank 1: rank 0's is used, exact results"
else
	echo "not ok 7 - thresholds differ: rc $rc, $npass of 3 passed, $nadopt adoption lines"; grep -v '^ok' "$log" | tail -20 | sed 's/^/# /'
fi

after=$(ls /dev/shm 2>/dev/null | grep -c '^ibc-ar-')
if [ "$after" -le "$before" ]; then echo "ok 8 - no /dev/shm/ibc-ar-* segment left ($before before, $after after)"
else echo "not ok 8 - /dev/shm/ibc-ar-* segments left: $before before, $after after"; fi
