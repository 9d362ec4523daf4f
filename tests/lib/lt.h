/*
 * lt.h - helpers shared by the librdmakit device tests.
 */
#ifndef LT_H
#define LT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <rdmakit/rdmakit.h>

extern const char *lt_role;

#define LT_FAIL(...)                                                                               \
	do {                                                                                       \
		fprintf(stderr, "%s[%s] %s:%d: ", lt_prog, lt_role, __FILE__, __LINE__);           \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		exit(1);                                                                           \
	} while (0)

/* Fail with the error object's message when @r is negative. */
#define LT_CHECK(r, e)                                                                             \
	do {                                                                                       \
		int lt_r_ = (r);                                                                   \
		if (lt_r_ < 0)                                                                     \
			LT_FAIL("%s -> %d: %s", #r, lt_r_, rk_error_str(e));                       \
	} while (0)

extern const char *lt_prog;

/* The sandbox's device: by RK_ADDR (or RK_DEV). */
struct rk_device *lt_open_device(int by_name);
/* Fill / check a deterministic pattern; check returns the first bad offset or -1. */
void lt_fill(void *buf, size_t len, uint32_t seed);
long lt_check(const void *buf, size_t len, uint32_t seed);
/* Wait for one completion that must succeed. */
void lt_wait_ok(struct rk_conn *c, struct ibv_wc *wc, int timeout_ms);
/* Fail @a's QP on purpose: a signaled 4 KiB WRITE (wr_id 9) from @src into @dst
 * with a wrong rkey, its completion waited for and required to be
 * IBV_WC_REM_ACCESS_ERR. The WR in @wr, the completion in @wc. */
void lt_fail_conn(struct rk_conn *a, struct rk_mr *src, struct rk_mr *dst, struct rk_wr *wr,
		  struct ibv_wc *wc);
/* Two connections in this process, connected to each other. */
void lt_pair(struct rk_device *dev, const struct rk_conn_opts *oa, const struct rk_conn_opts *ob,
	     struct rk_conn **a, struct rk_conn **b);
const char *lt_env(const char *name);
/* Milliseconds on CLOCK_MONOTONIC. */
int64_t lt_now_ms(void);

#endif
