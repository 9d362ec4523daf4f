/*
 * bench_rpc.c - rk bench --op rpc (bench_rpc.h): its connections, then its
 * engine.
 *
 * Connections. The run is gated as every rk bench run is: only a client
 * that sent PARAMS with its token on the control channel gets a run, and
 * the RPC port asks for the same token in the rdma_cm hello (the server's
 * opts.token), as rk bench's own QPs do: a stranger is turned away there.
 * A stranger could at most take one of a few spare connection slots and
 * reach no memory of ours (rpc.h: the server registers nothing a peer can
 * reach).
 *
 * Engine. The server loops rk_rpc_server_progress and the watchdog until
 * the client's DONE; its handler answers from one buffer. The client's lat
 * mode is one rk_rpc_call at a time (deadline: the watchdog); bw keeps
 * tx-depth calls in flight per client with rk_rpc_call_async and
 * rk_rpc_client_progress, for -n calls per client or -D seconds.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <rdmakit/rpc.h>

#include "bench_lat.h"
#include "bench_rpc.h"

#define RPC_METHOD	1
#define SPARE_CONNS	8   /* connections beyond num-qp before the server says busy */
#define CLIENT_INLINE	128 /* with --mtu (opts.conn given): what rpc_client.c uses by default */
#define WAIT_MS		10  /* event, adaptive: a progress call sleeps up to this */
#define PASS_IDLE_WAIT	1   /* several clients asleep: wait this long on one of them */
#define PEAK_WINDOW_NS	1000000ull
#define ANSWER_COPY_MAX 4096 /* answers up to a slot are copied into it anyway */
/*
 * busy: a progress call only looks (timeout 0), and a wait longer than this
 * yields the CPU between looks, as bench_lat.c's waits do and for the
 * reason given there (on a machine with as few CPUs as spinners, rxe's
 * deferred work would wait for the scheduler tick). The latency run has no
 * such hook: rk_rpc_call spins inside the library until its answer.
 */
#define YIELD_AFTER_NS 250000ull

struct rpc_client {
	struct bench_rpc *rpc;
	struct rk_pd *pd; /* the connection's, ours: freed after the buffers in it */
	struct rk_rpc_client *cl;
	struct rk_mr *req_mr, *resp_mr;
	uint64_t posted, done; /* calls this run */
};

struct bench_rpc {
	/* server */
	struct rk_rpc_server *srv;
	uint8_t *answer;     /* the answers' bytes, allocated once */
	uint32_t answer_len; /* this size's answer */
	uint64_t answered;   /* calls answered this run */
	uint64_t reply_failed;
	unsigned pace_ms; /* --pace: before each answer */
	/* client */
	struct rpc_client *clients;
	uint32_t nclients;
	uint32_t expect_len;  /* this size's answer, checked per call */
	uint64_t done_total;  /* calls completed this run, all clients */
	int status;	      /* the first call that failed (bw), 0 */
	struct rk_error why;  /* ... and why */
	uint32_t window;      /* calls in flight per client, as granted */
	uint64_t yield_ticks; /* YIELD_AFTER_NS in ticks */
};

/* A progress call's timeout: busy mode only looks (the caller yields when idle). */
static int wait_ms(const struct bench_ctx *c)
{
	return c->l->poll == RK_WAIT_BUSY ? 1 : WAIT_MS;
}

/* busy: nothing happened since tick @busy_at; past YIELD_AFTER_NS, yield. */
static void idle(const struct bench_ctx *c, uint64_t busy_at, uint64_t now)
{
	if (c->l->poll == RK_WAIT_BUSY && now > busy_at + c->rpc->yield_ticks)
		sched_yield();
}

/* The largest answer of the run (the buffers are sized for it). */
static uint32_t max_answer(const struct bench_params *p)
{
	return p->resp_size == BENCH_RESP_AS_REQ ? p->size_max : p->resp_size;
}

static uint32_t window_of(const struct bench_params *p)
{
	return p->tx_depth < RK_RPC_MAX_WINDOW ? p->tx_depth : RK_RPC_MAX_WINDOW;
}

static struct bench_rpc *rpc_new(struct bench_ctx *c, struct rk_error *err)
{
	c->rpc = calloc(1, sizeof(*c->rpc));
	if (!c->rpc)
		bench_fail(err, ENOMEM, "out of memory for the RPC run");
	return c->rpc;
}

/* ---- connections --------------------------------------------------------- */

static void answer(struct rk_rpc_req *req, void *arg)
{
	struct bench_rpc *r = arg;
	const void *data = r->answer;

	if (r->pace_ms)
		bench_pace(r->pace_ms);
	/*
	 * Answered from the progress thread: posted at once. One that does not
	 * fit a slot is built in place, as an application with large answers
	 * would (the bytes are not what is measured): sent without a copy.
	 */
	if (r->answer_len > ANSWER_COPY_MAX) {
		void *buf = rk_rpc_reply_buf(req, r->answer_len);

		if (buf)
			data = buf;
	}
	if (rk_rpc_reply(req, 0, data, r->answer_len))
		r->reply_failed++;
	else
		r->answered++;
}

int bench_rpc_listen(struct bench_ctx *c, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	struct rk_conn_opts co = {.max_mtu = c->l->mtu ? rk_mtu_from_bytes(c->l->mtu) : 0};
	uint32_t ans = max_answer(p);
	struct rk_rpc_server_opts o = {
	    .addr = c->l->addr,
	    .port = c->l->port,
	    .window = window_of(p),
	    .max_msg = p->size_max > ans ? p->size_max : ans,
	    .max_conns = p->num_qp + SPARE_CONNS,
	    /* One peer, all its clients (the token keeps strangers out). */
	    .max_conns_per_peer = p->num_qp + SPARE_CONNS,
	    /* Every call in flight may have its body read at once: never -ENOBUFS. */
	    .max_rdv_bytes = (uint64_t)window_of(p) * p->num_qp * p->size_max,
	    .mode = c->l->poll,
	    .conn = c->l->mtu ? &co : NULL,
	    .token = c->token,
	    .token_len = BENCH_TOKEN_LEN,
	};
	struct bench_rpc *r = rpc_new(c, err);
	int rc;

	if (!r)
		return -ENOMEM;
	r->window = c->rpc_window = o.window;
	r->pace_ms = c->l->pace_ms;
	r->answer = malloc(ans ? ans : 1);
	if (!r->answer)
		return bench_fail(err, ENOMEM, "out of memory for a %u-byte answer", ans);
	memset(r->answer, 0xa5, ans);
	rc = rk_rpc_server_create(c->dev, &o, err, &r->srv);
	if (rc)
		return rc;
	rc = rk_rpc_server_add(r->srv, RPC_METHOD, answer, r);
	if (rc)
		return bench_fail(err, -rc, "rk_rpc_server_add: %s", strerror(-rc));
	return 0;
}

/* Accept num-qp connections; the client sends nothing on the control channel meanwhile. */
static int accept_clients(struct bench_ctx *c, struct rk_error *err)
{
	struct bench_rpc *r = c->rpc;
	uint64_t deadline = bench_now_ns() + (uint64_t)bench_connect_ms(c) * 1000000;
	struct rk_rpc_server_stats st;
	struct bench_msg m;
	int rc;

	for (;;) {
		rk_rpc_server_get_stats(r->srv, &st);
		if (st.conns >= c->p->num_qp)
			return 0;
		if (bench_now_ns() >= deadline)
			return bench_fail(err, ETIMEDOUT,
					  "%u of %u RPC clients connected after %d ms", st.conns,
					  c->p->num_qp, bench_connect_ms(c));
		rc = rk_rpc_server_progress(r->srv, WAIT_MS, err);
		if (rc < 0 && rc != -ETIMEDOUT && rc != -EINTR)
			return rc;
		/*
		 * Count again before reading the channel: once this progress accepted
		 * the last client, its READY may already be there, and it is the
		 * next step's to read.
		 */
		rk_rpc_server_get_stats(r->srv, &st);
		if (st.conns >= c->p->num_qp)
			return 0;
		/* A client that failed to connect says so (ERROR): stop waiting. */
		rc = bench_ctl_recv(&c->ctl, &m, 0, err);
		if (rc == -EAGAIN)
			continue;
		if (rc)
			return rc;
		return bench_fail(err, EPROTO,
				  "protocol error: message %u while the RPC clients connect",
				  m.type);
	}
}

static int connect_client(struct bench_ctx *c, struct rpc_client *q, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	struct rk_conn_opts co = {.max_inline = CLIENT_INLINE,
				  .max_mtu = c->l->mtu ? rk_mtu_from_bytes(c->l->mtu) : 0};
	struct rk_rpc_client_opts o = {
	    .host = c->l->host,
	    .port = c->l->port,
	    .window = window_of(p),
	    .timeout_ms = bench_connect_ms(c),
	    .mode = c->l->poll,
	    .conn = c->l->mtu ? &co : NULL,
	    .token = c->token,
	    .token_len = BENCH_TOKEN_LEN,
	};
	uint32_t ans = max_answer(p);
	int rc;

	/*
	 * A PD for this connection alone, as the library would make, but ours:
	 * the buffers in it must go after the connection (the device may write
	 * them until then) and before the PD, and rk_rpc_client_destroy frees
	 * a PD of its own at once.
	 */
	rc = rk_pd_alloc(c->dev, err, &q->pd);
	rc = rc ?: rk_mr_alloc_pd(q->pd, p->size_max, RK_ACCESS_REMOTE_READ, err, &q->req_mr);
	rc = rc ?: rk_mr_alloc_pd(q->pd, ans ? ans : 1, RK_ACCESS_REMOTE_WRITE, err, &q->resp_mr);
	if (rc)
		return rc;
	o.pd = q->pd;
	rc = rk_rpc_client_connect(c->dev, &o, err, &q->cl);
	if (rc)
		return rc;
	memset(rk_mr_addr(q->req_mr), 0x5a, p->size_max);
	return 0;
}

int bench_rpc_connect(struct bench_ctx *c, struct rk_error *err)
{
	const struct bench_params *p = c->p;
	struct bench_rpc *r;

	if (!c->is_client)
		return accept_clients(c, err);
	r = rpc_new(c, err);
	if (!r)
		return -ENOMEM;
	r->clients = calloc(p->num_qp, sizeof(*r->clients));
	if (!r->clients)
		return bench_fail(err, ENOMEM, "out of memory for %u RPC clients", p->num_qp);
	r->window = window_of(p);
	for (; r->nclients < p->num_qp; r->nclients++) {
		struct rpc_client *q = &r->clients[r->nclients];
		int rc;

		q->rpc = r;
		rc = connect_client(c, q, err);
		if (rc)
			return rc;
		if (rk_rpc_client_window(q->cl) < r->window)
			r->window = rk_rpc_client_window(q->cl);
	}
	r->nclients = p->num_qp;
	c->rpc_window = r->window;
	return 0;
}

void bench_rpc_release(struct bench_ctx *c)
{
	struct bench_rpc *r = c->rpc;

	if (!r)
		return;
	for (uint32_t i = r->clients ? c->p->num_qp : 0; i-- > 0;) {
		struct rpc_client *q = &r->clients[i];

		/* The connection first: the device is done with the buffers after it. */
		rk_rpc_client_destroy(q->cl);
		rk_mr_dereg(q->resp_mr);
		rk_mr_dereg(q->req_mr);
		rk_pd_free(q->pd);
	}
	free(r->clients);
	rk_rpc_server_destroy(r->srv);
	free(r->answer);
	free(r);
	c->rpc = NULL;
}

/* ---- the server's run ------------------------------------------------------ */

static int run_server(struct bench_ctx *c, uint32_t size, struct bench_run *out,
		      struct rk_error *err)
{
	struct bench_rpc *r = c->rpc;
	struct bench_watch w;
	uint64_t t0, t, t_end, cpu0, busy_at;
	int rc;

	r->answer_len = bench_resp_size(c->p, size);
	r->answered = r->reply_failed = 0;
	cpu0 = bench_cpu_ns();
	t0 = busy_at = bench_ticks();
	bench_watch_start(&w, c, bench_ns_at(t0));
	/* Answering is progress; so is the client's growing heartbeat count. */
	w.passive = 1;
	while (!w.peer_done) {
		rc = rk_rpc_server_progress(r->srv, wait_ms(c), err);
		if (rc < 0 && rc != -ETIMEDOUT && rc != -EINTR)
			return rc;
		if (r->reply_failed)
			return bench_fail(err, EIO, "%llu answers could not be posted",
					  (unsigned long long)r->reply_failed);
		t = bench_ticks();
		if (rc == 0)
			busy_at = t;
		else
			idle(c, busy_at, t);
		rc = bench_watch_tick(c, &w, t, r->answered, "answering calls", err);
		if (rc)
			return rc;
	}
	/* As the latency server's: the run lasts until the DONE. */
	t_end = bench_ticks();
	out->cpu_ns = bench_cpu_ns() - cpu0;
	if (w.peer_count != r->answered)
		return bench_fail(err, EPROTO,
				  "the client completed %llu calls, this server answered %llu "
				  "(a stranger on the RPC port?)",
				  (unsigned long long)w.peer_count,
				  (unsigned long long)r->answered);
	rc = bench_send_done(c, r->answered, err);
	if (rc)
		return rc;
	out->tx_msgs = out->rx_msgs = r->answered;
	out->peer_count = w.peer_count;
	out->wall_ns = bench_ticks_ns(t0, t_end);
	return 0;
}

/* ---- the client's runs ------------------------------------------------------ */

static void call_args(const struct bench_ctx *c, const struct rpc_client *q, uint32_t size,
		      struct rk_rpc_call_args *a)
{
	memset(a, 0, sizeof(*a));
	a->method = RPC_METHOD;
	a->req = rk_mr_addr(q->req_mr);
	a->req_len = size;
	a->req_mr = q->req_mr; /* used only when the body goes by rendezvous */
	a->resp = rk_mr_addr(q->resp_mr);
	a->resp_cap = q->rpc->expect_len;
	a->resp_mr = q->resp_mr; /* zero copy: every call may land in the same buffer */
	a->timeout_ms = bench_step_ms(c);
}

/* After the last call: DONE, then the server's count, which must be ours. */
static int client_end(struct bench_ctx *c, struct bench_watch *w, uint64_t calls,
		      struct rk_error *err)
{
	int rc = bench_send_done(c, calls, err);

	if (rc)
		return rc;
	w->passive = 1;
	rc = bench_wait_peer(c, w, "waiting for the server's count", err);
	if (rc)
		return rc;
	if (w->peer_count != calls)
		return bench_fail(err, EPROTO, "the server answered %llu of %llu calls",
				  (unsigned long long)w->peer_count, (unsigned long long)calls);
	return 0;
}

/*
 * One rk_rpc_call at a time; a sample is the whole round trip (request
 * out, answer in), as --op read's is: nothing here is half of anything.
 * The samples go in blocks and the watchdog is looked at every
 * BENCH_LAT_WATCH_EVERY calls, as the SEND loop does (bench_lat.h): a
 * call's own work is a store and a count.
 */
static int run_lat(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		   struct bench_run *out, struct rk_error *err)
{
	struct bench_rpc *r = c->rpc;
	struct rpc_client *q = &r->clients[0];
	struct rk_rpc_call_args a;
	struct bench_watch w;
	uint64_t *smp = bench_lat_samples_at(out);
	uint64_t count = 0, t0, t1, t_start, end, cpu0, cpu_end;
	const int timed = !iters;
	const unsigned pace = c->l->pace_ms;
	/*
	 * What a call's own work reads, read once (the SEND loop has them as
	 * constants of its compiled copy, bench_lat.c): the clock source, the
	 * answer's length, and the run's end, never reached by a counted run.
	 */
	const int tsc = bench_clk.tsc;
	const uint32_t expect = r->expect_len;
	uint32_t len;
	int rc;

	call_args(c, q, size, &a);
	cpu0 = bench_cpu_ns();
	t_start = t1 = bench_ticks();
	end = timed ? t_start + bench_ticks_for(dur_ns) : UINT64_MAX;
	bench_watch_start(&w, c, bench_ns_at(t_start));
	if (!timed && count >= iters)
		goto out;
	for (;;) {
		/* --pace: before the block's clock, outside its sample */
		uint64_t *const blk_end =
		    bench_lat_block_paced(out, smp, iters, count, timed, pace);

		while (smp != blk_end) {
			t0 = bench_lat_ticks(tsc);
			if (t0 >= end)
				goto out;
			rc = rk_rpc_call(q->cl, &a, &len, NULL, err);
			t1 = bench_lat_ticks(tsc);
			if (rc)
				return rc;
			if (len != expect)
				return bench_fail(err, EPROTO, "a %u-byte answer, expected %u", len,
						  expect);
			/* A clock read backwards (t1 < t0) is a 0 in the fold. */
			*smp++ = t1 - t0;
			if (!(++count & (BENCH_LAT_WATCH_EVERY - 1))) {
				rc = bench_watch_tick(c, &w, t1, count, "measuring latency", err);
				if (rc)
					return rc;
			}
		}
		if (!timed && count >= iters)
			break;
		smp = bench_lat_samples_next(out, smp);
	}
out:
	if (out->hist)
		out->nsamples = (size_t)(smp - out->samples);
	cpu_end = bench_cpu_ns();
	rc = client_end(c, &w, count, err);
	if (rc)
		return rc;
	out->tx_msgs = out->rx_msgs = count;
	out->peer_count = w.peer_count;
	out->wall_ns = bench_ticks_ns(t_start, t1);
	out->cpu_ns = cpu_end - cpu0;
	return 0;
}

/* An async call ended (from rk_rpc_client_progress). */
static void call_done(void *arg, int status, uint32_t resp_len, int32_t app_code,
		      const struct rk_error *e)
{
	struct rpc_client *q = arg;
	struct bench_rpc *r = q->rpc;

	(void)app_code;
	q->done++;
	r->done_total++;
	if (r->status)
		return;
	if (status) {
		r->status = status;
		r->why = *e;
	} else if (resp_len != r->expect_len) {
		r->status = -EPROTO;
		bench_fail(&r->why, EPROTO, "a %u-byte answer, expected %u", resp_len,
			   r->expect_len);
	}
}

struct bw_state {
	uint64_t iters; /* per client; 0: until end */
	uint64_t end;	/* tick */
	int stopping;
	uint64_t posted_total;
	uint64_t win_t, win_calls, win_min; /* peak-rate window (tick, count, least) */
	uint64_t call_bytes;		    /* request + answer */
	double peak_bps;
};

/* Fill @q's window. */
static int post_client(struct bench_ctx *c, struct rpc_client *q, struct bw_state *s,
		       const struct rk_rpc_call_args *a, struct rk_error *err)
{
	while (!s->stopping && (!s->iters || q->posted < s->iters) &&
	       rk_rpc_client_inflight(q->cl) < c->rpc->window) {
		int rc = rk_rpc_call_async(q->cl, a, call_done, q, err);

		if (rc == -EAGAIN)
			return 0;
		if (rc)
			return rc;
		q->posted++;
		s->posted_total++;
	}
	return 0;
}

static void update_peak(struct bench_rpc *r, struct bw_state *s, uint64_t t)
{
	uint64_t calls = r->done_total - s->win_calls, dt;
	double bps;

	if (calls < s->win_min)
		return;
	dt = bench_ticks_ns(s->win_t, t);
	if (dt < PEAK_WINDOW_NS)
		return;
	bps = (double)calls * (double)s->call_bytes * 8.0 * 1e9 / (double)dt;
	if (bps > s->peak_bps)
		s->peak_bps = bps;
	s->win_t = t;
	s->win_calls = r->done_total;
}

static int all_done(const struct bench_rpc *r, const struct bw_state *s)
{
	for (uint32_t i = 0; i < r->nclients; i++) {
		const struct rpc_client *q = &r->clients[i];

		if (s->iters ? q->done < s->iters
			     : !s->stopping || rk_rpc_client_inflight(q->cl) != 0)
			return 0;
	}
	return 1;
}

/* Completions of every client; returns calls completed or an error. */
static int progress_all(struct bench_ctx *c, unsigned *rr, struct rk_error *err)
{
	struct bench_rpc *r = c->rpc;
	/* One client: wait on it. Several: look at each, then sleep on one if all idle. */
	int wait = r->nclients == 1 ? wait_ms(c) : 0, got = 0;

	for (uint32_t i = 0; i < r->nclients; i++) {
		int n = rk_rpc_client_progress(r->clients[i].cl, wait, err);

		if (n < 0)
			return n;
		got += n;
	}
	if (!got && r->nclients > 1 && c->l->poll != RK_WAIT_BUSY) {
		int n =
		    rk_rpc_client_progress(r->clients[*rr % r->nclients].cl, PASS_IDLE_WAIT, err);

		++*rr;
		if (n < 0)
			return n;
		got += n;
	}
	return got;
}

static int run_bw(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		  struct bench_run *out, struct rk_error *err)
{
	struct bench_rpc *r = c->rpc;
	const struct bench_params *p = c->p;
	struct bw_state s = {.iters = iters};
	struct rk_rpc_call_args a;
	struct bench_watch w;
	uint64_t t0, t = 0, cpu0, cpu_end, busy_at;
	unsigned rr = 0;
	int rc;

	call_args(c, &r->clients[0], size, &a);
	s.call_bytes = bench_msg_bytes(p, size);
	for (uint32_t i = 0; i < r->nclients; i++)
		r->clients[i].posted = r->clients[i].done = 0;
	cpu0 = bench_cpu_ns();
	t0 = bench_ticks();
	s.end = t0 + bench_ticks_for(dur_ns);
	s.win_t = t0;
	s.win_min = iters ? iters * r->nclients / 64 : 0;
	if (s.win_min < (uint64_t)r->window * r->nclients)
		s.win_min = (uint64_t)r->window * r->nclients;
	busy_at = t0;
	bench_watch_start(&w, c, bench_ns_at(t0));
	for (;;) {
		for (uint32_t i = 0; i < r->nclients; i++) {
			struct rpc_client *q = &r->clients[i];

			a.req_mr = q->req_mr;
			a.req = rk_mr_addr(q->req_mr);
			a.resp_mr = q->resp_mr;
			a.resp = rk_mr_addr(q->resp_mr);
			rc = post_client(c, q, &s, &a, err);
			if (rc)
				return rc;
		}
		rc = progress_all(c, &rr, err);
		if (rc < 0)
			return rc;
		if (r->status) {
			*err = r->why;
			return r->status;
		}
		t = bench_ticks();
		if (rc > 0) {
			busy_at = t;
			update_peak(r, &s, t);
		} else {
			idle(c, busy_at, t);
		}
		if (!iters && !s.stopping && t >= s.end)
			s.stopping = 1;
		if (all_done(r, &s))
			break;
		rc = bench_watch_tick(c, &w, t, s.posted_total + r->done_total,
				      "waiting for answers", err);
		if (rc)
			return rc;
	}
	cpu_end = bench_cpu_ns();
	rc = client_end(c, &w, r->done_total, err);
	if (rc)
		return rc;
	out->tx_msgs = out->rx_msgs = r->done_total;
	out->peer_count = w.peer_count;
	out->wall_ns = bench_ticks_ns(t0, t);
	out->cpu_ns = cpu_end - cpu0;
	out->peak_bps = s.peak_bps;
	if (out->tx_msgs && out->wall_ns) {
		double avg =
		    (double)out->tx_msgs * (double)s.call_bytes * 8.0 * 1e9 / (double)out->wall_ns;

		if (out->peak_bps < avg)
			out->peak_bps = avg;
	}
	return 0;
}

int bench_rpc_run(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		  struct bench_run *out, struct rk_error *err)
{
	int rc;

	c->rpc->yield_ticks = bench_ticks_for(YIELD_AFTER_NS);
	if (!c->is_client)
		rc = run_server(c, size, out, err);
	else {
		c->rpc->expect_len = bench_resp_size(c->p, size);
		c->rpc->done_total = 0;
		c->rpc->status = 0;
		rc = c->p->mode == BENCH_MODE_LAT ? run_lat(c, size, iters, dur_ns, out, err)
						  : run_bw(c, size, iters, dur_ns, out, err);
	}
	if (!rc && !out->wall_ns)
		out->wall_ns = 1;
	return rc;
}
