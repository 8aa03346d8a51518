#!/bin/bash
# 8 B all-reduce latency over ib (rxe), LL vs simple, alternating, in the VM
export IBC_TRANSPORT=ib IBC_DEBUG=WARN
cat /proc/loadavg
for rep in 1 2 3; do
	for proto in simple ll; do
		for algo in ring rd; do
			IBC_PROTO=$proto IBC_ALGO=$algo timeout 120 bench/ibc_bench --local 2 -t ib allreduce -b 8 -e 8 -n 2000 -w 200 -c 1 > /tmp/lat.$proto.$algo.$rep 2>&1
			echo "rep $rep proto $proto algo $algo: $(grep -E '^ +8 ' /tmp/lat.$proto.$algo.$rep | head -1) $(grep -o 'Wrong elements.*' /tmp/lat.$proto.$algo.$rep)"
		done
	done
done
IBC_PROTO=ll timeout 120 bench/ibc_bench --local 2 -t ib allreduce -b 8 -e 8 -n 10 -w 1 -c 1 | grep -E '^#' | head -30
cat /proc/loadavg
