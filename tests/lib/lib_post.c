/*
 * lib_post.c - prepared work requests (rk_prepare / rk_post_prepared) on a
 * connected pair in one process:
 *
 *   a chain of 4 WRITEs, posted 32 times with selective signaling: every
 *     completion names a wr_id the post gave, the send queue never
 *     overflows, the data lands where rk_prepared_set_addr points
 *   a full queue            -> -ENOBUFS, room back after the completions
 *   an inline SEND          -> the receiver gets the payload of the time of
 *                              the post, with its own wr_id
 *   bad arguments           -> -EINVAL
 *   a failed WR (bad rkey)  -> its wr_id in the completion, then -ENOTCONN
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "lt.h"

#define CHAIN  4
#define BLOCK  1024
#define POSTS  32
#define SQ     16
#define SIGNAL 4

/* Poll @c's CQ until a completion comes; it must succeed. */
static void take_one(struct rk_conn *c, struct ibv_wc *wc)
{
	lt_wait_ok(c, wc, 10000);
}

static void chain_writes(struct rk_device *dev)
{
	struct rk_conn_opts o = {.sq_depth = SQ, .signal_every = SIGNAL};
	struct rk_conn *a, *b;
	struct rk_mr *src, *dst;
	struct rk_wr wrs[CHAIN];
	struct rk_prepared *p;
	struct rk_error e;
	struct ibv_wc wc;
	uint64_t base = 1000, done = 0;
	unsigned posts = 0, full = 0;
	uint8_t *s, *d;

	lt_pair(dev, &o, NULL, &a, &b);
	LT_CHECK(rk_mr_alloc(dev, 2 * CHAIN * BLOCK, RK_ACCESS_LOCAL, &e, &src), &e);
	LT_CHECK(rk_mr_alloc(dev, 2 * CHAIN * BLOCK, RK_ACCESS_REMOTE_WRITE, &e, &dst), &e);
	s = rk_mr_addr(src);
	d = rk_mr_addr(dst);
	lt_fill(s, 2 * CHAIN * BLOCK, 7);
	memset(d, 0, 2 * CHAIN * BLOCK);
	for (unsigned i = 0; i < CHAIN; i++)
		wrs[i] = (struct rk_wr){.op = RK_OP_WRITE,
					.wr_id = 77, /* not used: the post names them */
					.addr = s + i * BLOCK,
					.len = BLOCK,
					.lkey = rk_mr_lkey(src),
					.flags = RK_WR_NO_INLINE,
					.remote_addr = (uintptr_t)d + i * BLOCK,
					.rkey = rk_mr_rkey(dst)};
	LT_CHECK(rk_prepare(a, wrs, CHAIN, &e, &p), &e);
	/* Posted until a queue of 16 is full (4 chains), then only as room comes back. */
	while (posts < POSTS) {
		int r = rk_post_prepared(p, base + (uint64_t)posts * CHAIN,
					 posts == POSTS - 1 ? RK_WR_SIGNALED : 0, &e);

		if (r == -ENOBUFS) {
			full++;
			take_one(a, &wc);
			if (wc.wr_id < base || wc.wr_id >= base + (uint64_t)posts * CHAIN ||
			    wc.wr_id < done)
				LT_FAIL("completion wr_id %llu: not posted, or out of order",
					(unsigned long long)wc.wr_id);
			done = wc.wr_id + 1;
			continue;
		}
		if (r != CHAIN)
			LT_FAIL("rk_post_prepared -> %d: %s", r, rk_error_str(&e));
		posts++;
		if (rk_sq_room(a) > SQ)
			LT_FAIL("send room %u of %u", rk_sq_room(a), (unsigned)SQ);
	}
	if (!full)
		LT_FAIL("the queue never filled: the test checks nothing of room");
	/* The last chain was signaled on request: its last WR completes. */
	while (done != base + (uint64_t)POSTS * CHAIN) {
		take_one(a, &wc);
		if (wc.wr_id < done || wc.wr_id >= base + (uint64_t)POSTS * CHAIN)
			LT_FAIL("completion wr_id %llu after %llu", (unsigned long long)wc.wr_id,
				(unsigned long long)done);
		done = wc.wr_id + 1;
	}
	if (rk_sq_room(a) != SQ)
		LT_FAIL("send room %u after every completion, not %u", rk_sq_room(a), (unsigned)SQ);
	if (lt_check(d, CHAIN * BLOCK, 7) != -1)
		LT_FAIL("the WRITEs' data is wrong at %ld", lt_check(d, CHAIN * BLOCK, 7));
	/* WR 2 moved to the second half of both buffers. */
	LT_CHECK(
	    rk_prepared_set_addr(p, 2, s + (CHAIN + 2) * BLOCK, (uintptr_t)d + (CHAIN + 2) * BLOCK),
	    NULL);
	if (rk_prepared_set_addr(p, CHAIN, s, (uintptr_t)d) != -EINVAL)
		LT_FAIL("rk_prepared_set_addr past the chain accepted");
	if (rk_post_prepared(p, 5000, RK_WR_SIGNALED, &e) != CHAIN)
		LT_FAIL("post after set_addr: %s", rk_error_str(&e));
	do
		take_one(a, &wc);
	while (wc.wr_id != 5000 + CHAIN - 1);
	if (memcmp(d + (CHAIN + 2) * BLOCK, s + (CHAIN + 2) * BLOCK, BLOCK))
		LT_FAIL("the moved WRITE did not land at its new address");
	rk_prepared_free(p);
	rk_prepared_free(NULL);
	printf("chain of %u WRITEs: %u posts, queue full %u times, every completion named\n",
	       (unsigned)CHAIN, (unsigned)POSTS, full);
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	rk_mr_dereg(dst);
	rk_mr_dereg(src);
}

static void inline_send(struct rk_device *dev)
{
	struct rk_conn *a, *b;
	struct rk_mr *rx;
	struct rk_prepared *p;
	struct rk_error e;
	struct ibv_wc wc;
	char msg[16];
	struct rk_wr wr = {.op = RK_OP_SEND_IMM,
			   .flags = RK_WR_SIGNALED,
			   .addr = msg,
			   .len = sizeof(msg),
			   .imm = 0xabcd};

	lt_pair(dev, NULL, NULL, &a, &b);
	if (rk_conn_max_inline(a) < sizeof(msg)) {
		printf("inline SEND: skipped (max inline %u)\n", rk_conn_max_inline(a));
		goto out;
	}
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_LOCAL, &e, &rx), &e);
	LT_CHECK(rk_prepare(a, &wr, 1, &e, &p), &e);
	for (unsigned i = 0; i < 3; i++) {
		LT_CHECK(rk_post_recv(b, rk_mr_addr(rx), 4096, rk_mr_lkey(rx), 40 + i, &e), &e);
		/* Inline: the payload is the buffer's at the post, no key needed. */
		snprintf(msg, sizeof(msg), "message %u", i);
		if (rk_post_prepared(p, 20 + i, 0, &e) != 1)
			LT_FAIL("inline post: %s", rk_error_str(&e));
		snprintf(msg, sizeof(msg), "changed");
		take_one(a, &wc);
		if (wc.wr_id != 20 + i)
			LT_FAIL("send completion wr_id %llu, not %u", (unsigned long long)wc.wr_id,
				20 + i);
		take_one(b, &wc);
		if (wc.wr_id != 40 + i || wc.byte_len != sizeof(msg) ||
		    !(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != 0xabcd)
			LT_FAIL("receive: wr_id %llu, %u bytes", (unsigned long long)wc.wr_id,
				wc.byte_len);
		snprintf(msg, sizeof(msg), "message %u", i);
		if (memcmp(rk_mr_addr(rx), msg, strlen(msg) + 1))
			LT_FAIL("received '%.16s', not '%s'", (char *)rk_mr_addr(rx), msg);
	}
	rk_prepared_free(p);
	rk_mr_dereg(rx);
	printf("inline SEND with immediate: 3 posts, payloads and wr_ids right\n");
out:
	rk_conn_destroy(a);
	rk_conn_destroy(b);
}

static void refusals(struct rk_device *dev)
{
	struct rk_conn *a, *b;
	struct rk_mr *src, *dst;
	struct rk_prepared *p;
	struct rk_error e;
	struct ibv_wc wc;
	struct rk_wr wr = {.op = RK_OP_WRITE, .len = 64};
	struct rk_wr many[SQ + 1];

	lt_pair(dev, &(struct rk_conn_opts){.sq_depth = SQ}, NULL, &a, &b);
	if (rk_prepare(a, &wr, 0, &e, &p) != -EINVAL || p)
		LT_FAIL("a chain of 0 accepted");
	memset(many, 0, sizeof(many));
	if (rk_prepare(a, many, SQ + 1, &e, &p) != -EINVAL || p)
		LT_FAIL("a chain longer than the queue accepted");
	wr.op = (enum rk_op)99;
	if (rk_prepare(a, &wr, 1, &e, &p) != -EINVAL || !strstr(e.msg, "unknown op"))
		LT_FAIL("an unknown op accepted: %s", e.msg);
	/* A WRITE with a bad rkey fails; its wr_id comes back, then the connection refuses. */
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_LOCAL, &e, &src), &e);
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_REMOTE_WRITE, &e, &dst), &e);
	wr = (struct rk_wr){.op = RK_OP_WRITE,
			    .flags = RK_WR_SIGNALED | RK_WR_NO_INLINE,
			    .addr = rk_mr_addr(src),
			    .len = 4096,
			    .lkey = rk_mr_lkey(src),
			    .remote_addr = (uintptr_t)rk_mr_addr(dst),
			    .rkey = rk_mr_rkey(dst) ^ 0x5a5a00};
	LT_CHECK(rk_prepare(a, &wr, 1, &e, &p), &e);
	if (rk_post_prepared(p, 9, 0, &e) != 1)
		LT_FAIL("post: %s", rk_error_str(&e));
	LT_CHECK(rk_cq_wait(rk_conn_cq(a), &wc, 1, 10000, &e), &e);
	if (wc.status != IBV_WC_REM_ACCESS_ERR || wc.wr_id != 9)
		LT_FAIL("bad rkey gave %s (wr_id %llu)", ibv_wc_status_str(wc.status),
			(unsigned long long)wc.wr_id);
	if (rk_post_prepared(p, 10, 0, &e) != -ENOTCONN || !strstr(e.msg, "remote access error"))
		LT_FAIL("post after failure: %s", e.msg);
	rk_prepared_free(p);
	printf("refusals: chain of 0, too long, unknown op, after a failed WR\n");
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	rk_mr_dereg(dst);
	rk_mr_dereg(src);
}

int main(void)
{
	struct rk_device *dev;

	lt_prog = "lib_post";
	dev = lt_open_device(0);
	chain_writes(dev);
	inline_send(dev);
	refusals(dev);
	rk_device_close(dev);
	printf("lib_post: all ok\n");
	return 0;
}
