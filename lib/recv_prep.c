/*
 * recv_prep.c - prepared receives (post.h): receive WRs and their SGEs
 * built once, posted again and again by naming which of them go.
 *
 * A post writes per receive only what changes: the verbs wr_id (the
 * sequence number the CQ layer checks against the connection's window,
 * with RK_RECV_TAG) and the caller's id into its slot. The WRs are kept
 * linked in order, the last one's next NULL; a post of a range cuts the
 * chain after its last receive (and closes the ring at the end for a range
 * that wraps) and puts the links back after the provider's call. A post of
 * a list links the named receives in its order and puts back the links it
 * changed, so both kinds may be mixed on one chain.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rk_internal.h"

struct rk_recv_prepared {
	struct rk_conn *conn;
	unsigned n;
	uint32_t stamp;	      /* list posts so far: which receives the current one names */
	uint64_t *ids;	      /* the caller's wr_id of each receive */
	uint32_t *mark;	      /* the stamp of the list post that last named it */
	struct ibv_sge *sges; /* one per receive, n of them */
	struct ibv_recv_wr wrs[];
};

static inline unsigned room(const struct rk_conn *c)
{
	return c->rq_depth - (unsigned)(c->slots.rq_head - c->slots.rq_tail);
}

int rk_prepare_recv(struct rk_conn *c, const struct rk_recv *rs, unsigned n, struct rk_error *err,
		    struct rk_recv_prepared **out)
{
	struct rk_recv_prepared *p;
	size_t each = sizeof(p->wrs[0]) + sizeof(*p->sges) + sizeof(*p->ids) + sizeof(*p->mark);

	*out = NULL;
	if (!c->qp)
		return rk__err_set(err, EINVAL, "rk_prepare_recv", "the connection has no QP yet");
	if (!n || n > c->rq_depth)
		return rk__err_set(err, EINVAL, "rk_prepare_recv",
				   "%u receives (1 to the receive queue's %u)", n, c->rq_depth);
	p = calloc(1, sizeof(*p) + n * each);
	if (!p)
		return rk__err_set(err, ENOMEM, "rk_prepare_recv", "%u receives", n);
	p->conn = c;
	p->n = n;
	/* uint64_t first after the WRs (8-aligned), then the SGEs, then the marks. */
	p->ids = (uint64_t *)(p->wrs + n);
	p->sges = (struct ibv_sge *)(p->ids + n);
	p->mark = (uint32_t *)(p->sges + n);
	for (unsigned i = 0; i < n; i++) {
		p->sges[i] = (struct ibv_sge){
		    .addr = (uintptr_t)rs[i].addr, .length = rs[i].len, .lkey = rs[i].lkey};
		p->wrs[i].sg_list = &p->sges[i];
		p->wrs[i].num_sge = rs[i].len != 0;
		p->wrs[i].next = i + 1 < n ? &p->wrs[i + 1] : NULL;
		p->ids[i] = rs[i].wr_id;
	}
	*out = p;
	return 0;
}

void rk_recv_prepared_free(struct rk_recv_prepared *p)
{
	free(p);
}

/* Why a post is refused: the connection, the arguments, or the room. */
static __attribute__((noinline, cold)) int refused(const struct rk_recv_prepared *p, unsigned first,
						   unsigned k, struct rk_error *err)
{
	const struct rk_conn *c = p->conn;

	if (c->state == RK_CONN_ERROR || c->state == RK_CONN_DISCONNECTED)
		return rk__err_set(err, ENOTCONN, "rk_post_recv_prepared", "connection %s",
				   rk_conn_state_str(c->state));
	if (first >= p->n || k > p->n)
		return rk__err_set(err, EINVAL, "rk_post_recv_prepared",
				   "%u receives from %u of a chain of %u", k, first, p->n);
	return rk__err_set(err, ENOBUFS, "rk_post_recv_prepared",
			   "%u receives, %u free receive slots of %u", k, room(c), c->rq_depth);
}

/* The provider refused the receive at @posted of the post: count those before it. */
static __attribute__((noinline, cold)) int failed(struct rk_conn *c, unsigned posted, unsigned k,
						  int r, struct rk_error *err)
{
	c->slots.rq_head += posted;
	r = rk__err_ret(err, r, "ibv_post_recv", "receive %u of %u (prepared)", posted, k);
	rk__err_set_qp(err, c->qp->qp_num);
	return posted ? (int)posted : r;
}

/*
 * Receives @w[0..k) get sequence numbers from @seq (RK_RECV_TAG set: the
 * mask keeps it out of the slot's index) and the caller's ids @id[0..k)
 * go to their slots. Pointers walked and unrolled by two: the loop's own
 * count and compare are most of a receive's instructions otherwise.
 */
static inline __attribute__((always_inline)) void stamp(struct ibv_recv_wr *w, const uint64_t *id,
							unsigned k, uint64_t seq, uint64_t *ids,
							uint64_t mask)
{
	struct ibv_recv_wr *const end = w + k;

	if (k & 1) {
		w->wr_id = seq;
		ids[seq & mask] = *id;
		w++, id++, seq++;
	}
	for (; w < end; w += 2, id += 2, seq += 2) {
		w[0].wr_id = seq;
		ids[seq & mask] = id[0];
		w[1].wr_id = seq + 1;
		ids[(seq + 1) & mask] = id[1];
	}
}

/*
 * The slot array, mask and head are read once into locals (a store through
 * the slot array could alias them). A range that wraps is two stamps
 * rather than a wrap test per receive.
 */
int rk_post_recv_prepared(struct rk_recv_prepared *p, unsigned first, unsigned k,
			  struct rk_error *err)
{
	struct rk_conn *const c = p->conn;
	struct ibv_recv_wr *const wrs = p->wrs, *bad = NULL, *last, *keep;
	const uint64_t *const pid = p->ids;
	uint64_t *const ids = c->slots.rq_ids;
	const uint64_t mask = c->slots.rq_mask, head = c->slots.rq_head;
	const unsigned n = p->n;
	unsigned k1;
	int r;

	if (__builtin_expect(c->state == RK_CONN_ERROR || c->state == RK_CONN_DISCONNECTED ||
				 first >= n || k > n || k > room(c),
			     0))
		return refused(p, first, k, err);
	if (!k)
		return 0;
	k1 = n - first < k ? n - first : k;
	stamp(&wrs[first], &pid[first], k1, RK_RECV_TAG | head, ids, mask);
	if (k1 < k)
		stamp(wrs, pid, k - k1, RK_RECV_TAG | (head + k1), ids, mask);
	/* The chain ends at the range's last receive; a range that wraps goes on at 0. */
	last = &wrs[k1 < k ? k - k1 - 1 : first + k - 1];
	keep = last->next;
	last->next = NULL;
	if (k1 < k)
		wrs[n - 1].next = wrs;
	r = ibv_post_recv(c->qp, &wrs[first], &bad);
	if (k1 < k)
		wrs[n - 1].next = NULL;
	last->next = keep;
	if (__builtin_expect(r, 0)) {
		unsigned at = bad >= wrs && bad < wrs + n ? (unsigned)(bad - wrs) : first;
		unsigned posted = at >= first ? at - first : n - first + at;

		return failed(c, posted < k ? posted : 0, k, r, err);
	}
	c->slots.rq_head = head + k;
	return (int)k;
}

/* Put back the links of the receives @idx[0..k) names. */
static void relink(struct rk_recv_prepared *p, const uint32_t *idx, unsigned k)
{
	for (unsigned j = 0; j < k; j++) {
		unsigned i = idx[j];

		p->wrs[i].next = i + 1 < p->n ? &p->wrs[i + 1] : NULL;
	}
}

int rk_post_recv_prepared_list(struct rk_recv_prepared *p, const uint32_t *idx, unsigned k,
			       struct rk_error *err)
{
	struct rk_conn *const c = p->conn;
	struct ibv_recv_wr *const wrs = p->wrs, *bad = NULL;
	uint64_t *const ids = c->slots.rq_ids;
	const uint64_t mask = c->slots.rq_mask, head = c->slots.rq_head;
	uint32_t stamp;
	int r;

	if (c->state == RK_CONN_ERROR || c->state == RK_CONN_DISCONNECTED || k > p->n ||
	    k > room(c))
		return refused(p, 0, k, err);
	if (!k)
		return 0;
	if (!++p->stamp) { /* after 2^32 posts: forget the old marks */
		memset(p->mark, 0, p->n * sizeof(*p->mark));
		p->stamp = 1;
	}
	stamp = p->stamp;
	for (unsigned j = 0; j < k; j++) {
		uint32_t i = idx[j];

		if (i >= p->n || p->mark[i] == stamp) {
			relink(p, idx, j);
			return rk__err_set(err, EINVAL, "rk_post_recv_prepared_list",
					   "receive %u of %u: index %u %s", j, k, i,
					   i >= p->n ? "past the chain" : "named twice");
		}
		p->mark[i] = stamp;
		wrs[i].wr_id = RK_RECV_TAG | (head + j);
		ids[(head + j) & mask] = p->ids[i];
		wrs[i].next = j + 1 < k ? &wrs[idx[j + 1] < p->n ? idx[j + 1] : 0] : NULL;
	}
	r = ibv_post_recv(c->qp, &wrs[idx[0]], &bad);
	relink(p, idx, k);
	if (r) {
		unsigned posted = 0;

		while (posted < k && &wrs[idx[posted]] != bad)
			posted++;
		return failed(c, posted < k ? posted : 0, k, r, err);
	}
	c->slots.rq_head = head + k;
	return (int)k;
}
