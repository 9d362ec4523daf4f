/*
 * rpc_client_answer.c - the RPC client's answer path: completions (the
 * answers' receives, the requests' SENDs), the answer's checks and copy,
 * the calls' deadlines, failing every call at once when the connection
 * dies, and the progress loop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "rpc_client_int.h"

/* Post @n 0-byte receives for answers, in chains; 0 or a negative errno. */
int rk__rpc_cl_post_answer_recvs(struct rk_conn *conn, uint32_t n, struct rk_error *err)
{
#define ANS_RECV                                                                                   \
	{                                                                                          \
		.wr_id = WRID_ANS                                                                  \
	}
	static const struct rk_recv rx[RECV_BATCH] = {
	    ANS_RECV, ANS_RECV, ANS_RECV, ANS_RECV, ANS_RECV, ANS_RECV, ANS_RECV, ANS_RECV,
	    ANS_RECV, ANS_RECV, ANS_RECV, ANS_RECV, ANS_RECV, ANS_RECV, ANS_RECV, ANS_RECV};
#undef ANS_RECV
	_Static_assert(RECV_BATCH == 16, "rx has RECV_BATCH entries");

	while (n) {
		unsigned k = n < RECV_BATCH ? n : RECV_BATCH;
		int r = rk_post_recv_list(conn, rx, k, err);

		if (r != (int)k)
			return r < 0 ? r : -EIO;
		n -= k;
	}
	return 0;
}

/* Give slot @i back once both its SEND and its answer (or the end) are done. */
static inline void slot_release(struct rk_rpc_client *cl, uint16_t i)
{
	struct call *c = &cl->calls[i];

	if (__builtin_expect(c->far, 0)) { /* a rendezvous or a large answer only: stages */
		rk_mr_dereg(c->req_stage);
		rk_mr_dereg(c->resp_stage);
		c->req_stage = c->resp_stage = NULL;
	}
	c->state = C_FREE;
	cl->free_slots[cl->nfree++] = i;
}

/* What a successful call's callback gets: no error (nothing to clear per call). */
static const struct rk_error no_error = {.wc_status = -1, .wc_status_str = ""};

/*
 * Complete busy call @c for its caller with @status (the caller checked
 * C_BUSY); the slot may stay a zombie. Inline: the answer's path finishes
 * a successful call here, in the loop that polled its completion.
 */
static inline __attribute__((always_inline)) void finish_busy(struct rk_rpc_client *cl,
							      struct call *c, int status,
							      uint32_t len, int32_t code,
							      const struct rk_error *why)
{
	c->state = C_ZOMBIE;
	cl->inflight--;
	cl->completed++;
	if (c->deadline == DEADLINE_PENDING)
		cl->npending--;
	if (!c->done) { /* rk_rpc_call's own: its result, and the error only when there is one */
		struct sync_result *s = c->arg;

		s->finished = 1;
		s->status = status;
		s->len = len;
		s->code = code;
		if (status && s->err && why && s->err != why)
			*s->err = *why;
		return;
	}
	c->done(c->arg, status, len, code, why ? why : &no_error);
}

/* Complete call @i for its caller (once); the slot may stay a zombie. */
static __attribute__((noinline)) void finish(struct rk_rpc_client *cl, uint16_t i, int status,
					     uint32_t len, int32_t code, const struct rk_error *why)
{
	struct call *c = &cl->calls[i];

	if (c->state == C_BUSY)
		finish_busy(cl, c, status, len, code, why);
}

static inline void maybe_release(struct rk_rpc_client *cl, uint16_t i)
{
	struct call *c = &cl->calls[i];

	if (c->state == C_ZOMBIE && c->send_done && c->want == WANT_NONE)
		slot_release(cl, i);
}

/* The connection is gone: every call fails now, with the reason. */
void rk__rpc_cl_fail_all(struct rk_rpc_client *cl, int e, const struct rk_error *why)
{
	if (cl->dead)
		return;
	cl->dead = e < 0 ? e : -ECONNRESET;
	cl->lean = 0;
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

static __attribute__((noinline, cold)) void protocol_error(struct rk_rpc_client *cl,
							   const char *what, uint32_t imm)
{
	struct rk_error e;

	rk__err_set(&e, EPROTO, "rk_rpc_call", "the server broke the protocol: %s (imm 0x%08x)",
		    what, imm);
	rk_warn("%s", e.msg);
	rk__rpc_cl_fail_all(cl, -EPROTO, &e);
}

/* A call the server answered with a failure status: its error. */
static __attribute__((noinline, cold)) void answer_failed(struct rk_rpc_client *cl, uint16_t i,
							  const struct rk_rpc_ans_hdr *h)
{
	int status = rk__rpc_status_errno(h->status);
	struct rk_error e;

	if (status == -EREMOTEIO) {
		rk__err_set(&e, EREMOTEIO, "rk_rpc_call", "the handler answered code %d", h->code);
		finish(cl, i, status, h->len, h->code, &e);
		return;
	}
	rk__err_set(&e, -status, "rk_rpc_call", "the server answered: %s",
		    h->status == RK_RPC_NO_METHOD ? "no such method"
		    : h->status == RK_RPC_TOO_BIG ? "too big for the call or max_msg"
						  : "no room for the body now");
	finish(cl, i, status, 0, h->code, &e);
}

/*
 * An answer that is not the usual one (a failure status, data elsewhere,
 * or a header rk__rpc_ans_decode refuses) for call @c in slot @i, its
 * header @hdr already copied out of the slot. 0, or -1 when the server
 * broke the protocol (the connection failed then).
 */
static __attribute__((noinline)) int on_other_answer(struct rk_rpc_client *cl, struct call *c,
						     uint16_t i, const uint8_t *hdr,
						     const struct ibv_wc *wc, uint32_t imm)
{
	struct rk_rpc_ans_hdr h;
	const char *why = NULL;

	if (rk__rpc_ans_decode(hdr, wc->byte_len, c->resp_cap, cl->resp_room, c->direct, &h,
			       &why)) {
		protocol_error(cl, why, imm);
		return -1;
	}
	if (c->state != C_BUSY)
		return 0;
	if (h.in_slot) /* checked: h.len fits the call and what came */
		copy_small(c->resp, cl->slot_base + (size_t)i * cl->acc.slot_size + RK_RPC_ANS_HDR,
			   h.len);
	else if (h.len && c->resp_stage)
		memcpy(c->resp, rk_mr_addr(c->resp_stage), h.len);
	if (h.status == RK_RPC_OK)
		finish_busy(cl, c, 0, h.len, h.code, NULL);
	else
		answer_failed(cl, i, &h);
	return 0;
}

/*
 * An answer arrived in a slot: @wc is its receive's successful completion.
 * The immediate names the call (slot and generation): within the window,
 * it must be the one its slot awaits (c->want: a call in flight or timed
 * out, of that generation, not answered yet), one compare; any other
 * fails the connection, never touching a slot. The slot's header, written
 * by the server at any time, is copied before it is believed. (A
 * completion of opcode IBV_WC_RECV_RDMA_WITH_IMM always has its
 * immediate: the opcode alone is tested.)
 */
static inline __attribute__((always_inline)) void on_answer(struct rk_rpc_client *cl,
							    const struct ibv_wc *wc)
{
	uint32_t imm = ntohl(wc->imm_data);
	uint16_t i = (uint16_t)(imm >> 16);
	uint8_t hdr[RK_RPC_ANS_HDR];
	const uint8_t *slot;
	struct call *c;
	int64_t len;

	if (__builtin_expect(wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || i >= cl->window ||
				 cl->calls[i].want != imm,
			     0)) {
		protocol_error(cl, "an answer for no call in flight", imm);
		return;
	}
	c = &cl->calls[i];
	c->want = WANT_NONE;
	/* The slot is the server's to write at any time: copy, then check. */
	slot = cl->slot_base + (size_t)i * cl->acc.slot_size;
	memcpy(hdr, slot, sizeof(hdr));
	/* The usual answer straight to its caller; any other through rk__rpc_ans_decode. */
	len = usual_answer_len(cl, hdr, wc, c->resp_cap);
	if (__builtin_expect(len >= 0, 1)) {
		if (__builtin_expect(c->state == C_BUSY, 1)) {
			copy_small(c->resp, slot + RK_RPC_ANS_HDR, (uint32_t)len);
			finish_busy(cl, c, 0, (uint32_t)len, (int32_t)rk_get32(hdr + 4), NULL);
		}
	} else if (on_other_answer(cl, c, i, hdr, wc, imm)) {
		return;
	}
	if (c->state == C_ZOMBIE && c->send_done) /* its answer is done: here */
		slot_release(cl, i);
}

/* A failed completion: the connection is gone, and every call with it. */
static __attribute__((noinline, cold)) void wc_failed(struct rk_rpc_client *cl,
						      const struct ibv_wc *wc)
{
	struct rk_error e;

	rk_error_from_wc(&e, wc);
	rk__rpc_cl_fail_all(cl, -EIO, &e);
}

/*
 * The answers' receives used, RECV_BATCH of them, posted again: the
 * client's chain (built at connect), each WR's id set again (the post
 * replaces it by its sequence number).
 */
__attribute__((noinline)) void rk__rpc_cl_repost_answers(struct rk_rpc_client *cl)
{
	struct rk_error e;
	int r;

	for (unsigned k = 0; k < RECV_BATCH; k++)
		cl->ans_rx[k].wr_id = WRID_ANS;
	r = rk__post_recv_kept(cl->conn, cl->ans_rx, RECV_BATCH, &e);
	if (r != RECV_BATCH)
		rk__rpc_cl_fail_all(cl, r < 0 ? r : -EIO, &e);
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
		rk__rpc_cl_repost_answers(cl);
}

/* on_wc for the completions the wait set returned (not the hot loop's). */
static __attribute__((noinline)) void on_wc_waited(struct rk_rpc_client *cl,
						   const struct ibv_wc *wc)
{
	on_wc(cl, wc);
}

void rk__rpc_cl_on_wcs(struct rk_rpc_client *cl, const struct ibv_wc *wc, int n)
{
	for (int j = 0; j < n; j++)
		on_wc(cl, &wc[j]);
}

/*
 * The first clock reading after synchronous calls started without one:
 * their deadlines count from it (rpc_client_int.h, DEADLINE_PENDING).
 */
static __attribute__((noinline)) void settle_walk(struct rk_rpc_client *cl, int64_t now)
{
	for (uint32_t i = 0; i < cl->window && cl->npending; i++) {
		struct call *c = &cl->calls[i];

		if (c->state != C_BUSY || c->deadline != DEADLINE_PENDING)
			continue;
		c->deadline = now + c->timeout_ms;
		cl->npending--;
		if (cl->soonest < 0 || c->deadline < cl->soonest)
			cl->soonest = c->deadline;
	}
	cl->npending = 0;
}

/*
 * The usual one inline (event mode settles one on almost every call):
 * rk_rpc_call's, the last call that started pending; any other walks the
 * window.
 */
static inline __attribute__((always_inline)) void settle_deadlines(struct rk_rpc_client *cl,
								   int64_t now)
{
	struct call *c = &cl->calls[cl->pending_last];

	if (__builtin_expect(
		cl->npending == 1 && c->state == C_BUSY && c->deadline == DEADLINE_PENDING, 1)) {
		c->deadline = now + c->timeout_ms;
		if (cl->soonest < 0 || c->deadline < cl->soonest)
			cl->soonest = c->deadline;
		cl->npending = 0;
		return;
	}
	settle_walk(cl, now);
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
		rk__rpc_cl_fail_all(cl, -ETIMEDOUT, &e);
	}
}

/*
 * The wait set's round, when the CQ had nothing: wait up to @timeout_ms
 * and handle what came.
 */
static __attribute__((noinline)) int wait_round(struct rk_rpc_client *cl, int timeout_ms,
						struct rk_error *err)
{
	struct rk_wait_event ev[MAX_EVENTS];
	int n = rk_wait(cl->ws, ev, MAX_EVENTS, timeout_ms, NULL); /* NULL: no text for a timeout */

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
			rk__rpc_cl_fail_all(cl, -ECONNRESET, &e);
		}
	}
	return n;
}

/* The connection's CM channel was readable: its state, and the end if it ended. */
static __attribute__((noinline)) int cm_fired(struct rk_rpc_client *cl)
{
	int st = rk_conn_progress(cl->conn, 0, NULL);

	if (st != RK_CONN_CONNECTED) { /* st < 0: a channel that cannot be read, broken */
		struct rk_error e;

		rk_conn_first_error(cl->conn, &e);
		rk__rpc_cl_fail_all(cl, -ECONNRESET, &e);
	}
	return 1;
}

/*
 * Event mode's wait, when the CQ had nothing: rk_cq_wait's sleep (the CQ
 * armed only when it is not, and polled again after arming, since a
 * completion before it raises no event; after a wake-up one read of the
 * channel, and no arming until the next sleep unless the CQ is then found
 * empty) with the connection's CM
 * channel as a second fd: the two fds of the wait set, whose epoll fd
 * (rk_rpc_client_fd) sees them as before. The CM events are read only
 * when the CQ is found empty: answers that came before a disconnect are
 * handled first. The number of events, 0 on a timeout, or a negative errno.
 */
static __attribute__((noinline)) int sleep_round(struct rk_rpc_client *cl, int timeout_ms,
						 struct rk_error *err)
{
	struct rk_cq *cq = cl->cq;
	struct pollfd p[2] = {{.fd = cq->ch->fd, .events = POLLIN},
			      {.fd = cl->cm_fd, .events = POLLIN}};
	struct ibv_wc wc[POLL_BATCH];
	int n, r;

	if (!cq->armed) {
		r = rk__cq_arm_unarmed(cq, err);
		if (r)
			return r;
		n = ibv_poll_cq(cl->vcq, POLL_BATCH, wc);
		if (n)
			goto polled;
	}
	r = poll(p, cl->cm_fd >= 0 ? 2 : 1, timeout_ms);
	if (r <= 0) /* a timeout, or a signal: the caller looks at the deadlines */
		return r < 0 && errno != EINTR ? rk__err_sys(err, "poll", "completion channel") : 0;
	if (p[0].revents) {
		r = rk__cq_consume_one(cq, err);
		if (r)
			return r;
	}
	n = ibv_poll_cq(cl->vcq, POLL_BATCH, wc);
	if (!n && !cq->armed) {
		/*
		 * An event whose completion was taken already: armed again
		 * before the return, so that the wait set's fd
		 * (rk_rpc_client_fd) fires with the next completion.
		 */
		r = rk__cq_arm_unarmed(cq, err);
		if (r)
			return r;
		n = ibv_poll_cq(cl->vcq, POLL_BATCH, wc);
	}
	if (!n)
		return p[1].revents ? cm_fired(cl) : 0;
polled:
	if (n < 0)
		return rk__err_set(err, EIO, "ibv_poll_cq", "CQ in error (overrun?)");
	n = rk_cq_take(cq, wc, n);
	for (int j = 0; j < n; j++)
		on_wc(cl, &wc[j]);
	return n;
}

/*
 * rk__rpc_cl_handle's look at the clock after CLOCK_EVERY rounds that found
 * completions, for a caller that waits no further: the pending deadlines
 * settled, the calls past theirs failed.
 */
static __attribute__((noinline)) int64_t look_at_clock(struct rk_rpc_client *cl)
{
	int64_t now = coarse_ms();

	cl->polls_unclocked = 0;
	if (cl->npending)
		settle_deadlines(cl, now);
	if (cl->soonest >= 0 && now >= cl->soonest)
		expire(cl, now);
	return now;
}

/*
 * Wait up to @timeout_ms (-1: until the earliest call's deadline) and
 * handle what came: the number of events or a negative errno. The CQ is
 * polled first (no system call): a completion already there needs no
 * wait set, and the answer's completion is handled in this loop. A clock
 * reading only when the CQ had nothing, and every CLOCK_EVERY rounds
 * that found completions. @look_first 0 (event mode's first round of a
 * call, its CQ not armed): no poll first, the sleep's arming polls it.
 */
static inline __attribute__((always_inline)) int handle(struct rk_rpc_client *cl, int timeout_ms,
							int look_first, struct rk_error *err)
{
	struct ibv_wc wc[POLL_BATCH];
	uint64_t done = cl->completed;
	int64_t now;
	int n = 0;

	/*
	 * Completions already there first: no clock, no system call. The
	 * deadlines are looked at when there are none, and every CLOCK_EVERY
	 * times there were (a call stuck among calls that flow still ends).
	 * Busy, an answer on its way is spun for on the CQ alone before the
	 * wait set's round (clock, event array, fds): a few hundred
	 * instructions a call less. A disconnect is seen there, SPIN_POLLS
	 * empty polls (microseconds) later. An empty pass is one call, into
	 * the provider; what came goes through rk_cq_take at once, which
	 * checks each completion against the connection's window.
	 */
	if (look_first)
		n = ibv_poll_cq(cl->vcq, POLL_BATCH, wc);
	if (!n && look_first && timeout_ms && cl->busy)
		for (unsigned k = 0; k < SPIN_POLLS && !n; k++)
			n = ibv_poll_cq(cl->vcq, POLL_BATCH, wc);
	if (__builtin_expect(n < 0, 0))
		return rk__err_set(err, EIO, "ibv_poll_cq", "CQ in error (overrun?)");
	if (n > 0) {
		n = rk_cq_take(cl->cq, wc, n);
		for (int j = 0; j < n; j++)
			on_wc(cl, &wc[j]);
		if (n > 0 && ++cl->polls_unclocked < CLOCK_EVERY)
			return n;
	}
	cl->polls_unclocked = 0;
	now = coarse_ms();
	if (cl->npending)
		settle_deadlines(cl, now);
	if (cl->soonest >= 0 && now >= cl->soonest) {
		expire(cl, now);
		if (cl->completed != done)
			return 1; /* calls ended: their callers must see it before any wait */
	}
	if (n > 0)
		return n;
	if (cl->soonest >= 0 && (timeout_ms < 0 || cl->soonest - now < timeout_ms))
		timeout_ms = (int)(cl->soonest - now);
	/*
	 * Adaptive, a look without waiting (timeout 0) has no time to spin:
	 * the sleep's one poll(2) of the two fds, not the wait set's spin and
	 * sleep (four clock readings, two epoll_wait).
	 */
	if (!cl->busy && (timeout_ms == 0 || rk_cq_mode(cl->cq) == RK_WAIT_EVENT))
		return sleep_round(cl, timeout_ms, err);
	return wait_round(cl, timeout_ms, err);
}

int rk__rpc_cl_handle(struct rk_rpc_client *cl, int timeout_ms, struct rk_error *err)
{
	return handle(cl, timeout_ms, 1, err);
}

__attribute__((noinline)) int64_t rk__rpc_cl_busy_look(struct rk_rpc_client *cl, unsigned looks)
{
	int64_t now = look_at_clock(cl);

	if (cl->cm_fd >= 0 && looks % FD_LOOKS == 0) {
		struct pollfd p = {.fd = cl->cm_fd, .events = POLLIN};

		if (poll(&p, 1, 0) > 0)
			cm_fired(cl);
	}
	return now;
}

/*
 * rk_rpc_call's wait for its call (@s), with in_progress held by the
 * caller. Busy, the answer is spun for here on the verbs CQ alone, as the
 * SEND latency loop does: an empty pass is one call into the provider,
 * what came goes through rk_cq_take and on_wc (as in rk__rpc_cl_handle,
 * the clock read every CLOCK_EVERY rounds that found completions), and
 * every SPIN_POLLS empty passes rk__rpc_cl_busy_look reads the clock (the call's
 * deadline) and now and then the CM channel. A CQ in error, and event or
 * adaptive mode, take rk__rpc_cl_handle's rounds until the call ends.
 */
void rk__rpc_cl_wait_call(struct rk_rpc_client *cl, const struct sync_result *s,
			  struct rk_error *err)
{
	if (cl->busy) {
		struct ibv_wc wc[POLL_BATCH];
		unsigned looks = 0;

		for (unsigned k = 1;; k++) {
			int n = ibv_poll_cq(cl->vcq, POLL_BATCH, wc);

			if (n > 0) {
				/* The usual catch, the answer alone, without a loop. */
				n = rk_cq_take(cl->cq, wc, n);
				if (__builtin_expect(n == 1, 1))
					on_wc(cl, wc);
				else
					for (int j = 0; j < n; j++)
						on_wc_waited(cl, &wc[j]);
				if (__builtin_expect(++cl->polls_unclocked >= CLOCK_EVERY, 0))
					look_at_clock(cl);
				if (s->finished)
					return;
				continue;
			}
			if (__builtin_expect(n < 0, 0))
				break; /* rk__rpc_cl_handle's poll reports it */
			if (k % SPIN_POLLS)
				continue;
			rk__rpc_cl_busy_look(cl, ++looks);
			if (s->finished)
				return;
		}
	}
	/*
	 * Event mode, a CQ not armed: the answer to a call just posted is not
	 * there yet (a round trip takes microseconds, a poll tens of
	 * nanoseconds), so the first round skips its look at the CQ and goes
	 * to the sleep, whose arming polls the CQ once (what came before the
	 * arming raises no event, and what came after does). An armed CQ may
	 * hold completions an earlier round left (it took POLL_BATCH): the
	 * usual round looks first.
	 */
	if (!cl->busy && !cl->cq->armed && rk_cq_mode(cl->cq) == RK_WAIT_EVENT) {
		int r = handle(cl, -1, 0, err);

		if (r < 0 && !s->finished)
			rk__rpc_cl_fail_all(cl, r, err);
	}
	while (!s->finished) {
		int r = rk__rpc_cl_handle(cl, -1, err);

		if (r < 0 && !s->finished) /* the wait itself failed: the call cannot end */
			rk__rpc_cl_fail_all(cl, r, err);
	}
}

int rk__rpc_cl_progress(struct rk_rpc_client *cl, int timeout_ms, struct rk_error *err)
{
	int n;

	if (cl->in_progress) /* from a callback: the completions being handled would be lost */
		return rk__err_set(err, EBUSY, "rk_rpc_client_progress",
				   "called from a completion callback");
	cl->in_progress = 1;
	n = rk__rpc_cl_handle(cl, timeout_ms, err);
	cl->in_progress = 0;
	return n;
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
	r = rk__rpc_cl_progress(cl, timeout_ms, err);
	/*
	 * No call completed, and the caller may sleep on rk_rpc_client_fd
	 * next: a round that woke for completions (a request's SEND alone)
	 * leaves the CQ not armed, and an answer would then raise no event.
	 * Look again without waiting until a round finds nothing, which arms
	 * it, or a call completes.
	 */
	while (r > 0 && cl->completed == before && !cl->busy && !cl->cq->armed && !cl->dead)
		r = rk__rpc_cl_progress(cl, 0, err);
	if (r == -EBUSY)
		return r;
	if (r < 0)
		rk__rpc_cl_fail_all(cl, r, err);
	return (int)(cl->completed - before);
}
