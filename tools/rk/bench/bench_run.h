/*
 * bench_run.h - one timed run of one message size, and what the engines
 * (bench_bw.c, bench_lat.c; bench_rpc.c for --op rpc) share: the
 * watchdog, CPU time, completions.
 *
 * A run starts right after the GO barrier and ends when both sides have
 * said DONE with their send counts and every expected message arrived.
 * Nothing in a run waits without a deadline: the watchdog fails the run
 * when no progress was seen for --watchdog seconds. Progress is a
 * completion for a side that has work outstanding. A side that only waits
 * (a WRITE's or READ's target sees no completions) lives on the peer's
 * heartbeats, sent every second with the peer's progress count: only a
 * count that grows is progress, so a peer that keeps the channel busy but
 * stops moving data is caught, and the counts a peer may claim are bounded
 * (the run's messages with -n; what can still be in flight once a -D run
 * is over), so a peer that claims progress without end is caught as well.
 */
#ifndef RK_BENCH_RUN_H
#define RK_BENCH_RUN_H

#include <stdint.h>

#include <rdmakit/error.h>

#include "bench_clock.h"
#include "bench_conn.h"
#include "bench_hist.h"

/*
 * Times in bench_run and bench_watch are bench_now_ns() nanoseconds. The
 * engines' hot loops read raw ticks (bench_clock.h) and compare them with
 * deadlines converted once; they hand ns to the watchdog every
 * BENCH_CHECK_NS only, through bench_watch_tick().
 */
struct bench_run {
	uint64_t tx_msgs;	 /* messages this side sent (pings + pongs in lat) */
	uint64_t rx_msgs;	 /* receive completions */
	uint64_t peer_count;	 /* messages the peer's DONE said it sent */
	uint64_t wall_ns;	 /* first post to last completion */
	uint64_t cpu_ns;	 /* user + system time of this process during the run */
	double peak_bps;	 /* best rate over a window (bw mode) */
	struct bench_hist *hist; /* lat mode: samples, when not NULL */
	/*
	 * With hist: raw samples (tick intervals) not yet in it. The timed
	 * loop only stores one (bench_sample); converting and bucketing them
	 * (bench_samples_fold) waits until the buffer is full or the run over.
	 */
	uint64_t *samples;
	size_t nsamples, cap_samples;
	unsigned sample_shift; /* 1: a sample is half the interval (ping-pong) */
};

/* At most this many samples wait in bench_run.samples (8 MiB). */
#define BENCH_SAMPLES_MAX (1u << 20)

/* bench_samples_fold - move the stored samples into out->hist. */
void bench_samples_fold(struct bench_run *out);

/* bench_sample - one latency sample, from tick @t0 to @t1: a store. */
static inline void bench_sample(struct bench_run *out, uint64_t t0, uint64_t t1)
{
	out->samples[out->nsamples++] = t1 > t0 ? t1 - t0 : 0;
	if (__builtin_expect(out->nsamples == out->cap_samples, 0))
		bench_samples_fold(out);
}

/* bench_bw_run - a bandwidth run: @iters per QP, or for @dur_ns when iters is 0. */
int bench_bw_run(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		 struct bench_run *out, struct rk_error *err);

/* bench_lat_reset - zero our part of the buffer; call before the GO barrier. */
void bench_lat_reset(struct bench_ctx *c, uint32_t size);

/* bench_lat_run - a latency run, one ping-pong (or READ) after the other. */
int bench_lat_run(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		  struct bench_run *out, struct rk_error *err);

struct bench_watch {
	uint64_t start_ns; /* bench_watch_start()'s @now */
	uint64_t limit_ns;
	uint64_t last_progress;
	uint64_t next_check;
	uint64_t next_beat;
	uint64_t check_at;    /* tick: bench_watch_tick() looks again */
	uint64_t check_ticks; /* BENCH_CHECK_NS in ticks */
	uint64_t seen;	      /* the progress count it saw last */
	int passive;	      /* the peer's growing heartbeat count is progress */
	uint64_t beat_seen;   /* ctl.beat_ns when the watchdog last looked */
	uint64_t beat_cap;    /* the most progress the peer may claim; 0: not yet known */
	uint64_t end_ns;      /* -D: when the run is over for sure (duration + watchdog) */
	int peer_done;	      /* the peer's DONE arrived */
	uint64_t peer_count;  /* ... with this many messages sent */
	uint64_t peer_done_ns;
};

#define BENCH_CHECK_NS 10000000ull /* look at the control channel every 10 ms */

/* bench_watch_start - a run begins at @now (after the GO barrier): watchdog and bounds. */
void bench_watch_start(struct bench_watch *w, struct bench_ctx *c, uint64_t now);

/*
 * bench_watch_check - heartbeat, the peer's messages, the watchdog. Call
 * when now >= w->next_check. @what names the wait for the error message.
 */
int bench_watch_check(struct bench_ctx *c, struct bench_watch *w, uint64_t now, const char *what,
		      struct rk_error *err);

int bench_watch_tick_slow(struct bench_ctx *c, struct bench_watch *w, uint64_t t, uint64_t progress,
			  const char *what, struct rk_error *err);

/*
 * bench_watch_tick - bench_watch_check() for a hot loop: a comparison
 * until BENCH_CHECK_NS has passed since the last look. @t is a
 * bench_ticks() reading; @progress a count that grows while the run
 * makes progress (messages done). A reading from before the window (a
 * CPU whose TSC lags) looks too.
 */
static inline int bench_watch_tick(struct bench_ctx *c, struct bench_watch *w, uint64_t t,
				   uint64_t progress, const char *what, struct rk_error *err)
{
	if (t < w->check_at && t + w->check_ticks >= w->check_at)
		return 0;
	return bench_watch_tick_slow(c, w, t, progress, what, err);
}

/*
 * bench_wait_peer - sleep on the control socket until the peer's DONE
 * arrives or the watchdog fires; @what names the wait for its message.
 */
int bench_wait_peer(struct bench_ctx *c, struct bench_watch *w, const char *what,
		    struct rk_error *err);

/* bench_send_done - tell the peer how many messages this side sent. */
int bench_send_done(struct bench_ctx *c, uint64_t count, struct rk_error *err);

/* bench_poll's slow halves: a wait in event or adaptive mode, a failed completion or poll. */
int bench_poll_wait(struct bench_ctx *c, struct rk_error *err);
int bench_wc_failed(const struct ibv_wc *wc, struct rk_error *err);
int bench_poll_failed(struct rk_error *err);

/*
 * bench_poll - completions in the CQ's wait mode: busy polls once, event
 * and adaptive wait up to 10 ms. Returns the count (0: none) or an error.
 * A failed completion is turned into an error naming the QP. Inline: it is
 * the spin of every wait, and a completion seen should reach the clock
 * reading after it with no calls in between. Busy, the spin is one
 * ibv_poll_cq on the verbs CQ (one indirect call into the provider, as
 * perftest's loops), and the library translates wr_ids (rk_cq_take) only
 * once something came.
 */
static inline int bench_poll(struct bench_ctx *c, struct rk_error *err)
{
	int n;

	if (c->l->poll == RK_WAIT_BUSY) {
		n = ibv_poll_cq(c->vcq, BENCH_WC_BATCH, c->wc);
		if (__builtin_expect(n <= 0, 1))
			return n < 0 ? bench_poll_failed(err) : 0;
		n = rk_cq_take(c->cq, c->wc, n);
	} else {
		n = bench_poll_wait(c, err);
	}
	for (int i = 0; i < n; i++)
		if (__builtin_expect(c->wc[i].status != IBV_WC_SUCCESS, 0))
			return bench_wc_failed(&c->wc[i], err);
	return n;
}

/* bench_cpu_ns - user + system CPU time of this process. */
uint64_t bench_cpu_ns(void);

/*
 * A bandwidth run signals a send WR at least every this many bytes, fewer
 * WRs than --cq-mod for large messages, so completions (the sender's
 * progress) keep coming on slow links (bench_bw.c).
 */
#define BENCH_SIGNAL_BYTES (1u << 20)

/* Send wr_id: QP index in the top bits, sequence number below. */
#define BENCH_SEQ_BITS 40
#define BENCH_SEQ_MASK ((1ull << BENCH_SEQ_BITS) - 1)

#endif
