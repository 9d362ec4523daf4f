/*
 * cmd_bench.c - rk bench: RDMA bandwidth and latency, perftest-class.
 *
 * The session, on both sides:
 *   handshake   client: PARAMS; server: validate, ACCEPT or REFUSE naming
 *               the parameter (bench_start.c)
 *   connect     buffer, CQ, QPs by rdma_cm or --oob; READY both ways
 *   per size    [warm-up] GO barrier, timed run (bench_bw.c / bench_lat.c /
 *               bench_rpc.c),
 *               RESULT both ways, one table row
 *   end         JSON, plot; teardown in reverse order
 * Any failure is sent to the peer as ERROR (so it can say why it stops)
 * and ends the run with exit status 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmakit/wire.h>

#include "bench.h"
#include "bench_conn.h"
#include "bench_report.h"
#include "bench_rpc.h"
#include "bench_run.h"
#include "bench_xfer.h"
#include "cli.h"
#include "commands.h"

/* Both sides reach the same size and phase before either starts posting. */
static int barrier(struct bench_ctx *c, uint32_t size, uint32_t phase, struct rk_error *err)
{
	uint8_t b[8];
	struct bench_msg m;
	int r;

	rk_put32(b, size);
	rk_put32(b + 4, phase);
	r = bench_ctl_send(&c->ctl, BM_GO, b, sizeof(b), bench_step_ms(c), err);
	r = r ?: bench_ctl_expect(&c->ctl, BM_GO, sizeof(b), &m, bench_step_ms(c), err);
	if (r)
		return r;
	if (rk_get32(m.data) != size || rk_get32(m.data + 4) != phase)
		return bench_fail(err, EPROTO,
				  "protocol error: the peer is at size %u phase %u, "
				  "we are at %u phase %u",
				  rk_get32(m.data), rk_get32(m.data + 4), size, phase);
	return 0;
}

static int run_once(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		    struct bench_run *run, struct rk_error *err)
{
	if (c->p->op == BENCH_OP_RPC)
		return bench_rpc_run(c, size, iters, dur_ns, run, err);
	if (c->p->op == BENCH_OP_XFER)
		return bench_xfer_run(c, size, iters, dur_ns, run, err);
	if (c->p->mode == BENCH_MODE_LAT)
		return bench_lat_run(c, size, iters, dur_ns, run, err);
	return bench_bw_run(c, size, iters, dur_ns, run, err);
}

static int run_size(struct bench_ctx *c, uint32_t size, struct bench_hist *hist,
		    struct bench_result *res, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	/* The latency engine's buffer starts clean (rpc and xfer have none of rk bench's). */
	int reset = p->mode == BENCH_MODE_LAT && p->op != BENCH_OP_RPC && p->op != BENCH_OP_XFER;
	uint8_t b[BENCH_RESULT_LEN];
	struct bench_run run = {0};
	struct bench_msg m;
	char why[120];
	int r;

	if (p->warmup) {
		if (reset)
			bench_lat_reset(c, size);
		if (p->op == BENCH_OP_XFER)
			bench_xfer_reset(c, size);
		r = barrier(c, size, 0, err);
		r = r ?: run_once(c, size, p->warmup, 0, &run, err);
		if (r)
			return r;
	}
	if (reset)
		bench_lat_reset(c, size);
	if (p->op == BENCH_OP_XFER)
		bench_xfer_reset(c, size);
	bench_hist_reset(hist);
	r = barrier(c, size, 1, err);
	if (r)
		return r;
	memset(&run, 0, sizeof(run));
	run.hist = hist;
	/* --op xfer: a sample per batch, in bw mode. */
	if (p->mode == BENCH_MODE_LAT || (p->op == BENCH_OP_XFER && c->is_client)) {
		run.cap_samples =
		    p->iters && p->iters < BENCH_SAMPLES_MAX ? p->iters + 1 : BENCH_SAMPLES_MAX;
		run.samples = malloc(run.cap_samples * sizeof(*run.samples));
		if (!run.samples)
			return bench_fail(err, ENOMEM, "out of memory for %zu latency samples",
					  run.cap_samples);
	}
	r = run_once(c, size, p->iters, (uint64_t)p->duration_s * 1000000000ull, &run, err);
	if (run.samples) {
		bench_samples_fold(&run);
		free(run.samples);
	}
	if (r)
		return r;
	res->size = size;
	if (p->op == BENCH_OP_XFER)
		res->xs = *bench_xfer_stats(c, &res->xfer_cqes);
	bench_stats_from_run(&run, hist, &res->me);
	bench_stats_encode(&res->me, b);
	r = bench_ctl_send(&c->ctl, BM_RESULT, b, sizeof(b), bench_step_ms(c), err);
	r = r ?: bench_ctl_expect(&c->ctl, BM_RESULT, sizeof(b), &m, bench_step_ms(c), err);
	if (r)
		return r;
	if (bench_stats_decode(m.data, &res->peer, why, sizeof(why)) ||
	    bench_stats_check_run(&res->peer, bench_msg_bytes(p, size), run.peer_count, why,
				  sizeof(why)))
		return bench_fail(err, EPROTO, "protocol error: the peer's RESULT for size %u: %s",
				  size, why);
	return 0;
}

static int run_all(struct bench_ctx *c, struct bench_report *rep, struct rk_error *err)
{
	struct bench_hist *hist = malloc(sizeof(*hist));
	int r = 0;

	if (!hist)
		return bench_fail(err, ENOMEM, "out of memory for the latency histogram");
	bench_report_header(rep);
	for (uint32_t size = c->p->size_min; size && !r; size = bench_next_size(c->p, size)) {
		struct bench_result res = {0};

		r = run_size(c, size, hist, &res, err);
		if (!r && bench_report_add(rep, &res))
			r = bench_fail(err, ENOMEM, "out of memory for results");
	}
	free(hist);
	return r;
}

int bench_session(struct bench_ctx *c, struct bench_params *client_p, struct bench_report *rep,
		  const char **stage, struct rk_error *err)
{
	int r;

	*stage = "connect";
	if (c->l->host)
		r = bench_client_start(c, err);
	else
		r = bench_server_start(c, c->p, client_p, err);
	if (!r)
		r = bench_connect(c, err);
	if (!r) {
		*stage = "run";
		r = run_all(c, rep, err);
	}
	/* A refusal has been told already; anything else the peer should hear. */
	if (r && r != -ECONNREFUSED && err->err != EREMOTEIO)
		bench_ctl_error(&c->ctl, rk_error_str(err));
	return r;
}

/*
 * --json without FILE: stdout holds the JSON alone. The table goes to
 * stderr meanwhile (stdout is a copy of it); json_stdout() puts the real
 * stdout, kept in @fd, back for the document. 0 or -1 (said).
 */
static int json_stdout_aside(int *fd)
{
	fflush(stdout);
	*fd = dup(STDOUT_FILENO);
	if (*fd >= 0 && dup2(STDERR_FILENO, STDOUT_FILENO) >= 0)
		return 0;
	fprintf(stderr, "rk bench: --json: stdout: %s\n", strerror(errno));
	return -1;
}

static int json_stdout(int fd, struct rk_error *err)
{
	if (fflush(stdout) || dup2(fd, STDOUT_FILENO) < 0)
		return bench_fail(err, errno, "--json: stdout: %s", strerror(errno));
	return 0;
}

int rk_cmd_bench(int argc, char **argv)
{
	struct bench_params p, client_p;
	struct bench_local l;
	struct bench_ctx c;
	struct bench_report rep;
	struct rk_error err;
	const char *stage;
	int r, json_fd = -1;

	r = bench_opts_parse(argc, argv, &p, &l);
	if (r)
		return r > 0 ? RK_EXIT_OK : RK_EXIT_USAGE;
	if (cli_json_to_stdout(l.json_path) && json_stdout_aside(&json_fd))
		return RK_EXIT_FAILURE;
	rk_error_clear(&err);
	bench_ctx_init(&c, &p, &l);
	bench_report_init(&rep, &c);
	r = bench_session(&c, &client_p, &rep, &stage, &err);
	if (r)
		cli_report(BENCH_PROG, stage, &err);
	bench_ctx_release(&c);
	if (!r && l.json_path) {
		stage = "json";
		r = json_fd >= 0 ? json_stdout(json_fd, &err) : 0;
		r = r ?: bench_report_json(&rep, l.json_path, &err);
		if (r)
			cli_report(BENCH_PROG, stage, &err);
	}
	if (!r && l.plot_path) {
		r = bench_report_plot(&rep, l.plot_path, &err);
		if (r)
			cli_report(BENCH_PROG, "plot", &err);
	}
	bench_report_free(&rep);
	if (json_fd >= 0)
		close(json_fd);
	return r ? RK_EXIT_FAILURE : RK_EXIT_OK;
}
