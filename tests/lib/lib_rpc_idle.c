/*
 * lib_rpc_idle.c - what silent clients can hold of an RPC server.
 *
 * 1. A server with max_conns 4 and idle_ms 600: four clients connect and
 *    say nothing; a fifth is refused busy, then served once the oldest has
 *    been closed for idling (not before idle_ms after it came), and all
 *    four are closed.
 *    A call on an idled client fails at once ("peer gone"), not at its
 *    deadline.
 * 2. What is no idling: a client whose call a handler holds for three
 *    times idle_ms, and a client that calls every 50 ms, both stay
 *    connected and are answered.
 * 3. max_conns_per_peer 2 of max_conns 8: a third client from one address
 *    is refused ("from one address") while a client from another address
 *    (the device's IPv6 one) is served; once one of the first two leaves,
 *    the third is served.
 * 4. One client calling back to back (the busy server then polls that
 *    connection's CQ alone): an answer from another thread and a wake-up
 *    reach it, a second client connects and calls, each within
 *    SOLO_BOUND_MS, while the first goes on; then the first falls silent,
 *    is closed by the idle sweep, and the second is still served.
 *
 * The guest may stall for idle_ms at any point, and the server is then
 * right to close a client that was silent that long: a sweep closes a
 * connection only idle_ms or more after its last request came, which came
 * after the call began (or the connect). So a client idled after a
 * silence of idle_ms, counted from there, is reconnected and counted
 * (struct tracked), and only one idled sooner fails the test.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lt.h"

enum { M_ECHO = 1, M_HOLD = 2 };

#define IDLE_MS	   600
#define CONNECT_MS 30000

static struct rk_rpc_server *srv;
static volatile int stop;
static unsigned long wakes_seen; /* progress returned -EINTR (atomic) */
static struct rk_rpc_req *volatile held;

static void h_echo(struct rk_rpc_req *req, void *arg)
{
	uint32_t len;
	const void *d = rk_rpc_req_data(req, &len);

	(void)arg;
	rk_rpc_reply(req, 0, d, len);
}

static int held_status = 1;

static void held_done(void *arg, int status, uint32_t len, int32_t code, const struct rk_error *e)
{
	(void)arg;
	(void)len;
	(void)code;
	if (status)
		fprintf(stderr, "held call: %s\n", e->msg);
	held_status = status;
}

/* Answered later by the test's own thread (a deferred answer). */
static void h_hold(struct rk_rpc_req *req, void *arg)
{
	(void)arg;
	held = req;
}

static void *server_loop(void *arg)
{
	struct rk_error e;

	(void)arg;
	while (!stop) {
		int r = rk_rpc_server_progress(srv, 100, &e);

		if (r == -EINTR)
			__atomic_add_fetch(&wakes_seen, 1, __ATOMIC_RELAXED);
		else if (r < 0 && r != -ETIMEDOUT)
			LT_FAIL("server progress: %s", rk_error_str(&e));
	}
	return NULL;
}

static void server_start(struct rk_device *dev, const char *port, uint32_t max_conns,
			 uint32_t per_peer, uint32_t idle_ms, pthread_t *th)
{
	struct rk_rpc_server_opts so = {.addr = "::", /* every address, IPv4 and IPv6 */
					.port = port,
					.max_conns = max_conns,
					.max_conns_per_peer = per_peer,
					.idle_ms = idle_ms};
	struct rk_error e;

	stop = 0;
	LT_CHECK(rk_rpc_server_create(dev, &so, &e, &srv), &e);
	LT_CHECK(rk_rpc_server_add(srv, M_ECHO, h_echo, NULL), NULL);
	LT_CHECK(rk_rpc_server_add(srv, M_HOLD, h_hold, NULL), NULL);
	if (pthread_create(th, NULL, server_loop, NULL))
		LT_FAIL("pthread_create");
}

static struct rk_rpc_server_stats server_stop(pthread_t th)
{
	struct rk_rpc_server_stats st;

	stop = 1;
	pthread_join(th, NULL);
	rk_rpc_server_get_stats(srv, &st);
	rk_rpc_server_destroy(srv);
	srv = NULL;
	return st;
}

static int connect_to(struct rk_device *dev, const char *host, const char *port, struct rk_error *e,
		      struct rk_rpc_client **cl)
{
	struct rk_rpc_client_opts co = {.host = host, .port = port, .timeout_ms = CONNECT_MS};

	return rk_rpc_client_connect(dev, &co, e, cl);
}

static int echo(struct rk_rpc_client *cl, uint16_t method, int timeout_ms, struct rk_error *e)
{
	char in[64] = "are you there", out[64] = "";
	struct rk_rpc_call_args a = {.method = method,
				     .req = in,
				     .req_len = sizeof(in),
				     .resp = out,
				     .resp_cap = sizeof(out),
				     .timeout_ms = timeout_ms};
	uint32_t got = 0;
	int r = rk_rpc_call(cl, &a, &got, NULL, e);

	if (!r && (got != sizeof(in) || memcmp(in, out, sizeof(in))))
		LT_FAIL("an echo came back wrong (%u bytes)", got);
	return r;
}

/*
 * Refused with @what in the reason. Served instead is right only when the
 * oldest client, silent since its connect began at @oldest (-1: none may
 * be idled), was silent idle_ms: the sweep made room.
 */
static void refused(struct rk_device *dev, const char *host, const char *port, const char *what,
		    int64_t oldest)
{
	struct rk_rpc_client *cl;
	struct rk_error e;
	int r = connect_to(dev, host, port, &e, &cl);

	if (!r && oldest >= 0 && lt_now_ms() - oldest >= IDLE_MS) {
		printf("served, not refused, %lld ms after the oldest client came (a stalled "
		       "guest): its idling made room, rightly\n",
		       (long long)(lt_now_ms() - oldest));
		rk_rpc_client_destroy(cl);
		return;
	}
	if (r != -ECONNREFUSED || !strstr(rk_error_str(&e), what))
		LT_FAIL("expected a refusal naming '%s', got %d (%s)", what, r,
			r ? rk_error_str(&e) : "connected");
	printf("refused: %s\n", rk_error_str(&e));
}

static void silent_clients(struct rk_device *dev, const char *addr)
{
	struct rk_rpc_client *idle[4], *late;
	struct rk_rpc_server_stats st;
	struct rk_error e;
	int64_t t_first, t_full, t_in, t0;
	pthread_t th;
	int r;

	server_start(dev, "7640", 4, 4, IDLE_MS, &th);
	t_first = lt_now_ms(); /* the first connection is accepted after this */
	for (int i = 0; i < 4; i++)
		LT_CHECK(connect_to(dev, addr, "7640", &e, &idle[i]), &e);
	t_full = lt_now_ms();
	refused(dev, addr, "7640", "connection limit", t_first);
	/* Again and again, as a real client would: served once the silent four are closed. */
	for (;;) {
		r = connect_to(dev, addr, "7640", &e, &late);
		if (!r)
			break;
		if (r != -ECONNREFUSED || lt_now_ms() - t_full > 20000)
			LT_FAIL("a new client was never served: %d (%s)", r, rk_error_str(&e));
		usleep(50 * 1000);
	}
	t_in = lt_now_ms();
	/* The oldest silent client makes room first: not before idle_ms after its accept. */
	if (t_in - t_first < IDLE_MS)
		LT_FAIL("served %lld ms after the first silent client came, before the idle "
			"timeout of %d ms",
			(long long)(t_in - t_first), IDLE_MS);
	LT_CHECK(echo(late, M_ECHO, 10000, &e), &e);
	printf("a new client served %lld ms after the server was full, %lld ms after the first "
	       "silent client came (idle_ms %d)\n",
	       (long long)(t_in - t_full), (long long)(t_in - t_first), IDLE_MS);
	/*
	 * The others came later: closed by 1.25 x idle_ms after the last of
	 * them (a sweep every quarter). They learn it at their next call, at once.
	 */
	while (lt_now_ms() < t_full + 2 * IDLE_MS)
		usleep(50 * 1000);
	for (int i = 0; i < 4; i++) {
		t0 = lt_now_ms();
		r = echo(idle[i], M_ECHO, 10000, &e);
		if (r == 0 || r == -ETIMEDOUT || lt_now_ms() - t0 > 5000)
			LT_FAIL("a call on an idled client: %d after %lld ms (%s)", r,
				(long long)(lt_now_ms() - t0), rk_error_str(&e));
		rk_rpc_client_destroy(idle[i]);
	}
	printf("a call on an idled client: %s\n", rk_error_str(&e));
	rk_rpc_client_destroy(late);
	st = server_stop(th);
	if (st.conns_idle < 4)
		LT_FAIL("%llu connections closed for idling, not at least 4",
			(unsigned long long)st.conns_idle);
}

/* The chatty client calls every CHATTY_MS, 1/12 of idle_ms. */
#define CHATTY_MS 50

/* A client the sweep may rightly idle after a stall (the file's comment). */
struct tracked {
	struct rk_rpc_client *cl;
	const char *name, *addr, *port;
	const struct rk_rpc_client_opts *opts; /* NULL: connect_to()'s */
	int64_t since;			       /* its last call (or its connect) began */
	unsigned idled;			       /* idled after a silence of idle_ms, reconnected */
};

static void tracked_connect(struct rk_device *dev, struct tracked *t)
{
	struct rk_error e;

	t->since = lt_now_ms();
	if (t->opts)
		LT_CHECK(rk_rpc_client_connect(dev, t->opts, &e, &t->cl), &e);
	else
		LT_CHECK(connect_to(dev, t->addr, t->port, &e, &t->cl), &e);
}

/* An echo that must be answered, unless the client was silent idle_ms (then again). */
static void tracked_echo(struct rk_device *dev, struct tracked *t, int timeout_ms)
{
	int64_t t0 = lt_now_ms();
	struct rk_error e;
	int r = echo(t->cl, M_ECHO, timeout_ms, &e);

	if (r == -ECONNRESET && lt_now_ms() - t->since >= IDLE_MS) {
		printf("%s was silent %lld ms (a stalled guest): idled, rightly\n", t->name,
		       (long long)(lt_now_ms() - t->since));
		t->idled++;
		rk_rpc_client_destroy(t->cl);
		tracked_connect(dev, t);
		t0 = lt_now_ms();
		r = echo(t->cl, M_ECHO, timeout_ms, &e);
	}
	if (r)
		LT_FAIL("%s (its last call began %lld ms before this one): %s", t->name,
			(long long)(t0 - t->since), rk_error_str(&e));
	t->since = t0;
}

/* 1 if the server's sweep may rightly have idled @t by @t_stop. */
static unsigned tracked_may(const struct tracked *t, int64_t t_stop)
{
	return t_stop - t->since >= IDLE_MS;
}

static void busy_clients(struct rk_device *dev, const char *addr)
{
	struct tracked holder = {.name = "the holder", .addr = addr, .port = "7641"};
	struct tracked chatty = {.name = "the chatty client", .addr = addr, .port = "7641"};
	struct rk_rpc_server_stats st;
	struct rk_error e;
	int64_t t_stop;
	unsigned may;
	pthread_t th;
	int r;

	server_start(dev, "7641", 4, 4, IDLE_MS, &th);
	tracked_connect(dev, &holder);
	tracked_connect(dev, &chatty);
	{
		char in[64] = "held", out[64];
		struct rk_rpc_call_args a = {.method = M_HOLD,
					     .req = in,
					     .req_len = sizeof(in),
					     .resp = out,
					     .resp_cap = sizeof(out),
					     .timeout_ms = 20000};
		int64_t t0 = lt_now_ms();

		LT_CHECK(rk_rpc_call_async(holder.cl, &a, held_done, NULL, &e), &e);
		/* The other client calls every CHATTY_MS meanwhile; the held call waits 3 x
		 * idle_ms.
		 */
		while (lt_now_ms() - t0 < 3 * IDLE_MS) {
			tracked_echo(dev, &chatty, 10000);
			r = rk_rpc_client_progress(holder.cl, 0, &e);
			if (r < 0)
				LT_FAIL("the holder's connection: %s", rk_error_str(&e));
			usleep(CHATTY_MS * 1000);
		}
		if (!held)
			LT_FAIL("the held call never reached its handler");
		/*
		 * While its call was held, every sweep (a quarter of idle_ms
		 * apart) saw it busy: silent from the last of them on.
		 */
		holder.since = lt_now_ms() - IDLE_MS / 4;
		rk_rpc_reply(held, 0, "late", 4);
		held = NULL;
		/* The chatty client goes on calling until the held answer is in. */
		while (rk_rpc_client_inflight(holder.cl)) {
			tracked_echo(dev, &chatty, 10000);
			r = rk_rpc_client_progress(holder.cl, 100, &e);
			if (r < 0)
				LT_FAIL("the held call: %s", rk_error_str(&e));
			if (lt_now_ms() - t0 > 20000)
				LT_FAIL("the held call was never answered");
		}
		if (held_status)
			LT_FAIL("the held call failed: %d", held_status);
	}
	tracked_echo(dev, &holder, 10000);
	tracked_echo(dev, &chatty, 10000);
	printf("a call held %d ms and a client calling every %d ms: both kept\n", 3 * IDLE_MS,
	       CHATTY_MS);
	rk_rpc_client_destroy(holder.cl);
	rk_rpc_client_destroy(chatty.cl);
	st = server_stop(th);
	/* A sweep after their last calls, before they left, may have idled them rightly. */
	t_stop = lt_now_ms();
	may = tracked_may(&holder, t_stop) + tracked_may(&chatty, t_stop);
	if (st.conns_idle < holder.idled + chatty.idled ||
	    st.conns_idle > holder.idled + chatty.idled + may)
		LT_FAIL("%llu busy connections closed for idling (%u of them rightly, silent for "
			"idle_ms; %u more may have been, after their last calls)",
			(unsigned long long)st.conns_idle, holder.idled + chatty.idled, may);
}

static void per_peer(struct rk_device *dev, const char *addr, const char *addr6)
{
	struct rk_rpc_client *a, *b, *c, *v6;
	struct rk_error e;
	pthread_t th;
	int r;

	/* Its subject is the limits, not idling: no client is idled here. */
	server_start(dev, "7642", 8, 2, 60000, &th);
	LT_CHECK(connect_to(dev, addr, "7642", &e, &a), &e);
	LT_CHECK(connect_to(dev, addr, "7642", &e, &b), &e);
	refused(dev, addr, "7642", "from one address", -1);
	LT_CHECK(connect_to(dev, addr6, "7642", &e, &v6), &e);
	LT_CHECK(echo(v6, M_ECHO, 10000, &e), &e);
	printf("another address is served while one is at its limit\n");
	rk_rpc_client_destroy(a);
	/* The server learns of the departure through its CM channel: soon, not at once. */
	for (int64_t t0 = lt_now_ms();;) {
		r = connect_to(dev, addr, "7642", &e, &c);
		if (!r)
			break;
		if (r != -ECONNREFUSED || lt_now_ms() - t0 > 10000)
			LT_FAIL("no room after a client left: %d (%s)", r, rk_error_str(&e));
		usleep(50 * 1000);
	}
	LT_CHECK(echo(c, M_ECHO, 10000, &e), &e);
	LT_CHECK(echo(b, M_ECHO, 10000, &e), &e);
	rk_rpc_client_destroy(c);
	rk_rpc_client_destroy(b);
	rk_rpc_client_destroy(v6);
	server_stop(th);
}

/*
 * The bound of section 4 on what the busy client may delay: an answer from
 * another thread, a wake-up, a second client's connect and each of its
 * calls. Generous for a guest under emulation; the server looks at its
 * fds every 64 calls that found work.
 */
#define SOLO_BOUND_MS 2000

struct hammer {
	struct rk_rpc_client *cl;
	volatile int stop;
	unsigned long calls; /* answered (atomic) */
	int64_t held_at;     /* when the held call's answer came (atomic; 0: not yet) */
	int held_status;
	char held_out[64];
};

static void hammer_held_done(void *arg, int status, uint32_t len, int32_t code,
			     const struct rk_error *e)
{
	struct hammer *h = arg;

	(void)len;
	(void)code;
	if (status)
		fprintf(stderr, "the busy client's held call: %s\n", e->msg);
	h->held_status = status;
	__atomic_store_n(&h->held_at, lt_now_ms(), __ATOMIC_RELEASE);
}

/* The first client: calls back to back until told to stop, every one answered. */
static void *hammer_loop(void *arg)
{
	struct hammer *h = arg;
	struct rk_error e;

	while (!h->stop) {
		if (echo(h->cl, M_ECHO, 10000, &e))
			LT_FAIL("the busy client's call %lu: %s",
				__atomic_load_n(&h->calls, __ATOMIC_RELAXED), rk_error_str(&e));
		__atomic_add_fetch(&h->calls, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static unsigned long hammer_calls(struct hammer *h)
{
	return __atomic_load_n(&h->calls, __ATOMIC_RELAXED);
}

/* Wait up to SOLO_BOUND_MS for *@v to pass @than; fail naming @what. */
static int64_t within_bound(const unsigned long *v, unsigned long than, const char *what)
{
	int64_t t0 = lt_now_ms(), dt;

	while (__atomic_load_n(v, __ATOMIC_ACQUIRE) <= than) {
		dt = lt_now_ms() - t0;
		if (dt > SOLO_BOUND_MS)
			LT_FAIL("%s: not within %d ms of a busy client's calls", what,
				SOLO_BOUND_MS);
		usleep(1000);
	}
	return lt_now_ms() - t0;
}

static void solo_then_second(struct rk_device *dev, const char *addr)
{
	struct rk_rpc_client_opts bo = {
	    .host = addr, .port = "7643", .timeout_ms = CONNECT_MS, .mode = RK_WAIT_EVENT};
	static struct hammer h;
	char in[64] = "held";
	struct rk_rpc_call_args a = {.method = M_HOLD,
				     .req = in,
				     .req_len = sizeof(in),
				     .resp = h.held_out,
				     .resp_cap = sizeof(h.held_out),
				     .timeout_ms = 20000};
	struct tracked second = {.name = "the second client", .opts = &bo};
	struct rk_rpc_server_stats st;
	struct rk_error e;
	int64_t t0, dt, t_reply, connect_ms, wake_ms, worst = 0;
	unsigned long before, w0;
	unsigned may;
	const int64_t t_start = lt_now_ms();
	pthread_t th, ht;
	int r;

	server_start(dev, "7643", 4, 4, IDLE_MS, &th);
	LT_CHECK(connect_to(dev, addr, "7643", &e, &h.cl), &e);
	/* A call a handler holds: answered below from this thread while the other calls run. */
	LT_CHECK(rk_rpc_call_async(h.cl, &a, hammer_held_done, &h, &e), &e);
	for (t0 = lt_now_ms(); !held; usleep(1000))
		if (lt_now_ms() - t0 > 10000)
			LT_FAIL("the held call never reached its handler");
	if (pthread_create(&ht, NULL, hammer_loop, &h))
		LT_FAIL("pthread_create");
	/* The server alone with a client that keeps it busy. */
	for (t0 = lt_now_ms(); hammer_calls(&h) < 200; usleep(1000))
		if (lt_now_ms() - t0 > 10000)
			LT_FAIL("the busy client made %lu calls in 10 s", hammer_calls(&h));

	/* An answer from another thread (deferred): the busy client has it soon. */
	t_reply = lt_now_ms();
	rk_rpc_reply(held, 0, "late", 4);
	held = NULL;
	while (!__atomic_load_n(&h.held_at, __ATOMIC_ACQUIRE))
		if (lt_now_ms() - t_reply > SOLO_BOUND_MS)
			LT_FAIL("an answer from another thread: not within %d ms of a busy "
				"client's calls",
				SOLO_BOUND_MS);
	if (h.held_status)
		LT_FAIL("the held call failed: %d", h.held_status);
	/* A wake-up: progress returns -EINTR soon. */
	w0 = __atomic_load_n(&wakes_seen, __ATOMIC_ACQUIRE);
	rk_rpc_server_wake(srv);
	wake_ms = within_bound(&wakes_seen, w0, "a wake-up");

	/* A second client: its connect and every call within the bound, the first going on. */
	before = hammer_calls(&h);
	t0 = lt_now_ms();
	tracked_connect(dev, &second);
	connect_ms = lt_now_ms() - t0;
	if (connect_ms > SOLO_BOUND_MS)
		LT_FAIL("a second client's connect took %lld ms beside a busy client",
			(long long)connect_ms);
	for (int i = 0; i < 20; i++) {
		t0 = lt_now_ms();
		r = echo(second.cl, M_ECHO, SOLO_BOUND_MS, &e);
		if (r)
			LT_FAIL("the second client's call %d beside a busy client: %s", i,
				rk_error_str(&e));
		second.since = t0;
		dt = lt_now_ms() - t0;
		worst = dt > worst ? dt : worst;
	}
	within_bound(&h.calls, before, "the busy client's calls beside a second one");
	printf("beside a client calling back to back (%lu calls): an answer from another "
	       "thread in %lld ms, a wake-up in %lld ms, a second client's connect in %lld ms, "
	       "its calls in at most %lld ms\n",
	       hammer_calls(&h), (long long)(h.held_at - t_reply), (long long)wake_ms,
	       (long long)connect_ms, (long long)worst);

	/* The first falls silent: closed by the idle sweep, the second served meanwhile. */
	h.stop = 1;
	pthread_join(ht, NULL);
	t0 = lt_now_ms();
	while (lt_now_ms() < t0 + 2 * IDLE_MS) {
		tracked_echo(dev, &second, 10000);
		usleep(CHATTY_MS * 1000);
	}
	dt = lt_now_ms();
	r = echo(h.cl, M_ECHO, 10000, &e);
	if (r == 0 || r == -ETIMEDOUT || lt_now_ms() - dt > 5000)
		LT_FAIL("a call on the silent client %lld ms after its last: %d after %lld ms (%s)",
			(long long)(dt - t0), r, (long long)(lt_now_ms() - dt),
			r ? rk_error_str(&e) : "answered");
	rk_rpc_client_destroy(h.cl);
	/* The second is the server's only client now: served as such. */
	for (int i = 0; i < 20; i++)
		tracked_echo(dev, &second, SOLO_BOUND_MS);
	printf("the busy client, silent, closed for idling; the other served alone (%lld ms in "
	       "all)\n",
	       (long long)(lt_now_ms() - t_start));
	rk_rpc_client_destroy(second.cl);
	st = server_stop(th);
	may = tracked_may(&second, lt_now_ms());
	if (st.conns_idle < 1 + second.idled || st.conns_idle > 1 + second.idled + may)
		LT_FAIL("%llu connections closed for idling, not 1 (+%u rightly idled, +%u more "
			"may have been after its last call)",
			(unsigned long long)st.conns_idle, second.idled, may);
}

int main(void)
{
	const char *addr = lt_env("RK_ADDR"), *addr6 = lt_env("RK_ADDR6");
	struct rk_device *dev;

	lt_prog = "lib_rpc_idle";
	lt_role = "client";
	dev = lt_open_device(0);
	silent_clients(dev, addr);
	busy_clients(dev, addr);
	per_peer(dev, addr, addr6);
	solo_then_second(dev, addr);
	rk_device_close(dev);
	printf("lib_rpc_idle: all ok\n");
	return 0;
}
