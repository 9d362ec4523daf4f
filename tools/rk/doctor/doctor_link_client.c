/*
 * doctor_link_client.c - the client's side of rk doctor's link test: it
 * connects, asks the listener for each step on the control channel, does
 * its own part, and reports both sides' results (text and JSON).
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

struct client {
	struct doc_report *r;
	struct doc_link *l;
	int fd;
	const struct doc_facts *me, *peer;
	const char *pn;
	int step_ms;
	struct json_object *steps;
};

/* The listener's result of @step (it has @ms to produce it). */
static int peer_result(struct client *c, int step, int ms, struct step_res *res)
{
	struct doc_msg m;
	struct rk_error err;
	int r = doc_ctl_recv(c->fd, &m, ms, &err);

	memset(res, 0, sizeof(*res));
	res->wc_status = -1;
	if (!r && (m.type != DOC_MSG_RESULT || m.step != step)) {
		snprintf(res->text, sizeof(res->text), "%s answered out of turn", c->pn);
		return -EPROTO;
	}
	if (r) {
		res->timed_out = r == -ETIMEDOUT;
		snprintf(res->text, sizeof(res->text), "no result from %s: %.160s", c->pn, err.msg);
		return r;
	}
	res->ok = m.ok;
	res->wc_status = m.wc_status;
	res->timed_out = m.timed_out;
	res->value = m.value;
	snprintf(res->text, sizeof(res->text), "%s", m.text);
	return 0;
}

static int ask(struct client *c, int step)
{
	struct doc_msg m = {.type = DOC_MSG_DO, .step = step};

	return doc_ctl_send(c->fd, &m, c->step_ms, NULL);
}

static void step_json(struct client *c, int step, int ok, const char *text, uint64_t t0)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "step", json_object_new_string(doc_step_name(step)));
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	json_object_object_add(o, "ms", json_object_new_double((double)(cli_now_ns() - t0) / 1e6));
	json_object_object_add(o, "text", json_object_new_string(text));
	json_object_array_add(c->steps, o);
}

/* What @step is, in words, into @buf. */
static const char *step_what(int step, const char *pn, char *buf, size_t len)
{
	const char *op = step == DOC_STEP_SEND_OUT || step == DOC_STEP_SEND_IN	   ? "SEND"
			 : step == DOC_STEP_WRITE_OUT || step == DOC_STEP_WRITE_IN ? "RDMA WRITE"
										   : "RDMA READ";

	switch (step) {
	case DOC_STEP_SEND_OUT:
	case DOC_STEP_WRITE_OUT:
		snprintf(buf, len, "%s 4 KiB, this host -> %s", op, pn);
		break;
	case DOC_STEP_SEND_IN:
	case DOC_STEP_WRITE_IN:
		snprintf(buf, len, "%s 4 KiB, %s -> this host", op, pn);
		break;
	case DOC_STEP_READ_OUT:
		snprintf(buf, len, "%s 4 KiB, this host reads %s", op, pn);
		break;
	case DOC_STEP_READ_IN:
		snprintf(buf, len, "%s 4 KiB, %s reads this host", op, pn);
		break;
	case DOC_STEP_CONNECT:
		snprintf(buf, len, "rdma_cm connection");
		break;
	default:
		snprintf(buf, len, "round trip");
		break;
	}
	return buf;
}

/* Which host does the failing part of @step: 0 this one, 1 the peer. */
static int peer_acts(int step)
{
	return step == DOC_STEP_SEND_IN || step == DOC_STEP_WRITE_IN || step == DOC_STEP_READ_IN;
}

/* A failed step: the line, the table's explanation of what was seen, where to look. */
static void step_failed(struct client *c, int step, const struct step_res *mine,
			const struct step_res *theirs)
{
	const struct step_res *bad = mine && !mine->ok ? mine : theirs;
	const char *who = bad == mine ? "this host" : c->pn;
	const struct rk_explain *e = NULL;
	char what[96], check[512];

	step_what(step, c->pn, what, sizeof(what));
	/*
	 * A transfer still unanswered at the deadline is a QP still retrying:
	 * explain what it reports once the retries run out.
	 */
	doc_add(c->r, DOC_FAIL, "link", NULL, "%s: failed at %s: %s%s%s%s", what, who, bad->text,
		bad->timed_out && bad->wc_status < 0 && step != DOC_STEP_CONNECT
		    ? " (the QP was still retrying: it ends in RETRY_EXC_ERR)"
		    : "",
		mine && theirs && bad == mine && theirs->text[0] ? "; the peer: " : "",
		mine && theirs && bad == mine ? theirs->text : "");
	if (bad->wc_status >= 0)
		e = rk_explain_find(RK_EXPLAIN_WC_STATUS, bad->wc_status, NULL);
	else if (bad->timed_out && step != DOC_STEP_CONNECT)
		e = rk_explain_find(RK_EXPLAIN_WC_STATUS, IBV_WC_RETRY_EXC_ERR, NULL);
	else if (bad->timed_out)
		e = rk_explain_find(RK_EXPLAIN_ERRNO, ETIMEDOUT, NULL);
	if (c->l->conn && !strstr(bad->text, "data differs") &&
	    (int)rk_mtu_bytes(rk_conn_path_mtu(c->l->conn)) >
		(c->me->active_mtu < c->peer->active_mtu ? c->me->active_mtu
							 : c->peer->active_mtu)) {
		const struct doc_facts *lo =
		    c->me->active_mtu < c->peer->active_mtu ? c->me : c->peer;

		snprintf(
		    check, sizeof(check),
		    "first the MTU: the connection's path MTU %u is above the active MTU %d of "
		    "%s, whose netdev (MTU %d) drops packets that large: equal netdev MTUs "
		    "at both ends (see mtu above)",
		    rk_mtu_bytes(rk_conn_path_mtu(c->l->conn)), lo->active_mtu,
		    lo == c->me ? "this host" : c->pn, lo->netdev_mtu);
	} else if (strstr(bad->text, "data differs"))
		snprintf(check, sizeof(check),
			 "the transfer completed but the data is wrong: memory or the adapter on "
			 "%s or %s is faulty, or something else writes the buffer; report it",
			 "this host", c->pn);
	else
		snprintf(
		    check, sizeof(check),
		    "the control connection works, so both hosts are up and the IP path is "
		    "fine; on %s: UDP 4791 let in (nft list ruleset; iptables -L -n; tc filter "
		    "show dev %s ingress), port ACTIVE and GID / MTU as above (rk doctor there); "
		    "the log of rk doctor --listen on %s",
		    peer_acts(step) ? "this host" : c->pn,
		    peer_acts(step) ? (c->me->netdev[0] ? c->me->netdev : "IFACE")
				    : (c->peer->netdev[0] ? c->peer->netdev : "IFACE"),
		    c->pn);
	doc_explain(c->r, e, check);
}

static int do_connect(struct client *c)
{
	char port[8];
	struct rk_hello h = {.app_id = DOC_APP_ID, .app_arg = c->me->nonce};
	struct rk_cm_connect_opts o = {
	    .host = c->peer->addr,
	    .port = port,
	    .src_addr = c->me->addr,
	    .timeout_ms = c->step_ms,
	    .hello = &h,
	    .conn = doc_link_conn_opts(c->l, c->me->active_mtu, c->peer->active_mtu)};
	struct step_res mine = {.wc_status = -1}, theirs;
	struct rk_error err;
	uint64_t t0 = cli_now_ns();
	int r;

	snprintf(port, sizeof(port), "%d", c->peer->cm_port);
	if (ask(c, DOC_STEP_CONNECT)) {
		doc_add(c->r, DOC_FAIL, "link", NULL, "%s stopped listening", c->pn);
		return -ECONNRESET;
	}
	r = rk_cm_connect(c->l->dev, &o, &err, &c->l->conn);
	peer_result(c, DOC_STEP_CONNECT, c->step_ms + CONNECT_SLACK_MS + c->step_ms, &theirs);
	if (!r && theirs.ok) {
		int path = (int)rk_mtu_bytes(rk_conn_path_mtu(c->l->conn));

		json_object_object_add(doc_fact(c->r, "link"), "path_mtu",
				       json_object_new_int(path));
		doc_add(c->r, DOC_OK, "link", NULL,
			"rdma_cm connection to %s port %d in %.1f ms, path MTU %d (%s)",
			c->peer->addr, c->peer->cm_port, (double)(cli_now_ns() - t0) / 1e6, path,
			theirs.text);
		step_json(c, DOC_STEP_CONNECT, 1, theirs.text, t0);
		return 0;
	}
	if (r) {
		const struct rk_explain *e;
		char check[512];
		int heard = strstr(theirs.text, "no connection request") == NULL;

		snprintf(mine.text, sizeof(mine.text), "%s", rk_error_str(&err));
		doc_add(c->r, DOC_FAIL, "link", NULL,
			"rdma_cm connection to %s port %d failed at %s after %.1f ms: %s%s; %s "
			"says: %s",
			c->peer->addr, c->peer->cm_port, err.op, (double)(cli_now_ns() - t0) / 1e6,
			mine.text,
			r == -ETIMEDOUT && strcmp(err.op, "rdma_connect") == 0
			    ? " (the CM reports UNREACHABLE once it stops retrying)"
			    : "",
			c->pn, theirs.text[0] ? theirs.text : "nothing");
		if (r == -ETIMEDOUT && strcmp(err.op, "rdma_connect") == 0)
			/* no answer to the REQ: what the CM reports as UNREACHABLE once it gives up
			 */
			e = rk_explain_find(RK_EXPLAIN_CM_EVENT, RDMA_CM_EVENT_UNREACHABLE, NULL);
		else if (r == -ECONNREFUSED)
			e = rk_explain_find(RK_EXPLAIN_CM_EVENT, RDMA_CM_EVENT_REJECTED, NULL);
		else
			e = rk_explain_find(RK_EXPLAIN_ERRNO, -r, err.op);
		if (!heard)
			snprintf(
			    check, sizeof(check),
			    "%s never saw the connection request: on %s, is UDP 4791 let in "
			    "(nft list ruleset; iptables -L -n; tc filter show dev %s ingress)? "
			    "GID types and MTU as compared above",
			    c->pn, c->pn, c->peer->netdev[0] ? c->peer->netdev : "IFACE");
		else
			snprintf(
			    check, sizeof(check),
			    "%s saw the request but its answer did not get back: on this host, "
			    "is UDP 4791 let in (nft list ruleset; iptables -L -n; tc filter show "
			    "dev %s ingress)? GID types and MTU as compared above",
			    c->pn, c->me->netdev[0] ? c->me->netdev : "IFACE");
		doc_explain(c->r, e, check);
		step_json(c, DOC_STEP_CONNECT, 0, mine.text, t0);
		return r;
	}
	mine.ok = 1;
	step_failed(c, DOC_STEP_CONNECT, &mine, &theirs);
	step_json(c, DOC_STEP_CONNECT, 0, theirs.text, t0);
	return -EPROTO;
}

/* One transfer step, this side's part @mine and the listener's result @theirs. */
static int do_xfer(struct client *c, int step)
{
	struct step_res mine = {.wc_status = -1}, theirs = {.wc_status = -1};
	struct doc_link *l = c->l;
	uint64_t t0 = cli_now_ns();
	int ms = c->step_ms, need_peer = 1, r = 0;
	char what[96];

	switch (step) {
	case DOC_STEP_SEND_OUT:
		doc_link_pattern(l->seed, step, doc_link_slot(l, SLOT_SEND), DOC_XFER_LEN);
		r = doc_link_post_wait(l, RK_OP_SEND, SLOT_SEND, DOC_XFER_LEN, 0, 0, ms, &mine);
		break;
	case DOC_STEP_WRITE_OUT:
		doc_link_pattern(l->seed, step, doc_link_slot(l, SLOT_SEND), DOC_XFER_LEN);
		r = doc_link_post_wait(l, RK_OP_WRITE, SLOT_SEND, DOC_XFER_LEN, c->peer->wr_addr,
				       c->peer->wr_rkey, ms, &mine);
		break;
	case DOC_STEP_READ_OUT:
		memset(doc_link_slot(l, SLOT_READ), 0, DOC_XFER_LEN);
		r = doc_link_post_wait(l, RK_OP_READ, SLOT_READ, DOC_XFER_LEN, c->peer->rd_addr,
				       c->peer->rd_rkey, ms, &mine);
		if (!r)
			doc_link_verify(l->seed, step, doc_link_slot(l, SLOT_READ), DOC_XFER_LEN,
					&mine);
		need_peer = 0;
		break;
	default: /* the peer acts first: SEND_IN, WRITE_IN, READ_IN */
		mine.ok = 1;
		break;
	}
	if (r)
		mine.ok = 0;
	else if (step != DOC_STEP_READ_OUT)
		mine.ok = 1;
	if (mine.ok && need_peer) {
		if (ask(c, step))
			snprintf(theirs.text, sizeof(theirs.text), "%s stopped listening", c->pn);
		else
			peer_result(c, step, 2 * ms + 1000, &theirs);
		if (theirs.ok && step == DOC_STEP_SEND_IN) {
			r = doc_link_wait_wc(l, 0, ms, &mine);
			mine.ok = r == 0;
			if (!r)
				doc_link_verify(l->seed, step, doc_link_slot(l, SLOT_RECV),
						DOC_XFER_LEN, &mine);
		} else if (theirs.ok && step == DOC_STEP_WRITE_IN) {
			doc_link_verify(l->seed, step, rk_mr_addr(l->inbox), DOC_XFER_LEN, &mine);
		}
	} else {
		theirs.ok = 1;
	}
	step_what(step, c->pn, what, sizeof(what));
	if (mine.ok && theirs.ok) {
		/* the text of the side that checked the data */
		const char *text = step == DOC_STEP_SEND_IN || step == DOC_STEP_WRITE_IN ||
					   step == DOC_STEP_READ_OUT
				       ? mine.text
				       : theirs.text;

		doc_add(c->r, DOC_OK, "link", NULL, "%s: %s in %.1f ms", what, text,
			(double)(cli_now_ns() - t0) / 1e6);
		step_json(c, step, 1, text, t0);
		return 0;
	}
	step_failed(c, step, mine.ok ? NULL : &mine, &theirs);
	step_json(c, step, 0, mine.ok ? theirs.text : mine.text, t0);
	return -EIO;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int do_rtt(struct client *c)
{
	struct step_res mine = {.wc_status = -1}, theirs;
	struct json_object *f = doc_fact(c->r, "link");
	uint64_t rtt[DOC_RTT_ROUNDS], t0 = cli_now_ns();
	double lo, med, hi;
	int r = 0, n;

	if (ask(c, DOC_STEP_RTT)) {
		doc_add(c->r, DOC_FAIL, "link", NULL, "%s stopped listening", c->pn);
		return -ECONNRESET;
	}
	for (n = 0; n < DOC_RTT_ROUNDS; n++) {
		uint64_t id, t = cli_now_ns();

		memset(doc_link_slot(c->l, SLOT_RTT), n, RTT_LEN);
		r = doc_link_post(c->l, RK_OP_SEND, SLOT_RTT, RTT_LEN, 0, 0, &id, &mine);
		if (!r)
			r = doc_link_wait_wc(c->l, 0, c->step_ms, &mine);
		if (r)
			break;
		rtt[n] = cli_now_ns() - t;
	}
	peer_result(c, DOC_STEP_RTT, c->step_ms * 2, &theirs);
	if (r || !theirs.ok) {
		step_failed(c, DOC_STEP_RTT, r ? &mine : NULL, &theirs);
		step_json(c, DOC_STEP_RTT, 0, r ? mine.text : theirs.text, t0);
		return -EIO;
	}
	qsort(rtt, DOC_RTT_ROUNDS, sizeof(rtt[0]), cmp_u64);
	lo = (double)rtt[0] / 1e3;
	med = (double)rtt[DOC_RTT_ROUNDS >> 1] / 1e3;
	hi = (double)rtt[DOC_RTT_ROUNDS - 1] / 1e3;
	json_object_object_add(f, "rtt_us_min", json_object_new_double(lo));
	json_object_object_add(f, "rtt_us_median", json_object_new_double(med));
	json_object_object_add(f, "rtt_us_max", json_object_new_double(hi));
	doc_add(
	    c->r, DOC_OK, "link", NULL,
	    "round trip (SEND %d B and back, %d times): min %.1f us, median %.1f us, max %.1f us",
	    RTT_LEN, DOC_RTT_ROUNDS, lo, med, hi);
	step_json(c, DOC_STEP_RTT, 1, "ok", t0);
	return 0;
}

int doc_link_client(struct doc_report *r, struct doc_link *l, int fd, const struct doc_facts *me,
		    const struct doc_facts *peer, const char *peer_name, int step_ms)
{
	struct client c = {.r = r,
			   .l = l,
			   .fd = fd,
			   .me = me,
			   .peer = peer,
			   .pn = peer_name,
			   .step_ms = step_ms,
			   .steps = json_object_new_array()};
	struct json_object *f = doc_fact(r, "link");
	int passed = 0;

	json_object_object_add(f, "steps", c.steps);
	json_object_object_add(f, "step_ms", json_object_new_int(step_ms));
	for (int s = 0; s < DOC_STEP_COUNT; s++) {
		int e = s == DOC_STEP_CONNECT ? do_connect(&c)
			: s == DOC_STEP_RTT   ? do_rtt(&c)
					      : do_xfer(&c, s);

		if (e)
			break;
		passed++;
	}
	json_object_object_add(f, "passed", json_object_new_int(passed));
	json_object_object_add(f, "of", json_object_new_int(DOC_STEP_COUNT));
	json_object_object_add(f, "reached",
			       json_object_new_string(doc_step_name(
				   passed < DOC_STEP_COUNT ? passed : DOC_STEP_COUNT - 1)));
	if (passed < DOC_STEP_COUNT)
		doc_add(r, DOC_SKIP, "link", NULL,
			"stopped at step %d of %d (%s); the %d after it not run", passed + 1,
			DOC_STEP_COUNT, doc_step_name(passed), DOC_STEP_COUNT - passed - 1);
	else
		doc_add(r, DOC_OK, "link", NULL,
			"all %d steps passed: connection, SEND, RDMA WRITE and RDMA READ verified "
			"each way, round trip timed",
			DOC_STEP_COUNT);
	return passed;
}
