/*
 * rpc_server.c - the serving end of rpc.h: accept, check each request,
 * READ rendezvous bodies, run handlers, post answers (deferred ones from
 * other threads through a queue), and drop a connection that breaks the
 * rules without disturbing the others.
 *
 * Every connection has its own CQ in one wait set with the listener. The
 * server registers nothing a peer can reach: requests land in receive
 * buffers, bodies are READ into local memory, answers leave local memory.
 *
 * A request's receive buffer is posted again before its answer goes out:
 * the client sends its next request on a slot only after that answer, so
 * it always finds a receive (no RNR). A connection that dies loses its QP,
 * CQ and CM id at once; while handlers still hold requests, what is left
 * (their buffers, from the pool) stays as a zombie, out of the connection
 * table, until the last of them is answered, so their data stays valid.
 * All connections and the pool live in a PD of the server's own.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "rk_internal.h"
#include "rpc_wire.h"

#define TAG_RECV	 0x5251ull /* wr_id top 16 bits: request receives */
#define TAG_ANSWER	 0x5241ull /* the answers' send set (write with immediate) */
#define TAG_READ	 0x5244ull /* a rendezvous body's READ; low bits the slot */
#define TAG_DATA	 0x5257ull /* an answer's data WRITE */
#define TAG_STAGE	 0x5253ull /* the last WRITE from a staged answer: free it */
#define TAG_LISTEN	 (~0ull)
#define CONN_TAG	 (1ull << 32)
#define CHUNK		 (8u << 20) /* bytes per READ / WRITE: Soft-RoCE's limit */
#define POOL_MAX_CLASS	 (1u << 20) /* larger bodies and answers are registered per use */
#define MAX_EVENTS	 16
#define DEF_WINDOW	 64
#define DEF_SLOT	 4096
#define DEF_MAX_MSG	 (64u << 20)
#define DEF_MAX_CONNS	 64
#define DEF_RDV_BYTES	 (256ull << 20)
#define MAX_CONNS_LIMIT	 65535
#define ANSWER_SPARE_BUF 8
#define ESTABLISH_MS	 1000 /* data came first: how long ESTABLISHED may take */
#define DEF_INLINE	 128  /* bytes an answer carries inline (header and 116 bytes) */
#define SIGNAL_EVERY	 16   /* answers: a completion every this many frees them all */

enum req_state { R_FREE = 0, R_READING, R_HANDLER };

struct sconn;

/* Memory a body or an answer was staged in: a pool buffer or a registration. */
struct stage {
	struct stage *next;
	struct rk_buf buf; /* buf.addr NULL when mr */
	struct rk_mr *mr;
	uint64_t bytes;
};

struct rk_rpc_req {
	struct sconn *c;
	uint16_t slot;
	enum req_state state;
	struct rk_rpc_req_hdr h;
	int has_buf;
	uint32_t buf_index;
	const uint8_t *data; /* the body: in the receive buffer or the stage */
	struct stage body;
	struct stage *out; /* rk_rpc_reply_buf(): the answer built in place */
	unsigned reads_left;
	struct rk_rpc_req *next_oom; /* on the list of replies that found no memory */
};

/* Work waiting: an answer from another thread, or anything waiting for send-queue room. */
enum pending_kind {
	P_ANSWER, /* a handler's answer (the request is held) */
	P_STATUS, /* the server's own answer: no method, too big, no room */
	P_READ,	  /* a rendezvous body's READs */
};

struct pending {
	struct pending *next;
	struct rk_rpc_req *req;
	enum pending_kind kind;
	uint32_t status; /* P_STATUS */
	int32_t code;
	uint32_t len;
	int in_out; /* P_ANSWER: the data is in req->out, not data[] */
	uint8_t data[];
};

struct sconn {
	struct rk_rpc_server *srv;
	unsigned idx;
	struct rk_conn *conn;
	struct rk_recv_set *rs;
	struct rk_send_set *ss;
	int cq_id, conn_id;
	int dead, closed;	 /* closed: the peer disconnected (not dropped by us) */
	unsigned held;		 /* requests with handlers, not yet answered */
	uint64_t rdv_bytes;	 /* rendezvous bodies this connection holds */
	struct sconn *next_dead; /* on the server's list of dead connections */
	int in_table;		 /* still in conns[] (until the end of a progress) */
	uint32_t window;
	struct rk_rpc_req *reqs;
	struct stage *stages, **stages_tail; /* staged answers in posting order */
	char peer[64];
};

struct handler {
	uint16_t method;
	rk_rpc_handler_fn fn;
	void *arg;
};

struct rk_rpc_server {
	struct rk_device *dev;
	struct rk_listener *lis;
	struct rk_wait *ws;
	struct rk_pool *pool;
	struct rk_rpc_server_opts o;
	struct rk_conn_opts copts;
	struct rk_rpc_limits lim;
	uint32_t req_buf;
	uint8_t token[RK_HELLO_TOKEN_MAX];
	struct handler *handlers;
	unsigned nhandlers;
	struct rk_pd *pd;
	struct sconn **conns;
	struct sconn *dead;	/* dropped: out of conns[] and freed after progress */
	struct rk_rpc_req *oom; /* replies that found no memory (under lock) */
	int in_progress;
	struct pending *retry, **retry_tail; /* progress thread only */
	pthread_mutex_t lock;		     /* guards deferred */
	struct pending *deferred, **deferred_tail;
	int deferred_n, wake_req; /* atomics */
	struct rk_rpc_server_stats st;
};

/* The server whose progress this thread is running (a reply from it posts at once). */
static __thread struct rk_rpc_server *progress_of;

static uint64_t wrid(uint64_t tag, unsigned idx, unsigned low)
{
	return tag << 48 | (uint64_t)idx << 32 | low;
}

/* ---- memory ------------------------------------------------------------ */

static int stage_alloc(struct rk_rpc_server *srv, uint64_t bytes, struct stage *s,
		       struct rk_error *err)
{
	memset(s, 0, sizeof(*s));
	s->bytes = bytes;
	if (bytes <= POOL_MAX_CLASS)
		return rk_pool_alloc(srv->pool, bytes, &s->buf, err);
	return rk_mr_alloc_pd(srv->pd, bytes, RK_ACCESS_LOCAL, err, &s->mr);
}

static void stage_free(struct rk_rpc_server *srv, struct stage *s)
{
	if (s->mr)
		rk_mr_dereg(s->mr);
	else if (s->buf.addr)
		rk_pool_free(srv->pool, &s->buf);
	s->mr = NULL;
	s->buf.addr = NULL;
}

static void *stage_addr(const struct stage *s)
{
	return s->mr ? rk_mr_addr(s->mr) : s->buf.addr;
}

static uint32_t stage_lkey(const struct stage *s)
{
	return s->mr ? rk_mr_lkey(s->mr) : s->buf.lkey;
}

static unsigned chunks(uint64_t len)
{
	return (unsigned)((len + CHUNK - 1) / CHUNK);
}

/* ---- connections ------------------------------------------------------- */

static void req_release(struct rk_rpc_server *srv, struct rk_rpc_req *q)
{
	if (q->out) {
		stage_free(srv, q->out);
		free(q->out);
		q->out = NULL;
	}
	if (q->body.bytes) {
		srv->st.rdv_bytes -= q->body.bytes;
		q->c->rdv_bytes -= q->body.bytes;
		stage_free(srv, &q->body);
		q->body.bytes = 0;
	}
	q->state = R_FREE;
}

/* Drop queued work of @c that no handler holds (READs, status answers). */
static void purge_retry(struct rk_rpc_server *srv, const struct sconn *c)
{
	struct pending **pp = &srv->retry;

	while (*pp) {
		struct pending *p = *pp;

		if (p->req->c == c && p->kind != P_ANSWER) {
			*pp = p->next;
			free(p);
		} else {
			pp = &p->next;
		}
	}
	srv->retry_tail = pp;
}

/* Free what is left of dead @c; nobody may reference it any more. */
static void conn_free(struct rk_rpc_server *srv, struct sconn *c)
{
	purge_retry(srv, c);
	rk_conn_destroy(c->conn); /* NULL once dropped: already destroyed */
	for (uint32_t i = 0; c->reqs && i < c->window; i++)
		req_release(srv, &c->reqs[i]);
	while (c->stages) {
		struct stage *s = c->stages;

		c->stages = s->next;
		stage_free(srv, s);
		free(s);
	}
	rk_send_set_destroy(c->ss);
	rk_recv_set_destroy(c->rs);
	free(c->reqs);
	free(c);
}

/* Drop @c: logged, its QP, CQ and CM id gone now; the rest once no handler holds a request. */
static void conn_drop(struct rk_rpc_server *srv, struct sconn *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void conn_drop(struct rk_rpc_server *srv, struct sconn *c, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (c->dead)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->dead = 1;
	srv->st.conns--;
	if (c->closed) { /* the peer left: not a failure of anyone's */
		rk_dbg("rpc server: connection from %s closed: %s", c->peer, msg);
		srv->st.conns_closed++;
	} else {
		rk_warn("rpc server: connection from %s dropped: %s", c->peer, msg);
		srv->st.conns_dropped++;
	}
	if (c->cq_id >= 0)
		rk_wait_remove(srv->ws, c->cq_id);
	if (c->conn_id >= 0)
		rk_wait_remove(srv->ws, c->conn_id);
	c->cq_id = c->conn_id = -1;
	/*
	 * The QP goes now (a peer must not keep a QP, a CQ and two fds by
	 * leaving requests with a handler); the receive buffers that handlers
	 * may still read are the pool's and stay. The slot in conns[] is freed
	 * at the end of this progress: events of this batch still name it.
	 */
	rk_conn_disconnect(c->conn, 0, NULL);
	rk_conn_destroy(c->conn);
	c->conn = NULL;
	purge_retry(srv, c);
	c->next_dead = srv->dead;
	srv->dead = c;
}

/* End of progress: dead connections leave the table; those nobody holds are freed. */
static void sweep_dead(struct rk_rpc_server *srv)
{
	struct sconn **pp = &srv->dead;

	while (*pp) {
		struct sconn *c = *pp;

		if (c->in_table) {
			srv->conns[c->idx] = NULL;
			c->in_table = 0;
		}
		if (c->held) {
			pp = &c->next_dead;
			continue;
		}
		*pp = c->next_dead;
		conn_free(srv, c);
	}
}

static int conn_prepare(struct rk_conn *conn, void *arg)
{
	struct sconn *c = arg;
	struct rk_rpc_server *srv = c->srv;
	struct rk_msgbuf_opts ro = {
	    .count = c->window, .size = srv->req_buf, .wr_id_base = wrid(TAG_RECV, c->idx, 0)};
	struct rk_msgbuf_opts so = {.count = c->window + ANSWER_SPARE_BUF,
				    .size = srv->lim.slot_size,
				    .wr_id_base = wrid(TAG_ANSWER, c->idx, 0),
				    .signal_every = SIGNAL_EVERY};
	int r = rk_recv_set_create(conn, srv->pool, &ro, NULL, &c->rs);

	return r ? r : rk_send_set_create(conn, srv->pool, &so, NULL, &c->ss);
}

/* The hello's token against ours, in time that does not depend on where they differ. */
static int token_ok(const struct rk_rpc_server *srv, const struct rk_hello *h)
{
	uint8_t diff = (uint8_t)(h->token_len ^ srv->o.token_len);

	for (unsigned i = 0; i < srv->o.token_len; i++)
		diff |= (uint8_t)(h->token[i] ^ srv->token[i]);
	return diff == 0;
}

static void accept_one(struct rk_rpc_server *srv, struct rk_cm_request *req)
{
	const struct rk_hello *hello = rk_cm_request_hello(req);
	uint8_t reply[RK_RPC_ACCEPT_LEN];
	struct rk_rpc_accept acc;
	struct rk_conn_opts co = srv->copts;
	struct rk_error err;
	struct sconn *c;
	unsigned idx;

	if (srv->o.token_len && !token_ok(srv, hello)) {
		srv->st.conns_refused++;
		rk_warn("rpc server: %s refused: wrong access token", rk_cm_request_peer(req));
		rk_cm_request_reject(req, RK_REJECT_TOKEN, "wrong access token", NULL);
		return;
	}
	for (idx = 0; idx < srv->o.max_conns && srv->conns[idx]; idx++)
		;
	if (idx == srv->o.max_conns) {
		srv->st.conns_refused++;
		rk_cm_request_reject(req, RK_REJECT_BUSY, "at its connection limit", NULL);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->window = hello->app_arg && hello->app_arg < srv->o.window ? hello->app_arg
									     : srv->o.window;
	if (c)
		c->reqs = calloc(c->window, sizeof(*c->reqs));
	if (!c || !c->reqs) {
		free(c);
		srv->st.conns_refused++;
		rk_cm_request_reject(req, RK_REJECT_BUSY, "out of memory", NULL);
		return;
	}
	c->srv = srv;
	c->idx = idx;
	c->cq_id = c->conn_id = -1;
	c->stages_tail = &c->stages;
	snprintf(c->peer, sizeof(c->peer), "%s", rk_cm_request_peer(req));
	for (uint32_t i = 0; i < c->window; i++) {
		c->reqs[i].c = c;
		c->reqs[i].slot = (uint16_t)i;
	}
	srv->conns[idx] = c;
	c->in_table = 1;
	co.rq_depth = co.rq_depth > c->window ? co.rq_depth : c->window;
	co.sq_depth = co.sq_depth > 2 * c->window + 32 ? co.sq_depth : 2 * c->window + 32;
	co.prepare = conn_prepare;
	co.prepare_arg = c;
	acc.window = c->window;
	acc.req_inline = srv->lim.req_inline;
	acc.slot_size = srv->lim.slot_size;
	acc.max_msg = srv->lim.max_msg;
	rk_rpc_accept_encode(&acc, reply);
	if (rk_cm_request_accept(req, &co, reply, sizeof(reply), 0, &err, &c->conn)) {
		rk_warn("rpc server: accepting %s failed: %s", c->peer, err.msg);
		srv->st.conns_refused++;
		rk_send_set_destroy(c->ss);
		rk_recv_set_destroy(c->rs);
		srv->conns[idx] = NULL;
		free(c->reqs);
		free(c);
		return;
	}
	srv->st.conns_accepted++;
	srv->st.conns++;
	c->cq_id = rk_wait_add_cq(srv->ws, rk_conn_cq(c->conn), MAX_EVENTS, idx, &err);
	c->conn_id = c->cq_id < 0 ? -1 : rk_wait_add_conn(srv->ws, c->conn, CONN_TAG | idx, &err);
	if (c->cq_id < 0 || c->conn_id < 0)
		conn_drop(srv, c, "cannot wait on it: %s", err.msg);
}

static void accept_all(struct rk_rpc_server *srv)
{
	struct rk_cm_request *req;
	struct rk_error err;

	while (rk_listener_get_request(srv->lis, 0, &err, &req) == 0)
		accept_one(srv, req);
}

/* ---- answers ----------------------------------------------------------- */

static const struct handler *find_handler(const struct rk_rpc_server *srv, uint16_t m)
{
	for (unsigned i = 0; i < srv->nhandlers; i++)
		if (srv->handlers[i].method == m)
			return &srv->handlers[i];
	return NULL;
}

static void retry_push(struct rk_rpc_server *srv, struct pending *p)
{
	p->next = NULL;
	*srv->retry_tail = p;
	srv->retry_tail = &p->next;
}

/* @data is @q's rk_rpc_reply_buf(): sent from there, never copied. */
static int in_out(const struct rk_rpc_req *q, const void *data)
{
	return q->out && data == stage_addr(q->out);
}

static struct pending *pending_new(struct rk_rpc_req *q, int32_t code, const void *data,
				   uint32_t len)
{
	int keep = in_out(q, data);
	struct pending *p = malloc(sizeof(*p) + (keep ? 0 : len));

	if (!p)
		return NULL;
	p->req = q;
	p->kind = P_ANSWER;
	p->status = 0;
	p->code = code;
	p->len = len;
	p->in_out = keep;
	if (len && !keep)
		memcpy(p->data, data, len);
	return p;
}

static const void *pending_data(const struct pending *p)
{
	return p->in_out ? stage_addr(p->req->out) : p->data;
}

/* Post a staged answer's data to the caller's buffer; the last WRITE frees the stage. */
static int post_data(struct sconn *c, struct rk_rpc_req *q, const uint8_t *src, uint32_t lkey,
		     uint32_t len, struct rk_error *err)
{
	for (uint32_t off = 0; off < len; off += CHUNK) {
		uint32_t n = len - off < CHUNK ? len - off : CHUNK;
		int last = off + n == len;
		struct rk_wr wr = {.op = RK_OP_WRITE,
				   .flags = last ? RK_WR_SIGNALED : 0,
				   .wr_id = wrid(last ? TAG_STAGE : TAG_DATA, c->idx, q->slot),
				   .addr = (void *)(src + off),
				   .len = n,
				   .lkey = lkey,
				   .remote_addr = q->h.resp_addr + off,
				   .rkey = q->h.resp_rkey};
		int r = rk_post(c->conn, &wr, err);

		if (r)
			return r;
	}
	return 0;
}

/*
 * Answer @q now if the send queue has room: 1 posted (q released), 0 no
 * room (nothing done), negative when the connection failed (dropped).
 */
static int answer_now(struct rk_rpc_server *srv, struct rk_rpc_req *q, uint32_t status,
		      int32_t code, const void *data, uint32_t len)
{
	struct sconn *c = q->c;
	struct rk_rpc_ans_hdr a = {.status = status, .code = code, .len = len};
	struct stage *st = NULL;
	struct rk_send_buf b;
	struct rk_error err;
	int r;

	if (len > q->h.resp_cap) {
		a.status = RK_RPC_TOO_BIG;
		a.len = len = 0;
	}
	/* What fits the slot goes in it, even for a direct call: one write, not two. */
	a.in_slot = len <= srv->lim.slot_size - RK_RPC_ANS_HDR;
	if (rk_sq_room(c->conn) < 1 + (a.in_slot ? 0 : chunks(len)) ||
	    rk_send_set_free_count(c->ss) == 0)
		return 0;
	if (!a.in_slot && in_out(q, data)) { /* built in place: sent from there */
		st = q->out;
		q->out = NULL;
	} else if (!a.in_slot) { /* only a direct call can take more than the slot */
		st = calloc(1, sizeof(*st));
		if (!st || stage_alloc(srv, len, st, &err)) {
			free(st);
			return 0; /* try again when memory comes back */
		}
		memcpy(stage_addr(st), data, len);
	}
	rk_send_set_get(c->ss, &b);
	rk_rpc_ans_encode(&a, b.data);
	if (len && !st) /* @data may lie in the request's receive buffer: copy it first */
		memcpy((uint8_t *)b.data + RK_RPC_ANS_HDR, data, len);
	/* Then the receive: the client's next request on this slot follows the answer. */
	if (q->has_buf) {
		q->has_buf = 0;
		r = rk_recv_set_release(c->rs, q->buf_index, &err);
		if (r) {
			rk_send_set_put(c->ss, b.index);
			goto fail;
		}
	}
	if (st) {
		r = post_data(c, q, stage_addr(st), stage_lkey(st), len, &err);
		if (r) {
			rk_send_set_put(c->ss, b.index);
			goto fail;
		}
		/* Freed when its last WRITE completes (the queue completes in order). */
		*c->stages_tail = st;
		c->stages_tail = &st->next;
		st = NULL;
	}
	struct rk_wr wr = {.op = RK_OP_WRITE_IMM,
			   .len = RK_RPC_ANS_HDR + (a.in_slot ? len : 0),
			   .remote_addr = q->h.slot_addr,
			   .rkey = q->h.slot_rkey,
			   .imm = rk_rpc_imm(q->slot, q->h.gen)};
	r = rk_send_set_post(c->ss, b.index, &wr, &err);
	if (r) {
		rk_send_set_put(c->ss, b.index);
		goto fail;
	}
	srv->st.calls++;
	if (a.status != RK_RPC_OK)
		srv->st.errors_sent++;
	req_release(srv, q);
	return 1;
fail:
	if (st) {
		stage_free(srv, st);
		free(st);
	}
	req_release(srv, q);
	conn_drop(srv, c, "posting an answer failed: %s", err.msg);
	return -EIO;
}

/* An answer for a request a handler held: post it, queue it, or let it go. */
static void answer_held(struct rk_rpc_server *srv, struct rk_rpc_req *q, int32_t code,
			const void *data, uint32_t len, struct pending *p)
{
	struct sconn *c = q->c;
	int r = 0;

	if (!c->dead)
		r = answer_now(srv, q, code ? RK_RPC_APP_ERROR : RK_RPC_OK, code, data, len);
	if (r == 0 && !c->dead) { /* no room now: keep it (a copy) until there is */
		if (!p)
			p = pending_new(q, code, data, len);
		if (p) {
			retry_push(srv, p);
			return;
		}
		conn_drop(srv, c, "out of memory queueing an answer");
	}
	free(p);
	if (c->dead)
		req_release(srv, q);
	c->held--; /* a dead connection nobody holds is freed at the end of progress */
}

/* An answer the server itself gives (no handler ran): posted now or queued for room. */
static void answer_status(struct rk_rpc_server *srv, struct rk_rpc_req *q, uint32_t status,
			  struct pending *p)
{
	if (q->c->dead || answer_now(srv, q, status, 0, NULL, 0)) {
		free(p);
		return;
	}
	if (!p)
		p = pending_new(q, 0, NULL, 0);
	if (!p) {
		req_release(srv, q);
		conn_drop(srv, q->c, "out of memory queueing a status answer");
		return;
	}
	p->kind = P_STATUS;
	p->status = status;
	retry_push(srv, p);
}

static void dispatch(struct rk_rpc_server *srv, struct rk_rpc_req *q)
{
	const struct handler *hd = find_handler(srv, q->h.method);

	if (!hd) {
		answer_status(srv, q, RK_RPC_NO_METHOD, NULL);
		return;
	}
	q->state = R_HANDLER;
	q->c->held++;
	hd->fn(q, hd->arg);
}

/* ---- requests ---------------------------------------------------------- */

/* Post the body's READs if the send queue has room: 1, 0 (no room), < 0 dropped. */
static int read_body(struct rk_rpc_server *srv, struct rk_rpc_req *q)
{
	struct sconn *c = q->c;
	uint32_t len = q->h.req_len;
	struct rk_error err;

	if (rk_sq_room(c->conn) < chunks(len))
		return 0;
	q->reads_left = chunks(len);
	for (uint32_t off = 0; off < len; off += CHUNK) {
		uint32_t n = len - off < CHUNK ? len - off : CHUNK;
		struct rk_wr wr = {.op = RK_OP_READ,
				   .flags = RK_WR_SIGNALED,
				   .wr_id = wrid(TAG_READ, c->idx, q->slot),
				   .addr = (uint8_t *)stage_addr(&q->body) + off,
				   .len = n,
				   .lkey = stage_lkey(&q->body),
				   .remote_addr = q->h.req_addr + off,
				   .rkey = q->h.req_rkey};

		if (rk_post(c->conn, &wr, &err)) {
			conn_drop(srv, c, "posting a READ failed: %s", err.msg);
			return -EIO;
		}
	}
	return 1;
}

static void on_request(struct rk_rpc_server *srv, struct sconn *c, const struct rk_msg *m)
{
	struct rk_rpc_req_hdr h;
	struct rk_rpc_req *q;
	const char *why = NULL;
	struct rk_error err;
	int r;

	struct rk_rpc_limits lim = srv->lim;

	lim.window = c->window; /* what this connection was granted */
	r = rk_rpc_req_decode(m->data, m->len, &lim, &h, &why);
	if (r || m->opcode != IBV_WC_RECV) {
		rk_recv_set_release(c->rs, m->index, NULL);
		return conn_drop(srv, c, "%s",
				 r ? why : "a write with immediate where a SEND belongs");
	}
	q = &c->reqs[h.slot];
	if (q->state != R_FREE) {
		rk_recv_set_release(c->rs, m->index, NULL);
		return conn_drop(srv, c, "a request for slot %u, which is still busy", h.slot);
	}
	q->h = h;
	if (!(h.flags & RK_RPC_F_RDV)) {
		q->has_buf = 1;
		q->buf_index = m->index;
		q->data = (const uint8_t *)m->data + RK_RPC_REQ_HDR;
		return dispatch(srv, q);
	}
	/* Rendezvous: the header is copied, the receive may go back at once. */
	if (rk_recv_set_release(c->rs, m->index, &err))
		return conn_drop(srv, c, "reposting a receive failed: %s", err.msg);
	q->has_buf = 0;
	/* Bounded for the server, and per connection so one client cannot take it all. */
	if (srv->st.rdv_bytes + h.req_len > srv->o.max_rdv_bytes ||
	    c->rdv_bytes + h.req_len > srv->o.max_rdv_per_conn ||
	    stage_alloc(srv, h.req_len, &q->body, &err)) {
		q->body.bytes = 0;
		return answer_status(srv, q, RK_RPC_NO_ROOM, NULL);
	}
	srv->st.rdv_bytes += h.req_len;
	c->rdv_bytes += h.req_len;
	q->state = R_READING;
	q->data = stage_addr(&q->body);
	r = read_body(srv, q);
	if (r == 0) {
		struct pending *p = pending_new(q, 0, NULL, 0);

		if (!p)
			return conn_drop(srv, c, "out of memory queueing a READ");
		p->kind = P_READ;
		retry_push(srv, p);
	}
}

static void on_read_done(struct rk_rpc_server *srv, struct sconn *c, unsigned slot)
{
	struct rk_rpc_req *q;

	if (slot >= c->window || c->reqs[slot].state != R_READING)
		return;
	q = &c->reqs[slot];
	if (--q->reads_left == 0)
		dispatch(srv, q);
}

static void on_wc(struct rk_rpc_server *srv, struct sconn *c, const struct ibv_wc *wc)
{
	uint64_t tag = wc->wr_id >> 48;
	struct rk_error err;
	struct rk_msg m;
	int r;

	if (c->dead)
		return;
	/*
	 * Accepted without waiting: a request can come before rdma_cm says
	 * ESTABLISHED (the peer's ready-to-use message is late), and nothing
	 * may be posted on a connection that is not CONNECTED yet.
	 */
	if (rk_conn_state(c->conn) == RK_CONN_CONNECTING &&
	    rk_cm_comm_established(c->conn, ESTABLISH_MS, &err) != RK_CONN_CONNECTED)
		return conn_drop(srv, c,
				 "data before the connection was established, and it "
				 "did not become so: %s",
				 err.msg);
	if (tag == TAG_RECV) {
		r = rk_recv_set_take(c->rs, wc, &m, &err);
		if (r < 0)
			return conn_drop(srv, c, "%s", err.msg);
		if (r > 0)
			on_request(srv, c, &m);
		return;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		rk_error_from_wc(&err, wc);
		if (tag == TAG_ANSWER)
			rk_send_set_complete(c->ss, wc);
		return conn_drop(srv, c, "%s", err.msg);
	}
	if (tag == TAG_ANSWER) {
		rk_send_set_complete(c->ss, wc);
	} else if (tag == TAG_READ) {
		on_read_done(srv, c, (unsigned)(wc->wr_id & 0xffff));
	} else if (tag == TAG_STAGE && c->stages) {
		struct stage *s = c->stages;

		c->stages = s->next;
		if (!c->stages)
			c->stages_tail = &c->stages;
		stage_free(srv, s);
		free(s);
	}
}

/* ---- progress ---------------------------------------------------------- */

/* Answers from other threads, and work that waited for send-queue room. */
static void run_queues(struct rk_rpc_server *srv)
{
	struct pending *list = NULL, *p;
	struct rk_rpc_req *oom = NULL, *q;

	if (__atomic_load_n(&srv->deferred_n, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&srv->lock);
		list = srv->deferred;
		srv->deferred = NULL;
		srv->deferred_tail = &srv->deferred;
		oom = srv->oom;
		srv->oom = NULL;
		__atomic_store_n(&srv->deferred_n, 0, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&srv->lock);
	}
	while ((p = list)) {
		list = p->next;
		answer_held(srv, p->req, p->code, pending_data(p), p->len, p);
	}
	while ((q = oom)) { /* replies that found no memory for their copy */
		oom = q->next_oom;
		answer_held(srv, q, -ENOMEM, NULL, 0, NULL);
	}
	/* One pass over the retries; what still does not fit goes back on. */
	list = srv->retry;
	srv->retry = NULL;
	srv->retry_tail = &srv->retry;
	while ((p = list)) {
		list = p->next;
		if (p->kind == P_ANSWER)
			answer_held(srv, p->req, p->code, pending_data(p), p->len, p);
		else if (p->kind == P_STATUS)
			answer_status(srv, p->req, p->status, p);
		else if (!p->req->c->dead && read_body(srv, p->req) == 0)
			retry_push(srv, p); /* still no room */
		else
			free(p); /* posted, or its connection is gone */
	}
}

int rk_rpc_server_progress(struct rk_rpc_server *srv, int timeout_ms, struct rk_error *err)
{
	struct rk_wait_event ev[MAX_EVENTS];
	int n, woken = 0;

	if (srv->in_progress) /* from a handler: the completions being handled would be lost */
		return rk_err_set(err, EBUSY, "rk_rpc_server_progress", "called from a handler");
	srv->in_progress = 1;
	progress_of = srv;
	if (srv->retry)
		timeout_ms = 0; /* work waits for room: look again soon */
	n = rk_wait(srv->ws, ev, MAX_EVENTS, timeout_ms, err);
	for (int k = 0; k < n; k++) {
		uint64_t tag = ev[k].tag;
		struct sconn *c;

		if (ev[k].src == RK_SRC_WAKE) {
			woken = 1;
			continue;
		}
		if (tag == TAG_LISTEN) {
			accept_all(srv);
			continue;
		}
		c = srv->conns[tag & 0xffff];
		if (!c || c->dead)
			continue;
		if (ev[k].src == RK_SRC_CQ) {
			/* A drop takes the CQ out of the set and frees these completions. */
			for (int j = 0; j < ev[k].nwc && !c->dead; j++)
				on_wc(srv, c, &ev[k].wc[j]);
		} else if (ev[k].src == RK_SRC_CONN && ev[k].state != RK_CONN_CONNECTED &&
			   ev[k].state != RK_CONN_CONNECTING) {
			c->closed = ev[k].state == RK_CONN_DISCONNECTED;
			conn_drop(srv, c, "connection %s", rk_conn_state_str(ev[k].state));
		}
	}
	run_queues(srv);
	sweep_dead(srv);
	progress_of = NULL;
	srv->in_progress = 0;
	if (n == -ETIMEDOUT || n == 0)
		return woken ? -EINTR : -ETIMEDOUT;
	if (n < 0)
		return n;
	if (woken && __atomic_exchange_n(&srv->wake_req, 0, __ATOMIC_ACQ_REL))
		return -EINTR;
	return 0;
}

void rk_rpc_server_wake(struct rk_rpc_server *srv)
{
	__atomic_store_n(&srv->wake_req, 1, __ATOMIC_RELEASE);
	rk_wait_wake(srv->ws);
}

/* ---- requests seen by handlers ----------------------------------------- */

uint16_t rk_rpc_req_method(const struct rk_rpc_req *req)
{
	return req->h.method;
}

const void *rk_rpc_req_data(const struct rk_rpc_req *req, uint32_t *len)
{
	if (len)
		*len = req->h.req_len;
	return req->data;
}

const char *rk_rpc_req_peer(const struct rk_rpc_req *req)
{
	return req->c->peer;
}

uint32_t rk_rpc_req_resp_cap(const struct rk_rpc_req *req)
{
	return req->h.resp_cap;
}

void *rk_rpc_reply_buf(struct rk_rpc_req *req, uint32_t len)
{
	struct rk_rpc_server *srv = req->c->srv;
	struct stage *st;
	struct rk_error err;

	if (len > req->h.resp_cap) {
		errno = EMSGSIZE;
		return NULL;
	}
	if (req->out && req->out->bytes >= len)
		return stage_addr(req->out);
	if (progress_of != srv) { /* the pool is the progress thread's alone */
		errno = EPERM;
		return NULL;
	}
	st = calloc(1, sizeof(*st));
	if (!st || stage_alloc(srv, len ? len : 1, st, &err)) {
		free(st);
		errno = ENOMEM;
		return NULL;
	}
	if (req->out) { /* too small: the larger one replaces it */
		stage_free(srv, req->out);
		free(req->out);
	}
	req->out = st;
	return stage_addr(st);
}

int rk_rpc_reply(struct rk_rpc_req *req, int32_t code, const void *data, uint32_t len)
{
	struct rk_rpc_server *srv = req->c->srv;
	struct pending *p;
	int r = 0;

	if (in_out(req, data) && len > req->out->bytes) { /* past the buffer: a bug, not sent */
		code = -EINVAL;
		data = NULL;
		len = 0;
		r = -EINVAL;
	}
	if (progress_of == srv) { /* a handler answering at once, or one deferred on this thread */
		answer_held(srv, req, code, data, len, NULL);
		return r;
	}
	p = pending_new(req, code, data, len);
	if (!p) { /* no memory for the copy: the caller gets -ENOMEM as the handler's code */
		pthread_mutex_lock(&srv->lock);
		req->next_oom = srv->oom;
		srv->oom = req;
		__atomic_store_n(&srv->deferred_n, 1, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&srv->lock);
		rk_wait_wake(srv->ws);
		return -ENOMEM;
	}
	pthread_mutex_lock(&srv->lock);
	*srv->deferred_tail = p;
	srv->deferred_tail = &p->next;
	p->next = NULL;
	__atomic_store_n(&srv->deferred_n, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&srv->lock);
	rk_wait_wake(srv->ws);
	return r;
}

/* ---- setup ------------------------------------------------------------- */

int rk_rpc_server_add(struct rk_rpc_server *srv, uint16_t method, rk_rpc_handler_fn fn, void *arg)
{
	struct handler *h;

	if (!fn)
		return -EINVAL;
	if (find_handler(srv, method))
		return -EEXIST;
	h = realloc(srv->handlers, (srv->nhandlers + 1) * sizeof(*h));
	if (!h)
		return -ENOMEM;
	srv->handlers = h;
	h[srv->nhandlers++] = (struct handler){.method = method, .fn = fn, .arg = arg};
	return 0;
}

static int resolve_opts(struct rk_rpc_server *srv, const struct rk_rpc_server_opts *opts,
			struct rk_error *err)
{
	struct rk_rpc_server_opts *o = &srv->o;

	*o = *opts;
	o->window = o->window ? o->window : DEF_WINDOW;
	o->slot_size = o->slot_size ? o->slot_size : DEF_SLOT;
	o->req_inline = o->req_inline ? o->req_inline : 4096 - RK_RPC_REQ_HDR;
	o->max_msg = o->max_msg ? o->max_msg : DEF_MAX_MSG;
	o->max_conns = o->max_conns ? o->max_conns : DEF_MAX_CONNS;
	o->max_rdv_bytes = o->max_rdv_bytes ? o->max_rdv_bytes : DEF_RDV_BYTES;
	if (!o->max_rdv_per_conn || o->max_rdv_per_conn > o->max_rdv_bytes)
		o->max_rdv_per_conn = o->max_rdv_bytes;
	if (o->window > RK_RPC_MAX_WINDOW || o->max_conns > MAX_CONNS_LIMIT ||
	    o->slot_size <= RK_RPC_ANS_HDR || o->slot_size > RK_RPC_WIRE_MAX_BUF ||
	    o->req_inline > RK_RPC_WIRE_MAX_BUF - RK_RPC_REQ_HDR ||
	    o->max_msg > RK_RPC_WIRE_MAX_MSG)
		return rk_err_set(
		    err, EINVAL, "rk_rpc_server_create",
		    "window %u (max %u), max_conns %u, slot %u, req_inline %u, max_msg %u",
		    o->window, RK_RPC_MAX_WINDOW, o->max_conns, o->slot_size, o->req_inline,
		    o->max_msg);
	srv->lim = (struct rk_rpc_limits){.window = o->window,
					  .req_inline = o->req_inline,
					  .slot_size = o->slot_size,
					  .max_msg = o->max_msg};
	srv->req_buf = RK_RPC_REQ_HDR + o->req_inline;
	if (o->token_len > RK_HELLO_TOKEN_MAX || (o->token_len && !o->token))
		return rk_err_set(err, EINVAL, "rk_rpc_server_create",
				  "a token of %u bytes (max %u)", o->token_len, RK_HELLO_TOKEN_MAX);
	if (o->token_len)
		memcpy(srv->token, o->token, o->token_len);
	o->token = NULL; /* the copy above is what counts */
	if (opts->conn)
		srv->copts = *opts->conn;
	else
		srv->copts.max_inline = DEF_INLINE; /* answer headers and small answers */
	if (!srv->copts.signal_every)
		srv->copts.signal_every = SIGNAL_EVERY;
	srv->copts.wait_mode = o->mode;
	return 0;
}

/* Size classes for the pool: request buffers, answer buffers, 64 KiB, 1 MiB. */
static void pool_classes(const struct rk_rpc_server *srv, struct rk_pool_opts *po)
{
	size_t want[4] = {srv->req_buf, srv->lim.slot_size, 64u << 10, POOL_MAX_CLASS};
	unsigned n = 0;

	for (unsigned k = 0; k < 4; k++) { /* ascending, no repeats */
		size_t best = 0;

		for (unsigned j = 0; j < 4; j++)
			if (want[j] > (n ? po->class_sizes[n - 1] : 0) && (!best || want[j] < best))
				best = want[j];
		if (best)
			po->class_sizes[n++] = best;
	}
}

int rk_rpc_server_create(struct rk_device *dev, const struct rk_rpc_server_opts *opts,
			 struct rk_error *err, struct rk_rpc_server **out)
{
	struct rk_listen_opts lo = {
	    .addr = opts->addr, .port = opts->port, .app_id = RK_RPC_APP_ID};
	struct rk_wait_opts wo = {.mode = opts->mode};
	struct rk_pool_opts po = {.access = RK_ACCESS_LOCAL};
	struct rk_rpc_server *srv;
	int r;

	*out = NULL;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return rk_err_set(err, ENOMEM, "rk_rpc_server_create", NULL);
	srv->dev = dev;
	srv->retry_tail = &srv->retry;
	srv->deferred_tail = &srv->deferred;
	pthread_mutex_init(&srv->lock, NULL);
	r = resolve_opts(srv, opts, err);
	if (r) {
		pthread_mutex_destroy(&srv->lock);
		free(srv);
		return r;
	}
	srv->conns = calloc(srv->o.max_conns, sizeof(struct sconn *));
	if (!srv->conns)
		r = rk_err_set(err, ENOMEM, "rk_rpc_server_create", NULL);
	pool_classes(srv, &po);
	/* A PD of our own: no client's QP reaches memory the application registered. */
	if (!r)
		r = rk_pd_alloc(dev, err, &srv->pd);
	po.pd = srv->pd;
	srv->copts.pd = srv->pd;
	if (!r)
		r = rk_pool_create(dev, &po, err, &srv->pool);
	if (!r)
		r = rk_wait_create(&wo, err, &srv->ws);
	if (!r)
		r = rk_listener_create(dev, &lo, err, &srv->lis);
	if (!r) {
		r = rk_wait_add_fd(srv->ws, rk_listener_fd(srv->lis), EPOLLIN, TAG_LISTEN, err);
		r = r < 0 ? r : 0;
	}
	if (r) {
		rk_rpc_server_destroy(srv);
		return r;
	}
	*out = srv;
	return 0;
}

uint16_t rk_rpc_server_port(const struct rk_rpc_server *srv)
{
	return rk_listener_port(srv->lis);
}

void rk_rpc_server_get_stats(const struct rk_rpc_server *srv, struct rk_rpc_server_stats *st)
{
	*st = srv->st;
}

void rk_rpc_server_destroy(struct rk_rpc_server *srv)
{
	struct pending *p;

	if (!srv)
		return;
	rk_listener_destroy(srv->lis);
	while ((p = srv->deferred)) {
		srv->deferred = p->next;
		free(p);
	}
	while ((p = srv->retry)) {
		srv->retry = p->next;
		free(p);
	}
	srv->retry_tail = &srv->retry;
	for (unsigned i = 0; srv->conns && i < srv->o.max_conns; i++) {
		struct sconn *c = srv->conns[i];

		if (!c || c->dead) /* the dead are on srv->dead */
			continue;
		c->dead = 1;
		if (c->cq_id >= 0)
			rk_wait_remove(srv->ws, c->cq_id);
		if (c->conn_id >= 0)
			rk_wait_remove(srv->ws, c->conn_id);
		conn_free(srv, c);
	}
	while (srv->dead) { /* dropped, some still held by handlers: freed regardless */
		struct sconn *c = srv->dead;

		srv->dead = c->next_dead;
		conn_free(srv, c);
	}
	rk_wait_destroy(srv->ws);
	rk_pool_destroy(srv->pool);
	rk_pd_free(srv->pd);
	free(srv->conns);
	free(srv->handlers);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}
