/*
 * copy_join.c - connect requests rk serve must refuse before any session
 * state is touched: a lane that names a session key nobody has, lanes 0 and
 * past CP_MAX_LANES dressed up as joins, a join without a key, and a client
 * of protocol version 1. Each must end in a rejection whose reason text
 * says why. Then a real session that writes a slot whose sequence number
 * (in the ring's immediate and its header block) lies outside the window:
 * the server must answer with a protocol ERROR.
 *
 * usage: copy_join ADDR PORT   (an rk serve listening there; RK_DEV set)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmakit/cm.h>
#include <rdmakit/cq.h>
#include <rdmakit/device.h>
#include <rdmakit/mr.h>
#include <rdmakit/post.h>

#include "copy_proto.h"
#include "raw_ring.h"

static int failures;

static void expect_refused(struct rk_device *dev, const char *addr, const char *port,
			   const char *what, uint32_t app_arg, unsigned token_len, const char *text)
{
	struct rk_hello h = {.app_id = CP_APP_ID, .app_arg = app_arg, .token_len = token_len};
	struct rk_cm_connect_opts co = {.host = addr, .port = port, .hello = &h};
	struct rk_conn *conn = NULL;
	struct rk_error e;
	int r;

	memset(h.token, 0x5a, sizeof(h.token));
	r = rk_cm_connect(dev, &co, &e, &conn);
	if (r == 0) {
		printf("FAIL %s: accepted\n", what);
		rk_conn_destroy(conn);
		failures++;
	} else if (r != -ECONNREFUSED || !strstr(e.msg, text)) {
		printf("FAIL %s: %d %s (wanted a rejection naming '%s')\n", what, r,
		       rk_error_str(&e), text);
		failures++;
	} else {
		printf("ok   %s: %s\n", what, e.msg);
	}
}

/* Wait up to 5 s for a receive completion; its byte count, or -1. */
static int wait_recv(struct rk_conn *conn)
{
	struct ibv_wc wc[4];
	struct rk_error e;

	for (int tries = 0; tries < 50; tries++) {
		int n = rk_cq_wait(rk_conn_cq(conn), wc, 4, 100, &e);

		for (int i = 0; i < n; i++)
			if (wc[i].status == IBV_WC_SUCCESS && (wc[i].opcode & IBV_WC_RECV))
				return (int)wc[i].byte_len;
	}
	return -1;
}

static int post_recv(struct rk_conn *conn, void *arg)
{
	struct rk_mr *rx = arg;

	return rk_post_recv(conn, rk_mr_addr(rx), CP_MSG_MAX, rk_mr_lkey(rx), 1, NULL);
}

/* A slot stamped with sequence 1000 while the server expects 0. */
static void bad_sequence(struct rk_device *dev, const char *addr, const char *port)
{
	struct rk_hello h = {.app_id = CP_APP_ID, .app_arg = cp_lane_arg(0)};
	struct rk_mr *rx = NULL, *tx = NULL;
	struct rk_cm_connect_opts co = {.host = addr, .port = port, .hello = &h};
	struct cp_hello hello = {.chunk = 65536, .depth = 4, .lanes = 1};
	struct cp_slot_writer w;
	struct cp_welcome wel;
	struct rk_conn *conn = NULL;
	struct rk_error e;
	char text[256] = "";
	uint16_t code;
	int n;

	if (rk_mr_alloc(dev, CP_MSG_MAX, RK_ACCESS_LOCAL, &e, &rx) ||
	    rk_mr_alloc(dev, CP_MSG_MAX, RK_ACCESS_LOCAL, &e, &tx)) {
		printf("FAIL bad sequence: %s\n", rk_error_str(&e));
		failures++;
		goto out;
	}
	co.conn.prepare = post_recv;
	co.conn.prepare_arg = rx;
	if (rk_cm_connect(dev, &co, &e, &conn)) {
		printf("FAIL bad sequence: connect: %s\n", rk_error_str(&e));
		failures++;
		goto out;
	}
	n = cp_hello_encode(&hello, rk_mr_addr(tx), CP_MSG_MAX);
	{
		struct rk_wr wr = {.op = RK_OP_SEND,
				   .flags = RK_WR_SIGNALED,
				   .addr = rk_mr_addr(tx),
				   .len = (uint32_t)n,
				   .lkey = rk_mr_lkey(tx)};

		if (rk_post(conn, &wr, &e) || (n = wait_recv(conn)) < 0 ||
		    cp_welcome_decode(rk_mr_addr(rx), (size_t)n, &wel)) {
			printf("FAIL bad sequence: no WELCOME\n");
			failures++;
			goto out;
		}
	}
	/* A header block, well formed, but stamped far ahead of the window. */
	post_recv(conn, rx);
	cp_slot_init(&w, rk_mr_addr(tx), CP_HDR_SIZE);
	cp_slot_finish(&w, 1000);
	{
		struct rk_wr wr = {.op = RK_OP_WRITE_IMM,
				   .flags = RK_WR_SIGNALED,
				   .addr = rk_mr_addr(tx),
				   .len = (uint32_t)w.len,
				   .lkey = rk_mr_lkey(tx),
				   .remote_addr = wel.ring_addr + raw_slot(wel.nslots, 1000) *
								      cp_slot_stride(wel.chunk),
				   .rkey = wel.rkey,
				   .imm = raw_imm(wel.nslots, 1000)};

		if (rk_post(conn, &wr, &e) || (n = wait_recv(conn)) < 0 ||
		    cp_error_decode(rk_mr_addr(rx), (size_t)n, &code, text, sizeof(text)) ||
		    code != CP_E_PROTO) {
			printf("FAIL bad sequence: no protocol ERROR from the server\n");
			failures++;
			goto out;
		}
	}
	printf("ok   slot outside the sequence window: %s\n", text);
out:
	rk_conn_destroy(conn);
	rk_mr_dereg(tx);
	rk_mr_dereg(rx);
}

int main(int argc, char **argv)
{
	struct rk_device_opts o = {.gid_index = -1};
	struct rk_device *dev;
	struct rk_error e;

	if (argc != 3) {
		fprintf(stderr, "usage: copy_join ADDR PORT\n");
		return 2;
	}
	o.name = getenv("RK_DEV");
	o.addr = o.name ? NULL : argv[1];
	if (rk_device_open(&o, &e, &dev)) {
		fprintf(stderr, "copy_join: %s\n", rk_error_str(&e));
		return 1;
	}
	expect_refused(dev, argv[1], argv[2], "unknown session key", cp_lane_arg(1), CP_KEY_LEN,
		       "no such session");
	expect_refused(dev, argv[1], argv[2], "join as lane 0", CP_VERSION | CP_LANE_JOIN,
		       CP_KEY_LEN, "malformed lane");
	expect_refused(dev, argv[1], argv[2], "lane past the maximum",
		       CP_VERSION | CP_LANE_JOIN | (uint32_t)CP_MAX_LANES << 16, CP_KEY_LEN,
		       "malformed lane");
	expect_refused(dev, argv[1], argv[2], "join without a key", cp_lane_arg(1), 0,
		       "without session key");
	expect_refused(dev, argv[1], argv[2], "protocol version 1", 1, 0, "protocol 1");
	bad_sequence(dev, argv[1], argv[2]);
	rk_device_close(dev);
	printf("copy join: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
