/* SPDX-License-Identifier: MIT */
/*
 * alloc.h - allocation wrappers (alloc.c): each failure is logged once with
 * what was being allocated; IBC_FAULT_INJECT=alloc:N makes the N-th fail.
 */
#ifndef IBC_ALLOC_H
#define IBC_ALLOC_H

#include <stddef.h>

void *ibc_malloc(size_t nbytes, const char *what);
void *ibc_calloc(size_t n, size_t size, const char *what);
void *ibc_aligned_alloc(size_t align, size_t nbytes, const char *what);
char *ibc_strdup(const char *s, const char *what);
void ibc_free(void *p);

#endif /* IBC_ALLOC_H */
