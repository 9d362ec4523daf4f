/*
 * doctor_session.c - one admitted client of rk doctor --listen, in a
 * process of its own (doctor_listen.c forks it, so that the listener goes
 * on answering other connections meanwhile): the welcome, its facts, ours
 * (the local checks run again for each peer, since the set-up may have
 * changed), then the link test it asks for, the whole session bounded in
 * time (and killed by the listener past DOC_SESSION_MS).
 */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "doctor_peer.h"

static void refuse(int fd, const char *ip, const char *why, int step_ms)
{
	struct doc_msg m = {.type = DOC_MSG_ERROR};

	snprintf(m.text, sizeof(m.text), "%s", why);
	fprintf(stderr, "rk doctor: %s: %s\n", ip, why);
	doc_ctl_send(fd, &m, step_ms, NULL);
}

void doc_session(int fd, const char *local, const char *ip, int checked, int max_step_ms)
{
	char why[RK_ERROR_MSG_MAX + 64];
	struct doc_msg client, me = {.type = DOC_MSG_FACTS}, hi = {.type = DOC_MSG_WELCOME};
	struct doc_report r = {0};
	struct rk_device *dev = NULL;
	struct doc_link *link = NULL;
	struct rk_error err;
	int step_ms, quiet = doc_quiet;

	hi.checked = checked;
	if (doc_ctl_send(fd, &hi, max_step_ms, &err)) {
		fprintf(stderr, "rk doctor: %s: %s\n", ip, err.msg);
		return;
	}
	if (doc_ctl_recv(fd, &client, max_step_ms, &err)) {
		fprintf(stderr, "rk doctor: %s: no facts after the welcome: %s\n", ip, err.msg);
		return;
	}
	if (client.type != DOC_MSG_FACTS) {
		fprintf(stderr, "rk doctor: %s: no facts after the welcome\n", ip);
		return;
	}
	step_ms = client.facts.step_ms;
	if (step_ms < DOC_STEP_MS_MIN)
		step_ms = DOC_STEP_MS_MIN;
	if (step_ms > max_step_ms)
		step_ms = max_step_ms;
	fprintf(stderr, "rk doctor: %s: %s (rk %s) on %s port %d, %d ms per step\n", ip,
		client.facts.host, client.facts.rk_version, client.facts.dev, client.facts.port,
		step_ms);
	doc_quiet = 1;
	doc_run_local(&r);
	doc_quiet = quiet;
	if (doc_local_facts(&r, local, &me.facts, &dev, &err)) {
		snprintf(why, sizeof(why), "no usable RDMA device for %s there: %s", local,
			 rk_error_str(&err));
		refuse(fd, ip, why, step_ms);
		goto out;
	}
	if (doc_link_open(dev, 1, local, 0, &me.facts, &err, &link)) {
		snprintf(why, sizeof(why), "cannot prepare the link test there: %s",
			 rk_error_str(&err));
		refuse(fd, ip, why, step_ms);
		goto out;
	}
	if (doc_ctl_send(fd, &me, step_ms, &err)) {
		fprintf(stderr, "rk doctor: %s: %s\n", ip, err.msg);
		goto out;
	}
	doc_link_serve(link, fd, &client.facts, ip, step_ms,
		       cli_now_ns() + (uint64_t)DOC_LINK_STEPS * (uint64_t)step_ms * 1000000);
	fprintf(stderr, "rk doctor: %s: done\n", ip);
out:
	doc_link_close(link);
	rk_device_close(dev);
	doc_report_free(&r);
}
