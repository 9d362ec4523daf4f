/*
 * rdmakit/pool.h - a pool of pre-registered buffers.
 *
 * Registering memory costs a syscall and pins pages; doing it per request is
 * far too slow. The pool registers memory in whole chunks up front and hands
 * out buffers from size classes (a slab allocator): alloc and free are O(1)
 * and touch no kernel. Each buffer is addressable locally by (addr, lkey)
 * and by the peer as (addr, rkey) when the pool was created with remote
 * access. The pool grows by one registered chunk when a class runs dry, up
 * to a byte limit.
 *
 * The pool's bookkeeping lives outside the registered memory, so a peer
 * writing into a freed buffer cannot corrupt the allocator.
 *
 * Thread-safety: one thread at a time per pool (wrap it in your own lock to
 * share it). Buffers may be used by any thread.
 */
#ifndef RDMAKIT_POOL_H
#define RDMAKIT_POOL_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/common.h>
#include <rdmakit/device.h>
#include <rdmakit/error.h>
#include <rdmakit/pd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RK_POOL_MAX_CLASSES 16

struct rk_pool;

struct rk_pool_opts {
	unsigned access;			 /* enum rk_access flags for every chunk */
	size_t class_sizes[RK_POOL_MAX_CLASSES]; /* ascending; zeros end the list.
						    all zero = 4 KiB, 64 KiB, 1 MiB */
	size_t chunk_size;			 /* bytes registered at a time per class; 0 = 4 MiB
						    (rounded up to hold at least one buffer) */
	size_t max_bytes;			 /* limit on registered bytes; 0 = no limit */
	unsigned prealloc;			 /* chunks to register per class up front */
	struct rk_pd *pd; /* register in this PD (pd.h; it must outlive the pool); NULL =
			     the device's */
};

/* A buffer handed out by the pool. Plain data; copy it freely. */
struct rk_buf {
	void *addr;
	size_t len; /* the class size (>= the size asked for) */
	uint32_t lkey;
	uint32_t rkey; /* only meaningful with remote access */
	uint32_t id;   /* pool-internal: identifies the slot; do not change */
};

struct rk_pool_stats {
	uint64_t allocs, frees;
	uint64_t alloc_failures; /* no class large enough or limit reached */
	uint64_t chunks;	 /* registered chunks */
	uint64_t registered_bytes;
	uint64_t in_use_bytes; /* sum of class sizes handed out */
	uint64_t in_use;       /* buffers handed out */
};

/*
 * rk_pool_create - create a pool on @dev (NULL @opts = defaults). Registers
 * @opts->prealloc chunks per class now. The pool belongs to the caller and
 * must be destroyed before the device is closed.
 */
RK_API int rk_pool_create(struct rk_device *dev, const struct rk_pool_opts *opts,
			  struct rk_error *err, struct rk_pool **out);

/*
 * rk_pool_destroy - deregister and free every chunk. Buffers still handed
 * out become invalid. Accepts NULL.
 */
RK_API void rk_pool_destroy(struct rk_pool *pool);

/*
 * rk_pool_alloc - hand out a buffer of at least @size bytes from the
 * smallest class that fits. O(1); registers a new chunk (slow path) when
 * the class is empty. Returns 0, -E2BIG if @size exceeds the largest class,
 * -ENOMEM if the byte limit is reached or registration fails (see @err).
 */
RK_API int rk_pool_alloc(struct rk_pool *pool, size_t size, struct rk_buf *out,
			 struct rk_error *err);

/*
 * rk_pool_free - return @buf to its pool. O(1). Returns 0, or -EINVAL if
 * @buf was not handed out by @pool or was already freed (nothing changes).
 */
RK_API int rk_pool_free(struct rk_pool *pool, const struct rk_buf *buf);

/* rk_pool_get_stats - a snapshot of the counters. */
RK_API void rk_pool_get_stats(const struct rk_pool *pool, struct rk_pool_stats *st);

#ifdef __cplusplus
}
#endif

#endif
