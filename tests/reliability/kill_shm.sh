#!/bin/sh
# SPDX-License-Identifier: MIT
# kill_shm.sh - test_kill kill shm (see test_kill.c); TAP on stdout.
exec "${top_builddir:-.}/tests/reliability/test_kill" kill shm
