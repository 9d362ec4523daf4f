/*
 * bench_ready.c - rk bench's READY message: the peer's device, kernel and
 * buffer coordinates (address, length, rkey), which the data path uses.
 *
 * The target links rk bench's library: it tests the objects rk runs.
 *
 * Input: BENCH_READY_LEN bytes (the control channel delivers no other length).
 * The parameters are rk bench's defaults, so the buffer must be
 * (1 + num_qp) * size_max bytes.
 *
 * Asserts, for any bytes:
 *  - the device and kernel names it accepts are printable and
 *    NUL-terminated within their fields;
 *  - an accepted buffer has the expected length and does not wrap, the MTU
 *    and port are in range;
 *  - bench_ready_encode of what was accepted decodes to the same.
 */
#include <string.h>

#include "bench_conn.h"

#include "fuzz.h"

static int same_side(const struct bench_side_info *a, const struct bench_side_info *b)
{
	return strcmp(a->dev, b->dev) == 0 && strcmp(a->kernel, b->kernel) == 0 &&
	       a->ib_port == b->ib_port && a->gid_index == b->gid_index &&
	       a->roce_v2 == b->roce_v2 && a->mtu == b->mtu && a->buf_addr == b->buf_addr &&
	       a->buf_len == b->buf_len && a->buf_rkey == b->buf_rkey;
}

static void ctx(struct bench_ctx *c, struct bench_params *p, struct bench_local *l)
{
	bench_params_default(p);
	memset(l, 0, sizeof(*l));
	bench_ctx_init(c, p, l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct bench_ctx c, c2;
	static struct bench_params p;
	static struct bench_local l;
	struct rk_error err;
	uint8_t enc[BENCH_READY_LEN];

	if (size != BENCH_READY_LEN)
		return 0;
	ctx(&c, &p, &l);
	if (bench_ready_decode(&c, data, &err))
		return 0;
	FUZZ_CHECK(fuzz_printable(c.peer.dev, sizeof(c.peer.dev)));
	FUZZ_CHECK(fuzz_printable(c.peer.kernel, sizeof(c.peer.kernel)));
	FUZZ_CHECK(c.peer.buf_len == bench_buffer_len(&p));
	FUZZ_CHECK(c.peer.buf_addr + c.peer.buf_len >= c.peer.buf_addr);
	FUZZ_CHECK(c.peer.ib_port <= 255 && c.peer.roce_v2 <= 1);
	FUZZ_CHECK(c.peer.mtu == 0 || rk_mtu_from_bytes(c.peer.mtu));
	bench_ready_encode(&c.peer, enc);
	ctx(&c2, &p, &l);
	FUZZ_CHECK(bench_ready_decode(&c2, enc, &err) == 0);
	FUZZ_CHECK(same_side(&c.peer, &c2.peer));
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct bench_params p;
	struct bench_side_info s = {.dev = "rxe0",
				    .kernel = "6.1.0-28-amd64",
				    .ib_port = 1,
				    .gid_index = 1,
				    .roce_v2 = 1,
				    .mtu = 1024,
				    .buf_addr = 0x7f1200000000ull,
				    .buf_rkey = 0x1a2b};
	uint8_t buf[BENCH_READY_LEN];

	bench_params_default(&p);
	s.buf_len = bench_buffer_len(&p);
	bench_ready_encode(&s, buf);
	emit("ready", buf, sizeof(buf));
	s.mtu = 0;
	s.gid_index = -1;
	memset(s.kernel, 'k', sizeof(s.kernel));
	bench_ready_encode(&s, buf);
	emit("ready-long-kernel", buf, sizeof(buf));
}
