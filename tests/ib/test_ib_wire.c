/* SPDX-License-Identifier: MIT */
/*
 * test_ib_wire.c - wire formats of the verbs transport: the connection
 * info exchanged through the bootstrap (round trip, version and range
 * checks) and the immediate data of RDMA WRITE WITH IMM. Pure.
 */
#include "config.h"

#include <stdlib.h>

#include "tap.h"
#include "transport/ib/ib.h"

/*
 * Send-queue accounting, and a late successful completion on a QP that
 * teardown already destroyed (a zombie connection whose drain timed out):
 * it must be ignored, not read the freed signal ring (audit 4).
 */
static void test_sq_retire(void)
{
	struct ibc_ib_qp qp;
	struct ibv_wc wc;
	int ring[5] = { 3, 2, 0, 0, 0 };

	memset(&qp, 0, sizeof(qp));
	qp.sq_depth = 4;
	qp.sig_batch = ring;
	qp.sig_tail = 2;
	qp.sq_inflight = 5;
	ibc_ib_qp_sq_retire(&qp);
	tap_is_int(qp.sq_inflight, 2, "retire: a signaled WR retires itself and 2 unsignaled");
	tap_is_int(qp.sig_head, 1, "retire: ring head advances");
	memset(&wc, 0, sizeof(wc));
	wc.status = IBV_WC_SUCCESS;
	wc.wr_id = ibc_ib_wr_id(&qp, IBC_IB_WR_QP);
	ibc_ib_conn_handle_wc(NULL, &wc);
	tap_is_int(qp.sq_inflight, 0, "completion through the dispatcher retires the next batch");
	tap_is_int(qp.sig_head, 2, "ring empty");
	ibc_ib_qp_sq_retire(&qp);
	tap_is_int(qp.sq_inflight, 0, "retire on an empty ring: no change");

	/* destroyed: ring freed (NULL), head and tail as they were left */
	qp.sig_batch = NULL;
	qp.sig_head = 0;
	qp.sig_tail = 3;
	qp.sq_inflight = 7;
	ibc_ib_conn_handle_wc(NULL, &wc);
	tap_is_int(qp.sq_inflight, 7, "late completion on a destroyed QP is ignored (no crash)");
	ibc_ib_qp_sq_retire(&qp);
	tap_is_int(qp.sig_head, 0, "destroyed QP: ring untouched");
}

int main(void)
{
	uint8_t buf[IBC_IB_CONN_INFO_WIRE_BYTES];
	struct ibc_ib_conn_info a;
	struct ibc_ib_conn_info b;
	uint32_t imm;
	int i;

	setenv("IBC_DEBUG", "NONE", 1);
	memset(&a, 0, sizeof(a));
	a.version = IBC_IB_CONN_INFO_VERSION;
	a.nqps = 3;
	a.depth = 16;
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
	a.active_mtu = IBV_MTU_4096;
	a.lid = 0x1234;
	a.port = 1;
	a.fifo_rkey = 0xdeadbeef;
	a.fifo_addr = 0x7f0012345678ull;
	a.conn_id = 42;
	strcpy(a.dev_name, "rxe0");
	for (i = 0; i < IBC_IB_MAX_QPS; i++) {
		a.qpn[i] = 0x11 + (uint32_t)i;
		a.psn[i] = 0xabcdef - (uint32_t)i;
	}
	for (i = 0; i < IBC_IB_GID_CLASS_COUNT; i++) {
		a.gids.index[i] = i % 2 ? -1 : i * 3;
		memset(a.gids.gid[i], 0xa0 + i, 16);
	}
	a.ll_addr = 0x7f00aabbcc00ull;
	a.ll_rkey = 0x12345678;
	a.ll_lines = 8 * 19;
	a.ll_max = 1024;
	a.eager_addr = 0x7f00ddeeff00ull;
	a.eager_rkey = 0x9abcdef0;
	a.eager_stride = 64 + 65536;
	a.eager_max = 65536;
	ibc_ib_conn_info_pack(&a, buf);
	tap_is_int(ibc_ib_conn_info_unpack(buf, &b), IBC_OK, "connection info round trip");
	tap_ok(!memcmp(&a, &b, sizeof(a)), "every field survives");
	tap_is_int(IBC_IB_CONN_INFO_WIRE_BYTES, 408, "wire size is 408 bytes (v3: eager slot fields)");
	tap_is_int(buf[360], 0x00, "LL ring address little-endian after the GIDs");
	tap_is_int(buf[361], 0xcc, "LL ring address byte 1");
	tap_is_int(buf[376], 0x00, "LL limit little-endian (1024 = 0x400)");
	tap_is_int(buf[377], 0x04, "LL limit byte 1");
	tap_is_int(buf[0], IBC_IB_CONN_INFO_VERSION, "little-endian version first");
	tap_is_int(buf[28], 0xef, "rkey little-endian");
	tap_is_int(buf[384], 0x00, "eager slots' address little-endian after the LL fields");
	tap_is_int(buf[385], 0xff, "eager slots' address byte 1");
	tap_is_int(buf[400], 0x00, "eager limit little-endian (65536 = 0x10000)");
	tap_is_int(buf[402], 0x01, "eager limit byte 2");

	a.version = 99;
	ibc_ib_conn_info_pack(&a, buf);
	tap_is_int(ibc_ib_conn_info_unpack(buf, &b), IBC_ERR_INVALID_USAGE, "other version refused");
	a.version = IBC_IB_CONN_INFO_VERSION;
	a.nqps = 0;
	ibc_ib_conn_info_pack(&a, buf);
	tap_is_int(ibc_ib_conn_info_unpack(buf, &b), IBC_ERR_INVALID_USAGE, "0 qps refused");
	a.nqps = 1;
	a.depth = 1000;
	ibc_ib_conn_info_pack(&a, buf);
	tap_is_int(ibc_ib_conn_info_unpack(buf, &b), IBC_ERR_INVALID_USAGE, "depth 1000 refused");
	a.depth = 4;
	a.active_mtu = 7;
	ibc_ib_conn_info_pack(&a, buf);
	tap_is_int(ibc_ib_conn_info_unpack(buf, &b), IBC_ERR_INVALID_USAGE, "bad mtu refused");
	a.active_mtu = IBV_MTU_1024;
	a.ll_lines = 8;         /* a 1024-byte message takes 19 lines */
	ibc_ib_conn_info_pack(&a, buf);
	tap_is_int(ibc_ib_conn_info_unpack(buf, &b), IBC_ERR_INVALID_USAGE,
		   "LL ring smaller than one message refused");
	a.ll_lines = 0;
	ibc_ib_conn_info_pack(&a, buf);
	tap_is_int(ibc_ib_conn_info_unpack(buf, &b), IBC_OK, "no LL ring (IBC_LL_MAX_BYTES=0) accepted");
	a.eager_stride = 64 + 1024;
	ibc_ib_conn_info_pack(&a, buf);
	tap_is_int(ibc_ib_conn_info_unpack(buf, &b), IBC_ERR_INVALID_USAGE,
		   "eager slots smaller than header + limit refused");
	a.eager_max = 0;
	ibc_ib_conn_info_pack(&a, buf);
	tap_is_int(ibc_ib_conn_info_unpack(buf, &b), IBC_OK, "no eager path (IBC_IB_EAGER_BYTES=0) accepted");

	imm = ibc_ib_imm_make(IBC_IB_IMM_DATA, 16, 255, 0x12345678u);
	tap_is_int(ibc_ib_imm_type(imm), IBC_IB_IMM_DATA, "imm type data");
	tap_is_int(ibc_ib_imm_nparts(imm), 16, "imm 16 parts");
	tap_is_int(ibc_ib_imm_slot(imm), 255, "imm slot 255");
	tap_is_int(ibc_ib_imm_seq(imm), 0x12345678u & 0x1ffff, "imm keeps 17 bits of seq");
	imm = ibc_ib_imm_make(IBC_IB_IMM_NACK, 1, 0, 7);
	tap_is_int(ibc_ib_imm_type(imm), IBC_IB_IMM_NACK, "imm type nack");
	tap_is_int(ibc_ib_imm_nparts(imm), 1, "imm 1 part");
	tap_is_int(ibc_ib_imm_slot(imm), 0, "imm slot 0");
	imm = ibc_ib_imm_make(IBC_IB_IMM_CTS, 1, 17, 3);
	tap_is_int(ibc_ib_imm_type(imm), IBC_IB_IMM_CTS, "imm type cts");
	tap_is_int(ibc_ib_imm_slot(imm), 17, "imm slot 17");
	imm = ibc_ib_imm_make(IBC_IB_IMM_EAGER, 1, 255, 0x1ffff);
	tap_ok(ibc_ib_imm_type(imm) == IBC_IB_IMM_EAGER && ibc_ib_imm_slot(imm) == 255 &&
	       ibc_ib_imm_seq(imm) == 0x1ffff && ibc_ib_imm_nparts(imm) == 1,
	       "imm type eager, slot 255, seq 0x1ffff, 1 part");
	imm = ibc_ib_imm_make(IBC_IB_IMM_RTS, 16, 3, 9);
	tap_ok(ibc_ib_imm_type(imm) == IBC_IB_IMM_RTS && ibc_ib_imm_nparts(imm) == 16 &&
	       ibc_ib_imm_slot(imm) == 3, "imm type rts keeps parts and slot");
	imm = ibc_ib_imm_credit(0xfedcba98u);
	tap_is_int(ibc_ib_imm_type(imm), IBC_IB_IMM_CREDIT, "imm type credit");
	tap_is_int(imm & IBC_IB_IMM_CREDIT_MASK, 0xfedcba98u & 0x1fffffff,
		   "credit keeps the low 29 bits of the consumed count");
	test_sq_retire();
	return tap_done();
}
