/*
 * cq.c - completion queues: batch polling, and busy / event / adaptive waits.
 *
 * Every completion passes through fix_wc(): the wr_id verbs returns is a
 * sequence number the connection assigned when posting; it is translated
 * back to the caller's wr_id, and the slots up to it are retired. Failed
 * completions become their connection's first error.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "rk_internal.h"

#define ACK_BATCH 64 /* ibv_ack_cq_events takes a mutex: do it once per batch */

int rk_cq_create(struct rk_device *dev, const struct rk_cq_opts *opts, struct rk_error *err,
		 struct rk_cq **out)
{
	struct rk_cq_opts def = {0};
	struct rk_cq *cq;
	int r;

	if (!opts)
		opts = &def;
	*out = NULL;
	if (opts->mode > RK_WAIT_ADAPTIVE)
		return rk__err_set(err, EINVAL, "rk_cq_create", "unknown wait mode %d", opts->mode);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return rk__err_set(err, ENOMEM, "rk_cq_create", NULL);
	cq->dev = dev;
	cq->mode = opts->mode;
	cq->spin_us = opts->spin_us ? opts->spin_us : 50;
	cq->depth = opts->depth ? opts->depth : 512;
	if (cq->depth > dev->info.max_cqe) {
		r = rk__err_set(err, EINVAL, "rk_cq_create", "depth %u exceeds the device's %u",
				cq->depth, dev->info.max_cqe);
		goto fail;
	}
	if (cq->mode != RK_WAIT_BUSY) {
		cq->ch = ibv_create_comp_channel(dev->ctx);
		if (!cq->ch) {
			r = rk__err_sys(err, "ibv_create_comp_channel", NULL);
			goto fail;
		}
		if (rk__set_nonblock(cq->ch->fd)) {
			r = rk__err_sys(err, "fcntl", "completion channel");
			goto fail;
		}
	}
	cq->cq = ibv_create_cq(dev->ctx, (int)cq->depth, cq, cq->ch, 0);
	if (!cq->cq) {
		r = rk__err_sys(err, "ibv_create_cq", "depth %u", cq->depth);
		goto fail;
	}
	*out = cq;
	return 0;
fail:
	rk_cq_destroy(cq);
	return r;
}

void rk_cq_destroy(struct rk_cq *cq)
{
	int r;

	if (!cq)
		return;
	if (cq->nmembers)
		rk_warn("rk_cq_destroy: %u connections still use this CQ", cq->nmembers);
	if (cq->cq) {
		if (cq->unacked)
			ibv_ack_cq_events(cq->cq, cq->unacked);
		r = ibv_destroy_cq(cq->cq);
		if (r)
			rk_warn("ibv_destroy_cq: %s", strerror(r));
	}
	if (cq->ch && ibv_destroy_comp_channel(cq->ch))
		rk_warn("ibv_destroy_comp_channel: %s", strerror(errno));
	free(cq->members);
	free(cq);
}

int rk__cq_attach(struct rk_cq *cq, struct rk_cq_member *m)
{
	if (cq->nmembers == cq->cap) {
		unsigned cap = cq->cap ? cq->cap * 2 : 4;
		struct rk_cq_member **n = realloc(cq->members, cap * sizeof(struct rk_cq_member *));

		if (!n)
			return -ENOMEM;
		cq->members = n;
		cq->cap = cap;
	}
	cq->members[cq->nmembers++] = m;
	return 0;
}

void rk__cq_detach(struct rk_cq *cq, struct rk_cq_member *m)
{
	for (unsigned i = 0; i < cq->nmembers; i++)
		if (cq->members[i] == m) {
			cq->members[i] = cq->members[--cq->nmembers];
			if (cq->last == m)
				cq->last = NULL;
			return;
		}
}

/* The QP's member, or NULL: one that is gone (detached before its QP was destroyed). */
static __attribute__((noinline)) struct rk_cq_member *find_member_slow(struct rk_cq *cq,
								       uint32_t qp_num)
{
	for (unsigned i = 0; i < cq->nmembers; i++)
		if (cq->members[i]->qp_num == qp_num)
			return cq->last = cq->members[i];
	return NULL;
}

/* Completions come in runs from one QP: look at the last one's first. */
static inline struct rk_cq_member *find_member(struct rk_cq *cq, uint32_t qp_num)
{
	if (cq->last && cq->last->qp_num == qp_num)
		return cq->last;
	return find_member_slow(cq, qp_num);
}

/* A failed completion: reported to the QP's owner, which keeps the first. */
static __attribute__((noinline, cold)) void wc_failed(struct rk_cq_member *m,
						      const struct ibv_wc *wc)
{
	if (m->on_fail)
		m->on_fail(m, wc);
}

/* Translate wc->wr_id back and retire slots. 0: keep the completion, -1: drop it. */
static inline int fix_wc(struct rk_cq *cq, struct ibv_wc *wc)
{
	struct rk_cq_member *m = find_member(cq, wc->qp_num);
	uint64_t seq = wc->wr_id & ~RK_RECV_TAG;

	if (__builtin_expect(!m, 0)) {
		rk_dbg("dropping a completion of qp 0x%x, which is gone", wc->qp_num);
		return -1;
	}
	if (wc->wr_id & RK_RECV_TAG) {
		if (seq < m->rq_tail || seq >= m->rq_head)
			return -1;
		wc->wr_id = m->rq_ids[seq & m->rq_mask];
		m->rq_tail = seq + 1;
	} else {
		if (seq < m->sq_tail || seq >= m->sq_head)
			return -1;
		wc->wr_id = m->sq_ids[seq & m->sq_mask];
		m->sq_tail = seq + 1;
	}
	if (__builtin_expect(wc->status != IBV_WC_SUCCESS, 0))
		wc_failed(m, wc);
	return 0;
}

static __attribute__((noinline, cold)) int poll_failed(struct rk_error *err)
{
	return rk__err_set(err, EIO, "ibv_poll_cq", "CQ in error (overrun?)");
}

/* rk_cq_take from completion @i on: any completion, kept or dropped. */
static __attribute__((noinline)) int take_slow(struct rk_cq *cq, struct ibv_wc *wc, int i, int n)
{
	int kept = i;

	for (; i < n; i++) {
		if (fix_wc(cq, &wc[i]))
			continue;
		if (kept != i)
			wc[kept] = wc[i];
		kept++;
	}
	return kept;
}

/*
 * Completion @wc of member @m, a success: its wr_id translated back and its
 * slots retired. 0, or -1 when the sequence number is outside the window
 * of posted WRs (stale or foreign: take_slow() drops it). One compare per
 * window, tail <= seq < head as seq - tail < head - tail (unsigned: a seq
 * below tail wraps far above the window). No division: the slot is the
 * sequence number masked.
 */
static inline __attribute__((always_inline)) int take_one(struct rk_cq_member *m, struct ibv_wc *wc)
{
	const uint64_t id = wc->wr_id;

	/* A send's sequence number is its id: the tag is cleared for receives only. */
	if (id & RK_RECV_TAG) {
		const uint64_t seq = id & ~RK_RECV_TAG;
		uint64_t tail = m->rq_tail;

		if (__builtin_expect(seq - tail >= m->rq_head - tail, 0))
			return -1;
		wc->wr_id = m->rq_ids[seq & m->rq_mask];
		m->rq_tail = seq + 1;
	} else {
		uint64_t tail = m->sq_tail;

		if (__builtin_expect(id - tail >= m->sq_head - tail, 0))
			return -1;
		wc->wr_id = m->sq_ids[id & m->sq_mask];
		m->sq_tail = id + 1;
	}
	return 0;
}

/*
 * The common case inline and call-free (no registers to save): a
 * successful completion of the QP the previous one was for, with a
 * sequence number in range. Anything else goes to take_slow() from there.
 */
static inline __attribute__((always_inline)) int take(struct rk_cq *cq, struct ibv_wc *wc, int n)
{
	struct rk_cq_member *m = cq->last;

	if (__builtin_expect(!m, 0))
		return take_slow(cq, wc, 0, n);
	for (int i = 0; i < n; i++)
		if (__builtin_expect(wc[i].qp_num != m->qp_num || wc[i].status != IBV_WC_SUCCESS ||
					 take_one(m, &wc[i]),
				     0))
			return take_slow(cq, wc, i, n);
	return n;
}

/* rk_cq_take() of anything but one completion of the last QP in its window. */
static __attribute__((noinline)) int take_any(struct rk_cq *cq, struct ibv_wc *wc, int n)
{
	return take(cq, wc, n);
}

/*
 * One completion, a latency loop's usual catch, has its own lines: no
 * loop to set up, nothing to save, and the rest is a tail call with the
 * arguments where they came (take() inline here would move them aside).
 * Declared inline, as rk_post_prepared: under link-time optimization a
 * loop of a program linked with the static library takes a completion
 * with no call (and with @n known, one test less).
 */
inline int rk_cq_take(struct rk_cq *cq, struct ibv_wc *wc, int n)
{
	struct rk_cq_member *m = cq->last;

	if (__builtin_expect(n == 1 && m, 1) && wc->qp_num == m->qp_num &&
	    wc->status == IBV_WC_SUCCESS && !take_one(m, wc))
		return 1;
	return take_any(cq, wc, n);
}

/* One call into the provider; the translation of what came is inline. */
int rk_cq_poll(struct rk_cq *cq, struct ibv_wc *wc, int n, struct rk_error *err)
{
	int r = ibv_poll_cq(cq->cq, n, wc);

	if (r <= 0)
		return r < 0 ? poll_failed(err) : 0;
	return take(cq, wc, r);
}

int rk__cq_arm_unarmed(struct rk_cq *cq, struct rk_error *err)
{
	int r = ibv_req_notify_cq(cq->cq, 0);

	if (r)
		return rk__err_ret(err, r, "ibv_req_notify_cq", NULL);
	cq->armed = 1;
	return 0;
}

/* Read every pending channel event; ack in batches. */
static int consume_events(struct rk_cq *cq, struct rk_error *err)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	while (ibv_get_cq_event(cq->ch, &ev_cq, &ev_ctx) == 0) {
		cq->unacked++;
		cq->events++;
		cq->armed = 0;
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		return rk__err_sys(err, "ibv_get_cq_event", NULL);
	if (cq->unacked >= ACK_BATCH) {
		ibv_ack_cq_events(cq->cq, cq->unacked);
		cq->unacked = 0;
	}
	return 0;
}

int rk_cq_arm(struct rk_cq *cq, struct rk_error *err)
{
	int r;

	if (!cq->ch)
		return rk__err_set(err, EINVAL, "rk_cq_arm", "busy-mode CQ has no channel");
	r = consume_events(cq, err);
	if (r)
		return r;
	return cq->armed ? 0 : rk__cq_arm_unarmed(cq, err);
}

static int wait_busy(struct rk_cq *cq, struct ibv_wc *wc, int n, int64_t until_us,
		     struct rk_error *err)
{
	for (unsigned spins = 0;; spins++) {
		int r = rk_cq_poll(cq, wc, n, err);

		if (r)
			return r;
		if ((spins & 63) == 0 && until_us >= 0 && rk__now_us() >= until_us)
			return -ETIMEDOUT;
	}
}

/*
 * One channel event, if there is one (the fd is readable, or a wake-up was
 * spurious): a CQ armed once raises at most one event, so one read is
 * enough, where consume_events() reads until EAGAIN (a second system call).
 */
static int consume_one(struct rk_cq *cq, struct rk_error *err)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	if (ibv_get_cq_event(cq->ch, &ev_cq, &ev_ctx) == 0) {
		cq->unacked++;
		cq->events++;
		cq->armed = 0;
	} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
		return rk__err_sys(err, "ibv_get_cq_event", NULL);
	}
	if (cq->unacked >= ACK_BATCH) {
		ibv_ack_cq_events(cq->cq, cq->unacked);
		cq->unacked = 0;
	}
	return 0;
}

/*
 * Sleep on the channel; the caller has just polled the CQ and found it
 * empty. A CQ not armed is armed and polled again, because a completion
 * that arrived before ibv_req_notify_cq raises no event. One that is still
 * armed (an earlier wait returned before its event came) needs neither:
 * its event is in the fd, or comes with the next completion. After a
 * wake-up the event is read and the CQ polled, and a wait that finds
 * completions returns without arming again: the next wait arms only if it
 * has to sleep. A SEND answered in event mode thus costs the provider's
 * req_notify, the poll() and one read of the channel, and a completion
 * already there when the wait begins (a READ on Soft-RoCE) none of them.
 */
static int wait_event(struct rk_cq *cq, struct ibv_wc *wc, int n, int64_t deadline_ms,
		      struct rk_error *err)
{
	struct pollfd p = {.fd = cq->ch->fd, .events = POLLIN};

	for (;;) {
		int r;

		if (!cq->armed) {
			r = rk__cq_arm_unarmed(cq, err);
			if (!r)
				r = rk_cq_poll(cq, wc, n, err);
			if (r)
				return r;
		}
		r = poll(&p, 1, rk__ms_left(deadline_ms));
		if (r < 0 && errno != EINTR)
			return rk__err_sys(err, "poll", "completion channel");
		if (r == 0)
			return rk_cq_poll(cq, wc, n, err) ?: -ETIMEDOUT;
		if (r > 0) {
			r = consume_one(cq, err);
			if (r)
				return r;
		}
		r = rk_cq_poll(cq, wc, n, err);
		if (r)
			return r;
	}
}

/*
 * A completion already in the CQ is returned by the first poll, before
 * any clock reading or system call; the deadline starts after it.
 */
int rk_cq_wait(struct rk_cq *cq, struct ibv_wc *wc, int n, int timeout_ms, struct rk_error *err)
{
	int64_t deadline, spin_until;
	int r = rk_cq_poll(cq, wc, n, err);

	if (r)
		return r;
	deadline = rk__deadline(timeout_ms);
	if (cq->mode == RK_WAIT_BUSY) {
		r = wait_busy(cq, wc, n, deadline < 0 ? -1 : deadline * 1000, err);
	} else {
		if (cq->mode == RK_WAIT_ADAPTIVE) {
			spin_until = rk__now_us() + cq->spin_us;
			if (deadline >= 0 && spin_until > deadline * 1000)
				spin_until = deadline * 1000;
			r = wait_busy(cq, wc, n, spin_until, err);
			if (r != -ETIMEDOUT)
				return r;
		}
		r = wait_event(cq, wc, n, deadline, err);
	}
	if (r == -ETIMEDOUT)
		rk__err_set(err, ETIMEDOUT, "rk_cq_wait", "no completion within %d ms", timeout_ms);
	return r;
}

int rk_cq_fd(const struct rk_cq *cq)
{
	return cq->ch ? cq->ch->fd : -1;
}

enum rk_wait_mode rk_cq_mode(const struct rk_cq *cq)
{
	return cq->mode;
}

struct ibv_cq *rk_cq_ibv(const struct rk_cq *cq)
{
	return cq->cq;
}

uint64_t rk_cq_events(const struct rk_cq *cq)
{
	return cq->events;
}

int rk__cq_consume_one(struct rk_cq *cq, struct rk_error *err)
{
	return consume_one(cq, err);
}
