#!/bin/sh
# SPDX-License-Identifier: MIT
# test_tree_coll_shm.sh - every algorithm and protocol forced on 1..8 ranks over shm
# (tests/tree/test_tree_coll.c); its own test so the two transports run in parallel.
exec "$top_builddir/tests/tree/test_tree_coll" shm
