/* SPDX-License-Identifier: MIT */
/*
 * Layer topo (src/topo/, above cuda): the machine's topology and what is
 * decided from it (NIC per GPU, core binding, GPUDirect RDMA).
 *
 * topo.h - the machine topology as the rest of ibcoll sees it: which NIC is
 * nearest a GPU, how far apart they are (NCCL's PIX/PXB/PHB/NODE/SYS
 * classes), which NIC a rank without a GPU should use, and which cores a
 * thread serving a NIC should run on. Two backends provide this API,
 * chosen at configure time: topo_hwloc.c (hwloc >= 2.0) and topo_flat.c
 * (no hwloc: one NUMA node, devices in listed order). topo_common.c holds
 * the decisions built on top of either. Callers never #ifdef.
 */
#ifndef IBC_TOPO_H
#define IBC_TOPO_H

#include <sched.h>
#include <stddef.h>
#include <stdio.h>

#include "ibcoll.h"

/**
 * enum ibc_topo_dist - PCI path class between a GPU and a NIC, best first.
 * The names and meanings are NCCL's (and nvidia-smi topo -m's):
 * @IBC_TOPO_PIX:  at most one PCIe switch between them (same switch).
 * @IBC_TOPO_PXB:  several PCIe switches, without crossing a host bridge.
 * @IBC_TOPO_PHB:  through one PCIe host bridge (the CPU root complex).
 * @IBC_TOPO_NODE: different host bridges of the same NUMA node.
 * @IBC_TOPO_SYS:  across NUMA nodes or sockets (SMP interconnect), or a
 *                 path the topology cannot tell (a virtual NIC).
 * @IBC_TOPO_DIST_COUNT: not a class; also written by ibc_topo_pick_nic()
 *                 when there is no GPU to measure from ("none").
 */
enum ibc_topo_dist {
	IBC_TOPO_PIX = 0,
	IBC_TOPO_PXB = 1,
	IBC_TOPO_PHB = 2,
	IBC_TOPO_NODE = 3,
	IBC_TOPO_SYS = 4,
	IBC_TOPO_DIST_COUNT
};

/* "LOC" level of IBC_NET_GDR_LEVEL: no distance is close enough */
#define IBC_TOPO_GDR_NEVER (-1)

/* longest cpu list string the API writes ("0-55,112-167"), bytes with NUL */
#define IBC_TOPO_CPULIST_LEN 256
/* longest reason string the API writes, bytes with NUL */
#define IBC_TOPO_WHY_LEN 1024

struct ibc_topo;

/**
 * ibc_topo_create() - Load the topology of this machine, or of the machine
 * described by the hwloc XML file named in IBC_TOPO_FILE.
 * @topo_p: [out] the new topology, written only on success.
 *
 * hwloc backend: discovers packages, NUMA nodes, PCI bridges and devices
 * and the OS devices of InfiniBand/RoCE NICs and CUDA GPUs. Verbs devices
 * that hwloc does not show (software devices such as rxe0 and siw0, which
 * have no PCI parent) are added from /sys/class/infiniband, located through
 * the network device they are bound to when hwloc knows it. With
 * IBC_TOPO_FILE nothing of this machine is looked at. GPUs are numbered in
 * the order of hwloc's CUDA OS devices (cuda0, ...), else NVML's, else by
 * PCI bus id (NVIDIA display/3D controllers).
 * flat backend: NICs are the entries of /sys/class/infiniband and GPUs the
 * entries of /proc/driver/nvidia/gpus, in name order; IBC_TOPO_FILE is
 * ignored with a warning.
 * Logs one INFO TOPO line with the source and the device counts.
 *
 * Blocking:  yes; hwloc discovery takes 10-100 ms on large machines.
 * Threading: safe from any thread; the result is read-only and may be
 *            shared by threads (every query below is thread-safe).
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (@topo_p NULL, IBC_TOPO_FILE not a
 *            valid hwloc XML file); IBC_ERR_SYSTEM (IBC_TOPO_FILE unreadable,
 *            hwloc discovery failed); IBC_ERR_NO_MEMORY.
 */
ibc_status_t ibc_topo_create(struct ibc_topo **topo_p);

/**
 * ibc_topo_shared() - The process-wide topology, created by the first call
 * (ibc_topo_create()) and kept until the process exits, so that every
 * communicator, the verbs transport, the progress threads and the CUDA code
 * share one discovery (20-50 ms on a small machine, more on large ones).
 * @topo_p: [out] the shared topology, written only on success; never
 *          destroy it.
 *
 * Threading: safe; concurrent first calls create it once.
 * Return:    IBC_OK, or the error of ibc_topo_create(); a failed creation
 *            is tried again by the next call.
 */
ibc_status_t ibc_topo_shared(struct ibc_topo **topo_p);

/**
 * ibc_topo_destroy() - Free a topology from ibc_topo_create().
 * @topo: [in] the topology; NULL is accepted and ignored.
 */
void ibc_topo_destroy(struct ibc_topo *topo);

/**
 * ibc_topo_dist_name() - NCCL's short name of a distance class.
 * @d: [in] a class; IBC_TOPO_DIST_COUNT gives "none", other values "?".
 * Return: a static string: "PIX", "PXB", "PHB", "NODE", "SYS".
 */
const char *ibc_topo_dist_name(enum ibc_topo_dist d);

/**
 * ibc_topo_source() - Where the topology came from, for logs and ibc_info:
 * "hwloc 2.9.0 discovery", "hwloc xml <file>" or "flat (built without hwloc)".
 * @t: [in] topology.
 * Return: a string owned by @t.
 */
const char *ibc_topo_source(struct ibc_topo *t);

/**
 * ibc_topo_nic_count() - Number of verbs NICs in the topology.
 * @t: [in] topology.
 * Return: count >= 0.
 */
int ibc_topo_nic_count(struct ibc_topo *t);

/**
 * ibc_topo_nic_name() - Verbs device name of NIC @i ("mlx5_0", "rxe0").
 * @t: [in] topology.
 * @i: [in] 0 <= @i < ibc_topo_nic_count(); NICs are in natural name order
 *     (mlx5_2 before mlx5_10).
 * Return: a string owned by @t; NULL when @i is out of range.
 */
const char *ibc_topo_nic_name(struct ibc_topo *t, int i);

/**
 * ibc_topo_gpu_count() - Number of GPUs in the topology.
 * @t: [in] topology.
 * Return: count >= 0. GPU indices are CUDA indices only when the topology
 *         has CUDA OS devices or CUDA enumerates by PCI bus id without
 *         CUDA_VISIBLE_DEVICES; callers that know their device's PCI bus id
 *         should map it with ibc_topo_gpu_by_busid().
 */
int ibc_topo_gpu_count(struct ibc_topo *t);

/**
 * ibc_topo_gpu_busid() - PCI bus id of GPU @gpu, "dddd:bb:dd.f" lower case.
 * @t:     [in]  topology.
 * @gpu:   [in]  0 <= @gpu < ibc_topo_gpu_count().
 * @buf:   [out] the bus id, NUL-terminated; "" when unknown (flat backend
 *               without the NVIDIA driver's names).
 * @len:   [in]  size of @buf in bytes; 16 is always enough.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL argument, @gpu out of range).
 */
ibc_status_t ibc_topo_gpu_busid(struct ibc_topo *t, int gpu, char *buf, size_t len);

/**
 * ibc_topo_gpu_by_busid() - Topology index of the GPU at a PCI bus id, as
 * cudaDeviceGetPCIBusId() ("0000:1B:00.0") or NVML ("00000000:1B:00.0")
 * write it; case and domain width do not matter.
 * @t:      [in]  topology.
 * @busid:  [in]  PCI bus id "[domain:]bus:dev.fn" in hex.
 * @gpu_p:  [out] GPU index, written only on success.
 * Return:  IBC_OK; IBC_ERR_INVALID_ARG (NULL argument, malformed @busid, no
 *          GPU at that address; logged at DEBUG only, callers decide).
 */
ibc_status_t ibc_topo_gpu_by_busid(struct ibc_topo *t, const char *busid, int *gpu_p);

/**
 * ibc_topo_gpu_nic_dist() - PCI path class between GPU @gpu and NIC @nic.
 * @t:   [in]  topology.
 * @gpu: [in]  GPU index, 0 <= @gpu < ibc_topo_gpu_count().
 * @nic: [in]  verbs device name. A name the topology does not know is SYS
 *             (its path cannot be told), not an error.
 * @d_p: [out] the class, written only on success.
 *
 * Algorithm: the common ancestor of the two PCI devices in hwloc's tree: a
 * PCIe switch port with at most one bridge below it on each side is PIX,
 * another PCI bridge PXB, a host bridge PHB; otherwise NODE when both
 * hang below the same single NUMA node (or the machine has one), else
 * SYS. A PCIe switch is an upstream port and its downstream ports, as in
 * NCCL's topology (graph/topo.cc) and nvidia-smi topo -m. The flat backend
 * cannot see PCI and answers PHB for every pair.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL argument, @gpu out of range).
 */
ibc_status_t ibc_topo_gpu_nic_dist(struct ibc_topo *t, int gpu, const char *nic,
				   enum ibc_topo_dist *d_p);

/**
 * ibc_topo_nic_locality() - NUMA node and CPUs local to NIC @nic.
 * @t:        [in]  topology.
 * @nic:      [in]  verbs device name known to the topology.
 * @numa_p:   [out] OS index of the NIC's NUMA node; -1 when the NIC spans
 *                  several (its locality is unknown). May be NULL.
 * @cpus:     [out] the CPUs of that NUMA node (or nodes) as a list,
 *                  "0-7,16-23" (OS indices); may be NULL.
 * @cpus_len: [in]  size of @cpus in bytes (IBC_TOPO_CPULIST_LEN suffices
 *                  for 1024 CPUs in ranges; longer lists are truncated).
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL @t/@nic, unknown NIC).
 */
ibc_status_t ibc_topo_nic_locality(struct ibc_topo *t, const char *nic, int *numa_p, char *cpus,
				   size_t cpus_len);

/**
 * ibc_topo_gpu_locality() - NUMA node and CPUs local to GPU @gpu.
 * @t:        [in]  topology.
 * @gpu:      [in]  0 <= @gpu < ibc_topo_gpu_count().
 * @numa_p:   [out] as in ibc_topo_nic_locality(); may be NULL.
 * @cpus:     [out] as in ibc_topo_nic_locality(); may be NULL.
 * @cpus_len: [in]  size of @cpus in bytes.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL @t, @gpu out of range).
 */
ibc_status_t ibc_topo_gpu_locality(struct ibc_topo *t, int gpu, int *numa_p, char *cpus,
				   size_t cpus_len);

/**
 * ibc_topo_rank_gpu() - The calling rank's GPU, as a topology index.
 * @t:       [in]  topology.
 * @gpu_p:   [out] GPU index, or -1 when the rank has none.
 * @why:     [out] one line for the INFO log; may be NULL.
 * @why_len: [in]  size of @why.
 *
 * IBC_TOPO_GPU when set (an index beyond the topology's GPUs is WARNed and
 * gives -1); else the device of the calling thread's current CUDA context
 * (ibc_cuda_current_busid(), which never creates one) mapped through
 * ibc_topo_gpu_by_busid(); -1 without CUDA, without a current context, or
 * for a device the topology lacks.
 * Threading: reads the calling thread's CUDA context; call it from the
 * thread that initializes the communicator.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL @t or @gpu_p).
 */
ibc_status_t ibc_topo_rank_gpu(struct ibc_topo *t, int *gpu_p, char *why, size_t why_len);

/**
 * ibc_topo_pick_nic() - Choose this rank's NIC among @cands.
 * @t:            [in]  topology.
 * @gpu:          [in]  the rank's GPU index, or -1 when it has none.
 * @local_rank:   [in]  rank among the ranks of this host, 0 <= @local_rank
 *                      < @local_nranks.
 * @local_nranks: [in]  number of ranks on this host, >= 1.
 * @cands:        [in]  @ncands verbs device names that exist and are usable
 *                      (IBC_IB_HCA filtering is the caller's job); names the
 *                      topology does not know are allowed (SYS, unknown
 *                      locality).
 * @ncands:       [in]  >= 1.
 * @idx_p:        [out] index into @cands of the chosen NIC.
 * @dist_p:       [out] GPU-NIC class of the choice; IBC_TOPO_DIST_COUNT
 *                      when @gpu < 0. May be NULL.
 * @why:          [out] one line for the INFO log saying why; may be NULL.
 * @why_len:      [in]  size of @why (IBC_TOPO_WHY_LEN suffices).
 *
 * Algorithm: with a GPU, the candidates of the best class; if several tie,
 * the GPUs whose best candidates are the same set at the same class share
 * them round-robin in GPU order (the k-th such GPU takes tie k mod n), so
 * every local rank computes the same assignment without talking. Without
 * a GPU, the candidates are put in "spread" order (round-robin over NUMA
 * nodes, within each over host bridges, within each over PCI devices, so
 * that consecutive ranks land on different sockets and cards first, as
 * Open MPI's default --map-by socket places ranks) and local rank r takes
 * the (r mod n)-th. Pure function of its inputs: no state, no I/O.
 * Logs the decision and @why at INFO TOPO.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL @t/@cands/@idx_p or NULL name,
 *         @ncands < 1, bad @local_rank/@local_nranks, @gpu >= gpu count);
 *         IBC_ERR_NO_MEMORY.
 */
ibc_status_t ibc_topo_pick_nic(struct ibc_topo *t, int gpu, int local_rank, int local_nranks,
			       const char *const *cands, int ncands, int *idx_p,
			       enum ibc_topo_dist *dist_p, char *why, size_t why_len);

/**
 * ibc_topo_bind_plan() - Decide, without binding, the CPUs a thread serving
 * @nic would be bound to by ibc_topo_bind_thread_near_nic().
 * @t:        [in]  topology.
 * @nic:      [in]  verbs device name.
 * @bind_p:   [out] 1 when the thread would be bound, 0 when left alone.
 * @cpus:     [out] the CPU list it would be bound to ("" when not); may be NULL.
 * @cpus_len: [in]  size of @cpus.
 * @why:      [out] the reason, one line; may be NULL.
 * @why_len:  [in]  size of @why.
 *
 * Rules: no binding with IBC_BIND=0, with the flat backend, when the
 * topology is not this machine (IBC_TOPO_FILE), for a NIC of unknown
 * locality, or when its NUMA node's CPUs are every allowed CPU anyway.
 * Otherwise the CPUs of the NIC's NUMA node(s) that the calling thread may
 * run on now (NCCL intersects its proxy thread's affinity the same way);
 * when that intersection is empty, the NIC's CPUs alone, and @why says so.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL @t/@nic/@bind_p);
 *         IBC_ERR_NO_MEMORY; IBC_ERR_SYSTEM (reading the thread's binding).
 */
ibc_status_t ibc_topo_bind_plan(struct ibc_topo *t, const char *nic, int *bind_p, char *cpus,
				size_t cpus_len, char *why, size_t why_len);

/**
 * ibc_topo_progress_plan() - Decide, without binding, the CPUs of a
 * communicator's progress thread: near the NIC its verbs transport uses,
 * else near its GPU, else on its local rank's share of the NUMA nodes.
 * @t:            [in]  topology.
 * @nic:          [in]  verbs device the communicator uses, or NULL (no verbs).
 * @gpu:          [in]  the rank's GPU index (< ibc_topo_gpu_count()), or -1.
 * @local_rank:   [in]  rank among this host's ranks, 0 <= @local_rank < @local_nranks.
 * @local_nranks: [in]  number of ranks on this host, >= 1.
 * @bind_p:       [out] 1 when the thread should be bound, 0 when left alone.
 * @cpus:         [out] CPU list to bind to ("" when not); may be NULL.
 * @cpus_len:     [in]  size of @cpus.
 * @why:          [out] the reason, one line for the INFO log; may be NULL.
 * @why_len:      [in]  size of @why (IBC_TOPO_WHY_LEN suffices).
 *
 * Target: @nic's NUMA node; without @nic, @gpu's; without either, NUMA node
 * number (@local_rank mod NUMA node count) in hwloc's logical order (ranks
 * spread round-robin over NUMA nodes, as the no-GPU NIC choice spreads them).
 * Then the rules of ibc_topo_bind_plan() (IBC_BIND=0, flat backend, not this
 * machine, unknown locality, target covering every allowed CPU: no binding;
 * else the target's CPUs within the calling thread's current CPUs, or no
 * binding when they share none). Reads the calling thread's affinity, so
 * call it from the thread that creates the progress thread. No I/O besides.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL @t/@bind_p, @gpu out of range,
 *         bad @local_rank/@local_nranks); IBC_ERR_NO_MEMORY; IBC_ERR_SYSTEM.
 */
ibc_status_t ibc_topo_progress_plan(struct ibc_topo *t, const char *nic, int gpu, int local_rank,
				    int local_nranks, int *bind_p, char *cpus, size_t cpus_len,
				    char *why, size_t why_len);

/**
 * ibc_topo_cpulist_parse() - Parse a CPU list as the plans write it
 * ("0-7,16-23", "" for none) into a CPU set.
 * @list: [in]  the list; OS CPU indices below CPU_SETSIZE.
 * @set:  [out] the CPUs, zeroed first.
 * Return: 0; -1 when @list is malformed or names a CPU >= CPU_SETSIZE.
 */
int ibc_topo_cpulist_parse(const char *list, cpu_set_t *set);

/**
 * ibc_topo_bind_thread_near_nic() - Bind the calling thread to the cores
 * of @nic's NUMA node, as decided by ibc_topo_bind_plan().
 * @t:   [in] topology.
 * @nic: [in] verbs device name.
 *
 * Logs the decision at INFO TOPO. Called by the progress thread of a
 * communicator once it knows its NIC. A failure leaves the affinity
 * unchanged and is logged at WARN; callers may carry on unbound.
 * Threading: affects the calling thread only.
 * Return: IBC_OK (bound, or deliberately left alone); IBC_ERR_INVALID_ARG;
 *         IBC_ERR_SYSTEM (the OS refused the binding); IBC_ERR_NO_MEMORY.
 */
ibc_status_t ibc_topo_bind_thread_near_nic(struct ibc_topo *t, const char *nic);

/**
 * ibc_topo_parse_gdr_level() - Parse an IBC_NET_GDR_LEVEL value.
 * @str:        [in]  LOC, PIX, PXB, PHB, NODE or SYS (any case), or NCCL's
 *                    legacy integers 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4+ SYS.
 * @max_dist_p: [out] largest class for which GPUDirect RDMA is used, or
 *                    IBC_TOPO_GDR_NEVER for LOC. PHB means "same NUMA node"
 *                    in NCCL (its PHB includes crossing host bridges of one
 *                    CPU), so PHB and NODE both give IBC_TOPO_NODE.
 * Source: NCCL ncclGetLevel() (graph/paths.cc) and its environment docs.
 * Return: 0; -1 when @str is malformed (@max_dist_p untouched).
 */
int ibc_topo_parse_gdr_level(const char *str, int *max_dist_p);

/**
 * ibc_topo_gdr_allowed() - Whether the GPU-NIC distance allows GPUDirect
 * RDMA under IBC_NET_GDR_LEVEL (default PXB, as NCCL). This is only the
 * topology half of the decision; the CUDA code also checks that the
 * kernel and the NIC support it (peer memory or DMA-BUF).
 * @t:         [in]  topology.
 * @gpu:       [in]  GPU index.
 * @nic:       [in]  verbs device name.
 * @allowed_p: [out] 1 allowed, 0 not.
 * @why:       [out] one line ("GPU 0 - mlx5_0 PIX <= PXB"); may be NULL.
 * @why_len:   [in]  size of @why.
 * Logs the decision at INFO TOPO; an invalid IBC_NET_GDR_LEVEL is logged at
 * WARN once and PXB is used.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (as ibc_topo_gpu_nic_dist()).
 */
ibc_status_t ibc_topo_gdr_allowed(struct ibc_topo *t, int gpu, const char *nic, int *allowed_p,
				  char *why, size_t why_len);

/**
 * ibc_topo_print() - Print the topology as an indented tree for people:
 * machine, packages, NUMA nodes with their CPUs, and the host bridges, PCI
 * bridges (switch ports), NICs and GPUs below them; devices that are
 * neither NIC nor GPU, and bridges leading only to those, are left out.
 * @t: [in] topology.
 * @f: [in] stream to write to.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL argument); IBC_ERR_SYSTEM
 *         (write error on @f).
 */
ibc_status_t ibc_topo_print(struct ibc_topo *t, FILE *f);

#endif /* IBC_TOPO_H */
