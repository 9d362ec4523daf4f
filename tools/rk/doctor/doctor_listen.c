/*
 * doctor_listen.c - rk doctor --listen: the other end of rk doctor HOST.
 * One peer at a time: its facts, ours (the local checks run again for each
 * peer, since the set-up may have changed), then the link test it asks for,
 * the whole session bounded in time. A connection that does not speak rk
 * doctor is logged and closed; the listener goes on.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rdmakit/oob.h>

#include "cli.h"
#include "doctor_peer.h"

#define ACCEPT_MS 60000

static void refuse(int fd, const char *ip, const char *why, int step_ms)
{
	struct doc_msg m = {.type = DOC_MSG_ERROR};

	snprintf(m.text, sizeof(m.text), "%s", why);
	fprintf(stderr, "rk doctor: %s: %s\n", ip, why);
	doc_ctl_send(fd, &m, step_ms, NULL);
}

static void session(int fd, int max_step_ms)
{
	char local[INET6_ADDRSTRLEN], ip[INET6_ADDRSTRLEN], why[RK_ERROR_MSG_MAX + 64];
	struct doc_msg client, me = {.type = DOC_MSG_FACTS};
	struct doc_report r;
	struct rk_device *dev = NULL;
	struct doc_link *link = NULL;
	struct rk_error err;
	int step_ms, quiet = doc_quiet;

	if (doc_sock_addrs(fd, local, ip, sizeof(local)))
		return;
	if (doc_ctl_recv(fd, &client, max_step_ms, &err)) {
		fprintf(stderr, "rk doctor: %s: not an rk doctor client: %s\n", ip, err.msg);
		return;
	}
	if (client.type != DOC_MSG_FACTS) {
		fprintf(stderr, "rk doctor: %s: not an rk doctor client: no facts first\n", ip);
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
		       cli_now_ns() +
			   (uint64_t)(3 * DOC_STEP_COUNT + 2) * (uint64_t)step_ms * 1000000);
	fprintf(stderr, "rk doctor: %s: done\n", ip);
out:
	doc_link_close(link);
	rk_device_close(dev);
	doc_report_free(&r);
}

int doc_listen(const char *addr, const char *port, int once, int max_step_ms)
{
	struct rk_error err;
	int lfd = rk_tcp_listen(addr, port, &err);

	if (lfd < 0) {
		cli_report("doctor", "listen", &err);
		return 1;
	}
	fprintf(stderr, "rk doctor: listening on %s port %s, one peer at a time\n",
		addr ? addr : "any address", port);
	for (;;) {
		int fd = rk_tcp_accept(lfd, ACCEPT_MS, &err);

		if (fd == -ETIMEDOUT)
			continue;
		if (fd < 0) {
			cli_report("doctor", "accept", &err);
			close(lfd);
			return 1;
		}
		session(fd, max_step_ms);
		close(fd);
		if (once)
			break;
	}
	close(lfd);
	return 0;
}
