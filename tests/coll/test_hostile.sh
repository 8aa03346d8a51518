#!/bin/bash
# SPDX-License-Identifier: MIT
# test_hostile.sh - the hostile inputs of issue 20 that need no peer that
# misbehaves (tests/coll/hostile_check: overlap, stale handles, the request
# limit, alignment, fork, the reduce-scatter's scratch, error texts) on 1,
# 2, 3 and 5 ranks over shm and tcp, a read-only receive buffer on one rank
# (badbuf), and the launch mistakes: ranks given
# different sizes, a rank number that is not a number, two ranks of one
# host that do not share /dev/shm (a mount namespace with its own tmpfs;
# needs root and unshare, else skipped), hosts with different numbers of
# ranks (a UTS namespace). Every launch is bounded (90 s).
b=$top_builddir
run=$top_srcdir/tests/scripts/run_local_ranks.sh
prog=$b/tests/coll/hostile_check
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=0
nfail=0

ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		nfail=$((nfail + 1))
		[ -f "$dir/log" ] && grep -v ': PASS: ' "$dir/log" | sed 's/^/# /' | tail -15
	fi
}

# the patterns, every rank PASSes each: "ranks transport progress-thread patterns"
pats="overlap stale align fork scratch"
cfgs="1 shm 1|2 shm 1|3 shm 1|5 shm 1|2 tcp 1|3 tcp 0|3 shm 0"
echo "1..$(($(echo "$cfgs" | tr '|' '\n' | wc -l) + 24))"
while read -r nr tp th; do
	start=$(date +%s)
	IBC_TRANSPORT=$tp IBC_PROGRESS_THREAD=$th IBC_TIMEOUT_MS=20000 \
		"$run" -n "$nr" -t 90 -- "$prog" $pats >"$dir/log" 2>&1
	rc=$?
	np=$(grep -c ': PASS: ' "$dir/log")
	ok $([ "$rc" -eq 0 ] && [ "$np" -eq $((5 * nr)) ] && echo 0 || echo 1) \
		"$nr ranks, $tp, progress thread $th: $pats pass on every rank ($(($(date +%s) - start)) s, $np PASS lines)"
done <<EOF
$(echo "$cfgs" | tr '|' '\n')
EOF

# the request limit: 16 taken on every rank whatever its speed, then IBC_ERR_LIMIT
for cfg in "3 shm 1" "3 tcp 0" "2 shm 0"; do
	set -- $cfg
	IBC_TRANSPORT=$2 IBC_PROGRESS_THREAD=$3 IBC_MAX_REQUESTS=16 IBC_TIMEOUT_MS=20000 \
		"$run" -n "$1" -t 90 -- "$prog" limit >"$dir/log" 2>&1
	rc=$?
	np=$(grep -c ': PASS: limit' "$dir/log")
	ok $([ "$rc" -eq 0 ] && [ "$np" -eq "$1" ] && echo 0 || echo 1) \
		"$1 ranks, $2, progress thread $3: IBC_MAX_REQUESTS=16 refuses request 17 on every rank with IBC_ERR_LIMIT, the communicator stays usable"
done

# a read-only receive buffer on rank 1: its own error names its buffer (shm), no hang
for cfg in "3 shm" "5 shm" "2 tcp"; do
	set -- $cfg
	IBC_TRANSPORT=$2 IBC_TIMEOUT_MS=20000 "$run" -n "$1" -t 90 -- "$prog" badbuf >"$dir/log" 2>&1
	rc=$?
	np=$(grep -c ': PASS: badbuf' "$dir/log")
	ok $([ "$rc" -eq 0 ] && [ "$np" -eq "$1" ] && echo 0 || echo 1) \
		"$1 ranks, $2: a broadcast into rank 1's read-only buffer fails on rank 1$([ "$2" = shm ] && echo " with IBC_ERR_INVALID_ARG naming its own buffer, and on every rank but the root, naming rank 1"); the world communicator stays usable"
done

# texts: split communicators name the world rank; one line for a bad dtype; a reused id
rm -f "$dir"/dbg-*
IBC_TRANSPORT=shm IBC_BOOTSTRAP_TIMEOUT_MS=5000 IBC_DEBUG_FILE="$dir/dbg-%p" \
	"$run" -n 3 -t 90 -- "$prog" texts >"$dir/log" 2>&1
rc=$?
np=$(grep -c ': PASS: texts' "$dir/log")
ok $([ "$rc" -eq 0 ] && [ "$np" -eq 3 ] && echo 0 || echo 1) \
	"3 ranks: a split communicator's errors name the world rank; a reused unique id says an id serves one creation; no stale rank after a failed init"
nd=$(cat "$dir"/dbg-* 2>/dev/null | grep -c 'invalid dtype 99')
nw=$(cat "$dir"/dbg-* 2>/dev/null | grep -c 'unknown dtype 99')
ok $([ "$nd" -eq 3 ] && [ "$nw" -eq 0 ] && echo 0 || echo 1) \
	"a bad dtype is one line per rank with its value ($nd lines 'invalid dtype 99', want 3; a second line 'unknown dtype 99' $nw times, want 0)"

# ranks given different sizes: every rank fails at once, naming both sizes
start=$(date +%s)
IBC_BOOTSTRAP_TIMEOUT_MS=30000 "$run" -n 2 -t 90 -- sh -c \
	'if [ "$IBC_RANK" = 1 ]; then IBC_NRANKS=3; export IBC_NRANKS; fi; exec "$0" overlap' \
	"$prog" >"$dir/log" 2>&1
secs=$(($(date +%s) - start))
nm=$(grep -c 'FAIL: init:.*says the job has 3 ranks, the first rank to join said 2' "$dir/log")
nm2=$(grep -c 'FAIL: init:.*says the job has 2 ranks, the first rank to join said 3' "$dir/log")
ok $([ $((nm + nm2)) -eq 2 ] && [ "$secs" -lt 25 ] && ! grep -q 'never connected\|no valid table' "$dir/log" && echo 0 || echo 1) \
	"IBC_NRANKS 2 and 3: both ranks fail within 25 s ($secs s) naming both sizes, not 'never connected'"

# a setting every rank must share, different on rank 1: every rank refuses the
# communicator at creation, at once, naming it (before: IBC_TRANSPORT=tcp on one
# rank hung creation until IBC_BOOTSTRAP_TIMEOUT_MS; the ring's settings gave
# "mismatched calls" for calls that were the same; a heartbeat interval that
# differs blamed a live peer as "stopped or hung")
for cfg in "IBC_TRANSPORT tcp auto" "IBC_RING_CHUNK_BYTES 4096 1048576" "IBC_ACCUM_FP32 1 0" \
	"IBC_HEARTBEAT_MS 200 1000" "IBC_MAX_REQUESTS 16 1024"; do
	set -- $cfg
	start=$(date +%s)
	IBC_BOOTSTRAP_TIMEOUT_MS=30000 IBC_TIMEOUT_MS=20000 "$run" -n 3 -t 90 -- sh -c \
		'if [ "$IBC_RANK" = 1 ]; then export "$0=$1"; fi; shift; exec "$@" overlap align' \
		"$1" "$2" "$prog" >"$dir/log" 2>&1
	secs=$(($(date +%s) - start))
	nm=$(grep -c "FAIL: init:.*$1 is $2 on rank 1 but $3 on rank 0: it must be the same on every rank" "$dir/log")
	ok $([ "$nm" -eq 3 ] && [ "$secs" -lt 15 ] && echo 0 || echo 1) \
		"$1=$2 on rank 1 only: all 3 ranks refuse the communicator within 15 s ($secs s) naming $1 and both values ($nm of 3)"
done

# a rank number that is not a number: the error names that variable only
IBC_RANK=-3 IBC_NRANKS=4 IBC_ROOT=127.0.0.1:1 timeout 30 "$prog" >"$dir/log" 2>&1
ok $(grep -q "IBC_RANK='-3' is not a number" "$dir/log" && ! grep -q "IBC_NRANKS='4'" "$dir/log" && echo 0 || echo 1) \
	"IBC_RANK=-3 IBC_NRANKS=4: the error names IBC_RANK, not IBC_NRANKS"
# hex and decimal with a leading zero are numbers, as for every IBC_* integer
# (docs/env.md); the join then fails at the unreachable root, as it should
IBC_RANK=0x1 IBC_NRANKS=02 IBC_ROOT=127.0.0.1:1 IBC_BOOTSTRAP_TIMEOUT_MS=1000 timeout 30 "$prog" >"$dir/log" 2>&1
ok $(! grep -q "is not a number" "$dir/log" && grep -q "root" "$dir/log" && echo 0 || echo 1) \
	"IBC_RANK=0x1 IBC_NRANKS=02 are read as 1 and 2 (the join fails at the root only)"

# two ranks of this host, rank 1 in a mount namespace with its own /dev/shm
ns_ok=0
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null &&
	unshare --mount sh -c 'mount -t tmpfs none /dev/shm' 2>/dev/null; then
	ns_ok=1
fi
cat >"$dir/ns.sh" <<'EOS'
#!/bin/sh
# rank 1 gets its own /dev/shm, as a second container of the host would
if [ "$IBC_RANK" = 1 ]; then
	exec unshare --mount sh -c 'mount -t tmpfs none /dev/shm && exec "$0" "$@"' "$@"
fi
exec "$@"
EOS
chmod +x "$dir/ns.sh"
if [ "$ns_ok" -eq 1 ]; then
	# probe segments already there (another job's, or one a killed job left)
	ls /dev/shm 2>/dev/null | grep '^ibc-probe-' | sort >"$dir/probes0"
	IBC_TIMEOUT_MS=20000 IBC_DEBUG=WARN "$run" -n 2 -t 90 -- "$dir/ns.sh" "$prog" overlap \
		>"$dir/log" 2>&1
	rc=$?
	nw=$(grep -c 'do not share /dev/shm' "$dir/log")
	ok $([ "$rc" -eq 0 ] && [ "$(grep -c ': PASS: overlap' "$dir/log")" -eq 2 ] && [ "$nw" -eq 2 ] && echo 0 || echo 1) \
		"2 ranks of one host, rank 1 with its own /dev/shm: not shm between them (both ranks warn), exact results"
	IBC_TRANSPORT=shm IBC_TIMEOUT_MS=20000 "$run" -n 2 -t 90 -- "$dir/ns.sh" "$prog" overlap \
		>"$dir/log" 2>&1
	rc=$?
	ok $([ "$rc" -ne 0 ] && [ "$(grep -c 'FAIL: init:.*IBC_TRANSPORT=shm, but ranks of this host do not share /dev/shm' "$dir/log")" -eq 2 ] && echo 0 || echo 1) \
		"the same with IBC_TRANSPORT=shm: both ranks fail at init saying they do not share /dev/shm"
	# and no segment is left behind, by anyone
	ls /dev/shm 2>/dev/null | grep '^ibc-probe-' | sort >"$dir/probes1"
	ok $(comm -13 "$dir/probes0" "$dir/probes1" | grep -q . && echo 1 || echo 0) \
		"no probe segment is left in /dev/shm"
else
	for k in 1 2 3; do
		n=$((n + 1))
		echo "ok $n # SKIP mount namespaces need root and unshare"
	done
fi

# hosts with different numbers of ranks: ranks 0 and 1 on this host, rank 2 on
# "another" (its own UTS namespace, so another host name); the /dev/shm probe's
# second exchange ran only on ranks with a same-host peer, so ranks 0 and 1
# waited in it for rank 2 until IBC_BOOTSTRAP_TIMEOUT_MS
cat >"$dir/uts.sh" <<'EOS'
#!/bin/sh
if [ "$IBC_RANK" = 2 ]; then
	exec unshare --uts sh -c 'hostname ibc-other-host && exec "$0" "$@"' "$@"
fi
exec "$@"
EOS
chmod +x "$dir/uts.sh"
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null &&
	unshare --uts sh -c 'hostname ibc-other-host' 2>/dev/null; then
	start=$(date +%s)
	IBC_BOOTSTRAP_TIMEOUT_MS=30000 IBC_TIMEOUT_MS=20000 "$run" -n 3 -t 90 -- "$dir/uts.sh" \
		"$prog" overlap stale >"$dir/log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	ok $([ "$rc" -eq 0 ] && [ "$(grep -c ': PASS: ' "$dir/log")" -eq 6 ] && [ "$secs" -lt 25 ] && echo 0 || echo 1) \
		"2 ranks on this host and 1 on another (UTS namespace): created, exact results, splits work, within 25 s ($secs s)"
else
	n=$((n + 1))
	echo "ok $n # SKIP UTS namespaces need root and unshare"
fi

# a segment whose creator died before its peer mapped it: the next job removes it
dead=$(sh -c 'echo $$')
fake="ibc-deadbeef-0-1-$dead-$(printf '%x' "$(stat -L -c %i /proc/self/ns/pid)")"
: >"/dev/shm/$fake"
IBC_TRANSPORT=shm IBC_TIMEOUT_MS=20000 "$run" -n 2 -t 90 -- "$prog" overlap >"$dir/log" 2>&1
rc=$?
ok $([ "$rc" -eq 0 ] && [ ! -e "/dev/shm/$fake" ] && echo 0 || echo 1) \
	"a segment of a dead process (pid $dead) in /dev/shm is removed by the next job's shm transport"
rm -f "/dev/shm/$fake"
# too few file descriptors for 8 tcp ranks: every rank fails in bounded time, and
# the error names the open-file limit (raising it is the fix)
start=$(date +%s)
(ulimit -n 24 && IBC_TRANSPORT=tcp IBC_TIMEOUT_MS=10000 "$run" -n 8 -t 60 -- "$prog" overlap) \
	>"$dir/log" 2>&1
rc=$?
secs=$(($(date +%s) - start))
ok $([ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$secs" -lt 30 ] &&
	grep -q 'Too many open files (the open-file limit is 24: raise it with ulimit -n)' "$dir/log" &&
	echo 0 || echo 1) \
	"8 tcp ranks with ulimit -n 24: the job fails within 30 s ($secs s, rc $rc), the error naming the open-file limit"
# one rank of 8 at the limit, as its peers connect to it: every rank's error
# names that rank and the limit, none calls a live rank gone (the wait-for
# probe's own failed socket() once read as "rank 1 refused: it exited")
cat >"$dir/ulimit7.sh" <<'EOS'
#!/bin/sh
[ "$IBC_RANK" = 7 ] && ulimit -n 48
exec "$@"
EOS
chmod +x "$dir/ulimit7.sh"
start=$(date +%s)
IBC_TRANSPORT=tcp IBC_SOCKET_NSOCKS=8 IBC_TIMEOUT_MS=15000 IBC_BOOTSTRAP_TIMEOUT_MS=15000 \
	"$run" -n 8 -t 60 -- "$dir/ulimit7.sh" "$prog" overlap >"$dir/log" 2>&1
rc=$?
secs=$(($(date +%s) - start))
nlim=0
for r in 0 1 2 3 4 5 6 7; do
	grep -q "^rank $r: FAIL: .*rank 7.*the open-file limit is 48" "$dir/log" && nlim=$((nlim + 1))
done
ok $([ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$secs" -lt 30 ] && [ "$nlim" -eq 8 ] &&
	! grep -q 'refused a connection\|has destroyed or aborted the communicator, or exited' "$dir/log" &&
	echo 0 || echo 1) \
	"8 tcp ranks, rank 7 alone with ulimit -n 48: every rank's error names rank 7 and the limit ($nlim of 8), none calls a live rank gone, within 30 s ($secs s)"
ok $([ "$nfail" -eq 0 ] && echo 0 || echo 1) "every case above passed"
exit 0
