/*
 * test_hints.c - the hint table and the error object.
 */
#include <errno.h>
#include <netdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <infiniband/verbs.h>
#include <rdmakit/rdmakit.h>

#include "rk_internal.h"

static void wc_hints(void **state)
{
	assert_non_null(strstr(rk_wc_status_hint(IBV_WC_REM_ACCESS_ERR), "rkey"));
	assert_non_null(strstr(rk_wc_status_hint(IBV_WC_REM_ACCESS_ERR), "access"));
	assert_non_null(strstr(rk_wc_status_hint(IBV_WC_RETRY_EXC_ERR), "peer gone"));
	assert_non_null(strstr(rk_wc_status_hint(IBV_WC_RETRY_EXC_ERR), "timeout"));
	assert_non_null(strstr(rk_wc_status_hint(IBV_WC_RNR_RETRY_EXC_ERR), "receive"));
	assert_non_null(strstr(rk_wc_status_hint(IBV_WC_WR_FLUSH_ERR), "first failure"));
	assert_non_null(strstr(rk_wc_status_hint(IBV_WC_LOC_PROT_ERR), "lkey"));
	assert_non_null(strstr(rk_wc_status_hint(IBV_WC_LOC_PROT_ERR), "PD"));
	assert_null(rk_wc_status_hint(IBV_WC_SUCCESS));
	assert_null(rk_wc_status_hint(-5));
}

static void errno_hints(void **state)
{
	assert_non_null(strstr(rk_errno_hint("ibv_post_send", ENOMEM), "depth"));
	assert_non_null(strstr(rk_errno_hint("ibv_post_recv", -ENOMEM), "depth"));
	assert_non_null(strstr(rk_errno_hint("ibv_reg_mr", ENOMEM), "ulimit -l"));
	assert_non_null(strstr(rk_errno_hint("ibv_reg_mr", EPERM), "memlock"));
	assert_non_null(strstr(rk_errno_hint("ibv_reg_mr", EPERM), "limits.conf"));
	assert_non_null(strstr(rk_errno_hint("ibv_reg_mr", EPERM), "--ulimit memlock=-1"));
	assert_non_null(rk_errno_hint("anything", ETIMEDOUT));
	assert_null(rk_errno_hint("ibv_create_cq", ENOMEM));
	assert_null(rk_errno_hint(NULL, EPERM));
	/* the library's own argument checks are not verbs failures: no verbs hint */
	assert_null(rk_errno_hint("rk_mr_reg", EINVAL));
	assert_null(rk_errno_hint("rk_conn_connect", EINVAL));
	assert_null(rk_errno_hint("rk_cq_create", EINVAL));
}

/* Every hint rk_error gives is the hint field of the explain table's entry. */
static void hints_from_table(void **state)
{
	size_t checked = 0;

	for (size_t i = 0; i < rk_explain_count(); i++) {
		const struct rk_explain *e = rk_explain_at(i);

		if (e->kind == RK_EXPLAIN_WC_STATUS) {
			assert_ptr_equal(rk_wc_status_hint(e->code), e->hint);
			checked++;
		}
		if (e->kind != RK_EXPLAIN_ERRNO)
			continue;
		if (!e->ops[0]) {
			assert_ptr_equal(rk_errno_hint("no_such_call", e->code), e->hint);
			checked++;
		}
		for (size_t k = 0; k < RK_EXPLAIN_OPS_MAX && e->ops[k]; k++) {
			assert_ptr_equal(rk_errno_hint(e->ops[k], e->code), e->hint);
			assert_ptr_equal(rk_errno_hint(e->ops[k], -e->code), e->hint);
			checked++;
		}
	}
	assert_true(checked > 50);
	/* the error object carries it too */
	{
		struct rk_error err;

		rk__err_set(&err, ENOMEM, "ibv_reg_mr", "8 MiB");
		assert_ptr_equal(err.hint,
				 rk_explain_find(RK_EXPLAIN_ERRNO, ENOMEM, "ibv_reg_mr")->hint);
		rk__err_set(&err, EADDRINUSE, "rdma_bind_addr", NULL);
		assert_non_null(strstr(rk_error_str(&err), "another rdma_cm listener"));
	}
}

static void from_wc(void **state)
{
	struct ibv_wc wc = {.status = IBV_WC_RNR_RETRY_EXC_ERR, .vendor_err = 0x81, .qp_num = 0x42};
	struct rk_error e;

	assert_int_equal(rk_error_from_wc(&e, &wc), -EIO);
	assert_int_equal(e.wc_status, IBV_WC_RNR_RETRY_EXC_ERR);
	assert_string_equal(e.wc_status_str, ibv_wc_status_str(IBV_WC_RNR_RETRY_EXC_ERR));
	assert_int_equal(e.vendor_err, 0x81);
	assert_int_equal(e.qp_num, 0x42);
	assert_non_null(e.hint);
	assert_non_null(strstr(rk_error_str(&e), "vendor_err 0x81"));
	assert_non_null(strstr(rk_error_str(&e), "qp 0x42"));
	assert_non_null(strstr(rk_error_str(&e), "hint:"));
	wc.status = IBV_WC_SUCCESS;
	assert_int_equal(rk_error_from_wc(&e, &wc), 0);
	assert_int_equal(e.err, 0);
	assert_int_equal(e.wc_status, -1);
	assert_string_equal(rk_error_str(&e), "");
	assert_string_equal(rk_error_str(NULL), "");
	rk_error_clear(NULL);
}

/* rk_error_setf: a caller's own failure in the same object, its text as given. */
static void setf(void **state)
{
	struct rk_error e;
	char big[2 * RK_ERROR_MSG_MAX];

	(void)state;
	assert_int_equal(rk_error_setf(&e, "rk bench", ETIMEDOUT, "peer silent for %d s", 10),
			 -ETIMEDOUT);
	assert_string_equal(e.op, "rk bench");
	assert_int_equal(e.err, ETIMEDOUT);
	assert_string_equal(e.err_str, strerror(ETIMEDOUT));
	assert_string_equal(rk_error_str(&e), "peer silent for 10 s");
	assert_int_equal(e.wc_status, -1);
	assert_null(e.hint);
	assert_int_equal(e.reject_reason, 0);
	/* The sign is ignored, 0 is not a success, NULL only returns. */
	assert_int_equal(rk_error_setf(&e, "x", -EPROTO, "bad"), -EPROTO);
	assert_int_equal(e.err, EPROTO);
	assert_int_equal(rk_error_setf(&e, "x", 0, "?"), -EIO);
	assert_int_equal(rk_error_setf(NULL, "x", ENOMEM, "lost"), -ENOMEM);
	/* Text and operation longer than their fields are cut, terminated. */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(rk_error_setf(&e, big, EINVAL, "%s", big), -EINVAL);
	assert_int_equal(strlen(e.msg), RK_ERROR_MSG_MAX - 1);
	assert_int_equal(strlen(e.op), RK_ERROR_OP_MAX - 1);
}

/* A name that does not resolve: the resolver's text alone, no second errno. */
static void gai(void **state)
{
	struct rk_error e;

	(void)state;
	assert_int_equal(rk__err_gai(&e, EAI_NONAME, "'%s'", "nohost.invalid"), -ENXIO);
	assert_int_equal(e.err, ENXIO);
	assert_string_equal(e.op, "getaddrinfo");
	assert_non_null(strstr(e.msg, "'nohost.invalid': Name or service not known"));
	assert_null(strstr(e.msg, strerror(ENXIO)));
	assert_null(strstr(e.msg, strerror(EINVAL)));
	assert_non_null(strstr(e.msg, "/etc/hosts"));
	assert_int_equal(rk__err_gai(&e, EAI_AGAIN, "x"), -EAGAIN);
	assert_null(e.hint);
	assert_int_equal(rk__err_gai(&e, EAI_SERVICE, "x"), -EINVAL);
	assert_int_equal(rk__err_gai(NULL, EAI_MEMORY, "x"), -ENOMEM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(wc_hints),
	    cmocka_unit_test(errno_hints),
	    cmocka_unit_test(hints_from_table),
	    cmocka_unit_test(from_wc),
	    cmocka_unit_test(setf),
	    cmocka_unit_test(gai),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
