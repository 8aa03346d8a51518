/* SPDX-License-Identifier: MIT */
/*
 * status.c - status strings, version, dtype and op names and sizes, OS
 * randomness. Relies on util.h only.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/check.h"
#include "base/log.h"
#include "base/status.h"

const char *ibc_status_str(ibc_status_t st)
{
	switch (st) {
	case IBC_OK:                return "success";
	case IBC_INPROGRESS:        return "in progress";
	case IBC_ERR_INVALID_ARG:   return "invalid argument";
	case IBC_ERR_INVALID_USAGE: return "invalid usage";
	case IBC_ERR_NO_MEMORY:     return "out of memory";
	case IBC_ERR_SYSTEM:        return "system call failed";
	case IBC_ERR_VERBS:         return "verbs error";
	case IBC_ERR_CUDA:          return "CUDA error";
	case IBC_ERR_REMOTE:        return "remote peer failed";
	case IBC_ERR_TIMEOUT:       return "timed out";
	case IBC_ERR_UNSUPPORTED:   return "unsupported";
	case IBC_ERR_INTERNAL:      return "internal error";
	case IBC_ERR_LIMIT:         return "limit reached";
	case IBC_ERR_REVOKED:       return "communicator revoked";
	default:                    return "unknown status";
	}
}

ibc_status_t ibc_get_version(int *version_p)
{
	if (!version_p) {
		IBC_LOG_WARN(INIT, "ibc_get_version: version_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	*version_p = IBC_VERSION_CODE;
	return IBC_OK;
}

static const size_t dtype_nbytes[IBC_DTYPE_COUNT] = {
	[IBC_INT8] = 1,    [IBC_UINT8] = 1,    [IBC_INT32] = 4,   [IBC_UINT32] = 4,
	[IBC_INT64] = 8,   [IBC_UINT64] = 8,   [IBC_FLOAT16] = 2, [IBC_BFLOAT16] = 2,
	[IBC_FLOAT32] = 4, [IBC_FLOAT64] = 8,
};

ibc_status_t ibc_dtype_size(ibc_dtype_t dtype, size_t *nbytes_p)
{
	if (!nbytes_p) {
		IBC_LOG_WARN(INIT, "ibc_dtype_size: nbytes_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	if ((unsigned)dtype >= IBC_DTYPE_COUNT) {
		IBC_LOG_WARN(INIT, "ibc_dtype_size: unknown dtype %d", (int)dtype);
		return IBC_ERR_INVALID_ARG;
	}
	*nbytes_p = dtype_nbytes[dtype];
	return IBC_OK;
}

const char *ibc_dtype_name(ibc_dtype_t dtype)
{
	static const char *const names[IBC_DTYPE_COUNT] = {
		"int8", "uint8", "int32", "uint32", "int64", "uint64",
		"float16", "bfloat16", "float32", "float64",
	};

	return (unsigned)dtype < IBC_DTYPE_COUNT ? names[dtype] : "invalid-dtype";
}

const char *ibc_redop_name(ibc_redop_t op)
{
	static const char *const names[IBC_REDOP_COUNT] = { "sum", "prod", "min", "max", "avg" };

	return (unsigned)op < IBC_REDOP_COUNT ? names[op] : "invalid-op";
}

int ibc_name_lookup(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

ibc_status_t ibc_random_bytes(void *buf, size_t nbytes)
{
	unsigned char *p = buf;

	while (nbytes) {
		ssize_t n = getrandom(p, nbytes, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			IBC_LOG_ERROR(INIT, "getrandom(%zu bytes) failed: %s", nbytes, strerror(errno));
			return IBC_ERR_SYSTEM;
		}
		p += n;
		nbytes -= (size_t)n;
	}
	return IBC_OK;
}

void ibc_assert_fail(const char *cond, const char *file, int line)
{
	/* debug builds only (--enable-debug): an internal invariant is broken */
	fprintf(stderr, "ibcoll: assertion '%s' failed at %s:%d\n", cond, file, line);
	abort();
}
