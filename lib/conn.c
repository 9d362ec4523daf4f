/*
 * conn.c - a connection's life: options checked against the device, QP and
 * CQ creation, teardown in reverse order with flushed work drained.
 *
 * Failures reach a connection from below through hooks it registers: the
 * CQ calls slots.on_fail for a failed completion, the device calls
 * on_qp_fatal for a fatal async event. What rdma_cm adds (a QP on a CM id,
 * the disconnect handshake, the id's release) comes from above through
 * c->cm, set by the CM layer; this file never calls into cm_*.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>

#include "rk_internal.h"

#define DRAIN_MS 2000

static int check_range(struct rk_error *err, const char *what, unsigned v, unsigned lo, unsigned hi)
{
	if (v < lo || v > hi)
		return rk__err_set(err, EINVAL, "rk_conn_opts", "%s %u outside %u..%u", what, v, lo,
				   hi);
	return 0;
}

/* Fill defaults and check everything against the device before creating anything. */
static int resolve_opts(struct rk_device *dev, const struct rk_conn_opts *in,
			struct rk_conn_opts *o, struct rk_error *err)
{
	const struct rk_device_info *di = &dev->info;
	uint32_t rd_cap = di->max_qp_rd_atom < di->max_qp_init_rd_atom ? di->max_qp_rd_atom
								       : di->max_qp_init_rd_atom;
	int r = 0;

	*o = *in;
	o->sq_depth = o->sq_depth ? o->sq_depth : RK_DEF_DEPTH;
	o->rq_depth = o->rq_depth ? o->rq_depth : RK_DEF_DEPTH;
	o->max_send_sge = o->max_send_sge ? o->max_send_sge : 1;
	o->max_recv_sge = o->max_recv_sge ? o->max_recv_sge : 1;
	o->ack_timeout = o->ack_timeout ? o->ack_timeout : RK_DEF_ACK_TIMEOUT;
	o->retry_cnt = o->retry_cnt ? o->retry_cnt : RK_DEF_RETRY_CNT;
	o->rnr_retry = o->rnr_retry ? o->rnr_retry : RK_DEF_RNR_RETRY;
	o->min_rnr_timer = o->min_rnr_timer ? o->min_rnr_timer : RK_DEF_MIN_RNR_TIMER;
	if (!o->max_rd_atomic)
		o->max_rd_atomic = (uint8_t)(rd_cap < RK_DEF_RD_ATOMIC ? rd_cap : RK_DEF_RD_ATOMIC);
	if (!o->max_mtu || o->max_mtu > di->active_mtu)
		o->max_mtu = di->active_mtu;

	r = r ?: check_range(err, "sq_depth", o->sq_depth, 1, di->max_qp_wr);
	r = r ?: check_range(err, "rq_depth", o->rq_depth, 1, di->max_qp_wr);
	r = r ?: check_range(err, "max_send_sge", o->max_send_sge, 1, di->max_sge);
	r = r ?: check_range(err, "max_recv_sge", o->max_recv_sge, 1, di->max_sge);
	r = r ?: check_range(err, "ack_timeout", o->ack_timeout, 1, 31);
	r = r ?: check_range(err, "retry_cnt", o->retry_cnt, 1, 7);
	/* 7 means "retry forever": a receiver that never posts would hang us. */
	r = r ?: check_range(err, "rnr_retry", o->rnr_retry, 1, 6);
	r = r ?: check_range(err, "min_rnr_timer", o->min_rnr_timer, 1, 31);
	r = r ?: check_range(err, "max_rd_atomic", o->max_rd_atomic, 1, rd_cap ? rd_cap : 1);
	r = r ?: check_range(err, "max_mtu", o->max_mtu, IBV_MTU_256, IBV_MTU_4096);
	r = r ?: check_range(err, "wait_mode", o->wait_mode, RK_WAIT_BUSY, RK_WAIT_ADAPTIVE);
	if (r)
		return r;
	/* Leave room for the signaled WR that retires an unsignaled run. */
	if (o->signal_every < 1)
		o->signal_every = 1;
	if (o->signal_every > o->sq_depth / 2 && o->sq_depth > 1) {
		rk_dbg("signal_every %u lowered to %u (half the send queue)", o->signal_every,
		       o->sq_depth / 2);
		o->signal_every = o->sq_depth / 2;
	}
	return 0;
}

/* The CQ saw a failed completion on our QP: the connection keeps the first. */
static void conn_wc_failed(struct rk_cq_member *m, const struct ibv_wc *wc)
{
	struct rk_conn *c = (struct rk_conn *)((char *)m - offsetof(struct rk_conn, slots));
	struct rk_error e;

	if (c->first_errno)
		return;
	rk_error_from_wc(&e, wc);
	rk__conn_fail(c, RK_CONN_ERROR, &e);
}

/* The device saw a fatal async event on a QP we created (qp_context = c). */
static void conn_qp_fatal(void *qp_context, const struct rk_error *e)
{
	rk__conn_fail(qp_context, RK_CONN_ERROR, e);
}

/* The mask of the smallest power of two >= @depth (see struct rk_conn). */
static uint64_t ring_mask(uint32_t depth)
{
	uint64_t size = 1;

	while (size < depth)
		size <<= 1;
	return size - 1;
}

int rk__conn_alloc(struct rk_device *dev, const struct rk_conn_opts *opts, struct rk_error *err,
		   struct rk_conn **out)
{
	struct rk_conn_opts def = {0};
	struct rk_conn *c;
	int r;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		rk__err_set(err, ENOMEM, "rk_conn_create", NULL);
		return -ENOMEM;
	}
	c->dev = dev;
	dev->on_qp_fatal = conn_qp_fatal;
	c->slots.on_fail = conn_wc_failed;
	r = resolve_opts(dev, opts ? opts : &def, &c->opts, err);
	if (!r && c->opts.pd && c->opts.pd->dev != dev)
		r = rk__err_set(err, EINVAL, "rk_conn_create", "opts.pd belongs to another device");
	if (r) {
		free(c);
		return rk__fail(r);
	}
	c->pd = c->opts.pd ? c->opts.pd->pd : dev->pd;
	c->sq_depth = c->opts.sq_depth;
	c->rq_depth = c->opts.rq_depth;
	c->signal_every = c->opts.signal_every;
	c->local_mtu = c->opts.max_mtu;
	c->slots.sq_mask = ring_mask(c->sq_depth);
	c->slots.rq_mask = ring_mask(c->rq_depth);
	c->slots.sq_ids = calloc(c->slots.sq_mask + 1, sizeof(*c->slots.sq_ids));
	c->slots.rq_ids = calloc(c->slots.rq_mask + 1, sizeof(*c->slots.rq_ids));
	c->wrs = calloc(c->sq_depth, sizeof(*c->wrs));
	c->sges = calloc(c->sq_depth, sizeof(*c->sges));
	if (!c->slots.sq_ids || !c->slots.rq_ids || !c->wrs || !c->sges) {
		rk_conn_destroy(c);
		rk__err_set(err, ENOMEM, "rk_conn_create", NULL);
		return -ENOMEM;
	}
	if (getrandom(&c->psn, sizeof(c->psn), 0) != sizeof(c->psn))
		c->psn = (uint32_t)rk__now_us() ^ (uint32_t)getpid();
	c->psn &= 0xffffff;
	*out = c;
	return 0;
}

/* Create the CQ (unless shared) and the QP: by the CM layer's hook when it owns @c. */
int rk__conn_build_qp(struct rk_conn *c, struct rk_error *err)
{
	struct ibv_qp_init_attr qa = {0};
	int r;

	if (c->opts.cq) {
		c->cq = c->opts.cq;
	} else {
		struct rk_cq_opts co = {
		    .depth = c->opts.cq_depth ? c->opts.cq_depth : c->sq_depth + c->rq_depth,
		    .mode = c->opts.wait_mode,
		};

		r = rk_cq_create(c->dev, &co, err, &c->cq);
		if (r)
			return r;
		c->own_cq = 1;
	}
	qa.qp_context = c;
	qa.send_cq = qa.recv_cq = c->cq->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = c->sq_depth;
	qa.cap.max_recv_wr = c->rq_depth;
	qa.cap.max_send_sge = c->opts.max_send_sge;
	qa.cap.max_recv_sge = c->opts.max_recv_sge;
	qa.cap.max_inline_data = c->opts.max_inline;
	if (c->cm) {
		r = c->cm->create_qp(c, &qa, err);
		if (r)
			return r;
	} else {
		c->qp = ibv_create_qp(c->pd, &qa);
		if (!c->qp)
			return rk__err_sys(err, "ibv_create_qp", "sq %u rq %u sge %u/%u inline %u",
					   c->sq_depth, c->rq_depth, qa.cap.max_send_sge,
					   qa.cap.max_recv_sge, c->opts.max_inline);
	}
	/* The provider may round up; inline is what it granted. */
	c->max_inline = qa.cap.max_inline_data;
	if (c->max_inline < c->opts.max_inline)
		return rk__err_set(err, EINVAL, "ibv_create_qp", "inline %u asked, %u granted",
				   c->opts.max_inline, c->max_inline);
	c->slots.qp_num = c->qp->qp_num;
	if (rk__cq_attach(c->cq, &c->slots))
		return rk__err_set(err, ENOMEM, "rk_conn_create", NULL);
	return 0;
}

void rk__conn_fail(struct rk_conn *c, enum rk_conn_state state, const struct rk_error *e)
{
	if (!c->first_errno && e) {
		c->first_errno = e->err ? e->err : EIO;
		c->first_err = *e;
	}
	if (c->state != RK_CONN_ERROR && c->state != RK_CONN_DISCONNECTED)
		c->state = state;
}

int rk_conn_first_error(const struct rk_conn *c, struct rk_error *err)
{
	if (!c->first_errno) {
		rk_error_clear(err);
		return 0;
	}
	if (err)
		*err = c->first_err;
	return -c->first_errno;
}

/*
 * After the move to ERROR, one signaled WR more: its flush completion comes
 * after every WR posted before it. Without it, a run of unsignaled sends that
 * completed before the move would never be retired (a success posts nothing
 * for them, and a WR that is done is not flushed), and the drain would wait
 * out its whole deadline. A zero-length RDMA WRITE: no buffer, no key.
 * Needed only when the last WR posted was unsignaled; then the queue has
 * room for it, since a post that leaves less than one signaling interval
 * free signals its last WR (post.c), so it stays within max_send_wr and
 * the CQ's depth. If the post fails anyway, the drain waits as before.
 */
static void post_drain_marker(struct rk_conn *c)
{
	struct ibv_send_wr wr = {0}, *bad = NULL;
	uint64_t seq = c->slots.sq_head;
	int r;

	if (!c->unsignaled_run || seq - c->slots.sq_tail >= c->sq_depth)
		return;
	wr.wr_id = seq;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	c->slots.sq_ids[seq & c->slots.sq_mask] = 0;
	r = ibv_post_send(c->qp, &wr, &bad);
	if (r) {
		rk_dbg("qp 0x%x: drain marker not posted: %s", c->qp->qp_num, strerror(r));
		return;
	}
	c->slots.sq_head = seq + 1;
}

/* Move the QP to ERROR and wait (bounded) for every posted WR to be flushed. */
static void drain(struct rk_conn *c)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	struct ibv_wc wc[16];
	int64_t deadline = rk__deadline(DRAIN_MS);
	int r;

	r = ibv_modify_qp(c->qp, &a, IBV_QP_STATE);
	if (r) {
		rk_warn("ibv_modify_qp ERR: %s [qp 0x%x]", strerror(r), c->qp->qp_num);
		return;
	}
	/* With a shared CQ the flushes are dropped later by rk_cq_poll. */
	if (!c->own_cq)
		return;
	if (c->slots.sq_tail != c->slots.sq_head)
		post_drain_marker(c);
	while (c->slots.sq_tail != c->slots.sq_head || c->slots.rq_tail != c->slots.rq_head) {
		r = rk_cq_poll(c->cq, wc, 16, NULL);
		if (r < 0)
			break;
		if (r == 0) {
			if (rk__ms_left(deadline) == 0) {
				rk_warn(
				    "qp 0x%x: %llu sends and %llu receives not flushed in %d ms",
				    c->qp->qp_num,
				    (unsigned long long)(c->slots.sq_head - c->slots.sq_tail),
				    (unsigned long long)(c->slots.rq_head - c->slots.rq_tail),
				    DRAIN_MS);
				break;
			}
			usleep(1000);
		}
	}
}

void rk_conn_destroy(struct rk_conn *c)
{
	int r;

	if (!c)
		return;
	if (c->cm && c->state == RK_CONN_CONNECTED)
		rk_conn_disconnect(c, 1000, NULL);
	if (c->qp) {
		drain(c);
		rk__cq_detach(c->cq, &c->slots);
		if (c->cm) {
			c->cm->destroy_qp(c);
		} else {
			r = ibv_destroy_qp(c->qp);
			if (r)
				rk_warn("ibv_destroy_qp: %s", strerror(r));
		}
		c->qp = NULL;
	}
	if (c->own_cq)
		rk_cq_destroy(c->cq);
	if (c->cm)
		c->cm->release(c);
	free(c->slots.sq_ids);
	free(c->slots.rq_ids);
	free(c->wrs);
	free(c->sges);
	free(c);
}

int rk_conn_create(struct rk_device *dev, const struct rk_conn_opts *opts, struct rk_error *err,
		   struct rk_conn **out)
{
	struct ibv_qp_attr a = {0};
	struct rk_conn *c;
	int r;

	r = rk__conn_alloc(dev, opts, err, &c);
	if (r)
		return r;
	r = rk__conn_build_qp(c, err);
	if (r)
		goto fail;
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = dev->info.port;
	/* The QP allows everything; each MR grants only what its use needs. */
	a.qp_access_flags =
	    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	r = ibv_modify_qp(c->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (r) {
		r = rk__err_ret(err, r, "ibv_modify_qp INIT", "port %u pkey_index 0 access 0x%x",
				a.port_num, a.qp_access_flags);
		rk__err_set_qp(err, c->qp->qp_num);
		goto fail;
	}
	if (c->opts.prepare) {
		r = c->opts.prepare(c, c->opts.prepare_arg);
		if (r) {
			r = rk__err_set(err, r, "rk_conn_create", "prepare callback failed");
			goto fail;
		}
	}
	*out = c;
	return 0;
fail:
	rk_conn_destroy(c);
	*out = NULL;
	return r;
}

int rk_conn_disconnect(struct rk_conn *c, int timeout_ms, struct rk_error *err)
{
	int64_t deadline = rk__deadline(timeout_ms);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	struct rk_error e;
	int r;

	if (c->state == RK_CONN_CONNECTED || c->state == RK_CONN_CONNECTING) {
		rk__err_set(&e, ESHUTDOWN, "rk_conn_disconnect", "connection closed locally");
		if (c->cm)
			c->cm->disconnect(c, deadline, err);
		rk__conn_fail(c, RK_CONN_DISCONNECTED, &e);
		c->state = RK_CONN_DISCONNECTED;
	}
	if (c->qp) {
		r = ibv_modify_qp(c->qp, &a, IBV_QP_STATE);
		if (r)
			return rk__err_ret(err, r, "ibv_modify_qp ERR", NULL);
	}
	return 0;
}

const char *rk_conn_state_str(enum rk_conn_state s)
{
	static const char *names[] = {"idle", "connecting", "connected", "disconnected", "error"};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

enum rk_conn_state rk_conn_state(const struct rk_conn *c)
{
	return c->state;
}

struct rk_cq *rk_conn_cq(const struct rk_conn *c)
{
	return c->cq;
}

uint32_t rk_conn_qp_num(const struct rk_conn *c)
{
	return c->qp ? c->qp->qp_num : 0;
}

enum ibv_mtu rk_conn_path_mtu(const struct rk_conn *c)
{
	return c->path_mtu;
}

int rk_conn_rd_atomic(const struct rk_conn *c, uint8_t *initiator, uint8_t *responder,
		      struct rk_error *err)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int r;

	if (!c->qp)
		return rk__err_set(err, ENOTCONN, "rk_conn_rd_atomic", "no QP");
	r = ibv_query_qp(c->qp, &a, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &ia);
	if (r) {
		r = rk__err_ret(err, r, "ibv_query_qp", "rd_atomic");
		rk__err_set_qp(err, c->qp->qp_num);
		return r;
	}
	if (initiator)
		*initiator = a.max_rd_atomic;
	if (responder)
		*responder = a.max_dest_rd_atomic;
	return 0;
}

uint32_t rk_conn_max_inline(const struct rk_conn *c)
{
	return c->max_inline;
}

uint32_t rk_conn_sq_depth(const struct rk_conn *c)
{
	return c->sq_depth;
}

uint32_t rk_conn_rq_depth(const struct rk_conn *c)
{
	return c->rq_depth;
}

struct ibv_qp *rk_conn_qp(const struct rk_conn *c)
{
	return c->qp;
}

struct rk_device *rk_conn_device(const struct rk_conn *c)
{
	return c->dev;
}

void rk_conn_set_user(struct rk_conn *c, void *user)
{
	c->user = user;
}

void *rk_conn_user(const struct rk_conn *c)
{
	return c->user;
}
