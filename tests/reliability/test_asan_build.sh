#!/bin/sh
# SPDX-License-Identifier: MIT
# test_asan_build.sh - build ibcoll again with ./configure --enable-asan
# (AddressSanitizer + UndefinedBehaviorSanitizer, -fno-sanitize-recover) in
# $top_builddir/asan-build and run its `make check` there for the unit
# tests, the collective tests (tests/coll: the matrix's 4-rank shm and tcp
# groups, teardown, small tcp buffers; not the launcher tests)
# and the reliability tests (kill, stop, mismatch, abort, fault loop with a
# leak check per run, flood, hygiene); IBC_ASAN_TESTS lists other path
# prefixes to run instead, IBC_ASAN_SKIP an ERE of tests to leave out
# (default: the schedule simulator and tuner unit tests), IBC_MATRIX_ONLY
# other matrix groups.
# LeakSanitizer is on (tests/reliability/lsan.supp suppresses leaks inside
# Open MPI, should a test load it). The nested run sets IBC_ASAN_NESTED=1,
# so this test, the fuzzer and valgrind SKIP there, and IBC_TEST_QUICK=1,
# so the kill, stop and hygiene tests run a smaller matrix (3 ranks; one
# case per stop variant; 200 cycles). TAP on stdout.
#
# The ASan tree reuses the outer build's configure arguments, without CUDA
# and MPI (whose tests are not run here). Automake
# refuses a second build of a source tree configured in place, so the
# sources are copied first (the files git knows plus the generated
# autotools files, mtimes kept, so later runs rebuild only what changed);
# without git, `make distdir` makes the copy.
# Bound: the whole test has IBC_TEST_TIMEOUT (make check's, 600 s here
# set by Makefile.am); IBC_ASAN_JOBS (default 2) parallel jobs.
set -u
srcdir=$(cd "${top_srcdir:-.}" && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
jobs=${IBC_ASAN_JOBS:-2}
dir="$builddir/asan-build"

if [ -n "${IBC_ASAN_NESTED:-}" ]; then
	echo "1..0 # SKIP this is the nested ASan build"
	exit 0
fi
if grep -q '^#define IBC_ASAN 1' "$builddir/config.h" 2>/dev/null; then
	echo "1..0 # SKIP this build already has --enable-asan: its own make check is the ASan run"
	exit 0
fi
start=$(date +%s)
# the outer make's variables (TEST_LOGS, -j jobserver) must not leak into the nested one
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES GNUMAKEFLAGS
echo "1..4"
mkdir -p "$dir"
log="$dir/asan-build.log"
: >"$log"

# 1. sources
src="$srcdir"
if [ -f "$srcdir/config.status" ]; then
	src="$dir/src"
	mkdir -p "$src"
	if git -C "$srcdir" rev-parse --git-dir >/dev/null 2>&1; then
		(
			cd "$srcdir" &&
			{ git ls-files -co --exclude-standard | grep -v '^asan-build/';
			  ls configure aclocal.m4 config.h.in Makefile.in build-aux/* \
				m4/libtool.m4 m4/lt*.m4 2>/dev/null; } |
			while read -r f; do [ -f "$f" ] && echo "$f"; done |
			tar -cf - -T - | tar -C "$src" -xpf -
		) >>"$log" 2>&1
		ok=$?
	else
		rm -rf "$src" "$builddir/ibcoll-asan-copy"
		make -C "$builddir" distdir distdir="$builddir/ibcoll-asan-copy" >>"$log" 2>&1 &&
			mv "$builddir/ibcoll-asan-copy" "$src"
		ok=$?
	fi
	if [ $ok -ne 0 ] || [ ! -x "$src/configure" ]; then
		echo "not ok 1 - copy the sources for the ASan build"
		tail -20 "$log" | sed 's/^/# /'
		exit 1
	fi
fi
echo "ok 1 - sources for the ASan build in ${src#$builddir/}"

# 2. configure with the outer build's arguments plus --enable-asan
if [ ! -f "$dir/config.status" ] || [ "$src/configure" -nt "$dir/config.status" ]; then
	args=$(cd "$builddir" && ./config.status --config 2>/dev/null)
	# CUDA (nvcc) and MPI (benchmarks) only slow this build down: their
	# tests are not among those run here
	if (cd "$dir" && eval "\"$src/configure\" -q $args --enable-asan --disable-werror \
		--with-cuda=no --with-mpi=no") \
		>>"$log" 2>&1; then
		echo "ok 2 - configure --enable-asan"
	else
		echo "not ok 2 - configure --enable-asan"
		tail -30 "$log" | sed 's/^/# /'
		exit 1
	fi
else
	echo "ok 2 - configure --enable-asan (already configured)"
fi

# 3. build
if make -C "$dir" -j"$jobs" >>"$log" 2>&1 && make -C "$dir" -j"$jobs" check TESTS= >>"$log" 2>&1
then
	echo "ok 3 - build with -fsanitize=address,undefined"
else
	echo "not ok 3 - build with -fsanitize=address,undefined"
	grep -E 'error|Error' "$log" | tail -20 | sed 's/^/# /'
	exit 1
fi

# 4. the tests, sanitized
export IBC_ASAN_NESTED=1
export IBC_TEST_QUICK=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:fast_unwind_on_malloc=0}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$srcdir/tests/reliability/lsan.supp:print_suppressions=0}"
# hwloc dlopens its GL and OpenCL plugins (libX11, xcb, OpenCL ICD) at the
# first topology load; when that load happens while other threads run (the
# alloc fault that fails the first attempt moves it past the bootstrap's
# threads), LeakSanitizer's thread tracer crashes at exit on a stale
# dynamic-TLS range ("Tracer caught signal 11"): a sanitizer/glibc problem,
# not a memory error of ibcoll. ibcoll uses neither plugin.
export HWLOC_PLUGINS_BLACKLIST="${HWLOC_PLUGINS_BLACKLIST:-hwloc_gl,hwloc_opencl}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
# the unit, collective and reliability tests (IBC_ASAN_TESTS: path prefixes)
# (the tree-schedule simulator and tuner unit tests, pure computation that
# takes minutes under ASan on 2 cores, are left to the plain build)
prefixes=${IBC_ASAN_TESTS:-tests/unit/ tests/coll/test_coll tests/coll/test_tcp tests/coll/test_p2p tests/reliability/}
skip_re=${IBC_ASAN_SKIP:-'^tests/unit/test_(sched|select)$'}
# the collective matrix: its two 4-rank groups (shm and tcp, reduced sweep);
# its time budget is what is left of ours after a slow build, minus room
# for the other tests (the harness gives this whole test 600 s)
export IBC_MATRIX_ONLY="${IBC_MATRIX_ONLY:-4:shm 4:tcp}"
left=$((450 - $(date +%s) + start))
[ $left -lt 60 ] && left=60
export IBC_MATRIX_BUDGET_S="${IBC_MATRIX_BUDGET_S:-$left}"
all=$(printf 'ibc-print-tests:\n\t@echo $(TESTS)\n' |
	make -s -C "$dir" -f Makefile -f - ibc-print-tests 2>>"$log")
list=
for t in $all; do
	echo "$t" | grep -Eq "$skip_re" && continue
	for p in $prefixes; do
		case $t in "$p"*) list="$list $t" ;; esac
	done
done
if [ -z "$list" ]; then
	echo "not ok 4 - no test of the ASan build matches IBC_ASAN_TESTS='$prefixes'"
	exit 1
fi
t0=$(date +%s)
if make -C "$dir" -j"$jobs" check TESTS="$list" >>"$log" 2>&1; then
	summary=$(sed -n 's/^# \(TOTAL\|PASS\|SKIP\|FAIL\|ERROR\): *\([0-9]*\)/\1 \2/p' \
		"$dir/test-suite.log" | tr '\n' ' ')
	echo "ok 4 - make check under ASan+UBSan ($summary; $(($(date +%s) - t0)) s)"
else
	echo "not ok 4 - make check under ASan+UBSan: see $dir/test-suite.log"
	sed -n '/^FAIL\|^ERROR/p' "$log" | sed 's/^/# /'
	grep -h -A30 -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' \
		"$dir"/tests/*/*.log "$dir"/tests/*.log 2>/dev/null | head -80 | sed 's/^/# /'
	exit 1
fi
