/* SPDX-License-Identifier: MIT */
/*
 * build_info.c - what this build of ibcoll contains, for ibc_info and the
 * INIT log line. The one file that reads the HAVE_* configure results
 * directly: it describes the build rather than choosing code paths.
 */
#include "config.h"

#include "base/build_info.h"

#ifdef HAVE_VERBS
#include <infiniband/verbs.h>
#endif
#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#include <openssl/opensslv.h>

const struct ibc_build_info *ibc_build_info(void)
{
	static const struct ibc_build_info info = {
		.version = PACKAGE_VERSION,
		.configure_args = IBC_CONFIGURE_ARGS,
#ifdef HAVE_VERBS
		.have_verbs = 1,
#ifdef HAVE_DECL_IBV_REG_DMABUF_MR
		.have_dmabuf = HAVE_DECL_IBV_REG_DMABUF_MR,
#endif
#endif
#ifdef HAVE_HWLOC
		.have_hwloc = 1,
		.hwloc_api = HWLOC_API_VERSION,
#endif
#ifdef HAVE_CUDA
		.have_cuda = 1,
		.cuda_runtime = CUDART_VERSION,
#endif
#ifdef HAVE_MPI
		.have_mpi = 1,
#endif
#ifdef IBC_ASAN
		.asan = 1,
#endif
#ifdef IBC_DEBUG_BUILD
		.debug = 1,
#endif
		.openssl = OPENSSL_VERSION_TEXT,
		.verbs_version = IBC_VERBS_VERSION,
		.hwloc_version = IBC_HWLOC_VERSION,
		.mpi_version = IBC_MPI_VERSION,
	};

	return &info;
}
