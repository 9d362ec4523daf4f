/*
 * rdmakit/explain.h - what an RDMA failure means, why it usually happens and
 * how to fix it.
 *
 * One static table, inside the library, covers every work-completion status,
 * every rdma_cm event, the errnos people meet from the verbs and rdma_cm
 * calls (per call where the meaning depends on it) and the IB CM reject
 * reasons. It is the only copy: the hints in struct rk_error come from it, and
 * so does `rk explain`.
 *
 * Entries are read-only static data; pointers to them stay valid for the
 * life of the process. Every function here is pure (no allocation, no locks)
 * and safe from any thread.
 */
#ifndef RDMAKIT_EXPLAIN_H
#define RDMAKIT_EXPLAIN_H

#include <stddef.h>

#include <rdmakit/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What an entry's code is. */
enum rk_explain_kind {
	RK_EXPLAIN_WC_STATUS, /* enum ibv_wc_status of a failed work completion */
	RK_EXPLAIN_ERRNO,     /* errno from a verbs / rdma_cm call (see ops) */
	RK_EXPLAIN_CM_EVENT,  /* enum rdma_cm_event_type */
	RK_EXPLAIN_CM_REJECT, /* IB CM reject reason (status of RDMA_CM_EVENT_REJECTED) */
};

#define RK_EXPLAIN_OPS_MAX  6
#define RK_EXPLAIN_LIST_MAX 6

struct rk_explain {
	enum rk_explain_kind kind;
	int code;	   /* the status / errno / event / reason number */
	const char *name;  /* full symbol: "IBV_WC_RETRY_EXC_ERR", "ENOMEM", ... */
	const char *alias; /* short name: "RETRY_EXC_ERR", "REJECTED", or NULL */
	/*
	 * For RK_EXPLAIN_ERRNO: the calls this entry is about (prefixes such as
	 * "ibv_reg_mr"), NULL-terminated; no call at all means "any call".
	 */
	const char *ops[RK_EXPLAIN_OPS_MAX];
	const char *text;    /* CM reject reasons only: their text (no library call gives one) */
	const char *meaning; /* one or two sentences */
	const char *causes[RK_EXPLAIN_LIST_MAX]; /* most likely first, NULL-terminated */
	const char *fixes[RK_EXPLAIN_LIST_MAX];	 /* NULL-terminated */
	const char *hint;			 /* the one-line hint rk_error shows, or NULL */
};

/*
 * rk_explain_count / rk_explain_at - iterate over the table: entry @i for
 * 0 <= @i < rk_explain_count(), NULL past the end. Constant time.
 */
RK_API size_t rk_explain_count(void);
RK_API const struct rk_explain *rk_explain_at(size_t i);

/*
 * rk_explain_find - the entry for (@kind, @code), or NULL. For
 * RK_EXPLAIN_ERRNO, @op (a call name such as "ibv_reg_mr", may be NULL)
 * picks the entry about that call, else the entry for any call; a negative
 * @code is taken as -errno. Linear in the table (about a hundred entries).
 */
RK_API const struct rk_explain *rk_explain_find(enum rk_explain_kind kind, int code,
						const char *op);

/*
 * rk_explain_text - the library's own text for @e: ibv_wc_status_str(),
 * rdma_event_str(), strerror() or the IB CM reason text. Static storage,
 * never NULL. (strerror's is the C library's, in the C locale text.)
 */
RK_API const char *rk_explain_text(const struct rk_explain *e);

/* rk_explain_kind_str - "completion status", "errno", "rdma_cm event", "CM reject reason". */
RK_API const char *rk_explain_kind_str(enum rk_explain_kind kind);

/*
 * rk_explain_lookup - the entries @what names, stored in @out (room for
 * @max), best first; returns how many matched (may exceed @max; only @max
 * are stored). @what is case-insensitive and may be:
 *   a number ("12": a completion status), a negative number ("-12": an
 *   errno, as the library's functions return them), or a kind word and a
 *   number ("errno 12", "event 8", "reject 28", "status 5");
 *   a name with or without its prefix ("IBV_WC_RETRY_EXC_ERR", "RETRY_EXC_ERR",
 *   "REJECTED", "INVALID_SERVICE_ID");
 *   the library's text ("transport retry counter exceeded");
 *   an errno name and a call ("ENOMEM reg_mr", "EINVAL ibv_modify_qp").
 * Exact matches win; if there are none, entries whose name or text contains
 * @what are returned. Linear in the table; no allocation.
 */
RK_API size_t rk_explain_lookup(const char *what, const struct rk_explain **out, size_t max);

/*
 * rk_explain_suggest - when rk_explain_lookup() found nothing: the known
 * names closest to @what (edit distance, case-insensitive), closest first,
 * stored in @out (room for @max). Returns how many were stored. Costs one
 * edit distance per name (short strings); no allocation.
 */
RK_API size_t rk_explain_suggest(const char *what, const char **out, size_t max);

#ifdef __cplusplus
}
#endif

#endif
