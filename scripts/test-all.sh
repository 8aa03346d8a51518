#!/bin/sh
# SPDX-License-Identifier: MIT
# test-all.sh - the README's test command: install what the tests need
# (Debian packages, including the Soft-RoCE VM's), build with warnings as
# errors, run `make check` (unit, collective matrix, reliability, trainer,
# benchmark checks) and `make check-rxe` (verbs tests in a Soft-RoCE VM),
# and end with a summary of every suite.
#
# usage: scripts/test-all.sh
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=${IBC_BUILD_DIR:-$top/build}
start=$(date +%s)
"$top/scripts/install-deps.sh" --vm || exit 1
# CUDA: where nvcc exists, ask for CUDA explicitly, so that a detection
# failure (headers, cudart) stops configure instead of silently building
# without it and skipping the GPU tests. IBC_WITH_CUDA=no|DIR overrides.
cuda_arg=
if [ -n "${IBC_WITH_CUDA:-}" ]; then
	cuda_arg="--with-cuda=$IBC_WITH_CUDA"
elif [ -x /usr/local/cuda/bin/nvcc ]; then
	cuda_arg="--with-cuda=/usr/local/cuda"
elif nvcc=$(command -v nvcc 2>/dev/null); then
	cuda_arg="--with-cuda=$(dirname "$(dirname "$nvcc")")"
fi
[ -n "$cuda_arg" ] && echo "test-all: $cuda_arg"
# shellcheck disable=SC2086
"$top/scripts/build.sh" --enable-werror $cuda_arg || exit 1
cd "$bdir" || exit 1

rc=0
suites=""
run_suite() {
	name=$1
	shift
	echo "=== $name: $*"
	if "$@"; then
		suites="$suites
  $name: passed"
	else
		suites="$suites
  $name: FAILED (see $bdir/*.log and tests/*/*.log)"
		rc=1
	fi
}
run_suite "make check" make -j"$(nproc)" check
if grep -q '^check-rxe:' Makefile; then
	run_suite "make check-rxe" make check-rxe
fi
if grep -q '^check-extra:' Makefile; then
	run_suite "make check-extra" make check-extra
fi
# Name what failed, here at the end, where a CI log's tail shows it: each
# failed test's "not ok" lines with their diagnostics, or the log's last
# lines when it has none (a crash, a timeout, a bail-out).
if [ $rc -ne 0 ]; then
	echo
	echo "=== failed tests"
	find . -name '*.trs' | sort | while read -r trs; do
		grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "$trs" || continue
		log=${trs%.trs}.log
		echo "--- ${log#./}:"
		if grep -qE '^(not ok|Bail out)' "$log" 2>/dev/null; then
			awk '/^(not ok|Bail out)/ { show = 1; print; next }
			     show && /^#/ { print; next } { show = 0 }' "$log" | head -n 40
		else
			tail -n 20 "$log" 2>/dev/null
		fi
	done
fi
end=$(date +%s)
echo
echo "=== test summary ($((end - start)) s)"
for f in test-suite.log tests/rxe/test-suite.log; do
	[ -f "$f" ] && grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' "$f" | tr '\n' ' ' | sed "s|^|  $f: |" && echo
done
printf '%s\n' "$suites"
[ $rc -eq 0 ] && echo "ALL TESTS PASSED" || echo "SOME TESTS FAILED"
exit $rc
