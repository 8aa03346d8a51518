#!/bin/sh
# SPDX-License-Identifier: MIT
# test_torch_kill.sh - a rank killed (SIGKILL, shm and tcp) or stopped
# (SIGSTOP) in the middle of DDP over ibcoll: every survivor raises naming
# it within the process group's timeout and exits non-zero, no hang
# (tests/torch/kill_check.py; each run bounded by 80 s).
. "$top_srcdir/tests/torch/torch_env.sh"
exec "$py" "$here/kill_check.py" 3:shm:KILL 3:tcp:KILL 3:shm:STOP
