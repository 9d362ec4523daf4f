/*
 * raw_ring.h - what a client speaking rk copy's wire protocol by hand
 * (the hostile and abusive test clients) needs of the ring rk serve runs
 * (rdmakit/ring.h, lib/ring_seq.h): where message @seq goes and the
 * immediate that names it. Written out here so that a test states the
 * wire format instead of borrowing the library's code for it.
 */
#ifndef RK_TEST_RAW_RING_H
#define RK_TEST_RAW_RING_H

#include <stdint.h>

/* The slot of message @seq in a ring of @nslots. */
static inline uint32_t raw_slot(uint32_t nslots, uint32_t seq)
{
	return seq % nslots;
}

/* Its immediate: the slot in the top 12 bits, the sequence's low 20 bits. */
static inline uint32_t raw_imm(uint32_t nslots, uint32_t seq)
{
	return raw_slot(nslots, seq) << 20 | (seq & 0xfffffu);
}

#endif
