/* SPDX-License-Identifier: MIT */
/*
 * test_ib_memlock.c - a registration refused because of RLIMIT_MEMLOCK must
 * say so: the error names `ulimit -l`, RLIMIT_MEMLOCK and the current value.
 * Run under a small limit without CAP_IPC_LOCK (root ignores the limit):
 *   ulimit -l 64; setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock test_ib_memlock
 * which is how tests/rxe/rxe_suite.sh runs it in the VM. SKIPs without a
 * device, or when the limit cannot bite (unlimited, or CAP_IPC_LOCK held).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "ib_test_util.h"
#include "tap.h"

/* 1 when the effective capability set has CAP_IPC_LOCK (bit 14) */
static int have_cap_ipc_lock(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long eff = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (eff >> 14) & 1;
}

int main(void)
{
	struct ibc_ib_params prm;
	struct ibc_ib_ctx_cb cb = { NULL, NULL, NULL };
	struct ibc_ib_ctx *ctx;
	struct ibc_ib_conn *conn;
	struct ibc_ib_mr *mr;
	struct rlimit rl;
	char d0[IBC_IB_NAME_LEN];
	char d1[IBC_IB_NAME_LEN];
	char want[96];
	const size_t n = 4u << 20;
	int p0;
	int p1;
	void *buf;
	ibc_status_t st;

	setenv("IBC_DEBUG", "WARN", 1); /* WARN lines also feed ibc_last_error() */
	if (ibt_pick_ports(d0, &p0, d1, &p1) != 0)
		tap_skip_all("no ACTIVE verbs port (run inside the Soft-RoCE VM: make check-rxe)");
	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= n)
		tap_skip_all("RLIMIT_MEMLOCK is not small (run with ulimit -l 64)");
	if (have_cap_ipc_lock())
		tap_skip_all("CAP_IPC_LOCK ignores RLIMIT_MEMLOCK (run under setpriv --bounding-set=-ipc_lock)");
	snprintf(want, sizeof(want), "is %llu bytes", (unsigned long long)rl.rlim_cur);

	ibt_default_params(&prm);
	st = ibc_ib_ctx_create(d0, p0, &prm, &cb, &ctx);
	tap_is_int(st, IBC_OK, "context opens under ulimit -l %llu KiB",
		   (unsigned long long)rl.rlim_cur / 1024);
	if (st != IBC_OK)
		return tap_done();
	buf = malloc(n);
	memset(buf, 1, n);
	st = ibc_ib_mr_get(&ctx->mrc, buf, n, 0, &mr);
	tap_is_int(st, IBC_ERR_VERBS, "registering %zu bytes fails", n);
	tap_diag("error: %s", ctx->mrc.errbuf);
	tap_ok(strstr(ctx->mrc.errbuf, "Cannot allocate memory") != NULL, "with ENOMEM's text");
	tap_ok(strstr(ctx->mrc.errbuf, "ulimit -l") != NULL, "naming ulimit -l");
	tap_ok(strstr(ctx->mrc.errbuf, "RLIMIT_MEMLOCK") != NULL, "naming RLIMIT_MEMLOCK");
	tap_ok(strstr(ctx->mrc.errbuf, want) != NULL, "giving the current limit ('%s')", want);

	/* a connection's own buffers (FIFO + bounce slots, 2 x 256 KiB by default) exceed it too */
	prm.bounce_bytes = 1 << 20;
	ctx->prm.bounce_bytes = prm.bounce_bytes;
	st = ibc_ib_conn_create(ctx, 1, "peer", &conn);
	tap_is_int(st, IBC_ERR_VERBS, "a connection whose bounce buffers exceed the limit is refused");
	tap_ok(strstr(ibc_last_error(), "ulimit -l") != NULL && strstr(ibc_last_error(), want) != NULL,
	       "its WARN names the limit: '%s'", ibc_last_error());
	ibc_ib_ctx_destroy(ctx);
	free(buf);
	return tap_done();
}
