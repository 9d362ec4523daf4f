/*
 * rdmakit/xfer.h - one-sided transfers: segments exposed to named peers,
 * batches of RDMA READ and WRITE, notifications that imply the data landed.
 *
 * The model: a node registers segments of its memory (rk_xfer_seg_reg) and
 * exports each to the peers that may reach it (rk_xfer_export), READ and/or
 * WRITE and nothing more. An export is a small opaque byte blob, the
 * descriptor, that the application carries to the peer however it likes
 * (an RPC answer, rpc.h, is the obvious carrier; examples/10-kv-cache shows
 * it). The peer imports it (rk_xfer_import: every field is checked) and
 * posts batches of READs and WRITEs against it (rk_xfer_post). The owner can
 * revoke what it exposed to one peer (rk_xfer_revoke) and leave every other
 * peer's access as it was.
 *
 * Objects. struct rk_xfer is a protection domain's worth of segments (the
 * device's PD or an rk_pd of yours) with its registration cache. A peer
 * (rk_xfer_peer_create) is 1..RK_XFER_LANES_MAX connections (lanes) to one
 * other node, all in the rk_xfer's PD; a batch is striped over its lanes.
 *
 * Access control, and which mechanism (rk_xfer_mode(); rk doctor says
 * whether the device supports windows):
 *  - RK_XFER_MW (memory windows type 2, chosen by default where the device
 *    reports IBV_DEVICE_MEM_WINDOW_TYPE_2B; Soft-RoCE does since Linux
 *    5.15). The memory is registered once with local access and
 *    IBV_ACCESS_MW_BIND only, so its own rkey grants nothing remotely. An
 *    export binds one window per lane, each on that lane's QP
 *    (IBV_WR_BIND_MW), with exactly the granted access over exactly the
 *    segment; a type-2 window bound to a QP is honoured on that QP only, so
 *    a peer that guesses another peer's keys reaches nothing, even in a
 *    shared PD. Revoke = IBV_WR_LOCAL_INV of each window on its QP, waited
 *    for; a later export re-binds with the key byte moved on
 *    (ibv_inc_rkey), so an old descriptor's key is dead.
 *  - RK_XFER_MR (the fallback, or forced by opts.mode). An export is a
 *    registration of the segment (ibv_reg_mr) in the PD with just the
 *    granted remote access; revoke = ibv_dereg_mr. Keys are honoured by
 *    every QP of the PD: give each peer a PD of its own (rk_pd_alloc,
 *    rk_conn_opts.pd) and an rk_xfer per PD, or a peer that guesses keys
 *    reaches what was exported to the others.
 * Either way, after rk_xfer_revoke() returns, a READ or WRITE by that peer
 * with the old descriptor fails on the peer's side (IBV_WC_REM_ACCESS_ERR,
 * its QP goes to the error state) and the memory is not touched. A WRITE
 * already running while the revoke runs may have landed in part: the
 * packets the owner's NIC placed before the invalidation (or
 * deregistration) took effect are in memory, the rest are refused and the
 * WRITE fails at the peer with a remote access error; nothing of it
 * changes memory after rk_xfer_revoke() returned (Soft-RoCE checks the key
 * of every packet on arrival; tested with a 64 MiB WRITE, both modes: some
 * megabytes landed, none after). So do not trust the contents of memory
 * you revoked under a running WRITE.
 *
 * Registration cache: segments are registered through a cache of regions
 * keyed by (PD, [start, end), access) and counted by the segments inside
 * them. A segment inside an existing region is a lookup (no ibv_reg_mr:
 * 1,000 segments inside one registered buffer cost one); one that overlaps
 * without being contained gets a region of its own. A region is
 * deregistered as soon as its last segment is, so a freed and reused
 * address is registered anew and never meets a stale registration. A
 * region also stops taking hits as soon as the segment that created it
 * (whose range it is) is deregistered, even while segments inside keep it
 * registered: the rest of its range may have been unmapped and mapped
 * again, and a new segment there is registered anew. So register the big
 * buffer as a segment first and keep it while you carve segments from it.
 * Lookup is linear in the regions (register big buffers, carve segments).
 *
 * Descriptors (rk_xfer_export / rk_xfer_import): little-endian, version 1:
 *   magic "RKXD" (4), version (1), access (1), mode (1), lanes (1),
 *   generation (4), segment id (4), address (8), length (8), one rkey per
 *   lane (4 each): 36..96 bytes, RK_XFER_DESC_MAX at most. The address is
 *   the segment's virtual address in the owner's process, so the peer it
 *   is exported to learns where the owner's buffers are (address layout,
 *   nothing more: the key bound to the lane and the window's or
 *   registration's bounds are what grant access, and that peer may already
 *   read or write those bytes). With opts.zero_based (MW mode) windows are
 *   bound zero-based (IBV_ACCESS_ZERO_BASED) and the address is 0: the
 *   peer addresses offsets. Not the default: no device attribute says
 *   whether a NIC honours zero-based type-2 binds (Soft-RoCE does, checked;
 *   some drivers refuse them, which fails the export), and registrations
 *   (MR mode) are always addressed by virtual address. Importers need not
 *   care: they address the descriptor's address plus an offset either way. The key is the
 *   capability (no MAC): protection comes from the PD and the windows bound
 *   to the lanes. Import refuses a truncated or overlong blob, another
 *   magic or version, unknown access or mode bits, a length of 0 or one
 *   that wraps, a lane count other than the peer's, and a generation older
 *   than one already imported for the same segment (-ESTALE); handles of an
 *   older generation fail on use with -ESTALE. On use, every op's bounds
 *   and access are checked against the descriptor before anything is
 *   posted (-ERANGE, -EACCES). A forged descriptor can still be posted raw
 *   by a hostile peer: the owner's NIC refuses it (see above).
 *
 * Batches (rk_xfer_post): up to opts.max_ops ops, each a READ or WRITE of
 * a range of a local segment from/to a range of an imported descriptor.
 * The plan: an op longer than RK_XFER_SPLIT (8 MiB, Soft-RoCE's limit per
 * work request) is split; op i goes to lane i mod lanes; on each lane the
 * work requests are posted in chains of up to opts.chain (N, default and
 * at most RK_XFER_CHAIN_MAX = 16) with one ibv_post_send (one doorbell)
 * per chain, and only the last WR of each chain asks for a completion
 * (create the lanes with rk_conn_opts.signal_every >= N, or the
 * connection's own policy signals more often: harmless, slower). So a
 * 64-op batch on one lane costs 4 doorbells and 4 completions. Chains that
 * do not fit the send queue (the lanes' queues are shared with whatever
 * else you post on them) wait, and so does a notification, and go out as
 * room comes back (batches in order per peer): on rk_xfer_handle() of any
 * completion, the layer's or not, and on rk_xfer_batch_check() / _wait(),
 * so room freed by completions you polled yourself is used too. A
 * notification never fails for want of room. A batch ends once, when every chain has
 * completed (or failed): rk_xfer_batch_check() / rk_xfer_batch_wait()
 * give the outcome, rk_xfer_batch_op_status() the status of each op when
 * something failed (an op after the failing one on its lane is
 * "flushed"). Any number of batches may be in flight, up to
 * opts.max_batches per rk_xfer.
 *
 * Deadlines: each batch has one (rk_xfer_batch_opts.timeout_ms). A batch
 * whose lane fails (the peer died: IBV_WC_RETRY_EXC_ERR, the connection
 * went to error or was disconnected) fails with -ECONNRESET, "peer gone";
 * one still running at its deadline fails with -ETIMEDOUT, and the lanes
 * that carry its posted, uncompleted work are disconnected then (their QPs
 * go to the error state) so that nothing of it lands later in memory the
 * caller takes back; a lane where it posted nothing (chains still waiting
 * for room) or where its chains all completed is left connected. Other
 * peers go on.
 *
 * Notifications (rk_xfer_batch_opts.notify): the batch ends with a 0-byte
 * RDMA WRITE WITH IMMEDIATE carrying a 32-bit value to the owner, on lane
 * 0. "Notified" implies "landed" by construction: on an RC QP a WRITE WITH
 * IMMEDIATE is executed at the responder after every earlier WRITE on the
 * same QP, so when the batch used lane 0 only and holds only WRITEs, the
 * notification is the last WR of the batch's last chain; otherwise (other
 * lanes, or READs) it is posted only once every other chain of the batch
 * has completed at the initiator, i.e. its WRITEs were acknowledged by the
 * owner's NIC and placed. Exactly one notification per batch. The owner
 * (any rk_xfer with a peer over those lanes) posts opts.notif_recvs 0-byte
 * receives per lane (the layer owns the lanes' receive queues) and queues
 * what arrives: rk_xfer_notif_take(). A receive is reposted as its
 * notification is queued, while the queue (2 x notif_recvs per lane) is at
 * most half full, and otherwise when the caller takes one.
 *
 * Flow control: there is no credit exchange. The owner's receives are the
 * window: when a notification finds none posted (the owner's application
 * took none, or handed the layer no completion, for a while), the owner's
 * NIC answers "receiver not ready" and the sender's NIC retries for the
 * lane's RNR budget (rk_conn_opts.rnr_retry x min_rnr_timer: with the
 * defaults some tens of milliseconds). Past it the notification is
 * refused: its batch fails with -ECONNRESET and IBV_WC_RNR_RETRY_EXC_ERR
 * in the error ("notification refused"), the batch's data did land, and
 * lane 0 is in error (reconnect to go on). So a notification is never
 * lost silently: it is delivered, or its batch fails. A sender that must
 * not hit this keeps at most notif_recvs notified batches unanswered by
 * the owner (e.g. the owner answers each over RPC, which is the credit).
 *
 * Completions: the layer polls nothing on its own. Hand it every
 * completion of the lanes' CQs (rk_cq_poll, rk_wait ...) through
 * rk_xfer_handle(); it claims its own by wr_id (RK_XFER_WRID_* in the top
 * 16 bits) and QP (a lane of one of this rk_xfer's peers), and returns 0
 * for every other: the layer's tags on a QP it has no peer on (another
 * rk_xfer sharing the CQ, or the lanes of a peer you destroyed, flushing)
 * are not its, so hand such a completion to the next user of the CQ; two
 * rk_xfer on one CQ each claim only their own. The blocking calls
 * (rk_xfer_export, rk_xfer_revoke, rk_xfer_batch_wait, rk_xfer_notif_wait)
 * poll the lanes' CQs themselves, with a deadline (sleeping on their
 * completion channels, several at once with poll(2); spinning when a CQ
 * is in busy mode, which has no channel), and pass completions
 * that are not the layer's to opts.on_foreign (dropped and counted when
 * NULL).
 *
 * Prepared batches (rk_xfer_prepare, rk_xfer_post_prepared): a batch of
 * the same ops posted again and again is checked and planned once, its
 * work requests kept built; a post checks only what can change (lanes,
 * generations, the prepared batch still alive) and writes each chain's
 * wr_ids.
 *
 * Thread-safety: one thread at a time per rk_xfer (and its peers, batches
 * and the lanes' CQs), as for connections. Lifetime: destroy batches,
 * prepared batches, remotes and peers, then the connections, then
 * segments, then the rk_xfer, then the PD.
 */
#ifndef RDMAKIT_XFER_H
#define RDMAKIT_XFER_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <rdmakit/common.h>
#include <rdmakit/conn.h>
#include <rdmakit/device.h>
#include <rdmakit/error.h>
#include <rdmakit/pd.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rk_xfer;
struct rk_xfer_seg;
struct rk_xfer_peer;
struct rk_xfer_remote;
struct rk_xfer_batch;
struct rk_xfer_prep;

#define RK_XFER_LANES_MAX    16
#define RK_XFER_CHAIN_MAX    16		/* N: work requests per doorbell, at most */
#define RK_XFER_SPLIT	     (8u << 20) /* an op is split into WRs of at most this */
#define RK_XFER_DESC_MAX     (32 + 4 * RK_XFER_LANES_MAX)
#define RK_XFER_DESC_VERSION 1

/* wr_id tags (top 16 bits) of the layer's work requests. */
#define RK_XFER_WRID_OP	   0x5846u /* "XF": batch READs, WRITEs and notifications */
#define RK_XFER_WRID_CTL   0x584bu /* "XK": window binds and invalidations */
#define RK_XFER_WRID_NOTIF 0x584eu /* "XN": notification receives */

enum rk_xfer_mode {
	RK_XFER_AUTO = 0, /* windows if the device has type 2, else registrations */
	RK_XFER_MW = 1,	  /* memory windows type 2 bound per lane (-EOPNOTSUPP if none) */
	RK_XFER_MR = 2,	  /* a registration per (segment, peer) */
};

/* Access a segment grants (combine with |). */
enum rk_xfer_access {
	RK_XFER_READ = 1 << 0,	/* the peer may RDMA READ it */
	RK_XFER_WRITE = 1 << 1, /* the peer may RDMA WRITE it */
};

typedef void (*rk_xfer_foreign_fn)(void *arg, const struct ibv_wc *wc);

struct rk_xfer_opts {
	enum rk_xfer_mode mode;
	uint32_t chain;	      /* WRs per doorbell; 0 = 16 (= RK_XFER_CHAIN_MAX, the most) */
	uint32_t max_batches; /* in flight at once; 0 = 64 */
	uint32_t max_ops;     /* per batch; 0 = 4096 (at most 65534 WRs after splitting) */
	uint32_t notif_recvs; /* 0-byte receives per lane; 0 = 16 */
	int ctl_timeout_ms;   /* rk_xfer_peer_destroy's wait for invalidations; 0 = 5000 */
	rk_xfer_foreign_fn on_foreign; /* completions the blocking calls poll, not ours */
	void *foreign_arg;
	int zero_based; /* MW mode: zero-based windows, descriptors carry no address */
};

/* Counters since create; plain data. */
struct rk_xfer_stats {
	uint64_t reg_mr;     /* ibv_reg_mr calls (cache regions and MR-mode exports) */
	uint64_t dereg_mr;   /* ibv_dereg_mr calls */
	uint64_t cache_hits; /* segments that found their region registered */
	uint64_t mw_binds;   /* windows bound */
	uint64_t mw_invalidates;
	uint64_t doorbells; /* ibv_post_send calls for batches */
	uint64_t wrs;	    /* batch work requests (notifications included) */
	uint64_t ops;	    /* ops posted */
	uint64_t batches;   /* batches posted */
	uint64_t notifs_sent;
	uint64_t notifs_received;
	uint64_t foreign; /* completions dropped: not ours and no on_foreign */
};

/*
 * rk_xfer_mw_supported - 1 if @dev has memory windows of type 2 (the
 * device_cap_flags bit), else 0. No system call (the attributes were read
 * at open).
 */
RK_API int rk_xfer_mw_supported(const struct rk_device *dev);

/*
 * rk_xfer_create - an empty set of segments in @pd (NULL = @dev's own PD).
 * -EOPNOTSUPP if opts.mode is RK_XFER_MW and the device has no type-2
 * windows; -EINVAL for opts.zero_based when the mode is not MW. @opts may be NULL. Allocates the
 * batch table; no verbs call. Owned by the caller.
 */
RK_API int rk_xfer_create(struct rk_device *dev, struct rk_pd *pd, const struct rk_xfer_opts *opts,
			  struct rk_error *err, struct rk_xfer **out);

/* rk_xfer_destroy - after every peer and segment. Accepts NULL. */
RK_API void rk_xfer_destroy(struct rk_xfer *x);

/* rk_xfer_mode - the mode in use (AUTO resolved). */
RK_API enum rk_xfer_mode rk_xfer_mode(const struct rk_xfer *x);

/* rk_xfer_stats - copy the counters. */
RK_API void rk_xfer_stats(const struct rk_xfer *x, struct rk_xfer_stats *st);

/*
 * rk_xfer_seg_reg - make [@addr, @addr + @len) a segment that may be
 * exported with at most @access (RK_XFER_READ | RK_XFER_WRITE; 0 = local
 * use only: a batch's own buffers) and used as a batch's local side.
 * Through the registration cache: a lookup if a registered region contains
 * it, else one ibv_reg_mr (pins the pages: tens of microseconds per MiB).
 * The memory stays the caller's and must stay allocated until
 * rk_xfer_seg_dereg(). Grants nothing remotely until exported.
 */
RK_API int rk_xfer_seg_reg(struct rk_xfer *x, void *addr, size_t len, unsigned access,
			   struct rk_error *err, struct rk_xfer_seg **out);

/*
 * rk_xfer_seg_dereg - revoke every export of @seg (windows deallocated,
 * export registrations deregistered), then drop its region reference (the
 * region is deregistered with its last segment). Batches using @seg must
 * have ended; prepared batches that name it are dead from now on
 * (rk_xfer_post_prepared: -ESTALE). Accepts NULL.
 */
RK_API void rk_xfer_seg_dereg(struct rk_xfer_seg *seg);

RK_API void *rk_xfer_seg_addr(const struct rk_xfer_seg *seg);
RK_API size_t rk_xfer_seg_len(const struct rk_xfer_seg *seg);

/*
 * rk_xfer_peer_create - the node at the other end of @lanes (1..16
 * connections, connected or not yet, in @x's PD, each with a send queue of
 * at least chain + 2). Posts opts.notif_recvs 0-byte receives on each
 * lane: the layer owns the lanes' receive queues (post nothing else there).
 * Receives an earlier (destroyed) peer left posted on a lane are counted
 * and taken over, so a peer recreated on the same lanes posts only what is
 * missing; notifications the earlier peer had queued and nobody took went
 * with it. Owned by the caller.
 */
RK_API int rk_xfer_peer_create(struct rk_xfer *x, struct rk_conn *const *lanes, unsigned nlanes,
			       struct rk_error *err, struct rk_xfer_peer **out);

/*
 * rk_xfer_peer_destroy - fail its batches still running (-ECANCELED),
 * revoke what was exported to it (bounded by opts.ctl_timeout_ms; a dead
 * lane needs nothing), forget its imports. The lanes stay the caller's;
 * completions still to come on them (flushes) are no longer the layer's:
 * rk_xfer_handle returns 0 for them. Accepts NULL.
 */
RK_API void rk_xfer_peer_destroy(struct rk_xfer_peer *peer);

/*
 * rk_xfer_export - expose @seg to @peer with @access (a subset of the
 * segment's) and write its descriptor into @buf (@cap >= RK_XFER_DESC_MAX
 * is always enough; its size in *@len). MW mode: binds a window per lane
 * on that lane's QP and waits up to @timeout_ms for the binds; MR mode:
 * one ibv_reg_mr. Exporting again while exported gives the same
 * descriptor (a different @access: -EBUSY, revoke first); after a revoke
 * it gives a new generation with new keys. The lanes must be connected.
 */
RK_API int rk_xfer_export(struct rk_xfer_seg *seg, struct rk_xfer_peer *peer, unsigned access,
			  void *buf, size_t cap, size_t *len, int timeout_ms, struct rk_error *err);

/*
 * rk_xfer_revoke - end @peer's access to @seg: when it returns 0, a READ or
 * WRITE by that peer with the descriptor fails at the peer (remote access
 * error) and touches nothing. MW mode: invalidates each lane's window on
 * its QP and waits up to @timeout_ms for it (a lane whose connection is
 * down needs nothing: nothing reaches memory through it); MR mode:
 * ibv_dereg_mr. -ENOENT if not exported; -ETIMEDOUT if an invalidation did
 * not complete in time (the lane is then disconnected, which also ends its
 * access, and the error says so). MR mode, ibv_dereg_mr failing: its
 * errno, and the export stays exported (the key may still work): call
 * again; nothing is forgotten.
 */
RK_API int rk_xfer_revoke(struct rk_xfer_seg *seg, struct rk_xfer_peer *peer, int timeout_ms,
			  struct rk_error *err);

/*
 * rk_xfer_import - check the descriptor @buf (@len bytes, hostile) sent by
 * @peer's node and make it a handle for rk_xfer_post. Refusals name the
 * field (see above): -EPROTO (truncated, magic, version, field), -EINVAL
 * (lane count), -ESTALE (older generation), -ENOSPC (see below). The
 * newest generation per segment is remembered in a sorted table per peer
 * (import and each op's check: O(log segments)) of at most 65,536
 * segments: at the cap the entry of the owner's oldest segment that no
 * handle uses any more is forgotten (an older descriptor of that segment
 * is then no longer refused here; the owner's NIC still refuses its dead
 * keys), and when all have handles the import fails with -ENOSPC. The
 * handle is owned by the caller; free it before @peer.
 */
RK_API int rk_xfer_import(struct rk_xfer_peer *peer, const void *buf, size_t len,
			  struct rk_error *err, struct rk_xfer_remote **out);

/* rk_xfer_remote_free - forget an imported descriptor. Accepts NULL. */
RK_API void rk_xfer_remote_free(struct rk_xfer_remote *r);

/* rk_xfer_remote_len, _access - what the descriptor grants. */
RK_API uint64_t rk_xfer_remote_len(const struct rk_xfer_remote *r);
RK_API unsigned rk_xfer_remote_access(const struct rk_xfer_remote *r);
/*
 * rk_xfer_remote_mode - how the owner protects what the descriptor grants
 * (RK_XFER_MW: windows bound to this peer's lanes; RK_XFER_MR: a
 * registration, honoured by every QP of the owner's PD). A field of the
 * checked descriptor: free, no I/O; thread-safe while @r lives.
 */
RK_API enum rk_xfer_mode rk_xfer_remote_mode(const struct rk_xfer_remote *r);

enum rk_xfer_opcode {
	RK_XFER_OP_READ = 0,  /* remote -> local */
	RK_XFER_OP_WRITE = 1, /* local -> remote */
};

/* One op of a batch. Plain data. */
struct rk_xfer_op {
	enum rk_xfer_opcode op;
	struct rk_xfer_seg *local; /* a segment of the posting rk_xfer */
	uint64_t local_off;
	const struct rk_xfer_remote *remote; /* imported from the peer */
	uint64_t remote_off;
	uint64_t len; /* > 0; split above RK_XFER_SPLIT */
};

struct rk_xfer_batch_opts {
	int timeout_ms; /* the batch's deadline from posting; 0 = 10000, -1 = none */
	int notify;	/* end with a notification carrying @notif */
	uint32_t notif; /* the 32-bit value the owner receives */
};

/*
 * rk_xfer_post - check every op (segment bounds, descriptor bounds and
 * access, generation; nothing is posted if one fails: -ERANGE, -EACCES,
 * -ESTALE, -EINVAL), plan the batch and post what fits now (see above).
 * Returns 0 with the batch handle, -EBUSY if max_batches are in flight,
 * -ENOTCONN if a lane is down, -E2BIG over max_ops or 65534 WRs. @opts may
 * be NULL. Cost: one malloc, one ibv_post_send per chain. The local
 * memory is the batch's until it ends.
 */
RK_API int rk_xfer_post(struct rk_xfer_peer *peer, const struct rk_xfer_op *ops, unsigned nops,
			const struct rk_xfer_batch_opts *opts, struct rk_error *err,
			struct rk_xfer_batch **out);

/*
 * rk_xfer_prepare - check @nops ops once (as rk_xfer_post does: segment
 * bounds, descriptor bounds and access, generation) and keep them planned
 * for @peer, their verbs work requests built per chain (rk_prepare), for
 * posting the same batch again and again with rk_xfer_post_prepared().
 * Returns 0, or rk_xfer_post's refusals (-ERANGE, -EACCES, -ESTALE,
 * -EINVAL, -E2BIG) and -ENOMEM. The ops' addresses, keys and lengths are
 * copied: @ops is not kept. Cost: one allocation for the plan and one per
 * chain (about 100 bytes per work request); no verbs call.
 * Ownership: the caller's; free it with rk_xfer_prep_free() before
 * rk_xfer_destroy(). Batches posted from it keep what they need of it: it
 * may be freed while they run. Deregistering a segment it names
 * (rk_xfer_seg_dereg) or destroying @peer makes it dead: posting it then
 * fails with -ESTALE (free it). The descriptors' handles may be freed: it
 * keeps their generations referenced, so a newer import of the same
 * segment still makes it stale (-ESTALE on post).
 * Thread-safety: as rk_xfer_post (the rk_xfer's thread).
 */
RK_API int rk_xfer_prepare(struct rk_xfer_peer *peer, const struct rk_xfer_op *ops, unsigned nops,
			   struct rk_error *err, struct rk_xfer_prep **out);

/*
 * rk_xfer_post_prepared - post @prep's batch once more: a batch handle as
 * from rk_xfer_post, with the same plan, completions, deadline, per-op
 * status and notification (@opts may be NULL; a notification that
 * rk_xfer_post would put in the last chain's doorbell is posted right
 * after it on the same lane: one doorbell more). Checks per post what may
 * have changed since rk_xfer_prepare: the lanes are connected (-ENOTCONN),
 * a free batch slot (-EBUSY), each descriptor's generation is still the
 * newest imported (-ESTALE), @prep is not dead (-ESTALE). The ops' bounds
 * and access were checked against their segments and descriptors at
 * prepare time, and neither changes. Cost: per batch, one lookup per
 * distinct descriptor and the deadline's clock read; per chain, one
 * ibv_post_send with about 30 instructions of bookkeeping per work
 * request (rk_post_prepared); nothing is allocated once a batch block of
 * its size was released before.
 * Thread-safety: as rk_xfer_post.
 */
RK_API int rk_xfer_post_prepared(struct rk_xfer_prep *prep, const struct rk_xfer_batch_opts *opts,
				 struct rk_error *err, struct rk_xfer_batch **out);

/* rk_xfer_prep_free - release @prep (batches posted from it run on). Accepts NULL. */
RK_API void rk_xfer_prep_free(struct rk_xfer_prep *prep);

/*
 * rk_xfer_handle - hand over one completion of a lane's CQ. Returns 1 if it
 * was the layer's (a chain ended, a notification arrived, a bind or an
 * invalidation completed), 0 if not. O(1) except when it ends a batch's
 * lane chains (posts waiting chains, or the notification: one
 * ibv_post_send) or reposts a notification receive; and while chains or
 * notifications wait for send-queue room, every call (for any completion)
 * tries to post them.
 */
RK_API int rk_xfer_handle(struct rk_xfer *x, const struct ibv_wc *wc);

/*
 * rk_xfer_batch_check - the batch's state now, without polling (it posts
 * what of its peer's batches waits for room and fits now): 1 ended
 * well, 0 still running, or the negative errno it failed with (-ECONNRESET
 * peer gone, -ETIMEDOUT deadline, -EREMOTEIO refused by the owner: remote
 * access error, -EIO other), with @err. Checks the deadline (see above).
 */
RK_API int rk_xfer_batch_check(struct rk_xfer_batch *b, struct rk_error *err);

/*
 * rk_xfer_batch_wait - poll the batch's lanes' CQs (foreign completions to
 * opts.on_foreign) until it ends or @timeout_ms (-1: up to its deadline)
 * passes. Returns 1 (ended well), -ETIMEDOUT if @timeout_ms passed first
 * (the batch runs on, unless its own deadline passed) or the batch's error.
 */
RK_API int rk_xfer_batch_wait(struct rk_xfer_batch *b, int timeout_ms, struct rk_error *err);

/*
 * rk_xfer_batch_op_status - op @i's outcome once the batch ended: 0, or a
 * negative errno (-EREMOTEIO remote access, -ECONNRESET peer gone,
 * -ECANCELED flushed behind another op's failure, -ETIMEDOUT, -EIO), with
 * the completion's status in *@wc_status (may be NULL; IBV_WC_SUCCESS when
 * none came). -EINVAL for an index out of range.
 */
RK_API int rk_xfer_batch_op_status(const struct rk_xfer_batch *b, unsigned i,
				   enum ibv_wc_status *wc_status);

/*
 * rk_xfer_batch_free - release the handle. A batch still running is
 * canceled (its lanes disconnected, so nothing lands later) and its slot
 * comes back once its flushed completions are handed over. Accepts NULL.
 */
RK_API void rk_xfer_batch_free(struct rk_xfer_batch *b);

/*
 * rk_xfer_notif_take - the oldest notification @peer's node sent us, in
 * *@value. Returns 1, or 0 if none is queued. Reposts a receive held back
 * for want of queue room. Notifications of different lanes arrive in the
 * order their lanes delivered them.
 */
RK_API int rk_xfer_notif_take(struct rk_xfer_peer *peer, uint32_t *value);

/*
 * rk_xfer_notif_wait - rk_xfer_notif_take, polling the peer's lanes' CQs
 * for up to @timeout_ms. Returns 1, -ETIMEDOUT, or -ECONNRESET once every
 * lane is down and nothing is queued (the lanes' CQs are drained first:
 * a notification that arrived before they went down is still returned).
 */
RK_API int rk_xfer_notif_wait(struct rk_xfer_peer *peer, int timeout_ms, uint32_t *value,
			      struct rk_error *err);

#ifdef __cplusplus
}
#endif

#endif
