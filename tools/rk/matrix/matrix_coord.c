/*
 * matrix_coord.c - rank 0: ranks join, the rounds with their barrier, the
 * merge, the retests of flagged pairs. See matrix.h for the protocol.
 *
 * Everything a rank sends is network input: hellos and results are
 * checked field by field (mx_get_*), texts cleaned, a rank number, size or
 * figure out of range refuses the rank or counts as a failed report.
 * Rank 0 holds per rank one socket and a small record, and per pair one
 * mx_result (104 bytes; 2,048 ranks: 2.1 M pairs, 218 MB).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmakit/oob.h>

#include "bench/bench_ctl.h"
#include "cli.h"
#include "matrix_coord.h"
#include "matrix_wire.h"

#define HELLO_MS 10000
#define SEND_MS	 10000

void mx_matrix_free(struct mx_matrix *m)
{
	if (m->res)
		mx_results_free(m->res, m->sched.npairs);
	free(m->res);
	m->res = NULL;
	for (uint32_t i = 0; m->ranks && i < m->n; i++)
		free(m->ranks[i].why);
	free(m->ranks);
	m->ranks = NULL;
	mx_sched_free(&m->sched);
}

int mx_coord_init(struct mx_coord *c, const struct mx_opts *o, uint32_t n, const char *launcher,
		  const char *port, json_object *params, struct rk_error *err)
{
	memset(c, 0, sizeof(*c));
	c->o = o;
	c->params = params;
	c->lfd = -1;
	c->m.n = n;
	c->m.launcher = launcher;
	c->fds = malloc(n * sizeof(*c->fds));
	c->m.ranks = calloc(n, sizeof(*c->m.ranks));
	if (!c->fds || !c->m.ranks)
		return bench_fail(err, ENOMEM, "out of memory for %u ranks", n);
	for (uint32_t i = 0; i < n; i++) {
		c->fds[i] = -1;
		c->m.ranks[i].rank = i;
	}
	c->lfd = rk_tcp_listen(NULL, port, err);
	return c->lfd < 0 ? c->lfd : 0;
}

void mx_coord_free(struct mx_coord *c)
{
	for (uint32_t i = 0; c->fds && i < c->m.n; i++)
		if (c->fds[i] >= 0)
			close(c->fds[i]);
	free(c->fds);
	c->fds = NULL;
	if (c->lfd >= 0)
		close(c->lfd);
	c->lfd = -1;
	mx_matrix_free(&c->m);
}

/* Why a rank is not (or no longer) in the matrix: the first reason stays. */
__attribute__((format(printf, 2, 3))) static void set_why(struct mx_rank *r, const char *fmt, ...)
{
	char buf[400];
	va_list ap;

	if (r->why)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	r->why = strdup(buf);
}

static void kill_rank(struct mx_coord *c, uint32_t rank, const char *what, const char *why)
{
	struct mx_rank *r = &c->m.ranks[rank];

	if (c->fds[rank] >= 0)
		close(c->fds[rank]);
	c->fds[rank] = -1;
	if (r->joined && !r->dead) {
		r->dead = 1;
		set_why(r, "lost %s: %s", what, why);
	}
}

static int alive(const struct mx_coord *c, uint32_t rank)
{
	return c->fds[rank] >= 0;
}

static void send_or_kill(struct mx_coord *c, uint32_t rank, json_object *m, const char *what)
{
	struct rk_error err;

	rk_error_clear(&err);
	if (alive(c, rank) && mx_wire_send(c->fds[rank], m, SEND_MS, &err))
		kill_rank(c, rank, what, rk_error_str(&err));
}

static json_object *msg(const char *type)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "t", json_object_new_string(type));
	return o;
}

static void refuse(int fd, const char *why)
{
	json_object *m = msg("refuse");

	json_object_object_add(m, "why", json_object_new_string(why));
	mx_wire_send(fd, m, 2000, NULL);
	json_object_put(m);
}

/* The first parameter where @theirs differs from ours, as "parameter mismatch: ..." */
static int params_differ(struct mx_coord *c, uint32_t rank, json_object *theirs, char *why,
			 size_t len)
{
	if (!theirs || !json_object_is_type(theirs, json_type_object)) {
		snprintf(why, len, "no parameters in its hello");
		return 1;
	}
	json_object_object_foreach(c->params, k, mine)
	{
		json_object *v = NULL;
		char a[64], b[64];
		const char *vs;

		if (json_object_object_get_ex(theirs, k, &v) && json_object_equal(mine, v))
			continue;
		vs = v ? json_object_to_json_string(v) : "(none)";
		cli_clean_text(a, sizeof(a), json_object_to_json_string(mine),
			       strlen(json_object_to_json_string(mine)));
		cli_clean_text(b, sizeof(b), vs, strlen(vs));
		snprintf(why, len, "parameter mismatch: %s: rank 0 %s, rank %u %s", k, a, rank, b);
		return 1;
	}
	return 0;
}

/* One connection's hello: accepted (the rank is in) or refused with the reason. */
static void take_hello(struct mx_coord *c, int fd)
{
	struct rk_error err;
	json_object *m = NULL, *params = NULL;
	uint32_t rank, size;
	struct mx_rank tmp;
	char why[400];

	rk_error_clear(&err);
	memset(&tmp, 0, sizeof(tmp));
	if (mx_wire_recv(fd, &m, HELLO_MS, &err)) {
		close(fd);
		return;
	}
	json_object_object_get_ex(m, "params", &params);
	if (strcmp(mx_type(m), "hello") || mx_get_u32(m, "size", MX_MAX_RANKS, &size) ||
	    mx_get_u32(m, "rank", MX_MAX_RANKS, &rank) ||
	    mx_get_str(m, "host", tmp.host, sizeof(tmp.host)) ||
	    mx_get_str(m, "addr", tmp.addr, sizeof(tmp.addr))) {
		refuse(fd, "a malformed hello");
		close(fd);
	} else if (size != c->m.n || rank >= c->m.n) {
		snprintf(why, sizeof(why), "rank %u of %u, but rank 0 is in a matrix of %u ranks",
			 rank, size, c->m.n);
		refuse(fd, why);
		close(fd);
	} else if (c->m.ranks[rank].joined) {
		snprintf(why, sizeof(why), "rank %u joined already", rank);
		refuse(fd, why);
		close(fd);
	} else if (params_differ(c, rank, params, why, sizeof(why))) {
		refuse(fd, why);
		close(fd);
		set_why(&c->m.ranks[rank], "refused: %s", why);
		c->m.ranks[rank].refused = 1;
	} else {
		json_object *w = msg("welcome");
		struct mx_rank *r = &c->m.ranks[rank];

		free(r->why);
		r->why = NULL;
		memcpy(r->host, tmp.host, sizeof(r->host));
		memcpy(r->addr, tmp.addr, sizeof(r->addr));
		r->joined = 1;
		c->fds[rank] = fd;
		send_or_kill(c, rank, w, "at the rendezvous");
		json_object_put(w);
	}
	json_object_put(m);
}

static void take_ranks(struct mx_coord *c)
{
	uint64_t deadline = cli_now_ns() + (uint64_t)c->o->wait_s * 1000000000ull;
	uint32_t joined = 0;

	for (;;) {
		uint64_t now = cli_now_ns();
		struct rk_error err;
		int fd;

		/* A refused rank would only be refused again: do not wait for it. */
		joined = 0;
		for (uint32_t i = 0; i < c->m.n; i++)
			joined += (uint32_t)(c->m.ranks[i].joined || c->m.ranks[i].refused);
		if (joined == c->m.n || now >= deadline)
			break;
		rk_error_clear(&err);
		fd = rk_tcp_accept(c->lfd, (int)((deadline - now) / 1000000) + 1, &err);
		if (fd >= 0)
			take_hello(c, fd);
	}
	for (uint32_t i = 0; i < c->m.n; i++)
		if (!c->m.ranks[i].joined)
			set_why(&c->m.ranks[i], "never joined within --wait %u s", c->o->wait_s);
}

/* Host ids: ranks with the same host name share one; a rank that never joined has its own. */
static void host_ids(struct mx_coord *c, uint32_t *ids)
{
	struct mx_rank *r = c->m.ranks;

	c->m.nhosts = 0;
	for (uint32_t i = 0; i < c->m.n; i++) {
		ids[i] = UINT32_MAX;
		for (uint32_t j = 0; j < i && r[i].joined; j++)
			if (r[j].joined && !strcmp(r[i].host, r[j].host)) {
				ids[i] = r[j].host_id;
				break;
			}
		if (ids[i] == UINT32_MAX)
			ids[i] = c->m.nhosts++;
		r[i].host_id = ids[i];
	}
}

static int build_schedule(struct mx_coord *c)
{
	struct mx_pair_set set;
	uint32_t *ids = malloc(c->m.n * sizeof(*ids));
	char why[200];
	int r;

	if (!ids)
		return bench_fail(&c->err, ENOMEM, "out of memory");
	host_ids(c, ids);
	r = mx_set_init(&set, c->m.n, !c->o->pairs_text);
	if (r) {
		free(ids);
		return bench_fail(&c->err, -r, "out of memory for %u ranks", c->m.n);
	}
	if (c->o->pairs_text && mx_set_parse_pairs(&set, c->o->pairs_text, why, sizeof(why)))
		r = bench_fail(&c->err, EINVAL, "--pairs %s: %s", c->o->pairs_path, why);
	if (!r && !c->o->intra)
		mx_set_drop_intra(&set, ids);
	if (!r && mx_sched_build(&c->m.sched, &set, c->o->quick))
		r = bench_fail(&c->err, ENOMEM, "out of memory for the schedule");
	mx_set_free(&set);
	free(ids);
	if (!r && !c->m.sched.npairs)
		r = bench_fail(&c->err, ENOENT,
			       "no pairs to measure: every pair is of ranks on one host (add "
			       "--intra to measure those) or outside --pairs");
	if (!r) {
		c->m.res = calloc(c->m.sched.npairs, sizeof(*c->m.res));
		if (!c->m.res)
			r = bench_fail(&c->err, ENOMEM, "out of memory for %u results",
				       c->m.sched.npairs);
	}
	return r;
}

/* Texts of one side's report live here until mx_merge has copied what it keeps. */
struct side_buf {
	struct mx_side_report rep;
	char why[MX_LEGS][240];
	char dev[32];
};

static int parse_result(json_object *m, uint32_t round, struct side_buf *s)
{
	json_object *legs;
	uint32_t got;

	memset(s, 0, sizeof(*s));
	if (strcmp(mx_type(m), "result") || mx_get_u32(m, "round", UINT32_MAX, &got) ||
	    got != round || mx_get_str(m, "dev", s->dev, sizeof(s->dev)) ||
	    !json_object_object_get_ex(m, "legs", &legs) ||
	    !json_object_is_type(legs, json_type_array) ||
	    json_object_array_length(legs) != MX_LEGS)
		return -1;
	for (int i = 0; i < MX_LEGS; i++) {
		json_object *leg = json_object_array_get_idx(legs, (size_t)i), *st, *v;
		struct mx_leg_report *lr = &s->rep.leg[i];
		int status;

		if (!json_object_is_type(leg, json_type_object) ||
		    !json_object_object_get_ex(leg, "status", &st) ||
		    !json_object_is_type(st, json_type_int) ||
		    !json_object_object_get_ex(leg, "v", &v) ||
		    !json_object_is_type(v, json_type_array) || json_object_array_length(v) != 2 ||
		    mx_get_str(leg, "why", s->why[i], sizeof(s->why[i])))
			return -1;
		status = json_object_get_int(st);
		if (status > 0 || status < -4095)
			return -1;
		lr->status = status;
		lr->why = status ? s->why[i] : NULL;
		for (size_t k = 0; k < 2; k++) {
			json_object *x = json_object_array_get_idx(v, k);
			double d;

			if (!(json_object_is_type(x, json_type_double) ||
			      json_object_is_type(x, json_type_int)))
				return -1;
			d = json_object_get_double(x);
			/* A figure no link reaches is no measurement (1 Pb/s, 1000 s). */
			if (!(d >= 0 && d < 1e6))
				return -1;
			lr->v[k] = d;
		}
	}
	return 0;
}

/* One side's result for @round, or NULL (the rank is then dead). */
static struct mx_side_report *gather(struct mx_coord *c, uint32_t rank, uint32_t round,
				     uint64_t deadline, struct side_buf *s, const char *what)
{
	uint64_t now = cli_now_ns();
	json_object *m = NULL;
	struct rk_error err;

	if (!alive(c, rank))
		return NULL;
	rk_error_clear(&err);
	if (mx_wire_recv(c->fds[rank], &m, now < deadline ? (int)((deadline - now) / 1000000) : 0,
			 &err)) {
		kill_rank(c, rank, what, rk_error_str(&err));
		return NULL;
	}
	if (parse_result(m, round, s)) {
		json_object_put(m);
		kill_rank(c, rank, what, "a malformed result");
		return NULL;
	}
	json_object_put(m);
	if (s->dev[0])
		snprintf(c->m.ranks[rank].dev, sizeof(c->m.ranks[rank].dev), "%s", s->dev);
	return &s->rep;
}

/* A pair not run because one of its ranks is gone: name that rank and why. */
static int absent_why(const struct mx_coord *c, const struct mx_pair *p, struct mx_result *r)
{
	uint32_t gone = alive(c, p->a) ? p->b : p->a;
	const struct mx_rank *k = &c->m.ranks[gone];
	char text[400];

	snprintf(text, sizeof(text), "not run: rank %u %s (%s)", gone,
		 k->joined ? "died" : "never joined", k->why ? k->why : "no reason known");
	free(r->why);
	r->err = -ECONNRESET;
	r->why = strdup(text);
	return r->why ? 0 : -ENOMEM;
}

/*
 * One round: @np pairs at once. Everyone alive hears either its pair or
 * "sit"; then both sides of every pair report before anyone moves on.
 */
static int run_round(struct mx_coord *c, uint32_t round, const struct mx_pair *pairs, uint32_t np,
		     uint32_t legs, struct mx_result *out, const char *what)
{
	uint64_t deadline = cli_now_ns() + (mx_pair_budget_ms(c->o) + 15000ull) * 1000000ull;
	uint8_t *busy = calloc(c->m.n, 1);
	struct side_buf *sa = malloc(sizeof(*sa)), *sb = malloc(sizeof(*sb));
	int r = 0;

	if (!busy || !sa || !sb) {
		r = bench_fail(&c->err, ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < np; i++) {
		const struct mx_pair *p = &pairs[i];

		if (!alive(c, p->a) || !alive(c, p->b))
			continue;
		busy[p->a] = busy[p->b] = 1;
		for (int side = 0; side < 2; side++) {
			uint32_t me = side ? p->b : p->a, peer = side ? p->a : p->b;
			json_object *m = msg("pair");

			json_object_object_add(m, "round", json_object_new_int64(round));
			json_object_object_add(m, "peer", json_object_new_int64(peer));
			json_object_object_add(m, "peer_addr",
					       json_object_new_string(c->m.ranks[peer].addr));
			json_object_object_add(m, "legs", json_object_new_int64(legs));
			send_or_kill(c, me, m, what);
			json_object_put(m);
		}
	}
	for (uint32_t i = 0; i < c->m.n; i++)
		if (!busy[i] && alive(c, i)) {
			json_object *m = msg("sit");

			json_object_object_add(m, "round", json_object_new_int64(round));
			send_or_kill(c, i, m, what);
			json_object_put(m);
		}
	for (uint32_t i = 0; i < np && !r; i++) {
		const struct mx_pair *p = &pairs[i];
		struct mx_side_report *ra = NULL, *rb = NULL;

		if (busy[p->a]) {
			ra = gather(c, p->a, round, deadline, sa, what);
			rb = gather(c, p->b, round, deadline, sb, what);
		}
		if (mx_merge(&out[i], p, ra, rb) || (!busy[p->a] && absent_why(c, p, &out[i])))
			r = bench_fail(&c->err, ENOMEM, "out of memory");
		out[i].round = round;
	}
out:
	free(busy);
	free(sa);
	free(sb);
	return r;
}

static int retest_flagged(struct mx_coord *c, uint32_t first_round)
{
	const struct mx_opts *o = c->o;
	uint32_t round = first_round;

	for (uint32_t i = 0; i < c->m.sched.npairs; i++) {
		struct mx_result *res = &c->m.res[i], again;
		int r;

		memset(&again, 0, sizeof(again));
		if (!res->flags)
			continue;
		if (!alive(c, res->p.a) || !alive(c, res->p.b)) {
			res->verdict = MX_VERDICT_FAILED;
			continue;
		}
		/* Only what was flagged: a latency flag needs no bandwidth runs. */
		r = run_round(c, round++, &res->p, 1, mx_flag_legs(res->flags), &again,
			      "in a retest");
		if (r)
			return r;
		res->retest = again.f;
		res->retest_ok = again.ok;
		res->verdict =
		    mx_verdict_of(res, &again.f, again.ok, &c->m.refs, o->bw_frac, o->lat_mult);
		mx_results_free(&again, 1);
	}
	return 0;
}

void *mx_coord_run(void *arg)
{
	struct mx_coord *c = arg;
	struct mx_sched *s = &c->m.sched;
	uint64_t t0 = cli_now_ns();
	json_object *end;
	int r;

	rk_error_clear(&c->err);
	take_ranks(c);
	r = build_schedule(c);
	for (uint32_t k = 0; !r && k < s->nrounds; k++)
		r = run_round(c, k, s->pairs + s->round_at[k], s->round_at[k + 1] - s->round_at[k],
			      MX_ALL_LEGS, c->m.res + s->round_at[k], "in a round");
	if (!r && mx_flag_all(c->m.res, s->npairs, c->o->bw_frac, c->o->lat_mult, &c->m.refs))
		r = bench_fail(&c->err, ENOMEM, "out of memory");
	if (!r && c->o->retest)
		r = retest_flagged(c, s->nrounds);
	end = msg("end");
	for (uint32_t i = 0; i < c->m.n; i++)
		send_or_kill(c, i, end, "at the end");
	json_object_put(end);
	/* Closing tells every rank still waiting that the matrix is over. */
	for (uint32_t i = 0; i < c->m.n; i++)
		if (c->fds[i] >= 0) {
			close(c->fds[i]);
			c->fds[i] = -1;
		}
	c->m.wall_ns = cli_now_ns() - t0;
	c->rc = r;
	return NULL;
}
