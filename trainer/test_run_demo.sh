#!/bin/sh
# SPDX-License-Identifier: MIT
# test_run_demo.sh - the README's main job, shortened: trainer/run_demo.sh
# with 2 ranks and 6 steps must find the built trainer (IBC_BUILD_DIR), train
# over ibcoll with both launchers, finish, and write a loss log with finite
# losses for every step. Uses data/corpus from the source tree, else the
# build tree's (tokenized by trainer/prepro/prepare.sh); SKIPs when neither
# can be had.
set -u
src=${top_srcdir:-.}
bld=$(cd "${top_builddir:-.}" && pwd)
if [ ! -x "$bld/trainer/ibc_gpt2" ]; then
	echo "1..0 # SKIP ibc_gpt2 not built"
	exit 0
fi
data=$(cd "$src" && pwd)/data/corpus
if [ ! -f "$data/manifest.json" ]; then
	data=$bld/data/corpus
	if ! "$src/trainer/prepro/prepare.sh" "$data" >/dev/null 2>&1; then
		echo "1..0 # SKIP corpus not tokenized and trainer/prepro/prepare.sh failed"
		exit 0
	fi
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibc_test_demo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
launchers="env"
command -v mpirun >/dev/null 2>&1 && launchers="env mpirun"
echo "1..4"
n=0
for l in env mpirun; do
	case " $launchers " in
	*" $l "*) ;;
	*)
		echo "ok $((n + 1)) # SKIP mpirun not installed"
		echo "ok $((n + 2)) # SKIP mpirun not installed"
		n=$((n + 2))
		continue
		;;
	esac
	out=$tmp/$l
	IBC_BUILD_DIR=$bld DATA=$data OUT=$out NP=2 STEPS=6 LAUNCHER=$l EXTRA="--gen 0 -v 3" \
		IBC_TIMEOUT_MS=60000 timeout -k 5 300 "$src/trainer/run_demo.sh" >"$tmp/$l.log" 2>&1
	rc=$?
	n=$((n + 1))
	if [ "$rc" -eq 0 ] && grep -q '^ibc_gpt2: done' "$out/train.log"; then
		echo "ok $n - run_demo.sh, 2 ranks via $l, 6 steps: trains and finishes"
	else
		echo "not ok $n - run_demo.sh, 2 ranks via $l (rc $rc)"
		sed 's/^/# /' "$tmp/$l.log" | tail -15
	fi
	# loss.csv: header, then one row per step; column 2 is the training loss
	rows=$(awk -F, 'NR > 1 && $2 != "" && $2 + 0 > 0 && $2 + 0 < 20 { k++ } END { print k + 0 }' \
		"$out/loss.csv" 2>/dev/null)
	n=$((n + 1))
	if [ "${rows:-0}" -ge 6 ]; then
		echo "ok $n - loss.csv has a finite training loss for each of the 6 steps ($rows rows)"
	else
		echo "not ok $n - loss.csv rows with a finite loss: ${rows:-none}"
		head -5 "$out/loss.csv" 2>/dev/null | sed 's/^/# /'
	fi
done
