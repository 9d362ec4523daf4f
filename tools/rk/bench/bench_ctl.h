/*
 * bench_ctl.h - rk bench's control channel: one TCP connection per run.
 *
 * The data path carries only benchmark traffic; everything the two sides
 * must tell each other goes here: the parameters and the verdict on them,
 * queue-pair and buffer coordinates, a barrier before each size, "done"
 * counts, results, heartbeats and the reason for a failure. A closed
 * socket is also the fastest sign that the peer process died.
 *
 * Frame: rk's control frame (common/frame.h): "RKBC", u32 payload length
 * (<= BENCH_MSG_MAX), u8 type, payload, sent and read by the shared
 * channel (common/chan.h). Integers in payloads are big-endian. Every wait
 * has a deadline. Before PARAMS version 5 the header was "RKBC", u16 type,
 * u16 length: a peer that still sends it is refused as of another version
 * (-EPROTO), from its first header.
 */
#ifndef RK_BENCH_CTL_H
#define RK_BENCH_CTL_H

#include <stddef.h>
#include <stdint.h>

#include <rdmakit/error.h>

#include "common/chan.h"

#define BENCH_MSG_MAX 256

enum bench_msg_type {
	BM_PARAMS = 1, /* client -> server: params (64 B) + session token (16 B) */
	BM_ACCEPT,     /* server -> client: empty; rk matrix: the server's proof (16 B) */
	BM_REFUSE,     /* server -> client: reason text */
	BM_OOB,	       /* both: one rk_oob_info (64 B), per QP, --oob only */
	BM_READY,      /* both: buffer address, length, rkey */
	BM_GO,	       /* both: barrier before a run: size, phase */
	BM_DONE,       /* both: this side sent its last message: count */
	BM_RESULT,     /* both: counts, wall time, CPU time */
	BM_HEARTBEAT,  /* both: still alive: the sender's progress count in this run (8 B) */
	BM_ERROR,      /* both: this side failed: reason text */
	BM_XDESC,      /* server -> client, --op xfer: its segment's descriptor (opaque) */
	BM_TYPE_MAX,
};

struct bench_msg {
	uint16_t type;
	uint16_t len;
	uint8_t data[BENCH_MSG_MAX];
};

extern const struct cli_frame_fmt bench_frame_fmt;

struct bench_ctl {
	int fd;
	struct cli_chan ch;  /* the frames, a partly received one kept */
	uint64_t beat_count; /* the highest progress count a heartbeat claimed this run */
	uint64_t beat_ns;    /* when that count last grew */
};

/* bench_ctl_init - take ownership of connected socket @fd. */
void bench_ctl_init(struct bench_ctl *c, int fd);
void bench_ctl_close(struct bench_ctl *c);

/* bench_ctl_send - send one message within @timeout_ms. 0 or negative errno. */
int bench_ctl_send(struct bench_ctl *c, uint16_t type, const void *data, uint16_t len,
		   int timeout_ms, struct rk_error *err);

/*
 * bench_ctl_beat_reset - forget the peer's progress count: a new run
 * starts counting from 0 (call after the GO barrier).
 */
void bench_ctl_beat_reset(struct bench_ctl *c);

/*
 * bench_ctl_recv - the next message other than a heartbeat, within
 * @timeout_ms (0: only what is already there; returns -EAGAIN if nothing).
 * A heartbeat is taken in passing: a count above beat_count is recorded
 * (beat_count, beat_ns); one without its 8 bytes is a protocol error.
 * A BM_ERROR from the peer is turned into an error ("peer failed: ...").
 * Returns 0, -ETIMEDOUT, -EAGAIN, -ECONNRESET (peer closed), -EBADMSG,
 * -EPROTO (an older rk bench's header), -EMSGSIZE (a length over
 * BENCH_MSG_MAX), -EREMOTEIO (the peer's ERROR).
 */
int bench_ctl_recv(struct bench_ctl *c, struct bench_msg *m, int timeout_ms, struct rk_error *err);

/* bench_ctl_expect - bench_ctl_recv that also insists on @type and @len (-1: any). */
int bench_ctl_expect(struct bench_ctl *c, uint16_t type, int len, struct bench_msg *m,
		     int timeout_ms, struct rk_error *err);

/* bench_ctl_error - tell the peer why we give up (best effort, short deadline). */
void bench_ctl_error(struct bench_ctl *c, const char *text);

/* bench_fail - cli_fail under rk bench's name (common/tool_error.h). Returns -@errnum. */
int bench_fail(struct rk_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
