#!/bin/sh
# SPDX-License-Identifier: MIT
# test_env_doc.sh - docs/env.md must be exactly what `ibc_info --env-md`
# prints from src/core/params.def (run `make env-doc` after adding a parameter).
echo "1..2"
out=$("$top_builddir/tools/ibc_info" --env-md) || { echo "not ok 1 - ibc_info --env-md runs"; echo "not ok 2 - docs/env.md up to date"; exit 1; }
echo "ok 1 - ibc_info --env-md runs"
if printf '%s\n' "$out" | cmp -s - "$top_srcdir/docs/env.md"; then
	echo "ok 2 - docs/env.md matches src/core/params.def"
else
	echo "not ok 2 - docs/env.md is stale: run 'make env-doc'"
	printf '%s\n' "$out" | diff "$top_srcdir/docs/env.md" - | head -20 | sed 's/^/# /'
	exit 1
fi
