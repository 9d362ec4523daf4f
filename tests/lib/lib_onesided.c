/*
 * lib_onesided.c - one-sided transfers (xfer.h) on a device.
 *
 *   lib_onesided sizes MODE    READ and WRITE batches of 1 B, 4 KiB, 1 MiB and
 *                              64 MiB ops, every byte checked; 64 x 16 KiB
 *                              costs 4 doorbells
 *   lib_onesided notif MODE    thousands of WRITE batches whose data changes
 *                              every batch, each with one notification: the
 *                              owner checks the data when notified (1 and 2 lanes)
 *   lib_onesided revoke MODE   revoke, then use: remote access error at the
 *                              peer, memory intact; stale generations refused
 *   lib_onesided forged MODE   a forged key, an enlarged length, an offset out
 *                              of bounds, another connection's descriptor:
 *                              refused, nothing written
 *   lib_onesided count         1,000 segments in one 64 MiB buffer: one ibv_reg_mr
 *   lib_onesided kill          the owner is killed mid-batch: the batch fails
 *                              with "peer gone" within its deadline
 *   lib_onesided owner ADDR PORT   (host B) / lib_onesided user ADDR PORT (host A):
 *                              across two hosts, WRITE batches with a
 *                              notification and READ batches over 2 lanes,
 *                              every byte checked (crosshost.sh adds loss)
 * MODE: mw (memory windows; skipped where the device has none) or mr.
 * Both ends run in this process over a connected pair, except for kill.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "lt.h"

/*
 * librdmakit-private (lib/conn.c), linked from the static library: what the
 * rdma_cm DISCONNECTED event does to a connection, for the revoke test.
 */
void rk__conn_fail(struct rk_conn *conn, enum rk_conn_state state, const struct rk_error *e);

#define MiB (1u << 20)

struct side {
	struct rk_conn *lanes[2];
	struct rk_xfer *x;
	struct rk_xfer_peer *peer;
};

struct world {
	struct rk_device *dev;
	enum rk_xfer_mode mode;
	struct side own, usr; /* the owner of the memory, and its user */
	unsigned nlanes;
};

static const struct rk_conn_opts conn_opts = {.sq_depth = 256, .signal_every = 64};

static void world_up(struct world *w, enum rk_xfer_mode mode, unsigned nlanes)
{
	struct rk_xfer_opts xo = {.mode = mode};
	struct rk_error e;

	w->mode = mode;
	w->nlanes = nlanes;
	for (unsigned i = 0; i < nlanes; i++)
		lt_pair(w->dev, &conn_opts, &conn_opts, &w->own.lanes[i], &w->usr.lanes[i]);
	LT_CHECK(rk_xfer_create(w->dev, NULL, &xo, &e, &w->own.x), &e);
	LT_CHECK(rk_xfer_create(w->dev, NULL, &xo, &e, &w->usr.x), &e);
	LT_CHECK(rk_xfer_peer_create(w->own.x, w->own.lanes, nlanes, &e, &w->own.peer), &e);
	LT_CHECK(rk_xfer_peer_create(w->usr.x, w->usr.lanes, nlanes, &e, &w->usr.peer), &e);
}

/* Everything but the segments, which the test releases before. */
static void world_down(struct world *w)
{
	rk_xfer_peer_destroy(w->usr.peer);
	rk_xfer_peer_destroy(w->own.peer);
	for (unsigned i = 0; i < w->nlanes; i++) {
		rk_conn_destroy(w->usr.lanes[i]);
		rk_conn_destroy(w->own.lanes[i]);
	}
	rk_xfer_destroy(w->usr.x);
	rk_xfer_destroy(w->own.x);
}

static struct rk_xfer_remote *export_import(struct world *w, struct rk_xfer_seg *seg,
					    unsigned access)
{
	uint8_t desc[RK_XFER_DESC_MAX];
	struct rk_xfer_remote *r;
	struct rk_error e;
	size_t len;

	LT_CHECK(rk_xfer_export(seg, w->own.peer, access, desc, sizeof(desc), &len, 5000, &e), &e);
	LT_CHECK(rk_xfer_import(w->usr.peer, desc, len, &e, &r), &e);
	return r;
}

/* Post one batch and wait for it; returns its result. */
static int run(struct world *w, const struct rk_xfer_op *ops, unsigned n,
	       const struct rk_xfer_batch_opts *bo, struct rk_error *e)
{
	struct rk_xfer_batch *b;
	int r;

	LT_CHECK(rk_xfer_post(w->usr.peer, ops, n, bo, e, &b), e);
	r = rk_xfer_batch_wait(b, -1, e);
	rk_xfer_batch_free(b);
	return r;
}

static void sizes(struct world *w)
{
	static const uint64_t lens[] = {1, 4096, MiB, 64ull * MiB};
	size_t cap = 64 * MiB + 8192;
	uint8_t *rbuf = rk_alloc_aligned(cap), *lbuf = rk_alloc_aligned(cap);
	struct rk_xfer_seg *rseg, *lseg;
	struct rk_xfer_remote *rem;
	struct rk_xfer_stats s0, s1;
	struct rk_xfer_op op[64];
	struct rk_error e;

	if (!rbuf || !lbuf)
		LT_FAIL("out of memory");
	LT_CHECK(rk_xfer_seg_reg(w->own.x, rbuf, cap, RK_XFER_READ | RK_XFER_WRITE, &e, &rseg), &e);
	LT_CHECK(rk_xfer_seg_reg(w->usr.x, lbuf, cap, 0, &e, &lseg), &e);
	rem = export_import(w, rseg, RK_XFER_READ | RK_XFER_WRITE);
	for (unsigned k = 0; k < 4; k++) {
		uint64_t len = lens[k], off = k ? 4096 : 7; /* unaligned for the 1-byte op */
		uint32_t seed = 100 + k;

		/* WRITE: local -> remote, the bytes around untouched. */
		memset(rbuf, 0xee, len + off + 64);
		lt_fill(lbuf + 3, len, seed);
		op[0] = (struct rk_xfer_op){RK_XFER_OP_WRITE, lseg, 3, rem, off, len};
		LT_CHECK(run(w, op, 1, NULL, &e), &e);
		if (lt_check(rbuf + off, len, seed) >= 0)
			LT_FAIL("WRITE %llu B: byte %ld differs", (unsigned long long)len,
				lt_check(rbuf + off, len, seed));
		if (rbuf[off - 1] != 0xee || rbuf[off + len] != 0xee)
			LT_FAIL("WRITE %llu B: wrote outside its range", (unsigned long long)len);
		/* READ: remote -> local. */
		lt_fill(rbuf + off, len, seed + 50);
		memset(lbuf, 0, len + 64);
		op[0] = (struct rk_xfer_op){RK_XFER_OP_READ, lseg, 5, rem, off, len};
		LT_CHECK(run(w, op, 1, NULL, &e), &e);
		if (lt_check(lbuf + 5, len, seed + 50) >= 0)
			LT_FAIL("READ %llu B: byte %ld differs", (unsigned long long)len,
				lt_check(lbuf + 5, len, seed + 50));
		printf("sizes: %llu B READ and WRITE ok\n", (unsigned long long)len);
	}
	/* 64 x 16 KiB in one batch: 4 doorbells, every byte checked. */
	lt_fill(rbuf, 64 * 16384, 7);
	for (unsigned i = 0; i < 64; i++)
		op[i] = (struct rk_xfer_op){RK_XFER_OP_READ,
					    lseg,
					    (uint64_t)i * 16384,
					    rem,
					    (uint64_t)(63 - i) * 16384,
					    16384};
	rk_xfer_stats(w->usr.x, &s0);
	LT_CHECK(run(w, op, 64, NULL, &e), &e);
	rk_xfer_stats(w->usr.x, &s1);
	for (unsigned i = 0; i < 64; i++)
		if (memcmp(lbuf + i * 16384, rbuf + (63 - i) * 16384, 16384))
			LT_FAIL("64-op READ batch: op %u differs", i);
	printf("sizes: 64 x 16 KiB READ: %llu doorbells, %llu WRs\n",
	       (unsigned long long)(s1.doorbells - s0.doorbells),
	       (unsigned long long)(s1.wrs - s0.wrs));
	if (s1.doorbells - s0.doorbells != 4 * w->nlanes)
		LT_FAIL("64 ops took %llu doorbells",
			(unsigned long long)(s1.doorbells - s0.doorbells));
	rk_xfer_remote_free(rem);
	rk_xfer_seg_dereg(lseg);
	rk_xfer_seg_dereg(rseg);
	rk_free_aligned(rbuf);
	rk_free_aligned(lbuf);
}

static void notif(struct world *w, unsigned batches)
{
	const unsigned ops = 8, blk = 4096;
	uint8_t *rbuf = rk_alloc_aligned(ops * blk), *lbuf = rk_alloc_aligned(ops * blk);
	struct rk_xfer_seg *rseg, *lseg;
	struct rk_xfer_remote *rem;
	struct rk_xfer_stats so0, so1, su0, su1;
	struct rk_xfer_op op[8];
	struct rk_error e;

	LT_CHECK(rk_xfer_seg_reg(w->own.x, rbuf, ops * blk, RK_XFER_WRITE, &e, &rseg), &e);
	LT_CHECK(rk_xfer_seg_reg(w->usr.x, lbuf, ops * blk, 0, &e, &lseg), &e);
	rem = export_import(w, rseg, RK_XFER_WRITE);
	rk_xfer_stats(w->own.x, &so0);
	rk_xfer_stats(w->usr.x, &su0);
	for (unsigned i = 0; i < ops; i++)
		op[i] = (struct rk_xfer_op){RK_XFER_OP_WRITE,  lseg, (uint64_t)i * blk, rem,
					    (uint64_t)i * blk, blk};
	for (unsigned n = 1; n <= batches; n++) {
		struct rk_xfer_batch_opts bo = {.notify = 1, .notif = n};
		struct rk_xfer_batch *b;
		uint32_t v;
		long bad;

		lt_fill(lbuf, ops * blk, n);
		LT_CHECK(rk_xfer_post(w->usr.peer, op, ops, &bo, &e, &b), &e);
		/* The owner, notified, must find the whole batch there. */
		for (;;) {
			int r = rk_xfer_notif_wait(w->own.peer, 0, &v, &e);

			if (r == 1)
				break;
			if (r != -ETIMEDOUT)
				LT_CHECK(r, &e);
			/* The user's side moves on too (its CQ: chains, a deferred notification).
			 */
			r = rk_xfer_batch_wait(b, 0, &e);
			if (r < 0 && r != -ETIMEDOUT)
				LT_FAIL("batch %u: %s", n, e.msg);
		}
		if (v != n)
			LT_FAIL("notification %u for batch %u", v, n);
		bad = lt_check(rbuf, ops * blk, n);
		if (bad >= 0)
			LT_FAIL("batch %u notified before byte %ld landed", n, bad);
		LT_CHECK(rk_xfer_batch_wait(b, -1, &e), &e);
		rk_xfer_batch_free(b);
	}
	rk_xfer_stats(w->own.x, &so1);
	rk_xfer_stats(w->usr.x, &su1);
	printf("notif: %u lanes, %u batches: %llu notifications sent, %llu received, %llu "
	       "doorbells\n",
	       w->nlanes, batches, (unsigned long long)(su1.notifs_sent - su0.notifs_sent),
	       (unsigned long long)(so1.notifs_received - so0.notifs_received),
	       (unsigned long long)(su1.doorbells - su0.doorbells));
	if (su1.notifs_sent - su0.notifs_sent != batches ||
	    so1.notifs_received - so0.notifs_received != batches)
		LT_FAIL("not exactly one notification per batch");
	{
		uint32_t v;

		if (rk_xfer_notif_take(w->own.peer, &v))
			LT_FAIL("a notification too many: %u", v);
	}
	rk_xfer_remote_free(rem);
	rk_xfer_seg_dereg(lseg);
	rk_xfer_seg_dereg(rseg);
	rk_free_aligned(rbuf);
	rk_free_aligned(lbuf);
}

/* The owner's memory is all @v. */
static void intact(const uint8_t *p, size_t len, uint8_t v, const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			LT_FAIL("%s: byte %zu changed to 0x%02x", what, i, p[i]);
}

static void expect_refused(struct world *w, const struct rk_xfer_op *op, int want, const char *what)
{
	struct rk_error e;
	int r = run(w, op, 1, NULL, &e);

	if (r != want)
		LT_FAIL("%s: %d (%s), expected %d", what, r, e.msg, want);
	printf("%s: refused: %s\n", what, e.msg);
}

static void revoked(struct world *w)
{
	uint8_t *rbuf = rk_alloc_aligned(65536), *lbuf = rk_alloc_aligned(65536);
	uint8_t d1[RK_XFER_DESC_MAX], d2[RK_XFER_DESC_MAX];
	struct rk_xfer_seg *rseg, *lseg;
	struct rk_xfer_remote *r1, *r2, *r3;
	struct rk_xfer_op op;
	struct rk_error e;
	size_t l1, l2;

	LT_CHECK(rk_xfer_seg_reg(w->own.x, rbuf, 65536, RK_XFER_READ | RK_XFER_WRITE, &e, &rseg),
		 &e);
	LT_CHECK(rk_xfer_seg_reg(w->usr.x, lbuf, 65536, 0, &e, &lseg), &e);
	/* Generations: a re-export after revoke is newer; the old one is refused. */
	LT_CHECK(rk_xfer_export(rseg, w->own.peer, RK_XFER_WRITE, d1, sizeof(d1), &l1, 5000, &e),
		 &e);
	LT_CHECK(rk_xfer_import(w->usr.peer, d1, l1, &e, &r1), &e);
	if (rk_xfer_revoke(rseg, w->own.peer, 5000, &e) != 0)
		LT_FAIL("revoke: %s", e.msg);
	LT_CHECK(rk_xfer_export(rseg, w->own.peer, RK_XFER_WRITE, d2, sizeof(d2), &l2, 5000, &e),
		 &e);
	if (!memcmp(d1, d2, l1))
		LT_FAIL("a new export after revoke gave the same descriptor");
	LT_CHECK(rk_xfer_import(w->usr.peer, d2, l2, &e, &r2), &e);
	if (rk_xfer_import(w->usr.peer, d1, l1, &e, &r3) != -ESTALE)
		LT_FAIL("an older generation was imported");
	printf("revoke: old generation at import: %s\n", e.msg);
	op = (struct rk_xfer_op){RK_XFER_OP_WRITE, lseg, 0, r1, 0, 4096};
	{
		struct rk_xfer_batch *b;

		if (rk_xfer_post(w->usr.peer, &op, 1, NULL, &e, &b) != -ESTALE)
			LT_FAIL("a stale descriptor was posted");
		printf("revoke: stale descriptor on use: %s\n", e.msg);
	}
	/* Works, then revoked: the next WRITE fails at the peer, memory intact. */
	op.remote = r2;
	lt_fill(lbuf, 4096, 1);
	LT_CHECK(run(w, &op, 1, NULL, &e), &e);
	if (lt_check(rbuf, 4096, 1) >= 0)
		LT_FAIL("write before revoke did not land");
	LT_CHECK(rk_xfer_revoke(rseg, w->own.peer, 5000, &e), &e);
	memset(rbuf, 0x5a, 65536);
	lt_fill(lbuf, 4096, 2);
	expect_refused(w, &op, -EREMOTEIO, "revoke: WRITE after revoke");
	intact(rbuf, 65536, 0x5a, "revoke");
	if (rk_xfer_revoke(rseg, w->own.peer, 5000, &e) != -ENOENT)
		LT_FAIL("a second revoke: %s", e.msg);
	rk_xfer_remote_free(r1);
	rk_xfer_remote_free(r2);
	rk_xfer_seg_dereg(lseg);
	rk_xfer_seg_dereg(rseg);
	rk_free_aligned(rbuf);
	rk_free_aligned(lbuf);
}

/*
 * A lane the peer disconnected through rdma_cm: the DISCONNECTED event
 * changes the connection's state and leaves its QP in RTS (what
 * rk__conn_fail does here, as cm_event.c does on the event). Revoke must
 * still end access on it: the user's WRITE with the descriptor then fails
 * and nothing lands. On a fresh pair: a refused WRITE breaks the lanes.
 */
static void revoked_down(struct world *w)
{
	uint8_t *rbuf = rk_alloc_aligned(65536), *lbuf = rk_alloc_aligned(65536);
	struct rk_xfer_seg *rseg, *lseg;
	struct rk_xfer_remote *r4;
	struct rk_xfer_op op;
	struct rk_error e, gone;
	int r;

	LT_CHECK(rk_xfer_seg_reg(w->own.x, rbuf, 65536, RK_XFER_WRITE, &e, &rseg), &e);
	LT_CHECK(rk_xfer_seg_reg(w->usr.x, lbuf, 65536, 0, &e, &lseg), &e);
	r4 = export_import(w, rseg, RK_XFER_WRITE);
	op = (struct rk_xfer_op){RK_XFER_OP_WRITE, lseg, 0, r4, 0, 4096};
	lt_fill(lbuf, 4096, 3);
	LT_CHECK(run(w, &op, 1, NULL, &e), &e);
	rk_error_setf(&gone, "test", ECONNRESET, "the peer disconnected (rdma_cm)");
	for (unsigned i = 0; i < w->nlanes; i++)
		rk__conn_fail(w->own.lanes[i], RK_CONN_DISCONNECTED, &gone);
	LT_CHECK(rk_xfer_revoke(rseg, w->own.peer, 5000, &e), &e);
	memset(rbuf, 0x5a, 65536);
	lt_fill(lbuf, 4096, 4);
	r = run(w, &op, 1, NULL, &e);
	if (r >= 0)
		LT_FAIL("revoke on a disconnected lane: the WRITE after it succeeded");
	printf("revoke on a disconnected lane: WRITE after it: %s\n", e.msg);
	intact(rbuf, 65536, 0x5a, "revoke on a disconnected lane");
	rk_xfer_remote_free(r4);
	rk_xfer_seg_dereg(lseg);
	rk_xfer_seg_dereg(rseg);
	rk_free_aligned(rbuf);
	rk_free_aligned(lbuf);
}

enum forgery { F_KEY, F_LEN, F_OTHER_QP };

/* One forgery on a fresh pair (a refusal costs the user's lane). */
static void forged(struct rk_device *dev, enum rk_xfer_mode mode, enum forgery f)
{
	struct world w = {.dev = dev};
	uint8_t *rbuf = rk_alloc_aligned(3 * 65536), *lbuf = rk_alloc_aligned(65536);
	uint8_t d[RK_XFER_DESC_MAX];
	struct rk_xfer_seg *rseg, *lseg;
	struct rk_xfer_remote *r;
	struct rk_xfer_op op;
	struct rk_error e;
	size_t len;

	world_up(&w, mode, 1);
	/* The segment is the middle 64 KiB; guards on both sides. */
	memset(rbuf, 0x33, 3 * 65536);
	LT_CHECK(
	    rk_xfer_seg_reg(w.own.x, rbuf + 65536, 65536, RK_XFER_WRITE | RK_XFER_READ, &e, &rseg),
	    &e);
	LT_CHECK(rk_xfer_seg_reg(w.usr.x, lbuf, 65536, 0, &e, &lseg), &e);
	LT_CHECK(rk_xfer_export(rseg, w.own.peer, RK_XFER_WRITE, d, sizeof(d), &len, 5000, &e), &e);
	lt_fill(lbuf, 65536, 9);
	if (f == F_KEY) {
		/* Out of bounds is refused locally, before anything is posted. */
		struct rk_xfer_batch *b;

		LT_CHECK(rk_xfer_import(w.usr.peer, d, len, &e, &r), &e);
		op = (struct rk_xfer_op){RK_XFER_OP_WRITE, lseg, 0, r, 65536 - 100, 101};
		if (rk_xfer_post(w.usr.peer, &op, 1, NULL, &e, &b) != -ERANGE)
			LT_FAIL("an out-of-bounds op was posted");
		printf("forged: out of bounds: %s\n", e.msg);
		op = (struct rk_xfer_op){RK_XFER_OP_READ, lseg, 0, r, 0, 100};
		if (rk_xfer_post(w.usr.peer, &op, 1, NULL, &e, &b) != -EACCES)
			LT_FAIL("a READ of a write-only descriptor was posted");
		printf("forged: access: %s\n", e.msg);
		rk_xfer_remote_free(r);
		d[32] ^= 0x01; /* the key */
		d[33] ^= 0x10;
	} else if (f == F_LEN) {
		d[24 + 2] = 0x04; /* length 64 KiB -> 256 KiB + ...: past the segment */
	}
	if (f == F_OTHER_QP) {
		/* A second connection (another peer) in the same PD uses the first one's. */
		struct world w2 = {.dev = dev};

		world_up(&w2, mode, 1);
		LT_CHECK(rk_xfer_import(w2.usr.peer, d, len, &e, &r), &e);
		{
			struct rk_xfer_seg *l2;
			struct rk_xfer_batch *b;
			int res;

			LT_CHECK(rk_xfer_seg_reg(w2.usr.x, lbuf, 65536, 0, &e, &l2), &e);
			op = (struct rk_xfer_op){RK_XFER_OP_WRITE, l2, 0, r, 0, 4096};
			LT_CHECK(rk_xfer_post(w2.usr.peer, &op, 1, NULL, &e, &b), &e);
			res = rk_xfer_batch_wait(b, -1, &e);
			rk_xfer_batch_free(b);
			if (mode == RK_XFER_MW && res != -EREMOTEIO)
				LT_FAIL("another connection's descriptor: %d (%s)", res, e.msg);
			printf("forged: another connection's descriptor: %d %s\n", res,
			       res < 0 ? e.msg : "(MR mode: one PD for both peers reaches it)");
			rk_xfer_remote_free(r);
			rk_xfer_seg_dereg(l2);
		}
		world_down(&w2);
		if (mode == RK_XFER_MW)
			intact(rbuf, 3 * 65536, 0x33, "another connection's descriptor");
	} else {
		LT_CHECK(rk_xfer_import(w.usr.peer, d, len, &e, &r), &e);
		op = (struct rk_xfer_op){
		    RK_XFER_OP_WRITE,	      lseg, 0, r, f == F_LEN ? 65536 : 0,
		    f == F_LEN ? 65536 : 4096};
		expect_refused(&w, &op, -EREMOTEIO, f == F_KEY ? "forged: key" : "forged: length");
		intact(rbuf, 3 * 65536, 0x33, "forged");
		rk_xfer_remote_free(r);
	}
	rk_xfer_seg_dereg(lseg);
	rk_xfer_seg_dereg(rseg);
	world_down(&w);
	rk_free_aligned(rbuf);
	rk_free_aligned(lbuf);
}

static void count(struct world *w)
{
	size_t len = 64 * MiB;
	uint8_t *buf = rk_alloc_aligned(len);
	static struct rk_xfer_seg *segs[1001];
	struct rk_xfer_stats s0, s1;
	struct rk_error e;

	rk_xfer_stats(w->own.x, &s0);
	LT_CHECK(rk_xfer_seg_reg(w->own.x, buf, len, RK_XFER_READ, &e, &segs[0]), &e);
	for (unsigned i = 1; i <= 1000; i++)
		LT_CHECK(rk_xfer_seg_reg(w->own.x, buf + (size_t)(i - 1) * 65536, 16384,
					 RK_XFER_READ, &e, &segs[i]),
			 &e);
	rk_xfer_stats(w->own.x, &s1);
	printf("count: 1,001 segments (one buffer, 1,000 inside): %llu ibv_reg_mr, %llu hits\n",
	       (unsigned long long)(s1.reg_mr - s0.reg_mr),
	       (unsigned long long)(s1.cache_hits - s0.cache_hits));
	if (s1.reg_mr - s0.reg_mr != 1)
		LT_FAIL("%llu registrations", (unsigned long long)(s1.reg_mr - s0.reg_mr));
	for (unsigned i = 0; i <= 1000; i++)
		rk_xfer_seg_dereg(segs[i]);
	rk_xfer_stats(w->own.x, &s1);
	if (s1.dereg_mr - s0.dereg_mr != 1)
		LT_FAIL("%llu deregistrations", (unsigned long long)(s1.dereg_mr - s0.dereg_mr));
	/* Freed and allocated again: registered anew. */
	rk_free_aligned(buf);
	buf = rk_alloc_aligned(len);
	LT_CHECK(rk_xfer_seg_reg(w->own.x, buf, len, RK_XFER_READ, &e, &segs[0]), &e);
	rk_xfer_stats(w->own.x, &s1);
	if (s1.reg_mr - s0.reg_mr != 2)
		LT_FAIL("a reused address hit a stale registration");
	rk_xfer_seg_dereg(segs[0]);
	rk_free_aligned(buf);
}

/* kill: the owner in a child process, connected over TCP. */
static void owner_child(const char *addr, const char *port, int ready, size_t len)
{
	struct rk_device *dev = lt_open_device(0);
	struct rk_xfer *x;
	struct rk_xfer_peer *p;
	struct rk_xfer_seg *seg;
	struct rk_oob_info li, ri;
	struct rk_conn *c;
	struct rk_error e;
	uint8_t d[RK_XFER_DESC_MAX];
	uint8_t *buf = rk_alloc_aligned(len);
	size_t n;
	int lfd, fd;

	lt_role = "owner";
	LT_CHECK(lfd = rk_tcp_listen(addr, port, &e), &e);
	if (write(ready, "r", 1) != 1)
		LT_FAIL("pipe");
	LT_CHECK(fd = rk_tcp_accept(lfd, 20000, &e), &e);
	LT_CHECK(rk_conn_create(dev, &conn_opts, &e, &c), &e);
	rk_conn_local_info(c, &li);
	LT_CHECK(rk_oob_exchange(fd, &li, &ri, 20000, &e), &e);
	LT_CHECK(rk_conn_connect(c, &ri, &e), &e);
	LT_CHECK(rk_xfer_create(dev, NULL, NULL, &e, &x), &e);
	LT_CHECK(rk_xfer_peer_create(x, &c, 1, &e, &p), &e);
	LT_CHECK(rk_xfer_seg_reg(x, buf, len, RK_XFER_READ, &e, &seg), &e);
	LT_CHECK(rk_xfer_export(seg, p, RK_XFER_READ, d, sizeof(d), &n, 5000, &e), &e);
	if (write(fd, d, n) != (ssize_t)n)
		LT_FAIL("oob");
	pause(); /* until killed */
	exit(1);
}

static void killed(const char *addr)
{
	const size_t len = 8 * MiB;
	struct rk_device *dev;
	struct rk_xfer *x;
	struct rk_xfer_peer *p;
	struct rk_xfer_seg *lseg;
	struct rk_xfer_remote *r;
	struct rk_xfer_batch *b;
	struct rk_xfer_op op[64];
	struct rk_xfer_batch_opts bo = {.timeout_ms = 20000};
	struct rk_oob_info li, ri;
	struct rk_conn *c;
	struct rk_error e;
	struct pollfd pl;
	uint8_t d[RK_XFER_DESC_MAX];
	uint8_t *buf;
	int pfd[2], st, fd, res;
	ssize_t n;
	int64_t t0, ms;
	char ch;
	pid_t pid;

	if (pipe(pfd))
		LT_FAIL("pipe");
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		owner_child(addr, "7521", pfd[1], len);
	}
	close(pfd[1]);
	pl = (struct pollfd){.fd = pfd[0], .events = POLLIN};
	if (poll(&pl, 1, 20000) != 1 || read(pfd[0], &ch, 1) != 1)
		LT_FAIL("owner not ready");
	close(pfd[0]);
	dev = lt_open_device(0);
	LT_CHECK(fd = rk_tcp_connect(addr, "7521", 20000, &e), &e);
	LT_CHECK(rk_conn_create(dev, &conn_opts, &e, &c), &e);
	rk_conn_local_info(c, &li);
	LT_CHECK(rk_oob_exchange(fd, &li, &ri, 20000, &e), &e);
	LT_CHECK(rk_conn_connect(c, &ri, &e), &e);
	pl = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&pl, 1, 20000) != 1)
		LT_FAIL("no descriptor");
	n = read(fd, d, sizeof(d));
	if (n <= 0)
		LT_FAIL("no descriptor");
	LT_CHECK(rk_xfer_create(dev, NULL, NULL, &e, &x), &e);
	LT_CHECK(rk_xfer_peer_create(x, &c, 1, &e, &p), &e);
	LT_CHECK(rk_xfer_import(p, d, (size_t)n, &e, &r), &e);
	buf = rk_alloc_aligned(len);
	LT_CHECK(rk_xfer_seg_reg(x, buf, len, 0, &e, &lseg), &e);
	/* 512 MiB of READs: far more than the owner serves before it dies. */
	for (unsigned i = 0; i < 64; i++)
		op[i] = (struct rk_xfer_op){RK_XFER_OP_READ, lseg, 0, r, 0, len};
	LT_CHECK(rk_xfer_post(p, op, 64, &bo, &e, &b), &e);
	usleep(20000);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	t0 = lt_now_ms();
	res = rk_xfer_batch_wait(b, -1, &e);
	ms = lt_now_ms() - t0;
	printf("kill: batch ended after %lld ms: %d %s\n", (long long)ms, res, e.msg);
	if (res != -ECONNRESET)
		LT_FAIL("expected peer gone (-ECONNRESET), got %d", res);
	if (ms > 20000)
		LT_FAIL("past the deadline");
	{
		enum ibv_wc_status ws;
		int s0 = rk_xfer_batch_op_status(b, 0, &ws),
		    s63 = rk_xfer_batch_op_status(b, 63, &ws);

		printf("kill: op 0 %d, op 63 %d (%s)\n", s0, s63, ibv_wc_status_str(ws));
		if (s63 == 0)
			LT_FAIL("the last op reported done");
	}
	rk_xfer_batch_free(b);
	rk_xfer_remote_free(r);
	rk_xfer_peer_destroy(p);
	rk_conn_destroy(c);
	rk_xfer_seg_dereg(lseg);
	rk_xfer_destroy(x);
	rk_free_aligned(buf);
	close(fd);
	rk_device_close(dev);
}

/* Cross-host: the owner of a 1 MiB segment on host B, the user on host A. */
#define X_LEN	 (1 * MiB)
#define X_OPS	 64
#define X_BLK	 (X_LEN / X_OPS)
#define X_ROUNDS 12u

static void tcp_lanes(struct rk_device *dev, int fd, struct rk_conn **lanes, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct rk_oob_info li, ri;
		struct rk_error e;

		LT_CHECK(rk_conn_create(dev, &conn_opts, &e, &lanes[i]), &e);
		rk_conn_local_info(lanes[i], &li);
		LT_CHECK(rk_oob_exchange(fd, &li, &ri, 20000, &e), &e);
		LT_CHECK(rk_conn_connect(lanes[i], &ri, &e), &e);
	}
}

static void full_write(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		LT_FAIL("tcp write");
}

static void full_read(int fd, void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd pl = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (poll(&pl, 1, 60000) != 1)
			LT_FAIL("tcp read: nothing in 60 s");
		r = read(fd, (char *)p + got, n - got);
		if (r <= 0)
			LT_FAIL("tcp read: peer closed");
		got += (size_t)r;
	}
}

static void cross_owner(const char *addr, const char *port)
{
	struct rk_device *dev = lt_open_device(0);
	struct rk_conn *lanes[2];
	struct rk_xfer *x;
	struct rk_xfer_peer *p;
	struct rk_xfer_seg *seg;
	struct rk_error e;
	uint8_t d[RK_XFER_DESC_MAX], *buf = rk_alloc_aligned(X_LEN);
	uint32_t want = 1, v, nd;
	size_t n;
	int lfd, fd;
	char done;

	lt_role = "owner";
	LT_CHECK(lfd = rk_tcp_listen(addr, port, &e), &e);
	printf("owner: listening\n");
	LT_CHECK(fd = rk_tcp_accept(lfd, 60000, &e), &e);
	tcp_lanes(dev, fd, lanes, 2);
	LT_CHECK(rk_xfer_create(dev, NULL, NULL, &e, &x), &e);
	LT_CHECK(rk_xfer_peer_create(x, lanes, 2, &e, &p), &e);
	LT_CHECK(rk_xfer_seg_reg(x, buf, X_LEN, RK_XFER_READ | RK_XFER_WRITE, &e, &seg), &e);
	LT_CHECK(rk_xfer_export(seg, p, RK_XFER_READ | RK_XFER_WRITE, d, sizeof(d), &n, 20000, &e),
		 &e);
	nd = (uint32_t)n;
	full_write(fd, &nd, sizeof(nd));
	full_write(fd, d, n);
	/* One notification per WRITE batch, in order; when notified, the data is there. */
	for (; want <= X_ROUNDS; want++) {
		long bad;

		LT_CHECK(rk_xfer_notif_wait(p, 120000, &v, &e), &e);
		if (v != want)
			LT_FAIL("notification %u, expected %u", v, want);
		bad = lt_check(buf, X_LEN, 1000 + v);
		if (bad >= 0)
			LT_FAIL("batch %u notified before byte %ld landed", v, bad);
		full_write(fd, "k", 1); /* checked: the user may write the next */
	}
	full_read(fd, &done, 1);
	printf("owner: %u notifications, each after its data\n", X_ROUNDS);
	rk_xfer_peer_destroy(p);
	for (unsigned i = 0; i < 2; i++)
		rk_conn_destroy(lanes[i]);
	rk_xfer_seg_dereg(seg);
	rk_xfer_destroy(x);
	rk_free_aligned(buf);
	close(fd);
	close(lfd);
	rk_device_close(dev);
}

static void cross_user(const char *addr, const char *port)
{
	struct rk_device *dev = lt_open_device(0);
	struct rk_conn *lanes[2];
	struct rk_xfer *x;
	struct rk_xfer_peer *p;
	struct rk_xfer_seg *wseg, *rseg;
	struct rk_xfer_remote *r;
	struct rk_xfer_op op[X_OPS];
	struct rk_error e;
	uint8_t d[RK_XFER_DESC_MAX];
	uint8_t *wbuf = rk_alloc_aligned(X_LEN), *rbuf = rk_alloc_aligned(X_LEN);
	uint32_t nd;
	int64_t t0 = lt_now_ms();
	int fd;
	char ok;

	lt_role = "user";
	LT_CHECK(fd = rk_tcp_connect(addr, port, 60000, &e), &e);
	tcp_lanes(dev, fd, lanes, 2);
	LT_CHECK(rk_xfer_create(dev, NULL, NULL, &e, &x), &e);
	LT_CHECK(rk_xfer_peer_create(x, lanes, 2, &e, &p), &e);
	full_read(fd, &nd, sizeof(nd));
	if (nd > sizeof(d))
		LT_FAIL("descriptor of %u bytes", nd);
	full_read(fd, d, nd);
	LT_CHECK(rk_xfer_import(p, d, nd, &e, &r), &e);
	LT_CHECK(rk_xfer_seg_reg(x, wbuf, X_LEN, 0, &e, &wseg), &e);
	LT_CHECK(rk_xfer_seg_reg(x, rbuf, X_LEN, 0, &e, &rseg), &e);
	for (uint32_t n = 1; n <= X_ROUNDS; n++) {
		struct rk_xfer_batch_opts bo = {.timeout_ms = 120000, .notify = 1, .notif = n};
		struct rk_xfer_batch *b;

		lt_fill(wbuf, X_LEN, 1000 + n);
		for (unsigned i = 0; i < X_OPS; i++)
			op[i] =
			    (struct rk_xfer_op){RK_XFER_OP_WRITE,    wseg, (uint64_t)i * X_BLK, r,
						(uint64_t)i * X_BLK, X_BLK};
		LT_CHECK(rk_xfer_post(p, op, X_OPS, &bo, &e, &b), &e);
		LT_CHECK(rk_xfer_batch_wait(b, -1, &e), &e);
		rk_xfer_batch_free(b);
		/* Read it back in reverse block order, every byte checked. */
		memset(rbuf, 0, X_LEN);
		for (unsigned i = 0; i < X_OPS; i++)
			op[i] = (struct rk_xfer_op){RK_XFER_OP_READ,
						    rseg,
						    (uint64_t)i * X_BLK,
						    r,
						    (uint64_t)(X_OPS - 1 - i) * X_BLK,
						    X_BLK};
		bo.notify = 0;
		LT_CHECK(rk_xfer_post(p, op, X_OPS, &bo, &e, &b), &e);
		LT_CHECK(rk_xfer_batch_wait(b, -1, &e), &e);
		rk_xfer_batch_free(b);
		for (unsigned i = 0; i < X_OPS; i++)
			if (memcmp(rbuf + (size_t)i * X_BLK, wbuf + (size_t)(X_OPS - 1 - i) * X_BLK,
				   X_BLK))
				LT_FAIL("round %u: READ of block %u differs", n, X_OPS - 1 - i);
		full_read(fd, &ok, 1); /* the owner checked it when notified */
	}
	full_write(fd, "d", 1);
	printf("user: %u rounds of 64 x 16 KiB WRITE (notified) and READ over 2 lanes, every byte "
	       "checked, in %lld ms\n",
	       X_ROUNDS, (long long)(lt_now_ms() - t0));
	rk_xfer_remote_free(r);
	rk_xfer_peer_destroy(p);
	for (unsigned i = 0; i < 2; i++)
		rk_conn_destroy(lanes[i]);
	rk_xfer_seg_dereg(wseg);
	rk_xfer_seg_dereg(rseg);
	rk_xfer_destroy(x);
	rk_free_aligned(wbuf);
	rk_free_aligned(rbuf);
	close(fd);
	rk_device_close(dev);
}

int main(int argc, char **argv)
{
	struct world w = {0};
	enum rk_xfer_mode mode;
	const char *what;

	lt_prog = "lib_onesided";
	if (argc < 2)
		LT_FAIL("usage: lib_onesided sizes|notif|revoke|forged|count|kill [mw|mr]");
	what = argv[1];
	if (argc == 4 && (!strcmp(what, "owner") || !strcmp(what, "user"))) {
		if (!strcmp(what, "owner"))
			cross_owner(argv[2], argv[3]);
		else
			cross_user(argv[2], argv[3]);
		printf("lib_onesided %s: ok\n", what);
		return 0;
	}
	if (!strcmp(what, "kill")) {
		killed(lt_env("RK_ADDR"));
		printf("lib_onesided kill: ok\n");
		return 0;
	}
	mode = argc > 2 && !strcmp(argv[2], "mw") ? RK_XFER_MW : RK_XFER_MR;
	w.dev = lt_open_device(0);
	printf("lib_onesided: %s has %smemory windows of type 2\n", lt_env("RK_ADDR"),
	       rk_xfer_mw_supported(w.dev) ? "" : "no ");
	if (mode == RK_XFER_MW && !rk_xfer_mw_supported(w.dev)) {
		printf("lib_onesided %s mw: skipped\n", what);
		rk_device_close(w.dev);
		return 0;
	}
	if (!strcmp(what, "forged")) {
		forged(w.dev, mode, F_KEY);
		forged(w.dev, mode, F_LEN);
		forged(w.dev, mode, F_OTHER_QP);
	} else {
		world_up(&w, mode, 1);
		if (!strcmp(what, "sizes"))
			sizes(&w);
		else if (!strcmp(what, "notif"))
			notif(&w, 1500);
		else if (!strcmp(what, "revoke"))
			revoked(&w);
		else if (!strcmp(what, "count"))
			count(&w);
		else
			LT_FAIL("unknown test %s", what);
		world_down(&w);
		if (!strcmp(what, "notif") || !strcmp(what, "revoke")) {
			struct world w2 = {.dev = w.dev};

			world_up(&w2, mode, !strcmp(what, "notif") ? 2 : 1);
			if (!strcmp(what, "notif"))
				notif(&w2, 500);
			else
				revoked_down(&w2);
			world_down(&w2);
		}
	}
	rk_device_close(w.dev);
	printf("lib_onesided %s %s: ok\n", what, mode == RK_XFER_MW ? "mw" : "mr");
	return 0;
}
