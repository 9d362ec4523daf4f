/*
 * xfer_batch.c - batches of one-sided READs and WRITEs (xfer.h): posting
 * the planned chains (xfer_plan.c) as send-queue room allows, what a
 * completion (claimed by xfer_poll.c) does to its batch, per-op status,
 * deadlines, and sending notifications.
 *
 * wr_ids: RK_XFER_WRID_OP | batch slot (16 bits) | the slot's serial (16) |
 * WR index in the plan (16; NOTIF_IDX for the notification). A completion
 * whose slot holds another serial, on one of our lanes, is of a batch
 * already released: claimed and ignored. A batch is done when every chain is posted and every
 * signaled WR (each chain's last, the notification) has completed; a
 * failed completion fixes the batch's result, and the rest of its
 * completions still come (the QP flushes what it held).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rk_internal.h"
#include "xfer_int.h"

#define NOTIF_IDX      0xffffu
#define DEF_TIMEOUT_MS 10000

static int status_errno(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_REM_ACCESS_ERR:
		return -EREMOTEIO;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ECONNRESET;
	case IBV_WC_WR_FLUSH_ERR:
		return -ECANCELED;
	default:
		return -EIO;
	}
}

static void pend_remove(struct rk_xfer_peer *p, struct rk_xfer_batch *b)
{
	struct rk_xfer_batch **pp;

	if (!b->pending)
		return;
	for (pp = &p->pend_head; *pp && *pp != b; pp = &(*pp)->pend_next)
		;
	if (*pp)
		*pp = b->pend_next;
	p->pend_tail = NULL;
	for (struct rk_xfer_batch *q = p->pend_head; q; q = q->pend_next)
		p->pend_tail = q;
	b->pending = 0;
	b->pend_next = NULL;
	p->x->npending--;
}

static void pend_add(struct rk_xfer_peer *p, struct rk_xfer_batch *b)
{
	b->pending = 1;
	b->pend_next = NULL;
	if (p->pend_tail)
		p->pend_tail->pend_next = b;
	else
		p->pend_head = b;
	p->pend_tail = b;
	p->x->npending++;
}

/* Record the batch's first failure (the outcome is fixed when it ends). */
static void fail(struct rk_xfer_batch *b, int e, enum ibv_wc_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void fail(struct rk_xfer_batch *b, int e, enum ibv_wc_status s, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	if (b->result < 0 || b->ended)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rk__err_set(&b->why, -e, "rk_xfer_batch", "%s", msg);
	if (s != IBV_WC_SUCCESS) {
		b->why.wc_status = (int)s;
		b->why.wc_status_str = ibv_wc_status_str(s);
	}
	b->result = e;
	/* Chains (or a notification) not posted yet never will be. */
	b->notif_due = 0;
	pend_remove(b->peer, b);
	for (unsigned l = 0; l < RK_XFER_LANES_MAX; l++)
		for (; b->next[l] < b->end[l]; b->next[l]++)
			if (!b->op_err[b->plan[b->next[l]].op])
				b->op_err[b->plan[b->next[l]].op] = -ECANCELED;
}

/* The outcome is fixed: ops whose chain never reported success are "canceled". */
static void end(struct rk_xfer_batch *b)
{
	if (b->ended)
		return;
	b->ended = 1;
	if (b->result >= 0) {
		b->result = 1;
		return;
	}
	for (unsigned w = b->nwr; w-- > 0;) {
		unsigned chain_ok = 0;

		for (unsigned k = w; k < b->nwr && b->plan[k].lane == b->plan[w].lane; k++)
			if (b->plan[k].signaled) {
				chain_ok = b->done[k];
				break;
			}
		if (!chain_ok && !b->op_err[b->plan[w].op])
			b->op_err[b->plan[w].op] = -ECANCELED;
	}
}

/* Spare batch blocks kept per rk_xfer: enough for every slot of a deep pipeline. */
#define SPARE_MAX 16

/*
 * A batch block with room for @nops ops: a spare one when one is big
 * enough, else a new one. Its header is zeroed up to `why`, its op_err
 * and op_wc for @nops; ops and lens are written by check_ops.
 */
static struct rk_xfer_batch *batch_get(struct rk_xfer *x, unsigned nops)
{
	struct rk_xfer_batch **pp = &x->spare, *b;

	while ((b = *pp) && b->cap_ops < nops)
		pp = &b->pend_next;
	if (b) {
		*pp = b->pend_next;
		x->nspare--;
	} else {
		b = malloc(sizeof(*b) + (size_t)nops * (sizeof(struct rk__xop) + sizeof(uint64_t) +
							sizeof(int) + 1));
		if (!b)
			return NULL;
		b->cap_ops = nops;
		b->wrs = NULL;
		b->done = NULL;
		b->cap_wrs = 0;
	}
	memset(b, 0, offsetof(struct rk_xfer_batch, why));
	b->ops = (struct rk__xop *)(void *)(b + 1);
	b->op_err = (int *)(void *)((uint64_t *)(void *)(b->ops + b->cap_ops) + b->cap_ops);
	b->op_wc = (uint8_t *)(b->op_err + b->cap_ops);
	memset(b->op_err, 0, nops * sizeof(int));
	memset(b->op_wc, 0, nops);
	return b;
}

/* The batch's lens scratch: between ops and op_err. */
static uint64_t *batch_lens(struct rk_xfer_batch *b)
{
	return (uint64_t *)(void *)(b->ops + b->cap_ops);
}

/*
 * Room for @nwr WRs in @b's own plan array and done flags (kept with the
 * block); the flags zeroed. 0 or -ENOMEM.
 */
static int batch_wrs(struct rk_xfer_batch *b, unsigned nwr)
{
	if (!b->wrs || nwr > b->cap_wrs) {
		free(b->wrs);
		b->cap_wrs = 0;
		b->wrs = malloc((size_t)nwr * (sizeof(*b->wrs) + 1));
		if (!b->wrs)
			return -ENOMEM;
		b->cap_wrs = nwr;
		b->done = (uint8_t *)(b->wrs + nwr);
	}
	memset(b->done, 0, nwr);
	return 0;
}

/* Back to the spare list, or freed when it is full. */
static void batch_put(struct rk_xfer *x, struct rk_xfer_batch *b)
{
	if (b->prep) {
		rk__xprep_put(b->prep);
		b->prep = NULL;
	}
	if (x->nspare < SPARE_MAX) {
		b->pend_next = x->spare;
		x->spare = b;
		x->nspare++;
		return;
	}
	free(b->wrs);
	free(b);
}

void rk__xfer_spares_free(struct rk_xfer *x)
{
	while (x->spare) {
		struct rk_xfer_batch *b = x->spare;

		x->spare = b->pend_next;
		free(b->wrs);
		free(b);
	}
	x->nspare = 0;
}

static void release(struct rk_xfer_batch *b)
{
	if (b->x->slots[b->slot] == b)
		b->x->slots[b->slot] = NULL;
	batch_put(b->x, b);
}

/*
 * Disconnect the lanes that carry @b's posted, uncompleted work: their QPs
 * go to error, nothing of it lands later. A lane where its chains all
 * completed, or were never posted, is left alone: other batches use it.
 */
static void cut_lanes(struct rk_xfer_batch *b)
{
	for (unsigned l = 0; l < b->peer->nlanes; l++)
		if (b->lane_out[l])
			rk_conn_disconnect(b->peer->lanes[l], 0, NULL);
}

static int post_notif(struct rk_xfer_batch *b, struct rk_wr *w)
{
	memset(w, 0, sizeof(*w));
	w->op = RK_OP_WRITE_IMM;
	w->flags = RK_WR_SIGNALED;
	w->imm = b->notif;
	w->wr_id = (uint64_t)RK_XFER_WRID_OP << 48 | (uint64_t)b->slot << 32 |
		   (uint64_t)b->serial << 16 | NOTIF_IDX;
	return 0;
}

/*
 * Post @b's deferred notification on lane 0: 1 posted, 0 no send-queue
 * room now (it waits in the peer's FIFO), -1 the lane refused it (fail()
 * called).
 */
static int notif_try(struct rk_xfer_batch *b)
{
	struct rk_conn *c = b->peer->lanes[0];
	struct rk_wr w;
	struct rk_error e;

	if (rk_conn_state(c) == RK_CONN_CONNECTED && rk_sq_room(c) == 0)
		return 0;
	post_notif(b, &w);
	if (rk_post(c, &w, &e) != 0) {
		fail(b, -ECONNRESET, IBV_WC_SUCCESS, "notification not posted: %s", e.msg);
		return -1;
	}
	b->notif_posted = 1;
	b->notif_due = 0;
	b->out++;
	b->lane_out[0]++;
	b->x->st.doorbells++;
	b->x->st.wrs++;
	b->x->st.notifs_sent++;
	return 1;
}

static void settle(struct rk_xfer_batch *b);

/* The notification's WR, built in place in @wr (its SGE unused: no payload). */
static void notif_wr(const struct rk_xfer_batch *b, struct ibv_send_wr *wr)
{
	wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr->num_sge = 0;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->imm_data = htonl(b->notif);
	wr->wr.rdma.remote_addr = 0;
	wr->wr.rdma.rkey = 0;
	wr->wr_id = (uint64_t)RK_XFER_WRID_OP << 48 | (uint64_t)b->slot << 32 |
		    (uint64_t)b->serial << 16 | NOTIF_IDX;
}

/*
 * The books after one post of lane @l's chain [@first, @first + @n) and
 * @extra notifications (0 or 1): @r is what the post returned. 0, or -1
 * with @b failed when not all went: some may be on the queue unsignaled,
 * so the lane is ended to flush them.
 */
static inline int lane_posted(struct rk_xfer_batch *b, unsigned l, unsigned first, unsigned n,
			      unsigned extra, int r, const struct rk_error *e)
{
	struct rk_xfer *x = b->x;

	if (__builtin_expect(r != (int)(n + extra), 0)) {
		rk_conn_disconnect(b->peer->lanes[l], 0, NULL);
		fail(b, r < 0 ? r : -EIO, IBV_WC_SUCCESS, "lane %u: %s", l, e->msg);
		return -1;
	}
	x->st.wrs += n + extra;
	b->out += 1 + extra; /* the chain's last WR, and the notification */
	b->lane_out[l] += 1 + extra;
	b->next[l] = first + n;
	if (extra) {
		b->notif_posted = 1;
		x->st.notifs_sent++;
	}
	return 0;
}

/*
 * post_lane() for a batch posted from a prepared one: each chain's verbs
 * WRs are built already (rk_prepare); a post writes their wr_ids
 * (rk_post_prepared). An immediate notification follows its lane's last
 * chain as a post of its own on the same QP, so it is still executed
 * after every WRITE of the batch.
 */
static int post_lane_prep(struct rk_xfer_batch *b, unsigned l)
{
	const struct rk_xfer_prep *pp = b->prep;
	struct rk_xfer *x = b->x;
	struct rk_conn *c = b->peer->lanes[l];
	int immediate = b->notify && b->lanes_used == 1 && !b->has_reads && l == 0;

	while (b->next[l] < b->end[l]) {
		const unsigned first = b->next[l];
		struct rk_prepared *ch = pp->chain[first];
		unsigned n = 1, extra;
		struct rk_error e;
		int r;

		while (!b->plan[first + n - 1].signaled)
			n++;
		extra = immediate && first + n == b->end[l];
		if (rk_sq_room(c) < n + extra)
			return 0;
		r = rk_post_prepared(ch, b->id_hi | first, 0, &e);
		x->st.doorbells++;
		if (r == (int)n && extra) {
			struct rk_wr w;

			post_notif(b, &w);
			r = rk_post(c, &w, &e) == 0 ? (int)n + 1 : (int)n;
			x->st.doorbells++;
		}
		if (lane_posted(b, l, first, n, extra, r, &e))
			return -1;
	}
	return 1;
}

/*
 * Post what can go of @b on lane @l. 1: all of it, 0: blocked by room, <0:
 * failed. The verbs WRs are written straight into the connection's scratch
 * (rk__post_built): no struct rk_wr to build and translate back.
 */
static int post_lane(struct rk_xfer_batch *b, unsigned l)
{
	struct rk_xfer_peer *p = b->peer;
	struct rk_xfer *x = b->x;
	struct rk_conn *c = p->lanes[l];
	const uint32_t max_inline = rk_conn_max_inline(c);
	const uint64_t id_hi = b->id_hi;
	int immediate = b->notify && b->lanes_used == 1 && !b->has_reads && l == 0;

	if (b->prep)
		return post_lane_prep(b, l);
	while (b->next[l] < b->end[l]) {
		unsigned first = b->next[l], n = 0, extra;
		struct ibv_sge *sges;
		struct ibv_send_wr *wrs = rk__post_scratch(c, &sges);
		struct rk_error e;
		int r;

		while (first + n < b->end[l] && !b->plan[first + n++].signaled)
			;
		extra = immediate && first + n == b->end[l];
		if (rk_sq_room(c) < n + extra)
			return 0;
		for (unsigned i = 0; i < n; i++) {
			const struct rk__xwr *pw = &b->plan[first + i];
			const struct rk__xop *op = &b->ops[pw->op];
			struct ibv_send_wr *wr = &wrs[i];
			struct ibv_sge *sge = &sges[i];

			sge->addr = op->laddr + pw->off;
			sge->length = pw->len;
			sge->lkey = op->lkey;
			wr->sg_list = sge;
			wr->num_sge = pw->len ? 1 : 0;
			wr->opcode = op->write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
			wr->send_flags =
			    (pw->signaled ? IBV_SEND_SIGNALED : 0) |
			    (op->write && pw->len && pw->len <= max_inline ? IBV_SEND_INLINE : 0);
			wr->imm_data = 0;
			wr->wr.rdma.remote_addr = op->raddr + pw->off;
			wr->wr.rdma.rkey = op->rkey;
			wr->wr_id = id_hi | (first + i);
		}
		if (extra)
			notif_wr(b, &wrs[n]);
		r = rk__post_built(c, n + extra, &e);
		x->st.doorbells++;
		if (lane_posted(b, l, first, n, extra, r, &e))
			return -1;
	}
	return 1;
}

/*
 * Post waiting chains and deferred notifications in order: a batch never
 * passes an earlier one on a lane.
 */
static void pump(struct rk_xfer_peer *p)
{
	unsigned blocked = 0;
	struct rk_xfer_batch *b = p->pend_head, *nb;

	for (; b; b = nb) {
		int all = 1, r = 1;

		nb = b->pend_next;
		for (unsigned l = 0; l < p->nlanes && r >= 0; l++) {
			if (b->next[l] == b->end[l])
				continue;
			if (blocked & (1u << l)) {
				all = 0;
				continue;
			}
			r = post_lane(b, l);
			if (r == 0) {
				blocked |= 1u << l;
				all = 0;
			}
		}
		if (r >= 0 && b->notif_due) {
			r = blocked & 1u ? 0 : notif_try(b);
			if (r == 0) {
				blocked |= 1u;
				all = 0;
			}
		}
		if (r < 0) {
			settle(b); /* fail() took it out of the queue; it may end now */
			continue;
		}
		if (all && b->pending)
			pend_remove(p, b);
	}
}

/* Pump every peer with something waiting (any completion may have made room). */
void rk__xfer_pump_all(struct rk_xfer *x)
{
	for (unsigned i = 0; i < x->npeers && x->npending; i++)
		if (x->peers[i] && x->peers[i]->pend_head)
			pump(x->peers[i]);
}

/* After a completion of @b: post the notification, end it, or release it. */
static void settle(struct rk_xfer_batch *b)
{
	if (!b->ended && !b->pending && !b->out) {
		if (b->result == 0 && b->notify && !b->notif_posted) {
			int r = notif_try(b);

			if (r > 0)
				return;
			if (r == 0) {
				/* Lane 0's queue is full (foreign sends too): wait for room. */
				b->notif_due = 1;
				pend_add(b->peer, b);
				return;
			}
		}
		end(b);
	}
	if (b->freed && !b->out && !b->pending)
		release(b);
}

void rk__xfer_op_completion(struct rk_xfer_batch *b, unsigned w, const struct ibv_wc *wc)
{
	struct rk_xfer_peer *p = b->peer;
	int signaled = w == NOTIF_IDX || (w < b->nwr && b->plan[w].signaled);

	if (w != NOTIF_IDX && w >= b->nwr)
		return;
	if (wc->status != IBV_WC_SUCCESS) {
		int e = status_errno(wc->status);

		if (w < b->nwr && !b->op_err[b->plan[w].op]) {
			b->op_err[b->plan[w].op] = e;
			b->op_wc[b->plan[w].op] = (uint8_t)wc->status;
		}
		if (w == NOTIF_IDX && wc->status == IBV_WC_RNR_RETRY_EXC_ERR)
			fail(b, -ECONNRESET, wc->status,
			     "notification refused: the owner had no receive posted for it (it "
			     "took no notification for the lane's RNR budget); the data landed, "
			     "lane 0 is in error");
		else if (wc->status == IBV_WC_REM_ACCESS_ERR)
			fail(b, e, wc->status,
			     "remote access error: the owner refused op %u (revoked, out of "
			     "bounds or a forged key)",
			     w < b->nwr ? b->plan[w].op : 0);
		else if (e == -ECONNRESET || e == -ECANCELED)
			fail(b, -ECONNRESET, wc->status, "peer gone: %s",
			     ibv_wc_status_str(wc->status));
		else
			fail(b, e, wc->status, "%s", ibv_wc_status_str(wc->status));
	} else if (w < b->nwr && signaled) {
		b->done[w] = 1;
	}
	if (signaled && b->out) {
		unsigned l = w == NOTIF_IDX ? 0 : b->plan[w].lane;

		b->out--;
		if (b->lane_out[l])
			b->lane_out[l]--;
	}
	settle(b);
	if (p->pend_head)
		pump(p);
}

/* Check @ops and resolve them into @out (xfer_int.h). */
int rk__xfer_check_ops(struct rk_xfer_peer *p, const struct rk_xfer_op *ops, unsigned nops,
		       struct rk__xop *out, uint64_t *lens, struct rk_error *err)
{
	const struct rk_xfer_remote *last_rm = NULL;
	const struct rk__xgen *last_g = NULL;

	for (unsigned i = 0; i < nops; i++) {
		const struct rk_xfer_op *o = &ops[i];
		const struct rk_xfer_remote *rm = o->remote;
		const struct rk__xgen *g;
		unsigned lane = i % p->nlanes;
		unsigned need = o->op == RK_XFER_OP_WRITE ? RK_XFER_WRITE : RK_XFER_READ;

		if ((o->op != RK_XFER_OP_READ && o->op != RK_XFER_OP_WRITE) || !o->local || !rm ||
		    !o->len)
			return rk__err_set(err, EINVAL, "rk_xfer_post",
					   "op %u: opcode %d, local %p, remote %p, len %llu", i,
					   (int)o->op, (void *)o->local, (const void *)rm,
					   (unsigned long long)o->len);
		if (o->local->x != p->x)
			return rk__err_set(err, EINVAL, "rk_xfer_post",
					   "op %u: local segment of another rk_xfer", i);
		if (rm->peer != p)
			return rk__err_set(err, EINVAL, "rk_xfer_post",
					   "op %u: descriptor imported from another peer", i);
		if (o->local_off > o->local->len || o->len > o->local->len - o->local_off)
			return rk__err_set(err, ERANGE, "rk_xfer_post",
					   "op %u: local %llu + %llu beyond the %zu-byte segment",
					   i, (unsigned long long)o->local_off,
					   (unsigned long long)o->len, o->local->len);
		if (o->remote_off > rm->d.len || o->len > rm->d.len - o->remote_off)
			return rk__err_set(
			    err, ERANGE, "rk_xfer_post",
			    "op %u: remote %llu + %llu out of bounds of the %llu-byte "
			    "segment",
			    i, (unsigned long long)o->remote_off, (unsigned long long)o->len,
			    (unsigned long long)rm->d.len);
		if (!(rm->d.access & need))
			return rk__err_set(err, EACCES, "rk_xfer_post",
					   "op %u: %s, the descriptor grants 0x%x", i,
					   need == RK_XFER_WRITE ? "WRITE" : "READ", rm->d.access);
		if (rm != last_rm) { /* the ops of a batch mostly name one descriptor */
			last_g = rk__xgens_find(&p->gens, rm->d.seg_id);
			last_rm = rm;
		}
		g = last_g;
		if (g && g->gen != rm->d.gen)
			return rk__err_set(err, ESTALE, "rk_xfer_post",
					   "op %u: descriptor of generation %u, %u is current", i,
					   rm->d.gen, g->gen);
		out[i].laddr = (uintptr_t)o->local->addr + o->local_off;
		out[i].lkey = o->local->region->lkey;
		out[i].raddr = rm->d.addr + o->remote_off;
		out[i].rkey = rm->d.rkey[lane];
		out[i].write = o->op == RK_XFER_OP_WRITE;
		lens[i] = o->len;
	}
	return 0;
}

/*
 * What both posts check of the peer before taking a block: lanes, the
 * batch count, a free slot. Returns the slot or a negative errno (@err).
 */
static int post_begin(struct rk_xfer_peer *p, unsigned nops, const char *fn, struct rk_error *err)
{
	struct rk_xfer *x = p->x;
	unsigned slot;

	if (!p->nlanes)
		return rk__err_set(err, EINVAL, fn, "a peer without lanes");
	if (!nops || nops > x->opts.max_ops)
		return rk__err_set(err, nops ? E2BIG : EINVAL, fn, "%u ops (1..%u)", nops,
				   x->opts.max_ops);
	for (unsigned l = 0; l < p->nlanes; l++)
		if (rk_conn_state(p->lanes[l]) != RK_CONN_CONNECTED)
			return rk__err_set(err, ENOTCONN, fn, "lane %u is %s", l,
					   rk_conn_state_str(rk_conn_state(p->lanes[l])));
	for (slot = 0; slot < x->opts.max_batches && x->slots[slot]; slot++)
		;
	if (slot == x->opts.max_batches)
		return rk__err_set(err, EBUSY, fn, "%u batches in flight", x->opts.max_batches);
	return (int)slot;
}

/* The planned batch @b takes @slot and goes: what fits is posted now. */
static void post_launch(struct rk_xfer_peer *p, struct rk_xfer_batch *b, unsigned slot,
			const struct rk_xfer_batch_opts *opts)
{
	struct rk_xfer *x = p->x;
	int timeout_ms = opts && opts->timeout_ms ? opts->timeout_ms : DEF_TIMEOUT_MS;

	b->x = x;
	b->peer = p;
	b->slot = (uint16_t)slot;
	b->serial = (uint16_t)++x->batch_serial;
	b->id_hi =
	    (uint64_t)RK_XFER_WRID_OP << 48 | (uint64_t)b->slot << 32 | (uint64_t)b->serial << 16;
	b->deadline = timeout_ms < 0 ? -1 : rk__deadline(timeout_ms);
	if (opts) {
		b->notify = opts->notify;
		b->notif = opts->notif;
	}
	x->slots[slot] = b;
	x->st.batches++;
	x->st.ops += b->nops;
	pend_add(p, b);
	pump(p);
	settle(b);
}

int rk_xfer_post(struct rk_xfer_peer *p, const struct rk_xfer_op *ops, unsigned nops,
		 const struct rk_xfer_batch_opts *opts, struct rk_error *err,
		 struct rk_xfer_batch **out)
{
	struct rk_xfer *x = p->x;
	struct rk_xfer_batch *b;
	uint64_t *lens;
	long nwr;
	int r, slot;

	slot = post_begin(p, nops, "rk_xfer_post", err);
	if (slot < 0)
		return slot;
	b = batch_get(x, nops);
	if (!b)
		return rk__err_set(err, ENOMEM, "rk_xfer_post", NULL);
	lens = batch_lens(b);
	r = rk__xfer_check_ops(p, ops, nops, b->ops, lens, err);
	if (r)
		goto fail;
	nwr = rk__xplan_count(lens, nops, RK_XFER_SPLIT, RK_XPLAN_MAX_WRS);
	if (nwr < 0) {
		r = rk__err_set(err, (int)-nwr, "rk_xfer_post", "%u ops make more than %u WRs",
				nops, RK_XPLAN_MAX_WRS);
		goto fail;
	}
	if (batch_wrs(b, (unsigned)nwr)) {
		r = rk__err_set(err, ENOMEM, "rk_xfer_post", NULL);
		goto fail;
	}
	rk__xplan(lens, nops, p->nlanes, x->opts.chain, RK_XFER_SPLIT, b->wrs, NULL);
	b->plan = b->wrs;
	b->nwr = (unsigned)nwr;
	for (unsigned w = 0; w < b->nwr; w++) {
		unsigned l = b->wrs[w].lane;

		if (!(b->lanes_used & (1u << l)))
			b->next[l] = w;
		b->lanes_used |= 1u << l;
		b->end[l] = w + 1;
		b->has_reads |= !b->ops[b->wrs[w].op].write;
	}
	b->nops = nops;
	post_launch(p, b, (unsigned)slot, opts);
	*out = b;
	return 0;
fail:
	batch_put(x, b);
	return r;
}

int rk_xfer_post_prepared(struct rk_xfer_prep *pp, const struct rk_xfer_batch_opts *opts,
			  struct rk_error *err, struct rk_xfer_batch **out)
{
	struct rk_xfer_peer *p = pp->peer;
	struct rk_xfer_batch *b;
	int slot;

	if (pp->dead || !p)
		return rk__err_set(err, ESTALE, "rk_xfer_post_prepared", "%s",
				   pp->dead ? pp->dead : "its peer was destroyed");
	slot = post_begin(p, pp->nops, "rk_xfer_post_prepared", err);
	if (slot < 0)
		return slot;
	/* A newer import of a segment makes the handles of older generations stale. */
	for (unsigned i = 0; i < pp->ndesc; i++) {
		const struct rk__xgen *g = rk__xgens_find(&p->gens, pp->desc[i].seg_id);

		if (g && g->gen != pp->desc[i].gen)
			return rk__err_set(err, ESTALE, "rk_xfer_post_prepared",
					   "descriptor of segment %u, generation %u: %u is current",
					   pp->desc[i].seg_id, pp->desc[i].gen, g->gen);
	}
	b = batch_get(p->x, pp->nops);
	if (!b || batch_wrs(b, pp->nwr)) {
		if (b)
			batch_put(p->x, b);
		return rk__err_set(err, ENOMEM, "rk_xfer_post_prepared", NULL);
	}
	b->prep = pp;
	pp->refs++;
	b->plan = pp->plan;
	b->nwr = pp->nwr;
	b->nops = pp->nops;
	b->lanes_used = pp->lanes_used;
	b->has_reads = pp->has_reads;
	memcpy(b->next, pp->next, sizeof(b->next));
	memcpy(b->end, pp->end, sizeof(b->end));
	post_launch(p, b, (unsigned)slot, opts);
	*out = b;
	return 0;
}

int rk_xfer_batch_check(struct rk_xfer_batch *b, struct rk_error *err)
{
	if (!b->ended) {
		struct rk_xfer_peer *p = b->peer;

		/* Room freed by completions nobody handed over (foreign ones). */
		if (p->pend_head)
			pump(p);
		for (unsigned l = 0; l < p->nlanes && !b->ended && b->out; l++) {
			enum rk_conn_state s = rk_conn_state(p->lanes[l]);
			struct rk_error fe;

			if (!(b->lanes_used & (1u << l)) || s == RK_CONN_CONNECTED)
				continue;
			rk_conn_first_error(p->lanes[l], &fe);
			fail(b, -ECONNRESET,
			     fe.wc_status > 0 ? (enum ibv_wc_status)fe.wc_status : IBV_WC_SUCCESS,
			     "peer gone: lane %u %s: %s", l, rk_conn_state_str(s), fe.msg);
			/*
			 * The batch's other lanes may still be moving its data:
			 * they go to error too, so nothing lands once it ended.
			 */
			cut_lanes(b);
			end(b);
			break;
		}
		if (!b->ended && b->deadline >= 0 && rk__ms_left(b->deadline) == 0) {
			fail(b, -ETIMEDOUT, IBV_WC_SUCCESS,
			     "deadline passed with %u completions outstanding (peer gone?); its "
			     "lanes were disconnected",
			     b->out);
			cut_lanes(b);
			end(b);
		}
	}
	if (!b->ended)
		return 0;
	if (b->result < 0) {
		if (err)
			*err = b->why;
		return b->result;
	}
	return 1;
}

int rk_xfer_batch_op_status(const struct rk_xfer_batch *b, unsigned i,
			    enum ibv_wc_status *wc_status)
{
	if (i >= b->nops)
		return -EINVAL;
	if (wc_status)
		*wc_status = (enum ibv_wc_status)b->op_wc[i];
	return b->op_err[i];
}

void rk_xfer_batch_free(struct rk_xfer_batch *b)
{
	if (!b)
		return;
	if (!b->ended) {
		fail(b, -ECANCELED, IBV_WC_SUCCESS, "canceled");
		if (b->out)
			cut_lanes(b);
		end(b);
	}
	b->freed = 1;
	settle(b);
}

void rk__xfer_drop_peer(struct rk_xfer *x, struct rk_xfer_peer *p)
{
	for (unsigned s = 0; s < x->opts.max_batches; s++) {
		struct rk_xfer_batch *b = x->slots[s];

		if (!b || b->peer != p)
			continue;
		if (b->out)
			cut_lanes(b); /* nothing of it lands after the peer is gone */
		fail(b, -ECANCELED, IBV_WC_SUCCESS, "peer destroyed");
		end(b);
		if (b->freed) {
			release(b);
		} else {
			/* The caller still holds the handle: keep it, detached from its slot. */
			b->out = 0;
			b->pending = 0;
			x->slots[s] = NULL;
			b->serial ^= 0x8000; /* nothing of it is claimed any more */
		}
	}
	while (p->pend_head)
		pend_remove(p, p->pend_head);
}
