#!/bin/sh
# SPDX-License-Identifier: MIT
# check_exports.sh - the dynamic symbols of libibcoll.so must be exactly the
# functions declared in the installed headers (IBC_API ... ibc_name(), no
# internal ibc_* helper leaking out).
so="$top_builddir/src/.libs/libibcoll.so"
echo "1..3"
if [ ! -f "$so" ]; then
	echo "not ok 1 - $so exists"; exit 1
fi
echo "ok 1 - libibcoll.so built"
exported=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | sort)
declared=$(grep -hv '^#define' "$top_srcdir"/include/ibcoll*.h | tr '\n' ' ' | \
	grep -o 'IBC_API[^;(]*(' | sed 's/($//; s/.*[ *]//' | sort -u)
if [ -z "$(printf '%s\n' "$exported" | grep -v '^ibc_')" ]; then
	echo "ok 2 - only ibc_* symbols exported"
else
	echo "not ok 2 - non-ibc symbols exported:"; printf '%s\n' "$exported" | grep -v '^ibc_' | sed 's/^/# /'
	exit 1
fi
if [ "$exported" = "$declared" ]; then
	echo "ok 3 - exported symbols equal the declared API ($(printf '%s\n' "$declared" | wc -l) functions)"
else
	echo "not ok 3 - exported and declared symbols differ (< exported, > declared):"
	diff <(printf '%s\n' "$exported") <(printf '%s\n' "$declared") 2>/dev/null | sed 's/^/# /' || \
	{ printf '%s\n' "$exported" > /tmp/ibc-exp.$$; printf '%s\n' "$declared" > /tmp/ibc-dec.$$; diff /tmp/ibc-exp.$$ /tmp/ibc-dec.$$ | sed 's/^/# /'; rm -f /tmp/ibc-exp.$$ /tmp/ibc-dec.$$; }
	exit 1
fi
