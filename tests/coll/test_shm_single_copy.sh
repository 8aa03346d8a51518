#!/bin/sh
# SPDX-License-Identifier: MIT
# test_shm_single_copy.sh - the shm single-copy paths (src/coll/
# shm_allreduce_cma.c, shm_single.c), with coll_check's exact checks
# (every dtype of the list, sum/max/avg, in place and out of place, counts
# 1, 7, awkward, and past IBC_SHM_ALLREDUCE_CMA_MIN_BYTES), and the path
# each call took from the INFO line each rank logs when its communicator
# goes ("N calls: S small, G through the segment, C single-copy (peers:
# M mapped, X by cross-memory attach)"):
#   1-2. 3 ranks, ibc_mem_alloc() buffers: exact; calls above the small
#        path go single-copy with every peer mapped, none by CMA;
#   3-4. 5 ranks, malloc buffers: exact; calls from 1 MiB go single-copy
#        by cross-memory attach, none mapped; smaller ones through the
#        segment;
#   5-6. 3 ranks, ibc_mem_alloc() but rank 1 with IBC_MEM_SHARE=0 (its
#        memory private): exact; mid-size calls through the segment, large
#        ones single-copy, rank 1 reached by CMA and mapping the others;
#   7.   2 ranks, IBC_ACCUM_FP32=1 and 4 KiB pieces, mapped: exact;
#   8.   rank 2 with IBC_SHM_CMA=0: rank 0 says so, no single-copy call, exact;
#   9.   rank 1's probe refused (IBC_FAULT_INJECT=cma:1, as EPERM): it says
#        which peer it could not read and why, nobody goes single-copy, exact;
#   10.  a transfer refused in the middle of an all-reduce (cma:3 on rank 1
#        of 2, malloc buffers): rank 1's call fails with the call, the peer
#        and the cause in one ERROR line; rank 0 gets IBC_ERR_REMOTE at once
#        (well within IBC_TIMEOUT_MS: no hang);
#   11-12. all-gather, reduce-scatter, broadcast and all-to-all on 3 ranks
#        with ibc_mem_alloc() buffers: exact; calls above 4 KiB single-copy,
#        all peers mapped; with malloc buffers exact, the calls that read
#        at least IBC_SHM_SINGLE_CMA_MIN_BYTES (64 KiB) per peer single-copy
#        by cross-memory attach, the others from 64 KiB and every
#        reduce-scatter asked and ran the ring;
#   13.  5 ranks, malloc buffers, IBC_SHM_SINGLE_CMA_MIN_BYTES=1 (every call
#        that asks goes by CMA): all-gather, broadcast (root 0 and others
#        through coll_check's roots) and all-to-all exact at counts 1, 7,
#        awkward, in and out of place;
#   14.  an all-gather's transfer refused in the middle (cma:3 on rank 1 of
#        2, malloc buffers): rank 1's ERROR line names the all-gather, rank
#        0 and the cause; rank 0 gets IBC_ERR_REMOTE at once;
#   15.  all-gather on 3 ranks with only the output in ibc_mem_alloc()
#        memory (--mem-alloc-recv, out of place): exact, and every single-copy call maps
#        all peers (a rank publishes its block of the output, not its
#        private input, for the peers to read), none by CMA.
# Every wait is bounded: IBC_TIMEOUT_MS=20000, the launcher's 200 s.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
run=$s/tests/scripts/run_local_ranks.sh
check=$b/tests/coll/coll_check
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
echo "1..15"
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; grep -v '^ok\|^rank' "$tmp/log" | tail -n 12 | sed 's/^/# /'; fi; }
env0="IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=COLL IBC_TIMEOUT_MS=20000 IBC_TRANSPORT=shm IBC_ALGO=shm"
counts=1,7,1025,4097,65537,300001
cc="-c allreduce -n $counts -p out,in -o sum,max,avg --no-errors --no-bf16-case"

# $1 ranks, $2 per-rank env ("R=VAR=value ..."), the rest coll_check's arguments
go() {
	nr=$1
	per=$2
	shift 2
	cat > "$tmp/wrap" <<EOW
#!/bin/sh
for kv in $per; do
	r=\${kv%%=*}; v=\${kv#*=}
	[ "\$IBC_RANK" = "\$r" ] && export "\$v"
done
exec "$check" $*
EOW
	chmod +x "$tmp/wrap"
	# shellcheck disable=SC2086 # word splitting of $env0 is intended
	env $env0 "$run" -n "$nr" -t 200 -- "$tmp/wrap" > "$tmp/log" 2>&1
}
npass() { grep -c '^coll_check rank .*: PASS:' "$tmp/log"; }
# the field after word $1 in the destruction lines, summed over ranks
field() { grep ' shm all-reduce: [0-9]* calls:' "$tmp/log" | sed "s/.* \([0-9]*\) $1.*/\1/" | awk '{t += $1} END {print t + 0}'; }

go 3 "" --mem-alloc $cc -d int32,float32,bfloat16,float64
[ $? -eq 0 ] && [ "$(npass)" -eq 3 ]
ok $? "3 ranks, ibc_mem_alloc buffers: exact results on every rank"
single=$(field 'single-copy'); mapped=$(field 'mapped'); viacma=$(field 'by cross')
[ "$single" -gt 0 ] && [ "$mapped" -eq $((single * 2)) ] && [ "$viacma" -eq 0 ]
ok $? "... $single single-copy calls (over 3 ranks), $mapped peers mapped, $viacma by CMA"

go 5 "" $cc -d int8,float32,float16
[ $? -eq 0 ] && [ "$(npass)" -eq 5 ]
ok $? "5 ranks, malloc buffers: exact results on every rank"
single=$(field 'single-copy'); mapped=$(field 'mapped'); viacma=$(field 'by cross'); seg=$(field 'through')
[ "$single" -gt 0 ] && [ "$mapped" -eq 0 ] && [ "$viacma" -eq $((single * 4)) ] && [ "$seg" -gt 0 ]
ok $? "... $single single-copy calls by CMA ($viacma peers, $mapped mapped), $seg through the segment"

go 3 "1=IBC_MEM_SHARE=0" --mem-alloc $cc -d int32,float32
[ $? -eq 0 ] && [ "$(npass)" -eq 3 ]
ok $? "3 ranks, rank 1's ibc_mem_alloc memory private: exact results on every rank"
l1=$(grep '\[rank 1\] .* shm all-reduce: [0-9]* calls:' "$tmp/log" | head -n 1)
l0=$(grep '\[rank 0\] .* shm all-reduce: [0-9]* calls:' "$tmp/log" | head -n 1)
echo "$l1" | grep -q ' [1-9][0-9]* through the segment, [1-9][0-9]* single-copy (peers: [1-9][0-9]* mapped, 0 by cross' &&
	echo "$l0" | grep -q ' single-copy (peers: [1-9][0-9]* mapped, [1-9][0-9]* by cross'
ok $? "... rank 1 maps its peers, they reach it by CMA, mid sizes through the segment"

IBC_ACCUM_FP32=1 IBC_SHM_ALLREDUCE_CHUNK_BYTES=4096 go 2 "" --mem-alloc $cc -d bfloat16,float16
[ $? -eq 0 ] && [ "$(npass)" -eq 2 ] && [ "$(field 'single-copy')" -gt 0 ]
ok $? "2 ranks, IBC_ACCUM_FP32=1, 4 KiB pieces, mapped: exact results"

go 3 "2=IBC_SHM_CMA=0" --mem-alloc $cc -d int32,float32
[ $? -eq 0 ] && [ "$(npass)" -eq 3 ] && [ "$(field 'single-copy')" -eq 0 ] &&
	grep -q '\[rank 0\] .*rank 2 has IBC_SHM_CMA=0: no single-copy path' "$tmp/log"
ok $? "rank 2 with IBC_SHM_CMA=0: rank 0 says so, no single-copy call, exact results"

go 3 "1=IBC_FAULT_INJECT=cma:1" --mem-alloc $cc -d int32,float32
[ $? -eq 0 ] && [ "$(npass)" -eq 3 ] && [ "$(field 'single-copy')" -eq 0 ] &&
	grep -q "\[rank 1\] .*cannot read rank 0's memory by cross-memory attach (process_vm_readv: Operation not permitted)" "$tmp/log"
ok $? "rank 1's probe refused: it names rank 0 and the cause, nobody goes single-copy, exact results"

# $1 ibc_bench's arguments for one 4 MiB call of 2 ranks: rank 1's first
# transfer refused (cma:3, after the probe's read and write); $2 what its
# ERROR line must hold; sets rc and took
refused() {
	cat > "$tmp/wrap" <<EOW
#!/bin/sh
[ "\$IBC_RANK" = 1 ] && export IBC_FAULT_INJECT=cma:3
exec "$b/bench/ibc_bench" $1 -b 4M -e 4M -n 1 -w 0
EOW
	start=$(date +%s)
	IBC_DEBUG=WARN IBC_TIMEOUT_MS=20000 IBC_TRANSPORT=shm "$run" -n 2 -t 100 -- "$tmp/wrap" > "$tmp/log" 2>&1
	rc=$?
	took=$(( $(date +%s) - start ))
	coll=${1%% *}
	[ "$rc" -ne 0 ] && [ "$took" -lt 15 ] &&
		grep -q "\[rank 1\] IBC ERROR .*$coll #[0-9]* (count $2.*shm single copy: process_vm_readv of [0-9]* bytes from rank 0's input failed: Operation not permitted" "$tmp/log" &&
		grep -q "ibc_bench: rank 0: $coll failed: remote peer failed" "$tmp/log"
}
refused "allreduce -a shm" "1048576 float32 sum"
ok $? "rank 1's transfer refused mid-call (cma:3): its ERROR line names the call, rank 0 and the cause; rank 0 gets IBC_ERR_REMOTE; ${took} s (timeout 20 s)"

go 3 "" --mem-alloc -c allgather,reduce_scatter,broadcast,alltoall -n $counts -p out,in -o sum,avg \
	--no-errors -d int32,float32,bfloat16
rc=$?
single=$(field 'single-copy'); mapped=$(field 'mapped'); viacma=$(field 'by cross')
[ $rc -eq 0 ] && [ "$(npass)" -eq 3 ] && [ "$single" -gt 0 ] && [ "$mapped" -eq $((single * 2)) ] &&
	[ "$viacma" -eq 0 ]
ok $? "all-gather, reduce-scatter, broadcast, all-to-all on 3 ranks, ibc_mem_alloc: exact; $single single-copy calls, $mapped peers mapped, $viacma by CMA"
go 3 "" -c allgather,reduce_scatter,broadcast,alltoall -n $counts -p out,in -o sum,avg --no-errors \
	-d int32,float32
rc=$?
single=$(field 'single-copy'); mapped=$(field 'mapped'); viacma=$(field 'by cross'); asked=$(field 'others asked')
[ $rc -eq 0 ] && [ "$(npass)" -eq 3 ] && [ "$single" -gt 0 ] && [ "$mapped" -eq 0 ] &&
	[ "$viacma" -eq $((single * 2)) ] && [ "$asked" -gt 0 ]
ok $? "... with malloc buffers: exact; $single single-copy calls by CMA ($viacma peers, $mapped mapped), $asked asked and ran the ring"

IBC_SHM_SINGLE_CMA_MIN_BYTES=1 go 5 "" -c allgather,broadcast,alltoall -n 1,7,1025,4097,65537,300001 \
	-p out,in -o sum --no-errors -d int8,int32,float64
rc=$?
single=$(field 'single-copy'); viacma=$(field 'by cross'); asked=$(field 'others asked')
[ $rc -eq 0 ] && [ "$(npass)" -eq 5 ] && [ "$single" -gt 0 ] && [ "$viacma" -eq $((single * 4)) ] &&
	[ "$asked" -eq 0 ]
ok $? "5 ranks, malloc, IBC_SHM_SINGLE_CMA_MIN_BYTES=1: all-gather, broadcast, all-to-all exact; $single single-copy calls, all by CMA; $asked ran the ring"

refused allgather "524288 float32"
ok $? "an all-gather's transfer refused mid-call (cma:3 on rank 1): its ERROR line names the call, rank 0 and the cause; rank 0 gets IBC_ERR_REMOTE; ${took} s (timeout 20 s)"

go 3 "" --mem-alloc-recv -c allgather -n $counts -p out --no-errors -d int32,float32
rc=$?
single=$(field 'single-copy'); mapped=$(field 'mapped'); viacma=$(field 'by cross')
[ $rc -eq 0 ] && [ "$(npass)" -eq 3 ] && [ "$single" -gt 0 ] && [ "$mapped" -eq $((single * 2)) ] &&
	[ "$viacma" -eq 0 ]
ok $? "all-gather on 3 ranks, output in ibc_mem_alloc, input private: exact; $single single-copy calls, $mapped peers mapped, $viacma by CMA"
