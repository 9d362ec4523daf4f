/*
 * wire.h - big-endian field access for the fixed wire messages (oob.c,
 * hello.c, rpc_wire.c). Whole words through memcpy: any alignment, any host
 * order, and one load or store each once compiled (the RPC headers are on
 * every call's path).
 */
#ifndef RK_WIRE_H
#define RK_WIRE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline void rk_put16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void rk_put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void rk_put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

static inline uint16_t rk_get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static inline uint32_t rk_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static inline uint64_t rk_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

#endif
