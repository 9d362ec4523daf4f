/*
 * xfer_prep.c - prepared batches (xfer.h, rk_xfer_prepare): the ops of a
 * batch checked against their segments and descriptors once, planned
 * once, and each chain's verbs work requests built once (rk_prepare), so
 * that rk_xfer_post_prepared (xfer_batch.c) checks per post only what can
 * change: the lanes, the descriptors' generations, whether the prepared
 * batch is still alive.
 *
 * What keeps it true: the ops' bounds and access depend on the segments'
 * ranges and the descriptors' fields, which never change; a segment that
 * is deregistered, or the peer destroyed, makes it dead (posting refuses
 * it); the descriptors' generations are referenced in the importer's
 * table, so a newer import still makes it stale.
 */
#include <errno.h>
#include <stdlib.h>

#include "rk_internal.h"
#include "xfer_int.h"

/* The distinct descriptors and local segments of @ops, into @pp (room for nops each). */
static void distinct(struct rk_xfer_prep *pp, const struct rk_xfer_op *ops, unsigned nops)
{
	const struct rk_xfer_remote *last_rm = NULL;
	const struct rk_xfer_seg *last_seg = NULL;

	for (unsigned i = 0; i < nops; i++) {
		const struct rk_xfer_remote *rm = ops[i].remote;
		unsigned k;

		if (rm != last_rm) { /* the ops of a batch mostly name one descriptor */
			for (k = 0; k < pp->ndesc && (pp->desc[k].seg_id != rm->d.seg_id ||
						      pp->desc[k].gen != rm->d.gen);
			     k++)
				;
			if (k == pp->ndesc)
				pp->desc[pp->ndesc++] =
				    (struct rk__xprep_desc){rm->d.seg_id, rm->d.gen};
			last_rm = rm;
		}
		if (ops[i].local != last_seg) {
			for (k = 0; k < pp->nsegs && pp->segs[k] != ops[i].local; k++)
				;
			if (k == pp->nsegs)
				pp->segs[pp->nsegs++] = ops[i].local;
			last_seg = ops[i].local;
		}
	}
}

/* Each chain of @pp's plan as a prepared chain of verbs WRs on its lane. */
static int build_chains(struct rk_xfer_prep *pp, const struct rk__xop *xops, struct rk_error *err)
{
	struct rk_wr wrs[RK_XFER_CHAIN_MAX];

	for (unsigned w = 0; w < pp->nwr;) {
		unsigned n = 0;
		int r;

		do {
			const struct rk__xwr *pw = &pp->plan[w + n];
			const struct rk__xop *op = &xops[pw->op];

			wrs[n] = (struct rk_wr){
			    .op = op->write ? RK_OP_WRITE : RK_OP_READ,
			    .flags = pw->signaled ? RK_WR_SIGNALED : 0,
			    .addr = (void *)(uintptr_t)(op->laddr + pw->off),
			    .len = pw->len,
			    .lkey = op->lkey,
			    .remote_addr = op->raddr + pw->off,
			    .rkey = op->rkey,
			};
		} while (!pp->plan[w + n++].signaled);
		r = rk_prepare(pp->peer->lanes[pp->plan[w].lane], wrs, n, err, &pp->chain[w]);
		if (r)
			return r;
		w += n;
	}
	return 0;
}

static void chains_free(struct rk_xfer_prep *pp)
{
	for (unsigned w = 0; w < pp->nwr; w++) {
		rk_prepared_free(pp->chain[w]);
		pp->chain[w] = NULL;
	}
}

static void prep_destroy(struct rk_xfer_prep *pp)
{
	chains_free(pp);
	free(pp);
}

int rk_xfer_prepare(struct rk_xfer_peer *p, const struct rk_xfer_op *ops, unsigned nops,
		    struct rk_error *err, struct rk_xfer_prep **out)
{
	struct rk_xfer *x = p->x;
	struct rk_xfer_prep *pp = NULL;
	struct rk__xop *xops;
	uint64_t *lens;
	long nwr;
	int r;

	if (!p->nlanes)
		return rk__err_set(err, EINVAL, "rk_xfer_prepare", "a peer without lanes");
	if (!nops || nops > x->opts.max_ops)
		return rk__err_set(err, nops ? E2BIG : EINVAL, "rk_xfer_prepare", "%u ops (1..%u)",
				   nops, x->opts.max_ops);
	xops = malloc((size_t)nops * (sizeof(*xops) + sizeof(*lens)));
	if (!xops)
		return rk__err_set(err, ENOMEM, "rk_xfer_prepare", NULL);
	lens = (uint64_t *)(void *)(xops + nops);
	r = rk__xfer_check_ops(p, ops, nops, xops, lens, err);
	if (r)
		goto out;
	nwr = rk__xplan_count(lens, nops, RK_XFER_SPLIT, RK_XPLAN_MAX_WRS);
	if (nwr < 0) {
		r = rk__err_set(err, (int)-nwr, "rk_xfer_prepare", "%u ops make more than %u WRs",
				nops, RK_XPLAN_MAX_WRS);
		goto out;
	}
	/* plan and chain pointers per WR, a descriptor and a segment pointer per op */
	pp = calloc(1, sizeof(*pp) + (size_t)nwr * (sizeof(struct rk__xwr) + sizeof(void *)) +
			   (size_t)nops * (sizeof(struct rk__xprep_desc) + sizeof(void *)));
	if (!pp) {
		r = rk__err_set(err, ENOMEM, "rk_xfer_prepare", NULL);
		goto out;
	}
	pp->plan = (struct rk__xwr *)(void *)(pp + 1);
	pp->chain = (struct rk_prepared **)(void *)(pp->plan + nwr);
	pp->segs = (struct rk_xfer_seg **)(pp->chain + nwr);
	pp->desc = (struct rk__xprep_desc *)(void *)(pp->segs + nops);
	pp->x = x;
	pp->peer = p;
	pp->nops = nops;
	pp->nwr = (unsigned)nwr;
	rk__xplan(lens, nops, p->nlanes, x->opts.chain, RK_XFER_SPLIT, pp->plan, NULL);
	for (unsigned w = 0; w < pp->nwr; w++) {
		unsigned l = pp->plan[w].lane;

		if (!(pp->lanes_used & (1u << l)))
			pp->next[l] = w;
		pp->lanes_used |= 1u << l;
		pp->end[l] = w + 1;
		pp->has_reads |= !xops[pp->plan[w].op].write;
	}
	r = build_chains(pp, xops, err);
	if (r) {
		prep_destroy(pp);
		goto out;
	}
	distinct(pp, ops, nops);
	/* Held like an imported handle: the entries stay, a newer import is seen. */
	for (unsigned k = 0; k < pp->ndesc; k++) {
		struct rk__xgen *g = rk__xgens_find(&p->gens, pp->desc[k].seg_id);

		if (g)
			g->refs++;
	}
	pp->refs = 1;
	pp->link = x->preps;
	x->preps = pp;
	*out = pp;
out:
	free(xops);
	return r;
}

/* The last reference: out of the rk_xfer's list, the generations let go. */
static void prep_last(struct rk_xfer_prep *pp)
{
	if (pp->x) {
		struct rk_xfer_prep **q;

		for (q = &pp->x->preps; *q && *q != pp; q = &(*q)->link)
			;
		if (*q)
			*q = pp->link;
	}
	for (unsigned k = 0; pp->peer && k < pp->ndesc; k++) {
		struct rk__xgen *g = rk__xgens_find(&pp->peer->gens, pp->desc[k].seg_id);

		if (g && g->refs)
			g->refs--;
	}
	prep_destroy(pp);
}

void rk__xprep_put(struct rk_xfer_prep *pp)
{
	if (--pp->refs == 0)
		prep_last(pp);
}

void rk_xfer_prep_free(struct rk_xfer_prep *pp)
{
	if (!pp || pp->freed)
		return;
	pp->freed = 1;
	rk__xprep_put(pp);
}

void rk__xprep_seg_gone(struct rk_xfer *x, const struct rk_xfer_seg *seg)
{
	for (struct rk_xfer_prep *pp = x->preps; pp; pp = pp->link)
		for (unsigned k = 0; !pp->dead && k < pp->nsegs; k++)
			if (pp->segs[k] == seg)
				pp->dead = "a segment it names was deregistered";
}

void rk__xprep_peer_gone(struct rk_xfer *x, const struct rk_xfer_peer *peer)
{
	for (struct rk_xfer_prep *pp = x->preps; pp; pp = pp->link)
		if (pp->peer == peer) {
			/* Its generations go with the peer's table; its chains before the lanes. */
			pp->peer = NULL;
			if (!pp->dead)
				pp->dead = "its peer was destroyed";
			chains_free(pp);
		}
}

void rk__xprep_detach_all(struct rk_xfer *x)
{
	while (x->preps) {
		struct rk_xfer_prep *pp = x->preps;

		x->preps = pp->link;
		pp->x = NULL;
		pp->link = NULL;
	}
}
