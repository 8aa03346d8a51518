#!/bin/sh
# SPDX-License-Identifier: MIT
# chain_tcp.sh - test_kill chain tcp (see test_kill.c); TAP on stdout.
exec "${top_builddir:-.}/tests/reliability/test_kill" chain tcp
