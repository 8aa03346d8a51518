/* SPDX-License-Identifier: MIT */
/*
 * net_local.c - the proof that two ranks of one host share /dev/shm before
 * the shm transport is chosen between them. The same host name and boot id
 * show the same kernel, not the same /dev/shm: two containers of one node
 * (separate mount namespaces, a tmpfs each) or ranks of different users
 * cannot open each other's segments, and the first collective would fail
 * there (issue 20, case 7). So at set-up every rank with a peer on its host
 * creates a small segment named after the communicator and its rank; once
 * every rank has (the allgather that also carries the verbs capability),
 * it opens each same-host peer's and checks its contents; a second
 * allgather gives every rank the others' findings, and a pair uses shm only
 * when each end opened the other's. Then the segment is unlinked.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "net/net.h"
#include "net/net_internal.h"

#define PROBE_MAGIC 0x45424f52504c4249ull       /* "IBLPROBE" */
#define PROBE_SEG_BYTES 4096

struct probe_seg {
	uint64_t magic;
	uint32_t rank;
	uint32_t pid;
	uint8_t comm_id[IBC_TENV_COMM_ID_BYTES];
};

static void probe_name(const struct ibc_net *net, int rank, char *buf, size_t len)
{
	const uint8_t *id = ibc_net_comm_id(net);

	snprintf(buf, len, "/ibc-probe-%02x%02x%02x%02x%02x%02x%02x%02x-%d", id[0], id[1], id[2],
		 id[3], id[4], id[5], id[6], id[7], rank);
}

void ibc_net_local_probe_create(struct ibc_net *net, struct ibc_local_probe *p)
{
	struct probe_seg *seg;
	int fd;

	memset(p, 0, sizeof(*p));
	probe_name(net, net->rank, p->name, sizeof(p->name));
	fd = shm_open(p->name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		snprintf(p->why, sizeof(p->why), "shm_open(%s) failed here: %s", p->name,
			 strerror(errno));
		return;
	}
	p->created = 1;
	if (ftruncate(fd, PROBE_SEG_BYTES) != 0) {
		snprintf(p->why, sizeof(p->why), "ftruncate of %s failed here: %s", p->name,
			 strerror(errno));
		close(fd);
		return;
	}
	seg = mmap(NULL, PROBE_SEG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (seg == MAP_FAILED) {
		snprintf(p->why, sizeof(p->why), "mmap of %s failed here: %s", p->name,
			 strerror(errno));
		return;
	}
	seg->rank = (uint32_t)net->rank;
	seg->pid = (uint32_t)getpid();
	memcpy(seg->comm_id, ibc_net_comm_id(net), sizeof(seg->comm_id));
	__atomic_store_n(&seg->magic, PROBE_MAGIC, __ATOMIC_RELEASE);
	munmap(seg, PROBE_SEG_BYTES);
	p->ready = 1;
}

/* 1 when @peer's segment opens here and holds what @peer wrote */
static int probe_peer(struct ibc_net *net, int peer, char *why, size_t len)
{
	struct probe_seg *seg;
	char name[64];
	int ok;
	int fd;

	probe_name(net, peer, name, sizeof(name));
	fd = shm_open(name, O_RDONLY, 0);
	if (fd < 0) {
		snprintf(why, len, "rank %d's segment %s does not open here: %s", peer, name,
			 strerror(errno));
		return 0;
	}
	seg = mmap(NULL, PROBE_SEG_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (seg == MAP_FAILED) {
		snprintf(why, len, "rank %d's segment %s does not map here: %s", peer, name,
			 strerror(errno));
		return 0;
	}
	ok = __atomic_load_n(&seg->magic, __ATOMIC_ACQUIRE) == PROBE_MAGIC &&
	     seg->rank == (uint32_t)peer &&
	     !memcmp(seg->comm_id, ibc_net_comm_id(net), sizeof(seg->comm_id));
	if (!ok)
		snprintf(why, len, "rank %d's segment %s here holds another rank's contents", peer,
			 name);
	munmap(seg, PROBE_SEG_BYTES);
	return ok;
}

void ibc_net_local_probe_open(struct ibc_net *net, struct ibc_local_probe *p, uint8_t *bits)
{
	int li = 0;
	int i;

	for (i = 0; i < net->nranks; i++) {
		char why[256];

		if (!ibc_net_same_host(net, i))
			continue;
		if (i != net->rank && li < IBC_LOCAL_PROBE_MAX && p->ready) {
			if (probe_peer(net, i, why, sizeof(why)))
				bits[li / 8] |= (uint8_t)(1u << (li % 8));
			else if (!p->why[0])
				snprintf(p->why, sizeof(p->why), "%s", why);
		}
		li++;
	}
}

void ibc_net_local_probe_destroy(struct ibc_local_probe *p)
{
	if (p->created)
		shm_unlink(p->name);
	p->created = 0;
}
