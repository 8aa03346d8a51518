#!/bin/sh
# SPDX-License-Identifier: MIT
# test_launchers.sh - scripts/ibcrun and tests/scripts/run_local_ranks.sh
# with plain shell commands as ranks (no library needed): the variables each
# rank gets, exit statuses (worst rank, signals, timeouts), the timeout
# report naming the ranks still running, signal forwarding, no process left
# behind, and the mpirun launcher when mpirun is installed.
# shellcheck disable=SC2016 # the single-quoted rank commands expand in the ranks
srcdir=${top_srcdir:-.}
ibcrun=$srcdir/scripts/ibcrun
run=$srcdir/tests/scripts/run_local_ranks.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibc_launch.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
dur="59.$$"   # a unique sleep duration: pgrep finds leftovers by it
n=0
nfail=0

ok() {   # ok COND-STATUS NAME [DIAG]
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		nfail=$((nfail + 1))
		echo "not ok $n - $2"
		[ -n "${3:-}" ] && printf '%s\n' "$3" | sed 's/^/#   /'
	fi
}

echo "1..22"

# 1-4: the environment of every rank
"$ibcrun" -n 4 -- sh -c 'echo "$IBC_RANK $IBC_NRANKS $IBC_ROOT $IBC_SECRET"' >"$tmp/env" 2>&1
st=$?
ok $st "ibcrun -n 4 runs 4 ranks and exits 0" "$(cat "$tmp/env")"
ranks=$(awk '{print $1}' "$tmp/env" | sort -n | tr '\n' ' ')
[ "$ranks" = "0 1 2 3 " ]; ok $? "IBC_RANK is 0..3, once each (got $ranks)"
[ "$(awk '{print $2}' "$tmp/env" | sort -u)" = 4 ]; ok $? "IBC_NRANKS=4 on every rank"
roots=$(awk '{print $3}' "$tmp/env" | sort -u)
secrets=$(awk '{print $4}' "$tmp/env" | sort -u)
[ "$(printf '%s\n' "$roots" | wc -l)" = 1 ] && printf '%s\n' "$roots" | grep -Eq '^127\.0\.0\.1:[0-9]+$' &&
	[ "$(printf '%s\n' "$secrets" | wc -l)" = 1 ] && printf '%s\n' "$secrets" | grep -Eq '^[0-9a-f]{32}$'
ok $? "one IBC_ROOT=127.0.0.1:port ($roots) and one 32-hex-digit IBC_SECRET for the job"

# 5-6: --port, --host-root, and a fresh secret per job
"$ibcrun" -n 2 --port 23456 --host-root 10.1.2.3 -- sh -c 'echo "$IBC_ROOT $IBC_SECRET"' >"$tmp/env2"
[ "$(awk '{print $1}' "$tmp/env2" | sort -u)" = 10.1.2.3:23456 ]
ok $? "--port and --host-root set IBC_ROOT=10.1.2.3:23456"
[ "$(awk '{print $2}' "$tmp/env2" | sort -u)" != "$secrets" ]; ok $? "each job gets a new secret"

# 7-9: exit statuses
"$ibcrun" -n 3 -- sh -c 'exit $((IBC_RANK == 1 ? 3 : IBC_RANK))' 2>/dev/null
st=$?; [ "$st" -eq 3 ]; ok $? "exit status is the worst rank's (ranks exit 0, 3, 2: got $st)"
"$ibcrun" -n 2 -- sh -c '[ "$IBC_RANK" = 1 ] && kill -USR1 $$; exit 0' 2>/dev/null
st=$?; [ "$st" -eq $((128 + 10)) ]; ok $? "a rank killed by SIGUSR1 counts as 138 (got $st)"
"$ibcrun" 2>/dev/null; st1=$?; "$ibcrun" -n x -- true 2>/dev/null; st2=$?
[ "$st1" -eq 2 ] && [ "$st2" -eq 2 ]; ok $? "usage errors exit 2 ($st1, $st2)"

# 10-12: --timeout names the ranks still running and kills them (and their children)
t0=$(date +%s)
"$ibcrun" -n 3 --timeout 2 -- sh -c "[ \$IBC_RANK = 0 ] && exit 0; sleep $dur" 2>"$tmp/to"
st=$?; secs=$(($(date +%s) - t0))
[ "$st" -eq 124 ] && [ "$secs" -lt 20 ]; ok $? "ibcrun --timeout 2 exits 124 in $secs s"
grep -q "ranks still running (killed): 1 2" "$tmp/to"; ok $? "the timeout report names ranks 1 2" "$(cat "$tmp/to")"
sleep 0.5
! pgrep -f "sleep $dur" >/dev/null; ok $? "no rank or child process survives the timeout"

# 13: signals sent to ibcrun reach every rank once
"$ibcrun" -n 3 -- sh -c "trap 'echo \$IBC_RANK >> $tmp/sig; kill \$! 2>/dev/null; exit 5' TERM; sleep $dur & wait" &
pid=$!
sleep 1
kill -TERM "$pid"
wait "$pid"; st=$?
got=$(sort -n "$tmp/sig" 2>/dev/null | tr '\n' ' ')
[ "$st" -eq 5 ] && [ "$got" = "0 1 2 " ]; ok $? "SIGTERM to ibcrun is forwarded to ranks 0 1 2 once each (got '$got', status $st)"

# 14-16: run_local_ranks.sh, env launcher
"$run" -n 3 -- sh -c 'echo "$IBC_RANK/$IBC_NRANKS"' >"$tmp/rl" 2>&1
st=$?; [ "$st" -eq 0 ] && [ "$(sort "$tmp/rl" | tr '\n' ' ')" = "0/3 1/3 2/3 " ]
ok $? "run_local_ranks.sh -l env -n 3 starts ranks 0..2 of 3" "$(cat "$tmp/rl")"
"$run" -n 2 -- sh -c '[ "$IBC_RANK" = 1 ] && exit 1; exit 0' 2>/dev/null
st=$?; [ "$st" -ne 0 ]; ok $? "a failing rank makes run_local_ranks.sh fail (status $st)"
"$run" -n 2 -t 2 -- sh -c "[ \$IBC_RANK = 1 ] && sleep $dur" 2>"$tmp/rlto"
st=$?; [ "$st" -eq 124 ] && grep -q "still running (killed): 1" "$tmp/rlto"
ok $? "run_local_ranks.sh -t 2 exits 124 and names rank 1" "$(cat "$tmp/rlto")"

# 17-22: mpirun launcher
if ! command -v mpirun >/dev/null 2>&1; then
	for _ in 17 18 19 20 21 22; do
		n=$((n + 1))
		echo "ok $n # SKIP mpirun not installed"
	done
else
	IBC_FOO_TEST=42 "$run" -n 3 -l mpirun -- sh -c \
		'echo "$OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_SIZE $IBC_ROOT $IBC_SECRET $IBC_FOO_TEST"' \
		>"$tmp/mp" 2>&1
	st=$?
	ok $st "run_local_ranks.sh -l mpirun -n 3 exits 0" "$(cat "$tmp/mp")"
	[ "$(awk '{print $1}' "$tmp/mp" | sort -n | tr '\n' ' ')" = "0 1 2 " ] &&
		[ "$(awk '{print $2}' "$tmp/mp" | sort -u)" = 3 ]
	ok $? "ranks see OMPI_COMM_WORLD_RANK 0..2 and OMPI_COMM_WORLD_SIZE 3"
	[ "$(awk '{print $3, $4}' "$tmp/mp" | sort -u | wc -l)" = 1 ] &&
		awk '{print $3}' "$tmp/mp" | grep -Eq '^127\.0\.0\.1:[0-9]+$' &&
		awk '{print $4}' "$tmp/mp" | grep -Eq '^[0-9a-f]{32}$'
	ok $? "-x IBC_ROOT=127.0.0.1:port and IBC_SECRET reach every rank"
	[ "$(awk '{print $5}' "$tmp/mp" | sort -u)" = 42 ]
	ok $? "every IBC_* variable of the environment is passed with -x"
	"$run" -n 2 -l mpirun -- sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && exit 1; exit 0' \
		>/dev/null 2>&1
	st=$?; [ "$st" -ne 0 ]; ok $? "a failing rank makes the mpirun launch fail (status $st)"
	"$run" -n 3 -l mpirun -t 3 -- sh -c \
		"[ \$OMPI_COMM_WORLD_RANK = 0 ] || sleep $dur" >/dev/null 2>"$tmp/mpto"
	st=$?
	sleep 0.5
	[ "$st" -eq 124 ] && grep -q "still running (killed): *1 2" "$tmp/mpto" &&
		! pgrep -f "sleep $dur" >/dev/null
	ok $? "mpirun launch: -t 3 exits 124, names ranks 1 2, leaves no process" \
		"$(cat "$tmp/mpto")"
fi
[ "$nfail" -eq 0 ]
