/*
 * xfer_cache.c - the registration cache under segments (xfer.h): regions
 * keyed by (PD, [start, end), access), counted by the segments inside them.
 *
 * Containment is a hit; an overlap that is not contained registers its own
 * region (merging would re-register memory other segments' keys depend
 * on). A region goes at its last reference: nothing is kept for later, so a
 * range freed and allocated again (same address, other pages) is always
 * registered anew - a cache keyed on the address alone would hand out a
 * registration of the old pages. For the same reason a region stops
 * taking hits once the segment that created it (whose range it is) goes,
 * even while segments inside keep it registered: the rest of its range may
 * have been unmapped and mapped again (a partial munmap, then mmap at the
 * same address), and a new segment there must not get the old pages. The
 * verbs calls are injected (ops), so
 * the unit tests count them on a host without a device.
 */
#include <errno.h>
#include <stdlib.h>

#include "xfer_int.h"

void rk__xcache_init(struct rk__xcache *c, const struct rk__xcache_ops *ops)
{
	c->ops = *ops;
	c->head = NULL;
	c->nregions = 0;
	c->regs = c->deregs = c->hits = 0;
}

int rk__xcache_get(struct rk__xcache *c, void *pd, void *addr, size_t len, int access,
		   struct rk__xregion **out)
{
	uintptr_t start = (uintptr_t)addr, end = start + len;
	struct rk__xregion *r;

	if (!len || end < start)
		return -EINVAL;
	for (r = c->head; r; r = r->next)
		if (!r->sealed && r->pd == pd && r->access == access && r->start <= start &&
		    end <= r->end) {
			r->refs++;
			c->hits++;
			*out = r;
			return 0;
		}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	errno = 0;
	r->mr = c->ops.reg(c->ops.ctx, pd, addr, len, access, &r->lkey);
	if (!r->mr) {
		int e = errno ? errno : EIO;

		free(r);
		return -e;
	}
	c->regs++;
	r->start = start;
	r->end = end;
	r->pd = pd;
	r->access = access;
	r->refs = 1;
	r->next = c->head;
	c->head = r;
	c->nregions++;
	*out = r;
	return 0;
}

void rk__xcache_seal(struct rk__xregion *r)
{
	r->sealed = 1;
}

void rk__xcache_put(struct rk__xcache *c, struct rk__xregion *r)
{
	struct rk__xregion **pp;

	if (!r || --r->refs)
		return;
	for (pp = &c->head; *pp && *pp != r; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = r->next;
	c->ops.dereg(c->ops.ctx, r->mr);
	c->deregs++;
	c->nregions--;
	free(r);
}

void rk__xcache_fini(struct rk__xcache *c)
{
	while (c->head) {
		c->head->refs = 1;
		rk__xcache_put(c, c->head);
	}
}
