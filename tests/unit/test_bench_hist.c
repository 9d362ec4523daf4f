/*
 * test_bench_hist.c - rk bench's latency histogram (tools/rk/bench/
 * bench_hist.c): raw tick samples folded in blocks give the same histogram
 * as one fold of them all or a fold per sample (the latency loops store
 * samples and fold a block at a time, outside the timed loop), and its
 * figures agree with the samples sorted: exact below 512 units, within
 * 0.4 % above, mean and standard deviation of the unrounded samples.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench_hist.h"

#define N 20000

/* A fixed pseudo-random series: latencies from 1 to about 2^20 units. */
static void make_samples(uint64_t *v, size_t n)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* Most below 512 (exact buckets), a tail of larger ones. */
		v[i] = i % 8 ? 1 + x % 500 : x % (1u << 20);
	}
	v[5] = 0;
	v[6] = UINT64_MAX;	 /* a negative interval: a 0 */
	v[7] = (1ull << 63) - 1; /* the largest interval: the last bucket, no clamp */
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void same(const struct bench_hist *a, const struct bench_hist *b)
{
	assert_int_equal(a->count, b->count);
	assert_int_equal(a->min, b->min);
	assert_int_equal(a->max, b->max);
	assert_int_equal(a->sum, b->sum);
	/* The same additions in the same order: the same double. */
	assert_memory_equal(&a->sumsq, &b->sumsq, sizeof(a->sumsq));
	assert_memory_equal(&a->unit_ns, &b->unit_ns, sizeof(a->unit_ns));
	assert_memory_equal(a->bucket, b->bucket, sizeof(a->bucket));
}

/* Blocks of any size, one sample at a time, or all at once: one histogram. */
static void block_fold(void **state)
{
	uint64_t *v = malloc(N * sizeof(*v));
	struct bench_hist *all = malloc(sizeof(*all)), *blk = malloc(sizeof(*blk)),
			  *one = malloc(sizeof(*one));
	static const size_t sizes[] = {1, 7, 256, 1000, 4096, 3};

	(void)state;
	assert_non_null(v);
	assert_non_null(all);
	assert_non_null(blk);
	assert_non_null(one);
	make_samples(v, N);
	bench_hist_reset(all);
	bench_hist_reset(blk);
	bench_hist_reset(one);
	bench_hist_add_ticks(all, v, N, 0.5, 1);
	for (size_t at = 0, k = 0; at < N; k++) {
		size_t n = sizes[k % (sizeof(sizes) / sizeof(sizes[0]))];

		if (n > N - at)
			n = N - at;
		bench_hist_add_ticks(blk, v + at, n, 0.5, 1);
		bench_hist_add_ticks(blk, v + at, 0, 0.5, 1); /* an empty block changes nothing */
		at += n;
	}
	for (size_t i = 0; i < N; i++)
		bench_hist_add_ticks(one, v + i, 1, 0.5, 1);
	same(all, blk);
	same(all, one);
	free(v);
	free(all);
	free(blk);
	free(one);
}

/* A clock read backwards (t1 - t0 wrapped, top bit set) counts as 0. */
static void negative(void **state)
{
	struct bench_hist *h = malloc(sizeof(*h));
	const uint64_t v[] = {5, (uint64_t)0 - 3, 7, 1ull << 63};

	(void)state;
	assert_non_null(h);
	bench_hist_reset(h);
	bench_hist_add_ticks(h, v, 4, 1.0, 0);
	assert_int_equal(h->count, 4);
	assert_int_equal(h->min, 0);
	assert_int_equal(h->max, 7);
	assert_int_equal(h->sum, 12);
	assert_int_equal(h->bucket[0], 2);
	assert_true(bench_hist_pct(h, 0.5) == 0);
	assert_true(bench_hist_pct(h, 1) == 7);
	free(h);
}

/* Percentiles, mean and deviation against the samples themselves. */
static void figures(void **state)
{
	const size_t n = N - 8; /* without indices 5 to 7 (0, negative, huge) */
	uint64_t *v = malloc(N * sizeof(*v)), *sorted = malloc(N * sizeof(*v));
	struct bench_hist *h = malloc(sizeof(*h));
	const double unit = 0.25; /* ns per unit: a 2 GHz TSC, half round trips */
	static const double qs[] = {0.01, 0.25, 0.5, 0.6, 0.9, 0.99, 0.999};
	double sum = 0, sq = 0, mean, sd;

	(void)state;
	assert_non_null(v);
	assert_non_null(sorted);
	assert_non_null(h);
	make_samples(v, N);
	memcpy(sorted, v + 8, n * sizeof(*v));
	qsort(sorted, n, sizeof(*v), cmp_u64);
	bench_hist_reset(h);
	assert_true(bench_hist_pct(h, 0.5) == 0);
	assert_true(bench_hist_mean(h) == 0);
	assert_true(bench_hist_stdev(h) == 0);
	bench_hist_add_ticks(h, v + 8, n / 2, 0.5, 1);
	bench_hist_add_ticks(h, v + 8 + n / 2, n - n / 2, 0.5, 1);
	assert_int_equal(h->count, n);
	assert_true(bench_hist_pct(h, 0) == (double)sorted[0] * unit);
	assert_true(bench_hist_pct(h, 1) == (double)sorted[n - 1] * unit);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		size_t rank = (size_t)ceil(qs[i] * (double)n);
		double want = (double)sorted[rank - 1] * unit, got = bench_hist_pct(h, qs[i]);

		if (sorted[rank - 1] < 512)
			assert_true(got == want);
		else
			assert_true(fabs(got - want) <= want * 0.004);
	}
	for (size_t i = 0; i < n; i++) {
		sum += (double)sorted[i];
		sq += (double)sorted[i] * (double)sorted[i];
	}
	mean = sum / (double)n;
	sd = sqrt((sq - (double)n * mean * mean) / (double)(n - 1));
	assert_true(fabs(bench_hist_mean(h) - mean * unit) <= 1e-9 * mean * unit);
	assert_true(fabs(bench_hist_stdev(h) - sd * unit) <= 1e-6 * sd * unit);
	free(v);
	free(sorted);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(block_fold),
	    cmocka_unit_test(negative),
	    cmocka_unit_test(figures),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
