/*
 * test_rpc_pool_book.c - the RPC pool's bookkeeping with a fake clock:
 * idle expiry, max_per_peer (a lease waits, a put wakes it), a dead client
 * replaced by a new connection, the connect backoff (doubles, caps, resets,
 * refuses a deadline inside it), peer string parsing, max_peers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rpc_pool_book.h"

/* Fake clients: only their addresses matter to the book. */
static int clients[8];

static struct rk__pbook_addr addr(const char *s)
{
	struct rk__pbook_addr a;

	assert_int_equal(rk__pbook_parse(s, &a), 0);
	return a;
}

/* Lease @peer at @now and connect it (with &clients[@i]): the entry. */
static struct rk__pbook_entry *connect_one(struct rk__pbook *b, const char *peer, int64_t now,
					   int i)
{
	struct rk__pbook_addr a = addr(peer);
	struct rk__pbook_lease l;

	assert_int_equal(rk__pbook_lease(b, &a, now, -1, &l), RK_PBOOK_CONNECT);
	assert_int_equal(l.e->state, RK_PBOOK_CONNECTING);
	assert_null(l.e->client);
	rk__pbook_connected(b, l.e, &clients[i], now);
	assert_int_equal(l.e->state, RK_PBOOK_LEASED);
	return l.e;
}

static void free_chain(struct rk__pbook_entry *e)
{
	while (e) {
		struct rk__pbook_entry *n = e->next;

		rk__pbook_entry_free(e);
		e = n;
	}
}

static unsigned chain_len(const struct rk__pbook_entry *e)
{
	unsigned n = 0;

	for (; e; e = e->next)
		n++;
	return n;
}

static void parse_good(void **state)
{
	struct rk__pbook_addr a;
	char host[RK_PBOOK_HOST_MAX + 16];

	(void)state;
	assert_int_equal(rk__pbook_parse("localhost:7000", &a), 0);
	assert_string_equal(a.host, "localhost");
	assert_string_equal(a.port, "7000");
	assert_string_equal(a.key, "localhost:7000");
	/* Case and leading zeros do not make another peer; the host is passed on as given. */
	assert_int_equal(rk__pbook_parse("Node-1.Example.COM:00080", &a), 0);
	assert_string_equal(a.host, "Node-1.Example.COM");
	assert_string_equal(a.port, "80");
	assert_string_equal(a.key, "node-1.example.com:80");
	assert_int_equal(rk__pbook_parse("10.0.0.1:65535", &a), 0);
	assert_string_equal(a.key, "10.0.0.1:65535");
	assert_int_equal(rk__pbook_parse("a:1", &a), 0);
	assert_string_equal(a.key, "a:1");
	assert_int_equal(rk__pbook_parse("[::1]:7000", &a), 0);
	assert_string_equal(a.host, "::1");
	assert_string_equal(a.key, "[::1]:7000");
	assert_int_equal(rk__pbook_parse("[::ffff:10.0.0.1]:7", &a), 0);
	assert_string_equal(a.host, "::ffff:10.0.0.1");
	/* The zone (an interface name) keeps its case. */
	assert_int_equal(rk__pbook_parse("[FE80::1%Eth0]:1", &a), 0);
	assert_string_equal(a.host, "FE80::1%Eth0");
	assert_string_equal(a.key, "[fe80::1%Eth0]:1");
	/* The longest host. */
	memset(host, 'h', RK_PBOOK_HOST_MAX);
	strcpy(host + RK_PBOOK_HOST_MAX, ":9");
	assert_int_equal(rk__pbook_parse(host, &a), 0);
	assert_int_equal(strlen(a.host), RK_PBOOK_HOST_MAX);
}

static void parse_bad(void **state)
{
	static const char *const bad[] = {
	    "",		  ":80",	 "host",      "host:",	   "host:0",
	    "host:65536", "host:123456", "host:8a",   "host: 80",  "ho st:80",
	    "host:-1",	  "host:+80",	 "::1:80",    "[::1]80",   "[::1]",
	    "[]:80",	  "[::1]:",	 "[xyz]:80",  "[::1%]:80", "[1.2.3.4]:80",
	    "[::1]:80]",  "h/x:80",	 "host\n:80", "[::1]x:80", "host:80 ",
	    "[[::1]]:80", "a:b:80",	 "host:0x50", "@:80",	   "[::1%e/0]:8",
	};
	struct rk__pbook_addr a;
	char host[RK_PBOOK_HOST_MAX + 16];
	char huge[2 * RK_PBOOK_KEY_MAX];

	(void)state;
	assert_int_equal(rk__pbook_parse(NULL, &a), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (rk__pbook_parse(bad[i], &a) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
	}
	/* One byte over the longest host; a string far longer than any key. */
	memset(host, 'h', RK_PBOOK_HOST_MAX + 1);
	strcpy(host + RK_PBOOK_HOST_MAX + 1, ":9");
	assert_int_equal(rk__pbook_parse(host, &a), -EINVAL);
	memset(huge, '1', sizeof(huge) - 1);
	huge[sizeof(huge) - 1] = '\0';
	huge[0] = 'h';
	huge[1] = ':';
	assert_int_equal(rk__pbook_parse(huge, &a), -EINVAL);
}

static void init_checks(void **state)
{
	struct rk__pbook b;

	(void)state;
	assert_int_equal(rk__pbook_init(&b, 0, 0, 0, 0, 0), 0);
	assert_int_equal(b.max_per_peer, 4);
	assert_int_equal(b.idle_ms, 30000);
	assert_int_equal(b.backoff_min_ms, 100);
	assert_int_equal(b.backoff_max_ms, 5000);
	assert_int_equal(b.max_peers, 1024);
	assert_int_equal(rk__pbook_init(&b, 0, -1, 0, 0, 0), -EINVAL);
	assert_int_equal(rk__pbook_init(&b, 0, 0, 500, 200, 0), -EINVAL);
	/* A default minimum gives way to a smaller maximum. */
	assert_int_equal(rk__pbook_init(&b, 0, 0, 0, 50, 0), 0);
	assert_int_equal(b.backoff_min_ms, 50);
	assert_null(rk__pbook_fini(&b));
}

static void idle_expiry(void **state)
{
	struct rk__pbook b;
	struct rk__pbook_entry *e1, *e2, *gone;
	struct rk__pbook_addr a = addr("h:1");
	struct rk__pbook_lease l;

	(void)state;
	assert_int_equal(rk__pbook_init(&b, 4, 1000, 0, 0, 0), 0);
	e1 = connect_one(&b, "h:1", 0, 0);
	e2 = connect_one(&b, "h:1", 0, 1);
	assert_int_equal(b.st.clients, 2);
	assert_int_equal(b.st.leased, 2);
	assert_null(rk__pbook_put(&b, e1, 1, 100));
	assert_null(rk__pbook_put(&b, e2, 1, 200));
	assert_int_equal(b.st.leased, 0);
	assert_int_equal(b.st.clients, 2);

	/* The most recently used one is leased first, and its clock restarts on return. */
	assert_int_equal(rk__pbook_lease(&b, &a, 300, -1, &l), RK_PBOOK_TAKE);
	assert_ptr_equal(l.e, e2);
	assert_ptr_equal(rk__pbook_find(&b, &clients[1]), e2);
	assert_null(rk__pbook_find(&b, &clients[0])); /* idle, not leased */
	assert_null(rk__pbook_put(&b, e2, 1, 400));
	assert_int_equal(b.st.reuses, 1);

	/* Nothing is due before 1100; then e1 (idle since 100) goes, e2 stays. */
	assert_null(rk__pbook_expire(&b, 1099));
	gone = rk__pbook_expire(&b, 1100);
	assert_ptr_equal(gone, e1);
	assert_int_equal(chain_len(gone), 1);
	assert_ptr_equal(gone->client, &clients[0]);
	assert_null(gone->peer);
	free_chain(gone);
	assert_int_equal(b.st.idle_closed, 1);
	assert_int_equal(b.st.clients, 1);
	assert_int_equal(b.st.peers, 1);
	assert_null(rk__pbook_expire(&b, 1399));
	gone = rk__pbook_expire(&b, 1400);
	assert_ptr_equal(gone, e2);
	free_chain(gone);
	/* A peer with no client and no backoff is forgotten. */
	assert_int_equal(b.st.peers, 0);
	assert_int_equal(b.st.clients, 0);
	assert_int_equal(b.st.idle_closed, 2);

	/* A leased client never expires, however long it is held. */
	e1 = connect_one(&b, "h:1", 2000, 2);
	assert_null(rk__pbook_expire(&b, 100000));
	assert_null(rk__pbook_put(&b, e1, 1, 100000));
	gone = rk__pbook_fini(&b);
	assert_ptr_equal(gone, e1);
	assert_int_equal(chain_len(gone), 1);
	free_chain(gone);
	assert_int_equal(b.st.peers, 0);
}

static void max_per_peer(void **state)
{
	struct rk__pbook b;
	struct rk__pbook_entry *e1, *e2;
	struct rk__pbook_addr a = addr("h:1"), other = addr("other:1");
	struct rk__pbook_lease l;

	(void)state;
	assert_int_equal(rk__pbook_init(&b, 2, 0, 0, 0, 0), 0);
	e1 = connect_one(&b, "h:1", 0, 0);
	/* The second one is still connecting: it counts already. */
	assert_int_equal(rk__pbook_lease(&b, &a, 0, 500, &l), RK_PBOOK_CONNECT);
	e2 = l.e;
	assert_int_equal(rk__pbook_lease(&b, &a, 1, 500, &l), RK_PBOOK_WAIT);
	assert_true(l.until == 500);
	assert_null(l.e);
	rk__pbook_connected(&b, e2, &clients[1], 2);
	/* Third lease: waits (until its deadline, or forever), then times out. */
	assert_int_equal(rk__pbook_lease(&b, &a, 3, 500, &l), RK_PBOOK_WAIT);
	assert_int_equal(rk__pbook_lease(&b, &a, 3, -1, &l), RK_PBOOK_WAIT);
	assert_true(l.until == -1);
	assert_int_equal(rk__pbook_lease(&b, &a, 500, 500, &l), RK_PBOOK_TIMEDOUT);
	/* Another peer is not held up. */
	assert_int_equal(rk__pbook_lease(&b, &other, 3, 500, &l), RK_PBOOK_CONNECT);
	rk__pbook_connected(&b, l.e, &clients[2], 3);
	/* A put wakes the waiter: it gets that client. */
	assert_null(rk__pbook_put(&b, e1, 1, 10));
	assert_int_equal(rk__pbook_lease(&b, &a, 11, 500, &l), RK_PBOOK_TAKE);
	assert_ptr_equal(l.e, e1);
	assert_ptr_equal(l.e->client, &clients[0]);
	/* An idle client is handed out even past the deadline: no wait needed. */
	assert_null(rk__pbook_put(&b, e2, 1, 12));
	assert_int_equal(rk__pbook_lease(&b, &a, 600, 500, &l), RK_PBOOK_TAKE);
	assert_int_equal(b.st.leased, 3);
	assert_int_equal(b.st.clients, 3);
	assert_int_equal(b.st.peers, 2);
	assert_int_equal(b.st.reuses, 2);
	assert_int_equal(b.st.connects, 3);
	free_chain(rk__pbook_fini(&b));
}

static void dead_client_replaced(void **state)
{
	struct rk__pbook b;
	struct rk__pbook_entry *e1, *e2, *dead;
	struct rk__pbook_addr a = addr("h:1");
	struct rk__pbook_lease l;

	(void)state;
	assert_int_equal(rk__pbook_init(&b, 2, 0, 0, 0, 0), 0);
	e1 = connect_one(&b, "h:1", 0, 0);
	e2 = connect_one(&b, "h:1", 0, 1);
	assert_int_equal(rk__pbook_lease(&b, &a, 1, -1, &l), RK_PBOOK_WAIT);
	/* A dead return leaves the book at once, freeing a place for a new connection. */
	assert_ptr_equal(rk__pbook_find(&b, &clients[0]), e1);
	dead = rk__pbook_put(&b, e1, 0, 5);
	assert_ptr_equal(dead, e1);
	assert_ptr_equal(dead->client, &clients[0]);
	assert_null(dead->peer);
	rk__pbook_entry_free(dead);
	assert_null(rk__pbook_find(&b, &clients[0]));
	assert_int_equal(b.st.dead_closed, 1);
	assert_int_equal(b.st.clients, 1);
	assert_int_equal(rk__pbook_lease(&b, &a, 6, -1, &l), RK_PBOOK_CONNECT);
	assert_int_equal(l.e->state, RK_PBOOK_CONNECTING);
	rk__pbook_connected(&b, l.e, &clients[2], 7);
	assert_ptr_equal(rk__pbook_find(&b, &clients[2]), l.e);
	/* A dead client is no connect failure: no backoff. */
	assert_int_equal(b.st.connect_failures, 0);
	assert_int_equal(l.peer->backoff_ms, 0);
	/* Both dead: the peer goes with them. */
	rk__pbook_entry_free(rk__pbook_put(&b, e2, 0, 8));
	rk__pbook_entry_free(rk__pbook_put(&b, l.e, 0, 8));
	assert_int_equal(b.st.peers, 0);
	assert_int_equal(b.st.clients, 0);
	assert_int_equal(b.st.dead_closed, 3);
	assert_null(rk__pbook_fini(&b));
}

/* Lease at @now (no deadline): must be allowed to connect; then fail with @err. */
static void fail_at(struct rk__pbook *b, const struct rk__pbook_addr *a, int64_t now)
{
	struct rk__pbook_lease l;

	assert_int_equal(rk__pbook_lease(b, a, now, -1, &l), RK_PBOOK_CONNECT);
	rk__pbook_connect_failed(b, l.e, -ECONNREFUSED, NULL, now);
}

static void backoff(void **state)
{
	struct rk__pbook b;
	struct rk__pbook_addr a = addr("h:1");
	struct rk__pbook_lease l, l2;
	struct rk__pbook_entry *gone;
	struct rk_error why;
	const struct rk__pbook_peer *p;

	(void)state;
	assert_int_equal(rk__pbook_init(&b, 2, 10000, 100, 350, 0), 0);
	rk_error_clear(&why);
	why.err = ECONNREFUSED;
	strcpy(why.msg, "rdma_connect: refused: busy");
	assert_int_equal(rk__pbook_lease(&b, &a, 0, -1, &l), RK_PBOOK_CONNECT);
	rk__pbook_connect_failed(&b, l.e, -ECONNREFUSED, &why, 0);
	assert_int_equal(b.st.connect_failures, 1);
	assert_int_equal(b.st.peers, 1); /* kept: it remembers its backoff */
	assert_int_equal(b.st.clients, 0);

	/* A deadline inside the backoff fails at once, with the last error. */
	assert_int_equal(rk__pbook_lease(&b, &a, 50, 80, &l), RK_PBOOK_REFUSED);
	assert_int_equal(l.err, -ECONNREFUSED);
	assert_string_equal(l.why->msg, "rdma_connect: refused: busy");
	assert_int_equal(rk__pbook_lease(&b, &a, 50, 99, &l), RK_PBOOK_REFUSED);
	/* A later deadline (or none) waits for the backoff's end. */
	assert_int_equal(rk__pbook_lease(&b, &a, 50, 100, &l), RK_PBOOK_BACKOFF);
	assert_true(l.until == 100);
	assert_int_equal(rk__pbook_lease(&b, &a, 50, -1, &l), RK_PBOOK_BACKOFF);
	assert_true(l.until == 100);

	/* Doubles: 100, 200, then capped at 350. */
	fail_at(&b, &a, 100);
	p = l.peer;
	assert_int_equal(p->backoff_ms, 200);
	assert_true(p->retry_at == 300);
	assert_int_equal(rk__pbook_lease(&b, &a, 299, -1, &l), RK_PBOOK_BACKOFF);
	assert_true(l.until == 300);
	fail_at(&b, &a, 300);
	assert_int_equal(p->backoff_ms, 350);
	assert_true(p->retry_at == 650);
	fail_at(&b, &a, 650);
	assert_int_equal(p->backoff_ms, 350);
	/* Without a message from the caller the book writes one. */
	assert_int_equal(rk__pbook_lease(&b, &a, 700, 800, &l), RK_PBOOK_REFUSED);
	assert_int_equal(l.why->err, ECONNREFUSED);
	assert_non_null(strstr(l.why->msg, "h:1"));
	/* A thread still connecting when the book ends: its entry comes back too. */
	assert_int_equal(rk__pbook_lease(&b, &a, 1000, -1, &l), RK_PBOOK_CONNECT);
	gone = rk__pbook_fini(&b);
	assert_ptr_equal(gone, l.e);
	assert_int_equal(chain_len(gone), 1);
	assert_null(gone->client);
	free_chain(gone);

	/* Two threads connecting at once both fail: the backoff doubles once. */
	assert_int_equal(rk__pbook_init(&b, 2, 10000, 100, 5000, 0), 0);
	fail_at(&b, &a, 0);
	assert_int_equal(rk__pbook_lease(&b, &a, 100, -1, &l), RK_PBOOK_CONNECT);
	assert_int_equal(rk__pbook_lease(&b, &a, 100, -1, &l2), RK_PBOOK_CONNECT);
	p = l.peer;
	rk__pbook_connect_failed(&b, l.e, -ETIMEDOUT, NULL, 110);
	assert_int_equal(p->backoff_ms, 200);
	assert_true(p->retry_at == 310);
	rk__pbook_connect_failed(&b, l2.e, -ETIMEDOUT, NULL, 120);
	assert_int_equal(p->backoff_ms, 200); /* overlapped: not 400 */
	assert_true(p->retry_at == 320);
	assert_int_equal(rk__pbook_lease(&b, &a, 320, 5000, &l), RK_PBOOK_CONNECT);
	rk__pbook_connect_failed(&b, l.e, -ETIMEDOUT, NULL, 330);
	assert_int_equal(p->backoff_ms, 400); /* a new round doubles */

	/* A success resets it: the next failure starts at the minimum again. */
	assert_int_equal(rk__pbook_lease(&b, &a, 730, -1, &l), RK_PBOOK_CONNECT);
	rk__pbook_connected(&b, l.e, &clients[0], 740);
	assert_int_equal(p->backoff_ms, 0);
	assert_int_equal(rk__pbook_lease(&b, &a, 741, -1, &l2), RK_PBOOK_CONNECT);
	rk__pbook_connect_failed(&b, l2.e, -ECONNREFUSED, NULL, 750);
	assert_int_equal(p->backoff_ms, 100);
	assert_true(p->retry_at == 850);
	/* Inside the backoff an idle client is still handed out. */
	assert_null(rk__pbook_put(&b, l.e, 1, 760));
	assert_int_equal(rk__pbook_lease(&b, &a, 770, 780, &l), RK_PBOOK_TAKE);
	assert_ptr_equal(l.e->client, &clients[0]);
	/* And while it is leased, with the other place free, the backoff holds. */
	assert_int_equal(rk__pbook_lease(&b, &a, 770, 780, &l2), RK_PBOOK_REFUSED);
	/* Both places busy: waiting for a put, not for the backoff. */
	assert_int_equal(rk__pbook_lease(&b, &a, 850, -1, &l2), RK_PBOOK_CONNECT);
	assert_int_equal(rk__pbook_lease(&b, &a, 850, 860, &l), RK_PBOOK_WAIT);
	assert_int_equal(b.st.connect_failures, 5);
	free_chain(rk__pbook_fini(&b));
}

/* A failed peer with no client is kept for its backoff, then forgotten. */
static void failed_peer_forgotten(void **state)
{
	struct rk__pbook b;
	struct rk__pbook_addr a = addr("h:1");
	struct rk__pbook_lease l;

	(void)state;
	assert_int_equal(rk__pbook_init(&b, 2, 1000, 100, 5000, 0), 0);
	fail_at(&b, &a, 0);
	fail_at(&b, &a, 100); /* backoff 200, retry at 300, unused since 100 */
	assert_null(rk__pbook_expire(&b, 1099));
	assert_int_equal(b.st.peers, 1);
	assert_null(rk__pbook_expire(&b, 1100));
	assert_int_equal(b.st.peers, 0);
	/* Forgotten, it starts over at the minimum. */
	fail_at(&b, &a, 2000);
	assert_int_equal(rk__pbook_lease(&b, &a, 2050, -1, &l), RK_PBOOK_BACKOFF);
	assert_true(l.until == 2100);
	assert_null(rk__pbook_fini(&b));
}

static void max_peers(void **state)
{
	struct rk__pbook b;
	struct rk__pbook_entry *ea, *eb;
	struct rk__pbook_addr c = addr("c:1"), d = addr("d:1");
	struct rk__pbook_lease l;

	(void)state;
	assert_int_equal(rk__pbook_init(&b, 2, 1000, 100, 5000, 2), 0);
	ea = connect_one(&b, "a:1", 0, 0);
	eb = connect_one(&b, "b:1", 0, 1);
	assert_int_equal(b.st.peers, 2);
	assert_int_equal(rk__pbook_lease(&b, &c, 1, -1, &l), -EMFILE);
	/* An idle client keeps its peer: still full. */
	assert_null(rk__pbook_put(&b, ea, 1, 2));
	assert_int_equal(rk__pbook_lease(&b, &c, 3, -1, &l), -EMFILE);
	/* A new peer past its deadline times out before it takes a place. */
	assert_int_equal(rk__pbook_lease(&b, &c, 3, 3, &l), RK_PBOOK_TIMEDOUT);
	assert_int_equal(b.st.peers, 2);
	/* b's client dies: b is forgotten, c gets the place. */
	rk__pbook_entry_free(rk__pbook_put(&b, eb, 0, 4));
	assert_int_equal(b.st.peers, 1);
	assert_int_equal(rk__pbook_lease(&b, &c, 5, -1, &l), RK_PBOOK_CONNECT);
	rk__pbook_connect_failed(&b, l.e, -EHOSTUNREACH, NULL, 5);
	/* c in backoff, with no client, still holds its place... */
	assert_int_equal(b.st.peers, 2);
	assert_int_equal(rk__pbook_lease(&b, &d, 50, -1, &l), -EMFILE);
	/* ...until its backoff is over: then it makes room for a new peer. */
	assert_int_equal(rk__pbook_lease(&b, &d, 105, -1, &l), RK_PBOOK_CONNECT);
	assert_string_equal(l.peer->addr.key, "d:1");
	assert_int_equal(b.st.peers, 2);
	rk__pbook_connected(&b, l.e, &clients[2], 106);
	free_chain(rk__pbook_fini(&b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(parse_good),   cmocka_unit_test(parse_bad),
	    cmocka_unit_test(init_checks),  cmocka_unit_test(idle_expiry),
	    cmocka_unit_test(max_per_peer), cmocka_unit_test(dead_client_replaced),
	    cmocka_unit_test(backoff),	    cmocka_unit_test(failed_peer_forgotten),
	    cmocka_unit_test(max_peers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
