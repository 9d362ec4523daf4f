/*
 * matrix_sched.h - rk matrix's pure part: which pairs are measured in which
 * round, which results are flagged, and how the two sides' reports of a pair
 * are merged into one result. No I/O, no verbs: unit-tested on its own
 * (tests/bench/test_matrix_sched.c).
 *
 * Schedule. A round-robin tournament (the circle method): for n ranks,
 * n - 1 rounds of n / 2 disjoint pairs (n odd: n rounds, one rank sits out
 * each); every unordered pair {a, b} is in exactly one round and no rank is
 * in two pairs of a round, so the pairs of a round run at once with no
 * host in two tests. A subset (--pairs, same-host pairs skipped) keeps the
 * same rounds with the other pairs taken out, and drops rounds left empty;
 * --quick keeps the first round only.
 *
 * Flagging. A direction whose bandwidth is below bw_frac x the median of
 * every measured direction, or a pair whose median latency is above
 * lat_mult x the least median latency, is flagged. A flagged pair is
 * retested alone: still flagged against the same references, it is a slow
 * link; no longer flagged, the first figure was contention.
 */
#ifndef RK_MATRIX_SCHED_H
#define RK_MATRIX_SCHED_H

#include <stddef.h>
#include <stdint.h>

/* The largest matrix: rank numbers, ports and rank 0's memory stay bounded. */
#define MX_MAX_RANKS 4096u

struct mx_pair {
	uint32_t a, b; /* ranks, a < b */
};

struct mx_sched {
	uint32_t n;	       /* ranks */
	uint32_t nrounds;      /* rounds kept */
	uint32_t npairs;       /* pairs kept, over all rounds */
	uint32_t *round_at;    /* nrounds + 1 offsets into pairs */
	struct mx_pair *pairs; /* round by round */
};

/*
 * mx_pair_set - which unordered pairs to measure: one bit per {a, b} with
 * a < b, n (n - 1) / 2 bits (256 KiB at n = 2,048). Owned by the caller.
 */
struct mx_pair_set {
	uint32_t n;
	uint64_t *bits;
};

/* mx_set_init - a set of @n ranks, all pairs in it (@all) or none. 0 or -ENOMEM/-EINVAL. */
int mx_set_init(struct mx_pair_set *s, uint32_t n, int all);
void mx_set_free(struct mx_pair_set *s);
int mx_set_has(const struct mx_pair_set *s, uint32_t a, uint32_t b);
void mx_set_put(struct mx_pair_set *s, uint32_t a, uint32_t b, int on);

/*
 * mx_set_parse_pairs - the text of a --pairs file into @s (which must be
 * empty and of the matrix's n): one pair per line, "A B" (rank numbers,
 * blanks or a comma between), '#' starts a comment, blank lines are
 * ignored, a pair given twice (either order) counts once. Returns 0, or -1
 * with "line N: why" in @why. Costs one pass over @text.
 */
int mx_set_parse_pairs(struct mx_pair_set *s, const char *text, char *why, size_t why_len);

/*
 * mx_set_drop_intra - take out every pair whose two ranks have the same
 * host id (@host[rank], an index into the host names, one per rank).
 */
void mx_set_drop_intra(struct mx_pair_set *s, const uint32_t *host);

/*
 * mx_sched_build - the rounds of the pairs in @set; @quick keeps the first
 * round that is not empty. O(n^2) time, memory for the pairs kept. Returns
 * 0 or -ENOMEM; free with mx_sched_free.
 */
int mx_sched_build(struct mx_sched *s, const struct mx_pair_set *set, int quick);
void mx_sched_free(struct mx_sched *s);

/* The three measurements of a pair {a, b}, in the order they run. */
enum mx_leg {
	MX_BW_AB = 0, /* bandwidth a -> b: a is the client (it writes), b serves */
	MX_BW_BA,     /* bandwidth b -> a */
	MX_LAT,	      /* 64 B latency: a is the client */
	MX_LEGS,
};
#define MX_ALL_LEGS ((1u << MX_LEGS) - 1) /* a leg mask: all three */

/* One side's report of one leg, as it came from that rank. */
struct mx_leg_report {
	int status;	 /* 0, or a negative errno */
	double v[2];	 /* bw: Gb/s, 0; lat: median and p99 in us */
	const char *why; /* status != 0: the error text (not owned) */
};

/* A side's report of a pair; NULL in mx_merge when the rank never sent it. */
struct mx_side_report {
	struct mx_leg_report leg[MX_LEGS];
};

enum mx_flag {
	MX_FLAG_BW_AB = 1u << 0,
	MX_FLAG_BW_BA = 1u << 1,
	MX_FLAG_LAT = 1u << 2,
};

enum mx_verdict {
	MX_VERDICT_NONE = 0,   /* not flagged, or not retested */
	MX_VERDICT_SLOW,       /* still flagged when measured alone: the link */
	MX_VERDICT_CONTENTION, /* fine alone: other pairs of the round got in its way */
	MX_VERDICT_FAILED,     /* the retest itself failed */
};

struct mx_figures {
	double bw[2];		 /* Gb/s, a -> b and b -> a */
	double lat_med, lat_p99; /* us */
};

struct mx_result {
	struct mx_pair p;
	uint32_t round;	    /* where the schedule put it */
	uint32_t ok;	    /* a bit per leg measured (1u << enum mx_leg) */
	int err;	    /* first failure, negative errno; 0 when every leg is ok */
	uint32_t flags;	    /* enum mx_flag, after mx_flag_all */
	uint32_t verdict;   /* enum mx_verdict, after the retest */
	uint32_t retest_ok; /* the legs the retest measured */
	char *why;	    /* the first failure's text, owned (malloc), NULL when err == 0 */
	struct mx_figures f;
	struct mx_figures retest;
};

/*
 * mx_merge - one result from the two sides' reports of pair @p (either may
 * be NULL: the rank died or never answered). A leg counts only when both
 * sides measured it and report the same figures (both compute them from
 * the records they exchanged; what one side alone claims is no
 * measurement): then it is taken from the side that led it (the client: a
 * for MX_BW_AB and MX_LAT, b for MX_BW_BA). Otherwise the leg failed, and
 * the pair's err / why say so: "rank N did not report" for a missing side,
 * else the failing side's words (the leading side's first), else -EPROTO
 * "... report different figures". Returns 0 or -ENOMEM.
 */
int mx_merge(struct mx_result *r, const struct mx_pair *p, const struct mx_side_report *ra,
	     const struct mx_side_report *rb);

/* mx_result_free - the error text of @n results. */
void mx_results_free(struct mx_result *r, size_t n);

/* The references the flags compare against. */
struct mx_refs {
	double bw_median; /* Gb/s over every measured direction; 0: none */
	double lat_min;	  /* us, least median latency; 0: none */
	uint32_t n_bw, n_lat;
};

/*
 * mx_flag_all - the references over @n results and each one's flags.
 * Failed legs are left out of the references and never flagged. O(n log n)
 * time, one array of 2n doubles.
 */
int mx_flag_all(struct mx_result *r, size_t n, double bw_frac, double lat_mult,
		struct mx_refs *refs);

/* mx_flags_of - the flags figures @f (legs @ok) earn against @refs. */
uint32_t mx_flags_of(const struct mx_figures *f, uint32_t ok, const struct mx_refs *refs,
		     double bw_frac, double lat_mult);

/*
 * mx_flag_legs - the legs (bits 1 << MX_BW_AB, ...) that @flags name:
 * what a retest runs again (the others are not what made the pair suspect).
 */
uint32_t mx_flag_legs(uint32_t flags);

/*
 * mx_verdict_of - a flagged result after its retest alone (@f, legs
 * @ok): slow link when the retest is flagged for any of the same reasons
 * against the same references, contention otherwise; failed when a leg
 * that was flagged could not be measured again.
 */
uint32_t mx_verdict_of(const struct mx_result *r, const struct mx_figures *f, uint32_t ok,
		       const struct mx_refs *refs, double bw_frac, double lat_mult);

#endif
