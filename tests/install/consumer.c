/*
 * consumer.c - a program outside the tree, built against an installed
 * librdmakit (pkg-config or find_package): an RPC echo server.
 *
 *   consumer_c version              print the library's version
 *   consumer_c serve ADDR PORT N    answer N echo calls, then exit 0
 *
 * Every wait has a deadline: 30 s without a call ends it with exit 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmakit/rdmakit.h>

#define M_ECHO	 1
#define QUIET_MS 30000

static unsigned long answered;

static void echo(struct rk_rpc_req *req, void *arg)
{
	uint32_t len;
	const void *data = rk_rpc_req_data(req, &len);

	(void)arg;
	rk_rpc_reply(req, 0, data, len);
	answered++;
}

static int serve(const char *addr, const char *port, unsigned long n)
{
	struct rk_device_opts dopts = {.addr = addr, .gid_index = -1};
	struct rk_rpc_server_opts so = {.addr = addr, .port = port};
	struct rk_rpc_server *srv = NULL;
	struct rk_device *dev = NULL;
	struct rk_error err;
	int quiet_ms = 0, rc = 1;

	if (rk_device_open(&dopts, &err, &dev) || rk_rpc_server_create(dev, &so, &err, &srv) ||
	    rk_rpc_server_add(srv, M_ECHO, echo, NULL)) {
		fprintf(stderr, "consumer_c: %s\n", rk_error_str(&err));
		goto out;
	}
	printf("consumer_c: listening on %s port %s\n", addr, port);
	fflush(stdout);
	while (answered < n && quiet_ms < QUIET_MS) {
		int r = rk_rpc_server_progress(srv, 100, &err);

		if (r == -ETIMEDOUT) {
			quiet_ms += 100;
		} else if (r < 0 && r != -EINTR) {
			fprintf(stderr, "consumer_c: %s\n", rk_error_str(&err));
			goto out;
		} else {
			quiet_ms = 0;
		}
	}
	rc = answered < n;
	printf("consumer_c: answered %lu calls\n", answered);
out:
	rk_rpc_server_destroy(srv);
	rk_device_close(dev);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "version")) {
		printf("consumer_c: librdmakit %s\n", rk_version());
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "serve"))
		return serve(argv[2], argv[3], strtoul(argv[4], NULL, 10));
	fprintf(stderr, "usage: consumer_c version | serve ADDR PORT N\n");
	return 2;
}
