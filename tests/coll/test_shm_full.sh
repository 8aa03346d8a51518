#!/bin/sh
# SPDX-License-Identifier: MIT
# test_shm_full.sh - a /dev/shm too small for ibcoll's segments
# (src/base/alloc.c, ibc_shm_map; docs/reliability.md, guarantee 7), as in a
# container with the default 64 MiB: each case runs in its own mount
# namespace (unshare -m) with a small tmpfs on /dev/shm.
#   1. 4 ranks over shm, 1 MiB: not even a 2-slot pair ring fits. Every rank
#      must end with an error, not a signal (before, the ranks whose stores
#      found no page died of SIGBUS, silently), and a rank that could not
#      reserve its ring names /dev/shm and its free space.
#   2. 2 ranks over shm, 5 MiB: the pair ring fits, the shm all-reduce's
#      segment (6 MiB with 1 MiB chunks) would leave no room for it. The
#      all-reduce falls back to the ring with a WARN, and ibc_bench's
#      all-reduces from 8 B to 2 MiB are exact.
#   3. 2 ranks over shm, 3 MiB, no shm all-reduce: the 8-slot ring (4 MiB)
#      is more than the 3 MiB share, the lower rank halves it to 4 slots
#      with a WARN, and the all-reduces are exact.
#   4. 8 ranks over shm, 64 MiB (a container's default): every ring gets 4
#      slots (the size shared by the 28 pairs), one WARN per rank that made
#      a ring, and the all-reduces from 8 B to 16 MiB are exact. Reserving 8-slot
#      rings whole, the first pairs took all the room and a later pair's
#      connection failed.
#   5. 2 ranks, 2 MiB, defaults: the shm all-reduce's segment (1.5 MiB and a little)
#      would leave no room for a 2-slot ring (1 MiB): it gives way (WARN),
#      and the job runs exact. Before, it took the room and the ring failed.
#   6. 5 ranks, 20 MiB: comm_check, whose split communicators each open
#      rings and an all-reduce segment, passes on every rank. Before, a rank
#      that had made no ring of the world sized a 2-rank split's rings for
#      2 ranks (8 slots) and a later ring did not fit.
# SKIPs where a mount namespace cannot be made (not root, no unshare).
# Every wait is bounded: IBC_TIMEOUT_MS=20000 and the launcher's 120 s.
b=$top_builddir
run=$top_srcdir/tests/scripts/run_local_ranks.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

if ! unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs /dev/shm' 2>/dev/null; then
	echo "1..0 # SKIP cannot mount a tmpfs in a new mount namespace (needs root and unshare)"
	exit 0
fi
echo "1..7"

# each rank's exit status, for telling an error from a signal
cat >"$dir/rank.sh" <<'EOW'
#!/bin/sh
"$@"
echo $? >"$RC_DIR/rc.$IBC_RANK"
EOW
chmod +x "$dir/rank.sh"

# case 1: 4 ranks, 1 MiB
mkdir "$dir/c1"
RC_DIR=$dir/c1 IBC_TRANSPORT=shm IBC_TIMEOUT_MS=20000 unshare -m sh -c '
	mount -t tmpfs -o size=1m tmpfs /dev/shm || exit 99
	exec "$0" -n 4 -t 120 -- "$1" "$2" allreduce -b 8M -e 8M -n 3 -w 1' \
	"$run" "$dir/rank.sh" "$b/bench/ibc_bench" >"$dir/c1.log" 2>&1
rc=$?
nerr=0
nsig=0
for r in 0 1 2 3; do
	s=$(cat "$dir/c1/rc.$r" 2>/dev/null || echo missing)
	case $s in
	missing) nsig=$((nsig + 1)) ;;
	0) ;;
	*[!0-9]* | '') nsig=$((nsig + 1)) ;;
	*) if [ "$s" -ge 128 ]; then nsig=$((nsig + 1)); else nerr=$((nerr + 1)); fi ;;
	esac
done
named=$(grep -c 'IBC ERROR SHM .*cannot reserve [0-9]* bytes in /dev/shm: No space left on device ([0-9.]* of 1.0 MiB free.*even with 2 slots' "$dir/c1.log")
if [ "$rc" -ne 99 ] && [ "$nerr" -eq 4 ] && [ "$nsig" -eq 0 ]; then
	echo "ok 1 - 1 MiB /dev/shm, 4 ranks: every rank ends with an error, none with a signal"
else
	echo "not ok 1 - 1 MiB /dev/shm, 4 ranks: $nerr ranks with an error status, $nsig killed or missing (launcher $rc)"
	sed 's/^/# /' "$dir/c1.log" | tail -20
fi
if [ "$named" -ge 1 ]; then
	echo "ok 2 - the rank that could not reserve its ring says so, with /dev/shm's free space"
else
	echo "not ok 2 - no 'cannot reserve ... in /dev/shm' ERROR line"
	grep 'IBC ERROR' "$dir/c1.log" | head -5 | sed 's/^/# /'
fi

# bench_case N DESC TMPFS NRANKS NSIZES WARN_RE MAXSIZE [VAR=VALUE...]: an
# exact ibc_bench all-reduce from 8 B (x 8) to MAXSIZE on NRANKS ranks over
# shm with a TMPFS-sized /dev/shm and the variables given; passes when every
# size ran and was exact, WARN_RE matched a line and no ERROR was logged.
# One communicator only (coll_check also splits, and a second
# communicator's rings would not fit).
bench_case() {
	n=$1 desc=$2 size=$3 nr=$4 nsz=$5 re=$6 max=$7
	shift 7
	env IBC_TRANSPORT=shm IBC_TIMEOUT_MS=30000 IBC_DEBUG=WARN "$@" unshare -m sh -c '
		mount -t tmpfs -o size=$0 tmpfs /dev/shm || exit 99
		exec "$1" -n "$2" -t 120 -- "$3" allreduce -b 8 -e "$4" -f 8 -n 2 -w 1 -c 1' \
		"$size" "$run" "$nr" "$b/bench/ibc_bench" "$max" >"$dir/c$n.log" 2>&1
	rc=$?
	nok=$(grep -c '^# Wrong elements: 0 OK' "$dir/c$n.log")
	nsizes=$(grep -c '^ *[0-9][0-9]* *[0-9][0-9]* *float *sum' "$dir/c$n.log")
	nwarn=$(grep -c "$re" "$dir/c$n.log")
	nerr=$(grep -c 'IBC ERROR' "$dir/c$n.log")
	if [ "$rc" -eq 0 ] && [ "$nok" -eq 1 ] && [ "$nsizes" -eq "$nsz" ] && [ "$nwarn" -ge 1 ] &&
		[ "$nerr" -eq 0 ]; then
		echo "ok $n - $size /dev/shm, $nr ranks: $desc ($nwarn WARN lines), $nsz sizes exact"
	else
		echo "not ok $n - $size /dev/shm, $nr ranks: $desc: rc $rc, $nsizes of $nsz sizes, exact: $nok, $nwarn WARN lines, $nerr ERROR lines"
		grep 'IBC ERROR' "$dir/c$n.log" | head -3 | sed 's/^/# /'
		tail -10 "$dir/c$n.log" | sed 's/^/# /'
	fi
}

# case 2: the ring (4 MiB) fits, the shm all-reduce segment (2 (n + 1)
# chunks of 1 MiB = 6 MiB) does not, whichever is mapped first
bench_case 3 "the shm all-reduce falls back to the ring" 5m 2 7 \
	'IBC WARN COLL .*shm all-reduce: its [0-9]*-byte segment would leave too little room for the rings (/dev/shm has .* MiB free, and 2 ranks. rings need 1.0 MiB at 2 slots); using the ring' \
	4M IBC_SHM_ALLREDUCE_CHUNK_BYTES=1048576
# case 3: no shm all-reduce; the 8-slot ring does not fit, 4 slots do
bench_case 4 "the ring is halved to 4 slots" 3m 2 7 \
	'IBC WARN SHM .*shm ring with rank 1: 4 slots of 262144 bytes per direction instead of 8 (3.0 MiB a segment: /dev/shm has .* free, for 2 ranks' \
	4M IBC_SHM_ALLREDUCE=0
# case 4: 8 ranks in a container's default: every ring's share is 4 slots
bench_case 5 "rings of 4 slots, the share of 28 pairs" 64m 8 8 \
	'IBC WARN SHM .*shm ring with rank [0-9]: 4 slots of 262144 bytes per direction instead of 8 (2.2 MiB a segment: /dev/shm has .* of 64.0 MiB free, for 8 ranks' \
	16M
# case 5: 2 ranks in 2 MiB: the optional segment gives way to the ring
bench_case 6 "the shm all-reduce gives way to a 2-slot ring" 2m 2 7 \
	'IBC WARN COLL .*shm all-reduce: its 15[0-9]*-byte segment would leave too little room for the rings' \
	4M

# case 6: comm_check's splits on 5 ranks in 20 MiB
IBC_TRANSPORT=shm IBC_TIMEOUT_MS=30000 IBC_DEBUG=WARN unshare -m sh -c '
	mount -t tmpfs -o size=20m tmpfs /dev/shm || exit 99
	exec "$0" -n 5 -t 120 -- "$1"' "$run" "$b/tests/coll/comm_check" >"$dir/c7.log" 2>&1
rc=$?
npass=$(grep -c '^rank [0-9]*: PASS: ' "$dir/c7.log")
if [ "$rc" -eq 0 ] && [ "$npass" -eq 5 ]; then
	echo "ok 7 - 20m /dev/shm, 5 ranks: comm_check with its split communicators passes on every rank"
else
	echo "not ok 7 - 20m /dev/shm, 5 ranks: comm_check rc $rc, $npass of 5 ranks passed"
	grep 'IBC ERROR\|FAIL' "$dir/c7.log" | head -5 | sed 's/^/# /'
fi
