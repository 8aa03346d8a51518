/* SPDX-License-Identifier: MIT */
/*
 * shmseg.c - /dev/shm segments for the shm transport and the shm
 * all-reduce: mapped with their pages reserved and populated at creation
 * (ibc_shm_map), and the share of /dev/shm a new one may take.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/log.h"
#include "base/param.h"
#include "base/shmseg.h"
#include "base/util.h"

/* /dev/shm's size and free space, bytes; 0 on success, -1 where it cannot be read */
static int shm_space(double *total_p, double *free_p)
{
	struct statvfs v;

	if (statvfs("/dev/shm", &v) != 0)
		return -1;
	*total_p = (double)v.f_blocks * (double)v.f_frsize;
	*free_p = (double)v.f_bavail * (double)v.f_frsize;
	return 0;
}

/**
 * ibc_shm_map() - Map a POSIX shared-memory segment with its pages allocated
 * and mapped now, not at their first touch.
 * @fd:      [in] descriptor from shm_open(), the object already @size bytes
 *           (ftruncate); not closed here.
 * @size:    [in] bytes to map.
 * @create:  [in] 1 in the process that created the segment: its pages are
 *           first reserved with posix_fallocate(). IBC_FAULT_INJECT=shm:N
 *           makes that fail with ENOSPC (N counts these calls together with
 *           the shm transport's shm_open calls).
 * @err:     [out] on failure, the reason (with /dev/shm's free space when it
 *           is full), for the caller's log line.
 * @err_len: [in] size of @err, bytes.
 *
 * Why: ftruncate() on tmpfs reserves nothing. With a small /dev/shm (a
 * container's default is 64 MiB) the first store into a page tmpfs could
 * not supply killed the rank with SIGBUS and no message; reserving at
 * creation makes it an ENOSPC here, which the callers turn into a smaller
 * ring, a fallback or a named error. And the first pass through a ring paid
 * page faults, which the tuner's bandwidth probe then measured instead of
 * the ring (bench/RESULTS.md, "The shm probe"). MAP_POPULATE maps every page at once
 * (in the creator after the reservation, in the others the pages it
 * allocated). Only ENOSPC, ENOMEM and EFBIG are failures: where
 * posix_fallocate is refused otherwise (a filesystem or sandbox without
 * fallocate: EOPNOTSUPP, ENOSYS, EPERM, EINVAL) the segment is mapped
 * unreserved, as before, with a DEBUG line; EINTR is retried.
 *
 * Return: the address, or NULL with errno set and @err filled.
 * Blocking: the creator's fallocate allocates @size bytes (0.5-0.7 ms per
 * 4 MiB here), and every process's MAP_POPULATE zeroes or maps them
 * (1.2-1.4 ms per 4 MiB): about what the first pass through the pages cost
 * before. Thread-safe.
 */
void *ibc_shm_map(int fd, size_t size, int create, char *err, size_t err_len)
{
	void *p;
	int injected = 0;
	int ret = 0;

	if (create) {
		if (ibc_fault_hit(IBC_FAULT_SHM, "shm_fallocate")) {
			ret = ENOSPC;
			injected = 1;
		} else {
			do
				ret = posix_fallocate(fd, 0, (off_t)size);
			while (ret == EINTR);
		}
		if (ret && ret != ENOSPC && ret != ENOMEM && ret != EFBIG) {
			IBC_LOG_DEBUG(SHM, "posix_fallocate of %zu bytes in /dev/shm: %s; mapping without reserving",
				      size, strerror(ret));
			ret = 0;
		}
	}
	if (ret) {
		double total;
		double freeb;

		if (ret == ENOSPC && shm_space(&total, &freeb) == 0)
			snprintf(err, err_len,
				 "cannot reserve %zu bytes in /dev/shm: %s%s (%.1f of %.1f MiB free; a container needs a larger /dev/shm, e.g. docker run --shm-size=1g)",
				 size, strerror(ret), injected ? " (injected: IBC_FAULT_INJECT)" : "",
				 freeb / 1048576.0, total / 1048576.0);
		else
			snprintf(err, err_len, "cannot reserve %zu bytes in /dev/shm: %s%s", size,
				 strerror(ret), injected ? " (injected: IBC_FAULT_INJECT)" : "");
		errno = ret;
		return NULL;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED) {
		ret = errno;
		snprintf(err, err_len, "mmap of %zu bytes failed: %s", size, strerror(ret));
		errno = ret;
		return NULL;
	}
	return p;
}

/* the largest host group of any communicator this process made (ibc_shm_budget) */
static int shm_max_nlocal;

/**
 * ibc_shm_note_nlocal() - Record a new communicator's ranks on this host
 * (communicator set-up), for ibc_shm_budget(): every process learns the
 * world's size before a split, also one that never creates a world ring
 * (the highest rank only maps the rings its peers create).
 * @nlocal: [in] ranks of the communicator on this host. Thread-safe.
 */
void ibc_shm_note_nlocal(int nlocal)
{
	int n = __atomic_load_n(&shm_max_nlocal, __ATOMIC_RELAXED);

	while (nlocal > n &&
	       !__atomic_compare_exchange_n(&shm_max_nlocal, &n, nlocal, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

/**
 * ibc_shm_budget() - The most bytes one new segment should take in /dev/shm.
 * @nlocal: [in] ranks of the communicator on this host.
 * @why:    [out] how the figure came about, for a WARN; @why_len bytes.
 * @why_len: [in] size of @why.
 *
 * Segments are reserved whole (ibc_shm_map), so the first to be created
 * could take all the room and leave none for the last. Each gets at most
 * the smaller of /dev/shm's size shared by every pair of the host's ranks
 * and the shm all-reduce segment (n (n - 1) / 2 + 1 shares), and the free
 * space now shared by the n - 1 rings a rank may still open (other users of
 * /dev/shm, other communicators). n is the largest host group of any
 * communicator this process has made, so a split's rings get no larger
 * share than the world's (docs/reliability.md, guarantee 7). Example: 8
 * ranks in a container's 64 MiB get 2.2 MiB, 4 ring slots, per segment.
 * Return: bytes; SIZE_MAX where /dev/shm cannot be read or n < 2.
 * Thread-safe.
 */
size_t ibc_shm_budget(int nlocal, char *why, size_t why_len)
{
	double total;
	double freeb;
	double shares;
	double b;
	int n = IBC_MAX(nlocal, __atomic_load_n(&shm_max_nlocal, __ATOMIC_RELAXED));

	if (why_len)
		why[0] = '\0';
	if (n < 2 || shm_space(&total, &freeb) != 0)
		return SIZE_MAX;
	shares = (double)n * (n - 1) / 2 + (ibc_param_shm_allreduce() ? 1 : 0);
	b = IBC_MIN(total / shares, freeb / (n - 1));
	snprintf(why, why_len, "%.1f MiB a segment: /dev/shm has %.1f of %.1f MiB free, for %d ranks",
		 b / 1048576.0, freeb / 1048576.0, total / 1048576.0, n);
	return b >= (double)SIZE_MAX ? SIZE_MAX : (size_t)b;
}

/**
 * ibc_shm_optional_fits() - Whether an optional segment (the shm all-reduce's)
 * of @size bytes leaves room in /dev/shm for the pair rings of a
 * communicator with @nlocal ranks on this host at their smallest (2 slots
 * per direction of IBC_SHM_SLOT_BYTES, ibc_shm_budget()).
 * @size:    [in] bytes of the optional segment.
 * @nlocal:  [in] ranks of the communicator on this host.
 * @why:     [out] the free space and what the rings need, for a WARN.
 * @why_len: [in] size of @why.
 *
 * 2 ranks in a 2 MiB /dev/shm: the all-reduce's 1.5 MiB, reserved at
 * communicator creation, left no room for a 1 MiB ring, and the job failed
 * where it runs without the segment. 8 ranks in 64 MiB: 4.5 MiB against
 * 28 rings of 1 MiB at their smallest: it fits.
 * Return: 1 if it fits (or /dev/shm cannot be read), else 0. Thread-safe.
 */
int ibc_shm_optional_fits(size_t size, int nlocal, char *why, size_t why_len)
{
	double total;
	double freeb;
	double rings;

	if (why_len)
		why[0] = '\0';
	if (shm_space(&total, &freeb) != 0)
		return 1;
	rings = (double)nlocal * (nlocal - 1) / 2 * 4.0 * (double)ibc_param_shm_slot_bytes();
	snprintf(why, why_len, "/dev/shm has %.1f MiB free, and %d ranks' rings need %.1f MiB at 2 slots",
		 freeb / 1048576.0, nlocal, rings / 1048576.0);
	return freeb - rings >= (double)size;
}

/* the inode of this process's pid namespace: pids in segment names mean something only within it */
static unsigned long long shm_pidns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/**
 * ibc_shm_seg_name() - The /dev/shm name of a new segment: "/ibc-<what>-<pid>-<ns>",
 * the creator's pid and pid namespace last, so that ibc_shm_sweep_stale()
 * in a later process can tell a segment whose creator died.
 * @buf:  [out] the name, NUL-terminated.
 * @len:  [in]  size of @buf, bytes.
 * @what: [in]  the segment's own part (no '/').
 */
void ibc_shm_seg_name(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "/ibc-%s-%d-%llx", what, (int)getpid(), shm_pidns());
}

/* the creator of the segment named @name (no leading '/'), 0 when the name has no such suffix */
static pid_t shm_name_pid(const char *name, unsigned long long ns)
{
	const char *dash2 = strrchr(name, '-');
	const char *dash1;
	char *end;
	long pid;

	if (!dash2 || strncmp(name, "ibc-", 4) != 0)
		return 0;
	if (strtoull(dash2 + 1, &end, 16) != ns || *end || end == dash2 + 1)
		return 0;
	for (dash1 = dash2 - 1; dash1 > name && *dash1 != '-'; dash1--)
		;
	if (*dash1 != '-')
		return 0;
	pid = strtol(dash1 + 1, &end, 10);
	if (end != dash2 || pid <= 0)
		return 0;
	return (pid_t)pid;
}

static void shm_sweep_once(void)
{
	unsigned long long ns = shm_pidns();
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (!ns || !(d = opendir("/dev/shm")))
		return;
	while ((e = readdir(d))) {
		char path[300];
		struct stat st;
		pid_t pid = shm_name_pid(e->d_name, ns);

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		if (stat(path, &st) != 0 || st.st_uid != geteuid())
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;       /* alive (or not ours to ask): keep */
		snprintf(path, sizeof(path), "/%s", e->d_name);
		if (shm_unlink(path) == 0) {
			n++;
			IBC_LOG_INFO(SHM, "removed %s from /dev/shm: its creator, process %d, is gone (it died before its peer mapped the segment)",
				     path, (int)pid);
		}
	}
	closedir(d);
	(void)n;
}

/**
 * ibc_shm_sweep_stale() - Once per process, unlink the segments of
 * /dev/shm that an ibcoll process of this user and pid namespace created
 * and left behind when it died between creating a segment and its peer
 * mapping it (a rank killed during a connection set-up). Segments are
 * otherwise unlinked as soon as both ends map them.
 */
void ibc_shm_sweep_stale(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, shm_sweep_once);
}
