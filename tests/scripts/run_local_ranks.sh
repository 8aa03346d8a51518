#!/bin/bash
# SPDX-License-Identifier: MIT
# run_local_ranks.sh - test harness: run N local ranks of an ibcoll program
# under a hard timeout for the whole group.
#
# usage: run_local_ranks.sh -n N [-l mpirun|env] [-t SECONDS] -- cmd [args...]
#
#   -l env     (default) N background processes with IBC_RANK, IBC_NRANKS,
#              IBC_ROOT=127.0.0.1:PORT and IBC_SECRET set, through
#              scripts/ibcrun --timeout
#   -l mpirun  mpirun --allow-run-as-root --oversubscribe --bind-to none
#              -np N -x IBC_ROOT=127.0.0.1:PORT -x IBC_SECRET ... (every
#              IBC_* variable of the environment is passed with -x); the
#              ranks read OMPI_COMM_WORLD_RANK/SIZE
#   -t S       hard timeout of the whole group, seconds (default 300): ranks
#              still running are named on stderr and killed (TERM, then KILL)
# PORT is a free TCP port. Exit status: 0 only if every rank exited 0; 124
# if the group timed out; otherwise the ranks' worst status (env) or
# mpirun's (mpirun); 2 for a usage error or a missing launcher.
set -u

prog=run_local_ranks.sh
here=$(cd "$(dirname "$0")" && pwd)
ibcrun=$here/../../scripts/ibcrun

die() {
	echo "$prog: $*" >&2
	exit 2
}
usage() {
	die "usage: $prog -n N [-l mpirun|env] [-t SECONDS] -- cmd [args...]"
}

free_port() {
	local _ p hex
	for _ in $(seq 64); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000)) # 20000-31999: below the ephemeral ports (32768-), which outgoing connections take
		hex=$(printf ':%04X ' "$p")
		if ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '{print $2, $3}' |
			grep -q -- "$hex"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

n=
launcher='env'
timeout_s=300
while getopts n:l:t:h opt; do
	case $opt in
	n) n=$OPTARG ;;
	l) launcher=$OPTARG ;;
	t) timeout_s=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
case $n in ''|*[!0-9]*) usage ;; esac
[ "$n" -ge 1 ] || usage
case $timeout_s in ''|*[!0-9]*) die "-t needs whole seconds" ;; esac

case $launcher in
env)
	exec "$ibcrun" -n "$n" --timeout "$timeout_s" -- "$@"
	;;
mpirun)
	command -v mpirun >/dev/null 2>&1 || die "mpirun not found"
	;;
*)
	usage
	;;
esac

# --- mpirun: own session, polled against the deadline -------------------------
port=$(free_port) || die "no free TCP port found"
IBC_SECRET=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
IBC_ROOT=127.0.0.1:$port
export IBC_SECRET IBC_ROOT
xargs_=()
for v in $(compgen -e | grep '^IBC_'); do
	xargs_+=(-x "$v")
done

setsid mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" "${xargs_[@]}" "$@" &
mpid=$!

# processes of mpirun's session (setsid made mpirun the session leader)
session_pids() {
	ps -e -o pid=,sid= | awk -v s="$mpid" '$2 == s {print $1}'
}

# is @1 alive and not a zombie?
alive() {
	local st
	st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

kill_group() {
	local p
	for p in $(session_pids); do
		kill -s "$1" "$p" 2>/dev/null
	done
}

# shellcheck disable=SC2317 # called from the trap
on_signal() {
	kill_group TERM
	sleep 2
	kill_group KILL
	exit 130
}
trap on_signal INT TERM HUP

deadline=$(($(date +%s) + timeout_s))
timed_out=0
while alive "$mpid"; do
	if [ "$(date +%s)" -ge "$deadline" ]; then
		timed_out=1
		ranks=
		for p in $(session_pids); do
			r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
				sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
			[ -n "$r" ] && alive "$p" && ranks="$ranks $r"
		done
		echo "$prog: timeout after $timeout_s s: ranks still running (killed):" \
			"$(echo "$ranks" | tr ' ' '\n' | sort -nu | tr '\n' ' ')" >&2
		kill_group TERM
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			alive "$mpid" || break
			sleep 0.3
		done
		kill_group KILL
		break
	fi
	sleep 0.2
done
wait "$mpid"
st=$?
# nothing of the job may outlive us
kill_group KILL
[ "$timed_out" = 1 ] && exit 124
exit "$st"
