/* SPDX-License-Identifier: MIT */
/*
 * topo_hwloc.c - the topology backend built on hwloc >= 2.0 (the library
 * Open MPI uses): loads this machine, or an XML file named by IBC_TOPO_FILE,
 * with PCI bridges and devices and the OS devices of verbs NICs and CUDA
 * GPUs, and answers the questions of topo.h/topo_internal.h from hwloc's
 * tree. Decisions built on those answers live in topo_common.c.
 */
#include "config.h"

#include <hwloc.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/param.h"
#include "topo/topo_internal.h"

#define TOPO_SYS_IB_DIR "/sys/class/infiniband"

struct topo_nic {
	char *name;             /* verbs device name, "mlx5_0" */
	hwloc_obj_t pci;        /* its PCI function; NULL when unknown (virtual) */
	hwloc_obj_t local;      /* first non-I/O ancestor: where it attaches */
	const char *netdev;     /* its network interface, or NULL (owned by hwloc or @via) */
	char *via;              /* virtual NIC: the netdev it is bound to (owned) */
};

struct topo_gpu {
	const char *osdev;      /* "cuda0", "nvml0", or NULL when found by PCI class */
	hwloc_obj_t pci;        /* its PCI function; NULL only for odd XML files */
	hwloc_obj_t local;      /* first non-I/O ancestor */
	const char *model;      /* marketing name from hwloc, or NULL */
};

struct ibc_topo {
	hwloc_topology_t hw;
	int this_system;        /* binding is meaningful */
	char *source;           /* for logs and ibc_info */
	const char *gpu_order;  /* "CUDA", "NVML" or "PCI bus id" */
	int nnuma;              /* NUMA nodes in the topology */
	int nnics;
	struct topo_nic *nics;  /* [nnics], natural name order */
	int ngpus;
	struct topo_gpu *gpus;  /* [ngpus], GPU index order */
};

/* ---- helpers on hwloc objects ------------------------------------------------ */

/* the PCI function an I/O object belongs to (itself if it is one), or NULL */
static hwloc_obj_t topo_pci_of(hwloc_obj_t obj)
{
	while (obj && hwloc_obj_type_is_io(obj->type) && obj->type != HWLOC_OBJ_PCI_DEVICE)
		obj = obj->parent;
	return obj && obj->type == HWLOC_OBJ_PCI_DEVICE ? obj : NULL;
}

static int topo_is_host_bridge(hwloc_obj_t obj)
{
	return obj->type == HWLOC_OBJ_BRIDGE &&
	       obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

static hwloc_obj_t topo_common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
	hwloc_obj_t x;
	hwloc_obj_t y;

	/* hwloc_get_common_ancestor_obj() is for normal objects only */
	for (x = a; x; x = x->parent)
		for (y = b; y; y = y->parent)
			if (x == y)
				return x;
	return NULL;
}

/* bridges strictly between @obj and its ancestor @top */
static int topo_bridges_between(hwloc_obj_t obj, hwloc_obj_t top)
{
	int n = 0;

	for (obj = obj->parent; obj && obj != top; obj = obj->parent)
		n += obj->type == HWLOC_OBJ_BRIDGE;
	return n;
}

static void topo_busid(hwloc_obj_t pci, char *buf, size_t len)
{
	if (!pci) {
		snprintf(buf, len, "%s", "");
		return;
	}
	snprintf(buf, len, "%04x:%02x:%02x.%x", (unsigned)pci->attr->pcidev.domain,
		 (unsigned)pci->attr->pcidev.bus, (unsigned)pci->attr->pcidev.dev,
		 (unsigned)pci->attr->pcidev.func);
}

/* NUMA os index of a local object, -1 when it spans several */
static int topo_numa_of(hwloc_obj_t local)
{
	if (!local || !local->nodeset || hwloc_bitmap_weight(local->nodeset) != 1)
		return -1;
	return hwloc_bitmap_first(local->nodeset);
}

/* ---- discovery ------------------------------------------------------------------ */

static int topo_nic_cmp(const void *pa, const void *pb)
{
	return ibc_topo_natural_cmp(((const struct topo_nic *)pa)->name,
				    ((const struct topo_nic *)pb)->name);
}

static int topo_gpu_cmp(const void *pa, const void *pb)
{
	const struct topo_gpu *a = pa;
	const struct topo_gpu *b = pb;
	char ba[32];
	char bb[32];

	if (a->osdev && b->osdev)
		return ibc_topo_natural_cmp(a->osdev, b->osdev);   /* cuda2 < cuda10 */
	topo_busid(a->pci, ba, sizeof(ba));
	topo_busid(b->pci, bb, sizeof(bb));
	return strcmp(ba, bb);
}

/* the network OS device of PCI function @pci, or NULL */
static const char *topo_netdev_of(hwloc_obj_t pci)
{
	hwloc_obj_t c;

	for (c = pci ? pci->io_first_child : NULL; c; c = c->next_sibling)
		if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK)
			return c->name;
	return NULL;
}

static hwloc_obj_t topo_find_netdev(hwloc_topology_t hw, const char *name)
{
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_osdev(hw, o)) != NULL)
		if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && o->name &&
		    !strcmp(o->name, name))
			return o;
	return NULL;
}

/* the netdev a software verbs device (rxe, siw) is bound to, or NULL */
static char *topo_sys_parent_netdev(const char *ibdev)
{
	char path[512];
	char line[64];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s/parent", TOPO_SYS_IB_DIR, ibdev);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	n = strcspn(line, "\n");
	line[n] = '\0';
	return n ? ibc_strdup(line, "topology netdev name") : NULL;
}

static ibc_status_t topo_collect_nics(struct ibc_topo *t)
{
	ibc_status_t st;
	char **sys_names = NULL;
	int nsys = 0;
	int n = 0;
	int i;
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_osdev(t->hw, o)) != NULL)
		n += o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && o->name;
	if (t->this_system)
		IBC_CHECK(ibc_topo_list_dir(TOPO_SYS_IB_DIR, &sys_names, &nsys));
	t->nics = ibc_calloc((size_t)(n + nsys), sizeof(*t->nics), "topology NICs");
	if (!t->nics) {
		st = IBC_ERR_NO_MEMORY;
		goto out;
	}
	while ((o = hwloc_get_next_osdev(t->hw, o)) != NULL) {
		struct topo_nic *nic;

		if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || !o->name)
			continue;
		nic = &t->nics[t->nnics];
		nic->name = ibc_strdup(o->name, "topology NIC name");
		if (!nic->name) {
			st = IBC_ERR_NO_MEMORY;
			goto out;
		}
		nic->pci = topo_pci_of(o);
		nic->local = hwloc_get_non_io_ancestor_obj(t->hw, o);
		nic->netdev = topo_netdev_of(nic->pci);
		t->nnics++;
	}
	/* verbs devices without a PCI parent, which hwloc leaves out */
	for (i = 0; i < nsys; i++) {
		struct topo_nic *nic;
		hwloc_obj_t net;

		if (ibc_topo_nic_find(t, sys_names[i]) >= 0)
			continue;
		nic = &t->nics[t->nnics];
		nic->name = sys_names[i];
		sys_names[i] = NULL;
		t->nnics++;
		nic->via = topo_sys_parent_netdev(nic->name);
		net = nic->via ? topo_find_netdev(t->hw, nic->via) : NULL;
		nic->pci = net ? topo_pci_of(net) : NULL;
		nic->local = net ? hwloc_get_non_io_ancestor_obj(t->hw, net) :
				   hwloc_get_root_obj(t->hw);
		nic->netdev = nic->via;
		if (nic->pci)
			IBC_LOG_DEBUG(TOPO, "verbs device %s is not in hwloc's tree: located through netdev %s",
				      nic->name, nic->via);
		else
			IBC_LOG_DEBUG(TOPO, "verbs device %s is not in hwloc's tree: virtual, locality unknown",
				      nic->name);
	}
	if (t->nnics > 1)
		qsort(t->nics, (size_t)t->nnics, sizeof(*t->nics), topo_nic_cmp);
	st = IBC_OK;
out:
	ibc_topo_names_free(sys_names, nsys);
	return st;
}

static int topo_is_nvidia_gpu(hwloc_obj_t pci)
{
	return pci->attr->pcidev.vendor_id == 0x10de &&
	       (pci->attr->pcidev.class_id == 0x0300 || pci->attr->pcidev.class_id == 0x0302);
}

/* GPU OS devices of one kind: CUDA coprocessors ("cuda0") or NVML GPUs ("nvml0") */
static int topo_is_gpu_osdev(hwloc_obj_t o, int cuda)
{
	if (!o->name)
		return 0;
	if (cuda)
		return o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC &&
		       ((o->subtype && !strcmp(o->subtype, "CUDA")) || !strncmp(o->name, "cuda", 4));
	return o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU && !strncmp(o->name, "nvml", 4);
}

static ibc_status_t topo_collect_gpus(struct ibc_topo *t)
{
	static const char *const order_name[] = { "CUDA", "NVML", "PCI bus id" };
	hwloc_obj_t o;
	int kind;
	int n = 0;

	/* kind 0: CUDA OS devices, 1: NVML OS devices, 2: NVIDIA PCI display devices */
	for (kind = 0; kind < 3; kind++) {
		n = 0;
		o = NULL;
		if (kind < 2) {
			while ((o = hwloc_get_next_osdev(t->hw, o)) != NULL)
				n += topo_is_gpu_osdev(o, kind == 0);
		} else {
			while ((o = hwloc_get_next_pcidev(t->hw, o)) != NULL)
				n += topo_is_nvidia_gpu(o);
		}
		if (n)
			break;
	}
	if (!n)
		return IBC_OK;
	t->gpus = ibc_calloc((size_t)n, sizeof(*t->gpus), "topology GPUs");
	if (!t->gpus)
		return IBC_ERR_NO_MEMORY;
	t->gpu_order = order_name[kind];
	o = NULL;
	while ((o = kind < 2 ? hwloc_get_next_osdev(t->hw, o) : hwloc_get_next_pcidev(t->hw, o))) {
		struct topo_gpu *g = &t->gpus[t->ngpus];

		if (kind < 2 ? !topo_is_gpu_osdev(o, kind == 0) : !topo_is_nvidia_gpu(o))
			continue;
		g->osdev = kind < 2 ? o->name : NULL;
		g->pci = topo_pci_of(o);
		g->local = hwloc_get_non_io_ancestor_obj(t->hw, o);
		g->model = hwloc_obj_get_info_by_name(o, "GPUModel");
		if (!g->model && g->pci)
			g->model = hwloc_obj_get_info_by_name(g->pci, "PCIDevice");
		t->ngpus++;
	}
	if (t->ngpus > 1)
		qsort(t->gpus, (size_t)t->ngpus, sizeof(*t->gpus), topo_gpu_cmp);
	return IBC_OK;
}

ibc_status_t ibc_topo_create(struct ibc_topo **topo_p)
{
	const char *file = ibc_param_topo_file();
	ibc_status_t st;
	struct ibc_topo *t;
	size_t srclen;

	if (!topo_p)
		return IBC_ERR_INVALID_ARG;
	t = ibc_calloc(1, sizeof(*t), "topology");
	if (!t)
		return IBC_ERR_NO_MEMORY;
	t->gpu_order = "none";
	if (hwloc_topology_init(&t->hw) != 0) {
		IBC_LOG_ERROR(TOPO, "hwloc_topology_init failed: %s", strerror(errno));
		st = IBC_ERR_NO_MEMORY;
		goto err_free;
	}
	/* PCI bridges and devices, and OS devices, that lead to something useful */
	hwloc_topology_set_io_types_filter(t->hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
	/*
	 * PCI from sysfs (hwloc's linux backend) rather than its libpciaccess
	 * component: same devices and bridges, ~15% faster here, and
	 * libpciaccess leaks its pci.ids cache (~600 KB per process, reported by
	 * LeakSanitizer in every program that loads a topology). Only the
	 * vendor/device names from pci.ids are lost.
	 */
	if (hwloc_topology_set_components(t->hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci"))
		IBC_LOG_DEBUG(TOPO, "cannot blacklist hwloc's pci component: %s", strerror(errno));
#endif
	if (*file) {
		if (access(file, R_OK) != 0) {
			IBC_LOG_ERROR(TOPO, "IBC_TOPO_FILE=%s: %s", file, strerror(errno));
			st = IBC_ERR_SYSTEM;
			goto err_destroy_hw;
		}
		if (hwloc_topology_set_xml(t->hw, file) != 0) {
			IBC_LOG_ERROR(TOPO, "IBC_TOPO_FILE=%s: hwloc cannot read XML: %s", file,
				      strerror(errno));
			st = IBC_ERR_INVALID_ARG;
			goto err_destroy_hw;
		}
	}
	if (hwloc_topology_load(t->hw) != 0) {
		if (*file) {
			IBC_LOG_ERROR(TOPO, "IBC_TOPO_FILE=%s is not a valid hwloc XML topology: %s",
				      file, strerror(errno));
			st = IBC_ERR_INVALID_ARG;
		} else {
			IBC_LOG_ERROR(TOPO, "hwloc cannot discover this machine: %s", strerror(errno));
			st = IBC_ERR_SYSTEM;
		}
		goto err_destroy_hw;
	}
	t->this_system = hwloc_topology_is_thissystem(t->hw);
	t->nnuma = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_NUMANODE);
	srclen = strlen(file) + 64;
	t->source = ibc_malloc(srclen, "topology source");
	if (!t->source) {
		st = IBC_ERR_NO_MEMORY;
		goto err_destroy_hw;
	}
	if (*file)
		snprintf(t->source, srclen, "hwloc xml %s", file);
	else
		snprintf(t->source, srclen, "hwloc %s discovery", HWLOC_VERSION);
	IBC_CHECK_GOTO(topo_collect_nics(t), st, err_free_devs);
	IBC_CHECK_GOTO(topo_collect_gpus(t), st, err_free_devs);
	if (getenv("CUDA_VISIBLE_DEVICES") && t->ngpus && strcmp(t->gpu_order, "CUDA"))
		IBC_LOG_INFO(TOPO, "CUDA_VISIBLE_DEVICES is set but GPUs are numbered by %s over all GPUs: map CUDA devices by PCI bus id",
			     t->gpu_order);
	IBC_LOG_INFO(TOPO, "topology from %s: %d packages, %d NUMA nodes, %d cores, %d NICs, %d GPUs (%s order)%s",
		     t->source, hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_PACKAGE), t->nnuma,
		     hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_CORE), t->nnics, t->ngpus,
		     t->gpu_order, t->this_system ? "" : ", not this machine: no binding");
	*topo_p = t;
	return IBC_OK;

err_free_devs:
	/* ibc_topo_destroy() frees whatever was collected, hwloc included */
	ibc_topo_destroy(t);
	return st;
err_destroy_hw:
	hwloc_topology_destroy(t->hw);
err_free:
	ibc_free(t);
	return st;
}

void ibc_topo_destroy(struct ibc_topo *t)
{
	int i;

	if (!t)
		return;
	for (i = 0; i < t->nnics; i++) {
		ibc_free(t->nics[i].name);
		ibc_free(t->nics[i].via);
	}
	ibc_free(t->nics);
	ibc_free(t->gpus);
	ibc_free(t->source);
	hwloc_topology_destroy(t->hw);
	ibc_free(t);
}

/* ---- queries ----------------------------------------------------------------- */

const char *ibc_topo_source(struct ibc_topo *t)
{
	return t ? t->source : "";
}

const char *ibc_topo_dist_note(struct ibc_topo *t)
{
	return "";
}

int ibc_topo_nic_count(struct ibc_topo *t)
{
	return t ? t->nnics : 0;
}

const char *ibc_topo_nic_name(struct ibc_topo *t, int i)
{
	return t && i >= 0 && i < t->nnics ? t->nics[i].name : NULL;
}

int ibc_topo_nic_find(struct ibc_topo *t, const char *nic)
{
	int i;

	for (i = 0; nic && i < t->nnics; i++)
		if (t->nics[i].name && !strcmp(t->nics[i].name, nic))
			return i;
	return -1;
}

int ibc_topo_gpu_count(struct ibc_topo *t)
{
	return t ? t->ngpus : 0;
}

ibc_status_t ibc_topo_gpu_busid(struct ibc_topo *t, int gpu, char *buf, size_t len)
{
	if (!t || !buf || !len || gpu < 0 || gpu >= t->ngpus)
		return IBC_ERR_INVALID_ARG;
	topo_busid(t->gpus[gpu].pci, buf, len);
	return IBC_OK;
}

enum ibc_topo_dist ibc_topo_dist_of(struct ibc_topo *t, int gpu, int nic)
{
	hwloc_obj_t a = t->gpus[gpu].pci;
	hwloc_obj_t b = nic >= 0 ? t->nics[nic].pci : NULL;
	hwloc_obj_t ca;
	hwloc_obj_t la;
	hwloc_obj_t lb;

	if (!a || !b)
		return IBC_TOPO_SYS;
	if (a == b)
		return IBC_TOPO_PIX;
	ca = topo_common_ancestor(a, b);
	if (ca && ca->type == HWLOC_OBJ_BRIDGE) {
		if (topo_is_host_bridge(ca))
			return IBC_TOPO_PHB;
		/* a switch: its upstream port, one downstream port on each side */
		if (topo_bridges_between(a, ca) <= 1 && topo_bridges_between(b, ca) <= 1)
			return IBC_TOPO_PIX;
		return IBC_TOPO_PXB;
	}
	if (ca && ca->type == HWLOC_OBJ_PCI_DEVICE)
		return IBC_TOPO_PIX;
	/* different host bridges: same NUMA node or not */
	if (t->nnuma <= 1)
		return IBC_TOPO_NODE;
	la = hwloc_get_non_io_ancestor_obj(t->hw, a);
	lb = hwloc_get_non_io_ancestor_obj(t->hw, b);
	if (topo_numa_of(la) >= 0 && hwloc_bitmap_isequal(la->nodeset, lb->nodeset))
		return IBC_TOPO_NODE;
	return IBC_TOPO_SYS;
}

void ibc_topo_nic_spread_key(struct ibc_topo *t, int nic, long key[IBC_TOPO_KEY_LEVELS])
{
	const struct topo_nic *n = nic >= 0 ? &t->nics[nic] : NULL;
	hwloc_obj_t o;
	int numa;

	key[0] = key[1] = key[2] = LONG_MAX;
	if (!n)
		return;
	numa = topo_numa_of(n->local);
	if (numa >= 0)
		key[0] = numa;
	if (!n->pci)
		return;
	for (o = n->pci; o && hwloc_obj_type_is_io(o->type); o = o->parent) {
		if (topo_is_host_bridge(o)) {
			key[1] = (long)o->gp_index;
			break;
		}
	}
	key[2] = ((long)n->pci->attr->pcidev.domain << 16) | ((long)n->pci->attr->pcidev.bus << 8) |
		 (long)n->pci->attr->pcidev.dev;
}

/* the CPUs of the NUMA node(s) of @local into @set; -1 on allocation failure */
static int topo_local_cpus(struct ibc_topo *t, hwloc_obj_t local, hwloc_bitmap_t set)
{
	if (!local->nodeset || hwloc_bitmap_iszero(local->nodeset))
		return hwloc_bitmap_copy(set, local->cpuset);
	return hwloc_cpuset_from_nodeset(t->hw, set, local->nodeset);
}

static ibc_status_t topo_locality(struct ibc_topo *t, hwloc_obj_t local, int *numa_p, char *cpus,
				  size_t cpus_len)
{
	hwloc_bitmap_t set;

	if (numa_p)
		*numa_p = topo_numa_of(local);
	if (!cpus || !cpus_len)
		return IBC_OK;
	set = hwloc_bitmap_alloc();
	if (!set || topo_local_cpus(t, local, set) != 0) {
		hwloc_bitmap_free(set);
		IBC_LOG_ERROR(MEM, "cannot allocate a cpuset for the topology");
		return IBC_ERR_NO_MEMORY;
	}
	hwloc_bitmap_list_snprintf(cpus, cpus_len, set);
	hwloc_bitmap_free(set);
	return IBC_OK;
}

ibc_status_t ibc_topo_nic_locality(struct ibc_topo *t, const char *nic, int *numa_p, char *cpus,
				   size_t cpus_len)
{
	int i;

	if (!t || !nic)
		return IBC_ERR_INVALID_ARG;
	i = ibc_topo_nic_find(t, nic);
	if (i < 0) {
		IBC_LOG_DEBUG(TOPO, "NIC %s is not in the topology", nic);
		return IBC_ERR_INVALID_ARG;
	}
	return topo_locality(t, t->nics[i].local, numa_p, cpus, cpus_len);
}

ibc_status_t ibc_topo_gpu_locality(struct ibc_topo *t, int gpu, int *numa_p, char *cpus,
				   size_t cpus_len)
{
	if (!t || gpu < 0 || gpu >= t->ngpus)
		return IBC_ERR_INVALID_ARG;
	return topo_locality(t, t->gpus[gpu].local, numa_p, cpus, cpus_len);
}

/* ---- binding --------------------------------------------------------------- */

/*
 * The binding decision for a thread serving something attached at @local
 * (a NIC's or GPU's first non-I/O ancestor, or a NUMA node), named @label
 * in the reason; the CPUs to bind to are left in @set.
 */
static ibc_status_t topo_plan_local(struct ibc_topo *t, hwloc_obj_t local, const char *label,
				    const char *verb, hwloc_bitmap_t set, int *bind_p, char *why,
				    size_t why_len)
{
	ibc_status_t st = IBC_OK;
	hwloc_const_cpuset_t allowed;
	hwloc_bitmap_t cur = NULL;
	char a[IBC_TOPO_CPULIST_LEN];
	char b[IBC_TOPO_CPULIST_LEN];

	allowed = hwloc_topology_get_allowed_cpuset(t->hw);
	if (topo_local_cpus(t, local, set) != 0)
		goto err_nomem;
	hwloc_bitmap_and(set, set, allowed);
	if (hwloc_bitmap_isincluded(allowed, set)) {
		hwloc_bitmap_list_snprintf(a, sizeof(a), set);
		snprintf(why, why_len, "%s is local to every allowed CPU (%s): no binding needed",
			 label, a);
		return IBC_OK;
	}
	cur = hwloc_bitmap_alloc();
	if (!cur)
		goto err_nomem;
	if (hwloc_get_cpubind(t->hw, cur, HWLOC_CPUBIND_THREAD) != 0) {
		IBC_LOG_WARN(TOPO, "cannot read the thread's CPU binding: %s", strerror(errno));
		st = IBC_ERR_SYSTEM;
		goto out;
	}
	hwloc_bitmap_list_snprintf(a, sizeof(a), set);
	hwloc_bitmap_list_snprintf(b, sizeof(b), cur);
	if (!hwloc_bitmap_intersects(set, cur)) {
		snprintf(why, why_len,
			 "the thread's CPUs %s share none with %s's NUMA node (CPUs %s): keeping the launcher's binding",
			 b, label, a);
		goto out;
	}
	hwloc_bitmap_and(set, set, cur);
	hwloc_bitmap_list_snprintf(b, sizeof(b), set);
	snprintf(why, why_len, "%s %s NUMA node %d (CPUs %s): binding to CPUs %s", label, verb,
		 topo_numa_of(local), a, b);
	*bind_p = 1;
out:
	hwloc_bitmap_free(cur);
	return st;
err_nomem:
	IBC_LOG_ERROR(MEM, "cannot allocate a cpuset for the topology");
	return IBC_ERR_NO_MEMORY;
}

/*
 * The binding decision of ibc_topo_progress_plan(), with the set in @set:
 * near @nic when given, else near GPU @gpu when >= 0, else on NUMA node
 * @lrank mod (number of NUMA nodes).
 */
static ibc_status_t topo_plan(struct ibc_topo *t, const char *nic, int gpu, int lrank,
			      int nlocal, hwloc_bitmap_t set, int *bind_p, char *why,
			      size_t why_len)
{
	char label[96];
	hwloc_obj_t local;
	int i;

	*bind_p = 0;
	if (!ibc_param_bind()) {
		snprintf(why, why_len, "IBC_BIND=0: thread affinity left alone");
		return IBC_OK;
	}
	if (!t->this_system) {
		snprintf(why, why_len, "topology is not this machine (IBC_TOPO_FILE): no binding");
		return IBC_OK;
	}
	if (nic) {
		i = ibc_topo_nic_find(t, nic);
		if (i < 0 || (!t->nics[i].pci && t->nnuma > 1)) {
			snprintf(why, why_len, "%s: locality unknown (%s): no binding", nic,
				 i < 0 ? "not in the topology" : "virtual device");
			return IBC_OK;
		}
		return topo_plan_local(t, t->nics[i].local, nic, "is on", set, bind_p, why,
				       why_len);
	}
	if (gpu >= 0) {
		snprintf(label, sizeof(label), "GPU %d", gpu);
		if (!t->gpus[gpu].local || (!t->gpus[gpu].pci && t->nnuma > 1)) {
			snprintf(why, why_len, "%s: locality unknown: no binding", label);
			return IBC_OK;
		}
		return topo_plan_local(t, t->gpus[gpu].local, label, "is on", set, bind_p, why,
				       why_len);
	}
	local = hwloc_get_obj_by_type(t->hw, HWLOC_OBJ_NUMANODE,
				      (unsigned)(t->nnuma > 0 ? lrank % t->nnuma : 0));
	if (!local)
		local = hwloc_get_root_obj(t->hw);
	snprintf(label, sizeof(label), "local rank %d of %d (no NIC, no GPU)", lrank, nlocal);
	return topo_plan_local(t, local, label, "takes", set, bind_p, why, why_len);
}

ibc_status_t ibc_topo_progress_plan(struct ibc_topo *t, const char *nic, int gpu, int local_rank,
				    int local_nranks, int *bind_p, char *cpus, size_t cpus_len,
				    char *why, size_t why_len)
{
	char line[IBC_TOPO_WHY_LEN];
	hwloc_bitmap_t set;
	ibc_status_t st;
	int bind;

	if (!t || !bind_p || gpu >= t->ngpus || local_nranks < 1 || local_rank < 0 ||
	    local_rank >= local_nranks)
		return IBC_ERR_INVALID_ARG;
	set = hwloc_bitmap_alloc();
	if (!set) {
		IBC_LOG_ERROR(MEM, "cannot allocate a cpuset for the topology");
		return IBC_ERR_NO_MEMORY;
	}
	st = topo_plan(t, nic, gpu, local_rank, local_nranks, set, &bind, line, sizeof(line));
	if (st == IBC_OK) {
		*bind_p = bind;
		if (cpus && cpus_len) {
			if (bind)
				hwloc_bitmap_list_snprintf(cpus, cpus_len, set);
			else
				cpus[0] = '\0';
		}
		if (why && why_len)
			snprintf(why, why_len, "%s", line);
	}
	hwloc_bitmap_free(set);
	return st;
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
	char line[IBC_TOPO_WHY_LEN];
	hwloc_bitmap_t set;
	ibc_status_t st;
	int bind;

	if (!t || !nic)
		return IBC_ERR_INVALID_ARG;
	set = hwloc_bitmap_alloc();
	if (!set) {
		IBC_LOG_ERROR(MEM, "cannot allocate a cpuset for the topology");
		return IBC_ERR_NO_MEMORY;
	}
	st = topo_plan(t, nic, -1, 0, 1, set, &bind, line, sizeof(line));
	if (st != IBC_OK)
		goto out;
	if (bind && hwloc_set_cpubind(t->hw, set, HWLOC_CPUBIND_THREAD) != 0) {
		IBC_LOG_WARN(TOPO, "progress thread near %s: %s, but binding failed: %s", nic, line,
			     strerror(errno));
		st = IBC_ERR_SYSTEM;
		goto out;
	}
	IBC_LOG_INFO(TOPO, "progress thread near %s: %s", nic, line);
out:
	hwloc_bitmap_free(set);
	return st;
}

/* ---- printing ----------------------------------------------------------- */

static int topo_gpu_at(struct ibc_topo *t, hwloc_obj_t pci)
{
	int g;

	for (g = 0; g < t->ngpus; g++)
		if (t->gpus[g].pci == pci)
			return g;
	return -1;
}

/* 1 when the I/O subtree of @obj holds a NIC or a GPU */
static int topo_io_useful(struct ibc_topo *t, hwloc_obj_t obj)
{
	hwloc_obj_t c;
	int i;

	if (obj->type == HWLOC_OBJ_PCI_DEVICE) {
		if (topo_gpu_at(t, obj) >= 0)
			return 1;
		for (i = 0; i < t->nnics; i++)
			if (t->nics[i].pci == obj)
				return 1;
	}
	for (c = obj->io_first_child; c; c = c->next_sibling)
		if (topo_io_useful(t, c))
			return 1;
	return 0;
}

static void topo_print_pci(struct ibc_topo *t, FILE *f, hwloc_obj_t obj, int indent)
{
	char bus[32];
	int g;
	int i;

	topo_busid(obj, bus, sizeof(bus));
	g = topo_gpu_at(t, obj);
	if (g >= 0)
		fprintf(f, "%*sGPU %d %s%s%s%s%s\n", indent, "", g, bus,
			t->gpus[g].osdev ? " " : "", t->gpus[g].osdev ? t->gpus[g].osdev : "",
			t->gpus[g].model ? " " : "", t->gpus[g].model ? t->gpus[g].model : "");
	for (i = 0; i < t->nnics; i++) {
		const struct topo_nic *n = &t->nics[i];

		if (n->pci != obj)
			continue;
		fprintf(f, "%*sNIC %s %s", indent, "", n->name, bus);
		if (n->via)
			fprintf(f, " (software device on %s)", n->via);
		else if (n->netdev)
			fprintf(f, " (net %s)", n->netdev);
		fprintf(f, "\n");
	}
}

static void topo_print_io(struct ibc_topo *t, FILE *f, hwloc_obj_t obj, int indent)
{
	hwloc_obj_t c;

	if (!topo_io_useful(t, obj))
		return;
	if (obj->type == HWLOC_OBJ_BRIDGE) {
		const struct hwloc_bridge_attr_s *br = &obj->attr->bridge;

		if (topo_is_host_bridge(obj)) {
			fprintf(f, "%*sHostBridge %04x:[%02x-%02x]\n", indent, "",
				(unsigned)br->downstream.pci.domain,
				(unsigned)br->downstream.pci.secondary_bus,
				(unsigned)br->downstream.pci.subordinate_bus);
		} else {
			char bus[32];

			topo_busid(obj, bus, sizeof(bus));
			fprintf(f, "%*sPCIBridge %s -> [%02x-%02x]\n", indent, "", bus,
				(unsigned)br->downstream.pci.secondary_bus,
				(unsigned)br->downstream.pci.subordinate_bus);
		}
	} else if (obj->type == HWLOC_OBJ_PCI_DEVICE) {
		topo_print_pci(t, f, obj, indent);
	}
	for (c = obj->io_first_child; c; c = c->next_sibling)
		topo_print_io(t, f, c, indent + 2);
}

static void topo_print_normal(struct ibc_topo *t, FILE *f, hwloc_obj_t obj, int indent)
{
	char cpus[IBC_TOPO_CPULIST_LEN];
	hwloc_obj_t c;
	int shown = 1;

	hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), obj->cpuset);
	switch (obj->type) {
	case HWLOC_OBJ_MACHINE:
		fprintf(f, "%*sMachine: CPUs %s\n", indent, "", cpus);
		break;
	case HWLOC_OBJ_PACKAGE:
		fprintf(f, "%*sPackage %u: %d cores, CPUs %s\n", indent, "", obj->os_index,
			hwloc_get_nbobjs_inside_cpuset_by_type(t->hw, obj->cpuset, HWLOC_OBJ_CORE),
			cpus);
		break;
	case HWLOC_OBJ_GROUP:
		fprintf(f, "%*sGroup: CPUs %s\n", indent, "", cpus);
		break;
	case HWLOC_OBJ_NUMANODE:
		fprintf(f, "%*sNUMANode %u: CPUs %s", indent, "", obj->os_index, cpus);
		if (obj->attr->numanode.local_memory)
			fprintf(f, ", %llu MiB",
				(unsigned long long)(obj->attr->numanode.local_memory >> 20));
		fprintf(f, "\n");
		break;
	default:
		shown = 0;
		break;
	}
	if (shown)
		indent += 2;
	for (c = obj->memory_first_child; c; c = c->next_sibling)
		topo_print_normal(t, f, c, indent);
	for (c = obj->first_child; c; c = c->next_sibling)
		topo_print_normal(t, f, c, indent);
	for (c = obj->io_first_child; c; c = c->next_sibling)
		topo_print_io(t, f, c, indent);
}

ibc_status_t ibc_topo_print(struct ibc_topo *t, FILE *f)
{
	int i;

	if (!t || !f)
		return IBC_ERR_INVALID_ARG;
	fprintf(f, "topology: %s%s\n", t->source,
		t->this_system ? "" : " (not this machine)");
	fprintf(f, "summary: %d packages, %d NUMA nodes, %d cores, %d PUs, %d NICs, %d GPUs%s%s%s\n",
		hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_PACKAGE), t->nnuma,
		hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_CORE),
		hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_PU), t->nnics, t->ngpus,
		t->ngpus ? " (" : "", t->ngpus ? t->gpu_order : "", t->ngpus ? " order)" : "");
	topo_print_normal(t, f, hwloc_get_root_obj(t->hw), 0);
	for (i = 0; i < t->nnics; i++)
		if (!t->nics[i].pci)
			fprintf(f, "NIC %s (software device%s%s, no PCI locality)\n",
				t->nics[i].name, t->nics[i].via ? " on " : "",
				t->nics[i].via ? t->nics[i].via : "");
	if (ferror(f))
		return IBC_ERR_SYSTEM;
	return IBC_OK;
}
