/* SPDX-License-Identifier: MIT */
/* build_info.h - description of this build (build_info.c). */
#ifndef IBC_BUILD_INFO_H
#define IBC_BUILD_INFO_H

struct ibc_build_info {
	const char *version;
	const char *configure_args;
	int have_verbs;
	int have_dmabuf;        /* ibv_reg_dmabuf_mr declared */
	int have_hwloc;
	unsigned hwloc_api;     /* HWLOC_API_VERSION */
	int have_cuda;
	int cuda_runtime;       /* CUDART_VERSION */
	int have_mpi;           /* benchmarks/tests only */
	int asan;
	int debug;
	const char *openssl;
	const char *verbs_version;  /* as found by configure, "" if unknown */
	const char *hwloc_version;
	const char *mpi_version;
};

const struct ibc_build_info *ibc_build_info(void);

#endif /* IBC_BUILD_INFO_H */
