/* SPDX-License-Identifier: MIT */
/*
 * util.h - the fixed family of check macros (STYLE C4), monotonic time,
 * small arithmetic helpers and the allocation wrappers (alloc.c) that the
 * fault injector (fault.c) can make fail. Included by every library file.
 */
#ifndef IBC_UTIL_H
#define IBC_UTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "ibcoll.h"

#define IBC_LIKELY(x)   __builtin_expect(!!(x), 1)
#define IBC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define IBC_MIN(a, b)   ((a) < (b) ? (a) : (b))
#define IBC_MAX(a, b)   ((a) > (b) ? (a) : (b))
#define IBC_DIV_UP(a, b) (((a) + (b) - 1) / (b))
#define IBC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define IBC_ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define IBC_HIDDEN __attribute__((visibility("hidden")))

/* Propagation breadcrumb: DEBUG only, the detector has logged the cause. */
#define IBC_TRACE_STATUS(st)                                                           \
	IBC_LOG_DEBUG(INIT, "%s:%d -> %s", __func__, __LINE__, ibc_status_str(st))

/* IBC_CHECK(expr): return a non-OK status from the enclosing function. */
#define IBC_CHECK(expr)                                                                \
	do {                                                                           \
		ibc_status_t ibc_check_st_ = (expr);                                   \
		if (IBC_UNLIKELY(ibc_check_st_ != IBC_OK)) {                           \
			IBC_TRACE_STATUS(ibc_check_st_);                               \
			return ibc_check_st_;                                          \
		}                                                                      \
	} while (0)

/* IBC_CHECK_GOTO(expr, st, label): store a non-OK status in st, jump to label. */
#define IBC_CHECK_GOTO(expr, st, label)                                                \
	do {                                                                           \
		(st) = (expr);                                                         \
		if (IBC_UNLIKELY((st) != IBC_OK)) {                                    \
			IBC_TRACE_STATUS(st);                                          \
			goto label;                                                    \
		}                                                                      \
	} while (0)

/* IBC_SYS_CHECK_GOTO(call, st, label): for -1+errno calls; retries EINTR. */
#define IBC_SYS_CHECK_GOTO(call, st, label)                                            \
	do {                                                                           \
		int ibc_sys_ret_;                                                      \
		do {                                                                   \
			ibc_sys_ret_ = (call);                                         \
		} while (ibc_sys_ret_ == -1 && errno == EINTR);                        \
		if (IBC_UNLIKELY(ibc_sys_ret_ == -1)) {                                \
			IBC_LOG_WARN(INIT, "%s failed: %s", #call, strerror(errno));   \
			(st) = IBC_ERR_SYSTEM;                                         \
			goto label;                                                    \
		}                                                                      \
	} while (0)

/* IBC_VERBS_CHECK_GOTO(call, st, label): for verbs calls returning an errno. */
#define IBC_VERBS_CHECK_GOTO(call, st, label)                                          \
	do {                                                                           \
		int ibc_verbs_ret_ = (call);                                           \
		if (IBC_UNLIKELY(ibc_verbs_ret_ != 0)) {                               \
			IBC_LOG_WARN(IB, "%s failed: %s", #call,                       \
				     strerror(ibc_verbs_ret_ > 0 ? ibc_verbs_ret_ : errno)); \
			(st) = IBC_ERR_VERBS;                                          \
			goto label;                                                    \
		}                                                                      \
	} while (0)

/* IBC_CHECK_IGNORE(expr, st): teardown; keep the first error, carry on. */
#define IBC_CHECK_IGNORE(expr, st)                                                     \
	do {                                                                           \
		ibc_status_t ibc_ign_st_ = (expr);                                     \
		if (ibc_ign_st_ != IBC_OK && (st) == IBC_OK)                           \
			(st) = ibc_ign_st_;                                            \
	} while (0)

#ifdef IBC_DEBUG_BUILD
#define IBC_ASSERT(cond)                                                               \
	do {                                                                           \
		if (IBC_UNLIKELY(!(cond)))                                             \
			ibc_assert_fail(#cond, __FILE__, __LINE__);                    \
	} while (0)
#else
#define IBC_ASSERT(cond) do { } while (0)
#endif
void ibc_assert_fail(const char *cond, const char *file, int line) __attribute__((noreturn));

static inline void ibc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

static inline uint64_t ibc_time_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ibc_time_ms(void)
{
	return ibc_time_ns() / 1000000ull;
}

/* Allocation wrappers (alloc.c): log the failure and honour IBC_FAULT_INJECT=alloc:N. */
void *ibc_malloc(size_t nbytes, const char *what);
void *ibc_calloc(size_t n, size_t size, const char *what);
void *ibc_aligned_alloc(size_t align, size_t nbytes, const char *what);
char *ibc_strdup(const char *s, const char *what);
void ibc_free(void *p);

/* alloc.c: map a /dev/shm segment, reserved (creator) and populated; a new one's room */
void *ibc_shm_map(int fd, size_t size, int create, char *err, size_t err_len);
size_t ibc_shm_budget(int nlocal, char *why, size_t why_len);
void ibc_shm_note_nlocal(int nlocal);
int ibc_shm_optional_fits(size_t size, int nlocal, char *why, size_t why_len);

/* fault.c: IBC_FAULT_INJECT=<site>:<n> makes the n-th call at <site> fail. */
enum ibc_fault_site {
	IBC_FAULT_ALLOC = 0,
	IBC_FAULT_SOCK,
	IBC_FAULT_SHM,
	IBC_FAULT_VERBS,
	IBC_FAULT_REG,
	IBC_FAULT_CUDA,
	IBC_FAULT_SITE_COUNT
};
extern int ibc_fault_armed;
int ibc_fault_hit_slow(enum ibc_fault_site site, const char *what);
static inline int ibc_fault_hit(enum ibc_fault_site site, const char *what)
{
	if (IBC_LIKELY(!ibc_fault_armed))
		return 0;
	return ibc_fault_hit_slow(site, what);
}
/* parse "<site>:<n>"; exposed for unit tests */
int ibc_fault_parse(const char *spec, int *site_p, long *nth_p);
void ibc_fault_configure(void);
/* number of faults fired so far in this process (tests check one fired) */
long ibc_fault_fired_count(void);
const char *ibc_fault_site_name(int site);

/* "%s" text for the dtype/op/coll enums, used in log lines */
const char *ibc_dtype_name(ibc_dtype_t dtype);
const char *ibc_redop_name(ibc_redop_t op);

/* random bytes from the OS (getrandom); IBC_ERR_SYSTEM when it fails */
ibc_status_t ibc_random_bytes(void *buf, size_t nbytes);

#endif /* IBC_UTIL_H */
