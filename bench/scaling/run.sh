#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh - run the scaling experiments of issue 11 and regenerate the
# tables and plots of docs/scaling.md.
#
# usage: bench/scaling/run.sh [--model-only|--local-only] [--no-docs] [--reuse-raw]
#        (--local-only: skip step 1, the model vs published MLPerf)
#        (--reuse-raw: analyse results/raw/ of an earlier run again with the
#        same IBC_SCALING_REPEAT, launching nothing)
#        bench/scaling/run.sh --parse-steps|--parse-allreduce|--parse-params LOG
#        (median step s, median all-reduce s, parameter count of an ibc_gpt2 log)
#        bench/scaling/run.sh --parse-rounds FILE (median over rounds, tests)
#        bench/scaling/run.sh --merge-params|--merge-measured NEW OLD
#        (NEW merged with OLD as a run writes it, on stdout; tests)
#
#   1. model vs published MLPerf (always): bench/scaling/ibc_scaling mlperf
#      and ibc_scaling robust
#      -> results/mlperf.txt, results/mlperf-{points,curve}.dat,
#         results/mlperf.png (when gnuplot is installed), and the table
#         between the "ibc_scaling mlperf" markers of docs/scaling.md.
#   2. local measurements (unless --model-only), each only when its tool
#      exists; nothing is ever written for a tool that is missing:
#      - bench/ibc_bench all-reduce and all-gather on each transport of
#        IBC_SCALING_TRANSPORTS (shm and tcp) with 2, 3 and 4 ranks (mpirun,
#        or ibc_bench --local); alpha, beta, gamma fitted at 2 ranks
#        (fit_link.awk) -> local-params.txt; bus bandwidth at 2, 3, 4 ranks
#        -> local-measured.tsv (3 and 4 ranks are predictions, 2 the fit);
#        verbs ("ib") runs only where RDMA devices exist, e.g. in the
#        Soft-RoCE VM (bench/scaling/verbs_vm.sh);
#      - trainer/ibc_gpt2 at 1 rank, batch 1 and IBC_GPT2_BATCH, and as many
#        independent 1-rank jobs at once as cores (calibration: compute per
#        sample, fixed work per step, co-run factor, the model's only
#        trainer inputs), then weak and strong scaling at 1, 2, 4 ranks on
#        shm and tcp (those of IBC_SCALING_TRANSPORTS; none when it names
#        neither) -> step times and the trainer's own all-reduce time per
#        step in local-measured.tsv (all predicted, none used for fitting);
#      - the new parameters and rows are merged into the existing files:
#        a transport's link parameters, the trainer terms, and the rows of a
#        (kind, transport) pair that this run measured replace the old ones;
#        everything else is kept, under a comment naming the run it came
#        from (IBC_SCALING_MERGE=0: overwrite instead);
#      - then ibc_scaling local -> results/local.md and the table between
#        the "ibc_scaling local" markers of docs/scaling.md.
#
# Environment (all optional):
#   IBC_BUILDDIR      build tree (default: build/ when it holds
#                     bench/scaling/ibc_scaling, else the source tree)
#   IBC_SCALING_BIN   the ibc_scaling program
#   IBC_BENCH         ibc_bench path (default $IBC_BUILDDIR/bench/ibc_bench)
#   IBC_BENCH_ARGS    size sweep (default "-b 8 -e 16M -f 4 -n 10 -w 2 -c 0")
#   IBC_GPT2          trainer path (default $IBC_BUILDDIR/trainer/ibc_gpt2)
#   IBC_GPT2_ARGS     trainer arguments; @B@ is replaced by the batch per rank
#                     (default "-d 2 -T 64 -b @B@ -n 12 -m 0 --gen 0 --overlap 0";
#                     the model assumes no all-reduce hidden behind backward,
#                     so the trainer runs with --overlap 0; data/corpus must
#                     exist: trainer/prepro/prepare.sh)
#   IBC_GPT2_BATCH    global batch of the strong-scaling runs and per-rank
#                     batch of the weak-scaling runs (default 4)
#   IBC_SCALING_TRANSPORTS  transports of the collective sweep, from shm,
#                     tcp, ib (default "shm tcp"); the trainer runs on the
#                     shm and tcp among them
#   IBC_SCALING_LAUNCH  how the collective sweep starts ranks: mpirun,
#                     local (ibc_bench --local N, no mpirun), or auto
#                     (default: mpirun when it is installed, else local);
#                     the trainer always needs mpirun
#   IBC_SCALING_MERGE     1 (default): merge into the existing parameters and
#                     measured files; 0: overwrite them
#   MPIRUN            default "mpirun --allow-run-as-root --oversubscribe"
#   RUN_TIMEOUT       seconds per launched job (default 600)
#   IBC_SCALING_REPEAT    rounds of the whole local experiment; parameters
#                     and measured rows are medians over them (default 1)
#   IBC_SCALING_STAT      median (default) or min: which step of a trainer
#                     log (steps 3..) stands for the run; min is the step
#                     least disturbed by other users of the host
#   IBC_SCALING_RESULTS   output directory (default bench/scaling/results)
#   IBC_SCALING_PARAMS    local parameters file (default bench/scaling/local-params.txt)
#   IBC_SCALING_MEASURED  local measurements (default bench/scaling/local-measured.tsv)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
if [ -z "${IBC_BUILDDIR:-}" ] && [ -x "$top/build/bench/scaling/ibc_scaling" ]; then
	IBC_BUILDDIR=$top/build
fi
build=${IBC_BUILDDIR:-$top}
bin=${IBC_SCALING_BIN:-$build/bench/scaling/ibc_scaling}
bench=${IBC_BENCH:-$build/bench/ibc_bench}
gpt2=${IBC_GPT2:-$build/trainer/ibc_gpt2}
bench_args=${IBC_BENCH_ARGS:--b 8 -e 16M -f 4 -n 10 -w 2 -c 0}
gpt2_args_default="-d 2 -T 64 -b @B@ -n 12 -m 0 --gen 0 --overlap 0"
gpt2_args=${IBC_GPT2_ARGS:-$gpt2_args_default}
gpt2_batch=${IBC_GPT2_BATCH:-4}
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
tmo=${RUN_TIMEOUT:-600}
reps=${IBC_SCALING_REPEAT:-1}
transports=${IBC_SCALING_TRANSPORTS:-shm tcp}
launch_mode=${IBC_SCALING_LAUNCH:-auto}
merge=${IBC_SCALING_MERGE:-1}
local_only=0
stat=${IBC_SCALING_STAT:-median}
reuse=0
out=${IBC_SCALING_RESULTS:-$here/results}
docs=$top/docs/scaling.md
model_only=0
write_docs=1

# of sorted numbers (ms), one a line: the median, or with IBC_SCALING_STAT=min
# the smallest, in seconds
pick_stat() {
	awk -v stat="$stat" '{ v[NR] = $1 } END { if (!NR) exit
		if (stat == "min") printf "%.6f\n", v[1] / 1000
		else printf "%.6f\n", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) / 1000 }'
}

# median (IBC_SCALING_STAT=min: minimum) step time of a trainer/ibc_gpt2 log (rank 0's stdout), skipping the
# first two steps (warm-up); prints seconds, nothing when no step line was
# found. A step line is
#   "step     3/12 | loss 10.77 | lr 3.00e-04 | norm 2.655 | 487.3 ms | ..."
# and the step time is its fifth " | " field; with more than one rank the
# line goes on with "| allreduce 95.0 ms, 0% hidden", which is not the step.
step_seconds() {
	awk -F' [|] ' '$1 ~ /^step +[0-9]+\/[0-9]+$/ && $5 ~ /^[0-9.]+ ms$/ { sub(/ ms$/, "", $5); print $5 }' "$1" |
		tail -n +3 | sort -n | pick_stat
}

# median (or minimum, as above) all-reduce time per step (s) of a multi-rank trainer/ibc_gpt2 log,
# steps 3.. ("| allreduce 95.0 ms, 0% hidden" on the step line); nothing for
# a 1-rank log
allreduce_seconds() {
	awk -F' [|] ' '$1 ~ /^step +[0-9]+\/[0-9]+$/ && $8 ~ /^allreduce [0-9.]+ ms/ { split($8, w, " "); print w[2] }' "$1" |
		tail -n +3 | sort -n | pick_stat
}

# number of parameters of a trainer/ibc_gpt2 log, exact, from its model line
#   "ibc_gpt2: GPT-2 L 2 C 128 NH 2 V 50257 (Vp 50304) maxT 1024, 6.97 M parameters"
# P = (Vp + maxT) C + L (12 C^2 + 13 C) + 2 C (train/gpt2.c's tensors);
# printed only when it rounds to the printed "M parameters" figure
num_params() {
	awk '/^ibc_gpt2: GPT-2 L [0-9]+ C [0-9]+ / {
		for (i = 1; i <= NF; i++) {
			if ($i == "L") L = $(i + 1); if ($i == "C") C = $(i + 1)
			if ($i == "(Vp") { Vp = $(i + 1); sub(/\)/, "", Vp) }
			if ($i == "maxT") { T = $(i + 1); sub(/,/, "", T) }
			if ($i == "M" && $(i + 1) == "parameters") M = $(i - 1)
		}
		P = (Vp + T) * C + L * (12 * C * C + 13 * C) + 2 * C
		if (M != "" && sprintf("%.2f", P / 1e6) == M) { printf "%d\n", P; exit }
	}' "$1"
}

# median over the rounds of every parameter (key value) and every measured
# row (all fields but the last name it); comments are kept
median_rows() {
	awk '/^#/ { print; next }
	     NF >= 2 { k = $1; for (i = 2; i < NF; i++) k = k " " $i
		       if (!(k in n)) order[++nk] = k
		       v[k, ++n[k]] = $NF }
	     END { for (j = 1; j <= nk; j++) { k = order[j]; m = n[k]
			for (a = 1; a <= m; a++) x[a] = v[k, a]
			for (a = 2; a <= m; a++) { t = x[a]; for (b = a - 1; b >= 1 && x[b] + 0 > t + 0; b--) x[b + 1] = x[b]; x[b + 1] = t }
			print k, (m % 2 ? x[(m + 1) / 2] : sprintf("%.6g", (x[m / 2] + x[m / 2 + 1]) / 2)) } }' "$1"
}
# merge_files <params|measured> NEW OLD: NEW as it is, then what OLD has
# that NEW does not replace, grouped by the run it came from. A parameter is
# replaced by the same key in NEW (a transport's alpha, beta, gamma and the
# trainer terms are always written together); a measured row by any row of
# NEW with the same kind and transport (its first two fields). OLD's run is
# named by its "# host ..." (params) or "# measured by ..." line, or by the
# "# kept from an earlier run (...)" line of an earlier merge; its "# round"
# and "# <transport>: fit" comments stay with the rows they describe.
merge_files() {
	awk -v mode="$1" '
	function flush() { if (gkept) { printf "# kept from an earlier run (%s):\n", prov; printf "%s", gbuf }
			   gbuf = ""; gkept = 0 }
	FNR == NR { print
		    if (/^#/ || NF < 2) next
		    if (mode == "params") { nk[$1] = 1; if (split($1, a, ".") == 2 && a[1] != "trainer") ntr[a[1]] = 1
					    if ($1 == "cores") ncores = $2 }
		    else nk[$1 " " $2] = 1
		    next }
	/^# kept from an earlier run \(.*\):$/ { flush(); prov = substr($0, 29, length($0) - 30); next }
	(mode == "params" && /^# host /) || (mode == "measured" && /^# measured by /) { flush(); prov = substr($0, 3); next }
	/^# ibcoll local scaling parameters/ { next }
	/^#/ { if (mode == "params" && $2 ~ /^[a-z]+:$/ && (substr($2, 1, length($2) - 1) in ntr)) next
	       if (!(($0, prov) in seen)) gbuf = gbuf $0 "\n"
	       seen[$0, prov] = 1; next }
	NF < 2 { next }
	{ k = mode == "params" ? $1 : $1 " " $2
	  if (mode == "params" && $1 == "cores" && ncores != "" && $2 != ncores) cores_differ = $2
	  if (k in nk) next
	  gbuf = gbuf $0 "\n"; gkept = 1 }
	END { flush()
	      if (cores_differ != "")
		print "run.sh: warning: the kept rows were measured with cores " cores_differ ", this run with " ncores > "/dev/stderr" }' "$2" "$3"
}

parse_steps=
parse_rounds=
parse_params=
parse_ar=
merge_mode=
merge_args=
for a in "$@"; do
	if [ "$merge_args" = next2 ]; then merge_new=$a; merge_args=next1; continue; fi
	if [ "$merge_args" = next1 ]; then merge_old=$a; merge_args=all; continue; fi
	if [ "$parse_steps" = next ]; then parse_steps=$a; continue; fi
	if [ "$parse_params" = next ]; then parse_params=$a; continue; fi
	if [ "$parse_rounds" = next ]; then parse_rounds=$a; continue; fi
	if [ "$parse_ar" = next ]; then parse_ar=$a; continue; fi
	case $a in
	--parse-steps) parse_steps=next ;;
	--parse-params) parse_params=next ;;
	--parse-rounds) parse_rounds=next ;;
	--parse-allreduce) parse_ar=next ;;
	--model-only) model_only=1 ;;
	--local-only) local_only=1 ;;
	--no-docs) write_docs=0 ;;
	--reuse-raw) reuse=1 ;;
	-h|--help) sed -n '3,77p' "$0"; exit 0 ;;
	--merge-params|--merge-measured) merge_mode=${a#--merge-}; merge_args=next2 ;;
	*) echo "run.sh: unknown option $a" >&2; exit 2 ;;
	esac
done

# --parse-steps FILE: print the median step time (s) of a trainer log (tests);
# --parse-params FILE: print its exact parameter count;
# --parse-allreduce FILE: its median all-reduce time per step (s) (tests)
if [ -n "$parse_steps" ]; then
	step_seconds "$parse_steps"
	exit 0
fi
if [ -n "$parse_ar" ]; then
	allreduce_seconds "$parse_ar"
	exit 0
fi
if [ -n "$parse_rounds" ]; then
	median_rows "$parse_rounds"
	exit 0
fi
if [ -n "$parse_params" ]; then
	num_params "$parse_params"
	exit 0
fi
if [ -n "$merge_mode" ]; then
	[ "$merge_args" = all ] || { echo "run.sh: --merge-$merge_mode NEW OLD" >&2; exit 2; }
	merge_files "$merge_mode" "$merge_new" "$merge_old"
	exit 0
fi

[ -x "$bin" ] || { echo "run.sh: $bin not built (run make)" >&2; exit 1; }
for tr in $transports; do
	case $tr in
	shm|tcp|ib) ;;
	*) echo "run.sh: IBC_SCALING_TRANSPORTS: unknown transport '$tr' (shm, tcp, ib)" >&2; exit 2 ;;
	esac
done
case $launch_mode in
auto|mpirun|local) ;;
*) echo "run.sh: IBC_SCALING_LAUNCH must be auto, mpirun or local, not '$launch_mode'" >&2; exit 2 ;;
esac
[ "$model_only" = 1 ] && [ "$local_only" = 1 ] &&
	{ echo "run.sh: --model-only and --local-only exclude each other" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

# replace the lines between "<!-- BEGIN $1 -->" and "<!-- END $1 -->" of
# docs/scaling.md by the content of file $2
replace_block() {
	[ "$write_docs" = 1 ] && [ -f "$docs" ] || return 0
	awk -v tag="$1" -v file="$2" '
		$0 == "<!-- BEGIN " tag " -->" { print; while ((getline l < file) > 0) print l; skip = 1; next }
		$0 == "<!-- END " tag " -->" { skip = 0 }
		!skip { print }' "$docs" > "$docs.tmp" && mv "$docs.tmp" "$docs"
}

# ---- 1. model vs published -------------------------------------------------
if [ "$local_only" = 0 ]; then
"$bin" mlperf -P "$out/mlperf-points.dat" -C "$out/mlperf-curve.dat" > "$out/mlperf.txt"
"$bin" mlperf -f md > "$out/mlperf.md"
"$bin" robust -f md > "$out/robust.md"
"$bin" logs -f md > "$out/logs.md"
replace_block "ibc_scaling mlperf" "$out/mlperf.md"
replace_block "ibc_scaling robust" "$out/robust.md"
replace_block "ibc_scaling logs" "$out/logs.md"
if command -v gnuplot >/dev/null 2>&1; then
	(cd "$out" && gnuplot "$here/plot.gp")
	echo "run.sh: wrote $out/mlperf.png"
else
	echo "run.sh: SKIP plot: gnuplot not installed (apt-get install gnuplot-nox)"
fi
echo "run.sh: model tables in $out/mlperf.txt"
fi
[ "$model_only" = 1 ] && exit 0

# ---- 2. local measurements -------------------------------------------------
params=${IBC_SCALING_PARAMS:-$here/local-params.txt}
measured=${IBC_SCALING_MEASURED:-$here/local-measured.tsv}
# absolute: the trainer runs from the source root (cd below)
case $params in /*) ;; *) params=$PWD/$params ;; esac
case $measured in /*) ;; *) measured=$PWD/$measured ;; esac
raw=$out/raw
mkdir -p "$raw"
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
port_base=$((20000 + $$ % 10000)) # below the ephemeral range (32768-)
have_mpi=0
command -v mpirun >/dev/null 2>&1 && have_mpi=1
bench_launch=$launch_mode
if [ "$bench_launch" = auto ]; then
	bench_launch=local
	[ "$have_mpi" = 1 ] && bench_launch=mpirun
fi
# the trainer's transports: shm and tcp of IBC_SCALING_TRANSPORTS
trainer_trs=
for tr in $transports; do
	case $tr in shm|tcp) trainer_trs="$trainer_trs $tr" ;; esac
done
tmp_params=$(mktemp)
tmp_meas=$(mktemp)
trap 'rm -f "$tmp_params" "$tmp_meas"' EXIT
{
	echo "# ibcoll local scaling parameters, measured by bench/scaling/run.sh"
	echo "# host $(uname -n), $(date -u +%Y-%m-%dT%H:%M:%SZ), transports $transports"
	echo "cores $cores"
	echo "fit_ranks 2"
} > "$tmp_params"
echo "# measured by bench/scaling/run.sh on $(uname -n), $(date -u +%Y-%m-%dT%H:%M:%SZ), transports $transports" > "$tmp_meas"

# launch <ranks> <transport> <log> <command...>: one job under mpirun
launch() {
	n=$1; tr=$2; log=$3; shift 3
	# --reuse-raw: analyse the logs of an earlier run again, launch nothing
	# (a log that mpirun ended with a failure report counts as failed)
	if [ "$reuse" = 1 ]; then
		[ -s "$log" ] && ! grep -q '^mpirun \(detected\|noticed\)' "$log"
		return
	fi
	port_base=$((port_base + 1))
	# shellcheck disable=SC2086 # $mpirun is a command line on purpose
	timeout -k 10 "$tmo" $mpirun -np "$n" -x IBC_TRANSPORT="$tr" \
		-x IBC_ROOT="127.0.0.1:$port_base" -x OMP_NUM_THREADS=1 "$@" > "$log" 2>&1
}

# launch_bench <ranks> <transport> <log> <ibc_bench args...>: the collective
# sweep, under mpirun (launch) or, with IBC_SCALING_LAUNCH=local (or auto
# without mpirun), by ibc_bench --local N, which starts the ranks itself
launch_bench() {
	if [ "$bench_launch" = mpirun ] || [ "$reuse" = 1 ]; then
		launch "$@"
		return
	fi
	n=$1; tr=$2; log=$3; shift 3
	IBC_TRANSPORT=$tr OMP_NUM_THREADS=1 timeout -k 10 "$tmo" "$@" --local "$n" > "$log" 2>&1
}

# every measurement is repeated IBC_SCALING_REPEAT times, one full round
# after the other (so slow minutes of a shared host spread over all rows);
# each parameter and each measured row is the median over the rounds
measured_links=0
measured_trainer=0
rep=1
while [ "$rep" -le "$reps" ]; do
	sfx=
	[ "$reps" -gt 1 ] && sfx=-r$rep
	load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
	[ "$reuse" = 1 ] && load="(now; logs re-analysed, see the first run's output)"
	echo "run.sh: round $rep of $reps, load average $load"
	echo "# round $rep $(date -u +%H:%M:%SZ) load average $load" >> "$tmp_meas"
	if [ ! -x "$bench" ]; then
		echo "run.sh: SKIP collective sweep: $bench not built yet (benchmark issue)"
	elif [ "$bench_launch" = mpirun ] && [ "$have_mpi" = 0 ]; then
		echo "run.sh: SKIP collective sweep: mpirun not found (IBC_SCALING_LAUNCH=local runs without it)"
	else
		for tr in $transports; do
			ok=1
			for n in 2 3 4; do
				for coll in allreduce allgather; do
					# shellcheck disable=SC2086
					launch_bench "$n" "$tr" "$raw/$coll-$tr-$n$sfx.txt" "$bench" "$coll" $bench_args ||
						{ echo "run.sh: $coll $tr $n ranks failed, see $raw/$coll-$tr-$n$sfx.txt"; ok=0; }
				done
			done
			[ "$ok" = 1 ] || continue
			if awk -v n=2 -v tr="$tr" -f "$here/fit_link.awk" "$raw/allreduce-$tr-2$sfx.txt" \
			       "$raw/allgather-$tr-2$sfx.txt" >> "$tmp_params"; then
				measured_links=1
			fi
			for n in 2 3 4; do
				# bus bandwidth of the largest and a 1 MiB message, from the
				# mean time (ibc_bench prints busbw to 0.001 GB/s, one digit
				# for the VM's verbs): bytes / time_us / 1e3 x 2(n-1)/n GB/s
				awk -v n="$n" -v tr="$tr" '
					/^#/ { for (i = 2; i <= NF; i++) { if ($i == "bytes") cb = i - 1; if ($i == "time_us") ct = i - 1 } next }
					cb && ct && $cb ~ /^[0-9]+$/ && $ct > 0 { last = $cb; bw[$cb] = $cb / $ct / 1e3 * 2 * (n - 1) / n }
					END { if (last) printf "allreduce %s %d %s %.4g\n", tr, n, last, bw[last]
					      if (1048576 in bw) printf "allreduce %s %d 1048576 %.4g\n", tr, n, bw[1048576] }' \
					"$raw/allreduce-$tr-$n$sfx.txt" >> "$tmp_meas"
			done
		done
	fi

	if [ -z "$trainer_trs" ]; then
		echo "run.sh: SKIP trainer scaling: IBC_SCALING_TRANSPORTS ($transports) has neither shm nor tcp"
	elif [ ! -x "$gpt2" ]; then
		echo "run.sh: SKIP trainer scaling: $gpt2 not built yet (trainer issue)"
	elif [ "$have_mpi" = 0 ]; then
		echo "run.sh: SKIP trainer scaling: mpirun not found"
	elif [ ! -f "$top/data/corpus/manifest.json" ] && [ "$gpt2_args" = "$gpt2_args_default" ]; then
		echo "run.sh: SKIP trainer scaling: no data/corpus (run trainer/prepro/prepare.sh)"
	else
		case $gpt2 in /*) ;; *) gpt2=$PWD/$gpt2 ;; esac
		cd "$top" # the trainer's default data path is data/corpus
		# calibration: 1 rank on shm at batch 1 and at IBC_GPT2_BATCH; separate
		# jobs from the 1-rank rows below, which the model predicts
		for b in 1 "$gpt2_batch"; do
			args=$(echo "$gpt2_args" | sed "s/@B@/$b/g")
			# shellcheck disable=SC2086
			launch 1 shm "$raw/gpt2-calib-b$b$sfx.txt" "$gpt2" $args ||
				echo "run.sh: trainer calibration at batch $b failed, see $raw/gpt2-calib-b$b$sfx.txt"
		done
		# co-run: as many independent 1-rank jobs (batch IBC_GPT2_BATCH) as
		# cores at once; no communication between them. --bind-to none:
		# Open MPI binds a 1- or 2-process job to cores from core 0, so two
		# separate 1-process jobs would share core 0
		args=$(echo "$gpt2_args" | sed "s/@B@/$gpt2_batch/g")
		pids=
		k=1
		mpirun_plain=$mpirun
		mpirun="$mpirun --bind-to none"
		while [ "$k" -le "$cores" ]; do
			port_base=$((port_base + 10))
			# shellcheck disable=SC2086
			launch 1 shm "$raw/gpt2-corun-$k$sfx.txt" "$gpt2" $args &
			pids="$pids $!"
			k=$((k + 1))
		done
		mpirun=$mpirun_plain
		for p in $pids; do
			wait "$p" || echo "run.sh: a co-run calibration job failed, see $raw/gpt2-corun-*$sfx.txt"
		done
		for tr in $trainer_trs; do
			for mode in weak strong; do
				for r in 1 2 4; do
					if [ "$mode" = strong ]; then b=$((gpt2_batch / r)); else b=$gpt2_batch; fi
					[ "$b" -ge 1 ] || continue
					args=$(echo "$gpt2_args" | sed "s/@B@/$b/g")
					log=$raw/gpt2-$tr-$mode-$r$sfx.txt
					# shellcheck disable=SC2086
					launch "$r" "$tr" "$log" "$gpt2" $args ||
						{ echo "run.sh: trainer $tr $mode $r ranks failed, see $log"; continue; }
					s=$(step_seconds "$log")
					[ -n "$s" ] && echo "trainer $tr $mode $r $s" >> "$tmp_meas"
					s=$(allreduce_seconds "$log")
					[ -n "$s" ] && echo "trainer_allreduce $tr $mode $r $s" >> "$tmp_meas"
				done
			done
		done
		# model inputs from the two 1-rank calibration runs: step(b) = fixed +
		# compute x b (slope and intercept), and the gradient bytes (ibc_gpt2
		# all-reduces all P fp32 gradients, in buckets)
		log1=$raw/gpt2-calib-b1$sfx.txt
		logb=$raw/gpt2-calib-b$gpt2_batch$sfx.txt
		s1=$(step_seconds "$log1" 2>/dev/null || true)
		sb=$(step_seconds "$logb" 2>/dev/null || true)
		np=$(num_params "$log1" 2>/dev/null || true)
		fixed=
		if [ -n "$s1" ] && [ -n "$sb" ] && [ "$gpt2_batch" -gt 1 ]; then
			fixed=$(awk -v s1="$s1" -v sb="$sb" -v b="$gpt2_batch" \
				'BEGIN { c = (sb - s1) / (b - 1); f = s1 - c; if (c > 0 && f >= 0) printf "%.6g %.6g\n", c, f }')
		fi
		# co-run factor: mean step of the co-running jobs over the lone job's
		corun=
		if [ -n "$sb" ]; then
			k=1
			sum=0
			while [ "$k" -le "$cores" ]; do
				t=$(step_seconds "$raw/gpt2-corun-$k$sfx.txt" 2>/dev/null || true)
				[ -n "$t" ] || { sum=; break; }
				sum=$(awk -v a="$sum" -v b="$t" 'BEGIN { printf "%.9g", a + b }')
				k=$((k + 1))
			done
			[ -n "$sum" ] && corun=$(awk -v a="$sum" -v n="$cores" -v b="$sb" 'BEGIN { printf "%.4f", a / n / b }')
		fi
		if [ -n "$fixed" ] && [ -n "$np" ] && [ -n "$corun" ]; then
			case " $gpt2_args " in
			*" --overlap 0 "*) ;;
			*) echo "run.sh: note: the trainer may overlap the all-reduce; the model assumes it does not" ;;
			esac
			{
				echo "trainer.grad_bytes $((np * 4))"
				echo "$fixed" | awk '{ printf "trainer.sample_compute_s %s\ntrainer.step_fixed_s %s\n", $1, $2 }'
				echo "trainer.corun_factor $corun"
				echo "trainer.batch $gpt2_batch"
				echo "trainer.threads_per_rank 1"
				echo "trainer.overlap 0"
			} >> "$tmp_params"
			measured_trainer=1
		else
			echo "run.sh: the calibration logs $log1 and $logb lack the model line or step lines, or give no positive compute and fixed time (batch ${gpt2_batch} must exceed 1); no trainer parameters written"
		fi
	fi

	rep=$((rep + 1))
done
median_rows "$tmp_params" > "$tmp_params.med" && mv "$tmp_params.med" "$tmp_params"
median_rows "$tmp_meas" > "$tmp_meas.med" && mv "$tmp_meas.med" "$tmp_meas"

if [ "$measured_links" = 0 ] && [ "$measured_trainer" = 0 ]; then
	echo "run.sh: nothing measured; $params left unchanged"
	exit 0
fi
if [ "$merge" = 1 ] && [ -f "$params" ]; then
	merge_files params "$tmp_params" "$params" > "$tmp_params.mrg" && mv "$tmp_params.mrg" "$tmp_params"
fi
if [ "$merge" = 1 ] && [ -f "$measured" ]; then
	merge_files measured "$tmp_meas" "$measured" > "$tmp_meas.mrg" && mv "$tmp_meas.mrg" "$tmp_meas"
fi
cp "$tmp_params" "$params"
cp "$tmp_meas" "$measured"
"$bin" local -p "$params" -m "$measured" > "$out/local.txt"
"$bin" local -p "$params" -m "$measured" -f md > "$out/local.md"
replace_block "ibc_scaling local" "$out/local.md"
cat "$out/local.txt"
