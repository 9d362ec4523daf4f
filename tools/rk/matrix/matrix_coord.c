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
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdmakit/oob.h>

#include "cli.h"
#include "common/deadline.h"
#include "matrix_coord.h"
#include "matrix_hello.h"
#include "matrix_wire.h"

#define SEND_MS 10000
/*
 * What a connection that has not yet proved itself may hold of rank 0: a
 * slot among PENDING_MAX (the oldest is dropped for a newcomer when they
 * are all taken: a real rank's hello follows its connect at once), a hello
 * of MX_HELLO_MAX bytes, HELLO_MS to send it whole. Refusals are logged,
 * up to LOG_MAX of them (then once that the rest are not).
 */
#define HELLO_MS    5000
#define PENDING_MAX 32
#define LOG_MAX	    100

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

/*
 * A host name that resolves here to a loopback address only (Debian puts a
 * host's own name on 127.0.1.1): the other ranks reach rank 0 at what it
 * resolves to on their hosts, so listening on it would shut them out. A
 * loopback literal or "localhost" is meant as such.
 */
static int loopback_alias(const char *host)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *a;
	struct in6_addr lo6 = IN6ADDR_LOOPBACK_INIT;
	int all_lo = 1;

	if (!strcmp(host, "localhost") || !strncmp(host, "127.", 4) || !strcmp(host, "::1"))
		return 0;
	if (getaddrinfo(host, NULL, &hints, &ai))
		return 0;
	for (a = ai; a; a = a->ai_next) {
		if (a->ai_family == AF_INET)
			all_lo &= (ntohl(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr) >>
				   24) == 127;
		else if (a->ai_family == AF_INET6)
			all_lo &= !memcmp(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, &lo6,
					  sizeof(lo6));
	}
	freeaddrinfo(ai);
	return all_lo;
}

int mx_coord_init(struct mx_coord *c, const struct mx_opts *o, const struct mx_auth *auth,
		  uint32_t n, const char *launcher, const char *host, const char *port,
		  json_object *params, struct rk_error *err)
{
	memset(c, 0, sizeof(*c));
	c->o = o;
	c->auth = auth;
	c->params = params;
	c->lfd = -1;
	c->m.n = n;
	c->m.launcher = launcher;
	c->fds = malloc(n * sizeof(*c->fds));
	c->m.ranks = calloc(n, sizeof(*c->m.ranks));
	if (!c->fds || !c->m.ranks)
		return mx_fail(err, ENOMEM, "out of memory for %u ranks", n);
	for (uint32_t i = 0; i < n; i++) {
		c->fds[i] = -1;
		c->m.ranks[i].rank = i;
	}
	if (host && loopback_alias(host)) {
		fprintf(stderr,
			"rk matrix: the rendezvous host %s is a loopback address on rank 0's host "
			"(its own name in /etc/hosts?): listening on every address (--rendezvous "
			"ADDR narrows it)\n",
			host);
		host = NULL;
	}
	c->lfd = rk_tcp_listen(host, port, err);
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

/* A connection that has not said hello yet. */
struct pending {
	int fd;
	uint64_t deadline;
	struct mx_wire_rd rd;
	char peer[64]; /* its address, for the log */
};

struct rdv {
	struct pending p[PENDING_MAX];
	uint32_t np;
	uint32_t logged;
};

/* Every refusal in rank 0's log, with the peer's address: the site sees who knocked. */
__attribute__((format(printf, 3, 4))) static void log_refusal(struct rdv *v, const char *peer,
							      const char *fmt, ...)
{
	char buf[400];
	va_list ap;

	if (v->logged > LOG_MAX)
		return;
	if (v->logged++ == LOG_MAX) {
		fprintf(stderr, "rk matrix: rendezvous: more refusals, not logged\n");
		return;
	}
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rk matrix: rendezvous: refused %s: %s\n", peer, buf);
}

/*
 * One connection's hello: accepted (the rank is in) or refused with the
 * reason. Nothing a hello says changes the job before its proof is
 * accepted: a stranger's is refused and logged, and the rank it named can
 * still join. Takes @fd.
 */
static void take_hello(struct mx_coord *c, struct rdv *v, int fd, json_object *m, const char *peer)
{
	struct mx_hello *h = malloc(sizeof(*h));
	char why[400];

	if (!h) {
		close(fd);
		return;
	}
	if (mx_hello_decode(m, h, why, sizeof(why))) {
		log_refusal(v, peer, "%s", why);
		refuse(fd, why);
	} else if (h->proto != MX_PROTO) {
		snprintf(why, sizeof(why), "rk matrix protocol %u, rank 0 speaks %u", h->proto,
			 MX_PROTO);
		log_refusal(v, peer, "%s", why);
		refuse(fd, why);
	} else if (mx_auth_check(c->auth, h, why, sizeof(why))) {
		/* The stranger learns only that it is not in; the log has the reason. */
		log_refusal(v, peer, "as rank %u: not authenticated: %s", h->rank, why);
		refuse(fd, "not authenticated");
	} else if (h->size != c->m.n || h->rank >= c->m.n) {
		snprintf(why, sizeof(why), "rank %u of %u, but rank 0 is in a matrix of %u ranks",
			 h->rank, h->size, c->m.n);
		log_refusal(v, peer, "%s", why);
		refuse(fd, why);
	} else if (c->m.ranks[h->rank].joined) {
		snprintf(why, sizeof(why), "rank %u joined already", h->rank);
		log_refusal(v, peer, "%s", why);
		refuse(fd, why);
	} else if (params_differ(c, h->rank, h->params, why, sizeof(why))) {
		/* A rank of this job (it proved it) that will only be refused again. */
		log_refusal(v, peer, "%s", why);
		refuse(fd, why);
		set_why(&c->m.ranks[h->rank], "refused: %s", why);
		c->m.ranks[h->rank].refused = 1;
	} else {
		json_object *w = msg("welcome");
		struct mx_rank *r = &c->m.ranks[h->rank];

		free(r->why);
		r->why = NULL;
		memcpy(r->host, h->host, sizeof(r->host));
		memcpy(r->addr, h->addr, sizeof(r->addr));
		r->joined = 1;
		c->fds[h->rank] = fd;
		send_or_kill(c, h->rank, w, "at the rendezvous");
		json_object_put(w);
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	/* The secret or credential it carried goes with it. */
	memset(h, 0, sizeof(*h));
	free(h);
}

static void drop_pending(struct rdv *v, uint32_t i)
{
	close(v->p[i].fd);
	mx_wire_rd_free(&v->p[i].rd);
	v->p[i] = v->p[--v->np];
}

static void peer_name(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl = sizeof(ss);
	char a[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (!getpeername(fd, (struct sockaddr *)&ss, &sl)) {
		if (ss.ss_family == AF_INET6) {
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, a, sizeof(a));
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		} else if (ss.ss_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, a, sizeof(a));
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		}
	}
	snprintf(out, len, "%s:%u", a, port);
}

/* A new connection: a pending slot, the oldest one's if all are taken. */
static void take_connection(struct rdv *v, int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), one = 1;
	struct pending *p;

	if (fd < 0)
		return;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (v->np == PENDING_MAX) {
		uint32_t old = 0;

		for (uint32_t i = 1; i < v->np; i++)
			if (v->p[i].deadline < v->p[old].deadline)
				old = i;
		log_refusal(v, v->p[old].peer, "%u connections without a hello: the oldest dropped",
			    PENDING_MAX);
		drop_pending(v, old);
	}
	p = &v->p[v->np++];
	memset(p, 0, sizeof(*p));
	p->fd = fd;
	p->deadline = cli_deadline_in(HELLO_MS);
	peer_name(fd, p->peer, sizeof(p->peer));
}

/* What pending connection @i has sent: a whole hello is taken, a bad frame refused. */
static void read_pending(struct mx_coord *c, struct rdv *v, uint32_t i)
{
	struct pending *p = &v->p[i];
	json_object *m = NULL;
	struct rk_error err;
	int r;

	rk_error_clear(&err);
	r = mx_wire_rd_feed(&p->rd, p->fd, MX_HELLO_MAX, &m, &err);
	if (r == 0)
		return;
	if (r < 0) {
		log_refusal(v, p->peer, "%s", rk_error_str(&err));
		drop_pending(v, i);
		return;
	}
	{
		int fd = p->fd;
		char peer[64];

		memcpy(peer, p->peer, sizeof(peer));
		p->fd = -1;
		mx_wire_rd_free(&p->rd);
		v->p[i] = v->p[--v->np];
		take_hello(c, v, fd, m, peer);
	}
	json_object_put(m);
}

static void take_ranks(struct mx_coord *c)
{
	uint64_t deadline = cli_now_ns() + (uint64_t)c->o->wait_s * 1000000000ull;
	struct rdv *v = calloc(1, sizeof(*v));
	struct pollfd pf[PENDING_MAX + 1];

	for (; v;) {
		uint64_t now = cli_now_ns(), next = deadline;
		uint32_t joined = 0, np;
		int r;

		/* A rank refused for its parameters would only be refused again: not waited for. */
		for (uint32_t i = 0; i < c->m.n; i++)
			joined += (uint32_t)(c->m.ranks[i].joined || c->m.ranks[i].refused);
		if (joined == c->m.n || now >= deadline)
			break;
		for (uint32_t i = 0; i < v->np;) {
			if (v->p[i].deadline <= now) {
				log_refusal(v, v->p[i].peer, "no hello within %d ms", HELLO_MS);
				drop_pending(v, i);
				continue;
			}
			if (v->p[i].deadline < next)
				next = v->p[i].deadline;
			i++;
		}
		np = v->np;
		pf[0] = (struct pollfd){.fd = c->lfd, .events = POLLIN};
		for (uint32_t i = 0; i < np; i++)
			pf[i + 1] = (struct pollfd){.fd = v->p[i].fd, .events = POLLIN};
		r = poll(pf, np + 1, cli_deadline_ms_left(next));
		if (r <= 0)
			continue;
		/* From the last: a slot taken by read_pending moves the last one into it. */
		for (uint32_t i = np; i-- > 0;)
			if (pf[i + 1].revents && i < v->np)
				read_pending(c, v, i);
		if (pf[0].revents & POLLIN)
			take_connection(v, c->lfd);
	}
	while (v && v->np)
		drop_pending(v, 0);
	free(v);
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
		return mx_fail(&c->err, ENOMEM, "out of memory");
	host_ids(c, ids);
	r = mx_set_init(&set, c->m.n, !c->o->pairs_text);
	if (r) {
		free(ids);
		return mx_fail(&c->err, -r, "out of memory for %u ranks", c->m.n);
	}
	if (c->o->pairs_text && mx_set_parse_pairs(&set, c->o->pairs_text, why, sizeof(why)))
		r = mx_fail(&c->err, EINVAL, "--pairs %s: %s", c->o->pairs_path, why);
	if (!r && !c->o->intra)
		mx_set_drop_intra(&set, ids);
	if (!r && mx_sched_build(&c->m.sched, &set, c->o->quick))
		r = mx_fail(&c->err, ENOMEM, "out of memory for the schedule");
	mx_set_free(&set);
	free(ids);
	if (!r && !c->m.sched.npairs)
		r = mx_fail(&c->err, ENOENT,
			    "no pairs to measure: every pair is of ranks on one host (add "
			    "--intra to measure those) or outside --pairs");
	if (!r) {
		c->m.res = calloc(c->m.sched.npairs, sizeof(*c->m.res));
		if (!c->m.res)
			r = mx_fail(&c->err, ENOMEM, "out of memory for %u results",
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
	json_object *m = NULL;
	struct rk_error err;

	if (!alive(c, rank))
		return NULL;
	rk_error_clear(&err);
	if (mx_wire_recv(c->fds[rank], &m, cli_deadline_ms_left(deadline), &err)) {
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
	uint8_t keys[MX_LEGS * MX_KEY_LEN];
	char hex[2 * sizeof(keys) + 1];
	int r = 0;

	if (!busy || !sa || !sb) {
		r = mx_fail(&c->err, ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < np; i++) {
		const struct mx_pair *p = &pairs[i];

		if (!alive(c, p->a) || !alive(c, p->b))
			continue;
		busy[p->a] = busy[p->b] = 1;
		/*
		 * Fresh keys for the pair's legs, to both ranks over their own
		 * (authenticated) connections: with them each side proves to the
		 * other that it is the rank named here, not whoever answers at
		 * the address (matrix_pair.h).
		 */
		if (getrandom(keys, sizeof(keys), 0) != (ssize_t)sizeof(keys)) {
			r = mx_fail(&c->err, EIO, "getrandom: %s", strerror(errno));
			goto out;
		}
		cli_hex(keys, sizeof(keys), hex);
		for (int side = 0; side < 2; side++) {
			uint32_t me = side ? p->b : p->a, peer = side ? p->a : p->b;
			json_object *m = msg("pair");

			json_object_object_add(m, "round", json_object_new_int64(round));
			json_object_object_add(m, "peer", json_object_new_int64(peer));
			json_object_object_add(m, "peer_addr",
					       json_object_new_string(c->m.ranks[peer].addr));
			json_object_object_add(m, "legs", json_object_new_int64(legs));
			json_object_object_add(m, "keys", json_object_new_string(hex));
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
			r = mx_fail(&c->err, ENOMEM, "out of memory");
		out[i].round = round;
	}
out:
	memset(keys, 0, sizeof(keys));
	memset(hex, 0, sizeof(hex));
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
		r = mx_fail(&c->err, ENOMEM, "out of memory");
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
