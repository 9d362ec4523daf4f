/*
 * lib_rpc_hdr.c - the RPC headers as a hostile peer sends them
 * (lib/rpc_wire.c): a request as the server reads it, an answer header as
 * the client reads it, the accept reply as the client reads it.
 *
 * Input: one byte choosing the limits (window 1..256, req_inline and
 * slot size from small to default, direct or not), then the message.
 *
 * Asserts, for any bytes:
 *  - an accepted request names a slot inside the window, known flags, an
 *    inline body exactly as long as what came and within req_inline, a
 *    rendezvous body of 1..max_msg with no inline bytes, and a response
 *    capacity the slot (or max_msg, when direct) can hold; and it encodes
 *    back to the same header bytes;
 *  - the usual request's short path (rk__rpc_req_decode_usual) accepts
 *    exactly the requests the decoder accepts without flags, and gives the
 *    same fields;
 *  - an accepted answer has a known status, a length within the call's
 *    capacity and exactly what came in the slot, its data in the slot
 *    unless the call was direct, and data only when OK or an application
 *    error;
 *  - an accepted accept reply stays within what a server may grant (window,
 *    slot and request buffer, max_msg): the client sizes memory by them.
 */
#include <string.h>

#include "fuzz.h"
#include "rpc_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rk_rpc_limits lim;
	struct rk_rpc_req_hdr h, u;
	int full;
	struct rk_rpc_ans_hdr a;
	struct rk_rpc_accept acc;
	uint8_t again[RK_RPC_REQ_HDR];
	const char *why;
	int direct;

	if (size < 1)
		return 0;
	lim.window = 1u + (data[0] & 0xff);
	lim.req_inline = (data[0] & 1) ? 64 : 4044;
	lim.slot_size = (data[0] & 2) ? 76 : 4096;
	lim.max_msg = (data[0] & 4) ? 4096 : 64u << 20;
	direct = (data[0] & 8) != 0;
	data++;
	size--;

	full = rk__rpc_req_decode(data, size, &lim, &h, &why);
	memset(&u, 0, sizeof(u));
	if (rk__rpc_req_decode_usual(data, size, &lim, &u) == 0) {
		FUZZ_CHECK(full == 0 && h.flags == 0);
		FUZZ_CHECK(u.version == h.version && u.flags == 0 && u.method == h.method &&
			   u.slot == h.slot && u.gen == h.gen && u.req_len == h.req_len &&
			   u.resp_cap == h.resp_cap && u.slot_addr == h.slot_addr &&
			   u.slot_rkey == h.slot_rkey);
	} else {
		FUZZ_CHECK(full != 0 || h.flags != 0);
	}
	if (full == 0) {
		FUZZ_CHECK(h.slot < lim.window);
		FUZZ_CHECK((h.flags & ~RK_RPC_F_ALL) == 0);
		if (h.flags & RK_RPC_F_RDV) {
			FUZZ_CHECK(size == RK_RPC_REQ_HDR);
			FUZZ_CHECK(h.req_len >= 1 && h.req_len <= lim.max_msg);
		} else {
			FUZZ_CHECK(size == RK_RPC_REQ_HDR + h.req_len);
			FUZZ_CHECK(h.req_len <= lim.req_inline);
		}
		if (h.flags & RK_RPC_F_DIRECT)
			FUZZ_CHECK(h.resp_cap <= lim.max_msg);
		else
			FUZZ_CHECK(h.resp_cap <= lim.slot_size - RK_RPC_ANS_HDR);
		rk__rpc_req_encode(&h, again);
		FUZZ_CHECK(memcmp(again, data, RK_RPC_REQ_HDR) == 0);
	}
	if (size >= RK_RPC_ANS_HDR) {
		/* A direct call may accept more than the slot holds. */
		uint32_t byte_len = (uint32_t)size, room = lim.slot_size - RK_RPC_ANS_HDR,
			 cap = direct ? lim.max_msg : room;

		if (rk__rpc_ans_decode(data, byte_len, cap, room, direct, &a, &why) == 0) {
			FUZZ_CHECK(a.status <= RK_RPC_STATUS_MAX);
			FUZZ_CHECK(a.len <= cap);
			FUZZ_CHECK(!a.in_slot || a.len <= room);
			FUZZ_CHECK(byte_len == RK_RPC_ANS_HDR + (a.in_slot ? a.len : 0));
			FUZZ_CHECK(a.in_slot || direct);
			FUZZ_CHECK(!a.len || a.status == RK_RPC_OK || a.status == RK_RPC_APP_ERROR);
		}
	}
	if (rk__rpc_accept_decode(data, size, &acc) == 0) {
		FUZZ_CHECK(acc.window >= 1 && acc.window <= RK_RPC_WIRE_MAX_WINDOW);
		FUZZ_CHECK(acc.slot_size > RK_RPC_ANS_HDR && acc.slot_size <= RK_RPC_WIRE_MAX_BUF);
		FUZZ_CHECK(acc.req_inline + RK_RPC_REQ_HDR <= RK_RPC_WIRE_MAX_BUF);
		FUZZ_CHECK(acc.max_msg >= 1 && acc.max_msg <= RK_RPC_WIRE_MAX_MSG);
	}
	return 0;
}

static void emit_req(fuzz_emit_fn *emit, const char *name, uint8_t limits,
		     const struct rk_rpc_req_hdr *h, size_t body)
{
	uint8_t buf[1 + RK_RPC_REQ_HDR + 64] = {limits};

	rk__rpc_req_encode(h, buf + 1);
	memset(buf + 1 + RK_RPC_REQ_HDR, 'b', body);
	emit(name, buf, 1 + RK_RPC_REQ_HDR + body);
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct rk_rpc_req_hdr h = {.method = 1, .slot = 3, .gen = 9, .req_len = 16, .resp_cap = 64};
	struct rk_rpc_ans_hdr a = {.status = RK_RPC_OK, .in_slot = 1, .len = 8};
	struct rk_rpc_accept acc = {
	    .window = 64, .req_inline = 4044, .slot_size = 4096, .max_msg = 64u << 20};
	uint8_t buf[1 + RK_RPC_ANS_HDR + 8] = {0x10};
	uint8_t ab[1 + RK_RPC_ACCEPT_LEN] = {0x10};

	emit_req(emit, "request-inline", 0x10, &h, 16);
	h.flags = RK_RPC_F_RDV | RK_RPC_F_DIRECT;
	h.req_len = 1 << 20;
	h.resp_cap = 1 << 20;
	h.req_addr = 0x7f0000001000ull;
	h.resp_addr = 0x7f0000200000ull;
	emit_req(emit, "request-rendezvous", 0x10, &h, 0);
	rk__rpc_ans_encode(&a, buf + 1);
	memset(buf + 1 + RK_RPC_ANS_HDR, 'a', 8);
	emit("answer-inline", buf, sizeof(buf));
	a.status = RK_RPC_APP_ERROR;
	a.code = 42;
	a.len = 0;
	a.in_slot = 0;
	buf[0] = 0x18; /* direct */
	rk__rpc_ans_encode(&a, buf + 1);
	emit("answer-direct-error", buf, 1 + RK_RPC_ANS_HDR);
	rk__rpc_accept_encode(&acc, ab + 1);
	emit("accept", ab, sizeof(ab));
}
