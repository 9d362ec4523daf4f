/*
 * cm_event.c - rdma_cm events for a connection, each wait with a deadline.
 *
 * Every event type is handled here, in one place, so the client, the
 * server and rk_conn_progress agree on what an event means: the state it
 * leads to and the error it records. Events are always acked by the caller
 * right after handling (rdma_destroy_id waits for unacked events).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "rk_internal.h"

#define IB_CM_REJ_INVALID_SERVICE_ID 8
#define IB_CM_REJ_CONSUMER_DEFINED   28

int rk__cm_new_channel(struct rk_error *err, struct rdma_event_channel **out)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	*out = NULL;
	if (!ch)
		return rk__err_sys(err, "rdma_create_event_channel", NULL);
	if (rk__set_nonblock(ch->fd)) {
		int r = rk__err_sys(err, "fcntl", "CM channel");

		rdma_destroy_event_channel(ch);
		return r;
	}
	*out = ch;
	return 0;
}

const char *rk__sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(s->sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
	return buf;
}

int rk__cm_get_event(struct rdma_event_channel *ch, int64_t deadline_ms, struct rk_error *err,
		     struct rdma_cm_event **ev)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};

	for (;;) {
		int r;

		if (rdma_get_cm_event(ch, ev) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return rk__err_sys(err, "rdma_get_cm_event", NULL);
		r = poll(&p, 1, rk__ms_left(deadline_ms));
		if (r < 0 && errno != EINTR)
			return rk__err_sys(err, "poll", "CM channel");
		if (r == 0)
			return -ETIMEDOUT;
	}
}

int rk__cm_conn_param(struct rk_conn *c, struct rdma_conn_param *p, uint8_t peer_initiator,
		      uint8_t peer_responder)
{
	const struct rk_device_info *di = &c->dev->info;
	unsigned resp = c->opts.max_rd_atomic;
	unsigned init = resp;

	/* Never 0 when the peer may READ: a 0 here makes every READ fail. */
	if (resp > di->max_qp_rd_atom)
		resp = di->max_qp_rd_atom;
	if (init > di->max_qp_init_rd_atom)
		init = di->max_qp_init_rd_atom;
	if (peer_initiator && resp > peer_initiator)
		resp = peer_initiator;
	if (peer_responder && init > peer_responder)
		init = peer_responder;
	memset(p, 0, sizeof(*p));
	p->responder_resources = (uint8_t)resp;
	p->initiator_depth = (uint8_t)init;
	p->flow_control = 1;
	p->retry_count = c->opts.retry_cnt;
	p->rnr_retry_count = c->opts.rnr_retry;
	return 0;
}

void rk__cm_set_ack_timeout(struct rk_conn *c)
{
	uint8_t t = c->opts.ack_timeout;

	/* Old kernels lack the option: the CM's default then applies. */
	if (rdma_set_option(c->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)))
		rk_dbg("rdma_set_option ACK_TIMEOUT %u: %s", t, strerror(errno));
}

static void query_path_mtu(struct rk_conn *c)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(c->qp, &a, IBV_QP_PATH_MTU | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia) == 0) {
		c->path_mtu = a.path_mtu;
		c->psn = a.sq_psn;
		rk_dbg("qp 0x%x established via rdma_cm: sq psn 0x%x, rq psn 0x%x, mtu %u",
		       c->qp->qp_num, a.sq_psn, a.rq_psn, rk_mtu_bytes(a.path_mtu));
	} else {
		c->path_mtu = c->local_mtu;
	}
}

/* The server's accept reply: "RP", u16 length, then the application's bytes. */
static void keep_reply(struct rk_conn *c, const struct rdma_conn_param *p)
{
	const uint8_t *d = p->private_data;
	size_t n;

	c->peer_data_len = 0;
	if (!d || p->private_data_len < 4 || d[0] != 'R' || d[1] != 'P')
		return;
	n = rk_get16(d + 2);
	if (n > RK_CM_REPLY_MAX || n + 4 > p->private_data_len) {
		rk_warn("ignoring a malformed accept reply (%zu bytes claimed)", n);
		return;
	}
	memcpy(c->peer_data, d + 4, n);
	c->peer_data_len = n;
}

static int rejected(struct rk_conn *c, const struct rdma_cm_event *ev, struct rk_error *err)
{
	char text[RK_REJECT_TEXT_MAX + 1];
	uint16_t reason = 0;

	if (ev->status == IB_CM_REJ_INVALID_SERVICE_ID)
		return rk__err_set(err, ECONNREFUSED, "rdma_connect", "nobody listens there");
	if (ev->status == IB_CM_REJ_CONSUMER_DEFINED &&
	    rk_reject_decode(ev->param.conn.private_data, ev->param.conn.private_data_len, &reason,
			     text, sizeof(text)) == 0) {
		int r = rk__err_set(
		    err, ECONNREFUSED, "rdma_connect", "rejected by peer: %s%s%s (reason %u)",
		    rk_reject_reason_str(reason), text[0] ? ": " : "", text, reason);

		if (err) {
			/* the code, so that nobody has to match the text */
			err->reject_reason = reason ? reason : RK_REJECT_APP;
			/*
			 * Somebody listens and said no, for the reason given:
			 * neither "Connection refused" nor errno's hint (nobody
			 * listens) may follow it and contradict it.
			 */
			err->hint = NULL;
			rk__err_msgf(err, "rdma_connect: rejected by peer: %s%s%s (reason %u)",
				     rk_reject_reason_str(reason), text[0] ? ": " : "", text,
				     reason);
		}
		return r;
	}
	return rk__err_set(err, ECONNREFUSED, "rdma_connect", "rejected (CM reason %d)",
			   ev->status);
}

int rk__cm_conn_event(struct rk_conn *c, struct rdma_cm_event *ev, struct rk_error *err)
{
	struct rk_error e;
	int r = 0;

	rk_dbg("qp 0x%x: CM event %s (status %d)", rk_conn_qp_num(c), rdma_event_str(ev->event),
	       ev->status);
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
		keep_reply(c, &ev->param.conn);
		query_path_mtu(c);
		c->state = RK_CONN_CONNECTED;
		return 0;
	case RDMA_CM_EVENT_DISCONNECTED:
		rk__err_set(&e, ECONNRESET, "rdma_cm",
			    "DISCONNECTED: the peer closed the connection");
		rk__conn_fail(c, RK_CONN_DISCONNECTED, &e);
		return 0;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		r = rk__err_set(&e, ENODEV, "rdma_cm", "DEVICE_REMOVAL: the RDMA device went away");
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return 0; /* the QP may be reused; nothing to do for us */
	case RDMA_CM_EVENT_ADDR_CHANGE:
		rk_warn("qp 0x%x: ADDR_CHANGE: the local address moved; the connection may break",
			rk_conn_qp_num(c));
		return 0;
	case RDMA_CM_EVENT_REJECTED:
		r = rejected(c, ev, &e);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		r = rk__err_set(&e, EHOSTUNREACH, "rdma_connect",
				"UNREACHABLE: no answer (status %d)", ev->status);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		r = rk__err_set(&e, ECONNABORTED, "rdma_cm", "CONNECT_ERROR (status %d)",
				ev->status);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		r = rk__err_set(&e, EHOSTUNREACH, "rdma_resolve_addr", "ADDR_ERROR (status %d)",
				ev->status);
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		r = rk__err_set(&e, EHOSTUNREACH, "rdma_resolve_route", "ROUTE_ERROR (status %d)",
				ev->status);
		break;
	default:
		rk_dbg("unexpected CM event %s ignored", rdma_event_str(ev->event));
		return 0;
	}
	rk__err_set_qp(&e, rk_conn_qp_num(c));
	rk__conn_fail(c, RK_CONN_ERROR, &e);
	if (err)
		*err = e;
	return r;
}

int rk_conn_progress(struct rk_conn *c, int timeout_ms, struct rk_error *err)
{
	int64_t deadline = rk__deadline(timeout_ms);
	struct rdma_cm_event *ev;
	int r;

	if (!c->ch)
		return (int)c->state;
	for (;;) {
		r = rk__cm_get_event(c->ch, deadline, err, &ev);
		if (r == -ETIMEDOUT)
			break;
		if (r)
			return r;
		rk__cm_conn_event(c, ev, err);
		if (rdma_ack_cm_event(ev))
			rk_warn("rdma_ack_cm_event: %s", strerror(errno));
		deadline = 0; /* drain what is pending, but wait only for the first */
	}
	return (int)c->state;
}

int rk__cm_comm_established(struct rk_conn *c, int timeout_ms, struct rk_error *err)
{
	if (c->state != RK_CONN_CONNECTING || !c->id)
		return (int)c->state;
	/* The ESTABLISHED event may simply be waiting on the channel. */
	rk_conn_progress(c, 0, err);
	if (c->state != RK_CONN_CONNECTING)
		return (int)c->state;
	/*
	 * The peer's ready-to-use message is late or lost, but its data came:
	 * the connection is up. rdma_notify makes the CM say so (ESTABLISHED).
	 */
	if (rdma_notify(c->id, IBV_EVENT_COMM_EST) && errno != EISCONN)
		return rk__err_sys(err, "rdma_notify", "COMM_EST [qp 0x%x]", rk_conn_qp_num(c));
	return rk_conn_progress(c, timeout_ms, err);
}

/* Send the disconnect and wait for the peer's answer, so it learns we are gone. */
static void cm_disconnect(struct rk_conn *c, int64_t deadline_ms, struct rk_error *err)
{
	if (rdma_disconnect(c->id))
		rk_dbg("rdma_disconnect: %s", strerror(errno));
	while (c->state == RK_CONN_CONNECTED || c->state == RK_CONN_CONNECTING) {
		struct rdma_cm_event *ev;

		if (rk__cm_get_event(c->ch, deadline_ms, err, &ev))
			break;
		rk__cm_conn_event(c, ev, NULL);
		if (rdma_ack_cm_event(ev))
			rk_warn("rdma_ack_cm_event: %s", strerror(errno));
	}
}

static int cm_create_qp(struct rk_conn *c, struct ibv_qp_init_attr *qa, struct rk_error *err)
{
	if (rdma_create_qp(c->id, c->pd, qa))
		return rk__err_sys(err, "rdma_create_qp", "sq %u rq %u sge %u/%u inline %u",
				   qa->cap.max_send_wr, qa->cap.max_recv_wr, qa->cap.max_send_sge,
				   qa->cap.max_recv_sge, qa->cap.max_inline_data);
	c->qp = c->id->qp;
	return 0;
}

static void cm_destroy_qp(struct rk_conn *c)
{
	rdma_destroy_qp(c->id);
}

static void cm_release(struct rk_conn *c)
{
	if (c->id && rdma_destroy_id(c->id))
		rk_warn("rdma_destroy_id: %s", strerror(errno));
	c->id = NULL;
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	c->ch = NULL;
}

static const struct rk_conn_cm_ops cm_ops = {
    .create_qp = cm_create_qp,
    .disconnect = cm_disconnect,
    .destroy_qp = cm_destroy_qp,
    .release = cm_release,
};

void rk__cm_own(struct rk_conn *c)
{
	c->cm = &cm_ops;
}

int rk_conn_cm_fd(const struct rk_conn *c)
{
	return c->ch ? c->ch->fd : -1;
}

const void *rk_conn_peer_data(const struct rk_conn *c, size_t *len)
{
	*len = c->peer_data_len;
	return c->peer_data_len ? c->peer_data : NULL;
}
