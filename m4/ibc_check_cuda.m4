# SPDX-License-Identifier: MIT
# IBC_CHECK_CUDA: --with-cuda[=yes|no|DIR] (default: check /usr/local/cuda),
# --with-cuda-arch=sm_90[,sm_80...]. Sets NVCC, NVCC_GENCODE, NVCC_CFLAGS,
# CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS, HAVE_CUDA (define and conditional),
# HAVE_DECL_CUMEMGETHANDLEFORADDRESSRANGE.
#
# Linking (docs/cuda.md): the CUDA runtime is linked statically
# (libcudart_static, as NCCL does) and the driver library libcuda.so.1 is
# never linked: src/cuda/cuda_mem.c opens it with dlopen() at run time. So
# libibcoll loads, and its host paths work, on machines without the NVIDIA
# driver (CI); a DT_NEEDED on the toolkit's stub libcuda.so would make every
# program that links libibcoll fail to start there. Driver entry points
# (cuMemGetHandleForAddressRange, ...) are still checked here, by feature.
AC_DEFUN([IBC_CHECK_CUDA], [
AC_ARG_WITH([cuda],
	[AS_HELP_STRING([--with-cuda@<:@=yes|no|DIR@:>@],
		[CUDA device buffers and kernels (nvcc, cudart) @<:@default=check /usr/local/cuda@:>@])],
	[], [with_cuda=check])
AC_ARG_WITH([cuda-arch],
	[AS_HELP_STRING([--with-cuda-arch=LIST],
		[comma-separated GPU architectures for nvcc, e.g. sm_80,sm_90 @<:@default=sm_90@:>@])],
	[], [with_cuda_arch=sm_90])
ibc_have_cuda=no
ibc_cuda_archs=$with_cuda_arch
CUDA_CPPFLAGS=
CUDA_LDFLAGS=
CUDA_LIBS=
NVCC_GENCODE=
NVCC_CFLAGS=
AS_IF([test "x$with_cuda" != xno], [
	AS_CASE([$with_cuda],
		[yes|check], [ibc_cuda_dir=/usr/local/cuda],
		[ibc_cuda_dir=$with_cuda])
	AC_PATH_PROG([NVCC], [nvcc], [], [$ibc_cuda_dir/bin:$PATH])
	ibc_save_CPPFLAGS=$CPPFLAGS
	ibc_save_LDFLAGS=$LDFLAGS
	ibc_save_LIBS=$LIBS
	CUDA_CPPFLAGS="-I$ibc_cuda_dir/include"
	AS_IF([test -d "$ibc_cuda_dir/lib64"],
		[CUDA_LDFLAGS="-L$ibc_cuda_dir/lib64"],
		[CUDA_LDFLAGS="-L$ibc_cuda_dir/lib"])
	CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
	LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
	AS_IF([test "x$NVCC" != x], [
		AC_CHECK_HEADERS([cuda_runtime_api.h cuda.h cudaTypedefs.h], [], [ibc_cuda_hdr_missing=yes])
		AS_IF([test "x$ibc_cuda_hdr_missing" != xyes], [
			dnl static runtime first (no libcudart.so needed at run time)
			LIBS=
			AC_CHECK_LIB([cudart_static], [cudaMalloc], [
				ibc_have_cuda=yes
				CUDA_LIBS="-lcudart_static -ldl -lrt -lpthread"
			], [
				AC_CHECK_LIB([cudart], [cudaMalloc], [
					ibc_have_cuda=yes
					CUDA_LIBS="-lcudart -ldl"
				])
			], [-ldl -lrt -lpthread])
		])
	])
	AS_IF([test "x$ibc_have_cuda" = xyes], [
		dnl optional driver entry points, by feature (called through dlopen)
		AC_CHECK_DECLS([cuMemGetHandleForAddressRange], [], [], [[#include <cuda.h>]])
		AC_CHECK_DECLS([cudaDeviceFlushGPUDirectRDMAWrites], [], [],
			[[#include <cuda_runtime_api.h>]])
	])
	CPPFLAGS=$ibc_save_CPPFLAGS
	LDFLAGS=$ibc_save_LDFLAGS
	LIBS=$ibc_save_LIBS
	AS_IF([test "x$ibc_have_cuda" = xno], [
		AS_IF([test "x$with_cuda" = xcheck],
			[AC_MSG_NOTICE([CUDA (nvcc + cudart) not found: building without CUDA support])],
			[AC_MSG_ERROR([--with-cuda=$with_cuda given but nvcc/cudart were not found under $ibc_cuda_dir])])
	])
	for ibc_arch in `echo "$with_cuda_arch" | tr ',' ' '`; do
		ibc_num=`echo "$ibc_arch" | sed 's/^sm_//; s/^compute_//'`
		AS_IF([echo "$ibc_num" | grep -Eq '^@<:@0-9@:>@+@<:@a-z@:>@?$'], [],
			[AC_MSG_ERROR([--with-cuda-arch: '$ibc_arch' is not of the form sm_NN (e.g. sm_80,sm_90)])])
		NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$ibc_num,code=sm_$ibc_num"
	done
	dnl PTX of the last architecture too, so that newer GPUs can JIT the kernels
	AS_IF([test "x$ibc_num" != x],
		[NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$ibc_num,code=compute_$ibc_num"])
	dnl host-compiler flags for .cu files (as --compiler-options=..., one word:
	dnl libtool would take -Xcompiler for itself): PIC, hidden symbols, the warnings
	dnl that apply to C++ (-Wmissing-prototypes is C-only), no C++ runtime
	dnl (exceptions, RTTI, guarded statics: the library links with the C
	dnl compiler, without libstdc++), and -Werror with
	dnl --enable-werror for nvcc's own warnings too (parsed before any macro runs)
	NVCC_CFLAGS="-std=c++17 --compiler-options=-fPIC,-fvisibility=hidden,-fno-exceptions,-fno-rtti,-fno-threadsafe-statics,-Wall,-Wextra,-Wshadow,-Wno-unused-parameter"
	AS_IF([test "x$enable_debug" = xyes],
		[NVCC_CFLAGS="$NVCC_CFLAGS -O0 -g -lineinfo"],
		[NVCC_CFLAGS="$NVCC_CFLAGS -O3 -lineinfo"])
	AS_IF([test "x$enable_werror" = xyes],
		[NVCC_CFLAGS="$NVCC_CFLAGS --Werror=all-warnings --compiler-options=-Werror"])
])
AS_IF([test "x$ibc_have_cuda" = xyes],
	[AC_DEFINE([HAVE_CUDA], [1], [Define to 1 to build CUDA support])])
AM_CONDITIONAL([HAVE_CUDA], [test "x$ibc_have_cuda" = xyes])
AC_SUBST([NVCC])
AC_SUBST([NVCC_GENCODE])
AC_SUBST([NVCC_CFLAGS])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LDFLAGS])
AC_SUBST([CUDA_LIBS])
])
