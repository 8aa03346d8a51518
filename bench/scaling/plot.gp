# SPDX-License-Identifier: MIT
# plot.gp - time to train and scaling efficiency of GPT-3 175B vs GPU count:
# the model (line: v3.1 recipe; crosses: each published configuration) and
# the published MLPerf results (filled symbols). Run by bench/scaling/run.sh
# in bench/scaling/results, reading mlperf-points.dat and mlperf-curve.dat
# written by "ibc_scaling mlperf -P ... -C ...".
set terminal pngcairo size 1400,560 font "sans,11"
set output "mlperf.png"
set multiplot layout 1,2 title "GPT-3 175B, MLPerf Training closed division: ibcoll scaling model vs published (H100, InfiniBand)"

set logscale xy
set xrange [400:16000]
set xtics (512, 1024, 2048, 4096, 8192, 16384)
set xlabel "GPUs"
set ylabel "time to train (minutes)"
set grid
set key top right
plot "mlperf-curve.dat" using 1:3 with lines lw 2 lc rgb "#1f77b4" title "model, v3.1 recipe (GBS = max(2048, 8 dp))", \
     "mlperf-points.dat" using ($4 == 0 ? $1 : 1/0):2 with points pt 7 ps 1.6 lc rgb "#d62728" title "published v3.1", \
     "mlperf-points.dat" using ($4 == 1 ? $1 : 1/0):2 with points pt 9 ps 1.8 lc rgb "#2ca02c" title "published v4.0", \
     "mlperf-points.dat" using ($4 == 2 ? $1 : 1/0):2 with points pt 5 ps 1.5 lc rgb "#9467bd" title "published v4.1", \
     "mlperf-points.dat" using 1:3 with points pt 2 ps 2 lw 2 lc rgb "black" title "model, published configuration"

unset logscale y
set yrange [0:1.1]
set ylabel "scaling efficiency vs 512 GPUs of the same round"
set key bottom left
plot "mlperf-curve.dat" using 1:4 with lines lw 2 lc rgb "#1f77b4" title "model, v3.1 recipe", \
     "mlperf-points.dat" using ($4 == 0 ? $1 : 1/0):5 with points pt 7 ps 1.6 lc rgb "#d62728" title "published v3.1", \
     "mlperf-points.dat" using ($4 == 1 ? $1 : 1/0):5 with points pt 9 ps 1.8 lc rgb "#2ca02c" title "published v4.0", \
     "mlperf-points.dat" using 1:6 with points pt 2 ps 2 lw 2 lc rgb "black" title "model, published configuration"
unset multiplot
