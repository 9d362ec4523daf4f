/*
 * xfer_poll.c - completions of the one-sided layer (xfer.h): claiming them
 * by wr_id and QP (rk_xfer_handle), and the blocking waits that poll the
 * lanes' CQs themselves with a deadline (batches, notifications, and the
 * window binds and invalidations of xfer.c).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "rk_internal.h"
#include "xfer_int.h"

static void foreign(struct rk_xfer *x, const struct ibv_wc *wc)
{
	if (x->opts.on_foreign)
		x->opts.on_foreign(x->opts.foreign_arg, wc);
	else
		x->st.foreign++;
}

/* Poll each CQ once, handing every completion over. */
static int poll_cqs(struct rk_xfer *x, struct rk_cq *const *cqs, unsigned ncq)
{
	struct ibv_wc wc[16];
	int got = 0;

	for (unsigned k = 0; k < ncq; k++) {
		int r = rk_cq_poll(cqs[k], wc, 16, NULL);

		for (int i = 0; i < r; i++)
			if (!rk_xfer_handle(x, &wc[i]))
				foreign(x, &wc[i]);
		got += r > 0 ? r : 0;
	}
	return got;
}

/*
 * Sleep on several CQs' channels at once, up to @wait_ms: arm each, poll
 * again (what came before arming is in the CQ, not in the fd), then
 * poll(2) on their fds. A busy-mode CQ has no channel: then return at
 * once and the caller spins, as that mode asks.
 */
static int wait_cqs(struct rk_xfer *x, struct rk_cq *const *cqs, unsigned ncq, int wait_ms)
{
	struct pollfd pfd[RK_XFER_LANES_MAX];
	int got;

	for (unsigned k = 0; k < ncq; k++) {
		pfd[k].fd = rk_cq_fd(cqs[k]);
		pfd[k].events = POLLIN;
		if (pfd[k].fd < 0 || rk_cq_arm(cqs[k], NULL))
			return 0;
	}
	got = poll_cqs(x, cqs, ncq);
	if (got)
		return got;
	if (poll(pfd, ncq, wait_ms) <= 0)
		return 0;
	return poll_cqs(x, cqs, ncq);
}

int rk__xfer_poll(struct rk_xfer *x, struct rk_conn *const *lanes, unsigned nlanes, int wait_ms)
{
	struct rk_cq *cqs[RK_XFER_LANES_MAX];
	struct ibv_wc wc[16];
	unsigned ncq = 0;
	int got, r;

	for (unsigned i = 0; i < nlanes; i++) {
		struct rk_cq *cq = rk_conn_cq(lanes[i]);
		unsigned k;

		for (k = 0; k < ncq && cqs[k] != cq; k++)
			;
		if (k == ncq)
			cqs[ncq++] = cq;
	}
	got = poll_cqs(x, cqs, ncq);
	if (got || wait_ms == 0 || !ncq)
		return got;
	if (ncq > 1)
		return wait_cqs(x, cqs, ncq, wait_ms);
	r = rk_cq_wait(cqs[0], wc, 16, wait_ms, NULL);
	for (int i = 0; i < r; i++)
		if (!rk_xfer_handle(x, &wc[i]))
			foreign(x, &wc[i]);
	return r > 0 ? r : 0;
}

static int claim(struct rk_xfer *x, const struct ibv_wc *wc)
{
	unsigned tag = (unsigned)(wc->wr_id >> 48), lane;

	if (tag == RK_XFER_WRID_OP) {
		unsigned slot = (unsigned)(wc->wr_id >> 32) & 0xffff;
		unsigned serial = (unsigned)(wc->wr_id >> 16) & 0xffff;
		struct rk_xfer_batch *b = slot < x->opts.max_batches ? x->slots[slot] : NULL;

		/* another rk_xfer's on a shared CQ may carry the same tag: the QP decides */
		for (unsigned l = 0; b && b->serial == serial && l < b->peer->nlanes; l++)
			if (rk_conn_qp_num(b->peer->lanes[l]) == wc->qp_num) {
				rk__xfer_op_completion(b, (unsigned)wc->wr_id & 0xffff, wc);
				return 1;
			}
		/* Of a batch released already (a flush) if on one of our lanes, else not ours. */
		return rk__xfer_qp_peer(x, wc->qp_num, &lane) != NULL;
	}
	if (tag == RK_XFER_WRID_CTL) {
		uint64_t id = wc->wr_id & 0xffffffffffffull;

		if (!rk__xfer_qp_peer(x, wc->qp_num, &lane))
			return 0;
		if (id >= (x->ctl_base & 0xffffffffffffull) &&
		    id < (x->ctl_seq & 0xffffffffffffull) && x->ctl_pending) {
			x->ctl_pending--;
			if (wc->status != IBV_WC_SUCCESS && !x->ctl_status)
				x->ctl_status = (int)wc->status;
		}
		return 1;
	}
	if (tag == RK_XFER_WRID_NOTIF)
		return rk__xfer_notif_arrival(x, wc->wr_id, wc);
	return 0;
}

int rk_xfer_handle(struct rk_xfer *x, const struct ibv_wc *wc)
{
	int mine = claim(x, wc);

	/* Any completion, ours or not, may have freed the send-queue room chains wait for. */
	if (x->npending)
		rk__xfer_pump_all(x);
	return mine;
}

int rk_xfer_batch_wait(struct rk_xfer_batch *b, int timeout_ms, struct rk_error *err)
{
	int64_t deadline = timeout_ms < 0 ? b->deadline : rk__deadline(timeout_ms);
	int r;

	/* Poll at least once, even with a timeout of 0. */
	while ((r = rk_xfer_batch_check(b, err)) == 0) {
		int left = rk__ms_left(deadline);

		rk__xfer_poll(b->x, b->peer->lanes, b->peer->nlanes,
			      left < 0 || left > 20 ? 20 : left);
		if (left == 0 && timeout_ms >= 0) {
			r = rk_xfer_batch_check(b, err);
			if (r)
				return r;
			return rk__err_set(err, ETIMEDOUT, "rk_xfer_batch_wait",
					   "batch still running after %d ms", timeout_ms);
		}
	}
	return r;
}

int rk_xfer_notif_wait(struct rk_xfer_peer *p, int timeout_ms, uint32_t *value,
		       struct rk_error *err)
{
	int64_t deadline = rk__deadline(timeout_ms);

	for (;;) {
		unsigned up = 0;
		int left;

		if (rk_xfer_notif_take(p, value))
			return 1;
		for (unsigned l = 0; l < p->nlanes; l++)
			up += rk_conn_state(p->lanes[l]) == RK_CONN_CONNECTED;
		if (!up) {
			/*
			 * Notifications that arrived before the lanes went down
			 * are still in the CQs, ahead of the flushed receives.
			 */
			while (!p->nq_count && rk__xfer_poll(p->x, p->lanes, p->nlanes, 0) > 0)
				;
			if (rk_xfer_notif_take(p, value))
				return 1;
			return rk__err_set(err, ECONNRESET, "rk_xfer_notif_wait",
					   "peer gone: no lane is connected");
		}
		left = rk__ms_left(deadline);
		rk__xfer_poll(p->x, p->lanes, p->nlanes, left < 0 || left > 20 ? 20 : left);
		if (left == 0) {
			if (rk_xfer_notif_take(p, value))
				return 1;
			return rk__err_set(err, ETIMEDOUT, "rk_xfer_notif_wait",
					   "no notification in %d ms", timeout_ms);
		}
	}
}
