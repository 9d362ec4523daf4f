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
#include <rdmakit/msgbuf.h>
#include <rdmakit/post.h>

#include "cli.h"
#include "copy_recv_int.h"

int rcv_send_msg(struct session *s, unsigned lane, const void *msg, size_t len,
		 struct rk_error *err)
{
	struct rk_wr wr = {.op = RK_OP_SEND, .len = (uint32_t)len};
	struct rk_send_set *ss = s->lanes[lane].ss;
	struct rk_send_buf b;
	int r;

	/* None free cannot happen with one CREDIT per slot; a peer breaking that is gone. */
	if (!ss || rk_send_set_get(ss, &b))
		return -ENOBUFS;
	memcpy(b.data, msg, len);
	r = rk_send_set_post(ss, b.index, &wr, err);
	if (r)
		rk_send_set_put(ss, b.index);
	return r;
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

/*
 * Before lane s->prep_lane's QP connects: its message buffers, from the
 * session's pool (local access only: the peer reaches them by SEND, never
 * by RDMA), the receives posted so that the peer's first message finds one.
 */
int rcv_prepare(struct rk_conn *conn, void *arg)
{
	struct session *s = arg;
	struct lane *l = &s->lanes[s->prep_lane];
	struct rk_msgbuf_opts ro = {.count = RQ_DEPTH, .size = CP_MSG_MAX};
	struct rk_msgbuf_opts so = {.count = NSEND, .size = CP_MSG_MAX};
	int r;

	l->conn = conn;
	/* A connect tried again (a pull's lane): the last try's connection is gone. */
	rk_send_set_destroy(l->ss);
	rk_recv_set_destroy(l->rs);
	l->ss = NULL;
	l->rs = NULL;
	r = rk_recv_set_create(conn, s->pool, &ro, NULL, &l->rs);
	if (!r)
		r = rk_send_set_create(conn, s->pool, &so, NULL, &l->ss);
	return r;
}

int rcv_handle_wc(struct session *s, unsigned lane, const struct ibv_wc *wc, struct rk_error *err)
{
	struct lane *l = &s->lanes[lane];
	struct rk_msg m;
	int r;

	if (rk_send_set_complete(l->ss, wc)) {
		if (wc->status == IBV_WC_SUCCESS)
			return 0;
		rk_error_from_wc(err, wc);
		return -EIO;
	}
	r = rk_recv_set_take(l->rs, wc, &m, err);
	if (r < 0)
		return -EIO;
	if (r == 0)
		return -EPROTO; /* neither set's: not ours */
	if (m.opcode == IBV_WC_RECV_RDMA_WITH_IMM && m.has_imm && s->hello_done) {
		r = slot_arrived(s, lane, m.imm, m.len, err);
		if (r == -EPROTO)
			rcv_send_error(s, CP_E_PROTO, "malformed slot");
		if (r)
			return r;
	} else if (m.opcode == IBV_WC_RECV && !s->hello_done && lane == 0) {
		r = handle_hello(s, m.data, m.len, err);
		if (r)
			return r;
	} else {
		rcv_send_error(s, CP_E_PROTO, "unexpected message");
		return -EPROTO;
	}
	return rk_recv_set_release(l->rs, m.index, err);
}

int rcv_sends_pending(const struct session *s)
{
	for (unsigned l = 0; l < CP_MAX_LANES; l++)
		if (s->lanes[l].ss && rk_send_set_free_count(s->lanes[l].ss) < NSEND)
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
					rk_send_set_complete(s->lanes[l].ss, &wc[i]);
					continue;
				}
				r = rcv_handle_wc(s, l, &wc[i], err);
				if (r == -ENOTCONN)
					continue; /* nothing more goes out on a lane that is down */
				if (r)
					return r < 0 ? r : -EPROTO;
			}
		}
		if (n < 0)
			return n;
	}
	return 0;
}
