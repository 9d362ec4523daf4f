/*
 * lib_xfer_life.c - one-sided transfers (xfer.h): lifetimes and addressing.
 *
 *   lib_xfer_life race MODE    a 64 MiB WRITE racing the revoke of its target:
 *                              nothing changes after rk_xfer_revoke returned
 *   lib_xfer_life zero mw      zero-based windows: descriptors with address 0,
 *                              ops land at their offsets
 *   lib_xfer_life running MODE a batch freed while running (its flushes still
 *                              claimed), the peer destroyed under a batch
 *                              (-ECANCELED); MW: the region's own key is
 *                              refused remotely
 *   lib_xfer_life prep MODE    prepared batches: WRITEs and READs posted
 *                              again and again land (notifications both
 *                              ways: deferred and immediate), refusals at
 *                              prepare, freed while its batches run, stale
 *                              after a newer import (its handle freed
 *                              first), dead once a segment it names is
 *                              deregistered or its peer destroyed
 * MODE: mw (skipped where the device has no windows) or mr. Both ends run
 * in this process over connected pairs (xfer_world.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_world.h"
/* the segment's region, for the test that its own key grants nothing */
#include "../../lib/xfer_int.h"

/*
 * A 64 MiB WRITE racing the revoke of its target: whatever landed, landed
 * before rk_xfer_revoke returned; nothing changes after, and the WRITE
 * either completed first or fails with a remote access error.
 */
static void race(struct world *w)
{
	const size_t len = 64u << 20;
	uint8_t *dst = rk_alloc_aligned(len), *src = rk_alloc_aligned(len), *snap = malloc(len);
	struct rk_xfer_seg *dseg, *sseg;
	struct rk_xfer_remote *rem;
	struct rk_xfer_batch *b;
	uint8_t desc[RK_XFER_DESC_MAX];
	struct rk_xfer_op op;
	struct rk_error e;
	size_t dlen, landed = 0;
	int64_t t0;
	int r;

	if (!dst || !src || !snap)
		LT_FAIL("out of memory");
	memset(dst, 0, len);
	memset(src, 0xc3, len);
	LT_CHECK(rk_xfer_seg_reg(w->own.x, dst, len, RK_XFER_WRITE, &e, &dseg), &e);
	LT_CHECK(rk_xfer_seg_reg(w->usr.x, src, len, 0, &e, &sseg), &e);
	LT_CHECK(
	    rk_xfer_export(dseg, w->own.peer, RK_XFER_WRITE, desc, sizeof(desc), &dlen, 5000, &e),
	    &e);
	LT_CHECK(rk_xfer_import(w->usr.peer, desc, dlen, &e, &rem), &e);
	op = (struct rk_xfer_op){RK_XFER_OP_WRITE, sseg, 0, rem, 0, len};
	t0 = lt_now_ms();
	LT_CHECK(rk_xfer_post(w->usr.peer, &op, 1, NULL, &e, &b), &e);
	LT_CHECK(rk_xfer_revoke(dseg, w->own.peer, 5000, &e), &e);
	memcpy(snap, dst, len);
	r = rk_xfer_batch_wait(b, -1, &e);
	rk_xfer_batch_free(b);
	if (r != 1 && r != -EREMOTEIO)
		LT_FAIL("64 MiB WRITE racing the revoke: %d (%s)", r, e.msg);
	if (memcmp(snap, dst, len))
		LT_FAIL("memory changed after rk_xfer_revoke returned");
	for (size_t i = 0; i < len; i++)
		landed += dst[i] == 0xc3;
	printf("race: 64 MiB WRITE vs revoke: %s, %zu bytes had landed before the revoke "
	       "returned, none after; %lld ms\n",
	       r == 1 ? "completed first" : "refused midway", landed,
	       (long long)(lt_now_ms() - t0));
	rk_xfer_remote_free(rem);
	rk_xfer_seg_dereg(sseg);
	rk_xfer_seg_dereg(dseg);
	rk_free_aligned(dst);
	rk_free_aligned(src);
	free(snap);
}

/* Zero-based windows: the descriptor carries no address, offsets land where they should. */
static void zero(struct world *w)
{
	struct rk_xfer_op op[2];
	struct rk_error e;

	if (w->raddr != 0)
		LT_FAIL("zero-based export: address 0x%llx in the descriptor",
			(unsigned long long)w->raddr);
	lt_fill(w->usr.buf, 3 * BLK, 31);
	lt_fill(w->own.buf + 9 * BLK, BLK, 32);
	op[0] = (struct rk_xfer_op){RK_XFER_OP_WRITE, w->usr.seg, 0, w->rem, 100, 3 * BLK};
	op[1] = (struct rk_xfer_op){RK_XFER_OP_READ, w->usr.seg, 5 * BLK, w->rem, 9 * BLK, BLK};
	{
		struct rk_xfer_batch *b;

		LT_CHECK(rk_xfer_post(w->usr.peer, op, 2, NULL, &e, &b), &e);
		LT_CHECK(rk_xfer_batch_wait(b, -1, &e), &e);
		rk_xfer_batch_free(b);
	}
	if (lt_check(w->own.buf + 100, 3 * BLK, 31) >= 0 || w->own.buf[99] != 0)
		LT_FAIL("zero-based WRITE at offset 100: wrong place");
	if (lt_check(w->usr.buf + 5 * BLK, BLK, 32) >= 0)
		LT_FAIL("zero-based READ at offset 9 blocks: data differs");
	printf("zero: descriptor address 0, WRITE at offset 100 and READ at 36 KiB in place\n");
}

/* Hand over everything lane @l's CQ holds (flushes included) for up to @ms. */
static unsigned hand_all(struct world *w, unsigned l, int ms, unsigned *ours)
{
	int64_t until = lt_now_ms() + ms;
	unsigned n = 0;

	while (lt_now_ms() < until) {
		struct ibv_wc wc[16];
		int r = rk_cq_poll(rk_conn_cq(w->usr.lanes[l]), wc, 16, NULL);

		for (int i = 0; i < r; i++)
			*ours += (unsigned)rk_xfer_handle(w->usr.x, &wc[i]);
		n += r > 0 ? (unsigned)r : 0;
	}
	return n;
}

/*
 * Batches freed, or their peer destroyed, while running; and (MW mode) the
 * region registration's own key used remotely: refused.
 */
static void running(struct world *w)
{
	struct rk_xfer_op op[16];
	struct rk_xfer_batch *b;
	struct rk_error e;
	unsigned ours = 0, got;

	for (unsigned i = 0; i < 16; i++)
		op[i] = (struct rk_xfer_op){RK_XFER_OP_WRITE, w->usr.seg, i * BLK,
					    w->rem,	      i * BLK,	  BLK};
	/* Freed while running: its lanes are cut, its flushes are still the layer's. */
	LT_CHECK(rk_xfer_post(w->usr.peer, op, 16, NULL, &e, &b), &e);
	rk_xfer_batch_free(b);
	got = hand_all(w, 0, 300, &ours) + hand_all(w, 1, 300, &ours);
	if (ours != got)
		LT_FAIL("freed batch: %u of %u completions claimed", ours, got);
	printf("running: batch freed while running: %u completions, all claimed; lanes %s, %s\n",
	       got, rk_conn_state_str(rk_conn_state(w->usr.lanes[0])),
	       rk_conn_state_str(rk_conn_state(w->usr.lanes[1])));
	if (rk_conn_state(w->usr.lanes[0]) == RK_CONN_CONNECTED ||
	    rk_conn_state(w->usr.lanes[1]) == RK_CONN_CONNECTED)
		LT_FAIL("a freed running batch left a lane carrying its work connected");
}

/* The peer destroyed under a running batch: the handle reports it, frees cleanly. */
static void running_peer(struct world *w)
{
	struct rk_xfer_op op = {RK_XFER_OP_WRITE, w->usr.seg, 0, w->rem, 0, BLK};
	struct rk_xfer_batch *b;
	struct rk_error e;
	int r;

	LT_CHECK(rk_xfer_post(w->usr.peer, &op, 1, NULL, &e, &b), &e);
	rk_xfer_remote_free(w->rem);
	w->rem = NULL;
	rk_xfer_peer_destroy(w->usr.peer);
	w->usr.peer = NULL;
	r = rk_xfer_batch_check(b, &e);
	if (r != -ECANCELED)
		LT_FAIL("batch of a destroyed peer: %d", r);
	rk_xfer_batch_free(b);
	printf("running: peer destroyed under a batch: %s\n", e.msg);
}

/* MW mode: the registration under the windows grants nothing remotely. */
static void region_key(struct world *w)
{
	struct ibv_mr *mr = w->own.seg->region->mr;
	struct rk_wr wr = {.op = RK_OP_WRITE,
			   .flags = RK_WR_SIGNALED,
			   .wr_id = FOREIGN_ID,
			   .addr = w->usr.buf,
			   .len = 8,
			   .remote_addr = (uintptr_t)w->own.buf,
			   /* rxe gives a registration without remote access rkey 0: try its lkey */
			   .rkey = mr->rkey ? mr->rkey : mr->lkey};
	struct ibv_wc wc;
	struct rk_error e;

	memset(w->own.buf, 0x11, BLK);
	memset(w->usr.buf, 0x22, 8);
	LT_CHECK(rk_post(w->usr.lanes[1], &wr, &e), &e);
	if (rk_cq_wait(rk_conn_cq(w->usr.lanes[1]), &wc, 1, 5000, &e) != 1)
		LT_FAIL("no completion for the WRITE with the region's key");
	if (wc.status != IBV_WC_REM_ACCESS_ERR)
		LT_FAIL("WRITE with the region's own key: %s", ibv_wc_status_str(wc.status));
	for (unsigned i = 0; i < BLK; i++)
		if (w->own.buf[i] != 0x11)
			LT_FAIL("the region's key wrote byte %u", i);
	printf("running: the region's own key (rkey 0x%x, lkey 0x%x: tried 0x%x) refused remotely, "
	       "memory intact\n",
	       mr->rkey, mr->lkey, wr.rkey);
}

/* Post @pp, wait for it; with @notif, the owner takes the notification. */
static void post_wait(struct world *w, struct rk_xfer_prep *pp, int notif, uint32_t value)
{
	struct rk_xfer_batch_opts bo = {.notify = notif, .notif = value};
	struct rk_xfer_batch *b;
	struct rk_error e;
	uint32_t v = 0;

	LT_CHECK(rk_xfer_post_prepared(pp, &bo, &e, &b), &e);
	LT_CHECK(rk_xfer_batch_wait(b, -1, &e), &e);
	rk_xfer_batch_free(b);
	if (notif) {
		LT_CHECK(rk_xfer_notif_wait(w->own.peer, 5000, &v, &e), &e);
		if (v != value)
			LT_FAIL("prepared batch: notification 0x%x, 0x%x expected", v, value);
	}
}

/* Prepared batches: data, notifications, refusals, lifetimes, staleness. */
static void prep(struct world *w)
{
	struct rk_xfer_op op[16];
	struct rk_xfer_prep *wp, *rp, *one, *pp;
	struct rk_xfer_batch *b;
	struct rk_xfer_seg *tmp;
	struct rk_xfer_remote *rem2;
	uint8_t desc[RK_XFER_DESC_MAX];
	size_t dlen;
	struct rk_error e;
	int r;

	/* 16 WRITEs over both lanes (a deferred notification), posted three times. */
	for (unsigned i = 0; i < 16; i++)
		op[i] = (struct rk_xfer_op){RK_XFER_OP_WRITE, w->usr.seg, i * 512,
					    w->rem,	      i * 512,	  512};
	LT_CHECK(rk_xfer_prepare(w->usr.peer, op, 16, &e, &wp), &e);
	for (unsigned k = 0; k < 3; k++) {
		lt_fill(w->usr.buf, 16 * 512, 40 + k);
		memset(w->own.buf, 0, 16 * 512);
		post_wait(w, wp, 1, 0x500 + k);
		if (lt_check(w->own.buf, 16 * 512, 40 + k) >= 0)
			LT_FAIL("prepared WRITEs, post %u: data differs", k);
	}
	/* One WRITE on lane 0: the notification follows it at once (same QP). */
	op[0] = (struct rk_xfer_op){RK_XFER_OP_WRITE, w->usr.seg, BLK, w->rem, 2 * BLK, 3 * BLK};
	LT_CHECK(rk_xfer_prepare(w->usr.peer, op, 1, &e, &one), &e);
	for (unsigned k = 0; k < 3; k++) {
		lt_fill(w->usr.buf + BLK, 3 * BLK, 50 + k);
		post_wait(w, one, 1, 0x600 + k);
		if (lt_check(w->own.buf + 2 * BLK, 3 * BLK, 50 + k) >= 0)
			LT_FAIL("prepared WRITE with its notification, post %u: data differs", k);
	}
	/* 16 READs, two batches of them in flight at once. */
	for (unsigned i = 0; i < 16; i++)
		op[i] = (struct rk_xfer_op){RK_XFER_OP_READ, w->usr.seg,	8 * BLK + i * 256,
					    w->rem,	     4 * BLK + i * 256, 256};
	LT_CHECK(rk_xfer_prepare(w->usr.peer, op, 16, &e, &rp), &e);
	lt_fill(w->own.buf + 4 * BLK, 16 * 256, 60);
	{
		struct rk_xfer_batch *b2;

		LT_CHECK(rk_xfer_post_prepared(rp, NULL, &e, &b), &e);
		LT_CHECK(rk_xfer_post_prepared(rp, NULL, &e, &b2), &e);
		/* Freed while its batches run: they keep its plan. */
		rk_xfer_prep_free(rp);
		LT_CHECK(rk_xfer_batch_wait(b, -1, &e), &e);
		LT_CHECK(rk_xfer_batch_wait(b2, -1, &e), &e);
		rk_xfer_batch_free(b);
		rk_xfer_batch_free(b2);
	}
	if (lt_check(w->usr.buf + 8 * BLK, 16 * 256, 60) >= 0)
		LT_FAIL("prepared READs: data differs");
	/* Refused at prepare as rk_xfer_post refuses. */
	op[0] = (struct rk_xfer_op){RK_XFER_OP_READ, w->usr.seg, 0, w->rem, BUF - 8, 16};
	r = rk_xfer_prepare(w->usr.peer, op, 1, &e, &pp);
	if (r != -ERANGE)
		LT_FAIL("prepare beyond the descriptor: %d, not -ERANGE", r);
	op[0] = (struct rk_xfer_op){RK_XFER_OP_READ, w->usr.seg, BUF - 8, w->rem, 0, 16};
	r = rk_xfer_prepare(w->usr.peer, op, 1, &e, &pp);
	if (r != -ERANGE)
		LT_FAIL("prepare beyond the local segment: %d, not -ERANGE", r);
	/* Dead once a segment it names is deregistered. */
	LT_CHECK(rk_xfer_seg_reg(w->usr.x, w->usr.buf, BLK, 0, &e, &tmp), &e);
	op[0] = (struct rk_xfer_op){RK_XFER_OP_READ, tmp, 0, w->rem, 0, 64};
	LT_CHECK(rk_xfer_prepare(w->usr.peer, op, 1, &e, &pp), &e);
	rk_xfer_seg_dereg(tmp);
	r = rk_xfer_post_prepared(pp, NULL, &e, &b);
	if (r != -ESTALE)
		LT_FAIL("prepared batch of a deregistered segment: %d, not -ESTALE", r);
	printf("prep: %s\n", e.msg);
	rk_xfer_prep_free(pp);
	/*
	 * A newer generation imported: the prepared batches of the old one are
	 * stale, although the old handle was freed first.
	 */
	rk_xfer_remote_free(w->rem);
	w->rem = NULL;
	LT_CHECK(rk_xfer_revoke(w->own.seg, w->own.peer, 5000, &e), &e);
	LT_CHECK(rk_xfer_export(w->own.seg, w->own.peer, RK_XFER_READ | RK_XFER_WRITE, desc,
				sizeof(desc), &dlen, 5000, &e),
		 &e);
	LT_CHECK(rk_xfer_import(w->usr.peer, desc, dlen, &e, &rem2), &e);
	w->rem = rem2;
	r = rk_xfer_post_prepared(wp, NULL, &e, &b);
	if (r != -ESTALE)
		LT_FAIL("prepared batch of an older generation: %d, not -ESTALE", r);
	printf("prep: %s\n", e.msg);
	rk_xfer_prep_free(wp);
	rk_xfer_prep_free(one);
	op[0] = (struct rk_xfer_op){RK_XFER_OP_WRITE, w->usr.seg, 0, w->rem, 0, BLK};
	LT_CHECK(rk_xfer_prepare(w->usr.peer, op, 1, &e, &pp), &e);
	lt_fill(w->usr.buf, BLK, 70);
	post_wait(w, pp, 0, 0);
	if (lt_check(w->own.buf, BLK, 70) >= 0)
		LT_FAIL("prepared WRITE with the new generation: data differs");
	/* Dead once its peer is destroyed; still freed cleanly. */
	rk_xfer_remote_free(w->rem);
	w->rem = NULL;
	rk_xfer_peer_destroy(w->usr.peer);
	w->usr.peer = NULL;
	r = rk_xfer_post_prepared(pp, NULL, &e, &b);
	if (r != -ESTALE)
		LT_FAIL("prepared batch of a destroyed peer: %d, not -ESTALE", r);
	printf("prep: %s\n", e.msg);
	rk_xfer_prep_free(pp);
	printf("prep: WRITEs x3 and READs x2 landed, notifications deferred and immediate, "
	       "refusals and lifetimes as documented\n");
}

int main(int argc, char **argv)
{
	struct world w = {0};
	enum rk_xfer_mode mode;
	const char *what;

	lt_prog = "lib_xfer_life";
	if (argc < 3)
		LT_FAIL("usage: lib_xfer_life race|zero|running|prep mw|mr");
	what = argv[1];
	mode = !strcmp(argv[2], "mw") ? RK_XFER_MW : RK_XFER_MR;
	w.dev = lt_open_device(0);
	if (mode == RK_XFER_MW && !rk_xfer_mw_supported(w.dev)) {
		printf("lib_xfer_life %s mw: skipped (no memory windows)\n", what);
		rk_device_close(w.dev);
		return 0;
	}
	if (!strcmp(what, "zero") && mode != RK_XFER_MW)
		LT_FAIL("zero-based windows: mw only");
	world_up(&w, mode, !strcmp(what, "zero"));
	if (!strcmp(what, "running")) {
		/* each cuts lanes: a fresh pair of worlds for the next */
		running(&w);
		world_down(&w);
		world_up(&w, mode, 0);
		running_peer(&w);
		if (mode == RK_XFER_MW) {
			world_down(&w);
			world_up(&w, mode, 0);
			region_key(&w);
		}
	} else if (!strcmp(what, "zero")) {
		zero(&w);
	} else if (!strcmp(what, "race")) {
		race(&w);
	} else if (!strcmp(what, "prep")) {
		prep(&w);
	} else {
		LT_FAIL("unknown test %s", what);
	}
	world_down(&w);
	rk_device_close(w.dev);
	printf("lib_xfer_life %s %s: ok\n", what, argv[2]);
	return 0;
}
