#!/bin/sh
# SPDX-License-Identifier: MIT
# test_tune_cache.sh - the per-host decision cache of the all-reduce
# re-timing (src/tune/tune_cache.c, IBC_TUNING_CACHE), with ibc_bench on 2
# local ranks over shm (every run checks its results exactly, -c 1):
#   1. a first job (IBC_TUNING_RETIME=1: each size class timed at its first
#      call) records one line per timed class, each naming the algorithm its
#      re-timing chose;
#   2. a second job reads them, runs each class's recorded choice from its
#      first call (INFO line per class) and times none at its start;
#   3. a recorded choice is what runs: the file edited to say tree for the
#      1 MiB class, the 1 MiB decision is tree;
#   4. a line that does not parse is skipped with a WARN naming the file,
#      and the valid lines still count;
#   5. the refresh: 300 calls of one class time it at call 256, and the
#      file's line for the class is rewritten (its timestamp field moves),
#      the lines that did not parse dropped;
#   6. another shape (3 ranks) adopts nothing of the 2-rank lines, and adds
#      its own while keeping them;
#   7. IBC_TUNING_CACHE=off writes nothing; a path that cannot be written
#      (a directory) gives a WARN and an exact run.
#   8. unset, IBC_TUNING_CACHE is off (the default): nothing written.
# Every run is bounded (timeout 120 s, IBC_TIMEOUT_MS=20000). make check
# sets IBC_TUNING_CACHE=off for every other test.
b=$top_builddir
bench=$b/bench/ibc_bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cache=$tmp/cache.txt
echo "1..10"
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; tail -n 15 "$log" | sed 's/^/# /'; fi; }
# job LOG NRANKS ARGS...: ibc_bench all-reduce over shm with exact checks; status 0 with no wrong element
job() {
	log=$1
	nr=$2
	shift 2
	env IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=TUNING IBC_TIMEOUT_MS=20000 timeout 120 \
		"$bench" allreduce --local "$nr" -t shm -c 1 "$@" >"$log" 2>&1 &&
		awk '/^ +[0-9]/ && $11 != 0 { bad = 1 } END { exit bad }' "$log"
}
lines() { grep -c '^v1 shm 2 2 ' "$cache"; }

IBC_TUNING_CACHE=$cache IBC_TUNING_RETIME=1 job "$tmp/j1" 2 -b 1K -e 1M -f 32 -n 3 -w 1
rc=$?
log=$tmp/j1
# each re-timed class: its "old -> new" choice, and the file's line for that class
want=$(grep '\[rank 0\].*re-timed all-reduce of' "$log" |
	sed -n 's/.*re-timed all-reduce of \([0-9]*\) bytes.*; [a-z]* -> \([a-z]*\)$/\1 \2/p' | sort)
have=$(awk '/^v1 shm 2 2 / { print $7, $6 }' "$cache" 2>/dev/null | sort)
[ $rc = 0 ] && [ "$(lines)" = 3 ] && [ -n "$want" ] && [ "$want" = "$have" ]
ok $? "first job: exact, 3 size classes timed and recorded with the re-timing's choices ($(echo $have | tr '\n' ' '))"

IBC_TUNING_CACHE=$cache job "$tmp/j2" 2 -b 1K -e 1M -f 32 -n 3 -w 1
rc=$?
log=$tmp/j2
nad=$(grep -c "\[rank 0\].*the decision cache's choice (IBC_TUNING_CACHE), until its timing at call 256" "$log")
nre=$(grep -c '\[rank 0\].*re-timed all-reduce' "$log")
grep -q "\[rank 0\].*IBC_TUNING_CACHE $cache: all-reduce choices of 3 size classes for 2 ranks (2 on this host) over shm" "$log" &&
	[ $rc = 0 ] && [ "$nad" = 3 ] && [ "$nre" = 0 ]
ok $? "second job: reads 3 classes, runs each recorded choice from its first call ($nad INFO lines), times none ($nre)"

# the 1 MiB class (20) edited to tree
sed -i 's/^\(v1 shm 2 2 20 \)[a-z]*/\1tree/' "$cache"
IBC_TUNING_CACHE=$cache job "$tmp/j3" 2 -b 1M -e 1M -n 3 -w 1
rc=$?
log=$tmp/j3
[ $rc = 0 ] && grep -q '\[rank 0\].*TUNING allreduce of 1048576 bytes on 2 ranks over shm: tree/' "$log"
ok $? "the file's choice is what runs: class 20 edited to tree, the 1 MiB all-reduce runs tree, exact"

echo "v1 shm 2 2 999 ring 1 1.0 1" >> "$cache"
echo "garbage" >> "$cache"
IBC_TUNING_CACHE=$cache job "$tmp/j4" 2 -b 1K -e 1K -n 3 -w 1
rc=$?
log=$tmp/j4
[ $rc = 0 ] && grep -q "IBC_TUNING_CACHE $cache: 2 line(s) not of the form .* skipped (the first at line [0-9]*)" "$log" &&
	grep -q "\[rank 0\].*all-reduce choices of 3 size classes" "$log"
ok $? "2 lines that do not parse: one WARN naming the file, count and first line; the 3 valid classes still read"

old=$(awk '/^v1 shm 2 2 10 / { print $9 }' "$cache")
sleep 1
IBC_TUNING_CACHE=$cache job "$tmp/j5" 2 -b 1K -e 1K -n 300 -w 1
rc=$?
log=$tmp/j5
new=$(awk '/^v1 shm 2 2 10 / { print $9 }' "$cache")
[ $rc = 0 ] && grep -q "\[rank 0\].*re-timed all-reduce of 1024 bytes .*call 256, refresh of the decision cache's choice" "$log" &&
	[ "$(grep -c '^v1 shm 2 2 10 ' "$cache")" = 1 ] && [ -n "$new" ] && [ "$new" -gt "$old" ] &&
	! grep -q -e garbage -e ' 999 ' "$cache"
ok $? "refresh: 300 calls of 1 KiB time the class at call 256 and rewrite its one line (timestamp $old -> $new), the bad lines dropped"

IBC_TUNING_CACHE=$cache IBC_TUNING_RETIME=1 job "$tmp/j6" 3 -b 1K -e 1K -n 3 -w 1
rc=$?
log=$tmp/j6
[ $rc = 0 ] && ! grep -q "decision cache's choice" "$log" && [ "$(lines)" = 3 ] &&
	[ "$(grep -c '^v1 shm 3 3 10 ' "$cache")" = 1 ]
ok $? "3 ranks: adopts nothing of the 2-rank lines, adds its own class-10 line, keeps the 2-rank lines"

IBC_TUNING_CACHE=off IBC_TUNING_RETIME=1 XDG_CACHE_HOME=$tmp/xdg job "$tmp/j7" 2 -b 1K -e 1K -n 3 -w 1
rc=$?
log=$tmp/j7
[ $rc = 0 ] && [ ! -e "$tmp/xdg" ] && ! grep -q IBC_TUNING_CACHE "$log"
ok $? "IBC_TUNING_CACHE=off: nothing written, nothing said"

IBC_TUNING_CACHE=auto IBC_TUNING_RETIME=1 XDG_CACHE_HOME=$tmp/xdg job "$tmp/j8" 2 -b 1K -e 1K -n 3 -w 1
rc=$?
log=$tmp/j8
[ $rc = 0 ] && [ "$(grep -c '^v1 shm 2 2 10 ' "$tmp/xdg/ibcoll/tuning-$(hostname | tr / _).txt" 2>/dev/null)" = 1 ]
ok $? "IBC_TUNING_CACHE=auto: \$XDG_CACHE_HOME/ibcoll/tuning-HOST.txt created with the class's line"

mkdir -p "$tmp/adir"
IBC_TUNING_CACHE=$tmp/adir IBC_TUNING_RETIME=1 job "$tmp/j9" 2 -b 1K -e 1K -n 3 -w 1
rc=$?
log=$tmp/j9
[ $rc = 0 ] && grep -q "IBC_TUNING_CACHE $tmp/adir: cannot .*this timing is not recorded" "$log"
ok $? "a path that is a directory: a WARN that the timing is not recorded, and an exact run"

(unset IBC_TUNING_CACHE; IBC_TUNING_RETIME=1 XDG_CACHE_HOME=$tmp/xdg2 HOME=$tmp/home job "$tmp/j10" 2 -b 1K -e 1K -n 3 -w 1)
rc=$?
log=$tmp/j10
[ $rc = 0 ] && [ ! -e "$tmp/xdg2" ] && [ ! -e "$tmp/home" ]
ok $? "IBC_TUNING_CACHE unset: off, nothing written under \$XDG_CACHE_HOME or \$HOME"
