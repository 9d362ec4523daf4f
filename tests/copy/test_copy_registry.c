/*
 * test_copy_registry.c - rk serve's registry of sessions by key
 * (copy_recv.h: cp_reg), without verbs: entries found by their key only,
 * removal idempotent, and a replacement that tells the old session (its
 * flag and eventfd) and waits until it has left, or 5 s at most.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <cmocka.h>

#include "copy_recv.h"

struct owner {
	struct cp_server *srv;
	struct cp_reg *e;
	int saw;  /* the owner was told it is replaced */
	int took; /* cp_reg_take's answer: no lanes */
};

/* A session's loop, reduced: wait for its eventfd, then leave if replaced. */
static void *owner_main(void *arg)
{
	struct owner *o = arg;
	struct rk_cm_request *reqs[CP_MAX_LANES];

	for (int i = 0; i < 500 && !atomic_load(&o->e->replaced); i++)
		usleep(2000);
	o->saw = atomic_load(&o->e->replaced);
	o->took = cp_reg_take(o->srv, o->e, reqs); /* empties the eventfd */
	cp_reg_remove(o->srv, o->e);
	return NULL;
}

static void entry(struct cp_reg *e, uint8_t fill, const char *peer)
{
	memset(e, 0, sizeof(*e));
	memset(e->key, fill, CP_KEY_LEN);
	e->want_lanes = 2;
	e->peer = peer;
	e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(e->evfd >= 0);
}

static void replace_tells_and_waits(void **state)
{
	struct cp_server srv = {0};
	struct cp_reg a, b;
	struct owner o = {.srv = &srv, .e = &a};
	uint8_t other[CP_KEY_LEN];
	char peer[64] = "";
	pthread_t th;

	(void)state;
	assert_int_equal(cp_server_registry_init(&srv), 0);
	entry(&a, 0xa1, "10.0.0.1:100");
	entry(&b, 0xb2, "10.0.0.2:200");
	cp_reg_add(&srv, &a);
	cp_reg_add(&srv, &b);
	/* A key nobody holds: nothing to tell, no wait. */
	memset(other, 0xc3, sizeof(other));
	assert_int_equal(cp_reg_replace(&srv, other, peer, sizeof(peer)), 0);
	assert_false(atomic_load(&a.replaced) || atomic_load(&b.replaced));
	/* a's key: a is told, and the call returns once a has left. */
	assert_int_equal(pthread_create(&th, NULL, owner_main, &o), 0);
	assert_int_equal(cp_reg_replace(&srv, a.key, peer, sizeof(peer)), 1);
	assert_string_equal(peer, "10.0.0.1:100");
	assert_false(a.registered);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(o.saw);
	assert_int_equal(o.took, 0);
	/* b stays, untouched; a second remove is harmless. */
	assert_true(b.registered);
	assert_false(atomic_load(&b.replaced));
	cp_reg_remove(&srv, &a);
	cp_reg_remove(&srv, &b);
	assert_null(srv.reg_head);
	close(a.evfd);
	close(b.evfd);
	cp_server_registry_fini(&srv);
}

/* An owner that never leaves: the replacement gives up after its bound. */
static void replace_bounded(void **state)
{
	struct cp_server srv = {0};
	struct timespec t0, t1;
	char peer[64];
	struct cp_reg a;

	(void)state;
	assert_int_equal(cp_server_registry_init(&srv), 0);
	entry(&a, 0x11, "p");
	cp_reg_add(&srv, &a);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(cp_reg_replace(&srv, a.key, peer, sizeof(peer)), 1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec >= 4 && t1.tv_sec - t0.tv_sec <= 6);
	assert_true(a.registered);
	cp_reg_remove(&srv, &a);
	close(a.evfd);
	cp_server_registry_fini(&srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(replace_tells_and_waits),
	    cmocka_unit_test(replace_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
