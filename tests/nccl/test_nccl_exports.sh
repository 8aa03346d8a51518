#!/bin/sh
# SPDX-License-Identifier: MIT
# test_nccl_exports.sh - the shape of libibcoll_nccl.so: soname libnccl.so.2,
# dynamic symbols exactly the functions bindings/nccl/nccl.h declares (and
# among them every call PyTorch's NCCL backend needs, as listed in issue
# 25), no load-time dependency on the CUDA driver or runtime (libibcoll's
# rule: the runtime is static, the driver opened at run time), and nccl.h
# compiling as C++ (nvcc), as nccl-tests and PyTorch include it.
b=$top_builddir
so="$b/bindings/nccl/libibcoll_nccl.so"
hdr="$top_srcdir/bindings/nccl/nccl.h"
echo "1..7"
if [ ! -f "$so" ]; then
	echo "not ok 1 - $so exists"
	exit 1
fi
echo "ok 1 - libibcoll_nccl.so built"
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [ "$soname" = libnccl.so.2 ]; then echo "ok 2 - soname libnccl.so.2"; else
	echo "not ok 2 - soname is '$soname', expected libnccl.so.2"; fi
exported=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | sort)
declared=$(tr '\n' ' ' < "$hdr" | grep -o '\(ncclResult_t\|const char \*\) *nccl[A-Za-z]*(' |
	sed 's/($//; s/.*[ *]//' | sort -u)
if [ -n "$exported" ] && [ "$exported" = "$declared" ]; then
	echo "ok 3 - exported symbols equal nccl.h's functions ($(printf '%s\n' "$declared" | wc -l))"
else
	echo "not ok 3 - exported (<) and declared (>) differ:"
	printf '%s\n' "$exported" > "${TMPDIR:-/tmp}/nccl-exp.$$"
	printf '%s\n' "$declared" > "${TMPDIR:-/tmp}/nccl-dec.$$"
	diff "${TMPDIR:-/tmp}/nccl-exp.$$" "${TMPDIR:-/tmp}/nccl-dec.$$" | sed 's/^/# /'
	rm -f "${TMPDIR:-/tmp}/nccl-exp.$$" "${TMPDIR:-/tmp}/nccl-dec.$$"
fi
missing=
for f in ncclGetVersion ncclGetUniqueId ncclCommInitRank ncclCommInitRankConfig ncclCommSplit \
	ncclCommFinalize ncclCommDestroy ncclCommAbort ncclCommGetAsyncError ncclGetErrorString \
	ncclGetLastError ncclCommCount ncclCommCuDevice ncclCommUserRank ncclAllReduce \
	ncclBroadcast ncclBcast ncclReduce ncclAllGather ncclReduceScatter ncclSend ncclRecv \
	ncclGroupStart ncclGroupEnd ncclRedOpCreatePreMulSum ncclRedOpDestroy ncclCommRegister \
	ncclCommDeregister ncclMemAlloc ncclMemFree ncclAlltoAll ncclAllToAll; do
	printf '%s\n' "$exported" | grep -qx "$f" || missing="$missing $f"
done
if [ -z "$missing" ]; then echo "ok 4 - the 30 calls of issue 25 plus ncclAlltoAll/ncclAllToAll are exported"
else echo "not ok 4 - missing:$missing"; fi
needed=$(readelf -d "$so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
case " $needed" in
*" libcuda.so"* | *" libcudart.so"*)
	echo "not ok 5 - load-time CUDA dependency: $needed" ;;
*) echo "ok 5 - no load-time CUDA dependency (needs: $needed)" ;;
esac
case " $needed" in
*" libibcoll.so."*) echo "ok 6 - linked against libibcoll.so (a client of its public API)" ;;
*) echo "not ok 6 - no libibcoll.so in $needed" ;;
esac
nvcc=$(sed -n 's/^NVCC = //p' "$b/Makefile")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nccl_hdr.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/h.cu" <<'EOC'
#include <nccl.h>
static_assert(sizeof(ncclConfig_t) == 48, "ncclConfig_t of NCCL 2.21");
int use(ncclComm_t c, cudaStream_t s)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	int v = 0;
	return (int)ncclGetVersion(&v) + (int)ncclAllReduce(0, 0, 0, ncclBfloat16, ncclAvg, c, s) +
	       cfg.blocking + (NCCL_VERSION_CODE >= NCCL_VERSION(2, 19, 0));
}
EOC
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
	echo "ok 7 # SKIP no nvcc in this build"
elif "$nvcc" -std=c++17 -Xcompiler -Wall,-Wextra,-Werror -I"$top_srcdir/bindings/nccl" \
	-c "$tmp/h.cu" -o "$tmp/h.o" > "$tmp/nvcc.log" 2>&1; then
	echo "ok 7 - nccl.h compiles as C++ with nvcc, warnings as errors"
else
	echo "not ok 7 - nccl.h does not compile with nvcc:"
	sed 's/^/# /' "$tmp/nvcc.log" | head -20
fi
