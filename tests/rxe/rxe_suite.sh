#!/bin/sh
# SPDX-License-Identifier: MIT
# rxe_suite.sh - `make check-rxe`: boot the Soft-RoCE VM once
# (tests/rxe/rxe-vm.sh) and run tests/rxe/in_vm_suite.sh in it, from the
# build directory; TAP out. SKIP (not pass) when the VM's prerequisites are
# missing (run scripts/install-deps.sh --vm). Bounded by RXEVM_TIMEOUT
# (default 1200 s: the VM part must stay within 20 minutes; make check-rxe
# bounds the whole script at 1500 s, boot included).
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${top_builddir:-.}
reason=$("$srcdir/tests/rxe/rxe-vm.sh" --check 2>&1)
rc=$?
if [ $rc -eq 77 ]; then
	echo "1..0 # SKIP ${reason#rxe-vm: SKIP: }"
	exit 0
elif [ $rc -ne 0 ]; then
	echo "1..1"
	echo "not ok 1 - rxe-vm.sh --check failed: $reason"
	exit 1
fi
cd "$builddir" || exit 1
out=tests/rxe/logs/suite.tap
mkdir -p tests/rxe/logs
t0=$(date +%s)
RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1200} "$srcdir/tests/rxe/rxe-vm.sh" "$srcdir/tests/rxe/in_vm_suite.sh" | tee "$out"
n=$(grep -cE '^(not )?ok ' "$out")
vmrc=0
if ! grep -q '^# verbs suite: ' "$out"; then
	n=$((n + 1))
	echo "not ok $n - the VM suite did not finish (VM timed out or died; see the output above)"
	vmrc=1
fi
echo "# VM boot + suite: $(($(date +%s) - t0)) s wall"
echo "1..$n"
grep -q '^not ok ' "$out" && exit 1
exit $vmrc
