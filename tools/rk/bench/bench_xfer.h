/*
 * bench_xfer.h - rk bench --op xfer: the library's one-sided layer
 * (rdmakit/xfer.h) measured inside rk bench's session: the same control
 * channel, GO barriers, watchdog and heartbeats, RESULT records and report.
 *
 * The lanes are rk bench's own QPs (--num-qp of them, rdma_cm or --oob), sized
 * for the layer: a send queue for -t batches of their share of --batch ops, a
 * completion every -Q WRs (the chain), the receive queue the layer's
 * notifications need, and for READs as many in flight as the device
 * allows up to what the batches hold.
 *
 * The server owns the memory: one segment, registered through the layer
 * and exported to the client with just the access --xfer-op needs; the
 * descriptor goes over the control channel as an opaque blob (XDESC) and
 * the client imports it. The client posts batches of --batch ops of the run's
 * size (rk_xfer_post), -t in flight, each with its own part of the
 * memory on the side that receives data, and completes them with
 * rk_xfer_batch_check after handing every completion of the lanes' CQ to
 * rk_xfer_handle. With --notify each batch ends with one notification,
 * which the server takes (rk_xfer_notif_take) and counts.
 *
 * Memory (S the largest size, B ops, D batches in flight):
 *   read:  server B x S (what is read), client D x B x S (where it lands)
 *   write: client B x S (what is written), server D x B x S (where it lands)
 * Op i of the batch in slot j moves bytes i x S .. of the B x S side to
 * (j x B + i) x S .. of the other. --verify fills the source with a
 * pattern of the size and checks every batch's landing place: the client
 * each READ batch as it ends (then zeroes it), the server each WRITE
 * batch's part when its notification is taken, and all of it at the end.
 */
#ifndef RK_BENCH_XFER_H
#define RK_BENCH_XFER_H

#include <stdint.h>

#include <rdmakit/error.h>
#include <rdmakit/xfer.h>

#include "bench_conn.h"
#include "bench_run.h"

/* Client: a batch in flight. */
struct bench_xfer_slot {
	struct rk_xfer_batch *b;   /* NULL: free */
	struct rk_xfer_prep *prep; /* the slot's ops, prepared for the run's size */
	uint64_t t0;		   /* ticks: when it was posted */
};

/* One side's part of the run; c->xfer. */
struct bench_xfer {
	struct rk_xfer *x;
	struct rk_xfer_peer *peer;
	struct rk_xfer_seg *seg;
	struct rk_xfer_remote *remote; /* client: the server's segment, imported */
	uint8_t *mem;		       /* the segment's memory (see above) */
	size_t mem_len;
	uint8_t *ref;		       /* --verify: the pattern of the run's size, B x S */
	struct rk_xfer_op *ops;	       /* client: the ops of each slot, D x B */
	struct bench_xfer_slot *slots; /* client: D */
	struct rk_xfer_stats run;      /* the layer's counters over the last run */
	uint64_t cqes; /* ... and the completions of its batches' WRs we handed it */
};

/* bench_xfer_lands_here - this side's memory receives the data (the big side). */
int bench_xfer_lands_here(const struct bench_ctx *c);

/* bench_xfer_conn_opts - the lanes' queues, signaling and READ depth (over conn_opts'). */
void bench_xfer_conn_opts(const struct bench_ctx *c, struct rk_conn_opts *o);

/* bench_xfer_cq_depth - the CQ the lanes share: every send and receive slot. */
uint32_t bench_xfer_cq_depth(const struct bench_ctx *c);

/*
 * bench_xfer_setup - after READY: rk_xfer, memory, segment, the peer over
 * the lanes; the server exports and sends XDESC, the client imports it
 * and checks it is large enough.
 */
int bench_xfer_setup(struct bench_ctx *c, struct rk_error *err);

/* bench_xfer_reset - before each GO: --verify's pattern and clean landing places for @size. */
void bench_xfer_reset(struct bench_ctx *c, uint32_t size);

/*
 * bench_xfer_run - one run of @iters batches (or @dur_ns of them) of
 * @size-byte ops, either side. Client: tx_msgs ops, rx_msgs batches, one
 * latency sample per batch (post to end). Server: tx_msgs and rx_msgs the
 * notifications taken (0 without --notify).
 */
int bench_xfer_run(struct bench_ctx *c, uint32_t size, uint64_t iters, uint64_t dur_ns,
		   struct bench_run *out, struct rk_error *err);

/*
 * bench_xfer_stats - this side's layer counters over the last run
 * (rk_xfer_stats deltas), and in *@cqes the completions of batch WRs
 * (tag RK_XFER_WRID_OP) the run handed to the layer: what the layer's
 * signaling costs, which its counters do not say.
 */
const struct rk_xfer_stats *bench_xfer_stats(const struct bench_ctx *c, uint64_t *cqes);

/* bench_xfer_mode - "mw" or "mr": how the server's memory is exposed; "?" before set-up. */
const char *bench_xfer_mode(const struct bench_ctx *c);

/* bench_xfer_release_peer - batches, the import and the peer: before the lanes go. */
void bench_xfer_release_peer(struct bench_ctx *c);

/* bench_xfer_release - segment, rk_xfer and memory: after the lanes. Safe on a partial set-up. */
void bench_xfer_release(struct bench_ctx *c);

#endif
