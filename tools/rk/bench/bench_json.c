/*
 * bench_json.c - the run as one JSON document (json-c): parameters,
 * environment of both sides, and one record per size. Written once at the
 * end: on stdout (--json), or to a temporary name renamed into place
 * (--json=FILE), so a reader never sees a half-written file.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <rdmakit/version.h>

#include "bench_report.h"
#include "bench_xfer.h"
#include "cli.h"

static void add_str(json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

static void add_int(json_object *o, const char *k, int64_t v)
{
	json_object_object_add(o, k, json_object_new_int64(v));
}

/*
 * RESULT records are checked when decoded, so every figure is finite; if
 * one were not, json-c would write "Infinity" or "NaN", which is no JSON.
 * null keeps the document valid and the gap visible.
 */
static void add_num(json_object *o, const char *k, double v)
{
	json_object_object_add(o, k, isfinite(v) ? json_object_new_double(v) : NULL);
}

static json_object *params_json(const struct bench_ctx *c)
{
	const struct bench_params *p = c->p;
	json_object *o = json_object_new_object();

	add_str(o, "op", bench_op_name(p->op));
	add_str(o, "mode", bench_mode_name(p->mode));
	add_int(o, "size_min", p->size_min);
	add_int(o, "size_max", p->size_max);
	add_int(o, "iters_per_qp", p->iters);
	add_int(o, "duration_s", p->duration_s);
	add_int(o, "warmup", p->warmup);
	add_int(o, "batch", p->batch);
	add_int(o, "num_qp", p->num_qp);
	add_int(o, "tx_depth", p->tx_depth);
	add_int(o, "rx_depth", p->rx_depth);
	add_int(o, "cq_mod", p->cq_mod);
	add_int(o, "inline", p->inline_size);
	if (p->op == BENCH_OP_READ || (p->op == BENCH_OP_XFER && p->xfer_op == BENCH_XFER_READ))
		add_int(o, "reads_in_flight", c->reads_in_flight);
	if (p->op == BENCH_OP_XFER) {
		add_str(o, "xfer_op", bench_xfer_op_name(p->xfer_op));
		add_int(o, "ops_per_batch", p->batch);
		add_int(o, "batches_in_flight", p->tx_depth);
		add_int(o, "lanes", p->num_qp);
		add_int(o, "chain", p->cq_mod);
		json_object_object_add(o, "notify", json_object_new_boolean(p->notify));
		json_object_object_add(o, "verify", json_object_new_boolean(p->verify));
		add_str(o, "access", bench_xfer_mode(c));
	}
	if (p->op == BENCH_OP_RPC) {
		/* null: the answer is as long as the request (each record says). */
		if (p->resp_size == BENCH_RESP_AS_REQ)
			json_object_object_add(o, "resp_size", NULL);
		else
			add_int(o, "resp_size", p->resp_size);
		add_int(o, "calls_in_flight", p->mode == BENCH_MODE_LAT ? 1 : c->rpc_window);
	}
	json_object_object_add(o, "bidir", json_object_new_boolean(p->bidir));
	add_str(o, "connection", p->oob ? "oob" : "rdma_cm");
	add_str(o, "poll", bench_poll_name(c->l->poll));
	add_int(o, "pace_ms", c->l->pace_ms);
	add_int(o, "watchdog_s", c->l->watchdog_s);
	add_str(o, "clock", bench_clock_name());
	add_num(o, "clock_mhz", bench_clock_mhz());
	return o;
}

static json_object *side_json(const struct bench_side_info *s)
{
	json_object *o = json_object_new_object();

	add_str(o, "device", s->dev);
	add_int(o, "port", s->ib_port);
	add_int(o, "gid_index", s->gid_index);
	add_str(o, "gid_type", s->roce_v2 ? "RoCE v2" : "RoCE v1 / IB");
	add_int(o, "mtu", s->mtu);
	add_str(o, "kernel", s->kernel);
	return o;
}

/*
 * --op xfer: this side's layer counters over the timed run (rk_xfer_stats):
 * the client's doorbells, WRs, ops, batches and notifications sent, the
 * server's notifications received; the completions of batch WRs this side
 * handed to the layer; and the ratios they are judged by.
 */
static json_object *xfer_json(const struct bench_result *res)
{
	const struct rk_xfer_stats *x = &res->xs;
	json_object *o = json_object_new_object();

	add_int(o, "doorbells", (int64_t)x->doorbells);
	add_int(o, "wrs", (int64_t)x->wrs);
	add_int(o, "ops", (int64_t)x->ops);
	add_int(o, "batches", (int64_t)x->batches);
	add_int(o, "notifs_sent", (int64_t)x->notifs_sent);
	add_int(o, "notifs_received", (int64_t)x->notifs_received);
	add_int(o, "reg_mr", (int64_t)x->reg_mr);
	add_int(o, "foreign", (int64_t)x->foreign);
	add_int(o, "completions", (int64_t)res->xfer_cqes);
	if (x->ops) {
		add_num(o, "doorbells_per_op", (double)x->doorbells / (double)x->ops);
		add_num(o, "completions_per_op", (double)res->xfer_cqes / (double)x->ops);
	}
	if (x->batches)
		add_num(o, "notifs_per_batch", (double)x->notifs_sent / (double)x->batches);
	return o;
}

static json_object *result_json(const struct bench_report *r, const struct bench_result *res)
{
	static const char *const lat_keys[LAT_N] = {"min", "median", "avg", "stdev",
						    "p99", "p99_9",  "max"};
	json_object *o = json_object_new_object(), *cpu = json_object_new_object();
	struct bench_figures f;

	bench_figures(r, res, &f);
	add_int(o, "size", res->size);
	if (r->c->p->op == BENCH_OP_RPC)
		add_int(o, "resp_size", bench_resp_size(r->c->p, res->size));
	add_int(o, "iterations", (int64_t)f.iterations);
	add_int(o, "bytes", (int64_t)f.bytes);
	add_num(o, "seconds", f.seconds);
	add_num(o, "bw_peak_gbps", f.bw_peak_bps / 1e9);
	add_num(o, "bw_avg_gbps", f.bw_avg_bps / 1e9);
	add_num(o, "bw_avg_mib_s", f.bw_avg_bps / 8.0 / 1048576.0);
	add_num(o, "mpps", f.mpps);
	add_int(o, "local_tx_msgs", (int64_t)res->me.tx_msgs);
	add_int(o, "local_rx_msgs", (int64_t)res->me.rx_msgs);
	add_int(o, "peer_tx_msgs", (int64_t)res->peer.tx_msgs);
	add_int(o, "peer_rx_msgs", (int64_t)res->peer.rx_msgs);
	add_num(cpu, "local_us_per_msg", f.cpu_local_us);
	add_num(cpu, "peer_us_per_msg", f.cpu_remote_us);
	add_num(cpu, "local_pct", f.cpu_local_pct);
	add_num(cpu, "peer_pct", f.cpu_remote_pct);
	json_object_object_add(o, "cpu", cpu);
	if (r->c->p->op == BENCH_OP_XFER)
		json_object_object_add(o, "xfer", xfer_json(res));
	if (r->c->p->mode == BENCH_MODE_LAT || r->c->p->op == BENCH_OP_XFER) {
		json_object *lat = json_object_new_object();

		add_int(lat, "samples", (int64_t)f.lat->lat_samples);
		for (int i = 0; i < LAT_N; i++)
			add_num(lat, lat_keys[i], f.lat->lat_ns[i] / 1e3);
		json_object_object_add(o, "latency_us", lat);
	}
	return o;
}

int bench_report_json(const struct bench_report *r, const char *path, struct rk_error *err)
{
	const struct bench_ctx *c = r->c;
	json_object *root = json_object_new_object(), *env = json_object_new_object();
	json_object *arr = json_object_new_array();
	char tmp[4096];
	int rc = 0;

	add_str(root, "tool", "rk bench");
	add_str(root, "version", rk_version());
	add_str(root, "role", c->is_client ? "client" : "server");
	json_object_object_add(root, "params", params_json(c));
	json_object_object_add(env, "local", side_json(&c->me));
	json_object_object_add(env, "peer", side_json(&c->peer));
	add_str(env, "latency",
		c->p->op == BENCH_OP_XFER				? "batch: post to end"
		: c->p->op == BENCH_OP_READ || c->p->op == BENCH_OP_RPC ? "round trip"
									: "half round trip");
	json_object_object_add(root, "env", env);
	for (unsigned i = 0; i < r->n; i++)
		json_object_array_add(arr, result_json(r, &r->res[i]));
	json_object_object_add(root, "results", arr);

	if (cli_json_to_stdout(path)) { /* --json without FILE */
		printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY));
		if (fflush(stdout))
			rc = bench_fail(err, errno ? errno : EIO, "--json: stdout: %s",
					strerror(errno ? errno : EIO));
	} else if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >=
		   (int)sizeof(tmp)) {
		rc = bench_fail(err, ENAMETOOLONG, "--json %s: name too long", path);
	} else if (json_object_to_file_ext(tmp, root, JSON_C_TO_STRING_PRETTY) != 0) {
		rc = bench_fail(err, errno ? errno : EIO, "--json %s: %s", path,
				json_util_get_last_err());
		unlink(tmp);
	} else if (rename(tmp, path)) {
		rc = bench_fail(err, errno, "--json %s: %s", path, strerror(errno));
		unlink(tmp);
	}
	json_object_put(root);
	return rc;
}
