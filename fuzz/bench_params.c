/*
 * bench_params.c - rk bench's PARAMS message, which the server decodes from
 * whoever connects to its TCP port.
 *
 * Asserts, for any bytes:
 *  - bench_params_decode accepts only what bench_params_encode writes back
 *    byte for byte, and what it accepts passes bench_params_check;
 *  - a refusal says why (a NUL-terminated reason, within its buffer);
 *  - the size sweep of accepted parameters ends, within the sizes a 32-bit
 *    size can take, at size_max;
 *  - bench_params_diff against the defaults reports a mismatch exactly when
 *    a compared field differs.
 */
#include <string.h>

#include "bench.h"
#include "fuzz.h"

static int fields_equal(const struct bench_params *a, const struct bench_params *b)
{
	return a->op == b->op && a->mode == b->mode && a->size_min == b->size_min &&
	       a->size_max == b->size_max && a->iters == b->iters &&
	       a->duration_s == b->duration_s && a->warmup == b->warmup && a->batch == b->batch &&
	       a->num_qp == b->num_qp && a->tx_depth == b->tx_depth && a->rx_depth == b->rx_depth &&
	       a->cq_mod == b->cq_mod && a->inline_size == b->inline_size && a->bidir == b->bidir &&
	       a->oob == b->oob && a->resp_size == b->resp_size && a->xfer_op == b->xfer_op &&
	       a->notify == b->notify && a->verify == b->verify;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bench_params p, d, q;
	uint8_t enc[BENCH_PARAMS_LEN];
	char why[128];
	unsigned n = 0;
	uint32_t last = 0;

	memset(why, 0x55, sizeof(why));
	if (bench_params_decode(data, size, &p, why, sizeof(why))) {
		FUZZ_CHECK(memchr(why, '\0', sizeof(why)) && why[0] != '\0');
		return 0;
	}
	FUZZ_CHECK(size == BENCH_PARAMS_LEN);
	FUZZ_CHECK(bench_params_check(&p, why, sizeof(why)) == 0);
	FUZZ_CHECK(bench_params_encode(&p, enc, sizeof(enc)) == BENCH_PARAMS_LEN);
	FUZZ_CHECK(memcmp(enc, data, BENCH_PARAMS_LEN) == 0);
	FUZZ_CHECK(bench_params_decode(enc, sizeof(enc), &q, why, sizeof(why)) == 0);
	FUZZ_CHECK(fields_equal(&p, &q));
	for (uint32_t s = p.size_min; s; s = bench_next_size(&p, s)) {
		FUZZ_CHECK(s > last && s <= p.size_max && ++n <= 33);
		last = s;
	}
	FUZZ_CHECK(last == p.size_max && n == bench_size_count(&p));
	bench_params_default(&d);
	FUZZ_CHECK((bench_params_diff(&d, &p, ~0u, why, sizeof(why)) == 0) == fields_equal(&d, &p));
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct bench_params p;
	uint8_t buf[BENCH_PARAMS_LEN];

	bench_params_default(&p);
	bench_params_encode(&p, buf, sizeof(buf));
	emit("default", buf, sizeof(buf));
	p.size_min = BENCH_ALL_MIN;
	p.size_max = BENCH_MAX_SIZE;
	p.op = BENCH_OP_READ;
	p.num_qp = 4;
	bench_params_encode(&p, buf, sizeof(buf));
	emit("all-read", buf, sizeof(buf));
	bench_params_default(&p);
	p.mode = BENCH_MODE_LAT;
	p.iters = 0;
	p.duration_s = 5;
	p.op = BENCH_OP_SEND;
	p.inline_size = 64;
	bench_params_encode(&p, buf, sizeof(buf));
	emit("lat-duration", buf, sizeof(buf));
	bench_params_default(&p);
	p.op = BENCH_OP_RPC;
	p.size_min = p.size_max = 4096;
	p.resp_size = 1u << 20;
	p.tx_depth = 8;
	bench_params_encode(&p, buf, sizeof(buf));
	emit("rpc-resp-1m", buf, sizeof(buf));
	p.size_min = BENCH_ALL_MIN;
	p.size_max = BENCH_MAX_SIZE;
	p.resp_size = BENCH_RESP_AS_REQ;
	p.mode = BENCH_MODE_LAT;
	bench_params_encode(&p, buf, sizeof(buf));
	emit("rpc-lat-all", buf, sizeof(buf));
	bench_params_default(&p);
	p.op = BENCH_OP_XFER;
	p.xfer_op = BENCH_XFER_WRITE;
	p.notify = p.verify = 1;
	p.size_min = p.size_max = 16384;
	p.batch = 64;
	p.tx_depth = 2;
	p.cq_mod = 16;
	p.num_qp = 2;
	bench_params_encode(&p, buf, sizeof(buf));
	emit("xfer-write-notify", buf, sizeof(buf));
	/* A peer of version 2 (before --op rpc), then 3 (before --op xfer, 72 bytes): refused. */
	bench_params_default(&p);
	bench_params_encode(&p, buf, sizeof(buf));
	buf[5] = 2;
	emit("version-2", buf, sizeof(buf));
	buf[5] = 3;
	buf[7] = 72;
	emit("version-3", buf, 72);
}
