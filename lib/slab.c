/*
 * slab.c - size-class allocator over chunks provided by a callback.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "slab.h"
#include "rk_internal.h"

static int log2_exact(uint64_t v)
{
	return v && !(v & (v - 1)) ? __builtin_ctzll(v) : -1;
}

/* Where slot @slot lives: its chunk and its address. */
static void locate(const struct rk_slab_class *c, uint32_t slot, const struct rk_slab_chunk **ch,
		   char **addr)
{
	uint32_t ci, off;

	if (c->chunk_shift >= 0 && c->size_shift >= 0) {
		ci = slot >> c->chunk_shift;
		off = slot & (c->per_chunk - 1);
		*ch = &c->chunks[ci];
		*addr = (char *)(*ch)->base + ((size_t)off << c->size_shift);
		return;
	}
	ci = slot / c->per_chunk;
	off = slot % c->per_chunk;
	*ch = &c->chunks[ci];
	*addr = (char *)(*ch)->base + (size_t)off * c->size;
}

static const size_t default_sizes[] = {4096, 64 * 1024, 1024 * 1024};

int rk__slab_init(struct rk_slab *s, const size_t *sizes, size_t chunk_size, size_t max_bytes,
		  rk_slab_grow_fn grow, rk_slab_release_fn release, void *ctx, struct rk_error *err)
{
	unsigned n = 0;

	memset(s, 0, sizeof(*s));
	s->grow = grow;
	s->release = release;
	s->ctx = ctx;
	s->max_bytes = max_bytes;
	s->chunk_size = chunk_size ? chunk_size : 4u << 20;
	if (!sizes || !sizes[0])
		sizes = default_sizes, n = sizeof(default_sizes) / sizeof(default_sizes[0]);
	else
		while (n < RK_POOL_MAX_CLASSES && sizes[n])
			n++;
	for (unsigned i = 0; i < n; i++) {
		struct rk_slab_class *c = &s->classes[i];
		size_t chunk;

		if (i > 0 && sizes[i] <= sizes[i - 1])
			return rk__err_set(err, EINVAL, "rk_pool_create",
					   "class sizes must ascend (%zu after %zu)", sizes[i],
					   sizes[i - 1]);
		c->size = sizes[i];
		chunk = s->chunk_size < c->size ? c->size : s->chunk_size;
		c->per_chunk = (uint32_t)(chunk / c->size);
		c->size_shift = log2_exact(c->size);
		c->chunk_shift = log2_exact(c->per_chunk);
		if (chunk / c->size > 65536)
			return rk__err_set(err, EINVAL, "rk_pool_create",
					   "class %zu: %zu buffers per chunk is too many", c->size,
					   chunk / c->size);
	}
	s->nclasses = n;
	return 0;
}

int rk__slab_grow_class(struct rk_slab *s, unsigned ci, struct rk_error *err)
{
	struct rk_slab_class *c = &s->classes[ci];
	size_t bytes = (size_t)c->per_chunk * c->size;
	uint64_t nslots = (uint64_t)(c->nchunks + 1) * c->per_chunk;
	struct rk_slab_chunk chunk = {0};
	uint32_t *stack;
	uint8_t *used;
	int r;

	if (s->max_bytes && s->st.registered_bytes + bytes > s->max_bytes)
		return rk__err_set(err, ENOMEM, "rk_pool_alloc",
				   "pool limit of %zu bytes reached (class %zu)", s->max_bytes,
				   c->size);
	if (nslots > RK_SLAB_MAX_SLOTS)
		return rk__err_set(err, ENOMEM, "rk_pool_alloc", "class %zu has too many buffers",
				   c->size);
	if (c->nchunks == c->chunks_cap) {
		uint32_t cap = c->chunks_cap ? c->chunks_cap * 2 : 4;
		struct rk_slab_chunk *nc = realloc(c->chunks, cap * sizeof(*nc));

		if (!nc)
			return rk__err_set(err, ENOMEM, "rk_pool_alloc", NULL);
		c->chunks = nc;
		c->chunks_cap = cap;
	}
	stack = realloc(c->free_stack, nslots * sizeof(*stack));
	if (!stack)
		return rk__err_set(err, ENOMEM, "rk_pool_alloc", NULL);
	c->free_stack = stack;
	used = realloc(c->in_use, nslots);
	if (!used)
		return rk__err_set(err, ENOMEM, "rk_pool_alloc", NULL);
	c->in_use = used;

	r = s->grow(s->ctx, bytes, &chunk, err);
	if (r)
		return r;
	c->chunks[c->nchunks] = chunk;
	/* Push in reverse so the lowest address is handed out first. */
	for (uint32_t i = 0; i < c->per_chunk; i++) {
		uint32_t slot = (uint32_t)nslots - 1 - i;

		c->free_stack[c->nfree++] = slot;
		c->in_use[slot] = 0;
	}
	c->nchunks++;
	s->st.chunks++;
	s->st.registered_bytes += bytes;
	return 0;
}

int rk__slab_alloc(struct rk_slab *s, size_t size, struct rk_buf *out, struct rk_error *err)
{
	struct rk_slab_class *c = NULL;
	const struct rk_slab_chunk *ch;
	uint32_t slot;
	unsigned ci;
	char *addr;
	int r;

	for (ci = 0; ci < s->nclasses; ci++)
		if (s->classes[ci].size >= size) {
			c = &s->classes[ci];
			break;
		}
	if (!c) {
		s->st.alloc_failures++;
		return rk__err_set(err, E2BIG, "rk_pool_alloc",
				   "%zu bytes exceed the largest class", size);
	}
	if (c->nfree == 0) {
		r = rk__slab_grow_class(s, ci, err);
		if (r) {
			s->st.alloc_failures++;
			return r;
		}
	}
	slot = c->free_stack[--c->nfree];
	c->in_use[slot] = 1;
	locate(c, slot, &ch, &addr);
	out->addr = addr;
	out->len = c->size;
	out->lkey = ch->lkey;
	out->rkey = ch->rkey;
	out->id = (uint32_t)ci << RK_SLAB_SLOT_BITS | slot;
	s->st.allocs++;
	s->st.in_use++;
	s->st.in_use_bytes += c->size;
	return 0;
}

int rk__slab_free(struct rk_slab *s, const struct rk_buf *buf)
{
	unsigned ci = buf->id >> RK_SLAB_SLOT_BITS;
	uint32_t slot = buf->id & (RK_SLAB_MAX_SLOTS - 1);
	struct rk_slab_class *c;
	const struct rk_slab_chunk *ch;
	char *addr;

	if (ci >= s->nclasses)
		return -EINVAL;
	c = &s->classes[ci];
	if (slot >= c->nchunks * c->per_chunk || !c->in_use[slot])
		return -EINVAL;
	locate(c, slot, &ch, &addr);
	if (buf->addr != addr || buf->len != c->size)
		return -EINVAL;
	c->in_use[slot] = 0;
	c->free_stack[c->nfree++] = slot;
	s->st.frees++;
	s->st.in_use--;
	s->st.in_use_bytes -= c->size;
	return 0;
}

void rk__slab_fini(struct rk_slab *s)
{
	for (unsigned ci = 0; ci < s->nclasses; ci++) {
		struct rk_slab_class *c = &s->classes[ci];

		for (uint32_t i = 0; i < c->nchunks; i++)
			s->release(s->ctx, &c->chunks[i]);
		free(c->chunks);
		free(c->free_stack);
		free(c->in_use);
		memset(c, 0, sizeof(*c));
	}
	s->nclasses = 0;
}
