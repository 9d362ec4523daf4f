/*
 * lib_msgbuf.c - receive and send sets on a real device: 300 messages of
 * 0..4096 bytes (some with an immediate) through 4 send buffers into 8
 * receive buffers, every byte checked, buffers reposted and reused (one at
 * a time, then in batches of two from the set's kept WRs, as the RPC
 * server reposts); 0-byte receives consumed by WRITE WITH IMMEDIATE; a
 * connection's failure flushing the receive set; foreign completions and
 * bad indexes refused.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "lt.h"

#define SIZE  4096
#define NMSG  300
#define NRECV 8
#define NSEND 4

/* Private (rk_internal.h): the RPC server's batched repost. */
int rk__recv_set_release_batch(struct rk_recv_set *rs, uint32_t index, uint32_t batch,
			       struct rk_error *err);

static uint32_t msg_len(int i)
{
	return (uint32_t)((i * 397) % (SIZE + 1));
}

/* Poll one CQ once; hand every completion to the sets given. */
static int poll_once(struct rk_conn *c, struct rk_send_set *ss, struct rk_recv_set *rs,
		     struct rk_msg *got, int *ngot)
{
	struct ibv_wc wc[8];
	struct rk_error e;
	int n = rk_cq_poll(rk_conn_cq(c), wc, 8, &e);

	LT_CHECK(n, &e);
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			rk_error_from_wc(&e, &wc[i]);
			LT_FAIL("completion failed: %s", e.msg);
		}
		if (ss && rk_send_set_complete(ss, &wc[i]) > 0)
			continue;
		if (rs) {
			int r = rk_recv_set_take(rs, &wc[i], &got[*ngot], &e);

			LT_CHECK(r, &e);
			if (r == 1) {
				(*ngot)++;
				continue;
			}
		}
		LT_FAIL("a completion no set claims (wr_id 0x%llx)",
			(unsigned long long)wc[i].wr_id);
	}
	return n;
}

/* @batch 0: each buffer reposted alone; else @batch at a time (rk__recv_set_release_batch). */
static void messages(struct rk_device *dev, struct rk_pool *pool, uint32_t batch)
{
	struct rk_conn_opts o = {.sq_depth = 16, .rq_depth = 16};
	struct rk_msgbuf_opts ro = {.count = NRECV, .size = SIZE};
	struct rk_msgbuf_opts so = {.count = NSEND, .size = SIZE, .signal_every = 3};
	struct rk_conn *a, *b;
	struct rk_recv_set *rs;
	struct rk_send_set *ss;
	struct rk_msg got[NRECV];
	struct rk_error e;
	int sent = 0, recvd = 0, full = 0, spins = 0;

	lt_pair(dev, &o, &o, &a, &b);
	LT_CHECK(rk_recv_set_create(b, pool, &ro, &e, &rs), &e);
	LT_CHECK(rk_send_set_create(a, pool, &so, &e, &ss), &e);
	if (rk_recv_set_posted(rs) != NRECV || rk_send_set_free_count(ss) != NSEND)
		LT_FAIL("sets not set up");
	while (recvd < NMSG) {
		struct rk_send_buf sb;
		int ngot = 0;

		while (sent < NMSG) {
			int r = rk_send_set_get(ss, &sb);
			struct rk_wr wr = {.op = sent % 10 == 0 ? RK_OP_SEND_IMM : RK_OP_SEND,
					   .len = msg_len(sent),
					   .imm = 0xabc00000u + (uint32_t)sent};

			if (r == -ENOBUFS) {
				full++;
				break;
			}
			LT_CHECK(r, NULL);
			if (sb.size != SIZE)
				LT_FAIL("send buffer of %u bytes", sb.size);
			lt_fill(sb.data, wr.len, (uint32_t)sent);
			LT_CHECK(rk_send_set_post(ss, sb.index, &wr, &e), &e);
			sent++;
		}
		poll_once(a, ss, NULL, NULL, NULL);
		poll_once(b, NULL, rs, got, &ngot);
		for (int i = 0; i < ngot; i++) {
			uint32_t want = msg_len(recvd);

			if (got[i].len != want)
				LT_FAIL("message %d: %u bytes, %u sent", recvd, got[i].len, want);
			if (lt_check(got[i].data, want, (uint32_t)recvd) >= 0)
				LT_FAIL("message %d: data differs", recvd);
			if ((recvd % 10 == 0) != !!got[i].has_imm ||
			    (got[i].has_imm && got[i].imm != 0xabc00000u + (uint32_t)recvd))
				LT_FAIL("message %d: immediate %d 0x%x", recvd, got[i].has_imm,
					got[i].imm);
			if (batch) {
				LT_CHECK(rk__recv_set_release_batch(rs, got[i].index, batch, &e),
					 &e);
				if (rk__recv_set_release_batch(rs, got[i].index, batch, NULL) !=
				    -EINVAL)
					LT_FAIL("a buffer released twice in a batch");
			} else {
				LT_CHECK(rk_recv_set_release(rs, got[i].index, &e), &e);
			}
			if (rk_recv_set_release(rs, got[i].index, NULL) != -EINVAL)
				LT_FAIL("a buffer released twice");
			recvd++;
		}
		if (++spins > 50 * 1000 * 1000)
			LT_FAIL("stuck at %d sent, %d received", sent, recvd);
	}
	/* The last sends complete too: every buffer comes back. */
	for (spins = 0; rk_send_set_free_count(ss) != NSEND; spins++) {
		poll_once(a, ss, NULL, NULL, NULL);
		if (spins > 50 * 1000 * 1000)
			LT_FAIL("%u send buffers never came back",
				NSEND - rk_send_set_free_count(ss));
	}
	if (!full)
		LT_FAIL("the send set never ran out of buffers");
	if (rk_recv_set_posted(rs) != NRECV)
		LT_FAIL("%u receives posted at the end", rk_recv_set_posted(rs));
	/* Not handed out: refused. */
	if (rk_send_set_post(ss, 0, &(struct rk_wr){.op = RK_OP_SEND}, NULL) != -EINVAL ||
	    rk_send_set_put(ss, NSEND) != -EINVAL ||
	    rk_recv_set_release(rs, NRECV, NULL) != -EINVAL)
		LT_FAIL("a bad index was accepted");
	/* A foreign completion is not the set's. */
	struct ibv_wc foreign = {.wr_id = 12345, .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV};
	struct rk_msg m;
	if (rk_recv_set_take(rs, &foreign, &m, NULL) != 0 ||
	    rk_send_set_complete(ss, &foreign) != 0)
		LT_FAIL("a foreign completion was claimed");

	/* The connection fails: every posted receive comes back flushed, none reposted. */
	LT_CHECK(rk_conn_disconnect(b, 1000, &e), &e);
	for (spins = 0; rk_recv_set_posted(rs) && spins < 20000; spins++) {
		struct ibv_wc wc[8];
		int n = rk_cq_poll(rk_conn_cq(b), wc, 8, &e);

		LT_CHECK(n, &e);
		for (int i = 0; i < n; i++)
			if (rk_recv_set_take(rs, &wc[i], &m, NULL) >= 0)
				LT_FAIL("a flushed receive was handed over");
		if (!n)
			usleep(1000);
	}
	if (rk_recv_set_posted(rs))
		LT_FAIL("%u receives not flushed", rk_recv_set_posted(rs));
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	rk_send_set_destroy(ss);
	rk_recv_set_destroy(rs);
	printf("messages: %d through %d send and %d receive buffers (ran out %d times, reposted "
	       "%u at a time): ok\n",
	       NMSG, NSEND, NRECV, full, batch ? batch : 1);
}

static void write_imm(struct rk_device *dev, struct rk_pool *pool)
{
	struct rk_msgbuf_opts ro = {.count = 4}; /* 0-byte receives */
	struct rk_msgbuf_opts so = {.count = 2, .size = SIZE};
	struct rk_conn *a, *b;
	struct rk_recv_set *rs;
	struct rk_send_set *ss;
	struct rk_mr *dst;
	struct rk_error e;
	struct rk_msg got[4];
	int ngot = 0, spins = 0;

	lt_pair(dev, NULL, NULL, &a, &b);
	LT_CHECK(rk_mr_alloc(dev, 4 * SIZE, RK_ACCESS_LOCAL | RK_ACCESS_REMOTE_WRITE, &e, &dst),
		 &e);
	memset(rk_mr_addr(dst), 0, 4 * SIZE);
	LT_CHECK(rk_recv_set_create(b, NULL, &ro, &e, &rs), &e);
	LT_CHECK(rk_send_set_create(a, pool, &so, &e, &ss), &e);
	for (int i = 0; i < 4;) {
		struct rk_send_buf sb;
		struct rk_msg m[4];
		int n = 0;

		if (rk_send_set_get(ss, &sb) == 0) {
			struct rk_wr wr = {.op = RK_OP_WRITE_IMM,
					   .len = 1000 + (uint32_t)i,
					   .remote_addr = (uint64_t)(uintptr_t)rk_mr_addr(dst) +
							  (uint64_t)i * SIZE,
					   .rkey = rk_mr_rkey(dst),
					   .imm = 7000u + (uint32_t)i};

			lt_fill(sb.data, wr.len, 900u + (uint32_t)i);
			LT_CHECK(rk_send_set_post(ss, sb.index, &wr, &e), &e);
			i++;
		}
		poll_once(a, ss, NULL, NULL, NULL);
		poll_once(b, NULL, rs, m, &n);
		for (int k = 0; k < n; k++)
			got[ngot++] = m[k];
	}
	while (ngot < 4 && ++spins < 50 * 1000 * 1000) {
		struct rk_msg m[4];
		int n = 0;

		poll_once(a, ss, NULL, NULL, NULL);
		poll_once(b, NULL, rs, m, &n);
		for (int k = 0; k < n; k++)
			got[ngot++] = m[k];
	}
	if (ngot != 4)
		LT_FAIL("%d of 4 writes with immediate seen", ngot);
	for (int i = 0; i < 4; i++) {
		if (got[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM || !got[i].has_imm ||
		    got[i].imm != 7000u + (uint32_t)i || got[i].len != 1000u + (uint32_t)i ||
		    got[i].data)
			LT_FAIL("write %d: opcode %d imm %d/%u len %u", i, got[i].opcode,
				got[i].has_imm, got[i].imm, got[i].len);
		if (lt_check((char *)rk_mr_addr(dst) + (size_t)i * SIZE, got[i].len,
			     900u + (uint32_t)i) >= 0)
			LT_FAIL("write %d: data differs", i);
		LT_CHECK(rk_recv_set_release(rs, got[i].index, &e), &e);
	}
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	rk_send_set_destroy(ss);
	rk_recv_set_destroy(rs);
	rk_mr_dereg(dst);
	printf("write with immediate into 0-byte receives: ok\n");
}

static void bad_options(struct rk_device *dev, struct rk_pool *pool)
{
	struct rk_conn_opts o = {.rq_depth = 4};
	struct rk_msgbuf_opts too_many = {.count = 5, .size = 64};
	struct rk_msgbuf_opts bad_base = {.count = 1, .wr_id_base = 7};
	struct rk_msgbuf_opts too_big = {.count = 1, .size = (size_t)64 << 20};
	struct rk_conn *c;
	struct rk_recv_set *rs;
	struct rk_send_set *ss;
	struct rk_error e;

	LT_CHECK(rk_conn_create(dev, &o, &e, &c), &e);
	if (rk_recv_set_create(c, pool, &too_many, &e, &rs) != -ENOBUFS || rs)
		LT_FAIL("more receives than the queue holds");
	if (rk_recv_set_create(c, pool, &bad_base, &e, &rs) != -EINVAL)
		LT_FAIL("a wr_id base with low bits");
	if (rk_send_set_create(c, pool, &too_big, &e, &ss) != -E2BIG || ss)
		LT_FAIL("a send buffer beyond the pool's classes: %s", rk_error_str(&e));
	rk_conn_destroy(c);
}

int main(void)
{
	struct rk_pool_opts po = {.access = RK_ACCESS_LOCAL};
	struct rk_pool_stats st;
	struct rk_device *dev;
	struct rk_pool *pool;
	struct rk_error e;

	lt_prog = "lib_msgbuf";
	dev = lt_open_device(0);
	LT_CHECK(rk_pool_create(dev, &po, &e, &pool), &e);
	messages(dev, pool, 0);
	messages(dev, pool, 2);
	write_imm(dev, pool);
	bad_options(dev, pool);
	rk_pool_get_stats(pool, &st);
	if (st.in_use)
		LT_FAIL("%llu pool buffers not returned", (unsigned long long)st.in_use);
	rk_pool_destroy(pool);
	rk_device_close(dev);
	printf("lib_msgbuf: ok\n");
	return 0;
}
