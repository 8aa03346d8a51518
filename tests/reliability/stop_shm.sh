#!/bin/sh
# SPDX-License-Identifier: MIT
# stop_shm.sh - test_kill stop shm (see test_kill.c); TAP on stdout.
exec "${top_builddir:-.}/tests/reliability/test_kill" stop shm
