/*
 * copy_send.h - the sending side of rk copy: connect to rk serve, agree on
 * the ring, and stream a plan's directories and files through it with
 * depth slots in flight.
 */
#ifndef RK_COPY_SEND_H
#define RK_COPY_SEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmakit/cm.h>
#include <rdmakit/device.h>
#include <rdmakit/pd.h>

#include "commands.h"
#include "copy_plan.h"
#include "copy_progress.h"
#include "copy_proto.h"

struct cp_send_opts {
	const char *host, *port;
	const char *dev;      /* RDMA device; NULL: $RK_DEV, else the only one */
	const uint8_t *token; /* CP_TOKEN_LEN bytes, or NULL */
	uint32_t chunk;
	unsigned depth;
	unsigned lanes;	     /* connections (QPs) to stripe over, 1..CP_MAX_LANES */
	unsigned flags;	     /* CP_F_FORCE, CP_F_RESUME */
	int idle_ms;	     /* give up on a server silent this long */
	uint8_t ack_timeout; /* QP ACK timeout exponent (4.096 us * 2^n); 0: the library's */
	/* With @replacing: the key of this client's previous session, which this one replaces. */
	int replacing;
	uint8_t replaces[CP_KEY_LEN];
	struct cp_progress *progress;
	int progress_mode; /* rk copy: an enum cp_progress_mode for the progress line */
	/*
	 * Serving a pull (rk serve --read) instead of connecting: @device (the
	 * listener's, borrowed) and @pd (this session's alone) hold what the
	 * session registers; lane 0 is @accept, taken over; its first message
	 * must be a PULL, which @on_pull turns into @plan (0, or a CP_E_* code
	 * with @why, sent to the client as an ERROR). Chunk, depth and flags
	 * then come from the PULL.
	 */
	struct rk_device *device;
	struct rk_pd *pd;
	struct rk_cm_request *accept;
	uint64_t max_stage; /* serving a pull: bytes of staging slots at most (--max-ring) */
	atomic_int *stop;   /* serving a pull: set when the server shuts down */
	int (*on_pull)(void *arg, const struct cp_pull *p, struct cp_plan *plan, char *why,
		       size_t why_len);
	void *on_pull_arg;
	/*
	 * Serving a pull over the lanes the PULL asks for: lane @idx's
	 * connect request (ours to accept), once the client has made it with
	 * the session's @key (NULL after @timeout_ms, or when the session is
	 * to end). Called from the session's thread after the WELCOME, lanes
	 * 1.. in order. NULL: a pull gets one lane whatever it asks.
	 */
	struct rk_cm_request *(*join)(void *arg, const uint8_t *key, unsigned nlanes, unsigned idx,
				      int timeout_ms);
	void *join_arg;
};

/* How a session ended, beyond its exit code: what a caller retrying it needs. */
struct cp_send_fate {
	/*
	 * RK_EXIT_LOST by the transport: retries exhausted (no ACK), the peer
	 * gone (disconnected, flushed), silent past idle_ms, or not reachable
	 * (nobody listening, no answer). Not: refusals, protocol errors, an
	 * ERROR from the server, local faults. A reconnect may cure these.
	 */
	int transport;
	int established;	 /* the server welcomed the session (the data path was in use) */
	int refused;		 /* the first lane's connect found nobody listening */
	int unanswered;		 /* the first lane's connect found no answer at all */
	uint8_t key[CP_KEY_LEN]; /* the session's key, once established: what a next one replaces */
};

/*
 * cp_send - run one session over the items of @plan not yet CP_ITEM_DONE
 * (so a caller may call it again after a lost connection, with CP_F_RESUME,
 * once it has set the items still CP_ITEM_SENT back to pending). Per-item
 * outcomes land in @plan, how the session ended in @fate. Returns
 * RK_EXIT_OK when the session ran to its end (items may still have
 * failed), RK_EXIT_REFUSED when the server refused the connection, or
 * RK_EXIT_LOST; then @why says what happened. Every wait is bounded by
 * idle_ms or the connect timeout.
 */
int cp_send(const struct cp_send_opts *o, struct cp_plan *plan, struct cp_send_fate *fate,
	    char *why, size_t why_len);

#endif
