/* SPDX-License-Identifier: MIT */
/*
 * dataloader.h - (B, T) micro-batches from llm.c token shards, split across
 * R data-parallel ranks.
 *
 * Shard format (llm.c, written by trainer/prepro/prepro_corpus.mjs or
 * llm.c's dev/data scripts): 256 x int32 header {20240520, 1, ntokens, ...},
 * then ntokens x uint16 little-endian token ids.
 *
 * Sampling: every shard is cut into windows of T + 1 tokens starting at
 * multiples of T (inputs are tokens 0..T-1, targets 1..T). The windows of
 * all shards, in shard order, are the N samples of an epoch. Global
 * micro-batch j (R * B samples) is batch i = j mod nb of epoch e = j / nb,
 * nb = floor(N / (R * B)); rank r reads rows [(i * R + r) * B, + B) of the
 * epoch's order, which is a seeded permutation (training) or the identity
 * (validation). Hence ranks read disjoint samples, any (R, B) with the same
 * R * B sees the same global batch, and the position in the data is a pure
 * function of j (resume needs no loader state).
 */
#ifndef IBC_TRAINER_DATALOADER_H
#define IBC_TRAINER_DATALOADER_H

#include <stddef.h>
#include <stdint.h>

#define DATA_MAGIC 20240520
#define DATA_VERSION 1

struct data_shard {
	void *map; /* mmap of the whole file */
	size_t map_nbytes;
	const uint16_t *tokens; /* (ntokens) */
	size_t ntokens;
	size_t nsamples; /* windows of T + 1 */
};

struct dataloader {
	int B;	     /* micro-batch rows per rank */
	int T;	     /* sequence length */
	int rank;    /* r */
	int nranks;  /* R */
	int shuffle; /* 1: seeded permutation per epoch */
	uint64_t seed;
	int nshards;
	char **paths;		   /* [nshards] */
	struct data_shard *shards; /* [nshards] */
	size_t *first_sample;	   /* [nshards + 1] prefix sums of nsamples */
	size_t nsamples;	   /* N */
	size_t batches_per_epoch;  /* nb */
	uint32_t *order;	   /* (N) sample order of epoch order_epoch */
	int64_t order_epoch;
	int *inputs;   /* (B, T) */
	int *targets;  /* (B, T) */
	int64_t epoch; /* of the last load */
};

/**
 * dataloader_init() - Open the shards matching @pattern (glob, sorted).
 * @B, @T:    micro-batch shape per rank.
 * @rank, @nranks: this rank r and world size R.
 * @shuffle, @seed: training order, the same on every rank.
 * Return: 0, or -1 with a message on stderr (no match, bad header,
 *         truncated shard, fewer than R * B samples, no memory).
 */
int dataloader_init(struct dataloader *d, const char *pattern, int B, int T, int rank, int nranks,
		    int shuffle, uint64_t seed);
void dataloader_free(struct dataloader *d);

/**
 * dataloader_load() - Fill d->inputs and d->targets with this rank's part
 * of global micro-batch @j (>= 0).
 * Return: 0, or -1 (no memory for the epoch order).
 */
int dataloader_load(struct dataloader *d, int64_t j);

/* global index of sample @row of this rank's part of micro-batch @j */
size_t dataloader_sample_index(struct dataloader *d, int64_t j, int row);

#endif /* IBC_TRAINER_DATALOADER_H */
