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
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		return r == -2 ? CP_E_PATH : strncmp(why, "limit", 5) ? CP_E_IO : CP_E_LIMIT;
	}
	plog(ps, "pull of %zu files, %zu directories", plan->files, plan->dirs);
	return 0;
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

	cp_progress_init(&prog, 0, 0);
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
out:
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
	free(ps);
	return -r;
}
