/*
 * bench_xfer.c - rk bench --op xfer: the lanes' shape, the one-sided
 * layer's objects, the descriptor over the control channel, --verify's
 * pattern, and teardown in the layer's order (bench_xfer.h). The engine
 * is bench_xfer_run.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench_xfer.h"

#define CTL_TIMEOUT_MS	2000 /* revoking at teardown: a dead lane needs nothing */
#define NOTIF_RECVS_MIN 16u
#define NOTIF_RECVS_MAX 1024u

int bench_xfer_lands_here(const struct bench_ctx *c)
{
	return (c->p->xfer_op == BENCH_XFER_READ) == (c->is_client != 0);
}

/*
 * A notification per batch, all on lane 0, and the server takes them as
 * they come: as many receives as batches in flight (at least the layer's
 * default) keep a fast client from meeting an empty receive queue.
 */
static uint32_t notif_recvs(const struct bench_params *p)
{
	uint32_t n = p->tx_depth < NOTIF_RECVS_MIN ? NOTIF_RECVS_MIN : p->tx_depth;

	return n > NOTIF_RECVS_MAX ? NOTIF_RECVS_MAX : n;
}

/* A lane's share of a batch's ops (op i goes to lane i mod lanes). */
static uint32_t per_lane(const struct bench_params *p)
{
	return (p->batch + p->num_qp - 1) / p->num_qp;
}

/*
 * The send queue holds every batch in flight (its share of the ops and
 * the notification) and two chains more: the library signals the last WR
 * of a post that leaves less than one signaling interval free, an extra
 * completion that the spare room avoids. Beyond the device's limit the
 * layer queues the chains that do not fit and posts them as room returns.
 */
static uint32_t sq_depth(const struct bench_ctx *c)
{
	const struct bench_params *p = c->p;
	uint64_t sq = (uint64_t)p->tx_depth * (per_lane(p) + 1) + 2ull * p->cq_mod + 2;
	uint32_t max = rk_device_get_info(c->dev)->max_qp_wr;

	return sq > max ? max : (uint32_t)sq;
}

void bench_xfer_conn_opts(const struct bench_ctx *c, struct rk_conn_opts *o)
{
	const struct bench_params *p = c->p;
	const struct rk_device_info *di = rk_device_get_info(c->dev);

	o->sq_depth = sq_depth(c);
	o->rq_depth = notif_recvs(p);
	/* Only each chain's last WR asks for a completion (xfer.h). */
	o->signal_every = p->cq_mod;
	o->max_inline = 0;
	o->prepare = NULL;
	o->prepare_arg = NULL;
	o->max_rd_atomic = 0;
	/* As --op read: every READ the batches hold in flight, up to the device's limit. */
	if (p->xfer_op == BENCH_XFER_READ)
		o->max_rd_atomic = bench_rd_atomic(di, (uint64_t)p->tx_depth * per_lane(p));
}

uint32_t bench_xfer_cq_depth(const struct bench_ctx *c)
{
	uint64_t n = (uint64_t)c->p->num_qp * (sq_depth(c) + notif_recvs(c->p));
	uint32_t max = rk_device_get_info(c->dev)->max_cqe;

	return n > max ? max : (uint32_t)n;
}

/* The pattern: a byte of a multiplicative hash of the offset, moved by the size. */
static uint8_t pattern(uint64_t off, uint32_t size)
{
	return (uint8_t)(((off + 1) * 0x9e3779b97f4a7c15ull + size) >> 56);
}

void bench_xfer_reset(struct bench_ctx *c, uint32_t size)
{
	const struct bench_params *p = c->p;
	struct bench_xfer *b = c->xfer;
	size_t small = (size_t)p->batch * size;

	if (!p->verify)
		return;
	for (size_t i = 0; i < small; i++)
		b->ref[i] = pattern(i, size);
	if (bench_xfer_lands_here(c))
		memset(b->mem, 0, (size_t)p->tx_depth * small);
	else
		memcpy(b->mem, b->ref, small);
}

static int alloc_side(struct bench_ctx *c, struct bench_xfer *b, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	uint64_t small = (uint64_t)p->batch * p->size_max;

	b->mem_len = (size_t)(bench_xfer_lands_here(c) ? small * p->tx_depth : small);
	b->mem = rk_alloc_aligned(b->mem_len);
	b->ref = malloc((size_t)small);
	if (!b->mem || !b->ref)
		return bench_fail(err, ENOMEM, "out of memory for %zu + %llu bytes", b->mem_len,
				  (unsigned long long)small);
	if (!c->is_client)
		return 0;
	b->ops = calloc((size_t)p->tx_depth * p->batch, sizeof(*b->ops));
	b->slots = calloc(p->tx_depth, sizeof(*b->slots));
	if (!b->ops || !b->slots)
		return bench_fail(err, ENOMEM, "out of memory for %u batches of %u ops",
				  p->tx_depth, p->batch);
	return 0;
}

/* Server: export the segment to the client and send its descriptor. */
static int export_seg(struct bench_ctx *c, struct bench_xfer *b, unsigned access,
		      struct rk_error *err)
{
	uint8_t d[RK_XFER_DESC_MAX];
	size_t n;
	int r;

	r = rk_xfer_export(b->seg, b->peer, access, d, sizeof(d), &n, bench_connect_ms(c), err);
	if (r)
		return r;
	return bench_ctl_send(&c->ctl, BM_XDESC, d, (uint16_t)n, bench_step_ms(c), err);
}

/* Client: the server's descriptor, checked by the layer, then against the run. */
static int import_seg(struct bench_ctx *c, struct bench_xfer *b, unsigned access,
		      struct rk_error *err)
{
	const struct bench_params *p = c->p;
	uint64_t small = (uint64_t)p->batch * p->size_max;
	uint64_t need = p->xfer_op == BENCH_XFER_READ ? small : small * p->tx_depth;
	struct bench_msg m;
	int r;

	r = bench_ctl_expect(&c->ctl, BM_XDESC, -1, &m, bench_step_ms(c), err);
	r = r ?: rk_xfer_import(b->peer, m.data, m.len, err, &b->remote);
	if (r)
		return r;
	if (rk_xfer_remote_len(b->remote) < need)
		return bench_fail(
		    err, EPROTO, "the server's segment is %llu bytes, the run needs %llu",
		    (unsigned long long)rk_xfer_remote_len(b->remote), (unsigned long long)need);
	if (!(rk_xfer_remote_access(b->remote) & access))
		return bench_fail(err, EPROTO, "the server's segment grants access 0x%x, not 0x%x",
				  rk_xfer_remote_access(b->remote), access);
	return 0;
}

int bench_xfer_setup(struct bench_ctx *c, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	unsigned access = p->xfer_op == BENCH_XFER_READ ? RK_XFER_READ : RK_XFER_WRITE;
	struct rk_xfer_opts o = {
	    .chain = p->cq_mod,
	    .max_batches = p->tx_depth,
	    .max_ops = p->batch,
	    .notif_recvs = notif_recvs(p),
	    .ctl_timeout_ms = CTL_TIMEOUT_MS,
	};
	struct rk_conn *lanes[RK_XFER_LANES_MAX];
	struct bench_xfer *b;
	int r;

	b = c->xfer = calloc(1, sizeof(*b));
	if (!b)
		return bench_fail(err, ENOMEM, "out of memory for the xfer run");
	r = alloc_side(c, b, err);
	r = r ?: rk_xfer_create(c->dev, NULL, &o, err, &b->x);
	if (!r)
		c->xfer_access = rk_xfer_mode(b->x) == RK_XFER_MW ? "mw" : "mr";
	/* Only the server's segment is exported; the client's is a batch's local side. */
	r = r ?: rk_xfer_seg_reg(b->x, b->mem, b->mem_len, c->is_client ? 0 : access, err, &b->seg);
	if (r)
		return r;
	for (uint32_t i = 0; i < p->num_qp; i++)
		lanes[i] = c->qps[i].conn;
	r = rk_xfer_peer_create(b->x, lanes, p->num_qp, err, &b->peer);
	if (r)
		return r;
	return c->is_client ? import_seg(c, b, access, err) : export_seg(c, b, access, err);
}

const struct rk_xfer_stats *bench_xfer_stats(const struct bench_ctx *c, uint64_t *cqes)
{
	*cqes = c->xfer->cqes;
	return &c->xfer->run;
}

const char *bench_xfer_mode(const struct bench_ctx *c)
{
	return c->xfer_access ? c->xfer_access : "?";
}

void bench_xfer_release_peer(struct bench_ctx *c)
{
	struct bench_xfer *b = c->xfer;

	if (!b)
		return;
	for (uint32_t i = 0; b->slots && i < c->p->tx_depth; i++) {
		rk_xfer_batch_free(b->slots[i].b);
		b->slots[i].b = NULL;
		rk_xfer_prep_free(b->slots[i].prep);
		b->slots[i].prep = NULL;
	}
	rk_xfer_remote_free(b->remote);
	b->remote = NULL;
	rk_xfer_peer_destroy(b->peer);
	b->peer = NULL;
}

void bench_xfer_release(struct bench_ctx *c)
{
	struct bench_xfer *b = c->xfer;

	if (!b)
		return;
	bench_xfer_release_peer(c);
	rk_xfer_seg_dereg(b->seg);
	rk_xfer_destroy(b->x);
	rk_free_aligned(b->mem);
	free(b->ref);
	free(b->ops);
	free(b->slots);
	free(b);
	c->xfer = NULL;
}
