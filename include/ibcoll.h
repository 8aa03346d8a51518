/* SPDX-License-Identifier: MIT */
/*
 * ibcoll.h - public API of libibcoll, a collective-communication runtime for
 * distributed deep learning over InfiniBand verbs, TCP sockets and shared
 * memory. This is the only installed header (plus ibcoll_cuda.h for
 * stream-ordered CUDA entry points when built with CUDA).
 *
 * Conventions used in every docstring below:
 *   count   number of ELEMENTS of the given dtype (never bytes);
 *   nbytes  number of bytes;
 *   times   in milliseconds (_ms) or microseconds (_us) as named;
 *   memory  host memory, or CUDA device memory where the library was built
 *           with CUDA (see ibc_info); buffers need no pre-registration.
 *
 * Guarantees that hold for every collective:
 *   - count == 0 is legal and returns IBC_OK (buffers may then be NULL);
 *   - sendbuf and recvbuf are the same (in place, at the offset each call
 *     names) or do not overlap: a partial overlap is IBC_ERR_INVALID_ARG;
 *   - reductions need buffers aligned to their element size (float32: 4
 *     bytes), else IBC_ERR_INVALID_ARG;
 *   - every rank receives bitwise-identical results;
 *   - with the same inputs, communicator size and algorithm, the same bits
 *     come out on every run (the reduction order is fixed by the algorithm,
 *     never by arrival order). Different algorithms (ring, tree, ...) may
 *     differ in the last bits of floating-point results;
 *   - every wait is bounded (IBC_TIMEOUT_MS); a dead or stuck peer gives
 *     IBC_ERR_REMOTE or IBC_ERR_TIMEOUT, never a hang; the library never
 *     calls exit() or abort().
 * See docs/design.md for the architecture and docs/env.md for every
 * environment variable. IBC_* variables are read once per process, when
 * first needed, and kept: setenv() after the first ibcoll call has no
 * effect (ibc_comm_set_timeout() changes a communicator's timeout).
 */
#ifndef IBCOLL_H
#define IBCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IBC_VERSION_MAJOR 0
#define IBC_VERSION_MINOR 1
#define IBC_VERSION_PATCH 0
/* IBC_VERSION_CODE: major * 10000 + minor * 100 + patch */
#define IBC_VERSION_CODE \
	(IBC_VERSION_MAJOR * 10000 + IBC_VERSION_MINOR * 100 + IBC_VERSION_PATCH)

#if defined(__GNUC__)
#define IBC_API __attribute__((visibility("default")))
#else
#define IBC_API
#endif

/**
 * enum ibc_status - result of every ibcoll call, grouped by who must act.
 * @IBC_OK:                success.
 * @IBC_INPROGRESS:        a nonblocking operation is not finished; not an error.
 * @IBC_ERR_INVALID_ARG:   the caller passed a bad value (NULL buffer, bad dtype).
 * @IBC_ERR_INVALID_USAGE: API misuse: wrong state or call order, or ranks that
 *                         called mismatched collectives (count, dtype, root).
 * @IBC_ERR_NO_MEMORY:     an allocation failed.
 * @IBC_ERR_SYSTEM:        a libc or system call failed; errno text is logged.
 * @IBC_ERR_VERBS:         an ibv_* call failed, incl. a bad work completion.
 * @IBC_ERR_CUDA:          a CUDA call failed.
 * @IBC_ERR_REMOTE:        a peer died, a connection was lost, or a peer
 *                         reported an error; the log names the peer.
 * @IBC_ERR_TIMEOUT:       a bounded wait expired; the log names who is missing.
 * @IBC_ERR_UNSUPPORTED:   not built in, or the hardware lacks it.
 * @IBC_ERR_INTERNAL:      a bug in ibcoll; please report it with the log.
 * @IBC_ERR_LIMIT:         a per-communicator limit was reached (IBC_MAX_REQUESTS
 *                         outstanding requests); nothing was issued and the
 *                         communicator stays usable: wait on earlier requests
 *                         and call again.
 * @IBC_ERR_REVOKED:       the communicator was revoked (ibc_comm_revoke() on
 *                         any rank): every operation on it fails at once; the
 *                         ranks may still ibc_comm_agree(), ibc_comm_shrink()
 *                         and ibc_comm_destroy() it.
 * @IBC_STATUS_COUNT:      not a status; number of distinct codes.
 */
typedef enum ibc_status {
	IBC_OK = 0,
	IBC_INPROGRESS = 1,
	IBC_ERR_INVALID_ARG = -1,
	IBC_ERR_INVALID_USAGE = -2,
	IBC_ERR_NO_MEMORY = -3,
	IBC_ERR_SYSTEM = -4,
	IBC_ERR_VERBS = -5,
	IBC_ERR_CUDA = -6,
	IBC_ERR_REMOTE = -7,
	IBC_ERR_TIMEOUT = -8,
	IBC_ERR_UNSUPPORTED = -9,
	IBC_ERR_INTERNAL = -10,
	IBC_ERR_LIMIT = -11,
	IBC_ERR_REVOKED = -12,
	IBC_STATUS_COUNT = 14
} ibc_status_t;

/**
 * enum ibc_dtype - element types. Values cross the wire and the ABI: fixed.
 * IBC_FLOAT16 is IEEE binary16, IBC_BFLOAT16 is bfloat16 (8-bit exponent);
 * both are reduced in fp32 and rounded to nearest-even.
 */
typedef enum ibc_dtype {
	IBC_INT8 = 0,
	IBC_UINT8 = 1,
	IBC_INT32 = 2,
	IBC_UINT32 = 3,
	IBC_INT64 = 4,
	IBC_UINT64 = 5,
	IBC_FLOAT16 = 6,
	IBC_BFLOAT16 = 7,
	IBC_FLOAT32 = 8,
	IBC_FLOAT64 = 9,
	IBC_DTYPE_COUNT = 10
} ibc_dtype_t;

/**
 * enum ibc_redop - reduction operations. Values cross the wire: fixed.
 * @IBC_SUM:  sum; integer sums wrap (two's complement, like unsigned C
 *            arithmetic); floating point sums follow the algorithm's order.
 * @IBC_PROD: product; integers wrap.
 * @IBC_MIN:  minimum; a NaN on any rank gives NaN.
 * @IBC_MAX:  maximum; a NaN on any rank gives NaN.
 * @IBC_AVG:  SUM, then one division by the number of ranks at the end
 *            (integers: C division, truncating toward zero).
 */
typedef enum ibc_redop {
	IBC_SUM = 0,
	IBC_PROD = 1,
	IBC_MIN = 2,
	IBC_MAX = 3,
	IBC_AVG = 4,
	IBC_REDOP_COUNT = 5
} ibc_redop_t;

/**
 * typedef ibc_comm_h - opaque communicator handle: a number, not an address,
 * never reused within the process, so a destroyed or aborted handle gives
 * IBC_ERR_INVALID_USAGE even after a new communicator was created; so does
 * a handle a forked child inherited from its parent (a child may create its
 * own communicators, not use, split or destroy its parent's).
 */
typedef struct ibc_comm_handle *ibc_comm_h;

/** typedef ibc_request_h - opaque handle of a nonblocking operation. */
typedef struct ibc_request *ibc_request_h;

#define IBC_UNIQUE_ID_BYTES 128

/**
 * struct ibc_unique_id - the rendezvous token of a communicator: the
 * bootstrap root's address and a 128-bit secret from the OS RNG. Copy it to
 * every rank by any means (MPI_Bcast, a file, ...); anyone holding it can
 * join the job, so treat it as a password.
 */
typedef struct ibc_unique_id {
	char internal[IBC_UNIQUE_ID_BYTES];
} ibc_unique_id_t;

/* ---------------------------------------------------------------------- */
/* Errors, version and types                                               */
/* ---------------------------------------------------------------------- */

/**
 * ibc_status_str() - Short English name of a status code.
 * @st: [in] any value; unknown values give "unknown status".
 *
 * Blocking:  no. Threading: safe from any thread.
 * Return:    a static string, never NULL.
 */
IBC_API const char *ibc_status_str(ibc_status_t st);

/**
 * ibc_last_error() - Text of the last ERROR or WARN line logged by the
 * calling thread (or by the library's threads acting for it), e.g. "rank 2:
 * allreduce #17 (count 1048576 float32 sum, 1048576 bytes moved so far) on
 * tcp: peer rank 3 (host b07): connection closed by the peer (socket 0):
 * process exited or crashed". A failed communicator's calls all set it to
 * the communicator's first error (docs/reliability.md).
 *
 * Threading: thread-local; the progress thread's errors are also copied to
 *            the thread that waits on the failed request.
 * Return:    a thread-local string, "" when nothing failed; valid until the
 *            calling thread's next ibcoll call.
 */
IBC_API const char *ibc_last_error(void);

/**
 * ibc_get_version() - Version of the library actually loaded.
 * @version_p: [out] IBC_VERSION_CODE of the library (major*10000+minor*100+patch).
 *
 * Return: IBC_OK; IBC_ERR_INVALID_ARG if @version_p is NULL.
 */
IBC_API ibc_status_t ibc_get_version(int *version_p);

/**
 * ibc_dtype_size() - Size in bytes of one element of a dtype.
 * @dtype:    [in]  an ibc_dtype_t.
 * @nbytes_p: [out] bytes per element (1, 2, 4 or 8).
 *
 * Return: IBC_OK; IBC_ERR_INVALID_ARG for an unknown dtype or NULL @nbytes_p.
 */
IBC_API ibc_status_t ibc_dtype_size(ibc_dtype_t dtype, size_t *nbytes_p);

/**
 * ibc_get_param_int() - The value in force of an integer parameter (an
 * IBC_* environment variable, docs/env.md): the environment's value when
 * it was valid, otherwise the default. Lets a binding bound its own waits as
 * the library does (the PyTorch backend's group creation by
 * IBC_BOOTSTRAP_TIMEOUT_MS) without parsing the variable again.
 * @name:    [in]  the parameter, with or without the "IBC_" prefix
 *                 ("IBC_BOOTSTRAP_TIMEOUT_MS" or "BOOTSTRAP_TIMEOUT_MS").
 * @value_p: [out] its value, in the parameter's unit (ms, bytes, a count).
 *
 * The process reads each variable once, at its first use (a later setenv()
 * is not seen). Non-blocking, thread-safe.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG if @name or @value_p is NULL, @name is
 *         no parameter, or a string parameter (IBC_TRANSPORT, IBC_ALGO, ...).
 */
IBC_API ibc_status_t ibc_get_param_int(const char *name, int64_t *value_p);

/* ---------------------------------------------------------------------- */
/* Communicators                                                           */
/* ---------------------------------------------------------------------- */

/**
 * ibc_get_unique_id() - Create the rendezvous token for a new communicator.
 * @id: [out] the unique id; broadcast it to every rank of the job.
 *
 * Starts a bootstrap root in the calling process (a background thread that
 * listens on the interface chosen by IBC_SOCKET_IFNAME, accepts only
 * connections that prove knowledge of the id's secret by HMAC-SHA256 over a
 * fresh nonce, and exits when all ranks have joined or after
 * IBC_BOOTSTRAP_TIMEOUT_MS). Call once per communicator, usually on rank 0.
 * Source: NCCL's ncclGetUniqueId (root thread), with authentication added.
 *
 * Blocking:  no (returns once the root listens).
 * Threading: safe from any thread.
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (@id NULL); IBC_ERR_SYSTEM (no
 *            usable interface, socket/bind/thread failure, no OS randomness);
 *            IBC_ERR_NO_MEMORY.
 */
IBC_API ibc_status_t ibc_get_unique_id(ibc_unique_id_t *id);

/**
 * ibc_comm_init_rank() - Join a communicator of @nranks ranks as @rank.
 * @comm_p: [out] the new communicator, written only on success.
 * @nranks: [in]  number of ranks, >= 1; the same on every rank.
 * @id:     [in]  the unique id from ibc_get_unique_id(), the same on every rank.
 * @rank:   [in]  this process's rank, 0 <= @rank < @nranks, distinct per process.
 *
 * Collective over the @nranks ranks: returns when all have joined (or on
 * timeout). Exchanges addresses, host names and boot ids through the root,
 * chooses the transport (shm between ranks of one host, verbs between hosts
 * where a device is usable, TCP otherwise; IBC_TRANSPORT forces one) and
 * starts the communicator's service thread (liveness and progress).
 * Connections to peers are made lazily, on first use.
 *
 * Blocking:  yes, bounded by IBC_BOOTSTRAP_TIMEOUT_MS (default 60000 ms).
 * Threading: each process may create several communicators, from any thread.
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (bad @nranks/@rank, NULL pointer,
 *            malformed @id); IBC_ERR_TIMEOUT (names the ranks that did not
 *            arrive); IBC_ERR_REMOTE (the root refused us: wrong secret,
 *            duplicate rank, size mismatch); IBC_ERR_SYSTEM; IBC_ERR_NO_MEMORY.
 */
IBC_API ibc_status_t ibc_comm_init_rank(ibc_comm_h *comm_p, int nranks, const ibc_unique_id_t *id,
					int rank);

/**
 * ibc_comm_init_env() - Join a communicator described by the environment.
 * @comm_p: [out] the new communicator, written only on success.
 *
 * Rank and size come from IBC_RANK/IBC_NRANKS, else Open MPI's
 * OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, else PMI_RANK/PMI_SIZE, else
 * PMIX_RANK (with PMI_SIZE or IBC_NRANKS), else SLURM_PROCID/SLURM_NTASKS.
 * The rendezvous address is IBC_ROOT=host:port: rank 0 runs the bootstrap
 * root on that port (its own host), the others connect to it, so
 * `mpirun -x IBC_ROOT=node0:29500 ./app` works with no MPI linked in. The
 * shared secret is IBC_SECRET (32 hex digits); without it, one is derived
 * from IBC_ROOT and the launcher's job id and an INFO line says that the
 * job is then protected against mistakes, not against local attackers.
 *
 * Blocking:  yes, bounded by IBC_BOOTSTRAP_TIMEOUT_MS.
 * Threading: as ibc_comm_init_rank().
 * Return:    as ibc_comm_init_rank(), plus IBC_ERR_INVALID_ARG when the
 *            variables are missing or malformed (the log says which).
 */
IBC_API ibc_status_t ibc_comm_init_env(ibc_comm_h *comm_p);

/**
 * ibc_comm_split() - Partition a communicator by color, ordering by key.
 * @comm:   [in]  parent communicator.
 * @color:  [in]  ranks with equal color form one new communicator; a negative
 *                color means "no new communicator" (*@newcomm_p = NULL).
 * @key:    [in]  orders ranks inside the new communicator (ties: parent rank).
 * @newcomm_p: [out] the new communicator or NULL, written only on success.
 *
 * Collective over every rank of @comm (source: MPI_Comm_split semantics).
 * Blocking:  yes, bounded by IBC_BOOTSTRAP_TIMEOUT_MS.
 * Threading: no other call on @comm may run concurrently.
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG; IBC_ERR_INVALID_USAGE (poisoned
 *            @comm); IBC_ERR_REMOTE; IBC_ERR_TIMEOUT; IBC_ERR_SYSTEM;
 *            IBC_ERR_NO_MEMORY.
 */
IBC_API ibc_status_t ibc_comm_split(ibc_comm_h comm, int color, int key, ibc_comm_h *newcomm_p);

/**
 * ibc_comm_destroy() - Finish outstanding operations and free a communicator.
 * @comm: [in] communicator; NULL is accepted and ignored.
 *
 * Waits (bounded by IBC_TIMEOUT_MS) for queued operations, then closes
 * connections, stops the service thread, frees memory and unlinks any
 * shared-memory segment. Not collective: peers that still talk to this rank
 * get IBC_ERR_REMOTE. One exception: when this rank's last call was a small
 * broadcast that returned before the other ranks had made it (eager, over
 * the shared-memory segment of a single-host communicator), destroy first
 * waits until every rank has made that call or left the communicator, and
 * compares the calls (docs/reliability.md).
 * Blocking:  yes, bounded. Threading: no other call on @comm may run concurrently.
 * Return:    IBC_OK, or the first error of an operation that was still
 *            queued; for that last broadcast IBC_ERR_INVALID_USAGE (the
 *            ranks' calls differ), IBC_ERR_REMOTE (a rank left or exited
 *            without making it), IBC_ERR_TIMEOUT, or the communicator's
 *            error when it failed before the calls could be compared.
 */
IBC_API ibc_status_t ibc_comm_destroy(ibc_comm_h comm);

/**
 * ibc_comm_abort() - Tear a communicator down now, whatever the peers do.
 * @comm: [in] communicator; NULL is accepted and ignored.
 *
 * Wakes every thread blocked in an operation on @comm (they return
 * IBC_ERR_REMOTE), tells the peers it aborted (best effort, so that they
 * fail fast instead of timing out), and frees everything.
 * Requests still outstanding on @comm complete with the abort's error (or
 * the communicator's earlier one); ibc_wait() on them returns at once and
 * frees them.
 * Blocking:  returns within 1 s. Threading: may be called while another
 *            thread is blocked in a collective, ibc_wait() or
 *            ibc_comm_split() on @comm; @comm must not be used after it
 *            returns.
 * Return:    IBC_OK; IBC_ERR_INVALID_USAGE when @comm was destroyed or
 *            another thread is already aborting it.
 */
IBC_API ibc_status_t ibc_comm_abort(ibc_comm_h comm);

/* ---------------------------------------------------------------------- */
/* Surviving a dead rank: revoke, agree, shrink (docs/reliability.md).     */
/* The model is ULFM's MPI_Comm_revoke/agree/shrink. A rank is dead when   */
/* its process is gone (its sockets refuse or drop connections), or when   */
/* the liveness watchers declared it failed and it answers no probe.       */
/* ---------------------------------------------------------------------- */

/**
 * ibc_comm_revoke() - Make every rank's pending and later operations on
 *                     @comm fail at once with IBC_ERR_REVOKED.
 * @comm: [in] communicator, healthy or failed.
 *
 * Not collective: one rank calls it (typically after an operation failed
 * with IBC_ERR_REMOTE or IBC_ERR_TIMEOUT) and every peer that is alive
 * learns it directly from this rank, without the bootstrap root or rank 0,
 * so that no rank keeps waiting in a collective that cannot finish. A
 * status the communicator already had becomes IBC_ERR_REVOKED; its log
 * text keeps the first cause. ibc_comm_agree(), ibc_comm_shrink() and
 * ibc_comm_destroy() still work on a revoked communicator. Idempotent.
 * Blocking:  bounded, 2 s at most (500 ms per unreachable peer).
 * Threading: may be called while another thread is blocked in an
 *            operation on @comm; that operation returns IBC_ERR_REVOKED.
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (NULL @comm); IBC_ERR_INVALID_USAGE
 *            (@comm destroyed or unknown).
 */
IBC_API ibc_status_t ibc_comm_revoke(ibc_comm_h comm);

/**
 * ibc_comm_agree() - Fault-tolerant agreement on a flag and on the set of
 *                    dead ranks, among the ranks of @comm that are alive.
 * @comm:         [in]     communicator, healthy, failed or revoked.
 * @flag_p:       [in,out] this rank's 32-bit flag; on return the bitwise AND
 *                         of the flags of every rank agreed alive.
 * @failed_ranks: [out]    NULL, or room for size(@comm) ints: the ranks
 *                         agreed dead, ascending.
 * @nfailed_p:    [out]    NULL, or the number of ranks agreed dead.
 *
 * Collective over the live ranks of @comm, which call it in the same order
 * relative to their other ibc_comm_agree() and ibc_comm_shrink() calls on
 * @comm. Every rank that returns IBC_OK gets the same flag and set, also
 * when ranks die during the call (a rotating coordinator, the lowest live
 * rank; boot_ft.c). Uses only the bootstrap network, never the transports.
 * A rank that was stopped or too slow while the others agreed without it
 * gets the others' decision when it runs again, and IBC_ERR_REMOTE; a rank
 * that destroyed @comm counts as dead to the ranks still agreeing on it.
 * Blocking:  yes, bounded by IBC_TIMEOUT_MS.
 * Threading: not concurrently with another ibc_comm_agree() or
 *            ibc_comm_shrink() on @comm.
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (NULL @comm or @flag_p);
 *            IBC_ERR_INVALID_USAGE (@comm destroyed; or the ranks' calls
 *            differ: ibc_comm_agree() on some, ibc_comm_shrink() on others);
 *            IBC_ERR_TIMEOUT (a rank neither answered nor was found dead in
 *            time; the log names it); IBC_ERR_REMOTE (the others agreed that
 *            this rank is dead); IBC_ERR_NO_MEMORY.
 */
IBC_API ibc_status_t ibc_comm_agree(ibc_comm_h comm, uint32_t *flag_p, int *failed_ranks,
				    int *nfailed_p);

/**
 * ibc_comm_shrink() - A new communicator of the ranks of @comm that are
 *                     alive, in their old order, without a new unique id.
 * @comm:      [in]  communicator, healthy, failed or revoked; it stays
 *                   valid (destroy it when done).
 * @newcomm_p: [out] the new communicator, written only on success: rank =
 *                   the number of live ranks below this one in @comm.
 *
 * Collective over the live ranks of @comm (ordered with ibc_comm_agree()):
 * an agreement on who is alive that also carries each survivor's new
 * bootstrap address, then the new communicator's set-up (transports, tuner)
 * as for any communicator; rank 0 of the new communicator logs the ranks
 * left out and the times at INFO. Rank 0 of @comm may be among the dead.
 * Blocking:  yes, bounded by IBC_TIMEOUT_MS (agreement) plus
 *            IBC_BOOTSTRAP_TIMEOUT_MS (set-up).
 * Threading: as ibc_comm_agree().
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (NULL @comm or @newcomm_p); the errors of
 *            ibc_comm_agree(); those of ibc_comm_init_rank() for the set-up
 *            (a survivor that dies during it: IBC_ERR_REMOTE; shrink again).
 */
IBC_API ibc_status_t ibc_comm_shrink(ibc_comm_h comm, ibc_comm_h *newcomm_p);

/**
 * ibc_comm_grow_id() - The unique id of a larger communicator that the
 *                      ranks of @comm and processes started later join.
 * @comm: [in]  communicator, healthy (a shrunk one, typically).
 * @id:   [out] the id, the same on every rank of @comm: give it to the
 *              processes that join (a file, a key-value store); like any
 *              unique id it carries @comm's secret, so treat it as one.
 *
 * Collective over @comm. Rank 0 of @comm starts the bootstrap root of the
 * new communicator; then every rank of @comm and every joining process
 * calls ibc_comm_grow() with @id within IBC_BOOTSTRAP_TIMEOUT_MS.
 * Blocking:  bounded by IBC_BOOTSTRAP_TIMEOUT_MS. Threading: as ibc_comm_split().
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (NULL @comm or @id); IBC_ERR_INVALID_USAGE
 *            (@comm destroyed or failed); IBC_ERR_REMOTE; IBC_ERR_TIMEOUT;
 *            IBC_ERR_SYSTEM (no socket for the root).
 */
IBC_API ibc_status_t ibc_comm_grow_id(ibc_comm_h comm, ibc_unique_id_t *id);

/**
 * ibc_comm_grow() - Join or create the larger communicator of @id.
 * @comm:      [in]  on the ranks of the communicator that grows: it (it
 *                   stays valid: destroy it when done); in a joining
 *                   process: NULL.
 * @nranks:    [in]  size of the new communicator, >= size(@comm).
 * @id:        [in]  from ibc_comm_grow_id() on @comm.
 * @rank:      [in]  -1 on the ranks of @comm, which keep their rank; in a
 *                   joining process its rank, size(@comm) <= @rank < @nranks
 *                   (each joiner a different one).
 * @newcomm_p: [out] the new communicator, written only on success.
 *
 * Collective over the ranks of @comm and the joining processes (NCCL
 * 2.27's ncclCommGrow is the model). The new communicator is set up as any
 * other (transports, tuner); the joiners' state (a model's parameters) is
 * the caller's to send, e.g. by ibc_broadcast() from rank 0.
 * Blocking:  bounded by IBC_BOOTSTRAP_TIMEOUT_MS (for every rank to join).
 * Threading: as ibc_comm_init_rank().
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (NULL @id or @newcomm_p, @nranks
 *            or @rank out of range); IBC_ERR_INVALID_USAGE (@comm destroyed
 *            or failed); the errors of ibc_comm_init_rank().
 */
IBC_API ibc_status_t ibc_comm_grow(ibc_comm_h comm, int nranks, const ibc_unique_id_t *id,
				   int rank, ibc_comm_h *newcomm_p);

/**
 * ibc_comm_rank() - This process's rank in @comm.
 * @comm:   [in]  communicator.
 * @rank_p: [out] rank, 0 <= rank < size.
 * Return:  IBC_OK; IBC_ERR_INVALID_ARG (NULL argument); IBC_ERR_INVALID_USAGE
 *          (@comm destroyed, aborted, or never created).
 */
IBC_API ibc_status_t ibc_comm_rank(ibc_comm_h comm, int *rank_p);

/**
 * ibc_comm_size() - Number of ranks in @comm.
 * @comm:   [in]  communicator.
 * @size_p: [out] number of ranks.
 * Return:  IBC_OK; IBC_ERR_INVALID_ARG (NULL argument); IBC_ERR_INVALID_USAGE
 *          (@comm destroyed, aborted, or never created).
 */
IBC_API ibc_status_t ibc_comm_size(ibc_comm_h comm, int *size_p);

/**
 * ibc_comm_transport() - Name of the transport @comm uses between hosts and
 * inside a host, e.g. "shm", "tcp", "ib" or "shm+ib".
 * @comm:   [in]  communicator.
 * @name_p: [out] static string owned by the library.
 * Return:  IBC_OK; IBC_ERR_INVALID_ARG (NULL argument); IBC_ERR_INVALID_USAGE
 *          (@comm destroyed, aborted, or never created).
 */
IBC_API ibc_status_t ibc_comm_transport(ibc_comm_h comm, const char **name_p);

/**
 * struct ibc_reg_stats - Memory registrations made by a communicator's
 * verbs (InfiniBand/RoCE) transport for user buffers and its own, counted
 * since the communicator was created. All zero when no peer uses verbs.
 * @registrations:   ibv_reg_mr calls that succeeded (each pins pages),
 *                   those of ibc_comm_register() and ibc_mem_alloc()
 *                   memory included.
 * @deregistrations: ibv_dereg_mr calls.
 * @hits:            buffers served by a registration already made.
 * @invalidations:   registrations dropped because their memory went away
 *                   (freed by the application, or the transport's own
 *                   buffer released).
 * @released:        of @invalidations, those whose memory the application
 *                   released (reported by the memory hooks, or by
 *                   ibc_mem_free()).
 * @evictions:       idle registrations released by the cache's policy
 *                   (IBC_IB_REG_CACHE_BYTES).
 * @memory_hooks:    1 when memory-release hooks (UCX's libucm) are in
 *                   force for this communicator's verbs transport, so idle
 *                   registrations are kept safely; 0 when registrations
 *                   are released after each operation, and always 0 when
 *                   no peer uses verbs (whatever `ibc_info --build` says of
 *                   the process).
 *
 * The counters end with the communicator; its verbs transport logs them
 * at INFO (subsystem IB) when it is destroyed.
 */
struct ibc_reg_stats {
	uint64_t registrations;
	uint64_t deregistrations;
	uint64_t hits;
	uint64_t invalidations;
	uint64_t released;
	uint64_t evictions;
	int memory_hooks;
	int reserved;
};

/**
 * ibc_comm_reg_stats() - Counters of memory registration on @comm, so that
 * a trainer (or a test) can see that steady-state steps register nothing.
 * @comm:    [in]  communicator.
 * @stats_p: [out] the counters (struct ibc_reg_stats).
 *
 * Blocking: no. Threading: any thread; the counters are read while the
 * communicator's progress thread may be updating them (each one is read
 * atomically, the set is not a snapshot of one instant).
 * Return:  IBC_OK; IBC_ERR_INVALID_ARG (NULL argument); IBC_ERR_INVALID_USAGE
 *          (@comm destroyed, aborted, or never created).
 */
IBC_API ibc_status_t ibc_comm_reg_stats(ibc_comm_h comm, struct ibc_reg_stats *stats_p);

/**
 * ibc_comm_register() - Register a host buffer with @comm's network
 * devices now and keep it registered until ibc_comm_deregister(), so that
 * collectives and point-to-point calls on any part of it never register
 * memory (never call ibv_reg_mr, which pins pages: milliseconds per
 * hundred MB on a real NIC). NCCL's ncclCommRegister() is the model.
 * @comm:     [in]  communicator.
 * @buf:      [in]  start of the buffer, host memory (device memory is not
 *                  supported yet).
 * @nbytes:   [in]  length in bytes, >= 1.
 * @handle_p: [out] the registration, for ibc_comm_deregister(); NULL on error.
 *
 * Over transports that do not register memory (tcp, shm) the handle holds
 * nothing and the call costs nothing (so the checks below that only the
 * device can make, such as unmapped memory, happen over verbs only). The
 * buffer must stay allocated until it is deregistered; freeing it first is
 * a usage error that verbs tolerates only with memory hooks (struct
 * ibc_reg_stats memory_hooks 1) or for ibc_mem_alloc() memory, whose
 * registrations are then dropped; without hooks the registration keeps
 * pointing at the old pages. Over verbs at most 4096 registrations kept
 * for reuse exist per process (IBC_ERR_NO_MEMORY beyond). Handles still
 * held at ibc_comm_destroy() are released.
 * Blocking: yes (the registration itself). Threading: any thread,
 * concurrently with operations on @comm.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL argument, @nbytes 0, a range
 *         that wraps past the end of the address space);
 *         IBC_ERR_INVALID_USAGE (@comm destroyed, aborted, inherited
 *         through fork(), or never created);
 *         IBC_ERR_UNSUPPORTED (CUDA device or managed memory);
 *         IBC_ERR_VERBS (registration failed: the log names the device and
 *         RLIMIT_MEMLOCK when that is the cause); IBC_ERR_NO_MEMORY.
 */
IBC_API ibc_status_t ibc_comm_register(ibc_comm_h comm, void *buf, size_t nbytes,
				       void **handle_p);

/**
 * ibc_comm_deregister() - Release a registration made by ibc_comm_register().
 * @comm:   [in] the communicator it was made with.
 * @handle: [in] the handle; invalid after the call.
 *
 * Operations in flight on the buffer keep their own reference; the pages
 * are unpinned when the last one completes (or, with memory hooks, when
 * the cache's policy releases the idle registration).
 * Blocking: no (deregistration may take microseconds). Threading: any thread.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL argument, or @handle is not a
 *         live registration of @comm); IBC_ERR_INVALID_USAGE (@comm
 *         destroyed, aborted, inherited through fork(), or never created).
 */
IBC_API ibc_status_t ibc_comm_deregister(ibc_comm_h comm, void *handle);

/**
 * ibc_mem_alloc() - Allocate host memory that every communicator's verbs
 * transport registers once, whole, on first use and keeps registered
 * until ibc_mem_free(), with or without memory hooks (NCCL's
 * ncclMemAlloc() is the model, for host memory).
 * @ptr_p:  [out] page-aligned memory, zero-filled; NULL on error.
 * @nbytes: [in]  bytes, 1 .. 2^46 (rounded up to whole pages).
 *
 * With IBC_MEM_SHARE=1 (the default) the pages come from a memfd mapped
 * MAP_SHARED, so that ranks of a communicator on this host can map each
 * other's: an all-reduce over shm whose buffers all lie in such memory
 * reduces straight between them (src/coll/shm_allreduce_cma.c), a single
 * copy at memory speed from 4 KiB up. Two consequences: the memory counts
 * as shared memory (Shmem in /proc/meminfo, not limited by /dev/shm's size),
 * and a child made by fork() shares it instead of getting a copy. Where a
 * memfd is refused, or with IBC_MEM_SHARE=0, it is private anonymous memory.
 *
 * Blocking: an mmap. Threading: any thread. At most 4096 live allocations
 * per process (shared with the library's own buffers).
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (NULL @ptr_p, @nbytes out of range);
 *         IBC_ERR_NO_MEMORY (mmap failed, or 4096 recorded allocations are live).
 */
IBC_API ibc_status_t ibc_mem_alloc(void **ptr_p, size_t nbytes);

/**
 * ibc_mem_free() - Free memory from ibc_mem_alloc(); its registrations are
 * marked stale before the memory is unmapped, so no later operation uses
 * the old pages (each communicator unpins them at its next operation, or
 * at destroy).
 * @ptr: [in] what ibc_mem_alloc() returned; NULL is ignored. No operation
 *       may be in flight on it: the call does not check, and an operation
 *       still reading or writing it fails or faults (wait first).
 * Blocking: an munmap. Threading: any thread.
 * Return: IBC_OK; IBC_ERR_INVALID_ARG (@ptr was not returned by
 *         ibc_mem_alloc(), or is freed already).
 */
IBC_API ibc_status_t ibc_mem_free(void *ptr);

/**
 * ibc_comm_get_async_error() - Error raised outside any call: a peer that
 * died, a failed nonblocking operation, an async verbs event.
 * @comm: [in]  communicator.
 * @st_p: [out] IBC_OK while healthy, else the error that poisoned @comm
 *              (ibc_last_error() then holds its text).
 * Blocking:  no. Threading: safe from any thread.
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (NULL argument); IBC_ERR_INVALID_USAGE
 *            (@comm destroyed, aborted, or never created).
 */
IBC_API ibc_status_t ibc_comm_get_async_error(ibc_comm_h comm, ibc_status_t *st_p);

/* ---------------------------------------------------------------------- */
/* Blocking collectives                                                    */
/*                                                                         */
/* Common rules: every rank of @comm calls the same collectives in the     */
/* same order with the same count, dtype, op and root (a mismatch is       */
/* detected and gives IBC_ERR_INVALID_USAGE). One call at a time per       */
/* communicator from the application's threads; different communicators    */
/* may be used concurrently. A blocking call first waits for nonblocking   */
/* operations issued earlier on @comm. Buffers: host or CUDA device        */
/* memory, must stay valid until return, no ownership transferred.         */
/* Errors common to all: IBC_ERR_INVALID_ARG (NULL buffer with count > 0,  */
/* bad dtype/op/root, NULL comm); IBC_ERR_INVALID_USAGE (destroyed or      */
/* poisoned communicator, mismatched calls); IBC_ERR_REMOTE (peer died or  */
/* reported an error: the log names it); IBC_ERR_TIMEOUT (a peer made no   */
/* progress for IBC_TIMEOUT_MS, default 600000 ms); IBC_ERR_SYSTEM;        */
/* IBC_ERR_VERBS; IBC_ERR_CUDA; IBC_ERR_NO_MEMORY.                          */
/* ---------------------------------------------------------------------- */

/**
 * ibc_allreduce() - Reduce @count elements across all ranks; all get the result.
 * @sendbuf: [in]  @count elements of @dtype.
 * @recvbuf: [out] @count elements of @dtype; may equal @sendbuf (in place).
 * @count:   number of ELEMENTS; 0 is legal.
 * @dtype:   element type.
 * @op:      reduction (IBC_AVG = SUM then one division by nranks).
 * @comm:    communicator.
 *
 * Algorithm: ring reduce-scatter + ring all-gather, chunked and pipelined
 *            (Patarasuk & Yuan 2009; NCCL's ring), 2(n-1) steps; other
 *            algorithms by IBC_ALGO (docs/algorithms.md).
 *            busbw = algbw * 2(n-1)/n.
 * bf16/fp16: partial sums are rounded to the dtype at each hop, unless
 *            IBC_ACCUM_FP32=1 keeps them in fp32 on the wire (rounded once).
 * Blocking:  returns when @recvbuf holds the final result on this rank.
 * Return:    IBC_OK or one of the common errors above.
 */
IBC_API ibc_status_t ibc_allreduce(const void *sendbuf, void *recvbuf, size_t count,
				   ibc_dtype_t dtype, ibc_redop_t op, ibc_comm_h comm);

/**
 * ibc_broadcast() - Copy @count elements from @root's @sendbuf to every rank's @recvbuf.
 * @sendbuf: [in]  @count elements, read on @root only (may be NULL elsewhere).
 * @recvbuf: [out] @count elements on every rank; on @root may equal @sendbuf.
 * @count:   number of ELEMENTS.
 * @dtype:   element type.
 * @root:    rank that holds the data, 0 <= @root < nranks.
 * @comm:    communicator.
 *
 * Algorithm: pipelined chain along the ring starting at @root (NCCL's ring
 *            broadcast); busbw = algbw. Where every rank shares one host
 *            over shm: up to 4 KiB through a shared segment in one step,
 *            from 64 KiB by single copy (non-roots read
 *            the root's buffer: mapped ibc_mem_alloc() memory, else
 *            cross-memory attach); docs/algorithms.md.
 * Return:    IBC_OK or one of the common errors above.
 */
IBC_API ibc_status_t ibc_broadcast(const void *sendbuf, void *recvbuf, size_t count,
				   ibc_dtype_t dtype, int root, ibc_comm_h comm);

/**
 * ibc_reduce() - Reduce @count elements across all ranks into @root's @recvbuf.
 * @sendbuf: [in]  @count elements on every rank.
 * @recvbuf: [out] @count elements, written on @root only (may be NULL elsewhere);
 *                 may equal @sendbuf.
 * @count:   number of ELEMENTS.
 * @dtype:   element type.
 * @op:      reduction.
 * @root:    rank receiving the result.
 * @comm:    communicator.
 *
 * Algorithm: pipelined chain along the ring ending at @root (NCCL's ring
 *            reduce); the reduction order is fixed: rank root+1 first, then
 *            around the ring; busbw = algbw.
 * Return:    IBC_OK or one of the common errors above.
 */
IBC_API ibc_status_t ibc_reduce(const void *sendbuf, void *recvbuf, size_t count,
				ibc_dtype_t dtype, ibc_redop_t op, int root, ibc_comm_h comm);

/**
 * ibc_allgather() - Gather @sendcount elements from every rank, in rank order, on every rank.
 * @sendbuf:   [in]  @sendcount elements; in place when it equals
 *                   @recvbuf + rank * @sendcount * elemsize (NCCL's convention).
 * @recvbuf:   [out] nranks * @sendcount elements; block r comes from rank r.
 * @sendcount: number of ELEMENTS each rank contributes.
 * @dtype:     element type.
 * @comm:      communicator.
 *
 * Algorithm: ring, n-1 steps; busbw = algbw * (n-1)/n where algbw uses the
 *            total output size nranks * @sendcount * elemsize (nccl-tests).
 *            Where every rank shares one host over shm: an output of up to
 *            16 KiB per rank through a shared segment in one step; from 64 KiB per
 *            rank by single copy (each rank reads its peers' inputs:
 *            mapped ibc_mem_alloc() memory, else cross-memory attach);
 *            docs/algorithms.md.
 * Return:    IBC_OK or one of the common errors above.
 */
IBC_API ibc_status_t ibc_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
				   ibc_dtype_t dtype, ibc_comm_h comm);

/**
 * ibc_reduce_scatter() - Reduce nranks * @recvcount elements across ranks;
 * rank r receives block r of the result.
 * @sendbuf:   [in]  nranks * @recvcount elements; in place when @recvbuf
 *                   equals @sendbuf + rank * @recvcount * elemsize.
 * @recvbuf:   [out] @recvcount elements.
 * @recvcount: number of ELEMENTS each rank receives.
 * @dtype:     element type.
 * @op:        reduction.
 * @comm:      communicator.
 *
 * Algorithm: ring, n-1 steps; busbw = algbw * (n-1)/n where algbw uses the
 *            total input size nranks * @recvcount * elemsize (nccl-tests).
 *            Where every rank shares one host over shm: an input of up to
 *            16 KiB per rank through a shared segment in one step; buffers that are
 *            all ibc_mem_alloc() memory by single copy; docs/algorithms.md.
 * Return:    IBC_OK or one of the common errors above.
 */
IBC_API ibc_status_t ibc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
					ibc_dtype_t dtype, ibc_redop_t op, ibc_comm_h comm);

/**
 * ibc_alltoall() - Rank r sends block p of @sendbuf to rank p, which stores it as block r.
 * @sendbuf: [in]  nranks * @count elements.
 * @recvbuf: [out] nranks * @count elements; must not overlap @sendbuf.
 * @count:   number of ELEMENTS per block (per peer).
 * @dtype:   element type.
 * @comm:    communicator.
 *
 * Algorithm: pairwise exchange, n-1 steps (step s: send to r+s, receive
 *            from r-s); busbw = algbw * (n-1)/n. Where every rank shares one
 *            host over shm: buffers of up to 16 KiB per rank through a
 *            shared segment in one step; from 64 KiB per block by single copy (each rank
 *            reads its block of every peer's input: mapped ibc_mem_alloc()
 *            memory, else cross-memory attach); docs/algorithms.md.
 * Return:    IBC_OK or one of the common errors above.
 */
IBC_API ibc_status_t ibc_alltoall(const void *sendbuf, void *recvbuf, size_t count,
				  ibc_dtype_t dtype, ibc_comm_h comm);

/**
 * ibc_send() - Send @count elements to @peer (matched in order with @peer's ibc_recv()).
 * @buf:   [in] @count elements.
 * @count: number of ELEMENTS; must equal the receiver's count.
 * @dtype: element type; must equal the receiver's dtype.
 * @peer:  destination rank, != this rank.
 * @comm:  communicator.
 *
 * Blocking:  returns when @buf may be reused (the data may still be in flight).
 * Return:    IBC_OK or one of the common errors above; IBC_ERR_INVALID_ARG
 *            for @peer out of range or equal to this rank.
 */
IBC_API ibc_status_t ibc_send(const void *buf, size_t count, ibc_dtype_t dtype, int peer,
			      ibc_comm_h comm);

/**
 * ibc_recv() - Receive @count elements from @peer (matched in order with @peer's ibc_send()).
 * @buf:   [out] @count elements.
 * @count: number of ELEMENTS; must equal the sender's count.
 * @dtype: element type.
 * @peer:  source rank, != this rank.
 * @comm:  communicator.
 *
 * Return: IBC_OK or one of the common errors above.
 */
IBC_API ibc_status_t ibc_recv(void *buf, size_t count, ibc_dtype_t dtype, int peer,
			      ibc_comm_h comm);

/**
 * ibc_gather() - Gather @sendcount elements from every rank, in rank order, on @root.
 * @sendbuf:   [in]  @sendcount elements on every rank; on @root, in place when it
 *                   equals @recvbuf + root * @sendcount * elemsize.
 * @recvbuf:   [out] nranks * @sendcount elements, written on @root only (may be NULL
 *                   elsewhere); block r comes from rank r.
 * @sendcount: number of ELEMENTS each rank contributes, the same on every rank.
 * @dtype:     element type.
 * @root:      rank that receives, 0 <= @root < nranks.
 * @comm:      communicator.
 *
 * Memory:    host buffers (device buffers: IBC_ERR_UNSUPPORTED).
 * Algorithm: direct: every rank sends its block to @root, which has all
 *            n-1 receives in flight at once (MPI's linear gather); busbw =
 *            algbw * (n-1)/n with algbw over nranks * @sendcount * elemsize.
 * Return:    IBC_OK or one of the common errors above.
 */
IBC_API ibc_status_t ibc_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
				ibc_dtype_t dtype, int root, ibc_comm_h comm);

/**
 * ibc_scatter() - @root sends block r of its @sendbuf to rank r.
 * @sendbuf:   [in]  nranks * @recvcount elements, read on @root only (may be NULL
 *                   elsewhere).
 * @recvbuf:   [out] @recvcount elements on every rank; on @root, in place when it
 *                   equals @sendbuf + root * @recvcount * elemsize.
 * @recvcount: number of ELEMENTS each rank receives, the same on every rank.
 * @dtype:     element type.
 * @root:      rank that sends, 0 <= @root < nranks.
 * @comm:      communicator.
 *
 * Memory:    host buffers (device buffers: IBC_ERR_UNSUPPORTED).
 * Algorithm: direct: @root has its n-1 sends in flight at once (the mirror
 *            of ibc_gather()); busbw = algbw * (n-1)/n with algbw over
 *            nranks * @recvcount * elemsize.
 * Return:    IBC_OK or one of the common errors above.
 */
IBC_API ibc_status_t ibc_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
				 ibc_dtype_t dtype, int root, ibc_comm_h comm);

/**
 * ibc_allgatherv() - All-gather with a count per rank (MPI_Allgatherv): rank r's
 * @sendcount elements land at element offset @rdispls[r] of every rank's @recvbuf.
 * @sendbuf:    [in]  @sendcount elements; in place when it equals
 *                    @recvbuf + @rdispls[rank] * elemsize.
 * @recvbuf:    [out] the blocks at @rdispls; elements outside them are not written.
 * @sendcount:  number of ELEMENTS this rank contributes; must equal @recvcounts[rank].
 * @recvcounts: [in]  nranks counts (ELEMENTS), the same on every rank; 0 is allowed.
 * @rdispls:    [in]  nranks element offsets into @recvbuf; blocks must not overlap.
 * @dtype:      element type.
 * @comm:       communicator.
 *
 * The arrays are copied before the call returns (the nonblocking variant too).
 * Memory:    host buffers (device buffers: IBC_ERR_UNSUPPORTED).
 * Algorithm: ring, n-1 steps, each block forwarded whole.
 * Return:    IBC_OK or one of the common errors above; IBC_ERR_INVALID_ARG
 *            when @sendcount differs from @recvcounts[rank] or blocks
 *            overlap; IBC_ERR_INVALID_USAGE when ranks pass different
 *            @recvcounts (detected as a mismatch of the messages' sizes).
 */
IBC_API ibc_status_t ibc_allgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
				    const size_t *recvcounts, const size_t *rdispls,
				    ibc_dtype_t dtype, ibc_comm_h comm);

/**
 * ibc_alltoallv() - All-to-all with counts and offsets per peer (MPI_Alltoallv): rank
 * r sends @sendcounts[p] elements at element offset @sdispls[p] of @sendbuf to rank p,
 * which stores them at element offset @rdispls[r] of its @recvbuf.
 * @sendbuf:    [in]  the blocks for every peer (this rank's own is copied locally).
 * @recvbuf:    [out] the blocks from every peer; must not overlap @sendbuf.
 * @sendcounts: [in]  nranks counts (ELEMENTS); @sendcounts[p] on rank r must equal
 *                    @recvcounts[r] on rank p; 0 skips the transfer.
 * @sdispls:    [in]  nranks element offsets into @sendbuf.
 * @recvcounts: [in]  nranks counts (ELEMENTS).
 * @rdispls:    [in]  nranks element offsets into @recvbuf; blocks must not overlap.
 * @dtype:      element type.
 * @comm:       communicator.
 *
 * The arrays are copied before the call returns (the nonblocking variant too).
 * Memory:    host buffers (device buffers: IBC_ERR_UNSUPPORTED).
 * Algorithm: pairwise exchange as ibc_alltoall() (step s: send to r+s,
 *            receive from r-s), n-1 steps.
 * Return:    IBC_OK or one of the common errors above; IBC_ERR_INVALID_USAGE
 *            when a pair's counts disagree (both ranks fail, naming the
 *            peer).
 */
IBC_API ibc_status_t ibc_alltoallv(const void *sendbuf, void *recvbuf,
				   const size_t *sendcounts, const size_t *sdispls,
				   const size_t *recvcounts, const size_t *rdispls,
				   ibc_dtype_t dtype, ibc_comm_h comm);

/**
 * ibc_barrier() - Return only after every rank of @comm has entered the barrier.
 * @comm: communicator.
 *
 * Algorithm: dissemination barrier (Hensgen, Finkel & Manber 1988),
 *            ceil(log2 n) rounds; where every rank shares one host over
 *            shm, one arrival and one wait in a shared segment
 *            (docs/algorithms.md).
 * Return:    IBC_OK or one of the common errors above.
 */
IBC_API ibc_status_t ibc_barrier(ibc_comm_h comm);

/* ---------------------------------------------------------------------- */
/* Nonblocking collectives                                                 */
/*                                                                         */
/* Each ibc_i<name>() takes the arguments of ibc_<name>() and returns a    */
/* request in *@req_p (written only on success). Operations on one         */
/* communicator run one after another in issue order, driven by the        */
/* communicator's progress thread (IBC_PROGRESS_THREAD=1, default) so      */
/* that they overlap the caller's computation; with IBC_PROGRESS_THREAD=0  */
/* they run inside ibc_test()/ibc_wait(). Buffers must stay untouched      */
/* until the request completes. Up to IBC_MAX_REQUESTS (default 1024) may  */
/* be outstanding per communicator, a request counting from its ibc_i*()   */
/* call until ibc_wait() returns it (program order, so every rank refuses  */
/* the same call); beyond, IBC_ERR_LIMIT: nothing issued, still usable.    */
/* Errors at issue time: the argument errors above; errors during the      */
/* operation are returned by ibc_test()/ibc_wait().                        */
/* ---------------------------------------------------------------------- */

/** ibc_iallreduce() - Nonblocking ibc_allreduce(); see the block comment above. */
IBC_API ibc_status_t ibc_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
				    ibc_dtype_t dtype, ibc_redop_t op, ibc_comm_h comm,
				    ibc_request_h *req_p);
/** ibc_ibroadcast() - Nonblocking ibc_broadcast(). */
IBC_API ibc_status_t ibc_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
				    ibc_dtype_t dtype, int root, ibc_comm_h comm,
				    ibc_request_h *req_p);
/** ibc_ireduce() - Nonblocking ibc_reduce(). */
IBC_API ibc_status_t ibc_ireduce(const void *sendbuf, void *recvbuf, size_t count,
				 ibc_dtype_t dtype, ibc_redop_t op, int root, ibc_comm_h comm,
				 ibc_request_h *req_p);
/** ibc_iallgather() - Nonblocking ibc_allgather(). */
IBC_API ibc_status_t ibc_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
				    ibc_dtype_t dtype, ibc_comm_h comm, ibc_request_h *req_p);
/** ibc_ireduce_scatter() - Nonblocking ibc_reduce_scatter(). */
IBC_API ibc_status_t ibc_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
					 ibc_dtype_t dtype, ibc_redop_t op, ibc_comm_h comm,
					 ibc_request_h *req_p);
/** ibc_ialltoall() - Nonblocking ibc_alltoall(). */
IBC_API ibc_status_t ibc_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
				   ibc_dtype_t dtype, ibc_comm_h comm, ibc_request_h *req_p);
/** ibc_isend() - Nonblocking ibc_send(). */
IBC_API ibc_status_t ibc_isend(const void *buf, size_t count, ibc_dtype_t dtype, int peer,
			       ibc_comm_h comm, ibc_request_h *req_p);
/** ibc_irecv() - Nonblocking ibc_recv(). */
IBC_API ibc_status_t ibc_irecv(void *buf, size_t count, ibc_dtype_t dtype, int peer,
			       ibc_comm_h comm, ibc_request_h *req_p);
/** ibc_ibarrier() - Nonblocking ibc_barrier(). */
IBC_API ibc_status_t ibc_ibarrier(ibc_comm_h comm, ibc_request_h *req_p);
/** ibc_igather() - Nonblocking ibc_gather(). */
IBC_API ibc_status_t ibc_igather(const void *sendbuf, void *recvbuf, size_t sendcount,
				 ibc_dtype_t dtype, int root, ibc_comm_h comm,
				 ibc_request_h *req_p);
/** ibc_iscatter() - Nonblocking ibc_scatter(). */
IBC_API ibc_status_t ibc_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount,
				  ibc_dtype_t dtype, int root, ibc_comm_h comm,
				  ibc_request_h *req_p);
/** ibc_iallgatherv() - Nonblocking ibc_allgatherv(); the arrays are copied at issue. */
IBC_API ibc_status_t ibc_iallgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
				     const size_t *recvcounts, const size_t *rdispls,
				     ibc_dtype_t dtype, ibc_comm_h comm, ibc_request_h *req_p);
/** ibc_ialltoallv() - Nonblocking ibc_alltoallv(); the arrays are copied at issue. */
IBC_API ibc_status_t ibc_ialltoallv(const void *sendbuf, void *recvbuf,
				    const size_t *sendcounts, const size_t *sdispls,
				    const size_t *recvcounts, const size_t *rdispls,
				    ibc_dtype_t dtype, ibc_comm_h comm, ibc_request_h *req_p);

#define IBC_ANY_SOURCE (-1)   /* ibc_irecv_tag(): match a message from any rank */
#define IBC_TAG_MAX 0x7fffffff

/**
 * ibc_isend_tag() - Nonblocking send of @count elements to @peer, with a tag.
 * @buf:   [in] @count elements; untouched until the request completes.
 * @count: number of ELEMENTS; must equal the matching receive's count.
 * @dtype: element type; must equal the matching receive's dtype.
 * @peer:  destination rank, != this rank.
 * @tag:   0 <= @tag <= IBC_TAG_MAX.
 * @comm:  communicator.
 * @req_p: [out] the request, written only on success.
 *
 * Matching: a receive takes the oldest unmatched tagged send from its source
 * (or from any rank, IBC_ANY_SOURCE) with the same tag (MPI's non-overtaking
 * rule per source and tag). Each tagged send announces itself with a small
 * envelope through the communicator's out-of-band connections, so a
 * receiver can match by tag and source; the data then moves over the
 * pair's transport. Tagged operations run in issue order with the
 * communicator's other operations, like ibc_isend() (consecutive sends and
 * receives are in flight together); between one pair of ranks, do not mix
 * them with untagged ibc_isend()/ibc_irecv() while either kind is still
 * unmatched (the untagged ones match in order and would take the tagged
 * data: mismatched calls). Host buffers only.
 * Memory:    a message that arrives before its receive is posted, or whose
 *            tag is received later, waits in a buffer of its size.
 * Return:    IBC_OK at issue, or an argument error; the request's status
 *            from ibc_wait(): IBC_OK, IBC_ERR_INVALID_USAGE (the matched
 *            receive's count or dtype differ: both sides fail), or one of
 *            the common errors.
 */
IBC_API ibc_status_t ibc_isend_tag(const void *buf, size_t count, ibc_dtype_t dtype,
				   int peer, int tag, ibc_comm_h comm, ibc_request_h *req_p);

/**
 * ibc_irecv_tag() - Nonblocking receive with a tag, from @peer or from any rank.
 * @buf:      [out] @count elements.
 * @count:    number of ELEMENTS; must equal the matched send's count.
 * @dtype:    element type.
 * @peer:     source rank (!= this rank), or IBC_ANY_SOURCE.
 * @tag:      0 <= @tag <= IBC_TAG_MAX.
 * @source_p: [out] may be NULL: the rank whose send matched, written before the
 *            request completes (valid once ibc_test() reports done or ibc_wait()
 *            returned IBC_OK); must stay valid until then.
 * @comm:     communicator.
 * @req_p:    [out] the request, written only on success.
 *
 * Matching as in ibc_isend_tag(); an IBC_ANY_SOURCE receive takes the first
 * matching envelope to arrive. A receive that nothing matches fails after
 * IBC_TIMEOUT_MS with IBC_ERR_TIMEOUT.
 * Return:    as ibc_isend_tag().
 */
IBC_API ibc_status_t ibc_irecv_tag(void *buf, size_t count, ibc_dtype_t dtype, int peer,
				   int tag, int *source_p, ibc_comm_h comm,
				   ibc_request_h *req_p);

/**
 * ibc_group_start() - Start collecting point-to-point operations on @comm.
 * @comm: communicator.
 *
 * Until ibc_group_end(), ibc_isend(), ibc_irecv(), ibc_isend_tag() and
 * ibc_irecv_tag() on @comm by this thread are queued, each returning its
 * request; ibc_group_end() issues them as one batch in which all are in
 * flight together, so any set of sends and receives matched among the ranks
 * completes whatever their order on each rank (NCCL's ncclGroupStart/End,
 * per communicator). Any other call on @comm in between (collectives,
 * blocking p2p, a nested ibc_group_start) fails with IBC_ERR_INVALID_USAGE;
 * waiting on a grouped request before ibc_group_end() is refused the same
 * way.
 * Threading: one group at a time per communicator.
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (NULL comm); IBC_ERR_INVALID_USAGE
 *            (already in a group; destroyed or failed comm).
 */
IBC_API ibc_status_t ibc_group_start(ibc_comm_h comm);

/**
 * ibc_group_end() - Issue the operations collected since ibc_group_start().
 * @comm: communicator.
 *
 * Blocking: no; the requests complete as their transfers do.
 * Return:    IBC_OK; IBC_ERR_INVALID_USAGE (no group started, or the
 *            communicator failed: then every collected request completes
 *            with its error).
 */
IBC_API ibc_status_t ibc_group_end(ibc_comm_h comm);

/**
 * ibc_comm_set_timeout() - The wait bound of @comm, in place of IBC_TIMEOUT_MS.
 * @comm:       communicator.
 * @timeout_ms: 100 .. 86400000 (IBC_TIMEOUT_MS's range); same meaning: a wait in
 *              which no peer makes progress for this long fails with IBC_ERR_TIMEOUT.
 *
 * Applies to waits that start after the call; per rank (ranks may differ).
 * Threading: safe from any thread.
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (out of range, NULL comm);
 *            IBC_ERR_INVALID_USAGE (destroyed or aborted comm).
 */
IBC_API ibc_status_t ibc_comm_set_timeout(ibc_comm_h comm, int64_t timeout_ms);

/**
 * ibc_test() - Ask whether a nonblocking operation has finished.
 * @req:    [in]  request from an ibc_i*() call, not yet passed to ibc_wait().
 * @done_p: [out] 1 when finished (successfully or not), else 0.
 *
 * Does not free @req: call ibc_wait() afterwards to collect its status and
 * release it (it then returns at once).
 * Blocking:  no, with the progress thread (default); with
 *            IBC_PROGRESS_THREAD=0 it runs queued operations up to and
 *            including @req to completion in the calling thread.
 * Threading: one thread per request.
 * Return:    IBC_OK; IBC_ERR_INVALID_ARG (NULL argument).
 */
IBC_API ibc_status_t ibc_test(ibc_request_h req, int *done_p);

/**
 * ibc_wait() - Wait for a nonblocking operation, return its status, free @req.
 * @req: [in] request from an ibc_i*() call; invalid after this call.
 *
 * Blocking:  yes, bounded by IBC_TIMEOUT_MS.
 * Threading: one thread per request.
 * Return:    the operation's status: IBC_OK or one of the common errors
 *            above (the text is in ibc_last_error() of the waiting thread);
 *            IBC_ERR_INVALID_ARG for a NULL request.
 */
IBC_API ibc_status_t ibc_wait(ibc_request_h req);

/**
 * ibc_waitall() - ibc_wait() on @n requests; frees all of them.
 * @n:    number of requests.
 * @reqs: [in] @n requests; NULL entries are skipped.
 * Return: IBC_OK, or the first error in array order.
 */
IBC_API ibc_status_t ibc_waitall(int n, ibc_request_h *reqs);

#ifdef __cplusplus
}
#endif

#endif /* IBCOLL_H */
