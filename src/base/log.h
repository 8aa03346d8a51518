/* SPDX-License-Identifier: MIT */
/*
 * log.h - leveled logging with a 64-bit subsystem mask (NCCL's INFO/WARN
 * with UCX's message style). Configured once from IBC_DEBUG,
 * IBC_DEBUG_SUBSYS and IBC_DEBUG_FILE. Level and mask are tested before any
 * formatting. ERROR and WARN lines ignore the mask and are also kept for
 * ibc_last_error(). Line format:
 *   host:pid:tid [rank r] IBC LEVEL SUBSYS file:line msg
 * (file:line is dropped at INFO).
 */
#ifndef IBC_LOG_H
#define IBC_LOG_H

#include <stdarg.h>
#include <stdint.h>

enum ibc_log_level {
	IBC_LEVEL_NONE = 0,
	IBC_LEVEL_ERROR = 1,
	IBC_LEVEL_WARN = 2,
	IBC_LEVEL_INFO = 3,
	IBC_LEVEL_DEBUG = 4,
	IBC_LEVEL_TRACE = 5,
	IBC_LEVEL_COUNT
};

enum ibc_log_subsys {
#define IBC_SUBSYS_DEF(name, bit) IBC_SUBSYS_##name = (1ULL << (bit)),
#include "base/log_subsys.def"
#undef IBC_SUBSYS_DEF
	IBC_SUBSYS_ALL = ~0ULL
};

/* current configuration; read through ibc_log_enabled() */
extern int ibc_log_level_cur;
extern uint64_t ibc_log_mask_cur;
extern int ibc_log_configured;

void ibc_log_configure(void);

/* rank shown in log lines of the calling thread; -1 hides it */
void ibc_log_set_rank(int rank);
/*
 * ibc_log_set_rank_ctx() - the rank, and where it is not the job's own
 * numbering (a communicator from ibc_comm_split()) @ctx, e.g. "world rank
 * 7, communicator 3fa2b1c0": log lines then read "[rank 1, world rank 7,
 * communicator 3fa2b1c0]" and ibc_last_error() "rank 1 (world rank 7,
 * communicator 3fa2b1c0): ..."; "" or NULL for none.
 */
void ibc_log_set_rank_ctx(int rank, const char *ctx);
int ibc_log_get_rank(void);

static inline int ibc_log_enabled(int level, uint64_t subsys)
{
	if (__builtin_expect(!ibc_log_configured, 0))
		ibc_log_configure();
	if (level > ibc_log_level_cur)
		return 0;
	return level <= IBC_LEVEL_WARN || (subsys & ibc_log_mask_cur);
}

void ibc_log_emit(int level, uint64_t subsys, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* parsing helpers, exposed for unit tests */
int ibc_log_parse_level(const char *str, int *level_p);
int ibc_log_parse_subsys(const char *str, uint64_t *mask_p);
const char *ibc_log_level_name(int level);
const char *ibc_log_subsys_name(uint64_t subsys_bit);
/* expand %h (host) and %p (pid) in an IBC_DEBUG_FILE pattern */
int ibc_log_expand_path(const char *pattern, char *out, size_t out_len);

/* @text without the "rank R: " that ibc_last_error() puts in front of it */
const char *ibc_log_strip_rank(const char *text);
/*
 * The calling thread's last error without its "rank R: ", or "local error"
 * when it has none: the cause of a failure found on this side, for a text
 * that names its rank itself (bootstrap FAIL reports, the wait-for probe).
 */
const char *ibc_log_last_cause(void);

/* ibc_last_error() storage: set by ERROR/WARN lines and by request waits */
void ibc_log_set_last_error(const char *text);

/*
 * ERROR and WARN lines are always formatted: their text is what
 * ibc_last_error() returns, whether IBC_DEBUG prints them or not (NONE).
 */
#define IBC_LOG(level, subsys, ...)                                                    \
	do {                                                                           \
		if ((level) <= IBC_LEVEL_WARN || ibc_log_enabled((level), IBC_SUBSYS_##subsys)) \
			ibc_log_emit((level), IBC_SUBSYS_##subsys, __FILE__, __LINE__, \
				     __VA_ARGS__);                                     \
	} while (0)

#define IBC_LOG_ERROR(subsys, ...) IBC_LOG(IBC_LEVEL_ERROR, subsys, __VA_ARGS__)
#define IBC_LOG_WARN(subsys, ...)  IBC_LOG(IBC_LEVEL_WARN, subsys, __VA_ARGS__)
#define IBC_LOG_INFO(subsys, ...)  IBC_LOG(IBC_LEVEL_INFO, subsys, __VA_ARGS__)
#define IBC_LOG_DEBUG(subsys, ...) IBC_LOG(IBC_LEVEL_DEBUG, subsys, __VA_ARGS__)
#ifdef IBC_ENABLE_TRACE
#define IBC_LOG_TRACE(subsys, ...) IBC_LOG(IBC_LEVEL_TRACE, subsys, __VA_ARGS__)
#else
#define IBC_LOG_TRACE(subsys, ...) do { } while (0)
#endif

#endif /* IBC_LOG_H */
