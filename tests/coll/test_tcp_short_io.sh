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
. "$top_srcdir/tests/coll/shim_case.sh"
echo "1..4"
cc="$b/tests/coll/coll_check -c all --no-errors --no-bf16-case"
tcp="IBC_TRANSPORT=tcp IBC_TIMEOUT_MS=30000"
shim_case shortio 2 "2 ranks, coll_check, every tcp call 1-7 bytes: exact on every rank" \
	$tcp SHORTIO_MAX=7 -- $cc -n 0,1,7,1000 -d float32,int8 -o sum,max
# 65537 elements of 4 bytes: above the 256 KiB from which a message is
# striped over the pair's sockets
shim_case shortio 3 "3 ranks, coll_check, every tcp call 1-61 bytes: exact on every rank" \
	$tcp SHORTIO_MAX=61 -- $cc -n 7,65537 -d float32 -o sum
shim_case shortio 2 "2 ranks, p2p_check of 65537 int32, every tcp call 1-61 bytes: exact on every rank" \
	$tcp SHORTIO_MAX=61 -- "$b/tests/coll/p2p_check" -r 1 -n 65537
shim_case shortio 3 "3 ranks, p2p_check, every tcp call 1-7 bytes: exact on every rank" \
	$tcp SHORTIO_MAX=7 -- "$b/tests/coll/p2p_check" -r 1 -n 4099
