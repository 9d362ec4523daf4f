/*
 * copy_recv.c - one rk serve session: accept, agree on the ring, then turn
 * each slot the client fills into file operations and give the slot back.
 *
 * The loop is simple on purpose: a slot arrives (WRITE WITH IMMEDIATE
 * completion), its header block and data are copied out of the ring into
 * memory the client cannot reach, records are parsed from that copy, data
 * is verified (XXH3-128 per chunk) and pwrite()n at its offset, and one
 * CREDIT returns the slot with the results of its records. While
 * we write one slot the client is already filling others, so reading at
 * the source, the wire and writing here overlap.
 *
 * What the records do to files (temporaries, verification, commit, the
 * per-session limits) is copy_files.c, which knows nothing of verbs; this
 * file is the transport: connections, the ring, slots in sequence, CREDITs,
 * and the idle timer, which is a minimum rate: a session must move
 * CP_IDLE_MIN_BYTES of file data (an entry made counts CP_ENTRY_BYTES)
 * within every --idle period. A client that keeps posting empty slots, one
 * byte or one directory at a time, is still dropped after --idle.
 *
 * With lanes (rk copy --num-qp), more connections join the session: the
 * listener hands their requests over through a registry keyed by the
 * session key, and this thread accepts them and serves all lanes from one
 * loop. Slots may then arrive out of sequence; they wait in a small
 * reorder window (never larger than the ring) and are handled strictly in
 * sequence, so everything below sees the same order as with one lane.
 *
 * The same registry lets a reconnecting client end its previous session
 * (CP_F_REPLACES with that session's key): a client whose QP failed under
 * loss may be back before this side has seen anything (its DREQ lost too,
 * no more completions), and until the old session ends it holds the locks
 * of the files it was writing, so the resumed copy would find them busy.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/random.h>

#include <rdmakit/conn.h>
#include <rdmakit/cq.h>
#include <rdmakit/mr.h>
#include <rdmakit/pd.h>
#include <rdmakit/post.h>

#include "cli.h"
#include "copy_proto.h"
#include "copy_files.h"
#include "copy_recv.h"
#include "copy_token.h"

#define RQ_DEPTH      (CP_MAX_SLOTS + 8) /* a receive per slot, and spares */
#define NSEND	      (CP_MAX_SLOTS + 4) /* CREDIT buffers: one per slot, and spares */
#define HELLO_MS      10000
#define ACCEPT_MS     5000
#define SEND_TAG      (1ull << 32)
#define BYE_LINGER_NS 2000000000ull
#define REPLACE_MS    5000 /* the most a new session waits for the one it replaces */

/* One connection of the session and its receive buffers. */
struct lane {
	struct rk_conn *conn;
	struct rk_mr *rbufs;
};

/* A slot that arrived ahead of its turn. */
struct pending {
	uint8_t valid, lane;
	uint16_t slot, hlen;
	uint32_t byte_len, seq;
};

struct session {
	struct cp_server *srv;
	struct rk_cm_request *req;
	char peer[64];
	struct rk_pd *pd; /* the session's alone: its QPs, ring and buffers */
	struct lane lanes[CP_MAX_LANES];
	unsigned want_lanes, prep_lane;
	struct rk_mr *sbufs, *ring;
	uint8_t send_busy[NSEND];
	struct pending pend[CP_MAX_SLOTS];
	uint8_t slot_pending[CP_MAX_SLOTS];
	uint32_t next_seq;
	/* Joining lanes: set by the listener thread under srv->reg_mu. */
	uint8_t key[CP_KEY_LEN];
	struct rk_cm_request *joins[CP_MAX_LANES];
	uint32_t claimed; /* lanes handed over so far (bit per lane) */
	int evfd, registered;
	struct session *reg_next;
	atomic_int replaced; /* a new session of the same client took over: end */
	uint32_t chunk;
	uint16_t nslots, flags;
	size_t stride;
	int hello_done;
	uint64_t progress_ns;	  /* when the idle period began (--idle) */
	struct cp_files fs;	  /* the files: what the records do (copy_files.c) */
	uint8_t hdr[CP_HDR_SIZE]; /* private copy of a header block */
	uint8_t *data;		  /* private copy of a data block (chunk bytes) */
	char refused[256];	  /* a pull: the server's ERROR, before its HELLO */
	uint16_t allow_flags;	  /* HELLO flags we accept (a pull: only what we asked for) */
};

/*
 * The server's sessions by key (srv->reg_head): for cp_session_join on the
 * listener thread and for a session that replaces another. A session is
 * registered once it has sent WELCOME (so has a key) and unregistered
 * once its files are closed, before it is freed; both under srv->reg_mu,
 * and unregistering wakes srv->reg_cv (a replacing session waits on it).
 */
int cp_server_registry_init(struct cp_server *srv)
{
	pthread_condattr_t ca;
	int r;

	srv->reg_head = NULL;
	r = pthread_mutex_init(&srv->reg_mu, NULL);
	if (r)
		return -r;
	r = pthread_condattr_init(&ca);
	if (!r) {
		r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		if (!r)
			r = pthread_cond_init(&srv->reg_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (r)
		pthread_mutex_destroy(&srv->reg_mu);
	return -r;
}

void cp_server_registry_fini(struct cp_server *srv)
{
	pthread_cond_destroy(&srv->reg_cv);
	pthread_mutex_destroy(&srv->reg_mu);
}

static void slog(const struct session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void slog(const struct session *s, const char *fmt, ...)
{
	char line[1536];
	va_list ap;

	if (s->srv->quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printf("%s: %s: %s\n", s->srv->who ? s->srv->who : "rk serve", s->peer, line);
	fflush(stdout);
}

/* ---- control messages out ---- */

static int send_msg(struct session *s, unsigned lane, const void *msg, size_t len,
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

static void send_error(struct session *s, uint16_t code, const char *text)
{
	uint8_t msg[CP_MSG_MAX];
	int n = cp_error_encode(code, text, msg, sizeof(msg));

	if (n > 0)
		send_msg(s, 0, msg, (size_t)n, NULL);
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
	return send_msg(s, p->lane, msg, (size_t)n, err);
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
/* The registered session whose key is @key, or NULL; under reg_mu. */
static struct session *find_session(struct cp_server *srv, const uint8_t *key)
{
	struct session *found = NULL;

	/* Compare with every session, in constant time each: no early exit. */
	for (struct session *s = srv->reg_head; s; s = s->reg_next)
		if (cp_token_equal(s->key, key, CP_KEY_LEN))
			found = s;
	return found;
}

/*
 * CP_F_REPLACES: tell the session @key names to end, and wait until it has
 * closed its files (it leaves the registry then), at most REPLACE_MS. A
 * key that names no session is no error: it ended already, and what it
 * held is free. Should the old session not end in time, its files are
 * refused as busy and the client tries them again later.
 */
static void replace_session(struct session *s, const uint8_t *key)
{
	struct cp_server *srv = s->srv;
	struct timespec dl;
	uint64_t one = 1;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += REPLACE_MS / 1000;
	pthread_mutex_lock(&srv->reg_mu);
	for (;;) {
		struct session *old = find_session(srv, key);

		if (!old)
			break;
		if (!atomic_exchange(&old->replaced, 1)) {
			slog(s, "replaces this client's session from %s", old->peer);
			if (write(old->evfd, &one, sizeof(one)) < 0) {
				/* Cannot fail below the eventfd's maximum; the
				 * old session also checks on its next wake-up. */
			}
		}
		if (pthread_cond_timedwait(&srv->reg_cv, &srv->reg_mu, &dl) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&srv->reg_mu);
}

static int handle_hello(struct session *s, const void *buf, uint32_t len, struct rk_error *err)
{
	struct cp_welcome w = {0};
	struct cp_hello h;
	uint8_t msg[CP_MSG_MAX];
	unsigned nslots;
	int n, r;

	if (cp_msg_peek(buf, len) == -EPROTO) {
		send_error(s, CP_E_PROTO, "protocol version not supported");
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
	if (h.flags & ~s->allow_flags) {
		/* A server we pull from may not turn on --force or --resume for us. */
		send_error(s, CP_E_PROTO, "flags not asked for");
		return -EPROTO;
	}
	if (h.flags & CP_F_REPLACES)
		replace_session(s, h.replaces);
	s->chunk = s->fs.chunk = h.chunk;
	s->flags = s->fs.flags = h.flags;
	s->want_lanes = h.lanes;
	s->stride = cp_slot_stride(h.chunk);
	if (s->stride > s->srv->max_ring) {
		char why[128];

		snprintf(why, sizeof(why),
			 "limit: --max-ring: a %u-byte chunk needs %zu bytes of ring, this "
			 "server allows %u",
			 h.chunk, s->stride, s->srv->max_ring);
		send_error(s, CP_E_LIMIT, why);
		return -EPERM;
	}
	nslots = h.depth < CP_MAX_SLOTS ? h.depth : CP_MAX_SLOTS;
	while (nslots > 1 && nslots * s->stride > s->srv->max_ring)
		nslots--;
	s->nslots = (uint16_t)nslots;
	s->data = rk_alloc_aligned(s->chunk);
	if (!s->data) {
		send_error(s, CP_E_IO, "server out of memory");
		return -ENOMEM;
	}
	r = rk_mr_alloc_pd(s->pd, nslots * s->stride, RK_ACCESS_REMOTE_WRITE, err, &s->ring);
	if (r) {
		send_error(s, CP_E_IO, "server out of registered memory");
		return r;
	}
	w.ring_addr = (uintptr_t)rk_mr_addr(s->ring);
	w.rkey = rk_mr_rkey(s->ring);
	w.chunk = s->chunk;
	w.nslots = s->nslots;
	w.max_name = CP_NAME_MAX;
	w.max_files = s->srv->max_files;
	w.max_file_size = s->srv->max_file_size;
	if (getrandom(s->key, sizeof(s->key), 0) != (ssize_t)sizeof(s->key)) {
		send_error(s, CP_E_IO, "server has no randomness for a session key");
		return -EIO;
	}
	memcpy(w.key, s->key, sizeof(w.key));
	n = cp_welcome_encode(&w, msg, sizeof(msg));
	if (n < 0)
		return -EPROTO;
	s->hello_done = 1;
	pthread_mutex_lock(&s->srv->reg_mu);
	s->reg_next = s->srv->reg_head;
	s->srv->reg_head = s;
	s->registered = 1;
	pthread_mutex_unlock(&s->srv->reg_mu);
	return send_msg(s, 0, msg, (size_t)n, err);
}

/* Receive ids: lane in bits 8.., buffer index below. */
static int post_recv(struct session *s, unsigned lane, unsigned i, struct rk_error *err)
{
	struct lane *l = &s->lanes[lane];
	uint8_t *base = rk_mr_addr(l->rbufs);

	return rk_post_recv(l->conn, base + (size_t)i * CP_MSG_MAX, CP_MSG_MAX,
			    rk_mr_lkey(l->rbufs), (uint64_t)lane << 8 | i, err);
}

static int prepare(struct rk_conn *conn, void *arg)
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

static int handle_wc(struct session *s, unsigned lane, const struct ibv_wc *wc,
		     struct rk_error *err)
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
			send_error(s, CP_E_PROTO, "malformed slot");
		if (r)
			return r;
	} else if (wc->opcode == IBV_WC_RECV && !s->hello_done && lane == 0) {
		uint8_t *buf = (uint8_t *)rk_mr_addr(s->lanes[0].rbufs) + (size_t)i * CP_MSG_MAX;
		int r = handle_hello(s, buf, wc->byte_len, err);

		if (r)
			return r;
	} else {
		send_error(s, CP_E_PROTO, "unexpected message");
		return -EPROTO;
	}
	return post_recv(s, lane, i, err);
}

static int sends_pending(const struct session *s)
{
	for (unsigned i = 0; i < NSEND; i++)
		if (s->send_busy[i])
			return 1;
	return 0;
}

/* Handle every completion waiting now on all lanes: their count, or a negative errno. */
static int drain_cq(struct session *s, struct rk_error *err)
{
	struct ibv_wc wc[16];
	int total = 0;

	for (unsigned l = 0; l < CP_MAX_LANES; l++) {
		int n;

		if (!s->lanes[l].conn)
			continue;
		n = rk_cq_poll(rk_conn_cq(s->lanes[l].conn), wc, 16, err);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			int r = handle_wc(s, l, &wc[i], err);

			if (r)
				return r < 0 ? r : -EPROTO;
		}
		total += n;
	}
	return total;
}

static int arm_all(struct session *s, struct rk_error *err)
{
	for (unsigned l = 0; l < CP_MAX_LANES; l++) {
		int r = s->lanes[l].conn ? rk_cq_arm(rk_conn_cq(s->lanes[l].conn), err) : 0;

		if (r)
			return r;
	}
	return 0;
}

static struct rk_conn_opts conn_opts(struct session *s)
{
	return (struct rk_conn_opts){
	    .sq_depth = NSEND,
	    .rq_depth = RQ_DEPTH,
	    .wait_mode = RK_WAIT_EVENT,
	    .prepare = prepare,
	    .prepare_arg = s,
	    .pd = s->pd,
	};
}

/* Accept the lanes the listener handed over (see cp_session_join). */
static int take_joins(struct session *s, struct rk_error *err)
{
	struct rk_cm_request *reqs[CP_MAX_LANES];
	uint64_t v;

	if (read(s->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	pthread_mutex_lock(&s->srv->reg_mu);
	memcpy(reqs, s->joins, sizeof(reqs));
	memset(s->joins, 0, sizeof(s->joins));
	pthread_mutex_unlock(&s->srv->reg_mu);
	for (unsigned l = 1; l < CP_MAX_LANES; l++) {
		struct rk_conn_opts o = conn_opts(s);
		struct rk_conn *conn = NULL;
		int r;

		if (!reqs[l])
			continue;
		r = rk_mr_alloc_pd(s->pd, (size_t)RQ_DEPTH * CP_MSG_MAX, RK_ACCESS_LOCAL, err,
				   &s->lanes[l].rbufs);
		if (r) {
			rk_cm_request_reject(reqs[l], RK_REJECT_BUSY, "server out of memory", NULL);
			reqs[l] = NULL;
			for (unsigned k = l + 1; k < CP_MAX_LANES; k++)
				if (reqs[k])
					rk_cm_request_reject(reqs[k], RK_REJECT_BUSY,
							     "server out of memory", NULL);
			return r;
		}
		s->prep_lane = l;
		r = rk_cm_request_accept(reqs[l], &o, NULL, 0, ACCEPT_MS, err, &conn);
		reqs[l] = NULL;
		if (r) {
			s->lanes[l].conn = NULL;
			for (unsigned k = l + 1; k < CP_MAX_LANES; k++)
				if (reqs[k])
					rk_cm_request_reject(reqs[k], RK_REJECT_BUSY,
							     "session failed", NULL);
			return r;
		}
		s->lanes[l].conn = conn;
	}
	return 0;
}

/*
 * The event loop: completions and CM events (a client that dies is seen
 * as DISCONNECTED), each wait bounded, and the session given up after
 * an idle_ms period that moved less than CP_IDLE_MIN_BYTES (see do_record).
 */
static int serve(struct session *s, struct rk_error *err)
{
	uint64_t last = cli_now_ns();

	s->progress_ns = last;
	for (;;) {
		struct pollfd pfd[1 + 2 * CP_MAX_LANES] = {{.fd = s->evfd, .events = POLLIN}};
		unsigned lane_of[1 + 2 * CP_MAX_LANES] = {0}, npfd = 1;
		int n = drain_cq(s, err);

		if (n < 0)
			return n;
		if (n) {
			last = cli_now_ns();
			continue;
		}
		/* After BYE, let the client hang up first (it has our last CREDIT). */
		if (s->fs.bye && !sends_pending(s) && cli_now_ns() - last > BYE_LINGER_NS)
			return 0;
		if (atomic_load(s->srv->stop))
			return -ESHUTDOWN;
		if (atomic_load(&s->replaced))
			return -ECANCELED;
		if (!s->hello_done && cli_now_ns() - last > (uint64_t)HELLO_MS * 1000000)
			return -ETIMEDOUT;
		if (cli_now_ns() - s->progress_ns > (uint64_t)s->srv->idle_ms * 1000000)
			return -ETIMEDOUT;
		n = arm_all(s, err);
		if (n)
			return n;
		n = drain_cq(s, err);
		if (n < 0)
			return n;
		if (n) {
			last = cli_now_ns();
			continue;
		}
		for (unsigned l = 0; l < CP_MAX_LANES; l++) {
			if (!s->lanes[l].conn)
				continue;
			pfd[npfd++] = (struct pollfd){.fd = rk_cq_fd(rk_conn_cq(s->lanes[l].conn)),
						      .events = POLLIN};
			lane_of[npfd] = l;
			pfd[npfd++] = (struct pollfd){.fd = rk_conn_cm_fd(s->lanes[l].conn),
						      .events = POLLIN};
		}
		if (poll(pfd, npfd, 500) < 0 && errno != EINTR)
			return -errno;
		if (pfd[0].revents & POLLIN) {
			n = take_joins(s, err);
			if (n)
				return n;
		}
		/* Any lane going down ends the session. */
		for (unsigned i = 2; i < npfd; i += 2) {
			int st;

			if (!(pfd[i].revents & POLLIN))
				continue;
			st = rk_conn_progress(s->lanes[lane_of[i]].conn, 0, err);
			if (st == RK_CONN_CONNECTED)
				continue;
			/*
			 * What arrived before the disconnect comes first: the
			 * CM event can be seen before the CQ holds the peer's
			 * last message (its BYE, or a server's ERROR). Flushed
			 * receives after it end the drain with -EIO.
			 */
			do
				n = drain_cq(s, err);
			while (n > 0);
			if (n < 0 && n != -EIO)
				return n;
			return s->fs.bye && !sends_pending(s) ? 0 : -ECONNRESET;
		}
	}
}

/*
 * Leave the registry; lanes handed over but not taken are refused, and a
 * session waiting to replace this one is woken.
 */
static void unregister(struct session *s)
{
	pthread_mutex_lock(&s->srv->reg_mu);
	if (s->registered) {
		struct session **pp = &s->srv->reg_head;

		while (*pp && *pp != s)
			pp = &(*pp)->reg_next;
		if (*pp)
			*pp = s->reg_next;
		s->registered = 0;
		pthread_cond_broadcast(&s->srv->reg_cv);
	}
	for (unsigned l = 0; l < CP_MAX_LANES; l++) {
		if (s->joins[l])
			rk_cm_request_reject(s->joins[l], RK_REJECT_APP, "session is over", NULL);
		s->joins[l] = NULL;
	}
	pthread_mutex_unlock(&s->srv->reg_mu);
}

static void session_free(struct session *s)
{
	/* Files first: a replacing session waits until their locks are free. */
	cp_files_close(&s->fs);
	unregister(s);
	for (unsigned l = CP_MAX_LANES; l-- > 0;) {
		rk_conn_destroy(s->lanes[l].conn);
		rk_mr_dereg(s->lanes[l].rbufs);
	}
	rk_mr_dereg(s->ring);
	rk_mr_dereg(s->sbufs);
	rk_pd_free(s->pd);
	if (s->evfd >= 0)
		close(s->evfd);
	rk_free_aligned(s->data);
	free(s);
}

static void *session_main(void *arg)
{
	struct session *s = arg;
	struct cp_server *srv;
	struct rk_conn_opts o = conn_opts(s);
	struct rk_conn *conn = NULL;
	struct rk_error err;
	int r;

	rk_error_clear(&err);
	r = rk_cm_request_accept(s->req, &o, NULL, 0, ACCEPT_MS, &err, &conn);
	s->req = NULL;
	s->lanes[0].conn = conn;
	if (r) {
		fprintf(stderr, "rk serve: %s: accept failed: %s\n", s->peer, rk_error_str(&err));
	} else {
		slog(s, "connected");
		r = serve(s, &err);
		if (r == 0)
			slog(s, "done");
		else if (r == -ECONNRESET)
			slog(s, "client disconnected");
		else if (r == -ETIMEDOUT)
			slog(s, "less than 1 MiB written in %d s (--idle); connection closed",
			     s->srv->idle_ms / 1000);
		else if (r == -ESHUTDOWN)
			slog(s, "server shutting down");
		else if (r == -ECANCELED)
			slog(s, "replaced by a new connection of the same client; closed");
		else if (r == -EPROTO)
			slog(s, "protocol error; connection closed");
		else
			slog(s, "connection lost: %s", rk_error_str(&err));
	}
	srv = s->srv;
	session_free(s);
	/* Last: the main thread closes the device once no session is active. */
	atomic_fetch_sub(&srv->active, 1);
	return NULL;
}

/* A session's state before any connection: its PD, buffers, file sink. NULL when out of resources.
 */
static struct session *session_new(struct cp_server *srv, const char *peer)
{
	struct session *s = calloc(1, sizeof(*s));
	struct rk_error err;
	int r;

	if (!s)
		return NULL;
	s->srv = srv;
	s->evfd = -1;
	s->allow_flags = CP_F_ALL;
	snprintf(s->peer, sizeof(s->peer), "%s", peer);
	if (cp_files_init(&s->fs, srv, s->peer))
		goto fail;
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->evfd < 0)
		goto fail;
	r = rk_pd_alloc(srv->dev, &err, &s->pd);
	if (!r)
		r = rk_mr_alloc_pd(s->pd, (size_t)RQ_DEPTH * CP_MSG_MAX, RK_ACCESS_LOCAL, &err,
				   &s->lanes[0].rbufs);
	if (!r)
		r = rk_mr_alloc_pd(s->pd, (size_t)NSEND * CP_MSG_MAX, RK_ACCESS_LOCAL, &err,
				   &s->sbufs);
	if (r) {
		fprintf(stderr, "%s: %s: %s\n", srv->who ? srv->who : "rk serve", s->peer,
			rk_error_str(&err));
		goto fail;
	}
	return s;
fail:
	session_free(s);
	return NULL;
}

int cp_session_start(struct cp_server *srv, struct rk_cm_request *req)
{
	struct session *s = session_new(srv, rk_cm_request_peer(req));
	pthread_attr_t attr;
	pthread_t th;
	int r = -ENOMEM;

	if (!s)
		goto reject;
	s->req = req;
	r = pthread_attr_init(&attr);
	if (r) {
		r = -r;
		goto reject;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	atomic_fetch_add(&srv->active, 1);
	r = pthread_create(&th, &attr, session_main, s);
	pthread_attr_destroy(&attr);
	if (r) {
		atomic_fetch_sub(&srv->active, 1);
		r = -r;
		goto reject;
	}
	return 0;
reject:
	rk_cm_request_reject(req, RK_REJECT_BUSY, "server could not start a session", NULL);
	if (s) {
		s->req = NULL;
		session_free(s);
	}
	return r;
}

int cp_recv_pull(struct cp_server *srv, const struct rk_cm_connect_opts *co, const void *pull,
		 size_t len, unsigned flags, struct cp_recv_stats *st, struct rk_error *err)
{
	struct rk_cm_connect_opts c = *co;
	struct rk_conn *conn = NULL;
	struct session *s;
	char peer[80];
	int r;

	memset(st, 0, sizeof(*st));
	snprintf(peer, sizeof(peer), "%s:%s", co->host, co->port);
	s = session_new(srv, peer);
	if (!s)
		return rk_error_setf(err, "rk copy", ENOMEM, "out of memory or registered memory");
	c.conn = conn_opts(s);
	s->prep_lane = 0;
	s->allow_flags = (uint16_t)(flags & (CP_F_FORCE | CP_F_RESUME));
	r = rk_cm_connect(srv->dev, &c, err, &conn);
	if (r) {
		s->lanes[0].conn = NULL; /* prepare saw it; the library destroyed it */
		session_free(s);
		return r;
	}
	s->lanes[0].conn = conn;
	r = send_msg(s, 0, pull, len, err);
	if (!r)
		r = serve(s, err);
	if (r == -ECONNREFUSED && s->refused[0])
		rk_error_setf(err, "rk copy", ECONNREFUSED, "refused by the server: %s",
			      s->refused);
	else if (r == -ETIMEDOUT)
		rk_error_setf(err, "rk copy", ETIMEDOUT, "the server sent nothing for %d s",
			      srv->idle_ms / 1000);
	else if (r == -ECONNRESET)
		rk_error_setf(err, "rk copy", ECONNRESET,
			      "connection lost: the server closed it before its last file");
	else if (r == -EPROTO)
		rk_error_setf(err, "rk copy", EPROTO, "protocol error from the server");
	st->files = s->fs.n_ok;
	st->up_to_date = s->fs.n_uptodate;
	st->failed = s->fs.n_failed;
	st->dirs = s->fs.n_dirs;
	st->bytes = s->fs.bytes_ok;
	st->moved = s->fs.moved;
	st->established = s->hello_done;
	session_free(s);
	return r;
}

int cp_session_join(struct cp_server *srv, struct rk_cm_request *req, unsigned lane,
		    const uint8_t *key)
{
	struct session *found;
	uint64_t one = 1;

	pthread_mutex_lock(&srv->reg_mu);
	found = find_session(srv, key);
	if (!found || lane >= found->want_lanes || (found->claimed & 1u << lane)) {
		pthread_mutex_unlock(&srv->reg_mu);
		rk_cm_request_reject(req, RK_REJECT_APP, "no such session or lane", NULL);
		return -ENOENT;
	}
	found->joins[lane] = req;
	found->claimed |= 1u << lane;
	if (write(found->evfd, &one, sizeof(one)) < 0) {
		/* Cannot happen with an eventfd below its maximum; the session
		 * still finds the request on its next wake-up. */
	}
	pthread_mutex_unlock(&srv->reg_mu);
	return 0;
}

unsigned cp_session_fds(unsigned max_open)
{
	return 1 + 2 * CP_MAX_LANES + 4 + 2 * max_open;
}

uint64_t cp_session_pinned(uint32_t max_ring)
{
	/* Per lane its receive and CREDIT buffers, rounded up to pages as pinned. */
	uint64_t lane = ((uint64_t)RQ_DEPTH * CP_MSG_MAX + 4095) / 4096 * 4096 +
			((uint64_t)NSEND * CP_MSG_MAX + 4095) / 4096 * 4096;

	return max_ring + CP_MAX_LANES * lane;
}
