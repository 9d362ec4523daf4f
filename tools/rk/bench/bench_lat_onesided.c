/*
 * bench_lat_onesided.c - the latency loops of the one-sided ops, READ and
 * WRITE: no receives, no messages to count.
 *
 * read: the client READs the server's buffer and waits for the READ's
 * completion, which carries this round trip's count as its wr_id: the
 * whole round trip; the server's CPU is not involved (bench_lat.c waits
 * for its DONE).
 * write: a ping-pong of RDMA WRITEs, each side spinning on the last byte
 * of its buffer, which the peer's WRITE sets to a marker that changes
 * every round trip (no completion involved, as in perftest's write_lat).
 * Latency is half the round trip.
 *
 * Every completion still goes through the library (rk_cq_take, or
 * rk_cq_poll for the WRITEs'), which drops a stale or foreign one.
 */
#include <errno.h>

#include "bench_lat.h"

/* Round trip @i's marker: 1 to 255, never the 0 the buffers start with. */
static uint8_t marker(uint64_t i)
{
	return (uint8_t)(i % 255 + 1);
}

static inline uint8_t marker_next(uint8_t m)
{
	return m == 255 ? 1 : (uint8_t)(m + 1);
}

/*
 * The WRITEs' completions. Each WRITE is signaled (as perftest's are) and
 * nothing waits for them: the loops take them in batches, once half the
 * send queue holds WRITEs not yet taken, and outside a round trip's timed
 * part (the client before its clock reading, the server once its answer
 * is posted). One poll of up to BENCH_WC_BATCH takes what is there; a
 * queue still full is polled until it has room, the watchdog looking.
 * Returns how many WRITEs may go before the next look (at least 1: the
 * room less the half of the queue @keep), or an error.
 */
static __attribute__((noinline)) int64_t reap_writes(struct bench_ctx *c, struct lat_state *s,
						     uint64_t count, unsigned keep,
						     struct rk_error *err)
{
	struct rk_conn *conn = c->qps[0].conn;
	unsigned room;

	s->wait_from = 0;
	for (unsigned spins = 1;; spins++) {
		int r = rk_cq_poll(c->cq, c->wc, BENCH_WC_BATCH, err);

		if (r < 0)
			return r;
		for (int i = 0; i < r; i++)
			if (__builtin_expect(c->wc[i].status != IBV_WC_SUCCESS, 0))
				return bench_wc_failed(&c->wc[i], err);
		room = rk_sq_room(conn);
		if (r == BENCH_WC_BATCH)
			continue; /* more may be there */
		if (room)
			break;
		if (spins & 63)
			continue;
		r = bench_lat_wait_tick(c, s, spins, count, "waiting for send completions", err);
		if (r)
			return r;
	}
	return room > keep ? room - keep : 1;
}

/*
 * A WRITE wait that went round 256 times: the clock (from the first such
 * look on), the yield and the watchdog; after 4096 passes also the CQ,
 * where a WRITE that failed (the peer's answer then never comes) says so.
 * 1: the run is over (server: the client's DONE), or an error.
 */
static __attribute__((noinline)) int bench_lat_wait_long(struct bench_ctx *c, struct lat_state *s,
							 unsigned spins, uint64_t count,
							 struct rk_error *err)
{
	int r;

	if (spins == 256)
		s->wait_from = bench_ticks();
	s->count = count;
	r = bench_lat_tick(c, s, c->is_client ? "waiting for the pong" : "waiting for a ping", err);
	if (r || spins < 4096)
		return r;
	r = rk_cq_poll(c->cq, c->wc, BENCH_WC_BATCH, err);
	for (int i = 0; i < r; i++)
		if (c->wc[i].status != IBV_WC_SUCCESS)
			return bench_wc_failed(&c->wc[i], err);
	return r < 0 ? r : 0;
}

/*
 * wait_write - spin on @flag, the last byte of this side's buffer, until
 * the peer's WRITE sets it to @want: 0, 1 the run is over (server: the
 * client's DONE), or an error. A pass is a load and a compare; every
 * 256th goes to bench_lat_wait_long(). A function of its own, by this name:
 * bench/cost takes the idle passes of this loop out of its figures
 * (costlib.spin_figures), as it does ib_write_lat's.
 */
static __attribute__((noinline)) int wait_write(struct bench_ctx *c, struct lat_state *s,
						const volatile uint8_t *flag, uint8_t want,
						uint64_t count, struct rk_error *err)
{
	for (unsigned spins = 1;; spins++) {
		int r;

		if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == want)
			return 0;
		if (spins & 255)
			continue;
		r = bench_lat_wait_long(c, s, spins, count, err);
		if (r)
			return r;
	}
}

/*
 * What a READ's poll brought, every completion a success (or the error):
 * 1 when it holds this round trip's READ (wr_id @count), else 0. One
 * completion, a busy poll's only catch, is tested without a loop.
 */
static inline __attribute__((always_inline)) int read_done(const struct ibv_wc *wc, int n,
							   uint64_t count, struct rk_error *err)
{
	uint64_t got = 0;

	if (__builtin_expect(n == 1, 1)) {
		if (__builtin_expect(wc->status != IBV_WC_SUCCESS, 0))
			return bench_wc_failed(wc, err);
		return wc->wr_id == count;
	}
	for (int i = 0; i < n; i++) {
		if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0))
			return bench_wc_failed(&wc[i], err);
		got += wc[i].wr_id == count;
	}
	return got != 0;
}

/*
 * The rest of wait_read(), when its first poll did not bring this READ's
 * completion: what that poll brought (@n, the completions it kept, or
 * its error), then the spin. Busy, a pass asks the provider for one
 * completion; otherwise a pass is bench_poll_wait(), a sleep of up to
 * 10 ms. The clock and the watchdog every 64th empty pass.
 */
static __attribute__((noinline)) int read_more(struct bench_ctx *c, struct lat_state *s,
					       uint64_t count, int n, struct rk_error *err,
					       const int busy)
{
	struct ibv_wc *wc = c->wc;

	for (unsigned spins = 0;;) {
		int r;

		if (n < 0)
			return busy ? bench_poll_failed(err) : n;
		if (n > 0) {
			/* Busy, one was asked for: rk_cq_take kept it or not. */
			r = read_done(wc, busy ? 1 : n, count, err);
			if (r)
				return r > 0 ? 0 : r;
		} else if (!(++spins & 63)) {
			r = bench_lat_wait_tick(c, s, spins, count, "waiting for a READ", err);
			if (r)
				return r;
		}
		if (busy) {
			n = ibv_poll_cq(c->vcq, 1, wc);
			if (n > 0)
				n = rk_cq_take(c->cq, wc, 1);
		} else {
			n = bench_poll_wait(c, err);
		}
	}
}

/*
 * Wait for READ @count's completion: 0, or an error. Busy, one poll of
 * the provider for one completion, as perftest's loop does (a READ
 * brings one, and the provider's poll stops at it instead of looking
 * again), and its completion taken and checked in line: on Soft-RoCE a
 * READ's completion is there by the first poll. Anything else, and the
 * spin, is read_more()'s: the loop keeps no spin count or completion
 * count in its registers.
 */
static inline __attribute__((always_inline)) int wait_read(struct bench_ctx *c, struct lat_state *s,
							   uint64_t count, struct rk_error *err,
							   const int busy)
{
	if (busy) {
		struct ibv_wc *wc = c->wc;
		int n = ibv_poll_cq(c->vcq, 1, wc);

		if (__builtin_expect(n > 0, 1)) {
			n = rk_cq_take(c->cq, wc, 1);
			if (__builtin_expect(
				n == 1 && wc->status == IBV_WC_SUCCESS && wc->wr_id == count, 1))
				return 0;
		}
		return read_more(c, s, count, n, err, 1);
	}
	return read_more(c, s, count, 0, err, 0);
}

/*
 * client_loop - the one-sided client: post round trip @count's prepared
 * READ or WRITE, wait for its answer, store the sample. What changes on
 * every round trip (the count, the sample pointer, the marker, the WRITEs
 * before the next look at the CQ) lives in locals and goes back to @s
 * only around the rare calls that use it. A sample is one store, with no
 * test: the loop runs in blocks that end where the sample buffer does (or
 * the run, when it is counted), and the buffer is folded into the
 * histogram between blocks. @timed (a duration run) compares each
 * sample's first clock reading with the run's end; a counted run compares
 * nothing but the sample pointer with its block's end. A READ round trip
 * reads the clock once, as perftest's loop does: its sample runs from the
 * end of the one before (the clock is read again after a fold and after
 * the watchdog, whose time belongs to no sample). A WRITE's reaping of
 * completions comes between two round trips, so it reads it twice.
 */
static inline __attribute__((always_inline)) int
client_loop(struct bench_ctx *c, struct lat_state *s, uint64_t iters, uint64_t end,
	    struct bench_run *out, struct rk_error *err, const int write, const int busy,
	    const int tsc, const int timed)
{
	struct rk_prepared *prep = s->prep;
	uint8_t *const mark = c->base + s->size - 1;
	const volatile uint8_t *const flag = c->qps[0].rx + s->size - 1;
	const unsigned keep = write ? bench_sq_depth(c->p) / 2 : 0;
	uint64_t *smp = bench_lat_samples_at(out);
	uint64_t count = s->count, t0, t1 = s->t_end;
	uint8_t m = marker(count);
	uint32_t until_reap = 0; /* WRITEs to post before the next look at the CQ */
	int r;

	if (!timed && count >= iters)
		goto out;
	for (;;) {
		uint64_t *const blk_end = bench_lat_block_end(out, smp, iters, count, timed);

		if (!write) /* after the fold: a READ's sample starts where the last ended */
			t0 = bench_lat_ticks(tsc);
		while (smp != blk_end) {
			if (write && __builtin_expect(!until_reap, 0)) {
				int64_t n = reap_writes(c, s, count, keep, err);

				if (n < 0)
					return (int)n;
				until_reap = (uint32_t)n;
			}
			if (write)
				t0 = bench_lat_ticks(tsc);
			if (timed && t0 >= end)
				goto out;
			if (write) {
				*mark = m;
				until_reap--;
			}
			r = rk_post_prepared(prep, count, 0, err);
			if (__builtin_expect(r != 1, 0))
				return r < 0 ? r : -EIO;
			if (write) {
				r = wait_write(c, s, flag, m, count, err);
				if (r)
					return r < 0 ? r
						     : bench_fail(err, EPROTO,
								  "the peer stopped mid-run");
				m = marker_next(m);
			} else {
				r = wait_read(c, s, count, err, busy);
				if (r)
					return r;
			}
			t1 = bench_lat_ticks(tsc);
			/* A clock read backwards (t1 < t0) is a 0 in the fold. */
			*smp++ = t1 - t0;
			t0 = t1;
			if (!(++count & (BENCH_LAT_WATCH_EVERY - 1))) {
				r = bench_watch_tick(c, &s->w, t1, count, "measuring latency", err);
				if (r)
					return r;
				if (!write) /* the watchdog's time is no sample's */
					t0 = bench_lat_ticks(tsc);
			}
		}
		if (!timed && count >= iters)
			break;
		smp = bench_lat_samples_next(out, smp);
	}
out:
	s->count = count;
	s->t_end = t1;
	if (out->hist)
		out->nsamples = (size_t)(smp - out->samples);
	return 0;
}

/*
 * The loop with the op, the poll mode (READ; a WRITE spins on memory in
 * every mode), the clock and the run's end (a count or a time) known when
 * it is compiled: a pass tests none of them.
 */
#define LOOP(write, busy, tsc)                                                                     \
	(iters ? client_loop(c, s, iters, end, out, err, write, busy, tsc, 0)                      \
	       : client_loop(c, s, iters, end, out, err, write, busy, tsc, 1))

int bench_lat_onesided_client(struct bench_ctx *c, struct lat_state *s, uint64_t iters,
			      uint64_t end, struct bench_run *out, struct rk_error *err)
{
	const int busy = c->l->poll == RK_WAIT_BUSY;

	if (c->p->op == BENCH_OP_WRITE)
		return bench_clk.tsc ? LOOP(1, 0, 1) : LOOP(1, 0, 0);
	if (bench_clk.tsc)
		return busy ? LOOP(0, 1, 1) : LOOP(0, 0, 1);
	return busy ? LOOP(0, 1, 0) : LOOP(0, 0, 0);
}

/*
 * bench_lat_write_server - wait for the client's WRITE, answer with ours,
 * until the client's DONE (seen by the wait's look at the control
 * channel: the run is over then). The WRITEs' completions are taken as
 * the client's are, once the answer is on its way.
 */
int bench_lat_write_server(struct bench_ctx *c, struct lat_state *s, struct rk_error *err)
{
	struct rk_prepared *prep = s->prep;
	uint8_t *const mark = c->base + s->size - 1;
	const volatile uint8_t *const flag = c->qps[0].rx + s->size - 1;
	const unsigned keep = bench_sq_depth(c->p) / 2;
	uint64_t count = s->count;
	uint8_t m = marker(count);
	uint32_t until_reap = 0;
	int r;

	for (;;) {
		if (__builtin_expect(!until_reap, 0)) {
			int64_t n = reap_writes(c, s, count, keep, err);

			if (n < 0)
				return (int)n;
			until_reap = (uint32_t)n;
		}
		r = wait_write(c, s, flag, m, count, err);
		if (r) {
			s->count = count;
			return r < 0 ? r : 0;
		}
		*mark = m;
		r = rk_post_prepared(prep, count, 0, err);
		if (__builtin_expect(r != 1, 0))
			return r < 0 ? r : -EIO;
		until_reap--;
		count++;
		m = marker_next(m);
	}
}
