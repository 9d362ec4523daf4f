/*
 * test_explain.c - the explain table: complete for every completion status
 * and rdma_cm event, found by number, name, text and errno + call, and
 * unknown words get suggestions.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdmakit/rdmakit.h>

static void entry_complete(const struct rk_explain *e)
{
	assert_non_null(e->name);
	assert_non_null(e->meaning);
	assert_non_null(e->causes[0]);
	assert_non_null(e->fixes[0]);
	assert_true(rk_explain_text(e)[0] != '\0');
}

static void every_wc_status(void **state)
{
	for (int s = IBV_WC_SUCCESS; s <= IBV_WC_TM_RNDV_INCOMPLETE; s++) {
		const struct rk_explain *e = rk_explain_find(RK_EXPLAIN_WC_STATUS, s, NULL);

		assert_non_null(e);
		entry_complete(e);
		assert_string_equal(rk_explain_text(e), ibv_wc_status_str((enum ibv_wc_status)s));
		if (s != IBV_WC_SUCCESS)
			assert_non_null(e->hint);
	}
	assert_null(rk_explain_find(RK_EXPLAIN_WC_STATUS, IBV_WC_TM_RNDV_INCOMPLETE + 1, NULL));
}

static void every_cm_event(void **state)
{
	for (int ev = RDMA_CM_EVENT_ADDR_RESOLVED; ev <= RDMA_CM_EVENT_TIMEWAIT_EXIT; ev++) {
		const struct rk_explain *e = rk_explain_find(RK_EXPLAIN_CM_EVENT, ev, NULL);

		assert_non_null(e);
		entry_complete(e);
		assert_string_equal(rk_explain_text(e),
				    rdma_event_str((enum rdma_cm_event_type)ev));
	}
	assert_non_null(rk_explain_find(RK_EXPLAIN_CM_EVENT, RDMA_CM_EVENT_REJECTED, NULL)->hint);
	assert_non_null(
	    rk_explain_find(RK_EXPLAIN_CM_EVENT, RDMA_CM_EVENT_UNREACHABLE, NULL)->hint);
}

static void every_entry(void **state)
{
	size_t n = rk_explain_count();

	assert_true(n > 80);
	assert_null(rk_explain_at(n));
	for (size_t i = 0; i < n; i++) {
		const struct rk_explain *e = rk_explain_at(i);

		entry_complete(e);
		/* the entry is found again by its own name */
		{
			const struct rk_explain *hit[16];
			size_t k = rk_explain_lookup(e->name, hit, 16), j;

			assert_true(k >= 1 && k <= 16);
			for (j = 0; j < k && hit[j] != e; j++)
				;
			assert_true(j < k);
		}
	}
	/* the reject reasons users meet */
	assert_non_null(rk_explain_find(RK_EXPLAIN_CM_REJECT, 8, NULL));
	assert_non_null(rk_explain_find(RK_EXPLAIN_CM_REJECT, 10, NULL));
	assert_non_null(rk_explain_find(RK_EXPLAIN_CM_REJECT, 28, NULL));
	/* the errnos the brief of each call names */
	assert_non_null(rk_explain_find(RK_EXPLAIN_ERRNO, EADDRINUSE, "rdma_bind_addr"));
	assert_non_null(rk_explain_find(RK_EXPLAIN_ERRNO, EADDRNOTAVAIL, "rdma_bind_addr"));
	assert_non_null(rk_explain_find(RK_EXPLAIN_ERRNO, ECONNREFUSED, "rdma_connect"));
	assert_non_null(rk_explain_find(RK_EXPLAIN_ERRNO, EHOSTUNREACH, "rdma_resolve_addr"));
	assert_non_null(rk_explain_find(RK_EXPLAIN_ERRNO, EINVAL, "ibv_create_qp"));
	assert_non_null(rk_explain_find(RK_EXPLAIN_ERRNO, -ENETDOWN, "anything"));
}

/* @what finds exactly one entry, and it is @want. */
static void one(const char *what, const struct rk_explain *want)
{
	const struct rk_explain *hit[8];

	assert_int_equal(rk_explain_lookup(what, hit, 8), 1);
	assert_ptr_equal(hit[0], want);
}

static void lookups(void **state)
{
	const struct rk_explain *retry = rk_explain_find(RK_EXPLAIN_WC_STATUS, 12, NULL);
	const struct rk_explain *regmr = rk_explain_find(RK_EXPLAIN_ERRNO, ENOMEM, "ibv_reg_mr");
	const struct rk_explain *svc = rk_explain_find(RK_EXPLAIN_CM_REJECT, 8, NULL);
	const struct rk_explain *hit[16];
	size_t n;

	assert_string_equal(retry->name, "IBV_WC_RETRY_EXC_ERR");
	one("12", retry);
	one("IBV_WC_RETRY_EXC_ERR", retry);
	one("retry_exc_err", retry);
	one("  Transport Retry Counter Exceeded ", retry);
	one("status 12", retry);
	one("ENOMEM reg_mr", regmr);
	one("reg_mr ENOMEM", regmr);
	one("enomem ibv_reg_mr", regmr);
	one("ENOMEM create_cq", rk_explain_find(RK_EXPLAIN_ERRNO, ENOMEM, "ibv_create_cq"));
	one("ETIMEDOUT rdma_connect", rk_explain_find(RK_EXPLAIN_ERRNO, ETIMEDOUT, NULL));
	one("REJECTED", rk_explain_find(RK_EXPLAIN_CM_EVENT, RDMA_CM_EVENT_REJECTED, NULL));
	one("addr_error", rk_explain_find(RK_EXPLAIN_CM_EVENT, RDMA_CM_EVENT_ADDR_ERROR, NULL));
	one("event 8", rk_explain_find(RK_EXPLAIN_CM_EVENT, RDMA_CM_EVENT_REJECTED, NULL));
	one("reject 8", svc);
	one("INVALID_SERVICE_ID", svc);
	one("invalid service id", svc);
	one("reject 28", rk_explain_find(RK_EXPLAIN_CM_REJECT, 28, NULL));
	one("stale_conn", rk_explain_find(RK_EXPLAIN_CM_REJECT, 10, NULL));

	/* one errno, several calls: all of them */
	n = rk_explain_lookup("ENOMEM", hit, 16);
	assert_true(n >= 4);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(hit[i]->code, ENOMEM);
	assert_int_equal(rk_explain_lookup("errno 12", hit, 16), n);
	/* the library returns -ENOMEM: "-12" is that errno, not a status */
	assert_int_equal(rk_explain_lookup("-12", hit, 16), n);
	assert_int_equal(hit[0]->kind, RK_EXPLAIN_ERRNO);
	assert_int_equal(rk_explain_lookup("errno -12", hit, 16), n);
	assert_int_equal(rk_explain_lookup("event -12", hit, 16), 0);

	/* a fragment: the names that contain it */
	n = rk_explain_lookup("RETRY_EXC", hit, 16);
	assert_int_equal(n, 2);

	/* more matches than room: the count, and only max stored */
	n = rk_explain_lookup("ENOMEM", NULL, 0);
	assert_int_equal(rk_explain_lookup("ENOMEM", hit, 1), n);
	assert_int_equal(rk_explain_lookup("", hit, 16), 0);
	assert_int_equal(rk_explain_lookup(NULL, hit, 16), 0);
	assert_int_equal(rk_explain_lookup("999", hit, 16), 0);
}

static void unknown(void **state)
{
	const struct rk_explain *hit[4];
	const char *names[5];
	size_t n;

	assert_int_equal(rk_explain_lookup("REJECTD", hit, 4), 0);
	n = rk_explain_suggest("REJECTD", names, 5);
	assert_int_equal(n, 5);
	assert_string_equal(names[0], "REJECTED");

	assert_int_equal(rk_explain_lookup("RETRY_EXC_ERRR", hit, 4), 0);
	n = rk_explain_suggest("RETRY_EXC_ERRR", names, 3);
	assert_int_equal(n, 3);
	assert_string_equal(names[0], "RETRY_EXC_ERR");
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			assert_true(strcmp(names[i], names[j]) != 0);

	assert_int_equal(rk_explain_lookup("frobnicate", hit, 4), 0);
	assert_int_equal(rk_explain_suggest("frobnicate", names, 3), 3);
	assert_int_equal(rk_explain_suggest("x", names, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(every_wc_status), cmocka_unit_test(every_cm_event),
	    cmocka_unit_test(every_entry),     cmocka_unit_test(lookups),
	    cmocka_unit_test(unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
