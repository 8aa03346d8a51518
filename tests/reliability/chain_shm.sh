#!/bin/sh
# SPDX-License-Identifier: MIT
# chain_shm.sh - test_kill chain shm (see test_kill.c); TAP on stdout.
exec "${top_builddir:-.}/tests/reliability/test_kill" chain shm
