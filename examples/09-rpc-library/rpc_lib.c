/*
 * rpc_lib.c - example 08's RPC, on librdmakit instead of raw verbs.
 *
 * The same job: the client sends a request text, the server answers it in
 * upper case, with one request in flight (latency) and then --depth in
 * flight (throughput), every answer checked against its request, on one
 * connection kept for every call. What 08 does by hand - response slots
 * registered and announced, requests checked before indexing by them,
 * receives reposted before answering, the CM channel watched for a dead
 * peer, slots freed only when both the SEND and the answer completed - is
 * what rk_rpc_server / rk_rpc_client do inside (include/rdmakit/rpc.h).
 *
 *   ex09_rpc_lib [options] ADDR                  server (child process) and client
 *   ex09_rpc_lib --server [options] ADDR         the server only
 *   ex09_rpc_lib --client [options] ADDR         the client only
 *
 * This example links librdmakit; examples 01-08 use raw verbs on purpose.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmakit/rdmakit.h>

#include "ex_common.h"

#define TIMEOUT_MS  15000
#define MAX_DEPTH   64
#define MAX_PAYLOAD 112
#define M_UPPER	    1 /* method ids are the application's choice */
#define M_BYE	    2

struct args {
	struct ex_pair pair;
	long iters, depth;
};

/* ---- server -------------------------------------------------------------- */

struct server_state {
	unsigned long answered;
	int bye;
};

/* A handler gets the request (in memory the client cannot touch) and answers once. */
static void upper(struct rk_rpc_req *req, void *arg)
{
	struct server_state *st = arg;
	char out[MAX_PAYLOAD];
	uint32_t len;
	const char *in = rk_rpc_req_data(req, &len);

	if (len > MAX_PAYLOAD) { /* the library checked it fits its buffer, not our rule */
		rk_rpc_reply(req, EMSGSIZE, NULL, 0);
		return;
	}
	for (uint32_t i = 0; i < len; i++)
		out[i] = (char)toupper((unsigned char)in[i]);
	rk_rpc_reply(req, 0, out, len);
	st->answered++;
}

static void bye(struct rk_rpc_req *req, void *arg)
{
	struct server_state *st = arg;

	rk_rpc_reply(req, 0, NULL, 0);
	st->bye = 1;
}

static void run_server(void *arg, int ready_fd)
{
	const struct args *a = arg;
	struct rk_device_opts dopts = {.addr = a->pair.addr, .gid_index = -1};
	struct rk_rpc_server_opts so = {
	    .addr = a->pair.addr, .port = a->pair.port, .window = MAX_DEPTH};
	struct server_state st = {0};
	struct rk_rpc_server_stats stats;
	struct rk_rpc_server *srv;
	struct rk_device *dev;
	struct rk_error err;
	int64_t idle_ms = 0;

	if (rk_device_open(&dopts, &err, &dev))
		ex_die("%s", rk_error_str(&err));
	if (rk_rpc_server_create(dev, &so, &err, &srv))
		ex_die("%s", rk_error_str(&err));
	rk_rpc_server_add(srv, M_UPPER, upper, &st);
	rk_rpc_server_add(srv, M_BYE, bye, &st);
	printf("server: listening on %s port %s\n", a->pair.addr, a->pair.port);
	ex_server_ready(ready_fd);
	/* One thread does everything: accept, run handlers, send answers. */
	while (!st.bye) {
		int r = rk_rpc_server_progress(srv, 100, &err);

		if (r == -ETIMEDOUT) {
			rk_rpc_server_get_stats(srv, &stats);
			if (stats.conns_accepted && !stats.conns) /* closed or dropped before BYE */
				ex_die("the peer went away mid-run (%lu answered)", st.answered);
			idle_ms += 100;
			if (idle_ms > TIMEOUT_MS)
				ex_die("no request for %d ms", TIMEOUT_MS);
			continue;
		}
		if (r < 0)
			ex_die("%s", rk_error_str(&err));
		idle_ms = 0;
	}
	rk_rpc_server_get_stats(srv, &stats);
	if (stats.conns_accepted == 1)
		printf("server: answered %lu requests on one connection\n", st.answered);
	else
		printf("server: answered %lu requests on %llu connections\n", st.answered,
		       (unsigned long long)stats.conns_accepted);
	rk_rpc_server_destroy(srv);
	rk_device_close(dev);
}

/* ---- client -------------------------------------------------------------- */

struct call {
	char req[MAX_PAYLOAD], resp[MAX_PAYLOAD];
	uint32_t len, id;
	uint64_t t0;
};

struct phase {
	uint64_t *lat;
	uint32_t done;
};

static uint32_t make_request(char *buf, uint32_t id)
{
	return (uint32_t)snprintf(buf, MAX_PAYLOAD, "request %u: hello, rpc", id);
}

static void check(const struct call *c, uint32_t len)
{
	if (len != c->len)
		ex_die("answer to request %u: %u bytes, expected %u", c->id, len, c->len);
	for (uint32_t i = 0; i < len; i++)
		if (c->resp[i] != (char)toupper((unsigned char)c->req[i]))
			ex_die("answer to request %u differs at byte %u", c->id, i);
}

/* What a callback needs: the library hands back the pointer given with the call. */
struct async_ctx {
	struct phase *ph;
	struct call *c;
	int busy;
};

static void done_cb(void *arg, int status, uint32_t len, int32_t code, const struct rk_error *e)
{
	struct async_ctx *x = arg;

	(void)code;
	if (status)
		ex_die("request %u: %s", x->c->id, rk_error_str(e));
	check(x->c, len);
	x->ph->lat[x->ph->done++] = ex_now_ns() - x->c->t0;
	x->busy = 0;
}

static void run_phase(struct rk_rpc_client *cl, uint32_t depth, uint32_t iters, uint32_t *next_id,
		      uint64_t *lat)
{
	struct call calls[MAX_DEPTH];
	struct async_ctx ctx[MAX_DEPTH];
	struct phase ph = {.lat = lat};
	uint32_t issued = 0;
	struct rk_error err;
	uint64_t t0 = ex_now_ns(), sum = 0;
	double secs;

	for (uint32_t i = 0; i < depth; i++)
		ctx[i] = (struct async_ctx){.ph = &ph, .c = &calls[i]};
	while (ph.done < iters) {
		for (uint32_t i = 0; i < depth && issued < iters; i++) {
			struct call *c = &calls[i];
			struct rk_rpc_call_args a;

			if (ctx[i].busy)
				continue;
			c->id = *next_id + issued;
			c->len = make_request(c->req, c->id);
			c->t0 = ex_now_ns();
			a = (struct rk_rpc_call_args){.method = M_UPPER,
						      .req = c->req,
						      .req_len = c->len,
						      .resp = c->resp,
						      .resp_cap = MAX_PAYLOAD,
						      .timeout_ms = TIMEOUT_MS};
			/* The answer lands in c->resp; done_cb runs from progress below. */
			if (rk_rpc_call_async(cl, &a, done_cb, &ctx[i], &err))
				ex_die("%s", rk_error_str(&err));
			ctx[i].busy = 1;
			issued++;
		}
		if (rk_rpc_client_progress(cl, TIMEOUT_MS, &err) < 0)
			ex_die("%s", rk_error_str(&err));
	}
	secs = (ex_now_ns() - t0) / 1e9;
	*next_id += iters;
	for (uint32_t i = 0; i < iters; i++)
		sum += lat[i];
	printf("%5u %9u %10.0f %9.1f %9.1f %9.1f\n", depth, iters, iters / secs, sum / 1e3 / iters,
	       ex_percentile(lat, iters, 50) / 1e3, ex_percentile(lat, iters, 99) / 1e3);
}

static void run_client(void *arg)
{
	const struct args *a = arg;
	struct rk_device_opts dopts = {.addr = a->pair.addr, .gid_index = -1};
	struct rk_rpc_client_opts co = {.host = a->pair.addr,
					.port = a->pair.port,
					.window = (uint32_t)a->depth,
					.timeout_ms = TIMEOUT_MS};
	struct rk_rpc_call_args bye_call = {.method = M_BYE, .timeout_ms = TIMEOUT_MS};
	uint64_t *lat = calloc((size_t)a->iters, sizeof(*lat));
	struct rk_rpc_client *cl;
	struct rk_device *dev;
	struct rk_error err;
	uint32_t next_id = 0;

	if (!lat)
		ex_die("out of memory");
	if (rk_device_open(&dopts, &err, &dev))
		ex_die("%s", rk_error_str(&err));
	/* One call: rdma_cm, QP, PD, response slots, request buffers, wait set. */
	if (rk_rpc_client_connect(dev, &co, &err, &cl))
		ex_die("%s", rk_error_str(&err));
	printf("%5s %9s %10s %9s %9s %9s\n", "depth", "requests", "req/s", "avg_us", "p50_us",
	       "p99_us");
	run_phase(cl, 1, (uint32_t)a->iters, &next_id, lat);
	if (a->depth > 1)
		run_phase(cl, (uint32_t)a->depth, (uint32_t)a->iters, &next_id, lat);
	printf("verified %u responses (id, length, payload) on one connection\n", next_id);
	if (rk_rpc_call(cl, &bye_call, NULL, NULL, &err))
		ex_die("%s", rk_error_str(&err));
	rk_rpc_client_destroy(cl);
	rk_device_close(dev);
	free(lat);
}

static void usage(FILE *f)
{
	ex_pair_usage(f,
		      "Example 08's RPC on librdmakit (rk_rpc_server, rk_rpc_client): request by\n"
		      "SEND, answer by RDMA WRITE WITH IMMEDIATE. Prints requests/s and latency.\n",
		      "7510",
		      "  -n, --iters N     requests per phase (default 10000)\n"
		      "  -d, --depth D     requests in flight in the second phase, 1..%d "
		      "(default 8)\n",
		      MAX_DEPTH);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"server", no_argument, NULL, 's'},
					     {"client", no_argument, NULL, 'c'},
					     {"port", required_argument, NULL, 'p'},
					     {"iters", required_argument, NULL, 'n'},
					     {"depth", required_argument, NULL, 'd'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct args a = {.pair.port = "7510", .iters = 10000, .depth = 8};
	int opt;

	ex_set_prog(argv[0]);
	while ((opt = getopt_long(argc, argv, "scp:n:d:h", opts, NULL)) != -1) {
		if (ex_pair_option(&a.pair, opt, optarg, usage))
			continue;
		if (opt == 'n' && ex_parse_int(optarg, 1, 10000000, &a.iters))
			ex_die("--iters: '%s' is not a number in 1..10000000", optarg);
		if (opt == 'd' && ex_parse_int(optarg, 1, MAX_DEPTH, &a.depth))
			ex_die("--depth: '%s' is not a number in 1..%d", optarg, MAX_DEPTH);
	}
	ex_pair_run(&a.pair, argc, argv, usage, run_server, run_client, &a);
	return 0;
}
