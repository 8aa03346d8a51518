#!/bin/sh
# SPDX-License-Identifier: MIT
# test_train_learn.sh - the d2 model learns the real corpus: after STEPS
# steps of 2 ranks x B 4 x T 32 (256 tokens per step) the validation loss must
# be at least DROP nats below its value at step 0 (ln 50257 = 10.82 for a
# uniform guess). Measured on the reference machine: 10.84 -> 7.40 (see
# trainer/README.md). Needs the tokenized corpus: uses data/corpus from the
# source tree, else runs trainer/prepro/prepare.sh into the build tree (npm
# registry access the first time); SKIPs when neither works.
set -u
set -f # the shard patterns are globs for ibc_gpt2, not for the shell
STEPS=40
DROP=3.0

b=${top_builddir:-.}/trainer
src=${top_srcdir:-.}
gpt=$b/ibc_gpt2
if [ ! -x "$gpt" ]; then
	echo "1..0 # SKIP ibc_gpt2 not built"
	exit 0
fi
data=$src/data/corpus
if [ ! -f "$data/manifest.json" ]; then
	data=${top_builddir:-.}/data/corpus
	if ! "$src/trainer/prepro/prepare.sh" "$data" >/dev/null 2>&1; then
		echo "1..0 # SKIP corpus not tokenized and trainer/prepro/prepare.sh failed (node, npm registry, fortunes, jargon-text)"
		exit 0
	fi
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibc_test_learn.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
p=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000)) # 20000-31999: below the ephemeral ports (32768-), which outgoing connections take
echo "1..2"
args="-d 2 -T 32 -b 4 -n $STEPS -u 5 -l 6e-3 -v $STEPS -m 4 --gen 0 --quiet --peak-gflops 1
	-i $data/corpus_train_*.bin -j $data/corpus_val_*.bin"
IBC_RANK=1 IBC_NRANKS=2 IBC_ROOT=127.0.0.1:$p OMP_NUM_THREADS=1 timeout -k 5 300 "$gpt" $args \
	>"$tmp/r1.log" 2>&1 &
pid=$!
IBC_RANK=0 IBC_NRANKS=2 IBC_ROOT=127.0.0.1:$p OMP_NUM_THREADS=1 timeout -k 5 300 "$gpt" $args \
	>"$tmp/r0.log" 2>&1
st=$?
wait $pid || st=1
if [ "$st" = 0 ]; then
	echo "ok 1 - 2-rank training on the corpus ran $STEPS steps"
else
	echo "not ok 1 - 2-rank training on the corpus ran $STEPS steps"
	tail -n 5 "$tmp/r0.log" "$tmp/r1.log" | sed 's/^/# /'
fi
v0=$(sed -n 's/^step *0 | val loss //p' "$tmp/r0.log")
v1=$(sed -n "s/^step *$STEPS | val loss //p" "$tmp/r0.log")
echo "# validation loss: step 0 ${v0:-?}, step $STEPS ${v1:-?}"
if awk -v a="$v0" -v b="$v1" -v d=$DROP 'BEGIN { exit !(a != "" && b != "" && a - b >= d) }'; then
	echo "ok 2 - validation loss fell by at least $DROP nats ($v0 -> $v1)"
else
	echo "not ok 2 - validation loss fell by at least $DROP nats (${v0:-?} -> ${v1:-?})"
	exit 1
fi
exit $st
