/* SPDX-License-Identifier: MIT */
/*
 * gen_corpus.c - writes the seed corpus of fuzz_boot_wire into the
 * directory given: one well-formed input per frame kind (and a few
 * sequences), in the input format described in fuzz_boot_wire.c. The
 * files are kept in the repository (tests/fuzz/corpus/boot_wire/);
 * regenerate them with `make fuzz-corpus` after a wire format change.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "boot/boot_wire.h"

static uint8_t buf[1 << 16];
static size_t blen;

static void start(uint8_t first)
{
	buf[0] = first;
	blen = 1;
}

static void frame(int type, const void *payload, size_t len)
{
	ibc_boot_put_hdr(buf + blen, type, (uint32_t)len);
	memcpy(buf + blen + IBC_BOOT_HDR_BYTES, payload, len);
	blen += IBC_BOOT_HDR_BYTES + len;
}

static void save(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, blen, f) != blen) {
		perror(path);
		exit(1);
	}
	fclose(f);
}

static void info(struct ibc_peer_info *pi, int r)
{
	memset(pi, 0, sizeof(*pi));
	snprintf(pi->host, sizeof(pi->host), "node%02d", r);
	snprintf(pi->boot_id, sizeof(pi->boot_id), "0f6b2c1e-aaaa-4bbb-8ccc-%012d", r);
	pi->pid = 1000u + (unsigned)r;
	pi->family = AF_INET;
	pi->port = (uint16_t)(40000 + r);
	pi->addr[0] = 10;
	pi->addr[3] = (uint8_t)r;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	uint8_t p[8192];
	struct ibc_boot_hello h;
	struct ibc_boot_notice_msg n;
	struct ibc_peer_info infos[4];
	struct ibc_boot_uid u;
	uint8_t secret[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
	uint8_t nonce[16] = { 0 };
	size_t len;
	int i;

	/* challenge */
	start(3);
	memset(p, 0, 4);
	p[0] = IBC_BOOT_VERSION;
	memset(p + 4, 0xab, 16);
	frame(IBC_BOOT_CHALLENGE, p, 20);
	save(dir, "challenge");

	/* join hello with info, and a msg hello */
	memset(&h, 0, sizeof(h));
	h.kind = IBC_BOOT_KIND_JOIN;
	h.src = 2;
	h.dst = -1;
	h.nranks = 4;
	h.has_info = 1;
	info(&h.info, 2);
	memset(h.nonce_c, 0x5a, 16);
	ibc_boot_mac_hello(secret, nonce, &h, h.mac);
	len = ibc_boot_pack_hello(&h, p, sizeof(p));
	start(0x43);
	frame(IBC_BOOT_HELLO, p, len);
	save(dir, "hello_join");
	h.kind = IBC_BOOT_KIND_MSG;
	h.has_info = 0;
	h.dst = 1;
	h.tag = 0x1001;
	len = ibc_boot_pack_hello(&h, p, sizeof(p));
	start(3);
	frame(IBC_BOOT_HELLO, p, len);
	ibc_boot_mac_welcome(secret, nonce, h.nonce_c, p);
	frame(IBC_BOOT_WELCOME, p, 32);
	save(dir, "hello_msg_welcome");

	/* table of 4 */
	for (i = 0; i < 4; i++)
		info(&infos[i], i);
	ibc_boot_pack_table(nonce, 4, infos, p);
	start(3);
	frame(IBC_BOOT_TABLE, p, ibc_boot_table_len(4));
	save(dir, "table4");

	/* notices: dead, error with text, bye; then pings */
	start(3);
	memset(&n, 0, sizeof(n));
	n.kind = IBC_BOOT_NOTICE_DEAD;
	n.rank = 3;
	n.status = IBC_ERR_REMOTE;
	snprintf(n.text, sizeof(n.text), "rank 3 (host node03) closed its bootstrap connection");
	len = ibc_boot_pack_notice(&n, p, sizeof(p));
	frame(IBC_BOOT_NOTICE, p, len);
	frame(IBC_BOOT_PING, p, 0);
	n.kind = IBC_BOOT_NOTICE_ERROR;
	n.status = IBC_ERR_INVALID_USAGE;
	snprintf(n.text, sizeof(n.text), "rank 3: allreduce #0: mismatched calls: count 1000 / count 1001");
	len = ibc_boot_pack_notice(&n, p, sizeof(p));
	frame(IBC_BOOT_NOTICE, p, len);
	n.kind = IBC_BOOT_NOTICE_BYE;
	n.status = IBC_OK;
	n.text[0] = '\0';
	len = ibc_boot_pack_notice(&n, p, sizeof(p));
	frame(IBC_BOOT_NOTICE, p, len);
	save(dir, "notices");

	/* fail and reject */
	start(3);
	len = ibc_boot_pack_fail(IBC_ERR_TIMEOUT, "1 of 4 ranks did not join within 60000 ms: 3", p,
				 sizeof(p));
	frame(IBC_BOOT_FAIL, p, len);
	frame(IBC_BOOT_REJECT, "authentication failed: wrong secret", 35);
	save(dir, "fail_reject");

	/* a wait-for query and its answer */
	start(3);
	h.kind = IBC_BOOT_KIND_WAITQ;
	h.dst = 1;
	len = ibc_boot_pack_hello(&h, p, sizeof(p));
	frame(IBC_BOOT_HELLO, p, len);
	{
		struct ibc_boot_waitstate ws = { IBC_BOOT_WAIT_PEER, 2, 7, 2950, 6, IBC_BOOT_WS_DONE, 12, 11 };

		ibc_boot_pack_waitstate(&ws, p);
		frame(IBC_BOOT_WAITSTATE, p, IBC_BOOT_WAITSTATE_BYTES);
	}
	save(dir, "waitq");

	/* tagged message */
	start(1);
	memset(p, 0, 64);
	p[0] = 1;
	frame(IBC_BOOT_MSG, p, 64);
	save(dir, "msg");

	/* unique id, then a hello */
	memset(&u, 0, sizeof(u));
	u.family = AF_INET;
	u.port = 29500;
	u.addr[0] = 127;
	u.addr[3] = 1;
	memcpy(u.secret, secret, 16);
	start(0x83);
	ibc_boot_uid_encode(&u, buf + 1);
	blen = 1 + IBC_UNIQUE_ID_BYTES;
	h.kind = IBC_BOOT_KIND_HUB;
	h.dst = 0;
	len = ibc_boot_pack_hello(&h, p, sizeof(p));
	frame(IBC_BOOT_HELLO, p, len);
	save(dir, "uid_hello");
	return 0;
}
