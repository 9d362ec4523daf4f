/*
 * test_rpc_wire.c - the RPC headers (lib/rpc_wire.c): round trips, and
 * every truncated, oversized or garbage request and answer refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rpc_wire.h"

static const struct rk_rpc_limits lim = {
    .window = 64, .req_inline = 4044, .slot_size = 4096, .max_msg = 64u << 20};

static struct rk_rpc_req_hdr sample(void)
{
	return (struct rk_rpc_req_hdr){.method = 7,
				       .slot = 63,
				       .gen = 0xbeef,
				       .req_len = 5,
				       .resp_cap = 4084,
				       .slot_addr = 0x1122334455667788ull,
				       .slot_rkey = 0xabcdef01};
}

static void request_round_trip(void **state)
{
	struct rk_rpc_req_hdr h = sample(), d;
	uint8_t buf[RK_RPC_REQ_HDR + 5];
	const char *why = NULL;

	(void)state;
	rk__rpc_req_encode(&h, buf);
	memset(buf + RK_RPC_REQ_HDR, 'h', 5);
	assert_int_equal(rk__rpc_req_decode(buf, sizeof(buf), &lim, &d, &why), 0);
	assert_int_equal(d.version, RK_RPC_WIRE_VERSION);
	assert_int_equal(d.method, 7);
	assert_int_equal(d.slot, 63);
	assert_int_equal(d.gen, 0xbeef);
	assert_int_equal(d.req_len, 5);
	assert_int_equal(d.resp_cap, 4084);
	assert_true(d.slot_addr == h.slot_addr);
	assert_int_equal(d.slot_rkey, h.slot_rkey);

	/* Rendezvous both ways: no inline bytes, addresses carried. */
	h.flags = RK_RPC_F_RDV | RK_RPC_F_DIRECT;
	h.req_len = 64u << 20;
	h.resp_cap = 64u << 20;
	h.req_addr = 0xfeedull << 32;
	h.req_rkey = 9;
	h.resp_addr = 0xcafeull << 32;
	h.resp_rkey = 10;
	rk__rpc_req_encode(&h, buf);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR, &lim, &d, &why), 0);
	assert_true(d.req_addr == h.req_addr && d.resp_addr == h.resp_addr);
	assert_int_equal(d.req_rkey, 9);
	assert_int_equal(d.resp_rkey, 10);
}

static void request_refused(void **state)
{
	struct rk_rpc_req_hdr h = sample(), d;
	uint8_t buf[RK_RPC_REQ_HDR + 8];
	const char *why = NULL;

	(void)state;
	rk__rpc_req_encode(&h, buf);
	/* Truncated: every length below the header. */
	for (size_t n = 0; n < RK_RPC_REQ_HDR; n++)
		assert_int_equal(rk__rpc_req_decode(buf, n, &lim, &d, &why), -EBADMSG);
	/* Says 5 bytes, brings 0, 4 or 6. */
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR, &lim, &d, &why), -EBADMSG);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR + 4, &lim, &d, &why), -EBADMSG);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR + 6, &lim, &d, &why), -EBADMSG);
	assert_non_null(why);

	h = sample();
	h.slot = 64; /* the window is 64 */
	rk__rpc_req_encode(&h, buf);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR + 5, &lim, &d, &why), -ERANGE);

	h = sample();
	h.flags = 0x80; /* unknown flag */
	rk__rpc_req_encode(&h, buf);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR + 5, &lim, &d, &why), -EBADMSG);

	h = sample();
	h.version = 2;
	rk__rpc_req_encode(&h, buf);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR + 5, &lim, &d, &why), -EBADMSG);

	h = sample();
	h.req_len = lim.req_inline + 1; /* inline beyond the receive buffer */
	rk__rpc_req_encode(&h, buf);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR + 5, &lim, &d, &why), -EMSGSIZE);

	h = sample();
	h.resp_cap = lim.slot_size - RK_RPC_ANS_HDR + 1; /* beyond the slot, not direct */
	rk__rpc_req_encode(&h, buf);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR + 5, &lim, &d, &why), -EMSGSIZE);

	h = sample();
	h.flags = RK_RPC_F_RDV;
	h.req_len = lim.max_msg + 1;
	rk__rpc_req_encode(&h, buf);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR, &lim, &d, &why), -EMSGSIZE);
	h.req_len = 0; /* a rendezvous of nothing */
	rk__rpc_req_encode(&h, buf);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR, &lim, &d, &why), -EMSGSIZE);
	h.req_len = 10; /* and inline bytes with it */
	rk__rpc_req_encode(&h, buf);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR + 8, &lim, &d, &why), -EBADMSG);

	h = sample();
	h.flags = RK_RPC_F_DIRECT;
	h.resp_cap = lim.max_msg + 1;
	rk__rpc_req_encode(&h, buf);
	assert_int_equal(rk__rpc_req_decode(buf, RK_RPC_REQ_HDR + 5, &lim, &d, &why), -EMSGSIZE);

	memset(buf, 0xff, sizeof(buf));
	assert_int_not_equal(rk__rpc_req_decode(buf, sizeof(buf), &lim, &d, &why), 0);
}

static void answers(void **state)
{
	struct rk_rpc_ans_hdr a = {.status = RK_RPC_OK, .in_slot = 1, .code = -5, .len = 100}, d;
	uint8_t buf[RK_RPC_ANS_HDR];
	const char *why = NULL;

	(void)state;
	rk__rpc_ans_encode(&a, buf);
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR + 100, 100, 100, 0, &d, &why), 0);
	assert_int_equal(d.code, -5);
	assert_int_equal(d.len, 100);
	assert_true(d.in_slot);
	/* A direct call may get it in the slot too (small answers: one write). */
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR + 100, 100, 100, 1, &d, &why), 0);
	/* Direct: the data went to the caller's buffer, only the header came. */
	a.in_slot = 0;
	rk__rpc_ans_encode(&a, buf);
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR, 100, 100, 1, &d, &why), 0);
	assert_false(d.in_slot);
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR + 100, 100, 100, 1, &d, &why),
			 -EBADMSG);
	/*
	 * A direct call accepts more than the slot holds: data said to be in
	 * the slot must still fit it (a hostile server could otherwise make
	 * the client read past its slots, byte_len made to match by writing
	 * the answer into the call's own buffer).
	 */
	a.in_slot = 1;
	a.len = 101;
	rk__rpc_ans_encode(&a, buf);
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR + 101, 1000, 100, 1, &d, &why),
			 -EBADMSG);
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR + 101, 1000, 101, 1, &d, &why), 0);
	a.in_slot = 0;
	a.len = 100;
	rk__rpc_ans_encode(&a, buf);
	/* ... but a call that gave no buffer must get its data in the slot. */
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR, 100, 100, 0, &d, &why), -EBADMSG);
	a.in_slot = 1;
	rk__rpc_ans_encode(&a, buf);
	/* Longer than the call accepts. */
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR + 100, 99, 100, 0, &d, &why),
			 -EBADMSG);
	/* A length that is not what came. */
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR + 99, 100, 100, 0, &d, &why),
			 -EBADMSG);
	/* Truncated. */
	for (uint32_t n = 0; n < RK_RPC_ANS_HDR; n++)
		assert_int_equal(rk__rpc_ans_decode(buf, n, 100, 100, 0, &d, &why), -EBADMSG);
	/* An unknown status; data with a failure status. */
	a.status = RK_RPC_STATUS_MAX + 1;
	rk__rpc_ans_encode(&a, buf);
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR + 100, 100, 100, 0, &d, &why),
			 -EBADMSG);
	a.status = RK_RPC_NO_METHOD;
	rk__rpc_ans_encode(&a, buf);
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR + 100, 100, 100, 0, &d, &why),
			 -EBADMSG);
	a.len = 0;
	rk__rpc_ans_encode(&a, buf);
	assert_int_equal(rk__rpc_ans_decode(buf, RK_RPC_ANS_HDR, 100, 100, 0, &d, &why), 0);
	assert_int_equal(rk__rpc_status_errno(d.status), -EOPNOTSUPP);
	assert_int_equal(rk__rpc_status_errno(RK_RPC_APP_ERROR), -EREMOTEIO);
	assert_int_equal(rk__rpc_status_errno(RK_RPC_TOO_BIG), -EMSGSIZE);
	assert_int_equal(rk__rpc_status_errno(RK_RPC_NO_ROOM), -ENOBUFS);
}

static void accept_reply(void **state)
{
	struct rk_rpc_accept a = {.window = 32,
				  .req_inline = 100,
				  .slot_size = 4096,
				  .max_msg = 1 << 20},
			     d;
	uint8_t buf[RK_RPC_ACCEPT_LEN + 4] = {0};

	(void)state;
	rk__rpc_accept_encode(&a, buf);
	assert_int_equal(rk__rpc_accept_decode(buf, sizeof(buf), &d), 0);
	assert_int_equal(d.window, 32);
	assert_int_equal(d.slot_size, 4096);
	assert_int_equal(rk__rpc_accept_decode(buf, RK_RPC_ACCEPT_LEN - 1, &d), -EBADMSG);
	assert_int_equal(rk__rpc_accept_decode(NULL, 0, &d), -EBADMSG);
	a.slot_size = RK_RPC_ANS_HDR; /* no room for data */
	rk__rpc_accept_encode(&a, buf);
	assert_int_equal(rk__rpc_accept_decode(buf, sizeof(buf), &d), -EBADMSG);
	/* A hostile server's sizes: the client would wrap or register gigabytes. */
	a.slot_size = 4096;
	a.req_inline = 0xffffffe0u;
	rk__rpc_accept_encode(&a, buf);
	assert_int_equal(rk__rpc_accept_decode(buf, sizeof(buf), &d), -EBADMSG);
	a.req_inline = 100;
	a.window = RK_RPC_WIRE_MAX_WINDOW + 1;
	rk__rpc_accept_encode(&a, buf);
	assert_int_equal(rk__rpc_accept_decode(buf, sizeof(buf), &d), -EBADMSG);
	a.window = 32;
	a.max_msg = RK_RPC_WIRE_MAX_MSG + 1;
	rk__rpc_accept_encode(&a, buf);
	assert_int_equal(rk__rpc_accept_decode(buf, sizeof(buf), &d), -EBADMSG);
	a.max_msg = 1 << 20;
	buf[0] ^= 1;
	assert_int_equal(rk__rpc_accept_decode(buf, sizeof(buf), &d), -EBADMSG);
}

/*
 * The usual request's short path (rk__rpc_req_decode_usual) against the
 * decoder at every edge of each field it checks: it accepts exactly what
 * the decoder accepts without flags, with the same fields, and refuses
 * the rest (other versions, any flag, the window's edge, a length one off
 * what came, req_inline and the slot one byte past).
 */
struct usual_case {
	uint8_t version, flags;
	uint16_t slot;
	uint32_t req_len, resp_cap;
	size_t came; /* body bytes that came */
};

static void usual_agrees(void **state)
{
	static const struct usual_case cases[] = {
	    {1, 0, 0, 0, 0, 0}, /* accepted from here ... */
	    {1, 0, 63, 5, 4084, 5},
	    {1, 0, 63, 4044, 4084, 4044}, /* ... to every limit */
	    {0, 0, 0, 0, 0, 0},		  /* refused from here on */
	    {2, 0, 0, 0, 0, 0},
	    {1, RK_RPC_F_RDV, 0, 5, 0, 0},
	    {1, RK_RPC_F_DIRECT, 0, 5, 4084, 5},
	    {1, RK_RPC_F_DIRECT, 0, 5, 8192, 5},
	    {1, 4, 0, 5, 0, 5},
	    {1, 0x80, 0, 5, 0, 5},
	    {1, 0, 64, 5, 0, 5},
	    {1, 0, 0xffff, 5, 0, 5},
	    {1, 0, 0, 5, 0, 4},
	    {1, 0, 0, 5, 0, 6},
	    {1, 0, 0, 4045, 0, 4045},
	    {1, 0, 0, 0, 4085, 0},
	    {1, 0, 0, 0, 0xffffffffu, 0},
	    {1, 0, 0, 0xffffffffu, 0, 0},
	};
	static uint8_t buf[RK_RPC_REQ_HDR + 4096];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct usual_case *k = &cases[i];
		struct rk_rpc_req_hdr h = sample(), d, u;
		const char *why = NULL;
		size_t len = RK_RPC_REQ_HDR + k->came;
		int full, usual;

		h.flags = k->flags;
		h.slot = k->slot;
		h.req_len = k->req_len;
		h.resp_cap = k->resp_cap;
		h.resp_addr = 0x99; /* what a DIRECT call would carry */
		rk__rpc_req_encode(&h, buf);
		buf[0] = k->version;
		memset(buf + RK_RPC_REQ_HDR, 'u', k->came);
		memset(&u, 0, sizeof(u));
		full = rk__rpc_req_decode(buf, len, &lim, &d, &why);
		usual = rk__rpc_req_decode_usual(buf, len, &lim, &u);
		assert_int_equal(usual == 0, i < 3);
		assert_int_equal(usual == 0, full == 0 && d.flags == 0);
		if (usual)
			continue;
		assert_int_equal(u.version, d.version);
		assert_int_equal(u.flags, 0);
		assert_int_equal(u.method, d.method);
		assert_int_equal(u.slot, d.slot);
		assert_int_equal(u.gen, d.gen);
		assert_int_equal(u.req_len, d.req_len);
		assert_int_equal(u.resp_cap, d.resp_cap);
		assert_true(u.slot_addr == d.slot_addr);
		assert_int_equal(u.slot_rkey, d.slot_rkey);
	}
	/* Shorter than the header: refused, whatever the bytes. */
	for (size_t n = 0; n < RK_RPC_REQ_HDR; n++) {
		struct rk_rpc_req_hdr u;

		assert_int_equal(rk__rpc_req_decode_usual(buf, n, &lim, &u), -1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(request_round_trip), cmocka_unit_test(request_refused),
	    cmocka_unit_test(usual_agrees),	  cmocka_unit_test(answers),
	    cmocka_unit_test(accept_reply),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
