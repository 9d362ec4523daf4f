/*
 * rdmakit/ring.h - a credit ring: ordered messages by RDMA WRITE WITH
 * IMMEDIATE into fixed slots at the receiver, over one or more lanes.
 *
 * The receiver registers S slots of a fixed size (peer-writable) and tells
 * the sender where they are (struct rk_ring_peer, sent out of band: in the
 * accept reply, over rk_oob, ...). The sender writes message seq into slot
 * seq mod S with WRITE WITH IMMEDIATE over lane seq mod L, the slot and the
 * sequence in the immediate; it may have S messages undelivered, and the
 * receiver gives credits back (a 0-byte SEND with the delivered count) as
 * the caller takes messages. Lanes are connections to the same peer; the
 * receiver puts what comes over them back in order through a window of S
 * messages. The ring knows nothing of what the messages mean.
 *
 * Hostile peers: every immediate is checked (ring_seq.h): a forged or
 * replayed one, a slot of another lane, a length beyond the slot, a SEND
 * where a write belongs, or a credit for messages never sent makes the
 * ring drop that lane, with a logged reason (rk_ring_*_lane_error), and
 * disconnect it (or leave that to the caller: caller_disconnects); other
 * lanes and other rings go on. Ordered delivery stops
 * at the first message the lost lane owed: the caller rebuilds the ring.
 *
 * The slots are registered with remote write: the peer can change them at
 * any moment, even under a message being read. rk_ring_rx_recv() therefore
 * copies the message out into the caller's buffer before freeing the slot;
 * parse only the copy. Put the lanes of one ring in a PD of their own
 * (rk_conn_opts.pd) when other peers share the device, so no other
 * client's QP can reach the slots (and these lanes reach nothing else).
 *
 * Completions: the ring polls nothing. Hand it every completion of its
 * lanes' CQs (rk_cq_poll, rk_wait ...); it claims its own by wr_id
 * (RK_RING_WRID_* in the top 16 bits, the lane in the next 16; none is a
 * message set's default base, so sets may keep theirs) and returns 0 for
 * others.
 *
 * Sharing the lanes with your own messages: a QP has one receive queue, and
 * a SEND takes whichever receive is first in it, so the ring's 0-byte
 * receives and your buffers cannot both be posted on one lane. With
 * shared_rq (rx and tx opts) the ring posts no receives: your receive set
 * (msgbuf.h) owns the queue, and you hand the ring every received message
 * that carries an immediate (rk_ring_rx_msg, rk_ring_tx_msg) before you
 * release it. The ring's traffic is exactly that: writes with immediate at
 * the receiver, credits (0-byte SEND with immediate) at the sender; your
 * own messages must be SENDs without one. Size each lane's receives for
 * both: the receiver's slots / lanes writes; at the sender the credits
 * not yet handed over (up to slots / credit_every + 1 per lane); plus
 * yours.
 *
 * Your own memory for the writes: with caller_buffers (tx opts), reserve
 * hands out only the message's place in the sequence; you build the
 * message in memory you registered and post the work request that
 * rk_ring_tx_write_wr() fills in, on the message's lane, from any thread
 * (a thread per lane, say). Do not reuse that memory before the write's
 * completion, and post every reservation: the receiver delivers in order.
 *
 * Thread-safety: one thread at a time for a ring, except
 * rk_ring_tx_write_wr (it reads only what create set). A lane the ring
 * drops is disconnected by the thread that handed over the completion:
 * with a thread per lane, hand each lane's completions to the ring from
 * the thread that posts on it (under your lock), or set
 * caller_disconnects.
 * Lifetime: destroy the lanes (connections) first, then the ring, then the
 * pool.
 */
#ifndef RDMAKIT_RING_H
#define RDMAKIT_RING_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <rdmakit/common.h>
#include <rdmakit/conn.h>
#include <rdmakit/error.h>
#include <rdmakit/msgbuf.h>
#include <rdmakit/pool.h>
#include <rdmakit/post.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rk_ring_rx;
struct rk_ring_tx;

#define RK_RING_WRID_RX	    0x5258u /* receiver: write-with-immediate receives */
#define RK_RING_WRID_CREDIT 0x5246u /* receiver: credit sends */
#define RK_RING_WRID_TX	    0x5457u /* sender: slot writes */
#define RK_RING_WRID_TXC    0x5443u /* sender: credit receives */

/* Where the slots are: the receiver fills it, the sender needs it. Plain data. */
struct rk_ring_peer {
	uint64_t addr;	    /* the first slot's address */
	uint32_t rkey;	    /* of the slots' memory region */
	uint32_t slots;	    /* 1..4096, a multiple of lanes */
	uint32_t slot_size; /* bytes per slot */
	uint32_t lanes;	    /* connections the ring uses; divides slots */
};

struct rk_ring_rx_opts {
	uint32_t slots;		/* 0 = 64; at most 4096, a multiple of the lanes */
	uint32_t slot_size;	/* 0 = 4096; at most 8 MiB (one WR on rxe) */
	uint32_t credit_every;	/* send credits after this many deliveries; 0 = slots / 4 */
	int shared_rq;		/* post no receives: the caller's set owns them (see above) */
	int caller_disconnects; /* a lane dropped is only marked lost: the caller tells the
				   peer why, say, then disconnects it */
};

/*
 * rk_ring_rx_create - the receiving end over @nlanes connections (1..16,
 * dividing the slots; all in one PD): registers slots * slot_size bytes
 * with remote write in the lanes' PD and, unless shared_rq, posts slots /
 * nlanes 0-byte receives on each lane (so each needs that many free
 * receive slots). Lanes after the first may be NULL and come later
 * (rk_ring_rx_attach): the peer needs the ring's place (rk_ring_rx_peer)
 * before it can connect them, say. Call before the peer may write, e.g.
 * from lane 0's prepare callback or before connecting. Owned by the caller.
 */
RK_API int rk_ring_rx_create(struct rk_conn *const *lanes, unsigned nlanes,
			     const struct rk_ring_rx_opts *opts, struct rk_error *err,
			     struct rk_ring_rx **out);

/*
 * rk_ring_rx_attach - lane @lane (NULL at create) is @conn now, in the PD
 * of lane 0; unless shared_rq its receives are posted. -EINVAL if the lane
 * is taken or out of range, or the PD differs. Before any completion of
 * the lane is handed to the ring (the peer may have written already: its
 * completions wait in the CQ).
 */
RK_API int rk_ring_rx_attach(struct rk_ring_rx *rx, unsigned lane, struct rk_conn *conn,
			     struct rk_error *err);

/* rk_ring_rx_destroy - release the slots; after the lanes. Accepts NULL. */
RK_API void rk_ring_rx_destroy(struct rk_ring_rx *rx);

/* rk_ring_rx_peer - what the sender needs to know (send it out of band). */
RK_API void rk_ring_rx_peer(const struct rk_ring_rx *rx, struct rk_ring_peer *peer);

/*
 * rk_ring_rx_handle - hand over one completion of a lane's CQ. Returns 1
 * if it was the ring's (a message now waits, or a credit went out), 0 if
 * not, or a negative errno when it cost a lane (refused immediate, failed
 * completion): the lane is disconnected (unless caller_disconnects) and
 * @err says why. O(1); no system call except the repost of the receive
 * (one ibv_post_recv), and a credit once its send completes if one was
 * held back.
 */
RK_API int rk_ring_rx_handle(struct rk_ring_rx *rx, const struct ibv_wc *wc, struct rk_error *err);

/*
 * rk_ring_rx_msg - shared_rq: hand over a message your receive set took on
 * lane @lane. Returns 1 if it was the ring's (it carried an immediate: a
 * slot was written, or it cost the lane: see rk_ring_rx_lane_error), 0 if
 * it is yours, or a negative errno when it cost the lane (a SEND with an
 * immediate, a forged or replayed one, a length beyond the slot);
 * -EINVAL for a lane not attached (nothing changes). Release the receive
 * in every case. O(1), no system call.
 */
RK_API int rk_ring_rx_msg(struct rk_ring_rx *rx, unsigned lane, const struct rk_msg *msg,
			  struct rk_error *err);

/*
 * rk_ring_rx_recv - take the next message in order, copied into @buf
 * (@cap bytes; its length in *@len), and free its slot; credits go back
 * every credit_every messages. Returns 1, 0 if the next message has not
 * arrived, or -EMSGSIZE if @cap is too small (nothing taken). A credit
 * that cannot be posted costs its lane (rk_ring_rx_lane_error), never the
 * message taken. Cost: a memcpy of the message; a post every credit_every
 * calls.
 */
RK_API int rk_ring_rx_recv(struct rk_ring_rx *rx, void *buf, size_t cap, uint32_t *len,
			   struct rk_error *err);

/*
 * rk_ring_rx_lane_error - 0 while lane @lane works, else the negative errno
 * it was lost with (and why, in @err).
 */
RK_API int rk_ring_rx_lane_error(const struct rk_ring_rx *rx, unsigned lane, struct rk_error *err);

/* rk_ring_rx_delivered - messages taken by rk_ring_rx_recv so far. */
RK_API uint64_t rk_ring_rx_delivered(const struct rk_ring_rx *rx);

struct rk_ring_tx_opts {
	int shared_rq;	    /* post no receives: the caller's set owns them (see above) */
	int caller_buffers; /* the caller's memory and posts (see above); @pool unused */
};

/*
 * rk_ring_tx_create - the sending end over @nlanes connections to the
 * receiver described by @peer (the lanes in the same order as the
 * receiver's). Unless caller_buffers, takes slots / nlanes buffers of
 * slot_size per lane from @pool for the writes; unless shared_rq, posts 8
 * 0-byte receives per lane for credits. @opts may be NULL. Owned by the
 * caller.
 */
RK_API int rk_ring_tx_create(struct rk_conn *const *lanes, unsigned nlanes, struct rk_pool *pool,
			     const struct rk_ring_peer *peer, const struct rk_ring_tx_opts *opts,
			     struct rk_error *err, struct rk_ring_tx **out);

/* rk_ring_tx_destroy - release the buffers; after the lanes. Accepts NULL. */
RK_API void rk_ring_tx_destroy(struct rk_ring_tx *tx);

/*
 * rk_ring_tx_send - copy @len bytes (at most the slot size) into a buffer
 * and write them into the next slot: rk_ring_tx_reserve, a memcpy and
 * rk_ring_tx_commit. Returns 0, -EAGAIN without credit or a free buffer
 * (hand the ring its completions, then retry), -EMSGSIZE, -ENOTCONN if the
 * lane this message must take was lost, -EINVAL with caller_buffers, or
 * the post's error (which costs the lane). Cost: a memcpy and one post.
 */
RK_API int rk_ring_tx_send(struct rk_ring_tx *tx, const void *data, uint32_t len,
			   struct rk_error *err);

/*
 * A message being built in place: the registered buffer it will be written
 * from, reserved with its sequence number by rk_ring_tx_reserve(). Plain
 * data; the fields after @size are the ring's, pass them back unchanged.
 */
struct rk_ring_tx_buf {
	void *data;    /* @size bytes, local access; the caller's until committed
			  (NULL with caller_buffers) */
	uint32_t size; /* the slot size: the most a message may hold */
	uint64_t seq;  /* the message's sequence number */
	uint32_t lane, slot, imm, index;
};

/*
 * rk_ring_tx_reserve - zero copy: take the next sequence number, its credit
 * and a send buffer of its lane, so the caller can build the message in
 * place (read a file into it, say) instead of copying it in. Returns 0,
 * -EAGAIN without credit or a free buffer (hand the ring its completions,
 * then retry), or -ENOTCONN if that lane was lost. Every reservation must
 * be committed, in any order (an empty message is fine): the receiver
 * delivers in sequence and would wait for a missing one. O(1), no system
 * call.
 */
RK_API int rk_ring_tx_reserve(struct rk_ring_tx *tx, struct rk_ring_tx_buf *buf,
			      struct rk_error *err);

/*
 * rk_ring_tx_commit - write the first @len bytes of reserved @buf into its
 * slot. Returns 0, -EMSGSIZE if @len exceeds buf->size (nothing posted: the
 * reservation stays open), -EINVAL with caller_buffers (post it yourself),
 * or the post's error (which costs the lane). Cost: one post.
 */
RK_API int rk_ring_tx_commit(struct rk_ring_tx *tx, const struct rk_ring_tx_buf *buf, uint32_t len,
			     struct rk_error *err);

/*
 * rk_ring_tx_write_wr - caller_buffers: fill @wr with the RDMA WRITE WITH
 * IMMEDIATE of @len bytes that puts reserved message @buf into its slot:
 * op, len, remote address, rkey and immediate. The caller sets addr, lkey,
 * wr_id and flags, and posts it on lane buf->lane (lanes[buf->lane] at
 * create), once; a post that fails leaves the receiver waiting for that
 * message: give up the ring. Returns 0 or -EMSGSIZE. Pure: any thread, at
 * any time before destroy.
 */
RK_API int rk_ring_tx_write_wr(const struct rk_ring_tx *tx, const struct rk_ring_tx_buf *buf,
			       uint32_t len, struct rk_wr *wr);

/*
 * rk_ring_tx_handle - hand over one completion of a lane's CQ: frees write
 * buffers, takes credits. Returns 1 if it was the ring's, 0 if not, or a
 * negative errno when it cost a lane (a failed write, a credit for messages
 * never sent): the lane is disconnected and @err says why.
 */
RK_API int rk_ring_tx_handle(struct rk_ring_tx *tx, const struct ibv_wc *wc, struct rk_error *err);

/*
 * rk_ring_tx_msg - shared_rq: hand over a message your receive set took on
 * lane @lane; as rk_ring_rx_msg (the ring's are the credits).
 */
RK_API int rk_ring_tx_msg(struct rk_ring_tx *tx, unsigned lane, const struct rk_msg *msg,
			  struct rk_error *err);

/* rk_ring_tx_credits - messages that may be sent now. */
RK_API uint32_t rk_ring_tx_credits(const struct rk_ring_tx *tx);

/* rk_ring_tx_unacked - messages reserved that the receiver has not given credit for yet. */
RK_API uint32_t rk_ring_tx_unacked(const struct rk_ring_tx *tx);

/* rk_ring_tx_lane_error - as rk_ring_rx_lane_error, for the sender. */
RK_API int rk_ring_tx_lane_error(const struct rk_ring_tx *tx, unsigned lane, struct rk_error *err);

#ifdef __cplusplus
}
#endif

#endif
