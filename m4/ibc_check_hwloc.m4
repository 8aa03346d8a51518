# SPDX-License-Identifier: MIT
# IBC_CHECK_HWLOC: --with-hwloc[=yes|no|DIR] (default: check), hwloc >= 2.0.
# Sets HWLOC_CFLAGS, HWLOC_LDFLAGS, HWLOC_LIBS and HAVE_HWLOC (define and
# conditional). Without hwloc the flat topology fallback is built.
AC_DEFUN([IBC_CHECK_HWLOC], [
AC_ARG_WITH([hwloc],
	[AS_HELP_STRING([--with-hwloc@<:@=yes|no|DIR@:>@],
		[topology with hwloc >= 2.0 @<:@default=check@:>@])],
	[], [with_hwloc=check])
ibc_have_hwloc=no
ibc_hwloc_pc=no
ibc_hwloc_version=unknown
HWLOC_CFLAGS=
HWLOC_LDFLAGS=
HWLOC_LIBS=
AS_IF([test "x$with_hwloc" != xno], [
	ibc_save_CPPFLAGS=$CPPFLAGS
	ibc_save_LDFLAGS=$LDFLAGS
	ibc_save_LIBS=$LIBS
	AS_CASE([$with_hwloc],
		[yes|check], [
			PKG_CHECK_MODULES([HWLOC_PC], [hwloc >= 2.0], [
				HWLOC_CFLAGS=$HWLOC_PC_CFLAGS
				HWLOC_LIBS=$HWLOC_PC_LIBS
				ibc_hwloc_pc=yes
				ibc_hwloc_version=`$PKG_CONFIG --modversion hwloc`
			], [:])],
		[HWLOC_CFLAGS="-I$with_hwloc/include"
		 AS_IF([test -d "$with_hwloc/lib64"],
			[HWLOC_LDFLAGS="-L$with_hwloc/lib64"],
			[HWLOC_LDFLAGS="-L$with_hwloc/lib"])])
	CPPFLAGS="$CPPFLAGS $HWLOC_CFLAGS"
	LDFLAGS="$LDFLAGS $HWLOC_LDFLAGS"
	AC_CHECK_HEADER([hwloc.h], [
		AC_CHECK_LIB([hwloc], [hwloc_topology_init], [
			AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <hwloc.h>]],
				[[#if HWLOC_API_VERSION < 0x00020000
				  #error hwloc too old
				  #endif]])], [
				ibc_have_hwloc=yes
				AS_IF([test "x$HWLOC_LIBS" = x], [HWLOC_LIBS=-lhwloc])
			], [AC_MSG_NOTICE([hwloc found but older than 2.0])])
		])
	])
	CPPFLAGS=$ibc_save_CPPFLAGS
	LDFLAGS=$ibc_save_LDFLAGS
	LIBS=$ibc_save_LIBS
	AS_IF([test "x$ibc_have_hwloc" = xno], [
		AS_IF([test "x$with_hwloc" = xcheck],
			[AC_MSG_NOTICE([hwloc >= 2.0 not found: using the flat topology fallback])],
			[AC_MSG_ERROR([--with-hwloc=$with_hwloc given but hwloc >= 2.0 was not found])])
	])
])
AS_IF([test "x$ibc_have_hwloc" = xyes],
	[AC_DEFINE([HAVE_HWLOC], [1], [Define to 1 to use hwloc for topology])])
AM_CONDITIONAL([HAVE_HWLOC], [test "x$ibc_have_hwloc" = xyes])
AC_SUBST([HWLOC_CFLAGS])
AC_SUBST([HWLOC_LDFLAGS])
AC_SUBST([HWLOC_LIBS])
])
