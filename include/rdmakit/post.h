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
 * A loop that posts the same WRs again and again prepares them once
 * (rk_prepare) and posts them with rk_post_prepared(): the verbs WRs are
 * kept built, a post writes only their wr_ids and signaled bits.
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

/*
 * Prepared work requests: a chain of send-side WRs translated into verbs
 * WRs once, then posted as often as wanted, each post touching only what
 * changes (the wr_ids and the signaled bit), as a hand-written verbs loop
 * keeps its own ibv_send_wr. For a loop that sends the same buffers over
 * and over (a ping-pong, a stream of fixed-size WRITEs): rk_post and
 * rk_post_list translate every struct rk_wr on every call.
 */
struct rk_prepared;

/*
 * rk_prepare - build @n WRs (1 to the send queue's depth) from @wrs for
 * @conn and return them in *@out. Everything rk_post checks of a WR (its
 * op, whether it goes inline, its flags) is decided here, once; the wr_id
 * of @wrs is not used (rk_post_prepared names the completions), an
 * RK_WR_SIGNALED in @wrs signals that WR on every post. Returns 0,
 * -EINVAL (n out of range, an unknown op) or -ENOMEM.
 * Cost: one allocation of about 100 bytes per WR; no verbs call.
 * Ownership: the caller frees it with rk_prepared_free(), before
 * rk_conn_destroy(@conn); @wrs is not kept (inline payloads are copied at
 * each post, from the buffers @wrs names).
 * Thread-safety: it belongs to @conn: one thread at a time, as rk_post.
 */
RK_API int rk_prepare(struct rk_conn *conn, const struct rk_wr *wrs, unsigned n,
		      struct rk_error *err, struct rk_prepared **out);

/*
 * rk_post_prepared - post @p's chain once more, in one ibv_post_send: WR i
 * completes with @wr_id + i. @flags: RK_WR_SIGNALED asks a completion for
 * the chain's last WR (on top of the WRs prepared with it, and of the
 * connection's signal_every and room rules, as for rk_post_list). Returns
 * the chain's length, -ENOBUFS (fewer free send slots than WRs: poll
 * first), -ENOTCONN, or, if the provider refuses a WR, the count posted
 * before it (< length) or its error, with @err describing it.
 * Cost: one ibv_post_send and about 30 instructions of bookkeeping per
 * WR (a chain of one: about 40 in all; rk_post: about a hundred); nothing
 * is allocated.
 * Thread-safety: as rk_post (the connection's thread).
 */
RK_API int rk_post_prepared(struct rk_prepared *p, uint64_t wr_id, unsigned flags,
			    struct rk_error *err);

/*
 * rk_prepared_set_addr - point WR @i of @p at other buffers of the same
 * length and keys: local @addr, and @remote_addr (WRITE, WRITE_IMM and
 * READ; ignored by a SEND). For walking a buffer post by post. Returns 0
 * or -EINVAL (@i out of range). Cost: two stores. Thread-safety: as
 * rk_post_prepared; takes effect from the next post.
 */
RK_API int rk_prepared_set_addr(struct rk_prepared *p, unsigned i, void *addr,
				uint64_t remote_addr);

/* rk_prepared_free - free @p (NULL is a no-op). Nothing posted is affected. */
RK_API void rk_prepared_free(struct rk_prepared *p);

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

/*
 * Prepared receives: a chain of receive WRs (buffer, length, key and the
 * caller's wr_id each) built once, then posted again as often as wanted by
 * naming which of them go, each post writing only what changes (the
 * sequence numbers the completions are checked by, and the caller's ids in
 * their slots). For a receiver that posts the same buffers over and over:
 * a stream's consumed receives, a receive set's released buffers. The
 * completions are those of rk_post_recv: the CQ layer checks each against
 * the connection's window (a stale or foreign one is dropped) and hands
 * back the caller's wr_id. A receive may be posted again before its
 * completion: each post is a receive of its own, into the same buffer.
 */
struct rk_recv_prepared;

/*
 * rk_prepare_recv - build @n receives (1 to the receive queue's depth)
 * from @rs for @conn and return them in *@out; receive i is named i by the
 * posts below and completes with @rs[i].wr_id. Returns 0, -EINVAL (no QP
 * yet, @n out of range) or -ENOMEM.
 * Cost: one allocation of about 60 bytes per receive; no verbs call.
 * Ownership: the caller frees it with rk_recv_prepared_free(), before
 * rk_conn_destroy(@conn); @rs is not kept. Each buffer is the device's
 * from a post that names it until that receive's completion.
 * Thread-safety: it belongs to @conn: one thread at a time, as rk_post_recv.
 */
RK_API int rk_prepare_recv(struct rk_conn *conn, const struct rk_recv *rs, unsigned n,
			   struct rk_error *err, struct rk_recv_prepared **out);

/*
 * rk_post_recv_prepared - post @k receives of @p from receive @first on
 * (first, first + 1, ... wrapping to 0 after the last), in one
 * ibv_post_recv. @first < the chain's length, @k <= it; @k 0 posts
 * nothing. All or nothing with respect to room: -ENOBUFS if fewer than @k
 * receive slots are free. Returns @k, -EINVAL, -ENOTCONN (the connection
 * failed or was closed), or if the provider refuses a receive, the count
 * posted before it (0 < count < @k) or its error, with @err describing it.
 * Cost: one ibv_post_recv and about 7 instructions of bookkeeping per
 * receive plus about 80 per call: 10 per receive in a chain of 32
 * (rk_post_recv_list: 30); nothing is allocated. The provider's share
 * (Soft-RoCE) is about 85 per receive in a chain, 122 alone.
 * Thread-safety: as rk_post_recv (the connection's thread).
 */
RK_API int rk_post_recv_prepared(struct rk_recv_prepared *p, unsigned first, unsigned k,
				 struct rk_error *err);

/*
 * rk_post_recv_prepared_list - post the @k receives of @p that @idx names,
 * in that order, in one ibv_post_recv: for buffers given back out of order
 * (a receive set's releases). Each index < the chain's length and named
 * once per call, else -EINVAL and nothing is posted. Otherwise as
 * rk_post_recv_prepared. Cost: one ibv_post_recv and, by its code,
 * about 20 instructions per receive (its link written and put back, the
 * index checked; not measured yet); nothing is allocated.
 * Thread-safety: as rk_post_recv.
 */
RK_API int rk_post_recv_prepared_list(struct rk_recv_prepared *p, const uint32_t *idx, unsigned k,
				      struct rk_error *err);

/* rk_recv_prepared_free - free @p (NULL is a no-op). Posted receives are not affected. */
RK_API void rk_recv_prepared_free(struct rk_recv_prepared *p);

/* rk_rq_room - free receive-queue slots right now. */
RK_API unsigned rk_rq_room(const struct rk_conn *conn);

#ifdef __cplusplus
}
#endif

#endif
