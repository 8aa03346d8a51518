/* SPDX-License-Identifier: MIT */
/*
 * boot_wire.h - the bootstrap wire format: frames, message codecs and the
 * HMAC-SHA256 proofs of the handshake. Pure functions over byte buffers, so
 * the parser can be fuzzed (tests/fuzz/) and unit-tested without sockets.
 *
 * Every frame: magic "IBCB" (u32 LE 0x42434249), type u16, reserved u16,
 * payload length u32, then the payload. Lengths are checked against a
 * per-type maximum BEFORE any buffer is allocated. Integers little-endian.
 *
 * Handshake (every TCP connection to a listener, root or rank):
 *   acceptor  -> CHALLENGE { version, nonce_a[16] }
 *   connector -> HELLO     { kind, tag, src, dst, nranks, comm_id[16], nonce_c[16],
 *                            mac = HMAC(secret, "ibcoll-hello-v1" | nonce_a | nonce_c |
 *                                       kind | tag | src | dst | nranks | comm_id | info) ,
 *                            [info: struct ibc_peer_info, JOIN only] }
 *   acceptor  -> WELCOME   { mac = HMAC(secret, "ibcoll-welcome-v1" | nonce_c | nonce_a) }
 *             or REJECT    { reason }
 * so each side proves knowledge of the secret without revealing it, and a
 * recorded HELLO cannot be replayed against a fresh nonce.
 *
 * After the handshake: the root answers a JOIN with TABLE, or with FAIL
 * { status i32, text } when the job cannot start (a rank did not arrive,
 * or one joined and died); hub connections carry PING and NOTICE
 * { kind u32, rank i32, status i32, text }; MSG connections carry
 * MSG { tag u32, payload }. A WAITQ connection (a wait-for query) gets one
 * WAITSTATE { state u32, peer i32, seq u32, idle_ms u32 } and is closed.
 */
#ifndef IBC_BOOT_WIRE_H
#define IBC_BOOT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "boot/bootstrap.h"
#include "ibcoll.h"

#define IBC_BOOT_MAGIC 0x42434249u
#define IBC_BOOT_VERSION 1u
#define IBC_BOOT_HDR_BYTES 12
#define IBC_BOOT_NONCE_BYTES 16
#define IBC_BOOT_MAC_BYTES 32
#define IBC_BOOT_COMMID_BYTES 16
#define IBC_BOOT_INFO_BYTES 128
#define IBC_BOOT_TEXT_MAX 1024
#define IBC_BOOT_MAX_RANKS (1 << 20)
#define IBC_BOOT_NOTICE_HDR_BYTES 12
#define IBC_BOOT_NOTICE_TEXT_MAX 768

enum ibc_boot_type {
	IBC_BOOT_CHALLENGE = 1,
	IBC_BOOT_HELLO = 2,
	IBC_BOOT_WELCOME = 3,
	IBC_BOOT_REJECT = 4,
	IBC_BOOT_TABLE = 5,
	IBC_BOOT_FAIL = 6,
	IBC_BOOT_MSG = 7,
	IBC_BOOT_PING = 8,
	IBC_BOOT_NOTICE = 9,
	IBC_BOOT_WAITSTATE = 10,
	IBC_BOOT_TYPE_COUNT
};

/* what a connection is for (HELLO kind) */
enum ibc_boot_kind {
	IBC_BOOT_KIND_JOIN = 1,         /* rank -> root */
	IBC_BOOT_KIND_MSG = 2,          /* tagged messages rank -> rank */
	IBC_BOOT_KIND_STREAM = 3,       /* a raw stream handed to a transport */
	IBC_BOOT_KIND_HUB = 4,          /* liveness: rank r > 0 -> rank 0 */
	IBC_BOOT_KIND_WAITQ = 5,        /* wait-for query: answered with WAITSTATE, closed */
};

#define IBC_BOOT_WAITSTATE_BYTES 40

/*
 * HELLO tag of a JOIN from a rank that cannot join (a local failure before it
 * reached the root): it is not counted as joined, and a FAIL frame with the
 * reason follows, which fails the bootstrap at once for every rank.
 */
#define IBC_BOOT_JOIN_TAG_FAILED 1u

/* NOTICE kinds, sent on hub connections */
enum ibc_boot_notice {
	IBC_BOOT_NOTICE_DEAD = 1,       /* rank closed its connection without goodbye */
	IBC_BOOT_NOTICE_STOPPED = 2,    /* rank sent no heartbeat for 5 intervals */
	IBC_BOOT_NOTICE_ABORT = 3,      /* rank called ibc_comm_abort() */
	IBC_BOOT_NOTICE_BYE = 4,        /* rank destroyed the communicator cleanly */
	IBC_BOOT_NOTICE_ERROR = 5,      /* rank's communicator failed: status and text */
};

struct ibc_boot_hdr {
	uint16_t type;
	uint32_t len;
};

struct ibc_boot_hello {
	uint16_t kind;
	uint32_t tag;
	int32_t src;
	int32_t dst;
	int32_t nranks;
	uint8_t comm_id[IBC_BOOT_COMMID_BYTES];
	uint8_t nonce_c[IBC_BOOT_NONCE_BYTES];
	uint8_t mac[IBC_BOOT_MAC_BYTES];
	int has_info;
	struct ibc_peer_info info;
};

struct ibc_boot_notice_msg {
	uint32_t kind;          /* enum ibc_boot_notice */
	int32_t rank;           /* the rank the notice is about */
	int32_t status;         /* ibc_status_t to report (an error), IBC_OK for BYE */
	char text[IBC_BOOT_NOTICE_TEXT_MAX]; /* NUL-terminated, printable */
};

#define IBC_BOOT_HELLO_FIELDS_BYTES 56 /* kind tag src dst nranks reserved comm_id nonce_c */
#define IBC_BOOT_HELLO_BYTES (IBC_BOOT_HELLO_FIELDS_BYTES + IBC_BOOT_MAC_BYTES)

/*
 * ibc_boot_max_len() - the largest payload a frame of @type may carry;
 * @nranks bounds TABLE frames (0: unknown yet -> IBC_BOOT_MAX_RANKS).
 */
size_t ibc_boot_max_len(int type, int nranks);

void ibc_boot_put_hdr(uint8_t out[IBC_BOOT_HDR_BYTES], int type, uint32_t len);
/* -1: bad magic, unknown type, or length above the type's maximum */
int ibc_boot_parse_hdr(const uint8_t in[IBC_BOOT_HDR_BYTES], int nranks, struct ibc_boot_hdr *h);

/* peer info: 128 bytes; unpack forces NUL-terminated printable strings and checks the family */
void ibc_boot_pack_info(const struct ibc_peer_info *pi, uint8_t out[IBC_BOOT_INFO_BYTES]);
int ibc_boot_unpack_info(const uint8_t in[IBC_BOOT_INFO_BYTES], struct ibc_peer_info *pi);

/* HELLO payload; pack returns the length; parse returns -1 when malformed */
size_t ibc_boot_pack_hello(const struct ibc_boot_hello *h, uint8_t *out, size_t out_len);
int ibc_boot_parse_hello(const uint8_t *in, size_t len, struct ibc_boot_hello *h);

/* TABLE payload: comm_id, nranks, nranks infos; parse checks nranks == @want_nranks */
size_t ibc_boot_table_len(int nranks);
void ibc_boot_pack_table(const uint8_t comm_id[16], int nranks, const struct ibc_peer_info *infos,
			 uint8_t *out);
int ibc_boot_parse_table(const uint8_t *in, size_t len, int want_nranks, uint8_t comm_id[16],
			 struct ibc_peer_info *infos);

/*
 * NOTICE payload. Parse returns -1 when malformed (short, unknown kind,
 * negative rank, or a status that is not an ibc_status_t error for kinds
 * that report one); the text is made printable.
 */
size_t ibc_boot_pack_notice(const struct ibc_boot_notice_msg *n, uint8_t *out, size_t out_len);
int ibc_boot_parse_notice(const uint8_t *in, size_t len, struct ibc_boot_notice_msg *n);

/*
 * WAITSTATE payload (struct ibc_boot_waitstate, bootstrap.h). Parse returns
 * -1 when the length is wrong, the state unknown, or the peer below -1.
 */
void ibc_boot_pack_waitstate(const struct ibc_boot_waitstate *ws,
			     uint8_t out[IBC_BOOT_WAITSTATE_BYTES]);
int ibc_boot_parse_waitstate(const uint8_t *in, size_t len, struct ibc_boot_waitstate *ws);

/* copy a text payload (REJECT) into a NUL-terminated printable string */
void ibc_boot_parse_text(const uint8_t *in, size_t len, char *out, size_t out_len);

/*
 * FAIL payload: the status every joined rank returns (IBC_ERR_TIMEOUT when
 * ranks did not arrive, IBC_ERR_REMOTE when one died) and the reason.
 * Pack returns the length (0 when @out_len is too small); parse returns -1
 * when shorter than 4 bytes or the status is not an error.
 */
size_t ibc_boot_pack_fail(ibc_status_t st, const char *text, uint8_t *out, size_t out_len);
int ibc_boot_parse_fail(const uint8_t *in, size_t len, ibc_status_t *st_p, char *text,
			size_t text_len);

/*
 * Unique id codec: 4-byte magic "IBC1", family u16, port u16, address[16],
 * secret[16], zero padding to IBC_UNIQUE_ID_BYTES. Parse returns -1 for a
 * wrong magic, an unknown family or port 0 (pure; fuzzed).
 */
void ibc_boot_uid_encode(const struct ibc_boot_uid *u, uint8_t out[IBC_UNIQUE_ID_BYTES]);
int ibc_boot_uid_decode(const uint8_t in[IBC_UNIQUE_ID_BYTES], struct ibc_boot_uid *u);

/* the two proofs of the handshake (HMAC-SHA256); 0 on success */
int ibc_boot_mac_hello(const uint8_t secret[IBC_BOOT_SECRET_BYTES],
		       const uint8_t nonce_a[IBC_BOOT_NONCE_BYTES], const struct ibc_boot_hello *h,
		       uint8_t mac[IBC_BOOT_MAC_BYTES]);
int ibc_boot_mac_welcome(const uint8_t secret[IBC_BOOT_SECRET_BYTES],
			 const uint8_t nonce_a[IBC_BOOT_NONCE_BYTES],
			 const uint8_t nonce_c[IBC_BOOT_NONCE_BYTES], uint8_t mac[IBC_BOOT_MAC_BYTES]);
/* constant-time compare; 1 when equal */
int ibc_boot_mac_equal(const uint8_t *a, const uint8_t *b);
/* derive a 16-byte id from arbitrary bytes (SHA-256 truncated) */
void ibc_boot_derive_id(const void *data, size_t nbytes, uint8_t out[16]);

#endif /* IBC_BOOT_WIRE_H */
