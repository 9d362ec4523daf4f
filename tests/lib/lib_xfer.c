/*
 * lib_xfer.c - move data with every opcode between two processes and check
 * it byte for byte.
 *
 *   lib_xfer manual|cm busy|event|adaptive ADDR PORT
 *
 * A server child and a client parent connect (manually over TCP, or with
 * rdma_cm and a hello), then for each size (1 B, 4 KiB, 1 MiB, 8 MiB) and
 * op (SEND, WRITE, WRITE_IMM, READ) the client announces the step with a
 * control SEND, waits for READY, performs it, sends DONE, and the server
 * verifies and answers with the result. A final step posts 64 WRITEs with
 * one ibv_post_send and selective signaling.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "lt.h"

#define DATA_MAX  (8u << 20)
#define STEP_MS	  30000
#define APP_ID	  0x78666572 /* "xfer" */
#define BATCH_N	  64
#define BATCH_LEN 4096

enum { CMD_OP = 1, CMD_READY, CMD_DONE, CMD_RESULT, CMD_QUIT };
enum { OP_BATCH = 100 };

struct ctl {
	uint32_t cmd, op, size, status;
};

struct side {
	struct rk_device *dev;
	struct rk_conn *conn;
	struct rk_mr *data, *ctl_rx, *ctl_tx;
	uint64_t peer_addr;
	uint32_t peer_rkey;
	struct ibv_wc rq[4]; /* receive completions not yet consumed, FIFO */
	int nrq;
	struct ibv_wc last_recv;
};

static enum rk_wait_mode wait_mode;
static int manual;

static uint32_t seed_of(uint32_t op, uint32_t size)
{
	return op * 7919u + size;
}

static int prepare(struct rk_conn *c, void *arg)
{
	struct side *s = arg;

	return rk_post_recv(c, rk_mr_addr(s->ctl_rx), sizeof(struct ctl), rk_mr_lkey(s->ctl_rx), 1,
			    NULL);
}

static void post_ctl_recv(struct side *s)
{
	struct rk_error e;

	LT_CHECK(rk_post_recv(s->conn, rk_mr_addr(s->ctl_rx), sizeof(struct ctl),
			      rk_mr_lkey(s->ctl_rx), 1, &e),
		 &e);
}

/*
 * Wait until the send with @wr_id completed (0 = none) and, if @recv, a
 * receive is queued; then pop the oldest receive into last_recv.
 */
static void await(struct side *s, uint64_t wr_id, int recv)
{
	struct ibv_wc wc[8];
	struct rk_error e;
	int send_done = wr_id == 0;

	while (!send_done || (recv && !s->nrq)) {
		int n = rk_cq_wait(rk_conn_cq(s->conn), wc, 8, STEP_MS, &e);

		LT_CHECK(n, &e);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				rk_error_from_wc(&e, &wc[i]);
				LT_FAIL("wr_id %llu: %s", (unsigned long long)wc[i].wr_id, e.msg);
			}
			if (wc[i].opcode & IBV_WC_RECV) {
				if (s->nrq == 4)
					LT_FAIL("too many receives");
				s->rq[s->nrq++] = wc[i];
			} else if (wc[i].wr_id == wr_id) {
				send_done = 1;
			}
		}
	}
	if (recv) {
		s->last_recv = s->rq[0];
		memmove(s->rq, s->rq + 1, --s->nrq * sizeof(s->rq[0]));
	}
}

static void send_ctl(struct side *s, uint32_t cmd, uint32_t op, uint32_t size, uint32_t status)
{
	struct ctl *m = rk_mr_addr(s->ctl_tx);
	struct rk_wr wr = {.op = RK_OP_SEND,
			   .flags = RK_WR_SIGNALED,
			   .wr_id = 77,
			   .addr = m,
			   .len = sizeof(*m),
			   .lkey = rk_mr_lkey(s->ctl_tx)};
	struct rk_error e;

	*m = (struct ctl){cmd, op, size, status};
	LT_CHECK(rk_post(s->conn, &wr, &e), &e);
}

static struct ctl recv_ctl(struct side *s, uint32_t want)
{
	struct ctl m;

	await(s, 0, 1);
	if (s->last_recv.byte_len != sizeof(m))
		LT_FAIL("control message of %u bytes", s->last_recv.byte_len);
	memcpy(&m, rk_mr_addr(s->ctl_rx), sizeof(m));
	if (m.cmd != want)
		LT_FAIL("expected command %u, got %u", want, m.cmd);
	return m;
}

static void alloc_buffers(struct side *s, unsigned data_access)
{
	struct rk_error e;

	LT_CHECK(rk_mr_alloc(s->dev, DATA_MAX, data_access, &e, &s->data), &e);
	LT_CHECK(rk_mr_alloc(s->dev, sizeof(struct ctl), RK_ACCESS_LOCAL, &e, &s->ctl_rx), &e);
	LT_CHECK(rk_mr_alloc(s->dev, sizeof(struct ctl), RK_ACCESS_LOCAL, &e, &s->ctl_tx), &e);
}

static void free_side(struct side *s)
{
	rk_conn_destroy(s->conn);
	rk_mr_dereg(s->ctl_tx);
	rk_mr_dereg(s->ctl_rx);
	rk_mr_dereg(s->data);
	rk_device_close(s->dev);
}

/*
 * Queue depths that are not powers of two, and small enough that the
 * library's wr_id rings (a power of two >= the depth, indexed by mask) wrap
 * several times in a run: every wr_id the tests check goes through them.
 * The client's send queue holds the 64-WR post list; the server's is 6.
 */
static struct rk_conn_opts conn_opts(struct side *s)
{
	struct rk_conn_opts o = {.sq_depth = 100,
				 .rq_depth = 6,
				 .max_inline = 64,
				 .wait_mode = wait_mode,
				 .prepare = prepare,
				 .prepare_arg = s};
	return o;
}

/* ---- server ---- */

static uint32_t server_verify(struct side *s, uint32_t op, uint32_t size)
{
	uint32_t seed = seed_of(op == OP_BATCH ? OP_BATCH : op, size);
	size_t len = op == OP_BATCH ? (size_t)BATCH_N * BATCH_LEN : size;
	long bad = lt_check(rk_mr_addr(s->data), len, seed);

	if (bad >= 0) {
		fprintf(stderr, "server: op %u size %u: first bad byte at %ld\n", op, size, bad);
		return 1;
	}
	return 0;
}

static void server_step(struct side *s, struct ctl m)
{
	uint8_t *data = rk_mr_addr(s->data);
	uint32_t status = 0;
	struct rk_error e;

	if (m.size > DATA_MAX)
		LT_FAIL("size %u too large", m.size);
	if (m.op == RK_OP_READ)
		lt_fill(data, m.size, seed_of(m.op, m.size));
	else
		memset(data, 0, m.op == OP_BATCH ? (size_t)BATCH_N * BATCH_LEN : m.size);
	if (m.op == RK_OP_SEND || m.op == RK_OP_WRITE_IMM)
		LT_CHECK(rk_post_recv(s->conn, data, m.op == RK_OP_SEND ? m.size : 0,
				      rk_mr_lkey(s->data), 2, &e),
			 &e);
	post_ctl_recv(s); /* for DONE */
	send_ctl(s, CMD_READY, m.op, m.size, 0);
	await(s, 77, 0);
	if (m.op == RK_OP_SEND || m.op == RK_OP_WRITE_IMM) {
		await(s, 0, 1);
		if (s->last_recv.wr_id != 2)
			LT_FAIL("op %u: data receive has wr_id %llu", m.op,
				(unsigned long long)s->last_recv.wr_id);
		if (m.op == RK_OP_SEND && s->last_recv.byte_len != m.size)
			LT_FAIL("SEND of %u bytes arrived as %u", m.size, s->last_recv.byte_len);
		if (m.op == RK_OP_WRITE_IMM &&
		    (s->last_recv.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
		     !(s->last_recv.wc_flags & IBV_WC_WITH_IMM) ||
		     ntohl(s->last_recv.imm_data) != (m.size ^ 0xabcdefu)))
			LT_FAIL("WRITE_IMM: opcode %d imm 0x%x", s->last_recv.opcode,
				ntohl(s->last_recv.imm_data));
	}
	recv_ctl(s, CMD_DONE);
	if (m.op != RK_OP_READ)
		status = server_verify(s, m.op, m.size);
	post_ctl_recv(s); /* for the next step */
	send_ctl(s, CMD_RESULT, m.op, m.size, status);
	await(s, 77, 0);
}

static void server_loop(struct side *s)
{
	for (;;) {
		struct ctl m = recv_ctl(s, CMD_OP);

		if (m.op == CMD_QUIT)
			break;
		server_step(s, m);
	}
}

static void buf_reply(struct side *s, uint8_t out[16])
{
	uint64_t a = (uintptr_t)rk_mr_addr(s->data);
	uint32_t k = rk_mr_rkey(s->data);

	memcpy(out, &a, 8);
	memcpy(out + 8, &k, 4);
	memset(out + 12, 0, 4);
}

static void server(const char *addr, const char *port, int ready_fd)
{
	struct side s = {0};
	struct rk_conn_opts o;
	struct rk_error e;

	lt_role = "server";
	s.dev = lt_open_device(0);
	alloc_buffers(&s, RK_ACCESS_REMOTE_WRITE | RK_ACCESS_REMOTE_READ);
	o = conn_opts(&s);
	o.sq_depth = 6;
	if (manual) {
		struct rk_oob_info li, ri;
		int lfd, fd;

		LT_CHECK(lfd = rk_tcp_listen(addr, port, &e), &e);
		if (write(ready_fd, "r", 1) != 1)
			LT_FAIL("ready pipe");
		LT_CHECK(fd = rk_tcp_accept(lfd, STEP_MS, &e), &e);
		LT_CHECK(rk_conn_create(s.dev, &o, &e, &s.conn), &e);
		rk_conn_local_info(s.conn, &li);
		li.buf_addr = (uintptr_t)rk_mr_addr(s.data);
		li.buf_len = DATA_MAX;
		li.buf_rkey = rk_mr_rkey(s.data);
		LT_CHECK(rk_oob_exchange(fd, &li, &ri, STEP_MS, &e), &e);
		LT_CHECK(rk_conn_connect(s.conn, &ri, &e), &e);
		close(fd);
		close(lfd);
	} else {
		struct rk_listen_opts lo = {.addr = addr, .port = port, .app_id = APP_ID};
		struct rk_listener *lis;
		struct rk_cm_request *req;
		uint8_t reply[16];

		LT_CHECK(rk_listener_create(s.dev, &lo, &e, &lis), &e);
		if (write(ready_fd, "r", 1) != 1)
			LT_FAIL("ready pipe");
		LT_CHECK(rk_listener_get_request(lis, STEP_MS, &e, &req), &e);
		if (rk_cm_request_hello(req)->app_arg != 42)
			LT_FAIL("hello app_arg %u", rk_cm_request_hello(req)->app_arg);
		buf_reply(&s, reply);
		LT_CHECK(rk_cm_request_accept(req, &o, reply, sizeof(reply), STEP_MS, &e, &s.conn),
			 &e);
		rk_listener_destroy(lis);
	}
	close(ready_fd);
	server_loop(&s);
	/*
	 * Let the client tear down first, behind its last WRITEs (which must
	 * land): with rdma_cm its disconnect says when; without, nothing does.
	 */
	if (manual)
		usleep(1500 * 1000);
	else
		rk_conn_progress(s.conn, 5000, NULL);
	free_side(&s);
	exit(0);
}

/* ---- client ---- */

static void client_op(struct side *s, uint32_t op, uint32_t size)
{
	uint8_t *data = rk_mr_addr(s->data);
	struct rk_wr wr = {.op = (enum rk_op)op,
			   .flags = RK_WR_SIGNALED,
			   .wr_id = 500 + op,
			   .addr = data,
			   .len = size,
			   .lkey = rk_mr_lkey(s->data),
			   .remote_addr = s->peer_addr,
			   .rkey = s->peer_rkey,
			   .imm = size ^ 0xabcdefu};
	struct rk_error e;
	struct ctl r;

	post_ctl_recv(s); /* READY */
	send_ctl(s, CMD_OP, op, size, 0);
	await(s, 77, 0);
	recv_ctl(s, CMD_READY);
	post_ctl_recv(s); /* RESULT */
	if (op == RK_OP_READ)
		memset(data, 0, size);
	else
		lt_fill(data, size, seed_of(op, size));
	LT_CHECK(rk_post(s->conn, &wr, &e), &e);
	await(s, wr.wr_id, 0);
	if (op == RK_OP_READ) {
		long bad = lt_check(data, size, seed_of(op, size));

		if (bad >= 0)
			LT_FAIL("READ of %u bytes: first bad byte at %ld", size, bad);
	}
	send_ctl(s, CMD_DONE, op, size, 0);
	await(s, 77, 0);
	r = recv_ctl(s, CMD_RESULT);
	if (r.status)
		LT_FAIL("server found op %u size %u corrupted", op, size);
	printf("op %u size %u ok\n", op, size);
}

/* 64 WRITEs in one ibv_post_send; signal_every 16 gives 4 completions. */
static void client_batch(struct side *s)
{
	uint8_t *data = rk_mr_addr(s->data);
	struct rk_wr wrs[BATCH_N];
	struct ibv_wc wc[8];
	struct rk_error e;
	int completions = 0, done = 0;
	struct ctl r;

	post_ctl_recv(s);
	send_ctl(s, CMD_OP, OP_BATCH, BATCH_LEN, 0);
	await(s, 77, 0);
	recv_ctl(s, CMD_READY);
	post_ctl_recv(s);
	lt_fill(data, (size_t)BATCH_N * BATCH_LEN, seed_of(OP_BATCH, BATCH_LEN));
	for (unsigned i = 0; i < BATCH_N; i++)
		wrs[i] = (struct rk_wr){.op = RK_OP_WRITE,
					.wr_id = 1000 + i,
					.addr = data + (size_t)i * BATCH_LEN,
					.len = BATCH_LEN,
					.lkey = rk_mr_lkey(s->data),
					.remote_addr = s->peer_addr + (uint64_t)i * BATCH_LEN,
					.rkey = s->peer_rkey};
	if (rk_post_list(s->conn, wrs, BATCH_N, &e) != BATCH_N)
		LT_FAIL("post list: %s", rk_error_str(&e));
	while (!done) {
		int n = rk_cq_wait(rk_conn_cq(s->conn), wc, 8, STEP_MS, &e);

		LT_CHECK(n, &e);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				LT_FAIL("batch WR failed: %s", ibv_wc_status_str(wc[i].status));
			completions++;
			if (wc[i].wr_id == 1000 + BATCH_N - 1)
				done = 1;
		}
	}
	if (completions != BATCH_N / 16)
		LT_FAIL("%d completions for %d WRs signaled every 16", completions, BATCH_N);
	if (rk_sq_room(s->conn) != rk_conn_sq_depth(s->conn))
		LT_FAIL("send queue room %u after all completed", rk_sq_room(s->conn));
	send_ctl(s, CMD_DONE, OP_BATCH, BATCH_LEN, 0);
	await(s, 77, 0);
	r = recv_ctl(s, CMD_RESULT);
	if (r.status)
		LT_FAIL("server found the batch corrupted");
	printf("post list of %d WRs ok (%d completions)\n", BATCH_N, completions);
}

/*
 * Teardown after a run of unsignaled WRITEs that completed: success posts no
 * completion for them and a WR that is done is not flushed, so only a WR the
 * drain posts itself can tell it they are done. Without one it waited out its
 * whole deadline (2 s) and warned. Once the run is on the queue unretired,
 * the connection must be gone well within that.
 */
static void client_teardown(struct side *s)
{
	uint8_t *data = rk_mr_addr(s->data);
	struct rk_wr wr = {.op = RK_OP_WRITE,
			   .addr = data,
			   .len = 64,
			   .lkey = rk_mr_lkey(s->data),
			   .remote_addr = s->peer_addr,
			   .rkey = s->peer_rkey};
	struct ibv_wc wc[4];
	struct rk_error e;
	unsigned unretired;
	int64_t t0, ms;

	/* One more whenever the policy signaled the last one (the run reached 16). */
	for (int i = 0; i < 3 && rk_sq_room(s->conn) == rk_conn_sq_depth(s->conn); i++) {
		wr.wr_id = 900 + (uint64_t)i;
		LT_CHECK(rk_post(s->conn, &wr, &e), &e);
		usleep(200000);
		LT_CHECK(rk_cq_poll(rk_conn_cq(s->conn), wc, 4, &e), &e);
	}
	unretired = rk_conn_sq_depth(s->conn) - rk_sq_room(s->conn);
	if (!unretired)
		LT_FAIL("no unsignaled WRITE left unretired to tear down behind");
	t0 = lt_now_ms();
	rk_conn_destroy(s->conn);
	s->conn = NULL;
	ms = lt_now_ms() - t0;
	printf("teardown behind %u unretired WRITEs: %lld ms\n", unretired, (long long)ms);
	/*
	 * The drain waited for them would end at its deadline, 2000 ms
	 * (lib/conn.c DRAIN_MS): short of that, a stalled guest may be all.
	 */
	if (ms >= 2000)
		LT_FAIL("teardown took %lld ms: the drain waited for WRs that completed unsignaled",
			(long long)ms);
}

static void wait_ready(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;

	if (poll(&p, 1, STEP_MS) != 1 || read(fd, &c, 1) != 1)
		LT_FAIL("server did not get ready");
}

/* Both sides asked for the default READ depth: the QP holds it each way. */
static void check_rd_atomic(const struct side *s)
{
	const struct rk_device_info *di = rk_device_get_info(s->dev);
	unsigned want = 16;
	uint8_t init = 0, resp = 0;
	struct rk_error e;

	if (want > di->max_qp_rd_atom)
		want = di->max_qp_rd_atom;
	if (want > di->max_qp_init_rd_atom)
		want = di->max_qp_init_rd_atom;
	LT_CHECK(rk_conn_rd_atomic(s->conn, &init, &resp, &e), &e);
	if (init != want || resp != want)
		LT_FAIL("rd_atomic: initiator %u responder %u, expected %u", init, resp, want);
}

static void client(const char *addr, const char *port)
{
	static const uint32_t sizes[] = {1, 4096, 1u << 20, 8u << 20};
	static const uint32_t ops[] = {RK_OP_SEND, RK_OP_WRITE, RK_OP_WRITE_IMM, RK_OP_READ};
	struct side s = {0};
	struct rk_conn_opts o;
	struct rk_error e;

	s.dev = lt_open_device(1);
	alloc_buffers(&s, RK_ACCESS_LOCAL);
	o = conn_opts(&s);
	o.signal_every = 16;
	if (manual) {
		struct rk_oob_info li, ri;
		int fd;

		LT_CHECK(fd = rk_tcp_connect(addr, port, STEP_MS, &e), &e);
		LT_CHECK(rk_conn_create(s.dev, &o, &e, &s.conn), &e);
		rk_conn_local_info(s.conn, &li);
		LT_CHECK(rk_oob_exchange(fd, &li, &ri, STEP_MS, &e), &e);
		LT_CHECK(rk_conn_connect(s.conn, &ri, &e), &e);
		close(fd);
		if (ri.buf_len != DATA_MAX)
			LT_FAIL("peer buffer of %llu bytes", (unsigned long long)ri.buf_len);
		s.peer_addr = ri.buf_addr;
		s.peer_rkey = ri.buf_rkey;
	} else {
		struct rk_hello h = {.app_id = APP_ID, .app_arg = 42, .token_len = 3};
		struct rk_cm_connect_opts co = {.host = addr, .port = port, .hello = &h, .conn = o};
		const uint8_t *reply;
		size_t len;

		memcpy(h.token, "abc", 3);
		LT_CHECK(rk_cm_connect(s.dev, &co, &e, &s.conn), &e);
		reply = rk_conn_peer_data(s.conn, &len);
		if (len != 16)
			LT_FAIL("accept reply of %zu bytes", len);
		memcpy(&s.peer_addr, reply, 8);
		memcpy(&s.peer_rkey, reply + 8, 4);
	}
	check_rd_atomic(&s);
	printf("connected (%s, %s): qp 0x%x path mtu %u\n", manual ? "manual" : "rdma_cm",
	       wait_mode == RK_WAIT_BUSY    ? "busy"
	       : wait_mode == RK_WAIT_EVENT ? "event"
					    : "adaptive",
	       rk_conn_qp_num(s.conn), rk_mtu_bytes(rk_conn_path_mtu(s.conn)));
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (unsigned j = 0; j < sizeof(ops) / sizeof(ops[0]); j++)
			client_op(&s, ops[j], sizes[i]);
	client_batch(&s);
	send_ctl(&s, CMD_OP, CMD_QUIT, 0, 0);
	await(&s, 77, 0);
	if (wait_mode == RK_WAIT_BUSY && rk_cq_events(rk_conn_cq(s.conn)) != 0)
		LT_FAIL("busy mode saw channel events");
	if (wait_mode != RK_WAIT_BUSY)
		printf("completion channel events: %llu\n",
		       (unsigned long long)rk_cq_events(rk_conn_cq(s.conn)));
	client_teardown(&s);
	free_side(&s);
}

int main(int argc, char **argv)
{
	int pfd[2], status = 0;
	pid_t pid;

	lt_prog = "lib_xfer";
	if (argc != 5)
		LT_FAIL("usage: lib_xfer manual|cm busy|event|adaptive ADDR PORT");
	manual = strcmp(argv[1], "manual") == 0;
	wait_mode = strcmp(argv[2], "event") == 0      ? RK_WAIT_EVENT
		    : strcmp(argv[2], "adaptive") == 0 ? RK_WAIT_ADAPTIVE
						       : RK_WAIT_BUSY;
	if (pipe(pfd))
		LT_FAIL("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		LT_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		close(pfd[0]);
		server(argv[3], argv[4], pfd[1]);
	}
	lt_role = "client";
	close(pfd[1]);
	wait_ready(pfd[0]);
	close(pfd[0]);
	client(argv[3], argv[4]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		LT_FAIL("server exited with status 0x%x", status);
	printf("lib_xfer %s %s: all ok\n", argv[1], argv[2]);
	return 0;
}
