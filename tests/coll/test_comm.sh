#!/bin/sh
# SPDX-License-Identifier: MIT
# test_comm.sh - tests/coll/comm_check: ibc_comm_split (colors, keys, opting
# out, nested) over shm and tcp, ranks and sizes from each launcher's
# variables (IBC_RANK, Open MPI, PMI, PMIx, Slurm), a rank that never
# starts (the others fail within the bootstrap timeout, naming it), 3 ranks
# over tcp on IPv6 loopback (SKIP without ::1), and an in-place int8
# all-reduce of 2^31 + 7 elements on 2 ranks (needs about 5 GiB of free
# memory, else that test SKIPs). Every run bounded (launcher timeouts).
b=$top_builddir
run=$top_srcdir/tests/scripts/run_local_ranks.sh
cc=$b/tests/coll/comm_check
log=$(mktemp)
trap 'rm -f "$log" "$log".*' EXIT
echo "1..10"
n=0
result() { # want_pass_lines description rc
	n=$((n + 1))
	npass=$(grep -c ': PASS: ' "$log")
	if [ "$3" -eq 0 ] && [ "$npass" -eq "$1" ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2 (rc $3, $npass of $1 PASS lines)"
		grep -E 'FAIL|ERROR' "$log" | head -10 | sed 's/^/# /'
		tail -5 "$log" | sed 's/^/# /'
	fi
}
# manual launch with a given pair of rank/size variables: NR RANKVAR SIZEVAR
launch_vars() {
	nr=$1 rv=$2 sv=$3
	port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000)) # 20000-31999: below the ephemeral ports (32768-), which outgoing connections take
	secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	rm -f "$log".*
	: >"$log"
	pids=
	r=0
	while [ "$r" -lt "$nr" ]; do
		env -u IBC_RANK -u IBC_NRANKS -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE \
			"$rv=$r" "$sv=$nr" IBC_ROOT=127.0.0.1:$port IBC_SECRET=$secret IBC_TIMEOUT_MS=30000 \
			timeout -k 5 60 "$cc" --expect-source "$rv" >"$log.$r" 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
	st=0
	for p in $pids; do wait "$p" || st=$?; done
	cat "$log".[0-9]* >"$log"
	return $st
}

IBC_TRANSPORT=shm "$run" -n 5 -t 60 -- "$cc" --expect-source IBC_RANK >"$log" 2>&1
result 10 "5 ranks, shm, IBC_RANK/IBC_NRANKS: split, keys, opt-out, nested split" $?
IBC_TRANSPORT=tcp "$run" -n 4 -t 60 -- "$cc" >"$log" 2>&1
result 4 "4 ranks, tcp: split, keys, opt-out, nested split" $?
if command -v mpirun >/dev/null 2>&1; then
	IBC_TRANSPORT=shm "$run" -n 3 -l mpirun -t 60 -- "$cc" --expect-source OMPI_COMM_WORLD_RANK \
		>"$log" 2>&1
	result 6 "3 ranks under mpirun: rank and size from OMPI_COMM_WORLD_RANK/SIZE" $?
else
	n=$((n + 1))
	echo "ok $n # SKIP mpirun not installed"
fi
launch_vars 3 PMI_RANK PMI_SIZE
result 6 "3 ranks: rank and size from PMI_RANK/PMI_SIZE" $?
launch_vars 2 PMIX_RANK PMI_SIZE
result 4 "2 ranks: rank from PMIX_RANK" $?
launch_vars 3 SLURM_PROCID SLURM_NTASKS
result 6 "3 ranks: rank and size from SLURM_PROCID/SLURM_NTASKS" $?
# IPv6: IBC_SOCKET_FAMILY=AF_INET6 and IBC_ROOT=[::1]:port, 3 ranks over tcp
if [ -r /proc/net/if_inet6 ] && grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6; then
	port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000))
	secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	rm -f "$log".*
	pids=
	for r in 0 1 2; do
		env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE IBC_RANK=$r IBC_NRANKS=3 \
			IBC_ROOT="[::1]:$port" IBC_SECRET=$secret IBC_SOCKET_FAMILY=AF_INET6 \
			IBC_TRANSPORT=tcp IBC_TIMEOUT_MS=30000 timeout -k 5 60 "$cc" >"$log.$r" 2>&1 &
		pids="$pids $!"
	done
	st=0
	for p in $pids; do wait "$p" || st=$?; done
	cat "$log".[0-9]* >"$log"
	result 3 "3 ranks, tcp over IPv6 (IBC_SOCKET_FAMILY=AF_INET6, IBC_ROOT=[::1]:port)" $st
else
	n=$((n + 1))
	echo "ok $n # SKIP no IPv6 loopback (::1) on this machine"
fi
avail=$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)
if [ "${avail:-0}" -ge 6 ]; then
	start=$(date +%s)
	IBC_TRANSPORT=shm IBC_TIMEOUT_MS=120000 "$run" -n 2 -t 300 -- "$cc" --big >"$log" 2>&1
	result 4 "2 ranks, shm: in-place int8 all-reduce of 2^31 + 7 elements exact ($(($(date +%s) - start)) s)" $?
else
	n=$((n + 1))
	echo "ok $n # SKIP 2^31-element all-reduce needs 6 GiB of available memory (${avail:-?} GiB)"
fi

# a rank that never arrives: ranks 0 and 1 of 3 start, rank 2 does not
port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000)) # 20000-31999: below the ephemeral ports (32768-), which outgoing connections take
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
start=$(date +%s)
for r in 1 0; do
	env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE IBC_RANK=$r IBC_NRANKS=3 \
		IBC_ROOT=127.0.0.1:$port IBC_SECRET=$secret IBC_BOOTSTRAP_TIMEOUT_MS=3000 \
		timeout -k 5 60 "$cc" >"$log.$r" 2>&1 &
	eval "pid$r=\$!"
done
wait "$pid0"
st0=$?
wait "$pid1"
st1=$?
secs=$(($(date +%s) - start))
n=$((n + 1))
if [ $st0 -eq 1 ] && [ $st1 -eq 1 ] && [ $secs -lt 20 ] &&
	grep -qF '1 of 3 ranks did not join within 3000 ms (IBC_BOOTSTRAP_TIMEOUT_MS); ranks that never connected: 2' "$log.0" &&
	grep -q 'did not join' "$log.1"; then
	echo "ok $n - rank 2 of 3 never starts: ranks 0 and 1 fail in $secs s, naming rank 2"
else
	echo "not ok $n - rank 2 never starts: exits $st0 $st1 after $secs s"
	cat "$log.0" "$log.1" | grep -v '^$' | head -10 | sed 's/^/# /'
fi

# the same rank 0 started twice on one IBC_ROOT: the second cannot listen
# there and says why (one ERROR line, no bare "bind ... failed"); the first
# times out naming rank 1, which never connected
port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000)) # 20000-31999: below the ephemeral ports (32768-), which outgoing connections take
rm -f "$log".*
env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE IBC_RANK=0 IBC_NRANKS=2 \
	IBC_ROOT=127.0.0.1:$port IBC_BOOTSTRAP_TIMEOUT_MS=3000 timeout -k 5 60 "$cc" >"$log.0" 2>&1 &
pid0=$!
i=0
while [ $i -lt 50 ] && ! ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; do
	sleep 0.1
	i=$((i + 1))
done
env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE IBC_RANK=0 IBC_NRANKS=2 \
	IBC_ROOT=127.0.0.1:$port IBC_BOOTSTRAP_TIMEOUT_MS=3000 timeout -k 5 60 "$cc" >"$log.1" 2>&1
st1=$?
wait "$pid0"
st0=$?
n=$((n + 1))
if [ $st1 -eq 1 ] && [ $st0 -eq 1 ] &&
	grep -qF "bootstrap root: cannot listen on 127.0.0.1:$port: Address already in use: another job, or another rank 0 of this job, is already listening there (IBC_ROOT=127.0.0.1:$port); give this job a different port in IBC_ROOT" "$log.1" &&
	[ "$(grep -c ' ERROR ' "$log.1")" -eq 1 ] &&
	grep -qF '1 of 2 ranks did not join within 3000 ms (IBC_BOOTSTRAP_TIMEOUT_MS); ranks that never connected: 1' "$log.0"; then
	echo "ok $n - rank 0 started twice: the second names the taken IBC_ROOT, the first names rank 1"
else
	echo "not ok $n - rank 0 started twice: exits $st0 $st1"
	cat "$log.0" "$log.1" | grep -v '^$' | head -10 | sed 's/^/# /'
fi
