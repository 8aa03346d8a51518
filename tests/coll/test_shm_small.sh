#!/bin/sh
# SPDX-License-Identifier: MIT
# test_shm_small.sh - small all-gather, broadcast, all-to-all and
# reduce-scatter, and the barrier, in one step of the shm segment
# (src/coll/shm_small.c),
# with coll_check's exact checks and the path from the INFO line each rank
# logs when its communicator goes ("...; K others in one step of the
# segment"):
#   1-4. 2, 3, 5 and 8 ranks: the four collectives exact at counts 1, 2, 7,
#        100, 1000, 4097 and 20000 (across IBC_SHM_ALLREDUCE_SMALL_BYTES and
#        the one-step limit at most element sizes), several dtypes and ops, in place and out of place,
#        blocking and not, with coll_check's bad-input checks; every rank
#        ran calls in one step of the segment;
#   5.   IBC_SHM_ALLREDUCE_SMALL_BYTES=64 and IBC_SHM_ONESTEP_RANK_BYTES=16
#        on rank 0, the defaults elsewhere: every rank takes rank 0's limits
#        (calls above 64 B by the ring), exact;
#   6.   IBC_ALGO=tree: broadcasts run the binomial tree they asked for,
#        none in one step, exact;
#   7.   the root of a stream of 8-byte broadcasts killed (3 ranks): each
#        survivor's error names rank 0 within 10 s (IBC_TIMEOUT_MS 30 s);
#   8.   5 ranks, 2000 barriers (ibc_bench): every rank ran them in one
#        step of the segment.
# Mismatched calls in the small path (a broadcast root of 1 against 0, an
# all-reduce against a broadcast) are tests/reliability/test_mismatch's.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
run=$s/tests/scripts/run_local_ranks.sh
check=$b/tests/coll/coll_check
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
echo "1..8"
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; grep -v '^ok\|^rank' "$tmp/log" | tail -n 12 | sed 's/^/# /'; fi; }
env0="IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=COLL IBC_TIMEOUT_MS=20000 IBC_TRANSPORT=shm"
cc="-c allgather,broadcast,alltoall,reduce_scatter -n 1,2,7,100,1000,4097,20000"
npass() { grep -c '^coll_check rank .*: PASS:' "$tmp/log"; }
# ranks whose communicators ran calls in one step of the segment
ranks_small() { grep ' shm all-reduce: [0-9]* calls:' "$tmp/log" | grep -v '; 0 others in one step' |
	sed 's/.*\[rank \([0-9]*\)[],].*/\1/' | sort -u | wc -l; }
total_small() { grep ' shm all-reduce: [0-9]* calls:' "$tmp/log" |
	sed 's/.*; \([0-9]*\) others in one step.*/\1/' | awk '{t += $1} END {print t + 0}'; }

for nr in 2 3 5 8; do
	# shellcheck disable=SC2086 # word splitting of $env0 and $cc is intended
	env $env0 "$run" -n "$nr" -t 250 -- "$check" $cc -d int8,int32,float16,bfloat16,float64 \
		-o sum,max,avg > "$tmp/log" 2>&1
	rc=$?
	[ $rc -eq 0 ] && [ "$(npass)" -eq "$nr" ] && [ "$(ranks_small)" -eq "$nr" ]
	ok $? "$nr ranks: all-gather, broadcast, all-to-all, reduce-scatter exact; $(total_small) calls in one step of the segment (rc $rc)"
done

cat > "$tmp/wrap" <<EOW
#!/bin/sh
[ "\$IBC_RANK" = 0 ] && export IBC_SHM_ALLREDUCE_SMALL_BYTES=64 IBC_SHM_ONESTEP_RANK_BYTES=16
exec "$check" $cc -d int32,float32 -o sum -p out,in --no-errors
EOW
chmod +x "$tmp/wrap"
# shellcheck disable=SC2086
env $env0 IBC_SHM_ALLREDUCE_SMALL_BYTES=4096 "$run" -n 3 -t 200 -- "$tmp/wrap" > "$tmp/log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(npass)" -eq 3 ] && [ "$(ranks_small)" -eq 3 ] &&
	grep -q "IBC_SHM_ALLREDUCE_SMALL_BYTES is 4096 here and 64 on rank 0; using rank 0's" "$tmp/log"
ok $? "3 ranks, rank 0's limits 64 B and 16 B per rank, the others' 4096 and 16384: rank 0's used, exact (rc $rc)"

# one step of the segment per rank: ibc_bench's broadcasts of 8, 64 and 512 B (rank 0's count)
bcast_small() {
	IBC_ALGO=$1 IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=COLL IBC_TRANSPORT=shm IBC_TIMEOUT_MS=20000 \
		timeout -k 5 100 "$b/bench/ibc_bench" --local 3 broadcast -b 8 -e 1K -f 8 -n 20 -w 2 \
		> "$tmp/log" 2>&1 || { echo -1; return; }
	awk '!/^ *#/ && NF >= 12 && $1 ~ /^[0-9]+$/ { rows++; if ($11 != 0) bad++ }
	     END { exit !(rows == 3 && bad == 0) }' "$tmp/log" || { echo -2; return; }
	grep '\[rank 0\] .* shm all-reduce: [0-9]* calls:' "$tmp/log" |
		sed 's/.*; \([0-9]*\) others in one step.*/\1/'
}
auto=$(bcast_small auto)
tree=$(bcast_small tree)
[ "$auto" -ge 0 ] && [ "$tree" -ge 0 ] && [ $((auto - tree)) -ge 60 ]
ok $? "IBC_ALGO=tree: 3 ranks' broadcasts of 8-512 B exact and by the tree (calls in one step of the segment: $tree, against $auto without IBC_ALGO; 66 broadcasts)"

cat > "$tmp/wrap" <<EOW
#!/bin/sh
[ "\$IBC_RANK" = 0 ] && echo \$\$ > "$tmp/root.pid"
exec "$b/bench/ibc_bench" broadcast -b 8 -e 8 -n 100000000 -w 0 -c 0
EOW
chmod +x "$tmp/wrap"
rm -f "$tmp/root.pid"
IBC_DEBUG=WARN IBC_TIMEOUT_MS=30000 IBC_TRANSPORT=shm "$run" -n 3 -t 100 -- "$tmp/wrap" > "$tmp/log" 2>&1 &
grp=$!
k=0
while [ ! -s "$tmp/root.pid" ] && [ $k -lt 100 ]; do sleep 0.1; k=$((k + 1)); done
# past ibc_bench's start-up under load, most likely; its start-up is a small
# broadcast from rank 0 as well, so a kill that lands in it tests the same
sleep 2
kill -9 "$(cat "$tmp/root.pid")" 2>/dev/null
start=$(date +%s)
wait $grp
took=$(( $(date +%s) - start ))
[ "$took" -le 10 ] &&
	grep -q "ibc_bench: rank 1: .*broadcast.* failed" "$tmp/log" &&
	grep -q "ibc_bench: rank 2: .*broadcast.* failed" "$tmp/log" &&
	[ "$(grep -c '\[rank [12]\] IBC ERROR .*rank 0' "$tmp/log")" -ge 2 ]
ok $? "the root of 8-byte broadcasts killed: ranks 1 and 2 fail naming rank 0 in ${took} s (at most 10)"

IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=COLL IBC_TRANSPORT=shm IBC_TIMEOUT_MS=20000 timeout -k 5 100 \
	"$b/bench/ibc_bench" --local 5 barrier -n 2000 -w 0 > "$tmp/log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(grep ' shm all-reduce: [0-9]* calls:' "$tmp/log" |
	sed 's/.*; \([0-9]*\) others in one step.*/\1/' | awk '$1 >= 2000' | wc -l)" -eq 5 ]
ok $? "5 ranks, 2000 barriers: every rank ran them in one step of the segment (rc $rc)"
