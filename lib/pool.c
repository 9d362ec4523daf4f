/*
 * pool.c - the pre-registered buffer pool: slab bookkeeping over
 * registered chunks.
 */
#include <errno.h>
#include <stdlib.h>

#include "slab.h"
#include "rk_internal.h"

struct rk_pool {
	struct rk_device *dev;
	struct rk_pd *pd; /* NULL: the device's */
	unsigned access;
	struct rk_slab slab;
};

static int grow_chunk(void *ctx, size_t bytes, struct rk_slab_chunk *c, struct rk_error *err)
{
	struct rk_pool *pool = ctx;
	struct rk_mr *mr;
	int r;

	r = pool->pd ? rk_mr_alloc_pd(pool->pd, bytes, pool->access, err, &mr)
		     : rk_mr_alloc(pool->dev, bytes, pool->access, err, &mr);
	if (r)
		return r;
	c->base = rk_mr_addr(mr);
	c->bytes = bytes;
	c->lkey = rk_mr_lkey(mr);
	c->rkey = rk_mr_rkey(mr);
	c->handle = mr;
	return 0;
}

static void release_chunk(void *ctx, struct rk_slab_chunk *c)
{
	rk_mr_dereg(c->handle);
}

int rk_pool_create(struct rk_device *dev, const struct rk_pool_opts *opts, struct rk_error *err,
		   struct rk_pool **out)
{
	struct rk_pool_opts def = {0};
	struct rk_pool *pool;
	int r;

	if (!opts)
		opts = &def;
	*out = NULL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return rk__err_set(err, ENOMEM, "rk_pool_create", NULL);
	pool->dev = dev;
	pool->pd = opts->pd;
	pool->access = opts->access;
	r = rk__slab_init(&pool->slab, opts->class_sizes, opts->chunk_size, opts->max_bytes,
			  grow_chunk, release_chunk, pool, err);
	if (r) {
		free(pool);
		return r;
	}
	for (unsigned ci = 0; ci < pool->slab.nclasses; ci++)
		for (unsigned i = 0; i < opts->prealloc; i++) {
			r = rk__slab_grow_class(&pool->slab, ci, err);
			if (r) {
				rk_pool_destroy(pool);
				return r;
			}
		}
	*out = pool;
	return 0;
}

void rk_pool_destroy(struct rk_pool *pool)
{
	if (!pool)
		return;
	if (pool->slab.st.in_use)
		rk_dbg("pool destroyed with %llu buffers still handed out",
		       (unsigned long long)pool->slab.st.in_use);
	rk__slab_fini(&pool->slab);
	free(pool);
}

int rk_pool_alloc(struct rk_pool *pool, size_t size, struct rk_buf *out, struct rk_error *err)
{
	return rk__slab_alloc(&pool->slab, size, out, err);
}

int rk_pool_free(struct rk_pool *pool, const struct rk_buf *buf)
{
	return rk__slab_free(&pool->slab, buf);
}

void rk_pool_get_stats(const struct rk_pool *pool, struct rk_pool_stats *st)
{
	*st = pool->slab.st;
}
