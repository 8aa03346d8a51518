// SPDX-License-Identifier: MIT
/*
 * dataloader.c - llm.c token shards, mmap'ed, read as (B, T) micro-batches
 * split across data-parallel ranks (sampling scheme in dataloader.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataloader.h"

static int shard_open(struct data_shard *s, const char *path, int T)
{
	int32_t h[256];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "dataloader: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(h)) {
		fprintf(stderr, "dataloader: %s: too short for a shard header\n", path);
		close(fd);
		return -1;
	}
	s->map_nbytes = st.st_size;
	s->map = mmap(NULL, s->map_nbytes, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (s->map == MAP_FAILED) {
		fprintf(stderr, "dataloader: mmap %s: %s\n", path, strerror(errno));
		s->map = NULL;
		return -1;
	}
	memcpy(h, s->map, sizeof(h));
	if (h[0] != DATA_MAGIC || h[1] != DATA_VERSION || h[2] < 0) {
		fprintf(stderr, "dataloader: %s: not an llm.c token shard (magic %d version %d)\n",
			path, DATA_MAGIC, DATA_VERSION);
		return -1;
	}
	s->ntokens = (size_t)h[2];
	if (s->map_nbytes != sizeof(h) + 2 * s->ntokens) {
		fprintf(stderr, "dataloader: %s: %zu bytes, header says %zu tokens\n", path,
			s->map_nbytes, s->ntokens);
		return -1;
	}
	s->tokens = (const uint16_t *)((const char *)s->map + sizeof(h));
	s->nsamples = s->ntokens > (size_t)T ? (s->ntokens - 1) / T : 0;
	return 0;
}

int dataloader_init(struct dataloader *d, const char *pattern, int B, int T, int rank, int nranks,
		    int shuffle, uint64_t seed)
{
	glob_t g;
	int ret;

	memset(d, 0, sizeof(*d));
	d->B = B;
	d->T = T;
	d->rank = rank;
	d->nranks = nranks;
	d->shuffle = shuffle;
	d->seed = seed;
	d->order_epoch = -1;
	if (B < 1 || T < 1 || nranks < 1 || rank < 0 || rank >= nranks) {
		fprintf(stderr, "dataloader: bad B %d T %d rank %d of %d\n", B, T, rank, nranks);
		return -1;
	}
	ret = glob(pattern, 0, NULL, &g);
	if (ret != 0) {
		fprintf(stderr, "dataloader: no file matches %s%s\n", pattern,
			ret == GLOB_NOMATCH ? " (run trainer/prepro/prepare.sh?)" : "");
		return -1;
	}
	d->nshards = (int)g.gl_pathc;
	d->paths = calloc(d->nshards, sizeof(char *));
	d->shards = calloc(d->nshards, sizeof(struct data_shard));
	d->first_sample = calloc(d->nshards + 1, sizeof(size_t));
	d->inputs = calloc((size_t)B * T, sizeof(int));
	d->targets = calloc((size_t)B * T, sizeof(int));
	if (!d->paths || !d->shards || !d->first_sample || !d->inputs || !d->targets) {
		globfree(&g);
		fprintf(stderr, "dataloader: out of memory\n");
		goto err;
	}
	for (int i = 0; i < d->nshards; i++) {
		d->paths[i] = strdup(g.gl_pathv[i]);
		if (!d->paths[i] || shard_open(&d->shards[i], g.gl_pathv[i], T) != 0) {
			globfree(&g);
			goto err;
		}
		d->first_sample[i + 1] = d->first_sample[i] + d->shards[i].nsamples;
	}
	globfree(&g);
	d->nsamples = d->first_sample[d->nshards];
	d->batches_per_epoch = d->nsamples / ((size_t)nranks * B);
	if (d->batches_per_epoch == 0) {
		fprintf(stderr,
			"dataloader: %s holds %zu samples of %d tokens, fewer than R*B = %d\n",
			pattern, d->nsamples, T + 1, nranks * B);
		goto err;
	}
	return 0;

err:
	dataloader_free(d);
	return -1;
}

void dataloader_free(struct dataloader *d)
{
	for (int i = 0; i < d->nshards; i++) {
		if (d->shards && d->shards[i].map)
			munmap(d->shards[i].map, d->shards[i].map_nbytes);
		if (d->paths)
			free(d->paths[i]);
	}
	free(d->paths);
	free(d->shards);
	free(d->first_sample);
	free(d->order);
	free(d->inputs);
	free(d->targets);
	memset(d, 0, sizeof(*d));
}

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* the seeded Fisher-Yates order of epoch e (identity without shuffle) */
static int make_order(struct dataloader *d, int64_t e)
{
	uint64_t s;

	if (d->order_epoch == e)
		return 0;
	if (!d->order) {
		d->order = malloc(d->nsamples * sizeof(uint32_t));
		if (!d->order) {
			fprintf(stderr, "dataloader: out of memory for %zu samples\n", d->nsamples);
			return -1;
		}
	}
	for (size_t i = 0; i < d->nsamples; i++)
		d->order[i] = (uint32_t)i;
	if (d->shuffle) {
		s = mix64(d->seed ^ mix64((uint64_t)e + 0x632be59bd9b4e019ULL));
		for (size_t i = d->nsamples - 1; i > 0; i--) {
			size_t k;
			uint32_t tmp;

			s = mix64(s + 0x9e3779b97f4a7c15ULL);
			k = (size_t)(s % (i + 1));
			tmp = d->order[i];
			d->order[i] = d->order[k];
			d->order[k] = tmp;
		}
	}
	d->order_epoch = e;
	return 0;
}

size_t dataloader_sample_index(struct dataloader *d, int64_t j, int row)
{
	int64_t e = j / (int64_t)d->batches_per_epoch;
	size_t i = (size_t)(j % (int64_t)d->batches_per_epoch);

	if (make_order(d, e) != 0)
		return (size_t)-1;
	return d->order[(i * d->nranks + d->rank) * d->B + row];
}

int dataloader_load(struct dataloader *d, int64_t j)
{
	for (int b = 0; b < d->B; b++) {
		size_t sample = dataloader_sample_index(d, j, b);
		int lo = 0;
		int hi = d->nshards - 1;
		const uint16_t *w;

		if (sample == (size_t)-1)
			return -1;
		/* the shard holding the sample: first_sample[lo] <= sample < first_sample[lo+1] */
		while (lo < hi) {
			int mid = (lo + hi + 1) / 2;

			if (d->first_sample[mid] <= sample)
				lo = mid;
			else
				hi = mid - 1;
		}
		w = d->shards[lo].tokens + (sample - d->first_sample[lo]) * d->T;
		for (int t = 0; t < d->T; t++) {
			d->inputs[b * d->T + t] = w[t];
			d->targets[b * d->T + t] = w[t + 1];
		}
	}
	d->epoch = j / (int64_t)d->batches_per_epoch;
	return 0;
}
