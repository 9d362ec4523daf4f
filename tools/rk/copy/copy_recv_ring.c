/*
 * copy_recv_ring.c - a receiving session's protocol on the wire (see
 * copy_recv_int.h): the HELLO that sizes the ring, slots taken strictly in
 * sequence, one CREDIT per slot with the results of its records, and the
 * handling of every completion.
 *
 * A slot arrives as a WRITE WITH IMMEDIATE completion; its header block and
 * data are copied out of the ring into memory the peer cannot reach, and
 * only that copy is parsed, verified and written (copy_files.c). With
 * lanes, slots may arrive out of sequence; they wait in a small reorder
 * window (never larger than the ring) and are handled in sequence, so the
 * files see the same order as with one lane.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include <rdmakit/cq.h>
#include <rdmakit/mr.h>
#include <rdmakit/post.h>

#include "cli.h"
#include "copy_recv_int.h"

#define SEND_TAG (1ull << 32)

int rcv_send_msg(struct session *s, unsigned lane, const void *msg, size_t len,
		 struct rk_error *err)
{
	uint8_t *base = rk_mr_addr(s->sbufs);
	struct rk_wr wr = {.op = RK_OP_SEND, .flags = RK_WR_SIGNALED};

	for (unsigned i = 0; i < NSEND; i++) {
		if (s->send_busy[i])
			continue;
		memcpy(base + (size_t)i * CP_MSG_MAX, msg, len);
		wr.wr_id = SEND_TAG | i;
		wr.addr = base + (size_t)i * CP_MSG_MAX;
		wr.len = (uint32_t)len;
		wr.lkey = rk_mr_lkey(s->sbufs);
		s->send_busy[i] = 1;
		return rk_post(s->lanes[lane].conn, &wr, err);
	}
	/* Cannot happen with one CREDIT per slot; a client breaking that is gone. */
	return -ENOBUFS;
}

void rcv_send_error(struct session *s, uint16_t code, const char *text)
{
	uint8_t msg[CP_MSG_MAX];
	int n = cp_error_encode(code, text, msg, sizeof(msg));

	if (n > 0)
		rcv_send_msg(s, 0, msg, (size_t)n, NULL);
}

/* Its turn has come: act on a slot's records, give it back with results. */
static int handle_slot(struct session *s, const struct pending *p, struct rk_error *err)
{
	uint8_t msg[CP_MSG_MAX];
	struct cp_slot_reader rd;
	struct cp_credit c;
	struct cp_rec r;
	const uint8_t *base;
	int n;

	if (s->fs.bye)
		return -EPROTO;
	base = (const uint8_t *)rk_mr_addr(s->ring) + (size_t)p->slot * s->stride;
	/*
	 * Our own copies: the client can rewrite its slot at any moment, also
	 * after posting it. What we parse, hash, write and hash again must be
	 * one and the same bytes, so all of it comes from memory it cannot
	 * reach (one memcpy of the slot; cheaper than the wire by far).
	 */
	memcpy(s->hdr, base, p->hlen);
	memcpy(s->data, base + CP_HDR_SIZE, p->byte_len);
	if (cp_slot_reader_init(&rd, s->hdr, p->hlen, p->byte_len) || rd.seq != p->seq)
		return -EPROTO;
	memset(&c, 0, sizeof(c));
	c.slot = p->slot;
	while ((n = cp_slot_next(&rd, &r)) == 1)
		if (cp_files_record(&s->fs, &c, &r, s->data))
			return -EPROTO;
	if (n < 0)
		return -EPROTO;
	if (s->fs.progressed >= CP_IDLE_MIN_BYTES) {
		s->progress_ns = cli_now_ns();
		s->fs.progressed = 0;
	}
	n = cp_credit_encode(&c, msg, sizeof(msg));
	if (n < 0)
		return -EPROTO;
	return rcv_send_msg(s, p->lane, msg, (size_t)n, err);
}

/*
 * A slot arrived on @lane: check the immediate, the length and the
 * sequence number (inside the window of slots the client can have in
 * flight, not already waiting), park it, and handle every slot whose turn
 * has come.
 */
static int slot_arrived(struct session *s, unsigned lane, uint32_t imm, uint32_t byte_len,
			struct rk_error *err)
{
	struct pending *p;
	uint16_t slot, hlen;
	int64_t seq;

	if (s->fs.bye || cp_imm_parse(imm, s->nslots, &slot, &hlen) || byte_len > s->chunk ||
	    s->slot_pending[slot])
		return -EPROTO;
	seq = cp_slot_seq((const uint8_t *)rk_mr_addr(s->ring) + (size_t)slot * s->stride, hlen);
	if (seq < 0 || (uint32_t)seq - s->next_seq >= s->nslots)
		return -EPROTO;
	p = &s->pend[(uint32_t)seq % CP_MAX_SLOTS];
	if (p->valid)
		return -EPROTO;
	*p = (struct pending){.valid = 1,
			      .lane = (uint8_t)lane,
			      .slot = slot,
			      .hlen = hlen,
			      .byte_len = byte_len,
			      .seq = (uint32_t)seq};
	s->slot_pending[slot] = 1;
	while ((p = &s->pend[s->next_seq % CP_MAX_SLOTS])->valid) {
		struct pending turn = *p;
		int r;

		p->valid = 0;
		s->slot_pending[turn.slot] = 0;
		s->next_seq++;
		r = handle_slot(s, &turn, err);
		if (r)
			return r;
	}
	return 0;
}

/* HELLO: size the ring to the client's chunk and depth, within our limit. */
static int handle_hello(struct session *s, const void *buf, uint32_t len, struct rk_error *err)
{
	struct cp_welcome w = {0};
	struct cp_hello h;
	uint8_t msg[CP_MSG_MAX];
	unsigned nslots;
	int n, r;

	if (cp_msg_peek(buf, len) == -EPROTO) {
		rcv_send_error(s, CP_E_PROTO, "protocol version not supported");
		return -EPROTO;
	}
	if (cp_msg_peek(buf, len) == CP_MSG_ERROR) {
		/* A server we pull from refuses what we asked for (its words, cleaned). */
		uint16_t code;

		if (cp_error_decode(buf, len, &code, s->refused, sizeof(s->refused)))
			return -EPROTO;
		return -ECONNREFUSED;
	}
	if (cp_hello_decode(buf, len, &h))
		return -EPROTO;
	if (h.lanes > s->allow_lanes) {
		rcv_send_error(s, CP_E_PROTO, "more lanes than asked for");
		return -EPROTO;
	}
	if (h.flags & ~s->allow_flags) {
		/* A server we pull from may not turn on --force or --resume for us. */
		rcv_send_error(s, CP_E_PROTO, "flags not asked for");
		return -EPROTO;
	}
	if (h.flags & CP_F_REPLACES) {
		char old[64];

		if (cp_reg_replace(s->srv, h.replaces, old, sizeof(old)))
			rcv_log(s, "replaces this client's session from %s", old);
	}
	s->chunk = s->fs.chunk = h.chunk;
	s->flags = s->fs.flags = h.flags;
	s->reg.want_lanes = h.lanes;
	if (s->srv->progress) /* the sender's word, for display only */
		s->srv->progress->total = h.total_bytes;
	s->stride = cp_slot_stride(h.chunk);
	if (s->stride > s->srv->max_ring) {
		char why[128];

		snprintf(why, sizeof(why),
			 "limit: --max-ring: a %u-byte chunk needs %zu bytes of ring, this "
			 "server allows %u",
			 h.chunk, s->stride, s->srv->max_ring);
		rcv_send_error(s, CP_E_LIMIT, why);
		return -EPERM;
	}
	nslots = h.depth < CP_MAX_SLOTS ? h.depth : CP_MAX_SLOTS;
	while (nslots > 1 && nslots * s->stride > s->srv->max_ring)
		nslots--;
	s->nslots = (uint16_t)nslots;
	s->data = rk_alloc_aligned(s->chunk);
	if (!s->data) {
		rcv_send_error(s, CP_E_IO, "server out of memory");
		return -ENOMEM;
	}
	r = rk_mr_alloc_pd(s->pd, nslots * s->stride, RK_ACCESS_REMOTE_WRITE, err, &s->ring);
	if (r) {
		rcv_send_error(s, CP_E_IO, "server out of registered memory");
		return r;
	}
	w.ring_addr = (uintptr_t)rk_mr_addr(s->ring);
	w.rkey = rk_mr_rkey(s->ring);
	w.chunk = s->chunk;
	w.nslots = s->nslots;
	w.max_name = CP_NAME_MAX;
	w.max_files = s->srv->max_files;
	w.max_file_size = s->srv->max_file_size;
	if (getrandom(s->reg.key, CP_KEY_LEN, 0) != (ssize_t)CP_KEY_LEN) {
		rcv_send_error(s, CP_E_IO, "server has no randomness for a session key");
		return -EIO;
	}
	memcpy(w.key, s->reg.key, sizeof(w.key));
	n = cp_welcome_encode(&w, msg, sizeof(msg));
	if (n < 0)
		return -EPROTO;
	s->hello_done = 1;
	cp_reg_add(s->srv, &s->reg);
	return rcv_send_msg(s, 0, msg, (size_t)n, err);
}

/* Receive ids: lane in bits 8.., buffer index below. */
static int post_recv(struct session *s, unsigned lane, unsigned i, struct rk_error *err)
{
	struct lane *l = &s->lanes[lane];
	uint8_t *base = rk_mr_addr(l->rbufs);

	return rk_post_recv(l->conn, base + (size_t)i * CP_MSG_MAX, CP_MSG_MAX,
			    rk_mr_lkey(l->rbufs), (uint64_t)lane << 8 | i, err);
}

int rcv_prepare(struct rk_conn *conn, void *arg)
{
	struct session *s = arg;

	s->lanes[s->prep_lane].conn = conn;
	for (unsigned i = 0; i < RQ_DEPTH; i++) {
		int r = post_recv(s, s->prep_lane, i, NULL);

		if (r)
			return r;
	}
	return 0;
}

int rcv_handle_wc(struct session *s, unsigned lane, const struct ibv_wc *wc, struct rk_error *err)
{
	unsigned i = (unsigned)(wc->wr_id & 0xff);

	if (wc->status != IBV_WC_SUCCESS) {
		rk_error_from_wc(err, wc);
		return -EIO;
	}
	if (wc->wr_id & SEND_TAG) {
		s->send_busy[(wc->wr_id & 0xffff) % NSEND] = 0;
		return 0;
	}
	if (wc->wr_id >> 8 != lane || i >= RQ_DEPTH)
		return -EPROTO;
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM && s->hello_done) {
		int r = slot_arrived(s, lane, ntohl(wc->imm_data), wc->byte_len, err);

		if (r == -EPROTO)
			rcv_send_error(s, CP_E_PROTO, "malformed slot");
		if (r)
			return r;
	} else if (wc->opcode == IBV_WC_RECV && !s->hello_done && lane == 0) {
		uint8_t *buf = (uint8_t *)rk_mr_addr(s->lanes[0].rbufs) + (size_t)i * CP_MSG_MAX;
		int r = handle_hello(s, buf, wc->byte_len, err);

		if (r)
			return r;
	} else {
		rcv_send_error(s, CP_E_PROTO, "unexpected message");
		return -EPROTO;
	}
	return post_recv(s, lane, i, err);
}

int rcv_sends_pending(const struct session *s)
{
	for (unsigned i = 0; i < NSEND; i++)
		if (s->send_busy[i])
			return 1;
	return 0;
}

int rcv_drain_lost(struct session *s, struct rk_error *err)
{
	struct ibv_wc wc[16];

	for (unsigned l = 0; l < CP_MAX_LANES; l++) {
		int n;

		if (!s->lanes[l].conn)
			continue;
		while ((n = rk_cq_poll(rk_conn_cq(s->lanes[l].conn), wc, 16, err)) > 0) {
			for (int i = 0; i < n; i++) {
				int r;

				if (wc[i].status != IBV_WC_SUCCESS) {
					/* Flushed: a SEND of ours will not complete otherwise. */
					if (wc[i].wr_id & SEND_TAG)
						s->send_busy[(wc[i].wr_id & 0xffff) % NSEND] = 0;
					continue;
				}
				r = rcv_handle_wc(s, l, &wc[i], err);
				if (r)
					return r < 0 ? r : -EPROTO;
			}
		}
		if (n < 0)
			return n;
	}
	return 0;
}
