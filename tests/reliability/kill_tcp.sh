#!/bin/sh
# SPDX-License-Identifier: MIT
# kill_tcp.sh - test_kill kill tcp (see test_kill.c); TAP on stdout.
exec "${top_builddir:-.}/tests/reliability/test_kill" kill tcp
