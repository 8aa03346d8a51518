#!/bin/sh
# SPDX-License-Identifier: MIT
# test_tcp_short_io.sh - the tcp transport when the kernel moves a few bytes
# per call: tests/coll/libshortio.so (LD_PRELOAD) cuts every send, sendmsg,
# recv and recvmsg on a TCP socket to 1..SHORTIO_MAX bytes, so headers
# arrive cut at every offset, a small part's header and payload are read
# together only in part, and striped parts come in pieces. The collectives
# and point-to-point must stay exact on 2 and 3 ranks, blocking and
# nonblocking, in and out of place, and the shim must have shortened calls
# in every rank (else the test proves nothing).
b=$top_builddir
run=$top_srcdir/tests/scripts/run_local_ranks.sh
shim=$b/tests/coll/.libs/libshortio.so
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "1..4"
n=0
if [ ! -f "$shim" ]; then
	for i in 1 2 3 4; do echo "not ok $i - $shim was not built"; done
	exit 0
fi
# ranks, SHORTIO_MAX, program and arguments
# (65537 elements of 4 bytes: above the 256 KiB from which a message is
# striped over the pair's sockets)
for cfg in "2 7 coll_check 0,1,7,1000 float32,int8 sum,max" "3 61 coll_check 7,65537 float32 sum" \
	   "2 61 p2p_check 65537" "3 7 p2p_check 4099"; do
	set -- $cfg
	nr=$1 max=$2 prog=$3
	n=$((n + 1))
	if [ "$prog" = coll_check ]; then
		args="-c all -n $4 -d $5 -o $6 --no-errors --no-bf16-case"
	else
		args="-r 1 -n $4"
	fi
	start=$(date +%s)
	IBC_TRANSPORT=tcp IBC_TIMEOUT_MS=30000 SHORTIO_MAX=$max LD_PRELOAD=$shim \
		"$run" -n "$nr" -t 240 -- "$b/tests/coll/$prog" $args >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	npass=$(grep -c ': PASS' "$log")
	nshort=$(grep -c '^shortio: pid [0-9]* shortened [1-9]' "$log")
	desc="$nr ranks, $prog, every tcp call 1-$max bytes: exact on every rank, calls shortened in every rank ($secs s)"
	if [ "$rc" -eq 0 ] && [ "$npass" -ge "$nr" ] && [ "$nshort" -ge "$nr" ]; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc (rc $rc, $npass PASS lines, $nshort shim reports)"
		sed 's/^/# /' "$log" | tail -20
	fi
done
