# SPDX-License-Identifier: MIT
# shim_case.sh - sourced by the tests that run ranks under an LD_PRELOAD
# shim of tests/coll (test_tcp_short_io.sh, test_signal_storm.sh): sets b
# (the build tree), run (the launcher), log (a scratch file, removed at
# exit) and n (the TAP count, 0), and defines shim_case().
#
# shim_case NAME NR DESC [VAR=VALUE ...] -- PROGRAM [ARGS...]
#   runs NR ranks of PROGRAM (bounded by 240 s) with the variables set and
#   tests/coll/.libs/libNAME.so preloaded, and prints one TAP line (number
#   $n + 1): ok when every rank exited 0, at least NR lines of the ranks
#   say PASS, and at least NR processes printed the shim's exit line
#   "NAME: pid P <verb> <count>" with a count above 0 (so a run the shim
#   did not reach fails).
b=$top_builddir
run=$top_srcdir/tests/scripts/run_local_ranks.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
n=0

shim_case() {
	sc_name=$1 sc_nr=$2 sc_desc=$3
	shift 3
	sc_env=
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		sc_env="$sc_env $1"
		shift
	done
	shift
	n=$((n + 1))
	sc_shim=$b/tests/coll/.libs/lib$sc_name.so
	if [ ! -f "$sc_shim" ]; then
		echo "not ok $n - $sc_desc ($sc_shim was not built)"
		return
	fi
	sc_start=$(date +%s)
	# shellcheck disable=SC2086 # the variables are words on purpose
	# (ASAN_OPTIONS: in the ASan build, test_asan_build.sh, the shim comes
	# before the sanitizer's runtime, which ASan refuses by default; its
	# interceptors still run, behind the shim's functions)
	env $sc_env LD_PRELOAD="$sc_shim" \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		"$run" -n "$sc_nr" -t 240 -- "$@" >"$log" 2>&1
	sc_rc=$?
	sc_secs=$(($(date +%s) - sc_start))
	sc_pass=$(grep -c ': PASS' "$log")
	sc_rep=$(grep -c "^$sc_name: pid [0-9]* [a-z]* [1-9]" "$log")
	if [ "$sc_rc" -eq 0 ] && [ "$sc_pass" -ge "$sc_nr" ] && [ "$sc_rep" -ge "$sc_nr" ]; then
		echo "ok $n - $sc_desc ($sc_secs s)"
	else
		echo "not ok $n - $sc_desc ($sc_secs s; rc $sc_rc, $sc_pass PASS lines, $sc_rep $sc_name reports)"
		sed 's/^/# /' "$log" | grep -v "^# $sc_name: pid" | tail -20
	fi
}
