/*
 * bench_result.c - rk bench's RESULT record, the peer's measurement of one
 * size, which both sides decode and print.
 *
 * Input: BENCH_RESULT_LEN bytes of record, then optionally one byte that
 * picks the mode (bit 0: latency), the side (bit 1: client) and the op
 * (bit 2: rpc with 1 MiB answers, whose figures come from the client's
 * record alone).
 *
 * Asserts, for any bytes:
 *  - what bench_stats_decode accepts, bench_stats_encode writes back so that
 *    it decodes to the same record (integers exactly; the doubles, which
 *    travel as integers, to within rounding);
 *  - the figures of the table and the JSON computed from an accepted
 *    record are numbers (a zero wall time with messages is refused).
 */
#include <math.h>
#include <string.h>

#include "bench_conn.h"
#include "bench_report.h"
#include "bench_result.h"
#include "fuzz.h"

static int close_to(double a, double b)
{
	return a == b || fabs(a - b) <= fabs(a) * 1e-15 + 1e-9;
}

static void check_figures(const struct bench_side_stats *peer, unsigned flags)
{
	struct bench_params p;
	struct bench_local l = {0};
	struct bench_ctx c;
	struct bench_report r;
	struct bench_result res = {.size = 65536};
	struct bench_figures f;

	bench_params_default(&p);
	p.mode = flags & 1 ? BENCH_MODE_LAT : BENCH_MODE_BW;
	if (flags & 4) {
		p.op = BENCH_OP_RPC;
		p.resp_size = 1u << 20;
	}
	l.host = flags & 2 ? "client" : NULL;
	bench_ctx_init(&c, &p, &l);
	bench_report_init(&r, &c);
	res.me = (struct bench_side_stats){
	    .tx_msgs = 5000, .rx_msgs = 5000, .wall_ns = 1000000, .cpu_ns = 900000};
	res.peer = *peer;
	bench_figures(&r, &res, &f);
	FUZZ_CHECK(isfinite(f.seconds) && isfinite(f.bw_peak_bps) && isfinite(f.bw_avg_bps));
	FUZZ_CHECK(isfinite(f.mpps) && isfinite(f.cpu_local_us) && isfinite(f.cpu_remote_us));
	FUZZ_CHECK(isfinite(f.cpu_local_pct) && isfinite(f.cpu_remote_pct));
	bench_report_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bench_side_stats a, b;
	uint8_t enc[BENCH_RESULT_LEN];
	char why[128];

	if (size < BENCH_RESULT_LEN)
		return 0;
	if (bench_stats_decode(data, &a, why, sizeof(why)))
		return 0;
	bench_stats_encode(&a, enc);
	FUZZ_CHECK(memcmp(enc, data, 48 - 16) == 0); /* the counters and times */
	FUZZ_CHECK(bench_stats_decode(enc, &b, why, sizeof(why)) == 0);
	FUZZ_CHECK(a.tx_msgs == b.tx_msgs && a.rx_msgs == b.rx_msgs && a.wall_ns == b.wall_ns &&
		   a.cpu_ns == b.cpu_ns && a.lat_samples == b.lat_samples);
	FUZZ_CHECK(close_to(a.peak_bps, b.peak_bps));
	for (int i = 0; i < LAT_N; i++)
		FUZZ_CHECK(close_to(a.lat_ns[i], b.lat_ns[i]));
	check_figures(&a, size > BENCH_RESULT_LEN ? data[BENCH_RESULT_LEN] : 0);
	return 0;
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	struct bench_side_stats st = {.tx_msgs = 5000,
				      .rx_msgs = 0,
				      .wall_ns = 2500000,
				      .cpu_ns = 2400000,
				      .peak_bps = 1.5e9,
				      .lat_samples = 5000,
				      .lat_ns = {2100, 2500, 2600.5, 120.25, 4100, 9000, 12000}};
	uint8_t buf[BENCH_RESULT_LEN + 1];

	bench_stats_encode(&st, buf);
	buf[BENCH_RESULT_LEN] = 3;
	emit("lat-client", buf, sizeof(buf));
	memset(st.lat_ns, 0, sizeof(st.lat_ns));
	st.lat_samples = 0;
	bench_stats_encode(&st, buf);
	buf[BENCH_RESULT_LEN] = 0;
	emit("bw-server", buf, sizeof(buf));
	/* messages sent in no time: the figures would divide by zero */
	st.wall_ns = 0;
	bench_stats_encode(&st, buf);
	emit("regress-zero-wall", buf, sizeof(buf));
	/* --op rpc, the server's view: the client's record (the peer) is the measure */
	st.wall_ns = 2500000;
	st.rx_msgs = 5000;
	bench_stats_encode(&st, buf);
	buf[BENCH_RESULT_LEN] = 4;
	emit("rpc-bw-server", buf, sizeof(buf));
}
