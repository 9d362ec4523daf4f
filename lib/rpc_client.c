/*
 * rpc_client.c - the calling end of rpc.h: the connection, its call slots
 * and their buffers, the accessors, and the teardown. The call path is in
 * rpc_client_call.c, the answer path in rpc_client_answer.c, the lean
 * synchronous call's sleep in rpc_client_sleep.c (rpc_client_int.h has
 * what they share).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_client_int.h"

static int prepare(struct rk_conn *conn, void *arg)
{
	struct rk_rpc_client *cl = arg;

	return rk__rpc_cl_post_answer_recvs(conn, cl->window + RECV_BATCH, NULL);
}

static int alloc_slots(struct rk_rpc_client *cl, struct rk_error *err)
{
	cl->calls = calloc(cl->window, sizeof(*cl->calls));
	cl->free_slots = calloc(cl->window, sizeof(*cl->free_slots));
	if (!cl->calls || !cl->free_slots)
		return rk__err_set(err, ENOMEM, "rk_rpc_client_connect", NULL);
	for (uint32_t i = 0; i < cl->window; i++) {
		cl->free_slots[i] = (uint16_t)(cl->window - 1 - i);
		cl->calls[i].want = WANT_NONE;
	}
	cl->nfree = cl->window;
	for (unsigned k = 0; k < RECV_BATCH; k++) /* 0-byte receives: no SGE */
		cl->ans_rx[k].next = k + 1 < RECV_BATCH ? &cl->ans_rx[k + 1] : NULL;
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
	if (co.conn.cq) { /* every completion of its CQ is taken for one of its calls' */
		r = rk__err_set(err, EINVAL, "rk_rpc_client_connect",
				"an RPC client needs a CQ of its own: opts.conn->cq must be NULL");
		goto fail;
	}
	if (!co.conn.signal_every)
		co.conn.signal_every = SIGNAL_EVERY;
	if (co.conn.max_send_sge < 2) /* an inline request: the header, then the caller's body */
		co.conn.max_send_sge = 2;
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
	cl->cq = rk_conn_cq(cl->conn);
	cl->vcq = rk_cq_ibv(cl->cq);
	cl->busy = rk_cq_mode(cl->cq) == RK_WAIT_BUSY;
	cl->cm_fd = rk_conn_cm_fd(cl->conn);
	cl->req_buf = RK_RPC_REQ_HDR + cl->acc.req_inline;
	cl->resp_room = cl->acc.slot_size - RK_RPC_ANS_HDR;
	cl->max_inline = rk_conn_max_inline(cl->conn);
	cl->small_req = cl->acc.req_inline < cl->acc.max_msg ? cl->acc.req_inline : cl->acc.max_msg;
	cl->small_resp = cl->resp_room < cl->acc.max_msg ? cl->resp_room : cl->acc.max_msg;
	/*
	 * rk_rpc_call's lean path: busy or event mode (not adaptive: its spin
	 * before the sleep is the wait set's), a common call whose request
	 * goes inline.
	 */
	cl->lean = cl->max_inline < RK_RPC_REQ_HDR	 ? 0
		   : cl->busy				 ? LEAN_BUSY
		   : rk_cq_mode(cl->cq) == RK_WAIT_EVENT ? LEAN_SLEEP
							 : 0;
	cl->lean_req = cl->lean && cl->max_inline - RK_RPC_REQ_HDR < cl->small_req
			   ? cl->max_inline - RK_RPC_REQ_HDR
			   : cl->small_req;
	r = alloc_slots(cl, err);
	if (!r)
		r = rk_mr_alloc_pd(cl->pd, (size_t)cl->window * cl->acc.slot_size,
				   RK_ACCESS_REMOTE_WRITE, err, &cl->slots);
	if (!r)
		r = rk_mr_alloc_pd(cl->pd, (size_t)cl->window * cl->req_buf, RK_ACCESS_LOCAL, err,
				   &cl->reqs);
	if (!r) {
		cl->req_base = rk_mr_addr(cl->reqs);
		cl->slot_base = rk_mr_addr(cl->slots);
		cl->req_wr.opcode = IBV_WR_SEND;
		cl->req_wr.sg_list = &cl->req_sge;
		cl->req_wr.num_sge = 1;
		cl->req_sge.lkey = rk_mr_lkey(cl->reqs);
	}
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
		rk__rpc_cl_fail_all(cl, -ECONNRESET, &e);
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
