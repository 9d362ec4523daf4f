/*
 * xfer.c - one-sided transfers (xfer.h): the set of segments, its
 * registration cache, peers, exports (memory windows or registrations),
 * revocation. Imports are xfer_import.c's, batches xfer_batch.c's, completions
 * and waits xfer_poll.c's, notification receives xfer_notif.c's.
 *
 * A window bind or invalidation is a work request on the lane's QP: it is
 * posted signaled with an RK_XFER_WRID_CTL id and waited for by polling the
 * lanes' CQs (rk__xfer_poll), which hands every completion to
 * rk_xfer_handle; that counts the control completions down.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "rk_internal.h"
#include "xfer_int.h"

#define DEF_CHAIN	RK_XFER_CHAIN_MAX
#define DEF_BATCHES	64
#define DEF_OPS		4096
#define DEF_NOTIF_RECVS 16
#define DEF_CTL_MS	5000

int rk_xfer_mw_supported(const struct rk_device *dev)
{
	return (dev->attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
}

/* The cache's verbs calls. */
static void *cache_reg(void *ctx, void *pd, void *addr, size_t len, int access, uint32_t *lkey)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);

	(void)ctx;
	if (mr)
		*lkey = mr->lkey;
	return mr;
}

static void cache_dereg(void *ctx, void *mr)
{
	int r = ibv_dereg_mr(mr);

	(void)ctx;
	if (r)
		rk_warn("ibv_dereg_mr: %s", strerror(r));
}

static int region_access(const struct rk_xfer *x)
{
	/* No remote access on the region itself: its rkey must grant nothing. */
	return IBV_ACCESS_LOCAL_WRITE | (x->mode == RK_XFER_MW ? IBV_ACCESS_MW_BIND : 0);
}

int rk_xfer_create(struct rk_device *dev, struct rk_pd *pd, const struct rk_xfer_opts *opts,
		   struct rk_error *err, struct rk_xfer **out)
{
	struct rk__xcache_ops ops = {cache_reg, cache_dereg, NULL};
	struct rk_xfer_opts o = {0};
	struct rk_xfer *x;

	if (opts)
		o = *opts;
	if (pd && pd->dev != dev)
		return rk__err_set(err, EINVAL, "rk_xfer_create", "the PD is of another device");
	if (o.mode == RK_XFER_AUTO)
		o.mode = rk_xfer_mw_supported(dev) ? RK_XFER_MW : RK_XFER_MR;
	else if (o.mode == RK_XFER_MW && !rk_xfer_mw_supported(dev))
		return rk__err_set(err, EOPNOTSUPP, "rk_xfer_create",
				   "%s has no memory windows of type 2", dev->info.name);
	else if (o.mode != RK_XFER_MW && o.mode != RK_XFER_MR)
		return rk__err_set(err, EINVAL, "rk_xfer_create", "mode %d", (int)o.mode);
	if (!o.chain)
		o.chain = DEF_CHAIN;
	if (!o.max_batches)
		o.max_batches = DEF_BATCHES;
	if (!o.max_ops)
		o.max_ops = DEF_OPS;
	if (!o.notif_recvs)
		o.notif_recvs = DEF_NOTIF_RECVS;
	if (!o.ctl_timeout_ms)
		o.ctl_timeout_ms = DEF_CTL_MS;
	if (o.zero_based && o.mode != RK_XFER_MW)
		return rk__err_set(err, EINVAL, "rk_xfer_create",
				   "zero_based needs memory windows (mode MW)");
	if (o.ctl_timeout_ms < 0) /* every wait has a deadline: teardown's too */
		return rk__err_set(err, EINVAL, "rk_xfer_create", "ctl_timeout_ms %d",
				   o.ctl_timeout_ms);
	if (o.chain > RK_XFER_CHAIN_MAX || o.max_batches > 65535 || o.max_ops > RK_XPLAN_MAX_WRS ||
	    o.notif_recvs > 4096)
		return rk__err_set(err, EINVAL, "rk_xfer_create",
				   "chain %u (max %u), max_batches %u (max 65535), max_ops %u (max "
				   "%u), notif_recvs %u (max 4096)",
				   o.chain, RK_XFER_CHAIN_MAX, o.max_batches, o.max_ops,
				   RK_XPLAN_MAX_WRS, o.notif_recvs);
	x = calloc(1, sizeof(*x));
	if (!x)
		return rk__err_set(err, ENOMEM, "rk_xfer_create", NULL);
	x->slots = calloc(o.max_batches, sizeof(struct rk_xfer_batch *));
	if (!x->slots) {
		free(x);
		return rk__err_set(err, ENOMEM, "rk_xfer_create", NULL);
	}
	x->dev = dev;
	x->pd = pd ? pd->pd : dev->pd;
	x->mode = o.mode;
	/*
	 * Ids start where another rk_xfer's do not: two of them may share a
	 * CQ, and a completion is claimed by its wr_id (batches also by QP).
	 */
	if (getrandom(&x->ctl_seq, sizeof(x->ctl_seq), 0) != sizeof(x->ctl_seq))
		x->ctl_seq = (uint64_t)(uintptr_t)x;
	x->ctl_seq &= 0xffffffffull; /* far from the 48-bit wrap */
	x->batch_serial = (uint32_t)(x->ctl_seq >> 7);
	x->opts = o;
	x->next_seg_id = 1;
	rk__xcache_init(&x->cache, &ops);
	*out = x;
	return 0;
}

void rk_xfer_destroy(struct rk_xfer *x)
{
	if (!x)
		return;
	for (struct rk_xfer_seg *s = x->segs, *next; s; s = next) {
		next = s->next;
		rk_xfer_seg_dereg(s);
	}
	for (unsigned i = 0; i < x->npeers; i++)
		if (x->peers[i])
			rk_warn("rk_xfer_destroy: peer %u not destroyed", i);
	rk__xprep_detach_all(x);
	rk__xcache_fini(&x->cache);
	rk__xfer_spares_free(x);
	free(x->peers);
	free(x->slots);
	free(x);
}

enum rk_xfer_mode rk_xfer_mode(const struct rk_xfer *x)
{
	return x->mode;
}

void rk_xfer_stats(const struct rk_xfer *x, struct rk_xfer_stats *st)
{
	*st = x->st;
	st->reg_mr += x->cache.regs;
	st->dereg_mr += x->cache.deregs;
	st->cache_hits = x->cache.hits;
}

int rk_xfer_seg_reg(struct rk_xfer *x, void *addr, size_t len, unsigned access,
		    struct rk_error *err, struct rk_xfer_seg **out)
{
	struct rk_xfer_seg *s;
	int r;

	if (access & ~(unsigned)(RK_XFER_READ | RK_XFER_WRITE))
		return rk__err_set(err, EINVAL, "rk_xfer_seg_reg", "access 0x%x", access);
	if (!addr || !len || (uintptr_t)addr + len < (uintptr_t)addr)
		return rk__err_set(err, EINVAL, "rk_xfer_seg_reg", "range %p + %zu", addr, len);
	s = calloc(1, sizeof(*s));
	if (!s)
		return rk__err_set(err, ENOMEM, "rk_xfer_seg_reg", NULL);
	r = rk__xcache_get(&x->cache, x->pd, addr, len, region_access(x), &s->region);
	if (r) {
		free(s);
		errno = -r;
		return rk__err_sys(err, "ibv_reg_mr", "%zu bytes at %p, access 0x%x", len, addr,
				   region_access(x));
	}
	s->made_region = s->region->refs == 1; /* a hit leaves it >= 2 */
	s->x = x;
	s->addr = addr;
	s->len = len;
	s->access = access;
	s->id = x->next_seg_id++;
	if (!x->next_seg_id)
		x->next_seg_id = 1;
	s->next = x->segs;
	x->segs = s;
	*out = s;
	return 0;
}

void *rk_xfer_seg_addr(const struct rk_xfer_seg *seg)
{
	return seg->addr;
}

size_t rk_xfer_seg_len(const struct rk_xfer_seg *seg)
{
	return seg->len;
}

static int peer_live(const struct rk_xfer *x, const struct rk_xfer_peer *p)
{
	return p && p->idx < x->npeers && x->peers[p->idx] == p;
}

/* Post a control WR on lane @i of @p, counted in x->ctl_pending. */
static int ctl_post(struct rk_xfer *x, struct rk_xfer_peer *p, unsigned i, struct ibv_send_wr *wr,
		    struct rk_error *err)
{
	uint64_t id = (uint64_t)RK_XFER_WRID_CTL << 48 | (x->ctl_seq & 0xffffffffffffull);
	int r = rk__post_verbs(p->lanes[i], wr, id, err);

	if (r)
		return r;
	x->ctl_seq++;
	x->ctl_pending++;
	return 0;
}

static void ctl_begin(struct rk_xfer *x)
{
	x->ctl_base = x->ctl_seq;
	x->ctl_pending = 0;
	x->ctl_status = 0;
}

/*
 * Wait until every control WR since ctl_begin completed. @flush_ok: a
 * flushed one is fine (an invalidation on a QP that went to error).
 */
static int ctl_wait(struct rk_xfer *x, struct rk_xfer_peer *p, int timeout_ms, int flush_ok,
		    const char *op, struct rk_error *err)
{
	int64_t deadline = rk__deadline(timeout_ms);

	while (x->ctl_pending) {
		int left = rk__ms_left(deadline);

		if (left == 0)
			return rk__err_set(err, ETIMEDOUT, op, "%u window operations not completed",
					   x->ctl_pending);
		rk__xfer_poll(x, p->lanes, p->nlanes, left < 0 || left > 20 ? 20 : left);
	}
	if (x->ctl_status == IBV_WC_WR_FLUSH_ERR && flush_ok)
		return 0; /* the QP is in error: it serves no request, the window is dead */
	if (x->ctl_status)
		return rk__err_set(err, EIO, op, "window operation failed: %s",
				   ibv_wc_status_str((enum ibv_wc_status)x->ctl_status));
	return 0;
}

static int mw_access(unsigned access)
{
	return (access & RK_XFER_READ ? IBV_ACCESS_REMOTE_READ : 0) |
	       (access & RK_XFER_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0);
}

/* Deallocate lane @i's window of @e (a bound one is invalidated with it): 0, or -1 kept. */
static int drop_window(struct rk__xexport *e, unsigned i)
{
	int r;

	if (!e->mw[i])
		return 0;
	r = ibv_dealloc_mw(e->mw[i]);
	if (r) {
		rk_warn("ibv_dealloc_mw: %s", strerror(r));
		return -1;
	}
	e->mw[i] = NULL;
	return 0;
}

/*
 * End @e's access. MW mode: invalidate each bound window on its lane; a
 * lane that is down (or refuses the invalidation) is put in error and its
 * window deallocated; MR mode: deregister.
 */
static int unexport(struct rk_xfer *x, struct rk__xexport *e, int timeout_ms, struct rk_error *err)
{
	struct rk_xfer_peer *p = e->peer;
	int r = 0;

	if (!e->live)
		return 0;
	if (x->mode == RK_XFER_MR) {
		/*
		 * A registration that failed to go may still honour its key:
		 * the export stays live (and revocable again), not forgotten.
		 */
		r = ibv_dereg_mr(e->mr);
		if (r)
			return rk__err_ret(
			    err, r, "ibv_dereg_mr",
			    "revoke: the registration is still there and its key may "
			    "still work; the export stays (revoke again)");
		e->mr = NULL;
		e->live = 0;
		x->st.dereg_mr++;
		return 0;
	}
	e->live = 0;
	ctl_begin(x);
	for (unsigned i = 0; i < p->nlanes; i++) {
		struct ibv_send_wr wr = {0};
		struct rk_error pe;

		if (!e->mw[i])
			continue;
		/*
		 * A lane that is down, or that cannot take the invalidation:
		 * its QP is put in error (a peer's rdma_cm disconnect leaves
		 * it in RTS) and its window deallocated, which invalidates it
		 * whatever the QP does; the next export allocates another.
		 */
		if (rk_conn_state(p->lanes[i]) == RK_CONN_CONNECTED) {
			wr.opcode = IBV_WR_LOCAL_INV;
			wr.invalidate_rkey = e->rkey[i];
			if (ctl_post(x, p, i, &wr, &pe) == 0) {
				x->st.mw_invalidates++;
				continue;
			}
			rk_warn("revoke: lane %u: %s; disconnecting it", i, pe.msg);
		}
		rk_conn_disconnect(p->lanes[i], 0, NULL);
		if (drop_window(e, i) && !r)
			r = rk__err_set(err, EIO, "rk_xfer_revoke",
					"lane %u: its window could not be deallocated", i);
	}
	if (r) {
		ctl_wait(x, p, timeout_ms, 1, "rk_xfer_revoke", NULL);
		return r;
	}
	r = ctl_wait(x, p, timeout_ms, 1, "rk_xfer_revoke", err);
	if (r) {
		for (unsigned i = 0; i < p->nlanes; i++)
			rk_conn_disconnect(p->lanes[i], 0, NULL);
		if (err)
			rk__err_msgf(err, "%s; the peer's lanes were disconnected", err->msg);
	}
	return r;
}

static void export_free(struct rk_xfer *x, struct rk__xexport *e)
{
	for (unsigned i = 0; i < RK_XFER_LANES_MAX; i++)
		if (e->mw[i]) {
			int r = ibv_dealloc_mw(e->mw[i]);

			if (r)
				rk_warn("ibv_dealloc_mw: %s", strerror(r));
		}
	if (e->mr) {
		int r = ibv_dereg_mr(e->mr);

		if (r)
			rk_warn("ibv_dereg_mr: %s: an exported registration is left behind (its "
				"key may still work until the PD goes)",
				strerror(r));
		else
			x->st.dereg_mr++;
	}
	free(e);
}

void rk_xfer_seg_dereg(struct rk_xfer_seg *seg)
{
	struct rk_xfer *x;
	struct rk_xfer_seg **pp;

	if (!seg)
		return;
	x = seg->x;
	while (seg->exports) {
		struct rk__xexport *e = seg->exports;

		seg->exports = e->next;
		if (peer_live(x, e->peer))
			unexport(x, e, x->opts.ctl_timeout_ms, NULL);
		export_free(x, e); /* deallocating a window invalidates it too */
	}
	for (pp = &x->segs; *pp && *pp != seg; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = seg->next;
	rk__xprep_seg_gone(x, seg); /* its lkey may name another registration later */
	if (seg->made_region)
		rk__xcache_seal(seg->region);
	rk__xcache_put(&x->cache, seg->region);
	free(seg);
}

int rk_xfer_peer_create(struct rk_xfer *x, struct rk_conn *const *lanes, unsigned nlanes,
			struct rk_error *err, struct rk_xfer_peer **out)
{
	struct rk_xfer_peer *p;
	unsigned idx;
	int r;

	if (!nlanes || nlanes > RK_XFER_LANES_MAX)
		return rk__err_set(err, EINVAL, "rk_xfer_peer_create", "%u lanes (1..%u)", nlanes,
				   RK_XFER_LANES_MAX);
	for (unsigned i = 0; i < nlanes; i++) {
		if (!lanes[i])
			return rk__err_set(err, EINVAL, "rk_xfer_peer_create", "lane %u is NULL",
					   i);
		if (lanes[i]->pd != x->pd)
			return rk__err_set(err, EINVAL, "rk_xfer_peer_create",
					   "lane %u is in another PD than the segments", i);
		if (lanes[i]->sq_depth < x->opts.chain + 2)
			return rk__err_set(err, EINVAL, "rk_xfer_peer_create",
					   "lane %u: send queue %u, needs %u", i,
					   lanes[i]->sq_depth, x->opts.chain + 2);
		/* Receives an earlier peer on this lane left posted are taken over. */
		if (lanes[i]->xfer_recvs < x->opts.notif_recvs &&
		    rk_rq_room(lanes[i]) < x->opts.notif_recvs - lanes[i]->xfer_recvs)
			return rk__err_set(err, ENOBUFS, "rk_xfer_peer_create",
					   "lane %u: %u free receive slots, needs %u", i,
					   rk_rq_room(lanes[i]),
					   x->opts.notif_recvs - lanes[i]->xfer_recvs);
	}
	for (idx = 0; idx < x->npeers && x->peers[idx]; idx++)
		;
	if (idx == x->npeers) {
		struct rk_xfer_peer **np;

		if (x->npeers >= 65535)
			return rk__err_set(err, ENOSPC, "rk_xfer_peer_create", "65535 peers");
		np = realloc(x->peers, (x->npeers + 1) * sizeof(struct rk_xfer_peer *));
		if (!np)
			return rk__err_set(err, ENOMEM, "rk_xfer_peer_create", NULL);
		x->peers = np;
		x->peers[x->npeers++] = NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return rk__err_set(err, ENOMEM, "rk_xfer_peer_create", NULL);
	p->nq_cap = 2 * nlanes * x->opts.notif_recvs;
	p->nq = calloc(p->nq_cap, sizeof(*p->nq));
	if (!p->nq) {
		free(p);
		return rk__err_set(err, ENOMEM, "rk_xfer_peer_create", NULL);
	}
	p->x = x;
	p->idx = idx;
	p->nlanes = nlanes;
	memcpy(p->lanes, lanes, nlanes * sizeof(struct rk_conn *));
	x->peers[idx] = p;
	for (unsigned i = 0; i < nlanes; i++)
		while (lanes[i]->xfer_recvs < x->opts.notif_recvs) {
			r = rk__xfer_notif_recv(p, i, err);
			if (r) {
				rk_xfer_peer_destroy(p);
				return r;
			}
		}
	*out = p;
	return 0;
}

void rk_xfer_peer_destroy(struct rk_xfer_peer *p)
{
	struct rk_xfer *x;

	if (!p)
		return;
	x = p->x;
	rk__xfer_drop_peer(x, p);
	rk__xprep_peer_gone(x, p);
	for (struct rk_xfer_seg *s = x->segs; s; s = s->next) {
		struct rk__xexport **pp = &s->exports;

		while (*pp) {
			struct rk__xexport *e = *pp;

			if (e->peer != p) {
				pp = &e->next;
				continue;
			}
			unexport(x, e, x->opts.ctl_timeout_ms, NULL);
			*pp = e->next;
			export_free(x, e);
		}
	}
	x->peers[p->idx] = NULL;
	rk__xgens_fini(&p->gens);
	free(p->nq);
	free(p);
}

static struct rk__xexport *find_export(struct rk_xfer_seg *seg, struct rk_xfer_peer *p)
{
	for (struct rk__xexport *e = seg->exports; e; e = e->next)
		if (e->peer == p)
			return e;
	return NULL;
}

/*
 * A failed export: no window of it may stay bound. When a posted bind may
 * still run (@cut), the lanes go to error first, which flushes it; then
 * every window is deallocated (which invalidates a bound one) and the next
 * export allocates new ones.
 */
static void drop_windows(struct rk__xexport *e, struct rk_xfer_peer *p, int cut)
{
	for (unsigned i = 0; cut && i < p->nlanes; i++)
		rk_conn_disconnect(p->lanes[i], 0, NULL);
	for (unsigned i = 0; i < RK_XFER_LANES_MAX; i++)
		drop_window(e, i);
}

/* Bind a window per lane over @seg with @e->access, keys moved on. */
static int bind_windows(struct rk_xfer *x, struct rk_xfer_seg *seg, struct rk__xexport *e,
			int timeout_ms, struct rk_error *err)
{
	struct rk_xfer_peer *p = e->peer;
	uint32_t keys[RK_XFER_LANES_MAX] = {0};
	int r;

	for (unsigned i = 0; i < p->nlanes; i++)
		if (!e->mw[i]) {
			e->mw[i] = ibv_alloc_mw(x->pd, IBV_MW_TYPE_2);
			if (!e->mw[i])
				return rk__err_sys(err, "ibv_alloc_mw", "type 2, lane %u", i);
			e->rkey[i] = e->mw[i]->rkey;
		}
	ctl_begin(x);
	for (unsigned i = 0; i < p->nlanes; i++) {
		struct ibv_send_wr wr = {0};

		keys[i] = ibv_inc_rkey(e->rkey[i]); /* an old descriptor's key is dead */
		wr.opcode = IBV_WR_BIND_MW;
		wr.bind_mw.mw = e->mw[i];
		wr.bind_mw.rkey = keys[i];
		wr.bind_mw.bind_info.mr = (struct ibv_mr *)seg->region->mr;
		wr.bind_mw.bind_info.addr = (uintptr_t)seg->addr;
		wr.bind_mw.bind_info.length = seg->len;
		wr.bind_mw.bind_info.mw_access_flags =
		    (unsigned)mw_access(e->access) |
		    (x->opts.zero_based ? IBV_ACCESS_ZERO_BASED : 0); /* addressed from 0 */
		r = ctl_post(x, p, i, &wr, err);
		if (r) {
			drop_windows(e, p,
				     ctl_wait(x, p, timeout_ms, 0, "rk_xfer_export", NULL) != 0);
			return r;
		}
		x->st.mw_binds++;
	}
	r = ctl_wait(x, p, timeout_ms, 0, "rk_xfer_export", err);
	if (r) {
		drop_windows(e, p, 1);
		return r;
	}
	for (unsigned i = 0; i < p->nlanes; i++) {
		e->rkey[i] = keys[i];
		if (e->mw[i])
			e->mw[i]->rkey = keys[i];
	}
	return 0;
}

int rk_xfer_export(struct rk_xfer_seg *seg, struct rk_xfer_peer *p, unsigned access, void *buf,
		   size_t cap, size_t *len, int timeout_ms, struct rk_error *err)
{
	struct rk_xfer *x = seg->x;
	struct rk__xexport *e;
	struct rk__xdesc d;
	int r;

	if (!peer_live(x, p))
		return rk__err_set(err, EINVAL, "rk_xfer_export", "peer of another rk_xfer");
	if (!access || (access & ~seg->access))
		return rk__err_set(err, EACCES, "rk_xfer_export",
				   "access 0x%x asked, the segment allows 0x%x", access,
				   seg->access);
	if (cap < rk__xdesc_size(p->nlanes))
		return rk__err_set(err, ENOSPC, "rk_xfer_export", "%zu-byte buffer, needs %zu", cap,
				   rk__xdesc_size(p->nlanes));
	for (unsigned i = 0; i < p->nlanes; i++)
		if (rk_conn_state(p->lanes[i]) != RK_CONN_CONNECTED)
			return rk__err_set(err, ENOTCONN, "rk_xfer_export", "lane %u is %s", i,
					   rk_conn_state_str(rk_conn_state(p->lanes[i])));
	e = find_export(seg, p);
	if (e && e->live && e->access != access)
		return rk__err_set(err, EBUSY, "rk_xfer_export",
				   "exported with access 0x%x: revoke first", e->access);
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return rk__err_set(err, ENOMEM, "rk_xfer_export", NULL);
		e->peer = p;
		e->next = seg->exports;
		seg->exports = e;
	}
	if (!e->live) {
		e->access = access;
		if (x->mode == RK_XFER_MW) {
			r = bind_windows(x, seg, e, timeout_ms, err);
			if (r)
				return r;
		} else {
			e->mr = ibv_reg_mr(x->pd, seg->addr, seg->len,
					   IBV_ACCESS_LOCAL_WRITE | mw_access(access));
			if (!e->mr)
				return rk__err_sys(err, "ibv_reg_mr", "export of %zu bytes",
						   seg->len);
			x->st.reg_mr++;
			for (unsigned i = 0; i < p->nlanes; i++)
				e->rkey[i] = e->mr->rkey;
		}
		e->gen++;
		if (!e->gen)
			e->gen = 1;
		e->live = 1;
	}
	memset(&d, 0, sizeof(d));
	d.version = RK_XFER_DESC_VERSION;
	d.access = (uint8_t)e->access;
	d.mode = (uint8_t)x->mode;
	d.lanes = (uint8_t)p->nlanes;
	d.gen = e->gen;
	d.seg_id = seg->id;
	d.addr = x->opts.zero_based ? 0 : (uintptr_t)seg->addr; /* the importer adds offsets */
	d.len = seg->len;
	memcpy(d.rkey, e->rkey, sizeof(d.rkey));
	r = rk__xdesc_encode(&d, buf, cap, len);
	return r ? rk__err_set(err, -r, "rk_xfer_export", "encoding") : 0;
}

int rk_xfer_revoke(struct rk_xfer_seg *seg, struct rk_xfer_peer *p, int timeout_ms,
		   struct rk_error *err)
{
	struct rk__xexport *e = find_export(seg, p);

	if (!e || !e->live)
		return rk__err_set(err, ENOENT, "rk_xfer_revoke", "segment %u not exported to it",
				   seg->id);
	return unexport(seg->x, e, timeout_ms, err);
}
