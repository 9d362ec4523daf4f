/*
 * rpc_server.c - the serving end of rpc.h: check each request, READ
 * rendezvous bodies, run handlers, progress, setup. Connections are
 * rpc_server_conn.c's, answers rpc_server_answer.c's (rpc_server_int.h).
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
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include <rdmakit/wire.h>

#include "rpc_server_int.h"

static const struct handler *find_handler(const struct rk_rpc_server *srv, uint16_t m)
{
	for (unsigned i = 0; i < srv->nhandlers; i++)
		if (srv->handlers[i].method == m)
			return &srv->handlers[i];
	return NULL;
}

static void dispatch(struct rk_rpc_server *srv, struct rk_rpc_req *q)
{
	const struct handler *hd = find_handler(srv, q->h.method);

	if (!hd) {
		rk__rpcs_answer_status(srv, q, RK_RPC_NO_METHOD, NULL);
		return;
	}
	q->state = R_HANDLER;
	q->c->held++;
	hd->fn(q, hd->arg);
}

/* Post the body's READs if the send queue has room: 1, 0 (no room), < 0 dropped. */
int rk__rpcs_read_body(struct rk_rpc_server *srv, struct rk_rpc_req *q)
{
	struct sconn *c = q->c;
	uint32_t len = q->h.req_len;
	struct rk_error err;

	if (rk__rpcs_sq_room(c->conn) < chunks(len))
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
			rk__rpcs_conn_drop(srv, c, "posting a READ failed: %s", err.msg);
			return -EIO;
		}
	}
	return 1;
}

/*
 * A request in receive buffer @index: @data, @len bytes (NULL: it came by
 * WRITE WITH IMMEDIATE, no request whatever its bytes say).
 */
static void on_request(struct rk_rpc_server *srv, struct sconn *c, const uint8_t *data,
		       uint32_t len, uint32_t index)
{
	struct rk_rpc_req_hdr busy;
	struct rk_rpc_req *q = NULL;
	const char *why = NULL;
	struct rk_error err;
	int r = -EPROTO;

	c->requests++; /* not idle (rk__rpcs_idle_sweep) */
	if (data) {
		/*
		 * Decoded straight into the request of the slot it names, when
		 * that slot is in the window and free (the receive buffer is the
		 * server's alone: what the peer sent cannot change any more);
		 * else aside, for the reason. The limits are the connection's
		 * (its window is what it was granted).
		 */
		uint16_t slot = len >= RK_RPC_REQ_HDR ? rk_get16(data + 4) : UINT16_MAX;

		if (slot < c->window && c->reqs[slot].state == R_FREE) {
			q = &c->reqs[slot];
			/* The usual request (inline body, answer in the slot) in fewer steps. */
			if (__builtin_expect(
				rk__rpc_req_decode_usual(data, len, &c->lim, &q->h) == 0, 1)) {
				q->has_buf = 1;
				q->buf_index = index;
				q->data = data + RK_RPC_REQ_HDR;
				dispatch(srv, q);
				return;
			}
		}
		r = rk__rpc_req_decode(data, len, &c->lim, q ? &q->h : &busy, &why);
	}
	if (r) {
		rk_recv_set_release(c->rs, index, NULL);
		rk__rpcs_conn_drop(srv, c, "%s",
				   why ? why : "a write with immediate where a SEND belongs");
		return;
	}
	if (!q) { /* the decoder checked the slot against the window: it is busy */
		rk_recv_set_release(c->rs, index, NULL);
		rk__rpcs_conn_drop(srv, c, "a request for slot %u, which is still busy", busy.slot);
		return;
	}
	if (!(q->h.flags & RK_RPC_F_RDV)) {
		q->has_buf = 1;
		q->buf_index = index;
		q->data = data + RK_RPC_REQ_HDR;
		dispatch(srv, q);
		return;
	}
	/* Rendezvous: the header is copied, the receive may go back at once. */
	if (rk_recv_set_release(c->rs, index, &err)) {
		rk__rpcs_conn_drop(srv, c, "reposting a receive failed: %s", err.msg);
		return;
	}
	q->has_buf = 0;
	/* Bounded for the server, and per connection so one client cannot take it all. */
	if (srv->st.rdv_bytes + q->h.req_len > srv->o.max_rdv_bytes ||
	    c->rdv_bytes + q->h.req_len > srv->o.max_rdv_per_conn ||
	    rk__rpcs_stage_alloc(srv, q->h.req_len, &q->body, &err)) {
		q->body.bytes = 0;
		rk__rpcs_answer_status(srv, q, RK_RPC_NO_ROOM, NULL);
		return;
	}
	srv->st.rdv_bytes += q->h.req_len;
	c->rdv_bytes += q->h.req_len;
	q->state = R_READING;
	q->data = stage_addr(&q->body);
	r = rk__rpcs_read_body(srv, q);
	if (r == 0) {
		struct pending *p = rk__rpcs_pending_new(q, 0, NULL, 0);

		if (!p) {
			rk__rpcs_conn_drop(srv, c, "out of memory queueing a READ");
			return;
		}
		p->kind = P_READ;
		rk__rpcs_retry_push(srv, p);
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
	int r;

	if (c->dead)
		return;
	/*
	 * Accepted without waiting: a request can come before rdma_cm says
	 * ESTABLISHED (the peer's ready-to-use message is late), and nothing
	 * may be posted on a connection that is not CONNECTED yet.
	 */
	if (c->conn->state == RK_CONN_CONNECTING &&
	    rk__cm_comm_established(c->conn, ESTABLISH_MS, &err) != RK_CONN_CONNECTED) {
		rk__rpcs_conn_drop(srv, c,
				   "data before the connection was established, and it "
				   "did not become so: %s",
				   err.msg);
		return;
	}
	if (tag == TAG_RECV) {
		const void *data;
		uint32_t index;

		r = rk__recv_set_take_send(c->rs, wc, &data, &index, &err);
		if (r < 0) {
			rk__rpcs_conn_drop(srv, c, "%s", err.msg);
			return;
		}
		if (r > 0)
			on_request(srv, c, data, wc->byte_len, index);
		return;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		rk_error_from_wc(&err, wc);
		if (tag == TAG_ANSWER)
			rk_send_set_complete(c->ss, wc);
		rk__rpcs_conn_drop(srv, c, "%s", err.msg);
		return;
	}
	/* TAG_INLINE: an inline answer's WR; its queue slot is all it held (rk_cq_take freed it).
	 */
	if (tag == TAG_ANSWER) {
		rk_send_set_complete(c->ss, wc);
	} else if (tag == TAG_READ) {
		on_read_done(srv, c, (unsigned)(wc->wr_id & 0xffff));
	} else if (tag == TAG_STAGE && c->stages) {
		struct stage *s = c->stages;

		c->stages = s->next;
		if (!c->stages)
			c->stages_tail = &c->stages;
		rk__rpcs_stage_free(srv, s);
		free(s);
	}
}

/* @timeout_ms, or less when the next idle sweep is due sooner. */
static int idle_cap(const struct rk_rpc_server *srv, int timeout_ms)
{
	int64_t left = srv->idle_next_ms - rk__now_ms();

	if (left <= 0)
		return 0;
	return timeout_ms < 0 || left < timeout_ms ? (int)left : timeout_ms;
}

/* A look at the wait set's fds (one poll(2) of its epoll fd): 1 when one is ready. */
static int fds_ready(struct rk_rpc_server *srv)
{
	struct pollfd p = {.fd = rk_wait_fd(srv->ws), .events = POLLIN};

	srv->solo_calls = 0;
	srv->fds_ready = poll(&p, 1, 0) != 0; /* an error too: the wait set will say */
	return srv->fds_ready;
}

/*
 * The wait of a busy server with one connection: its CQ polled here, one
 * completion at a time handed to rk_cq_take (the CQ layer's window: a
 * stale or foreign sequence number is dropped, never dereferenced), in a
 * loop whose every pass costs the same. Returns 1 with the completion in
 * @wc; -ETIMEDOUT when *@timeout_ms (> 0, or < 0: none) has passed, the
 * clock read every SOLO_SPINS empty passes and the deadline set at the
 * first reading, so the wait ends up to twice that many passes late, never
 * early (as the wait set's spin); 0 for the wait set's wait: a wake-up or
 * an answer from another thread is pending, the poll failed (the wait
 * set's poll says why), or one of the wait set's fds (listener, CM
 * channel, wake-up eventfd), looked at every SOLO_SPINS empty passes and
 * every SOLO_LOOK_EVERY calls, is ready (*@timeout_ms is then what is
 * left of the wait once its deadline is set); then the wait set has every
 * wait until the fds are seen. Not inlined: bench/cost counts it as waiting.
 */
static __attribute__((noinline)) int solo_wait(struct rk_rpc_server *srv, struct sconn *c,
					       int *timeout_ms, struct ibv_wc *wc)
{
	int64_t until = -1;

	if (__builtin_expect(++srv->solo_calls >= SOLO_LOOK_EVERY || srv->fds_ready, 0) &&
	    fds_ready(srv))
		return 0;
	for (unsigned spins = 1;; spins++) {
		int r;

		if (__atomic_load_n(&srv->deferred_n, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&srv->wake_req, __ATOMIC_RELAXED))
			return 0;
		r = ibv_poll_cq(c->vcq, 1, wc);
		if (r > 0 && rk_cq_take(c->cq, wc, 1) == 1)
			return 1;
		if (r < 0)
			return 0;
		if (spins % SOLO_SPINS == 0) {
			int64_t now = 0;

			if (*timeout_ms > 0) {
				now = rk__now_ms();
				if (until < 0)
					until = now + *timeout_ms;
				else if (now >= until)
					return -ETIMEDOUT;
			}
			if (fds_ready(srv)) {
				if (until >= 0) /* the wait set's wait: what is left of this one */
					*timeout_ms = (int)(until - now);
				return 0;
			}
		}
	}
}

/* What rk_wait() reported: completions, connections, the listener, wake-ups. */
static void handle_events(struct rk_rpc_server *srv, const struct rk_wait_event *ev, int n,
			  int *woken)
{
	for (int k = 0; k < n; k++) {
		uint64_t tag = ev[k].tag;
		struct sconn *c;

		if (ev[k].src == RK_SRC_WAKE) {
			*woken = 1;
			continue;
		}
		if (tag == TAG_LISTEN) {
			rk__rpcs_accept_all(srv);
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
			rk__rpcs_conn_drop(srv, c, "connection %s", rk_conn_state_str(ev[k].state));
		}
	}
}

int rk_rpc_server_progress(struct rk_rpc_server *srv, int timeout_ms, struct rk_error *err)
{
	struct rk_wait_event ev[MAX_EVENTS];
	int n, woken = 0;

	if (srv->in_progress) /* from a handler: the completions being handled would be lost */
		return rk__err_set(err, EBUSY, "rk_rpc_server_progress", "called from a handler");
	__atomic_store_n(&srv->progress_thread, rk__rpcs_self(), __ATOMIC_RELAXED);
	__atomic_store_n(&srv->in_progress, 1, __ATOMIC_RELEASE);
	if (srv->retry)
		timeout_ms = 0; /* work waits for room: look again soon */
	else if (timeout_ms && srv->st.conns && srv->o.idle_ms != RK_RPC_IDLE_NEVER &&
		 (timeout_ms < 0 || (uint32_t)timeout_ms > srv->idle_slack_ms))
		/*
		 * A wait ends for the next idle sweep; one no longer than the
		 * slack (a sixteenth of idle_ms) may make a sweep that late,
		 * and costs no clock reading.
		 */
		timeout_ms = idle_cap(srv, timeout_ms);
	n = 0;
	if (srv->solo && timeout_ms) {
		struct sconn *c = srv->solo;
		struct ibv_wc wc;

		n = solo_wait(srv, c, &timeout_ms, &wc);
		if (n == 1)
			on_wc(srv, c, &wc);
		else if (n < 0) /* the deadline: one more poll and look at the fds */
			timeout_ms = 0;
	}
	if (n != 1) {
		n = rk_wait(srv->ws, ev, MAX_EVENTS, timeout_ms, err);
		handle_events(srv, ev, n, &woken);
	}
	/* Answers from other threads, or work that waited for room: mostly none. */
	if (__atomic_load_n(&srv->deferred_n, __ATOMIC_ACQUIRE) || srv->retry)
		rk__rpcs_run_queues(srv);
	/* The clock only now and then while there is work (issue: cost per call). */
	if (srv->o.idle_ms != RK_RPC_IDLE_NEVER &&
	    (n <= 0 || ++srv->idle_calls >= IDLE_CHECK_EVERY)) {
		int64_t now = rk__now_ms();

		srv->idle_calls = 0;
		if (now >= srv->idle_next_ms && rk__rpcs_idle_sweep(srv, now) && n <= 0)
			n = 1; /* closing idle connections is work done */
	}
	if (srv->dead)
		rk__rpcs_sweep_dead(srv);
	__atomic_store_n(&srv->in_progress, 0, __ATOMIC_RELEASE);
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
	o->idle_ms = o->idle_ms ? o->idle_ms : DEF_IDLE_MS;
	srv->idle_slack_ms = o->idle_ms / 16;
	if (!o->max_conns_per_peer)
		o->max_conns_per_peer = o->max_conns > 1 ? o->max_conns / 2 : 1;
	if (o->window > RK_RPC_MAX_WINDOW || o->max_conns > MAX_CONNS_LIMIT ||
	    o->slot_size <= RK_RPC_ANS_HDR || o->slot_size > RK_RPC_WIRE_MAX_BUF ||
	    o->req_inline > RK_RPC_WIRE_MAX_BUF - RK_RPC_REQ_HDR ||
	    o->max_msg > RK_RPC_WIRE_MAX_MSG)
		return rk__err_set(
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
		return rk__err_set(err, EINVAL, "rk_rpc_server_create",
				   "a token of %u bytes (max %u)", o->token_len,
				   RK_HELLO_TOKEN_MAX);
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
		return rk__err_set(err, ENOMEM, "rk_rpc_server_create", NULL);
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
		r = rk__err_set(err, ENOMEM, "rk_rpc_server_create", NULL);
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
		rk__rpcs_conn_free(srv, c);
	}
	while (srv->dead) { /* dropped, some still held by handlers: freed regardless */
		struct sconn *c = srv->dead;

		srv->dead = c->next_dead;
		rk__rpcs_conn_free(srv, c);
	}
	rk_wait_destroy(srv->ws);
	rk_pool_destroy(srv->pool);
	rk_pd_free(srv->pd);
	free(srv->conns);
	free(srv->handlers);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}
