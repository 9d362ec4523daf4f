/*
 * copy_recv_int.h - the parts of one receiving session (copy_recv.h) and
 * what they share. Private to copy_recv*.c.
 *
 *   copy_recv.c           a session's life: accept or connect, the event
 *                         loop over its lanes, lanes joining, the end
 *   copy_recv_ring.c      the protocol on the wire: HELLO / WELCOME, the
 *                         ring's slots in sequence, RESULTS, every completion
 *   copy_recv_registry.c  the server's sessions by key (cp_reg): lanes
 *                         joining one, a reconnecting client replacing its
 *                         old one; pulls' sending sessions are in it too
 *
 * A session is one thread's; only its registry entry (s->reg) is shared,
 * under srv->reg_mu.
 */
#ifndef RK_COPY_RECV_INT_H
#define RK_COPY_RECV_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmakit/cm.h>
#include <rdmakit/conn.h>
#include <rdmakit/mr.h>
#include <rdmakit/msgbuf.h>
#include <rdmakit/pd.h>
#include <rdmakit/pool.h>
#include <rdmakit/ring.h>
#include <rdmakit/wait.h>

#include "copy_files.h"
#include "copy_proto.h"
#include "copy_recv.h"

#define RQ_DEPTH (CP_MAX_SLOTS + 8) /* a receive per slot written, and spares */
#define NSEND	 (CP_MAX_SLOTS + 4) /* RESULTS, WELCOME, ERROR buffers */
#define SQ_DEPTH (NSEND + 8)	    /* and the ring's credits (4 per lane at most) */

/* One connection of the session and its message buffers (from the session's pool). */
struct recv_lane {
	struct rk_conn *conn;
	struct rk_recv_set *rs; /* control messages in, and a receive per slot written (shared
				   with the ring) */
	struct rk_send_set *ss; /* RESULTS, WELCOME, ERROR out */
};

struct session {
	struct cp_server *srv;
	struct rk_cm_request *req;
	char peer[64];
	struct rk_pd *pd;   /* the session's alone: its QPs, ring and buffers */
	struct rk_wait *ws; /* every lane's CQ and CM channel, and reg.evfd */
	struct recv_lane lanes[CP_MAX_LANES];
	unsigned prep_lane;
	struct rk_pool *pool;	 /* the lanes' message buffers: local access, in pd */
	struct rk_ring_rx *ring; /* the slots, in pd: only this session's QPs reach them */
	struct cp_reg reg;	 /* the key, lanes joining, replacement; its evfd wakes the loop */
	int64_t pinned;		 /* bytes registered, in the registered_bytes gauge (rcv_pin) */
	uint32_t chunk;
	uint16_t nslots, flags;
	size_t stride;
	int hello_done;
	uint64_t progress_ns; /* when the idle period began (--idle) */
	struct cp_files fs;   /* the files: what the records do (copy_files.c) */
	uint8_t *msg;	      /* private copy of a slot's message (stride bytes) */
	char refused[256];    /* a pull: the server's ERROR, before its HELLO */
	uint16_t allow_flags; /* HELLO flags we accept (a pull: only what we asked for) */
	unsigned allow_lanes; /* HELLO lanes we accept (a pull: what we asked for) */
	/* Pulling: how to connect further lanes, and whether they are. */
	const struct rk_cm_connect_opts *pull_co;
	int lanes_made;
};

/* copy_recv.c: a line on stdout for the session (unless srv->quiet), "WHO: PEER: text". */
void rcv_log(const struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* rcv_pin - @n more bytes registered by @s (negative: released), for the metrics. */
void rcv_pin(struct session *s, int64_t n);

/* copy_recv_ring.c */
/* rk_cm accept / connect hook: post lane s->prep_lane's receives before the QP connects. */
int rcv_prepare(struct rk_conn *conn, void *arg);
/* Lane @l (1..) is connected: the ring takes it (before its completions are looked at). */
int rcv_lane_joined(struct session *s, unsigned l, struct rk_error *err);
/* SEND control message @msg (@len <= CP_MSG_MAX bytes, copied) on @lane. -ENOBUFS: none free. */
int rcv_send_msg(struct session *s, unsigned lane, const void *msg, size_t len,
		 struct rk_error *err);
/* Best effort: an ERROR (@code, @text) on lane 0 before the session ends. */
void rcv_send_error(struct session *s, uint16_t code, const char *text);
/*
 * Act on one completion of lane @lane: a slot (handled in sequence), the
 * HELLO, a SEND of ours done. 0, or a negative errno that ends the session
 * (-EPROTO: the peer broke the protocol; -EIO: a failed completion, @err).
 */
int rcv_handle_wc(struct session *s, unsigned lane, const struct ibv_wc *wc, struct rk_error *err);
/*
 * After a lane went down: handle what completed on every lane, skipping
 * flushed work (a flushed SEND of ours counts as done). 0, or what a
 * message that had arrived ends the session with (an ERROR: -ECONNREFUSED).
 */
int rcv_drain_lost(struct session *s, struct rk_error *err);
/* Some SEND of ours (a RESULTS, WELCOME, ERROR) has not completed yet. */
int rcv_sends_pending(const struct session *s);

#endif
