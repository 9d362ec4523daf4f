/*
 * slab.h - the pool's bookkeeping, free of verbs so it can be unit tested.
 *
 * Buffers come from size classes; each class owns chunks of memory that a
 * callback provides (the pool registers them, the unit tests malloc them).
 * A buffer is named by an id: the class in the top 4 bits, the slot index
 * within the class below. Free slots sit on a per-class stack of indices
 * kept outside the buffer memory, so alloc and free are O(1) and a peer
 * scribbling on freed memory cannot corrupt the allocator.
 */
#ifndef RK_SLAB_H
#define RK_SLAB_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/error.h>
#include <rdmakit/pool.h>

#define RK_SLAB_SLOT_BITS 28
#define RK_SLAB_MAX_SLOTS (1u << RK_SLAB_SLOT_BITS)

struct rk_slab_chunk {
	void *base;
	size_t bytes;
	uint32_t lkey, rkey;
	void *handle; /* the provider's (e.g. the struct rk_mr) */
};

/* Provide @bytes of memory for a new chunk; fill @c. 0 or negative errno. */
typedef int (*rk_slab_grow_fn)(void *ctx, size_t bytes, struct rk_slab_chunk *c,
			       struct rk_error *err);
typedef void (*rk_slab_release_fn)(void *ctx, struct rk_slab_chunk *c);

struct rk_slab_class {
	size_t size;
	uint32_t per_chunk;
	/* log2 of size and per_chunk when both are powers of two, else -1:
	   the hot path then shifts instead of dividing. */
	int size_shift, chunk_shift;
	struct rk_slab_chunk *chunks;
	uint32_t nchunks, chunks_cap;
	uint32_t *free_stack; /* slot indices; capacity nchunks * per_chunk */
	uint32_t nfree;
	uint8_t *in_use; /* one byte per slot: catches double and foreign frees */
};

struct rk_slab {
	struct rk_slab_class classes[RK_POOL_MAX_CLASSES];
	unsigned nclasses;
	size_t chunk_size, max_bytes;
	rk_slab_grow_fn grow;
	rk_slab_release_fn release;
	void *ctx;
	struct rk_pool_stats st;
};

/*
 * rk__slab_init - set up classes from @sizes (ascending, zero-terminated or
 * RK_POOL_MAX_CLASSES long; all zero = defaults). No memory is requested
 * yet. Returns 0 or -EINVAL (unsorted or zero sizes, too many slots).
 */
int rk__slab_init(struct rk_slab *s, const size_t *sizes, size_t chunk_size, size_t max_bytes,
		  rk_slab_grow_fn grow, rk_slab_release_fn release, void *ctx,
		  struct rk_error *err);
/* rk__slab_grow_class - add one chunk to class @ci. */
int rk__slab_grow_class(struct rk_slab *s, unsigned ci, struct rk_error *err);
int rk__slab_alloc(struct rk_slab *s, size_t size, struct rk_buf *out, struct rk_error *err);
int rk__slab_free(struct rk_slab *s, const struct rk_buf *buf);
/* rk__slab_fini - release every chunk and the bookkeeping. */
void rk__slab_fini(struct rk_slab *s);

#endif
