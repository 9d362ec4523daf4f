/*
 * copy_send.c - one rk copy session (see copy_send.h).
 *
 * Local staging mirrors the server's ring (librdmakit's credit ring, with
 * our own memory and posts: rdmakit/ring.h's caller_buffers): slot i here
 * is filled (records into its header block, file bytes read straight into
 * its data block) and posted as one WRITE WITH IMMEDIATE, the header block
 * moved to sit right before the data, into slot i there. The ring hands
 * out slot i (its credit) once the server copied out what it held; our
 * staging slot is free again once that write completed, so up to nslots
 * chunks are in flight while the next one is read from disk.
 *
 * Small files go several to a slot (BEGIN, DATA, END together) without
 * waiting for anything. A file larger than a chunk, and every file with
 * --resume, first announces itself (BEGIN with WAIT) and waits for READY:
 * one round trip per large file, which lets the server refuse it before
 * any data moves. With --resume the BEGIN also proves what we hold (the
 * hashes of our file and of its prefixes, see CP_BEGIN_PROOF) and READY
 * names the longest of those prefixes the server already has.
 *
 * Every wait is bounded: a completion error, a DISCONNECTED event or
 * idle_ms without any completion ends the session with a message.
 *
 * Threads: once the ring is agreed, each lane (connection; more than one
 * with --num-qp) has a thread that posts the slots handed to it and
 * handles its completions, while the main thread reads and hashes the
 * next chunk. Posting is where the work of a software RDMA device (rxe)
 * happens, in the poster's system call, so the two overlap even with one
 * lane, and N lanes spread it over N CPUs. One mutex guards everything the
 * threads share (slots, the ring, plan items, the session's fate); the main thread
 * holds it except while it reads and hashes file data, which only it
 * touches, and while it waits on the condition variable the lane threads
 * signal after every batch of completions.
 *
 * This file sets the session up and ends it; copy_send_lane.c handles
 * what arrives and runs the lane threads, copy_send_file.c turns plan
 * items into records (copy_send_int.h has the map).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <rdmakit/cm.h>
#include <rdmakit/conn.h>
#include <rdmakit/cq.h>
#include <rdmakit/device.h>
#include <rdmakit/mr.h>
#include <rdmakit/post.h>

#include "cli.h"
#include "copy_send_int.h"
#include "copy_token.h"

#define ACCEPT_MS 5000
#define PULL_MS	  10000 /* serving a pull: the PULL must come this soon */

static void vfatal(struct sender *s, int code, int transport, const char *fmt, va_list ap)
{
	if (s->fatal)
		return; /* the first cause is the one that counts */
	s->fatal = code;
	s->transport = transport;
	vsnprintf(s->why, s->why_len, fmt, ap);
}

void snd_fatal(struct sender *s, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfatal(s, code, 0, fmt, ap);
	va_end(ap);
}

/* The session ended because the transport failed: a reconnect may cure it. */
void snd_fatal_transport(struct sender *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfatal(s, RK_EXIT_LOST, 1, fmt, ap);
	va_end(ap);
}

/* ---- session set-up ---- */

/* The device: --dev, else $RK_DEV, else the one the route to the server leaves by (cli.h). */
static int open_device(const struct cp_send_opts *o, struct rk_device **dev, char *why,
		       size_t why_len)
{
	struct rk_device_opts d = {.gid_index = -1};
	struct rk_error e;

	cli_device_opts(&d, o->dev, NULL, o->host);
	if (rk_device_open(&d, &e, dev))
		return cli_device_failed(&e, why, why_len);
	return 0;
}

/* Local-access memory: in the caller's protection domain if it gave one. */
static int alloc_mr(struct sender *s, size_t len, struct rk_error *e, struct rk_mr **mr)
{
	return s->o->pd ? rk_mr_alloc_pd(s->o->pd, len, RK_ACCESS_LOCAL, e, mr)
			: rk_mr_alloc(s->dev, len, RK_ACCESS_LOCAL, e, mr);
}

/*
 * Lane @l: its wake-up fd; its receive buffers come with its connection
 * (snd_prepare, before the QP connects).
 */
static int lane_init(struct sender *s, unsigned idx)
{
	struct send_lane *l = &s->lanes[idx];

	l->s = s;
	l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->evfd < 0) {
		snd_fatal(s, RK_EXIT_LOST, "eventfd: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Connect failures a restarting or briefly unreachable server causes (no
 * listener yet, no answer, route not there yet); not a bad name or a
 * local fault.
 */
static int reachable_later(int err)
{
	return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
	       err == ENETUNREACH || err == ECONNABORTED || err == ECONNRESET;
}

static int lane_connect(struct sender *s, unsigned idx, const struct rk_hello *hello)
{
	struct send_lane *l = &s->lanes[idx];
	struct rk_cm_connect_opts co = {
	    .host = s->o->host,
	    .port = s->o->port,
	    .hello = hello,
	    .conn = {.sq_depth = SQ_DEPTH,
		     .rq_depth = RQ_DEPTH,
		     .wait_mode = RK_WAIT_EVENT,
		     .ack_timeout = s->o->ack_timeout,
		     .prepare = snd_prepare,
		     .prepare_arg = l},
	};
	struct rk_error e;
	char which[32] = "";

	if (rk_cm_connect(s->dev, &co, &e, &l->conn)) {
		l->conn = NULL; /* the library destroyed it */
		if (idx)
			snprintf(which, sizeof(which), "lane %u ", idx);
		if (e.reject_reason) /* the server refused us (token, busy, ...): final */
			snd_fatal(s, RK_EXIT_REFUSED, "cannot connect %sto %s:%s: %s", which,
				  s->o->host, s->o->port, rk_error_str(&e));
		else if (reachable_later(e.err)) {
			s->refused = !idx && e.err == ECONNREFUSED;
			s->unanswered = !idx && e.err != ECONNREFUSED;
			snd_fatal_transport(s, "cannot connect %sto %s:%s: %s", which, s->o->host,
					    s->o->port, rk_error_str(&e));
		} else
			snd_fatal(s, RK_EXIT_LOST, "cannot connect %sto %s:%s: %s", which,
				  s->o->host, s->o->port, rk_error_str(&e));
		return -1;
	}
	if (snd_watch_lane(l, &e)) {
		snd_fatal(s, RK_EXIT_LOST, "%s", rk_error_str(&e));
		return -1;
	}
	return 0;
}

/* Serving a pull: lane 0 is the connection the client asked for. */
static int lane_accept(struct sender *s, unsigned idx, struct rk_cm_request *req)
{
	struct send_lane *l = &s->lanes[idx];
	struct rk_conn_opts co = {.sq_depth = SQ_DEPTH,
				  .rq_depth = RQ_DEPTH,
				  .wait_mode = RK_WAIT_EVENT,
				  .ack_timeout = s->o->ack_timeout,
				  .prepare = snd_prepare,
				  .prepare_arg = l,
				  .pd = s->o->pd};
	struct rk_conn *conn = NULL;
	struct rk_error e;

	if (!idx)
		s->accept_used = 1; /* taken by the call, whatever it returns */
	if (rk_cm_request_accept(req, &co, NULL, 0, ACCEPT_MS, &e, &conn)) {
		l->conn = NULL;
		if (idx)
			snd_fatal_transport(s, "accept of lane %u: %s", idx, rk_error_str(&e));
		else
			snd_fatal(s, RK_EXIT_LOST, "accept: %s", rk_error_str(&e));
		return -1;
	}
	l->conn = conn;
	if (snd_watch_lane(l, &e)) {
		snd_fatal(s, RK_EXIT_LOST, "%s", rk_error_str(&e));
		return -1;
	}
	return 0;
}

/* Send an ERROR (code, text) on lane 0 and wait a moment for it to leave. */
static void send_error(struct sender *s, uint16_t code, const char *text)
{
	struct rk_wr wr = {.op = RK_OP_SEND, .flags = RK_WR_SIGNALED, .wr_id = HELLO_WRID};
	int n = cp_error_encode(code, text, rk_mr_addr(s->hello), CP_MSG_MAX);
	struct rk_error e;
	struct ibv_wc wc;

	wr.addr = rk_mr_addr(s->hello);
	wr.len = (uint32_t)n;
	wr.lkey = rk_mr_lkey(s->hello);
	if (n > 0 && rk_post(s->lanes[0].conn, &wr, &e) == 0)
		rk_cq_wait(rk_conn_cq(s->lanes[0].conn), &wc, 1, 2000, &e);
}

/*
 * Serving a pull: wait for the client's PULL, let the caller plan it
 * (o->on_pull), and take its chunk, depth and flags as a client's own.
 */
static int take_pull(struct sender *s)
{
	struct cp_pull p;
	char why[256] = "";
	uint64_t t0 = cli_now_ns();
	size_t stride;
	int code;

	s->last_ns = t0;
	while (!s->pulled) {
		if (cli_now_ns() - t0 > (uint64_t)PULL_MS * 1000000) {
			snd_fatal_transport(s, "no PULL from the client within %d s",
					    PULL_MS / 1000);
			return -1;
		}
		if (snd_pump(s, WAIT_MS))
			return -1;
	}
	if (cp_pull_decode(s->pull_buf, s->pull_len, &p)) {
		send_error(s, CP_E_PROTO, "malformed PULL");
		snd_fatal(s, RK_EXIT_LOST, "protocol error: malformed PULL");
		return -1;
	}
	s->own.chunk = p.chunk;
	s->own.depth = p.depth < CP_MAX_SLOTS ? p.depth : CP_MAX_SLOTS;
	s->own.flags = p.flags;
	s->own.lanes = s->o->join ? p.lanes : 1;
	s->nlanes = s->own.lanes;
	/* What we register for slots is bounded as rk serve's rings are (--max-ring). */
	stride = cp_slot_stride(p.chunk);
	if (s->o->max_stage && stride > s->o->max_stage) {
		snprintf(why, sizeof(why),
			 "limit: --max-ring: a %u-byte chunk needs %zu bytes, this server allows "
			 "%llu",
			 p.chunk, stride, (unsigned long long)s->o->max_stage);
		send_error(s, CP_E_LIMIT, why);
		snd_fatal(s, RK_EXIT_REFUSED, "%s", why);
		return -1;
	}
	if (s->o->max_stage && s->own.depth * stride > s->o->max_stage)
		s->own.depth = (unsigned)(s->o->max_stage / stride);
	/* The client's ring holds a slot per lane at least: that must fit as well. */
	if (s->own.depth < s->own.lanes)
		s->own.depth = s->own.lanes;
	if (s->o->max_stage && s->own.depth * stride > s->o->max_stage) {
		snprintf(
		    why, sizeof(why),
		    "limit: --max-ring: %u lanes of %u-byte chunks need %zu bytes, this server "
		    "allows %llu",
		    s->own.lanes, p.chunk, s->own.depth * stride,
		    (unsigned long long)s->o->max_stage);
		send_error(s, CP_E_LIMIT, why);
		snd_fatal(s, RK_EXIT_REFUSED, "%s", why);
		return -1;
	}
	code = s->o->on_pull(s->o->on_pull_arg, &p, s->plan, why, sizeof(why));
	if (code) {
		send_error(s, (uint16_t)code, why);
		snd_fatal(s, RK_EXIT_REFUSED, "%s", why);
		return -1;
	}
	cp_progress_init(s->o->progress, s->plan->bytes, (uint32_t)s->plan->files, 0);
	s->rate_ns = cli_now_ns();
	return 0;
}

/*
 * Lane 0: connect with the access token (or, serving a pull, accept the
 * client's connection and take its PULL), HELLO, wait for WELCOME (the
 * ring and the session key). Then the other lanes join with the key, and
 * the staging slots are registered.
 */
static int connect_and_hello(struct sender *s)
{
	struct rk_hello hello = {.app_id = CP_APP_ID, .app_arg = cp_lane_arg(0)};
	struct cp_hello h = {0};
	struct rk_wr wr = {.op = RK_OP_SEND, .flags = RK_WR_SIGNALED, .wr_id = HELLO_WRID};
	struct rk_error e;
	int n, r;

	if (s->o->accept) {
		if (lane_init(s, 0) || lane_accept(s, 0, s->o->accept) || take_pull(s))
			return -1;
	} else {
		if (s->o->token) {
			hello.token_len = CP_TOKEN_LEN;
			memcpy(hello.token, s->o->token, CP_TOKEN_LEN);
		}
		if (lane_init(s, 0) || lane_connect(s, 0, &hello))
			return -1;
	}
	h.chunk = s->o->chunk;
	h.depth = (uint16_t)s->o->depth;
	h.flags = (uint16_t)s->o->flags;
	h.lanes = (uint16_t)s->nlanes;
	h.total_bytes = s->plan->bytes;
	h.total_files = (uint32_t)s->plan->files;
	if (s->o->replacing) {
		h.flags |= CP_F_REPLACES;
		memcpy(h.replaces, s->o->replaces, CP_KEY_LEN);
	}
	n = cp_hello_encode(&h, rk_mr_addr(s->hello), CP_MSG_MAX);
	wr.addr = rk_mr_addr(s->hello);
	wr.len = (uint32_t)n;
	wr.lkey = rk_mr_lkey(s->hello);
	if (n < 0 || rk_post(s->lanes[0].conn, &wr, &e)) {
		snd_lost(&s->lanes[0], "(sending hello)");
		return -1;
	}
	s->last_ns = cli_now_ns();
	while (!s->welcomed)
		if (snd_pump(s, WAIT_MS))
			return -1;
	for (unsigned i = 1; i < s->nlanes; i++) {
		struct rk_hello join = {
		    .app_id = CP_APP_ID, .app_arg = cp_lane_arg(i), .token_len = CP_KEY_LEN};
		struct rk_cm_request *req = NULL;

		memcpy(join.token, s->w.key, CP_KEY_LEN);
		if (s->o->accept) {
			/*
			 * Serving a pull: the client connects its further lanes
			 * with the key as soon as its WELCOME is out; the first
			 * call enters the key in the registry, so it comes first.
			 */
			req = s->o->join(s->o->join_arg, s->w.key, s->nlanes, i, ACCEPT_MS);
			if (!req) {
				snd_fatal_transport(
				    s, "the client did not connect lane %u within %d s", i,
				    ACCEPT_MS / 1000);
				return -1;
			}
		}
		if (lane_init(s, i)) {
			if (req)
				rk_cm_request_reject(req, RK_REJECT_BUSY, "server out of resources",
						     NULL);
			return -1;
		}
		if (req ? lane_accept(s, i, req) : lane_connect(s, i, &join))
			return -1;
	}
	s->stride = cp_slot_stride(s->w.chunk);
	if (s->o->max_stage && s->w.nslots * s->stride > s->o->max_stage) {
		snd_fatal(s, RK_EXIT_REFUSED,
			  "limit: --max-ring: %u slots of %zu bytes, this server allows %llu",
			  s->w.nslots, s->stride, (unsigned long long)s->o->max_stage);
		return -1;
	}
	r = alloc_mr(s, s->w.nslots * s->stride, &e, &s->stage);
	if (!r) {
		struct rk_ring_peer peer = {.addr = s->w.ring_addr,
					    .rkey = s->w.rkey,
					    .slots = s->w.nslots,
					    .slot_size = (uint32_t)s->stride,
					    .lanes = s->nlanes};
		struct rk_ring_tx_opts to = {.shared_rq = 1, .caller_buffers = 1};
		struct rk_conn *conns[CP_MAX_LANES];

		for (unsigned i = 0; i < s->nlanes; i++)
			conns[i] = s->lanes[i].conn;
		r = rk_ring_tx_create(conns, s->nlanes, NULL, &peer, &to, &e, &s->ring);
	}
	if (r) {
		snd_fatal(s, RK_EXIT_LOST, "%s", rk_error_str(&e));
		return -1;
	}
	return 0;
}

int cp_send(const struct cp_send_opts *o, struct cp_plan *plan, struct cp_send_fate *fate,
	    char *why, size_t why_len)
{
	struct sender s = {.own = *o,
			   .plan = plan,
			   .them = o->accept ? "client" : "server",
			   .cur = -1,
			   .why = why,
			   .why_len = why_len,
			   .nlanes = o->lanes ? o->lanes : 1};
	struct rk_error e;
	int r;

	s.o = &s.own;
	why[0] = '\0';
	memset(fate, 0, sizeof(*fate));
	for (unsigned i = 0; i < CP_MAX_LANES; i++)
		s.lanes[i].evfd = s.lanes[i].conn_src = -1;
	pthread_mutex_init(&s.mu, NULL);
	{
		/* Timed waits on the monotonic clock: immune to the wall clock being set. */
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s.cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (o->device)
		s.dev = o->device;
	else if ((r = open_device(o, &s.dev, why, why_len)) != 0)
		goto out_sync;
	s.st = XXH3_createState();
	s.hashbuf = malloc(HASH_BUF);
	if (!s.st || !s.hashbuf) {
		snd_fatal(&s, RK_EXIT_LOST, "out of memory");
		goto out;
	}
	r = alloc_mr(&s, CP_MSG_MAX, &e, &s.hello);
	if (!r) {
		/* Receive buffers: one registered chunk per lane as lanes come. */
		struct rk_pool_opts po = {.access = RK_ACCESS_LOCAL,
					  .class_sizes = {CP_MSG_MAX},
					  .chunk_size = (size_t)RQ_DEPTH * CP_MSG_MAX,
					  .max_bytes = (size_t)CP_MAX_LANES * RQ_DEPTH * CP_MSG_MAX,
					  .pd = o->pd};

		r = rk_pool_create(s.dev, &po, &e, &s.pool);
	}
	if (r) {
		snd_fatal(&s, RK_EXIT_LOST, "%s", rk_error_str(&e));
		goto out;
	}
	if (connect_and_hello(&s) == 0 && snd_start_lanes(&s) == 0)
		snd_run(&s);
	snd_stop_lanes(&s);
out:
	/* Reverse order of creation: lanes, ring, staging, pool, hello, state, device. */
	for (unsigned i = CP_MAX_LANES; i-- > 0;) {
		struct send_lane *l = &s.lanes[i];

		rk_wait_destroy(l->ws); /* first: it must not hold a connection that is gone */
		if (l->conn && !s.fatal && !l->gone)
			rk_conn_disconnect(l->conn, 2000, NULL);
		rk_conn_destroy(l->conn);
		rk_recv_set_destroy(l->rs);
		if (l->evfd >= 0)
			close(l->evfd);
	}
	rk_ring_tx_destroy(s.ring);
	rk_mr_dereg(s.stage);
	rk_pool_destroy(s.pool);
	rk_mr_dereg(s.hello);
	free(s.hashbuf);
	XXH3_freeState(s.st);
	if (o->accept && !s.accept_used) /* set-up failed before the accept */
		rk_cm_request_reject(o->accept, RK_REJECT_BUSY, "server out of resources", NULL);
	if (!o->device)
		rk_device_close(s.dev);
	r = s.fatal;
	fate->transport = s.fatal == RK_EXIT_LOST && s.transport;
	fate->established = s.welcomed;
	if (s.welcomed)
		memcpy(fate->key, s.w.key, CP_KEY_LEN);
	fate->refused = s.refused;
	fate->unanswered = s.unanswered;
out_sync:
	pthread_cond_destroy(&s.cv);
	pthread_mutex_destroy(&s.mu);
	return r;
}
