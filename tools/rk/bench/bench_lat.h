/*
 * bench_lat.h - what the latency engine's two halves share: bench_lat.c
 * (the run, and the ping-pong of messages: send, write-imm) and
 * bench_lat_onesided.c (READ and WRITE, where no receive is involved).
 *
 * Times here are raw clock ticks (bench_clock.h): the loops compare
 * readings with deadlines converted once, when the run starts, and convert
 * to nanoseconds only every BENCH_CHECK_NS, for the watchdog.
 */
#ifndef RK_BENCH_LAT_H
#define RK_BENCH_LAT_H

#include <stdint.h>

#include <rdmakit/post.h>

#include "bench_clock.h"
#include "bench_run.h"

struct lat_state {
	uint32_t size;
	uint64_t count;	      /* pings sent (client) or answered (server) */
	uint64_t pending_rx;  /* receive completions not yet consumed */
	uint64_t to_repost;   /* consumed receives to post again */
	uint64_t t_end;	      /* tick: the run ended (client: last answer; server: DONE) */
	uint64_t cpu_end;     /* bench_cpu_ns() then: the CPU share is of the same window */
	uint64_t wait_from;   /* tick: the current wait began */
	uint64_t yield_ticks; /* YIELD_AFTER_NS in ticks */
	uint64_t repost_min;  /* consumed receives that make a batch to post */
	struct rk_wr wr;
	struct rk_prepared *prep; /* wr, prepared: a post writes its wr_id only */
	struct bench_watch w;
};

/*
 * The busy loops look at the watchdog every BENCH_LAT_WATCH_EVERY round
 * trips (and every 64th empty poll of a wait), not after each: a round
 * trip is far shorter than BENCH_CHECK_NS, and a duration run's deadline
 * is still compared with the clock reading every sample takes anyway.
 */
#define BENCH_LAT_WATCH_EVERY 16u

/*
 * bench_lat_tick - periodic work while waiting: the yield of a long wait,
 * the watchdog. 1 = the peer said DONE and all is answered (server).
 */
int bench_lat_tick(struct bench_ctx *c, struct lat_state *s, const char *what,
		   struct rk_error *err);

/*
 * bench_lat_wait_tick - a wait that went round @spins (a multiple of 64)
 * times: the clock at the 64th, the yield, the watchdog, with the loop's
 * @count given back to @s. The peer's DONE in the middle of a run is an
 * error.
 */
int bench_lat_wait_tick(struct bench_ctx *c, struct lat_state *s, unsigned spins, uint64_t count,
			const char *what, struct rk_error *err);

/*
 * A run that keeps no samples (the warm-up) stores them in a scratch
 * block, overwritten block after block: the loops' store needs no test.
 */
#define BENCH_LAT_SCRATCH 256u
extern uint64_t bench_lat_scratch[BENCH_LAT_SCRATCH];

/*
 * bench_lat_samples_next - the sample block ending at @smp is full: fold
 * the buffer into the histogram when it is full (bench_samples_fold,
 * outside the timed loop as perftest's sort of its samples); a run without
 * a histogram starts its scratch block again. Returns the block's first
 * free sample.
 */
uint64_t *bench_lat_samples_next(struct bench_run *out, uint64_t *smp);

/* Where a block of samples ends at the latest: the end of the sample buffer. */
static inline uint64_t *bench_lat_samples_end(const struct bench_run *out)
{
	return out->hist ? out->samples + out->cap_samples : bench_lat_scratch + BENCH_LAT_SCRATCH;
}

/*
 * Where the block of samples that starts at @smp ends: the end of the
 * sample buffer, or sooner the end of a counted run (@timed 0) that has
 * done @count of its @iters round trips.
 */
static inline uint64_t *bench_lat_block_end(const struct bench_run *out, uint64_t *smp,
					    uint64_t iters, uint64_t count, const int timed)
{
	uint64_t *const buf_end = bench_lat_samples_end(out);

	if (!timed && iters - count < (uint64_t)(buf_end - smp))
		return smp + (iters - count);
	return buf_end;
}

/*
 * bench_lat_block_end() for a loop that --pace may pause (@pace_ms, 0
 * when unpaced). Paced, a block is one round trip and the pause comes
 * before it, outside its sample; unpaced, a block is as long as the
 * buffer or the run allows. The pace is tested once a block, not once a
 * round trip: an unpaced round trip's instructions hold no test of it.
 */
static inline uint64_t *bench_lat_block_paced(const struct bench_run *out, uint64_t *smp,
					      uint64_t iters, uint64_t count, const int timed,
					      unsigned pace_ms)
{
	if (pace_ms) {
		bench_pace(pace_ms);
		return smp + 1;
	}
	return bench_lat_block_end(out, smp, iters, count, timed);
}

/* The first sample of a loop that starts (or goes on) now. */
static inline uint64_t *bench_lat_samples_at(const struct bench_run *out)
{
	return out->hist ? out->samples + out->nsamples : bench_lat_scratch;
}

/* bench_ticks() with the clock source a constant of the loop. */
static inline __attribute__((always_inline)) uint64_t bench_lat_ticks(const int tsc)
{
#if defined(__x86_64__) || defined(__i386__)
	if (tsc)
		return __rdtsc();
#endif
	(void)tsc;
	return bench_clock_mono_ns();
}

/*
 * The one-sided loops (bench_lat_onesided.c): the client's READs or
 * WRITEs, @iters of them or until tick @end (@iters 0), and the WRITE
 * server, which answers each WRITE with one until the client's DONE.
 * 0, or an error.
 */
int bench_lat_onesided_client(struct bench_ctx *c, struct lat_state *s, uint64_t iters,
			      uint64_t end, struct bench_run *out, struct rk_error *err);
int bench_lat_write_server(struct bench_ctx *c, struct lat_state *s, struct rk_error *err);

#endif
