/* bench_run.c - what both engines share; see bench_run.h. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rdmakit/wire.h>

#include "bench_run.h"

#define BEAT_NS 1000000000ull

/*
 * The process CPU clock counts user + system time in nanoseconds;
 * getrusage() would round to scheduler ticks, too coarse for short runs.
 */
uint64_t bench_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * What a heartbeat may claim: bench_bw counts posts + completions +
 * receives, bench_lat round trips, bench_rpc calls started + completed
 * (client) or answered (server), so three per message per QP covers all.
 */
static uint64_t claim_bound(const struct bench_params *p, uint64_t msgs)
{
	return 3 * msgs * (p->num_qp ? p->num_qp : 1);
}

void bench_watch_start(struct bench_watch *w, struct bench_ctx *c, uint64_t now)
{
	const struct bench_params *p = c->p;
	uint64_t msgs = p->iters > p->warmup ? p->iters : p->warmup;

	memset(w, 0, sizeof(*w));
	bench_ctl_beat_reset(&c->ctl);
	/* -D: unbounded until the run is over, then only what was in flight. */
	if (p->duration_s)
		w->end_ns = now + ((uint64_t)p->duration_s + c->l->watchdog_s) * 1000000000ull;
	else
		w->beat_cap = claim_bound(p, msgs);
	w->start_ns = now;
	w->limit_ns = (uint64_t)c->l->watchdog_s * 1000000000ull;
	w->last_progress = now;
	w->next_check = now + BENCH_CHECK_NS;
	w->next_beat = now + BEAT_NS;
	w->check_ticks = bench_ticks_for(BENCH_CHECK_NS);
	w->check_at = bench_ticks() + w->check_ticks;
}

/* Never inlined: the cost harness leaves it out by its name (bench/costlib.py). */
__attribute__((noinline)) int bench_watch_tick_slow(struct bench_ctx *c, struct bench_watch *w,
						    uint64_t t, uint64_t progress, const char *what,
						    struct rk_error *err)
{
	uint64_t now = bench_ns_at(t);

	w->check_at = t + w->check_ticks;
	if (progress != w->seen) {
		w->seen = progress;
		w->last_progress = now;
	}
	return bench_watch_check(c, w, now, what, err);
}

/*
 * A side with nothing to post or receive sleeps on the control socket,
 * whatever --poll says. perftest's rdma_cm server spins on its CQ here
 * instead; measured under rxe that made READs ~2 % faster and WRITEs
 * ~5 % slower, and it would turn the peer's CPU column into 100 %.
 */
int bench_wait_peer(struct bench_ctx *c, struct bench_watch *w, const char *what,
		    struct rk_error *err)
{
	while (!w->peer_done) {
		struct pollfd pf = {.fd = c->ctl.fd, .events = POLLIN};
		int r;

		if (poll(&pf, 1, 100) < 0 && errno != EINTR)
			return bench_fail(err, errno, "poll control socket: %s", strerror(errno));
		r = bench_watch_check(c, w, bench_now_ns(), what, err);
		if (r)
			return r;
	}
	return 0;
}

int bench_send_done(struct bench_ctx *c, uint64_t count, struct rk_error *err)
{
	uint8_t b[8];

	rk_put64(b, count);
	return bench_ctl_send(&c->ctl, BM_DONE, b, sizeof(b), bench_step_ms(c), err);
}

/* Never inlined: the cost harness leaves it out by its name (bench/costlib.py). */
__attribute__((noinline)) int bench_watch_check(struct bench_ctx *c, struct bench_watch *w,
						uint64_t now, const char *what,
						struct rk_error *err)
{
	struct bench_msg m;
	int r;

	w->next_check = now + BENCH_CHECK_NS;
	if (now >= w->next_beat) {
		uint8_t b[8];

		rk_put64(b, w->seen);
		r = bench_ctl_send(&c->ctl, BM_HEARTBEAT, b, sizeof(b), bench_step_ms(c), err);
		if (r)
			return r;
		w->next_beat = now + BEAT_NS;
	}
	/* After DONE the peer may already be at the next step: leave that queued. */
	while (!w->peer_done) {
		r = bench_ctl_recv(&c->ctl, &m, 0, err);
		if (r == -EAGAIN)
			break;
		if (r)
			return r;
		if (m.type != BM_DONE || m.len != 8)
			return bench_fail(err, EPROTO,
					  "protocol error: unexpected message %u "
					  "during a run",
					  m.type);
		w->peer_done = 1;
		w->peer_count = rk_get64(m.data);
		w->peer_done_ns = now;
	}
	if (w->passive && c->ctl.beat_ns != w->beat_seen)
		w->last_progress = now;
	w->beat_seen = c->ctl.beat_ns;
	if (w->end_ns && !w->beat_cap && now > w->end_ns)
		w->beat_cap = c->ctl.beat_count + claim_bound(c->p, c->p->tx_depth);
	if (w->beat_cap && c->ctl.beat_count > w->beat_cap)
		return bench_fail(
		    err, EPROTO,
		    "protocol error: the peer claims progress %llu, more than the run "
		    "can make (%llu)",
		    (unsigned long long)c->ctl.beat_count, (unsigned long long)w->beat_cap);
	if (now > w->last_progress && now - w->last_progress > w->limit_ns)
		return bench_fail(err, ETIMEDOUT,
				  "watchdog: no progress for %u s while %s (is the peer alive?)",
				  c->l->watchdog_s, what);
	return 0;
}

/* Never inlined: the cost harness leaves it out by its name (bench/costlib.py). */
__attribute__((noinline)) void bench_samples_fold(struct bench_run *out)
{
	bench_hist_add_ticks(out->hist, out->samples, out->nsamples,
			     bench_clk.tsc ? bench_clk.ns_per_tick : 1.0, out->sample_shift);
	out->nsamples = 0;
}

int bench_poll_wait(struct bench_ctx *c, struct rk_error *err)
{
	int n = rk_cq_wait(c->cq, c->wc, BENCH_WC_BATCH, 10, err);

	return n == -ETIMEDOUT ? 0 : n;
}

int bench_poll_failed(struct rk_error *err)
{
	return bench_fail(err, EIO, "ibv_poll_cq failed: CQ in error (overrun?)");
}

int bench_wc_failed(const struct ibv_wc *wc, struct rk_error *err)
{
	/* The library's text names the status, the QP and a hint. */
	rk_error_from_wc(err, wc);
	return -EIO;
}
