/* SPDX-License-Identifier: MIT */
/*
 * tenv.c - the transports' side of their environment (struct ibc_tenv):
 * the formatted failure report, and the device query of transports that
 * open none.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "transport/transport.h"

ibc_status_t ibc_tenv_fail(const struct ibc_tenv *env, ibc_status_t st, int peer,
			   const char *fmt, ...)
{
	char text[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return env->ops->fail(env->arg, st, peer, text);
}

const char *ibc_transport_no_device(void *ctx)
{
	(void)ctx;
	return "";
}
