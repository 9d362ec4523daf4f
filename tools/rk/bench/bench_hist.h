/*
 * bench_hist.h - latency samples in a log-linear histogram.
 *
 * Duration mode can produce millions of round trips, so samples are not
 * kept one by one: values below 256 ns get a bucket each, above that every
 * power of two is split into 128 buckets, so a percentile is within 0.8 %
 * of the true value while the histogram stays 58 KiB whatever the run's
 * length. Minimum, maximum, mean and standard deviation are exact.
 */
#ifndef RK_BENCH_HIST_H
#define RK_BENCH_HIST_H

#include <stdint.h>

#define BENCH_HIST_SUB	 7 /* 2^7 sub-buckets per power of two */
#define BENCH_HIST_NBUCK ((64 - BENCH_HIST_SUB) << BENCH_HIST_SUB)

struct bench_hist {
	uint64_t count;
	uint64_t min, max; /* ns */
	double sum, sumsq;
	uint64_t bucket[BENCH_HIST_NBUCK];
};

void bench_hist_reset(struct bench_hist *h);
void bench_hist_add(struct bench_hist *h, uint64_t ns);
/*
 * bench_hist_add_ticks - bench_hist_add() of each of @n raw readings @v,
 * each first scaled by @ns_per_tick (not if negative) and shifted right by
 * @shift: the same values, with the sums kept in registers.
 */
void bench_hist_add_ticks(struct bench_hist *h, const uint64_t *v, size_t n, double ns_per_tick,
			  unsigned shift);

/* bench_hist_pct - the value at quantile @q (0..1) in ns; 0 when empty. */
double bench_hist_pct(const struct bench_hist *h, double q);
double bench_hist_mean(const struct bench_hist *h);
double bench_hist_stdev(const struct bench_hist *h);

#endif
