# SPDX-License-Identifier: MIT
# fit_link.awk - fit alpha, beta, gamma of one transport from ibc_bench
# output (POSIX awk; used by bench/scaling/run.sh).
#
# usage: awk -v n=RANKS -v tr=NAME [-v minbytes=65536] -f fit_link.awk \
#            ALLREDUCE_OUTPUT [ALLGATHER_OUTPUT]
#
# Input: nccl-tests-like tables. A comment line naming the columns
# ("# bytes count dtype op time_us ...") is used when present, else
# column 1 is bytes and column 5 time_us. For all-gather, bytes is the
# total gathered size (nccl-tests convention).
#
# Model (ring, as ibcoll uses for large messages; docs/scaling.md):
#   all-gather  t = (n-1) alpha + (n-1)/n M beta
#   all-reduce  t = 2(n-1) alpha + 2(n-1)/n M beta + (n-1)/n M gamma
# The slopes come from a least-squares line through the sizes >= minbytes
# (bandwidth regime); alpha from the smallest all-reduce message,
# t_min / (2(n-1)). Without an all-gather file, gamma is set to 0 and beta
# absorbs it (said in a comment line of the output).
# Output: "tr.alpha_us", "tr.beta_ns_per_B", "tr.gamma_ns_per_B" lines.

BEGIN {
	if (n + 0 < 2) { print "fit_link.awk: need -v n=RANKS >= 2" > "/dev/stderr"; bad = 1; exit 1 }
	if (minbytes == "") minbytes = 65536
	file = 0
}

FNR == 1 { file++; cb[file] = 1; ct[file] = 5 }

# the column header is the comment line whose first word is "bytes" or
# "size" (other comment lines, e.g. ibc_bench's "# columns : time = ...",
# are skipped)
/^#/ && ($2 == "bytes" || $2 == "size") {
	for (i = 2; i <= NF; i++) {
		if ($i == "bytes" || $i == "size") cb[file] = i - 1
		if ($i == "time_us" || $i == "time") ct[file] = i - 1
	}
	next
}

/^#/ { next }

NF >= 2 && $(cb[file]) ~ /^[0-9]+$/ && $(ct[file]) ~ /^[0-9.eE+-]+$/ {
	x = $(cb[file]) + 0; y = $(ct[file]) + 0
	if (file == 1 && (!(1 in tmin_n) || x < xmin)) { xmin = x; tmin = y; tmin_n[1] = 1 }
	if (x < minbytes) next
	sn[file]++; sx[file] += x; sy[file] += y; sxx[file] += x * x; sxy[file] += x * y
}

function slope(f,   d) {
	d = sn[f] * sxx[f] - sx[f] * sx[f]
	return d > 0 ? (sn[f] * sxy[f] - sx[f] * sy[f]) / d : -1
}

END {
	if (bad) exit 1
	if (sn[1] < 2 || !(1 in tmin_n)) {
		print "fit_link.awk: fewer than 2 all-reduce sizes >= " minbytes " bytes" > "/dev/stderr"
		exit 1
	}
	f = (n - 1) / n
	bar = slope(1)             # us per byte
	alpha = tmin / (2 * (n - 1))
	if (file >= 2 && sn[2] >= 2) {
		beta = slope(2) / f
		gamma = (bar - 2 * f * beta) / f
		note = "beta from all-gather, gamma from the all-reduce slope"
		if (gamma < 0) { gamma = 0; note = note "; gamma < 0 from noise, set to 0" }
	} else {
		beta = bar / (2 * f)
		gamma = 0
		note = "no all-gather data: gamma = 0, beta includes the reduction"
	}
	if (!(beta > 0)) {
		print "fit_link.awk: non-positive bandwidth term; data too noisy" > "/dev/stderr"
		exit 1
	}
	printf "# %s: fit at %d ranks, %d all-reduce sizes >= %d bytes; %s\n", tr, n, sn[1], minbytes, note
	printf "%s.alpha_us %.6g\n", tr, alpha
	printf "%s.beta_ns_per_B %.6g\n", tr, beta * 1000
	printf "%s.gamma_ns_per_B %.6g\n", tr, gamma * 1000
}
