#!/bin/sh
# SPDX-License-Identifier: MIT
# test_cuda_link.sh - libibcoll.so as built: every symbol it uses resolves
# (ldd -r; the nvcc-compiled kernels must not need libstdc++, the verbs
# calls of src/cuda need libibverbs), it does not depend on the CUDA driver
# or runtime libraries (the runtime is linked statically and libcuda.so.1 is
# opened at run time, so the library loads on machines without a GPU), and
# in a CUDA build it contains the kernels and the stream-ordered entry points.
so="$top_builddir/src/.libs/libibcoll.so"
echo "1..4"
if [ ! -f "$so" ]; then
	echo "not ok 1 - $so exists"; exit 1
fi
undef=$(ldd -r "$so" 2>&1 | grep -i 'undefined symbol')
if [ -z "$undef" ]; then
	echo "ok 1 - every symbol of libibcoll.so resolves"
else
	echo "not ok 1 - unresolved symbols in libibcoll.so:"; printf '%s\n' "$undef" | sed 's/^/# /'
fi
deps=$(ldd "$so" | grep -E 'libcuda\.so|libcudart\.so')
if [ -z "$deps" ]; then
	echo "ok 2 - no load-time dependency on libcuda or libcudart"
else
	echo "not ok 2 - libibcoll.so needs CUDA libraries at load time:"; printf '%s\n' "$deps" | sed 's/^/# /'
fi
cuda=$(grep -c '^#define HAVE_CUDA 1' "$top_builddir/config.h")
streams=$(nm -D --defined-only "$so" | grep -c ' T ibc_[a-z_]*_stream$')
if [ "$streams" -eq 9 ]; then
	echo "ok 3 - the 9 stream-ordered entry points are exported"
else
	echo "not ok 3 - $streams stream-ordered entry points exported, expected 9"
fi
if [ "$cuda" -eq 1 ]; then
	if nm "$so" | grep -q 'k_reduce3'; then
		echo "ok 4 - the CUDA build contains the reduction kernels"
	else
		echo "not ok 4 - the CUDA build lacks the reduction kernels"
	fi
else
	echo "ok 4 # SKIP built without CUDA"
fi
! printf '%s\n' "$undef$deps" | grep -q . && [ "$streams" -eq 9 ]
