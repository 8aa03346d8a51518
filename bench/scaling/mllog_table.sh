#!/bin/sh
# SPDX-License-Identifier: MIT
# mllog_table.sh - regenerate bench/scaling/mllog-runs.csv, the table of
# MLPerf result logs reduced by `ibc_scaling mllog` (the logs themselves are
# not in this repository). Needs clones of the two results repositories:
#
#   V41_GIT=<git dir of swsok/training_results_v4.1> \
#   V31_GIT=<git dir of mlcommons/training_results_v3.1> \
#   IBC_SCALING_BIN=build/bench/scaling/ibc_scaling \
#   bench/scaling/mllog_table.sh > bench/scaling/mllog-runs.csv
#
# The logs are taken from each repository's HEAD with `git show`, into a
# temporary directory; the table names the commit of every file.
# swsok/training_results_v4.1 is a public mirror of
# mlcommons/training_results_v4.1 (same paths).
set -eu
: "${V41_GIT:?git dir of swsok/training_results_v4.1}"
: "${V31_GIT:?git dir of mlcommons/training_results_v3.1}"
bin=${IBC_SCALING_BIN:-build/bench/scaling/ibc_scaling}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# extract <git dir> <repo name> <dir>... : copy the result logs, print their paths
extract() {
	g=$1
	shift
	for d in "$@"; do
		git --git-dir="$g" ls-tree --name-only HEAD "$d/" | grep '/result_[0-9]*\.txt$' |
		while read -r f; do
			mkdir -p "$tmp/$(dirname "$f")"
			git --git-dir="$g" show "HEAD:$f" > "$tmp/$f"
			echo "$f"
		done
	done
}

c41=$(git --git-dir="$V41_GIT" rev-parse HEAD)
c31=$(git --git-dir="$V31_GIT" rev-parse HEAD)
cat <<EOF
# mllog-runs.csv - MLPerf Training result logs reduced by \`ibc_scaling mllog\`
# (bench/scaling/mllog.c), one row per log; regenerate with
# bench/scaling/mllog_table.sh. Read by ibc_scaling mlperf (rows of
# mlperf.csv name their group in column "runs"). Column meanings:
# bench/scaling/mllog.h, struct ibc_mllog_run. "source" is
# repository@commit:path of the log; swsok/training_results_v4.1 is a
# public mirror of mlcommons/training_results_v4.1.
# Note: Oracle's 512-GPU (64-node) LoRA logs are in 512xBM.GPU.H100.8; the
# directory 64xBM.GPU.H100.8 holds its 64-GPU (8-node) runs (the system
# files Oracle/systems/*.json give number_of_nodes 64 and 8).
EOF
files41=$(cd "$tmp" && extract "$V41_GIT" \
	Azure/results/ND_H200_v5_n64_nemo/llama2_70b_lora \
	Oracle/results/512xBM.GPU.H100.8/llama2_70b_lora \
	Oracle/results/64xBM.GPU.H100.8/llama2_70b_lora \
	NVIDIA/results/eos_ngc24.09_nemo/llama2_70b_lora \
	NVIDIA/results/h200_ngc24.09_nemo/llama2_70b_lora \
	NVIDIA/results/eos_n8_ngc24.09_nemo/llama2_70b_lora)
files31=$(cd "$tmp" && extract "$V31_GIT" \
	NVIDIA/results/eos_n64_ngc23.09_nemo/gpt3 \
	NVIDIA/results/eos-dfw_n1344_ngc23.09_nemo/gpt3 \
	"Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch/gpt3")
abs_bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
# shellcheck disable=SC2086
(cd "$tmp" && "$abs_bin" mllog -R "swsok/training_results_v4.1@$c41" $files41)
# shellcheck disable=SC2086
(cd "$tmp" && "$abs_bin" mllog -R "mlcommons/training_results_v3.1@$c31" $files31) | sed 1d
