/* SPDX-License-Identifier: MIT */
/*
 * shm_eof_peer.c - the two ranks of test_shm_eof.sh (a race that
 * ibc_bench's final barrier hit on a loaded machine): rank 1 sends 4 KiB to
 * rank 0 over shm and leaves at once (ibc_comm_destroy, exit); rank 0 was
 * already waiting in ibc_recv. The script stops rank 0 (SIGSTOP) while it
 * sleeps in the transport's wait, lets rank 1 send and exit, then resumes
 * rank 0, which then sees the wake-up byte and the doorbell's EOF at once.
 * The data was published before the peer left, so the receive must succeed.
 *
 * Environment: IBC_RANK/IBC_NRANKS/IBC_ROOT (2 ranks), SHM_EOF_MARK (file
 * rank 0 creates just before ibc_recv), SHM_EOF_GO (file rank 1 waits for
 * before sending). Exit 0 when rank 0 got every byte and no error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibcoll.h"

#define NBYTES 4096

static int wait_file(const char *path, int seconds)
{
	int i;

	for (i = 0; i < seconds * 100; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		usleep(10000);
	}
	return -1;
}

int main(void)
{
	const char *mark = getenv("SHM_EOF_MARK");
	const char *go = getenv("SHM_EOF_GO");
	unsigned char buf[NBYTES];
	ibc_comm_h comm;
	ibc_status_t st;
	ibc_status_t ast = IBC_OK;
	int rank = -1;
	int bad = 0;
	int i;

	if (!mark || !go || ibc_comm_init_env(&comm) != IBC_OK)
		return 2;
	ibc_comm_rank(comm, &rank);
	/* connects the pair: a point-to-point exchange, not a barrier, which on
	 * shm completes in one step of the segment without any connection */
	buf[0] = (unsigned char)rank;
	if (rank == 0 ? ibc_send(buf, 1, IBC_UINT8, 1, comm) != IBC_OK ||
			ibc_recv(buf, 1, IBC_UINT8, 1, comm) != IBC_OK
		      : ibc_recv(buf, 1, IBC_UINT8, 0, comm) != IBC_OK ||
			ibc_send(buf, 1, IBC_UINT8, 0, comm) != IBC_OK)
		return 2;
	if (rank == 1) {
		memset(buf, 0x5a, sizeof(buf));
		if (wait_file(go, 60) != 0)
			return 2;
		st = ibc_send(buf, sizeof(buf), IBC_UINT8, 0, comm);
		ibc_comm_destroy(comm);
		return st == IBC_OK ? 0 : 1;
	}
	memset(buf, 0, sizeof(buf));
	fclose(fopen(mark, "w"));
	st = ibc_recv(buf, sizeof(buf), IBC_UINT8, 1, comm);
	ibc_comm_get_async_error(comm, &ast);
	for (i = 0; i < NBYTES; i++)
		bad += buf[i] != 0x5a;
	printf("rank 0: receive %s, communicator %s, %d of %d bytes wrong%s%s\n",
	       ibc_status_str(st), ibc_status_str(ast), bad, NBYTES,
	       *ibc_last_error() ? ": " : "", ibc_last_error());
	ibc_comm_destroy(comm);
	return st == IBC_OK && ast == IBC_OK && bad == 0 ? 0 : 1;
}
