/* SPDX-License-Identifier: MIT */
/*
 * coll_kind.h - the kinds of operation (all-reduce, ..., send, recv,
 * barrier) from the one X-macro list coll_kinds.def: the enum, names and
 * properties that the library, the tuner and the benchmarks share.
 */
#ifndef IBC_COLL_KIND_H
#define IBC_COLL_KIND_H

#define IBC_COLLF_REDUCES  0x1u
#define IBC_COLLF_ROOT     0x2u
#define IBC_COLLF_PEER     0x4u
#define IBC_COLLF_PER_RANK 0x8u
#define IBC_COLLF_TUNED    0x10u
#define IBC_COLLF_VECTOR   0x20u

/* enum ibc_coll_type - crosses the wire in struct ibc_msg_desc: fixed values */
enum ibc_coll_type {
#define IBC_COLL_KIND(n, v, name, alias, flags) IBC_COLL_##n = v,
#include "base/coll_kinds.def"
#undef IBC_COLL_KIND
	IBC_COLL_COUNT
};

/* "allreduce", ...; "?" for a value outside the enum */
const char *ibc_coll_name(int coll);
/* the nccl-tests spelling ("all_reduce"), or the name where it is the same */
const char *ibc_coll_alias(int coll);
/* IBC_COLLF_* of @coll, 0 outside the enum */
unsigned ibc_coll_flags(int coll);
/* the kind named @name (either spelling, any case), or -1 */
int ibc_coll_parse(const char *name);

static inline int ibc_coll_reduces(int coll)
{
	return (ibc_coll_flags(coll) & IBC_COLLF_REDUCES) != 0;
}

static inline int ibc_coll_has_root(int coll)
{
	return (ibc_coll_flags(coll) & IBC_COLLF_ROOT) != 0;
}

static inline int ibc_coll_is_p2p(int coll)
{
	return (ibc_coll_flags(coll) & IBC_COLLF_PEER) != 0;
}

static inline int ibc_coll_is_tuned(int coll)
{
	return (ibc_coll_flags(coll) & IBC_COLLF_TUNED) != 0;
}

#endif /* IBC_COLL_KIND_H */
