/* SPDX-License-Identifier: MIT */
/*
 * test_param.c - parameter parsing: valid values, suffixes, invalid and
 * out-of-range values (warning + default), caching and the registry.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "ibcoll.h"
#include "tap.h"

int main(void)
{
	int64_t v = 0;
	int i;
	int nhelp = 0;

	setenv("IBC_DEBUG", "WARN", 1);
	tap_is_int(ibc_param_parse_int("42", &v), 0, "decimal");
	tap_is_int(v, 42, "42");
	tap_is_int(ibc_param_parse_int("0x10", &v), 0, "hex");
	tap_is_int(v, 16, "0x10");
	tap_is_int(ibc_param_parse_int("0200", &v), 0, "leading zero");
	tap_is_int(v, 200, "0200 is decimal 200, not octal 128");
	tap_is_int(ibc_param_parse_int("0X1f", &v), 0, "hex, upper-case X");
	tap_is_int(v, 31, "0X1f");
	tap_is_int(ibc_param_parse_int("08", &v), 0, "08 (no octal digit error)");
	tap_is_int(v, 8, "08");
	tap_is_int(ibc_param_parse_int("-1", &v), 0, "negative");
	tap_is_int(v, -1, "-1");
	tap_is_int(ibc_param_parse_int("4k", &v), 0, "k suffix");
	tap_is_int(v, 4096, "4k");
	tap_is_int(ibc_param_parse_int("2M", &v), 0, "M suffix");
	tap_is_int(v, 2097152, "2M");
	tap_is_int(ibc_param_parse_int(" 1g ", &v), 0, "spaces and g");
	tap_is_int(v, 1073741824, "1g");
	v = 7;
	tap_is_int(ibc_param_parse_int("12x", &v), -1, "trailing garbage");
	tap_is_int(ibc_param_parse_int("", &v), -1, "empty");
	tap_is_int(ibc_param_parse_int("k", &v), -1, "suffix alone");
	tap_is_int(ibc_param_parse_int("99999999999999999999", &v), -1, "overflow");
	tap_is_int(ibc_param_parse_int("9000000000000g", &v), -1, "overflow by suffix");
	tap_is_int(v, 7, "failed parses leave the output alone");

	/* defaults */
	unsetenv("IBC_TIMEOUT_MS");
	ibc_param_reset_all();
	tap_is_int(ibc_param_timeout_ms(), 600000, "default collective timeout is 600000 ms");
	tap_is_int(ibc_param_from_env(IBC_PARAM_IDX_TIMEOUT_MS), 0, "default not from env");
	tap_is_str(ibc_param_transport(), "auto", "default transport");

	/* the public query: prefix optional, the default when unset, errors */
	v = 0;
	unsetenv("IBC_BOOTSTRAP_TIMEOUT_MS");
	ibc_param_reset_all();
	tap_is_int(ibc_get_param_int("IBC_BOOTSTRAP_TIMEOUT_MS", &v), IBC_OK,
		   "ibc_get_param_int(IBC_BOOTSTRAP_TIMEOUT_MS)");
	tap_is_int(v, 60000, "its default, 60000 ms");
	v = 0;
	tap_is_int(ibc_get_param_int("TIMEOUT_MS", &v), IBC_OK, "ibc_get_param_int without the prefix");
	tap_is_int(v, 600000, "IBC_TIMEOUT_MS's default, 600000 ms");
	v = 7;
	tap_is_int(ibc_get_param_int("IBC_NO_SUCH_PARAM", &v), IBC_ERR_INVALID_ARG,
		   "an unknown name is refused");
	tap_ok(strstr(ibc_last_error(), "no parameter named IBC_NO_SUCH_PARAM") != NULL,
	       "and the error names it (%s)", ibc_last_error());
	tap_is_int(ibc_get_param_int("IBC_TRANSPORT", &v), IBC_ERR_INVALID_ARG,
		   "a string parameter is refused");
	tap_ok(strstr(ibc_last_error(), "IBC_TRANSPORT is a string parameter") != NULL,
	       "and the error says so (%s)", ibc_last_error());
	tap_is_int(v, 7, "refused queries leave the output alone");
	tap_is_int(ibc_get_param_int(NULL, &v), IBC_ERR_INVALID_ARG, "a NULL name is refused");
	tap_is_int(ibc_get_param_int("IBC_TIMEOUT_MS", NULL), IBC_ERR_INVALID_ARG,
		   "a NULL output is refused");
	setenv("IBC_BOOTSTRAP_TIMEOUT_MS", "2500", 1);
	setenv("IBC_TIMEOUT_MS", "5", 1);      /* below its minimum: WARN and the default */
	ibc_param_reset_all();
	tap_is_int(ibc_get_param_int("IBC_BOOTSTRAP_TIMEOUT_MS", &v), IBC_OK, "query of a set value");
	tap_is_int(v, 2500, "IBC_BOOTSTRAP_TIMEOUT_MS=2500 is in force");
	ibc_get_param_int("IBC_TIMEOUT_MS", &v);
	tap_is_int(v, 600000, "an out-of-range IBC_TIMEOUT_MS=5 gives the default in force");
	unsetenv("IBC_BOOTSTRAP_TIMEOUT_MS");
	unsetenv("IBC_TIMEOUT_MS");

	/* valid value from the environment */
	setenv("IBC_TIMEOUT_MS", "1500", 1);
	setenv("IBC_RING_CHUNK_BYTES", "64k", 1);
	setenv("IBC_TRANSPORT", "tcp", 1);
	ibc_param_reset_all();
	tap_is_int(ibc_param_timeout_ms(), 1500, "IBC_TIMEOUT_MS=1500");
	tap_is_int(ibc_param_from_env(IBC_PARAM_IDX_TIMEOUT_MS), 1, "value from env");
	tap_is_int(ibc_param_ring_chunk_bytes(), 65536, "IBC_RING_CHUNK_BYTES=64k");
	tap_is_str(ibc_param_transport(), "tcp", "IBC_TRANSPORT=tcp");

	/* cached: a later change of the environment is not seen */
	setenv("IBC_TIMEOUT_MS", "2500", 1);
	tap_is_int(ibc_param_timeout_ms(), 1500, "getter is cached");

	/* invalid -> WARN naming the variable, and the default */
	setenv("IBC_TIMEOUT_MS", "soon", 1);
	ibc_param_reset_all();
	ibc_log_set_last_error("");
	tap_is_int(ibc_param_timeout_ms(), 600000, "invalid value falls back to the default");
	tap_ok(strstr(ibc_last_error(), "IBC_TIMEOUT_MS=soon is not an integer") != NULL,
	       "warning names the variable: '%s'", ibc_last_error());
	tap_is_str(ibc_param_env_rejected(IBC_PARAM_IDX_TIMEOUT_MS) ?
		   ibc_param_env_rejected(IBC_PARAM_IDX_TIMEOUT_MS) : "(null)",
		   "IBC_TIMEOUT_MS=soon is not an integer",
		   "the registry keeps why it refused the value");
	tap_ok(ibc_param_env_rejected(IBC_PARAM_IDX_RING_CHUNK_BYTES) == NULL,
	       "a value that was taken is not marked refused");
	tap_ok(ibc_param_env_rejected(IBC_PARAM_IDX_TRANSPORT) == NULL,
	       "string parameters are not checked by the registry");

	/* out of range -> WARN and default */
	setenv("IBC_SOCKET_NSOCKS", "99", 1);
	ibc_log_set_last_error("");
	tap_is_int(ibc_param_socket_nsocks(), 2, "out-of-range value falls back to the default");
	tap_ok(strstr(ibc_last_error(), "IBC_SOCKET_NSOCKS=99 is outside [1, 16]") != NULL,
	       "warning gives the range: '%s'", ibc_last_error());
	tap_is_int(ibc_param_from_env(IBC_PARAM_IDX_SOCKET_NSOCKS), 0, "rejected value not from env");
	tap_is_str(ibc_param_env_rejected(IBC_PARAM_IDX_SOCKET_NSOCKS) ?
		   ibc_param_env_rejected(IBC_PARAM_IDX_SOCKET_NSOCKS) : "(null)",
		   "IBC_SOCKET_NSOCKS=99 is outside [1, 16]", "the refusal names the range");
	unsetenv("IBC_SOCKET_NSOCKS");
	ibc_param_reset_all();
	tap_ok(ibc_param_env_rejected(IBC_PARAM_IDX_SOCKET_NSOCKS) == NULL,
	       "reset and unset: nothing refused");

	/* a string with a fixed set of values: another one -> WARN and default */
	setenv("IBC_SOCKET_FAMILY", "inet6", 1);
	ibc_param_reset_all();
	ibc_log_set_last_error("");
	tap_is_str(ibc_param_socket_family(), "AF_INET", "IBC_SOCKET_FAMILY=inet6 falls back to AF_INET");
	tap_is_str(ibc_param_env_rejected(IBC_PARAM_IDX_SOCKET_FAMILY) ?
		   ibc_param_env_rejected(IBC_PARAM_IDX_SOCKET_FAMILY) : "(null)",
		   "IBC_SOCKET_FAMILY=inet6 is not one of AF_INET, AF_INET6", "the refusal lists the values");
	tap_ok(strstr(ibc_last_error(), "IBC_SOCKET_FAMILY=inet6 is not one of AF_INET, AF_INET6; using the default AF_INET") != NULL,
	       "and so does the warning: '%s'", ibc_last_error());
	setenv("IBC_SOCKET_FAMILY", "AF_INET6", 1);
	ibc_param_reset_all();
	tap_is_str(ibc_param_socket_family(), "AF_INET6", "IBC_SOCKET_FAMILY=AF_INET6 is taken");
	tap_ok(ibc_param_env_rejected(IBC_PARAM_IDX_SOCKET_FAMILY) == NULL, "and not refused");
	unsetenv("IBC_SOCKET_FAMILY");
	ibc_param_reset_all();

	/* registry: every row has a name and help text, defaults inside range */
	for (i = 0; i < IBC_PARAM_COUNT; i++) {
		const struct ibc_param_info *pi = ibc_param_info(i);

		if (pi->name && pi->help && strlen(pi->help) > 10)
			nhelp++;
		if (pi->type == IBC_PARAM_TYPE_INT && (pi->def_int < pi->min || pi->def_int > pi->max))
			tap_ok(0, "IBC_%s default %lld outside its range", pi->name,
			       (long long)pi->def_int);
	}
	tap_is_int(nhelp, IBC_PARAM_COUNT, "all %d parameters have help text", IBC_PARAM_COUNT);
	tap_ok(ibc_param_info(IBC_PARAM_COUNT) == NULL, "registry bound");
	return tap_done();
}
