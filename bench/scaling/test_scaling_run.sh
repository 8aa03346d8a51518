#!/bin/sh
# SPDX-License-Identifier: MIT
# test_scaling_run.sh - the local half of the scaling experiment without the
# benchmark and trainer binaries:
#   1-4  fit_link.awk recovers alpha, beta, gamma from synthetic ibc_bench
#        tables generated with the ring formulas of docs/scaling.md;
#   5-7  the fitted 2-rank parameters predict the synthetic 3- and 4-rank bus
#        bandwidth through `ibc_scaling local` (the model's own round trip);
#   8-11 run.sh with the tools missing writes the model outputs, reports SKIP
#        for the measurements and writes no local parameters (nothing is
#        made up);
#   12-13 the trainer-log parser of run.sh: median step time after two
#        warm-up steps, for both llm.c output styles.
: "${top_srcdir:?set by make check}" "${top_builddir:?set by make check}"
src=$top_srcdir/bench/scaling
bin=$top_builddir/bench/scaling/ibc_scaling
tmp=$(mktemp -d "${TMPDIR:-/tmp}/scaling-run.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..13"
t=0
ok() { t=$((t + 1)); if [ "$1" = 0 ]; then echo "ok $t - $2"; else echo "not ok $t - $2"; fail=1; fi; }
fail=0

# synthetic tables: alpha 3 us, beta 0.25 ns/B, gamma 0.125 ns/B, ring formulas
gen() { # $1 coll $2 n
	awk -v coll="$1" -v n="$2" 'BEGIN {
		a = 3; b = 0.25e-3; g = 0.125e-3; f = (n - 1) / n
		print "# bytes count dtype op time_us algbw_GBps busbw_GBps errors"
		for (m = 8; m <= 67108864; m *= 4) {
			if (coll == "allreduce") { tu = 2 * (n - 1) * a + 2 * f * m * b + f * m * g; bf = 2 * f }
			else { tu = (n - 1) * a + f * m * b; bf = f }
			printf "%d %d float sum %.6f %.6f %.6f 0\n", m, m / 4, tu, m / tu / 1000, m / tu / 1000 * bf
		}
	}'
}
for n in 2 3 4; do
	gen allreduce $n > "$tmp/ar$n.txt"
	gen allgather $n > "$tmp/ag$n.txt"
done
awk -v n=2 -v tr=shm -f "$src/fit_link.awk" "$tmp/ar2.txt" "$tmp/ag2.txt" > "$tmp/fit.txt"
ok $? "fit_link.awk runs on a 2-rank sweep"
val() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/fit.txt"; }
near() { awk -v g="$1" -v w="$2" -v r="$3" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= r * w) }'; }
# alpha from the 8-byte message: 2(n-1) alpha + 16 beta-ish bytes, so within 0.1%
near "$(val shm.alpha_us)" 3 0.001; ok $? "alpha = 3 us recovered ($(val shm.alpha_us))"
near "$(val shm.beta_ns_per_B)" 0.25 1e-4; ok $? "beta = 0.25 ns/B recovered ($(val shm.beta_ns_per_B))"
near "$(val shm.gamma_ns_per_B)" 0.125 1e-3; ok $? "gamma = 0.125 ns/B recovered ($(val shm.gamma_ns_per_B))"

{ echo "cores 2"; echo "fit_ranks 2"; cat "$tmp/fit.txt"; } > "$tmp/params.txt"
for n in 2 3 4; do
	awk -v n=$n '!/^#/ { l = "allreduce shm " n " " $1 " " $7 } END { print l }' "$tmp/ar$n.txt"
done > "$tmp/meas.tsv"
"$bin" local -p "$tmp/params.txt" -m "$tmp/meas.tsv" > "$tmp/local.txt"
ok $? "ibc_scaling local runs"
for n in 3 4; do
	e=$(awk -v n=$n '$1 ~ /^allreduce/ && $3 == n { print $(NF) }' "$tmp/local.txt")
	awk -v e="$e" 'BEGIN { if (e == "") exit 1; if (e < 0) e = -e; exit !(e < 0.5) }'
	ok $? "$n-rank bus bandwidth predicted from the 2-rank fit within 0.5% (error ${e:-missing}%)"
done

IBC_SCALING_BIN=$bin IBC_SCALING_RESULTS=$tmp/results IBC_SCALING_PARAMS=$tmp/lp.txt \
IBC_SCALING_MEASURED=$tmp/lm.tsv IBC_BENCH=$tmp/no-bench IBC_GPT2=$tmp/no-trainer \
	sh "$src/run.sh" --no-docs > "$tmp/run.log" 2>&1
ok $? "run.sh completes without the benchmark and the trainer"
grep -q "SKIP collective sweep" "$tmp/run.log" && grep -q "SKIP trainer scaling" "$tmp/run.log"
ok $? "run.sh reports the missing tools as SKIP"
[ ! -e "$tmp/lp.txt" ] && [ ! -e "$tmp/lm.tsv" ]
ok $? "no local parameters or measurements are written without measuring"
grep -q "^gpt3-v3.1-10752-eos" "$tmp/results/mlperf.txt" && [ -s "$tmp/results/mlperf-points.dat" ] &&
	[ -s "$tmp/results/mlperf-curve.dat" ]
ok $? "run.sh wrote the model table and plot data"
printf '%s\n' 'num_parameters: 124475904' 'step 1: train loss 5.0 (took 900.0 ms)' \
	'step 2: train loss 4.9 (took 800.0 ms)' 'step 3: train loss 4.8 (took 812.5 ms)' \
	'step 4: train loss 4.7 (took 810.0 ms)' 'step 5: train loss 4.6 (took 830.0 ms)' > "$tmp/cpu.log"
[ "$(sh "$src/run.sh" --parse-steps "$tmp/cpu.log")" = "0.812500" ]
ok $? "median of steps 3-5 of 'step N: ... (took T ms)' lines is 0.8125 s"
printf '%s\n' 'step    1/10 | loss 5.0 | (900.00 ms | 1 tok/s)' 'step    2/10 | loss 5.0 | (700.00 ms | 1 tok/s)' \
	'step    3/10 | loss 4.9 | (612.25 ms | 1 tok/s)' 'step    4/10 | loss 4.9 | (600.00 ms | 1 tok/s)' \
	'val loss 4.1 (3 ms)' > "$tmp/gpu.log"
[ "$(sh "$src/run.sh" --parse-steps "$tmp/gpu.log")" = "0.606125" ]
ok $? "median of steps 3-4 of 'step N/M | ... (T ms' lines is 0.606125 s; other lines ignored"
sed 's/^/# /' "$tmp/run.log"
exit $fail
