/*
 * ex_common.h - the small helpers every example shares: error printing,
 * size/number parsing and a monotonic clock.  No verbs logic lives here: each
 * example shows its own calls in full.
 */
#ifndef EX_COMMON_H
#define EX_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/* Print "PROG: message" (printf-style) and exit(1). */
void ex_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Print "PROG: what: strerror(errno)" and exit(1). */
void ex_die_errno(const char *what) __attribute__((noreturn));

/*
 * Print why ibv_reg_mr failed.  ENOMEM / EPERM almost always mean the
 * locked-memory limit (RLIMIT_MEMLOCK), not a lack of RAM: the message shows
 * the current limit and how to raise it.
 */
void ex_report_reg_mr_failure(size_t len);

/*
 * Print a failed work completion in full: opcode, ibv_wc_status_str(),
 * vendor_err, QP number and a hint for the common statuses.
 */
void ex_report_wc(const char *what, const struct ibv_wc *wc);

/* Parse "4096", "64K", "8M", "1G" into bytes; returns -1 on junk or overflow. */
long long ex_parse_size(const char *s);

/* Parse a decimal integer in [min, max]; returns 0 and sets *out, or -1. */
int ex_parse_int(const char *s, long min, long max, long *out);

/* Monotonic time in nanoseconds. */
uint64_t ex_now_ns(void);

/* The program name used in messages (set from argv[0] by ex_set_prog). */
void ex_set_prog(const char *argv0);
extern const char *ex_prog;

#endif
