/*
 * bench_lat.c - the latency engine: one message in flight at a time.
 *
 * send, write-imm: a ping-pong of SENDs (WRITE_IMMs); each side waits for
 * the receive completion of the other's message before answering.
 * Latency is half the round trip. The one-sided ops, read and write, have
 * their loops in bench_lat_onesided.c; this file runs them too.
 *
 * Both ends finish with DONE and their counts, which must agree.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "bench_lat.h"

#define REPOST_BATCH 32u

void bench_lat_reset(struct bench_ctx *c, uint32_t size)
{
	memset(c->base, 0, size);
	memset(c->qps[0].rx, 0, size);
}

static void build_wr(struct bench_ctx *c, struct lat_state *s)
{
	struct bench_qp *q = &c->qps[0];
	struct rk_wr *w = &s->wr;

	s->repost_min = c->p->rx_depth / 2 < REPOST_BATCH ? c->p->rx_depth / 2 : REPOST_BATCH;
	if (!s->repost_min)
		s->repost_min = 1;

	memset(w, 0, sizeof(*w));
	w->len = s->size;
	w->lkey = c->lkey;
	w->rkey = c->peer.buf_rkey;
	w->addr = c->base;
	w->remote_addr = q->remote_rx;
	switch (c->p->op) {
	case BENCH_OP_SEND:
		w->op = RK_OP_SEND;
		break;
	case BENCH_OP_WRITE_IMM:
		w->op = RK_OP_WRITE_IMM;
		break;
	case BENCH_OP_READ:
		w->op = RK_OP_READ;
		w->addr = q->rx;
		w->remote_addr = c->peer.buf_addr;
		w->flags = RK_WR_SIGNALED; /* its completion is the measurement */
		break;
	default:
		w->op = RK_OP_WRITE;
		break;
	}
}

/*
 * Take completions and count receives. They are reposted later, by
 * repost(), once the answer is on its way: the peer cannot send again
 * before it has our answer, and rx-depth receives are posted anyway.
 */
static int reap(struct bench_ctx *c, struct lat_state *s, struct rk_error *err)
{
	int n = bench_poll(c, err);

	for (int i = 0; i < n; i++)
		if (c->wc[i].opcode & IBV_WC_RECV)
			s->pending_rx++;
	return n;
}

/*
 * Post the consumed receives again once @min of them have gathered: a
 * batch goes in one ibv_post_recv, from the receives prepared once
 * (bench_prepare_recv), a third cheaper per receive than posting each
 * alone. At most REPOST_BATCH (or half the
 * receive queue) wait, and in a ping-pong only one message is ever on its
 * way to us, so receives stay posted. The end of a run flushes (@min 1).
 */
static __attribute__((noinline)) int repost_batch(struct bench_ctx *c, struct lat_state *s,
						  uint64_t min, struct rk_error *err)
{
	struct bench_qp *q = &c->qps[0];

	while (s->to_repost >= min && s->to_repost) {
		unsigned n = s->to_repost < REPOST_BATCH ? (unsigned)s->to_repost : REPOST_BATCH;
		int r = rk_post_recv_prepared(q->rprep, 0, n, err);

		if (r != (int)n)
			return r < 0 ? r : -EIO;
		q->recvd += n;
		s->to_repost -= n;
	}
	return 0;
}

static inline __attribute__((always_inline)) int repost(struct bench_ctx *c, struct lat_state *s,
							uint64_t min, struct rk_error *err)
{
	return s->to_repost < min || !s->to_repost ? 0 : repost_batch(c, s, min, err);
}

/*
 * A wait longer than this yields the CPU between polls. Both ends spin,
 * and on a machine with as few CPUs as spinners (the sandbox: two), kernel
 * work the message needs (rxe's packet processing, once deferred to
 * ksoftirqd) would otherwise run only when the scheduler tick preempts a
 * spinner: every round trip then takes a tick (4 ms), for a whole run.
 * Twice a 4 KiB round trip in the sandbox (about 120 us), so that up to
 * there a normal wait never pays the system call.
 */
#define YIELD_AFTER_NS 250000ull

/* Never inlined: bench/cost leaves the watchdog's waiting out by its name. */
__attribute__((noinline)) int bench_lat_tick(struct bench_ctx *c, struct lat_state *s,
					     const char *what, struct rk_error *err)
{
	uint64_t t = bench_ticks();
	int r;

	if (t > s->wait_from + s->yield_ticks)
		sched_yield();
	r = bench_watch_tick(c, &s->w, t, s->count, what, err);
	if (r)
		return r;
	if (!c->is_client && s->w.peer_done) {
		if (s->w.peer_count != s->count)
			return bench_fail(err, EPROTO, "the client sent %llu pings, %llu arrived",
					  (unsigned long long)s->w.peer_count,
					  (unsigned long long)s->count);
		return 1;
	}
	return 0;
}

/* Unsignaled WRs hold slots until a signaled one retires them: reap, post again. */
static __attribute__((noinline)) int post_full(struct bench_ctx *c, struct lat_state *s,
					       struct rk_error *err)
{
	struct rk_conn *conn = c->qps[0].conn;
	int r;

	s->wait_from = bench_ticks();
	do {
		r = reap(c, s, err);
		if (r < 0)
			return r;
		r = bench_lat_tick(c, s, "waiting for send completions", err);
		if (r)
			return r < 0 ? r : bench_fail(err, EPROTO, "the peer stopped mid-run");
	} while (rk_sq_room(conn) == 0);
	r = rk_post_prepared(s->prep, s->count, 0, err);
	return r == 1 ? 0 : r;
}

static inline __attribute__((always_inline)) int post(struct bench_ctx *c, struct lat_state *s,
						      struct rk_error *err)
{
	int r = rk_post_prepared(s->prep, s->count, 0, err);

	if (__builtin_expect(r == 1, 1))
		return 0;
	return r != -ENOBUFS ? r : post_full(c, s, err);
}

/*
 * Wait for the peer's message: 0 arrived, 1 the run is over, or an error.
 * The clock and the control channel are looked at every 64th empty poll
 * only: the spin must notice the message as soon as it lands. Busy, an
 * empty pass is one call, into the provider (rk_cq_take only sees what
 * came), and the clock is first read when the wait turns out to be long.
 * Inline, as post() and repost(): the loops of run_client() and
 * run_server() are then one function with calls only into the library.
 */
static inline __attribute__((always_inline)) int
wait_message(struct bench_ctx *c, struct lat_state *s, struct rk_error *err)
{
	int busy = c->l->poll == RK_WAIT_BUSY;
	int r;

	s->wait_from = 0;
	for (unsigned spins = 1;; spins++) {
		if (s->pending_rx) {
			s->pending_rx--;
			s->to_repost++;
			return 0;
		}
		if (busy) {
			r = ibv_poll_cq(c->vcq, BENCH_WC_BATCH, c->wc);
			if (r > 0) {
				const struct ibv_wc *wc = c->wc;
				uint64_t got = 0;

				r = rk_cq_take(c->cq, c->wc, r);
				for (int i = 0; i < r; i++) {
					if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0))
						return bench_wc_failed(&wc[i], err);
					got += (wc[i].opcode & IBV_WC_RECV) != 0;
				}
				s->pending_rx += got;
				continue;
			}
			if (r < 0)
				return bench_poll_failed(err);
			if (spins & 63)
				continue;
			if (!s->wait_from)
				s->wait_from = bench_ticks();
		} else {
			if (!s->wait_from)
				s->wait_from = bench_ticks();
			r = reap(c, s, err);
			if (r > 0 || (r == 0 && (spins & 63)))
				continue;
			if (r < 0)
				return r;
		}
		r = bench_lat_tick(
		    c, s, c->is_client ? "waiting for the pong" : "waiting for a ping", err);
		if (r)
			return r;
	}
}

__attribute__((noinline)) int bench_lat_wait_tick(struct bench_ctx *c, struct lat_state *s,
						  unsigned spins, uint64_t count, const char *what,
						  struct rk_error *err)
{
	int r;

	if (spins == 64)
		s->wait_from = bench_ticks();
	s->count = count;
	r = bench_lat_tick(c, s, what, err);
	return r < 0 ? r : r ? bench_fail(err, EPROTO, "the peer stopped mid-run") : 0;
}

/*
 * Post round trip @count's prepared WR; on a full send queue, post_full()
 * with the loop's locals given back to @s (and @pending, its receives
 * waiting, read again). Inlined: the loops' locals stay in registers.
 */
static inline __attribute__((always_inline)) int post_one(struct bench_ctx *c, struct lat_state *s,
							  struct rk_prepared *prep, uint64_t count,
							  uint64_t *pending, struct rk_error *err)
{
	int r = rk_post_prepared(prep, count, 0, err);

	if (__builtin_expect(r == 1, 1))
		return 0;
	if (r != -ENOBUFS)
		return r;
	s->count = count;
	s->pending_rx = *pending;
	r = post_full(c, s, err);
	*pending = s->pending_rx;
	return r;
}

uint64_t bench_lat_scratch[BENCH_LAT_SCRATCH];

uint64_t *bench_lat_samples_next(struct bench_run *out, uint64_t *smp)
{
	if (!out->hist)
		return bench_lat_scratch;
	out->nsamples = (size_t)(smp - out->samples);
	if (out->nsamples == out->cap_samples)
		bench_samples_fold(out);
	return out->samples + out->nsamples;
}

/*
 * What a poll brought, every completion a success (or the error): 1 when
 * it holds the answer (a receive, counted in *@pending), else 0. One
 * completion, a busy poll's usual catch, is tested without a loop.
 */
static inline __attribute__((always_inline)) int answered(const struct ibv_wc *wc, int n,
							  uint64_t *pending, struct rk_error *err)
{
	uint64_t got = 0;

	if (__builtin_expect(n == 1, 1)) {
		if (__builtin_expect(wc->status != IBV_WC_SUCCESS, 0))
			return bench_wc_failed(wc, err);
		if (!(wc->opcode & IBV_WC_RECV))
			return *pending != 0;
		++*pending;
		return 1;
	}
	for (int i = 0; i < n; i++) {
		if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0))
			return bench_wc_failed(&wc[i], err);
		got += (wc[i].opcode & IBV_WC_RECV) != 0;
	}
	*pending += got;
	return *pending != 0;
}

/*
 * client_loop - run_client() for send and write-imm: the loop that
 * latency figures are made of. Everything it
 * changes on every round trip (count, receives, the sample pointer) lives
 * in locals, kept in registers across the library calls, and goes back
 * to @s only around the rare calls that use it (a full send queue, a
 * repost batch, a long wait). A sample is one store, with no test: the
 * loop runs in blocks that end where the sample buffer does (or the run,
 * when it is counted), and the buffer is folded into the histogram
 * between blocks. @timed (a duration run) compares each sample's first
 * clock reading with the run's end; a counted run compares nothing but
 * the sample pointer with its block's end. The answer is the pong's
 * receive completion. Busy, a pass asks the provider for one completion,
 * as perftest's loops do: a round trip brings two (the SEND's, the
 * pong), and the
 * provider's poll stops at the first instead of looking again; an empty
 * pass is one call, into the provider (rk_cq_take only sees what came).
 * Otherwise a pass is bench_poll_wait(), a sleep of up to 10 ms.
 */
static inline __attribute__((always_inline)) int client_loop(struct bench_ctx *c,
							     struct lat_state *s, uint64_t iters,
							     uint64_t end, struct bench_run *out,
							     struct rk_error *err, const int busy,
							     const int tsc, const int timed)
{
	struct rk_prepared *prep = s->prep;
	struct rk_cq *cq = c->cq;
	struct ibv_cq *vcq = c->vcq;
	struct ibv_wc *wc = c->wc;
	uint64_t *smp = bench_lat_samples_at(out);
	const uint64_t repost_min = s->repost_min;
	uint64_t count = s->count, pending = s->pending_rx, t0, t1 = s->t_end;
	const unsigned pace = c->l->pace_ms;
	int r;

	if (!timed && count >= iters)
		goto out;
	for (;;) {
		/* --pace: before the block's clock, outside its sample */
		uint64_t *const blk_end =
		    bench_lat_block_paced(out, smp, iters, count, timed, pace);

		while (smp != blk_end) {
			t0 = bench_lat_ticks(tsc);
			if (timed && t0 >= end)
				goto out;
			r = post_one(c, s, prep, count, &pending, err);
			if (r)
				return r;
			for (unsigned spins = 1;; spins++) {
				int n;

				if (busy) {
					n = ibv_poll_cq(vcq, 1, wc);
					if (n > 0)
						n = rk_cq_take(cq, wc, n);
					else if (__builtin_expect(n < 0, 0))
						return bench_poll_failed(err);
				} else {
					n = bench_poll_wait(c, err);
					if (n < 0)
						return n;
				}
				if (n > 0) {
					/* Busy, one was asked for: rk_cq_take kept it or not. */
					r = answered(wc, busy ? 1 : n, &pending, err);
					if (r > 0)
						break;
					if (__builtin_expect(r < 0, 0))
						return r;
					continue;
				}
				if (spins & 63)
					continue;
				r = bench_lat_wait_tick(c, s, spins, count, "waiting for the pong",
							err);
				if (r)
					return r;
			}
			t1 = bench_lat_ticks(tsc);
			pending--;
			if (++s->to_repost >= repost_min) {
				r = repost_batch(c, s, repost_min, err);
				if (r)
					return r;
			}
			/* A clock read backwards (t1 < t0) is a 0 in the fold. */
			*smp++ = t1 - t0;
			if (!(++count & (BENCH_LAT_WATCH_EVERY - 1))) {
				r = bench_watch_tick(c, &s->w, t1, count, "measuring latency", err);
				if (r)
					return r;
			}
		}
		if (!timed && count >= iters)
			break;
		smp = bench_lat_samples_next(out, smp);
	}
out:
	s->count = count;
	s->pending_rx = pending;
	s->t_end = t1;
	if (out->hist)
		out->nsamples = (size_t)(smp - out->samples);
	return 0;
}

/*
 * The client's loop with the poll mode, the clock and the run's end (a
 * count or a time) known when it is compiled: a pass of the spin tests
 * none of them.
 */
#define CLIENT_LOOP(busy, tsc)                                                                     \
	(iters ? client_loop(c, s, iters, end, out, err, busy, tsc, 0)                             \
	       : client_loop(c, s, iters, end, out, err, busy, tsc, 1))

static int run_client_fast(struct bench_ctx *c, struct lat_state *s, uint64_t iters, uint64_t end,
			   struct bench_run *out, struct rk_error *err)
{
	const int busy = c->l->poll == RK_WAIT_BUSY;

	if (bench_clk.tsc)
		return busy ? CLIENT_LOOP(1, 1) : CLIENT_LOOP(0, 1);
	return busy ? CLIENT_LOOP(1, 0) : CLIENT_LOOP(0, 0);
}

/*
 * run_server_busy - run_server() with busy polling for send and
 * write-imm: wait for a ping, answer it, as run_client_busy() with the
 * count in a register. The client's DONE is seen by the watchdog's look
 * at the control channel, every 64th empty poll: the run is over then.
 */
static int run_server_busy(struct bench_ctx *c, struct lat_state *s, struct rk_error *err)
{
	struct rk_prepared *prep = s->prep;
	struct rk_cq *cq = c->cq;
	struct ibv_cq *vcq = c->vcq;
	struct ibv_wc *wc = c->wc;
	const uint64_t repost_min = s->repost_min;
	uint64_t count = s->count, pending = s->pending_rx;
	int r;

	for (;;) {
		for (unsigned spins = 1; !pending; spins++) {
			int n = ibv_poll_cq(vcq, BENCH_WC_BATCH, wc);

			if (n > 0) {
				n = rk_cq_take(cq, wc, n);
				for (int i = 0; i < n; i++) {
					if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0))
						return bench_wc_failed(&wc[i], err);
					pending += (wc[i].opcode & IBV_WC_RECV) != 0;
				}
				continue;
			}
			if (__builtin_expect(n < 0, 0))
				return bench_poll_failed(err);
			if (spins & 63)
				continue;
			if (spins == 64)
				s->wait_from = bench_ticks();
			s->count = count;
			r = bench_lat_tick(c, s, "waiting for a ping", err);
			if (r) {
				s->pending_rx = pending;
				return r;
			}
		}
		pending--;
		r = post_one(c, s, prep, count, &pending, err);
		if (r)
			return r;
		if (++s->to_repost >= repost_min) {
			r = repost_batch(c, s, repost_min, err);
			if (r)
				return r;
		}
		count++;
	}
}

static int run_client(struct bench_ctx *c, struct lat_state *s, uint64_t iters, uint64_t end,
		      struct bench_run *out, struct rk_error *err)
{
	int r;

	if (c->p->op == BENCH_OP_READ || c->p->op == BENCH_OP_WRITE)
		r = bench_lat_onesided_client(c, s, iters, end, out, err);
	else
		r = run_client_fast(c, s, iters, end, out, err);
	if (r)
		return r;
	s->cpu_end = bench_cpu_ns();
	r = repost(c, s, 1, err);
	r = r ?: bench_send_done(c, s->count, err);
	if (r)
		return r;
	s->w.passive = 1;
	r = bench_wait_peer(c, &s->w, "waiting for the server's count", err);
	if (r)
		return r;
	if (c->p->op != BENCH_OP_READ && s->w.peer_count != s->count)
		return bench_fail(err, EPROTO, "the server answered %llu of %llu pings",
				  (unsigned long long)s->w.peer_count,
				  (unsigned long long)s->count);
	return 0;
}

static int run_server(struct bench_ctx *c, struct lat_state *s, struct rk_error *err)
{
	int r;

	s->w.passive = 1;
	if (c->p->op == BENCH_OP_READ) {
		/*
		 * The READs are served by the device; wait for the client's
		 * DONE. The run lasted until then: the CPU share is of that.
		 */
		r = bench_wait_peer(c, &s->w, "waiting for the client", err);
		s->t_end = bench_ticks();
		s->cpu_end = bench_cpu_ns();
		return r ?: bench_send_done(c, 0, err);
	}
	/* Paced, a busy server takes the usual loop: the pause is in it. */
	if (c->p->op == BENCH_OP_WRITE || (c->l->poll == RK_WAIT_BUSY && !c->l->pace_ms)) {
		r = c->p->op == BENCH_OP_WRITE ? bench_lat_write_server(c, s, err)
					       : run_server_busy(c, s, err);
		if (r < 0)
			return r;
		goto done;
	}
	for (;;) {
		r = wait_message(c, s, err);
		if (r < 0)
			return r;
		if (r == 1)
			break;
		if (c->l->pace_ms)
			bench_pace(c->l->pace_ms);
		r = post(c, s, err);
		r = r ?: repost(c, s, s->repost_min, err);
		if (r)
			return r;
		s->count++;
	}
done:
	/* The server's run lasts until the DONE: it spins up to then. */
	s->t_end = bench_ticks();
	s->cpu_end = bench_cpu_ns();
	r = repost(c, s, 1, err);
	return r ?: bench_send_done(c, s->count, err);
}

int bench_lat_run(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		  struct bench_run *out, struct rk_error *err)
{
	struct lat_state s = {.size = size};
	uint64_t t0, cpu0;
	int r;

	build_wr(c, &s);
	r = rk_prepare(c->qps[0].conn, &s.wr, 1, err, &s.prep);
	if (r)
		return r;
	if (c->receives) {
		r = bench_prepare_recv(c, &c->qps[0], REPOST_BATCH, err);
		if (r) {
			rk_prepared_free(s.prep);
			return r;
		}
	}
	out->sample_shift = c->p->op == BENCH_OP_READ ? 0 : 1;
	c->qps[0].recvd = 0;
	s.yield_ticks = bench_ticks_for(YIELD_AFTER_NS);
	cpu0 = bench_cpu_ns();
	t0 = bench_ticks();
	s.t_end = s.wait_from = t0;
	bench_watch_start(&s.w, c, bench_ns_at(t0));
	if (c->is_client)
		r = run_client(c, &s, iters, t0 + bench_ticks_for(dur_ns), out, err);
	else
		r = run_server(c, &s, err);
	rk_prepared_free(s.prep);
	rk_recv_prepared_free(c->qps[0].rprep);
	c->qps[0].rprep = NULL;
	if (r)
		return r;
	out->tx_msgs = s.count;
	out->rx_msgs = c->qps[0].recvd;
	out->peer_count = s.w.peer_count;
	out->wall_ns = bench_ticks_ns(t0, s.t_end);
	if (!out->wall_ns)
		out->wall_ns = 1;
	out->cpu_ns = s.cpu_end - cpu0;
	out->peak_bps = 0;
	return 0;
}
