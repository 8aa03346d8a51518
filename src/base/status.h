/* SPDX-License-Identifier: MIT */
/*
 * status.h - names of the public enums for log lines, and random bytes
 * (status.c; ibc_status_str() itself is public, in ibcoll.h).
 */
#ifndef IBC_STATUS_H
#define IBC_STATUS_H

#include <stddef.h>

#include "ibcoll.h"

/* "%s" text for the dtype/op/coll enums, used in log lines */
const char *ibc_dtype_name(ibc_dtype_t dtype);
const char *ibc_redop_name(ibc_redop_t op);

/* the index of @s among the @n @names, or -1 (parsing of enum names) */
int ibc_name_lookup(const char *s, const char *const *names, int n);

/* random bytes from the OS (getrandom); IBC_ERR_SYSTEM when it fails */
ibc_status_t ibc_random_bytes(void *buf, size_t nbytes);

#endif /* IBC_STATUS_H */
