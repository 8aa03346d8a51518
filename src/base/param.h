/* SPDX-License-Identifier: MIT */
/*
 * param.h - environment parameters generated from params.def: a cached
 * getter per parameter and a registry for ibc_info and docs/env.md.
 */
#ifndef IBC_PARAM_H
#define IBC_PARAM_H

#include <stdint.h>

enum ibc_param_type {
	IBC_PARAM_TYPE_INT = 0,
	IBC_PARAM_TYPE_STR = 1,
};

enum ibc_param_idx {
#define IBC_PARAM_INT(NAME, lname, def, min, max, help) IBC_PARAM_IDX_##NAME,
#define IBC_PARAM_STR(NAME, lname, def, help) IBC_PARAM_IDX_##NAME,
#include "base/params.def"
#undef IBC_PARAM_INT
#undef IBC_PARAM_STR
	IBC_PARAM_COUNT
};

struct ibc_param_info {
	const char *name;       /* without the IBC_ prefix */
	int type;               /* enum ibc_param_type */
	int64_t def_int;
	const char *def_str;
	int64_t min;
	int64_t max;
	const char *help;
};

/* the static description of parameter @idx */
const struct ibc_param_info *ibc_param_info(int idx);

/* current value (loads from the environment at first use) */
int64_t ibc_param_get_int(int idx);
const char *ibc_param_get_str(int idx);
/* 1 when the current value came from the environment */
int ibc_param_from_env(int idx);

/**
 * ibc_param_env_rejected() - Why the registry refused the environment value
 * of integer parameter @idx (not an integer, or outside [min, max]), in
 * which case the getter returns the default and a WARN was logged.
 * @idx: [in] IBC_PARAM_IDX_*.
 * Return: "IBC_X=abc is not an integer" or "IBC_X=99 is outside [1, 16]",
 *         valid until ibc_param_reset_all(); NULL when the value was taken,
 *         not set, or the parameter is a string (the registry does not check
 *         strings: their owners do, see ibc_info --params).
 */
const char *ibc_param_env_rejected(int idx);

/* tests: forget cached values so the next getter re-reads the environment */
void ibc_param_reset_all(void);

/* parse an integer with optional k/m/g suffix; 0 on success, -1 if malformed */
int ibc_param_parse_int(const char *str, int64_t *val_p);

#define IBC_PARAM_INT(NAME, lname, def, min, max, help)                  \
	static inline int64_t ibc_param_##lname(void)                    \
	{                                                                \
		return ibc_param_get_int(IBC_PARAM_IDX_##NAME);          \
	}
#define IBC_PARAM_STR(NAME, lname, def, help)                            \
	static inline const char *ibc_param_##lname(void)                \
	{                                                                \
		return ibc_param_get_str(IBC_PARAM_IDX_##NAME);          \
	}
#include "base/params.def"
#undef IBC_PARAM_INT
#undef IBC_PARAM_STR

#endif /* IBC_PARAM_H */
