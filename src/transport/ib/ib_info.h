/* SPDX-License-Identifier: MIT */
/*
 * ib_info.h - what tools/ibc_info needs from the verbs transport; free of
 * verbs headers so that it also serves builds without verbs (ib_stub.c).
 */
#ifndef IBC_IB_INFO_H
#define IBC_IB_INFO_H

#include <stdio.h>

/*
 * ibc_ib_print_devices() - list the verbs devices, their ports (state, link
 * layer, MTU, LID, speed) and GID tables with types on @out; without verbs
 * support, one line saying so. Used by `ibc_info --devices`.
 */
void ibc_ib_print_devices(FILE *out);

/*
 * ibc_ib_print_reg_policy() - one line on @out: whether memory-release
 * hooks (UCX's libucm) are in force for the verbs registration cache, and
 * so how many idle user registrations IBC_IB_REG_CACHE_BYTES keeps. Loads
 * libucm when hooks are enabled. Used by `ibc_info --build` and `--devices`.
 */
void ibc_ib_print_reg_policy(FILE *out);

#endif /* IBC_IB_INFO_H */
