#!/bin/sh
# SPDX-License-Identifier: MIT
# run_demo.sh - the main demo: a 4-rank data-parallel GPT-2 (d2) trained on
# Debian's fortunes + jargon-text, gradients averaged by ibcoll.
#
# usage: trainer/run_demo.sh          (after scripts/build.sh, or ./configure && make)
#
# 1. tokenizes the corpus into data/corpus/ unless already done
#    (trainer/prepro/prepare.sh: npm ci of the pinned js-tiktoken, then node);
# 2. trains NP ranks (default 4) of trainer/ibc_gpt2 on this host, launched by
#    mpirun when it is installed (IBC_ROOT passed with -x), else by a plain
#    loop that sets IBC_RANK/IBC_NRANKS/IBC_ROOT per process;
# 3. writes OUT (default out/demo): train.log, loss.csv, loss.png, the final
#    checkpoint (model_*.bin in llm.c's format + state_*.bin).
#
# Settings (environment): NP=4 STEPS=150 OUT=out/demo LAUNCHER=auto|mpirun|env
# PORT=<bootstrap port, default random> EXTRA="<more ibc_gpt2 flags>"
# DATA=data/corpus (tokenized corpus directory) IBC_BUILD_DIR=<build dir>.
# One OpenMP thread per rank: 4 ranks share the 2 cores of the reference box.
set -eu
case "${1:-}" in
-h | --help)
	sed -n '3,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0"
	exit 0
	;;
"") ;;
*)
	echo "run_demo: no arguments (settings are environment variables; see --help)" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
NP=${NP:-4}
STEPS=${STEPS:-150}
OUT=${OUT:-out/demo}
LAUNCHER=${LAUNCHER:-auto}
EXTRA=${EXTRA:-}
DATA=${DATA:-data/corpus}
# the binary: IBC_BUILD_DIR (scripts/build.sh's build/), else an in-tree build
bin=
for d in "${IBC_BUILD_DIR:-}" "$root/build" "$root"; do
	if [ -n "$d" ] && [ -x "$d/trainer/ibc_gpt2" ]; then
		bin=$d/trainer/ibc_gpt2
		break
	fi
done

if [ -z "$bin" ]; then
	echo "run_demo: trainer/ibc_gpt2 is not built (looked in \$IBC_BUILD_DIR, build/ and the source tree); run: scripts/build.sh" >&2
	exit 1
fi
t0=$(date +%s)
trainer/prepro/prepare.sh "$DATA"
mkdir -p "$OUT"
rm -f "$OUT"/rank*.log

if [ -z "${PORT:-}" ]; then
	# a random unprivileged port that nothing listens on
	while :; do
		PORT=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000 )) # 20000-31999: below the ephemeral ports (32768-)
		command -v ss >/dev/null 2>&1 || break
		ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . || break
	done
fi
if [ "$LAUNCHER" = auto ]; then
	LAUNCHER=env
	command -v mpirun >/dev/null 2>&1 && LAUNCHER=mpirun
fi

# d2: L 2, C 128, NH 2 (7.0 M parameters, 6.4 M of them the tied embedding);
# global batch NP x 4 x 64 tokens; loss, lr, norm, time and all-reduce per step.
set -- -d 2 -T 64 -b 4 -g 1 -n "$STEPS" -u 15 -l 4e-3 -q 0.1 -v 25 -m 8 -s 75 --gen 64 \
	-i "$DATA/corpus_train_*.bin" -j "$DATA/corpus_val_*.bin" -k "$DATA/gpt2_tokenizer.bin" \
	-o "$OUT" --log "$OUT/loss.csv" $EXTRA
echo "run_demo: $NP ranks via $LAUNCHER, IBC_ROOT=127.0.0.1:$PORT, output in $OUT"
export OMP_NUM_THREADS=1
# a random job secret: only processes given it can join the bootstrap
# (without it, ibcoll derives one from IBC_ROOT and the job id: docs/reliability.md)
IBC_SECRET=${IBC_SECRET:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}
export IBC_SECRET
status=0
if [ "$LAUNCHER" = mpirun ]; then
	mpirun --allow-run-as-root --oversubscribe -np "$NP" \
		-x IBC_ROOT="127.0.0.1:$PORT" -x IBC_SECRET -x OMP_NUM_THREADS \
		"$bin" "$@" 2>&1 | tee "$OUT/train.log" || status=$?
	# the pipeline's status is tee's: the trainer prints this line when done
	grep -q '^ibc_gpt2: done' "$OUT/train.log" || status=1
else
	pids=
	r=1
	while [ "$r" -lt "$NP" ]; do
		IBC_RANK=$r IBC_NRANKS=$NP IBC_ROOT="127.0.0.1:$PORT" \
			"$bin" "$@" >"$OUT/rank$r.log" 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
	IBC_RANK=0 IBC_NRANKS=$NP IBC_ROOT="127.0.0.1:$PORT" "$bin" "$@" 2>&1 |
		tee "$OUT/train.log" || status=$?
	for p in $pids; do
		wait "$p" || status=$?
	done
	grep -q '^ibc_gpt2: done' "$OUT/train.log" || status=1
fi
if [ "$status" != 0 ]; then
	echo "run_demo: training failed (status $status); see $OUT/train.log and $OUT/rank*.log" >&2
	exit 1
fi

if command -v gnuplot >/dev/null 2>&1; then
	gnuplot -e "csv='$OUT/loss.csv'; png='$OUT/loss.png'; title='ibc_gpt2 d2, $NP ranks (ibcoll all-reduce), Debian fortunes + jargon'" \
		trainer/plot_loss.gp || echo "run_demo: gnuplot failed, no plot" >&2
	echo "run_demo: plot $OUT/loss.png"
else
	echo "run_demo: gnuplot not installed, no plot (scripts/install-deps.sh installs gnuplot-nox)" >&2
fi
echo "run_demo: finished in $(( $(date +%s) - t0 )) s: $OUT/train.log, $OUT/loss.csv, $OUT/loss.png"
