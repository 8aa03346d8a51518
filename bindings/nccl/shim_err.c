/* SPDX-License-Identifier: MIT */
/*
 * shim_err.c - results and error texts of libibcoll_nccl: ibcoll status to
 * ncclResult_t, the last-error texts (per communicator and per process, as
 * ncclGetLastError() may be asked from another thread than the failed
 * call, e.g. a watchdog), ncclGetErrorString() and ncclGetVersion().
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "shim.h"

static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static char err_process[SHIM_ERR_BYTES];
/* what ncclGetLastError() hands out: valid until this thread's next call */
static __thread char err_copy[SHIM_ERR_BYTES];

/*
 * ibcoll's codes grouped as NCCL groups its own: who must act. A timeout
 * means a peer made no progress, NCCL's "remote" class; a feature ibcoll
 * lacks is a call the application must not make here: invalid usage.
 */
ncclResult_t shim_result(ibc_status_t st)
{
	switch (st) {
	case IBC_OK:
		return ncclSuccess;
	case IBC_INPROGRESS:
		return ncclInProgress;
	case IBC_ERR_INVALID_ARG:
		return ncclInvalidArgument;
	case IBC_ERR_INVALID_USAGE:
	case IBC_ERR_UNSUPPORTED:
	case IBC_ERR_LIMIT:
		return ncclInvalidUsage;
	case IBC_ERR_NO_MEMORY:
	case IBC_ERR_SYSTEM:
	case IBC_ERR_VERBS:
		return ncclSystemError;
	case IBC_ERR_CUDA:
		return ncclUnhandledCudaError;
	case IBC_ERR_REMOTE:
	case IBC_ERR_TIMEOUT:
	case IBC_ERR_REVOKED:   /* NCCL: a peer aborted the communicator */
		return ncclRemoteError;
	case IBC_ERR_INTERNAL:
	default:
		return ncclInternalError;
	}
}

/* NCCL_DEBUG=WARN or INFO (or TRACE) prints each error once, as NCCL does */
static int debug_warn(void)
{
	static int level = -1;
	const char *v;

	if (level < 0) {
		v = getenv("NCCL_DEBUG");
		level = v && (!strcasecmp(v, "WARN") || !strcasecmp(v, "INFO") ||
			      !strcasecmp(v, "TRACE"));
	}
	return level;
}

static void set_err_text(struct ncclComm *comm, const char *text)
{
	if (comm) {
		pthread_mutex_lock(&comm->lock);
		snprintf(comm->err, sizeof(comm->err), "%s", text);
		pthread_mutex_unlock(&comm->lock);
	}
	pthread_mutex_lock(&err_lock);
	snprintf(err_process, sizeof(err_process), "%s", text);
	pthread_mutex_unlock(&err_lock);
}

ncclResult_t shim_err(struct ncclComm *comm, ncclResult_t res, const char *fn, const char *fmt,
		      ...)
{
	char msg[SHIM_ERR_BYTES - 160];
	char text[SHIM_ERR_BYTES];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (comm && comm->nranks > 0)
		snprintf(text, sizeof(text), "%s: rank %d of %d: %s", fn, comm->rank, comm->nranks,
			 msg);
	else
		snprintf(text, sizeof(text), "%s: %s", fn, msg);
	set_err_text(comm, text);
	if (debug_warn()) {
		char host[64] = "?";

		gethostname(host, sizeof(host) - 1);
		fprintf(stderr, "%s:%d NCCL(ibcoll) WARN %s\n", host, (int)getpid(), text);
	}
	return res;
}

ncclResult_t shim_ibc_err(struct ncclComm *comm, ibc_status_t st, const char *fn)
{
	const char *why = ibc_last_error();

	if (!why || !*why)
		why = ibc_status_str(st);
	return shim_err(comm, shim_result(st), fn, "%s", why);
}

/*
 * ncclGetLastError() - the process's last error, whichever thread and
 * communicator it came from (NCCL documents @comm as unused): a watchdog
 * thread that saw ncclCommGetAsyncError() report an error reads its text.
 */
const char *ncclGetLastError(ncclComm_t comm)
{
	(void)comm;
	pthread_mutex_lock(&err_lock);
	snprintf(err_copy, sizeof(err_copy), "%s", err_process);
	pthread_mutex_unlock(&err_lock);
	return err_copy;
}

const char *ncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess:
		return "no error";
	case ncclUnhandledCudaError:
		return "unhandled cuda error: a CUDA call failed (ncclGetLastError() says which)";
	case ncclSystemError:
		return "unhandled system error: a system call, allocation or verbs call failed (ncclGetLastError() says which)";
	case ncclInternalError:
		return "internal error: a bug in ibcoll or its NCCL library (ncclGetLastError() has the details)";
	case ncclInvalidArgument:
		return "invalid argument (ncclGetLastError() says which)";
	case ncclInvalidUsage:
		return "invalid usage, or a call ibcoll does not provide (ncclGetLastError() says why)";
	case ncclRemoteError:
		return "remote process exited, the network failed, or a peer made no progress (ncclGetLastError() names the peer)";
	case ncclInProgress:
		return "operation in progress";
	default:
		return "unknown result code";
	}
}

ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return shim_err(NULL, ncclInvalidArgument, "ncclGetVersion", "version is NULL");
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}
