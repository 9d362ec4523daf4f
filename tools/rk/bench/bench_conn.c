/*
 * bench_conn.c - setting up and tearing down one side of a benchmark.
 *
 * Order of a run: control channel (TCP) -> PARAMS -> ACCEPT/REFUSE ->
 * buffer and CQ -> QPs (rdma_cm, or QP numbers exchanged as OOB messages
 * on the control channel) -> READY both ways. The server decides on the
 * parameters before it creates anything, so a refused client costs it
 * nothing but a TCP connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include <rdmakit/wire.h>

#include "bench_clock.h"
#include "bench_conn.h"
#include "bench_rpc.h"
#include "bench_xfer.h"
#include "cli.h"
#include "common/deadline.h"

#define PARAMS_MSG_LEN (BENCH_PARAMS_LEN + BENCH_TOKEN_LEN)
#define HELLO_MS       5000 /* a connection's PARAMS must come within this (or --watchdog) */
#define READY_LEN      (32 + 64 + 4 * 4 + 8 + 8 + 4)
#define MAX_BUFFER     (4ull << 30) /* (1 + num-qp) * size we agree to pin */

void bench_ctx_init(struct bench_ctx *c, const struct bench_params *p, const struct bench_local *l)
{
	memset(c, 0, sizeof(*c));
	c->p = p;
	c->l = l;
	c->is_client = l->host != NULL;
	c->ctl.fd = -1;
	c->listen_fd = -1;
}

int bench_step_ms(const struct bench_ctx *c)
{
	return (int)c->l->watchdog_s * 1000;
}

int bench_connect_ms(const struct bench_ctx *c)
{
	int ms = bench_step_ms(c);

	return ms > BENCH_CONNECT_MIN_MS ? ms : BENCH_CONNECT_MIN_MS;
}

/* Copy @src into @dst, cut to fit (names and kernel strings may be long). */
static void copy_cut(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);

	memcpy(dst, src, n);
	dst[n] = 0;
}

static void fill_kernel(char *buf, size_t len)
{
	struct utsname u;
	char tmp[3 * sizeof(u.release) + 3];

	if (uname(&u)) {
		copy_cut(buf, len, "unknown");
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s %s %s", u.sysname, u.release, u.machine);
	copy_cut(buf, len, tmp);
}

/* This side keeps receives posted when SENDs or WRITE_IMMs come its way. */
static int needs_receives(const struct bench_params *p, int is_client)
{
	if (p->op != BENCH_OP_SEND && p->op != BENCH_OP_WRITE_IMM)
		return 0;
	return p->mode == BENCH_MODE_LAT || p->bidir || !is_client;
}

/*
 * Selective signaling as perftest does it: at most tx-depth WRs in flight
 * (the engines count them), one signaled every cq-mod (at most tx-depth).
 * The send queue holds cq-mod more than that: the library signals every
 * WR posted into the last signal_every free slots (and caps signal_every
 * at half the queue), so a queue of exactly tx-depth would signal nearly
 * every WR once it is full, a completion per WR instead of one per cq-mod.
 */
uint32_t bench_signal_every(const struct bench_params *p)
{
	return p->cq_mod < p->tx_depth ? p->cq_mod : p->tx_depth;
}

static uint32_t sq_depth(const struct bench_params *p)
{
	return p->tx_depth + bench_signal_every(p);
}

/* --op xfer registers its memory through the one-sided layer (bench_xfer.c): none here. */
static uint64_t buffer_len(const struct bench_params *p)
{
	return p->op == BENCH_OP_XFER ? 0 : (uint64_t)p->size_max * (1 + p->num_qp);
}

/* What the parameters need from the device; "PARAM: why" on failure. */
static int check_device(const struct bench_params *p, const struct rk_device_info *di, char *why,
			size_t len)
{
	uint64_t cqe = (uint64_t)p->num_qp * (sq_depth(p) + p->rx_depth);

	if (sq_depth(p) > di->max_qp_wr) {
		snprintf(why, len, "tx-depth: %u (+ %u for signaling) exceeds the device's %u",
			 p->tx_depth, bench_signal_every(p), di->max_qp_wr);
		return -1;
	}
	if (p->rx_depth > di->max_qp_wr) {
		snprintf(why, len, "rx-depth: %u exceeds the device's %u", p->rx_depth,
			 di->max_qp_wr);
		return -1;
	}
	if (cqe > di->max_cqe) {
		snprintf(why, len,
			 "num-qp: %u QPs x (tx-depth %u + %u + rx-depth %u) exceed the device's %u "
			 "CQ entries",
			 p->num_qp, p->tx_depth, bench_signal_every(p), p->rx_depth, di->max_cqe);
		return -1;
	}
	if (buffer_len(p) > MAX_BUFFER || buffer_len(p) > di->max_mr_size) {
		snprintf(why, len, "num-qp: (1 + %u QPs) x %u bytes is more memory than allowed",
			 p->num_qp, p->size_max);
		return -1;
	}
	return 0;
}

/*
 * The device (cli.h): --dev, else the server's --addr (@addr),
 * else $RK_DEV, else the client's route to the server (what rdma_cm will
 * use).
 */
static int open_device(struct bench_ctx *c, const char *addr, const char *peer,
		       struct rk_error *err)
{
	struct rk_device_opts o = {
	    .port = c->l->ib_port,
	    .gid_index = c->l->gid_index,
	};
	const struct rk_device_info *di;
	int r;

	/* With -d the GID is picked as the client picks its own (no address): both ends alike. */
	cli_device_opts(&o, c->l->dev_name, c->l->dev_name ? NULL : addr, peer);
	r = rk_device_open(&o, err, &c->dev);

	if (r)
		return r;
	di = rk_device_get_info(c->dev);
	copy_cut(c->me.dev, sizeof(c->me.dev), di->name);
	fill_kernel(c->me.kernel, sizeof(c->me.kernel));
	c->me.ib_port = di->port;
	c->me.gid_index = di->gid_index;
	c->me.roce_v2 = (uint32_t)di->gid_roce_v2;
	c->me.mtu = di->active_mtu_bytes;
	return 0;
}

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
static int server_proved(const struct bench_ctx *c, const void *proof, size_t len)
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

	r = open_device(c, NULL, c->l->host, err);
	if (r)
		return r;
	if (check_device(c->p, rk_device_get_info(c->dev), why, sizeof(why)))
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
	if (c->l->pair_key && !server_proved(c, m.data, m.len))
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

	r = open_device(c, c->l->bind, NULL, err);
	if (r)
		return r;
	c->listen_fd = rk_tcp_listen(c->l->bind, c->l->port, err);
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
	    check_device(client_p, rk_device_get_info(c->dev), why, sizeof(why)))
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
		    .addr = c->l->bind, .port = c->l->port, .app_id = BENCH_APP_ID};

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

/* Keep receives posted before the peer can send (rk_conn_opts.prepare). */
static int prepare_receives(struct rk_conn *conn, void *arg)
{
	struct bench_qp *q = arg;
	struct bench_ctx *c = q->ctx;
	uint32_t len = c->p->op == BENCH_OP_SEND ? c->p->size_max : 0;

	if (!c->receives)
		return 0;
	for (uint32_t i = 0; i < c->p->rx_depth; i++) {
		int r = rk_post_recv(conn, q->rx, len, c->lkey, q->index, NULL);

		if (r)
			return r;
	}
	return 0;
}

static void conn_opts(struct bench_ctx *c, struct bench_qp *q, struct rk_conn_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->sq_depth = sq_depth(c->p);
	o->rq_depth = c->receives ? c->p->rx_depth : 1;
	o->max_inline = c->p->inline_size;
	o->signal_every = bench_signal_every(c->p);
	o->cq = c->cq;
	o->max_mtu = c->l->mtu ? rk_mtu_from_bytes(c->l->mtu) : 0;
	/*
	 * A sender that outruns the receiver's reposting gets an RNR NAK and
	 * pauses min_rnr_timer before retrying: 0.64 ms (code 12, as perftest)
	 * instead of the library's 10 ms, or small SENDs run at RNR speed.
	 */
	o->min_rnr_timer = 12;
	/*
	 * READs in flight are capped by the QP's rd_atomic, not by tx-depth:
	 * the library's 16 would throttle a READ benchmark to 16 outstanding
	 * requests. Allow tx-depth, up to the device's limit (perftest's -o
	 * defaults to the device's limit too). The peer's side is negotiated
	 * by rdma_cm or clamped when the QP is connected.
	 */
	if (c->p->op == BENCH_OP_READ) {
		const struct rk_device_info *di = rk_device_get_info(c->dev);
		uint32_t rd = c->p->tx_depth;

		if (rd > di->max_qp_rd_atom)
			rd = di->max_qp_rd_atom;
		if (rd > di->max_qp_init_rd_atom)
			rd = di->max_qp_init_rd_atom;
		if (rd > UINT8_MAX)
			rd = UINT8_MAX;
		o->max_rd_atomic = (uint8_t)(rd ? rd : 1);
	}
	o->prepare = prepare_receives;
	o->prepare_arg = q;
	if (c->p->op == BENCH_OP_XFER)
		bench_xfer_conn_opts(c, o);
}

static int connect_oob(struct bench_ctx *c, struct bench_qp *q, struct rk_error *err)
{
	struct rk_conn_opts o;
	struct rk_oob_info mine, theirs;
	uint8_t buf[RK_OOB_MSG_LEN];
	struct bench_msg m;
	int r;

	conn_opts(c, q, &o);
	r = rk_conn_create(c->dev, &o, err, &q->conn);
	if (r)
		return r;
	rk_conn_local_info(q->conn, &mine);
	mine.app = q->index;
	r = rk_oob_encode(&mine, buf, sizeof(buf));
	if (r < 0)
		return bench_fail(err, -r, "rk_oob_encode: QP %u", q->index);
	r = bench_ctl_send(&c->ctl, BM_OOB, buf, RK_OOB_MSG_LEN, bench_step_ms(c), err);
	r = r ?: bench_ctl_expect(&c->ctl, BM_OOB, RK_OOB_MSG_LEN, &m, bench_step_ms(c), err);
	r = r ?: rk_oob_decode(m.data, m.len, &theirs, err);
	if (r)
		return r;
	if (theirs.app != q->index)
		return bench_fail(err, EPROTO, "the peer sent QP %u's coordinates for QP %u",
				  theirs.app, q->index);
	return rk_conn_connect(q->conn, &theirs, err);
}

static int connect_cm_client(struct bench_ctx *c, struct bench_qp *q, struct rk_error *err)
{
	struct rk_hello h = {
	    .app_id = BENCH_APP_ID, .app_arg = q->index, .token_len = BENCH_TOKEN_LEN};
	struct rk_cm_connect_opts o = {
	    .host = c->l->host, .port = c->l->port, .timeout_ms = bench_connect_ms(c), .hello = &h};

	const void *proof;
	size_t len;
	int r;

	memcpy(h.token, c->token, BENCH_TOKEN_LEN);
	conn_opts(c, q, &o.conn);
	r = rk_cm_connect(c->dev, &o, err, &q->conn);
	if (r || !c->l->pair_key)
		return r;
	proof = rk_conn_peer_data(q->conn, &len);
	if (!server_proved(c, proof, len))
		return bench_fail(err, EACCES,
				  "the RDMA peer at %s port %s did not prove it is the peer of "
				  "this pair (a wrong key)",
				  c->l->host, c->l->port);
	return 0;
}

/* Accept num_qp requests carrying our client's token; anyone else is turned away. */
static int accept_cm(struct bench_ctx *c, struct rk_error *err)
{
	uint64_t deadline = cli_deadline_in(bench_connect_ms(c));

	while (c->nqp < c->p->num_qp) {
		struct rk_cm_request *req;
		const struct rk_hello *h;
		struct rk_conn_opts o;
		struct bench_qp *q;
		uint64_t now = cli_now_ns();
		int r;

		if (now >= deadline)
			return bench_fail(err, ETIMEDOUT, "%u of %u QPs connected after %d ms",
					  c->nqp, c->p->num_qp, bench_connect_ms(c));
		r = rk_listener_get_request(c->lis, cli_deadline_ms_left(deadline), err, &req);
		if (r)
			return r;
		h = rk_cm_request_hello(req);
		if (h->token_len != BENCH_TOKEN_LEN ||
		    !cli_equal_ct(h->token, c->token, BENCH_TOKEN_LEN) ||
		    h->app_arg >= c->p->num_qp || c->qps[h->app_arg].conn) {
			fprintf(stderr, "rk bench: turning away %s: not a QP of this run\n",
				rk_cm_request_peer(req));
			r = rk_cm_request_reject(req, RK_REJECT_TOKEN, "not a QP of this run", err);
			if (r)
				return r;
			continue;
		}
		q = &c->qps[h->app_arg];
		conn_opts(c, q, &o);
		r = rk_cm_request_accept(
		    req, &o, c->l->pair_key ? c->l->pair_key + BENCH_TOKEN_LEN : NULL,
		    c->l->pair_key ? BENCH_TOKEN_LEN : 0, bench_connect_ms(c), err, &q->conn);
		if (r)
			return r;
		c->nqp++;
	}
	return 0;
}

static void encode_ready(const struct bench_side_info *s, uint8_t *b)
{
	memset(b, 0, READY_LEN);
	memcpy(b, s->dev, sizeof(s->dev));
	memcpy(b + 32, s->kernel, sizeof(s->kernel));
	rk_put32(b + 96, s->ib_port);
	rk_put32(b + 100, (uint32_t)s->gid_index);
	rk_put32(b + 104, s->roce_v2);
	rk_put32(b + 108, s->mtu);
	rk_put64(b + 112, s->buf_addr);
	rk_put64(b + 120, s->buf_len);
	rk_put32(b + 128, s->buf_rkey);
}

/* A NUL-padded name from the peer: printable before we print it. */
static void clean_text(char *dst, const uint8_t *src, size_t len)
{
	cli_clean_text(dst, len, src, strnlen((const char *)src, len));
}

static int decode_ready(struct bench_ctx *c, const uint8_t *b, struct rk_error *err)
{
	struct bench_side_info *s = &c->peer;
	/* --op rpc has no buffer of rk bench's own: its READY says 0 bytes. */
	uint64_t want = c->p->op == BENCH_OP_RPC ? 0 : buffer_len(c->p);

	clean_text(s->dev, b, sizeof(s->dev));
	clean_text(s->kernel, b + 32, sizeof(s->kernel));
	s->ib_port = rk_get32(b + 96);
	s->gid_index = (int32_t)rk_get32(b + 100);
	s->roce_v2 = rk_get32(b + 104);
	s->mtu = rk_get32(b + 108);
	s->buf_addr = rk_get64(b + 112);
	s->buf_len = rk_get64(b + 120);
	s->buf_rkey = rk_get32(b + 128);
	if (s->buf_len != want)
		return bench_fail(err, EPROTO, "the peer's buffer is %llu bytes, expected %llu",
				  (unsigned long long)s->buf_len, (unsigned long long)want);
	if (s->buf_addr > UINT64_MAX - s->buf_len)
		return bench_fail(err, EPROTO, "the peer's buffer address wraps around");
	if (s->roce_v2 > 1 || s->ib_port > 255 || (s->mtu && !rk_mtu_from_bytes(s->mtu)))
		return bench_fail(err, EPROTO, "the peer's READY message is out of range");
	return 0;
}

static unsigned mr_access(const struct bench_params *p)
{
	switch (p->op) {
	case BENCH_OP_WRITE:
	case BENCH_OP_WRITE_IMM:
		return RK_ACCESS_REMOTE_WRITE;
	case BENCH_OP_READ:
		return RK_ACCESS_REMOTE_READ;
	default:
		return RK_ACCESS_LOCAL;
	}
}

/* Buffer, CQ and QPs: every op but rpc. */
static int connect_qps(struct bench_ctx *c, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	struct rk_cq_opts co = {0};
	int r;

	c->receives = needs_receives(p, c->is_client);
	if (p->op != BENCH_OP_XFER) {
		r = rk_mr_alloc(c->dev, buffer_len(p), mr_access(p), err, &c->mr);
		if (r)
			return r;
		c->base = rk_mr_addr(c->mr);
		c->lkey = rk_mr_lkey(c->mr);
	}
	co.depth = p->op == BENCH_OP_XFER
		       ? bench_xfer_cq_depth(c)
		       : p->num_qp * (sq_depth(p) + (c->receives ? p->rx_depth : 1));
	co.mode = c->l->poll;
	r = rk_cq_create(c->dev, &co, err, &c->cq);
	if (r)
		return r;
	c->vcq = rk_cq_ibv(c->cq);
	c->qps = calloc(p->num_qp, sizeof(*c->qps));
	if (!c->qps)
		return bench_fail(err, ENOMEM, "out of memory for %u QPs", p->num_qp);
	for (uint32_t i = 0; i < p->num_qp; i++) {
		c->qps[i].ctx = c;
		c->qps[i].index = i;
		c->qps[i].rx = c->base ? c->base + (uint64_t)p->size_max * (1 + i) : NULL;
		/* --op xfer: --batch is ops per batch, posted by the layer. */
		c->qps[i].wrs = calloc(p->op == BENCH_OP_XFER ? 1 : p->batch, sizeof(struct rk_wr));
		if (!c->qps[i].wrs)
			return bench_fail(err, ENOMEM, "out of memory for WR templates");
	}
	if (p->oob) {
		for (; c->nqp < p->num_qp; c->nqp++) {
			r = connect_oob(c, &c->qps[c->nqp], err);
			if (r)
				return r;
		}
	} else if (c->is_client) {
		for (; c->nqp < p->num_qp; c->nqp++) {
			r = connect_cm_client(c, &c->qps[c->nqp], err);
			if (r)
				return r;
		}
	} else {
		r = accept_cm(c, err);
		if (r)
			return r;
	}
	c->me.mtu = rk_mtu_bytes(rk_conn_path_mtu(c->qps[0].conn));
	if (p->op == BENCH_OP_READ || (p->op == BENCH_OP_XFER && p->xfer_op == BENCH_XFER_READ)) {
		uint8_t init;

		/* What the QP got, not what was asked: rdma_cm may negotiate it down. */
		r = rk_conn_rd_atomic(c->qps[0].conn, &init, NULL, err);
		if (r)
			return r;
		c->reads_in_flight = init;
	}
	c->me.buf_addr = (uintptr_t)c->base;
	c->me.buf_len = buffer_len(p);
	c->me.buf_rkey = c->mr ? rk_mr_rkey(c->mr) : 0;
	return 0;
}

int bench_connect(struct bench_ctx *c, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	uint8_t ready[READY_LEN];
	struct bench_msg m;
	int r;

	/* The engines' clock; its 10 ms calibration must not fall inside a run. */
	bench_clock_init();
	r = p->op == BENCH_OP_RPC ? bench_rpc_connect(c, err) : connect_qps(c, err);
	if (r)
		return r;
	encode_ready(&c->me, ready);
	r = bench_ctl_send(&c->ctl, BM_READY, ready, READY_LEN, bench_step_ms(c), err);
	r = r ?: bench_ctl_expect(&c->ctl, BM_READY, READY_LEN, &m, bench_step_ms(c), err);
	r = r ?: decode_ready(c, m.data, err);
	if (!r && p->op == BENCH_OP_XFER)
		r = bench_xfer_setup(c, err);
	if (r)
		return r;
	for (uint32_t i = 0; c->qps && i < p->num_qp; i++)
		c->qps[i].remote_rx = c->peer.buf_addr + (uint64_t)p->size_max * (1 + i);
	return 0;
}

void bench_ctx_release(struct bench_ctx *c)
{
	bench_rpc_release(c);
	/* The layer's order: batches and peer, the lanes, then segment and rk_xfer. */
	bench_xfer_release_peer(c);
	if (c->qps) {
		for (uint32_t i = c->p->num_qp; i-- > 0;) {
			rk_conn_destroy(c->qps[i].conn);
			free(c->qps[i].wrs);
		}
		free(c->qps);
		c->qps = NULL;
	}
	bench_xfer_release(c);
	rk_cq_destroy(c->cq);
	c->cq = NULL;
	c->vcq = NULL;
	rk_mr_dereg(c->mr);
	c->mr = NULL;
	rk_listener_destroy(c->lis);
	c->lis = NULL;
	bench_ctl_close(&c->ctl);
	if (c->listen_fd >= 0 && close(c->listen_fd))
		perror("rk bench: close listening socket");
	c->listen_fd = -1;
	rk_device_close(c->dev);
	c->dev = NULL;
}
