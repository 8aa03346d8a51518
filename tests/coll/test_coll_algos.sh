#!/bin/sh
# SPDX-License-Identifier: MIT
# test_coll_algos.sh - the collective matrix with the algorithm (IBC_ALGO=ring,
# tree, rd, rabenseifner) or protocol (IBC_PROTO=simple, ll) forced, on 3, 5,
# 7 and 8 ranks over shm and tcp: tests/coll/test_coll_matrix.sh's "algos"
# group set (see its header). A separate test so that it has its own time
# limit and runs beside the core matrix under make -j.
srcdir=${top_srcdir:-.}
exec sh "$srcdir/tests/coll/test_coll_matrix.sh" algos
