/*
 * lib_recv_prep.c - prepared receives (rk_prepare_recv, rk_post_recv_prepared,
 * rk_post_recv_prepared_list) on a connected pair in one process:
 *
 *   8 receives, each its own buffer and wr_id, posted as ranges (whole,
 *     wrapping past the end) and as lists out of order, mixed: each SEND
 *     lands in the buffer the post put next and completes with that
 *     receive's wr_id; the receive queue's room adds up after each round
 *   bad arguments (chain of 0, longer than the queue, a range past the
 *     chain, an index twice or past the chain) -> -EINVAL, nothing posted;
 *     more than the free slots -> -ENOBUFS
 *   a failed connection                       -> -ENOTCONN
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lt.h"

#define NRX   8u
#define BLOCK 256
#define BASE  500

static void send_msgs(struct rk_conn *a, uint8_t *src, uint32_t lkey, unsigned k, unsigned tag)
{
	struct rk_error e;
	struct ibv_wc wc;

	for (unsigned j = 0; j < k; j++) {
		struct rk_wr w = {.op = RK_OP_SEND,
				  .flags = RK_WR_SIGNALED | RK_WR_NO_INLINE,
				  .wr_id = j,
				  .addr = src,
				  .len = BLOCK,
				  .lkey = lkey};

		lt_fill(src, BLOCK, tag + j);
		LT_CHECK(rk_post(a, &w, &e), &e);
		lt_wait_ok(a, &wc, 10000);
	}
}

/* The @k receives must complete in @order (buffer indices) with the payloads of send_msgs. */
static void expect(struct rk_conn *b, const uint8_t *rx, const unsigned *order, unsigned k,
		   unsigned tag, const char *what)
{
	struct ibv_wc wc;

	for (unsigned j = 0; j < k; j++) {
		lt_wait_ok(b, &wc, 10000);
		if (!(wc.opcode & IBV_WC_RECV) || wc.wr_id != BASE + order[j] ||
		    wc.byte_len != BLOCK)
			LT_FAIL("%s: receive %u: wr_id %llu (%u bytes), not %u", what, j,
				(unsigned long long)wc.wr_id, wc.byte_len, BASE + order[j]);
		if (lt_check(rx + order[j] * BLOCK, BLOCK, tag + j) != -1)
			LT_FAIL("%s: message %u not in buffer %u", what, j, order[j]);
	}
	if (rk_rq_room(b) != NRX)
		LT_FAIL("%s: receive room %u after every completion, not %u", what, rk_rq_room(b),
			NRX);
}

static void chains(struct rk_device *dev)
{
	struct rk_conn_opts ob = {.rq_depth = NRX};
	struct rk_conn *a, *b;
	struct rk_mr *src, *dst;
	struct rk_recv rs[NRX];
	struct rk_recv_prepared *p;
	struct rk_error e;
	uint8_t *rx;

	lt_pair(dev, NULL, &ob, &a, &b);
	LT_CHECK(rk_mr_alloc(dev, BLOCK, RK_ACCESS_LOCAL, &e, &src), &e);
	LT_CHECK(rk_mr_alloc(dev, NRX * BLOCK, RK_ACCESS_LOCAL, &e, &dst), &e);
	rx = rk_mr_addr(dst);
	for (unsigned i = 0; i < NRX; i++)
		rs[i] = (struct rk_recv){.addr = rx + i * BLOCK,
					 .len = BLOCK,
					 .lkey = rk_mr_lkey(dst),
					 .wr_id = BASE + i};
	LT_CHECK(rk_prepare_recv(b, rs, NRX, &e, &p), &e);

	/* The whole chain, then the same again: each receive is a new one. */
	static const unsigned all[NRX] = {0, 1, 2, 3, 4, 5, 6, 7};
	for (unsigned round = 0; round < 2; round++) {
		memset(rx, 0, NRX * BLOCK);
		if (rk_post_recv_prepared(p, 0, NRX, &e) != NRX)
			LT_FAIL("range 0+8: %s", rk_error_str(&e));
		if (rk_rq_room(b) != 0)
			LT_FAIL("receive room %u with all 8 posted", rk_rq_room(b));
		send_msgs(a, rk_mr_addr(src), rk_mr_lkey(src), NRX, 10 * round);
		expect(b, rx, all, NRX, 10 * round, "range 0+8");
	}

	/* A range that wraps: 5, 6, 7, 0, 1, 2. */
	static const unsigned wrap[] = {5, 6, 7, 0, 1, 2};
	if (rk_post_recv_prepared(p, 5, 6, &e) != 6)
		LT_FAIL("range 5+6: %s", rk_error_str(&e));
	send_msgs(a, rk_mr_addr(src), rk_mr_lkey(src), 6, 40);
	expect(b, rx, wrap, 6, 40, "range 5+6");

	/* A list out of order, then a range over the receives it linked anew. */
	static const uint32_t list[] = {3, 1, 6, 0};
	static const unsigned list_u[] = {3, 1, 6, 0};
	if (rk_post_recv_prepared_list(p, list, 4, &e) != 4)
		LT_FAIL("list 3,1,6,0: %s", rk_error_str(&e));
	send_msgs(a, rk_mr_addr(src), rk_mr_lkey(src), 4, 60);
	expect(b, rx, list_u, 4, 60, "list 3,1,6,0");
	static const unsigned mid[] = {1, 2, 3, 4};
	if (rk_post_recv_prepared(p, 1, 4, &e) != 4)
		LT_FAIL("range 1+4: %s", rk_error_str(&e));
	send_msgs(a, rk_mr_addr(src), rk_mr_lkey(src), 4, 80);
	expect(b, rx, mid, 4, 80, "range 1+4 after a list");
	if (rk_post_recv_prepared(p, 3, 0, &e) != 0 || rk_post_recv_prepared_list(p, list, 0, &e))
		LT_FAIL("posts of 0 receives did something");

	/* Refusals: nothing posted by any of them. */
	struct rk_recv_prepared *q = NULL;
	static const uint32_t twice[] = {2, 4, 2}, past[] = {1, NRX};
	if (rk_prepare_recv(b, rs, 0, &e, &q) != -EINVAL || q)
		LT_FAIL("a chain of 0 receives accepted");
	struct rk_recv many[NRX + 1];
	memcpy(many, rs, sizeof(rs));
	many[NRX] = rs[0];
	if (rk_prepare_recv(b, many, NRX + 1, &e, &q) != -EINVAL || q)
		LT_FAIL("a chain longer than the receive queue accepted");
	if (rk_post_recv_prepared(p, NRX, 1, &e) != -EINVAL)
		LT_FAIL("a range from past the chain accepted");
	if (rk_post_recv_prepared(p, 0, NRX + 1, &e) != -EINVAL)
		LT_FAIL("a range longer than the chain accepted");
	if (rk_post_recv_prepared_list(p, twice, 3, &e) != -EINVAL || !strstr(e.msg, "twice"))
		LT_FAIL("a receive named twice accepted: %s", e.msg);
	if (rk_post_recv_prepared_list(p, past, 2, &e) != -EINVAL || !strstr(e.msg, "past"))
		LT_FAIL("an index past the chain accepted: %s", e.msg);
	if (rk_rq_room(b) != NRX)
		LT_FAIL("a refused post took receive slots: room %u", rk_rq_room(b));
	if (rk_post_recv_prepared(p, 0, 6, &e) != 6)
		LT_FAIL("range 0+6: %s", rk_error_str(&e));
	if (rk_post_recv_prepared(p, 6, 3, &e) != -ENOBUFS)
		LT_FAIL("3 receives into 2 free slots: %s", e.msg);
	static const unsigned six[] = {0, 1, 2, 3, 4, 5};
	send_msgs(a, rk_mr_addr(src), rk_mr_lkey(src), 6, 100);
	expect(b, rx, six, 6, 100, "range 0+6 after the refusals");
	/* A refused list left the links as they were: the whole chain posts in order. */
	if (rk_post_recv_prepared(p, 0, NRX, &e) != NRX)
		LT_FAIL("range 0+8 after the refusals: %s", rk_error_str(&e));
	send_msgs(a, rk_mr_addr(src), rk_mr_lkey(src), NRX, 120);
	expect(b, rx, all, NRX, 120, "range 0+8 after the refusals");
	rk_recv_prepared_free(p);
	rk_recv_prepared_free(NULL);
	printf("prepared receives: ranges, a wrapping range, lists, refusals; every message in "
	       "its buffer with its wr_id\n");
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	rk_mr_dereg(dst);
	rk_mr_dereg(src);
}

/* After a failed WR the connection refuses: -ENOTCONN, as rk_post_recv. */
static void failed_conn(struct rk_device *dev)
{
	struct rk_conn *a, *b;
	struct rk_mr *src, *dst;
	struct rk_recv_prepared *p;
	struct rk_error e;
	struct ibv_wc wc;
	struct rk_recv r1;
	struct rk_wr w;

	lt_pair(dev, NULL, NULL, &a, &b);
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_LOCAL, &e, &src), &e);
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_REMOTE_WRITE, &e, &dst), &e);
	r1 = (struct rk_recv){
	    .addr = rk_mr_addr(src), .len = 64, .lkey = rk_mr_lkey(src), .wr_id = 7};
	LT_CHECK(rk_prepare_recv(a, &r1, 1, &e, &p), &e);
	lt_fail_conn(a, src, dst, &w, &wc);
	if (rk_post_recv_prepared(p, 0, 1, &e) != -ENOTCONN)
		LT_FAIL("prepared receive on a failed connection: %s", e.msg);
	static const uint32_t zero[] = {0};
	if (rk_post_recv_prepared_list(p, zero, 1, &e) != -ENOTCONN)
		LT_FAIL("prepared receive list on a failed connection: %s", e.msg);
	rk_recv_prepared_free(p);
	printf("refusals: on a failed connection\n");
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	rk_mr_dereg(dst);
	rk_mr_dereg(src);
}

int main(void)
{
	struct rk_device *dev;

	lt_prog = "lib_recv_prep";
	dev = lt_open_device(0);
	chains(dev);
	failed_conn(dev);
	rk_device_close(dev);
	printf("lib_recv_prep: all ok\n");
	return 0;
}
