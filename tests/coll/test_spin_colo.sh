#!/bin/sh
# SPDX-License-Identifier: MIT
# test_spin_colo.sh - waits stop busy-polling when a peer shares the rank's
# core (src/net/net.c, ibc_net_wait_spin_ns()). A rank that spins while the
# peer it waits for sits on the same core only delays that peer: each wait
# cost the whole IBC_SPIN_US (50 us) before it yielded, so a 2-rank 8-byte
# all-reduce took 41-55 us instead of 0.5 us on a host where the scheduler
# had put both ranks on one core (while a nice-19 job held the other).
# Here both ranks are pinned to CPU 0 with IBC_SPIN_US=50 set (set by hand,
# so the oversubscription rule does not turn spinning off):
#   1. the shm all-reduce's waits (IBC_ALGO=shm): exact results, and a
#      rank (usually both) logs that a peer shares its core;
#   2. the message waits (sendrecv, broadcast over the shm transport): the
#      same;
#   3. the control: IBC_SPIN_US unset, so 2 ranks on 1 CPU never spin (the
#      oversubscription rule): no such line.
# Every run is bounded by the launcher's 60 s and IBC_TIMEOUT_MS=20000.
b=$top_builddir
run=$top_srcdir/tests/scripts/run_local_ranks.sh
log=$(mktemp)
wrap=$(mktemp)
trap 'rm -f "$log" "$wrap"' EXIT
echo "1..3"
if ! taskset -c 0 true 2>/dev/null; then
	for i in 1 2 3; do echo "ok $i # SKIP taskset cannot pin to CPU 0 here"; done
	exit 0
fi
cat >"$wrap" <<EOW
#!/bin/sh
exec taskset -c 0 "$b/tests/coll/coll_check" "\$@"
EOW
chmod +x "$wrap"
line="shares this rank's core"

# check K NAME SPIN_US ARGS...: both ranks pass; $want to $most ranks log the line
check() {
	local k=$1 name=$2 spin=$3 npass nline
	shift 3
	if [ "$spin" = unset ]; then
		env -u IBC_SPIN_US IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=INIT,NET IBC_TRANSPORT=shm IBC_TIMEOUT_MS=20000 \
			"$run" -n 2 -t 60 -- "$wrap" "$@" >"$log" 2>&1
	else
		env IBC_SPIN_US="$spin" IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=INIT,NET IBC_TRANSPORT=shm \
			IBC_TIMEOUT_MS=20000 "$run" -n 2 -t 60 -- "$wrap" "$@" >"$log" 2>&1
	fi
	rc=$?
	npass=$(grep -c '^coll_check rank .*: PASS:' "$log")
	# coll_check makes more than one communicator: count ranks, not lines
	nline=$(grep "$line" "$log" | grep -o '\[rank [0-9]*\]' | sort -u | wc -l)
	if [ $rc -eq 0 ] && [ "$npass" -eq 2 ] && [ "$nline" -ge "$want" ] && [ "$nline" -le "$most" ]; then
		echo "ok $k - $name: exact on both ranks, $nline rank(s) saw the shared core$(grep -m1 -o 'PASS: [0-9]* checks' "$log" | sed 's/^/, /')"
	else
		echo "not ok $k - $name: exit $rc, $npass of 2 ranks passed, $nline ranks logged '$line' (want $want to $most)"
		grep -E "$line|FAIL|ERROR|waits yield" "$log" | head -10 | sed 's/^/# /'
		tail -5 "$log" | sed 's/^/# /'
	fi
}
# at least one rank: the 48 calls of case 1 take 0.04 s, and a rank that found
# its peer's part written at every call but one never waits twice in a row
# (seen once in a loaded make check: rank 1 logged it, rank 0 did not)
want=1
most=2
IBC_ALGO=shm
export IBC_ALGO
check 1 "both ranks on CPU 0, IBC_SPIN_US=50, shm all-reduce" 50 -c allreduce \
	-n 1,7,1000 -d int32,float32 -o sum,max -m blocking --no-errors
unset IBC_ALGO
check 2 "both ranks on CPU 0, IBC_SPIN_US=50, sendrecv and broadcast" 50 -c sendrecv,broadcast \
	-n 1,7,1000 -d int32,float32 -m blocking --no-errors
want=0
most=0
check 3 "both ranks on CPU 0, IBC_SPIN_US unset (no spinning on 1 CPU)" unset -c allreduce,sendrecv \
	-n 1,7,1000 -d int32 -o sum -m blocking --no-errors
grep -q 'waits yield instead of spinning' "$log" ||
	echo "# note: the oversubscription line was not seen in run 3"
