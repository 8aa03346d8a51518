#!/bin/sh
# SPDX-License-Identifier: MIT
# build.sh - configure and build ibcoll out of tree in build/ (or $IBC_BUILD_DIR).
# Extra arguments go to configure. Reconfigures only when the arguments change.
#
# usage: scripts/build.sh [configure options...]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=${IBC_BUILD_DIR:-$top/build}
cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
	echo "build: running autogen.sh"
	./autogen.sh >/dev/null 2>&1 || { ./autogen.sh; exit 1; }
fi
mkdir -p "$bdir"
cd "$bdir"
args="$*"
if [ ! -f Makefile ] || [ "$(cat .ibc-configure-args 2>/dev/null)" != "$args" ] || \
   [ "$top/configure" -nt config.status ]; then
	echo "build: configuring in $bdir ($args)"
	# shellcheck disable=SC2086
	"$top/configure" -q $args
	printf '%s' "$args" > .ibc-configure-args
fi
echo "build: compiling"
make -j"$(nproc)" >/dev/null || make
