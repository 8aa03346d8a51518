#!/bin/sh
# SPDX-License-Identifier: MIT
# test_scaling_docs.sh - the generated blocks of docs/scaling.md must be
# exactly what `ibc_scaling mlperf -f md`, `ibc_scaling robust -f md` and
# `ibc_scaling logs -f md` print from bench/scaling/*.conf, mlperf.csv and
# mllog-runs.csv (run `make scaling-docs` after changing the model or its data).
: "${top_srcdir:?set by make check}" "${top_builddir:?set by make check}"
bin=$top_builddir/bench/scaling/ibc_scaling
doc=$top_srcdir/docs/scaling.md
echo "1..6"
t=0
fail=0
for what in mlperf robust logs; do
	t=$((t + 1))
	if out=$("$bin" "$what" -f md -d "$top_srcdir/bench/scaling"); then
		echo "ok $t - ibc_scaling $what -f md runs"
	else
		echo "not ok $t - ibc_scaling $what -f md runs"
		fail=1
	fi
	t=$((t + 1))
	block=$(awk -v b="<!-- BEGIN ibc_scaling $what -->" -v e="<!-- END ibc_scaling $what -->" \
		'$0 == b { on = 1; next } $0 == e { on = 0 } on' "$doc")
	if [ -n "$block" ] && [ "$block" = "$out" ]; then
		echo "ok $t - docs/scaling.md '$what' block matches the model output"
	else
		echo "not ok $t - docs/scaling.md '$what' block is stale: run 'make scaling-docs'"
		printf '%s\n' "$out" > "${TMPDIR:-/tmp}/scaling-md.$$"
		printf '%s\n' "$block" | diff - "${TMPDIR:-/tmp}/scaling-md.$$" | head -20 | sed 's/^/# /'
		rm -f "${TMPDIR:-/tmp}/scaling-md.$$"
		fail=1
	fi
done
exit $fail
