/*
 * copy_recv_ring.c - a receiving session's protocol on the wire (see
 * copy_recv_int.h): the HELLO that sizes the ring, slots taken strictly in
 * sequence, one RESULTS per slot, and the handling of every completion.
 *
 * The slots are librdmakit's credit ring (rdmakit/ring.h), sharing each
 * lane's receive queue with our control messages: a completion with an
 * immediate is the ring's (a slot written), checked there; a lane that
 * forges one is dropped. The ring hands slots over in sequence, across
 * lanes, each copied out into memory the peer cannot reach (s->msg), and
 * only that copy is parsed, verified and written (copy_files.c).
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

	/* A slot is taken only with a buffer free for its RESULTS (deliver()). */
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

/*
 * Slot number @seq, @len bytes in s->msg (our copy): act on its records,
 * answer with their results (on lane 0: in sequence, whatever lane the
 * slot took).
 */
static int handle_slot(struct session *s, uint64_t seq, uint32_t len, struct rk_error *err)
{
	uint8_t msg[CP_MSG_MAX];
	struct cp_slot_reader rd;
	struct cp_results c;
	struct cp_rec r;
	uint32_t hlen;
	int n;

	if (s->fs.bye || cp_slot_split(s->msg, len, &hlen) || len - hlen > s->chunk ||
	    cp_slot_reader_init(&rd, s->msg, hlen, len - hlen) || rd.seq != (uint32_t)seq)
		return -EPROTO;
	memset(&c, 0, sizeof(c));
	c.seq = (uint16_t)seq;
	while ((n = cp_slot_next(&rd, &r)) == 1)
		if (cp_files_record(&s->fs, &c, &r, s->msg + hlen))
			return -EPROTO;
	if (n < 0)
		return -EPROTO;
	if (s->fs.progressed >= CP_IDLE_MIN_BYTES) {
		s->progress_ns = cli_now_ns();
		s->fs.progressed = 0;
	}
	n = cp_results_encode(&c, msg, sizeof(msg));
	if (n < 0)
		return -EPROTO;
	return rcv_send_msg(s, 0, msg, (size_t)n, err);
}

/*
 * Take every slot whose turn has come, while lane 0 has a send buffer free
 * for its RESULTS (else later: our SENDs complete first). So the RESULTS
 * in flight never outnumber those buffers, nor the client's receives.
 * -ECANCELED once the session is replaced.
 */
static int deliver(struct session *s, struct rk_error *err)
{
	for (;;) {
		uint64_t seq = rk_ring_rx_delivered(s->ring);
		uint32_t len;
		int r;

		if (!s->lanes[0].ss || !rk_send_set_free_count(s->lanes[0].ss))
			return 0;
		/*
		 * Replaced by a new session of the same client: stop here, not
		 * after the slots already in the ring. Each may begin, write and
		 * commit files the new session is about to take over, and it waits
		 * for this one to end only so long (cp_reg_replace).
		 */
		if (atomic_load(&s->reg.replaced))
			return -ECANCELED;
		r = rk_ring_rx_recv(s->ring, s->msg, s->stride, &len, err);
		if (r <= 0)
			return r;
		r = handle_slot(s, seq, len, err);
		if (r)
			return r;
	}
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

		if (cp_reg_replace(s->srv, h.replaces, old, sizeof(old))) {
			rcv_log(s, "replaces this client's session from %s", old);
			SM_ADD(s->srv->metrics, reconnects, 1);
		}
	}
	s->chunk = s->fs.chunk = h.chunk;
	s->flags = s->fs.flags = h.flags;
	s->reg.want_lanes = h.lanes;
	if (s->srv->progress) { /* the sender's word, for display only */
		s->srv->progress->total = h.total_bytes;
		s->srv->progress->files_total = h.total_files;
	}
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
	/* The ring's geometry: a multiple of the lanes, each lane as many slots. */
	nslots = h.depth < CP_MAX_SLOTS ? h.depth : CP_MAX_SLOTS;
	nslots -= nslots % h.lanes;
	if (nslots < h.lanes)
		nslots = h.lanes;
	while (nslots > h.lanes && nslots * s->stride > s->srv->max_ring)
		nslots -= h.lanes;
	if (nslots * s->stride > s->srv->max_ring) {
		char why[128];

		snprintf(why, sizeof(why),
			 "limit: --max-ring: %u lanes of %u-byte chunks need %zu bytes of ring, "
			 "this server allows %u",
			 h.lanes, h.chunk, nslots * s->stride, s->srv->max_ring);
		rcv_send_error(s, CP_E_LIMIT, why);
		return -EPERM;
	}
	s->nslots = (uint16_t)nslots;
	s->msg = rk_alloc_aligned(s->stride);
	if (!s->msg) {
		rcv_send_error(s, CP_E_IO, "server out of memory");
		return -ENOMEM;
	}
	{
		struct rk_conn *lanes[CP_MAX_LANES] = {s->lanes[0].conn};
		/* A lane the ring drops hears why from us first (an ERROR), then goes. */
		struct rk_ring_rx_opts ro = {.slots = nslots,
					     .slot_size = (uint32_t)s->stride,
					     .shared_rq = 1,
					     .caller_disconnects = 1};
		struct rk_ring_peer peer;

		/* The other lanes join with the key this WELCOME carries (rcv_lane_joined). */
		r = rk_ring_rx_create(lanes, h.lanes, &ro, err, &s->ring);
		if (r) {
			rcv_send_error(s, CP_E_IO, "server out of registered memory");
			return r;
		}
		rcv_pin(s, (int64_t)(nslots * s->stride));
		rk_ring_rx_peer(s->ring, &peer);
		w.ring_addr = peer.addr;
		w.rkey = peer.rkey;
	}
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
	struct recv_lane *l = &s->lanes[s->prep_lane];
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

int rcv_lane_joined(struct session *s, unsigned l, struct rk_error *err)
{
	int r;

	if (!s->ring || l == 0 || l >= s->reg.want_lanes) {
		rk_error_setf(err, "rk serve", EPROTO, "lane %u joined a session of %u lanes", l,
			      s->reg.want_lanes);
		return -EPROTO;
	}
	r = rk_ring_rx_attach(s->ring, l, s->lanes[l].conn, err);

	if (r)
		return r;
	rcv_pin(s, (int64_t)(RQ_DEPTH + NSEND) * CP_MSG_MAX); /* its buffers */
	return 0;
}

int rcv_handle_wc(struct session *s, unsigned lane, const struct ibv_wc *wc, struct rk_error *err)
{
	struct recv_lane *l = &s->lanes[lane];
	struct rk_msg m;
	int r;

	if (rk_send_set_complete(l->ss, wc)) {
		if (wc->status != IBV_WC_SUCCESS) {
			rk_error_from_wc(err, wc);
			return -EIO;
		}
		/* A buffer is free again: slots held back for want of one go on. */
		r = s->ring ? deliver(s, err) : 0;
		if (r == -EPROTO)
			rcv_send_error(s, CP_E_PROTO, "malformed slot");
		return r;
	}
	if (s->ring) {
		r = rk_ring_rx_handle(s->ring, wc, err); /* a credit of the ring's went out */
		if (r)
			return r < 0 ? -EIO : 0;
	}
	r = rk_recv_set_take(l->rs, wc, &m, err);
	if (r < 0)
		return -EIO;
	if (r == 0)
		return -EPROTO; /* nobody's: not ours */
	if (m.has_imm && s->ring) {
		/* A slot written, or the ring drops the lane (and says why). */
		r = rk_ring_rx_msg(s->ring, lane, &m, err);
		if (r < 0) { /* the ring logged its reason */
			rcv_send_error(s, CP_E_PROTO, "malformed slot");
			return -EPROTO;
		}
	} else if (m.opcode == IBV_WC_RECV && !m.has_imm && !s->hello_done && lane == 0) {
		r = handle_hello(s, m.data, m.len, err);
		if (r)
			return r;
	} else {
		rcv_send_error(s, CP_E_PROTO, "unexpected message");
		return -EPROTO;
	}
	/* What arrived is handled even if the lane is going down (the BYE, say). */
	r = s->ring ? deliver(s, err) : 0;
	if (r == -EPROTO)
		rcv_send_error(s, CP_E_PROTO, "malformed slot");
	if (r)
		return r;
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
