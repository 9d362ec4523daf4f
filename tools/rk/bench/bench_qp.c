/*
 * bench_qp.c - a run's queue pairs connected: their options (depths,
 * signaling, inline, RNR timer, READs in flight), then either QP
 * coordinates exchanged as OOB messages on the control channel (--oob) or
 * rdma_cm, the client connecting each QP with the session token in its
 * hello and the server accepting only those.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench_conn.h"
#include "bench_xfer.h"
#include "cli.h"
#include "common/deadline.h"

/* Keep receives posted before the peer can send (rk_conn_opts.prepare). */
static int prepare_receives(struct rk_conn *conn, void *arg)
{
	struct bench_qp *q = arg;
	struct bench_ctx *c = q->ctx;
	uint32_t len = c->p->op == BENCH_OP_SEND ? c->p->size_max : 0;

	if (!c->receives)
		return 0;
	for (uint32_t i = 0; i < c->p->rx_depth; i++) {
		int r = rk_post_recv(conn, q->rx, len, c->lkey, q->index, NULL);

		if (r)
			return r;
	}
	return 0;
}

int bench_prepare_recv(struct bench_ctx *c, struct bench_qp *q, unsigned n, struct rk_error *err)
{
	struct rk_recv rs[BENCH_PREP_RECV_MAX];
	uint32_t len = c->p->op == BENCH_OP_SEND ? c->p->size_max : 0;
	uint32_t depth = rk_conn_rq_depth(q->conn);

	if (n > BENCH_PREP_RECV_MAX)
		n = BENCH_PREP_RECV_MAX;
	if (n > depth)
		n = depth;
	for (unsigned i = 0; i < n; i++)
		rs[i] =
		    (struct rk_recv){.addr = q->rx, .len = len, .lkey = c->lkey, .wr_id = q->index};
	return rk_prepare_recv(q->conn, rs, n, err, &q->rprep);
}

uint8_t bench_rd_atomic(const struct rk_device_info *di, uint64_t want)
{
	if (want > di->max_qp_rd_atom)
		want = di->max_qp_rd_atom;
	if (want > di->max_qp_init_rd_atom)
		want = di->max_qp_init_rd_atom;
	if (want > UINT8_MAX)
		want = UINT8_MAX;
	return (uint8_t)(want ? want : 1);
}

static void conn_opts(struct bench_ctx *c, struct bench_qp *q, struct rk_conn_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->sq_depth = bench_sq_depth(c->p);
	o->rq_depth = c->receives ? c->p->rx_depth : 1;
	o->max_inline = c->p->inline_size;
	o->signal_every = bench_signal_every(c->p);
	o->cq = c->cq;
	o->max_mtu = c->l->mtu ? rk_mtu_from_bytes(c->l->mtu) : 0;
	/*
	 * A sender that outruns the receiver's reposting gets an RNR NAK and
	 * pauses min_rnr_timer before retrying: 0.64 ms (code 12, as perftest)
	 * instead of the library's 10 ms, or small SENDs run at RNR speed.
	 */
	o->min_rnr_timer = 12;
	/*
	 * READs in flight are capped by the QP's rd_atomic, not by tx-depth:
	 * the library's 16 would throttle a READ benchmark to 16 outstanding
	 * requests. Allow tx-depth, up to the device's limit (perftest's -o
	 * defaults to the device's limit too). The peer's side is negotiated
	 * by rdma_cm or clamped when the QP is connected.
	 */
	if (c->p->op == BENCH_OP_READ)
		o->max_rd_atomic = bench_rd_atomic(rk_device_get_info(c->dev), c->p->tx_depth);
	o->prepare = prepare_receives;
	o->prepare_arg = q;
	if (c->p->op == BENCH_OP_XFER)
		bench_xfer_conn_opts(c, o);
}

static int connect_oob(struct bench_ctx *c, struct bench_qp *q, struct rk_error *err)
{
	struct rk_conn_opts o;
	struct rk_oob_info mine, theirs;
	uint8_t buf[RK_OOB_MSG_LEN];
	struct bench_msg m;
	int r;

	conn_opts(c, q, &o);
	r = rk_conn_create(c->dev, &o, err, &q->conn);
	if (r)
		return r;
	rk_conn_local_info(q->conn, &mine);
	mine.app = q->index;
	r = rk_oob_encode(&mine, buf, sizeof(buf));
	if (r < 0)
		return bench_fail(err, -r, "rk_oob_encode: QP %u", q->index);
	r = bench_ctl_send(&c->ctl, BM_OOB, buf, RK_OOB_MSG_LEN, bench_step_ms(c), err);
	r = r ?: bench_ctl_expect(&c->ctl, BM_OOB, RK_OOB_MSG_LEN, &m, bench_step_ms(c), err);
	r = r ?: rk_oob_decode(m.data, m.len, &theirs, err);
	if (r)
		return r;
	if (theirs.app != q->index)
		return bench_fail(err, EPROTO, "the peer sent QP %u's coordinates for QP %u",
				  theirs.app, q->index);
	return rk_conn_connect(q->conn, &theirs, err);
}

static int connect_cm_client(struct bench_ctx *c, struct bench_qp *q, struct rk_error *err)
{
	struct rk_hello h = {
	    .app_id = BENCH_APP_ID, .app_arg = q->index, .token_len = BENCH_TOKEN_LEN};
	struct rk_cm_connect_opts o = {
	    .host = c->l->host, .port = c->l->port, .timeout_ms = bench_connect_ms(c), .hello = &h};

	const void *proof;
	size_t len;
	int r;

	memcpy(h.token, c->token, BENCH_TOKEN_LEN);
	conn_opts(c, q, &o.conn);
	r = rk_cm_connect(c->dev, &o, err, &q->conn);
	if (r || !c->l->pair_key)
		return r;
	proof = rk_conn_peer_data(q->conn, &len);
	if (!bench_server_proved(c, proof, len))
		return bench_fail(err, EACCES,
				  "the RDMA peer at %s port %s did not prove it is the peer of "
				  "this pair (a wrong key)",
				  c->l->host, c->l->port);
	return 0;
}

/* Accept num_qp requests carrying our client's token; anyone else is turned away. */
static int accept_cm(struct bench_ctx *c, struct rk_error *err)
{
	uint64_t deadline = cli_deadline_in(bench_connect_ms(c));

	while (c->nqp < c->p->num_qp) {
		struct rk_cm_request *req;
		const struct rk_hello *h;
		struct rk_conn_opts o;
		struct bench_qp *q;
		uint64_t now = cli_now_ns();
		int r;

		if (now >= deadline)
			return bench_fail(err, ETIMEDOUT, "%u of %u QPs connected after %d ms",
					  c->nqp, c->p->num_qp, bench_connect_ms(c));
		r = rk_listener_get_request(c->lis, cli_deadline_ms_left(deadline), err, &req);
		if (r)
			return r;
		h = rk_cm_request_hello(req);
		if (h->token_len != BENCH_TOKEN_LEN ||
		    !cli_equal_ct(h->token, c->token, BENCH_TOKEN_LEN) ||
		    h->app_arg >= c->p->num_qp || c->qps[h->app_arg].conn) {
			fprintf(stderr, "rk bench: turning away %s: not a QP of this run\n",
				rk_cm_request_peer(req));
			r = rk_cm_request_reject(req, RK_REJECT_TOKEN, "not a QP of this run", err);
			if (r)
				return r;
			continue;
		}
		q = &c->qps[h->app_arg];
		conn_opts(c, q, &o);
		r = rk_cm_request_accept(
		    req, &o, c->l->pair_key ? c->l->pair_key + BENCH_TOKEN_LEN : NULL,
		    c->l->pair_key ? BENCH_TOKEN_LEN : 0, bench_connect_ms(c), err, &q->conn);
		if (r)
			return r;
		c->nqp++;
	}
	return 0;
}

int bench_qps_connect(struct bench_ctx *c, struct rk_error *err)
{
	const struct bench_params *p = c->p;

	if (p->oob) {
		for (; c->nqp < p->num_qp; c->nqp++) {
			int r = connect_oob(c, &c->qps[c->nqp], err);

			if (r)
				return r;
		}
		return 0;
	}
	if (!c->is_client)
		return accept_cm(c, err);
	for (; c->nqp < p->num_qp; c->nqp++) {
		int r = connect_cm_client(c, &c->qps[c->nqp], err);

		if (r)
			return r;
	}
	return 0;
}
