#!/bin/sh
# SPDX-License-Identifier: MIT
# test_nccl_ranks.sh - tests/nccl/nccl_check: libibcoll_nccl.so as a
# program linked against libnccl.so.2 sees it, found through LD_LIBRARY_PATH
# as under a trainer, on 1-4 forked ranks over shm and 2-3 over tcp (24
# cases each). Without a GPU the library runs in host mode (host buffers,
# NULL stream); with one, in stream mode on device buffers. Every wait is
# bounded: IBC_TIMEOUT_MS and IBC_BOOTSTRAP_TIMEOUT_MS 20 s, 300 s per run.
b=$top_builddir
LD_LIBRARY_PATH="$b/bindings/nccl:$b/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
IBC_TIMEOUT_MS=${IBC_TIMEOUT_MS:-20000}
IBC_BOOTSTRAP_TIMEOUT_MS=${IBC_BOOTSTRAP_TIMEOUT_MS:-20000}
export LD_LIBRARY_PATH IBC_TIMEOUT_MS IBC_BOOTSTRAP_TIMEOUT_MS
exec "$b/tests/nccl/nccl_check" -t 300 "$@"
