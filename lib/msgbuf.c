/*
 * msgbuf.c - receive sets and send sets (msgbuf.h).
 *
 * Each buffer has a state byte kept outside registered memory, so a wr_id
 * or completion that does not match what the set did (a stale flush, a
 * completion of someone else's WR) is refused rather than believed. The
 * send set keeps its in-flight buffers in posting order: a send queue
 * completes in order, so one signaled completion retires every buffer
 * posted before it, which is what lets most posts go unsignaled.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rk_internal.h"

#define IDX_MASK 0xffffffffULL

enum { B_IDLE = 0, B_POSTED, B_CALLER, B_FLIGHT };

struct rk_recv_set {
	struct rk_conn *conn;
	struct rk_pool *pool;
	uint32_t count, size, posted;
	uint64_t base;
	struct rk_buf *bufs; /* NULL for 0-byte receives */
	uint8_t *state;
	/*
	 * rk__recv_set_release_batch: a receive WR per buffer, built at the
	 * first batch; the released buffers wait linked in @chain, @nlater of
	 * them, and are posted as they are linked (rk__post_recv_kept).
	 * Not the public rk_post_recv_prepared_list: it must check every index
	 * it is given (in range, named once: a mark per receive) and put the
	 * chain's links back after the post, which the set's state byte makes
	 * needless here. Measured in the RPC server (example 09, 16 a post):
	 * 72.6 instructions per receive through it, 56.2 linked here
	 * (bench/README.md, "The RPC server, round three").
	 */
	struct ibv_recv_wr *kwrs, *chain, **chain_tail;
	struct ibv_sge *ksges;
	uint32_t nlater;
};

struct rk_send_set {
	struct rk_conn *conn;
	struct rk_pool *pool;
	uint32_t count, size, signal_every, since_signal;
	uint64_t base;
	struct rk_buf *bufs;
	uint8_t *state;
	uint32_t *free_stack, nfree;
	uint32_t *fifo, fifo_head, fifo_len; /* in flight, oldest first */
	struct ibv_send_wr *wrs; /* per buffer, kept built (rk__send_set_post_write_imm) */
	struct ibv_sge *sges;
};

/* The buffer index @wr_id names in a set at @base with @count buffers, or -1. */
static int64_t wr_index(uint64_t wr_id, uint64_t base, uint32_t count)
{
	if ((wr_id & ~IDX_MASK) != base || (wr_id & IDX_MASK) >= count)
		return -1;
	return (int64_t)(wr_id & IDX_MASK);
}

static int check_base(uint64_t base, struct rk_error *err, const char *op)
{
	if (base & IDX_MASK)
		return rk__err_set(err, EINVAL, op, "wr_id_base 0x%llx has low bits set",
				   (unsigned long long)base);
	return 0;
}

/* Allocate @n buffers of @size from @pool into @bufs; all or none. */
static int take_bufs(struct rk_pool *pool, uint32_t n, size_t size, struct rk_buf *bufs,
		     struct rk_error *err)
{
	for (uint32_t i = 0; i < n; i++) {
		int r = rk_pool_alloc(pool, size, &bufs[i], err);

		if (r) {
			while (i)
				rk_pool_free(pool, &bufs[--i]);
			return r;
		}
	}
	return 0;
}

static int post_one(struct rk_recv_set *rs, uint32_t i, struct rk_error *err)
{
	void *addr = rs->bufs ? rs->bufs[i].addr : NULL;
	uint32_t lkey = rs->bufs ? rs->bufs[i].lkey : 0;
	int r = rk_post_recv(rs->conn, addr, rs->size, lkey, rs->base | i, err);

	if (r)
		return r;
	rs->state[i] = B_POSTED;
	rs->posted++;
	return 0;
}

int rk_recv_set_create(struct rk_conn *conn, struct rk_pool *pool,
		       const struct rk_msgbuf_opts *opts, struct rk_error *err,
		       struct rk_recv_set **out)
{
	struct rk_msgbuf_opts def = {0};
	struct rk_recv_set *rs;
	int r;

	*out = NULL;
	if (!opts)
		opts = &def;
	r = check_base(opts->wr_id_base, err, "rk_recv_set_create");
	if (r)
		return r;
	if (opts->size > UINT32_MAX)
		return rk__err_set(err, E2BIG, "rk_recv_set_create", "buffers of %zu bytes",
				   opts->size);
	if (opts->size && !pool)
		return rk__err_set(err, EINVAL, "rk_recv_set_create", "buffers need a pool");
	rs = calloc(1, sizeof(*rs));
	if (!rs)
		return rk__err_set(err, ENOMEM, "rk_recv_set_create", NULL);
	rs->conn = conn;
	rs->pool = pool;
	rs->size = (uint32_t)opts->size;
	rs->base = opts->wr_id_base ? opts->wr_id_base : RK_RECV_SET_WRID;
	rs->count = opts->count ? opts->count : rk_rq_room(conn);
	if (rs->count == 0 || rs->count > rk_rq_room(conn)) {
		r = rk__err_set(err, ENOBUFS, "rk_recv_set_create",
				"%u receives asked, %u receive slots free", rs->count,
				rk_rq_room(conn));
		free(rs);
		return r;
	}
	rs->state = calloc(rs->count, 1);
	if (rs->size)
		rs->bufs = calloc(rs->count, sizeof(*rs->bufs));
	if (!rs->state || (rs->size && !rs->bufs)) {
		free(rs->state);
		free(rs->bufs);
		free(rs);
		return rk__err_set(err, ENOMEM, "rk_recv_set_create", NULL);
	}
	if (rs->size) {
		r = take_bufs(pool, rs->count, rs->size, rs->bufs, err);
		if (r) {
			free(rs->state);
			free(rs->bufs);
			free(rs);
			return r;
		}
	}
	for (uint32_t i = 0; i < rs->count; i++) {
		r = post_one(rs, i, err);
		if (r) {
			/*
			 * ibv_post_recv fails on a QP in error, which receives
			 * nothing more: the receives already posted will only be
			 * flushed, so their buffers may go back to the pool.
			 */
			rk_recv_set_destroy(rs);
			return r;
		}
	}
	*out = rs;
	return 0;
}

void rk_recv_set_destroy(struct rk_recv_set *rs)
{
	if (!rs)
		return;
	if (rs->bufs)
		for (uint32_t i = 0; i < rs->count; i++)
			rk_pool_free(rs->pool, &rs->bufs[i]);
	free(rs->bufs);
	free(rs->state);
	free(rs->kwrs);
	free(rs);
}

int rk_recv_set_take(struct rk_recv_set *rs, const struct ibv_wc *wc, struct rk_msg *msg,
		     struct rk_error *err)
{
	int64_t i = wr_index(wc->wr_id, rs->base, rs->count);

	if (i < 0 || rs->state[i] != B_POSTED)
		return 0;
	/* Someone else's send whose wr_id falls in our range (opcode: valid on success only). */
	if (wc->status == IBV_WC_SUCCESS && !(wc->opcode & IBV_WC_RECV))
		return 0;
	rs->posted--;
	rs->state[i] = B_IDLE;
	if (wc->status != IBV_WC_SUCCESS) {
		rk_error_from_wc(err, wc);
		return -(err && err->err ? err->err : EIO);
	}
	/* Verbs never lets a SEND overrun a receive; a provider that did is not believed. */
	if (wc->byte_len > rs->size && wc->opcode == IBV_WC_RECV)
		return rk__err_set(err, EMSGSIZE, "rk_recv_set_take",
				   "%u bytes in a %u-byte receive", wc->byte_len, rs->size);
	rs->state[i] = B_CALLER;
	/* Every field stored once (no memset call first: this is every message's path). */
	*msg = (struct rk_msg){.data = rs->bufs ? rs->bufs[i].addr : NULL,
			       .len = wc->byte_len,
			       .index = (uint32_t)i,
			       .imm = wc->wc_flags & IBV_WC_WITH_IMM ? ntohl(wc->imm_data) : 0,
			       .has_imm = (wc->wc_flags & IBV_WC_WITH_IMM) != 0,
			       .opcode = wc->opcode};
	return 1;
}

/* rk__recv_set_take_send() for anything but the common case, said as rk_recv_set_take says it. */
static __attribute__((noinline)) int take_other(struct rk_recv_set *rs, const struct ibv_wc *wc,
						const void **data, uint32_t *index,
						struct rk_error *err)
{
	struct rk_msg m = {0};
	int r = rk_recv_set_take(rs, wc, &m, err);

	if (r > 0) {
		*data = m.opcode == IBV_WC_RECV ? m.data : NULL;
		*index = m.index;
	}
	return r;
}

int rk__recv_set_take_send(struct rk_recv_set *rs, const struct ibv_wc *wc, const void **data,
			   uint32_t *index, struct rk_error *err)
{
	uint64_t i = wc->wr_id & IDX_MASK;

	/* A successful SEND into a buffer of ours that was posted: the common case. */
	if (__builtin_expect((wc->wr_id & ~IDX_MASK) == rs->base && i < rs->count &&
				 rs->state[i] == B_POSTED && wc->status == IBV_WC_SUCCESS &&
				 wc->opcode == IBV_WC_RECV && wc->byte_len <= rs->size && rs->bufs,
			     1)) {
		rs->posted--;
		rs->state[i] = B_CALLER;
		*data = rs->bufs[i].addr;
		*index = (uint32_t)i;
		return 1;
	}
	return take_other(rs, wc, data, index, err);
}

int rk_recv_set_release(struct rk_recv_set *rs, uint32_t index, struct rk_error *err)
{
	if (index >= rs->count || rs->state[index] != B_CALLER)
		return rk__err_set(err, EINVAL, "rk_recv_set_release", "buffer %u not handed out",
				   index);
	rs->state[index] = B_IDLE;
	return post_one(rs, index, err);
}

#define LATER_MAX 32 /* receives chained by one rk__recv_set_release_batch */

/* The receive WRs kept per buffer, built once: 0, or -ENOMEM. */
static __attribute__((noinline)) int build_kept(struct rk_recv_set *rs)
{
	rs->kwrs = calloc(rs->count, sizeof(*rs->kwrs) + sizeof(*rs->ksges));
	if (!rs->kwrs)
		return -ENOMEM;
	rs->ksges = (struct ibv_sge *)(rs->kwrs + rs->count);
	for (uint32_t i = 0; i < rs->count; i++) {
		rs->ksges[i] = (struct ibv_sge){.addr = rs->bufs ? (uintptr_t)rs->bufs[i].addr : 0,
						.length = rs->size,
						.lkey = rs->bufs ? rs->bufs[i].lkey : 0};
		rs->kwrs[i].sg_list = &rs->ksges[i];
		rs->kwrs[i].num_sge = rs->size ? 1 : 0;
	}
	rs->chain = NULL;
	rs->chain_tail = &rs->chain;
	return 0;
}

/* Post the released buffers that wait, in the chain they were linked in. */
static __attribute__((noinline)) int post_later(struct rk_recv_set *rs, struct rk_error *err)
{
	struct ibv_recv_wr *wr = rs->chain;
	const uint32_t n = rs->nlater;
	uint32_t posted;
	int r;

	if (!n)
		return 0;
	rs->nlater = 0;
	rs->chain = NULL;
	rs->chain_tail = &rs->chain;
	r = rk__post_recv_kept(rs->conn, wr, n, err);
	/* Those posted (all, or the first r: err says why not more), counted as post_one does. */
	posted = r < 0 ? 0 : (uint32_t)r;
	for (uint32_t k = 0; k < posted; k++, wr = wr->next)
		rs->state[wr - rs->kwrs] = B_POSTED;
	rs->posted += posted;
	return posted == n ? 0 : r < 0 ? r : -EIO;
}

/*
 * rk__recv_set_release_batch() off its common path: a buffer not handed
 * out, or the first batch, whose WRs are built here (no memory for them:
 * the buffer is posted alone, as ever).
 */
static __attribute__((noinline, cold)) int release_other(struct rk_recv_set *rs, uint32_t index,
							 uint32_t batch, struct rk_error *err)
{
	if (index >= rs->count || rs->state[index] != B_CALLER)
		return rk__err_set(err, EINVAL, "rk_recv_set_release", "buffer %u not handed out",
				   index);
	if (build_kept(rs))
		return rk_recv_set_release(rs, index, err);
	return rk__recv_set_release_batch(rs, index, batch, err);
}

int rk__recv_set_release_batch(struct rk_recv_set *rs, uint32_t index, uint32_t batch,
			       struct rk_error *err)
{
	struct ibv_recv_wr *wr;

	/* The checks and the first batch out of line: this path then saves no register. */
	if (__builtin_expect(index >= rs->count || rs->state[index] != B_CALLER || !rs->kwrs, 0))
		return release_other(rs, index, batch, err);
	rs->state[index] = B_IDLE;
	wr = &rs->kwrs[index];
	wr->wr_id = rs->base | index; /* the sequence number of its last post was there */
	wr->next = NULL;
	*rs->chain_tail = wr;
	rs->chain_tail = &wr->next;
	if (++rs->nlater < (batch < LATER_MAX ? batch : LATER_MAX))
		return 0;
	return post_later(rs, err);
}

uint32_t rk_recv_set_posted(const struct rk_recv_set *rs)
{
	return rs->posted;
}

int rk_send_set_create(struct rk_conn *conn, struct rk_pool *pool,
		       const struct rk_msgbuf_opts *opts, struct rk_error *err,
		       struct rk_send_set **out)
{
	struct rk_msgbuf_opts def = {0};
	struct rk_send_set *ss;
	int r;

	*out = NULL;
	if (!opts)
		opts = &def;
	r = check_base(opts->wr_id_base, err, "rk_send_set_create");
	if (r)
		return r;
	if (!pool)
		return rk__err_set(err, EINVAL, "rk_send_set_create", "a send set needs a pool");
	if (opts->size > UINT32_MAX)
		return rk__err_set(err, E2BIG, "rk_send_set_create", "buffers of %zu bytes",
				   opts->size);
	ss = calloc(1, sizeof(*ss));
	if (!ss)
		return rk__err_set(err, ENOMEM, "rk_send_set_create", NULL);
	ss->conn = conn;
	ss->pool = pool;
	ss->count = opts->count ? opts->count : 16;
	ss->size = opts->size ? (uint32_t)opts->size : 4096;
	ss->base = opts->wr_id_base ? opts->wr_id_base : RK_SEND_SET_WRID;
	ss->signal_every = opts->signal_every ? opts->signal_every : 1;
	ss->bufs = calloc(ss->count, sizeof(*ss->bufs));
	ss->state = calloc(ss->count, 1);
	ss->free_stack = calloc(ss->count, sizeof(uint32_t));
	ss->fifo = calloc(ss->count, sizeof(uint32_t));
	if (!ss->bufs || !ss->state || !ss->free_stack || !ss->fifo) {
		r = rk__err_set(err, ENOMEM, "rk_send_set_create", NULL);
		goto fail;
	}
	r = take_bufs(pool, ss->count, ss->size, ss->bufs, err);
	if (r)
		goto fail;
	for (uint32_t i = 0; i < ss->count; i++)
		ss->free_stack[ss->nfree++] = ss->count - 1 - i;
	*out = ss;
	return 0;
fail:
	free(ss->bufs);
	free(ss->state);
	free(ss->free_stack);
	free(ss->fifo);
	free(ss);
	return r;
}

void rk_send_set_destroy(struct rk_send_set *ss)
{
	if (!ss)
		return;
	for (uint32_t i = 0; i < ss->count; i++)
		rk_pool_free(ss->pool, &ss->bufs[i]);
	free(ss->bufs);
	free(ss->state);
	free(ss->free_stack);
	free(ss->fifo);
	free(ss->wrs);
	free(ss);
}

int rk_send_set_get(struct rk_send_set *ss, struct rk_send_buf *buf)
{
	uint32_t i;

	if (!ss->nfree)
		return -ENOBUFS;
	i = ss->free_stack[--ss->nfree];
	ss->state[i] = B_CALLER;
	buf->data = ss->bufs[i].addr;
	buf->size = ss->size;
	buf->lkey = ss->bufs[i].lkey;
	buf->index = i;
	return 0;
}

int rk_send_set_put(struct rk_send_set *ss, uint32_t index)
{
	if (index >= ss->count || ss->state[index] != B_CALLER)
		return -EINVAL;
	ss->state[index] = B_IDLE;
	ss->free_stack[ss->nfree++] = index;
	return 0;
}

/* The bookkeeping of rk_send_set_post: posted as signaled or not, in flight in order. */
static inline void in_flight(struct rk_send_set *ss, uint32_t index, int signaled)
{
	uint32_t tail = ss->fifo_head + ss->fifo_len++; /* both < count: no division */

	ss->since_signal = signaled ? 0 : ss->since_signal + 1;
	ss->state[index] = B_FLIGHT;
	ss->fifo[tail < ss->count ? tail : tail - ss->count] = index;
}

int rk_send_set_post(struct rk_send_set *ss, uint32_t index, const struct rk_wr *wr,
		     struct rk_error *err)
{
	struct rk_wr w = *wr;
	int r;

	if (index >= ss->count || ss->state[index] != B_CALLER)
		return rk__err_set(err, EINVAL, "rk_send_set_post", "buffer %u not handed out",
				   index);
	if (w.len > ss->size)
		return rk__err_set(err, EINVAL, "rk_send_set_post", "%u bytes in a %u-byte buffer",
				   w.len, ss->size);
	w.wr_id = ss->base | index;
	w.addr = ss->bufs[index].addr;
	w.lkey = ss->bufs[index].lkey;
	/* The last free buffer's WR is signaled: room always comes back. */
	if (ss->signal_every <= 1 || ss->since_signal + 1 >= ss->signal_every || ss->nfree == 0)
		w.flags |= RK_WR_SIGNALED;
	r = rk_post(ss->conn, &w, err);
	if (r)
		return r;
	in_flight(ss, index, (w.flags & RK_WR_SIGNALED) != 0);
	return 0;
}

/* The verbs WRs kept per buffer, built once: a WRITE WITH IMMEDIATE from the buffer. */
static __attribute__((noinline)) int build_wrs(struct rk_send_set *ss, struct rk_error *err)
{
	ss->wrs = calloc(ss->count, sizeof(*ss->wrs) + sizeof(*ss->sges));
	if (!ss->wrs)
		return rk__err_set(err, ENOMEM, "rk_send_set_post", "%u kept WRs", ss->count);
	ss->sges = (struct ibv_sge *)(ss->wrs + ss->count);
	for (uint32_t i = 0; i < ss->count; i++) {
		ss->sges[i] =
		    (struct ibv_sge){.addr = (uintptr_t)ss->bufs[i].addr, .lkey = ss->bufs[i].lkey};
		ss->wrs[i].sg_list = &ss->sges[i];
		ss->wrs[i].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	}
	return 0;
}

int rk__send_set_post_write_imm(struct rk_send_set *ss, uint32_t index, uint32_t len,
				uint64_t remote_addr, uint32_t rkey, uint32_t imm,
				struct rk_error *err)
{
	struct ibv_send_wr *wr;
	unsigned flags = 0;
	int r;

	if (__builtin_expect(index >= ss->count || ss->state[index] != B_CALLER || len > ss->size,
			     0)) { /* said as rk_send_set_post says it */
		struct rk_wr w = {.op = RK_OP_WRITE_IMM, .len = len};

		return rk_send_set_post(ss, index, &w, err);
	}
	if (__builtin_expect(!ss->wrs, 0) && build_wrs(ss, err))
		return -ENOMEM;
	wr = &ss->wrs[index];
	ss->sges[index].length = len;
	wr->num_sge = len ? 1 : 0;
	wr->imm_data = htonl(imm);
	wr->wr.rdma.remote_addr = remote_addr;
	wr->wr.rdma.rkey = rkey;
	if (len && len <= ss->conn->max_inline)
		flags = IBV_SEND_INLINE;
	/* The last free buffer's WR is signaled: room always comes back. */
	if (ss->signal_every <= 1 || ss->since_signal + 1 >= ss->signal_every || ss->nfree == 0)
		flags |= IBV_SEND_SIGNALED;
	r = rk__post_kept(ss->conn, wr, ss->base | index, flags, err);
	if (r)
		return r;
	in_flight(ss, index, (flags & IBV_SEND_SIGNALED) != 0);
	return 0;
}

int rk_send_set_complete(struct rk_send_set *ss, const struct ibv_wc *wc)
{
	int64_t i = wr_index(wc->wr_id, ss->base, ss->count);
	int freed = 0;

	if (i < 0 || ss->state[i] != B_FLIGHT)
		return 0;
	while (ss->fifo_len) {
		uint32_t j = ss->fifo[ss->fifo_head];

		ss->fifo_head = ss->fifo_head + 1 == ss->count ? 0 : ss->fifo_head + 1;
		ss->fifo_len--;
		ss->state[j] = B_IDLE;
		ss->free_stack[ss->nfree++] = j;
		freed++;
		if (j == (uint32_t)i)
			break;
	}
	return freed;
}

uint32_t rk_send_set_free_count(const struct rk_send_set *ss)
{
	return ss->nfree;
}
