/*
 * copy_serve_pull.c - rk serve --read: a client that pulls gets a session
 * thread that runs the sending side of rk copy (copy_send.c) over the
 * connection the client made, with the roles of a push turned round: the
 * client registers the ring and says what it holds (--resume), this side
 * reads files and writes them into the client's slots.
 *
 * What a client may read is what its PULL names under DIR, planned by
 * cp_plan_build_beneath: paths checked like any name from a peer, looked
 * up beneath DIR without following a symlink, symlinks inside trees
 * skipped, at most --max-files entries. The session has a protection
 * domain of its own, and everything it registers is local-access only:
 * the client's QP reaches no memory of this process.
 *
 * With lanes (rk copy --num-qp), the client connects its further lanes
 * after its WELCOME, with the key that WELCOME carried; the session
 * enters the server's registry under that key (copy_recv.h: cp_reg), the
 * listener hands it the requests, and the sender accepts them. The key is
 * the client's choice here: it can name only its own session with it.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <rdmakit/pd.h>

#include "cli.h"
#include "copy_plan.h"
#include "copy_recv.h"
#include "copy_send.h"
#include "copy_serve_pull.h"

/* Entries one pull may plan (and --max-files, if lower): a bound on the plan's memory. */
#define PULL_MAX_ITEMS 100000u

struct pull_session {
	struct cp_server *srv;
	struct rk_cm_request *req;
	char peer[64];
	int answered; /* on_pull ran: it logged the plan or the refusal */
	struct cp_plan plan;
	struct cp_reg reg; /* with lanes: the session in the server's registry */
	int in_reg;
	struct rk_cm_request *got[CP_MAX_LANES]; /* lanes handed over, not yet taken */
};

static void plog(const struct pull_session *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void plog(const struct pull_session *ps, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printf("rk serve: %s: %s\n", ps->peer, line);
	fflush(stdout);
}

/* The client's PULL: plan it beneath DIR. 0, or a CP_E_* code with @why for the client. */
static int on_pull(void *arg, const struct cp_pull *p, struct cp_plan *plan, char *why,
		   size_t why_len)
{
	struct pull_session *ps = arg;
	char *srcs[CP_PULL_MAX_SRC] = {0}, dest[CP_NAME_MAX + 1];
	int r = -1;

	ps->answered = 1;
	for (unsigned i = 0; i < p->nsrc; i++) {
		srcs[i] = strndup(p->src[i], p->src_len[i]);
		if (!srcs[i]) {
			snprintf(why, why_len, "server out of memory");
			goto out;
		}
	}
	memcpy(dest, p->dest, p->dest_len);
	dest[p->dest_len] = '\0';
	/*
	 * The tests play a hostile server with this (and the plan's own name
	 * check off, RK_COPY_TEST_UNCHECKED_NAMES): every name under it.
	 */
	if (getenv("RK_SERVE_TEST_PULL_DEST"))
		snprintf(dest, sizeof(dest), "%s", getenv("RK_SERVE_TEST_PULL_DEST"));
	r = cp_plan_build_beneath(
	    plan, ps->srv->rootfd, srcs, p->nsrc, dest, p->options & CP_PULL_RECURSIVE,
	    ps->srv->max_files < PULL_MAX_ITEMS ? ps->srv->max_files : PULL_MAX_ITEMS, why,
	    why_len);
out:
	for (unsigned i = 0; i < p->nsrc; i++)
		free(srcs[i]);
	if (r) {
		plog(ps, "pull refused: %s", why);
		return r == -2 ? CP_E_PATH : r == CP_PLAN_LIMIT ? CP_E_LIMIT : CP_E_IO;
	}
	if (plan->linked)
		plog(ps, "pull: left out %zu file(s) with more than one hard link (%s%s)",
		     plan->linked, plan->linked_name, plan->linked > 1 ? ", ..." : "");
	plog(ps, "pull of %zu files, %zu directories", plan->files, plan->dirs);
	return 0;
}

/* cp_send's join: lane @idx's request, once the listener has handed it over. */
static struct rk_cm_request *join(void *arg, const uint8_t *key, unsigned nlanes, unsigned idx,
				  int timeout_ms)
{
	struct pull_session *ps = arg;
	uint64_t t0 = cli_now_ns();

	if (ps->reg.evfd < 0 || idx >= CP_MAX_LANES)
		return NULL;
	if (!ps->in_reg) {
		memcpy(ps->reg.key, key, CP_KEY_LEN);
		ps->reg.want_lanes = nlanes;
		cp_reg_add(ps->srv, &ps->reg);
		ps->in_reg = 1;
	}
	for (;;) {
		struct rk_cm_request *reqs[CP_MAX_LANES];
		struct pollfd pfd = {.fd = ps->reg.evfd, .events = POLLIN};
		struct rk_cm_request *r;
		int64_t left;

		if (cp_reg_take(ps->srv, &ps->reg, reqs) < 0)
			return NULL;
		for (unsigned l = 0; l < CP_MAX_LANES; l++)
			if (reqs[l])
				ps->got[l] = reqs[l];
		if (ps->got[idx]) {
			r = ps->got[idx];
			ps->got[idx] = NULL;
			if (idx + 1 == nlanes)
				plog(ps, "pull over %u lanes", nlanes);
			return r;
		}
		left = (int64_t)timeout_ms - (int64_t)((cli_now_ns() - t0) / 1000000);
		if (left <= 0 || atomic_load(ps->srv->stop))
			return NULL;
		if (poll(&pfd, 1, left < 200 ? (int)left : 200) < 0 && errno != EINTR)
			return NULL;
	}
}

/* Leave the registry: lanes handed over and not taken are refused. */
static void leave(struct pull_session *ps)
{
	if (ps->in_reg)
		cp_reg_remove(ps->srv, &ps->reg);
	for (unsigned l = 0; l < CP_MAX_LANES; l++)
		if (ps->got[l])
			rk_cm_request_reject(ps->got[l], RK_REJECT_ENDED, "session is over", NULL);
	if (ps->reg.evfd >= 0)
		close(ps->reg.evfd);
}

static void *pull_main(void *arg)
{
	struct pull_session *ps = arg;
	struct cp_server *srv = ps->srv;
	struct cp_progress prog;
	struct cp_send_fate fate;
	struct cp_send_opts o = {.chunk = 1u << 20, .depth = 8, .lanes = 1};
	struct rk_error e;
	struct rk_pd *pd = NULL;
	char why[512], bytes[32];
	uint64_t t0 = cli_now_ns(), sent = 0;
	size_t ok = 0;
	int rc;

	cli_name_thread("rk-pull");
	cp_progress_init(&prog, 0, 0, 0);
	if (rk_pd_alloc(srv->dev, &e, &pd)) {
		rk_cm_request_reject(ps->req, RK_REJECT_BUSY, "server out of resources", NULL);
		plog(ps, "%s", rk_error_str(&e));
		goto out;
	}
	o.device = srv->dev;
	o.pd = pd;
	o.accept = ps->req;
	o.on_pull = on_pull;
	o.on_pull_arg = ps;
	o.join = ps->reg.evfd >= 0 ? join : NULL; /* without: one lane, whatever is asked */
	o.join_arg = ps;
	o.idle_ms = srv->idle_ms;
	o.progress = &prog;
	o.max_stage = srv->max_ring;
	o.stop = srv->stop;
	plog(ps, "connected (pull)");
	rc = cp_send(&o, &ps->plan, &fate, why, sizeof(why));
	for (size_t i = 0; i < ps->plan.n; i++) {
		const struct cp_item *it = &ps->plan.items[i];

		if (it->is_dir)
			continue;
		if (it->local_err[0])
			plog(ps, "%s not sent: %s", it->src, it->local_err);
		if (it->state == CP_ITEM_DONE && !it->local_err[0] &&
		    (it->code == CP_OK || it->code == CP_E_UPTODATE)) {
			ok++;
			sent += it->size;
		}
	}
	if (rc && !ps->answered)
		plog(ps, "pull ended before its request: %s", why);
	else if (!rc || ps->plan.n)
		plog(ps, "pull: %zu of %zu files sent or up to date (%s) in %.2f s%s%s", ok,
		     ps->plan.files, cli_fmt_bytes(sent, bytes, sizeof(bytes)),
		     (double)(cli_now_ns() - t0) / 1e9, rc ? "; ended: " : "", rc ? why : "");
	SM_ADD(srv->metrics, bytes_sent, sent);
	if (rc)
		SM_ADD(srv->metrics,
		       failed[atomic_load(srv->stop) ? SM_FAIL_SHUTDOWN : SM_FAIL_ERROR], 1);
out:
	leave(ps);
	cp_plan_free(&ps->plan);
	rk_pd_free(pd);
	free(ps);
	/* Last: the main thread closes the device once no session is active. */
	atomic_fetch_sub(&srv->active, 1);
	return NULL;
}

int cp_pull_session_start(struct cp_server *srv, struct rk_cm_request *req)
{
	struct pull_session *ps = calloc(1, sizeof(*ps));
	pthread_attr_t attr;
	pthread_t th;
	int r;

	if (!ps) {
		rk_cm_request_reject(req, RK_REJECT_BUSY, "server out of memory", NULL);
		return -ENOMEM;
	}
	ps->srv = srv;
	ps->req = req;
	snprintf(ps->peer, sizeof(ps->peer), "%s", rk_cm_request_peer(req));
	ps->reg.peer = ps->peer;
	/* Without it a pull gets no further lanes (join refuses); one still works. */
	ps->reg.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r = pthread_attr_init(&attr);
	if (r)
		goto fail;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	atomic_fetch_add(&srv->active, 1);
	r = pthread_create(&th, &attr, pull_main, ps);
	pthread_attr_destroy(&attr);
	if (r) {
		atomic_fetch_sub(&srv->active, 1);
		goto fail;
	}
	return 0;
fail:
	rk_cm_request_reject(req, RK_REJECT_BUSY, "server could not start a session", NULL);
	if (ps->reg.evfd >= 0)
		close(ps->reg.evfd);
	free(ps);
	return -r;
}
