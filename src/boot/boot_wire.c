/* SPDX-License-Identifier: MIT */
/*
 * boot_wire.c - codecs and proofs of the bootstrap wire format (boot_wire.h).
 * No I/O, no allocation: every length is checked against the buffer given.
 */
#include "config.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <string.h>
#include <sys/socket.h>

#include "base/util.h"
#include "base/wire.h"
#include "boot/boot_wire.h"

size_t ibc_boot_max_len(int type, int nranks)
{
	switch (type) {
	case IBC_BOOT_CHALLENGE: return 4 + IBC_BOOT_NONCE_BYTES;
	case IBC_BOOT_HELLO:     return IBC_BOOT_HELLO_BYTES + IBC_BOOT_INFO_BYTES;
	case IBC_BOOT_WELCOME:   return IBC_BOOT_MAC_BYTES;
	case IBC_BOOT_REJECT:    return IBC_BOOT_TEXT_MAX;
	case IBC_BOOT_TABLE:
		return ibc_boot_table_len(nranks > 0 ? nranks : IBC_BOOT_MAX_RANKS);
	case IBC_BOOT_FAIL:      return 4 + IBC_BOOT_TEXT_MAX;
	case IBC_BOOT_MSG:       return 4 + IBC_BOOT_MAX_MSG_BYTES;
	case IBC_BOOT_PING:      return 0;
	case IBC_BOOT_NOTICE:    return IBC_BOOT_NOTICE_HDR_BYTES + IBC_BOOT_NOTICE_TEXT_MAX - 1;
	case IBC_BOOT_WAITSTATE: return IBC_BOOT_WAITSTATE_BYTES;
	default:                 return 0;
	}
}

void ibc_boot_put_hdr(uint8_t out[IBC_BOOT_HDR_BYTES], int type, uint32_t len)
{
	ibc_wire_put32(out, IBC_BOOT_MAGIC);
	ibc_wire_put16(out + 4, (uint16_t)type);
	ibc_wire_put16(out + 6, 0);
	ibc_wire_put32(out + 8, len);
}

int ibc_boot_parse_hdr(const uint8_t in[IBC_BOOT_HDR_BYTES], int nranks, struct ibc_boot_hdr *h)
{
	uint16_t type = ibc_wire_get16(in + 4);
	uint32_t len = ibc_wire_get32(in + 8);

	if (ibc_wire_get32(in) != IBC_BOOT_MAGIC || type == 0 || type >= IBC_BOOT_TYPE_COUNT)
		return -1;
	if (len > ibc_boot_max_len(type, nranks))
		return -1;
	h->type = type;
	h->len = len;
	return 0;
}

void ibc_boot_pack_info(const struct ibc_peer_info *pi, uint8_t out[IBC_BOOT_INFO_BYTES])
{
	memset(out, 0, IBC_BOOT_INFO_BYTES);
	memcpy(out, pi->host, IBC_BOOT_HOST_LEN);
	memcpy(out + 64, pi->boot_id, IBC_BOOT_BOOTID_LEN);
	ibc_wire_put32(out + 104, pi->pid);
	ibc_wire_put16(out + 108, pi->family);
	ibc_wire_put16(out + 110, pi->port);
	memcpy(out + 112, pi->addr, 16);
}

/* NUL-terminate and make printable: these strings end up in log lines */
static void sanitize(char *s, size_t cap)
{
	size_t i;

	s[cap - 1] = '\0';
	for (i = 0; s[i]; i++)
		if (!isprint((unsigned char)s[i]))
			s[i] = '?';
}

int ibc_boot_unpack_info(const uint8_t in[IBC_BOOT_INFO_BYTES], struct ibc_peer_info *pi)
{
	memcpy(pi->host, in, IBC_BOOT_HOST_LEN);
	sanitize(pi->host, IBC_BOOT_HOST_LEN);
	memcpy(pi->boot_id, in + 64, IBC_BOOT_BOOTID_LEN);
	sanitize(pi->boot_id, IBC_BOOT_BOOTID_LEN);
	pi->pid = ibc_wire_get32(in + 104);
	pi->family = ibc_wire_get16(in + 108);
	pi->port = ibc_wire_get16(in + 110);
	memcpy(pi->addr, in + 112, 16);
	if (pi->family != AF_INET && pi->family != AF_INET6)
		return -1;
	return 0;
}

static size_t hello_fields(const struct ibc_boot_hello *h, uint8_t *out)
{
	ibc_wire_put16(out, h->kind);
	ibc_wire_put16(out + 2, 0);
	ibc_wire_put32(out + 4, h->tag);
	ibc_wire_put32(out + 8, (uint32_t)h->src);
	ibc_wire_put32(out + 12, (uint32_t)h->dst);
	ibc_wire_put32(out + 16, (uint32_t)h->nranks);
	ibc_wire_put32(out + 20, 0);
	memcpy(out + 24, h->comm_id, 16);
	memcpy(out + 40, h->nonce_c, 16);
	return 56;
}

size_t ibc_boot_pack_hello(const struct ibc_boot_hello *h, uint8_t *out, size_t out_len)
{
	size_t n = IBC_BOOT_HELLO_BYTES + (h->has_info ? IBC_BOOT_INFO_BYTES : 0);

	if (out_len < n)
		return 0;
	hello_fields(h, out);
	memcpy(out + IBC_BOOT_HELLO_FIELDS_BYTES, h->mac, IBC_BOOT_MAC_BYTES);
	if (h->has_info)
		ibc_boot_pack_info(&h->info, out + IBC_BOOT_HELLO_BYTES);
	return n;
}

int ibc_boot_parse_hello(const uint8_t *in, size_t len, struct ibc_boot_hello *h)
{
	if (len != IBC_BOOT_HELLO_BYTES && len != IBC_BOOT_HELLO_BYTES + IBC_BOOT_INFO_BYTES)
		return -1;
	memset(h, 0, sizeof(*h));
	h->kind = ibc_wire_get16(in);
	h->tag = ibc_wire_get32(in + 4);
	h->src = (int32_t)ibc_wire_get32(in + 8);
	h->dst = (int32_t)ibc_wire_get32(in + 12);
	h->nranks = (int32_t)ibc_wire_get32(in + 16);
	memcpy(h->comm_id, in + 24, 16);
	memcpy(h->nonce_c, in + 40, 16);
	memcpy(h->mac, in + IBC_BOOT_HELLO_FIELDS_BYTES, IBC_BOOT_MAC_BYTES);
	if (h->kind < IBC_BOOT_KIND_JOIN || h->kind > IBC_BOOT_KIND_WAITQ)
		return -1;
	if (h->nranks < 1 || h->nranks > IBC_BOOT_MAX_RANKS || h->src < 0 || h->src >= h->nranks ||
	    h->dst < -1 || h->dst >= h->nranks)
		return -1;
	if (h->tag > IBC_BOOT_TAG_USER_MAX)
		return -1;
	if (len > IBC_BOOT_HELLO_BYTES) {
		h->has_info = 1;
		if (ibc_boot_unpack_info(in + IBC_BOOT_HELLO_BYTES, &h->info) != 0)
			return -1;
	}
	if ((h->kind == IBC_BOOT_KIND_JOIN) != (h->has_info != 0))
		return -1;
	return 0;
}

size_t ibc_boot_table_len(int nranks)
{
	return IBC_BOOT_COMMID_BYTES + 4 + (size_t)nranks * IBC_BOOT_INFO_BYTES;
}

void ibc_boot_pack_table(const uint8_t comm_id[16], int nranks, const struct ibc_peer_info *infos,
			 uint8_t *out)
{
	int i;

	memcpy(out, comm_id, 16);
	ibc_wire_put32(out + 16, (uint32_t)nranks);
	for (i = 0; i < nranks; i++)
		ibc_boot_pack_info(&infos[i], out + 20 + (size_t)i * IBC_BOOT_INFO_BYTES);
}

int ibc_boot_parse_table(const uint8_t *in, size_t len, int want_nranks, uint8_t comm_id[16],
			 struct ibc_peer_info *infos)
{
	int i;

	if (want_nranks < 1 || len != ibc_boot_table_len(want_nranks))
		return -1;
	if ((int)ibc_wire_get32(in + 16) != want_nranks)
		return -1;
	memcpy(comm_id, in, 16);
	for (i = 0; i < want_nranks; i++)
		if (ibc_boot_unpack_info(in + 20 + (size_t)i * IBC_BOOT_INFO_BYTES, &infos[i]) != 0)
			return -1;
	return 0;
}

size_t ibc_boot_pack_notice(const struct ibc_boot_notice_msg *n, uint8_t *out, size_t out_len)
{
	size_t tl = strnlen(n->text, sizeof(n->text) - 1);

	if (out_len < IBC_BOOT_NOTICE_HDR_BYTES + tl)
		return 0;
	ibc_wire_put32(out, n->kind);
	ibc_wire_put32(out + 4, (uint32_t)n->rank);
	ibc_wire_put32(out + 8, (uint32_t)n->status);
	memcpy(out + IBC_BOOT_NOTICE_HDR_BYTES, n->text, tl);
	return IBC_BOOT_NOTICE_HDR_BYTES + tl;
}

void ibc_boot_parse_text(const uint8_t *in, size_t len, char *out, size_t out_len)
{
	size_t i;
	size_t n;

	if (!out_len)
		return;
	n = IBC_MIN(len, out_len - 1);
	for (i = 0; i < n; i++)
		out[i] = isprint(in[i]) ? (char)in[i] : '?';
	out[n] = '\0';
}

/* an error status as ibc_status_t defines them */
static int is_error_status(int32_t st)
{
	return st <= IBC_ERR_INVALID_ARG && st >= IBC_ERR_INTERNAL;
}

int ibc_boot_parse_notice(const uint8_t *in, size_t len, struct ibc_boot_notice_msg *n)
{
	if (len < IBC_BOOT_NOTICE_HDR_BYTES ||
	    len > IBC_BOOT_NOTICE_HDR_BYTES + IBC_BOOT_NOTICE_TEXT_MAX - 1)
		return -1;
	n->kind = ibc_wire_get32(in);
	n->rank = (int32_t)ibc_wire_get32(in + 4);
	n->status = (int32_t)ibc_wire_get32(in + 8);
	if (n->kind < IBC_BOOT_NOTICE_DEAD || n->kind > IBC_BOOT_NOTICE_ERROR || n->rank < 0)
		return -1;
	if (n->kind == IBC_BOOT_NOTICE_BYE ? n->status != IBC_OK : !is_error_status(n->status))
		return -1;
	ibc_boot_parse_text(in + IBC_BOOT_NOTICE_HDR_BYTES, len - IBC_BOOT_NOTICE_HDR_BYTES, n->text,
			    sizeof(n->text));
	return 0;
}

void ibc_boot_pack_waitstate(const struct ibc_boot_waitstate *ws,
			     uint8_t out[IBC_BOOT_WAITSTATE_BYTES])
{
	ibc_wire_put32(out, ws->state);
	ibc_wire_put32(out + 4, (uint32_t)ws->peer);
	ibc_wire_put32(out + 8, ws->seq);
	ibc_wire_put32(out + 12, ws->idle_ms);
	ibc_wire_put32(out + 16, ws->done_seq);
	ibc_wire_put32(out + 20, ws->flags);
	ibc_wire_put64(out + 24, ws->sent);
	ibc_wire_put64(out + 32, ws->recvd);
}

int ibc_boot_parse_waitstate(const uint8_t *in, size_t len, struct ibc_boot_waitstate *ws)
{
	if (len != IBC_BOOT_WAITSTATE_BYTES)
		return -1;
	ws->state = ibc_wire_get32(in);
	ws->peer = (int32_t)ibc_wire_get32(in + 4);
	ws->seq = ibc_wire_get32(in + 8);
	ws->idle_ms = ibc_wire_get32(in + 12);
	ws->done_seq = ibc_wire_get32(in + 16);
	ws->flags = ibc_wire_get32(in + 20);
	ws->sent = ibc_wire_get64(in + 24);
	ws->recvd = ibc_wire_get64(in + 32);
	if (ws->state >= IBC_BOOT_WAIT_STATE_COUNT || ws->peer < -1 ||
	    (ws->state == IBC_BOOT_WAIT_PEER) != (ws->peer >= 0) ||
	    (ws->flags & ~(uint32_t)(IBC_BOOT_WS_DONE | IBC_BOOT_WS_CONNECTED)))
		return -1;
	return 0;
}

size_t ibc_boot_pack_fail(ibc_status_t st, const char *text, uint8_t *out, size_t out_len)
{
	size_t tl = strnlen(text, IBC_BOOT_TEXT_MAX);

	if (out_len < 4)
		return 0;
	tl = IBC_MIN(tl, out_len - 4);
	ibc_wire_put32(out, (uint32_t)(int32_t)st);
	memcpy(out + 4, text, tl);
	return 4 + tl;
}

int ibc_boot_parse_fail(const uint8_t *in, size_t len, ibc_status_t *st_p, char *text,
			size_t text_len)
{
	int32_t st;

	if (len < 4 || len > 4 + IBC_BOOT_TEXT_MAX)
		return -1;
	st = (int32_t)ibc_wire_get32(in);
	if (!is_error_status(st))
		return -1;
	*st_p = (ibc_status_t)st;
	ibc_boot_parse_text(in + 4, len - 4, text, text_len);
	return 0;
}

#define UID_MAGIC 0x31434249u /* "IBC1" */

void ibc_boot_uid_encode(const struct ibc_boot_uid *u, uint8_t out[IBC_UNIQUE_ID_BYTES])
{
	memset(out, 0, IBC_UNIQUE_ID_BYTES);
	ibc_wire_put32(out, UID_MAGIC);
	ibc_wire_put16(out + 4, u->family);
	ibc_wire_put16(out + 6, u->port);
	memcpy(out + 8, u->addr, 16);
	memcpy(out + 24, u->secret, IBC_BOOT_SECRET_BYTES);
}

int ibc_boot_uid_decode(const uint8_t in[IBC_UNIQUE_ID_BYTES], struct ibc_boot_uid *u)
{
	if (ibc_wire_get32(in) != UID_MAGIC)
		return -1;
	u->family = ibc_wire_get16(in + 4);
	u->port = ibc_wire_get16(in + 6);
	memcpy(u->addr, in + 8, 16);
	memcpy(u->secret, in + 24, IBC_BOOT_SECRET_BYTES);
	if ((u->family != AF_INET && u->family != AF_INET6) || !u->port)
		return -1;
	return 0;
}

static int hmac_sha256(const uint8_t *key, const uint8_t *data, size_t len, uint8_t *mac)
{
	unsigned int mac_len = 0;

	if (!HMAC(EVP_sha256(), key, IBC_BOOT_SECRET_BYTES, data, len, mac, &mac_len) ||
	    mac_len != IBC_BOOT_MAC_BYTES)
		return -1;
	return 0;
}

int ibc_boot_mac_hello(const uint8_t secret[IBC_BOOT_SECRET_BYTES],
		       const uint8_t nonce_a[IBC_BOOT_NONCE_BYTES], const struct ibc_boot_hello *h,
		       uint8_t mac[IBC_BOOT_MAC_BYTES])
{
	static const char label[] = "ibcoll-hello-v1";
	uint8_t buf[sizeof(label) + 16 + 56 + IBC_BOOT_INFO_BYTES];
	size_t n = 0;

	memcpy(buf, label, sizeof(label));
	n += sizeof(label);
	memcpy(buf + n, nonce_a, 16);
	n += 16;
	n += hello_fields(h, buf + n);
	if (h->has_info) {
		ibc_boot_pack_info(&h->info, buf + n);
		n += IBC_BOOT_INFO_BYTES;
	}
	return hmac_sha256(secret, buf, n, mac);
}

int ibc_boot_mac_welcome(const uint8_t secret[IBC_BOOT_SECRET_BYTES],
			 const uint8_t nonce_a[IBC_BOOT_NONCE_BYTES],
			 const uint8_t nonce_c[IBC_BOOT_NONCE_BYTES], uint8_t mac[IBC_BOOT_MAC_BYTES])
{
	static const char label[] = "ibcoll-welcome-v1";
	uint8_t buf[sizeof(label) + 32];

	memcpy(buf, label, sizeof(label));
	memcpy(buf + sizeof(label), nonce_c, 16);
	memcpy(buf + sizeof(label) + 16, nonce_a, 16);
	return hmac_sha256(secret, buf, sizeof(buf), mac);
}

int ibc_boot_mac_equal(const uint8_t *a, const uint8_t *b)
{
	return CRYPTO_memcmp(a, b, IBC_BOOT_MAC_BYTES) == 0;
}

void ibc_boot_derive_id(const void *data, size_t nbytes, uint8_t out[16])
{
	uint8_t md[SHA256_DIGEST_LENGTH];

	SHA256(data, nbytes, md);
	memcpy(out, md, 16);
}
