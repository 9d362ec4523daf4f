/*
 * lib_rpc_pool.c - the RPC connection pool on a real device.
 *
 * A server in this process; a pool with at most 2 connections per peer
 * and a 1 s idle timeout. The first call to the peer and the median of
 * later calls are printed side by side (what connecting costs). 4 threads
 * then make 300 calls each through the pool, every answer checked: never
 * more than 2 connections or leases (looked at after every call), threads
 * wait for a free one (one that sat idle past its timeout meanwhile, on a
 * slow machine, is closed, and replaced if a thread needs it). Idle connections
 * are closed after their timeout and the next call makes a new one
 * transparently. The server is restarted while the pool holds idle
 * clients: the next call gets a new connection, not a dead one. A peer
 * where nobody listens fails at once, and again within its backoff.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lt.h"

#define NTHREADS 4
#define NCALLS	 300

static struct rk_rpc_server *srv;
static struct rk_rpc_pool *pool;
static volatile int stop;
static char peer[96];

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void h_echo(struct rk_rpc_req *req, void *arg)
{
	uint32_t len;
	const void *d = rk_rpc_req_data(req, &len);

	(void)arg;
	rk_rpc_reply(req, 0, d, len);
}

static void *server_loop(void *arg)
{
	struct rk_error e;

	(void)arg;
	while (!stop) {
		int r = rk_rpc_server_progress(srv, 50, &e);

		if (r < 0 && r != -ETIMEDOUT && r != -EINTR)
			LT_FAIL("server progress: %s", rk_error_str(&e));
	}
	return NULL;
}

static void server_start(struct rk_device *dev, const char *addr, const char *port, pthread_t *th)
{
	struct rk_rpc_server_opts so = {.addr = addr, .port = port};
	struct rk_error e;

	stop = 0;
	LT_CHECK(rk_rpc_server_create(dev, &so, &e, &srv), &e);
	LT_CHECK(rk_rpc_server_add(srv, 1, h_echo, NULL), NULL);
	if (pthread_create(th, NULL, server_loop, NULL))
		LT_FAIL("pthread_create");
}

static void server_stop(pthread_t th)
{
	stop = 1;
	pthread_join(th, NULL);
	rk_rpc_server_destroy(srv);
	srv = NULL;
}

static int64_t call_once(uint32_t tag)
{
	uint32_t out = 0, got = 0;
	struct rk_rpc_call_args a = {.method = 1,
				     .req = &tag,
				     .req_len = 4,
				     .resp = &out,
				     .resp_cap = 4,
				     .timeout_ms = 10000};
	struct rk_error e;
	int64_t t0 = now_us();

	LT_CHECK(rk_rpc_pool_call(pool, peer, &a, &got, NULL, &e), &e);
	if (got != 4 || out != tag)
		LT_FAIL("call %08x answered %08x (%u bytes)", tag, out, got);
	return now_us() - t0;
}

static void *worker(void *arg)
{
	uintptr_t id = (uintptr_t)arg;

	for (uint32_t i = 0; i < NCALLS; i++) {
		struct rk_rpc_pool_stats st;

		call_once((uint32_t)(id << 24 | i));
		rk_rpc_pool_get_stats(pool, &st);
		if (st.clients > 2 || st.leased > 2)
			LT_FAIL("max 2 per peer: %u clients, %u leased", st.clients, st.leased);
	}
	return NULL;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static void stats(const char *when, struct rk_rpc_pool_stats *st)
{
	rk_rpc_pool_get_stats(pool, st);
	printf("%s: %llu connects, %llu reuses, %llu waits, %llu idle closed, %llu dead closed, "
	       "%u clients\n",
	       when, (unsigned long long)st->connects, (unsigned long long)st->reuses,
	       (unsigned long long)st->waits, (unsigned long long)st->idle_closed,
	       (unsigned long long)st->dead_closed, st->clients);
}

int main(void)
{
	const char *addr = lt_env("RK_ADDR");
	struct rk_rpc_pool_opts po = {.max_per_peer = 2, .idle_ms = 1000};
	struct rk_rpc_pool_stats st, st2;
	struct rk_device *dev;
	struct rk_error e;
	pthread_t th, w[NTHREADS];
	int64_t first, later[50];
	char nobody[96];

	lt_prog = "lib_rpc_pool";
	lt_role = "pool";
	snprintf(peer, sizeof(peer), "%s:7593", addr);
	snprintf(nobody, sizeof(nobody), "%s:7594", addr);
	dev = lt_open_device(0);
	server_start(dev, addr, "7593", &th);
	LT_CHECK(rk_rpc_pool_create(dev, &po, &e, &pool), &e);

	/* What a new connection costs, against calls on one kept. */
	first = call_once(0xf00);
	for (int i = 0; i < 50; i++)
		later[i] = call_once(0xa00 + (uint32_t)i);
	qsort(later, 50, sizeof(later[0]), cmp64);
	printf("first call to a new peer: %lld us; median of 50 later calls: %lld us\n",
	       (long long)first, (long long)later[25]);
	stats("after 51 calls", &st);
	if (st.connects != 1 || st.reuses != 50)
		LT_FAIL("51 calls on one thread: %llu connects, %llu reuses",
			(unsigned long long)st.connects, (unsigned long long)st.reuses);

	for (uintptr_t i = 0; i < NTHREADS; i++)
		if (pthread_create(&w[i], NULL, worker, (void *)(i + 1)))
			LT_FAIL("pthread_create");
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(w[i], NULL);
	stats("4 threads x 300 calls", &st);
	/*
	 * Two made at least. A client can sit idle past 1 s, on the last
	 * thread's way out (it keeps one) or while threads wait: it is closed
	 * at the next lease, and replaced only if a thread then needs it.
	 */
	if (st.clients < 1 || st.clients > 2 || st.connects < 2 ||
	    st.connects != st.clients + st.idle_closed + st.dead_closed)
		LT_FAIL("max 2 per peer: %llu connects, %llu closed, %u clients",
			(unsigned long long)st.connects,
			(unsigned long long)(st.idle_closed + st.dead_closed), st.clients);

	/* Idle past the timeout: closed; the next call connects again by itself. */
	usleep(1300000);
	if (rk_rpc_pool_reap(pool) != st.clients)
		LT_FAIL("the %u idle clients were not closed", st.clients);
	call_once(0xb00);
	stats("idle closed, one more call", &st2);
	if (st2.idle_closed != st.idle_closed + st.clients || st2.connects != st.connects + 1 ||
	    st2.clients != 1)
		LT_FAIL("idle replacement: %llu idle closed, %llu connects",
			(unsigned long long)(st2.idle_closed - st.idle_closed),
			(unsigned long long)(st2.connects - st.connects));

	/* The server restarts under an idle client: the next call is not handed a dead one. */
	{
		struct rk_rpc_pool *short_pool = pool;
		struct rk_rpc_pool_opts po2 = {.idle_ms = 60000};

		LT_CHECK(rk_rpc_pool_create(dev, &po2, &e, &pool), &e);
		call_once(0xc00);
		server_stop(th);
		usleep(300000);
		server_start(dev, addr, "7593", &th);
		call_once(0xc01);
		stats("a pool across a server restart", &st2);
		if (st2.connects != 2 || st2.dead_closed != 1)
			LT_FAIL("after the restart: %llu connects, %llu dead closed",
				(unsigned long long)st2.connects,
				(unsigned long long)st2.dead_closed);
		rk_rpc_pool_destroy(pool);
		pool = short_pool;
	}

	/* Nobody there: refused at once; a second try inside the backoff fails fast too. */
	{
		struct rk_rpc_call_args a = {.method = 1, .timeout_ms = 50};
		int64_t t0 = now_us();
		int r = rk_rpc_pool_call(pool, nobody, &a, NULL, NULL, &e);

		if (r != -ECONNREFUSED && r != -EHOSTUNREACH && r != -ETIMEDOUT)
			LT_FAIL("a peer where nobody listens: %d (%s)", r, rk_error_str(&e));
		printf("nobody listening: %s (%lld ms)\n", rk_error_str(&e),
		       (long long)(now_us() - t0) / 1000);
		t0 = now_us();
		r = rk_rpc_pool_call(pool, nobody, &a, NULL, NULL, &e);
		if (r == 0 || now_us() - t0 > 1000000)
			LT_FAIL("inside the backoff: %d after %lld ms", r,
				(long long)(now_us() - t0) / 1000);
		printf("again within the backoff: %s\n", rk_error_str(&e));
	}

	rk_rpc_pool_destroy(pool);
	server_stop(th);
	rk_device_close(dev);
	printf("lib_rpc_pool: all ok\n");
	return 0;
}
