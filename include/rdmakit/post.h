/*
 * rdmakit/post.h - the data path: posting sends, writes, reads and receives.
 *
 * One struct rk_wr describes one work request. rk_post() posts one;
 * rk_post_list() chains up to the send queue's depth into a single
 * ibv_post_send (one doorbell), which is how small messages reach high rates.
 *
 * Selective signaling: with opts.signal_every = N only every Nth send WR
 * asks for a completion (plus any WR with RK_WR_SIGNALED). One completion
 * retires the WRs before it, and the library counts the free send-queue
 * slots, so a post that does not fit fails with -ENOBUFS instead of
 * overflowing the queue; when the queue gets nearly full the last WR of a
 * post is signaled so that room always comes back. Unsignaled WRs produce
 * no completion (and their wr_id is never seen) unless they fail: put
 * RK_WR_SIGNALED on the WR whose completion you wait for.
 *
 * Payloads up to rk_conn_max_inline() bytes are sent inline (copied into
 * the WR: no lkey needed, buffer reusable at once) unless RK_WR_NO_INLINE.
 *
 * Thread-safety: one thread at a time per connection.
 */
#ifndef RDMAKIT_POST_H
#define RDMAKIT_POST_H

#include <stdint.h>

#include <rdmakit/common.h>
#include <rdmakit/conn.h>
#include <rdmakit/error.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rk_op {
	RK_OP_SEND = 0,
	RK_OP_SEND_IMM,	 /* SEND carrying 32-bit immediate data */
	RK_OP_WRITE,	 /* RDMA WRITE into (remote_addr, rkey) */
	RK_OP_WRITE_IMM, /* RDMA WRITE + immediate: consumes a receive at the peer */
	RK_OP_READ,	 /* RDMA READ from (remote_addr, rkey) into (addr, lkey) */
};

#define RK_WR_SIGNALED	(1u << 0) /* always generate a completion */
#define RK_WR_NO_INLINE (1u << 1) /* never inline, even if small */
#define RK_WR_FENCE	(1u << 2) /* wait for earlier READs first */

struct rk_wr {
	enum rk_op op;
	unsigned flags;	      /* RK_WR_* */
	uint64_t wr_id;	      /* returned in the completion */
	void *addr;	      /* local buffer */
	uint32_t len;	      /* bytes (0 allowed; <= 8 MiB advisable on rxe) */
	uint32_t lkey;	      /* of the local buffer (unused when inline) */
	uint64_t remote_addr; /* WRITE / WRITE_IMM / READ */
	uint32_t rkey;
	uint32_t imm; /* SEND_IMM / WRITE_IMM, host byte order */
};

/*
 * rk_post - post one send-side WR. Returns 0, -ENOBUFS (send queue full:
 * poll first), -ENOTCONN (not connected), -EINVAL, or ibv_post_send's error.
 * Cost: one ibv_post_send (a doorbell; with Soft-RoCE a system call that
 * also does the transfer's work) and about a hundred instructions of
 * bookkeeping; nothing is allocated.
 */
RK_API int rk_post(struct rk_conn *conn, const struct rk_wr *wr, struct rk_error *err);

/*
 * rk_post_list - post @n WRs with one ibv_post_send. All or nothing with
 * respect to room: -ENOBUFS if the free slots are fewer than @n. Returns
 * @n on success; if the provider refuses a WR mid-list, returns how many
 * were posted before it (< @n) with @err describing the refusal.
 */
RK_API int rk_post_list(struct rk_conn *conn, const struct rk_wr *wrs, unsigned n,
			struct rk_error *err);

/* rk_sq_room - free send-queue slots right now. */
RK_API unsigned rk_sq_room(const struct rk_conn *conn);

/*
 * rk_post_recv - post one receive of @len bytes at @addr (@lkey). Receives
 * may be posted before the connection is up (see rk_conn_opts.prepare).
 * Returns 0, -ENOBUFS (receive queue full) or ibv_post_recv's error.
 */
RK_API int rk_post_recv(struct rk_conn *conn, void *addr, uint32_t len, uint32_t lkey,
			uint64_t wr_id, struct rk_error *err);

/* One receive for rk_post_recv_list(): the arguments of one rk_post_recv(). */
struct rk_recv {
	void *addr;
	uint32_t len;
	uint32_t lkey;
	uint64_t wr_id; /* returned in the completion */
};

/*
 * rk_post_recv_list - post @n receives, chained: one ibv_post_recv (and one
 * provider lock) for up to 32 of them, where rk_post_recv takes one per
 * receive. Cost: on Soft-RoCE, reposting 16 at a time takes about 110
 * instructions per receive (library and provider) against 150 one by one;
 * nothing is allocated. Each buffer is the device's from the call until
 * its completion. All or nothing with respect to room: -ENOBUFS if fewer
 * than @n receive slots are free. Returns @n on success; if the provider
 * refuses a receive, the count posted before it (0 < count < @n) with @err
 * describing the refusal, or the negative error when none was posted.
 */
RK_API int rk_post_recv_list(struct rk_conn *conn, const struct rk_recv *rs, unsigned n,
			     struct rk_error *err);

/* rk_rq_room - free receive-queue slots right now. */
RK_API unsigned rk_rq_room(const struct rk_conn *conn);

#ifdef __cplusplus
}
#endif

#endif
