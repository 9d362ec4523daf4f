/*
 * bench_xfer_run.c - the engine of rk bench --op xfer (bench_xfer.h).
 *
 * Client: keeps -t batches in flight, each --batch ops of the run's size
 * posted with one rk_xfer_post_prepared (prepared once per size; the layer chains them, -Q WRs per
 * doorbell, one completion per chain). Busy, it spins on the lanes' shared
 * CQ with ibv_poll_cq alone (as bench_bw does; --poll event or adaptive
 * wait in the CQ's mode instead) and, once something came,
 * hands every completion to rk_xfer_handle and asks each batch in flight
 * whether it ended (rk_xfer_batch_check: no polling of its own, a few
 * loads). A batch that ended is one latency sample (post to end) and its
 * slot takes the next batch at once.
 *
 * Server: without --notify it does nothing during the run (the client's
 * READs and WRITEs need none of its CPU) and waits for the client's DONE
 * on the control channel, as the bandwidth engine's passive side does.
 * With --notify it spins on the CQ, hands what comes to the layer and
 * takes the notifications, until it has one per batch the client's DONE
 * counts. Its DONE then carries the notifications taken, which the client
 * checks against its batches.
 *
 * The layer counts doorbells, WRs, ops, batches and notifications
 * (rk_xfer_stats); each run keeps the deltas for the report.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench_xfer.h"

/* A notification carries the batch's slot in its low bits (tx-depth <= 1024). */
#define SLOT_BITS 10
#define SLOT_MASK ((1u << SLOT_BITS) - 1)
_Static_assert(BENCH_XFER_MAX_DEPTH <= 1u << SLOT_BITS, "slots beyond a notification's bits");

struct xrun {
	uint32_t size;
	uint64_t iters;	 /* batches; 0: for dur_ns */
	uint64_t dur_ns; /* with iters 0 */
	uint64_t end;	 /* tick: duration over */
	int stopping;
	uint64_t posted, done; /* batches */
	uint32_t inflight;
	uint64_t win_t, win_done, win_min; /* peak-rate window (tick, batches, least) */
	double peak_bps;
};

static void stats_delta(const struct rk_xfer_stats *a, const struct rk_xfer_stats *b,
			struct rk_xfer_stats *d)
{
	d->reg_mr = b->reg_mr - a->reg_mr;
	d->dereg_mr = b->dereg_mr - a->dereg_mr;
	d->cache_hits = b->cache_hits - a->cache_hits;
	d->mw_binds = b->mw_binds - a->mw_binds;
	d->mw_invalidates = b->mw_invalidates - a->mw_invalidates;
	d->doorbells = b->doorbells - a->doorbells;
	d->wrs = b->wrs - a->wrs;
	d->ops = b->ops - a->ops;
	d->batches = b->batches - a->batches;
	d->notifs_sent = b->notifs_sent - a->notifs_sent;
	d->notifs_received = b->notifs_received - a->notifs_received;
	d->foreign = b->foreign - a->foreign;
}

/*
 * Op i of slot j: see bench_xfer.h for where its bytes come from and go.
 * Each slot's batch is the same on every post: prepared once per size
 * (rk_xfer_prepare: checked and planned, its WRs built) and posted with
 * rk_xfer_post_prepared.
 */
static int build_ops(struct bench_ctx *c, uint32_t size, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	struct bench_xfer *b = c->xfer;
	int read = p->xfer_op == BENCH_XFER_READ;

	for (uint32_t j = 0; j < p->tx_depth; j++)
		for (uint32_t i = 0; i < p->batch; i++) {
			struct rk_xfer_op *op = &b->ops[(size_t)j * p->batch + i];
			uint64_t big = ((uint64_t)j * p->batch + i) * size,
				 small = (uint64_t)i * size;

			op->op = read ? RK_XFER_OP_READ : RK_XFER_OP_WRITE;
			op->local = b->seg;
			op->remote = b->remote;
			op->len = size;
			op->local_off = read ? big : small;
			op->remote_off = read ? small : big;
		}
	for (uint32_t j = 0; j < p->tx_depth; j++) {
		int r;

		rk_xfer_prep_free(b->slots[j].prep);
		b->slots[j].prep = NULL;
		r = rk_xfer_prepare(b->peer, &b->ops[(size_t)j * p->batch], p->batch, err,
				    &b->slots[j].prep);
		if (r)
			return r;
	}
	return 0;
}

/* --verify: slot @slot's landing place holds the pattern. */
static int check_slot(struct bench_ctx *c, uint32_t slot, uint32_t size, uint64_t batch,
		      struct rk_error *err)
{
	size_t len = (size_t)c->p->batch * size;
	const uint8_t *at = c->xfer->mem + (size_t)slot * len;

	if (memcmp(at, c->xfer->ref, len) == 0)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (at[i] != c->xfer->ref[i])
			return bench_fail(err, EIO,
					  "--verify: batch %llu (slot %u), byte %zu of op %zu: "
					  "0x%02x, expected 0x%02x",
					  (unsigned long long)batch, slot, i % size, i / size,
					  at[i], c->xfer->ref[i]);
	return 0;
}

/* Hand @n completions (wr_ids translated) to the layer; one not its own is an error. */
static int hand_over(struct bench_ctx *c, int n, struct rk_error *err)
{
	for (int i = 0; i < n; i++) {
		c->xfer->cqes += c->wc[i].wr_id >> 48 == RK_XFER_WRID_OP;
		if (!rk_xfer_handle(c->xfer->x, &c->wc[i])) {
			if (c->wc[i].status != IBV_WC_SUCCESS)
				return bench_wc_failed(&c->wc[i], err);
			return bench_fail(err, EPROTO,
					  "a completion the one-sided layer does not know "
					  "(wr_id 0x%llx)",
					  (unsigned long long)c->wc[i].wr_id);
		}
	}
	return 0;
}

/*
 * Completions, handed to the layer: the count (0: none) or an error.
 * busy: one ibv_poll_cq, translated (rk_cq_take) only once something came;
 * event, adaptive: a wait of up to 10 ms in the CQ's mode (bench_poll_wait).
 */
static inline int xpoll(struct bench_ctx *c, struct rk_error *err)
{
	int n, r;

	if (c->l->poll == RK_WAIT_BUSY) {
		n = ibv_poll_cq(c->vcq, BENCH_WC_BATCH, c->wc);
		if (__builtin_expect(n <= 0, 1))
			return n < 0 ? bench_poll_failed(err) : 0;
		n = rk_cq_take(c->cq, c->wc, n);
	} else {
		n = bench_poll_wait(c, err);
		if (n <= 0)
			return n;
	}
	r = hand_over(c, n, err);
	return r ? r : n;
}

/* The batches in flight that ended: sampled, checked, their slots freed. */
static int reap(struct bench_ctx *c, struct xrun *s, uint64_t t, struct bench_run *out,
		struct rk_error *err)
{
	const struct bench_params *p = c->p;
	struct bench_xfer *b = c->xfer;

	for (uint32_t j = 0; j < p->tx_depth && s->inflight; j++) {
		int r;

		if (!b->slots[j].b)
			continue;
		r = rk_xfer_batch_check(b->slots[j].b, err);
		if (r == 0)
			continue;
		if (r < 0)
			return r;
		if (out->hist)
			bench_sample(out, b->slots[j].t0, t);
		if (p->verify && p->xfer_op == BENCH_XFER_READ) {
			r = check_slot(c, j, s->size, s->done, err);
			if (r)
				return r;
			memset(b->mem + (size_t)j * p->batch * s->size, 0,
			       (size_t)p->batch * s->size);
		}
		rk_xfer_batch_free(b->slots[j].b);
		b->slots[j].b = NULL;
		s->inflight--;
		s->done++;
	}
	return 0;
}

/* Fill the free slots with batches. */
static int post_batches(struct bench_ctx *c, struct xrun *s, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	struct bench_xfer *b = c->xfer;
	struct rk_xfer_batch_opts bo = {.timeout_ms = bench_step_ms(c), .notify = (int)p->notify};

	for (uint32_t j = 0; j < p->tx_depth; j++) {
		int r;

		if (s->inflight == p->tx_depth || s->stopping ||
		    (s->iters && s->posted >= s->iters))
			return 0;
		if (b->slots[j].b)
			continue;
		/* The slot, for the server's --verify; the batch's number above it. */
		bo.notif = (uint32_t)(s->posted << SLOT_BITS) | j;
		/* Before the post: on Soft-RoCE the post itself moves data. */
		b->slots[j].t0 = bench_ticks();
		/*
		 * --notify: rk_xfer_post, whose one-lane WRITE batch carries its
		 * notification in the last chain's doorbell (a prepared batch
		 * posts it after, one doorbell more).
		 */
		r = p->notify ? rk_xfer_post(b->peer, &b->ops[(size_t)j * p->batch], p->batch, &bo,
					     err, &b->slots[j].b)
			      : rk_xfer_post_prepared(b->slots[j].prep, &bo, err, &b->slots[j].b);
		if (r)
			return r;
		s->inflight++;
		s->posted++;
	}
	return 0;
}

static void update_peak(struct xrun *s, uint64_t t, uint64_t batch_bytes)
{
	uint64_t n = s->done - s->win_done, dt;
	double bps;

	if (n < s->win_min)
		return;
	dt = bench_ticks_ns(s->win_t, t);
	if (dt < 1000000)
		return;
	bps = (double)n * (double)batch_bytes * 8.0 * 1e9 / (double)dt;
	if (bps > s->peak_bps)
		s->peak_bps = bps;
	s->win_t = t;
	s->win_done = s->done;
}

static int run_client(struct bench_ctx *c, struct xrun *s, struct bench_run *out,
		      struct rk_error *err)
{
	const struct bench_params *p = c->p;
	uint64_t batch_bytes = (uint64_t)p->batch * s->size;
	uint64_t t0, t_end, cpu0, cpu_end;
	struct bench_watch w;
	int r;

	r = build_ops(c, s->size, err);
	if (r)
		return r;
	cpu0 = bench_cpu_ns();
	t0 = bench_ticks();
	s->end = t0 + bench_ticks_for(s->dur_ns);
	s->win_t = t0;
	s->win_min = s->iters / 64 > p->tx_depth ? s->iters / 64 : p->tx_depth;
	bench_watch_start(&w, c, bench_ns_at(t0));
	for (;;) {
		uint64_t t;
		int n;

		r = post_batches(c, s, err);
		if (r)
			return r;
		n = xpoll(c, err);
		t = bench_ticks();
		if (n < 0)
			return n;
		if (n > 0) {
			r = reap(c, s, t, out, err);
			if (r)
				return r;
			update_peak(s, t, batch_bytes);
		}
		if (!s->iters && !s->stopping && t >= s->end)
			s->stopping = 1;
		if (s->iters ? s->done == s->iters : s->stopping && !s->inflight) {
			t_end = t;
			break;
		}
		r = bench_watch_tick(c, &w, t, s->posted + s->done, "waiting for batches", err);
		if (r)
			return r;
	}
	cpu_end = bench_cpu_ns();
	r = bench_send_done(c, s->done * p->batch, err);
	if (r)
		return r;
	w.passive = 1;
	r = bench_wait_peer(c, &w, "waiting for the server's count", err);
	if (r)
		return r;
	if (w.peer_count != (p->notify ? s->done : 0))
		return bench_fail(err, EPROTO, "the server took %llu notifications, %llu expected",
				  (unsigned long long)w.peer_count,
				  (unsigned long long)(p->notify ? s->done : 0));
	out->tx_msgs = s->done * p->batch;
	out->rx_msgs = s->done;
	out->peer_count = w.peer_count;
	out->wall_ns = bench_ticks_ns(t0, t_end);
	out->cpu_ns = cpu_end - cpu0;
	out->peak_bps = s->peak_bps;
	if (out->wall_ns && s->done) {
		double avg =
		    (double)s->done * (double)batch_bytes * 8.0 * 1e9 / (double)out->wall_ns;

		if (out->peak_bps < avg)
			out->peak_bps = avg;
	}
	return 0;
}

/* Server, --notify: take notifications until one per batch the client counted. */
static int take_notifs(struct bench_ctx *c, struct xrun *s, struct bench_watch *w,
		       struct rk_error *err)
{
	const struct bench_params *p = c->p;
	int check = p->verify && p->xfer_op == BENCH_XFER_WRITE;

	for (;;) {
		uint32_t v;
		int n, r;

		while (rk_xfer_notif_take(c->xfer->peer, &v)) {
			s->done++;
			/* "Notified" implies "landed": the batch's data is in place now. */
			if ((v & SLOT_MASK) >= p->tx_depth)
				return bench_fail(err, EPROTO, "a notification for slot %u of %u",
						  v & SLOT_MASK, p->tx_depth);
			r = check ? check_slot(c, v & SLOT_MASK, s->size, v >> SLOT_BITS, err) : 0;
			if (r)
				return r;
		}
		if (w->peer_done && s->done == w->peer_count / p->batch)
			return 0;
		if (w->peer_done && s->done > w->peer_count / p->batch)
			return bench_fail(err, EPROTO, "%llu notifications for %llu batches",
					  (unsigned long long)s->done,
					  (unsigned long long)(w->peer_count / p->batch));
		n = xpoll(c, err);
		if (n < 0)
			return n;
		r = bench_watch_tick(c, w, bench_ticks(), s->done, "taking notifications", err);
		if (r)
			return r;
	}
}

static int run_server(struct bench_ctx *c, struct xrun *s, struct bench_run *out,
		      struct rk_error *err)
{
	const struct bench_params *p = c->p;
	uint64_t t0, cpu0, batches;
	struct bench_watch w;
	int r;

	cpu0 = bench_cpu_ns();
	t0 = bench_ticks();
	bench_watch_start(&w, c, bench_ns_at(t0));
	w.passive = 1;
	r = p->notify ? take_notifs(c, s, &w, err)
		      : bench_wait_peer(c, &w, "waiting for the client's batches", err);
	if (r)
		return r;
	if (w.peer_count % p->batch || (s->iters && w.peer_count != s->iters * p->batch))
		return bench_fail(err, EPROTO, "the client counts %llu ops, not %s batches of %u",
				  (unsigned long long)w.peer_count,
				  s->iters ? "the run's" : "whole", p->batch);
	batches = w.peer_count / p->batch;
	/* Every slot that took a batch holds the pattern once the client's batches ended. */
	for (uint64_t j = 0;
	     p->verify && p->xfer_op == BENCH_XFER_WRITE && j < p->tx_depth && j < batches; j++) {
		r = check_slot(c, (uint32_t)j, s->size, j, err);
		if (r)
			return r;
	}
	out->wall_ns = bench_ticks_ns(t0, bench_ticks());
	out->cpu_ns = bench_cpu_ns() - cpu0;
	out->tx_msgs = out->rx_msgs = s->done;
	out->peer_count = w.peer_count;
	return bench_send_done(c, s->done, err);
}

int bench_xfer_run(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		   struct bench_run *out, struct rk_error *err)
{
	struct xrun s = {.size = size, .iters = iters, .dur_ns = dur_ns};
	struct rk_xfer_stats s0, s1;
	int r;

	rk_xfer_stats(c->xfer->x, &s0);
	c->xfer->cqes = 0;
	r = c->is_client ? run_client(c, &s, out, err) : run_server(c, &s, out, err);
	rk_xfer_stats(c->xfer->x, &s1);
	stats_delta(&s0, &s1, &c->xfer->run);
	if (!r && !out->wall_ns)
		out->wall_ns = 1;
	return r;
}
