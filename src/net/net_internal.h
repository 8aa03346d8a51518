/* SPDX-License-Identifier: MIT */
/*
 * net_internal.h - what the net layer's files share: the answer to peers'
 * wait-for queries (net_fail.c), installed by ibc_net_setup().
 */
#ifndef IBC_NET_INTERNAL_H
#define IBC_NET_INTERNAL_H

#include "boot/bootstrap.h"

/* bootstrap service thread: a peer asks what this rank is doing (never blocks) */
void ibc_net_wait_state(void *arg, struct ibc_boot_waitstate *ws);

#endif /* IBC_NET_INTERNAL_H */
