/* SPDX-License-Identifier: MIT */
/*
 * check.h - the fixed family of check macros that leave a function on an
 * error (STYLE C4), and IBC_ASSERT for internal invariants (debug builds).
 */
#ifndef IBC_CHECK_H
#define IBC_CHECK_H

#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "ibcoll.h"

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

#endif /* IBC_CHECK_H */
