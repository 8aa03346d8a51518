/* SPDX-License-Identifier: MIT */
/*
 * comm_env.c - ibc_comm_init_env(): a communicator from the environment of
 * the launcher (IBC_RANK/IBC_NRANKS, Open MPI, PMI, PMIx or Slurm for rank
 * and size; IBC_ROOT for the rendezvous; IBC_SECRET, or a secret derived
 * from IBC_ROOT and the job id). Rank 0 runs the bootstrap root.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/socket.h"
#include "base/util.h"
#include "boot/boot_wire.h"
#include "boot/bootstrap.h"

/*
 * a rank or size variable: 0 when unset, 1 when valid, -1 when not an
 * integer in [0, IBC_BOOT_MAX_RANKS]; read as every IBC_* integer is
 * (ibc_param_parse_int(): decimal or 0x hex, k/m/g), which the launchers'
 * decimal values are too
 */
static int env_int(const char *name, int *val_p)
{
	const char *s = getenv(name);
	int64_t v;

	if (!s || !*s)
		return 0;
	if (ibc_param_parse_int(s, &v) != 0 || v < 0 || v > IBC_BOOT_MAX_RANKS)
		return -1;
	*val_p = (int)v;
	return 1;
}

/* rank and size from IBC_*, Open MPI, PMI, PMIx or Slurm, in that order */
static ibc_status_t env_rank_size(int *rank_p, int *nranks_p, const char **src_p)
{
	static const struct {
		const char *rank;
		const char *size;
	} srcs[] = {
		{ "IBC_RANK", "IBC_NRANKS" },
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMI_RANK", "PMI_SIZE" },
		{ "PMIX_RANK", "PMI_SIZE" },
		{ "PMIX_RANK", "IBC_NRANKS" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
	};
	size_t i;

	for (i = 0; i < IBC_ARRAY_SIZE(srcs); i++) {
		int r = -1;
		int n = -1;
		int hr = env_int(srcs[i].rank, &r);
		int hn = env_int(srcs[i].size, &n);

		if (hr < 0 || hn < 0) {
			/* name the variable that is wrong, not both */
			const char *bad = hr < 0 ? srcs[i].rank : srcs[i].size;

			IBC_LOG_ERROR(INIT, "ibc_comm_init_env: %s='%s' is not a number in [0, %d]", bad,
				      getenv(bad), IBC_BOOT_MAX_RANKS);
			return IBC_ERR_INVALID_ARG;
		}
		if (hr > 0 && hn > 0) {
			*rank_p = r;
			*nranks_p = n;
			*src_p = srcs[i].rank;
			return IBC_OK;
		}
	}
	IBC_LOG_ERROR(INIT, "ibc_comm_init_env: no rank/size in the environment: set IBC_RANK and IBC_NRANKS, or launch with mpirun, srun or a PMI launcher");
	return IBC_ERR_INVALID_ARG;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* IBC_SECRET (32 hex digits), else derived from IBC_ROOT and the job id */
static ibc_status_t env_secret(const char *root, uint8_t secret[IBC_BOOT_SECRET_BYTES], int rank)
{
	const char *hex = ibc_param_secret();
	static const char *const jobvars[] = {
		"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE",
		"SLURM_JOB_ID", "SLURM_JOBID", "IBC_JOB_ID",
	};
	char buf[512];
	size_t i;

	if (hex && *hex) {
		if (strlen(hex) != 2 * IBC_BOOT_SECRET_BYTES) {
			IBC_LOG_ERROR(INIT, "IBC_SECRET must be %d hex digits (got %zu characters)",
				      2 * IBC_BOOT_SECRET_BYTES, strlen(hex));
			return IBC_ERR_INVALID_ARG;
		}
		for (i = 0; i < IBC_BOOT_SECRET_BYTES; i++) {
			int hi = hexval(hex[2 * i]);
			int lo = hexval(hex[2 * i + 1]);

			if (hi < 0 || lo < 0) {
				IBC_LOG_ERROR(INIT, "IBC_SECRET has a non-hex character");
				return IBC_ERR_INVALID_ARG;
			}
			secret[i] = (uint8_t)(hi << 4 | lo);
		}
		return IBC_OK;
	}
	snprintf(buf, sizeof(buf), "ibcoll-env-secret|%s", root);
	for (i = 0; i < IBC_ARRAY_SIZE(jobvars); i++) {
		const char *v = getenv(jobvars[i]);

		if (v && *v) {
			size_t n = strlen(buf);

			snprintf(buf + n, sizeof(buf) - n, "|%s=%s", jobvars[i], v);
			break;
		}
	}
	ibc_boot_derive_id(buf, strlen(buf), secret);
	if (rank == 0)
		IBC_LOG_INFO(INIT, "IBC_SECRET not set: bootstrap secret derived from IBC_ROOT and the job id; this guards against mistakes (other jobs, stray connections), not against local attackers");
	return IBC_OK;
}

static ibc_status_t init_env_body(ibc_comm_h *comm_p)
{
	struct ibc_boot_uid uid;
	union ibc_sockaddr root_addr;
	ibc_unique_id_t id;
	const char *root = ibc_param_root();
	const char *src = NULL;
	int family = strcmp(ibc_param_socket_family(), "AF_INET6") ? AF_INET : AF_INET6;
	int rank = -1;
	int nranks = -1;
	uint8_t secret[IBC_BOOT_SECRET_BYTES];

	ibc_fault_configure();
	if (!comm_p) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_env: comm_p is NULL");
		return IBC_ERR_INVALID_ARG;
	}
	IBC_CHECK(env_rank_size(&rank, &nranks, &src));
	if (nranks < 1 || rank >= nranks) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_env: rank %d of %d ranks (from %s) is out of range",
			      rank, nranks, src);
		return IBC_ERR_INVALID_ARG;
	}
	if (!root || !*root) {
		IBC_LOG_ERROR(INIT, "ibc_comm_init_env: IBC_ROOT is not set: give host:port of rank 0's host, e.g. mpirun -x IBC_ROOT=node0:29500");
		return IBC_ERR_INVALID_ARG;
	}
	ibc_log_set_rank(rank);
	IBC_CHECK(env_secret(root, secret, rank));
	IBC_CHECK(ibc_sock_parse_hostport(root, family, &root_addr));
	if (rank == 0) {
		char host[256];
		const char *colon = strrchr(root, ':');
		size_t hlen = (size_t)(colon - root);

		/* rank 0 runs the root on IBC_ROOT's port, bound to that address */
		if (root[0] == '[') {
			hlen -= 2;
			memcpy(host, root + 1, hlen);
		} else {
			memcpy(host, root, hlen);
		}
		host[hlen] = '\0';
		IBC_CHECK(ibc_bootstrap_root_start(host, ibc_sock_addr_port(&root_addr), secret, &id));
	}
	memset(&uid, 0, sizeof(uid));
	uid.family = root_addr.sa.sa_family;
	uid.port = ibc_sock_addr_port(&root_addr);
	if (uid.family == AF_INET6)
		memcpy(uid.addr, &root_addr.sin6.sin6_addr, 16);
	else
		memcpy(uid.addr, &root_addr.sin.sin_addr, 4);
	memcpy(uid.secret, secret, sizeof(secret));
	IBC_LOG_INFO(INIT, "joining as rank %d of %d (from %s) through root %s", rank, nranks, src,
		     root);
	return ibc_comm_init_uid(comm_p, nranks, &uid, rank);
}

ibc_status_t ibc_comm_init_env(ibc_comm_h *comm_p)
{
	ibc_status_t st = init_env_body(comm_p);

	/* the error text keeps the rank; later lines of this thread must not */
	if (st != IBC_OK)
		ibc_log_set_rank(-1);
	return st;
}
