/*
 * rdmakit/msgbuf.h - message buffers: a receive set and a send set.
 *
 * A receiver needs receives posted before the peer sends, a registered
 * buffer behind each, and each buffer posted again once the caller is done
 * with the message in it. A sender needs buffers it may fill, and must not
 * touch one again until the work request that carries it has completed. The
 * two sets do exactly that bookkeeping, with buffers from a pool (pool.h)
 * and work requests through the connection (post.h); they poll nothing
 * themselves: the caller hands them the completions it got from rk_cq_poll,
 * rk_cq_wait or rk_wait (wait.h), and each set recognises its own by wr_id.
 *
 * wr_ids: a set owns the 2^32 wr_ids from opts.wr_id_base (its low 32 bits
 * must be zero) and uses base + buffer index. Choose bases that do not
 * collide with the caller's own wr_ids or another set's on the same CQ.
 *
 * The receive buffers are registered for local access only: the peer
 * reaches them only by SEND, never by RDMA WRITE, so what a completion
 * hands over stays as it arrived until it is released. Their content is
 * still the peer's: check lengths and fields before use.
 *
 * Lifetime: destroy (or disconnect and drain) the connection before the
 * sets, so the device is done with the buffers; then destroy the sets,
 * then the pool.
 *
 * Thread-safety: as the connection (conn.h) and the pool (pool.h): one
 * thread at a time for the set, its connection and its pool.
 */
#ifndef RDMAKIT_MSGBUF_H
#define RDMAKIT_MSGBUF_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <rdmakit/common.h>
#include <rdmakit/conn.h>
#include <rdmakit/error.h>
#include <rdmakit/pool.h>
#include <rdmakit/post.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rk_recv_set;
struct rk_send_set;

#define RK_RECV_SET_WRID (0x5243ULL << 48) /* default wr_id_base of a receive set */
#define RK_SEND_SET_WRID (0x5343ULL << 48) /* default wr_id_base of a send set */

struct rk_msgbuf_opts {
	uint32_t count;	       /* buffers; receive set: 0 = the connection's free
				  receive slots; send set: 0 = 16 */
	size_t size;	       /* bytes per buffer; receive set: 0 = no buffers,
				  receives of 0 bytes (for WRITE WITH IMMEDIATE);
				  send set: 0 = 4096 */
	uint64_t wr_id_base;   /* low 32 bits zero; 0 = RK_RECV_SET_WRID /
				  RK_SEND_SET_WRID */
	uint32_t signal_every; /* send set: ask for a completion every N posts
				 (0/1 = every one); the post that takes the last
				 free buffer is always signaled */
};

/* A received message, handed over by rk_recv_set_take(). Plain data. */
struct rk_msg {
	void *data;	/* the buffer (NULL for a 0-byte receive set) */
	uint32_t len;	/* bytes the peer sent (<= the buffer's size); for
			   RECV_RDMA_WITH_IMM the bytes it wrote elsewhere */
	uint32_t index; /* the buffer's index in the set; pass back to release */
	uint32_t imm;	/* immediate data, host byte order, if has_imm */
	int has_imm;
	enum ibv_wc_opcode opcode; /* IBV_WC_RECV or IBV_WC_RECV_RDMA_WITH_IMM */
};

/* A free send buffer, handed out by rk_send_set_get(). Plain data. */
struct rk_send_buf {
	void *data;
	uint32_t size; /* capacity in bytes */
	uint32_t lkey;
	uint32_t index;
};

/*
 * rk_recv_set_create - take @opts->count buffers of @opts->size bytes from
 * @pool (which may be NULL when size is 0) and post a receive for each on
 * @conn (receives may be posted before the connection is up). The set is
 * the caller's; destroy it after the connection. -ENOBUFS if the count
 * exceeds the connection's free receive slots; -E2BIG if the size exceeds
 * the pool's largest class or 4 GiB. Cost: count pool allocations and
 * ibv_post_recv calls.
 */
RK_API int rk_recv_set_create(struct rk_conn *conn, struct rk_pool *pool,
			      const struct rk_msgbuf_opts *opts, struct rk_error *err,
			      struct rk_recv_set **out);

/*
 * rk_recv_set_destroy - return the buffers to the pool and free the set.
 * The connection must be destroyed or drained first (see above). NULL is
 * accepted.
 */
RK_API void rk_recv_set_destroy(struct rk_recv_set *rs);

/*
 * rk_recv_set_take - if @wc is a receive completion of this set, hand its
 * buffer over in @msg (until rk_recv_set_release) and return 1; return 0 for
 * a completion that is not the set's (nothing changes). A failed completion
 * of the set (flushed, or the connection failed) returns its negative errno
 * with @err: the buffer stays with the set and is not posted again. O(1),
 * no system call.
 */
RK_API int rk_recv_set_take(struct rk_recv_set *rs, const struct ibv_wc *wc, struct rk_msg *msg,
			    struct rk_error *err);

/*
 * rk_recv_set_release - post buffer @index again, so the peer may send into
 * it; the caller must not touch the message's data afterwards. Returns 0,
 * -EINVAL if @index is not handed out, or rk_post_recv's error (the buffer
 * then stays with the set, not posted). Cost: one ibv_post_recv.
 */
RK_API int rk_recv_set_release(struct rk_recv_set *rs, uint32_t index, struct rk_error *err);

/* rk_recv_set_posted - receives of the set posted right now. */
RK_API uint32_t rk_recv_set_posted(const struct rk_recv_set *rs);

/*
 * rk_send_set_create - take @opts->count buffers of @opts->size bytes from
 * @pool for sends on @conn. The set is the caller's; destroy it after the
 * connection. -E2BIG if the size exceeds the pool's largest class.
 */
RK_API int rk_send_set_create(struct rk_conn *conn, struct rk_pool *pool,
			      const struct rk_msgbuf_opts *opts, struct rk_error *err,
			      struct rk_send_set **out);

/* rk_send_set_destroy - return the buffers to the pool; after the connection. */
RK_API void rk_send_set_destroy(struct rk_send_set *ss);

/*
 * rk_send_set_get - a free buffer to fill, or -ENOBUFS when every buffer is
 * in flight (hand the set its completions first). O(1). The buffer is the
 * caller's until it is posted with rk_send_set_post or given back with
 * rk_send_set_put.
 */
RK_API int rk_send_set_get(struct rk_send_set *ss, struct rk_send_buf *buf);

/* rk_send_set_put - give back a buffer from rk_send_set_get without posting it. */
RK_API int rk_send_set_put(struct rk_send_set *ss, uint32_t index);

/*
 * rk_send_set_post - post @wr carrying buffer @index: the set fills wr_id,
 * addr and lkey (@wr->len must fit the buffer) and the signaled flag; the
 * caller sets op (SEND, SEND_IMM, WRITE, WRITE_IMM), len, imm and for
 * writes remote_addr and rkey. The buffer is free again only once this WR
 * (or a later signaled one of the set, which retires it) has completed.
 * Returns 0, -EINVAL (index not handed out, too long), or rk_post's error
 * (the buffer stays the caller's). Cost: one rk_post.
 */
RK_API int rk_send_set_post(struct rk_send_set *ss, uint32_t index, const struct rk_wr *wr,
			    struct rk_error *err);

/*
 * rk_send_set_complete - if @wc is a completion of this set, free the
 * buffer it carried and every buffer posted before it (their unsignaled WRs
 * completed first: a send queue completes in order) and return how many
 * were freed (>= 1); 0 if @wc is not the set's. A failed completion frees
 * them too (the WR is finished either way) and is the connection's first
 * error (conn.h). O(freed), no system call.
 */
RK_API int rk_send_set_complete(struct rk_send_set *ss, const struct ibv_wc *wc);

/* rk_send_set_free_count - buffers free right now. */
RK_API uint32_t rk_send_set_free_count(const struct rk_send_set *ss);

#ifdef __cplusplus
}
#endif

#endif
