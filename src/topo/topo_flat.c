/* SPDX-License-Identifier: MIT */
/*
 * topo_flat.c - the topology backend built when hwloc is not available:
 * one NUMA node holding every CPU this process may use, NICs and GPUs in
 * listed order (/sys/class/infiniband, /proc/driver/nvidia/gpus, natural
 * name order; a rank without GPU takes NIC r mod n in that order), no PCI
 * information (every GPU-NIC pair is PHB, and reasons say so) and no
 * thread binding. Same API as topo_hwloc.c (topo.h, topo_internal.h).
 */
#include "config.h"

#include <sched.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "topo/topo_internal.h"

struct ibc_topo {
	char **nics;            /* [nnics] verbs device names, natural order */
	int nnics;
	char **gpus;            /* [ngpus] PCI bus ids from the NVIDIA driver */
	int ngpus;
	char cpus[IBC_TOPO_CPULIST_LEN];        /* CPUs of the one NUMA node */
};

/* the CPUs this process may run on, as a list "0-3,8" */
static void flat_cpulist(char *buf, size_t len)
{
	cpu_set_t set;
	int c;
	int first = -1;

	buf[0] = '\0';
	if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		snprintf(buf, len, "0-%ld", sysconf(_SC_NPROCESSORS_ONLN) - 1);
		return;
	}
	for (c = 0; c <= CPU_SETSIZE; c++) {
		int in = c < CPU_SETSIZE && CPU_ISSET(c, &set);

		if (in && first < 0)
			first = c;
		if (!in && first >= 0) {
			if (c - 1 > first)
				ibc_topo_appendf(buf, len, "%s%d-%d", buf[0] ? "," : "", first, c - 1);
			else
				ibc_topo_appendf(buf, len, "%s%d", buf[0] ? "," : "", first);
			first = -1;
		}
	}
}

ibc_status_t ibc_topo_create(struct ibc_topo **topo_p)
{
	const char *file = ibc_param_topo_file();
	ibc_status_t st;
	struct ibc_topo *t;

	if (!topo_p)
		return IBC_ERR_INVALID_ARG;
	if (*file)
		IBC_LOG_WARN(TOPO, "IBC_TOPO_FILE=%s ignored: ibcoll was built without hwloc (flat topology)",
			     file);
	t = ibc_calloc(1, sizeof(*t), "topology");
	if (!t)
		return IBC_ERR_NO_MEMORY;
	IBC_CHECK_GOTO(ibc_topo_list_dir("/sys/class/infiniband", &t->nics, &t->nnics), st, err_free);
	IBC_CHECK_GOTO(ibc_topo_list_dir("/proc/driver/nvidia/gpus", &t->gpus, &t->ngpus), st,
		       err_free_nics);
	flat_cpulist(t->cpus, sizeof(t->cpus));
	IBC_LOG_INFO(TOPO, "flat topology (built without hwloc): 1 NUMA node, CPUs %s, %d NICs, %d GPUs in listed order",
		     t->cpus, t->nnics, t->ngpus);
	*topo_p = t;
	return IBC_OK;

err_free_nics:
	ibc_topo_names_free(t->nics, t->nnics);
err_free:
	ibc_free(t);
	return st;
}

void ibc_topo_destroy(struct ibc_topo *t)
{
	if (!t)
		return;
	ibc_topo_names_free(t->gpus, t->ngpus);
	ibc_topo_names_free(t->nics, t->nnics);
	ibc_free(t);
}

const char *ibc_topo_source(struct ibc_topo *t)
{
	return "flat (built without hwloc)";
}

const char *ibc_topo_dist_note(struct ibc_topo *t)
{
	return "; flat topology (built without hwloc): no PCI information, PHB assumed, NICs in name order";
}

int ibc_topo_nic_count(struct ibc_topo *t)
{
	return t ? t->nnics : 0;
}

const char *ibc_topo_nic_name(struct ibc_topo *t, int i)
{
	return t && i >= 0 && i < t->nnics ? t->nics[i] : NULL;
}

int ibc_topo_nic_find(struct ibc_topo *t, const char *nic)
{
	int i;

	for (i = 0; nic && i < t->nnics; i++)
		if (!strcmp(t->nics[i], nic))
			return i;
	return -1;
}

int ibc_topo_gpu_count(struct ibc_topo *t)
{
	return t ? t->ngpus : 0;
}

ibc_status_t ibc_topo_gpu_busid(struct ibc_topo *t, int gpu, char *buf, size_t len)
{
	unsigned d, b, v, f;

	if (!t || !buf || !len || gpu < 0 || gpu >= t->ngpus)
		return IBC_ERR_INVALID_ARG;
	if (ibc_topo_parse_busid(t->gpus[gpu], &d, &b, &v, &f) == 0)
		snprintf(buf, len, "%04x:%02x:%02x.%x", d, b, v, f);
	else
		snprintf(buf, len, "%s", "");
	return IBC_OK;
}

enum ibc_topo_dist ibc_topo_dist_of(struct ibc_topo *t, int gpu, int nic)
{
	return IBC_TOPO_PHB;
}

void ibc_topo_nic_spread_key(struct ibc_topo *t, int nic, long key[IBC_TOPO_KEY_LEVELS])
{
	/* one NUMA node, nothing known below it: candidates keep their order */
	key[0] = key[1] = key[2] = 0;
}

ibc_status_t ibc_topo_nic_locality(struct ibc_topo *t, const char *nic, int *numa_p, char *cpus,
				   size_t cpus_len)
{
	if (!t || !nic || ibc_topo_nic_find(t, nic) < 0)
		return IBC_ERR_INVALID_ARG;
	if (numa_p)
		*numa_p = 0;
	if (cpus && cpus_len)
		snprintf(cpus, cpus_len, "%s", t->cpus);
	return IBC_OK;
}

ibc_status_t ibc_topo_gpu_locality(struct ibc_topo *t, int gpu, int *numa_p, char *cpus,
				   size_t cpus_len)
{
	if (!t || gpu < 0 || gpu >= t->ngpus)
		return IBC_ERR_INVALID_ARG;
	if (numa_p)
		*numa_p = 0;
	if (cpus && cpus_len)
		snprintf(cpus, cpus_len, "%s", t->cpus);
	return IBC_OK;
}

ibc_status_t ibc_topo_progress_plan(struct ibc_topo *t, const char *nic, int gpu, int local_rank,
				    int local_nranks, int *bind_p, char *cpus, size_t cpus_len,
				    char *why, size_t why_len)
{
	(void)nic;
	if (!t || !bind_p || gpu >= t->ngpus || local_nranks < 1 || local_rank < 0 ||
	    local_rank >= local_nranks)
		return IBC_ERR_INVALID_ARG;
	*bind_p = 0;
	if (cpus && cpus_len)
		cpus[0] = '\0';
	if (why && why_len)
		snprintf(why, why_len, "%s",
			 ibc_param_bind() ? "flat topology (built without hwloc): no binding" :
					    "IBC_BIND=0: thread affinity left alone");
	return IBC_OK;
}

ibc_status_t ibc_topo_bind_plan(struct ibc_topo *t, const char *nic, int *bind_p, char *cpus,
				size_t cpus_len, char *why, size_t why_len)
{
	if (!nic)
		return IBC_ERR_INVALID_ARG;
	return ibc_topo_progress_plan(t, nic, -1, 0, 1, bind_p, cpus, cpus_len, why, why_len);
}

ibc_status_t ibc_topo_bind_thread_near_nic(struct ibc_topo *t, const char *nic)
{
	char why[IBC_TOPO_WHY_LEN];
	int bind;

	IBC_CHECK(ibc_topo_bind_plan(t, nic, &bind, NULL, 0, why, sizeof(why)));
	IBC_LOG_INFO(TOPO, "progress thread near %s: %s", nic, why);
	return IBC_OK;
}

ibc_status_t ibc_topo_print(struct ibc_topo *t, FILE *f)
{
	int i;

	if (!t || !f)
		return IBC_ERR_INVALID_ARG;
	fprintf(f, "topology: %s\n", ibc_topo_source(t));
	fprintf(f, "summary: 1 NUMA node (assumed), %d NICs, %d GPUs (listed order)\n", t->nnics,
		t->ngpus);
	fprintf(f, "Machine\n  NUMANode 0: CPUs %s\n", t->cpus);
	for (i = 0; i < t->ngpus; i++)
		fprintf(f, "    GPU %d %s\n", i, t->gpus[i]);
	for (i = 0; i < t->nnics; i++)
		fprintf(f, "    NIC %s\n", t->nics[i]);
	if (ferror(f))
		return IBC_ERR_SYSTEM;
	return IBC_OK;
}
