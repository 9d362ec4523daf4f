/* bench_clock.c - see bench_clock.h. */
#include <errno.h>
#include <time.h>

#include "bench_clock.h"

struct bench_clock bench_clk = {.ns_per_tick = 1.0};

#define CAL_NS	  5000000ull /* each of the two calibration windows */
#define CAL_AGREE 0.002	     /* the two windows' rates must agree this well */

uint64_t bench_clock_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) void bench_pace(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	/* clock_nanosleep returns the error (EINTR: sleep the rest), not -1. */
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

#if defined(__x86_64__) || defined(__i386__)
/*
 * A TSC reading and the CLOCK_MONOTONIC time taken between two readings:
 * the tightest of a few tries, so that a preemption does not skew it.
 */
static void pair(uint64_t *tick, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 8; i++) {
		uint64_t a = __rdtsc(), t = bench_clock_mono_ns(), b = __rdtsc();

		if (b > a && b - a < best) {
			best = b - a;
			*tick = a + (b - a) / 2;
			*ns = t;
		}
	}
	if (best == UINT64_MAX) { /* the TSC never moved forward */
		*tick = 0;
		*ns = bench_clock_mono_ns();
	}
}

static double rate(uint64_t t0, uint64_t n0, uint64_t t1, uint64_t n1)
{
	return t1 > t0 && n1 > n0 ? (double)(n1 - n0) / (double)(t1 - t0) : 0;
}
#endif

void bench_clock_init(void)
{
#if defined(__x86_64__) || defined(__i386__)
	struct timespec pause = {0, (long)CAL_NS};
	uint64_t t[3], n[3];
	double r1, r2;

	if (bench_clk.ready)
		return;
	bench_clk.ready = 1;
	pair(&t[0], &n[0]);
	for (int i = 1; i < 3; i++) {
		nanosleep(&pause, NULL);
		pair(&t[i], &n[i]);
	}
	r1 = rate(t[0], n[0], t[1], n[1]);
	r2 = rate(t[1], n[1], t[2], n[2]);
	if (r1 > 0 && r2 > 0 && (r1 > r2 ? r1 - r2 : r2 - r1) <= CAL_AGREE * r1) {
		bench_clk.tsc = 1;
		bench_clk.ns_per_tick = rate(t[0], n[0], t[2], n[2]);
		bench_clk.tick0 = t[0];
		bench_clk.ns0 = n[0];
		return;
	}
#endif
	bench_clk.ready = 1;
	bench_clk.tsc = 0;
	bench_clk.ns_per_tick = 1.0;
	bench_clk.tick0 = 0;
	bench_clk.ns0 = bench_clock_mono_ns();
}

uint64_t bench_ns_at(uint64_t t)
{
	uint64_t ns;

	ns = bench_clk.tsc ? bench_clk.ns0 + bench_ticks_ns(bench_clk.tick0, t) : t;
	if (ns < bench_clk.last_ns)
		ns = bench_clk.last_ns;
	bench_clk.last_ns = ns;
	return ns;
}

const char *bench_clock_name(void)
{
	return bench_clk.tsc ? "tsc" : "clock_gettime";
}

double bench_clock_mhz(void)
{
	return bench_clk.tsc && bench_clk.ns_per_tick > 0 ? 1000.0 / bench_clk.ns_per_tick : 0;
}
