#!/bin/bash
# alternate old (9f3a6bd) and mid (8ac57c9: re-layering done) builds of ibc_bench, fixed algorithms
old=/work/main/build/bench/ibc_bench
new=/work/wt-test/build/bench/ibc_bench
out=/tmp/l19/res2.txt
: > $out
for round in 1 2 3 4; do
 for cfg in "2 shm ring" "2 shm shm" "4 shm ring" "2 tcp ring" "4 tcp ring"; do
  set -- $cfg
  for which in old new; do
   b=$old; [ $which = new ] && b=$new
   line=$(timeout 300 $b allreduce --local $1 -t $2 -a $3 -b 8 -e 16M -f 8 -n 40 -w 10 -c 0 2>/dev/null | grep -E "^ +[0-9]" | awk '{printf "%s:%s ", $1, $6}')
   echo "$round $which np=$1 $2 $3 $(cut -d' ' -f1 /proc/loadavg) $line" >> $out
  done
 done
done
echo done >> /tmp/l19/done2
