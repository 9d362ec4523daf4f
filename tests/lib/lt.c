/*
 * lt.c - helpers shared by the librdmakit device tests.
 */
#include <string.h>
#include <time.h>

#include "lt.h"

const char *lt_role = "main";
const char *lt_prog = "lib_test";

const char *lt_env(const char *name)
{
	const char *v = getenv(name);

	if (!v || !*v)
		LT_FAIL("%s is not set: run inside scripts/softroce", name);
	return v;
}

struct rk_device *lt_open_device(int by_name)
{
	/* Children inherit stdio buffers: flush by line so nothing prints twice. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct rk_device_opts o = {.gid_index = -1};
	struct rk_device *dev;
	struct rk_error e;

	if (by_name)
		o.name = lt_env("RK_DEV");
	else
		o.addr = lt_env("RK_ADDR");
	LT_CHECK(rk_device_open(&o, &e, &dev), &e);
	return dev;
}

void lt_fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

long lt_check(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *p = buf;
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		if (p[i] != (uint8_t)(x >> 16))
			return (long)i;
	}
	return -1;
}

void lt_wait_ok(struct rk_conn *c, struct ibv_wc *wc, int timeout_ms)
{
	struct rk_error e;
	int r = rk_cq_wait(rk_conn_cq(c), wc, 1, timeout_ms, &e);

	LT_CHECK(r, &e);
	if (wc->status != IBV_WC_SUCCESS) {
		rk_error_from_wc(&e, wc);
		LT_FAIL("completion wr_id %llu: %s", (unsigned long long)wc->wr_id, e.msg);
	}
}

void lt_fail_conn(struct rk_conn *a, struct rk_mr *src, struct rk_mr *dst, struct rk_wr *wr,
		  struct ibv_wc *wc)
{
	struct rk_error e;

	*wr = (struct rk_wr){.op = RK_OP_WRITE,
			     .flags = RK_WR_SIGNALED,
			     .wr_id = 9,
			     .addr = rk_mr_addr(src),
			     .len = 4096,
			     .lkey = rk_mr_lkey(src),
			     .remote_addr = (uintptr_t)rk_mr_addr(dst),
			     .rkey = rk_mr_rkey(dst) ^ 0x5a5a00};
	LT_CHECK(rk_post(a, wr, &e), &e);
	LT_CHECK(rk_cq_wait(rk_conn_cq(a), wc, 1, 10000, &e), &e);
	if (wc->status != IBV_WC_REM_ACCESS_ERR || wc->wr_id != 9)
		LT_FAIL("bad rkey gave %s (wr_id %llu)", ibv_wc_status_str(wc->status),
			(unsigned long long)wc->wr_id);
}

void lt_pair(struct rk_device *dev, const struct rk_conn_opts *oa, const struct rk_conn_opts *ob,
	     struct rk_conn **a, struct rk_conn **b)
{
	struct rk_oob_info ia, ib, da, db;
	uint8_t wa[RK_OOB_MSG_LEN], wb[RK_OOB_MSG_LEN];
	struct rk_error e;

	LT_CHECK(rk_conn_create(dev, oa, &e, a), &e);
	LT_CHECK(rk_conn_create(dev, ob, &e, b), &e);
	rk_conn_local_info(*a, &ia);
	rk_conn_local_info(*b, &ib);
	/* Through the wire codec, as a real peer would. */
	LT_CHECK(rk_oob_encode(&ia, wa, sizeof(wa)), NULL);
	LT_CHECK(rk_oob_encode(&ib, wb, sizeof(wb)), NULL);
	LT_CHECK(rk_oob_decode(wa, sizeof(wa), &da, &e), &e);
	LT_CHECK(rk_oob_decode(wb, sizeof(wb), &db, &e), &e);
	LT_CHECK(rk_conn_connect(*a, &db, &e), &e);
	LT_CHECK(rk_conn_connect(*b, &da, &e), &e);
}

int64_t lt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
