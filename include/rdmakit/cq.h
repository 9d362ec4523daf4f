/*
 * rdmakit/cq.h - completion queues and the three ways to wait on them.
 *
 *  - RK_WAIT_BUSY: spin on ibv_poll_cq. Lowest latency, one core at 100 %.
 *  - RK_WAIT_EVENT: sleep on the completion channel (ibv_req_notify_cq, then
 *    poll() on its fd). Costs a wake-up per burst; almost no CPU when idle.
 *  - RK_WAIT_ADAPTIVE: spin for a short while (spin_us), then sleep as in
 *    event mode. Busy-poll latency under load, event-mode CPU when idle.
 *
 * Polling is batched: one call returns up to n completions. The library
 * rewrites each completion's wr_id back to the caller's and retires the
 * send-queue slots the completion covers (selective signaling), so always
 * poll through rk_cq_poll() / rk_cq_wait(), never ibv_poll_cq() directly.
 *
 * Event loops: rk_cq_fd() is the completion channel's fd (non-blocking).
 * When it is readable call rk_cq_arm() (reads and acks the events, asks for
 * the next one) and then rk_cq_poll() until it returns 0.
 *
 * Thread-safety: one thread at a time per CQ, and that thread also posts on
 * the connections using it.
 */
#ifndef RDMAKIT_CQ_H
#define RDMAKIT_CQ_H

#include <stdint.h>

#include <infiniband/verbs.h>

#include <rdmakit/common.h>
#include <rdmakit/device.h>
#include <rdmakit/error.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rk_wait_mode {
	RK_WAIT_BUSY = 0,
	RK_WAIT_EVENT = 1,
	RK_WAIT_ADAPTIVE = 2,
};

struct rk_cq;

struct rk_cq_opts {
	uint32_t depth;		/* entries; 0 = 512 (capped by the device) */
	enum rk_wait_mode mode; /* how rk_cq_wait() waits */
	uint32_t spin_us;	/* adaptive: spin this long before sleeping; 0 = 50 */
};

/*
 * rk_cq_create - a CQ on @dev, with a completion channel unless the mode is
 * RK_WAIT_BUSY. Owned by the caller; destroy it after every connection that
 * uses it.
 */
RK_API int rk_cq_create(struct rk_device *dev, const struct rk_cq_opts *opts, struct rk_error *err,
			struct rk_cq **out);

/* rk_cq_destroy - destroy the CQ, acking all channel events. Accepts NULL. */
RK_API void rk_cq_destroy(struct rk_cq *cq);

/*
 * rk_cq_poll - take up to @n completions without waiting. Returns the count
 * (0 if none) or a negative errno. Failed completions are returned like any
 * other (check wc.status; rk_error_from_wc() decodes them) and are also
 * recorded as their connection's first error. Cost: one ibv_poll_cq (no
 * system call) and a few dozen instructions per completion to map it back
 * to its connection and wr_id; nothing is allocated.
 */
RK_API int rk_cq_poll(struct rk_cq *cq, struct ibv_wc *wc, int n, struct rk_error *err);

/*
 * rk_cq_take - what rk_cq_poll does after its ibv_poll_cq, for a caller
 * that polled rk_cq_ibv(@cq) itself: the @n completions in @wc are mapped
 * back to their connections and wr_ids, their slots retired, failed ones
 * recorded as their connection's first error. Completions of a QP that is
 * gone are dropped and the rest moved up; returns how many are left. Lets
 * a latency loop spin on ibv_poll_cq alone (one indirect call, as
 * perftest's does) and pay for the translation only once something came.
 * Every completion polled from the CQ must come here, at once and in
 * order, or the connections' slots are never retired. A completion whose
 * sequence number is outside its connection's window of posted WRs (stale
 * or foreign) is dropped, never translated. Cost: about 30 instructions
 * for one completion (gcc 12, -O2), no division. Same thread-safety as
 * rk_cq_poll.
 */
RK_API int rk_cq_take(struct rk_cq *cq, struct ibv_wc *wc, int n);

/*
 * rk_cq_wait - wait in the CQ's mode until at least one completion is there
 * (returns 1..@n) or @timeout_ms passes (-ETIMEDOUT; -1 waits forever).
 * Cost: a completion already in the CQ is returned by one rk_cq_poll, with
 * no clock reading and no system call, in every mode. Event mode, a sleep
 * costs ibv_req_notify_cq (only when the CQ is not armed already), poll()
 * and one read of the channel; a wait that finds completions after a
 * wake-up returns without arming again.
 */
RK_API int rk_cq_wait(struct rk_cq *cq, struct ibv_wc *wc, int n, int timeout_ms,
		      struct rk_error *err);

/* rk_cq_fd - the completion channel fd for epoll, or -1 in busy mode. */
RK_API int rk_cq_fd(const struct rk_cq *cq);

/*
 * rk_cq_arm - consume the channel's pending events (acks are batched) and
 * request a notification for the next completion. Poll afterwards: a
 * completion that arrived before arming is in the CQ, not in the fd.
 */
RK_API int rk_cq_arm(struct rk_cq *cq, struct rk_error *err);

/* rk_cq_mode - the wait mode given at creation. */
RK_API enum rk_wait_mode rk_cq_mode(const struct rk_cq *cq);

/* rk_cq_ibv - the struct ibv_cq (escape hatch; poll it only to hand what comes to rk_cq_take). */
RK_API struct ibv_cq *rk_cq_ibv(const struct rk_cq *cq);

/* rk_cq_events - how many channel events were received (for statistics). */
RK_API uint64_t rk_cq_events(const struct rk_cq *cq);

#ifdef __cplusplus
}
#endif

#endif
