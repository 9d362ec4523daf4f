/*
 * copy_send.h - the sending side of rk copy: connect to rk serve, agree on
 * the ring, and stream a plan's directories and files through it with
 * depth slots in flight.
 */
#ifndef RK_COPY_SEND_H
#define RK_COPY_SEND_H

#include <stddef.h>
#include <stdint.h>

#include "copy_plan.h"
#include "copy_progress.h"

/* Exit codes of rk copy (documented in its --help). */
enum {
	CP_EXIT_OK = 0,
	CP_EXIT_FAILED = 1,  /* some file failed (I/O, integrity, source changed) */
	CP_EXIT_USAGE = 2,   /* bad command line */
	CP_EXIT_REFUSED = 3, /* refused by the server: token, busy, exists, path, limits */
	CP_EXIT_LOST = 4,    /* could not connect, connection lost, server silent */
};

struct cp_send_opts {
	const char *host, *port;
	const char *dev;      /* RDMA device; NULL: $RK_DEV, else the only one */
	const uint8_t *token; /* CP_TOKEN_LEN bytes, or NULL */
	uint32_t chunk;
	unsigned depth;
	unsigned lanes; /* connections (QPs) to stripe over, 1..CP_MAX_LANES */
	unsigned flags; /* CP_F_FORCE, CP_F_RESUME */
	int idle_ms;	/* give up on a server silent this long */
	struct cp_progress *progress;
};

/*
 * cp_send - run one session. Per-item outcomes land in @plan. Returns
 * CP_EXIT_OK when the session ran to its end (items may still have
 * failed), CP_EXIT_REFUSED when the server refused the connection, or
 * CP_EXIT_LOST; then @why says what happened.
 */
int cp_send(const struct cp_send_opts *o, struct cp_plan *plan, char *why, size_t why_len);

#endif
