/*
 * test_bench_result.c - rk bench's RESULT record against forged input:
 * messages in no time, impossible counts, latencies out of order, a
 * record that disagrees with the peer's DONE; and the filter that peer
 * text (REFUSE, ERROR) goes through before it reaches a terminal.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rdmakit/device.h>
#include <rdmakit/wire.h>

#include "bench_ctl.h"
#include "bench_result.h"
#include "cli.h"

static void sample(struct bench_side_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->tx_msgs = 200;
	st->rx_msgs = 3;
	st->wall_ns = 1500000000ull;
	st->cpu_ns = 700000000ull;
	st->peak_bps = 1.5e9;
	st->lat_samples = 200;
	for (int i = 0; i < LAT_N; i++)
		st->lat_ns[i] = 1000.0 * (i + 1);
	st->lat_ns[LAT_MIN] = 500;
	st->lat_ns[LAT_MEDIAN] = 800;
	st->lat_ns[LAT_P99] = 5000;
	st->lat_ns[LAT_P999] = 6000;
	st->lat_ns[LAT_MAX] = 9000;
}

static int decode(const uint8_t *b, struct bench_side_stats *st, char *why)
{
	why[0] = 0;
	return bench_stats_decode(b, st, why, 100);
}

static void roundtrip(void **state)
{
	struct bench_side_stats st, got;
	uint8_t b[BENCH_RESULT_LEN];
	char why[100];

	(void)state;
	sample(&st);
	bench_stats_encode(&st, b);
	assert_int_equal(decode(b, &got, why), 0);
	assert_true(got.tx_msgs == 200 && got.rx_msgs == 3 && got.wall_ns == st.wall_ns);
	assert_true(got.cpu_ns == st.cpu_ns && got.lat_samples == 200);
	assert_true(got.peak_bps == 1.5e9);
	for (int i = 0; i < LAT_N; i++)
		assert_true(fabs(got.lat_ns[i] - st.lat_ns[i]) < 0.001);
	assert_int_equal(bench_stats_check_run(&got, 8u << 20, 200, why, sizeof(why)), 0);
	/* A passive side: nothing sent, nothing timed but the wait. */
	memset(&st, 0, sizeof(st));
	st.wall_ns = 5;
	bench_stats_encode(&st, b);
	assert_int_equal(decode(b, &got, why), 0);
	assert_int_equal(bench_stats_check_run(&got, 4096, 0, why, sizeof(why)), 0);
}

/* What the issue saw: wall_ns 0 with messages sent gave inf and "Infinity". */
static void no_time(void **state)
{
	struct bench_side_stats st, got;
	uint8_t b[BENCH_RESULT_LEN];
	char why[100];

	(void)state;
	sample(&st);
	st.wall_ns = 0;
	bench_stats_encode(&st, b);
	assert_int_equal(decode(b, &got, why), -1);
	assert_non_null(strstr(why, "no time"));
	/* Received messages or latency samples need time as well. */
	memset(&st, 0, sizeof(st));
	st.rx_msgs = 1;
	bench_stats_encode(&st, b);
	assert_int_equal(decode(b, &got, why), -1);
}

static void out_of_range(void **state)
{
	struct bench_side_stats st, got;
	uint8_t b[BENCH_RESULT_LEN];
	char why[100];

	(void)state;
	/* Counts beyond 2^50, set on the wire (all ones is the worst case). */
	for (int off = 0; off <= 40; off += 8) {
		if (off == 16 || off == 24 || off == 32)
			continue;
		sample(&st);
		bench_stats_encode(&st, b);
		rk_put64(b + off, UINT64_MAX);
		assert_int_equal(decode(b, &got, why), -1);
		rk_put64(b + off, 1ull << 50);
		assert_int_equal(decode(b, &got, why), -1);
	}
	sample(&st);
	st.wall_ns = 3 * 86400ull * 1000000000ull;
	bench_stats_encode(&st, b);
	assert_int_equal(decode(b, &got, why), -1);
	sample(&st);
	bench_stats_encode(&st, b);
	rk_put64(b + 24, UINT64_MAX); /* CPU time */
	assert_int_equal(decode(b, &got, why), -1);
	bench_stats_encode(&st, b);
	rk_put64(b + 32, UINT64_MAX); /* peak bandwidth */
	assert_int_equal(decode(b, &got, why), -1);
	/* A bandwidth without a message sent. */
	sample(&st);
	st.tx_msgs = 0;
	bench_stats_encode(&st, b);
	assert_int_equal(decode(b, &got, why), -1);
	/* A latency of more than a day. */
	sample(&st);
	bench_stats_encode(&st, b);
	rk_put64(b + 48 + 8 * LAT_MAX, UINT64_MAX);
	assert_int_equal(decode(b, &got, why), -1);
}

static void latency_order(void **state)
{
	struct bench_side_stats st, got;
	uint8_t b[BENCH_RESULT_LEN];
	char why[100];

	(void)state;
	sample(&st);
	st.lat_ns[LAT_P99] = 100; /* below the median */
	bench_stats_encode(&st, b);
	assert_int_equal(decode(b, &got, why), -1);
	assert_non_null(strstr(why, "order"));
	sample(&st);
	st.lat_ns[LAT_MAX] = 1; /* below the minimum */
	bench_stats_encode(&st, b);
	assert_int_equal(decode(b, &got, why), -1);
	sample(&st);
	st.lat_samples = 0; /* percentiles of nothing */
	bench_stats_encode(&st, b);
	assert_int_equal(decode(b, &got, why), -1);
}

static void against_done(void **state)
{
	struct bench_side_stats st;
	char why[100];

	(void)state;
	sample(&st);
	assert_int_equal(bench_stats_check_run(&st, 64, 199, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "DONE"));
	/* Messages x size must fit, with both sides' bytes added up. */
	st.tx_msgs = (1ull << 50) - 1;
	assert_int_equal(bench_stats_check_run(&st, 8u << 20, st.tx_msgs, why, sizeof(why)), -1);
	assert_int_equal(bench_stats_check_run(&st, 4096, st.tx_msgs, why, sizeof(why)), 0);
}

static void clean_text(void **state)
{
	static const char evil[] = "bad\x1b]0;owned\x07\x1b[2J\r\nrm -rf\x7f\xc3\xa9\0tail";
	char out[64], small[5];
	size_t n;

	(void)state;
	n = cli_clean_text(out, sizeof(out), evil, sizeof(evil) - 1);
	assert_int_equal(n, sizeof(evil) - 1);
	assert_string_equal(out, "bad?]0;owned??[2J??rm -rf????tail");
	for (size_t i = 0; i < n; i++)
		assert_true(out[i] >= 0x20 && out[i] < 0x7f);
	/* Cut to fit, always terminated. */
	assert_int_equal(cli_clean_text(small, sizeof(small), "abcdefgh", 8), 4);
	assert_string_equal(small, "abcd");
	assert_int_equal(cli_clean_text(small, 1, "abc", 3), 0);
	assert_string_equal(small, "");
}

/* One device choice for every rk command: --dev, --addr/--bind, $RK_DEV, the route. */
static void device_choice(void **state)
{
	struct rk_device_opts o;

	(void)state;
	unsetenv("RK_DEV");
	cli_device_opts(&o, NULL, NULL, "peer");
	assert_null(o.name);
	assert_null(o.addr);
	assert_string_equal(o.peer, "peer");
	cli_device_opts(&o, NULL, NULL, NULL); /* nothing: the only device, or an error */
	assert_null(o.name);
	assert_null(o.peer);
	setenv("RK_DEV", "rxe9", 1);
	cli_device_opts(&o, NULL, NULL, "peer");
	assert_string_equal(o.name, "rxe9");
	assert_null(o.peer);
	cli_device_opts(&o, "mlx5_0", NULL, "peer"); /* --dev first */
	assert_string_equal(o.name, "mlx5_0");
	assert_null(o.peer);
	cli_device_opts(&o, NULL, "10.0.0.1", "peer"); /* the address before $RK_DEV */
	assert_null(o.name);
	assert_string_equal(o.addr, "10.0.0.1");
	assert_null(o.peer);
	cli_device_opts(&o, "mlx5_0", "10.0.0.1", NULL); /* both: the address picks the GID */
	assert_string_equal(o.name, "mlx5_0");
	assert_string_equal(o.addr, "10.0.0.1");
	setenv("RK_DEV", "", 1); /* empty: not given */
	cli_device_opts(&o, "", "", "peer");
	assert_null(o.name);
	assert_null(o.addr);
	assert_string_equal(o.peer, "peer");
	unsetenv("RK_DEV");
}

static void equal_ct(void **state)
{
	uint8_t a[16] = {1, 2, 3}, b[16] = {1, 2, 3};

	(void)state;
	assert_int_equal(cli_equal_ct(a, b, sizeof(a)), 1);
	b[15] ^= 0x80;
	assert_int_equal(cli_equal_ct(a, b, sizeof(a)), 0);
	b[15] ^= 0x80;
	b[0] ^= 1;
	assert_int_equal(cli_equal_ct(a, b, sizeof(a)), 0);
	assert_int_equal(cli_equal_ct(a, b, 0), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(roundtrip),    cmocka_unit_test(no_time),
	    cmocka_unit_test(out_of_range), cmocka_unit_test(latency_order),
	    cmocka_unit_test(against_done), cmocka_unit_test(clean_text),
	    cmocka_unit_test(equal_ct),	    cmocka_unit_test(device_choice),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
