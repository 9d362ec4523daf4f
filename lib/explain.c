/*
 * explain.c - finding entries of the explain table: by (kind, code, call)
 * for the hints in rk_error, and by whatever a user types for rk explain.
 *
 * The library's own texts (ibv_wc_status_str, rdma_event_str, strerror) are
 * asked for at run time rather than stored, so the table cannot drift from
 * the installed rdma-core.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "explain_table.h"
#include "rk_internal.h"

#define WHAT_MAX 96 /* longer input is cut: no name or text is that long */

size_t rk_explain_count(void)
{
	return rk__explain_table_len;
}

const struct rk_explain *rk_explain_at(size_t i)
{
	return i < rk__explain_table_len ? &rk__explain_table[i] : NULL;
}

static int has_ops(const struct rk_explain *e)
{
	return e->ops[0] != NULL;
}

static int op_matches(const struct rk_explain *e, const char *op)
{
	for (size_t i = 0; i < RK_EXPLAIN_OPS_MAX && e->ops[i]; i++)
		if (strncmp(op, e->ops[i], strlen(e->ops[i])) == 0)
			return 1;
	return 0;
}

const struct rk_explain *rk_explain_find(enum rk_explain_kind kind, int code, const char *op)
{
	const struct rk_explain *any = NULL;

	if (kind == RK_EXPLAIN_ERRNO && code < 0)
		code = -code;
	for (size_t i = 0; i < rk__explain_table_len; i++) {
		const struct rk_explain *e = &rk__explain_table[i];

		if (e->kind != kind || e->code != code)
			continue;
		if (!has_ops(e)) {
			if (!any)
				any = e;
			continue;
		}
		if (op && op_matches(e, op))
			return e;
	}
	return any;
}

const char *rk_explain_text(const struct rk_explain *e)
{
	const char *s = NULL;

	switch (e->kind) {
	case RK_EXPLAIN_WC_STATUS:
		s = ibv_wc_status_str((enum ibv_wc_status)e->code);
		break;
	case RK_EXPLAIN_CM_EVENT:
		s = rdma_event_str((enum rdma_cm_event_type)e->code);
		break;
	case RK_EXPLAIN_ERRNO:
		s = strerror(e->code);
		break;
	case RK_EXPLAIN_CM_REJECT:
		s = e->text;
		break;
	}
	return s ? s : "";
}

const char *rk_explain_kind_str(enum rk_explain_kind kind)
{
	switch (kind) {
	case RK_EXPLAIN_WC_STATUS:
		return "completion status";
	case RK_EXPLAIN_ERRNO:
		return "errno";
	case RK_EXPLAIN_CM_EVENT:
		return "rdma_cm event";
	case RK_EXPLAIN_CM_REJECT:
		return "CM reject reason";
	}
	return "?";
}

/* Lower-case @in into @out, trimmed, runs of blanks as one space. */
static void normalize(const char *in, char *out, size_t len)
{
	size_t n = 0;
	int blank = 0;

	while (*in && isspace((unsigned char)*in))
		in++;
	for (; *in && n + 1 < len; in++) {
		unsigned char ch = (unsigned char)*in;

		if (isspace(ch)) {
			blank = 1;
			continue;
		}
		if (blank && n + 2 < len)
			out[n++] = ' ';
		blank = 0;
		out[n++] = (char)tolower(ch);
	}
	out[n] = '\0';
}

/* A kind word ("errno", "event", "reject", ...) or -1. */
static int kind_word(const char *w, size_t len)
{
	static const struct {
		const char *word;
		int kind;
	} words[] = {
	    {"wc", RK_EXPLAIN_WC_STATUS},	  {"status", RK_EXPLAIN_WC_STATUS},
	    {"completion", RK_EXPLAIN_WC_STATUS}, {"errno", RK_EXPLAIN_ERRNO},
	    {"event", RK_EXPLAIN_CM_EVENT},	  {"cm", RK_EXPLAIN_CM_EVENT},
	    {"rdma_cm", RK_EXPLAIN_CM_EVENT},	  {"reject", RK_EXPLAIN_CM_REJECT},
	    {"rejected", RK_EXPLAIN_CM_REJECT},	  {"reason", RK_EXPLAIN_CM_REJECT},
	};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strlen(words[i].word) == len && strncmp(words[i].word, w, len) == 0)
			return words[i].kind;
	return -1;
}

static int parse_code(const char *s, int *code)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)*s))
		return -1;
	v = strtol(s, &end, 10);
	if (*end || v > 0xffff)
		return -1;
	*code = (int)v;
	return 0;
}

struct hits {
	const struct rk_explain **out;
	size_t max, n;
};

static void add(struct hits *h, const struct rk_explain *e)
{
	for (size_t i = 0; i < h->n && i < h->max; i++)
		if (h->out[i] == e)
			return;
	if (h->n < h->max)
		h->out[h->n] = e;
	h->n++;
}

static int eq(const char *a, const char *b)
{
	return a && strcasecmp(a, b) == 0;
}

static int contains(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	if (!hay)
		return 0;
	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return 1;
	return 0;
}

/* "ENOMEM reg_mr" / "reg_mr ENOMEM": errno name @err, call @op. */
static void errno_and_call(struct hits *h, const char *err, const char *op)
{
	size_t before = h->n;

	for (size_t i = 0; i < rk__explain_table_len; i++) {
		const struct rk_explain *e = &rk__explain_table[i];

		if (e->kind != RK_EXPLAIN_ERRNO || !eq(e->name, err))
			continue;
		for (size_t k = 0; k < RK_EXPLAIN_OPS_MAX && e->ops[k]; k++)
			if (contains(e->ops[k], op) ||
			    strncasecmp(op, e->ops[k], strlen(e->ops[k])) == 0)
				add(h, e);
	}
	if (h->n > before)
		return;
	/* no entry about that call: the one for any call, else all of them */
	for (int pass = 0; pass < 2 && h->n == before; pass++)
		for (size_t i = 0; i < rk__explain_table_len; i++) {
			const struct rk_explain *e = &rk__explain_table[i];

			if (e->kind == RK_EXPLAIN_ERRNO && eq(e->name, err) &&
			    (pass == 1 || !has_ops(e)))
				add(h, e);
		}
}

size_t rk_explain_lookup(const char *what, const struct rk_explain **out, size_t max)
{
	struct hits h = {.out = out, .max = max, .n = 0};
	char buf[WHAT_MAX] = "";
	const char *rest = buf, *sp;
	int kind = -1, code;

	if (!what)
		return 0;
	normalize(what, buf, sizeof(buf));
	if (!buf[0])
		return 0;
	sp = strchr(buf, ' ');
	if (sp && (kind = kind_word(buf, (size_t)(sp - buf))) >= 0)
		rest = sp + 1;

	/* "-12": the library's own negative errno return, so an errno */
	if (rest[0] == '-' && (kind < 0 || kind == RK_EXPLAIN_ERRNO) &&
	    parse_code(rest + 1, &code) == 0) {
		kind = RK_EXPLAIN_ERRNO;
		rest++;
	}
	if (parse_code(rest, &code) == 0) {
		if (kind < 0)
			kind = RK_EXPLAIN_WC_STATUS;
		for (size_t i = 0; i < rk__explain_table_len; i++)
			if ((int)rk__explain_table[i].kind == kind &&
			    rk__explain_table[i].code == code)
				add(&h, &rk__explain_table[i]);
		return h.n;
	}

	for (size_t i = 0; i < rk__explain_table_len; i++) {
		const struct rk_explain *e = &rk__explain_table[i];

		if (kind >= 0 && (int)e->kind != kind)
			continue;
		if (eq(e->name, rest) || eq(e->alias, rest) || eq(rk_explain_text(e), rest))
			add(&h, e);
	}
	if (h.n)
		return h.n;

	sp = strchr(rest, ' ');
	if (sp && !strchr(sp + 1, ' ')) {
		char first[WHAT_MAX];

		snprintf(first, sizeof(first), "%.*s", (int)(sp - rest), rest);
		errno_and_call(&h, first, sp + 1);
		if (!h.n)
			errno_and_call(&h, sp + 1, first);
		if (h.n)
			return h.n;
	}

	if (strlen(rest) < 3)
		return 0;
	for (size_t i = 0; i < rk__explain_table_len; i++) {
		const struct rk_explain *e = &rk__explain_table[i];

		if (kind >= 0 && (int)e->kind != kind)
			continue;
		if (contains(e->name, rest) || contains(rk_explain_text(e), rest))
			add(&h, e);
	}
	return h.n;
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Levenshtein distance of two short lower-case strings (cut at WHAT_MAX). */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), prev[WHAT_MAX + 1], cur[WHAT_MAX + 1];

	if (la > WHAT_MAX)
		la = WHAT_MAX;
	if (lb > WHAT_MAX)
		lb = WHAT_MAX;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (lower(a[i - 1]) != lower(b[j - 1]));
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
			size_t m = sub < del ? sub : del;

			cur[j] = m < ins ? m : ins;
		}
		memcpy(prev, cur, (lb + 1) * sizeof(prev[0]));
	}
	return prev[lb];
}

size_t rk_explain_suggest(const char *what, const char **out, size_t max)
{
	size_t dist[16], n = 0;
	char buf[WHAT_MAX] = "";

	if (!what || !max)
		return 0;
	if (max > sizeof(dist) / sizeof(dist[0]))
		max = sizeof(dist) / sizeof(dist[0]);
	normalize(what, buf, sizeof(buf));
	for (size_t i = 0; i < rk__explain_table_len; i++) {
		const struct rk_explain *e = &rk__explain_table[i];
		const char *shown = e->alias ? e->alias : e->name;
		size_t d = distance(buf, e->name), at;
		int dup = 0;

		if (e->alias && distance(buf, e->alias) < d)
			d = distance(buf, e->alias);
		for (size_t j = 0; j < n; j++)
			dup |= strcmp(out[j], shown) == 0;
		if (dup || (n == max && d >= dist[n - 1]))
			continue;
		/* insertion into the sorted list, dropping the farthest when full */
		at = n < max ? n++ : max - 1;
		while (at > 0 && dist[at - 1] > d) {
			out[at] = out[at - 1];
			dist[at] = dist[at - 1];
			at--;
		}
		out[at] = shown;
		dist[at] = d;
	}
	return n;
}
