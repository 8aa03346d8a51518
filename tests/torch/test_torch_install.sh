#!/bin/sh
# SPDX-License-Identifier: MIT
# test_torch_install.sh - `make install DESTDIR=...` puts ibcoll_torch where
# the configured Python imports packages from (under the prefix), and the
# installed package, loaded with the installed libibcoll, runs a 1-rank
# all_reduce and broadcast through torch.distributed with exact results.
. "$top_srcdir/tests/torch/torch_env.sh"
b=$(cd "$top_builddir" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibct_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "1..3"
if make -s -C "$b" install DESTDIR="$tmp/root" >"$tmp/install.log" 2>&1; then
	echo "ok 1 - make install DESTDIR=..."
else
	echo "not ok 1 - make install DESTDIR=..."
	tail -20 "$tmp/install.log" | sed 's/^/# /'
fi
dir=$(sed -n 's/^TORCH_PYTHONDIR = //p' "$b/Makefile")
prefix=$(sed -n 's/^prefix = //p' "$b/Makefile")
libdir=$(sed -n 's/^libdir = //p' "$b/Makefile")
dir=$(echo "$dir" | sed "s|\${prefix}|$prefix|")
libdir=$(echo "$libdir" | sed "s|\${exec_prefix}|$prefix|")
inpath=$("$py" -c "import sys; print('$dir' in sys.path)")
if [ -f "$tmp/root$dir/ibcoll_torch/__init__.py" ] && [ -f "$tmp/root$dir/ibcoll_torch/_C.so" ] &&
   { [ "$inpath" = True ] || ! echo "$prefix" | grep -q '^/usr'; }; then
	echo "ok 2 - installed in $dir (on $py's sys.path: $inpath)"
else
	echo "not ok 2 - package in $dir: $(ls "$tmp/root$dir/ibcoll_torch" 2>&1 | tr '\n' ' ') (on sys.path: $inpath)"
fi
cat >"$tmp/one.py" <<'EOP'
import datetime, os, sys, torch, torch.distributed as dist
import ibcoll_torch
assert ibcoll_torch.__file__.startswith(sys.argv[1]), ibcoll_torch.__file__
dist.init_process_group("ibcoll", init_method="file://" + sys.argv[2], rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
t = torch.tensor([1.5, -2.0, 3.25])
dist.all_reduce(t)
dist.broadcast(t, 0)
print(t.tolist())
assert t.tolist() == [1.5, -2.0, 3.25]
dist.destroy_process_group()
EOP
if PYTHONPATH="$tmp/root$dir" LD_LIBRARY_PATH="$tmp/root$libdir" \
	timeout 60 "$py" "$tmp/one.py" "$tmp/root$dir" "$tmp/store" >"$tmp/run.log" 2>&1; then
	echo "ok 3 - the installed package runs a 1-rank all_reduce with the installed library"
else
	echo "not ok 3 - the installed package does not run"
	tail -15 "$tmp/run.log" | sed 's/^/# /'
fi
