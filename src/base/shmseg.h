/* SPDX-License-Identifier: MIT */
/*
 * shmseg.h - /dev/shm segments (shmseg.c): mapped reserved and populated,
 * and the room a new one may take. Used by the shm transport and the shm
 * all-reduce.
 */
#ifndef IBC_SHMSEG_H
#define IBC_SHMSEG_H

#include <stddef.h>

void *ibc_shm_map(int fd, size_t size, int create, char *err, size_t err_len);
size_t ibc_shm_budget(int nlocal, char *why, size_t why_len);
void ibc_shm_note_nlocal(int nlocal);
int ibc_shm_optional_fits(size_t size, int nlocal, char *why, size_t why_len);
void ibc_shm_seg_name(char *buf, size_t len, const char *what);
void ibc_shm_sweep_stale(void);

#endif /* IBC_SHMSEG_H */
