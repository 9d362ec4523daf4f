/*
 * bench_start.c - a run's start on the control channel: the client
 * connects and sends its parameters with the session token; the server
 * takes the first connection whose PARAMS come in time (strangers are
 * closed and logged), judges them against its command line and the
 * device, and answers ACCEPT or REFUSE. Under rk matrix each side also
 * proves it holds its half of the pair's key.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

#include "bench_conn.h"
#include "bench_rpc.h"
#include "cli.h"
#include "common/deadline.h"

#define PARAMS_MSG_LEN (BENCH_PARAMS_LEN + BENCH_TOKEN_LEN)
#define HELLO_MS       5000 /* a connection's PARAMS must come within this (or --watchdog) */

/*
 * The control connection. A server that is still starting refuses it:
 * try again until the watchdog period is over, so that "start the server,
 * then the client" needs no sleep in between.
 */
static int connect_control(struct bench_ctx *c, struct rk_error *err)
{
	uint64_t deadline = cli_deadline_in(bench_step_ms(c));

	for (;;) {
		uint64_t now = cli_now_ns();
		struct timespec pause = {0, 200000000};
		int fd;

		if (now >= deadline)
			return bench_fail(err, ECONNREFUSED,
					  "nobody accepted a connection on %s port %s for %u s",
					  c->l->host, c->l->port, c->l->watchdog_s);
		fd = rk_tcp_connect(c->l->host, c->l->port, cli_deadline_ms_left(deadline), err);
		if (fd != -ECONNREFUSED)
			return fd;
		nanosleep(&pause, NULL);
	}
}

/* rk matrix: does the server's proof (ACCEPT, rdma_cm accept) hold the second half of the key? */
int bench_server_proved(const struct bench_ctx *c, const void *proof, size_t len)
{
	return proof && len == BENCH_TOKEN_LEN &&
	       cli_equal_ct(proof, c->l->pair_key + BENCH_TOKEN_LEN, BENCH_TOKEN_LEN);
}

int bench_client_start(struct bench_ctx *c, struct rk_error *err)
{
	uint8_t msg[PARAMS_MSG_LEN];
	struct bench_msg m;
	char why[200];
	int fd, r;

	r = bench_open_device(c, NULL, c->l->host, err);
	if (r)
		return r;
	if (bench_check_device(c->p, rk_device_get_info(c->dev), why, sizeof(why)))
		return bench_fail(err, EINVAL, "--%s", why);
	if (c->l->pair_key)
		memcpy(c->token, c->l->pair_key, BENCH_TOKEN_LEN);
	else if (getrandom(c->token, sizeof(c->token), 0) != (ssize_t)sizeof(c->token))
		return bench_fail(err, errno, "getrandom: %s", strerror(errno));
	fd = connect_control(c, err);
	if (fd < 0)
		return fd;
	bench_ctl_init(&c->ctl, fd);
	bench_params_encode(c->p, msg, sizeof(msg));
	memcpy(msg + BENCH_PARAMS_LEN, c->token, BENCH_TOKEN_LEN);
	r = bench_ctl_send(&c->ctl, BM_PARAMS, msg, sizeof(msg), bench_step_ms(c), err);
	if (r)
		return r;
	r = bench_ctl_recv(&c->ctl, &m, bench_step_ms(c), err);
	/* An older server drops today's frames unanswered. */
	if (r == -ECONNRESET)
		return bench_fail(err, ECONNRESET,
				  "the server closed the connection without an answer: it is no "
				  "rk bench, or one of another version");
	if (r)
		return r;
	if (m.type == BM_REFUSE) {
		char text[BENCH_MSG_MAX + 1];

		cli_clean_text(text, sizeof(text), m.data, m.len);
		return bench_fail(err, ECONNREFUSED, "the server refused the run: %s", text);
	}
	if (m.type != BM_ACCEPT || m.len != (c->l->pair_key ? BENCH_TOKEN_LEN : 0))
		return bench_fail(err, EPROTO, "protocol error: expected ACCEPT or REFUSE");
	if (c->l->pair_key && !bench_server_proved(c, m.data, m.len))
		return bench_fail(err, EACCES,
				  "the server at %s port %s did not prove it is the peer of this "
				  "pair (a wrong key)",
				  c->l->host, c->l->port);
	return 0;
}

static int refuse(struct bench_ctx *c, const char *why, struct rk_error *err)
{
	/* Best effort: the client learns why; we fail with the same words. */
	size_t n = strlen(why);

	bench_ctl_send(&c->ctl, BM_REFUSE, why, (uint16_t)(n < BENCH_MSG_MAX ? n : BENCH_MSG_MAX),
		       bench_step_ms(c), NULL);
	return bench_fail(err, EINVAL, "refused the client's run: %s", why);
}

/*
 * The first connection whose PARAMS come within HELLO_MS, well formed, is
 * the client; one that sends nothing or something else is closed, logged,
 * and the next one taken, until --wait runs out. So a stranger who reaches
 * the port holds the server at most HELLO_MS (a well-formed PARAMS with
 * other parameters is still a real client's mistake: refused, and the run
 * ends, as before). With rk matrix's pair key, only the client whose token
 * is the key's first half: anyone else is turned away (and logged) and the
 * server waits on for its real peer.
 */
static int accept_client(struct bench_ctx *c, struct bench_msg *m, struct rk_error *err)
{
	uint64_t deadline = cli_now_ns() + (uint64_t)c->l->wait_s * 1000000000u;
	int step = bench_step_ms(c) < HELLO_MS ? bench_step_ms(c) : HELLO_MS;

	for (;;) {
		uint64_t now = cli_now_ns();
		int fd, r;

		if (now >= deadline)
			return bench_fail(err, ETIMEDOUT, "no client within --wait %u s",
					  c->l->wait_s);
		fd = rk_tcp_accept(c->listen_fd, cli_deadline_ms_left(deadline), err);
		if (fd < 0)
			return fd;
		bench_ctl_init(&c->ctl, fd);
		/*
		 * Any length from a bare version on: an older peer's PARAMS are
		 * shorter, and it should hear that its version is refused.
		 */
		r = bench_ctl_expect(&c->ctl, BM_PARAMS, -1, m, step, err);
		if (!r && m->len < BENCH_PARAMS_MIN_LEN + BENCH_TOKEN_LEN)
			r = bench_fail(err, EPROTO, "protocol error: PARAMS of %u bytes", m->len);
		if (!r && (!c->l->pair_key || cli_equal_ct(m->data + m->len - BENCH_TOKEN_LEN,
							   c->l->pair_key, BENCH_TOKEN_LEN)))
			return 0;
		if (!r) {
			/* rk matrix: whoever it is, it is not this pair's other rank. */
			fprintf(stderr,
				"rk bench: turning away a client on port %s: not the peer "
				"of this pair (a wrong key)\n",
				c->l->port);
			bench_ctl_send(&c->ctl, BM_REFUSE, "not the peer of this pair", 25, 1000,
				       NULL);
		} else if (r == -EPROTO) {
			/* An older rk bench: said whatever --quiet, it is the user's mistake. */
			fprintf(stderr, "rk bench: refused a client: %s\n", rk_error_str(err));
		} else if (!c->l->quiet || c->l->pair_key) {
			fprintf(stderr,
				"rk bench: closed a connection that sent no parameters: %s\n",
				rk_error_str(err));
		}
		bench_ctl_close(&c->ctl);
		rk_error_clear(err);
	}
}

int bench_server_start(struct bench_ctx *c, const struct bench_params *server_p,
		       struct bench_params *client_p, struct rk_error *err)
{
	struct bench_msg m;
	char why[200];
	int r;

	r = bench_open_device(c, c->l->addr, NULL, err);
	if (r)
		return r;
	c->listen_fd = rk_tcp_listen(c->l->addr, c->l->port, err);
	if (c->listen_fd < 0)
		return c->listen_fd;
	if (!c->l->quiet)
		fprintf(stderr,
			"rk bench: waiting up to %u s for a client on port %s (device %s)\n",
			c->l->wait_s, c->l->port, c->me.dev);
	m.len = 0;
	r = accept_client(c, &m, err);
	if (r)
		return r;
	if (bench_params_decode(m.data, m.len - BENCH_TOKEN_LEN, client_p, why, sizeof(why)) ||
	    bench_params_diff(server_p, client_p, c->l->explicit_fields, why, sizeof(why)) ||
	    bench_check_device(client_p, rk_device_get_info(c->dev), why, sizeof(why)))
		return refuse(c, why, err);
	memcpy(c->token, m.data + m.len - BENCH_TOKEN_LEN, BENCH_TOKEN_LEN);
	c->p = client_p;
	if (client_p->op == BENCH_OP_RPC) {
		/* The RPC layer's server on the same address and port, instead of ours. */
		r = bench_rpc_listen(c, err);
		if (r) {
			bench_ctl_error(&c->ctl, rk_error_str(err));
			return r;
		}
	} else if (!client_p->oob) {
		struct rk_listen_opts lo = {
		    .addr = c->l->addr, .port = c->l->port, .app_id = BENCH_APP_ID};

		r = rk_listener_create(c->dev, &lo, err, &c->lis);
		if (r) {
			bench_ctl_error(&c->ctl, rk_error_str(err));
			return r;
		}
	}
	return bench_ctl_send(&c->ctl, BM_ACCEPT,
			      c->l->pair_key ? c->l->pair_key + BENCH_TOKEN_LEN : NULL,
			      c->l->pair_key ? BENCH_TOKEN_LEN : 0, bench_step_ms(c), err);
}
