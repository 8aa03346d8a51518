# SPDX-License-Identifier: MIT
# IBC_CHECK_UCM: --with-ucm[=yes|no|DIR] (default: check), UCX's memory-hook
# library libucm (Debian libucx-dev). Only its header is needed at build
# time: the verbs transport loads libucs.so.0 and libucm.so.0 at run time
# (dlopen), and only when it opens a device, so libibcoll has no link-time
# dependency on UCX and a process that never uses verbs never loads it.
# Sets UCM_CPPFLAGS and HAVE_UCM (define and conditional).
AC_DEFUN([IBC_CHECK_UCM], [
AC_ARG_WITH([ucm],
	[AS_HELP_STRING([--with-ucm@<:@=yes|no|DIR@:>@],
		[memory-release hooks for the verbs registration cache from UCX's libucm @<:@default=check@:>@])],
	[], [with_ucm=check])
ibc_have_ucm=no
ibc_ucm_version=
UCM_CPPFLAGS=
AS_IF([test "x$with_ucm" != xno], [
	ibc_save_CPPFLAGS=$CPPFLAGS
	AS_CASE([$with_ucm], [yes|check], [], [UCM_CPPFLAGS="-I$with_ucm/include"])
	CPPFLAGS="$CPPFLAGS $UCM_CPPFLAGS"
	AC_CHECK_HEADER([ucm/api/ucm.h], [
		AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <ucm/api/ucm.h>]],
			[[ucm_event_t e; int ev = UCM_EVENT_VM_UNMAPPED; (void)e; (void)ev;
			  ucs_status_t (*set)(int, int, ucm_event_callback_t, void *) = ucm_set_event_handler;
			  (void)set;]])],
			[ibc_have_ucm=yes], [AC_MSG_NOTICE([ucm/api/ucm.h found but unusable])])
	])
	CPPFLAGS=$ibc_save_CPPFLAGS
	AS_IF([test "x$ibc_have_ucm" = xyes && test -n "$PKG_CONFIG"],
		[ibc_ucm_version=`$PKG_CONFIG --modversion ucx 2>/dev/null`])
	AS_IF([test "x$ibc_have_ucm" = xno], [
		AS_IF([test "x$with_ucm" = xcheck],
			[AC_MSG_NOTICE([libucm (libucx-dev) not found: the verbs registration cache keeps its no-hooks policy])],
			[AC_MSG_ERROR([--with-ucm=$with_ucm given but ucm/api/ucm.h was not found (Debian: libucx-dev)])])
	])
])
AS_IF([test "x$ibc_have_ucm" = xyes],
	[AC_DEFINE([HAVE_UCM], [1], [Define to 1 to build the verbs memory hooks on libucm])])
AC_DEFINE_UNQUOTED([IBC_UCM_VERSION], ["${ibc_ucm_version:-}"], [UCX version whose libucm header configure found])
AM_CONDITIONAL([HAVE_UCM], [test "x$ibc_have_ucm" = xyes])
AC_SUBST([UCM_CPPFLAGS])
])
