/* bench_result.c - the RESULT record codec and its checks; see bench_result.h. */
#include <math.h>
#include <stdio.h>

#include <rdmakit/wire.h>

#include "bench_ctl.h"
#include "bench_result.h"

/* Limits no real run reaches: a day's wall time (two, for slack), 2^50 messages. */
#define MAX_COUNT   (1ull << 50)
#define MAX_WALL_NS (2 * 86400ull * 1000000000ull)
#define MAX_CPU_NS  (MAX_WALL_NS * 1024) /* 1024 cores busy all along */
#define MAX_BPS	    1e15		 /* 1 Pb/s */
#define MAX_LAT_PS  (3600.0 * 24 * 1e12) /* a day */

/* Doubles travel as integers: bits/s and picoseconds are plenty. */
void bench_stats_encode(const struct bench_side_stats *st, uint8_t *b)
{
	rk_put64(b, st->tx_msgs);
	rk_put64(b + 8, st->rx_msgs);
	rk_put64(b + 16, st->wall_ns);
	rk_put64(b + 24, st->cpu_ns);
	rk_put64(b + 32, (uint64_t)llround(st->peak_bps));
	rk_put64(b + 40, st->lat_samples);
	for (int i = 0; i < LAT_N; i++)
		rk_put64(b + 48 + 8 * i, (uint64_t)llround(st->lat_ns[i] * 1000.0));
}

static int bad(char *why, size_t len, const char *what)
{
	snprintf(why, len, "%s", what);
	return -1;
}

int bench_stats_decode(const uint8_t *b, struct bench_side_stats *st, char *why, size_t why_len)
{
	static const int order[] = {LAT_MIN, LAT_MEDIAN, LAT_P99, LAT_P999, LAT_MAX};
	uint64_t peak = rk_get64(b + 32);

	st->tx_msgs = rk_get64(b);
	st->rx_msgs = rk_get64(b + 8);
	st->wall_ns = rk_get64(b + 16);
	st->cpu_ns = rk_get64(b + 24);
	st->lat_samples = rk_get64(b + 40);
	/* Compared as integers: a double of a huge u64 would round past the limit. */
	if (st->tx_msgs >= MAX_COUNT || st->rx_msgs >= MAX_COUNT || st->lat_samples >= MAX_COUNT)
		return bad(why, why_len, "a message count beyond 2^50");
	if (st->wall_ns > MAX_WALL_NS || st->cpu_ns > MAX_CPU_NS)
		return bad(why, why_len, "a wall or CPU time beyond two days");
	if (peak > (uint64_t)MAX_BPS)
		return bad(why, why_len, "a peak bandwidth beyond 1 Pb/s");
	if ((st->tx_msgs || st->rx_msgs || st->lat_samples) && !st->wall_ns)
		return bad(why, why_len, "messages moved in no time (wall time 0)");
	if (peak && !st->tx_msgs)
		return bad(why, why_len, "a bandwidth without messages sent");
	st->peak_bps = (double)peak;
	for (int i = 0; i < LAT_N; i++) {
		uint64_t ps = rk_get64(b + 48 + 8 * i);

		if ((double)ps > MAX_LAT_PS)
			return bad(why, why_len, "a latency beyond a day");
		if (ps && !st->lat_samples)
			return bad(why, why_len, "a latency without samples");
		st->lat_ns[i] = (double)ps / 1000.0;
	}
	for (size_t i = 1; i < sizeof(order) / sizeof(order[0]); i++)
		if (st->lat_ns[order[i]] < st->lat_ns[order[i - 1]])
			return bad(why, why_len, "latency percentiles out of order");
	return 0;
}

int bench_stats_check_run(const struct bench_side_stats *st, uint64_t msg_bytes,
			  uint64_t done_count, char *why, size_t why_len)
{
	if (st->tx_msgs != done_count) {
		snprintf(why, why_len, "%llu messages sent, its DONE said %llu",
			 (unsigned long long)st->tx_msgs, (unsigned long long)done_count);
		return -1;
	}
	/* Half the range: both sides' bytes add up in --bidir. */
	if (msg_bytes && st->tx_msgs > UINT64_MAX / 2 / msg_bytes)
		return bad(why, why_len, "more bytes than 63 bits count");
	return 0;
}
