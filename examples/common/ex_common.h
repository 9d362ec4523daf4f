/*
 * ex_common.h - the small helpers every example shares: error printing,
 * size/number parsing, a monotonic clock, address resolution, percentiles and
 * "server in a child, client in the parent".  No verbs or rdma_cm logic lives
 * here: each example shows its own calls in full.
 */
#ifndef EX_COMMON_H
#define EX_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <netdb.h>

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

/* Print "PROG: what (try --help)" and exit(2): a bad command line. */
void ex_bad_usage(const char *what) __attribute__((noreturn));

/* An option's number: s parsed as a decimal in [min, max], else ex_bad_usage(what). */
long ex_opt_num(const char *s, long min, long max, const char *what);

/*
 * The options the "server|client" examples (01 to 04) share: -p/--port PORT
 * (1..65535), -t/--timeout SECONDS (1..3600, stored in *timeout_ms as ms),
 * -h/--help (usage(stdout), exit 0) and an unknown one (ex_bad_usage).
 * Returns 1 if it handled opt, 0 if it is the example's own.
 */
int ex_role_option(int opt, const char *arg, const char **port, int *timeout_ms,
		   void (*usage)(FILE *f));

/* Monotonic time in nanoseconds. */
uint64_t ex_now_ns(void);

/* CPU time this process has used so far (user + system), in seconds. */
double ex_cpu_seconds(void);

/*
 * Resolve ADDR and PORT into a socket address for rdma_bind_addr (passive
 * != 0) or rdma_resolve_addr.  Dies with gai_strerror() on failure; free the
 * result with freeaddrinfo().
 */
struct addrinfo *ex_resolve(const char *addr, const char *port, int passive);

/*
 * Wait up to timeout_ms for fd to become readable: returns 1 if it is, 0 at
 * the deadline.  Dies if poll() fails.
 */
int ex_wait_fd(int fd, int timeout_ms);

/* Sort v[0..n) in place and return its pct-th percentile, v[n * pct / 100]. */
uint64_t ex_percentile(uint64_t *v, size_t n, unsigned pct);

/*
 * Server side of ex_run_pair: flush stdout (the "listening" line), then write
 * one byte to ready_fd and close it.  Does nothing when ready_fd < 0 (the
 * server runs alone).
 */
void ex_server_ready(int ready_fd);

/*
 * Run both sides on this machine: server(arg, ready_fd) in a forked child,
 * which calls ex_server_ready(ready_fd) once it listens; then client(arg)
 * here; then reap the child.  Dies if the server does not start or does not
 * exit with status 0.
 */
void ex_run_pair(void (*server)(void *arg, int ready_fd), void (*client)(void *arg), void *arg);

/*
 * The command line of the examples that run both sides (05 to 08):
 *
 *   PROG [--server|--client] [options] ADDR
 *
 * -s/--server runs the server only, -c/--client the client only, neither
 * both (ex_run_pair).  -p/--port, -h/--help are also common.
 */
struct ex_pair {
	int server, client;
	const char *port, *addr;
};

/*
 * Print the usage text: the common lines around the example's own option
 * lines (fmt, printf-style).  `what` says what the program does.
 */
void ex_pair_usage(FILE *f, const char *what, const char *port, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Handle getopt_long's result `opt` if it is a common option: -s, -c, -p,
 * -h (usage(stdout), exit 0) or an unknown one (usage(stderr), exit 2).
 * Returns 1 if it was handled, 0 if it is the example's own.
 */
int ex_pair_option(struct ex_pair *p, int opt, const char *arg, void (*usage)(FILE *f));

/*
 * After the options: check there is exactly one ADDR and not both -s and -c
 * (else usage(stderr), exit 2), then run server(arg, -1), client(arg) or
 * both (ex_run_pair).
 */
void ex_pair_run(struct ex_pair *p, int argc, char **argv, void (*usage)(FILE *f),
		 void (*server)(void *arg, int ready_fd), void (*client)(void *arg), void *arg);

/* The program name used in messages (set from argv[0] by ex_set_prog). */
void ex_set_prog(const char *argv0);
extern const char *ex_prog;

#endif
