#!/bin/sh
# SPDX-License-Identifier: MIT
# test_tcp_small_buf.sh - a tiny IBC_SOCKET_BUF_BYTES must not turn a tcp
# all-reduce into a minutes-long crawl (delayed-ACK stalls on small windows):
# the transport raises it to 128 KiB with one warning, and an 8 MiB float64
# all-reduce on 3 ranks completes with exact results within 60 s.
echo "1..2"
b=$top_builddir
log=$(mktemp)
start=$(date +%s)
IBC_TRANSPORT=tcp IBC_SOCKET_BUF_BYTES=8192 IBC_TIMEOUT_MS=20000 \
	"$top_srcdir/tests/scripts/run_local_ranks.sh" -n 3 -t 60 -- \
	"$b/tests/coll/coll_check" -c allreduce -n 1048579 -d float64 -o sum -m blocking -p out \
	--no-errors --no-bf16-case > "$log" 2>&1
rc=$?
end=$(date +%s)
if [ $rc -eq 0 ] && [ "$(grep -c ': PASS:' "$log")" -eq 3 ]; then
	echo "ok 1 - 3-rank tcp all-reduce with 8 KiB socket buffers passes ($((end - start)) s)"
else
	echo "not ok 1 - 3-rank tcp all-reduce with 8 KiB socket buffers (rc $rc, $((end - start)) s)"
	sed 's/^/# /' "$log" | tail -20
fi
if grep -q 'IBC_SOCKET_BUF_BYTES=8192 is below 131072 bytes' "$log"; then
	echo "ok 2 - the raised buffer size is announced"
else
	echo "not ok 2 - no warning about the raised buffer size"
fi
rm -f "$log"
