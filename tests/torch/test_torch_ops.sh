#!/bin/sh
# SPDX-License-Identifier: MIT
# test_torch_ops.sh - every operation of the torch backend, exact values,
# every dtype, in place and out of place, at 1, 2, 3 and 4 ranks over shm
# and tcp, and rank 0 failing to create the communicator (tests/torch/ops_check.py;
# each configuration bounded by 120 s).
. "$top_srcdir/tests/torch/torch_env.sh"
exec "$py" "$here/ops_check.py" 1:shm 2:shm 3:shm 4:shm 1:tcp 2:tcp 3:tcp 4:tcp bootfail:
