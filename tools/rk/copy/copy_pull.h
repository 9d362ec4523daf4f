/*
 * copy_pull.h - rk copy HOST:SRC... DEST: fetch files and trees from an
 * rk serve started with --read (copy_pull.c).
 */
#ifndef RK_COPY_PULL_H
#define RK_COPY_PULL_H

#include <stdint.h>

struct cp_pull_opts {
	const char *host, *port;
	const char *dev;      /* RDMA device; NULL: $RK_DEV, else the route to the server's */
	const uint8_t *token; /* CP_TOKEN_LEN bytes, or NULL */
	char *const *srcs;    /* paths under the server's directory */
	int nsrc;
	const char *dest; /* local */
	uint32_t chunk;
	unsigned depth;
	unsigned flags; /* CP_F_FORCE, CP_F_RESUME */
	unsigned lanes; /* connections (--num-qp), 1..CP_MAX_LANES */
	int recursive;
	int idle_ms;	   /* give up on a server silent this long */
	unsigned retries;  /* reconnects after a lost connection (as a push's --retries) */
	unsigned window_s; /* ... while something moved within this long */
	int retry_first;
	int progress; /* an enum cp_progress_mode */ /* --retries given: retry a first connect that
							finds no answer */
	int quiet, json;       /* json: the report is JSON on stdout, nothing else there */
	const char *json_path; /* --json[=FILE]: "-" (stdout) or FILE; NULL: no JSON */
};

/*
 * cp_pull_run - fetch @o->srcs into @o->dest by rsync's rules (as a push
 * places files under the server's directory, a pull places them under
 * DEST), print the report (a summary line, or --json), and return the
 * exit code: 0, 1 (files failed), 2 (usage), 3 (refused by the server), 4
 * (connection lost: run it again with --resume). Writes only at DEST or
 * beneath it, whatever names the server sends. A connection lost to the
 * transport is made again, as a push does (copy_retry.h: backoff, budget,
 * smaller chunks), and the next PULL asks for --resume.
 */
int cp_pull_run(const struct cp_pull_opts *o);

#endif
