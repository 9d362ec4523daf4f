/*
 * wire.h - big-endian field access for the small fixed wire messages
 * (oob.c, hello.c). Byte-wise so alignment and host order never matter.
 */
#ifndef RK_WIRE_H
#define RK_WIRE_H

#include <stdint.h>

static inline void rk_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void rk_put32(uint8_t *p, uint32_t v)
{
	rk_put16(p, (uint16_t)(v >> 16));
	rk_put16(p + 2, (uint16_t)v);
}

static inline void rk_put64(uint8_t *p, uint64_t v)
{
	rk_put32(p, (uint32_t)(v >> 32));
	rk_put32(p + 4, (uint32_t)v);
}

static inline uint16_t rk_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t rk_get32(const uint8_t *p)
{
	return (uint32_t)rk_get16(p) << 16 | rk_get16(p + 2);
}

static inline uint64_t rk_get64(const uint8_t *p)
{
	return (uint64_t)rk_get32(p) << 32 | rk_get32(p + 4);
}

#endif
