/* SPDX-License-Identifier: MIT */
/*
 * memreg.h - the memory ibc_mem_alloc() handed out, so that a transport
 * can register a whole allocation once and keep it, and be told when
 * ibc_mem_free() returns it (no memory hooks needed for this memory).
 */
#ifndef IBC_BASE_MEMREG_H
#define IBC_BASE_MEMREG_H

#include <stddef.h>
#include <stdint.h>

#define IBC_MEMREG_MAX 4096 /* live recorded allocations per process (ibc_mem_alloc, scratch) */

/* ibc_memreg_add() - record [@p, @p + @nbytes); 0, or -1 when the table is full */
int ibc_memreg_add(void *p, size_t nbytes);

/*
 * ibc_memreg_add_fd() - ibc_memreg_add() for memory mapped from the memfd
 * @fd (MAP_SHARED, whole file from offset 0), which the table then owns:
 * ibc_memreg_remove() closes it. Local peers may map the same pages
 * through /proc/<pid>/fd/<fd> (the shm all-reduce's direct path). Each
 * such allocation gets an id never used again in this process.
 */
int ibc_memreg_add_fd(void *p, size_t nbytes, int fd);

/* ibc_memreg_nfd() - live allocations recorded with a memfd (each holds a descriptor) */
int ibc_memreg_nfd(void);

/*
 * ibc_memreg_find_fd() - the memfd allocation that contains
 * [@a, @a + @nbytes): its start, length, fd and id.
 * Return: 1 when found, 0 when not (also for memory without a memfd).
 */
int ibc_memreg_find_fd(uintptr_t a, size_t nbytes, uintptr_t *start_p, size_t *len_p, int *fd_p,
		       uint64_t *id_p);

/*
 * ibc_memreg_remove() - forget the allocation that starts at @p and tell
 * the release listener (before the caller unmaps it); closes its memfd.
 * @nbytes_p: [out] its length. Return: 0, or -1 when @p starts none.
 */
int ibc_memreg_remove(void *p, size_t *nbytes_p);

/*
 * ibc_memreg_find() - the allocation that contains [@a, @a + @nbytes), as
 * [*@start_p, *@end_p). Return: 1 when found, 0 when not.
 */
int ibc_memreg_find(uintptr_t a, size_t nbytes, uintptr_t *start_p, uintptr_t *end_p);

/*
 * ibc_memreg_on_release() - the function ibc_memreg_remove() calls with the
 * range of the allocation going away (one listener per process: the verbs
 * transport's registration slots). Threading: any thread.
 */
void ibc_memreg_on_release(void (*fn)(const void *addr, size_t nbytes));

#endif /* IBC_BASE_MEMREG_H */
