/* bench_hist.c - see bench_hist.h. */
#include <math.h>
#include <string.h>

#include "bench_hist.h"

#define SUB_N (1u << BENCH_HIST_SUB)

void bench_hist_reset(struct bench_hist *h)
{
	memset(h, 0, sizeof(*h));
}

static unsigned msb(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

/*
 * Values below 2 * SUB_N map to themselves; above, the exponent picks a
 * group of SUB_N buckets and the next BENCH_HIST_SUB bits below the top
 * bit pick the bucket inside it.
 */
static unsigned index_of(uint64_t v)
{
	unsigned e, shift;

	if (v < 2 * SUB_N)
		return (unsigned)v;
	e = msb(v);
	shift = e - BENCH_HIST_SUB;
	return (e - BENCH_HIST_SUB) * SUB_N + (unsigned)(v >> shift);
}

/* The middle of bucket @i. */
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

void bench_hist_add(struct bench_hist *h, uint64_t ns)
{
	unsigned i = index_of(ns);

	if (i >= BENCH_HIST_NBUCK)
		i = BENCH_HIST_NBUCK - 1;
	h->bucket[i]++;
	if (!h->count || ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
	h->count++;
	h->sum += (double)ns;
	h->sumsq += (double)ns * (double)ns;
}

void bench_hist_add_ticks(struct bench_hist *h, const uint64_t *v, size_t n, double ns_per_tick,
			  unsigned shift)
{
	uint64_t count = h->count, min = h->min, max = h->max;
	double sum = h->sum, sumsq = h->sumsq;

	for (size_t k = 0; k < n; k++) {
		/*
		 * Through int64_t: an interval is far below 2^63 ticks, and the
		 * signed conversions are one instruction each, where the
		 * unsigned ones branch (the values are the same).
		 */
		uint64_t ns = ns_per_tick >= 0
				  ? (uint64_t)(int64_t)((double)(int64_t)v[k] * ns_per_tick)
				  : v[k];
		unsigned i;

		ns >>= shift;
		i = index_of(ns);
		if (i >= BENCH_HIST_NBUCK)
			i = BENCH_HIST_NBUCK - 1;
		h->bucket[i]++;
		if (!count || ns < min)
			min = ns;
		if (ns > max)
			max = ns;
		count++;
		sum += (double)(int64_t)ns;
		sumsq += (double)(int64_t)ns * (double)(int64_t)ns;
	}
	h->count = count;
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
		return (double)h->min;
	if (q >= 1)
		return (double)h->max;
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
			return v;
		}
	}
	return (double)h->max;
}

double bench_hist_mean(const struct bench_hist *h)
{
	return h->count ? h->sum / (double)h->count : 0;
}

double bench_hist_stdev(const struct bench_hist *h)
{
	double m, var;

	if (h->count < 2)
		return 0;
	m = h->sum / (double)h->count;
	var = (h->sumsq - (double)h->count * m * m) / (double)(h->count - 1);
	return var > 0 ? sqrt(var) : 0;
}
