#!/bin/sh
# SPDX-License-Identifier: MIT
# mismatch_tcp5.sh - test_mismatch 5 tcp (see test_mismatch.c): mismatched
# first calls on 5 ranks over tcp, where the tuner's start-up exchanges run
# inside the first call and ranks may still be creating the communicator; TAP.
exec "${top_builddir:-.}/tests/reliability/test_mismatch" 5 tcp
