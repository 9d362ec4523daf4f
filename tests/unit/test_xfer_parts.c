/*
 * test_xfer_parts.c - the one-sided transfer layer's pure parts (lib/xfer_int.h):
 * the descriptor codec (round trip, truncated, garbage, version, fields),
 * the registration cache (containment, overlap, freed-and-reused address,
 * eviction, counted calls) and the batch planner (splitting, striping,
 * doorbell grouping, signaling).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "xfer_int.h"

static struct rk__xdesc sample(unsigned lanes)
{
	struct rk__xdesc d;

	memset(&d, 0, sizeof(d));
	d.version = RK_XFER_DESC_VERSION;
	d.access = RK_XFER_READ | RK_XFER_WRITE;
	d.mode = RK_XFER_MW;
	d.lanes = (uint8_t)lanes;
	d.gen = 3;
	d.seg_id = 77;
	d.addr = 0x7f0012345000ull;
	d.len = 1u << 20;
	for (unsigned i = 0; i < lanes; i++)
		d.rkey[i] = 0x1000u * (i + 1) + 0x42;
	return d;
}

static void desc_roundtrip(void **state)
{
	uint8_t buf[RK_XFER_DESC_MAX];
	struct rk__xdesc d, e;
	const char *why = NULL;
	size_t len;

	(void)state;
	for (unsigned lanes = 1; lanes <= RK_XFER_LANES_MAX; lanes++) {
		d = sample(lanes);
		assert_int_equal(rk__xdesc_encode(&d, buf, sizeof(buf), &len), 0);
		assert_int_equal(len, 32 + 4 * lanes);
		assert_int_equal(rk__xdesc_decode(buf, len, &e, &why), 0);
		assert_true(d.version == e.version && d.access == e.access && d.mode == e.mode &&
			    d.lanes == e.lanes && d.gen == e.gen && d.seg_id == e.seg_id &&
			    d.addr == e.addr && d.len == e.len);
		assert_memory_equal(d.rkey, e.rkey, sizeof(d.rkey));
	}
	/* Little-endian, fixed places. */
	d = sample(1);
	assert_int_equal(rk__xdesc_encode(&d, buf, sizeof(buf), &len), 0);
	assert_memory_equal(buf, "RKXD", 4);
	assert_int_equal(buf[8], 3);
	assert_int_equal(buf[32], 0x42);
	assert_int_equal(buf[33], 0x10);
	assert_int_equal(rk__xdesc_encode(&d, buf, len - 1, &len), -ENOSPC);
}

static void expect_refused(const uint8_t *buf, size_t len, const char *field)
{
	struct rk__xdesc e;
	const char *why = NULL;

	memset(&e, 0xa5, sizeof(e));
	assert_int_equal(rk__xdesc_decode(buf, len, &e, &why), -EPROTO);
	assert_non_null(why);
	assert_string_equal(why, field);
	assert_int_equal(e.gen, 0xa5a5a5a5u); /* untouched */
}

static void desc_refused(void **state)
{
	uint8_t buf[RK_XFER_DESC_MAX + 8], bad[RK_XFER_DESC_MAX + 8];
	struct rk__xdesc d = sample(2);
	size_t len;

	(void)state;
	assert_int_equal(rk__xdesc_encode(&d, buf, sizeof(buf), &len), 0);
	for (size_t n = 0; n < 32; n++)
		expect_refused(buf, n, "truncated header");
	for (size_t n = 32; n < len; n++)
		expect_refused(buf, n, "truncated keys");
	expect_refused(buf, len + 1, "trailing bytes");
#define MUTATE(off, val, field)                                                                    \
	do {                                                                                       \
		memcpy(bad, buf, len);                                                             \
		bad[off] = (uint8_t)(val);                                                         \
		expect_refused(bad, len, field);                                                   \
	} while (0)
	MUTATE(0, 'X', "magic");
	MUTATE(4, 2, "version");
	MUTATE(4, 0, "version");
	MUTATE(5, 0, "access");
	MUTATE(5, 4, "access");
	MUTATE(6, 0, "mode");
	MUTATE(6, 3, "mode");
	MUTATE(7, 0, "lane count");
	MUTATE(7, RK_XFER_LANES_MAX + 1, "lane count");
	MUTATE(7, 3, "truncated keys"); /* three lanes promised, two keys sent */
	MUTATE(7, 1, "trailing bytes");
	memcpy(bad, buf, len);
	memset(bad + 8, 0, 4);
	expect_refused(bad, len, "generation");
	memcpy(bad, buf, len);
	memset(bad + 24, 0, 8);
	expect_refused(bad, len, "length");
	memcpy(bad, buf, len);
	memset(bad + 16, 0xff, 8); /* address + length wraps */
	expect_refused(bad, len, "length");
	/* Encoding refuses what decoding would. */
	d.lanes = 0;
	assert_int_equal(rk__xdesc_encode(&d, buf, sizeof(buf), &len), -EINVAL);
}

static void desc_garbage(void **state)
{
	uint8_t buf[RK_XFER_DESC_MAX + 8];
	struct rk__xdesc e;
	const char *why;
	unsigned seed = 12345;

	(void)state;
	for (int round = 0; round < 20000; round++) {
		size_t len = (size_t)(seed % sizeof(buf));

		for (size_t i = 0; i < len; i++) {
			seed = seed * 1103515245u + 12345u;
			buf[i] = (uint8_t)(seed >> 16);
		}
		if (round & 1) /* half with a valid magic, so deeper checks run */
			memcpy(buf, "RKXD\x01\x01\x01\x01", len < 8 ? len : 8);
		why = NULL;
		if (rk__xdesc_decode(buf, len, &e, &why) == 0) {
			uint8_t again[RK_XFER_DESC_MAX];
			size_t n;

			assert_int_equal(rk__xdesc_encode(&e, again, sizeof(again), &n), 0);
			assert_int_equal(n, len);
			assert_memory_equal(again, buf, len);
		} else {
			assert_non_null(why);
		}
		seed = seed * 1103515245u + 12345u;
	}
}

/* ---- registration cache with counting fake verbs ---- */

struct fake {
	int regs, deregs, live, fail;
	uint32_t next_key;
};

static void *fake_reg(void *ctx, void *pd, void *addr, size_t len, int access, uint32_t *lkey)
{
	struct fake *f = ctx;

	(void)pd;
	(void)addr;
	(void)len;
	(void)access;
	if (f->fail) {
		errno = ENOMEM;
		return NULL;
	}
	f->regs++;
	f->live++;
	*lkey = ++f->next_key;
	return malloc(1);
}

static void fake_dereg(void *ctx, void *mr)
{
	struct fake *f = ctx;

	f->deregs++;
	f->live--;
	free(mr);
}

static void cache_counts(void **state)
{
	struct fake f = {0};
	struct rk__xcache_ops ops = {fake_reg, fake_dereg, &f};
	struct rk__xcache c;
	struct rk__xregion *big, *r, *segs[1000];
	char *buf = malloc(64u << 20);
	int pd1, pd2;

	(void)state;
	assert_non_null(buf);
	rk__xcache_init(&c, &ops);
	assert_int_equal(rk__xcache_get(&c, &pd1, buf, 64u << 20, 1, &big), 0);
	/* 1,000 segments inside: one registration in all. */
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(
		    rk__xcache_get(&c, &pd1, buf + (size_t)i * 65536, 4096, 1, &segs[i]), 0);
		assert_ptr_equal(segs[i], big);
	}
	assert_int_equal(f.regs, 1);
	assert_int_equal(c.hits, 1000);
	/* Same range again: a lookup. */
	assert_int_equal(rk__xcache_get(&c, &pd1, buf, 64u << 20, 1, &r), 0);
	assert_ptr_equal(r, big);
	assert_int_equal(f.regs, 1);
	rk__xcache_put(&c, r);
	/* Another PD or another access: not a hit. */
	assert_int_equal(rk__xcache_get(&c, &pd2, buf, 4096, 1, &r), 0);
	assert_ptr_not_equal(r, big);
	rk__xcache_put(&c, r);
	assert_int_equal(rk__xcache_get(&c, &pd1, buf, 4096, 3, &r), 0);
	assert_ptr_not_equal(r, big);
	rk__xcache_put(&c, r);
	assert_int_equal(f.regs, 3);
	assert_int_equal(f.deregs, 2);
	/* Segments go; the region stays until the last one. */
	for (int i = 0; i < 1000; i++)
		rk__xcache_put(&c, segs[i]);
	assert_int_equal(f.live, 1);
	rk__xcache_put(&c, big);
	assert_int_equal(f.live, 0);
	assert_int_equal(c.nregions, 0);
	free(buf);
}

static void cache_overlap(void **state)
{
	struct fake f = {0};
	struct rk__xcache_ops ops = {fake_reg, fake_dereg, &f};
	struct rk__xcache c;
	struct rk__xregion *a, *b, *in;
	static char buf[16384];
	int pd;

	(void)state;
	rk__xcache_init(&c, &ops);
	assert_int_equal(rk__xcache_get(&c, &pd, buf, 8192, 1, &a), 0);
	/* Overlapping, not contained: its own region, exactly its range. */
	assert_int_equal(rk__xcache_get(&c, &pd, buf + 4096, 8192, 1, &b), 0);
	assert_ptr_not_equal(a, b);
	assert_int_equal(b->start, (uintptr_t)buf + 4096);
	assert_int_equal(b->end, (uintptr_t)buf + 12288);
	/* Contained in both: a hit on one of them. */
	assert_int_equal(rk__xcache_get(&c, &pd, buf + 4096, 4096, 1, &in), 0);
	assert_true(in == a || in == b);
	assert_int_equal(f.regs, 2);
	/* Bad ranges. */
	assert_int_equal(rk__xcache_get(&c, &pd, buf, 0, 1, &in), -EINVAL);
	assert_int_equal(rk__xcache_get(&c, &pd, (void *)(uintptr_t)-4096, 8192, 1, &in), -EINVAL);
	/* A failing registration leaves nothing behind. */
	f.fail = 1;
	assert_int_equal(rk__xcache_get(&c, &pd, buf + 12288, 4096, 1, &in), -ENOMEM);
	assert_int_equal(c.nregions, 2);
	f.fail = 0;
	rk__xcache_fini(&c);
	assert_int_equal(f.live, 0);
}

static void cache_reuse(void **state)
{
	struct fake f = {0};
	struct rk__xcache_ops ops = {fake_reg, fake_dereg, &f};
	struct rk__xcache c;
	struct rk__xregion *r;
	uint32_t first;
	void *p, *q;
	int pd;

	(void)state;
	rk__xcache_init(&c, &ops);
	p = malloc(1u << 20);
	assert_non_null(p);
	assert_int_equal(rk__xcache_get(&c, &pd, p, 1u << 20, 1, &r), 0);
	first = r->lkey;
	rk__xcache_put(&c, r); /* the segment goes: the region is evicted at once */
	assert_int_equal(f.deregs, 1);
	free(p);
	/* Freed and allocated again - often the very same address. */
	q = malloc(1u << 20);
	assert_non_null(q);
	assert_int_equal(rk__xcache_get(&c, &pd, q, 1u << 20, 1, &r), 0);
	assert_int_equal(f.regs, 2); /* registered anew, whatever the address */
	assert_int_not_equal(r->lkey, first);
	rk__xcache_put(&c, r);
	free(q);
	assert_int_equal(f.live, 0);
}

/*
 * A region outliving its creator: a segment inside keeps it registered, but
 * the creator's pages may be unmapped and mapped again at the same address,
 * so nothing new may hit it.
 */
static void cache_sealed(void **state)
{
	struct fake f = {0};
	struct rk__xcache_ops ops = {fake_reg, fake_dereg, &f};
	struct rk__xcache c;
	struct rk__xregion *a, *inner, *again;
	char *buf = malloc(1u << 20);
	int pd;

	(void)state;
	assert_non_null(buf);
	rk__xcache_init(&c, &ops);
	assert_int_equal(rk__xcache_get(&c, &pd, buf, 1u << 20, 1, &a), 0);
	assert_int_equal(rk__xcache_get(&c, &pd, buf + 4096, 4096, 1, &inner), 0);
	assert_ptr_equal(inner, a); /* a hit */
	rk__xcache_seal(a);	    /* the creating segment goes ... */
	rk__xcache_put(&c, a);
	assert_int_equal(f.deregs, 0); /* ... the inner one keeps the region */
	assert_int_equal(rk__xcache_get(&c, &pd, buf + 65536, 4096, 1, &again), 0);
	assert_ptr_not_equal(again, a); /* no hit on the sealed region */
	assert_int_equal(f.regs, 2);
	rk__xcache_put(&c, again);
	rk__xcache_put(&c, inner);
	assert_int_equal(f.live, 0);
	rk__xcache_fini(&c);
	free(buf);
}

/* ---- the importer's generation table ---- */

static void gens_sorted_capped(void **state)
{
	struct rk__xgens t = {0};
	struct rk__xgen *g;
	uint32_t id = 12345;

	(void)state;
	/* 1,000 ids in a scrambled order: each found, none else. */
	for (unsigned i = 0; i < 1000; i++) {
		id = id * 1103515245u + 12345u;
		assert_int_equal(rk__xgens_add(&t, id | 1, 100000, &g), 0);
		assert_int_equal(g->seg_id, id | 1);
		g->gen = i + 1;
	}
	assert_int_equal(t.n, 1000);
	for (unsigned i = 1; i < t.n; i++)
		assert_true(t.v[i - 1].seg_id < t.v[i].seg_id);
	id = 12345;
	for (unsigned i = 0; i < 1000; i++) {
		id = id * 1103515245u + 12345u;
		g = rk__xgens_find(&t, id | 1);
		assert_non_null(g);
		assert_int_equal(g->gen, i + 1);
		assert_null(rk__xgens_find(&t, id & ~1u));
	}
	assert_int_equal(rk__xgens_add(&t, t.v[0].seg_id, 100000, &g), -EEXIST);
	rk__xgens_fini(&t);

	/* At the cap the lowest unreferenced id goes; all referenced: refused. */
	for (uint32_t s = 1; s <= 4; s++) {
		assert_int_equal(rk__xgens_add(&t, s, 4, &g), 0);
		g->refs = s != 2; /* segment 2 has no handle left */
	}
	assert_int_equal(rk__xgens_add(&t, 9, 4, &g), 0);
	g->refs = 1;
	assert_null(rk__xgens_find(&t, 2));
	assert_non_null(rk__xgens_find(&t, 1));
	assert_int_equal(t.evicted, 1);
	assert_int_equal(rk__xgens_add(&t, 10, 4, &g), -ENOSPC);
	assert_int_equal(t.n, 4);
	rk__xgens_fini(&t);
}

/* ---- batch planner ---- */

static void plan_doorbells(void **state)
{
	uint64_t lens[64];
	struct rk__xwr w[256];
	unsigned db;
	long n;

	(void)state;
	for (int i = 0; i < 64; i++)
		lens[i] = 16384;
	assert_int_equal(rk__xplan_count(lens, 64, RK_XFER_SPLIT, RK_XPLAN_MAX_WRS), 64);
	n = rk__xplan(lens, 64, 1, 16, RK_XFER_SPLIT, w, &db);
	assert_int_equal(n, 64);
	assert_int_equal(db, 4); /* 1/16 doorbell per op */
	for (int i = 0; i < 64; i++) {
		assert_int_equal(w[i].op, i);
		assert_int_equal(w[i].signaled, i % 16 == 15);
		assert_int_equal(w[i].first, i % 16 == 0);
		assert_int_equal(w[i].lane, 0);
	}
	/* Two lanes: op i on lane i % 2, 32 each, 2 chains each. */
	n = rk__xplan(lens, 64, 2, 16, RK_XFER_SPLIT, w, &db);
	assert_int_equal(n, 64);
	assert_int_equal(db, 4);
	for (int i = 0; i < 64; i++) {
		assert_int_equal(w[i].lane, i / 32);
		assert_int_equal(w[i].op % 2, w[i].lane);
	}
	/* A partial last chain is signaled too. */
	n = rk__xplan(lens, 20, 1, 16, RK_XFER_SPLIT, w, &db);
	assert_int_equal(n, 20);
	assert_int_equal(db, 2);
	assert_true(w[15].signaled && w[19].signaled && !w[18].signaled && w[16].first);
	/* More lanes than ops: empty lanes make no chain. */
	n = rk__xplan(lens, 3, 8, 16, RK_XFER_SPLIT, w, &db);
	assert_int_equal(n, 3);
	assert_int_equal(db, 3);
}

static void plan_split(void **state)
{
	uint64_t lens[3] = {1, (64u << 20) + 5, 8u << 20};
	struct rk__xwr w[64];
	uint64_t sum = 0, next = 0;
	unsigned db;
	long n;

	(void)state;
	assert_int_equal(rk__xplan_count(lens, 3, RK_XFER_SPLIT, RK_XPLAN_MAX_WRS), 1 + 9 + 1);
	n = rk__xplan(lens, 3, 1, 4, RK_XFER_SPLIT, w, &db);
	assert_int_equal(n, 11);
	assert_int_equal(db, 3);
	for (long i = 0; i < n; i++) {
		assert_true(w[i].len > 0 && w[i].len <= RK_XFER_SPLIT);
		if (w[i].op == 1) {
			assert_int_equal(w[i].off, next); /* consecutive pieces */
			next += w[i].len;
		}
		sum += w[i].len;
	}
	assert_int_equal(next, lens[1]);
	assert_int_equal(sum, lens[0] + lens[1] + lens[2]);
	assert_int_equal(w[9].len, 5);
	/* Limits. */
	lens[0] = 0;
	assert_int_equal(rk__xplan_count(lens, 3, RK_XFER_SPLIT, RK_XPLAN_MAX_WRS), -EINVAL);
	lens[0] = UINT64_MAX;
	assert_int_equal(rk__xplan_count(lens, 1, RK_XFER_SPLIT, RK_XPLAN_MAX_WRS), -E2BIG);
	lens[0] = 100;
	assert_int_equal(rk__xplan_count(lens, 1, 0, RK_XPLAN_MAX_WRS), -EINVAL);
	assert_int_equal(rk__xplan(lens, 1, 0, 4, RK_XFER_SPLIT, w, &db), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(desc_roundtrip), cmocka_unit_test(desc_refused),
	    cmocka_unit_test(desc_garbage),   cmocka_unit_test(cache_counts),
	    cmocka_unit_test(cache_overlap),  cmocka_unit_test(cache_reuse),
	    cmocka_unit_test(cache_sealed),   cmocka_unit_test(gens_sorted_capped),
	    cmocka_unit_test(plan_doorbells), cmocka_unit_test(plan_split),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
