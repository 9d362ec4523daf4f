/*
 * post.c - posting work requests: single, chained (one doorbell for many),
 * selective signaling that never overflows the send queue, and inline.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rk_internal.h"

static int opcode(enum rk_op op, enum ibv_wr_opcode *out)
{
	switch (op) {
	case RK_OP_SEND:
		*out = IBV_WR_SEND;
		return 0;
	case RK_OP_SEND_IMM:
		*out = IBV_WR_SEND_WITH_IMM;
		return 0;
	case RK_OP_WRITE:
		*out = IBV_WR_RDMA_WRITE;
		return 0;
	case RK_OP_WRITE_IMM:
		*out = IBV_WR_RDMA_WRITE_WITH_IMM;
		return 0;
	case RK_OP_READ:
		*out = IBV_WR_RDMA_READ;
		return 0;
	}
	return -EINVAL;
}

static inline unsigned sq_room(const struct rk_conn *c)
{
	return c->sq_depth - (unsigned)(c->slots.sq_head - c->slots.sq_tail);
}

static inline unsigned rq_room(const struct rk_conn *c)
{
	return c->rq_depth - (unsigned)(c->slots.rq_head - c->slots.rq_tail);
}

unsigned rk_sq_room(const struct rk_conn *c)
{
	return sq_room(c);
}

unsigned rk_rq_room(const struct rk_conn *c)
{
	return rq_room(c);
}

static int not_connected(const struct rk_conn *c, struct rk_error *err)
{
	struct rk_error first;

	if (rk_conn_first_error(c, &first))
		return rk__err_set(err, ENOTCONN, "rk_post", "connection %s after: %s",
				   rk_conn_state_str(c->state), first.msg);
	return rk__err_set(err, ENOTCONN, "rk_post", "connection %s", rk_conn_state_str(c->state));
}

/*
 * Fill verbs WR @i of the chain from @w. The scratch WRs are zeroed once,
 * when the connection is made, and every field an RC work request uses is
 * written here, so there is no memset of the whole WR on each post: on a
 * small message's latency path every store counts (and under emulation a
 * 128-byte memset costs more than the rest of this function).
 */
static inline __attribute__((always_inline)) int build(struct rk_conn *c, unsigned i,
						       const struct rk_wr *w, struct rk_error *err)
{
	struct ibv_send_wr *wr = &c->wrs[i];
	struct ibv_sge *sge = &c->sges[i];
	unsigned flags = 0;

	if (__builtin_expect(opcode(w->op, &wr->opcode), 0))
		return rk__err_set(err, EINVAL, "rk_post", "unknown op %d", (int)w->op);
	sge->addr = (uintptr_t)w->addr;
	sge->length = w->len;
	sge->lkey = w->lkey;
	wr->sg_list = sge;
	wr->num_sge = w->len ? 1 : 0;
	wr->wr_id = c->slots.sq_head + i;
	if (w->op != RK_OP_READ && w->len && w->len <= c->max_inline &&
	    !(w->flags & RK_WR_NO_INLINE))
		flags |= IBV_SEND_INLINE;
	if (w->flags & RK_WR_FENCE)
		flags |= IBV_SEND_FENCE;
	wr->send_flags = flags;
	wr->imm_data = w->op == RK_OP_SEND_IMM || w->op == RK_OP_WRITE_IMM ? htonl(w->imm) : 0;
	wr->wr.rdma.remote_addr = w->remote_addr;
	wr->wr.rdma.rkey = w->rkey;
	c->slots.sq_ids[(c->slots.sq_head + i) & c->slots.sq_mask] = w->wr_id;
	return 0;
}

/*
 * Every signal_every-th WR is signaled, and so is the last of a post that
 * leaves less room than one signaling interval: otherwise the queue could
 * fill with unsignaled WRs that no completion will ever retire. @run is
 * the count of unsignaled WRs before this one; returns its new value.
 */
static uint32_t signal_policy(struct rk_conn *c, unsigned i, unsigned n, unsigned outstanding,
			      const struct rk_wr *w, uint32_t run)
{
	if ((w->flags & RK_WR_SIGNALED) || run + 1 >= c->signal_every ||
	    (i == n - 1 && outstanding + c->signal_every > c->sq_depth)) {
		c->wrs[i].send_flags |= IBV_SEND_SIGNALED;
		return 0;
	}
	return run + 1;
}

/* The error side of post_chain(), kept out of its way. */
static __attribute__((noinline, cold)) int post_failed(struct rk_conn *c, const struct rk_wr *wrs,
						       unsigned n, int r, struct ibv_send_wr *bad,
						       struct rk_error *err)
{
	/* Only the WRs before @bad are on the queue: count their signals. */
	unsigned posted = bad >= c->wrs && bad < c->wrs + n ? (unsigned)(bad - c->wrs) : 0;

	for (unsigned i = 0; i < posted; i++)
		c->unsignaled_run =
		    (c->wrs[i].send_flags & IBV_SEND_SIGNALED) ? 0 : c->unsignaled_run + 1;
	c->slots.sq_head += posted;
	rk__err_ret(err, r, "ibv_post_send", "WR %u of %u (op %d, %u bytes)", posted, n,
		    (int)wrs[posted < n ? posted : 0].op, wrs[posted < n ? posted : 0].len);
	rk__err_set_qp(err, c->qp->qp_num);
	return posted ? (int)posted : (r > 0 ? -r : -EIO);
}

static __attribute__((noinline, cold)) int post_refused(struct rk_conn *c, unsigned n,
							struct rk_error *err)
{
	if (c->state != RK_CONN_CONNECTED)
		return not_connected(c, err);
	return rk__err_set(err, ENOBUFS, "rk_post", "%u WRs, %u free send slots of %u", n,
			   sq_room(c), c->sq_depth);
}

/*
 * rk_post and rk_post_list in one body, inlined into both so that the
 * single-WR post (a latency path) compiles without the loops.
 */
static inline __attribute__((always_inline)) int
post_chain(struct rk_conn *c, const struct rk_wr *wrs, unsigned n, struct rk_error *err)
{
	struct ibv_send_wr *bad = NULL;
	unsigned outstanding;
	uint32_t run;
	int r;

	if (c->state != RK_CONN_CONNECTED || n > sq_room(c))
		return post_refused(c, n, err);
	outstanding = (unsigned)(c->slots.sq_head - c->slots.sq_tail) + n;
	run = c->unsignaled_run;
	for (unsigned i = 0; i < n; i++) {
		r = build(c, i, &wrs[i], err);
		if (r)
			return r;
		run = signal_policy(c, i, n, outstanding, &wrs[i], run);
		c->wrs[i].next = i + 1 < n ? &c->wrs[i + 1] : NULL;
	}
	r = ibv_post_send(c->qp, c->wrs, &bad);
	if (r)
		return post_failed(c, wrs, n, r, bad, err);
	c->slots.sq_head += n;
	c->unsignaled_run = run;
	return (int)n;
}

int rk_post_list(struct rk_conn *c, const struct rk_wr *wrs, unsigned n, struct rk_error *err)
{
	return n ? post_chain(c, wrs, n, err) : 0;
}

/* Verbs opcodes by enum rk_op, and which of them carry immediate data. */
static const enum ibv_wr_opcode op_code[] = {
    [RK_OP_SEND] = IBV_WR_SEND,	       [RK_OP_SEND_IMM] = IBV_WR_SEND_WITH_IMM,
    [RK_OP_WRITE] = IBV_WR_RDMA_WRITE, [RK_OP_WRITE_IMM] = IBV_WR_RDMA_WRITE_WITH_IMM,
    [RK_OP_READ] = IBV_WR_RDMA_READ,
};
#define OP_HAS_IMM (1u << RK_OP_SEND_IMM | 1u << RK_OP_WRITE_IMM)

/* rk_post when the fast path below declines: the chain body with its checks. */
static __attribute__((noinline)) int post_one_slow(struct rk_conn *c, const struct rk_wr *w,
						   struct rk_error *err)
{
	int r = post_chain(c, w, 1, err);

	return r == 1 ? 0 : r;
}

/*
 * One WR, the latency path: what post_chain() does for n = 1, with a
 * table for the opcode and no loop, so that it is a few dozen
 * instructions around the provider's call. A refusal (not connected,
 * queue full, unknown op) is left to post_one_slow(), which says why.
 */
int rk_post(struct rk_conn *c, const struct rk_wr *w, struct rk_error *err)
{
	struct ibv_send_wr *wr = c->wrs, *bad = NULL;
	struct ibv_sge *sge = c->sges;
	uint64_t head = c->slots.sq_head;
	unsigned outstanding = (unsigned)(head - c->slots.sq_tail) + 1;
	unsigned op = (unsigned)w->op, flags = 0;
	uint32_t run = c->unsignaled_run;
	int r;

	if (__builtin_expect(
		c->state != RK_CONN_CONNECTED || outstanding > c->sq_depth || op > RK_OP_READ, 0))
		return post_one_slow(c, w, err);
	wr->opcode = op_code[op];
	sge->addr = (uintptr_t)w->addr;
	sge->length = w->len;
	sge->lkey = w->lkey;
	wr->sg_list = sge;
	wr->num_sge = w->len ? 1 : 0;
	wr->next = NULL;
	wr->wr_id = head;
	if (op != RK_OP_READ && w->len && w->len <= c->max_inline && !(w->flags & RK_WR_NO_INLINE))
		flags |= IBV_SEND_INLINE;
	if (w->flags & RK_WR_FENCE)
		flags |= IBV_SEND_FENCE;
	if ((w->flags & RK_WR_SIGNALED) || run + 1 >= c->signal_every ||
	    outstanding + c->signal_every > c->sq_depth) {
		flags |= IBV_SEND_SIGNALED;
		run = 0;
	} else {
		run++;
	}
	wr->send_flags = flags;
	wr->imm_data = (OP_HAS_IMM >> op) & 1 ? htonl(w->imm) : 0;
	wr->wr.rdma.remote_addr = w->remote_addr;
	wr->wr.rdma.rkey = w->rkey;
	c->slots.sq_ids[head & c->slots.sq_mask] = w->wr_id;
	r = ibv_post_send(c->qp, wr, &bad);
	if (__builtin_expect(r, 0)) {
		r = post_failed(c, w, 1, r, bad, err);
		return r == 1 ? 0 : r;
	}
	c->slots.sq_head = head + 1;
	c->unsignaled_run = run;
	return 0;
}

int rk_post_recv(struct rk_conn *c, void *addr, uint32_t len, uint32_t lkey, uint64_t wr_id,
		 struct rk_error *err)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr = {
	    .wr_id = RK_RECV_TAG | c->slots.rq_head, .sg_list = &sge, .num_sge = len ? 1 : 0};
	struct ibv_recv_wr *bad;
	int r;

	if (c->state == RK_CONN_ERROR || c->state == RK_CONN_DISCONNECTED)
		return not_connected(c, err);
	if (!rq_room(c))
		return rk__err_set(err, ENOBUFS, "rk_post_recv", "all %u receive slots posted",
				   c->rq_depth);
	c->slots.rq_ids[c->slots.rq_head & c->slots.rq_mask] = wr_id;
	r = ibv_post_recv(c->qp, &wr, &bad);
	if (r) {
		r = rk__err_ret(err, r, "ibv_post_recv", "%u bytes", len);
		rk__err_set_qp(err, c->qp->qp_num);
		return r;
	}
	c->slots.rq_head++;
	return 0;
}

/* Receives chained per ibv_post_recv: a stack array, no scratch in the connection. */
#define RECV_CHAIN 32

/*
 * What a batch of receives costs beside the provider: per receive its WR
 * and SGE written, its sequence number and the caller's id in its slot.
 * The slot array and mask are read once into locals: a store through the
 * slot array could otherwise alias them, and they would be read again for
 * every receive.
 */
int rk_post_recv_list(struct rk_conn *c, const struct rk_recv *rs, unsigned n, struct rk_error *err)
{
	struct ibv_sge sge[RECV_CHAIN];
	struct ibv_recv_wr wr[RECV_CHAIN], *bad;
	uint64_t *const ids = c->slots.rq_ids;
	const uint64_t mask = c->slots.rq_mask;
	unsigned done = 0;
	int r;

	if (c->state == RK_CONN_ERROR || c->state == RK_CONN_DISCONNECTED)
		return not_connected(c, err);
	if (n > rq_room(c))
		return rk__err_set(err, ENOBUFS, "rk_post_recv_list",
				   "%u receives, %u free receive slots of %u", n, rq_room(c),
				   c->rq_depth);
	while (done < n) {
		const unsigned k = n - done < RECV_CHAIN ? n - done : RECV_CHAIN;
		const uint64_t head = c->slots.rq_head;
		const struct rk_recv *x = &rs[done];

		for (unsigned i = 0; i < k; i++, x++) {
			sge[i].addr = (uintptr_t)x->addr;
			sge[i].length = x->len;
			sge[i].lkey = x->lkey;
			wr[i].wr_id = RK_RECV_TAG | (head + i);
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = x->len != 0;
			wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
			ids[(head + i) & mask] = x->wr_id;
		}
		bad = NULL;
		r = ibv_post_recv(c->qp, wr, &bad);
		if (r) {
			unsigned posted = bad >= wr && bad < wr + k ? (unsigned)(bad - wr) : 0;

			c->slots.rq_head += posted;
			done += posted;
			r = rk__err_ret(err, r, "ibv_post_recv", "receive %u of %u", done, n);
			rk__err_set_qp(err, c->qp->qp_num);
			return done ? (int)done : r;
		}
		c->slots.rq_head = head + k;
		done += k;
	}
	return (int)n;
}

int rk__post_verbs(struct rk_conn *c, struct ibv_send_wr *wr, uint64_t wr_id, struct rk_error *err)
{
	struct ibv_send_wr *bad = NULL;
	int r;

	if (c->state != RK_CONN_CONNECTED || !sq_room(c))
		return post_refused(c, 1, err);
	wr->wr_id = c->slots.sq_head;
	wr->next = NULL;
	wr->send_flags |= IBV_SEND_SIGNALED;
	c->slots.sq_ids[c->slots.sq_head & c->slots.sq_mask] = wr_id;
	r = ibv_post_send(c->qp, wr, &bad);
	if (r) {
		r = rk__err_ret(err, r, "ibv_post_send", "opcode %d", (int)wr->opcode);
		rk__err_set_qp(err, c->qp->qp_num);
		return r;
	}
	c->slots.sq_head++;
	c->unsignaled_run = 0;
	return 0;
}

/*
 * A prepared chain (post.h): the verbs WRs and their SGEs, built once. Per
 * post only wr_id and send_flags are written: @flags keeps each WR's flags
 * as prepared (inline, fence, and signaled when asked for at prepare time),
 * the signaled bit the connection's policy adds is ORed in at each post.
 * One allocation: the WRs, then the SGEs, then the flags.
 */
struct rk_prepared {
	struct rk_conn *conn;
	unsigned n;
	uint32_t run_before; /* the connection's unsignaled run before the last post */
	unsigned flags0;     /* flags[0], beside the fields a post of one reads */
	struct ibv_sge *sges;
	unsigned *flags;
	struct ibv_send_wr wrs[];
};

int rk_prepare(struct rk_conn *c, const struct rk_wr *wrs, unsigned n, struct rk_error *err,
	       struct rk_prepared **out)
{
	struct rk_prepared *p;

	*out = NULL;
	if (!c->qp)
		return rk__err_set(err, EINVAL, "rk_prepare", "the connection has no QP yet");
	if (!n || n > c->sq_depth)
		return rk__err_set(err, EINVAL, "rk_prepare", "%u WRs (1 to the send queue's %u)",
				   n, c->sq_depth);
	for (unsigned i = 0; i < n; i++)
		if ((unsigned)wrs[i].op > RK_OP_READ)
			return rk__err_set(err, EINVAL, "rk_prepare", "WR %u: unknown op %d", i,
					   (int)wrs[i].op);
	p = calloc(1, sizeof(*p) + n * (sizeof(p->wrs[0]) + sizeof(p->sges[0]) + sizeof(unsigned)));
	if (!p)
		return rk__err_set(err, ENOMEM, "rk_prepare", "%u WRs", n);
	p->conn = c;
	p->n = n;
	p->sges = (struct ibv_sge *)(p->wrs + n);
	p->flags = (unsigned *)(p->sges + n);
	for (unsigned i = 0; i < n; i++) {
		const struct rk_wr *w = &wrs[i];
		struct ibv_send_wr *wr = &p->wrs[i];
		unsigned op = (unsigned)w->op, f = 0;

		p->sges[i] =
		    (struct ibv_sge){.addr = (uintptr_t)w->addr, .length = w->len, .lkey = w->lkey};
		wr->sg_list = &p->sges[i];
		wr->num_sge = w->len ? 1 : 0;
		wr->opcode = op_code[op];
		wr->next = i + 1 < n ? &p->wrs[i + 1] : NULL;
		wr->imm_data = (OP_HAS_IMM >> op) & 1 ? htonl(w->imm) : 0;
		wr->wr.rdma.remote_addr = w->remote_addr;
		wr->wr.rdma.rkey = w->rkey;
		if (w->op != RK_OP_READ && w->len && w->len <= c->max_inline &&
		    !(w->flags & RK_WR_NO_INLINE))
			f |= IBV_SEND_INLINE;
		if (w->flags & RK_WR_FENCE)
			f |= IBV_SEND_FENCE;
		/* A connection that signals every WR (signal_every 1) does so from here on. */
		if ((w->flags & RK_WR_SIGNALED) || c->signal_every <= 1)
			f |= IBV_SEND_SIGNALED;
		p->flags[i] = f;
		wr->send_flags = f; /* a chain of one prepared signaled keeps these */
	}
	p->flags0 = p->flags[0];
	*out = p;
	return 0;
}

int rk_prepared_set_addr(struct rk_prepared *p, unsigned i, void *addr, uint64_t remote_addr)
{
	if (i >= p->n)
		return -EINVAL;
	p->sges[i].addr = (uintptr_t)addr;
	p->wrs[i].wr.rdma.remote_addr = remote_addr;
	return 0;
}

void rk_prepared_free(struct rk_prepared *p)
{
	free(p);
}

/*
 * The error side of a chain of verbs WRs (@wrs, @n long) the provider
 * refused at @bad: as post_failed(), for rk_post_prepared() and
 * rk__post_built().
 */
static __attribute__((noinline, cold)) int chain_failed(struct rk_conn *c,
							const struct ibv_send_wr *wrs, unsigned n,
							int r, const struct ibv_send_wr *bad,
							struct rk_error *err)
{
	unsigned posted = bad >= wrs && bad < wrs + n ? (unsigned)(bad - wrs) : 0;
	const struct ibv_send_wr *at = &wrs[posted < n ? posted : 0];

	for (unsigned i = 0; i < posted; i++)
		c->unsignaled_run =
		    (wrs[i].send_flags & IBV_SEND_SIGNALED) ? 0 : c->unsignaled_run + 1;
	c->slots.sq_head += posted;
	rk__err_ret(err, r, "ibv_post_send", "WR %u of %u (opcode %d, %u bytes)", posted, n,
		    (int)at->opcode, at->num_sge ? at->sg_list[0].length : 0);
	rk__err_set_qp(err, c->qp->qp_num);
	return posted ? (int)posted : (r > 0 ? -r : -EIO);
}

/* The error side of rk_post_prepared(): undo its count, then as post_failed(). */
static __attribute__((noinline, cold)) int
prepared_failed(struct rk_prepared *p, int r, struct ibv_send_wr *bad, struct rk_error *err)
{
	struct rk_conn *c = p->conn;

	c->slots.sq_head -= p->n;
	c->unsignaled_run = p->run_before;
	return chain_failed(c, p->wrs, p->n, r, bad, err);
}

/*
 * The signaling rule of post_chain(), on prepared flags: a WR is signaled
 * when prepared so, every signal_every-th, and the last one also when
 * asked or when the queue would otherwise fill with unsignaled WRs.
 */
static __attribute__((noinline)) void prepared_chain(struct rk_prepared *p, struct rk_conn *c,
						     uint64_t head, uint64_t wr_id, unsigned flags,
						     unsigned outstanding)
{
	const uint64_t mask = c->slots.sq_mask;
	const unsigned last = p->n - 1;
	const uint32_t every = c->signal_every;
	uint64_t *ids = c->slots.sq_ids;
	uint32_t run = c->unsignaled_run;
	unsigned f, i;

	for (i = 0; i < last; i++) {
		f = p->flags[i];
		if ((f & IBV_SEND_SIGNALED) || ++run >= every) {
			f |= IBV_SEND_SIGNALED;
			run = 0;
		}
		p->wrs[i].send_flags = f;
		p->wrs[i].wr_id = head + i;
		ids[(head + i) & mask] = wr_id + i;
	}
	f = p->flags[last];
	if ((f & IBV_SEND_SIGNALED) || (flags & RK_WR_SIGNALED) || ++run >= every ||
	    outstanding + every > c->sq_depth) {
		f |= IBV_SEND_SIGNALED;
		run = 0;
	}
	p->wrs[last].send_flags = f;
	p->wrs[last].wr_id = head + last;
	ids[(head + last) & mask] = wr_id + last;
	c->unsignaled_run = run;
}

/*
 * What the error side needs after the provider's call, in memory: its
 * address goes to the provider with @bad, so the compiler reads them back
 * after the call instead of keeping them in registers that would have to
 * be saved and restored on every post.
 */
struct prepared_call {
	struct ibv_send_wr *bad;
	struct rk_prepared *p;
	struct rk_error *err;
};

/*
 * The connection's signaling rule for one WR not prepared signaled: the
 * signal_every-th is, and so is one posted into the queue's last
 * signal_every free slots. Returns IBV_SEND_SIGNALED or 0, the new run in
 * *@next. Inline: a separate block keeps the signaled path short.
 */
static inline __attribute__((always_inline)) unsigned
signal_rule(const struct rk_conn *c, uint32_t run, unsigned outstanding, uint32_t *next)
{
	const uint32_t every = c->signal_every;

	if (run + 1 >= every || outstanding + every > c->sq_depth) {
		*next = 0;
		return IBV_SEND_SIGNALED;
	}
	*next = run + 1;
	return 0;
}

/* rk_post_prepared() of a chain of more than one WR. */
static __attribute__((noinline)) int post_prepared_chain(struct rk_prepared *p, uint64_t wr_id,
							 unsigned flags, struct rk_error *err)
{
	struct rk_conn *c = p->conn;
	struct ibv_send_wr *bad = NULL;
	const uint64_t head = c->slots.sq_head;
	const unsigned n = p->n;
	const unsigned outstanding = (unsigned)(head - c->slots.sq_tail) + n;
	int r;

	if (c->state != RK_CONN_CONNECTED || outstanding > c->sq_depth)
		return post_refused(c, n, err);
	p->run_before = c->unsignaled_run;
	prepared_chain(p, c, head, wr_id, flags, outstanding);
	c->slots.sq_head = head + n;
	r = ibv_post_send(c->qp, p->wrs, &bad);
	if (__builtin_expect(r, 0))
		return prepared_failed(p, r, bad, err);
	return (int)n;
}

/*
 * rk_post_prepared() when its fast path does not apply: a chain of more
 * than one WR, or a refusal (not connected, or no room).
 */
static __attribute__((noinline)) int post_prepared_other(struct rk_prepared *p, uint64_t wr_id,
							 unsigned flags, struct rk_error *err)
{
	if (p->n != 1)
		return post_prepared_chain(p, wr_id, flags, err);
	return post_refused(p->conn, 1, err);
}

/*
 * A chain of one whose WR was not prepared signaled: the flag asked for
 * or the connection's rule; the connection's run moves.
 */
static inline __attribute__((always_inline)) unsigned prepared_signal(struct rk_conn *c, unsigned f,
								      unsigned flags, uint64_t head)
{
	const uint32_t run = c->unsignaled_run;
	uint32_t next = 0;

	if (flags & RK_WR_SIGNALED)
		f |= IBV_SEND_SIGNALED;
	else
		f |= signal_rule(c, run, (unsigned)(head - c->slots.sq_tail) + 1, &next);
	c->unsignaled_run = next;
	return f;
}

/*
 * The connection's count is moved before the provider's call and moved
 * back if it refuses (prepared_failed): no count is kept in a register
 * across the call. A chain of one, the latency case, is this function;
 * longer chains and refusals go to post_prepared_other() after one
 * branch. What the error side needs after the call is in memory beside
 * @bad, whose address the provider gets: the compiler reads it back
 * after the call instead of keeping it in registers that every post would
 * save and restore. A WR prepared signaled (asked for, or a connection
 * with signal_every 1) skips the signaling rule, the caller's flags and
 * the store of its send flags (rk_prepare wrote them): about 40
 * instructions of its own per post (gcc 12, -O2, callgrind), where
 * rk_post takes 88. Declared inline: with link-time optimization a
 * program linked with the static library (rk, the tests) has it inlined
 * into its loops, no call and no arguments to move (the shared library
 * keeps the call: its exported functions may be interposed).
 */
inline int rk_post_prepared(struct rk_prepared *p, uint64_t wr_id, unsigned flags,
			    struct rk_error *err)
{
	struct prepared_call call;
	struct rk_conn *c = p->conn;
	const uint64_t head = c->slots.sq_head;
	unsigned f = p->flags0;
	int r;

	/* outstanding + 1 > depth as outstanding >= depth: one compare. */
	if (__builtin_expect(p->n != 1 || c->state != RK_CONN_CONNECTED ||
				 (unsigned)(head - c->slots.sq_tail) >= c->sq_depth,
			     0))
		return post_prepared_other(p, wr_id, flags, err);
	call.bad = NULL;
	call.p = p;
	call.err = err;
	c->slots.sq_ids[head & c->slots.sq_mask] = wr_id;
	p->wrs[0].wr_id = head;
	c->slots.sq_head = head + 1;
	p->run_before = c->unsignaled_run;
	if (__builtin_expect(f & IBV_SEND_SIGNALED, 1)) {
		c->unsignaled_run = 0;
	} else {
		f = prepared_signal(c, f, flags, head);
		p->wrs[0].send_flags = f;
	}
	r = ibv_post_send(c->qp, p->wrs, &call.bad);
	if (__builtin_expect(r, 0))
		return prepared_failed(call.p, r, call.bad, call.err);
	return 1;
}

/*
 * A chain the caller built in the scratch WRs: each WR's wr_id (the
 * caller's) goes to its slot and the sequence number takes its place; the
 * signaling rule is post_chain()'s.
 */
int rk__post_built(struct rk_conn *c, unsigned n, struct rk_error *err)
{
	struct ibv_send_wr *wrs = c->wrs, *bad = NULL;
	const uint64_t head = c->slots.sq_head, mask = c->slots.sq_mask;
	const uint32_t every = c->signal_every;
	unsigned outstanding;
	uint32_t run = c->unsignaled_run;
	int r;

	if (!n)
		return 0;
	if (c->state != RK_CONN_CONNECTED || n > sq_room(c))
		return post_refused(c, n, err);
	outstanding = (unsigned)(head - c->slots.sq_tail) + n;
	for (unsigned i = 0; i < n; i++) {
		struct ibv_send_wr *wr = &wrs[i];

		if ((wr->send_flags & IBV_SEND_SIGNALED) || ++run >= every ||
		    (i == n - 1 && outstanding + every > c->sq_depth)) {
			wr->send_flags |= IBV_SEND_SIGNALED;
			run = 0;
		}
		c->slots.sq_ids[(head + i) & mask] = wr->wr_id;
		wr->wr_id = head + i;
		wr->next = i + 1 < n ? &wrs[i + 1] : NULL;
	}
	r = ibv_post_send(c->qp, wrs, &bad);
	if (r)
		return chain_failed(c, wrs, n, r, bad, err);
	c->slots.sq_head = head + n;
	c->unsignaled_run = run;
	return (int)n;
}

/*
 * One WR the caller keeps built (rk_internal.h): rk_post_prepared's chain
 * of one, with the caller's verbs WR and flags. The counts move after the
 * provider took it, as rk_post's. Declared inline as rk_post_prepared:
 * with link-time optimization the RPC's call and answer paths take it
 * with no call (about 15 instructions a post: the frame, the arguments).
 */
inline int rk__post_kept(struct rk_conn *c, struct ibv_send_wr *wr, uint64_t wr_id,
			 unsigned send_flags, struct rk_error *err)
{
	struct ibv_send_wr *bad = NULL;
	const uint64_t head = c->slots.sq_head;
	const unsigned outstanding = (unsigned)(head - c->slots.sq_tail) + 1;
	uint32_t run = c->unsignaled_run + 1;
	int r;

	if (__builtin_expect(c->state != RK_CONN_CONNECTED || outstanding > c->sq_depth, 0))
		return post_refused(c, 1, err);
	if ((send_flags & IBV_SEND_SIGNALED) || run >= c->signal_every ||
	    outstanding + c->signal_every > c->sq_depth) {
		send_flags |= IBV_SEND_SIGNALED;
		run = 0;
	}
	wr->send_flags = send_flags;
	wr->wr_id = head;
	c->slots.sq_ids[head & c->slots.sq_mask] = wr_id;
	r = ibv_post_send(c->qp, wr, &bad);
	if (__builtin_expect(r, 0))
		return chain_failed(c, wr, 1, r, bad, err);
	c->slots.sq_head = head + 1;
	c->unsignaled_run = run;
	return 0;
}
