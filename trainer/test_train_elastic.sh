#!/bin/sh
# SPDX-License-Identifier: MIT
# test_train_elastic.sh - ibc_gpt2 --elastic survives a dead rank (issue 24):
# 4 local ranks on a synthetic shard (d2 model, T 16); once rank 0 has
# printed step k (k random), one rank is killed with SIGKILL (a random one of
# 1-3, rank 0 once, and two at once), wherever it is in the step. The others must agree,
# shrink, redo the step on 3 ranks and finish every step; their final
# parameters must be bitwise equal on every survivor and to a reference that
# was told to go from 4 to 3 ranks at that step: a 4-rank run stopped with a
# checkpoint before it, resumed on 3 ranks with --vranks 4 (the same global
# batch and data order). And with a replacement started at once (--join):
# the survivors grow back to 4 before they redo the step, and the result is
# bitwise that of an uninterrupted 4-rank run. Over shm and tcp; the all-reduce algorithm is
# pinned (IBC_ALGO=ring) so that both runs sum in the same order. Prints the
# time from the kill to the first completed step after it.
set -u

b=${top_builddir:-.}/trainer
gpt=$b/ibc_gpt2
tool=$b/test_dp_tool
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibc_test_elastic.XXXXXX")
trap 'kill -9 $pids 2>/dev/null; [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT INT TERM
n=0
fail=0
pids=
STEPS=${TEST_ELASTIC_STEPS:-8}

ok() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fail=1
	fi
}

free_port() {
	while :; do
		p=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000))
		command -v ss >/dev/null 2>&1 || break
		ss -Hltn "sport = :$p" 2>/dev/null | grep -q . || break
	done
	echo "$p"
}

rnd() { # rnd N: 0 .. N-1
	echo $(( $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % $1 ))
}

# start NAME R ARGS...: R ranks in the background, logs $tmp/NAME.rN.log, pids in $pids
start() {
	name=$1
	R=$2
	shift 2
	port=$(free_port)
	pids=
	rm -f "$tmp/$name".r*.log # a smaller run must not see a bigger one's logs
	r=0
	while [ "$r" -lt "$R" ]; do
		IBC_RANK=$r IBC_NRANKS=$R IBC_ROOT=127.0.0.1:$port OMP_NUM_THREADS=1 \
			timeout -k 5 "${TEST_ELASTIC_RUN_S:-120}" "$gpt" $common "$@" >"$tmp/$name.r$r.log" 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
}

# wait_all NAME [VICTIMS]: 0 when every rank but the VICTIMS (a comma list) exited 0 (they: 137)
wait_all() {
	st=0
	r=0
	for p in $pids; do
		wait "$p"
		c=$?
		if echo ",${2:--1}," | grep -q ",$r,"; then
			[ "$c" = 137 ] || st=1
		else
			[ "$c" = 0 ] || st=1
		fi
		r=$((r + 1))
	done
	pids=
	if [ "$st" != 0 ]; then
		for f in "$tmp/$1".r*.log; do
			sed "s|^|# $(basename "$f"): |" "$f" | tail -8
		done
	fi
	return $st
}

run() {
	start "$@"
	wait_all "$1"
}

# after_step NAME K: wait (at most 240 s) until NAME's rank 0 has printed "step K/"
after_step() {
	i=0
	until grep -q "^step *$2/" "$tmp/$1.r0.log" 2>/dev/null || [ $i -ge 4800 ]; do
		sleep 0.05
		i=$((i + 1))
	done
}

# kill_ranks RANKS: SIGKILL the trainers of the started ranks in the comma list RANKS
kill_ranks() {
	for v in $(echo "$1" | tr ',' ' '); do
		vpid=$(echo $pids | cut -d' ' -f$((v + 1)))
		pkill -KILL -P "$vpid" # the trainer, child of timeout(1)
	done
}

hashes() { # the distinct parameter hashes printed in NAME's logs
	cat "$tmp/$1".r*.log | sed -n 's/^param hash rank [0-9]*: //p' | sort -u
}

if [ ! -x "$gpt" ] || [ ! -x "$tool" ]; then
	echo "1..0 # SKIP ibc_gpt2 not built"
	exit 0
fi
"$tool" mkshard "$tmp/syn_train_000001.bin" 30000 0 || { echo "Bail out! cannot write shards"; exit 1; }
export IBC_ALGO=ring IBC_HEARTBEAT_MS=${IBC_HEARTBEAT_MS:-200} IBC_TIMEOUT_MS=${IBC_TIMEOUT_MS:-30000}
common="-d 2 -T 16 -i $tmp/syn_train_000001.bin -m 0 -u 2 -l 1e-3 --gen 0 --peak-gflops 1 --print-hash --bucket-mb 0.5 -b 3 -n $STEPS"

# case TRANSPORT VICTIMS G: VICTIMS is a comma list of ranks, killed at once
case_() {
	tr=$1
	victims=$2
	g=$3
	nv=$(echo "$victims" | tr ',' '\n' | wc -l)
	ns=$((4 - nv))
	what="$tr, g $g, rank(s) $victims killed"
	k=$((1 + $(rnd $((STEPS - 3)))))
	export IBC_TRANSPORT=$tr
	start "e" 4 --elastic -g "$g"
	# rank 0 prints "step k/N" once k steps are done
	after_step e "$k"
	kill_ranks "$victims"
	t_kill=$(date +%s.%N)
	wait_all e "$victims"
	ok $? "$what after step $k: the $ns survivors finish all $STEPS steps"
	log=$(grep -l "^elastic: step .*redoing" "$tmp"/e.r*.log | head -1)
	s=$(sed -n "s/^elastic: step \([0-9]*\): .*redoing step [0-9]* on $ns ranks/\1/p" "$log" 2>/dev/null | tail -1)
	[ -n "$s" ]
	ok $? "$what: an event line names the dead and the step redone ($s) on $ns ranks: $(grep '^elastic: step .*redoing' "$log" | tr '\n' ' ')"
	t_done=$(sed -n "s/^elastic: step [0-9]* redone on $ns ranks, done at unix time //p" "$log" | head -1)
	[ -n "$t_done" ] && echo "# $what: kill -> first completed step after it: $(echo "$t_done $t_kill" | awk '{ printf "%.0f", ($1 - $2) * 1000 }') ms"
	[ "$(hashes e | wc -l)" = 1 ] && [ "$(cat "$tmp"/e.r*.log | grep -c '^param hash rank')" = "$ns" ]
	ok $? "$what: the $ns survivors hold the same parameters"
	# the reference: 4 ranks to step s-1 with a checkpoint, then ns ranks from it
	if [ -n "$s" ] && [ "$s" -ge 2 ]; then
		run "a" 4 -g "$g" --stop $((s - 1)) -o "$tmp/ck" --quiet &&
			run "c" "$ns" -g "$g" --vranks 4 --quiet \
				--resume "$tmp/ck/$(printf 'model_%08d.bin' $((s - 1)))"
		st=$?
		[ "$st" = 0 ] && [ -n "$(hashes e)" ] && [ "$(hashes c)" = "$(hashes e)" ]
		ok $? "$what: == 4 ranks to step $((s - 1)) + checkpoint + $ns ranks (--vranks 4) from it, bitwise ($(hashes e) vs $(hashes c))"
		run "u" 4 -g "$g" --quiet
		[ -n "$(hashes u)" ] && [ -n "$(hashes e)" ] && [ "$(hashes u)" != "$(hashes e)" ]
		ok $? "$what: and differs from an uninterrupted 4-rank run (the resize changed the sums)"
		rm -rf "$tmp/ck"
	else
		ok 1 "$what: no redone step found, no reference run"
	fi
}

# join TRANSPORT VICTIM G: the victim's replacement starts at once; the survivors
# wait for it after the shrink, grow back to 4 and redo the step on 4 ranks,
# so the result is that of an uninterrupted 4-rank run, bit for bit
join_() {
	tr=$1
	victim=$2
	g=$3
	what="$tr, g $g, rank $victim killed and replaced"
	k=$((1 + $(rnd $((STEPS - 3)))))
	export IBC_TRANSPORT=$tr
	mkdir -p "$tmp/jd"
	start "j" 4 --elastic -g "$g" --join-dir "$tmp/jd" --join-wait 30000
	after_step j "$k"
	kill_ranks "$victim"
	OMP_NUM_THREADS=1 timeout -k 5 "${TEST_ELASTIC_RUN_S:-120}" "$gpt" $common -g "$g" --join "$tmp/jd" >"$tmp/j.r4.log" 2>&1 &
	jpid=$!
	wait_all j "$victim"
	st=$?
	wait "$jpid" || st=1
	[ "$st" = 0 ] || sed 's/^/# j.r4.log: /' "$tmp/j.r4.log" | tail -8
	ok $st "$what after step $k: the survivors and the replacement finish all $STEPS steps"
	log=$(grep -l "^elastic: step .*replacement joined" "$tmp"/j.r*.log | head -1)
	ok $? "$what: $(cat "$tmp"/j.r*.log | grep '^elastic: ' | tr '\n' ' ')"
	[ "$(hashes j | wc -l)" = 1 ] && [ "$(cat "$tmp"/j.r*.log | grep -c '^param hash rank')" = 4 ]
	ok $? "$what: the 3 survivors and the replacement hold the same parameters"
	run "u" 4 -g "$g" --quiet
	[ -n "$(hashes j)" ] && [ "$(hashes u)" = "$(hashes j)" ]
	ok $? "$what: == an uninterrupted 4-rank run, bitwise ($(hashes j) vs $(hashes u))"
}

# zero TRANSPORT VICTIM: --zero 1 with a checkpoint every 2 steps: the dead
# rank's optimizer shard is gone, the survivors go back to the last
# checkpoint (step C) on 3 ranks; the result must be bitwise that of 3 ranks
# resumed from that checkpoint with --vranks 4 (from scratch when C = 0)
zero_() {
	tr=$1
	victim=$2
	what="$tr, ZeRO-1, rank $victim killed"
	k=$((1 + $(rnd $((STEPS - 3)))))
	export IBC_TRANSPORT=$tr
	rm -rf "$tmp/ez"
	start "z" 4 --elastic --zero 1 -c 2 -o "$tmp/ez"
	after_step z "$k"
	kill_ranks "$victim"
	wait_all z "$victim"
	ok $? "$what after step $k: the 3 survivors finish all $STEPS steps"
	log=$(grep -l "^elastic: step .*back to the checkpoint" "$tmp"/z.r*.log | head -1)
	cs=$(sed -n 's/^elastic: step [0-9]*: .*back to the checkpoint of step \([0-9]*\) on 3 ranks.*/\1/p' "$log" 2>/dev/null | head -1)
	[ -n "$cs" ]
	ok $? "$what: $(grep '^elastic: step' "$log" | head -1)"
	[ "$(hashes z | wc -l)" = 1 ] && [ "$(cat "$tmp"/z.r*.log | grep -c '^param hash rank')" = 3 ]
	ok $? "$what: the 3 survivors hold the same parameters"
	if [ -z "$cs" ]; then
		ok 1 "$what: no event line, no reference run"
		return
	elif [ "$cs" = 0 ]; then
		run "zc" 3 --zero 1 --vranks 4 --quiet
	else
		run "zc" 3 --zero 1 --vranks 4 --quiet --resume "$tmp/ez/$(printf 'model_%08d.bin' "$cs")"
	fi
	[ -n "$(hashes z)" ] && [ "$(hashes zc)" = "$(hashes z)" ]
	ok $? "$what: == 3 ranks (--vranks 4) from the checkpoint of step ${cs:-?}, bitwise ($(hashes z) vs $(hashes zc))"
}

# stale TRANSPORT: a join request whose replacement never comes: the survivors
# give up on it after IBC_BOOTSTRAP_TIMEOUT_MS and go on with 3 ranks
stale_() {
	tr=$1
	what="$tr, a stale join request"
	export IBC_TRANSPORT=$tr
	rm -rf "$tmp/jd2"
	mkdir -p "$tmp/jd2"
	touch "$tmp/jd2/join.request"
	IBC_BOOTSTRAP_TIMEOUT_MS=3000 start "s" 4 --elastic -g 1 --join-dir "$tmp/jd2" --join-wait 1000
	after_step s 2
	kill_ranks 2
	wait_all s 2
	st=$?
	grep -q "did not join; continuing on 3 ranks" "$tmp"/s.r*.log && [ ! -e "$tmp/jd2/join.request" ] &&
		[ "$(hashes s | wc -l)" = 1 ] && [ "$(cat "$tmp"/s.r*.log | grep -c '^param hash rank')" = 3 ]
	ok $(( st | $? )) "$what: the survivors give up on the replacement, remove the request and finish on 3 ranks"
}

if [ "${TEST_ELASTIC_SET:-}" = ib ]; then
	# over verbs in the Soft-RoCE VM (tests/rxe/in_vm_suite.sh): a kill with
	# its reference, and a kill with a replacement
	case_ ib $((1 + $(rnd 3))) 1
	join_ ib 0 1
else
	case_ shm $((1 + $(rnd 3))) 1
	case_ shm 0 3
	case_ tcp $((1 + $(rnd 3))) 1
	case_ shm 1,3 1
	join_ shm $(rnd 4) 1
	join_ tcp $((1 + $(rnd 3))) 3
	zero_ shm $(rnd 4)
	stale_ shm
fi

echo "1..$n"
exit $fail
