# SPDX-License-Identifier: MIT
# IBC_COMPILER_FLAGS: warnings and the --enable-debug, --enable-asan,
# --enable-werror and --enable-trace switches. Results go to IBC_CFLAGS and
# IBC_LDFLAGS (used by Makefile.am), never to the user's CFLAGS.
AC_DEFUN([IBC_COMPILER_FLAGS], [
AC_ARG_ENABLE([debug],
	[AS_HELP_STRING([--enable-debug], [-O0 -g3 and internal assertions (IBC_ASSERT)])],
	[], [enable_debug=no])
AC_ARG_ENABLE([asan],
	[AS_HELP_STRING([--enable-asan], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
	[], [enable_asan=no])
AC_ARG_ENABLE([werror],
	[AS_HELP_STRING([--enable-werror], [treat compiler warnings as errors (CI)])],
	[], [enable_werror=no])
AC_ARG_ENABLE([trace],
	[AS_HELP_STRING([--enable-trace], [compile in TRACE-level log lines])],
	[], [enable_trace=no])
IBC_CFLAGS="-Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes -Wno-unused-parameter -fvisibility=hidden"
IBC_LDFLAGS=
AS_IF([test "x$enable_debug" = xyes], [
	IBC_CFLAGS="$IBC_CFLAGS -O0 -g3"
	AC_DEFINE([IBC_DEBUG_BUILD], [1], [Define to 1 for internal assertions])
], [
	IBC_CFLAGS="$IBC_CFLAGS -O3"
])
AS_IF([test "x$enable_asan" = xyes], [
	IBC_CFLAGS="$IBC_CFLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
	IBC_LDFLAGS="$IBC_LDFLAGS -fsanitize=address,undefined"
	AC_DEFINE([IBC_ASAN], [1], [Define to 1 when built with sanitizers])
])
AS_IF([test "x$enable_werror" = xyes], [IBC_CFLAGS="$IBC_CFLAGS -Werror"])
AS_IF([test "x$enable_trace" = xyes],
	[AC_DEFINE([IBC_ENABLE_TRACE], [1], [Define to 1 to compile in TRACE log lines])])
AM_CONDITIONAL([IBC_ASAN], [test "x$enable_asan" = xyes])
AC_SUBST([IBC_CFLAGS])
AC_SUBST([IBC_LDFLAGS])
])
