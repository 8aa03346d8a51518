#!/bin/sh
# SPDX-License-Identifier: MIT
# install-deps.sh - install the Debian 12 packages ibcoll needs to build, test
# and run its demo. Idempotent and quiet when everything is present; needs
# root (or sudo) only when something is missing.
#
# Test tools beyond the build: valgrind (tests/reliability/test_valgrind),
# clang + libclang-rt-14-dev (libFuzzer for tests/fuzz/run_fuzz.sh), python3
# (free ports and the JSON check in bench/tests), libucx-dev (the header of
# UCX's memory hooks, libucm, for the verbs registration cache), gnuplot-nox (bench/plot.sh,
# trainer plots), iproute2 (ss: free ports), openmpi-bin (mpirun launcher
# groups), mpich + libmpich-dev (bench/peers.sh's MPICH column; Debian keeps
# Open MPI the default mpicc and mpirun, alternatives priority 50 against 40), iperf3
# (bench/tcp_vs_iperf3.sh's loopback reference), nodejs (tokenizer), python3-torch + libtorch-dev + pybind11-dev
# (bindings/torch and tests/torch; only where Debian has them for this
# architecture). Without them those tests SKIP.
#
# usage: scripts/install-deps.sh [--vm]
#   --vm   also the Soft-RoCE VM test packages (qemu, Debian kernel, busybox)
set -eu

pkgs="autoconf automake libtool pkg-config make gcc libc6-dev libssl-dev
      rdma-core libibverbs-dev librdmacm-dev ibverbs-providers ibverbs-utils rdmacm-utils perftest
      libhwloc-dev hwloc openmpi-bin libopenmpi-dev mpich libmpich-dev libucx-dev
      fortunes jargon-text gnuplot-nox xz-utils file procps iproute2 kmod
      valgrind clang libclang-rt-14-dev python3 iperf3"
[ "${1:-}" = "--vm" ] && pkgs="$pkgs qemu-system-x86 linux-image-amd64 busybox-static cpio"

missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node.js for the tokenizer (trainer/prepro): images that ship their own node
# must not get Debian's npm (it conflicts), so only add it where node is missing.
if ! command -v node >/dev/null 2>&1; then
	missing="$missing nodejs npm"
fi
# The torch backend: Debian builds python3-torch for a few architectures
# only, so these are asked for only where the package lists have them
# (looked at again after apt-get update below).
torch_pkgs="g++ python3-torch libtorch-dev pybind11-dev"
torch_missing=
for p in $torch_pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		torch_missing="$torch_missing $p"
done
[ -z "$missing" ] && [ -z "$torch_missing" ] && exit 0

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if [ -n "$torch_missing" ] && apt-cache show python3-torch >/dev/null 2>&1; then
	missing="$missing$torch_missing"
fi
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
