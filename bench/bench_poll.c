/*
 * bench_poll.c - CPU time per message and round-trip latency at a low
 * message rate, for busy, event and adaptive completion waiting.
 *
 *   bench_poll [MESSAGES [INTERVAL_US]]    (defaults 100, 20000; device $RK_ADDR)
 *
 * Two connections in one process, each driven by its own thread: the client
 * sends a 64-byte ping every INTERVAL_US, the echo thread answers. The echo
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID) divided by the messages is
 * the cost of waiting in that mode.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdmakit/rdmakit.h>

#define MSG 64

struct peer {
	struct rk_conn *conn;
	struct rk_mr *mr; /* [0, MSG) receive, [MSG, 2 MSG) send */
	int n;
	double cpu_us;
	int failed;
};

static double now_us(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Wait for the next receive completion, counting send completions on the way. */
static int wait_recv(struct peer *p)
{
	struct ibv_wc wc[4];
	struct rk_error e;

	for (;;) {
		int n = rk_cq_wait(rk_conn_cq(p->conn), wc, 4, 10000, &e);

		if (n < 0) {
			fprintf(stderr, "bench_poll: %s\n", rk_error_str(&e));
			return -1;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				rk_error_from_wc(&e, &wc[i]);
				fprintf(stderr, "bench_poll: %s\n", rk_error_str(&e));
				return -1;
			}
			if (wc[i].opcode & IBV_WC_RECV)
				return 0;
		}
	}
}

static int send_msg(struct peer *p)
{
	char *buf = rk_mr_addr(p->mr);
	struct rk_wr wr = {.op = RK_OP_SEND,
			   .flags = RK_WR_SIGNALED,
			   .addr = buf + MSG,
			   .len = MSG,
			   .lkey = rk_mr_lkey(p->mr)};
	struct rk_error e;

	if (rk_post_recv(p->conn, buf, MSG, rk_mr_lkey(p->mr), 0, &e) ||
	    rk_post(p->conn, &wr, &e)) {
		fprintf(stderr, "bench_poll: %s\n", rk_error_str(&e));
		return -1;
	}
	return 0;
}

static void *echo(void *arg)
{
	struct peer *p = arg;
	double t0 = now_us(CLOCK_THREAD_CPUTIME_ID);

	for (int i = 0; i < p->n; i++)
		if (wait_recv(p) || send_msg(p)) {
			p->failed = 1;
			break;
		}
	p->cpu_us = now_us(CLOCK_THREAD_CPUTIME_ID) - t0;
	return NULL;
}

static int run(struct rk_device *dev, enum rk_wait_mode mode, const char *name, int n,
	       int interval_us)
{
	struct rk_conn_opts o = {.max_inline = MSG, .wait_mode = mode};
	struct peer cl = {.n = n}, ec = {.n = n};
	struct rk_oob_info ia, ib;
	struct rk_error e;
	pthread_t th;
	double rtt_sum = 0, cpu0, cl_cpu;
	int r = 1;

	rk_error_clear(&e);
	if (rk_conn_create(dev, &o, &e, &cl.conn) || rk_conn_create(dev, &o, &e, &ec.conn) ||
	    rk_mr_alloc(dev, 2 * MSG, RK_ACCESS_LOCAL, &e, &cl.mr) ||
	    rk_mr_alloc(dev, 2 * MSG, RK_ACCESS_LOCAL, &e, &ec.mr))
		goto out;
	rk_conn_local_info(cl.conn, &ia);
	rk_conn_local_info(ec.conn, &ib);
	if (rk_conn_connect(cl.conn, &ib, &e) || rk_conn_connect(ec.conn, &ia, &e))
		goto out;
	/* The echo side's first receive must be there before the first ping. */
	if (rk_post_recv(ec.conn, rk_mr_addr(ec.mr), MSG, rk_mr_lkey(ec.mr), 0, &e))
		goto out;
	ec.n = n;
	if (pthread_create(&th, NULL, echo, &ec)) {
		perror("pthread_create");
		goto out;
	}
	cpu0 = now_us(CLOCK_THREAD_CPUTIME_ID);
	for (int i = 0; i < n; i++) {
		char *buf = rk_mr_addr(cl.mr);
		struct rk_wr wr = {.op = RK_OP_SEND,
				   .flags = RK_WR_SIGNALED,
				   .addr = buf + MSG,
				   .len = MSG,
				   .lkey = rk_mr_lkey(cl.mr)};
		double t0 = now_us(CLOCK_MONOTONIC);

		if (rk_post_recv(cl.conn, buf, MSG, rk_mr_lkey(cl.mr), 0, &e) ||
		    rk_post(cl.conn, &wr, &e) || wait_recv(&cl))
			break;
		rtt_sum += now_us(CLOCK_MONOTONIC) - t0;
		usleep((useconds_t)interval_us);
		cl.n = i + 1;
	}
	cl_cpu = now_us(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	pthread_join(th, NULL);
	if (cl.n != n || ec.failed) {
		fprintf(stderr, "bench_poll %s: stopped after %d messages: %s\n", name, cl.n,
			rk_error_str(&e));
		goto out;
	}
	printf("%-8s echo CPU %8.1f us/msg   client CPU %8.1f us/msg   mean RTT %7.1f us\n", name,
	       ec.cpu_us / n, cl_cpu / n, rtt_sum / n);
	r = 0;
out:
	if (r && e.msg[0])
		fprintf(stderr, "bench_poll %s: %s\n", name, rk_error_str(&e));
	rk_conn_destroy(ec.conn);
	rk_conn_destroy(cl.conn);
	rk_mr_dereg(ec.mr);
	rk_mr_dereg(cl.mr);
	return r;
}

int main(int argc, char **argv)
{
	struct rk_device_opts o = {.addr = getenv("RK_ADDR"), .gid_index = -1};
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
	long interval = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
	struct rk_device *dev;
	struct rk_error e;
	int r = 0;

	if (!o.addr || n <= 0 || n > 1000000 || interval < 0 || interval > 10000000) {
		fprintf(stderr, "usage: RK_ADDR=... bench_poll [MESSAGES [INTERVAL_US]]\n");
		return 2;
	}
	rk_error_clear(&e);
	if (rk_device_open(&o, &e, &dev)) {
		fprintf(stderr, "bench_poll: %s\n", rk_error_str(&e));
		return 1;
	}
	printf("%ld messages of %d bytes, one every %ld us\n", n, MSG, interval);
	r |= run(dev, RK_WAIT_BUSY, "busy", (int)n, (int)interval);
	r |= run(dev, RK_WAIT_EVENT, "event", (int)n, (int)interval);
	r |= run(dev, RK_WAIT_ADAPTIVE, "adaptive", (int)n, (int)interval);
	rk_device_close(dev);
	return r;
}
