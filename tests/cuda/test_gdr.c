/* SPDX-License-Identifier: MIT */
/*
 * test_gdr.c - the GPUDirect RDMA decision (src/cuda/cuda_gdr.c) with
 * injected facts: peer-memory module present or not, dma-buf built,
 * supported by the GPU and accepted by the NIC or not, GPU-NIC distance
 * class against IBC_NET_GDR_LEVEL, IBC_GDR forcing; the sysfs probe of the
 * peer-memory module on fake sysfs trees; the probe of this machine; the
 * once-per-(GPU, NIC) INFO line; and on a GPU, what the registration cache
 * relies on (allocation range and buffer id of device memory, dma-buf
 * export). Needs no GPU and no NIC (--require-device: fail without a GPU).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/param.h"
#include "cuda/cuda.h"
#include "tap.h"
#include "topo/topo.h"
#include "topo/topo_gdr.h"

/* every mechanism available, GPU and NIC on one PCIe switch, default level */
static struct ibc_gdr_facts base(void)
{
	struct ibc_gdr_facts f = {
		.force = -1,
		.cuda = 1,
		.dmabuf_build = 1,
		.dmabuf_gpu = 1,
		.dmabuf_nic = -1,
		.peermem = 1,
		.dist = IBC_TOPO_PIX,
		.max_dist = IBC_TOPO_PXB,
	};

	return f;
}

struct dcase {
	const char *name;
	struct ibc_gdr_facts f;
	ibc_status_t st;
	enum ibc_gdr_mode mode;
	const char *why;        /* substring of the reason */
};

static void decision_table(void)
{
	struct dcase c[40];
	int n = 0;
	int i;

#define CASE(NAME, MUT, ST, MODE, WHY)                                                 \
	do {                                                                           \
		struct ibc_gdr_facts f_ = base();                                      \
		MUT;                                                                   \
		c[n++] = (struct dcase){ NAME, f_, ST, MODE, WHY };                    \
	} while (0)

	CASE("all available: dma-buf preferred", (void)0, IBC_OK, IBC_GDR_DMABUF, "dma-buf");
	CASE("IBC_GDR=0", f_.force = 0, IBC_OK, IBC_GDR_OFF, "IBC_GDR=0");
	CASE("IBC_GDR=0 wins over everything", (f_.force = 0, f_.dist = IBC_TOPO_PIX), IBC_OK,
	     IBC_GDR_OFF, "IBC_GDR=0");
	CASE("no CUDA", f_.cuda = 0, IBC_OK, IBC_GDR_OFF, "no usable CUDA device");
	CASE("no CUDA, IBC_GDR=1 is an error", (f_.cuda = 0, f_.force = 1), IBC_ERR_UNSUPPORTED,
	     IBC_GDR_OFF, "no usable CUDA device");
	CASE("SYS above PXB", f_.dist = IBC_TOPO_SYS, IBC_OK, IBC_GDR_OFF,
	     "GPU-NIC path SYS is above IBC_NET_GDR_LEVEL PXB");
	CASE("PHB above PXB", f_.dist = IBC_TOPO_PHB, IBC_OK, IBC_GDR_OFF,
	     "PHB is above IBC_NET_GDR_LEVEL PXB");
	CASE("PXB at PXB", f_.dist = IBC_TOPO_PXB, IBC_OK, IBC_GDR_DMABUF, "PXB within PXB");
	CASE("NODE with level PHB (= NODE)", (f_.dist = IBC_TOPO_NODE, f_.max_dist = IBC_TOPO_NODE),
	     IBC_OK, IBC_GDR_DMABUF, "NODE within NODE");
	CASE("SYS with level SYS", (f_.dist = IBC_TOPO_SYS, f_.max_dist = IBC_TOPO_SYS), IBC_OK,
	     IBC_GDR_DMABUF, "SYS within SYS");
	CASE("level LOC: never", f_.max_dist = IBC_TOPO_GDR_NEVER, IBC_OK, IBC_GDR_OFF,
	     "above IBC_NET_GDR_LEVEL LOC");
	CASE("unknown distance counts as SYS", f_.dist = -1, IBC_OK, IBC_GDR_OFF,
	     "path unknown is above IBC_NET_GDR_LEVEL PXB");
	CASE("unknown distance with level SYS", (f_.dist = -1, f_.max_dist = IBC_TOPO_SYS), IBC_OK,
	     IBC_GDR_DMABUF, "unknown within SYS");
	CASE("IBC_GDR=1 skips the distance", (f_.force = 1, f_.dist = IBC_TOPO_SYS), IBC_OK,
	     IBC_GDR_DMABUF, "distance not checked");
	CASE("IBC_GDR=1 even with level LOC", (f_.force = 1, f_.max_dist = IBC_TOPO_GDR_NEVER),
	     IBC_OK, IBC_GDR_DMABUF, "distance not checked");
	CASE("dma-buf not built: peer memory", f_.dmabuf_build = 0, IBC_OK, IBC_GDR_PEERMEM,
	     "nvidia_peermem loaded (dma-buf not built in");
	CASE("GPU without dma-buf: peer memory", f_.dmabuf_gpu = 0, IBC_OK, IBC_GDR_PEERMEM,
	     "dma-buf unsupported by the GPU");
	CASE("NIC refuses dma-buf: peer memory", f_.dmabuf_nic = 0, IBC_OK, IBC_GDR_PEERMEM,
	     "dma-buf refused by the NIC");
	CASE("NIC accepts dma-buf", f_.dmabuf_nic = 1, IBC_OK, IBC_GDR_DMABUF, "dma-buf");
	CASE("dma-buf without peer memory", f_.peermem = 0, IBC_OK, IBC_GDR_DMABUF, "dma-buf");
	CASE("neither: staged", (f_.peermem = 0, f_.dmabuf_build = 0), IBC_OK, IBC_GDR_OFF,
	     "nvidia_peermem not loaded and dma-buf not built in");
	CASE("neither (GPU): staged", (f_.peermem = 0, f_.dmabuf_gpu = 0), IBC_OK, IBC_GDR_OFF,
	     "nvidia_peermem not loaded and dma-buf unsupported by the GPU");
	CASE("neither (NIC): staged", (f_.peermem = 0, f_.dmabuf_nic = 0), IBC_OK, IBC_GDR_OFF,
	     "nvidia_peermem not loaded and dma-buf refused by the NIC");
	CASE("neither, IBC_GDR=1 is an error", (f_.peermem = 0, f_.dmabuf_gpu = 0, f_.force = 1),
	     IBC_ERR_UNSUPPORTED, IBC_GDR_OFF, "nvidia_peermem not loaded");
	CASE("distance decides before the mechanisms",
	     (f_.peermem = 0, f_.dmabuf_build = 0, f_.dist = IBC_TOPO_SYS), IBC_OK, IBC_GDR_OFF,
	     "above IBC_NET_GDR_LEVEL");
	CASE("peer memory, far GPU, IBC_GDR=1", (f_.dmabuf_gpu = 0, f_.force = 1,
						  f_.dist = IBC_TOPO_SYS),
	     IBC_OK, IBC_GDR_PEERMEM, "distance not checked");
#undef CASE
	for (i = 0; i < n; i++) {
		enum ibc_gdr_mode mode = IBC_GDR_MODE_COUNT;
		char why[512] = "";
		ibc_status_t st = ibc_gdr_decide(&c[i].f, &mode, why, sizeof(why));

		tap_ok(st == c[i].st && mode == c[i].mode && strstr(why, c[i].why),
		       "%s: %s, %s (\"%s\")", c[i].name, ibc_status_str(st),
		       ibc_gdr_mode_name(mode), why);
		if (!strstr(why, c[i].why))
			tap_diag("expected the reason to contain \"%s\"", c[i].why);
	}
	{
		struct ibc_gdr_facts f = base();
		enum ibc_gdr_mode mode;

		tap_is_int(ibc_gdr_decide(NULL, &mode, NULL, 0), IBC_ERR_INVALID_ARG, "NULL facts");
		tap_is_int(ibc_gdr_decide(&f, NULL, NULL, 0), IBC_ERR_INVALID_ARG, "NULL mode");
		tap_ok(ibc_gdr_decide(&f, &mode, NULL, 0) == IBC_OK && mode == IBC_GDR_DMABUF,
		       "the reason is optional");
	}
}

static void mkdirs(const char *root, const char *path)
{
	char buf[1024];
	char *p;

	snprintf(buf, sizeof(buf), "%s%s", root, path);
	for (p = buf + strlen(root) + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			mkdir(buf, 0755);
			*p = '/';
		}
	}
	mkdir(buf, 0755);
}

static void peermem_probe(void)
{
	char root[] = "/tmp/ibc-gdr-XXXXXX";
	char cmd[128];
	FILE *f;

	if (!mkdtemp(root)) {
		tap_ok(0, "mkdtemp");
		return;
	}
	tap_is_int(ibc_gdr_peermem_loaded(root), 0, "empty sysfs: no peer memory module");
	mkdirs(root, "/sys/module/nvidia");
	tap_is_int(ibc_gdr_peermem_loaded(root), 0, "the nvidia module alone is not peer memory");
	mkdirs(root, "/sys/module/nvidia_peermem");
	tap_is_int(ibc_gdr_peermem_loaded(root), 1, "nvidia_peermem loaded");
	snprintf(cmd, sizeof(cmd), "rm -rf %s/sys/module/nvidia_peermem", root);
	tap_is_int(system(cmd), 0, "unload nvidia_peermem");
	mkdirs(root, "/sys/kernel/mm/memory_peers/nv_mem");
	tap_is_int(ibc_gdr_peermem_loaded(root), 0, "legacy nv_mem directory without version");
	snprintf(cmd, sizeof(cmd), "%s/sys/kernel/mm/memory_peers/nv_mem/version", root);
	f = fopen(cmd, "w");
	if (f) {
		fputs("1.3\n", f);
		fclose(f);
	}
	tap_is_int(ibc_gdr_peermem_loaded(root), 1, "legacy nv_peer_mem (memory_peers/nv_mem/version)");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	tap_is_int(system(cmd), 0, "remove the fake sysfs");
}

static void this_machine(const char *logfile)
{
	struct ibc_gdr_facts f;
	enum ibc_gdr_mode mode = IBC_GDR_MODE_COUNT;
	enum ibc_gdr_mode mode2 = IBC_GDR_MODE_COUNT;
	ibc_status_t st;
	ibc_status_t st2;
	char line[1024];
	int ndev = 0;
	int nlines = 0;
	FILE *in;

	ibc_cuda_device_count(&ndev);
	tap_is_int(ibc_gdr_facts_probe(0, "mlx5_0", -1, &f), IBC_OK, "probe this machine");
	tap_is_int(f.cuda, ndev > 0, "CUDA usable exactly when a device exists (%d)", ndev);
	tap_is_int(f.force, -1, "IBC_GDR defaults to auto");
	tap_is_int(f.max_dist, IBC_TOPO_PXB, "IBC_NET_GDR_LEVEL defaults to PXB");
	tap_is_int(f.peermem, ibc_gdr_peermem_loaded(""), "peer memory from /sys");
	if (ndev == 0)
		tap_is_int(f.dist, -1, "no GPU: distance unknown");
	else
		tap_diag("GPU 0 - mlx5_0: distance class %d", f.dist);

	st = ibc_gdr_mode_get(0, "mlx5_0", -1, &mode, NULL, 0);
	st2 = ibc_gdr_mode_get(0, "mlx5_0", -1, &mode2, NULL, 0);
	tap_ok(st == st2 && mode == mode2, "the decision is cached (%s, %s)", ibc_status_str(st),
	       ibc_gdr_mode_name(mode));
	if (ndev == 0)
		tap_ok(st == IBC_OK && mode == IBC_GDR_OFF, "no GPU here: staged");
	in = fopen(logfile, "r");
	while (in && fgets(line, sizeof(line), in))
		nlines += strstr(line, "GPUDirect RDMA for CUDA device 0 - mlx5_0") != NULL;
	if (in)
		fclose(in);
	tap_is_int(nlines, 1, "the decision and its reason are logged once");

	/* IBC_GDR=1 without any mechanism (no GPU here): an error, logged at WARN */
	setenv("IBC_GDR", "1", 1);
	ibc_param_reset_all();
	st = ibc_gdr_mode_get(1, "mlx5_1", -1, &mode, NULL, 0);
	if (ndev == 0)
		tap_ok(st == IBC_ERR_UNSUPPORTED && mode == IBC_GDR_OFF,
		       "IBC_GDR=1 without a GPU: IBC_ERR_UNSUPPORTED (%s)", ibc_status_str(st));
	setenv("IBC_GDR", "0", 1);
	ibc_param_reset_all();
	st = ibc_gdr_mode_get(2, "mlx5_2", -1, &mode, NULL, 0);
	tap_ok(st == IBC_OK && mode == IBC_GDR_OFF, "IBC_GDR=0: off");
	tap_is_int(ibc_gdr_facts_probe(0, "mlx5_0", -1, &f), IBC_OK, "probe with IBC_GDR=0");
	tap_is_int(f.force, 0, "IBC_GDR=0 read");
	setenv("IBC_NET_GDR_LEVEL", "SYS", 1);
	ibc_param_reset_all();
	ibc_gdr_facts_probe(0, "mlx5_0", -1, &f);
	tap_is_int(f.max_dist, IBC_TOPO_SYS, "IBC_NET_GDR_LEVEL=SYS");
	setenv("IBC_NET_GDR_LEVEL", "bogus", 1);
	ibc_param_reset_all();
	ibc_gdr_facts_probe(0, "mlx5_0", -1, &f);
	tap_is_int(f.max_dist, IBC_TOPO_PXB, "an invalid IBC_NET_GDR_LEVEL falls back to PXB");
	unsetenv("IBC_GDR");
	unsetenv("IBC_NET_GDR_LEVEL");
	ibc_param_reset_all();
}

/*
 * device_export() - on a GPU: what the registration cache relies on, on
 * real device memory: the kind, the allocation range and buffer id of a
 * device pointer (ibc_cuda_ptr_alloc()), a new buffer id after cudaFree
 * and a new allocation, and a dma-buf export (ibc_cuda_dmabuf_fd()) when
 * the GPU supports it; then the decision for this machine, printed.
 * @require: [in] 1 (--require-device): no GPU is a failure, not a skip.
 */

/* ibc_cuda_ptr_alloc() of @ptr in another thread (no CUDA context made current there) */
struct alloc_q {
	void *ptr;
	uintptr_t base;
	size_t size;
	uint64_t id;
	ibc_status_t st;
};

static void *alloc_in_thread(void *arg)
{
	struct alloc_q *q = arg;

	q->st = ibc_cuda_ptr_alloc(q->ptr, &q->base, &q->size, &q->id);
	return NULL;
}

static void device_export(int require)
{
	const size_t nbytes = 4u << 20;
	enum ibc_gdr_mode mode = IBC_GDR_MODE_COUNT;
	uint64_t id = 0;
	uint64_t id2 = 0;
	uint64_t offset = 0;
	uintptr_t base = 0;
	uintptr_t base2 = 0;
	size_t size = 0;
	size_t size2 = 0;
	char why[512] = "";
	void *p = NULL;
	void *q = NULL;
	int ndev = 0;
	int dev = -1;
	int dmabuf = 0;
	int fd = -1;
	ibc_status_t st;
	struct stat sb;

	ibc_cuda_device_count(&ndev);
	if (ndev == 0) {
		tap_ok(!require, "device export: no GPU here%s",
		       require ? " (--require-device)" : ", not checked");
		return;
	}
	tap_is_int(ibc_cuda_dev_alloc(nbytes, &p), IBC_OK, "cudaMalloc of 4 MiB");
	if (!p)
		return;
	tap_is_int(ibc_cuda_ptr_kind((char *)p + 100, &dev), IBC_MEMKIND_DEVICE, "device memory kind");
	st = ibc_cuda_ptr_alloc((char *)p + 100, &base, &size, &id);
	tap_is_int(st, IBC_OK, "ibc_cuda_ptr_alloc of an interior pointer");
	tap_ok(base == (uintptr_t)p && size >= nbytes && id != 0,
	       "the allocation: base %p, %zu bytes, buffer id %llu", (void *)base, size,
	       (unsigned long long)id);
	tap_ok(ibc_cuda_ptr_alloc(&sb, &base2, &size2, &id2) != IBC_OK,
	       "host memory is no CUDA allocation");
	{
		/* a thread with no current CUDA context (as the executor's are) */
		struct alloc_q qa = { (char *)p + 100, 0, 0, 0, IBC_ERR_INTERNAL };
		pthread_t th;

		if (pthread_create(&th, NULL, alloc_in_thread, &qa) == 0)
			pthread_join(th, NULL);
		tap_ok(qa.st == IBC_OK && qa.base == base && qa.id == id,
		       "ibc_cuda_ptr_alloc from a thread without a CUDA context: %s, the same allocation",
		       ibc_status_str(qa.st));
	}
	ibc_cuda_dmabuf_supported(dev, &dmabuf);
	st = ibc_cuda_dmabuf_fd((char *)p + 4096, 1u << 20, &fd, &offset);
	if (dmabuf && IBC_CUDA_HAVE_DMABUF_API) {
		tap_is_int(st, IBC_OK, "dma-buf export of 1 MiB of device memory");
		tap_ok(fd >= 0 && fstat(fd, &sb) == 0, "a valid dma-buf fd (%d)", fd);
		tap_ok(offset < 4096, "offset inside the first page (%llu)", (unsigned long long)offset);
	} else {
		tap_ok(st != IBC_OK, "no dma-buf support (GPU %d, API built %d): export refused (%s)",
		       dmabuf, IBC_CUDA_HAVE_DMABUF_API, ibc_status_str(st));
	}
	if (fd >= 0)
		close(fd);
	ibc_cuda_dev_free(p);
	tap_ok(ibc_cuda_ptr_alloc(p, &base2, &size2, &id2) != IBC_OK || id2 != id,
	       "after cudaFree the old buffer id is gone");
	tap_is_int(ibc_cuda_dev_alloc(nbytes, &q), IBC_OK, "a new cudaMalloc of 4 MiB");
	id2 = id;
	tap_is_int(q ? ibc_cuda_ptr_alloc(q, &base2, &size2, &id2) : IBC_ERR_NO_MEMORY, IBC_OK,
		   "ibc_cuda_ptr_alloc of the new allocation");
	tap_ok(id2 != id, "the new allocation (%s address) has a new buffer id (%llu -> %llu)",
	       q == p ? "same" : "other", (unsigned long long)id, (unsigned long long)id2);
	ibc_cuda_dev_free(q);
	st = ibc_gdr_mode_get(dev, "mlx5_0", -1, &mode, why, sizeof(why));
	tap_diag("GPUDirect RDMA decision for CUDA device %d - mlx5_0: %s, %s: %s", dev,
		 ibc_status_str(st), ibc_gdr_mode_name(mode), why);
	tap_ok(st == IBC_OK || st == IBC_ERR_UNSUPPORTED, "the decision was made (%s)",
	       ibc_status_str(st));
}

int main(int argc, char **argv)
{
	char logfile[] = "/tmp/ibc-gdr-log-XXXXXX";
	int fd = mkstemp(logfile);
	int require = argc > 1 && !strcmp(argv[1], "--require-device");

	if (fd < 0)
		tap_bail_out("mkstemp failed");
	close(fd);
	/* before the first log line: INFO of subsystem CUDA into a file */
	setenv("IBC_DEBUG", "INFO", 1);
	setenv("IBC_DEBUG_SUBSYS", "CUDA", 1);
	setenv("IBC_DEBUG_FILE", logfile, 1);
	unsetenv("IBC_GDR");
	unsetenv("IBC_NET_GDR_LEVEL");
	decision_table();
	peermem_probe();
	this_machine(logfile);
	device_export(require);
	unlink(logfile);
	return tap_done();
}
