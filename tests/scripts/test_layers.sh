#!/bin/sh
# SPDX-License-Identifier: MIT
# test_layers.sh - the layering check of docs/design.md ("Layers"): every
# #include of src/ holds against the table of allowed layer pairs, and the
# check fails, naming the line, on each kind of violation planted in a copy
# of the tree: an include that climbs a layer, one sideways between two
# transports, one that does not name its layer, a private header used from
# another layer, and a folder that is no layer. And no source file of src/
# is over 1000 lines (STYLE C1.3: split it by responsibility). TAP.
set -u
srcdir=${top_srcdir:-.}
check="$srcdir/tests/scripts/check_layers.py"
design="$srcdir/docs/design.md"
if ! command -v python3 >/dev/null 2>&1; then
	echo "1..0 # SKIP python3 not found"
	exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibc-layers.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "1..8"
n=0
ok() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; sed 's/^/# /' "$tmp/out"; fi
}

python3 "$check" "$srcdir/src" "$design" > "$tmp/out" 2>&1
rc=$?
grep -q '^check_layers: [0-9]* files, 0 violations$' "$tmp/out" && [ $rc = 0 ]
ok $? "src/ holds against the table of docs/design.md: $(tail -n 1 "$tmp/out")"

# plant one violation in a fresh copy; the check must exit 1 and name it
plant() {
	rm -rf "$tmp/src"
	cp -r "$srcdir/src" "$tmp/src"
	printf '%s\n' "$2" >> "$tmp/src/$1"
	python3 "$check" "$tmp/src" "$design" > "$tmp/out" 2>&1
	rc=$?
	[ $rc = 1 ] && grep -q "$3" "$tmp/out"
}
plant transport/sock/sock_ops.c '#include "api/api.h"' \
	'transport/sock/sock_ops.c:[0-9]*: #include "api/api.h": layer transport may not include layer api'
ok $? "planted: a transport includes the communicator (an arrow up) -> named"
plant transport/shm/shm_ops.c '#include "transport/ib/ib.h"' \
	'shm_ops.c:[0-9]*: #include "transport/ib/ib.h": transport/shm may not include its sibling transport/ib'
ok $? "planted: shm includes the verbs transport's header (sideways) -> named"
plant net/net.c '#include "util.h"' 'net/net.c:[0-9]*: #include "util.h" does not name its layer'
ok $? "planted: an include without its layer -> named"
plant api/exec.c '#include "boot/boot_internal.h"' 'boot/boot_internal.h is private to src/boot'
ok $? "planted: the bootstrap's private header from the API -> named"
plant net/net_setup.c '#include "transport/ib/ib.h"' 'transport/ib/ib.h is private to src/transport/ib'
ok $? "planted: the net layer reaches into transport/ib -> named"
rm -rf "$tmp/src"
cp -r "$srcdir/src" "$tmp/src"
mkdir -p "$tmp/src/extra"
printf '#include "base/util.h"\n' > "$tmp/src/extra/x.c"
python3 "$check" "$tmp/src" "$design" > "$tmp/out" 2>&1
[ $? = 1 ] && grep -q 'extra/x.c: folder src/extra is not a layer of the table' "$tmp/out"
ok $? "planted: a folder that is no layer -> named"

# no source file over 1000 lines
find "$srcdir/src" -name '*.c' -o -name '*.cu' | xargs wc -l | \
	awk '$2 != "total" && $1 > 1000 { print $2 ": " $1 " lines" }' > "$tmp/out"
[ ! -s "$tmp/out" ]
ok $? "no .c or .cu file in src/ is over 1000 lines"
