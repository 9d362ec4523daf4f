/*
 * rpc_pool.c - RPC clients by peer, leased to threads (rpc_pool.h).
 *
 * Every decision (which client, whether to connect, wait or give up, what
 * expires, the backoff) is rpc_pool_book.c's, under one mutex; this file
 * connects, destroys, waits and wakes. Why it is built so:
 *
 *  - Connecting (rdma_cm resolution, a QP, a PD, registrations) takes
 *    milliseconds on hardware and far longer under emulation, so it runs
 *    outside the lock. The book has marked the entry CONNECTING first, so
 *    max_per_peer holds meanwhile while other peers, and other threads of
 *    the same peer, go on.
 *  - Destroying a client disconnects and may wait for the peer: also done
 *    outside the lock, once the book has let go of the client.
 *  - One condition variable for all: a put (or a failed connect, which
 *    frees a place and may start a backoff) wakes every waiter and each
 *    asks the book again. Only threads beyond max_per_peer, or inside a
 *    backoff, wait; a put nobody waits for signals nothing.
 *  - Waits are pthread_cond_timedwait on CLOCK_MONOTONIC, the clock of
 *    rk__now_ms(), so a deadline is one number from the caller's timeout to
 *    the book and to the wait, and setting the wall clock changes nothing.
 *    Only a caller's -1 waits without a limit.
 *  - A returned client is found by its pointer among the leased entries
 *    (the book's entry is the small struct that holds it) before it is
 *    asked whether it is alive and idle: two reads of a client that still
 *    belongs to the returning thread, so they may run under the lock.
 *  - Idle clients expire at the next rk_rpc_pool_get (or rk_rpc_pool_call)
 *    or rk_rpc_pool_reap, not at a put, so a put stays cheap unless its own
 *    client is dead; there is no thread of the pool's own.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rk_internal.h"
#include "rpc_pool_book.h"

#define DEF_TIMEOUT_MS 5000 /* a call's (and here a lease's) timeout of 0, as in rpc.h */

struct rk_rpc_pool {
	struct rk_device *dev;
	struct rk_rpc_client_opts copts; /* host and port are set per connect */
	struct rk_conn_opts conn;	 /* a copy of *opts.client.conn, if any */
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a client came back or a place was freed */
	unsigned waiters;
	struct rk__pbook book;
};

/*
 * An error of the pool itself. The errno's usual hint speaks of addresses
 * and links, which misleads when the pool is merely full: @hint replaces it.
 */
static int pool_err(struct rk_error *err, int code, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int pool_err(struct rk_error *err, int code, const char *hint, const char *fmt, ...)
{
	char detail[RK_ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	rk__err_set(err, code, "rk_rpc_pool_get", "%s", detail);
	if (err) {
		err->hint = hint;
		rk__err_msgf(err, "rk_rpc_pool_get: %s: %s (hint: %s)", detail, err->err_str, hint);
	}
	return -code;
}

/* Destroy the clients of a chain the book handed back; how many there were. */
static unsigned close_chain(struct rk__pbook_entry *e)
{
	unsigned n = 0;

	while (e) {
		struct rk__pbook_entry *next = e->next;

		if (e->client) {
			rk_rpc_client_destroy(e->client);
			n++;
		}
		rk__pbook_entry_free(e);
		e = next;
	}
	return n;
}

int rk_rpc_pool_create(struct rk_device *dev, const struct rk_rpc_pool_opts *opts,
		       struct rk_error *err, struct rk_rpc_pool **out)
{
	struct rk_rpc_pool_opts def = {0};
	struct rk_rpc_pool *pool;
	pthread_condattr_t ca;
	int r;

	if (!out)
		return rk__err_set(err, EINVAL, "rk_rpc_pool_create", "no place for the pool");
	*out = NULL;
	if (!opts)
		opts = &def;
	/* Clients are leased to different threads: they must not share a CQ (conn.h). */
	if (opts->client.conn && opts->client.conn->cq)
		return rk__err_set(err, EINVAL, "rk_rpc_pool_create",
				   "client.conn->cq: the pool's clients run on different threads "
				   "and cannot share a CQ");
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return rk__err_set(err, ENOMEM, "rk_rpc_pool_create", NULL);
	r = rk__pbook_init(&pool->book, opts->max_per_peer, opts->idle_ms, opts->backoff_min_ms,
			   opts->backoff_max_ms, opts->max_peers);
	if (r) {
		free(pool);
		return rk__err_set(err, r, "rk_rpc_pool_create",
				   "idle_ms %d, backoff %d..%d ms: times must not be negative, "
				   "nor the backoff's minimum above its maximum",
				   opts->idle_ms, opts->backoff_min_ms, opts->backoff_max_ms);
	}
	pool->dev = dev;
	pool->copts = opts->client;
	pool->copts.host = NULL;
	pool->copts.port = NULL;
	/* The caller's struct need not outlive this call. */
	if (opts->client.conn) {
		pool->conn = *opts->client.conn;
		pool->copts.conn = &pool->conn;
	}
	r = pthread_mutex_init(&pool->mu, NULL);
	if (r) {
		free(pool);
		return rk__err_ret(err, r, "pthread_mutex_init", NULL);
	}
	r = pthread_condattr_init(&ca);
	if (!r) {
		r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		if (!r)
			r = pthread_cond_init(&pool->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (r) {
		pthread_mutex_destroy(&pool->mu);
		free(pool);
		return rk__err_ret(err, r, "pthread_cond_init", "on CLOCK_MONOTONIC");
	}
	*out = pool;
	return 0;
}

void rk_rpc_pool_destroy(struct rk_rpc_pool *pool)
{
	if (!pool)
		return;
	close_chain(rk__pbook_fini(&pool->book));
	pthread_cond_destroy(&pool->cv);
	pthread_mutex_destroy(&pool->mu);
	free(pool);
}

/* Wait (the lock held) for a wake-up or until @until on rk__now_ms()'s clock, -1 = none. */
static void wait_until(struct rk_rpc_pool *pool, int64_t until)
{
	struct timespec ts;

	pool->waiters++;
	if (until < 0) {
		pthread_cond_wait(&pool->cv, &pool->mu);
	} else {
		ts.tv_sec = (time_t)(until / 1000);
		ts.tv_nsec = (long)(until % 1000) * 1000000;
		pthread_cond_timedwait(&pool->cv, &pool->mu, &ts);
	}
	pool->waiters--;
}

/* Connect the CONNECTING entry @e to @a outside the lock, then tell the book. */
static int connect_entry(struct rk_rpc_pool *pool, struct rk__pbook_entry *e,
			 const struct rk__pbook_addr *a, int64_t deadline, struct rk_error *err,
			 struct rk_rpc_client **out)
{
	struct rk_rpc_client_opts co = pool->copts;
	struct rk_rpc_client *cl = NULL;
	struct rk_error cerr;
	int r, left, step;

	co.host = a->host;
	co.port = a->port;
	/*
	 * The connect timeout is per step (address, route, connect): a third of
	 * what is left each, so the three together stay near the deadline.
	 */
	if (deadline >= 0) {
		left = rk__ms_left(deadline) / 3;
		step = co.timeout_ms > 0 ? co.timeout_ms : DEF_TIMEOUT_MS;
		if (left < step)
			co.timeout_ms = left > 0 ? left : 1;
	}
	rk_error_clear(&cerr);
	r = rk_rpc_client_connect(pool->dev, &co, &cerr, &cl);
	if (!r && !cl)
		r = rk__err_set(&cerr, EIO, "rk_rpc_client_connect", "%s: no client", a->key);
	if (r && !cerr.err)
		rk__err_set(&cerr, r, "rk_rpc_client_connect", "%s", a->key);

	pthread_mutex_lock(&pool->mu);
	if (r)
		rk__pbook_connect_failed(&pool->book, e, rk__fail(r), &cerr, rk__now_ms());
	else
		rk__pbook_connected(&pool->book, e, cl, rk__now_ms());
	/* A failure freed a place and may have started a backoff: let waiters see. */
	if (r && pool->waiters)
		pthread_cond_broadcast(&pool->cv);
	pthread_mutex_unlock(&pool->mu);

	if (r) {
		if (err)
			*err = cerr;
		return rk__fail(r);
	}
	*out = cl;
	return 0;
}

static void give_back(struct rk_rpc_pool *pool, struct rk_rpc_client *cl, int discard);

static int lease(struct rk_rpc_pool *pool, const char *peer, int timeout_ms, struct rk_error *err,
		 struct rk_rpc_client **out)
{
	struct rk__pbook_entry *expired, *e = NULL;
	struct rk__pbook_addr a;
	struct rk__pbook_lease l;
	int64_t deadline, now;
	int v, r = 0, waited = 0;

	if (!out)
		return rk__err_set(err, EINVAL, "rk_rpc_pool_get", "no place for the client");
	*out = NULL;
	if (!pool)
		return rk__err_set(err, EINVAL, "rk_rpc_pool_get", "no pool");
	if (rk__pbook_parse(peer, &a))
		return rk__err_set(err, EINVAL, "rk_rpc_pool_get",
				   "peer \"%.80s\": not host:port or [v6]:port",
				   peer ? peer : "(null)");
	deadline = rk__deadline(timeout_ms ? timeout_ms : DEF_TIMEOUT_MS);

	pthread_mutex_lock(&pool->mu);
	now = rk__now_ms();
	expired = rk__pbook_expire(&pool->book, now);
	for (;;) {
		v = rk__pbook_lease(&pool->book, &a, now, deadline, &l);
		if (v != RK_PBOOK_WAIT && v != RK_PBOOK_BACKOFF)
			break;
		if (!waited++)
			pool->book.st.waits++;
		wait_until(pool, l.until);
		now = rk__now_ms();
	}
	switch (v) {
	case RK_PBOOK_TAKE:
		*out = l.e->client;
		break;
	case RK_PBOOK_CONNECT:
		e = l.e;
		break;
	case RK_PBOOK_REFUSED:
		/* The last connect error as it was (errno, hint), said to be an old one. */
		r = l.err;
		if (err) {
			char last[sizeof(err->msg)];

			snprintf(last, sizeof(last), "%s", l.why->msg);
			*err = *l.why;
			snprintf(err->op, sizeof(err->op), "rk_rpc_pool_get");
			rk__err_msgf(err,
				     "rk_rpc_pool_get: %s: no new connection for %lld ms, past "
				     "the deadline; the last attempt failed: %s",
				     a.key, (long long)(l.peer->retry_at - now), last);
		}
		break;
	case RK_PBOOK_TIMEDOUT:
		r = pool_err(err, ETIMEDOUT,
			     "every client of the peer stayed leased: raise max_per_peer, or "
			     "look for a thread that holds a client too long",
			     "%s: no client free within %d ms (max_per_peer %u)", a.key,
			     timeout_ms ? timeout_ms : DEF_TIMEOUT_MS, pool->book.max_per_peer);
		break;
	case -EMFILE:
		r = pool_err(err, EMFILE,
			     "raise max_peers; a peer counts while it has a client or a backoff",
			     "%s: %u peers already (max_peers)", a.key, pool->book.max_peers);
		break;
	default:
		r = rk__err_set(err, v < 0 ? v : EIO, "rk_rpc_pool_get", "%s", a.key);
		break;
	}
	pthread_mutex_unlock(&pool->mu);
	close_chain(expired);

	if (e)
		return connect_entry(pool, e, &a, deadline, err, out);
	return r;
}

int rk_rpc_pool_get(struct rk_rpc_pool *pool, const char *peer, int timeout_ms,
		    struct rk_error *err, struct rk_rpc_client **out)
{
	int64_t deadline = rk__deadline(timeout_ms ? timeout_ms : DEF_TIMEOUT_MS);
	int r;

	for (;;) {
		int left = rk__ms_left(deadline); /* -1: no limit; 0 would mean the default */

		r = lease(pool, peer, left == 0 ? 1 : left, err, out);
		if (r || !*out)
			return r;
		/*
		 * An idle client's peer may have closed the connection meanwhile:
		 * one look at its CM channel (an epoll_wait that does not wait)
		 * finds out, and a dead client is replaced, never handed out.
		 */
		rk_rpc_client_progress(*out, 0, NULL);
		if (rk_rpc_client_alive(*out, NULL))
			return 0;
		give_back(pool, *out, 1);
		*out = NULL;
		if (timeout_ms >= 0 && rk__ms_left(deadline) == 0)
			return rk__err_set(err, ETIMEDOUT, "rk_rpc_pool_get",
					   "%s: only dead clients within the deadline", peer);
	}
}

/*
 * Hand @cl back to the book: kept unless @discard, it died or calls are in
 * flight on it; else destroyed. It is looked up before it is asked anything,
 * so a client put twice (perhaps destroyed already) is never touched.
 */
static void give_back(struct rk_rpc_pool *pool, struct rk_rpc_client *cl, int discard)
{
	struct rk__pbook_entry *e, *dead = NULL;
	int reusable;

	pthread_mutex_lock(&pool->mu);
	e = rk__pbook_find(&pool->book, cl);
	if (e) {
		reusable =
		    !discard && rk_rpc_client_alive(cl, NULL) && rk_rpc_client_inflight(cl) == 0;
		dead = rk__pbook_put(&pool->book, e, reusable, rk__now_ms());
		if (pool->waiters)
			pthread_cond_broadcast(&pool->cv);
	}
	pthread_mutex_unlock(&pool->mu);
	if (!e) {
		/* Not ours to destroy: someone else's client, or put twice. */
		rk_warn("rk_rpc_pool_put: client %p is not leased from this pool", (void *)cl);
		return;
	}
	close_chain(dead);
}

void rk_rpc_pool_put(struct rk_rpc_pool *pool, struct rk_rpc_client *cl)
{
	if (!pool || !cl)
		return;
	give_back(pool, cl, 0);
}

int rk_rpc_pool_call(struct rk_rpc_pool *pool, const char *peer, const struct rk_rpc_call_args *a,
		     uint32_t *resp_len, int32_t *app_code, struct rk_error *err)
{
	struct rk_rpc_call_args ca;
	struct rk_rpc_client *cl;
	int64_t deadline;
	int timeout, left, r;

	if (!a)
		return rk__err_set(err, EINVAL, "rk_rpc_pool_call", "no call arguments");
	timeout = a->timeout_ms ? a->timeout_ms : DEF_TIMEOUT_MS;
	deadline = rk__deadline(timeout);
	r = rk_rpc_pool_get(pool, peer, timeout, err, &cl);
	if (r)
		return r;
	ca = *a;
	ca.timeout_ms = -1;
	if (deadline >= 0) {
		/* What the lease left of the deadline; 0 would mean 5000 to rk_rpc_call. */
		left = rk__ms_left(deadline);
		if (!left) {
			rk_rpc_pool_put(pool, cl);
			return rk__err_set(err, ETIMEDOUT, "rk_rpc_pool_call",
					   "%.80s: the deadline passed while leasing a client",
					   peer);
		}
		ca.timeout_ms = left;
	}
	r = rk_rpc_call(cl, &ca, resp_len, app_code, err);
	/*
	 * After a timeout the server may still write the caller's resp_mr
	 * buffer (or read its req_mr one) until the connection goes (rpc.h):
	 * that client is never lent again, or the late access would land in
	 * memory its owner has reused.
	 */
	give_back(pool, cl, r == -ETIMEDOUT && (a->resp_mr || a->req_mr));
	return r;
}

unsigned rk_rpc_pool_reap(struct rk_rpc_pool *pool)
{
	struct rk__pbook_entry *expired;

	if (!pool)
		return 0;
	pthread_mutex_lock(&pool->mu);
	expired = rk__pbook_expire(&pool->book, rk__now_ms());
	pthread_mutex_unlock(&pool->mu);
	return close_chain(expired);
}

void rk_rpc_pool_get_stats(struct rk_rpc_pool *pool, struct rk_rpc_pool_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	if (!pool)
		return;
	pthread_mutex_lock(&pool->mu);
	*st = pool->book.st;
	pthread_mutex_unlock(&pool->mu);
}
