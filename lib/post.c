/*
 * post.c - posting work requests: single, chained (one doorbell for many),
 * selective signaling that never overflows the send queue, and inline.
 */
#include <arpa/inet.h>
#include <errno.h>
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

unsigned rk_sq_room(const struct rk_conn *c)
{
	return c->sq_depth - (unsigned)(c->sq_head - c->sq_tail);
}

unsigned rk_rq_room(const struct rk_conn *c)
{
	return c->rq_depth - (unsigned)(c->rq_head - c->rq_tail);
}

static int not_connected(const struct rk_conn *c, struct rk_error *err)
{
	struct rk_error first;

	if (rk_conn_first_error(c, &first))
		return rk_err_set(err, ENOTCONN, "rk_post", "connection %s after: %s",
				  rk_conn_state_str(c->state), first.msg);
	return rk_err_set(err, ENOTCONN, "rk_post", "connection %s", rk_conn_state_str(c->state));
}

/*
 * Fill verbs WR @i of the chain from @w. The scratch WRs are zeroed once,
 * when the connection is made, and every field an RC work request uses is
 * written here, so there is no memset of the whole WR on each post: on a
 * small message's latency path every store counts (and under emulation a
 * 128-byte memset costs more than the rest of this function).
 */
static int build(struct rk_conn *c, unsigned i, const struct rk_wr *w, struct rk_error *err)
{
	struct ibv_send_wr *wr = &c->wrs[i];
	struct ibv_sge *sge = &c->sges[i];
	unsigned flags = 0;

	if (opcode(w->op, &wr->opcode))
		return rk_err_set(err, EINVAL, "rk_post", "unknown op %d", (int)w->op);
	sge->addr = (uintptr_t)w->addr;
	sge->length = w->len;
	sge->lkey = w->lkey;
	wr->sg_list = sge;
	wr->num_sge = w->len ? 1 : 0;
	wr->wr_id = c->sq_head + i;
	if (w->op != RK_OP_READ && w->len && w->len <= c->max_inline &&
	    !(w->flags & RK_WR_NO_INLINE))
		flags |= IBV_SEND_INLINE;
	if (w->flags & RK_WR_FENCE)
		flags |= IBV_SEND_FENCE;
	wr->send_flags = flags;
	wr->imm_data = w->op == RK_OP_SEND_IMM || w->op == RK_OP_WRITE_IMM ? htonl(w->imm) : 0;
	wr->wr.rdma.remote_addr = w->remote_addr;
	wr->wr.rdma.rkey = w->rkey;
	c->sq_ids[(c->sq_head + i) % c->sq_depth] = w->wr_id;
	return 0;
}

/*
 * Every signal_every-th WR is signaled, and so is the last of a post that
 * leaves less room than one signaling interval: otherwise the queue could
 * fill with unsignaled WRs that no completion will ever retire.
 */
static void signal_policy(struct rk_conn *c, const struct rk_wr *wrs, unsigned n)
{
	unsigned outstanding = (unsigned)(c->sq_head - c->sq_tail) + n;
	uint32_t run = c->unsignaled_run;

	for (unsigned i = 0; i < n; i++) {
		int sig = (wrs[i].flags & RK_WR_SIGNALED) || run + 1 >= c->signal_every;

		if (i == n - 1 && outstanding + c->signal_every > c->sq_depth)
			sig = 1;
		if (sig) {
			c->wrs[i].send_flags |= IBV_SEND_SIGNALED;
			run = 0;
		} else {
			run++;
		}
	}
}

int rk_post_list(struct rk_conn *c, const struct rk_wr *wrs, unsigned n, struct rk_error *err)
{
	struct ibv_send_wr *bad = NULL;
	unsigned posted;
	int r;

	if (n == 0)
		return 0;
	if (c->state != RK_CONN_CONNECTED)
		return not_connected(c, err);
	if (n > rk_sq_room(c))
		return rk_err_set(err, ENOBUFS, "rk_post", "%u WRs, %u free send slots of %u", n,
				  rk_sq_room(c), c->sq_depth);
	for (unsigned i = 0; i < n; i++) {
		r = build(c, i, &wrs[i], err);
		if (r)
			return r;
		c->wrs[i].next = i + 1 < n ? &c->wrs[i + 1] : NULL;
	}
	signal_policy(c, wrs, n);
	r = ibv_post_send(c->qp, c->wrs, &bad);
	posted = r ? (unsigned)(bad ? bad - c->wrs : 0) : n;
	for (unsigned i = 0; i < posted; i++)
		c->unsignaled_run =
		    (c->wrs[i].send_flags & IBV_SEND_SIGNALED) ? 0 : c->unsignaled_run + 1;
	c->sq_head += posted;
	if (r) {
		rk_err_ret(err, r, "ibv_post_send", "WR %u of %u (op %d, %u bytes)", posted, n,
			   (int)wrs[posted < n ? posted : 0].op, wrs[posted < n ? posted : 0].len);
		rk_err_set_qp(err, c->qp->qp_num);
		return posted ? (int)posted : (r > 0 ? -r : -EIO);
	}
	return (int)n;
}

int rk_post(struct rk_conn *c, const struct rk_wr *wr, struct rk_error *err)
{
	int r = rk_post_list(c, wr, 1, err);

	return r == 1 ? 0 : r;
}

int rk_post_recv(struct rk_conn *c, void *addr, uint32_t len, uint32_t lkey, uint64_t wr_id,
		 struct rk_error *err)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr = {
	    .wr_id = RK_RECV_TAG | c->rq_head, .sg_list = &sge, .num_sge = len ? 1 : 0};
	struct ibv_recv_wr *bad;
	int r;

	if (c->state == RK_CONN_ERROR || c->state == RK_CONN_DISCONNECTED)
		return not_connected(c, err);
	if (!rk_rq_room(c))
		return rk_err_set(err, ENOBUFS, "rk_post_recv", "all %u receive slots posted",
				  c->rq_depth);
	c->rq_ids[c->rq_head % c->rq_depth] = wr_id;
	r = ibv_post_recv(c->qp, &wr, &bad);
	if (r) {
		r = rk_err_ret(err, r, "ibv_post_recv", "%u bytes", len);
		rk_err_set_qp(err, c->qp->qp_num);
		return r;
	}
	c->rq_head++;
	return 0;
}
