#!/bin/sh
# SPDX-License-Identifier: MIT
# test_env_doc.sh - docs/env.md must be exactly what `ibc_info --env-md`
# prints from src/base/params.def (run `make env-doc` after adding a parameter);
# `ibc_info --params` marks environment values that are not used (an integer
# the registry refuses, a string its owner's parser refuses) and shows the
# default used instead.
echo "1..5"
out=$("$top_builddir/tools/ibc_info" --env-md) || { echo "not ok 1 - ibc_info --env-md runs"; echo "not ok 2 - docs/env.md up to date"; exit 1; }
echo "ok 1 - ibc_info --env-md runs"
if printf '%s\n' "$out" | cmp -s - "$top_srcdir/docs/env.md"; then
	echo "ok 2 - docs/env.md matches src/base/params.def"
else
	echo "not ok 2 - docs/env.md is stale: run 'make env-doc'"
	printf '%s\n' "$out" | diff "$top_srcdir/docs/env.md" - | head -20 | sed 's/^/# /'
fi

out=$(IBC_TIMEOUT_MS=abc IBC_ALGO=foo IBC_TRANSPORT=bogus IBC_PROTO=ll \
	"$top_builddir/tools/ibc_info" --params 2>/dev/null)
# the value line and the source line of parameter $1
show() { printf '%s\n' "$out" | grep -A1 "^IBC_$1="; }
want=$(printf '%s\n' 'IBC_TIMEOUT_MS=600000' \
	'    default: 600000   source: env, INVALID: IBC_TIMEOUT_MS=abc is not an integer; the default 600000 is used instead')
[ "$(show TIMEOUT_MS)" = "$want" ]
r=$?
[ $r -eq 0 ] || show TIMEOUT_MS | sed 's/^/# /'
[ $r -eq 0 ] && echo "ok 3 - IBC_TIMEOUT_MS=abc: shown invalid, the default used" || echo "not ok 3 - IBC_TIMEOUT_MS=abc"
want=$(printf '%s\n' 'IBC_ALGO=auto' \
	'    default: auto   source: env, INVALID: IBC_ALGO=foo is not one of the values listed below; the default auto is used instead' \
	'IBC_PROTO=ll' '    default: auto   source: env' \
	'IBC_TRANSPORT=auto' \
	'    default: auto   source: env, INVALID: IBC_TRANSPORT=bogus is not one of the values listed below; the default auto is used instead')
got=$(show ALGO; show PROTO; show TRANSPORT)
[ "$got" = "$want" ]
r=$?
[ $r -eq 0 ] || printf '%s\n' "$got" | sed 's/^/# /'
[ $r -eq 0 ] && echo "ok 4 - IBC_ALGO=foo, IBC_TRANSPORT=bogus: shown invalid, auto used; IBC_PROTO=ll valid" ||
	echo "not ok 4 - IBC_ALGO=foo, IBC_TRANSPORT=bogus, IBC_PROTO=ll"
err=$(IBC_TIMEOUT_MS=abc "$top_builddir/tools/ibc_info" --params 2>&1 >/dev/null)
printf '%s\n' "$err" | grep -q 'IBC WARN ENV .*IBC_TIMEOUT_MS=abc is not an integer; using the default 600000$'
r=$?
[ $r -eq 0 ] && echo "ok 5 - the registry's WARN for IBC_TIMEOUT_MS=abc on stderr" || { echo "not ok 5 - WARN on stderr"; printf '%s\n' "$err" | sed 's/^/# /'; }
