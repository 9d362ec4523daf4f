/*
 * lib_errors.c - failures must be reported, decoded and bounded in time.
 *
 *   bad rkey           -> REM_ACCESS_ERR with the rkey hint
 *   rkey of another PD -> REM_ACCESS_ERR; the same PD's rkey works
 *   lower peer MTU     -> the connection runs at the lower MTU
 *   no listener        -> error within 5 s
 *   unreachable addr   -> error within 5 s
 *   wrong app / token  -> rejected, with the server's reason
 *   memlock lowered    -> registration error names memlock
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "lt.h"

#define APP_ID 0x65727273

static void bad_rkey(struct rk_device *dev)
{
	struct rk_conn *a, *b;
	struct rk_mr *src, *dst;
	struct ibv_wc wc;
	struct rk_error e;
	struct rk_wr wr;

	lt_pair(dev, NULL, NULL, &a, &b);
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_LOCAL, &e, &src), &e);
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_REMOTE_WRITE, &e, &dst), &e);
	lt_fail_conn(a, src, dst, &wr, &wc);
	if (rk_error_from_wc(&e, &wc) != -EIO || !e.hint || !strstr(e.hint, "rkey") ||
	    e.qp_num != rk_conn_qp_num(a) || e.wc_status != IBV_WC_REM_ACCESS_ERR)
		LT_FAIL("decoded: %s", e.msg);
	printf("bad rkey: %s\n", e.msg);
	if (rk_conn_first_error(a, &e) != -EIO || rk_conn_state(a) != RK_CONN_ERROR)
		LT_FAIL("first error not recorded");
	if (rk_post(a, &wr, &e) != -ENOTCONN || !strstr(e.msg, "remote access error"))
		LT_FAIL("post after failure: %s", e.msg);
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	rk_mr_dereg(dst);
	rk_mr_dereg(src);
}

/* WRITE from @a into @dst through @b; the completion's status. */
static enum ibv_wc_status write_to(struct rk_conn *a, struct rk_mr *src, struct rk_mr *dst)
{
	struct rk_wr wr = {.op = RK_OP_WRITE,
			   .flags = RK_WR_SIGNALED,
			   .wr_id = 5,
			   .addr = rk_mr_addr(src),
			   .len = 4096,
			   .lkey = rk_mr_lkey(src),
			   .remote_addr = (uintptr_t)rk_mr_addr(dst),
			   .rkey = rk_mr_rkey(dst)};
	struct ibv_wc wc;
	struct rk_error e;

	LT_CHECK(rk_post(a, &wr, &e), &e);
	LT_CHECK(rk_cq_wait(rk_conn_cq(a), &wc, 1, 10000, &e), &e);
	return wc.status;
}

/*
 * A QP in a PD of its own: memory of the device's PD is out of its reach
 * even with the right rkey and address; memory of its PD is not.
 */
static void foreign_pd(struct rk_device *dev)
{
	struct rk_conn_opts ob = {0};
	struct rk_conn *a, *b;
	struct rk_mr *src, *outside, *inside;
	struct rk_pd *pd;
	struct rk_error e;
	enum ibv_wc_status st;

	LT_CHECK(rk_pd_alloc(dev, &e, &pd), &e);
	if (rk_pd_device(pd) != dev || !rk_pd_ibv(pd) || rk_pd_ibv(pd) == rk_device_pd(dev))
		LT_FAIL("rk_pd accessors");
	ob.pd = pd;
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_LOCAL, &e, &src), &e);
	LT_CHECK(rk_mr_alloc(dev, 4096, RK_ACCESS_REMOTE_WRITE, &e, &outside), &e);
	LT_CHECK(rk_mr_alloc_pd(pd, 4096, RK_ACCESS_REMOTE_WRITE, &e, &inside), &e);
	lt_fill(rk_mr_addr(src), 4096, 77);

	lt_pair(dev, NULL, &ob, &a, &b);
	st = write_to(a, src, outside);
	if (st != IBV_WC_REM_ACCESS_ERR)
		LT_FAIL("rkey of another PD gave %s", ibv_wc_status_str(st));
	for (size_t i = 0; i < 4096; i++)
		if (((const uint8_t *)rk_mr_addr(outside))[i])
			LT_FAIL("memory of another PD was written at %zu", i);
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	printf("rkey of another PD: %s\n", ibv_wc_status_str(st));

	lt_pair(dev, NULL, &ob, &a, &b);
	st = write_to(a, src, inside);
	if (st != IBV_WC_SUCCESS || lt_check(rk_mr_addr(inside), 4096, 77) != -1)
		LT_FAIL("write into the QP's own PD: %s", ibv_wc_status_str(st));
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	printf("rkey of the QP's own PD: %s\n", ibv_wc_status_str(st));

	rk_mr_dereg(inside);
	rk_mr_dereg(outside);
	rk_mr_dereg(src);
	rk_pd_free(pd);
}

static void lower_mtu(struct rk_device *dev)
{
	struct rk_conn_opts ob = {.max_mtu = IBV_MTU_1024};
	struct rk_conn *a, *b;
	struct rk_mr *src, *dst;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	struct ibv_wc wc;
	struct rk_error e;
	struct rk_wr wr;

	lt_pair(dev, NULL, &ob, &a, &b);
	if (rk_conn_path_mtu(a) != IBV_MTU_1024 || rk_conn_path_mtu(b) != IBV_MTU_1024)
		LT_FAIL("path mtu %u / %u", rk_mtu_bytes(rk_conn_path_mtu(a)),
			rk_mtu_bytes(rk_conn_path_mtu(b)));
	if (ibv_query_qp(rk_conn_qp(a), &qa, IBV_QP_PATH_MTU, &ia) || qa.path_mtu != IBV_MTU_1024)
		LT_FAIL("QP reports path mtu %u", rk_mtu_bytes(qa.path_mtu));
	LT_CHECK(rk_mr_alloc(dev, 65536, RK_ACCESS_LOCAL, &e, &src), &e);
	LT_CHECK(rk_mr_alloc(dev, 65536, RK_ACCESS_LOCAL, &e, &dst), &e);
	lt_fill(rk_mr_addr(src), 65536, 5);
	LT_CHECK(rk_post_recv(b, rk_mr_addr(dst), 65536, rk_mr_lkey(dst), 1, &e), &e);
	wr = (struct rk_wr){.op = RK_OP_SEND,
			    .flags = RK_WR_SIGNALED,
			    .addr = rk_mr_addr(src),
			    .len = 65536,
			    .lkey = rk_mr_lkey(src)};
	LT_CHECK(rk_post(a, &wr, &e), &e);
	lt_wait_ok(a, &wc, 10000);
	lt_wait_ok(b, &wc, 10000);
	if (wc.byte_len != 65536 || lt_check(rk_mr_addr(dst), 65536, 5) >= 0)
		LT_FAIL("data at mtu 1024 corrupted");
	printf("lower mtu: both sides at %u, 64 KiB verified\n", rk_mtu_bytes(rk_conn_path_mtu(a)));
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	rk_mr_dereg(dst);
	rk_mr_dereg(src);
}

static void connect_fails(struct rk_device *dev, const char *host, const char *port,
			  const struct rk_hello *h, int want, int want_reason, const char *what)
{
	struct rk_cm_connect_opts co = {.host = host, .port = port, .timeout_ms = 2000, .hello = h};
	struct rk_conn *c = NULL;
	struct rk_error e;
	int64_t t0 = lt_now_ms();
	int r = rk_cm_connect(dev, &co, &e, &c);
	int64_t ms = lt_now_ms() - t0;

	if (r == 0)
		LT_FAIL("%s: connected", what);
	if (ms > 5000)
		LT_FAIL("%s: took %lld ms", what, (long long)ms);
	if (want && r != want)
		LT_FAIL("%s: got %d (%s), want %d", what, r, e.msg, want);
	if (want && e.reject_reason != want_reason) /* a code to act on, not text to match */
		LT_FAIL("%s: reject reason %d, want %d", what, e.reject_reason, want_reason);
	printf("%s: %d ms: %s\n", what, (int)ms, e.msg);
}

/* A server that rejects a bad token after seeing the hello. */
static void token_server(struct rk_device *dev, const char *addr, int ready)
{
	struct rk_listen_opts lo = {.addr = addr, .port = "7491", .app_id = APP_ID};
	struct rk_listener *lis;
	struct rk_cm_request *req;
	struct rk_error e;

	lt_role = "server";
	LT_CHECK(rk_listener_create(dev, &lo, &e, &lis), &e);
	if (write(ready, "r", 1) != 1)
		LT_FAIL("pipe");
	/* The wrong app_id is rejected inside; the bad token reaches us. */
	LT_CHECK(rk_listener_get_request(lis, 20000, &e, &req), &e);
	if (rk_cm_request_hello(req)->token_len != 5 ||
	    memcmp(rk_cm_request_hello(req)->token, "wrong", 5))
		LT_FAIL("unexpected hello");
	LT_CHECK(rk_cm_request_reject(req, RK_REJECT_TOKEN, "token expired", &e), &e);
	rk_listener_destroy(lis);
	rk_device_close(dev);
	exit(0);
}

static void rejects(const char *addr)
{
	struct rk_hello wrong_app = {.app_id = 1};
	struct rk_hello bad_token = {.app_id = APP_ID, .token_len = 5};
	struct rk_device *dev;
	struct pollfd p;
	int pfd[2], st;
	char ch;
	pid_t pid;

	memcpy(bad_token.token, "wrong", 5);
	if (pipe(pfd))
		LT_FAIL("pipe");
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		token_server(lt_open_device(0), addr, pfd[1]);
	}
	close(pfd[1]);
	p = (struct pollfd){.fd = pfd[0], .events = POLLIN};
	if (poll(&p, 1, 20000) != 1 || read(pfd[0], &ch, 1) != 1)
		LT_FAIL("server not ready");
	close(pfd[0]);
	dev = lt_open_device(0);
	connect_fails(dev, addr, "7491", &wrong_app, -ECONNREFUSED, RK_REJECT_APP_ID,
		      "wrong app id");
	connect_fails(dev, addr, "7491", &bad_token, -ECONNREFUSED, RK_REJECT_TOKEN, "bad token");
	rk_device_close(dev);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		LT_FAIL("token server failed");
}

/* Root bypasses memlock with CAP_IPC_LOCK: drop it first. */
static void drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		LT_FAIL("capget: %s", strerror(errno));
	d[0].effective &= ~(1u << CAP_IPC_LOCK);
	d[0].permitted &= ~(1u << CAP_IPC_LOCK);
	d[0].inheritable &= ~(1u << CAP_IPC_LOCK);
	if (syscall(SYS_capset, &h, d))
		LT_FAIL("capset: %s", strerror(errno));
}

static void memlock(void)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		struct rlimit rl = {.rlim_cur = 64 * 1024, .rlim_max = 64 * 1024};
		struct rk_device *dev;
		struct rk_mr *mr;
		struct rk_error e;
		int r;

		lt_role = "memlock";
		drop_ipc_lock();
		if (setrlimit(RLIMIT_MEMLOCK, &rl))
			LT_FAIL("setrlimit: %s", strerror(errno));
		dev = lt_open_device(0);
		r = rk_mr_alloc(dev, 4u << 20, RK_ACCESS_LOCAL, &e, &mr);
		if (r != -ENOMEM && r != -EPERM)
			LT_FAIL("registering 4 MiB under a 64 KiB memlock: %d %s", r, e.msg);
		if (!strstr(e.msg, "memlock") || !strstr(e.msg, "64 KiB") ||
		    !strstr(e.msg, "ulimit -l") || !strstr(e.msg, "limits.conf"))
			LT_FAIL("message does not explain memlock: %s", e.msg);
		printf("memlock: %s\n", e.msg);
		rk_device_close(dev);
		exit(0);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		LT_FAIL("memlock check failed");
}

int main(void)
{
	const char *addr = lt_env("RK_ADDR");
	struct rk_device *dev;

	lt_prog = "lib_errors";
	dev = lt_open_device(0);
	bad_rkey(dev);
	foreign_pd(dev);
	lower_mtu(dev);
	connect_fails(dev, addr, "7999", NULL, -ECONNREFUSED, 0, "no listener");
	connect_fails(dev, "10.77.0.99", "7999", NULL, 0, 0, "unreachable address");
	rk_device_close(dev);
	rejects(addr);
	memlock();
	printf("lib_errors: all ok\n");
	return 0;
}
