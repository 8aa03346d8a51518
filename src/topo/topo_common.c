/* SPDX-License-Identifier: MIT */
/*
 * topo_common.c - topology decisions shared by both backends: the NIC a
 * rank uses (nearest to its GPU, or spread over NICs by locality), the
 * GPUDirect RDMA distance rule (IBC_NET_GDR_LEVEL) and small helpers
 * (natural sort, directory listing, PCI bus ids). The backend built in
 * (topo_hwloc.c or topo_flat.c) answers the questions of topo_internal.h.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "base/util.h"
#include "cuda/cuda.h"
#include "topo/topo_internal.h"

static const char *const topo_dist_names[IBC_TOPO_DIST_COUNT] = {
	[IBC_TOPO_PIX] = "PIX",
	[IBC_TOPO_PXB] = "PXB",
	[IBC_TOPO_PHB] = "PHB",
	[IBC_TOPO_NODE] = "NODE",
	[IBC_TOPO_SYS] = "SYS",
};

/* what each class means, for the reasons written to the log */
static const char *const topo_dist_help[IBC_TOPO_DIST_COUNT] = {
	[IBC_TOPO_PIX] = "same PCIe switch",
	[IBC_TOPO_PXB] = "several PCIe switches, one host bridge",
	[IBC_TOPO_PHB] = "through a CPU host bridge",
	[IBC_TOPO_NODE] = "different host bridges of one NUMA node",
	[IBC_TOPO_SYS] = "across NUMA nodes, or path unknown",
};

const char *ibc_topo_dist_name(enum ibc_topo_dist d)
{
	if (d == IBC_TOPO_DIST_COUNT)
		return "none";
	if ((unsigned)d >= IBC_TOPO_DIST_COUNT)
		return "?";
	return topo_dist_names[d];
}

void ibc_topo_appendf(char *buf, size_t len, const char *fmt, ...)
{
	size_t used;
	va_list ap;

	if (!buf || !len)
		return;
	used = strnlen(buf, len);
	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

int ibc_topo_natural_cmp(const char *a, const char *b)
{
	while (*a && *b) {
		if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			const char *ea;
			const char *eb;
			size_t la;
			size_t lb;
			int c;

			while (*a == '0' && isdigit((unsigned char)a[1]))
				a++;
			while (*b == '0' && isdigit((unsigned char)b[1]))
				b++;
			for (ea = a; isdigit((unsigned char)*ea); ea++)
				;
			for (eb = b; isdigit((unsigned char)*eb); eb++)
				;
			la = (size_t)(ea - a);
			lb = (size_t)(eb - b);
			if (la != lb)
				return la < lb ? -1 : 1;
			c = strncmp(a, b, la);
			if (c)
				return c;
			a = ea;
			b = eb;
			continue;
		}
		if (*a != *b)
			return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
		a++;
		b++;
	}
	return *a ? 1 : (*b ? -1 : 0);
}

static int topo_names_cmp(const void *pa, const void *pb)
{
	return ibc_topo_natural_cmp(*(char *const *)pa, *(char *const *)pb);
}

void ibc_topo_names_free(char **names, int n)
{
	int i;

	if (!names)
		return;
	for (i = 0; i < n; i++)
		ibc_free(names[i]);
	ibc_free(names);
}

ibc_status_t ibc_topo_list_dir(const char *dir, char ***names_p, int *n_p)
{
	ibc_status_t st = IBC_OK;
	struct dirent *de;
	char **names = NULL;
	int n = 0;
	int cap = 0;
	DIR *d;

	d = opendir(dir);
	if (!d) {
		/* no such class on this machine (no RDMA stack, no driver) */
		IBC_LOG_DEBUG(TOPO, "cannot list %s: %s", dir, strerror(errno));
		*names_p = NULL;
		*n_p = 0;
		return IBC_OK;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			int ncap = cap ? 2 * cap : 8;
			char **nn = ibc_calloc((size_t)ncap, sizeof(*nn), "topology device names");

			if (!nn) {
				st = IBC_ERR_NO_MEMORY;
				goto err_free_names;
			}
			if (n)
				memcpy(nn, names, (size_t)n * sizeof(*nn));
			ibc_free(names);
			names = nn;
			cap = ncap;
		}
		names[n] = ibc_strdup(de->d_name, "topology device name");
		if (!names[n]) {
			st = IBC_ERR_NO_MEMORY;
			goto err_free_names;
		}
		n++;
	}
	closedir(d);
	if (n > 1)
		qsort(names, (size_t)n, sizeof(*names), topo_names_cmp);
	*names_p = names;
	*n_p = n;
	return IBC_OK;

err_free_names:
	ibc_topo_names_free(names, n);
	closedir(d);
	return st;
}

int ibc_topo_parse_busid(const char *s, unsigned *dom_p, unsigned *bus_p, unsigned *dev_p,
			 unsigned *fn_p)
{
	unsigned v[4];
	int nv = 0;
	char sep[4];
	const char *p = s;

	if (!s)
		return -1;
	/* up to 4 hex fields separated by ':' ':' '.' */
	while (nv < 4) {
		unsigned long x;
		char *end;

		if (!isxdigit((unsigned char)*p))
			return -1;
		x = strtoul(p, &end, 16);
		if (x > 0xffffffffUL || end - p > 8)
			return -1;
		v[nv] = (unsigned)x;
		sep[nv] = *end;
		nv++;
		p = end;
		if (!*p)
			break;
		if (*p != ':' && *p != '.')
			return -1;
		p++;
	}
	if (*p)
		return -1;
	if (nv == 4 && sep[0] == ':' && sep[1] == ':' && sep[2] == '.') {
		*dom_p = v[0];
		v[0] = v[1];
		v[1] = v[2];
		v[2] = v[3];
	} else if (nv == 3 && sep[0] == ':' && sep[1] == '.') {
		*dom_p = 0;
	} else {
		return -1;
	}
	if (v[0] > 0xff || v[1] > 0x1f || v[2] > 7)
		return -1;
	*bus_p = v[0];
	*dev_p = v[1];
	*fn_p = v[2];
	return 0;
}

ibc_status_t ibc_topo_gpu_by_busid(struct ibc_topo *t, const char *busid, int *gpu_p)
{
	unsigned d0, b0, v0, f0;
	int g;

	if (!t || !busid || !gpu_p)
		return IBC_ERR_INVALID_ARG;
	if (ibc_topo_parse_busid(busid, &d0, &b0, &v0, &f0) != 0) {
		IBC_LOG_DEBUG(TOPO, "'%s' is not a PCI bus id", busid);
		return IBC_ERR_INVALID_ARG;
	}
	for (g = 0; g < ibc_topo_gpu_count(t); g++) {
		char buf[32];
		unsigned d, b, v, f;

		if (ibc_topo_gpu_busid(t, g, buf, sizeof(buf)) != IBC_OK ||
		    ibc_topo_parse_busid(buf, &d, &b, &v, &f) != 0)
			continue;
		if (d == d0 && b == b0 && v == v0 && f == f0) {
			*gpu_p = g;
			return IBC_OK;
		}
	}
	IBC_LOG_DEBUG(TOPO, "no GPU at PCI %s in the topology", busid);
	return IBC_ERR_INVALID_ARG;
}

ibc_status_t ibc_topo_gpu_nic_dist(struct ibc_topo *t, int gpu, const char *nic,
				   enum ibc_topo_dist *d_p)
{
	if (!t || !nic || !d_p || gpu < 0 || gpu >= ibc_topo_gpu_count(t))
		return IBC_ERR_INVALID_ARG;
	*d_p = ibc_topo_dist_of(t, gpu, ibc_topo_nic_find(t, nic));
	return IBC_OK;
}

/* ---- the process-wide topology ------------------------------------------------ */

static pthread_mutex_t topo_shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibc_topo *topo_shared;    /* created once, never freed */

ibc_status_t ibc_topo_shared(struct ibc_topo **topo_p)
{
	ibc_status_t st = IBC_OK;

	if (!topo_p)
		return IBC_ERR_INVALID_ARG;
	pthread_mutex_lock(&topo_shared_lock);
	if (!topo_shared)
		st = ibc_topo_create(&topo_shared);
	if (st == IBC_OK)
		*topo_p = topo_shared;
	pthread_mutex_unlock(&topo_shared_lock);
	return st;
}

/* ---- spread order -------------------------------------------------------- */

static int topo_key_cmp(const long *a, const long *b)
{
	int l;

	for (l = 0; l < IBC_TOPO_KEY_LEVELS; l++)
		if (a[l] != b[l])
			return a[l] < b[l] ? -1 : 1;
	return 0;
}

/*
 * Reorder seg[0..len) (positions sorted by key) so that it goes round-robin
 * over the groups of equal key[level], each group itself spread over the
 * next level. tmp has room for len ints.
 */
static void topo_spread_rec(const long (*keys)[IBC_TOPO_KEY_LEVELS], int *seg, int len, int level,
			    int *tmp)
{
	int round;
	int k = 0;
	int s;

	if (level == IBC_TOPO_KEY_LEVELS || len <= 1)
		return;
	for (s = 0; s < len;) {
		int e = s + 1;

		while (e < len && keys[seg[e]][level] == keys[seg[s]][level])
			e++;
		topo_spread_rec(keys, seg + s, e - s, level + 1, tmp + s);
		s = e;
	}
	for (round = 0; k < len; round++) {
		for (s = 0; s < len;) {
			int e = s + 1;

			while (e < len && keys[seg[e]][level] == keys[seg[s]][level])
				e++;
			if (round < e - s)
				tmp[k++] = seg[s + round];
			s = e;
		}
	}
	memcpy(seg, tmp, (size_t)len * sizeof(*seg));
}

/* order of positions @a and @b: by key, then by name */
static int topo_pos_cmp(const long (*keys)[IBC_TOPO_KEY_LEVELS], const char *const *names, int a,
			int b)
{
	int c = topo_key_cmp(keys[a], keys[b]);

	return c ? c : ibc_topo_natural_cmp(names[a], names[b]);
}

ibc_status_t ibc_topo_spread_order(const long (*keys)[IBC_TOPO_KEY_LEVELS],
				   const char *const *names, int n, int *order_p)
{
	int *tmp;
	int i;

	if (n <= 0)
		return IBC_OK;
	tmp = ibc_calloc((size_t)n, sizeof(*tmp), "topology spread order");
	if (!tmp)
		return IBC_ERR_NO_MEMORY;
	/* stable insertion sort of positions by key and name: n is the NIC count */
	for (i = 0; i < n; i++) {
		int j = i;

		while (j > 0 && topo_pos_cmp(keys, names, order_p[j - 1], i) > 0) {
			order_p[j] = order_p[j - 1];
			j--;
		}
		order_p[j] = i;
	}
	topo_spread_rec(keys, order_p, n, 0, tmp);
	ibc_free(tmp);
	return IBC_OK;
}

/* ---- NIC choice ------------------------------------------------------------ */

/*
 * Best class from @gpu over the candidates (@nic_idx: topology indices) and
 * the tie set (tie[i] = 1 for candidates of that class).
 */
static enum ibc_topo_dist topo_best(struct ibc_topo *t, int gpu, const int *nic_idx, int ncands,
				    char *tie)
{
	enum ibc_topo_dist best = IBC_TOPO_DIST_COUNT;
	int i;

	for (i = 0; i < ncands; i++) {
		enum ibc_topo_dist d = ibc_topo_dist_of(t, gpu, nic_idx[i]);

		if (d < best)
			best = d;
		tie[i] = (char)d;
	}
	for (i = 0; i < ncands; i++)
		tie[i] = tie[i] == (char)best;
	return best;
}

static ibc_status_t topo_pick_gpu(struct ibc_topo *t, int gpu, const char *const *cands,
				  int ncands, const int *nic_idx, int *idx_p,
				  enum ibc_topo_dist *dist_p, char *why, size_t why_len)
{
	ibc_status_t st = IBC_OK;
	enum ibc_topo_dist best;
	char *tie;
	char *tie_g;
	int nties = 0;
	int share = 0;
	int choice = -1;
	int i;
	int g;

	tie = ibc_calloc(2, (size_t)ncands, "topology tie sets");
	if (!tie)
		return IBC_ERR_NO_MEMORY;
	tie_g = tie + ncands;
	best = topo_best(t, gpu, nic_idx, ncands, tie);
	for (i = 0; i < ncands; i++)
		nties += tie[i];
	if (nties > 1) {
		/* GPUs before us with the same best class and tie set share it */
		for (g = 0; g < gpu; g++)
			if (topo_best(t, g, nic_idx, ncands, tie_g) == best &&
			    !memcmp(tie, tie_g, (size_t)ncands))
				share++;
	}
	for (i = 0, g = share % nties; i < ncands; i++) {
		if (tie[i] && g-- == 0) {
			choice = i;
			break;
		}
	}
	if (choice < 0) {
		IBC_LOG_ERROR(TOPO, "no NIC chosen for GPU %d among %d candidates", gpu, ncands);
		st = IBC_ERR_INTERNAL;
		goto out;
	}
	*idx_p = choice;
	*dist_p = best;
	if (why && why_len) {
		snprintf(why, why_len, "GPU %d -> %s: %s (%s)", gpu, cands[choice],
			 ibc_topo_dist_name(best), topo_dist_help[best]);
		if (nties > 1)
			ibc_topo_appendf(why, why_len,
					 ", %d of %d candidates tie, shared round-robin (GPU #%d of this set)",
					 nties, ncands, share);
		else
			ibc_topo_appendf(why, why_len, ", nearest of %d candidate%s", ncands,
					 ncands > 1 ? "s" : "");
	}
out:
	ibc_free(tie);
	return st;
}

static ibc_status_t topo_pick_spread(struct ibc_topo *t, int local_rank, int local_nranks,
				     const char *const *cands, int ncands, const int *nic_idx,
				     int *idx_p, char *why, size_t why_len)
{
	long (*keys)[IBC_TOPO_KEY_LEVELS];
	int *order;
	int pos;
	int i;

	keys = ibc_calloc((size_t)ncands, sizeof(*keys), "topology spread keys");
	if (!keys)
		return IBC_ERR_NO_MEMORY;
	order = ibc_calloc((size_t)ncands, sizeof(*order), "topology spread order");
	if (!order) {
		ibc_free(keys);
		return IBC_ERR_NO_MEMORY;
	}
	for (i = 0; i < ncands; i++)
		ibc_topo_nic_spread_key(t, nic_idx[i], keys[i]);
	if (ibc_topo_spread_order((const long (*)[IBC_TOPO_KEY_LEVELS])keys, cands, ncands,
				  order) != IBC_OK) {
		ibc_free(order);
		ibc_free(keys);
		return IBC_ERR_NO_MEMORY;
	}
	pos = local_rank % ncands;
	*idx_p = order[pos];
	if (why && why_len) {
		snprintf(why, why_len, "no GPU: local rank %d of %d -> %s, position %d of the %d NICs",
			 local_rank, local_nranks, cands[order[pos]], pos, ncands);
		if (keys[order[pos]][0] != LONG_MAX)
			ibc_topo_appendf(why, why_len, " spread over NUMA nodes (NUMA %ld)",
					 keys[order[pos]][0]);
		else
			ibc_topo_appendf(why, why_len, " spread over NUMA nodes (its NUMA unknown)");
	}
	ibc_free(order);
	ibc_free(keys);
	return IBC_OK;
}

ibc_status_t ibc_topo_pick_nic(struct ibc_topo *t, int gpu, int local_rank, int local_nranks,
			       const char *const *cands, int ncands, int *idx_p,
			       enum ibc_topo_dist *dist_p, char *why, size_t why_len)
{
	enum ibc_topo_dist dist = IBC_TOPO_DIST_COUNT;
	ibc_status_t st;
	char line[IBC_TOPO_WHY_LEN];
	int *nic_idx;
	int idx = -1;
	int i;

	if (!t || !cands || !idx_p || ncands < 1 || local_nranks < 1 || local_rank < 0 ||
	    local_rank >= local_nranks || gpu >= ibc_topo_gpu_count(t)) {
		IBC_LOG_WARN(TOPO, "pick nic: invalid arguments (gpu %d of %d, local rank %d of %d, %d candidates)",
			     gpu, t ? ibc_topo_gpu_count(t) : 0, local_rank, local_nranks, ncands);
		return IBC_ERR_INVALID_ARG;
	}
	for (i = 0; i < ncands; i++) {
		if (!cands[i]) {
			IBC_LOG_WARN(TOPO, "pick nic: candidate %d is NULL", i);
			return IBC_ERR_INVALID_ARG;
		}
	}
	nic_idx = ibc_calloc((size_t)ncands, sizeof(*nic_idx), "topology candidates");
	if (!nic_idx)
		return IBC_ERR_NO_MEMORY;
	for (i = 0; i < ncands; i++)
		nic_idx[i] = ibc_topo_nic_find(t, cands[i]);
	line[0] = '\0';
	if (gpu >= 0)
		st = topo_pick_gpu(t, gpu, cands, ncands, nic_idx, &idx, &dist, line, sizeof(line));
	else
		st = topo_pick_spread(t, local_rank, local_nranks, cands, ncands, nic_idx, &idx,
				      line, sizeof(line));
	if (st == IBC_OK) {
		if (nic_idx[idx] < 0)
			ibc_topo_appendf(line, sizeof(line), "; %s is not in the topology", cands[idx]);
		ibc_topo_appendf(line, sizeof(line), "%s", ibc_topo_dist_note(t));
		IBC_LOG_INFO(TOPO, "nic for local rank %d: %s", local_rank, line);
		*idx_p = idx;
		if (dist_p)
			*dist_p = dist;
		if (why && why_len)
			snprintf(why, why_len, "%s", line);
	}
	ibc_free(nic_idx);
	return st;
}

/* ---- GPUDirect RDMA distance rule ------------------------------------------ */

int ibc_topo_parse_gdr_level(const char *str, int *max_dist_p)
{
	static const struct {
		const char *name;
		int max;
	} levels[] = {
		{ "LOC", IBC_TOPO_GDR_NEVER },
		{ "PIX", IBC_TOPO_PIX },
		{ "PXB", IBC_TOPO_PXB },
		{ "PHB", IBC_TOPO_NODE },  /* NCCL: "same NUMA node" */
		{ "NODE", IBC_TOPO_NODE },
		{ "SYS", IBC_TOPO_SYS },
	};
	/* NCCL's legacy integers: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and above SYS */
	static const int legacy[] = { IBC_TOPO_GDR_NEVER, IBC_TOPO_PIX, IBC_TOPO_PXB,
				      IBC_TOPO_NODE, IBC_TOPO_SYS };
	size_t i;

	if (!str || !max_dist_p)
		return -1;
	for (i = 0; i < IBC_ARRAY_SIZE(levels); i++) {
		if (!strcasecmp(str, levels[i].name)) {
			*max_dist_p = levels[i].max;
			return 0;
		}
	}
	if (isdigit((unsigned char)str[0])) {
		char *end;
		long v;

		errno = 0;
		v = strtol(str, &end, 10);
		if (errno || *end || v < 0)
			return -1;
		*max_dist_p = legacy[v > 4 ? 4 : v];
		return 0;
	}
	return -1;
}

static int topo_gdr_level(void)
{
	static int warned;
	const char *str = ibc_param_net_gdr_level();
	int level;

	if (ibc_topo_parse_gdr_level(str, &level) == 0)
		return level;
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		IBC_LOG_WARN(TOPO, "IBC_NET_GDR_LEVEL=%s is not LOC, PIX, PXB, PHB, NODE, SYS or 0-4; using PXB",
			     str);
	return IBC_TOPO_PXB;
}

ibc_status_t ibc_topo_gdr_allowed(struct ibc_topo *t, int gpu, const char *nic, int *allowed_p,
				  char *why, size_t why_len)
{
	enum ibc_topo_dist d;
	char line[IBC_TOPO_WHY_LEN];
	int level;
	int ok;

	if (!allowed_p)
		return IBC_ERR_INVALID_ARG;
	IBC_CHECK(ibc_topo_gpu_nic_dist(t, gpu, nic, &d));
	level = topo_gdr_level();
	ok = level != IBC_TOPO_GDR_NEVER && (int)d <= level;
	if (level == IBC_TOPO_GDR_NEVER)
		snprintf(line, sizeof(line), "GPU %d - %s: %s, IBC_NET_GDR_LEVEL is LOC: GPUDirect RDMA off",
			 gpu, nic, ibc_topo_dist_name(d));
	else
		snprintf(line, sizeof(line), "GPU %d - %s: %s %s %s: GPUDirect RDMA %s by distance",
			 gpu, nic, ibc_topo_dist_name(d), ok ? "<=" : ">",
			 ibc_topo_dist_name((enum ibc_topo_dist)level), ok ? "allowed" : "refused");
	if (ibc_param_from_env(IBC_PARAM_IDX_NET_GDR_LEVEL))
		ibc_topo_appendf(line, sizeof(line), " (IBC_NET_GDR_LEVEL=%s)",
				 ibc_param_net_gdr_level());
	ibc_topo_appendf(line, sizeof(line), "%s", ibc_topo_dist_note(t));
	IBC_LOG_INFO(TOPO, "%s", line);
	*allowed_p = ok;
	if (why && why_len)
		snprintf(why, why_len, "%s", line);
	return IBC_OK;
}

int ibc_topo_cpulist_parse(const char *list, cpu_set_t *set)
{
	const char *p = list;

	if (!list || !set)
		return -1;
	CPU_ZERO(set);
	while (*p) {
		char *end;
		long lo = strtol(p, &end, 10);
		long hi = lo;

		if (end == p || lo < 0)
			return -1;
		p = end;
		if (*p == '-') {
			hi = strtol(p + 1, &end, 10);
			if (end == p + 1 || hi < lo)
				return -1;
			p = end;
		}
		if (hi >= CPU_SETSIZE)
			return -1;
		for (; lo <= hi; lo++)
			CPU_SET((int)lo, set);
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
	}
	return 0;
}

ibc_status_t ibc_topo_rank_gpu(struct ibc_topo *t, int *gpu_p, char *why, size_t why_len)
{
	int forced = (int)ibc_param_topo_gpu();
	char line[IBC_TOPO_WHY_LEN];
	char busid[32];
	int n;

	if (!t || !gpu_p)
		return IBC_ERR_INVALID_ARG;
	n = ibc_topo_gpu_count(t);
	*gpu_p = -1;
	if (forced >= 0) {
		if (forced < n) {
			*gpu_p = forced;
			snprintf(line, sizeof(line), "GPU %d from IBC_TOPO_GPU", forced);
		} else {
			snprintf(line, sizeof(line), "IBC_TOPO_GPU=%d but the topology has %d GPUs: no GPU",
				 forced, n);
			IBC_LOG_WARN(TOPO, "%s", line);
		}
	} else if (ibc_cuda_current_busid(busid, sizeof(busid)) != IBC_OK) {
		snprintf(line, sizeof(line), "no GPU (no current CUDA context)");
	} else if (ibc_topo_gpu_by_busid(t, busid, gpu_p) != IBC_OK) {
		*gpu_p = -1;
		snprintf(line, sizeof(line), "current CUDA device %s is not in the topology: no GPU",
			 busid);
	} else {
		snprintf(line, sizeof(line), "GPU %d: the current CUDA device, %s", *gpu_p, busid);
	}
	if (why && why_len)
		snprintf(why, why_len, "%s", line);
	return IBC_OK;
}
