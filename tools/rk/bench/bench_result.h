/*
 * bench_result.h - the RESULT record: one side's measurement of one size.
 *
 * Each side measures itself (messages, wall time, CPU time; latency on the
 * client) and sends that to the other, so both print the same table. What
 * arrives is network input: it is checked when decoded (counts a real run
 * can reach, a wall time whenever messages moved, percentiles in order)
 * and against the run (the count the peer's DONE gave), so every figure
 * derived from it is finite. A record that fails is a protocol error.
 */
#ifndef RK_BENCH_RESULT_H
#define RK_BENCH_RESULT_H

#include <stddef.h>
#include <stdint.h>

enum { LAT_MIN, LAT_MEDIAN, LAT_AVG, LAT_STDEV, LAT_P99, LAT_P999, LAT_MAX, LAT_N };

struct bench_side_stats {
	uint64_t tx_msgs, rx_msgs, wall_ns, cpu_ns;
	double peak_bps;
	uint64_t lat_samples;
	double lat_ns[LAT_N];
};

/* Wire form: six u64 then LAT_N u64 (picoseconds), big-endian. */
#define BENCH_RESULT_LEN (6 * 8 + LAT_N * 8)

/* bench_stats_encode - @st into BENCH_RESULT_LEN bytes at @buf. */
void bench_stats_encode(const struct bench_side_stats *st, uint8_t *buf);

/*
 * bench_stats_decode - BENCH_RESULT_LEN bytes at @buf into @st. Returns 0,
 * or -1 with the reason in @why if a value is impossible: a count or time
 * no run reaches, messages moved in no time, a bandwidth without messages,
 * latency percentiles out of order. Values are finite after a 0.
 */
int bench_stats_decode(const uint8_t *buf, struct bench_side_stats *st, char *why, size_t why_len);

/*
 * bench_stats_check_run - @st, the peer's record of a run of messages of
 * @msg_bytes each (bench_msg_bytes: --op rpc counts request + answer),
 * against the count its DONE gave (@done_count). Returns 0, or -1 with the
 * reason in @why; after a 0, bytes (messages x msg_bytes) fit in 64 bits.
 */
int bench_stats_check_run(const struct bench_side_stats *st, uint64_t msg_bytes,
			  uint64_t done_count, char *why, size_t why_len);

#endif
