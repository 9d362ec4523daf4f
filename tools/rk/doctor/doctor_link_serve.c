/*
 * doctor_link_serve.c - the listener's side of rk doctor's link test: it
 * accepts only the client under test (its nonce, from its TCP address),
 * then does each step the client asks for and answers with its result.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdmakit/cm.h>
#include <rdmakit/conn.h>
#include <rdmakit/cq.h>
#include <rdmakit/explain.h>
#include <rdmakit/mr.h>
#include <rdmakit/pd.h>
#include <rdmakit/post.h>

#include "cli.h"
#include "common/deadline.h"
#include "doctor_link_int.h"
#include "doctor_peer.h"

struct server {
	struct doc_link *l;
	int fd;
	const struct doc_facts *client;
	const char *ip;
	int step_ms;
};

/* The client's own request: its nonce, from its TCP address. */
static int is_client(const struct server *s, struct rk_cm_request *req)
{
	const char *p = rk_cm_request_peer(req);
	size_t n = strlen(s->ip);

	if (p[0] == '[')
		p++;
	return rk_cm_request_hello(req)->app_arg == s->client->nonce && strncmp(p, s->ip, n) == 0 &&
	       (p[n] == ':' || p[n] == ']');
}

static void serve_connect(struct server *s, struct step_res *res)
{
	uint64_t deadline = cli_deadline_in(s->step_ms + CONNECT_SLACK_MS);
	struct rk_error err;

	if (s->l->conn) {
		snprintf(res->text, sizeof(res->text), "already connected");
		return;
	}
	for (;;) {
		struct rk_cm_request *req;
		struct rk_conn_opts o;
		int r, ms = cli_deadline_ms_left(deadline);

		if (ms == 0) {
			res->timed_out = 1;
			snprintf(res->text, sizeof(res->text),
				 "no connection request arrived within %d ms",
				 s->step_ms + CONNECT_SLACK_MS);
			return;
		}
		r = rk_listener_get_request(s->l->lis, ms, &err, &req);
		if (r == -ETIMEDOUT || r == -EAGAIN)
			continue;
		if (r) {
			snprintf(res->text, sizeof(res->text), "%s", rk_error_str(&err));
			return;
		}
		if (!is_client(s, req)) {
			fprintf(stderr,
				"rk doctor: refusing a connection from %s: not the peer under "
				"test\n",
				rk_cm_request_peer(req));
			rk_cm_request_reject(req, RK_REJECT_APP, "not the peer under test", NULL);
			continue;
		}
		o = doc_link_conn_opts(s->l, s->client->active_mtu, 4096);
		r = rk_cm_request_accept(req, &o, NULL, 0, s->step_ms, &err, &s->l->conn);
		if (r) {
			snprintf(res->text, sizeof(res->text), "accept: %s", rk_error_str(&err));
			return;
		}
		res->ok = 1;
		res->value = rk_mtu_bytes(rk_conn_path_mtu(s->l->conn));
		snprintf(res->text, sizeof(res->text), "the peer accepted it, path MTU %" PRId64,
			 res->value);
		return;
	}
}

static void serve_step(struct server *s, int step, struct step_res *res)
{
	struct doc_link *l = s->l;
	int ms = s->step_ms;

	if (step != DOC_STEP_CONNECT && !l->conn) {
		snprintf(res->text, sizeof(res->text), "not connected");
		return;
	}
	switch (step) {
	case DOC_STEP_CONNECT:
		serve_connect(s, res);
		break;
	case DOC_STEP_SEND_OUT:
		if (!doc_link_wait_wc(l, 0, ms, res))
			doc_link_verify(l->seed, step, doc_link_slot(l, SLOT_RECV), DOC_XFER_LEN,
					res);
		break;
	case DOC_STEP_SEND_IN:
		doc_link_pattern(l->seed, step, doc_link_slot(l, SLOT_SEND), DOC_XFER_LEN);
		res->ok =
		    !doc_link_post_wait(l, RK_OP_SEND, SLOT_SEND, DOC_XFER_LEN, 0, 0, ms, res);
		if (res->ok)
			snprintf(res->text, sizeof(res->text), "sent");
		break;
	case DOC_STEP_WRITE_OUT:
		doc_link_verify(l->seed, step, rk_mr_addr(l->inbox), DOC_XFER_LEN, res);
		break;
	case DOC_STEP_WRITE_IN:
		doc_link_pattern(l->seed, step, doc_link_slot(l, SLOT_SEND), DOC_XFER_LEN);
		res->ok = !doc_link_post_wait(l, RK_OP_WRITE, SLOT_SEND, DOC_XFER_LEN,
					      s->client->wr_addr, s->client->wr_rkey, ms, res);
		if (res->ok)
			snprintf(res->text, sizeof(res->text), "written");
		break;
	case DOC_STEP_READ_IN:
		memset(doc_link_slot(l, SLOT_READ), 0, DOC_XFER_LEN);
		if (!doc_link_post_wait(l, RK_OP_READ, SLOT_READ, DOC_XFER_LEN, s->client->rd_addr,
					s->client->rd_rkey, ms, res))
			doc_link_verify(l->seed, step, doc_link_slot(l, SLOT_READ), DOC_XFER_LEN,
					res);
		break;
	case DOC_STEP_RTT:
		for (int i = 0; i < DOC_RTT_ROUNDS; i++) {
			uint64_t id;

			if (doc_link_wait_wc(l, 0, ms, res) ||
			    doc_link_post(l, RK_OP_SEND, SLOT_RTT, RTT_LEN, 0, 0, &id, res))
				return;
		}
		res->ok = 1;
		snprintf(res->text, sizeof(res->text), "%d echoes", DOC_RTT_ROUNDS);
		break;
	default: /* READ_OUT needs nothing of us */
		snprintf(res->text, sizeof(res->text), "nothing to do");
		break;
	}
}

void doc_link_serve(struct doc_link *l, int fd, const struct doc_facts *client,
		    const char *client_ip, int step_ms, uint64_t deadline_ns)
{
	struct server s = {.l = l, .fd = fd, .client = client, .ip = client_ip, .step_ms = step_ms};

	l->seed = client->seed;
	doc_link_pattern(l->seed, DOC_STEP_READ_OUT, rk_mr_addr(l->outbox), DOC_XFER_LEN);
	for (;;) {
		struct doc_msg m, out = {.type = DOC_MSG_RESULT};
		struct step_res res = {.wc_status = -1};
		struct rk_error err;
		int ms = cli_deadline_ms_left(deadline_ns), r;

		if (ms == 0) {
			fprintf(stderr, "rk doctor: %s: the session's time is up\n", client_ip);
			return;
		}
		r = doc_ctl_recv(fd, &m, ms, &err);
		if (r == -ECONNRESET)
			return; /* the client is done */
		if (r) {
			fprintf(stderr, "rk doctor: %s: %s\n", client_ip, err.msg);
			return;
		}
		if (m.type != DOC_MSG_DO) {
			fprintf(stderr, "rk doctor: %s: a message out of turn\n", client_ip);
			return;
		}
		serve_step(&s, m.step, &res);
		fprintf(stderr, "rk doctor: %s: %s: %s%s\n", client_ip, doc_step_name(m.step),
			res.ok ? "ok: " : "failed: ", res.text);
		out.step = m.step;
		out.ok = res.ok;
		out.wc_status = res.wc_status;
		out.timed_out = res.timed_out;
		out.value = res.value;
		snprintf(out.text, sizeof(out.text), "%s", res.text);
		if (doc_ctl_send(fd, &out, step_ms, &err)) {
			fprintf(stderr, "rk doctor: %s: %s\n", client_ip, err.msg);
			return;
		}
	}
}
