/* SPDX-License-Identifier: MIT */
/*
 * tune_cache.c - the per-host decision cache of the all-reduce re-timing
 * (tune_retime.c; IBC_TUNING_CACHE). A communicator's model is decided at
 * its first collective, often while the host is busiest (other ranks
 * starting, data loading), and the re-timing at a size class's 4th call
 * runs then too. Rank 0 therefore records every timing's choice in a file
 * per host, and a later communicator of the same shape (transport, rank
 * count, ranks on rank 0's host) adopts the recorded choice of each size
 * class from its first call and times the class for real only at its
 * 256th call (the re-timing's first checkpoint), which refreshes the
 * record. The model's broadcast carries what rank 0 read, so every rank
 * adopts the same choices. Off by default (IBC_TUNING_CACHE=off): a line
 * is one job's timing, and on a noisy host that spreads one job's noise to
 * the next ones (docs/algorithms.md, "The decision cache").
 *
 * The file, one line per shape and size class (the newest timing wins):
 *
 *   # comment
 *   v1 TRANSPORT NRANKS NLOCAL CLASS ALGORITHM NBYTES US UNIXTIME
 *   v1 shm 2 2 20 shm 1048576 77.2 1796224291
 *
 * (CLASS = floor(log2(bytes)); NBYTES and US: the timed call's size and the
 * chosen algorithm's time, for people reading it.) Writers take flock() on
 * FILE.lock and replace the file by rename(), so concurrent jobs on one
 * host neither interleave lines nor leave a half-written file; a rewrite
 * drops the lines that do not parse.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "coll/algo.h"
#include "tune/tune_internal.h"

#define CACHE_MAX_LINES 4096    /* a file longer than this keeps its first lines */
#define CACHE_LINE 256

static void cache_host(char *buf, size_t len)
{
	if (gethostname(buf, len) != 0 || !buf[0])
		snprintf(buf, len, "localhost");
	buf[len - 1] = '\0';
	/* a name for a file: no path separators */
	for (; *buf; buf++)
		if (*buf == '/')
			*buf = '_';
}

int ibc_tune_cache_path(char *buf, size_t len)
{
	const char *v = ibc_param_tuning_cache();
	const char *base;
	char host[128];

	if (!v || !*v || !strcmp(v, "off"))
		return 0;
	if (strcmp(v, "auto") != 0) {
		snprintf(buf, len, "%s", v);
		return 1;
	}
	cache_host(host, sizeof(host));
	base = getenv("XDG_CACHE_HOME");
	if (base && *base) {
		snprintf(buf, len, "%s/ibcoll/tuning-%s.txt", base, host);
		return 1;
	}
	base = getenv("HOME");
	if (!base || !*base)
		return 0;
	snprintf(buf, len, "%s/.cache/ibcoll/tuning-%s.txt", base, host);
	return 1;
}

static int algo_of_name(const char *name)
{
	int a;

	for (a = 0; a < IBC_ALGO_COUNT; a++)
		if (!strcmp(name, ibc_algo_name(a)))
			return a;
	return -1;
}

/* one line's fields; 1 when it parses */
struct cache_line {
	char tp[16];
	int nranks;
	int nlocal;
	int cls;
	char algo[16];
	unsigned long long nbytes;
	double us;
	long long when;
};

static int cache_parse(const char *s, struct cache_line *l)
{
	return sscanf(s, "v1 %15s %d %d %d %15s %llu %lf %lld", l->tp, &l->nranks, &l->nlocal,
		      &l->cls, l->algo, &l->nbytes, &l->us, &l->when) == 8 &&
	       l->cls >= 0 && l->cls < IBC_TUNE_CLASSES && algo_of_name(l->algo) >= 0;
}

static int cache_same_key(const struct cache_line *l, const char *tp, int nranks, int nlocal,
			  int cls)
{
	return !strcmp(l->tp, tp) && l->nranks == nranks && l->nlocal == nlocal &&
	       (cls < 0 || l->cls == cls);
}

int ibc_tune_cache_load(struct ibc_tune_model *m, int nlocal)
{
	const char *tp = ibc_tune_tp_name(m->tp);
	char path[1024];
	char s[CACHE_LINE];
	struct cache_line l;
	int bad = 0;
	int first_bad = 0;
	int lineno = 0;
	int n = 0;
	FILE *f;

	if (!ibc_tune_cache_path(path, sizeof(path)))
		return 0;
	f = fopen(path, "r");
	if (!f) {
		if (errno != ENOENT)
			IBC_LOG_WARN(TUNING, "IBC_TUNING_CACHE %s cannot be read (%s): the tuner decides without it",
				     path, strerror(errno));
		return 0;
	}
	while (fgets(s, sizeof(s), f) && lineno < CACHE_MAX_LINES) {
		lineno++;
		if (s[0] == '#' || s[0] == '\n')
			continue;
		if (!cache_parse(s, &l)) {
			if (!bad++)
				first_bad = lineno;
			continue;
		}
		if (!cache_same_key(&l, tp, m->nranks, nlocal, -1))
			continue;
		if (m->cached_algo[l.cls] < 0)
			n++;
		m->cached_algo[l.cls] = (int8_t)algo_of_name(l.algo);
	}
	fclose(f);
	if (bad)
		IBC_LOG_WARN(TUNING, "IBC_TUNING_CACHE %s: %d line(s) not of the form 'v1 TRANSPORT NRANKS NLOCAL CLASS ALGORITHM NBYTES US UNIXTIME' skipped (the first at line %d)",
			     path, bad, first_bad);
	if (n)
		IBC_LOG_INFO(TUNING, "IBC_TUNING_CACHE %s: all-reduce choices of %d size classes for %d ranks (%d on this host) over %s",
			     path, n, (int)m->nranks, nlocal, tp);
	return n;
}

/* mkdir -p of @path's directory (the cache's own directory under auto) */
static void cache_mkdirs(const char *path)
{
	char d[1024];
	char *p;

	snprintf(d, sizeof(d), "%s", path);
	p = strrchr(d, '/');
	if (!p || p == d)
		return;
	*p = '\0';
	for (p = d + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		(void)mkdir(d, 0755);
		*p = '/';
	}
	(void)mkdir(d, 0755);
}

void ibc_tune_cache_store(const struct ibc_tune_model *m, int nlocal, int cls, int algo,
			  size_t nbytes, double us)
{
	const char *tp = ibc_tune_tp_name(m->tp);
	char path[1024];
	char lock[1100];
	char tmp[1100];
	char s[CACHE_LINE];
	struct cache_line l;
	int lineno = 0;
	int lfd;
	FILE *in;
	FILE *out;

	if (!ibc_tune_cache_path(path, sizeof(path)) || algo < 0 || cls < 0 ||
	    cls >= IBC_TUNE_CLASSES)
		return;
	cache_mkdirs(path);
	snprintf(lock, sizeof(lock), "%s.lock", path);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lfd < 0 || flock(lfd, LOCK_EX) != 0) {
		IBC_LOG_WARN(TUNING, "IBC_TUNING_CACHE %s: cannot lock %s (%s): this timing is not recorded",
			     path, lock, strerror(errno));
		if (lfd >= 0)
			close(lfd);
		return;
	}
	out = fopen(tmp, "w");
	if (!out) {
		IBC_LOG_WARN(TUNING, "IBC_TUNING_CACHE %s: cannot write %s (%s): this timing is not recorded",
			     path, tmp, strerror(errno));
		close(lfd);
		return;
	}
	in = fopen(path, "r");
	if (!in)
		fprintf(out, "# ibcoll's all-reduce decisions on this host (IBC_TUNING_CACHE, src/tune/tune_cache.c)\n"
			     "# v1 TRANSPORT NRANKS NLOCAL CLASS ALGORITHM NBYTES US UNIXTIME\n");
	while (in && fgets(s, sizeof(s), in) && lineno++ < CACHE_MAX_LINES) {
		/* keep comments and the other valid lines; drop the line this
		 * timing replaces and those that do not parse (load warned of them) */
		if (s[0] != '#' && (!cache_parse(s, &l) || cache_same_key(&l, tp, m->nranks, nlocal, cls)))
			continue;
		fputs(s, out);
		if (!strchr(s, '\n'))
			fputc('\n', out);
	}
	if (in)
		fclose(in);
	fprintf(out, "v1 %s %d %d %d %s %zu %.1f %lld\n", tp, (int)m->nranks, nlocal, cls,
		ibc_algo_name(algo), nbytes, us, (long long)time(NULL));
	if (fclose(out) != 0 || rename(tmp, path) != 0) {
		IBC_LOG_WARN(TUNING, "IBC_TUNING_CACHE %s: cannot replace it (%s): this timing is not recorded",
			     path, strerror(errno));
		(void)unlink(tmp);
	}
	flock(lfd, LOCK_UN);
	close(lfd);
}
