/* SPDX-License-Identifier: MIT */
/*
 * param.c - the parameter registry: reads each IBC_* variable once, on the
 * first call of its getter, validates it (WARN and default when invalid),
 * logs the values taken from the environment at INFO ENV, and caches them.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/status.h"
#include "base/util.h"

static const struct ibc_param_info param_info[IBC_PARAM_COUNT] = {
#define IBC_PARAM_INT(NAME, lname, def, mn, mx, hlp) \
	[IBC_PARAM_IDX_##NAME] = { .name = #NAME, .type = IBC_PARAM_TYPE_INT, .def_int = (def), \
				   .min = (mn), .max = (mx), .help = hlp },
#define IBC_PARAM_STR(NAME, lname, def, hlp) \
	[IBC_PARAM_IDX_##NAME] = { .name = #NAME, .type = IBC_PARAM_TYPE_STR, .def_str = def, \
				   .help = hlp },
#include "base/params.def"
#undef IBC_PARAM_INT
#undef IBC_PARAM_STR
};

/*
 * String parameters with a fixed set of values, checked here like the
 * integers' ranges (an invalid value is a WARN and the default). Others
 * (IBC_TRANSPORT, IBC_ALGO, ...) are parsed and checked by their owners.
 */
static const struct {
	int idx;
	const char *const choices[4];
} str_choices[] = {
	{ IBC_PARAM_IDX_SOCKET_FAMILY, { "AF_INET", "AF_INET6", NULL } },
};

/* 1 if @val is one of the values allowed for string parameter @idx (or any is) */
static int str_allowed(int idx, const char *val, char *list, size_t len)
{
	size_t k;
	size_t j;

	for (k = 0; k < IBC_ARRAY_SIZE(str_choices); k++) {
		size_t off = 0;

		if (str_choices[k].idx != idx)
			continue;
		list[0] = '\0';
		for (j = 0; str_choices[k].choices[j]; j++) {
			if (!strcmp(val, str_choices[k].choices[j]))
				return 1;
			if (off < len)
				off += (size_t)snprintf(list + off, len - off, "%s%s", j ? ", " : "",
							str_choices[k].choices[j]);
		}
		return 0;
	}
	return 1;
}

struct param_state {
	int loaded;             /* read with acquire; set under param_lock */
	int from_env;
	int64_t ival;
	char *sval;             /* owned copy of the environment string */
	char rejected[160];     /* why the environment value was refused; "" if not */
};

static struct param_state param_state[IBC_PARAM_COUNT];
static pthread_mutex_t param_lock = PTHREAD_MUTEX_INITIALIZER;

const struct ibc_param_info *ibc_param_info(int idx)
{
	return idx >= 0 && idx < IBC_PARAM_COUNT ? &param_info[idx] : NULL;
}

int ibc_param_parse_int(const char *str, int64_t *val_p)
{
	char *end;
	long long v;
	int64_t mul = 1;

	while (isspace((unsigned char)*str))
		str++;
	if (!*str)
		return -1;
	errno = 0;
	/*
	 * decimal, or hex with 0x: a leading zero is not octal (strtoll's base
	 * 0 read IBC_TIMEOUT_MS=0200 as 128 ms)
	 */
	if (str[0] == '0' && (str[1] == 'x' || str[1] == 'X'))
		v = strtoll(str, &end, 16);
	else
		v = strtoll(str, &end, 10);
	if (errno || end == str)
		return -1;
	switch (*end) {
	case 'k': case 'K': mul = 1LL << 10; end++; break;
	case 'm': case 'M': mul = 1LL << 20; end++; break;
	case 'g': case 'G': mul = 1LL << 30; end++; break;
	default: break;
	}
	while (isspace((unsigned char)*end))
		end++;
	if (*end)
		return -1;
	if (mul > 1 && (v > INT64_MAX / mul || v < INT64_MIN / mul))
		return -1;
	*val_p = (int64_t)v * mul;
	return 0;
}

static void param_load_locked(int idx)
{
	const struct ibc_param_info *pi = &param_info[idx];
	struct param_state *ps = &param_state[idx];
	char envname[96];
	const char *env;

	snprintf(envname, sizeof(envname), "IBC_%s", pi->name);
	env = getenv(envname);
	ps->from_env = 0;
	ps->ival = pi->def_int;
	ps->rejected[0] = '\0';
	if (env && *env) {
		char list[96];

		if (pi->type == IBC_PARAM_TYPE_STR && !str_allowed(idx, env, list, sizeof(list))) {
			snprintf(ps->rejected, sizeof(ps->rejected), "%s=%s is not one of %s",
				 envname, env, list);
			IBC_LOG_WARN(ENV, "%s; using the default %s", ps->rejected, pi->def_str);
		} else if (pi->type == IBC_PARAM_TYPE_STR) {
			ps->sval = strdup(env);
			ps->from_env = ps->sval != NULL;
		} else {
			int64_t v;

			if (ibc_param_parse_int(env, &v) != 0) {
				snprintf(ps->rejected, sizeof(ps->rejected),
					 "%s=%s is not an integer", envname, env);
			} else if (v < pi->min || v > pi->max) {
				snprintf(ps->rejected, sizeof(ps->rejected),
					 "%s=%s is outside [%" PRId64 ", %" PRId64 "]", envname,
					 env, pi->min, pi->max);
			} else {
				ps->ival = v;
				ps->from_env = 1;
			}
			if (ps->rejected[0])
				IBC_LOG_WARN(ENV, "%s; using the default %" PRId64, ps->rejected,
					     pi->def_int);
		}
		if (ps->from_env)
			IBC_LOG_INFO(ENV, "%s set by environment to %s", envname, env);
	}
	__atomic_store_n(&ps->loaded, 1, __ATOMIC_RELEASE);
}

static void param_ensure_loaded(int idx)
{
	if (__atomic_load_n(&param_state[idx].loaded, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&param_lock);
	if (!param_state[idx].loaded)
		param_load_locked(idx);
	pthread_mutex_unlock(&param_lock);
}

int64_t ibc_param_get_int(int idx)
{
	param_ensure_loaded(idx);
	return param_state[idx].ival;
}

const char *ibc_param_get_str(int idx)
{
	param_ensure_loaded(idx);
	return param_state[idx].sval ? param_state[idx].sval : param_info[idx].def_str;
}

ibc_status_t ibc_get_param_int(const char *name, int64_t *value_p)
{
	const char *bare = name;
	int i;

	if (!name || !value_p) {
		IBC_LOG_WARN(INIT, "ibc_get_param_int: %s is NULL", name ? "value_p" : "name");
		return IBC_ERR_INVALID_ARG;
	}
	if (!strncmp(bare, "IBC_", 4))
		bare += 4;
	for (i = 0; i < IBC_PARAM_COUNT; i++) {
		if (strcmp(param_info[i].name, bare) != 0)
			continue;
		if (param_info[i].type != IBC_PARAM_TYPE_INT) {
			IBC_LOG_WARN(INIT, "ibc_get_param_int: IBC_%s is a string parameter", bare);
			return IBC_ERR_INVALID_ARG;
		}
		*value_p = ibc_param_get_int(i);
		return IBC_OK;
	}
	IBC_LOG_WARN(INIT, "ibc_get_param_int: no parameter named %s (ibc_info --params lists them)",
		     name);
	return IBC_ERR_INVALID_ARG;
}

int ibc_param_from_env(int idx)
{
	param_ensure_loaded(idx);
	return param_state[idx].from_env;
}

const char *ibc_param_env_rejected(int idx)
{
	if (idx < 0 || idx >= IBC_PARAM_COUNT)
		return NULL;
	param_ensure_loaded(idx);
	return param_state[idx].rejected[0] ? param_state[idx].rejected : NULL;
}

void ibc_param_reset_all(void)
{
	int i;

	pthread_mutex_lock(&param_lock);
	for (i = 0; i < IBC_PARAM_COUNT; i++) {
		/* tests only: callers must not keep a string across a reset */
		free(param_state[i].sval);
		param_state[i].sval = NULL;
		__atomic_store_n(&param_state[i].loaded, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&param_lock);
}
