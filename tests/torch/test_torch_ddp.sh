#!/bin/sh
# SPDX-License-Identifier: MIT
# test_torch_ddp.sh - DDP training of a tiny GPT over ibcoll and over Gloo
# from one seed at 2 and 4 ranks, under mp.spawn and under mpirun: equal
# losses within fp32 rounding, parameters bitwise equal across ranks
# (tests/torch/ddp_check.py; each run bounded by 180 s).
. "$top_srcdir/tests/torch/torch_env.sh"
exec "$py" "$here/ddp_check.py" spawn:2 spawn:4 mpirun:2 mpirun:4
