# SPDX-License-Identifier: MIT
# IBC_CHECK_VERBS: --with-verbs[=yes|no|DIR] (default: check).
# Sets VERBS_CPPFLAGS, VERBS_LDFLAGS, VERBS_LIBS, HAVE_VERBS (define and
# conditional), HAVE_DECL_IBV_REG_DMABUF_MR, and ibc_verbs_pc=yes when the
# flags came from pkg-config (then ibcoll.pc names libibverbs in Requires.private).
AC_DEFUN([IBC_CHECK_VERBS], [
AC_ARG_WITH([verbs],
	[AS_HELP_STRING([--with-verbs@<:@=yes|no|DIR@:>@],
		[InfiniBand verbs transport (libibverbs from rdma-core) @<:@default=check@:>@])],
	[], [with_verbs=check])
ibc_have_verbs=no
ibc_verbs_pc=no
ibc_verbs_version=unknown
VERBS_CPPFLAGS=
VERBS_LDFLAGS=
VERBS_LIBS=
AS_IF([test "x$with_verbs" != xno], [
	ibc_save_CPPFLAGS=$CPPFLAGS
	ibc_save_LDFLAGS=$LDFLAGS
	ibc_save_LIBS=$LIBS
	AS_CASE([$with_verbs],
		[yes|check], [
			PKG_CHECK_MODULES([VERBS_PC], [libibverbs], [
				VERBS_CPPFLAGS=$VERBS_PC_CFLAGS
				VERBS_LIBS=$VERBS_PC_LIBS
				ibc_verbs_pc=yes
				ibc_verbs_version=`$PKG_CONFIG --modversion libibverbs`
			], [:])],
		[VERBS_CPPFLAGS="-I$with_verbs/include"
		 AS_IF([test -d "$with_verbs/lib64"],
			[VERBS_LDFLAGS="-L$with_verbs/lib64"],
			[VERBS_LDFLAGS="-L$with_verbs/lib"])])
	CPPFLAGS="$CPPFLAGS $VERBS_CPPFLAGS"
	LDFLAGS="$LDFLAGS $VERBS_LDFLAGS"
	AC_CHECK_HEADER([infiniband/verbs.h], [
		AC_CHECK_LIB([ibverbs], [ibv_get_device_list], [
			ibc_have_verbs=yes
			AS_IF([test "x$VERBS_LIBS" = x], [VERBS_LIBS=-libverbs])
			AC_CHECK_DECLS([ibv_reg_dmabuf_mr, ibv_query_gid_ex], [], [],
				[[#include <infiniband/verbs.h>]])
		])
	])
	CPPFLAGS=$ibc_save_CPPFLAGS
	LDFLAGS=$ibc_save_LDFLAGS
	LIBS=$ibc_save_LIBS
	AS_IF([test "x$ibc_have_verbs" = xno], [
		AS_IF([test "x$with_verbs" = xcheck],
			[AC_MSG_NOTICE([libibverbs not found: building without the InfiniBand verbs transport])],
			[AC_MSG_ERROR([--with-verbs=$with_verbs given but libibverbs (infiniband/verbs.h, -libverbs) was not found])])
	])
])
AS_IF([test "x$ibc_have_verbs" = xyes],
	[AC_DEFINE([HAVE_VERBS], [1], [Define to 1 to build the verbs transport])])
AM_CONDITIONAL([HAVE_VERBS], [test "x$ibc_have_verbs" = xyes])
AC_SUBST([VERBS_CPPFLAGS])
AC_SUBST([VERBS_LDFLAGS])
AC_SUBST([VERBS_LIBS])
])
