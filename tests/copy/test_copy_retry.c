/*
 * test_copy_retry.c - rk copy's retry policy: the backoff stays within its
 * bounds, the steps down reach their floor and stay there, and the loop
 * retries transport failures only, resuming, within its count. cp_send is
 * replaced by a script of session outcomes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "copy_retry.h"

static void backoff_bounds(void **state)
{
	(void)state;
	for (uint64_t rnd = 0; rnd < 5000; rnd += 7) {
		uint64_t a = cp_backoff_ms(1, rnd), b = cp_backoff_ms(2, rnd),
			 z = cp_backoff_ms(50, rnd);

		assert_true(a >= 250 && a <= 500);
		assert_true(b >= 500 && b <= 1000);
		assert_true(z >= 4000 && z <= 8000);
	}
	assert_true(cp_backoff_ms(1000, UINT64_MAX) <= 8000);
}

static void lower_to_floor(void **state)
{
	uint32_t chunk = 1u << 20;
	unsigned depth = 8;
	uint8_t ack = 0;

	(void)state;
	assert_int_equal(cp_retry_lower(&chunk, &depth, &ack), 0);
	assert_int_equal(chunk, 256u << 10);
	assert_int_equal(depth, 4);
	assert_int_equal(ack, 0);
	assert_int_equal(cp_retry_lower(&chunk, &depth, &ack), 0);
	assert_int_equal(chunk, 64u << 10);
	assert_int_equal(depth, 4);
	assert_int_equal(ack, 14);
	/* At the floor: ACKs may be slow rather than lost; give them longer. */
	assert_int_equal(cp_retry_lower(&chunk, &depth, &ack), 0);
	assert_int_equal(ack, 15);
	assert_int_equal(cp_retry_lower(&chunk, &depth, &ack), 0);
	assert_int_equal(ack, 16);
	assert_int_equal(cp_retry_lower(&chunk, &depth, &ack), -1);
	assert_int_equal(chunk, 64u << 10);
	assert_int_equal(depth, 4);
	assert_int_equal(ack, 16);

	/* Already below the floor: left alone. */
	chunk = 16u << 10;
	depth = 1;
	ack = 0;
	assert_int_equal(cp_retry_lower(&chunk, &depth, &ack), 0);
	assert_int_equal(chunk, 16u << 10);
	assert_int_equal(depth, 1);
	assert_int_equal(ack, 14);
}

/* The budget a pull uses directly: the count, the steps down, the message. */
static void budget_alone(void **state)
{
	struct cp_retry_opts r = {.retries = 2, .window_s = 60};
	struct cp_retry_state rs;
	uint32_t chunk = 1u << 20;
	unsigned depth = 8;
	uint64_t wait = 0;
	char why[128] = "lost";

	(void)state;
	cp_retry_begin(&rs, &r, 0);
	assert_int_equal(cp_retry_next(&rs, 100, 1, &chunk, &depth, NULL, &wait, why, sizeof(why)),
			 0);
	assert_true(wait >= 250 && wait <= 500);
	assert_int_equal(chunk, 1u << 20); /* one loss: not yet lower */
	assert_int_equal(cp_retry_next(&rs, 200, 1, &chunk, &depth, NULL, &wait, why, sizeof(why)),
			 0);
	assert_int_equal(chunk, 256u << 10);
	assert_int_equal(depth, 4);
	assert_int_equal(rs.reconnects, 2);
	assert_int_equal(cp_retry_next(&rs, 300, 1, &chunk, &depth, NULL, &wait, why, sizeof(why)),
			 -1);
	assert_string_equal(why, "lost (gave up after 2 reconnects)");
	assert_int_equal(rs.reconnects, 2);
}

/* ---- cp_send replaced: each call plays the next scripted session ---- */

struct session {
	int rc, transport, established, settle; /* settle: the item gets this code */
	uint64_t moved;				/* bytes the session moves (from 0) */
	int refused;				/* nobody listening at connect */
};

static const struct session *script;
static unsigned nsessions, calls;
static unsigned flags_seen[16];
static uint32_t chunk_seen[16];

int cp_send(const struct cp_send_opts *o, struct cp_plan *plan, struct cp_send_fate *fate,
	    char *why, size_t why_len)
{
	const struct session *s = &script[calls];

	assert_true(calls < nsessions);
	flags_seen[calls] = o->flags;
	chunk_seen[calls] = o->chunk;
	calls++;
	fate->transport = s->transport;
	fate->established = s->established;
	fate->refused = s->refused;
	o->progress->done += s->moved;
	if (s->rc == RK_EXIT_OK) {
		plan->items[0].state = CP_ITEM_DONE;
		plan->items[0].code = (uint16_t)s->settle;
	} else {
		plan->items[0].state = CP_ITEM_SENT;
	}
	snprintf(why, why_len, "session %u", calls);
	return s->rc;
}

static int run_w(const struct session *sc, unsigned n, unsigned retries, unsigned window_s,
		 struct cp_plan *plan, struct cp_retry_stats *st)
{
	static struct cp_item item;
	struct cp_progress prog;
	struct cp_send_opts o = {.chunk = 1u << 20, .depth = 8, .progress = &prog};
	struct cp_retry_opts r = {.retries = retries, .window_s = window_s};
	char why[256];

	memset(&item, 0, sizeof(item));
	item.size = 1000;
	plan->items = &item;
	plan->n = 1;
	cp_progress_init(&prog, 1000, 0, 0);
	script = sc;
	nsessions = n;
	calls = 0;
	return cp_copy(&o, &r, plan, st, why, sizeof(why));
}

static int run(const struct session *sc, unsigned n, unsigned retries, struct cp_plan *plan,
	       struct cp_retry_stats *st)
{
	return run_w(sc, n, retries, 60, plan, st);
}

static void retries_transport_then_settles(void **state)
{
	const struct session sc[] = {
	    {RK_EXIT_LOST, 1, 1, 0, 100, 0},
	    {RK_EXIT_LOST, 1, 1, 0, 200, 0},
	    {RK_EXIT_LOST, 1, 0, 0, 0, 0}, /* could not connect: no step down */
	    {RK_EXIT_OK, 0, 1, CP_OK, 1000, 0},
	};
	struct cp_retry_stats st;
	struct cp_plan plan;

	(void)state;
	assert_int_equal(run(sc, 4, 10, &plan, &st), RK_EXIT_OK);
	assert_int_equal(calls, 4);
	assert_int_equal(st.reconnects, 3);
	assert_int_equal(plan.items[0].state, CP_ITEM_DONE);
	assert_false(flags_seen[0] & CP_F_RESUME);
	assert_true(flags_seen[1] & CP_F_RESUME);
	/* Lowered after the second loss of an established session, once. */
	assert_int_equal(chunk_seen[1], 1u << 20);
	assert_int_equal(chunk_seen[2], 256u << 10);
	assert_int_equal(chunk_seen[3], 256u << 10);
	assert_int_equal(st.chunk, 256u << 10);
}

static void refusals_not_retried(void **state)
{
	const struct session refused[] = {{RK_EXIT_REFUSED, 0, 0, 0, 0, 0}};
	const struct session proto[] = {{RK_EXIT_LOST, 0, 1, 0, 0, 0}};
	struct cp_retry_stats st;
	struct cp_plan plan;

	(void)state;
	assert_int_equal(run(refused, 1, 10, &plan, &st), RK_EXIT_REFUSED);
	assert_int_equal(st.reconnects, 0);
	assert_int_equal(run(proto, 1, 10, &plan, &st), RK_EXIT_LOST);
	assert_int_equal(st.reconnects, 0);
}

/* Nobody listening on the first try: a wrong host or port, reported at once;
 * after a session ran, the same is a server restarting, and waited for. */
static void first_refusal_not_retried(void **state)
{
	const struct session first[] = {{RK_EXIT_LOST, 1, 0, 0, 0, 1}};
	const struct session later[] = {
	    {RK_EXIT_LOST, 1, 1, 0, 100, 0},
	    {RK_EXIT_LOST, 1, 0, 0, 0, 1},
	    {RK_EXIT_OK, 0, 1, CP_OK, 1000, 0},
	};
	struct cp_retry_stats st;
	struct cp_plan plan;

	(void)state;
	assert_int_equal(run(first, 1, 10, &plan, &st), RK_EXIT_LOST);
	assert_int_equal(calls, 1);
	assert_int_equal(st.reconnects, 0);
	assert_int_equal(run(later, 3, 10, &plan, &st), RK_EXIT_OK);
	assert_int_equal(st.reconnects, 2);
}

static void count_bounded(void **state)
{
	const struct session sc[] = {{RK_EXIT_LOST, 1, 1, 0, 100, 0},
				     {RK_EXIT_LOST, 1, 1, 0, 200, 0},
				     {RK_EXIT_LOST, 1, 1, 0, 300, 0}};
	struct cp_retry_stats st;
	struct cp_plan plan;

	(void)state;
	assert_int_equal(run(sc, 3, 2, &plan, &st), RK_EXIT_LOST);
	assert_int_equal(calls, 3);
	assert_int_equal(st.reconnects, 2);
	assert_int_equal(run(sc, 1, 0, &plan, &st), RK_EXIT_LOST);
	assert_int_equal(calls, 1);
}

static void window_bounds_no_progress(void **state)
{
	/* Connects that fail, or resume only what was there: nothing new moves. */
	const struct session sc[] = {
	    {RK_EXIT_LOST, 1, 1, 0, 500, 0}, {RK_EXIT_LOST, 1, 0, 0, 0, 0},
	    {RK_EXIT_LOST, 1, 1, 0, 500, 0}, {RK_EXIT_LOST, 1, 0, 0, 0, 0},
	    {RK_EXIT_LOST, 1, 1, 0, 500, 0}, {RK_EXIT_LOST, 1, 0, 0, 0, 0},
	};
	struct cp_retry_stats st;
	struct cp_plan plan;

	(void)state;
	/* Waits of 0.25..0.5 s, then 0.5..1 s, ...: a 1 s window ends it by the third. */
	assert_int_equal(run_w(sc, 6, 100, 1, &plan, &st), RK_EXIT_LOST);
	assert_true(calls >= 2 && calls <= 4);
}

static void busy_after_reconnect_retried(void **state)
{
	const struct session sc[] = {
	    {RK_EXIT_LOST, 1, 1, 0, 100, 0},
	    {RK_EXIT_OK, 0, 1, CP_E_BUSY, 200, 0}, /* the old session still holds the file */
	    {RK_EXIT_OK, 0, 1, CP_OK, 1000, 0},
	};
	struct cp_retry_stats st;
	struct cp_plan plan;

	(void)state;
	assert_int_equal(run(sc, 3, 10, &plan, &st), RK_EXIT_OK);
	assert_int_equal(calls, 3);
	assert_int_equal(plan.items[0].code, CP_OK);
}

/*
 * Busy in the first session: the lock's holder is a session that ends on
 * its own (a killed run's, another copy's), so the file is tried again,
 * without turning --resume on (nothing of it was this run's to write).
 */
static void busy_in_first_session_retried(void **state)
{
	const struct session sc[] = {
	    {RK_EXIT_OK, 0, 1, CP_E_BUSY, 0, 0},
	    {RK_EXIT_OK, 0, 1, CP_E_BUSY, 0, 0},
	    {RK_EXIT_OK, 0, 1, CP_OK, 1000, 0},
	};
	struct cp_retry_stats st;
	struct cp_plan plan;

	(void)state;
	assert_int_equal(run(sc, 3, 10, &plan, &st), RK_EXIT_OK);
	assert_int_equal(calls, 3);
	assert_int_equal(st.reconnects, 2);
	assert_int_equal(plan.items[0].code, CP_OK);
	assert_false(flags_seen[1] & CP_F_RESUME);
	assert_false(flags_seen[2] & CP_F_RESUME);
}

/* The same budget as reconnects: once spent, the file stays refused busy (exit 3). */
static void busy_within_budget(void **state)
{
	const struct session sc[] = {
	    {RK_EXIT_OK, 0, 1, CP_E_BUSY, 0, 0},
	    {RK_EXIT_OK, 0, 1, CP_E_BUSY, 0, 0},
	    {RK_EXIT_OK, 0, 1, CP_E_BUSY, 0, 0},
	};
	struct cp_retry_stats st;
	struct cp_plan plan;

	(void)state;
	assert_int_equal(run(sc, 3, 2, &plan, &st), RK_EXIT_OK);
	assert_int_equal(calls, 3);
	assert_int_equal(plan.items[0].code, CP_E_BUSY);
	assert_int_equal(plan.items[0].state, CP_ITEM_DONE);
	assert_int_equal(run(sc, 1, 0, &plan, &st), RK_EXIT_OK);
	assert_int_equal(calls, 1);
	assert_int_equal(plan.items[0].code, CP_E_BUSY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(backoff_bounds),
	    cmocka_unit_test(lower_to_floor),
	    cmocka_unit_test(budget_alone),
	    cmocka_unit_test(retries_transport_then_settles),
	    cmocka_unit_test(refusals_not_retried),
	    cmocka_unit_test(first_refusal_not_retried),
	    cmocka_unit_test(count_bounded),
	    cmocka_unit_test(window_bounds_no_progress),
	    cmocka_unit_test(busy_after_reconnect_retried),
	    cmocka_unit_test(busy_in_first_session_retried),
	    cmocka_unit_test(busy_within_budget),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
