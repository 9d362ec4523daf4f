/*
 * rpc_client_call.c - the RPC client's call path: the arguments' checks,
 * the request's header and body in the slot's buffer, its SEND, and the
 * synchronous call's wait.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "rpc_client_int.h"

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

/*
 * Fill the header's body fields: rendezvous from req_mr or a stage. A body
 * within req_inline goes with the request (call_start places it).
 */
static int place_body(struct rk_rpc_client *cl, struct call *c, const struct rk_rpc_call_args *a,
		      struct rk_rpc_req_hdr *h, struct rk_error *err)
{
	if (a->req_len <= cl->acc.req_inline)
		return 0;
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
	int r = place_body(cl, c, a, &h, err);

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

/*
 * Slot @i (the top of the free stack), its request of generation @gen
 * posted, becomes a call in flight: what the answer path, the deadlines
 * and the connection's end look at.
 */
static inline __attribute__((always_inline)) void call_book(struct rk_rpc_client *cl, uint16_t i,
							    uint16_t gen, uint8_t send_done,
							    const struct rk_rpc_call_args *a,
							    int64_t deadline, int timeout_ms,
							    rk_rpc_done_fn done, void *arg)
{
	struct call *c = &cl->calls[i];

	cl->nfree--;
	c->state = C_BUSY;
	c->send_done = send_done;
	c->want = (uint32_t)i << 16 | gen; /* the immediate its answer carries */
	c->resp = a->resp;
	c->resp_cap = a->resp_cap;
	c->done = done;
	c->arg = arg;
	c->deadline = deadline;
	if (deadline == DEADLINE_PENDING) {
		c->timeout_ms = timeout_ms;
		cl->npending++;
		cl->pending_last = i;
	} else if (deadline >= 0 && (cl->soonest < 0 || deadline < cl->soonest)) {
		cl->soonest = deadline;
	}
	cl->inflight++;
}

/*
 * Start a call that ends by @deadline (ms, -1 none, or DEADLINE_PENDING:
 * rk_rpc_call's, from the first clock reading; its timeout then in
 * @timeout_ms). @done NULL: a synchronous call, @arg its sync_result.
 *
 * The common call (its body inline, its answer in the slot, within
 * max_msg: decided against limits computed at connect) writes five header
 * fields; the slot's own are there since the connect, the far ones zero
 * unless the slot's last call was not a common one. Its SEND is the
 * client's WR, built at connect, of one SGE: the header and the body
 * copied beside it; inline, the provider copies that into the work
 * request.
 */
static inline __attribute__((always_inline)) int
call_start(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a, int64_t deadline,
	   int timeout_ms, rk_rpc_done_fn done, void *arg, struct rk_error *err)
{
	struct ibv_send_wr *wr = &cl->req_wr;
	struct ibv_sge *sge = &cl->req_sge;
	const uint32_t req_len = a->req_len;
	unsigned send_flags;
	uint64_t wr_id;
	uint32_t len;
	uint8_t *buf;
	struct call *c;
	uint16_t i, gen;
	int r, flags = 0, small;

	if (cl->dead) {
		if (err)
			*err = cl->why;
		return -ENOTCONN;
	}
	small = req_len <= cl->small_req && a->resp_cap <= cl->small_resp;
	if (__builtin_expect(!small || (req_len && !a->req) || (a->resp_cap && !a->resp), 0)) {
		r = check_args(cl, a, err);
		if (r)
			return r;
	}
	if (!cl->nfree)
		return -EAGAIN;
	i = cl->free_slots[cl->nfree - 1];
	c = &cl->calls[i];
	buf = cl->req_base + (size_t)i * cl->req_buf;
	c->direct = 0;
	if (__builtin_expect(small, 1)) {
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
	gen = ++c->gen;

	/* Local, never addressed elsewhere: its fields stay in registers. */
	const struct rk_rpc_req_hdr h = {.flags = (uint8_t)flags,
					 .method = a->method,
					 .gen = gen,
					 .req_len = req_len,
					 .resp_cap = a->resp_cap};

	rk__rpc_req_encode_call(&h, buf);
	len = RK_RPC_REQ_HDR + ((flags & RK_RPC_F_RDV) ? 0 : req_len);
	/*
	 * The body joins the header in the slot's buffer (local memory, no
	 * peer can write it), a small one by a few moves: the SEND is one
	 * SGE, which the provider copies into the work request in one piece
	 * when it is inline (cheaper than a second SGE). Inline, the buffer is
	 * free at once and no completion is needed (selective signaling asks
	 * for one now and then to retire the queue; its wr_id names no slot).
	 */
	if (len > RK_RPC_REQ_HDR && a->req) /* check_args: a body has a buffer */
		copy_small(buf + RK_RPC_REQ_HDR, a->req, req_len);
	sge->addr = (uintptr_t)buf;
	sge->length = len;
	if (len <= cl->max_inline) {
		send_flags = IBV_SEND_INLINE;
		wr_id = TAG_REQ_INLINE << 48;
	} else {
		send_flags = IBV_SEND_SIGNALED;
		wr_id = TAG_REQ << 48 | i;
	}
	r = rk__post_kept(cl->conn, wr, wr_id, send_flags, err);
	if (r == -ENOBUFS) /* the queue waits for a completion to be polled: progress first */
		r = -EAGAIN;
	if (r) { /* nothing went out: the slot stays free */
		rk_mr_dereg(c->req_stage);
		rk_mr_dereg(c->resp_stage);
		c->req_stage = c->resp_stage = NULL;
		return r;
	}
	call_book(cl, i, gen, (uint8_t)(len <= cl->max_inline), a, deadline, timeout_ms, done, arg);
	return 0;
}

int rk_rpc_call_async(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a,
		      rk_rpc_done_fn done, void *arg, struct rk_error *err)
{
	/*
	 * Nothing in flight on a sleeping client whose CQ is not armed (a
	 * synchronous call's wake-up read the event and found its answer):
	 * the caller may sleep on rk_rpc_client_fd for this call's answer
	 * next, with no progress between. Armed before the post, so that the
	 * answer raises the event. With calls in flight the last progress
	 * (or rk_rpc_call's wait) left it armed, as rk_rpc_client_fd's
	 * contract has it.
	 */
	if (!cl->busy && !cl->inflight && !cl->cq->armed && !cl->dead) {
		int r = rk__cq_arm_unarmed(cl->cq, err);

		if (r)
			return r;
	}
	/* Progress may come much later: the deadline counts from now. */
	return call_start(cl, a, call_deadline(a), 0, done, arg, err);
}

/*
 * rk_rpc_call's wait for its call, started (@s its result), and the
 * caller's outputs.
 */
static int call_wait(struct rk_rpc_client *cl, struct sync_result *s, uint32_t *resp_len,
		     int32_t *app_code, struct rk_error *err)
{
	if (!s->finished) { /* lean_to_usual's completions may have ended it */
		cl->in_progress = 1;
		rk__rpc_cl_wait_call(cl, s, err);
		cl->in_progress = 0;
	}
	/*
	 * Other calls in flight, a sleeping mode, the CQ left not armed by
	 * the wait's wake-up: the caller may sleep on rk_rpc_client_fd for
	 * their answers next, as after rk_rpc_client_progress. Arm it (rounds
	 * without waiting until one finds nothing; their callbacks run).
	 */
	if (__builtin_expect(cl->inflight != 0, 0) && !cl->busy)
		while (!cl->cq->armed && !cl->dead && rk__rpc_cl_progress(cl, 0, NULL) > 0)
			;
	if (resp_len)
		*resp_len = s->len;
	if (app_code)
		*app_code = s->code;
	return s->status;
}

/*
 * The lean call's state written out (rpc_client_int.h): it is booked as
 * call_start books a call, takes @wc[0..@n), and rk_rpc_call's usual wait
 * ends it.
 */
__attribute__((noinline)) int
rk__rpc_cl_lean_to_usual(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a, uint16_t i,
			 uint16_t gen, int64_t deadline, int late, const struct ibv_wc *wc, int n,
			 uint32_t *resp_len, int32_t *app_code, struct rk_error *err)
{
	struct sync_result s = {.err = err};

	if (deadline == DEADLINE_UNSET) /* before the first look: as rk_rpc_call's */
		deadline = a->timeout_ms < 0 ? -1 : DEADLINE_PENDING;
	call_book(cl, i, gen, 1, a, deadline, a->timeout_ms ? a->timeout_ms : DEF_TIMEOUT, NULL,
		  &s);
	cl->in_progress = 1;
	rk__rpc_cl_on_wcs(cl, wc, n);
	if (late && !s.finished)
		rk__rpc_cl_busy_look(cl, 1); /* the clock: past the deadline, the call fails */
	cl->in_progress = 0;
	return call_wait(cl, &s, resp_len, app_code, err);
}

__attribute__((noinline)) void rk__rpc_cl_lean_rest(struct rk_rpc_client *cl,
						    const struct ibv_wc *wc, int n)
{
	cl->in_progress = 1;
	rk__rpc_cl_on_wcs(cl, wc, n);
	cl->in_progress = 0;
}

/*
 * The lean call's look every SPIN_POLLS empty polls (the @looks-th):
 * rk__rpc_cl_busy_look, and the call's deadline (*@deadline, ms or -1
 * none) started by the first or held by a later one. 0 to go on spinning, 1 when the
 * deadline has passed, -ECONNRESET when the connection ended (the call
 * with it: @err says why; its slot stays free, as its answer can no longer
 * come).
 */
static __attribute__((noinline)) int lean_look(struct rk_rpc_client *cl,
					       const struct rk_rpc_call_args *a, int64_t *deadline,
					       unsigned looks, struct rk_error *err)
{
	int64_t now = rk__rpc_cl_busy_look(cl, looks);

	if (cl->dead) {
		if (err)
			*err = cl->why;
		return -ECONNRESET;
	}
	if (*deadline == DEADLINE_UNSET) /* the first: the deadline starts */
		*deadline =
		    a->timeout_ms < 0 ? -1 : now + (a->timeout_ms ? a->timeout_ms : DEF_TIMEOUT);
	else if (*deadline >= 0 && now >= *deadline)
		return 1;
	return 0;
}

/*
 * rk_rpc_call's lean path on a busy client (rpc_client_int.h): its answer
 * spun for on the CQ alone, with the answer path's checks (lean_take).
 * Nothing else can complete meanwhile but a request SEND that retires the
 * queue. Every SPIN_POLLS empty polls the usual look
 * (rk__rpc_cl_busy_look): the first starts the call's deadline, a later
 * one past it fails the call, and a disconnect it finds ends the call with
 * the connection. What this saves a call: the slot's bookkeeping (its
 * state, the answer it awaits, the pending deadline, the free stack), the
 * result's structure and in_progress. 1 when the request could not be
 * posted (nothing went out: the usual path starts the call), else the
 * call's result.
 */
static inline __attribute__((always_inline)) int call_lean(struct rk_rpc_client *cl,
							   const struct rk_rpc_call_args *a,
							   uint32_t *resp_len, int32_t *app_code,
							   struct rk_error *err)
{
	const uint16_t i = cl->free_slots[cl->nfree - 1];
	const uint16_t gen = ++cl->calls[i].gen;
	struct ibv_wc wc[POLL_BATCH];
	unsigned looks = 0;
	int64_t deadline = DEADLINE_UNSET; /* set by the first look */

	if (__builtin_expect(lean_post(cl, a, i, gen) != 0, 0))
		return 1; /* the usual path posts again and says why */
	for (unsigned k = 1;; k++) {
		int n = ibv_poll_cq(cl->vcq, POLL_BATCH, wc);

		if (!n) {
			if (k % SPIN_POLLS)
				continue;
			int r = lean_look(cl, a, &deadline, ++looks, err);

			if (__builtin_expect(r < 0, 0)) {
				if (resp_len) /* as the usual path leaves them: nothing came */
					*resp_len = 0;
				if (app_code)
					*app_code = 0;
				return r;
			}
			if (__builtin_expect(r > 0, 0))
				return rk__rpc_cl_lean_to_usual(cl, a, i, gen, deadline, 1, wc, 0,
								resp_len, app_code, err);
			continue;
		}
		if (__builtin_expect(n < 0, 0)) /* the usual wait's poll reports it */
			return rk__rpc_cl_lean_to_usual(cl, a, i, gen, deadline, 0, wc, 0, resp_len,
							app_code, err);
		n = lean_take(cl, a, i, gen, deadline, wc, n, resp_len, app_code, err);
		if (n != LEAN_WAIT)
			return n;
	}
}

/*
 * The synchronous call. Its deadline counts from the first clock reading
 * of its wait (DEADLINE_PENDING): a call answered within the wait's first
 * spin reads no clock. Its result is written by the answer path straight
 * into @s (no callback), and it handles completions with in_progress held
 * for its whole wait (a callback of another call that finishes meanwhile
 * cannot reenter). Busy or in event mode, with no other call in flight,
 * a common inline call takes the lean path (call_lean, or
 * rk__rpc_cl_call_sleep).
 */
int rk_rpc_call(struct rk_rpc_client *cl, const struct rk_rpc_call_args *a, uint32_t *resp_len,
		int32_t *app_code, struct rk_error *err)
{
	int64_t deadline = -1;
	int r;

	if (__builtin_expect(cl->lean && !cl->inflight && !cl->in_progress && cl->nfree &&
				 a->req_len <= cl->lean_req && a->resp_cap <= cl->small_resp &&
				 (a->req || !a->req_len) && (a->resp || !a->resp_cap),
			     1)) {
		r = cl->lean == LEAN_BUSY ? call_lean(cl, a, resp_len, app_code, err)
					  : rk__rpc_cl_call_sleep(cl, a, resp_len, app_code, err);
		if (r != 1)
			return r;
	}
	if (cl->in_progress)
		return rk__err_set(err, EBUSY, "rk_rpc_call", "called from a completion callback");

	struct sync_result s = {.err = err}; /* a few words, not an error object, to clear */

	r = call_start(cl, a, a->timeout_ms < 0 ? -1 : DEADLINE_PENDING,
		       a->timeout_ms ? a->timeout_ms : DEF_TIMEOUT, NULL, &s, err);
	if (__builtin_expect(r == -EAGAIN, 0)) {
		/* The window is full: make room, within the call's deadline, read now. */
		deadline = call_deadline(a);
		while (r == -EAGAIN) {
			if (deadline >= 0 && coarse_left(deadline) == 0)
				return rk__err_set(
				    err, ETIMEDOUT, "rk_rpc_call",
				    "no free call slot within the deadline (%u calls in flight, "
				    "%u slots held by calls that timed out)",
				    cl->inflight, cl->window - cl->nfree - cl->inflight);
			r = rk__rpc_cl_progress(cl, deadline < 0 ? -1 : coarse_left(deadline), err);
			if (r >= 0)
				r = call_start(cl, a, deadline, 0, NULL, &s, err);
		}
	}
	if (r)
		return r;
	return call_wait(cl, &s, resp_len, app_code, err);
}
