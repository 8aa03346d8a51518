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
#   19   the median over rounds of run.sh (odd and even counts, order kept);
#   20-21 transport "ib": fit_link.awk and ibc_scaling local on synthetic ib
#        tables (3- and 4-rank predictions, the link table row);
#   22-26 run.sh IBC_SCALING_TRANSPORTS=ib IBC_SCALING_LAUNCH=local with a
#        stand-in ibc_bench (the synthetic tables, for the ranks of --local
#        N): the six ib jobs are launched with --local N and IBC_TRANSPORT=ib,
#        no trainer runs, the ib fit is merged into an existing parameters
#        file whose shm, tcp and trainer lines stay as they were, the ib rows
#        are added to the measured file without losing the others, and the
#        local table has the ib predictions;
#   27-28 a second run with IBC_SCALING_TRANSPORTS=shm replaces the shm lines
#        and keeps ib, tcp and trainer; IBC_SCALING_MERGE=0 overwrites;
#   29   an unknown transport is refused (exit 2).
: "${top_srcdir:?set by make check}" "${top_builddir:?set by make check}"
src=$top_srcdir/bench/scaling
bin=$top_builddir/bench/scaling/ibc_scaling
tmp=$(mktemp -d "${TMPDIR:-/tmp}/scaling-run.XXXXXX") || exit 1
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
echo "1..29"
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
# ---- transport ib ----
awk -v n=2 -v tr=ib -f "$src/fit_link.awk" "$tmp/ar2.txt" "$tmp/ag2.txt" > "$tmp/fitib.txt"
{ echo "cores 2"; echo "fit_ranks 2"; cat "$tmp/fitib.txt"; } > "$tmp/paramsib.txt"
for n in 2 3 4; do
	awk -v n=$n '!/^#/ { l = "allreduce ib " n " " $1 " " $7 } END { print l }' "$tmp/ar$n.txt"
done > "$tmp/measib.tsv"
"$bin" local -p "$tmp/paramsib.txt" -m "$tmp/measib.tsv" > "$tmp/localib.txt" &&
	awk '$1 ~ /^allreduce/ && $2 == "ib" && ($3 == 3 || $3 == 4) { e = $NF < 0 ? -$NF : $NF; if (e < 0.5) k++ }
	     END { exit k != 2 }' "$tmp/localib.txt"
ok $? "ibc_scaling local accepts ib: 3- and 4-rank ib busbw predicted within 0.5%"
"$bin" local -p "$tmp/paramsib.txt" -f md | grep -qx '| ib | 3.00 | 0.2500 (4.00) | 0.1250 |'
ok $? "ibc_scaling local -f md lists the ib link: alpha 3.00 us, beta 0.2500 ns/B (4.00 GB/s), gamma 0.1250"

# a stand-in ibc_bench: "COLL ARGS... --local N" prints the synthetic table
# of N ranks ($tmp/arN.txt or agN.txt) and logs how it was called
mkdir -p "$tmp/fake"
{
	echo '#!/bin/sh'
	echo 'coll=$1; n='
	echo 'while [ $# -gt 0 ]; do [ "$1" = --local ] && n=$2; shift; done'
	echo "echo \"\$coll local=\$n transport=\$IBC_TRANSPORT\" >> '$tmp/fake/calls'"
	echo 'case $coll in allreduce) c=ar ;; allgather) c=ag ;; *) exit 2 ;; esac'
	echo "sed 's/busbw_GBps/busbw/' '$tmp'/\$c\$n.txt"
} > "$tmp/fake/ibc_bench"
chmod +x "$tmp/fake/ibc_bench"
printf '%s\n' "# ibcoll local scaling parameters, measured by bench/scaling/run.sh" "# host old, 2026-01-01T00:00:00Z" \
	"cores 2" "fit_ranks 2" "# shm: fit at 2 ranks" "shm.alpha_us 0.5" "shm.beta_ns_per_B 0.25" "shm.gamma_ns_per_B 0" \
	"tcp.alpha_us 4" "tcp.beta_ns_per_B 0.6" "tcp.gamma_ns_per_B 0.1" "trainer.grad_bytes 27867136" \
	"trainer.sample_compute_s 0.05" "trainer.step_fixed_s 0.06" "trainer.corun_factor 1.02" "trainer.batch 4" \
	"trainer.threads_per_rank 1" "trainer.overlap 0" > "$tmp/mp.txt"
printf '%s\n' "# measured by bench/scaling/run.sh on old" "# round 1 00:00:00Z load average 1 1 1" \
	"allreduce shm 2 8388608 4.5" "allreduce shm 3 8388608 2.2" "allreduce tcp 2 8388608 1.5" \
	"trainer shm weak 1 0.25" "trainer_allreduce shm weak 2 0.015" > "$tmp/mm.tsv"
mrun() {
	IBC_SCALING_BIN=$bin IBC_SCALING_RESULTS=$tmp/mres IBC_SCALING_PARAMS=$tmp/mp.txt \
	IBC_SCALING_MEASURED=$tmp/mm.tsv IBC_BENCH=$tmp/fake/ibc_bench IBC_GPT2=$tmp/no-trainer \
	IBC_SCALING_LAUNCH=local sh "$src/run.sh" --local-only --no-docs > "$tmp/mrun.log" 2>&1
}
IBC_SCALING_TRANSPORTS=ib mrun
ok $? "run.sh IBC_SCALING_TRANSPORTS=ib IBC_SCALING_LAUNCH=local completes"
[ "$(sort "$tmp/fake/calls" | tr '\n' ,)" = \
  "allgather local=2 transport=ib,allgather local=3 transport=ib,allgather local=4 transport=ib,allreduce local=2 transport=ib,allreduce local=3 transport=ib,allreduce local=4 transport=ib," ] &&
	grep -q "SKIP trainer scaling: IBC_SCALING_TRANSPORTS (ib) has neither shm nor tcp" "$tmp/mrun.log"
ok $? "six ib jobs started with ibc_bench --local 2, 3, 4 and IBC_TRANSPORT=ib; no trainer"
pv() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/mp.txt"; }
near "$(pv ib.alpha_us)" 3 0.001 && near "$(pv ib.beta_ns_per_B)" 0.25 1e-4 && near "$(pv ib.gamma_ns_per_B)" 0.125 1e-3 &&
	[ "$(grep -v '^#' "$tmp/mp.txt" | grep -v '^ib\.' | tr '\n' ,)" = \
	  "cores 2,fit_ranks 2,shm.alpha_us 0.5,shm.beta_ns_per_B 0.25,shm.gamma_ns_per_B 0,tcp.alpha_us 4,tcp.beta_ns_per_B 0.6,tcp.gamma_ns_per_B 0.1,trainer.grad_bytes 27867136,trainer.sample_compute_s 0.05,trainer.step_fixed_s 0.06,trainer.corun_factor 1.02,trainer.batch 4,trainer.threads_per_rank 1,trainer.overlap 0," ] &&
	grep -qx '# kept from an earlier run (host old, 2026-01-01T00:00:00Z):' "$tmp/mp.txt"
ok $? "parameters: ib fitted (3 us, 0.25, 0.125 ns/B) and merged; shm, tcp, trainer lines kept under 'kept from an earlier run (host old, ...)'"
# the busbw column of the synthetic tables, to be recomputed from time_us
lastbw() { awk '!/^#/ { v = $7 } END { print v }' "$tmp/ar$1.txt"; }
[ "$(grep -v '^#' "$tmp/mm.tsv" | awk '{ $NF = ""; print }' | tr '\n' ,)" = \
  "allreduce ib 2 33554432 ,allreduce ib 3 33554432 ,allreduce ib 4 33554432 ,allreduce shm 2 8388608 ,allreduce shm 3 8388608 ,allreduce tcp 2 8388608 ,trainer shm weak 1 ,trainer_allreduce shm weak 2 ," ] &&
	[ "$(grep -v '^#' "$tmp/mm.tsv" | awk 'NR > 3 { print $NF }' | tr '\n' ,)" = "4.5,2.2,1.5,0.25,0.015," ] &&
	(for n in 2 3 4; do
		near "$(awk -v n=$n '$2 == "ib" && $3 == n { print $5 }' "$tmp/mm.tsv")" "$(lastbw $n)" 1e-3 || exit 1
	done) &&
	grep -qx '# round 1 00:00:00Z load average 1 1 1' "$tmp/mm.tsv"
ok $? "measured: ib rows at 2, 3, 4 ranks (32 MiB busbw from time_us, within 0.1% of the table's) added; the old rows and their round comment kept"
awk '$1 ~ /^allreduce/ && $2 == "ib" && ($3 == 3 || $3 == 4) { e = $NF < 0 ? -$NF : $NF; if (e < 0.5) k++ }
     $1 ~ /^allreduce/ && $2 == "shm" { s++ } /^trainer-weak +shm +1 / { w++ }
     END { exit !(k == 2 && s == 2 && w == 1) }' "$tmp/mres/local.txt"
ok $? "local table: ib 3- and 4-rank predictions within 0.5%, and the kept shm and trainer rows"
: > "$tmp/fake/calls"

IBC_SCALING_TRANSPORTS=shm mrun &&
	[ "$(grep -c . "$tmp/fake/calls")" = 6 ] && [ "$(grep -c 'transport=shm' "$tmp/fake/calls")" = 6 ] &&
	[ "$(grep -v '^#' "$tmp/mp.txt" | awk '{ print $1 }' | tr '\n' ,)" = \
	  "cores,fit_ranks,shm.alpha_us,shm.beta_ns_per_B,shm.gamma_ns_per_B,ib.alpha_us,ib.beta_ns_per_B,ib.gamma_ns_per_B,tcp.alpha_us,tcp.beta_ns_per_B,tcp.gamma_ns_per_B,trainer.grad_bytes,trainer.sample_compute_s,trainer.step_fixed_s,trainer.corun_factor,trainer.batch,trainer.threads_per_rank,trainer.overlap," ] &&
	near "$(pv shm.alpha_us)" 3 0.001 && [ "$(pv tcp.alpha_us)" = 4 ] &&
	[ "$(grep -c '^# kept from an earlier run' "$tmp/mp.txt")" = 2 ] &&
	[ "$(grep -v '^#' "$tmp/mm.tsv" | awk '{ print $1, $2, $3 }' | tr '\n' ,)" = \
	  "allreduce shm 2,allreduce shm 3,allreduce shm 4,allreduce ib 2,allreduce ib 3,allreduce ib 4,allreduce tcp 2,trainer shm weak,trainer_allreduce shm weak," ]
ok $? "second merge (shm; no trainer binary): shm replaced, ib kept from run 1, tcp and trainer from the old file"
IBC_SCALING_TRANSPORTS=ib IBC_SCALING_MERGE=0 mrun &&
	[ "$(grep -v '^#' "$tmp/mp.txt" | awk '{ print $1 }' | tr '\n' ,)" = \
	  "cores,fit_ranks,ib.alpha_us,ib.beta_ns_per_B,ib.gamma_ns_per_B," ] && ! grep -q 'shm\|tcp' "$tmp/mm.tsv"
ok $? "IBC_SCALING_MERGE=0: the files hold only this run's ib lines"
IBC_SCALING_TRANSPORTS="shm rdma" mrun
[ $? = 2 ] && grep -q "unknown transport 'rdma'" "$tmp/mrun.log"
ok $? "IBC_SCALING_TRANSPORTS with an unknown transport: exit 2"

sed 's/^/# /' "$tmp/run.log"
exit $fail
