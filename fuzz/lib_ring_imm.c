/*
 * lib_ring_imm.c - the credit ring's immediates as a peer sends them
 * (lib/ring_seq.c).
 *
 * Input: one byte of geometry (lanes = 1 + (b >> 4), slots = lanes times
 * 1 + (b & 7): 1 to 128, not only powers of two), then records of 9 bytes:
 * the lane (1 byte, reduced modulo lanes), the immediate and the length
 * (4 bytes each, big-endian). Record kinds alternate by the lane byte's top
 * bit: a WRITE WITH IMMEDIATE at the receiver, or a credit at a sender that
 * has sent as much as the receiver accepted.
 *
 * Asserts, for any bytes:
 *  - an accepted immediate is inside the window, in the slot its sequence
 *    maps to, owned by its lane, within the slot size, and not there yet;
 *  - a refused one changes nothing;
 *  - delivery is in strictly increasing sequence with no gaps;
 *  - a sender's credits stay within the ring and never pass what it sent.
 */
#include <string.h>

#include "fuzz.h"
#include "ring_seq.h"

#define SLOT_SIZE 4096

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rk_ring_rx_seq rx, before;
	struct rk_ring_tx_seq tx;
	uint8_t have[128];
	uint32_t slots, lanes, waiting = 0;
	uint64_t delivered = 0;

	if (size < 1)
		return 0;
	lanes = 1u + (data[0] >> 4);
	slots = lanes * (1u + (data[0] & 7));
	FUZZ_CHECK(rk__ring_geometry_ok(slots, lanes) == 0);
	FUZZ_CHECK(rk__rseq_rx_init(&rx, slots, lanes, SLOT_SIZE) == 0);
	rk__rseq_tx_init(&tx, slots, lanes);
	data++;
	size--;
	for (; size >= 9; data += 9, size -= 9) {
		uint32_t lane = (data[0] & 0x7f) % lanes, imm = be32(data + 1),
			 len = be32(data + 5);
		uint32_t slot = 0, plen;
		uint64_t seq = 0;
		enum rk_ring_verdict v;

		if (data[0] & 0x80) {
			uint64_t acked = tx.acked;

			tx.sent = rx.next + waiting; /* all the receiver holds or delivered */
			if (rk__rseq_tx_credit(&tx, imm) == 0)
				FUZZ_CHECK(tx.acked >= acked && tx.acked <= tx.sent);
			else
				FUZZ_CHECK(tx.acked == acked);
			/* (this model sends without reserving: credits are meaningful when in
			 * range) */
			if (tx.sent - tx.acked <= slots)
				FUZZ_CHECK(rk__rseq_tx_credits(&tx) <= slots);
			continue;
		}
		before = rx;
		memcpy(have, rx.have, slots);
		v = rk__rseq_rx_accept(&rx, lane, imm, len, &seq, &slot);
		if (v == RK_RING_OK) {
			FUZZ_CHECK(seq >= rx.next && seq < rx.next + slots);
			FUZZ_CHECK(slot == (uint32_t)(seq % slots));
			FUZZ_CHECK(slot % lanes == lane);
			FUZZ_CHECK(len <= SLOT_SIZE);
			FUZZ_CHECK(!have[slot] && rx.have[slot]);
			FUZZ_CHECK(imm == rk__ring_imm_encode(slots, seq));
			waiting++;
		} else {
			FUZZ_CHECK(v >= RK_RING_BAD_SLOT && v <= RK_RING_TOO_LONG);
			FUZZ_CHECK(rx.next == before.next && memcmp(have, rx.have, slots) == 0);
		}
		while (rk__rseq_rx_peek(&rx, &slot, &plen)) {
			FUZZ_CHECK(slot == (uint32_t)(rx.next % slots) && plen <= SLOT_SIZE);
			FUZZ_CHECK(rx.next == delivered);
			rk__rseq_rx_consume(&rx);
			delivered++;
			waiting--;
		}
	}
	rk__rseq_rx_fini(&rx);
	return 0;
}

static void emit_rec(uint8_t *p, uint8_t lane, uint32_t imm, uint32_t len)
{
	p[0] = lane;
	for (int i = 0; i < 4; i++) {
		p[1 + i] = (uint8_t)(imm >> (24 - 8 * i));
		p[5 + i] = (uint8_t)(len >> (24 - 8 * i));
	}
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	uint8_t buf[1 + 9 * 12];
	size_t n = 1;

	/* 8 slots, 2 lanes: four in order, then four in reverse, then a credit. */
	buf[0] = 3 | 1 << 4;
	for (uint32_t s = 0; s < 4; s++, n += 9)
		emit_rec(buf + n, (uint8_t)(s % 2), rk__ring_imm_encode(8, s), 100 * s);
	for (uint32_t s = 8; s-- > 4; n += 9)
		emit_rec(buf + n, (uint8_t)(s % 2), rk__ring_imm_encode(8, s), s);
	emit_rec(buf + n, 0x80, rk__ring_credit_imm(8), 0);
	n += 9;
	emit("lanes-reorder", buf, n);
	/* One slot, one lane: a duplicate, a forged slot, an oversized length. */
	n = 1;
	buf[0] = 0;
	emit_rec(buf + n, 0, rk__ring_imm_encode(1, 0), 1);
	n += 9;
	emit_rec(buf + n, 0, rk__ring_imm_encode(1, 0), 1);
	n += 9;
	emit_rec(buf + n, 0, 3u << RK_RING_SEQ_BITS | 1, 1);
	n += 9;
	emit_rec(buf + n, 0, rk__ring_imm_encode(1, 1), SLOT_SIZE + 1);
	n += 9;
	emit("refused", buf, n);
}
