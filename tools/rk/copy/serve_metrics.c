/* serve_metrics.c - rk serve's metrics file: see serve_metrics.h. */
#define _GNU_SOURCE /* mkostemp */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "serve_metrics.h"

#define BUF_LEN 8192

static const char *const refusal_names[SM_REF_N] = {
    "token", "busy", "version", "bad_hello", "no_read", "unknown_lane", "resources"};
static const char *const failure_names[SM_FAIL_N] = {"disconnected", "idle",	 "protocol",
						     "shutdown",     "replaced", "error"};

struct out {
	char *buf;
	size_t len, at;
	int full;
};

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->at, o->len - o->at, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->at)
		o->full = 1;
	else
		o->at += (size_t)n;
}

static uint64_t get(const atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static void metric(struct out *o, const char *name, const char *type, const char *help,
		   unsigned long long v)
{
	put(o, "# HELP rk_serve_%s %s\n# TYPE rk_serve_%s %s\nrk_serve_%s %llu\n", name, help, name,
	    type, name, v);
}

int sm_format(const struct sm_metrics *m, long active, long fds, char *buf, size_t len)
{
	struct out o = {.buf = buf, .len = len};
	int_fast64_t reg = atomic_load_explicit(&m->registered_bytes, memory_order_relaxed);

	if (!len)
		return -1;
	metric(&o, "sessions_active", "gauge", "Sessions running now (pushes and pulls).",
	       (unsigned long long)(active > 0 ? active : 0));
	metric(&o, "sessions_total", "counter", "Sessions begun since start.",
	       (unsigned long long)get(&m->sessions));
	metric(&o, "reconnects_total", "counter",
	       "Sessions that replaced an earlier session of the same client (rk copy retrying).",
	       (unsigned long long)get(&m->reconnects));
	metric(&o, "received_bytes_total", "counter",
	       "File data received and written (committed or kept as a temporary).",
	       (unsigned long long)get(&m->bytes_received));
	metric(&o, "sent_bytes_total", "counter", "File data sent whole to pulling clients.",
	       (unsigned long long)get(&m->bytes_sent));
	metric(&o, "files_committed_total", "counter",
	       "Files received, verified and renamed into place.",
	       (unsigned long long)get(&m->files_committed));
	metric(&o, "files_failed_total", "counter", "Files and directories refused or failed.",
	       (unsigned long long)get(&m->files_failed));
	put(&o, "# HELP rk_serve_session_failures_total Sessions that ended without the client's "
		"goodbye, by reason.\n# TYPE rk_serve_session_failures_total counter\n");
	for (int i = 0; i < SM_FAIL_N; i++)
		put(&o, "rk_serve_session_failures_total{reason=\"%s\"} %llu\n", failure_names[i],
		    (unsigned long long)get(&m->failed[i]));
	put(&o, "# HELP rk_serve_refusals_total Connect requests refused, by reason.\n"
		"# TYPE rk_serve_refusals_total counter\n");
	for (int i = 0; i < SM_REF_N; i++)
		put(&o, "rk_serve_refusals_total{reason=\"%s\"} %llu\n", refusal_names[i],
		    (unsigned long long)get(&m->refused[i]));
	metric(&o, "registered_bytes", "gauge",
	       "Memory registered (pinned) by receiving sessions now: rings and message buffers.",
	       (unsigned long long)(reg > 0 ? reg : 0));
	if (fds >= 0)
		metric(&o, "open_fds", "gauge", "File descriptors the server holds.",
		       (unsigned long long)fds);
	return o.full ? -1 : (int)o.at;
}

long sm_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	long n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n > 3 ? n - 3 : 0; /* ".", ".." and the directory's own */
}

/* All of @len bytes of @buf to @fd. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int sm_write(const char *path, const struct sm_metrics *m, long active, char *why, size_t why_len)
{
	char buf[BUF_LEN], tmp[4096], dir[4096];
	int n, fd, dfd, e;

	n = sm_format(m, active, sm_open_fds(), buf, sizeof(buf));
	if (n < 0 || snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp)) {
		snprintf(why, why_len, "%s: name or metrics too long", path);
		return -1;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, why_len, "%s: cannot create a file beside it: %s", path,
			 strerror(errno));
		return -1;
	}
	/* Readable by the collector, whatever our umask (a service's may be 077). */
	if (fchmod(fd, 0644) || write_all(fd, buf, (size_t)n) || fsync(fd)) {
		e = errno;
		close(fd);
		unlink(tmp);
		snprintf(why, why_len, "%s: %s", tmp, strerror(e));
		return -1;
	}
	if (close(fd) || rename(tmp, path)) {
		e = errno;
		unlink(tmp);
		snprintf(why, why_len, "%s: %s", path, strerror(e));
		return -1;
	}
	/* The rename itself durable: fsync the directory (dirname may change its argument). */
	snprintf(dir, sizeof(dir), "%s", path);
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd))
			snprintf(why, why_len, "%s: fsync of its directory: %s", path,
				 strerror(errno));
		close(dfd);
	}
	return 0;
}
