/*
 * xfer_gens.c - the importer's table of the newest descriptor generation
 * seen per segment of one peer (xfer.h: an older generation is refused).
 * Sorted by segment id, so import and every op's check are a binary
 * search, and capped: the owner's segment ids only grow, so a long-lived
 * peer would otherwise grow it forever. At the cap an entry no handle uses
 * is forgotten (the lowest id: the owner's oldest segment); when every one
 * is in use, the import is refused. Pure, so the unit tests drive it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_int.h"

/* Index of the first entry with id >= @seg_id. */
static unsigned lower(const struct rk__xgens *t, uint32_t seg_id)
{
	unsigned lo = 0, hi = t->n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (t->v[mid].seg_id < seg_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct rk__xgen *rk__xgens_find(const struct rk__xgens *t, uint32_t seg_id)
{
	unsigned i = lower(t, seg_id);

	return i < t->n && t->v[i].seg_id == seg_id ? &t->v[i] : NULL;
}

int rk__xgens_add(struct rk__xgens *t, uint32_t seg_id, unsigned max, struct rk__xgen **out)
{
	unsigned i;

	if (rk__xgens_find(t, seg_id))
		return -EEXIST;
	if (t->n >= max) {
		unsigned k;

		for (k = 0; k < t->n && t->v[k].refs; k++)
			;
		if (k == t->n)
			return -ENOSPC;
		memmove(&t->v[k], &t->v[k + 1], (t->n - k - 1) * sizeof(*t->v));
		t->n--;
		t->evicted++;
	}
	if (t->n == t->cap) {
		unsigned cap = t->cap ? 2 * t->cap : 16;
		struct rk__xgen *nv;

		if (cap > max)
			cap = max;
		nv = realloc(t->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		t->v = nv;
		t->cap = cap;
	}
	i = lower(t, seg_id);
	memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof(*t->v));
	t->v[i].seg_id = seg_id;
	t->v[i].gen = 0;
	t->v[i].refs = 0;
	t->n++;
	*out = &t->v[i];
	return 0;
}

void rk__xgens_fini(struct rk__xgens *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}
