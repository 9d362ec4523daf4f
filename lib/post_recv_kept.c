/*
 * post_recv_kept.c - posting a chain of receive WRs the caller keeps built
 * (rk_internal.h). rk_post_recv_list() writes a verbs WR and its SGE per
 * receive on every post; an owner that posts the same buffers over and
 * over (a receive set) builds them once and only links them, so a post
 * writes no more than each WR's sequence number and the caller's id in
 * its slot. The completions are the CQ layer's as ever: the sequence
 * number is checked against the connection's window and translated back.
 * The public rk_post_recv_prepared_list (recv_prep.c) does the same for
 * any caller, so it checks each index and restores the chain's links
 * after the post: 16 instructions a receive more for a receive set, whose
 * own state byte already says which buffers may go (msgbuf.c).
 */
#include <errno.h>

#include "rk_internal.h"

int rk__post_recv_kept(struct rk_conn *c, struct ibv_recv_wr *chain, unsigned n,
		       struct rk_error *err)
{
	uint64_t *const ids = c->slots.rq_ids;
	const uint64_t mask = c->slots.rq_mask, head = c->slots.rq_head;
	struct ibv_recv_wr *wr = chain, *bad = NULL;
	unsigned k = 0;
	int r;

	if (!n)
		return 0;
	if (c->state == RK_CONN_ERROR || c->state == RK_CONN_DISCONNECTED)
		return rk__err_set(err, ENOTCONN, "rk_post_recv", "connection %s",
				   rk_conn_state_str(c->state));
	if (n > c->rq_depth - (unsigned)(head - c->slots.rq_tail))
		return rk__err_set(err, ENOBUFS, "rk_post_recv",
				   "%u receives, %u free receive slots of %u", n,
				   c->rq_depth - (unsigned)(head - c->slots.rq_tail), c->rq_depth);
	/* The caller's id to its slot, the sequence number in its place (the n first WRs). */
	for (; k < n && wr; k++, wr = wr->next) {
		ids[(head + k) & mask] = wr->wr_id;
		wr->wr_id = RK_RECV_TAG | (head + k);
	}
	if (k != n || wr)
		return rk__err_set(err, EINVAL, "rk_post_recv", "a chain of %s %u receives",
				   wr ? "more than" : "fewer than", n);
	r = ibv_post_recv(c->qp, chain, &bad);
	if (__builtin_expect(r, 0)) {
		/* Only the WRs before @bad are on the queue (none if it is not in the chain). */
		k = 0;
		for (wr = chain; wr && wr != bad; wr = wr->next)
			k++;
		k = wr ? k : 0;
		c->slots.rq_head = head + k;
		r = rk__err_ret(err, r, "ibv_post_recv", "receive %u of %u", k, n);
		rk__err_set_qp(err, c->qp->qp_num);
		return k ? (int)k : r;
	}
	c->slots.rq_head = head + n;
	return (int)n;
}
