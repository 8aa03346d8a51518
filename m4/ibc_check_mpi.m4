# SPDX-License-Identifier: MIT
# IBC_CHECK_MPI: --with-mpi[=yes|no|DIR] (default: check). MPI is used only by
# the benchmarks (--vs-mpi) and tests, never by libibcoll. Sets MPICC,
# MPI_CFLAGS, MPI_LIBS, HAVE_MPI (define and conditional).
AC_DEFUN([IBC_CHECK_MPI], [
AC_ARG_WITH([mpi],
	[AS_HELP_STRING([--with-mpi@<:@=yes|no|DIR@:>@],
		[Open MPI for benchmarks and tests only (mpicc or ompi pkg-config) @<:@default=check@:>@])],
	[], [with_mpi=check])
ibc_have_mpi=no
MPI_CFLAGS=
MPI_LIBS=
MPICC=
AS_IF([test "x$with_mpi" != xno], [
	AS_CASE([$with_mpi],
		[yes|check], [ibc_mpi_path=$PATH],
		[ibc_mpi_path=$with_mpi/bin])
	AC_PATH_PROG([MPICC], [mpicc], [], [$ibc_mpi_path])
	AS_IF([test "x$MPICC" != x], [
		MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null`
		MPI_LIBS=`$MPICC --showme:link 2>/dev/null`
	])
	AS_IF([test "x$MPI_LIBS" = x], [
		PKG_CHECK_MODULES([OMPI_PC], [ompi-c], [
			MPI_CFLAGS=$OMPI_PC_CFLAGS
			MPI_LIBS=$OMPI_PC_LIBS
		], [:])
	])
	AS_IF([test "x$MPI_LIBS" != x], [
		ibc_save_CPPFLAGS=$CPPFLAGS
		ibc_save_LIBS=$LIBS
		CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"
		LIBS="$MPI_LIBS $LIBS"
		AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
			[[MPI_Init(0, 0); MPI_Finalize();]])], [ibc_have_mpi=yes])
		CPPFLAGS=$ibc_save_CPPFLAGS
		LIBS=$ibc_save_LIBS
	])
	AS_IF([test "x$ibc_have_mpi" = xno], [
		AS_IF([test "x$with_mpi" = xcheck],
			[AC_MSG_NOTICE([MPI not found: benchmarks built without --vs-mpi])],
			[AC_MSG_ERROR([--with-mpi=$with_mpi given but no working mpicc / ompi-c was found])])
	])
])
AS_IF([test "x$ibc_have_mpi" = xyes],
	[AC_DEFINE([HAVE_MPI], [1], [Define to 1 when benchmarks and tests may use MPI])])
AM_CONDITIONAL([HAVE_MPI], [test "x$ibc_have_mpi" = xyes])
AC_SUBST([MPI_CFLAGS])
AC_SUBST([MPI_LIBS])
])
