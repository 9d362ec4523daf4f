/*
 * lib_ring.c - the credit ring on a real device: 2000 messages of 0..4096
 * bytes over 2 lanes through 16 slots, delivered in order with every byte
 * checked and credits coming back; 8 built in place (reserve, commit in
 * reverse order) delivered in order all the same; then hostile senders (a forged
 * immediate, a slot of the other lane, a length beyond the slot, a SEND
 * where a write belongs, a forged credit): each loses its own lane with a
 * reason, while the other lane and another ring keep working.
 */
#include <errno.h>
#include <string.h>

#include "lt.h"

#include "../../lib/ring_seq.h"

#define SLOTS 16
#define SIZE  4096
#define NMSG  2000

struct pair {
	struct rk_conn *tx_lane[2], *rx_lane[2];
	struct rk_ring_rx *rx;
	struct rk_ring_tx *tx;
};

static uint32_t msg_len(uint64_t i)
{
	return (uint32_t)((i * 1237) % (SIZE + 1));
}

static void setup(struct rk_device *dev, struct rk_pool *pool, struct pair *p)
{
	struct rk_conn_opts o = {.sq_depth = 32, .rq_depth = 32};
	struct rk_ring_rx_opts ro = {.slots = SLOTS, .slot_size = SIZE};
	struct rk_ring_peer peer;
	struct rk_error e;

	for (int i = 0; i < 2; i++)
		lt_pair(dev, &o, &o, &p->tx_lane[i], &p->rx_lane[i]);
	LT_CHECK(rk_ring_rx_create(p->rx_lane, 2, &ro, &e, &p->rx), &e);
	rk_ring_rx_peer(p->rx, &peer);
	LT_CHECK(rk_ring_tx_create(p->tx_lane, 2, pool, &peer, NULL, &e, &p->tx), &e);
}

static void teardown(struct pair *p)
{
	for (int i = 0; i < 2; i++) {
		rk_conn_destroy(p->tx_lane[i]);
		rk_conn_destroy(p->rx_lane[i]);
	}
	rk_ring_tx_destroy(p->tx);
	rk_ring_rx_destroy(p->rx);
}

/* Poll every CQ of @p once, handing the completions to its ends. Returns lanes lost. */
static int pump(struct pair *p, int *lost_rx, int *lost_tx)
{
	struct ibv_wc wc[16];
	struct rk_error e;
	int lost = 0;

	for (int i = 0; i < 2; i++) {
		int n = rk_cq_poll(rk_conn_cq(p->rx_lane[i]), wc, 16, &e);

		LT_CHECK(n, &e);
		for (int k = 0; k < n; k++) {
			int r = rk_ring_rx_handle(p->rx, &wc[k], &e);

			if (r == 0)
				LT_FAIL("receiver: a completion the ring does not claim");
			if (r < 0) {
				printf("receiver lost lane %d: %s\n", i, e.msg);
				if (lost_rx)
					*lost_rx = i;
				lost++;
			}
		}
		n = rk_cq_poll(rk_conn_cq(p->tx_lane[i]), wc, 16, &e);
		LT_CHECK(n, &e);
		for (int k = 0; k < n; k++) {
			int r = rk_ring_tx_handle(p->tx, &wc[k], &e);

			if (r == 0 && !lost_tx)
				LT_FAIL(
				    "sender: a completion the ring does not claim (wr_id 0x%llx)",
				    (unsigned long long)wc[k].wr_id);
			if (r < 0) {
				printf("sender lost lane %d: %s\n", i, e.msg);
				if (lost_tx)
					*lost_tx = i;
				lost++;
			}
		}
	}
	return lost;
}

/* Send @n messages from @first and take them in order, data checked. */
static void run(struct pair *p, uint64_t first, uint64_t n)
{
	static uint8_t buf[SIZE];
	uint64_t sent = first, got = first;
	struct rk_error e;
	long spins = 0;
	int waited = 0;

	while (got < first + n) {
		uint32_t len;
		int r;

		while (sent < first + n) {
			uint8_t msg[SIZE];

			lt_fill(msg, msg_len(sent), (uint32_t)sent);
			r = rk_ring_tx_send(p->tx, msg, msg_len(sent), &e);
			if (r == -EAGAIN) {
				waited++;
				break;
			}
			LT_CHECK(r, &e);
			sent++;
		}
		if (pump(p, NULL, NULL))
			LT_FAIL("a lane was lost");
		while ((r = rk_ring_rx_recv(p->rx, buf, sizeof(buf), &len, &e)) == 1) {
			if (len != msg_len(got))
				LT_FAIL("message %llu: %u bytes, %u sent", (unsigned long long)got,
					len, msg_len(got));
			if (lt_check(buf, len, (uint32_t)got) >= 0)
				LT_FAIL("message %llu: data differs", (unsigned long long)got);
			got++;
		}
		LT_CHECK(r, &e);
		if (++spins > 100L * 1000 * 1000)
			LT_FAIL("stuck: %llu sent, %llu delivered", (unsigned long long)sent,
				(unsigned long long)got);
	}
	if (rk_ring_rx_delivered(p->rx) != first + n)
		LT_FAIL("delivered count %llu", (unsigned long long)rk_ring_rx_delivered(p->rx));
	if (n >= 2 * SLOTS && !waited)
		LT_FAIL("the sender never ran out of credits");
}

/*
 * Zero copy: reserve @k messages from @first, build them in place, commit
 * them last first; none is delivered while an earlier one is missing, and
 * all arrive in sequence with their data.
 */
static void run_reserved(struct pair *p, uint64_t first, unsigned k)
{
	static uint8_t buf[SIZE];
	struct rk_ring_tx_buf b[8];
	uint64_t got = first;
	struct rk_error e;
	long spins = 0;
	uint32_t len;
	int r;

	for (unsigned i = 0; i < k; i++) {
		while ((r = rk_ring_tx_reserve(p->tx, &b[i], &e)) == -EAGAIN)
			if (pump(p, NULL, NULL))
				LT_FAIL("a lane was lost");
		LT_CHECK(r, &e);
		if (b[i].seq != first + i || b[i].size != SIZE)
			LT_FAIL("reservation %u: sequence %llu, %u bytes", i,
				(unsigned long long)b[i].seq, b[i].size);
		lt_fill(b[i].data, msg_len(b[i].seq), (uint32_t)b[i].seq);
	}
	if (rk_ring_tx_commit(p->tx, &b[0], SIZE + 1, &e) != -EMSGSIZE)
		LT_FAIL("a commit beyond the slot was taken");
	for (unsigned i = k; i-- > 0;) {
		LT_CHECK(rk_ring_tx_commit(p->tx, &b[i], msg_len(b[i].seq), &e), &e);
		if (pump(p, NULL, NULL))
			LT_FAIL("a lane was lost");
		if (i && rk_ring_rx_recv(p->rx, buf, sizeof(buf), &len, &e) != 0)
			LT_FAIL("a message was delivered before message %llu arrived",
				(unsigned long long)first);
	}
	while (got < first + k) {
		if (pump(p, NULL, NULL))
			LT_FAIL("a lane was lost");
		while ((r = rk_ring_rx_recv(p->rx, buf, sizeof(buf), &len, &e)) == 1) {
			if (len != msg_len(got) || lt_check(buf, len, (uint32_t)got) >= 0)
				LT_FAIL("reserved message %llu: %u bytes or data wrong",
					(unsigned long long)got, len);
			got++;
		}
		LT_CHECK(r, &e);
		if (++spins > 100L * 1000 * 1000)
			LT_FAIL("stuck: %llu of %u reserved messages delivered",
				(unsigned long long)(got - first), k);
	}
}

/* What a hostile sender puts on lane @lane of @p, bypassing its ring end. */
static void hostile(struct pair *p, int lane, const struct rk_wr *wr, const char *what,
		    struct pair *other)
{
	struct rk_error e;
	int lost_rx = -1, lost_tx = -1;
	long spins = 0;

	LT_CHECK(rk_post(p->tx_lane[lane], wr, &e), &e);
	while (lost_rx < 0 && ++spins < 100L * 1000 * 1000)
		pump(p, &lost_rx, &lost_tx); /* the hostile WR's own completion is nobody's */
	if (lost_rx != lane)
		LT_FAIL("%s: lane %d not dropped (%d)", what, lane, lost_rx);
	if (rk_ring_rx_lane_error(p->rx, (unsigned)lane, &e) >= 0)
		LT_FAIL("%s: no error recorded", what);
	if (rk_ring_rx_lane_error(p->rx, (unsigned)!lane, NULL) != 0)
		LT_FAIL("%s: the other lane was lost too", what);
	if (rk_conn_state(p->rx_lane[!lane]) != RK_CONN_CONNECTED)
		LT_FAIL("%s: the other lane's connection is %s", what,
			rk_conn_state_str(rk_conn_state(p->rx_lane[!lane])));
	printf("%s: lane %d dropped (%s); lane %d still up\n", what, lane, e.msg, !lane);
	/* Another ring on the same device is untouched. */
	run(other, rk_ring_rx_delivered(other->rx), 40);
}

int main(void)
{
	struct rk_pool_opts po = {.access = RK_ACCESS_LOCAL, .class_sizes = {SIZE}};
	struct rk_ring_peer peer;
	struct rk_device *dev;
	struct rk_pool *pool;
	struct pair good, bad;
	struct rk_mr *src;
	struct rk_error e;

	lt_prog = "lib_ring";
	dev = lt_open_device(0);
	LT_CHECK(rk_pool_create(dev, &po, &e, &pool), &e);
	LT_CHECK(rk_mr_alloc(dev, 2 * SIZE, RK_ACCESS_LOCAL, &e, &src), &e);
	setup(dev, pool, &good);
	run(&good, 0, NMSG);
	printf("%d messages over 2 lanes in order: ok\n", NMSG);
	run_reserved(&good, NMSG, 8);
	printf("8 messages built in place, committed last first, delivered in order: ok\n");

	/* Each hostile case on a fresh ring, with the sender's end bypassed. */
	struct {
		const char *what;
		int lane;
		enum rk_op op;
		uint32_t imm, len;
	} cases[] = {
	    {"forged immediate (slot 5 for sequence 1)", 1, RK_OP_WRITE_IMM,
	     5u << RK_RING_SEQ_BITS | 1, 8},
	    {"slot not owned (sequence 0 on lane 1)", 1, RK_OP_WRITE_IMM, 0, 8},
	    {"length beyond the slot", 0, RK_OP_WRITE_IMM, 0, SIZE + 1},
	    {"replayed sequence far ahead of the window", 0, RK_OP_WRITE_IMM,
	     rk__ring_imm_encode(SLOTS, SLOTS * 2), 8},
	    {"a SEND where a write belongs", 0, RK_OP_SEND, 0, 0},
	};
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		setup(dev, pool, &bad);
		rk_ring_rx_peer(bad.rx, &peer);
		struct rk_wr wr = {.op = cases[c].op,
				   .flags = RK_WR_SIGNALED,
				   .wr_id = 99,
				   .addr = rk_mr_addr(src),
				   .len = cases[c].len,
				   .lkey = rk_mr_lkey(src),
				   .remote_addr = peer.addr,
				   .rkey = peer.rkey,
				   .imm = cases[c].imm};
		hostile(&bad, cases[c].lane, &wr, cases[c].what, &good);
		teardown(&bad);
	}

	/* A forged credit: the sender drops the lane it came on. */
	setup(dev, pool, &bad);
	{
		struct rk_wr wr = {
		    .op = RK_OP_SEND_IMM, .flags = RK_WR_SIGNALED, .wr_id = 98, .imm = 1000};
		int lost_tx = -1;
		long spins = 0;

		LT_CHECK(rk_post(bad.rx_lane[1], &wr, &e), &e);
		while (lost_tx < 0 && ++spins < 100L * 1000 * 1000) {
			struct ibv_wc wc[4];
			int n = rk_cq_poll(rk_conn_cq(bad.tx_lane[1]), wc, 4, &e);

			for (int k = 0; k < n; k++)
				if (rk_ring_tx_handle(bad.tx, &wc[k], &e) < 0)
					lost_tx = 1;
		}
		if (lost_tx != 1 || rk_ring_tx_lane_error(bad.tx, 1, &e) >= 0)
			LT_FAIL("a forged credit was taken");
		printf("forged credit: %s\n", e.msg);
		if (rk_ring_tx_lane_error(bad.tx, 0, NULL) != 0 ||
		    rk_ring_tx_credits(bad.tx) != SLOTS)
			LT_FAIL("the forged credit changed the other lane or the credits");
	}
	teardown(&bad);
	run(&good, rk_ring_rx_delivered(good.rx), 100);
	teardown(&good);
	rk_mr_dereg(src);
	rk_pool_destroy(pool);
	rk_device_close(dev);
	printf("lib_ring: ok\n");
	return 0;
}
