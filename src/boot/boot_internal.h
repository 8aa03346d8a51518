/* SPDX-License-Identifier: MIT */
/*
 * boot_internal.h - what the bootstrap's files share (not for other layers):
 * the state of a communicator's bootstrap, the framed authenticated
 * connections (boot_frame.c), the service thread (boot_svc.c), used by the
 * root (boot_root.c) and the lifecycle (bootstrap.c).
 */
#ifndef IBC_BOOT_INTERNAL_H
#define IBC_BOOT_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "base/socket.h"
#include "boot/boot_wire.h"
#include "boot/bootstrap.h"

#define BOOT_MAX_PENDING 128    /* unauthenticated connections held at once */
#define BOOT_ACCEPT_BURST 32    /* accepts per poll round, so pending hellos are read between */
#define BOOT_STOP_INTERVALS 5   /* silent heartbeat intervals before "stopped" */
#define BOOT_OUTBOX 8           /* notices waiting for the service thread */
#define BOOT_NOTICE_MS 300      /* bound on sending one round of notices */

/*
 * Warnings about strangers (bad secret, garbage, slowloris) are limited to
 * one line per second with a count, so that a flood cannot flood the log.
 */
struct boot_ratelog {
	uint64_t last_ms;
	long nsup;              /* lines suppressed since the last one */
};

enum peer_state {
	PEER_ALIVE = 0,
	PEER_LEFT = 1,          /* said BYE */
	PEER_FAILED = 2,        /* died, stopped or aborted: reported once */
};

/* reader of one frame at a time on a nonblocking fd */
struct frame_rd {
	uint8_t hdr[IBC_BOOT_HDR_BYTES];
	size_t hdr_got;
	int type;
	uint8_t *buf;
	size_t len;
	size_t got;
};

enum conn_state {
	CS_WAIT_HELLO = 0,
	CS_MSG = 1,
	CS_HUB = 2,
};

struct boot_conn {
	int fd;
	int state;
	int peer;               /* rank, once authenticated */
	uint64_t deadline_ms;   /* end of the handshake */
	uint64_t last_rx_ms;    /* hub liveness */
	uint8_t nonce_a[IBC_BOOT_NONCE_BYTES];
	char addr[80];          /* remote address text for log lines */
	struct frame_rd rd;
};

struct boot_msg {
	struct boot_msg *next;
	int src;
	uint32_t tag;
	size_t len;
	uint8_t data[];
};

struct boot_stream {
	struct boot_stream *next;
	int src;
	uint32_t tag;
	int fd;
};

struct ibc_bootstrap {
	int rank;
	int nranks;
	uint8_t secret[IBC_BOOT_SECRET_BYTES];
	uint8_t comm_id[IBC_BOOT_COMMID_BYTES];
	struct ibc_peer_info *peers;            /* [nranks] */
	int listen_fd;
	union ibc_sockaddr listen_addr;
	int64_t timeout_ms;                     /* IBC_BOOTSTRAP_TIMEOUT_MS */
	int64_t hb_ms;                          /* IBC_HEARTBEAT_MS */

	/* outgoing message connections, opened on first send */
	int *out_fd;                            /* [nranks], -1 */
	pthread_mutex_t *out_lock;              /* [nranks] */

	/* what arrived */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct boot_msg *msgs;
	struct boot_msg **msgs_tail;
	struct boot_stream *streams;

	/* service thread and its connections */
	pthread_t thread;
	int thread_started;
	int wake_fd;
	int stop;                               /* atomic */
	struct boot_conn *conns;
	int nconns;
	int cap;
	int hub_fd;                             /* hub mode, rank > 0: our connection to rank 0 */
	int ring;                               /* liveness: 1 ring of watchers, 0 hub (IBC_LIVENESS) */
	int watch_pending;                      /* atomic: ring: the fd to our successor, for the svc thread */
	int nwatch;                             /* watch connections (CS_HUB) we have had (svc thread) */
	uint64_t next_ping_ms;

	/* liveness */
	int *peer_state;                        /* [nranks], enum peer_state (svc thread) */
	uint8_t *hub_seen;                      /* [nranks] hub connected to us (svc thread) */
	uint64_t start_ms;                      /* service thread start */
	uint64_t last_hub_ms;                   /* rank 0: when the last rank connected its hub */
	ibc_bootstrap_error_fn on_error;
	void *on_error_arg;
	ibc_bootstrap_wait_fn wait_fn;          /* atomic: answers wait-for queries */
	int failed;                             /* atomic: an error was reported */
	struct boot_ratelog rl;                 /* strangers at our listener (svc thread) */
	struct boot_ratelog rl_accept;          /* accept() failures (svc thread) */
	int stop_io;                            /* atomic: failed or cancelled: blocking calls give up */
	int revoked;                            /* atomic: revoked (by a peer or this rank) */

	/* notices for the service thread to send: every hub write stays in one thread */
	pthread_mutex_t olock;
	pthread_cond_t ocond;
	struct ibc_boot_notice_msg outbox[BOOT_OUTBOX];
	int nout;
	uint64_t nposted;                       /* notices posted / sent, under olock */
	uint64_t nsent;
	int said_goodbye;                       /* the final BYE/ABORT was posted */
};

void ibc_boot_stranger_warn(struct boot_ratelog *rl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
ibc_status_t ibc_boot_frame_write(int fd, int type, const void *payload, size_t len,
				uint64_t deadline_ms);
ibc_status_t ibc_boot_frame_read(int fd, int nranks, uint64_t deadline_ms,
					const int *cancel_p, int *type_p, uint8_t *buf, size_t cap,
					size_t *len_p);
int ibc_boot_frame_rd_step(int fd, int nranks, int only_type, struct frame_rd *rd);
int ibc_boot_conn_idle(int fd, const struct frame_rd *rd);
void ibc_boot_frame_rd_reset(struct frame_rd *rd);
void ibc_boot_peer_addr_text(int fd, char *buf, size_t len);
ibc_status_t ibc_boot_connect_auth(const uint8_t *secret, const union ibc_sockaddr *addr,
				      struct ibc_boot_hello *h, uint64_t deadline_ms,
				      const char *what, int retry_refused, const int *cancel_p,
				      int *fd_p, char *why, size_t why_len, int *final_p);
ibc_status_t ibc_boot_connect_log(const uint8_t *secret, const union ibc_sockaddr *addr,
				     struct ibc_boot_hello *h, uint64_t deadline_ms,
				     const char *what, int retry_refused, const int *cancel_p,
				     int *fd_p);
void ibc_boot_uid_to_sockaddr(const struct ibc_boot_uid *u, union ibc_sockaddr *a);
void ibc_boot_info_to_sockaddr(const struct ibc_peer_info *pi, union ibc_sockaddr *a);
void ibc_boot_sockaddr_to_info(const union ibc_sockaddr *a, struct ibc_peer_info *pi);
int ibc_boot_svc_add_conn(struct ibc_bootstrap *bs, int fd, int state, int peer);
void ibc_boot_svc_drop_conn(struct ibc_bootstrap *bs, int i, int keep_fd);
void *ibc_boot_svc_thread(void *arg);

#endif /* IBC_BOOT_INTERNAL_H */
