/* SPDX-License-Identifier: MIT */
/*
 * coll_kind.c - names and properties of the operation kinds, generated from
 * coll_kinds.def.
 */
#include "config.h"

#include <strings.h>

#include "base/coll_kind.h"

static const struct {
	const char *name;
	const char *alias;
	unsigned flags;
} kinds[IBC_COLL_COUNT] = {
#define IBC_COLL_KIND(n, v, nm, al, fl) [v] = { nm, al, fl },
#include "base/coll_kinds.def"
#undef IBC_COLL_KIND
};

const char *ibc_coll_name(int coll)
{
	return coll >= 0 && coll < IBC_COLL_COUNT ? kinds[coll].name : "?";
}

const char *ibc_coll_alias(int coll)
{
	return coll >= 0 && coll < IBC_COLL_COUNT ? kinds[coll].alias : "?";
}

unsigned ibc_coll_flags(int coll)
{
	return coll >= 0 && coll < IBC_COLL_COUNT ? kinds[coll].flags : 0;
}

int ibc_coll_parse(const char *name)
{
	int i;

	for (i = 0; i < IBC_COLL_COUNT; i++)
		if (!strcasecmp(name, kinds[i].name) || !strcasecmp(name, kinds[i].alias))
			return i;
	return -1;
}
