#!/bin/sh
# SPDX-License-Identifier: MIT
# test_torch_ops.sh - every operation of the torch backend, exact values,
# every dtype, in place and out of place, at 1, 2, 3 and 4 ranks over shm
# and tcp, rank 0 failing to create the communicator, and a rank that never
# comes (the others raise within the group's timeout, or within
# IBC_BOOTSTRAP_TIMEOUT_MS where that is shorter), and no warning at
# destruction of an error an operation raised (tests/torch/ops_check.py;
# each configuration bounded by 120 s).
. "$top_srcdir/tests/torch/torch_env.sh"
exec "$py" "$here/ops_check.py" 1:shm 2:shm 3:shm 4:shm 1:tcp 2:tcp 3:tcp 4:tcp bootfail: missing: missing:boot reported:
