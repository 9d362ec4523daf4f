/*
 * bench_hist.h - latency samples in a log-linear histogram.
 *
 * Duration mode can produce millions of round trips, so samples are not
 * kept one by one. They are counted in the clock's own units (ticks, or
 * half ticks for a ping-pong's half round trip: bench_hist_add_ticks()),
 * converted to ns only when a figure is read: a sample costs no
 * conversion. Values below 512 units get a bucket each, above that every
 * power of two is split into 256 buckets. A tick is at most a ns (a TSC
 * of 1 GHz or more, or CLOCK_MONOTONIC's ns), so values below 256 ns are
 * exact to the ns or better and a percentile is within 0.4 % of the true
 * value, while the histogram stays 114 KiB whatever the run's length.
 * Minimum, maximum, mean and standard deviation are exact (of the samples
 * in ticks, not rounded to ns one by one).
 */
#ifndef RK_BENCH_HIST_H
#define RK_BENCH_HIST_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_HIST_SUB 8 /* 2^8 sub-buckets per power of two */
/* Every uint64_t has a bucket: the top index is 55 * 256 + 511. */
#define BENCH_HIST_NBUCK ((64 - BENCH_HIST_SUB + 1) << BENCH_HIST_SUB)

struct bench_hist {
	uint64_t count;
	uint64_t min, max; /* units */
	uint64_t sum;	   /* units: exact (2^64 TSC ticks are centuries) */
	double sumsq;	   /* units squared */
	double unit_ns;	   /* ns per unit (0: nothing added yet) */
	uint64_t bucket[BENCH_HIST_NBUCK];
};

void bench_hist_reset(struct bench_hist *h);
/*
 * bench_hist_add_ticks - add @n raw tick intervals @v, each standing for
 * its value times @ns_per_tick divided by 2^@shift ns. A value with its
 * top bit set is a negative interval (the end read before the start, as a
 * clock read on two CPUs can be) and counts as 0: the timed loops store
 * t1 - t0 as it comes and leave that test to this fold. Cost per sample:
 * about 20 instructions (gcc 12, -O2), no branch on the value, no
 * division, no conversion. Every call on one histogram (since its reset)
 * must give the same @ns_per_tick and @shift.
 */
void bench_hist_add_ticks(struct bench_hist *h, const uint64_t *v, size_t n, double ns_per_tick,
			  unsigned shift);

/* bench_hist_pct - the value at quantile @q (0..1) in ns; 0 when empty. */
double bench_hist_pct(const struct bench_hist *h, double q);
double bench_hist_mean(const struct bench_hist *h);
double bench_hist_stdev(const struct bench_hist *h);

#endif
