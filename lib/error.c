/*
 * error.c - the error object and its hints.
 *
 * The hints are the part of an RDMA error people actually need: a status
 * like REM_ACCESS_ERR alone does not say "your rkey is wrong". They come
 * from the explain table, which is pure data so the unit tests can check it
 * on any host.
 */
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "rk_internal.h"

/*
 * The hints are one field of the explain table (explain_table.c): the same
 * entry that rk explain prints, so the two cannot disagree.
 */
const char *rk_wc_status_hint(int wc_status)
{
	const struct rk_explain *e = rk_explain_find(RK_EXPLAIN_WC_STATUS, wc_status, NULL);

	return e ? e->hint : NULL;
}

const char *rk_errno_hint(const char *op, int err)
{
	const struct rk_explain *e = rk_explain_find(RK_EXPLAIN_ERRNO, err, op);

	return e ? e->hint : NULL;
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

int rk_error_setf(struct rk_error *e, const char *op, int err, const char *fmt, ...)
{
	va_list ap;

	if (err < 0)
		err = -err;
	if (err == 0)
		err = EIO;
	if (e) {
		rk_error_clear(e);
		e->err = err;
		snprintf(e->op, sizeof(e->op), "%s", op ? op : "");
		snprintf(e->err_str, sizeof(e->err_str), "%s", strerror(err));
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return -err;
}

void rk__err_msgf(struct rk_error *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

int rk__err_gai(struct rk_error *e, int gai_rc, const char *fmt, ...)
{
	char detail[128]; /* a host and a port */
	int err;
	va_list ap;

	switch (gai_rc) {
	case EAI_NONAME:
	case EAI_FAIL:
#ifdef EAI_NODATA /* glibc's, with _GNU_SOURCE */
	case EAI_NODATA:
	case EAI_ADDRFAMILY:
#endif
		err = ENXIO;
		break;
	case EAI_AGAIN:
		err = EAGAIN;
		break;
	case EAI_MEMORY:
		err = ENOMEM;
		break;
	case EAI_SYSTEM:
		err = errno ? errno : EIO;
		break;
	default:
		err = EINVAL;
	}
	if (!e)
		return -err;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	rk_error_clear(e);
	e->err = err;
	snprintf(e->op, sizeof(e->op), "getaddrinfo");
	snprintf(e->err_str, sizeof(e->err_str), "%s", gai_strerror(gai_rc));
	if (err == ENXIO)
		e->hint = "no such host: check the name (DNS, /etc/hosts) or give an IP address";
	snprintf(e->msg, sizeof(e->msg), "getaddrinfo: %s: %s%s%s%s", detail, gai_strerror(gai_rc),
		 e->hint ? " (hint: " : "", e->hint ? e->hint : "", e->hint ? ")" : "");
	return -err;
}

int rk__err_set(struct rk_error *e, int err, const char *op, const char *fmt, ...)
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

int rk__err_sys(struct rk_error *e, const char *op, const char *fmt, ...)
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

int rk__err_ret(struct rk_error *e, int ret, const char *op, const char *fmt, ...)
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

void rk__err_set_qp(struct rk_error *e, uint32_t qp_num)
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
