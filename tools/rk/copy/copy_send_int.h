/*
 * copy_send_int.h - the parts of one rk copy sending session (copy_send.h)
 * and what they share. Private to copy_send*.c.
 *
 *   copy_send.c       set-up: device, lanes, HELLO / WELCOME, a pull's PULL;
 *                     the session's end and its fate
 *   copy_send_lane.c  what the peer tells us (RESULTS: READY / DONE, ERROR),
 *                     waiting for it, and the lane threads that post slots
 *   copy_send_file.c  plan items into records: filling slots, reading and
 *                     hashing files, --resume proofs
 *
 * Locking (see copy_send.c): one mutex, s->mu, guards everything below
 * that more than one thread touches; the main thread holds it once the
 * lane threads run, except while it reads and hashes file data.
 */
#ifndef RK_COPY_SEND_INT_H
#define RK_COPY_SEND_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmakit/conn.h>
#include <rdmakit/device.h>
#include <rdmakit/mr.h>
#include <rdmakit/msgbuf.h>
#include <rdmakit/pool.h>
#include <rdmakit/ring.h>
#include <rdmakit/wait.h>

#include "copy_proto.h"
#include "copy_send.h"

#define RQ_DEPTH      (CP_MAX_SLOTS + 16) /* the server's RESULTS (its NSEND), credits, ERROR */
#define SQ_DEPTH      (2 * CP_MAX_SLOTS + 8)
#define HELLO_WRID    (1ull << 40)
#define WAIT_MS	      200
#define HASH_BUF      (1u << 20)
#define GONE_GRACE_NS 1000000000ull /* other lanes may still hold the last RESULTS */

/* A staging slot: free, being filled by the main thread, or posted until its write completed. */
enum { LS_FREE = 0, LS_FILL, LS_POSTED };

struct lslot {
	uint8_t state;
	uint16_t hlen;		  /* header block bytes, set when posted */
	uint32_t dlen;		  /* data bytes */
	struct rk_ring_tx_buf rb; /* its place in the ring: sequence, lane, immediate */
};

struct sender;

/* One connection of the session, and (once started) its thread. */
struct send_lane {
	struct sender *s;
	struct rk_conn *conn;
	struct rk_recv_set *rs; /* control messages in (from the sender's pool) */
	int evfd;		/* wakes the thread: slots queued, or stop */
	struct rk_wait *ws;	/* the lane's CQ, CM channel and evfd, once connected */
	int conn_src;		/* the CM channel's source in ws, -1 once gone */
	int gone;		/* the server disconnected this lane */
	int started;		/* the thread runs */
	pthread_t th;
	uint16_t q[CP_MAX_SLOTS]; /* slots to post, in order */
	unsigned qhead, qtail;
};

struct sender {
	const struct cp_send_opts *o;
	struct cp_plan *plan;
	struct rk_device *dev;
	struct send_lane lanes[CP_MAX_LANES];
	unsigned nlanes;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int threaded;	      /* lane threads run: the main thread holds mu */
	int stop;	      /* lane threads: finish */
	uint64_t next_seq;    /* slots reserved in the ring */
	uint64_t results_seq; /* RESULTS taken: they come in sequence, on lane 0 */
	uint64_t gone_ns;
	struct rk_ring_tx *ring; /* the server's slots: sequence, credits (once welcomed) */
	struct rk_mr *stage, *hello;
	struct rk_pool *pool; /* the lanes' receive buffers: local access */
	struct cp_welcome w;
	size_t stride;
	struct lslot slots[CP_MAX_SLOTS];
	int cur; /* slot being filled, or -1 */
	struct cp_slot_writer wr;
	uint32_t dlen;
	int welcomed;
	int fatal;	/* RK_EXIT_LOST / RK_EXIT_REFUSED once the session is over */
	int transport;	/* ... and it was the transport's doing (see cp_send_fate) */
	int refused;	/* lane 0's connect: nobody listening */
	int unanswered; /* lane 0's connect: no answer at all (no route, no reply in time) */
	char *why;
	size_t why_len;
	uint64_t last_ns;
	XXH3_state_t *st;
	uint8_t *hashbuf;
	const char *them; /* "server", or "client" when serving a pull */
	/* Serving a pull: the PULL as it came, and the options it sets. */
	int pulled, accept_used;
	uint64_t rate_ns, rate_moved, moved; /* serving a pull: the minimum rate (as --idle) */
	uint32_t pull_len;
	uint8_t pull_buf[CP_MSG_MAX];
	struct cp_send_opts own;
};

/* Slot @i of our staging memory: its header block, then its data block. */
static inline uint8_t *snd_slot_hdr(struct sender *s, int i)
{
	return (uint8_t *)rk_mr_addr(s->stage) + (size_t)i * s->stride;
}

static inline uint8_t *snd_slot_data(struct sender *s, int i)
{
	return snd_slot_hdr(s, i) + CP_HDR_SIZE;
}

/* copy_send.c: end the session with exit code @code and a message (the first cause wins). */
void snd_fatal(struct sender *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* ... RK_EXIT_LOST, and the transport's doing: a reconnect may cure it. */
void snd_fatal_transport(struct sender *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* copy_send_lane.c */
/* rk_cm connect / accept hook: post lane @arg's receives before the QP is connected. */
int snd_prepare(struct rk_conn *conn, void *arg);
/* The lane's connection is gone; @what says how, or NULL. Ends the session as a transport loss. */
void snd_lost(struct send_lane *l, const char *what);
/* Nothing outstanding: every item the peer owes an answer for has one, no slot in flight. */
int snd_all_done(const struct sender *s);
/*
 * The main thread waits up to @wait_ms for something to happen (0: only
 * look). Returns -1 once the session is over (s->fatal set).
 */
int snd_pump(struct sender *s, int wait_ms);
/* A thread per lane; from then on the main thread holds s->mu. -1 if one could not start. */
int snd_start_lanes(struct sender *s);
/* Stop and join the lane threads; the main thread lets go of s->mu. */
void snd_stop_lanes(struct sender *s);
/* Wake lane @l's thread: slots are queued for it, or it is to stop. */
void snd_wake(struct send_lane *l);
/* Once @l is connected: its wait set over the CQ, the CM channel and l->evfd. */
int snd_watch_lane(struct send_lane *l, struct rk_error *e);

/* copy_send_file.c: send every unsettled plan item, BYE, and wait for the answers. -1: over. */
int snd_run(struct sender *s);

#endif
