/* SPDX-License-Identifier: MIT */
/*
 * msg_desc.c - the message descriptor every transport sends with each
 * message: its wire codec (base/wire.h) and the receiver's check, which
 * turns ranks that called different operations into a named error instead
 * of a hang.
 */
#include "config.h"

#include <stdio.h>

#include "base/coll_kind.h"
#include "base/status.h"
#include "base/wire.h"
#include "transport/transport.h"

void ibc_msg_desc_pack(const struct ibc_msg_desc *d, uint8_t out[IBC_MSG_DESC_WIRE_BYTES])
{
	ibc_wire_put32(out, d->seq);
	out[4] = d->coll;
	out[5] = d->dtype;
	out[6] = d->op;
	out[7] = d->flags;
	ibc_wire_put64(out + 8, d->count);
	ibc_wire_put32(out + 16, (uint32_t)d->root);
	ibc_wire_put32(out + 20, d->step);
	ibc_wire_put64(out + 24, d->reserved);
}

void ibc_msg_desc_unpack(const uint8_t in[IBC_MSG_DESC_WIRE_BYTES], struct ibc_msg_desc *d)
{
	d->seq = ibc_wire_get32(in);
	d->coll = in[4];
	d->dtype = in[5];
	d->op = in[6];
	d->flags = in[7];
	d->count = ibc_wire_get64(in + 8);
	d->root = (int32_t)ibc_wire_get32(in + 16);
	d->step = ibc_wire_get32(in + 20);
	d->reserved = ibc_wire_get64(in + 24);
}

void ibc_msg_desc_text(const struct ibc_msg_desc *d, size_t nbytes, char *buf, size_t len)
{
	int reduces = ibc_coll_reduces(d->coll);
	int n = snprintf(buf, len, "%s #%u count %llu %s%s%s root %d step 0x%x flags 0x%x (%zu bytes)",
			 ibc_coll_name(d->coll == IBC_COLL_RECV ? IBC_COLL_SEND : d->coll), d->seq,
			 (unsigned long long)d->count, ibc_dtype_name((ibc_dtype_t)d->dtype),
			 reduces ? " " : "", reduces ? ibc_redop_name((ibc_redop_t)d->op) : "",
			 d->root, d->step, d->flags, nbytes);

	if ((d->flags & IBC_DESC_F_INTERNAL) && n > 0 && (size_t)n < len)
		/* the tuner's exchange: name the user's call it belongs to */
		snprintf(buf + n, len - (size_t)n, " of the tuner's own exchanges for %s count %llu %s",
			 ibc_coll_name((int)(d->reserved >> 56)),
			 (unsigned long long)(d->reserved & 0xffffffffffffull),
			 ibc_dtype_name((ibc_dtype_t)((d->reserved >> 48) & 0xff)));
}

int ibc_msg_desc_mismatch(const struct ibc_msg_desc *mine, size_t my_nbytes,
			  const struct ibc_msg_desc *theirs, size_t their_nbytes, char *text,
			  size_t len)
{
	char a[300];
	char b[300];

	if (mine->seq == theirs->seq && mine->coll == theirs->coll &&
	    mine->dtype == theirs->dtype && mine->op == theirs->op &&
	    mine->count == theirs->count && mine->root == theirs->root &&
	    mine->flags == theirs->flags && mine->step == theirs->step &&
	    my_nbytes == their_nbytes)
		return 0;
	ibc_msg_desc_text(mine, my_nbytes, a, sizeof(a));
	ibc_msg_desc_text(theirs, their_nbytes, b, sizeof(b));
	snprintf(text, len, "mismatched calls: this rank expects %s, the peer sent %s", a, b);
	return 1;
}

ibc_status_t ibc_msg_desc_check(const struct ibc_tenv *env, int peer, const struct ibc_msg_desc *mine,
				size_t my_nbytes, const struct ibc_msg_desc *theirs,
				size_t their_nbytes)
{
	char text[768];

	if (!ibc_msg_desc_mismatch(mine, my_nbytes, theirs, their_nbytes, text, sizeof(text)))
		return IBC_OK;
	return ibc_tenv_fail(env, IBC_ERR_INVALID_USAGE, peer, "%s", text);
}
