/*
 * test_matrix_sched.c - rk matrix's schedule (every pair exactly once, no
 * rank twice in a round, n - 1 rounds of n / 2 pairs; n = 1..64 and 2,048),
 * subsets (--pairs, same-host pairs, --quick), the flagging rule and the
 * merge of the two sides' reports (both must agree; a failure on either side
 * stays one).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "matrix_sched.h"

/* Every pair of @set once, none outside it, no rank twice in a round. */
static void check_sched(const struct mx_sched *s, const struct mx_pair_set *set)
{
	uint32_t n = set->n;
	struct mx_pair_set seen;
	uint32_t *in_round = calloc(n ? n : 1, sizeof(*in_round));
	uint64_t want = 0;

	assert_non_null(in_round);
	assert_int_equal(mx_set_init(&seen, n, 0), 0);
	for (uint32_t a = 0; a < n; a++)
		for (uint32_t b = a + 1; b < n; b++)
			want += (uint64_t)mx_set_has(set, a, b);
	assert_int_equal(s->npairs, want);
	for (uint32_t r = 0; r < s->nrounds; r++) {
		assert_true(s->round_at[r + 1] > s->round_at[r]);
		for (uint32_t i = s->round_at[r]; i < s->round_at[r + 1]; i++) {
			struct mx_pair p = s->pairs[i];

			assert_true(p.a < p.b && p.b < n);
			assert_true(mx_set_has(set, p.a, p.b));
			assert_false(mx_set_has(&seen, p.a, p.b));
			mx_set_put(&seen, p.a, p.b, 1);
			assert_int_not_equal(in_round[p.a], r + 1);
			assert_int_not_equal(in_round[p.b], r + 1);
			in_round[p.a] = in_round[p.b] = r + 1;
		}
	}
	mx_set_free(&seen);
	free(in_round);
}

static void full(uint32_t n)
{
	struct mx_pair_set set;
	struct mx_sched s;

	assert_int_equal(mx_set_init(&set, n, 1), 0);
	assert_int_equal(mx_sched_build(&s, &set, 0), 0);
	check_sched(&s, &set);
	/* n - 1 rounds of n / 2 pairs; odd n: n rounds of (n - 1) / 2, one rank out each. */
	if (n >= 2) {
		assert_int_equal(s.nrounds, n % 2 ? n : n - 1);
		for (uint32_t r = 0; r < s.nrounds; r++)
			assert_int_equal(s.round_at[r + 1] - s.round_at[r], n / 2);
	} else {
		assert_int_equal(s.nrounds, 0);
	}
	mx_sched_free(&s);
	mx_set_free(&set);
}

static void sched_1_to_64(void **state)
{
	(void)state;
	for (uint32_t n = 1; n <= 64; n++)
		full(n);
}

static void sched_2048(void **state)
{
	(void)state;
	full(2048);
}

static void quick_one_round(void **state)
{
	struct mx_pair_set set;
	struct mx_sched s;

	(void)state;
	assert_int_equal(mx_set_init(&set, 8, 1), 0);
	assert_int_equal(mx_sched_build(&s, &set, 1), 0);
	assert_int_equal(s.nrounds, 1);
	assert_int_equal(s.npairs, 4);
	mx_sched_free(&s);
	mx_set_free(&set);
}

/* Four ranks, two per host: only the four cross-host pairs, in disjoint rounds. */
static void intra_skipped(void **state)
{
	static const uint32_t host[4] = {0, 0, 1, 1};
	struct mx_pair_set set;
	struct mx_sched s;

	(void)state;
	assert_int_equal(mx_set_init(&set, 4, 1), 0);
	mx_set_drop_intra(&set, host);
	assert_false(mx_set_has(&set, 0, 1));
	assert_false(mx_set_has(&set, 2, 3));
	assert_true(mx_set_has(&set, 0, 2) && mx_set_has(&set, 1, 3));
	assert_int_equal(mx_sched_build(&s, &set, 0), 0);
	check_sched(&s, &set);
	assert_int_equal(s.npairs, 4);
	assert_int_equal(s.nrounds, 2);
	mx_sched_free(&s);
	mx_set_free(&set);
}

static void pairs_file(void **state)
{
	struct mx_pair_set set;
	struct mx_sched s;
	char why[100];

	(void)state;
	assert_int_equal(mx_set_init(&set, 6, 0), 0);
	assert_int_equal(mx_set_parse_pairs(&set,
					    "# links to check\n0 1\n\n 3,2  # again\n2 3\n"
					    "5\t4\r\n0 5",
					    why, sizeof(why)),
			 0);
	assert_true(mx_set_has(&set, 1, 0) && mx_set_has(&set, 2, 3) && mx_set_has(&set, 4, 5));
	assert_true(mx_set_has(&set, 0, 5));
	assert_false(mx_set_has(&set, 0, 2));
	assert_int_equal(mx_sched_build(&s, &set, 0), 0);
	check_sched(&s, &set);
	assert_int_equal(s.npairs, 4);
	mx_sched_free(&s);
	mx_set_free(&set);

	assert_int_equal(mx_set_init(&set, 6, 0), 0);
	assert_int_equal(mx_set_parse_pairs(&set, "0 1\n0 6\n", why, sizeof(why)), -1);
	assert_string_equal(why, "line 2: a rank beyond the matrix's size");
	assert_int_equal(mx_set_parse_pairs(&set, "2 2\n", why, sizeof(why)), -1);
	assert_string_equal(why, "line 1: a rank paired with itself");
	assert_int_equal(mx_set_parse_pairs(&set, "1 2 3\n", why, sizeof(why)), -1);
	assert_string_equal(why, "line 1: more than two ranks");
	assert_int_equal(mx_set_parse_pairs(&set, "\n\nx 1\n", why, sizeof(why)), -1);
	assert_string_equal(why, "line 3: expected two rank numbers, \"A B\"");
	assert_int_equal(mx_set_parse_pairs(&set, "99999999999999999999 1\n", why, sizeof(why)),
			 -1);
	mx_set_free(&set);
}

static struct mx_result res(uint32_t a, uint32_t b, double ab, double ba, double lat)
{
	struct mx_result r;

	memset(&r, 0, sizeof(r));
	r.p = (struct mx_pair){a, b};
	r.ok = 7;
	r.f.bw[0] = ab;
	r.f.bw[1] = ba;
	r.f.lat_med = lat;
	r.f.lat_p99 = lat * 2;
	return r;
}

static void flag_rule(void **state)
{
	struct mx_result r[4] = {res(0, 1, 10, 10, 5), res(0, 2, 8.9, 10, 5),
				 res(1, 2, 10, 9.1, 10.5), res(0, 3, 0, 0, 1)};
	struct mx_refs refs;
	struct mx_figures again;

	(void)state;
	r[3].ok = 0; /* failed: out of the references, never flagged */
	assert_int_equal(mx_flag_all(r, 4, 0.9, 2.0, &refs), 0);
	assert_int_equal(refs.n_bw, 6);
	assert_true(refs.bw_median == 10.0);
	assert_true(refs.lat_min == 5.0);
	assert_int_equal(r[0].flags, 0);
	assert_int_equal(r[1].flags, MX_FLAG_BW_AB); /* 8.9 < 0.9 x 10 */
	assert_int_equal(r[2].flags, MX_FLAG_LAT);   /* 9.1 is not; 10.5 > 2 x 5 */
	assert_int_equal(r[3].flags, 0);

	/* Retested alone: fine now means contention, still slow means the link. */
	again = r[1].f;
	again.bw[0] = 9.8;
	assert_int_equal(mx_verdict_of(&r[1], &again, 7, &refs, 0.9, 2.0), MX_VERDICT_CONTENTION);
	again.bw[0] = 5;
	assert_int_equal(mx_verdict_of(&r[1], &again, 7, &refs, 0.9, 2.0), MX_VERDICT_SLOW);
	assert_int_equal(mx_verdict_of(&r[1], &again, 6, &refs, 0.9, 2.0), MX_VERDICT_FAILED);
	/* A retest runs the flagged legs only: bandwidth a->b here, enough for the verdict. */
	assert_int_equal(mx_flag_legs(r[1].flags), 1u << MX_BW_AB);
	assert_int_equal(mx_flag_legs(r[2].flags), 1u << MX_LAT);
	assert_int_equal(mx_flag_legs(MX_FLAG_BW_AB | MX_FLAG_BW_BA | MX_FLAG_LAT), MX_ALL_LEGS);
	assert_int_equal(mx_verdict_of(&r[1], &again, 1u << MX_BW_AB, &refs, 0.9, 2.0),
			 MX_VERDICT_SLOW);
	/* Settable: at 0.8 and 3x nothing is flagged. */
	assert_int_equal(mx_flag_all(r, 4, 0.8, 3.0, &refs), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(r[i].flags, 0);
	/* Nothing measured: no references, no flags. */
	assert_int_equal(mx_flag_all(r + 3, 1, 0.9, 2.0, &refs), 0);
	assert_int_equal(refs.n_bw + refs.n_lat, 0);
}

static struct mx_side_report side(double ab, double ba, double med)
{
	struct mx_side_report s;

	memset(&s, 0, sizeof(s));
	s.leg[MX_BW_AB].v[0] = ab;
	s.leg[MX_BW_BA].v[0] = ba;
	s.leg[MX_LAT].v[0] = med;
	s.leg[MX_LAT].v[1] = med * 3;
	return s;
}

static void merge_partial(void **state)
{
	struct mx_pair p = {2, 5};
	struct mx_side_report a = side(1.0, 2.5, 30), b = side(1.0, 2.5, 30);
	struct mx_result r;

	(void)state;
	/* Both sides agree: every leg counts, taken from the side that led it. */
	assert_int_equal(mx_merge(&r, &p, &a, &b), 0);
	assert_int_equal(r.ok, 7);
	assert_int_equal(r.err, 0);
	assert_null(r.why);
	assert_true(r.f.bw[0] == 1.0 && r.f.bw[1] == 2.5 && r.f.lat_med == 30 && r.f.lat_p99 == 90);
	mx_results_free(&r, 1);
	/* ... within the JSON text's rounding. */
	b.leg[MX_BW_AB].v[0] = 1.0 + 1e-12;
	assert_int_equal(mx_merge(&r, &p, &a, &b), 0);
	assert_int_equal(r.ok, 7);
	mx_results_free(&r, 1);

	/* b died: nothing a alone says counts, the pair says b did not report. */
	assert_int_equal(mx_merge(&r, &p, &a, NULL), 0);
	assert_int_equal(r.ok, 0);
	assert_int_equal(r.err, -ECONNRESET);
	assert_string_equal(r.why, "rank 5 did not report (it died or was lost)");
	mx_results_free(&r, 1);

	/* A failure on either side stays a failure, whatever the other claims. */
	b.leg[MX_BW_AB].status = -ECONNRESET;
	b.leg[MX_BW_AB].why = "peer failed: connection reset";
	assert_int_equal(mx_merge(&r, &p, &a, &b), 0);
	assert_int_equal(r.ok, (1u << MX_BW_BA) | (1u << MX_LAT));
	assert_int_equal(r.err, -ECONNRESET);
	assert_string_equal(r.why, "peer failed: connection reset");
	mx_results_free(&r, 1);
	b.leg[MX_BW_AB].status = -EIO;
	b.leg[MX_BW_AB].why = NULL;
	assert_int_equal(mx_merge(&r, &p, &a, &b), 0);
	assert_string_equal(r.why, "bandwidth a->b failed on rank 5");
	mx_results_free(&r, 1);
	b.leg[MX_BW_AB].status = 0;

	/* A leg failed on both: the leading side's words. */
	a.leg[MX_LAT].status = -ECONNREFUSED;
	a.leg[MX_LAT].why = "nobody accepted a connection";
	b.leg[MX_LAT].status = -ETIMEDOUT;
	b.leg[MX_LAT].why = "watchdog";
	assert_int_equal(mx_merge(&r, &p, &a, &b), 0);
	assert_int_equal(r.ok, (1u << MX_BW_AB) | (1u << MX_BW_BA));
	assert_true(r.f.bw[1] == 2.5);
	assert_int_equal(r.err, -ECONNREFUSED);
	assert_string_equal(r.why, "nobody accepted a connection");
	mx_results_free(&r, 1);

	/* Neither side: nothing measured. */
	assert_int_equal(mx_merge(&r, &p, NULL, NULL), 0);
	assert_int_equal(r.ok, 0);
	assert_string_equal(r.why, "rank 2 did not report (it died or was lost)");
	mx_results_free(&r, 1);
}

/* One side's forged figures (a stranger's, or a lying rank's) are no measurement. */
static void merge_disagree(void **state)
{
	struct mx_pair p = {0, 1};
	struct mx_side_report a = side(1.0, 2.0, 30), b = side(999999.0, 2.0, 30);
	struct mx_result r;

	(void)state;
	assert_int_equal(mx_merge(&r, &p, &a, &b), 0);
	assert_int_equal(r.ok, (1u << MX_BW_BA) | (1u << MX_LAT));
	assert_true(r.f.bw[0] == 0);
	assert_int_equal(r.err, -EPROTO);
	assert_string_equal(r.why, "bandwidth a->b: rank 0 and rank 1 report different figures "
				   "(1, 999999)");
	mx_results_free(&r, 1);
	/* The other direction names a's figure first too; p99 counts as well. */
	b = side(1.0, 3.0, 30);
	b.leg[MX_LAT].v[1] = 1;
	assert_int_equal(mx_merge(&r, &p, &a, &b), 0);
	assert_int_equal(r.ok, 1u << MX_BW_AB);
	assert_string_equal(r.why, "bandwidth b->a: rank 0 and rank 1 report different figures "
				   "(2, 3)");
	mx_results_free(&r, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(sched_1_to_64),   cmocka_unit_test(sched_2048),
	    cmocka_unit_test(quick_one_round), cmocka_unit_test(intra_skipped),
	    cmocka_unit_test(pairs_file),      cmocka_unit_test(flag_rule),
	    cmocka_unit_test(merge_partial),   cmocka_unit_test(merge_disagree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
