/* SPDX-License-Identifier: MIT */
/*
 * Layer base (src/base/, the bottom of docs/design.md's table): status and
 * enum names, logging, parameters, allocation, faults, sockets, the wire
 * codec, the collective kinds; it includes nothing of the other layers.
 *
 * util.h - small arithmetic helpers, the CPU pause hint and monotonic time.
 * Depends on nothing of ibcoll's: every layer may include it.
 */
#ifndef IBC_UTIL_H
#define IBC_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define IBC_LIKELY(x)   __builtin_expect(!!(x), 1)
#define IBC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define IBC_MIN(a, b)   ((a) < (b) ? (a) : (b))
#define IBC_MAX(a, b)   ((a) > (b) ? (a) : (b))
#define IBC_DIV_UP(a, b) (((a) + (b) - 1) / (b))
#define IBC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define IBC_ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define IBC_HIDDEN __attribute__((visibility("hidden")))

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

/*
 * CLOCK_MONOTONIC_COARSE: the time of the last scheduler tick (1-4 ms
 * resolution), 8 ns a read where CLOCK_MONOTONIC costs 28 ns in this VM;
 * for rate limits on the call path, never for timing a call.
 */
static inline uint64_t ibc_time_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ibc_time_ms(void)
{
	return ibc_time_ns() / 1000000ull;
}

#endif /* IBC_UTIL_H */
