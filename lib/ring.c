/*
 * ring.c - the credit ring over verbs (ring.h); the sequence, credit and
 * reorder rules are ring_seq.c's.
 *
 * Each lane has a receive set (msgbuf.c): 0-byte receives at the receiver
 * for the writes with immediate, at the sender for the credits; with
 * shared_rq the caller's set takes them and hands over those with an
 * immediate (rk_ring_*_msg), and the checks are the same. A lane that
 * breaks a rule is disconnected at once, which flushes its work; its
 * flushed completions are then claimed and ignored.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring_seq.h"
#include "rk_internal.h"

#define CREDIT_RECVS	 8 /* sender: 0-byte receives per lane for credits */
#define CREDITS_INFLIGHT 4 /* receiver: credit sends in flight per lane */
#define MAX_SLOT_SIZE	 (8u << 20)

struct rk__ring_lane {
	struct rk_conn *conn;	/* NULL: a receiver's lane not attached yet */
	struct rk_recv_set *rs; /* NULL with shared_rq */
	struct rk_send_set *ss; /* sender only */
	unsigned credits_out;	/* receiver: credit sends not yet completed */
	int lost;		/* negative errno once dropped */
	int keep;		/* dropped: the caller disconnects it */
	struct rk_error why;
};

struct rk_ring_rx {
	struct rk_ring_rx_seq seq;
	struct rk_mr *mr;
	int shared_rq, caller_disconnects;
	uint32_t credit_every;
	uint64_t credited; /* the delivered count last sent as credit */
	unsigned next_credit_lane;
	unsigned nlanes;
	struct rk__ring_lane lanes[RK_RING_MAX_LANES];
};

struct rk_ring_tx {
	struct rk_ring_tx_seq seq;
	struct rk_ring_peer peer;
	struct rk_ring_tx_opts opts;
	unsigned nlanes;
	struct rk__ring_lane lanes[RK_RING_MAX_LANES];
};

static uint64_t wrid_base(unsigned tag, unsigned lane)
{
	return (uint64_t)tag << 48 | (uint64_t)lane << 32;
}

/* The lane a wr_id of kind @tag names, or -1. */
static int wrid_lane(uint64_t wr_id, unsigned tag, unsigned nlanes)
{
	unsigned lane = (unsigned)(wr_id >> 32) & 0xffff;

	if ((unsigned)(wr_id >> 48) != tag || lane >= nlanes)
		return -1;
	return (int)lane;
}

/* Drop @l: log why, keep the reason, disconnect (its work is flushed). */
static int lose(struct rk__ring_lane *l, unsigned idx, int e, struct rk_error *err, const char *fmt,
		...) __attribute__((format(printf, 5, 6)));

static int lose(struct rk__ring_lane *l, unsigned idx, int e, struct rk_error *err, const char *fmt,
		...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!l->lost) {
		rk__err_set(&l->why, e, "ring", "lane %u (qp 0x%x) dropped: %s", idx,
			    rk_conn_qp_num(l->conn), msg);
		rk__err_set_qp(&l->why, rk_conn_qp_num(l->conn));
		rk_warn("%s", l->why.msg);
		l->lost = -e;
		if (!l->keep)
			rk_conn_disconnect(l->conn, 0, NULL);
	}
	if (err)
		*err = l->why;
	return l->lost;
}

/* @late: lanes after the first may be NULL (attached later). */
static int check_lanes(struct rk_conn *const *lanes, unsigned n, uint32_t slots, int late,
		       struct rk_error *err, const char *op)
{
	if (n == 0 || n > RK_RING_MAX_LANES || rk__ring_geometry_ok(slots, n))
		return rk__err_set(err, EINVAL, op,
				   "%u lanes for %u slots (up to %u, a multiple of the lanes)", n,
				   slots, RK_RING_MAX_SLOTS);
	if (!lanes[0])
		return rk__err_set(err, EINVAL, op, "no lane 0");
	for (unsigned i = 1; i < n; i++) {
		if (!lanes[i] && late)
			continue;
		if (!lanes[i])
			return rk__err_set(err, EINVAL, op, "no lane %u", i);
		if (lanes[i]->pd != lanes[0]->pd)
			return rk__err_set(err, EINVAL, op, "lane %u is in another PD", i);
	}
	return 0;
}

/* The receiver's lane @i is @conn from now on: its receives, unless shared. */
static int rx_lane_init(struct rk_ring_rx *rx, unsigned i, struct rk_conn *conn,
			struct rk_error *err)
{
	struct rk_msgbuf_opts ro = {.count = rx->seq.slots / rx->nlanes,
				    .wr_id_base = wrid_base(RK_RING_WRID_RX, i)};

	if (!rx->shared_rq) {
		int r = rk_recv_set_create(conn, NULL, &ro, err, &rx->lanes[i].rs);

		if (r)
			return r; /* the lane stays free */
	}
	rx->lanes[i].keep = rx->caller_disconnects;
	rx->lanes[i].conn = conn;
	return 0;
}

int rk_ring_rx_create(struct rk_conn *const *lanes, unsigned nlanes,
		      const struct rk_ring_rx_opts *opts, struct rk_error *err,
		      struct rk_ring_rx **out)
{
	struct rk_ring_rx_opts def = {0};
	struct rk_conn *c0 = lanes[0];
	uint32_t slots, size;
	struct rk_ring_rx *rx;
	int r;

	*out = NULL;
	if (!opts)
		opts = &def;
	slots = opts->slots ? opts->slots : 64;
	size = opts->slot_size ? opts->slot_size : 4096;
	r = check_lanes(lanes, nlanes, slots, 1, err, "rk_ring_rx_create");
	if (r)
		return r;
	if (size > MAX_SLOT_SIZE)
		return rk__err_set(err, EINVAL, "rk_ring_rx_create", "slots of %u bytes (max %u)",
				   size, MAX_SLOT_SIZE);
	rx = calloc(1, sizeof(*rx));
	if (!rx)
		return rk__err_set(err, ENOMEM, "rk_ring_rx_create", NULL);
	rx->nlanes = nlanes;
	rx->shared_rq = opts->shared_rq;
	rx->caller_disconnects = opts->caller_disconnects;
	rx->credit_every = opts->credit_every ? opts->credit_every : (slots / 4 ? slots / 4 : 1);
	if (rx->credit_every > slots)
		rx->credit_every = slots;
	if (rk__rseq_rx_init(&rx->seq, slots, nlanes, size)) {
		free(rx);
		return rk__err_set(err, ENOMEM, "rk_ring_rx_create", NULL);
	}
	if (c0->opts.pd)
		r = rk_mr_alloc_pd(c0->opts.pd, (size_t)slots * size, RK_ACCESS_REMOTE_WRITE, err,
				   &rx->mr);
	else
		r = rk_mr_alloc(c0->dev, (size_t)slots * size, RK_ACCESS_REMOTE_WRITE, err,
				&rx->mr);
	if (r)
		goto fail;
	for (unsigned i = 0; i < nlanes; i++) {
		if (!lanes[i])
			continue;
		r = rx_lane_init(rx, i, lanes[i], err);
		if (r)
			goto fail;
	}
	*out = rx;
	return 0;
fail:
	rk_ring_rx_destroy(rx);
	return r;
}

int rk_ring_rx_attach(struct rk_ring_rx *rx, unsigned lane, struct rk_conn *conn,
		      struct rk_error *err)
{
	if (lane >= rx->nlanes || rx->lanes[lane].conn || !conn)
		return rk__err_set(err, EINVAL, "rk_ring_rx_attach", "lane %u of %u is taken", lane,
				   rx->nlanes);
	if (conn->pd != rx->lanes[0].conn->pd)
		return rk__err_set(err, EINVAL, "rk_ring_rx_attach", "lane %u is in another PD",
				   lane);
	return rx_lane_init(rx, lane, conn, err);
}

void rk_ring_rx_destroy(struct rk_ring_rx *rx)
{
	if (!rx)
		return;
	for (unsigned i = 0; i < rx->nlanes; i++)
		rk_recv_set_destroy(rx->lanes[i].rs);
	rk_mr_dereg(rx->mr);
	rk__rseq_rx_fini(&rx->seq);
	free(rx);
}

void rk_ring_rx_peer(const struct rk_ring_rx *rx, struct rk_ring_peer *p)
{
	p->addr = (uint64_t)(uintptr_t)rk_mr_addr(rx->mr);
	p->rkey = rk_mr_rkey(rx->mr);
	p->slots = rx->seq.slots;
	p->slot_size = rx->seq.slot_size;
	p->lanes = rx->nlanes;
}

/* What message @m on lane @i says, if it is a slot written: 1, or the lane is lost. */
static int rx_written(struct rk_ring_rx *rx, unsigned i, const struct rk_msg *m,
		      struct rk_error *err)
{
	struct rk__ring_lane *l = &rx->lanes[i];
	enum rk_ring_verdict v;
	uint64_t seq;
	uint32_t slot;

	if (m->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !m->has_imm)
		return lose(l, i, EPROTO, err, "a SEND where a write with immediate belongs");
	v = rk__rseq_rx_accept(&rx->seq, i, m->imm, m->len, &seq, &slot);
	if (v != RK_RING_OK)
		return lose(l, i, EPROTO, err, "%s (immediate 0x%08x, %u bytes)",
			    rk__ring_verdict_str(v), m->imm, m->len);
	return 1;
}

/* A WRITE WITH IMMEDIATE (or whatever came instead) on lane @i, into our receives. */
static int rx_arrival(struct rk_ring_rx *rx, unsigned i, const struct ibv_wc *wc,
		      struct rk_error *err)
{
	struct rk__ring_lane *l = &rx->lanes[i];
	struct rk_msg m;
	int r;

	if (!l->rs)
		return 0;
	r = rk_recv_set_take(l->rs, wc, &m, err);
	if (r == 0)
		return 0;
	if (l->lost) { /* flushed, or arrived before the disconnect took effect */
		if (r > 0)
			rk_recv_set_release(l->rs, m.index, NULL);
		return 1;
	}
	if (r < 0)
		return lose(l, i, -r, err, "%s", err && err->msg[0] ? err->msg : "receive failed");
	/* A 0-byte receive only completes for a SEND of 0 bytes or a write with immediate. */
	r = rx_written(rx, i, &m, err);
	if (r < 0)
		return r;
	/* Room for the next write is the sender's credits' business: repost at once. */
	r = rk_recv_set_release(l->rs, m.index, err);
	if (r)
		return lose(l, i, -r, err, "reposting a receive failed");
	return 1;
}

int rk_ring_rx_msg(struct rk_ring_rx *rx, unsigned lane, const struct rk_msg *msg,
		   struct rk_error *err)
{
	if (!msg->has_imm)
		return 0;
	if (lane >= rx->nlanes || !rx->lanes[lane].conn)
		return rk__err_set(err, EINVAL, "rk_ring_rx_msg", "no lane %u", lane);
	if (rx->lanes[lane].lost)
		return 1; /* arrived before the disconnect took effect */
	return rx_written(rx, lane, msg, err);
}

/*
 * Send the delivered count over the next lane with room for it. A lane
 * whose post fails is lost (its error says why) and the next one tried;
 * with none free now, the next delivery or credit completion tries again.
 */
static void send_credit(struct rk_ring_rx *rx)
{
	uint64_t delivered = rx->seq.next;

	for (unsigned k = 0; k < rx->nlanes; k++) {
		unsigned i = (rx->next_credit_lane + k) % rx->nlanes;
		struct rk__ring_lane *l = &rx->lanes[i];
		struct rk_wr wr = {.op = RK_OP_SEND_IMM,
				   .flags = RK_WR_SIGNALED,
				   .wr_id = wrid_base(RK_RING_WRID_CREDIT, i),
				   .imm = rk__ring_credit_imm(delivered)};
		struct rk_error e;
		int r;

		if (!l->conn || l->lost || l->credits_out >= CREDITS_INFLIGHT)
			continue;
		r = rk_post(l->conn, &wr, &e);
		if (r == -ENOBUFS)
			continue;
		if (r) {
			lose(l, i, -r, NULL, "posting a credit failed: %s", e.msg);
			continue;
		}
		l->credits_out++;
		rx->credited = delivered;
		rx->next_credit_lane = i + 1;
		return;
	}
}

/* Credits are due: credit_every deliveries not told yet. */
static int credit_due(const struct rk_ring_rx *rx)
{
	return rx->seq.next - rx->credited >= rx->credit_every;
}

int rk_ring_rx_handle(struct rk_ring_rx *rx, const struct ibv_wc *wc, struct rk_error *err)
{
	int i = wrid_lane(wc->wr_id, RK_RING_WRID_RX, rx->nlanes);
	struct rk__ring_lane *l;

	if (i >= 0)
		return rx_arrival(rx, (unsigned)i, wc, err);
	i = wrid_lane(wc->wr_id, RK_RING_WRID_CREDIT, rx->nlanes);
	if (i < 0 || (wc->wr_id & 0xffffffffu) != 0)
		return 0;
	l = &rx->lanes[i];
	if (!l->conn || wc->qp_num != rk_conn_qp_num(l->conn))
		return 0;
	if (l->credits_out)
		l->credits_out--;
	if (wc->status != IBV_WC_SUCCESS && !l->lost)
		return lose(l, (unsigned)i, EIO, err, "credit send failed: %s",
			    ibv_wc_status_str(wc->status));
	/* Room again: a credit held back for want of it goes now. */
	if (credit_due(rx))
		send_credit(rx);
	return 1;
}

int rk_ring_rx_recv(struct rk_ring_rx *rx, void *buf, size_t cap, uint32_t *len,
		    struct rk_error *err)
{
	uint32_t slot, n;

	if (!rk__rseq_rx_peek(&rx->seq, &slot, &n))
		return 0;
	if (n > cap)
		return rk__err_set(err, EMSGSIZE, "rk_ring_rx_recv",
				   "%u-byte message, %zu-byte buffer", n, cap);
	/* Out of the peer-writable slot first: the caller parses only the copy. */
	memcpy(buf, (const char *)rk_mr_addr(rx->mr) + (size_t)slot * rx->seq.slot_size, n);
	*len = n;
	rk__rseq_rx_consume(&rx->seq);
	if (credit_due(rx))
		send_credit(rx);
	return 1;
}

int rk_ring_rx_lane_error(const struct rk_ring_rx *rx, unsigned lane, struct rk_error *err)
{
	if (lane >= rx->nlanes)
		return rk__err_set(err, EINVAL, "rk_ring_rx_lane_error", "no lane %u", lane);
	if (err)
		*err = rx->lanes[lane].why;
	return rx->lanes[lane].lost;
}

uint64_t rk_ring_rx_delivered(const struct rk_ring_rx *rx)
{
	return rx->seq.next;
}

int rk_ring_tx_create(struct rk_conn *const *lanes, unsigned nlanes, struct rk_pool *pool,
		      const struct rk_ring_peer *peer, const struct rk_ring_tx_opts *opts,
		      struct rk_error *err, struct rk_ring_tx **out)
{
	struct rk_ring_tx *tx;
	int r;

	*out = NULL;
	r = check_lanes(lanes, nlanes, peer->slots, 0, err, "rk_ring_tx_create");
	if (r)
		return r;
	if (peer->lanes != nlanes || !peer->slot_size || peer->slot_size > MAX_SLOT_SIZE)
		return rk__err_set(err, EINVAL, "rk_ring_tx_create",
				   "the receiver has %u lanes and %u-byte slots; we have %u lanes",
				   peer->lanes, peer->slot_size, nlanes);
	tx = calloc(1, sizeof(*tx));
	if (!tx)
		return rk__err_set(err, ENOMEM, "rk_ring_tx_create", NULL);
	tx->peer = *peer;
	if (opts)
		tx->opts = *opts;
	tx->nlanes = nlanes;
	rk__rseq_tx_init(&tx->seq, peer->slots, nlanes);
	for (unsigned i = 0; i < nlanes; i++) {
		struct rk_msgbuf_opts so = {.count = peer->slots / nlanes,
					    .size = peer->slot_size,
					    .wr_id_base = wrid_base(RK_RING_WRID_TX, i)};
		struct rk_msgbuf_opts ro = {.count = CREDIT_RECVS,
					    .wr_id_base = wrid_base(RK_RING_WRID_TXC, i)};

		tx->lanes[i].conn = lanes[i];
		r = 0;
		if (!tx->opts.caller_buffers)
			r = rk_send_set_create(lanes[i], pool, &so, err, &tx->lanes[i].ss);
		if (!r && !tx->opts.shared_rq)
			r = rk_recv_set_create(lanes[i], NULL, &ro, err, &tx->lanes[i].rs);
		if (r) {
			rk_ring_tx_destroy(tx);
			return r;
		}
	}
	*out = tx;
	return 0;
}

void rk_ring_tx_destroy(struct rk_ring_tx *tx)
{
	if (!tx)
		return;
	for (unsigned i = 0; i < tx->nlanes; i++) {
		rk_send_set_destroy(tx->lanes[i].ss);
		rk_recv_set_destroy(tx->lanes[i].rs);
	}
	free(tx);
}

int rk_ring_tx_reserve(struct rk_ring_tx *tx, struct rk_ring_tx_buf *buf, struct rk_error *err)
{
	struct rk_send_buf b;
	struct rk__ring_lane *l;

	if (!rk__rseq_tx_credits(&tx->seq))
		return -EAGAIN;
	/* The lane the next sequence must take: it needs a free buffer first. */
	l = &tx->lanes[(uint32_t)(tx->seq.sent % tx->seq.slots) % tx->nlanes];
	if (l->lost) {
		if (err)
			*err = l->why;
		return -ENOTCONN;
	}
	if (tx->opts.caller_buffers) {
		b.data = NULL;
		b.index = UINT32_MAX;
	} else if (rk_send_set_get(l->ss, &b)) {
		return -EAGAIN;
	}
	rk__rseq_tx_reserve(&tx->seq, &buf->seq, &buf->slot, &buf->lane, &buf->imm);
	buf->data = b.data;
	buf->size = tx->peer.slot_size;
	buf->index = b.index;
	return 0;
}

int rk_ring_tx_commit(struct rk_ring_tx *tx, const struct rk_ring_tx_buf *buf, uint32_t len,
		      struct rk_error *err)
{
	struct rk__ring_lane *l = &tx->lanes[buf->lane % tx->nlanes];
	struct rk_wr wr = {.op = RK_OP_WRITE_IMM,
			   .len = len,
			   .remote_addr = tx->peer.addr + (uint64_t)buf->slot * tx->peer.slot_size,
			   .rkey = tx->peer.rkey,
			   .imm = buf->imm};
	int r;

	if (tx->opts.caller_buffers)
		return rk__err_set(err, EINVAL, "rk_ring_tx_commit",
				   "caller_buffers: post rk_ring_tx_write_wr's request yourself");
	if (len > tx->peer.slot_size)
		return rk__err_set(err, EMSGSIZE, "rk_ring_tx_commit", "%u bytes, %u-byte slots",
				   len, tx->peer.slot_size);
	r = rk_send_set_post(l->ss, buf->index, &wr, err);
	if (r) {
		rk_send_set_put(l->ss, buf->index);
		/* The sequence is spent: the receiver would wait for it forever. */
		return lose(l, buf->lane, -r, err, "posting message %llu failed",
			    (unsigned long long)buf->seq);
	}
	return 0;
}

int rk_ring_tx_write_wr(const struct rk_ring_tx *tx, const struct rk_ring_tx_buf *buf, uint32_t len,
			struct rk_wr *wr)
{
	if (len > tx->peer.slot_size)
		return -EMSGSIZE;
	wr->op = RK_OP_WRITE_IMM;
	wr->len = len;
	wr->remote_addr = tx->peer.addr + (uint64_t)buf->slot * tx->peer.slot_size;
	wr->rkey = tx->peer.rkey;
	wr->imm = buf->imm;
	return 0;
}

int rk_ring_tx_send(struct rk_ring_tx *tx, const void *data, uint32_t len, struct rk_error *err)
{
	struct rk_ring_tx_buf b;
	int r;

	if (tx->opts.caller_buffers)
		return rk__err_set(err, EINVAL, "rk_ring_tx_send", "caller_buffers: no buffers");
	if (len > tx->peer.slot_size)
		return rk__err_set(err, EMSGSIZE, "rk_ring_tx_send", "%u bytes, %u-byte slots", len,
				   tx->peer.slot_size);
	r = rk_ring_tx_reserve(tx, &b, err);
	if (r)
		return r;
	memcpy(b.data, data, len);
	return rk_ring_tx_commit(tx, &b, len, err);
}

/* Message @m came on lane @i where a credit belongs: 1, or the lane is lost. */
static int tx_credit(struct rk_ring_tx *tx, unsigned i, const struct rk_msg *m,
		     struct rk_error *err)
{
	struct rk__ring_lane *l = &tx->lanes[i];

	if (m->opcode != IBV_WC_RECV || !m->has_imm || m->len)
		return lose(l, i, EPROTO, err, "not a credit (opcode %d, %u bytes)", m->opcode,
			    m->len);
	if (rk__rseq_tx_credit(&tx->seq, m->imm))
		return lose(l, i, EPROTO, err, "credit for %u deliveries, %llu messages sent",
			    m->imm, (unsigned long long)tx->seq.sent);
	return 1;
}

int rk_ring_tx_msg(struct rk_ring_tx *tx, unsigned lane, const struct rk_msg *msg,
		   struct rk_error *err)
{
	if (!msg->has_imm)
		return 0;
	if (lane >= tx->nlanes)
		return rk__err_set(err, EINVAL, "rk_ring_tx_msg", "no lane %u", lane);
	if (tx->lanes[lane].lost)
		return 1;
	return tx_credit(tx, lane, msg, err);
}

int rk_ring_tx_handle(struct rk_ring_tx *tx, const struct ibv_wc *wc, struct rk_error *err)
{
	int i = wrid_lane(wc->wr_id, RK_RING_WRID_TX, tx->nlanes);
	struct rk__ring_lane *l;
	struct rk_msg m;
	int r;

	if (i >= 0) {
		l = &tx->lanes[i];
		if (!l->ss || !rk_send_set_complete(l->ss, wc))
			return 0;
		if (wc->status != IBV_WC_SUCCESS && !l->lost)
			return lose(l, (unsigned)i, EIO, err, "a slot write failed: %s",
				    ibv_wc_status_str(wc->status));
		return 1;
	}
	i = wrid_lane(wc->wr_id, RK_RING_WRID_TXC, tx->nlanes);
	if (i < 0 || !tx->lanes[i].rs)
		return 0;
	l = &tx->lanes[i];
	r = rk_recv_set_take(l->rs, wc, &m, err);
	if (r == 0)
		return 0;
	if (l->lost) {
		if (r > 0)
			rk_recv_set_release(l->rs, m.index, NULL);
		return 1;
	}
	if (r < 0)
		return lose(l, (unsigned)i, -r, err, "%s",
			    err && err->msg[0] ? err->msg : "receive failed");
	r = tx_credit(tx, (unsigned)i, &m, err);
	if (r < 0)
		return r;
	r = rk_recv_set_release(l->rs, m.index, err);
	if (r)
		return lose(l, (unsigned)i, -r, err, "reposting a receive failed");
	return 1;
}

uint32_t rk_ring_tx_credits(const struct rk_ring_tx *tx)
{
	return rk__rseq_tx_credits(&tx->seq);
}

uint32_t rk_ring_tx_unacked(const struct rk_ring_tx *tx)
{
	return (uint32_t)(tx->seq.sent - tx->seq.acked);
}

int rk_ring_tx_lane_error(const struct rk_ring_tx *tx, unsigned lane, struct rk_error *err)
{
	if (lane >= tx->nlanes)
		return rk__err_set(err, EINVAL, "rk_ring_tx_lane_error", "no lane %u", lane);
	if (err)
		*err = tx->lanes[lane].why;
	return tx->lanes[lane].lost;
}
