/*
 * rdmakit/conn.h - a connection: one RC queue pair and its completion queue.
 *
 * A connection is made either manually (rk_conn_create, exchange
 * rk_oob_info with the peer out of band, rk_conn_connect) or with rdma_cm
 * (cm.h). Either way the result is the same handle and the same data path
 * (post.h, cq.h).
 *
 * Queue depths and the inline size are checked against the device. By
 * default each connection has its own CQ (used for both queues); pass
 * opts.cq to share one CQ between connections. The QP lives in the
 * device's PD unless opts.pd names another (pd.h): the peer's RDMA WRITE
 * and READ then reach only memory registered in that PD.
 *
 * Transport timers are finite: the defaults (ACK timeout 17 = 0.5 s,
 * retry_cnt 6, rnr_retry 6) survive slow Soft-RoCE under emulation yet
 * report a dead peer within about five seconds as a failed completion
 * (RETRY_EXC_ERR).
 *
 * Thread-safety: one thread at a time per connection (post, poll, progress).
 * Different connections may be used from different threads if they do not
 * share a CQ.
 */
#ifndef RDMAKIT_CONN_H
#define RDMAKIT_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <rdmakit/common.h>
#include <rdmakit/cq.h>
#include <rdmakit/device.h>
#include <rdmakit/error.h>
#include <rdmakit/oob.h>
#include <rdmakit/pd.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rk_conn;

/*
 * Called once the QP exists and before the peer can send: post receives
 * here so the peer's first SEND finds one. Return 0 or a negative errno
 * (the connection attempt then fails).
 */
typedef int (*rk_conn_prepare_fn)(struct rk_conn *conn, void *arg);

struct rk_conn_opts {
	uint32_t sq_depth;	     /* send queue; 0 = 128 */
	uint32_t rq_depth;	     /* receive queue; 0 = 128 */
	uint32_t max_send_sge;	     /* 0 = 1 */
	uint32_t max_recv_sge;	     /* 0 = 1 */
	uint32_t max_inline;	     /* bytes sent inline; 0 = none */
	uint32_t signal_every;	     /* selective signaling: request a completion every
					N send WRs (0/1 = every WR), see post.h; capped
					at half the send queue so room always returns */
	struct rk_cq *cq;	     /* shared CQ; NULL = a CQ of our own: */
	enum rk_wait_mode wait_mode; /* ... its wait mode */
	uint32_t cq_depth;	     /* ... its depth; 0 = sq_depth + rq_depth */
	/* Transport; 0 selects the default. */
	uint8_t ack_timeout;	    /* 4.096 us * 2^n; default 17 (0.5 s) */
	uint8_t retry_cnt;	    /* 1..7; default 6 (rxe retries forever at 7) */
	uint8_t rnr_retry;	    /* 1..6 (7 would be infinite); default 6 */
	uint8_t min_rnr_timer;	    /* IB encoding; default 20 (10.24 ms): patient with
				       slow receivers; 12 (0.64 ms) suits a benchmark
				       whose receiver keeps receives posted */
	uint8_t max_rd_atomic;	    /* RDMA READs in flight each way; default
				       min(16, device caps) */
	enum ibv_mtu max_mtu;	    /* never use a larger path MTU; 0 = port's */
	rk_conn_prepare_fn prepare; /* optional, see above */
	void *prepare_arg;
	struct rk_pd *pd; /* the QP's protection domain (pd.h), on the same
			     device; NULL = the device's own */
};

enum rk_conn_state {
	RK_CONN_IDLE = 0,     /* created, not connected (QP in INIT) */
	RK_CONN_CONNECTING,   /* rdma_cm handshake under way */
	RK_CONN_CONNECTED,    /* RTS: data may flow */
	RK_CONN_DISCONNECTED, /* the peer or we disconnected */
	RK_CONN_ERROR,	      /* QP error, fatal async event, device removal */
};

/*
 * rk_conn_create - a connection for manual connect: creates the CQ (unless
 * shared), the QP, moves it to INIT and picks a random starting PSN.
 * Receives may be posted from now on. Owned by the caller.
 */
RK_API int rk_conn_create(struct rk_device *dev, const struct rk_conn_opts *opts,
			  struct rk_error *err, struct rk_conn **out);

/*
 * rk_conn_local_info - what the peer needs to connect to us (LID, GID,
 * QPN, PSN, MTU capped by opts.max_mtu). The buf and app fields are left
 * zero for the caller to fill.
 */
RK_API void rk_conn_local_info(const struct rk_conn *conn, struct rk_oob_info *info);

/*
 * rk_conn_connect - connect to the peer described by @remote: INIT -> RTR
 * -> RTS with path MTU = min(both sides). Each ibv_modify_qp is checked; an
 * error names the step and the attributes it set.
 */
RK_API int rk_conn_connect(struct rk_conn *conn, const struct rk_oob_info *remote,
			   struct rk_error *err);

/*
 * rk_conn_disconnect - stop the connection: rdma_cm connections send a
 * disconnect and wait up to @timeout_ms for the peer's; the QP goes to the
 * error state so outstanding work is flushed. Idempotent.
 */
RK_API int rk_conn_disconnect(struct rk_conn *conn, int timeout_ms, struct rk_error *err);

/*
 * rk_conn_destroy - disconnect (bounded wait), drain flushed work requests,
 * and release the QP, its own CQ and, for rdma_cm, the CM id and channel.
 * Accepts NULL.
 */
RK_API void rk_conn_destroy(struct rk_conn *conn);

/*
 * rk_conn_progress - handle pending rdma_cm events for this connection
 * (DISCONNECTED, DEVICE_REMOVAL, ADDR_CHANGE, TIMEWAIT_EXIT ...), waiting
 * up to @timeout_ms (0 = do not wait) for one. Returns the state after it.
 * For manual connections it only reports the state. Use it when
 * rk_conn_cm_fd() is readable.
 */
RK_API int rk_conn_progress(struct rk_conn *conn, int timeout_ms, struct rk_error *err);

/* rk_conn_cm_fd - the rdma_cm event channel fd (non-blocking), -1 if manual. */
RK_API int rk_conn_cm_fd(const struct rk_conn *conn);

RK_API enum rk_conn_state rk_conn_state(const struct rk_conn *conn);
RK_API const char *rk_conn_state_str(enum rk_conn_state state);

/*
 * rk_conn_first_error - copy the connection's first failure (failed
 * completion, fatal async event, disconnect) into @err. Returns its negative
 * errno, or 0 if none. Later WR_FLUSH_ERR completions are consequences of it.
 */
RK_API int rk_conn_first_error(const struct rk_conn *conn, struct rk_error *err);

RK_API struct rk_cq *rk_conn_cq(const struct rk_conn *conn);
RK_API uint32_t rk_conn_qp_num(const struct rk_conn *conn);
RK_API enum ibv_mtu rk_conn_path_mtu(const struct rk_conn *conn);
RK_API uint32_t rk_conn_max_inline(const struct rk_conn *conn);
RK_API uint32_t rk_conn_sq_depth(const struct rk_conn *conn);
RK_API uint32_t rk_conn_rq_depth(const struct rk_conn *conn);
/*
 * rk_conn_rd_atomic - the RDMA READs (and atomics) this side may have in
 * flight (@initiator) and those of the peer it serves at once (@responder),
 * as the QP holds them once connected: after rdma_cm's negotiation or the
 * clamp of a manual connect, which can be below opts.max_rd_atomic. Either
 * pointer may be NULL. Cost: one ibv_query_qp (a system call).
 */
RK_API int rk_conn_rd_atomic(const struct rk_conn *conn, uint8_t *initiator, uint8_t *responder,
			     struct rk_error *err);
/* rk_conn_qp - the struct ibv_qp (escape hatch; post through post.h). */
RK_API struct ibv_qp *rk_conn_qp(const struct rk_conn *conn);
RK_API struct rk_device *rk_conn_device(const struct rk_conn *conn);

/* An application pointer carried by the connection. */
RK_API void rk_conn_set_user(struct rk_conn *conn, void *user);
RK_API void *rk_conn_user(const struct rk_conn *conn);

#ifdef __cplusplus
}
#endif

#endif
