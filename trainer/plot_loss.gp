# SPDX-License-Identifier: MIT
# plot_loss.gp - train/val loss and throughput of an ibc_gpt2 run, from its
# --log CSV, as a PNG:
#   gnuplot -e "csv='out/demo/loss.csv'; png='out/demo/loss.png'" trainer/plot_loss.gp
# Columns: step,train_loss,val_loss,lr,grad_norm,step_ms,tokens_per_s,gflops,
#          flops_frac,allreduce_ms,exposed_ms,hidden_frac,gather_ms
if (!exists("csv")) csv = 'out/demo/loss.csv'
if (!exists("png")) png = 'out/demo/loss.png'
if (!exists("title")) title = 'ibc_gpt2'

set datafile separator ','
set datafile missing NaN
set terminal pngcairo size 1000,760 font ',10'
set output png
set multiplot layout 2,1 title title noenhanced
set key top right
set grid
set xlabel 'step'
set ylabel 'loss (nats)'
set title 'loss'
plot csv using 1:(valid(2) ? $2 : NaN) every ::1 with lines lw 1.5 title 'train', \
     csv using 1:(valid(3) ? $3 : NaN) every ::1 with linespoints pt 7 ps 0.8 lw 2 title 'validation'
set title 'throughput'
set ylabel 'tokens/s (all ranks)'
set y2label 'all-reduce hidden behind backward (%)'
set y2range [0:100]
set y2tics
set ytics nomirror
plot csv using 1:(valid(7) ? $7 : NaN) every ::1 with lines lw 1.5 title 'tokens/s', \
     csv using 1:(valid(12) && $10 > 0 ? 100*$12 : NaN) every ::1 axes x1y2 with points pt 1 ps 0.6 title 'hidden %'
unset multiplot
