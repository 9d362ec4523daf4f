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
 *    times idle_ms, and a client that calls every 200 ms, both stay
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
			 uint32_t per_peer, pthread_t *th)
{
	struct rk_rpc_server_opts so = {.addr = "::", /* every address, IPv4 and IPv6 */
					.port = port,
					.max_conns = max_conns,
					.max_conns_per_peer = per_peer,
					.idle_ms = IDLE_MS};
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

/* Refused with @what in the reason. */
static void refused(struct rk_device *dev, const char *host, const char *port, const char *what)
{
	struct rk_rpc_client *cl;
	struct rk_error e;
	int r = connect_to(dev, host, port, &e, &cl);

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

	server_start(dev, "7640", 4, 4, &th);
	t_first = lt_now_ms(); /* the first connection is accepted after this */
	for (int i = 0; i < 4; i++)
		LT_CHECK(connect_to(dev, addr, "7640", &e, &idle[i]), &e);
	t_full = lt_now_ms();
	refused(dev, addr, "7640", "connection limit");
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

/*
 * The chatty client's call: it calls every CHATTY_MS, 1/12 of idle_ms. A
 * guest stalled for idle_ms between two of its calls makes it silent that
 * long, and the server is then right to idle it: that one is reconnected
 * and counted (*@idled), and only a client idled while it kept calling
 * fails the test.
 */
#define CHATTY_MS 50

static void chatty_echo(struct rk_device *dev, const char *addr, const char *port,
			struct rk_rpc_client **chatty, int64_t *last, unsigned *idled)
{
	int64_t gap = lt_now_ms() - *last;
	struct rk_error e;
	int r = echo(*chatty, M_ECHO, 10000, &e);

	if (r == -ECONNRESET && gap >= IDLE_MS) {
		printf("the chatty client was silent %lld ms (a stalled guest): idled, rightly\n",
		       (long long)gap);
		(*idled)++;
		rk_rpc_client_destroy(*chatty);
		LT_CHECK(connect_to(dev, addr, port, &e, chatty), &e);
		r = echo(*chatty, M_ECHO, 10000, &e);
	}
	if (r)
		LT_FAIL("the chatty client (silent %lld ms before this call): %s", (long long)gap,
			rk_error_str(&e));
	*last = lt_now_ms();
}

static void busy_clients(struct rk_device *dev, const char *addr)
{
	unsigned idled = 0, may;
	int64_t last, holder_last, chatty_last, t_stop;
	struct rk_rpc_client *holder, *chatty;
	struct rk_rpc_server_stats st;
	struct rk_error e;
	pthread_t th;
	int r;

	server_start(dev, "7641", 4, 4, &th);
	LT_CHECK(connect_to(dev, addr, "7641", &e, &holder), &e);
	LT_CHECK(connect_to(dev, addr, "7641", &e, &chatty), &e);
	{
		char in[64] = "held", out[64];
		struct rk_rpc_call_args a = {.method = M_HOLD,
					     .req = in,
					     .req_len = sizeof(in),
					     .resp = out,
					     .resp_cap = sizeof(out),
					     .timeout_ms = 20000};
		int64_t t0 = lt_now_ms();

		LT_CHECK(rk_rpc_call_async(holder, &a, held_done, NULL, &e), &e);
		/* The other client calls every CHATTY_MS meanwhile; the held call waits 3 x
		 * idle_ms.
		 */
		last = lt_now_ms();
		while (lt_now_ms() - t0 < 3 * IDLE_MS) {
			chatty_echo(dev, addr, "7641", &chatty, &last, &idled);
			r = rk_rpc_client_progress(holder, 0, &e);
			if (r < 0)
				LT_FAIL("the holder's connection: %s", rk_error_str(&e));
			usleep(CHATTY_MS * 1000);
		}
		if (!held)
			LT_FAIL("the held call never reached its handler");
		rk_rpc_reply(held, 0, "late", 4);
		held = NULL;
		/*
		 * The chatty client goes on calling until the held answer is in:
		 * silent for idle_ms here (a slow guest), it would be idled out
		 * rightly, and counted below.
		 */
		while (rk_rpc_client_inflight(holder)) {
			chatty_echo(dev, addr, "7641", &chatty, &last, &idled);
			r = rk_rpc_client_progress(holder, 100, &e);
			if (r < 0)
				LT_FAIL("the held call: %s", rk_error_str(&e));
			if (lt_now_ms() - t0 > 20000)
				LT_FAIL("the held call was never answered");
		}
		if (held_status)
			LT_FAIL("the held call failed: %d", held_status);
	}
	holder_last = lt_now_ms();
	LT_CHECK(echo(holder, M_ECHO, 10000, &e), &e);
	chatty_last = lt_now_ms();
	chatty_echo(dev, addr, "7641", &chatty, &last, &idled);
	printf("a call held %d ms and a client calling every %d ms: both kept\n", 3 * IDLE_MS,
	       CHATTY_MS);
	/*
	 * A sweep after these last calls may close a client only if its last
	 * call began idle_ms or more before the server's thread stopped (a
	 * stalled guest), and that is right.
	 */
	rk_rpc_client_destroy(holder);
	rk_rpc_client_destroy(chatty);
	st = server_stop(th);
	t_stop = lt_now_ms();
	may = (t_stop - holder_last >= IDLE_MS) + (t_stop - chatty_last >= IDLE_MS);
	if (st.conns_idle < idled || st.conns_idle > idled + may)
		LT_FAIL("%llu busy connections closed for idling (%u of them rightly, silent for "
			"idle_ms; %u more may have been, silent %lld / %lld ms before the server "
			"stopped)",
			(unsigned long long)st.conns_idle, idled, may,
			(long long)(t_stop - holder_last), (long long)(t_stop - chatty_last));
}

static void per_peer(struct rk_device *dev, const char *addr, const char *addr6)
{
	struct rk_rpc_client *a, *b, *c, *v6;
	struct rk_error e;
	pthread_t th;
	int r;

	server_start(dev, "7642", 8, 2, &th);
	LT_CHECK(connect_to(dev, addr, "7642", &e, &a), &e);
	LT_CHECK(connect_to(dev, addr, "7642", &e, &b), &e);
	refused(dev, addr, "7642", "from one address");
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
	struct rk_rpc_client *second;
	struct rk_rpc_server_stats st;
	struct rk_error e;
	int64_t t0, dt, t_reply, connect_ms, wake_ms, worst = 0, last;
	unsigned long before, w0;
	unsigned idled = 0;
	const int64_t t_start = lt_now_ms();
	pthread_t th, ht;
	int r;

	server_start(dev, "7643", 4, 4, &th);
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
	LT_CHECK(rk_rpc_client_connect(dev, &bo, &e, &second), &e);
	connect_ms = lt_now_ms() - t0;
	if (connect_ms > SOLO_BOUND_MS)
		LT_FAIL("a second client's connect took %lld ms beside a busy client",
			(long long)connect_ms);
	for (int i = 0; i < 20; i++) {
		t0 = lt_now_ms();
		r = echo(second, M_ECHO, SOLO_BOUND_MS, &e);
		if (r)
			LT_FAIL("the second client's call %d beside a busy client: %s", i,
				rk_error_str(&e));
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
	t0 = last = lt_now_ms();
	while (lt_now_ms() < t0 + 2 * IDLE_MS) {
		chatty_echo(dev, addr, "7643", &second, &last, &idled);
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
		if (echo(second, M_ECHO, SOLO_BOUND_MS, &e))
			LT_FAIL("the second client, alone again: %s", rk_error_str(&e));
	printf("the busy client, silent, closed for idling; the other served alone (%lld ms in "
	       "all)\n",
	       (long long)(lt_now_ms() - t_start));
	rk_rpc_client_destroy(second);
	st = server_stop(th);
	if (st.conns_idle != 1 + idled)
		LT_FAIL("%llu connections closed for idling, not 1 (+%u rightly idled)",
			(unsigned long long)st.conns_idle, idled);
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
