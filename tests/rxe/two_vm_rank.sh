#!/bin/bash
# SPDX-License-Identifier: MIT
# two_vm_rank.sh RANK - one rank of the two-VM test, run INSIDE a VM started
# by tests/rxe/two_vm.sh: a 2-rank all-reduce between the two VMs, with the
# transport chosen automatically (IBC_TRANSPORT=auto: ranks on different
# hosts that both have a usable device use verbs; the test requires "ib"),
# on rxe_eth (RoCE v2 over the qemu socket network), bootstrap on eth0. Bounded: the bootstrap retries for at most
# IBC_BOOTSTRAP_TIMEOUT_MS while the other VM boots.
set -u
r=$1
export IBC_RANK=$r IBC_NRANKS=2 IBC_ROOT=198.51.100.11:29500 IBC_SECRET=$TWO_VM_SECRET
export IBC_SOCKET_IFNAME=eth0 IBC_IB_HCA==rxe_eth IBC_TRANSPORT=auto IBC_TEST_EXPECT_TRANSPORT=ib
export IBC_TEST_COUNT=${TWO_VM_COUNT:-4096} IBC_BOOTSTRAP_TIMEOUT_MS=240000
export IBC_DEBUG=INFO IBC_DEBUG_SUBSYS=INIT,IB
echo "# rank $r: $(ip -4 -o addr show dev eth0 | awk '{print $4}'), $(cat /sys/class/infiniband/rxe_eth/ports/1/gids/1 2>/dev/null)"
exec timeout 300 tests/ib/test_ib_comm once
