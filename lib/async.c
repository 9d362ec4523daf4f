/*
 * async.c - the device's asynchronous events: read, ack, surface.
 *
 * A QP that hits a fatal error, a port that goes down or a device that
 * dies is reported here and nowhere else, so the event is logged, the
 * owner of the QP concerned is told through the device's on_qp_fatal hook
 * (conn.c registers it: the connection is marked failed, its first error
 * says why), and the event is acked at once: ibv_destroy_qp waits for its
 * events to be acked.
 */
#include <errno.h>
#include <string.h>

#include "rk_internal.h"

static int is_qp_event(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return 1;
	default:
		return 0;
	}
}

static int is_port_event(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_GID_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
		return 1;
	default:
		return 0;
	}
}

static int is_fatal(enum ibv_event_type t)
{
	return t == IBV_EVENT_QP_FATAL || t == IBV_EVENT_QP_REQ_ERR ||
	       t == IBV_EVENT_QP_ACCESS_ERR || t == IBV_EVENT_CQ_ERR || t == IBV_EVENT_PORT_ERR ||
	       t == IBV_EVENT_DEVICE_FATAL;
}

int rk_device_async_fd(const struct rk_device *dev)
{
	return dev->ctx->async_fd;
}

int rk_device_poll_async(struct rk_device *dev, struct rk_async_event *out, struct rk_error *err)
{
	struct ibv_async_event ev;
	void *qp_context = NULL;
	struct rk_error e;

	memset(out, 0, sizeof(*out));
	if (ibv_get_async_event(dev->ctx, &ev)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return rk__err_sys(err, "ibv_get_async_event", "%s", dev->info.name);
	}
	out->type = (int)ev.event_type;
	out->type_str = ibv_event_type_str(ev.event_type);
	out->fatal = is_fatal(ev.event_type);
	if (is_qp_event(ev.event_type) && ev.element.qp) {
		out->qp_num = ev.element.qp->qp_num;
		qp_context = ev.element.qp->qp_context;
	} else if (is_port_event(ev.event_type)) {
		out->port = ev.element.port_num;
	}
	ibv_ack_async_event(&ev);

	if (!out->fatal) {
		rk_dbg("%s: async event %s (qp 0x%x, port %d)", dev->info.name, out->type_str,
		       out->qp_num, out->port);
		return 1;
	}
	rk__err_set(&e, EIO, "async event", "%s on %s", out->type_str, dev->info.name);
	rk__err_set_qp(&e, out->qp_num);
	rk_warn("%s", e.msg);
	if (qp_context && dev->on_qp_fatal)
		dev->on_qp_fatal(qp_context, &e);
	if (err)
		*err = e;
	return 1;
}

void rk__device_drain_async(struct rk_device *dev)
{
	struct rk_async_event ev;

	while (rk_device_poll_async(dev, &ev, NULL) > 0)
		;
}
