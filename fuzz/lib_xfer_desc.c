/*
 * lib_xfer_desc.c - the one-sided segment descriptor as a peer sends it
 * (lib/xfer_desc.c).
 *
 * Input: the descriptor's bytes, as given to rk_xfer_import.
 *
 * Asserts, for any bytes:
 *  - an accepted descriptor has a known version, access, mode, 1..16 lanes,
 *    a generation, a length > 0 that does not wrap, and exactly the size its
 *    lane count makes;
 *  - it encodes back to the same bytes (round trip);
 *  - a refused one names the field, and the output is not written.
 */
#include <string.h>

#include "fuzz.h"
#include "xfer_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rk__xdesc d;
	uint8_t again[RK_XFER_DESC_MAX];
	const char *why = NULL;
	size_t n = 0;

	memset(&d, 0x5a, sizeof(d));
	if (rk__xdesc_decode(data, size, &d, &why) != 0) {
		FUZZ_CHECK(why && *why);
		FUZZ_CHECK(d.gen == 0x5a5a5a5au && d.len == 0x5a5a5a5a5a5a5a5aull);
		return 0;
	}
	FUZZ_CHECK(d.version == RK_XFER_DESC_VERSION);
	FUZZ_CHECK(d.access && !(d.access & ~3u));
	FUZZ_CHECK(d.mode == RK_XFER_MW || d.mode == RK_XFER_MR);
	FUZZ_CHECK(d.lanes >= 1 && d.lanes <= RK_XFER_LANES_MAX);
	FUZZ_CHECK(d.gen != 0 && d.len != 0 && d.addr + d.len > d.addr);
	FUZZ_CHECK(size == rk__xdesc_size(d.lanes));
	FUZZ_CHECK(rk__xdesc_encode(&d, again, sizeof(again), &n) == 0);
	FUZZ_CHECK(n == size && memcmp(again, data, n) == 0);
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct rk__xdesc d;
	uint8_t buf[RK_XFER_DESC_MAX];
	size_t n;

	memset(&d, 0, sizeof(d));
	d.version = RK_XFER_DESC_VERSION;
	d.access = RK_XFER_READ;
	d.mode = RK_XFER_MW;
	d.lanes = 1;
	d.gen = 1;
	d.seg_id = 1;
	d.addr = 0x7f0000001000ull;
	d.len = 16384;
	d.rkey[0] = 0x1234;
	if (rk__xdesc_encode(&d, buf, sizeof(buf), &n) == 0)
		emit("one-lane-read", buf, n);
	d.access = RK_XFER_READ | RK_XFER_WRITE;
	d.mode = RK_XFER_MR;
	d.lanes = 4;
	d.gen = 7;
	for (unsigned i = 0; i < 4; i++)
		d.rkey[i] = 0x100 + i;
	if (rk__xdesc_encode(&d, buf, sizeof(buf), &n) == 0) {
		emit("four-lanes-rw", buf, n);
		emit("truncated", buf, n - 3);
		buf[4] = 9;
		emit("version-9", buf, n);
	}
}
