/* matrix_sched.c - schedule, flags and merge of rk matrix; see matrix_sched.h. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matrix_sched.h"

static uint64_t pair_index(uint32_t n, uint32_t a, uint32_t b)
{
	if (a > b) {
		uint32_t t = a;

		a = b;
		b = t;
	}
	return (uint64_t)a * (2ull * n - a - 1) / 2 + (b - a - 1);
}

int mx_set_init(struct mx_pair_set *s, uint32_t n, int all)
{
	uint64_t bits = (uint64_t)n * (n ? n - 1 : 0) / 2;
	size_t words = (size_t)(bits / 64 + 1);

	s->n = n;
	s->bits = NULL;
	if (n > MX_MAX_RANKS)
		return -EINVAL;
	s->bits = calloc(words, sizeof(*s->bits));
	if (!s->bits)
		return -ENOMEM;
	if (all)
		for (uint64_t i = 0; i < bits; i++)
			s->bits[i / 64] |= 1ull << (i % 64);
	return 0;
}

void mx_set_free(struct mx_pair_set *s)
{
	free(s->bits);
	s->bits = NULL;
}

int mx_set_has(const struct mx_pair_set *s, uint32_t a, uint32_t b)
{
	uint64_t i;

	if (a == b || a >= s->n || b >= s->n)
		return 0;
	i = pair_index(s->n, a, b);
	return (int)((s->bits[i / 64] >> (i % 64)) & 1);
}

void mx_set_put(struct mx_pair_set *s, uint32_t a, uint32_t b, int on)
{
	uint64_t i;

	if (a == b || a >= s->n || b >= s->n)
		return;
	i = pair_index(s->n, a, b);
	if (on)
		s->bits[i / 64] |= 1ull << (i % 64);
	else
		s->bits[i / 64] &= ~(1ull << (i % 64));
}

/* A rank number at *@pp, below @n; advances *@pp. */
static int parse_rank(const char **pp, uint32_t n, uint32_t *out)
{
	const char *p = *pp;
	unsigned long v = 0;

	if (!isdigit((unsigned char)*p))
		return -1;
	while (isdigit((unsigned char)*p)) {
		v = v * 10 + (unsigned long)(*p - '0');
		if (v >= n)
			return -2;
		p++;
	}
	*pp = p;
	*out = (uint32_t)v;
	return 0;
}

static const char *skip_blank(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

int mx_set_parse_pairs(struct mx_pair_set *s, const char *text, char *why, size_t why_len)
{
	unsigned line = 1;

	for (const char *p = text; *p; line++) {
		uint32_t a, b;
		int r;

		p = skip_blank(p);
		if (*p == '#')
			while (*p && *p != '\n')
				p++;
		if (*p == '\n' || !*p) {
			if (*p)
				p++;
			continue;
		}
		r = parse_rank(&p, s->n, &a);
		if (!r) {
			p = skip_blank(p);
			if (*p == ',')
				p = skip_blank(p + 1);
			r = parse_rank(&p, s->n, &b);
		}
		if (r) {
			snprintf(why, why_len, "line %u: %s", line,
				 r == -2 ? "a rank beyond the matrix's size"
					 : "expected two rank numbers, \"A B\"");
			return -1;
		}
		p = skip_blank(p);
		if (*p == '#')
			while (*p && *p != '\n')
				p++;
		if (*p && *p != '\n') {
			snprintf(why, why_len, "line %u: more than two ranks", line);
			return -1;
		}
		if (a == b) {
			snprintf(why, why_len, "line %u: a rank paired with itself", line);
			return -1;
		}
		mx_set_put(s, a, b, 1);
		if (*p)
			p++;
	}
	return 0;
}

void mx_set_drop_intra(struct mx_pair_set *s, const uint32_t *host)
{
	for (uint32_t a = 0; a < s->n; a++)
		for (uint32_t b = a + 1; b < s->n; b++)
			if (host[a] == host[b])
				mx_set_put(s, a, b, 0);
}

void mx_sched_free(struct mx_sched *s)
{
	free(s->round_at);
	free(s->pairs);
	memset(s, 0, sizeof(*s));
}

/* Pair k of round r of the circle method over m (even) places. */
static struct mx_pair circle(uint32_t m, uint32_t r, uint32_t k)
{
	uint32_t x, y;

	if (k == 0) {
		x = r;
		y = m - 1;
	} else {
		x = (r + k) % (m - 1);
		y = (r + (m - 1) - k) % (m - 1);
	}
	return x < y ? (struct mx_pair){x, y} : (struct mx_pair){y, x};
}

int mx_sched_build(struct mx_sched *s, const struct mx_pair_set *set, int quick)
{
	uint32_t n = set->n, m = n + (n & 1);
	uint64_t total = 0;

	memset(s, 0, sizeof(*s));
	s->n = n;
	for (uint32_t a = 0; a < n; a++)
		for (uint32_t b = a + 1; b < n; b++)
			total += (uint64_t)mx_set_has(set, a, b);
	s->round_at = calloc((size_t)(m ? m : 1), sizeof(*s->round_at));
	s->pairs = malloc((size_t)(total ? total : 1) * sizeof(*s->pairs));
	if (!s->round_at || !s->pairs) {
		mx_sched_free(s);
		return -ENOMEM;
	}
	for (uint32_t r = 0; m >= 2 && r < m - 1; r++) {
		uint32_t before = s->npairs;

		for (uint32_t k = 0; k < m / 2; k++) {
			struct mx_pair p = circle(m, r, k);

			if (p.b < n && mx_set_has(set, p.a, p.b))
				s->pairs[s->npairs++] = p;
		}
		if (s->npairs == before)
			continue;
		s->round_at[s->nrounds++] = before;
		if (quick)
			break;
	}
	s->round_at[s->nrounds] = s->npairs;
	return 0;
}

/* ------------------------------------------------------------ merge, flags */

/* The first failure of a pair is the one it reports. */
static int set_why(struct mx_result *r, int err, const char *text)
{
	if (r->err)
		return 0;
	r->err = err ? err : -EIO;
	r->why = strdup(text);
	return r->why ? 0 : -ENOMEM;
}

/*
 * Both sides compute a leg's figures from the same exchanged records
 * (bench_figures), so an honest pair reports the same numbers; the
 * tolerance only absorbs the JSON text's rounding.
 */
static int same_figure(double x, double y)
{
	double d = x > y ? x - y : y - x, m = x > y ? x : y;

	return d <= 1e-9 + 1e-6 * m;
}

static int same_leg(const struct mx_leg_report *x, const struct mx_leg_report *y)
{
	return same_figure(x->v[0], y->v[0]) && same_figure(x->v[1], y->v[1]);
}

/* Leg @leg neither counts: why, from the side that failed (the leading one first). */
static int leg_failed(struct mx_result *r, const struct mx_pair *p, int leg,
		      const struct mx_side_report *lead, const struct mx_side_report *other,
		      uint32_t lead_rank, uint32_t other_rank)
{
	static const char *leg_name[MX_LEGS] = {"bandwidth a->b", "bandwidth b->a", "latency"};
	const struct mx_leg_report *l = lead ? &lead->leg[leg] : NULL;
	const struct mx_leg_report *o = other ? &other->leg[leg] : NULL;
	char text[200];

	if (!lead || !other) {
		snprintf(text, sizeof(text), "rank %u did not report (it died or was lost)",
			 !lead ? lead_rank : other_rank);
		return set_why(r, -ECONNRESET, text);
	}
	if (l->status || o->status) {
		const struct mx_leg_report *f = l->status ? l : o;

		if (f->why)
			return set_why(r, f->status, f->why);
		snprintf(text, sizeof(text), "%s failed on rank %u", leg_name[leg],
			 l->status ? lead_rank : other_rank);
		return set_why(r, f->status, text);
	}
	snprintf(text, sizeof(text), "%s: rank %u and rank %u report different figures (%g, %g)",
		 leg_name[leg], p->a, p->b, leg == MX_BW_BA ? o->v[0] : l->v[0],
		 leg == MX_BW_BA ? l->v[0] : o->v[0]);
	return set_why(r, -EPROTO, text);
}

int mx_merge(struct mx_result *r, const struct mx_pair *p, const struct mx_side_report *ra,
	     const struct mx_side_report *rb)
{
	memset(r, 0, sizeof(*r));
	r->p = *p;
	for (int leg = 0; leg < MX_LEGS; leg++) {
		int a_leads = leg != MX_BW_BA;
		const struct mx_side_report *lead = a_leads ? ra : rb, *other = a_leads ? rb : ra;
		int rc;

		if (lead && other && !lead->leg[leg].status && !other->leg[leg].status &&
		    same_leg(&lead->leg[leg], &other->leg[leg])) {
			const struct mx_leg_report *got = &lead->leg[leg];

			r->ok |= 1u << leg;
			if (leg == MX_LAT) {
				r->f.lat_med = got->v[0];
				r->f.lat_p99 = got->v[1];
			} else {
				r->f.bw[leg] = got->v[0];
			}
			continue;
		}
		rc = leg_failed(r, p, leg, lead, other, a_leads ? p->a : p->b,
				a_leads ? p->b : p->a);
		if (rc)
			return rc;
	}
	return 0;
}

void mx_results_free(struct mx_result *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(r[i].why);
		r[i].why = NULL;
	}
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

uint32_t mx_flags_of(const struct mx_figures *f, uint32_t ok, const struct mx_refs *refs,
		     double bw_frac, double lat_mult)
{
	uint32_t flags = 0;

	for (int d = 0; d < 2; d++)
		if ((ok & (1u << d)) && refs->n_bw && f->bw[d] < bw_frac * refs->bw_median)
			flags |= d ? MX_FLAG_BW_BA : MX_FLAG_BW_AB;
	if ((ok & (1u << MX_LAT)) && refs->n_lat && f->lat_med > lat_mult * refs->lat_min)
		flags |= MX_FLAG_LAT;
	return flags;
}

int mx_flag_all(struct mx_result *r, size_t n, double bw_frac, double lat_mult,
		struct mx_refs *refs)
{
	double *bw = malloc((n ? n : 1) * 2 * sizeof(*bw));
	size_t k = 0;

	memset(refs, 0, sizeof(*refs));
	if (!bw)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		for (int d = 0; d < 2; d++)
			if (r[i].ok & (1u << d))
				bw[k++] = r[i].f.bw[d];
		if ((r[i].ok & (1u << MX_LAT)) &&
		    (!refs->n_lat++ || r[i].f.lat_med < refs->lat_min))
			refs->lat_min = r[i].f.lat_med;
	}
	if (k) {
		qsort(bw, k, sizeof(*bw), cmp_double);
		refs->bw_median = k % 2 ? bw[k / 2] : (bw[k / 2 - 1] + bw[k / 2]) / 2;
	}
	refs->n_bw = (uint32_t)k;
	free(bw);
	for (size_t i = 0; i < n; i++)
		r[i].flags = mx_flags_of(&r[i].f, r[i].ok, refs, bw_frac, lat_mult);
	return 0;
}

uint32_t mx_flag_legs(uint32_t flags)
{
	uint32_t legs = 0;

	if (flags & MX_FLAG_BW_AB)
		legs |= 1u << MX_BW_AB;
	if (flags & MX_FLAG_BW_BA)
		legs |= 1u << MX_BW_BA;
	if (flags & MX_FLAG_LAT)
		legs |= 1u << MX_LAT;
	return legs;
}

uint32_t mx_verdict_of(const struct mx_result *r, const struct mx_figures *f, uint32_t ok,
		       const struct mx_refs *refs, double bw_frac, double lat_mult)
{
	uint32_t need = mx_flag_legs(r->flags);

	if ((ok & need) != need)
		return MX_VERDICT_FAILED;
	return mx_flags_of(f, ok, refs, bw_frac, lat_mult) & r->flags ? MX_VERDICT_SLOW
								      : MX_VERDICT_CONTENTION;
}
