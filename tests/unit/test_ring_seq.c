/*
 * test_ring_seq.c - the credit ring's sequence, credit and reorder logic:
 * in-order runs across the sequence wrap, out-of-order arrival over lanes,
 * duplicates, replays and forged immediates refused, credits checked.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "ring_seq.h"

static void geometry(void **state)
{
	(void)state;
	assert_int_equal(rk__ring_geometry_ok(8, 2), 0);
	assert_int_equal(rk__ring_geometry_ok(1, 1), 0);
	assert_int_equal(rk__ring_geometry_ok(RK_RING_MAX_SLOTS, RK_RING_MAX_LANES), 0);
	assert_int_equal(rk__ring_geometry_ok(0, 1), -EINVAL);
	assert_int_equal(rk__ring_geometry_ok(12, 1), 0);
	assert_int_equal(rk__ring_geometry_ok(6, 3), 0); /* any count the lanes divide */
	assert_int_equal(rk__ring_geometry_ok(63, 7), 0);
	assert_int_equal(rk__ring_geometry_ok(RK_RING_MAX_SLOTS * 2, 1), -EINVAL);
	assert_int_equal(rk__ring_geometry_ok(8, 3), -EINVAL); /* does not divide */
	assert_int_equal(rk__ring_geometry_ok(8, 0), -EINVAL);
	assert_int_equal(rk__ring_geometry_ok(64, 32), -EINVAL);
}

/*
 * Three times around the 20-bit sequence, one message at a time, over
 * @lanes lanes and @slots slots (2^20 is not a multiple of 6: the slot
 * follows the whole sequence, not its low bits).
 */
static void wrap(uint32_t slots, uint32_t lanes)
{
	struct rk_ring_rx_seq rx;
	struct rk_ring_tx_seq tx;
	uint64_t n = 3ull << RK_RING_SEQ_BITS;

	assert_int_equal(rk__rseq_rx_init(&rx, slots, lanes, 100), 0);
	rk__rseq_tx_init(&tx, slots, lanes);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t seq, got;
		uint32_t slot, lane, imm, rslot, len;

		assert_int_equal(rk__rseq_tx_reserve(&tx, &seq, &slot, &lane, &imm), 0);
		assert_true(seq == i);
		assert_int_equal(lane, slot % lanes);
		assert_int_equal(slot, (uint32_t)(i % slots));
		assert_int_equal(
		    rk__rseq_rx_accept(&rx, lane, imm, (uint32_t)(i % 101), &got, &rslot),
		    RK_RING_OK);
		assert_true(got == i);
		assert_int_equal(rslot, slot);
		assert_int_equal(rk__rseq_rx_peek(&rx, &rslot, &len), 1);
		assert_int_equal(len, i % 101);
		rk__rseq_rx_consume(&rx);
		assert_int_equal(rk__rseq_tx_credit(&tx, rk__ring_credit_imm(rx.next)), 0);
		assert_int_equal(rk__rseq_tx_credits(&tx), slots);
	}
	rk__rseq_rx_fini(&rx);
}

static void in_order_across_wrap(void **state)
{
	(void)state;
	wrap(16, 4);
	wrap(6, 3);
}

static void credits_run_out_and_return(void **state)
{
	struct rk_ring_tx_seq tx;
	uint64_t seq;
	uint32_t slot, lane, imm;

	(void)state;
	rk__rseq_tx_init(&tx, 4, 1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(rk__rseq_tx_reserve(&tx, &seq, &slot, &lane, &imm), 0);
	assert_int_equal(rk__rseq_tx_credits(&tx), 0);
	assert_int_equal(rk__rseq_tx_reserve(&tx, &seq, &slot, &lane, &imm), -EAGAIN);
	assert_true(tx.sent == 4);
	/* More deliveries than sends: forged, nothing changes. */
	assert_int_equal(rk__rseq_tx_credit(&tx, 5), -EPROTO);
	assert_int_equal(rk__rseq_tx_credit(&tx, 0x7fffffffu), -EPROTO);
	assert_int_equal(rk__rseq_tx_credits(&tx), 0);
	assert_int_equal(rk__rseq_tx_credit(&tx, 3), 0);
	assert_int_equal(rk__rseq_tx_credits(&tx), 3);
	/* An older credit arriving late over another lane is ignored. */
	assert_int_equal(rk__rseq_tx_credit(&tx, 1), 0);
	assert_int_equal(rk__rseq_tx_credits(&tx), 3);
	/* Across the 32-bit wrap of the credit counter. */
	tx.sent = 0x100000002ull;
	tx.acked = 0xfffffffeull;
	assert_int_equal(rk__rseq_tx_credit(&tx, 1), 0);
	assert_true(tx.acked == 0x100000001ull);
	assert_int_equal(rk__rseq_tx_credit(&tx, 3), -EPROTO);
}

/* Eight messages over two lanes, arriving in reverse: held, then delivered in order. */
static void out_of_order(void **state)
{
	struct rk_ring_rx_seq rx;
	struct rk_ring_tx_seq tx;
	uint32_t imm[8], lane[8], slot, len;
	uint64_t seq;

	(void)state;
	assert_int_equal(rk__rseq_rx_init(&rx, 8, 2, 64), 0);
	rk__rseq_tx_init(&tx, 8, 2);
	for (int i = 0; i < 8; i++)
		assert_int_equal(rk__rseq_tx_reserve(&tx, &seq, &slot, &lane[i], &imm[i]), 0);
	for (int i = 7; i >= 1; i--) {
		assert_int_equal(rk__rseq_rx_accept(&rx, lane[i], imm[i], (uint32_t)i, &seq, &slot),
				 RK_RING_OK);
		assert_true(seq == (uint64_t)i);
		assert_int_equal(rk__rseq_rx_peek(&rx, &slot, &len), 0); /* 0 still missing */
	}
	assert_int_equal(rk__rseq_rx_accept(&rx, lane[0], imm[0], 0, &seq, &slot), RK_RING_OK);
	for (uint32_t i = 0; i < 8; i++) {
		assert_int_equal(rk__rseq_rx_peek(&rx, &slot, &len), 1);
		assert_int_equal(slot, i);
		assert_int_equal(len, i);
		rk__rseq_rx_consume(&rx);
	}
	assert_int_equal(rk__rseq_rx_peek(&rx, &slot, &len), 0);
	rk__rseq_rx_consume(&rx); /* nothing there: no change */
	assert_true(rx.next == 8);
	rk__rseq_rx_fini(&rx);
}

static void refused(void **state)
{
	struct rk_ring_rx_seq rx;
	uint64_t seq;
	uint32_t slot, len;

	(void)state;
	assert_int_equal(rk__rseq_rx_init(&rx, 8, 2, 64), 0);
	/* seq 0 in slot 0 on lane 0 is fine once; twice is a duplicate. */
	assert_int_equal(rk__rseq_rx_accept(&rx, 0, rk__ring_imm_encode(8, 0), 64, &seq, &slot),
			 RK_RING_OK);
	assert_int_equal(rk__rseq_rx_accept(&rx, 0, rk__ring_imm_encode(8, 0), 1, &seq, &slot),
			 RK_RING_DUPLICATE);
	/* seq 1 claims slot 5: forged. A slot beyond the ring: forged. */
	assert_int_equal(rk__rseq_rx_accept(&rx, 1, 5u << RK_RING_SEQ_BITS | 1, 0, &seq, &slot),
			 RK_RING_BAD_SLOT);
	assert_int_equal(rk__rseq_rx_accept(&rx, 1, 4095u << RK_RING_SEQ_BITS | 1, 0, &seq, &slot),
			 RK_RING_BAD_SLOT);
	/* seq 1 belongs to lane 1, not 0. */
	assert_int_equal(rk__rseq_rx_accept(&rx, 0, rk__ring_imm_encode(8, 1), 0, &seq, &slot),
			 RK_RING_NOT_OWNED);
	/* Beyond the window (8 ahead), and far beyond. */
	assert_int_equal(rk__rseq_rx_accept(&rx, 0, rk__ring_imm_encode(8, 8), 0, &seq, &slot),
			 RK_RING_OUTSIDE);
	assert_int_equal(rk__rseq_rx_accept(&rx, 0, 0xffffffffu, 0, &seq, &slot), RK_RING_OUTSIDE);
	/* Longer than a slot. */
	assert_int_equal(rk__rseq_rx_accept(&rx, 1, rk__ring_imm_encode(8, 1), 65, &seq, &slot),
			 RK_RING_TOO_LONG);
	/* None of that changed anything: 1 is still welcome. */
	assert_int_equal(rk__rseq_rx_accept(&rx, 1, rk__ring_imm_encode(8, 1), 64, &seq, &slot),
			 RK_RING_OK);
	assert_int_equal(rk__rseq_rx_peek(&rx, &slot, &len), 1);
	rk__rseq_rx_consume(&rx);
	rk__rseq_rx_consume(&rx);
	/* A replay of a delivered message lies far ahead of the window. */
	assert_int_equal(rk__rseq_rx_accept(&rx, 0, rk__ring_imm_encode(8, 0), 0, &seq, &slot),
			 RK_RING_OUTSIDE);
	/* Near the 20-bit wrap: the window spans it. */
	rx.next = (1u << RK_RING_SEQ_BITS) - 2;
	assert_int_equal(
	    rk__rseq_rx_accept(&rx, 1, rk__ring_imm_encode(8, rx.next + 3), 0, &seq, &slot),
	    RK_RING_OK);
	assert_true(seq == rx.next + 3);
	assert_string_equal(rk__ring_verdict_str(RK_RING_NOT_OWNED), "slot not owned by this lane");
	rk__rseq_rx_fini(&rx);
	assert_int_equal(rk__rseq_rx_init(&rx, 6, 4, 64), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(geometry),
	    cmocka_unit_test(in_order_across_wrap),
	    cmocka_unit_test(credits_run_out_and_return),
	    cmocka_unit_test(out_of_order),
	    cmocka_unit_test(refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
