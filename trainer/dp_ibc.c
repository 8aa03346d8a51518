// SPDX-License-Identifier: MIT
/*
 * dp_ibc.c - struct dp_ops over ibcoll's nonblocking collectives: gradient
 * all-reduce (IBC_AVG), ZeRO-1 reduce-scatter and all-gather in place
 * (NCCL's in-place conventions, see include/ibcoll.h), byte all-gather for
 * the deferred encoder gradients, and a blocking fp64 sum for the loss and
 * the gradient norm.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static int dp_broadcast_bytes(void *ctx, void *buf, size_t nbytes)
{
	return ck(ibc_broadcast(buf, buf, nbytes, IBC_UINT8, 0, ctx), "ibc_broadcast");
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
    .broadcast_bytes = dp_broadcast_bytes,
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

void *dp_ibc_mem_alloc(size_t nbytes)
{
	void *p = NULL;

	return ibc_mem_alloc(&p, nbytes) == IBC_OK ? p : NULL;
}

void dp_ibc_mem_free(void *p)
{
	ibc_mem_free(p);
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

/* ---- replacements: a process that joins an elastic job (files in a shared directory) ---- */

#define JOIN_MAGIC 0x6a6f696e /* "join" */

struct join_file {
	uint32_t magic;
	int32_t nranks;  /* of the grown communicator */
	int32_t rank;    /* the joiner's */
	int32_t vranks;  /* the job's global batch, in ranks' micro-batches */
	ibc_unique_id_t id;
};

static void join_paths(const char *dir, char *req, char *idf, size_t n)
{
	snprintf(req, n, "%s/join.request", dir);
	snprintf(idf, n, "%s/join.id", dir);
}

int dp_ibc_join(struct dp *dp, const char *dir, int timeout_ms, int *vranks_p)
{
	char req[4096];
	char idf[4096];
	struct join_file jf;
	ibc_comm_h comm;
	FILE *f;
	int fd;

	join_paths(dir, req, idf, sizeof(req));
	fd = open(req, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0) {
		fprintf(stderr, "ibc_gpt2: --join: cannot create %s: %s (another replacement waiting?)\n",
			req, strerror(errno));
		return -1;
	}
	close(fd);
	for (int waited = 0;; waited += 20) {
		f = fopen(idf, "rb");
		if (f) {
			size_t got = fread(&jf, 1, sizeof(jf), f);

			fclose(f);
			if (got == sizeof(jf) && jf.magic == JOIN_MAGIC)
				break;
		}
		if (waited >= timeout_ms) {
			fprintf(stderr, "ibc_gpt2: --join: no job offered a place in %s within %d ms\n",
				dir, timeout_ms);
			unlink(req);
			return -1;
		}
		usleep(20 * 1000);
	}
	if (ck(ibc_comm_grow(NULL, jf.nranks, &jf.id, jf.rank, &comm), "ibc_comm_grow") != 0)
		return -1;
	dp->ops = &dp_ibc_ops;
	dp->ctx = comm;
	dp->rank = jf.rank;
	dp->nranks = jf.nranks;
	*vranks_p = jf.vranks;
	return 0;
}

int dp_ibc_offer_join(struct dp *dp, const char *dir, int wait_ms, int vranks, int *grown_p)
{
	char req[4096];
	char idf[4096];
	double found = 0;
	struct join_file jf;
	ibc_comm_h nc = NULL;

	*grown_p = 0;
	if (!dp->ctx)
		return 0;
	join_paths(dir, req, idf, sizeof(req));
	if (dp->rank == 0)
		for (int waited = 0; !found; waited += 20) {
			found = access(req, F_OK) == 0;
			if (found || waited >= wait_ms)
				break;
			usleep(20 * 1000);
		}
	/* rank 0's answer, the same on every rank */
	if (ck(ibc_allreduce(&found, &found, 1, IBC_FLOAT64, IBC_SUM, dp->ctx), "ibc_allreduce") != 0)
		return -1;
	if (found == 0)
		return 0;
	memset(&jf, 0, sizeof(jf));
	if (ck(ibc_comm_grow_id(dp->ctx, &jf.id), "ibc_comm_grow_id") != 0)
		return -1;
	if (dp->rank == 0) {
		char tmp[4200];
		FILE *f;

		jf.magic = JOIN_MAGIC;
		jf.nranks = dp->nranks + 1;
		jf.rank = dp->nranks;
		jf.vranks = vranks;
		snprintf(tmp, sizeof(tmp), "%s.tmp", idf);
		f = fopen(tmp, "wb");
		if (!f || fwrite(&jf, sizeof(jf), 1, f) != 1 || fclose(f) != 0 || rename(tmp, idf) != 0) {
			fprintf(stderr, "ibc_gpt2: cannot write %s: %s\n", idf, strerror(errno));
			return -1;
		}
	}
	if (ck(ibc_comm_grow(dp->ctx, dp->nranks + 1, &jf.id, -1, &nc), "ibc_comm_grow") != 0) {
		/* the replacement never came (a stale request, or it died): go on without it */
		if (dp->rank == 0) {
			fprintf(stderr, "ibc_gpt2: the replacement that asked in %s did not join; continuing on %d ranks\n",
				dir, dp->nranks);
			unlink(idf);
			unlink(req);
		}
		return 0;
	}
	if (dp->rank == 0) {
		unlink(idf);
		unlink(req);
	}
	ibc_comm_destroy(dp->ctx);
	dp->ctx = nc;
	dp->nranks++;
	*grown_p = 1;
	return 0;
}
