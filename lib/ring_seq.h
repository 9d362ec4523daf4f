/*
 * ring_seq.h - the credit ring's sequence, credit and reorder logic, free of
 * verbs so it can be unit tested and fuzzed (ring.h is the verbs part).
 *
 * The receiver owns S slots (1..RK_RING_MAX_SLOTS) and L lanes
 * (connections to the same sender; L divides S, so 3 lanes take 6 slots). Message number seq
 * (counting from 0, 64 bits here, never wraps) goes into slot seq mod S
 * over lane seq mod L: lane l owns the slots s with s mod L == l. The
 * sender may have at most S messages not yet delivered (its credits); the
 * receiver delivers in sequence order, holding early arrivals from the
 * other lanes in the window [next, next + S).
 *
 * The immediate of each RDMA WRITE WITH IMMEDIATE carries the slot in the
 * top RK_RING_SLOT_BITS bits and the low RK_RING_SEQ_BITS bits of seq.
 * Both are checked: the slot must be the one seq maps to, seq must fall in
 * the window and not be there yet, the lane must own the slot and the
 * length must fit a slot. Anything else is a forgery, a replay or a broken
 * peer, and the caller drops that lane.
 *
 * Credits go back as a 32-bit immediate: the low bits of how many messages
 * were delivered. The sender accepts a credit only between what it already
 * knew and what it has sent (at most 2^31 behind or ahead, far more than
 * any window).
 */
#ifndef RK_RING_SEQ_H
#define RK_RING_SEQ_H

#include <stdint.h>

#define RK_RING_SLOT_BITS 12
#define RK_RING_SEQ_BITS  20
#define RK_RING_MAX_SLOTS (1u << RK_RING_SLOT_BITS)
#define RK_RING_MAX_LANES 16

/* Why an immediate was refused (rk__rseq_rx_accept), as a negative errno. */
enum rk_ring_verdict {
	RK_RING_OK = 0,
	RK_RING_BAD_SLOT,  /* slot not the one its sequence maps to: forged */
	RK_RING_OUTSIDE,   /* sequence outside the window: replay or forged */
	RK_RING_DUPLICATE, /* that sequence is already in the window */
	RK_RING_NOT_OWNED, /* the slot belongs to another lane */
	RK_RING_TOO_LONG,  /* more bytes than a slot holds */
};

struct rk_ring_rx_seq {
	uint32_t slots, lanes, slot_size;
	uint64_t next; /* the next sequence to deliver */
	uint8_t *have; /* per slot: 1 while its message waits in the window */
	uint32_t *len; /* per slot: the length that came with it */
};

struct rk_ring_tx_seq {
	uint32_t slots, lanes;
	uint64_t sent;	/* messages reserved so far */
	uint64_t acked; /* messages the receiver says it delivered */
};

/* Checks slots / lanes: 0 or -EINVAL. */
int rk__ring_geometry_ok(uint32_t slots, uint32_t lanes);

/* The immediate for message @seq. */
uint32_t rk__ring_imm_encode(uint32_t slots, uint64_t seq);

/* Split an immediate (no validation): the slot and the sequence's low bits. */
void rk__ring_imm_split(uint32_t imm, uint32_t *slot, uint32_t *seq_low);

/*
 * Receiver. init allocates the per-slot arrays (0 or -ENOMEM / -EINVAL);
 * fini frees them.
 */
int rk__rseq_rx_init(struct rk_ring_rx_seq *rx, uint32_t slots, uint32_t lanes, uint32_t slot_size);
void rk__rseq_rx_fini(struct rk_ring_rx_seq *rx);

/*
 * rk__rseq_rx_accept - a WRITE WITH IMMEDIATE of @len bytes came on @lane
 * with @imm. RK_RING_OK: the message (*seq, in *slot) waits in the window.
 * Any other verdict: nothing changed; drop the lane.
 */
enum rk_ring_verdict rk__rseq_rx_accept(struct rk_ring_rx_seq *rx, uint32_t lane, uint32_t imm,
					uint32_t len, uint64_t *seq, uint32_t *slot);

/* rk__rseq_rx_peek - 1 and the slot and length if message `next` is there, else 0. */
int rk__rseq_rx_peek(const struct rk_ring_rx_seq *rx, uint32_t *slot, uint32_t *len);

/* rk__rseq_rx_consume - message `next` was delivered: free its slot, move on. */
void rk__rseq_rx_consume(struct rk_ring_rx_seq *rx);

/* rk__ring_credit_imm - the credit immediate saying @delivered messages were delivered. */
uint32_t rk__ring_credit_imm(uint64_t delivered);

/* Sender. */
void rk__rseq_tx_init(struct rk_ring_tx_seq *tx, uint32_t slots, uint32_t lanes);

/* rk__rseq_tx_credits - messages the sender may reserve now. */
uint32_t rk__rseq_tx_credits(const struct rk_ring_tx_seq *tx);

/*
 * rk__rseq_tx_reserve - take one credit: the message's sequence, slot, lane
 * and immediate. -EAGAIN without credit (nothing changes).
 */
int rk__rseq_tx_reserve(struct rk_ring_tx_seq *tx, uint64_t *seq, uint32_t *slot, uint32_t *lane,
			uint32_t *imm);

/*
 * rk__rseq_tx_credit - a credit immediate came back: 0 (credits may have
 * grown; one older than what is known is ignored, lanes reorder), or
 * -EPROTO when it claims more deliveries than were sent (nothing changes;
 * drop the lane).
 */
int rk__rseq_tx_credit(struct rk_ring_tx_seq *tx, uint32_t credit_imm);

const char *rk__ring_verdict_str(enum rk_ring_verdict v);

#endif
