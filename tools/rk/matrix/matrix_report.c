/* matrix_report.c - the text matrix, the JSON document and the heatmap; see matrix_report.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <rdmakit/version.h>

#include "bench/bench.h"
#include "cli.h"
#include "common/gnuplot.h"
#include "matrix_report.h"

static const char *verdict_name(uint32_t v)
{
	switch (v) {
	case MX_VERDICT_SLOW:
		return "slow link";
	case MX_VERDICT_CONTENTION:
		return "contention";
	case MX_VERDICT_FAILED:
		return "retest failed";
	default:
		return "not retested";
	}
}

uint32_t mx_report_failures(const struct mx_matrix *m)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < m->sched.npairs; i++)
		n += m->res[i].ok != (1u << MX_LEGS) - 1;
	return n;
}

/* Bandwidth from @a to @b (NAN: not measured), and the result it is in. */
static double bw_of(const struct mx_result *r, uint32_t a)
{
	int d = a == r->p.a ? 0 : 1;

	return r->ok & (1u << d) ? r->f.bw[d] : NAN;
}

/* n x n indices of results (-1: not scheduled); NULL beyond @max ranks or out of memory. */
static int32_t *index_of(const struct mx_matrix *m, uint32_t max)
{
	int32_t *ix;

	if (m->n > max)
		return NULL;
	ix = malloc((size_t)m->n * m->n * sizeof(*ix));
	if (!ix)
		return NULL;
	for (size_t i = 0; i < (size_t)m->n * m->n; i++)
		ix[i] = -1;
	for (uint32_t i = 0; i < m->sched.npairs; i++) {
		const struct mx_pair *p = &m->res[i].p;

		ix[(size_t)p->a * m->n + p->b] = ix[(size_t)p->b * m->n + p->a] = (int32_t)i;
	}
	return ix;
}

static void print_matrix(const struct mx_matrix *m)
{
	int32_t *ix = index_of(m, MX_TEXT_MAX);

	if (!ix) {
		printf(" (%u ranks: the matrix is in the JSON document)\n", m->n);
		return;
	}
	printf(" Gb/s, from (rows) to (columns); '*' flagged, 'x' failed, '-' not measured\n");
	printf(" %6s", "from\\to");
	for (uint32_t b = 0; b < m->n; b++)
		printf(" %7u", b);
	printf("\n");
	for (uint32_t a = 0; a < m->n; a++) {
		printf(" %7u", a);
		for (uint32_t b = 0; b < m->n; b++) {
			int32_t i = ix[(size_t)a * m->n + b];
			const struct mx_result *r = i >= 0 ? &m->res[i] : NULL;
			double v = r ? bw_of(r, a) : NAN;
			uint32_t flag = r && a == r->p.a ? MX_FLAG_BW_AB : MX_FLAG_BW_BA;

			if (!r)
				printf(" %7s", "-");
			else if (isnan(v))
				printf(" %7s", "x");
			else
				printf(" %6.3f%c", v, r->flags & flag ? '*' : ' ');
		}
		printf("\n");
	}
	free(ix);
}

static void print_figures(const char *what, const struct mx_figures *f, uint32_t ok)
{
	printf("    %-8s", what);
	for (int d = 0; d < 2; d++)
		if (ok & (1u << d))
			printf(" %s %.3f Gb/s", d ? "b->a" : "a->b", f->bw[d]);
	if (ok & (1u << MX_LAT))
		printf("%s latency median %.2f us, p99 %.2f us", ok & 3u ? " |" : "", f->lat_med,
		       f->lat_p99);
	printf("\n");
}

void mx_report_text(const struct mx_matrix *m, const struct mx_opts *o)
{
	uint32_t flagged = 0, failed = mx_report_failures(m), absent = 0;

	printf("-----------------------------------------------------------------------------\n");
	printf(" rk matrix: %u ranks on %u hosts (%s), %u pairs in %u rounds, %.1f s\n", m->n,
	       m->nhosts, m->launcher, m->sched.npairs, m->sched.nrounds, (double)m->wall_ns / 1e9);
	printf(" bandwidth: WRITE %u B for %u s each way | latency: %u B %s for %u s | %s poll\n",
	       o->size, o->duration_s, MATRIX_LAT_SIZE,
	       o->poll == RK_WAIT_BUSY ? "WRITE" : "WRITE_IMM", o->lat_duration_s,
	       bench_poll_name(o->poll));
	printf(" flagged: bandwidth below %.2f x the median (%.3f Gb/s), latency above %.2f x the "
	       "least (%.2f us)\n",
	       o->bw_frac, m->refs.bw_median, o->lat_mult, m->refs.lat_min);
	printf("-----------------------------------------------------------------------------\n");
	print_matrix(m);
	for (uint32_t i = 0; i < m->sched.npairs; i++) {
		const struct mx_result *r = &m->res[i];
		const struct mx_rank *a = &m->ranks[r->p.a], *b = &m->ranks[r->p.b];

		if (!r->flags)
			continue;
		if (!flagged++)
			printf("\n flagged pairs (a = the first rank, b = the second):\n");
		printf("  %u (%s %s) - %u (%s %s):%s%s%s -> %s\n", r->p.a, a->host, a->dev, r->p.b,
		       b->host, b->dev, r->flags & MX_FLAG_BW_AB ? " bw a->b" : "",
		       r->flags & MX_FLAG_BW_BA ? " bw b->a" : "",
		       r->flags & MX_FLAG_LAT ? " latency" : "", verdict_name(r->verdict));
		print_figures("in round", &r->f, r->ok);
		if (r->verdict != MX_VERDICT_NONE)
			print_figures("alone", &r->retest, r->retest_ok);
	}
	if (failed)
		printf("\n failed pairs (what was measured is in the matrix):\n");
	for (uint32_t i = 0; i < m->sched.npairs; i++)
		if (m->res[i].why)
			printf("  %u - %u: %s\n", m->res[i].p.a, m->res[i].p.b, m->res[i].why);
	for (uint32_t i = 0; i < m->n; i++)
		if (m->ranks[i].why) {
			if (!absent++)
				printf("\n ranks missing or lost:\n");
			printf("  rank %u%s%s: %s\n", i, m->ranks[i].host[0] ? " on " : "",
			       m->ranks[i].host, m->ranks[i].why);
		}
	printf("\n %u pairs measured, %u flagged, %u failed\n", m->sched.npairs - failed, flagged,
	       failed);
	fflush(stdout);
}

/* ------------------------------------------------------------------ JSON */

static void add_num(json_object *o, const char *k, double v)
{
	json_object_object_add(o, k, isfinite(v) ? json_object_new_double(v) : NULL);
}

static json_object *figures_json(const struct mx_figures *f, uint32_t ok)
{
	json_object *o = json_object_new_object();

	add_num(o, "bw_ab_gbps", ok & (1u << MX_BW_AB) ? f->bw[0] : NAN);
	add_num(o, "bw_ba_gbps", ok & (1u << MX_BW_BA) ? f->bw[1] : NAN);
	add_num(o, "lat_median_us", ok & (1u << MX_LAT) ? f->lat_med : NAN);
	add_num(o, "lat_p99_us", ok & (1u << MX_LAT) ? f->lat_p99 : NAN);
	return o;
}

static json_object *pair_json(const struct mx_matrix *m, const struct mx_result *r)
{
	json_object *o = json_object_new_object(), *fl = json_object_new_array();

	json_object_object_add(o, "a", json_object_new_int64(r->p.a));
	json_object_object_add(o, "b", json_object_new_int64(r->p.b));
	json_object_object_add(o, "host_a", json_object_new_string(m->ranks[r->p.a].host));
	json_object_object_add(o, "host_b", json_object_new_string(m->ranks[r->p.b].host));
	json_object_object_add(o, "dev_a", json_object_new_string(m->ranks[r->p.a].dev));
	json_object_object_add(o, "dev_b", json_object_new_string(m->ranks[r->p.b].dev));
	json_object_object_add(o, "round", json_object_new_int64(r->round));
	json_object_object_add(o, "measured", figures_json(&r->f, r->ok));
	json_object_object_add(o, "ok", json_object_new_boolean(r->ok == (1u << MX_LEGS) - 1));
	if (r->flags & MX_FLAG_BW_AB)
		json_object_array_add(fl, json_object_new_string("bw_ab"));
	if (r->flags & MX_FLAG_BW_BA)
		json_object_array_add(fl, json_object_new_string("bw_ba"));
	if (r->flags & MX_FLAG_LAT)
		json_object_array_add(fl, json_object_new_string("lat"));
	json_object_object_add(o, "flags", fl);
	if (r->flags) {
		json_object_object_add(o, "verdict",
				       json_object_new_string(verdict_name(r->verdict)));
		if (r->verdict != MX_VERDICT_NONE)
			json_object_object_add(o, "retest", figures_json(&r->retest, r->retest_ok));
	}
	json_object_object_add(o, "error", r->why ? json_object_new_string(r->why) : NULL);
	return o;
}

static json_object *matrix_json(const struct mx_matrix *m, const struct mx_opts *o)
{
	json_object *doc = json_object_new_object(), *p = json_object_new_object();
	json_object *ranks = json_object_new_array(), *pairs = json_object_new_array();
	json_object *refs = json_object_new_object();

	json_object_object_add(doc, "tool", json_object_new_string("rk matrix"));
	json_object_object_add(doc, "version", json_object_new_string(rk_version()));
	json_object_object_add(doc, "launcher", json_object_new_string(m->launcher));
	json_object_object_add(doc, "ranks_n", json_object_new_int64(m->n));
	json_object_object_add(doc, "hosts_n", json_object_new_int64(m->nhosts));
	json_object_object_add(doc, "rounds", json_object_new_int64(m->sched.nrounds));
	add_num(doc, "seconds", (double)m->wall_ns / 1e9);
	json_object_object_add(p, "op", json_object_new_string("write"));
	json_object_object_add(p, "size", json_object_new_int64(o->size));
	json_object_object_add(p, "duration_s", json_object_new_int64(o->duration_s));
	json_object_object_add(p, "lat_size", json_object_new_int64(MATRIX_LAT_SIZE));
	json_object_object_add(
	    p, "lat_op", json_object_new_string(o->poll == RK_WAIT_BUSY ? "write" : "write-imm"));
	json_object_object_add(p, "poll", json_object_new_string(bench_poll_name(o->poll)));
	json_object_object_add(p, "lat_duration_s", json_object_new_int64(o->lat_duration_s));
	add_num(p, "bw_frac", o->bw_frac);
	add_num(p, "lat_mult", o->lat_mult);
	json_object_object_add(p, "intra", json_object_new_boolean(o->intra));
	json_object_object_add(p, "quick", json_object_new_boolean(o->quick));
	json_object_object_add(p, "pairs_file",
			       o->pairs_path ? json_object_new_string(o->pairs_path) : NULL);
	json_object_object_add(doc, "params", p);
	add_num(refs, "bw_median_gbps", m->refs.bw_median);
	add_num(refs, "lat_min_us", m->refs.lat_min);
	json_object_object_add(doc, "references", refs);
	for (uint32_t i = 0; i < m->n; i++) {
		const struct mx_rank *r = &m->ranks[i];
		json_object *x = json_object_new_object();

		json_object_object_add(x, "rank", json_object_new_int64(i));
		json_object_object_add(x, "host", json_object_new_string(r->host));
		json_object_object_add(x, "addr", json_object_new_string(r->addr));
		json_object_object_add(x, "dev", json_object_new_string(r->dev));
		json_object_object_add(x, "joined", json_object_new_boolean(r->joined));
		json_object_object_add(x, "lost", json_object_new_boolean(r->dead));
		json_object_object_add(x, "error", r->why ? json_object_new_string(r->why) : NULL);
		json_object_array_add(ranks, x);
	}
	json_object_object_add(doc, "ranks", ranks);
	for (uint32_t i = 0; i < m->sched.npairs; i++)
		json_object_array_add(pairs, pair_json(m, &m->res[i]));
	json_object_object_add(doc, "pairs", pairs);
	return doc;
}

int mx_report_json(const struct mx_matrix *m, const struct mx_opts *o, const char *path,
		   struct rk_error *err)
{
	json_object *doc = matrix_json(m, o);
	char tmp[4096];
	int r = 0;

	if (cli_json_to_stdout(path)) { /* --json without FILE */
		printf("%s\n", json_object_to_json_string_ext(
				   doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(doc);
		return fflush(stdout) ? mx_fail(err, EIO, "--json: stdout: %s", strerror(errno))
				      : 0;
	}

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid()) >= sizeof(tmp)) {
		json_object_put(doc);
		return mx_fail(err, ENAMETOOLONG, "--json %s: name too long", path);
	}
	if (json_object_to_file_ext(tmp, doc,
				    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE))
		r = mx_fail(err, EIO, "--json %s: %s", tmp, json_util_get_last_err());
	else if (rename(tmp, path))
		r = mx_fail(err, errno, "--json %s: %s", path, strerror(errno));
	if (r)
		unlink(tmp);
	json_object_put(doc);
	return r;
}

/* ------------------------------------------------------------------ plot */

/* Rows "from" top down, columns "to"; NaN where nothing was measured. */
static int write_script(FILE *g, const void *arg, const char *path)
{
	const struct mx_matrix *m = arg;
	int32_t *ix = index_of(m, MX_MAX_RANKS);

	if (!ix)
		return -ENOMEM;
	fprintf(g, "$d << EOD\n");
	for (uint32_t a = 0; a < m->n; a++) {
		for (uint32_t b = 0; b < m->n; b++) {
			/* index_of set all n * n entries (the analyser does not follow its loop) */
			// NOLINTNEXTLINE(clang-analyzer-core.uninitialized.Assign)
			int32_t i = ix[(size_t)a * m->n + b];
			double v = i >= 0 ? bw_of(&m->res[i], a) : NAN;

			fprintf(g, isnan(v) ? "%sNaN" : "%s%.6f", b ? " " : "", v);
		}
		fprintf(g, "\n");
	}
	fprintf(g, "EOD\n");
	free(ix);
	fprintf(g, "set terminal pngcairo size 900,800 noenhanced\n");
	fprintf(g, "set output '%s'\n", path);
	fprintf(g, "set title 'rk matrix: WRITE bandwidth [Gb/s], %u ranks on %u hosts'\n", m->n,
		m->nhosts);
	fprintf(g, "set xlabel 'to rank'\nset ylabel 'from rank'\n");
	fprintf(g, "set xrange [-0.5:%u.5]\nset yrange [%u.5:-0.5]\n", m->n - 1, m->n - 1);
	fprintf(g, "set palette defined (0 'dark-red', 0.5 'yellow', 1 'dark-green')\n");
	fprintf(g, "set cbrange [0:*]\nset cblabel 'Gb/s'\nset size ratio -1\n");
	fprintf(g, "plot $d matrix with image notitle\n");
	fprintf(g, "set output\n");
	return 0;
}

int mx_report_plot(const struct mx_matrix *m, const char *path, struct rk_error *err)
{
	if (!m->n || !m->sched.npairs)
		return mx_fail(err, ENODATA, "--plot: no results to plot");
	return cli_gnuplot_run("rk matrix", path, write_script, m, err);
}
