#!/bin/sh
# SPDX-License-Identifier: MIT
# test_tree_coll_tcp.sh - every algorithm forced on 1..8 ranks over tcp (simple only: tcp
# has no LL path, so LL groups would repeat the simple path)
# (tests/tree/test_tree_coll.c); its own test so the two transports run in parallel.
exec "$top_builddir/tests/tree/test_tree_coll" tcp
