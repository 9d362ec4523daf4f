/*
 * lib_xfer_flow.c - one-sided transfers (xfer.h) under pressure: full send
 * queues, foreign completions, deadlines, notifications after READs.
 *
 *   lib_xfer_flow queue MODE   a batch's deferred notification meets lane 0's
 *                              send queue full of foreign WRITEs: it waits
 *                              and goes out once the caller polled the
 *                              foreign completions away (handed to nobody);
 *                              a batch stuck behind foreign sends fails at
 *                              its deadline and leaves the lane connected
 *   lib_xfer_flow rnr MODE     the owner takes no notification: the one
 *                              beyond its receives fails its batch (RNR
 *                              retries exhausted), the delivered ones are
 *                              all taken although the owner's lanes went down
 *   lib_xfer_flow revoke mr    ibv_dereg_mr fails during a revoke: reported,
 *                              the export stays; revoked again, the key is dead
 *   lib_xfer_flow handle MODE  completions that are not this rk_xfer's
 *                              (the layer's tags, another QP) are returned
 *                              as not ours; two users on one CQ each claim
 *                              their own; a peer recreated 10 times on its
 *                              lanes takes their receives over
 *   lib_xfer_flow race MODE    a 64 MiB WRITE racing the revoke of its target:
 *                              nothing changes after rk_xfer_revoke returned
 *   lib_xfer_flow zero mw      zero-based windows: descriptors with address 0,
 *                              ops land at their offsets
 *   lib_xfer_flow running MODE a batch freed while running (its flushes still
 *                              claimed), the peer destroyed under a batch
 *                              (-ECANCELED); MW: the region's own key is
 *                              refused remotely
 * MODE: mw (skipped where the device has no windows) or mr. Both ends run
 * in this process over connected pairs.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "lt.h"
/* the segment's region, for the test that its own key grants nothing */
#include "../../lib/xfer_int.h"

/*
 * ibv_dereg_mr, wrapped at link time (-Wl,--wrap): fails while
 * fail_dereg > 0, as a driver may (the revoke test).
 */
int __real_ibv_dereg_mr(struct ibv_mr *mr);
int __wrap_ibv_dereg_mr(struct ibv_mr *mr);
static int fail_dereg;

int __wrap_ibv_dereg_mr(struct ibv_mr *mr)
{
	if (fail_dereg > 0) {
		fail_dereg--;
		return EBUSY;
	}
	return __real_ibv_dereg_mr(mr);
}

#define NLANES 2
#define BLK    4096u
#define BUF    (64u * 1024)

struct side {
	struct rk_conn *lanes[NLANES];
	struct rk_xfer *x;
	struct rk_xfer_peer *peer;
	uint8_t *buf;
	struct rk_xfer_seg *seg;
};

struct world {
	struct rk_device *dev;
	struct side own, usr;
	struct rk_xfer_remote *rem;
	uint64_t raddr;	  /* the owner's segment, from the descriptor */
	uint32_t rkey[2]; /* per lane, from the descriptor */
};

static const struct rk_conn_opts conn_opts = {.sq_depth = 64, .signal_every = 16};

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static int zero_based; /* the zero test's worlds */

static void world_up(struct world *w, enum rk_xfer_mode mode)
{
	struct rk_xfer_opts xo = {.mode = mode, .zero_based = zero_based};
	uint8_t desc[RK_XFER_DESC_MAX];
	struct rk_error e;
	size_t len;

	for (unsigned i = 0; i < NLANES; i++)
		lt_pair(w->dev, &conn_opts, &conn_opts, &w->own.lanes[i], &w->usr.lanes[i]);
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

static void world_down(struct world *w)
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

#define FOREIGN_ID 0x77

/* Fill the user's lane @l send queue with foreign 8-byte WRITEs (inline) to the owner's last block.
 */
static unsigned fill(struct world *w, unsigned l)
{
	struct rk_conn *c = w->usr.lanes[l];
	unsigned n = 0;

	while (rk_sq_room(c) > 0) {
		struct rk_wr wr = {.op = RK_OP_WRITE,
				   .wr_id = FOREIGN_ID,
				   .addr = w->usr.buf + BUF - 8,
				   .len = 8,
				   .remote_addr = w->raddr + BUF - 8,
				   .rkey = w->rkey[l]};
		struct rk_error e;

		LT_CHECK(rk_post(c, &wr, &e), &e);
		n++;
	}
	return n;
}

/*
 * Poll lane @l's CQ until its send queue has @room free again. Foreign
 * completions go to nobody (as an application's own loop would do);
 * the layer's are handed over only when @hand.
 */
static void drain(struct world *w, unsigned l, unsigned room, int hand)
{
	struct rk_conn *c = w->usr.lanes[l];
	int64_t until = lt_now_ms() + 10000;

	while (rk_sq_room(c) < room) {
		struct ibv_wc wc[16];
		struct rk_error e;
		int r = rk_cq_poll(rk_conn_cq(c), wc, 16, &e);

		LT_CHECK(r, &e);
		for (int i = 0; i < r; i++) {
			if (wc[i].wr_id == FOREIGN_ID) {
				if (wc[i].status != IBV_WC_SUCCESS)
					LT_FAIL("foreign WRITE: %s",
						ibv_wc_status_str(wc[i].status));
			} else if (hand) {
				rk_xfer_handle(w->usr.x, &wc[i]);
			} else {
				LT_FAIL("a layer completion (wr_id 0x%llx) while draining",
					(unsigned long long)wc[i].wr_id);
			}
		}
		if (lt_now_ms() > until)
			LT_FAIL("lane %u: send queue room %u, expected %u", l, rk_sq_room(c), room);
	}
}

/* Poll lane @l's CQ, handing everything over, until one of the layer's completions came. */
static void one_layer_completion(struct world *w, unsigned l)
{
	struct rk_conn *c = w->usr.lanes[l];
	int64_t until = lt_now_ms() + 10000;

	for (;;) {
		struct ibv_wc wc;
		struct rk_error e;
		int r = rk_cq_poll(rk_conn_cq(c), &wc, 1, &e);

		LT_CHECK(r, &e);
		if (r == 1) {
			if (!rk_xfer_handle(w->usr.x, &wc))
				LT_FAIL("lane %u: a completion not the layer's", l);
			if (wc.status != IBV_WC_SUCCESS)
				LT_FAIL("lane %u: %s", l, ibv_wc_status_str(wc.status));
			return;
		}
		if (lt_now_ms() > until)
			LT_FAIL("lane %u: no completion", l);
	}
}

static void queue(struct world *w)
{
	unsigned room0 = rk_sq_room(w->usr.lanes[0]), n;
	struct rk_xfer_batch_opts bo = {.timeout_ms = 20000, .notify = 1, .notif = 42};
	struct rk_xfer_op op[2];
	struct rk_xfer_batch *b;
	struct rk_error e;
	int64_t t0 = lt_now_ms();
	uint32_t v;
	int r;

	/* A WRITE on lane 0, a READ on lane 1: the notification waits for both. */
	lt_fill(w->usr.buf, BLK, 1);
	lt_fill(w->own.buf + 2 * BLK, BLK, 2);
	op[0] = (struct rk_xfer_op){RK_XFER_OP_WRITE, w->usr.seg, 0, w->rem, 0, BLK};
	op[1] = (struct rk_xfer_op){RK_XFER_OP_READ, w->usr.seg, 2 * BLK, w->rem, 2 * BLK, BLK};
	LT_CHECK(rk_xfer_post(w->usr.peer, op, 2, &bo, &e, &b), &e);
	one_layer_completion(w, 0);
	n = fill(w, 0);
	one_layer_completion(w, 1); /* the notification is due now: lane 0 has no room */
	r = rk_xfer_batch_check(b, &e);
	if (r != 0)
		LT_FAIL("the batch ended (%d: %s) with its notification unsent", r,
			r < 0 ? e.msg : "ok");
	printf("queue: lane 0 full (%u foreign WRITEs): notification waits, batch running\n", n);
	/* The application polls its own completions and hands the layer nothing. */
	drain(w, 0, room0, 0);
	r = rk_xfer_batch_wait(b, 5000, &e);
	if (r != 1)
		LT_FAIL("batch after the queue drained: %d (%s)", r, e.msg);
	rk_xfer_batch_free(b);
	LT_CHECK(rk_xfer_notif_wait(w->own.peer, 5000, &v, &e), &e);
	if (v != 42)
		LT_FAIL("notification %u", v);
	if (lt_check(w->own.buf, BLK, 1) >= 0 || lt_check(w->usr.buf + 2 * BLK, BLK, 2) >= 0)
		LT_FAIL("READ + WRITE batch: data differs");
	printf("queue: READ + WRITE batch notified once the room came, data checked\n");

	/* Stuck behind foreign sends to its deadline: the batch fails, the lane stays. */
	n = fill(w, 0);
	bo = (struct rk_xfer_batch_opts){.timeout_ms = 300};
	LT_CHECK(rk_xfer_post(w->usr.peer, op, 1, &bo, &e, &b), &e);
	usleep(400 * 1000);
	r = rk_xfer_batch_check(b, &e);
	if (r != -ETIMEDOUT)
		LT_FAIL("stuck batch after its deadline: %d (%s)", r, r < 0 ? e.msg : "");
	if (rk_xfer_batch_op_status(b, 0, NULL) != -ECANCELED)
		LT_FAIL("op 0 of the stuck batch: %d", rk_xfer_batch_op_status(b, 0, NULL));
	rk_xfer_batch_free(b);
	if (rk_conn_state(w->usr.lanes[0]) != RK_CONN_CONNECTED)
		LT_FAIL("the deadline of a batch that posted nothing cut lane 0");
	drain(w, 0, room0, 0);
	lt_fill(w->usr.buf, BLK, 3);
	LT_CHECK(rk_xfer_post(w->usr.peer, op, 1, NULL, &e, &b), &e);
	LT_CHECK(rk_xfer_batch_wait(b, -1, &e), &e);
	rk_xfer_batch_free(b);
	if (lt_check(w->own.buf, BLK, 3) >= 0)
		LT_FAIL("WRITE after the stuck batch: data differs");
	printf("queue: stuck batch failed at its deadline (%u foreign WRITEs ahead), lane kept; "
	       "%lld ms\n",
	       n, (long long)(lt_now_ms() - t0));
}

/*
 * The owner takes no notification: its receives run out, the next
 * notification is refused (RNR) and its batch fails saying so; the ones
 * delivered are all still taken, even after the owner's lanes went down.
 */
static void rnr(struct world *w)
{
	unsigned recvs = 16; /* rk_xfer_opts.notif_recvs's default */
	struct rk_xfer_op op = {RK_XFER_OP_WRITE, w->usr.seg, 0, w->rem, 0, BLK};
	struct rk_xfer_batch *b;
	struct rk_error e;
	int64_t t0 = lt_now_ms();
	uint32_t v;
	int r;

	for (unsigned n = 1; n <= recvs + 1; n++) {
		struct rk_xfer_batch_opts bo = {.timeout_ms = 10000, .notify = 1, .notif = n};

		LT_CHECK(rk_xfer_post(w->usr.peer, &op, 1, &bo, &e, &b), &e);
		r = rk_xfer_batch_wait(b, -1, &e);
		rk_xfer_batch_free(b);
		if (n <= recvs && r != 1)
			LT_FAIL("notified batch %u of %u: %d (%s)", n, recvs, r, e.msg);
		if (n > recvs) {
			if (r != -ECONNRESET || e.wc_status != IBV_WC_RNR_RETRY_EXC_ERR)
				LT_FAIL(
				    "notification %u with no receive left: %d, wc status %d (%s)",
				    n, r, e.wc_status, r < 0 ? e.msg : "");
			printf("rnr: notification %u refused: %s\n", n, e.msg);
		}
	}
	/* The owner's lanes go down before it looks: what arrived is still its. */
	for (unsigned i = 0; i < NLANES; i++)
		rk_conn_disconnect(w->own.lanes[i], 0, NULL);
	for (unsigned n = 1; n <= recvs; n++) {
		LT_CHECK(rk_xfer_notif_wait(w->own.peer, 1000, &v, &e), &e);
		if (v != n)
			LT_FAIL("notification %u, expected %u", v, n);
	}
	r = rk_xfer_notif_wait(w->own.peer, 1000, &v, &e);
	if (r != -ECONNRESET)
		LT_FAIL("after the %u delivered: %d", recvs, r);
	printf("rnr: %u notifications taken after the lanes went down, then peer gone; %lld ms\n",
	       recvs, (long long)(lt_now_ms() - t0));
}

/*
 * MR mode: the registration behind an export fails to go. The revoke says
 * so and the export stays revocable; revoked again, the key is dead.
 */
static void dereg_fails(struct world *w)
{
	struct rk_xfer_op op = {RK_XFER_OP_WRITE, w->usr.seg, 0, w->rem, 0, BLK};
	struct rk_xfer_batch *b;
	struct rk_error e;
	int r;

	if (rk_xfer_mode(w->own.x) != RK_XFER_MR) {
		printf("revoke: MR mode only\n");
		return;
	}
	memset(w->own.buf, 0x5a, BLK);
	fail_dereg = 1;
	r = rk_xfer_revoke(w->own.seg, w->own.peer, 1000, &e);
	if (r >= 0)
		LT_FAIL("revoke with ibv_dereg_mr failing: %d", r);
	printf("revoke: ibv_dereg_mr failed: %s\n", e.msg);
	r = rk_xfer_revoke(w->own.seg, w->own.peer, 1000, &e);
	if (r != 0)
		LT_FAIL("revoke again: %d (%s)", r, e.msg);
	lt_fill(w->usr.buf, BLK, 9);
	LT_CHECK(rk_xfer_post(w->usr.peer, &op, 1, NULL, &e, &b), &e);
	r = rk_xfer_batch_wait(b, -1, &e);
	rk_xfer_batch_free(b);
	if (r != -EREMOTEIO)
		LT_FAIL("WRITE after the revoke: %d (%s)", r, r < 0 ? e.msg : "");
	for (unsigned i = 0; i < BLK; i++)
		if (w->own.buf[i] != 0x5a)
			LT_FAIL("revoked memory changed at byte %u", i);
	printf("revoke: revoked on the second try, WRITE refused, memory intact\n");
}

/* A completion that no rk_xfer of this process made. */
static int claims_fake(struct rk_xfer *x, unsigned tag)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = (uint64_t)tag << 48 | (uint64_t)0x1234 << 16;
	wc.qp_num = 0xfffff0; /* no QP of ours */
	wc.status = IBV_WC_SUCCESS;
	return rk_xfer_handle(x, &wc);
}

/* Two users on one CQ: each claims its own completions and returns the other's. */
static void shared_cq(struct world *w)
{
	struct rk_conn_opts so = conn_opts;
	struct rk_conn *own[2], *usr[2];
	struct rk_xfer *x[2];
	struct rk_xfer_peer *op[2], *up[2];
	struct rk_xfer_remote *rem[2];
	struct rk_xfer_batch *b[2];
	struct rk_cq *cq;
	struct rk_error e;
	unsigned claimed[2] = {0, 0}, unclaimed = 0;
	int64_t until = lt_now_ms() + 10000;

	LT_CHECK(rk_cq_create(w->dev, NULL, &e, &cq), &e);
	so.cq = cq;
	for (unsigned i = 0; i < 2; i++) {
		uint8_t desc[RK_XFER_DESC_MAX];
		size_t len;
		struct rk_xfer_op o = {RK_XFER_OP_WRITE, NULL, i * BLK, NULL, i * BLK, BLK};

		lt_pair(w->dev, &conn_opts, &so, &own[i], &usr[i]);
		LT_CHECK(rk_xfer_create(w->dev, NULL, NULL, &e, &x[i]), &e);
		LT_CHECK(rk_xfer_peer_create(w->own.x, &own[i], 1, &e, &op[i]), &e);
		LT_CHECK(rk_xfer_peer_create(x[i], &usr[i], 1, &e, &up[i]), &e);
		LT_CHECK(rk_xfer_export(w->own.seg, op[i], RK_XFER_WRITE, desc, sizeof(desc), &len,
					5000, &e),
			 &e);
		LT_CHECK(rk_xfer_import(up[i], desc, len, &e, &rem[i]), &e);
		/* the local side: the world's user buffer, registered in this rk_xfer */
		LT_CHECK(rk_xfer_seg_reg(x[i], w->usr.buf, BUF, 0, &e, &o.local), &e);
		o.remote = rem[i];
		lt_fill(w->usr.buf + i * BLK, BLK, 20 + i);
		LT_CHECK(rk_xfer_post(up[i], &o, 1, NULL, &e, &b[i]), &e);
	}
	while (rk_xfer_batch_check(b[0], &e) == 0 || rk_xfer_batch_check(b[1], &e) == 0) {
		struct ibv_wc wc[8];
		int r = rk_cq_poll(cq, wc, 8, &e);

		LT_CHECK(r, &e);
		for (int k = 0; k < r; k++) {
			if (rk_xfer_handle(x[0], &wc[k]))
				claimed[0]++;
			else if (rk_xfer_handle(x[1], &wc[k]))
				claimed[1]++;
			else
				unclaimed++;
		}
		if (lt_now_ms() > until)
			LT_FAIL("shared CQ: batches %d %d after 10 s (claimed %u %u, unclaimed %u)",
				rk_xfer_batch_check(b[0], NULL), rk_xfer_batch_check(b[1], NULL),
				claimed[0], claimed[1], unclaimed);
	}
	for (unsigned i = 0; i < 2; i++) {
		LT_CHECK(rk_xfer_batch_check(b[i], &e), &e);
		if (lt_check(w->own.buf + i * BLK, BLK, 20 + i) >= 0)
			LT_FAIL("shared CQ: user %u's data differs", i);
	}
	printf("handle: two users on one CQ: %u and %u completions claimed, %u unclaimed\n",
	       claimed[0], claimed[1], unclaimed);
	for (unsigned i = 0; i < 2; i++) {
		rk_xfer_batch_free(b[i]);
		rk_xfer_remote_free(rem[i]);
		rk_xfer_peer_destroy(up[i]);
		rk_xfer_peer_destroy(op[i]);
	}
	for (unsigned i = 0; i < 2; i++) {
		rk_conn_destroy(usr[i]);
		rk_conn_destroy(own[i]);
		rk_xfer_destroy(x[i]); /* deregisters its segment */
	}
	rk_cq_destroy(cq);
}

static void handle(struct world *w)
{
	struct rk_xfer_op op = {RK_XFER_OP_WRITE, w->usr.seg, 0, w->rem, 0, BLK};
	unsigned room = rk_rq_room(w->own.lanes[0]);
	struct rk_error e;

	/* Our tags, no QP of ours: the caller's, not swallowed. */
	if (claims_fake(w->usr.x, RK_XFER_WRID_OP) || claims_fake(w->usr.x, RK_XFER_WRID_CTL) ||
	    claims_fake(w->usr.x, RK_XFER_WRID_NOTIF) || claims_fake(w->usr.x, 0))
		LT_FAIL("a completion of no QP of ours was claimed");
	printf("handle: completions of other QPs with the layer's tags returned as not ours\n");

	/* The owner's peer recreated on the same lanes: its receives are taken over. */
	for (unsigned i = 0; i < 10; i++) {
		rk_xfer_peer_destroy(w->own.peer);
		LT_CHECK(rk_xfer_peer_create(w->own.x, w->own.lanes, NLANES, &e, &w->own.peer), &e);
	}
	if (rk_rq_room(w->own.lanes[0]) != room)
		LT_FAIL("peer recreated 10 times: %u free receive slots, was %u",
			rk_rq_room(w->own.lanes[0]), room);
	/* The export went with the peer: export again, import the new generation. */
	{
		uint8_t desc[RK_XFER_DESC_MAX];
		size_t len;

		rk_xfer_remote_free(w->rem);
		LT_CHECK(rk_xfer_export(w->own.seg, w->own.peer, RK_XFER_READ | RK_XFER_WRITE, desc,
					sizeof(desc), &len, 5000, &e),
			 &e);
		LT_CHECK(rk_xfer_import(w->usr.peer, desc, len, &e, &w->rem), &e);
		op.remote = w->rem;
	}
	for (unsigned n = 1; n <= 40; n++) {
		struct rk_xfer_batch_opts bo = {.notify = 1, .notif = n};
		struct rk_xfer_batch *b;
		uint32_t v;

		LT_CHECK(rk_xfer_post(w->usr.peer, &op, 1, &bo, &e, &b), &e);
		LT_CHECK(rk_xfer_batch_wait(b, -1, &e), &e);
		rk_xfer_batch_free(b);
		LT_CHECK(rk_xfer_notif_wait(w->own.peer, 5000, &v, &e), &e);
		if (v != n)
			LT_FAIL("recreated peer: notification %u, expected %u", v, n);
	}
	printf("handle: peer recreated 10 times on its lanes: receives taken over, 40 "
	       "notifications\n");
	shared_cq(w);
}

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

int main(int argc, char **argv)
{
	struct world w = {0};
	enum rk_xfer_mode mode;
	const char *what;

	lt_prog = "lib_xfer_flow";
	if (argc < 3)
		LT_FAIL("usage: lib_xfer_flow queue|rnr|revoke|handle|race|zero|running mw|mr");
	what = argv[1];
	mode = !strcmp(argv[2], "mw") ? RK_XFER_MW : RK_XFER_MR;
	w.dev = lt_open_device(0);
	if (mode == RK_XFER_MW && !rk_xfer_mw_supported(w.dev)) {
		printf("lib_xfer_flow %s mw: skipped (no memory windows)\n", what);
		rk_device_close(w.dev);
		return 0;
	}
	zero_based = !strcmp(what, "zero");
	if (zero_based && mode != RK_XFER_MW)
		LT_FAIL("zero-based windows: mw only");
	world_up(&w, mode);
	if (!strcmp(what, "queue"))
		queue(&w);
	else if (!strcmp(what, "rnr"))
		rnr(&w);
	else if (!strcmp(what, "running")) {
		/* each cuts lanes: a fresh pair of worlds for the next */
		running(&w);
		world_down(&w);
		world_up(&w, mode);
		running_peer(&w);
		if (mode == RK_XFER_MW) {
			world_down(&w);
			world_up(&w, mode);
			region_key(&w);
		}
	} else if (!strcmp(what, "zero"))
		zero(&w);
	else if (!strcmp(what, "race"))
		race(&w);
	else if (!strcmp(what, "handle"))
		handle(&w);
	else if (!strcmp(what, "revoke"))
		dereg_fails(&w);
	else
		LT_FAIL("unknown test %s", what);
	world_down(&w);
	rk_device_close(w.dev);
	printf("lib_xfer_flow %s %s: ok\n", what, argv[2]);
	return 0;
}
