/*
 * lib_wait.c - the wait set on a real device: completions of two CQs and an
 * eventfd in one wait, in busy, event and adaptive mode, data checked; an
 * eventfd seen by a busy wait whose CQs fill the caller's array; the
 * deadline with nothing in flight; a peer's disconnect reported through its
 * CM channel. Usage: lib_wait ADDR PORT
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/wait.h>

#include "lt.h"

#define LEN 4096

/* Two connected connections, a buffer to send from and one to receive into, a wait set. */
struct bed {
	struct rk_conn *a, *b;
	struct rk_mr *sm, *rm;
	struct rk_wait *ws;
	int efd;
	int ia, ib, ie; /* the sources: a's CQ, b's CQ, the eventfd */
};

/* @max_wc completions per CQ source, @len bytes per buffer, all in @mode. */
static void bed_open(struct bed *t, struct rk_device *dev, enum rk_wait_mode mode, size_t len,
		     int max_wc)
{
	struct rk_conn_opts o = {.wait_mode = mode};
	struct rk_wait_opts wo = {.mode = mode};
	struct rk_error e;

	t->efd = eventfd(0, EFD_NONBLOCK);
	if (t->efd < 0)
		LT_FAIL("eventfd: %s", strerror(errno));
	lt_pair(dev, &o, &o, &t->a, &t->b);
	LT_CHECK(rk_mr_alloc(dev, len, RK_ACCESS_LOCAL, &e, &t->sm), &e);
	LT_CHECK(rk_mr_alloc(dev, len, RK_ACCESS_LOCAL, &e, &t->rm), &e);
	LT_CHECK(rk_wait_create(&wo, &e, &t->ws), &e);
	LT_CHECK(t->ia = rk_wait_add_cq(t->ws, rk_conn_cq(t->a), max_wc, 0xa, &e), &e);
	LT_CHECK(t->ib = rk_wait_add_cq(t->ws, rk_conn_cq(t->b), max_wc, 0xb, &e), &e);
	LT_CHECK(t->ie = rk_wait_add_eventfd(t->ws, t->efd, 0xe, &e), &e);
}

static void bed_close(struct bed *t)
{
	rk_wait_destroy(t->ws);
	close(t->efd);
	rk_conn_destroy(t->a);
	rk_conn_destroy(t->b);
	rk_mr_dereg(t->sm);
	rk_mr_dereg(t->rm);
}

static const char *mode_name(enum rk_wait_mode mode)
{
	return mode == RK_WAIT_BUSY ? "busy" : mode == RK_WAIT_EVENT ? "event" : "adaptive";
}

static void cqs_and_eventfd(struct rk_device *dev, enum rk_wait_mode mode)
{
	struct bed t;
	struct rk_wait_event ev[4];
	struct rk_error e;
	uint64_t one = 1;
	int seen_send = 0, seen_recv = 0, seen_efd = 0;
	int64_t t0;

	bed_open(&t, dev, mode, LEN, 4);
	struct rk_conn *a = t.a, *b = t.b;
	struct rk_mr *sm = t.sm, *rm = t.rm;
	struct rk_wait *ws = t.ws;
	int ia = t.ia, ib = t.ib, ie = t.ie;

	if (rk_wait_add_cq(ws, rk_conn_cq(a), 4, 0, &e) != -EEXIST)
		LT_FAIL("a CQ added twice");

	/* Nothing in flight: the deadline, never early. */
	t0 = lt_now_ms();
	if (rk_wait(ws, ev, 4, 150, &e) != -ETIMEDOUT)
		LT_FAIL("%s: a wait with nothing in flight returned", rk_error_str(&e));
	if (lt_now_ms() - t0 < 150)
		LT_FAIL("the deadline came early (%lld ms)", (long long)(lt_now_ms() - t0));

	lt_fill(rk_mr_addr(sm), LEN, 42);
	memset(rk_mr_addr(rm), 0, LEN);
	LT_CHECK(rk_post_recv(b, rk_mr_addr(rm), LEN, rk_mr_lkey(rm), 1001, &e), &e);
	struct rk_wr wr = {.op = RK_OP_SEND,
			   .flags = RK_WR_SIGNALED,
			   .wr_id = 2002,
			   .addr = rk_mr_addr(sm),
			   .len = LEN,
			   .lkey = rk_mr_lkey(sm)};
	LT_CHECK(rk_post(a, &wr, &e), &e);
	if (write(t.efd, &one, sizeof(one)) != sizeof(one))
		LT_FAIL("eventfd");
	t0 = lt_now_ms();
	while (!(seen_send && seen_recv && seen_efd)) {
		int n = rk_wait(ws, ev, 4, 10000, &e);

		LT_CHECK(n, &e);
		for (int i = 0; i < n; i++) {
			if (ev[i].src == RK_SRC_EVENTFD && ev[i].id == ie && ev[i].count == 1) {
				seen_efd++;
				continue;
			}
			if (ev[i].src != RK_SRC_CQ || ev[i].nwc != 1)
				LT_FAIL("unexpected event src %d nwc %d", ev[i].src, ev[i].nwc);
			if (ev[i].wc[0].status != IBV_WC_SUCCESS)
				LT_FAIL("completion failed: %s",
					ibv_wc_status_str(ev[i].wc[0].status));
			if (ev[i].id == ia && ev[i].tag == 0xa && ev[i].cq == rk_conn_cq(a) &&
			    ev[i].wc[0].wr_id == 2002)
				seen_send++;
			else if (ev[i].id == ib && ev[i].tag == 0xb && ev[i].wc[0].wr_id == 1001 &&
				 ev[i].wc[0].byte_len == LEN)
				seen_recv++;
			else
				LT_FAIL("completion wr_id %llu on source %d",
					(unsigned long long)ev[i].wc[0].wr_id, ev[i].id);
		}
		if (lt_now_ms() - t0 > 20000)
			LT_FAIL("not everything fired");
	}
	if (seen_send != 1 || seen_recv != 1 || seen_efd != 1)
		LT_FAIL("fired %d/%d/%d times", seen_send, seen_recv, seen_efd);
	if (lt_check(rk_mr_addr(rm), LEN, 42) >= 0)
		LT_FAIL("received data differs");
	/* All taken: the next wait times out. */
	if (rk_wait(ws, ev, 4, 50, &e) != -ETIMEDOUT)
		LT_FAIL("a spurious event after everything was taken");
	LT_CHECK(rk_wait_remove(ws, ia), NULL);
	LT_CHECK(rk_wait_remove(ws, ib), NULL);
	bed_close(&t);
	printf("%s: two CQs and an eventfd in one wait: ok\n", mode_name(mode));
}

/*
 * A caller whose array (one event) every CQ can fill, busy and event mode:
 * an eventfd signaled while 200 completions wait is still reported before
 * they are all taken (a busy server must see a new client).
 */
static void full_array_sees_fds(struct rk_device *dev, enum rk_wait_mode mode)
{
	enum { N = 100, SZ = 64 };
	struct bed t;
	struct rk_wait_event ev[1];
	struct rk_error e;
	uint64_t one = 1;
	int taken = 0, efd_at = -1;

	bed_open(&t, dev, mode, N * SZ, 1);
	struct rk_conn *a = t.a, *b = t.b;
	struct rk_mr *sm = t.sm, *rm = t.rm;
	struct rk_wait *ws = t.ws;

	for (int i = 0; i < N; i++) {
		char *r = (char *)rk_mr_addr(rm) + i * SZ;
		struct rk_wr wr = {.op = RK_OP_SEND,
				   .flags = RK_WR_SIGNALED,
				   .wr_id = (uint64_t)i,
				   .addr = (char *)rk_mr_addr(sm) + i * SZ,
				   .len = SZ,
				   .lkey = rk_mr_lkey(sm)};

		LT_CHECK(rk_post_recv(b, r, SZ, rk_mr_lkey(rm), (uint64_t)i, &e), &e);
		LT_CHECK(rk_post(a, &wr, &e), &e);
	}
	usleep(500 * 1000); /* all 2 N completions in their CQs */
	if (write(t.efd, &one, sizeof(one)) != sizeof(one))
		LT_FAIL("eventfd");
	while (taken < 2 * N || efd_at < 0) {
		int n = rk_wait(ws, ev, 1, 10000, &e);

		LT_CHECK(n, &e);
		if (ev[0].src == RK_SRC_EVENTFD) {
			efd_at = taken;
			continue;
		}
		if (ev[0].src != RK_SRC_CQ || ev[0].nwc != 1 ||
		    ev[0].wc[0].status != IBV_WC_SUCCESS)
			LT_FAIL("unexpected event src %d", ev[0].src);
		taken++;
	}
	if (efd_at >= 2 * N)
		LT_FAIL("the eventfd was reported only after all %d completions", 2 * N);
	bed_close(&t);
	printf("%s: an eventfd seen after %d of %d completions, one event per wait: ok\n",
	       mode_name(mode), efd_at, 2 * N);
}

/*
 * rk_post_recv_list: 40 receives in one call (two chains of the library's
 * 32) land in order with their wr_ids; a list longer than the free slots
 * is refused whole; a busy rk_cq_poll takes mixed send and receive
 * completions with every wr_id translated back.
 */
static void recv_list(struct rk_device *dev)
{
	enum { N = 40, SZ = 64 };
	struct bed t;
	struct rk_recv rs[N];
	struct ibv_wc wc[16];
	struct rk_error e;
	unsigned room;
	int sends = 0, recvs = 0;
	int64_t t0;

	bed_open(&t, dev, RK_WAIT_BUSY, N * SZ, 1);
	room = rk_rq_room(t.b);
	for (int i = 0; i < N; i++)
		rs[i] = (struct rk_recv){.addr = (char *)rk_mr_addr(t.rm) + i * SZ,
					 .len = SZ,
					 .lkey = rk_mr_lkey(t.rm),
					 .wr_id = 5000 + (uint64_t)i};
	if (rk_post_recv_list(t.b, rs, room + 1, &e) != -ENOBUFS || rk_rq_room(t.b) != room)
		LT_FAIL("a list longer than the receive queue's room was not refused whole");
	if (rk_post_recv_list(t.b, rs, 0, &e) != 0)
		LT_FAIL("an empty list");
	if (rk_post_recv_list(t.b, rs, N, &e) != N)
		LT_FAIL("rk_post_recv_list: %s", rk_error_str(&e));
	if (rk_rq_room(t.b) != room - N)
		LT_FAIL("room %u after %d receives, was %u", rk_rq_room(t.b), N, room);
	for (int i = 0; i < N; i++) {
		char *src = (char *)rk_mr_addr(t.sm) + i * SZ;
		struct rk_wr wr = {.op = RK_OP_SEND,
				   .flags = RK_WR_SIGNALED,
				   .wr_id = 7000 + (uint64_t)i,
				   .addr = src,
				   .len = SZ,
				   .lkey = rk_mr_lkey(t.sm)};

		memset(src, i + 1, SZ);
		LT_CHECK(rk_post(t.a, &wr, &e), &e);
	}
	t0 = lt_now_ms();
	while (sends < N || recvs < N) {
		int n = rk_cq_poll(rk_conn_cq(t.b), wc, 16, &e);
		int m = rk_cq_poll(rk_conn_cq(t.a), wc + (n > 0 ? n : 0), 16 - (n > 0 ? n : 0), &e);

		LT_CHECK(n, &e);
		LT_CHECK(m, &e);
		for (int i = 0; i < n + m; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				LT_FAIL("completion failed: %s", ibv_wc_status_str(wc[i].status));
			if (wc[i].opcode & IBV_WC_RECV) {
				const unsigned char *d =
				    (const unsigned char *)rk_mr_addr(t.rm) + recvs * SZ;

				if (wc[i].wr_id != 5000 + (uint64_t)recvs || d[0] != recvs + 1 ||
				    d[SZ - 1] != recvs + 1)
					LT_FAIL("receive %d: wr_id %llu", recvs,
						(unsigned long long)wc[i].wr_id);
				recvs++;
			} else {
				if (wc[i].wr_id != 7000 + (uint64_t)sends)
					LT_FAIL("send %d: wr_id %llu", sends,
						(unsigned long long)wc[i].wr_id);
				sends++;
			}
		}
		if (lt_now_ms() - t0 > 20000)
			LT_FAIL("%d sends and %d receives of %d completed", sends, recvs, N);
	}
	if (rk_rq_room(t.b) != room)
		LT_FAIL("room %u after every receive completed, was %u", rk_rq_room(t.b), room);
	bed_close(&t);
	printf("rk_post_recv_list: %d receives in one call, in order, wr_ids kept: ok\n", N);
}

static void busy_cq_refused(struct rk_device *dev)
{
	struct rk_cq_opts co = {.mode = RK_WAIT_BUSY};
	struct rk_wait_opts wo = {.mode = RK_WAIT_EVENT};
	struct rk_wait *ws;
	struct rk_cq *cq;
	struct rk_error e;

	LT_CHECK(rk_cq_create(dev, &co, &e, &cq), &e);
	LT_CHECK(rk_wait_create(&wo, &e, &ws), &e);
	if (rk_wait_add_cq(ws, cq, 0, 0, &e) != -EINVAL)
		LT_FAIL("a busy CQ in a sleeping set was accepted");
	rk_wait_destroy(ws);
	rk_cq_destroy(cq);
}

/* The child: accept one connection, say so, and close it when told. */
static void peer(const char *addr, const char *port, int ready, int go)
{
	struct rk_listen_opts lo = {.addr = addr, .port = port};
	struct rk_device *dev = lt_open_device(0);
	struct rk_listener *lis;
	struct rk_cm_request *req;
	struct rk_conn *c;
	struct rk_error e;
	struct pollfd p = {.fd = go, .events = POLLIN};
	char ch;

	lt_role = "peer";
	LT_CHECK(rk_listener_create(dev, &lo, &e, &lis), &e);
	if (write(ready, "r", 1) != 1)
		LT_FAIL("pipe");
	LT_CHECK(rk_listener_get_request(lis, 20000, &e, &req), &e);
	LT_CHECK(rk_cm_request_accept(req, NULL, NULL, 0, 20000, &e, &c), &e);
	if (poll(&p, 1, 20000) != 1 || read(go, &ch, 1) != 1)
		LT_FAIL("never told to close");
	rk_conn_destroy(c); /* disconnects */
	rk_listener_destroy(lis);
	rk_device_close(dev);
	exit(0);
}

/* Forks before opening the device: a child shares no verbs state with us. */
static void cm_disconnect_seen(const char *addr, const char *port)
{
	struct rk_device *dev;
	struct rk_cm_connect_opts co = {
	    .host = addr, .port = port, .conn = {.wait_mode = RK_WAIT_EVENT}};
	struct rk_wait_opts wo = {.mode = RK_WAIT_EVENT};
	struct rk_wait_event ev[4];
	struct rk_wait *ws;
	struct rk_conn *c;
	struct rk_error e;
	struct pollfd p;
	int rp[2], gp[2], st, id, done = 0;
	int64_t t0;
	char ch;
	pid_t pid;

	if (pipe(rp) || pipe(gp))
		LT_FAIL("pipe");
	pid = fork();
	if (pid == 0) {
		close(rp[0]);
		close(gp[1]);
		peer(addr, port, rp[1], gp[0]);
	}
	close(rp[1]);
	close(gp[0]);
	p = (struct pollfd){.fd = rp[0], .events = POLLIN};
	if (poll(&p, 1, 20000) != 1 || read(rp[0], &ch, 1) != 1)
		LT_FAIL("peer not ready");
	dev = lt_open_device(0);
	LT_CHECK(rk_cm_connect(dev, &co, &e, &c), &e);
	LT_CHECK(rk_wait_create(&wo, &e, &ws), &e);
	LT_CHECK(id = rk_wait_add_conn(ws, c, 0xc, &e), &e);
	LT_CHECK(rk_wait_add_cq(ws, rk_conn_cq(c), 0, 0, &e), &e);
	if (rk_wait(ws, ev, 4, 100, &e) != -ETIMEDOUT)
		LT_FAIL("an event before the peer closed");
	if (write(gp[1], "g", 1) != 1)
		LT_FAIL("pipe");
	t0 = lt_now_ms();
	while (!done) {
		int n = rk_wait(ws, ev, 4, 15000, &e);

		LT_CHECK(n, &e);
		for (int i = 0; i < n; i++)
			if (ev[i].src == RK_SRC_CONN && ev[i].id == id && ev[i].conn == c &&
			    ev[i].state != RK_CONN_CONNECTED)
				done = 1;
		if (lt_now_ms() - t0 > 20000)
			LT_FAIL("the disconnect was not reported");
	}
	printf("cm: the peer's disconnect reported as %s: ok\n",
	       rk_conn_state_str(rk_conn_state(c)));
	rk_wait_destroy(ws);
	rk_conn_destroy(c);
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		LT_FAIL("peer failed");
	close(rp[0]);
	close(gp[1]);
	rk_device_close(dev);
}

int main(int argc, char **argv)
{
	struct rk_device *dev;

	lt_prog = "lib_wait";
	if (argc != 3)
		LT_FAIL("usage: lib_wait ADDR PORT");
	cm_disconnect_seen(argv[1], argv[2]);
	dev = lt_open_device(0);
	cqs_and_eventfd(dev, RK_WAIT_BUSY);
	cqs_and_eventfd(dev, RK_WAIT_EVENT);
	cqs_and_eventfd(dev, RK_WAIT_ADAPTIVE);
	full_array_sees_fds(dev, RK_WAIT_BUSY);
	full_array_sees_fds(dev, RK_WAIT_EVENT);
	busy_cq_refused(dev);
	recv_list(dev);
	rk_device_close(dev);
	printf("lib_wait: ok\n");
	return 0;
}
