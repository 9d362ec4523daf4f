/*
 * lib_peer_kill.c - the peer process is killed: the survivor must say so
 * within seconds, with rdma_cm (DISCONNECTED) and without (the next send
 * fails with RETRY_EXC_ERR once the ACK timeout and retries run out).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "lt.h"

static void victim(const char *addr, const char *port, int manual, int ready)
{
	struct rk_device *dev = lt_open_device(0);
	struct rk_conn *c;
	struct rk_error e;

	lt_role = "victim";
	if (manual) {
		struct rk_oob_info li, ri;
		int lfd, fd;

		LT_CHECK(lfd = rk_tcp_listen(addr, port, &e), &e);
		if (write(ready, "r", 1) != 1)
			LT_FAIL("pipe");
		LT_CHECK(fd = rk_tcp_accept(lfd, 20000, &e), &e);
		LT_CHECK(rk_conn_create(dev, NULL, &e, &c), &e);
		rk_conn_local_info(c, &li);
		LT_CHECK(rk_oob_exchange(fd, &li, &ri, 20000, &e), &e);
		LT_CHECK(rk_conn_connect(c, &ri, &e), &e);
		if (write(fd, "c", 1) != 1)
			LT_FAIL("oob");
	} else {
		struct rk_listen_opts lo = {.addr = addr, .port = port};
		struct rk_listener *lis;
		struct rk_cm_request *req;

		LT_CHECK(rk_listener_create(dev, &lo, &e, &lis), &e);
		if (write(ready, "r", 1) != 1)
			LT_FAIL("pipe");
		LT_CHECK(rk_listener_get_request(lis, 20000, &e, &req), &e);
		LT_CHECK(rk_cm_request_accept(req, NULL, NULL, 0, 20000, &e, &c), &e);
	}
	pause(); /* until killed */
	exit(1);
}

static void survive(const char *addr, const char *port, int manual)
{
	struct rk_device *dev;
	struct rk_conn *c;
	struct rk_mr *mr;
	struct rk_error e;
	struct pollfd p;
	int pfd[2], st, fd = -1;
	int64_t t0, ms;
	char ch;
	pid_t pid;

	if (pipe(pfd))
		LT_FAIL("pipe");
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		victim(addr, port, manual, pfd[1]);
	}
	close(pfd[1]);
	p = (struct pollfd){.fd = pfd[0], .events = POLLIN};
	if (poll(&p, 1, 20000) != 1 || read(pfd[0], &ch, 1) != 1)
		LT_FAIL("victim not ready");
	close(pfd[0]);
	dev = lt_open_device(0);
	if (manual) {
		struct rk_oob_info li, ri;

		LT_CHECK(fd = rk_tcp_connect(addr, port, 20000, &e), &e);
		LT_CHECK(rk_conn_create(dev, NULL, &e, &c), &e);
		rk_conn_local_info(c, &li);
		LT_CHECK(rk_oob_exchange(fd, &li, &ri, 20000, &e), &e);
		LT_CHECK(rk_conn_connect(c, &ri, &e), &e);
		/* The victim's QP is at RTS too once it says so (the socket is non-blocking). */
		p = (struct pollfd){.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 20000) != 1 || read(fd, &ch, 1) != 1)
			LT_FAIL("oob");
	} else {
		struct rk_cm_connect_opts co = {.host = addr, .port = port};

		LT_CHECK(rk_cm_connect(dev, &co, &e, &c), &e);
	}
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_LOCAL, &e, &mr), &e);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	t0 = lt_now_ms();
	if (manual) {
		struct rk_wr wr = {.op = RK_OP_SEND,
				   .flags = RK_WR_SIGNALED | RK_WR_NO_INLINE,
				   .addr = rk_mr_addr(mr),
				   .len = 64,
				   .lkey = rk_mr_lkey(mr)};
		struct ibv_wc wc;

		LT_CHECK(rk_post(c, &wr, &e), &e);
		LT_CHECK(rk_cq_wait(rk_conn_cq(c), &wc, 1, 15000, &e), &e);
		/*
		 * Across a wire the dead QP never answers (RETRY_EXC_ERR); on one
		 * kernel rxe may answer for it with RNR NAKs (RNR_RETRY_EXC_ERR).
		 * Either way the survivor must get a failed completion, in time.
		 */
		if (wc.status == IBV_WC_SUCCESS)
			LT_FAIL("send to a dead peer succeeded");
		rk_error_from_wc(&e, &wc);
		printf("manual: send to the dead peer: %s\n", e.msg);
		close(fd);
	} else {
		while (rk_conn_state(c) == RK_CONN_CONNECTED && lt_now_ms() - t0 < 15000)
			if (rk_conn_progress(c, 1000, &e))
				break;
		/*
		 * Usually the CM's DISCONNECTED; now and then a fatal event of
		 * the QP is seen first and the connection ends in ERROR. Either
		 * way the survivor knows, with a reason, in time.
		 */
		if (rk_conn_state(c) != RK_CONN_DISCONNECTED && rk_conn_state(c) != RK_CONN_ERROR)
			LT_FAIL("state %s after the peer died",
				rk_conn_state_str(rk_conn_state(c)));
	}
	ms = lt_now_ms() - t0;
	rk_conn_first_error(c, &e);
	printf("%s: peer killed, reported after %lld ms: %s\n", manual ? "manual" : "rdma_cm",
	       (long long)ms, e.msg);
	if (ms > 10000)
		LT_FAIL("took %lld ms", (long long)ms);
	rk_conn_destroy(c);
	rk_mr_dereg(mr);
	rk_device_close(dev);
}

int main(int argc, char **argv)
{
	const char *addr = lt_env("RK_ADDR");

	lt_prog = "lib_peer_kill";
	survive(addr, "7497", 0);
	survive(addr, "7498", 1);
	printf("lib_peer_kill: all ok\n");
	return 0;
}
