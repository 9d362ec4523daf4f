/*
 * test_pool_slab.c - the pool's bookkeeping on malloc'ed chunks: classes,
 * O(1) reuse, growth by whole chunks, limits, foreign and double frees,
 * statistics.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "slab.h"

static int grows, releases;

static int grow(void *ctx, size_t bytes, struct rk_slab_chunk *c, struct rk_error *err)
{
	c->base = malloc(bytes);
	if (!c->base)
		return -ENOMEM;
	c->bytes = bytes;
	c->lkey = 100 + (uint32_t)grows;
	c->rkey = 200 + (uint32_t)grows;
	grows++;
	return 0;
}

static void release(void *ctx, struct rk_slab_chunk *c)
{
	free(c->base);
	releases++;
}

static void classes_and_keys(void **state)
{
	static const size_t sizes[] = {64, 4096, 0};
	struct rk_slab s;
	struct rk_buf a, b, c;

	grows = releases = 0;
	assert_int_equal(rk__slab_init(&s, sizes, 8192, 0, grow, release, NULL, NULL), 0);
	assert_int_equal(rk__slab_alloc(&s, 1, &a, NULL), 0);
	assert_int_equal(a.len, 64);
	assert_int_equal(rk__slab_alloc(&s, 65, &b, NULL), 0);
	assert_int_equal(b.len, 4096);
	assert_int_not_equal(a.lkey, b.lkey); /* different chunks */
	assert_int_equal(rk__slab_alloc(&s, 4097, &c, NULL), -E2BIG);
	assert_int_equal(s.st.alloc_failures, 1);
	assert_int_equal(s.st.chunks, 2);
	assert_int_equal(s.st.registered_bytes, 2 * 8192);
	assert_int_equal(s.st.in_use_bytes, 64 + 4096);
	/* freed slot is handed out again (LIFO) */
	assert_int_equal(rk__slab_free(&s, &b), 0);
	assert_int_equal(rk__slab_alloc(&s, 100, &c, NULL), 0);
	assert_ptr_equal(c.addr, b.addr);
	assert_int_equal(c.rkey, b.rkey);
	rk__slab_fini(&s);
	assert_int_equal(releases, 2);
}

static void grows_by_chunks(void **state)
{
	static const size_t sizes[] = {1024, 0};
	struct rk_slab s;
	struct rk_buf b[10];

	grows = releases = 0;
	assert_int_equal(rk__slab_init(&s, sizes, 4096, 3 * 4096, grow, release, NULL, NULL), 0);
	for (int i = 0; i < 12; i++)
		assert_int_equal(rk__slab_alloc(&s, 1024, &b[i % 10], NULL), 0);
	/* 12 buffers of 1 KiB = 3 chunks of 4 KiB: the limit */
	assert_int_equal(s.st.chunks, 3);
	assert_int_equal(rk__slab_alloc(&s, 1024, &b[0], NULL), -ENOMEM);
	assert_int_equal(s.st.in_use, 12);
	rk__slab_fini(&s);
	assert_int_equal(releases, 3);
}

static void bad_frees(void **state)
{
	static const size_t sizes[] = {512, 0};
	struct rk_slab s;
	struct rk_buf a, forged;

	grows = releases = 0;
	assert_int_equal(rk__slab_init(&s, sizes, 4096, 0, grow, release, NULL, NULL), 0);
	assert_int_equal(rk__slab_alloc(&s, 10, &a, NULL), 0);
	forged = a;
	forged.addr = (char *)a.addr + 8;
	assert_int_equal(rk__slab_free(&s, &forged), -EINVAL);
	forged = a;
	forged.id = 5u << RK_SLAB_SLOT_BITS; /* no such class */
	assert_int_equal(rk__slab_free(&s, &forged), -EINVAL);
	forged = a;
	forged.id = a.id + 1000; /* slot beyond the chunks */
	assert_int_equal(rk__slab_free(&s, &forged), -EINVAL);
	forged = a;
	forged.id = a.id + 1; /* a slot that is free */
	assert_int_equal(rk__slab_free(&s, &forged), -EINVAL);
	assert_int_equal(rk__slab_free(&s, &a), 0);
	assert_int_equal(rk__slab_free(&s, &a), -EINVAL); /* double free */
	assert_int_equal(s.st.allocs, 1);
	assert_int_equal(s.st.frees, 1);
	assert_int_equal(s.st.in_use, 0);
	rk__slab_fini(&s);
}

static void bad_classes(void **state)
{
	static const size_t unsorted[] = {4096, 64, 0};
	static const size_t tiny[] = {1, 0};
	struct rk_slab s;

	assert_int_equal(rk__slab_init(&s, unsorted, 0, 0, grow, release, NULL, NULL), -EINVAL);
	/* 4 MiB of 1-byte buffers is too many slots per chunk */
	assert_int_equal(rk__slab_init(&s, tiny, 0, 0, grow, release, NULL, NULL), -EINVAL);
	/* defaults: 4 KiB, 64 KiB, 1 MiB */
	assert_int_equal(rk__slab_init(&s, NULL, 0, 0, grow, release, NULL, NULL), 0);
	assert_int_equal(s.nclasses, 3);
	assert_int_equal(s.classes[2].size, 1 << 20);
	rk__slab_fini(&s);
}

static void churn(void **state)
{
	static const size_t sizes[] = {256, 2048, 16384, 0};
	struct rk_buf live[300];
	uint32_t n = 0, x = 1;
	struct rk_slab s;

	grows = releases = 0;
	assert_int_equal(rk__slab_init(&s, sizes, 65536, 0, grow, release, NULL, NULL), 0);
	for (int i = 0; i < 100000; i++) {
		x = x * 1103515245u + 12345u;
		if (n < 300 && (n == 0 || (x >> 16) % 2)) {
			assert_int_equal(rk__slab_alloc(&s, 1 + (x >> 8) % 16384, &live[n], NULL),
					 0);
			memset(live[n].addr, 0xee, live[n].len); /* must be ours alone */
			n++;
		} else {
			uint32_t k = (x >> 8) % n;

			assert_int_equal(rk__slab_free(&s, &live[k]), 0);
			live[k] = live[--n];
		}
	}
	assert_int_equal(s.st.in_use, n);
	assert_int_equal(s.st.allocs - s.st.frees, n);
	while (n)
		assert_int_equal(rk__slab_free(&s, &live[--n]), 0);
	assert_int_equal(s.st.in_use_bytes, 0);
	rk__slab_fini(&s);
	assert_int_equal(grows, releases);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(classes_and_keys),
	    cmocka_unit_test(grows_by_chunks),
	    cmocka_unit_test(bad_frees),
	    cmocka_unit_test(bad_classes),
	    cmocka_unit_test(churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
