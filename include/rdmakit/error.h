/*
 * rdmakit/error.h - the error object every rdmakit call can fill.
 *
 * Every function that can fail returns a negative errno and, when the caller
 * passes a struct rk_error, records what failed in it: the operation, the
 * errno and its text, for completions the work-completion status and the
 * vendor error, the QP number, and a one-line hint for the common mistakes.
 * The object is plain data owned by the caller (usually on the stack); it
 * holds no pointers into library objects, so it outlives them.
 *
 * Thread-safety: none needed; each thread uses its own struct rk_error.
 */
#ifndef RDMAKIT_ERROR_H
#define RDMAKIT_ERROR_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RK_ERROR_OP_MAX	 48
#define RK_ERROR_MSG_MAX 320

struct rk_error {
	char op[RK_ERROR_OP_MAX];   /* what failed, e.g. "ibv_reg_mr", "modify_qp RTR" */
	int err;		    /* positive errno, 0 when none */
	char err_str[64];	    /* strerror(err) */
	int wc_status;		    /* enum ibv_wc_status of a failed completion, -1 if none */
	const char *wc_status_str;  /* ibv_wc_status_str(wc_status) or "" (static) */
	uint32_t vendor_err;	    /* wc.vendor_err, 0 if none */
	uint32_t qp_num;	    /* QP involved, 0 if none */
	const char *hint;	    /* one-line fix for common cases, or NULL (static) */
	int reject_reason;	    /* a connect the peer refused: enum rk_reject_reason
				     * (cm.h), 0 when none or not an rk peer's refusal */
	char msg[RK_ERROR_MSG_MAX]; /* the whole story on one line, no trailing newline */
};

/*
 * rk_error_clear - reset @e to "no error" (err 0, wc_status -1, empty strings).
 * Accepts NULL. Costs a memset.
 */
RK_API void rk_error_clear(struct rk_error *e);

/*
 * rk_error_str - the one-line description of @e ("" when no error).
 * The string lives inside @e. Accepts NULL (returns "").
 */
RK_API const char *rk_error_str(const struct rk_error *e);

/*
 * rk_wc_status_hint - the hint for a failed work completion's status
 * (an enum ibv_wc_status value), or NULL when there is no common cause to
 * point at. The hint field of the explain table's entry (rdmakit/explain.h).
 * Pure function on a static table; safe from any thread.
 */
RK_API const char *rk_wc_status_hint(int wc_status);

/*
 * rk_errno_hint - the hint for errno @err returned by operation @op (a verbs
 * or rdma_cm function name such as "ibv_post_send" or "ibv_reg_mr"), or NULL.
 * The entry about @op wins over the one for any call (rk_explain_find).
 * Pure function; safe from any thread.
 */
RK_API const char *rk_errno_hint(const char *op, int err);

/*
 * rk_error_setf - fill @e for a failure of the caller's own, so a tool or
 * an application on rdmakit reports its errors in the same object as the
 * library's. @op names the operation ("rk bench", "open source file");
 * @err is the errno (its sign is ignored; 0 becomes EIO); the formatted
 * text is the whole one-line story and becomes @e->msg as it is (what
 * rk_error_str returns). err_str is strerror(err); wc_status is -1, the
 * hint NULL, the other fields 0. Accepts NULL @e (then it only returns).
 * Returns -err, so `return rk_error_setf(e, ...);` fails with it. Costs a
 * vsnprintf; touches only @e.
 */
RK_API int rk_error_setf(struct rk_error *e, const char *op, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * rk_error_from_wc - describe failed completion @wc (a const struct ibv_wc *,
 * passed as void * so this header does not need verbs.h) in @e.
 * Returns -EIO for a failed completion, 0 (and clears @e) for a successful one.
 */
RK_API int rk_error_from_wc(struct rk_error *e, const void *wc);

#ifdef __cplusplus
}
#endif

#endif
