/* SPDX-License-Identifier: MIT */
/*
 * ib.h - private interface of the InfiniBand verbs transport. Objects, one
 * file each: HCA selection and ports (ib_device.c), GID selection
 * (ib_gid.c, pure), the registration cache (ib_mr.c; CUDA device memory
 * through GPUDirect and the probe behind IBC_TCAP_CUDA: ib_mr_dev.c), the context with its
 * CQ, progress engine and async events (ib_cq.c), RC queue pairs
 * (ib_qp.c), connections and their data path (ib_conn.c, ib_rndv.c,
 * ib_eager.c, ib_ll.c), and the ops
 * table over the transport's environment (ib_ops.c). Only ib_ops.c knows
 * struct ibc_tenv; everything else is usable from a test program that
 * connects two endpoints inside one process (tests/ib/test_ib_loop.c).
 *
 * Data path of a message larger than the connection's eager limit (NCCL's
 * net_ib protocol, receiver-driven; ib_rndv.c):
 *   receiver: irecv #k -> RDMA WRITE WITH IMM of a clear-to-send (CTS)
 *             entry {addr, rkey, nbytes, its msg desc, k, its consumed
 *             count} into slot k % D of the sender's FIFO; D =
 *             IBC_IB_DEPTH credits.
 *   sender:   isend #k waits for CTS #k, compares descriptors (mismatch:
 *             writes a NACK with its own descriptor into the receiver's
 *             FIFO so both sides fail), then RDMA WRITEs the payload,
 *             striped over the connection's QPs, each part ending with an
 *             RDMA WRITE WITH IMM {slot, nparts} that completes the
 *             receive. Payloads up to IBC_IB_BOUNCE_BYTES go through
 *             registered bounce slots, larger ones are zero-copy through
 *             the registration cache.
 *
 * Eager path, messages up to the eager limit (the smaller
 * IBC_IB_EAGER_BYTES of the two ends; ib_eager.c), one work request each:
 *   sender:   isend #k writes {its msg desc, nbytes, k, its consumed count}
 *             (64 bytes) and the payload with one RDMA WRITE WITH IMM
 *             {EAGER, slot k % D, k} into the receiver's slot k % D, whose
 *             address and rkey came with the connection info: the payload
 *             inline (up to IBC_IB_INLINE_BYTES), copied behind the header
 *             in a registered send slot (up to the bounce size), or
 *             zero-copy from its registration. It may do so once the
 *             receiver's consumed count (every message below it finished)
 *             is above k - D: the slot's previous message was taken.
 *   receiver: the message waits in its slot until irecv #k is posted (or is
 *             taken at once), the descriptors are compared, the payload is
 *             copied out. The consumed count goes back piggybacked on the
 *             CTS entries and eager headers it writes anyway, or, once D/2
 *             are owed, by a zero-byte WRITE WITH IMM {CREDIT, count}.
 *   mismatch: the receiver fails its receive and writes an ENACK with both
 *             descriptors into the sender's FIFO; the sender's descriptor
 *             check reports it too (its request completed when written). A
 *             rendezvous send still without its CTS every 200 ms writes a
 *             zero-byte {RTS, slot, k}: an eager receive #k answers with a
 *             CTS (that the sender refuses), an LL one fails as mismatched
 *             protocols, so no mismatch leaves both sides waiting.
 *   Every remote notification is a WRITE WITH IMM, so a sleeping rank is
 *   woken by the CQ completion channel (ibc_ib_ctx_wait()).
 *
 * LL path (NCCL's LL over verbs; docs/algorithms.md "LL over verbs"): a
 * message whose descriptor has IBC_DESC_F_LL and whose size is at most the
 * connection's LL limit (the smaller IBC_LL_MAX_BYTES of the two ends) is
 * not receiver-driven: the sender writes it at once, as 64-byte lines
 * (56 data bytes + an 8-byte flag = absolute line number + 1), with one
 * plain RDMA WRITE (inline when it fits) into the receiver's registered LL
 * ring, whose address and rkey came with the connection info. The receiver
 * polls the flags in memory (no completion) and returns credits (lines
 * consumed) with a small RDMA WRITE into a word next to the sender's own
 * ring, which the sender reads only when its view of the peer's ring is
 * full. LL messages share the per-direction sequence numbers with the
 * others, so ranks that disagree on the protocol get an error.
 */
#ifndef IBC_IB_H
#define IBC_IB_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda/cuda.h"
#include "ibcoll.h"
#include "transport/ib/ib_info.h"
#include "transport/transport.h"

#define IBC_IB_NAME_LEN      64   /* IBV_SYSFS_NAME_MAX */
#define IBC_IB_HCA_MAX       32   /* entries in IBC_IB_HCA */
#define IBC_IB_MAX_PORTS     64   /* usable ports considered */
#define IBC_IB_MAX_QPS       16   /* QPs per connection (IBC_IB_QPS_PER_CONN max) */
#define IBC_IB_MAX_RAILS     4    /* ports per rank (IBC_IB_RAILS max) */
#define IBC_IB_MAX_DEPTH     256  /* credit slots per direction (IBC_IB_DEPTH max) */
#define IBC_IB_GID_TBL_MAX   256  /* GID entries read per port */

/* ---------------------------------------------------------------------- */
/* HCA selection and port discovery (ib_device.c)                         */
/* ---------------------------------------------------------------------- */

/* struct ibc_ib_hca_spec - a parsed IBC_IB_HCA value */
struct ibc_ib_hca_spec {
	int exclude;            /* leading '^': the entries are excluded */
	int exact;              /* leading '=' (after '^'): names match exactly, not by prefix */
	int n;                  /* entries; 0 means "everything" */
	struct {
		char name[IBC_IB_NAME_LEN];
		int port;       /* 0: any port */
	} e[IBC_IB_HCA_MAX];
};

ibc_status_t ibc_ib_hca_parse(const char *str, struct ibc_ib_hca_spec *spec_p);
int ibc_ib_hca_match(const struct ibc_ib_hca_spec *spec, const char *dev_name, int port);

/* struct ibc_ib_port_desc - one (device, port) found by ibc_ib_ports_list() */
struct ibc_ib_port_desc {
	char dev_name[IBC_IB_NAME_LEN];
	int port;               /* 1-based port number */
	int link_layer;         /* IBV_LINK_LAYER_INFINIBAND or IBV_LINK_LAYER_ETHERNET */
	enum ibv_mtu active_mtu;
	uint16_t lid;
	int speed_mbps;         /* active width x speed, Mbit/s; 0 when unknown */
};

ibc_status_t ibc_ib_ports_list(const struct ibc_ib_hca_spec *spec, struct ibc_ib_port_desc *ports,
			       int max_ports, int *nports_p);
int ibc_ib_port_pick(const struct ibc_ib_port_desc *ports, int nports, int local_rank, int nlocal);
int ibc_ib_rails_pick(int nports, int pick, int want, const int *dist, int idx[IBC_IB_MAX_RAILS]);
int ibc_ib_stripe_plan(size_t nbytes, size_t min, size_t lim, int nrails, const uint32_t *mbps,
		       size_t len[IBC_IB_MAX_RAILS], int rail[IBC_IB_MAX_RAILS]);
const char *ibc_ib_mtu_str(enum ibv_mtu mtu);
struct ibc_ib_gid_entry;
int ibc_ib_port_gids(struct ibv_context *vctx, int port, struct ibc_ib_gid_entry *tbl, int max);
enum ibv_mtu ibc_ib_mtu_negotiate(enum ibv_mtu local, enum ibv_mtu remote);

/* ---------------------------------------------------------------------- */
/* GID selection (ib_gid.c): pure functions over a GID table              */
/* ---------------------------------------------------------------------- */

/*
 * enum ibc_ib_gid_class - kinds of RoCE GIDs in order of preference. Crosses
 * the wire (connection info): fixed values.
 */
enum ibc_ib_gid_class {
	IBC_IB_GID_V2_IPV4 = 0,         /* RoCE v2, ::ffff:a.b.c.d */
	IBC_IB_GID_V2_GLOBAL = 1,       /* RoCE v2, global (or ULA) IPv6 */
	IBC_IB_GID_V2_LINKLOCAL = 2,    /* RoCE v2, fe80::/10 */
	IBC_IB_GID_V1_IPV4 = 3,         /* RoCE v1 (layer 2), same order */
	IBC_IB_GID_V1_GLOBAL = 4,
	IBC_IB_GID_V1_LINKLOCAL = 5,
	IBC_IB_GID_CLASS_COUNT = 6
};

/* struct ibc_ib_gid_entry - one valid GID table entry */
struct ibc_ib_gid_entry {
	uint8_t gid[16];
	int index;              /* GID table index */
	int type;               /* IBV_GID_TYPE_IB, _ROCE_V1 or _ROCE_V2 */
};

/* struct ibc_ib_gid_cands - the best GID of each class on one port */
struct ibc_ib_gid_cands {
	int index[IBC_IB_GID_CLASS_COUNT];      /* GID index, -1 when the port has none */
	uint8_t gid[IBC_IB_GID_CLASS_COUNT][16];
};

int ibc_ib_gid_classify(const uint8_t gid[16], int type);
const char *ibc_ib_gid_class_name(int cls);
const char *ibc_ib_gid_type_name(int type);
void ibc_ib_gid_str(const uint8_t gid[16], char *buf, size_t len);
ibc_status_t ibc_ib_gid_cands_build(const struct ibc_ib_gid_entry *tbl, int n, int override_index,
				    struct ibc_ib_gid_cands *cands_p);
int ibc_ib_gid_agree(const struct ibc_ib_gid_cands *local, const struct ibc_ib_gid_cands *remote,
		     int *local_cls_p, int *remote_cls_p, char *why, size_t why_len);

/* ---------------------------------------------------------------------- */
/* Registration cache (ib_mr.c)                                           */
/* ---------------------------------------------------------------------- */

#define IBC_IB_MR_PERSIST  0x1  /* transport-owned memory: kept until invalidated */
#define IBC_IB_MR_READONLY 0x2  /* registered without write access (send side only) */
#define IBC_IB_MR_STALE    0x4  /* invalidated while in use: deregistered at last put */
#define IBC_IB_MR_NOKEEP   0x8  /* hooks on but no slot free: released at last put */
#define IBC_IB_MR_KEEP     0x10 /* a whole ibc_mem_alloc() allocation: kept until it is freed */
#define IBC_IB_MR_NEED_SLOT 0x20 /* ibc_ib_mr_get(): fail rather than register unprotected */
#define IBC_IB_MR_DEVICE   0x40 /* CUDA device memory, registered by GPUDirect (reg_dev) */

/*
 * struct ibc_ib_mr - one cached registration of [start, end): a page range
 * of host memory, or the exact range of a CUDA allocation (IBC_IB_MR_DEVICE)
 */
struct ibc_ib_mr {
	uintptr_t start;        /* host: page-aligned; device: the allocation's start */
	uintptr_t end;          /* exclusive; host: page-aligned; device: the allocation's end */
	uint64_t buffer_id;     /* device: CU_POINTER_ATTRIBUTE_BUFFER_ID at registration; 0 host */
	enum ibc_gdr_mode gdr_mode; /* device: the mode it was registered in; host: OFF */
	uint32_t lkey;
	uint32_t rkey;
	void *handle;           /* struct ibv_mr *, or the fake backend's cookie */
	int refcnt;             /* posted operations using it */
	unsigned flags;         /* IBC_IB_MR_* */
	int slot;               /* memory-hook slot (ib_memhook.c), -1: none */
	struct ibc_ib_mr *next; /* cache list, most recently used first */
	struct ibc_ib_mr *prev;
};

/*
 * struct ibc_ib_mr_mem - what the backend's mem_query says of a range.
 * @kind:      enum ibc_cuda_memkind (managed memory counts as device).
 * @dev:       CUDA device ordinal of device memory, -1 for host.
 * @base:      device: start of the CUDA allocation holding the range.
 * @nbytes:    device: size of that allocation, bytes.
 * @buffer_id: device: its CU_POINTER_ATTRIBUTE_BUFFER_ID (never 0); a
 *             different id at the same address = freed and reallocated.
 */
struct ibc_ib_mr_mem {
	int kind;
	int dev;
	uintptr_t base;
	size_t nbytes;
	uint64_t buffer_id;
};

/*
 * struct ibc_ib_mr_backend - how the cache registers memory: ibv_reg_mr on a
 * PD in the transport, a fake in unit tests. reg returns 0 or an errno and
 * fills lkey/rkey/handle; @writable selects local+remote write access.
 * The device members may be NULL (then every range is host memory):
 * @mem_query: the kind of [@addr, @addr + @nbytes) into *@mem_p; returns 0,
 *             or an errno when device memory's allocation cannot be read
 *             (e.g. freed): the range is then neither host nor device.
 * @gdr_mode:  the GPUDirect mode (enum ibc_gdr_mode) for CUDA device @dev
 *             and this backend's NIC into *@mode_p, with the reason in @why
 *             (@why_len bytes); returns an ibc_status_t.
 * @reg_dev:   register device memory in @mode (DMABUF or PEERMEM), like
 *             reg; dereg releases it.
 */
struct ibc_ib_mr_backend {
	int (*reg)(void *arg, void *addr, size_t nbytes, int writable, uint32_t *lkey_p,
		   uint32_t *rkey_p, void **handle_p);
	int (*dereg)(void *arg, void *handle);
	void *arg;
	const char *name;       /* device name for error messages */
	int (*mem_query)(void *arg, const void *addr, size_t nbytes, struct ibc_ib_mr_mem *mem_p);
	ibc_status_t (*gdr_mode)(void *arg, int dev, enum ibc_gdr_mode *mode_p, char *why,
				 size_t why_len);
	int (*reg_dev)(void *arg, void *addr, size_t nbytes, int writable, enum ibc_gdr_mode mode,
		       uint32_t *lkey_p, uint32_t *rkey_p, void **handle_p);
};

struct ibc_ib_mr_cache_stats {
	uint64_t hits;          /* lookups served by an existing registration */
	uint64_t misses;        /* lookups that registered */
	uint64_t invalidations; /* registrations dropped by ibc_ib_mr_invalidate() or a release */
	uint64_t released;      /* of those, because the memory hooks saw the memory released */
	uint64_t evictions;     /* idle registrations dropped by trimming */
	uint64_t regs;          /* backend reg calls that succeeded */
	uint64_t deregs;        /* backend dereg calls */
	uint64_t dev_regs;      /* of regs, device memory through reg_dev (GPUDirect) */
	uint64_t dev_reused;    /* device entries dropped: their buffer id changed (cudaFree) */
	uint64_t dev_partial;   /* device registrations of part of an allocation (the whole got ENOMEM) */
};

struct ibc_ib_mr_cache {
	struct ibc_ib_mr_backend be;
	struct ibc_ib_mr *head;         /* every entry, MRU first */
	size_t idle_user_bytes;         /* bytes of idle non-persistent entries */
	size_t idle_max_bytes;          /* IBC_IB_REG_CACHE_BYTES */
	int hooks;                      /* user entries get memory-hook slots (ibc_ib_mr_cache_hooks()) */
	pthread_mutex_t lock;           /* the public calls; see ib_mr.c */
	int nentries;
	uint64_t dev_checked_ns;        /* when trimming last asked the driver about idle device
					 * entries (IB_MR_DEV_CHECK_NS apart) */
	struct ibc_ib_mr_cache_stats stats;
	char errbuf[512];               /* text of the last registration failure */
};

void ibc_ib_mr_cache_init(struct ibc_ib_mr_cache *cache, const struct ibc_ib_mr_backend *be,
			  size_t idle_max_bytes);
void ibc_ib_mr_cache_fini(struct ibc_ib_mr_cache *cache);
ibc_status_t ibc_ib_mr_get(struct ibc_ib_mr_cache *cache, const void *addr, size_t nbytes,
			   unsigned flags, struct ibc_ib_mr **mr_p);
void ibc_ib_mr_put(struct ibc_ib_mr_cache *cache, struct ibc_ib_mr *mr);
void ibc_ib_mr_invalidate(struct ibc_ib_mr_cache *cache, const void *addr, size_t nbytes);
void ibc_ib_mr_trim(struct ibc_ib_mr_cache *cache, size_t keep_bytes);
int ibc_ib_mr_cache_hooks(struct ibc_ib_mr_cache *cache);

/* ---------------------------------------------------------------------- */
/* Memory-release events from UCX's libucm (ib_memhook.c)                 */
/* ---------------------------------------------------------------------- */

#define IBC_IB_MEMHOOK_SLOTS 4096 /* hook-protected registrations per process */

int ibc_ib_memhook_start(const char **why_p);
void ibc_ib_memhook_release(const void *addr, size_t nbytes);
int ibc_ib_memhook_slot_get(uintptr_t start, uintptr_t end);
int ibc_ib_memhook_slot_stale(int slot);
void ibc_ib_memhook_slot_put(int slot);
void ibc_ib_memhook_counts(uint64_t *events_p, uint64_t *stale_p);
size_t ibc_ib_reg_cache_budget(size_t param, int hooks);
const char *ibc_ib_reg_cache_keep_text(size_t keep, char *buf, size_t len);
int ibc_ib_mr_verbs_reg(void *arg, void *addr, size_t nbytes, int writable, uint32_t *lkey_p,
			uint32_t *rkey_p, void **handle_p);
int ibc_ib_mr_verbs_dereg(void *arg, void *handle);

/* ---------------------------------------------------------------------- */
/* Device memory for the cache, and the GPUDirect probe (ib_mr_dev.c)     */
/* ---------------------------------------------------------------------- */

struct ibc_ib_ctx;
void ibc_ib_mr_dev_backend(struct ibc_ib_ctx *ctx, struct ibc_ib_mr_backend *be);
int ibc_ib_mr_dev_query(void *arg, const void *addr, size_t nbytes, struct ibc_ib_mr_mem *mem_p);
ibc_status_t ibc_ib_mr_dev_gdr_mode(void *arg, int dev, enum ibc_gdr_mode *mode_p, char *why,
				   size_t why_len);
int ibc_ib_mr_dev_reg(void *arg, void *addr, size_t nbytes, int writable, enum ibc_gdr_mode mode,
		      uint32_t *lkey_p, uint32_t *rkey_p, void **handle_p);
void ibc_ib_ctx_gdr_probe(struct ibc_ib_ctx *ctx);

/* ---------------------------------------------------------------------- */
/* Parameters, context, CQ and progress (ib_cq.c)                         */
/* ---------------------------------------------------------------------- */

/* struct ibc_ib_params - the ib section of params.def, read once per context */
struct ibc_ib_params {
	int gid_index;          /* IBC_IB_GID_INDEX, -1 auto */
	int timeout;            /* IBC_IB_TIMEOUT exponent */
	int retry_cnt;          /* IBC_IB_RETRY_CNT */
	int nqps;               /* IBC_IB_QPS_PER_CONN */
	int depth;              /* IBC_IB_DEPTH */
	int inline_bytes;       /* IBC_IB_INLINE_BYTES */
	size_t bounce_bytes;    /* IBC_IB_BOUNCE_BYTES */
	size_t stripe_min_bytes;/* IBC_IB_STRIPE_MIN_BYTES */
	size_t reg_cache_bytes; /* IBC_IB_REG_CACHE_BYTES */
	int probe_ms;           /* IBC_IB_PROBE_MS, 0: no keep-alive probes */
	int sl;                 /* IBC_IB_SL */
	int tc;                 /* IBC_IB_TC */
	size_t ll_max_bytes;    /* IBC_LL_MAX_BYTES, 0: no LL path */
	size_t eager_bytes;     /* IBC_IB_EAGER_BYTES, 0: no eager path */
};

void ibc_ib_params_from_env(struct ibc_ib_params *p);

/*
 * struct ibc_ib_ctx_cb - how the context reports to its owner.
 * @fail:       a fatal error on @peer's connection (peer -1: the whole
 *              device); @why names the QP, the verbs status text and the
 *              device. Called once per failed connection.
 * @desc_check: compare descriptors (ibc_msg_desc_check() in the transport);
 *              returns IBC_OK or IBC_ERR_INVALID_USAGE after logging both.
 */
struct ibc_ib_ctx_cb {
	void *arg;
	void (*fail)(void *arg, ibc_status_t st, int peer, const char *why);
	ibc_status_t (*desc_check)(void *arg, int peer, const struct ibc_msg_desc *mine,
				   size_t my_nbytes, const struct ibc_msg_desc *theirs,
				   size_t their_nbytes);
};

struct ibc_ib_conn;
struct ibc_ib_op;

/* struct ibc_ib_ctx - one opened port with its PD, CQ and connections */
struct ibc_ib_ctx {
	struct ibv_context *vctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	int cq_size;            /* CQEs the CQ holds */
	int cq_needed;          /* CQEs the connections can have outstanding */
	int cq_armed;
	unsigned cq_events_unacked;
	char dev_name[IBC_IB_NAME_LEN];
	int port;
	struct ibv_port_attr port_attr;
	struct ibv_device_attr dev_attr;
	int link_layer;
	struct ibc_ib_gid_cands gids;   /* this port's candidates (auto or override) */
	uint32_t max_msg_bytes; /* largest single RDMA write */
	struct ibc_ib_params prm;
	struct ibc_ib_ctx_cb cb;
	struct ibc_ib_mr_cache mrc;
	struct ibc_ib_conn *conns;      /* list */
	struct ibc_ib_conn *zombies;    /* destroyed but not drained: freed after the CQ */
	struct ibc_ib_op *free_ops;     /* op pool */
	uint32_t next_conn_id;
	ibc_status_t fatal_st;          /* device-wide failure (port down, CQ error) */
	ibc_status_t report_st;         /* error to return from the next progress() */
	uint64_t next_async_check_ns;
	uint32_t last_seq;              /* msg desc (seq, coll) of the last posted op */
	int last_coll;
	int have_last;
	struct ibv_wc wc_stash[32];     /* completions polled by wait(), handled by progress() */
	int nstash;
	int ll_busy;            /* a connection polls LL memory: wait() must not sleep long */
	unsigned caps;          /* IBC_TCAP_*: the ops table's, plus IBC_TCAP_CUDA when the
				 * GPUDirect probe registered device memory (ib_mr_dev.c) */
	int dmabuf_nic;         /* ibc_cuda_ib_dmabuf_probe() of the PD: 1, 0, -1 not built */
};

ibc_status_t ibc_ib_ctx_create(const char *dev_name, int port, const struct ibc_ib_params *prm,
			       const struct ibc_ib_ctx_cb *cb, struct ibc_ib_ctx **ctx_p);
void ibc_ib_ctx_destroy(struct ibc_ib_ctx *ctx);
ibc_status_t ibc_ib_ctx_progress(struct ibc_ib_ctx *ctx);
void ibc_ib_ctx_poll(struct ibc_ib_ctx *ctx);
void ibc_ib_ctx_wait(struct ibc_ib_ctx *ctx, int timeout_us);
void ibc_ib_ctx_wait_many(struct ibc_ib_ctx *const *ctxs, int n, int timeout_us);
ibc_status_t ibc_ib_ctx_cq_reserve(struct ibc_ib_ctx *ctx, int ncqe);
void ibc_ib_ctx_cq_release(struct ibc_ib_ctx *ctx, int ncqe);
void ibc_ib_ctx_handle_async(struct ibc_ib_ctx *ctx);
void ibc_ib_ctx_fail_all(struct ibc_ib_ctx *ctx, ibc_status_t st, const char *why);

/* ---------------------------------------------------------------------- */
/* Queue pairs (ib_qp.c)                                                  */
/* ---------------------------------------------------------------------- */

/* struct ibc_ib_qp - one RC QP with send-queue accounting for selective signaling */
struct ibc_ib_qp {
	struct ibv_qp *qp;
	struct ibc_ib_ctx *ctx;
	struct ibc_ib_conn *conn;
	int idx;                /* index in the connection */
	uint32_t psn;           /* our initial send PSN (random, 24 bits) */
	uint32_t remote_qpn;    /* the peer QP it is connected to (after RTR) */
	int sq_depth;           /* send WRs the QP holds */
	int rq_depth;           /* receive WRs kept posted */
	int max_inline;         /* inline bytes the QP accepted */
	int sq_inflight;        /* WRs posted and not retired by a signaled completion */
	int unsignaled;         /* WRs posted since the last signaled one */
	int *sig_batch;         /* [sq_depth] ring: WRs retired by each signaled WR, in order */
	int sig_head;
	int sig_tail;
	int rq_posted;          /* receives posted and not completed */
	int drain_sq_done;      /* teardown: the send marker completed (receives: rq_posted is 0) */
};

/* struct ibc_ib_qp_dest - what QP transitions need to know about the peer */
struct ibc_ib_qp_dest {
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	int is_global;          /* RoCE (or routed IB): use the GRH */
	uint8_t dgid[16];
	int sgid_index;
	enum ibv_mtu mtu;
};

ibc_status_t ibc_ib_qp_create(struct ibc_ib_ctx *ctx, struct ibc_ib_conn *conn, int idx,
			      int sq_depth, int rq_depth, struct ibc_ib_qp *qp);
void ibc_ib_qp_destroy(struct ibc_ib_qp *qp);
ibc_status_t ibc_ib_qp_to_init(struct ibc_ib_ctx *ctx, struct ibc_ib_qp *qp);
ibc_status_t ibc_ib_qp_to_rtr(struct ibc_ib_ctx *ctx, struct ibc_ib_qp *qp,
			      const struct ibc_ib_qp_dest *dest);
ibc_status_t ibc_ib_qp_to_rts(struct ibc_ib_ctx *ctx, struct ibc_ib_qp *qp);
ibc_status_t ibc_ib_qp_to_err(struct ibc_ib_qp *qp);
int ibc_ib_qp_post_recvs(struct ibc_ib_qp *qp, int n);
int ibc_ib_qp_sq_room(const struct ibc_ib_qp *qp);
int ibc_ib_qp_post_write(struct ibc_ib_qp *qp, uint64_t wr_id, int signaled, int inl,
			 const void *laddr, uint32_t lkey, size_t nbytes, uint64_t raddr,
			 uint32_t rkey, int with_imm, uint32_t imm);
/**
 * ibc_ib_qp_post_write_sg() - ibc_ib_qp_post_write() gathering its source
 * from @nsge (1 or 2) local pieces, e.g. an eager header and the payload.
 * @qp, @wr_id, @signaled, @inl: as ibc_ib_qp_post_write(); with @inl the
 *            pieces' total must fit qp->max_inline.
 * @sge:      [in] the pieces in order (addr, length, lkey); lengths may be 0.
 * @nsge:     [in] 1 or 2 (the QP is created with two send SGEs).
 * @raddr, @rkey, @with_imm, @imm: as ibc_ib_qp_post_write().
 * Return: 0 or the errno of ibv_post_send.
 */
int ibc_ib_qp_post_write_sg(struct ibc_ib_qp *qp, uint64_t wr_id, int signaled, int inl,
			    const struct ibv_sge *sge, int nsge, uint64_t raddr, uint32_t rkey,
			    int with_imm, uint32_t imm);
void ibc_ib_qp_sq_retire(struct ibc_ib_qp *qp);

/* wr_id encoding: a pointer (8-byte aligned) with the kind in the low bits */
enum ibc_ib_wr_kind {
	IBC_IB_WR_OP = 0,       /* signaled data write of an op: pointer to struct ibc_ib_op */
	IBC_IB_WR_QP = 1,       /* other send WR (CTS, NACK, unsignaled data): struct ibc_ib_qp */
	IBC_IB_WR_RECV = 2,     /* posted receive: struct ibc_ib_qp */
	IBC_IB_WR_DRAIN_SQ = 3, /* teardown marker: struct ibc_ib_qp */
	IBC_IB_WR_PROBE = 5,    /* keep-alive probe (zero-byte write): struct ibc_ib_qp */
};
#define IBC_IB_WR_KIND_MASK 0x7ull
static inline uint64_t ibc_ib_wr_id(const void *p, enum ibc_ib_wr_kind kind)
{
	return (uint64_t)(uintptr_t)p | (uint64_t)kind;
}

/* ---------------------------------------------------------------------- */
/* Connections and data path (ib_conn.c)                                  */
/* ---------------------------------------------------------------------- */

#define IBC_IB_CONN_INFO_VERSION 3     /* 2: LL ring fields; 3: eager slots */
/* packed size of struct ibc_ib_conn_info on the wire */
#define IBC_IB_CONN_INFO_WIRE_BYTES \
	(48 + IBC_IB_NAME_LEN + 8 * IBC_IB_MAX_QPS + 20 * IBC_IB_GID_CLASS_COUNT + 24 + 24)

/* struct ibc_ib_conn_info - what one end tells the other to connect (bootstrap payload) */
struct ibc_ib_conn_info {
	uint32_t version;
	uint32_t nqps;
	uint32_t depth;         /* credit slots */
	uint32_t link_layer;
	uint32_t active_mtu;    /* enum ibv_mtu */
	uint32_t lid;
	uint32_t port;
	uint32_t fifo_rkey;
	uint64_t fifo_addr;     /* struct ibc_ib_fifo_slot [depth] the peer writes into */
	uint64_t conn_id;       /* diagnostic */
	char dev_name[IBC_IB_NAME_LEN];
	uint32_t qpn[IBC_IB_MAX_QPS];
	uint32_t psn[IBC_IB_MAX_QPS];
	struct ibc_ib_gid_cands gids;
	uint64_t ll_addr;       /* LL ring (ll_lines lines + 1 credit line) the peer writes */
	uint32_t ll_rkey;
	uint32_t ll_lines;      /* data lines of the ring; 0: no LL path */
	uint32_t ll_max;        /* largest LL message, bytes (IBC_LL_MAX_BYTES) */
	uint32_t ll_pad;
	uint64_t eager_addr;    /* receive slots [depth] of eager_stride bytes the peer writes */
	uint32_t eager_rkey;
	uint32_t eager_stride;  /* bytes per slot: a 64-byte header, then the payload */
	uint32_t eager_max;     /* largest eager message, bytes (IBC_IB_EAGER_BYTES); 0: none */
	uint32_t eager_pad;
};

void ibc_ib_conn_info_pack(const struct ibc_ib_conn_info *info,
			   uint8_t out[IBC_IB_CONN_INFO_WIRE_BYTES]);
ibc_status_t ibc_ib_conn_info_unpack(const uint8_t in[IBC_IB_CONN_INFO_WIRE_BYTES],
				     struct ibc_ib_conn_info *info);

ibc_status_t ibc_ib_conn_create(struct ibc_ib_ctx *ctx, int peer, const char *peer_host,
				struct ibc_ib_conn **conn_p);
void ibc_ib_conn_local_info(const struct ibc_ib_conn *conn, struct ibc_ib_conn_info *info);
ibc_status_t ibc_ib_conn_establish(struct ibc_ib_conn *conn, const struct ibc_ib_conn_info *remote);
void ibc_ib_conn_destroy(struct ibc_ib_conn *conn);
ibc_status_t ibc_ib_conn_isend(struct ibc_ib_conn *conn, const void *buf, size_t nbytes,
			       const struct ibc_msg_desc *desc, struct ibc_treq *req);
ibc_status_t ibc_ib_conn_irecv(struct ibc_ib_conn *conn, void *buf, size_t nbytes,
			       const struct ibc_msg_desc *desc, struct ibc_treq *req);
ibc_status_t ibc_ib_conn_post(struct ibc_ib_conn *conn, void *buf, size_t nbytes,
			      const struct ibc_msg_desc *desc, struct ibc_treq *req, int is_send);

/* the next message in when no receive is posted, if it came by the LL
 * path: 1 with its descriptor and size (struct ibc_transport_ops peek) */
int ibc_ib_conn_peek(struct ibc_ib_conn *conn, struct ibc_msg_desc *desc, size_t *nbytes);
/* accessors (tests, logs, the ops glue): peer rank, context, QP number of QP
 * @idx (0 when absent), negotiated path MTU, source GID index (-1 on IB),
 * number of QPs in use */
int ibc_ib_conn_peer(const struct ibc_ib_conn *conn);
struct ibc_ib_ctx *ibc_ib_conn_ctx(const struct ibc_ib_conn *conn);
uint32_t ibc_ib_conn_qpn(const struct ibc_ib_conn *conn, int idx);
enum ibv_mtu ibc_ib_conn_mtu(const struct ibc_ib_conn *conn);
int ibc_ib_conn_gid_index(const struct ibc_ib_conn *conn);
int ibc_ib_conn_nqps(const struct ibc_ib_conn *conn);
/* the connection's LL limit, bytes (0: no LL path; valid once established) */
size_t ibc_ib_conn_ll_max(const struct ibc_ib_conn *conn);
/* the connection's eager limit, bytes (0: no eager path; valid once established) */
size_t ibc_ib_conn_eager_max(const struct ibc_ib_conn *conn);

/* called by the context (ib_cq.c) */
void ibc_ib_conn_handle_wc(struct ibc_ib_ctx *ctx, const struct ibv_wc *wc);
struct ibc_ib_conn *ibc_ib_conn_next(const struct ibc_ib_conn *conn);
void ibc_ib_conn_set_failed(struct ibc_ib_conn *conn, ibc_status_t st);
void ibc_ib_conn_free_zombies(struct ibc_ib_ctx *ctx);
void ibc_ib_op_pool_fini(struct ibc_ib_ctx *ctx);
int ibc_ib_conn_kick(struct ibc_ib_conn *conn);
void ibc_ib_conn_fail(struct ibc_ib_conn *conn, ibc_status_t st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ibc_ib_conn_qp_event(struct ibc_ib_qp *qp, enum ibv_event_type ev);

/*
 * imm data of RDMA WRITE WITH IMM (host order; wire is big-endian): a 3-bit
 * type, then nparts - 1 (4 bits), the credit slot (8 bits) and the low 17
 * bits of the message's sequence number; IBC_IB_IMM_CREDIT carries the low
 * 29 bits of a consumed count instead.
 */
enum ibc_ib_imm_type {
	IBC_IB_IMM_DATA = 0,    /* last write of one part of a rendezvous message */
	IBC_IB_IMM_CTS = 1,     /* a clear-to-send entry was written */
	IBC_IB_IMM_NACK = 2,    /* the sender refused a receive (descriptor mismatch) */
	IBC_IB_IMM_EAGER = 3,   /* an eager message (header + payload) is in a receive slot */
	IBC_IB_IMM_ENACK = 4,   /* the receiver refused an eager message (both descriptors) */
	IBC_IB_IMM_RTS = 5,     /* a rendezvous send has waited long for its clear-to-send */
	IBC_IB_IMM_CREDIT = 6,  /* zero-byte: the receiver's consumed count (low 29 bits) */
};
#define IBC_IB_IMM_SEQ_MASK    0x1ffffu
#define IBC_IB_IMM_CREDIT_MASK 0x1fffffffu
static inline uint32_t ibc_ib_imm_make(unsigned type, unsigned nparts, unsigned slot, uint32_t seq)
{
	return (uint32_t)type << 29 | (uint32_t)(nparts - 1) << 25 | (uint32_t)slot << 17 |
	       (seq & IBC_IB_IMM_SEQ_MASK);
}
static inline uint32_t ibc_ib_imm_credit(uint32_t consumed)
{
	return (uint32_t)IBC_IB_IMM_CREDIT << 29 | (consumed & IBC_IB_IMM_CREDIT_MASK);
}
static inline unsigned ibc_ib_imm_type(uint32_t imm) { return imm >> 29; }
static inline unsigned ibc_ib_imm_nparts(uint32_t imm) { return ((imm >> 25) & 0xfu) + 1; }
static inline unsigned ibc_ib_imm_slot(uint32_t imm) { return (imm >> 17) & 0xffu; }
static inline uint32_t ibc_ib_imm_seq(uint32_t imm) { return imm & IBC_IB_IMM_SEQ_MASK; }

/*
 * Port choice per rank: ib_ops_pick_port() in ib_ops.c asks the topology
 * module (ibc_topo_pick_nic(), GPU -1 until the communicator passes the
 * rank's GPU) and falls back to ibc_ib_port_pick().
 */

extern const struct ibc_transport_ops ibc_ib_ops;

#endif /* IBC_IB_H */
