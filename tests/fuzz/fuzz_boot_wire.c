/* SPDX-License-Identifier: MIT */
/*
 * fuzz_boot_wire.c - libFuzzer target over the bootstrap wire parsers
 * (src/boot/boot_wire.c), everything a stranger's bytes reach before and
 * after authentication: frame headers, HELLO, TABLE, NOTICE, FAIL, text
 * payloads, peer infos and the unique id.
 *
 * Input: byte 0 picks the table size a TABLE is parsed against
 * ((b & 7) + 1 ranks) and, with bit 7, decodes bytes 1..128 as a unique id;
 * the rest is a stream of frames (12-byte header, payload) dispatched by
 * type the way the service thread does, a truncated payload included.
 * Besides memory errors (ASan/UBSan), properties are checked and a
 * violation traps: a parsed HELLO, NOTICE, FAIL or unique id packs back to
 * the same fields; a header is accepted only with a length within its
 * type's maximum; parsed text is NUL-terminated and printable.
 *
 * Build and run: tests/fuzz/run_fuzz.sh (clang -fsanitize=fuzzer,address).
 */
#include "config.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "boot/boot_wire.h"

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond))                                                           \
			__builtin_trap();                                              \
	} while (0)

static void check_text(const char *t, size_t cap)
{
	size_t n = strnlen(t, cap);
	size_t i;

	CHECK(n < cap);
	for (i = 0; i < n; i++)
		CHECK(isprint((unsigned char)t[i]));
}

static void fuzz_hello(const uint8_t *p, size_t len)
{
	struct ibc_boot_hello h;
	struct ibc_boot_hello h2;
	uint8_t out[IBC_BOOT_HELLO_BYTES + IBC_BOOT_INFO_BYTES];
	size_t n;

	if (ibc_boot_parse_hello(p, len, &h) != 0)
		return;
	CHECK(h.src >= 0 && h.src < h.nranks && h.dst >= -1 && h.dst < h.nranks);
	CHECK(h.nranks >= 1 && h.nranks <= IBC_BOOT_MAX_RANKS);
	n = ibc_boot_pack_hello(&h, out, sizeof(out));
	CHECK(n == len);
	CHECK(ibc_boot_parse_hello(out, n, &h2) == 0);
	CHECK(h2.kind == h.kind && h2.tag == h.tag && h2.src == h.src && h2.dst == h.dst &&
	      h2.nranks == h.nranks && h2.has_info == h.has_info);
	CHECK(!memcmp(h2.mac, h.mac, sizeof(h.mac)) && !memcmp(h2.nonce_c, h.nonce_c, 16) &&
	      !memcmp(h2.comm_id, h.comm_id, 16));
	if (h.has_info) {
		check_text(h.info.host, sizeof(h.info.host));
		CHECK(!memcmp(&h2.info, &h.info, sizeof(h.info)));
	}
}

static void fuzz_table(const uint8_t *p, size_t len, int nranks)
{
	struct ibc_peer_info infos[8];
	uint8_t id[16];
	int i;

	if (ibc_boot_parse_table(p, len, nranks, id, infos) != 0)
		return;
	CHECK(len == ibc_boot_table_len(nranks));
	for (i = 0; i < nranks; i++) {
		CHECK(strnlen(infos[i].host, sizeof(infos[i].host)) < sizeof(infos[i].host));
		CHECK(strnlen(infos[i].boot_id, sizeof(infos[i].boot_id)) <
		      sizeof(infos[i].boot_id));
	}
}

static void fuzz_notice(const uint8_t *p, size_t len)
{
	struct ibc_boot_notice_msg m;
	struct ibc_boot_notice_msg m2;
	uint8_t out[IBC_BOOT_NOTICE_HDR_BYTES + IBC_BOOT_NOTICE_TEXT_MAX];
	size_t n;

	if (ibc_boot_parse_notice(p, len, &m) != 0)
		return;
	check_text(m.text, sizeof(m.text));
	CHECK(m.rank >= 0);
	n = ibc_boot_pack_notice(&m, out, sizeof(out));
	CHECK(n == len);
	CHECK(ibc_boot_parse_notice(out, n, &m2) == 0);
	CHECK(m2.kind == m.kind && m2.rank == m.rank && m2.status == m.status &&
	      !strcmp(m2.text, m.text));
}

static void fuzz_fail(const uint8_t *p, size_t len)
{
	char text[IBC_BOOT_TEXT_MAX];
	char text2[IBC_BOOT_TEXT_MAX];
	uint8_t out[4 + IBC_BOOT_TEXT_MAX];
	ibc_status_t st;
	ibc_status_t st2;
	size_t n;

	if (ibc_boot_parse_fail(p, len, &st, text, sizeof(text)) != 0)
		return;
	CHECK(st <= IBC_ERR_INVALID_ARG && st >= IBC_ERR_INTERNAL);
	check_text(text, sizeof(text));
	n = ibc_boot_pack_fail(st, text, out, sizeof(out));
	CHECK(ibc_boot_parse_fail(out, n, &st2, text2, sizeof(text2)) == 0);
	CHECK(st2 == st && !strcmp(text, text2));
}

static void fuzz_waitstate(const uint8_t *p, size_t len)
{
	struct ibc_boot_waitstate ws;
	struct ibc_boot_waitstate ws2;
	uint8_t out[IBC_BOOT_WAITSTATE_BYTES];

	if (ibc_boot_parse_waitstate(p, len, &ws) != 0)
		return;
	CHECK(ws.state < IBC_BOOT_WAIT_STATE_COUNT && ws.peer >= -1);
	CHECK((ws.state == IBC_BOOT_WAIT_PEER) == (ws.peer >= 0));
	ibc_boot_pack_waitstate(&ws, out);
	CHECK(ibc_boot_parse_waitstate(out, sizeof(out), &ws2) == 0);
	CHECK(!memcmp(&ws, &ws2, sizeof(ws)));
}

static void fuzz_uid(const uint8_t *p)
{
	struct ibc_boot_uid u;
	struct ibc_boot_uid u2;
	uint8_t out[IBC_UNIQUE_ID_BYTES];

	if (ibc_boot_uid_decode(p, &u) != 0)
		return;
	CHECK(u.port != 0);
	ibc_boot_uid_encode(&u, out);
	CHECK(ibc_boot_uid_decode(out, &u2) == 0);
	CHECK(!memcmp(&u, &u2, sizeof(u)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int nranks;
	size_t off = 1;

	if (size < 1)
		return 0;
	nranks = (data[0] & 7) + 1;
	if ((data[0] & 0x80) && size >= 1 + IBC_UNIQUE_ID_BYTES) {
		fuzz_uid(data + 1);
		off += IBC_UNIQUE_ID_BYTES;
	}
	while (off + IBC_BOOT_HDR_BYTES <= size) {
		struct ibc_boot_hdr h;
		const uint8_t *p;
		size_t avail;
		size_t len;
		char text[IBC_BOOT_TEXT_MAX];

		/* the service thread parses headers against its size or 0 (root) */
		if (ibc_boot_parse_hdr(data + off, (data[0] & 0x40) ? 0 : nranks, &h) != 0)
			return 0;
		CHECK(h.type > 0 && h.type < IBC_BOOT_TYPE_COUNT);
		CHECK(h.len <= ibc_boot_max_len(h.type, (data[0] & 0x40) ? 0 : nranks));
		off += IBC_BOOT_HDR_BYTES;
		avail = size - off;
		len = h.len < avail ? h.len : avail;
		p = data + off;
		switch (h.type) {
		case IBC_BOOT_HELLO:
			fuzz_hello(p, len);
			break;
		case IBC_BOOT_TABLE:
			fuzz_table(p, len, nranks);
			break;
		case IBC_BOOT_NOTICE:
			fuzz_notice(p, len);
			break;
		case IBC_BOOT_FAIL:
			fuzz_fail(p, len);
			break;
		case IBC_BOOT_WAITSTATE:
			fuzz_waitstate(p, len);
			break;
		case IBC_BOOT_REJECT:
			ibc_boot_parse_text(p, len, text, sizeof(text));
			check_text(text, sizeof(text));
			break;
		default:
			break;
		}
		if (len >= IBC_BOOT_INFO_BYTES) {
			struct ibc_peer_info pi;

			if (ibc_boot_unpack_info(p, &pi) == 0) {
				check_text(pi.host, sizeof(pi.host));
				check_text(pi.boot_id, sizeof(pi.boot_id));
			}
		}
		off += len;
	}
	return 0;
}
