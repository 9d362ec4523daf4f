/*
 * kv_wire.h - what example 10's block server and its clients agree on.
 * Everything is little-endian. Any client that follows this (the C one
 * here, one in Python) can use the server.
 *
 * Two kinds of connection, both rdma_cm, to the server's ADDR:
 *
 *  1. RPC (include/rdmakit/rpc.h) on PORT: the control plane. Methods:
 *
 *     KV_M_HELLO (1)   request: u64 ticket.
 *                      answer:  u32 block_size, u32 nblocks, then the
 *                               descriptor (the rest: 36..96 bytes,
 *                               rk_xfer_import's input). It grants RDMA
 *                               READ of nblocks * block_size bytes, on the
 *                               data lane that received the ticket only.
 *                               Saying hello again gives the same
 *                               descriptor and renews the lease (below).
 *                               If the lane's handshake has not ended at
 *                               the server yet, the answer waits for it
 *                               (at most KV_ESTABLISH_MS).
 *                      codes:   EINVAL (request not 8 bytes), ENOENT (no
 *                               such ticket, or its lane closed), EPERM
 *                               (the lane is bound to another RPC
 *                               connection), EALREADY (said bye), EBUSY
 *                               (a hello for that lane is still waiting),
 *                               EIO.
 *     KV_M_LOOKUP (2)  request: n u64 keys, 1 <= n <= KV_LOOKUP_MAX.
 *                      answer:  n u64: the byte offset of each key's block
 *                               in the segment, or KV_ABSENT. Renews the
 *                               lease of every lane bound to this RPC
 *                               connection.
 *                      codes:   EINVAL (a length not 8 * (1..256)).
 *     KV_M_BYE (3)     request: u64 ticket. The server revokes the
 *                      descriptor; a READ with it fails afterwards at the
 *                      client (remote access error). answer: empty.
 *                      codes:   EINVAL, ENOENT, EPERM as KV_M_HELLO;
 *                               EIO (the revoke timed out and the lane
 *                               was disconnected: access ended anyway).
 *
 *     Binding: the first KV_M_HELLO or KV_M_BYE with a ticket binds its
 *     lane to the RPC connection that sent it; later ones for that lane
 *     from any other RPC connection get EPERM. So say hello and bye on
 *     the same RPC connection. Known limits: the server knows an RPC
 *     connection by its peer's address and port only (rpc.h tells a
 *     handler no more), so once that connection has closed, a new one
 *     from the same host that gets the same port passes for it; and the
 *     ticket travels in clear in the lane's rdma_cm private data (as all
 *     RDMA traffic does): whoever watches the wire can present it first.
 *
 *     The lease: access ends KV_LEASE_MS (the server's --lease may set
 *     another) after the last KV_M_HELLO or KV_M_LOOKUP of the RPC
 *     connection the lane is bound to; the server then revokes the
 *     descriptor and closes the lane. A client that reads for longer
 *     renews it (a KV_M_LOOKUP of one key does).
 *
 *  2. The data lane on PORT + 1: an rdma_cm connection (rk_cm_connect)
 *     whose hello (cm.h) has app_id KV_APP_ID, app_arg 0, no token. The
 *     server answers the connect with private data whose first 8 bytes
 *     are the u64 ticket, random, naming this lane (the transport may pad
 *     it: ignore the rest). The client makes the lane one rk_xfer_peer of
 *     one lane (in the rk_xfer's PD), says KV_M_HELLO with the ticket and
 *     READs blocks on the lane; it never posts on the lane itself. Limits
 *     (each closes the lane, or refuses its connect busy):
 *      - the handshake must end (the client's rdma_cm ESTABLISHED, which
 *        sends the server its ready-to-use message) within
 *        KV_ESTABLISH_MS of the server's accept;
 *      - the lane must say hello within KV_CLAIM_MS of that;
 *      - the lease, above;
 *      - after bye it may linger KV_CLAIM_MS, no more;
 *      - at most KV_LANES_MAX lanes at once, KV_LANES_PER_ADDR of them
 *        from one address (any port).
 *     Access lasts while the lane is up and its lease runs, until
 *     KV_M_BYE.
 *
 * The data: the server holds keys 0 .. nblocks - 1, each in a block of its
 * own (in a shuffled order, so ask: KV_M_LOOKUP). Word i (u64) of the
 * block holding key K is kv_word(K, i): K itself for i = 0, else
 * kv_mix(K + i * KV_GOLDEN). A client checks every block it reads.
 */
#ifndef KV_WIRE_H
#define KV_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define KV_APP_ID	  0x4b564331u /* "KVC1": the data lane's rdma_cm hello */
#define KV_M_HELLO	  1
#define KV_M_LOOKUP	  2
#define KV_M_BYE	  3
#define KV_BLOCK_SIZE	  4096u
#define KV_LOOKUP_MAX	  256u /* keys per KV_M_LOOKUP: 2 KiB, sent inline */
#define KV_ABSENT	  UINT64_MAX
#define KV_TICKET_LEN	  8u
#define KV_HELLO_HDR	  8u /* block_size, nblocks before the descriptor */
#define KV_CLAIM_MS	  10000
#define KV_ESTABLISH_MS	  3000	/* a lane's handshake, from the server's accept */
#define KV_LEASE_MS	  30000 /* access without a hello or lookup (server default) */
#define KV_LANES_MAX	  16	/* lanes at once: each pins a QP and its queues */
#define KV_LANES_PER_ADDR 4	/* ... from one address: a quarter of them */
#define KV_GOLDEN	  0x9e3779b97f4a7c15ull

/* splitmix64's finaliser: a fixed, well-mixed function of x. */
static inline uint64_t kv_mix(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t kv_word(uint64_t key, uint64_t i)
{
	return i ? kv_mix(key + i * KV_GOLDEN) : key;
}

/* Little-endian u32 / u64 to and from bytes (no alignment assumed). */
static inline void kv_put32(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void kv_put64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t kv_get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static inline uint64_t kv_get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Fill a KV_BLOCK_SIZE block with key @key's content. */
static inline void kv_fill(uint8_t *block, uint64_t key)
{
	for (uint64_t i = 0; i < KV_BLOCK_SIZE / 8; i++)
		kv_put64(block + 8 * i, kv_word(key, i));
}

/* The first byte of @block that is not key @key's content, or -1. */
static inline long kv_check(const uint8_t *block, uint64_t key)
{
	for (uint64_t i = 0; i < KV_BLOCK_SIZE / 8; i++) {
		uint8_t want[8];

		kv_put64(want, kv_word(key, i));
		for (unsigned j = 0; j < 8; j++)
			if (block[8 * i + j] != want[j])
				return (long)(8 * i + j);
	}
	return -1;
}

#endif
