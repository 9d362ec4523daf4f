/*
 * rpc_wire.h - the RPC layer's headers on the wire, free of verbs so they
 * can be unit tested and fuzzed (rpc.h is the API; rpc_client.c and
 * rpc_server.c the two ends).
 *
 * Request (SEND from client to server), big-endian, RK_RPC_REQ_HDR bytes,
 * followed by the body when it is inline:
 *    0 u8  version (RK_RPC_WIRE_VERSION)
 *    1 u8  flags: RDV (the body is at req_addr / req_rkey for the server to
 *          READ), DIRECT (write the answer's data to resp_addr / resp_rkey)
 *    2 u16 method
 *    4 u16 slot       the call's response slot at the client (< window)
 *    6 u16 gen        the call's generation, echoed in the answer
 *    8 u32 req_len    body bytes
 *   12 u32 resp_cap   the most answer bytes the caller accepts
 *   16 u64 slot_addr  where the slot is, 24 u32 slot_rkey
 *   28 u32 resp_rkey, 32 u64 resp_addr   (DIRECT only, else 0)
 *   40 u64 req_addr,  48 u32 req_rkey    (RDV only, else 0)
 *
 * Answer: an RDMA WRITE WITH IMMEDIATE into the slot, immediate = slot << 16
 * | gen, the slot starting with RK_RPC_ANS_HDR bytes (u32 status, i32 the
 * handler's code, u32 len) and then the data, unless it went to resp_addr:
 * an answer that fits the slot comes in it even for a DIRECT call (one
 * write instead of two; status bit RK_RPC_ANS_IN_SLOT says so).
 *
 * Every address and key a request names is the client's own memory, reached
 * over the client's own QP: a lie hurts only the liar. What the server must
 * check is what it holds for the client: the slot (in the window, not
 * already held), the lengths (inline within the buffer, rendezvous within
 * max_msg) and the flags. What the client must check is the answer's slot,
 * generation, status and length against the call it made.
 */
#ifndef RK_RPC_WIRE_H
#define RK_RPC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/wire.h>

#define RK_RPC_WIRE_VERSION 1
#define RK_RPC_REQ_HDR	    52
#define RK_RPC_ANS_HDR	    12
#define RK_RPC_ACCEPT_LEN   24

/* Limits of every field a server may grant (what its options allow). */
#define RK_RPC_WIRE_MAX_WINDOW 1024	  /* RK_RPC_MAX_WINDOW */
#define RK_RPC_WIRE_MAX_BUF    (1u << 20) /* a receive buffer or a slot */
#define RK_RPC_WIRE_MAX_MSG    (1u << 30) /* max_msg */

#define RK_RPC_F_RDV	0x01u
#define RK_RPC_F_DIRECT 0x02u
#define RK_RPC_F_ALL	(RK_RPC_F_RDV | RK_RPC_F_DIRECT)

#define RK_RPC_ANS_IN_SLOT 0x100u /* answer status bit: the data is in the slot */

/* The answer's status. */
enum rk_rpc_status {
	RK_RPC_OK = 0,
	RK_RPC_APP_ERROR = 1, /* the handler answered a non-zero code */
	RK_RPC_NO_METHOD = 2,
	RK_RPC_TOO_BIG = 3, /* the answer exceeded resp_cap, or the request max_msg */
	RK_RPC_NO_ROOM = 4, /* no rendezvous memory at the server right now */
	RK_RPC_STATUS_MAX = RK_RPC_NO_ROOM,
};

struct rk_rpc_req_hdr {
	uint8_t version, flags;
	uint16_t method, slot, gen;
	uint32_t req_len, resp_cap;
	uint64_t slot_addr, resp_addr, req_addr;
	uint32_t slot_rkey, resp_rkey, req_rkey;
};

struct rk_rpc_ans_hdr {
	uint32_t status; /* enum rk_rpc_status */
	int in_slot;	 /* the data follows the header in the slot */
	int32_t code;
	uint32_t len;
};

/* What the server grants in its accept reply (private data). */
struct rk_rpc_accept {
	uint32_t window, req_inline, slot_size, max_msg;
};

/* The limits a server checks a request against. */
struct rk_rpc_limits {
	uint32_t window, req_inline, slot_size, max_msg;
};

void rk__rpc_req_encode(const struct rk_rpc_req_hdr *h, uint8_t *buf);
/*
 * rk__rpc_req_encode_slot / _call / _far - rk__rpc_req_encode in three
 * parts: the fields of a call slot that never change (version, slot,
 * slot_addr, slot_rkey), written once into the slot's request buffer; the
 * fields of every call (flags, method, gen, req_len, resp_cap); and the
 * addresses and keys of a rendezvous body or a direct answer (resp_rkey,
 * resp_addr, req_addr, req_rkey), zero for a call with neither, which a
 * buffer keeps from call to call. All three together write what
 * rk__rpc_req_encode does.
 */
void rk__rpc_req_encode_slot(const struct rk_rpc_req_hdr *h, uint8_t *buf);
void rk__rpc_req_encode_call(const struct rk_rpc_req_hdr *h, uint8_t *buf);
void rk__rpc_req_encode_far(const struct rk_rpc_req_hdr *h, uint8_t *buf);
/*
 * rk__rpc_req_decode - parse a request of @len bytes (header and inline
 * body) and check it against @lim. Returns 0, or -EBADMSG (truncated, other
 * version, unknown flags, an inline length that is not what came),
 * -ERANGE (slot beyond the window), -EMSGSIZE (a length beyond the limits).
 * @why gets a short reason.
 */
int rk__rpc_req_decode(const uint8_t *buf, size_t len, const struct rk_rpc_limits *lim,
		       struct rk_rpc_req_hdr *h, const char **why);

/*
 * rk__rpc_req_decode_usual - the usual request (this version, no flags: an
 * inline body, the answer in the slot) in fewer steps: 0 when @buf, @len
 * bytes, is such a request that rk__rpc_req_decode accepts, with every
 * field it writes written the same but resp_rkey, resp_addr, req_addr and
 * req_rkey (left as they were: they mean something only with their flags);
 * -1 for anything else, @h then partly written: rk__rpc_req_decode says
 * whether it is a request at all. @buf must be memory no peer can write
 * any more (a receive buffer handed out, or a copy).
 */
static inline int rk__rpc_req_decode_usual(const uint8_t *buf, size_t len,
					   const struct rk_rpc_limits *lim,
					   struct rk_rpc_req_hdr *h)
{
	if (len < RK_RPC_REQ_HDR || rk_get16(buf) != RK_RPC_WIRE_VERSION << 8)
		return -1;
	h->slot = rk_get16(buf + 4);
	h->req_len = rk_get32(buf + 8);
	h->resp_cap = rk_get32(buf + 12);
	if (h->slot >= lim->window || h->req_len != len - RK_RPC_REQ_HDR ||
	    h->req_len > lim->req_inline || h->resp_cap > lim->slot_size - RK_RPC_ANS_HDR)
		return -1;
	h->version = RK_RPC_WIRE_VERSION;
	h->flags = 0;
	h->method = rk_get16(buf + 2);
	h->gen = rk_get16(buf + 6);
	h->slot_addr = rk_get64(buf + 16);
	h->slot_rkey = rk_get32(buf + 24);
	return 0;
}

void rk__rpc_ans_encode(const struct rk_rpc_ans_hdr *h, uint8_t *buf);
/*
 * rk__rpc_ans_decode - parse an answer header from @buf (already copied out
 * of the peer-writable slot) that arrived with @byte_len bytes for a call
 * that accepts @resp_cap bytes, made @direct or not (a call that was not
 * direct gets its data in the slot, always), into a slot with room for
 * @slot_room bytes after the header: data said to be in the slot must fit
 * there, whatever the call accepts (a direct call's @resp_cap may be far
 * more, and the write that carried the answer may have gone elsewhere).
 * Returns 0 or -EBADMSG with @why.
 */
int rk__rpc_ans_decode(const uint8_t *buf, uint32_t byte_len, uint32_t resp_cap, uint32_t slot_room,
		       int direct, struct rk_rpc_ans_hdr *h, const char **why);

static inline uint32_t rk__rpc_imm(uint16_t slot, uint16_t gen)
{
	return (uint32_t)slot << 16 | gen;
}

void rk__rpc_accept_encode(const struct rk_rpc_accept *a, uint8_t *buf);
/*
 * rk__rpc_accept_decode - 0, or -EBADMSG (short, bad magic, a zero field or
 * one beyond RK_RPC_WIRE_MAX_*: a client sizes its memory by these).
 */
int rk__rpc_accept_decode(const uint8_t *buf, size_t len, struct rk_rpc_accept *a);

/* rk__rpc_status_errno - the call result for an answer's status. */
int rk__rpc_status_errno(uint32_t status);

#endif
