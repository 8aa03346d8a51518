/* SPDX-License-Identifier: MIT */
/*
 * cuda_gdr.c - whether a NIC may read and write a GPU's memory directly
 * (GPUDirect RDMA), and how: the decision as a pure function of injected
 * facts (unit-tested), the probing of those facts on this machine (build,
 * CUDA device attributes through cuda.h, the peer-memory kernel module in
 * sysfs, the GPU-NIC distance from src/topo and IBC_NET_GDR_LEVEL), and a
 * per-(GPU, NIC) cache that logs each decision once at INFO. Modelled on
 * NCCL's transport/net_ib.cc (ncclIbGdrSupport, ncclIbDmaBufSupport) and
 * graph/paths.cc (ncclTopoCheckGdr).
 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/build_info.h"
#include "base/log.h"
#include "base/param.h"
#include "cuda/cuda.h"
#include "topo/topo.h"
#include "topo/topo_gdr.h"

const char *ibc_gdr_mode_name(enum ibc_gdr_mode mode)
{
	switch (mode) {
	case IBC_GDR_OFF:
		return "off (staged through host memory)";
	case IBC_GDR_PEERMEM:
		return "nvidia_peermem";
	case IBC_GDR_DMABUF:
		return "dma-buf";
	default:
		return "invalid-gdr-mode";
	}
}

static void why_set(char *why, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void why_set(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

static const char *dist_name(int d)
{
	return d < 0 ? "unknown" : ibc_topo_dist_name((enum ibc_topo_dist)d);
}

static const char *level_name(int max_dist)
{
	return max_dist == IBC_TOPO_GDR_NEVER ? "LOC" : ibc_topo_dist_name((enum ibc_topo_dist)max_dist);
}

/* why dma-buf cannot be used, or NULL when it can */
static const char *dmabuf_missing(const struct ibc_gdr_facts *f)
{
	if (!f->dmabuf_build)
		return "dma-buf not built in (ibv_reg_dmabuf_mr or cuMemGetHandleForAddressRange missing at configure time)";
	if (!f->dmabuf_gpu)
		return "dma-buf unsupported by the GPU or its driver";
	if (f->dmabuf_nic == 0)
		return "dma-buf refused by the NIC's verbs provider";
	return NULL;
}

ibc_status_t ibc_gdr_decide(const struct ibc_gdr_facts *f, enum ibc_gdr_mode *mode_p, char *why,
			    size_t why_len)
{
	const char *nodmabuf;
	int dist;

	if (!f || !mode_p)
		return IBC_ERR_INVALID_ARG;
	*mode_p = IBC_GDR_OFF;
	if (f->force == 0) {
		why_set(why, why_len, "IBC_GDR=0");
		return IBC_OK;
	}
	if (!f->cuda) {
		why_set(why, why_len, "no usable CUDA device (or built without CUDA)");
		return f->force == 1 ? IBC_ERR_UNSUPPORTED : IBC_OK;
	}
	dist = f->dist < 0 ? IBC_TOPO_SYS : f->dist;
	if (f->force != 1 && (f->max_dist == IBC_TOPO_GDR_NEVER || dist > f->max_dist)) {
		why_set(why, why_len, "GPU-NIC path %s is above IBC_NET_GDR_LEVEL %s",
			dist_name(f->dist), level_name(f->max_dist));
		return IBC_OK;
	}
	nodmabuf = dmabuf_missing(f);
	if (!nodmabuf) {
		*mode_p = IBC_GDR_DMABUF;
		why_set(why, why_len, "dma-buf, GPU-NIC path %s%s%s", dist_name(f->dist),
			f->force == 1 ? " (IBC_GDR=1: distance not checked)" : " within ",
			f->force == 1 ? "" : level_name(f->max_dist));
		return IBC_OK;
	}
	if (f->peermem) {
		*mode_p = IBC_GDR_PEERMEM;
		why_set(why, why_len, "nvidia_peermem loaded (%s), GPU-NIC path %s%s%s", nodmabuf,
			dist_name(f->dist),
			f->force == 1 ? " (IBC_GDR=1: distance not checked)" : " within ",
			f->force == 1 ? "" : level_name(f->max_dist));
		return IBC_OK;
	}
	why_set(why, why_len, "nvidia_peermem not loaded and %s", nodmabuf);
	return f->force == 1 ? IBC_ERR_UNSUPPORTED : IBC_OK;
}

static int path_exists(const char *sysroot, const char *path)
{
	char full[4096];
	struct stat sb;

	if (snprintf(full, sizeof(full), "%s%s", sysroot ? sysroot : "", path) >= (int)sizeof(full))
		return 0;
	return stat(full, &sb) == 0;
}

int ibc_gdr_peermem_loaded(const char *sysroot)
{
	/* NCCL checks the same three places (net_ib.cc, ncclIbGdrSupport) */
	return path_exists(sysroot, "/sys/module/nvidia_peermem/version") ||
	       path_exists(sysroot, "/sys/module/nvidia_peermem") ||
	       path_exists(sysroot, "/sys/module/nv_peer_mem") ||
	       path_exists(sysroot, "/sys/kernel/mm/memory_peers/nv_mem/version");
}

/* GPU-NIC class from the shared topology; -1 when it cannot be told */
static int probe_dist(int dev, const char *nic)
{
	struct ibc_topo *t;
	char busid[32];
	enum ibc_topo_dist d;
	int gpu;

	if (ibc_topo_shared(&t) != IBC_OK)
		return -1;
	if (ibc_cuda_device_busid(dev, busid, sizeof(busid)) != IBC_OK)
		return -1;
	if (ibc_topo_gpu_by_busid(t, busid, &gpu) != IBC_OK) {
		IBC_LOG_DEBUG(CUDA, "CUDA device %d (%s) is not in the topology", dev, busid);
		return -1;
	}
	if (ibc_topo_gpu_nic_dist(t, gpu, nic, &d) != IBC_OK)
		return -1;
	return (int)d;
}

ibc_status_t ibc_gdr_facts_probe(int dev, const char *nic, int dmabuf_nic,
				 struct ibc_gdr_facts *f)
{
	int yes = 0;

	memset(f, 0, sizeof(*f));
	f->force = (int)ibc_param_gdr();
	f->cuda = ibc_cuda_available();
	f->dmabuf_build = ibc_build_info()->have_dmabuf && IBC_CUDA_HAVE_DMABUF_API;
	if (f->cuda && ibc_cuda_dmabuf_supported(dev, &yes) == IBC_OK)
		f->dmabuf_gpu = yes;
	f->dmabuf_nic = dmabuf_nic;
	f->peermem = ibc_gdr_peermem_loaded("");
	f->dist = f->cuda && nic ? probe_dist(dev, nic) : -1;
	if (ibc_topo_parse_gdr_level(ibc_param_net_gdr_level(), &f->max_dist) != 0) {
		IBC_LOG_WARN(CUDA, "IBC_NET_GDR_LEVEL=%s is not LOC, PIX, PXB, PHB, NODE, SYS or 0-4; using PXB",
			     ibc_param_net_gdr_level());
		f->max_dist = IBC_TOPO_PXB;
	}
	return IBC_OK;
}

#define GDR_CACHE_MAX 64

static pthread_mutex_t gdr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gdr_entry {
	int dev;
	char nic[64];
	enum ibc_gdr_mode mode;
	ibc_status_t st;
	char why[512];          /* the reason, as logged */
} gdr_cache[GDR_CACHE_MAX];
static int gdr_n;

ibc_status_t ibc_gdr_mode_get(int dev, const char *nic, int dmabuf_nic,
			      enum ibc_gdr_mode *mode_p, char *why_out, size_t why_len)
{
	struct ibc_gdr_facts f;
	char why[512];
	enum ibc_gdr_mode mode;
	ibc_status_t st;
	int i;

	if (!nic || !mode_p)
		return IBC_ERR_INVALID_ARG;
	pthread_mutex_lock(&gdr_lock);
	for (i = 0; i < gdr_n; i++) {
		if (gdr_cache[i].dev == dev && !strcmp(gdr_cache[i].nic, nic)) {
			st = gdr_cache[i].st;
			*mode_p = gdr_cache[i].mode;
			why_set(why_out, why_len, "%s", gdr_cache[i].why);
			pthread_mutex_unlock(&gdr_lock);
			return st;
		}
	}
	ibc_gdr_facts_probe(dev, nic, dmabuf_nic, &f);
	st = ibc_gdr_decide(&f, &mode, why, sizeof(why));
	if (st == IBC_OK)
		IBC_LOG_INFO(CUDA, "GPUDirect RDMA for CUDA device %d - %s: %s: %s", dev, nic,
			     mode == IBC_GDR_OFF ? "off, staging through host memory" :
						   ibc_gdr_mode_name(mode), why);
	else
		IBC_LOG_WARN(CUDA, "GPUDirect RDMA for CUDA device %d - %s: IBC_GDR=1 but impossible: %s",
			     dev, nic, why);
	if (gdr_n < GDR_CACHE_MAX) {
		gdr_cache[gdr_n].dev = dev;
		snprintf(gdr_cache[gdr_n].nic, sizeof(gdr_cache[gdr_n].nic), "%s", nic);
		gdr_cache[gdr_n].mode = mode;
		gdr_cache[gdr_n].st = st;
		snprintf(gdr_cache[gdr_n].why, sizeof(gdr_cache[gdr_n].why), "%s", why);
		gdr_n++;
	}
	pthread_mutex_unlock(&gdr_lock);
	why_set(why_out, why_len, "%s", why);
	*mode_p = mode;
	return st;
}
