# SPDX-License-Identifier: MIT
# IBC_CHECK_CUDA: --with-cuda[=yes|no|DIR] (default: check /usr/local/cuda),
# --with-cuda-arch=sm_90[,sm_80...]. Sets NVCC, NVCC_GENCODE, CUDA_CPPFLAGS,
# CUDA_LDFLAGS, CUDA_LIBS, HAVE_CUDA (define and conditional),
# HAVE_CUMEMGETHANDLEFORADDRESSRANGE. The driver API (-lcuda) links against
# the toolkit's stub library when no driver is installed, so the CUDA build
# compiles and links on machines without a GPU.
AC_DEFUN([IBC_CHECK_CUDA], [
AC_ARG_WITH([cuda],
	[AS_HELP_STRING([--with-cuda@<:@=yes|no|DIR@:>@],
		[CUDA device buffers and kernels (nvcc, cudart) @<:@default=check /usr/local/cuda@:>@])],
	[], [with_cuda=check])
AC_ARG_WITH([cuda-arch],
	[AS_HELP_STRING([--with-cuda-arch=LIST],
		[comma-separated GPU architectures for nvcc @<:@default=sm_90@:>@])],
	[], [with_cuda_arch=sm_90])
ibc_have_cuda=no
ibc_cuda_archs=$with_cuda_arch
CUDA_CPPFLAGS=
CUDA_LDFLAGS=
CUDA_LIBS=
NVCC_GENCODE=
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
	AS_IF([test -d "$ibc_cuda_dir/lib64/stubs"],
		[ibc_cuda_stubs="-L$ibc_cuda_dir/lib64/stubs"], [ibc_cuda_stubs=])
	CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
	LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
	AS_IF([test "x$NVCC" != x], [
		AC_CHECK_HEADER([cuda_runtime_api.h], [
			AC_CHECK_LIB([cudart], [cudaMalloc], [
				ibc_have_cuda=yes
				CUDA_LIBS="-lcudart"
			])
		])
	])
	AS_IF([test "x$ibc_have_cuda" = xyes], [
		dnl the driver API: prefer the real libcuda, fall back to the stub
		LIBS=
		AC_CHECK_LIB([cuda], [cuGetErrorString], [CUDA_LIBS="$CUDA_LIBS -lcuda"], [
			LDFLAGS="$LDFLAGS $ibc_cuda_stubs"
			AS_UNSET([ac_cv_lib_cuda_cuGetErrorString])
			AC_CHECK_LIB([cuda], [cuGetErrorString], [
				CUDA_LDFLAGS="$CUDA_LDFLAGS $ibc_cuda_stubs"
				CUDA_LIBS="$CUDA_LIBS -lcuda"
			], [ibc_have_cuda=no])
		])
		AC_CHECK_DECLS([cuMemGetHandleForAddressRange], [], [], [[#include <cuda.h>]])
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
		ibc_num=`echo "$ibc_arch" | sed 's/^sm_//'`
		NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$ibc_num,code=sm_$ibc_num"
	done
])
AS_IF([test "x$ibc_have_cuda" = xyes],
	[AC_DEFINE([HAVE_CUDA], [1], [Define to 1 to build CUDA support])])
AM_CONDITIONAL([HAVE_CUDA], [test "x$ibc_have_cuda" = xyes])
AC_SUBST([NVCC])
AC_SUBST([NVCC_GENCODE])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LDFLAGS])
AC_SUBST([CUDA_LIBS])
])
