/*
 * xfer_import.c - the importing side of descriptors (xfer.h): a hostile
 * blob checked (xfer_desc.c) and made a handle, with the newest
 * generation per segment remembered (xfer_gens.c) so older ones are
 * refused.
 */
#include <errno.h>
#include <stdlib.h>

#include "rk_internal.h"
#include "xfer_int.h"

int rk_xfer_import(struct rk_xfer_peer *p, const void *buf, size_t len, struct rk_error *err,
		   struct rk_xfer_remote **out)
{
	struct rk_xfer_remote *rm;
	struct rk__xdesc d;
	const char *why = "?";
	struct rk__xgen *g = NULL;
	int r;

	r = rk__xdesc_decode(buf, len, &d, &why);
	if (r)
		return rk__err_set(err, -r, "rk_xfer_import", "bad descriptor (%zu bytes): %s", len,
				   why);
	if (d.lanes != p->nlanes)
		return rk__err_set(err, EINVAL, "rk_xfer_import",
				   "descriptor for %u lanes, this peer has %u", d.lanes, p->nlanes);
	g = rk__xgens_find(&p->gens, d.seg_id);
	if (g && d.gen < g->gen)
		return rk__err_set(err, ESTALE, "rk_xfer_import",
				   "segment %u: generation %u, %u was imported already", d.seg_id,
				   d.gen, g->gen);
	rm = calloc(1, sizeof(*rm));
	if (!rm)
		return rk__err_set(err, ENOMEM, "rk_xfer_import", NULL);
	if (!g) {
		r = rk__xgens_add(&p->gens, d.seg_id, RK_XGENS_MAX, &g);
		if (r) {
			free(rm);
			return rk__err_set(
			    err, -r, "rk_xfer_import",
			    "%u segments of this peer imported and in use (free some "
			    "handles)",
			    p->gens.n);
		}
	}
	g->gen = d.gen;
	g->refs++;
	rm->peer = p;
	rm->d = d;
	*out = rm;
	return 0;
}

void rk_xfer_remote_free(struct rk_xfer_remote *r)
{
	struct rk__xgen *g;

	if (!r)
		return;
	g = rk__xgens_find(&r->peer->gens, r->d.seg_id);
	if (g && g->refs)
		g->refs--;
	free(r);
}

uint64_t rk_xfer_remote_len(const struct rk_xfer_remote *r)
{
	return r->d.len;
}

unsigned rk_xfer_remote_access(const struct rk_xfer_remote *r)
{
	return r->d.access;
}

enum rk_xfer_mode rk_xfer_remote_mode(const struct rk_xfer_remote *r)
{
	return (enum rk_xfer_mode)r->d.mode;
}
