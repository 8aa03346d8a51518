/* SPDX-License-Identifier: MIT */
/*
 * net_internal.h - what the net layer's files share: the answer to peers'
 * wait-for queries (net_fail.c), installed by ibc_net_setup().
 */
#ifndef IBC_NET_INTERNAL_H
#define IBC_NET_INTERNAL_H

#include <stdint.h>

#include "boot/bootstrap.h"

struct ibc_net;

/* bootstrap service thread: a peer asks what this rank is doing (never blocks) */
void ibc_net_wait_state(void *arg, int asker, struct ibc_boot_waitstate *ws);

/*
 * The /dev/shm locality probe (net_local.c), run by the transport choice
 * (net_setup.c): create this rank's segment; after a barrier, open every
 * same-host peer's, setting bit (local index of the peer) in @bits
 * (IBC_LOCAL_PROBE_MAX bits) for each that opened; unlink. @why keeps the
 * first failure's text for the log.
 */
#define IBC_LOCAL_PROBE_MAX 256 /* same-host ranks verified; beyond, shm is assumed */
struct ibc_local_probe {
	char name[64];
	int created;
	int ready;
	char why[256];
};
void ibc_net_local_probe_create(struct ibc_net *net, struct ibc_local_probe *p);
void ibc_net_local_probe_open(struct ibc_net *net, struct ibc_local_probe *p, uint8_t *bits);
void ibc_net_local_probe_destroy(struct ibc_local_probe *p);

#endif /* IBC_NET_INTERNAL_H */
