/*
 * bench_report.h - what a run prints and writes: a header naming the
 * setup, one table row per size, a JSON document, a gnuplot chart.
 *
 * Both sides print the same figures: each side measures itself (messages,
 * wall time, CPU time; latency on the client) and sends that in RESULT,
 * so the table combines the two records the same way everywhere.
 */
#ifndef RK_BENCH_REPORT_H
#define RK_BENCH_REPORT_H

#include <stdint.h>

#include "bench_conn.h"
#include "bench_result.h"
#include "bench_run.h"

struct bench_result {
	uint32_t size;
	struct bench_side_stats me, peer;
	struct rk_xfer_stats xs; /* --op xfer: this side's layer counters over the run */
	uint64_t xfer_cqes;	 /* ... and the completions of its batch WRs */
};

/* Figures derived from both sides' records. */
struct bench_figures {
	uint64_t iterations; /* messages in bw mode, round trips in lat mode */
	uint64_t bytes;
	double seconds;
	double bw_peak_bps, bw_avg_bps, mpps;
	double cpu_local_us, cpu_remote_us;   /* per message */
	double cpu_local_pct, cpu_remote_pct; /* of one core */
	const struct bench_side_stats *lat;   /* the client's record */
};

struct bench_report {
	const struct bench_ctx *c;
	struct bench_result *res;
	unsigned n, cap;
};

/* bench_stats_from_run - our record of a run (@hist may be NULL). */
void bench_stats_from_run(const struct bench_run *run, const struct bench_hist *hist,
			  struct bench_side_stats *st);

void bench_report_init(struct bench_report *r, const struct bench_ctx *c);
void bench_report_free(struct bench_report *r);
/* bench_report_add - keep a result and print its row. 0 or -ENOMEM. */
int bench_report_add(struct bench_report *r, const struct bench_result *res);
void bench_report_header(const struct bench_report *r);
void bench_figures(const struct bench_report *r, const struct bench_result *res,
		   struct bench_figures *f);

/*
 * bench_session - one whole rk bench session on @c (bench_ctx_init'ed with
 * the params and local options; l->host set: client, else server): the
 * handshake (a server refuses a client whose parameters differ in the
 * fields l->explicit_fields names), the connection, one run per size into
 * @rep. On failure the peer is told why (unless it refused us or told us)
 * and *@stage says where it failed ("connect" or "run"). The caller
 * releases @c (bench_ctx_release) and frees @rep. 0 or a negative errno.
 * @client_p is the server's copy of what the client asked for.
 */
int bench_session(struct bench_ctx *c, struct bench_params *client_p, struct bench_report *rep,
		  const char **stage, struct rk_error *err);

/* bench_report_json - the whole run as one JSON document in @path, or on stdout for "-". */
int bench_report_json(const struct bench_report *r, const char *path, struct rk_error *err);

/* bench_report_plot - bandwidth / latency against size into PNG @path via gnuplot. */
int bench_report_plot(const struct bench_report *r, const char *path, struct rk_error *err);

#endif
