/*
 * cm_listener.c - rdma_cm server: listen, validate each hello, accept or
 * reject.
 *
 * A request's id is moved to an event channel of its own before it is
 * accepted, so the listener's channel carries only new requests and each
 * connection's events reach that connection alone: one listener, many
 * connections, no event dispatch table.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rk_internal.h"

struct rk_listener {
	struct rk_device *dev;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	uint32_t app_id;
};

struct rk_cm_request {
	struct rk_listener *lis;
	struct rdma_cm_id *id;
	struct rk_hello hello;
	char peer[64];
	uint8_t peer_initiator, peer_responder;
};

int rk_listener_create(struct rk_device *dev, const struct rk_listen_opts *o, struct rk_error *err,
		       struct rk_listener **out)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE},
			*ai = NULL;
	struct rk_listener *l;
	int r;

	*out = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return rk__err_set(err, ENOMEM, "rk_listener_create", NULL);
	l->dev = dev;
	l->app_id = o->app_id;
	r = getaddrinfo(o->addr, o->port ? o->port : "0", &hints, &ai);
	if (r) {
		r = rk__err_gai(err, r, "%s:%s", o->addr ? o->addr : "*", o->port ? o->port : "0");
		goto fail;
	}
	r = rk__cm_new_channel(err, &l->ch);
	if (r)
		goto fail;
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		r = rk__err_sys(err, "rdma_create_id", NULL);
		goto fail;
	}
	if (rdma_bind_addr(l->id, ai->ai_addr)) {
		r = rk__err_sys(err, "rdma_bind_addr", "%s:%s", o->addr ? o->addr : "*",
				o->port ? o->port : "0");
		goto fail;
	}
	if (l->id->verbs && l->id->verbs != dev->ctx) {
		r = rk__err_set(err, ENODEV, "rdma_bind_addr", "%s belongs to %s, not %s", o->addr,
				ibv_get_device_name(l->id->verbs->device), dev->info.name);
		goto fail;
	}
	if (rdma_listen(l->id, o->backlog > 0 ? o->backlog : 64)) {
		r = rk__err_sys(err, "rdma_listen", NULL);
		goto fail;
	}
	freeaddrinfo(ai);
	*out = l;
	return 0;
fail:
	if (ai)
		freeaddrinfo(ai);
	rk_listener_destroy(l);
	return r;
}

static void reject_id(struct rdma_cm_id *id, uint16_t reason, const char *text)
{
	uint8_t pd[RK_REJECT_MSG_MAX];
	int n = rk_reject_encode(reason, text, pd, sizeof(pd));

	if (rdma_reject(id, pd, n > 0 ? (uint8_t)n : 0))
		rk_warn("rdma_reject: %s", strerror(errno));
}

void rk_listener_destroy(struct rk_listener *l)
{
	struct rdma_cm_event *ev;

	if (!l)
		return;
	if (l->ch) {
		while (rk__cm_get_event(l->ch, 0, NULL, &ev) == 0) {
			struct rdma_cm_id *child = NULL;

			if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
				child = ev->id;
				reject_id(child, RK_REJECT_BUSY, "server shutting down");
			}
			if (rdma_ack_cm_event(ev))
				rk_warn("rdma_ack_cm_event: %s", strerror(errno));
			if (child && rdma_destroy_id(child))
				rk_warn("rdma_destroy_id: %s", strerror(errno));
		}
	}
	if (l->id && rdma_destroy_id(l->id))
		rk_warn("rdma_destroy_id: %s", strerror(errno));
	if (l->ch)
		rdma_destroy_event_channel(l->ch);
	free(l);
}

int rk_listener_fd(const struct rk_listener *l)
{
	return l->ch->fd;
}

uint16_t rk_listener_port(const struct rk_listener *l)
{
	return ntohs(rdma_get_src_port(l->id));
}

/* Validate the request; 0 to hand it to the application, else the reject reason. */
static int check_request(struct rk_listener *l, struct rdma_cm_event *ev, struct rk_hello *h,
			 const char **why)
{
	struct rk_error e;
	int r;

	if (ev->id->verbs != l->dev->ctx) {
		*why = "arrived on another RDMA device";
		return RK_REJECT_APP;
	}
	r = rk_hello_decode(ev->param.conn.private_data, ev->param.conn.private_data_len, h, &e);
	if (r == -EPROTO) {
		*why = "hello version not supported";
		return RK_REJECT_VERSION;
	}
	if (r) {
		*why = "malformed hello";
		return RK_REJECT_BAD_HELLO;
	}
	if (l->app_id && h->app_id != l->app_id) {
		*why = "wrong application id";
		return RK_REJECT_APP_ID;
	}
	return 0;
}

static int take_request(struct rk_listener *l, struct rdma_cm_event *ev, struct rk_error *err,
			struct rk_cm_request **out)
{
	struct rk_cm_request *req;
	struct rk_hello h;
	const char *why = NULL;
	char peer[64];
	int reason;

	rk__sockaddr_str(rdma_get_peer_addr(ev->id), peer, sizeof(peer));
	reason = check_request(l, ev, &h, &why);
	if (!reason) {
		req = calloc(1, sizeof(*req));
		if (req) {
			req->lis = l;
			req->id = ev->id;
			req->hello = h;
			snprintf(req->peer, sizeof(req->peer), "%s", peer);
			req->peer_initiator = ev->param.conn.initiator_depth;
			req->peer_responder = ev->param.conn.responder_resources;
			*out = req;
			return 0;
		}
		reason = RK_REJECT_BUSY;
		why = "out of memory";
	}
	rk_info("rejecting %s: %s", peer, why);
	reject_id(ev->id, (uint16_t)reason, why);
	return -EAGAIN;
}

int rk_listener_get_request(struct rk_listener *l, int timeout_ms, struct rk_error *err,
			    struct rk_cm_request **out)
{
	int64_t deadline = rk__deadline(timeout_ms);
	struct rdma_cm_event *ev;
	int r;

	*out = NULL;
	for (;;) {
		struct rdma_cm_id *drop = NULL;

		r = rk__cm_get_event(l->ch, deadline, err, &ev);
		if (r == -ETIMEDOUT)
			return timeout_ms == 0
				   ? -EAGAIN
				   : rk__err_set(err, ETIMEDOUT, "rk_listener_get_request",
						 "no connect request within %d ms", timeout_ms);
		if (r)
			return r;
		rk_dbg("listener: CM event %s (status %d)", rdma_event_str(ev->event), ev->status);
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			r = take_request(l, ev, err, out);
			if (r)
				drop = ev->id;
		} else if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			r = rk__err_set(err, ENODEV, "rk_listener_get_request",
					"DEVICE_REMOVAL: the RDMA device went away");
		} else {
			r = -EAGAIN; /* ADDR_CHANGE and the like: keep listening */
		}
		if (rdma_ack_cm_event(ev))
			rk_warn("rdma_ack_cm_event: %s", strerror(errno));
		if (drop && rdma_destroy_id(drop))
			rk_warn("rdma_destroy_id: %s", strerror(errno));
		if (r != -EAGAIN)
			return r;
	}
}

const struct rk_hello *rk_cm_request_hello(const struct rk_cm_request *req)
{
	return &req->hello;
}

const char *rk_cm_request_peer(const struct rk_cm_request *req)
{
	return req->peer;
}

int rk_cm_request_reject(struct rk_cm_request *req, uint16_t reason, const char *text,
			 struct rk_error *err)
{
	uint8_t pd[RK_REJECT_MSG_MAX];
	int n = rk_reject_encode(reason, text, pd, sizeof(pd)), r = 0;

	if (rdma_reject(req->id, pd, n > 0 ? (uint8_t)n : 0))
		r = rk__err_sys(err, "rdma_reject", "%s", req->peer);
	if (rdma_destroy_id(req->id))
		rk_warn("rdma_destroy_id: %s", strerror(errno));
	free(req);
	return r;
}

static int wait_established(struct rk_conn *c, int timeout_ms, struct rk_error *err)
{
	int64_t deadline = rk__deadline(timeout_ms);

	while (c->state == RK_CONN_CONNECTING) {
		struct rdma_cm_event *ev;
		int r = rk__cm_get_event(c->ch, deadline, err, &ev);

		if (r == -ETIMEDOUT)
			return rk__err_set(err, ETIMEDOUT, "rdma_accept",
					   "not established within %d ms", timeout_ms);
		if (r)
			return r;
		r = rk__cm_conn_event(c, ev, err);
		if (rdma_ack_cm_event(ev))
			rk_warn("rdma_ack_cm_event: %s", strerror(errno));
		if (r)
			return r;
	}
	if (c->state != RK_CONN_CONNECTED)
		return rk_conn_first_error(c, err)
			   ?: rk__err_set(err, ECONNABORTED, "rdma_accept", "connection %s",
					  rk_conn_state_str(c->state));
	return 0;
}

int rk_cm_request_accept(struct rk_cm_request *req, const struct rk_conn_opts *opts,
			 const void *reply, size_t reply_len, int timeout_ms, struct rk_error *err,
			 struct rk_conn **out)
{
	uint8_t pd[4 + RK_CM_REPLY_MAX];
	struct rdma_conn_param p;
	struct rk_conn *c = NULL;
	int r;

	*out = NULL;
	if (reply_len > RK_CM_REPLY_MAX) {
		r = rk__err_set(err, EMSGSIZE, "rk_cm_request_accept",
				"reply of %zu bytes (max %u)", reply_len, RK_CM_REPLY_MAX);
		goto reject;
	}
	r = rk__conn_alloc(req->lis->dev, opts, err, &c);
	if (r)
		goto reject;
	rk__cm_own(c);
	r = rk__cm_new_channel(err, &c->ch);
	if (r)
		goto reject;
	if (rdma_migrate_id(req->id, c->ch)) {
		r = rk__err_sys(err, "rdma_migrate_id", NULL);
		goto reject;
	}
	c->id = req->id;
	c->id->context = c;
	r = rk__conn_build_qp(c, err);
	if (!r && c->opts.prepare) {
		r = c->opts.prepare(c, c->opts.prepare_arg);
		if (r)
			r = rk__err_set(err, r, "rk_cm_request_accept", "prepare callback failed");
	}
	if (r)
		goto reject;
	rk__cm_set_ack_timeout(c);
	rk__cm_conn_param(c, &p, req->peer_initiator, req->peer_responder);
	pd[0] = 'R';
	pd[1] = 'P';
	rk_put16(pd + 2, (uint16_t)reply_len);
	if (reply_len)
		memcpy(pd + 4, reply, reply_len);
	p.private_data = pd;
	p.private_data_len = (uint8_t)(4 + reply_len);
	c->state = RK_CONN_CONNECTING;
	if (rdma_accept(c->id, &p)) {
		r = rk__err_sys(err, "rdma_accept", "%s", req->peer);
		c->state = RK_CONN_ERROR;
		goto fail;
	}
	rk_dbg("accepted %s: responder_resources %u initiator_depth %u", req->peer,
	       p.responder_resources, p.initiator_depth);
	free(req);
	if (timeout_ms != 0) {
		r = wait_established(c, timeout_ms, err);
		if (r) {
			rk_conn_destroy(c);
			return r;
		}
	}
	*out = c;
	return 0;
reject:
	reject_id(req->id, RK_REJECT_BUSY, "server could not set up the connection");
fail:
	if (c && c->id) {
		rk_conn_destroy(c); /* owns the id now */
	} else {
		rk_conn_destroy(c);
		if (rdma_destroy_id(req->id))
			rk_warn("rdma_destroy_id: %s", strerror(errno));
	}
	free(req);
	return r;
}
