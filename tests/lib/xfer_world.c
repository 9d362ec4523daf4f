/*
 * xfer_world.c - see xfer_world.h.
 */
#include <string.h>

#include "xfer_world.h"

const struct rk_conn_opts xw_conn_opts = {.sq_depth = 64, .signal_every = 16};

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void world_up(struct world *w, enum rk_xfer_mode mode, int zero_based)
{
	struct rk_xfer_opts xo = {.mode = mode, .zero_based = zero_based};
	uint8_t desc[RK_XFER_DESC_MAX];
	struct rk_error e;
	size_t len;

	for (unsigned i = 0; i < NLANES; i++)
		lt_pair(w->dev, &xw_conn_opts, &xw_conn_opts, &w->own.lanes[i], &w->usr.lanes[i]);
	LT_CHECK(rk_xfer_create(w->dev, NULL, &xo, &e, &w->own.x), &e);
	LT_CHECK(rk_xfer_create(w->dev, NULL, &xo, &e, &w->usr.x), &e);
	LT_CHECK(rk_xfer_peer_create(w->own.x, w->own.lanes, NLANES, &e, &w->own.peer), &e);
	LT_CHECK(rk_xfer_peer_create(w->usr.x, w->usr.lanes, NLANES, &e, &w->usr.peer), &e);
	w->own.buf = rk_alloc_aligned(BUF);
	w->usr.buf = rk_alloc_aligned(BUF);
	if (!w->own.buf || !w->usr.buf)
		LT_FAIL("out of memory");
	memset(w->own.buf, 0, BUF);
	LT_CHECK(rk_xfer_seg_reg(w->own.x, w->own.buf, BUF, RK_XFER_READ | RK_XFER_WRITE, &e,
				 &w->own.seg),
		 &e);
	LT_CHECK(rk_xfer_seg_reg(w->usr.x, w->usr.buf, BUF, 0, &e, &w->usr.seg), &e);
	LT_CHECK(rk_xfer_export(w->own.seg, w->own.peer, RK_XFER_READ | RK_XFER_WRITE, desc,
				sizeof(desc), &len, 5000, &e),
		 &e);
	LT_CHECK(rk_xfer_import(w->usr.peer, desc, len, &e, &w->rem), &e);
	/* The layout of xfer.h: address at 16, one key per lane from 32. */
	w->raddr = le64(desc + 16);
	for (unsigned i = 0; i < NLANES; i++)
		w->rkey[i] = (uint32_t)le64(desc + 32 + 4 * i) & 0xffffffffu;
}

void world_down(struct world *w)
{
	/* running_peer destroyed the user's peer and its handle already */
	rk_xfer_remote_free(w->rem);
	rk_xfer_seg_dereg(w->usr.seg);
	rk_xfer_seg_dereg(w->own.seg);
	rk_xfer_peer_destroy(w->usr.peer);
	rk_xfer_peer_destroy(w->own.peer);
	for (unsigned i = 0; i < NLANES; i++) {
		rk_conn_destroy(w->usr.lanes[i]);
		rk_conn_destroy(w->own.lanes[i]);
	}
	rk_xfer_destroy(w->usr.x);
	rk_xfer_destroy(w->own.x);
	rk_free_aligned(w->own.buf);
	rk_free_aligned(w->usr.buf);
}
