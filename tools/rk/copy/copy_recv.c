/*
 * copy_recv.c - one rk serve session: accept, agree on the ring, then turn
 * each slot the client fills into file operations and give the slot back.
 *
 * The loop is simple on purpose: a slot arrives (WRITE WITH IMMEDIATE
 * completion into the library's credit ring), the ring copies it out into
 * memory the client cannot reach and gives the slot back, records are
 * parsed from that copy, data is verified (XXH3-128 per chunk) and
 * pwrite()n at its offset, and one RESULTS answers the slot's records.
 * While we write one slot the client is already filling others, so
 * reading at the source, the wire and writing here overlap.
 *
 * What the records do to files (temporaries, verification, commit, the
 * per-session limits) is copy_files.c, which knows nothing of verbs; this
 * file is the transport: connections, the ring, slots in sequence, RESULTS,
 * and the idle timer, which is a minimum rate: a session must move
 * CP_IDLE_MIN_BYTES of file data (an entry made counts CP_ENTRY_BYTES)
 * within every --idle period. A client that keeps posting empty slots, one
 * byte or one directory at a time, is still dropped after --idle.
 *
 * With lanes (rk copy --num-qp), more connections join the session: the
 * listener hands their requests over through the registry
 * (copy_recv_registry.c), and this thread accepts them and serves all
 * lanes from one loop. This file is a session's life: accept (or, for a
 * pull, connect), that loop, the end. The protocol on the wire, slots and
 * RESULTS are copy_recv_ring.c (copy_recv_int.h has the map).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <rdmakit/conn.h>
#include <rdmakit/cq.h>
#include <rdmakit/mr.h>
#include <rdmakit/msgbuf.h>
#include <rdmakit/pd.h>
#include <rdmakit/pool.h>
#include <rdmakit/wait.h>

#include "cli.h"
#include "copy_recv_int.h"

#define HELLO_MS      10000
#define ACCEPT_MS     5000
#define BYE_LINGER_NS 2000000000ull

void rcv_log(const struct session *s, const char *fmt, ...)
{
	char line[1536];
	va_list ap;

	if (s->srv->quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (s->srv->progress)
		cp_progress_clear(s->srv->progress);
	printf("%s: %s: %s\n", s->srv->who ? s->srv->who : "rk serve", s->peer, line);
	fflush(stdout);
}

void rcv_pin(struct session *s, int64_t n)
{
	s->pinned += n;
	SM_ADD(s->srv->metrics, registered_bytes, n);
}

static struct rk_conn_opts conn_opts(struct session *s)
{
	return (struct rk_conn_opts){
	    .sq_depth = SQ_DEPTH,
	    .rq_depth = RQ_DEPTH,
	    .wait_mode = RK_WAIT_EVENT,
	    .prepare = rcv_prepare,
	    .prepare_arg = s,
	    .pd = s->pd,
	};
}

/* Lane @l's CQ and CM channel join the session's wait set (tags: the lane). */
static int watch_lane(struct session *s, unsigned l, struct rk_error *err)
{
	int r = rk_wait_add_cq(s->ws, rk_conn_cq(s->lanes[l].conn), 16, l, err);

	if (r >= 0)
		r = rk_wait_add_conn(s->ws, s->lanes[l].conn, l, err);
	return r < 0 ? r : 0;
}

/* Accept the lanes the listener handed over (see cp_session_join). */
static int take_joins(struct session *s, struct rk_error *err)
{
	struct rk_cm_request *reqs[CP_MAX_LANES];
	int n = cp_reg_take(s->srv, &s->reg, reqs);

	if (n < 0)
		return n;
	for (unsigned l = 1; l < CP_MAX_LANES; l++) {
		struct rk_conn_opts o = conn_opts(s);
		struct rk_conn *conn = NULL;
		int r;

		if (!reqs[l])
			continue;
		s->prep_lane = l; /* rcv_prepare makes its buffers */
		r = rk_cm_request_accept(reqs[l], &o, NULL, 0, ACCEPT_MS, err, &conn);
		reqs[l] = NULL;
		if (r) {
			s->lanes[l].conn = NULL;
			for (unsigned k = l + 1; k < CP_MAX_LANES; k++)
				if (reqs[k])
					rk_cm_request_reject(reqs[k], RK_REJECT_BUSY,
							     "session failed", NULL);
			return r;
		}
		s->lanes[l].conn = conn;
		r = rcv_lane_joined(s, l, err);
		if (!r)
			r = watch_lane(s, l, err);
		if (r) {
			for (unsigned k = l + 1; k < CP_MAX_LANES; k++)
				if (reqs[k])
					rk_cm_request_reject(reqs[k], RK_REJECT_BUSY,
							     "session failed", NULL);
			return r;
		}
	}
	return 0;
}

/*
 * Pulling with lanes: after our WELCOME, connect lanes 1.. of the HELLO
 * with the session key, as a pushing client's lanes join rk serve.
 */
static int connect_lanes(struct session *s, struct rk_error *err)
{
	for (unsigned l = 1; l < s->reg.want_lanes; l++) {
		struct rk_hello join = {
		    .app_id = CP_APP_ID, .app_arg = cp_lane_arg(l), .token_len = CP_KEY_LEN};
		struct rk_cm_connect_opts c = *s->pull_co;
		struct rk_conn *conn = NULL;
		int r;

		memcpy(join.token, s->reg.key, CP_KEY_LEN);
		c.hello = &join;
		s->prep_lane = l;
		/*
		 * The server enters our key once it has taken our WELCOME: a
		 * lane that gets there first is refused as unknown
		 * (RK_REJECT_NO_SESSION). Try again for as long as the server
		 * waits for a lane; any other refusal is final.
		 */
		for (uint64_t t0 = cli_now_ns();;) {
			r = rk_cm_connect(s->srv->dev, &c, err, &conn);
			if (!r)
				break;
			s->lanes[l].conn = NULL; /* prepare saw it; the library destroyed it */
			if (err->reject_reason != RK_REJECT_NO_SESSION ||
			    cli_now_ns() - t0 > (uint64_t)ACCEPT_MS * 1000000)
				return r;
			usleep(20000);
		}
		s->lanes[l].conn = conn;
		r = rcv_lane_joined(s, l, err);
		if (!r)
			r = watch_lane(s, l, err);
		if (r)
			return r;
	}
	s->lanes_made = 1;
	return 0;
}

/*
 * The event loop: one wait over every lane's completions and CM channel
 * and the registry's eventfd (lanes handed over, or this session
 * replaced), each wait bounded; a client that dies is seen as
 * DISCONNECTED. The session is given up after an idle_ms period that
 * moved less than CP_IDLE_MIN_BYTES (see handle_slot).
 */
static int serve(struct session *s, struct rk_error *err)
{
	uint64_t last = cli_now_ns();

	s->progress_ns = last;
	for (;;) {
		struct rk_wait_event ev[1 + 2 * CP_MAX_LANES];
		int n, gone = 0, joins = 0;

		if (s->pull_co && s->hello_done && !s->lanes_made) {
			n = connect_lanes(s, err);
			if (n)
				return n;
		}
		/* After BYE, let the client hang up first (it has our last RESULTS). */
		if (s->fs.bye && !rcv_sends_pending(s) && cli_now_ns() - last > BYE_LINGER_NS)
			return 0;
		if (atomic_load(s->srv->stop))
			return -ESHUTDOWN;
		if (atomic_load(&s->reg.replaced))
			return -ECANCELED;
		if (!s->hello_done && cli_now_ns() - last > (uint64_t)HELLO_MS * 1000000)
			return -ETIMEDOUT;
		if (cli_now_ns() - s->progress_ns > (uint64_t)s->srv->idle_ms * 1000000)
			return -ETIMEDOUT;
		n = rk_wait(s->ws, ev, (int)(sizeof(ev) / sizeof(ev[0])), 500, err);
		if (n == -ETIMEDOUT)
			continue;
		if (n < 0)
			return n;
		/* Completions first: what arrived before a disconnect counts. */
		for (int k = 0; k < n; k++) {
			if (ev[k].src != RK_SRC_CQ)
				continue;
			last = cli_now_ns();
			for (int j = 0; j < ev[k].nwc; j++) {
				int r = rcv_handle_wc(s, (unsigned)ev[k].tag, &ev[k].wc[j], err);

				/* A repost, RESULTS or credit refused: the lane went down under us.
				 */
				if (r == -ENOTCONN) {
					gone = 1;
					continue;
				}
				if (r)
					return r < 0 ? r : -EPROTO;
			}
		}
		for (int k = 0; k < n; k++) {
			joins |= ev[k].src == RK_SRC_EVENTFD;
			gone |= ev[k].src == RK_SRC_CONN && ev[k].state != RK_CONN_CONNECTED;
		}
		if (joins) {
			n = take_joins(s, err);
			if (n)
				return n;
		}
		if (gone) {
			/*
			 * Any lane going down ends the session. The CM event can
			 * be seen before the CQ holds the peer's last message (its
			 * BYE, or a server's ERROR): take what completed first,
			 * on every lane.
			 */
			n = rcv_drain_lost(s, err);
			if (n)
				return n;
			return s->fs.bye && !rcv_sends_pending(s) ? 0 : -ECONNRESET;
		}
	}
}

static void session_free(struct session *s)
{
	/* Files first: a replacing session waits until their locks are free. */
	cp_files_close(&s->fs);
	cp_reg_remove(s->srv, &s->reg);
	/* The set first: it must not hold lanes that are gone. */
	rk_wait_destroy(s->ws);
	for (unsigned l = CP_MAX_LANES; l-- > 0;) {
		rk_conn_destroy(s->lanes[l].conn);
		rk_send_set_destroy(s->lanes[l].ss);
		rk_recv_set_destroy(s->lanes[l].rs);
	}
	rk_ring_rx_destroy(s->ring);
	rk_pool_destroy(s->pool);
	rcv_pin(s, -s->pinned);
	rk_pd_free(s->pd);
	if (s->reg.evfd >= 0)
		close(s->reg.evfd);
	rk_free_aligned(s->msg);
	free(s);
}

/* The metrics' reason for a session that ended with @r (not 0). */
static enum sm_failure session_failure(int r)
{
	switch (r) {
	case -ECONNRESET:
		return SM_FAIL_DISCONNECTED;
	case -ETIMEDOUT:
		return SM_FAIL_IDLE;
	case -ESHUTDOWN:
		return SM_FAIL_SHUTDOWN;
	case -ECANCELED:
		return SM_FAIL_REPLACED;
	case -EPROTO:
		return SM_FAIL_PROTOCOL;
	default:
		return SM_FAIL_ERROR;
	}
}

static void *session_main(void *arg)
{
	struct session *s = arg;
	struct cp_server *srv;
	struct rk_conn_opts o = conn_opts(s);
	struct rk_conn *conn = NULL;
	struct rk_error err;
	int r;

	cli_name_thread("rk-session");
	rk_error_clear(&err);
	r = rk_cm_request_accept(s->req, &o, NULL, 0, ACCEPT_MS, &err, &conn);
	s->req = NULL;
	s->lanes[0].conn = conn;
	if (!r)
		r = watch_lane(s, 0, &err);
	if (r) {
		fprintf(stderr, "rk serve: %s: accept failed: %s\n", s->peer, rk_error_str(&err));
		SM_ADD(s->srv->metrics, failed[SM_FAIL_ERROR], 1);
	} else {
		rcv_log(s, "connected");
		r = serve(s, &err);
		if (r == 0)
			rcv_log(s, "done");
		else if (r == -ECONNRESET)
			rcv_log(s, "client disconnected");
		else if (r == -ETIMEDOUT)
			rcv_log(s, "less than 1 MiB written in %d s (--idle); connection closed",
				s->srv->idle_ms / 1000);
		else if (r == -ESHUTDOWN)
			rcv_log(s, "server shutting down");
		else if (r == -ECANCELED)
			rcv_log(s, "replaced by a new connection of the same client; closed");
		else if (r == -EPROTO)
			rcv_log(s, "protocol error; connection closed");
		else
			rcv_log(s, "connection lost: %s", rk_error_str(&err));
		if (r)
			SM_ADD(s->srv->metrics, failed[session_failure(r)], 1);
	}
	srv = s->srv;
	session_free(s);
	/* Last: the main thread closes the device once no session is active. */
	atomic_fetch_sub(&srv->active, 1);
	return NULL;
}

/* A session's state before any connection: its PD, buffers, file sink. NULL when out of resources.
 */
static struct session *session_new(struct cp_server *srv, const char *peer)
{
	struct session *s = calloc(1, sizeof(*s));
	struct rk_wait_opts wo = {.mode = RK_WAIT_EVENT}; /* conn_opts: CQs with channels */
	struct rk_error err;
	int r;

	if (!s)
		return NULL;
	s->srv = srv;
	s->reg.evfd = -1;
	s->allow_flags = CP_F_ALL;
	s->allow_lanes = CP_MAX_LANES;
	snprintf(s->peer, sizeof(s->peer), "%s", peer);
	s->reg.peer = s->peer;
	if (cp_files_init(&s->fs, srv, s->peer))
		goto fail;
	s->reg.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->reg.evfd < 0)
		goto fail;
	r = rk_wait_create(&wo, &err, &s->ws);
	if (!r) {
		r = rk_wait_add_eventfd(s->ws, s->reg.evfd, CP_MAX_LANES, &err);
		r = r < 0 ? r : 0;
	}
	if (!r)
		r = rk_pd_alloc(srv->dev, &err, &s->pd);
	if (!r) {
		/*
		 * One chunk per lane's buffers, registered as lanes come (the
		 * first now), never more than CP_MAX_LANES of them.
		 */
		struct rk_pool_opts po = {.access = RK_ACCESS_LOCAL,
					  .class_sizes = {CP_MSG_MAX},
					  .chunk_size = (size_t)(RQ_DEPTH + NSEND) * CP_MSG_MAX,
					  .max_bytes = (size_t)CP_MAX_LANES * (RQ_DEPTH + NSEND) *
						       CP_MSG_MAX,
					  .prealloc = 1,
					  .pd = s->pd};

		r = rk_pool_create(srv->dev, &po, &err, &s->pool);
		if (!r)
			rcv_pin(s, (int64_t)po.chunk_size); /* lane 0's, made now */
	}
	if (r) {
		fprintf(stderr, "%s: %s: %s\n", srv->who ? srv->who : "rk serve", s->peer,
			rk_error_str(&err));
		goto fail;
	}
	return s;
fail:
	session_free(s);
	return NULL;
}

int cp_session_start(struct cp_server *srv, struct rk_cm_request *req)
{
	struct session *s = session_new(srv, rk_cm_request_peer(req));
	pthread_attr_t attr;
	pthread_t th;
	int r = -ENOMEM;

	if (!s)
		goto reject;
	s->req = req;
	r = pthread_attr_init(&attr);
	if (r) {
		r = -r;
		goto reject;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	atomic_fetch_add(&srv->active, 1);
	r = pthread_create(&th, &attr, session_main, s);
	pthread_attr_destroy(&attr);
	if (r) {
		atomic_fetch_sub(&srv->active, 1);
		r = -r;
		goto reject;
	}
	return 0;
reject:
	rk_cm_request_reject(req, RK_REJECT_BUSY, "server could not start a session", NULL);
	if (s) {
		s->req = NULL;
		session_free(s);
	}
	return r;
}

int cp_recv_pull(struct cp_server *srv, const struct rk_cm_connect_opts *co, const void *pull,
		 size_t len, unsigned flags, unsigned lanes, struct cp_recv_stats *st,
		 struct rk_error *err)
{
	struct rk_cm_connect_opts c = *co;
	struct rk_conn *conn = NULL;
	struct session *s;
	char peer[80];
	int r;

	memset(st, 0, sizeof(*st));
	snprintf(peer, sizeof(peer), "%s:%s", co->host, co->port);
	s = session_new(srv, peer);
	if (!s)
		return rk_error_setf(err, "rk copy", ENOMEM, "out of memory or registered memory");
	c.conn = conn_opts(s);
	s->prep_lane = 0;
	s->allow_flags = (uint16_t)(flags & (CP_F_FORCE | CP_F_RESUME));
	s->allow_lanes = lanes;
	s->pull_co = &c;
	r = rk_cm_connect(srv->dev, &c, err, &conn);
	if (r) {
		s->lanes[0].conn = NULL; /* prepare saw it; the library destroyed it */
		session_free(s);
		return r;
	}
	s->lanes[0].conn = conn;
	r = watch_lane(s, 0, err);
	if (!r)
		r = rcv_send_msg(s, 0, pull, len, err);
	if (!r)
		r = serve(s, err);
	if (r == -ECONNREFUSED && s->refused[0]) {
		st->refused = 1;
		rk_error_setf(err, "rk copy", ECONNREFUSED, "refused by the server: %s",
			      s->refused);
	} else if (r == -ETIMEDOUT)
		rk_error_setf(err, "rk copy", ETIMEDOUT, "the server sent nothing for %d s",
			      srv->idle_ms / 1000);
	else if (r == -ECONNRESET)
		rk_error_setf(err, "rk copy", ECONNRESET,
			      "connection lost: the server closed it before its last file");
	else if (r == -EPROTO)
		rk_error_setf(err, "rk copy", EPROTO, "protocol error from the server");
	st->files = s->fs.n_ok;
	st->up_to_date = s->fs.n_uptodate;
	st->failed = s->fs.n_failed;
	st->dirs = s->fs.n_dirs;
	st->bytes = s->fs.bytes_ok;
	st->moved = s->fs.moved;
	st->established = s->hello_done;
	session_free(s);
	return r;
}

unsigned cp_session_fds(unsigned max_open)
{
	/* Receiving: the registry's eventfd, the wait set (epoll, wake), two per lane, files. */
	unsigned push = 3 + 2 * CP_MAX_LANES + 4 + 2 * max_open;
	/*
	 * Serving a pull: the eventfd; per lane the two channels, its eventfd
	 * and its wait set (two); the file being read and its walk (a few).
	 */
	unsigned pull = 1 + 5 * CP_MAX_LANES + 4 + 4;

	return push > pull ? push : pull;
}

uint64_t cp_session_pinned(uint32_t max_ring)
{
	/* Per lane its receive and send buffers, rounded up to pages as pinned. */
	uint64_t lane = ((uint64_t)RQ_DEPTH * CP_MSG_MAX + 4095) / 4096 * 4096 +
			((uint64_t)NSEND * CP_MSG_MAX + 4095) / 4096 * 4096;

	return max_ring + CP_MAX_LANES * lane;
}
