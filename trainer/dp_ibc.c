// SPDX-License-Identifier: MIT
/*
 * dp_ibc.c - struct dp_ops over ibcoll's nonblocking collectives: gradient
 * all-reduce (IBC_AVG), ZeRO-1 reduce-scatter and all-gather in place
 * (NCCL's in-place conventions, see include/ibcoll.h), byte all-gather for
 * the deferred encoder gradients, and a blocking fp64 sum for the loss and
 * the gradient norm.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <ibcoll.h>

#include "dp_ibc.h"

#ifdef GPT2_DOUBLE
#define FLOATX_DTYPE IBC_FLOAT64
#else
#define FLOATX_DTYPE IBC_FLOAT32
#endif

static int ck(ibc_status_t st, const char *what)
{
	if (st == IBC_OK)
		return 0;
	fprintf(stderr, "ibc_gpt2: %s failed: %s: %s\n", what, ibc_status_str(st),
		ibc_last_error());
	return -1;
}

static int my_rank(void *ctx)
{
	int r = 0;

	ibc_comm_rank(ctx, &r);
	return r;
}

static int dp_iallreduce_avg(void *ctx, floatX *buf, size_t count, void **req_p)
{
	return ck(
	    ibc_iallreduce(buf, buf, count, FLOATX_DTYPE, IBC_AVG, ctx, (ibc_request_h *)req_p),
	    "ibc_iallreduce");
}

static int dp_ireduce_scatter_avg(void *ctx, floatX *buf, size_t count, void **req_p)
{
	return ck(ibc_ireduce_scatter(buf, buf + (size_t)my_rank(ctx) * count, count, FLOATX_DTYPE,
				      IBC_AVG, ctx, (ibc_request_h *)req_p),
		  "ibc_ireduce_scatter");
}

static int dp_iallgather(void *ctx, floatX *buf, size_t count, void **req_p)
{
	return ck(ibc_iallgather(buf + (size_t)my_rank(ctx) * count, buf, count, FLOATX_DTYPE, ctx,
				 (ibc_request_h *)req_p),
		  "ibc_iallgather");
}

static int dp_iallgather_bytes(void *ctx, const void *send, void *recv, size_t nbytes, void **req_p)
{
	return ck(ibc_iallgather(send, recv, nbytes, IBC_UINT8, ctx, (ibc_request_h *)req_p),
		  "ibc_iallgather");
}

static int dp_test(void *ctx, void *req, int *done_p)
{
	return ck(ibc_test(req, done_p), "ibc_test");
}

static int dp_wait(void *ctx, void *req)
{
	return ck(ibc_wait(req), "ibc_wait");
}

static int dp_allreduce_sum_f64(void *ctx, double *buf, size_t count)
{
	return ck(ibc_allreduce(buf, buf, count, IBC_FLOAT64, IBC_SUM, ctx), "ibc_allreduce");
}

static int dp_register_buffer(void *ctx, void *buf, size_t nbytes, void **handle_p)
{
	return ck(ibc_comm_register(ctx, buf, nbytes, handle_p), "ibc_comm_register");
}

static int dp_deregister_buffer(void *ctx, void *handle)
{
	return ck(ibc_comm_deregister(ctx, handle), "ibc_comm_deregister");
}

static const struct dp_ops dp_ibc_ops = {
    .iallreduce_avg = dp_iallreduce_avg,
    .ireduce_scatter_avg = dp_ireduce_scatter_avg,
    .iallgather = dp_iallgather,
    .iallgather_bytes = dp_iallgather_bytes,
    .test = dp_test,
    .wait = dp_wait,
    .allreduce_sum_f64 = dp_allreduce_sum_f64,
    .register_buffer = dp_register_buffer,
    .deregister_buffer = dp_deregister_buffer,
};

static int env_nranks(void)
{
	static const char *vars[] = {"IBC_NRANKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
				     "SLURM_NTASKS"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);

		if (v && *v)
			return atoi(v);
	}
	return 1;
}

int dp_ibc_init(struct dp *dp)
{
	ibc_comm_h comm;

	dp->ops = NULL;
	dp->ctx = NULL;
	dp->rank = 0;
	dp->nranks = 1;
	if (env_nranks() <= 1)
		return 0;
	if (ck(ibc_comm_init_env(&comm), "ibc_comm_init_env") != 0 ||
	    ck(ibc_comm_rank(comm, &dp->rank), "ibc_comm_rank") != 0 ||
	    ck(ibc_comm_size(comm, &dp->nranks), "ibc_comm_size") != 0)
		return -1;
	dp->ops = &dp_ibc_ops;
	dp->ctx = comm;
	return 0;
}

int dp_ibc_barrier(struct dp *dp)
{
	if (!dp->ctx)
		return 0;
	return ck(ibc_barrier(dp->ctx), "ibc_barrier");
}

void dp_ibc_fini(struct dp *dp)
{
	if (!dp->ctx)
		return;
	dp_ibc_barrier(dp);
	ck(ibc_comm_destroy(dp->ctx), "ibc_comm_destroy");
	dp->ctx = NULL;
	dp->ops = NULL;
}

void dp_ibc_abort(struct dp *dp)
{
	if (!dp->ctx)
		return;
	ck(ibc_comm_abort(dp->ctx), "ibc_comm_abort");
	dp->ctx = NULL;
	dp->ops = NULL;
}

int dp_ibc_agree_step(struct dp *dp, int ok, int *all_ok_p, int *failed, int *nfailed_p)
{
	uint32_t flag = ok ? 1u : 0u;

	*nfailed_p = 0;
	*all_ok_p = 1;
	if (!dp->ctx)
		return ok ? 0 : -1;
	if (ck(ibc_comm_agree(dp->ctx, &flag, failed, nfailed_p), "ibc_comm_agree") != 0)
		return -1;
	*all_ok_p = flag == 1 && *nfailed_p == 0;
	return 0;
}

int dp_ibc_shrink(struct dp *dp)
{
	ibc_comm_h nc = NULL;

	if (!dp->ctx)
		return -1;
	/* every survivor's pending operation ends now, whatever it waits on */
	ibc_comm_revoke(dp->ctx);
	if (ck(ibc_comm_shrink(dp->ctx, &nc), "ibc_comm_shrink") != 0)
		return -1;
	/* the old communicator is failed and revoked: its destroy reports that, not news */
	ibc_comm_destroy(dp->ctx);
	dp->ctx = nc;
	if (ck(ibc_comm_rank(nc, &dp->rank), "ibc_comm_rank") != 0 ||
	    ck(ibc_comm_size(nc, &dp->nranks), "ibc_comm_size") != 0)
		return -1;
	return 0;
}
