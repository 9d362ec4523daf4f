/*
 * lib_ring_shared.c - the credit ring sharing its lanes with the caller, as
 * a protocol on top of it does (rk copy): 3 lanes over 6 slots (not a power
 * of two), lanes 1 and 2 attached after the ring was made, the caller's own
 * receive sets on the same receive queues (shared_rq) with the caller's own
 * messages (SENDs without immediate) going both ways between the ring's
 * traffic, and the writes built in the caller's registered memory and
 * posted by a thread per lane (caller_buffers). 3000 messages of 0..4096
 * bytes arrive in order, every byte checked, and every message of the
 * caller's arrives as the caller's.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "lt.h"

#define LANES 3
#define SLOTS 6
#define SIZE  4096
#define NMSG  3000
#define NOTE  50 /* the sender's lane threads send a note of their own every NOTE posts */
#define ACK   10 /* the receiver answers every ACK deliveries with a message of its own */
#define RECVS 16 /* the caller's receives per lane: the ring's traffic and the caller's */

struct test_lane {
	struct rk_conn *tx, *rx;
	struct rk_recv_set *tx_rs, *rx_rs; /* the caller's, on the ring's queues */
	struct rk_send_set *tx_ss, *rx_ss;
	pthread_t th;
	struct rk_ring_tx_buf q[SLOTS]; /* reservations for this lane's thread to post */
	unsigned qhead, qtail;
	unsigned posted, notes_got;
};

static struct {
	pthread_mutex_t mu;
	struct rk_ring_tx *tx;
	struct rk_mr *stage; /* the sender's slots: buffer s for slot s */
	int busy[SLOTS];     /* stage buffer s written and its write not completed */
	unsigned notes_sent; /* sender -> receiver messages of the caller's */
	unsigned acks_got;   /* receiver -> sender messages of the caller's */
	int stop;
	struct test_lane lanes[LANES];
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint32_t msg_len(uint64_t i)
{
	return (uint32_t)((i * 2671) % (SIZE + 1));
}

static void send_own(struct rk_send_set *ss, const char *text)
{
	struct rk_wr wr = {.op = RK_OP_SEND, .len = (uint32_t)strlen(text) + 1};
	struct rk_send_buf b;
	struct rk_error e;

	if (rk_send_set_get(ss, &b))
		LT_FAIL("no free send buffer for \"%s\"", text);
	memcpy(b.data, text, wr.len);
	LT_CHECK(rk_send_set_post(ss, b.index, &wr, &e), &e);
}

/* A sender lane's thread: post what was reserved for it, and handle its CQ. */
static void *lane_main(void *arg)
{
	struct test_lane *l = arg;
	struct ibv_wc wc[16];
	struct rk_error e;

	pthread_mutex_lock(&g.mu);
	while (!g.stop) {
		while (l->qhead != l->qtail) {
			struct rk_ring_tx_buf b = l->q[l->qhead++ % SLOTS];
			struct rk_wr wr = {.flags = RK_WR_SIGNALED,
					   .wr_id = b.slot,
					   .addr = (char *)rk_mr_addr(g.stage) + b.slot * SIZE,
					   .lkey = rk_mr_lkey(g.stage)};

			int note = ++l->posted % NOTE == 0;

			if (rk_ring_tx_write_wr(g.tx, &b, msg_len(b.seq), &wr))
				LT_FAIL("write_wr refused %u bytes", msg_len(b.seq));
			/* Counted before it goes: the main thread waits for every note counted. */
			g.notes_sent += (unsigned)note;
			/* The post is where the device works: outside the lock. */
			pthread_mutex_unlock(&g.mu);
			LT_CHECK(rk_post(l->tx, &wr, &e), &e);
			if (note)
				send_own(l->tx_ss, "note");
			pthread_mutex_lock(&g.mu);
		}
		pthread_mutex_unlock(&g.mu);
		int n = rk_cq_poll(rk_conn_cq(l->tx), wc, 16, &e);

		LT_CHECK(n, &e);
		pthread_mutex_lock(&g.mu);
		for (int k = 0; k < n; k++) {
			struct rk_msg m;
			int r;

			if (wc[k].status != IBV_WC_SUCCESS)
				LT_FAIL("sender: %s", ibv_wc_status_str(wc[k].status));
			if (rk_send_set_complete(l->tx_ss, &wc[k]))
				continue;
			r = rk_recv_set_take(l->tx_rs, &wc[k], &m, &e);
			if (r == 0) { /* a write of ours: its stage buffer is free again */
				if (wc[k].wr_id >= SLOTS || !g.busy[wc[k].wr_id])
					LT_FAIL("sender: stray completion 0x%llx",
						(unsigned long long)wc[k].wr_id);
				g.busy[wc[k].wr_id] = 0;
				continue;
			}
			LT_CHECK(r, &e);
			r = rk_ring_tx_msg(g.tx, (unsigned)(l - g.lanes), &m, &e);
			LT_CHECK(r, &e);
			if (r == 0) {
				if (m.len != 4 || memcmp(m.data, "ack", 4))
					LT_FAIL("sender: a message of ours came mangled");
				g.acks_got++;
			}
			LT_CHECK(rk_recv_set_release(l->tx_rs, m.index, &e), &e);
		}
	}
	pthread_mutex_unlock(&g.mu);
	return NULL;
}

/* The receiver's side of every lane, on the main thread. */
static void pump_rx(struct rk_ring_rx *rx)
{
	struct ibv_wc wc[16];
	struct rk_error e;

	for (unsigned i = 0; i < LANES; i++) {
		struct test_lane *l = &g.lanes[i];
		int n = rk_cq_poll(rk_conn_cq(l->rx), wc, 16, &e);

		LT_CHECK(n, &e);
		for (int k = 0; k < n; k++) {
			struct rk_msg m;
			int r;

			if (wc[k].status != IBV_WC_SUCCESS)
				LT_FAIL("receiver: %s", ibv_wc_status_str(wc[k].status));
			if (rk_send_set_complete(l->rx_ss, &wc[k]))
				continue;
			r = rk_recv_set_take(l->rx_rs, &wc[k], &m, &e);
			if (r == 0) {
				if (rk_ring_rx_handle(rx, &wc[k], &e) != 1)
					LT_FAIL("receiver: a completion nobody claims");
				continue;
			}
			LT_CHECK(r, &e);
			r = rk_ring_rx_msg(rx, i, &m, &e);
			if (r < 0)
				LT_FAIL("receiver lane %u: opcode %d, %u bytes, immediate %d 0x%x, "
					"wr_id 0x%llx: %s",
					i, m.opcode, m.len, m.has_imm, m.imm,
					(unsigned long long)wc[k].wr_id, e.msg);
			if (r == 0) {
				if (m.len != 5 || memcmp(m.data, "note", 5))
					LT_FAIL("receiver: a message of ours came mangled");
				l->notes_got++;
			}
			LT_CHECK(rk_recv_set_release(l->rx_rs, m.index, &e), &e);
		}
	}
}

int main(void)
{
	struct rk_pool_opts po = {.access = RK_ACCESS_LOCAL, .class_sizes = {64}};
	struct rk_conn_opts co = {.sq_depth = 32, .rq_depth = 32};
	struct rk_msgbuf_opts ro = {.count = RECVS, .size = 64};
	struct rk_msgbuf_opts so = {.count = 8, .size = 64, .wr_id_base = 0x77ull << 48};
	struct rk_ring_rx_opts rxo = {.slots = SLOTS, .slot_size = SIZE, .shared_rq = 1};
	struct rk_ring_tx_opts txo = {.shared_rq = 1, .caller_buffers = 1};
	struct rk_conn *rx_lanes[LANES] = {0}, *tx_lanes[LANES];
	static uint8_t buf[SIZE];
	struct rk_ring_peer peer;
	struct rk_ring_rx *rx;
	struct rk_device *dev;
	struct rk_pool *pool;
	struct rk_error e;
	uint64_t sent = 0, got = 0;
	unsigned notes = 0;
	long spins = 0;

	lt_prog = "lib_ring_shared";
	dev = lt_open_device(0);
	LT_CHECK(rk_pool_create(dev, &po, &e, &pool), &e);
	LT_CHECK(rk_mr_alloc(dev, SLOTS * SIZE, RK_ACCESS_LOCAL, &e, &g.stage), &e);
	for (unsigned i = 0; i < LANES; i++) {
		struct test_lane *l = &g.lanes[i];

		lt_pair(dev, &co, &co, &l->tx, &l->rx);
		LT_CHECK(rk_recv_set_create(l->tx, pool, &ro, &e, &l->tx_rs), &e);
		LT_CHECK(rk_recv_set_create(l->rx, pool, &ro, &e, &l->rx_rs), &e);
		LT_CHECK(rk_send_set_create(l->tx, pool, &so, &e, &l->tx_ss), &e);
		LT_CHECK(rk_send_set_create(l->rx, pool, &so, &e, &l->rx_ss), &e);
		tx_lanes[i] = l->tx;
	}
	/* The ring before lanes 1 and 2 exist, as a session that learns of them later. */
	rx_lanes[0] = g.lanes[0].rx;
	LT_CHECK(rk_ring_rx_create(rx_lanes, LANES, &rxo, &e, &rx), &e);
	if (rk_ring_rx_attach(rx, 0, g.lanes[0].rx, &e) != -EINVAL)
		LT_FAIL("lane 0 attached twice");
	for (unsigned i = 1; i < LANES; i++)
		LT_CHECK(rk_ring_rx_attach(rx, i, g.lanes[i].rx, &e), &e);
	rk_ring_rx_peer(rx, &peer);
	if (peer.slots != SLOTS || peer.lanes != LANES)
		LT_FAIL("peer: %u slots, %u lanes", peer.slots, peer.lanes);
	LT_CHECK(rk_ring_tx_create(tx_lanes, LANES, NULL, &peer, &txo, &e, &g.tx), &e);
	for (unsigned i = 0; i < LANES; i++)
		if (pthread_create(&g.lanes[i].th, NULL, lane_main, &g.lanes[i]))
			LT_FAIL("pthread_create");

	while (got < NMSG) {
		uint32_t len;
		int r;

		pthread_mutex_lock(&g.mu);
		while (sent < NMSG) {
			struct rk_ring_tx_buf b;

			/* The next slot's stage buffer must be done with its last write. */
			if (g.busy[sent % SLOTS])
				break;
			/* What is in flight and what may go make up the ring. */
			if (rk_ring_tx_unacked(g.tx) + rk_ring_tx_credits(g.tx) != SLOTS)
				LT_FAIL("%u unacked + %u credits", rk_ring_tx_unacked(g.tx),
					rk_ring_tx_credits(g.tx));
			r = rk_ring_tx_reserve(g.tx, &b, &e);
			if (r == -EAGAIN)
				break;
			LT_CHECK(r, &e);
			if (b.data || b.seq != sent || b.slot != sent % SLOTS)
				LT_FAIL("reservation %llu: slot %u", (unsigned long long)sent,
					b.slot);
			lt_fill((char *)rk_mr_addr(g.stage) + b.slot * SIZE, msg_len(b.seq),
				(uint32_t)b.seq);
			g.busy[b.slot] = 1;
			g.lanes[b.lane].q[g.lanes[b.lane].qtail++ % SLOTS] = b;
			sent++;
		}
		pthread_mutex_unlock(&g.mu);
		pump_rx(rx);
		while ((r = rk_ring_rx_recv(rx, buf, sizeof(buf), &len, &e)) == 1) {
			if (len != msg_len(got) || lt_check(buf, len, (uint32_t)got) >= 0)
				LT_FAIL("message %llu: %u bytes or data wrong",
					(unsigned long long)got, len);
			if (++got % ACK == 0)
				send_own(g.lanes[got / ACK % LANES].rx_ss, "ack");
		}
		LT_CHECK(r, &e);
		if (++spins > 200L * 1000 * 1000)
			LT_FAIL("stuck: %llu sent, %llu delivered", (unsigned long long)sent,
				(unsigned long long)got);
	}
	/* The caller's last messages may still be on their way. */
	for (spins = 0; spins < 100L * 1000 * 1000; spins++) {
		pthread_mutex_lock(&g.mu);
		int done = g.acks_got == NMSG / ACK;

		notes = 0;
		for (unsigned i = 0; i < LANES; i++)
			notes += g.lanes[i].notes_got;
		done = done && notes == g.notes_sent;
		pthread_mutex_unlock(&g.mu);
		if (done)
			break;
		pump_rx(rx);
	}
	pthread_mutex_lock(&g.mu);
	g.stop = 1;
	pthread_mutex_unlock(&g.mu);
	for (unsigned i = 0; i < LANES; i++)
		pthread_join(g.lanes[i].th, NULL);
	if (g.acks_got != NMSG / ACK || notes != g.notes_sent || notes < NMSG / NOTE - LANES)
		LT_FAIL("the caller's messages: %u of %d acks, %u of %u notes", g.acks_got,
			NMSG / ACK, notes, g.notes_sent);
	printf("%d messages over %d lanes and %d slots in order, %u + %u messages of the "
	       "caller's on the same queues: ok\n",
	       NMSG, LANES, SLOTS, notes, g.acks_got);
	for (unsigned i = LANES; i-- > 0;) {
		rk_conn_destroy(g.lanes[i].tx);
		rk_conn_destroy(g.lanes[i].rx);
	}
	rk_ring_tx_destroy(g.tx);
	rk_ring_rx_destroy(rx);
	for (unsigned i = LANES; i-- > 0;) {
		rk_send_set_destroy(g.lanes[i].rx_ss);
		rk_send_set_destroy(g.lanes[i].tx_ss);
		rk_recv_set_destroy(g.lanes[i].rx_rs);
		rk_recv_set_destroy(g.lanes[i].tx_rs);
	}
	rk_mr_dereg(g.stage);
	rk_pool_destroy(pool);
	rk_device_close(dev);
	printf("lib_ring_shared: ok\n");
	return 0;
}
