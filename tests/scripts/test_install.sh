#!/bin/sh
# SPDX-License-Identifier: MIT
# test_install.sh - `make install` into a staging directory (DESTDIR) puts
# the library, the public headers, ibcoll.pc and the tools in place, and a
# program built only from what was installed (pkg-config --cflags --libs
# ibcoll) links and runs a one-rank all-reduce with the exact result.
set -u
b=$(cd "${top_builddir:-.}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibc_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "1..5"
make -s -C "$b" install DESTDIR="$tmp/root" >"$tmp/install.log" 2>&1
st=$?
[ $st -eq 0 ]
if [ $st -eq 0 ]; then echo "ok 1 - make install DESTDIR=..."; else
	echo "not ok 1 - make install DESTDIR=... (status $st)"; tail -20 "$tmp/install.log" | sed 's/^/# /'
fi
prefix=$(sed -n 's/^prefix=//p' "$b/ibcoll.pc")
libdir=$(find "$tmp/root" -name 'libibcoll.so*' -type f | head -1)
pc=$(find "$tmp/root" -name ibcoll.pc | head -1)
hdr=$(find "$tmp/root" -name ibcoll.h | head -1)
if [ -n "$libdir" ] && [ -n "$pc" ] && [ -n "$hdr" ] && [ -x "$tmp/root$prefix/bin/ibc_info" ]; then
	echo "ok 2 - installed: $(basename "$libdir"), ibcoll.h, ibcoll.pc, bin/ibc_info"
else
	echo "not ok 2 - installed files: lib '$libdir' pc '$pc' header '$hdr'"
fi
# only ibcoll.h (and in CUDA builds ibcoll_cuda.h and the NCCL API header
# ibcoll/nccl.h of bindings/nccl) may be installed
extra=$(find "$tmp/root" -name '*.h' ! -name ibcoll.h ! -name ibcoll_cuda.h ! -path '*/include/ibcoll/nccl.h' | head -3)
if [ -z "$extra" ]; then echo "ok 3 - no internal header installed"; else
	echo "not ok 3 - internal headers installed: $extra"; fi
cat >"$tmp/app.c" <<'EOC'
#include <stdio.h>
#include <ibcoll.h>
int main(void)
{
	ibc_unique_id_t id;
	ibc_comm_h comm;
	double x[3] = { 1.5, -2.0, 3.25 }, y[3] = { 0 };

	if (ibc_get_unique_id(&id) || ibc_comm_init_rank(&comm, 1, &id, 0))
		return 1;
	if (ibc_allreduce(x, y, 3, IBC_FLOAT64, IBC_SUM, comm) || ibc_comm_destroy(comm))
		return 1;
	printf("%g %g %g\n", y[0], y[1], y[2]);
	return !(y[0] == 1.5 && y[1] == -2.0 && y[2] == 3.25);
}
EOC
flags=$(PKG_CONFIG_SYSROOT_DIR="$tmp/root" PKG_CONFIG_PATH="$(dirname "$pc")" \
	pkg-config --cflags --libs ibcoll 2>"$tmp/pc.err")
# shellcheck disable=SC2086 # flags split on purpose
if [ -n "$pc" ] && ${CC:-cc} -o "$tmp/app" "$tmp/app.c" $flags 2>"$tmp/cc.err"; then
	echo "ok 4 - a program builds from the installed files alone (pkg-config: $flags)"
else
	echo "not ok 4 - build against the installed ibcoll ($flags)"; cat "$tmp/pc.err" "$tmp/cc.err" | sed 's/^/# /'
fi
out=$(LD_LIBRARY_PATH="$(dirname "$libdir")" "$tmp/app" 2>&1)
if [ "$out" = "1.5 -2 3.25" ]; then echo "ok 5 - it runs a one-rank all-reduce with the exact result"; else
	echo "not ok 5 - the installed library's all-reduce printed: $out"; fi
