/*
 * test_hints.c - the hint table and the error object.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <infiniband/verbs.h>
#include <rdmakit/rdmakit.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(wc_hints),
	    cmocka_unit_test(errno_hints),
	    cmocka_unit_test(from_wc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
