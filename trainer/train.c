// SPDX-License-Identifier: MIT
/*
 * train.c - the data-parallel training step (interface in train.h).
 *
 * Gradient buckets. Parameters are laid out layer-major (gpt2.h), so the
 * gradients of one transformer block are contiguous. Backward fires event 0
 * (wte, wpe: the LM head's part) first, then one event per block from the
 * top (with lnf) down to block 0. Buckets are fixed at start-up: event 0 is
 * one bucket, and consecutive blocks are merged while they fit under
 * bucket_elems. On the last micro-step each bucket's reduction is issued as
 * soon as its last event fires, so it overlaps the rest of backward. The
 * encoder's contribution to dwte/dwpe, only known at the very end, is not
 * all-reduced: every rank all-gathers the (B,T) tokens and (B,T,C) residual
 * gradients of every rank (R*B*T*(C+1) numbers instead of (Vp+maxT)*C) and
 * adds them itself, in rank order, so all ranks compute the same bits.
 *
 *   micro-step G-1 backward:  LM head | lnf, block L-1 | ... | block 0 | encoder
 *   communicator:                  [bucket wte,wpe][bucket top blocks]...[tokens,dres]
 *
 * ZeRO-1 (Rajbhandari et al. 2020, stage 1): each bucket of n elements is
 * reduce-scattered, rank r owning elements [r*q, (r+1)*q), q = n / R; the
 * n - R*q tail is all-reduced and updated by every rank. Each rank keeps
 * AdamW moments for its part only, updates it, and the buckets are
 * all-gathered back into full parameters.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train.h"

double trainer_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

float trainer_lr(const struct train_config *cfg, int step)
{
	float lr_min = cfg->lr * cfg->final_lr_frac;
	double ratio;

	if (step < cfg->warmup_steps)
		return cfg->lr * (float)(step + 1) / (float)cfg->warmup_steps;
	if (cfg->max_steps <= cfg->warmup_steps)
		return cfg->lr;
	ratio = (double)(step - cfg->warmup_steps) / (cfg->max_steps - cfg->warmup_steps);
	if (ratio > 1)
		ratio = 1;
	return lr_min + (float)(0.5 * (1.0 + cos(M_PI * ratio))) * (cfg->lr - lr_min);
}

/* ---- buckets and ownership ---- */

static int plan_buckets(struct trainer *tr)
{
	struct gpt2 *m = tr->model;
	int R = tr->dp.nranks;
	int n = 0;

	tr->buckets = calloc(m->nevents, sizeof(struct bucket));
	if (!tr->buckets)
		return -1;
	for (int e = 0; e < m->nevents; e++) {
		const struct gpt2_grad_event *ev = &m->events[e];
		struct bucket *prev = n > 0 ? &tr->buckets[n - 1] : NULL;

		/* events 1.. are adjacent blocks going down: merge into the previous
		 * bucket (it starts where this one ends) while under the cap */
		if (e >= 2 && prev && ev->off + ev->count == prev->off &&
		    prev->count + ev->count <= tr->cfg.bucket_elems) {
			prev->off = ev->off;
			prev->count += ev->count;
			prev->event = e;
			continue;
		}
		tr->buckets[n].off = ev->off;
		tr->buckets[n].count = ev->count;
		tr->buckets[n].event = e;
		n++;
	}
	tr->nbuckets = n;
	for (int i = 0; i < n; i++)
		tr->buckets[i].shard = tr->cfg.zero ? tr->buckets[i].count / R : 0;
	return 0;
}

/* the parameter ranges this rank updates, and the size of its AdamW state */
static int plan_ownership(struct trainer *tr)
{
	int r = tr->dp.rank;
	int R = tr->dp.nranks;
	size_t so = 0;

	if (!tr->cfg.zero) {
		tr->owned = calloc(1, sizeof(struct owned_range));
		if (!tr->owned)
			return -1;
		tr->owned[0].lo = 0;
		tr->owned[0].hi = tr->model->num_params;
		tr->nowned = 1;
		tr->state_count = tr->model->num_params;
		return 0;
	}
	tr->owned = calloc(2 * tr->nbuckets, sizeof(struct owned_range));
	if (!tr->owned)
		return -1;
	tr->nowned = 0;
	for (int i = 0; i < tr->nbuckets; i++) {
		const struct bucket *b = &tr->buckets[i];
		size_t q = b->shard;

		if (q > 0) {
			tr->owned[tr->nowned++] =
			    (struct owned_range){b->off + r * q, b->off + (r + 1) * q, so};
			so += q;
		}
		if (b->count > R * q) {
			tr->owned[tr->nowned++] =
			    (struct owned_range){b->off + R * q, b->off + b->count, so};
			so += b->count - R * q;
		}
	}
	tr->state_count = so;
	return 0;
}

int trainer_init(struct trainer *tr, struct gpt2 *model, const struct train_config *cfg,
		 const struct dp *dp, const char *train_pattern, const char *val_pattern)
{
	int R = dp->nranks;
	size_t BT = (size_t)cfg->B * cfg->T;

	memset(tr, 0, sizeof(*tr));
	tr->cfg = *cfg;
	tr->model = model;
	tr->dp = *dp;
	if (cfg->B < 1 || cfg->T < 1 || cfg->G < 1 || cfg->T > model->cfg.max_seq_len ||
	    cfg->max_steps < 1 || R < 1 || (R > 1 && !dp->ops) || cfg->zero < 0 || cfg->zero > 1) {
		fprintf(
		    stderr, "train: bad config B %d T %d (maxT %d) G %d steps %d R %d zero %d\n",
		    cfg->B, cfg->T, model->cfg.max_seq_len, cfg->G, cfg->max_steps, R, cfg->zero);
		goto err;
	}
	if (tr->cfg.bucket_elems == 0)
		tr->cfg.bucket_elems = 1;
	if (tr->cfg.vranks == 0)
		tr->cfg.vranks = R;
	if (tr->cfg.vranks < 1 || (long long)tr->cfg.vranks * cfg->G < R) {
		fprintf(stderr, "train: a global batch of %d micro-batches (--vranks x -g) cannot be split among %d ranks\n",
			tr->cfg.vranks * cfg->G, R);
		goto err;
	}
	/* as rank 0 of V: trainer_step_grads() reads the rows of each virtual rank */
	if (dataloader_init(&tr->train, train_pattern, cfg->B, cfg->T, 0, tr->cfg.vranks, 1,
			    cfg->data_seed) != 0)
		goto err;
	if (val_pattern && cfg->val_batches > 0) {
		if (dataloader_init(&tr->val, val_pattern, cfg->B, cfg->T, dp->rank, R, 0, 0) != 0)
			goto err;
		tr->have_val = 1;
	}
	if (plan_buckets(tr) != 0 || plan_ownership(tr) != 0)
		goto err_nomem;
	tr->m = calloc(tr->state_count ? tr->state_count : 1, sizeof(float));
	tr->v = calloc(tr->state_count ? tr->state_count : 1, sizeof(float));
	if (!tr->m || !tr->v)
		goto err_nomem;
	if (R > 1 && dp->ops->register_buffer) {
		/* the buffers every step communicates: registered once, for the whole run */
		size_t nb = model->num_params * sizeof(floatX);

		/* an optimisation only: without it every step registers them again */
		if (dp->ops->register_buffer(dp->ctx, model->params.mem, nb, &tr->reg[0]) != 0 ||
		    dp->ops->register_buffer(dp->ctx, model->grads.mem, nb, &tr->reg[1]) != 0)
			fprintf(stderr, "train: rank %d: %s unregistered (see above); the steps register %s as they go\n",
				dp->rank, tr->reg[0] ? "the gradients stay" : "parameters and gradients stay",
				tr->reg[0] ? "them" : "both");
	}
	if (R > 1) {
		tr->gather_tokens = malloc(R * BT * sizeof(int));
		tr->gather_dres = malloc(R * BT * model->cfg.channels * sizeof(floatX));
		if (!tr->gather_tokens || !tr->gather_dres)
			goto err_nomem;
	}
	return 0;

err_nomem:
	fprintf(stderr, "train: out of memory\n");
err:
	trainer_free(tr);
	return -1;
}

void trainer_free(struct trainer *tr)
{
	for (int i = 0; i < 2; i++) {
		if (tr->reg[i] && tr->dp.ops && tr->dp.ops->deregister_buffer)
			tr->dp.ops->deregister_buffer(tr->dp.ctx, tr->reg[i]);
		tr->reg[i] = NULL;
	}
	if (tr->train.paths)
		dataloader_free(&tr->train);
	if (tr->val.paths)
		dataloader_free(&tr->val);
	gpt2_destroy(tr->model);
	free(tr->buckets);
	free(tr->owned);
	free(tr->m);
	free(tr->v);
	free(tr->gather_tokens);
	free(tr->gather_dres);
	memset(tr, 0, sizeof(*tr));
}

/* ---- the step ---- */

struct bwd_ctx {
	struct trainer *tr;
	int issue; /* 1: issue buckets from the hook (overlap) */
	int failed;
};

static int bucket_issue(struct trainer *tr, struct bucket *b)
{
	const struct dp_ops *ops = tr->dp.ops;
	floatX *g = tr->model->grads.mem + b->off;
	int R = tr->dp.nranks;

	b->t_issue = trainer_now_s();
	b->done = 0;
	b->req = NULL;
	b->req_tail = NULL;
	if (!tr->cfg.zero)
		return ops->iallreduce_avg(tr->dp.ctx, g, b->count, &b->req);
	if (b->shard > 0 && ops->ireduce_scatter_avg(tr->dp.ctx, g, b->shard, &b->req) != 0)
		return -1;
	if (b->count > R * b->shard)
		return ops->iallreduce_avg(tr->dp.ctx, g + R * b->shard, b->count - R * b->shard,
					   &b->req_tail);
	return 0;
}

/* note completion times of issued buckets without blocking */
static void buckets_poll(struct trainer *tr, int upto)
{
	for (int i = 0; i < upto; i++) {
		struct bucket *b = &tr->buckets[i];
		int d1 = 1;
		int d2 = 1;

		if (b->done || (!b->req && !b->req_tail))
			continue;
		if (b->req && tr->dp.ops->test(tr->dp.ctx, b->req, &d1) != 0)
			d1 = 0;
		if (b->req_tail && tr->dp.ops->test(tr->dp.ctx, b->req_tail, &d2) != 0)
			d2 = 0;
		if (d1 && d2) {
			b->done = 1;
			b->t_done = trainer_now_s();
		}
	}
}

static void on_grads_ready(void *ctx, int event)
{
	struct bwd_ctx *c = ctx;
	struct trainer *tr = c->tr;
	int issued = 0;

	if (!c->issue || c->failed)
		return;
	for (int i = 0; i < tr->nbuckets; i++) {
		if (tr->buckets[i].event == event && bucket_issue(tr, &tr->buckets[i]) != 0)
			c->failed = 1;
		if (tr->buckets[i].event <= event)
			issued = i + 1;
	}
	buckets_poll(tr, issued);
}

/* wait for every bucket; returns the busy time of the communicator in ms */
static int buckets_wait(struct trainer *tr, double *busy_ms_p)
{
	const struct dp_ops *ops = tr->dp.ops;
	double busy = 0;
	double prev_done = 0;
	int bad = 0;

	for (int i = 0; i < tr->nbuckets; i++) {
		struct bucket *b = &tr->buckets[i];

		if (b->req)
			bad |= ops->wait(tr->dp.ctx, b->req) != 0;
		if (b->req_tail)
			bad |= ops->wait(tr->dp.ctx, b->req_tail) != 0;
		if (!b->done)
			b->t_done = trainer_now_s();
		b->done = 1;
		b->req = NULL;
		b->req_tail = NULL;
		/* operations run one after another in issue order */
		busy += b->t_done - (b->t_issue > prev_done ? b->t_issue : prev_done);
		prev_done = b->t_done;
	}
	*busy_ms_p = busy * 1e3;
	return bad ? -1 : 0;
}

static int check_tokens(const struct trainer *tr, const struct dataloader *d)
{
	int V = tr->model->cfg.vocab_size;

	for (int i = 0; i < d->B * d->T; i++)
		if (d->inputs[i] >= V || d->targets[i] >= V) {
			fprintf(stderr, "train: token id %d >= vocabulary %d in %s data\n",
				d->inputs[i] >= V ? d->inputs[i] : d->targets[i], V,
				d == &tr->train ? "training" : "validation");
			return -1;
		}
	return 0;
}

void trainer_abandon(struct trainer *tr)
{
	const struct dp_ops *ops = tr->dp.ops;

	for (int i = 0; ops && i < tr->nbuckets; i++) {
		struct bucket *b = &tr->buckets[i];

		if (b->req)
			ops->wait(tr->dp.ctx, b->req);
		if (b->req_tail)
			ops->wait(tr->dp.ctx, b->req_tail);
		b->req = NULL;
		b->req_tail = NULL;
	}
	if (ops && tr->req_tok)
		ops->wait(tr->dp.ctx, tr->req_tok);
	if (ops && tr->req_dres)
		ops->wait(tr->dp.ctx, tr->req_dres);
	tr->req_tok = NULL;
	tr->req_dres = NULL;
}

int trainer_step_grads(struct trainer *tr)
{
	struct gpt2 *m = tr->model;
	struct train_config *c = &tr->cfg;
	const struct dp_ops *ops = tr->dp.ops;
	int R = tr->dp.nranks;
	int r = tr->dp.rank;
	int V = c->vranks;
	size_t BT = (size_t)c->B * c->T;
	size_t BTC = BT * m->cfg.channels;
	struct step_stats *st = &tr->stats;
	double t;
	double loss_sum = 0;
	double red[2];
	/* this rank's units of the step (train.h) and their gradient scale */
	int64_t units = (int64_t)V * c->G;
	int64_t u_lo = units * r / R;
	int64_t u_hi = units * (r + 1) / R;
	floatX wscale = (floatX)((double)R / (double)units);

	memset(st, 0, sizeof(*st));
	st->step_ms = trainer_now_s();  /* the start, until trainer_step_apply() */
	gpt2_zero_grad(m);
	for (int64_t u = u_lo; u < u_hi; u++) {
		int v = (int)(u / c->G);
		int64_t j = (int64_t)tr->step * c->G + u % c->G;
		int last = u == u_hi - 1 && R > 1;
		struct bwd_ctx bc = {tr, c->overlap, 0};
		double loss;
		double t_bwd_end;

		t = trainer_now_s();
		tr->train.rank = v;
		if (dataloader_load(&tr->train, j) != 0 || check_tokens(tr, &tr->train) != 0)
			return -1;
		loss = gpt2_forward(m, tr->train.inputs, tr->train.targets, c->B, c->T);
		if (loss < 0)
			return -1;
		loss_sum += loss;
		if (!last) {
			gpt2_backward(m, wscale, NULL, NULL);
			st->compute_ms += (trainer_now_s() - t) * 1e3;
			continue;
		}
		/* last unit with R > 1: reduce while backward runs */
		gpt2_backward(m, wscale, on_grads_ready, &bc);
		if (bc.failed)
			goto fail;
		if (!c->overlap)
			for (int i = 0; i < tr->nbuckets; i++)
				if (bucket_issue(tr, &tr->buckets[i]) != 0)
					goto fail;
		/* the deferred encoder gradients of every rank */
		if (ops->iallgather_bytes(tr->dp.ctx, tr->train.inputs, tr->gather_tokens,
					  BT * sizeof(int), &tr->req_tok) != 0 ||
		    ops->iallgather_bytes(tr->dp.ctx, m->acts.dres, tr->gather_dres,
					  BTC * sizeof(floatX), &tr->req_dres) != 0)
			goto fail;
		t_bwd_end = trainer_now_s();
		st->compute_ms += (t_bwd_end - t) * 1e3;
		{
			/* every request is waited for, also after a failure */
			int bad = buckets_wait(tr, &st->comm_ms) != 0;

			bad |= ops->wait(tr->dp.ctx, tr->req_tok) != 0;
			tr->req_tok = NULL;
			bad |= ops->wait(tr->dp.ctx, tr->req_dres) != 0;
			tr->req_dres = NULL;
			if (bad)
				return -1;
		}
		t = trainer_now_s();
		st->exposed_ms = (t - t_bwd_end) * 1e3;
		for (int i = 0; i < tr->nowned; i++)
			if (tr->owned[i].lo < m->events[0].count)
				gpt2_encoder_backward_apply(m, tr->gather_tokens, tr->gather_dres,
							    R * BT, c->T, (floatX)(1.0 / R),
							    tr->owned[i].lo, tr->owned[i].hi);
	}
	st->hidden_frac = st->comm_ms > 0 ? 1.0 - st->exposed_ms / st->comm_ms : 0;
	if (st->hidden_frac < 0)
		st->hidden_frac = 0;

	/* loss over all ranks; global gradient norm, each element counted once */
	red[0] = loss_sum / c->G;
	red[1] = 0;
	if (!c->zero || R == 1) {
		/* the averaged gradients are the same on every rank: rank 0 sums */
		if (r == 0)
			red[1] = gpt2_sumsq(m->grads.mem, m->num_params);
	} else {
		/* own shards, plus the replicated tails on rank 0 only */
		for (int i = 0; i < tr->nbuckets; i++) {
			const struct bucket *b = &tr->buckets[i];

			if (b->shard > 0)
				red[1] +=
				    gpt2_sumsq(m->grads.mem + b->off + r * b->shard, b->shard);
			if (r == 0 && b->count > R * b->shard)
				red[1] += gpt2_sumsq(m->grads.mem + b->off + R * b->shard,
						     b->count - R * b->shard);
		}
	}
	if (R > 1 && ops->allreduce_sum_f64(tr->dp.ctx, red, 2) != 0)
		return -1;
	/* the mean over the V * G units: each rank's sum of its losses / G, over V */
	st->loss = red[0] / V;
	st->grad_norm = sqrt(red[1]);
	return 0;
fail:
	trainer_abandon(tr);
	return -1;
}

int trainer_step_apply(struct trainer *tr)
{
	struct gpt2 *m = tr->model;
	struct train_config *c = &tr->cfg;
	const struct dp_ops *ops = tr->dp.ops;
	int R = tr->dp.nranks;
	struct step_stats *st = &tr->stats;
	double t_start = st->step_ms;
	double t = trainer_now_s();
	float scale = 1;
	struct gpt2_adamw opt;

	if (c->grad_clip > 0 && st->grad_norm > c->grad_clip)
		scale = (float)(c->grad_clip / st->grad_norm);
	st->lr = trainer_lr(c, tr->step);
	opt = (struct gpt2_adamw){.lr = st->lr,
				  .beta1 = c->beta1,
				  .beta2 = c->beta2,
				  .eps = c->eps,
				  .weight_decay = c->weight_decay,
				  .grad_scale = scale,
				  .t = tr->step + 1};
	for (int i = 0; i < tr->nowned; i++) {
		const struct owned_range *o = &tr->owned[i];

		gpt2_adamw_update(m, m->grads.mem, tr->m + o->state_off, tr->v + o->state_off,
				  o->lo, o->hi, &opt);
	}
	st->opt_ms = (trainer_now_s() - t) * 1e3;

	if (c->zero && R > 1) {
		t = trainer_now_s();
		for (int i = 0; i < tr->nbuckets; i++) {
			struct bucket *b = &tr->buckets[i];

			b->req = NULL;
			if (b->shard > 0 && ops->iallgather(tr->dp.ctx, m->params.mem + b->off,
							    b->shard, &b->req) != 0) {
				trainer_abandon(tr);
				return -1;
			}
		}
		for (int i = 0; i < tr->nbuckets; i++) {
			if (tr->buckets[i].req && ops->wait(tr->dp.ctx, tr->buckets[i].req) != 0) {
				tr->buckets[i].req = NULL;
				trainer_abandon(tr);
				return -1;
			}
			tr->buckets[i].req = NULL;
		}
		st->gather_ms = (trainer_now_s() - t) * 1e3;
	}
	tr->step++;
	st->step_ms = (trainer_now_s() - t_start) * 1e3;
	return 0;
}

int trainer_step(struct trainer *tr)
{
	if (trainer_step_grads(tr) != 0)
		return -1;
	return trainer_step_apply(tr);
}

int trainer_resize(struct trainer *tr, const struct dp *dp)
{
	struct gpt2 *m = tr->model;
	size_t BT = (size_t)tr->cfg.B * tr->cfg.T;
	int R = dp->nranks;

	if ((long long)tr->cfg.vranks * tr->cfg.G < R) {
		fprintf(stderr, "train: %d ranks cannot share a global batch of %d micro-batches\n", R,
			tr->cfg.vranks * tr->cfg.G);
		return -1;
	}
	/* the old communicator was destroyed and released its registrations */
	tr->reg[0] = NULL;
	tr->reg[1] = NULL;
	tr->dp = *dp;
	free(tr->buckets);
	free(tr->owned);
	tr->buckets = NULL;
	tr->owned = NULL;
	if (plan_buckets(tr) != 0 || plan_ownership(tr) != 0)
		goto nomem;
	if (tr->cfg.zero) {
		/* new shards: the moments must be loaded again (trainer_load_state()) */
		free(tr->m);
		free(tr->v);
		tr->m = calloc(tr->state_count ? tr->state_count : 1, sizeof(float));
		tr->v = calloc(tr->state_count ? tr->state_count : 1, sizeof(float));
		if (!tr->m || !tr->v)
			goto nomem;
	}
	free(tr->gather_tokens);
	free(tr->gather_dres);
	tr->gather_tokens = NULL;
	tr->gather_dres = NULL;
	if (R > 1) {
		tr->gather_tokens = malloc(R * BT * sizeof(int));
		tr->gather_dres = malloc(R * BT * m->cfg.channels * sizeof(floatX));
		if (!tr->gather_tokens || !tr->gather_dres)
			goto nomem;
		if (dp->ops->register_buffer) {
			size_t nb = m->num_params * sizeof(floatX);

			if (dp->ops->register_buffer(dp->ctx, m->params.mem, nb, &tr->reg[0]) != 0 ||
			    dp->ops->register_buffer(dp->ctx, m->grads.mem, nb, &tr->reg[1]) != 0)
				fprintf(stderr, "train: rank %d: buffers unregistered after the resize (see above)\n",
					dp->rank);
		}
	}
	if (tr->have_val) {
		/* validation rows follow the ranks of the moment (identity order: no state) */
		tr->val.rank = dp->rank;
		tr->val.nranks = R;
		tr->val.batches_per_epoch = tr->val.nsamples / ((size_t)R * tr->val.B);
	}
	return 0;
nomem:
	fprintf(stderr, "train: out of memory\n");
	return -1;
}

int trainer_bcast_state(struct trainer *tr)
{
	const struct dp_ops *ops = tr->dp.ops;
	int32_t step = tr->step;

	if (tr->dp.nranks == 1)
		return 0;
	if (tr->cfg.zero || !ops->broadcast_bytes) {
		fprintf(stderr, "train: the state of a ZeRO-1 run cannot be broadcast\n");
		return -1;
	}
	if (ops->broadcast_bytes(tr->dp.ctx, &step, sizeof(step)) != 0 ||
	    ops->broadcast_bytes(tr->dp.ctx, tr->model->params.mem,
				 tr->model->num_params * sizeof(floatX)) != 0 ||
	    ops->broadcast_bytes(tr->dp.ctx, tr->m, tr->state_count * sizeof(float)) != 0 ||
	    ops->broadcast_bytes(tr->dp.ctx, tr->v, tr->state_count * sizeof(float)) != 0)
		return -1;
	tr->step = step;
	return 0;
}

double trainer_val_loss(struct trainer *tr)
{
	double sum = 0;
	int n;

	if (!tr->have_val)
		return -1;
	n = tr->cfg.val_batches;
	if ((size_t)n > tr->val.batches_per_epoch)
		n = (int)tr->val.batches_per_epoch;
	for (int j = 0; j < n; j++) {
		double loss;

		if (dataloader_load(&tr->val, j) != 0 || check_tokens(tr, &tr->val) != 0)
			return -1;
		loss =
		    gpt2_forward(tr->model, tr->val.inputs, tr->val.targets, tr->cfg.B, tr->cfg.T);
		if (loss < 0)
			return -1;
		sum += loss;
	}
	sum /= n;
	if (tr->dp.nranks > 1) {
		if (tr->dp.ops->allreduce_sum_f64(tr->dp.ctx, &sum, 1) != 0)
			return -1;
		sum /= tr->dp.nranks;
	}
	return sum;
}

uint64_t trainer_param_hash(const struct trainer *tr)
{
	const unsigned char *p = (const unsigned char *)tr->model->params.mem;
	size_t n = tr->model->num_params * sizeof(floatX);
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* ---- optimizer state file ---- */

/*
 * Full-length moments (P) in layer-major order, assembled on every rank:
 * plain mode copies, ZeRO-1 all-gathers the shards bucket by bucket (the
 * replicated tails are already everywhere).
 */
static int gather_moment(struct trainer *tr, const float *mom, float *full)
{
	int R = tr->dp.nranks;
	floatX *tmp = NULL;

	if (!tr->cfg.zero) {
		memcpy(full, mom, tr->model->num_params * sizeof(float));
		return 0;
	}
	for (int i = 0; i < tr->nowned; i++) {
		const struct owned_range *o = &tr->owned[i];

		memcpy(full + o->lo, mom + o->state_off, (o->hi - o->lo) * sizeof(float));
	}
	if (R == 1)
		return 0;
	/* the all-gather moves floatX: stage through a floatX vector */
	tmp = malloc(tr->model->num_params * sizeof(floatX));
	if (!tmp) {
		fprintf(stderr, "train: out of memory gathering the optimizer state\n");
		return -1;
	}
	for (size_t i = 0; i < tr->model->num_params; i++)
		tmp[i] = full[i];
	for (int i = 0; i < tr->nbuckets; i++) {
		struct bucket *b = &tr->buckets[i];
		void *req = NULL;

		if (b->shard == 0)
			continue;
		if (tr->dp.ops->iallgather(tr->dp.ctx, tmp + b->off, b->shard, &req) != 0 ||
		    tr->dp.ops->wait(tr->dp.ctx, req) != 0) {
			free(tmp);
			return -1;
		}
	}
	for (size_t i = 0; i < tr->model->num_params; i++)
		full[i] = (float)tmp[i];
	free(tmp);
	return 0;
}

/* write/read P floats from layer-major @full in llm.c tensor order */
static int moment_io(struct gpt2 *m, float *full, FILE *f, int writing)
{
	for (int k = 0; k < GPT2_NUM_TENSORS; k++) {
		int layered = k >= GPT2_LN1W && k <= GPT2_FCPROJB;

		for (int l = 0; l < (layered ? m->cfg.num_layers : 1); l++) {
			size_t off;
			size_t count;

			gpt2_tensor_slice(m, k, l, &off, &count);
			if (writing ? fwrite(full + off, sizeof(float), count, f) != count
				    : fread(full + off, sizeof(float), count, f) != count)
				return -1;
		}
	}
	return 0;
}

int trainer_save_state(struct trainer *tr, const char *path)
{
	struct gpt2 *m = tr->model;
	size_t P = m->num_params;
	int32_t h[GPT2_HEADER_INTS] = {0};
	float *full = malloc(P * sizeof(float));
	char tmp[4096];
	FILE *f = NULL;
	int bad = 0;

	if (!full) {
		fprintf(stderr, "train: out of memory saving the optimizer state\n");
		return -1;
	}
	h[0] = GPT2_STATE_MAGIC;
	h[1] = GPT2_STATE_VERSION;
	h[2] = tr->step;
	h[3] = tr->cfg.vranks; /* the global batch is V * B * G (V = R unless elastic) */
	h[4] = tr->cfg.zero;
	h[5] = tr->cfg.B;
	h[6] = tr->cfg.T;
	h[7] = tr->cfg.G;
	h[8] = (int32_t)(P & 0x7fffffff);
	h[9] = (int32_t)(P >> 31);
	h[10] = m->cfg.num_layers;
	h[11] = m->cfg.channels;
	h[12] = m->cfg.padded_vocab_size;
	h[13] = m->cfg.max_seq_len;
	h[14] = (int32_t)(tr->cfg.data_seed & 0xffffffffu);
	h[15] = (int32_t)(tr->cfg.data_seed >> 32);
	/* every rank takes part in the gathers; rank 0 writes */
	for (int pass = 0; pass < 2 && !bad; pass++) {
		if (gather_moment(tr, pass == 0 ? tr->m : tr->v, full) != 0) {
			bad = 1;
			break;
		}
		if (tr->dp.rank != 0)
			continue;
		if (pass == 0) {
			snprintf(tmp, sizeof(tmp), "%s.tmp", path);
			f = fopen(tmp, "wb");
			if (!f || fwrite(h, sizeof(h), 1, f) != 1) {
				fprintf(stderr, "train: cannot write %s: %s\n", tmp,
					strerror(errno));
				bad = 1;
				break;
			}
		}
		bad |= moment_io(m, full, f, 1) != 0;
	}
	free(full);
	if (tr->dp.rank != 0)
		return bad ? -1 : 0;
	if (f) {
		bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
		bad |= fclose(f) != 0;
	}
	if (bad || rename(tmp, path) != 0) {
		fprintf(stderr, "train: writing %s failed\n", path);
		unlink(tmp);
		return -1;
	}
	return 0;
}

int trainer_load_state(struct trainer *tr, const char *path)
{
	struct gpt2 *m = tr->model;
	size_t P = m->num_params;
	int32_t h[GPT2_HEADER_INTS];
	float *full = NULL;
	FILE *f = fopen(path, "rb");
	long long saved_batch;
	long long batch = (long long)tr->cfg.vranks * tr->cfg.B * tr->cfg.G;

	if (!f) {
		fprintf(stderr, "train: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fread(h, sizeof(h), 1, f) != 1 || h[0] != GPT2_STATE_MAGIC ||
	    h[1] != GPT2_STATE_VERSION) {
		fprintf(stderr, "train: %s is not an optimizer state file (magic %d version %d)\n",
			path, GPT2_STATE_MAGIC, GPT2_STATE_VERSION);
		goto err;
	}
	if (((size_t)h[8] | ((size_t)h[9] << 31)) != P || h[10] != m->cfg.num_layers ||
	    h[11] != m->cfg.channels || h[12] != m->cfg.padded_vocab_size ||
	    h[13] != m->cfg.max_seq_len) {
		fprintf(stderr, "train: %s belongs to another model shape\n", path);
		goto err;
	}
	saved_batch = (long long)h[3] * h[5] * h[7];
	if (h[6] != tr->cfg.T || saved_batch != batch) {
		fprintf(stderr,
			"train: %s was saved with T %d and V*B*G %lld; this run has T %d and %lld, "
			"so the data order would not continue\n",
			path, h[6], saved_batch, tr->cfg.T, batch);
		goto err;
	}
	full = malloc(P * sizeof(float));
	if (!full) {
		fprintf(stderr, "train: out of memory loading the optimizer state\n");
		goto err;
	}
	for (int pass = 0; pass < 2; pass++) {
		float *mom = pass == 0 ? tr->m : tr->v;

		if (moment_io(m, full, f, 0) != 0) {
			fprintf(stderr, "train: %s is truncated\n", path);
			goto err;
		}
		for (int i = 0; i < tr->nowned; i++) {
			const struct owned_range *o = &tr->owned[i];

			memcpy(mom + o->state_off, full + o->lo, (o->hi - o->lo) * sizeof(float));
		}
	}
	tr->step = h[2];
	tr->cfg.data_seed = (uint64_t)(uint32_t)h[14] | ((uint64_t)(uint32_t)h[15] << 32);
	tr->train.seed = tr->cfg.data_seed;
	tr->train.order_epoch = -1;
	free(full);
	fclose(f);
	return 0;

err:
	free(full);
	fclose(f);
	return -1;
}
