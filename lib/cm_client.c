/*
 * cm_client.c - rdma_cm client: resolve, route, connect with a hello,
 * each step within the caller's deadline.
 */
#include <errno.h>
#include <netdb.h>
#include <string.h>

#include "rk_internal.h"

#define DEF_STEP_MS 5000

/*
 * Wait for @want on the connection's channel. Anything else is handled
 * as a connection event (which records why it failed).
 */
static int expect(struct rk_conn *c, enum rdma_cm_event_type want, int step_ms, const char *step,
		  struct rk_error *err)
{
	struct rdma_cm_event *ev;
	int r;

	r = rk__cm_get_event(c->ch, rk__deadline(step_ms), err, &ev);
	if (r == -ETIMEDOUT)
		return rk__err_set(err, ETIMEDOUT, step, "no answer within %d ms", step_ms);
	if (r)
		return r;
	if (ev->event == want && want != RDMA_CM_EVENT_ESTABLISHED) {
		r = 0;
	} else {
		r = rk__cm_conn_event(c, ev, err);
		if (!r && ev->event != want)
			r = rk__err_set(err, EPROTO, step, "unexpected CM event %s",
					rdma_event_str(ev->event));
	}
	if (rdma_ack_cm_event(ev))
		rk_warn("rdma_ack_cm_event: %s", strerror(errno));
	return r;
}

static int resolve(const char *host, const char *port, int passive, struct addrinfo **ai,
		   struct rk_error *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = passive ? AI_PASSIVE : 0};
	int r = getaddrinfo(host, port, &hints, ai);

	if (r)
		return rk__err_gai(err, r, "%s:%s", host ? host : "*", port ? port : "0");
	return 0;
}

static int connect_steps(struct rk_conn *c, const struct rk_cm_connect_opts *o, int step,
			 struct rk_error *err)
{
	struct addrinfo *dst = NULL, *src = NULL;
	struct rdma_conn_param p;
	struct rk_hello none = {0};
	uint8_t hello[RK_HELLO_MSG_MAX];
	int r, n;

	r = resolve(o->host, o->port, 0, &dst, err);
	if (!r && o->src_addr)
		r = resolve(o->src_addr, NULL, 1, &src, err);
	if (r)
		goto out;
	if (rdma_resolve_addr(c->id, src ? src->ai_addr : NULL, dst->ai_addr, step)) {
		r = rk__err_sys(err, "rdma_resolve_addr", "%s", o->host);
		goto out;
	}
	r = expect(c, RDMA_CM_EVENT_ADDR_RESOLVED, step + 1000, "rdma_resolve_addr", err);
	if (r)
		goto out;
	if (c->id->verbs != c->dev->ctx) {
		r = rk__err_set(err, ENODEV, "rdma_resolve_addr",
				"%s is reached through %s, not %s", o->host,
				ibv_get_device_name(c->id->verbs->device), c->dev->info.name);
		goto out;
	}
	rk__cm_set_ack_timeout(c);
	if (rdma_resolve_route(c->id, step)) {
		r = rk__err_sys(err, "rdma_resolve_route", "%s", o->host);
		goto out;
	}
	r = expect(c, RDMA_CM_EVENT_ROUTE_RESOLVED, step + 1000, "rdma_resolve_route", err);
	if (r)
		goto out;
	r = rk__conn_build_qp(c, err);
	if (!r && c->opts.prepare) {
		r = c->opts.prepare(c, c->opts.prepare_arg);
		if (r)
			r = rk__err_set(err, r, "rk_cm_connect", "prepare callback failed");
	}
	if (r)
		goto out;
	n = rk_hello_encode(o->hello ? o->hello : &none, hello, sizeof(hello));
	if (n < 0) {
		r = rk__err_set(err, -n, "rk_hello_encode", "token too long");
		goto out;
	}
	rk__cm_conn_param(c, &p, 0, 0);
	p.private_data = hello;
	p.private_data_len = (uint8_t)n;
	c->state = RK_CONN_CONNECTING;
	if (rdma_connect(c->id, &p)) {
		r = rk__err_sys(err, "rdma_connect", "%s", o->host);
		goto out;
	}
	r = expect(c, RDMA_CM_EVENT_ESTABLISHED, step, "rdma_connect", err);
out:
	if (dst)
		freeaddrinfo(dst);
	if (src)
		freeaddrinfo(src);
	return r;
}

int rk_cm_connect(struct rk_device *dev, const struct rk_cm_connect_opts *o, struct rk_error *err,
		  struct rk_conn **out)
{
	int step = o->timeout_ms > 0 ? o->timeout_ms : DEF_STEP_MS;
	struct rk_conn *c;
	int r;

	*out = NULL;
	if (!o->host || !o->port)
		return rk__err_set(err, EINVAL, "rk_cm_connect", "host and port are required");
	r = rk__conn_alloc(dev, &o->conn, err, &c);
	if (r)
		return r;
	rk__cm_own(c);
	r = rk__cm_new_channel(err, &c->ch);
	if (r)
		goto fail;
	if (rdma_create_id(c->ch, &c->id, c, RDMA_PS_TCP)) {
		r = rk__err_sys(err, "rdma_create_id", NULL);
		goto fail;
	}
	r = connect_steps(c, o, step, err);
	if (r)
		goto fail;
	if (c->state != RK_CONN_CONNECTED) {
		r = rk__err_set(err, ECONNABORTED, "rk_cm_connect", "connection %s",
				rk_conn_state_str(c->state));
		goto fail;
	}
	*out = c;
	return 0;
fail:
	/* Not connected: no disconnect to wait for. */
	if (c->state == RK_CONN_CONNECTING)
		c->state = RK_CONN_ERROR;
	rk_conn_destroy(c);
	return r;
}
