/*
 * error.c - the error object and the hint table.
 *
 * The hints are the part of an RDMA error people actually need: a status
 * like REM_ACCESS_ERR alone does not say "your rkey is wrong". The tables
 * are pure data so the unit tests can check them on any host.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "rk_internal.h"

struct wc_hint {
	int status;
	const char *hint;
};

static const struct wc_hint wc_hints[] = {
    {IBV_WC_LOC_LEN_ERR, "message longer than the posted receive buffer (or the MR), "
			 "or over the port's max message size"},
    {IBV_WC_LOC_QP_OP_ERR, "malformed work request (too many SGEs, inline too large) "
			   "or QP not ready to send"},
    {IBV_WC_LOC_PROT_ERR, "lkey / PD mismatch: the local buffer is not inside an MR of this "
			  "PD (wrong lkey, or address + length outside the MR)"},
    {IBV_WC_WR_FLUSH_ERR, "QP already in error: this work request was flushed; "
			  "see the connection's first failure"},
    {IBV_WC_LOC_ACCESS_ERR, "local access violation: the MR lacks the access the operation "
			    "needs (LOCAL_WRITE for a receive or READ target)"},
    {IBV_WC_REM_INV_REQ_ERR, "the peer refused the request: opcode not allowed by its QP, "
			     "or message longer than its receive buffer"},
    {IBV_WC_REM_ACCESS_ERR, "remote access error: wrong rkey, peer MR lacks REMOTE_WRITE / "
			    "REMOTE_READ access, or address + length outside the peer's MR"},
    {IBV_WC_REM_OP_ERR, "the peer could not complete the operation "
			"(its receive buffer too small, or its QP failed)"},
    {IBV_WC_RETRY_EXC_ERR, "no ACK from the peer: peer gone (process died, QP destroyed) or "
			   "path broken; on slow links raise the ACK timeout"},
    {IBV_WC_RNR_RETRY_EXC_ERR, "receiver not ready: the peer had no receive posted; post "
			       "receives before the sender sends (use credits)"},
    {IBV_WC_REM_ABORT_ERR, "the peer aborted the operation"},
    {IBV_WC_FATAL_ERR, "the device reported a fatal error; the device must be reopened"},
    {IBV_WC_RESP_TIMEOUT_ERR, "the peer did not respond in time"},
};

struct errno_hint {
	const char *op_prefix; /* NULL matches any operation */
	int err;
	const char *hint;
};

#define MEMLOCK_HINT                                                                               \
	"locked-memory limit (RLIMIT_MEMLOCK) too low: raise it with 'ulimit -l unlimited', "      \
	"memlock in /etc/security/limits.conf, or for containers --ulimit memlock=-1"

static const struct errno_hint errno_hints[] = {
    {"ibv_post_send", ENOMEM,
     "send queue full: poll completions before posting more, "
     "or raise the send queue depth (sq_depth)"},
    {"ibv_post_recv", ENOMEM,
     "receive queue full: wait for receives to complete, "
     "or raise the receive queue depth (rq_depth)"},
    {"rk_post", ENOBUFS, "send queue full: poll completions before posting more"},
    {"rk_post_recv", ENOBUFS, "receive queue full: wait for receives to complete"},
    {"ibv_reg_mr", ENOMEM, MEMLOCK_HINT},
    {"ibv_reg_mr", EPERM, MEMLOCK_HINT},
    {"ibv_create_qp", EINVAL, "queue depth, SGE count or inline size exceeds the device caps"},
    {"rdma_create_qp", EINVAL, "queue depth, SGE count or inline size exceeds the device caps"},
    {"ibv_modify_qp", EINVAL,
     "attribute invalid for this transition: check MTU, GID index, "
     "QPN/PSN and rd_atomic against the device"},
    {"rdma_resolve_addr", EHOSTUNREACH,
     "address unreachable: no route or no ARP/ND answer; "
     "check the address and that the RDMA netdev is up"},
    {"rdma_resolve_route", EHOSTUNREACH, "no route to the peer over an RDMA device"},
    {"rdma_connect", ECONNREFUSED,
     "connection rejected: nobody listens on that port, or the "
     "server refused the hello (see the reason)"},
    {NULL, ETIMEDOUT,
     "no answer in time: wrong address or port, peer not running, "
     "or the link is down"},
    {NULL, ENODEV,
     "no such RDMA device: check 'ibv_devices' / 'rdma link' (Soft-RoCE: "
     "rdma link add rxe0 type rxe netdev IFACE)"},
    {NULL, ENETDOWN, "port not ACTIVE: check the link ('ibv_devinfo') and that the netdev is up"},
};

const char *rk_wc_status_hint(int wc_status)
{
	for (size_t i = 0; i < sizeof(wc_hints) / sizeof(wc_hints[0]); i++)
		if (wc_hints[i].status == wc_status)
			return wc_hints[i].hint;
	return NULL;
}

const char *rk_errno_hint(const char *op, int err)
{
	if (err < 0)
		err = -err;
	for (size_t i = 0; i < sizeof(errno_hints) / sizeof(errno_hints[0]); i++) {
		const struct errno_hint *h = &errno_hints[i];

		if (h->err != err)
			continue;
		if (h->op_prefix && (!op || strncmp(op, h->op_prefix, strlen(h->op_prefix)) != 0))
			continue;
		return h->hint;
	}
	return NULL;
}

void rk_error_clear(struct rk_error *e)
{
	if (!e)
		return;
	memset(e, 0, sizeof(*e));
	e->wc_status = -1;
	e->wc_status_str = "";
}

const char *rk_error_str(const struct rk_error *e)
{
	return e ? e->msg : "";
}

static void fill(struct rk_error *e, int err, const char *op, const char *fmt, va_list ap)
{
	char detail[RK_ERROR_MSG_MAX];
	size_t n;

	rk_error_clear(e);
	e->err = err;
	snprintf(e->op, sizeof(e->op), "%s", op);
	snprintf(e->err_str, sizeof(e->err_str), "%s", strerror(err));
	e->hint = rk_errno_hint(op, err);
	detail[0] = '\0';
	if (fmt)
		vsnprintf(detail, sizeof(detail), fmt, ap);
	n = (size_t)snprintf(e->msg, sizeof(e->msg), "%s: %s%s%s", op, detail[0] ? detail : "",
			     detail[0] ? ": " : "", e->err_str);
	if (e->hint && n < sizeof(e->msg))
		snprintf(e->msg + n, sizeof(e->msg) - n, " (hint: %s)", e->hint);
}

int rk_err_set(struct rk_error *e, int err, const char *op, const char *fmt, ...)
{
	va_list ap;

	if (err < 0)
		err = -err;
	if (err == 0)
		err = EIO;
	if (e) {
		va_start(ap, fmt);
		fill(e, err, op, fmt, ap);
		va_end(ap);
	}
	return -err;
}

int rk_err_sys(struct rk_error *e, const char *op, const char *fmt, ...)
{
	int err = errno ? errno : EIO;
	va_list ap;

	if (e) {
		va_start(ap, fmt);
		fill(e, err, op, fmt, ap);
		va_end(ap);
	}
	return -err;
}

int rk_err_ret(struct rk_error *e, int ret, const char *op, const char *fmt, ...)
{
	int err = ret > 0 ? ret : (errno ? errno : EIO);
	va_list ap;

	if (e) {
		va_start(ap, fmt);
		fill(e, err, op, fmt, ap);
		va_end(ap);
	}
	return -err;
}

void rk_err_set_qp(struct rk_error *e, uint32_t qp_num)
{
	size_t n;

	if (!e || !qp_num)
		return;
	e->qp_num = qp_num;
	n = strlen(e->msg);
	if (n < sizeof(e->msg))
		snprintf(e->msg + n, sizeof(e->msg) - n, " [qp 0x%x]", qp_num);
}

int rk_error_from_wc(struct rk_error *e, const void *wcp)
{
	const struct ibv_wc *wc = wcp;
	size_t n;

	if (wc->status == IBV_WC_SUCCESS) {
		rk_error_clear(e);
		return 0;
	}
	if (!e)
		return -EIO;
	rk_error_clear(e);
	e->err = EIO;
	snprintf(e->op, sizeof(e->op), "work completion");
	snprintf(e->err_str, sizeof(e->err_str), "%s", strerror(EIO));
	e->wc_status = (int)wc->status;
	e->wc_status_str = ibv_wc_status_str(wc->status);
	e->vendor_err = wc->vendor_err;
	e->qp_num = wc->qp_num;
	e->hint = rk_wc_status_hint((int)wc->status);
	n = (size_t)snprintf(e->msg, sizeof(e->msg),
			     "work completion failed: %s (status %d, vendor_err 0x%x, qp 0x%x)",
			     e->wc_status_str, e->wc_status, e->vendor_err, e->qp_num);
	if (e->hint && n < sizeof(e->msg))
		snprintf(e->msg + n, sizeof(e->msg) - n, " (hint: %s)", e->hint);
	return -EIO;
}
