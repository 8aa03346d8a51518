/* SPDX-License-Identifier: MIT */
/*
 * tap.h - a small TAP producer for ibcoll's tests (Automake's tap-driver.sh
 * reads it). Each check prints "ok N - name" or "not ok N - name" plus
 * diagnostics, and tap_done() prints the plan and returns the exit status.
 *
 *   tap_ok(cond, "name %d", x);   tap_is_int(got, want, "name");
 *   tap_skip_all("no IB device"); (prints "1..0 # SKIP ...", exits 0)
 */
#ifndef IBC_TAP_H
#define IBC_TAP_H

#include <stdint.h>

int tap_ok_at(int cond, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int tap_is_int_at(long long got, long long want, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
int tap_is_str_at(const char *got, const char *want, const char *file, int line,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tap_skip_all(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void tap_bail_out(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
int tap_failed(void);
int tap_done(void);

#define tap_ok(cond, ...) tap_ok_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define tap_is_int(got, want, ...) \
	tap_is_int_at((long long)(got), (long long)(want), __FILE__, __LINE__, __VA_ARGS__)
#define tap_is_str(got, want, ...) tap_is_str_at((got), (want), __FILE__, __LINE__, __VA_ARGS__)

#endif /* IBC_TAP_H */
