#!/bin/sh
# SPDX-License-Identifier: MIT
# run_fuzz.sh - build tests/fuzz/fuzz_boot_wire with clang's libFuzzer plus
# AddressSanitizer and UndefinedBehaviorSanitizer, and run it for
# IBC_FUZZ_SECONDS (default 60) over a copy of the seed corpus in
# tests/fuzz/corpus/boot_wire. TAP on stdout. SKIPs without clang or the
# libFuzzer runtime (Debian: libclang-rt-14-dev), and inside the nested
# --enable-asan build of test_asan_build.sh (the fuzzer already runs there).
# A crash leaves its input as $top_builddir/tests/fuzz/crash-*: add it to
# the corpus once fixed.
set -u
srcdir=${top_srcdir:-.}
builddir=${top_builddir:-.}
secs=${IBC_FUZZ_SECONDS:-60}
CLANG=${CLANG:-clang}
out="$builddir/tests/fuzz"

if [ -n "${IBC_ASAN_NESTED:-}" ]; then
	echo "1..0 # SKIP the outer make check runs the fuzzer"
	exit 0
fi
if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "1..0 # SKIP $CLANG not found (the fuzzer needs clang)"
	exit 0
fi
mkdir -p "$out"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibc-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
	> "$tmp/probe.c"
if ! "$CLANG" -fsanitize=fuzzer "$tmp/probe.c" -o "$tmp/probe" >/dev/null 2>&1; then
	echo "1..0 # SKIP $CLANG cannot link -fsanitize=fuzzer (install libclang-rt-dev)"
	exit 0
fi
crypto_libs=$(pkg-config --libs libcrypto 2>/dev/null || echo -lcrypto)
crypto_cflags=$(pkg-config --cflags libcrypto 2>/dev/null || true)
echo "1..4"
# shellcheck disable=SC2086
if "$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-I"$builddir" -I"$srcdir/include" -I"$srcdir/src" $crypto_cflags \
	"$srcdir/tests/fuzz/fuzz_boot_wire.c" "$srcdir/src/boot/boot_wire.c" \
	$crypto_libs -o "$out/fuzz_boot_wire" 2>"$tmp/build.log"; then
	echo "ok 1 - fuzz_boot_wire builds with -fsanitize=fuzzer,address,undefined"
else
	echo "not ok 1 - fuzz_boot_wire builds"
	sed 's/^/# /' "$tmp/build.log"
	echo "not ok 2 - corpus up to date # SKIP not built"
	echo "not ok 3 - seed corpus # SKIP not built"
	echo "not ok 4 - fuzzing # SKIP not built"
	exit 1
fi
# the committed seeds are what gen_corpus writes for the current wire format
mkdir -p "$tmp/gen"
if [ -x "$out/gen_corpus" ] && "$out/gen_corpus" "$tmp/gen" &&
   diff -r "$tmp/gen" "$srcdir/tests/fuzz/corpus/boot_wire" >"$tmp/diff.log" 2>&1; then
	echo "ok 2 - tests/fuzz/corpus/boot_wire matches gen_corpus (else: make fuzz-corpus)"
else
	echo "not ok 2 - tests/fuzz/corpus/boot_wire matches gen_corpus: run make fuzz-corpus"
	sed 's/^/# /' "$tmp/diff.log"
fi
mkdir -p "$tmp/corpus"
cp "$srcdir"/tests/fuzz/corpus/boot_wire/* "$tmp/corpus/"
nseeds=$(ls "$tmp/corpus" | wc -l)
# every seed passes on its own first (runs each input once)
if (cd "$out" && ./fuzz_boot_wire -runs=0 "$tmp/corpus" >"$tmp/seeds.log" 2>&1); then
	echo "ok 3 - the $nseeds seeds of tests/fuzz/corpus/boot_wire run clean"
else
	echo "not ok 3 - the seeds run clean"
	tail -40 "$tmp/seeds.log" | sed 's/^/# /'
fi
if (cd "$out" && timeout -k 10 $((secs + 60)) ./fuzz_boot_wire -max_total_time="$secs" \
	-timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
	"$tmp/corpus" >"$tmp/fuzz.log" 2>&1); then
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/fuzz.log")
	cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' "$tmp/fuzz.log" | tail -1)
	echo "ok 4 - $secs s of fuzzing: ${execs:-?} inputs, no crash (coverage ${cov:-?} edges)"
else
	echo "not ok 4 - fuzzing found a problem (input saved in $out)"
	tail -60 "$tmp/fuzz.log" | sed 's/^/# /'
	exit 1
fi
