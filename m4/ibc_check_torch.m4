# SPDX-License-Identifier: MIT
# IBC_CHECK_TORCH: --with-torch[=yes|no|PYTHON] (default: check with
# /usr/bin/python3). Builds bindings/torch, the torch.distributed backend,
# when that Python imports torch and a C++ extension against it compiles and
# links. Sets TORCH_PYTHON, TORCH_CPPFLAGS, TORCH_CXXFLAGS, TORCH_LDFLAGS,
# TORCH_LIBS, TORCH_PYTHONDIR (where `make install` puts the package: a
# directory of that Python's sys.path under $prefix when there is one),
# ibc_torch_version, and HAVE_TORCH (conditional).
# Expand after IBC_COMPILER_FLAGS (it follows --enable-werror/-debug/-asan).
AC_DEFUN([IBC_CHECK_TORCH], [
AC_REQUIRE([AC_PROG_CXX])
AC_ARG_WITH([torch],
	[AS_HELP_STRING([--with-torch@<:@=yes|no|PYTHON@:>@],
		[torch.distributed backend for PYTHON, a Python that imports torch @<:@default=check with /usr/bin/python3@:>@])],
	[], [with_torch=check])
ibc_have_torch=no
ibc_torch_version=
ibc_torch_why=
TORCH_PYTHON=
TORCH_CPPFLAGS=
TORCH_CXXFLAGS=
TORCH_LDFLAGS=
TORCH_LIBS=
TORCH_PYTHONDIR=
AS_CASE([$with_torch],
	[no], [ibc_torch_py=],
	[yes|check], [ibc_torch_py=/usr/bin/python3],
	[ibc_torch_py=$with_torch])
AS_IF([test "x$ibc_torch_py" != x && test "x$enable_asan" = xyes], [
	ibc_torch_why="not with --enable-asan (Python would need libasan preloaded)"
	ibc_torch_py=
])
AS_IF([test "x$ibc_torch_py" != x], [
	AC_MSG_CHECKING([whether $ibc_torch_py imports torch])
	dnl one line each: version, include dirs, library dirs, C++11 ABI flag
	ibc_torch_info=`"$ibc_torch_py" -c '
import sysconfig, torch
import torch.utils.cpp_extension as ext
print(torch.__version__)
print(" ".join(ext.include_paths() + [[sysconfig.get_paths()["include"]]]))
print(" ".join(ext.library_paths()))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
' 2>/dev/null`
	AS_IF([test $? -eq 0 && test "x$ibc_torch_info" != x], [
		ibc_torch_version=`echo "$ibc_torch_info" | sed -n 1p`
		AC_MSG_RESULT([yes ($ibc_torch_version)])
		for d in `echo "$ibc_torch_info" | sed -n 2p`; do
			TORCH_CPPFLAGS="$TORCH_CPPFLAGS -isystem $d"
		done
		for d in `echo "$ibc_torch_info" | sed -n 3p`; do
			TORCH_LDFLAGS="$TORCH_LDFLAGS -L$d -Wl,-rpath,$d"
		done
		TORCH_CPPFLAGS="$TORCH_CPPFLAGS -D_GLIBCXX_USE_CXX11_ABI=`echo "$ibc_torch_info" | sed -n 4p`"
		TORCH_LIBS="-lc10 -ltorch -ltorch_cpu -ltorch_python"
	], [
		AC_MSG_RESULT([no])
		ibc_torch_why="$ibc_torch_py does not import torch"
	])
])
AS_IF([test "x$ibc_torch_version" != x], [
	AC_LANG_PUSH([C++])
	ibc_save_CPPFLAGS=$CPPFLAGS
	ibc_save_LDFLAGS=$LDFLAGS
	ibc_save_CXXFLAGS=$CXXFLAGS
	ibc_save_LIBS=$LIBS
	CPPFLAGS="$CPPFLAGS $TORCH_CPPFLAGS"
	dnl linked as the extension is, a shared object: libpython's symbols
	dnl (pybind11, libtorch_python) come from the interpreter that loads it
	CXXFLAGS="$CXXFLAGS -fPIC"
	LDFLAGS="$LDFLAGS -shared $TORCH_LDFLAGS"
	LIBS="$TORCH_LIBS $LIBS"
	AC_MSG_CHECKING([whether a c10d process group extension builds (slow)])
	AC_LINK_IFELSE([AC_LANG_PROGRAM([[
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <pybind11/pybind11.h>
]], [[return (int)c10d::opTypeToString(c10d::OpType::BARRIER).size();]])], [
		AC_MSG_RESULT([yes])
		ibc_have_torch=yes
	], [
		AC_MSG_RESULT([no])
		ibc_torch_why="torch $ibc_torch_version found, but a c10d extension does not build (libtorch-dev, pybind11-dev?)"
	])
	CPPFLAGS=$ibc_save_CPPFLAGS
	CXXFLAGS=$ibc_save_CXXFLAGS
	LDFLAGS=$ibc_save_LDFLAGS
	LIBS=$ibc_save_LIBS
	AC_LANG_POP([C++])
])
AS_IF([test "x$ibc_have_torch" = xyes], [
	TORCH_PYTHON=$ibc_torch_py
	TORCH_CXXFLAGS="-std=c++17 -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter"
	AS_IF([test "x$enable_debug" = xyes],
		[TORCH_CXXFLAGS="$TORCH_CXXFLAGS -O0 -g3"],
		[TORCH_CXXFLAGS="$TORCH_CXXFLAGS -O2 -g"])
	AS_IF([test "x$enable_werror" = xyes], [TORCH_CXXFLAGS="$TORCH_CXXFLAGS -Werror"])
	dnl install where this Python imports packages from, under $prefix,
	ibc_torch_prefix=$prefix
	AS_IF([test "x$ibc_torch_prefix" = xNONE], [ibc_torch_prefix=$ac_default_prefix])
	dnl printed with ${prefix} kept symbolic, so that `make prefix=...` still works
	TORCH_PYTHONDIR=`"$ibc_torch_py" -c '
import os, sys, sysconfig
prefix = sys.argv[[1]]
v = "python%d.%d" % sys.version_info[[:2]]
for d in (os.path.join(prefix, "lib", v, "dist-packages"),
          os.path.join(prefix, "lib", "python3", "dist-packages"),
          os.path.join(prefix, "lib", v, "site-packages")):
    if d in sys.path:
        break
else:
    d = sysconfig.get_path("platlib", "posix_prefix", vars={"base": prefix, "platbase": prefix})
if d.startswith(prefix + "/"):
    d = "$" + "{prefix}" + d[[len(prefix):]]
print(d)
' "$ibc_torch_prefix"`
], [
	AS_IF([test "x$with_torch" != xno && test "x$with_torch" != xcheck],
		[AC_MSG_ERROR([--with-torch=$with_torch given but: $ibc_torch_why])])
	AS_IF([test "x$with_torch" = xcheck && test "x$ibc_torch_why" != x],
		[AC_MSG_NOTICE([torch binding not built: $ibc_torch_why])])
])
AM_CONDITIONAL([HAVE_TORCH], [test "x$ibc_have_torch" = xyes])
AC_SUBST([TORCH_PYTHON])
AC_SUBST([TORCH_CPPFLAGS])
AC_SUBST([TORCH_CXXFLAGS])
AC_SUBST([TORCH_LDFLAGS])
AC_SUBST([TORCH_LIBS])
AC_SUBST([TORCH_PYTHONDIR])
])
