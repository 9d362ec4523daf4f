/*
 * bench_report.c - the header and the table (the RESULT codec: bench_result.c).
 *
 * Bandwidth counts what each sending side completed over its own wall
 * time (first post to last completion), summed over the sides that send
 * (both with --bidir). Iterations are messages in bw mode and round
 * trips in lat mode, over all QPs; --op rpc counts calls, from the
 * client's record, and its bytes are request + answer per call (the
 * server's record holds the same calls, answered). CPU is the process's
 * user + system time during the run, per message (rpc: per call) of the
 * run, for each side. That clock is only as good as the kernel's
 * scheduler clock: where the kernel has marked the TSC unstable (QEMU TCG
 * guests), it can be off by up to a tick, so a run of a few milliseconds
 * may read more than 100 %.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "bench_xfer.h"

void bench_stats_from_run(const struct bench_run *run, const struct bench_hist *hist,
			  struct bench_side_stats *st)
{
	static const double q[LAT_N] = {0, 0.5, -1, -1, 0.99, 0.999, 1};

	memset(st, 0, sizeof(*st));
	st->tx_msgs = run->tx_msgs;
	st->rx_msgs = run->rx_msgs;
	st->wall_ns = run->wall_ns;
	st->cpu_ns = run->cpu_ns;
	st->peak_bps = run->peak_bps;
	if (!hist || !hist->count)
		return;
	st->lat_samples = hist->count;
	for (int i = 0; i < LAT_N; i++)
		st->lat_ns[i] = q[i] >= 0 ? bench_hist_pct(hist, q[i]) : 0;
	st->lat_ns[LAT_AVG] = bench_hist_mean(hist);
	st->lat_ns[LAT_STDEV] = bench_hist_stdev(hist);
}

void bench_report_init(struct bench_report *r, const struct bench_ctx *c)
{
	memset(r, 0, sizeof(*r));
	r->c = c;
}

void bench_report_free(struct bench_report *r)
{
	free(r->res);
	r->res = NULL;
	r->n = r->cap = 0;
}

static double rate(uint64_t msgs, uint32_t size, uint64_t wall_ns)
{
	return wall_ns ? (double)msgs * size * 8.0 * 1e9 / (double)wall_ns : 0;
}

/* --op rpc: calls over the client's wall time, each moving request + answer. */
static uint64_t rpc_figures(const struct bench_report *r, const struct bench_result *res,
			    struct bench_figures *f)
{
	const struct bench_side_stats *cl = f->lat;
	uint64_t per = bench_msg_bytes(r->c->p, res->size);

	f->iterations = cl->tx_msgs;
	f->bytes = cl->tx_msgs * per;
	f->seconds = (double)cl->wall_ns / 1e9;
	if (cl->wall_ns) {
		f->bw_avg_bps = (double)cl->tx_msgs * (double)per * 8.0 * 1e9 / (double)cl->wall_ns;
		f->mpps = (double)cl->tx_msgs * 1e3 / (double)cl->wall_ns;
	}
	f->bw_peak_bps = r->c->p->mode == BENCH_MODE_LAT ? f->bw_avg_bps : cl->peak_bps;
	return cl->tx_msgs;
}

/* The verbs ops: messages each side sent, bandwidth summed over the senders. */
static uint64_t verbs_figures(const struct bench_report *r, const struct bench_result *res,
			      struct bench_figures *f)
{
	const struct bench_side_stats *sides[2] = {&res->me, &res->peer};
	int lat = r->c->p->mode == BENCH_MODE_LAT;
	uint64_t msgs = 0;

	for (int i = 0; i < 2; i++) {
		const struct bench_side_stats *s = sides[i];

		msgs += s->tx_msgs;
		if (lat || !s->tx_msgs)
			continue;
		f->bw_avg_bps += rate(s->tx_msgs, res->size, s->wall_ns);
		f->bw_peak_bps += s->peak_bps;
		f->mpps += (double)s->tx_msgs * 1e3 / (double)s->wall_ns;
		if (s->wall_ns > f->seconds * 1e9)
			f->seconds = (double)s->wall_ns / 1e9;
	}
	if (lat) {
		f->iterations = f->lat->tx_msgs;
		f->seconds = (double)f->lat->wall_ns / 1e9;
		if (f->seconds > 0) {
			f->bw_avg_bps = f->bw_peak_bps = rate(msgs, res->size, f->lat->wall_ns);
			f->mpps = (double)msgs / f->seconds / 1e6;
		}
	} else {
		f->iterations = msgs;
	}
	f->bytes = msgs * res->size;
	return msgs;
}

/*
 * --op xfer: from the client's record, ops (tx) in batches (rx) over its
 * wall time; iterations are batches, the rate and CPU are per op.
 */
static uint64_t xfer_figures(const struct bench_result *res, struct bench_figures *f)
{
	const struct bench_side_stats *cl = f->lat;

	f->iterations = cl->rx_msgs;
	f->bytes = cl->tx_msgs * res->size;
	f->seconds = (double)cl->wall_ns / 1e9;
	if (cl->wall_ns) {
		f->bw_avg_bps = rate(cl->tx_msgs, res->size, cl->wall_ns);
		f->mpps = (double)cl->tx_msgs * 1e3 / (double)cl->wall_ns;
	}
	f->bw_peak_bps = cl->peak_bps;
	return cl->tx_msgs;
}

void bench_figures(const struct bench_report *r, const struct bench_result *res,
		   struct bench_figures *f)
{
	uint64_t msgs;

	memset(f, 0, sizeof(*f));
	f->lat = r->c->is_client ? &res->me : &res->peer;
	if (r->c->p->op == BENCH_OP_XFER)
		msgs = xfer_figures(res, f);
	else
		msgs =
		    r->c->p->op == BENCH_OP_RPC ? rpc_figures(r, res, f) : verbs_figures(r, res, f);
	if (msgs) {
		f->cpu_local_us = (double)res->me.cpu_ns / 1e3 / (double)msgs;
		f->cpu_remote_us = (double)res->peer.cpu_ns / 1e3 / (double)msgs;
	}
	if (res->me.wall_ns)
		f->cpu_local_pct = 100.0 * (double)res->me.cpu_ns / (double)res->me.wall_ns;
	if (res->peer.wall_ns)
		f->cpu_remote_pct = 100.0 * (double)res->peer.cpu_ns / (double)res->peer.wall_ns;
}

static const char *gid_type(uint32_t roce_v2, const struct bench_ctx *c)
{
	const struct rk_device_info *di = rk_device_get_info(c->dev);

	if (di->link_layer == IBV_LINK_LAYER_INFINIBAND)
		return "IB";
	return roce_v2 ? "RoCE v2" : "RoCE v1";
}

/* ", paced 5 ms" after the poll mode when --pace is given, else "". */
static const char *pace_text(const struct bench_ctx *c, char *buf, size_t len)
{
	if (!c->l->pace_ms)
		return "";
	snprintf(buf, len, ", paced %u ms", c->l->pace_ms);
	return buf;
}

static void verbs_header(const struct bench_report *r)
{
	const struct bench_ctx *c = r->c;
	const struct bench_params *p = c->p;
	char pace[32];

	printf(" device %s port %u | GID index %d (%s) | MTU %u | QPs %u | tx depth %u | rx depth "
	       "%u\n",
	       c->me.dev, c->me.ib_port, c->me.gid_index, gid_type(c->me.roce_v2, c), c->me.mtu,
	       p->num_qp, p->tx_depth, p->rx_depth);
	printf(" batch %u | cq-mod %u | inline %u | poll %s%s | %s %u%s | warm-up %u\n", p->batch,
	       p->cq_mod, p->inline_size,
	       p->op == BENCH_OP_WRITE && p->mode == BENCH_MODE_LAT ? "busy (buffer)"
								    : bench_poll_name(c->l->poll),
	       pace_text(c, pace, sizeof(pace)), p->iters ? "iterations" : "duration",
	       p->iters ? p->iters : p->duration_s, p->iters ? " per QP" : " s per size",
	       p->warmup);
	if (p->op == BENCH_OP_READ)
		printf(" reads in flight %u per QP (the QP's initiator depth, as connected)\n",
		       c->reads_in_flight);
}

/* --op xfer: lanes, batches and chains. */
static void xfer_header(const struct bench_report *r)
{
	const struct bench_ctx *c = r->c;
	const struct bench_params *p = c->p;

	printf(" device %s port %u | GID index %d (%s) | MTU %u | lanes %u | access %s\n",
	       c->me.dev, c->me.ib_port, c->me.gid_index, gid_type(c->me.roce_v2, c), c->me.mtu,
	       p->num_qp, bench_xfer_mode(c));
	printf(" %s batches of %u ops, %u in flight | chain %u WRs per doorbell | %s%s | poll %s\n",
	       bench_xfer_op_name(p->xfer_op), p->batch, p->tx_depth, p->cq_mod,
	       p->notify ? "a notification per batch" : "no notifications",
	       p->verify ? " | data verified" : "", bench_poll_name(c->l->poll));
	printf(" %s %u%s | warm-up %u batches", p->iters ? "iterations" : "duration",
	       p->iters ? p->iters : p->duration_s, p->iters ? " batches" : " s per size",
	       p->warmup);
	if (p->xfer_op == BENCH_XFER_READ)
		printf(" | reads in flight %u per lane", c->reads_in_flight);
	printf("\n iterations: batches; bandwidth, rate and CPU: per op\n");
}

/* --op rpc has clients and calls in flight, not QPs and queue depths. */
static void rpc_header(const struct bench_report *r)
{
	const struct bench_ctx *c = r->c;
	const struct bench_params *p = c->p;
	char ans[48], pace[32];

	if (p->resp_size == BENCH_RESP_AS_REQ)
		snprintf(ans, sizeof(ans), "as many bytes as the request");
	else
		snprintf(ans, sizeof(ans), "%u B at every size", p->resp_size);
	printf(" device %s port %u | GID index %d (%s) | MTU %u | clients %u | calls in flight "
	       "%u per client\n",
	       c->me.dev, c->me.ib_port, c->me.gid_index, gid_type(c->me.roce_v2, c), c->me.mtu,
	       p->num_qp, p->mode == BENCH_MODE_LAT ? 1 : c->rpc_window);
	printf(" answer %s | poll %s%s | %s %u%s | warm-up %u\n", ans, bench_poll_name(c->l->poll),
	       pace_text(c, pace, sizeof(pace)), p->iters ? "iterations" : "duration",
	       p->iters ? p->iters : p->duration_s, p->iters ? " per client" : " s per size",
	       p->warmup);
	printf(" bytes: the request's; %s\n", p->mode == BENCH_MODE_BW
						  ? "bandwidth counts request + answer per call"
						  : "latency is the whole round trip");
}

void bench_report_header(const struct bench_report *r)
{
	const struct bench_ctx *c = r->c;
	const struct bench_params *p = c->p;
	const struct bench_local *l = c->l;
	const char *rule = "-----------------------------------------------------------------"
			   "------------------------------";

	if (l->quiet)
		return;
	printf("%s\n", rule);
	printf(" rk bench: %s %s%s, %s, %s%s%s\n", bench_op_title(p->op),
	       p->mode == BENCH_MODE_BW ? "bandwidth" : "latency",
	       p->bidir ? " (bidirectional)" : "", c->is_client ? "client" : "server",
	       p->oob ? "QPs connected out of band" : "rdma_cm", c->is_client ? " to " : "",
	       c->is_client ? l->host : "");
	if (p->op == BENCH_OP_RPC)
		rpc_header(r);
	else if (p->op == BENCH_OP_XFER)
		xfer_header(r);
	else
		verbs_header(r);
	printf(" kernel %s | clock %s", c->me.kernel, bench_clock_name());
	if (bench_clock_mhz() > 0)
		printf(" (%.0f MHz)", bench_clock_mhz());
	printf("\n");
	printf(" peer: device %s port %u | GID index %d (%s) | kernel %s\n", c->peer.dev,
	       c->peer.ib_port, c->peer.gid_index, gid_type(c->peer.roce_v2, c), c->peer.kernel);
	printf("%s\n", rule);
	if (p->mode == BENCH_MODE_BW)
		/* --op xfer: each batch's latency (post to end) beside its bandwidth. */
		printf(" %8s %12s %15s %15s %10s %13s %13s%s\n", "bytes", "iterations",
		       l->gbits ? "BW peak[Gb/s]" : "BW peak[MiB/s]",
		       l->gbits ? "BW avg[Gb/s]" : "BW avg[MiB/s]", "MsgRate[Mpps]", "CPU us/msg",
		       "peer us/msg",
		       p->op == BENCH_OP_XFER ? "  batch t_min[us]     t_med     t_p99     t_max"
					      : "");
	else
		printf(" %8s %10s %9s %9s %9s %9s %9s %9s %9s %10s %11s\n", "bytes", "iterations",
		       "t_min[us]", "t_med", "t_avg", "t_stdev", "t_p99", "t_p99.9", "t_max",
		       "CPU us/msg", "peer us/msg");
	fflush(stdout);
}

static void print_row(const struct bench_report *r, const struct bench_result *res)
{
	const struct bench_params *p = r->c->p;
	double div = r->c->l->gbits ? 1e9 : 8.0 * 1048576.0;
	struct bench_figures f;

	bench_figures(r, res, &f);
	if (p->mode == BENCH_MODE_BW) {
		const double *v = f.lat->lat_ns;

		printf(" %8u %12llu %15.2f %15.2f %13.6f %10.2f %13.2f", res->size,
		       (unsigned long long)f.iterations, f.bw_peak_bps / div, f.bw_avg_bps / div,
		       f.mpps, f.cpu_local_us, f.cpu_remote_us);
		if (p->op == BENCH_OP_XFER)
			printf(" %16.2f %9.2f %9.2f %9.2f", v[LAT_MIN] / 1e3, v[LAT_MEDIAN] / 1e3,
			       v[LAT_P99] / 1e3, v[LAT_MAX] / 1e3);
		printf("\n");
	} else {
		const double *v = f.lat->lat_ns;

		printf(" %8u %10llu %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f %11.2f\n",
		       res->size, (unsigned long long)f.iterations, v[LAT_MIN] / 1e3,
		       v[LAT_MEDIAN] / 1e3, v[LAT_AVG] / 1e3, v[LAT_STDEV] / 1e3, v[LAT_P99] / 1e3,
		       v[LAT_P999] / 1e3, v[LAT_MAX] / 1e3, f.cpu_local_us, f.cpu_remote_us);
	}
	fflush(stdout);
}

int bench_report_add(struct bench_report *r, const struct bench_result *res)
{
	if (r->n == r->cap) {
		unsigned cap = r->cap ? r->cap * 2 : 32;
		struct bench_result *n = realloc(r->res, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		r->res = n;
		r->cap = cap;
	}
	r->res[r->n++] = *res;
	if (!r->c->l->quiet)
		print_row(r, res);
	return 0;
}
