/* SPDX-License-Identifier: MIT */
/*
 * memreg.c - see memreg.h. A fixed table under one mutex: allocations are
 * few and long-lived (a trainer's parameter and gradient buffers).
 */
#include "config.h"

#include <pthread.h>

#include "base/memreg.h"

struct memreg_ent {
	uintptr_t start;
	uintptr_t end;
};

static struct memreg_ent ents[IBC_MEMREG_MAX];
static int nents;
static pthread_mutex_t memreg_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*release_fn)(const void *addr, size_t nbytes);

int ibc_memreg_add(void *p, size_t nbytes)
{
	int ret = -1;

	pthread_mutex_lock(&memreg_lock);
	if (nents < IBC_MEMREG_MAX) {
		ents[nents].start = (uintptr_t)p;
		ents[nents].end = (uintptr_t)p + nbytes;
		nents++;
		ret = 0;
	}
	pthread_mutex_unlock(&memreg_lock);
	return ret;
}

int ibc_memreg_remove(void *p, size_t *nbytes_p)
{
	void (*fn)(const void *, size_t);
	size_t n = 0;
	int found = 0;
	int i;

	pthread_mutex_lock(&memreg_lock);
	for (i = 0; i < nents; i++) {
		if (ents[i].start == (uintptr_t)p) {
			n = (size_t)(ents[i].end - ents[i].start);
			ents[i] = ents[--nents];
			found = 1;
			break;
		}
	}
	fn = release_fn;
	pthread_mutex_unlock(&memreg_lock);
	if (!found)
		return -1;
	if (fn)
		fn(p, n);
	if (nbytes_p)
		*nbytes_p = n;
	return 0;
}

int ibc_memreg_find(uintptr_t a, size_t nbytes, uintptr_t *start_p, uintptr_t *end_p)
{
	uintptr_t b = a + (nbytes ? nbytes : 1);
	int found = 0;
	int i;

	pthread_mutex_lock(&memreg_lock);
	for (i = 0; i < nents; i++) {
		if (ents[i].start <= a && b <= ents[i].end) {
			*start_p = ents[i].start;
			*end_p = ents[i].end;
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&memreg_lock);
	return found;
}

void ibc_memreg_on_release(void (*fn)(const void *addr, size_t nbytes))
{
	pthread_mutex_lock(&memreg_lock);
	release_fn = fn;
	pthread_mutex_unlock(&memreg_lock);
}
