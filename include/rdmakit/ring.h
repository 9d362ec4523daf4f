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
 * disconnect it; other lanes and other rings go on. Ordered delivery stops
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
 * (RK_RING_WRID_* in the top 16 bits, the lane in the next 16) and returns
 * 0 for others.
 *
 * Thread-safety: one thread at a time for a ring and all of its lanes.
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
#include <rdmakit/pool.h>

struct rk_ring_rx;
struct rk_ring_tx;

#define RK_RING_WRID_RX	    0x5258u /* receiver: write-with-immediate receives */
#define RK_RING_WRID_CREDIT 0x5243u /* receiver: credit sends */
#define RK_RING_WRID_TX	    0x5457u /* sender: slot writes */
#define RK_RING_WRID_TXC    0x5443u /* sender: credit receives */

/* Where the slots are: the receiver fills it, the sender needs it. Plain data. */
struct rk_ring_peer {
	uint64_t addr;	    /* the first slot's address */
	uint32_t rkey;	    /* of the slots' memory region */
	uint32_t slots;	    /* a power of two, 1..4096 */
	uint32_t slot_size; /* bytes per slot */
	uint32_t lanes;	    /* connections the ring uses; divides slots */
};

struct rk_ring_rx_opts {
	uint32_t slots;	       /* 0 = 64 */
	uint32_t slot_size;    /* 0 = 4096; at most 8 MiB (one WR on rxe) */
	uint32_t credit_every; /* send credits after this many deliveries; 0 = slots / 4 */
};

/*
 * rk_ring_rx_create - the receiving end over @nlanes connections (1..16,
 * dividing the slots; all in one PD): registers slots * slot_size bytes
 * with remote write in the lanes' PD and posts slots / nlanes 0-byte
 * receives on each lane (so each needs that many free receive slots).
 * Call before the peer may write, e.g. from the lanes' prepare callback or
 * before connecting. Owned by the caller.
 */
RK_API int rk_ring_rx_create(struct rk_conn *const *lanes, unsigned nlanes,
			     const struct rk_ring_rx_opts *opts, struct rk_error *err,
			     struct rk_ring_rx **out);

/* rk_ring_rx_destroy - release the slots; after the lanes. Accepts NULL. */
RK_API void rk_ring_rx_destroy(struct rk_ring_rx *rx);

/* rk_ring_rx_peer - what the sender needs to know (send it out of band). */
RK_API void rk_ring_rx_peer(const struct rk_ring_rx *rx, struct rk_ring_peer *peer);

/*
 * rk_ring_rx_handle - hand over one completion of a lane's CQ. Returns 1
 * if it was the ring's (a message now waits, or a credit went out), 0 if
 * not, or a negative errno when it cost a lane (refused immediate, failed
 * completion): the lane is disconnected and @err says why. O(1); no system
 * call except the repost of the receive (one ibv_post_recv).
 */
RK_API int rk_ring_rx_handle(struct rk_ring_rx *rx, const struct ibv_wc *wc, struct rk_error *err);

/*
 * rk_ring_rx_recv - take the next message in order, copied into @buf
 * (@cap bytes; its length in *@len), and free its slot; credits go back
 * every credit_every messages. Returns 1, 0 if the next message has not
 * arrived, -EMSGSIZE if @cap is too small (nothing taken), or an error
 * posting the credit. Cost: a memcpy of the message; a post every
 * credit_every calls.
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

/*
 * rk_ring_tx_create - the sending end over @nlanes connections to the
 * receiver described by @peer (the lanes in the same order as the
 * receiver's). Takes slots / nlanes buffers of slot_size per lane from
 * @pool for the writes and posts 8 0-byte receives per lane for credits.
 * Owned by the caller.
 */
RK_API int rk_ring_tx_create(struct rk_conn *const *lanes, unsigned nlanes, struct rk_pool *pool,
			     const struct rk_ring_peer *peer, struct rk_error *err,
			     struct rk_ring_tx **out);

/* rk_ring_tx_destroy - release the buffers; after the lanes. Accepts NULL. */
RK_API void rk_ring_tx_destroy(struct rk_ring_tx *tx);

/*
 * rk_ring_tx_send - copy @len bytes (at most the slot size) into a buffer
 * and write them into the next slot: rk_ring_tx_reserve, a memcpy and
 * rk_ring_tx_commit. Returns 0, -EAGAIN without credit or a free buffer
 * (hand the ring its completions, then retry), -EMSGSIZE, -ENOTCONN if the
 * lane this message must take was lost, or the post's error (which costs
 * the lane). Cost: a memcpy and one post.
 */
RK_API int rk_ring_tx_send(struct rk_ring_tx *tx, const void *data, uint32_t len,
			   struct rk_error *err);

/*
 * A message being built in place: the registered buffer it will be written
 * from, reserved with its sequence number by rk_ring_tx_reserve(). Plain
 * data; the fields after @size are the ring's, pass them back unchanged.
 */
struct rk_ring_tx_buf {
	void *data;    /* @size bytes, local access; the caller's until committed */
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
 * reservation stays open), or the post's error (which costs the lane).
 * Cost: one post.
 */
RK_API int rk_ring_tx_commit(struct rk_ring_tx *tx, const struct rk_ring_tx_buf *buf, uint32_t len,
			     struct rk_error *err);

/*
 * rk_ring_tx_handle - hand over one completion of a lane's CQ: frees write
 * buffers, takes credits. Returns 1 if it was the ring's, 0 if not, or a
 * negative errno when it cost a lane (a failed write, a credit for messages
 * never sent): the lane is disconnected and @err says why.
 */
RK_API int rk_ring_tx_handle(struct rk_ring_tx *tx, const struct ibv_wc *wc, struct rk_error *err);

/* rk_ring_tx_credits - messages that may be sent now. */
RK_API uint32_t rk_ring_tx_credits(const struct rk_ring_tx *tx);

/* rk_ring_tx_lane_error - as rk_ring_rx_lane_error, for the sender. */
RK_API int rk_ring_tx_lane_error(const struct rk_ring_tx *tx, unsigned lane, struct rk_error *err);

#endif
