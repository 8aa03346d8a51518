/* SPDX-License-Identifier: MIT */
/*
 * shm.h - the shm transport (shm_ops.c). Its only export is ibc_shm_ops
 * (declared in transport/transport.h).
 */
#ifndef IBC_SHM_H
#define IBC_SHM_H

#include "transport/transport.h"

#endif /* IBC_SHM_H */
