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
/* Drop one count; the region is deregistered and forgotten at 0. */
void rk__xcache_put(struct rk__xcache *c, struct rk__xregion *r);
/* Deregister every region (teardown). */
void rk__xcache_fini(struct rk__xcache *c);

/* ---- batch planner (xfer_plan.c, layer 0) ---- */

/* One work request of a plan, in posting order: lane by lane, chain by chain. */
struct rk__xwr {
	uint32_t op;	  /* index of the op it belongs to */
	uint32_t len;	  /* bytes, <= split */
	uint64_t off;	  /* from the op's start */
	uint16_t lane;	  /* op % lanes */
	uint8_t signaled; /* last WR of its chain */
	uint8_t first;	  /* first WR of its chain (a doorbell) */
};

#define RK_XPLAN_MAX_WRS 65535u

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

#endif
