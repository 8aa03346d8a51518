#!/bin/sh
# SPDX-License-Identifier: MIT
# test_train_dp.sh - data-parallel checks of trainer/ibc_gpt2 over ibcoll,
# with R local processes (IBC_RANK/IBC_NRANKS/IBC_ROOT) on synthetic shards,
# d2 model, T 16:
#   - R x b = 6 sequences for R = 1, 2, 3: the averaged gradients of step 1
#     and the parameters and loss after 3 steps match R = 1 within fp32
#     tolerances (GRAD_RTOL, PARAM_RTOL below: only the summation order
#     differs);
#   - the parameter hash is the same on every rank, plain and ZeRO-1;
#   - ZeRO-1 matches plain within PARAM_RTOL; overlap on/off agree bitwise;
#   - 3 steps + checkpoint + resume 3 steps == 6 steps bitwise, plain and ZeRO-1;
#   - an mpirun launch (when mpirun exists) agrees bitwise with the plain one.
set -u

# Tolerances, relative to the largest magnitude of the reference vector.
# Gradients: the all-reduce and the per-rank means change the fp32 summation
# order only (measured 2.7e-7 for R 2, 6.9e-6 for R 3, on bias gradients, sums
# with cancellation). Parameters after 3 AdamW steps: Adam divides by
# sqrt(v), which lets an element whose gradient is at the noise level move by
# up to ~lr per step in either direction, so the bound is looser (measured
# 2.5e-6 for R 2 and 3.5e-4 for R 3 with lr 1e-3).
GRAD_RTOL=5e-5
PARAM_RTOL=2e-3
LOSS_ATOL=1e-4

b=${top_builddir:-.}/trainer
gpt=$b/ibc_gpt2
tool=$b/test_dp_tool
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibc_test_dp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0
fail=0

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
		p=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000)) # 20000-31999: below the ephemeral ports (32768-), which outgoing connections take
		command -v ss >/dev/null 2>&1 || break
		ss -Hltn "sport = :$p" 2>/dev/null | grep -q . || break
	done
	echo "$p"
}

# run NAME R ARGS...: R ranks, logs in $tmp/NAME.rN.log; status 0 when all succeed
run() {
	name=$1
	R=$2
	shift 2
	port=$(free_port)
	pids=
	r=0
	while [ "$r" -lt "$R" ]; do
		IBC_RANK=$r IBC_NRANKS=$R IBC_ROOT=127.0.0.1:$port OMP_NUM_THREADS=1 \
			timeout -k 5 120 "$gpt" $common "$@" >"$tmp/$name.r$r.log" 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
	st=0
	for p in $pids; do
		wait "$p" || st=1
	done
	if [ "$st" != 0 ]; then
		for f in "$tmp/$name".r*.log; do
			sed "s|^|# $(basename "$f"): |" "$f" | tail -5
		done
	fi
	return $st
}

# every rank printed the same parameter hash
same_hash() {
	cat "$tmp/$1".r*.log | sed -n 's/^param hash rank [0-9]*: //p' | sort -u | wc -l | grep -qx 1 &&
		[ "$(cat "$tmp/$1".r*.log | grep -c '^param hash rank')" = "$2" ]
}

hash_of() {
	sed -n 's/^param hash rank 0: //p' "$tmp/$1.r0.log"
}

last_loss() {
	awk -F, '$2 != "" { l = $2 } END { print l }' "$tmp/$1.csv"
}

compare() {
	out=$("$tool" compare "$@")
	st=$?
	echo "# $out"
	return $st
}

if [ ! -x "$gpt" ] || [ ! -x "$tool" ]; then
	echo "1..0 # SKIP ibc_gpt2 not built"
	exit 0
fi
"$tool" mkshard "$tmp/syn_train_000001.bin" 30000 0 || { echo "Bail out! cannot write shards"; exit 1; }
# no -j: the synthetic run has no validation set
common="-d 2 -T 16 -i $tmp/syn_train_000001.bin -m 0 -u 2 -l 1e-3 --gen 0 --quiet --peak-gflops 1 --print-hash --bucket-mb 0.5"

echo "1..23"
for R in 1 2 3; do
	bsz=$((6 / R))
	run "g$R" "$R" -b "$bsz" -n 3 --stop 1 --dump-grads "$tmp/grads$R.bin"
	ok $? "R $R x b $bsz: one step runs"
	run "p$R" "$R" -b "$bsz" -n 3 --dump-params "$tmp/params$R.bin" --log "$tmp/p$R.csv"
	st=$?
	same_hash "p$R" "$R"
	hs=$?
	if [ "$R" = 1 ]; then
		ok $(( st | hs )) "R 1 x b 6: 3 steps, reference run"
	else
		ok $(( st | hs )) "R $R x b $bsz: 3 steps, parameter hash identical on all $R ranks"
	fi
done
for R in 2 3; do
	compare "$tmp/grads$R.bin" "$tmp/grads1.bin" $GRAD_RTOL
	ok $? "R $R x b $((6 / R)) gradients == R 1 x b 6 gradients (rtol $GRAD_RTOL)"
	compare "$tmp/params$R.bin" "$tmp/params1.bin" $PARAM_RTOL
	st=$?
	l1=$(last_loss p1)
	lR=$(last_loss "p$R")
	echo "# loss after 3 steps: R 1 $l1, R $R $lR"
	awk -v a="$l1" -v b="$lR" -v t=$LOSS_ATOL 'BEGIN { d = a - b; exit !(a != "" && (d < 0 ? -d : d) <= t) }'
	ok $(( st | $? )) "R $R: parameters (rtol $PARAM_RTOL) and loss (atol $LOSS_ATOL) after 3 steps == R 1"
done

for R in 2 3; do
	run "z$R" "$R" -b $((6 / R)) -n 3 --zero 1 --dump-params "$tmp/zparams$R.bin"
	st=$?
	same_hash "z$R" "$R"
	ok $(( st | $? )) "ZeRO-1 R $R: parameter hash identical on all ranks"
	compare "$tmp/zparams$R.bin" "$tmp/params$R.bin" $PARAM_RTOL
	ok $? "ZeRO-1 R $R == plain R $R (rtol $PARAM_RTOL)"
done

run o2 2 -b 3 -n 3 --overlap 0
ok $? "R 2 without overlap runs"
[ "$(hash_of o2)" = "$(hash_of p2)" ]
ok $? "overlap off == overlap on, bitwise"

for mode in 0 1; do
	run "s$mode" 2 -b 3 -n 6 --zero $mode &&
		run "a$mode" 2 -b 3 -n 6 --stop 3 --zero $mode -o "$tmp/ck$mode" &&
		run "c$mode" 2 -b 3 -n 6 --zero $mode --resume "$tmp/ck$mode/model_00000003.bin"
	st=$?
	[ "$st" = 0 ] && [ -n "$(hash_of "s$mode")" ] && [ "$(hash_of "s$mode")" = "$(hash_of "c$mode")" ]
	ok $? "zero $mode: 3 steps + checkpoint + resume 3 steps == 6 steps, bitwise"
done

if command -v mpirun >/dev/null 2>&1; then
	port=$(free_port)
	OMP_NUM_THREADS=1 timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np 2 \
		-x IBC_ROOT=127.0.0.1:$port -x OMP_NUM_THREADS "$gpt" $common -b 3 -n 3 \
		>"$tmp/mpi.r0.log" 2>&1
	st=$?
	[ "$st" = 0 ] || tail -5 "$tmp/mpi.r0.log" | sed 's/^/# /'
	same_hash mpi 2
	st2=$?
	[ "$(hash_of mpi)" = "$(hash_of p2)" ]
	ok $(( st | st2 | $? )) "mpirun -np 2 (IBC_ROOT via -x) == the IBC_RANK launch, bitwise"
else
	ok 0 "# SKIP mpirun not installed"
fi

# one rank fails alone (its data pattern matches nothing): it aborts the
# communicator, and the other rank's error names it; nobody waits for
# IBC_TIMEOUT_MS, and nobody reports a mismatch (the failing rank's exit
# barrier against the others' broadcast, before 2026-11-30)
port=$(free_port)
t0=$(date +%s)
IBC_RANK=0 IBC_NRANKS=2 IBC_ROOT=127.0.0.1:$port IBC_TIMEOUT_MS=100000 OMP_NUM_THREADS=1 \
	timeout -k 5 120 "$gpt" $common -b 3 -n 3 >"$tmp/nodata.r0.log" 2>&1 &
p0=$!
IBC_RANK=1 IBC_NRANKS=2 IBC_ROOT=127.0.0.1:$port IBC_TIMEOUT_MS=100000 OMP_NUM_THREADS=1 \
	timeout -k 5 120 "$gpt" $common -b 3 -n 3 -i "$tmp/none_*.bin" >"$tmp/nodata.r1.log" 2>&1 &
p1=$!
wait $p0
st0=$?
wait $p1
st1=$?
dt=$(($(date +%s) - t0))
[ "$st0" != 0 ] && [ "$st1" != 0 ] && [ "$dt" -lt 60 ] &&
	grep -q 'no file matches' "$tmp/nodata.r1.log" &&
	grep -q 'rank 1: stopping after the error above' "$tmp/nodata.r1.log" &&
	grep -q 'rank 1 (host .*) aborted the communicator' "$tmp/nodata.r0.log" &&
	! grep -q 'mismatched calls' "$tmp/nodata.r0.log" "$tmp/nodata.r1.log"
st=$?
[ "$st" = 0 ] || tail -4 "$tmp/nodata.r0.log" "$tmp/nodata.r1.log" | sed 's/^/# /'
ok $st "one rank without data: it aborts, the other's error names rank 1, both exit non-zero in $dt s (exit $st0, $st1)"

# messages for a new user: one step gives its time and says it is the only
# one; a missing tokenizer gives one WARN line; an unquoted -i glob (the shell
# passes its files as extra arguments) gets a hint to quote the pattern
run one 1 -b 2 -n 1 --gen 2 -k "$tmp/no_tokenizer.bin"
st=$?
grep -Eq '^ibc_gpt2: done 1 steps in [0-9.]+ s; mean step [0-9]+\.[0-9] ms \(step 1 only, with its one-time costs: run 2 or more steps to leave the first out\)$' "$tmp/one.r0.log"
ok $(( st | $? )) "-n 1: exit 0 (got $st), mean step of step 1 and says so"
[ "$(grep -c WARN "$tmp/one.r0.log")" = 1 ] &&
	grep -qxF "ibc_gpt2: WARN tokenizer (-k): cannot open $tmp/no_tokenizer.bin: No such file or directory; samples will be shown as token ids" "$tmp/one.r0.log" &&
	grep -Eq '^ [0-9]+ [0-9]+$' "$tmp/one.r0.log"
ok $? "-k missing file: exactly one WARN line, the sample shows 2 token ids"
OMP_NUM_THREADS=1 timeout -k 5 60 "$gpt" -n 1 -i "$tmp/syn_train_000001.bin" "$tmp/syn_train_000001.bin" \
	"$tmp/syn_train_000001.bin" >"$tmp/glob.log" 2>&1
st=$?
[ "$st" = 2 ] &&
	grep -qxF "ibc_gpt2: unexpected argument '$tmp/syn_train_000001.bin' (2 extra arguments): did the shell expand a -i or -j pattern? quote it, e.g. -i 'data/corpus/corpus_train_*.bin'" "$tmp/glob.log"
ok $? "unquoted -i glob: exit 2 (got $st), the error suggests quoting the pattern"
exit $fail
