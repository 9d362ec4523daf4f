/*
 * bench_ready.c - READY, what each side tells the other once its QPs are
 * connected: device and kernel names, port, GID index, RoCE version, path
 * MTU, and the registered buffer's address, length and rkey, which the
 * data path then uses. The peer's is checked before use: names made
 * printable, the buffer of the agreed length and not wrapping, the rest in
 * range.
 */
#include <errno.h>
#include <string.h>

#include <rdmakit/wire.h>

#include "bench_conn.h"
#include "cli.h"

void bench_ready_encode(const struct bench_side_info *s, uint8_t *b)
{
	memset(b, 0, BENCH_READY_LEN);
	memcpy(b, s->dev, sizeof(s->dev));
	memcpy(b + 32, s->kernel, sizeof(s->kernel));
	rk_put32(b + 96, s->ib_port);
	rk_put32(b + 100, (uint32_t)s->gid_index);
	rk_put32(b + 104, s->roce_v2);
	rk_put32(b + 108, s->mtu);
	rk_put64(b + 112, s->buf_addr);
	rk_put64(b + 120, s->buf_len);
	rk_put32(b + 128, s->buf_rkey);
}

/* A NUL-padded name from the peer: printable before we print it. */
static void clean_text(char *dst, const uint8_t *src, size_t len)
{
	cli_clean_text(dst, len, src, strnlen((const char *)src, len));
}

int bench_ready_decode(struct bench_ctx *c, const uint8_t *b, struct rk_error *err)
{
	struct bench_side_info *s = &c->peer;
	/* --op rpc has no buffer of rk bench's own: its READY says 0 bytes. */
	uint64_t want = c->p->op == BENCH_OP_RPC ? 0 : bench_buffer_len(c->p);

	clean_text(s->dev, b, sizeof(s->dev));
	clean_text(s->kernel, b + 32, sizeof(s->kernel));
	s->ib_port = rk_get32(b + 96);
	s->gid_index = (int32_t)rk_get32(b + 100);
	s->roce_v2 = rk_get32(b + 104);
	s->mtu = rk_get32(b + 108);
	s->buf_addr = rk_get64(b + 112);
	s->buf_len = rk_get64(b + 120);
	s->buf_rkey = rk_get32(b + 128);
	if (s->buf_len != want)
		return bench_fail(err, EPROTO, "the peer's buffer is %llu bytes, expected %llu",
				  (unsigned long long)s->buf_len, (unsigned long long)want);
	if (s->buf_addr > UINT64_MAX - s->buf_len)
		return bench_fail(err, EPROTO, "the peer's buffer address wraps around");
	if (s->roce_v2 > 1 || s->ib_port > 255 || (s->mtu && !rk_mtu_from_bytes(s->mtu)))
		return bench_fail(err, EPROTO, "the peer's READY message is out of range");
	return 0;
}

int bench_ready_exchange(struct bench_ctx *c, struct rk_error *err)
{
	uint8_t ready[BENCH_READY_LEN];
	struct bench_msg m;
	int r;

	bench_ready_encode(&c->me, ready);
	r = bench_ctl_send(&c->ctl, BM_READY, ready, BENCH_READY_LEN, bench_step_ms(c), err);
	r = r ?: bench_ctl_expect(&c->ctl, BM_READY, BENCH_READY_LEN, &m, bench_step_ms(c), err);
	return r ?: bench_ready_decode(c, m.data, err);
}
