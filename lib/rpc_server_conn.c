/*
 * rpc_server_conn.c - the RPC server's connections: accepted with the window
 * the hello asked for (at most the server's), waited on (a CQ and a CM
 * channel each in the server's wait set), dropped with a logged reason when
 * they break the rules, and freed once no handler holds a request of theirs.
 *
 * A dropped connection loses its QP, CQ and CM id at once: a peer must not
 * keep them by leaving requests with handlers. What the handlers may still
 * read (receive buffers, staged bodies, all from the pool) stays with the
 * connection, out of the table, until the last held request is answered.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_server_int.h"

void rk__rpcs_req_release(struct rk_rpc_server *srv, struct rk_rpc_req *q)
{
	if (q->out) {
		rk__rpcs_stage_free(srv, q->out);
		free(q->out);
		q->out = NULL;
	}
	if (q->body.bytes) {
		srv->st.rdv_bytes -= q->body.bytes;
		q->c->rdv_bytes -= q->body.bytes;
		rk__rpcs_stage_free(srv, &q->body);
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
void rk__rpcs_conn_free(struct rk_rpc_server *srv, struct sconn *c)
{
	purge_retry(srv, c);
	rk_conn_destroy(c->conn); /* NULL once dropped: already destroyed */
	for (uint32_t i = 0; c->reqs && i < c->window; i++)
		rk__rpcs_req_release(srv, &c->reqs[i]);
	while (c->stages) {
		struct stage *s = c->stages;

		c->stages = s->next;
		rk__rpcs_stage_free(srv, s);
		free(s);
	}
	rk_send_set_destroy(c->ss);
	rk_recv_set_destroy(c->rs);
	free(c->reqs);
	free(c);
}

void rk__rpcs_conn_drop(struct rk_rpc_server *srv, struct sconn *c, const char *fmt, ...)
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
	rk__rpcs_solo_update(srv);
	if (c->closed) { /* the peer left: not a failure of anyone's */
		rk_dbg("rpc server: connection from %s closed: %s", c->peer, msg);
		srv->st.conns_closed++;
	} else if (c->idle) { /* our own rule, counted in conns_idle */
		rk_info("rpc server: connection from %s closed: %s", c->peer, msg);
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
void rk__rpcs_sweep_dead(struct rk_rpc_server *srv)
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
		rk__rpcs_conn_free(srv, c);
	}
}

/*
 * The sets of a connection. Answer buffers (for answers that do not go
 * inline from ans_buf): the window and ANSWER_SPARE_BUF, at least
 * SIGNAL_EVERY + 1: the send set signals an answer when its last free
 * buffer goes, so with fewer a small window would signal more often than
 * every SIGNAL_EVERY-th (at window 1 every 9th, each completion a progress
 * round of its own); 8 buffers more at window 1.
 */
static int conn_prepare(struct rk_conn *conn, void *arg)
{
	struct sconn *c = arg;
	struct rk_rpc_server *srv = c->srv;
	struct rk_msgbuf_opts ro = {.count = c->window + RECV_SPARE,
				    .size = srv->req_buf,
				    .wr_id_base = wrid(TAG_RECV, c->idx, 0)};
	struct rk_msgbuf_opts so = {.count = c->window + ANSWER_SPARE_BUF > SIGNAL_EVERY
						 ? c->window + ANSWER_SPARE_BUF
						 : SIGNAL_EVERY + 1,
				    .size = srv->lim.slot_size,
				    .wr_id_base = wrid(TAG_ANSWER, c->idx, 0),
				    .signal_every = SIGNAL_EVERY};
	int r = rk_recv_set_create(conn, srv->pool, &ro, NULL, &c->rs);

	if (r)
		return r;
	/* The inline answers' WR (rpc_server_answer.c): from ans_buf, into the caller's slot. */
	c->ans_inline =
	    conn->max_inline < srv->lim.slot_size ? conn->max_inline : srv->lim.slot_size;
	if (c->ans_inline > ANS_INLINE_MAX)
		c->ans_inline = ANS_INLINE_MAX;
	c->ans_sge.addr = (uintptr_t)c->ans_buf;
	c->ans_wr.sg_list = &c->ans_sge;
	c->ans_wr.num_sge = 1;
	c->ans_wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	return rk_send_set_create(conn, srv->pool, &so, NULL, &c->ss);
}

/* The hello's token against ours, in time that does not depend on where they differ. */
static int token_ok(const struct rk_rpc_server *srv, const struct rk_hello *h)
{
	uint8_t diff = (uint8_t)(h->token_len ^ srv->o.token_len);

	for (unsigned i = 0; i < srv->o.token_len; i++)
		diff |= (uint8_t)(h->token[i] ^ srv->token[i]);
	return diff == 0;
}

/* Length of @peer's address without its ":port" ("10.0.0.2:5100", "[fd00::2]:5100"). */
static uint16_t host_len(const char *peer)
{
	const char *colon = strrchr(peer, ':');

	return (uint16_t)(colon ? (size_t)(colon - peer) : strlen(peer));
}

/* Live connections from the address @peer[0..@len). */
static unsigned conns_from(const struct rk_rpc_server *srv, const char *peer, uint16_t len)
{
	unsigned n = 0;

	for (unsigned i = 0; i < srv->o.max_conns; i++) {
		const struct sconn *c = srv->conns[i];

		n += c && !c->dead && c->host_len == len && !memcmp(c->peer, peer, len);
	}
	return n;
}

unsigned rk__rpcs_idle_sweep(struct rk_rpc_server *srv, int64_t now_ms)
{
	uint32_t every = srv->o.idle_ms / 4;
	unsigned closed = 0;

	srv->idle_next_ms = now_ms + (every > 10 ? every : 10);
	for (unsigned i = 0; i < srv->o.max_conns; i++) {
		struct sconn *c = srv->conns[i];

		if (!c || c->dead)
			continue;
		/* A call in flight (a handler holds it, or its body is being read) is no idling. */
		if (c->requests != c->seen_requests || c->held || c->rdv_bytes) {
			c->seen_requests = c->requests;
			c->idle_since_ms = now_ms;
		} else if (now_ms - c->idle_since_ms >= (int64_t)srv->o.idle_ms) {
			c->idle = 1;
			srv->st.conns_idle++;
			rk__rpcs_conn_drop(srv, c, "no call for %lld ms (idle_ms %u)",
					   (long long)(now_ms - c->idle_since_ms), srv->o.idle_ms);
			closed++;
		}
	}
	return closed;
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
	/* One address must not take every connection: a few silent clients would lock all out. */
	if (conns_from(srv, rk_cm_request_peer(req), host_len(rk_cm_request_peer(req))) >=
	    srv->o.max_conns_per_peer) {
		srv->st.conns_refused++;
		rk_cm_request_reject(req, RK_REJECT_BUSY,
				     "at its limit of connections from one address", NULL);
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
	c->lim = srv->lim;
	c->lim.window = c->window; /* what this connection was granted */
	c->cq_id = c->conn_id = -1;
	c->stages_tail = &c->stages;
	snprintf(c->peer, sizeof(c->peer), "%s", rk_cm_request_peer(req));
	c->host_len = host_len(c->peer);
	c->idle_since_ms = rk__now_ms();
	for (uint32_t i = 0; i < c->window; i++) {
		c->reqs[i].c = c;
		c->reqs[i].slot = (uint16_t)i;
	}
	srv->conns[idx] = c;
	c->in_table = 1;
	co.rq_depth = co.rq_depth > c->window + RECV_SPARE ? co.rq_depth : c->window + RECV_SPARE;
	co.sq_depth = co.sq_depth > 2 * c->window + 32 ? co.sq_depth : 2 * c->window + 32;
	co.prepare = conn_prepare;
	co.prepare_arg = c;
	acc.window = c->window;
	acc.req_inline = srv->lim.req_inline;
	acc.slot_size = srv->lim.slot_size;
	acc.max_msg = srv->lim.max_msg;
	rk__rpc_accept_encode(&acc, reply);
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
	if (c->cq_id < 0 || c->conn_id < 0) {
		rk__rpcs_conn_drop(srv, c, "cannot wait on it: %s", err.msg);
		return;
	}
	c->cq = rk_conn_cq(c->conn);
	c->vcq = rk_cq_ibv(c->cq);
	rk__rpcs_solo_update(srv);
}

void rk__rpcs_solo_update(struct rk_rpc_server *srv)
{
	struct sconn *one = NULL;

	srv->solo = NULL;
	if (srv->o.mode != RK_WAIT_BUSY || srv->st.conns != 1)
		return;
	for (unsigned i = 0; i < srv->o.max_conns; i++) {
		struct sconn *c = srv->conns[i];

		if (!c || c->dead || !c->vcq)
			continue;
		if (one)
			return;
		one = c;
	}
	srv->solo = one;
}

void rk__rpcs_accept_all(struct rk_rpc_server *srv)
{
	struct rk_cm_request *req;
	struct rk_error err;

	while (rk_listener_get_request(srv->lis, 0, &err, &req) == 0)
		accept_one(srv, req);
}
