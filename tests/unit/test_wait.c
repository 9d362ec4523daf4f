/*
 * test_wait.c - the wait set without a device: eventfds, plain fds,
 * wake-ups from another thread (the set's fd quiet after them, however they
 * raced with the wait), the deadline in every mode, a result array
 * smaller than what fired, removal, bad arguments.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <cmocka.h>

#include <rdmakit/rdmakit.h>

static const enum rk_wait_mode modes[] = {RK_WAIT_BUSY, RK_WAIT_EVENT, RK_WAIT_ADAPTIVE};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct rk_wait *make(enum rk_wait_mode mode)
{
	struct rk_wait_opts o = {.mode = mode};
	struct rk_wait *ws;
	struct rk_error e;

	assert_int_equal(rk_wait_create(&o, &e, &ws), 0);
	return ws;
}

static void eventfd_count(void **state)
{
	(void)state;
	for (unsigned m = 0; m < 3; m++) {
		struct rk_wait *ws = make(modes[m]);
		struct rk_wait_event ev[4];
		uint64_t three = 3;
		int fd = eventfd(0, EFD_NONBLOCK);
		int id;

		assert_true(fd >= 0);
		id = rk_wait_add_eventfd(ws, fd, 77, NULL);
		assert_true(id >= 0);
		assert_int_equal(write(fd, &three, sizeof(three)), sizeof(three));
		assert_int_equal(rk_wait(ws, ev, 4, 5000, NULL), 1);
		assert_int_equal(ev[0].src, RK_SRC_EVENTFD);
		assert_int_equal(ev[0].id, id);
		assert_int_equal(ev[0].tag, 77);
		assert_int_equal(ev[0].count, 3);
		/* Read by the set: nothing left. */
		assert_int_equal(rk_wait(ws, ev, 4, 0, NULL), -ETIMEDOUT);
		/* A look's error object is whole, every time, over an older one. */
		for (int k = 0; k < 2; k++) {
			struct rk_error e;

			rk_error_setf(&e, "before", EPIPE, "an older error");
			e.qp_num = 7;
			e.vendor_err = 9;
			e.reject_reason = 3;
			e.wc_status = 5;
			assert_int_equal(rk_wait(ws, ev, 4, 0, &e), -ETIMEDOUT);
			assert_int_equal(e.err, ETIMEDOUT);
			assert_int_equal(e.qp_num, 0);
			assert_int_equal(e.vendor_err, 0);
			assert_int_equal(e.reject_reason, 0);
			assert_string_equal(e.op, "rk_wait");
			assert_int_equal(e.wc_status, -1);
			assert_non_null(strstr(rk_error_str(&e), "nothing fired within 0 ms"));
		}
		rk_wait_destroy(ws);
		close(fd);
	}
}

static void plain_fd_level(void **state)
{
	(void)state;
	for (unsigned m = 0; m < 3; m++) {
		struct rk_wait *ws = make(modes[m]);
		struct rk_wait_event ev[2];
		int p[2];
		char c;

		assert_int_equal(pipe(p), 0);
		assert_true(rk_wait_add_fd(ws, p[0], EPOLLIN, 5, NULL) >= 0);
		assert_int_equal(write(p[1], "x", 1), 1);
		for (int i = 0; i < 2; i++) { /* nothing is read: it fires again */
			assert_int_equal(rk_wait(ws, ev, 2, 5000, NULL), 1);
			assert_int_equal(ev[0].src, RK_SRC_FD);
			assert_int_equal(ev[0].fd, p[0]);
			assert_true(ev[0].revents & EPOLLIN);
		}
		assert_int_equal(read(p[0], &c, 1), 1);
		assert_int_equal(rk_wait(ws, ev, 2, 0, NULL), -ETIMEDOUT);
		/* The writer's end closing is reported too. */
		close(p[1]);
		assert_int_equal(rk_wait(ws, ev, 2, 5000, NULL), 1);
		assert_true(ev[0].revents & EPOLLHUP);
		rk_wait_destroy(ws);
		close(p[0]);
	}
}

static void deadline_kept(void **state)
{
	(void)state;
	for (unsigned m = 0; m < 3; m++) {
		struct rk_wait *ws = make(modes[m]);
		struct rk_wait_event ev[1];
		struct rk_error e;
		int p[2];
		int64_t t0, dt;

		assert_int_equal(pipe(p), 0);
		assert_true(rk_wait_add_fd(ws, p[0], EPOLLIN, 0, NULL) >= 0);
		t0 = now_ms();
		assert_int_equal(rk_wait(ws, ev, 1, 100, &e), -ETIMEDOUT);
		dt = now_ms() - t0;
		assert_true(dt >= 100); /* never early; how late is the machine's business */
		assert_int_equal(e.err, ETIMEDOUT);
		/* An empty set keeps the deadline too. */
		rk_wait_destroy(ws);
		ws = make(modes[m]);
		t0 = now_ms();
		assert_int_equal(rk_wait(ws, ev, 1, 30, NULL), -ETIMEDOUT);
		assert_true(now_ms() - t0 >= 30);
		rk_wait_destroy(ws);
		close(p[0]);
		close(p[1]);
	}
}

static void *waker(void *arg)
{
	struct timespec d = {.tv_nsec = 20 * 1000 * 1000};

	nanosleep(&d, NULL);
	rk_wait_wake(arg);
	return NULL;
}

static void wake_from_thread(void **state)
{
	(void)state;
	for (unsigned m = 0; m < 3; m++) {
		struct rk_wait *ws = make(modes[m]);
		struct rk_wait_event ev[2];
		pthread_t t;

		assert_int_equal(pthread_create(&t, NULL, waker, ws), 0);
		assert_int_equal(rk_wait(ws, ev, 2, 10000, NULL), 1);
		assert_int_equal(ev[0].src, RK_SRC_WAKE);
		assert_true(ev[0].count >= 1);
		pthread_join(t, NULL);
		/* Two wake-ups before a wait: one event, counted twice. */
		assert_int_equal(rk_wait_wake(ws), 0);
		assert_int_equal(rk_wait_wake(ws), 0);
		assert_int_equal(rk_wait(ws, ev, 2, 5000, NULL), 1);
		assert_int_equal(ev[0].count, 2);
		assert_int_equal(rk_wait(ws, ev, 2, 0, NULL), -ETIMEDOUT);
		rk_wait_destroy(ws);
	}
}

static void *wake_once(void *arg)
{
	rk_wait_wake(arg);
	return NULL;
}

/*
 * A wake-up taken by a wait that reads the eventfd before the waker's
 * write reaches it (rk_wait_wake adds to the counter first) leaves the
 * eventfd readable with nothing to report. The next wait that looks at
 * the fds reads it: the set's fd is then quiet again, as a caller polling
 * rk_wait_fd() (the RPC server's one-connection wait) needs. A waiting
 * thread that spins catches the counter at once: in busy mode most of
 * these rounds race so.
 */
static void wake_leaves_fd_quiet(void **state)
{
	(void)state;
	for (unsigned m = 0; m < 3; m++) {
		struct rk_wait *ws = make(modes[m]);
		struct rk_wait_event ev[4];
		int p[2];

		assert_int_equal(pipe(p), 0);
		/* An fd that never fires (the server's listener): the set has fds to look at. */
		assert_true(rk_wait_add_fd(ws, p[0], EPOLLIN, 5, NULL) >= 0);
		for (int round = 0; round < 100; round++) {
			struct pollfd pf = {.fd = rk_wait_fd(ws), .events = POLLIN};
			pthread_t t;
			int r;

			assert_int_equal(pthread_create(&t, NULL, wake_once, ws), 0);
			r = rk_wait(ws, ev, 4, 10000, NULL);
			assert_int_equal(r, 1);
			assert_int_equal(ev[0].src, RK_SRC_WAKE);
			pthread_join(t, NULL);
			assert_int_equal(rk_wait(ws, ev, 4, 0, NULL), -ETIMEDOUT);
			if (poll(&pf, 1, 0) != 0)
				fail_msg("mode %d, round %d: the set's fd is readable after every "
					 "wake-up was reported",
					 modes[m], round);
		}
		rk_wait_destroy(ws);
		close(p[0]);
		close(p[1]);
	}
}

static void small_array_loses_nothing(void **state)
{
	(void)state;
	for (unsigned m = 0; m < 3; m++) {
		struct rk_wait *ws = make(modes[m]);
		struct rk_wait_event ev[1];
		uint64_t one = 1, seen = 0;
		int fd[3];

		for (int i = 0; i < 3; i++) {
			fd[i] = eventfd(0, EFD_NONBLOCK);
			assert_true(rk_wait_add_eventfd(ws, fd[i], (uint64_t)1 << i, NULL) >= 0);
			assert_int_equal(write(fd[i], &one, sizeof(one)), sizeof(one));
		}
		for (int i = 0; i < 3; i++) {
			assert_int_equal(rk_wait(ws, ev, 1, 5000, NULL), 1);
			assert_int_equal(seen & ev[0].tag, 0);
			seen |= ev[0].tag;
		}
		assert_int_equal(seen, 7);
		assert_int_equal(rk_wait(ws, ev, 1, 0, NULL), -ETIMEDOUT);
		rk_wait_destroy(ws);
		for (int i = 0; i < 3; i++)
			close(fd[i]);
	}
}

static void remove_and_reuse(void **state)
{
	struct rk_wait *ws = make(RK_WAIT_EVENT);
	struct rk_wait_event ev[2];
	uint64_t one = 1;
	int a = eventfd(0, EFD_NONBLOCK), b = eventfd(0, EFD_NONBLOCK);
	int ia, ib;

	(void)state;
	ia = rk_wait_add_eventfd(ws, a, 1, NULL);
	assert_true(ia >= 0);
	assert_int_equal(write(a, &one, sizeof(one)), sizeof(one));
	assert_int_equal(rk_wait_remove(ws, ia), 0);
	assert_int_equal(rk_wait_remove(ws, ia), -ENOENT);
	assert_int_equal(rk_wait_remove(ws, 99), -ENOENT);
	assert_int_equal(rk_wait(ws, ev, 2, 0, NULL), -ETIMEDOUT);
	ib = rk_wait_add_eventfd(ws, b, 2, NULL);
	assert_int_equal(ib, ia); /* the slot is reused */
	assert_int_equal(write(b, &one, sizeof(one)), sizeof(one));
	assert_int_equal(rk_wait(ws, ev, 2, 5000, NULL), 1);
	assert_int_equal(ev[0].tag, 2);
	rk_wait_destroy(ws);
	close(a);
	close(b);
}

static void bad_arguments(void **state)
{
	struct rk_wait_opts o = {.mode = (enum rk_wait_mode)7};
	struct rk_wait *ws;
	struct rk_wait_event ev[1];
	struct rk_error e;
	int p[2];

	(void)state;
	assert_int_equal(rk_wait_create(&o, &e, &ws), -EINVAL);
	assert_null(ws);
	ws = make(RK_WAIT_EVENT);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(rk_wait_add_fd(ws, -1, EPOLLIN, 0, &e), -EBADF);
	assert_int_equal(rk_wait_add_fd(ws, p[0], 0, 0, &e), -EINVAL);
	assert_int_equal(rk_wait_add_fd(ws, p[0], EPOLLIN | EPOLLET, 0, &e), -EINVAL);
	assert_int_equal(rk_wait_add_eventfd(ws, -3, 0, &e), -EBADF);
	assert_int_equal(rk_wait(ws, ev, 0, 0, &e), -EINVAL);
	assert_true(rk_wait_add_fd(ws, p[0], EPOLLIN, 0, &e) >= 0);
	assert_int_equal(rk_wait_add_fd(ws, p[0], EPOLLIN, 0, &e), -EEXIST);
	rk_wait_destroy(ws);
	rk_wait_destroy(NULL);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(eventfd_count),
	    cmocka_unit_test(plain_fd_level),
	    cmocka_unit_test(deadline_kept),
	    cmocka_unit_test(wake_from_thread),
	    cmocka_unit_test(wake_leaves_fd_quiet), /* a wake-up its waiter raced with */
	    cmocka_unit_test(small_array_loses_nothing),
	    cmocka_unit_test(remove_and_reuse),
	    cmocka_unit_test(bad_arguments),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
