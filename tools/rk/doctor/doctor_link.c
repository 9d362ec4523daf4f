/*
 * doctor_link.c - the link test of rk doctor HOST: an rdma_cm connection,
 * then 4 KiB SEND, RDMA WRITE and RDMA READ each way, every one checked
 * against a pattern both sides derive from the client's seed, then a SEND
 * ping-pong for the round-trip time. Both ends of every step are here: the
 * client asks for a step on the control channel, the listener does its part
 * and answers with a result.
 *
 * What the peer can reach: one buffer it may write (inbox) and one it may
 * read (outbox), DOC_XFER_LEN bytes each, in a protection domain of their
 * own with the one QP. The inbox is copied out before it is compared,
 * because the peer may change it at any moment.
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
#include "doctor_peer.h"

enum { SLOT_SEND, SLOT_RECV, SLOT_READ, SLOT_RTT, NSLOTS };

#define RTT_LEN		 64
#define RECVS		 (2 + DOC_RTT_ROUNDS)
#define QUEUE		 64
#define WR_RECV		 1
#define CONNECT_SLACK_MS 2000 /* the listener waits this much longer for the request */

struct doc_link {
	struct rk_device *dev;
	struct rk_pd *pd;
	struct rk_mr *local;  /* NSLOTS x DOC_XFER_LEN, local access only */
	struct rk_mr *inbox;  /* the peer writes here */
	struct rk_mr *outbox; /* the peer reads here */
	struct rk_listener *lis;
	struct rk_conn *conn;
	uint64_t seed;
	int recv_pending; /* receive completions seen while waiting for something else */
	uint64_t next_id;
};

/* What one side saw of one step. */
struct step_res {
	int ok;
	int wc_status; /* failed completion, -1 none */
	int timed_out;
	int64_t value;
	char text[256];
};

static uint8_t *slot(const struct doc_link *l, int i)
{
	return (uint8_t *)rk_mr_addr(l->local) + (size_t)i * DOC_XFER_LEN;
}

/* The pattern of @step: splitmix64 from the seed, the same at both ends. */
static void pattern(uint64_t seed, int step, uint8_t *buf, size_t len)
{
	uint64_t x = seed ^ ((uint64_t)(step + 1) * 0x9e3779b97f4a7c15ull);

	for (size_t i = 0; i < len; i += 8) {
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		memcpy(buf + i, &z, len - i < 8 ? len - i : 8);
	}
}

/* Compare @len bytes of @got (copied first: it may be registered memory) with @step's. */
static void verify(uint64_t seed, int step, const volatile uint8_t *got, size_t len,
		   struct step_res *res)
{
	uint8_t copy[DOC_XFER_LEN], want[DOC_XFER_LEN];
	size_t first = len, wrong = 0;

	for (size_t i = 0; i < len; i++)
		copy[i] = got[i];
	pattern(seed, step, want, len);
	for (size_t i = 0; i < len; i++)
		if (copy[i] != want[i]) {
			if (first == len)
				first = i;
			wrong++;
		}
	res->ok = wrong == 0;
	if (res->ok)
		snprintf(res->text, sizeof(res->text), "%zu bytes verified", len);
	else
		snprintf(res->text, sizeof(res->text),
			 "data differs from byte %zu on (%zu of %zu bytes wrong)", first, wrong,
			 len);
}

/*
 * Wait for the completion of send WR @want, or (@want 0) of a receive,
 * within @ms. Other completions are skipped (receives counted for later).
 */
static int wait_wc(struct doc_link *l, uint64_t want, int ms, struct step_res *res)
{
	uint64_t deadline = cli_deadline_in(ms);
	struct rk_error err;

	if (!want && l->recv_pending > 0) {
		l->recv_pending--;
		return 0;
	}
	for (;;) {
		struct ibv_wc wc[8];
		int n, found = 0, left = cli_deadline_ms_left(deadline);

		if (left == 0) {
			res->timed_out = 1;
			snprintf(res->text, sizeof(res->text), "no completion within %d ms", ms);
			return -ETIMEDOUT;
		}
		n = rk_cq_wait(rk_conn_cq(l->conn), wc, 8, left, &err);
		if (n == -ETIMEDOUT)
			continue;
		if (n < 0) {
			snprintf(res->text, sizeof(res->text), "%s", rk_error_str(&err));
			return n;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				res->wc_status = wc[i].status;
				rk_error_from_wc(&err, &wc[i]);
				snprintf(res->text, sizeof(res->text), "%s", rk_error_str(&err));
				return -EIO;
			}
			if (wc[i].opcode & IBV_WC_RECV) {
				if (!want && !found)
					found = 1;
				else
					l->recv_pending++;
			} else if (want && wc[i].wr_id == want) {
				found = 1;
			}
		}
		if (found)
			return 0;
	}
}

static int post(struct doc_link *l, enum rk_op op, int s, uint32_t len, uint64_t raddr,
		uint32_t rkey, uint64_t *id, struct step_res *res)
{
	struct rk_wr wr = {.op = op,
			   .flags = RK_WR_SIGNALED | RK_WR_NO_INLINE,
			   .wr_id = *id = ++l->next_id + WR_RECV,
			   .addr = slot(l, s),
			   .len = len,
			   .lkey = rk_mr_lkey(l->local),
			   .remote_addr = raddr,
			   .rkey = rkey};
	struct rk_error err;
	int r = rk_post(l->conn, &wr, &err);

	if (r)
		snprintf(res->text, sizeof(res->text), "%s", rk_error_str(&err));
	return r;
}

/* Post @op, wait for its completion. */
static int post_wait(struct doc_link *l, enum rk_op op, int s, uint32_t len, uint64_t raddr,
		     uint32_t rkey, int ms, struct step_res *res)
{
	uint64_t id;
	int r = post(l, op, s, len, raddr, rkey, &id, res);

	return r ? r : wait_wc(l, id, ms, res);
}

static int prepare(struct rk_conn *conn, void *arg)
{
	struct doc_link *l = arg;

	for (int i = 0; i < RECVS; i++) {
		int r = rk_post_recv(conn, slot(l, SLOT_RECV), DOC_XFER_LEN, rk_mr_lkey(l->local),
				     WR_RECV, NULL);
		if (r)
			return r;
	}
	return 0;
}

static struct rk_conn_opts conn_opts(struct doc_link *l, int mtu_a, int mtu_b)
{
	/* event mode: a spinning waiter would take the CPU the peer's Soft-RoCE needs */
	struct rk_conn_opts o = {.sq_depth = QUEUE,
				 .rq_depth = QUEUE,
				 .wait_mode = RK_WAIT_EVENT,
				 .pd = l->pd,
				 .prepare = prepare,
				 .prepare_arg = l};

	/*
	 * The MTU both ends can take. (rdma_cm connections take the path MTU
	 * from the connecting side's route instead; the report says so.)
	 */
	o.max_mtu = rk_mtu_from_bytes((uint32_t)(mtu_a < mtu_b ? mtu_a : mtu_b));
	return o;
}

int doc_link_open(struct rk_device *dev, int listener, const char *addr, uint64_t seed,
		  struct doc_facts *f, struct rk_error *err, struct doc_link **out)
{
	struct doc_link *l = calloc(1, sizeof(*l));
	int r;

	*out = NULL;
	if (!l)
		return -ENOMEM;
	l->dev = dev;
	l->seed = seed;
	r = rk_pd_alloc(dev, err, &l->pd);
	if (!r)
		r = rk_mr_alloc_pd(l->pd, (size_t)NSLOTS * DOC_XFER_LEN, RK_ACCESS_LOCAL, err,
				   &l->local);
	if (!r)
		r = rk_mr_alloc_pd(l->pd, DOC_XFER_LEN, RK_ACCESS_REMOTE_WRITE, err, &l->inbox);
	if (!r)
		r = rk_mr_alloc_pd(l->pd, DOC_XFER_LEN, RK_ACCESS_REMOTE_READ, err, &l->outbox);
	if (!r && listener) {
		struct rk_listen_opts lo = {.addr = addr, .port = "0", .app_id = DOC_APP_ID};

		r = rk_listener_create(dev, &lo, err, &l->lis);
	}
	if (r) {
		doc_link_close(l);
		return r;
	}
	if (!listener) /* the listener learns the seed from the client's facts */
		pattern(seed, DOC_STEP_READ_IN, rk_mr_addr(l->outbox), DOC_XFER_LEN);
	f->seed = seed;
	f->nonce = (uint32_t)(seed >> 32) ^ (uint32_t)seed;
	f->cm_port = l->lis ? rk_listener_port(l->lis) : 0;
	f->wr_addr = (uint64_t)(uintptr_t)rk_mr_addr(l->inbox);
	f->wr_rkey = rk_mr_rkey(l->inbox);
	f->rd_addr = (uint64_t)(uintptr_t)rk_mr_addr(l->outbox);
	f->rd_rkey = rk_mr_rkey(l->outbox);
	*out = l;
	return 0;
}

void doc_link_close(struct doc_link *l)
{
	if (!l)
		return;
	rk_conn_destroy(l->conn);
	rk_listener_destroy(l->lis);
	rk_mr_dereg(l->outbox);
	rk_mr_dereg(l->inbox);
	rk_mr_dereg(l->local);
	rk_pd_free(l->pd);
	free(l);
}

/* ---- the client ---------------------------------------------------------------- */

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
	struct rk_cm_connect_opts o = {.host = c->peer->addr,
				       .port = port,
				       .src_addr = c->me->addr,
				       .timeout_ms = c->step_ms,
				       .hello = &h,
				       .conn =
					   conn_opts(c->l, c->me->active_mtu, c->peer->active_mtu)};
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
		pattern(l->seed, step, slot(l, SLOT_SEND), DOC_XFER_LEN);
		r = post_wait(l, RK_OP_SEND, SLOT_SEND, DOC_XFER_LEN, 0, 0, ms, &mine);
		break;
	case DOC_STEP_WRITE_OUT:
		pattern(l->seed, step, slot(l, SLOT_SEND), DOC_XFER_LEN);
		r = post_wait(l, RK_OP_WRITE, SLOT_SEND, DOC_XFER_LEN, c->peer->wr_addr,
			      c->peer->wr_rkey, ms, &mine);
		break;
	case DOC_STEP_READ_OUT:
		memset(slot(l, SLOT_READ), 0, DOC_XFER_LEN);
		r = post_wait(l, RK_OP_READ, SLOT_READ, DOC_XFER_LEN, c->peer->rd_addr,
			      c->peer->rd_rkey, ms, &mine);
		if (!r)
			verify(l->seed, step, slot(l, SLOT_READ), DOC_XFER_LEN, &mine);
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
			r = wait_wc(l, 0, ms, &mine);
			mine.ok = r == 0;
			if (!r)
				verify(l->seed, step, slot(l, SLOT_RECV), DOC_XFER_LEN, &mine);
		} else if (theirs.ok && step == DOC_STEP_WRITE_IN) {
			verify(l->seed, step, rk_mr_addr(l->inbox), DOC_XFER_LEN, &mine);
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

		memset(slot(c->l, SLOT_RTT), n, RTT_LEN);
		r = post(c->l, RK_OP_SEND, SLOT_RTT, RTT_LEN, 0, 0, &id, &mine);
		if (!r)
			r = wait_wc(c->l, 0, c->step_ms, &mine);
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

/* ---- the listener ---------------------------------------------------------------- */

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
		o = conn_opts(s->l, s->client->active_mtu, 4096);
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
		if (!wait_wc(l, 0, ms, res))
			verify(l->seed, step, slot(l, SLOT_RECV), DOC_XFER_LEN, res);
		break;
	case DOC_STEP_SEND_IN:
		pattern(l->seed, step, slot(l, SLOT_SEND), DOC_XFER_LEN);
		res->ok = !post_wait(l, RK_OP_SEND, SLOT_SEND, DOC_XFER_LEN, 0, 0, ms, res);
		if (res->ok)
			snprintf(res->text, sizeof(res->text), "sent");
		break;
	case DOC_STEP_WRITE_OUT:
		verify(l->seed, step, rk_mr_addr(l->inbox), DOC_XFER_LEN, res);
		break;
	case DOC_STEP_WRITE_IN:
		pattern(l->seed, step, slot(l, SLOT_SEND), DOC_XFER_LEN);
		res->ok = !post_wait(l, RK_OP_WRITE, SLOT_SEND, DOC_XFER_LEN, s->client->wr_addr,
				     s->client->wr_rkey, ms, res);
		if (res->ok)
			snprintf(res->text, sizeof(res->text), "written");
		break;
	case DOC_STEP_READ_IN:
		memset(slot(l, SLOT_READ), 0, DOC_XFER_LEN);
		if (!post_wait(l, RK_OP_READ, SLOT_READ, DOC_XFER_LEN, s->client->rd_addr,
			       s->client->rd_rkey, ms, res))
			verify(l->seed, step, slot(l, SLOT_READ), DOC_XFER_LEN, res);
		break;
	case DOC_STEP_RTT:
		for (int i = 0; i < DOC_RTT_ROUNDS; i++) {
			uint64_t id;

			if (wait_wc(l, 0, ms, res) ||
			    post(l, RK_OP_SEND, SLOT_RTT, RTT_LEN, 0, 0, &id, res))
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
	pattern(l->seed, DOC_STEP_READ_OUT, rk_mr_addr(l->outbox), DOC_XFER_LEN);
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
