#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/gpu/run.sh - the one-shot GPU check of ibcoll's CUDA support, for a
# machine with an NVIDIA GPU (target: H200). GPU time is scarce, so this
# builds and runs everything in one go, bounds every step with a timeout,
# and prints a summary table at the end:
#
#   1. the machine: GPU (nvidia-smi), driver, nvcc, peer-memory module;
#   2. a clean out-of-tree build with --with-cuda for the GPU's own
#      architecture (and a compile of the kernels for sm_80, which every
#      build must also support);
#   3. make check (CPU tests, plus the GPU tests that SKIP elsewhere);
#   4. the reduction kernels against the CPU kernels on random inputs
#      (tests/cuda/test_cuda_kernels, on the device);
#   5. the device-buffer collective matrix: 1-4 ranks sharing the GPU over
#      shm and tcp, device buffers staged through pinned host memory, plus
#      16 MiB buffers with the default 4 MiB segments (test_cuda_coll --large);
#   6. stream-ordered calls on real CUDA streams (test_cuda_stream);
#   7. the GPUDirect RDMA decision on this machine, printed, and what the
#      verbs registration cache relies on, on real device memory: the
#      allocation range and buffer id of a device pointer (a new id after
#      cudaFree + cudaMalloc) and a dma-buf export of device memory
#      (test_gdr --require-device; the cache itself: test_ib_mr_gdr in
#      make check, with an injected backend);
#   8. the reduction kernel against a device-to-device copy of 256 MiB
#      (test_cuda_kernels --bench; target >= 80% of the copy bandwidth);
#   9. the NCCL API library (bindings/nccl, libibcoll_nccl.so as
#      libnccl.so.2) in stream mode: tests/nccl/nccl_check on device
#      buffers, 2 ranks sharing the GPU over shm and over tcp (every case
#      of its host-mode run in make check, plus stream order and groups on
#      two streams, which need a GPU).
#
# usage: tests/gpu/run.sh            (from anywhere; about 3-5 minutes)
# env:   IBC_GPU_BUILD=dir   build directory (default: a fresh mktemp -d)
#        IBC_GPU_ARCH=sm_NN  override the detected architecture
#        OUT=dir             also copy the log and a RESULTS.md snippet there
# Needs: gcc, make, libssl-dev, nvcc (/usr/local/cuda or PATH), and either
# autoconf/automake/libtool or a `make dist` tarball ibcoll-*.tar.gz in the
# source root (its configure is used then). Exit status: 0 when every step
# passed, 1 otherwise, 2 when there is no GPU.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
start=$(date +%s)
bdir=${IBC_GPU_BUILD:-$(mktemp -d /tmp/ibc-gpu.XXXXXX)}
log="$bdir/gpu-run.log"
mkdir -p "$bdir"
: > "$log"
steps=""
rc=0
PATH="$PATH:/usr/local/cuda/bin"
export PATH

say() { printf '%s\n' "$*" | tee -a "$log"; }
# step NAME TIMEOUT_S CMD...: run, log, record "name|result|seconds"
step() {
	name=$1
	limit=$2
	shift 2
	say ""
	say "=== $name ($*)"
	t0=$(date +%s)
	timeout -k 10 "$limit" "$@" > "$log.step" 2>&1
	st=$?
	cat "$log.step" >> "$log"
	t=$(($(date +%s) - t0))
	if [ $st -eq 0 ]; then
		res=passed
	elif [ $st -eq 124 ] || [ $st -eq 137 ]; then
		res="TIMEOUT after ${limit}s"
		rc=1
	else
		res="FAILED (status $st)"
		rc=1
	fi
	# TAP counts, when the step printed TAP; automake's summary for make check
	nok=$(grep -c '^ok ' "$log.step")
	nnot=$(grep -c '^not ok ' "$log.step")
	nskip=$(grep -c '^ok .*# SKIP' "$log.step")
	if grep -q '^# TOTAL:' "$log.step"; then
		res="$res, $(grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR):' "$log.step" |
			sed 's/^# //; s/: */ /' | tr '\n' ',' | sed 's/,$//; s/,/, /g')"
	elif grep -q '^1\.\.0 # SKIP' "$log.step"; then
		# a test that skipped on the GPU machine did not check anything
		res="SKIPPED ($(grep -h '^1\.\.0 # SKIP' "$log.step" | head -n 1 | sed 's/^1\.\.0 # SKIP *//'))"
		rc=1
	elif [ $((nok + nnot)) -gt 0 ]; then
		res="$res, $nok ok, $nnot not ok"
		[ "$nskip" -gt 0 ] && res="$res, $nskip skipped"
	fi
	cp "$log.step" "$bdir/last-step.out"
	# on the terminal: failures with their diagnostics, and the step's own summary lines
	grep -A3 '^not ok\|^FAIL:\|^ERROR:\|: error:' "$log.step" | head -n 25
	grep '^# \(TOTAL\|PASS\|SKIP\|FAIL\|ERROR\|BENCH\)' "$log.step" | head -n 12
	[ $st -ne 0 ] && tail -n 8 "$log.step"
	say "--- $name: $res (${t}s)"
	steps="$steps
$name|$res|${t}s"
	rm -f "$log.step"
	return $st
}

say "ibcoll GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), host $(hostname)"
say "source: $top ($(git -C "$top" log -1 --format='%h %s' 2>/dev/null || echo 'not a git checkout'))"
say "build:  $bdir"

# ---- 1. the machine -------------------------------------------------------
if ! command -v nvidia-smi > /dev/null 2>&1 || ! nvidia-smi -L > /dev/null 2>&1; then
	say "no NVIDIA GPU visible (nvidia-smi -L failed): nothing to check here"
	exit 2
fi
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | head -n 1)
say "GPU:    $(nvidia-smi -L | head -n 4 | tr '\n' ' ')"
say "        $gpu"
cap=$(printf '%s' "$gpu" | awk -F', ' '{print $4}' | tr -d '.')
arch=${IBC_GPU_ARCH:-sm_${cap:-90}}
say "arch:   $arch"
if command -v nvcc > /dev/null 2>&1; then
	say "nvcc:   $(nvcc --version | tail -n 2 | head -n 1)"
else
	say "nvcc not found (PATH=$PATH)"
	exit 1
fi
if [ -e /sys/module/nvidia_peermem ] || [ -e /sys/module/nv_peer_mem ]; then
	say "peer memory module: loaded"
else
	say "peer memory module: not loaded"
fi
say "verbs devices: $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')"
nvidia-smi topo -m 2>/dev/null | head -n 12 >> "$log"

# ---- 2. build -------------------------------------------------------------
src=$top
if [ -f "$top/config.status" ] || [ -f "$top/Makefile" ]; then
	# an in-tree configured checkout: build from a clean copy of its files
	src="$bdir/src"
	mkdir -p "$src"
	(cd "$top" && git ls-files -co --exclude-standard | tar -cf - -T -) | (cd "$src" && tar -xf -)
	say "source tree is configured in place: building from a clean copy in $src"
fi
if command -v autoreconf > /dev/null 2>&1 && command -v libtoolize > /dev/null 2>&1; then
	step "autogen" 300 sh -c "cd '$src' && ./autogen.sh"
else
	tarball=$(ls "$top"/ibcoll-*.tar.gz 2>/dev/null | head -n 1)
	if [ -z "$tarball" ]; then
		say "no autotools and no ibcoll-*.tar.gz in $top: cannot build"
		exit 1
	fi
	src="$bdir/dist"
	mkdir -p "$src"
	tar -xzf "$tarball" -C "$src" --strip-components=1
	say "no autotools here: building from $tarball"
fi
obj="$bdir/obj"
mkdir -p "$obj"
step "configure --with-cuda --with-cuda-arch=$arch" 300 \
	sh -c "cd '$obj' && '$src/configure' -q --with-cuda --with-cuda-arch=$arch" || {
	say "configure failed; config.log:"; tail -n 30 "$obj/config.log" | tee -a "$log"
}
step "make" 900 sh -c "cd '$obj' && make -j$(nproc)"
nwarn=$(grep -c 'warning' "$bdir/last-step.out")
say "compiler warnings in the build: $nwarn"
grep 'warning' "$bdir/last-step.out" | head -n 10 | tee -a "$log"
step "nvcc sm_80 compile of the kernels" 300 sh -c "cd '$obj' && \
	nvcc -std=c++17 -O3 -gencode arch=compute_80,code=sm_80 -DHAVE_CONFIG_H \
	-I. -I'$src/include' -I'$src/src' -c '$src/src/cuda/cuda_reduce.cu' \
	-o /tmp/ibc_cuda_reduce_sm80.o"
"$obj/tools/ibc_info" --build 2>&1 | tee -a "$log" | head -n 20

# ---- 3-8. tests -----------------------------------------------------------
export IBC_DEBUG=WARN
step "make check" 900 sh -c "cd '$obj' && make -j$(nproc) check > make-check.out 2>&1; s=\$?; \
	grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' test-suite.log; \
	grep -E '^(FAIL|ERROR|SKIP):' test-suite.log | head -n 20; exit \$s"
step "kernels vs CPU (device)" 600 "$obj/tests/cuda/test_cuda_kernels" --require-device
step "device-buffer collective matrix" 900 "$obj/tests/cuda/test_cuda_coll" --large
step "stream-ordered calls" 300 "$obj/tests/cuda/test_cuda_stream"
step "GPUDirect RDMA decision, dma-buf export" 120 sh -c \
	"IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=CUDA,IB '$obj/tests/cuda/test_gdr' --require-device"
grep -h 'GPUDirect RDMA' "$bdir/last-step.out" 2>/dev/null | head -n 4 | tee -a "$log"
step "reduction vs D2D copy, 256 MiB" 300 "$obj/tests/cuda/test_cuda_kernels" --bench
step "NCCL API library, 2 ranks sharing the GPU (shm, tcp)" 300 sh -c "\
	LD_LIBRARY_PATH='$obj/bindings/nccl:$obj/src/.libs' IBC_TIMEOUT_MS=20000 \
	IBC_BOOTSTRAP_TIMEOUT_MS=20000 '$obj/tests/nccl/nccl_check' -d device -m '2:shm 2:tcp' -t 240"
bench=$(grep '^# BENCH' "$log" | sed 's/^# BENCH //')

# ---- summary --------------------------------------------------------------
total=$(($(date +%s) - start))
say ""
say "=== summary: $gpu, $(date -u '+%Y-%m-%d'), ${total}s"
printf '%s\n' "$steps" | awk -F'|' 'NF == 3 { printf "  %-46s %-6s %s\n", $1, $3, $2 }' | tee -a "$log"
if [ -n "$bench" ]; then
	say ""
	say "reduction kernel (dst = a + b, 256 MiB) vs cudaMemcpy device-to-device of 256 MiB;"
	say "GB/s count bytes read + written (reduce 3 x 256 MiB, copy 2 x 256 MiB):"
	printf '%s\n' "$bench" | sed 's/^/  /' | tee -a "$log"
fi
snippet="$bdir/RESULTS-cuda.md"
{
	echo "### GPU check, $(date -u '+%Y-%m-%d'), $(printf '%s' "$gpu" | awk -F', ' '{print $1 ", driver " $2}')"
	echo
	echo "tests/gpu/run.sh ($(git -C "$top" log -1 --format=%h 2>/dev/null || echo unknown)), arch $arch, ${total} s:"
	echo
	echo "| step | result | time |"
	echo "|---|---|---|"
	printf '%s\n' "$steps" | awk -F'|' 'NF == 3 { printf "| %s | %s | %s |\n", $1, $2, $3 }'
	if [ -n "$bench" ]; then
		echo
		echo "| dtype | reduce ms | reduce GB/s (r+w) | copy GB/s (r+w) | ratio |"
		echo "|---|---|---|---|---|"
		printf '%s\n' "$bench" | awk 'NR > 1 { printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
	fi
} > "$snippet"
say ""
say "RESULTS.md snippet: $snippet (paste into bench/RESULTS.md, CUDA section)"
cat "$snippet" >> "$log"
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
	cp "$log" "$snippet" "$OUT/" 2>/dev/null
	cp "$obj/test-suite.log" "$OUT/make-check-test-suite.log" 2>/dev/null
fi
if [ $rc -eq 0 ]; then
	say "GPU CHECK PASSED"
else
	say "GPU CHECK FAILED (log: $log)"
fi
exit $rc
