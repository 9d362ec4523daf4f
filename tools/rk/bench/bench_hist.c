/* bench_hist.c - see bench_hist.h. */
#include <math.h>
#include <string.h>

#include "bench_hist.h"

#define SUB_N (1u << BENCH_HIST_SUB)

void bench_hist_reset(struct bench_hist *h)
{
	memset(h, 0, sizeof(*h));
}

/* The middle of bucket @i, in units. */
static double value_of(unsigned i)
{
	unsigned group, shift;
	uint64_t lo;

	if (i < 2 * SUB_N)
		return i;
	group = i / SUB_N; /* >= 2 */
	shift = group - 1;
	lo = (uint64_t)(i - (group - 1) * SUB_N) << shift;
	return (double)lo + (double)((uint64_t)1 << shift) / 2.0;
}

/*
 * Values below 2 * SUB_N map to themselves; above, the exponent e (the top
 * bit) picks a group of SUB_N buckets and the BENCH_HIST_SUB bits below
 * the top bit the bucket inside it. With s = max(e, SUB) - SUB both are
 * one formula, (s << SUB) + (v >> s), and max(e, SUB) is the top bit of
 * v | SUB_N: no branch, no compare. The index of 2^64 - 1 is the last
 * bucket: no clamp.
 */
void bench_hist_add_ticks(struct bench_hist *h, const uint64_t *v, size_t n, double ns_per_tick,
			  unsigned shift)
{
	uint64_t *const bucket = h->bucket;
	uint64_t min = h->count ? h->min : UINT64_MAX, max = h->max, sum = h->sum;
	double sumsq = h->sumsq;

	if (!n)
		return;
	h->unit_ns = ns_per_tick / (double)(1u << shift);
	for (size_t k = 0; k < n; k++) {
		/* Top bit set: a negative interval (bench_hist.h), counted as 0. */
		const uint64_t x = (int64_t)v[k] < 0 ? 0 : v[k];
		const unsigned s = (63u ^ (unsigned)__builtin_clzll(x | SUB_N)) - BENCH_HIST_SUB;

		bucket[((uint64_t)s << BENCH_HIST_SUB) + (x >> s)]++;
		min = x < min ? x : min;
		max = x > max ? x : max;
		sum += x;
		/* Through int64_t: one instruction, where the unsigned conversion branches. */
		sumsq += (double)(int64_t)x * (double)(int64_t)x;
	}
	h->count += n;
	h->min = min;
	h->max = max;
	h->sum = sum;
	h->sumsq = sumsq;
}

double bench_hist_pct(const struct bench_hist *h, double q)
{
	uint64_t rank, seen = 0;
	double v;

	if (!h->count)
		return 0;
	if (q <= 0)
		return (double)h->min * h->unit_ns;
	if (q >= 1)
		return (double)h->max * h->unit_ns;
	rank = (uint64_t)ceil(q * (double)h->count);
	if (rank < 1)
		rank = 1;
	for (unsigned i = 0; i < BENCH_HIST_NBUCK; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			v = value_of(i);
			/* A bucket's middle may lie outside what was seen. */
			if (v < (double)h->min)
				v = (double)h->min;
			if (v > (double)h->max)
				v = (double)h->max;
			return v * h->unit_ns;
		}
	}
	return (double)h->max * h->unit_ns;
}

double bench_hist_mean(const struct bench_hist *h)
{
	return h->count ? (double)h->sum / (double)h->count * h->unit_ns : 0;
}

double bench_hist_stdev(const struct bench_hist *h)
{
	double m, var;

	if (h->count < 2)
		return 0;
	m = (double)h->sum / (double)h->count;
	var = (h->sumsq - (double)h->count * m * m) / (double)(h->count - 1);
	return var > 0 ? sqrt(var) * h->unit_ns : 0;
}
