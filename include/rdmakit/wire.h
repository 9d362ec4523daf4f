/*
 * rdmakit/wire.h - big-endian fields in byte buffers, for the fixed-layout
 * messages an application (or the library, or rk) sends to its peer.
 *
 * One codec for every wire format here: the library's hello, out-of-band
 * exchange and RPC headers, rk copy's protocol, rk bench's and rk doctor's
 * control messages. Whole words through memcpy: any alignment, any host
 * byte order, and one load or store (plus a byte swap) each once compiled,
 * cheap enough for a header on every call's path.
 *
 * Bounds are the caller's: each function reads or writes exactly 2, 4 or 8
 * bytes at @p, which must be that long. No state; thread-safe.
 */
#ifndef RDMAKIT_WIRE_H
#define RDMAKIT_WIRE_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Host order to big-endian and back. Not <endian.h>'s htobe16 and kin:
 * those are hidden from a program built with -std=c11 (no _DEFAULT_SOURCE).
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define RK_BE16(v) (v)
#define RK_BE32(v) (v)
#define RK_BE64(v) (v)
#else
#define RK_BE16(v) __builtin_bswap16(v)
#define RK_BE32(v) __builtin_bswap32(v)
#define RK_BE64(v) __builtin_bswap64(v)
#endif

/* rk_put16 - store @v at @p (2 bytes), most significant byte first. */
static inline void rk_put16(uint8_t *p, uint16_t v)
{
	v = RK_BE16(v);
	memcpy(p, &v, sizeof(v));
}

/* rk_put32 - store @v at @p (4 bytes), most significant byte first. */
static inline void rk_put32(uint8_t *p, uint32_t v)
{
	v = RK_BE32(v);
	memcpy(p, &v, sizeof(v));
}

/* rk_put64 - store @v at @p (8 bytes), most significant byte first. */
static inline void rk_put64(uint8_t *p, uint64_t v)
{
	v = RK_BE64(v);
	memcpy(p, &v, sizeof(v));
}

/* rk_get16 - the big-endian 16-bit value at @p (2 bytes). */
static inline uint16_t rk_get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return RK_BE16(v);
}

/* rk_get32 - the big-endian 32-bit value at @p (4 bytes). */
static inline uint32_t rk_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return RK_BE32(v);
}

/* rk_get64 - the big-endian 64-bit value at @p (8 bytes). */
static inline uint64_t rk_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return RK_BE64(v);
}

#ifdef __cplusplus
}
#endif

#endif
