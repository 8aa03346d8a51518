/* SPDX-License-Identifier: MIT */
/* test_status.c - status strings, version, dtype sizes and names. */
#include "config.h"

#include <string.h>

#include "base/status.h"
#include "base/util.h"
#include "tap.h"

int main(void)
{
	static const struct {
		ibc_status_t st;
		const char *str;
	} cases[] = {
		{ IBC_OK, "success" },
		{ IBC_INPROGRESS, "in progress" },
		{ IBC_ERR_INVALID_ARG, "invalid argument" },
		{ IBC_ERR_INVALID_USAGE, "invalid usage" },
		{ IBC_ERR_NO_MEMORY, "out of memory" },
		{ IBC_ERR_SYSTEM, "system call failed" },
		{ IBC_ERR_VERBS, "verbs error" },
		{ IBC_ERR_CUDA, "CUDA error" },
		{ IBC_ERR_REMOTE, "remote peer failed" },
		{ IBC_ERR_TIMEOUT, "timed out" },
		{ IBC_ERR_UNSUPPORTED, "unsupported" },
		{ IBC_ERR_INTERNAL, "internal error" },
		{ IBC_ERR_LIMIT, "limit reached" },
		{ IBC_ERR_REVOKED, "communicator revoked" },
	};
	static const size_t sizes[IBC_DTYPE_COUNT] = { 1, 1, 4, 4, 8, 8, 2, 2, 4, 8 };
	size_t i;
	size_t nbytes = 0;
	int version = 0;

	tap_is_int(IBC_STATUS_COUNT, IBC_ARRAY_SIZE(cases), "every status code has a test row");
	for (i = 0; i < IBC_ARRAY_SIZE(cases); i++)
		tap_is_str(ibc_status_str(cases[i].st), cases[i].str, "status %d -> '%s'",
			   (int)cases[i].st, cases[i].str);
	tap_is_str(ibc_status_str((ibc_status_t)42), "unknown status", "unknown code");
	tap_is_str(ibc_status_str((ibc_status_t)-13), "unknown status", "code just past the range");

	/* wire and ABI values are fixed */
	tap_is_int(IBC_OK, 0, "IBC_OK is 0");
	tap_is_int(IBC_ERR_INTERNAL, -10, "IBC_ERR_INTERNAL is -10");
	tap_is_int(IBC_ERR_REVOKED, -12, "IBC_ERR_REVOKED is -12");
	tap_is_int(IBC_FLOAT32, 8, "IBC_FLOAT32 is 8");
	tap_is_int(IBC_AVG, 4, "IBC_AVG is 4");

	tap_is_int(ibc_get_version(&version), IBC_OK, "ibc_get_version ok");
	tap_is_int(version, IBC_VERSION_CODE, "version code %d", version);
	tap_is_int(ibc_get_version(NULL), IBC_ERR_INVALID_ARG, "ibc_get_version(NULL)");
	tap_ok(strstr(ibc_last_error(), "version_p is NULL") != NULL,
	       "the bad call left its text in ibc_last_error: '%s'", ibc_last_error());

	for (i = 0; i < IBC_DTYPE_COUNT; i++) {
		tap_is_int(ibc_dtype_size((ibc_dtype_t)i, &nbytes), IBC_OK, "dtype %s size ok",
			   ibc_dtype_name((ibc_dtype_t)i));
		tap_is_int(nbytes, sizes[i], "dtype %s is %zu bytes", ibc_dtype_name((ibc_dtype_t)i),
			   sizes[i]);
	}
	tap_is_int(ibc_dtype_size(IBC_DTYPE_COUNT, &nbytes), IBC_ERR_INVALID_ARG, "bad dtype");
	tap_is_int(ibc_dtype_size((ibc_dtype_t)-1, &nbytes), IBC_ERR_INVALID_ARG, "negative dtype");
	tap_is_int(ibc_dtype_size(IBC_INT8, NULL), IBC_ERR_INVALID_ARG, "NULL nbytes_p");
	tap_is_str(ibc_dtype_name(IBC_BFLOAT16), "bfloat16", "dtype name");
	tap_is_str(ibc_redop_name(IBC_MAX), "max", "op name");
	tap_is_str(ibc_redop_name((ibc_redop_t)9), "invalid-op", "bad op name");
	return tap_done();
}
