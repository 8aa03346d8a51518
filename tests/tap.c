/* SPDX-License-Identifier: MIT */
/* tap.c - implementation of tap.h (TAP version 13 subset). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static int tap_n;
static int tap_nfail;

static int tap_report(int cond, const char *file, int line, const char *fmt, va_list ap)
{
	tap_n++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	vprintf(fmt, ap);
	printf("\n");
	if (!cond) {
		tap_nfail++;
		printf("#   failed at %s:%d\n", file, line);
	}
	fflush(stdout);
	return cond;
}

int tap_ok_at(int cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = tap_report(cond, file, line, fmt, ap);
	va_end(ap);
	return r;
}

int tap_is_int_at(long long got, long long want, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = tap_report(got == want, file, line, fmt, ap);
	va_end(ap);
	if (!r)
		printf("#   got: %lld\n#  want: %lld\n", got, want);
	return r;
}

int tap_is_str_at(const char *got, const char *want, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int r;
	int eq = got && want ? strcmp(got, want) == 0 : got == want;

	va_start(ap, fmt);
	r = tap_report(eq, file, line, fmt, ap);
	va_end(ap);
	if (!r)
		printf("#   got: '%s'\n#  want: '%s'\n", got ? got : "(null)", want ? want : "(null)");
	return r;
}

void tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

void tap_skip_all(const char *fmt, ...)
{
	va_list ap;

	printf("1..0 # SKIP ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(0);
}

void tap_bail_out(const char *fmt, ...)
{
	va_list ap;

	printf("Bail out! ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

int tap_failed(void)
{
	return tap_nfail;
}

int tap_done(void)
{
	printf("1..%d\n", tap_n);
	if (tap_n == 0) {
		printf("# no checks ran: treated as a failure\n");
		return 1;
	}
	return tap_nfail ? 1 : 0;
}
