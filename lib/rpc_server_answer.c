/*
 * rpc_server_answer.c - the RPC server's answers. An answer goes out as one
 * WRITE WITH IMMEDIATE into the caller's slot (header, and the data when it
 * fits), after WRITEs of the data straight into the caller's buffer when it
 * does not. Data is staged in memory no peer can reach: a pool buffer up to
 * 1 MiB, a registration beyond.
 *
 * What cannot be posted now (no send-queue room, no send buffer, no
 * memory) waits on the retry queue of the progress thread. Answers from
 * other threads are copied onto the deferred queue under the lock, and the
 * progress thread posts them: the connections and the pool are its alone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_server_int.h"

int rk__rpcs_stage_alloc(struct rk_rpc_server *srv, uint64_t bytes, struct stage *s,
			 struct rk_error *err)
{
	memset(s, 0, sizeof(*s));
	s->bytes = bytes;
	if (bytes <= POOL_MAX_CLASS)
		return rk_pool_alloc(srv->pool, bytes, &s->buf, err);
	return rk_mr_alloc_pd(srv->pd, bytes, RK_ACCESS_LOCAL, err, &s->mr);
}

void rk__rpcs_stage_free(struct rk_rpc_server *srv, struct stage *s)
{
	if (s->mr)
		rk_mr_dereg(s->mr);
	else if (s->buf.addr)
		rk_pool_free(srv->pool, &s->buf);
	s->mr = NULL;
	s->buf.addr = NULL;
}

void rk__rpcs_retry_push(struct rk_rpc_server *srv, struct pending *p)
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

struct pending *rk__rpcs_pending_new(struct rk_rpc_req *q, int32_t code, const void *data,
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
 * An answer larger than the slot (only a direct call takes one): the
 * memory it leaves from, built in place or a copy; NULL without memory.
 */
static __attribute__((noinline)) struct stage *
stage_answer(struct rk_rpc_server *srv, struct rk_rpc_req *q, const void *data, uint32_t len)
{
	struct stage *st;
	struct rk_error err;

	if (in_out(q, data)) { /* built in place: sent from there */
		st = q->out;
		q->out = NULL;
		return st;
	}
	st = calloc(1, sizeof(*st));
	if (!st || rk__rpcs_stage_alloc(srv, len, st, &err)) {
		free(st);
		return NULL;
	}
	memcpy(stage_addr(st), data, len);
	return st;
}

/*
 * answer_now() for an answer that goes inline (@a in the slot, header and
 * data within c->ans_inline): encoded in the connection's ans_buf and
 * posted from its kept WR, which the provider copies as it is posted; no
 * send buffer is taken, none is in flight. The connection's rule signals
 * every signal_every-th and when its queue nears full (rk__post_kept); the
 * completion names TAG_INLINE and frees nothing but its queue slot.
 */
static inline __attribute__((always_inline)) int answer_inline(struct rk_rpc_server *srv,
							       struct rk_rpc_req *q,
							       const struct rk_rpc_ans_hdr *a,
							       const void *data, uint32_t len)
{
	struct sconn *c = q->c;
	struct rk_error err;
	int r;

	if (rk__rpcs_sq_room(c->conn) < 1)
		return 0;
	rk__rpc_ans_encode(a, c->ans_buf);
	if (len) /* @data may lie in the request's receive buffer: copy it first */
		memcpy(c->ans_buf + RK_RPC_ANS_HDR, data, len);
	/* Then the receive, as answer_now() says. */
	if (q->has_buf) {
		q->has_buf = 0;
		r = rk__recv_set_release_batch(c->rs, q->buf_index, RECV_SPARE, &err);
		if (r)
			goto fail;
	}
	c->ans_sge.length = RK_RPC_ANS_HDR + len;
	c->ans_wr.imm_data = htonl(rk__rpc_imm(q->slot, q->h.gen));
	c->ans_wr.wr.rdma.remote_addr = q->h.slot_addr;
	c->ans_wr.wr.rdma.rkey = q->h.slot_rkey;
	r = rk__post_kept(c->conn, &c->ans_wr, wrid(TAG_INLINE, c->idx, 0), IBV_SEND_INLINE, &err);
	if (r)
		goto fail;
	srv->st.calls++;
	if (a->status != RK_RPC_OK)
		srv->st.errors_sent++;
	rk__rpcs_req_done(srv, q);
	return 1;
fail:
	rk__rpcs_req_release(srv, q);
	rk__rpcs_conn_drop(srv, c, "posting an answer failed: %s", err.msg);
	return -EIO;
}

/*
 * Answer @q now if the send queue has room: 1 posted (q released), 0 no
 * room (nothing done), negative when the connection failed (dropped).
 * Inlined into its callers: every answer's path.
 */
static inline __attribute__((always_inline)) int answer_now(struct rk_rpc_server *srv,
							    struct rk_rpc_req *q, uint32_t status,
							    int32_t code, const void *data,
							    uint32_t len)
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
	if (__builtin_expect(a.in_slot && RK_RPC_ANS_HDR + len <= c->ans_inline, 1))
		return answer_inline(srv, q, &a, data, len);
	if (rk__rpcs_sq_room(c->conn) < 1 + (a.in_slot ? 0 : chunks(len)) ||
	    rk_send_set_free_count(c->ss) == 0)
		return 0;
	if (!a.in_slot) {
		st = stage_answer(srv, q, data, len);
		if (!st)
			return 0; /* try again when memory comes back */
	}
	rk_send_set_get(c->ss, &b);
	rk__rpc_ans_encode(&a, b.data);
	if (len && !st) /* @data may lie in the request's receive buffer: copy it first */
		memcpy((uint8_t *)b.data + RK_RPC_ANS_HDR, data, len);
	/*
	 * Then the receive (the client's next request on this slot follows
	 * the answer): posted with the next RECV_SPARE - 1, a spare meanwhile.
	 */
	if (q->has_buf) {
		q->has_buf = 0;
		r = rk__recv_set_release_batch(c->rs, q->buf_index, RECV_SPARE, &err);
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
	/* The buffer's own WR, kept built: its length, the caller's slot and the immediate. */
	r = rk__send_set_post_write_imm(c->ss, b.index, RK_RPC_ANS_HDR + (a.in_slot ? len : 0),
					q->h.slot_addr, q->h.slot_rkey,
					rk__rpc_imm(q->slot, q->h.gen), &err);
	if (r) {
		rk_send_set_put(c->ss, b.index);
		goto fail;
	}
	srv->st.calls++;
	if (a.status != RK_RPC_OK)
		srv->st.errors_sent++;
	rk__rpcs_req_done(srv, q);
	return 1;
fail:
	if (st) {
		rk__rpcs_stage_free(srv, st);
		free(st);
	}
	rk__rpcs_req_release(srv, q);
	rk__rpcs_conn_drop(srv, c, "posting an answer failed: %s", err.msg);
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
			p = rk__rpcs_pending_new(q, code, data, len);
		if (p) {
			rk__rpcs_retry_push(srv, p);
			return;
		}
		rk__rpcs_conn_drop(srv, c, "out of memory queueing an answer");
	}
	if (p) /* from a queue (an answer at once has none) */
		free(p);
	if (c->dead)
		rk__rpcs_req_release(srv, q);
	c->held--; /* a dead connection nobody holds is freed at the end of progress */
}

/* An answer the server itself gives (no handler ran): posted now or queued for room. */
void rk__rpcs_answer_status(struct rk_rpc_server *srv, struct rk_rpc_req *q, uint32_t status,
			    struct pending *p)
{
	if (q->c->dead || answer_now(srv, q, status, 0, NULL, 0)) {
		free(p);
		return;
	}
	if (!p)
		p = rk__rpcs_pending_new(q, 0, NULL, 0);
	if (!p) {
		rk__rpcs_req_release(srv, q);
		rk__rpcs_conn_drop(srv, q->c, "out of memory queueing a status answer");
		return;
	}
	p->kind = P_STATUS;
	p->status = status;
	rk__rpcs_retry_push(srv, p);
}

/* Answers from other threads, and work that waited for send-queue room. */
void rk__rpcs_run_queues(struct rk_rpc_server *srv)
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
			rk__rpcs_answer_status(srv, p->req, p->status, p);
		else if (!p->req->c->dead && rk__rpcs_read_body(srv, p->req) == 0)
			rk__rpcs_retry_push(srv, p); /* still no room */
		else
			free(p); /* posted, or its connection is gone */
	}
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
	if (!rk__rpcs_on_progress(srv)) { /* the pool is the progress thread's alone */
		errno = EPERM;
		return NULL;
	}
	st = calloc(1, sizeof(*st));
	if (!st || rk__rpcs_stage_alloc(srv, len ? len : 1, st, &err)) {
		free(st);
		errno = ENOMEM;
		return NULL;
	}
	if (req->out) { /* too small: the larger one replaces it */
		rk__rpcs_stage_free(srv, req->out);
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
	/* A handler answering at once, or one deferred on this thread: posted now. */
	if (rk__rpcs_on_progress(srv)) {
		/*
		 * The common answer in line (the connection up, room for it);
		 * anything else as answer_held says, which tries once more
		 * and queues it, or lets it go with its dead connection.
		 */
		if (__builtin_expect(!req->c->dead, 1) &&
		    answer_now(srv, req, code ? RK_RPC_APP_ERROR : RK_RPC_OK, code, data, len) == 1)
			req->c->held--;
		else
			answer_held(srv, req, code, data, len, NULL);
		return r;
	}
	p = rk__rpcs_pending_new(req, code, data, len);
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
