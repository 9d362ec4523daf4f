/*
 * xfer_int.h - the one-sided transfer layer's private parts (xfer.h): the
 * descriptor codec, the registration cache and the batch planner, each
 * pure (no verbs call of its own) so the unit tests drive them on any
 * host, and the structures xfer.c and xfer_batch.c share.
 */
#ifndef RK_XFER_INT_H
#define RK_XFER_INT_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/xfer.h>

/* ---- descriptor codec (xfer_desc.c, layer 0) ---- */

#define RK_XDESC_MAGIC 0x44584b52u /* "RKXD" little-endian */
#define RK_XDESC_HDR   32

struct rk__xdesc {
	uint8_t version, access, mode, lanes;
	uint32_t gen, seg_id;
	uint64_t addr, len;
	uint32_t rkey[RK_XFER_LANES_MAX];
};

/* The encoded size for @lanes keys (0 if out of range). */
size_t rk__xdesc_size(unsigned lanes);
/* Write @d into @buf; -EINVAL if a field is out of range, -ENOSPC if @cap is short. */
int rk__xdesc_encode(const struct rk__xdesc *d, void *buf, size_t cap, size_t *len);
/*
 * Check and decode @len hostile bytes. Returns 0, or -EPROTO with *@why
 * naming the field (a static string). @d is written only on success.
 */
int rk__xdesc_decode(const void *buf, size_t len, struct rk__xdesc *d, const char **why);

/* ---- registration cache (xfer_cache.c, layer 0: verbs calls injected) ---- */

/*
 * reg: register [addr, addr + len) in @pd with @access; return an opaque
 * handle (NULL with errno set on failure) and its lkey. dereg: release it.
 */
struct rk__xcache_ops {
	void *(*reg)(void *ctx, void *pd, void *addr, size_t len, int access, uint32_t *lkey);
	void (*dereg)(void *ctx, void *mr);
	void *ctx;
};

struct rk__xregion {
	uintptr_t start, end; /* [start, end) */
	void *pd;
	int access;
	void *mr;
	uint32_t lkey;
	unsigned refs;
	int sealed; /* its creator is gone: no more hits (see rk__xcache_seal) */
	struct rk__xregion *next;
};

struct rk__xcache {
	struct rk__xcache_ops ops;
	struct rk__xregion *head;
	unsigned nregions;
	uint64_t regs, deregs, hits;
};

void rk__xcache_init(struct rk__xcache *c, const struct rk__xcache_ops *ops);
/*
 * A region of (@pd, @access) containing [@addr, @addr + @len), its count
 * raised: an existing one (a hit), else a new registration of exactly that
 * range. Returns 0, -EINVAL (len 0 or wraps), or -errno of reg.
 */
int rk__xcache_get(struct rk__xcache *c, void *pd, void *addr, size_t len, int access,
		   struct rk__xregion **out);
/*
 * No more hits on @r: its creator (the segment whose range it is) is
 * going, so pages of it outside the segments still inside may be unmapped
 * and mapped again; a new segment there must be registered anew.
 */
void rk__xcache_seal(struct rk__xregion *r);
/* Drop one count; the region is deregistered and forgotten at 0. */
void rk__xcache_put(struct rk__xcache *c, struct rk__xregion *r);
/* Deregister every region (teardown). */
void rk__xcache_fini(struct rk__xcache *c);

/* ---- the importer's generations per segment (xfer_gens.c, layer 0) ---- */

struct rk__xgen {
	uint32_t seg_id, gen;
	unsigned refs; /* imported handles of this segment not freed */
};

struct rk__xgens {
	struct rk__xgen *v; /* sorted by seg_id */
	unsigned n, cap;
	uint64_t evicted;
};

#define RK_XGENS_MAX 65536u /* segments remembered per peer */

/* The entry of @seg_id, or NULL. O(log n). Pointers last until the next add. */
struct rk__xgen *rk__xgens_find(const struct rk__xgens *t, uint32_t seg_id);
/*
 * A new entry for @seg_id (gen 0, refs 0). At @max entries, the one of the
 * lowest id with no refs is forgotten first. Returns 0, -EEXIST, -ENOSPC
 * (@max entries all referenced) or -ENOMEM.
 */
int rk__xgens_add(struct rk__xgens *t, uint32_t seg_id, unsigned max, struct rk__xgen **out);
void rk__xgens_fini(struct rk__xgens *t);

/* ---- batch planner (xfer_plan.c, layer 0) ---- */

/* One work request of a plan, in posting order: lane by lane, chain by chain. */
struct rk__xwr {
	uint32_t op;	  /* index of the op it belongs to */
	uint32_t len;	  /* bytes, <= split */
	uint64_t off;	  /* from the op's start */
	uint16_t lane;	  /* op % lanes */
	uint8_t signaled; /* last WR of its chain */
	uint8_t first;	  /* first WR of its chain (a doorbell) */
	uint8_t done;	  /* zeroed by the plan; a batch keeps its own (done[]) */
};

#define RK_XPLAN_MAX_WRS 65534u /* the notification takes index 65535 */

/*
 * The number of WRs @nops ops of @lens split at @split make, or -E2BIG over
 * @max (or on overflow), -EINVAL for a length of 0 or a split of 0.
 */
long rk__xplan_count(const uint64_t *lens, unsigned nops, uint32_t split, unsigned max);
/*
 * Plan @nops ops over @lanes lanes, chains of up to @chain WRs, into @out
 * (room for rk__xplan_count's result). Op i goes to lane i % lanes; within
 * a lane ops keep their order and an op's pieces stay consecutive.
 * Returns the WR count; *@doorbells (may be NULL) gets the chain count.
 * Pure.
 */
long rk__xplan(const uint64_t *lens, unsigned nops, unsigned lanes, unsigned chain, uint32_t split,
	       struct rk__xwr *out, unsigned *doorbells);

/* ---- the layer's objects (xfer*.c below, layer 5) ---- */

struct ibv_mw;
struct ibv_mr;
struct ibv_pd;
struct rk__xexport;

struct rk_xfer {
	struct rk_device *dev;
	struct ibv_pd *pd;
	enum rk_xfer_mode mode;
	struct rk_xfer_opts opts; /* defaults resolved */
	struct rk__xcache cache;
	struct rk_xfer_stats st;
	uint32_t next_seg_id;
	struct rk_xfer_seg *segs;
	struct rk_xfer_peer **peers; /* by index (a notification receive's wr_id names it) */
	unsigned npeers;
	struct rk_xfer_batch **slots; /* max_batches; NULL = free */
	struct rk_xfer_batch *spare;  /* released batch blocks, for reuse */
	struct rk_xfer_prep *preps;   /* prepared batches not freed (xfer_prep.c) */
	unsigned nspare;
	uint64_t ctl_seq; /* ids of binds and invalidations */
	uint32_t batch_serial;
	unsigned npending; /* batches in the peers' FIFOs (chains or a notification waiting) */
	uint64_t ctl_base; /* completions below it are of an earlier wait */
	unsigned ctl_pending;
	int ctl_status; /* the first failed one's ibv_wc_status since ctl_base, or 0 */
};

struct rk_xfer_seg {
	struct rk_xfer *x;
	void *addr;
	size_t len;
	unsigned access;
	uint32_t id;
	struct rk__xregion *region;
	int made_region; /* it created its region (seals it when it goes) */
	struct rk__xexport *exports;
	struct rk_xfer_seg *next;
};

/* One segment exported to one peer. */
struct rk__xexport {
	struct rk_xfer_peer *peer;
	unsigned access;
	uint32_t gen;
	int live;
	struct ibv_mw *mw[RK_XFER_LANES_MAX]; /* MW mode, one per lane */
	uint32_t rkey[RK_XFER_LANES_MAX];
	struct ibv_mr *mr; /* MR mode */
	struct rk__xexport *next;
};

struct rk_xfer_peer {
	struct rk_xfer *x;
	unsigned idx;
	unsigned nlanes;
	struct rk_conn *lanes[RK_XFER_LANES_MAX];
	/* notifications that arrived, oldest first */
	uint32_t *nq;
	unsigned nq_cap, nq_head, nq_count;
	unsigned held[RK_XFER_LANES_MAX]; /* receives not reposted for want of room */
	/* the newest generation imported per segment id */
	struct rk__xgens gens;
	/* batches with chains not posted yet, in order */
	struct rk_xfer_batch *pend_head, *pend_tail;
};

struct rk_xfer_remote {
	struct rk_xfer_peer *peer;
	struct rk__xdesc d;
};

/* A descriptor a prepared batch names: its generation is checked at each post. */
struct rk__xprep_desc {
	uint32_t seg_id, gen;
};

struct rk_prepared;

/*
 * A prepared batch (xfer_prep.c): the ops checked and planned once, each
 * chain's verbs WRs built (rk_prepare). One block: the struct, the plan
 * (nwr), the chain starting at each WR (nwr; NULL inside a chain), the
 * distinct descriptors and the distinct local segments. Counted: the
 * caller's reference until rk_xfer_prep_free, and one per batch posted
 * from it until the batch's block is released (the batch reads its plan).
 */
struct rk_xfer_prep {
	struct rk_xfer *x;	   /* NULL once the rk_xfer is destroyed */
	struct rk_xfer_peer *peer; /* NULL once the peer is destroyed */
	const char *dead;	   /* why it may not be posted any more, or NULL */
	unsigned refs;
	int freed; /* the caller released it */
	unsigned nops, nwr, lanes_used;
	int has_reads;
	unsigned next[RK_XFER_LANES_MAX], end[RK_XFER_LANES_MAX]; /* per lane, into plan */
	struct rk__xwr *plan;
	struct rk_prepared **chain;
	struct rk__xprep_desc *desc;
	unsigned ndesc;
	struct rk_xfer_seg **segs;
	unsigned nsegs;
	struct rk_xfer_prep *link; /* the rk_xfer's list */
};

/* An op resolved at post: where its pieces go. */
struct rk__xop {
	uint64_t laddr, raddr;
	uint32_t lkey, rkey;
	uint8_t write;
};

/*
 * A batch and its per-op arrays are one block (ops, lens, op_err, op_wc,
 * each of cap_ops entries, after the struct). Released blocks are kept on
 * the rk_xfer's spare list for the next posts: a steady stream of batches
 * allocates nothing. Everything above `why` is zeroed when a block is
 * (re)used; `why` is written by the failure that reads it.
 */
struct rk_xfer_batch {
	struct rk_xfer *x;
	struct rk_xfer_peer *peer;
	uint16_t slot, serial;
	int ended;   /* the outcome is fixed: 1 well, or result < 0 */
	int result;  /* 1 or a negative errno */
	int freed;   /* the caller released it: the slot goes once drained */
	int pending; /* in the peer's FIFO */
	int64_t deadline;
	unsigned nops, nwr;
	struct rk__xop *ops;
	int *op_err;
	uint8_t *op_wc;
	const struct rk__xwr *plan; /* wrs, or the prepared batch's */
	struct rk_xfer_prep *prep;  /* posted from it (a reference), or NULL */
	uint64_t id_hi;		    /* the wr_id's tag, slot and serial */
	unsigned next[RK_XFER_LANES_MAX], end[RK_XFER_LANES_MAX]; /* per lane, into wrs */
	unsigned out;			      /* signaled WRs posted, not completed */
	unsigned lane_out[RK_XFER_LANES_MAX]; /* the same per lane: the lanes to cut */
	unsigned lanes_used;		      /* bit mask */
	int has_reads;
	int notify, notif_posted;
	int notif_due; /* deferred notification waiting for lane 0's send-queue room */
	uint32_t notif;
	struct rk_xfer_batch *pend_next; /* also the spare list's link */
	/* Not zeroed on reuse (see above). */
	struct rk_error why;
	unsigned cap_ops, cap_wrs; /* the block's and wrs' room, in entries */
	struct rk__xwr *wrs;	   /* rk_xfer_post's plan (cap_wrs), then done */
	uint8_t *done;		   /* per WR: signaled and its completion came */
};

/* xfer_poll.c: poll @lanes' CQs once (waiting up to @wait_ms if nothing came), handing
 * completions over. */
int rk__xfer_poll(struct rk_xfer *x, struct rk_conn *const *lanes, unsigned nlanes, int wait_ms);
/* xfer_notif.c: post a notification receive on lane @lane of @p (counted on the lane). */
int rk__xfer_notif_recv(struct rk_xfer_peer *p, unsigned lane, struct rk_error *err);
/* The live peer of @x with a lane on QP @qp_num (lane index in *@lane), or NULL. */
struct rk_xfer_peer *rk__xfer_qp_peer(struct rk_xfer *x, uint32_t qp_num, unsigned *lane);
/* xfer_batch.c: fail and release every batch of @peer (peer destroy). */
void rk__xfer_drop_peer(struct rk_xfer *x, struct rk_xfer_peer *peer);
/* xfer_batch.c, for xfer_poll.c: a completion of batch @b's WR @w (NOTIF_IDX: its notification). */
void rk__xfer_op_completion(struct rk_xfer_batch *b, unsigned w, const struct ibv_wc *wc);
/* xfer_batch.c: free the spare batch blocks of @x (rk_xfer_destroy). */
void rk__xfer_spares_free(struct rk_xfer *x);
/*
 * xfer_batch.c, for xfer_prep.c: check @ops (rk_xfer_post's rules) and
 * resolve them into @out, their lengths into @lens.
 */
int rk__xfer_check_ops(struct rk_xfer_peer *p, const struct rk_xfer_op *ops, unsigned nops,
		       struct rk__xop *out, uint64_t *lens, struct rk_error *err);
/* xfer_prep.c: drop one reference of @pp (a batch's block was released). */
void rk__xprep_put(struct rk_xfer_prep *pp);
/* xfer_prep.c: @seg goes: the prepared batches that name it are dead. */
void rk__xprep_seg_gone(struct rk_xfer *x, const struct rk_xfer_seg *seg);
/* xfer_prep.c: @peer goes: its prepared batches are dead, their chains freed. */
void rk__xprep_peer_gone(struct rk_xfer *x, const struct rk_xfer_peer *peer);
/* xfer_prep.c: @x goes: prepared batches not freed are detached from it. */
void rk__xprep_detach_all(struct rk_xfer *x);
/* Post what waits for send-queue room, on every peer of @x. */
void rk__xfer_pump_all(struct rk_xfer *x);
/* xfer_notif.c, for xfer_poll.c: a notification receive completed; 1 if @x's (see there). */
int rk__xfer_notif_arrival(struct rk_xfer *x, uint64_t wr_id, const struct ibv_wc *wc);

#endif
