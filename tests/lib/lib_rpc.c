/*
 * lib_rpc.c - the RPC layer on a real device.
 *
 * One server (its progress loop on a thread of its own) and clients in this
 * process: echo at 0 B, 1 B, 4 KiB, 1 MiB and 64 MiB with every byte
 * checked, copied and zero copy (the caller's registered buffers);
 * 10,000 async calls with 64 in flight, each matched to its caller; an
 * unknown method; a handler's error code; an answer deferred to another
 * thread; a deadline that passes (and the late answer dropped); answers
 * larger than the caller accepts; answers at both edges of the inline
 * size (116 / 117 and 244 / 245 bytes), from the progress thread and the
 * worker at once; hostile clients (a slot beyond the
 * window, a busy slot, a length beyond the buffer, garbage, a write where
 * a SEND belongs) each served once, then dropped for the reason the server
 * logs, with the good client unaffected; a server that answers with a forged
 * immediate (another generation, a slot beyond the window) fails the call
 * ("peer gone": the server broke the protocol) and the client. Then a
 * server in another process is killed with calls in flight: every one
 * fails at once with "peer gone", well within its deadline.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "lt.h"

#include "../../lib/rpc_wire.h"

enum {
	M_ECHO = 1,
	M_FAIL = 2,
	M_DEFER = 3,
	M_NEVER = 4,
	M_BIG = 5,
	M_INPLACE = 6,
	M_PAST = 7,
	M_HOLD = 8
};

#define NASYNC	 10000
#define NQUICK	 500 /* calls in the quick (valgrind) run */
#define INFLIGHT 64u
/* Connect steps: valgrind on an emulated CPU may take seconds for one. */
#define CONNECT_MS 30000

static struct rk_rpc_server *srv;
static volatile int stop;
/*
 * How the servers and clients wait: busy, or events in the quick run.
 * Under valgrind, which runs one thread at a time, a spinning thread
 * starves the others and a call can take seconds.
 */
static enum rk_wait_mode wait_mode = RK_WAIT_BUSY;
static unsigned nasync = NASYNC;

/* ---- the server's handlers ------------------------------------------------ */

static void h_echo(struct rk_rpc_req *req, void *arg)
{
	uint32_t len;
	const void *d = rk_rpc_req_data(req, &len);

	(void)arg;
	rk_rpc_reply(req, 0, d, len);
}

static void h_fail(struct rk_rpc_req *req, void *arg)
{
	(void)arg;
	rk_rpc_reply(req, 42, "nope", 4);
}

/* Answers more than asked: 8 KiB whatever the caller accepts. */
static void h_big(struct rk_rpc_req *req, void *arg)
{
	static char big[8192];

	(void)arg;
	rk_rpc_reply(req, 0, big, sizeof(big));
}

/* An echo built in the server's own answer buffer: sent without a copy. */
static void h_inplace(struct rk_rpc_req *req, void *arg)
{
	uint32_t len;
	const void *d = rk_rpc_req_data(req, &len);
	void *buf = rk_rpc_reply_buf(req, len);

	(void)arg;
	if (!buf) {
		rk_rpc_reply(req, 98, NULL, 0);
		return;
	}
	memcpy(buf, d, len);
	rk_rpc_reply(req, 0, buf, len);
}

/* Misuse of the answer buffer: beyond resp_cap refused; an answer past its end not sent. */
static void h_past(struct rk_rpc_req *req, void *arg)
{
	void *buf;

	(void)arg;
	errno = 0;
	if (rk_rpc_reply_buf(req, rk_rpc_req_resp_cap(req) + 1) || errno != EMSGSIZE) {
		rk_rpc_reply(req, 97, NULL, 0);
		return;
	}
	buf = rk_rpc_reply_buf(req, 16);
	if (!buf || rk_rpc_reply_buf(req, 8) != buf) { /* smaller: the same buffer */
		rk_rpc_reply(req, 96, NULL, 0);
		return;
	}
	memset(buf, 'p', 16);
	if (rk_rpc_reply(req, 0, buf, 32) != -EINVAL)
		LT_FAIL("an answer past its rk_rpc_reply_buf was not refused");
}

/*
 * Deferred: a worker thread answers (an echo) after the delay in the
 * request; bodies beyond 4 KiB are copied by the handler into the answer
 * buffer, which the worker sends.
 */
static pthread_mutex_t dq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dq_cond = PTHREAD_COND_INITIALIZER;
static struct rk_rpc_req *dq[256];
static void *dq_buf[256];
static unsigned dq_n;
static struct rk_rpc_req *never[256];
static unsigned never_n;

static void h_defer(struct rk_rpc_req *req, void *arg)
{
	uint32_t len;
	const void *d = rk_rpc_req_data(req, &len);
	void *buf = NULL;

	(void)arg;
	if (len > 4096 && (buf = rk_rpc_reply_buf(req, len)))
		memcpy(buf, d, len);
	pthread_mutex_lock(&dq_lock);
	if (dq_n < 256) {
		dq_buf[dq_n] = buf;
		dq[dq_n++] = req;
	}
	pthread_cond_signal(&dq_cond);
	pthread_mutex_unlock(&dq_lock);
}

static void h_never(struct rk_rpc_req *req, void *arg)
{
	(void)arg;
	if (never_n < 256) { /* answered at the end, to show a late answer is dropped */
		never[never_n] = req;
		__atomic_store_n(&never_n, never_n + 1, __ATOMIC_RELEASE);
	}
}

/* Held until the test's own thread answers it (fd_after_wake). */
static struct rk_rpc_req *held_req;

static void h_hold(struct rk_rpc_req *req, void *arg)
{
	(void)arg;
	__atomic_store_n(&held_req, req, __ATOMIC_RELEASE);
}

static void *deferrer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&dq_lock);
	while (!stop) {
		while (dq_n) {
			struct rk_rpc_req *req = dq[--dq_n];
			void *buf = dq_buf[dq_n];
			uint32_t len, ms = 0;
			const uint8_t *d = rk_rpc_req_data(req, &len);

			pthread_mutex_unlock(&dq_lock);
			if (len >= 4 && len <= 64) /* a short request says how long to wait */
				ms = (uint32_t)d[0] << 8 | d[1];
			usleep(ms * 1000);
			/* Off the progress thread: the buffer it has, but no new one. */
			if (buf && rk_rpc_reply_buf(req, len) != buf)
				LT_FAIL("the answer buffer, asked again by the worker, changed");
			errno = 0;
			if (!buf && len && len <= rk_rpc_req_resp_cap(req) &&
			    (rk_rpc_reply_buf(req, len) || errno != EPERM))
				LT_FAIL("an answer buffer allocated off the progress thread");
			if (rk_rpc_reply(req, 0, buf ? buf : d, len))
				LT_FAIL("rk_rpc_reply from the worker failed");
			pthread_mutex_lock(&dq_lock);
		}
		pthread_cond_wait(&dq_cond, &dq_lock);
	}
	pthread_mutex_unlock(&dq_lock);
	return NULL;
}

static void *server_loop(void *arg)
{
	struct rk_error e;

	(void)arg;
	while (!stop) {
		int r = rk_rpc_server_progress(srv, 100, &e);

		if (r < 0 && r != -ETIMEDOUT && r != -EINTR)
			LT_FAIL("server progress: %s", rk_error_str(&e));
	}
	return NULL;
}

static void start_server(struct rk_device *dev, const char *addr, const char *port, pthread_t *th)
{
	struct rk_rpc_server_opts so = {
	    .addr = addr, .port = port, .window = INFLIGHT, .mode = wait_mode};
	struct rk_error e;

	LT_CHECK(rk_rpc_server_create(dev, &so, &e, &srv), &e);
	LT_CHECK(rk_rpc_server_add(srv, M_ECHO, h_echo, NULL), NULL);
	LT_CHECK(rk_rpc_server_add(srv, M_FAIL, h_fail, NULL), NULL);
	LT_CHECK(rk_rpc_server_add(srv, M_DEFER, h_defer, NULL), NULL);
	LT_CHECK(rk_rpc_server_add(srv, M_NEVER, h_never, NULL), NULL);
	LT_CHECK(rk_rpc_server_add(srv, M_BIG, h_big, NULL), NULL);
	LT_CHECK(rk_rpc_server_add(srv, M_INPLACE, h_inplace, NULL), NULL);
	LT_CHECK(rk_rpc_server_add(srv, M_PAST, h_past, NULL), NULL);
	LT_CHECK(rk_rpc_server_add(srv, M_HOLD, h_hold, NULL), NULL);
	if (rk_rpc_server_add(srv, M_ECHO, h_echo, NULL) != -EEXIST)
		LT_FAIL("a method added twice");
	if (pthread_create(th, NULL, server_loop, NULL))
		LT_FAIL("pthread_create");
}

/* ---- calls ----------------------------------------------------------------- */

static void echo_by(struct rk_rpc_client *cl, uint16_t method, uint32_t len, int zero_copy)
{
	struct rk_pd *pd = rk_rpc_client_pd(cl);
	struct rk_mr *req_mr = NULL, *resp_mr = NULL;
	uint8_t *req, *resp;
	struct rk_rpc_call_args a = {
	    .method = method, .req_len = len, .resp_cap = len, .timeout_ms = 60000};
	struct rk_error e;
	uint32_t got = 0;
	int64_t t0 = lt_now_ms();

	if (zero_copy) {
		LT_CHECK(rk_mr_alloc_pd(pd, len ? len : 1, RK_ACCESS_REMOTE_READ, &e, &req_mr), &e);
		LT_CHECK(rk_mr_alloc_pd(pd, len ? len : 1, RK_ACCESS_REMOTE_WRITE, &e, &resp_mr),
			 &e);
		req = rk_mr_addr(req_mr);
		resp = rk_mr_addr(resp_mr);
	} else {
		req = malloc(len ? len : 1);
		resp = malloc(len ? len : 1);
		if (!req || !resp)
			LT_FAIL("malloc");
	}
	lt_fill(req, len, len + 7);
	memset(resp, 0xee, len);
	a.req = req;
	a.resp = resp;
	a.req_mr = req_mr;
	a.resp_mr = resp_mr;
	LT_CHECK(rk_rpc_call(cl, &a, &got, NULL, &e), &e);
	if (got != len || lt_check(resp, len, len + 7) >= 0)
		LT_FAIL("echo of %u bytes (%s): %u came back, first bad byte at %ld", len,
			zero_copy ? "zero copy" : "copied", got, lt_check(resp, got, len + 7));
	printf("echo %u bytes %s%s: ok (%lld ms)\n", len, zero_copy ? "zero copy" : "copied",
	       method == M_INPLACE ? ", answered in place"
	       : method == M_DEFER ? ", deferred"
				   : "",
	       (long long)(lt_now_ms() - t0));
	if (zero_copy) {
		rk_mr_dereg(req_mr);
		rk_mr_dereg(resp_mr);
	} else {
		free(req);
		free(resp);
	}
}

static void echo(struct rk_rpc_client *cl, uint32_t len, int zero_copy)
{
	echo_by(cl, M_ECHO, len, zero_copy);
}

struct slot_arg {
	uint32_t id, resp;
	int done;
};

static unsigned async_done;

static void async_cb(void *arg, int status, uint32_t len, int32_t code, const struct rk_error *e)
{
	struct slot_arg *s = arg;

	(void)code;
	if (status || len != 4)
		LT_FAIL("async call %u: %d, %u bytes: %s", s->id, status, len, rk_error_str(e));
	if (s->resp != s->id)
		LT_FAIL("async call %u got the answer of call %u", s->id, s->resp);
	s->done = 1;
	async_done++;
}

/* NASYNC calls, INFLIGHT at a time, each echoing its own id into its own buffer. */
static void many_async(struct rk_rpc_client *cl)
{
	static struct slot_arg s[NASYNC];
	uint32_t ids[NASYNC];
	unsigned next = 0, peak = 0;
	struct rk_error e;
	int64_t t0 = lt_now_ms();

	async_done = 0;
	while (async_done < nasync) {
		while (next < nasync && rk_rpc_client_inflight(cl) < INFLIGHT) {
			struct rk_rpc_call_args a = {.method = M_ECHO,
						     .req = &ids[next],
						     .req_len = 4,
						     .resp = &s[next].resp,
						     .resp_cap = 4,
						     .timeout_ms = 30000};
			int r;

			ids[next] = next;
			s[next].id = next;
			s[next].resp = ~0u;
			r = rk_rpc_call_async(cl, &a, async_cb, &s[next], &e);
			if (r == -EAGAIN)
				break;
			LT_CHECK(r, &e);
			next++;
		}
		if (rk_rpc_client_inflight(cl) > peak)
			peak = rk_rpc_client_inflight(cl);
		LT_CHECK(rk_rpc_client_progress(cl, 1000, &e), &e);
	}
	if (peak < INFLIGHT)
		LT_FAIL("at most %u calls were in flight, not %u", peak, INFLIGHT);
	for (unsigned i = 0; i < nasync; i++)
		if (!s[i].done)
			LT_FAIL("call %u never completed", i);
	printf("%u async calls, %u in flight: all matched (%lld ms)\n", nasync, INFLIGHT,
	       (long long)(lt_now_ms() - t0));
}

static int call_simple(struct rk_rpc_client *cl, uint16_t method, const void *req, uint32_t len,
		       void *resp, uint32_t cap, int timeout_ms, uint32_t *got, int32_t *code,
		       struct rk_error *e)
{
	struct rk_rpc_call_args a = {.method = method,
				     .req = req,
				     .req_len = len,
				     .resp = resp,
				     .resp_cap = cap,
				     .timeout_ms = timeout_ms};

	return rk_rpc_call(cl, &a, got, code, e);
}

static void errors(struct rk_rpc_client *cl)
{
	char buf[64];
	uint8_t delay[8] = {0, 50, 'd', 'e', 'f', 'r', 0, 0};
	uint32_t got;
	int32_t code = 0;
	struct rk_error e;
	int r;
	int64_t t0;

	/* Deadlines far off (valgrind on a slow emulated CPU): only M_NEVER's is under test. */
	r = call_simple(cl, 999, "x", 1, buf, sizeof(buf), 20000, &got, &code, &e);
	if (r != -EOPNOTSUPP)
		LT_FAIL("unknown method: %d (%s), not -EOPNOTSUPP", r, rk_error_str(&e));
	printf("unknown method: %s\n", rk_error_str(&e));

	r = call_simple(cl, M_FAIL, NULL, 0, buf, sizeof(buf), 20000, &got, &code, &e);
	if (r != -EREMOTEIO || code != 42 || got != 4 || memcmp(buf, "nope", 4))
		LT_FAIL("handler error: %d code %d len %u", r, code, got);
	printf("handler error: code %d, \"%.4s\": %s\n", code, buf, rk_error_str(&e));

	r = call_simple(cl, M_BIG, NULL, 0, buf, sizeof(buf), 20000, &got, &code, &e);
	if (r != -EMSGSIZE)
		LT_FAIL("an answer beyond resp_cap: %d, not -EMSGSIZE", r);
	printf("answer too big: %s\n", rk_error_str(&e));

	r = call_simple(cl, M_DEFER, delay, sizeof(delay), buf, sizeof(buf), 20000, &got, &code,
			&e);
	if (r || got != sizeof(delay) || memcmp(buf, delay, sizeof(delay)))
		LT_FAIL("deferred answer: %d (%s)", r, rk_error_str(&e));
	printf("deferred answer from another thread: ok\n");

	t0 = lt_now_ms();
	r = call_simple(cl, M_NEVER, NULL, 0, buf, sizeof(buf), 300, &got, &code, &e);
	if (r != -ETIMEDOUT || lt_now_ms() - t0 < 250 || lt_now_ms() - t0 > 10000)
		LT_FAIL("deadline: %d after %lld ms", r, (long long)(lt_now_ms() - t0));
	printf("deadline: -ETIMEDOUT after %lld ms: %s\n", (long long)(lt_now_ms() - t0),
	       rk_error_str(&e));

	r = call_simple(cl, M_PAST, NULL, 0, buf, sizeof(buf), 20000, &got, &code, &e);
	if (r != -EREMOTEIO || code != -EINVAL || got != 0)
		LT_FAIL("an answer past its buffer: %d code %d len %u", r, code, got);
	printf("answer buffer misused: refused, the caller got code %d\n", code);
}

/* An async call's deadline: its callback says -ETIMEDOUT, not before the deadline. */
static int deadline_status = 1;
static int64_t deadline_at;

static void deadline_cb(void *arg, int status, uint32_t len, int32_t code, const struct rk_error *e)
{
	(void)arg;
	(void)len;
	(void)code;
	(void)e;
	deadline_status = status;
	deadline_at = lt_now_ms();
}

static void async_deadline(struct rk_rpc_client *cl)
{
	struct rk_rpc_call_args a = {.method = M_NEVER, .timeout_ms = 300};
	int64_t t0 = lt_now_ms();
	struct rk_error e;

	LT_CHECK(rk_rpc_call_async(cl, &a, deadline_cb, NULL, &e), &e);
	while (deadline_status == 1 && lt_now_ms() - t0 < 15000) {
		int r = rk_rpc_client_progress(cl, 1000, &e);

		if (r < 0 && r != -ETIMEDOUT)
			LT_FAIL("progress: %s", rk_error_str(&e));
	}
	if (deadline_status != -ETIMEDOUT || deadline_at - t0 < 250 || deadline_at - t0 > 10000)
		LT_FAIL("async deadline: %d after %lld ms", deadline_status,
			(long long)(deadline_at - t0));
	printf("async deadline: -ETIMEDOUT after %lld ms\n", (long long)(deadline_at - t0));
}

/* The NEVER requests answer late: dropped by the client, their slots free again. */
static void late_answer(struct rk_rpc_client *cl)
{
	struct rk_error e;

	/* The async call's request may reach the handler after its deadline. */
	for (int64_t t0 = lt_now_ms();
	     __atomic_load_n(&never_n, __ATOMIC_ACQUIRE) < 2 && lt_now_ms() - t0 < 10000;)
		usleep(10000);
	if (__atomic_load_n(&never_n, __ATOMIC_ACQUIRE) != 2)
		LT_FAIL("%u requests held by the never handler, not 2", never_n);
	/* From this thread: queued for the progress thread. */
	while (never_n)
		LT_CHECK(rk_rpc_reply(never[--never_n], 0, "late", 4), NULL);
	/*
	 * A call at once: the late answers come before or during it (busy, no
	 * call in flight, rk_rpc_call's lean path), and must end no call.
	 */
	echo(cl, 64, 0);
	for (int i = 0; i < 20; i++)
		rk_rpc_client_progress(cl, 50, &e);
	if (!rk_rpc_client_alive(cl, &e))
		LT_FAIL("a late answer killed the client: %s", rk_error_str(&e));
	echo(cl, 64, 0);
	printf("late answer dropped, client fine\n");
}

/*
 * rk_rpc_client_fd after a progress that waited: a request too long to go
 * inline completes its SEND on its own, before its answer. A progress with
 * a timeout that wakes for that completion alone returns 0 (no call
 * completed); the caller then sleeps on the fd, which must fire for the
 * answer, so the CQ must be armed again before the return. Event and
 * adaptive clients, 20 calls each: the completion comes before or during
 * the wait as it happens, and either way the answer must wake the fd.
 */
static int fd_done;

static void fd_cb(void *arg, int status, uint32_t len, int32_t code, const struct rk_error *e)
{
	(void)arg;
	(void)code;
	if (status || len != 4)
		LT_FAIL("the held call: %d, %u bytes: %s", status, len, rk_error_str(e));
	fd_done = 1;
}

/*
 * Answer the held call once its request reached the handler, then wait
 * up to 5 s for @p (the client's fd) to become readable: poll(2)'s result.
 */
static int reply_held_then_poll(struct pollfd *p)
{
	for (int64_t t0 = lt_now_ms(); !__atomic_load_n(&held_req, __ATOMIC_ACQUIRE); usleep(1000))
		if (lt_now_ms() - t0 > 10000)
			LT_FAIL("the held call never reached its handler");
	rk_rpc_reply(__atomic_exchange_n(&held_req, NULL, __ATOMIC_ACQ_REL), 0, "held", 4);
	return poll(p, 1, 5000);
}

static void fd_after_wake(struct rk_device *dev, const char *addr, const char *port)
{
	static const enum rk_wait_mode modes[] = {RK_WAIT_EVENT, RK_WAIT_ADAPTIVE};
	static char req[1000], resp[64];
	struct rk_rpc_call_args a = {.method = M_HOLD,
				     .req = req,
				     .req_len = sizeof(req),
				     .resp = resp,
				     .resp_cap = sizeof(resp),
				     .timeout_ms = 20000};

	for (unsigned m = 0; m < 2; m++) {
		struct rk_rpc_client_opts co = {
		    .host = addr, .port = port, .timeout_ms = CONNECT_MS, .mode = modes[m]};
		struct rk_rpc_client *cl;
		struct rk_error e;
		struct pollfd p;
		int r;

		LT_CHECK(rk_rpc_client_connect(dev, &co, &e, &cl), &e);
		p = (struct pollfd){.fd = rk_rpc_client_fd(cl), .events = POLLIN};
		for (int i = 0; i < 20; i++) {
			fd_done = 0;
			LT_CHECK(rk_rpc_call_async(cl, &a, fd_cb, NULL, &e), &e);
			/*
			 * One progress that sleeps until the SEND's completion
			 * (or finds it there): no call completed.
			 */
			if (rk_rpc_client_progress(cl, 1000, &e) != 0)
				LT_FAIL("a held call completed");
			r = reply_held_then_poll(&p);
			if (r != 1)
				LT_FAIL("%s client, call %d: the answer never made the fd readable",
					m ? "adaptive" : "event", i);
			for (int64_t t0 = lt_now_ms(); !fd_done; usleep(1000)) {
				if (rk_rpc_client_progress(cl, 0, &e) < 0 ||
				    lt_now_ms() - t0 > 10000)
					LT_FAIL("the held call's answer was never handled");
			}
		}
		/*
		 * A synchronous call may end with the CQ not armed (its wake-up
		 * read the event): an async call after it, its request inline
		 * (no SEND completion to wake anyone), then straight to the fd
		 * with no progress between. The answer must make it readable.
		 */
		for (int i = 0; i < 5; i++) {
			struct rk_rpc_call_args small = a;
			char out[64];

			small.req_len = 8;
			if (call_simple(cl, M_ECHO, "x", 1, out, sizeof(out), 20000, NULL, NULL,
					&e))
				LT_FAIL("the synchronous call: %s", rk_error_str(&e));
			fd_done = 0;
			LT_CHECK(rk_rpc_call_async(cl, &small, fd_cb, NULL, &e), &e);
			r = reply_held_then_poll(&p);
			if (r != 1)
				LT_FAIL(
				    "%s client, after a synchronous call (%d): the answer never "
				    "made the fd readable",
				    m ? "adaptive" : "event", i);
			for (int64_t t0 = lt_now_ms(); !fd_done; usleep(1000)) {
				if (rk_rpc_client_progress(cl, 0, &e) < 0 ||
				    lt_now_ms() - t0 > 10000)
					LT_FAIL("the held call's answer was never handled");
			}
		}
		rk_rpc_client_destroy(cl);
	}
	printf("rk_rpc_client_fd after a progress woken by a SEND alone, and after a synchronous "
	       "call: the answer wakes it (event and adaptive, 20 and 5 calls each)\n");
}

/* ---- hostile clients -------------------------------------------------------- */

/*
 * The server's log: each connection it drops is one warning with the
 * reason. Kept so the hostile cases can check why, not only that.
 */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_drop[512];
static unsigned drops_logged;

static void log_sink(enum rk_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level >= RK_LOG_WARN && strstr(msg, "rpc server: connection from") &&
	    strstr(msg, "dropped")) {
		pthread_mutex_lock(&log_lock);
		snprintf(last_drop, sizeof(last_drop), "%s", msg);
		drops_logged++;
		pthread_mutex_unlock(&log_lock);
	}
	fprintf(stderr, "%s\n", msg);
}

struct raw {
	struct rk_conn *conn;
	struct rk_mr *mr; /* [0, 4096): what we send; [4096, 8192): our answer slot */
};

enum raw_kind {
	RAW_SEND,	/* the message as a SEND */
	RAW_WRITE_IMM0, /* a zero-length WRITE WITH IMMEDIATE: no key to check, it lands */
	RAW_SEND_TWICE, /* the message twice, back to back */
};

static void raw_connect(struct rk_device *dev, const char *addr, const char *port, struct raw *r)
{
	struct rk_hello hello = {.app_id = RK_RPC_APP_ID, .app_arg = 4};
	struct rk_cm_connect_opts co = {.host = addr,
					.port = port,
					.timeout_ms = CONNECT_MS,
					.hello = &hello,
					.conn = {.wait_mode = wait_mode}};
	struct rk_error e;

	LT_CHECK(rk_cm_connect(dev, &co, &e, &r->conn), &e);
	LT_CHECK(rk_mr_alloc(dev, 8192, RK_ACCESS_REMOTE_WRITE, &e, &r->mr), &e);
}

/* A well-formed request header of ours for @method on @slot. */
static void raw_req(const struct raw *r, uint16_t method, uint16_t slot, uint32_t req_len,
		    uint8_t *out)
{
	struct rk_rpc_req_hdr h = {.version = RK_RPC_WIRE_VERSION,
				   .method = method,
				   .slot = slot,
				   .gen = 7,
				   .req_len = req_len,
				   .resp_cap = 16,
				   .slot_addr = (uint64_t)(uintptr_t)rk_mr_addr(r->mr) + 4096,
				   .slot_rkey = rk_mr_rkey(r->mr)};

	rk__rpc_req_encode(&h, out);
}

static void raw_send(struct raw *r, const void *msg, uint32_t len, enum raw_kind kind)
{
	struct rk_wr wr = {.op = kind == RAW_WRITE_IMM0 ? RK_OP_WRITE_IMM : RK_OP_SEND,
			   .flags = RK_WR_SIGNALED,
			   .addr = rk_mr_addr(r->mr),
			   .lkey = rk_mr_lkey(r->mr),
			   .len = kind == RAW_WRITE_IMM0 ? 0 : len};
	struct rk_error e;

	memcpy(rk_mr_addr(r->mr), msg, len);
	if (kind == RAW_WRITE_IMM0) { /* an address and key the server never gave */
		wr.remote_addr = 0x10000;
		wr.rkey = 0x1234;
	}
	LT_CHECK(rk_post(r->conn, &wr, &e), &e);
	if (kind == RAW_SEND_TWICE)
		LT_CHECK(rk_post(r->conn, &wr, &e), &e);
}

/*
 * A raw client is served like any other: one well-formed call, answered
 * into its slot (WRITE WITH IMMEDIATE, our slot and generation), and the
 * connection kept. So a drop that follows is the attack's doing.
 */
static void raw_served(struct raw *r)
{
	uint8_t msg[RK_RPC_REQ_HDR];
	struct rk_rpc_ans_hdr ah;
	struct ibv_wc wc;
	struct rk_error e;
	const char *why = NULL;
	int64_t t0 = lt_now_ms();
	int n;

	LT_CHECK(rk_post_recv(r->conn, (uint8_t *)rk_mr_addr(r->mr) + 4096, 0, rk_mr_lkey(r->mr),
			      99, &e),
		 &e);
	raw_req(r, M_ECHO, 0, 0, msg);
	raw_send(r, msg, sizeof(msg), RAW_SEND);
	/* The SEND's completion and the answer's come in either order. */
	do {
		n = rk_cq_wait(rk_conn_cq(r->conn), &wc, 1, 1000, &e);
		if (n == 1 && wc.wr_id == 99)
			break;
	} while (lt_now_ms() - t0 < 20000);
	if (n != 1 || wc.wr_id != 99 || wc.status != IBV_WC_SUCCESS ||
	    wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || ntohl(wc.imm_data) != rk__rpc_imm(0, 7))
		LT_FAIL("a raw client's well-formed call was not answered into its slot (%d)", n);
	if (rk__rpc_ans_decode((const uint8_t *)rk_mr_addr(r->mr) + 4096, wc.byte_len, 16, 16, 0,
			       &ah, &why) ||
	    ah.status != RK_RPC_OK || ah.len != 0)
		LT_FAIL("a raw client's answer: %s, status %u", why ? why : "ok", ah.status);
}

/* Serve a raw client once, then send @msg (@kind); it must be dropped, for @want. */
static void raw_attack(struct rk_device *dev, const char *addr, const char *port, const char *what,
		       const char *want, const void *msg, uint32_t len, enum raw_kind kind)
{
	struct rk_rpc_server_stats before, after;
	unsigned logged;
	char why[512];
	struct raw r;
	int64_t t0;

	raw_connect(dev, addr, port, &r);
	raw_served(&r);
	rk_rpc_server_get_stats(srv, &before);
	pthread_mutex_lock(&log_lock);
	logged = drops_logged;
	pthread_mutex_unlock(&log_lock);
	raw_send(&r, msg, len, kind);
	t0 = lt_now_ms();
	do {
		usleep(20000);
		rk_rpc_server_get_stats(srv, &after);
	} while (after.conns_dropped == before.conns_dropped && lt_now_ms() - t0 < 10000);
	if (after.conns_dropped != before.conns_dropped + 1)
		LT_FAIL("hostile client (%s) not dropped", what);
	pthread_mutex_lock(&log_lock);
	snprintf(why, sizeof(why), "%s", drops_logged == logged + 1 ? last_drop : "");
	pthread_mutex_unlock(&log_lock);
	if (!strstr(why, want))
		LT_FAIL("hostile client (%s) dropped for another reason: '%s', want '%s'", what,
			why, want);
	printf("hostile client (%s): dropped, logged \"%s\"\n", what, want);
	rk_conn_destroy(r.conn);
	rk_mr_dereg(r.mr);
}

/*
 * @quick (under valgrind, where each raw client costs seconds): only the
 * busy slot, whose held call outlives its connection.
 */
static unsigned hostile(struct rk_device *dev, const char *addr, const char *port,
			struct rk_rpc_client *good, int quick)
{
	struct rk_rpc_req_hdr h = {.method = M_ECHO, .resp_cap = 16, .req_len = 0};
	uint8_t msg[RK_RPC_REQ_HDR + 16];

	if (!quick) {
		h.slot = 9; /* the window granted is 4 */
		rk__rpc_req_encode(&h, msg);
		raw_attack(dev, addr, port, "a slot beyond the window", "a slot beyond the window",
			   msg, RK_RPC_REQ_HDR, RAW_SEND);
		h.slot = 0;
		h.req_len = 1 << 20; /* inline, beyond req_inline */
		rk__rpc_req_encode(&h, msg);
		raw_attack(dev, addr, port, "a length beyond its buffer", "beyond req_inline", msg,
			   RK_RPC_REQ_HDR, RAW_SEND);
		h.req_len = 16; /* says 16, brings 0 */
		rk__rpc_req_encode(&h, msg);
		raw_attack(dev, addr, port, "a length that is not what came", "not what came", msg,
			   RK_RPC_REQ_HDR, RAW_SEND);
		raw_attack(dev, addr, port, "a write where a SEND belongs", "where a SEND belongs",
			   msg, 0, RAW_WRITE_IMM0);
		memset(msg, 0xa5, sizeof(msg));
		raw_attack(dev, addr, port, "garbage", "another wire version", msg, sizeof(msg),
			   RAW_SEND);
	}
	/*
	 * Slot 1 twice: the first call is held by the deferring handler (it
	 * answers after 500 ms, to a connection gone by then), the second
	 * claims a slot that is busy.
	 */
	h.method = M_DEFER;
	h.slot = 1;
	h.req_len = 4;
	rk__rpc_req_encode(&h, msg);
	msg[RK_RPC_REQ_HDR] = 500 >> 8;
	msg[RK_RPC_REQ_HDR + 1] = 500 & 0xff;
	msg[RK_RPC_REQ_HDR + 2] = msg[RK_RPC_REQ_HDR + 3] = 0;
	raw_attack(dev, addr, port, "a busy slot", "which is still busy", msg, RK_RPC_REQ_HDR + 4,
		   RAW_SEND_TWICE);
	usleep(700000); /* the deferred answer to the dropped connection: nothing breaks */
	/* The good client never noticed. */
	echo(good, 4096, 0);
	many_async(good);
	return quick ? 1 : 6;
}

/* ---- a hostile server ------------------------------------------------------ */

/*
 * A server that speaks the RPC's accept and then answers a client's first
 * call with a forged immediate: case 0 the call's slot with another
 * generation, case 1 a slot beyond the window. The answer's bytes are a
 * well-formed OK: only the immediate lies. Case 2 lies about where the
 * data is: a direct call (its answer buffer larger than a slot) gets a
 * slot header that says "in the slot" with a length beyond the slot, and
 * the immediate's write of as many bytes into the call's own buffer, so
 * that the completion's length matches the header. Believed, the client
 * would copy from past the end of the slot. Case 3 answers a common call
 * (a busy client's lean path) with more bytes in the slot than the call
 * accepts, the completion's length matching. Case 4 answers a direct call
 * as it should, then the common call that follows in the same slot with
 * "the data is elsewhere": a common call gave no place but the slot, so
 * the answer is a lie (believed, the call would end with bytes it never
 * got).
 */
#define FORGED_CASES	 5
#define FORGED_BIG_RESP	 8192 /* case 2's answer buffer: more than a 4096-byte slot holds */
#define FORGED_SLOT_LIAR 5000 /* the length case 2's header claims is in the slot */

struct forger {
	struct rk_device *dev;
	struct rk_listener *lis;
	int ncases;
};

/* The request's receive, posted before the accept: a SEND must never find none. */
static int forge_prepare(struct rk_conn *conn, void *arg)
{
	struct rk_mr *mr = arg;

	return rk_post_recv(conn, rk_mr_addr(mr), 4096, rk_mr_lkey(mr), 1, NULL);
}

/*
 * An answer to request @h by WRITE WITH IMMEDIATE @imm into its slot:
 * header @ah, and its data (whatever the buffer holds) when it says "in
 * the slot".
 */
static void forge_answer(struct rk_conn *conn, struct rk_mr *mr, const struct rk_rpc_req_hdr *h,
			 const struct rk_rpc_ans_hdr *ah, uint32_t imm)
{
	struct rk_wr wr = {.op = RK_OP_WRITE_IMM,
			   .flags = RK_WR_SIGNALED,
			   .addr = (uint8_t *)rk_mr_addr(mr) + 4096,
			   .lkey = rk_mr_lkey(mr),
			   .len = RK_RPC_ANS_HDR + (ah->in_slot ? ah->len : 0),
			   .remote_addr = h->slot_addr,
			   .rkey = h->slot_rkey,
			   .imm = imm};
	struct rk_error e;

	rk__rpc_ans_encode(ah, (uint8_t *)rk_mr_addr(mr) + 4096);
	LT_CHECK(rk_post(conn, &wr, &e), &e);
}

/* The request receive @wr_id took (within 30 s), decoded into @h. */
static void forge_request(struct rk_conn *conn, struct rk_mr *mr, const struct rk_rpc_limits *lim,
			  uint64_t wr_id, struct rk_rpc_req_hdr *h)
{
	const char *why = NULL;
	struct ibv_wc wc;
	struct rk_error e;
	int64_t t0 = lt_now_ms();
	int n;

	do
		n = rk_cq_wait(rk_conn_cq(conn), &wc, 1, 1000, &e);
	while (!(n == 1 && wc.wr_id == wr_id) && lt_now_ms() - t0 < 30000);
	if (n != 1 || wc.status != IBV_WC_SUCCESS)
		LT_FAIL("the forging server got no request %d (%d)", (int)wr_id, n);
	if (rk__rpc_req_decode(rk_mr_addr(mr), wc.byte_len, lim, h, &why))
		LT_FAIL("the client's request %d: %s", (int)wr_id, why);
}

static void forge_one(struct forger *f, int k)
{
	struct rk_rpc_accept acc = {
	    .window = 4, .req_inline = 256, .slot_size = 4096, .max_msg = 1u << 20};
	struct rk_rpc_limits lim = {
	    .window = 4, .req_inline = 256, .slot_size = 4096, .max_msg = 1u << 20};
	struct rk_rpc_ans_hdr ah = {.status = RK_RPC_OK, .in_slot = 1, .len = 0};
	uint8_t reply[RK_RPC_ACCEPT_LEN];
	struct rk_conn_opts co = {.wait_mode = wait_mode, .prepare = forge_prepare};
	struct rk_cm_request *req;
	struct rk_rpc_req_hdr h;
	struct rk_conn *conn;
	struct rk_mr *mr;
	struct ibv_wc wc;
	struct rk_error e;
	int64_t t0;

	LT_CHECK(rk_mr_alloc(f->dev, 8192, RK_ACCESS_LOCAL, &e, &mr), &e);
	co.prepare_arg = mr;
	LT_CHECK(rk_listener_get_request(f->lis, 30000, &e, &req), &e);
	rk__rpc_accept_encode(&acc, reply);
	LT_CHECK(rk_cm_request_accept(req, &co, reply, sizeof(reply), 10000, &e, &conn), &e);
	forge_request(conn, mr, &lim, 1, &h);
	if (k == 4) {
		if (!(h.flags & RK_RPC_F_DIRECT))
			LT_FAIL("the forging server's case 4 wants a direct call first");
		/* The next request's receive, then the true answer: nothing, in the slot. */
		LT_CHECK(rk_post_recv(conn, rk_mr_addr(mr), 4096, rk_mr_lkey(mr), 2, &e), &e);
		forge_answer(conn, mr, &h, &ah, rk__rpc_imm(h.slot, h.gen));
		forge_request(conn, mr, &lim, 2, &h);
		ah.in_slot = 0;
		ah.len = 5;
		forge_answer(conn, mr, &h, &ah, rk__rpc_imm(h.slot, h.gen));
		goto posted;
	}
	if (k == 2) {
		struct rk_wr hdr = {.op = RK_OP_WRITE,
				    .addr = (uint8_t *)rk_mr_addr(mr) + 4096,
				    .lkey = rk_mr_lkey(mr),
				    .len = RK_RPC_ANS_HDR,
				    .remote_addr = h.slot_addr,
				    .rkey = h.slot_rkey};
		struct rk_wr data = {.op = RK_OP_WRITE_IMM,
				     .flags = RK_WR_SIGNALED,
				     .addr = rk_mr_addr(mr),
				     .lkey = rk_mr_lkey(mr),
				     .len = RK_RPC_ANS_HDR + FORGED_SLOT_LIAR,
				     .remote_addr = h.resp_addr,
				     .rkey = h.resp_rkey,
				     .imm = rk__rpc_imm(h.slot, h.gen)};

		if (!(h.flags & RK_RPC_F_DIRECT))
			LT_FAIL("the forging server's case 2 wants a direct call");
		ah.len = FORGED_SLOT_LIAR;
		rk__rpc_ans_encode(&ah, (uint8_t *)rk_mr_addr(mr) + 4096);
		/* RC keeps the order: the header is in the slot before the immediate. */
		LT_CHECK(rk_post(conn, &hdr, &e), &e);
		LT_CHECK(rk_post(conn, &data, &e), &e);
		goto posted;
	}
	if (k == 3)
		ah.len = h.resp_cap + 1;
	forge_answer(conn, mr, &h, &ah,
		     k == 0   ? rk__rpc_imm(h.slot, (uint16_t)(h.gen + 1))
		     : k == 1 ? rk__rpc_imm(9, h.gen)
			      : rk__rpc_imm(h.slot, h.gen));
posted:
	rk_cq_wait(rk_conn_cq(conn), &wc, 1, 5000, &e);
	/* The client hangs up; its side of the test ends the wait. */
	for (t0 = lt_now_ms();
	     rk_conn_state(conn) == RK_CONN_CONNECTED && lt_now_ms() - t0 < 20000;)
		rk_conn_progress(conn, 100, NULL);
	rk_conn_destroy(conn);
	rk_mr_dereg(mr);
}

static void *forger_main(void *arg)
{
	struct forger *f = arg;

	for (int k = 0; k < f->ncases; k++)
		forge_one(f, k);
	return NULL;
}

static void forged_answers(struct rk_device *dev, const char *addr, int quick)
{
	struct rk_listen_opts lo = {.addr = addr, .port = "7596", .app_id = RK_RPC_APP_ID};
	struct rk_rpc_client_opts co = {
	    .host = addr, .port = "7596", .timeout_ms = CONNECT_MS, .mode = wait_mode};
	static const char *const what[FORGED_CASES] = {
	    "another generation", "a slot beyond the window", "data in the slot beyond the slot",
	    "more data than the call accepts", "data elsewhere for a common call"};
	static uint8_t big[FORGED_BIG_RESP];
	struct forger f = {.dev = dev, .ncases = quick ? 1 : FORGED_CASES};
	struct rk_error e;
	pthread_t th;

	LT_CHECK(rk_listener_create(dev, &lo, &e, &f.lis), &e);
	if (pthread_create(&th, NULL, forger_main, &f))
		LT_FAIL("pthread_create");
	for (int k = 0; k < FORGED_CASES && k < f.ncases; k++) {
		struct rk_rpc_client *cl;
		uint8_t out[16];
		int r;

		LT_CHECK(rk_rpc_client_connect(dev, &co, &e, &cl), &e);
		if (k ==
		    4) { /* a direct call answered as it should, in the slot the next one takes */
			uint32_t got = 1;

			r = call_simple(cl, M_ECHO, "x", 1, big, sizeof(big), 20000, &got, NULL,
					&e);
			if (r || got)
				LT_FAIL("case 4's true answer: %d, %u bytes (%s)", r, got,
					rk_error_str(&e));
		}
		if (k == 2)
			r = call_simple(cl, M_ECHO, "x", 1, big, sizeof(big), 20000, NULL, NULL,
					&e);
		else
			r = call_simple(cl, M_ECHO, "x", 1, out, sizeof(out), 20000, NULL, NULL,
					&e);
		/* The connection is killed: "peer gone" (rpc.h), with the reason. */
		if (r != -ECONNRESET || !strstr(e.msg, "broke the protocol"))
			LT_FAIL("a forged answer (%s): %d (%s)", what[k], r, rk_error_str(&e));
		if (rk_rpc_client_alive(cl, NULL))
			LT_FAIL("the client still says alive after a forged answer (%s)", what[k]);
		printf("forged answer (%s, %s): the call failed, the client gave up: %s\n", what[k],
		       wait_mode == RK_WAIT_EVENT ? "event mode" : "busy", e.msg);
		rk_rpc_client_destroy(cl);
	}
	pthread_join(th, NULL);
	rk_listener_destroy(f.lis);
}

/* ---- the server dies ---------------------------------------------------------- */

static void victim(const char *addr, const char *port, int ready)
{
	struct rk_device *dev = lt_open_device(0);
	pthread_t th;

	lt_role = "victim";
	start_server(dev, addr, port, &th);
	if (write(ready, "r", 1) != 1)
		LT_FAIL("pipe");
	pause(); /* until killed */
}

static unsigned gone_n;
static int64_t gone_at;

static void gone_cb(void *arg, int status, uint32_t len, int32_t code, const struct rk_error *e)
{
	(void)arg;
	(void)len;
	(void)code;
	if (status != -ECONNRESET || !strstr(e->msg, "peer gone"))
		LT_FAIL("a call in flight when the server died: %d (%s)", status, e->msg);
	if (gone_n++ == 0) {
		gone_at = lt_now_ms();
		printf("server killed: %s\n", e->msg);
	}
}

/* A synchronous call in flight on a client of its own, on a thread of its own. */
struct sync_call {
	struct rk_rpc_client *cl;
	int started; /* set just before the call */
	int status;
	struct rk_error e;
	int64_t ended;
};

static void *sync_never(void *arg)
{
	struct sync_call *sc = arg;

	__atomic_store_n(&sc->started, 1, __ATOMIC_RELEASE);
	sc->status = call_simple(sc->cl, M_NEVER, NULL, 0, NULL, 0, 20000, NULL, NULL, &sc->e);
	sc->ended = lt_now_ms();
	return NULL;
}

/*
 * @mode: the synchronous call's client's (event mode: its lean sleep sees
 * the end on the CM channel); the async calls' client is busy.
 */
static void server_killed(const char *addr, const char *port, enum rk_wait_mode mode)
{
	struct rk_rpc_client_opts co = {.host = addr, .port = port, .timeout_ms = CONNECT_MS};
	struct rk_rpc_client *cl;
	struct sync_call sc = {0};
	struct rk_device *dev;
	struct rk_error e;
	pthread_t th;
	int64_t killed;
	int pfd[2];
	char c;
	pid_t pid;

	gone_n = 0;
	if (pipe(pfd))
		LT_FAIL("pipe");
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		victim(addr, port, pfd[1]);
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], &c, 1) != 1)
		LT_FAIL("the victim server did not start");
	dev = lt_open_device(0);
	LT_CHECK(rk_rpc_client_connect(dev, &co, &e, &cl), &e);
	co.mode = mode;
	LT_CHECK(rk_rpc_client_connect(dev, &co, &e, &sc.cl), &e);
	if (pthread_create(&th, NULL, sync_never, &sc))
		LT_FAIL("pthread_create");
	for (int i = 0; i < 8; i++) {
		struct rk_rpc_call_args a = {.method = M_NEVER, .timeout_ms = 20000};

		LT_CHECK(rk_rpc_call_async(cl, &a, gone_cb, NULL, &e), &e);
	}
	/* The synchronous call posts at once: give it time to reach the server. */
	while (!__atomic_load_n(&sc.started, __ATOMIC_ACQUIRE))
		usleep(1000);
	usleep(300000);
	rk_rpc_client_progress(cl, 200, &e);
	killed = lt_now_ms();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	while (gone_n < 8 && lt_now_ms() - killed < 15000)
		rk_rpc_client_progress(cl, 500, &e);
	if (gone_n != 8)
		LT_FAIL("%u of 8 calls failed within 15 s of the kill", gone_n);
	printf("all 8 calls in flight failed %lld ms after the kill (deadline 20000 ms)\n",
	       (long long)(gone_at - killed));
	pthread_join(th, NULL);
	if (sc.status != -ECONNRESET || !strstr(sc.e.msg, "peer gone") || sc.ended - killed > 15000)
		LT_FAIL("a synchronous call in flight when the server died: %d (%s) after %lld ms",
			sc.status, sc.e.msg, (long long)(sc.ended - killed));
	printf("a synchronous call in flight (%s) failed %lld ms after the kill: %s\n",
	       mode == RK_WAIT_EVENT ? "event mode" : "busy", (long long)(sc.ended - killed),
	       sc.e.msg);
	rk_rpc_client_destroy(sc.cl);
	if (rk_rpc_client_alive(cl, NULL))
		LT_FAIL("the client still says alive");
	if (call_simple(cl, M_ECHO, NULL, 0, NULL, 0, 1000, NULL, NULL, &e) != -ENOTCONN)
		LT_FAIL("a call on a dead client is not -ENOTCONN");
	rk_rpc_client_destroy(cl);
	rk_device_close(dev);
}

/* ---- limits, tokens, misuse ------------------------------------------------ */

static struct rk_rpc_server *srv2;
static volatile int stop2, woken2;

static void *server2_loop(void *arg)
{
	struct rk_error e;

	(void)arg;
	while (!stop2) {
		int r = rk_rpc_server_progress(srv2, 50, &e);

		if (r == -EINTR)
			woken2++;
		else if (r < 0 && r != -ETIMEDOUT)
			LT_FAIL("server 2 progress: %s", rk_error_str(&e));
	}
	return NULL;
}

static unsigned chain_n;

/* A callback that starts the next call, and may not wait inside. */
static void chain_cb(void *arg, int status, uint32_t len, int32_t code, const struct rk_error *e)
{
	struct rk_rpc_client *cl = arg;
	struct rk_rpc_call_args a = {.method = M_ECHO, .timeout_ms = 5000};
	struct rk_error e2;

	(void)len;
	(void)code;
	if (status)
		LT_FAIL("chained call %u: %s", chain_n, e->msg);
	if (rk_rpc_client_progress(cl, 0, &e2) != -EBUSY)
		LT_FAIL("progress from a callback is not -EBUSY");
	if (++chain_n < 10)
		LT_CHECK(rk_rpc_call_async(cl, &a, chain_cb, cl, &e2), &e2);
}

/*
 * A second server with every limit small: a token, one connection, a
 * window of 4, 64 KiB of rendezvous memory, max_msg 1 MiB.
 */
static void limits(struct rk_device *dev, const char *addr)
{
	static const char token[] = "sesame";
	struct rk_rpc_server_opts so = {.addr = addr,
					.port = "7595",
					.window = 4,
					.max_conns = 1,
					.max_rdv_bytes = 64 << 10,
					.max_rdv_per_conn = 32 << 10,
					.max_msg = 1 << 20,
					.token = token,
					.token_len = sizeof(token) - 1,
					.mode = wait_mode};
	struct rk_rpc_client_opts co = {.host = addr,
					.port = "7595",
					.window = 64,
					.timeout_ms = CONNECT_MS,
					.mode = wait_mode};
	struct rk_rpc_client *cl, *cl2;
	struct rk_mr *foreign;
	static uint8_t big[2 << 20];
	uint8_t out[16];
	struct rk_error e;
	pthread_t th;
	int r;

	LT_CHECK(rk_rpc_server_create(dev, &so, &e, &srv2), &e);
	LT_CHECK(rk_rpc_server_add(srv2, M_ECHO, h_echo, NULL), NULL);
	if (pthread_create(&th, NULL, server2_loop, NULL))
		LT_FAIL("pthread_create");

	/* A shared CQ: the client would take another connection's completions for its own. */
	{
		struct rk_cq_opts qo = {.mode = wait_mode};
		struct rk_conn_opts shared = {0};
		struct rk_cq *cq;

		LT_CHECK(rk_cq_create(dev, &qo, &e, &cq), &e);
		shared.cq = cq;
		co.conn = &shared;
		r = rk_rpc_client_connect(dev, &co, &e, &cl);
		if (r != -EINVAL)
			LT_FAIL("a shared CQ: %d (%s), not -EINVAL", r, rk_error_str(&e));
		printf("a shared CQ: %s\n", rk_error_str(&e));
		co.conn = NULL;
		rk_cq_destroy(cq);
	}

	r = rk_rpc_client_connect(dev, &co, &e, &cl);
	if (r != -ECONNREFUSED)
		LT_FAIL("no token: %d (%s)", r, rk_error_str(&e));
	printf("no token: %s\n", rk_error_str(&e));
	co.token = token;
	co.token_len = sizeof(token) - 1;
	LT_CHECK(rk_rpc_client_connect(dev, &co, &e, &cl), &e);
	if (rk_rpc_client_window(cl) != 4)
		LT_FAIL("window: asked 64, the server allows 4, granted %u",
			rk_rpc_client_window(cl));
	r = rk_rpc_client_connect(dev, &co, &e, &cl2);
	if (r != -ECONNREFUSED)
		LT_FAIL("a second connection past max_conns 1: %d", r);
	printf("past max_conns: %s\n", rk_error_str(&e));

	r = call_simple(cl, M_ECHO, big, 128 << 10, out, sizeof(out), 20000, NULL, NULL, &e);
	if (r != -ENOBUFS)
		LT_FAIL("a 128 KiB body past 64 KiB of rendezvous memory: %d (%s)", r,
			rk_error_str(&e));
	printf("rendezvous memory exhausted: %s\n", rk_error_str(&e));
	r = call_simple(cl, M_ECHO, big, 2 << 20, out, sizeof(out), 20000, NULL, NULL, &e);
	if (r != -EMSGSIZE)
		LT_FAIL("a 2 MiB body past max_msg 1 MiB: %d", r);
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_REMOTE_WRITE, &e, &foreign), &e);
	{
		struct rk_rpc_call_args a = {.method = M_ECHO,
					     .resp = rk_mr_addr(foreign),
					     .resp_cap = 4096,
					     .resp_mr = foreign};

		if (rk_rpc_call(cl, &a, NULL, NULL, &e) != -EINVAL)
			LT_FAIL("resp_mr in another PD accepted");
		printf("resp_mr in another PD: %s\n", rk_error_str(&e));
	}
	rk_mr_dereg(foreign);

	/* Four calls fill the window; a fifth synchronous call waits for room, then runs. */
	chain_n = 0;
	{
		struct rk_rpc_call_args a = {.method = M_ECHO, .timeout_ms = 20000};

		LT_CHECK(rk_rpc_call_async(cl, &a, chain_cb, cl, &e), &e);
		while (chain_n < 10)
			LT_CHECK(rk_rpc_client_progress(cl, 1000, &e), &e);
	}
	printf("10 calls chained from callbacks: ok\n");

	rk_rpc_server_wake(srv2);
	for (int i = 0; i < 500 && !woken2; i++) /* 5 s: a stalled guest may delay it */
		usleep(10000);
	if (!woken2)
		LT_FAIL("rk_rpc_server_wake did not make progress return -EINTR");
	rk_rpc_client_destroy(cl);
	stop2 = 1;
	pthread_join(th, NULL);
	rk_rpc_server_destroy(srv2);
	printf("limits: ok\n");
}

/*
 * Answers at the inline edge. The server's answers whose header and data
 * fit its connection's inline size go from a WR the connection keeps, the
 * rest from a send buffer: a server whose connections ask 256 bytes inline
 * (244 bytes of data inline, 245 not) and the main one (128 asked: 116 and
 * 117 when the provider grants what is asked) echo every size around both
 * edges, each byte checked. Then calls of 65..264 bytes with INFLIGHT in
 * flight on the 256-byte server, every third answered by the worker thread
 * (queued, posted by the progress thread between its own answers), each
 * answer matched to its call.
 */
#define EDGE_CALLS 2000u
#define EDGE_MAX   264u

struct edge_call {
	uint32_t id, len;
	int done;
	uint8_t req[EDGE_MAX], resp[EDGE_MAX];
};

static unsigned edge_done;

static void edge_cb(void *arg, int status, uint32_t len, int32_t code, const struct rk_error *e)
{
	struct edge_call *c = arg;

	if (status || code || len != c->len)
		LT_FAIL("call %u of %u bytes at the inline edge: %d, code %d, %u bytes: %s", c->id,
			c->len, status, code, len, rk_error_str(e));
	if (lt_check(c->resp, len, c->id) >= 0)
		LT_FAIL("call %u of %u bytes at the inline edge: byte %ld is not its own", c->id,
			len, lt_check(c->resp, len, c->id));
	c->done = 1;
	edge_done++;
}

static void inline_edges(struct rk_device *dev, const char *addr, struct rk_rpc_client *main_cl,
			 int quick)
{
	static const uint32_t edges[] = {0, 1, 115, 116, 117, 243, 244, 245, 246, 255, 256, 257};
	static struct edge_call calls[EDGE_CALLS];
	const struct rk_conn_opts copts = {.max_inline = 256};
	struct rk_rpc_server_opts so = {
	    .addr = addr, .port = "7596", .window = INFLIGHT, .conn = &copts, .mode = wait_mode};
	struct rk_rpc_client_opts co = {
	    .host = addr, .port = "7596", .timeout_ms = CONNECT_MS, .mode = wait_mode};
	unsigned n = quick ? 200 : EDGE_CALLS, next = 0;
	struct rk_rpc_client *cl;
	struct rk_error e;
	pthread_t th;
	int64_t t0 = lt_now_ms();

	for (unsigned i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		echo(main_cl, edges[i], 0);

	stop2 = 0;
	LT_CHECK(rk_rpc_server_create(dev, &so, &e, &srv2), &e);
	LT_CHECK(rk_rpc_server_add(srv2, M_ECHO, h_echo, NULL), NULL);
	LT_CHECK(rk_rpc_server_add(srv2, M_DEFER, h_defer, NULL), NULL);
	if (pthread_create(&th, NULL, server2_loop, NULL))
		LT_FAIL("pthread_create");
	LT_CHECK(rk_rpc_client_connect(dev, &co, &e, &cl), &e);
	for (unsigned i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		echo(cl, edges[i], 0);

	edge_done = 0;
	while (edge_done < n) {
		while (next < n && rk_rpc_client_inflight(cl) < INFLIGHT) {
			struct edge_call *c = &calls[next];
			/* 65..264: past the deferred handler's delay (<= 64 bytes) */
			struct rk_rpc_call_args a = {.method = next % 3 ? M_ECHO : M_DEFER,
						     .req = c->req,
						     .resp = c->resp,
						     .timeout_ms = 30000};
			int r;

			c->id = next;
			c->len = 65 + (next * 37) % (EDGE_MAX - 64);
			c->done = 0;
			lt_fill(c->req, c->len, c->id);
			memset(c->resp, 0xee, sizeof(c->resp));
			a.req_len = a.resp_cap = c->len;
			r = rk_rpc_call_async(cl, &a, edge_cb, c, &e);
			if (r == -EAGAIN)
				break;
			LT_CHECK(r, &e);
			next++;
		}
		LT_CHECK(rk_rpc_client_progress(cl, 1000, &e), &e);
	}
	for (unsigned i = 0; i < n; i++)
		if (!calls[i].done)
			LT_FAIL("call %u at the inline edge never completed", i);
	rk_rpc_client_destroy(cl);
	stop2 = 1;
	pthread_join(th, NULL);
	rk_rpc_server_destroy(srv2);
	srv2 = NULL;
	stop2 = 0;
	printf("inline edge: %u calls of 65..%u bytes, a third answered from the worker: all "
	       "matched (%lld ms)\n",
	       n, EDGE_MAX, (long long)(lt_now_ms() - t0));
}

static unsigned flight_n;

static void flight_cb(void *arg, int status, uint32_t len, int32_t code, const struct rk_error *e)
{
	(void)arg;
	(void)len;
	(void)code;
	if (status != -ECONNRESET)
		LT_FAIL("a call in flight at destroy: %d (%s)", status, e->msg);
	flight_n++;
}

/*
 * Teardown with calls in flight: the client is destroyed with 4 calls the
 * server holds (each callback runs with -ECONNRESET), and the server later
 * with those requests still unanswered: everything is released.
 */
static void teardown_in_flight(struct rk_device *dev, const struct rk_rpc_client_opts *co)
{
	struct rk_rpc_client *cl;
	struct rk_error e;

	LT_CHECK(rk_rpc_client_connect(dev, co, &e, &cl), &e);
	for (int i = 0; i < 4; i++) {
		struct rk_rpc_call_args a = {.method = M_NEVER, .timeout_ms = 20000};

		LT_CHECK(rk_rpc_call_async(cl, &a, flight_cb, NULL, &e), &e);
	}
	while (never_n < 4)
		rk_rpc_client_progress(cl, 50, &e);
	rk_rpc_client_destroy(cl);
	if (flight_n != 4)
		LT_FAIL("%u of 4 callbacks ran at destroy", flight_n);
	printf("client destroyed with 4 calls in flight: 4 callbacks, -ECONNRESET\n");
}

int main(int argc, char **argv)
{
	const char *addr = lt_env("RK_ADDR"), *port = "7591";
	struct rk_rpc_client_opts co = {.host = addr, .port = port, .timeout_ms = CONNECT_MS};
	struct rk_rpc_client *cl;
	struct rk_rpc_server_stats st;
	struct rk_device *dev;
	pthread_t th, worker;
	struct rk_error e;
	static const uint32_t sizes[] = {0, 1, 4096, 1u << 20, 64u << 20};
	static const uint32_t zsizes[] = {0, 1, 4096, 1u << 20, 9u << 20};

	int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
	unsigned nhostile;

	lt_prog = "lib_rpc";
	lt_role = "client";
	rk_log_set_handler(log_sink, NULL); /* before any thread: the drops' reasons */
	if (quick) {
		nasync = NQUICK;
		wait_mode = RK_WAIT_EVENT;
		co.mode = RK_WAIT_EVENT;
	} else { /* first: it forks, before this process opens the device */
		server_killed(addr, "7592", RK_WAIT_BUSY);
		server_killed(addr, "7597", RK_WAIT_EVENT);
	}

	dev = lt_open_device(0);
	start_server(dev, addr, port, &th);
	if (pthread_create(&worker, NULL, deferrer, NULL))
		LT_FAIL("pthread_create");
	LT_CHECK(rk_rpc_client_connect(dev, &co, &e, &cl), &e);
	printf("connected: window %u\n", rk_rpc_client_window(cl));
	if (rk_rpc_client_window(cl) < INFLIGHT) /* else "64 in flight" would test fewer */
		LT_FAIL("a window of %u, not at least %u", rk_rpc_client_window(cl), INFLIGHT);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]) - (unsigned)quick; i++)
		echo(cl, sizes[i], 0);
	/* Zero copy: the caller's registrations; 9 MiB crosses the 8 MiB work request. */
	for (unsigned i = 0; i < sizeof(zsizes) / sizeof(zsizes[0]) - (unsigned)quick; i++)
		echo(cl, zsizes[i], 1);
	/* Answers built in the server's buffer (1 MiB: two stages; 9 MiB: two WRITEs). */
	echo_by(cl, M_INPLACE, 1, 0);
	echo_by(cl, M_INPLACE, 1u << 20, 0);
	echo_by(cl, M_INPLACE, quick ? 65536 : 9u << 20, 1);
	echo_by(cl, M_DEFER, 1u << 20, 0);
	many_async(cl);
	errors(cl);
	async_deadline(cl);
	late_answer(cl);
	fd_after_wake(dev, addr, port);
	inline_edges(dev, addr, cl, quick);
	nhostile = hostile(dev, addr, port, cl, quick);
	limits(dev, addr);
	forged_answers(dev, addr, quick);
	if (!quick) { /* the lean call's checks again as it sleeps (quick: event mode already) */
		wait_mode = RK_WAIT_EVENT;
		forged_answers(dev, addr, 0);
		wait_mode = RK_WAIT_BUSY;
	}
	rk_rpc_client_destroy(cl);
	teardown_in_flight(dev, &co);

	stop = 1;
	pthread_mutex_lock(&dq_lock);
	pthread_cond_broadcast(&dq_cond);
	pthread_mutex_unlock(&dq_lock);
	pthread_join(worker, NULL);
	pthread_join(th, NULL);
	rk_rpc_server_get_stats(srv, &st);
	printf("server: %llu accepted, %llu closed, %llu dropped, %llu calls answered, %llu errors "
	       "sent\n",
	       (unsigned long long)st.conns_accepted, (unsigned long long)st.conns_closed,
	       (unsigned long long)st.conns_dropped, (unsigned long long)st.calls,
	       (unsigned long long)st.errors_sent);
	rk_rpc_server_destroy(srv);
	rk_device_close(dev);
	never_n = 0; /* the server freed what its handler held */
	if (st.conns_dropped != nhostile)
		LT_FAIL("%llu connections dropped, not one per hostile client",
			(unsigned long long)st.conns_dropped);
	printf("lib_rpc: all ok\n");
	return 0;
}
