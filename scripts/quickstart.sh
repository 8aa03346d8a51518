#!/bin/sh
# SPDX-License-Identifier: MIT
# quickstart.sh - the README's main command: install dependencies, build, and
# run the main job: a 4-rank data-parallel GPT-2 training on real text
# (Debian's fortunes and the Jargon File, tokenized with GPT-2's BPE), with
# gradients averaged by ibcoll. Output goes to out/.
#
# usage: scripts/quickstart.sh [extra trainer/run_demo.sh arguments]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh"
export IBC_BUILD_DIR="${IBC_BUILD_DIR:-$top/build}"
exec "$top/trainer/run_demo.sh" "$@"
