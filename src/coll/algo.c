/* SPDX-License-Identifier: MIT */
/*
 * algo.c - the names of the algorithms and protocols, and the scratch area
 * the algorithms of a communicator share (grown, never shrunk, until the
 * communicator is freed).
 */
#include "config.h"

#include "base/alloc.h"
#include "base/memreg.h"
#include "base/status.h"
#include "base/util.h"
#include "coll/algo.h"

static const char *const algo_names[IBC_ALGO_COUNT] = { "ring", "tree", "rd", "rabenseifner", "shm" };
static const char *const proto_names[IBC_PROTO_COUNT] = { "simple", "ll" };

const char *ibc_algo_name(int algo)
{
	return algo >= 0 && algo < IBC_ALGO_COUNT ? algo_names[algo] : "?";
}

const char *ibc_proto_name(int proto)
{
	return proto >= 0 && proto < IBC_PROTO_COUNT ? proto_names[proto] : "?";
}

int ibc_algo_parse(const char *s)
{
	return ibc_name_lookup(s, algo_names, IBC_ALGO_COUNT);
}

int ibc_proto_parse(const char *s)
{
	return ibc_name_lookup(s, proto_names, IBC_PROTO_COUNT);
}

ibc_status_t ibc_coll_scratch(struct ibc_coll *coll, size_t nbytes, void **p)
{
	if (nbytes > coll->scratch_nbytes) {
		void *np = ibc_aligned_alloc(4096, IBC_ALIGN_UP(nbytes, 4096), "algorithm scratch");

		if (!np)
			return ibc_net_fail(coll->net, IBC_ERR_NO_MEMORY, -1,
					     "cannot allocate %zu bytes of scratch", nbytes);
		if (coll->scratch)
			ibc_memreg_remove(coll->scratch, NULL);
		ibc_free(coll->scratch);
		coll->scratch = np;
		coll->scratch_nbytes = IBC_ALIGN_UP(nbytes, 4096);
		/*
		 * the verbs transport registers a recorded allocation whole, once,
		 * and keeps it until it is removed (base/memreg.h): operations on
		 * registered user buffers then register nothing, scratch included
		 */
		ibc_memreg_add(np, coll->scratch_nbytes);
	}
	*p = coll->scratch;
	return IBC_OK;
}
