/*
 * lib_pool.c - pool alloc/free stress, then a peer writes into pool buffers
 * by (addr, rkey) and every byte is checked.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "lt.h"

#define LIVE_MAX 512
#define OPS	 20000
#define WRITES	 256

static uint32_t rnd(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

int main(void)
{
	static const size_t classes[] = {512, 4096, 65536, 0};
	struct rk_pool_opts po = {.access = RK_ACCESS_REMOTE_WRITE, .chunk_size = 1 << 20};
	struct rk_buf live[LIVE_MAX], srcb;
	struct rk_pool *pool, *src_pool;
	struct rk_pool_stats st;
	struct rk_device *dev;
	struct rk_conn *a, *b;
	struct rk_conn_opts oa = {.sq_depth = 256, .signal_every = 32};
	struct rk_error e;
	uint32_t seed = 7, nlive = 0, lens[LIVE_MAX];
	struct ibv_wc wc[16];

	lt_prog = "lib_pool";
	memcpy(po.class_sizes, classes, sizeof(classes));
	dev = lt_open_device(0);
	LT_CHECK(rk_pool_create(dev, &po, &e, &pool), &e);
	for (int i = 0; i < OPS; i++) {
		if (nlive < LIVE_MAX && (nlive == 0 || rnd(&seed) % 3)) {
			size_t want = 1 + rnd(&seed) % 65536;

			LT_CHECK(rk_pool_alloc(pool, want, &live[nlive], &e), &e);
			if (live[nlive].len < want)
				LT_FAIL("asked %zu got %zu", want, live[nlive].len);
			nlive++;
		} else {
			uint32_t k = rnd(&seed) % nlive;

			LT_CHECK(rk_pool_free(pool, &live[k]), NULL);
			if (rk_pool_free(pool, &live[k]) != -EINVAL)
				LT_FAIL("double free accepted");
			live[k] = live[--nlive];
		}
	}
	rk_pool_get_stats(pool, &st);
	if (st.in_use != nlive || st.allocs - st.frees != nlive)
		LT_FAIL("stats: in_use %llu, live %u", (unsigned long long)st.in_use, nlive);
	printf("stress: %llu allocs, %llu frees, %llu chunks, %llu MiB registered, %u live\n",
	       (unsigned long long)st.allocs, (unsigned long long)st.frees,
	       (unsigned long long)st.chunks, (unsigned long long)(st.registered_bytes >> 20),
	       nlive);

	/* The peer writes into the first WRITES live buffers. */
	lt_pair(dev, &oa, NULL, &a, &b);
	LT_CHECK(rk_pool_create(dev, NULL, &e, &src_pool), &e);
	LT_CHECK(rk_pool_alloc(src_pool, 65536, &srcb, &e), &e);
	for (uint32_t i = 0; i < WRITES && i < nlive; i++) {
		struct rk_wr wr = {.op = RK_OP_WRITE,
				   .wr_id = i,
				   .addr = srcb.addr,
				   .lkey = srcb.lkey,
				   .remote_addr = (uintptr_t)live[i].addr,
				   .rkey = live[i].rkey};
		int r;

		lens[i] = (uint32_t)live[i].len;
		wr.len = lens[i];
		memset(live[i].addr, 0, live[i].len);
		lt_fill(srcb.addr, wr.len, i);
		/* Each write must finish before the source is refilled. */
		wr.flags = RK_WR_SIGNALED;
		while ((r = rk_post(a, &wr, &e)) == -ENOBUFS)
			LT_CHECK(rk_cq_wait(rk_conn_cq(a), wc, 16, 10000, &e), &e);
		LT_CHECK(r, &e);
		lt_wait_ok(a, wc, 10000);
	}
	for (uint32_t i = 0; i < WRITES && i < nlive; i++)
		if (lt_check(live[i].addr, lens[i], i) >= 0)
			LT_FAIL("pool buffer %u (%u bytes) corrupted", i, lens[i]);
	printf("remote writes into %u pool buffers verified\n", nlive < WRITES ? nlive : WRITES);

	/* rk_cq_take: completions polled from the verbs CQ directly, translated after. */
	{
		struct ibv_cq *vcq = rk_cq_ibv(rk_conn_cq(a));
		uint32_t room = rk_sq_room(a), got = 0;
		struct timespec t0, t;

		for (uint32_t i = 0; i < 8; i++) {
			struct rk_wr wr = {.op = RK_OP_WRITE,
					   .flags = RK_WR_SIGNALED,
					   .wr_id = 5000 + i,
					   .addr = srcb.addr,
					   .lkey = srcb.lkey,
					   .len = 1,
					   .remote_addr = (uintptr_t)live[0].addr,
					   .rkey = live[0].rkey};

			LT_CHECK(rk_post(a, &wr, &e), &e);
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		t = t0;
		while (got < 8 && t.tv_sec - t0.tv_sec < 10) {
			int n = ibv_poll_cq(vcq, 16, wc);

			if (n < 0)
				LT_FAIL("ibv_poll_cq failed");
			n = rk_cq_take(rk_conn_cq(a), wc, n);
			for (int k = 0; k < n; k++, got++)
				if (wc[k].status != IBV_WC_SUCCESS || wc[k].wr_id != 5000 + got)
					LT_FAIL("rk_cq_take: completion %u: status %d, wr_id %llu",
						got, wc[k].status, (unsigned long long)wc[k].wr_id);
			clock_gettime(CLOCK_MONOTONIC, &t);
		}
		if (got != 8)
			LT_FAIL("rk_cq_take: %u of 8 completions in 10 s", got);
		if (rk_sq_room(a) != room)
			LT_FAIL("rk_cq_take: send queue room %u, was %u", rk_sq_room(a), room);
		printf("rk_cq_take: 8 completions polled raw, wr_ids translated, slots retired\n");
	}
	rk_conn_destroy(a);
	rk_conn_destroy(b);
	rk_pool_free(src_pool, &srcb);
	rk_pool_destroy(src_pool);
	while (nlive)
		LT_CHECK(rk_pool_free(pool, &live[--nlive]), NULL);
	rk_pool_get_stats(pool, &st);
	if (st.in_use || st.in_use_bytes)
		LT_FAIL("pool not empty at the end");
	rk_pool_destroy(pool);
	rk_device_close(dev);
	printf("lib_pool: all ok\n");
	return 0;
}
