#!/bin/sh
# SPDX-License-Identifier: MIT
# test_scaling_run.sh - the local half of the scaling experiment without the
# benchmark and trainer binaries:
#   1-4  fit_link.awk recovers alpha, beta, gamma from synthetic ibc_bench
#        tables generated with the ring formulas of docs/scaling.md;
#   5-7  the fitted 2-rank parameters predict the synthetic 3- and 4-rank bus
#        bandwidth through `ibc_scaling local` (the model's own round trip,
#        with the 3- and 4-rank tables stretched by ceil(ranks / 2 cores));
#   8-11 run.sh with the tools missing writes the model outputs, reports SKIP
#        for the measurements and writes no local parameters (nothing is
#        made up);
#   12-15 run.sh and fit_link.awk on output captured from the real tools
#        (bench/scaling/testdata/, written by bench/scaling/run.sh on this
#        project's 2-core machine): median step time after two warm-up
#        steps of a 1-rank and a 2-rank trainer/ibc_gpt2 log (the 2-rank
#        line also carries the all-reduce ms, which must not be taken), the
#        exact parameter count from the model line, and alpha, beta, gamma
#        fitted from a real 2-rank ibc_bench all-reduce/all-gather sweep;
#   16   the median "allreduce X ms" of the real 2-rank trainer log;
#   17   ibc_scaling local's trainer rows, computed by hand from the ring
#        formula: (fixed + compute x batch per rank) x co-run factor x
#        max(1, ranks/cores) + ceil(ranks/cores) x all-reduce of 4P bytes;
#   18   IBC_SCALING_STAT=min: the smallest step of steps 3..12;
#   19   the median over rounds of run.sh (odd and even counts, order kept).
: "${top_srcdir:?set by make check}" "${top_builddir:?set by make check}"
src=$top_srcdir/bench/scaling
bin=$top_builddir/bench/scaling/ibc_scaling
tmp=$(mktemp -d "${TMPDIR:-/tmp}/scaling-run.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..19"
t=0
ok() { t=$((t + 1)); if [ "$1" = 0 ]; then echo "ok $t - $2"; else echo "not ok $t - $2"; fail=1; fi; }
fail=0

# synthetic tables: alpha 3 us, beta 0.25 ns/B, gamma 0.125 ns/B, ring formulas
# and a 2-core host: n ranks run ceil(n / 2) to a core, each ring step that much longer
gen() { # $1 coll $2 n
	awk -v coll="$1" -v n="$2" 'BEGIN {
		a = 3; b = 0.25e-3; g = 0.125e-3; f = (n - 1) / n; k = int((n + 1) / 2)
		print "# bytes count dtype op time_us algbw_GBps busbw_GBps errors"
		for (m = 8; m <= 67108864; m *= 4) {
			if (coll == "allreduce") { tu = k * (2 * (n - 1) * a + 2 * f * m * b + f * m * g); bf = 2 * f }
			else { tu = k * ((n - 1) * a + f * m * b); bf = f }
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
data=$src/testdata
[ "$(sh "$src/run.sh" --parse-steps "$data/ibc_gpt2-shm-1.txt")" = "1.905350" ]
ok $? "1-rank ibc_gpt2 log: median of steps 3..12 is 1.905350 s"
[ "$(sh "$src/run.sh" --parse-steps "$data/ibc_gpt2-shm-2.txt")" = "4.847950" ]
ok $? "2-rank ibc_gpt2 log: median step (not all-reduce) time of steps 3..12 is 4.847950 s"
[ "$(sh "$src/run.sh" --parse-params "$data/ibc_gpt2-shm-1.txt")" = 6966784 ]
ok $? "d2 parameter count from the model line is 6966784 (= 6.97 M printed)"
awk -v n=2 -v tr=shm -f "$src/fit_link.awk" "$data/ibc_bench-allreduce-shm-2.txt" \
	"$data/ibc_bench-allgather-shm-2.txt" > "$tmp/real.txt" &&
	[ "$(awk '$1 == "shm.alpha_us" { print $2 }' "$tmp/real.txt")" = "1.06" ] &&
	awk '$1 ~ /beta|gamma/ && !($2 >= 0) { bad = 1 } $1 ~ /beta/ && !($2 > 0) { bad = 1 } END { exit bad }' "$tmp/real.txt"
ok $? "fit on real ibc_bench output: alpha = 1.06 us (8-byte all-reduce / 2), beta > 0, gamma >= 0"
[ "$(sh "$src/run.sh" --parse-allreduce "$data/ibc_gpt2-shm-2.txt")" = "0.784100" ]
ok $? "2-rank ibc_gpt2 log: median all-reduce time of steps 3..12 is 0.784100 s"
# alpha 3 us, beta 0.25 ns/B, gamma 0.125 ns/B, M = 4 x 6966784 B, 0.125 s per sample,
# 0.1 s fixed per step, batch 4, 2 cores: ring all-reduce 2(n-1) a + 2(n-1)/n M b + (n-1)/n M g
# = 0.0087145 s (n = 2), 0.0130807 s (n = 4, run 2 to a core: x 2 = 0.0261614 s);
# co-run factor 1.2 (both cores busy): weak 2: 1.2 x (0.1 + 0.5) + 0.0087145;
# weak 4: 1.2 x 2 x 0.6 + 0.0261614; strong 4: 1.2 x 2 x (0.1 + 0.125) + 0.0261614
printf '%s\n' "cores 2" "fit_ranks 2" "shm.alpha_us 3" "shm.beta_ns_per_B 0.25" "shm.gamma_ns_per_B 0.125" \
	"trainer.grad_bytes 27867136" "trainer.sample_compute_s 0.125" "trainer.step_fixed_s 0.1" "trainer.corun_factor 1.2" \
	"trainer.batch 4" "trainer.threads_per_rank 1" "trainer.overlap 0" > "$tmp/tp.txt"
printf '%s\n' "trainer shm weak 2 0.6" "trainer shm weak 4 1.2" "trainer shm strong 4 0.3" \
	"trainer_allreduce shm weak 2 0.01" "trainer_allreduce shm weak 4 0.02" > "$tmp/tm.tsv"
"$bin" local -p "$tmp/tp.txt" -m "$tmp/tm.tsv" > "$tmp/tl.txt" &&
	[ "$(awk '/^trainer/ { printf "%s %s %s,", $1, $3, $6 }' "$tmp/tl.txt")" = \
	  "trainer-weak 2 0.7287,trainer-weak 4 1.4662,trainer-strong 4 0.5662,trainer-ar-weak 2 0.0087,trainer-ar-weak 4 0.0262," ]
ok $? "ibc_scaling local trainer rows: 1.2 x 0.6 + 0.0087, 2.4 x 0.6 + 0.0262, 2.4 x 0.225 + 0.0262, all-reduce 0.0087, 0.0262 s"
[ "$(IBC_SCALING_STAT=min sh "$src/run.sh" --parse-steps "$data/ibc_gpt2-shm-1.txt")" = "1.575400" ]
ok $? "1-rank ibc_gpt2 log, IBC_SCALING_STAT=min: smallest of steps 3..12 is 1.575400 s"
printf '%s\n' "# round 1" "cores 2" "trainer shm weak 2 0.5" "x.y 3" "# round 2" "cores 2" \
	"trainer shm weak 2 0.9" "x.y 1" "# round 3" "cores 2" "trainer shm weak 2 0.7" > "$tmp/rounds.txt"
[ "$(sh "$src/run.sh" --parse-rounds "$tmp/rounds.txt" | grep -v '^#' | tr '\n' ,)" = \
  "cores 2,trainer shm weak 2 0.7,x.y 2," ]
ok $? "median over rounds: 0.5 0.9 0.7 -> 0.7, 3 1 -> 2, keys in first-seen order"
sed 's/^/# /' "$tmp/run.log"
exit $fail
