/*
 * ring_seq.c - the credit ring's pure logic (ring_seq.h).
 *
 * A sequence travels as its low RK_RING_SEQ_BITS bits; the receiver
 * extends them to the one value in [next, next + 2^SEQ_BITS) that matches,
 * then requires it inside the window [next, next + slots). Because slots is
 * at most 2^SLOT_BITS, far below 2^SEQ_BITS, a replayed old message extends
 * to a value far ahead and is refused as outside, never taken for a new one.
 */
#include <errno.h>
#include <stdlib.h>

#include "ring_seq.h"

#define SEQ_MASK ((1u << RK_RING_SEQ_BITS) - 1)

int rk__ring_geometry_ok(uint32_t slots, uint32_t lanes)
{
	if (slots == 0 || slots > RK_RING_MAX_SLOTS)
		return -EINVAL;
	if (lanes == 0 || lanes > RK_RING_MAX_LANES || slots % lanes)
		return -EINVAL;
	return 0;
}

uint32_t rk__ring_imm_encode(uint32_t slots, uint64_t seq)
{
	uint32_t slot = (uint32_t)(seq % slots);

	return slot << RK_RING_SEQ_BITS | ((uint32_t)seq & SEQ_MASK);
}

void rk__ring_imm_split(uint32_t imm, uint32_t *slot, uint32_t *seq_low)
{
	*slot = imm >> RK_RING_SEQ_BITS;
	*seq_low = imm & SEQ_MASK;
}

int rk__rseq_rx_init(struct rk_ring_rx_seq *rx, uint32_t slots, uint32_t lanes, uint32_t slot_size)
{
	if (rk__ring_geometry_ok(slots, lanes))
		return -EINVAL;
	rx->slots = slots;
	rx->lanes = lanes;
	rx->slot_size = slot_size;
	rx->next = 0;
	rx->have = calloc(slots, 1);
	rx->len = calloc(slots, sizeof(uint32_t));
	if (!rx->have || !rx->len) {
		rk__rseq_rx_fini(rx);
		return -ENOMEM;
	}
	return 0;
}

void rk__rseq_rx_fini(struct rk_ring_rx_seq *rx)
{
	free(rx->have);
	free(rx->len);
	rx->have = NULL;
	rx->len = NULL;
}

enum rk_ring_verdict rk__rseq_rx_accept(struct rk_ring_rx_seq *rx, uint32_t lane, uint32_t imm,
					uint32_t len, uint64_t *seq, uint32_t *slot)
{
	uint32_t s, low;
	uint64_t full;

	rk__ring_imm_split(imm, &s, &low);
	full = rx->next + ((low - (uint32_t)rx->next) & SEQ_MASK);
	if (full - rx->next >= rx->slots)
		return RK_RING_OUTSIDE;
	if (s != (uint32_t)(full % rx->slots))
		return RK_RING_BAD_SLOT;
	if (s % rx->lanes != lane)
		return RK_RING_NOT_OWNED;
	if (len > rx->slot_size)
		return RK_RING_TOO_LONG;
	if (rx->have[s])
		return RK_RING_DUPLICATE;
	rx->have[s] = 1;
	rx->len[s] = len;
	*seq = full;
	*slot = s;
	return RK_RING_OK;
}

int rk__rseq_rx_peek(const struct rk_ring_rx_seq *rx, uint32_t *slot, uint32_t *len)
{
	uint32_t s = (uint32_t)(rx->next % rx->slots);

	if (!rx->have[s])
		return 0;
	*slot = s;
	*len = rx->len[s];
	return 1;
}

void rk__rseq_rx_consume(struct rk_ring_rx_seq *rx)
{
	uint32_t s = (uint32_t)(rx->next % rx->slots);

	if (!rx->have[s])
		return;
	rx->have[s] = 0;
	rx->len[s] = 0;
	rx->next++;
}

uint32_t rk__ring_credit_imm(uint64_t delivered)
{
	return (uint32_t)delivered;
}

void rk__rseq_tx_init(struct rk_ring_tx_seq *tx, uint32_t slots, uint32_t lanes)
{
	tx->slots = slots;
	tx->lanes = lanes;
	tx->sent = 0;
	tx->acked = 0;
}

uint32_t rk__rseq_tx_credits(const struct rk_ring_tx_seq *tx)
{
	return tx->slots - (uint32_t)(tx->sent - tx->acked);
}

int rk__rseq_tx_reserve(struct rk_ring_tx_seq *tx, uint64_t *seq, uint32_t *slot, uint32_t *lane,
			uint32_t *imm)
{
	if (!rk__rseq_tx_credits(tx))
		return -EAGAIN;
	*seq = tx->sent++;
	*slot = (uint32_t)(*seq % tx->slots);
	*lane = *slot % tx->lanes;
	*imm = rk__ring_imm_encode(tx->slots, *seq);
	return 0;
}

int rk__rseq_tx_credit(struct rk_ring_tx_seq *tx, uint32_t credit_imm)
{
	/*
	 * Credits may come over any lane, so an older one can arrive after a
	 * newer one: behind what we know is stale and ignored. Ahead of it, it
	 * must not pass what was sent.
	 */
	int32_t d = (int32_t)(credit_imm - (uint32_t)tx->acked);

	if (d <= 0)
		return 0;
	if (tx->acked + (uint64_t)d > tx->sent)
		return -EPROTO;
	tx->acked += (uint64_t)d;
	return 0;
}

const char *rk__ring_verdict_str(enum rk_ring_verdict v)
{
	switch (v) {
	case RK_RING_OK:
		return "ok";
	case RK_RING_BAD_SLOT:
		return "slot does not match its sequence (forged immediate)";
	case RK_RING_OUTSIDE:
		return "sequence outside the window (replayed or forged)";
	case RK_RING_DUPLICATE:
		return "sequence already received";
	case RK_RING_NOT_OWNED:
		return "slot not owned by this lane";
	case RK_RING_TOO_LONG:
		return "length beyond the slot";
	}
	return "?";
}
