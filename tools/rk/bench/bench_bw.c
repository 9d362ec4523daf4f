/*
 * bench_bw.c - the bandwidth engine.
 *
 * The sending side keeps every QP's send queue as full as --tx-depth
 * allows, --batch WRs per ibv_post_send, and learns what completed from
 * the signaled WRs only (--cq-mod): a completion's wr_id carries the QP
 * and the sequence number, and everything before it on that QP is done
 * too. The last WR of a run is always signaled so the end is seen.
 *
 * Large messages are signaled at least every BENCH_SIGNAL_BYTES as well:
 * cq-mod 100 of 8 MiB would be one completion per 800 MiB, over a minute
 * on a slow link, and the watchdog could not tell that from a stall. A
 * completion per MiB costs nothing next to moving the MiB.
 *
 * The watchdog (and with it the heartbeat the passive peer lives on) is
 * looked at between posts too, not only between polls: on Soft-RoCE a
 * post runs the requester in the poster's own system call, one whole
 * message per doorbell, so filling a queue of 8 MiB messages takes tens
 * of seconds of posting. Heartbeats come from this loop rather than a
 * thread of their own, so they also say that the engine still moves.
 *
 * The receiving side (send, write-imm) posts its consumed receives again
 * REPOST_BATCH at a time per QP, in one ibv_post_recv, from a chain of
 * receives prepared once per QP (rk_prepare_recv): a post writes only the
 * receives' sequence numbers and ids (about 10 instructions each), and the
 * provider takes about 85 per receive in a chain against 122 alone. At
 * most REPOST_BATCH - 1 (or half the receive queue) wait per QP, so the
 * rest stay posted and the sender keeps finding receives; the end of a
 * run posts what is left, for the next run. A receiver that only
 * receives, busy, runs a loop of its own (receive_busy). A side with
 * nothing to post or receive (the target of write or read) just waits
 * for the peer's DONE on the control channel, using no CPU, as perftest's
 * server does.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench_run.h"

/* Between posts the watchdog looks every POSTS_PER_CHECK, or after each that moves 64 KiB. */
#define POSTS_PER_CHECK	 16u
#define POST_CHECK_BYTES (64u << 10)

/* Consumed receives posted again together, per QP (at most half the receive queue). */
#define REPOST_BATCH 32u

/*
 * Times here are raw clock ticks (bench_clock.h), compared with deadlines
 * converted once: the loop reads the clock after every poll, and a
 * conversion to ns costs a floating-point multiply, a library call under
 * emulation. The watchdog gets ns every BENCH_CHECK_NS.
 */
struct bw_state {
	uint32_t size;
	uint64_t iters;		  /* per QP; 0: duration mode */
	uint64_t end;		  /* tick: duration over */
	int stopping;		  /* duration over: post one last signaled WR per QP */
	uint32_t sig_every;	  /* signal every this many WRs; 0: cq-mod (the library) */
	uint32_t posts_unchecked; /* posts since the watchdog last looked */
	uint64_t posted_total, done_total, rx_total;
	uint64_t win_t, win_msgs, win_min; /* peak-rate window (tick, count, least) */
	double peak_bps;
	uint32_t repost_min;		  /* consumed receives that make a batch */
	uint16_t to_repost[BENCH_MAX_QP]; /* per QP: consumed, not yet posted */
};

static enum rk_op rk_op_of(uint32_t op)
{
	switch (op) {
	case BENCH_OP_SEND:
		return RK_OP_SEND;
	case BENCH_OP_WRITE_IMM:
		return RK_OP_WRITE_IMM;
	case BENCH_OP_READ:
		return RK_OP_READ;
	default:
		return RK_OP_WRITE;
	}
}

/* The WRs of one batch for QP @q; only wr_id and flags change per post. */
static void build_templates(struct bench_ctx *c, struct bench_qp *q, uint32_t size)
{
	for (uint32_t i = 0; i < c->p->batch; i++) {
		struct rk_wr *w = &q->wrs[i];

		memset(w, 0, sizeof(*w));
		w->op = rk_op_of(c->p->op);
		w->len = size;
		w->lkey = c->lkey;
		w->rkey = c->peer.buf_rkey;
		w->imm = q->index;
		if (c->p->op == BENCH_OP_READ) {
			/* Read the peer's send region into ours for this QP. */
			w->addr = q->rx;
			w->remote_addr = c->peer.buf_addr;
		} else {
			w->addr = c->base;
			w->remote_addr = q->remote_rx;
		}
	}
}

/* Grows while the run moves: WRs posted, sends completed, messages received. */
static uint64_t progress(const struct bw_state *s)
{
	return s->posted_total + s->done_total + s->rx_total;
}

/*
 * Post what fits on QP @q. Returns 0 or an error. What stays the same for
 * the call is read once into locals, and the QP's count is kept in a
 * register between posts: everything in memory would be read again after
 * each rk_post (which could have changed it, for all the compiler knows).
 */
static int post_qp(struct bench_ctx *c, struct bench_qp *q, struct bw_state *s, int *final_done,
		   struct bench_watch *w, struct rk_error *err)
{
	const uint32_t batch = c->p->batch, depth = c->p->tx_depth, sig = s->sig_every;
	const uint64_t iters = s->iters, id_hi = (uint64_t)q->index << BENCH_SEQ_BITS;
	struct rk_conn *conn = q->conn;
	struct rk_wr *wrs = q->wrs;
	uint64_t posted = q->posted;

	for (;;) {
		uint64_t left = iters ? iters - posted : batch;
		uint32_t n = left < batch ? (uint32_t)left : batch;
		int last, r;

		if (*final_done || n == 0)
			return 0;
		if (s->stopping) {
			/* Nothing outstanding: nothing left to flush out. */
			if (posted == q->done) {
				*final_done = 1;
				return 0;
			}
			n = 1;
		}
		/* tx-depth in flight at most; the queue is deeper (bench_sq_depth). */
		if (posted + n - q->done > depth || rk_sq_room(conn) < n)
			return 0;
		last = s->stopping || (iters && posted + n == iters);
		if (q->prep && n == batch && !sig) {
			/* A whole batch, signaled by the library's rule: the prepared chain. */
			r = rk_post_prepared(q->prep, id_hi | posted, last ? RK_WR_SIGNALED : 0,
					     err);
		} else {
			for (uint32_t i = 0; i < n; i++) {
				uint64_t seq = posted + i;

				wrs[i].wr_id = id_hi | seq;
				wrs[i].flags = sig && (seq + 1) % sig == 0 ? RK_WR_SIGNALED : 0;
			}
			if (last)
				wrs[n - 1].flags = RK_WR_SIGNALED;
			/* One WR: rk_post, which has no chain to build. */
			r = n == 1 ? (rk_post(conn, wrs, err) ?: 1)
				   : rk_post_list(conn, wrs, n, err);
		}
		if (r != (int)n)
			return r < 0 ? r : -EIO;
		posted += n;
		q->posted = posted;
		s->posted_total += n;
		if (s->stopping)
			*final_done = 1;
		/* A clock reading per post only where a post moves enough data. */
		if (++s->posts_unchecked >= POSTS_PER_CHECK ||
		    (uint64_t)s->size * n >= POST_CHECK_BYTES) {
			s->posts_unchecked = 0;
			r = bench_watch_tick(c, w, bench_ticks(), progress(s), "posting", err);
			if (r)
				return r;
		}
	}
}

/* Post QP @qi's consumed receives again, in one chain: its prepared receives. */
static __attribute__((noinline)) int repost(struct bench_ctx *c, struct bw_state *s, uint32_t qi,
					    struct rk_error *err)
{
	unsigned n = s->to_repost[qi];
	int r = rk_post_recv_prepared(c->qps[qi].rprep, 0, n, err);

	if (r != (int)n)
		return r < 0 ? r : -EIO;
	s->to_repost[qi] = 0;
	return 0;
}

/* The end of a run: every QP's receives posted again, for the next run. */
static int repost_all(struct bench_ctx *c, struct bw_state *s, struct rk_error *err)
{
	for (uint32_t i = 0; i < c->p->num_qp; i++) {
		int r = s->to_repost[i] ? repost(c, s, i, err) : 0;

		if (r)
			return r;
	}
	return 0;
}

static void receives_init(struct bench_ctx *c, struct bw_state *s)
{
	s->repost_min = c->p->rx_depth / 2 < REPOST_BATCH ? c->p->rx_depth / 2 : REPOST_BATCH;
	if (!s->repost_min)
		s->repost_min = 1;
}

static int handle_completions(struct bench_ctx *c, int n, struct bw_state *s, struct rk_error *err)
{
	const uint32_t nqp = c->p->num_qp;

	for (int i = 0; i < n; i++) {
		const struct ibv_wc *wc = &c->wc[i];

		if (wc->opcode & IBV_WC_RECV) {
			/* The receive's wr_id is its QP's index (bench_qp.c). */
			uint64_t qi = wc->wr_id;
			int r;

			if (__builtin_expect(qi >= nqp, 0))
				return bench_fail(err, EPROTO, "receive for unknown QP %llu",
						  (unsigned long long)qi);
			c->qps[qi].recvd++;
			s->rx_total++;
			if (++s->to_repost[qi] >= s->repost_min) {
				r = repost(c, s, (uint32_t)qi, err);
				if (r)
					return r;
			}
		} else {
			uint64_t qi = wc->wr_id >> BENCH_SEQ_BITS, seq = wc->wr_id & BENCH_SEQ_MASK;
			struct bench_qp *q;

			if (qi >= nqp)
				return bench_fail(err, EPROTO, "completion for unknown QP %llu",
						  (unsigned long long)qi);
			q = &c->qps[qi];
			if (seq + 1 > q->done) {
				s->done_total += seq + 1 - q->done;
				q->done = seq + 1;
			}
		}
	}
	return 0;
}

/* Passes of receive_busy() between two looks at the clock and the watchdog. */
#define RECV_PASSES_PER_CHECK 64u

/*
 * receive_busy - the passive receiver (send, write-imm; busy polling): take
 * the messages and post the receives again until the peer's DONE says how
 * many it sent and they have all come. What the sender's loop does on
 * every pass (the clock, the watchdog's compare, the peak rate, the
 * sender's books) is left out: the clock and the watchdog are looked at
 * every RECV_PASSES_PER_CHECK passes, empty or not, which is also where
 * the DONE is seen (the watchdog reads the control channel) and the
 * heartbeats go. The count lives in a register. Returns 0 with *@t_end the
 * clock reading that saw the end, or an error.
 */
static int receive_busy(struct bench_ctx *c, struct bw_state *s, struct bench_watch *w,
			uint64_t *t_end, struct rk_error *err)
{
	struct ibv_cq *const vcq = c->vcq;
	struct rk_cq *const cq = c->cq;
	struct ibv_wc *const wc = c->wc;
	const uint32_t nqp = c->p->num_qp, min = s->repost_min;
	uint64_t rx = s->rx_total, t;
	int r;

	for (unsigned pass = 1;; pass++) {
		int n = ibv_poll_cq(vcq, BENCH_WC_BATCH, wc);

		if (n > 0) {
			n = rk_cq_take(cq, wc, n);
			for (int i = 0; i < n; i++) {
				/* The receive's wr_id is its QP's index (bench_qp.c). */
				uint64_t qi = wc[i].wr_id;

				if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0))
					return bench_wc_failed(&wc[i], err);
				if (__builtin_expect(!(wc[i].opcode & IBV_WC_RECV) || qi >= nqp, 0))
					return bench_fail(
					    err, EPROTO,
					    "completion (opcode %d) for unknown QP %llu",
					    (int)wc[i].opcode, (unsigned long long)qi);
				rx++;
				if (++s->to_repost[qi] >= min) {
					r = repost(c, s, (uint32_t)qi, err);
					if (r)
						return r;
				}
			}
		} else if (__builtin_expect(n < 0, 0)) {
			return bench_poll_failed(err);
		}
		if (pass % RECV_PASSES_PER_CHECK)
			continue;
		t = bench_ticks();
		s->rx_total = rx;
		r = bench_watch_tick(c, w, t, rx, "waiting for the peer's messages", err);
		if (r)
			return r;
		if (w->peer_done && rx >= w->peer_count) {
			*t_end = t;
			return 0;
		}
	}
}

static void update_peak(struct bw_state *s, uint64_t t)
{
	uint64_t msgs = s->done_total - s->win_msgs, dt;
	double bps;

	if (msgs < s->win_min)
		return;
	dt = bench_ticks_ns(s->win_t, t);
	if (dt < 1000000)
		return;
	bps = (double)msgs * s->size * 8.0 * 1e9 / (double)dt;
	if (bps > s->peak_bps)
		s->peak_bps = bps;
	s->win_t = t;
	s->win_msgs = s->done_total;
}

static int all_done(const struct bench_ctx *c, const struct bw_state *s, const int *finals)
{
	for (uint32_t i = 0; i < c->p->num_qp; i++) {
		const struct bench_qp *q = &c->qps[i];

		if (s->iters ? q->done < s->iters : (!finals[i] || q->done < q->posted))
			return 0;
	}
	return 1;
}

static int bw_run(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		  struct bench_run *out, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	int tx = c->is_client || p->bidir, tx_done = !tx, r = 0;
	int finals[BENCH_MAX_QP] = {0};
	struct bw_state s = {.size = size, .iters = iters};
	struct bench_watch w;
	uint64_t t0, cpu0, cpu_end = 0, t_end, t = 0;

	for (uint32_t i = 0; i < p->num_qp; i++)
		c->qps[i].posted = c->qps[i].done = c->qps[i].recvd = 0;
	if (c->receives)
		receives_init(c, &s);
	if (BENCH_SIGNAL_BYTES / size < bench_signal_every(p))
		s.sig_every = BENCH_SIGNAL_BYTES / size ? BENCH_SIGNAL_BYTES / size : 1;
	cpu0 = bench_cpu_ns();
	t0 = t_end = bench_ticks();
	s.end = t0 + bench_ticks_for(dur_ns);
	s.win_t = t0;
	s.win_min = iters ? iters * p->num_qp / 64 : 0;
	if (s.win_min < (uint64_t)p->tx_depth * p->num_qp)
		s.win_min = (uint64_t)p->tx_depth * p->num_qp;
	bench_watch_start(&w, c, bench_ns_at(t0));
	w.passive = !tx;
	if (!tx) {
		r = bench_send_done(c, 0, err);
		if (r)
			return r;
		if (!c->receives) {
			r = bench_wait_peer(c, &w, "waiting for the sender to finish", err);
			if (r)
				return r;
			out->wall_ns = w.peer_done_ns - w.start_ns;
			goto out;
		}
		if (c->l->poll == RK_WAIT_BUSY) {
			r = receive_busy(c, &s, &w, &t_end, err);
			if (r)
				return r;
			goto received;
		}
	}
	for (;;) {
		int n;

		if (!tx_done) {
			for (uint32_t i = 0; i < p->num_qp; i++) {
				r = post_qp(c, &c->qps[i], &s, &finals[i], &w, err);
				if (r)
					return r;
			}
		}
		n = bench_poll(c, err);
		if (n < 0)
			return n;
		t = bench_ticks();
		if (n > 0) {
			r = handle_completions(c, n, &s, err);
			if (r)
				return r;
			update_peak(&s, t);
		}
		if (!iters && !s.stopping && t >= s.end)
			s.stopping = 1;
		if (!tx_done && all_done(c, &s, finals)) {
			tx_done = 1;
			t_end = t;
			cpu_end = bench_cpu_ns();
			r = bench_send_done(c, s.done_total, err);
			if (r)
				return r;
			w.passive = 1;
		}
		if (tx_done && w.peer_done && (!c->receives || s.rx_total >= w.peer_count))
			break;
		r = bench_watch_tick(
		    c, &w, t, progress(&s),
		    tx_done ? "waiting for the peer's messages" : "waiting for completions", err);
		if (r)
			return r;
	}
	if (!tx)
		t_end = t;
received:
	r = c->receives ? repost_all(c, &s, err) : 0;
	if (r)
		return r;
	if (c->receives && s.rx_total != w.peer_count)
		return bench_fail(err, EPROTO, "received %llu messages, the peer sent %llu",
				  (unsigned long long)s.rx_total, (unsigned long long)w.peer_count);
	out->wall_ns = bench_ticks_ns(t0, t_end);
out:
	if (!out->wall_ns)
		out->wall_ns = 1;
	out->tx_msgs = s.done_total;
	out->rx_msgs = s.rx_total;
	out->peer_count = w.peer_count;
	/* Over the wall time's window: a sender's ends with its last completion. */
	out->cpu_ns = (cpu_end ? cpu_end : bench_cpu_ns()) - cpu0;
	out->peak_bps = s.peak_bps;
	if (out->tx_msgs) {
		double avg = (double)out->tx_msgs * size * 8.0 * 1e9 / (double)out->wall_ns;

		if (out->peak_bps < avg)
			out->peak_bps = avg;
	}
	return 0;
}

/*
 * The run, with each QP's batch prepared (rk_prepare) when it sends: a
 * post then writes wr_ids and signal bits only, as perftest's loop does.
 * A side that receives prepares REPOST_BATCH receives per QP
 * (rk_prepare_recv), all into the QP's region with its index as wr_id, as
 * bench_qp.c posted the first ones.
 */
int bench_bw_run(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		 struct bench_run *out, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	struct rk_error e;
	int r;

	r = 0;
	for (uint32_t i = 0; i < p->num_qp; i++) {
		build_templates(c, &c->qps[i], size);
		/* Not prepared (a batch deeper than the queue): rk_post_list says why. */
		if (c->is_client || p->bidir)
			(void)rk_prepare(c->qps[i].conn, c->qps[i].wrs, p->batch, &e,
					 &c->qps[i].prep);
		if (c->receives && !r)
			r = bench_prepare_recv(c, &c->qps[i], REPOST_BATCH, err);
	}
	r = r ?: bw_run(c, size, iters, dur_ns, out, err);
	for (uint32_t i = 0; i < p->num_qp; i++) {
		rk_prepared_free(c->qps[i].prep);
		c->qps[i].prep = NULL;
		rk_recv_prepared_free(c->qps[i].rprep);
		c->qps[i].rprep = NULL;
	}
	return r;
}
