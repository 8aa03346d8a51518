/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - allocation wrappers: each failure is logged once with what was
 * being allocated, and IBC_FAULT_INJECT=alloc:N makes the N-th one fail.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>

#include "base/alloc.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"

void *ibc_malloc(size_t nbytes, const char *what)
{
	void *p;

	if (ibc_fault_hit(IBC_FAULT_ALLOC, what))
		p = NULL;
	else
		p = malloc(nbytes ? nbytes : 1);
	if (!p)
		IBC_LOG_ERROR(MEM, "cannot allocate %zu bytes for %s", nbytes, what);
	return p;
}

void *ibc_calloc(size_t n, size_t size, const char *what)
{
	void *p;

	if (ibc_fault_hit(IBC_FAULT_ALLOC, what))
		p = NULL;
	else
		p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		IBC_LOG_ERROR(MEM, "cannot allocate %zu x %zu bytes for %s", n, size, what);
	return p;
}

void *ibc_aligned_alloc(size_t align, size_t nbytes, const char *what)
{
	void *p = NULL;
	int ret;

	if (ibc_fault_hit(IBC_FAULT_ALLOC, what)) {
		ret = ENOMEM;
	} else {
		ret = posix_memalign(&p, align, nbytes ? nbytes : align);
	}
	if (ret) {
		IBC_LOG_ERROR(MEM, "cannot allocate %zu bytes aligned to %zu for %s: %s", nbytes, align,
			      what, strerror(ret));
		return NULL;
	}
	return p;
}

char *ibc_strdup(const char *s, const char *what)
{
	size_t n = strlen(s) + 1;
	char *p = ibc_malloc(n, what);

	if (p)
		memcpy(p, s, n);
	return p;
}

void ibc_free(void *p)
{
	free(p);
}
