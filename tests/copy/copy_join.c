/*
 * copy_join.c - connect requests rk serve must refuse before any session
 * state is touched: a lane that names a session key nobody has, lanes 0 and
 * past CP_MAX_LANES dressed up as joins, a join without a key, and a client
 * of protocol version 1. Each must end in a rejection whose reason text
 * says why.
 *
 * usage: copy_join ADDR PORT   (an rk serve listening there; RK_DEV set)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmakit/cm.h>
#include <rdmakit/device.h>

#include "copy_proto.h"

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
	rk_device_close(dev);
	printf("copy join: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
