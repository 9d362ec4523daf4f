/*
 * rpc_client.c - the calling end of rpc.h: call slots, requests by SEND,
 * answers by write with immediate, deadlines, and failing every call at
 * once when the connection dies.
 *
 * Each of the window's call slots owns a request buffer (local memory) and
 * a response slot (remote-writable, in the client's PD). A slot is busy from
 * the call until both its SEND completed and its answer (or the connection's
 * end) came: a timed-out call keeps its slot as a zombie until then, so a
 * late answer never lands in a slot or staging buffer that is in use again.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rk_internal.h"
#include "rpc_wire.h"

#define TAG_REQ	       0x5251ull	 /* wr_id top 16 bits: a request SEND; low bits the slot */
#define TAG_REQ_INLINE 0x5249ull	 /* an inline request SEND: no slot waits for it */
#define SIGNAL_EVERY   16		 /* inline requests: a completion every this many */
#define WRID_ANS       (0x5241ull << 48) /* every receive (of an answer) */
#define DEF_WINDOW     64
#define DEF_TIMEOUT    5000
#define DEF_INLINE     128 /* bytes a SEND carries inline: a header and 76 bytes */
#define MAX_EVENTS     8
#define POLL_BATCH     16
#define CLOCK_EVERY    64 /* progress calls with completions between looks at the clock */
#define SPIN_POLLS     64 /* busy: empty CQ polls before the wait set's round */
/*
 * Answers come as WRITE WITH IMMEDIATE into 0-byte receives, which carry
 * no buffer: they are posted again in chains of RECV_BATCH (one
 * ibv_post_recv), and RECV_BATCH more than the window are posted, so that
 * the ones waiting to go again never leave a call's answer without one.
 */
#define RECV_BATCH 16

enum call_state { C_FREE = 0, C_BUSY, C_ZOMBIE };

/* A synchronous call's outcome; the error goes straight to the caller's object. */
struct sync_result {
	int finished, status;
	uint32_t len;
	int32_t code;
	struct rk_error *err; /* the caller's, or NULL */
};

struct call {
	enum call_state state;
	uint16_t gen;
	uint8_t send_done, ans_done, direct;
	uint8_t far; /* the request buffer holds a rendezvous or direct call's addresses */
	uint32_t resp_cap;
	void *resp;
	struct rk_mr *req_stage, *resp_stage; /* library-registered, or NULL */
	int64_t deadline;		      /* ms, -1 = none */
	rk_rpc_done_fn done;
	void *arg;
};

struct rk_rpc_client {
	struct rk_device *dev;
	struct rk_pd *pd, *own_pd;
	struct rk_conn *conn;
	struct rk_wait *ws;
	struct rk_mr *slots, *reqs;
	struct rk_rpc_accept acc;
	uint32_t window, req_buf;
	uint32_t resp_room;  /* answer bytes a slot holds after its header */
	uint32_t max_inline; /* the connection's: a request up to this goes inline */
	uint8_t *req_base;   /* the request buffers (reqs) */
	struct call *calls;
	uint16_t *free_slots;
	uint32_t nfree, inflight;
	uint32_t rx_consumed; /* answer receives used, not yet posted again (< RECV_BATCH) */
	uint64_t completed;   /* calls finished, ever (progress returns the difference) */
	int in_progress;      /* completions are being handled: no reentry */
	unsigned polls_unclocked;
	int64_t soonest; /* the earliest deadline of a call in flight (ms), -1 none */
	int dead;	 /* negative errno once the connection is gone */
	struct rk_error why;
};

/*
 * Call deadlines are kept on the coarse monotonic clock: read from memory
 * the kernel updates every tick (1-4 ms), where a precise reading costs a
 * system call on some clock sources (HPET: about 2 us under emulation) and
 * every call would pay one or two. A deadline is then met to within a tick.
 */
static int64_t coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int coarse_left(int64_t deadline_ms)
{
	int64_t left = deadline_ms - coarse_ms();

	return left > 0 ? (int)(left < INT32_MAX ? left : INT32_MAX) : 0;
}

/* Post @n 0-byte receives for answers, in chains; 0 or a negative errno. */
static int post_answer_recvs(struct rk_conn *conn, uint32_t n, struct rk_error *err)
{
	struct rk_recv rx[RECV_BATCH];

	for (unsigned i = 0; i < RECV_BATCH; i++)
		rx[i] = (struct rk_recv){.wr_id = WRID_ANS};
	while (n) {
		unsigned k = n < RECV_BATCH ? n : RECV_BATCH;
		int r = rk_post_recv_list(conn, rx, k, err);

		if (r != (int)k)
			return r < 0 ? r : -EIO;
		n -= k;
	}
	return 0;
}

static int prepare(struct rk_conn *conn, void *arg)
{
	struct rk_rpc_client *cl = arg;

	return post_answer_recvs(conn, cl->window + RECV_BATCH, NULL);
}

static int alloc_slots(struct rk_rpc_client *cl, struct rk_error *err)
{
	cl->calls = calloc(cl->window, sizeof(*cl->calls));
	cl->free_slots = calloc(cl->window, sizeof(*cl->free_slots));
	if (!cl->calls || !cl->free_slots)
		return rk__err_set(err, ENOMEM, "rk_rpc_client_connect", NULL);
	for (uint32_t i = 0; i < cl->window; i++)
		cl->free_slots[i] = (uint16_t)(cl->window - 1 - i);
	cl->nfree = cl->window;
	return 0;
}

int rk_rpc_client_connect(struct rk_device *dev, const struct rk_rpc_client_opts *opts,
			  struct rk_error *err, struct rk_rpc_client **out)
{
	struct rk_rpc_client *cl;
	struct rk_cm_connect_opts co = {0};
	struct rk_hello hello = {.app_id = RK_RPC_APP_ID};
	struct rk_wait_opts wo = {.mode = opts->mode};
	const void *reply;
	size_t reply_len;
	int r;

	*out = NULL;
	if (!opts->host || !opts->port)
		return rk__err_set(err, EINVAL, "rk_rpc_client_connect", "no host or port");
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		return rk__err_set(err, ENOMEM, "rk_rpc_client_connect", NULL);
	cl->dev = dev;
	cl->soonest = -1;
	cl->window = opts->window ? opts->window : DEF_WINDOW;
	if (cl->window > RK_RPC_MAX_WINDOW)
		cl->window = RK_RPC_MAX_WINDOW;
	cl->pd = opts->pd;
	if (!cl->pd) {
		r = rk_pd_alloc(dev, err, &cl->own_pd);
		if (r)
			goto fail;
		cl->pd = cl->own_pd;
	}
	if (opts->conn)
		co.conn = *opts->conn;
	else
		co.conn.max_inline = DEF_INLINE;
	if (!co.conn.signal_every)
		co.conn.signal_every = SIGNAL_EVERY;
	co.conn.wait_mode = opts->mode; /* the wait set sleeps on the CQ's channel */
	/*
	 * Room for every slot's receive and SEND, and for the unsignaled
	 * inline SENDs that wait in the queue until a signaled one retires them.
	 */
	if (co.conn.rq_depth < cl->window + RECV_BATCH)
		co.conn.rq_depth = cl->window + RECV_BATCH;
	if (co.conn.sq_depth < cl->window + 2 * SIGNAL_EVERY + 8)
		co.conn.sq_depth = cl->window + 2 * SIGNAL_EVERY + 8;
	co.conn.pd = cl->pd;
	co.conn.prepare = prepare;
	co.conn.prepare_arg = cl;
	co.host = opts->host;
	co.port = opts->port;
	co.timeout_ms = opts->timeout_ms;
	hello.app_arg = cl->window;
	if (opts->token_len > RK_HELLO_TOKEN_MAX || (opts->token_len && !opts->token)) {
		r = rk__err_set(err, EINVAL, "rk_rpc_client_connect",
				"a token of %u bytes (max %u)", opts->token_len,
				RK_HELLO_TOKEN_MAX);
		goto fail;
	}
	hello.token_len = opts->token_len;
	if (opts->token_len)
		memcpy(hello.token, opts->token, opts->token_len);
	co.hello = &hello;
	r = rk_cm_connect(dev, &co, err, &cl->conn);
	if (r)
		goto fail;
	reply = rk_conn_peer_data(cl->conn, &reply_len);
	if (rk__rpc_accept_decode(reply, reply_len, &cl->acc) || cl->acc.window > cl->window) {
		r = rk__err_set(err, EPROTO, "rk_rpc_client_connect",
				"%s:%s accepted without a valid RPC reply (not an rk_rpc_server?)",
				opts->host, opts->port);
		goto fail;
	}
	cl->window = cl->acc.window;
	cl->req_buf = RK_RPC_REQ_HDR + cl->acc.req_inline;
	cl->resp_room = cl->acc.slot_size - RK_RPC_ANS_HDR;
	cl->max_inline = rk_conn_max_inline(cl->conn);
	r = alloc_slots(cl, err);
	if (!r)
		r = rk_mr_alloc_pd(cl->pd, (size_t)cl->window * cl->acc.slot_size,
				   RK_ACCESS_REMOTE_WRITE, err, &cl->slots);
	if (!r)
		r = rk_mr_alloc_pd(cl->pd, (size_t)cl->window * cl->req_buf, RK_ACCESS_LOCAL, err,
				   &cl->reqs);
	if (!r)
		cl->req_base = rk_mr_addr(cl->reqs);
	for (uint32_t i = 0; !r && i < cl->window; i++) {
		/*
		 * The fields of each slot's request that never change, once,
		 * and the far ones zero (what a common call sends).
		 */
		struct rk_rpc_req_hdr h = {.slot = (uint16_t)i,
					   .slot_addr = (uintptr_t)rk_mr_addr(cl->slots) +
							(uint64_t)i * cl->acc.slot_size,
					   .slot_rkey = rk_mr_rkey(cl->slots)};
		uint8_t *buf = cl->req_base + (size_t)i * cl->req_buf;

		rk__rpc_req_encode_slot(&h, buf);
		rk__rpc_req_encode_far(&h, buf);
	}
	if (!r)
		r = rk_wait_create(&wo, err, &cl->ws);
	if (!r) {
		r = rk_wait_add_cq(cl->ws, rk_conn_cq(cl->conn), MAX_EVENTS * 2, 0, err);
		r = r < 0 ? r : rk_wait_add_conn(cl->ws, cl->conn, 1, err);
		r = r < 0 ? r : 0;
	}
	if (r)
		goto fail;
	*out = cl;
	return 0;
fail:
	rk_rpc_client_destroy(cl);
	return r;
}

/* Give slot @i back once both its SEND and its answer (or the end) are done. */
static inline void slot_release(struct rk_rpc_client *cl, uint16_t i)
{
	struct call *c = &cl->calls[i];

	if (c->req_stage || c->resp_stage) { /* a rendezvous or a large answer only */
		rk_mr_dereg(c->req_stage);
		rk_mr_dereg(c->resp_stage);
		c->req_stage = c->resp_stage = NULL;
	}
	c->state = C_FREE;
	cl->free_slots[cl->nfree++] = i;
}

/* Complete call @i for its caller (once); the slot may stay a zombie. */
static void finish(struct rk_rpc_client *cl, uint16_t i, int status, uint32_t len, int32_t code,
		   const struct rk_error *why)
{
	/* What a successful call's callback gets: no error (nothing to clear per call). */
	static const struct rk_error no_error = {.wc_status = -1, .wc_status_str = ""};
	struct call *c = &cl->calls[i];

	if (c->state != C_BUSY)
		return;
	c->state = C_ZOMBIE;
	cl->inflight--;
	cl->completed++;
	c->done(c->arg, status, len, code, why ? why : &no_error);
}

static inline void maybe_release(struct rk_rpc_client *cl, uint16_t i)
{
	struct call *c = &cl->calls[i];

	if (c->state == C_ZOMBIE && c->send_done && c->ans_done)
		slot_release(cl, i);
}

/* The connection is gone: every call fails now, with the reason. */
static void fail_all(struct rk_rpc_client *cl, int e, const struct rk_error *why)
{
	if (cl->dead)
		return;
	cl->dead = e < 0 ? e : -ECONNRESET;
	if (why && why->err) { /* the cause's status, vendor error and hint stay */
		cl->why = *why;
		rk__err_msgf(&cl->why, "rk_rpc_call: peer gone: %s", why->msg);
		cl->why.err = ECONNRESET;
	} else {
		rk__err_set(&cl->why, ECONNRESET, "rk_rpc_call", "peer gone: connection %s",
			    rk_conn_state_str(rk_conn_state(cl->conn)));
		rk__err_set_qp(&cl->why, rk_conn_qp_num(cl->conn));
	}
	rk_conn_disconnect(cl->conn, 0, NULL);
	for (uint32_t i = 0; i < cl->window; i++)
		finish(cl, (uint16_t)i, -ECONNRESET, 0, 0, &cl->why);
}

static void protocol_error(struct rk_rpc_client *cl, const char *what, uint32_t imm)
{
	struct rk_error e;

	rk__err_set(&e, EPROTO, "rk_rpc_call", "the server broke the protocol: %s (imm 0x%08x)",
		    what, imm);
	rk_warn("%s", e.msg);
	fail_all(cl, -EPROTO, &e);
}

/*
 * An answer arrived in a slot: @wc is its receive's successful completion.
 * The immediate names the call (slot and generation); the slot's header,
 * written by the server at any time, is copied before it is believed.
 */
static inline __attribute__((always_inline)) void on_answer(struct rk_rpc_client *cl,
							    const struct ibv_wc *wc)
{
	uint32_t imm = ntohl(wc->imm_data);
	uint16_t i = (uint16_t)(imm >> 16), gen = (uint16_t)imm;
	uint8_t hdr[RK_RPC_ANS_HDR];
	struct rk_rpc_ans_hdr h;
	const char *why = NULL;
	const uint8_t *slot;
	struct call *c;
	int status;

	if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM) ||
	    i >= cl->window || cl->calls[i].state == C_FREE || cl->calls[i].gen != gen ||
	    cl->calls[i].ans_done) {
		protocol_error(cl, "an answer for no call in flight", imm);
		return;
	}
	c = &cl->calls[i];
	c->ans_done = 1;
	/* The slot is the server's to write at any time: copy, then check. */
	slot = (const uint8_t *)rk_mr_addr(cl->slots) + (size_t)i * cl->acc.slot_size;
	memcpy(hdr, slot, sizeof(hdr));
	if (rk__rpc_ans_decode(hdr, wc->byte_len, c->resp_cap, c->direct, &h, &why)) {
		protocol_error(cl, why, imm);
		return;
	}
	if (c->state == C_BUSY) {
		status = rk__rpc_status_errno(h.status);
		if (h.len && h.in_slot) /* checked: h.len fits the call and what came */
			memcpy(c->resp, slot + RK_RPC_ANS_HDR, h.len);
		else if (h.len && c->resp_stage)
			memcpy(c->resp, rk_mr_addr(c->resp_stage), h.len);
		if (status == -EREMOTEIO) {
			struct rk_error e;

			rk__err_set(&e, EREMOTEIO, "rk_rpc_call", "the handler answered code %d",
				    h.code);
			finish(cl, i, status, h.len, h.code, &e);
		} else if (status) {
			struct rk_error e;

			rk__err_set(&e, -status, "rk_rpc_call", "the server answered: %s",
				    h.status == RK_RPC_NO_METHOD ? "no such method"
				    : h.status == RK_RPC_TOO_BIG ? "too big for the call or max_msg"
								 : "no room for the body now");
			finish(cl, i, status, 0, h.code, &e);
		} else {
			finish(cl, i, 0, h.len, h.code, NULL);
		}
	}
	maybe_release(cl, i);
}

/* A failed completion: the connection is gone, and every call with it. */
static __attribute__((noinline, cold)) void wc_failed(struct rk_rpc_client *cl,
						      const struct ibv_wc *wc)
{
	struct rk_error e;

	rk_error_from_wc(&e, wc);
	fail_all(cl, -EIO, &e);
}

/* The answers' receives used, RECV_BATCH of them, posted again. */
static __attribute__((noinline)) void repost_answer_recvs(struct rk_rpc_client *cl)
{
	struct rk_error e;
	int r = post_answer_recvs(cl->conn, RECV_BATCH, &e);

	if (r)
		fail_all(cl, r, &e);
	cl->rx_consumed = 0;
}

/* A completion of a request's SEND (its slot's, or an inline one's that retires the queue). */
static __attribute__((noinline)) void on_send_wc(struct rk_rpc_client *cl, const struct ibv_wc *wc)
{
	uint64_t tag = wc->wr_id >> 48;

	if (tag == TAG_REQ_INLINE) { /* only retires the queue, or failed */
		if (wc->status != IBV_WC_SUCCESS)
			wc_failed(cl, wc);
		return;
	}
	if (tag == TAG_REQ) {
		uint16_t i = (uint16_t)wc->wr_id;

		if (i >= cl->window)
			return;
		cl->calls[i].send_done = 1;
		if (wc->status != IBV_WC_SUCCESS)
			wc_failed(cl, wc);
		maybe_release(cl, i);
	}
}

/*
 * One completion, an answer's first (the one every call has), in the
 * loop that polled it. The receives used are posted again RECV_BATCH at
 * a time, while the connection lives (a dead one only flushes them).
 */
static inline __attribute__((always_inline)) void on_wc(struct rk_rpc_client *cl,
							const struct ibv_wc *wc)
{
	if (__builtin_expect(wc->wr_id != WRID_ANS, 0)) {
		on_send_wc(cl, wc);
		return;
	}
	if (__builtin_expect(wc->status != IBV_WC_SUCCESS, 0)) {
		wc_failed(cl, wc);
		return;
	}
	if (!cl->dead)
		on_answer(cl, wc);
	if (++cl->rx_consumed == RECV_BATCH && !cl->dead)
		repost_answer_recvs(cl);
}

/* on_wc for the completions the wait set returned (not the hot loop's). */
static __attribute__((noinline)) void on_wc_waited(struct rk_rpc_client *cl,
						   const struct ibv_wc *wc)
{
	on_wc(cl, wc);
}

/*
 * Calls past their deadline fail now (their slots stay until the answer),
 * and the earliest deadline left is found. One pass over the window, only
 * when the earliest deadline has come: not on every wait.
 */
static void expire(struct rk_rpc_client *cl, int64_t now)
{
	cl->soonest = -1;
	for (uint32_t i = 0; i < cl->window && cl->inflight; i++) {
		struct call *c = &cl->calls[i];
		struct rk_error e;

		if (c->state != C_BUSY || c->deadline < 0)
			continue;
		if (c->deadline > now) {
			if (cl->soonest < 0 || c->deadline < cl->soonest)
				cl->soonest = c->deadline;
			continue;
		}
		rk__err_set(&e, ETIMEDOUT, "rk_rpc_call",
			    "no answer within the deadline (call slot %u)", i);
		finish(cl, (uint16_t)i, -ETIMEDOUT, 0, 0, &e);
	}
	if (!cl->nfree && !cl->inflight && !cl->dead) {
		struct rk_error e;

		/* Every slot waits for an answer that does not come: the client is useless. */
		rk__err_set(&e, ETIMEDOUT, "rk_rpc_call",
			    "all %u call slots are held by calls that timed out: the server "
			    "does not answer",
			    cl->window);
		fail_all(cl, -ETIMEDOUT, &e);
	}
}

static int handle_once(struct rk_rpc_client *cl, int timeout_ms, struct rk_wait_event *ev,
		       struct ibv_wc *wc, struct rk_error *err);

/*
 * Wait up to @timeout_ms (-1: until the earliest call's deadline) and
 * handle what came: the number of events or a negative errno. The CQ is
 * polled first (no system call): a completion already there needs no
 * wait set. One clock reading per call.
 */
static int progress_once(struct rk_rpc_client *cl, int timeout_ms, struct rk_error *err)
{
	struct rk_wait_event ev[MAX_EVENTS];
	struct ibv_wc wc[POLL_BATCH];
	int n;

	if (cl->in_progress) /* from a callback: the completions being handled would be lost */
		return rk__err_set(err, EBUSY, "rk_rpc_client_progress",
				   "called from a completion callback");
	cl->in_progress = 1;
	n = handle_once(cl, timeout_ms, ev, wc, err);
	cl->in_progress = 0;
	return n;
}

static int handle_once(struct rk_rpc_client *cl, int timeout_ms, struct rk_wait_event *ev,
		       struct ibv_wc *wc, struct rk_error *err)
{
	struct rk_cq *cq = rk_conn_cq(cl->conn);
	int busy = rk_cq_mode(cq) == RK_WAIT_BUSY;
	uint64_t done = cl->completed;
	int64_t now;
	int n;

	/*
	 * Completions already there first: no clock, no system call. The
	 * deadlines are looked at when there are none, and every CLOCK_EVERY
	 * times there were (a call stuck among calls that flow still ends).
	 */
	n = rk_cq_poll(cq, wc, POLL_BATCH, NULL);
	/*
	 * Busy, an answer on its way is spun for on the CQ alone before the
	 * wait set's round (clock, event array, fds): a few hundred
	 * instructions a call less. A disconnect is seen there, SPIN_POLLS
	 * empty polls (microseconds) later.
	 */
	if (!n && timeout_ms && busy)
		for (unsigned k = 0; k < SPIN_POLLS && !n; k++)
			n = rk_cq_poll(cq, wc, POLL_BATCH, NULL);
	for (int j = 0; j < n; j++)
		on_wc(cl, &wc[j]);
	if (n > 0 && ++cl->polls_unclocked < CLOCK_EVERY)
		return n;
	cl->polls_unclocked = 0;
	now = coarse_ms();
	if (cl->soonest >= 0 && now >= cl->soonest) {
		expire(cl, now);
		if (cl->completed != done)
			return 1; /* calls ended: their callers must see it before any wait */
	}
	if (n > 0)
		return n;
	if (cl->soonest >= 0 && (timeout_ms < 0 || cl->soonest - now < timeout_ms))
		timeout_ms = (int)(cl->soonest - now);
	n = rk_wait(cl->ws, ev, MAX_EVENTS, timeout_ms, NULL); /* NULL: no text for a timeout */
	if (n == -ETIMEDOUT)
		return 0;
	if (n < 0)
		return rk__err_set(err, -n, "rk_rpc_client_progress", "waiting for completions");
	for (int k = 0; k < n; k++) {
		if (ev[k].src == RK_SRC_CQ) {
			for (int j = 0; j < ev[k].nwc; j++)
				on_wc_waited(cl, &ev[k].wc[j]);
		} else if (ev[k].src == RK_SRC_CONN && ev[k].state != RK_CONN_CONNECTED) {
			struct rk_error e;

			rk_conn_first_error(cl->conn, &e);
			fail_all(cl, -ECONNRESET, &e);
		}
	}
	return n;
}

static int mr_holds(const struct rk_mr *mr, const void *p, uint32_t len)
{
	uintptr_t a = (uintptr_t)rk_mr_addr(mr), b = (uintptr_t)p;

	return b >= a && len <= rk_mr_len(mr) && b - a <= rk_mr_len(mr) - len;
}

static int check_args(const struct rk_rpc_client *cl, const struct rk_rpc_call_args *a,
		      struct rk_error *err)
{
	if ((a->req_len && !a->req) || (a->resp_cap && !a->resp))
		return rk__err_set(err, EINVAL, "rk_rpc_call", "a length without a buffer");
	if (a->req_len > cl->acc.max_msg || a->resp_cap > cl->acc.max_msg)
		return rk__err_set(
		    err, EMSGSIZE, "rk_rpc_call",
		    "%u-byte request, %u-byte answer buffer; the server's max_msg is %u",
		    a->req_len, a->resp_cap, cl->acc.max_msg);
	if (a->req_mr && (!mr_holds(a->req_mr, a->req, a->req_len) ||
			  !(rk_mr_ibv(a->req_mr)->pd == rk_pd_ibv(cl->pd))))
		return rk__err_set(err, EINVAL, "rk_rpc_call",
				   "req_mr does not hold the request or is not in the client's PD");
	if (a->resp_mr && (!mr_holds(a->resp_mr, a->resp, a->resp_cap) ||
			   !(rk_mr_ibv(a->resp_mr)->pd == rk_pd_ibv(cl->pd))))
		return rk__err_set(
		    err, EINVAL, "rk_rpc_call",
		    "resp_mr does not hold the answer buffer or is not in the client's PD");
	return 0;
}

/* Fill the header's body fields: inline, or rendezvous from req_mr or a stage. */
static int place_body(struct rk_rpc_client *cl, struct call *c, const struct rk_rpc_call_args *a,
		      struct rk_rpc_req_hdr *h, uint8_t *buf, struct rk_error *err)
{
	if (a->req_len <= cl->acc.req_inline) {
		if (a->req_len)
			memcpy(buf + RK_RPC_REQ_HDR, a->req, a->req_len);
		return 0;
	}
	h->flags |= RK_RPC_F_RDV;
	if (a->req_mr) {
		h->req_addr = (uintptr_t)a->req;
		h->req_rkey = rk_mr_rkey(a->req_mr);
		return 0;
	}
	/* A copy the server reads: the caller may reuse its buffer at once. */
	int r = rk_mr_alloc_pd(cl->pd, a->req_len, RK_ACCESS_REMOTE_READ, err, &c->req_stage);

	if (r)
		return r;
	memcpy(rk_mr_addr(c->req_stage), a->req, a->req_len);
	h->req_addr = (uintptr_t)rk_mr_addr(c->req_stage);
	h->req_rkey = rk_mr_rkey(c->req_stage);
	return 0;
}

/* Where the answer's data goes: the slot, the caller's resp_mr or a stage. */
static int place_answer(struct rk_rpc_client *cl, struct call *c, const struct rk_rpc_call_args *a,
			struct rk_rpc_req_hdr *h, struct rk_error *err)
{
	if (a->resp_cap <= cl->resp_room) /* the server answers in the slot: no address */
		return 0;
	h->flags |= RK_RPC_F_DIRECT;
	c->direct = 1;
	if (a->resp_mr) {
		h->resp_addr = (uintptr_t)a->resp;
		h->resp_rkey = rk_mr_rkey(a->resp_mr);
		return 0;
	}
	int r = rk_mr_alloc_pd(cl->pd, a->resp_cap, RK_ACCESS_REMOTE_WRITE, err, &c->resp_stage);

	if (r)
		return r;
	h->resp_addr = (uintptr_t)rk_mr_addr(c->resp_stage);
	h->resp_rkey = rk_mr_rkey(c->resp_stage);
	return 0;
}

static int64_t call_deadline(const struct rk_rpc_call_args *a)
{
	return a->timeout_ms < 0 ? -1 : coarse_ms() + (a->timeout_ms ? a->timeout_ms : DEF_TIMEOUT);
}

/*
 * A call whose body goes by rendezvous or whose answer may not fit the
 * slot: the header's far fields (addresses and keys), and the memory the
 * library stages for it. The fields stay in the buffer (c->far) until the
 * slot's next common call zeroes them. Returns the header's flags or a
 * negative errno.
 */
static __attribute__((noinline)) int place_far(struct rk_rpc_client *cl, struct call *c,
					       const struct rk_rpc_call_args *a, uint8_t *buf,
					       struct rk_error *err)
{
	struct rk_rpc_req_hdr h = {0};
	int r = place_body(cl, c, a, &h, buf, err);

	if (!r)
		r = place_answer(cl, c, a, &h, err);
	if (r) {
		rk_mr_dereg(c->req_stage);
		c->req_stage = NULL;
		return r;
	}
	rk__rpc_req_encode_far(&h, buf);
	c->far = 1;
	return h.flags;
}

/* Start a call that ends by @deadline (ms, -1 none): the clock is read once per call. */
static int call_start(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a, int64_t deadline,
		      rk_rpc_done_fn done, void *arg, struct rk_error *err)
{
	uint8_t *buf;
	struct call *c;
	uint16_t i;
	int r, flags = 0;

	if (cl->dead) {
		if (err)
			*err = cl->why;
		return -ENOTCONN;
	}
	r = check_args(cl, a, err);
	if (r)
		return r;
	if (!cl->nfree)
		return -EAGAIN;
	i = cl->free_slots[cl->nfree - 1];
	c = &cl->calls[i];
	buf = cl->req_base + (size_t)i * cl->req_buf;
	c->direct = 0;
	/*
	 * The common call, its body inline and its answer in the slot, writes
	 * its body and five fields: the slot's own are there since the
	 * connect, the far ones zero unless the slot's last call was not one.
	 */
	if (a->req_len <= cl->acc.req_inline && a->resp_cap <= cl->resp_room) {
		if (a->req_len)
			memcpy(buf + RK_RPC_REQ_HDR, a->req, a->req_len);
		if (__builtin_expect(c->far, 0)) {
			static const struct rk_rpc_req_hdr zero = {0};

			rk__rpc_req_encode_far(&zero, buf);
			c->far = 0;
		}
	} else {
		flags = place_far(cl, c, a, buf, err);
		if (flags < 0)
			return flags;
	}
	c->gen++;

	/* Local, never addressed elsewhere: its fields stay in registers. */
	const struct rk_rpc_req_hdr h = {.flags = (uint8_t)flags,
					 .method = a->method,
					 .gen = c->gen,
					 .req_len = a->req_len,
					 .resp_cap = a->resp_cap};

	rk__rpc_req_encode_call(&h, buf);

	struct rk_wr wr = {.op = RK_OP_SEND,
			   .flags = RK_WR_SIGNALED,
			   .wr_id = TAG_REQ << 48 | i,
			   .addr = buf,
			   .len = RK_RPC_REQ_HDR + ((flags & RK_RPC_F_RDV) ? 0 : a->req_len),
			   .lkey = rk_mr_lkey(cl->reqs)};
	/*
	 * Inline, the request is copied into the work request: the buffer is
	 * free at once and no completion is needed (selective signaling asks
	 * for one now and then to retire the queue; its wr_id names no slot).
	 */
	int inl = wr.len <= cl->max_inline;

	if (inl) {
		wr.flags = 0;
		wr.wr_id = TAG_REQ_INLINE << 48;
	}
	r = rk_post(cl->conn, &wr, err);
	if (r == -ENOBUFS) /* the queue waits for a completion to be polled: progress first */
		r = -EAGAIN;
	if (r) { /* nothing went out: the slot stays free */
		rk_mr_dereg(c->req_stage);
		rk_mr_dereg(c->resp_stage);
		c->req_stage = c->resp_stage = NULL;
		return r;
	}
	cl->nfree--;
	c->state = C_BUSY;
	c->send_done = (uint8_t)inl;
	c->ans_done = 0;
	c->resp = a->resp;
	c->resp_cap = a->resp_cap;
	c->done = done;
	c->arg = arg;
	c->deadline = deadline;
	if (c->deadline >= 0 && (cl->soonest < 0 || c->deadline < cl->soonest))
		cl->soonest = c->deadline;
	cl->inflight++;
	return 0;
}

int rk_rpc_call_async(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a,
		      rk_rpc_done_fn done, void *arg, struct rk_error *err)
{
	return call_start(cl, a, call_deadline(a), done, arg, err);
}

static void sync_done(void *arg, int status, uint32_t len, int32_t code, const struct rk_error *err)
{
	struct sync_result *s = arg;

	s->finished = 1;
	s->status = status;
	s->len = len;
	s->code = code;
	/* An error object is hundreds of bytes: copied only when there is one. */
	if (status && s->err && s->err != err)
		*s->err = *err;
}

int rk_rpc_call(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a, uint32_t *resp_len,
		int32_t *app_code, struct rk_error *err)
{
	struct sync_result s = {.err = err}; /* a few words, not an error object, to clear */
	int r;

	if (cl->in_progress)
		return rk__err_set(err, EBUSY, "rk_rpc_call", "called from a completion callback");
	int64_t deadline = call_deadline(a);

	r = call_start(cl, a, deadline, sync_done, &s, err);
	while (r == -EAGAIN) { /* the window is full: make room, within the call's deadline */
		if (deadline >= 0 && coarse_left(deadline) == 0)
			return rk__err_set(
			    err, ETIMEDOUT, "rk_rpc_call",
			    "no free call slot within the deadline (%u calls in flight, "
			    "%u slots held by calls that timed out)",
			    cl->inflight, cl->window - cl->nfree - cl->inflight);
		r = progress_once(cl, deadline < 0 ? -1 : coarse_left(deadline), err);
		if (r >= 0)
			r = call_start(cl, a, deadline, sync_done, &s, err);
	}
	if (r)
		return r;
	while (!s.finished) {
		r = progress_once(cl, -1, err);
		if (r < 0 && !s.finished) { /* the wait itself failed: the call cannot end */
			fail_all(cl, r, err);
		}
	}
	if (resp_len)
		*resp_len = s.len;
	if (app_code)
		*app_code = s.code;
	return s.status;
}

int rk_rpc_client_progress(struct rk_rpc_client *cl, int timeout_ms, struct rk_error *err)
{
	uint64_t before = cl->completed;
	int r;

	if (cl->dead && !cl->inflight) {
		if (err)
			*err = cl->why;
		return -ENOTCONN;
	}
	r = progress_once(cl, timeout_ms, err);
	if (r == -EBUSY)
		return r;
	if (r < 0)
		fail_all(cl, r, err);
	return (int)(cl->completed - before);
}

int rk_rpc_client_fd(const struct rk_rpc_client *cl)
{
	if (rk_cq_mode(rk_conn_cq(cl->conn)) == RK_WAIT_BUSY)
		return -EOPNOTSUPP;
	return rk_wait_fd(cl->ws);
}

uint32_t rk_rpc_client_inflight(const struct rk_rpc_client *cl)
{
	return cl->inflight;
}

uint32_t rk_rpc_client_window(const struct rk_rpc_client *cl)
{
	return cl->window;
}

int rk_rpc_client_alive(const struct rk_rpc_client *cl, struct rk_error *err)
{
	if (cl->dead && err)
		*err = cl->why;
	return !cl->dead;
}

struct rk_pd *rk_rpc_client_pd(const struct rk_rpc_client *cl)
{
	return cl->pd;
}

void rk_rpc_client_destroy(struct rk_rpc_client *cl)
{
	if (!cl)
		return;
	if (cl->calls) {
		struct rk_error e;

		rk__err_set(&e, ECONNRESET, "rk_rpc_call", "the client was destroyed");
		fail_all(cl, -ECONNRESET, &e);
	}
	rk_wait_destroy(cl->ws);
	rk_conn_destroy(cl->conn); /* flushes: the device is done with every buffer */
	for (uint32_t i = 0; cl->calls && i < cl->window; i++) {
		rk_mr_dereg(cl->calls[i].req_stage);
		rk_mr_dereg(cl->calls[i].resp_stage);
	}
	rk_mr_dereg(cl->reqs);
	rk_mr_dereg(cl->slots);
	free(cl->free_slots);
	free(cl->calls);
	rk_pd_free(cl->own_pd);
	free(cl);
}
