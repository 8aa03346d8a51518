/* SPDX-License-Identifier: MIT */
/*
 * ib_test_util.h - helpers of the verbs tests that need a device: pick two
 * ports (RXE_DEV0/RXE_DEV1 in the VM), open two contexts in one process,
 * connect them by exchanging their connection info in memory, and drive
 * both progress engines until requests complete (bounded).
 */
#ifndef IBC_IB_TEST_UTIL_H
#define IBC_IB_TEST_UTIL_H

#include "transport/ib/ib.h"

/* what one side's callbacks saw */
struct ibt_rec {
	const char *name;       /* "A" or "B" for diagnostics */
	int nfail;
	ibc_status_t last_st;
	int last_peer;
	char last_why[1024];
	char first_why[1024];   /* the first failure's text (what found it) */
	int ndesc_mismatch;
	char last_desc[256];
};

struct ibt_pair {
	struct ibc_ib_ctx *a;   /* on dev0, rank "0" */
	struct ibc_ib_ctx *b;   /* on dev1, rank "1" */
	struct ibc_ib_conn *ca; /* a's connection to b (peer 1) */
	struct ibc_ib_conn *cb; /* b's connection to a (peer 0) */
	struct ibt_rec ra;
	struct ibt_rec rb;
};

/* 0 and two ports (maybe the same one twice), or -1 when there is no usable port */
int ibt_pick_ports(char *dev0, int *port0, char *dev1, int *port1);
void ibt_default_params(struct ibc_ib_params *prm);
/* open contexts on the two ports and connect them; IBC_OK or the failing step's status */
ibc_status_t ibt_pair_open(struct ibt_pair *p, const char *dev0, int port0, const char *dev1,
			   int port1, const struct ibc_ib_params *prm);
void ibt_pair_close(struct ibt_pair *p);
/* progress both sides until the @n requests are done: 0, or -1 after @timeout_ms */
int ibt_wait(struct ibt_pair *p, struct ibc_treq *const *reqs, int n, int timeout_ms);
/* progress both sides for @ms milliseconds */
void ibt_spin(struct ibt_pair *p, int ms);

#endif /* IBC_IB_TEST_UTIL_H */
