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
 * MODE: mw (skipped where the device has no windows) or mr. Both ends run
 * in this process over connected pairs (xfer_world.c).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "xfer_world.h"

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
	struct rk_conn_opts so = xw_conn_opts;
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

		lt_pair(w->dev, &xw_conn_opts, &so, &own[i], &usr[i]);
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

int main(int argc, char **argv)
{
	struct world w = {0};
	enum rk_xfer_mode mode;
	const char *what;

	lt_prog = "lib_xfer_flow";
	if (argc < 3)
		LT_FAIL("usage: lib_xfer_flow queue|rnr|revoke|handle mw|mr");
	what = argv[1];
	mode = !strcmp(argv[2], "mw") ? RK_XFER_MW : RK_XFER_MR;
	w.dev = lt_open_device(0);
	if (mode == RK_XFER_MW && !rk_xfer_mw_supported(w.dev)) {
		printf("lib_xfer_flow %s mw: skipped (no memory windows)\n", what);
		rk_device_close(w.dev);
		return 0;
	}
	world_up(&w, mode, 0);
	if (!strcmp(what, "queue"))
		queue(&w);
	else if (!strcmp(what, "rnr"))
		rnr(&w);
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
