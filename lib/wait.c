/*
 * wait.c - one wait over CQs, CM channels, eventfds and fds (wait.h).
 *
 * Sources live in an array indexed by their id (slots are reused after
 * removal), and epoll carries the id. A CQ whose channel epoll reports is
 * only marked: the next pass reads its event and polls it, and arms it
 * again (then polls once more, so a completion that came before the
 * arming is not missed) only when it found nothing or before the pass
 * after, which may sleep: the order rk_cq_wait follows. A spin polls the CQs from a
 * list of their own, and every pass starts at the CQ after the one that
 * started the last pass, so a small result array cannot starve the CQs at
 * the end.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "rk_internal.h"

#define DEF_MAX_WC  16
#define EPOLL_BATCH 64
#define WAKE_ID	    UINT64_MAX
#define FIRED_NOW   2 /* src.fired: set in the epoll pass under way */
/*
 * A connection's CM events wait for its CQ at most this many passes in a
 * row: with a CQ shared by busy connections (rk_conn_opts.cq) the CQ may
 * never be idle, and a peer's disconnect must still be seen.
 */
#define MAX_DEFER 16
/*
 * Busy mode: look at the fds (epoll_wait, a system call) once FD_EVERY
 * spins have been counted, across calls. An empty spin counts one, a spin
 * that found completions FD_BUSY (the caller then works on them before it
 * waits again): an fd event (a CM event, a socket, an eventfd) is seen
 * within 1024 empty spins (some tens of microseconds on a hardware NIC's
 * CQ, a few hundred under emulation) or 128 waits that returned
 * completions. rk_wait_wake() is seen at once: it is a counter in memory.
 * At 32 empty spins, a 64 B RPC round trip made 3.6 of these system calls
 * and 1.1 clock readings (both sides together); at 1024, 0.17 and 0.06.
 */
#define FD_EVERY 1024
#define FD_BUSY	 8

struct src {
	int used;
	enum rk_wait_src kind;
	uint64_t tag;
	int fd; /* the fd in epoll, -1 for a CQ of a busy set */
	uint32_t events;
	int fired; /* CQ: its channel was readable; read its event (FIRED_NOW: this pass) */
	struct rk_cq *cq;
	struct ibv_wc *wc;
	int max_wc;
	struct rk_conn *conn;
	unsigned deferred; /* CONN: passes its events waited for its CQ (MAX_DEFER) */
};

struct rk_wait {
	int epfd, wakefd;
	enum rk_wait_mode mode;
	uint32_t spin_us;
	struct src *srcs;
	int nsrcs, cap;
	int *cq_ids, ncq;   /* the CQ sources' ids, in the order added: what a spin polls */
	int nfds;	    /* sources in epoll besides the wake eventfd */
	unsigned rr;	    /* where the next pass starts: an index in cq_ids */
	atomic_ulong wakes; /* rk_wait_wake() calls not yet reported */
	int wake_pending;   /* the wake eventfd was seen readable */
	unsigned fd_spins;  /* busy mode: spins since the fds were looked at, across calls */
	int fd_starved;	    /* the last epoll pass found fds ready and no room for them */
	struct epoll_event evs[EPOLL_BATCH];
};

int rk_wait_create(const struct rk_wait_opts *opts, struct rk_error *err, struct rk_wait **out)
{
	struct rk_wait_opts def = {0};
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = WAKE_ID};
	struct rk_wait *ws;
	int r;

	*out = NULL;
	if (!opts)
		opts = &def;
	if (opts->mode > RK_WAIT_ADAPTIVE)
		return rk__err_set(err, EINVAL, "rk_wait_create", "unknown wait mode %d",
				   opts->mode);
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return rk__err_set(err, ENOMEM, "rk_wait_create", NULL);
	ws->mode = opts->mode;
	ws->spin_us = opts->spin_us ? opts->spin_us : 50;
	ws->wakefd = -1;
	atomic_init(&ws->wakes, 0);
	ws->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ws->epfd < 0) {
		r = rk__err_sys(err, "epoll_create1", NULL);
		goto fail;
	}
	ws->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ws->wakefd < 0) {
		r = rk__err_sys(err, "eventfd", "wake-up");
		goto fail;
	}
	if (epoll_ctl(ws->epfd, EPOLL_CTL_ADD, ws->wakefd, &ev)) {
		r = rk__err_sys(err, "epoll_ctl", "wake-up eventfd");
		goto fail;
	}
	*out = ws;
	return 0;
fail:
	rk_wait_destroy(ws);
	return r;
}

void rk_wait_destroy(struct rk_wait *ws)
{
	if (!ws)
		return;
	for (int i = 0; i < ws->nsrcs; i++)
		free(ws->srcs[i].wc);
	free(ws->srcs);
	free(ws->cq_ids);
	if (ws->wakefd >= 0)
		close(ws->wakefd);
	if (ws->epfd >= 0)
		close(ws->epfd);
	free(ws);
}

/* A free slot (its index is the new id), or -1. */
static int new_slot(struct rk_wait *ws)
{
	for (int i = 0; i < ws->nsrcs; i++)
		if (!ws->srcs[i].used)
			return i;
	if (ws->nsrcs == ws->cap) {
		int cap = ws->cap ? ws->cap * 2 : 8;
		struct src *n = realloc(ws->srcs, (size_t)cap * sizeof(*n));
		int *ids;

		if (!n)
			return -1;
		ws->srcs = n;
		ids =
		    realloc(ws->cq_ids, (size_t)cap * sizeof(*ids)); /* a place for every source */
		if (!ids)
			return -1;
		ws->cq_ids = ids;
		ws->cap = cap;
	}
	memset(&ws->srcs[ws->nsrcs], 0, sizeof(ws->srcs[0]));
	return ws->nsrcs++;
}

/* Put @s (slot @id, filled but not used yet) into epoll when it has an fd. */
static int enable(struct rk_wait *ws, int id, struct rk_error *err, const char *op)
{
	struct src *s = &ws->srcs[id];
	struct epoll_event ev = {.events = s->events, .data.u64 = (uint64_t)id};

	if (s->fd >= 0) {
		if (epoll_ctl(ws->epfd, EPOLL_CTL_ADD, s->fd, &ev)) {
			int r = rk__err_sys(err, "epoll_ctl", "%s: fd %d", op, s->fd);

			free(s->wc);
			s->wc = NULL;
			return r;
		}
		ws->nfds++;
	}
	s->used = 1;
	if (s->kind == RK_SRC_CQ)
		ws->cq_ids[ws->ncq++] = id;
	return id;
}

int rk_wait_add_cq(struct rk_wait *ws, struct rk_cq *cq, int max_wc, uint64_t tag,
		   struct rk_error *err)
{
	int fd = rk_cq_fd(cq);
	int id;

	if (ws->mode != RK_WAIT_BUSY && fd < 0)
		return rk__err_set(err, EINVAL, "rk_wait_add_cq",
				   "a busy-mode CQ cannot be slept on (no completion channel)");
	for (int i = 0; i < ws->nsrcs; i++)
		if (ws->srcs[i].used && ws->srcs[i].cq == cq)
			return rk__err_set(err, EEXIST, "rk_wait_add_cq", "CQ already in the set");
	if (max_wc <= 0)
		max_wc = DEF_MAX_WC;
	id = new_slot(ws);
	if (id < 0)
		return rk__err_set(err, ENOMEM, "rk_wait_add_cq", NULL);
	ws->srcs[id] = (struct src){.kind = RK_SRC_CQ,
				    .tag = tag,
				    .fd = ws->mode == RK_WAIT_BUSY ? -1 : fd,
				    .events = EPOLLIN,
				    .cq = cq,
				    .max_wc = max_wc,
				    .fired = 1};
	ws->srcs[id].wc = calloc((size_t)max_wc, sizeof(struct ibv_wc));
	if (!ws->srcs[id].wc)
		return rk__err_set(err, ENOMEM, "rk_wait_add_cq", NULL);
	return enable(ws, id, err, "rk_wait_add_cq");
}

int rk_wait_add_conn(struct rk_wait *ws, struct rk_conn *conn, uint64_t tag, struct rk_error *err)
{
	int fd = rk_conn_cm_fd(conn);
	int id;

	if (fd < 0)
		return rk__err_set(err, EINVAL, "rk_wait_add_conn",
				   "a manual connection has no CM channel");
	id = new_slot(ws);
	if (id < 0)
		return rk__err_set(err, ENOMEM, "rk_wait_add_conn", NULL);
	ws->srcs[id] = (struct src){
	    .kind = RK_SRC_CONN, .tag = tag, .fd = fd, .events = EPOLLIN, .conn = conn};
	return enable(ws, id, err, "rk_wait_add_conn");
}

int rk_wait_add_eventfd(struct rk_wait *ws, int fd, uint64_t tag, struct rk_error *err)
{
	int id;

	if (fd < 0)
		return rk__err_set(err, EBADF, "rk_wait_add_eventfd", "fd %d", fd);
	id = new_slot(ws);
	if (id < 0)
		return rk__err_set(err, ENOMEM, "rk_wait_add_eventfd", NULL);
	ws->srcs[id] =
	    (struct src){.kind = RK_SRC_EVENTFD, .tag = tag, .fd = fd, .events = EPOLLIN};
	return enable(ws, id, err, "rk_wait_add_eventfd");
}

int rk_wait_add_fd(struct rk_wait *ws, int fd, uint32_t events, uint64_t tag, struct rk_error *err)
{
	int id;

	if (fd < 0)
		return rk__err_set(err, EBADF, "rk_wait_add_fd", "fd %d", fd);
	if (!events || (events & (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE)))
		return rk__err_set(err, EINVAL, "rk_wait_add_fd", "events 0x%x", events);
	id = new_slot(ws);
	if (id < 0)
		return rk__err_set(err, ENOMEM, "rk_wait_add_fd", NULL);
	ws->srcs[id] = (struct src){.kind = RK_SRC_FD, .tag = tag, .fd = fd, .events = events};
	return enable(ws, id, err, "rk_wait_add_fd");
}

int rk_wait_remove(struct rk_wait *ws, int id)
{
	struct src *s;

	if (id < 0 || id >= ws->nsrcs || !ws->srcs[id].used)
		return -ENOENT;
	s = &ws->srcs[id];
	if (s->fd >= 0) {
		/* A closed fd has left epoll already: ENOENT/EBADF are fine. */
		if (epoll_ctl(ws->epfd, EPOLL_CTL_DEL, s->fd, NULL) && errno != ENOENT &&
		    errno != EBADF)
			rk_warn("epoll_ctl DEL fd %d: %s", s->fd, strerror(errno));
		ws->nfds--;
	}
	if (s->kind == RK_SRC_CQ) {
		int k = 0;

		while (ws->cq_ids[k] != id)
			k++;
		memmove(&ws->cq_ids[k], &ws->cq_ids[k + 1],
			(size_t)(ws->ncq - k - 1) * sizeof(ws->cq_ids[0]));
		ws->ncq--;
	}
	free(s->wc);
	memset(s, 0, sizeof(*s));
	return 0;
}

int rk_wait_fd(const struct rk_wait *ws)
{
	return ws->epfd;
}

int rk_wait_wake(struct rk_wait *ws)
{
	uint64_t one = 1;

	atomic_fetch_add(&ws->wakes, 1);
	if (write(ws->wakefd, &one, sizeof(one)) != (ssize_t)sizeof(one) && errno != EAGAIN)
		return -errno;
	return 0;
}

static struct rk_wait_event *next_event(struct rk_wait_event *out, int *got, const struct src *s,
					int id)
{
	struct rk_wait_event *e = &out[(*got)++];

	memset(e, 0, sizeof(*e));
	e->src = s ? s->kind : RK_SRC_WAKE;
	e->id = id;
	e->tag = s ? s->tag : 0;
	e->fd = s ? s->fd : -1;
	return e;
}

/*
 * Report the wake-ups counted so far. The eventfd is read first (which clears
 * its level), the counter after: a wake-up racing with us is then either
 * counted now or leaves the eventfd readable for the next wait.
 */
static void take_wakes(struct rk_wait *ws, struct rk_wait_event *out, int *got)
{
	unsigned long w;
	uint64_t v;

	if (read(ws->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		rk_dbg("wake-up eventfd: %s", strerror(errno));
	ws->wake_pending = 0;
	w = atomic_exchange(&ws->wakes, 0);
	if (w)
		next_event(out, got, NULL, -1)->count = w;
}

/*
 * Poll every CQ source (arming first in the sleeping modes when needed),
 * from the list of CQs alone: the other sources (fds, connections, slots
 * left by removed ones) cost a spin nothing.
 *
 * A CQ whose channel fired has its one event read (an armed CQ raises one)
 * and is polled before it is armed again: what woke the waiter goes to the
 * caller at once, and the arming (a system call, and on Soft-RoCE a
 * command to the kernel) waits for the next pass that may sleep, after the
 * caller has answered what came. Only a wake-up that finds nothing arms at
 * once, then polls again (a completion before the arming raises no
 * event). A CQ not armed holds no event in its channel: armed without a
 * read.
 */
static int poll_cqs(struct rk_wait *ws, struct rk_wait_event *out, int n, int *got, int arm,
		    struct rk_error *err)
{
	int m = ws->ncq;
	int j = ws->rr < (unsigned)m ? (int)ws->rr : 0; /* rk_wait keeps it below ncq */

	for (int k = 0; k < m && *got < n; k++, j = j + 1 == m ? 0 : j + 1) {
		int id = ws->cq_ids[j];
		struct src *s = &ws->srcs[id];
		struct rk_wait_event *e;
		int r = 0, polled = 0;

		if (arm && s->fired) {
			s->fired = 0;
			r = rk__cq_consume_one(s->cq, err);
			if (!r) {
				r = rk_cq_poll(s->cq, s->wc, s->max_wc, err);
				polled = 1;
			}
			if (r < 0)
				return r;
		}
		if (arm && !r && !s->cq->armed) {
			r = rk__cq_arm_unarmed(s->cq, err);
			if (r)
				return r;
			polled = 0;
		}
		if (!polled)
			r = rk_cq_poll(s->cq, s->wc, s->max_wc, err);
		if (r < 0)
			return r;
		if (r == 0)
			continue;
		e = next_event(out, got, s, id);
		e->cq = s->cq;
		e->wc = s->wc;
		e->nwc = r;
	}
	return 0;
}

/*
 * Whether @conn's CQ may have completions the caller has not seen yet:
 * taken into @out by this call, or its channel found readable in this
 * epoll pass (marked FIRED_NOW, polled next) or, in event mode, in an
 * earlier one and not polled since (a pass that keeps a place for the fds
 * may not reach every CQ; in event mode every CQ it reaches is polled
 * and its flag cleared, while the spin of the other modes leaves the flag
 * as it was).
 * Its CM events wait until it has none: a peer's last messages and its
 * disconnect often come together, and the caller must handle (repost,
 * answer) what arrived while the connection still says CONNECTED.
 */
static int cq_busy(const struct rk_wait *ws, const struct rk_conn *conn,
		   const struct rk_wait_event *out, int got)
{
	const struct rk_cq *cq = rk_conn_cq(conn);

	for (int i = 0; i < got; i++)
		if (out[i].src == RK_SRC_CQ && out[i].cq == cq)
			return 1;
	for (int i = 0; i < ws->nsrcs; i++)
		if (ws->srcs[i].used && ws->srcs[i].kind == RK_SRC_CQ && ws->srcs[i].cq == cq)
			return ws->srcs[i].fired == FIRED_NOW ||
			       (ws->mode == RK_WAIT_EVENT && ws->srcs[i].fired);
	return 0;
}

/* One fd source epoll reported: handle and report it (CQs are only marked). */
static void fd_fired(struct rk_wait *ws, uint64_t data, uint32_t revents, struct rk_wait_event *out,
		     int n, int *got)
{
	struct rk_wait_event *e;
	struct src *s;
	uint64_t v;
	int r;

	if (data == WAKE_ID) {
		ws->wake_pending = 1;
		return;
	}
	if (data >= (uint64_t)ws->nsrcs || !ws->srcs[data].used)
		return; /* removed while its event was queued */
	s = &ws->srcs[data];
	if (s->kind == RK_SRC_CQ) {
		s->fired = FIRED_NOW;
		return;
	}
	if (*got >= n) {
		ws->fd_starved = 1;
		return; /* level-triggered: it fires again next time */
	}
	switch (s->kind) {
	case RK_SRC_CONN:
		if (s->deferred < MAX_DEFER && cq_busy(ws, s->conn, out, *got)) {
			s->deferred++;
			return; /* level-triggered: it fires again once the CQ is drained */
		}
		s->deferred = 0;
		r = rk_conn_progress(s->conn, 0, NULL);
		e = next_event(out, got, s, (int)data);
		e->conn = s->conn;
		/* A channel that cannot be read stays readable: report it as broken. */
		e->state = r < 0 ? RK_CONN_ERROR : (enum rk_conn_state)r;
		break;
	case RK_SRC_EVENTFD:
		if (read(s->fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
			return; /* someone else read it first */
		next_event(out, got, s, (int)data)->count = v;
		break;
	default:
		next_event(out, got, s, (int)data)->revents = revents;
		break;
	}
}

static int is_conn(const struct rk_wait *ws, uint64_t data)
{
	return data < (uint64_t)ws->nsrcs && ws->srcs[data].used &&
	       ws->srcs[data].kind == RK_SRC_CONN;
}

/* One epoll_wait of up to @timeout_ms; handles what it returns. */
static int epoll_pass(struct rk_wait *ws, struct rk_wait_event *out, int n, int *got,
		      int timeout_ms, struct rk_error *err)
{
	int k = epoll_wait(ws->epfd, ws->evs, EPOLL_BATCH, timeout_ms);

	ws->fd_starved = 0;
	if (k < 0) {
		if (errno == EINTR)
			return 0;
		return rk__err_sys(err, "epoll_wait", NULL);
	}
	/* CQs first: a CM event defers to completions of its connection (cq_busy). */
	for (int i = 0; i < k; i++)
		if (!is_conn(ws, ws->evs[i].data.u64))
			fd_fired(ws, ws->evs[i].data.u64, ws->evs[i].events, out, n, got);
	for (int i = 0; i < k; i++)
		if (is_conn(ws, ws->evs[i].data.u64))
			fd_fired(ws, ws->evs[i].data.u64, ws->evs[i].events, out, n, got);
	for (int i = 0; i < ws->nsrcs; i++)
		if (ws->srcs[i].fired == FIRED_NOW)
			ws->srcs[i].fired = 1;
	return k;
}

#define UNTIL_LAZY (-2) /* spin(): the deadline is @after_us from the first clock reading */

/*
 * How often spin() reads the clock: every CLOCK_EVERY_MS spins for a
 * deadline in milliseconds (rk_wait's timeout, lazy), every
 * CLOCK_EVERY_US for adaptive mode's spin of a few microseconds. Where
 * the clock source is not the TSC (HPET under emulation, some VMs), a
 * reading is a system call of microseconds.
 */
#define CLOCK_EVERY_MS 1024
#define CLOCK_EVERY_US 64

/*
 * The clock: 1 when @until_us has passed. A lazy deadline starts at the
 * first look: a wait that ends before its first look reads no clock at all.
 */
static int clock_passed(int64_t *until_us, int64_t after_us)
{
	int64_t now = rk__now_us();

	if (*until_us == UNTIL_LAZY) {
		*until_us = now + after_us;
		return after_us <= 0;
	}
	return now >= *until_us;
}

/*
 * spin()'s look at the fds: one epoll pass that does not sleep. A spin
 * reads the wake-up eventfd when the counter says a wake-up is pending;
 * one whose counter was taken before its write reached the eventfd
 * (rk_wait_wake adds, then writes; a spinning waiter is that quick) leaves
 * it readable with nothing to report, and so the set's fd, for every
 * caller that polls rk_wait_fd() (the RPC server's one-connection wait:
 * a poll(2) on every call), until the next wake-up. Read here once seen,
 * as sleep_wait() does; it reports a wake-up only when one is counted.
 */
static int spin_look(struct rk_wait *ws, struct rk_wait_event *out, int n, int *got,
		     struct rk_error *err)
{
	int r = epoll_pass(ws, out, n, got, 0, err);

	if (r > 0 && ws->wake_pending && *got < n)
		take_wakes(ws, out, got);
	return r;
}

/*
 * Spin until something fires or @until_us passes (-1 = forever,
 * UNTIL_LAZY = @after_us from the first look at the clock; @once: one pass
 * only). The fds cost a system call (epoll_wait) to look at, the CQs none:
 * the fds are looked at every FD_EVERY spins, counted across calls (a
 * caller that gets a completion on every call still sees its CM events and
 * sockets), and once more before a wait ends empty-handed. A deadline is
 * checked every clock_every spins and starts (UNTIL_LAZY) at the first
 * check: a busy wait ends up to twice CLOCK_EVERY_MS spins late, never
 * early.
 */
static int spin(struct rk_wait *ws, struct rk_wait_event *out, int n, int64_t until_us,
		int64_t after_us, int once, unsigned spins, struct rk_error *err)
{
	unsigned clock_every = until_us == UNTIL_LAZY ? CLOCK_EVERY_MS : CLOCK_EVERY_US;
	int got = 0, r;

	for (;; spins++) {
		int looked = 0; /* the fds, in this spin */

		/*
		 * A look at the fds that is due but found the caller's array
		 * full (CQs enough to fill it on every call) keeps a place
		 * in it this time, first in the spin when the array has one:
		 * a busy server must still see a new client or a disconnect.
		 */
		int due = ws->nfds && ws->fd_spins >= FD_EVERY;

		if (atomic_load_explicit(&ws->wakes, memory_order_relaxed))
			take_wakes(ws, out, &got);
		if (due && n == 1 && !got) {
			ws->fd_spins = 0;
			looked = 1;
			r = spin_look(ws, out, n, &got, err);
			if (r < 0)
				return r;
		}
		if (got < n) {
			r = poll_cqs(ws, out, due && !looked ? n - 1 : n, &got, 0, err);
			if (r)
				return r;
		}
		ws->fd_spins += got ? FD_BUSY : 1;
		if (!looked && ws->nfds && got < n && ws->fd_spins >= FD_EVERY) {
			ws->fd_spins = 0;
			looked = 1;
			r = spin_look(ws, out, n, &got, err);
			if (r < 0)
				return r;
		}
		if (got)
			return got;
		if (once || (spins % clock_every == clock_every - 1 && until_us != -1 &&
			     clock_passed(&until_us, after_us))) {
			if (ws->nfds && !looked) {
				r = spin_look(ws, out, n, &got, err);
				if (r < 0)
					return r;
			}
			return got ? got : -ETIMEDOUT;
		}
	}
}

/*
 * spin() for a set of one CQ (a server with one connection, a client):
 * the CQ alone is polled, in a loop of its own, while no look at the fds
 * is due, no wake-up is counted and the clock is not yet to be read; the
 * first completions found are one event written field by field. Then (or
 * for timeout 0 after one empty poll) spin() goes on, counting these
 * spins as its own: the fds, the wake-ups and the deadline are looked at
 * when they would have been. Each empty spin costs the provider's poll
 * and a few instructions.
 */
static int spin_one(struct rk_wait *ws, struct rk_wait_event *out, int n, int timeout_ms,
		    struct rk_error *err)
{
	const int id = ws->cq_ids[0];
	const struct src *s = &ws->srcs[id];
	const unsigned limit = timeout_ms == 0 ? 1 : CLOCK_EVERY_MS - 1;
	const unsigned fd_limit = ws->nfds ? FD_EVERY - FD_BUSY : UINT_MAX;
	unsigned spins = 0;

	while (spins < limit && ws->fd_spins < fd_limit &&
	       !atomic_load_explicit(&ws->wakes, memory_order_relaxed)) {
		int r = rk_cq_poll(s->cq, s->wc, s->max_wc, err);

		if (r > 0) {
			ws->fd_spins += FD_BUSY;
			*out = (struct rk_wait_event){.tag = s->tag,
						      .cq = s->cq,
						      .wc = s->wc,
						      .src = RK_SRC_CQ,
						      .id = id,
						      .nwc = r,
						      .fd = -1};
			return 1;
		}
		if (r < 0)
			return r;
		ws->fd_spins++;
		spins++;
	}
	return spin(ws, out, n, timeout_ms < 0 ? -1 : UNTIL_LAZY, (int64_t)timeout_ms * 1000,
		    timeout_ms == 0, spins, err);
}

/*
 * Arm, poll, sleep in epoll_wait; repeat until something fires or the
 * deadline. When the last pass found fds ready and the CQs had filled the
 * caller's array, a place is kept for the fds this time (with room for one
 * event, they are looked at first): as in spin(), CQs that fill the array
 * on every call must not hide a new client, a disconnect or an eventfd.
 */
static int sleep_wait(struct rk_wait *ws, struct rk_wait_event *out, int n, int64_t deadline_ms,
		      struct rk_error *err)
{
	int got = 0, r = 0, left, slept = 0;

	for (;;) {
		int starved = ws->fd_starved, looked = 0;

		if (ws->wake_pending)
			take_wakes(ws, out, &got);
		if (starved && n == 1 && !got) {
			r = epoll_pass(ws, out, n, &got, 0, err);
			if (r < 0)
				return r;
			looked = 1;
		}
		if (got < n) {
			r = poll_cqs(ws, out, starved && n > 1 ? n - 1 : n, &got, 1, err);
			if (r)
				return r;
		}
		left = got ? 0 : rk__ms_left(deadline_ms);
		/*
		 * The fds once per call at least: a pass that slept in this
		 * call (and left none waiting for room) has looked at them
		 * already, and CQs it woke for need no second look.
		 */
		if (!got || (!looked && !(slept && !ws->fd_starved))) {
			r = epoll_pass(ws, out, n, &got, left, err);
			if (r < 0)
				return r;
			slept = 1;
		}
		if ((ws->wake_pending || atomic_load(&ws->wakes)) && got < n)
			take_wakes(ws, out, &got);
		if (got)
			return got;
		if (left == 0 && r == 0)
			return -ETIMEDOUT;
	}
}

/*
 * A look (timeout 0) that finds nothing is how a caller that polls hears
 * "nothing yet", not a failure, and its error object is the same every
 * time: made once (strerror, the hint, the message: some 6,000
 * instructions, what an rk copy lane's look once a MiB cost) and copied.
 */
static struct rk_error look_timeout;
static pthread_once_t look_timeout_once = PTHREAD_ONCE_INIT;

static void look_timeout_init(void)
{
	rk__err_set(&look_timeout, ETIMEDOUT, "rk_wait", "nothing fired within %d ms", 0);
}

static void timed_out(int timeout_ms, struct rk_error *err)
{
	if (!err)
		return;
	if (timeout_ms) {
		rk__err_set(err, ETIMEDOUT, "rk_wait", "nothing fired within %d ms", timeout_ms);
		return;
	}
	pthread_once(&look_timeout_once, look_timeout_init);
	*err = look_timeout;
}

int rk_wait(struct rk_wait *ws, struct rk_wait_event *out, int n, int timeout_ms,
	    struct rk_error *err)
{
	int64_t deadline, until;
	int r;

	if (n <= 0)
		return rk__err_set(err, EINVAL, "rk_wait", "room for %d events", n);
	if (ws->ncq)
		ws->rr = ws->rr + 1 < (unsigned)ws->ncq ? ws->rr + 1 : 0;
	if (ws->mode == RK_WAIT_BUSY && ws->ncq == 1) {
		r = spin_one(ws, out, n, timeout_ms, err);
	} else if (ws->mode == RK_WAIT_BUSY) {
		r = spin(ws, out, n, timeout_ms < 0 ? -1 : UNTIL_LAZY, (int64_t)timeout_ms * 1000,
			 timeout_ms == 0, 0, err);
	} else {
		deadline = rk__deadline(timeout_ms);
		r = -ETIMEDOUT;
		if (ws->mode == RK_WAIT_ADAPTIVE) {
			until = rk__now_us() + ws->spin_us;
			if (deadline >= 0 && until > deadline * 1000)
				until = deadline * 1000;
			r = spin(ws, out, n, until, 0, 0, 0, err);
		}
		if (r == -ETIMEDOUT)
			r = sleep_wait(ws, out, n, deadline, err);
	}
	if (r == -ETIMEDOUT)
		timed_out(timeout_ms, err);
	return r;
}
