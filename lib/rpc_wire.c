/*
 * rpc_wire.c - encode and check the RPC headers (rpc_wire.h has the layout).
 */
#include <errno.h>
#include <string.h>

#include <rdmakit/wire.h>

#include "rpc_wire.h"

#define ACCEPT_MAGIC 0x524b5241u /* "RKRA" */

void rk__rpc_req_encode_slot(const struct rk_rpc_req_hdr *h, uint8_t *b)
{
	b[0] = h->version ? h->version : RK_RPC_WIRE_VERSION;
	rk_put16(b + 4, h->slot);
	rk_put64(b + 16, h->slot_addr);
	rk_put32(b + 24, h->slot_rkey);
}

void rk__rpc_req_encode_call(const struct rk_rpc_req_hdr *h, uint8_t *b)
{
	b[1] = h->flags;
	rk_put16(b + 2, h->method);
	rk_put16(b + 6, h->gen);
	rk_put32(b + 8, h->req_len);
	rk_put32(b + 12, h->resp_cap);
}

void rk__rpc_req_encode_far(const struct rk_rpc_req_hdr *h, uint8_t *b)
{
	rk_put32(b + 28, h->resp_rkey);
	rk_put64(b + 32, h->resp_addr);
	rk_put64(b + 40, h->req_addr);
	rk_put32(b + 48, h->req_rkey);
}

void rk__rpc_req_encode(const struct rk_rpc_req_hdr *h, uint8_t *b)
{
	rk__rpc_req_encode_slot(h, b);
	rk__rpc_req_encode_call(h, b);
	rk__rpc_req_encode_far(h, b);
}

static int bad(const char **why, const char *what, int e)
{
	if (why)
		*why = what;
	return e;
}

int rk__rpc_req_decode(const uint8_t *b, size_t len, const struct rk_rpc_limits *lim,
		       struct rk_rpc_req_hdr *h, const char **why)
{
	if (len < RK_RPC_REQ_HDR)
		return bad(why, "request shorter than its header", -EBADMSG);
	h->version = b[0];
	h->flags = b[1];
	h->method = rk_get16(b + 2);
	h->slot = rk_get16(b + 4);
	h->gen = rk_get16(b + 6);
	h->req_len = rk_get32(b + 8);
	h->resp_cap = rk_get32(b + 12);
	h->slot_addr = rk_get64(b + 16);
	h->slot_rkey = rk_get32(b + 24);
	h->resp_rkey = rk_get32(b + 28);
	h->resp_addr = rk_get64(b + 32);
	h->req_addr = rk_get64(b + 40);
	h->req_rkey = rk_get32(b + 48);
	if (h->version != RK_RPC_WIRE_VERSION)
		return bad(why, "another wire version", -EBADMSG);
	if (h->flags & ~RK_RPC_F_ALL)
		return bad(why, "unknown flags", -EBADMSG);
	if (h->slot >= lim->window)
		return bad(why, "a slot beyond the window", -ERANGE);
	if (h->flags & RK_RPC_F_RDV) {
		if (len != RK_RPC_REQ_HDR)
			return bad(why, "inline bytes with a rendezvous body", -EBADMSG);
		if (h->req_len == 0 || h->req_len > lim->max_msg)
			return bad(why, "a rendezvous body beyond max_msg", -EMSGSIZE);
	} else {
		if (h->req_len > lim->req_inline)
			return bad(why, "an inline body beyond req_inline", -EMSGSIZE);
		if (len - RK_RPC_REQ_HDR != h->req_len)
			return bad(why, "an inline length that is not what came", -EBADMSG);
	}
	if (h->flags & RK_RPC_F_DIRECT) {
		if (h->resp_cap > lim->max_msg)
			return bad(why, "a response capacity beyond max_msg", -EMSGSIZE);
	} else if (h->resp_cap > lim->slot_size - RK_RPC_ANS_HDR) {
		return bad(why, "a response capacity beyond the slot", -EMSGSIZE);
	}
	return 0;
}

void rk__rpc_ans_encode(const struct rk_rpc_ans_hdr *h, uint8_t *b)
{
	rk_put32(b, h->status | (h->in_slot ? RK_RPC_ANS_IN_SLOT : 0));
	rk_put32(b + 4, (uint32_t)h->code);
	rk_put32(b + 8, h->len);
}

int rk__rpc_ans_decode(const uint8_t *b, uint32_t byte_len, uint32_t resp_cap, uint32_t slot_room,
		       int direct, struct rk_rpc_ans_hdr *h, const char **why)
{
	if (byte_len < RK_RPC_ANS_HDR)
		return bad(why, "answer shorter than its header", -EBADMSG);
	h->status = rk_get32(b);
	h->code = (int32_t)rk_get32(b + 4);
	h->len = rk_get32(b + 8);
	h->in_slot = (h->status & RK_RPC_ANS_IN_SLOT) != 0;
	h->status &= ~RK_RPC_ANS_IN_SLOT;
	if (h->status > RK_RPC_STATUS_MAX)
		return bad(why, "unknown answer status", -EBADMSG);
	if (!direct && !h->in_slot)
		return bad(why, "data elsewhere for a call that gave no buffer", -EBADMSG);
	if (h->len > resp_cap)
		return bad(why, "an answer longer than the call accepts", -EBADMSG);
	if (h->in_slot && h->len > slot_room)
		return bad(why, "data in the slot longer than the slot", -EBADMSG);
	if (h->status != RK_RPC_OK && h->status != RK_RPC_APP_ERROR && h->len)
		return bad(why, "data with a failure status", -EBADMSG);
	if (byte_len != RK_RPC_ANS_HDR + (h->in_slot ? h->len : 0))
		return bad(why, "an inline length that is not what came", -EBADMSG);
	return 0;
}

void rk__rpc_accept_encode(const struct rk_rpc_accept *a, uint8_t *b)
{
	rk_put32(b, ACCEPT_MAGIC);
	rk_put32(b + 4, RK_RPC_WIRE_VERSION);
	rk_put32(b + 8, a->window);
	rk_put32(b + 12, a->req_inline);
	rk_put32(b + 16, a->slot_size);
	rk_put32(b + 20, a->max_msg);
}

int rk__rpc_accept_decode(const uint8_t *b, size_t len, struct rk_rpc_accept *a)
{
	if (!b || len < RK_RPC_ACCEPT_LEN || rk_get32(b) != ACCEPT_MAGIC ||
	    rk_get32(b + 4) != RK_RPC_WIRE_VERSION)
		return -EBADMSG;
	a->window = rk_get32(b + 8);
	a->req_inline = rk_get32(b + 12);
	a->slot_size = rk_get32(b + 16);
	a->max_msg = rk_get32(b + 20);
	/* The server's own limits (rpc_server.c): a reply beyond them is a lie. */
	if (!a->window || a->window > RK_RPC_WIRE_MAX_WINDOW || a->slot_size <= RK_RPC_ANS_HDR ||
	    a->slot_size > RK_RPC_WIRE_MAX_BUF ||
	    a->req_inline > RK_RPC_WIRE_MAX_BUF - RK_RPC_REQ_HDR || !a->max_msg ||
	    a->max_msg > RK_RPC_WIRE_MAX_MSG)
		return -EBADMSG;
	return 0;
}

int rk__rpc_status_errno(uint32_t status)
{
	switch (status) {
	case RK_RPC_OK:
		return 0;
	case RK_RPC_APP_ERROR:
		return -EREMOTEIO;
	case RK_RPC_NO_METHOD:
		return -EOPNOTSUPP;
	case RK_RPC_TOO_BIG:
		return -EMSGSIZE;
	case RK_RPC_NO_ROOM:
		return -ENOBUFS;
	default:
		return -EPROTO;
	}
}
