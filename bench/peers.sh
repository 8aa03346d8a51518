#!/bin/sh
# SPDX-License-Identifier: MIT
# peers.sh - ibcoll against Open MPI, MPICH and Gloo, one timing method for
# all (bench/peer_bench.c: float32 sum, each call after the library's own
# barrier and timed alone, per rank the median, the slowest rank's median;
# bench/peer_gloo.py the same through PyTorch), the same sizes, rounds that
# alternate the libraries (the order rotates every round), and one table:
# the median over rounds per library and ibcoll's time / the fastest peer's.
# Results are checked exactly by every harness. ibcoll and Open MPI run in
# the build's bench/peer_bench under Open MPI's mpirun; MPICH in the same
# source compiled here with mpicc.mpich (Debian's mpich and libmpich-dev),
# launched by mpiexec.mpich, and only where ranks <= cores: MPICH's
# processes busy-poll, and with more ranks than cores they time the
# scheduler. Gloo has no shared-memory path (loopback TCP always) and no
# reduce_scatter in PyTorch 1.13. A library that is missing is a column of
# "-" with the reason at the end; the script fails only where a library
# that runs gives a wrong result or cannot start.
#
# usage: bench/peers.sh [-n "2 4 8"] [-c "allreduce allgather ..."] [-b BYTES]
#                       [-e BYTES] [-f N] [-i ITERS] [-w WARMUP] [-R ROUNDS]
#                       [-t shm|tcp] [-m] [-o DIR] [BUILD_DIR]
#   -n ranks (each count separately)            ["2 4"]
#   -c collectives                              [allreduce allgather reduce_scatter broadcast alltoall]
#   -b/-e/-f sizes from -b to -e, x -f           [8 / 64M / 8] (K, M, G: powers of 1024)
#   -i/-w timed calls and warm-up calls per size [20 / 5]
#   -R rounds                                   [3]
#   -t transport: shm (ibcoll shm, Open MPI vader, MPICH's default)
#      or tcp (ibcoll tcp, Open MPI btl tcp; MPICH "-": no switch to TCP within one host)
#   -m also ibcoll on ibc_mem_alloc() buffers (a trainer's registered memory;
#      on one host the shm collectives map them): two more columns, its
#      time and its ratio to the fastest peer
#   -o keep the raw figures in DIR              [a temporary directory]
# Prints uptime before and after: compare only runs on a quiet machine.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ranks="2 4"
colls="allreduce allgather reduce_scatter broadcast alltoall"
minb=8
maxb=64M
fac=8
iters=20
warm=5
rounds=3
tp=shm
out=
mem=
while getopts n:c:b:e:f:i:w:R:t:mo: opt; do
	case $opt in
	n) ranks=$OPTARG ;;
	c) colls=$OPTARG ;;
	b) minb=$OPTARG ;;
	e) maxb=$OPTARG ;;
	f) fac=$OPTARG ;;
	i) iters=$OPTARG ;;
	w) warm=$OPTARG ;;
	R) rounds=$OPTARG ;;
	t) tp=$OPTARG ;;
	o) out=$OPTARG ;;
	m) mem=1 ;;
	*) sed -n '/^# usage/,/^# Prints/p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
b=$(cd "${1:-$top/build}" 2>/dev/null && pwd) || { echo "peers.sh: no build directory ${1:-$top/build}" >&2; exit 2; }
case $tp in shm|tcp) ;; *) echo "peers.sh: -t $tp: shm or tcp" >&2; exit 2 ;; esac
bytes() {
	case $1 in
	*K) echo $((${1%K} * 1024)) ;;
	*M) echo $((${1%M} * 1048576)) ;;
	*G) echo $((${1%G} * 1073741824)) ;;
	*) echo "$1" ;;
	esac
}
minb=$(bytes "$minb")
maxb=$(bytes "$maxb")
usage_err() { echo "peers.sh: $*" >&2; exit 2; }
isnum() { case $1 in ''|*[!0-9]*) return 1 ;; esac; }
for v in "$minb" "$maxb" "$fac" "$iters" "$warm" "$rounds"; do
	isnum "$v" || usage_err "'$v' is not a whole number (sizes may end in K, M or G)"
done
[ "$minb" -ge 4 ] || usage_err "-b $minb: at least 4 bytes (one float)"
[ "$maxb" -ge "$minb" ] || usage_err "-e $maxb is smaller than -b $minb"
[ "$fac" -ge 2 ] || usage_err "-f $fac: the size must grow, at least 2"
[ "$iters" -ge 1 ] && [ "$rounds" -ge 1 ] || usage_err "-i and -R: at least 1"
for nr in $ranks; do
	isnum "$nr" && [ "$nr" -ge 2 ] || usage_err "-n $nr: rank counts of at least 2"
done
for c in $colls; do
	case $c in allreduce|allgather|reduce_scatter|broadcast|alltoall) ;;
	*) usage_err "-c $c: allreduce, allgather, reduce_scatter, broadcast or alltoall" ;;
	esac
done
if [ -n "$out" ]; then
	mkdir -p "$out" || exit 2
	tmp=$out
else
	tmp=$(mktemp -d) || exit 2
	trap 'rm -rf "$tmp"' EXIT
fi
# each library runs in the background and is waited for, so that INT and
# TERM (a user's Ctrl-C, an outer timeout) stop it instead of waiting for it
child=
trap '[ -n "$child" ] && kill "$child" 2>/dev/null; exit 130' INT TERM
cores=$(nproc)
notes=$tmp/notes
: > "$notes"
: > "$tmp/raw"
: > "$tmp/versions"

# what runs: each library's command prefix, or a reason in the notes
peer=$b/bench/peer_bench
if [ ! -x "$peer" ]; then
	echo "peers.sh: $peer not built (configure found no Open MPI)" >&2
	exit 2
fi
mpich=
if command -v mpicc.mpich >/dev/null 2>&1 && command -v mpiexec.mpich >/dev/null 2>&1; then
	if mpicc.mpich -O2 -o "$tmp/peer_bench_mpich" "$top/bench/peer_bench.c" 2>"$tmp/mpich_cc.log"; then
		mpich=$tmp/peer_bench_mpich
	else
		echo "mpich: mpicc.mpich failed: $(head -n 1 "$tmp/mpich_cc.log")" >> "$notes"
	fi
else
	echo "mpich: not installed (Debian: apt-get install mpich libmpich-dev)" >> "$notes"
fi
[ "$tp" = tcp ] && [ -n "$mpich" ] && { echo "mpich: -t tcp: no switch to TCP within one host" >> "$notes"; mpich=; }
py=/usr/bin/python3
gloo=
if "$py" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
	gloo=1
else
	echo "gloo: no torch.distributed with Gloo for $py (Debian: python3-torch)" >> "$notes"
fi
if [ "$tp" = shm ]; then
	ompi_mca="--mca pml ob1 --mca btl self,vader"
else
	ompi_mca="--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo"
fi

# one library's run: $1 library, $2 ranks, $3 collective; lines go to raw with the round
run_lib() {
	lib=$1 nr=$2 coll=$3
	log=$tmp/run.log
	case $lib in
	ibc|ibcmem)
		IBC_TRANSPORT=$tp IBC_TIMEOUT_MS=120000 timeout -k 5 900 \
			mpirun --allow-run-as-root --oversubscribe -n "$nr" $ompi_mca -x IBC_TRANSPORT \
			-x IBC_TIMEOUT_MS "$peer" "$lib" "$coll" "$minb" "$maxb" "$fac" "$iters" "$warm" > "$log" 2>&1 & ;;
	ompi)
		timeout -k 5 900 mpirun --allow-run-as-root --oversubscribe -n "$nr" $ompi_mca \
			"$peer" mpi "$coll" "$minb" "$maxb" "$fac" "$iters" "$warm" > "$log" 2>&1 & ;;
	mpich)
		[ -n "$mpich" ] || return 0
		[ "$nr" -le "$cores" ] || return 0
		timeout -k 5 900 mpiexec.mpich -n "$nr" "$mpich" mpi "$coll" "$minb" "$maxb" "$fac" \
			"$iters" "$warm" > "$log" 2>&1 & ;;
	gloo)
		[ -n "$gloo" ] || return 0
		[ "$coll" = reduce_scatter ] && return 0
		OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 timeout -k 5 900 \
			"$py" "$top/bench/peer_gloo.py" "$nr" "$coll" "$minb" "$maxb" "$fac" "$iters" "$warm" \
			> "$log" 2>&1 & ;;
	esac
	child=$!
	wait "$child"
	rc=$?
	child=
	if [ $rc != 0 ]; then
		echo "peers.sh: $lib $coll on $nr ranks failed (status $rc):" >&2
		tail -n 5 "$log" >&2
		return 1
	fi
	awk -v lib="$lib" -v nr="$nr" -v c="$coll" '($1 == "mpi" || $1 == "ibc" || $1 == "ibcmem" || $1 == "gloo") && $2 == c { print lib, nr, c, $3, $4 }' "$log" >> "$tmp/raw"
	grep '^# library' "$log" | sed "s/^# library [a-z]*:/$lib:/" | head -n 1 >> "$tmp/versions"
}

echo "# $(uptime)"
fail=0
libs="ibc ompi mpich gloo"
[ -n "$mem" ] && libs="$libs ibcmem"
for nr in $ranks; do
	[ "$nr" -le "$cores" ] || [ -z "$mpich" ] ||
		echo "mpich: not at $nr ranks on $cores cores (busy-polling ranks time the scheduler)" >> "$notes"
	for coll in $colls; do
		r=0
		while [ $r -lt "$rounds" ]; do
			# rotate the order: a slow moment of the machine falls on each in turn
			set -- $libs
			k=0
			while [ $k -lt $((r % $#)) ]; do
				first=$1
				shift
				set -- "$@" "$first"
				k=$((k + 1))
			done
			for lib in "$@"; do
				run_lib "$lib" "$nr" "$coll" || fail=1
			done
			r=$((r + 1))
		done
	done
done
echo "# $(uptime)"
sort -u "$tmp/versions" 2>/dev/null | sed 's/^/# /'
echo "# method: float32 sum, each call after a barrier, per-rank median of $iters calls ($warm warm-up), slowest rank; median of $rounds round(s); transport $tp; us"
echo "# ratio = ibcoll / the fastest peer that ran the size"
if [ -n "$mem" ]; then
	printf "%5s %-15s %12s %10s %10s %10s %10s %6s %10s %6s\n" ranks collective bytes ibcoll openmpi mpich gloo ratio ibc_mem ratio
else
	printf "%5s %-15s %12s %10s %10s %10s %10s %6s\n" ranks collective bytes ibcoll openmpi mpich gloo ratio
fi
awk '{ print $2, $3, $4 }' "$tmp/raw" | sort -u > "$tmp/keys"
sort -k1,1n -k2,2 -k3,3n "$tmp/keys" | while read -r nr coll sz; do
	line=$(awk -v nr="$nr" -v c="$coll" -v s="$sz" -v mem="$mem" '
	function med(s,   a, n, i, j, t) {
		n = split(s, a, " ")
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return a[int((n + 1) / 2)]
	}
	$2 == nr && $3 == c && $4 == s { v[$1] = v[$1] " " $5 }
	END {
		best = ""
		for (i = 1; i <= 4; i++) {
			l = i == 1 ? "ibc" : i == 2 ? "ompi" : i == 3 ? "mpich" : "gloo"
			m[l] = (l in v) ? med(v[l]) : ""
			if (l != "ibc" && m[l] != "" && (best == "" || m[l] + 0 < best + 0)) best = m[l]
		}
		printf "%5d %-15s %12d %10s %10s %10s %10s %6s", nr, c, s,
			m["ibc"] != "" ? m["ibc"] : "-", m["ompi"] != "" ? m["ompi"] : "-",
			m["mpich"] != "" ? m["mpich"] : "-", m["gloo"] != "" ? m["gloo"] : "-",
			(m["ibc"] != "" && best != "") ? sprintf("%.2f", m["ibc"] / best) : "-"
		if (mem != "") {
			mm = ("ibcmem" in v) ? med(v["ibcmem"]) : ""
			printf " %10s %6s", mm != "" ? mm : "-",
				(mm != "" && best != "") ? sprintf("%.2f", mm / best) : "-"
		}
		printf "\n"
	}' "$tmp/raw")
	echo "$line"
done
if [ -s "$notes" ]; then
	sort -u "$notes" | sed 's/^/# not run: /'
fi
exit $fail
