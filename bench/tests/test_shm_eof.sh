#!/bin/sh
# SPDX-License-Identifier: MIT
# test_shm_eof.sh - regression test of the shm transport's doorbell EOF
# handling (see shm_eof_peer.c): a message published by a peer that then
# leaves must still be delivered. Rank 0 is stopped while it waits, rank 1
# sends and exits, rank 0 resumes; repeated 3 times. Emits TAP.
set -u

top_builddir=${top_builddir:-.}
prog=$top_builddir/bench/tests/shm_eof_peer
tmp=${TMPDIR:-/tmp}/ibc_shm_eof.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
[ -x "$prog" ] || { echo "1..0 # SKIP $prog not built"; exit 0; }

echo "1..3"
fail=0
for k in 1 2 3; do
	rm -f "$tmp/mark" "$tmp/go"
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo $((30000 + $$ % 20000 + k)))
	export IBC_NRANKS=2 IBC_ROOT=127.0.0.1:$port IBC_TRANSPORT=shm IBC_TIMEOUT_MS=30000
	export SHM_EOF_MARK=$tmp/mark SHM_EOF_GO=$tmp/go
	# no timeout wrapper: $p0 must be the program itself (it is stopped and
	# resumed below); every wait inside it is bounded by IBC_TIMEOUT_MS
	IBC_RANK=0 "$prog" >"$tmp/r0" 2>&1 &
	p0=$!
	IBC_RANK=1 timeout -k 5 60 "$prog" >"$tmp/r1" 2>&1 &
	p1=$!
	i=0
	while [ ! -e "$tmp/mark" ] && [ $i -lt 3000 ]; do
		sleep 0.01
		i=$((i + 1))
	done
	sleep 0.3                       # rank 0 is asleep in the transport's wait now
	kill -STOP $p0 2>/dev/null
	touch "$tmp/go"
	wait $p1
	rc1=$?
	kill -CONT $p0 2>/dev/null
	wait $p0
	rc0=$?
	if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]; then
		echo "ok $k - data published before the peer left is delivered ($(cat "$tmp/r0"))"
	else
		echo "not ok $k - rank 0 exit $rc0, rank 1 exit $rc1"
		sed 's/^/# /' "$tmp/r0" "$tmp/r1"
		fail=1
	fi
done
exit $fail
