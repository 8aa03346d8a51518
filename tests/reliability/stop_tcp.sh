#!/bin/sh
# SPDX-License-Identifier: MIT
# stop_tcp.sh - test_kill stop tcp (see test_kill.c); TAP on stdout.
exec "${top_builddir:-.}/tests/reliability/test_kill" stop tcp
