/*
 * serve_metrics.h - rk serve's counters and their Prometheus text file
 * (--metrics-file), for node_exporter's textfile collector.
 *
 * Session threads count with relaxed atomics (SM_ADD); the main thread
 * reads them every SM_PERIOD_S and at exit and writes the whole file
 * anew: a temporary beside it, fsync, rename, so a reader sees the old
 * file or the new one and never half of one. A textfile collector reads
 * only names ending in .prom: the temporary's name does not.
 */
#ifndef RK_SERVE_METRICS_H
#define RK_SERVE_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SM_PERIOD_S 5

/* Why a connect request was refused before a session began. */
enum sm_refusal {
	SM_REF_TOKEN,	  /* wrong or missing access token */
	SM_REF_BUSY,	  /* --max-clients sessions running */
	SM_REF_VERSION,	  /* protocol version not supported */
	SM_REF_HELLO,	  /* malformed hello or lane request */
	SM_REF_NO_READ,	  /* a pull, without --read */
	SM_REF_LANE,	  /* a lane for no running session */
	SM_REF_RESOURCES, /* the server could not start a session */
	SM_REF_N
};

/* Why a session ended other than with the client's BYE. */
enum sm_failure {
	SM_FAIL_DISCONNECTED, /* the client went away mid-session */
	SM_FAIL_IDLE,	      /* moved too little within --idle */
	SM_FAIL_PROTOCOL,     /* the client broke the protocol */
	SM_FAIL_SHUTDOWN,     /* the server stopped (SIGTERM) */
	SM_FAIL_REPLACED,     /* a new session of the same client took over */
	SM_FAIL_ERROR,	      /* anything else: accept, resources, transport */
	SM_FAIL_N
};

struct sm_metrics {
	atomic_uint_fast64_t sessions;	      /* sessions begun */
	atomic_uint_fast64_t reconnects;      /* sessions that replaced another */
	atomic_uint_fast64_t bytes_received;  /* file data written, committed or not */
	atomic_uint_fast64_t bytes_sent;      /* file data of pulls sent whole */
	atomic_uint_fast64_t files_committed; /* renamed into place, verified */
	atomic_uint_fast64_t files_failed;    /* refused or failed files and directories */
	atomic_int_fast64_t registered_bytes; /* memory registered by sessions now */
	atomic_uint_fast64_t refused[SM_REF_N];
	atomic_uint_fast64_t failed[SM_FAIL_N];
};

/* SM_ADD - count @n in @field of @m, which may be NULL (no metrics: rk copy's pulls). */
#define SM_ADD(m, field, n)                                                                        \
	do {                                                                                       \
		if (m)                                                                             \
			atomic_fetch_add_explicit(&(m)->field, (n), memory_order_relaxed);         \
	} while (0)

/*
 * sm_format - the Prometheus text exposition of @m, with @active sessions
 * running and @fds descriptors open, into @buf. Returns its length, or
 * -1 if @len is too small.
 */
int sm_format(const struct sm_metrics *m, long active, long fds, char *buf, size_t len);

/* sm_open_fds - descriptors this process holds, or -1 if unknown. */
long sm_open_fds(void);

/*
 * sm_write - write @m to @path atomically (a temporary in its directory,
 * fsync, rename, fsync of the directory). 0, or -1 with @why set.
 */
int sm_write(const char *path, const struct sm_metrics *m, long active, char *why, size_t why_len);

#endif
