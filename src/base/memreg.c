/* SPDX-License-Identifier: MIT */
/*
 * memreg.c - see memreg.h. A fixed table under one mutex: allocations are
 * few and long-lived (a trainer's parameter and gradient buffers).
 */
#include "config.h"

#include <pthread.h>
#include <unistd.h>

#include "base/memreg.h"

struct memreg_ent {
	uintptr_t start;
	uintptr_t end;
	int fd;         /* memfd the pages are mapped from, or -1 */
	uint64_t id;    /* memfd allocations: unique in this process */
};

static struct memreg_ent ents[IBC_MEMREG_MAX];
static int nents;
static pthread_mutex_t memreg_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*release_fn)(const void *addr, size_t nbytes);
static uint64_t next_id = 1;

int ibc_memreg_add_fd(void *p, size_t nbytes, int fd)
{
	int ret = -1;

	pthread_mutex_lock(&memreg_lock);
	if (nents < IBC_MEMREG_MAX) {
		ents[nents].start = (uintptr_t)p;
		ents[nents].end = (uintptr_t)p + nbytes;
		ents[nents].fd = fd;
		ents[nents].id = fd >= 0 ? next_id++ : 0;
		nents++;
		ret = 0;
	}
	pthread_mutex_unlock(&memreg_lock);
	return ret;
}

int ibc_memreg_nfd(void)
{
	int n = 0;
	int i;

	pthread_mutex_lock(&memreg_lock);
	for (i = 0; i < nents; i++)
		n += ents[i].fd >= 0;
	pthread_mutex_unlock(&memreg_lock);
	return n;
}

int ibc_memreg_add(void *p, size_t nbytes)
{
	return ibc_memreg_add_fd(p, nbytes, -1);
}

int ibc_memreg_remove(void *p, size_t *nbytes_p)
{
	void (*fn)(const void *, size_t);
	size_t n = 0;
	int found = 0;
	int fd = -1;
	int i;

	pthread_mutex_lock(&memreg_lock);
	for (i = 0; i < nents; i++) {
		if (ents[i].start == (uintptr_t)p) {
			n = (size_t)(ents[i].end - ents[i].start);
			fd = ents[i].fd;
			ents[i] = ents[--nents];
			found = 1;
			break;
		}
	}
	fn = release_fn;
	pthread_mutex_unlock(&memreg_lock);
	if (!found)
		return -1;
	if (fd >= 0)
		close(fd); /* the mapping keeps the pages until the caller unmaps it */
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

int ibc_memreg_find_fd(uintptr_t a, size_t nbytes, uintptr_t *start_p, size_t *len_p, int *fd_p,
		       uint64_t *id_p)
{
	uintptr_t b = a + (nbytes ? nbytes : 1);
	int found = 0;
	int i;

	pthread_mutex_lock(&memreg_lock);
	for (i = 0; i < nents; i++) {
		if (ents[i].fd >= 0 && ents[i].start <= a && b <= ents[i].end) {
			*start_p = ents[i].start;
			*len_p = (size_t)(ents[i].end - ents[i].start);
			*fd_p = ents[i].fd;
			*id_p = ents[i].id;
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
