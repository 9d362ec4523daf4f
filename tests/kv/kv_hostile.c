/*
 * kv_hostile.c - clients that misbehave against example 10's block server
 * (examples/10-kv-cache, kv_wire.h); each prints what it saw and exits 0
 * when the server held out, 1 when not.
 *
 *   stall N      N data-lane connects that never finish their handshake:
 *                raw librdmacm, the connect sent and its events never read,
 *                so the ready-to-use message is never sent. Prints "stall:
 *                sent" and sleeps until killed: meanwhile the server must
 *                go on serving everybody else.
 *   hold LEASE   a client that says hello and goes silent: RPC connection,
 *                lane, hello. Then (a) bye with its ticket from another RPC
 *                connection must be refused (EPERM: the lane is bound to
 *                the first); (b) a lookup every LEASE/4 s for 1.5 LEASE s
 *                must keep the lane up (the lease is renewed); (c) then
 *                silence: the server must close the lane within LEASE + 3 s,
 *                and the ticket then be unknown (ENOENT).
 *   flood        data lanes from one address until one is refused: the
 *                server must refuse the (KV_LANES_PER_ADDR + 1)-th busy.
 *   stall-lanes N  as stall, against the Python package's Listener on PORT
 *                itself (python/tests/test_xfer.py): each connect a lane 0
 *                of 1 of its own peer (hello "RKXL", a random token).
 *
 * usage: kv_hostile stall N|stall-lanes N|hold LEASE|flood ADDR PORT   (the
 *        server's RPC port; its lanes on PORT + 1; RK_DEV set)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/random.h>

#include <rdma/rdma_cma.h>

#include <rdmakit/rdmakit.h>

#include "kv_wire.h"

#define TIMEOUT_MS  10000
#define RKXL_APP_ID 0x524B584Cu /* python/rdmakit/xfer_base.py: LANES_APP_ID */
#define RKXL_TOKEN  16		/* ... _TOKEN_LEN */

static const char *addr;
static char port[8], lane_port[8];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, const struct rk_error *err)
{
	printf("FAIL %s: %s\n", what, err ? rk_error_str(err) : strerror(errno));
	exit(1);
}

/* One rdma_cm event of type @want on @ch, or die. */
static void expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event", NULL);
	if (ev->event != want) {
		printf("FAIL %s, not %s\n", rdma_event_str(ev->event), rdma_event_str(want));
		exit(1);
	}
	rdma_ack_cm_event(ev);
}

/* @h encoded into @hb; with @rkxl, a fresh random token first. */
static int lane_hello(struct rk_hello *h, int rkxl, uint8_t *hb, size_t len)
{
	int hl;

	if (rkxl && getrandom(h->token, RKXL_TOKEN, 0) != RKXL_TOKEN)
		die("getrandom", NULL);
	hl = rk_hello_encode(h, hb, len);
	if (hl < 0)
		die("rk_hello_encode", NULL);
	return hl;
}

/*
 * Lane connects that stop after sending the request: no RTU ever. @rkxl:
 * the hello of a Python Listener's lane (lane 0 of 1, a token of its own
 * each) to @lane_port's server itself, not KV_APP_ID's.
 */
static void stall(int n, int rkxl)
{
	struct rk_hello h = {.app_id = KV_APP_ID};
	uint8_t hb[RK_HELLO_MSG_MAX];

	if (rkxl) {
		h.app_id = RKXL_APP_ID;
		h.app_arg = 1u << 8;
		h.token_len = RKXL_TOKEN;
	}
	for (int i = 0; i < n; i++) {
		int hl = lane_hello(&h, rkxl, hb, sizeof(hb));
		struct rdma_event_channel *ch = rdma_create_event_channel();
		struct ibv_qp_init_attr qa = {
		    .qp_type = IBV_QPT_RC,
		    .cap = {
			.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
		struct rdma_conn_param p = {.private_data = hb,
					    .private_data_len = (uint8_t)hl,
					    .responder_resources = 1,
					    .initiator_depth = 1,
					    .retry_count = 7};
		struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *ai;
		struct rdma_cm_id *id;

		if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
		    rdma_getaddrinfo(addr, lane_port, &hints, &ai))
			die("rdma_cm setup", NULL);
		if (rdma_resolve_addr(id, NULL, ai->ai_dst_addr, TIMEOUT_MS))
			die("rdma_resolve_addr", NULL);
		expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
		if (rdma_resolve_route(id, TIMEOUT_MS))
			die("rdma_resolve_route", NULL);
		expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
		if (rdma_create_qp(id, NULL, &qa) || rdma_connect(id, &p))
			die("rdma_connect", NULL);
		rdma_freeaddrinfo(ai);
		/* ... and never a look at @ch again: the server's accept goes unanswered. */
	}
	printf("stall: sent\n");
	fflush(stdout);
	for (;;)
		pause();
}

static struct rk_rpc_client *rpc(struct rk_device *dev)
{
	struct rk_rpc_client_opts co = {.host = addr, .port = port, .timeout_ms = TIMEOUT_MS};
	struct rk_rpc_client *cl;
	struct rk_error err;

	if (rk_rpc_client_connect(dev, &co, &err, &cl))
		die("rpc connect", &err);
	return cl;
}

/* A data lane as kv_client.c opens it; its ticket in *@ticket. */
static int lane(struct rk_device *dev, struct rk_conn **out, uint64_t *ticket, struct rk_error *err)
{
	struct rk_hello h = {.app_id = KV_APP_ID};
	struct rk_cm_connect_opts o = {
	    .host = addr, .port = lane_port, .timeout_ms = TIMEOUT_MS, .hello = &h};
	const uint8_t *t;
	size_t len;
	int r = rk_cm_connect(dev, &o, err, out);

	if (r)
		return r;
	t = rk_conn_peer_data(*out, &len);
	if (!t || len < KV_TICKET_LEN) {
		printf("FAIL no ticket\n");
		exit(1);
	}
	*ticket = kv_get64(t);
	return 0;
}

/* A call; returns 0 or the server's code (a transport failure dies). */
static int32_t call(struct rk_rpc_client *cl, uint16_t m, const void *req, uint32_t len)
{
	uint8_t resp[KV_HELLO_HDR + RK_XFER_DESC_MAX];
	struct rk_rpc_call_args ca = {.method = m,
				      .req = req,
				      .req_len = len,
				      .resp = resp,
				      .resp_cap = sizeof(resp),
				      .timeout_ms = TIMEOUT_MS};
	struct rk_error err;
	int32_t code = 0;
	int r = rk_rpc_call(cl, &ca, NULL, &code, &err);

	if (r && r != -EREMOTEIO)
		die("call", &err);
	return r ? code : 0;
}

static int up(struct rk_conn *c)
{
	return rk_conn_progress(c, 0, NULL) == RK_CONN_CONNECTED;
}

static void hold(struct rk_device *dev, double lease)
{
	struct rk_rpc_client *cl = rpc(dev), *other = rpc(dev);
	uint8_t t[KV_TICKET_LEN], key[8] = {0};
	struct rk_error err;
	struct rk_conn *c;
	uint64_t ticket;
	double t0;
	int32_t code;

	if (lane(dev, &c, &ticket, &err))
		die("lane", &err);
	kv_put64(t, ticket);
	if ((code = call(cl, KV_M_HELLO, t, sizeof(t))))
		printf("FAIL hello: %s\n", strerror(code)), exit(1);
	code = call(other, KV_M_BYE, t, sizeof(t));
	printf("hold: bye from another RPC connection: %s\n", code ? strerror(code) : "accepted");
	if (code != EPERM)
		exit(1);
	for (t0 = now_s(); now_s() - t0 < 1.5 * lease; usleep((useconds_t)(lease * 250000))) {
		if (call(cl, KV_M_LOOKUP, key, sizeof(key)))
			printf("FAIL lookup\n"), exit(1);
		if (!up(c))
			printf("FAIL hold: the lane closed while renewed\n"), exit(1);
	}
	printf("hold: renewed by lookups for %.1f s, the lane is up\n", now_s() - t0);
	for (t0 = now_s(); up(c) && now_s() - t0 < lease + 3; usleep(50000))
		;
	if (up(c)) {
		printf("FAIL hold: the lane is still up %.1f s after the last lookup\n", lease + 3);
		exit(1);
	}
	code = call(cl, KV_M_HELLO, t, sizeof(t));
	printf("hold: the server closed the lane after the lease; hello then: %s\n",
	       code ? strerror(code) : "accepted");
	if (code != ENOENT)
		exit(1);
	rk_conn_destroy(c);
	rk_rpc_client_destroy(other);
	rk_rpc_client_destroy(cl);
}

static void flood(struct rk_device *dev)
{
	struct rk_conn *c[KV_LANES_MAX + 1];
	struct rk_error err;
	uint64_t ticket;
	int n = 0, r = 0;

	while (n <= KV_LANES_MAX && !(r = lane(dev, &c[n], &ticket, &err)))
		n++;
	printf("flood: %d lanes accepted, then %s\n", n,
	       r == -ECONNREFUSED && err.reject_reason == RK_REJECT_BUSY ? "refused busy"
									 : rk_error_str(&err));
	while (n)
		rk_conn_destroy(c[--n]);
	if (r != -ECONNREFUSED || err.reject_reason != RK_REJECT_BUSY)
		exit(1);
}

int main(int argc, char **argv)
{
	struct rk_device_opts dopts = {.gid_index = -1};
	struct rk_device *dev;
	struct rk_error err;
	int a = argc > 1 && !strcmp(argv[1], "flood") ? 2 : 3;
	long p;

	if (argc != a + 2) {
		fprintf(stderr,
			"usage: kv_hostile stall N|stall-lanes N|hold LEASE|flood ADDR PORT\n");
		return 2;
	}
	addr = argv[a];
	p = strtol(argv[a + 1], NULL, 10);
	snprintf(port, sizeof(port), "%ld", p);
	snprintf(lane_port, sizeof(lane_port), "%ld", p + 1);
	if (!strcmp(argv[1], "stall"))
		stall((int)strtol(argv[2], NULL, 10), 0);
	if (!strcmp(argv[1], "stall-lanes")) {
		snprintf(lane_port, sizeof(lane_port), "%ld", p);
		stall((int)strtol(argv[2], NULL, 10), 1);
	}
	dopts.addr = addr;
	if (rk_device_open(&dopts, &err, &dev))
		die("device", &err);
	if (!strcmp(argv[1], "hold"))
		hold(dev, strtod(argv[2], NULL));
	else
		flood(dev);
	rk_device_close(dev);
	return 0;
}
