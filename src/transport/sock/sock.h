/* SPDX-License-Identifier: MIT */
/*
 * sock.h - the tcp transport (sock_ops.c). Its only export is ibc_sock_ops
 * (declared in transport/transport.h); this header holds nothing else so
 * that coll/ and core/ never depend on the transport's internals.
 */
#ifndef IBC_SOCK_H
#define IBC_SOCK_H

#include "transport/transport.h"

#endif /* IBC_SOCK_H */
